"""Domain randomization: seeded sampling, sysid-derived ranges, and that every factor the README lists
changes what it should (the model, the motion, the rendered view, the timing, the observed state)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

import sim
from rlinf_robot.errors import ConfigError
from sim.randomization import SYSID_N_SIGMA, DomainRandomization, DynamicsFit, ParamRange, resolve


def fit():
    return DynamicsFit(
        mean={
            "joint_damping": np.full(7, 5.0),
            "joint_frictionloss": np.linspace(0.2, 1.0, 7),
            "payload_mass": [0.3],
        },
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
    [
        ({"joint_mass": np.ones(7)}, {"joint_mass": np.ones(7)}, "joint_mass"),
        ({"joint_damping": np.ones(6)}, {"joint_damping": np.ones(6)}, "7 values"),
        ({"joint_damping": np.ones(7)}, {}, "std keys"),
        ({"joint_damping": np.ones(7)}, {"joint_damping": -np.ones(7)}, ">= 0"),
        ({"payload_mass": [np.nan]}, {"payload_mass": [0.1]}, "finite"),
    ],
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
    [
        ({"link_mass": [1.2, 0.8]}, "lo <= hi"),
        ({"obs_noise_std": -1}, "obs_noise_std"),
        ({"action_delay_steps": (2, 1)}, "action_delay_steps"),
        ({"wind": 3}, "wind"),
        ({"control_jitter": 0.7}, "control_jitter"),
        ({"joint_damping": "big"}, "joint_damping"),
    ],
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
        # mean 5.0 +- SYSID_N_SIGMA x std 0.5, the range from_sysid draws by default
        assert np.all(np.abs(env.models[0].dof_damping[env.nominal.dof_ids] - 5.0) <= SYSID_N_SIGMA * 0.5)
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
    delayed = DomainRandomization(
        **{
            **{
                k: None
                for k in (
                    "link_mass",
                    "joint_damping",
                    "joint_frictionloss",
                    "joint_armature",
                    "object_mass",
                    "object_friction",
                    "actuator_gain",
                )
            },
            "obs_noise_std": 0.0,
            "control_jitter": 0.0,
            "action_delay_steps": (2, 2),
        }
    )
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


# ---------------------------------------------------------------------------------------------
# Every factor the README lists changes what it should, and only that. Each test turns one factor
# on (``only``) and compares with the same env and seed with everything off; a factor that is
# drawn but never applied makes its test fail.

OFF = DomainRandomization.off()
PUSH = np.full((1, 7), 0.02, np.float32)  # joint_delta: every joint 0.02 rad per tick


def only(**factor) -> DomainRandomization:
    return replace(OFF, **factor)


def joint_run(dr: DomainRandomization, ticks: int = 6, **make):
    """States after each of ``ticks`` identical joint_delta steps, the env's commanded target each
    tick, and the env (closed)."""
    env = sim.make("mujoco/fr3-reach", num_envs=1, action_mode="joint_delta", randomization=dr, **make)
    try:
        q0 = env.reset(seed=0)["state"][0, :7].astype(np.float64)
        states = np.stack([env.step(PUSH)[0]["state"][0] for _ in range(ticks)])
        targets = q0 + 0.02 * np.arange(1, ticks + 1)[:, None]
        return states, targets, env
    finally:
        env.close()


@pytest.fixture(scope="module")
def nominal_run():
    return joint_run(OFF)


@pytest.mark.parametrize(
    "key, value, check",
    [
        (
            "link_mass",
            1.5,
            lambda m, nf, n: np.allclose(m.body_mass[n.link_ids], 1.5 * nf["body_mass"][n.link_ids]),
        ),
        (
            "joint_damping",
            3.0,
            lambda m, nf, n: np.allclose(m.dof_damping[n.dof_ids], 3.0 * nf["dof_damping"][n.dof_ids]),
        ),
        (
            "joint_frictionloss",
            0.5,
            lambda m, nf, n: np.allclose(
                m.dof_frictionloss[n.dof_ids], 0.5 * nf["dof_frictionloss"][n.dof_ids]
            ),
        ),
        (
            "joint_armature",
            1.5,
            lambda m, nf, n: np.allclose(m.dof_armature[n.dof_ids], 1.5 * nf["dof_armature"][n.dof_ids]),
        ),
        (
            "actuator_gain",
            0.5,
            lambda m, nf, n: np.allclose(m.actuator_gainprm[:7, 0], 0.5 * nf["actuator_gainprm"][:7, 0]),
        ),
    ],
)
def test_each_dynamics_factor_sets_its_field_and_changes_the_motion(key, value, check, nominal_run):
    states, _, env = joint_run(only(**{key: ParamRange(value, value)}))
    assert check(env.models[0], env.nominal.model_fields, env.nominal), key
    base = nominal_run[0]
    moved = float(np.abs(states[:, :7] - base[:, :7]).max())
    assert moved > 1e-5, f"{key} x{value} changed the joint trajectory by only {moved:.2e} rad"


def test_payload_adds_its_mass_at_the_hand_and_changes_the_motion(nominal_run):
    states, _, env = joint_run(only(payload_mass=ParamRange(1.0, 1.0, "absolute")))
    hand = env.nominal.hand_id
    assert env.models[0].body_mass[hand] == pytest.approx(env.nominal.model_fields["body_mass"][hand] + 1.0)
    assert np.abs(states[:, :7] - nominal_run[0][:, :7]).max() > 1e-4


def test_actuator_gain_sets_how_far_the_servo_lags_its_target(nominal_run):
    """Weaker servos lag a moving target more, stiffer ones less (critical damping kept)."""
    lag = {1.0: np.abs(nominal_run[1] - nominal_run[0][:, :7]).max()}
    for gain in (0.5, 2.0):
        states, targets, _ = joint_run(only(actuator_gain=ParamRange(gain, gain)))
        lag[gain] = np.abs(targets - states[:, :7]).max()
    assert lag[0.5] > 1.5 * lag[1.0] > 2.25 * lag[2.0], lag


def test_control_jitter_changes_the_substeps_of_each_tick():
    """Without jitter every 20 Hz tick is 25 physics steps (0.05 s); with +-20 % each tick draws its
    own count in [20, 30], independently per env."""

    def tick_steps(dr, n=2, ticks=12):
        env = sim.make("mujoco/fr3-reach", num_envs=n, action_mode="joint_delta", randomization=dr)
        try:
            env.reset(seed=0)
            times = [np.array([d.time for d in env.datas])]
            for _ in range(ticks):
                env.step(np.zeros((n, 7), np.float32))
                times.append(np.array([d.time for d in env.datas]))
            dt = env.models[0].opt.timestep
            return np.rint(np.diff(np.stack(times), axis=0) / dt).astype(int), env.substeps
        finally:
            env.close()

    steady, substeps = tick_steps(OFF)
    assert substeps == 25 and np.all(steady == 25)
    jittered, _ = tick_steps(only(control_jitter=0.2))
    assert np.all((jittered >= 20) & (jittered <= 30)), jittered.T
    assert len(np.unique(jittered[:, 0])) >= 3  # it varies from tick to tick ...
    assert not np.array_equal(jittered[:, 0], jittered[:, 1])  # ... and between envs
    assert abs(jittered.mean() - 25) < 2.5


def test_observation_noise_changes_the_state_but_not_the_physics():
    noisy = sim.make(
        "mujoco/fr3-reach", num_envs=2, action_mode="joint_delta", randomization=only(obs_noise_std=0.01)
    )
    clean = sim.make("mujoco/fr3-reach", num_envs=2, action_mode="joint_delta", randomization=OFF)
    try:
        diffs = [noisy.reset(seed=4)["state"] - clean.reset(seed=4)["state"]]
        for _ in range(5):
            a = np.full((2, 7), 0.01, np.float32)
            diffs.append(noisy.step(a)[0]["state"] - clean.step(a)[0]["state"])
            for dn, dc in zip(noisy.datas, clean.datas, strict=True):  # the physics never sees the noise
                np.testing.assert_array_equal(dn.qpos, dc.qpos)
                np.testing.assert_array_equal(dn.qvel, dc.qvel)
        diffs = np.stack(diffs)
        assert 0.008 < diffs.std() < 0.012 and abs(diffs.mean()) < 0.002  # N(0, 0.01) on every column
        assert np.all(np.abs(diffs[1] - diffs[2]) > 0)  # fresh noise every tick
    finally:
        noisy.close()
        clean.close()


def test_a_chunk_sees_the_same_noise_as_its_steps():
    dr = only(obs_noise_std=0.01)
    a = sim.make("mujoco/fr3-reach", num_envs=1, action_mode="joint_delta", randomization=dr)
    b = sim.make("mujoco/fr3-reach", num_envs=1, action_mode="joint_delta", randomization=dr)
    try:
        a.reset(seed=2)
        b.reset(seed=2)
        chunk = np.full((1, 3, 7), 0.01, np.float32)
        by_chunk = a.chunk_step(chunk)[0]["state"]
        for k in range(3):
            by_steps = b.step(chunk[:, k])[0]["state"]
        np.testing.assert_array_equal(by_chunk, by_steps)
    finally:
        a.close()
        b.close()


def _object_slide(dr: DomainRandomization, force: float = 0.7, ticks: int = 6) -> float:
    """How far (m) the push block slides along x under a constant horizontal ``force`` (N), the
    arm holding still above it."""
    env = sim.make("mujoco/fr3-push", num_envs=1, action_mode="joint_delta", randomization=dr)
    try:
        sl = env.obs_spec.state_slices()
        start = env.reset(seed=0)["state"][0, sl["obj_pos"]].copy()
        env.datas[0].xfrc_applied[env.nominal.object_body, :3] = [force, 0.0, 0.0]
        for _ in range(ticks):
            obs = env.step(np.zeros((1, 7), np.float32))[0]
        return float(obs["state"][0, sl["obj_pos"]][0] - start[0])
    finally:
        env.close()


def test_object_friction_and_mass_change_how_the_block_slides():
    """0.7 N against 0.4 x 0.15 kg x g = 0.59 N of sliding friction: the nominal block slides a
    little, a slipperier or lighter one further, a rougher or heavier one not at all. Below 1 the
    friction factor reaches the contact only because the table is scaled with the block (MuJoCo
    takes the rougher of two geoms)."""
    nominal = _object_slide(OFF)
    assert 0.002 < nominal < 0.05, nominal
    assert _object_slide(only(object_friction=ParamRange(0.75, 0.75))) > 1.5 * nominal
    assert _object_slide(only(object_friction=ParamRange(1.25, 1.25))) < 0.2 * nominal
    assert _object_slide(only(object_mass=ParamRange(0.8, 0.8))) > 1.5 * nominal
    assert _object_slide(only(object_mass=ParamRange(1.25, 1.25))) < 0.2 * nominal


def _front(dr: DomainRandomization | None, task: str = "mujoco/fr3-push") -> np.ndarray:
    env = sim.make(task, num_envs=1, image_size=64, cameras=("front",), randomization=dr)
    try:
        return env.reset(seed=0)["images"]["front"][0].astype(np.float64), env
    finally:
        env.close()


@pytest.fixture(scope="module")
def nominal_front():
    return _front(None)[0]


def test_off_renders_the_nominal_scene(nominal_front):
    np.testing.assert_array_equal(_front(OFF)[0], nominal_front)


def test_lighting_changes_the_rendered_brightness(nominal_front):
    """The scene's key light is 0.8 diffuse: drawn at 0.6 the picture is darker, at 1.0 brighter."""
    dark = _front(only(light_range=(0.6, 0.6)))[0]
    bright = _front(only(light_range=(1.0, 1.0)))[0]
    assert dark.mean() + 2 < nominal_front.mean() < bright.mean() - 2, (
        dark.mean(),
        nominal_front.mean(),
        bright.mean(),
    )


def test_colour_jitter_shifts_the_drawn_colours_around_their_nominal(nominal_front):
    """The table is drawn in its material's brown; a jitter of (+r, 0, -b) makes it redder and less
    blue, not a grey +- jitter (the default rgba it would replace)."""
    import mujoco

    env = sim.make("mujoco/fr3-push", num_envs=1, image_size=64, cameras=("front",), randomization=OFF)
    try:
        env.reset(seed=0)
        params = OFF.sample(np.random.default_rng(0))
        params["color"] = np.array([0.08, 0.0, -0.08])
        from sim.mujoco import dr_apply

        dr_apply.apply(env.models[0], env.nominal, params)
        table = mujoco.mj_name2id(env.models[0], mujoco.mjtObj.mjOBJ_GEOM, "table")
        mat = env.models[0].geom_matid[table]
        np.testing.assert_allclose(
            env.models[0].geom_rgba[table, :3], env.models[0].mat_rgba[mat, :3] + [0.08, 0, -0.08]
        )
        img = env.render("front", 64).astype(np.float64)
    finally:
        env.close()
    low = slice(48, 64)  # the bottom rows of the front view are table
    shift = (img[low] - nominal_front[low]).reshape(-1, 3).mean(0)
    assert shift[0] > 5 and shift[2] < -5 and abs(shift[1]) < 3, shift
    jittered = _front(only(color_jitter=0.1))[0]
    assert np.abs(jittered - nominal_front).mean() > 1


def test_camera_pose_moves_the_view(nominal_front):
    """Position and rotation each change the rendered view, and each only its own field."""
    img, env = _front(only(camera_pos_std=0.02))
    nf = env.nominal.model_fields
    assert np.abs(env.models[0].cam_pos - nf["cam_pos"]).max() > 1e-3
    np.testing.assert_array_equal(env.models[0].cam_quat, nf["cam_quat"])
    assert np.abs(img - nominal_front).mean() > 1
    img, env = _front(only(camera_rot_std=0.03))
    np.testing.assert_array_equal(env.models[0].cam_pos, nf["cam_pos"])
    angle = 2 * np.arccos(np.clip(np.abs(np.sum(env.models[0].cam_quat * nf["cam_quat"], axis=1)), 0, 1))
    assert np.all(angle > 1e-3), angle
    assert np.abs(img - nominal_front).mean() > 1
