"""G1's per-episode domain randomization (bcg_envs/envs/g1/randomize.py): the
Playground-shaped draw on the G1 model (no step compiled) and the env options; the
integration tier checks the redraw at autoreset, the long tier a step's gradient."""

import gymnasium as gym
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco import mjx

import bcg_envs
from bcg_envs.envs.g1 import constants as C
from bcg_envs.envs.g1.randomize import RANDOMIZED_FIELDS, domain_randomize
from bcg_envs.envs.g1.tracking import G1Squat
from bcg_envs.physics.model_fields import batched_fields

N = 3
#: Two-step episodes from the clip's first frame: the autoreset comes at the second step.
CFG = {"episode_length": 2, "random_start": False}


@pytest.fixture(scope="module")
def nominal():
    return mujoco.MjModel.from_xml_path(str(C.G1_XML))


@pytest.fixture(scope="module")
def draws(nominal):
    """``domain_randomize`` of the G1 model for N keys: (batched model, in_axes)."""
    model = mjx.put_model(nominal)
    seen = {}

    def run(keys):
        batched, in_axes = domain_randomize(model, keys)
        seen["in_axes"] = in_axes  # ints and None, known at trace time
        return batched

    batched = jax.jit(run)(jax.random.split(jax.random.PRNGKey(0), N))
    return batched, seen["in_axes"]


def test_only_the_randomized_fields_get_a_batch_axis(nominal, draws):
    batched, in_axes = draws
    fields = batched_fields(batched, in_axes)
    assert set(fields) == set(RANDOMIZED_FIELDS)
    for name, value in fields.items():
        assert value.shape == (N,) + getattr(nominal, name).shape, name
    assert batched.geom_size.shape == nominal.geom_size.shape  # untouched fields stay unbatched
    assert in_axes.geom_size is None and in_axes.body_mass == 0


def test_draws_stay_in_the_configured_ranges(nominal, draws):
    batched = draws[0]
    foot = [nominal.geom(g).id for g in C.FOOT_GEOMS]
    floor = nominal.geom(C.FLOOR_GEOM).id
    pairs = [i for i in range(nominal.npair) if floor in (nominal.pair_geom1[i], nominal.pair_geom2[i])]
    others = [i for i in range(nominal.npair) if i not in pairs]
    pelvis = nominal.body(C.ROOT_BODY).id
    links = [b for b in range(1, nominal.nbody) if b != pelvis]
    for i in range(N):
        geom_friction = np.asarray(batched.geom_friction[i])
        mu = geom_friction[foot[0], 0]
        assert 0.3 <= mu <= 1.2
        np.testing.assert_array_equal(geom_friction[foot, 0], mu)
        np.testing.assert_array_equal(np.asarray(batched.pair_friction[i])[pairs, 0:2], mu)
        np.testing.assert_array_equal(
            np.asarray(batched.pair_friction[i])[others], nominal.pair_friction[others].astype(np.float32)
        )
        rest = np.setdiff1d(np.arange(nominal.ngeom), foot)
        np.testing.assert_array_equal(geom_friction[rest], nominal.geom_friction[rest].astype(np.float32))
        mass = np.asarray(batched.body_mass[i])
        ratio = mass[links] / nominal.body_mass[links]
        assert np.all((ratio >= 0.8 - 1e-6) & (ratio <= 1.2 + 1e-6)) and np.ptp(ratio) > 0.05
        inertia = np.asarray(batched.body_inertia[i])
        np.testing.assert_allclose(inertia[links] / nominal.body_inertia[links], ratio[:, None] * np.ones(3), rtol=1e-5)
        assert mass[0] == 0.0
        assert (
            0.8 * nominal.body_mass[pelvis] - 3.0 - 1e-4 <= mass[pelvis] <= 1.2 * nominal.body_mass[pelvis] + 3.0 + 1e-4
        )
        kp = np.asarray(batched.actuator_gainprm[i])[:, 0] / nominal.actuator_gainprm[:, 0]
        kv = np.asarray(batched.actuator_biasprm[i])[:, 2] / nominal.actuator_biasprm[:, 2]
        for scale in (kp, kv):
            assert np.all((scale >= 0.8 - 1e-6) & (scale <= 1.2 + 1e-6))
        assert not np.allclose(kp, kv)  # drawn independently
        np.testing.assert_allclose(batched.actuator_biasprm[i][:, 1], -batched.actuator_gainprm[i][:, 0], rtol=1e-6)
    assert len({float(batched.body_mass[i][pelvis]) for i in range(N)}) == N  # one draw per key


def test_derived_mass_constants_are_mujocos(nominal, draws):
    """``mj_setConst`` on the drawn masses (what ``randomize_model`` calls) gives the drawn
    subtree masses and inverse weights."""
    batched = draws[0]
    m = mujoco.MjModel.from_xml_path(str(C.G1_XML))
    m.body_mass[:] = np.asarray(batched.body_mass[1])
    m.body_inertia[:] = np.asarray(batched.body_inertia[1])
    mujoco.mj_setConst(m, mujoco.MjData(m))
    for name in ("body_subtreemass", "body_invweight0", "dof_invweight0"):
        np.testing.assert_allclose(np.asarray(getattr(batched, name)[1]), getattr(m, name), rtol=1e-4, err_msg=name)
        assert not np.allclose(getattr(m, name), getattr(nominal, name), rtol=1e-3), name  # they did change


def test_env_options(nominal):
    env = G1Squat(randomize="episode", config={"domain_randomization": True, "randomization": {"friction": (0.5, 0.6)}})
    # per episode: the per-instance draw is skipped, the ranges are the config's
    np.testing.assert_array_equal(env.mj_model.body_mass, nominal.body_mass)
    assert env.randomization_fn.keywords["ranges"]["friction"] == (0.5, 0.6)
    assert env.pushes_at_reset and G1Squat(randomize="episode").pushes_at_reset and not G1Squat().pushes_at_reset
    with pytest.raises(ValueError, match=r"config\['randomization'\]\['friction'\]"):
        G1Squat(randomize="episode", config={"randomization": {"friction": (1.2, 0.3)}})
    with pytest.raises(ValueError, match=r"'pd_gain_scale'.*> 0"):
        G1Squat(randomize="episode", config={"randomization": {"pd_gain_scale": (0.0, 1.0)}})


@pytest.mark.integration
def test_g1_gym_vector_env_redraws_its_model_per_episode():
    """Gymnasium vector env (MJX): two envs start with different models, keep them for an
    episode (2 steps) and get new ones at the autoreset."""
    vec = gym.make_vec("bcg_envs/G1Squat-v0", num_envs=2, randomize="episode", config=CFG)
    try:
        _, info = vec.reset(seed=0)
        first = info["model/body_mass"]
        assert first.shape == (2, C.NUM_JOINTS + 2) and not np.allclose(first[0], first[1])
        zeros = np.zeros((2, C.NUM_JOINTS), np.float32)
        masses, ended = [], []
        for _ in range(3):
            _, _, term, trunc, info = vec.step(zeros)
            masses.append(info["model/body_mass"])  # the model of the step's episode
            ended.append(term | trunc)
        assert np.all(ended[1]) and not np.any(ended[0])
        np.testing.assert_array_equal(masses[0], first)
        np.testing.assert_array_equal(masses[1], first)
        assert not np.any(np.isclose(masses[2], first).all(axis=1))  # both redrawn
    finally:
        vec.close()


@pytest.mark.long
def test_g1_step_gradient_on_an_episode_model_is_finite():
    """``jax.grad`` through one differentiable step of a per-episode G1 env (minutes of
    compile on a CPU)."""
    env = bcg_envs.make_jax("G1Squat-v0", randomize="episode", estimator="exact", config=CFG)
    state = jax.jit(env.reset)(jax.random.PRNGKey(3))
    grad = jax.jit(jax.grad(lambda a: env.step(state, a).reward))(jnp.zeros(env.action_size))
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)
