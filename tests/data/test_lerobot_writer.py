"""The LeRobot v3.0 writer: the files it leaves, read back with pyarrow (not with our code), match
what was sent, and ``meta/info.json`` holds LeRobot's contract."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from rlinf_robot.data.lerobot_writer import DatasetError, LeRobotWriter
from tests.data.writer_proc import FEATURES, FPS, episode_values, task_of, write_episode


def read_dataset(root):
    """Episodes of the dataset at ``root`` as pyarrow sees them, through LeRobot's own metadata:
    info.json's counters, meta/episodes' rows and data_path template, meta/tasks."""
    info = json.loads((root / "meta/info.json").read_text())
    rows = []
    for path in sorted((root / "meta/episodes").glob("chunk-*/file-*.parquet")):
        rows += pq.read_table(path).to_pylist()
    rows = sorted(
        (r for r in rows if r["episode_index"] < info["total_episodes"]), key=lambda r: r["episode_index"]
    )
    tasks = pq.read_table(root / "meta/tasks.parquet").to_pydict()
    task_of_index = dict(zip(tasks["task_index"], tasks["task"], strict=True))
    episodes = []
    for r in rows:
        path = root / info["data_path"].format(
            chunk_index=r["data/chunk_index"], file_index=r["data/file_index"]
        )
        table = pq.read_table(path).to_pydict()
        sel = [i for i, e in enumerate(table["episode_index"]) if e == r["episode_index"]]
        episodes.append((r, {k: [v[i] for i in sel] for k, v in table.items()}, task_of_index))
    return info, episodes


def check_episode(i, row, frames, task_of_index, first_index):
    sent = episode_values(i)
    n = len(sent)
    assert row["length"] == n and row["tasks"] == [task_of(i)]
    assert row["dataset_from_index"] == first_index and row["dataset_to_index"] == first_index + n
    assert frames["frame_index"] == list(range(n))
    assert frames["episode_index"] == [i] * n
    assert frames["index"] == list(range(first_index, first_index + n))
    np.testing.assert_allclose(frames["timestamp"], np.arange(n) / FPS, rtol=1e-6)
    assert {task_of_index[t] for t in frames["task_index"]} == {task_of(i)}
    for t, frame in enumerate(sent):
        np.testing.assert_array_equal(
            np.asarray(frames["observation.state"][t], np.float32), frame["observation.state"]
        )
        np.testing.assert_array_equal(np.asarray(frames["action"][t], np.float32), frame["action"])
        assert np.float32(frames["next.reward"][t]) == frame["next.reward"]
        assert frames["next.done"][t] == frame["next.done"]
        assert frames["source"][t] == "real:arm0"
        assert frames["policy.version"][t] == frame["policy.version"]
        assert frames["intervened"][t] == frame["intervened"]
        img = np.asarray(Image.open(io.BytesIO(frames["observation.images.wrist"][t]["bytes"])))
        np.testing.assert_array_equal(img, frame["observation.images.wrist"])  # PNG: lossless


def test_episodes_read_back_with_pyarrow_match_what_was_sent(tmp_path):
    root = tmp_path / "ds"
    w = LeRobotWriter(root, FEATURES, fps=FPS, robot_type="franka_fr3")
    for i in range(5):
        assert write_episode(w, i) == i
    lengths = [len(episode_values(i)) for i in range(5)]

    info, episodes = read_dataset(root)
    # meta/info.json: LeRobot's contract
    assert info["codebase_version"] == "v3.0"
    assert info["fps"] == FPS and info["robot_type"] == "franka_fr3"
    assert info["total_episodes"] == 5 and info["total_frames"] == sum(lengths) and info["total_tasks"] == 2
    assert info["splits"] == {"train": "0:5"}
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] is None and info["chunks_size"] == 1000
    for key in ("timestamp", "frame_index", "episode_index", "index", "task_index"):
        assert info["features"][key]["shape"] == [1]
    assert info["features"]["action"] == {"dtype": "float32", "shape": [3], "names": ["x", "y", "z"]}
    assert info["features"]["observation.images.wrist"]["dtype"] == "image"
    assert info["features"]["observation.images.wrist"]["shape"] == [12, 16, 3]
    # every data file's columns are exactly the declared features
    schema = pq.read_schema(root / "data/chunk-000/file-000.parquet")
    assert set(schema.names) == set(info["features"])
    assert str(schema.field("action").type) == "fixed_size_list<element: float>[3]"
    # tasks.parquet is a pandas frame indexed by the task string (how LeRobot reads it)
    tasks_meta = json.loads(pq.read_schema(root / "meta/tasks.parquet").metadata[b"pandas"])
    assert tasks_meta["index_columns"] == ["task"]

    assert len(episodes) == 5
    first = 0
    for i, (row, frames, task_of_index) in enumerate(episodes):
        check_episode(i, row, frames, task_of_index, first)
        assert row["kind"] == "train" and row["aborted"] is False and row["success"] == (i % 2 == 0)
        first += lengths[i]

    # stats.json over every frame
    stats = json.loads((root / "meta/stats.json").read_text())
    actions = np.concatenate([[f["action"] for f in episode_values(i)] for i in range(5)]).astype(np.float64)
    np.testing.assert_allclose(stats["action"]["mean"], actions.mean(0), rtol=1e-6)
    np.testing.assert_allclose(stats["action"]["std"], actions.std(0), rtol=1e-6)
    np.testing.assert_allclose(stats["action"]["min"], actions.min(0))
    assert stats["action"]["count"] == [sum(lengths)]
    assert np.asarray(stats["observation.images.wrist"]["mean"]).shape == (3, 1, 1)
    assert not (root / ".staging").exists()


def test_reopening_appends_and_keeps_stats_exact(tmp_path):
    root = tmp_path / "ds"
    w = LeRobotWriter(root, FEATURES, fps=FPS)
    write_episode(w, 0)
    write_episode(w, 1)
    del w
    w = LeRobotWriter(root, FEATURES, fps=FPS)
    assert w.num_episodes == 2
    write_episode(w, 2)
    write_episode(w, 3)
    info, episodes = read_dataset(root)
    assert info["total_episodes"] == 4 and len(episodes) == 4
    first = 0
    for i, (row, frames, task_of_index) in enumerate(episodes):
        check_episode(i, row, frames, task_of_index, first)
        first += row["length"]
    states = np.concatenate([[f["observation.state"] for f in episode_values(i)] for i in range(4)]).astype(
        np.float64
    )
    stats = json.loads((root / "meta/stats.json").read_text())
    np.testing.assert_allclose(stats["observation.state"]["std"], states.std(0), rtol=1e-6)
    assert stats["index"]["max"] == [first - 1]


def test_reopening_with_other_features_or_fps_is_refused(tmp_path):
    root = tmp_path / "ds"
    write_episode(LeRobotWriter(root, FEATURES, fps=FPS), 0)
    other = {**FEATURES, "action": {"dtype": "float32", "shape": [4], "names": None}}
    with pytest.raises(DatasetError, match="other features or fps"):
        LeRobotWriter(root, other, fps=FPS)
    with pytest.raises(DatasetError, match="other features or fps"):
        LeRobotWriter(root, FEATURES, fps=FPS + 1)


def test_a_bad_frame_is_refused_whole_and_nothing_is_written_before_save(tmp_path):
    root = tmp_path / "ds"
    w = LeRobotWriter(root, FEATURES, fps=FPS)
    frame = episode_values(0)[0]
    w.add_frame(frame, task="t")
    with pytest.raises(ValueError, match="expected 3 values"):
        w.add_frame({**frame, "action": np.zeros(4)}, task="t")
    with pytest.raises(ValueError, match="missing"):
        w.add_frame({k: v for k, v in frame.items() if k != "source"}, task="t")
    with pytest.raises(ValueError, match="one task per episode"):
        w.add_frame(frame, task="another")
    assert w.pending_frames == 1  # the refused frames left no column behind
    assert not (root / "data").exists()  # frames stay in memory until the episode is saved
    assert w.save_episode() == 0
    assert pq.read_table(root / "data/chunk-000/file-000.parquet").num_rows == 1
    with pytest.raises(ValueError, match="no frames"):
        w.save_episode()
