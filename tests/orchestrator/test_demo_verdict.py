"""`make demo` exits non-zero when it did not do what the README says (issue 13.5): the verdict on
a finished TrainJob's result, for each way a run can fall short."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rlinf_robot.commands.demo import verdict


def _rate(successes: int, n: int) -> dict:
    return {"rate": successes / n, "ci95": (0.0, 1.0), "successes": successes, "n": n}


def _result(**changes):
    ok = dict(
        interrupted=False,
        pretrained=True,
        arm=_rate(18, 20),
        episodes={"sim:mujoco/fr3-reach": 900, "real:arm0": 12},
    )
    ok.update(changes)
    ev = {"sim": _rate(60, 64), "baseline_arm": _rate(3, 10)}
    if ok["arm"] is not None:
        ev["arm"] = ok["arm"]
    state = SimpleNamespace(pretrained=ok["pretrained"], episodes=ok["episodes"])
    return SimpleNamespace(eval=ev, interrupted=ok["interrupted"], state=state, report="runs/x/report.html")


CFG = SimpleNamespace(eval=SimpleNamespace(arm_episodes=20))


def test_a_complete_run_passes(capsys):
    assert verdict(_result(), CFG) == 0
    assert "FAILED" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "changes, why",
    [
        ({"interrupted": True}, "interrupted"),
        ({"pretrained": False}, "sim pre-training did not finish"),
        ({"arm": None}, "the arm evaluation ran 0 of 20 episodes"),
        ({"arm": _rate(5, 7)}, "the arm evaluation ran 7 of 20 episodes"),
        ({"episodes": {"sim:mujoco/fr3-reach": 900, "real:arm0": 0}}, "no real episode was trained on"),
    ],
)
def test_each_shortfall_fails_the_demo_and_says_why(changes, why, capsys):
    assert verdict(_result(**changes), CFG) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and why in out, out
