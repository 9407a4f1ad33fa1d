"""bcg_envs.gradients.cost: simulated control steps per env step of a rollout gradient."""

import pytest

from bcg_envs.gradients.cost import simulations_per_step


def test_simulation_counts_follow_the_estimators_cost_model():
    nx, nu, n = 10, 2, 10
    assert simulations_per_step("exact", nx, nu, n, 0.0) == 3  # forward, recompute, VJP
    assert simulations_per_step("bundle", nx, nu, n, 1.0) == 21  # forward + 10 x (recompute, VJP)
    assert simulations_per_step("zeroth", nx, nu, 24, 1.0) == 26
    assert simulations_per_step("alpha", nx, nu, 24, 1.0) == 2 + 24 * 13
    # bcg costs exact off contact and the bundle on every bundled step.
    assert simulations_per_step("bcg", nx, nu, n, 0.0) == 3
    assert simulations_per_step("bcg", nx, nu, n, 1.0) == 21
    assert simulations_per_step("bcg", nx, nu, n, 0.5) == 12
    # With branch rollouts (H > 1) the forward pass also steps the branches: 1 + 3 B.
    assert simulations_per_step("bcg", nx, nu, n, 1.0, horizon=2) == 31
    assert simulations_per_step("bcg", nx, nu, n, 0.5, horizon=2) == 17
    assert simulations_per_step("bundle", nx, nu, n, 1.0, horizon=2) == 21  # one-step bundles only


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="bundled_fraction"):
        simulations_per_step("bcg", 10, 2, 10, 1.5)
    with pytest.raises(ValueError, match="estimator"):
        simulations_per_step("adjoint", 10, 2, 10, 0.0)
