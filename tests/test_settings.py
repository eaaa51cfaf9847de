"""The one settings mechanism: rules on dataclass fields, ``check`` and ``build``."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rlinf_robot.errors import ConfigError
from rlinf_robot.settings import build, check, flag, integer, number, numbers, text


@dataclass(frozen=True)
class _Knobs:
    rate_hz: float = number(100.0, 0.0, 1000.0, lo_open=True)
    count: int = integer(3, 1)
    on: bool = flag(True)
    mode: str = text("a", ("a", "b"))
    pose: tuple = numbers((0.0, 0.0, 0.0), 3)
    limit: float | None = number(None, 0.0, optional=True)

    def __post_init__(self):
        check(self, "knobs")


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"rate_hz": 0.0}, r"knobs: rate_hz must be a number in \(0.0, 1000.0\], got 0.0"),
        ({"rate_hz": float("nan")}, "rate_hz must be a number"),
        ({"rate_hz": True}, "rate_hz must be a number"),
        ({"rate_hz": "fast"}, "rate_hz must be a number"),
        ({"count": 2.5}, "count must be an integer >= 1, got 2.5"),
        ({"count": 0}, "count must be an integer >= 1, got 0"),
        ({"on": 1}, "on must be true or false, got 1"),
        ({"mode": "c"}, r"mode must be one of \['a', 'b'\], got 'c'"),
        ({"pose": (0.0, 1.0)}, "pose must be 3 finite numbers"),
        ({"pose": (0.0, float("inf"), 1.0)}, "pose must be 3 finite numbers"),
        ({"limit": -1.0}, r"limit must be a number >= 0.0 \(or null\), got -1.0"),
        (
            {"rate": 1.0},
            r"knobs: unknown key\(s\) \['rate'\]; known: \['count', 'limit', 'mode', 'on', 'pose', 'rate_hz'\]",
        ),
    ],
)
def test_a_bad_value_names_the_source_the_key_and_the_rule(raw, message):
    with pytest.raises(ConfigError, match=message):
        build(_Knobs, raw, "knobs")


def test_good_values_pass_and_ints_are_numbers():
    k = build(_Knobs, {"rate_hz": 500, "limit": None, "pose": [1, 2, 3], "mode": "b"}, "knobs")
    assert k.rate_hz == 500 and k.limit is None and k.mode == "b"


def test_every_settings_class_uses_it():
    """The project's settings dataclasses declare their rules on their fields (one mechanism)."""
    from dataclasses import fields

    from rlinf_robot.bridge.config import ClientConfig, ServerConfig
    from rlinf_robot.orchestrator.ppo import PPOSettings
    from rlinf_robot.orchestrator.sac import SACSettings
    from rlinf_robot.robot.franka.config import FrankaConfig
    from sim.isaaclab.config import IsaacLabConfig
    from sim.maniskill.config import ManiSkillConfig
    from sim.mujoco.config import MujocoConfig
    from sim.robotwin.config import RoboTwinConfig

    for cls in (
        ClientConfig,
        ServerConfig,
        PPOSettings,
        SACSettings,
        FrankaConfig,
        IsaacLabConfig,
        ManiSkillConfig,
        MujocoConfig,
        RoboTwinConfig,
    ):
        assert sum("rule" in f.metadata for f in fields(cls)) >= 3, cls
