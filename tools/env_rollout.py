"""One random-action rollout of any registered env; prints env steps/s (used by gpu_check.sh).

    python tools/env_rollout.py isaaclab/franka-lift --num-envs 256 --steps 200 --opt device=cuda:0

It lives in tools/, not benchmarks/: with no peer to compare with it prints a ROLLOUT line, not a
RESULT line.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import sim  # noqa: E402


def parse_opt(text: str) -> tuple[str, object]:
    key, _, value = text.partition("=")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("env")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--opt", action="append", default=[], help="env option key=value (Python literal)")
    args = p.parse_args()
    opts = dict(parse_opt(o) for o in args.opt)
    t0 = time.perf_counter()
    env = sim.make(args.env, num_envs=args.num_envs, **opts)
    make_s = time.perf_counter() - t0
    try:
        env.reset(seed=0)
        spec = env.action_spec
        rng = np.random.default_rng(0)
        acts = rng.uniform(spec.low, spec.high, (args.warmup + args.steps, args.num_envs, *spec.shape))
        acts = acts.astype(np.float32)
        for a in acts[: args.warmup]:
            env.step(a)
        t = time.perf_counter()
        successes = 0
        for a in acts[args.warmup :]:
            _, _, _, _, info = env.step(a)
            successes += int(np.sum(info["success"]))
        dt = time.perf_counter() - t
    finally:
        env.close()
    rate = args.num_envs * args.steps / dt
    print(
        f"ROLLOUT {args.env} num_envs={args.num_envs} steps={args.steps} make_s={make_s:.1f} "
        f"steps_per_s={rate:.0f} successes={successes}"
    )


if __name__ == "__main__":
    main()
