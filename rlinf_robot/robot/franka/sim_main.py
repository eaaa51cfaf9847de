"""``run-franka-sim-server`` bound to one address (run by the franka-sim venv's Python, which has
``franka_sim`` and not this project):

    .venv-franka-sim/bin/python rlinf_robot/robot/franka/sim_main.py --host 127.0.0.1 [server args]

franka-sim's single-arm server always binds its command port (1337) and the gripper's (1338) on
``0.0.0.0``: its ``--bind`` is for the mobile duo only, although ``FrankaSimServer`` takes a ``host``.
On a robot PC that would put an unauthenticated arm-control port on every interface. This runs the
server's own command line with that ``host`` set, and nothing else changed.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    host = "127.0.0.1"
    if argv[:1] == ["--host"]:
        host, argv = argv[1], argv[2:]

    import franka_sim
    from franka_sim import run_server

    base = franka_sim.FrankaSimServer

    class BoundServer(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("host", host)
            super().__init__(*args, **kwargs)

    franka_sim.FrankaSimServer = BoundServer  # run_server imports it from the package when it starts
    sys.argv = ["run-franka-sim-server", *argv]
    run_server.main()


if __name__ == "__main__":
    main(sys.argv[1:])
