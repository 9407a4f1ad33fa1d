"""Test set-up: a persistent JAX compile cache inside the checkout (set before JAX starts)
and shared fixtures. The integration tier is the ``integration`` marker (pyproject.toml
deselects it unless ``-m integration`` is given)."""

import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_ROOT / ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")


import pytest  # noqa: E402


class _NoSpaceWarnings:
    """Context manager: fail if Gymnasium/SB3 warned about the spaces (or infinite bounds)."""

    def __enter__(self):
        import warnings

        self._ctx = warnings.catch_warnings(record=True)
        self.records = self._ctx.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        bad = [
            str(w.message) for w in self.records if "space" in str(w.message).lower() or "infinity" in str(w.message)
        ]
        assert not bad, bad


@pytest.fixture
def no_space_warnings():
    """``with no_space_warnings(): check_env(env)`` (shared by the env_checker tests)."""
    return _NoSpaceWarnings


@pytest.fixture(scope="session")
def make_toy_env(tmp_path_factory):
    """``make_toy_env(xml, ctrl_dt=..., initial_state=..., force_threshold=..., **env_kwargs)``:
    an ``MjxEnv`` of a test model with trivial task hooks. The observation is (qpos, qvel),
    the reward ``qpos[0]``, actions are the controls, and it never terminates or succeeds.
    ``initial_state(key) -> (qpos, qvel)``."""
    from bcg_envs.envs.base import MjxEnv

    def make(xml: str, *, ctrl_dt: float, initial_state, force_threshold: float, **env_kwargs):
        path = tmp_path_factory.mktemp("toy") / "model.xml"
        path.write_text(xml)

        class Toy(MjxEnv):
            xml_path = path
            default_force_threshold = force_threshold

            @staticmethod
            def default_config():
                return {"ctrl_dt": ctrl_dt, "episode_length": 50, "reward_weights": {"position": 1.0}}

            def initial_state(self, key):
                return (*initial_state(key), {})

            def observe(self, data, info):
                import jax.numpy as jnp

                return jnp.concatenate([data.qpos, data.qvel])

            def reward_terms(self, prev, action, data, info):
                return {"position": data.qpos[0]}

            def terminated(self, data, info):
                import jax.numpy as jnp

                return jnp.zeros((), bool)

            def success(self, data, info):
                import jax.numpy as jnp

                return jnp.zeros((), bool)

            def action_to_ctrl(self, action):
                return action

        return Toy(**env_kwargs)

    return make


#: Memory maps (of ``vm.max_map_count``, 65,530 by default) past which a test worker drops
#: JAX's compiled programs between modules. Each compiled gradient program holds thousands
#: of maps, and a worker that runs many modules would otherwise approach the limit, where
#: LLVM's allocations fail (docs/performance.md, "Memory maps").
MAX_MAPS_KEPT = 30_000


@pytest.fixture(autouse=True, scope="module")
def release_compiled_programs_between_modules():
    """After each test module, drop JAX's compiled programs if this process holds more than
    ``MAX_MAPS_KEPT`` memory maps (later modules compile or load theirs again)."""
    yield
    import sys

    if "jax" in sys.modules:
        from bcg_envs.compile_cache import memory_maps, release_compiled_programs

        if (memory_maps() or 0) > MAX_MAPS_KEPT:
            release_compiled_programs()
