"""What the tests and benchmarks that run a hybrid job against ``robot up --sim`` share: a free
loopback port, the robot PC's config for them, the job's overrides, the run's metrics, bounded
waits, the lease."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import yaml

from rlinf_robot.envs.tasks import READY_Q
from rlinf_robot.paths import REPO_ROOT


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (what every test server binds)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: Link bounds for runs whose subject is the hybrid loop, not the deadman: on a CI machine capped
#: to one core beside busy loops (``cpu-cap --busy 2 1.0``) the learner's heartbeat thread went
#: unscheduled for more than the 100 ms deadman, every reset's homing was held mid-way ("homing
#: ended before home (hold)") and a start-pose move was refused for an observation 3.6 s old. The
#: shipped bounds are tested where they are the subject (tests/bridge, tests/integration/bridge,
#: the fault matrix); these keep every check, only slower to fire.
STARVED_MACHINE_BOUNDS = {
    "bridge_node": {"deadman_ms": 1000.0, "lease_timeout_ms": 3000.0, "max_obs_age_ms": 10000.0},
    "franka_node": {"deadman_ms": 1000.0},
}
#: the learner's side of the same: a heartbeat answer may take this long before the link counts as down
STARVED_CLIENT = {"robot.client.link_timeout_ms": 3000.0}


def robot_pc_config(tmp: Path, port: int, bounds: dict[str, dict] | None = None) -> Path:
    """sim_robot.yaml with the bridge on ``port``, the arm homing to the task's start pose and the
    camera at 5 Hz (the training camera's rate is not what these runs are about); ``bounds``: per
    node, parameters that replace the shipped ones (``STARVED_MACHINE_BOUNDS``)."""
    edits = {
        "bridge_node": {"endpoint": f"tcp://127.0.0.1:{port}"},
        "franka_node": {"home_q": READY_Q.tolist()},
        "camera_node": {"rate_hz": 5.0},
    }
    for name, params in (bounds or {}).items():
        edits.setdefault(name, {}).update(params)
    raw = yaml.safe_load((REPO_ROOT / "launch" / "config" / "sim_robot.yaml").read_text())
    for key, block in raw.items():
        block["ros__parameters"].update(edits.get(key.strip("/").split("/")[-1], {}))
    path = tmp / "robot_pc.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def hybrid_overrides(endpoint: str, runs: Path, run_id: str, **extra: object) -> list[str]:
    """``train`` overrides for a hybrid run of one arm at ``endpoint``, written to ``runs/run_id``:
    a quarter of the episodes on the arm, a short sim pre-training, a small sim batch, no baseline
    evaluation. ``extra`` (dotted keys, as on the command line) replaces or adds to them: each
    caller names only what its run is about (budget, evaluation, checkpoints, keys)."""
    over: dict[str, object] = {
        "robot": "fr3",
        "robot.endpoints": f"[{endpoint}]",
        "robot.names": "[arm0]",
        "robot.client.connect_timeout_s": 30.0,
        "hybrid.real_fraction": 0.25,
        "budget.pretrain_wall_s": 15,
        "eval.sim_episodes": 8,
        "eval.baseline_arm_episodes": 0,
        "run.dir": str(runs),
        "run.id": run_id,
        "run.progress": False,
        "sim.num_envs": 8,
    }
    over.update(extra)
    return [f"{k}={v}" for k, v in over.items()]


def metrics_rows(run: Path) -> list[dict]:
    """The run's ``metrics.jsonl`` so far (one dict per update)."""
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Resumed:
    """What ``resume_for_two_updates`` saw: the checkpoint it resumed from, the command's output and
    the update numbers the resumed run wrote."""

    checkpoint: int
    out: subprocess.CompletedProcess
    updates: list[int]


def resume_for_two_updates(run: Path, env: dict[str, str]) -> Resumed:
    """``rlinf-robot train --resume run`` for two more updates (one arm evaluation episode), as a user
    would after a crash: the last checkpoint's update, and which updates the resumed run wrote."""
    latest = (run / "checkpoints" / "latest").read_text().strip()
    checkpoint = json.loads((run / "checkpoints" / latest / "state.json").read_text())["update"]
    before = len(metrics_rows(run))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlinf_robot.cli",
            "train",
            "--resume",
            str(run),
            "budget.updates=2",
            "budget.wall_s=900",
            "eval.arm_episodes=1",
            "run.progress=false",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    return Resumed(checkpoint, out, sorted({r["update"] for r in metrics_rows(run)[before:]}))


def wait_for(what: str, predicate, timeout: float, diagnostics=lambda: "", alive=lambda: True):
    """Poll ``predicate`` every 0.5 s; its value once truthy, else ``AssertionError`` naming ``what``
    with ``diagnostics()``. ``alive``: what the wait depends on still runs (a job's thread); once it
    does not, the wait fails at once instead of running out its timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if not alive():
            raise AssertionError(f"what was to produce {what} has ended\n{diagnostics()}")
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{diagnostics()}")


class JobThread:
    """``job.run()`` on a daemon thread that keeps its result or, if it raised, the traceback: a
    test waiting on a job that died says why at once (a CI run once waited 900 s on a job that had
    ended 10 s after a link cut, with nothing saying how)."""

    def __init__(self, job) -> None:
        self.job = job
        self.result = None
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="train-job", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.result = self.job.run()
        except BaseException:
            self.error = traceback.format_exc()
            raise

    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def describe(self) -> str:
        """One line on the thread's state, and the traceback if the job raised."""
        if self.alive():
            return "job: running"
        return f"job: ended with an error:\n{self.error}" if self.error else "job: ended normally"

    def outcome(self):
        """The job's result; ``AssertionError`` with the traceback if it raised or still runs."""
        assert not self.alive() and self.error is None and self.result is not None, self.describe()
        return self.result


def lease_free(client) -> bool:
    """Whether nobody holds the arm's lease (and the bridge says so: LINK_LOST or IDLE)."""
    from rlinf_robot.bridge import BridgeError

    try:
        status = client.status()
    except BridgeError as e:  # a busy machine may take a while to answer
        print(f"status: {e}")
        return False
    print(f"status: {status.state} lease_holder={status.lease_holder!r}")
    return status.lease_holder == "" and status.state in ("LINK_LOST", "IDLE")
