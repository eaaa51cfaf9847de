"""``rlinf-robot demo`` (``make demo``): the main job on the embedded default.

Brings up the robot PC on franka-sim (``robot up --sim``: franka_node, camera_node, bridge_node),
trains a policy with PPO in batched MuJoCo sim envs meanwhile, then deploys it on the arm through
the ZeroMQ bridge and ROS 2, and reports. Until the orchestrator issue lands this is the sim-to-real
slice, labelled as such; the hybrid real+sim training loop replaces it then (see ``demo.run``).
"""

from __future__ import annotations

from pathlib import Path

from rlinf_robot.paths import REPO_ROOT

HELP = "train in MuJoCo sim, then run the policy on the franka-sim arm via ROS 2 + the bridge; report"


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "build" / "demo", help="report and weights folder")
    parser.add_argument("--sim-envs", type=int, default=16, help="batched MuJoCo envs for training")
    parser.add_argument("--max-env-steps", type=int, default=150_000, help="training budget (env steps)")
    parser.add_argument("--target-success", type=float, default=0.95, help="stop training at this success rate")
    parser.add_argument("--arm-episodes", type=int, default=3, help="episodes on the franka-sim arm")
    parser.add_argument("--seed", type=int, default=0)


def run(args) -> int:
    from rlinf_robot.demo.run import run_demo

    return run_demo(args.out, args.sim_envs, args.max_env_steps, args.target_success, args.arm_episodes, args.seed)
