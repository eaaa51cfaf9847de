"""Run the demo's phases in order, print progress, write ``report.json``, print the report.

The robot PC comes up in the background while the learner trains in sim (as on a real site, where
the two are different machines). What this demo is *not* yet: the hybrid loop that mixes real and
sim rollouts online in one scheduled training job; that is the orchestrator's issue, and until it
lands this demo trains in sim, then deploys on the arm. It says so in its output and report.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from rlinf_robot.demo import phases

SCOPE = (
    "sim-to-real slice: PPO in MuJoCo sim envs, then the trained policy on the franka-sim arm through "
    "ROS 2 (franka_node, bridge_node) and the ZeroMQ bridge. The hybrid loop (real and sim rollouts "
    "mixed online in one training job) comes with the orchestrator issue."
)


class Clock:
    def __init__(self):
        self.t0 = time.monotonic()

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {text}", flush=True)


def run_demo(out_dir: Path, sim_envs: int, max_env_steps: int, target: float, arm_episodes: int,
             seed: int) -> int:
    import torch

    torch.set_num_threads(1)  # two cores: one for the sim envs + learner, one for the robot PC
    out_dir.mkdir(parents=True, exist_ok=True)
    clock = Clock()
    print(f"rlinf-robot demo - {SCOPE}\n", flush=True)
    robot, endpoint = phases.start_robot_pc(out_dir)
    clock.say(f"robot PC: `rlinf-robot robot up --sim` starting (bridge {endpoint}); learner trains meanwhile")
    report: dict = {"scope": SCOPE, "seed": seed}
    code = 1
    try:
        torch.manual_seed(seed)
        policy, train = phases.train_in_sim(sim_envs, max_env_steps, target, seed, clock.say)
        report["sim_training"] = asdict(train)
        clock.say(f"sim PPO  {'reached' if train.reached else 'did NOT reach'} {target:.2f} training success "
                  f"after {train.env_steps} env steps in {train.wall_s:.1f} s")
        weights = out_dir / "policy.safetensors"
        phases.save_policy(policy, weights)
        policy = phases.load_policy(weights, seed)
        clock.say(f"policy   saved and reloaded from {weights} ({weights.stat().st_size / 1e3:.0f} kB, safetensors)")
        sim_success = phases.evaluate_in_sim(policy, 64, seed + 1000)
        report["sim_eval_success"] = sim_success
        clock.say(f"sim eval success on 64 held-out goals: {sim_success:.2f}")
        pids = robot.wait_ready(300.0)
        clock.say(f"robot PC ready: {', '.join(f'{n} ({p})' for n, p in pids.items())}")
        episodes, bridge = phases.deploy_on_arm(policy, endpoint, arm_episodes, seed, clock.say)
        report["arm_episodes"] = [asdict(e) for e in episodes]
        report["bridge_status"] = bridge
        code = 0 if episodes and train.reached else 1
    except Exception as exc:  # report what happened, then fail loudly
        report["error"] = f"{type(exc).__name__}: {exc}"
        clock.say(f"FAILED: {report['error']}")
        print("---- robot up (last lines) ----\n" + robot.tail(), flush=True)
    finally:
        report["robot_up_exit"] = robot.stop()
        report["wall_s"] = time.monotonic() - clock.t0
        (out_dir / "report.json").write_text(json.dumps(report, indent=2, default=float))
    print_report(report, out_dir / "report.json")
    return code


def print_report(report: dict, path: Path) -> None:
    print("\nreport")
    train = report.get("sim_training")
    if train:
        print(f"  sim training      : PPO MLP, {train['env_steps']} env steps, {train['wall_s']:.1f} s "
              f"({train['steps_per_s']:,.0f} env steps/s), training success {train['train_success']:.2f}")
    if "sim_eval_success" in report:
        print(f"  sim evaluation    : {report['sim_eval_success']:.2f} success on 64 held-out goals")
    eps = report.get("arm_episodes") or []
    if eps:
        wins = sum(e["success"] for e in eps)
        dists = [f"{e['start_distance_mm']:.0f} -> {e['final_distance_mm']:.1f}" for e in eps]
        print(f"  arm (franka-sim)  : {wins}/{len(eps)} episodes within 25 mm; TCP to goal "
              f"{', '.join(dists)} mm; control step p50 "
              f"{np.median([e['step_ms_p50'] for e in eps]):.0f} ms")
        rej: dict[str, int] = {}
        for e in eps:
            for k, v in e["rejections"].items():
                rej[k] = rej.get(k, 0) + v
        firsts = [e["first_within_radius_step"] for e in eps]
        print(f"  steps to reach    : {', '.join(str(f) if f is not None else 'never' for f in firsts)} "
              f"(the sim task allows 60)")
        print(f"  safety rejections : {rej or 'none'}")
    bridge = report.get("bridge_status")
    if bridge:
        lat = bridge["latency_ms"]
        e2e = lat.get("end_to_end", {})
        c = bridge["counters"]
        print(f"  bridge            : {c.get('chunks_received', 0)} chunks, {c.get('steps_applied', 0)} steps applied, "
              f"{c.get('chunks_dropped_stale', 0) + c.get('chunks_dropped_late', 0)} dropped; "
              f"obs->applied p50 {e2e.get('p50', float('nan')):.1f} ms, p99 {e2e.get('p99', float('nan')):.1f} ms")
    if "error" in report:
        print(f"  error             : {report['error']}")
    print(f"  robot up exit     : {report.get('robot_up_exit')}")
    print(f"  wall time         : {report['wall_s']:.1f} s")
    print(f"  full report       : {path}")
