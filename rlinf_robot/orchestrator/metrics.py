"""Metrics of a run: one JSON object per update in ``<run>/metrics.jsonl`` and the same dict to
wandb (offline by default: ``WANDB_MODE=offline``, its files under the run dir; online only when the
user says so). Keys are ``<source>/<metric>`` (``sim/success``, ``real:arm0/utilisation``,
``train/value_loss``) plus ``update``, ``version``, ``wall_s`` and ``phase``.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np


def _plain(v: Any) -> Any:
    if isinstance(v, (np.floating, np.integer)):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def own_wandb_service() -> None:
    """Let this process start a wandb service of its own instead of joining the one a parent left in
    ``WANDB_SERVICE`` (wandb exports it to children). A training driver killed with -9 leaves an
    inherited service running with its run still open, and ``train --resume`` of that run is then
    refused ("run ID ... is in use"); a service the driver started dies with it."""
    os.environ.pop("WANDB_SERVICE", None)


class MetricsLog:
    def __init__(
        self,
        run_dir: Path,
        config: dict[str, Any],
        mode: str = "offline",
        name: str = "",
        resume: bool = False,
        append: bool = True,
    ):
        self.path = Path(run_dir) / "metrics.jsonl"
        self._file = open(self.path if append else os.devnull, "a")
        self.rows: list[dict[str, Any]] = []
        if resume and self.path.exists() and self.path.stat().st_size:
            self.rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
        self._wandb = None
        if mode != "disabled":
            os.environ.setdefault("WANDB_SILENT", "true")
            import wandb

            self._wandb = wandb.init(
                project="rlinf-robot",
                name=name or None,
                dir=str(run_dir),
                config=config,
                mode=mode,
                resume="allow" if resume else None,
                id=name or None,
                reinit=True,
            )

    def log(self, row: dict[str, Any]) -> dict[str, Any]:
        row = {k: _plain(v) for k, v in row.items()}
        row.setdefault("time", time.time())
        self.rows.append(row)
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self._wandb is not None:
            self._wandb.log(
                {k: v for k, v in row.items() if isinstance(v, (int, float)) and v is not None},
                step=int(row.get("update", len(self.rows))),
            )
        return row

    def summary(self, values: dict[str, Any]) -> None:
        if self._wandb is not None:
            for k, v in values.items():
                self._wandb.summary[k] = _plain(v)

    def close(self) -> None:
        self._file.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None
