"""``rlinf-robot eval runs/<id> [key=value ...]``: a run's last checkpoint on sim and/or the arm,
deterministic, each success rate with its 95 % confidence interval (Wilson). Uses the run's own
config (the arm it trained with: for the embedded default a robot PC on franka-sim is started),
with overrides such as ``eval.arm_episodes=20`` or ``robot=fr3 robot.endpoints=[...]`` to deploy on
another arm. Results go to ``runs/<id>/eval-<time>.json``.
"""

from __future__ import annotations

HELP = "evaluate a run's checkpoint on sim and/or the arm (success with a 95 %% CI)"


def add_arguments(parser) -> None:
    parser.add_argument("run_dir", help="a run directory (runs/<id>)")
    parser.add_argument("overrides", nargs="*", help="Hydra-style overrides of the run's config")
    parser.add_argument("--on", choices=("sim", "arm", "both"), default="both", help="where to evaluate")


def run(args) -> int:
    from rlinf_robot.errors import ConfigError, RobotUnreachable

    try:
        out = evaluate(args.run_dir, list(args.overrides), args.on)
    except (ConfigError, RobotUnreachable) as e:
        print(f"rlinf-robot eval: {e}")
        return 2
    for key, r in out.items():
        print(
            f"{key}: success {r['rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] ({r['successes']}/{r['n']})"
        )
    return 0


def evaluate(run_dir: str, overrides: list[str], on: str = "both") -> dict:
    from pathlib import Path

    from omegaconf import OmegaConf

    from rlinf_robot.orchestrator.config import from_yaml
    from rlinf_robot.orchestrator.job import TrainJob

    saved = from_yaml(Path(run_dir) / "config.yaml")
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(saved), OmegaConf.from_dotlist(overrides)))
    cfg.run.resume = str(run_dir)
    cfg.run.wandb = "disabled"
    cfg.run.progress = False
    if on in ("arm", "both") and cfg.robot.kind == "none":  # a sim-only run deployed on the arm
        cfg.robot.kind = "sim_local"
        cfg.robot.config = cfg.robot.config or "launch/config/sim_robot.yaml"
        from rlinf_robot.orchestrator.config import compose

        cfg.robot.overrides = compose([]).robot.overrides  # the embedded default's arm
    if on in ("arm", "both"):
        cfg.mode = "hybrid"  # the job needs both groups; nothing is trained
    cfg.check()
    return TrainJob(cfg).evaluate_only(("sim", "arm") if on == "both" else (on,))
