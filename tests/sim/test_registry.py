"""sim.make / sim.list: names, errors that say what to do, lazy imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

import sim
from rlinf_robot.errors import ConfigError, MissingDependency
from sim.registry import register


def test_list_has_the_embedded_tasks_and_adapters():
    names = sim.list()
    assert {"mujoco/fr3-reach", "mujoco/fr3-push", "mujoco/fr3-lift"} <= set(names)
    assert any(n.startswith("maniskill/") for n in names)
    assert any(n.startswith("isaaclab/") for n in names)
    assert any(n.startswith("robotwin/") for n in names)
    assert names == sorted(names)
    assert set(sim.names(device="gpu")).isdisjoint(sim.names(device="cpu"))


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ConfigError) as err:
        sim.make("mujoco/fr3-juggle")
    assert "mujoco/fr3-juggle" in str(err.value) and "mujoco/fr3-reach" in str(err.value)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "4"])
def test_num_envs_is_validated(bad):
    with pytest.raises(ConfigError, match="num_envs"):
        sim.make("mujoco/fr3-reach", num_envs=bad)


@pytest.mark.parametrize(
    "opts, key",
    [
        ({"control_hz": 30}, "control_hz"),
        ({"action_mode": "torque"}, "action_mode"),
        ({"image_size": 8}, "image_size"),
        ({"cameras": ("side",)}, "cameras"),
        ({"colour": 1}, "colour"),
        ({"gripper": False}, "gripper"),
    ],
)
def test_bad_options_name_the_key(opts, key):
    name = "mujoco/fr3-lift" if key == "gripper" else "mujoco/fr3-reach"
    with pytest.raises(ConfigError, match=key):
        sim.make(name, **opts)


def test_absent_simulator_raises_missing_dependency_with_install_command():
    gpu_only = [n for n in sim.names() if not sim.spec(n).available()]
    assert gpu_only, "expected at least one adapter whose simulator is not installed here"
    with pytest.raises(MissingDependency) as err:
        sim.make(gpu_only[0])
    assert "install" in str(err.value)


def test_register_refuses_bad_names_and_duplicates():
    with pytest.raises(ValueError):
        register("noslash")
    with pytest.raises(ValueError):
        register("mujoco/fr3-reach")(lambda **kw: None)


def test_import_sim_is_light():
    code = "import sys, sim; sim.list(); print([m for m in ('mujoco', 'torch', 'mani_skill', 'sapien') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_make_returns_what_the_spec_says():
    env = sim.make("mujoco/fr3-reach", num_envs=3, control_hz=10, action_mode="joint_delta", gripper=True)
    try:
        assert env.num_envs == 3
        assert env.action_spec.mode == "joint_delta" and env.action_spec.shape == (8,)
        assert env.action_spec.control_hz == 10 and env.substeps == 50
        assert env.obs_spec.state_shape == (28,)
    finally:
        env.close()
