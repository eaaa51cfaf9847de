"""``report.html``: one self-contained page per run (plots embedded as PNG data URIs).

1. success vs wall time, per source (sim training success; each real episode and the arm evals);
2. the arm: this run's real-episode success over time against the sim-only baseline (the
   pre-trained policy evaluated on the arm before the hybrid phase), with 95 % intervals;
3. bridge latency on the arm's path (per step: chunk sent -> its end observed; observation age);
4. the pipeline timeline of the last seconds of training (env stepping, inference, updates, real
   episodes);
5. evaluation, the run's manifest and its config.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

COLORS = {"sim": "#1f77b4", "real": "#d62728", "baseline": "#7f7f7f", "eval": "#2ca02c"}


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _rolling(x: np.ndarray, n: int) -> np.ndarray:
    out = np.empty(len(x))
    for i in range(len(x)):
        out[i] = np.mean(x[max(0, i - n + 1) : i + 1])
    return out


def success_plot(rows: list[dict], real: list[dict], ev: dict) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    sim_keys = sorted({k for r in rows for k in r if k.startswith("sim:") and k.endswith("/success")})
    for key in sim_keys:
        pts = [(r["wall_s"], r[key]) for r in rows if r.get(key) is not None]
        if pts:
            t, v = zip(*pts, strict=True)
            ax.plot(t, v, color=COLORS["sim"], label=f"{key.split('/')[0]} (training, last 32 episodes)")
    eps = [e for e in real if not e["aborted"]]
    if eps:
        t = np.array([e["t"] for e in eps])
        s = np.array([float(e["success"]) for e in eps])
        ax.scatter(t, s, s=10, color=COLORS["real"], alpha=0.4, label="arm episode (training)")
        ax.plot(t, _rolling(s, 10), color=COLORS["real"], label="arm, rolling mean of 10")
    aborted = [e for e in real if e["aborted"]]
    if aborted:
        ax.scatter(
            [e["t"] for e in aborted],
            [0.5] * len(aborted),
            marker="x",
            color="k",
            label="arm episode aborted",
        )
    for key, color in (("baseline_arm", COLORS["baseline"]), ("arm", COLORS["eval"])):
        if key in ev:
            r = ev[key]
            ax.errorbar(
                [r["t"]],
                [r["rate"]],
                yerr=[[r["rate"] - r["ci95"][0]], [r["ci95"][1] - r["rate"]]],
                fmt="o",
                color=color,
                capsize=4,
                label=f"arm eval: {r['what']} ({r['successes']}/{r['n']})",
            )
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("success")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title("success vs wall time, per source")
    return _png(fig)


def arm_plot(real: list[dict], ev: dict) -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    eps = [e for e in real if not e["aborted"]]
    if eps:
        t = np.array([e["t"] for e in eps])
        s = np.array([float(e["success"]) for e in eps])
        ax.plot(t, _rolling(s, 10), color=COLORS["real"], label="this run: arm episodes, rolling mean of 10")
    base = ev.get("baseline_arm")
    if base:
        ax.axhspan(base["ci95"][0], base["ci95"][1], color=COLORS["baseline"], alpha=0.2)
        ax.axhline(
            base["rate"],
            color=COLORS["baseline"],
            ls="--",
            label=f"sim-only policy on the arm: {base['rate']:.2f} ({base['successes']}/{base['n']}, 95 % CI)",
        )
    final = ev.get("arm")
    if final:
        ax.errorbar(
            [final["t"]],
            [final["rate"]],
            yerr=[[final["rate"] - final["ci95"][0]], [final["ci95"][1] - final["rate"]]],
            fmt="o",
            color=COLORS["eval"],
            capsize=4,
            label=f"this run, final eval: {final['rate']:.2f} ({final['successes']}/{final['n']})",
        )
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("arm success")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # a sim-only run has nothing on the arm to label
        ax.legend(fontsize=7, loc="lower right")
    else:
        ax.text(0.5, 0.5, "no episodes on the arm in this run", ha="center", transform=ax.transAxes)
    ax.set_title("the arm: hybrid training vs the sim-only baseline")
    return _png(fig)


def latency_plot(latency_ms: list[float], period_ms: float) -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.0))
    x = np.asarray(latency_ms)
    if x.size:
        ax.hist(x, bins=60, color=COLORS["real"], alpha=0.8)
        for q, ls in ((50, "-"), (99, "--")):
            v = np.percentile(x, q)
            ax.axvline(v, color="k", ls=ls, label=f"p{q} {v:.1f} ms")
        ax.axvline(period_ms, color=COLORS["eval"], ls=":", label=f"control period {period_ms:.0f} ms")
        ax.legend(fontsize=8)
    ax.set_xlabel("ms per step: chunk sent -> its end observed (includes the row's own period)")
    ax.set_ylabel("steps")
    ax.set_title("bridge round trip on the arm's path")
    return _png(fig)


def timeline_plot(events: list[dict], real: list[dict], window_s: float = 20.0) -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 2.8))
    spans = [e for e in events if e.get("name") in ("env_step", "infer", "train_epochs", "wait_actions")]
    if spans:
        end = max(e["end_ns"] for e in spans)
        start = end - int(window_s * 1e9)
        lanes = {"env": 3, "rollout": 2, "actor": 1}
        names = {
            "env_step": COLORS["sim"],
            "wait_actions": "#c7c7c7",
            "infer": "#9467bd",
            "train_epochs": "#ff7f0e",
        }
        for e in spans:
            if e["end_ns"] < start:
                continue
            y = lanes.get(e["group"], 0) + 0.12 * (e.get("stage", 0) or 0)
            ax.barh(
                y,
                (e["end_ns"] - e["start_ns"]) / 1e9,
                left=(e["start_ns"] - start) / 1e9,
                height=0.25,
                color=names[e["name"]],
                edgecolor="none",
            )
        for e in real:
            if "t_start_wall" in e and e["t_end_wall"] * 1e9 >= start:
                ax.barh(
                    0,
                    e["t_end_wall"] - e["t_start_wall"],
                    left=e["t_start_wall"] - start / 1e9,
                    height=0.4,
                    color=COLORS["real"],
                    alpha=0.6,
                )
        ax.set_yticks([0, 1, 2, 3], ["arm episodes", "actor", "rollout", "env"])
        ax.set_xlim(0, window_s)
        handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in names.values()]
        ax.legend(handles, list(names), fontsize=7, ncol=4, loc="upper right")
    ax.set_xlabel(f"last {window_s:.0f} s of training (s)")
    ax.set_title("pipeline timeline")
    return _png(fig)


def _table(d: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(json.dumps(v, default=str) if isinstance(v, (dict, list)) else str(v))}</td></tr>"
        for k, v in d.items()
    )
    return f"<table>{rows}</table>"


def write_report(
    run_dir: Path,
    rows: list[dict],
    real: list[dict],
    ev: dict,
    latency_ms: list[float],
    timeline: list[dict],
    manifest: dict,
    interrupted: bool,
) -> Path:
    config = (run_dir / "config.yaml").read_text() if (run_dir / "config.yaml").exists() else ""
    period = 1000.0 / 20.0
    for line in config.splitlines():
        if line.strip().startswith("control_hz:"):
            period = 1000.0 / float(line.split(":", 1)[1])
            break
    plots = [
        ("Success vs wall time", success_plot(rows, real, ev)),
        ("The arm vs the sim-only baseline", arm_plot(real, ev)),
        ("Bridge latency", latency_plot(latency_ms, period)),
        ("Pipeline timeline", timeline_plot(timeline, real)),
    ]
    summary = {
        k: (
            f"{v['rate']:.2f} [{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}] ({v['successes']}/{v['n']})"
            if isinstance(v, dict) and "rate" in v
            else v
        )
        for k, v in ev.items()
    }
    last = rows[-1] if rows else {}
    body = [f"<h1>rlinf-robot run {html.escape(run_dir.name)}</h1>"]
    if interrupted:
        body.append("<p class='warn'>Interrupted: the figures cover what ran before the stop.</p>")
    body.append("<h2>Evaluation</h2>" + _table(summary or {"evaluation": "not run"}))
    body.append("<h2>Last update</h2>" + _table({k: v for k, v in last.items() if not isinstance(v, dict)}))
    for title, uri in plots:
        body.append(f"<h2>{html.escape(title)}</h2><img class='plot' alt='{html.escape(title)}' src='{uri}'>")
    body.append("<h2>Manifest</h2>" + _table(manifest))
    body.append(f"<h2>Config</h2><pre>{html.escape(config)}</pre>")
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>rlinf-robot {html.escape(run_dir.name)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}table{{border-collapse:collapse}}
th,td{{border:1px solid #ccc;padding:2px 6px;text-align:left;font-size:90%}}img.plot{{max-width:100%}}
.warn{{color:#b00}}</style></head><body>{"".join(body)}
<script>window.addEventListener('load', () => {{ document.body.dataset.plots = [...document.images].filter(i => i.complete && i.naturalWidth > 0).length; }});</script>
</body></html>"""
    path = run_dir / "report.html"
    path.write_text(page)
    return path
