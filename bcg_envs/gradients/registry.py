"""The gradient estimators as objects: one per name, resolved once at the public API.

Users name an estimator (``estimator="bcg"``); ``resolve`` turns the name into its
``Estimator`` (or raises the named ``ValueError``), and the code below the public entry
points passes that object and asks it what it is, never comparing names again:

* ``samples``: whether it draws perturbed branches (all but ``exact``);
* ``least_squares``: whether it fits ``[A B]`` to forward samples (``zeroth``, ``alpha``),
  which sets its perturbation widths and default branch count;
* ``triggered``: whether it bundles only where the contact trigger fires (``bcg``), with
  the exact derivative elsewhere; ``contact_local``: whether its branches perturb the
  contacting chain rather than every coordinate (``bcg``);
* ``rolls_branches(horizon)``: whether a bundle is rolled ``horizon`` steps;
* ``bundled(ops)``: its derivative on a bundled step, built from a backend's
  ``StepDerivatives`` (MJX autodiff in ``gradients.differentiable_step``, MuJoCo C finite
  differences in ``mujoco_backend.jacobians``);
* ``default_samples``/``check_samples``/``simulations_per_step``: its branch count and its
  cost in simulated control steps (``gradients.cost``).

This module is the one place that maps names to behaviour.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Protocol, Tuple, TypeVar, Union

#: The estimator names, in the order the docs and tables list them.
ESTIMATORS: Tuple[str, ...] = ("exact", "bundle", "zeroth", "bcg", "alpha")
#: Branches of a first-order bundle when ``num_samples`` is None (the BCG paper's B).
FIRST_ORDER_SAMPLES = 10
#: Control-step evaluations of an exact rollout-gradient step: forward, recompute, VJP.
EXACT_SIMULATIONS = 3.0

T = TypeVar("T")


class StepDerivatives(Protocol[T]):
    """One backend's derivatives of one control step, each built on request: what an
    ``Estimator`` chooses from (``Estimator.bundled``)."""

    def exact(self) -> T:
        """The exact derivative (autodiff, or central differences at the nominal input)."""

    def first_order(self) -> T:
        """Mean over the branches of the exact derivative at each perturbed input."""

    def zeroth_order(self) -> T:
        """Least-squares fit of ``[A B]`` to the branches' forward differences."""

    def alpha_order(self) -> T:
        """AoBG's mix of the first-order mean and the least-squares fit."""


@dataclasses.dataclass(frozen=True)
class Estimator:
    """A gradient estimator (see the module docstring); subclasses set ``bundled`` and
    the cost of a bundled step."""

    name: str
    samples: bool = True
    least_squares: bool = False
    triggered: bool = False
    contact_local: bool = False

    def __str__(self) -> str:
        return self.name

    @property
    def has_exact_steps(self) -> bool:
        """Whether some steps' derivative is the exact one (``exact``; ``bcg`` off its
        triggers), so that the forward pass may keep the step's linearization."""
        return not self.samples or self.triggered

    def rolls_branches(self, horizon: int) -> bool:
        """Whether a triggered bundle's branches are rolled ``horizon`` (> 1) control steps
        (``BundleConfig.horizon``) instead of bundling one step."""
        return self.triggered and horizon > 1

    def bundled(self, ops: StepDerivatives[T]) -> T:
        """The derivative on a step this estimator bundles (``exact`` bundles none)."""
        raise NotImplementedError

    def default_samples(self, nx: int, nu: int) -> int:
        """Branches per bundle when ``BundleConfig.num_samples`` is None: twice the
        ``nx + nu`` unknowns per row of a least-squares fit, else the paper's B = 10."""
        return 2 * (nx + nu) if self.least_squares else FIRST_ORDER_SAMPLES

    def check_samples(self, n: int, nx: int, nu: int) -> None:
        """``ValueError`` where ``n`` branches cannot give this estimator's fit (never for
        first-order estimators); ``BundleConfig.allow_underdetermined`` skips the check."""

    def bundle_simulations(self, nx: int, nu: int, num_samples: int, horizon: int = 1) -> float:
        """Control-step evaluations of one bundled env step in a reverse-mode rollout
        gradient (``gradients.cost``); ``horizon`` is ``BundleConfig.horizon``."""
        raise NotImplementedError

    def simulations_per_step(
        self, nx: int, nu: int, num_samples: int, bundled_fraction: float, horizon: int = 1
    ) -> float:
        """Control-step evaluations per env step, ``bundled_fraction`` of the steps
        bundled (a triggered estimator's other steps are exact's)."""
        bundled = self.bundle_simulations(nx, nu, num_samples, horizon)
        if not self.triggered:
            return bundled
        return EXACT_SIMULATIONS * (1 - bundled_fraction) + bundled * bundled_fraction


@dataclasses.dataclass(frozen=True)
class Exact(Estimator):
    """Autodiff (or central differences) of the converged step; no branches."""

    name: str = "exact"
    samples: bool = False

    def bundled(self, ops: StepDerivatives[T]) -> T:
        return ops.exact()

    def bundle_simulations(self, nx: int, nu: int, num_samples: int, horizon: int = 1) -> float:
        return EXACT_SIMULATIONS


@dataclasses.dataclass(frozen=True)
class FirstOrderBundle(Estimator):
    """Mean of exact derivatives at globally perturbed inputs, at every step: forward
    plus a recompute and a VJP per branch = 1 + 2 B."""

    name: str = "bundle"

    def bundled(self, ops: StepDerivatives[T]) -> T:
        return ops.first_order()

    def bundle_simulations(self, nx: int, nu: int, num_samples: int, horizon: int = 1) -> float:
        rolled = num_samples if self.rolls_branches(horizon) else 0
        return 1.0 + 2.0 * num_samples + rolled


@dataclasses.dataclass(frozen=True)
class BundledContactGradient(FirstOrderBundle):
    """``bundle`` of contact-local branches where the contact trigger fires, exact
    elsewhere; with ``horizon > 1`` the branches are rolled over the window, and the
    forward pass steps them too: 1 + 3 B per bundled step."""

    name: str = "bcg"
    triggered: bool = True
    contact_local: bool = True


@dataclasses.dataclass(frozen=True)
class ZerothOrderBundle(Estimator):
    """Least-squares ``[A B]`` from forward samples: forward, nominal and one evaluation
    per sample = 2 + B. Needs at least ``nx + nu`` samples (the unknowns per row)."""

    name: str = "zeroth"
    least_squares: bool = True

    def bundled(self, ops: StepDerivatives[T]) -> T:
        return ops.zeroth_order()

    def check_samples(self, n: int, nx: int, nu: int) -> None:
        p = nx + nu
        if n < p:
            raise ValueError(
                f"BundleConfig.num_samples must be >= nx + nu = {p} for estimator 'zeroth' (its "
                f"least-squares fit has {p} unknowns per row), got {n}; leave it None for "
                f"2 * (nx + nu), or set allow_underdetermined=True for the minimum-norm fit"
            )

    def bundle_simulations(self, nx: int, nu: int, num_samples: int, horizon: int = 1) -> float:
        return 2.0 + num_samples


@dataclasses.dataclass(frozen=True)
class AlphaOrderBundle(Estimator):
    """AoBG: zeroth's samples plus each sample's first-order Jacobian = 2 + B (1 + nx + nu).
    Needs more than ``nx + nu`` samples: its robustness check estimates the fit's variance
    from the residual degrees of freedom."""

    name: str = "alpha"
    least_squares: bool = True

    def bundled(self, ops: StepDerivatives[T]) -> T:
        return ops.alpha_order()

    def check_samples(self, n: int, nx: int, nu: int) -> None:
        p = nx + nu
        if n <= p:
            raise ValueError(
                f"BundleConfig.num_samples must be > nx + nu = {p} for estimator 'alpha' (its robustness "
                f"check needs residual degrees of freedom of the {p}-unknown least-squares fit), got {n}; "
                f"leave it None for 2 * (nx + nu), or set allow_underdetermined=True to accept alpha = 0 "
                f"(the zeroth-order fit alone)"
            )

    def bundle_simulations(self, nx: int, nu: int, num_samples: int, horizon: int = 1) -> float:
        return 2.0 + num_samples * (1 + nx + nu)


#: Every estimator by name.
REGISTRY: Dict[str, Estimator] = {
    e.name: e for e in (Exact(), FirstOrderBundle(), ZerothOrderBundle(), BundledContactGradient(), AlphaOrderBundle())
}
assert tuple(REGISTRY) == ESTIMATORS


def resolve(estimator: Union[str, Estimator]) -> Estimator:
    """The ``Estimator`` named ``estimator`` (an ``Estimator`` is returned as is);
    ``ValueError`` naming the argument and the choices for any other value."""
    if isinstance(estimator, Estimator):
        return estimator
    if not isinstance(estimator, str) or estimator not in REGISTRY:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    return REGISTRY[estimator]
