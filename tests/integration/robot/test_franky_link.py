"""``FrankyLink`` (franky's only boundary) against franka-sim: a recovery never goes out while a
motion still runs. libfranka's error recovery sent beside franky's running motion thread left that
thread wedged (``join_motion`` never returned) and once kept franka_node in RECOVERING for good."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rlinf_robot.robot.franka.link import FrankyLink
from rlinf_robot.robot.franka.sim_server import FrankaSimServer

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_recovery_stops_the_running_motion_first_and_the_arm_moves_again_afterwards():
    with FrankaSimServer(gripper=False):
        link = FrankyLink("127.0.0.1", dynamics_factor=0.05)
        link.connect()
        try:
            q0 = link.read().q
            far = q0 + np.array([0.6, 0, 0, 0, 0, 0, 0])
            assert link.move_joints(far)  # a slow motion that holds at its target for good
            time.sleep(0.3)
            robot = link._robot
            assert robot.is_in_control

            # bounded even if it were to block: a wedged call fails the test, not the session
            result: dict = {}
            t = threading.Thread(target=lambda: result.update(ok=link.recover()), daemon=True)
            started = time.monotonic()
            t.start()
            t.join(30)
            assert not t.is_alive(), "recover() blocked"
            took = time.monotonic() - started
            # a slow machine may need a second try (the stop not over within the wait): never a hang
            deadline = time.monotonic() + 30
            while not result.get("ok") and time.monotonic() < deadline:
                result["ok"] = link.recover()
                time.sleep(0.05)
            assert result["ok"], "no recovery within 30 s of tries"
            assert not robot.is_in_control
            stopped_at = link.read().q
            assert 0 < stopped_at[0] - q0[0] < 0.6 - 1e-3, (q0[0], stopped_at[0])  # stopped on the way

            # the arm takes the next motion and reaches it: nothing was left wedged
            link.set_dynamics_factor(0.2)
            assert link.move_joints(q0)
            deadline = time.monotonic() + 60
            while np.abs(link.read().q - q0).max() > 1e-3 and time.monotonic() < deadline:
                link.poll()  # raises if the motion failed
                time.sleep(0.05)
            err = np.abs(link.read().q - q0).max()
            assert err <= 1e-3, f"the arm did not get back: {err:.4f} rad off (recover took {took:.2f} s)"
        finally:
            link.close()
