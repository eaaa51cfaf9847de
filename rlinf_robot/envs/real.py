"""``RealRobotEnv``: the batched env contract (``rlinf_robot.envs.spec``) over bridge clients.

One ``BridgeClient`` per robot (N = number of robots, usually 1). A step sends each robot an action
chunk (one action for ``step``, H for ``chunk_step``) computed from the observation the env last
returned, then waits for the robot's first observation after that chunk finished. The state vector
is laid out like the simulators' (``ROBOT_STATE_FIELDS`` then the task's features) and rewards come
from a registered real task (``real_tasks``), so a policy trained in sim runs here unchanged.

``reset`` homes the arm and waits until it has settled. Drops and safety rejections of a chunk, and
a chunk refused while the arm recovers from a reflex, are reported in ``info["rejections"]`` (the
arm held instead); losing the lease, an e-stop or a latched arm raises.
A stale camera is never silently reused: the env waits for a fresh observation, then raises.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from rlinf_robot.bridge.client import BridgeClient
from rlinf_robot.bridge.config import ClientConfig
from rlinf_robot.bridge.errors import BridgeTimeout, CommandRefused
from rlinf_robot.envs.real_tasks import make_real_task
from rlinf_robot.envs.spec import ROBOT_STATE_FIELDS, BatchedEnv, Obs, ObsSpec
from rlinf_robot.errors import ConfigError, Latched, LinkLost
from rlinf_robot.protocol import Observation

DOWN = np.array([0.0, 1.0, 0.0, 0.0])  # TCP quaternion sign reference, as in the sims


@dataclass(frozen=True)
class RealEnvConfig:
    action_mode: str = "ee_delta"
    gripper: bool = False
    control_hz: float = 10.0
    task: str = "reach"
    task_args: dict = field(default_factory=dict)
    max_episode_steps: int = 50
    terminate_on_success: bool = True
    auto_reset: bool = True
    cameras: dict = field(default_factory=dict)  # name -> (H, W, 3) expected from the robot
    align: bool = False  # latency-aware chunks (for streaming); a stepping env starts them on arrival
    step_timeout_s: float = 5.0
    reset_timeout_s: float = 60.0
    settle_joint_vel: float = 0.02  # rad/s: the arm counts as settled below this on every joint
    seed: int | None = None

    def __post_init__(self):
        src = "real env config"
        if not 0 < self.control_hz <= 1000:
            raise ConfigError(f"{src}: control_hz must be in (0, 1000], got {self.control_hz}")
        if self.max_episode_steps < 1:
            raise ConfigError(f"{src}: max_episode_steps must be >= 1, got {self.max_episode_steps}")
        for key in ("step_timeout_s", "reset_timeout_s", "settle_joint_vel"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"{src}: {key} must be positive, got {getattr(self, key)}")
        object.__setattr__(self, "cameras", {k: tuple(v) for k, v in self.cameras.items()})

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RealEnvConfig:
        unknown = set(raw) - {f.name for f in fields(cls)}
        if unknown:
            raise ConfigError(f"real env config: unknown key(s) {sorted(unknown)}")
        return cls(**raw)


class Settled:
    """Observation predicate: true once every joint moved slower than ``speed`` (rad/s) over at
    least ``window_s``, judged from joint *positions* between capture stamps. Not from the velocity
    field: franka-sim's joint 7 velocity chatters at +-0.08 rad/s while the joint stands still
    (1-2 mrad), which made resets wait forever."""

    def __init__(self, speed: float, window_s: float = 0.25):
        self.speed = float(speed)
        self.window_ns = int(window_s * 1e9)
        self._ref: tuple[int, np.ndarray] | None = None

    def __call__(self, o: Observation) -> bool:
        q = np.asarray(o.joint_pos[:7], dtype=np.float64)
        if self._ref is None or o.stamp_ns < self._ref[0]:
            self._ref = (o.stamp_ns, q)
            return False
        dt_ns = o.stamp_ns - self._ref[0]
        if dt_ns < self.window_ns:
            return False
        moved = float(np.max(np.abs(q - self._ref[1])))
        self._ref = (o.stamp_ns, q)
        return moved / (dt_ns / 1e9) < self.speed


def robot_state(o: Observation) -> np.ndarray:
    """joint_pos(7), joint_vel(7), tcp_pos(3), tcp_quat(4, signed towards gripper-down), width(1)."""
    q = np.asarray(o.ee_pose[3:], dtype=np.float64)
    q = q / np.linalg.norm(q)
    if q @ DOWN < 0:
        q = -q
    return np.concatenate([o.joint_pos[:7], o.joint_vel[:7], o.ee_pose[:3], q, [o.gripper_width]])


class RealRobotEnv(BatchedEnv):
    def __init__(
        self,
        clients: BridgeClient | list[BridgeClient],
        config: RealEnvConfig | None = None,
        own_clients: bool = False,
    ):
        from sim.actions import check_actions, safe_action_spec  # the one source of action bounds

        self._check_actions = check_actions
        self.cfg = config or RealEnvConfig()
        self.clients = [clients] if isinstance(clients, BridgeClient) else list(clients)
        self.num_envs = len(self.clients)
        self._own = own_clients
        self.task = make_real_task(self.cfg.task, **self.cfg.task_args)
        self.action_spec = safe_action_spec(self.cfg.action_mode, self.cfg.gripper, self.cfg.control_hz)
        state_fields = ROBOT_STATE_FIELDS + tuple(self.task.features)
        self.obs_spec = ObsSpec(
            state_shape=(sum(w for _, w in state_fields),),
            images=dict(self.cfg.cameras),
            state_fields=state_fields,
        )
        self._rng = np.random.default_rng(self.cfg.seed)
        self._obs: list[Observation | None] = [None] * self.num_envs
        self.steps = np.zeros(self.num_envs, np.int64)
        self.episode_return = np.zeros(self.num_envs, np.float32)
        for c in self.clients:
            c.subscribe()
            c.acquire_lease()

    @classmethod
    def connect(
        cls, endpoints: list[str], client: ClientConfig | None = None, config: RealEnvConfig | None = None
    ) -> RealRobotEnv:
        base = asdict(client or ClientConfig())
        clients = [
            BridgeClient(ClientConfig(**{**base, "endpoint": e, "client_id": ""})).connect()
            for e in endpoints
        ]
        return cls(clients, config, own_clients=True)

    # ------------------------------------------------------------------ contract
    def reset(self, seed: int | None = None) -> Obs:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        for i in range(self.num_envs):
            self._reset_one(i)
        self.task.reset(self.num_envs, self._rng)
        return self._batch_obs()

    def step(self, actions: np.ndarray):
        a = self._check_actions(actions, self.action_spec, self.num_envs)
        return self._execute(self.action_spec.clip(a)[:, None, :])

    def chunk_step(self, actions: np.ndarray):
        """Execute ``actions[N, H, A]`` as one chunk per robot at ``control_hz``; the reward is
        evaluated once, on the observation after the chunk."""
        a = np.asarray(actions, dtype=np.float32)
        if a.ndim != 3 or a.shape[0] != self.num_envs or a.shape[2:] != self.action_spec.shape:
            raise ValueError(
                f"chunk_step needs actions [N={self.num_envs}, H, {self.action_spec.shape[0]}], got {a.shape}"
            )
        if not np.all(np.isfinite(a)):
            raise ValueError("actions contain NaN or inf; nothing was applied")
        return self._execute(self.action_spec.clip(a))

    def close(self) -> None:
        for c in self.clients:
            try:
                c.release_lease()
            except (LinkLost, CommandRefused):
                pass
            if self._own:
                c.close()

    def status(self) -> list:
        """Each robot's bridge status (state, counters, latency percentiles)."""
        return [c.status() for c in self.clients]

    # ------------------------------------------------------------------ internals
    def _fresh(self, o: Observation) -> bool:
        return not o.stale and all(cam in o.images for cam in self.cfg.cameras)

    def _await(self, i: int, predicate, timeout: float, what: str) -> Observation:
        try:
            return self.clients[i].observe(
                timeout=timeout, predicate=lambda o: predicate(o) and self._fresh(o)
            )
        except BridgeTimeout:
            latest = self.clients[i].latest
            if latest is not None and not self._fresh(latest):
                missing = sorted(set(self.cfg.cameras) - set(latest.images))
                raise LinkLost(
                    f"robot {i}: stale sensors {latest.stale or missing} while waiting for {what}"
                ) from None
            raise

    def _reset_one(self, i: int) -> None:
        c = self.clients[i]
        c.wait_link(self.cfg.step_timeout_s)
        self._wait_recovered(i)
        c.command("home", timeout=self.cfg.reset_timeout_s)
        self._obs[i] = self._await(
            i, Settled(self.cfg.settle_joint_vel), self.cfg.reset_timeout_s, "the arm to settle"
        )
        self.steps[i] = 0
        self.episode_return[i] = 0.0

    def _wait_recovered(self, i: int) -> None:
        """An arm that is recovering from a reflex (by itself) is waited for; a latched one raises."""
        deadline = time.monotonic() + self.cfg.reset_timeout_s
        while True:
            state = self.clients[i].status().state
            if state in ("LATCHED", "ESTOP"):
                raise Latched(f"robot {i} is {state}: an operator must reset it")
            if state not in ("REFLEX", "RECOVERING"):
                return
            if time.monotonic() > deadline:
                raise BridgeTimeout(f"robot {i} still {state} after {self.cfg.reset_timeout_s:g} s")
            self.clients[i].observe(timeout=self.cfg.step_timeout_s)  # wait one observation period

    def _execute(self, a: np.ndarray):
        n, horizon = self.num_envs, a.shape[1]
        if any(o is None for o in self._obs):
            raise RuntimeError("call reset() before step()")
        for c in self.clients:  # a brief heartbeat gap is not a reason to fail the step
            c.wait_link(self.cfg.step_timeout_s)
        t0 = time.monotonic()
        seqs = [
            c.send_chunk(
                a[i],
                self.cfg.action_mode,
                self.cfg.control_hz,
                obs=self._obs[i],
                gripper=self.cfg.gripper,
                align=self.cfg.align,
            )
            for i, c in enumerate(self.clients)
        ]
        timeout = self.cfg.step_timeout_s + horizon / self.cfg.control_hz
        rejections, step_ms = [], np.zeros(n)
        for i, (c, seq) in enumerate(zip(self.clients, seqs, strict=True)):
            self._obs[i] = self._await(
                i,
                lambda o, c=c, seq=seq: (
                    (o.chunk_seq >= seq and not o.chunk_active) or any(e.ref_seq == seq for e in c.errors)
                ),
                timeout,
                f"chunk {seq}",
            )
            errs = c.take_errors(ref_seq=seq)
            for e in errs:  # losing control is not a step result: the caller must know
                if e.code == "latched" or (e.code == "fault" and "LATCHED" in e.message):
                    raise Latched(e.message)
                if e.code == "refused":
                    raise CommandRefused(e.code, e.message)
            rejections.append([{"code": e.code, "message": e.message} for e in errs])
            step_ms[i] = (time.monotonic() - t0) * 1e3
        tcp = np.stack([o.ee_pose[:3] for o in self._obs])
        reward, success = self.task.evaluate(tcp)
        self.steps += horizon
        self.episode_return += reward
        terminated = success & self.cfg.terminate_on_success
        truncated = (self.steps >= self.cfg.max_episode_steps) & ~terminated
        done = terminated | truncated
        info: dict[str, Any] = {
            "success": success.copy(),
            "done": done.copy(),
            "rejections": rejections,
            "latency_ms": {"step": step_ms, "obs_age": np.array([_age_ms(o) for o in self._obs])},
        }
        if done.any():
            info["final_state"] = self._state()
            info["episode_return"] = np.where(done, self.episode_return, 0.0).astype(np.float32)
            info["episode_length"] = np.where(done, self.steps, 0)
            if self.cfg.auto_reset:
                for i in np.flatnonzero(done):
                    self._reset_one(int(i))
                    self.task.reset(n, self._rng, index=int(i))
        return self._batch_obs(), reward, terminated, truncated, info

    def _state(self) -> np.ndarray:
        robot = np.stack([robot_state(o) for o in self._obs])
        return np.concatenate([robot, self.task.observe(robot[:, 14:17])], axis=1).astype(np.float32)

    def _batch_obs(self) -> Obs:
        images = {}
        for cam, shape in self.cfg.cameras.items():
            frames = [o.images[cam] for o in self._obs]
            for i, f in enumerate(frames):
                if f.shape != shape:
                    raise ValueError(f"robot {i} camera {cam!r} sends {f.shape}, the env expects {shape}")
            images[cam] = np.stack(frames)
        instruction = [o.instruction or self.task.instruction for o in self._obs]
        return {"state": self._state(), "images": images, "instruction": instruction}


def _age_ms(o: Observation) -> float:
    """How old the observation was when the learner got it (capture -> receipt, wall clocks)."""
    a, b = o.hops.get("obs_captured"), o.hops.get("obs_received")
    return float("nan") if a is None or b is None else (b - a) / 1e6
