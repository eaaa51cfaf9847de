"""Print the placement plan of a cluster config (which rank gets which accelerators and cores) without
starting Ray. ``--nodes/--gpus-per-node/--cpus-per-node`` re-plan the same groups on another cluster."""

from __future__ import annotations

HELP = "show the placement plan of conf/cluster/*.yaml (no Ray needed)"


def add_arguments(parser) -> None:
    parser.add_argument("config", help="a cluster config, e.g. rlinf_robot/conf/cluster/hybrid.yaml")
    parser.add_argument("--nodes", type=int, help="plan on this many nodes instead of the config's resources")
    parser.add_argument("--gpus-per-node", type=int, default=0)
    parser.add_argument("--cpus-per-node", type=int, default=8)
    parser.add_argument("--affinity", help="override placement.affinity (off | auto)")


def run(args) -> int:
    from dataclasses import replace

    from rlinf_robot.errors import ConfigError
    from rlinf_robot.scheduler.config import SchedulerConfig
    from rlinf_robot.scheduler.resources import ResourceSpec

    try:
        cfg = SchedulerConfig.from_yaml(args.config)
        if args.affinity:
            cfg = replace(cfg, affinity=args.affinity)
        res = ResourceSpec.uniform(args.nodes, args.gpus_per_node, args.cpus_per_node) if args.nodes else None
        print(cfg.plan(res).describe())
    except ConfigError as exc:
        print(f"error: {exc}")
        return 1
    return 0
