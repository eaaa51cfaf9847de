"""``rlinf-robot train [key=value ...]``: a training job (Hydra config ``rlinf_robot/conf/train.yaml``).

The default is the hybrid loop on the embedded default: sim pre-training, then real-arm (franka-sim
behind ROS 2 and the bridge, started here) and MuJoCo sim rollouts in one job, then evaluation;
everything lands in ``runs/<id>/`` (config, manifest, metrics.jsonl, wandb, checkpoints, the real
replay, report.html). Overrides are Hydra's: ``mode=sim_only``, ``budget.wall_s=60``,
``robot=fr3 robot.endpoints=[tcp://robot-pc:5555]``, ``algorithm.lr=3e-4``; ``--resume runs/<id>``
continues a run's step count from its last checkpoint. A bad key or value is one error naming it,
before anything starts; an unreachable robot is one error naming the endpoint.

``--recipe NAME`` runs a registered recipe instead (``push_sft``, ``lift_sft``, ``reach_ppo``,
``reach_sac``: docs/learning.md), in one process on the sim, and saves it as a run dir
(``rlinf_robot/orchestrator/recipe_runs.py``); the overrides are then the recipe's own fields
(``demo_episodes=64``, ``sft.epochs=30``) plus ``run.dir`` / ``run.id``.
"""

from __future__ import annotations

HELP = "train a policy: hybrid (default), sim_only or real_only; Hydra overrides key=value"


def add_arguments(parser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. mode=sim_only budget.wall_s=60")
    parser.add_argument("--resume", default=None, help="continue runs/<id> from its last checkpoint")
    parser.add_argument("--print-config", action="store_true", help="print the composed config and exit")
    parser.add_argument(
        "--recipe", default="", help="run a registered recipe (push_sft, lift_sft, ...) instead"
    )
    parser.add_argument("--seed", type=int, default=0, help="--recipe: the training seed")
    parser.add_argument("--budget", type=float, default=900.0, help="--recipe: wall-time budget, s")


def run(args) -> int:
    from calibration.store import CalibrationInvalid
    from rlinf_robot.errors import ConfigError, RobotUnreachable
    from rlinf_robot.orchestrator.metrics import own_wandb_service

    if args.recipe:
        try:
            train_recipe(args.recipe, list(args.overrides), args.seed, args.budget)
        except ConfigError as e:
            print(f"rlinf-robot train: {e}")
            return 2
        return 0
    own_wandb_service()
    try:
        result = train(list(args.overrides), resume=args.resume, print_only=args.print_config)
    except (ConfigError, RobotUnreachable, CalibrationInvalid) as e:
        print(f"rlinf-robot train: {e}")
        return 2
    if result is None:
        return 0
    return 130 if result.interrupted else 0


def train_recipe(name: str, overrides: list[str], seed: int, budget_s: float):
    """``--recipe``: ``key=value`` overrides of the recipe's fields (``a.b=v`` for a nested config),
    values read as YAML; ``run.dir`` / ``run.id`` say where the run dir goes."""
    import dataclasses

    import yaml

    from rlinf_robot.algorithms.recipes import available_recipes, get_recipe
    from rlinf_robot.errors import ConfigError
    from rlinf_robot.orchestrator.recipe_runs import run_recipe_job

    if name not in available_recipes():
        raise ConfigError(f"unknown recipe {name!r}; known: {available_recipes()}")
    base = get_recipe(name)
    fields: dict = {}
    where = {"run.dir": "runs", "run.id": None}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"override {item!r} is not key=value")
        value = yaml.safe_load(raw)
        if key in where:
            where[key] = str(value)
            continue
        head, _, rest = key.partition(".")
        if not hasattr(base, head):
            raise ConfigError(f"recipe {name} has no field {head!r}")
        if rest:
            inner = fields.get(head, getattr(base, head))
            if not dataclasses.is_dataclass(inner) or not hasattr(inner, rest):
                raise ConfigError(f"recipe {name}: {key!r} names no field")
            fields[head] = dataclasses.replace(inner, **{rest: value})
        else:
            fields[head] = value
    return run_recipe_job(name, seed, budget_s, where["run.dir"], where["run.id"], fields)


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
