"""``rlinf-robot record --endpoint tcp://robot-pc:5555 --out datasets/reach --episodes 20``: drive the
arm through the bridge for ``--episodes`` episodes and write each, as it ends, to a LeRobot v3.0
dataset in ``<out>/<name>/`` (the same crash-safe writer the training job uses; docs/training.md,
"Recorded datasets"), recorded as ``record`` episodes.

Who acts (``--actor``): ``policy`` (``--run runs/<id>``: that run's task and policy, with the weights
of its latest checkpoint; the policy's mean unless ``--explore``), ``expert`` (the task's scripted
expert at ``--gain``) or ``hold`` (the arm stays put). With ``--teleop-states``/``--teleop-commands``
an operator (``rlinf-robot teleop ...``) can take over at any step; with ``--actor hold`` the operator
alone drives, and the steps it took are flagged ``intervened``."""

from __future__ import annotations

HELP = "drive the arm with a policy, the scripted expert or a teleop operator and record a LeRobot dataset"


def add_arguments(parser) -> None:
    parser.add_argument("--endpoint", required=True, help="the robot PC's bridge, tcp://HOST:PORT")
    parser.add_argument("--out", required=True, help="dataset root: episodes go to <out>/<name>/")
    parser.add_argument("--name", default="arm0", help="the robot's name (source real:<name>)")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--actor", choices=("policy", "expert", "hold"), default="expert")
    parser.add_argument("--run", default="", help="a run dir: its task, policy and latest checkpoint")
    parser.add_argument(
        "--task", default="fr3-reach", help="without --run: the task (rlinf_robot/envs/tasks)"
    )
    parser.add_argument("--gain", type=float, default=0.2, help="expert: proportional gain per tick")
    parser.add_argument(
        "--explore", action="store_true", help="policy: sample instead of acting with the mean"
    )
    parser.add_argument("--teleop-states", default="", help="an operator's states endpoint")
    parser.add_argument("--teleop-commands", default="", help="an operator's commands endpoint")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=3600.0, help="give up after this many seconds")
    parser.add_argument("--curve-secret-file", default="", help="the learner's CURVE secret key file")
    parser.add_argument("--curve-server-public-file", default="", help="the robot PC's CURVE public key file")
    parser.add_argument(
        "--teleop-public-file", default="", help="the operator's CURVE public key (off loopback)"
    )


def _policy_from_run(run_dir):
    """(task options for RealEnvConfig, policy name, policy kwargs, checkpoint weights file) of a run."""
    from pathlib import Path

    from rlinf_robot.errors import ConfigError
    from rlinf_robot.orchestrator.config import from_yaml
    from rlinf_robot.orchestrator.job import latest_checkpoint

    run = Path(run_dir)
    if not (run / "config.yaml").exists():
        raise ConfigError(f"{run} is not a run dir (no config.yaml)")
    cfg = from_yaml(run / "config.yaml")
    ckpt = latest_checkpoint(run)
    if ckpt is None:
        raise ConfigError(f"{run} has no checkpoint yet")
    weights = next(
        (
            ckpt / "actor" / n
            for n in ("policy.safetensors", "model.safetensors")
            if (ckpt / "actor" / n).exists()
        ),
        None,
    )
    if weights is None:
        raise ConfigError(
            f"{ckpt / 'actor'} holds no policy weights (policy.safetensors or model.safetensors)"
        )
    return cfg.real_env_options(), cfg.policy.name, dict(cfg.policy.kwargs), weights


def run(args) -> int:
    from rlinf_robot.errors import ConfigError

    if args.episodes < 1:
        print("rlinf-robot record: --episodes must be >= 1")
        return 2
    if bool(args.teleop_states) != bool(args.teleop_commands):
        print("rlinf-robot record: give both --teleop-states and --teleop-commands (or neither)")
        return 2
    try:
        if args.run:
            env, policy, policy_kwargs, weights = _policy_from_run(args.run)
        elif args.actor == "policy":
            raise ConfigError("--actor policy needs --run runs/<id> (the policy and its weights)")
        else:
            env, policy, policy_kwargs, weights = {"task": args.task}, "mlp", {}, None
    except ConfigError as e:
        print(f"rlinf-robot record: {e}")
        return 2

    from safetensors.torch import load_file

    from rlinf_robot.workers.real_env import RealEnvWorker

    client = {"connect_timeout_s": 30.0}
    if args.curve_secret_file:
        client["curve"] = {
            "secret_file": args.curve_secret_file,
            "server_public_file": args.curve_server_public_file,
        }
    teleop = {"states": args.teleop_states, "commands": args.teleop_commands} if args.teleop_states else None
    if teleop is not None and args.teleop_public_file:
        teleop["curve"] = {
            "secret_file": args.curve_secret_file,
            "server_public_file": args.teleop_public_file,
        }
    worker = RealEnvWorker(
        args.endpoint,
        env=env,
        policy=policy,
        policy_kwargs=policy_kwargs,
        source=f"real:{args.name}",
        client=client,
        seed=args.seed,
        record_dir=args.out,
        teleop=teleop,
    )
    try:
        if weights is not None:
            worker.policy.load_state_dict(load_file(str(weights)))
            worker._take_newest_weights()
        print(
            f"recording {args.episodes} episodes ({args.actor}) from {args.endpoint} into {args.out}/{args.name}"
        )
        episodes = worker.record(
            args.episodes,
            actor=args.actor,
            deterministic=not args.explore,
            timeout_s=args.timeout,
            seed=args.seed,
            expert_gain=args.gain,
        )
    finally:
        stats = worker.stats()
        worker.close()
    for i, ep in enumerate(episodes):
        m = ep["meta"]
        flag = f" aborted: {m['reason']}" if m["aborted"] else ""
        print(
            f"episode {i}: {m['decisions']} decisions, success {m['success']}, "
            f"{m['intervened_steps']} intervened{flag}"
        )
    print(
        f"recorded {stats['recorded']} episodes ({stats['record_errors']} write errors) in {args.out}/{args.name}"
    )
    return 0 if len(episodes) == args.episodes and not stats["record_errors"] else 1
