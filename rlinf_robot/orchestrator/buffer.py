"""The source-tagged buffer: where real-arm episodes wait to be trained on.

Every piece of data is tagged with its ``source`` (``sim:<task>``, ``real:<robot>``) and the
policy version that produced it. Sim data is used the update it was collected for (it is
on-policy); real episodes arrive asynchronously from ``RealEnvWorker`` and stay here, so each update
can draw its configured share of real rows from the freshest episodes. The staleness bound drops
episodes older than ``max_staleness`` policy versions (``algorithms.offpolicy.fresh_mask``), and
aborted episodes (link lost, latched, reflex) are kept out of training altogether, counted.

Episodes are also written to disk as they arrive (``EpisodeStore``: one ``.npz`` per episode,
written atomically, read back without pickle), so ``--resume`` and later jobs reuse the real data:
real time on an arm is the scarcest thing a job has.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlinf_robot.data.episode import STEP_KEYS

log = logging.getLogger(__name__)


def intervened_mask(ep: dict[str, Any]) -> np.ndarray:
    """[T] which of ``ep``'s steps an operator took over (none in episodes that predate teleop)."""
    n = len(ep["rewards"])
    return np.asarray(ep.get("intervened", np.zeros(n, bool)), bool).reshape(n)


def non_finite(episode: dict[str, Any]) -> list[str]:
    """The fields of ``episode`` holding NaN or inf that a learner reads (an operator's steps have
    no behaviour log-prob by design; the acting value is not read: learners use their own)."""
    human = intervened_mask(episode)
    bad = []
    for key in ("rewards", "states", "final_state", "raw_actions", "actions", "log_prob"):
        if key not in episode:
            continue
        a = np.asarray(episode[key], dtype=np.float64)
        if key == "log_prob":
            a = a[~human]
        if not np.isfinite(a).all():
            bad.append(key)
    return bad


@dataclass
class SourceBuffer:
    """Real episodes by source, with the staleness bound applied when they are drawn."""

    max_staleness: int
    episodes: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)

    def add(self, episode: dict[str, Any]) -> bool:
        """Keep ``episode`` for training unless it was aborted or holds a non-finite number where
        a learner reads one (counted either way: one NaN reward would make every weight NaN)."""
        meta = episode["meta"]
        self.counts[f"{meta['source']}/episodes"] += 1
        if meta["aborted"] or len(episode.get("rewards", ())) == 0:
            self.counts[f"{meta['source']}/aborted"] += 1
            return False
        bad = non_finite(episode)
        if bad:
            self.counts[f"{meta['source']}/non_finite"] += 1
            log.warning("real episode from %s not trained on: non-finite %s", meta["source"], ", ".join(bad))
            return False
        self.episodes.append(episode)
        return True

    def fresh(self, version: int, max_uses: int | None = None) -> list[dict[str, Any]]:
        """Episodes whose every step is at most ``max_staleness`` versions behind ``version`` and
        that were drawn for fewer than ``max_uses`` updates (each call counts one use); the others
        are dropped for good (counted as ``stale`` / ``used_up``)."""
        keep, out = [], []
        for ep in self.episodes:
            source = ep["meta"]["source"]
            if version - int(np.min(ep["versions"])) > self.max_staleness:
                self.counts[f"{source}/stale"] += 1
                continue
            if max_uses is not None and ep.get("_uses", 0) >= max_uses:
                self.counts[f"{source}/used_up"] += 1
                continue
            ep["_uses"] = ep.get("_uses", 0) + 1
            keep.append(ep)
            out.append(ep)
        self.episodes = keep
        return out

    def metadata(self) -> dict[str, Any]:
        return {
            "episodes": len(self.episodes),
            "versions": [int(np.min(e["versions"])) for e in self.episodes],
            "counts": dict(self.counts),
        }


class EpisodeStore:
    """One directory of episodes, one ``.npz`` each (numpy arrays + a JSON ``meta``), written to a
    temporary name and renamed, so a crash never leaves a half episode under a real name."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def write(self, episode: dict[str, Any]) -> Path:
        meta = episode["meta"]
        index = len(list(self.root.glob("episode_*.npz")))
        path = self.root / f"episode_{index:06d}.npz"
        tmp = path.with_name(path.name + ".tmp")
        arrays = {k: np.asarray(episode[k]) for k in (*STEP_KEYS, "states", "final_state") if k in episode}
        for cam, frames in (episode.get("images") or {}).items():
            arrays[f"images/{cam}"] = np.asarray(frames)
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    def read_all(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted(self.root.glob("episode_*.npz")):
            with np.load(path, allow_pickle=False) as z:
                ep: dict[str, Any] = {"images": {}}
                for key in z.files:
                    if key == "meta":
                        ep["meta"] = json.loads(bytes(z[key]).decode())
                    elif key.startswith("images/"):
                        ep["images"][key.split("/", 1)[1]] = z[key]
                    else:
                        ep[key] = z[key]
            ep["aborted"] = ep["meta"]["aborted"]
            out.append(ep)
        return out
