"""Replay a recorded real episode in the sim twin: how far does the simulator drift from the arm?

A real-to-sim check at the level the policy acts on. The episode's first observation gives the
start (arm joints, gripper width, goal, object); the twin (the job's training sim, built from the
run's ``config.yaml`` with domain randomization off) starts there (``MujocoFR3Env.reset_to``) and
executes the same action chunks, each cut to the steps the arm executed; after every chunk its state
is compared with the state the arm reported next. The residual says how much of what the arm did
the sim reproduces open loop: per step, the joint error (rad) and the TCP error (m).

The dataset is the LeRobot v3.0 layout ``RealEnvWorker`` records (``rlinf_robot.data.recorder``),
read with pyarrow; nothing here touches the arm.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlinf_robot.data.lerobot_writer import DATA_PATH, INFO_PATH, _episode_rows
from rlinf_robot.envs.spec import ROBOT_STATE_FIELDS

_OFFSET = {name: sum(w for _, w in ROBOT_STATE_FIELDS[:i]) for i, (name, _) in enumerate(ROBOT_STATE_FIELDS)}
Q, TCP, WIDTH = (
    slice(_OFFSET["joint_pos"], _OFFSET["joint_pos"] + 7),
    _OFFSET["tcp_pos"],
    _OFFSET["gripper_width"],
)


@dataclass
class ReplayResult:
    episode: int
    steps: int  # policy decisions (chunks) replayed
    joint_err: np.ndarray  # [steps, 7] |q_sim - q_arm| after each chunk, rad
    tcp_err: np.ndarray  # [steps] |tcp_sim - tcp_arm| after each chunk, m
    aborted: bool

    @property
    def joint_rms(self) -> np.ndarray:
        return np.sqrt(np.mean(self.joint_err**2, axis=0))

    def summary(self) -> dict[str, Any]:
        return {
            "episode": self.episode,
            "steps": self.steps,
            "aborted": self.aborted,
            "joint_rms_rad": float(np.sqrt(np.mean(self.joint_err**2))),
            "joint_rms_per_joint_rad": self.joint_rms.tolist(),
            "tcp_mean_mm": float(1e3 * self.tcp_err.mean()),
            "tcp_max_mm": float(1e3 * self.tcp_err.max()),
            "tcp_final_mm": float(1e3 * self.tcp_err[-1]),
        }


class RecordedEpisodes:
    """The committed episodes of one recorded dataset (``<run>/datasets/<robot>``)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        info_path = self.root / INFO_PATH
        if not info_path.exists():
            raise FileNotFoundError(f"{self.root} is not a recorded dataset (no {INFO_PATH})")
        self.info = json.loads(info_path.read_text())
        self.rows = _episode_rows(self.root, self.info["total_episodes"])

    def __len__(self) -> int:
        return len(self.rows)

    def frames(self, episode: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(the episode's ``meta/episodes`` row, its per-frame columns as arrays)."""
        import pyarrow.parquet as pq

        rows = [r for r in self.rows if r["episode_index"] == episode]
        if not rows:
            raise IndexError(f"{self.root} has no committed episode {episode} (it has {len(self.rows)})")
        row = rows[0]
        path = self.root / DATA_PATH.format(
            chunk_index=row["data/chunk_index"], file_index=row["data/file_index"]
        )
        table = pq.read_table(path, columns=["episode_index", "observation.state", "action", "executed"])
        cols = table.to_pydict()
        keep = [i for i, e in enumerate(cols["episode_index"]) if e == episode]
        return row, {
            "state": np.asarray([cols["observation.state"][i] for i in keep], np.float64),
            "action": np.asarray([cols["action"][i] for i in keep], np.float32),
            "executed": np.asarray([cols["executed"][i] for i in keep], np.int64).reshape(-1),
        }


def layout_of(state: np.ndarray, goal: Any, state_fields) -> Any:
    """The episode start a recorded first state describes (goal from the episode row)."""
    from rlinf_robot.envs.tasks import Layout

    offset, fields = 0, {}
    for name, width in state_fields:
        fields[name] = state[offset : offset + width]
        offset += width
    obj = fields.get("obj_pos")
    yaw = 0.0
    if "obj_quat" in fields:  # [w x y z], a block resting flat: its yaw
        w, x, y, z = fields["obj_quat"]
        yaw = float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))
    goal = np.asarray(goal if goal is not None else fields["goal_pos"], np.float64)
    return Layout(
        arm_q=np.asarray(state[Q], np.float64),
        gripper_width=float(state[WIDTH]),
        goal=goal,
        obj_pos=None if obj is None else np.asarray(obj, np.float64),
        obj_yaw=yaw,
    )


def replay_episode(env, row: dict[str, Any], frames: dict[str, np.ndarray]) -> ReplayResult:
    """Run one recorded episode's chunks in ``env`` (one env, the twin) from its recorded start."""
    states, actions, executed = frames["state"], frames["action"], frames["executed"]
    steps = len(states)
    width = int(env.action_spec.shape[0])
    if actions.shape[1] % width:
        raise ValueError(f"recorded actions of width {actions.shape[1]} are not chunks of the twin's {width}")
    horizon = actions.shape[1] // width
    final = np.asarray(json.loads(row["final_state"]), np.float64)
    after = np.concatenate([states[1:], final[None]], 0)  # the arm's state after each chunk
    obs = env.reset_to(
        [layout_of(states[0], json.loads(row.get("goal") or "null"), env.obs_spec.state_fields)]
    )
    sim = obs["state"][0]
    joint_err = np.zeros((steps, 7))
    tcp_err = np.zeros(steps)
    for t in range(steps):
        k = int(executed[t])
        if k >= 1:  # a refused chunk (nothing executed) left the arm where it was: the twin too
            obs, _, _, _, info = env.chunk_step(actions[t].reshape(horizon, width)[:k][None])
            # the state the chunk ended in, also when the twin's episode ended and it reset
            sim = info["final_state"][0] if info["done"][0] else obs["state"][0]
        joint_err[t] = np.abs(sim[Q] - after[t][Q])
        tcp_err[t] = float(np.linalg.norm(sim[TCP : TCP + 3] - after[t][TCP : TCP + 3]))
    return ReplayResult(int(row["episode_index"]), steps, joint_err, tcp_err, bool(row.get("aborted", False)))


def sim_twin(run_dir: str | Path):
    """One env of the run's training sim (``config.yaml``), domain randomization off."""
    import sim
    from rlinf_robot.orchestrator.config import from_yaml

    cfg = from_yaml(Path(run_dir) / "config.yaml")
    kwargs = {**cfg.sim_make_kwargs(), "randomization": None, "seed": cfg.seed}
    return sim.make(cfg.sim_env, num_envs=1, **kwargs)
