"""A session's ``report.html``: one page comparing its stages (``rlinf_robot/orchestrator/session.py``).

1. success on the arm of the nominal-sim, calibrated-sim and hybrid policies, with 95 % intervals
   (the calibrated sim: dynamics randomized around the sysid fit, the camera where hand-eye found it);
2. system identification: the replay residual before and after the fit;
3. the calibration records used, each stage's wall time and run (with a link to its own report);
4. the session's config.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from rlinf_robot.orchestrator.report import _png, _table

LABELS = {"nominal": "nominal sim", "sim": "calibrated sim", "hybrid": "calibrated sim + arm (hybrid)"}
COLORS = {"nominal": "#7f7f7f", "sim": "#1f77b4", "hybrid": "#d62728"}


def arm_bars(arm: dict[str, dict[str, Any]]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    names = [n for n in LABELS if n in arm]
    for i, name in enumerate(names):
        r = arm[name]
        lo, hi = r["ci95"]
        ax.bar(i, r["rate"], color=COLORS[name], width=0.6)
        ax.errorbar(i, r["rate"], yerr=[[r["rate"] - lo], [hi - r["rate"]]], color="black", capsize=6)
        ax.text(i, min(hi, 1.0) + 0.03, f"{r['successes']}/{r['n']}", ha="center")
    ax.set_xticks(range(len(names)), [LABELS[n] for n in names])
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("success on the arm")
    ax.set_title("Policies of each stage on the arm (95 % intervals)")
    return _png(fig)


def sysid_bars(sysid: dict[str, Any]) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3.0))
    before, after = sysid["residual_rms_before_rad"], sysid["residual_rms_rad"]
    values = [1e3 * before, 1e3 * after]
    ax.bar([0, 1], values, color=["#7f7f7f", "#1f77b4"], width=0.6)
    for i, v in enumerate(values):
        ax.text(i, v * 1.3, f"{v:.3g} mrad", ha="center")
    ax.set_yscale("log")  # the fit is often 100-1000x better: a linear axis would hide its bar
    ax.set_ylim(min(values) / 3, max(values) * 5)
    ax.set_xticks([0, 1], ["nominal model", "fitted model"])
    ax.set_ylabel("replay residual, rms (mrad)")
    ax.set_title(f"System identification: {before / max(after, 1e-12):.1f}x smaller residual")
    return _png(fig)


def write_session_report(session_dir: Path, done: dict[str, dict[str, Any]], config: str) -> Path:
    plots = []
    arm = done.get("eval", {}).get("arm", {})
    if arm:
        plots.append(("The arm, per stage", arm_bars(arm)))
    sysid = done.get("sysid", {})
    if sysid.get("residual_rms_before_rad") and sysid.get("residual_rms_rad"):
        plots.append(("System identification", sysid_bars(sysid)))
    rows = {}
    for stage, out in done.items():
        detail = {k: v for k, v in out.items() if k not in ("arm", "sim")}
        run = out.get("run")
        if run and (Path(run) / "report.html").exists():
            detail["report"] = str(Path(run).name) + "/report.html"
        rows[stage] = detail
    summary = {
        LABELS[n]: f"{r['rate']:.2f} [{r['ci95'][0]:.2f}, {r['ci95'][1]:.2f}] ({r['successes']}/{r['n']})"
        for n, r in arm.items()
    }
    body = "".join(f"<h2>{html.escape(t)}</h2><img alt='{html.escape(t)}' src='{src}'>" for t, src in plots)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>session {html.escape(session_dir.name)}</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}table{{border-collapse:collapse}}
th,td{{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}}img{{max-width:100%}}</style>
</head><body><h1>Real-to-sim-to-real session {html.escape(session_dir.name)}</h1>
<h2>Success on the arm</h2>{_table(summary) if summary else "<p>no evaluation yet</p>"}
{body}<h2>Stages</h2>{_table(rows)}<h2>Config</h2><pre>{html.escape(config)}</pre></body></html>"""
    path = session_dir / "report.html"
    path.write_text(page)
    return path
