"""``rlinf-robot session``: real-to-sim-to-real in one run dir, stage by stage.

The stages (``session.stages``, in this order; each one skippable by leaving it out, and a
``--resume`` runs only those not done yet):

1. **calibrate** - camera intrinsics and hand-eye from the calibration store: valid records are
   reused; stale or out-of-bounds ones stop the session with the reason (``session.recalibrate``
   redoes them, ``calibration.force`` uses them anyway); missing ones are made, on the embedded
   default from rendered ChArUco views (``rlinf-robot calibrate ... --sim``); a real arm needs its
   own views first (``rlinf-robot calibrate intrinsics|handeye``).
2. **sysid** - the same for the arm's dynamics: a missing fit is identified on the arm (franka-sim
   serving the robot PC's arm on the embedded default, ``session.sysid_host`` for a real FR3).
3. **sim** - PPO in the calibrated sim: randomized around that fit (``calibration.sysid``), its
   camera placed where hand-eye calibration found it (``calibration.camera``; which camera is
   ``session.handeye_mode``'s: the fixed front one for ``eye_to_hand``, the session's default, whose
   task sees its goal through that camera).
4. **nominal** - the comparison: the same policy trained on the nominal sim for the sim and hybrid
   stages' budgets together (what the session is measured against).
5. **hybrid** - the sim stage's policy fine-tuned in the hybrid loop (``run.init_from``): the arm's
   episodes and the calibrated sim's together.
6. **eval** - every trained stage on the arm, the same number of deterministic episodes each,
   success with 95 % intervals.

Each training stage is a ``TrainJob`` with its own run dir under the session's (``sim/``,
``nominal/``, ``hybrid/``), so each has its report, checkpoints and recorded datasets; the
session's ``session.json`` keeps what each stage made and ``report.html`` compares them.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlinf_robot.errors import ConfigError
from rlinf_robot.orchestrator.config import SESSION_STAGES, TrainConfig, from_yaml, to_yaml

#: the runs the eval stage puts on the arm, in the report's order
TRAINED = ("nominal", "sim", "hybrid")


@dataclass
class SessionState:
    """``session.json``: per stage, when it finished and what it made."""

    done: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> SessionState:
        return cls(**json.loads(path.read_text())) if path.exists() else cls()

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"done": self.done}, indent=2, default=float))
        tmp.replace(path)


class Session:
    def __init__(self, cfg: TrainConfig, say: Callable[[str], None] | None = None):
        self.cfg = cfg
        self._t0 = time.monotonic()
        self._print = say or (lambda m: print(m, flush=True))
        if cfg.run.resume:
            self.dir = Path(cfg.run.resume)
            if not (self.dir / "session.yaml").exists():
                raise ConfigError(f"--resume: {self.dir} is not a session dir (no session.yaml)")
        else:
            run_id = cfg.run.id or time.strftime("%Y%m%d-%H%M%S") + "-session"
            self.dir = Path(cfg.run.dir) / run_id
            self.dir.mkdir(parents=True, exist_ok=False)
            (self.dir / "session.yaml").write_text(to_yaml(cfg))
        self.state = SessionState.load(self.dir / "session.json")
        from calibration.store import CalibrationStore

        self.store = CalibrationStore(cfg.calibration.store or None)

    def say(self, msg: str) -> None:
        self._print(f"[{time.monotonic() - self._t0:7.1f}s] session: {msg}")

    # ------------------------------------------------------------------ the stages in order
    def run(self) -> SessionState:
        for name in SESSION_STAGES:
            if name not in self.cfg.session.stages:
                continue
            if name in self.state.done:
                self.say(f"{name}: done earlier, skipped")
                continue
            self.say(f"{name}: starting")
            t = time.monotonic()
            out = STAGES[name](self)
            self.state.done[name] = {**out, "wall_s": round(time.monotonic() - t, 1)}
            self.state.save(self.dir / "session.json")
            self.say(f"{name}: done in {time.monotonic() - t:.0f} s")
        report = self.report()
        self.say(f"report {report}")
        return self.state

    # ------------------------------------------------------------------ calibration
    def _valid_or_stop(self, kind: str, serial: str):
        """The latest record of ``kind``: None when there is none (or ``recalibrate``); a stale or
        out-of-bounds one stops the session with the reason unless ``calibration.force``."""
        if self.cfg.session.recalibrate:
            return None
        hint = "session.recalibrate=true redoes it, calibration.force=true uses it anyway"
        return self.store.usable("latest", kind, self.cfg.calibration.force, robot_serial=serial, hint=hint)

    def _calibrate_cli(self, argv: list[str], out: Path) -> None:
        """One ``rlinf-robot calibrate`` run, exactly as a user would start it."""
        from rlinf_robot.commands import calibrate

        parser = argparse.ArgumentParser(prog="rlinf-robot calibrate")
        calibrate.add_arguments(parser)
        store = ["--store", str(self.store.root), "--out", str(out)]
        args = parser.parse_args([argv[0], *store, *argv[1:]])
        code = calibrate.run(args)
        if code != 0:
            raise ConfigError(f"rlinf-robot calibrate {' '.join(argv)} failed (exit {code})")

    def _embedded(self) -> bool:
        return self.cfg.robot.kind == "sim_local"

    def calibrate(self) -> dict[str, Any]:
        s = self.cfg.session
        ids = {}
        for kind, argv in (
            ("intrinsics", ["intrinsics", "--sim", "--views", str(s.calibrate_views)]),
            ("handeye", ["handeye", "--sim", "--poses", str(s.calibrate_poses), "--mode", s.handeye_mode]),
        ):
            rec = self._valid_or_stop(kind, s.robot_serial)
            if rec is not None and kind == "handeye" and rec.payload.get("mode") != s.handeye_mode:
                self.say(
                    f"handeye: {rec.id} calibrated {rec.payload.get('mode')}, this session needs {s.handeye_mode}"
                )
                rec = None
            if rec is None:
                if not self._embedded():
                    raise ConfigError(
                        f"no valid {kind} calibration for {s.robot_serial}: run `rlinf-robot calibrate "
                        f"{kind}` with this arm's views first (or leave calibrate out of session.stages)"
                    )
                self.say(f"{kind}: calibrating on rendered ChArUco views")
                serials = ["--robot-serial", s.robot_serial, "--camera-serial", s.camera_serial]
                if kind == "handeye" and "intrinsics" in ids:  # the record names the lens it used
                    serials += ["--intrinsics", ids["intrinsics"]]
                self._calibrate_cli([*argv, *serials], self.dir / "calibration" / kind)
                rec = self.store.latest(kind, robot_serial=s.robot_serial)
            else:
                self.say(f"{kind}: using {rec.id}")
            ids[kind] = rec.id
        return {"ids": ids}

    def sysid(self) -> dict[str, Any]:
        s = self.cfg.session
        rec = self._valid_or_stop("sysid", s.robot_serial)
        if rec is None:
            argv = ["sysid", "--robot-serial", s.robot_serial, "--duration", str(s.sysid_duration_s)]
            argv += ["--max-evals", str(s.sysid_max_evals)]
            if s.sysid_host:
                argv += ["--host", s.sysid_host]
            elif self._embedded():
                argv += ["--sim-config", str(self._robot_yaml())]
            else:
                raise ConfigError("session.sysid_host: the arm's FCI address, to identify its dynamics")
            self.say("identifying the arm's dynamics (excitation through franky, fit in MuJoCo)")
            self._calibrate_cli(argv, self.dir / "calibration" / "sysid")
            rec = self.store.latest("sysid", robot_serial=s.robot_serial)
        else:
            self.say(f"sysid: using {rec.id}")
        res = rec.residuals
        return {
            "id": rec.id,
            "residual_rms_before_rad": res.get("residual_rms_before_rad"),
            "residual_rms_rad": res.get("residual_rms_rad"),
        }

    def _robot_yaml(self) -> Path:
        """The embedded robot PC's YAML with this session's arm (``robot.overrides``)."""
        from rlinf_robot.orchestrator import robot_pc

        path, _ = robot_pc.prepare(self.cfg.robot, self.dir)
        return path

    # ------------------------------------------------------------------ training
    def _job_config(self, name: str, mode: str, wall_s: float, sysid: bool) -> TrainConfig:
        cfg = copy.deepcopy(self.cfg)
        cfg.mode = mode
        cfg.run.dir, cfg.run.id, cfg.run.resume = str(self.dir), name, None
        cfg.budget.wall_s = wall_s
        cfg.calibration.sysid = self.state.done["sysid"]["id"] if sysid else ""
        ids = self.state.done.get("calibrate", {}).get("ids", {})
        cfg.calibration.require = sorted(ids) if sysid else []
        cfg.calibration.camera = ids.get("handeye", "") if sysid else ""  # the calibrated camera
        cfg.eval.arm_episodes = cfg.eval.baseline_arm_episodes = 0  # the eval stage measures all alike
        if mode == "sim_only":
            cfg.robot.kind = "none"
        return cfg.check()

    def _train(self, cfg: TrainConfig) -> dict[str, Any]:
        from rlinf_robot.orchestrator.job import TrainJob

        result = TrainJob(cfg).run()
        if result.interrupted:
            raise KeyboardInterrupt
        return {"run": str(result.run_dir), "update": result.state.update, "sim": result.eval.get("sim")}

    def _needs(self, stage: str) -> None:
        if stage not in self.state.done:
            raise ConfigError(f"session stage {stage!r} has not run in {self.dir}: it comes first")

    def sim(self) -> dict[str, Any]:
        self._needs("sysid")
        return self._train(self._job_config("sim", "sim_only", self.cfg.session.sim_wall_s, sysid=True))

    def nominal(self) -> dict[str, Any]:
        s = self.cfg.session
        return self._train(
            self._job_config("nominal", "sim_only", s.sim_wall_s + s.hybrid_wall_s, sysid=False)
        )

    def hybrid(self) -> dict[str, Any]:
        self._needs("sim")
        cfg = self._job_config("hybrid", "hybrid", self.cfg.session.hybrid_wall_s, sysid=True)
        cfg.run.init_from = self.state.done["sim"]["run"]
        return self._train(cfg.check())

    def eval(self) -> dict[str, Any]:
        """Every trained stage's policy on the arm; on the embedded default one robot PC serves
        them all (each ``rlinf-robot eval`` would start its own)."""
        from rlinf_robot.commands.eval import evaluate

        n = self.cfg.eval.arm_episodes
        endpoints = list(self.cfg.robot.endpoints)
        robot = None
        if self._embedded():
            from rlinf_robot.orchestrator import robot_pc

            config, endpoint = robot_pc.prepare(self.cfg.robot, self.dir / "eval")
            robot = robot_pc.launch(config, self.cfg.robot.ready_timeout_s)
            endpoints = [endpoint]
        overrides = [
            f"eval.arm_episodes={n}",
            "robot.kind=remote",
            f"robot.endpoints=[{','.join(endpoints)}]",
        ]
        out = {}
        try:
            if robot is not None:
                robot.wait_ready(self.cfg.robot.ready_timeout_s)
                self.say("eval: robot PC up")
            for name in TRAINED:
                if name not in self.state.done:
                    continue
                self.say(f"eval: the {name} stage's policy on the arm, {n} episodes")
                r = evaluate(self.state.done[name]["run"], overrides, "arm")["arm"]
                out[name] = {k: r[k] for k in ("successes", "n", "rate", "ci95")}
                self.say(f"eval: {name}: {r['rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}]")
        finally:
            if robot is not None:
                robot.stop()
                (self.dir / "eval" / "robot_pc.log").write_text(robot.text())
        return {"arm": out}

    # ------------------------------------------------------------------ report
    def report(self) -> Path:
        from rlinf_robot.orchestrator.session_report import write_session_report

        return write_session_report(self.dir, self.state.done, to_yaml(self.cfg))


STAGES: dict[str, Callable[[Session], dict[str, Any]]] = {
    "calibrate": Session.calibrate,
    "sysid": Session.sysid,
    "sim": Session.sim,
    "nominal": Session.nominal,
    "hybrid": Session.hybrid,
    "eval": Session.eval,
}
assert tuple(STAGES) == SESSION_STAGES


def resume_config(session_dir: str | Path, overrides: list[str]) -> TrainConfig:
    """A session's saved config with the command line's overrides (more stages, bigger budgets)."""
    from omegaconf import OmegaConf

    saved = from_yaml(Path(session_dir) / "session.yaml")
    merged = OmegaConf.merge(OmegaConf.structured(saved), OmegaConf.from_dotlist(list(overrides)))
    cfg = OmegaConf.to_object(merged)
    cfg.run.resume = str(session_dir)
    return cfg.check()
