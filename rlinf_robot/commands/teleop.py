"""``rlinf-robot teleop scripted|keyboard|spacemouse``: an operator that takes the arm over
mid-episode and hands it back. It binds ``--states`` (what the training job's arm workers publish
before each decision) and ``--commands`` (what it sends back); start the job with
``teleop.states=<same> teleop.commands=<same>``. ``scripted`` is the task's scripted expert on a
schedule (``--every 2 --steps 5:25``: every second episode, decisions 5 to 24); ``keyboard`` (hold
space; w/s a/d r/f move, g toggles the gripper) and ``spacemouse`` (hold the left button) are
people."""

from __future__ import annotations

HELP = "take the arm over mid-episode from a scripted expert, a keyboard or a spacemouse"


def add_arguments(parser) -> None:
    parser.add_argument("kind", choices=("scripted", "keyboard", "spacemouse"))
    parser.add_argument("--states", default="tcp://127.0.0.1:5590", help="bind: states from the arm workers")
    parser.add_argument("--commands", default="tcp://127.0.0.1:5591", help="bind: commands to them")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--every", type=int, default=2, help="scripted: every N-th episode")
    parser.add_argument("--offset", type=int, default=0, help="scripted: ... starting with this one")
    parser.add_argument("--steps", default="5:25", help="scripted: decisions start:stop of those episodes")
    parser.add_argument("--gain", type=float, default=None, help="scripted: the expert's proportional gain")
    parser.add_argument("--rate", type=float, default=20.0, help="devices: commands per second")
    parser.add_argument("--curve-secret-file", default="", help="the operator's secret key (off loopback)")
    parser.add_argument("--curve-authorized-dir", default="", help="the arm workers' public keys (*.key)")


def run(args) -> int:
    import signal
    import threading

    from rlinf_robot.bridge.config import CurveServerKeys
    from rlinf_robot.teleop.operator import KeyboardOperator, Schedule, ScriptedOperator, SpaceMouseOperator

    curve = None
    if args.curve_secret_file or args.curve_authorized_dir:
        curve = CurveServerKeys(args.curve_secret_file, args.curve_authorized_dir)
    try:
        if args.kind == "scripted":
            schedule = Schedule.parse(args.every, args.steps, args.offset)
            op = ScriptedOperator(args.states, args.commands, schedule, gain=args.gain, curve=curve)
        else:
            cls = KeyboardOperator if args.kind == "keyboard" else SpaceMouseOperator
            op = cls(args.states, args.commands, rate_hz=args.rate, curve=curve)
    except (ValueError, RuntimeError) as e:
        print(f"rlinf-robot teleop: {e}")
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"teleop {args.kind}: states on {args.states}, commands on {args.commands}", flush=True)
    try:
        op.serve(args.duration, stop)
    except KeyboardInterrupt:
        pass
    finally:
        op.close()
    print(f"teleop {args.kind}: {op.states_seen} states, {op.engaged_sent} engaged commands", flush=True)
    for why in sorted(set(op.refusals)):
        print(f"  refused: {why}")
    return 0
