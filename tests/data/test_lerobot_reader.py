"""LeRobot's own reader (``LeRobotDataset``) loads what our writer wrote, values intact.

LeRobot pins an older torch than this project's, so it lives in a separate venv that never touches
``.venv`` (``make setup`` builds it at ``build/lerobot-venv`` with ``tools/lerobot_reader_venv.sh``;
another one can be named by ``RLINF_LEROBOT_PYTHON``). Without it this test skips, saying so."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rlinf_robot.data.lerobot_writer import LeRobotWriter
from tests.data.writer_proc import FEATURES, FPS, episode_values, task_of, write_episode

HERE = Path(__file__).parent
PYTHON = Path(
    os.environ.get("RLINF_LEROBOT_PYTHON", HERE.parents[1] / "build" / "lerobot-venv" / "bin" / "python")
)


def lerobot_available() -> str:
    if not PYTHON.exists():
        return f"no LeRobot venv at {PYTHON} (make setup builds one: tools/lerobot_reader_venv.sh)"
    probe = subprocess.run(
        [str(PYTHON), "-c", "import lerobot.datasets.lerobot_dataset"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd="/tmp",
    )
    if probe.returncode:
        return f"{PYTHON} cannot import lerobot.datasets: {probe.stderr.strip().splitlines()[-1:]}"
    return ""


@pytest.mark.slow
def test_lerobot_reads_our_dataset(tmp_path):
    why = lerobot_available()
    if why:
        pytest.skip(why)
    root = tmp_path / "ds"
    w = LeRobotWriter(root, FEATURES, fps=FPS, robot_type="franka_fr3")
    for i in range(3):
        write_episode(w, i)
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    run = subprocess.run(
        [str(PYTHON), str(HERE / "lerobot_read.py"), str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd="/tmp",
        env=env,
    )
    line = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")]
    assert run.returncode == 0 and line, run.stderr[-3000:]
    got = json.loads(line[0][len("RESULT ") :])

    sent = [(i, t, f) for i in range(3) for t, f in enumerate(episode_values(i))]
    assert got["version"] == "v3.0" and got["fps"] == FPS
    assert got["num_episodes"] == 3 and got["len"] == len(sent)
    assert got["tasks"] == [task_of(0), task_of(1)]
    for k, (item, (i, t, f)) in enumerate(zip(got["items"], sent, strict=True)):
        assert (item["index"], item["episode_index"], item["frame_index"]) == (k, i, t)
        assert item["task"] == task_of(i) and item["source"] == "real:arm0"
        assert abs(item["timestamp"] - t / FPS) < 1e-6
        np.testing.assert_array_equal(np.float32(item["action"]), f["action"])
        np.testing.assert_array_equal(np.float32(item["state"]), f["observation.state"])
        assert np.float32(item["reward"]) == f["next.reward"] and item["done"] == f["next.done"]
        assert item["intervened"] == f["intervened"] and item["version"] == f["policy.version"]
        np.testing.assert_array_equal(np.asarray(item["image"]), f["observation.images.wrist"])
    actions = np.concatenate([[f["action"] for f in episode_values(i)] for i in range(3)]).astype(np.float64)
    np.testing.assert_allclose(got["stats_action_mean"], actions.mean(0), rtol=1e-6)
    n0 = len(episode_values(0))
    assert got["episode_1_len"] == len(episode_values(1))
    assert got["episode_1_indices"] == list(range(n0, n0 + len(episode_values(1))))
    assert got["window_shape"] == [2, 3]
