"""franka-sim as a long-lived service, configured from the launch YAML's ``franka_sim`` block.

``python -m rlinf_robot.robot.franka.sim_service --config launch/config/sim_robot.yaml`` is the
process ``sim_robot.launch.py`` (ExecuteProcess) and ``rlinf-robot robot up --sim`` start. It holds
the franka-sim lock for its whole life, prints ``franka-sim ready`` once the FCI port answers,
restarts the server if it dies (keeping the lock, so no other session can take port 1337 while our
nodes reconnect), and stops it on SIGINT/SIGTERM. The server dies with this process.

YAML (ROS parameter-file shape, so the same file also feeds the nodes)::

    franka_sim:
      ros__parameters:
        gripper: true                  # serve a Franka Hand on port 1338
        enforce_motion_limits: false   # true: commands beyond the FCI limits abort with real reflexes
        joint_damping: 5.0             # Nm s/rad, one value or seven
        dynamics:                      # optional: serve an FR3 variant (calibration.fr3_dynamics)
          joint_damping: 30.0          #   Nm s/rad, one value or seven (default: joint_damping above)
          joint_frictionloss_scale: 1.5  # x the model's dry friction
          joint_armature_scale: 1.0    # x the model's rotor inertia
          payload_mass: 1.5            # kg at the hand
        extra_args: []                 # more run-franka-sim-server flags

A ``dynamics`` block is how a "real" arm is made to differ from the training sim the way a real arm
does (tests, the demo, sessions): the variant MJCF is written next to the config's temp files and
served instead of the nominal model.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

from rlinf_robot.errors import ConfigError
from rlinf_robot.robot.franka.sim_server import FrankaSimError, FrankaSimServer

BLOCK = "franka_sim"
READY_LINE = "franka-sim ready"
_DEFAULTS: dict[str, Any] = {
    "gripper": True,
    "enforce_motion_limits": False,
    "joint_damping": None,
    "dynamics": None,
    "extra_args": [],
}
_DYNAMICS_KEYS = ("joint_damping", "joint_frictionloss_scale", "joint_armature_scale", "payload_mass")


def sim_options(config: str | Path) -> dict[str, Any]:
    """The validated ``franka_sim`` block of a launch YAML (defaults when absent)."""
    with open(config) as f:
        raw = yaml.safe_load(f) or {}
    block = (raw.get(BLOCK) or {}).get("ros__parameters") or {}
    unknown = sorted(set(block) - set(_DEFAULTS))
    if unknown:
        raise ConfigError(f"{config}: {BLOCK}: unknown key(s) {unknown}; known: {sorted(_DEFAULTS)}")
    opts = {**_DEFAULTS, **block}
    for key in ("gripper", "enforce_motion_limits"):
        if not isinstance(opts[key], bool):
            raise ConfigError(f"{config}: {BLOCK}.{key} must be true or false, got {opts[key]!r}")
    damping = opts["joint_damping"]
    if damping is not None:
        values = damping if isinstance(damping, list) else [damping]
        if len(values) not in (1, 7) or not all(isinstance(v, (int, float)) and v >= 0 for v in values):
            raise ConfigError(f"{config}: {BLOCK}.joint_damping must be one or seven numbers >= 0")
    dyn = opts["dynamics"]
    if dyn is not None:
        if not isinstance(dyn, dict) or set(dyn) - set(_DYNAMICS_KEYS):
            raise ConfigError(
                f"{config}: {BLOCK}.dynamics must map some of {list(_DYNAMICS_KEYS)} to numbers"
            )
        for key, v in dyn.items():
            values = v if isinstance(v, list) else [v]
            if not all(isinstance(x, (int, float)) and x >= 0 for x in values):
                raise ConfigError(f"{config}: {BLOCK}.dynamics.{key} must be numbers >= 0, got {v!r}")
    if not (isinstance(opts["extra_args"], list) and all(isinstance(a, str) for a in opts["extra_args"])):
        raise ConfigError(f"{config}: {BLOCK}.extra_args must be a list of strings")
    return opts


def make_server(opts: dict[str, Any]) -> FrankaSimServer:
    args = list(opts["extra_args"])
    if opts["enforce_motion_limits"]:
        args.append("--enforce-motion-limits")
    env: dict[str, str] = {}
    if opts["dynamics"] is not None:
        return FrankaSimServer(
            extra_args=args, env=env, gripper=opts["gripper"], die_with_parent=True, mjcf=variant_mjcf(opts)
        )
    if opts["joint_damping"] is not None:
        damping = opts["joint_damping"]
        env["FR3_JOINT_DAMPING"] = ",".join(
            str(v) for v in (damping if isinstance(damping, list) else [damping])
        )
    return FrankaSimServer(extra_args=args, env=env, gripper=opts["gripper"], die_with_parent=True)


def variant_mjcf(opts: dict[str, Any]) -> Path:
    """Write the FR3 variant of ``opts["dynamics"]`` (scales relative to the nominal model) and
    return its path."""
    import tempfile

    import numpy as np

    from calibration.fr3_dynamics import nominal_params, write_variant_mjcf

    dyn = dict(opts["dynamics"])
    nominal = nominal_params()
    damping = dyn.get("joint_damping", opts["joint_damping"])
    params = nominal.replace(
        joint_damping=np.broadcast_to(
            np.asarray(nominal.joint_damping if damping is None else damping, np.float64), (7,)
        ).copy(),
        joint_frictionloss=nominal.joint_frictionloss * float(dyn.get("joint_frictionloss_scale", 1.0)),
        joint_armature=nominal.joint_armature * float(dyn.get("joint_armature_scale", 1.0)),
        payload_mass=np.array([float(dyn.get("payload_mass", 0.0))]),
    )
    dest = Path(tempfile.mkdtemp(prefix="fr3-variant-")) / "fr3_variant.xml"
    return write_variant_mjcf(params, dest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rlinf_robot.robot.franka.sim_service", description=__doc__
    )
    parser.add_argument("--config", required=True, help="launch YAML with a franka_sim block")
    args = parser.parse_args(argv)
    try:
        server = make_server(sim_options(args.config))
    except (ConfigError, OSError) as exc:
        print(f"franka-sim: {exc}", file=sys.stderr, flush=True)
        return 2
    halt = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: halt.set())
    print("franka-sim: starting (waits while another session holds the franka-sim lock)", flush=True)
    try:
        server.start()
        print(f"{READY_LINE} (pid {server._proc.pid}, log {server.log_path})", flush=True)
        while not halt.wait(0.2):
            if not server.alive():
                code = server.process.returncode if server.process else None
                print(f"franka-sim: server exited ({code}); restarting", flush=True)
                server.restart(check=False)
                print(f"{READY_LINE} (pid {server._proc.pid}, restarted)", flush=True)
    except FrankaSimError as exc:
        print(f"franka-sim: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
