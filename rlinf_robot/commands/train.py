"""``rlinf-robot train [key=value ...]``: a training job (Hydra config ``rlinf_robot/conf/train.yaml``).

The default is the hybrid loop on the embedded default: sim pre-training, then real-arm (franka-sim
behind ROS 2 and the bridge, started here) and MuJoCo sim rollouts in one job, then evaluation;
everything lands in ``runs/<id>/`` (config, manifest, metrics.jsonl, wandb, checkpoints, the real
replay, report.html). Overrides are Hydra's: ``mode=sim_only``, ``budget.wall_s=60``,
``robot=fr3 robot.endpoints=[tcp://robot-pc:5555]``, ``algorithm.lr=3e-4``; ``--resume runs/<id>``
continues a run's step count from its last checkpoint. A bad key or value is one error naming it,
before anything starts; an unreachable robot is one error naming the endpoint.
"""

from __future__ import annotations

HELP = "train a policy: hybrid (default), sim_only or real_only; Hydra overrides key=value"


def add_arguments(parser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. mode=sim_only budget.wall_s=60")
    parser.add_argument("--resume", default=None, help="continue runs/<id> from its last checkpoint")
    parser.add_argument("--print-config", action="store_true", help="print the composed config and exit")


def run(args) -> int:
    from calibration.store import CalibrationInvalid
    from rlinf_robot.errors import ConfigError, RobotUnreachable
    from rlinf_robot.orchestrator.metrics import own_wandb_service

    own_wandb_service()
    try:
        result = train(list(args.overrides), resume=args.resume, print_only=args.print_config)
    except (ConfigError, RobotUnreachable, CalibrationInvalid) as e:
        print(f"rlinf-robot train: {e}")
        return 2
    if result is None:
        return 0
    return 130 if result.interrupted else 0


def train(overrides: list[str], resume: str | None = None, print_only: bool = False):
    from rlinf_robot.orchestrator.config import compose, from_yaml, to_yaml

    if resume:
        from pathlib import Path

        from omegaconf import OmegaConf

        saved = from_yaml(Path(resume) / "config.yaml")
        base = OmegaConf.structured(saved)
        # the saved config, then the command line's overrides (e.g. a larger budget)
        cfg = OmegaConf.to_object(OmegaConf.merge(base, OmegaConf.from_dotlist(list(overrides))))
        cfg.run.resume = str(resume)
        cfg = cfg.check()
    else:
        cfg = compose(overrides)
    if print_only:
        print(to_yaml(cfg))
        return None
    from rlinf_robot.orchestrator.job import TrainJob

    return TrainJob(cfg).run()
