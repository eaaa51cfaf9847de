"""Placement plans for several cluster shapes (pure functions: no Ray) + the doctests of the package."""

from __future__ import annotations

import doctest
import importlib

import pytest

from rlinf_robot.scheduler.errors import PlacementError
from rlinf_robot.scheduler.placement import make_plan, placement_modes
from rlinf_robot.scheduler.resources import GroupSpec, NodeSpec, ResourceSpec

DOCTESTED = ["placement", "resources", "affinity", "timeline", "pipeline", "channel", "link", "worker"]


@pytest.mark.parametrize("module", DOCTESTED)
def test_doctests(module):
    mod = importlib.import_module(f"rlinf_robot.scheduler.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def rl_groups(actor=2, rollout=2, env=2):
    return [
        GroupSpec("actor", actor, gpus_per_rank=1),
        GroupSpec("rollout", rollout, gpus_per_rank=1),
        GroupSpec("env", env),
    ]


def test_registry_lists_the_three_modes_and_rejects_others():
    assert placement_modes() == ["collocated", "disaggregated", "hybrid"]
    with pytest.raises(PlacementError, match="known: \\['collocated', 'disaggregated', 'hybrid'\\]"):
        make_plan("round_robin", ResourceSpec.uniform(1, 2, 2), rl_groups())


@pytest.mark.parametrize("nodes,gpus", [(1, 2), (1, 8), (2, 4), (8, 8)])
def test_collocated_shares_every_accelerator(nodes, gpus):
    spec = ResourceSpec.uniform(nodes, gpus, 16)
    n = nodes * gpus
    plan = make_plan("collocated", spec, rl_groups(n, n, n))
    assert plan.devices("actor") == plan.devices("rollout") == [(i,) for i in range(n)]
    # One bundle per accelerator (shared by actor+rollout) plus one per CPU-only env rank.
    gpu_bundles = [b for b in plan.bundles if b.gpus]
    assert len(gpu_bundles) == n and all(len(b.gpus) == 1 for b in gpu_bundles)
    assert {r.gpu_share for r in plan.ranks if r.gpus} == {0.5}
    # Ranks land on the node that owns their accelerator; env ranks follow the shared devices.
    for r in plan.group("actor"):
        assert r.node == r.rank // gpus
    assert [r.node for r in plan.group("env")] == [i // gpus for i in range(n)]


@pytest.mark.parametrize("nodes,gpus", [(1, 4), (2, 4), (8, 8)])
def test_disaggregated_gives_disjoint_accelerators(nodes, gpus):
    spec = ResourceSpec.uniform(nodes, gpus, 8)
    n = nodes * gpus
    plan = make_plan("disaggregated", spec, [GroupSpec("actor", n // 2, 1), GroupSpec("rollout", n // 4, 2)])
    actor = {d for ds in plan.devices("actor") for d in ds}
    rollout = {d for ds in plan.devices("rollout") for d in ds}
    assert actor.isdisjoint(rollout) and actor | rollout == set(range(n))
    assert all(r.gpu_share == 2.0 for r in plan.group("rollout"))
    assert all(b.resources()["GPU"] in (1.0, 2.0) for b in plan.bundles)


def test_hybrid_env_and_rollout_share_actor_separate():
    spec = ResourceSpec.uniform(2, 4, 8)
    plan = make_plan("hybrid", spec, rl_groups(actor=4, rollout=4, env=8), share=[["env", "rollout"]])
    assert plan.devices("actor") == [(0,), (1,), (2,), (3,)]
    assert plan.devices("rollout") == [(4,), (5,), (6,), (7,)]
    # Env ranks go where the rollout accelerators are (node 1), two per accelerator.
    assert {r.node for r in plan.group("env")} == {1}
    assert "hybrid plan: 2 node(s), 8 accelerator(s)" in plan.describe()


def test_uneven_nodes_and_explicit_devices():
    spec = ResourceSpec((NodeSpec(num_cpus=4, num_gpus=2), NodeSpec(num_cpus=4, num_gpus=6)))
    plan = make_plan(
        "disaggregated", spec, [GroupSpec("actor", 2, 1, devices=(6, 7)), GroupSpec("rollout", 2, 1)]
    )
    assert plan.devices("actor") == [(6,), (7,)] and [r.gpus for r in plan.group("actor")] == [(4,), (5,)]
    assert plan.devices("rollout") == [(0,), (1,)] and {r.node for r in plan.group("rollout")} == {0}


def test_busy_accelerators_are_never_planned():
    """Groups already running hold accelerators by index; a new plan skips them and refuses
    explicit devices that name one."""
    spec = ResourceSpec((NodeSpec(4, 2, busy_gpus=(0,)), NodeSpec(4, 2, busy_gpus=(1,))))
    assert spec.busy_gpus == (0, 3)
    plan = make_plan("disaggregated", spec, [GroupSpec("actor", 2, 1)])
    assert plan.devices("actor") == [(1,), (2,)]
    assert [(r.node, r.gpus) for r in plan.group("actor")] == [(0, (1,)), (1, (0,))]
    with pytest.raises(PlacementError, match="ask 3 accelerator\\(s\\) but only 2 of 4"):
        make_plan("disaggregated", spec, [GroupSpec("actor", 3, 1)])
    with pytest.raises(PlacementError, match="accelerator\\(s\\) \\[3\\], held by groups already running"):
        make_plan("collocated", spec, [GroupSpec("actor", 2, 1, devices=(2, 3))])
    with pytest.raises(PlacementError, match="busy_gpus must be node-local accelerator indices 0-1"):
        NodeSpec(4, 2, busy_gpus=(2,))


@pytest.mark.parametrize(
    "mode,groups,opts,match",
    [
        ("disaggregated", [GroupSpec("a", 3, 1)], {}, "ask 3 accelerator\\(s\\) but only 2 of 2"),
        ("collocated", [GroupSpec("a", 2, 2)], {}, "ask 4 accelerator"),
        (
            "disaggregated",
            [GroupSpec("a", 1, 1, devices=(1,)), GroupSpec("b", 1, 1, devices=(1,))],
            {},
            "overlap",
        ),
        ("disaggregated", [GroupSpec("a", 1, 1, devices=(5,))], {}, "the cluster has 2"),
        ("collocated", [GroupSpec("a", 1, 2), GroupSpec("b", 2, 1)], {}, "partly overlap"),
        ("hybrid", [GroupSpec("a", 1, 1)], {"share": [["a", "zzz"]]}, "unknown group"),
        (
            "hybrid",
            [GroupSpec("a", 1, 1), GroupSpec("b", 1, 1)],
            {"share": [["a"], ["a", "b"]]},
            "more than one set",
        ),
        ("collocated", [GroupSpec("a", 1, 1), GroupSpec("a", 1, 1)], {}, "unique"),
    ],
)
def test_invalid_specs_raise_clear_errors(mode, groups, opts, match):
    with pytest.raises(PlacementError, match=match):
        make_plan(mode, ResourceSpec.uniform(1, 2, 2), groups, **opts)


def test_cpu_oversubscription_shrinks_ray_cpus_to_fit():
    spec = ResourceSpec.uniform(1, 0, 2)
    plan = make_plan(
        "disaggregated",
        spec,
        [GroupSpec("env", 4, cpus_per_rank=1), GroupSpec("rollout", 1, 0, 2)],
        affinity="auto",
    )
    assert sum(b.num_cpus for b in plan.bundles) <= 2.0
    assert all(0 <= c < 2 for r in plan.ranks for c in r.cores)


def test_affinity_modes_shown_in_plan():
    spec = ResourceSpec.uniform(1, 0, 4)
    groups = [GroupSpec("env", 2), GroupSpec("rollout", 1, cpus_per_rank=2)]
    auto = make_plan("disaggregated", spec, groups, affinity="auto")
    assert [r.cores for r in auto.ranks] == [(0,), (1,), (2, 3)]
    off = make_plan("disaggregated", spec, groups, affinity="off")
    assert all(r.cores == () for r in off.ranks) and "affinity=off" in off.describe()
    explicit = make_plan("disaggregated", spec, groups, affinity={"rollout": "0-1"})
    assert explicit.group("rollout")[0].cores == (0, 1) and explicit.affinity == "explicit"
    with pytest.raises(PlacementError, match="not in 0-3"):
        make_plan("disaggregated", spec, groups, affinity={"env": [[7], [0]]})
    with pytest.raises(PlacementError, match="affinity 'sometimes' unknown"):
        make_plan("disaggregated", spec, groups, affinity="sometimes")


def test_group_spec_validation_names_the_key():
    with pytest.raises(PlacementError, match="groups.actor.num_ranks must be an integer >= 1"):
        GroupSpec("actor", 0)
    with pytest.raises(PlacementError, match="unknown keys \\['gpu'\\]"):
        GroupSpec.from_dict("actor", {"num_ranks": 2, "gpu": 1})
    assert GroupSpec.from_dict("actor", {"num_ranks": 2, "gpus_per_rank": 1, "devices": "2-3"}).devices == (
        2,
        3,
    )


# ------------------------------------------------------------------------------------ configs
CONF = __import__("pathlib").Path(__file__).resolve().parents[2] / "rlinf_robot" / "conf" / "cluster"


@pytest.mark.parametrize("path", sorted(CONF.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_cluster_config_loads_and_plans(path):
    from rlinf_robot.scheduler.config import SchedulerConfig

    cfg = SchedulerConfig.from_yaml(path)
    plan = cfg.plan()
    assert set(plan.group_names()) == {g.name for g in cfg.groups}
    # The same groups re-planned on a bigger cluster: same code path, different shape.
    assert cfg.plan(ResourceSpec.uniform(8, 8, 64)).resources.total_gpus == 64


def test_config_errors_name_the_key():
    from rlinf_robot.errors import ConfigError
    from rlinf_robot.scheduler.config import SchedulerConfig

    base = {
        "placement": {"mode": "hybrid", "share": [["env", "rollout"]]},
        "groups": {"env": {"num_ranks": 1}, "rollout": {"num_ranks": 1, "gpus_per_rank": 1}},
        "resources": {"num_nodes": 1, "gpus_per_node": 1, "cpus_per_node": 2},
    }
    assert SchedulerConfig.from_dict(base).plan().mode == "hybrid"
    with pytest.raises(ConfigError, match="unknown keys \\['gpus'\\]"):
        SchedulerConfig.from_dict({**base, "gpus": 2})
    with pytest.raises(ConfigError, match="cluster.num_gpus must be an integer >= 0"):
        SchedulerConfig.from_dict({**base, "num_gpus": -1})
    with pytest.raises(PlacementError, match="ask 1 accelerator\\(s\\) but only 0 of 0"):  # at load time
        SchedulerConfig.from_dict({**base, "resources": {"num_nodes": 1, "gpus_per_node": 0}})
    two = {"env": {"num_ranks": 1}, "rollout": {"num_ranks": 2, "gpus_per_rank": 1}}
    with pytest.raises(PlacementError, match="ask 2 accelerator\\(s\\) but only 1 of 1"):
        SchedulerConfig.from_dict({**base, "groups": two})


def test_plan_command_prints_the_plan(capsys):
    from rlinf_robot.cli import main

    assert main(["plan", str(CONF / "hybrid.yaml"), "--affinity", "auto"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("hybrid plan: 1 node(s), 4 accelerator(s)") and "affinity=auto" in out
    assert main(["plan", str(CONF / "hybrid.yaml"), "--nodes", "1", "--gpus-per-node", "1"]) == 1
    assert "only 1 of 1 are free" in capsys.readouterr().out


def test_scheduler_imports_stay_light():
    """Planning (and the CLI's plan command) must not pull in Ray, torch or MuJoCo."""
    import subprocess
    import sys

    code = (
        "import sys, rlinf_robot.scheduler.config, rlinf_robot.scheduler.worker_group, "
        "rlinf_robot.scheduler.channel, rlinf_robot.scheduler.weight_sync, rlinf_robot.workers.sim_env, "
        "rlinf_robot.workers.rollout, rlinf_robot.commands.plan\n"
        "print(','.join(m for m in ('ray', 'torch', 'mujoco') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == ""
