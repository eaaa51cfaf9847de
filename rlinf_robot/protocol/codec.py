"""Multipart encoding: a msgpack header plus one raw frame per array.

Why frames and not msgpack bin fields: the receiver can wrap each frame in a read-only numpy array
without copying (``np.frombuffer`` on the ZeroMQ frame's buffer), which is what keeps two 224x224
images under a millisecond round trip. Only plain little-endian numeric dtypes are allowed; nothing
is ever unpickled.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from rlinf_robot.protocol.errors import ProtocolError
from rlinf_robot.protocol.messages import MESSAGE_TYPES, PROTOCOL_VERSION, Message

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_HEADER_BYTES = 64 * 1024
MAX_NDIM = 8
#: dtype strings accepted on the wire (numpy's ``dtype.str``), little-endian only.
ALLOWED_DTYPES = frozenset(
    {"|b1", "|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<f4", "<f8"}
)


class ArrayRef(msgspec.Struct, array_like=False):
    """How an array appears in the header: dtype string, shape and the index of its frame."""

    dtype: str
    shape: list[int]
    frame: int


class _Envelope(msgspec.Struct):
    """Just enough of a header to check the version before trusting the rest of the schema."""

    type: str
    v: int


_local = threading.local()
_DTYPES = {name: np.dtype(name) for name in ALLOWED_DTYPES}
MESSAGE_BY_TAG = {cls.__struct_config__.tag: cls for cls in MESSAGE_TYPES}


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        arr, name = obj, obj.dtype.str
        if name not in ALLOWED_DTYPES or not arr.flags.c_contiguous:  # (rare: the sender's arrays are)
            arr = _wire_array(arr)
            name = arr.dtype.str
        frames: list = _local.frames
        # the array itself is the frame (a C-contiguous buffer; ZeroMQ and bytes() read it as is)
        frames.append(arr if arr.size else b"")
        return {"dtype": name, "shape": arr.shape, "frame": len(frames) - 1}
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot encode {type(obj).__name__}")


def _wire_array(arr: np.ndarray) -> np.ndarray:
    """``arr`` little-endian and C-contiguous, or TypeError when its dtype cannot be sent."""
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and np.little_endian is False):
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    if not arr.flags.c_contiguous:
        arr = arr.copy(order="C")  # (np.ascontiguousarray would turn 0-d into 1-d)
    if arr.dtype.str not in ALLOWED_DTYPES:
        raise TypeError(f"dtype {arr.dtype} cannot be sent; allowed: {sorted(ALLOWED_DTYPES)}")
    return arr


def _array_ref(obj: Any) -> tuple[str, list, int]:
    """``(dtype, shape, frame)`` of an array reference that is not a plain three-field map of the
    right types, checked by ``msgspec.convert`` for a precise error (it costs more than the rest of
    decoding an array, so well-formed references do not come here)."""
    try:
        ref = msgspec.convert(obj, ArrayRef)
    except msgspec.ValidationError as e:
        raise ValueError(f"not an array reference ({e})") from None
    return ref.dtype, ref.shape, ref.frame


def _dec_hook(typ: type, obj: Any) -> Any:
    """One array from its header reference and its frame (zero-copy, read-only).

    This runs for every array of every message, so the common case (a well-formed reference) is
    one flat pass: its three fields, the dtype from one dict, the byte count over the shape, one
    ``np.ndarray`` over the frame's buffer. Anything unusual goes through ``_array_ref``."""
    if typ is not np.ndarray:
        raise TypeError(f"unsupported type {typ}")
    if type(obj) is dict and len(obj) == 3:
        name, shape, index = obj.get("dtype"), obj.get("shape"), obj.get("frame")
        if type(name) is not str or type(shape) is not list or type(index) is not int:
            name, shape, index = _array_ref(obj)
    else:
        name, shape, index = _array_ref(obj)
    dtype = _DTYPES.get(name)
    if dtype is None:
        raise ValueError(f"dtype {name!r} not allowed")
    if len(shape) > MAX_NDIM:
        raise ValueError(f"bad shape {shape}")
    expected = dtype.itemsize
    for d in shape:
        if type(d) is not int or d < 0:
            raise ValueError(f"bad shape {shape}")
        expected *= d
    local = _local
    frames: list = local.frames
    used: set = local.used
    if index in used or not 1 <= index < len(frames):
        if index in used:
            raise ValueError(f"frame {index} referenced twice")
        raise ValueError(f"frame index {index} out of range (message has {len(frames)} frames)")
    used.add(index)
    buf = frames[index]
    if buf.nbytes != expected:
        raise ValueError(f"frame {index} has {buf.nbytes} bytes, shape/dtype need {expected}")
    return np.ndarray(shape, dtype, buf)


_encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
_decoder = msgspec.msgpack.Decoder(Message, dec_hook=_dec_hook)
_envelope_decoder = msgspec.msgpack.Decoder(_Envelope)


def encode(msg: Message) -> list:
    """Encode a message into frames: ``[header, *array_buffers]`` (buffers are not copied)."""
    _local.frames = [b""]
    try:
        header = _encoder.encode(msg)
        frames = _local.frames
    finally:
        _local.frames = None
    frames[0] = header
    return frames


def _as_buffer(frame: Any) -> memoryview:
    try:
        view = memoryview(frame)  # zmq.Frame, bytes and numpy arrays all export a buffer
    except TypeError as e:
        raise ProtocolError(f"frame of type {type(frame).__name__} is not a buffer") from e
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def decode(frames: Sequence[Any], max_bytes: int = DEFAULT_MAX_BYTES) -> Message:
    """Decode frames into a message; any problem raises ``ProtocolError`` naming the field (and,
    when the header is a map with an integer ``seq``, carrying it as ``ref_seq``)."""
    if not frames:
        raise ProtocolError("empty message", code="malformed")
    views, total = [], 0
    for f in frames:  # one flat loop: this runs for every message, two images included
        try:
            view = memoryview(f)  # zmq.Frame, bytes and numpy arrays all export a buffer
        except TypeError as e:
            raise ProtocolError(f"frame of type {type(f).__name__} is not a buffer") from e
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        views.append(view)
        total += view.nbytes
    if views[0].nbytes > MAX_HEADER_BYTES:  # never parse an oversized header, not even for its seq
        raise ProtocolError(f"header of {views[0].nbytes} bytes exceeds {MAX_HEADER_BYTES}", code="too_large")
    try:
        return _decode(views, total, max_bytes)
    except ProtocolError as e:
        e.ref_seq = _peek_seq(views[0])
        raise


def _decode(views: list[memoryview], total: int, max_bytes: int) -> Message:
    if total > max_bytes:
        raise ProtocolError(f"message of {total} bytes exceeds the {max_bytes}-byte limit", code="too_large")
    # The whole schema first (the common case: one pass over the header); only a message that
    # fails it, or one of another version, is read again for its envelope, so that a newer
    # version is refused as such and not as whatever its schema would fail on.
    _local.frames, _local.used = views, set()
    try:
        msg = _decoder.decode(views[0])
        unused = len(views) - 1 - len(_local.used)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        _check_envelope(views[0])
        if not isinstance(e, msgspec.ValidationError):  # (a ValidationError is a DecodeError too)
            raise ProtocolError(f"bad header: {e}") from None
        kind = peek_type(views[0])
        raise ProtocolError(f"invalid {kind}: {e}", field=_field_of(e, kind)) from None
    finally:
        _local.frames = _local.used = None
    if msg.v != PROTOCOL_VERSION:
        _check_envelope(views[0])
    if unused:
        raise ProtocolError(f"{unused} frame(s) not referenced by the header", code="malformed")
    return msg


def _check_envelope(header: memoryview) -> None:
    """Raise the error a header's envelope (``type`` and ``v``) earns, if any."""
    try:
        env = _envelope_decoder.decode(header)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ProtocolError(f"bad header: {e}", field=_field_of(e)) from None
    if env.v != PROTOCOL_VERSION:
        raise ProtocolError(
            f"protocol version {env.v} not supported (this side speaks {PROTOCOL_VERSION})",
            field="$.v",
            code="version",
        )


def peek_type(header: Any) -> str | None:
    """The ``type`` of a message from its header frame alone (None if it has none), without
    decoding the rest: lets a receiver skip an observation that a newer one already replaces."""
    try:
        return _envelope_decoder.decode(_as_buffer(header)).type
    except (msgspec.DecodeError, msgspec.ValidationError, ProtocolError):
        return None


class _SeqOnly(msgspec.Struct):
    seq: int


_seq_decoder = msgspec.msgpack.Decoder(_SeqOnly)


def _peek_seq(header: memoryview) -> int:
    """The header's ``seq`` if it is a map holding an integer one, else -1 (only on errors)."""
    try:
        return _seq_decoder.decode(header).seq
    except (msgspec.DecodeError, msgspec.ValidationError):
        return -1


def _field_of(e: Exception, msg_type: str | None = None) -> str | None:
    """Name the offending field: msgspec's `- at `$.path`` suffix, else the field a schema check
    (``__post_init__``) names first in its message."""
    text = str(e)
    marker = "- at `"
    path = text.rsplit(marker, 1)[1].rstrip("`") if marker in text else None
    if path is not None and path.startswith("key` in `"):  # a map key of the wrong type: the map is to blame
        path = path[len("key` in `") :]
    missing = "missing required field `"
    if missing in text:  # msgspec names the field but not as a path: `$.obs_seq`
        return f"{path or '$'}.{text.split(missing, 1)[1].split('`', 1)[0]}"
    if path is not None:
        return path
    cls = MESSAGE_BY_TAG.get(msg_type or "")
    first = text.split(" ", 1)[0].split("[", 1)[0]
    if cls is not None and first in cls.__struct_fields__:
        return f"$.{first}"
    return None
