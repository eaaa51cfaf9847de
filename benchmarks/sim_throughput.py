"""Env steps/s of the embedded MuJoCo env vs raw ``mj_step`` x substeps on the same model, same run.

For num_envs 1, 8, 64: our ``mujoco/fr3-reach`` (ee_delta actions: safety semantics, IK, state,
reward, auto-reset, thread pool) against the physical limit - the same compiled model stepping N
MjData by ``mj_step(m, d, substeps)`` in a plain loop, nothing else. Ours and raw run back to back
in each of 5 rounds; the ratio is the median of the per-round ratios (robust to a shared, noisy
machine), "ours" the best round and "raw" ours / ratio. Then 96x96 images (wrist + front):
env steps/s and rendered frames/s per core (llvmpipe pinned to one thread: LP_NUM_THREADS=1).

Last line: RESULT with the *worst* state-obs ratio over the three sizes (goal >= 0.5).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("LP_NUM_THREADS", "1")  # one render thread: frames/s is then per core
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import sim  # noqa: E402

SIZES = (1, 8, 64)
TARGET_S = 1.0  # seconds per measurement
ROUNDS = 5


def steps_for(n: int) -> int:
    return max(5, int(400 / n))


def time_ours(env, actions) -> float:
    t = time.perf_counter()
    for a in actions:
        env.step(a)
    return time.perf_counter() - t


def time_raw(model, datas, substeps: int, steps: int) -> float:
    t = time.perf_counter()
    for _ in range(steps):
        for d in datas:
            mujoco.mj_step(model, d, substeps)
    return time.perf_counter() - t


def bench_state(n: int, **opts) -> tuple[float, float]:
    env = sim.make("mujoco/fr3-reach", num_envs=n, **opts)
    try:
        env.reset(seed=0)
        steps = steps_for(n)
        rng = np.random.default_rng(0)
        spec = env.action_spec
        actions = rng.uniform(spec.low, spec.high, (steps, n, *spec.shape)).astype(np.float32)
        model = env.models[0]
        datas = [mujoco.MjData(model) for _ in range(n)]
        for d in datas:
            d.qpos[:] = env.datas[0].qpos
            d.ctrl[:] = env.datas[0].ctrl
            mujoco.mj_forward(model, d)
        time_ours(env, actions[:3])  # warm up
        time_raw(model, datas, env.substeps, 3)
        ours, raw = [], []
        for _ in range(ROUNDS):  # back to back, so each pair sees about the same machine load
            ours.append(n * steps / time_ours(env, actions))
            raw.append(n * steps / time_raw(model, datas, env.substeps, steps))
        ratio = statistics.median(o / r for o, r in zip(ours, raw, strict=True))
        return max(ours), max(ours) / ratio
    finally:
        env.close()


def bench_images(n: int) -> tuple[float, float]:
    env = sim.make("mujoco/fr3-reach", num_envs=n, image_size=96)
    try:
        env.reset(seed=0)
        steps = max(3, int(40 / n))
        spec = env.action_spec
        actions = (
            np.random.default_rng(0).uniform(spec.low, spec.high, (steps, n, *spec.shape)).astype(np.float32)
        )
        env.step(actions[0])
        step_rates, frame_rates = [], []
        for _ in range(ROUNDS):
            step_rates.append(n * steps / time_ours(env, actions))
            t = time.perf_counter()
            for _ in range(steps):
                env._rig.render(env.models, env.datas)
            frame_rates.append(n * len(env.cfg.cameras) * steps / (time.perf_counter() - t))
        return statistics.median(step_rates), statistics.median(frame_rates)
    finally:
        env.close()


def main() -> None:
    print(
        f"mujoco {mujoco.__version__}, {len(os.sched_getaffinity(0))} cores available, control 20 Hz = 25 substeps"
    )
    print(f"{'num_envs':>8} {'ours steps/s':>13} {'raw steps/s':>12} {'ratio':>6}")
    worst = None
    for n in SIZES:
        ours, raw = bench_state(n)
        ratio = ours / raw
        print(f"{n:>8} {ours:>13.0f} {raw:>12.0f} {ratio:>6.2f}")
        if worst is None or ratio < worst[2]:
            worst = (ours, raw, ratio)
    one, _ = bench_state(64, num_threads=1)
    two, _ = bench_state(64, num_threads=2)
    print(f"thread pool at num_envs=64: 2 threads {two:.0f} vs 1 thread {one:.0f} steps/s = {two / one:.2f}x")
    print(f"{'num_envs':>8} {'steps/s 96px':>13} {'frames/s/core':>14}   (images: wrist + front)")
    frames = []
    for n in SIZES:
        rate, fps = bench_images(n)
        frames.append(fps)
        print(f"{n:>8} {rate:>13.0f} {fps:>14.0f}")
    print(f"image frames/s per core: {min(frames):.0f} worst, goal >= 300")
    ours, raw, ratio = worst
    print(
        f"RESULT sim_throughput_state ours={ours:.0f}steps/s peer={raw:.0f}steps/s ratio={ratio:.2f} goal=>=0.5"
    )


if __name__ == "__main__":
    main()
