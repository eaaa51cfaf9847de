"""A timeline of spans (who did what, when) and its export to Chrome trace JSON.

Workers record spans locally (no Ray call per span) and hand them back as plain dicts; the driver
merges them and writes a file that chrome://tracing or https://ui.perfetto.dev opens. Times are
``time.time_ns()`` so spans from several processes (and nodes with synchronised clocks) line up.

>>> tl = Timeline("env[0]")
>>> with tl.span("step", stage=1, n=8):
...     pass
>>> trace = to_chrome_trace(tl.events)
>>> [e["ph"] for e in trace["traceEvents"]], trace["traceEvents"][-1]["tid"]
(['M', 'M', 'X'], 1)
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class Timeline:
    """Spans of one process. ``stage`` becomes the trace's thread row (one row per micro-batch)."""

    def __init__(self, process: str, enabled: bool = True):
        self.process = process
        self.enabled = enabled
        self.events: list[dict[str, Any]] = []

    @contextmanager
    def span(self, name: str, stage: int = 0, **args: Any) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        start = time.time_ns()
        try:
            yield
        finally:
            self.record(name, start, time.time_ns(), stage, **args)

    def record(self, name: str, start_ns: int, end_ns: int, stage: int = 0, **args: Any) -> None:
        if self.enabled:
            self.events.append(
                {
                    "name": name,
                    "process": self.process,
                    "stage": int(stage),
                    "start_ns": int(start_ns),
                    "end_ns": int(end_ns),
                    "args": args,
                }
            )

    def drain(self) -> list[dict[str, Any]]:
        """Return and forget the recorded spans (so long runs do not grow without bound)."""
        out, self.events = self.events, []
        return out


def to_chrome_trace(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Chrome trace-event format: one ``X`` (complete) event per span, named processes/threads."""
    events = sorted(events, key=lambda e: e["start_ns"])
    pids: dict[str, int] = {}
    out: list[dict[str, Any]] = []
    threads: set[tuple[int, int]] = set()
    for e in events:
        if e["process"] not in pids:
            pids[e["process"]] = len(pids) + 1
            out.append(
                {
                    "ph": "M",
                    "name": "process_name",
                    "pid": pids[e["process"]],
                    "tid": 0,
                    "args": {"name": e["process"]},
                }
            )
        pid = pids[e["process"]]
        if (pid, e["stage"]) not in threads:
            threads.add((pid, e["stage"]))
            out.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": pid,
                    "tid": e["stage"],
                    "args": {"name": f"stage {e['stage']}"},
                }
            )
        out.append(
            {
                "ph": "X",
                "name": e["name"],
                "pid": pid,
                "tid": e["stage"],
                "ts": e["start_ns"] / 1e3,
                "dur": (e["end_ns"] - e["start_ns"]) / 1e3,
                "args": e.get("args", {}),
            }
        )
    return {"traceEvents": out, "displayTimeUnit": "ms"}


def write_chrome_trace(path: str | Path, events: Iterable[dict[str, Any]]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(to_chrome_trace(events)))
    tmp.replace(path)
    return path


def overlap_seconds(events: Iterable[dict[str, Any]], a: str, b: str) -> float:
    """Total time during which a span named ``a`` and one named ``b`` ran at once (pipelining check)."""
    spans_a = [(e["start_ns"], e["end_ns"]) for e in events if e["name"] == a]
    spans_b = [(e["start_ns"], e["end_ns"]) for e in events if e["name"] == b]
    total = 0
    for s1, e1 in spans_a:
        for s2, e2 in spans_b:
            total += max(0, min(e1, e2) - max(s1, s2))
    return total / 1e9
