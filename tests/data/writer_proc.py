"""A writer process for the crash tests (run as ``python writer_proc.py ROOT MODE N``): commits N
episodes of ``episode_values(i)``, printing ``committed <i>`` after each, then, by MODE:

- ``mid-episode``: buffers half of episode N, prints ``mid-episode`` and waits to be killed;
- ``in-commit``: commits episode N but SIGKILLs itself inside the commit, after the data file
  and the episodes meta are in place and before ``meta/info.json`` (the commit point) is written.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

from rlinf_robot.data import lerobot_writer
from rlinf_robot.data.lerobot_writer import LeRobotWriter

FEATURES = {
    "observation.state": {"dtype": "float32", "shape": [5], "names": None},
    "observation.images.wrist": {"dtype": "image", "shape": [12, 16, 3], "names": None},
    "action": {"dtype": "float32", "shape": [3], "names": ["x", "y", "z"]},
    "next.reward": {"dtype": "float32", "shape": [1], "names": None},
    "next.done": {"dtype": "bool", "shape": [1], "names": None},
    "source": {"dtype": "string", "shape": [1], "names": None},
    "policy.version": {"dtype": "int64", "shape": [1], "names": None},
    "intervened": {"dtype": "bool", "shape": [1], "names": None},
}
FPS = 10


def episode_values(i: int) -> list[dict]:
    """The frames of episode ``i``: deterministic, so a checker can rebuild what was sent."""
    rng = np.random.default_rng(1000 + i)
    n = 6 + i % 4
    return [
        {
            "observation.state": rng.normal(size=5).astype(np.float32),
            "observation.images.wrist": rng.integers(0, 256, (12, 16, 3), dtype=np.uint8),
            "action": rng.uniform(-1, 1, 3).astype(np.float32),
            "next.reward": np.float32(-0.1 * t),
            "next.done": t == n - 1,
            "source": "real:arm0",
            "policy.version": i // 2,
            "intervened": t % 3 == 1,
        }
        for t in range(n)
    ]


def task_of(i: int) -> str:
    return "reach the ball" if i % 2 == 0 else "push the block"


def write_episode(w: LeRobotWriter, i: int) -> int:
    for frame in episode_values(i):
        w.add_frame(frame, task=task_of(i))
    return w.save_episode({"kind": "train", "aborted": False, "success": i % 2 == 0})


def main() -> None:
    root, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    w = LeRobotWriter(root, FEATURES, fps=FPS, robot_type="franka_fr3")
    start = w.num_episodes
    for i in range(start, start + n):
        write_episode(w, i)
        print(f"committed {i}", flush=True)
    i = start + n
    if mode == "mid-episode":
        frames = episode_values(i)
        for frame in frames[: len(frames) // 2]:
            w.add_frame(frame, task=task_of(i))
        print("mid-episode", flush=True)
        time.sleep(60)
    elif mode == "in-commit":
        real = lerobot_writer._Atomic.write_json

        def write_json(self, rel, obj):
            if rel == lerobot_writer.INFO_PATH:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(self, rel, obj)

        lerobot_writer._Atomic.write_json = write_json
        write_episode(w, i)
        print("not killed", flush=True)


if __name__ == "__main__":
    main()
