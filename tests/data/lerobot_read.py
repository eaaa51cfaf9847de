"""Run by test_lerobot_reader.py under a venv holding LeRobot (not this project's): loads a dataset
with ``lerobot.datasets.lerobot_dataset.LeRobotDataset`` and prints what it read as JSON."""

import json
import sys

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset

root = sys.argv[1]
ds = LeRobotDataset("local/recorded", root=root)
out = {
    "len": len(ds),
    "num_episodes": ds.num_episodes,
    "fps": ds.fps,
    "version": str(ds.meta.info["codebase_version"]),
    "tasks": list(ds.meta.tasks.index),
    "stats_action_mean": np.asarray(ds.meta.stats["action"]["mean"]).tolist(),
    "items": [],
}
for i in range(len(ds)):
    item = ds[i]
    out["items"].append(
        {
            "index": int(item["index"]),
            "episode_index": int(item["episode_index"]),
            "frame_index": int(item["frame_index"]),
            "timestamp": float(item["timestamp"]),
            "task": item["task"],
            "action": item["action"].tolist(),
            "state": item["observation.state"].tolist(),
            "reward": float(item["next.reward"]),
            "done": bool(item["next.done"]),
            "source": item["source"],
            "intervened": bool(item["intervened"]),
            "version": int(item["policy.version"]),
            # LeRobot returns images as float CHW in [0, 1]
            "image": (item["observation.images.wrist"].numpy() * 255)
            .round()
            .astype(int)
            .transpose(1, 2, 0)
            .tolist(),
        }
    )
one = LeRobotDataset("local/recorded", root=root, episodes=[1])
out["episode_1_len"] = len(one)
out["episode_1_indices"] = [int(one[i]["index"]) for i in range(len(one))]
window = LeRobotDataset("local/recorded", root=root, delta_timestamps={"action": [-0.1, 0.0]})
out["window_shape"] = list(window[3]["action"].shape)
print("RESULT " + json.dumps(out))
