"""The fault matrix's travel bound grows with the speed the arm had before a hold: a hold stops
the arm from that speed. Checked on observations shaped like a capped run's (2026-12-06: the arm at
~100 mm/s before a deadman hold, 20 mm to stop) and a quiet one's."""

from __future__ import annotations

import pytest

from tests.faults.link_matrix import (
    STOP_S,
    TRAVEL_BOUND_MM,
    Row,
    check_hold_and_travel,
    set_travel,
    speed_before,
    travel_bound_mm,
)
from tests.faults.netlab import Fault

MS = 1_000_000


def _obs(points: list[tuple[float, float]]) -> list[dict]:
    """Observations at (ms, y mm) with the TCP moving along y."""
    return [{"kind": "obs", "t": int(t * MS), "tcp": [0.5, y / 1e3, 0.5]} for t, y in points]


def test_the_speed_before_a_hold_is_measured_over_the_last_150_ms():
    obs = _obs([(-400, 0.0), (-150, 10.0), (-100, 15.0), (-50, 20.0), (0, 25.0), (50, 27.0)])
    assert speed_before(obs, 0) == pytest.approx(100.0)  # 15 mm in 150 ms
    assert speed_before(obs[:1], 0) == 0.0  # one observation: no speed


def test_a_fast_arm_may_travel_further_and_a_slow_one_may_not():
    fast = _obs([(-150, 0.0), (-100, 5.0), (-50, 10.0), (0, 15.0)])  # 100 mm/s
    assert travel_bound_mm(fast, 0) == pytest.approx(TRAVEL_BOUND_MM + STOP_S * 100.0)
    row = Row("partition 500ms", hold_ms=150.0)
    set_travel(row, [(20.0, travel_bound_mm(fast, 0))])
    check_hold_and_travel(row, Fault("partition", 0.5))
    assert row.ok, row.problems

    still = _obs([(-150, 0.0), (-100, 0.0), (-50, 0.0), (0, 0.0)])
    row = Row("partition 500ms", hold_ms=150.0)
    set_travel(row, [(2.0, travel_bound_mm(fast, 0)), (20.0, travel_bound_mm(still, 0))])
    check_hold_and_travel(row, Fault("partition", 0.5))
    assert row.travel_mm == 20.0 and row.travel_worst == (20.0, TRAVEL_BOUND_MM)
    assert not row.ok and "travel 20.0 mm (bound 15.0" in row.problems[0]


def test_each_hold_is_judged_against_its_own_bound():
    """A fast hold's long stop beside a slow hold's short one: both within their own bounds, so the
    row meets them (the largest travel is not held against the slow hold's bound)."""
    fast = _obs([(-150, 0.0), (-100, 5.0), (-50, 10.0), (0, 15.0)])  # 100 mm/s: bound 40 mm
    still = _obs([(-150, 0.0), (-100, 0.0), (-50, 0.0), (0, 0.0)])  # bound 15 mm
    row = Row("partition 500ms", hold_ms=150.0)
    set_travel(row, [(30.0, travel_bound_mm(fast, 0)), (14.0, travel_bound_mm(still, 0))])
    check_hold_and_travel(row, Fault("partition", 0.5))
    assert row.ok, row.problems
    assert row.travel_mm == 30.0 and row.travel_worst == (14.0, TRAVEL_BOUND_MM)
