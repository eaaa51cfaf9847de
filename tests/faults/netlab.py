"""Two network hosts on one machine: a robot PC and a learner in network namespaces of their own,
joined by one veth pair, with faults put on that link (issue 19, item 1).

The test creates and deletes everything itself (root: ``ip netns``, ``ip link``); each namespace
has its loopback and one veth address and no route out, so nothing it starts can reach any other
address. Faults act on the robot side of the pair, so traffic inside a host (ROS 2 between the robot
PC's nodes, an observer on the robot PC) is untouched:

- ``partition``: an ``nftables`` rule drops every packet in and out of the veth (TCP connections
  stay open and retransmit, as across a pulled cable or a dead switch, rather than being reset);
- ``loss``: the same rule with ``numgen random`` drops a share of packets each way;
- ``bandwidth``: a ``tc tbf`` queue on the robot's egress (observations are the big messages).

The kernel here has no ``netem`` qdisc: delay and jitter come from ``delay_proxy`` instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

ROBOT_ADDR = "10.231.0.1"
LEARNER_ADDR = "10.231.0.2"


def unavailable() -> str | None:
    """Why namespaces cannot be made here (a skip reason), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make setup installs nftables; iproute2 has ip and tc)"
    probe = f"rr-probe-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"cannot create a network namespace: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _run(*argv: str, input: str | None = None) -> None:
    r = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=30)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip() or r.stdout.strip()}")


@dataclass(frozen=True)
class Fault:
    """One fault: on the link, ``kind`` partition / loss / bandwidth held for ``seconds`` (None:
    until the end of the case) with its size (loss in percent, bandwidth in kbit/s); ``delay``
    (``size`` ms each way, ``± jitter``: a proxy in front of the bridge does it); or ``kill``, a
    ``kill -9`` of the robot PC's process ``target`` (the case driver does those two)."""

    kind: str
    seconds: float | None = None
    size: float = 0.0
    target: str = ""
    jitter: float = 0.0  # delay only: ± ms around ``size``

    @property
    def name(self) -> str:
        held = "forever" if self.seconds is None else f"{self.seconds * 1e3:.0f}ms"
        if self.kind == "kill":
            return f"kill -9 {self.target}"
        if self.kind == "delay":
            return f"delay {self.size:g}±{self.jitter:g}ms {held}"
        if self.kind == "partition":
            return f"partition {held}"
        unit = "%" if self.kind == "loss" else "kbit/s"
        return f"{self.kind} {self.size:g}{unit} {held}"


class NetLab:
    """``robot`` and ``learner`` namespaces joined by a veth pair; ``with NetLab() as lab``."""

    def __init__(self, tag: str | None = None):
        tag = tag or str(os.getpid())
        self.robot, self.learner = f"rr-robot-{tag}", f"rr-learner-{tag}"
        self.robot_if, self.learner_if = f"vr{tag}"[:15], f"vl{tag}"[:15]
        self.active: Fault | None = None

    def __enter__(self) -> NetLab:
        self.close()  # a namespace left by a killed run of the same pid
        try:
            for ns in (self.robot, self.learner):
                _run("ip", "netns", "add", ns)
                _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "link", "add", self.robot_if, "type", "veth", "peer", "name", self.learner_if)
            for ns, dev, addr in (
                (self.robot, self.robot_if, ROBOT_ADDR),
                (self.learner, self.learner_if, LEARNER_ADDR),
            ):
                _run("ip", "link", "set", dev, "netns", ns)
                _run("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
                _run("ip", "-n", ns, "link", "set", dev, "up")
        except Exception:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for ns in (self.robot, self.learner):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def exec_prefix(self, ns: str) -> tuple[str, ...]:
        return ("ip", "netns", "exec", ns)

    # ------------------------------------------------------------------ faults
    def apply(self, fault: Fault) -> None:
        if self.active is not None:
            raise RuntimeError(f"{self.active.name} is still on the link")
        if fault.kind == "bandwidth":
            kbit = int(fault.size)
            _run(
                "ip", "netns", "exec", self.robot, "tc", "qdisc", "add", "dev", self.robot_if, "root",
                "tbf", "rate", f"{kbit}kbit", "burst", "16kb", "latency", "200ms",
            )  # fmt: skip
        else:
            match = "" if fault.kind == "partition" else f"numgen random mod 100 < {int(fault.size)} "
            if fault.kind not in ("partition", "loss"):
                raise ValueError(f"unknown fault kind {fault.kind!r}")
            rules = f"""table inet rrfault {{
                chain in {{ type filter hook input priority 0; iifname "{self.robot_if}" {match}drop; }}
                chain out {{ type filter hook output priority 0; oifname "{self.robot_if}" {match}drop; }}
            }}"""
            _run("ip", "netns", "exec", self.robot, "nft", "-f", "-", input=rules)
        self.active = fault

    def heal(self) -> None:
        fault, self.active = self.active, None
        if fault is None:
            return
        if fault.kind == "bandwidth":
            _run("ip", "netns", "exec", self.robot, "tc", "qdisc", "del", "dev", self.robot_if, "root")
        else:
            _run("ip", "netns", "exec", self.robot, "nft", "delete", "table", "inet", "rrfault")

    def listening(self, ns: str) -> list[Socket]:
        """``ss -ltnup`` in ``ns``: the TCP sockets its processes listen on and their UDP sockets."""
        r = subprocess.run(["ip", "netns", "exec", ns, "ss", "-ltnupH"], capture_output=True, text=True)
        return [Socket.parse(line) for line in r.stdout.splitlines() if line.strip()]


@dataclass(frozen=True)
class Socket:
    proto: str
    address: str
    port: int
    pids: tuple[int, ...]
    line: str

    @property
    def wildcard(self) -> bool:
        return self.address in ("0.0.0.0", "*", "[::]", "::")

    @classmethod
    def parse(cls, line: str) -> Socket:
        fields = line.split()
        address, _, port = fields[4].rpartition(":")
        pids = tuple(int(p) for p in re.findall(r"pid=(\d+)", line))
        return cls(fields[0], address, int(port), pids, " ".join(fields))
