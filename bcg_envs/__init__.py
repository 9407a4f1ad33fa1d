"""bcg_envs: differentiable MuJoCo environments with Bundled Contact Gradients.

``import bcg_envs`` registers every environment with Gymnasium under ``bcg_envs/``.
"""

import os

# Headless rendering: MuJoCo reads MUJOCO_GL when it is first imported.
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])

import contextlib  # noqa: E402
import io  # noqa: E402

from bcg_envs import cpu_runtime, process_safety  # noqa: E402

# Before anything can create JAX's CPU client: one intra-op thread (no batched-solve deadlock).
cpu_runtime.install()
# A worker forked after JAX started raises ForkedAfterJaxError (what to pass) instead of hanging.
process_safety.install()

# MJX prints "Failed to import warp" on import where the optional GPU backend (warp) is
# absent, as on every CPU install; keep that line out of users' output.
with contextlib.redirect_stdout(io.StringIO()):
    from mujoco import mjx  # noqa: E402, F401

from bcg_envs.compile_cache import enable_default_compile_cache  # noqa: E402
from bcg_envs.gradients.config import BundleConfig  # noqa: E402
from bcg_envs.gradients.registry import ESTIMATORS  # noqa: E402
from bcg_envs.registry import list_envs, make_jax, register_all  # noqa: E402

__version__ = "0.1.0"
__all__ = ["BundleConfig", "ESTIMATORS", "list_envs", "make_jax", "__version__"]

enable_default_compile_cache()
register_all()
