"""Deadman timing with an injected clock, and the e-stop latch semantics."""

from __future__ import annotations

import threading

import pytest

from rlinf_robot.errors import Latched
from rlinf_robot.safety import EStop, Watchdog


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_watchdog_starts_expired_and_fires_after_timeout():
    clock = FakeClock()
    wd = Watchdog(100, clock=clock)
    assert wd.expired()  # nothing moves before a first command
    wd.feed()
    clock.t += 0.099
    assert not wd.expired()
    clock.t += 0.002
    assert wd.expired() and wd.trips == 1
    assert wd.expired() and wd.trips == 1  # one trip per quiet period
    wd.feed()
    clock.t += 0.2
    assert wd.expired() and wd.trips == 2


def test_watchdog_command_freshness():
    clock = FakeClock()
    wd = Watchdog(50, clock=clock)
    assert wd.is_fresh(clock.t - 0.01)
    assert not wd.is_fresh(clock.t - 0.06)  # stale
    assert not wd.is_fresh(clock.t + 1.0)  # from the future: clock mismatch, refuse


def test_watchdog_real_clock_and_validation():
    with pytest.raises(ValueError):
        Watchdog(0)
    wd = Watchdog(20)
    wd.feed()
    assert not wd.expired()
    threading.Event().wait(0.05)
    assert wd.expired()


def test_estop_latches_until_explicit_reset():
    e = EStop()
    e.guard()
    e.trigger("operator pressed stop")
    assert e.latched and e.count == 1 and e.generation == 1
    with pytest.raises(Latched, match="operator"):
        e.guard()
    e.trigger("again")
    assert e.count == 1 and e.generation == 2  # still one latch episode
    e.reset()
    assert not e.latched
    e.guard()
