"""``RealEnvWorker.stop`` while its episode thread is inside a long reset (a homing on a starved
machine): closing the env's sockets under that call failed it half-way ("ZMQError: Socket operation
on non-socket" at a hybrid run's shutdown). The env is left to the thread, which closes it as it
ends; the arm is a scripted stand-in whose reset blocks until the test lets it go."""

from __future__ import annotations

import threading
import time

from rlinf_robot.workers.real_env import RealEnvWorker
from tests.data.test_real_env_recording import ENV, ScriptedArm


class SlowResetArm(ScriptedArm):
    def __init__(self):
        super().__init__(lengths=[3])
        self.in_reset, self.release = threading.Event(), threading.Event()
        self.closed_by: list[str] = []

    def reset(self, seed=None):
        self.in_reset.set()
        assert self.release.wait(60), "the test never released the reset"
        return super().reset(seed)

    def close(self):
        self.closed_by.append(threading.current_thread().name)


def test_stop_leaves_the_env_to_an_episode_thread_still_in_a_reset():
    arm = SlowResetArm()
    worker = RealEnvWorker("tcp://127.0.0.1:1", env=ENV, policy="mlp", policy_kwargs={}, retry_s=0.05)

    def connect():
        worker._env = arm
        return arm

    worker._connect = connect
    worker.start()
    assert arm.in_reset.wait(60), "the episode thread never reached its reset"
    assert worker.stop(timeout_s=0.2)["state"] == "stopping"
    assert arm.closed_by == []  # not closed under the reset
    arm.release.set()
    deadline = time.monotonic() + 60
    while not arm.closed_by and time.monotonic() < deadline:
        time.sleep(0.05)
    assert arm.closed_by == ["real-episodes"], arm.closed_by  # closed by the thread, as it ended
    assert worker.stop()["state"] == "stopped"
    assert arm.closed_by == ["real-episodes"]  # and only once
