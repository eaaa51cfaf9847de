"""``rlinf-robot demo`` (``make demo``): the hybrid job on the embedded default.

A robot PC comes up on franka-sim (``robot up --sim``: franka_node on franky, camera_node,
bridge_node; franka-sim serves an FR3 with more damping and friction and a payload), a Ray cluster
on loopback, then: PPO pre-training in batched MuJoCo sim envs, the sim-only policy evaluated on the
arm (the baseline), the hybrid loop (real-arm and sim rollouts in one job), evaluation on sim and on
the arm with 95 % intervals, and ``runs/<id>/report.html``. Config: ``rlinf_robot/conf/demo.yaml``
(any ``key=value`` override works, as for ``train``). Exits non-zero when a stage fails: the arm's
episodes could not run, pre-training missed its target, or the job was interrupted.
"""

from __future__ import annotations

HELP = "the hybrid loop on the embedded default (MuJoCo sim + the franka-sim arm via ROS 2 and the bridge)"


def add_arguments(parser) -> None:
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. budget.wall_s=120")


def run(args) -> int:
    from rlinf_robot.errors import ConfigError
    from rlinf_robot.orchestrator.config import compose
    from rlinf_robot.orchestrator.job import TrainJob
    from rlinf_robot.orchestrator.metrics import own_wandb_service

    own_wandb_service()
    try:
        cfg = compose(list(args.overrides), config_name="demo")
    except ConfigError as e:
        print(f"rlinf-robot demo: {e}")
        return 2
    print(
        "rlinf-robot demo: hybrid training on MuJoCo sim envs and the franka-sim arm (ROS 2 + bridge)",
        flush=True,
    )
    result = TrainJob(cfg).run()
    return verdict(result, cfg)


def verdict(result, cfg) -> int:
    """Print the outcome; non-zero when the demo did not do what it says."""
    ev = result.eval
    problems = []
    if result.interrupted:
        problems.append("interrupted")
    if not result.state.pretrained:
        problems.append("sim pre-training did not finish")
    arm = ev.get("arm")
    if cfg.eval.arm_episodes and (arm is None or arm["n"] < cfg.eval.arm_episodes):
        problems.append(
            f"the arm evaluation ran {0 if arm is None else arm['n']} of {cfg.eval.arm_episodes} episodes"
        )
    episodes = result.state.episodes
    if not any(k.startswith("real:") and v for k, v in episodes.items()):
        problems.append("no real episode was trained on")
    print("\ndemo summary")
    for key in ("sim", "baseline_arm", "arm"):
        if key in ev:
            r = ev[key]
            print(
                f"  {key:13s}: {r['rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] ({r['successes']}/{r['n']})"
            )
    print(f"  episodes     : {episodes}")
    print(f"  report       : {result.report}")
    if problems:
        print(f"  FAILED       : {'; '.join(problems)}")
        return 1
    return 0
