"""The teleop path without an arm: the env's ``TeleopLink`` and real operators over ZeroMQ on loopback.

The arm-side test (a scripted operator intervening in a hybrid run on franka-sim) is in
tests/integration/test_hybrid.py.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rlinf_robot.envs.real import RealEnvConfig, RealRobotEnv
from rlinf_robot.teleop.link import TeleopLink
from rlinf_robot.teleop.messages import TeleopCommand, TeleopState, check_command, decode, encode
from rlinf_robot.teleop.operator import Operator, Schedule, ScriptedOperator

ANY = "tcp://127.0.0.1:*"


def _specs(task="fr3-reach"):
    return RealRobotEnv.specs(RealEnvConfig.from_dict({"task": task}))


def _state(obs_spec, rng):
    """A state vector of the reach task's layout with a TCP and a goal somewhere in the workspace."""
    s = np.zeros(obs_spec.state_shape, np.float32)
    f = obs_spec.state_slices()
    s[f["tcp_pos"]] = rng.uniform([0.35, -0.2, 0.15], [0.6, 0.2, 0.4])
    s[f["tcp_quat"]] = [0.0, 1.0, 0.0, 0.0]
    s[f["goal_pos"]] = rng.uniform([0.35, -0.2, 0.15], [0.6, 0.2, 0.4])
    return s


class _Serving:
    """An operator serving in a thread for the duration of a ``with`` block (bounded)."""

    def __init__(self, op: Operator):
        self.op, self.stop = op, threading.Event()
        self.thread = threading.Thread(target=op.serve, args=(120.0, self.stop), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self.op

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        self.op.close()


def _link(op: Operator, action_spec, **kw) -> TeleopLink:
    return TeleopLink(op.states, op.commands, "real:arm0", action_spec.low, action_spec.high, **kw)


def _decide(link, obs_spec, episode, step, state):
    return link.decide(episode, step, state, obs_spec.state_slices(), "fr3-reach", "ee_delta", "reach")


def _wait_attached(link, obs_spec, state, timeout_s=30.0):
    """Publish states until the operator's answers arrive (PUB/SUB connect asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while not link._attached():
        assert time.monotonic() < deadline, f"the operator never answered: {link.counts}"
        _decide(link, obs_spec, 10_000, 0, state)
        time.sleep(0.05)


def test_messages_round_trip_and_bad_bytes_are_named():
    cmd = TeleopCommand(engaged=True, action=[0.01, 0, 0, 0, 0, 0], operator="x", episode=3, step=4)
    assert decode(encode(cmd)) == cmd
    state = TeleopState("real:arm0", 1, 2, "fr3-reach", "ee_delta", 6, [0.0] * 3, {"tcp_pos": [0, 3]})
    assert decode(encode(state)) == state
    for bad, why in [
        (b"\x00\x01garbage", "not msgpack|not a teleop message"),
        (encode(TeleopCommand(engaged=True))[:-3], "not msgpack|not a teleop message"),
        (b"\x81\xa4type\xa3foo", "not a teleop message"),
    ]:
        with pytest.raises(ValueError, match=why):
            decode(bad)


def test_check_command_refuses_wrong_width_nan_and_out_of_range():
    action_spec, _ = _specs()
    low, high = action_spec.low.tolist(), action_spec.high.tolist()
    ok = [0.0] * len(low)
    assert check_command(TeleopCommand(engaged=True, action=ok), low, high) == ""
    assert "5 values" in check_command(TeleopCommand(engaged=True, action=ok[:5]), low, high)
    assert "nan" in check_command(TeleopCommand(engaged=True, action=[float("nan")] + ok[1:]), low, high)
    big = [high[0] * 2] + ok[1:]
    assert "outside" in check_command(TeleopCommand(engaged=True, action=big), low, high)


def test_a_scripted_operator_takes_over_exactly_on_its_schedule_with_the_experts_action():
    from sim.mujoco.experts import reach

    action_spec, obs_spec = _specs()
    rng = np.random.default_rng(0)
    schedule = Schedule(every=2, offset=1, start=3, stop=6)
    with _Serving(ScriptedOperator(ANY, ANY, schedule)) as op:
        link = _link(op, action_spec, max_age_s=5.0, reply_wait_s=10.0)
        try:
            _wait_attached(link, obs_spec, _state(obs_spec, rng))
            taken = []
            for episode in range(4):
                for step in range(8):
                    state = _state(obs_spec, rng)
                    row = _decide(link, obs_spec, episode, step, state)
                    if row is not None:
                        taken.append((episode, step))

                        class _Env:
                            pass

                        _Env.obs_spec = obs_spec
                        want = reach(_Env, {"state": state[None].astype(np.float64)})[0]
                        np.testing.assert_allclose(row, want, atol=1e-6)
            assert taken == [(e, s) for e in (1, 3) for s in (3, 4, 5)], (taken, link.counts)
            assert link.counts["late_replies"] == 0 and link.counts["rejected"] == 0, link.counts
        finally:
            link.close()


def test_without_an_operator_the_policy_acts():
    action_spec, obs_spec = _specs()
    link = TeleopLink(
        "tcp://127.0.0.1:5999", "tcp://127.0.0.1:5998", "real:arm0", action_spec.low, action_spec.high
    )
    try:
        state = _state(obs_spec, np.random.default_rng(1))
        assert all(_decide(link, obs_spec, 0, s, state) is None for s in range(20))
        assert link.counts["commands"] == 0
    finally:
        link.close()


class _Constant(Operator):
    """Answers every state with the same command (engaged)."""

    def __init__(self, action):
        super().__init__(ANY, ANY)
        self.action = action

    def answer(self, state):
        return TeleopCommand(
            engaged=True, action=self.action, operator="constant", episode=state.episode, step=state.step
        )


def test_a_bad_command_is_refused_named_to_the_operator_and_the_policy_acts():
    action_spec, obs_spec = _specs()
    state = _state(obs_spec, np.random.default_rng(2))
    bad = [float("nan")] + [0.0] * (action_spec.shape[0] - 1)
    with _Serving(_Constant(bad)) as op:
        link = _link(op, action_spec, max_age_s=5.0, reply_wait_s=10.0)
        try:
            _wait_attached(link, obs_spec, state)
            assert all(_decide(link, obs_spec, 0, s, state) is None for s in range(5))
            assert link.counts["rejected"] >= 5 and link.counts["intervened"] == 0, link.counts
            deadline = time.monotonic() + 30
            while not op.refusals and time.monotonic() < deadline:
                _decide(link, obs_spec, 0, 99, state)
                time.sleep(0.05)
            assert op.refusals and "action[0] is nan" in op.refusals[-1], op.refusals
        finally:
            link.close()


def test_an_operator_that_goes_silent_hands_the_arm_back():
    action_spec, obs_spec = _specs()
    state = _state(obs_spec, np.random.default_rng(3))
    serving = _Serving(_Constant([0.0] * action_spec.shape[0]))
    with serving as op:
        link = _link(op, action_spec, max_age_s=0.3, reply_wait_s=1.0)
        _wait_attached(link, obs_spec, state)
        assert _decide(link, obs_spec, 0, 0, state) is not None
    try:  # the operator is gone: its last command ages out instead of steering on
        time.sleep(0.6)
        t0 = time.monotonic()
        assert _decide(link, obs_spec, 0, 1, state) is None  # still attached: its answer waited for
        assert time.monotonic() - t0 < 5.0 and link.counts["late_replies"] == 1, link.counts
        time.sleep(1.1)  # no answer for longer than reply_wait_s: detached, nothing waited for
        t0 = time.monotonic()
        assert _decide(link, obs_spec, 0, 2, state) is None
        assert time.monotonic() - t0 < 0.5 and link.counts["late_replies"] == 1, link.counts
    finally:
        link.close()


def test_schedule_parse_refuses_nonsense():
    assert Schedule.parse(3, "2:9", 1) == Schedule(every=3, offset=1, start=2, stop=9)
    for every, steps, offset in [(0, "1:2", 0), (2, "5:5", 0), (2, "1:2", 2), (2, "x", 0)]:
        with pytest.raises(ValueError):
            Schedule.parse(every, steps, offset)


def test_off_loopback_an_operator_and_a_link_need_curve_keys():
    action_spec, _ = _specs()
    with pytest.raises(ValueError, match="need CURVE keys"):
        TeleopLink(
            "tcp://10.9.8.7:5590", "tcp://10.9.8.7:5591", "real:arm0", action_spec.low, action_spec.high
        )
    with pytest.raises(ValueError, match="needs CURVE keys"):
        ScriptedOperator("tcp://0.0.0.0:*", "tcp://0.0.0.0:*", Schedule())


def test_with_curve_only_a_worker_whose_key_the_operator_allows_gets_its_commands(tmp_path):
    """CURVE on the teleop path: the operator's server keys and an allow-list of worker keys. The
    allowed worker is taken over on schedule; a worker with a key not in the list gets nothing."""
    from rlinf_robot.bridge.auth import generate_keypair
    from rlinf_robot.bridge.config import CurveServerKeys

    op_public, op_secret = generate_keypair(tmp_path / "operator", "operator")
    _, worker_secret = generate_keypair(tmp_path / "allowed", "worker")
    _, stranger_secret = generate_keypair(tmp_path / "strangers", "stranger")
    action_spec, obs_spec = _specs()
    state = _state(obs_spec, np.random.default_rng(4))
    keys = CurveServerKeys(op_secret, tmp_path / "allowed")
    with _Serving(ScriptedOperator(ANY, ANY, Schedule(every=1, start=0, stop=100), curve=keys)) as op:
        worker = _link(op, action_spec, max_age_s=5.0, reply_wait_s=10.0,
                       curve={"secret_file": worker_secret, "server_public_file": op_public})  # fmt: skip
        stranger = _link(op, action_spec, max_age_s=5.0, reply_wait_s=10.0,
                         curve={"secret_file": stranger_secret, "server_public_file": op_public})  # fmt: skip
        try:
            _wait_attached(worker, obs_spec, state)
            assert _decide(worker, obs_spec, 0, 1, state) is not None
            for step in range(20):  # the stranger's handshake is refused: no state out, no command in
                assert _decide(stranger, obs_spec, 0, step, state) is None
                time.sleep(0.05)
            assert stranger.counts["commands"] == 0, stranger.counts
        finally:
            worker.close()
            stranger.close()
