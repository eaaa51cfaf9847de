"""Calibrate cameras and the simulator against the arm: ``intrinsics``, ``handeye``, ``sysid``.

Each writes a PNG report and a JSON result to ``--out`` and a versioned record to the calibration
store (``--store``; default ``$RLINF_CALIBRATION_DIR`` or ``~/.rlinf-robot/calibration``), and
prints the record id that training and ``doctor`` refer to. ``--sim`` runs on rendered ground
truth (a MuJoCo scene with a ChArUco board) and prints the error against the truth;
``sysid --sim-arm`` records from franka-sim serving a deliberately different FR3, ``--sim-config``
from franka-sim as a robot PC's launch YAML serves it (``rlinf-robot session`` on the embedded default).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from rlinf_robot.errors import ConfigError
from rlinf_robot.paths import REPO_ROOT

HELP = "calibrate camera intrinsics, hand-eye, and the sim's arm dynamics (sysid)"


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="what", metavar="WHAT")
    for name, help_text in (
        ("intrinsics", "camera intrinsics from ChArUco views"),
        ("handeye", "camera pose relative to the hand or the base"),
        ("sysid", "fit the sim's joint dynamics to trajectories recorded on the arm"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument(
            "--out", type=Path, default=None, help="report/result folder (default build/calibration/<what>)"
        )
        p.add_argument("--store", type=Path, default=None, help="calibration store folder")
        p.add_argument("--no-store", action="store_true", help="do not write a store record")
        p.add_argument("--robot-serial", default="fr3-sim", help="serial of the arm")
        p.add_argument("--seed", type=int, default=0)
        if name != "sysid":
            p.add_argument("--camera-serial", default="sim-camera", help="serial of the camera")
            p.add_argument(
                "--board",
                default="7x5,0.04,0.03,DICT_5X5_100",
                help="ChArUco board: COLSxROWS,square_m,marker_m,DICTIONARY",
            )
            p.add_argument("--sim", action="store_true", help="use rendered ground-truth views")
            p.add_argument("--noise", type=float, default=2.0, help="pixel noise std for --sim")
    intr = sub.choices["intrinsics"]
    intr.add_argument("--images", type=Path, help="folder of board images (png/jpg)")
    intr.add_argument("--views", type=int, default=20, help="views to render with --sim")
    he = sub.choices["handeye"]
    he.add_argument("--mode", choices=("eye_in_hand", "eye_to_hand"), default="eye_in_hand")
    he.add_argument("--data", type=Path, help="folder with poses.json and the images it names")
    he.add_argument("--intrinsics", default=None, help="intrinsics record id or JSON file (real data)")
    he.add_argument("--poses", type=int, default=None, help="poses to plan with --sim")
    sy = sub.choices["sysid"]
    sy.add_argument("--host", default=None, help="arm (or franka-sim) to record from through franky")
    sy.add_argument(
        "--sim-arm", action="store_true", help="start franka-sim with a deliberately different FR3"
    )
    sy.add_argument(
        "--sim-config",
        type=Path,
        default=None,
        help="start franka-sim as this launch YAML's franka_sim block serves it (a robot PC's arm)",
    )
    sy.add_argument("--recordings", type=Path, nargs="*", default=[], help="fit .npz recordings instead")
    sy.add_argument("--duration", type=float, default=4.0, help="excitation length (s)")
    sy.add_argument("--max-evals", type=int, default=2, help="refinement iterations after the regression")
    parser.set_defaults(_parser=parser)


def run(args) -> int:
    if not getattr(args, "what", None):
        args._parser.print_help()
        return 2
    out = args.out or REPO_ROOT / "build" / "calibration" / args.what
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()

    def say(msg: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f}s] {msg}", flush=True)

    try:
        return _COMMANDS[args.what](args, out, say)
    except (ConfigError, ValueError) as exc:
        print(f"calibrate {args.what}: {exc}")
        return 1


def _board(text: str):
    from calibration.charuco import BoardSpec

    try:
        grid, square, marker, dictionary = text.split(",")
        cols, rows = (int(x) for x in grid.lower().split("x"))
        return BoardSpec(cols, rows, float(square), float(marker), dictionary)
    except ValueError:
        raise ConfigError(f"--board must look like 7x5,0.04,0.03,DICT_5X5_100, got {text!r}") from None


def _store(args, record, say) -> None:
    if args.no_store:
        return
    from calibration.store import CalibrationStore

    path = CalibrationStore(args.store).save(record)
    say(f"stored {record.id} -> {path}")
    problems = record.problems()
    say("record valid" if not problems else "record NOT valid: " + "; ".join(problems))


def _read_images(folder: Path) -> list[np.ndarray]:
    import cv2

    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".png", ".jpg", ".jpeg"))
    if not files:
        raise ConfigError(f"no .png/.jpg images in {folder}")
    return [cv2.imread(str(f))[:, :, ::-1] for f in files]


# ----------------------------------------------------------------- intrinsics
def _intrinsics(args, out: Path, say) -> int:
    from calibration import report
    from calibration.session import images_hash, intrinsics_record, run_intrinsics

    board = _board(args.board)
    truth = None
    if args.sim:
        from calibration.scene import CalibrationScene
        from calibration.simdata import intrinsics_set

        with CalibrationScene(board=board) as scene:
            data = intrinsics_set(scene, args.views, args.noise, args.seed, say=say)
        images, truth = data.images, data.truth
    elif args.images:
        images = _read_images(args.images)
    else:
        raise ConfigError("intrinsics needs --images DIR or --sim")
    result, detections = run_intrinsics(images, board, say=say)
    if truth is not None:
        say(
            f"ground truth f={truth[0, 0]:.2f}: fx error {100 * (result.fx / truth[0, 0] - 1):+.3f} %, "
            f"fy error {100 * (result.fy / truth[1, 1] - 1):+.3f} %"
        )
    (out / "intrinsics.json").write_text(json.dumps(result.to_dict(), indent=2))
    say(f"report {report.intrinsics_png(result, detections, out / 'intrinsics.png')}")
    _store(
        args,
        intrinsics_record(result, images_hash(images), board, args.camera_serial, args.robot_serial),
        say,
    )
    return 0


# ------------------------------------------------------------------- hand-eye
def _load_intrinsics(args):
    spec = args.intrinsics
    if spec is None:
        raise ConfigError("real hand-eye data needs --intrinsics (a record id or a JSON file)")
    if Path(spec).exists():
        raw = json.loads(Path(spec).read_text())
    else:
        from calibration.store import CalibrationStore

        raw = CalibrationStore(args.store).get(spec).payload
    return np.array(raw["camera_matrix"], dtype=np.float64), np.array(raw["dist_coeffs"], dtype=np.float64)


def _handeye(args, out: Path, say) -> int:
    from calibration import report
    from calibration.handeye import transform_error
    from calibration.session import handeye_record, handeye_views, images_hash, run_handeye

    board = _board(args.board)
    truth = None
    if args.sim:
        from calibration.excitation import DEFAULT_START
        from calibration.scene import CalibrationScene
        from calibration.simdata import handeye_set

        with CalibrationScene(board=board, board_on_hand=args.mode == "eye_to_hand") as scene:
            data = handeye_set(scene, DEFAULT_START, args.poses, args.noise, args.seed, say=say)
            k, dist = scene.camera.matrix(), np.zeros(5)
        images, tcps, truth = data.images, data.tcp_in_base, data.truth
    elif args.data:
        from rlinf_robot.robot.franka.model import forward_kinematics

        raw = json.loads((args.data / "poses.json").read_text())
        import cv2

        images = [cv2.imread(str(args.data / v["image"]))[:, :, ::-1] for v in raw["views"]]
        tcps = [
            np.array(v["tcp_in_base"]) if "tcp_in_base" in v else forward_kinematics(np.array(v["q"]))
            for v in raw["views"]
        ]
        k, dist = _load_intrinsics(args)
    else:
        raise ConfigError("handeye needs --data DIR or --sim")
    views = handeye_views(images, tcps, board, k, dist, say=say)
    result = run_handeye(views, args.mode, say=say)
    errors = None
    if truth is not None:
        errors = {n: transform_error(m.transform, truth) for n, m in result.methods.items()}
        e = errors[result.method]
        say(f"ground truth: {result.method} is {e[0]:.3f} mm / {e[1]:.4f} deg off")
    (out / f"handeye_{args.mode}.json").write_text(json.dumps(result.to_dict(), indent=2))
    say(f"report {report.handeye_png(result, out / f'handeye_{args.mode}.png', errors)}")
    data_hash = images_hash(images, tcps)
    _store(
        args,
        handeye_record(result, data_hash, args.camera_serial, args.robot_serial, args.intrinsics or ""),
        say,
    )
    return 0


# ---------------------------------------------------------------------- sysid
def _sysid(args, out: Path, say) -> int:
    from calibration import report
    from calibration.replay import Recording
    from calibration.session import sysid_record
    from calibration.sysid import SysIdProblem, fit_dynamics

    recordings = [Recording.load(p) for p in args.recordings]
    truth = None
    if not recordings:
        from calibration.excitation import ExcitationConfig, plan_excitation, record_excitation

        plan = plan_excitation(ExcitationConfig(duration_s=args.duration, seed=args.seed))
        say(
            f"excitation: {args.duration:.1f} s, peak joint speeds {np.round(plan.peak_velocity, 2).tolist()} rad/s"
        )
        if args.sim_arm:
            from calibration.fr3_dynamics import reality_gap_params, write_variant_mjcf
            from rlinf_robot.robot.franka.sim_server import FrankaSimServer

            truth = reality_gap_params()
            mjcf = write_variant_mjcf(truth, out / "real_arm_fr3.xml")
            with FrankaSimServer(gripper=False, mjcf=mjcf) as server:
                say(f"franka-sim ready with a deliberately different FR3 ({mjcf})")
                recordings = [record_excitation(plan, server.host)]
        elif args.sim_config:
            from rlinf_robot.robot.franka.sim_service import make_server, sim_options

            opts = {**sim_options(args.sim_config), "gripper": False}
            with make_server(opts) as server:
                say(f"franka-sim ready as {args.sim_config} serves it")
                recordings = [record_excitation(plan, server.host)]
        elif args.host:
            recordings = [record_excitation(plan, args.host)]
        else:
            raise ConfigError("sysid needs --host, --sim-arm, --sim-config or --recordings")
        recordings[0].save(out / "excitation.npz")
        say(f"recorded {len(recordings[0])} cycles -> {out / 'excitation.npz'}")
    result = fit_dynamics(recordings, out / "model", max_nfev=args.max_evals, progress=say)
    for key in result.fitted_keys:
        line = f"  {key:<19} " + " ".join(f"{v:7.3f}" for v in np.atleast_1d(getattr(result.params, key)))
        if truth is not None:
            line += "   (true " + " ".join(f"{v:.3f}" for v in np.atleast_1d(getattr(truth, key))) + ")"
        say(line)
    (out / "sysid.json").write_text(json.dumps(result.summary(), indent=2))
    problem = SysIdProblem(recordings, _replay(out))
    say(f"report {report.sysid_png(result, problem, out / 'sysid.png')}")
    _store(args, sysid_record(result, args.robot_serial), say)
    return 0


def _replay(out: Path):
    from calibration.fr3_dynamics import nominal_params
    from calibration.replay import ServoReplay

    return ServoReplay(out / "model", nominal_params())


_COMMANDS = {"intrinsics": _intrinsics, "handeye": _handeye, "sysid": _sysid}
