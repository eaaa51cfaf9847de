"""The hybrid loop with real processes: franka-sim + ROS 2 nodes + bridge (``robot up --sim``), Ray on
127.0.0.1, the training job. A fault proxy sits between the learner and the bridge so a test can
cut the link the way a network does.

1. A short hybrid run: both sources produce episodes, the batch's real share matches
   ``real_fraction``, no real row is older than the staleness bound, a link cut during a real
   episode aborts that episode (marked, not trained on) while sim training continues, real episodes
   resume after the link returns; metrics, wandb (offline), checkpoints, manifest and report exist,
   and the report renders its plots in headless Chromium.
2. ``kill -9`` of the training driver leaves the arm holding (deadman) and ``--resume`` continues
   the run's step count.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.integration.robot.conftest import RobotUp
from tests.support.hybrid_run import (
    STARVED_CLIENT,
    STARVED_MACHINE_BOUNDS,
    JobThread,
    free_port,
    hybrid_overrides,
    lease_free,
    metrics_rows,
    resume_for_two_updates,
    robot_pc_config,
    wait_for,
)
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]
REAL_FRACTION = 0.25
MAX_STALENESS = 30


@pytest.fixture(scope="module")
def robot_pc(tmp_path_factory):
    """The robot PC on franka-sim, homing to the task's start pose; a proxy in front of its bridge."""
    port = free_port()
    config = robot_pc_config(tmp_path_factory.mktemp("hybrid"), port, STARVED_MACHINE_BOUNDS)
    up = RobotUp("--sim", "--config", str(config), "--ready-timeout", "600")
    proxy = TcpProxy(port)
    try:
        up.ready(660)
        yield proxy, f"tcp://127.0.0.1:{port}", up
    finally:
        proxy.close()
        code = up.stop()
    assert code == 0, up.text()[-3000:]


@pytest.fixture(autouse=True)
def _arm_not_latched(robot_pc):
    """The tests share one arm: one that latched in an earlier test (three faults within 30 s, e.g.
    franky's planner failing on a starved machine) is reset here, as an operator would, and said
    loudly, so that one test's latch fails that test only and not every one after it."""
    from tests.integration.robot.probe import RosProbe

    probe = RosProbe()
    try:
        diag = probe.fresh_diag(timeout=10.0)
        if diag.get("state") == "LATCHED":
            print(f"the arm was latched before this test ({diag.get('last_cause')}): resetting it")
            reply = probe.trigger("reset")
            assert reply.success, reply.message
    finally:
        probe.close()
    yield


def _overrides(endpoint: str, run_dir: Path, **extra) -> list[str]:
    return hybrid_overrides(
        endpoint,
        run_dir,
        "hybrid",
        **{
            "hybrid.real_fraction": REAL_FRACTION,
            "hybrid.max_staleness": MAX_STALENESS,
            "budget.wall_s": 75,
            "eval.sim_episodes": 16,
            "eval.arm_episodes": 2,
            "run.checkpoint_every": 10,
            "run.progress": True,
            **STARVED_CLIENT,
            **extra,
        },
    )


def _run_until(job, predicate, timeout: float, diagnostics=lambda: ""):
    """Run ``job`` in a thread until ``predicate()`` holds, then end its training (it checkpoints,
    evaluates and reports as at the end of its budget) and return its result."""
    thread = JobThread(job)

    def diag() -> str:
        rows = metrics_rows(job.run_dir)
        return f"{thread.describe()}\nlast metrics: {rows[-1] if rows else None}\n{diagnostics()}"

    try:
        wait_for("what the test needs from the run", predicate, timeout, diag, thread.alive)
    finally:
        job.finish_training()
        thread.join(900)
    assert not thread.alive() and thread.error is None, diag()
    return thread.outcome()


def test_a_hybrid_run_mixes_both_sources_and_survives_a_link_cut(robot_pc, tmp_path):
    from rlinf_robot.orchestrator.buffer import EpisodeStore
    from rlinf_robot.orchestrator.config import compose
    from rlinf_robot.orchestrator.job import TrainJob

    proxy, _, up = robot_pc
    # a budget a starved machine cannot outrun; the test ends training once it saw what it needs
    cfg = compose(_overrides(proxy.endpoint, tmp_path, **{"budget.wall_s": 1200}))
    job = TrainJob(cfg)
    run = job.run_dir
    thread = JobThread(job)

    def diag() -> str:
        rows = metrics_rows(run)
        return (
            f"{thread.describe()}\nlast metrics: {rows[-1] if rows else None}\nrobot up: {up.text()[-1500:]}"
        )

    def live() -> dict:
        """The real worker's own counters, now (metrics rows lag by one update: ~30 s capped)."""
        real = job.groups.get("real")
        return real.call("stats").wait(60)[0] if real is not None else {}

    # cut the link in the middle of a real episode (not the first, so one is done already). An
    # episode can end between the look and the cut; the cut counts only when the worker aborted an
    # episode for it, else the link comes back and the test tries again
    for attempt in range(4):
        running = wait_for(
            "a real episode running after the first one",
            lambda: s if (s := live()).get("episodes", 0) >= 1 and s.get("state") == "running" else None,
            900,
            diag,
            thread.alive,
        )
        aborted_before = running["aborted"]
        t_cut = time.time()
        updates_before = metrics_rows(run)[-1]["update"]
        proxy.cut()
        wait_for(
            "the worker to see the link gone",
            lambda before=aborted_before: (
                (s := live())["aborted"] > before or s["state"] in ("unavailable", "connecting")
            ),
            180,
            diag,
            thread.alive,
        )
        time.sleep(1.0)  # "unavailable" is set just before the cut episode is counted
        if live()["aborted"] > aborted_before:
            break
        print(f"cut {attempt} landed between episodes ({live()}); restoring and trying again")
        proxy.restore()
    else:
        raise AssertionError(f"no cut landed inside an episode in 4 tries\n{diag()}")
    time.sleep(4.0)
    # sim updates go on while the link is down (one update took ~30 s under a 1-CPU cap with load)
    wait_for(
        "a sim update while the link is cut",
        lambda: metrics_rows(run)[-1]["update"] > updates_before,
        300,
        diag,
        thread.alive,
    )
    updates_during = metrics_rows(run)[-1]["update"]
    proxy.restore()
    t_restore = time.time()
    store = EpisodeStore(run / "real_replay")

    def resumed() -> bool:
        after = [e["meta"] for e in store.read_all() if e["meta"]["t_start"] > t_restore]
        shares = [r for r in metrics_rows(run) if r["phase"] == "train" and r["batch/real_share"] > 0]
        return any(not m["aborted"] for m in after) and len(shares) >= 5

    wait_for(
        "a real episode after the link returned, and 5 updates with real rows",
        resumed,
        900,
        diag,
        thread.alive,
    )
    job.finish_training()
    thread.join(900)
    res = thread.outcome()
    assert not res.interrupted

    rows = metrics_rows(run)
    metas = [e["meta"] for e in store.read_all()]
    print(
        f"{len(rows)} updates; real episodes: "
        f"{[(round(m['t_start'] - t_cut, 1), m['aborted'], m['reason'][:60]) for m in metas]}"
    )
    # sim training went on during the cut
    assert updates_during > updates_before, (updates_before, updates_during)
    # the episode cut by the link is aborted and marked, never a normal ending
    cut = [m for m in metas if m["t_start"] < t_cut + 1 and m["t_end"] >= t_cut]
    assert cut and all(m["aborted"] for m in cut), cut
    assert any(w in cut[0]["reason"].lower() for w in ("link", "timeout", "lost", "lease", "no_state")), cut[
        0
    ]
    # real episodes resumed after the link returned
    after = [m for m in metas if m["t_start"] > t_restore and not m["aborted"]]
    assert after, metas
    # the batch's real share matches real_fraction whenever real data was there
    shares = [r["batch/real_share"] for r in rows if r["phase"] == "train" and r["batch/real_share"] > 0]
    assert len(shares) >= 5 and all(abs(s - REAL_FRACTION) < 0.02 for s in shares), shares
    # no real row older than the staleness bound was trained on
    lags = [r["batch/real_policy_lag"] for r in rows if "batch/real_policy_lag" in r]
    assert lags and max(lags) <= MAX_STALENESS, lags
    # both sources are in the metrics with their own counters
    last = rows[-1]
    assert last["sim:fr3-reach/env_steps"] > 0 and last["real:arm0/env_steps"] > 0
    assert 0 < last["real:arm0/utilisation"] <= 1 and last["real:arm0/latency_p50_ms"] > 0
    # the run dir holds what the issue lists
    for name in ("config.yaml", "manifest.json", "metrics.jsonl", "report.html", "eval.json"):
        assert (run / name).exists(), name
    assert list(run.glob("wandb/offline-run-*")), list(run.iterdir())
    assert (run / "checkpoints" / "latest").exists()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["git"]["commit"] and manifest["config_hash"] and manifest["packages"]["torch"] != "absent"
    ev = json.loads((run / "eval.json").read_text())
    assert ev["sim"]["n"] >= 16 and ev["arm"]["n"] == 2, f"{ev}\nrobot up: {up.text()[-3000:]}"
    _report_renders(run / "report.html", tmp_path)


def _report_renders(report: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "Debian's chromium is part of make setup (tools/ensure_apt.sh)"
    out = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'chr'}",
            "--dump-dom",
            report.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert 'data-plots="4"' in out.stdout, out.stdout[-500:] + out.stderr[-500:]


def _ray_processes() -> list[int]:
    out = subprocess.run(["pgrep", "-f", "ray::|raylet|gcs_server"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


@pytest.mark.timeout(3600)  # bounds for a starved machine; about 95 s on a quiet one
def test_kill_9_of_the_driver_leaves_the_arm_holding_and_resume_continues(robot_pc, tmp_path):
    from rlinf_robot.bridge import BridgeClient
    from rlinf_robot.envs.real import Settled

    _, endpoint, up = robot_pc
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "WANDB_MODE": "offline"}
    cmd = [
        sys.executable,
        "-m",
        "rlinf_robot.cli",
        "train",
        *_overrides(
            endpoint, tmp_path, **{"budget.wall_s": 600, "run.checkpoint_every": 3, "run.progress": False}
        ),
    ]
    log = open(tmp_path / "driver.log", "w")
    driver = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    run = tmp_path / "hybrid"
    observer = BridgeClient(endpoint=endpoint, connect_timeout_s=30.0).connect()
    try:
        # subscribed only once it reads: a subscriber that leaves observations unread for minutes fills
        # its socket's queue, and the bridge's ROUTER drops what does not fit, command replies included
        wait_for(
            "a real episode under way and a checkpoint",
            lambda: (
                (run / "checkpoints" / "latest").exists()
                and any(
                    r.get("real:arm0/state") == "running" and r.get("real:arm0/episodes", 0) >= 1
                    for r in metrics_rows(run)[-1:]
                )
            ),
            1500,  # a 1-CPU cap with load took 340 s only to start the driver's workers
            lambda: (tmp_path / "driver.log").read_text()[-2000:],
        )
        last_update = metrics_rows(run)[-1]["update"]
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and its process group: as a crash would
        driver.wait(30)
        observer.subscribe()
        # nobody holds the arm's lease any more: the real-env worker released it when its raylet
        # died (workers/orphan.py), or it lapsed; the arm holds and nothing can move it but a new lease
        wait_for("the lease to be free", lambda: lease_free(observer), 120)
        still = observer.observe(timeout=60, predicate=Settled(0.01, window_s=0.5))
        q0 = np.array(still.joint_pos[:7])
        time.sleep(1.0)
        q1 = np.array(observer.observe(timeout=30).joint_pos[:7])
        assert np.max(np.abs(q1 - q0)) < 3e-3, (q0, q1)
        wait_for("Ray's processes to exit", lambda: not _ray_processes(), 600, lambda: str(_ray_processes()))
    finally:
        observer.close()
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        log.close()
    res = resume_for_two_updates(run, env)
    out, checkpoint = res.out, res.checkpoint
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "resumed hybrid at update" in out.stdout
    # continued from the last checkpoint (every 3 updates: at most 3 behind the kill, or one ahead if
    # an update ended between reading the metrics and the kill), not from zero:
    # budget.updates=2 more updates, numbered on from the checkpoint's
    assert last_update - 3 <= checkpoint <= last_update + 1, (checkpoint, last_update)
    assert res.updates == [checkpoint + 1, checkpoint + 2], (checkpoint, last_update, res.updates)


def test_an_off_policy_hybrid_run_keeps_the_arms_transitions_in_their_own_replay(robot_pc, tmp_path):
    """algorithm=sac: the arm's transitions go to the learner's real replay (warm-started with sim
    transitions), every batch draws real_fraction of its rows from it, and --resume continues the
    step count with the learner's state (critics, temperature, optimizers) from the checkpoint."""
    from rlinf_robot.orchestrator.buffer import EpisodeStore
    from rlinf_robot.orchestrator.config import compose
    from rlinf_robot.orchestrator.job import TrainJob

    _, endpoint, up = robot_pc
    # a budget a starved machine cannot outrun; training ends once a real episode and five
    # updates with real rows were seen (and so a checkpoint, every 5 updates)
    over = _overrides(endpoint, tmp_path, **{"budget.wall_s": 1200, "run.checkpoint_every": 5})
    cfg = compose([*over, "algorithm=sac", "algorithm.learning_starts=256"])
    job = TrainJob(cfg)
    run = job.run_dir
    store = EpisodeStore(run / "real_replay")

    def enough() -> bool:
        real_updates = [
            r for r in metrics_rows(run) if r["phase"] == "train" and r.get("train/real_share", 0) > 0
        ]
        done = [e for e in store.read_all() if not e["meta"]["aborted"]]
        return len(real_updates) >= 5 and bool(done) and (run / "checkpoints" / "latest").exists()

    res = _run_until(job, enough, 900, lambda: f"robot up: {up.text()[-1500:]}")
    assert not res.interrupted
    rows = metrics_rows(run)
    train = [r for r in rows if r["phase"] == "train"]
    episodes = [e for e in store.read_all() if not e["meta"]["aborted"]]
    diag = f"robot up: {up.text()[-1500:]}\nlast row: {rows[-1] if rows else None}"
    assert episodes, diag
    real_steps = sum(len(e["rewards"]) for e in episodes)
    last = train[-1]
    # warm-started with up to warm_start_real sim transitions (fewer when the sim replay held fewer:
    # a starved machine's had 224 of 512)
    warm = last["train/real_warm_start"]
    assert 0 < warm <= cfg.algorithm["warm_start_real"], warm
    # the real replay holds the warm start and every real transition that arrived before the last update
    assert warm < last["train/real_replay"] <= warm + real_steps, (
        last["train/real_replay"],
        warm,
        real_steps,
    )
    shares = [r["train/real_share"] for r in train if r["train/critic_updates"]]
    assert shares and all(abs(s - REAL_FRACTION) < 0.02 for s in shares), shares
    assert (
        last["train/utd"] == cfg.algorithm["utd"]
        and last["train/actor_delay"] == cfg.algorithm["actor_delay"]
    )
    assert last["train/total_actor_updates"] == last["train/total_critic_updates"]  # actor_delay 1
    assert json.loads((run / "eval.json").read_text())["arm"]["n"] == 2
    # resume: two more updates, numbered on from the checkpoint, the learner's updates with them
    state = json.loads(
        (run / "checkpoints" / (run / "checkpoints" / "latest").read_text() / "state.json").read_text()
    )
    res2 = TrainJob(
        compose(
            [
                *_overrides(endpoint, tmp_path, **{"budget.wall_s": 1200}),  # updates bound it
                "algorithm=sac",
                "algorithm.learning_starts=256",
                f"run.resume={run}",
                f"budget.updates={RESUMED_UPDATES}",
                "eval.arm_episodes=0",
                "eval.sim_episodes=0",
            ]
        )
    ).run()
    after = [r for r in metrics_rows(run) if r["update"] > state["update"]]
    numbers = [r["update"] for r in after]
    assert numbers == list(range(state["update"] + 1, state["update"] + RESUMED_UPDATES + 1)), numbers
    # the learner's own count went on from the checkpoint's (the checkpointed learner was restored;
    # the sim replay was not, so it learns again once a batch can be drawn, not after learning_starts)
    counts = [r["train/total_critic_updates"] for r in after if "train/total_critic_updates" in r]
    assert counts and counts[0] > state_learner_updates(run, state), (
        counts,
        state_learner_updates(run, state),
    )
    assert not res2.interrupted


def test_the_rlinf_co_baseline_trains_in_sim_with_real_demonstrations(robot_pc, tmp_path):
    """mode=cotrain (RLinf-Co): the scripted expert records demonstrations on the arm (kept as
    LeRobot ``demo`` episodes and in real_demos/), sim RL trains with the auxiliary BC loss on them,
    and nothing else runs on the arm but the evaluation."""
    from rlinf_robot.orchestrator.buffer import EpisodeStore
    from rlinf_robot.orchestrator.config import compose
    from rlinf_robot.orchestrator.job import TrainJob

    _, endpoint, up = robot_pc
    # updates bound it, not wall time (a starved machine gets as far as a quiet one)
    over = _overrides(
        endpoint, tmp_path, **{"budget.wall_s": 1200, "budget.updates": 3, "budget.pretrain_wall_s": 10}
    )
    res = TrainJob(compose([*over, "mode=cotrain", "hybrid.real_demos=2"])).run()
    run = res.run_dir
    demos = EpisodeStore(run / "real_demos").read_all()
    # every demonstration is kept; the BC rows are the successful ones' (the expert at 20 Hz on a
    # starved arm can end a far goal short of it: 1 of 2 in a clean-clone run)
    good = [d for d in demos if d["meta"]["success"] and not d["meta"]["aborted"]]
    assert len(demos) == 2 and good, [d["meta"] for d in demos]
    train = [r for r in metrics_rows(run) if r["phase"] == "train"]
    assert train and all(r["train/bc_loss"] >= 0 for r in train), train[-1:]
    assert all(r["batch/real_share"] == 0 for r in train)  # no RL rows from the arm
    assert not EpisodeStore(run / "real_replay").read_all()
    import pyarrow.parquet as pq

    meta = pq.read_table(run / "datasets" / "arm0" / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    kinds = meta.column("kind").to_pylist()
    assert kinds[:2] == ["demo", "demo"] and set(kinds[2:]) == {"eval"}, kinds


#: enough updates after a resume for 256 rows (a batch) of sim transitions at 32 per update
def test_a_scripted_operator_intervenes_on_schedule_and_the_learner_uses_its_steps(robot_pc, tmp_path):
    """Teleop (HIL-SERL style): ``rlinf-robot teleop scripted`` (the task's expert, a process of its
    own) takes the arm over for decisions 2-5 of every second training episode and hands it back.
    Those steps, and only those, are flagged ``intervened`` in the episodes and in the LeRobot
    dataset, carry the operator's action (no behaviour log-prob), and the SAC learner draws its
    ``teleop.demo_fraction`` of each batch from them."""
    import pyarrow.parquet as pq

    from rlinf_robot.orchestrator.buffer import EpisodeStore
    from rlinf_robot.orchestrator.config import compose
    from rlinf_robot.orchestrator.job import TrainJob

    _, endpoint, up = robot_pc
    operator, states, commands = _scripted_operator(every=2, steps="2:6")
    over = _overrides(endpoint, tmp_path, **{"budget.wall_s": 1200, "run.id": "teleop"})
    teleop = [f"teleop.states={states}", f"teleop.commands={commands}", "teleop.reply_wait_s=10"]
    job = TrainJob(compose([*over, *teleop, "algorithm=sac", "algorithm.learning_starts=256"]))
    run = job.run_dir
    store = EpisodeStore(run / "real_replay")

    def done() -> list[dict]:
        return [e for e in store.read_all() if not e["meta"]["aborted"] and len(e["rewards"]) >= 6]

    def enough() -> bool:
        demo_updates = [r for r in metrics_rows(run) if r.get("train/demo_share", 0) > 0]
        return {e["meta"]["index"] % 2 for e in done()} == {0, 1} and len(demo_updates) >= 3

    try:
        res = _run_until(
            job, enough, 900, lambda: f"robot up: {up.text()[-1500:]}\nrows: {metrics_rows(run)[-1:]}"
        )
    finally:
        operator.terminate()
        out = operator.communicate(timeout=60)[0]
    assert not res.interrupted
    episodes = done()
    for ep in episodes:
        want = list(range(2, 6)) if ep["meta"]["index"] % 2 == 0 else []
        got = np.flatnonzero(ep["intervened"]).tolist()
        assert got == want, (ep["meta"], got, out[-2000:])
        assert ep["meta"]["intervened_steps"] == len(want)
        assert np.isnan(ep["log_prob"][want]).all() and np.isfinite(ep["log_prob"][6:]).all()
        assert np.isfinite(ep["actions"]).all()
    assert "engaged commands" in out and "refused" not in out, out[-2000:]
    # the LeRobot dataset: the same flags, frame by frame
    table = pq.read_table(sorted((run / "datasets" / "arm0" / "data").rglob("*.parquet"))[0])
    frames = table.select(["episode_index", "frame_index", "intervened"]).to_pydict()
    flagged: dict[int, list[int]] = {}
    for e, f, i in zip(frames["episode_index"], frames["frame_index"], frames["intervened"], strict=True):
        if i:
            flagged.setdefault(e, []).append(f)
    assert flagged and all(v == [2, 3, 4, 5] for v in flagged.values()), flagged
    # the learner: interventions in their own replay, their share of the batches
    train = [r for r in metrics_rows(run) if r.get("train/demo_share", 0) > 0]
    assert train and all(r["train/demo_share"] == pytest.approx(0.25, abs=0.01) for r in train), train[-1]
    assert 4 <= train[-1]["train/demo_replay"] <= 4 * len(flagged) + 4, train[-1]


def _scripted_operator(every: int, steps: str) -> tuple[subprocess.Popen, str, str]:
    """``rlinf-robot teleop scripted`` as its own process on two free loopback ports: (process,
    states endpoint, commands endpoint)."""
    states, commands = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "rlinf_robot.cli", "teleop", "scripted", "--states", states,
           "--commands", commands, "--every", str(every), "--steps", steps, "--gain", "0.2",
           "--duration", "1500"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, states, commands


def _dataset_frames(root: Path) -> dict[int, dict[str, list]]:
    """episode_index -> its frames' columns, read with pyarrow from a recorded dataset."""
    import pyarrow.parquet as pq

    out: dict[int, dict[str, list]] = {}
    for path in sorted((root / "data").rglob("*.parquet")):
        cols = pq.read_table(path).to_pydict()
        for i, e in enumerate(cols["episode_index"]):
            ep = out.setdefault(e, {})
            for k, v in cols.items():
                ep.setdefault(k, []).append(v[i])
    return out


def test_record_drives_the_arm_with_the_expert_or_an_operator_and_writes_datasets(robot_pc, tmp_path):
    """``rlinf-robot record``: the scripted expert reaches its goal and the episode lands in a
    LeRobot dataset as a ``record`` episode; with ``--actor hold`` and an operator, the arm stays
    put until the operator takes over (decisions 3-7) and moves only then, flagged ``intervened``."""
    import pyarrow.parquet as pq

    _, endpoint, up = robot_pc
    cli = [sys.executable, "-m", "rlinf_robot.cli", "record", "--endpoint", endpoint, "--task", "fr3-reach"]
    expert = subprocess.run(
        [*cli, "--out", str(tmp_path / "expert"), "--episodes", "1", "--actor", "expert"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert expert.returncode == 0, expert.stdout[-2000:] + expert.stderr[-2000:] + up.text()[-1000:]
    assert "success True" in expert.stdout, expert.stdout
    episodes = pq.read_table(
        sorted((tmp_path / "expert" / "arm0" / "meta" / "episodes").rglob("*.parquet"))[0]
    )
    assert episodes.column("kind").to_pylist() == ["record"]

    operator, states, commands = _scripted_operator(every=1, steps="3:8")
    try:
        held = subprocess.run(
            [*cli, "--out", str(tmp_path / "held"), "--episodes", "2", "--actor", "hold",
             "--teleop-states", states, "--teleop-commands", commands],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        operator.terminate()
        out = operator.communicate(timeout=60)[0]
    assert held.returncode == 0, held.stdout[-2000:] + held.stderr[-2000:] + out[-1000:]
    frames = _dataset_frames(tmp_path / "held" / "arm0")
    assert len(frames) == 2, (held.stdout, out)
    for ep, cols in frames.items():
        flagged = [f for f, i in zip(cols["frame_index"], cols["intervened"], strict=True) if i]
        assert flagged == [3, 4, 5, 6, 7], (ep, flagged, held.stdout, out[-1000:])
        state = np.array(cols["observation.state"])
        tcp, goal = state[:, 14:17], state[0, 22:25]  # ROBOT_STATE_FIELDS, then the reach task's goal
        moved = np.linalg.norm(np.diff(tcp, axis=0), axis=1)
        to_goal = np.linalg.norm(tcp - goal, axis=1)
        # the arm holds until the takeover, the operator's five steps bring it towards the goal
        # (the motion generator ramps up, so part of it comes after), and it comes to rest again
        assert moved[:3].max() < 1e-3 and moved[-5:].max() < 1e-3, (ep, moved)
        assert to_goal[-1] < to_goal[3] - 5e-3, (ep, to_goal)


RESUMED_UPDATES = 10


def state_learner_updates(run: Path, state: dict) -> int:
    """The SAC learner's critic updates in the checkpoint the resume started from."""
    return json.loads(
        (run / "checkpoints" / f"update_{state['update']:06d}" / "actor" / "sac.json").read_text()
    )["step"]
