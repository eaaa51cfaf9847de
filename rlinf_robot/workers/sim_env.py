"""``SimEnvWorker``: steps simulated envs and drives (pipelined) rollouts against a RolloutWorker.

The worker's ``num_envs`` envs live in ``num_shards`` separate env objects (``sim.make`` each),
shard k seeded ``seed + rank * num_shards + k``. A pipeline stage is a contiguous run of shards, so
the env trajectories do not depend on how many stages the batch is cut into: one stage steps every
shard and then asks for actions once; two stages alternate. ``pipeline_stages`` must divide into
the shards (``1 <= stages <= num_shards``).

Only plain data crosses processes: observations (numpy dicts) go to the rollout worker's ``infer``
and actions come back; the env itself is built in this process from its registry name.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from rlinf_robot.errors import ConfigError
from rlinf_robot.scheduler.pipeline import concat_obs, run_pipeline, stage_bounds
from rlinf_robot.scheduler.worker import Worker


def action_spec_to_dict(spec: Any) -> dict[str, Any]:
    """An ``ActionSpec`` as plain data (for the rollout worker to rebuild)."""
    return {
        "mode": spec.mode,
        "shape": list(spec.shape),
        "low": spec.low.tolist(),
        "high": spec.high.tolist(),
        "control_hz": float(spec.control_hz),
        "gripper": bool(spec.gripper),
    }


def action_spec_from_dict(d: dict[str, Any]) -> Any:
    from rlinf_robot.envs.spec import ActionSpec

    return ActionSpec(
        mode=d["mode"],
        shape=tuple(d["shape"]),
        low=np.asarray(d["low"], np.float32),
        high=np.asarray(d["high"], np.float32),
        control_hz=d["control_hz"],
        gripper=d["gripper"],
    )


class SimEnvWorker(Worker):
    def __init__(
        self,
        env: str,
        num_envs: int,
        env_kwargs: dict[str, Any] | None = None,
        num_shards: int = 2,
        seed: int = 0,
    ):
        super().__init__()
        import sim

        if num_shards < 1 or num_envs % num_shards:
            raise ConfigError(
                f"num_envs ({num_envs}) must be a positive multiple of num_shards ({num_shards})"
            )
        self.env_name = env
        self.num_envs = int(num_envs)
        per = self.num_envs // num_shards
        self.shards = [sim.make(env, num_envs=per, **dict(env_kwargs or {})) for _ in range(num_shards)]
        self.seed = int(seed) + self.rank * num_shards
        self._obs: list[dict[str, Any]] | None = None
        self._links: dict[str, Any] = {}  # policy link address -> LinkClient

    # ---------------------------------------------------------------- description
    def env_spec(self) -> dict[str, Any]:
        e = self.shards[0]
        return {
            "env": self.env_name,
            "num_envs": self.num_envs,
            "num_shards": len(self.shards),
            "action_spec": action_spec_to_dict(e.action_spec),
            "state_dim": int(np.prod(e.obs_spec.state_shape)),
            "obs_spec": e.obs_spec,
        }

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        """Reset every shard with its fixed seed (shard k: ``seed + k``, default the worker's own);
        returns the whole batch's first observation."""
        base = self.seed if seed is None else int(seed) + self.rank * len(self.shards)
        self._obs = [env.reset(seed=base + k) for k, env in enumerate(self.shards)]
        return concat_obs(self._obs)

    # ---------------------------------------------------------------- rollouts
    def rollout(
        self,
        policy: Any,
        num_steps: int,
        stages: int = 1,
        collect: bool = False,
        deterministic: bool = True,
        reset: bool = True,
        timeout_s: float = 120.0,
        transport: str = "link",
        seed: int | None = None,
    ) -> dict[str, Any]:
        """Run ``num_steps`` steps of every env, asking ``policy`` (a RolloutWorker actor handle) for
        actions, with the batch cut into ``stages`` pipelined micro-batches.

        ``seed``: with ``reset``, the episodes' seed (evaluation on held-out episodes).
        ``transport``: ``"link"`` sends observations and actions over the policy's ZeroMQ link
        (``scheduler.link``, ~0.1 ms CPU per call and side), ``"ray"`` as Ray actor calls (~0.8 ms).
        Returns env-step counts and wall time; with ``collect`` also the trajectory a learner
        trains on: states [T+1, N, S] (images [T+1, N, ...] per camera when the envs render),
        actions [T, N, H, A] (env units), raw_actions / log_prob / value as the policy reported them
        (normalized actions, behaviour log-prob, value estimate), rewards, terminated, truncated,
        success [T, N], final_states [T, N, S] (the state that ended an episode, where one ended),
        and the policy version used at each step and stage [T, stages].
        """
        if transport not in TRANSPORTS:
            raise ConfigError(f"transport {transport!r} unknown; known: {sorted(TRANSPORTS)}")
        link = TRANSPORTS[transport](self, policy, deterministic, timeout_s)
        if reset or self._obs is None:
            self.reset(seed)
        bounds = stage_bounds(len(self.shards), stages)
        versions = np.full((num_steps, stages), -1, np.int64)
        traj = [_Trajectory(o) for o in self._obs] if collect else None
        t_of_stage = [0] * stages
        executed = [0]
        spent = {"env_s": 0.0, "infer_s": 0.0, "wait_s": 0.0}  # where this process's time went

        def collect_actions(pending: Any) -> dict[str, Any]:
            t0 = time.perf_counter()
            out = link.collect(pending)
            spent["wait_s"] += time.perf_counter() - t0
            spent["infer_s"] += float(out.get("infer_s", 0.0))
            return out

        def step(s: int, out: dict[str, Any]) -> dict[str, Any]:
            t0 = time.perf_counter()
            try:
                return _step(s, out)
            finally:
                spent["env_s"] += time.perf_counter() - t0

        def _step(s: int, out: dict[str, Any]) -> dict[str, Any]:
            lo, hi = bounds[s]
            versions[t_of_stage[s], s] = out["version"]
            t_of_stage[s] += 1
            actions, offset = out["actions"], 0
            for k in range(lo, hi):
                env = self.shards[k]
                rows = slice(offset, offset + env.num_envs)
                a = actions[rows]
                offset += env.num_envs
                result = env.step(a[:, 0]) if a.shape[1] == 1 else env.chunk_step(a)
                self._obs[k] = result[0]
                executed[0] += int(np.sum(result[4].get("executed", a.shape[1])))
                if collect:
                    traj[k].add(a, {key: out[key][rows] for key in _POLICY_KEYS if key in out}, result)
            return concat_obs(self._obs[lo:hi])

        first = [concat_obs(self._obs[lo:hi]) for lo, hi in bounds]
        t0 = time.perf_counter()
        run_pipeline(first, num_steps, link.submit, collect_actions, step, self.timeline)
        seconds = time.perf_counter() - t0
        out: dict[str, Any] = {
            "env_steps": executed[0],
            "decisions": num_steps * self.num_envs,
            "seconds": seconds,
            "versions": versions,
            # the split of ``seconds``: stepping the envs; blocked on actions, of which the policy's
            # own compute is ``infer_s`` (it overlaps other stages' env steps when pipelined) and
            # the rest is transport and queueing
            "env_s": spent["env_s"],
            "wait_s": spent["wait_s"],
            "infer_s": spent["infer_s"],
        }
        if collect:
            parts = [t.arrays() for t in traj]
            out.update({key: _join(parts, key) for key in parts[0] if key != "images"})
            if parts[0].get("images"):
                out["images"] = {
                    cam: np.concatenate([p["images"][cam] for p in parts], axis=1)
                    for cam in parts[0]["images"]
                }
        return out

    def stress(self, num_steps: int = 0, seconds: float = 0.0) -> dict[str, float]:
        """The env workload alone (no policy): steps of every shard with random actions, at least
        ``num_steps`` and for at least ``seconds``. Used to measure the machine's parallel ceiling
        next to ``RolloutWorker.stress``."""
        if self._obs is None:
            self.reset()
        rng = np.random.default_rng(self.seed)
        t0 = time.time()
        steps = 0
        while steps < num_steps or time.time() - t0 < seconds:
            for env in self.shards:
                spec = env.action_spec
                env.step(rng.uniform(spec.low, spec.high, (env.num_envs, *spec.shape)).astype(np.float32))
            steps += 1
        return {"start": t0, "end": time.time(), "steps": steps, "env_steps": steps * self.num_envs}

    def close(self) -> None:
        for client in self._links.values():
            client.close()
        for env in self.shards:
            env.close()


_POLICY_KEYS = ("raw_actions", "log_prob", "value")


class _Trajectory:
    """One shard's collected steps (see ``SimEnvWorker.rollout``)."""

    def __init__(self, first_obs: dict[str, Any]):
        self.states = [first_obs["state"]]
        self.images = {cam: [img] for cam, img in (first_obs.get("images") or {}).items()}
        self.cols: dict[str, list[np.ndarray]] = {}

    def add(self, actions: np.ndarray, policy_out: dict[str, np.ndarray], result: tuple) -> None:
        obs, reward, terminated, truncated, info = result
        self.states.append(obs["state"])
        for cam, img in (obs.get("images") or {}).items():
            self.images[cam].append(img)
        final = info.get("final_state")
        row = {
            "actions": actions,
            "rewards": np.asarray(reward, np.float32),
            "terminated": np.asarray(terminated, bool),
            "truncated": np.asarray(truncated, bool),
            "success": np.asarray(info["success"], bool),
            "final_states": final if final is not None else np.zeros_like(obs["state"]),
            **policy_out,
        }
        for key, value in row.items():
            self.cols.setdefault(key, []).append(np.asarray(value))

    def arrays(self) -> dict[str, Any]:
        out = {key: np.stack(v) for key, v in self.cols.items()}
        out["states"] = np.stack(self.states)
        out["images"] = {cam: np.stack(v) for cam, v in self.images.items()}
        return out


def _join(parts: list[dict[str, Any]], key: str) -> np.ndarray:
    return np.concatenate([p[key] for p in parts], axis=1)


class _RayTransport:
    """Each micro-batch is a Ray actor call ``policy.infer(obs)``."""

    def __init__(self, worker: SimEnvWorker, policy: Any, deterministic: bool, timeout_s: float):
        self.policy, self.deterministic, self.timeout_s = policy, deterministic, timeout_s

    def submit(self, stage: int, obs: dict[str, Any]) -> Any:
        return self.policy.infer.remote(obs, self.deterministic, stage)

    def collect(self, ref: Any) -> dict[str, Any]:
        import ray

        return ray.get(ref, timeout=self.timeout_s)


class _LinkTransport:
    """Micro-batches go over the policy worker's ZeroMQ link; Ray only finds the link and checks
    that the policy process is alive while waiting (a dead one raises within about a second)."""

    def __init__(self, worker: SimEnvWorker, policy: Any, deterministic: bool, timeout_s: float):
        import ray

        from rlinf_robot.scheduler.link import LinkClient

        address = ray.get(policy.open_link.remote(), timeout=timeout_s)
        if address not in worker._links:
            worker._links[address] = LinkClient(address)
        self.client = worker._links[address]
        self.client.alive = lambda: ray.get(policy.ping.remote(), timeout=30)
        self.deterministic, self.timeout_s = deterministic, timeout_s

    def submit(self, stage: int, obs: dict[str, Any]) -> int:
        meta = {
            "stage": stage,
            "deterministic": self.deterministic,
            "instruction": list(obs.get("instruction", [])),
        }
        return self.client.submit({"state": obs["state"], "images": obs.get("images") or {}}, meta)

    def collect(self, seq: int) -> dict[str, Any]:
        arrays, meta = self.client.collect(seq, self.timeout_s)
        return {**arrays, "version": int(meta["version"]), "infer_s": float(meta.get("infer_s", 0.0))}


TRANSPORTS = {"ray": _RayTransport, "link": _LinkTransport}
