"""Make CURVE key pairs for the bridge (``rlinf-robot keys generate DIR --name NAME``).

Run it once on the robot PC (``--name robot``) and once per learner machine (``--name <learner>``).
Copy each learner's public ``<learner>.key`` into the robot's authorized-keys directory and the
robot's public ``robot.key`` to each learner; secret ``.key_secret`` files never leave their machine.
"""

from __future__ import annotations

from pathlib import Path

HELP = "generate CURVE key pairs for the ZMQ bridge"


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    gen = sub.add_parser("generate", help="write NAME.key (public) and NAME.key_secret (secret, mode 0600)")
    gen.add_argument("directory", type=Path, help="where to write the key files (created if missing)")
    gen.add_argument("--name", default="robot", help="base name of the key files (default: robot)")
    gen.add_argument("--force", action="store_true", help="overwrite existing key files")


def run(args) -> int:
    from rlinf_robot.bridge.auth import generate_keypair

    public = args.directory / f"{args.name}.key"
    secret = args.directory / f"{args.name}.key_secret"
    if not args.force and (public.exists() or secret.exists()):
        print(f"keys: {public} or {secret} exists already; use --force to overwrite")
        return 1
    public, secret = generate_keypair(args.directory, args.name)
    print(
        f"public key : {public}   (share: robot's goes to learners, a learner's goes to the robot's "
        "authorized directory)"
    )
    print(f"secret key : {secret}   (keep on this machine, mode 0600)")
    return 0
