"""``rlinf-robot replay``: a recorded episode re-run in the sim twin reports how far the sim drifts
from what the "arm" did. The arm here is the MuJoCo FR3 itself, recorded through the real recorder
into a real run dir: replayed in an identical twin the residual is numerical noise; recorded on an
FR3 whose joints are 4x as damped and whose servos are 30 % weaker, it is not."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

pytestmark = pytest.mark.slow
sim = pytest.importorskip("sim")
pytest.importorskip("mujoco")
pytest.importorskip("pyarrow")

CHUNK = 4


def run_dir(tmp_path, randomization, episodes=2):
    """A run dir (config.yaml of the default job) whose datasets/arm0 holds ``episodes`` episodes
    recorded on the MuJoCo FR3 under ``randomization`` (None: the twin's own model)."""
    from rlinf_robot.data.recorder import RealEpisodeRecorder
    from rlinf_robot.orchestrator.config import compose, to_yaml

    cfg = compose(["seed=3"])
    root = tmp_path / "run"
    root.mkdir()
    (root / "config.yaml").write_text(to_yaml(cfg))
    kwargs = {**cfg.sim_make_kwargs(), "randomization": randomization, "seed": 11}
    env = sim.make(cfg.sim_env, num_envs=1, **kwargs)
    rec = RealEpisodeRecorder(
        root / "datasets" / "arm0", env.action_spec, env.obs_spec, cfg.task.control_hz, task=cfg.task.name
    )
    rng = np.random.default_rng(5)
    spec = env.action_spec
    for _ in range(episodes):
        obs = env.reset()
        goal = env.goal[0].tolist()
        states, cols = (
            [obs["state"][0]],
            {k: [] for k in ("actions", "rewards", "terminated", "truncated", "success", "executed")},
        )
        while True:
            chunk = (rng.uniform(spec.low, spec.high, (CHUNK, spec.shape[0])) * 0.6).astype(np.float32)
            obs, reward, term, trunc, info = env.chunk_step(chunk[None])
            for key, v in zip(
                cols,
                (chunk, reward[0], term[0], trunc[0], info["success"][0], info["executed"][0]),
                strict=True,
            ):
                cols[key].append(v)
            if info["done"][0]:
                final = info["final_state"][0]
                break
            states.append(obs["state"][0])
        n = len(cols["actions"])
        episode = {
            **{k: np.asarray(v) for k, v in cols.items()},
            "raw_actions": np.asarray(cols["actions"]),
            "states": np.stack([*states, final]),
            "final_state": final,
            "log_prob": np.zeros(n, np.float32),
            "value": np.zeros(n, np.float32),
            "versions": np.zeros(n, np.int64),
            "images": {},
            "meta": {
                "source": "real:arm0",
                "aborted": False,
                "success": bool(cols["success"][-1]),
                "return": float(np.sum(cols["rewards"])),
                "steps": int(np.sum(cols["executed"])),
                "t_start": 0.0,
                "t_end": 3.0,
                "goal": goal,
                "instruction": env.instruction,
            },
        }
        rec.record(episode)
    env.close()
    return root


def replay(root) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-m", "rlinf_robot.cli", "replay", str(root), "--json", str(root / "replay.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 episode(s) of arm0" in out.stdout, out.stdout
    return json.loads((root / "replay.json").read_text())


def test_the_twin_reproduces_an_episode_of_its_own_model(tmp_path):
    for s in replay(run_dir(tmp_path, None)):
        # float32 recording of the start state is the only difference: numerical noise (measured
        # 0.6-1.0e-7 rad joint RMS, 0.0001 mm TCP)
        assert s["steps"] == 15 and s["joint_rms_rad"] < 1e-5 and s["tcp_max_mm"] < 0.01, s


def test_an_arm_unlike_the_twin_shows_as_residual(tmp_path):
    from sim.randomization import DomainRandomization, ParamRange

    other = replace(
        DomainRandomization.off(), joint_damping=ParamRange(4.0, 4.0), actuator_gain=ParamRange(0.7, 0.7)
    )
    for s in replay(run_dir(tmp_path, other)):
        print(s)  # measured: 1.7 mrad joint RMS, TCP 1.3 mm on average: ~10^4 x the twin's own noise
        assert s["joint_rms_rad"] > 5e-4 and s["tcp_mean_mm"] > 0.4, s


def test_bad_input_is_one_clear_error(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "rlinf_robot.cli", "replay", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "not a run dir with recorded episodes" in out.stdout, (
        out.stdout + out.stderr
    )
    root = run_dir(tmp_path, None, episodes=1)
    out = subprocess.run(
        [sys.executable, "-m", "rlinf_robot.cli", "replay", str(root), "--episode", "7"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2 and "no committed episode 7" in out.stdout, out.stdout + out.stderr
