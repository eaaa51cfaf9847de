"""The environment contract shared by every simulator and the real arm.

Batched and numpy in / numpy out, so a policy trained in sim runs on the arm unchanged:

- ``reset(seed=None) -> obs``
- ``step(actions[N, A]) -> obs, reward[N], terminated[N], truncated[N], info``
- ``chunk_step(actions[N, H, A])`` executes an action chunk (H steps at the control rate; the
  episode rules are ``BatchedEnv``'s, the same for every simulator and the arm)
- ``obs = {"state": float32[N, S], "images": {cam: uint8[N, H, W, 3]}, "instruction": list[str]}``

Action modes are shared with the franka node: ``joint_delta`` (7) and ``ee_delta`` (6: dxyz +
rotation vector), each optionally followed by one gripper-width column.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Per-mode base width of an action, without the optional gripper column.
ACTION_MODES: dict[str, int] = {"joint_delta": 7, "ee_delta": 6}

#: The robot part of ``obs["state"]``, first in every env (sim and real) so a policy reads the arm
#: the same way everywhere: joint positions (rad), joint velocities (rad/s), TCP position (m, base
#: frame), TCP orientation (quaternion w x y z, sign chosen so q . (0, 1, 0, 0) >= 0, i.e. continuous
#: around the gripper-down pose), finger opening (m). Task columns (goal, object pose) follow.
ROBOT_STATE_FIELDS: tuple[tuple[str, int], ...] = (
    ("joint_pos", 7),
    ("joint_vel", 7),
    ("tcp_pos", 3),
    ("tcp_quat", 4),
    ("gripper_width", 1),
)


@dataclass(frozen=True)
class ActionSpec:
    """What one env's action means. ``low``/``high`` are float32 arrays of ``shape``."""

    mode: str
    shape: tuple[int, ...]
    low: np.ndarray
    high: np.ndarray
    control_hz: float
    gripper: bool = False

    def __post_init__(self):
        if self.mode not in ACTION_MODES:
            raise ValueError(f"action mode {self.mode!r} not in {sorted(ACTION_MODES)}")
        width = ACTION_MODES[self.mode] + int(self.gripper)
        if self.shape != (width,):
            raise ValueError(f"{self.mode} (gripper={self.gripper}) needs shape ({width},), got {self.shape}")
        for name in ("low", "high"):
            arr = getattr(self, name)
            if arr.shape != self.shape or arr.dtype != np.float32:
                raise ValueError(f"{name} must be float32 of shape {self.shape}")
        if not self.control_hz > 0:
            raise ValueError("control_hz must be positive")

    def clip(self, actions: np.ndarray) -> np.ndarray:
        return np.clip(actions, self.low, self.high).astype(np.float32, copy=False)


@dataclass(frozen=True)
class ObsSpec:
    """Shapes (per env, without the batch dimension) and dtypes of each observation key."""

    state_shape: tuple[int, ...]
    images: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # cam -> (H, W, 3)
    #: Optional names and widths of the state columns, in order (e.g. ROBOT_STATE_FIELDS + task's).
    state_fields: tuple[tuple[str, int], ...] = ()

    def __post_init__(self):
        if self.state_fields:
            width = sum(w for _, w in self.state_fields)
            if self.state_shape != (width,):
                raise ValueError(f"state_fields add up to ({width},), state_shape is {self.state_shape}")

    def state_slices(self) -> dict[str, slice]:
        """Column slice of each named state field (empty when the env does not name them)."""
        out, start = {}, 0
        for name, width in self.state_fields:
            out[name] = slice(start, start + width)
            start += width
        return out

    def shapes(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        out: dict[str, tuple[tuple[int, ...], np.dtype]] = {"state": (self.state_shape, np.dtype(np.float32))}
        for cam, hwc in self.images.items():
            out[f"images/{cam}"] = (hwc, np.dtype(np.uint8))
        return out


Obs = dict[str, Any]


@dataclass
class RowResults:
    """What executing a chunk did, per env ``[N]`` and row ``[N, H]``. Rows an env did not execute
    are zero / False. ``terminated`` / ``truncated`` are the simulator's *own* episode ends (a failure
    condition, Isaac Lab's time-out); success and the time limit are judged by ``BatchedEnv``."""

    reward: np.ndarray  # [N, H] float32, reward of the state after each row
    success: np.ndarray  # [N, H] bool, success of the state after each row
    terminated: np.ndarray  # [N, H] bool
    truncated: np.ndarray  # [N, H] bool
    executed: np.ndarray  # [N] int, rows executed
    final_state: np.ndarray  # [N, S] state after each env's last executed row
    extra: dict = field(default_factory=dict)  # merged into ``info``

    @classmethod
    def empty(cls, n: int, horizon: int, state_dim: int) -> RowResults:
        return cls(
            np.zeros((n, horizon), np.float32),
            np.zeros((n, horizon), bool),
            np.zeros((n, horizon), bool),
            np.zeros((n, horizon), bool),
            np.zeros(n, np.int64),
            np.zeros((n, state_dim), np.float32),
        )


class BatchedEnv(abc.ABC):
    """Base class of sim and real envs: the episode bookkeeping of ``step`` / ``chunk_step``.

    A chunk ``actions[N, H, A]`` is executed row by row at the control rate, and the episode rules
    are the same for every simulator and the arm:

    * an env stops at the **time limit** exactly: the rows after its last step are never executed
      (on the arm: never sent), and neither are the rows after the simulator's own end of an
      episode (a failure condition);
    * **success** (with ``terminate_on_success``) ends an episode at the end of the chunk in which
      it holds. The arm cannot stop a chunk on a condition that only the learner evaluates, and
      the sims do the same, so sim and arm episodes end, and score, alike;
    * the reward of a chunk is the sum of its executed rows' rewards, each of the state one control
      period after that row was applied; ``info["success"]`` is the success of the last state;
    * an env whose episode ended is reset after the chunk (``info["final_state"]`` holds the state
      that ended it), so a finished env stands still while the others finish their rows.

    ``step(actions[N, A])`` is ``chunk_step`` of one row. Subclasses implement ``_reset_all``,
    ``_reset_envs``, ``_observe`` and either ``_run_rows`` (the arm: whole chunks) or
    ``_advance`` + ``_state_now`` (the sims: one row of every env at a time; an env outside
    ``active`` must not move).
    """

    num_envs: int
    action_spec: ActionSpec
    obs_spec: ObsSpec
    max_episode_steps: int = 2**62
    terminate_on_success: bool = False
    steps: np.ndarray
    episode_return: np.ndarray

    # ------------------------------------------------------------------ contract
    def reset(self, seed: int | None = None) -> Obs:
        """Start a new episode in every env; ``seed`` makes the episode sequence reproducible."""
        self._reset_all(seed)
        self.steps = np.zeros(self.num_envs, np.int64)
        self.episode_return = np.zeros(self.num_envs, np.float32)
        return self._observe()

    def step(self, actions: np.ndarray) -> tuple[Obs, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Execute ``actions[N, A]`` (one control period)."""
        a = np.asarray(actions, dtype=np.float32)
        want = (self.num_envs, *self.action_spec.shape)
        if a.shape != want:
            raise ValueError(f"actions must have shape {want}, got {a.shape}")
        return self.chunk_step(a[:, None])

    def chunk_step(self, actions: np.ndarray) -> tuple[Obs, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Execute ``actions[N, H, A]`` under the rules in the class docstring."""
        a = np.asarray(actions, dtype=np.float32)
        n = self.num_envs
        if a.ndim != 3 or a.shape[0] != n or a.shape[2:] != self.action_spec.shape or a.shape[1] < 1:
            raise ValueError(
                f"chunk_step needs actions [N={n}, H>=1, {self.action_spec.shape[0]}], got {a.shape}"
            )
        if not np.all(np.isfinite(a)):
            raise ValueError("actions contain NaN or inf; nothing was applied")
        if not hasattr(self, "steps"):
            raise RuntimeError("call reset() before step()")
        budget = np.maximum(self.max_episode_steps - self.steps, 1)
        res = self._run_rows(a, budget)
        ran = np.arange(a.shape[1])[None, :] < res.executed[:, None]
        reward = np.where(ran, res.reward, 0.0).sum(axis=1).astype(np.float32)
        last = np.maximum(res.executed - 1, 0)
        success = res.success[np.arange(n), last] & (res.executed > 0)
        self.steps += res.executed
        self.episode_return += reward
        terminated = (res.terminated & ran).any(axis=1) | (success & self.terminate_on_success)
        truncated = ~terminated & ((res.truncated & ran).any(axis=1) | (self.steps >= self.max_episode_steps))
        done = terminated | truncated
        info: dict[str, Any] = {
            "success": success,
            "done": done.copy(),
            "executed": res.executed,
            **res.extra,
        }
        if done.any():
            idx = np.flatnonzero(done)
            info["final_state"] = res.final_state
            info["episode_return"] = np.where(done, self.episode_return, 0.0).astype(np.float32)
            info["episode_length"] = np.where(done, self.steps, 0)
            self._reset_envs(idx)
            self.steps[idx] = 0
            self.episode_return[idx] = 0.0
        return self._observe(), reward, terminated, truncated, info

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release simulator / network resources."""

    # ------------------------------------------------------------------ subclass hooks
    @abc.abstractmethod
    def _reset_all(self, seed: int | None) -> None:
        """Start a new episode in every env."""

    @abc.abstractmethod
    def _reset_envs(self, idx: np.ndarray) -> None:
        """Start a new episode in envs ``idx`` (their previous one just ended)."""

    @abc.abstractmethod
    def _observe(self) -> Obs:
        """The observation of every env now."""

    def _run_rows(self, actions: np.ndarray, budget: np.ndarray) -> RowResults:
        """Run at most ``budget[i]`` rows of env i's chunk; an env stops at its simulator's own
        end of an episode. The default steps every env one row at a time with ``_advance``."""
        n, horizon = actions.shape[:2]
        out = RowResults.empty(n, horizon, int(np.prod(self.obs_spec.state_shape)))
        active = budget > 0
        ended_state: dict[int, np.ndarray] = {}
        for h in range(horizon):
            active &= h < budget
            if not active.any():
                break
            r, s, te, tr = self._advance(actions[:, h], active.copy(), h)
            out.reward[active, h] = r[active]
            out.success[active, h] = s[active]
            out.terminated[active, h] = te[active]
            out.truncated[active, h] = tr[active]
            out.executed += active
            ended = active & (te | tr)
            if ended.any():  # the simulator may reset such an env itself: keep the state now
                now = self._state_now()
                for i in np.flatnonzero(ended):
                    ended_state[int(i)] = now[i].copy()
            active &= ~ended
        out.final_state = self._state_now().astype(np.float32, copy=True)
        for env, s in ended_state.items():
            out.final_state[env] = s
        return out

    def _advance(
        self, actions: np.ndarray, active: np.ndarray, row: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Row ``row`` of the chunk: envs in ``active`` execute ``actions[i]``, the others stay put.
        Returns (reward [N], success [N], terminated [N], truncated [N]) of the state after it."""
        raise NotImplementedError(f"{type(self).__name__} implements neither _run_rows nor _advance")

    def _state_now(self) -> np.ndarray:
        """The state vector of every env now (unnoised), [N, S]."""
        raise NotImplementedError
