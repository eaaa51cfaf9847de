"""Keep our threads and processes at normal (SCHED_OTHER) scheduling.

libfranka's control loop raises the thread that runs it to SCHED_FIFO priority 99 whenever the OS
allows it — as root it does, even with ``RealtimeConfig.Ignore`` — and Linux hands that policy
down to every thread and process the thread creates afterwards. A Python loop, a ROS executor or
franka-sim running at FIFO 99 on a small machine never yields the CPU, starving everything else
(the simulator included: measured on the 2-core CI machine, a whole stack froze with load > 70).
Only franky's own 1 kHz control thread should be real-time; everything we start calls this first.
"""

from __future__ import annotations

import os
import threading


def normal_scheduling() -> None:
    """Put the calling thread (and what it will create) back on SCHED_OTHER, nice unchanged."""
    try:
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or not permitted: nothing to undo then
        pass


def set_thread_priority(priority: int, nice: int = 0) -> bool:
    """SCHED_FIFO at ``priority`` (1-98) for the calling thread, or SCHED_OTHER for 0.

    Returns whether the real-time policy was applied; without the permission (no root, no
    ``rtprio`` limit, or a cgroup with no real-time budget, as a CPU-capped CI job's) the thread
    runs SCHED_OTHER at ``nice`` when that is permitted (``set_thread_nice``).
    """
    if priority > 0:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(min(int(priority), 98)))
            return True
        except (AttributeError, OSError):
            pass
    normal_scheduling()
    set_thread_nice(nice)
    return False


def set_thread_nice(nice: int) -> bool:
    """The calling thread's nice value (Linux keeps one per thread; threads it creates afterwards
    inherit it): below 0 needs ``CAP_SYS_NICE`` or an ``RLIMIT_NICE``; 0 leaves it. Returns
    whether it was applied."""
    if nice == 0:
        return False
    try:  # on Linux, a thread id is a "process" for setpriority
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), int(nice))
        return True
    except (AttributeError, OSError):
        return False


class keep_scheduling:
    """Context manager: restore the calling thread's policy after a call that changes it.

    ``franky.Robot(...)`` (libfranka's constructor) promotes the calling thread to SCHED_FIFO 99;
    the thread that connects is ours (a ROS callback, the control loop), not franky's.
    """

    _policy: int | None = None

    def __enter__(self) -> keep_scheduling:
        try:
            self._policy, self._param = os.sched_getscheduler(0), os.sched_getparam(0)
        except (AttributeError, OSError):
            self._policy = None
        return self

    def __exit__(self, *exc) -> None:
        if self._policy is None:
            return
        try:
            if os.sched_getscheduler(0) != self._policy:
                os.sched_setscheduler(0, self._policy, self._param)
        except OSError:
            pass
