"""Scripted experts for the MuJoCo tasks, reading only ``obs["state"]`` (ee_delta actions).

They prove each task is solvable and its success predicate honest (tests/sim/test_learning.py), give
demonstrations for RLPD-style demo mixing, and pose the arm for the README pictures. Each is a
stateless function of the observation, so it works on any batch of envs at any point of an episode.

Both object experts finish in a state that lasts, so they succeed whether an episode ends on success
(``terminate_on_success=True``, the default) or runs to its time limit and is scored at the end:
push lifts off once the block is on the target (pushing on overshoots it), lift holds the block just
above the success height without turning the hand (lifting it to 25 cm while following the block's
yaw let it slip and tumble out of the grasp within the 8 s: 13-27 % success at the time limit).
"""

from __future__ import annotations

import functools

import numpy as np

from rlinf_robot.envs.tasks.lift import GRASP_HEIGHT
from rlinf_robot.envs.tasks.push import HALF as PUSH_HALF
from rlinf_robot.envs.tasks.push import PUSH_HEIGHT
from rlinf_robot.robot.franka.model import GRIPPER_MAX_WIDTH
from rlinf_robot.rotations import rotvec_between

_STEP = 0.02  # m per tick (the safety filter's cap at <= 25 Hz)
_GAIN = 1.5  # proportional gain on the position error (per tick)
_PUSH_DONE = 0.015  # m: push stops with the block this close to the goal (success: 0.03)
_LIFT_OVER = 0.03  # m: lift holds the block this far above the goal height


def _down(yaw: np.ndarray) -> np.ndarray:
    """TCP quaternion pointing down with the fingers' closing axis rotated by ``yaw`` about z."""
    return np.stack([np.zeros_like(yaw), np.cos(yaw / 2), np.sin(yaw / 2), np.zeros_like(yaw)], axis=1)


def _move(
    tcp: np.ndarray, target: np.ndarray, quat: np.ndarray, yaw: np.ndarray | None = None, gain: float = _GAIN
) -> np.ndarray:
    dp = np.clip(gain * (target - tcp), -_STEP, _STEP)
    yaw = np.zeros(len(tcp)) if yaw is None else yaw
    rot = np.clip(rotvec_between(quat, _down(yaw)), -0.075, 0.075)
    return np.concatenate([dp, rot], axis=1)


def _fields(env, state: np.ndarray) -> dict[str, np.ndarray]:
    return {k: state[:, s].astype(np.float64) for k, s in env.obs_spec.state_slices().items()}


def _goal(env, f: dict[str, np.ndarray]) -> np.ndarray:
    """The goal in the base frame: its own column, or (a goal seen through a camera, ``goal_in_<camera>``)
    mapped back from where that camera stands in this env's scene."""
    if "goal_pos" in f:
        return f["goal_pos"]
    key = next(k for k in f if k.startswith("goal_in_"))
    pose = env.camera_poses[key[len("goal_in_") :]]
    return f[key] @ pose[:3, :3].T + pose[:3, 3]


def reach(env, obs, gain: float = _GAIN) -> np.ndarray:
    f = _fields(env, obs["state"])
    return _move(f["tcp_pos"], _goal(env, f), f["tcp_quat"], gain=gain).astype(np.float32)


def push(env, obs, gain: float = _GAIN) -> np.ndarray:
    """Go above the spot behind the block, descend, push it towards the goal, lift off on the goal."""
    f = _fields(env, obs["state"])
    tcp, obj, goal = f["tcp_pos"], f["obj_pos"], f["goal_pos"]
    direction = goal[:, :2] - obj[:, :2]
    dist = np.linalg.norm(direction, axis=1, keepdims=True)
    direction /= np.maximum(dist, 1e-6)
    behind = obj[:, :2] - direction * (PUSH_HALF[0] + 0.025)
    off = np.linalg.norm(tcp[:, :2] - behind, axis=1)
    aligned = off < 0.02
    low = tcp[:, 2] < PUSH_HEIGHT + 0.02
    target = np.empty_like(tcp)
    # Not behind the block: travel high (above the block), then come down behind it.
    high = np.where(off > 0.03, 0.13, PUSH_HEIGHT)
    target[:, :2] = behind
    target[:, 2] = np.where(aligned, PUSH_HEIGHT, high)
    pushing = aligned & low
    target[pushing, :2] = behind[pushing] + direction[pushing] * 0.04
    # On the target: rise straight up and leave the block there (without turning the hand).
    there = dist[:, 0] < _PUSH_DONE
    target[there] = tcp[there]
    target[there, 2] = 0.10
    yaw = np.arctan2(direction[:, 1], direction[:, 0])  # fingers across the push direction
    act = _move(tcp, target, f["tcp_quat"], yaw, gain)
    act[there, 3:] = 0.0
    return act.astype(np.float32)


def lift(env, obs, gain: float = _GAIN) -> np.ndarray:
    """Hover over the block, descend open, close, lift once the fingers hold it, and hold it there."""
    f = _fields(env, obs["state"])
    tcp, obj, width = f["tcp_pos"], f["obj_pos"], f["gripper_width"][:, 0]
    goal_z = obj[:, 2] + f["goal_minus_obj"][:, 2]
    q = f["obj_quat"]
    obj_yaw = 2.0 * np.arctan2(q[:, 3], q[:, 0])  # the block stays upright: yaw only
    yaw = (obj_yaw + np.pi / 4) % (np.pi / 2) - np.pi / 4  # block is square: nearest 90 deg
    above = np.linalg.norm(tcp[:, :2] - obj[:, :2], axis=1) < 0.01
    at_height = tcp[:, 2] < GRASP_HEIGHT + 0.004
    holding = (width > 0.032) & (width < 0.05) & (np.abs(tcp[:, 2] - obj[:, 2] - 0.02) < 0.03)
    target = np.concatenate([obj[:, :2], np.full((len(tcp), 1), 0.15)], axis=1)
    target[above, 2] = GRASP_HEIGHT
    closing = above & at_height
    grip = np.where(closing | holding, 0.0, GRIPPER_MAX_WIDTH)
    target[closing & ~holding] = tcp[closing & ~holding]  # hold still while the fingers close
    target[holding, :2] = obj[holding, :2]
    target[holding, 2] = goal_z[holding] + _LIFT_OVER
    act = _move(tcp, target, f["tcp_quat"], yaw, gain)
    act[holding, 3:] = 0.0  # a held block's yaw follows the hand: chasing it twists it out
    return np.concatenate([act, grip[:, None]], axis=1).astype(np.float32)


EXPERTS = {"mujoco/fr3-reach": reach, "mujoco/fr3-push": push, "mujoco/fr3-lift": lift}


def multitask_expert(env):
    """The expert of a ``MultiTaskEnv`` of MuJoCo tasks: ``expert(obs) -> actions[N, A]``.

    Each part's own expert acts on the part's full observation (``env.part_obs``, with the task's
    columns); a task whose expert has no gripper column (reach, push) holds the fingers at their
    measured width, since one multi-task policy has one action layout."""
    experts = [expert_for(f"mujoco/{part.task.name}") for part in env.parts]
    width = env.action_spec.shape[0]

    def act(_obs) -> np.ndarray:
        out = []
        for part, expert, obs in zip(env.parts, experts, env.part_obs, strict=True):
            a = expert(part, obs)
            if a.shape[1] < width:
                held = _fields(part, obs["state"])["gripper_width"].astype(np.float32)
                a = np.concatenate([a, held], axis=1)
            out.append(a)
        return np.concatenate(out)

    return act


def expert_for(name: str, gain: float | None = None):
    """The scripted expert of env ``name`` (ee_delta action mode). ``gain``: its proportional gain
    per tick instead of the default 1.5, which suits servos that track a target within a tick; an
    arm that lags its target by several ticks oscillates around the goal at that gain (each row
    adds to a target already ahead of the measured position) and needs a lower one."""
    try:
        fn = EXPERTS[name]
    except KeyError:
        raise KeyError(f"no scripted expert for {name!r}; have {sorted(EXPERTS)}") from None
    return fn if gain is None else functools.partial(fn, gain=float(gain))
