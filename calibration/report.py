"""PNG reports of calibrations (matplotlib, Agg backend): what a person checks before trusting one."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def intrinsics_png(result, detections, path: Path) -> Path:
    """Per-view reprojection error (rejected views marked) and where the used corners fell."""
    plt = _plt()
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    ax0.bar(range(len(result.used_views)), result.per_view_error, color="tab:blue")
    ax0.set_xticks(range(len(result.used_views)), [str(v) for v in result.used_views], fontsize=7)
    ax0.axhline(result.rms, color="k", ls="--", lw=1, label=f"overall RMS {result.rms:.3f} px")
    ax0.set_xlabel("view")
    ax0.set_ylabel("reprojection error (px RMS)")
    ax0.set_title(f"{len(result.used_views)} views used, {len(result.rejected)} rejected")
    ax0.legend(fontsize=8)
    w, h = result.image_size
    for v in result.used_views:
        p = detections[v].image_points
        ax1.scatter(p[:, 0], p[:, 1], s=3)
    ax1.set_xlim(0, w)
    ax1.set_ylim(h, 0)
    ax1.set_aspect("equal")
    ax1.set_title(f"corner coverage {result.coverage:.0%}; fx={result.fx:.1f} fy={result.fy:.1f}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def handeye_png(result, path: Path, truth_errors: dict[str, tuple[float, float]] | None = None) -> Path:
    """Residual (target-pose spread) per method; the error to ground truth too when known."""
    plt = _plt()
    names = list(result.methods)
    trans = [result.methods[n].translation_rms_mm for n in names]
    rot = [result.methods[n].rotation_rms_deg for n in names]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    x = np.arange(len(names))
    width = 0.38 if truth_errors else 0.7
    axes[0].bar(x, trans, width, label="residual (target spread)")
    axes[1].bar(x, rot, width, label="residual (target spread)")
    if truth_errors:
        axes[0].bar(x + width, [truth_errors[n][0] for n in names], width, label="error vs ground truth")
        axes[1].bar(x + width, [truth_errors[n][1] for n in names], width, label="error vs ground truth")
    for ax, unit in zip(axes, ("translation (mm)", "rotation (deg)"), strict=True):
        ax.set_xticks(x + (width / 2 if truth_errors else 0), names, rotation=30)
        ax.set_ylabel(unit)
        ax.legend(fontsize=8)
    fig.suptitle(f"hand-eye ({result.mode}), {result.n_views} views, best: {result.method}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def sysid_png(result, problem, path: Path, segment: int | None = None) -> Path:
    """Per-joint RMS residual before/after the fit, and one segment's joint error over time."""
    plt = _plt()
    if segment is None:
        segment = int(np.argmax([len(p.rows) for p in problem.pieces]))
    before_sim, real = problem.simulate_piece(segment, result.nominal)
    after_sim, _ = problem.simulate_piece(segment, result.params)
    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(15, 4))
    x = np.arange(7)
    ax0.bar(
        x - 0.2, result.joint_rms_before * 1e3, 0.4, label=f"nominal sim ({result.residual_before * 1e3:.2f})"
    )
    ax0.bar(
        x + 0.2, result.joint_rms_after * 1e3, 0.4, label=f"fitted sim ({result.residual_after * 1e3:.3f})"
    )
    ax0.set_xticks(x, [f"j{i + 1}" for i in x])
    ax0.set_yscale("log")
    ax0.set_ylabel("RMS sim - arm (mrad, log)")
    ax0.set_title(f"residual {result.improvement:.0f}x smaller after the fit")
    ax0.legend(fontsize=8)
    t = problem.pieces[segment].rows * 1e-3
    ax1.plot(t, (before_sim - real) * 1e3)
    ax1.set_title("nominal sim - arm, one segment")
    ax2.plot(t, (after_sim - real) * 1e3)
    ax2.set_title("fitted sim - arm, same segment")
    lim = max(np.abs((before_sim - real) * 1e3).max(), 1e-3)
    for ax in (ax1, ax2):
        ax.set_xlabel("time (s)")
        ax.set_ylabel("joint error (mrad)")
        ax.set_ylim(-lim * 1.05, lim * 1.05)
    ax2.legend([f"j{i + 1}" for i in range(7)], fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
