"""``ParentWatch`` notices a killed parent: the mechanism that stops a ``RealEnvWorker`` whose
raylet died with a killed driver (the whole chain: tests/integration/test_hybrid.py, kill -9)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

CHILD = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from rlinf_robot.workers.orphan import ParentWatch

    out = Path(sys.argv[1])
    def on_orphan():
        out.with_suffix(".orphaned").write_text(str(os.getppid()))
        os._exit(0)
    ParentWatch(on_orphan)
    out.with_suffix(".ready").write_text(str(os.getpid()))
    time.sleep(300)
    """
)


def _wait_for(path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False


def test_a_child_notices_its_parent_was_killed(tmp_path):
    out = tmp_path / "child"
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]]); "
            "time.sleep(300)",
            CHILD,
            str(out),
        ],
        start_new_session=True,
    )
    child_pid = None
    try:
        assert _wait_for(out.with_suffix(".ready"), 120), "the child never started"
        child_pid = int(out.with_suffix(".ready").read_text())
        assert not out.with_suffix(".orphaned").exists()  # a living parent is not a dead one
        parent.kill()
        parent.wait(30)
        assert _wait_for(out.with_suffix(".orphaned"), 60), "the child did not notice its parent die"
    finally:
        if parent.poll() is None:
            parent.kill()
        if child_pid is not None:
            try:
                os.kill(child_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_close_stops_the_watch():
    from rlinf_robot.workers.orphan import ParentWatch

    calls = []
    watch = ParentWatch(lambda: calls.append(1), period_s=0.01)
    watch.close()
    watch._thread.join(10)
    assert not watch._thread.is_alive() and not calls and not watch.orphaned
