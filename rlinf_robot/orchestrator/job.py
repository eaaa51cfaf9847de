"""``TrainJob``: one training run - the hybrid loop, or its sim-only / real-only cases.

Read top to bottom, a run is:

1. **set up** the run dir (``runs/<id>/``: composed config, manifest, metrics, checkpoints, the
   real replay), the robot PC when the embedded default is used (``robot_pc``), the cluster and
   the worker groups from the placement config: ``env`` (``SimEnvWorker``), ``rollout``
   (``RolloutWorker``), ``actor`` (``ActorWorker``), ``real`` (``RealEnvWorker``, one rank per robot);
2. **warm start** (``warm_start.demos > 0``, sim-only's default): the task's scripted expert records
   demonstrations in sim and the actor clones them before any RL (``orchestrator.warm_start``);
   **pre-train** in sim (hybrid mode): PPO updates on sim rollouts until the training success
   target or the pre-training budget;
3. **baseline** (hybrid): the pre-trained, sim-only policy on the arm, for the report's comparison;
4. **train**: the real workers run episodes on their own with the newest weights; every update
   takes a pipelined sim rollout, the real episodes that arrived, builds one batch with the
   configured real share (``orchestrator.ppo``), trains, and pushes the weights to every worker;
   checkpoints every ``run.checkpoint_every`` updates; metrics each update;
5. **evaluate** on sim and on the arm, with 95 % confidence intervals;
6. **report** (``report.html``) and shut everything down. Ctrl-C at any point shuts down cleanly
   and keeps the last checkpoint (and writes the report of what was done).
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import threading
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlinf_robot.errors import ConfigError
from rlinf_robot.orchestrator.buffer import EpisodeStore, SourceBuffer
from rlinf_robot.orchestrator.config import TrainConfig, from_yaml, to_yaml
from rlinf_robot.orchestrator.recipe import BatchInfo, make_recipe
from rlinf_robot.orchestrator.stats import Rate, wilson

log = logging.getLogger(__name__)
KEEP_CHECKPOINTS = 3
#: Arm evaluations draw their goals from this seed (+ rank): never a training episode's goals.
ARM_EVAL_SEED = 1_000_003
#: ... and real demonstrations (mode=cotrain) from this one.
DEMO_SEED = 2_000_003


@dataclass
class JobState:
    """What a checkpoint restores besides the actor (step count, versions, per-source counters)."""

    update: int = 0
    version: int = 0
    phase: str = "pretrain"
    pretrained: bool = False
    warm_started: bool = False
    wall_s: float = 0.0  # training wall time used (pretrain + train), across resumes
    train_wall_s: float = 0.0
    env_steps: dict[str, int] = field(default_factory=dict)
    episodes: dict[str, int] = field(default_factory=dict)
    baseline: dict[str, Any] | None = None


@dataclass
class JobResult:
    run_dir: Path
    state: JobState
    eval: dict[str, Any]
    interrupted: bool = False
    report: Path | None = None


class SimTracker:
    """Per-env running returns of the sim envs: finished episodes' return, length and success."""

    def __init__(self, n: int):
        self.ret = np.zeros(n)
        self.len = np.zeros(n, np.int64)
        self.finished: list[tuple[float, int, bool]] = []

    def update(self, traj: dict[str, Any]) -> list[tuple[float, int, bool]]:
        new = []
        for t in range(traj["rewards"].shape[0]):
            self.ret += traj["rewards"][t]
            self.len += traj["actions"].shape[2]
            done = traj["terminated"][t] | traj["truncated"][t]
            for i in np.flatnonzero(done):
                new.append((float(self.ret[i]), int(self.len[i]), bool(traj["success"][t, i])))
                self.ret[i], self.len[i] = 0.0, 0
        self.finished.extend(new)
        return new

    def success(self, last: int) -> float:
        eps = self.finished[-last:]
        return float(np.mean([s for *_, s in eps])) if eps else float("nan")


def _raise_interrupt(*_: object) -> None:
    """SIGTERM ends a job like Ctrl-C: cleanly, keeping the last checkpoint."""
    raise KeyboardInterrupt


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint ``checkpoints/latest`` names in a run dir, or None before the first one."""
    marker = run_dir / "checkpoints" / "latest"
    return run_dir / "checkpoints" / marker.read_text().strip() if marker.exists() else None


class TrainJob:
    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        self.recipe = make_recipe(cfg.algorithm)  # how this job learns (ppo, sac, rlpd)
        self.resumed = cfg.run.resume is not None
        self.endpoints: list[str] = list(cfg.robot.endpoints)
        self.sources = [
            f"real:{n}"
            for n in (cfg.robot.names or [f"arm{i}" for i in range(max(1, len(cfg.robot.endpoints)))])
        ]
        self.sim_source = f"sim:{cfg.task.name}"
        from rlinf_robot.envs.tasks import make_task

        #: what the policy reads beside the state (sim and arm observations carry the task's own)
        self.instruction = make_task(cfg.task.name, **cfg.task.options).instruction
        if cfg.uses_arm and cfg.robot.kind != "sim_local":
            self._check_robots_answer()
        self.calibration_ids, self.sim_randomization, self.sim_cameras = self._calibration()
        self.init_checkpoint = self._init_checkpoint()
        if self._warm_starts:
            from rlinf_robot.orchestrator.warm_start import check_expert

            check_expert(cfg.sim_env, cfg.task.action_mode)
        self.run_dir = self._run_dir()
        self.state = JobState()
        self.robot = None  # RobotUpProcess of the embedded robot PC
        self._robot_config: Path | None = None  # its YAML, written at set-up; launched by _launch_robot
        self.scheduler = None
        self.groups: dict[str, Any] = {}
        self.buffer = SourceBuffer(cfg.hybrid.max_staleness)
        self.replay = EpisodeStore(cfg.hybrid.real_replay_dir or self.run_dir / "real_replay")
        self.metrics = None
        self.progress = None
        self.eval: dict[str, Any] = {}
        self.real_curve: list[dict[str, Any]] = []  # every real episode: time, success, version
        self.demos: dict[str, np.ndarray] | None = None  # cotrain: the real demonstrations' rows
        self.rng = np.random.default_rng(cfg.seed)
        self._stop = threading.Event()
        self._finish = threading.Event()  # finish_training(): end the training phase early
        self._t0 = time.monotonic()
        self._sim = None
        self._eval_only = False
        self._sim_kwargs: dict[str, Any] = {}  # the SimEnvWorker's sim.make options (the warm start's too)
        self._chunk_size = 1  # the actor's policy's

    @property
    def _warm_starts(self) -> bool:
        """A fresh run clones the expert first; a resumed or ``init_from`` one has its weights."""
        return self.cfg.warm_starts and not self.resumed and self.init_checkpoint is None

    # ================================================================== 1. set up
    def _run_dir(self) -> Path:
        if self.cfg.run.resume:
            path = Path(self.cfg.run.resume)
            if not (path / "config.yaml").exists():
                raise ConfigError(f"run.resume: {path} has no config.yaml (not a run dir)")
            return path
        run_id = self.cfg.run.id or time.strftime("%Y%m%d-%H%M%S") + f"-{self.cfg.mode}"
        path = Path(self.cfg.run.dir) / run_id
        path.mkdir(parents=True, exist_ok=False)
        return path

    def _write_manifest(self) -> None:
        from rlinf_robot.orchestrator.manifest import manifest

        text = to_yaml(self.cfg)
        data = manifest(text, self.endpoints, calibration_ids=self.calibration_ids)
        path = self.run_dir / "manifest.json"
        if not self.resumed:
            (self.run_dir / "config.yaml").write_text(text)
            path.write_text(json.dumps(data, indent=2))
            self.manifest = data
            return
        self.manifest = json.loads(path.read_text())
        if not self._eval_only:  # a resume is recorded with what it ran with
            self.manifest.setdefault("resumes", []).append(data)
            path.write_text(json.dumps(self.manifest, indent=2))

    def _calibration(self) -> tuple[list[str], dict[str, Any] | None, dict[str, Any]]:
        """The records this job uses (``calibration.*``): required kinds checked (stale or
        out-of-bounds stops the job with the reason unless ``force``), the sysid record's fit and the
        hand-eye record's camera for the training sim. Returns their ids, the sim's
        ``randomization`` (None: unchanged) and its ``camera_poses`` (empty: the scene's own)."""
        c = self.cfg.calibration
        if not c.require and not c.sysid and not c.camera:
            return [], None, {}
        from calibration.session import camera_poses_from_records, dynamics_fit_from_record
        from calibration.store import CalibrationStore

        store = CalibrationStore(c.store or None)
        ids = [i for i in store.require(tuple(c.require), force=c.force).values() if i]
        fit, cameras = None, {}
        if c.sysid:
            rec = self._usable_record(store, "sysid", c.sysid)
            fit = dynamics_fit_from_record(rec).to_dict()
            ids.append(rec.id)
        if c.camera:
            rec = self._usable_record(store, "handeye", c.camera)
            intrinsics_id = rec.payload.get("intrinsics_id") or ""
            intrinsics = self._usable_record(store, "intrinsics", intrinsics_id) if intrinsics_id else None
            cameras = camera_poses_from_records(rec, intrinsics)
            ids += [rec.id] + ([intrinsics.id] if intrinsics is not None else [])
        return sorted(set(ids)), fit, cameras

    def _usable_record(self, store, kind: str, which: str):
        """Record ``which`` (an id, or ``latest``) of ``kind``; stale or out of bounds stops the
        job with the reason unless ``calibration.force``."""
        from calibration.store import CalibrationInvalid

        rec = store.usable(which, kind, self.cfg.calibration.force, hint="or calibration.force=true")
        if rec is None:
            raise CalibrationInvalid(f"calibration: no {kind} record in {store.root}")
        return rec

    def _check_robots_answer(self) -> None:
        """Each remote robot's bridge answers a heartbeat, or one error naming the endpoint, before
        Ray, a worker or the run's files start (a typo in an address should not cost minutes)."""
        from rlinf_robot.bridge import BridgeClient, BridgeError
        from rlinf_robot.bridge.config import ClientConfig
        from rlinf_robot.errors import LinkLost, RobotUnreachable

        for source, endpoint in zip(self.sources, self.endpoints, strict=False):
            config = ClientConfig.from_dict({**dict(self.cfg.robot.client), "endpoint": endpoint})
            try:
                BridgeClient(config).connect().close()
            except (LinkLost, BridgeError, OSError) as e:
                raise RobotUnreachable(
                    f"robot {source.split(':', 1)[1]} at {endpoint} is not reachable: {e} "
                    "(is its robot PC up, the address right, and are the CURVE keys its own?)"
                ) from None

    def setup(self) -> None:
        cfg = self.cfg
        if self.resumed:
            self._load_state()
        if cfg.uses_arm and cfg.robot.kind == "sim_local":
            from rlinf_robot.orchestrator import robot_pc

            self._robot_config, endpoint = robot_pc.prepare(cfg.robot, self.run_dir)
            self.endpoints = [endpoint]
            if not self._pretraining_ahead():  # else it starts when pre-training ends (_bring_up_robot)
                self._launch_robot()
        self._write_manifest()
        self._say(f"run dir {self.run_dir}")
        self._start_workers()
        from rlinf_robot.orchestrator.metrics import MetricsLog

        self.metrics = MetricsLog(
            self.run_dir,
            json.loads(json.dumps(asdict(self.cfg), default=str)),
            "disabled" if self._eval_only else cfg.run.wandb,
            name=self.run_dir.name,
            resume=self.resumed,
            append=not self._eval_only,
        )
        if self.resumed:
            self._restore_checkpoint()
        elif self.init_checkpoint is not None and not self._eval_only:
            self._init_from(self.init_checkpoint)
        if not self.resumed and cfg.hybrid.real_replay_dir and not self._eval_only:
            earlier = self.replay.read_all()
            if earlier:
                used = self.recipe.reuse(self, earlier)
                self._say(
                    f"real replay {self.replay.root}: {len(earlier)} earlier episodes, {used} trained on"
                )
        self._push_weights()

    def _cluster_config(self) -> dict[str, Any]:
        raw = {k: v for k, v in self.cfg.cluster.items()}
        groups = dict(raw.get("groups") or {})
        if not self.cfg.uses_sim:
            groups.pop("env", None)
            groups.pop("rollout", None)
        else:
            groups.setdefault("env", {"num_ranks": 1})
            groups.setdefault("rollout", {"num_ranks": 1})
        groups.setdefault("actor", {"num_ranks": 1})
        if self.cfg.uses_arm:
            groups["real"] = {**dict(groups.get("real") or {}), "num_ranks": len(self.sources)}
        else:
            groups.pop("real", None)
        raw["groups"] = groups
        raw.pop("resources", None)
        return raw

    def _start_workers(self) -> None:
        from rlinf_robot.envs.real import RealEnvConfig, RealRobotEnv
        from rlinf_robot.scheduler.config import Scheduler, SchedulerConfig
        from rlinf_robot.workers.actor import ActorWorker
        from rlinf_robot.workers.real_env import RealEnvWorker
        from rlinf_robot.workers.rollout import RolloutWorker
        from rlinf_robot.workers.sim_env import SimEnvWorker, action_spec_from_dict

        cfg = self.cfg
        self.scheduler = Scheduler(SchedulerConfig.from_dict(self._cluster_config()))
        # With the robot PC on this machine (the embedded default) the learner's workers yield the
        # CPU to the arm's loops (franka-sim, franka_node, bridge_node), as separate machines would.
        local = self._robot_config is not None
        learner_env = {"RLINF_WORKER_NICE": str(cfg.run.learner_nice)} if local else {}
        self._say(
            f"cluster up: placement {self.scheduler.config.mode}, groups "
            f"{', '.join(f'{g.name} x{g.num_ranks}' for g in self.scheduler.config.groups)}"
        )
        policy_kwargs = dict(cfg.policy.kwargs)
        if cfg.warm_starts:  # a clone explores less than a fresh policy (WarmStartConfig)
            policy_kwargs.setdefault("init_log_std", cfg.warm_start.log_std)
        real_env = cfg.real_env_options()
        specs = None
        if cfg.uses_sim:
            sim_kwargs = cfg.sim_make_kwargs()
            if self.sim_randomization is not None:  # dynamics around the sysid record's fit
                sim_kwargs["randomization"] = self.sim_randomization
            if self.sim_cameras:  # cameras where calibration found the real ones
                sim_kwargs["camera_poses"] = self.sim_cameras
                self._say(f"training sim: {', '.join(self.sim_cameras)} camera placed by calibration")
            self._sim_kwargs = sim_kwargs
            env = self.scheduler.launch(
                "env",
                SimEnvWorker,
                env=learner_env,
                kwargs=dict(
                    env=cfg.sim_env,
                    num_envs=cfg.sim.num_envs,
                    env_kwargs=sim_kwargs,
                    num_shards=cfg.sim.num_shards,
                    seed=cfg.seed,
                ),
            )
            spec = env.call_rank(0, "env_spec").wait_one(120)
            action_spec = action_spec_from_dict(spec["action_spec"])
            self.groups["env"] = env
            self.groups["rollout"] = self.scheduler.launch(
                "rollout",
                RolloutWorker,
                env=learner_env,
                kwargs=dict(
                    action_spec=spec["action_spec"],
                    state_dim=spec["state_dim"],
                    policy=cfg.policy.name,
                    policy_kwargs=policy_kwargs,
                    seed=cfg.seed,
                    obs_spec=spec["obs_spec"],
                ),
            )
            specs = (action_spec, spec["state_dim"], spec["obs_spec"])
        if cfg.uses_arm:
            r_action, r_obs = RealRobotEnv.specs(RealEnvConfig.from_dict(real_env))
            if specs is not None and (
                r_action.shape != specs[0].shape
                or r_obs.state_shape[0] != specs[1]
                or not np.allclose(r_action.high, specs[0].high)
            ):
                raise ConfigError(
                    f"the sim env ({cfg.sim_env}) and the arm disagree on actions or state "
                    f"({specs[0].shape}/{specs[1]} vs {r_action.shape}/{r_obs.state_shape[0]})"
                )
            specs = specs or (r_action, r_obs.state_shape[0], r_obs)
            # concurrent methods: stats / stop / take_episodes answer while an episode or an
            # evaluation runs (the worker's own state is guarded for that)
            self.groups["real"] = self.scheduler.launch(
                "real",
                RealEnvWorker,
                max_concurrency=4,
                kwargs=dict(
                    endpoint=self.endpoints,
                    env=real_env,
                    policy=cfg.policy.name,
                    policy_kwargs=policy_kwargs,
                    source=self.sources,
                    client=dict(cfg.robot.client),
                    seed=cfg.seed,
                    deterministic=cfg.hybrid.deterministic_real,
                    noise_scale=cfg.hybrid.real_noise_scale,
                    record_dir=str(self.run_dir / "datasets") if cfg.run.record_real else "",
                    teleop=asdict(cfg.teleop),
                ),
            )
        worker, kwargs = self.recipe.actor(
            cfg.policy.name, {"action_spec": specs[0], "obs_spec": specs[2], **policy_kwargs}, cfg.seed
        )
        self.groups["actor"] = self.scheduler.launch("actor", worker, env=learner_env, kwargs=kwargs)
        if worker is ActorWorker:
            self._chunk_size = self.groups["actor"].call("setup").wait(300)[0]["chunk_size"]

    # ================================================================== the loop
    def run(self) -> JobResult:
        """Everything, in order; Ctrl-C / SIGTERM end it cleanly (last checkpoint kept)."""
        interrupted = False
        in_main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _raise_interrupt) if in_main else None
        report = None
        try:
            self.setup()
            self._start_progress()
            if self._warm_starts:  # a fresh run only: a resumed one has its weights
                self._warm_start()
            if self.cfg.pretrains and not self.state.pretrained:
                self._pretrain()
            self._bring_up_robot()
            if self.cfg.pretrains and self.state.baseline is None and self.cfg.eval.baseline_arm_episodes:
                self.state.baseline = self._evaluate_arm(
                    self.cfg.eval.baseline_arm_episodes, "baseline (sim-only policy)"
                )
            self._train()
            self._checkpoint()
            self._evaluate()
        except KeyboardInterrupt:
            interrupted = True
            self._say("interrupted: stopping the arm's episodes, keeping the last checkpoint")
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, previous)
            self._stop_progress()
            self._finish_real(interrupted)
            if self.metrics is not None:
                report = self._report(interrupted)
            self.shutdown()
        return JobResult(self.run_dir, self.state, self.eval, interrupted, report)

    def finish_training(self) -> None:
        """End the training phase at the next update boundary, then checkpoint, evaluate and
        report as at the end of the budget (from another thread: a UI, a test that has seen what
        it waited for). Unlike an interrupt, the run ends normally."""
        self._finish.set()

    def evaluate_only(self, on: tuple[str, ...] = ("sim", "arm")) -> dict[str, Any]:
        """``rlinf-robot eval``: the run's last checkpoint on sim and/or the arm, nothing trained."""
        self._eval_only = True
        try:
            self.setup()
            self.state.baseline = None
            out: dict[str, Any] = {}
            if "sim" in on and self.cfg.uses_sim:
                out["sim"] = self._evaluate_sim(self.cfg.eval.sim_episodes).to_dict()
                self._say(f"sim: success {wilson(out['sim']['successes'], out['sim']['n'])}")
            if "arm" in on and self.cfg.uses_arm:
                out["arm"] = self._evaluate_arm(
                    self.cfg.eval.arm_episodes, f"checkpoint of update {self.state.update}"
                )
            path = self.run_dir / f"eval-{time.strftime('%Y%m%d-%H%M%S')}.json"
            path.write_text(json.dumps({"update": self.state.update, **out}, indent=2, default=float))
            self._say(f"results: {path}")
            return out
        finally:
            self._finish_real()
            if self.metrics is not None:
                self.metrics.close()
            self.shutdown()

    def _warm_start(self) -> None:
        """SFT then RL: the scripted expert's demonstrations in sim, cloned by the actor, the
        weights pushed; one metrics row (``phase: warm_start``) says what it took."""
        from rlinf_robot.orchestrator import warm_start

        ws, t0 = self.cfg.warm_start, time.monotonic()
        self.state.phase = "warm_start"
        self._say(
            f"warm start: the scripted expert records {ws.demos} episodes in sim, cloned for {ws.epochs} epochs"
        )
        demos = warm_start.record(
            self.cfg.sim_env, self._sim_kwargs, ws, self._chunk_size, self.cfg.seed, self.instruction
        )
        actor = self.groups["actor"]
        actor.call("update_obs_norm", demos.states).wait(120)
        seed = zlib.crc32(f"{self.cfg.seed}/warm_start".encode())
        stats = actor.call(
            "train_epochs", demos.batch, ws.epochs, ws.minibatch_size, seed, None, "sft", {"kind": "l1"}
        ).wait(1800)[0]
        self.state.version += 1
        self._push_weights()
        self.state.warm_started = True
        dt = time.monotonic() - t0
        self.metrics.log(
            {
                "update": self.state.update,
                "version": self.state.version,
                "phase": "warm_start",
                "wall_s": time.monotonic() - self._t0,
                "warm_start_s": dt,
                "warm_start/record_s": demos.seconds,
                "warm_start/demo_env_steps": demos.env_steps,
                "warm_start/demo_success": demos.success,
                "warm_start/rows": len(demos.states),
                **{f"train/{k}": v for k, v in stats.items()},
            }
        )
        self._say(
            f"warm start done in {dt:.1f} s: {demos.episodes} expert episodes ({demos.env_steps} env steps, "
            f"success {demos.success:.2f}), {len(demos.states)} rows, clone loss {stats.get('sft_loss', float('nan')):.3f}"
        )

    def _pretrain(self) -> None:
        b = self.cfg.budget
        self.state.phase = "pretrain"
        if b.pretrain_wall_s <= 0:  # budget.pretrain_wall_s=0: the hybrid loop from a fresh policy
            self._say("pre-training in sim: skipped (budget.pretrain_wall_s=0)")
            self.state.pretrained = True
            return
        self._say(
            f"pre-training in sim: until {b.pretrain_target:.2f} training success or {b.pretrain_wall_s:g} s"
        )
        start = time.monotonic()
        while time.monotonic() - start < b.pretrain_wall_s:
            self._update(use_real=False)
            if self._sim_solved(b.pretrain_target):
                break
            if self._stop.is_set():
                raise KeyboardInterrupt
        self.state.pretrained = True
        self._say(
            f"pre-training done after {self.state.update} updates: sim training success "
            f"{self._sim.success(b.pretrain_window):.2f}"
        )

    def _check_robot_alive(self) -> None:
        """An embedded robot PC that exited stops the job with its output (the arm's workers would
        otherwise retry a dead endpoint until their timeouts)."""
        if self.robot is not None and self.robot.proc.poll() is not None:
            from rlinf_robot.errors import RobotUnreachable

            raise RobotUnreachable(
                f"the embedded robot PC exited (code {self.robot.proc.returncode}); its last output:\n"
                + self.robot.tail(25)
            )

    def _await_arm(self, call, timeout_s: float) -> list[Any]:
        """``call.wait`` for a real-worker call, checking meanwhile that the robot PC still runs."""
        from rlinf_robot.scheduler.errors import WorkerTimeout

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return call.wait(min(5.0, max(deadline - time.monotonic(), 0.1)))
            except WorkerTimeout:
                self._check_robot_alive()
                if time.monotonic() >= deadline:
                    raise

    def _pretraining_ahead(self) -> bool:
        return (
            self.cfg.pretrains
            and not self.state.pretrained
            and self.init_checkpoint is None
            and self.cfg.budget.pretrain_wall_s > 0
        )

    def _launch_robot(self) -> None:
        if self._robot_config is not None and self.robot is None:
            from rlinf_robot.orchestrator import robot_pc

            self.robot = robot_pc.launch(self._robot_config, self.cfg.robot.ready_timeout_s)

    def _bring_up_robot(self) -> None:
        """The embedded robot PC starts after sim pre-training (it would take most of a 2-core
        machine's CPU from it), and sim training goes on while its processes come up."""
        if self._robot_config is None or self._eval_only:
            return
        started = self.robot is None
        self._launch_robot()
        if started and self.cfg.uses_sim and self.cfg.pretrains:
            self._say("robot PC starting; sim training goes on until it is up")
            deadline = time.monotonic() + self.cfg.robot.ready_timeout_s
            while not self.robot.ready() and time.monotonic() < deadline:
                self._update(use_real=False)
                if self._stop.is_set():
                    raise KeyboardInterrupt
        self._wait_robot()

    def _wait_robot(self) -> None:
        """Wait until the embedded robot PC is up (launching it first if it was not)."""
        self._launch_robot()
        if self.robot is not None and not getattr(self, "_robot_ready", False):
            pids = self.robot.wait_ready(self.cfg.robot.ready_timeout_s)
            self._robot_ready = True
            self._say(f"robot PC ready: {', '.join(f'{n} ({p})' for n, p in pids.items())}")

    def _train(self) -> None:
        cfg, b = self.cfg, self.cfg.budget
        self.state.phase = "train"
        real = self.groups.get("real")
        if real is not None and cfg.mode == "cotrain" and self.demos is None:
            self._record_demos()
        if real is not None and cfg.trains_on_arm:
            self._wait_robot()
            real.call("start").wait(60)
        start_update, start = self.state.update, time.monotonic()
        used = self.state.train_wall_s
        while True:
            elapsed = used + time.monotonic() - start
            if b.wall_s is not None and elapsed >= b.wall_s:
                break
            if b.updates is not None and self.state.update - start_update >= b.updates:
                break
            if self._finish.is_set():
                self._say(f"training ended on request after {self.state.update} updates")
                break
            if b.target_success is not None and self._sim_solved(b.target_success):
                self._say(
                    f"target reached after {self.state.update} updates: sim training success "
                    f"{self._sim.success(b.pretrain_window):.2f} over the last {b.pretrain_window} episodes"
                )
                break
            if not cfg.uses_sim and not self._wait_real(
                cfg.hybrid.min_real_episodes, b.wall_s - elapsed if b.wall_s else 600
            ):
                continue
            self._update(use_real=cfg.trains_on_arm)
            self.state.train_wall_s = used + time.monotonic() - start
            if self.state.update % cfg.run.checkpoint_every == 0:
                self._checkpoint()

    def _sim_solved(self, target: float) -> bool:
        """The sim's training success over the last ``pretrain_window`` episodes is >= target."""
        window = self.cfg.budget.pretrain_window
        sim = self._sim  # None until the first sim rollout
        return sim is not None and len(sim.finished) >= window and sim.success(window) >= target

    def _record_demos(self) -> None:
        """RLinf-Co: the task's scripted expert records ``hybrid.real_demos`` episodes on the arm
        (kept in ``real_demos/`` and reused on ``--resume``); the successful ones are the rows of
        the auxiliary supervised loss for the rest of the run."""
        store = EpisodeStore(self.run_dir / "real_demos")
        episodes = store.read_all()
        if not episodes:
            self._wait_robot()
            real = self.groups["real"]
            real.call("stop").wait(120)
            n = self.cfg.hybrid.real_demos
            self._say(f"real demonstrations: the scripted expert, {n} episodes on the arm")
            per_rank = -(-n // len(real.actors))
            call = real.call("evaluate", per_rank, True, 900.0, DEMO_SEED, True, self.cfg.hybrid.demo_gain)
            episodes = [ep for eps in self._await_arm(call, 3600) for ep in eps]
            for ep in episodes:
                store.write(ep)
        good = [ep for ep in episodes if ep["meta"]["success"] and not ep["meta"]["aborted"]]
        if not good:
            raise RuntimeError(f"none of the {len(episodes)} expert demonstrations on the arm succeeded")
        from rlinf_robot.orchestrator.ppo import demo_rows

        self.demos = demo_rows(good)
        self._say(
            f"real demonstrations: {len(good)}/{len(episodes)} successful, {len(self.demos['state'])} rows"
        )

    def _wait_real(self, episodes: int, timeout_s: float) -> bool:
        """real_only: wait until ``episodes`` new usable episodes are in the buffer."""
        deadline = time.monotonic() + max(timeout_s, 1.0)
        before = len(self.buffer.episodes)
        while time.monotonic() < deadline:
            self._take_real()
            if len(self.buffer.episodes) - before >= episodes:
                return True
            time.sleep(0.5)
        return False

    # ------------------------------------------------------------------ one update
    def _update(self, use_real: bool) -> dict[str, Any]:
        """One update: a sim rollout, the real episodes that arrived, the recipe's learning step
        (``orchestrator.ppo`` / ``orchestrator.sac``), the weights pushed to every worker."""
        t0 = time.monotonic()
        timing: dict[str, float] = {}
        traj = None
        if self.cfg.uses_sim:
            traj = self._sim_rollout()
            timing["rollout_s"] = time.monotonic() - t0
            # inside the env worker: env steps, the policy's compute, the rest of the wait for actions
            timing["rollout_env_s"] = traj["env_s"]
            timing["rollout_infer_s"] = traj["infer_s"]
            timing["rollout_transport_s"] = max(traj["wait_s"] - traj["infer_s"], 0.0)
        if use_real:
            self._check_robot_alive()
        episodes = self._take_real() if use_real else []
        t1 = time.monotonic()
        stats, info = self.recipe.update(self, traj, episodes, use_real)
        timing["train_s"] = time.monotonic() - t1
        self.state.update += 1
        self.state.version += 1
        t2 = time.monotonic()
        self._push_weights()
        timing["sync_s"] = time.monotonic() - t2
        dt = time.monotonic() - t0
        self.state.wall_s += dt
        row = self._metrics_row(traj, episodes, info, stats, timing, dt)
        self.metrics.log(row)
        self._show(row)
        return row

    def _sim_rollout(self) -> dict[str, Any]:
        cfg = self.cfg
        env, rollout = self.groups["env"], self.groups["rollout"]
        first = self._sim is None
        results = env.call(
            "rollout",
            rollout.actors[0],
            self.recipe.num_steps,
            cfg.sim.stages,
            True,
            False,
            first,
            300.0,
            cfg.sim.transport,
        ).wait(600)
        traj = {
            k: np.concatenate([r[k] for r in results], axis=1)
            for k in results[0]
            if isinstance(results[0][k], np.ndarray) and results[0][k].ndim >= 2 and k != "versions"
        }
        traj["versions"] = results[0]["versions"]
        traj["env_steps"] = sum(r["env_steps"] for r in results)
        for key in ("seconds", "env_s", "wait_s", "infer_s"):  # env ranks run side by side
            traj[key] = max(r[key] for r in results)
        if self._sim is None:
            self._sim = SimTracker(traj["rewards"].shape[1])
        stale = int(np.max(self.state.version - traj["versions"]))
        if stale:
            log.warning("sim rollout acted with weights %d versions old", stale)
        return traj

    def _take_real(self) -> list[dict[str, Any]]:
        real = self.groups.get("real")
        if real is None:
            return []
        episodes = [ep for eps in real.call("take_episodes").wait(120) for ep in eps]
        for ep in episodes:
            self.replay.write(ep)
            self.buffer.add(ep)
            meta = ep["meta"]
            self.state.episodes[meta["source"]] = self.state.episodes.get(meta["source"], 0) + 1
            self.state.env_steps[meta["source"]] = self.state.env_steps.get(meta["source"], 0) + meta["steps"]
            self.real_curve.append(
                {
                    "t": time.monotonic() - self._t0,
                    "success": meta["success"],
                    "aborted": meta["aborted"],
                    "version": int(np.max(ep["versions"])) if len(ep["versions"]) else -1,
                    "source": meta["source"],
                    "return": meta["return"],
                    "reason": meta["reason"],
                    "t_start_wall": meta["t_start"],
                    "t_end_wall": meta["t_end"],
                }
            )
        return episodes

    def _push_weights(self) -> None:
        from rlinf_robot.scheduler.weight_sync import push_weights

        actor = self.groups["actor"]
        actor.call("gather_weights").wait(300)
        for name in ("rollout", "real"):
            if name in self.groups:
                push_weights(actor, self.groups[name], self.state.version)

    # ------------------------------------------------------------------ metrics
    def _metrics_row(self, traj, episodes, info: BatchInfo, stats, timing, dt) -> dict[str, Any]:
        st = self.state
        row: dict[str, Any] = {
            "update": st.update,
            "version": st.version,
            "phase": st.phase,
            "wall_s": time.monotonic() - self._t0,
            "update_s": dt,
            **timing,
        }
        row.update({f"train/{k}": v for k, v in stats.items()})
        row["batch/rows"] = info.rows
        row["batch/real_share"] = info.real_rows / max(info.rows, 1)
        if info.real_policy_lag is not None:
            row["batch/real_policy_lag"] = info.real_policy_lag
        if traj is not None:
            new = self._sim.update(traj)
            src = self.sim_source
            st.env_steps[src] = st.env_steps.get(src, 0) + int(traj["env_steps"])
            st.episodes[src] = st.episodes.get(src, 0) + len(new)
            row[f"{src}/env_steps"] = st.env_steps[src]
            row[f"{src}/steps_per_s"] = traj["env_steps"] / max(traj["seconds"], 1e-9)
            row[f"{src}/success"] = self._sim.success(max(32, len(new)))
            if new:
                row[f"{src}/return"] = float(np.mean([r for r, _, _ in new]))
                row[f"{src}/episode_length"] = float(np.mean([n for _, n, _ in new]))
        if "real" in self.groups:
            for stat in self.groups["real"].call("stats").wait(60):
                src = stat["source"]
                mine = [e for e in self.real_curve if e["source"] == src and not e["aborted"]]
                row[f"{src}/state"] = stat["state"]
                row[f"{src}/last_error"] = stat["last_error"]
                row[f"{src}/episodes"] = stat["episodes"]
                row[f"{src}/aborted"] = stat["aborted"]
                row[f"{src}/utilisation"] = stat["utilisation"]
                row[f"{src}/latency_p50_ms"] = stat["latency_p50_ms"]
                row[f"{src}/env_steps"] = st.env_steps.get(src, 0)
                row[f"{src}/steps_per_s"] = stat["steps"] / max(stat["wall_s"], 1e-9)
                if mine:
                    row[f"{src}/success"] = float(np.mean([e["success"] for e in mine[-10:]]))
                    row[f"{src}/return"] = float(np.mean([e["return"] for e in mine[-10:]]))
            mine_eps = [e for e in episodes if not e["meta"]["aborted"]]
            if mine_eps:
                row["real/new_episodes"] = len(mine_eps)
                row["real/episode_length"] = float(np.mean([e["meta"]["steps"] for e in mine_eps]))
        return row

    # ================================================================== checkpoints
    def _checkpoint(self) -> Path | None:
        if not self.groups.get("actor"):
            return None
        path = self.run_dir / "checkpoints" / f"update_{self.state.update:06d}"
        self.groups["actor"].call("save_checkpoint", str(path / "actor")).wait(300)
        state = {
            **asdict(self.state),
            "buffer": self.buffer.metadata(),
            "config_hash": self.manifest["config_hash"],
        }
        (path / "state.json").write_text(json.dumps(state, indent=2, default=float))
        tmp = self.run_dir / "checkpoints" / "latest.tmp"
        tmp.write_text(path.name)
        tmp.replace(self.run_dir / "checkpoints" / "latest")
        for old in sorted((self.run_dir / "checkpoints").glob("update_*"))[:-KEEP_CHECKPOINTS]:
            shutil.rmtree(old, ignore_errors=True)
        return path

    def _same_policy_and_task(self, run: Path, key: str) -> None:
        """A checkpoint of ``run`` fits this job only if it trained the same policy on the same task."""
        saved = from_yaml(run / "config.yaml")
        if saved.policy != self.cfg.policy or saved.task != self.cfg.task:
            raise ConfigError(f"{key}: {run} trained another policy or task (see its config.yaml)")

    def _init_checkpoint(self) -> Path | None:
        """``run.init_from``'s last checkpoint, checked before anything starts."""
        if not self.cfg.run.init_from or self.resumed:
            return None
        run = Path(self.cfg.run.init_from)
        ckpt = latest_checkpoint(run)
        if ckpt is None or not (run / "config.yaml").exists():
            raise ConfigError(f"run.init_from: {run} is not a run dir with a checkpoint (checkpoints/latest)")
        self._same_policy_and_task(run, "run.init_from")
        return ckpt

    def _init_from(self, ckpt: Path) -> None:
        """Start from another run's checkpoint (its actor: weights, optimizer), pre-training
        skipped: that run was the pre-training."""
        self.groups["actor"].call("load_checkpoint", str(ckpt / "actor")).wait(300)
        self.state.pretrained = True
        self._say(f"starting from {ckpt.parent.parent.name}'s checkpoint {ckpt.name}")

    def _load_state(self) -> None:
        ckpt = latest_checkpoint(self.run_dir)
        if ckpt is None:
            raise ConfigError(f"run.resume: {self.run_dir} has no checkpoint yet")
        raw = json.loads((ckpt / "state.json").read_text())
        raw.pop("buffer", None)
        raw.pop("config_hash", None)
        self.state = JobState(**raw)
        self._same_policy_and_task(self.run_dir, "run.resume")

    def _restore_checkpoint(self) -> None:
        ckpt = latest_checkpoint(self.run_dir)
        step = self.groups["actor"].call("load_checkpoint", str(ckpt / "actor")).wait(300)[0]
        used = self.recipe.restore(self, self.replay.read_all())  # the persistent real replay
        self._say(
            f"resumed {self.run_dir.name} at update {self.state.update} (optimizer step {step}, "
            f"policy version {self.state.version}, {used} real episodes from disk)"
        )

    # ================================================================== evaluation
    def _evaluate(self) -> None:
        self.state.phase = "eval"
        cfg = self.cfg
        if cfg.uses_sim and cfg.eval.sim_episodes:
            self.eval["sim"] = self._evaluate_sim(cfg.eval.sim_episodes).to_dict()
            self._say(f"sim eval: success {wilson(self.eval['sim']['successes'], self.eval['sim']['n'])}")
        if cfg.uses_arm and cfg.eval.arm_episodes:
            self.eval["arm"] = self._evaluate_arm(cfg.eval.arm_episodes, "final policy")
        if self.state.baseline is not None:
            self.eval["baseline_arm"] = self.state.baseline

    def _evaluate_sim(self, episodes: int) -> Rate:
        """Deterministic episodes on held-out seeds (a seed range training never used)."""
        env, rollout = self.groups["env"], self.groups["rollout"]
        horizon = self._episode_decisions()
        wins = n = 0
        k = 0
        while n < episodes:
            res = env.call(
                "rollout",
                rollout.actors[0],
                horizon,
                1,
                True,
                True,
                True,
                300.0,
                self.cfg.sim.transport,
                10_000 + 97 * k,
            ).wait(600)
            for r in res:
                done = r["terminated"] | r["truncated"]
                first = np.argmax(done, axis=0)  # each env's first episode end
                ended = done.any(axis=0)
                wins += int(np.sum(r["success"][first, np.arange(done.shape[1])] & ended))
                n += int(np.sum(ended))
            k += 1
        self._sim = None  # the next training rollout starts from a reset
        return wilson(wins, n)

    def _episode_decisions(self) -> int:
        from rlinf_robot.envs.tasks import make_task

        seconds = make_task(self.cfg.task.name, **self.cfg.task.options).episode_seconds
        return int(round(seconds * self.cfg.task.control_hz))

    def _evaluate_arm(self, episodes: int, what: str) -> dict[str, Any]:
        self._wait_robot()
        real = self.groups["real"]
        real.call("stop").wait(120)
        self._say(f"arm eval ({what}): {episodes} episodes, deterministic")
        per_rank = -(-episodes // len(real.actors))
        # held-out goals, the same for the baseline and the final policy (paired), never a training one
        evaluated = self._await_arm(real.call("evaluate", per_rank, True, 900.0, ARM_EVAL_SEED), 3600)
        results = [ep for eps in evaluated for ep in eps]
        wins = sum(ep["meta"]["success"] for ep in results)
        rate = wilson(wins, len(results))
        self._say(f"arm eval ({what}): success {rate}")
        t = time.monotonic() - self._t0
        return {
            **rate.to_dict(),
            "t": t,
            "what": what,
            "final_distance_mm": [self._goal_distance(ep) for ep in results],
        }

    @staticmethod
    def _goal_distance(ep: dict[str, Any]) -> float:
        s = ep["final_state"]
        return float(np.linalg.norm(np.asarray(ep["meta"]["goal"]) - s[14:17]) * 1e3)

    # ================================================================== progress, report, shutdown
    def _start_progress(self) -> None:
        if self.cfg.run.progress:
            from rlinf_robot.orchestrator.progress import Progress

            self.progress = Progress(self.cfg, self.sources, self.sim_source)
            self.progress.start()

    def _stop_progress(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            if self.progress.shown:
                self.progress.save_svg(self.run_dir / "progress.svg")
            self.progress = None

    def _show(self, row: dict[str, Any]) -> None:
        if self.progress is not None:
            self.progress.update(row, self.state, time.monotonic() - self._t0)

    def _say(self, text: str) -> None:
        line = f"[{time.monotonic() - self._t0:6.1f}s] {text}"
        if self.progress is not None:
            self.progress.say(line)
        else:
            print(line, flush=True)

    def _finish_real(self, interrupted: bool = False) -> None:
        real = self.groups.get("real")
        if real is None:
            return
        try:
            real.call("stop", 60.0, interrupted).wait(90)
            self._take_real()
        except Exception as e:  # shutting down: the arm holds by itself (deadman) if this fails
            log.warning("stopping the real workers: %s", e)

    def _report(self, interrupted: bool) -> Path | None:
        try:
            self.metrics.summary(
                {f"eval/{k}": v.get("rate") for k, v in self.eval.items() if isinstance(v, dict)}
            )
            timeline = self._timeline()
            latency = self._latency()
            (self.run_dir / "eval.json").write_text(json.dumps(self.eval, indent=2, default=float))
            if not self.cfg.run.report:
                return None
            from rlinf_robot.orchestrator.report import write_report

            path = write_report(
                self.run_dir,
                self.metrics.rows,
                self.real_curve,
                self.eval,
                latency,
                timeline,
                self.manifest,
                interrupted,
            )
            self._say(f"report: {path}")
            return path
        except Exception:
            log.exception("writing the report failed")
            return None
        finally:
            self.metrics.close()

    def _timeline(self) -> list[dict[str, Any]]:
        events = []
        for name in ("env", "rollout", "actor"):
            group = self.groups.get(name)
            if group is None:
                continue
            try:
                for rank, evs in enumerate(group.call("timeline_events").wait(60)):
                    events += [{**e, "group": name, "rank": rank} for e in evs]
            except Exception as e:
                log.warning("timeline of %s: %s", name, e)
        return events

    def _latency(self) -> list[float]:
        real = self.groups.get("real")
        if real is None:
            return []
        try:
            return [x for xs in real.call("latency_samples").wait(60) for x in xs]
        except Exception:
            return []

    def shutdown(self) -> None:
        if self.scheduler is not None:
            try:
                self.scheduler.shutdown()
            except Exception as e:
                log.warning("scheduler shutdown: %s", e)
            self.scheduler = None
        if self.robot is not None:
            code = self.robot.stop()
            (self.run_dir / "robot_pc.log").write_text("\n".join(self.robot.lines) + "\n")
            self._say(f"robot PC stopped (exit {code}; its output: {self.run_dir / 'robot_pc.log'})")
            self.robot = None
