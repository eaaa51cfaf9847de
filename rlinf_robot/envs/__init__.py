"""The environment contract (spec.py) and the envs that are not simulators (the real arm)."""

from rlinf_robot.envs.spec import ACTION_MODES, ROBOT_STATE_FIELDS, ActionSpec, BatchedEnv, Obs, ObsSpec

__all__ = ["ACTION_MODES", "ROBOT_STATE_FIELDS", "ActionSpec", "BatchedEnv", "Obs", "ObsSpec"]
