"""Shared fixtures: real servers on loopback, started and stopped with timeouts."""

from __future__ import annotations

import os

import pytest

# Isolate ROS 2 traffic and logs even when pytest is run directly instead of via `make test`.
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("FASTDDS_BUILTIN_TRANSPORTS", "UDPv4")
os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def franka_sim():
    """A fresh franka-sim server (FR3, no gripper) on 127.0.0.1:1337 for one test."""
    from rlinf_robot.robot.franka.sim_server import FrankaSimServer

    with FrankaSimServer(gripper=False) as server:
        yield server


@pytest.fixture(scope="module")
def franka_sim_module():
    """One franka-sim server shared by a test module (startup ~1.2 s)."""
    from rlinf_robot.robot.franka.sim_server import FrankaSimServer

    with FrankaSimServer(gripper=False) as server:
        yield server
