"""The training job's configuration: Hydra composes ``rlinf_robot/conf/train.yaml`` (groups ``task``,
``sim``, ``robot``, ``policy``, ``algorithm``, ``cluster``, ``mode``) with ``key=value`` overrides,
checked against the typed schema below (a Hydra structured config: a misspelt key or a wrong type
fails at compose time, naming the key), then ``TrainConfig.check`` checks values.

One fact, one place: the task and its action semantics (``task.*``) are defined once and used by
the sim envs and the arm alike; ``sim.*`` says only how the sims run, ``robot.*`` only how the arm is
reached.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any  # noqa: UP035 - OmegaConf's structured configs read these

from rlinf_robot.errors import ConfigError

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
#: hybrid: sim pre-training, then RL on real and sim rollouts in one loop; sim_only / real_only; cotrain:
#: RLinf-Co's recipe (sim pre-training, real-arm demonstrations, then RL in sim with an auxiliary
#: supervised loss on them), the baseline hybrid training is measured against.
MODES = ("hybrid", "sim_only", "real_only", "cotrain")


@dataclass
class TaskConfig:
    name: str = "fr3-reach"
    action_mode: str = "ee_delta"
    control_hz: float = 20.0
    #: Episodes run their full length: the dense per-step reward would make ending on success teach
    #: hovering just outside the radius (README, Policies and algorithms).
    terminate_on_success: bool = False
    options: dict[str, Any] = field(default_factory=dict)  # the task's own options (goal box, ...)


@dataclass
class SimConfig:
    env: str = ""  # default: mujoco/<task.name>
    num_envs: int = 16
    num_shards: int = 2
    stages: int = 2  # pipelined micro-batches (SimEnvWorker)
    transport: str = "link"
    kwargs: dict[str, Any] = field(default_factory=dict)  # extra sim.make options (randomization, ...)


@dataclass
class RobotConfig:
    #: ``sim_local``: start a robot PC on franka-sim here (``robot up --sim``); ``remote``: connect
    #: to ``endpoints``; ``none``: no arm (sim-only jobs).
    kind: str = "sim_local"
    endpoints: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # source names, default arm0, arm1, ...
    client: dict[str, Any] = field(default_factory=dict)  # bridge ClientConfig fields (CURVE keys, ...)
    env: dict[str, Any] = field(default_factory=dict)  # RealEnvConfig fields beyond the task's
    #: sim_local only: the launch YAML the robot PC starts from, and overrides of its blocks
    #: (e.g. ``franka_sim: {dynamics: ...}``, ``franka_node: {relative_dynamics_factor: 0.2}``)
    config: str = "launch/config/sim_robot.yaml"
    overrides: dict[str, Any] = field(default_factory=dict)
    ready_timeout_s: float = 300.0


@dataclass
class PolicyConfig:
    name: str = "mlp"
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class HybridConfig:
    real_fraction: float = 0.25  # share of each update batch's rows that come from the arm
    max_staleness: int = 30  # real data more than this many policy versions old is dropped
    #: A real episode feeds at most this many updates (sim updates run ~10x faster than the arm
    #: produces episodes: unbounded reuse would fit the policy to a handful of them)
    max_real_uses: int = 8
    min_real_episodes: int = 1  # real_only: wait for this many new episodes per update
    real_replay_dir: str = ""  # default: <run>/real_replay (point later jobs at it to reuse it)
    deterministic_real: bool = False  # act on the arm with the policy mean (no exploration)
    real_noise_scale: float = 0.3  # exploration on the arm: the policy's noise times this
    real_demos: int = 20  # cotrain: demonstrations the task's scripted expert records on the arm
    #: ... at this proportional gain (the sim's 1.5 makes it oscillate around goals on an arm that lags)
    demo_gain: float = 0.2


@dataclass
class TeleopConfig:
    """Human interventions (``rlinf_robot.teleop``): the arm workers connect to an operator's two
    endpoints (``rlinf-robot teleop ... --states <states> --commands <commands>``); empty: none."""

    states: str = ""  # the operator's SUB endpoint the arm workers publish their state to
    commands: str = ""  # the operator's PUB endpoint they read commands from
    max_age_s: float = 0.5  # an operator's command counts this long (then the arm is the policy's again)
    reply_wait_s: float = 0.5  # how long an attached (state-answering) operator is waited for, per step
    demo_fraction: float = 0.25  # sac / rlpd: share of each batch from the intervened transitions
    #: off loopback: {secret_file: <learner key>, server_public_file: <operator's public key>}
    curve: dict[str, Any] = field(default_factory=dict)


@dataclass
class WarmStartConfig:
    """SFT then RL: before any RL update the driver records ``demos`` episodes of the task's scripted
    expert in the training sim (DART noise ``noise``: the labels stay the expert's clean actions, the
    states cover where a slightly-off policy drifts) and the actor clones them for ``epochs`` passes
    (L1 on the chunk mean, minibatches of ``minibatch_size``); RL starts from that policy, exploring
    with ``log_std`` (the policy's ``init_log_std`` unless ``policy.kwargs`` sets one: a clone
    explores less than a fresh policy, or its first rollouts undo it). ``demos: 0``: RL from scratch.
    Skipped on ``--resume`` and ``run.init_from`` (the weights come from the checkpoint). PPO jobs
    only (``warm_starts``): the off-policy learners (SAC, RLPD) start from scratch; the job's RLPD
    takes its demonstrations from an operator's interventions."""

    demos: int = 0
    epochs: int = 20
    noise: float = 0.1
    minibatch_size: int = 256
    log_std: float = -1.5


@dataclass
class BudgetConfig:
    wall_s: float | None = 240.0  # hybrid (or only) phase, wall clock
    updates: int | None = None
    pretrain_wall_s: float = 120.0  # hybrid: sim-only pre-training first
    pretrain_target: float = 0.95  # ... until this training success (last pretrain_window episodes)
    pretrain_window: int = 32
    #: stop training once the sim's training success over the last ``pretrain_window`` episodes
    #: reaches this (None: run the whole budget); the stopping rule of benchmarks/learning_speed.py
    target_success: float | None = None


@dataclass
class EvalConfig:
    sim_episodes: int = 64
    arm_episodes: int = 20
    baseline_arm_episodes: int = 10  # hybrid: the pre-trained (sim-only) policy on the arm first


@dataclass
class RunConfig:
    dir: str = "runs"
    id: str | None = None
    resume: str | None = None  # a run dir: continue its step count from its last checkpoint
    #: a run dir whose last checkpoint (weights and optimizer) a new run starts from, pre-training
    #: skipped: fine-tune a sim-trained policy on the arm (``rlinf-robot session``'s hybrid stage).
    #: A resumed run continues from its own checkpoint and ignores it.
    init_from: str | None = None
    checkpoint_every: int = 5  # updates
    wandb: str = "offline"  # offline | online | disabled
    progress: bool = True
    report: bool = True
    learner_nice: int = 5  # with a local robot PC: the learner's workers run at this niceness
    #: Write every real episode (training and evaluation) as a LeRobot v3.0 dataset in
    #: <run>/datasets/<robot>/ (docs/training.md, "Recorded datasets")
    record_real: bool = True


@dataclass
class CalibrationConfig:
    """Calibration records a job trains with, checked before anything starts; their ids go into the
    run's manifest."""

    store: str = ""  # the calibration store's root (default: rlinf-robot's own, see docs/calibration.md)
    #: a sysid record id, or ``latest``: the training sim's dynamics are randomized around its fit
    #: (``DomainRandomization.from_sysid``); empty: the sim's own randomization settings
    sysid: str = ""
    #: a hand-eye record id, or ``latest``: the training sim's camera (wrist for eye-in-hand, front
    #: for eye-to-hand) is placed at its calibrated pose, with the field of view of the intrinsics
    #: record it names; empty: the scene's own cameras
    camera: str = ""
    require: list[str] = field(default_factory=list)  # record kinds that must be valid (e.g. [handeye])
    force: bool = False  # start despite stale or out-of-bounds records (they are still named)


#: ``rlinf-robot session``'s stages, in the order they run (rlinf_robot/orchestrator/session.py).
SESSION_STAGES = ("calibrate", "sysid", "sim", "nominal", "hybrid", "eval")


@dataclass
class SessionConfig:
    """``rlinf-robot session`` (``conf/session.yaml``); ``train`` and ``eval`` ignore it."""

    stages: list[str] = field(default_factory=lambda: list(SESSION_STAGES))
    robot_serial: str = "fr3-sim"  # the arm's records in the calibration store
    camera_serial: str = "sim-camera"
    #: redo calibrations even when valid records exist (stale ones stop the session otherwise)
    recalibrate: bool = False
    calibrate_views: int = 12  # embedded default: rendered ChArUco views for intrinsics
    calibrate_poses: int = 10  # ... and arm poses for hand-eye
    #: which camera hand-eye calibrates: ``eye_to_hand`` the fixed front camera (the board on the
    #: hand), ``eye_in_hand`` the wrist camera; the sim stage places that camera where it was found
    handeye_mode: str = "eye_to_hand"
    sysid_host: str = ""  # a real arm's FCI address for the excitation (franky); empty: franka-sim
    sysid_duration_s: float = 4.0
    sysid_max_evals: int = 2
    sim_wall_s: float = 90.0  # the sim stage's training budget (sysid-randomized sim)
    hybrid_wall_s: float = 180.0  # the hybrid stage's (from the sim stage's checkpoint)


@dataclass
class TrainConfig:
    mode: str = "hybrid"
    seed: int = 0
    task: TaskConfig = field(default_factory=TaskConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    robot: RobotConfig = field(default_factory=RobotConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    algorithm: dict[str, Any] = field(default_factory=dict)  # checked by the recipe (name: ppo, ...)
    hybrid: HybridConfig = field(default_factory=HybridConfig)
    teleop: TeleopConfig = field(default_factory=TeleopConfig)
    warm_start: WarmStartConfig = field(default_factory=WarmStartConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    run: RunConfig = field(default_factory=RunConfig)
    cluster: dict[str, Any] = field(default_factory=dict)  # a conf/cluster/*.yaml (SchedulerConfig)
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    session: SessionConfig = field(default_factory=SessionConfig)

    @property
    def uses_sim(self) -> bool:
        return self.mode != "real_only"

    @property
    def uses_arm(self) -> bool:
        return self.mode != "sim_only"

    @property
    def trains_on_arm(self) -> bool:
        """Whether RL rollouts run on the arm (cotrain only takes demonstrations and evaluates there)."""
        return self.mode in ("hybrid", "real_only")

    @property
    def pretrains(self) -> bool:
        """Modes that pre-train in sim first and measure that policy on the arm (the baseline)."""
        return self.mode in ("hybrid", "cotrain")

    @property
    def warm_starts(self) -> bool:
        """Whether a fresh run clones the expert before RL (``WarmStartConfig``)."""
        return self.warm_start.demos > 0 and self.uses_sim and self.algorithm.get("name") == "ppo"

    @property
    def sim_env(self) -> str:
        return self.sim.env or f"mujoco/{self.task.name}"

    def real_env_options(self) -> dict[str, Any]:
        """``RealEnvConfig`` fields of this job's arm episodes (the task's, on top of
        ``robot.env``): the job's arm workers and ``rlinf-robot record --run`` alike."""
        return {
            **dict(self.robot.env),
            "task": self.task.name,
            "task_options": dict(self.task.options),
            "action_mode": self.task.action_mode,
            "control_hz": self.task.control_hz,
            "terminate_on_success": self.task.terminate_on_success,
        }

    def sim_make_kwargs(self) -> dict[str, Any]:
        """``sim.make`` options of this job's sim envs (the task's action mode, rate and episode
        rule on top of ``sim.kwargs``): the training sim and the replay's sim twin alike."""
        out = {
            **dict(self.sim.kwargs),
            "action_mode": self.task.action_mode,
            "control_hz": self.task.control_hz,
            "terminate_on_success": self.task.terminate_on_success,
        }
        if self.task.options:
            out["task_options"] = dict(self.task.options)
        return out

    def check(self) -> TrainConfig:
        """Values the schema's types cannot express; raises one ``ConfigError`` naming the key."""
        bad = []
        if self.mode not in MODES:
            bad.append(f"mode must be one of {list(MODES)}, got {self.mode!r}")
        if not 0.0 <= self.hybrid.real_fraction <= 1.0:
            bad.append(f"hybrid.real_fraction must be in [0, 1], got {self.hybrid.real_fraction}")
        seen_by = self.task.options.get("goal_camera")
        if seen_by and self.uses_arm and seen_by not in self.robot.env.get("camera_poses", {}):
            bad.append(
                f"task.options.goal_camera={seen_by}: the arm's episodes measure the goal through that "
                f"camera, so robot.env.camera_poses.{seen_by} must say where it stands (a 4x4 pose in the base frame)"
            )
        if self.session.handeye_mode not in ("eye_in_hand", "eye_to_hand"):
            bad.append(
                f"session.handeye_mode must be eye_in_hand or eye_to_hand, got {self.session.handeye_mode!r}"
            )
        if self.mode == "hybrid" and not 0.0 < self.hybrid.real_fraction < 1.0:
            bad.append("hybrid.real_fraction must be in (0, 1) for a hybrid job")
        if self.mode == "cotrain" and self.algorithm.get("name") != "ppo":
            bad.append(
                f"mode=cotrain (RLinf-Co) trains with algorithm=ppo, got {self.algorithm.get('name')!r}"
            )
        if self.algorithm.get("name") in ("sac", "rlpd") and self.policy.name != "mlp":
            bad.append(
                f"algorithm={self.algorithm.get('name')} trains the mlp policy (a tanh-squashed Gaussian "
                f"with a state critic); policy={self.policy.name} trains with algorithm=ppo"
            )
        if not self.hybrid.demo_gain > 0:
            bad.append(f"hybrid.demo_gain must be positive, got {self.hybrid.demo_gain}")
        t = self.teleop
        if bool(t.states) != bool(t.commands):
            bad.append("teleop needs both teleop.states and teleop.commands (or neither)")
        if not (t.max_age_s > 0 and t.reply_wait_s >= 0):
            bad.append(
                f"teleop.max_age_s must be > 0 and reply_wait_s >= 0, got {t.max_age_s}, {t.reply_wait_s}"
            )
        if not 0.0 <= t.demo_fraction < 1.0:
            bad.append(f"teleop.demo_fraction must be in [0, 1), got {t.demo_fraction}")
        if self.mode == "cotrain" and self.hybrid.real_demos < 1:
            bad.append("mode=cotrain needs hybrid.real_demos >= 1")
        if self.hybrid.max_staleness < 0:
            bad.append(f"hybrid.max_staleness must be >= 0, got {self.hybrid.max_staleness}")
        if self.sim.num_envs < 1 or self.sim.num_envs % max(self.sim.num_shards, 1):
            bad.append(f"sim.num_envs ({self.sim.num_envs}) must be a positive multiple of sim.num_shards")
        if not 1 <= self.sim.stages <= max(self.sim.num_shards, 1):
            bad.append(f"sim.stages must be in [1, sim.num_shards={self.sim.num_shards}]")
        if self.robot.kind not in ("sim_local", "remote", "none"):
            bad.append(f"robot.kind must be sim_local, remote or none, got {self.robot.kind!r}")
        if self.uses_arm and self.robot.kind == "none":
            bad.append(f"mode={self.mode} needs an arm: robot.kind must be sim_local or remote")
        if self.uses_arm and self.robot.kind == "remote" and not self.robot.endpoints:
            bad.append("robot.kind=remote needs robot.endpoints (tcp://robot-pc:5555, ...)")
        w = self.warm_start
        if w.demos < 0 or w.epochs < 1 or w.minibatch_size < 2 or not 0.0 <= w.noise <= 1.0:
            bad.append(
                "warm_start needs demos >= 0, epochs >= 1, minibatch_size >= 2 and noise in [0, 1], got "
                f"{w.demos}, {w.epochs}, {w.minibatch_size}, {w.noise}"
            )
        if not -5.0 <= w.log_std <= 2.0:  # NaN fails too
            bad.append(f"warm_start.log_std must be in [-5, 2], got {w.log_std}")
        if w.demos > 0 and not self.uses_sim:
            bad.append(
                f"warm_start.demos > 0 records the scripted expert in sim: mode={self.mode} has no sim"
            )
        t = self.budget.target_success
        if t is not None and not (0.0 < t <= 1.0 and self.uses_sim):
            bad.append(f"budget.target_success must be in (0, 1] and needs sim training, got {t}")
        if self.budget.wall_s is None and self.budget.updates is None:
            bad.append("set budget.wall_s or budget.updates (or both)")
        if self.run.checkpoint_every < 1:
            bad.append(f"run.checkpoint_every must be >= 1, got {self.run.checkpoint_every}")
        if self.run.wandb not in ("offline", "online", "disabled"):
            bad.append(f"run.wandb must be offline, online or disabled, got {self.run.wandb!r}")
        unknown_stages = sorted(set(self.session.stages) - set(SESSION_STAGES))
        if unknown_stages:
            bad.append(f"session.stages: unknown {unknown_stages}; stages are {list(SESSION_STAGES)}")
        if not self.algorithm.get("name"):
            bad.append("algorithm.name is missing (algorithm=ppo, ...)")
        if bad:
            raise ConfigError("train config: " + "; ".join(bad))
        return self


def _cell_camera(name: str) -> list:
    """``${cell_camera:front}`` in a config: where the embedded default's cell has that camera (the
    pose its rendered ChArUco views are made from, ``calibration.scene``), as a 4x4 list."""
    from calibration.scene import CELL_CAMERAS

    if name not in CELL_CAMERAS:
        raise ConfigError(
            f"cell_camera: unknown camera {name!r}; the embedded cell has {sorted(CELL_CAMERAS)}"
        )
    return CELL_CAMERAS[name].tolist()


def _register_resolvers() -> None:
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("cell_camera"):
        OmegaConf.register_new_resolver("cell_camera", _cell_camera)


def compose(overrides: list[str] | tuple[str, ...] = (), config_name: str = "train") -> TrainConfig:
    """``train.yaml`` + overrides -> a checked ``TrainConfig`` (Hydra's Compose API, so the job's run
    directory is ours, not Hydra's working-directory change). Any problem: one ``ConfigError``."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.config_store import ConfigStore
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    ConfigStore.instance().store(name="train_schema", node=TrainConfig)
    _register_resolvers()
    _check_group_overrides(overrides)
    overrides = _free_form(overrides)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = hydra_compose(config_name=config_name, overrides=list(overrides))
        obj = OmegaConf.to_object(cfg)
    except (OmegaConfBaseException, Exception) as e:  # Hydra raises its own and OmegaConf's errors
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(f"train config: {_one_line(e)}") from None
    finally:
        GlobalHydra.instance().clear()
    extra = _extra_keys(obj)
    if extra:  # ``+key=value`` adds keys Hydra's struct mode lets through; the schema has none of them
        raise ConfigError(
            f"train config: unknown key(s) {extra} (a typo? `+` adds keys the schema does not have)"
        )
    return obj.check()


def _check_group_overrides(overrides: list[str] | tuple[str, ...]) -> None:
    """A config group (``robot``, ``mode``, ...) needs an option's name: Hydra's own error for
    ``mode=null`` names no key."""
    for o in overrides:
        key, sep, value = o.partition("=")
        group = key.lstrip("+~")
        if sep and (CONF_DIR / group).is_dir() and value.strip() in ("", "null", "None"):
            options = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
            raise ConfigError(f"train config: {group} must name one of {options}, got {value.strip()!r}")


def _dict_fields(cls: type, prefix: str = "") -> list[str]:
    """Dotted paths of the schema's free-form ``dict`` fields (``robot.client``, ``teleop.curve``...)."""
    import typing

    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if typing.get_origin(hint) is dict or hint is dict:
            out.append(prefix + f.name)
        elif dataclasses.is_dataclass(hint):
            out += _dict_fields(hint, f"{prefix}{f.name}.")
    return out


def _free_form(overrides: list[str] | tuple[str, ...]) -> list[str]:
    """Overrides of keys inside a free-form ``dict`` field set or add them (Hydra's ``++``): its keys
    are whatever the consumer takes (``robot.client.curve.secret_file=...``: the bridge client's
    CURVE keys), so struct mode's "not in struct" would only refuse a documented setting."""
    # a config group's own node (``algorithm``, ``cluster``) is checked by what it selects: not these
    fields = [f for f in _dict_fields(TrainConfig) if not (CONF_DIR / f).is_dir()]
    out = []
    for o in overrides:
        key, sep, _ = o.partition("=")
        if sep and key[:1] not in "+~" and any(key.startswith(f + ".") for f in fields):
            o = "++" + o
        out.append(o)
    return out


def _extra_keys(obj: Any, prefix: str = "") -> list[str]:
    """Attributes of the composed dataclasses that are not fields of their schema."""
    if not dataclasses.is_dataclass(obj):
        return []
    names = {f.name for f in dataclasses.fields(obj)}
    out = [prefix + k for k in vars(obj) if k not in names]
    for f in dataclasses.fields(obj):
        out += _extra_keys(getattr(obj, f.name), f"{prefix}{f.name}.")
    return out


def to_yaml(cfg: TrainConfig) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.structured(cfg))


def from_yaml(path: str | Path) -> TrainConfig:
    """A run's saved ``config.yaml`` back into a checked ``TrainConfig`` (for ``--resume``, ``eval``)."""
    from omegaconf import OmegaConf

    try:
        merged = OmegaConf.merge(OmegaConf.structured(TrainConfig), OmegaConf.load(str(path)))
        return OmegaConf.to_object(merged).check()
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(f"{path}: {_one_line(e)}") from None


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    cause = e.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({' '.join(str(cause).split())})"
    return text
