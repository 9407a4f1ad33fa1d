"""What a rollout gradient costs, counted in simulated control steps.

Learners and benchmarks compare estimators on an axis of simulation work: an env step whose
gradient needs ten bundle branches costs more than one that needs a single reverse sweep.
The unit is one control step of the physics (``n_substeps`` physics steps, forward or
reverse).
"""

from __future__ import annotations


def simulations_per_step(estimator: str, nx: int, nu: int, num_samples: int, bundled_fraction: float) -> float:
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
      ``bundled_fraction`` it does.

    Args:
      estimator: one of ``exact``, ``bundle``, ``zeroth``, ``alpha``, ``bcg``.
      nx, nu: state (tangent) and action sizes.
      num_samples: branches / samples B per bundle (``env.stepper(estimator).num_samples``).
      bundled_fraction: fraction of env steps ``bcg`` bundled, in [0, 1].
    """
    if not 0.0 <= bundled_fraction <= 1.0:
        raise ValueError(f"bundled_fraction must be in [0, 1], got {bundled_fraction}")
    exact, bundle = 3.0, 1.0 + 2.0 * num_samples
    if estimator == "exact":
        return exact
    if estimator == "bundle":
        return bundle
    if estimator == "zeroth":
        return 2.0 + num_samples
    if estimator == "alpha":
        return 2.0 + num_samples * (1 + nx + nu)
    if estimator == "bcg":
        return exact * (1 - bundled_fraction) + bundle * bundled_fraction
    raise ValueError(f"estimator must be one of exact, bundle, zeroth, alpha, bcg; got {estimator!r}")
