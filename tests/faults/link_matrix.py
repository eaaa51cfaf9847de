"""The fault matrix (issue 19, items 1 and 2): the robot PC (franka-sim, franka_node, bridge_node
with CURVE on its veth address) and a learner on two network hosts (``netlab``); while the learner
drives the arm, one fault at a time on the link between them, or a ``kill -9`` of one robot PC
process (which ``robot up`` or franka-sim's wrapper restarts), and the figures of each case.

``tests/faults/test_link_faults.py`` runs a few rows in ``make test``; ``benchmarks/fault_matrix.py``
runs them all and prints the table. Every figure is measured on the robot PC by an observer the
fault does not touch (``link_agents``), against the bridge's own monotonic stamps:

- ``hold_ms``: fault -> the bridge's deadman status (the arm told to hold);
- ``stale``: chunks the bridge dropped during the case as computed too long ago or out of order
  (``stale_obs``, ``late``, ``unknown_obs``, ``old_seq``);
- ``late``: chunks that ran although computed from an observation older than ``max_obs_age_ms``
  (plus two control periods): must be 0;
- ``travel_mm``: how far the TCP went from where it was at a hold (for a kill: at the kill) until
  the learner's next chunk ran (braking, and no drive back to an old target), the most over the
  holds of the case (not for franka-sim's own restart: the simulated arm starts again at home);
  each hold's bound grows with the speed the arm had before it (``STOP_S``);
- ``resume_ms``: heal (for a kill: the process running again) -> the first chunk computed from an
  observation taken after that runs;
- ``carried_on``: the learner went on sending after the heal without being restarted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rlinf_robot.paths import REPO_ROOT
from tests.faults.link_agents import RATE_HZ
from tests.faults.netlab import ROBOT_ADDR, Fault, NetLab
from tests.integration.robot.conftest import RobotUp, derived_config

PORT = 5555
PROXY_PORT = 5556  # the delay proxy, on the learner host's loopback
DEADMAN_MS = 100.0  # sim_robot.yaml's, as deployed
MAX_OBS_AGE_MS = 1000.0
#: Bounds every row must meet (generous for a busy 2-core machine; the figures are what they are).
HOLD_BOUND_MS = DEADMAN_MS + 400.0
TRAVEL_BOUND_MM = 15.0
#: A hold stops the arm from the speed it had, so a hold's travel bound is TRAVEL_BOUND_MM plus
#: STOP_S at the TCP's speed just before it. At the pilot's 0.08 rad/s (~45 mm/s at the TCP) that is
#: 26 mm. Under a 1-CPU cap the pilot's rows bunch (2-3 of a chunk applied within a tick), the arm
#: reached 90-160 mm/s at the hold and travelled 16-20 mm while it stopped (2026-12-06): the bound
#: scales with what the arm was doing rather than with how loaded the machine is.
STOP_S = 0.25
RESUME_BOUND_MS = 8000.0  # heal -> the arm moving again
KILL_RESUME_BOUND_MS = 60_000.0  # a killed process running again -> the arm moving again
RESTART_BOUND_S = 240.0
MOVED_RAD = 0.002  # joint 1 moved: half a row of the pilot's chunks
STALE_DROPS = ("stale_obs", "late", "unknown_obs", "old_seq")


@dataclass
class Row:
    fault: str
    hold_ms: float | None = None
    stale: int = 0
    late: int | None = 0  # None: not measured (a learner whose chunks' observations we do not see)
    travel_mm: float | None = None
    #: (travel, bound) of the hold whose travel came nearest its own bound: the one the check judges
    travel_worst: tuple[float, float] | None = None
    resume_ms: float | None = None
    carried_on: bool | None = None  # None: the fault lasted to the end of the case
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def cells(self) -> list[str]:
        def f(v, fmt="{:.0f}"):
            return "-" if v is None else fmt.format(v)

        return [
            self.fault,
            f(self.hold_ms),
            str(self.stale),
            f(self.late),
            f(self.travel_mm, "{:.1f}"),
            f(self.resume_ms),
            {True: "yes", False: "no", None: "-"}[self.carried_on],
            "met" if self.ok else "; ".join(self.problems),
        ]


HEADER = ["fault", "hold ms", "stale drops", "late runs", "travel mm", "resume ms", "carried on", "bounds"]


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r.cells()) + " |" for r in rows]
    return "\n".join(lines)


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written
            pass
    return out


class LinkStack:
    """The robot PC up in ``lab.robot`` with CURVE keys for ``pilot`` and ``observer``."""

    def __init__(self, lab: NetLab, tmp: Path, camera: bool = False):
        """``camera``: with ``camera_node`` (5 Hz), for a learner whose env waits for fresh images
        (the hybrid job); the pilot rows run without it, so their link carries no images."""
        self.lab, self.tmp, self.camera = lab, Path(tmp), camera
        self.endpoint = f"tcp://{ROBOT_ADDR}:{PORT}"
        self.keys = self.tmp / "keys"
        self.up: RobotUp | None = None
        self.pids: dict[str, int] = {}
        self.proxy: subprocess.Popen | None = None

    def __enter__(self) -> LinkStack:
        authorized = self.tmp / "authorized"
        authorized.mkdir(parents=True, exist_ok=True)
        for name in ("robot", "pilot", "observer", "job"):
            subprocess.run(
                [sys.executable, "-m", "rlinf_robot.cli", "keys", "generate", str(self.keys), "--name", name],
                check=True,
                capture_output=True,
                cwd=REPO_ROOT,
            )
            if name != "robot":
                shutil.copy(self.keys / f"{name}.key", authorized / f"{name}.key")
        bridge = {
            "endpoint": self.endpoint,
            "deadman_ms": DEADMAN_MS,
            "max_obs_age_ms": MAX_OBS_AGE_MS,
            "curve_secret_file": str(self.keys / "robot.key_secret"),
            "curve_authorized_dir": str(authorized),
        }
        keep = {"franka_sim", "franka_node", "bridge_node"} | ({"camera_node"} if self.camera else set())
        edits = {"bridge_node": bridge, "camera_node": {"rate_hz": 5.0}}
        config = derived_config(self.tmp, "robot_pc.yaml", keep, edits)
        self.up = RobotUp(
            "--sim",
            "--config",
            str(config),
            "--ready-timeout",
            "600",
            prefix=self.lab.exec_prefix(self.lab.robot),
        )
        try:
            self.pids = self.up.ready(660)
            self.delay_control = self.tmp / "delay.json"
            self.delay_control.write_text("{}")
            argv = [*self.lab.exec_prefix(self.lab.learner), sys.executable, "-m", "tests.faults.delay_proxy"]
            argv += ["--listen", f"127.0.0.1:{PROXY_PORT}", "--target", f"{ROBOT_ADDR}:{PORT}"]
            self.proxy = subprocess.Popen([*argv, "--control", str(self.delay_control)], cwd=REPO_ROOT)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.proxy is not None:
            self.proxy.terminate()
            self.proxy.wait(10)
        if self.up is not None:
            self.up.stop(timeout_s=60)

    def _set_delay(self, fault: Fault | None) -> None:
        raw = {} if fault is None else {"delay_ms": fault.size, "jitter_ms": fault.jitter}
        tmp = self.delay_control.with_suffix(".tmp")
        tmp.write_text(json.dumps(raw))
        tmp.replace(self.delay_control)  # the proxy never reads half a file

    def agent(self, role: str, out: Path, seconds: float, endpoint: str | None = None) -> subprocess.Popen:
        ns = self.lab.learner if role == "pilot" else self.lab.robot
        argv = [*self.lab.exec_prefix(ns), sys.executable, "-m", "tests.faults.link_agents", role]
        argv += [
            "--endpoint",
            endpoint or self.endpoint,
            "--keys",
            str(self.keys),
            "--out",
            str(out),
            "--seconds",
            str(seconds),
        ]
        return subprocess.Popen(
            argv, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=open(out.with_suffix(".err"), "w")
        )  # noqa: SIM115

    # ------------------------------------------------------------------ one case
    def run(self, fault: Fault, tag: str, settle_s: float = 1.5, after_s: float = 10.0) -> Row:
        """Drive the arm, put ``fault`` on the link (heal it unless it lasts forever) or kill the
        process it names (and wait for its restart), and measure."""
        pilot_log, obs_log = self.tmp / f"{tag}-pilot.jsonl", self.tmp / f"{tag}-observer.jsonl"
        held = 6.0 if fault.seconds is None else fault.seconds
        if fault.kind == "kill":
            held, after_s = RESTART_BOUND_S, max(after_s, KILL_RESUME_BOUND_MS / 1e3)
        total = 90.0 + settle_s + held + after_s
        via = f"tcp://127.0.0.1:{PROXY_PORT}" if fault.kind == "delay" else None  # through the proxy
        agents = [self.agent("observer", obs_log, total), self.agent("pilot", pilot_log, total, via)]
        try:
            moving = lambda: _moving(_lines(obs_log), _lines(pilot_log))  # noqa: E731
            self._await(moving, 90.0, "the pilot moving the arm", agents)
            time.sleep(settle_s)
            t_fault = time.monotonic_ns()
            t_heal = None
            if fault.kind == "kill":
                t_heal = self._kill(fault.target)
            else:
                self._set_delay(fault) if fault.kind == "delay" else self.lab.apply(fault)
                time.sleep(held)
                if fault.seconds is not None:
                    t_heal = time.monotonic_ns()
                    self._set_delay(None)
                    self.lab.heal()
            if t_heal is not None:
                resumed = lambda: _resumed(_lines(obs_log), _lines(pilot_log), t_heal)  # noqa: E731
                self._await(resumed, after_s, None, agents)
            time.sleep(0.5)
        finally:
            t_end = time.monotonic_ns()
            self._set_delay(None)
            self.lab.heal()
            for a in agents:
                a.terminate()
            for a in agents:
                try:
                    a.wait(10)
                except subprocess.TimeoutExpired:
                    a.kill()
        return measure(fault, _lines(obs_log), _lines(pilot_log), t_fault, t_heal, t_end)

    def _kill(self, target: str) -> int:
        """``kill -9`` the running ``target`` and wait until it runs again; returns that time."""
        assert self.up is not None  # entered
        start = len(self.up.lines)
        if target == "franka_sim":  # the server itself (the arm); its wrapper restarts it
            ready = [re.search(r"franka-sim ready \(pid (\d+)", line) for line in self.up.lines]
            pid = int([m for m in ready if m][-1].group(1))
            back = r"franka-sim ready \(pid \d+, restarted\)"
        else:
            pid = self.pids[target]
            back = rf"robot up: {target} running again \(pid (\d+)\)"
        os.kill(pid, signal.SIGKILL)
        m = self.up.wait_for(back, RESTART_BOUND_S, start)
        if target != "franka_sim":
            self.pids[target] = int(m.group(1))
        return time.monotonic_ns()

    def _await(self, cond, timeout: float, what: str | None, agents) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return True
            for a in agents:
                if a.poll() is not None:
                    err = Path(a.args[a.args.index("--out") + 1]).with_suffix(".err").read_text()[-3000:]
                    role = a.args[a.args.index("tests.faults.link_agents") + 1]
                    raise RuntimeError(f"the {role} exited with {a.returncode}:\n{err}")
            time.sleep(0.1)
        if what is not None:
            pilot = [_lines(Path(a.args[a.args.index("--out") + 1])) for a in agents if "pilot" in a.args]
            said = Counter(r.get("code") or r.get("error") for r in sum(pilot, []) if r["kind"] != "sent")
            raise RuntimeError(
                f"no {what} within {timeout:g} s (the pilot's refusals and link errors: {dict(said)}):\n"
                + (self.up.tail() if self.up else "")
            )
        return False


def _moving(obs: list[dict], sent: list[dict]) -> bool:
    chunks = {s["seq"] for s in sent if s["kind"] == "sent"}
    return len(chunks) >= 10 and any(
        o["kind"] == "obs" and o["chunk"] in chunks and o["applied"] > 0 for o in obs
    )


def _first_runs(obs: list[dict]) -> dict[int, dict]:
    """chunk seq -> the first observation showing it had run a row."""
    first: dict[int, dict] = {}
    for o in obs:
        if o["kind"] == "obs" and o["applied"] > 0 and o["chunk"] not in first:
            first[o["chunk"]] = o
    return first


def _resumed(obs: list[dict], sent: list[dict], t_heal: int) -> dict | None:
    """The first observation after ``t_heal`` showing the arm moving again under a chunk computed
    after it: the chunk ran, and joint 1 left where it was at ``t_heal`` (rows the bridge sent
    while franka_node had not yet noticed a dead arm would count as run, but move nothing)."""
    fresh = {s["seq"] for s in sent if s["kind"] == "sent" and s["obs_stamp"] >= t_heal}
    after = [o for o in obs if o["kind"] == "obs" and o["t"] >= t_heal]
    if not after:
        return None
    q0 = after[0]["q0"]
    return next(
        (o for o in after if o["chunk"] in fresh and o["applied"] > 0 and abs(o["q0"] - q0) > MOVED_RAD), None
    )


def _travel(obs: list[dict], hold: int, t_end: int) -> float:
    """How far (mm) the TCP went from where it was at a hold until the next chunk ran."""
    obs = [o for o in obs if o["kind"] == "obs"]
    at_hold = [o["chunk"] for o in obs if o["t"] <= hold]
    last = at_hold[-1] if at_hold else -1
    window = []
    for o in obs:
        if o["t"] < hold or o["t"] > t_end:
            continue
        if o["chunk"] > last and o["applied"] > 0:
            break
        window.append(o["tcp"])
    if not window:
        return 0.0
    tcp = np.array(window)
    return float(np.max(np.linalg.norm(tcp - tcp[0], axis=1))) * 1e3


def speed_before(obs: list[dict], t: int, window_ns: float = 150e6) -> float:
    """The TCP's speed (mm/s) over the observations in the ``window_ns`` before ``t``."""
    pts = [o for o in obs if o["kind"] == "obs" and t - window_ns <= o["t"] <= t]
    if len(pts) < 2 or pts[-1]["t"] <= pts[0]["t"]:
        return 0.0
    dist = float(np.linalg.norm(np.subtract(pts[-1]["tcp"], pts[0]["tcp"]))) * 1e3
    return dist / ((pts[-1]["t"] - pts[0]["t"]) / 1e9)


def travel_bound_mm(obs: list[dict], hold: int) -> float:
    """TRAVEL_BOUND_MM plus STOP_S at the TCP's speed before ``hold``."""
    return TRAVEL_BOUND_MM + STOP_S * speed_before(obs, hold)


def set_travel(row: Row, travels: list[tuple[float, float]]) -> None:
    """``row.travel_mm`` (the largest, for the table) and ``row.travel_worst`` (the hold nearest its
    own bound) from each hold's (travel, bound)."""
    if travels:
        row.travel_mm = max(t for t, _ in travels)
        row.travel_worst = min(travels, key=lambda tb: tb[1] - tb[0])


def _drops(status: dict) -> int:
    return sum(status["counters"].get(f"chunks_dropped_{r}", 0) for r in STALE_DROPS)


def _drops_since(statuses: list[dict], t: int) -> int:
    """Stale drops counted from the last status before ``t`` on (a restarted bridge counts from 0)."""
    before = [s for s in statuses if s["t"] < t]
    if not before:
        return 0
    total, last = 0, _drops(before[-1])
    for s in statuses[len(before) :]:
        now = _drops(s)
        total += now - last if now >= last else now
        last = now
    return total


def holds_the_arm(fault: Fault) -> bool:
    """Whether ``fault`` must trip the deadman: a partition longer than two deadman periods."""
    return fault.kind == "partition" and (fault.seconds is None or fault.seconds * 1e3 > 2 * DEADMAN_MS)


def measure_holds(row: Row, obs: list[dict], t_fault: int, t_end: int) -> list[int]:
    """``row.hold_ms`` (fault -> the first deadman status) and ``row.stale`` from the observer's
    records; returns the times of the deadman statuses between ``t_fault`` and ``t_end``."""
    statuses = [s for s in obs if s["kind"] == "status"]
    deadman = [s["t"] for s in statuses if s["message"].startswith("deadman")]
    hold = next((t for t in deadman if t >= t_fault), None)
    row.hold_ms = None if hold is None else (hold - t_fault) / 1e6
    row.stale = _drops_since(statuses, t_fault)
    return [h for h in deadman if t_fault <= h <= t_end]


def check_hold_and_travel(row: Row, fault: Fault) -> None:
    """The hold and travel bounds every row must meet."""
    if holds_the_arm(fault) and (row.hold_ms is None or row.hold_ms > HOLD_BOUND_MS):
        row.problems.append(f"hold {row.hold_ms} ms (bound {HOLD_BOUND_MS:g})")
    if row.travel_worst is not None and row.travel_worst[0] > row.travel_worst[1]:
        travel, bound = row.travel_worst
        row.problems.append(
            f"travel {travel:.1f} mm (bound {bound:.1f}: {TRAVEL_BOUND_MM:g} mm + "
            f"{STOP_S:g} s at the speed before the hold)"
        )


def measure(
    fault: Fault, obs: list[dict], pilot: list[dict], t_fault: int, t_heal: int | None, t_end: int
) -> Row:
    row = Row(fault.name)
    sent = {s["seq"]: s for s in pilot if s["kind"] == "sent"}
    stops = measure_holds(row, obs, t_fault, t_end)
    limit_ns = (MAX_OBS_AGE_MS + 2 * 1e3 / RATE_HZ) * 1e6
    runs = _first_runs(obs)
    row.late = sum(
        1 for seq, o in runs.items() if seq in sent and o["stamp"] - sent[seq]["obs_stamp"] > limit_ns
    )
    resumed = _resumed(obs, pilot, t_heal) if t_heal is not None else None
    if resumed is not None:
        row.resume_ms = (resumed["t"] - t_heal) / 1e6
    row.carried_on = None if t_heal is None else any(s["t"] > t_heal for s in sent.values())
    if fault.kind == "kill" and fault.target != "franka_sim":  # a restarted franka-sim starts at home
        stops.append(t_fault)
    set_travel(row, [(_travel(obs, h, t_end), travel_bound_mm(obs, h)) for h in stops])
    check_hold_and_travel(row, fault)
    if row.late:
        row.problems.append(f"{row.late} late runs")
    if t_heal is not None:
        bound = RESUME_BOUND_MS if fault.kind != "kill" else KILL_RESUME_BOUND_MS
        if row.resume_ms is None or row.resume_ms > bound:
            row.problems.append(f"resume {row.resume_ms} ms (bound {bound:g})")
        if not row.carried_on:
            row.problems.append("the learner did not carry on")
    return row
