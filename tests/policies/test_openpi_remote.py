"""openpi_remote against a local server speaking openpi's websocket protocol on 127.0.0.1."""

import threading

import numpy as np
import pytest

import policies
from policies.adapters.openpi_remote.policy import RemotePolicyError
from policies.adapters.openpi_remote.server import OpenPIPolicyServer
from rlinf_robot.errors import LinkLost

H = 5
# openpi-client 0.1.2 calls websockets.connect() outside a context manager; harmless here.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:connect\(\) must be used as a context manager:DeprecationWarning"
)


def echo_policy(obs: dict) -> dict:
    """A stand-in pi0: actions encode what it received, so the mapping can be checked exactly."""
    state = np.asarray(obs["observation/state"], np.float32)
    img = obs["observation/image"]
    a = np.zeros((H + 3, 8), np.float32)  # longer and wider than asked: the client cuts
    a[:, 0] = state[0] * 1e-3
    a[:, 1] = float(img.mean()) * 1e-4
    a[:, 2] = len(obs["prompt"]) * 1e-3
    a[:, 3] = np.arange(H + 3) * 1e-3
    a[:, 4] = 5.0  # beyond the spec's high: clipped
    return {"actions": a}


def test_round_trip_through_openpi_client(point_env):
    obs = point_env.reset(seed=0)
    with OpenPIPolicyServer(echo_policy, metadata={"model": "pi0-stand-in"}, lifetime_s=60) as srv:
        assert srv.host == "127.0.0.1"
        pol = policies.make(
            "openpi_remote",
            action_spec=point_env.action_spec,
            port=srv.port,
            chunk_size=H,
            image_keys={"front": "observation/image"},
        )
        assert pol.server_metadata == {"model": "pi0-stand-in"}
        out = pol.predict_action_batch(obs)
        pol.close()
        assert srv.requests == point_env.num_envs
    assert out.actions.shape == (4, H, 6) and out.log_prob is None
    np.testing.assert_allclose(
        out.actions[:, 0, 0], np.clip(obs["state"][:, 0] * 1e-3, -0.02, 0.02), rtol=1e-5
    )
    np.testing.assert_allclose(
        out.actions[:, 0, 1], obs["images"]["front"].reshape(4, -1).mean(1) * 1e-4, rtol=1e-4
    )
    np.testing.assert_allclose(out.actions[:, :, 2], len("reach the goal") * 1e-3)
    np.testing.assert_allclose(out.actions[0, :, 3], np.arange(H) * 1e-3, atol=1e-7)
    assert np.all(out.actions[:, :, 4] == point_env.action_spec.high[4])


@pytest.mark.parametrize(
    "reply, match",
    [
        (lambda o: {"actions": np.full((H, 6), np.nan, np.float32)}, "NaN"),
        (lambda o: {"actions": np.zeros((2, 6), np.float32)}, "do not cover"),
        (lambda o: {"no_actions": 1}, "no 'actions'"),
        (lambda o: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_bad_replies_raise_typed_errors(point_env, reply, match):
    with OpenPIPolicyServer(reply, lifetime_s=60) as srv:
        pol = policies.make("openpi_remote", action_spec=point_env.action_spec, port=srv.port, chunk_size=H)
        with pytest.raises(RemotePolicyError, match=match):
            pol.predict_action_batch(point_env.reset(seed=0))
        pol.close()


def test_stalled_server_raises_link_lost(point_env):
    release = threading.Event()

    def stall(obs):
        release.wait(timeout=10)
        return {"actions": np.zeros((H, 6), np.float32)}

    with OpenPIPolicyServer(stall, lifetime_s=60) as srv:
        pol = policies.make(
            "openpi_remote", action_spec=point_env.action_spec, port=srv.port, chunk_size=H, timeout_s=0.3
        )
        with pytest.raises(LinkLost):
            pol.predict_action_batch(point_env.reset(seed=0))
        release.set()
        pol.close()


def test_openpi_remote_is_inference_only(point_env):
    with OpenPIPolicyServer(echo_policy, lifetime_s=60) as srv:
        pol = policies.make("openpi_remote", action_spec=point_env.action_spec, port=srv.port)
        with pytest.raises(TypeError, match="inference-only"):
            pol({"obs": {}})
        pol.close()
