"""Per-episode model randomization (``randomize="episode"``) on a one-slider toy model:
the Playground-shaped draw, the fields' life in ``state.info``, and the step, autoreset
and gradients on each batch element's own model."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from mujoco import mjx

from bcg_envs.mjx_backend import autoreset
from bcg_envs.physics import model_fields

#: A 1 kg block on a frictionless slider pushed by a 1 N/unit motor, no contact: one
#: control step (0.01 s) from rest under action a gives qvel = 0.01 a / m.
SLIDER_XML = """
<mujoco>
  <option timestep="0.002" gravity="0 0 0"/>
  <worldbody>
    <body name="block">
      <joint name="x" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor joint="x" gear="1"/></actuator>
</mujoco>
"""

CTRL_DT = 0.01
MASS_RANGE = (0.5, 2.0)


def scale_block_mass(model: mjx.Model, rng: jax.Array):
    """A randomization function in MuJoCo Playground's shape: the block's mass x U(0.5, 2)."""

    def draw(key):
        scale = jax.random.uniform(key, (), minval=MASS_RANGE[0], maxval=MASS_RANGE[1])
        return {"body_mass": model.body_mass.at[1].multiply(scale)}

    in_axes = jax.tree.map(lambda _: None, model).tree_replace({"body_mass": 0})
    return model.tree_replace(jax.vmap(draw)(rng)), in_axes


@pytest.fixture(scope="module")
def slider_model():
    return mjx.put_model(mujoco.MjModel.from_xml_string(SLIDER_XML))


@pytest.fixture(scope="module")
def env(make_toy_env):
    return make_toy_env(
        SLIDER_XML,
        ctrl_dt=CTRL_DT,
        initial_state=lambda key: (jnp.zeros(1), jnp.zeros(1)),
        force_threshold=1e6,
        config={"episode_length": 3},
        estimator="exact",
        randomize="episode",
        randomization_fn=scale_block_mass,
    )


def test_draw_keeps_the_batched_fields_of_one_key(slider_model):
    fields = model_fields.draw_fields(scale_block_mass, slider_model, jax.random.PRNGKey(0))
    assert list(fields) == ["body_mass"] and fields["body_mass"].shape == (2,)
    assert fields["body_mass"][0] == 0.0 and MASS_RANGE[0] <= float(fields["body_mass"][1]) <= MASS_RANGE[1]
    info = model_fields.as_info(fields)
    assert list(info) == ["model/body_mass"]
    assert model_fields.from_info({**info, "step": 0}).keys() == {"body_mass"}
    assert model_fields.from_info({"step": 0}) is None


def test_bad_in_axes_are_reported(slider_model):
    none = jax.tree.map(lambda _: None, slider_model)
    with pytest.raises(ValueError, match="marks no field"):
        model_fields.batched_fields(slider_model, none)
    with pytest.raises(ValueError, match="0 or None"):
        model_fields.batched_fields(slider_model, none.tree_replace({"body_mass": 1}))

    def unbatched(model, rng):  # forgot the batch axis
        return model, none.tree_replace({"body_mass": 0})

    with pytest.raises(ValueError, match="expected"):
        model_fields.draw_fields(unbatched, slider_model, jax.random.PRNGKey(0))


def test_mass_constants_match_mujoco_set_const():
    """A floating base with a hinged and a ball-jointed link (free, ball and hinge dofs)."""
    xml = """
    <mujoco><worldbody>
      <body name="base"><freejoint/><geom type="box" size="0.2 0.1 0.05" mass="3"/>
        <body name="arm" pos="0.2 0 0"><joint type="hinge" axis="0 1 0" armature="0.01"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.7"/>
          <body name="hand" pos="0.3 0 0"><joint type="ball"/>
            <geom type="sphere" size="0.05" pos="0.05 0 0" mass="0.2"/></body></body></body>
    </worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    m.body_mass[1:] *= [1.3, 0.8, 1.7]
    m.body_inertia[1:] *= np.array([1.3, 0.8, 1.7])[:, None]
    out = jax.jit(model_fields.mass_constants)(mjx.put_model(m))
    mujoco.mj_setConst(m, mujoco.MjData(m))
    for name, value in out.items():
        np.testing.assert_allclose(np.asarray(value), getattr(m, name), rtol=1e-5, atol=1e-7, err_msg=name)


def test_randomize_options_are_checked_by_name(env, make_toy_env):
    def toy(**kwargs):
        return make_toy_env(
            SLIDER_XML,
            ctrl_dt=CTRL_DT,
            initial_state=lambda key: (jnp.zeros(1), jnp.zeros(1)),
            force_threshold=1e6,
            **kwargs,
        )

    with pytest.raises(ValueError, match="randomize must be one of"):
        toy(randomize="instance")
    with pytest.raises(ValueError, match="pass randomize='episode'"):
        toy(randomization_fn=scale_block_mass)
    with pytest.raises(ValueError, match="randomization_fn must be callable"):
        toy(randomize="episode", randomization_fn="mass")
    with pytest.raises(ValueError, match="has no randomization of its own"):
        toy(randomize="episode")
    assert env.randomize == "episode" and toy().randomization_fn is None


def test_each_episode_steps_and_differentiates_its_own_model(env):
    """A batch of 4 rolled 7 steps with autoreset (episodes of 3 steps): every element
    keeps its mass for an episode and redraws it at the autoreset; the step's velocity and
    the gradient of the rollout return through each step are those of the element's mass."""
    n, steps, a = 4, 7, 0.5

    def rollout(actions, keys):
        states = jax.vmap(env.reset)(keys)

        def body(s, action):
            new = jax.vmap(env.step)(s, action)
            return autoreset(env, new), (new.data.qvel[:, 0], new.info["model/body_mass"][:, 1], new.info["truncated"])

        _, (qvel, mass, ended) = jax.lax.scan(body, states, actions)
        return jnp.sum(qvel), (qvel, mass, ended)

    actions = jnp.full((steps, n, 1), a)
    grads, (qvel, mass, ended) = jax.jit(jax.grad(rollout, has_aux=True))(
        actions, jax.random.split(jax.random.PRNGKey(1), n)
    )
    qvel, mass, ended, grads = map(np.asarray, (qvel, mass, ended, grads[..., 0]))
    assert ended[:, 0].tolist() == [False, False, True, False, False, True, False]
    assert np.all((mass >= MASS_RANGE[0]) & (mass <= MASS_RANGE[1]))
    episodes = [mass[0:3], mass[3:6], mass[6:7]]
    for ep in episodes:
        assert np.all(ep == ep[0])  # one model per episode
    assert np.all(episodes[0][0] != episodes[1][0]) and np.all(episodes[1][0] != episodes[2][0])  # redrawn
    assert len(set(episodes[0][0].tolist())) == n  # each element its own
    # qvel after k steps of the episode: k * dt * a / m; each step adds dt / m to it (exact).
    k = np.array([1, 2, 3, 1, 2, 3, 1])[:, None]
    np.testing.assert_allclose(qvel, k * CTRL_DT * a / mass, rtol=1e-5)
    # d(sum of the episode's velocities)/d(action at step j) = (steps left in it) * dt / m.
    left = np.array([3, 2, 1, 3, 2, 1, 1])[:, None]
    np.testing.assert_allclose(grads, left * CTRL_DT / mass, rtol=1e-4)


def test_reset_draws_and_state_from_keeps_the_episode_model(env):
    reset = jax.jit(env.reset)
    s0, s1 = reset(jax.random.PRNGKey(0)), reset(jax.random.PRNGKey(1))
    m0, m1 = (float(s.info["model/body_mass"][1]) for s in (s0, s1))
    assert m0 != m1
    assert float(reset(jax.random.PRNGKey(0)).info["model/body_mass"][1]) == m0  # deterministic in the key
    assert env.physics_of(s0.info).model.body_mass[1] == m0
    assert env.physics_of({}).model.body_mass[1] == 1.0  # the env's own model is untouched
    state = jax.jit(env.state_from)(  # eager: a compile per op
        jnp.zeros(1), jnp.zeros(1), None, {k: v for k, v in s1.info.items() if k != "rng"}, s1.info["rng"]
    )
    assert float(state.info["model/body_mass"][1]) == m1
    nxt = jax.jit(env.plain_step)(state, jnp.ones(1))
    assert float(nxt.data.qvel[0]) == pytest.approx(CTRL_DT / m1, rel=1e-5)

    def velocity_gradient(time_constant, action):  # a traced stiffness and the episode's fields
        return jax.grad(lambda a: env.with_contact_stiffness(time_constant).step(state, a).data.qvel[0])(action)

    grad = jax.jit(velocity_gradient)(0.02, jnp.full(1, 0.3))
    assert float(grad[0]) == pytest.approx(CTRL_DT / m1, rel=1e-5)
