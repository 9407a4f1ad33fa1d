"""Test set-up: persistent JAX compile cache and the single-CPU client workaround.

Both must happen before JAX creates its CPU client, so they live here, imported first.
"""

import os
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_ROOT / ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from bcg_envs.utils import single_cpu_client  # noqa: E402

single_cpu_client()


import pytest  # noqa: E402


#: The longest test files (compile-bound), longest first (per-file totals of a fresh-clone
#: `scripts/test.sh` run: 465, 319, 309, 260, 242, 238, 225, 208, 199, 163, 152 s), so that
#: `pytest -n 2 --dist loadfile` starts them early on separate workers, not last. The 208 s
#: was tests/test_mujoco_backend.py, since split into tests/mujoco_backend/: its heaviest
#: part (test_simulation.py: MJX steps of all three tasks, G1 included) keeps the slot;
#: test_envs.py and test_jacobians.py close the list (warm-cache totals of the three:
#: > 35, > 21, > 10 s; fresh-clone totals not measured since the split).
HEAVY_FIRST = (
    "tests/gradients/test_differentiable_step.py",
    "tests/envs/planar_hand/test_hand.py",
    "tests/gradients/test_branch_rollouts.py",
    "tests/baselines/test_compare.py",
    "tests/learners/shac/test_train.py",
    "tests/physics/test_penalty_contact.py",
    "tests/baselines/test_gradient_variance.py",
    "tests/mujoco_backend/test_simulation.py",
    "tests/envs/g1/test_tracking.py",
    "tests/envs/box_push/test_push.py",
    "tests/test_jax_api.py",
    "tests/mujoco_backend/test_envs.py",
    "tests/mujoco_backend/test_jacobians.py",
)


def _rank(item) -> int:
    path = Path(str(item.fspath)).resolve().relative_to(_ROOT).as_posix()
    return HEAVY_FIRST.index(path) if path in HEAVY_FIRST else len(HEAVY_FIRST)


def pytest_collection_modifyitems(config, items):
    """Heavy files first (stable sort); tests marked ``slow`` run only with BCG_SLOW=1."""
    items.sort(key=_rank)
    if os.environ.get("BCG_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow check; run with BCG_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


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
        bad = [str(w.message) for w in self.records if "space" in str(w.message).lower() or "infinity" in str(w.message)]
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
