"""Crash matrix (issue 19, item 2): ``kill -9`` of one process of a running hybrid job, at a seeded
random point of a real episode, then what a user would do next.

The robot PC runs under ``robot up --sim`` (franka-sim, ``franka_node``, ``camera_node``,
``bridge_node``); the learner is ``rlinf-robot train`` on it with a checkpoint every few updates and
the arm's episodes recorded as LeRobot datasets. Each case starts a fresh run, waits for a real
episode under way after a checkpoint, waits a seeded 0-``MAX_DELAY_S`` more, and kills its target:

- the job's own processes (``driver``, and the Ray workers ``env``, ``rollout``, ``actor``, ``real``):
  the job ends (a dead worker: with an error naming it), the arm's lease is released and the arm
  holds still; ``train --resume`` then continues the run's update count from its last checkpoint;
- the robot PC's processes (``camera_node``, ``franka_node``, ``bridge_node``, ``franka_sim``):
  ``robot up`` restarts them and the job, still running, completes real episodes again; it is then
  interrupted (SIGINT: checkpoint and report) and resumed like the others.

In every case the episodes committed to the run's datasets before the kill are there afterwards,
byte for byte, and the datasets hold exactly what their ``meta/info.json`` counts.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.support.hybrid_run import (
    free_port,
    hybrid_overrides,
    lease_free,
    metrics_rows,
    resume_for_two_updates,
    robot_pc_config,
    wait_for,
)

JOB_TARGETS = {"driver": None, "env": "SimEnvWorker", "rollout": "RolloutWorker", "actor": "ActorWorker",
               "real": "RealEnvWorker"}  # fmt: skip
ROBOT_TARGETS = ("camera_node", "franka_node", "bridge_node", "franka_sim")
TARGETS = (*JOB_TARGETS, *ROBOT_TARGETS)
MAX_DELAY_S = 6.0  # the kill lands this long at most after the episode was seen running
START_BOUND_S = 1500.0  # a run's first checkpoint and real episode (a starved machine: minutes)
END_BOUND_S = 600.0  # the job ending after one of its processes was killed
RESTART_BOUND_S = 120.0  # robot up running a killed process again
CARRY_ON_BOUND_S = 600.0  # the job completing a real episode after a robot PC process came back
HOLD_TOL_RAD = 3e-3  # the arm, once its lease is free, stays this still for a second


@dataclass
class CaseResult:
    target: str
    delay_s: float
    ok: bool = False
    ended: str = ""  # how the job ended: "exit <rc>: <last error line>" | "carried on"
    lease_free_s: float = float("nan")  # kill -> nobody holds the lease
    held: bool = False  # the arm still once the lease was free (job kills) / the job went on (robot kills)
    resumed_from: int = -1  # the checkpoint's update the resume continued from
    committed: int = 0  # episodes committed before the kill
    kept: bool = False  # all of them intact afterwards
    problems: list[str] = field(default_factory=list)

    def row(self) -> str:
        return (
            f"{self.target:12s} {self.delay_s:4.1f} s  {'ok ' if self.ok else 'BAD'}  ended: {self.ended[:60]:60s} "
            f"lease free {self.lease_free_s:6.1f} s  held {self.held!s:5s}  resumed from {self.resumed_from:3d}  "
            f"episodes kept {self.committed if self.kept else 'NO'}"
        )


def _ray_pids(cls_name: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"ray::{cls_name}"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def dataset_files(run: Path) -> dict[str, str]:
    """sha256 of every committed episode's data file in the run's datasets, by relative path."""
    import pyarrow.parquet as pq

    out = {}
    for info_path in sorted((run / "datasets").glob("*/meta/info.json")):
        root = info_path.parent.parent
        committed = int(json.loads(info_path.read_text())["total_episodes"])
        for meta in sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet")):
            for r in pq.read_table(meta).to_pylist():
                if r["episode_index"] < committed:
                    rel = f"data/chunk-{r['data/chunk_index']:03d}/file-{r['data/file_index']:03d}.parquet"
                    out[str((root / rel).relative_to(run))] = hashlib.sha256(
                        (root / rel).read_bytes()
                    ).hexdigest()
    return out


class CrashMatrix:
    """One ``robot up --sim`` for all cases; each case a fresh run dir under ``work``."""

    def __init__(self, work: Path, seed: int = 19_002):
        self.work, self.rng = Path(work), random.Random(seed)
        self.up = None
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled", "WANDB_MODE": "offline"}

    def __enter__(self) -> CrashMatrix:
        from tests.integration.robot.conftest import RobotUp

        port = free_port()
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.up = RobotUp(
            "--sim", "--config", str(robot_pc_config(self.work, port)), "--ready-timeout", "600"
        )
        self.pids = self.up.ready(660)
        return self

    def __exit__(self, *exc) -> None:
        if self.up is not None:
            self.up.stop()

    # ------------------------------------------------------------------ one case
    def _train(self, run_dir: Path, log: Path, *extra: str) -> subprocess.Popen:
        over = hybrid_overrides(
            self.endpoint,
            run_dir.parent,
            run_dir.name,
            **{"budget.wall_s": 900, "eval.arm_episodes": 1, "run.checkpoint_every": 3},
        )
        cmd = [
            sys.executable,
            "-m",
            "rlinf_robot.cli",
            "train",
            *over,
            *extra,
        ]
        return subprocess.Popen(
            cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True, env=self.env
        )

    def run_case(self, target: str, name: str | None = None) -> CaseResult:
        from rlinf_robot.bridge import BridgeClient

        delay = round(self.rng.uniform(0.0, MAX_DELAY_S), 2)
        res = CaseResult(target, delay)
        case_dir = self.work / (name or target)
        run = case_dir / "run"
        log = case_dir / "driver.log"
        case_dir.mkdir(parents=True, exist_ok=True)
        driver = self._train(run, log)
        observer = BridgeClient(endpoint=self.endpoint, connect_timeout_s=30.0).connect()
        try:
            wait_for(
                "a checkpoint and a real episode under way after it",
                lambda: (
                    (run / "checkpoints" / "latest").exists()
                    and any(
                        r.get("real:arm0/state") == "running" and r.get("real:arm0/episodes", 0) >= 1
                        for r in metrics_rows(run)[-1:]
                    )
                ),
                START_BOUND_S,
                lambda: log.read_text()[-2000:],
            )
            time.sleep(delay)
            before = dataset_files(run)
            res.committed = len(before)
            t_kill = time.monotonic()
            if target in JOB_TARGETS:
                self._kill_job_process(target, driver, log)
                self._after_job_kill(res, driver, log, observer, t_kill)
            else:
                episodes = max((r.get("real:arm0/episodes", 0) for r in metrics_rows(run)), default=0)
                self._kill_robot_process(target)
                wait_for(
                    "the job to finish a real episode again",
                    lambda: (
                        driver.poll() is None
                        and max((r.get("real:arm0/episodes", 0) for r in metrics_rows(run)), default=0)
                        > episodes
                    ),
                    CARRY_ON_BOUND_S,
                    lambda: f"driver rc {driver.poll()}\n{log.read_text()[-2000:]}",
                )
                res.ended, res.held = "carried on", True
                os.kill(driver.pid, signal.SIGINT)  # end it as a user would (Ctrl-C): checkpoint, report
                driver.wait(END_BOUND_S)
            res.resumed_from = self._resume(run, case_dir)
            after = dataset_files(run)
            lost = {k for k in before if after.get(k) != before[k]}
            res.kept = not lost
            if lost:
                res.problems.append(f"committed episodes changed or lost: {sorted(lost)}")
            self._check_datasets(run, res)
        except Exception as e:  # noqa: BLE001 - a case that breaks is a row that failed, with why
            res.problems.append(f"{type(e).__name__}: {e}")
        finally:
            observer.close()
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait(60)
        res.ok = not res.problems
        return res

    def _kill_job_process(self, target: str, driver: subprocess.Popen, log: Path) -> None:
        if target == "driver":
            os.killpg(driver.pid, signal.SIGKILL)  # the driver and its process group: as a crash would
            return
        pids = _ray_pids(JOB_TARGETS[target])
        assert pids, f"no ray::{JOB_TARGETS[target]} process\n{log.read_text()[-1500:]}"
        os.kill(pids[0], signal.SIGKILL)

    def _after_job_kill(self, res: CaseResult, driver, log: Path, observer, t_kill: float) -> None:
        from rlinf_robot.envs.real import Settled

        try:
            rc = driver.wait(END_BOUND_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the job did not end within {END_BOUND_S:g} s\n{log.read_text()[-2000:]}"
            ) from None
        errors = [ln for ln in log.read_text().splitlines() if "error" in ln.lower() or "crash" in ln.lower()]
        res.ended = f"exit {rc}: {errors[-1].strip() if errors else ''}"
        if res.target != "driver":
            assert rc != 0, f"the job exited 0 after its {res.target} worker died\n{log.read_text()[-2000:]}"
            named = JOB_TARGETS[res.target] in log.read_text() or f"{res.target}/" in log.read_text()
            assert named, f"the job's output does not name the dead worker\n{log.read_text()[-2000:]}"
        wait_for("the lease to be free", lambda: lease_free(observer), 180)
        res.lease_free_s = time.monotonic() - t_kill
        observer.subscribe()
        still = observer.observe(timeout=60, predicate=Settled(0.01, window_s=0.5))
        q0 = np.array(still.joint_pos[:7])
        time.sleep(1.0)
        q1 = np.array(observer.observe(timeout=30).joint_pos[:7])
        res.held = bool(np.max(np.abs(q1 - q0)) < HOLD_TOL_RAD)
        observer.command("unsubscribe")
        assert res.held, f"the arm moved {np.max(np.abs(q1 - q0)):.4f} rad with nobody holding its lease"

    def _kill_robot_process(self, target: str) -> None:
        up = self.up
        start = len(up.lines)
        if target == "franka_sim":
            ready = [re.search(r"franka-sim ready \(pid (\d+)", line) for line in up.lines]
            pid = int([m for m in ready if m][-1].group(1))
            back = r"franka-sim ready \(pid \d+, restarted\)"
        else:
            pid = self.pids[target]
            back = rf"robot up: {target} running again \(pid (\d+)\)"
        os.kill(pid, signal.SIGKILL)
        m = up.wait_for(back, RESTART_BOUND_S, start)
        if target != "franka_sim":
            self.pids[target] = int(m.group(1))

    def _resume(self, run: Path, case_dir: Path) -> int:
        res = resume_for_two_updates(run, self.env)
        (case_dir / "resume.log").write_text(res.out.stdout + res.out.stderr)
        assert res.out.returncode == 0, (
            f"resume exited {res.out.returncode}\n{(res.out.stdout + res.out.stderr)[-2000:]}"
        )
        assert res.updates == [res.checkpoint + 1, res.checkpoint + 2], (
            f"resumed updates {res.updates} after checkpoint {res.checkpoint}"
        )
        return res.checkpoint

    def _check_datasets(self, run: Path, res: CaseResult) -> None:
        from rlinf_robot.data.lerobot_writer import repair

        for info in sorted((run / "datasets").glob("*/meta/info.json")):
            fixed = repair(info.parent.parent)
            if any(fixed.values()):  # the resumed writer opened it, so nothing should be left to fix
                res.problems.append(f"{info.parent.parent.name}: uncommitted leftovers {fixed}")
