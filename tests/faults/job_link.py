"""A link fault under the whole hybrid job (issue 19, item 1): ``rlinf-robot train`` on the learner
host (its Ray cluster on that host's loopback, the arm through ``robot.endpoints`` with CURVE keys),
the robot PC of ``link_matrix.LinkStack`` on the other, one fault on the link between them while a
real episode runs.

Measured as the other rows are, by the observer on the robot PC (hold, stale drops, travel after
the hold, resume = heal -> the arm moving under a chunk it had not run before), plus what only the
job can say: sim training went on while the arm was cut off (updates during the fault), the real
episode the fault cut was aborted and marked, and real episodes completed again after the heal
("carried on" is all three). The job's chunks carry observations the observer does not see, so
late runs are not measured here (the bridge refuses a chunk from a stale observation by itself:
the pilot rows measure that).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from tests.faults.link_matrix import (
    RESUME_BOUND_MS,
    LinkStack,
    Row,
    _lines,
    check_hold_and_travel,
    holds_the_arm,
    measure_holds,
    set_travel,
    travel_bound_mm,
)
from tests.faults.netlab import Fault
from tests.support.hybrid_run import hybrid_overrides, metrics_rows

START_BOUND_S = 1500.0  # the job's first real episode done and the next one running
REAL_AGAIN_BOUND_S = 300.0  # heal -> a real episode completed (a reset, a whole episode)


def _real(rows: list[dict], key: str) -> int:
    return max((int(r.get(f"real:arm0/{key}", 0)) for r in rows), default=0)


def _clean(rows: list[dict]) -> int:
    """Real episodes that ended the way the task ends them (the count includes aborted ones)."""
    return max(
        (int(r.get("real:arm0/episodes", 0)) - int(r.get("real:arm0/aborted", 0)) for r in rows), default=0
    )


def run_job_case(stack: LinkStack, fault: Fault, tag: str) -> Row:
    """The hybrid job drives the arm across ``fault`` (a partition, loss or bandwidth limit with
    a duration); returns its row, named ``<fault> (hybrid job)``."""
    assert fault.kind in ("partition", "loss", "bandwidth") and fault.seconds is not None, fault
    tmp = stack.tmp
    run = tmp / f"{tag}-run" / "job"
    obs_log, job_log = tmp / f"{tag}-observer.jsonl", tmp / f"{tag}-job.log"
    over = hybrid_overrides(
        stack.endpoint,
        run.parent,
        run.name,
        **{
            "robot.client.connect_timeout_s": 60.0,
            "robot.client.curve.secret_file": str(stack.keys / "job.key_secret"),
            "robot.client.curve.server_public_file": str(stack.keys / "robot.key"),
            "budget.wall_s": 1800,
            "eval.arm_episodes": 0,
        },
    )
    argv = [*stack.lab.exec_prefix(stack.lab.learner), sys.executable, "-m", "rlinf_robot.cli", "train"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "WANDB_MODE": "offline"}
    with job_log.open("w") as out:
        job = subprocess.Popen([*argv, *over], stdout=out, stderr=subprocess.STDOUT, env=env)
    observer = stack.agent("observer", obs_log, START_BOUND_S + fault.seconds + REAL_AGAIN_BOUND_S + 120)
    row = Row(f"{fault.name} (hybrid job)", late=None)
    t_fault = t_heal = None
    try:
        _await(
            lambda: (
                _clean(metrics_rows(run)) >= 1
                and (metrics_rows(run)[-1:] or [{}])[0].get("real:arm0/state") == "running"
            ),
            START_BOUND_S,
            "a real episode running after the first one",
            job,
            job_log,
            run,
        )
        time.sleep(1.0)
        before = metrics_rows(run)
        t_fault = time.monotonic_ns()
        stack.lab.apply(fault)
        time.sleep(fault.seconds)
        during = metrics_rows(run)
        t_heal = time.monotonic_ns()
        stack.lab.heal()
        clean = _clean(metrics_rows(run))  # the cut episode may still be counted, as aborted
        _await(
            lambda: _clean(metrics_rows(run)) > clean,
            REAL_AGAIN_BOUND_S,
            "a real episode completed (not aborted) after the heal",
            job,
            job_log,
            run,
        )
        after = metrics_rows(run)
        sim_updates = len(during) - len(before)
        aborted = _real(after, "aborted") - _real(before, "aborted")
        print(
            f"{row.fault}: {sim_updates} updates during the fault, {aborted} real episode(s) aborted, "
            f"clean real episodes {_clean(before)} -> {_clean(after)}",
            flush=True,
        )
        if sim_updates < 1:
            row.problems.append("no update while the arm was cut off (sim training stopped)")
        cut = holds_the_arm(fault)
        if cut and aborted < 1:
            row.problems.append("the episode the partition cut was not aborted")
        row.carried_on = sim_updates >= 1 and (aborted >= 1 or not cut)
    except AssertionError as e:
        row.problems.append(str(e))
    finally:
        t_end = time.monotonic_ns()
        stack.lab.heal()
        if job.poll() is None:
            job.send_signal(signal.SIGINT)  # Ctrl-C: it stops the arm's episodes and reports
            try:
                job.wait(300)
            except subprocess.TimeoutExpired:
                job.kill()
                job.wait(30)
        observer.terminate()
        observer.wait(10)
    if t_fault is None:
        return row
    _measure(row, fault, _lines(obs_log), t_fault, t_heal, t_end)
    return row


def _await(cond, timeout: float, what: str, job: subprocess.Popen, log: Path, run: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        if job.poll() is not None:
            raise AssertionError(
                f"the job exited with {job.returncode} before {what}:\n{log.read_text()[-3000:]}"
            )
        time.sleep(0.5)
    last = (metrics_rows(run)[-1:] or [{}])[0]
    real = {k: v for k, v in last.items() if k.startswith("real:")}
    raise AssertionError(
        f"no {what} within {timeout:g} s (the arm's worker: {real}):\n{log.read_text()[-3000:]}"
    )


def _moved_on(obs: list[dict], t: int) -> dict | None:
    """The first observation after ``t`` showing a chunk row run that had not run at ``t`` (the
    job's client numbers its chunks from 1 again after it reconnects, so "a higher seq" would not do)."""
    obs = [o for o in obs if o["kind"] == "obs"]
    before = [o for o in obs if o["t"] <= t]
    at = (before[-1]["chunk"], before[-1]["applied"]) if before else None
    return next(
        (o for o in obs if o["t"] > t and o["applied"] > 0 and (o["chunk"], o["applied"]) != at), None
    )


def _unheld_until(records: list[dict], t: int) -> int | None:
    """The last polled status after ``t`` that shows nobody holding the lease, before a new holder
    (the job's worker reconnected: a new client id, whose reset homes the arm by command) shows.
    Until then nothing may move the arm; after it, the new holder may."""
    polls = [r for r in records if r["kind"] == "status" and "holder" in r and r["t"] > t]
    free = None
    for r in polls:
        if r["holder"] == "":
            free = r["t"]
        elif free is not None:
            return free
    return None


def _travel_until_moved_on(obs: list[dict], hold: int, t_end: int) -> float:
    """How far (mm) the TCP went from where it was at a hold until the job moved it again: its next
    row ran, or a new lease was taken (the reset's home command moves the arm without a chunk)."""
    ends = [t_end, _unheld_until(obs, hold)]
    nxt = _moved_on(obs, hold)
    stop = min(t for t in [*ends, None if nxt is None else nxt["t"]] if t is not None)
    tcp = np.array([o["tcp"] for o in obs if o["kind"] == "obs" and hold <= o["t"] < stop])
    return float(np.max(np.linalg.norm(tcp - tcp[0], axis=1))) * 1e3 if len(tcp) else 0.0


def _measure(row: Row, fault: Fault, obs: list[dict], t_fault: int, t_heal: int | None, t_end: int) -> None:
    holds = measure_holds(row, obs, t_fault, t_end)
    set_travel(row, [(_travel_until_moved_on(obs, h, t_end), travel_bound_mm(obs, h)) for h in holds])
    if t_heal is not None:
        first = _moved_on(obs, t_heal)
        row.resume_ms = None if first is None else (first["t"] - t_heal) / 1e6
        if row.resume_ms is None or row.resume_ms > RESUME_BOUND_MS:
            row.problems.append(f"resume {row.resume_ms} ms (bound {RESUME_BOUND_MS:g})")
    check_hold_and_travel(row, fault)
