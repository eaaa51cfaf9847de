"""The live progress display of a training run (rich): per source steps, success and steps/s, the
arm's state, the policy version, elapsed time against the budget. On a terminal it redraws in
place; piped to a file (CI, ``make demo | tee``) it prints one line per update at most every few
seconds instead, so logs stay readable."""

from __future__ import annotations

import sys
import time
from typing import Any

LINE_EVERY_S = 5.0


def _fmt(v: Any, spec: str = ".2f") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


class Progress:
    def __init__(self, cfg, sources: list[str], sim_source: str):
        self.cfg, self.sources, self.sim_source = cfg, sources, sim_source
        self.live = None
        self._last_line = 0.0
        self._row: dict[str, Any] = {}
        self._state = None
        self._elapsed = 0.0
        self.interactive = sys.stdout.isatty()

    def start(self) -> None:
        if self.interactive:
            from rich.live import Live

            self.live = Live(self._render(), refresh_per_second=2, transient=False)
            self.live.start()

    def stop(self) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.stop()
            self.live = None

    @property
    def shown(self) -> bool:
        """Whether any update has been displayed."""
        return self._state is not None

    def save_svg(self, path) -> None:
        """The display as it stands, drawn to an SVG file (the run dir's ``progress.svg``): what the
        terminal showed last, kept for the report and for people reading a log without one."""
        import io

        from rich.console import Console

        console = Console(record=True, width=118, file=io.StringIO(), force_terminal=True)
        console.print(self._render())
        console.save_svg(str(path), title="rlinf-robot train")

    def say(self, line: str) -> None:
        if self.live is not None:
            self.live.console.print(line)
        else:
            print(line, flush=True)

    def update(self, row: dict[str, Any], state, elapsed: float) -> None:
        self._row, self._state, self._elapsed = row, state, elapsed
        if self.live is not None:
            self.live.update(self._render())
        elif time.monotonic() - self._last_line >= LINE_EVERY_S:
            self._last_line = time.monotonic()
            print(self.line(), flush=True)

    def line(self) -> str:
        r, st = self._row, self._state
        parts = [f"[{self._elapsed:6.1f}s] {st.phase:8s} update {st.update:4d} v{st.version}"]
        sim = self.sim_source
        if f"{sim}/env_steps" in r:
            parts.append(
                f"sim {r[f'{sim}/env_steps']:>7} steps success {_fmt(r.get(f'{sim}/success'))} "
                f"{_fmt(r.get(f'{sim}/steps_per_s'), ',.0f')}/s"
            )
        for src in self.sources:
            if f"{src}/state" in r:
                parts.append(
                    f"{src.split(':', 1)[1]} {r[f'{src}/state']} ep {r.get(f'{src}/episodes')} "
                    f"success {_fmt(r.get(f'{src}/success'))} util {_fmt(r.get(f'{src}/utilisation'))}"
                )
        if "batch/real_share" in r:
            parts.append(f"real share {r['batch/real_share']:.2f}")
        return " | ".join(parts)

    def _render(self):
        from rich.table import Table

        r, st = self._row, self._state
        budget = self.cfg.budget.wall_s
        title = "rlinf-robot train"
        if st is not None:
            title += f" - {st.phase}, update {st.update}, policy v{st.version}, {self._elapsed:.0f} s"
            if budget:
                title += f" (train budget {budget:.0f} s, used {st.train_wall_s:.0f} s)"
        t = Table(title=title)
        for col in ("source", "state", "env steps", "episodes", "success", "steps/s", "arm use", "latency"):
            t.add_column(col)
        sim = self.sim_source
        if f"{sim}/env_steps" in r:
            t.add_row(
                sim,
                "running",
                _fmt(r.get(f"{sim}/env_steps")),
                _fmt(st.episodes.get(sim) if st else None),
                _fmt(r.get(f"{sim}/success")),
                _fmt(r.get(f"{sim}/steps_per_s"), ",.0f"),
                "",
                "",
            )
        for src in self.sources:
            t.add_row(
                src,
                _fmt(r.get(f"{src}/state")),
                _fmt(r.get(f"{src}/env_steps")),
                _fmt(r.get(f"{src}/episodes")),
                _fmt(r.get(f"{src}/success")),
                _fmt(r.get(f"{src}/steps_per_s"), ",.1f"),
                _fmt(r.get(f"{src}/utilisation")),
                f"{_fmt(r.get(f'{src}/latency_p50_ms'), '.1f')} ms",
            )
        return t
