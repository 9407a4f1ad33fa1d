"""A persistent XLA compile cache on by default.

The first step of a G1 env compiles for tens of seconds on a CPU. JAX can keep compiled
programs on disk, so that a later process loads them instead; it is off unless
configured. ``import bcg_envs`` turns it on at ``$XDG_CACHE_HOME/bcg_envs/jax``
(``~/.cache/bcg_envs/jax``) unless JAX already has a cache directory
(``JAX_COMPILATION_CACHE_DIR`` or ``jax.config``) or ``BCG_ENVS_COMPILE_CACHE=0`` is set.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

#: Environment variable that turns the default cache off when set to ``0``.
OPT_OUT = "BCG_ENVS_COMPILE_CACHE"

#: The cache's size cap, bytes; JAX evicts the least recently used programs beyond it.
MAX_SIZE = 4 << 30


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/bcg_envs/jax``, ``~/.cache/bcg_envs/jax`` without XDG_CACHE_HOME."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "bcg_envs" / "jax"


def enable_default_compile_cache() -> Optional[Path]:
    """Point JAX's persistent compile cache at ``default_cache_dir()`` unless JAX has one
    or the user opted out; returns the directory set, or None where nothing was set
    (also where the directory cannot be created)."""
    import jax

    if os.environ.get(OPT_OUT, "1") == "0" or jax.config.jax_compilation_cache_dir:
        return None
    path = default_cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_compilation_cache_max_size", MAX_SIZE)
    return path


def memory_maps() -> Optional[int]:
    """How many memory maps this process holds (Linux; None elsewhere). XLA's CPU code
    lives in memory maps, thousands per compiled gradient program, and LLVM fails with
    "Cannot allocate memory" at Linux's ``vm.max_map_count`` (65,530 by default)."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return None


def release_compiled_programs() -> None:
    """Drop JAX's compiled programs that nothing references any more (and their memory
    maps); later calls compile or load them again."""
    import gc

    import jax

    gc.collect()
    jax.clear_caches()
    gc.collect()
