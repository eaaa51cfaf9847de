"""``rlinf-robot replay runs/<id> [--robot arm0] [--episode N ...]``: re-run a run's recorded real
episodes in its sim twin (the training sim of ``runs/<id>/config.yaml``, randomization off) from the
arm's recorded start, with the same action chunks, and print how far the sim drifts from what the arm
did: joint RMS (rad) and TCP error (mm) per episode, then over all of them (``rlinf_robot.data.replay``).
``--json`` writes the per-episode figures to a file as well."""

from __future__ import annotations

HELP = "replay recorded real episodes in the sim twin and report the trajectory residual"


def add_arguments(parser) -> None:
    parser.add_argument("run_dir", help="a run dir with config.yaml and datasets/<robot>/")
    parser.add_argument("--robot", default="", help="which robot's dataset (default: the only one)")
    parser.add_argument("--episode", type=int, nargs="*", default=None, help="episode indices (default: all)")
    parser.add_argument("--json", default="", help="also write the per-episode figures to this file")


def run(args) -> int:
    import json
    from pathlib import Path

    import numpy as np

    from rlinf_robot.data.replay import RecordedEpisodes, replay_episode, sim_twin

    run_dir = Path(args.run_dir)
    robots = sorted(p.name for p in (run_dir / "datasets").glob("*") if p.is_dir())
    if not (run_dir / "config.yaml").exists() or not robots:
        print(
            f"rlinf-robot replay: {run_dir} is not a run dir with recorded episodes (config.yaml, datasets/<robot>/)"
        )
        return 2
    robot = args.robot or robots[0]
    if robot not in robots or (not args.robot and len(robots) > 1):
        print(f"rlinf-robot replay: name the robot with --robot, one of {robots}")
        return 2
    data = RecordedEpisodes(run_dir / "datasets" / robot)
    episodes = args.episode if args.episode is not None else [int(r["episode_index"]) for r in data.rows]
    env = sim_twin(run_dir)
    out = []
    try:
        for ep in episodes:
            try:
                row, frames = data.frames(ep)
            except IndexError as e:
                print(f"rlinf-robot replay: {e}")
                return 2
            s = replay_episode(env, row, frames).summary()
            out.append(s)
            print(
                f"episode {ep:4d}: {s['steps']:3d} chunks{' (aborted)' if s['aborted'] else ''}  joint RMS "
                f"{s['joint_rms_rad'] * 1e3:7.2f} mrad  TCP mean {s['tcp_mean_mm']:6.1f} max {s['tcp_max_mm']:6.1f} "
                f"final {s['tcp_final_mm']:6.1f} mm"
            )
    finally:
        env.close()
    if out:
        rms = float(np.sqrt(np.mean([s["joint_rms_rad"] ** 2 for s in out])))
        tcp = float(np.mean([s["tcp_mean_mm"] for s in out]))
        print(f"{len(out)} episode(s) of {robot}: joint RMS {rms * 1e3:.2f} mrad, TCP mean {tcp:.1f} mm")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0
