"""``TeleopLink``: the env's side of the teleop path (one per robot, in its ``RealEnvWorker``).

Before each decision the worker calls ``decide``: the link publishes the state on ``states`` and
looks at what operators sent on ``commands``. An operator that answers states (its commands carry
the step they answer, as the scripted operator's do) is *attached*: the link waits up to
``reply_wait_s`` for its answer to this very step, so a takeover scheduled for step k acts at step
k (an answer that does not come in time is not used for a later step: the policy acts, and
``late_replies`` counts it); it stays attached while its last answer is younger than
``max(max_age_s, reply_wait_s)``. A free-running device (step -1) is never waited for: its newest command counts while it is
younger than ``max_age_s``. A command older than that counts as released (an operator whose
process died hands the arm back to the policy, it does not freeze it on a stale action).

``decide`` returns the operator's action row when an engaged, fresh command passes
``check_command``, else None (the policy acts). A refused command is counted and named in the
next published state. The link never blocks the arm for longer than ``reply_wait_s``, and not at
all when no operator is attached.

Off this machine the link authenticates the operator: an endpoint that is not loopback needs
``curve`` (the learner's secret certificate and the operator's public key, as for the bridge), so
only the process holding the operator's secret key can send the arm commands, and only this
worker's key is let in by the operator (``rlinf-robot teleop --curve-...``).
"""

from __future__ import annotations

import logging
import time

import numpy as np
import zmq

from rlinf_robot.bridge.auth import apply_client_keys
from rlinf_robot.bridge.config import CurveClientKeys, is_loopback
from rlinf_robot.teleop.messages import TeleopCommand, TeleopState, check_command, decode, encode

log = logging.getLogger(__name__)


class TeleopLink:
    def __init__(
        self,
        states: str,
        commands: str,
        robot: str,
        low: np.ndarray,
        high: np.ndarray,
        max_age_s: float = 0.5,
        reply_wait_s: float = 0.5,
        curve: CurveClientKeys | dict | None = None,
    ):
        if not states or not commands:
            raise ValueError("teleop needs both endpoints: states (env -> operators) and commands")
        if isinstance(curve, dict):
            curve = CurveClientKeys(**curve) if curve else None
        if curve is None and not (is_loopback(states) and is_loopback(commands)):
            raise ValueError(
                f"teleop endpoints off this machine ({states}, {commands}) need CURVE keys "
                "(teleop.curve: secret_file, server_public_file): an unauthenticated operator could move the arm"
            )
        self.robot = robot
        self.low, self.high = [float(x) for x in low], [float(x) for x in high]
        self.max_age_s, self.reply_wait_s = float(max_age_s), float(reply_wait_s)
        self._ctx: zmq.Context = zmq.Context.instance()
        self._pub = self._ctx.socket(zmq.PUB)
        self._pub.setsockopt(zmq.LINGER, 0)
        self._pub.setsockopt(zmq.SNDHWM, 100)
        self._sub = self._ctx.socket(zmq.SUB)
        self._sub.setsockopt(zmq.LINGER, 0)
        self._sub.setsockopt(zmq.SUBSCRIBE, b"")
        if curve is not None:
            apply_client_keys(self._pub, curve)
            apply_client_keys(self._sub, curve)
        self._pub.connect(states)
        self._sub.connect(commands)
        self._latest: TeleopCommand | None = None
        self._latest_at = -np.inf  # time.monotonic() when it arrived
        self._intervened = False
        self._rejected = ""
        self.counts = {"commands": 0, "bad_messages": 0, "rejected": 0, "intervened": 0, "late_replies": 0}

    def decide(
        self,
        episode: int,
        step: int,
        state: np.ndarray,
        fields: dict[str, slice],
        task: str,
        action_mode: str,
        instruction: str = "",
    ) -> np.ndarray | None:
        """Publish this decision's state; the operator's action row for it, or None."""
        msg = TeleopState(
            robot=self.robot,
            episode=int(episode),
            step=int(step),
            task=task,
            action_mode=action_mode,
            action_dim=len(self.low),
            state=[float(x) for x in np.asarray(state).ravel()],
            fields={k: [s.start, s.stop] for k, s in fields.items()},
            instruction=instruction,
            intervened=self._intervened,
            rejected=self._rejected,
            stamp_ns=time.time_ns(),
        )
        try:
            self._pub.send(encode(msg), zmq.NOBLOCK)
        except zmq.Again:  # no operator reads: nothing to wait for either
            pass
        self._drain(0.0)
        self._intervened, self._rejected = False, ""
        if self._attached():
            deadline = time.monotonic() + self.reply_wait_s
            while not self._answers(episode, step):
                left = deadline - time.monotonic()
                if left <= 0:  # its answer to an earlier state is stale now: the policy acts
                    self.counts["late_replies"] += 1
                    return None
                self._drain(left)
        cmd = self._latest if self._fresh() else None
        if cmd is None or not cmd.engaged:
            return None
        why = check_command(cmd, self.low, self.high)
        if why:
            self.counts["rejected"] += 1
            self._rejected = why
            log.warning("teleop command from %r refused: %s", cmd.operator, why)
            return None
        self._intervened = True
        self.counts["intervened"] += 1
        return np.asarray(cmd.action, np.float32)

    def _within(self, seconds: float) -> bool:
        """A command arrived and the newest is at most ``seconds`` old."""
        return self._latest is not None and time.monotonic() - self._latest_at <= seconds

    def _fresh(self) -> bool:
        return self._within(self.max_age_s)

    def _attached(self) -> bool:
        """An operator that answers states and answered one within the last ``max(max_age_s,
        reply_wait_s)``: as long as one is willing to wait for its answer to a step. (Judging it by
        ``max_age_s`` alone dropped it whenever two decisions were further apart than that, as
        they are on a busy machine, and its takeover then started a step late.)"""
        c = self._latest
        return c is not None and c.step >= 0 and self._within(max(self.max_age_s, self.reply_wait_s))

    def _answers(self, episode: int, step: int) -> bool:
        c = self._latest
        return c is not None and c.episode == episode and c.step == step

    def _drain(self, timeout_s: float) -> None:
        """Read every waiting command (waiting up to ``timeout_s`` for the first); keep the newest
        one addressed to this robot."""
        timeout_ms = int(max(timeout_s, 0.0) * 1000)
        while self._sub.poll(timeout_ms):
            timeout_ms = 0
            data = self._sub.recv()
            try:
                msg = decode(data)
            except ValueError as e:
                self.counts["bad_messages"] += 1
                log.warning("teleop: dropped a bad message (%s)", e)
                continue
            if not isinstance(msg, TeleopCommand) or msg.robot not in ("", self.robot):
                continue
            self.counts["commands"] += 1
            self._latest, self._latest_at = msg, time.monotonic()

    def close(self) -> None:
        self._pub.close(0)
        self._sub.close(0)
