"""baselines/gradient_variance_gradients.py: one compiled program per estimator serves every stiffness level."""

import dataclasses

import numpy as np
import pytest

from baselines.gradient_variance_contact import CONTACT_MODELS
from baselines.gradient_variance_gradients import ModelRunner
from baselines.gradient_variance_starts import scripted_starts


@pytest.mark.integration
@pytest.mark.parametrize(
    "contact_model, levels",
    [
        ("penalty", (50.0, 500.0)),
        pytest.param("mujoco", (0.05, 0.004), marks=pytest.mark.long),
        pytest.param("moreau", (50.0, 1000.0), marks=pytest.mark.long),
    ],
)
def test_one_program_for_every_level_matches_an_env_built_at_that_level(contact_model, levels):
    """The sweep's program takes the stiffness as an argument: built at the softer level
    and run at the stiffer one, its rollout gradients equal those of an env built at the
    stiffer level (4 steps from 2 scripted BoxPush starts just before the strike), and
    differ from the softer level's (the level is not ignored)."""
    import jax
    import jax.numpy as jnp

    import bcg_envs

    model = dataclasses.replace(CONTACT_MODELS[contact_model], levels=levels)
    starts = scripted_starts("BoxPush-v0", 2, 4, threshold=1.0, lead=2)
    runner = ModelRunner("BoxPush-v0", model, starts, (4,))
    soft, stiff = (runner.block("exact", level).grads[:, 0] for level in levels)

    built = bcg_envs.make_jax("BoxPush-v0", estimator="exact", **model.env_kwargs(levels[1]))

    def rollout_return(qpos, qvel, info, actions):
        def body(s, a):
            s = built.step(s, a)
            return s, s.reward

        state = built.state_from(qpos, qvel, None, info, jax.random.PRNGKey(0))
        return jax.lax.scan(body, state, actions)[1].sum()

    grad = jax.jit(jax.vmap(jax.grad(rollout_return, argnums=3)))
    info = {k: jnp.asarray(v) for k, v in starts.task_info.items()}
    expected = np.asarray(
        grad(
            jnp.asarray(starts.qpos, jnp.float32),
            jnp.asarray(starts.qvel, jnp.float32),
            info,
            jnp.asarray(starts.actions, jnp.float32),
        )
    )
    scale = np.abs(expected).max()
    np.testing.assert_allclose(stiff, expected, rtol=1e-4, atol=1e-5 * scale)
    assert np.abs(stiff - soft).max() > 1e-3 * scale
