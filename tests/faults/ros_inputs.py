"""Bad input on the ROS command topics (issue 19, item 3): seeded ``JointState`` messages on
``/franka/joint_command`` and ``PoseStamped`` on ``/franka/ee_command``, published through Fast DDS
to a real ``franka_node`` that drives franka-sim through franky.

A case is a well-formed command near the home pose with zero or more *defects* drawn on top: wrong
or duplicate or unknown joint names, lengths that disagree, NaN / inf / huge values, targets past a
joint limit or outside the workspace box, a quaternion that is not one, a foreign frame, a stamp
that is stale, in the future or unset. Each defect names the refusals it may cause; a case with
none must be taken. Cases go one at a time: publish, then wait for ``franka_node``'s diagnostics to
count it (``commands`` + 1), and read which ``rejected_<reason>`` counter moved:

- a defective case is refused with one of its defects' reasons, and the arm's goal is cleared
  (the arm brakes and holds: it never chases a refused command);
- a clean case is taken (or, on a machine so busy that DDS delivered it after the 200 ms deadman,
  refused as ``stale``: counted separately, and most clean cases must be taken);
- the arm stays ACTIVE with no reflex (franka-sim enforces the FR3's motion limits: an unsafe
  motion reaching franky would raise one), and every joint state it streams is inside the joint
  limits with the TCP in the workspace box.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from rlinf_robot.robot.franka.model import FINGER_JOINT_NAME, HOME_Q, JOINT_NAMES, tcp_pose, tcp_position
from rlinf_robot.rotations import quat_from_rotvec, quat_multiply
from rlinf_robot.safety import SafetyLimits
from tests.faults.inputs import SEED, Tally, run_cases

LIMITS = SafetyLimits.from_yaml()
BASE_FRAME = "fr3_link0"
#: Clean joint targets stay this close to home (rad), clean TCP targets this close to home's TCP (m):
#: well inside the joint limits and the workspace box (checked in ``clean_targets_are_inside``).
JOINT_REACH, EE_REACH = 0.1, 0.03
HOME_POSE = tcp_pose(HOME_Q)
#: Refusals a stale stamp may get: older than the deadman, or older than the last stop / hold.
STALE = frozenset({"stale", "before_stop", "before_hold"})
DIAG_TIMEOUT_S = 10.0  # a case not counted by then is lost: a failure, reported with the diagnostics


@dataclass(frozen=True)
class RosCase:
    topic: str  # "joint" | "ee"
    names: tuple[str, ...] = ()
    values: tuple[float, ...] = ()
    velocity: tuple[float, ...] = ()  # ignored by the node: garbage here must change nothing
    frame: str = BASE_FRAME
    stamp: tuple[str, float | tuple[int, int]] = (
        "offset",
        0.0,
    )  # ("offset", s from now) | ("raw", (sec, ns))
    defects: tuple[str, ...] = ()
    refusals: frozenset[str] = field(default_factory=frozenset)  # empty: must be taken


# ====================================================================== cases
_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)
_KNOWN = {*JOINT_NAMES, FINGER_JOINT_NAME}
_unknown_name = st.one_of(
    _text,
    st.sampled_from(["fr3_joint8", "panda_joint1", "FR3_JOINT1", "fr3_joint1 ", "", "fr3_finger_joint2"]),
).filter(lambda s: s not in _KNOWN)
_non_finite = st.sampled_from([math.nan, math.inf, -math.inf])
_huge = st.floats(1e3, 1e308).flatmap(lambda v: st.sampled_from([v, -v]))


def _stamp_defect(draw) -> tuple[tuple, str, frozenset[str]]:
    kind = draw(st.sampled_from(["stale", "ancient", "future", "far_future", "unset", "bad_nanosec"]))
    if kind == "stale":
        return ("offset", -draw(st.floats(0.5, 3600.0))), kind, STALE
    if kind == "ancient":  # before the epoch, or decades ago
        return ("raw", (draw(st.integers(-(2**31), 10**9)), draw(st.integers(1, 999_999_999)))), kind, STALE
    if kind == "future":
        return ("offset", draw(st.floats(0.7, 3600.0))), kind, frozenset({"bad_stamp"})
    if kind == "far_future":  # 2038 and the end of int32
        return ("raw", (draw(st.integers(2_100_000_000, 2**31 - 1)), 0)), kind, frozenset({"bad_stamp"})
    if kind == "bad_nanosec":  # nanosec past a second: read as now + up to 4.3 s, so in the future
        return ("now_ns", draw(st.integers(1_600_000_000, 2**32 - 1))), kind, frozenset({"bad_stamp"})
    return ("raw", (0, 0)), kind, frozenset({"bad_stamp"})  # unset: its age cannot be known


@st.composite
def joint_cases(draw) -> RosCase:
    named = draw(st.lists(st.sampled_from(JOINT_NAMES), min_size=1, max_size=7, unique=True))
    names = list(named)
    values = [float(HOME_Q[JOINT_NAMES.index(n)] + draw(st.floats(-JOINT_REACH, JOINT_REACH))) for n in names]
    if draw(st.booleans()):  # the gripper too, maybe past its range (clamped: still taken)
        names.append(FINGER_JOINT_NAME)
        values.append(draw(st.floats(-0.5, 0.5)))
    order = draw(st.permutations(range(len(names))))
    names, values = [names[i] for i in order], [values[i] for i in order]
    defects: list[str] = []
    refusals: set[str] = set()
    stamp = ("offset", 0.0)
    pool = ["length", "duplicate", "unknown", "empty", "non_finite", "huge", "past_limit", "stamp"]
    for defect in draw(st.lists(st.sampled_from(pool), max_size=3, unique=True)):
        arm = [i for i, n in enumerate(names) if n in JOINT_NAMES]
        if defect == "length" and names:
            if draw(st.booleans()):
                values.extend(draw(st.lists(st.floats(-1, 1), min_size=1, max_size=30)))
            else:
                values = values[: draw(st.integers(0, len(values) - 1))]
            refusals.add("shape")
        elif defect == "duplicate" and names:
            i = draw(st.integers(0, len(names) - 1))
            names.append(names[i])
            values.append(values[i] if i < len(values) else 0.0)
            refusals.add("shape")
        elif defect == "unknown":
            i = draw(st.integers(0, len(names)))
            names.insert(i, draw(_unknown_name))
            values.insert(min(i, len(values)), draw(st.floats(-1, 1)))
            refusals.add("unknown_joint")
        elif defect == "empty" and not defects:
            names, values = [], []
            refusals.add("shape")
        elif defect == "non_finite" and values:
            values[draw(st.integers(0, len(values) - 1))] = draw(_non_finite)
            refusals.add("non_finite")
        elif defect in ("huge", "past_limit") and (arm := [i for i in arm if i < len(values)]):
            i = draw(st.sampled_from(arm))
            j = JOINT_NAMES.index(names[i])
            if defect == "huge":
                values[i] = draw(_huge)
            else:
                past = draw(st.floats(0.005, 1.0))
                values[i] = float(LIMITS.q_hi[j] + past if draw(st.booleans()) else LIMITS.q_lo[j] - past)
            refusals.add("joint_limit")
        elif defect == "stamp":
            stamp, kind, why = _stamp_defect(draw)
            defect = f"stamp:{kind}"
            refusals |= why
        else:
            continue
        defects.append(defect)
    velocity = draw(st.lists(st.one_of(st.floats(allow_nan=True), _non_finite), max_size=10))
    return RosCase(
        "joint",
        tuple(names),
        tuple(values),
        tuple(velocity),
        stamp=stamp,
        defects=tuple(defects),
        refusals=frozenset(refusals),
    )


def _near_home_quaternion(draw) -> np.ndarray:
    rotvec = np.array(draw(st.lists(st.floats(-0.1, 0.1), min_size=3, max_size=3)))
    return quat_multiply(quat_from_rotvec(rotvec), HOME_POSE[3:])


@st.composite
def ee_cases(draw) -> RosCase:
    pos = HOME_POSE[:3] + np.array(draw(st.lists(st.floats(-EE_REACH, EE_REACH), min_size=3, max_size=3)))
    values = [*pos.tolist(), *_near_home_quaternion(draw).tolist()]
    frame = draw(st.sampled_from([BASE_FRAME, ""]))
    defects: list[str] = []
    refusals: set[str] = set()
    stamp = ("offset", 0.0)
    pool = ["frame", "non_finite", "outside", "huge", "quaternion", "stamp"]
    for defect in draw(st.lists(st.sampled_from(pool), max_size=3, unique=True)):
        if defect == "frame":
            frame = draw(st.one_of(_text, st.sampled_from(["world", "fr3_link8", "/fr3_link0", "FR3_LINK0"])))
            if frame in (BASE_FRAME, ""):
                continue
            refusals.add("frame")
        elif defect == "non_finite":
            values[draw(st.integers(0, 6))] = draw(_non_finite)
            refusals.add("non_finite")
        elif defect in ("outside", "huge"):
            axis = draw(st.integers(0, 2))
            if defect == "huge":
                values[axis] = draw(_huge)
            else:
                past = draw(st.floats(0.01, 1.0))
                hi = draw(st.booleans())
                values[axis] = float(
                    LIMITS.workspace_max[axis] + past if hi else LIMITS.workspace_min[axis] - past
                )
            refusals.add("workspace")
        elif defect == "quaternion":
            q = np.array(values[3:])
            scale = draw(st.one_of(st.just(0.0), st.floats(1.02, 1e6), st.floats(1e-6, 0.98)))
            with np.errstate(invalid="ignore"):  # a quaternion already holding inf times 0
                values[3:] = (q * scale).tolist()
            refusals.add("bad_quaternion")
        elif defect == "stamp":
            stamp, kind, why = _stamp_defect(draw)
            defect = f"stamp:{kind}"
            refusals |= why
        defects.append(defect)
    return RosCase(
        "ee",
        values=tuple(values),
        frame=frame,
        stamp=stamp,
        defects=tuple(defects),
        refusals=frozenset(refusals),
    )


def ros_cases() -> st.SearchStrategy:
    return st.one_of(joint_cases(), ee_cases())


def clean_targets_are_inside() -> None:
    """The clean cases' premise: every target within the reaches above is safe to take."""
    rng = np.random.default_rng(0)
    q = HOME_Q + rng.uniform(-JOINT_REACH, JOINT_REACH, (2000, 7))
    assert np.all(q > LIMITS.q_lo) and np.all(q < LIMITS.q_hi)
    tcp = np.array([tcp_position(x) for x in q])
    assert np.all(tcp > LIMITS.workspace_min) and np.all(tcp < LIMITS.workspace_max)
    corners = HOME_POSE[:3] + EE_REACH * np.array(
        [[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    )
    assert np.all(corners > LIMITS.workspace_min) and np.all(corners < LIMITS.workspace_max)


# ====================================================================== the harness
class RosHarness:
    """Publishes cases through a ``RosProbe`` and reads each verdict off ``franka_node``'s diagnostics
    (the probe's ``diag``: run the node with a fast ``diagnostics_rate_hz``)."""

    def __init__(self, probe):
        from builtin_interfaces.msg import Time
        from geometry_msgs.msg import PoseStamped
        from sensor_msgs.msg import JointState

        self.probe, self._Time, self._JointState, self._PoseStamped = probe, Time, JointState, PoseStamped
        self.late_clean = 0  # clean cases refused as stale (delivered after the deadman)
        self.problems: list[str] = []
        self._checked_until = 0.0  # receive time of the last joint state checked
        self._start: np.ndarray | None = None
        self.travel = 0.0  # the largest joint excursion from where the run started (rad)
        self._reflexes0 = probe.count("reflexes")

    def _stamp(self, case: RosCase):
        kind, value = case.stamp
        if kind == "raw":
            return self._Time(sec=value[0], nanosec=value[1])
        if kind == "now_ns":
            return self._Time(sec=int(time.time()), nanosec=value)
        t = time.time() + value
        return self._Time(sec=int(math.floor(t)), nanosec=int((t - math.floor(t)) * 1e9))

    def publish(self, case: RosCase) -> None:
        if case.topic == "joint":
            msg = self._JointState()
            msg.name, msg.position, msg.velocity = list(case.names), list(case.values), list(case.velocity)
            msg.header.stamp = self._stamp(case)
            self.probe.joint_pub.publish(msg)
        else:
            msg = self._PoseStamped()
            msg.header.frame_id = case.frame
            p, o = msg.pose.position, msg.pose.orientation
            p.x, p.y, p.z, o.w, o.x, o.y, o.z = case.values
            msg.header.stamp = self._stamp(case)
            self.probe.ee_pub.publish(msg)

    def _counted(self, before: int) -> dict[str, str]:
        deadline = time.monotonic() + DIAG_TIMEOUT_S
        while time.monotonic() < deadline:
            diag = self.probe.diag
            if int(float(diag.get("commands", "0"))) > before:
                return diag
            time.sleep(0.002)
        raise AssertionError(f"not counted within {DIAG_TIMEOUT_S:g} s (diagnostics: {self.probe.diag})")

    def check(self, case: RosCase) -> str:
        p = self.probe
        before = dict(p.diag)
        n = int(float(before.get("commands", "0")))
        self.publish(case)
        after = self._counted(n)
        assert int(float(after["commands"])) == n + 1, (
            f"one case counted {int(float(after['commands'])) - n} times"
        )
        moved = {
            k[len("rejected_") :]
            for k, v in after.items()
            if k.startswith("rejected_") and int(float(v)) > int(float(before.get(k, "0")))
        }
        assert after.get("state") == "ACTIVE", (
            f"arm left ACTIVE: {after.get('state')} ({after.get('last_cause')})"
        )
        if not case.refusals:
            if moved == {"stale"}:
                self.late_clean += 1
                return "clean:late"
            assert not moved, f"a clean command was refused: {sorted(moved)}"
            return "taken"
        assert len(moved) == 1, (
            f"expected one refusal of {sorted(case.refusals)}, counters moved: {sorted(moved)}"
        )
        reason = moved.pop()
        assert reason in case.refusals, f"refused as {reason!r}, expected one of {sorted(case.refusals)}"
        assert after.get("goal") == "none", f"refused but the arm still has a goal: {after.get('goal')}"
        self._check_states()
        return f"refused:{reason}"

    def _check_states(self) -> None:
        """Every joint state streamed since the last check: inside the joint limits, TCP in the box."""
        with self.probe.lock:
            fresh = [m for t, m in self.probe.joint_states if t > self._checked_until]
            if fresh:
                self._checked_until = self.probe.joint_states[-1][0]
        if not fresh:
            return
        q = np.array([m.position[:7] for m in fresh])
        if self._start is None:
            self._start = q[0]
        self.travel = max(self.travel, float(np.max(np.abs(q - self._start))))
        assert np.all(q >= LIMITS.joint_position_min) and np.all(q <= LIMITS.joint_position_max), (
            "a joint left its limits"
        )
        tcp = np.array([tcp_position(x) for x in q])
        assert np.all(tcp >= LIMITS.workspace_min - 1e-3) and np.all(tcp <= LIMITS.workspace_max + 1e-3), (
            "the TCP left the box"
        )

    def verify(self, taken: int) -> list[str]:
        time.sleep(0.3)  # the last case's motion streams in
        self._check_states()
        problems = []
        reflexes = self.probe.count("reflexes") - self._reflexes0
        if reflexes:
            problems.append(f"{reflexes} reflex(es) during the run: an unsafe motion reached the arm")
        if taken and self.travel < 0.005:  # the commands taken were executed, not only counted
            problems.append(f"{taken} commands taken but the arm moved {self.travel:.4f} rad at most")
        return problems


def run_ros(n: int, seed: int = SEED, probe=None) -> Tally:
    """``n`` cases against ``probe``'s stack, or against a ``robot up --sim`` of franka-sim and
    ``franka_node`` started (and stopped) here."""
    clean_targets_are_inside()
    if probe is not None:
        return _run(probe, n, seed)
    import tempfile
    from pathlib import Path

    from tests.integration.robot.conftest import RobotUp, derived_config
    from tests.integration.robot.probe import RosProbe, wait_until

    config = derived_config(
        Path(tempfile.mkdtemp(prefix="rlinf-ros-fuzz-")),
        "fuzz.yaml",
        {"franka_sim", "franka_node"},
        FAST_DIAG,
    )
    up = RobotUp("--sim", "--config", str(config))
    probe = RosProbe()
    try:
        up.ready()
        assert wait_until(lambda: probe.q() is not None and probe.state() == "ACTIVE", 60), up.text()[-3000:]
        return _run(probe, n, seed)
    finally:
        probe.close()
        up.stop()


#: franka_node's diagnostics carry the counters each case is read from: fast, so a case takes ~1/50 s.
FAST_DIAG = {"franka_node": {"diagnostics_rate_hz": 50.0}}


def _run(probe, n: int, seed: int) -> Tally:
    harness = RosHarness(probe)
    t = run_cases("ros", ros_cases(), harness.check, n, seed)
    problems = harness.verify(t.outcomes["taken"])
    print(f"ros: the arm moved up to {harness.travel:.3f} rad on the commands taken", flush=True)
    clean = t.outcomes["taken"] + t.outcomes["clean:late"]
    if clean and t.outcomes["taken"] < 0.5 * clean:
        problems.append(
            f"only {t.outcomes['taken']} of {clean} clean commands were taken (the rest arrived stale)"
        )
    if problems:
        t.failures += problems
        t.outcomes["FAILED"] += t.clean
        t.clean = 0
    return t
