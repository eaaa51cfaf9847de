"""Domain randomization: seeded sampling, sysid-derived ranges, and that the model really changes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import sim
from rlinf_robot.errors import ConfigError
from sim.randomization import DomainRandomization, DynamicsFit, ParamRange, resolve


def fit():
    return DynamicsFit(
        mean={"joint_damping": np.full(7, 5.0), "joint_frictionloss": np.linspace(0.2, 1.0, 7),
              "payload_mass": [0.3]},
        std={"joint_damping": np.full(7, 0.5), "joint_frictionloss": np.full(7, 0.1), "payload_mass": [0.05]},
        fit_id="fit-001",
        residual_rms=0.004,
    )


def test_dynamics_fit_round_trips_through_json():
    f = fit()
    back = DynamicsFit.from_dict(json.loads(json.dumps(f.to_dict())))
    assert back.fit_id == "fit-001" and back.residual_rms == pytest.approx(0.004)
    for k in f.mean:
        np.testing.assert_array_equal(back.mean[k], f.mean[k])
        np.testing.assert_array_equal(back.std[k], f.std[k])
    nan = DynamicsFit(mean={"payload_mass": [0.1]}, std={"payload_mass": [0.0]})
    raw = json.dumps(nan.to_dict())  # NaN residual must not produce invalid JSON
    assert "NaN" not in raw and math.isnan(DynamicsFit.from_dict(json.loads(raw)).residual_rms)


@pytest.mark.parametrize(
    "mean, std, match",
    [({"joint_mass": np.ones(7)}, {"joint_mass": np.ones(7)}, "joint_mass"),
     ({"joint_damping": np.ones(6)}, {"joint_damping": np.ones(6)}, "7 values"),
     ({"joint_damping": np.ones(7)}, {}, "std keys"),
     ({"joint_damping": np.ones(7)}, {"joint_damping": -np.ones(7)}, ">= 0"),
     ({"payload_mass": [np.nan]}, {"payload_mass": [0.1]}, "finite")],
)
def test_dynamics_fit_validates(mean, std, match):
    with pytest.raises(ConfigError, match=match):
        DynamicsFit(mean=mean, std=std)


def test_from_sysid_ranges_are_mean_plus_minus_n_sigma():
    dr = DomainRandomization.from_sysid(fit(), n_sigma=2.0)
    assert dr.joint_damping.kind == "absolute"
    np.testing.assert_allclose(dr.joint_damping.lo, 4.0)
    np.testing.assert_allclose(dr.joint_damping.hi, 6.0)
    np.testing.assert_allclose(dr.joint_frictionloss.lo, np.maximum(np.linspace(0.2, 1.0, 7) - 0.2, 0.0))
    assert dr.joint_armature == DomainRandomization().joint_armature  # not in the fit: base range kept
    assert resolve(fit()).joint_damping.kind == "absolute"
    assert resolve(fit().to_dict()).payload_mass.kind == "absolute"


def test_same_seed_same_params_different_seed_different():
    dr = DomainRandomization()
    a = dr.sample(np.random.default_rng(11))
    b = dr.sample(np.random.default_rng(11))
    c = dr.sample(np.random.default_rng(12))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["joint_damping"], c["joint_damping"])


def test_switching_one_parameter_off_keeps_the_others_streams():
    on = DomainRandomization().sample(np.random.default_rng(5))
    off = DomainRandomization(link_mass=None).sample(np.random.default_rng(5))
    assert "link_mass" not in off
    np.testing.assert_array_equal(on["joint_damping"], off["joint_damping"])


@pytest.mark.parametrize(
    "raw, match",
    [({"link_mass": [1.2, 0.8]}, "lo <= hi"), ({"obs_noise_std": -1}, "obs_noise_std"),
     ({"action_delay_steps": (2, 1)}, "action_delay_steps"), ({"wind": 3}, "wind"),
     ({"control_jitter": 0.7}, "control_jitter"), ({"joint_damping": "big"}, "joint_damping")],
)
def test_bad_ranges_name_the_key(raw, match):
    with pytest.raises(ConfigError, match=match):
        DomainRandomization.from_dict(raw)


def test_env_applies_params_per_env_and_reproducibly():
    dr = DomainRandomization.from_sysid(fit(), n_sigma=2.0, base=DomainRandomization(link_mass=None))
    a = sim.make("mujoco/fr3-push", num_envs=3, randomization=dr)
    b = sim.make("mujoco/fr3-push", num_envs=3, randomization=dr)
    try:
        a.reset(seed=21)
        b.reset(seed=21)
        dofs = a.nominal.dof_ids
        damp = np.stack([m.dof_damping[dofs] for m in a.models])
        assert np.all((damp >= 4.0) & (damp <= 6.0))
        assert not np.allclose(damp[0], damp[1])  # each env draws its own
        np.testing.assert_array_equal(damp, np.stack([m.dof_damping[dofs] for m in b.models]))
        hand = a.nominal.hand_id
        extra = a.models[0].body_mass[hand] - a.nominal.model_fields["body_mass"][hand]
        assert 0.2 <= extra <= 0.4
        obj = a.nominal.object_body
        masses = [m.body_mass[obj] for m in a.models]
        assert len(set(masses)) == 3
        assert a.models[0].cam_pos.tolist() != a.nominal.model_fields["cam_pos"].tolist()
    finally:
        a.close()
        b.close()


def test_make_takes_a_dynamics_fit_directly():
    env = sim.make("mujoco/fr3-reach", num_envs=2, randomization=fit())
    try:
        env.reset(seed=0)
        assert env.dr.joint_damping.kind == "absolute"
        assert np.all(np.abs(env.models[0].dof_damping[env.nominal.dof_ids] - 5.0) <= 1.0)
    finally:
        env.close()


def test_off_means_nominal_and_no_noise():
    env = sim.make("mujoco/fr3-reach", num_envs=2, randomization=DomainRandomization.off())
    plain = sim.make("mujoco/fr3-reach", num_envs=2)
    try:
        np.testing.assert_array_equal(env.reset(seed=1)["state"], plain.reset(seed=1)["state"])
        np.testing.assert_array_equal(env.models[0].dof_damping, plain.models[0].dof_damping)
    finally:
        env.close()
        plain.close()


def test_action_delay_shifts_the_response_by_whole_ticks():
    delayed = DomainRandomization(**{**{k: None for k in ("link_mass", "joint_damping", "joint_frictionloss",
                                     "joint_armature", "object_mass", "object_friction", "actuator_gain")},
                                  "obs_noise_std": 0.0, "control_jitter": 0.0, "action_delay_steps": (2, 2)})
    env = sim.make("mujoco/fr3-reach", num_envs=1, action_mode="joint_delta", randomization=delayed)
    try:
        q0 = env.reset(seed=0)["state"][0, :7].copy()
        push = np.full((1, 7), 0.04, np.float32)
        moved = []
        for _ in range(4):
            moved.append(float(np.abs(env.step(push)[0]["state"][0, :7] - q0).max()))
        assert moved[0] < 2e-3 and moved[1] < 2e-3 and moved[2] > 0.02
    finally:
        env.close()


def test_param_range_kinds():
    with pytest.raises(ConfigError):
        ParamRange(0.1, 0.2, kind="relative")
    r = ParamRange([1.0, 2.0], [1.0, 3.0], kind="absolute")
    np.testing.assert_allclose(r.at(np.array([0.5, 0.5])), [1.0, 2.5])
