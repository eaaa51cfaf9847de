"""``RealRobotEnv``: the batched env contract (``rlinf_robot.envs.spec``) over bridge clients.

One ``BridgeClient`` per robot (N = number of robots, usually 1). A chunk (one row for ``step``, H
for ``chunk_step``) is sent to each robot computed from the observation the env last returned; the
bridge resolves delta rows by the rule the sims apply (``rlinf_robot.safety.deltas``) and, when
the chunk has ended, sends back its *trace*: the arm one control period after each row. Every row
is scored on its trace state with the same task code the sims use (``rlinf_robot.envs.tasks``),
and ``BatchedEnv``'s episode rules apply: rows past the time limit are never sent, success ends an
episode at the end of its chunk. The state vector is laid out like the sims' (``ROBOT_STATE_FIELDS``
then the task's columns), so a policy trained in sim runs here unchanged.

``reset`` homes the arm and waits until it has settled (home should be the task's start pose:
``home_q`` in the robot's YAML). Drops and safety rejections of a chunk are reported in
``info["rejections"]`` (the arm held instead); a chunk refused because the arm is in a reflex or
lost its state ends the episode as *aborted* (``info["aborted"]``, reported as truncated: never a
normal ending), and losing the lease, an e-stop or a latched arm raises. A stale camera is never
silently reused: the env waits for a fresh observation, then raises.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from rlinf_robot.bridge.client import BridgeClient
from rlinf_robot.bridge.config import ClientConfig
from rlinf_robot.bridge.errors import BridgeTimeout, CommandRefused
from rlinf_robot.envs.actions import safe_action_spec
from rlinf_robot.envs.spec import ROBOT_STATE_FIELDS, BatchedEnv, Obs, ObsSpec, RowResults
from rlinf_robot.envs.tasks import Batch, make_task
from rlinf_robot.errors import ConfigError, Latched, LinkLost
from rlinf_robot.protocol import Observation
from rlinf_robot.rotations import canonical, is_rigid
from rlinf_robot.safety import SafetyLimits

log = logging.getLogger(__name__)

HOME_ATTEMPTS = 3
MOVE_ATTEMPTS = 4
#: Refusal codes that end an episode as aborted: the arm did not execute the policy's rows.
ABORT_CODES = frozenset({"fault", "no_state", "busy"})
#: Refusals of a reset move that leave the arm holding and pass by themselves (the robot state
#: went stale for a moment on a busy robot PC): the move is tried again once the state is fresh.
TRANSIENT_CODES = frozenset({"no_state"})


@dataclass(frozen=True)
class RealEnvConfig:
    action_mode: str = "ee_delta"
    gripper: bool | None = None  # None: the task's own default
    control_hz: float = 20.0
    task: str = "fr3-reach"
    task_options: dict = field(default_factory=dict)
    max_episode_steps: int | None = None  # None: the task's episode length at control_hz, as in sim
    terminate_on_success: bool = True
    auto_reset: bool = True
    cameras: dict = field(default_factory=dict)  # name -> (H, W, 3) expected from the robot
    #: Where the cell's fixed cameras stand: name -> 4x4 pose in the base frame, OpenCV axes. A
    #: task that sees its goal through a camera (``fr3-reach`` ``goal_camera``) measures it from
    #: here, as that camera's detector would; on the embedded default this is the rendered cell's
    #: front camera (``conf/robot/sim_local.yaml``), the one hand-eye calibration finds.
    camera_poses: dict = field(default_factory=dict)
    align: bool = False  # latency-aware chunks (for streaming); a stepping env starts them on arrival
    step_timeout_s: float = 5.0
    reset_timeout_s: float = 60.0
    settle_joint_vel: float = 0.02  # rad/s: the arm counts as settled below this on every joint
    #: After homing, move to the task's sampled start pose (the sims' start distribution), so an
    #: episode starts on the arm as it does in sim. Set the robot's ``home_q`` to the task's start
    #: pose (``rlinf_robot.envs.tasks.READY_Q``) and this is a move of a few mrad.
    start_from_task: bool = True
    #: With ``start_from_task``: home (the robot's ``home`` command) on the first reset and every
    #: ``home_every``-th after it; the resets between move straight from where the last episode
    #: ended to the next start pose, one motion instead of two (the arm never leaves the task's
    #: workspace in between, and every row passes the safety filter as a policy's would).
    home_every: int = 10
    #: A reset counts as done when the arm settled within this of the start pose (rad, every joint);
    #: a settled arm short of it gets the move once more, then the reset fails, naming the joint.
    start_tolerance: float = 0.02
    seed: int | None = None

    def __post_init__(self):
        src = "real env config"
        if not 0 < self.control_hz <= 1000:
            raise ConfigError(f"{src}: control_hz must be in (0, 1000], got {self.control_hz}")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ConfigError(f"{src}: max_episode_steps must be >= 1, got {self.max_episode_steps}")
        if self.home_every < 1:
            raise ConfigError(f"{src}: home_every must be >= 1, got {self.home_every}")
        for key in ("step_timeout_s", "reset_timeout_s", "settle_joint_vel", "start_tolerance"):
            if not getattr(self, key) > 0:
                raise ConfigError(f"{src}: {key} must be positive, got {getattr(self, key)}")
        object.__setattr__(self, "cameras", {k: tuple(v) for k, v in self.cameras.items()})
        for name, pose in self.camera_poses.items():
            if not is_rigid(pose):
                raise ConfigError(f"{src}: camera_poses.{name} must be a rigid 4x4 transform, got {pose!r}")

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
    q = canonical(np.asarray(o.ee_pose[3:], dtype=np.float64))
    return np.concatenate([o.joint_pos[:7], o.joint_vel[:7], o.ee_pose[:3], q, [o.gripper_width]])


class RealRobotEnv(BatchedEnv):
    def __init__(
        self,
        clients: BridgeClient | list[BridgeClient],
        config: RealEnvConfig | None = None,
        own_clients: bool = False,
    ):
        self.cfg = config or RealEnvConfig()
        self.clients = [clients] if isinstance(clients, BridgeClient) else list(clients)
        self.num_envs = len(self.clients)
        self._own = own_clients
        self.task = make_task(self.cfg.task, **self.cfg.task_options)
        if self.task.gripper and self.cfg.gripper is False:
            raise ConfigError(f"{self.task.name} needs the gripper column: gripper must be true (or unset)")
        if self.task.goal_camera is not None and self.task.goal_camera not in self.cfg.camera_poses:
            # refused here, before the first reset homes the arm for an observation that cannot be made
            raise ConfigError(
                f"{self.task.name}: the goal is seen by camera {self.task.goal_camera!r}, and this env places no "
                f"such camera (camera_poses has {sorted(self.cfg.camera_poses)})"
            )
        self.gripper = self.task.gripper if self.cfg.gripper is None else bool(self.cfg.gripper)
        self.action_spec, self.obs_spec = self.specs(self.cfg)
        self.max_episode_steps = self.cfg.max_episode_steps or max(
            1, round(self.task.episode_seconds * self.cfg.control_hz)
        )
        self.terminate_on_success = self.cfg.terminate_on_success
        n = self.num_envs
        self._rng = np.random.default_rng(self.cfg.seed)
        self._obs: list[Observation | None] = [None] * n
        self.goals = np.zeros((n, 3))
        self.obj_start = np.zeros((n, 3))
        self.camera_poses = {k: np.asarray(v, np.float64) for k, v in self.cfg.camera_poses.items()}
        self.resets = np.zeros(n, np.int64)  # per robot, for home_every
        #: per robot, where its last reset's time went: home_s, move_s (to the start pose, settled), moves
        self.last_reset: list[dict[str, float]] = [{} for _ in range(n)]
        for c in self.clients:
            c.subscribe()
            c.acquire_lease()

    @staticmethod
    def specs(config: RealEnvConfig) -> tuple:
        """(action_spec, obs_spec) a ``RealRobotEnv`` with ``config`` will have, without connecting
        (a worker builds its policy before the robot is reachable)."""
        task = make_task(config.task, **config.task_options)
        gripper = task.gripper if config.gripper is None else bool(config.gripper)
        fields = ROBOT_STATE_FIELDS + tuple(task.features)
        return (
            safe_action_spec(config.action_mode, gripper, config.control_hz),
            ObsSpec((sum(w for _, w in fields),), dict(config.cameras), fields),
        )

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

    # ------------------------------------------------------------------ BatchedEnv hooks
    def _reset_all(self, seed: int | None) -> None:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        for i in range(self.num_envs):
            self._reset_one(i)

    def _reset_envs(self, idx: np.ndarray) -> None:
        """Home and re-draw the goal after an episode (without ``auto_reset`` the caller resets)."""
        if self.cfg.auto_reset:
            for i in idx:
                self._reset_one(int(i))

    def _observe(self) -> Obs:
        obs = self._observations()
        images = {}
        for cam, shape in self.cfg.cameras.items():
            frames = [o.images[cam] for o in obs]
            for i, f in enumerate(frames):
                if f.shape != shape:
                    raise ValueError(f"robot {i} camera {cam!r} sends {f.shape}, the env expects {shape}")
            images[cam] = np.stack(frames)
        instruction = [o.instruction or self.task.instruction for o in obs]
        return {"state": self._state_now(), "images": images, "instruction": instruction}

    def _state_now(self) -> np.ndarray:
        robot = np.stack([robot_state(o) for o in self._observations()])
        batch = self._batch(
            robot[:, :7], robot[:, 14:17], robot[:, 17:21], robot[:, 21], range(self.num_envs)
        )
        return np.concatenate([robot, self.task.observe(batch)], axis=1).astype(np.float32)

    def _run_rows(self, actions: np.ndarray, budget: np.ndarray) -> RowResults:
        """Send each robot the rows its episode has left, wait until they ran, score each row."""
        n, horizon = actions.shape[:2]
        if any(o is None for o in self._obs):
            raise RuntimeError("call reset() before step()")
        for c in self.clients:  # a brief heartbeat gap is not a reason to fail the step
            c.wait_link(self.cfg.step_timeout_s)
        t0 = time.monotonic()
        rows = np.minimum(budget, horizon).astype(np.int64)
        seqs = [
            c.send_chunk(
                actions[i, : rows[i]],
                self.cfg.action_mode,
                self.cfg.control_hz,
                obs=self._obs[i],
                gripper=self.gripper,
                align=self.cfg.align,
            )
            for i, c in enumerate(self.clients)
        ]
        out = RowResults.empty(n, horizon, int(self.obs_spec.state_shape[0]))
        rejections, aborted, reports, step_ms = [], np.zeros(n, bool), [], np.zeros(n)
        for i, (c, seq) in enumerate(zip(self.clients, seqs, strict=True)):
            before = self._obs[i]  # the state the chunk started from
            o = self._await(
                i,
                lambda o, c=c, seq=seq: (
                    (o.chunk_seq >= seq and not o.chunk_active) or any(e.ref_seq == seq for e in c.errors)
                ),
                self.cfg.step_timeout_s + rows[i] / self.cfg.control_hz,
                f"chunk {seq}",
            )
            self._obs[i] = o
            errs = c.take_errors(ref_seq=seq)
            for e in errs:  # losing control is not a step result: the caller must know
                if e.code == "latched" or (e.code == "fault" and "LATCHED" in e.message):
                    raise Latched(e.message)
                if e.code == "refused":
                    raise CommandRefused(e.code, e.message)
            rejections.append([{"code": e.code, "message": e.message} for e in errs])
            aborted[i] = any(e.code in ABORT_CODES for e in errs)
            reports.append(dict(o.chunk_report) if o.chunk_seq == seq else {})
            trace = o.chunk_trace if o.chunk_seq == seq and o.chunk_trace is not None else None
            k = int(rows[i])
            start = _arm_state(before) if before is not None else _arm_state(o)
            states = row_states(trace, k, start, _arm_state(o))
            batch = self._batch(states[:, :7], states[:, 7:10], states[:, 10:14], states[:, 14], [i] * k)
            reward, success = self.task.evaluate(batch)
            out.reward[i, :k], out.success[i, :k] = reward, success
            out.executed[i] = k
            out.truncated[i, k - 1] = aborted[i]
            step_ms[i] = (time.monotonic() - t0) * 1e3
        out.final_state = self._state_now()
        out.extra = {
            "rejections": rejections,
            "aborted": aborted,
            "chunk_report": reports,
            "latency_ms": {"step": step_ms, "obs_age": np.array([_age_ms(o) for o in self._observations()])},
        }
        return out

    # ------------------------------------------------------------------ internals
    def _last(self, i: int) -> Observation:
        """The observation robot ``i`` last returned (set by ``reset`` before anything reads it)."""
        o = self._obs[i]
        assert o is not None  # reset() homed robot i first
        return o

    def _observations(self) -> list[Observation]:
        return [self._last(i) for i in range(self.num_envs)]

    def _batch(self, q, tcp_pos, tcp_quat, width, envs) -> Batch:
        """A task batch of arm states (rows may repeat an env: one row per trace step)."""
        envs = list(envs)
        obj_pos = obj_quat = None
        if self.task.has_object:
            poses = np.stack([self._object_pose(i) for i in envs])
            obj_pos, obj_quat = poses[:, :3], canonical(poses[:, 3:], np.array([1.0, 0.0, 0.0, 0.0]))
        return Batch(
            np.asarray(q, np.float64),
            np.zeros((len(envs), 7)),
            np.asarray(tcp_pos, np.float64),
            canonical(np.asarray(tcp_quat, np.float64)),
            np.asarray(width, np.float64),
            obj_pos,
            obj_quat,
            self.goals[envs],
            self.obj_start[envs],
            self.camera_poses,
        )

    def _object_pose(self, i: int) -> np.ndarray:
        pose = self._last(i).objects.get("object")
        if pose is None:
            raise LinkLost(
                f"robot {i}: task {self.task.name} needs the pose of its object, and the observations "
                "carry none (publish it to the bridge node's object pose topic)"
            )
        return np.asarray(pose, np.float64)

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
        """Home (or, between homings, move straight to the start pose), then the task's layout."""
        home = not self.cfg.start_from_task or self.resets[i] % self.cfg.home_every == 0
        self.resets[i] += 1
        t0 = time.monotonic()
        self.last_reset[i] = {"home_s": 0.0, "move_s": 0.0, "moves": 0}
        if home:
            self._home(i)
            self.last_reset[i]["home_s"] = time.monotonic() - t0
        else:
            self.clients[i].wait_link(self.cfg.step_timeout_s)
            self._wait_recovered(i)
        layout = self.task.sample(self._rng)
        if self.cfg.start_from_task:
            self._move_to(i, layout.arm_q)
        self.goals[i] = layout.goal
        if self.task.has_object:
            self.obj_start[i] = self._object_pose(i)[:3]

    def _home(self, i: int) -> None:
        c = self.clients[i]
        for attempt in range(HOME_ATTEMPTS):
            c.wait_link(self.cfg.step_timeout_s)
            self._wait_recovered(i)
            try:
                c.command("home", timeout=self.cfg.reset_timeout_s)
                break
            except CommandRefused as e:
                # A homing ended by a hold (a heartbeat gap tripped the deadman on a busy machine)
                # or a reflex is retried; anything else, or the last attempt, is the caller's.
                if e.code != "failed" or attempt == HOME_ATTEMPTS - 1:
                    raise
                time.sleep(1.0)  # let a recovery that started meanwhile show in the status
        self._obs[i] = self._await(
            i, Settled(self.cfg.settle_joint_vel), self.cfg.reset_timeout_s, "the arm to settle"
        )

    def _move_to(self, i: int, q: np.ndarray, rate_hz: float = 20.0) -> None:
        """Absolute joint targets until the arm is at ``q`` and still. The safety filter clamps each
        row to one tick's step from where the arm *is*, so an arm slower than that step (a low
        ``relative_dynamics_factor``, a heavy payload) needs more rows than the distance suggests:
        the chunk carries four times that plus two seconds of rows (with twice that plus one second,
        two of three resets of a hybrid run needed a second move), and the move is done as soon as
        the arm is within ``start_tolerance`` of ``q`` and settled (the rest of the chunk holds ``q`` until
        the episode's first chunk replaces it). An arm the chunk did not bring there gets the move
        again from where it stopped (up to ``MOVE_ATTEMPTS``), then the reset fails, naming the
        joint, rather than start an episode elsewhere. A transient refusal (``TRANSIENT_CODES``: the
        bridge held the arm because its state went stale) counts as one of those attempts, after a
        fresh observation; any other refusal raises at once. A link that is down when a move starts
        (the learner's heartbeats missed the deadman) is waited for like ``_home`` waits for it."""
        q = np.asarray(q, np.float64)
        c = self.clients[i]
        step = float(np.min(SafetyLimits.from_yaml().joint_step_limit(rate_hz)))
        stats = self.last_reset[i]
        t0 = time.monotonic()
        refused = None
        for _ in range(MOVE_ATTEMPTS):
            if not c.link_up:  # a heartbeat gap on a busy learner: wait it out, then move from fresh state
                c.wait_link(self.cfg.step_timeout_s)
                self._wait_recovered(i)
                self._obs[i] = self._await(i, lambda o: True, self.cfg.reset_timeout_s, "fresh robot state")
            gap = float(np.max(np.abs(q - self._last(i).joint_pos[:7])))
            rows = min(4 * int(np.ceil(gap / step)) + 2 * int(rate_hz), 20 * int(rate_hz))
            seq = c.send_chunk(np.tile(q, (rows, 1)), "joint_position", rate_hz, obs=self._obs[i])
            settled = Settled(self.cfg.settle_joint_vel)

            def there(o, seq=seq, settled=settled) -> bool:
                near = float(np.max(np.abs(np.asarray(o.joint_pos[:7]) - q))) <= self.cfg.start_tolerance
                ended = o.chunk_seq >= seq and not o.chunk_active
                return (
                    (near and settled(o)) or (ended and not near) or any(e.ref_seq == seq for e in c.errors)
                )

            o = self._await(i, there, self.cfg.reset_timeout_s, "the move to the start pose")
            self._obs[i] = o
            stats["moves"] = stats.get("moves", 0) + 1
            errs = c.take_errors(ref_seq=seq)
            refused = errs[0] if errs else None
            if refused is not None and refused.code in TRANSIENT_CODES:
                log.warning(
                    "robot %d: the move to the start pose was refused (%s); again", i, refused.message
                )
                stats["refused"] = stats.get("refused", 0) + 1
                self._obs[i] = self._await(i, lambda o: True, self.cfg.reset_timeout_s, "fresh robot state")
                continue
            if refused is not None:
                raise CommandRefused(refused.code, f"moving to the task's start pose: {refused.message}")
            off = np.abs(np.asarray(o.joint_pos[:7]) - q)
            if float(off.max()) <= self.cfg.start_tolerance:
                stats["move_s"] = stats.get("move_s", 0.0) + time.monotonic() - t0
                return
            log.debug(
                "robot %d stopped %.3f rad short of the start pose (joint %d)", i, off.max(), off.argmax() + 1
            )
        if refused is not None:
            raise CommandRefused(
                refused.code, f"moving to the task's start pose, {MOVE_ATTEMPTS} times: {refused.message}"
            )
        raise CommandRefused(
            "failed",
            f"robot {i}: {off.max():.3f} rad off the task's start pose on joint {int(off.argmax()) + 1} "
            f"(tolerance {self.cfg.start_tolerance:g} rad) after {MOVE_ATTEMPTS} moves",
        )

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


def _age_ms(o: Observation) -> float:
    """How old the observation was when the learner got it (capture -> receipt, wall clocks)."""
    a, b = o.hops.get("obs_captured"), o.hops.get("obs_received")
    return float("nan") if a is None or b is None else (b - a) / 1e6


def _arm_state(o: Observation) -> np.ndarray:
    """Joint positions, TCP pose and finger opening of an observation, as a chunk trace row."""
    return np.concatenate([o.joint_pos[:7], o.ee_pose, [o.gripper_width]])


def row_states(trace: np.ndarray | None, k: int, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The arm's state after each of a chunk's ``k`` rows: the bridge's trace, where a row the arm
    held through (refused: a NaN row) keeps the state before it (``start`` for the first row), and
    rows past the trace the state at the end (``end``). Never NaN: a NaN state would make the
    row's reward NaN, and one NaN reward every weight of the learner."""
    states = np.tile(end, (k, 1))
    if trace is None:
        return states
    m = min(len(trace), k)
    states[:m] = trace[:m]
    previous = start
    for j in range(m):
        if np.isnan(states[j]).any():
            states[j] = previous
        previous = states[j]
    return states
