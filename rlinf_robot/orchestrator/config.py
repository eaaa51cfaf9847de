"""The training job's configuration: Hydra composes ``rlinf_robot/conf/train.yaml`` (groups ``task``,
``sim``, ``robot``, ``policy``, ``algorithm``, ``cluster``, ``mode``) with ``key=value`` overrides,
checked against the typed schema below (a Hydra structured config: a misspelt key or a wrong type
fails at compose time, naming the key), then ``TrainConfig.check`` checks values.

One fact, one place: the task and its action semantics (``task.*``) are defined once and used by
the sim envs and the arm alike; ``sim.*`` says only how the sims run, ``robot.*`` only how the arm is
reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any  # noqa: UP035 - OmegaConf's structured configs read these

from rlinf_robot.errors import ConfigError

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
MODES = ("hybrid", "sim_only", "real_only")


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


@dataclass
class BudgetConfig:
    wall_s: float | None = 240.0  # hybrid (or only) phase, wall clock
    updates: int | None = None
    pretrain_wall_s: float = 120.0  # hybrid: sim-only pre-training first
    pretrain_target: float = 0.95  # ... until this training success (last pretrain_window episodes)
    pretrain_window: int = 32


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
    checkpoint_every: int = 5  # updates
    wandb: str = "offline"  # offline | online | disabled
    progress: bool = True
    report: bool = True
    learner_nice: int = 5  # with a local robot PC: the learner's workers run at this niceness
    #: Write every real episode (training and evaluation) as a LeRobot v3.0 dataset in
    #: <run>/datasets/<robot>/ (docs/training.md, "Recorded datasets")
    record_real: bool = True


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
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    run: RunConfig = field(default_factory=RunConfig)
    cluster: dict[str, Any] = field(default_factory=dict)  # a conf/cluster/*.yaml (SchedulerConfig)

    @property
    def uses_sim(self) -> bool:
        return self.mode != "real_only"

    @property
    def uses_arm(self) -> bool:
        return self.mode != "sim_only"

    @property
    def sim_env(self) -> str:
        return self.sim.env or f"mujoco/{self.task.name}"

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
        if self.mode == "hybrid" and not 0.0 < self.hybrid.real_fraction < 1.0:
            bad.append("hybrid.real_fraction must be in (0, 1) for a hybrid job")
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
        if self.budget.wall_s is None and self.budget.updates is None:
            bad.append("set budget.wall_s or budget.updates (or both)")
        if self.run.checkpoint_every < 1:
            bad.append(f"run.checkpoint_every must be >= 1, got {self.run.checkpoint_every}")
        if self.run.wandb not in ("offline", "online", "disabled"):
            bad.append(f"run.wandb must be offline, online or disabled, got {self.run.wandb!r}")
        if not self.algorithm.get("name"):
            bad.append("algorithm.name is missing (algorithm=ppo, ...)")
        if bad:
            raise ConfigError("train config: " + "; ".join(bad))
        return self


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
    return obj.check()


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
