"""``rlinf-robot session [key=value ...]``: real-to-sim-to-real fine-tuning in one run dir.

Stages calibrate -> sysid -> sim -> nominal -> hybrid -> eval (``session.stages``; leave one out to
skip it): calibration records checked in the store (stale ones stop the session with the reason,
missing ones are made), the arm's dynamics identified when no valid fit exists, PPO in a sim
randomized around the fit, the same budget on the nominal sim for comparison, hybrid fine-tuning on
the arm from the sim stage's checkpoint, and every stage's policy evaluated on the arm. Config:
``rlinf_robot/conf/session.yaml`` (Hydra overrides as for ``train``); ``--resume runs/<id>`` runs
the stages not done yet. Everything lands in ``runs/<id>-session/``, with ``report.html``.
"""

from __future__ import annotations

HELP = "real-to-sim-to-real: calibrate, sysid, sim training, hybrid fine-tuning, eval on the arm"


def add_arguments(parser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. session.hybrid_wall_s=120")
    parser.add_argument("--resume", default=None, help="run the stages runs/<id> has not done yet")


def run(args) -> int:
    from calibration.store import CalibrationInvalid
    from rlinf_robot.errors import ConfigError, RobotUnreachable
    from rlinf_robot.orchestrator.config import compose
    from rlinf_robot.orchestrator.metrics import own_wandb_service
    from rlinf_robot.orchestrator.session import Session, resume_config

    own_wandb_service()
    try:
        if args.resume:
            cfg = resume_config(args.resume, list(args.overrides))
        else:
            cfg = compose(list(args.overrides), config_name="session")
        session = Session(cfg)
        state = session.run()
    except (ConfigError, RobotUnreachable, CalibrationInvalid) as e:
        print(f"rlinf-robot session: {e}")
        return 2
    except KeyboardInterrupt:
        print("rlinf-robot session: interrupted; `--resume` runs the stages not done yet")
        return 130
    arm = state.done.get("eval", {}).get("arm", {})
    for name, r in arm.items():
        print(
            f"  {name:8s}: {r['rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] ({r['successes']}/{r['n']})"
        )
    print(f"  report  : {session.dir / 'report.html'}")
    return 0
