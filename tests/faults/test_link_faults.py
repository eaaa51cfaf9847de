"""Issue 19, items 1, 2 and 4 (reduced): the robot PC and a learner on two network hosts
(namespaces joined by a veth pair, CURVE on the bridge's veth address); while the learner drives
the arm, faults on the link between them (partitions, loss, delay with jitter) and a ``kill -9`` of
bridge_node (``robot up`` restarts it). Each row must meet the bounds in ``link_matrix``: the arm
holds within the deadman's reach of a partition, no chunk runs that was computed from a stale
observation, the arm stays where it held, and the learner's chunks move the arm again soon after
the link heals or the process is back, without restarting the learner. Then every socket the robot
PC opened is where its config says. ``benchmarks/fault_matrix.py`` runs the full matrix."""

from __future__ import annotations

import pytest

from tests.faults.link_matrix import PORT, LinkStack, table
from tests.faults.netlab import ROBOT_ADDR, Fault, NetLab, unavailable
from tests.integration.robot.conftest import descendants

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

CASES = [
    Fault("partition", 0.5),
    Fault("partition", 5.0),
    Fault("loss", 3.0, 20),
    Fault("delay", 3.0, 100, jitter=100),
    Fault("kill", target="bridge_node"),
]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    why = unavailable()
    if why:
        pytest.skip(why)
    with NetLab() as lab, LinkStack(lab, tmp_path_factory.mktemp("links")) as s:
        yield s


def test_link_faults_between_two_hosts_meet_their_bounds(stack):
    rows = [stack.run(fault, f"case{i}") for i, fault in enumerate(CASES)]
    print("\n" + table(rows))
    assert all(r.ok for r in rows), table(rows) + "\n" + (stack.up.tail(60) if stack.up else "")


def test_the_robot_pc_listens_only_where_its_config_says(stack):
    """Issue 19, item 4: the bridge on its configured veth address, franka-sim and every DDS socket
    on 127.0.0.1. The only sockets on all addresses are the FCI protocol's UDP ones, which libfranka
    (franka_node) and the arm (franka-sim) bind themselves: on a robot PC a firewall keeps those to
    the arm's link."""
    sockets = stack.lab.listening(stack.lab.robot)
    listing = "\n".join(s.line for s in sockets)
    assert any(s.proto == "tcp" and s.address == ROBOT_ADDR and s.port == PORT for s in sockets), listing
    fci = {stack.pids["franka_node"], stack.pids["franka_sim"], *descendants(stack.pids["franka_sim"])}
    exposed = [s.line for s in sockets if s.wildcard and not (s.proto == "udp" and set(s.pids) <= fci)]
    assert not exposed, listing
    assert sum(s.wildcard for s in sockets) <= 4, listing  # arm and gripper, each side
