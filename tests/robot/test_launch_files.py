"""The launch files and `rlinf-robot robot up` start the same executables from the same YAML.

`launch` / `launch_ros` are not installable here, so the launch files are parsed (ast), not run:
every Node / LifecycleNode / ExecuteProcess they create is compared with robot up's plan for the
YAML the launch file defaults to.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rlinf_robot.paths import REPO_ROOT
from rlinf_robot.robot.bringup.plan import NODES, PACKAGE, SIM_MODULE, make_plan
from rlinf_robot.robot.bringup.ros_env import default_install_dir

LAUNCH = REPO_ROOT / "launch"
CASES = [("robot.launch.py", "robot.yaml", False), ("sim_robot.launch.py", "sim_robot.yaml", True)]


def _const(node: ast.AST, names: dict[str, object]):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    return None


def parse_launch(path: Path) -> dict:
    tree = ast.parse(path.read_text())
    names = {
        t.id: n.value.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        for t in n.targets
        if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)
    }
    out = {"nodes": {}, "lifecycle": set(), "processes": [], "arguments": {}, "yaml": set()}
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        func = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
        kw = {k.arg: k.value for k in call.keywords}
        if func in ("Node", "LifecycleNode"):
            name, exe = _const(kw["name"], names), _const(kw["executable"], names)
            out["nodes"][name] = (_const(kw["package"], names), exe)
            if func == "LifecycleNode":
                out["lifecycle"].add(name)
        elif func == "ExecuteProcess":
            out["processes"].append([_const(e, names) for e in kw["cmd"].elts])
        elif func == "DeclareLaunchArgument":
            out["arguments"][_const(call.args[0], names)] = kw.get("default_value")
        elif func == "IncludeLaunchDescription":
            forwarded = kw["launch_arguments"].func.value  # {...}.items()
            out["forwarded"] = {_const(k, names) for k in forwarded.keys}
    for const in (n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)):
        if const.value.endswith(".yaml"):
            out["yaml"].add(const.value)
        elif const.value.endswith(".launch.py"):  # an included launch file: its nodes and processes count
            included = parse_launch(path.parent / const.value)
            out["nodes"].update(included["nodes"])
            out["lifecycle"] |= included["lifecycle"]
            out["processes"] += included["processes"]
            out["includes"] = [*out.get("includes", []), const.value]
    return out


@pytest.mark.parametrize("launch_file,yaml_name,sim", CASES)
def test_launch_file_and_robot_up_start_the_same_processes(launch_file, yaml_name, sim):
    parsed = parse_launch(LAUNCH / launch_file)
    assert parsed["yaml"] == {yaml_name}, "each launch file defaults to its own YAML"
    assert set(parsed["arguments"]) >= {"robot_ip", "config", "namespace"}
    assert _const(parsed["arguments"]["namespace"], {}) == "franka"
    if parsed.get("includes"):  # every argument reaches the included nodes
        assert parsed["forwarded"] == {"robot_ip", "config", "namespace"}

    plan = make_plan(LAUNCH / "config" / yaml_name, sim=sim, install_dir=default_install_dir())
    planned_nodes = {c.name: Path(c.argv[0]).name for c in plan if c.name != "franka_sim"}
    assert {name: exe for name, (_, exe) in parsed["nodes"].items()} == planned_nodes
    assert all(pkg == PACKAGE for pkg, _ in parsed["nodes"].values())
    assert parsed["lifecycle"] == {c.name for c in plan if c.lifecycle}
    assert parsed["lifecycle"] == {n for n in parsed["nodes"] if n in NODES and NODES[n].lifecycle}
    for child in plan:
        if child.name != "franka_sim":
            assert child.argv[child.argv.index("--params-file") + 1] == str(LAUNCH / "config" / yaml_name)

    sim_processes = [p for p in parsed["processes"] if SIM_MODULE in p]
    if sim:
        assert len(sim_processes) == 1 and sim_processes[0][1:3] == ["-m", SIM_MODULE]
        assert "--config" in sim_processes[0]
        sim_child = next(c for c in plan if c.name == "franka_sim")
        assert sim_child.argv[1:3] == ["-m", SIM_MODULE]
        assert sim_child.argv[sim_child.argv.index("--config") + 1] == str(LAUNCH / "config" / yaml_name)
    else:
        assert sim_processes == [] and all(c.name != "franka_sim" for c in plan)


def test_every_planned_executable_is_a_console_script_of_the_package():
    setup_py = (REPO_ROOT / "ros_ws" / "src" / "rlinf_ros" / "setup.py").read_text()
    scripts = {line.split("=")[0].strip(' "') for line in setup_py.splitlines() if ":main" in line}
    for _, yaml_name, sim in CASES:
        for child in make_plan(LAUNCH / "config" / yaml_name, sim=sim):
            if child.name != "franka_sim":
                assert Path(child.argv[0]).name in scripts


def test_the_launch_file_runs_the_nodes_with_robot_ups_dds_profile():
    """Both ways of starting the robot PC keep its ROS graph on loopback with the same profile."""
    from rlinf_robot.robot.bringup.ros_env import LOOPBACK_DDS_PROFILE

    tree = ast.parse((LAUNCH / "robot.launch.py").read_text())
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert LOOPBACK_DDS_PROFILE.name in strings and LOOPBACK_DDS_PROFILE.parent == LAUNCH / "config"
    calls = {
        (n.func.id, n.args[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.args
        and isinstance(n.args[0], ast.Constant)
    }
    assert ("SetEnvironmentVariable", "FASTDDS_DEFAULT_PROFILES_FILE") in calls
    assert ("UnsetEnvironmentVariable", "ROS_AUTOMATIC_DISCOVERY_RANGE") in calls
