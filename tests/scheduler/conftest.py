"""One local Ray cluster per test module (init ~3 s, ~640 MB), bound to 127.0.0.1, 4 logical GPUs."""

from __future__ import annotations

import time

import pytest


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("ray")
    from rlinf_robot.scheduler import Cluster

    c = Cluster(num_cpus=2, num_gpus=4, namespace="rlinf_test", log_to_driver=False)
    try:
        yield c
        # Nothing a test module started may outlive it.
        deadline = time.monotonic() + 15
        while c.live_actors() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.live_actors() == [], "leaked actors"
    finally:
        c.shutdown()
