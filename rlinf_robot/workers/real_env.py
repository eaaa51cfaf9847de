"""``RealEnvWorker``: one robot endpoint as a scheduler worker, running episodes on its own.

A background thread runs episode after episode on the arm (``RealRobotEnv`` over the bridge) with
the newest weights it has been given (``load_weights``, pushed by the driver after each update),
taken at the start of each episode, so an episode is one policy version (what its behaviour
log-probs are of, and what a report can attribute it to): the arm never waits for the learner. Finished episodes queue up until the driver takes them
(``take_episodes``), each a dict of numpy arrays plus what a learner and a report need: source,
policy versions, behaviour log-probs and values, rewards, success, and whether it was *aborted*.

An episode is aborted, and marked so, when it did not end the way the task ends episodes: the link
to the robot was lost, the arm latched or was e-stopped, a reflex refused its rows (``aborted`` in
the env's info). Its data is kept for inspection but must not be trained on as an ending. After a
lost link the worker reconnects by itself (every ``retry_s``) and resumes real episodes, while
the rest of the job carries on with sim.

Utilisation is the share of wall time the arm spent executing policy actions (inside
``step``/``chunk_step``), not resetting, reconnecting or waiting.

With ``record_dir`` every finished episode, training and evaluation alike, is also committed to a
LeRobot v3.0 dataset in ``<record_dir>/<robot>/`` (``rlinf_robot.data.recorder``) as it ends;
aborted episodes are recorded too, marked ``aborted`` (with the reason) in ``meta/episodes``.
A failed write is logged and counted (``record_errors``), never stops the arm.

With ``teleop`` (``states``/``commands`` endpoints of an operator, ``rlinf_robot.teleop``) an
operator can take the arm over during training episodes: before each decision the state is
published, and where an engaged operator's action passes its checks that action is executed instead
of the policy's (one row, held for the policy's chunk length), through the same ``env.step`` and
safety filter. Such steps are flagged ``intervened``; their behaviour log-prob is unknown (NaN) and
their raw action is the operator's action in the policy's raw space, so the learners can use them
as demonstrations. Evaluation and demonstration episodes are never intervened.

If the worker's parent (Ray's raylet) dies, as it does when the driver is killed with its process
group, the worker halts by itself before Ray gets round to ending it (``workers.orphan``): the
step in flight finishes, the episode is kept as aborted, no further reset or step is sent, and
the arm's lease is released so the bridge holds it at once.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict
from typing import Any

import numpy as np

from rlinf_robot.data.episode import empty_steps
from rlinf_robot.scheduler.worker import Worker
from rlinf_robot.workers.orphan import ParentWatch

log = logging.getLogger(__name__)

#: Errors that end a real episode as aborted and make the worker reconnect.
_LINK_ERRORS = ("LinkLost", "BridgeTimeout", "BridgeError", "Latched", "CommandRefused", "ConnectionError")


class RealEnvWorker(Worker):
    def __init__(
        self,
        endpoint: str | list[str],
        env: dict[str, Any],
        policy: str,
        policy_kwargs: dict[str, Any],
        source: str | list[str] = "real:arm",
        client: dict[str, Any] | None = None,
        seed: int = 0,
        retry_s: float = 2.0,
        deterministic: bool = False,
        noise_scale: float = 1.0,
        record_dir: str = "",
        teleop: dict[str, Any] | None = None,
    ):
        super().__init__()
        import torch

        import policies
        from rlinf_robot.envs.real import RealEnvConfig, RealRobotEnv

        # one endpoint (and source name) per rank of the group
        self.endpoint = endpoint if isinstance(endpoint, str) else endpoint[self.rank]
        self.source = source if isinstance(source, str) else source[self.rank]
        self.retry_s = float(retry_s)
        self.env_cfg = RealEnvConfig.from_dict({**env, "auto_reset": False, "seed": seed + self.rank})
        self.client_cfg = dict(client or {})
        self.deterministic = bool(deterministic)
        # Exploration on the arm: the policy's Gaussian noise times this (an arm is slower and
        # costlier to explore than a sim; the behaviour log-prob is of the scaled distribution)
        self.noise_scale = float(noise_scale)
        action_spec, obs_spec = RealRobotEnv.specs(self.env_cfg)
        torch.manual_seed(int(seed))
        self.policy = policies.make(
            policy, action_spec=action_spec, obs_spec=obs_spec, **policy_kwargs
        ).eval()
        # the copy an episode acts with: refreshed from ``policy`` (which load_weights updates) at
        # each episode's start
        self._acting = policies.make(
            policy, action_spec=action_spec, obs_spec=obs_spec, **policy_kwargs
        ).eval()
        self._acting.load_state_dict(self.policy.state_dict())
        self._acting_version = self.weights_version
        self._torch = torch
        self._lock = threading.RLock()  # the policy: episode thread vs load_weights
        self._queue: list[dict[str, Any]] = []
        self._queue_lock = threading.Lock()
        self._stop = threading.Event()  # ends the background episodes
        self._halt = threading.Event()  # ends everything, evaluation included (shutdown)
        self._thread: threading.Thread | None = None
        self._env = None
        self.state = "stopped"
        self._parent_watch = ParentWatch(self._orphaned)
        self.last_error = ""
        self.t_start = time.time()
        self.arm_seconds = 0.0
        self.counts = {"episodes": 0, "aborted": 0, "steps": 0, "reconnects": 0, "intervened_steps": 0}
        self._started = 0  # training episodes begun (the teleop schedule's episode index)
        self._teleop = None
        if teleop and teleop.get("states"):
            from rlinf_robot.teleop.link import TeleopLink

            self._teleop = TeleopLink(
                teleop["states"],
                teleop.get("commands", ""),
                robot=self.source,
                low=action_spec.low,
                high=action_spec.high,
                max_age_s=float(teleop.get("max_age_s", 0.5)),
                reply_wait_s=float(teleop.get("reply_wait_s", 0.5)),
                curve=teleop.get("curve") or None,
            )
        self.latency_ms: list[float] = []  # per step: chunk sent -> its end observed
        self._recorder = None
        self._kind = "train"  # what the episodes now running are recorded as (train | eval)
        self.record_errors = 0
        if record_dir:
            from pathlib import Path

            from rlinf_robot.data.recorder import RealEpisodeRecorder

            robot = self.source.split(":", 1)[-1]
            self._recorder = RealEpisodeRecorder(
                Path(record_dir) / robot,
                action_spec,
                obs_spec,
                self.env_cfg.control_hz,
                task=self.env_cfg.task,
            )

    def weights_module(self) -> Any:
        return self.policy

    def load_weights(self, ticket: Any) -> int:
        with self._lock:
            return super().load_weights(ticket)

    # ------------------------------------------------------------------ control
    def start(self) -> str:
        """Start running episodes in the background (idempotent)."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self.t_start = time.time()
            self.arm_seconds = 0.0
            self._thread = threading.Thread(target=self._run, name="real-episodes", daemon=True)
            self._thread.start()
        return self.state

    def stop(self, timeout_s: float = 60.0, halt: bool = False) -> dict[str, Any]:
        """Finish the running episode (it is kept, aborted if cut), release the arm, stop.
        ``halt`` also ends an evaluation that is running (the group runs methods concurrently)."""
        if halt:
            self._halt.set()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                # still inside a long reset or a chunk: closing the env's sockets under it would
                # fail its call half-way; it closes the env itself as it ends (``_run``)
                log.warning(
                    "real episodes still running after %.0f s; they close the env as they end", timeout_s
                )
                self.state = "stopping"
                return self.stats()
            self._thread = None
        self._close_env()
        self.state = "stopped"
        return self.stats()

    def take_episodes(self) -> list[dict[str, Any]]:
        """The episodes finished since the last call (oldest first)."""
        with self._queue_lock:
            out, self._queue = self._queue, []
        return out

    def stats(self) -> dict[str, Any]:
        wall = max(time.time() - self.t_start, 1e-9)
        lat = np.asarray(self.latency_ms[-2000:])
        return {
            "source": self.source,
            "state": self.state,
            "version": self.weights_version,
            "utilisation": self.arm_seconds / wall,
            "arm_seconds": self.arm_seconds,
            "wall_s": wall,
            "last_error": self.last_error,
            "latency_p50_ms": float(np.median(lat)) if lat.size else float("nan"),
            "recorded": self._recorder.recorded if self._recorder is not None else 0,
            "record_errors": self.record_errors,
            **({f"teleop_{k}": v for k, v in self._teleop.counts.items()} if self._teleop else {}),
            **self.counts,
        }

    def latency_samples(self) -> list[float]:
        return list(self.latency_ms)

    def evaluate(
        self,
        episodes: int,
        deterministic: bool = True,
        timeout_s: float = 900.0,
        seed: int | None = None,
        expert: bool = False,
        expert_gain: float | None = None,
    ) -> list[dict]:
        """Run ``episodes`` episodes now (the background loop must be stopped) and return them.

        ``seed`` (+ this rank) draws the episodes' starts and goals: give a range training never
        uses, or a fresh env's first goals are the first training episodes' again. ``expert``: the
        task's scripted expert acts instead of the policy (real-arm demonstrations, recorded as
        ``demo`` episodes), at ``expert_gain`` (``sim.mujoco.experts.expert_for``)."""
        actor = self._expert(expert_gain) if expert else None
        return self._episodes(episodes, "demo" if expert else "eval", deterministic, timeout_s, seed, actor)

    def record(
        self,
        episodes: int,
        actor: str = "policy",
        deterministic: bool = True,
        timeout_s: float = 900.0,
        seed: int | None = None,
        expert_gain: float | None = None,
    ) -> list[dict]:
        """``rlinf-robot record``: ``episodes`` episodes recorded as ``record`` episodes, acted by
        ``actor`` - ``policy``, ``expert`` (the task's scripted expert) or ``hold`` (the arm stays
        where it is) - with the teleop operator, where one is configured, free to take over (an
        operator alone drives the arm with ``hold``)."""
        actors = {"policy": lambda: None, "expert": lambda: self._expert(expert_gain), "hold": self._hold}
        if actor not in actors:
            raise ValueError(f"actor must be one of {sorted(actors)}, got {actor!r}")
        return self._episodes(
            episodes, "record", deterministic, timeout_s, seed, actors[actor](), teleop=self._teleop
        )

    def _episodes(self, episodes, kind, deterministic, timeout_s, seed, actor, teleop=None) -> list[dict]:
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("stop() the training episodes before evaluating or recording on the arm")
        out: list[dict[str, Any]] = []
        self._kind = kind
        deadline = time.monotonic() + timeout_s
        reseed = None if seed is None else int(seed) + self.rank
        while len(out) < episodes and time.monotonic() < deadline and not self._halt.is_set():
            try:
                env = self._connect()
                index = len(out) if teleop is not None else -1
                out.append(self._episode(env, deterministic, reseed, actor, teleop=teleop, index=index))
                reseed = None  # the episodes after the first go on from its generator
                self._record(out[-1], kind)
            except _Halted:
                break
            except Exception as e:  # a lost link: reconnect and go on
                if type(e).__name__ not in _LINK_ERRORS:
                    raise
                self._lost(e)
                self._halt.wait(self.retry_s)
        self._kind = "train"
        self._close_env()
        return out

    def close(self) -> None:
        self._parent_watch.close()
        self.stop()
        if self._teleop is not None:
            self._teleop.close()

    def _orphaned(self) -> None:
        """The job is gone (see the module docstring): finish the step in flight, send nothing
        more, release the arm."""
        self._halt.set()
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(30)
        self._close_env()
        self.state = "orphaned"

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        try:
            self._train_episodes()
        finally:
            if self._stop.is_set() or self._halt.is_set():
                self._close_env()  # (stop() does too once this thread is gone; closing twice is a no-op)

    def _train_episodes(self) -> None:
        while not self._stop.is_set() and not self._halt.is_set():
            try:
                env = self._connect()
                episode = self._episode(env, self.deterministic, teleop=self._teleop, index=self._started)
                self._started += 1
            except _Halted:
                break
            except Exception as e:
                if type(e).__name__ not in _LINK_ERRORS:
                    log.exception("real episode failed")
                self._lost(e)
                self._stop.wait(self.retry_s)
                continue
            self._emit(episode)

    def _connect(self):
        if self._env is None:
            from rlinf_robot.bridge.config import ClientConfig
            from rlinf_robot.envs.real import RealRobotEnv

            self.state = "connecting"
            self._env = RealRobotEnv.connect([self.endpoint], ClientConfig(**self.client_cfg), self.env_cfg)
        return self._env

    def _close_env(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            try:
                env.close()
            except Exception as e:  # the link may be gone: the lease lapses by itself
                log.debug("closing the real env: %s", e)

    def _lost(self, e: Exception) -> None:
        error = f"{type(e).__name__}: {e}"
        if type(e).__name__ == "Latched" and error != self.last_error:
            # it does not clear by itself: say so once, not at every retry
            log.warning("%s; real episodes wait for an operator's reset (franka_node's reset service)", e)
        self.last_error = error
        self.state = "unavailable"
        self.counts["reconnects"] += 1
        partial = getattr(self, "_partial", None)
        if partial is not None:
            self._emit(partial.finish(aborted=True, reason=self.last_error))
            self._partial = None
        self._close_env()

    def _take_newest_weights(self) -> None:
        with self._lock:
            self._acting.load_state_dict(self.policy.state_dict())
            self._acting_version = self.weights_version

    def _act(self, obs: dict[str, Any], deterministic: bool):
        with self._torch.inference_mode():
            out = self._acting.predict_action_batch(obs, deterministic=deterministic)
            version = self._acting_version
            actions, raw = out.actions, out.raw_actions
            logp = out.log_prob
            if not deterministic and self.noise_scale != 1.0 and logp is not None:
                mean = self._acting.predict_action_batch(obs, deterministic=True).raw_actions
                raw = mean + self.noise_scale * (raw - mean)
                actions = self._acting.to_env_actions(raw)
                # density of mean + s * (x - mean): the Gaussian's, shrunk by s in every dimension
                logp = logp - raw[0].numel() * float(np.log(self.noise_scale))
        value = None if out.value is None else out.value.cpu().numpy()
        logp = None if logp is None else logp.cpu().numpy()
        return actions, raw.cpu().numpy(), logp, value, version

    def _expert(self, gain: float | None):
        """The task's scripted expert (``sim.mujoco.experts``, a function of the state alone) as an
        actor of one chunk row; no log-prob, value or policy version."""
        from sim.mujoco.experts import expert_for

        fn = expert_for(f"mujoco/{self.env_cfg.task}", gain)

        def act(env, obs):
            a = np.asarray(fn(env, obs), np.float32)[:, None]
            return a, a.copy(), None, None, -1

        return act

    def _takeover(self, row: np.ndarray, like: np.ndarray):
        """The operator's action ``row`` as a decision: the chunk (its row held for the policy's
        chunk length), the policy's raw action of it, no log-prob or value."""
        actions = np.broadcast_to(row, like.shape).astype(np.float32).copy()
        with self._torch.inference_mode():
            t = self._torch.as_tensor(actions)
            raw = self._acting.raw_from_normalized(self._acting.normalize_actions(t)).cpu().numpy()
        return actions, raw

    def _hold(self):
        """An actor that holds the arm where it is (a zero ``ee_delta`` / ``joint_delta`` row; the
        gripper, where there is one, keeps its measured width): what the arm does while no
        operator drives it during ``record(actor="hold")``."""
        mode = self.env_cfg.action_mode
        if mode not in ("ee_delta", "joint_delta"):
            raise ValueError(f"actor 'hold' needs a delta action mode, the task uses {mode!r}")

        def act(env, obs):
            a = np.zeros((1, 1, *env.action_spec.shape), np.float32)
            if env.action_spec.gripper:
                a[0, 0, -1] = obs["state"][0][env.obs_spec.state_slices()["gripper_width"]][0]
            return a, a.copy(), None, None, -1

        return act

    def _episode(
        self, env, deterministic: bool, seed: int | None = None, expert=None, teleop=None, index: int = -1
    ) -> dict[str, Any]:
        """One episode on the arm; ``index``: the training episode's number (the teleop schedule's
        and the episode's ``meta["index"]``; -1 for evaluation and demonstrations)."""
        if self._halt.is_set():  # a reset moves the arm: not for a job that is ending
            raise _Halted()
        self.state = "resetting"
        t0 = time.monotonic()
        obs = env.reset(seed=seed)
        reset = {"reset_s": time.monotonic() - t0, **env.last_reset[0]}
        self._take_newest_weights()
        self.state = "running"
        scale = 1.0 if deterministic else self.noise_scale
        step = 0
        rec = _EpisodeRecord(self.source, obs, env, noise_scale=scale, reset=reset, index=index)
        self._partial = rec
        result = None
        while not self._halt.is_set():
            if expert is not None:
                actions, raw, logp, value, version = expert(env, obs)
            else:
                actions, raw, logp, value, version = self._act(obs, deterministic)
            row = None
            if teleop is not None:
                row = teleop.decide(
                    index,
                    step,
                    obs["state"][0],
                    env.obs_spec.state_slices(),
                    self.env_cfg.task,
                    self.env_cfg.action_mode,
                    (obs.get("instruction") or [""])[0],
                )
            if row is not None:
                actions, raw = self._takeover(row, actions)
                logp, value = None, None
                self.counts["intervened_steps"] += 1
            step += 1
            t0 = time.monotonic()
            result = env.step(actions[:, 0]) if actions.shape[1] == 1 else env.chunk_step(actions)
            dt = time.monotonic() - t0
            self.arm_seconds += dt
            self.latency_ms.append(float(np.atleast_1d(result[4]["latency_ms"]["step"])[0]))
            if len(self.latency_ms) > 20000:
                del self.latency_ms[:10000]
            self.counts["steps"] += int(result[4]["executed"][0])
            rec.add(actions, raw, logp, value, version, result, intervened=row is not None)
            obs = result[0]
            if result[2][0] or result[3][0]:
                break
        self._partial = None
        if result is None or (self._halt.is_set() and not (result[2][0] or result[3][0])):
            return rec.finish(aborted=True, reason="halted")
        aborted = bool(result[4]["aborted"][0])
        reason = "; ".join(r["message"] for r in result[4]["rejections"][0]) if aborted else ""
        return rec.finish(aborted=aborted, reason=reason)

    def _record(self, episode: dict[str, Any], kind: str) -> None:
        if self._recorder is None:
            return
        try:
            self._recorder.record(episode, kind)
        except Exception:
            self.record_errors += 1
            log.exception("recording a real episode to %s failed", self._recorder.root)

    def _emit(self, episode: dict[str, Any]) -> None:
        self._record(episode, self._kind)
        self.counts["episodes"] += 1
        self.counts["aborted"] += int(episode["aborted"])
        with self._queue_lock:
            self._queue.append(episode)


class _Halted(Exception):
    """The worker was halted before an episode began: none is run."""


class _EpisodeRecord:
    """One real episode's steps, as plain arrays (one robot: env index 0)."""

    def __init__(
        self,
        source: str,
        first_obs: dict[str, Any],
        env,
        noise_scale: float = 1.0,
        reset: dict | None = None,
        index: int = -1,
    ):
        self.source = source
        self.index = index  # the worker's training-episode count when it began (-1: not training)
        self.noise_scale = float(noise_scale)  # the behaviour policy: the policy's std times this
        self.reset = dict(reset or {})  # where the reset before it spent its time (s)
        self.t_start = time.time()
        self.states = [first_obs["state"][0]]
        self.obs_times = [time.time()]  # when each of ``states`` was observed
        self.images = {cam: [img[0]] for cam, img in (first_obs.get("images") or {}).items()}
        self.instruction = (first_obs.get("instruction") or [""])[0]
        self.goal = np.array(env.goals[0])
        self.cols: dict[str, list[Any]] = {}
        self.rejections: dict[str, int] = {}

    def add(self, actions, raw, logp, value, version, result, intervened: bool = False) -> None:
        obs, reward, terminated, truncated, info = result
        self.states.append(obs["state"][0])
        self.obs_times.append(time.time())
        for cam, img in (obs.get("images") or {}).items():
            self.images[cam].append(img[0])
        row = {
            "actions": actions[0],
            "raw_actions": raw[0],
            "log_prob": np.float32(np.nan if logp is None else logp[0]),
            "value": np.float32(np.nan if value is None else value[0]),
            "versions": np.int64(version),
            "rewards": np.float32(reward[0]),
            "terminated": bool(terminated[0]),
            "truncated": bool(truncated[0]),
            "success": bool(info["success"][0]),
            "executed": np.int64(info["executed"][0]),
            "intervened": bool(intervened),
        }
        for key, v in row.items():
            self.cols.setdefault(key, []).append(v)
        if info.get("final_state") is not None:
            self.final_state = np.array(info["final_state"][0])
        for r in info["rejections"][0]:
            self.rejections[r["code"]] = self.rejections.get(r["code"], 0) + 1

    def finish(self, aborted: bool, reason: str = "") -> dict[str, Any]:
        """The episode as arrays; every per-step column is there even when no step was taken (a
        link cut between the reset and the first step's answer): readers index ``versions`` and
        the rest without asking."""
        steps = len(self.cols.get("rewards", []))
        out: dict[str, Any] = {k: np.asarray(v) for k, v in self.cols.items()}
        if not steps:
            out.update(empty_steps())
        out["states"] = np.stack(self.states)
        out["obs_times"] = np.asarray(self.obs_times)
        out["images"] = {cam: np.stack(v) for cam, v in self.images.items()}
        out["final_state"] = getattr(self, "final_state", self.states[-1])
        success = bool(out["success"][-1]) if steps else False
        out["meta"] = {
            "source": self.source,
            "instruction": self.instruction,
            "goal": self.goal.tolist(),
            "aborted": bool(aborted),
            "reason": reason,
            "steps": int(out["executed"].sum()) if steps else 0,
            "decisions": steps,
            "success": success and not aborted,
            "return": float(out["rewards"].sum()) if steps else 0.0,
            "t_start": self.t_start,
            "t_end": time.time(),
            "rejections": dict(self.rejections),
            "noise_scale": self.noise_scale,
            "reset": self.reset,
            "intervened_steps": int(out["intervened"].sum()) if steps else 0,
            "index": self.index,
        }
        out["aborted"] = bool(aborted)
        return out


def env_config_dict(cfg) -> dict[str, Any]:
    """A ``RealEnvConfig`` as the plain dict ``RealEnvWorker`` takes."""
    return asdict(cfg)
