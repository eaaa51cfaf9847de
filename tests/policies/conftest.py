"""Policies tests: one torch thread (the machine has two shared cores), offline hub."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True, scope="session")
def _torch_threads():
    import torch

    torch.set_num_threads(1)
    yield


@pytest.fixture
def point_env():
    from tests.algorithms.point_env import PointReachEnv

    return PointReachEnv(4, image_size=32, seed=0)
