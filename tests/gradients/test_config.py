import dataclasses

import pytest

from bcg_envs import BundleConfig


def test_defaults_match_the_paper():
    cfg = BundleConfig()
    assert cfg.num_samples == 10
    assert cfg.state_sigma == (0.01, 0.02)
    assert cfg.action_sigma == 0.0
    assert cfg.space == "cartesian" and cfg.forward == "nominal"
    assert cfg.damping == 1e-4


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
    ],
)
def test_invalid_values_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"BundleConfig.{field}"):
        BundleConfig(**kwargs)


def test_with_defaults_fills_only_a_missing_threshold():
    assert BundleConfig().with_defaults(400.0).force_threshold == 400.0
    assert BundleConfig(force_threshold=5.0).with_defaults(400.0).force_threshold == 5.0
