"""``RealEnvWorker`` with ``record_dir``: each finished real episode (evaluation and background
training episodes, aborted ones marked) lands in ``<record_dir>/<robot>/`` as a LeRobot dataset
whose frames are what the arm was sent and what it returned. The arm is a scripted stand-in here
(the worker's env on franka-sim is tested in tests/integration/bridge); the worker, its policy and
the writer are the real ones."""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow.parquet as pq

from rlinf_robot.envs.real import RealEnvConfig, RealRobotEnv
from rlinf_robot.workers.real_env import RealEnvWorker

ENV = {"task": "fr3-reach", "control_hz": 20.0, "cameras": {"wrist": [12, 16, 3]}}


class ScriptedArm:
    """Answers like ``RealRobotEnv`` (one robot); episode k lasts ``lengths[k]`` steps and is
    aborted (a latched arm) when k is in ``aborts``. Logs what it was sent and what it returned."""

    def __init__(self, lengths, aborts=()):
        cfg = RealEnvConfig.from_dict({**ENV, "auto_reset": False})
        _, self.obs_spec = RealRobotEnv.specs(cfg)
        self.lengths, self.aborts = list(lengths), set(aborts)
        self.rng = np.random.default_rng(7)
        self.episode = -1
        self.goals = np.array([[0.5, 0.0, 0.3]])
        self.sent: list[list[np.ndarray]] = []
        self.states: list[list[np.ndarray]] = []
        self.images: list[list[np.ndarray]] = []
        self.rewards: list[list[float]] = []
        self.seeds: list[int | None] = []  # what each reset was seeded with
        self.last_reset = [{"home_s": 0.0, "move_s": 0.0, "moves": 1}]  # RealRobotEnv's reset report

    def _obs(self):
        state = self.rng.normal(size=(1, self.obs_spec.state_shape[0])).astype(np.float32)
        img = self.rng.integers(0, 256, (1, 12, 16, 3), dtype=np.uint8)
        self.states[-1].append(state[0])
        self.images[-1].append(img[0])
        return {"state": state, "images": {"wrist": img}, "instruction": ["move the gripper to the red ball"]}

    def reset(self, seed=None):  # the env contract: reset(seed=None)
        self.seeds.append(seed)
        self.episode = (self.episode + 1) % len(self.lengths)
        self.t = 0
        for log in (self.sent, self.states, self.images, self.rewards):
            log.append([])
        return self._obs()

    def step(self, actions):
        self.sent[-1].append(np.array(actions[0]))
        self.t += 1
        end = self.t >= self.lengths[self.episode]
        aborted = end and self.episode in self.aborts
        reward = float(-0.01 * self.t)
        self.rewards[-1].append(reward)
        info = {
            "latency_ms": {"step": np.array([3.0])},
            "executed": np.array([1]),
            "aborted": np.array([aborted]),
            "success": np.array([end and not aborted]),
            "rejections": [[{"code": "LATCHED", "message": "arm latched"}] if aborted else []],
        }
        return self._obs(), np.array([reward]), np.array([False]), np.array([end]), info

    def close(self):
        pass


def make_worker(tmp_path, arm):
    worker = RealEnvWorker(
        "tcp://127.0.0.1:1",
        env=ENV,
        policy="mlp",
        policy_kwargs={},
        source="real:arm0",
        retry_s=0.05,
        record_dir=str(tmp_path / "datasets"),
    )
    worker._connect = lambda: arm  # the scripted arm instead of a bridge connection
    return worker


def dataset(root):
    info = json.loads((root / "meta/info.json").read_text())
    rows = sorted(
        pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet").to_pylist(),
        key=lambda r: r["episode_index"],
    )
    frames = [
        pq.read_table(
            root
            / info["data_path"].format(chunk_index=r["data/chunk_index"], file_index=r["data/file_index"])
        ).to_pydict()
        for r in rows
    ]
    return info, rows, frames


def test_real_episodes_are_recorded_as_they_end(tmp_path):
    arm = ScriptedArm(lengths=[4, 3, 5], aborts={1})
    worker = make_worker(tmp_path, arm)
    episodes = worker.evaluate(3, deterministic=True)
    assert [e["meta"]["aborted"] for e in episodes] == [False, True, False]
    # and background (training) episodes
    worker.start()
    deadline = time.monotonic() + 60
    while worker.counts["episodes"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.stop()
    stats = worker.stats()
    assert stats["record_errors"] == 0
    total = 3 + worker.counts["episodes"]
    assert stats["recorded"] == total

    root = tmp_path / "datasets" / "arm0"
    info, rows, frames = dataset(root)
    assert info["codebase_version"] == "v3.0" and info["fps"] == 20 and info["total_episodes"] == total
    assert info["features"]["observation.images.wrist"]["shape"] == [12, 16, 3]
    assert info["features"]["observation.state"]["names"][:2] == ["joint_pos.0", "joint_pos.1"]
    assert info["features"]["action"]["names"] == ["dx", "dy", "dz", "drx", "dry", "drz"]
    assert [r["kind"] for r in rows] == ["eval"] * 3 + ["train"] * (total - 3)
    assert [r["aborted"] for r in rows[:3]] == [False, True, False]
    assert rows[1]["abort_reason"] == "arm latched" and not rows[1]["success"]
    assert rows[0]["success"] and rows[0]["source"] == "real:arm0"
    for k, (row, f) in enumerate(zip(rows, frames, strict=True)):
        n = len(arm.sent[k])
        assert row["length"] == n == len(f["frame_index"])
        # what was sent and what came back, frame by frame
        np.testing.assert_array_equal(np.stack(f["action"]).astype(np.float32), np.stack(arm.sent[k]))
        np.testing.assert_array_equal(
            np.stack(f["observation.state"]).astype(np.float32), np.stack(arm.states[k][:n])
        )
        np.testing.assert_allclose(f["next.reward"], arm.rewards[k], rtol=1e-6)
        assert f["source"] == ["real:arm0"] * n and f["intervened"] == [False] * n
        assert f["policy.version"] == [-1] * n  # the initial weights acted
        assert np.all(np.diff(f["wall_time"]) >= 0) and abs(f["wall_time"][0] - row["t_start"]) < 5
        # an aborted episode did not end: its last frame is not "done"
        assert f["next.done"][-1] == (not row["aborted"])
        assert (
            json.loads(row["final_state"])
            == np.asarray(arm.states[k][n], dtype=np.float32).astype(float).tolist()
        )
    tasks = pq.read_table(root / "meta/tasks.parquet").to_pydict()
    assert tasks["task"] == ["move the gripper to the red ball"]


def test_recording_off_writes_nothing(tmp_path):
    arm = ScriptedArm(lengths=[2])
    worker = RealEnvWorker("tcp://127.0.0.1:1", env=ENV, policy="mlp", policy_kwargs={}, source="real:arm0")
    worker._connect = lambda: arm
    assert len(worker.evaluate(1)) == 1
    assert worker.stats()["recorded"] == 0 and not (tmp_path / "datasets").exists()


def test_an_evaluation_draws_its_goals_from_the_seed_it_is_given():
    """The job passes a held-out seed: the first evaluation episode reseeds the env's goal draw
    with it (+ rank), the others go on from there; without one the training sequence goes on."""
    arm = ScriptedArm(lengths=[2])
    worker = RealEnvWorker("tcp://127.0.0.1:1", env=ENV, policy="mlp", policy_kwargs={}, source="real:arm0")
    worker._connect = lambda: arm
    assert len(worker.evaluate(3, seed=1_000_003)) == 3
    assert arm.seeds == [1_000_003 + worker.rank, None, None]
    worker.evaluate(1)
    assert arm.seeds[-1] is None
