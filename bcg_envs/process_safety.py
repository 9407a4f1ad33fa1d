"""Envs in forked worker processes: a clear error instead of a hang.

Why. Both backends run JAX (MJX's physics, or the task's reward/observation functions that
the MuJoCo C backend compiles). JAX's client, created on first use, runs XLA's thread
pools; ``os.fork`` copies only the forking thread, so a child forked after the parent's
client exists inherits a client whose threads are gone (and locks they may hold, e.g. the
persistent compile cache's file lock), and its first compile waits forever. Building an env
and reading its spaces start no client (so Gymnasium's ``AsyncVectorEnv``, which builds one
env in its parent and then forks, runs with its defaults); a parent that has computed with
JAX before forking is the case left.

What. ``install()`` (called by ``import bcg_envs``) registers ``os.fork`` hooks that note,
in each child, whether JAX had started in its parent. Making an env (``gym.make``,
``gym.make_vec``, ``bcg_envs.make_jax``) in such a child raises ``ForkedAfterJaxError``,
which says what to pass, at once. A process that never forks runs no extra code, and a
child forked before JAX started (or started with ``spawn``/``forkserver``) is unaffected.
"""

from __future__ import annotations

import os

from bcg_envs.cpu_runtime import jax_backends_created

#: What to pass instead of the ``fork`` start method, quoted by ``ForkedAfterJaxError``.
FIX = (
    'gym.make_vec(..., vectorization_mode="async", vector_kwargs={"context": "spawn"}) '
    '(or "forkserver"; for your own workers multiprocessing.get_context("spawn"))'
)


class ForkedAfterJaxError(RuntimeError):
    """An env was made in a process forked after JAX started in its parent, where JAX hangs."""


_forked_after_jax = False  # this process: forked after JAX started in its parent
_jax_started_at_fork = False  # the forking process's note for the child it is making
_installed = False


def _before_fork() -> None:
    """In the forking process, just before the fork: note whether JAX's clients (and so
    XLA's threads) exist here, or this process is itself a broken child."""
    global _jax_started_at_fork
    _jax_started_at_fork = _forked_after_jax or jax_backends_created()


def _after_fork_in_child() -> None:
    global _forked_after_jax
    _forked_after_jax = _jax_started_at_fork


def forked_after_jax() -> bool:
    """Whether this process was forked (``os.fork``, multiprocessing's ``fork`` start
    method) after JAX had started in its parent, or descends from such a process."""
    return _forked_after_jax


def install() -> None:
    """Register the ``os.fork`` hooks (once; a no-op where ``os.register_at_fork`` is missing)."""
    global _installed
    if _installed or not hasattr(os, "register_at_fork"):
        return
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
    _installed = True


def check_process(what: str = "this env") -> None:
    """Raise ``ForkedAfterJaxError`` where ``forked_after_jax()``: JAX would hang here."""
    if forked_after_jax():
        raise ForkedAfterJaxError(
            f"cannot make {what} in a process forked after JAX started in its parent (JAX's threads do "
            "not survive a fork, so it would hang; Gymnasium's AsyncVectorEnv forks by default on "
            f"Linux): start the workers with 'spawn' or 'forkserver', e.g. {FIX}"
        )
