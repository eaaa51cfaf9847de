"""``DirectBackend``: the bridge server on an arm driver in the same process, without ROS.

For a robot PC that does not run ROS, and for testing the bridge on a real driver without a ROS
graph. It is ``bridge_node`` with the topics taken out: the same ``StreamBackend`` (latest sample
with a max age, the target republished while current, ``run_command`` answering once a state report
says what the command left behind), fed by the arm driver's own listener instead of
``joint_states`` / ``ee_pose`` / ``/diagnostics``, and emptying into the driver's ``submit``,
``hold``, ``stop``, ``home``, ``reset`` and ``recover`` instead of ``joint_command`` /
``ee_command`` and services. So there is one arm driver (``FrankaArm``, franky behind
``FrankyLink``) and one bridge path, whichever way the robot PC runs.

Like ``franka_node``'s services, ``hold`` and ``stop`` do not wait for the arm: ``stop`` latches
at once in the caller's thread; ``hold`` drops the goal and refuses commands issued before it at
once, and brakes in the driver's loop between two ticks.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from rlinf_robot.bridge.stream_backend import CommandSinks, StreamBackend
from rlinf_robot.robot.loop import PeriodicLoop
from rlinf_robot.safety import ArmAction

log = logging.getLogger(__name__)


class DirectBackend(StreamBackend):
    """``arm``: a connected driver with ``FrankaArm``'s command surface (``submit``, ``hold``,
    ``stop``, ``home``, ``reset``, ``recover``, ``add_listener``). It is activated here (commands
    are refused until then) and held and left connected by ``close``: the caller owns the link."""

    def __init__(
        self,
        arm,
        control_rate_hz: float = 50.0,
        state_max_age_s: float = 0.1,
        target_hold_s: float = 5.0,
        instruction: str = "",
    ):
        super().__init__(
            CommandSinks(self._joint_command, self._ee_command, self._call, self._stop, self._hold),
            cameras=(),
            state_max_age_s=state_max_age_s,
            target_hold_s=target_hold_s,
            instruction=instruction,
        )
        self.arm = arm
        self._commands = {"home": arm.home, "reset": arm.reset, "recover": arm.recover}
        arm.add_listener(self._on_observation)
        arm.activate()
        self._keepalive = PeriodicLoop(control_rate_hz, self.keepalive, name="direct-keepalive")
        self._keepalive.start()

    def close(self) -> None:
        """Stop republishing and hold the arm (it stays connected)."""
        self._keepalive.stop()
        self.hold()

    # -- the driver's state in (its control loop calls this every tick)
    def _on_observation(self, obs) -> None:
        wall_ns = int(obs.wall * 1e9)
        self.on_arm(obs.q, obs.dq, obs.ee_pose, obs.gripper_width, wall_ns)
        self.on_arm_state(obs.state.value, wall_ns)

    # -- commands out (stamped now, as bridge_node stamps the messages it publishes)
    def _joint_command(self, q: np.ndarray, gripper: float | None) -> None:
        self.arm.submit(ArmAction("joint_position", q, gripper), time.time())

    def _ee_command(self, pose: np.ndarray) -> None:
        self.arm.submit(ArmAction("ee_target", pose), time.time())

    def _call(self, name: str) -> tuple[bool, str]:
        return self._commands[name]()

    def _stop(self) -> None:
        self.arm.stop("bridge stop")

    def _hold(self) -> None:
        self.arm.hold("bridge hold", wait=False)
