"""Start and stop a franka-sim server (the MuJoCo FR3 speaking the real libfranka protocol).

Used by ``make demo``, ``rlinf-robot robot up --sim`` and the integration tests. libfranka always
connects to TCP port 1337, so only one server can run on a host at a time: a process-wide file lock
serialises users (parallel test sessions wait their turn instead of fighting over the port).
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rlinf_robot.paths import fr3_mjcf_wrapper, franka_sim_venv
from rlinf_robot.robot.franka.mjcf import write_fr3_wrapper
from rlinf_robot.robot.sched import set_thread_nice

log = logging.getLogger(__name__)

FCI_PORT = 1337
GRIPPER_PORT = 1338
LOCK_PATH = Path(tempfile.gettempdir()) / "rlinf-robot-franka-sim.lock"


class FrankaSimError(RuntimeError):
    """franka-sim could not be started (not installed, port busy, or it never became ready)."""


@dataclass
class FrankaSimServer:
    """A franka-sim subprocess. Use as a context manager, or call ``start()`` / ``stop()``.

    ``extra_args`` go to ``run-franka-sim-server`` (e.g. ``["--enforce-motion-limits"]``);
    ``env`` adds environment variables (e.g. ``{"FR3_JOINT_DAMPING": "30"}``); ``mjcf`` replaces
    the FR3 wrapper (a deliberately different model for system identification tests).
    """

    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    gripper: bool = True
    mjcf: Path | None = None
    lock_timeout_s: float = 600.0
    ready_timeout_s: float = 20.0
    log_path: Path | None = None
    #: Kill the server when the process that started it dies (``robot up``'s sim wrapper: a crashed
    #: wrapper must not leave a server holding port 1337).
    die_with_parent: bool = False
    #: Nice value of the server (when permitted; 0 leaves it). It stands in for the arm's own
    #: controller, which never waits for the robot PC's CPU, but at -10 by default it took CPU from
    #: the learner's heartbeats on two busy cores (deadman trips in a clean clone's test_ros_bridge),
    #: and against a CPU quota it does not help: off by default.
    nice: int = 0
    process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _lock_fd: int | None = field(default=None, init=False, repr=False)

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def _proc(self) -> subprocess.Popen:
        if self.process is None:
            raise FrankaSimError("franka-sim is not running: start() it first")
        return self.process

    @property
    def _log(self) -> Path:
        if self.log_path is None:
            raise FrankaSimError("franka-sim has no log yet: start() it first")
        return self.log_path

    def command(self) -> list[str]:
        exe = franka_sim_venv() / "bin" / "run-franka-sim-server"
        if not exe.exists():
            raise FrankaSimError(f"{exe} not found: run `make setup` to create the franka-sim venv")
        # franka-sim's own entry point binds 0.0.0.0; sim_main runs it on this host's loopback only
        args = [str(exe.parent / "python"), str(Path(__file__).with_name("sim_main.py")), "--host", self.host]
        if not self.gripper:
            args.append("--no-gripper")
        return args + list(self.extra_args)

    def start(self) -> FrankaSimServer:
        if self.process is not None:
            return self
        cmd = self.command()
        mjcf = self._mjcf()
        self._acquire_lock()
        try:
            self._wait_port_free()
            env = {**_clean_env(), "FR3_MJCF": str(mjcf), **self.env}
            if self.log_path is None:
                fd, name = tempfile.mkstemp(prefix="franka-sim-", suffix=".log")
                os.close(fd)
                self.log_path = Path(name)
            self._spawn(cmd, env, "wb")
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        log.info("franka-sim ready (pid %d, log %s)", self._proc.pid, self.log_path)
        return self

    def _acquire_lock(self) -> None:
        fd = os.open(LOCK_PATH, os.O_CREAT | os.O_RDWR, 0o666)
        deadline = time.monotonic() + self.lock_timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._lock_fd = fd
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise FrankaSimError(f"another franka-sim user holds {LOCK_PATH}") from None
                time.sleep(0.2)

    def _wait_port_free(self, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while _port_open(FCI_PORT):
            if time.monotonic() > deadline:
                raise FrankaSimError(f"TCP port {FCI_PORT} is in use by another process")
            time.sleep(0.1)

    def _wait_ready(self) -> None:
        check = franka_sim_venv() / "bin" / "franka-sim-check"
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise FrankaSimError(f"franka-sim exited with {self._proc.returncode}:\n{self.log_tail()}")
            if _port_open(FCI_PORT):
                res = subprocess.run(
                    [str(check), "--timeout", "5"], capture_output=True, env=_clean_env(), timeout=15
                )
                if res.returncode == 0:
                    return
            time.sleep(0.1)
        raise FrankaSimError(f"franka-sim not ready after {self.ready_timeout_s} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 30) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the server (a crashed robot controller, for fault tests); keeps the lock."""
        if self.alive():
            os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(timeout=10)

    def restart(self, check: bool = True) -> None:
        """Start the server again after ``kill()``, keeping the lock held.

        ``check=False`` waits only for the FCI port: a client that reconnects by itself (our
        ``franka_node``) may grab the single FCI connection before ``franka-sim-check`` can.
        """
        self.stop(release_lock=False)
        cmd = self.command()
        env = {**_clean_env(), "FR3_MJCF": str(self._mjcf()), **self.env}
        self._wait_port_free()
        self._spawn(cmd, env, "ab")
        if check:
            self._wait_ready()
        else:
            self._wait_port_open()

    def _mjcf(self) -> Path:
        """The model to serve: ``mjcf``, else the FR3 wrapper (written first if it is missing)."""
        if not self.mjcf:
            wrapper = fr3_mjcf_wrapper()
            try:
                return wrapper if wrapper.exists() else write_fr3_wrapper(wrapper)
            except FileNotFoundError as e:
                raise FrankaSimError(str(e)) from e
        if not Path(self.mjcf).exists():
            raise FrankaSimError(f"FR3 MJCF {self.mjcf} not found")
        return Path(self.mjcf)

    def _spawn(self, cmd: list[str], env: dict[str, str], mode: str) -> None:
        # A file, not a pipe: nobody reads the server's output while it runs, and a full pipe
        # would block its 1 kHz state thread.
        with open(self._log, mode) as logf:
            self.process = subprocess.Popen(
                cmd,
                env=env,
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=functools.partial(
                    _child_setup_with_parent_death if self.die_with_parent else _child_setup, self.nice
                ),
            )

    def _wait_port_open(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while not _port_open(FCI_PORT):
            if self._proc.poll() is not None:
                raise FrankaSimError(f"franka-sim exited with {self._proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise FrankaSimError(f"franka-sim port not open after {self.ready_timeout_s} s")
            time.sleep(0.05)

    def stop(self, release_lock: bool = True) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)
        if release_lock and self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> FrankaSimServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def _clean_env() -> dict[str, str]:
    """Our environment minus what would leak into franka-sim's venv: the ROS wheels'
    LD_LIBRARY_PATH, our PYTHONPATH, and the GL backend (the server renders nothing, and osmesa
    may not be installed on a robot PC)."""
    env = dict(os.environ)
    for var in ("PYTHONPATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "MUJOCO_GL", "PYOPENGL_PLATFORM"):
        env.pop(var, None)
    return env


def _child_setup(nice: int) -> None:  # runs in the child between fork and exec
    # A simulator must never inherit SCHED_FIFO from a thread libfranka raised (see robot.sched).
    if os.sched_getscheduler(0) != os.SCHED_OTHER:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    set_thread_nice(nice)  # the child's only thread: every thread the server starts inherits it


def _child_setup_with_parent_death(nice: int) -> None:
    import ctypes

    _child_setup(nice)
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
