"""Push and lift learned on the embedded MuJoCo tasks, each within a 15-minute wall-time budget.

Runs the registered recipes (``rlinf_robot.algorithms.recipes``; default ``push_sft`` and
``lift_sft``) in full, one after the other, with one torch thread (``--threads``), and prints for each: the learner's
env steps, the scripted expert's recorded steps, wall time (demos + training, up to the final
evaluation), training success where training episodes ran, and the deterministic success over the
recipe's held-out episodes (64; 256 per task for ``vla_pixels``), beside a uniform random policy's success on the same episodes.
Not part of the test suite (tests/algorithms/test_learning.py runs the same recipes on a CI budget).

The goal (issue 16): >= 80 % deterministic success on every task within 15 minutes. The RESULT lines are
machine-readable: RESULT learn_tasks ours=<worst success> peer=0.80 ratio=<ours/peer> goal=>=1
(a run that went over its budget counts as 0). ``vla_pixels`` adds a line of its own against the
issue's per-task bars (reach >= 0.9, push and lift >= 0.7), and its summary pairs the RL stage
against the clone on the same held-out episodes (wins, losses, sign-test p), per task and pooled:
RESULT vla_pixels_rl_vs_sft ours=<RL success> peer=<the clone's> ratio=... goal=>=1 (the clone scored
in the same run, on the same episodes; the summary's p says whether the difference is chance).

    python benchmarks/learn_tasks.py                       # push_sft, lift_sft, seed 0
    python benchmarks/learn_tasks.py --recipes reach_ppo push_sft --seeds 0 1 2
    python benchmarks/learn_tasks.py --recipes vla_pixels --budget 7200 --verbose   # SFT + GRPO, ~100 min
    # one clone, then several RL seeds from it:
    python benchmarks/learn_tasks.py --recipes vla_pixels --sft-only --threads 2 --budget 7200 --save clones
    python benchmarks/learn_tasks.py --recipes vla_pixels --init-from clones/vla_pixels-seed0 --seeds 1 2 3
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MUJOCO_GL", "osmesa")

GOAL = 0.80
#: Issue 16's per-task bars for the multi-task pixel VLA (its own RESULT line: the worst task's
#: success over its bar, goal >= 1).
TASK_BARS = {"vla_pixels": {"mujoco/fr3-reach": 0.90, "mujoco/fr3-push": 0.70, "mujoco/fr3-lift": 0.70}}


def _save(policy, path: Path) -> None:
    """A VLA as ``save_pretrained`` writes it (config, weights, tokenizer: what ``--init-from`` and
    ``from_pretrained`` load); any other policy as its state dict, ``<path>.pt``."""
    import torch

    if hasattr(policy, "save_pretrained"):
        policy.save_pretrained(path)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(policy.state_dict(), path.with_suffix(".pt"))
    print(f"saved the policy to {path}", flush=True)


def main() -> None:
    import torch

    from rlinf_robot.algorithms.recipes import ALL_TASKS, available_recipes, get_recipe

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", nargs="+", default=["push_sft", "lift_sft"], choices=available_recipes())
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--budget", type=float, default=900.0, help="wall-time budget per run, s")
    parser.add_argument(
        "--eval-episodes", type=int, default=None, help="held-out episodes per task (default: the recipe's)"
    )
    parser.add_argument("--verbose", action="store_true", help="print every logged training entry")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (a different count sums floats in a different order: another clone of the same recipe)",
    )
    parser.add_argument(
        "--save", type=Path, default=None, help="save each run's trained policy to SAVE/<recipe>-seed<N>"
    )
    parser.add_argument(
        "--init-from",
        type=Path,
        default=None,
        help="vla_pixels: start from this saved clone (a --save of its run with grpo_iterations=0) "
        "instead of recording demos and cloning; each seed is then one RL run from the same clone",
    )
    parser.add_argument(
        "--sft-only", action="store_true", help="vla_pixels: the SFT stage alone (grpo_iterations=0)"
    )
    args = parser.parse_args()
    if args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    torch.set_num_threads(args.threads)

    rows, worst = [], 1.0
    for name in args.recipes:
        overrides = {} if args.eval_episodes is None else {"eval_episodes": args.eval_episodes}
        if args.init_from is not None:
            overrides["init_from"] = str(args.init_from)
        if args.sft_only:
            overrides["grpo_iterations"] = 0
        recipe = get_recipe(name, **overrides)
        random_success = recipe.random_success()
        for seed in args.seeds:
            res = recipe.run(seed=seed, budget_s=args.budget, log=print if args.verbose else None)
            print(f"{res.summary()}; random policy {random_success:.2f}", flush=True)
            if args.save is not None:
                _save(res.policy, args.save / f"{name}-seed{seed}")
            within = res.wall_s <= args.budget
            worst = min(worst, res.eval_success if within else 0.0)
            rows.append((res, random_success))

    print()
    print(
        f"{'recipe':<10} {'env':<17} seed {'env steps':>9} {'expert':>7} {'wall s':>7} {'train':>6} "
        f"{'eval':>5} {'random':>6}"
    )
    for res, random_success in rows:
        train = "-" if res.train_success is None else f"{res.train_success:.2f}"
        print(
            f"{res.recipe:<10} {res.env:<17} {res.seed:>4} {res.env_steps:>9} {res.demo_env_steps:>7} "
            f"{res.wall_s:>7.0f} {train:>6} {res.eval_success:>5.2f} {random_success:>6.2f}"
        )
    print(f"RESULT learn_tasks ours={worst:.2f} peer={GOAL:.2f} ratio={worst / GOAL:.2f} goal=>=1")
    for res, _ in rows:
        bars = TASK_BARS.get(res.recipe)
        if bars:
            within = res.wall_s <= args.budget
            ratio = min(res.eval_by_task[t] / bar for t, bar in bars.items()) if within else 0.0
            shown = " ".join(
                f"{t.split('-')[-1]}={res.eval_by_task[t]:.3f}/{bar:.2f}" for t, bar in bars.items()
            )
            print(f"{res.recipe} against its bars: {shown}")
            print(f"RESULT {res.recipe}_bars ours={ratio:.3f} peer=1.00 ratio={ratio:.3f} goal=>=1")
        pooled = res.rl_vs_sft.get(ALL_TASKS)
        if pooled is not None:  # the RL stage against its own clone, every task's episodes paired
            print(f"{res.recipe} RL vs SFT, all tasks: {pooled}")
            print(
                f"RESULT {res.recipe}_rl_vs_sft ours={pooled.after:.3f} peer={pooled.before:.3f} "
                f"ratio={pooled.after / max(pooled.before, 1e-9):.3f} goal=>=1"
            )


if __name__ == "__main__":
    main()
