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
  on the other) running on-policy PPO: each epoch a pipelined rollout (sampled actions, collected),
  one real training step of the actor on it (``ActorTrainer`` with the ``ppo`` objective on the PPO
  batch built from the rollout: old log-probs, values, GAE, normalized advantages), then a versioned
  weight sync actor -> rollout. Reported: the rollouts alone and the whole loop (training and sync
  included; on this CPU machine the actor's "GPU" is the same two cores, so training is not free).
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
from rlinf_robot.scheduler.worker import Worker  # noqa: E402
from rlinf_robot.workers.rollout import RolloutWorker  # noqa: E402
from rlinf_robot.workers.sim_env import SimEnvWorker  # noqa: E402

ENV_NAME = "mujoco/fr3-reach"
WIDTH = 1024  # compute-bound at these batch sizes (2048-wide layers stream their weights: memory-bound)
START_DEPTH = 4
#: PPO of the hybrid run's actor (the PPO loop's defaults; one optimizer step per rollout epoch).
PPO = {"lr": 3e-4, "max_grad_norm": 0.5, "clip": 0.2, "vf_coef": 0.5, "gamma": 0.99, "lam": 0.95}


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


class _PolicyWeights:
    """What the actor publishes: the policy without its critic, i.e. exactly the rollout policy's
    state dict (rollouts need no values: the actor recomputes them, with the old log-probs)."""

    def __init__(self, policy):
        self.policy = policy

    def state_dict(self) -> dict:
        return {k: v for k, v in self.policy.state_dict().items() if not k.startswith("critic.")}


class PPOActor(Worker):
    """The actor of the hybrid run: the same MLP as the rollout worker plus a critic, trained by
    ``ActorTrainer`` with the ``ppo`` objective, one optimizer step per collected rollout.

    From a rollout (states [T+1, N, S], env-unit actions [T, N, H, A], rewards [T, N]) it builds the
    PPO batch as ``loops/ppo_loop.py`` does: old log-probs and values from its weights (the ones the
    rollout acted with: the driver checks the version), GAE(gamma, lambda) bootstrapped from the
    last state, advantages normalized over the batch. The collected rollout carries no episode
    ends; a rollout of ``steps // epochs`` ticks from a reset ends an episode only on an early
    success (rare for this untrained policy), so ``dones`` are 0.
    """

    def __init__(self, action_spec: dict, state_dim: int, policy_kwargs: dict, seed: int = 1):
        super().__init__()
        self._args = (action_spec, int(state_dim), dict(policy_kwargs), int(seed))
        self._build(policy_kwargs["hidden"])

    def _build(self, hidden) -> None:
        import torch

        import policies
        from rlinf_robot.workers.actor import ActorTrainer, TrainerConfig
        from rlinf_robot.workers.sim_env import action_spec_from_dict

        spec, state_dim, kwargs, seed = self._args
        torch.manual_seed(seed)
        kwargs = {**kwargs, "hidden": tuple(hidden), "value_head": True}
        self.policy = policies.make(
            "mlp", action_spec=action_spec_from_dict(spec), state_dim=state_dim, **kwargs
        )
        self.trainer = ActorTrainer(
            self.policy,
            "ppo",
            TrainerConfig(lr=PPO["lr"], max_grad_norm=PPO["max_grad_norm"]),
            {"clip": PPO["clip"], "vf_coef": PPO["vf_coef"]},
            device=self.device,
        )

    def set_depth(self, depth: int) -> int:
        self._build((WIDTH,) * depth)
        return sum(p.numel() for p in self.policy.parameters())

    def weights_module(self):
        return _PolicyWeights(self.policy)

    def train(self, rollout: dict) -> dict[str, float]:
        import torch

        from rlinf_robot.algorithms.ppo import compute_gae, normalize_advantages

        with self.timeline.span("train"):
            states = torch.as_tensor(rollout["states"])  # [T+1, N, S]
            T, N = rollout["rewards"].shape
            obs = {"state": states[:-1].reshape(T * N, -1)}
            raw = self.policy.normalize_actions(rollout["actions"]).reshape(
                T * N, *rollout["actions"].shape[2:]
            )
            with torch.no_grad():
                old = self.policy({"obs": obs, "raw_actions": raw})
                next_value = self.policy.value({"state": states[-1]})
            values = old["value"].reshape(T, N)
            rewards = torch.as_tensor(rollout["rewards"], dtype=torch.float32)
            adv, returns = compute_gae(
                rewards, values, torch.zeros_like(rewards), next_value, PPO["gamma"], PPO["lam"]
            )
            batch = {
                "obs": obs,
                "raw_actions": raw,
                "log_prob": old["log_prob"],
                "value": old["value"],
                "advantages": normalize_advantages(adv.flatten()),
                "returns": returns.flatten(),
            }
            stats = self.trainer.train_step(batch)
            self.policy.update_obs_norm(states.reshape(-1, states.shape[-1]))  # as the PPO loop does
        return stats


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
        self.actor = self._launch(PPOActor, f"actor_{tag}", {**pol, "seed": 1}) if actor else None
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
        if self.actor is not None:  # the rollout acts with the actor's (rebuilt) weights
            self.sync()

    def rollout(self, steps: int, stages: int, transport: str = "link", **kw) -> dict:
        cpu0 = self._cpu()
        out = self.env.call_rank(
            0, "rollout", self.policy.actors[0], steps, stages, transport=transport, **kw
        ).wait_one(600)
        self.cpu_ms[f"{transport}{stages}"].append(1e3 * (self._cpu() - cpu0).sum() / steps)
        return {**out, "sps": out["env_steps"] / out["seconds"]}

    def sync(self) -> float:
        """Weight sync actor -> rollout as the next version; returns its seconds."""
        t = time.perf_counter()
        self.version += 1
        assert push_weights(self.actor, self.policy, self.version) == [self.version]
        return time.perf_counter() - t

    def hybrid(self, steps: int, epochs: int) -> dict[str, float]:
        """On-policy PPO epochs: a pipelined rollout (sampled actions, collected), one PPO training
        step on the actor from it, a weight sync actor -> rollout. Env-steps/s of the whole loop and
        of its rollouts alone, and seconds per epoch of each part."""
        per = steps // epochs
        spent = {"rollout": 0.0, "train": 0.0, "sync": 0.0}
        t0 = time.perf_counter()
        for _ in range(epochs):
            t = time.perf_counter()
            out = self.rollout(per, 2, collect=True, deterministic=False)
            spent["rollout"] += time.perf_counter() - t
            assert (out["versions"] == self.version).all(), "a rollout step used stale weights"
            t = time.perf_counter()
            data = {k: out[k] for k in ("states", "actions", "rewards")}
            stats = self.actor.call_rank(0, "train", data).wait_one(600)
            spent["train"] += time.perf_counter() - t
            spent["sync"] += self.sync()
        env_steps = epochs * per * self.num_envs
        return {
            "sps": env_steps / (time.perf_counter() - t0),
            "rollout_sps": env_steps / spent["rollout"],
            **{f"{k}_s": v / epochs for k, v in spent.items()},
            "batch": per * self.num_envs,
            "loss": stats["loss"],
        }

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
        setups["hyb"].hybrid(3, 1)
        env_solo, inf_solo, inf_half = off.solo(1.5)
        print(
            f"balanced: MLP {depth}x{WIDTH}; alone: env step {env_solo:.1f} ms, inference {inf_half:.1f} ms "
            f"as 2 micro-batches ({inf_solo:.1f} ms as one batch) for {args.envs} envs"
        )
        keys = ("seq", "pipe", "ceil", "pipe_ray", "pin_pipe", "pin_ceil", "hybrid")
        rows: dict[str, list[float]] = {k: [] for k in keys}
        hybrids: list[dict[str, float]] = []
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
            hybrids.append(setups["hyb"].hybrid(args.steps, epochs=3))
            rows["hybrid"].append(hybrids[-1]["sps"])
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
    hyb = {k: statistics.median(h[k] for h in hybrids) for k in hybrids[0]}
    print(
        f"pipelined speedup {speedup:.2f}x, ceiling {ceiling:.2f}x; hybrid: rollouts {hyb['rollout_sps']:.0f} "
        f"env-steps/s ({hyb['rollout_sps'] / med['seq']:.2f}x), the whole loop {med['hybrid']:.0f} "
        f"({med['hybrid'] / med['seq']:.2f}x) with, every {args.steps // 3} steps, one PPO training step on "
        f"{hyb['batch']:.0f} samples ({1e3 * hyb['train_s']:.0f} ms incl. the batch's transfer and old "
        f"log-probs/values) and a weight sync ({1e3 * hyb['sync_s']:.0f} ms); rollout "
        f"{1e3 * hyb['rollout_s']:.0f} ms per epoch; last PPO loss {hybrids[-1]['loss']:.3f}"
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
