"""Success rates with their 95 % confidence interval (Wilson score: honest at 0/n and n/n, where
the normal approximation claims certainty from a handful of episodes)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Rate:
    successes: int
    n: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.successes / self.n if self.n else float("nan")

    def __str__(self) -> str:
        if not self.n:
            return "n/a (0 episodes)"
        return f"{self.rate:.2f} [{self.low:.2f}, {self.high:.2f}] ({self.successes}/{self.n})"

    def to_dict(self) -> dict:
        return {"successes": self.successes, "n": self.n, "rate": self.rate, "ci95": [self.low, self.high]}


def wilson(successes: int, n: int, z: float = 1.96) -> Rate:
    """The Wilson interval of ``successes`` out of ``n``.

    >>> str(wilson(18, 20))
    '0.90 [0.70, 0.97] (18/20)'
    """
    if n <= 0:
        return Rate(0, 0, float("nan"), float("nan"))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Rate(int(successes), int(n), max(0.0, centre - half), min(1.0, centre + half))
