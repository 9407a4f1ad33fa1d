"""Compatibility shims for third-party trainers on the pinned JAX."""

from __future__ import annotations

from typing import List

#: Names re-exposed on the ``jax`` module by ``enable_brax`` (empty until it has run).
_BRAX_SHIMMED: List[str] = []
_brax_done = False


def enable_brax() -> List[str]:
    """Let Brax 0.14.2's trainers run on jax 0.10; returns the names it re-exposed.

    Brax 0.14.2 (the newest release) still calls ``jax.device_put_replicated`` and
    ``jax.device_put_sharded``, which jax 0.10 turned into errors although their
    implementations remain in ``jax._src.api``. This re-exposes only those that are
    missing; it changes nothing else. ``bcg_envs.make_jax`` calls it, so users need not;
    calling it again is a no-op.
    """
    global _brax_done
    if _brax_done:
        return list(_BRAX_SHIMMED)
    import jax
    from jax._src import api

    for name in ("device_put_replicated", "device_put_sharded"):
        if name not in vars(jax) and hasattr(api, name):
            setattr(jax, name, getattr(api, name))
            _BRAX_SHIMMED.append(name)
    _brax_done = True
    return list(_BRAX_SHIMMED)
