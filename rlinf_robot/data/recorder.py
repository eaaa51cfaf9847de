"""Real-arm episodes (as ``RealEnvWorker`` finishes them) into a LeRobot v3.0 dataset.

One frame per policy decision: the observation the policy acted on, the action it sent (an action
chunk of H steps is flattened to H x A values, and ``fps`` is ``control_hz / H``), and what came
of it. Columns:

=========================== ======= ===========================================================
``observation.state``       float32 the env's state vector (names from the env's state fields)
``observation.images.<cam>`` image  each camera's frame, PNG
``action``                  float32 the action sent to the arm (after the policy's squashing)
``policy.raw_action``       float32 the policy's pre-squash sample
``policy.log_prob``         float32 behaviour log-prob of ``policy.raw_action`` (NaN if none)
``policy.value``            float32 the critic's value (NaN if none)
``policy.version``          int64   weights version that acted
``next.reward``             float32 reward of this step
``next.done``               bool    the episode ended here (terminated or truncated); false on
                                    the last frame of an aborted episode, which did not end
``next.success``            bool    the task's success flag after this step
``executed``                int64   steps of the chunk the arm executed
``source``                  string  e.g. ``real:arm0``
``intervened``              bool    a human took over this step (teleop); false otherwise
``wall_time``               float64 Unix time the observation was taken
=========================== ======= ===========================================================

plus LeRobot's ``timestamp`` (``frame_index / fps``), ``frame_index``, ``episode_index``,
``index`` and ``task_index`` (the task is the episode's instruction). Each episode's row in
``meta/episodes`` adds ``source``, ``kind`` (``train`` | ``eval`` | ``demo`` | ``record``), ``aborted`` and
``abort_reason``, ``success``, ``return``, ``goal``, ``final_state``, ``rejections`` and times.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from rlinf_robot.data.lerobot_writer import LeRobotWriter

_ACTION_NAMES = {
    "ee_delta": ["dx", "dy", "dz", "drx", "dry", "drz"],
    "joint_delta": [f"dq{i}" for i in range(7)],
}


def _state_names(obs_spec) -> list[str] | None:
    names: list[str] = []
    for field, width in getattr(obs_spec, "state_fields", ()) or ():
        names += [field] if width == 1 else [f"{field}.{i}" for i in range(width)]
    return names or None


def _action_names(action_spec, horizon: int) -> list[str]:
    base = list(_ACTION_NAMES.get(action_spec.mode, [f"a{i}" for i in range(action_spec.shape[0])]))
    base = (base + ["gripper"])[: action_spec.shape[0]]
    return base if horizon == 1 else [f"t{k}.{n}" for k in range(horizon) for n in base]


class RealEpisodeRecorder:
    """Writes each finished real episode (an ``_EpisodeRecord.finish`` dict) to ``root``.

    The dataset is created at the first episode (its action width depends on the policy's chunk
    length); episodes without a single step are skipped (counted in ``skipped``)."""

    def __init__(
        self,
        root: str | Path,
        action_spec,
        obs_spec,
        control_hz: float,
        task: str = "",
        robot_type: str = "franka_fr3",
    ):
        self.root = Path(root)
        self.action_spec, self.obs_spec = action_spec, obs_spec
        self.control_hz = float(control_hz)
        self.task = task
        self.robot_type = robot_type
        self.writer: LeRobotWriter | None = None
        self.recorded = 0
        self.skipped = 0

    def _features(self, horizon: int) -> dict[str, dict[str, Any]]:
        width = int(np.prod(self.action_spec.shape)) * horizon
        names = _action_names(self.action_spec, horizon)
        scalar = {"shape": [1], "names": None}
        feats: dict[str, dict[str, Any]] = {
            "observation.state": {
                "dtype": "float32",
                "shape": [int(self.obs_spec.state_shape[0])],
                "names": _state_names(self.obs_spec),
            },
        }
        for cam, shape in sorted((self.obs_spec.images or {}).items()):
            feats[f"observation.images.{cam}"] = {
                "dtype": "image",
                "shape": [int(s) for s in shape],
                "names": None,
            }
        feats.update(
            {
                "action": {"dtype": "float32", "shape": [width], "names": names},
                "policy.raw_action": {"dtype": "float32", "shape": [width], "names": names},
                "policy.log_prob": {"dtype": "float32", **scalar},
                "policy.value": {"dtype": "float32", **scalar},
                "policy.version": {"dtype": "int64", **scalar},
                "next.reward": {"dtype": "float32", **scalar},
                "next.done": {"dtype": "bool", **scalar},
                "next.success": {"dtype": "bool", **scalar},
                "executed": {"dtype": "int64", **scalar},
                "source": {"dtype": "string", **scalar},
                "intervened": {"dtype": "bool", **scalar},
                "wall_time": {"dtype": "float64", **scalar},
            }
        )
        return feats

    def _open(self, horizon: int) -> LeRobotWriter:
        if self.writer is None:
            fps = max(1, round(self.control_hz / horizon))
            self.writer = LeRobotWriter(
                self.root, self._features(horizon), fps=fps, robot_type=self.robot_type
            )
        return self.writer

    def record(self, episode: dict[str, Any], kind: str = "train") -> int | None:
        """Commit ``episode``; returns its ``episode_index`` (None when skipped)."""
        meta = episode["meta"]
        steps = len(episode.get("rewards", ()))
        if steps == 0:
            self.skipped += 1
            return None
        actions = np.asarray(episode["actions"], dtype=np.float32)
        horizon = actions.shape[1] if actions.ndim == 3 else 1
        writer = self._open(horizon)
        raw = np.asarray(episode["raw_actions"], dtype=np.float32).reshape(steps, -1)
        actions = actions.reshape(steps, -1)
        states = np.asarray(episode["states"], dtype=np.float32)
        images = episode.get("images") or {}
        times = np.asarray(episode.get("obs_times", np.full(steps + 1, np.nan)), dtype=np.float64)
        intervened = np.asarray(episode.get("intervened", np.zeros(steps, bool)), dtype=bool)
        done = np.asarray(episode["terminated"], bool) | np.asarray(episode["truncated"], bool)
        if meta["aborted"]:
            done[-1] = False
        task = meta.get("instruction") or self.task
        cams = sorted(self.obs_spec.images or {})
        for t in range(steps):
            frame = {
                "observation.state": states[t],
                "action": actions[t],
                "policy.raw_action": raw[t],
                "policy.log_prob": episode["log_prob"][t],
                "policy.value": episode["value"][t],
                "policy.version": episode["versions"][t],
                "next.reward": episode["rewards"][t],
                "next.done": done[t],
                "next.success": episode["success"][t],
                "executed": episode["executed"][t],
                "source": meta["source"],
                "intervened": intervened[t],
                "wall_time": times[t],
            }
            for cam in cams:
                frame[f"observation.images.{cam}"] = images[cam][t]
            writer.add_frame(frame, task=task)
        versions = np.asarray(episode["versions"])
        index = writer.save_episode(
            {
                "source": meta["source"],
                "kind": kind,
                "aborted": bool(meta["aborted"]),
                "abort_reason": meta.get("reason", ""),
                "success": bool(meta["success"]),
                "return": float(meta["return"]),
                "steps": int(meta["steps"]),
                "policy_version_min": int(versions.min()),
                "policy_version_max": int(versions.max()),
                "t_start": float(meta["t_start"]),
                "t_end": float(meta["t_end"]),
                "goal": json.dumps(meta.get("goal")),
                "rejections": json.dumps(meta.get("rejections", {})),
                "final_state": json.dumps(np.asarray(episode["final_state"], dtype=float).tolist()),
            }
        )
        self.recorded += 1
        return index
