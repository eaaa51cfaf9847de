"""Message schemas of protocol version 1.

Every message is a msgspec Struct tagged by ``type`` and carries ``v`` (the protocol version).
Array fields hold numpy arrays in Python; on the wire they are ``ArrayRef`` headers pointing at raw
frames (see codec.py). ``__post_init__`` checks the structure (shapes, dtypes, names) so a bad
message fails at decode time with the field named; whether the *values* are safe to execute is the
safety layer's job, not the protocol's.

Time stamps are integer nanoseconds. ``stamp_ns`` and ``first_action_time_ns`` are on the robot's
monotonic clock (the learner echoes what it saw in an Observation); ``hops`` maps a hop name to the
wall-clock (``time.time_ns``) instant the message passed it, for latency accounting.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import numpy as np

PROTOCOL_VERSION = 1

#: How an action chunk's columns are meant (shared with the franka node and the sim envs).
CONTROL_MODES = ("joint_position", "joint_delta", "ee_target", "ee_delta")
#: Base action width per mode, without the optional trailing gripper column.
CONTROL_MODE_WIDTH = {"joint_position": 7, "joint_delta": 7, "ee_target": 7, "ee_delta": 6}
COMMAND_NAMES = (
    "reset",  # clear the e-stop latch and fault latch (explicit operator action)
    "recover",  # recover from a reflex error
    "stop",  # latching e-stop
    "home",  # move to the home pose
    "acquire_lease",  # ask for the single control lease
    "release_lease",
    "subscribe",  # start receiving observations
    "unsubscribe",
    "status",  # ask for a Status reply
)
STATUS_STATES = ("IDLE", "ACTIVE", "HOLD", "LINK_LOST", "ESTOP", "REFLEX", "RECOVERING", "LATCHED")
#: Columns of ``Observation.chunk_trace``: the arm one control period after each row was applied.
TRACE_COLUMNS = (("joint_pos", 7), ("ee_pose", 7), ("gripper_width", 1))
TRACE_WIDTH = sum(w for _, w in TRACE_COLUMNS)

Scalar = bool | int | float | str
_UINT8 = np.dtype(np.uint8)


def _require(cond: bool, message: str | Callable[[], str]) -> None:
    """Raise ValueError(message) unless ``cond``. Pass a lambda when the message formats arrays:
    formatting a dtype costs microseconds, and this runs for every decoded message."""
    if not cond:
        raise ValueError(message() if callable(message) else message)


def _float_vector(name: str, a: np.ndarray, length: int | None = None) -> None:
    if (
        type(a) is np.ndarray
        and a.ndim == 1
        and a.dtype.kind == "f"
        and (length is None or a.shape[0] == length)
    ):
        return  # the common case, checked in one line: this runs for every observation
    _require(isinstance(a, np.ndarray), f"{name} must be an array")
    _require(a.ndim == 1, lambda: f"{name} must be 1-D, got shape {a.shape}")
    _require(a.dtype.kind == "f", lambda: f"{name} must be float, got {a.dtype}")
    if length is not None:
        _require(a.shape[0] == length, lambda: f"{name} must have {length} entries, got {a.shape[0]}")


class _Base(msgspec.Struct, kw_only=True, tag_field="type"):
    v: int = PROTOCOL_VERSION


class Observation(_Base, kw_only=True, tag="observation"):
    """Robot state and camera frames at one instant of the robot clock."""

    seq: int
    stamp_ns: int
    joint_pos: np.ndarray
    joint_vel: np.ndarray
    ee_pose: np.ndarray  # [7]: x, y, z (m, base frame), qw, qx, qy, qz
    gripper_width: float = 0.0
    images: dict[str, np.ndarray] = {}
    instruction: str = ""
    stale: list[str] = []  # sensors whose latest sample was older than its max age
    hops: dict[str, int] = {}
    chunk_seq: int = -1  # newest action chunk the server accepted when this was captured (-1: none)
    chunk_active: bool = False  # whether that chunk was still executing at capture time
    #: What the server did with chunk ``chunk_seq`` so far: rows, applied, skipped, and rows it had
    #: to change (scaled: larger than one tick allows; clamped: joint limit, workspace box or
    #: gripper range; lead_clamped: 1 when the arm lagged its last target by more than the
    #: allowed lead, so the chunk started nearer the arm; cut: 1 when it was cancelled before its
    #: last row - a deadman or other hold, a stop, a lease change or a home/reset/recover).
    chunk_report: dict[str, int] = {}
    #: Once chunk ``chunk_seq`` has ended: the arm one control period after each of its rows
    #: [rows, 15] (``TRACE_COLUMNS``), so a learner scores every row as a simulator does.
    chunk_trace: np.ndarray | None = None
    objects: dict[str, np.ndarray] = {}  # tracked object poses [7] (x y z qw qx qy qz, base frame)

    def __post_init__(self):
        jp, jv, ee = self.joint_pos, self.joint_vel, self.ee_pose
        if not (  # the common case in one expression (this runs for every observation)
            type(jp) is np.ndarray
            and type(jv) is np.ndarray
            and type(ee) is np.ndarray
            and jp.ndim == 1
            and jv.shape == jp.shape
            and ee.shape == (7,)
            and jp.dtype.kind == jv.dtype.kind == ee.dtype.kind == "f"
        ):
            _float_vector("joint_pos", jp)
            _float_vector("joint_vel", jv, jp.shape[0])
            _float_vector("ee_pose", ee, 7)
        for cam, img in self.images.items():
            if (
                type(img) is np.ndarray
                and img.dtype is _UINT8
                and img.ndim == 3
                and img.shape[2] in (1, 3, 4)
            ):
                continue
            _require(isinstance(img, np.ndarray), f"images[{cam}] must be an array")
            _require(
                img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] in (1, 3, 4),
                lambda cam=cam, img=img: (
                    f"images[{cam}] must be uint8 [H, W, C], got {img.dtype} {img.shape}"
                ),
            )
        t = self.chunk_trace
        if t is not None:
            _require(isinstance(t, np.ndarray), "chunk_trace must be an array")
            _require(
                t.ndim == 2 and t.shape[1] == TRACE_WIDTH and t.dtype.kind == "f",
                lambda: f"chunk_trace must be float [rows, {TRACE_WIDTH}], got {t.dtype} {t.shape}",
            )
        for name, pose in self.objects.items():
            _float_vector(f"objects[{name}]", pose, 7)


class ActionChunk(_Base, kw_only=True, tag="action_chunk"):
    """H actions to execute at ``rate_hz``, the first at ``first_action_time_ns``.

    ``actions[h]`` has the mode's base width plus one trailing gripper-width column when ``gripper``
    is true. ``obs_seq`` is the observation it was computed from, which lets the server skip the steps
    that already elapsed when a chunk replaces the previous one.
    """

    seq: int
    obs_seq: int
    policy_version: int = 0
    control_mode: str
    rate_hz: float
    actions: np.ndarray
    gripper: bool = False
    first_action_time_ns: int = 0
    hops: dict[str, int] = {}
    align: bool = False  # actions[0] belongs to the capture time of observation obs_seq

    def __post_init__(self):
        a = self.actions
        width = CONTROL_MODE_WIDTH.get(self.control_mode, -10) + int(self.gripper)
        if (  # the common case, checked in one expression: this runs for every chunk
            0.0 < self.rate_hz <= 2000.0
            and type(a) is np.ndarray
            and a.ndim == 2
            and a.shape[0] >= 1
            and a.shape[1] == width
            and a.dtype.char in "fd"
        ):
            return
        _require(self.control_mode in CONTROL_MODES, f"control_mode must be one of {CONTROL_MODES}")
        _require(0.0 < self.rate_hz <= 2000.0, "rate_hz must be in (0, 2000]")
        _require(isinstance(a, np.ndarray), "actions must be an array")
        _require(a.ndim == 2 and a.shape[0] >= 1, lambda: f"actions must be [H>=1, D], got {a.shape}")
        _require(a.dtype in (np.float32, np.float64), lambda: f"actions must be float32/64, got {a.dtype}")
        _require(a.shape[1] == width, f"actions must have {width} columns for {self.control_mode}")

    @property
    def horizon(self) -> int:
        return int(self.actions.shape[0])


class Heartbeat(_Base, kw_only=True, tag="heartbeat"):
    seq: int
    stamp_ns: int
    sender: str = ""


class Command(_Base, kw_only=True, tag="command"):
    seq: int
    name: str
    args: dict[str, Scalar] = {}

    def __post_init__(self):
        _require(self.name in COMMAND_NAMES, f"name must be one of {COMMAND_NAMES}")


class Status(_Base, kw_only=True, tag="status"):
    """The server's state, lease holder, decision counters and latency percentiles (ms)."""

    seq: int
    stamp_ns: int
    state: str
    lease_holder: str = ""
    counters: dict[str, int] = {}
    latency_ms: dict[str, dict[str, float]] = {}
    message: str = ""
    ref_seq: int = -1  # seq of the Command this answers, -1 when unsolicited

    def __post_init__(self):
        _require(self.state in STATUS_STATES, f"state must be one of {STATUS_STATES}")


class Error(_Base, kw_only=True, tag="error"):
    """Why a request was refused. ``field`` names the offending header field when known."""

    code: str
    message: str
    field: str = ""
    ref_seq: int = -1


Message = Observation | ActionChunk | Heartbeat | Command | Status | Error
MESSAGE_TYPES = (Observation, ActionChunk, Heartbeat, Command, Status, Error)
