import dataclasses

import pytest

from bcg_envs import BundleConfig
from bcg_envs.gradients.config import samples_for


def test_defaults_match_the_paper():
    cfg = BundleConfig()
    assert cfg.num_samples is None  # per estimator: 10 branches for bundle/bcg (the paper's B)
    assert samples_for(cfg, "bcg", 12, 2) == 10 and samples_for(cfg, "bundle", 12, 2) == 10
    assert cfg.perturb_base is False
    assert cfg.state_sigma == (0.01, 0.02)
    assert cfg.action_sigma == 0.0
    assert cfg.space == "cartesian" and cfg.forward == "nominal"
    assert cfg.damping == 1e-4
    # AoBG's bound: 10 % of the zeroth-order Jacobian's Frobenius norm (Suh et al. 2022
    # use an absolute gamma, still reachable with alpha_bound="absolute").
    assert cfg.alpha_tolerance == 0.1 and cfg.alpha_bound == "relative"


def test_frozen_and_keyword_only():
    cfg = BundleConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.num_samples = 3
    with pytest.raises(TypeError):
        BundleConfig(10)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(num_samples=0), "num_samples"),
        (dict(num_samples=2.5), "num_samples"),
        (dict(num_samples=3, antithetic=True), "num_samples"),
        (dict(state_sigma=(0.01,)), "state_sigma"),
        (dict(state_sigma=(-1.0, 0.1)), "state_sigma"),
        (dict(state_sigma=(float("nan"), 0.1)), "state_sigma"),
        (dict(action_sigma=-0.1), "action_sigma"),
        (dict(force_threshold=-1.0), "force_threshold"),
        (dict(horizon=0), "horizon"),
        (dict(space="polar"), "space"),
        (dict(forward="median"), "forward"),
        (dict(antithetic="yes"), "antithetic"),
        (dict(damping=0.0), "damping"),
        (dict(seed=1.5), "seed"),
        (dict(seed=-1), "seed"),
        (dict(perturb_base=1), "perturb_base"),
        (dict(allow_underdetermined="no"), "allow_underdetermined"),
        (dict(alpha_tolerance=0.0), "alpha_tolerance"),
        (dict(alpha_tolerance=float("inf")), "alpha_tolerance"),
        (dict(alpha_bound="scaled"), "alpha_bound"),
    ],
)
def test_invalid_values_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"BundleConfig.{field}"):
        BundleConfig(**kwargs)


def test_with_defaults_fills_only_a_missing_threshold():
    assert BundleConfig().with_defaults(400.0).force_threshold == 400.0
    assert BundleConfig(force_threshold=5.0).with_defaults(400.0).force_threshold == 5.0


def test_zeroth_order_sample_counts_are_well_posed():
    """zeroth/alpha fit nx + nu unknowns per row: the default is twice that, an explicit
    count below it raises unless the minimum-norm fit is asked for. alpha also needs
    residual degrees of freedom (its robustness check estimates the fit's variance from
    them): nx + nu samples raise for it, and allow_underdetermined accepts alpha = 0."""
    nx, nu = 10, 2  # BoxPush
    assert samples_for(BundleConfig(), "zeroth", nx, nu) == 24
    assert samples_for(BundleConfig(), "alpha", nx, nu) == 24
    assert samples_for(BundleConfig(num_samples=12), "zeroth", nx, nu) == 12
    with pytest.raises(ValueError, match="BundleConfig.num_samples must be >= nx \\+ nu = 12"):
        samples_for(BundleConfig(num_samples=10), "zeroth", nx, nu)
    with pytest.raises(ValueError, match="BundleConfig.num_samples must be > nx \\+ nu = 12 for estimator 'alpha'"):
        samples_for(BundleConfig(num_samples=12), "alpha", nx, nu)
    assert samples_for(BundleConfig(num_samples=13), "alpha", nx, nu) == 13
    assert samples_for(BundleConfig(num_samples=10, allow_underdetermined=True), "alpha", nx, nu) == 10
    assert samples_for(BundleConfig(num_samples=3), "bcg", nx, nu) == 3  # first order: any count
    assert samples_for(BundleConfig(antithetic=True), "zeroth", 11, 2) == 26  # even for +/- pairs


@pytest.mark.parametrize("estimator", ["zeroth", "alpha"])
def test_zeroth_order_fits_refuse_an_unperturbed_input(estimator):
    """A zero state sigma would leave its Jacobian columns at zero, silently (MuJoCo C)."""
    import gymnasium as gym
    import numpy as np

    import bcg_envs  # noqa: F401

    env = gym.make("bcg_envs/BoxPush-v0", backend="mujoco")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="BundleConfig.state_sigma must be > 0 in both entries"):
        env.unwrapped.grad_step(
            np.zeros(2, np.float32), estimator=estimator, bundle=BundleConfig(state_sigma=(0.01, 0.0))
        )
    env.close()
