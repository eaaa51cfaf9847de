"""kill -9 while recording: a real writer process (``writer_proc.py``) killed with SIGKILL mid-episode
or inside a commit loses no committed episode and leaves no partial one readable as complete."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from rlinf_robot.data.lerobot_writer import LeRobotWriter
from tests.data.test_lerobot_writer import check_episode, read_dataset
from tests.data.writer_proc import FEATURES, FPS, episode_values, write_episode

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("writer_proc.py")


def start_writer(root: Path, mode: str, n: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(root), mode, str(n)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )


def check_committed(root: Path, n: int) -> None:
    info, episodes = read_dataset(root)
    assert info["total_episodes"] == n and len(episodes) == n
    assert info["total_frames"] == sum(len(episode_values(i)) for i in range(n))
    first = 0
    for i, (row, frames, task_of_index) in enumerate(episodes):
        check_episode(i, row, frames, task_of_index, first)
        first += row["length"]


def data_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / "data").glob("*/*.parquet"))


def episode_rows(root: Path) -> list[int]:
    return sorted(
        r["episode_index"]
        for p in (root / "meta/episodes").glob("*/*.parquet")
        for r in pq.read_table(p).to_pylist()
    )


def test_sigkill_mid_episode_keeps_every_committed_episode_and_nothing_of_the_partial_one(tmp_path):
    root = tmp_path / "ds"
    proc = start_writer(root, "mid-episode", 3)
    lines = []
    for line in proc.stdout:  # wait until it is inside episode 3
        lines.append(line.strip())
        if line.strip() == "mid-episode":
            break
    assert lines == ["committed 0", "committed 1", "committed 2", "mid-episode"], proc.stderr.read()
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL

    check_committed(root, 3)
    # nothing of episode 3 anywhere: no data file, no episodes row, not counted
    assert data_files(root) == [f"data/chunk-000/file-00{i}.parquet" for i in range(3)]
    assert episode_rows(root) == [0, 1, 2]
    # the dataset takes new episodes after the crash
    w = LeRobotWriter(root, FEATURES, fps=FPS)
    assert w.num_episodes == 3
    write_episode(w, 3)
    check_committed(root, 4)


def test_sigkill_inside_a_commit_leaves_the_episode_uncounted_and_reopening_removes_it(tmp_path):
    root = tmp_path / "ds"
    proc = start_writer(root, "in-commit", 2)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, err
    assert out.split("\n")[:2] == ["committed 0", "committed 1"] and "not killed" not in out

    # killed after episode 2's data file and episodes row were in place, before info.json:
    info = json.loads((root / "meta/info.json").read_text())
    assert info["total_episodes"] == 2  # the commit point was not reached: episode 2 is not in the dataset
    assert "data/chunk-000/file-002.parquet" in data_files(root) and 2 in episode_rows(root)
    check_committed(root, 2)  # a reader going by info.json and meta/episodes sees the 2 committed ones

    # opening it again (a new job, or the next episode of this one) repairs it first
    w = LeRobotWriter(root, FEATURES, fps=FPS)
    assert w.num_episodes == 2
    assert data_files(root) == ["data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet"]
    assert episode_rows(root) == [0, 1]
    assert not (root / ".staging").exists()
    stats = json.loads((root / "meta/stats.json").read_text())
    assert stats["action"]["count"] == [info["total_frames"]]
    write_episode(w, 2)
    check_committed(root, 3)
