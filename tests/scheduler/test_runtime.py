"""Workers, groups, placement on logical GPUs, crashes and channels on one local Ray cluster."""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np
import pytest

from rlinf_robot.scheduler import (
    Channel,
    ChannelClosed,
    ChannelTimeout,
    GroupSpec,
    PlacementError,
    ResourceSpec,
    Worker,
    WorkerCrashed,
    WorkerError,
    WorkerGroup,
    WorkerTimeout,
    make_plan,
)

pytestmark = pytest.mark.integration


class EchoWorker(Worker):
    def __init__(self, tag: str = "x"):
        super().__init__()
        self.tag = tag

    def whoami(self) -> dict:
        return {
            "rank": self.rank,
            "world": self.world_size,
            "tag": self.tag,
            "pid": os.getpid(),
            "env_rank": os.environ["RANK"],
            "extra": os.environ.get("EXTRA"),
            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "master": os.environ.get("MASTER_ADDR"),
        }

    def fail(self) -> None:
        raise ValueError(f"rank {self.rank} refuses")

    def crash(self) -> None:
        os._exit(3)

    def nap(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    def produce(self, channel: Channel, n: int) -> int:
        for i in range(n):
            channel.put(
                {"rank": self.rank, "i": i, "x": np.full(3, i, np.float32)}, key=f"r{self.rank}", weight=i + 1
            )
        return n


def test_group_of_four_ranks_runs_and_tears_down(cluster):
    group = WorkerGroup.spawn(EchoWorker, "echo", cluster, 4, kwargs={"tag": "t"})
    try:
        out = group.call("whoami").wait(60)
        assert [o["rank"] for o in out] == [0, 1, 2, 3]
        assert {o["world"] for o in out} == {4} and {o["tag"] for o in out} == {"t"}
        assert [o["env_rank"] for o in out] == ["0", "1", "2", "3"]
        assert len({o["pid"] for o in out}) == 4 and os.getpid() not in {o["pid"] for o in out}
        assert {o["master"] for o in out} == {"127.0.0.1"}
        assert group.call_rank(2, "ping", "hi").wait_one(30) == "hi"
        assert group.scatter("ping", ["a", "b", "c", "d"]).wait(30) == ["a", "b", "c", "d"]
        names = {a["name"] for a in cluster.live_actors()}
        assert {"echo/0", "echo/1", "echo/2", "echo/3"} <= names
    finally:
        group.shutdown()
    deadline = time.monotonic() + 15
    while any(a["name"].startswith("echo/") for a in cluster.live_actors()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(a["name"].startswith("echo/") for a in cluster.live_actors())
    with pytest.raises(WorkerCrashed, match="shut down"):
        group.call("whoami")


def test_logical_gpus_follow_the_hybrid_plan(cluster):
    """actor+rollout share accelerators rank by rank; 'ref' gets its own; env vars per rank."""
    groups = [GroupSpec("actor", 2, 1), GroupSpec("rollout", 2, 1), GroupSpec("ref", 1, 1)]
    plan = make_plan("hybrid", cluster.resource_spec(), groups, share=[["actor", "rollout"]])
    reservation = cluster.reserve(plan, timeout_s=30)
    launched = []
    try:
        for g in groups:
            env = [{"EXTRA": f"{g.name}-{r}"} for r in range(g.num_ranks)]
            launched.append(WorkerGroup.launch(EchoWorker, g.name, reservation, env=env))
        actor, rollout, ref = (grp.call("whoami").wait(60) for grp in launched)
        assert [o["cuda"] for o in actor] == [o["cuda"] for o in rollout]
        assert actor[0]["cuda"] != actor[1]["cuda"]
        assert ref[0]["cuda"] not in {o["cuda"] for o in actor}
        assert [o["extra"] for o in rollout] == ["rollout-0", "rollout-1"]
    finally:
        for grp in launched:
            grp.shutdown()
        reservation.release()


def test_scheduler_from_config_collocates_on_shared_logical_gpus(cluster):
    from rlinf_robot.scheduler.config import Scheduler, SchedulerConfig

    cfg = SchedulerConfig.from_dict(
        {
            "placement": {"mode": "collocated"},
            "groups": {
                "actor": {"num_ranks": 2, "gpus_per_rank": 1},
                "rollout": {"num_ranks": 2, "gpus_per_rank": 1},
            },
        }
    )
    with Scheduler(cfg, cluster=cluster) as sched:
        assert [r.gpu_share for r in sched.plan.ranks] == [0.5] * 4
        actor = sched.launch("actor", EchoWorker)
        rollout = sched.launch("rollout", EchoWorker)
        a, r = actor.call("whoami").wait(60), rollout.call("whoami").wait(60)
        assert [o["cuda"] for o in a] == [o["cuda"] for o in r] and a[0]["cuda"] != a[1]["cuda"]
        assert sched.sharing_with("actor") == ["rollout"]
        swap = sched.activate("actor")  # rollout offloads, actor onloads (time-slicing)
        assert set(swap) == {"actor", "rollout"} and all(len(v) == 2 for v in swap.values())
    assert sched.reservation.placement_group is None
    import ray

    deadline = time.monotonic() + 15  # the placement group's GPUs return to the pool
    while ray.available_resources().get("GPU") != 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ray.available_resources().get("GPU") == 4


def test_explicit_devices_are_each_ranks_cuda_visible_devices(cluster):
    """``devices: "2-3"`` puts actor ranks 0, 1 on accelerators 2 and 3; Ray alone would hand the
    first bundles (the actor's, listed first) accelerators 0 and 1."""
    from rlinf_robot.scheduler.config import Scheduler, SchedulerConfig

    cfg = SchedulerConfig.from_dict(
        {
            "placement": {"mode": "disaggregated"},
            "groups": {
                "actor": {"num_ranks": 2, "gpus_per_rank": 1, "devices": "2-3"},
                "rollout": {"num_ranks": 1, "gpus_per_rank": 2},
                "env": {"num_ranks": 1},
            },
        }
    )
    with Scheduler(cfg, cluster=cluster) as sched:
        assert sched.plan.devices("actor") == [(2,), (3,)]
        assert sched.plan.devices("rollout") == [(0, 1)]
        seen = {
            name: sched.launch(name, EchoWorker).call("whoami").wait(60)
            for name in ("actor", "rollout", "env")
        }
    assert [o["cuda"] for o in seen["actor"]] == ["2", "3"]
    assert [o["cuda"] for o in seen["rollout"]] == ["0,1"]
    assert [o["cuda"] for o in seen["env"]] == [None]  # CPU-only ranks are left as Ray starts them


def test_groups_planned_beside_a_reservation_get_the_free_accelerators(cluster):
    """The cluster's ledger of held accelerators: while a reservation holds 0-1, a group spawned
    beside it is planned on 2 and sees 2, and a plan made before the reservation (on 0) is refused."""
    stale = make_plan("disaggregated", cluster.resource_spec(), [GroupSpec("late", 1, 1)])
    half = ResourceSpec((dataclasses.replace(cluster.nodes()[0], cpu_budget=1.0),))  # CPU left to spawn
    plan = make_plan("disaggregated", half, [GroupSpec("trainer", 2, 1)])
    reservation = cluster.reserve(plan, timeout_s=30)
    try:
        assert [n.busy_gpus for n in cluster.nodes()] == [(0, 1)]
        with WorkerGroup.spawn(EchoWorker, "beside", cluster, 1, gpus_per_rank=1) as beside:
            assert beside.placements[0].global_gpus == (2,)
            assert beside.call("whoami").wait(60)[0]["cuda"] == "2"
        with pytest.raises(PlacementError, match=r"node 0 gpu 0 \(trainer\[0\]\)"):
            cluster.reserve(stale, timeout_s=5)
    finally:
        reservation.release()
    assert [n.busy_gpus for n in cluster.nodes()] == [()]


def test_plan_larger_than_the_cluster_is_refused(cluster):
    plan = make_plan("disaggregated", ResourceSpec.uniform(1, 8, 2), [GroupSpec("big", 8, 1)])
    with pytest.raises(PlacementError, match="could not reserve"):
        cluster.reserve(plan, timeout_s=1.5)


def test_worker_errors_are_typed_and_crashes_do_not_hang(cluster):
    group = WorkerGroup.spawn(EchoWorker, "faulty", cluster, 2)
    try:
        with pytest.raises(WorkerError, match=r"faulty\[\d\]\.fail\(\) failed") as info:
            group.call("fail").wait(30)
        assert "refuses" in str(info.value)
        with pytest.raises(WorkerTimeout, match=r"faulty\.nap\(\): rank\(s\) \[0\] not done"):
            group.call_rank(0, "nap", 3.0).wait(0.3)
        t0 = time.monotonic()
        with pytest.raises(WorkerCrashed, match=r"faulty\[1\]\.crash\(\)"):
            group.call_rank(1, "crash").wait(30)
        with pytest.raises(WorkerCrashed, match=r"faulty\[1\]\.whoami\(\)"):
            group.call("whoami").wait(30)
        assert time.monotonic() - t0 < 20
        with pytest.raises(AttributeError, match="no method 'nope'"):
            group.call("nope")
    finally:
        group.shutdown(timeout_s=5)


def test_ray_listens_on_loopback_only(cluster):
    import psutil

    me = psutil.Process()
    pids = {me.pid} | {p.pid for p in me.children(recursive=True)}
    listening = [
        c for c in psutil.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN and c.pid in pids
    ]
    assert listening, "expected Ray servers among this process tree"
    exposed = [(c.laddr.ip, c.laddr.port, c.pid) for c in listening if not _loopback(c.laddr.ip)]
    assert exposed == []


def _loopback(ip: str) -> bool:
    import ipaddress

    addr = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


# ------------------------------------------------------------------------------------------- channels
@pytest.fixture(scope="module")
def channel(cluster):
    ch = Channel.create("test", capacity=6)
    yield ch
    ch.close()


def test_channel_fifo_per_named_subqueue(channel):
    for i in range(3):
        channel.put(("a", i), key="a")
        channel.put(("b", i), key="b")
    assert [channel.get("b", timeout=5) for _ in range(3)] == [("b", 0), ("b", 1), ("b", 2)]
    assert [channel.get("a", timeout=5) for _ in range(3)] == [("a", 0), ("a", 1), ("a", 2)]


def test_channel_weights_batch_and_capacity(channel):
    for w in (1, 2, 3):
        channel.put({"w": w}, key="wt", weight=w)
    assert channel.stats()["wt"] == {"items": 3, "weight": 6.0}
    assert channel.get_batch(3, key="wt", timeout=5) == [{"w": 1}, {"w": 2}]  # 1 + 2 reaches 3
    assert channel.get_with_weight("wt", timeout=5) == ({"w": 3}, 3.0)
    with pytest.raises(ValueError, match="exceeds channel capacity"):
        channel.put("too heavy", key="wt", weight=7)


def test_channel_timeouts_and_back_pressure(channel):
    import ray

    t0 = time.monotonic()
    with pytest.raises(ChannelTimeout, match="get on 'empty'"):
        channel.get("empty", timeout=0.3)
    assert 0.25 < time.monotonic() - t0 < 10
    channel.put("big", key="bp", weight=5)
    with pytest.raises(ChannelTimeout, match="queue full"):
        channel.put("more", key="bp", weight=2, timeout=0.3)
    blocked = channel.put_async("more", key="bp", weight=2, timeout=30)
    ready, _ = ray.wait([blocked], timeout=0.3)
    assert ready == []  # held back while the queue is full
    assert channel.get("bp", timeout=5) == "big"
    ray.get(blocked, timeout=10)  # space freed: the put completes
    assert channel.get("bp", timeout=5) == "more"


def test_channel_between_processes_and_large_items_by_reference(cluster, channel):
    group = WorkerGroup.spawn(EchoWorker, "producer", cluster, 2)
    try:
        sent = group.call("produce", channel, 3)
        got = {r: [channel.get(f"r{r}", timeout=30) for _ in range(3)] for r in (0, 1)}
        assert sent.wait(30) == [3, 3]
        for r in (0, 1):
            assert [g["i"] for g in got[r]] == [0, 1, 2] and {g["rank"] for g in got[r]} == {r}
            np.testing.assert_array_equal(got[r][2]["x"], np.full(3, 2, np.float32))
    finally:
        group.shutdown()
    big = np.arange(600_000, dtype=np.float32)  # 2.4 MB: travels through the object store
    channel.put({"big": big}, key="large")
    np.testing.assert_array_equal(channel.get("large", timeout=10)["big"], big)


def test_channel_refuses_arbitrary_objects_and_reports_close(cluster):
    class Opaque:
        pass

    ch = Channel.create("short-lived", capacity=2)
    with pytest.raises(TypeError, match="plain data"):
        ch.put({"obj": Opaque()})
    ch.close()
    with pytest.raises(ChannelClosed):
        ch.get(timeout=1)
