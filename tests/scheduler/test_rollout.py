"""Pipelined rollouts (MuJoCo FR3 env workers + MLP rollout workers), weight sync, offload, trace."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest

pytest.importorskip("mujoco")
pytest.importorskip("torch")

from rlinf_robot.scheduler import (  # noqa: E402
    GroupSpec,
    WorkerCrashed,
    WorkerError,
    WorkerGroup,
    make_plan,
    write_chrome_trace,
)
from rlinf_robot.scheduler.weight_sync import join_group, push_weights  # noqa: E402
from rlinf_robot.workers.rollout import RolloutWorker  # noqa: E402
from rlinf_robot.workers.sim_env import SimEnvWorker  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ENV = dict(env="mujoco/fr3-reach", num_envs=8, env_kwargs={"num_threads": 1}, num_shards=2, seed=3)


class Trainer(RolloutWorker):
    """Stands in for the actor: holds the same policy and can change its weights."""

    def perturb(self, scale: float) -> float:
        import torch

        with torch.no_grad():
            for p in self.policy.parameters():
                p.add_(scale)
        return self.state_checksum()


@pytest.fixture(scope="module")
def groups(cluster):
    # One plan for every group: CPU shares shrink so 5 processes fit the 2-CPU cluster.
    plan = make_plan(
        "disaggregated",
        cluster.resource_spec(),
        [GroupSpec("env", 1), GroupSpec("rollout", 2), GroupSpec("actor", 1), GroupSpec("doomed", 1)],
    )
    reservation = cluster.reserve(plan, timeout_s=30)
    launched = []
    try:
        env = WorkerGroup.launch(SimEnvWorker, "env", reservation, kwargs=ENV)
        launched.append(env)
        spec = env.call_rank(0, "env_spec").wait_one(60)
        pol = dict(
            action_spec=spec["action_spec"], state_dim=spec["state_dim"], policy_kwargs={"value_head": False}
        )
        launched.append(WorkerGroup.launch(RolloutWorker, "rollout", reservation, kwargs=pol))
        launched.append(WorkerGroup.launch(Trainer, "actor", reservation, kwargs={**pol, "seed": 1}))
        yield (*launched, reservation)
    finally:
        for g in launched:
            g.shutdown()
        reservation.release()


def test_two_pipeline_stages_give_identical_results_to_one(groups):
    env, rollout, _, _ = groups
    policy = rollout.actors[0]
    one = env.call_rank(0, "rollout", policy, 6, 1, True).wait_one(120)
    two = env.call_rank(0, "rollout", policy, 6, 2, True).wait_one(120)
    over_ray = env.call_rank(0, "rollout", policy, 6, 2, True, transport="ray").wait_one(120)
    assert one["env_steps"] == two["env_steps"] == 6 * 8
    assert one["states"].shape == (7, 8, 28) and one["actions"].shape == (6, 8, 1, 6)
    for key in ("states", "actions", "rewards"):
        np.testing.assert_array_equal(one[key], two[key])
        np.testing.assert_array_equal(one[key], over_ray[key])
    assert np.abs(one["states"][-1] - one["states"][0]).max() > 0  # the arms did move
    assert two["versions"].shape == (6, 2)
    # where the env worker's time went, over both transports: stepping envs and waiting for
    # actions fit in the rollout's wall time; the policy's own compute is reported by its worker
    for out in (one, two, over_ray):
        assert 0 < out["env_s"] and 0 < out["wait_s"], out
        assert out["env_s"] + out["wait_s"] <= out["seconds"] + 1e-3, out
        assert 0 < out["infer_s"] < out["seconds"], out


def test_weight_sync_object_store_reaches_every_rank_and_every_step(groups):
    env, rollout, actor, _ = groups
    target = actor.call_rank(0, "perturb", 0.01).wait_one(30)
    assert push_weights(actor, rollout, version=3) == [3, 3]
    assert rollout.call("state_checksum").wait(30) == pytest.approx([target, target], abs=0)
    out = env.call_rank(0, "rollout", rollout.actors[1], 3, 2, True).wait_one(120)
    assert (out["versions"] == 3).all()


def test_weight_sync_collective_gloo_broadcast(groups):
    _, rollout, actor, _ = groups
    join_group(actor, rollout, use_cuda=False)
    target = actor.call_rank(0, "perturb", -0.02).wait_one(30)
    assert push_weights(actor, rollout, version=4, backend_name="collective") == [4, 4]
    assert rollout.call("state_checksum").wait(30) == pytest.approx([target, target], abs=0)


def test_offload_through_a_worker_is_bit_exact(groups):
    _, rollout, _, _ = groups
    before = rollout.call_rank(0, "numpy_state").wait_one(30)
    report = rollout.call_rank(0, "offload").wait_one(30)
    assert report["bytes"] > 0 and report["seconds"] >= 0
    obs = {"state": np.zeros((2, 28), np.float32), "images": {}, "instruction": ["", ""]}
    with pytest.raises(WorkerError, match=r"rollout\[0\]\.infer"):
        rollout.call_rank(0, "infer", obs).wait(30)
    assert rollout.call_rank(0, "onload").wait_one(30)["bytes"] == report["bytes"]
    after = rollout.call_rank(0, "numpy_state").wait_one(30)
    assert before.keys() == after.keys() and all(np.array_equal(before[k], after[k]) for k in before)


def test_timeline_exports_chrome_trace(groups, tmp_path):
    env, rollout, _, _ = groups
    for g in (env, rollout):
        g.call("timeline_events").wait(30)  # drop spans of earlier tests
    env.call_rank(0, "rollout", rollout.actors[0], 4, 2).wait_one(120)
    events = env.call_rank(0, "timeline_events").wait_one(30) + rollout.call_rank(
        0, "timeline_events"
    ).wait_one(30)
    path = write_chrome_trace(tmp_path / "trace.json", events)
    trace = json.loads(path.read_text())["traceEvents"]
    spans = [e for e in trace if e["ph"] == "X"]
    assert {(e["name"], e["tid"]) for e in spans} >= {
        ("env_step", 0),
        ("env_step", 1),
        ("infer", 0),
        ("infer", 1),
    }
    assert sum(e["name"] == "env_step" for e in spans) == 8 and all(e["dur"] >= 0 for e in spans)
    names = {e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {"env[0]", "rollout[0]"}


def test_rollout_worker_crash_surfaces_in_the_driver(cluster, groups):
    env, _, _, reservation = groups
    spec = env.call_rank(0, "env_spec").wait_one(60)
    doomed = WorkerGroup.launch(
        RolloutWorker,
        "doomed",
        reservation,
        kwargs=dict(action_spec=spec["action_spec"], state_dim=spec["state_dim"]),
    )
    try:
        pid = doomed.call_rank(0, "worker_info").wait_one(30)["pid"]
        running = env.call_rank(0, "rollout", doomed.actors[0], 100_000, 2)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(WorkerError, match=r"env\[0\]\.rollout\(\) failed") as info:
            running.wait(60)
        assert not isinstance(info.value, WorkerCrashed)  # the env worker is fine...
        assert "a worker it was waiting on died" in str(info.value) and "doomed/0" in str(info.value)
        assert env.call_rank(0, "ping", 1).wait_one(30) == 1  # ...and still serves
        with pytest.raises(WorkerCrashed):
            doomed.call("ping").wait(30)
    finally:
        doomed.shutdown(timeout_s=2)
