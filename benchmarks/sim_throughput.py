"""Env steps/s of the embedded MuJoCo env vs raw ``mj_step`` x substeps on the same model, the same
number of threads, the same run.

- ours: ``sim.make("mujoco/fr3-reach", num_envs=N, num_threads=T)`` stepped with random ee_delta
  actions (safety semantics, IK, physics in its thread pool, state, reward, auto-reset).
- raw (the peer, the physical limit): the same compiled scene, N ``MjData`` started from the env's
  reset poses, on a pool of the same T threads, each thread stepping its share of the MjData with
  ``mj_step(model, data, substeps)`` and nothing else; one barrier per control tick, as any batched
  env needs before it can hand the observations to a policy. With images, raw also renders both
  96x96 cameras of every env (``mjv_updateScene`` + ``mjr_render`` + ``mjr_readPixels``, one GL
  context, the same geometry groups the env draws) after each tick.

T is the env's own default (one thread per 4 envs, at most one per core), passed explicitly to both.
Configurations: state at N = 1, 8, 64 (and 64 on one thread), 96x96 wrist + front images at N = 1,
8, 64. Every round runs ours and raw back to back (order alternating), the same number of ticks;
figures are medians over rounds, both printed per configuration. llvmpipe renders on one thread
(LP_NUM_THREADS=1), so frames/s are per core.

Last line: RESULT for the state configuration with the worst ours/raw ratio (goal >= 0.5).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
os.environ.setdefault("LP_NUM_THREADS", "1")  # one render thread: frames/s is then per core
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import sim  # noqa: E402

ENV = "mujoco/fr3-reach"
SCENE = "reach.xml"  # its scene file in sim/mujoco/assets/
SIZES = (1, 8, 64)
CAMERAS = ("wrist", "front")
IMAGE = 96
DRAWN_GROUPS = (0, 1, 3)  # what the env draws without full meshes: table, objects, arm collision meshes


def default_threads(n: int) -> int:
    return min(len(os.sched_getaffinity(0)), max(1, n // 4))


def build_scene():
    """The compiled fr3-reach scene (FR3 + table + goal marker from ``sim/mujoco/assets/reach.xml``),
    as the env compiles it (its servo gains aside, which change no cost of ``mj_step``)."""
    from sim.mujoco.scene import build_model

    return build_model(SCENE)


class RawBatch:
    """N MjData of one model on T threads: ``tick()`` is ``mj_step(m, d, substeps)`` for each,
    every thread its share (round robin), then (with ``image_size``) every env's cameras rendered."""

    def __init__(self, model, obs: dict, slices: dict, substeps: int, threads: int, image_size: int = 0):
        self.model, self.substeps = model, substeps
        n = len(obs["state"])
        self.datas = [mujoco.MjData(model) for _ in range(n)]
        q, width = obs["state"][:, slices["joint_pos"]], obs["state"][:, slices["gripper_width"]]
        for i, d in enumerate(self.datas):  # the env's reset pose, targets held, gripper open
            d.qpos[:7] = q[i]
            d.qpos[7:9] = width[i, 0] / 2
            d.ctrl[:7] = q[i]
            d.ctrl[7:] = model.actuator_ctrlrange[7:, 1]
            mujoco.mj_forward(model, d)
        self.shares = [self.datas[k::threads] for k in range(threads)]
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        self.render_s, self.frames = 0.0, 0
        self.gl = None
        if image_size:
            self._init_render(image_size)

    def _init_render(self, size: int) -> None:
        m = self.model
        self.gl = mujoco.GLContext(size, size)
        self.gl.make_current()
        self.ctx = mujoco.MjrContext(m, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self.ctx)
        self.scene = mujoco.MjvScene(m, maxgeom=200)
        self.opt = mujoco.MjvOption()
        self.opt.geomgroup[:] = [int(g in DRAWN_GROUPS) for g in range(len(self.opt.geomgroup))]
        self.opt.sitegroup[:] = 0
        self.rect = mujoco.MjrRect(0, 0, size, size)
        self.cams = []
        for name in CAMERAS:
            cam = mujoco.MjvCamera()
            cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
            cam.fixedcamid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, name)
            self.cams.append(cam)
        self.pixels = np.empty((len(self.datas), len(CAMERAS), size, size, 3), np.uint8)

    def _step(self, share) -> None:
        for d in share:
            mujoco.mj_step(self.model, d, self.substeps)

    def tick(self) -> None:
        if self.pool is None:
            self._step(self.shares[0])
        else:
            for f in [self.pool.submit(self._step, s) for s in self.shares]:
                f.result()
        if self.gl is not None:
            t = time.perf_counter()
            self.gl.make_current()
            for i, d in enumerate(self.datas):
                for c, cam in enumerate(self.cams):
                    mujoco.mjv_updateScene(
                        self.model, d, self.opt, None, cam, mujoco.mjtCatBit.mjCAT_ALL, self.scene
                    )
                    mujoco.mjr_render(self.rect, self.scene, self.ctx)
                    mujoco.mjr_readPixels(self.pixels[i, c], None, self.rect, self.ctx)
            self.render_s += time.perf_counter() - t
            self.frames += len(self.datas) * len(self.cams)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
        if self.gl is not None:
            self.ctx.free()
            self.gl.free()
            self.gl = None


def time_ours(env, actions) -> float:
    t = time.perf_counter()
    for a in actions:
        env.step(a)
    return time.perf_counter() - t


def time_raw(raw: RawBatch, ticks: int) -> float:
    t = time.perf_counter()
    for _ in range(ticks):
        raw.tick()
    return time.perf_counter() - t


def bench(model, n: int, threads: int, ticks: int, rounds: int, image_size: int = 0) -> dict:
    """Env steps/s of ours and raw over ``rounds`` interleaved rounds of ``ticks`` control ticks."""
    opts = {"image_size": image_size, "cameras": CAMERAS} if image_size else {}
    env = sim.make(ENV, num_envs=n, num_threads=threads, **opts)
    raw = None
    try:
        obs = env.reset(seed=0)
        spec = env.action_spec
        substeps = round(1.0 / (spec.control_hz * model.opt.timestep))
        raw = RawBatch(model, obs, env.obs_spec.state_slices(), substeps, threads, image_size)
        rng = np.random.default_rng(0)
        actions = rng.uniform(spec.low, spec.high, (ticks, n, *spec.shape)).astype(np.float32)
        time_ours(env, actions[:3])  # warm up
        time_raw(raw, 3)
        raw.render_s, raw.frames = 0.0, 0
        ours, peer = [], []
        for r in range(rounds):
            for which in ("ours", "raw") if r % 2 == 0 else ("raw", "ours"):
                if which == "ours":
                    ours.append(n * ticks / time_ours(env, actions))
                else:
                    peer.append(n * ticks / time_raw(raw, ticks))
        out = {
            "ours": statistics.median(ours),
            "raw": statistics.median(peer),
            "per_round": [o / p for o, p in zip(ours, peer, strict=True)],
            "substeps": substeps,
        }
        if image_size:
            out["raw_render_fps"] = raw.frames / raw.render_s
            out["ours_fps"] = out["ours"] * len(CAMERAS)
        return out
    finally:
        env.close()
        if raw is not None:
            raw.close()


def row(obs: str, n: int, threads: int, res: dict) -> float:
    """Print one configuration; returns its ours/raw ratio (of the medians)."""
    ratio = res["ours"] / res["raw"]
    rounds = ", ".join(f"{x:.2f}" for x in res["per_round"])
    print(f"{obs:>6} {n:>8} {threads:>7} {res['ours']:>13.0f} {res['raw']:>12.0f} {ratio:>6.2f}   {rounds}")
    return ratio


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--state-ticks", type=int, default=1000, help="env steps per measurement (state)")
    ap.add_argument("--image-ticks", type=int, default=100, help="env steps per measurement (images)")
    args = ap.parse_args()

    model = build_scene()
    print(
        f"mujoco {mujoco.__version__}, {len(os.sched_getaffinity(0))} cores available, {ENV}, 20 Hz control"
    )
    head = f"{'obs':>6} {'num_envs':>8} {'threads':>7} {'ours steps/s':>13} {'raw steps/s':>12} {'ratio':>6}   per round"
    print(head)
    worst = None
    configs = [(n, default_threads(n)) for n in SIZES] + [(64, 1)]
    for n, threads in configs:
        res = bench(model, n, threads, max(5, args.state_ticks // n), args.rounds)
        ratio = row("state", n, threads, res)
        if threads == default_threads(n) and (worst is None or ratio < worst[2]):
            worst = (res["ours"], res["raw"], ratio, n)
    frames = []
    for n in SIZES:
        threads = default_threads(n)
        res = bench(model, n, threads, max(3, args.image_ticks // n), args.rounds, image_size=IMAGE)
        row(f"{IMAGE}px", n, threads, res)
        frames.append((res["ours_fps"], res["raw_render_fps"]))
    print(
        "frames/s per core (96x96, 2 cameras): ours "
        + ", ".join(f"{o:.0f}" for o, _ in frames)
        + " (physics included); raw render alone "
        + ", ".join(f"{r:.0f}" for _, r in frames)
        + f" at {', '.join(map(str, SIZES))} envs; goal >= 300"
    )
    ours, raw, ratio, n = worst
    print(f"worst state ratio at {n} envs")
    print(
        f"RESULT sim_throughput_state ours={ours:.0f}steps/s peer={raw:.0f}steps/s ratio={ratio:.2f} goal=>=0.5"
    )


if __name__ == "__main__":
    main()
