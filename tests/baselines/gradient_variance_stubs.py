"""Shared helpers of the gradient-variance tests: a stub gradient source, stub starts, the shipped policies.

The test files import them (``from tests.baselines.gradient_variance_stubs import ...``).
"""

import dataclasses

import numpy as np

from baselines.gradient_variance_contact import CONTACT_MODELS
from baselines.gradient_variance_gradients import Block
from baselines.gradient_variance_starts import Starts
from baselines.gradient_variance_sweep import sweep


class StubRunner:
    """Synthetic gradients in place of physics: exact's spread grows with the horizon,
    bcg's is half of it, ``bundle`` explodes."""

    calls = []

    def __init__(self, env_id, model, starts, horizons):
        self.starts, self.horizons = starts, horizons
        StubRunner.calls.append(("runner", model.name))

    def _grads(self, scale, seed):
        n, t, nu = self.starts.actions.shape
        rng = np.random.default_rng(seed)
        steps = np.arange(t)[None, :, None]
        return scale * (1.0 + steps) * rng.standard_normal((n, len(self.horizons), t, nu))

    def reference(self, level, samples, sigma):
        StubRunner.calls.append(("reference", level))
        return np.zeros_like(self._grads(1.0, 0)) + 1.0

    def block(self, estimator, level):
        StubRunner.calls.append((estimator, level))
        scale = {"exact": 1.0, "bcg": 0.5, "bundle": 1e9}[estimator]
        n, t, _ = self.starts.actions.shape
        bundled = np.zeros((n, t), bool) if estimator == "exact" else np.ones((n, t), bool)
        return Block(self._grads(scale, 1), bundled, 1e-3, 2.0, 10, 10, 2, 2)


def stub_starts(n=8, t=4):
    return Starts(
        np.zeros((n, 5)), np.zeros((n, 5)), {"goal": np.zeros((n, 2))}, np.zeros((n, t, 2), np.float32), "stub"
    )


def moreau(options=(), physics_dt=None, levels=(300.0,)):
    return dataclasses.replace(
        CONTACT_MODELS["moreau"], levels=levels, options=tuple(sorted(options)), physics_dt=physics_dt
    )


def run_stub_sweep(models, tmp_path, estimators=("exact", "bcg")):
    StubRunner.calls = []
    return sweep(
        "BoxPush-v0",
        models,
        list(estimators),
        stub_starts(),
        (1, 4),
        tmp_path,
        reference_samples=2,
        resamples=20,
        runner=StubRunner,
    )


def shipped_policy(env_id="BoxPush-v0"):
    from bcg_envs.envs.resources import trained_policy_path

    return trained_policy_path(env_id)
