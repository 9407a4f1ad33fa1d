"""What a rollout gradient costs, counted in simulated control steps.

Learners and benchmarks compare estimators on an axis of simulation work: an env step whose
gradient needs ten bundle branches costs more than one that needs a single reverse sweep.
The unit is one control step of the physics (``n_substeps`` physics steps, forward or
reverse).
"""

from __future__ import annotations

from typing import Union

from bcg_envs.gradients.registry import Estimator, resolve


def simulations_per_step(
    estimator: Union[str, Estimator],
    nx: int,
    nu: int,
    num_samples: int,
    bundled_fraction: float,
    horizon: int = 1,
) -> float:
    """Control-step evaluations per env step of a rollout gradient in reverse mode (the way
    the learners differentiate rollouts).

    A forward pass, the backward pass's rematerialized step and its VJP (a reverse sweep)
    count one each; a forward-mode Jacobian counts its ``nx + nu`` tangent passes.

    * ``exact``: forward + recompute + VJP = 3;
    * ``bundle``: forward + a recompute and a VJP per branch = 1 + 2 B;
    * ``zeroth``: forward, the nominal and one evaluation per sample (the least-squares
      fit) = 2 + B;
    * ``alpha``: zeroth's plus each sample's first-order Jacobian = 2 + B (1 + nx + nu);
    * ``bcg``: exact's on the steps it does not bundle, the bundle's on the
      ``bundled_fraction`` it does; with ``horizon > 1`` (branch rollouts) the forward
      pass also steps the B branches: 1 + 3 B per bundled step.

    Each ``Estimator`` holds its own terms (``Estimator.bundle_simulations``).

    Args:
      estimator: one of ``exact``, ``bundle``, ``zeroth``, ``alpha``, ``bcg``, or its ``Estimator``.
      nx, nu: state (tangent) and action sizes.
      num_samples: branches / samples B per bundle (``env.stepper(estimator).num_samples``).
      bundled_fraction: fraction of env steps ``bcg`` bundled, in [0, 1].
      horizon: ``BundleConfig.horizon``, control steps of a ``bcg`` branch rollout.
    """
    if not 0.0 <= bundled_fraction <= 1.0:
        raise ValueError(f"bundled_fraction must be in [0, 1], got {bundled_fraction}")
    return resolve(estimator).simulations_per_step(nx, nu, num_samples, bundled_fraction, horizon)
