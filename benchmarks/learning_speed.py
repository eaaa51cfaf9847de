"""Wall time and env steps to 95% training success on mujoco/fr3-reach: the `train` job's default
recipe through the project's scheduler vs the faster of Stable-Baselines3 PPO and SAC.

Ours is `rlinf-robot train mode=sim_only` as shipped: SFT then RL. The driver records 32 episodes
of the task's scripted expert in the training sim, the actor clones them (the job's warm start,
rlinf_robot/orchestrator/warm_start.py), then PPO (the mlp policy, sim envs in a SimEnvWorker
stepped in pipelined stages against a RolloutWorker, updates in an ActorWorker, on a local Ray
cluster) with `budget.target_success=0.95`: training stops once 95% of the last 32 finished
training episodes succeeded. The peers learn on the same batched MuJoCo env with the job's own
env options (SB3 through a VecEnv adapter, no per-env Python wrappers), the same number of envs, a
64x64 MLP, state normalization, actions normalized to [-1, 1], and the same stopping rule; SB3's
PPO and SAC have no demonstration path, so they learn from scratch. Then each trained policy is
evaluated deterministically on 64 held-out episodes. Sequential runs, one torch thread for SB3.
Ours is also run with `warm_start.demos=0` (PPO from scratch) and printed for reference.

Ours is timed from the start of its warm start (recording the demonstrations included; the
cluster start-up before it is printed separately); each peer from `model.learn`. The split of
ours (warm start; rollout = env stepping and inference, pipelined; update; weight sync; the rest)
and the peers' time inside `env.step` are printed so the ratio's reason is visible, and the env
steps of ours count the expert's.

Prints every side and ends with: RESULT learning_speed ours=<s> peer=<s> ratio=<ours/peer> goal=<=0.5
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("WANDB_MODE", "offline")

ENV = "mujoco/fr3-reach"
TARGET, WINDOW = 0.95, 32
HP = dict(num_envs=16, num_steps=16, minibatch=256, epochs=10, lr=1e-3, gamma=0.95, lam=0.95, clip=0.2)
HP.update(target_kl=0.02, log_std=-0.5)


def job_env_kwargs() -> dict:
    """The env options the train job gives its sim envs (action mode, rate, episode rule)."""
    from rlinf_robot.orchestrator.config import compose

    return compose(["mode=sim_only"]).sim_make_kwargs()


def timed(env):
    """Count the seconds spent inside ``env.step`` (the same env class serves both learners)."""
    env.step_seconds = 0.0
    step = env.step

    def wrapper(actions):
        t0 = time.perf_counter()
        try:
            return step(actions)
        finally:
            env.step_seconds += time.perf_counter() - t0

    env.step = wrapper
    return env


def run_ours(seed: int, budget_s: float, *extra: str) -> dict:
    import json

    from rlinf_robot.orchestrator.config import compose
    from rlinf_robot.orchestrator.job import TrainJob

    runs = Path(tempfile.mkdtemp(prefix="learning-speed-"))
    cfg = compose(
        [
            "mode=sim_only",
            f"seed={seed}",
            f"budget.target_success={TARGET}",
            f"budget.pretrain_window={WINDOW}",
            f"budget.wall_s={budget_s}",
            "eval.sim_episodes=64",
            f"run.dir={runs}",
            "run.id=ours",
            "run.progress=false",
            "run.wandb=disabled",
            *extra,
        ]
    )
    res = TrainJob(cfg).run()
    rows = [json.loads(x) for x in (res.run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    warm = next((r for r in rows if r.get("phase") == "warm_start"), None)
    rows = [r for r in rows if "update_s" in r]
    # the clock starts where the job's own work does: the warm start (recording the expert's
    # demonstrations and cloning them), else the first update
    startup = warm["wall_s"] - warm["warm_start_s"] if warm else rows[0]["wall_s"] - rows[0]["update_s"]
    last = rows[-1]
    split = {k: sum(r[k] for r in rows) for k in ("rollout_s", "train_s", "sync_s")}
    split["warm_start_s"] = warm["warm_start_s"] if warm else 0.0
    wall = last["wall_s"] - startup
    inside = {
        k: sum(r.get(k, 0.0) for r in rows)
        for k in ("rollout_env_s", "rollout_infer_s", "rollout_transport_s")
    }
    return {
        "wall_s": wall,
        "startup_s": startup,
        "split": {**split, "other_s": wall - sum(split.values())},
        "rollout": inside,
        "env_steps": last[f"sim:{cfg.task.name}/env_steps"],
        "demo_env_steps": warm["warm_start/demo_env_steps"] if warm else 0,
        "demo_record_s": warm["warm_start/record_s"] if warm else 0.0,
        "reached": (last[f"sim:{cfg.task.name}/success"] or 0.0) >= TARGET,
        "eval": res.eval["sim"]["rate"],
        "updates": last["update"],
    }


def run_sb3(algo: str, seed: int, max_steps: int, budget_s: float) -> dict:
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO, SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecEnv, VecNormalize

    import sim

    class BatchedVecEnv(VecEnv):
        """Our batched env as an SB3 VecEnv: one batched step, actions mapped from [-1, 1]."""

        def __init__(self, env):
            self.env = env
            n_state = env.obs_spec.state_shape[0]
            obs_space = gym.spaces.Box(-np.inf, np.inf, (n_state,), np.float32)
            act_space = gym.spaces.Box(-1.0, 1.0, env.action_spec.shape, np.float32)
            super().__init__(env.num_envs, obs_space, act_space)
            spec = env.action_spec
            self._center, self._half = (spec.high + spec.low) / 2, (spec.high - spec.low) / 2
            self._actions = None

        def reset(self):
            return self.env.reset(seed=self._seeds[0] if self._seeds else None)["state"]

        def seed(self, seed=None):
            self._seeds = [seed] if seed is not None else []
            return [seed] * self.num_envs

        _seeds: list = []

        def step_async(self, actions):
            self._actions = self._center + self._half * np.clip(actions, -1.0, 1.0)

        def step_wait(self):
            obs, rew, term, trunc, info = self.env.step(self._actions.astype(np.float32))
            done = term | trunc
            infos = [{} for _ in range(self.num_envs)]
            for i in np.flatnonzero(done):
                infos[i] = {
                    "terminal_observation": info["final_state"][i],
                    "TimeLimit.truncated": bool(trunc[i]),
                    "is_success": bool(info["success"][i]),
                }
            return obs["state"], rew.astype(np.float32), done, infos

        def close(self):
            self.env.close()

        def get_attr(self, name, indices=None):
            return [getattr(self, name, None)] * self.num_envs

        def set_attr(self, name, value, indices=None):
            setattr(self, name, value)

        def env_method(self, method, *args, indices=None, **kwargs):
            return [None] * self.num_envs

        def env_is_wrapped(self, wrapper_class, indices=None):
            return [False] * self.num_envs

    class StopAtSuccess(BaseCallback):
        def __init__(self):
            super().__init__()
            self.results: list[bool] = []
            self.reached = False

        def _on_step(self) -> bool:
            for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
                if done:
                    self.results.append(bool(info.get("is_success", False)))
            if len(self.results) >= WINDOW and np.mean(self.results[-WINDOW:]) >= TARGET:
                self.reached = True
                return False
            return time.perf_counter() - t0 < budget_s  # a peer that never gets there stops here

    torch.manual_seed(seed)
    kwargs = job_env_kwargs()
    train_env = timed(sim.make(ENV, num_envs=HP["num_envs"], **kwargs))
    venv = VecNormalize(BatchedVecEnv(train_env), norm_reward=False, gamma=HP["gamma"])
    venv.seed(seed)
    common = dict(seed=seed, device="cpu", gamma=HP["gamma"], verbose=0)
    if algo == "ppo":
        model = PPO(
            "MlpPolicy",
            venv,
            n_steps=HP["num_steps"],
            batch_size=HP["minibatch"],
            n_epochs=HP["epochs"],
            learning_rate=HP["lr"],
            gae_lambda=HP["lam"],
            clip_range=HP["clip"],
            target_kl=HP["target_kl"],
            max_grad_norm=0.5,
            policy_kwargs=dict(net_arch=[64, 64], log_std_init=HP["log_std"]),
            **common,
        )
    else:  # SB3's SAC defaults, with the same network size and batch, one update per batched step
        model = SAC(
            "MlpPolicy",
            venv,
            batch_size=HP["minibatch"],
            learning_starts=1000,
            learning_rate=1e-3,
            policy_kwargs=dict(net_arch=[64, 64]),
            **common,
        )
    # the policy's inference while collecting: PPO calls policy(obs), SAC policy.predict -> _predict
    infer = {"s": 0.0}
    for name in ("forward", "_predict"):
        fn = getattr(model.policy, name)

        def timed_call(*a, _fn=fn, **k):
            t = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                infer["s"] += time.perf_counter() - t

        setattr(model.policy, name, timed_call)
    t0 = time.perf_counter()
    cb = StopAtSuccess()
    model.learn(total_timesteps=max_steps, callback=cb)
    wall = time.perf_counter() - t0
    infer_s = infer["s"]
    steps = model.num_timesteps
    # deterministic evaluation on fresh episodes, through the same normalization
    venv.training = False
    ev = BatchedVecEnv(sim.make(ENV, num_envs=16, **kwargs))
    ev.seed(10_000 + seed)
    obs, results = ev.reset(), []
    while len(results) < 64:
        act, _ = model.predict(venv.normalize_obs(obs), deterministic=True)
        obs, _, done, infos = ev.step(act)
        results += [info["is_success"] for d, info in zip(done, infos, strict=True) if d]
    return {
        "wall_s": wall,
        "env_s": train_env.step_seconds,
        "infer_s": infer_s,
        "env_steps": steps,
        "reached": cb.reached,
        "eval": float(np.mean(results[:64])),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=300_000, help="env steps a peer may take at most")
    p.add_argument("--budget", type=float, default=900.0, help="wall seconds each side may take at most")
    args = p.parse_args()
    ours = run_ours(args.seed, args.budget)
    print(
        f"ours (train job as shipped: expert warm start, then PPO through the scheduler): {ours}", flush=True
    )
    scratch = run_ours(args.seed, args.budget, "warm_start.demos=0")
    print(f"ours without the warm start (PPO from scratch, for reference): {scratch}", flush=True)
    import torch

    torch.set_num_threads(1)
    peers = {}
    for algo in ("ppo", "sac"):
        peers[algo] = run_sb3(algo, args.seed, args.max_steps, args.budget)
        print(f"sb3 {algo}: {peers[algo]}", flush=True)
    reached = {k: v for k, v in peers.items() if v["reached"]}
    name = min(reached or peers, key=lambda k: peers[k]["wall_s"])
    peer = peers[name]
    if not (ours["reached"] and peer["reached"]):
        print("note: a run stopped at its budget before reaching the target; its wall time is a lower bound")
    sp, ro = ours["split"], ours["rollout"]
    waited = ro["rollout_infer_s"] + ro["rollout_transport_s"]
    print(
        f"ours: cluster start-up {ours['startup_s']:.1f} s (not counted), then {ours['wall_s']:.1f} s to the "
        f"target = warm start {sp['warm_start_s']:.1f} (recording {ours['demo_env_steps']} expert env steps "
        f"{ours['demo_record_s']:.1f}, cloning the rest) + {ours['updates']} PPO updates: "
        f"rollout (env + inference, pipelined) {sp['rollout_s']:.1f} + "
        f"update {sp['train_s']:.1f} + weight sync {sp['sync_s']:.1f} + other {sp['other_s']:.1f} s; the "
        f"rollout = env steps {ro['rollout_env_s']:.1f} + waiting for actions {waited:.1f} (the policy's "
        f"inference {ro['rollout_infer_s']:.1f}, transport and queueing {ro['rollout_transport_s']:.1f}) + "
        f"the call around them (Ray, the trajectory's transfer) {sp['rollout_s'] - ro['rollout_env_s'] - waited:.1f} s"
    )
    for algo, r in peers.items():
        print(
            f"sb3 {algo}: {r['wall_s']:.1f} s = env.step {r['env_s']:.1f} + inference {r['infer_s']:.1f} + "
            f"update and the rest {r['wall_s'] - r['env_s'] - r['infer_s']:.1f} s (one process: no waiting)"
            f"{'' if r['reached'] else ' (did not reach the target)'}"
        )
    print(
        f"ours without the warm start: {scratch['wall_s']:.1f} s, {scratch['env_steps']} env steps, "
        f"eval success {scratch['eval']:.2f}{'' if scratch['reached'] else ' (did not reach the target)'}"
    )
    print(
        f"env steps to {TARGET:.0%}: ours={ours['env_steps'] + ours['demo_env_steps']} "
        f"({ours['demo_env_steps']} of them the expert's) "
        + " ".join(f"sb3_{k}={v['env_steps']}" for k, v in peers.items())
        + f"; eval success ours={ours['eval']:.2f} "
        + " ".join(f"sb3_{k}={v['eval']:.2f}" for k, v in peers.items())
    )
    ratio = ours["wall_s"] / peer["wall_s"]
    print(
        f"RESULT learning_speed ours={ours['wall_s']:.1f}s peer={peer['wall_s']:.1f}s ratio={ratio:.2f} goal=<=0.5"
    )


if __name__ == "__main__":
    main()
