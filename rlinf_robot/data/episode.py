"""What one real episode holds per step: the columns ``RealEnvWorker`` records and the job's buffer,
its replay store and the dataset recorder read. One table, so an episode without a step (a link cut
between its reset and the first step's answer) has the same columns, empty, as any other."""

from __future__ import annotations

import numpy as np

#: per-step column -> dtype
STEP_DTYPES: dict[str, type] = {
    "actions": np.float32,
    "raw_actions": np.float32,
    "log_prob": np.float32,
    "value": np.float32,
    "versions": np.int64,
    "rewards": np.float32,
    "terminated": bool,
    "truncated": bool,
    "success": bool,
    "executed": np.int64,
    "intervened": bool,  # an operator took the step over (teleop)
}
STEP_KEYS = tuple(STEP_DTYPES)


def empty_steps() -> dict[str, np.ndarray]:
    """Every per-step column with no row."""
    return {key: np.zeros(0, dtype) for key, dtype in STEP_DTYPES.items()}
