"""``rlinf-robot`` command line: one subcommand per module in ``rlinf_robot/commands``.

Subcommands are listed in a registry (name -> module path). Building the parser imports every
command module (each declares its own arguments and help), so a command module imports only light
things at module level; what a command needs beyond that (torch, Ray, MuJoCo, franky, rclpy) is
imported inside its ``run``, and ``rlinf-robot robot up`` on a robot PC never imports torch or Ray.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

#: name -> module exposing ``add_arguments(parser)`` and ``run(args) -> int``, plus ``HELP``.
COMMANDS: dict[str, str] = {
    "calibrate": "rlinf_robot.commands.calibrate",
    "demo": "rlinf_robot.commands.demo",
    "doctor": "rlinf_robot.commands.doctor",
    "eval": "rlinf_robot.commands.eval",
    "keys": "rlinf_robot.commands.keys",
    "plan": "rlinf_robot.commands.plan",
    "record": "rlinf_robot.commands.record",
    "replay": "rlinf_robot.commands.replay",
    "robot": "rlinf_robot.commands.robot",
    "session": "rlinf_robot.commands.session",
    "teleop": "rlinf_robot.commands.teleop",
    "train": "rlinf_robot.commands.train",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlinf-robot", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_path in COMMANDS.items():
        module = importlib.import_module(module_path)
        p = sub.add_parser(name, help=module.HELP, description=module.__doc__)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
