"""bcg_envs/mjx_backend.py: what the MJX simulations hand to the Gymnasium envs (their
stepping is exercised through ``GymEnv``/``GymVectorEnv`` in ``tests/test_gym.py`` and the
cross-backend checks in ``tests/mujoco_backend``)."""

from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np

from bcg_envs.envs.base import OBS_BOUND
from bcg_envs.mjx_backend import clipped_observation, numpy_info, scalar_info


def test_info_hides_the_rng_and_keeps_metric_dtypes():
    state = SimpleNamespace(
        info={"rng": jnp.zeros(2, jnp.uint32), "step": jnp.int32(3), "is_success": jnp.bool_(True)},
        metrics={"is_success": jnp.float32(1.0), "distance": jnp.float32(0.25)},
    )
    info = numpy_info(state)
    assert "rng" not in info
    assert info["is_success"].dtype == bool  # the info entry wins over the float metric
    assert info["distance"] == np.float32(0.25)
    one = scalar_info(info)
    assert one["step"] == 3 and isinstance(one["step"], int) and one["is_success"] is True


def test_observations_are_float32_inside_the_bound():
    obs = clipped_observation(np.array([1e9, -1e9, 0.5], np.float64))
    assert obs.dtype == np.float32
    np.testing.assert_array_equal(obs, np.array([OBS_BOUND, -OBS_BOUND, 0.5], np.float32))
