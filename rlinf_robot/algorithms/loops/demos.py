"""Scripted-expert rollouts, recorded once and served two ways: chunks for SFT, transitions for RLPD.

``record_expert`` steps a batched env with ``expert(obs) -> actions[N, A]`` (env units). With
``noise > 0`` it injects noise the way DART does (Laskey et al. 2017): the env executes the expert's
action plus Gaussian noise (``noise`` times each dimension's half range, clipped to the bounds),
while the recorded label stays the expert's clean action. The data then covers the states a
slightly-off policy drifts into and says how to get back from them, which behaviour cloning of
clean rollouts never sees.

- ``ExpertRollouts.demo_set(H)``: the label chunk at every step (steps past the episode's end
  masked), for ``sft_loop.train_sft``;
- ``ExpertRollouts.replay_buffer(policy, H)``: the *executed* H-step chunks as transitions
  ``(state, action in the policy's normalized space, reward = sum of the H rows, next state, done)``,
  the off-policy data ``sac_loop.train_sac(demos=...)`` mixes into every batch (RLPD).

Only episodes that finished (and, by default, succeeded) are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlinf_robot.algorithms.buffers import ReplayBuffer
from rlinf_robot.algorithms.loops.rollout import flatten_obs, stack_obs, take_obs
from rlinf_robot.envs.spec import BatchedEnv


@dataclass
class ExpertRollouts:
    """``T`` steps of ``N`` envs, time-major."""

    obs: dict  # stacked observations before each step: {"state": Tensor[T, N, S], "images", "instruction"}
    labels: np.ndarray  # [T, N, A] the expert's actions (env units)
    executed: np.ndarray  # [T, N, A] what the env executed (labels + noise, clipped)
    rewards: np.ndarray  # [T, N]
    next_state: np.ndarray  # [T, N, S] state after the step (the final state where an episode ended)
    terminated: np.ndarray  # [T, N] bool
    dones: np.ndarray  # [T, N] bool
    episode: np.ndarray  # [T, N] int: episode index of each step, per env
    keep: np.ndarray  # [T, N] bool: the step's episode finished (and succeeded, if only successful kept)
    episodes: int  # finished episodes
    successes: int  # finished episodes that succeeded
    #: [T, N, P] what the sim knows and the policy must not see (``record_expert(privileged=...)``):
    #: auxiliary targets for SFT; NaN where an env's task has no such value. None: not recorded
    privileged: np.ndarray | None = None

    @property
    def env_steps(self) -> int:
        return int(self.dones.size)

    @property
    def kept_steps(self) -> int:
        return int(self.keep.sum())

    @property
    def success_rate(self) -> float:
        return self.successes / max(self.episodes, 1)

    def _chunk_valid(self, chunk_size: int) -> np.ndarray:
        """[T, N, H]: row h of the chunk starting at t is a step of the same episode."""
        T, N = self.dones.shape
        valid = np.zeros((T, N, chunk_size), bool)
        for h in range(chunk_size):
            src = np.arange(T) + h
            inside = src < T
            valid[inside, :, h] = self.episode[src[inside]] == self.episode[inside]
        return valid

    def demo_set(self, chunk_size: int = 1):
        """Label chunks for behaviour cloning (``sft_loop.DemoSet``)."""
        from rlinf_robot.algorithms.loops.sft_loop import DemoSet

        T, N, A = self.labels.shape
        H = chunk_size
        mask = self._chunk_valid(H)
        chunks = np.zeros((T, N, H, A), np.float32)
        for h in range(H):
            src = np.minimum(np.arange(T) + h, T - 1)
            chunks[:, :, h] = self.labels[src]
        chunks[~mask] = 0.0  # past the episode's end: masked, and never another episode's actions
        idx = torch.as_tensor(np.flatnonzero(self.keep.reshape(-1)))
        aux = None
        if self.privileged is not None:
            aux = torch.as_tensor(self.privileged.reshape(T * N, -1), dtype=torch.float32)[idx]
        return DemoSet(
            take_obs(flatten_obs(self.obs), idx),
            torch.as_tensor(chunks.reshape(T * N, H, A))[idx],
            torch.as_tensor(mask.reshape(T * N, H))[idx],
            self.success_rate,
            aux,
        )

    def replay_buffer(self, policy, chunk_size: int = 1) -> ReplayBuffer:
        """Executed H-step chunks that lie inside one kept episode, as off-policy transitions.

        The chunk starting at t holds rows t..t+H-1 (normalized by ``policy``, so they are in the
        space its actions live in), their summed reward, the state after row t+H-1 and whether the
        episode terminated there; ``policy.chunk_size`` must be H.
        """
        T, N, A = self.executed.shape
        H = chunk_size
        if getattr(policy, "chunk_size", H) != H:
            raise ValueError(f"policy.chunk_size is {policy.chunk_size}, the transitions' chunks are {H}")
        full = self._chunk_valid(H).all(axis=2) & self.keep
        # A full chunk ends inside its episode: its last row is step t+H-1 <= the episode's last step.
        t_idx, n_idx = np.nonzero(full)
        rows = t_idx[:, None] + np.arange(H)[None, :]  # [B, H]
        actions = self.executed[rows, n_idx[:, None]]  # [B, H, A]
        last = t_idx + H - 1
        buf = ReplayBuffer(max(len(t_idx), 1))
        if len(t_idx):
            buf.add(
                state=self.obs["state"][t_idx, n_idx],
                action=policy.normalize_actions(actions).clamp(-1.0, 1.0).flatten(1).cpu(),
                reward=torch.as_tensor(self.rewards[rows, n_idx[:, None]].sum(axis=1), dtype=torch.float32),
                next_state=torch.as_tensor(self.next_state[last, n_idx], dtype=torch.float32),
                done=torch.as_tensor(self.terminated[last, n_idx], dtype=torch.float32),
            )
        return buf


@torch.no_grad()
def record_expert(
    env: BatchedEnv,
    expert: Callable[[dict], np.ndarray],
    *,
    num_steps: int | None = None,
    episodes: int | None = None,
    seed: int = 0,
    noise: float = 0.0,
    only_successful: bool = True,
    privileged: Callable[[], np.ndarray] | None = None,
) -> ExpertRollouts:
    """Run ``expert`` in every env for ``num_steps`` steps, or until ``episodes`` episodes finished
    (whichever is given; both: the first reached). ``noise``: DART noise, see the module docstring.
    ``privileged()``: called before every step, ``[N, P]`` values the sim knows about that step's
    observation (e.g. ``MultiTaskEnv.privileged``), kept as auxiliary SFT targets."""
    if num_steps is None and episodes is None:
        raise ValueError("record_expert needs num_steps or episodes")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    rng = np.random.default_rng([seed, 7])
    low, high = env.action_spec.low, env.action_spec.high
    half = (high - low) / 2
    obs = env.reset(seed=seed)
    obs_l, labels, executed, rewards, next_states, terms, dones, succ = [], [], [], [], [], [], [], []
    known: list[np.ndarray] = []
    finished = 0
    while (num_steps is None or len(dones) < num_steps) and (episodes is None or finished < episodes):
        if privileged is not None:
            known.append(np.asarray(privileged(), np.float32))
        a = np.asarray(expert(obs), np.float32)
        act = a
        if noise > 0:
            act = np.clip(a + rng.normal(0.0, noise, a.shape).astype(np.float32) * half, low, high)
        next_obs, r, term, trunc, info = env.step(act)
        done = term | trunc
        nxt = np.array(next_obs["state"], np.float32, copy=True)
        if done.any():
            nxt[done] = info["final_state"][done]
        obs_l.append(obs)
        labels.append(a)
        executed.append(act)
        rewards.append(np.asarray(r, np.float32))
        next_states.append(nxt)
        terms.append(np.asarray(term, bool))
        dones.append(done)
        succ.append(np.asarray(info.get("success", term), bool) & done)
        finished += int(done.sum())
        obs = next_obs
    D, S = np.stack(dones), np.stack(succ)
    T, N = D.shape
    episode = np.cumsum(np.concatenate([np.zeros((1, N), np.int64), D[:-1].astype(np.int64)]), axis=0)
    keep = np.zeros((T, N), bool)
    total = ok = 0
    for n in range(N):
        ends = np.flatnonzero(D[:, n])
        for e, end in enumerate(ends):
            total += 1
            good = bool(S[end, n])
            ok += good
            keep[(episode[:, n] == e), n] = good or not only_successful
    return ExpertRollouts(
        stack_obs(obs_l),
        np.stack(labels),
        np.stack(executed),
        np.stack(rewards),
        np.stack(next_states),
        np.stack(terms),
        D,
        episode,
        keep,
        total,
        ok,
        np.stack(known) if known else None,
    )
