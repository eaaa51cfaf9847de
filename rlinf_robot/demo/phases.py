"""The demo's phases, each a function returning what it measured (the report is built from these).

1. ``start_robot_pc`` — ``robot up --sim``: franka-sim (the FR3 in MuJoCo behind the real libfranka
   protocol), franka_node on franky, camera_node, bridge_node (ZeroMQ, loopback).
2. ``train_in_sim`` — PPO on ``mujoco/fr3-reach`` (batched MuJoCo envs), until a success target.
3. ``save_policy`` / ``load_policy`` — the weights go through a safetensors file, as a learner job
   hands them to a robot PC; nothing pickled.
4. ``evaluate_in_sim`` — held-out goals in sim.
5. ``deploy_on_arm`` — the same policy drives the "real" arm: ``RealRobotEnv`` over a
   ``BridgeClient`` -> bridge_node -> franka_node -> franky -> franka-sim; goals from the sim task's
   range, success judged from the arm's own TCP pose.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from rlinf_robot.paths import REPO_ROOT
from rlinf_robot.robot.bringup.process import RobotUpProcess

ENV = "mujoco/fr3-reach"
SIM_CONFIG = REPO_ROOT / "launch" / "config" / "sim_robot.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_robot_pc(out_dir: Path) -> tuple[RobotUpProcess, str]:
    """``robot up --sim`` with the shipped sim YAML, the bridge on a free loopback port."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    raw = yaml.safe_load(SIM_CONFIG.read_text())
    for key, block in raw.items():
        if key.rstrip("/").endswith("bridge_node"):
            block["ros__parameters"]["endpoint"] = endpoint
    config = out_dir / "sim_robot.yaml"
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    return RobotUpProcess("--sim", "--config", str(config), "--ready-timeout", "300"), endpoint


def make_policy(env):
    import policies

    return policies.make("mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, hidden=(64, 64))


@dataclass
class TrainReport:
    env_steps: int
    wall_s: float
    train_success: float
    reached: bool
    steps_per_s: float
    curve: list[tuple[int, float]] = field(default_factory=list)  # (env steps, success rate)


def train_in_sim(
    num_envs: int, max_env_steps: int, target: float, seed: int, progress: Callable[[str], None]
) -> tuple[object, TrainReport]:
    import sim
    from rlinf_robot.algorithms.loops.ppo_loop import PPOConfig, train_ppo

    # Full 3 s episodes: the dense reward is in [0, 1] per step, so ending on success would make
    # reaching cost future reward (PPO then learns to hover outside the radius).
    env = sim.make(ENV, num_envs=num_envs, terminate_on_success=False, seed=seed)
    policy = make_policy(env)
    cfg = PPOConfig(num_steps=16, minibatch_size=256, epochs=10, lr=1e-3, gamma=0.95)
    curve: list[tuple[int, float]] = []
    last_print = [-1e9]

    def log(stats: dict) -> None:
        curve.append((int(stats["env_steps"]), float(stats["success_rate"])))
        if stats["wall_s"] - last_print[0] < 2.0 and stats["success_rate"] < target:
            return  # a progress line every 2 s, and the last one
        last_print[0] = stats["wall_s"]
        rate = stats["env_steps"] / max(stats["wall_s"], 1e-9)
        progress(
            f"sim PPO  {stats['env_steps']:>7} env steps  success(last 32 episodes) {stats['success_rate']:.2f}  "
            f"{rate:,.0f} steps/s  value loss {stats['value_loss']:.3f}  entropy {stats['entropy']:.2f}"
        )

    try:
        res = train_ppo(env, policy, cfg, max_env_steps=max_env_steps, seed=seed, target_success=target,
                        window=32, log=log)
    finally:
        env.close()
    return policy, TrainReport(res.env_steps, res.wall_s, res.success_rate, res.reached,
                               res.env_steps / max(res.wall_s, 1e-9), curve)


def save_policy(policy, path: Path) -> None:
    from safetensors.torch import save_file

    save_file({k: v.detach().contiguous() for k, v in policy.state_dict().items()}, str(path))


def load_policy(path: Path, seed: int):
    """A fresh policy of the same architecture with the saved weights (the robot-side load)."""
    from safetensors.torch import load_file

    import sim

    env = sim.make(ENV, num_envs=1, terminate_on_success=False, seed=seed)
    try:
        policy = make_policy(env)
    finally:
        env.close()
    policy.load_state_dict(load_file(str(path)))
    policy.eval()
    return policy


def evaluate_in_sim(policy, episodes: int, seed: int) -> float:
    import sim
    from rlinf_robot.algorithms.loops.evaluate import evaluate

    env = sim.make(ENV, num_envs=16, terminate_on_success=False, seed=seed)
    try:
        return evaluate(env, policy, episodes, seed=seed)
    finally:
        env.close()


@dataclass
class ArmEpisode:
    goal: list[float]
    start_distance_mm: float
    final_distance_mm: float
    success: bool
    first_within_radius_step: int | None  # the sim episode is 60 steps (3 s at 20 Hz)
    steps: int
    wall_s: float
    step_ms_p50: float
    rejections: dict[str, int]


def deploy_on_arm(
    policy, endpoint: str, episodes: int, seed: int, progress: Callable[[str], None], max_steps: int = 200
) -> tuple[list[ArmEpisode], dict]:
    import torch
    from sim.mujoco.tasks.reach import GOAL_HIGH, GOAL_LOW, SUCCESS_RADIUS

    from rlinf_robot.algorithms.loops.rollout import env_step
    from rlinf_robot.envs.real import RealEnvConfig, RealRobotEnv

    cfg = RealEnvConfig(
        action_mode="ee_delta", control_hz=20.0, task="reach",
        task_args={"goal_low": GOAL_LOW.tolist(), "goal_high": GOAL_HIGH.tolist(),
                   "success_radius": SUCCESS_RADIUS},
        max_episode_steps=max_steps, terminate_on_success=False, auto_reset=False, seed=seed,
    )  # the sim task's 20 Hz, goal box and success radius; more time than its 3 s (see the report)
    env = RealRobotEnv.connect([endpoint], config=cfg)
    results: list[ArmEpisode] = []
    try:
        for ep in range(episodes):
            obs = env.reset()
            goal = env.task.goals[0].tolist()
            to_goal = env.obs_spec.state_slices()["goal_minus_tcp"]
            start = float(np.linalg.norm(obs["state"][0, to_goal]))
            progress(f"arm      episode {ep + 1}/{episodes}: home reached; goal {np.round(goal, 3).tolist()} m")
            t0, step_ms, rejections, first = time.monotonic(), [], {}, None
            while True:
                with torch.no_grad():
                    actions = policy.predict_action_batch(obs, deterministic=True).actions
                obs, _, term, trunc, info = env_step(env, actions)
                step_ms.extend(np.atleast_1d(info["latency_ms"]["step"]).tolist())
                for r in info["rejections"][0]:
                    rejections[r["code"]] = rejections.get(r["code"], 0) + 1
                if first is None and info["success"][0]:
                    first = int(env.steps[0])
                if term[0] or trunc[0]:
                    break
            final = info["final_state"][0]  # the arm's own state when the episode ended
            dist = float(np.linalg.norm(final[to_goal]))
            results.append(ArmEpisode(
                goal, start * 1e3, dist * 1e3, bool(info["success"][0]), first, int(env.steps[0]),
                time.monotonic() - t0, float(np.median(step_ms)), rejections,
            ))
            progress(f"arm      episode {ep + 1}/{episodes}: {'SUCCESS' if results[-1].success else 'miss'}, "
                     f"TCP {start * 1e3:.0f} -> {dist * 1e3:.1f} mm from the goal after {results[-1].steps} steps "
                     f"({results[-1].wall_s:.1f} s); first within the radius at step {first}")
        status = env.status()[0]
    finally:
        env.close()
    bridge = {"state": status.state, "counters": dict(status.counters),
              "latency_ms": {k: {p: round(v, 3) for p, v in pct.items()} for k, pct in status.latency_ms.items()}}
    return results, bridge
