"""Wall time and env steps to 95% success on mujoco/fr3-reach: our PPO vs Stable-Baselines3 PPO.

Both learn on the same batched MuJoCo env (SB3 through a VecEnv adapter, no per-env Python
wrappers), with the same seed, the same hyper-parameters (rollout length, minibatch, epochs, lr,
gamma, lambda, clip, 64x64 tanh MLP, state normalization, actions normalized to [-1, 1]) and the
same stopping rule: 95% of the last 32 finished training episodes succeeded. Then each trained
policy is evaluated deterministically on 64 fresh episodes. One run, sequential, one torch thread.

Episodes run their full 3 s (terminate_on_success=False): with the task's dense reward in [0, 1]
per step, ending the episode on success would punish reaching the goal.

Both pay the same simulator: the time inside ``env.step`` is measured separately, so the learner's own
share (rollout bookkeeping, inference, updates) can be compared as well.

Prints both and ends with: RESULT learning_speed ours=<s> peer=<s> ratio=<ours/peer> goal=<=0.5
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MUJOCO_GL", "osmesa")

ENV = "mujoco/fr3-reach"
ENV_CFG = {"terminate_on_success": False}
TARGET, WINDOW = 0.95, 32
HP = dict(
    num_envs=16,
    num_steps=16,
    minibatch=256,
    epochs=10,
    lr=1e-3,
    gamma=0.95,
    lam=0.95,
    clip=0.2,
    target_kl=0.02,
    log_std=-0.5,
)


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


def run_ours(seed: int, max_steps: int) -> dict:
    import torch

    import policies
    import sim
    from rlinf_robot.algorithms.loops.evaluate import evaluate
    from rlinf_robot.algorithms.loops.ppo_loop import PPOConfig, train_ppo

    torch.manual_seed(seed)
    env = timed(sim.make(ENV, num_envs=HP["num_envs"], **ENV_CFG))
    pol = policies.make(
        "mlp", action_spec=env.action_spec, obs_spec=env.obs_spec, hidden=(64, 64), init_log_std=HP["log_std"]
    )
    cfg = PPOConfig(
        num_steps=HP["num_steps"],
        epochs=HP["epochs"],
        minibatch_size=HP["minibatch"],
        lr=HP["lr"],
        gamma=HP["gamma"],
        lam=HP["lam"],
        clip=HP["clip"],
        target_kl=HP["target_kl"],
    )
    res = train_ppo(env, pol, cfg, max_env_steps=max_steps, seed=seed, target_success=TARGET, window=WINDOW)
    ev = sim.make(ENV, num_envs=16, **ENV_CFG)
    return {
        "wall_s": res.wall_s,
        "env_s": env.step_seconds,
        "env_steps": res.env_steps,
        "reached": res.reached,
        "eval": evaluate(ev, pol, 64, seed=10_000 + seed),
    }


def run_sb3(seed: int, max_steps: int) -> dict:
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
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
            return True

    torch.manual_seed(seed)
    train_env = timed(sim.make(ENV, num_envs=HP["num_envs"], **ENV_CFG))
    venv = VecNormalize(BatchedVecEnv(train_env), norm_reward=False, gamma=HP["gamma"])
    venv.seed(seed)
    model = PPO(
        "MlpPolicy",
        venv,
        n_steps=HP["num_steps"],
        batch_size=HP["minibatch"],
        n_epochs=HP["epochs"],
        learning_rate=HP["lr"],
        gamma=HP["gamma"],
        gae_lambda=HP["lam"],
        clip_range=HP["clip"],
        target_kl=HP["target_kl"],
        max_grad_norm=0.5,
        seed=seed,
        device="cpu",
        policy_kwargs=dict(net_arch=[64, 64], log_std_init=HP["log_std"]),
        verbose=0,
    )
    cb = StopAtSuccess()
    t0 = time.perf_counter()
    model.learn(total_timesteps=max_steps, callback=cb)
    wall = time.perf_counter() - t0
    steps = model.num_timesteps
    # deterministic evaluation on fresh episodes, through the same normalization
    venv.training = False
    ev = BatchedVecEnv(sim.make(ENV, num_envs=16, **ENV_CFG))
    ev.seed(10_000 + seed)
    obs, results = ev.reset(), []
    while len(results) < 64:
        act, _ = model.predict(venv.normalize_obs(obs), deterministic=True)
        obs, _, done, infos = ev.step(act)
        results += [info["is_success"] for d, info in zip(done, infos, strict=True) if d]
    return {
        "wall_s": wall,
        "env_s": train_env.step_seconds,
        "env_steps": steps,
        "reached": cb.reached,
        "eval": float(np.mean(results[:64])),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=300_000)
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    ours = run_ours(args.seed, args.max_steps)
    print(f"ours: {ours}", flush=True)
    peer = run_sb3(args.seed, args.max_steps)
    print(f"sb3:  {peer}", flush=True)
    if not (ours["reached"] and peer["reached"]):
        print("note: a run stopped at --max-steps before reaching the target; its wall time is a lower bound")
    ratio = ours["wall_s"] / peer["wall_s"]
    o_rest, p_rest = ours["wall_s"] - ours["env_s"], peer["wall_s"] - peer["env_s"]
    print(
        f"wall = env.step + learner: ours {ours['wall_s']:.1f} = {ours['env_s']:.1f} + {o_rest:.1f} s; "
        f"sb3 {peer['wall_s']:.1f} = {peer['env_s']:.1f} + {p_rest:.1f} s; learner-time ratio {o_rest / p_rest:.2f}"
    )
    print(
        f"env steps to {TARGET:.0%}: ours={ours['env_steps']} sb3={peer['env_steps']}; "
        f"eval success ours={ours['eval']:.2f} sb3={peer['eval']:.2f}"
    )
    print(
        f"RESULT learning_speed ours={ours['wall_s']:.1f}s peer={peer['wall_s']:.1f}s ratio={ratio:.2f} goal=<=0.5"
    )


if __name__ == "__main__":
    main()
