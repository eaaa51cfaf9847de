"""``ParentWatch``: notice that the process that started this one has died.

A Ray worker's parent is its node's raylet. When the training driver is killed with its process
group (``kill -9`` of a job started on this machine), the raylet and the GCS die with it, but the
workers live in process groups of their own and Ray ends them only once they notice the lost
raylet: about 2 s later on a quiet machine, far longer on a starved one. A worker driving an arm
must not run an episode for a job that no longer exists in the meantime, so it watches its parent
id (a child of a dead parent is re-parented: ``getppid()`` changes) and stops by itself.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class ParentWatch:
    """Call ``on_orphan()`` once, from a daemon thread, when this process's parent dies."""

    def __init__(self, on_orphan: Callable[[], None], period_s: float = 0.05):
        self._on_orphan = on_orphan
        self._period_s = float(period_s)
        self._parent = os.getppid()
        self._done = threading.Event()
        self.orphaned = False
        self._thread = threading.Thread(target=self._watch, name="parent-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(self._period_s):
            if os.getppid() != self._parent:
                self.orphaned = True
                log.error("parent process %d is gone: stopping on my own", self._parent)
                self._on_orphan()
                return

    def close(self) -> None:
        self._done.set()
