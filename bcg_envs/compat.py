"""Compatibility shims for third-party trainers on the pinned JAX."""

from __future__ import annotations


def enable_brax() -> None:
    """Let Brax 0.14.2's trainers run on jax 0.10.

    Brax 0.14.2 (the newest release) still calls ``jax.device_put_replicated`` and
    ``jax.device_put_sharded``, which jax 0.10 turned into errors although their
    implementations remain in ``jax._src.api``. This re-exposes them; it changes nothing
    else and is a no-op where they are still public.
    """
    import jax
    from jax._src import api

    for name in ("device_put_replicated", "device_put_sharded"):
        if name not in vars(jax) and hasattr(api, name):
            setattr(jax, name, getattr(api, name))
