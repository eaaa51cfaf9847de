"""A link cut between an episode's reset and its first step's answer: the worker keeps the episode,
aborted and without a step, and every reader takes it as it takes any other. A CI run's hybrid job
died here: the episode had none of its per-step columns and the job's bookkeeping read
``ep["versions"]`` (KeyError), ten seconds after the test cut the link."""

from __future__ import annotations

import time
import types

import numpy as np

from rlinf_robot.bridge.errors import BridgeTimeout
from rlinf_robot.data.episode import STEP_KEYS
from rlinf_robot.orchestrator.buffer import EpisodeStore, SourceBuffer
from rlinf_robot.orchestrator.job import JobState, TrainJob
from tests.data.test_real_env_recording import ScriptedArm, make_worker


class CutOnFirstStep(ScriptedArm):
    """Episode 0 loses the link on its first step; the next ones run normally."""

    def step(self, actions):
        if len(self.sent) == 1 and not self.sent[0]:
            self.sent[0].append(np.array(actions[0]))
            raise BridgeTimeout("no observation from tcp://127.0.0.1:1 within 3000 ms")
        return super().step(actions)


def test_an_episode_cut_before_its_first_step_is_kept_aborted_and_read_like_any_other(tmp_path):
    arm = CutOnFirstStep(lengths=[4])
    worker = make_worker(tmp_path, arm)
    worker.start()
    deadline = time.monotonic() + 120
    episodes: list[dict] = []
    while len(episodes) < 2 and time.monotonic() < deadline:
        episodes += worker.take_episodes()
        time.sleep(0.05)
    worker.stop(halt=True)
    assert len(episodes) >= 2, (episodes, worker.stats())
    cut, after = episodes[0], episodes[1]
    assert cut["meta"]["aborted"] and "BridgeTimeout" in cut["meta"]["reason"], cut["meta"]
    assert cut["meta"]["decisions"] == 0 and cut["meta"]["steps"] == 0
    for key in STEP_KEYS:  # every column, empty, with the dtype a stepped episode's has
        assert cut[key].shape[0] == 0, key
        assert cut[key].dtype.kind == np.asarray(after[key]).dtype.kind, key
    assert not after["meta"]["aborted"] and after["meta"]["decisions"] == 4

    # the job's own bookkeeping of arriving episodes (the code that raised KeyError)
    real = types.SimpleNamespace(call=lambda name: types.SimpleNamespace(wait=lambda t: [[cut, after]]))
    job = types.SimpleNamespace(
        groups={"real": real},
        replay=EpisodeStore(tmp_path / "replay"),
        buffer=SourceBuffer(max_staleness=10),
        state=JobState(),
        real_curve=[],
        _t0=time.monotonic(),
    )
    assert TrainJob._take_real(job) == [cut, after]
    assert [p["version"] for p in job.real_curve] == [-1, int(np.max(after["versions"]))]
    assert job.buffer.episodes == [after] and job.buffer.counts["real:arm0/aborted"] == 1
    stored = job.replay.read_all()
    assert [e["meta"]["aborted"] for e in stored] == [True, False]
    assert stored[0]["versions"].shape == (0,)
