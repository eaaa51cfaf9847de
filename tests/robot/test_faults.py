"""FaultStateMachine: the transition table, the fault window that latches, and the counters."""

from __future__ import annotations

import pytest

from rlinf_robot.robot.franka.faults import TRANSITIONS, ArmState, FaultStateMachine

S = ArmState


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@pytest.fixture
def fsm():
    clock = Clock()
    m = FaultStateMachine(max_faults=3, window_s=10.0, clock=clock)
    m.clock = clock
    m.fire("connected", "test")
    m.fire("activate", "test")
    return m


def test_nominal_path_idle_active_reflex_recovering_active(fsm):
    assert fsm.state is S.ACTIVE
    assert fsm.fire("reflex", "joint_motion_generator_velocity_discontinuity") is S.REFLEX
    assert fsm.fire("recovering") is S.RECOVERING
    assert fsm.fire("recovered", "ok") is S.ACTIVE
    snap = fsm.snapshot()
    assert snap["ACTIVE->REFLEX"] == 1 and snap["RECOVERING->ACTIVE"] == 1 and snap["event_reflex"] == 1
    assert [t.dst for t in fsm.history][-3:] == [S.REFLEX, S.RECOVERING, S.ACTIVE]
    assert fsm.history[-3].cause == "joint_motion_generator_velocity_discontinuity"


def test_deactivated_arm_recovers_to_idle(fsm):
    fsm.fire("reflex")
    fsm.fire("deactivate")  # not applicable while faulted, but remembers the wish
    fsm.fire("recovering")
    assert fsm.fire("recovered") is S.IDLE


def test_n_faults_within_the_window_latch(fsm):
    for _ in range(2):
        fsm.fire("reflex")
        fsm.fire("recovering")
        fsm.fire("recovered")
        fsm.clock.t += 1.0
    assert fsm.fire("reflex", "third") is S.LATCHED
    assert "latched" in fsm.last_cause
    # nothing but reset leaves LATCHED
    for event in ("recovering", "recovered", "activate", "connected"):
        assert fsm.fire(event) is S.LATCHED
    assert fsm.fire("reset", "operator") is S.ACTIVE
    assert fsm.snapshot()["recent_faults"] == 0


def test_faults_outside_the_window_do_not_latch(fsm):
    for _ in range(5):
        fsm.fire("reflex")
        fsm.fire("recovering")
        fsm.fire("recovered")
        fsm.clock.t += 6.0
    assert fsm.state is S.ACTIVE


def test_failed_recoveries_count_as_faults(fsm):
    fsm.fire("reflex")
    fsm.fire("recovering")
    assert fsm.fire("recovery_failed") is S.REFLEX
    fsm.fire("recovering")
    assert fsm.fire("recovery_failed") is S.LATCHED


def test_estop_from_anywhere_and_only_reset_clears_it(fsm):
    for start in (S.ACTIVE, S.REFLEX):
        if start is S.REFLEX:
            fsm.fire("reflex")
        assert fsm.fire("estop", "operator") is S.ESTOP
        assert fsm.fire("recovered") is S.ESTOP
        assert fsm.fire("reset") is S.ACTIVE


def test_link_loss_and_reconnect_resume_but_never_clear_a_latch(fsm):
    assert fsm.fire("link_lost", "net") is S.DISCONNECTED
    assert fsm.fire("connected") is S.ACTIVE
    fsm.fire("estop")
    fsm.fire("link_lost")
    assert fsm.state is S.ESTOP
    fsm.fire("connected")
    assert fsm.state is S.ESTOP
    fsm.fire("link_lost")
    assert fsm.fire("reset") is S.DISCONNECTED  # no link: reset cannot make it ACTIVE
    assert fsm.fire("connected") is S.ACTIVE


def test_unknown_event_is_an_error_and_table_is_complete():
    m = FaultStateMachine()
    with pytest.raises(ValueError, match="known"):
        m.fire("explode")
    assert set(TRANSITIONS["estop"]) == set(ArmState)
