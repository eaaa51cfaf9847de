"""Pipelined rollouts vs sequential vs hybrid placement, against the machine's parallel ceiling.

Workloads (the same everywhere): one ``SimEnvWorker`` stepping N MuJoCo FR3 reach envs
(``sim.make("mujoco/fr3-reach")``, one physics thread) and one ``RolloutWorker`` running an MLP
policy (1024 wide) whose depth is balanced, in the workers themselves, so that inferring the batch
as the pipeline's two micro-batches costs about one batch env step.

- sequential: env steps the whole batch, then the policy infers the whole batch (1 stage).
- pipelined: the batch is cut into 2 micro-batches; env stepping of one overlaps inference of the
  other (``pipeline_stages=2``), env and policy in their own processes (disaggregated plan),
  observations/actions over the policy's ZeroMQ link (also measured over plain Ray calls).
- hybrid: the issue's hybrid placement on 2 logical GPUs (env+rollout share one, an actor trains
  on the other) running the pipelined loop, with a versioned weight sync actor -> rollout between
  rollout epochs (its cost is included).
- ceiling: the same env and inference workloads (inference as the same two micro-batches) run at
  the same time for as long as a rollout takes, with no dependency between them; the ceiling is
  the slower of their two concurrent rates: the most any pipeline could get out of this machine
  right now. What the pipeline loses against it is coordination (transport, waiting, fill/drain,
  and stalls when either process is descheduled); the cost of inferring in micro-batches (smaller
  matmuls) is printed separately.
- pinned: pipelined + ceiling again with each worker pinned to its own core (affinity ``auto``).

Rounds interleave every mode (pipelined and ceiling A-B-B-A) so the shared machine's noise hits all
alike. ours = median over rounds of pipelined / that round's sequential, peer = the same for the
ceiling, ratio = ours / peer.

Last line: RESULT pipeline_speedup ours=<pipelined speedup>x peer=<ceiling speedup>x ratio=... goal=>=0.9
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlinf_robot.scheduler import Cluster, GroupSpec, NodeSpec, ResourceSpec, WorkerGroup, make_plan  # noqa: E402
from rlinf_robot.scheduler.timeline import overlap_seconds, write_chrome_trace  # noqa: E402
from rlinf_robot.scheduler.weight_sync import push_weights  # noqa: E402
from rlinf_robot.workers.rollout import RolloutWorker  # noqa: E402
from rlinf_robot.workers.sim_env import SimEnvWorker  # noqa: E402

ENV_NAME = "mujoco/fr3-reach"
WIDTH = 1024  # compute-bound at these batch sizes (2048-wide layers stream their weights: memory-bound)
START_DEPTH = 4


class BenchRollout(RolloutWorker):
    """A RolloutWorker whose MLP depth can be changed in place (to balance inference vs env cost)."""

    def set_depth(self, depth: int) -> int:
        import policies

        with self._lock:
            self.policy = policies.make(
                "mlp",
                action_spec=self.policy.action_spec,
                state_dim=self.policy.obs_norm.mean.shape[0],
                hidden=(WIDTH,) * depth,
                value_head=False,
            ).eval()
            self.register_offload(policy=self.policy)
        return sum(p.numel() for p in self.policy.parameters())


class BenchActor(BenchRollout):
    """The actor of the hybrid run: owns the policy weights and changes them between epochs."""

    def train_step(self) -> int:
        import torch

        with torch.no_grad():
            for p in self.policy.parameters():
                p.mul_(1.0 + 1e-4)
        return 0


class Setup:
    """One env worker + one rollout worker (+ an actor for hybrid), placed by one plan."""

    def __init__(
        self,
        cluster,
        tag: str,
        mode: str,
        num_envs: int,
        depth: int,
        affinity,
        budget: float,
        gpus: int = 0,
        actor: bool = False,
    ):
        groups = [GroupSpec(f"env_{tag}", 1), GroupSpec(f"rollout_{tag}", 1, gpus_per_rank=1 if gpus else 0)]
        if actor:
            groups.append(GroupSpec(f"actor_{tag}", 1, gpus_per_rank=1))
        node = cluster.nodes()[0]
        spec = ResourceSpec((NodeSpec(node.num_cpus, gpus, node.address, cpu_budget=budget),))
        opts = {"share": [[f"env_{tag}", f"rollout_{tag}"]]} if mode == "hybrid" else {}
        self.plan = make_plan(mode, spec, groups, affinity=affinity, **opts)
        self.reservation = cluster.reserve(self.plan, timeout_s=120)
        self.num_envs = num_envs
        self.groups = []
        env_kw = dict(env=ENV_NAME, num_envs=num_envs, env_kwargs={"num_threads": 1}, num_shards=2, seed=0)
        self.env = self._launch(SimEnvWorker, f"env_{tag}", env_kw)
        es = self.env.call_rank(0, "env_spec").wait_one(120)
        pol = dict(
            action_spec=es["action_spec"],
            state_dim=es["state_dim"],
            policy_kwargs={"hidden": (WIDTH,) * depth, "value_head": False},
        )
        self.policy = self._launch(BenchRollout, f"rollout_{tag}", pol)
        self.actor = self._launch(BenchActor, f"actor_{tag}", {**pol, "seed": 1}) if actor else None
        self.obs = self.env.call_rank(0, "reset").wait_one(60)
        self.version = 0
        self.cpu_ms: dict[str, list[float]] = {"link1": [], "link2": [], "ray2": [], "ceiling": []}

    def _launch(self, cls, name, kwargs):
        group = WorkerGroup.launch(cls, name, self.reservation, kwargs=kwargs)
        self.groups.append(group)
        return group

    def _cpu(self) -> np.ndarray:
        return np.array([g.call_rank(0, "cpu_seconds").wait_one(60) for g in (self.env, self.policy)])

    def set_depth(self, depth: int) -> None:
        for g in self.groups[1:]:
            g.call("set_depth", depth).wait(120)

    def rollout(self, steps: int, stages: int, transport: str = "link") -> dict:
        cpu0 = self._cpu()
        out = self.env.call_rank(
            0, "rollout", self.policy.actors[0], steps, stages, transport=transport
        ).wait_one(600)
        self.cpu_ms[f"{transport}{stages}"].append(1e3 * (self._cpu() - cpu0).sum() / steps)
        return {"sps": out["env_steps"] / out["seconds"], "versions": out["versions"]}

    def hybrid(self, steps: int, epochs: int) -> float:
        """Pipelined rollout epochs with a weight sync (actor -> rollout) before each; steps/s overall."""
        t0 = time.perf_counter()
        for _ in range(epochs):
            self.actor.call_rank(0, "train_step").wait_one(60)
            self.version += 1
            assert push_weights(self.actor, self.policy, self.version) == [self.version]
            out = self.rollout(steps // epochs, 2)
            assert (out["versions"] == self.version).all(), "a rollout step used stale weights"
        return epochs * (steps // epochs) * self.num_envs / (time.perf_counter() - t0)

    def ceiling(self, seconds: float) -> float:
        """Env and inference workloads at once for ``seconds``, no dependency between them: the
        env-steps/s both sustain together (the slower of the two concurrent rates)."""
        cpu0 = self._cpu()
        e = self.env.call_rank(0, "stress", seconds=seconds)
        p = self.policy.call_rank(
            0, "stress", self.obs, stages=2, seconds=seconds
        )  # the pipeline's micro-batches
        e, p = e.wait_one(600), p.wait_one(600)
        cpu = self._cpu() - cpu0
        self.cpu_ms["ceiling"].append(1e3 * (cpu[0] / e["steps"] + cpu[1] / p["batches"]))
        rate = min(e["steps"] / (e["end"] - e["start"]), p["batches"] / (p["end"] - p["start"]))
        return rate * self.num_envs

    def solo(self, seconds: float) -> tuple[float, float, float]:
        """ms per batch, each workload alone: env step, full-batch inference, as 2 half batches."""
        e = self.env.call_rank(0, "stress", seconds=seconds).wait_one(600)
        p1 = self.policy.call_rank(0, "stress", self.obs, stages=1, seconds=seconds).wait_one(600)
        p2 = self.policy.call_rank(0, "stress", self.obs, stages=2, seconds=seconds).wait_one(600)
        return tuple(1e3 * (x["end"] - x["start"]) / x.get("steps", x.get("batches")) for x in (e, p1, p2))

    def trace(self) -> list[dict]:
        return [ev for g in (self.env, self.policy) for ev in g.call_rank(0, "timeline_events").wait_one(60)]

    def close(self) -> None:
        for g in self.groups:
            g.shutdown()
        self.reservation.release()


def analyse(events: list[dict]) -> dict[str, float]:
    """Where the pipelined env worker's time went, from its timeline."""
    env = [e for e in events if e["process"].startswith("env")]
    t0 = min(e["start_ns"] for e in env)
    t1 = max(e["end_ns"] for e in env)
    busy = sum(e["end_ns"] - e["start_ns"] for e in env if e["name"] == "env_step")
    wait = sum(e["end_ns"] - e["start_ns"] for e in env if e["name"] == "wait_actions")
    submit = sum(e["end_ns"] - e["start_ns"] for e in env if e["name"] == "submit")
    infers = [e for e in events if e["name"] == "infer"]
    infer = sum(e["end_ns"] - e["start_ns"] for e in infers)
    steps = [e for e in env if e["name"] == "env_step"]
    wall = t1 - t0
    return {
        "wall_s": wall / 1e9,
        "step_ms": 2 * busy / len(steps) / 1e6,  # per full batch (2 micro-batches)
        "infer_ms": 2 * infer / len(infers) / 1e6,
        "env_busy": busy / wall,
        "env_wait": wait / wall,
        "policy_busy": infer / wall,
        "overlap": overlap_seconds(events, "env_step", "infer") / (wall / 1e9),
        "submit": submit / wall,
        "other": 1.0 - (busy + wait + submit) / wall,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=128)
    ap.add_argument("--steps", type=int, default=40, help="env steps per measured rollout")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--trace", default="build/bench/pipeline_trace.json")
    args = ap.parse_args()

    cluster = Cluster(num_cpus=None, num_gpus=2, namespace="bench_pipeline", log_to_driver=False)
    third = round(cluster.nodes()[0].num_cpus / 3, 4)  # three setups side by side, idle when not measured
    setups: dict[str, Setup] = {}
    try:
        setups["off"] = Setup(cluster, "off", "disaggregated", args.envs, START_DEPTH, "off", third)
        setups["pin"] = Setup(cluster, "pin", "disaggregated", args.envs, START_DEPTH, "auto", third)
        setups["hyb"] = Setup(
            cluster, "hyb", "hybrid", args.envs, START_DEPTH, "off", third, gpus=2, actor=True
        )
        print(setups["pin"].plan.describe())
        print(setups["hyb"].plan.describe())
        off, pin = setups["off"], setups["pin"]
        depth = START_DEPTH
        for _ in range(2):  # balance: inference (as 2 micro-batches) ~ one env step, measured in the workers
            env_ms, _, half_ms = off.solo(1.0)
            depth = max(1, round(depth * env_ms / half_ms))
            for st in setups.values():
                st.set_depth(depth)
        for st in setups.values():  # warm up, then forget the warm-up's CPU time
            st.rollout(3, 2)
            st.cpu_ms = {k: [] for k in st.cpu_ms}
        env_solo, inf_solo, inf_half = off.solo(1.5)
        print(
            f"balanced: MLP {depth}x{WIDTH}; alone: env step {env_solo:.1f} ms, inference {inf_half:.1f} ms "
            f"as 2 micro-batches ({inf_solo:.1f} ms as one batch) for {args.envs} envs"
        )
        keys = ("seq", "pipe", "ceil", "pipe_ray", "pin_pipe", "pin_ceil", "hybrid")
        rows: dict[str, list[float]] = {k: [] for k in keys}
        ratios, pin_ratios, speedups, ceilings = [], [], [], []
        for r in range(args.rounds):
            # Pipelined and ceiling in A-B-B-A order: a load change during the round hits both alike.
            p1 = off.rollout(args.steps, 2)
            window = args.steps / (p1["sps"] / args.envs)  # the ceiling runs as long as a rollout
            c1, c2 = off.ceiling(window), off.ceiling(window)
            p2 = off.rollout(args.steps, 2)
            rows["pipe"] += [p1["sps"], p2["sps"]]
            rows["ceil"] += [c1, c2]
            rows["seq"].append(off.rollout(args.steps, 1)["sps"])
            rows["pipe_ray"].append(off.rollout(args.steps, 2, transport="ray")["sps"])
            rows["pin_pipe"].append(pin.rollout(args.steps, 2)["sps"])
            rows["pin_ceil"].append(pin.ceiling(window))
            rows["hybrid"].append(setups["hyb"].hybrid(args.steps, epochs=3))
            ratios.append((p1["sps"] + p2["sps"]) / (c1 + c2))
            # Speedups against the same round's sequential run (pairs cancel slow load drifts).
            speedups.append((p1["sps"] + p2["sps"]) / 2 / rows["seq"][-1])
            ceilings.append((c1 + c2) / 2 / rows["seq"][-1])
            pin_ratios.append(rows["pin_pipe"][-1] / rows["pin_ceil"][-1])
            print(
                f"round {r}: "
                + "  ".join(f"{k}={v[-1]:.0f}" for k, v in rows.items())
                + f" env-steps/s; pipelined/ceiling {ratios[-1]:.2f}"
            )
        cpu = {k: statistics.median(v) for k, v in off.cpu_ms.items() if v}
        off.trace()  # drop earlier spans; trace one clean pipelined run
        off.rollout(args.steps, 2)
        events = off.trace()
        path = write_chrome_trace(args.trace, events)
        why = analyse(events)
    finally:
        for st in setups.values():
            st.close()
        cluster.shutdown()

    med = {k: statistics.median(v) for k, v in rows.items()}
    speedup, ceiling = statistics.median(speedups), statistics.median(ceilings)
    ratio = speedup / ceiling
    print(
        f"\nideal 2-core speedup for these costs: {(env_solo + inf_solo) / max(env_solo, inf_half):.2f}x; "
        f"inferring in 2 micro-batches costs {inf_half / inf_solo - 1:+.0%} vs one batch"
    )
    print("median env-steps/s: " + ", ".join(f"{k} {v:.0f}" for k, v in med.items()))
    print(
        f"pipelined speedup {speedup:.2f}x, ceiling {ceiling:.2f}x, hybrid {med['hybrid'] / med['seq']:.2f}x "
        f"(incl. a weight sync every {args.steps // 3} steps)"
    )
    print(
        f"per-round ratio pipelined/ceiling: {', '.join(f'{x:.2f}' for x in ratios)} (median "
        f"{statistics.median(ratios):.2f}; ratio of the median throughputs {med['pipe'] / med['ceil']:.2f})"
    )
    print(
        f"pinned (affinity=auto): pipelined {med['pin_pipe']:.0f} vs unpinned {med['pipe']:.0f} env-steps/s "
        f"({med['pin_pipe'] / med['pipe'] - 1:+.1%}); ratio pinned {med['pin_pipe'] / med['pin_ceil']:.2f} "
        f"vs unpinned {ratio:.2f}; per round {', '.join(f'{x:.2f}' for x in pin_ratios)}"
    )
    print(
        f"pipelined over Ray actor calls instead of the link: {med['pipe_ray']:.0f} env-steps/s "
        f"(ratio {med['pipe_ray'] / med['ceil']:.2f})"
    )
    print(
        f"CPU per batch step (env + policy processes; not inflated by other load like wall time): ceiling "
        f"{cpu['ceiling']:.1f} ms, pipelined {cpu['link2']:.1f} ms over the link / {cpu['ray2']:.1f} ms over "
        f"Ray calls, sequential {cpu['link1']:.1f} ms"
    )
    print(
        f"inside the pipelined run: env step {why['step_ms']:.1f} ms and inference {why['infer_ms']:.1f} ms per "
        f"batch (alone: {env_solo:.1f} / {inf_half:.1f} ms); policy busy {why['policy_busy']:.0%} of the time"
    )
    print(
        f"pipelined env worker (trace {path}): stepping {why['env_busy']:.0%}, waiting for actions "
        f"{why['env_wait']:.0%}, submitting {why['submit']:.0%}, other {why['other']:.0%}; env and policy "
        f"computing at the same time {why['overlap']:.0%} of the wall time"
    )
    print(f"RESULT pipeline_speedup ours={speedup:.2f}x peer={ceiling:.2f}x ratio={ratio:.2f} goal=>=0.9")
    return 0


if __name__ == "__main__":
    sys.exit(main())
