"""Delta chunks are taken from the observation they were computed from.

A policy that outputs deltas means "from the state I saw". Added to wherever the arm is when each
step runs, a delta also counts the motion that happened while the observation travelled and the
policy computed (100-200 ms on a busy link): a proportional controller that is deadbeat in the
sim, where observation and arm agree, overshoots on the arm and, with more than a step of delay,
oscillates (seen: a 10 Hz reach test diverged by 0.6 m on a CPU-throttled robot PC). So step
``k`` of a delta chunk computed from observation ``o`` targets

    o.state (+) d_0 (+) d_1 (+) ... (+) d_k        ((+): add joints / translate and rotate the TCP)

each ``d_j`` held to the per-tick limits, as the sim applies them. Steps skipped because their slot
had passed are still folded in: the target is where the plan says the arm should be by now. That
absolute target then passes the safety filter against the arm's *current* state like any other
command (per-tick step, joint limits, workspace), so an arm that lags its plan catches up at the
allowed speed. With perfect tracking this equals the sim's "measured + delta" at every step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlinf_robot.protocol import Observation
from rlinf_robot.safety import ArmAction, Rejection, RobotState, SafetyFilter

#: The absolute mode each delta mode adds up to.
ABSOLUTE_OF = {"joint_delta": "joint_position", "ee_delta": "ee_target"}


def observed_state(obs: Observation) -> RobotState:
    """The arm as observation ``obs`` showed it to the policy."""
    return RobotState(
        joint_pos=np.array(obs.joint_pos[:7], dtype=np.float64),
        ee_pose=np.array(obs.ee_pose, dtype=np.float64),
        gripper_width=float(obs.gripper_width),
    )


@dataclass
class Anchor:
    """Where a delta chunk's plan has got to: the observed state plus the steps folded in so far."""

    state: RobotState
    folded: int = -1  # the last chunk step added to ``state``

    def target(
        self, mode: str, actions: np.ndarray, index: int, width: int, gripper: float | None, rules: SafetyFilter
    ) -> ArmAction | Rejection:
        """The absolute command for step ``index`` of a ``mode`` chunk (``actions[H, D]``)."""
        for j in range(self.folded + 1, index + 1):
            step = rules.resolve(ArmAction(mode, actions[j, :width]), self.state)
            if isinstance(step, Rejection):
                return step
            self.state = _moved(self.state, step.mode, step.target)
            self.folded = j
        absolute = ABSOLUTE_OF[mode]
        values = self.state.joint_pos if absolute == "joint_position" else self.state.ee_pose
        return ArmAction(absolute, np.array(values), gripper)


def _moved(state: RobotState, mode: str, target: np.ndarray) -> RobotState:
    if mode == "joint_position":  # the TCP follows from the joints (the filter computes it when absent)
        return RobotState(joint_pos=np.array(target), ee_pose=None, gripper_width=state.gripper_width)
    return RobotState(joint_pos=state.joint_pos, ee_pose=np.array(target), gripper_width=state.gripper_width)
