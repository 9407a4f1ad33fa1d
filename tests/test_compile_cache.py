"""``import bcg_envs`` turns on JAX's persistent compile cache unless told otherwise."""

import os
import subprocess
import sys

import pytest


def _config_after_import(tmp_path, option="jax_compilation_cache_dir", **env_vars):
    """``jax.config.<option>`` in a fresh process after ``import bcg_envs``, with no JAX
    cache configured and ``XDG_CACHE_HOME`` under ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "BCG_ENVS_COMPILE_CACHE")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), **env_vars)
    code = f"import jax, bcg_envs; print(jax.config.{option})"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "env_vars, expected",
    [
        ({}, "{xdg}/bcg_envs/jax"),
        ({"BCG_ENVS_COMPILE_CACHE": "0"}, "None"),
        ({"JAX_COMPILATION_CACHE_DIR": "{tmp}/mine"}, "{tmp}/mine"),
    ],
    ids=["default", "opted-out", "user's-own"],
)
def test_import_sets_the_cache_only_where_none_is_configured(tmp_path, env_vars, expected):
    fill = {"xdg": str(tmp_path / "xdg"), "tmp": str(tmp_path)}
    env_vars = {k: v.format(**fill) for k, v in env_vars.items()}
    assert _config_after_import(tmp_path, **env_vars) == expected.format(**fill)
    assert (tmp_path / "xdg" / "bcg_envs" / "jax").is_dir() == (expected == "{xdg}/bcg_envs/jax")


def test_max_size_is_set_with_the_default_cache(tmp_path):
    from bcg_envs.compile_cache import MAX_SIZE

    assert int(_config_after_import(tmp_path, "jax_compilation_cache_max_size")) == MAX_SIZE


def test_release_compiled_programs_drops_jit_caches_and_maps_are_counted():
    import jax
    import jax.numpy as jnp

    from bcg_envs.compile_cache import memory_maps, release_compiled_programs

    held = memory_maps()
    assert held is None or held > 0
    f = jax.jit(lambda x: x * 2.0)
    f(jnp.ones(3))
    assert f._cache_size() == 1
    release_compiled_programs()
    assert f._cache_size() == 0
