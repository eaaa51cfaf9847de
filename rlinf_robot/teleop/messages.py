"""The teleop wire format: what an env publishes to operators and what an operator answers.

Two msgpack messages (msgspec Structs, tagged by ``type``; nothing is unpickled):

- ``TeleopState``, env -> operators, once per decision: where the episode is (``episode``, ``step``),
  the state vector and its column layout (``fields``: name -> [start, stop]), the task, its action
  mode and width, and feedback on the operator's last command (``intervened``, ``rejected``).
- ``TeleopCommand``, operator -> env: ``engaged`` (the operator holds the arm) and one action row
  in the env's action units (``action``: ``ee_delta`` metres/radians per control tick, plus the
  gripper width where the task has a gripper). ``step``/``episode`` name the state it answers; a
  free-running device (keyboard, spacemouse) sends -1 and the env takes its newest command.

The env checks every command (``check_command``) before it acts on it; the safety filter on the
robot PC then checks the motion like any other. See docs/training.md, "Human interventions".
"""

from __future__ import annotations

import math

import msgspec

TELEOP_VERSION = 1


class TeleopState(msgspec.Struct, tag="teleop_state", tag_field="type", frozen=True):
    robot: str
    episode: int
    step: int
    task: str
    action_mode: str
    action_dim: int
    state: list[float]
    fields: dict[str, list[int]]
    instruction: str = ""
    intervened: bool = False  # the previous decision was the operator's
    rejected: str = ""  # why the operator's last command was refused ("" = it was not)
    stamp_ns: int = 0  # wall clock (time.time_ns) when published
    v: int = TELEOP_VERSION


class TeleopCommand(msgspec.Struct, tag="teleop_command", tag_field="type", frozen=True):
    engaged: bool
    action: list[float] = []
    operator: str = ""
    robot: str = ""  # "" = every robot listening
    episode: int = -1  # the state this answers; -1: a free-running device
    step: int = -1
    stamp_ns: int = 0
    v: int = TELEOP_VERSION


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(TeleopState | TeleopCommand)


def encode(msg: TeleopState | TeleopCommand) -> bytes:
    return _ENCODER.encode(msg)


def decode(data: bytes) -> TeleopState | TeleopCommand:
    """Bytes -> a message; ``ValueError`` naming what was wrong for anything else."""
    try:
        msg = _DECODER.decode(data)
    except msgspec.ValidationError as e:
        raise ValueError(f"not a teleop message: {e}") from None
    except msgspec.DecodeError as e:
        raise ValueError(f"not msgpack: {e}") from None
    if msg.v != TELEOP_VERSION:
        raise ValueError(f"teleop version {msg.v}, this side speaks {TELEOP_VERSION}")
    return msg


def check_command(cmd: TeleopCommand, low: list[float], high: list[float]) -> str:
    """Why ``cmd``'s action cannot be executed ("" when it can): one row of the env's action width,
    finite, inside the action space [low, high] (an out-of-range row is refused, not clipped: an
    operator must know the arm did not do what was sent)."""
    if len(cmd.action) != len(low):
        return f"action has {len(cmd.action)} values, the env takes {len(low)}"
    for i, (a, lo, hi) in enumerate(zip(cmd.action, low, high, strict=True)):
        if not math.isfinite(a):
            return f"action[{i}] is {a}"
        if not lo <= a <= hi:
            return f"action[{i}] = {a:.4g} outside [{lo:.4g}, {hi:.4g}]"
    return ""
