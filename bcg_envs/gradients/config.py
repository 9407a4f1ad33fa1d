"""``BundleConfig``: how a gradient bundle is sampled and aggregated."""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple, Union

from bcg_envs.gradients.registry import Estimator, resolve

#: When ``bcg`` bundles (``BundleConfig.trigger``).
TRIGGERS = ("force", "onset", "point")
#: What AoBG's bound gamma is (``BundleConfig.alpha_bound``).
ALPHA_BOUNDS = ("relative", "absolute")
#: Default ``BundleConfig.alpha_tolerance``: with the relative bound, the result stays
#: within 10 % (Frobenius) of the smoothed Jacobian with ~95 % confidence, and a jump whose
#: bias is the whole Jacobian gets ``alpha <= 0.1``.
ALPHA_TOLERANCE = 0.1


@dataclasses.dataclass(frozen=True, kw_only=True)
class BundleConfig:
    """Settings of the randomized-smoothing bundle (all fields keyword-only).

    Attributes:
      num_samples: branches B per bundle; ``None`` (default) picks per estimator: 10 for
        the first-order ``bundle`` and ``bcg`` (as in Bundled Contact Gradients),
        ``2 * (nx + nu)`` for ``zeroth`` and ``alpha``, whose least-squares fit of ``[A B]``
        has ``nx + nu`` unknowns per row (fewer samples leave it under-determined, and
        products of its minimum-norm fits over a rollout explode). ``alpha`` needs more
        than ``nx + nu``: its robustness check estimates the fit's variance from the
        ``n - (nx + nu)`` residual degrees of freedom.
      allow_underdetermined: accept an explicit ``num_samples`` below ``nx + nu`` for
        ``zeroth`` (the minimum-norm fit), or not above it for ``alpha`` (then alpha is 0:
        the zeroth-order fit alone); otherwise that raises ``ValueError``.
      state_sigma: perturbation std of (positions, velocities). With ``space="cartesian"``
        they are the contact point's displacement in metres and velocity in m/s (paper:
        1 cm, 2 cm/s); in joint space (and for the global ``bundle``/``zeroth``/``alpha``
        estimators) they apply to every tangent position and velocity coordinate.
      action_sigma: perturbation std of the normalized action (0.0: actions unperturbed).
        The zeroth-order fit needs every input perturbed; where this is 0 it uses
        ``state_sigma[0]`` for the actions.
      force_threshold: force (N) of the ``bcg`` trigger; ``None`` takes the
        environment's default (calibrated per task, see its docstring). A contact event is
        a pair of bodies: the normal forces of all contact points between the two bodies
        are summed (a foot's four spheres on the floor are one event).
      trigger: when ``bcg`` bundles. ``"force"`` (the default): an event's force, the
        largest over the step's physics substeps, exceeds ``force_threshold``. ``"point"``
        (the paper's definition): one contact's force exceeds it; the event's contacts are
        bundled together as with ``"force"``. The two agree where two bodies touch at one
        point; the event sum does not depend on how many contact points the collider makes
        between two bodies (a box face: one to four), the single force does.
        ``"onset"``: an event's force rises by more than ``force_threshold`` within the
        step (from the previous step's last substep to the largest of this step's), i.e. an
        impact or a contact that becomes active, not a steady press. Dry friction (joint
        ``frictionloss``) changing between stick and slip is not a trigger: MJX's exact
        step Jacobian there stays at the smooth steps' value (measured by
        ``python -m baselines.friction_switches``; the large norms finite differences
        show at those steps change by orders of magnitude with the difference step).
      horizon: the paper's H (default 2, as the paper), control steps of a ``bcg`` branch
        rollout; 1 bundles the triggered step alone. At a trigger the
        B perturbed branches are rolled H steps under the nominal actions and the rollout
        gradient (``jax.grad``, SHAC) through the window is the mean over valid branches of
        each branch's H-step sensitivity; the branch states travel in the env state
        (``info["bundle_branches"]``), so an env stepped with ``horizon > 1`` must be made
        with that bundle. ``grad_step`` differentiates one step at a time: inside a window
        it returns a fresh one-step bundle's Jacobians.
      space: ``"cartesian"`` maps contact-point perturbations to joints through the damped
        pseudo-inverse of the contact Jacobian; ``"joint"`` perturbs the contacting chain's
        joints directly.
      forward: ``"nominal"`` advances the unperturbed state; ``"mean"`` advances to the
        mean of the branch states (the paper's forward pass; with ``horizon > 1`` the
        mean of the branch rollouts' states at each step of the window).
      antithetic: sample perturbations in +/- pairs (needs an even ``num_samples``).
      damping: damping of the contact-Jacobian pseudo-inverse (paper: 1e-4).
      perturb_base: let ``bcg`` perturb a floating base (free joint) too; by default only
        the contacting limb's joints move (a foot's contact perturbs its leg, not the
        whole robot).
      seed: base seed of the perturbations when no key is threaded through (``grad_step``).
      alpha_tolerance: AoBG's robustness bound (Suh et al. 2022): how far (Frobenius norm
        of ``[A B]``) the interpolated estimate may lie from the smoothed Jacobian, the
        zeroth-order fit's 95 % confidence interval included. With ``alpha_bound=
        "relative"`` it is a fraction of the zeroth-order estimate's norm (gamma =
        ``alpha_tolerance * |zeroth|_F``, default 0.1: 10 %); with ``"absolute"`` it is
        gamma itself, in the units of ``[A B]``. Where the first-order mean lies too far
        from the zeroth-order estimate (a discontinuity biases it), alpha shrinks, down to
        0 (zeroth order alone).
      alpha_bound: ``"relative"`` (default) or ``"absolute"``, see ``alpha_tolerance``.
        An absolute gamma must be sized to the task's Jacobians, whose norms span ~1 (free
        motion) to ~1e4 (stiff contact) within one task: the former default, gamma = 1,
        was below the fit's confidence interval at each of 200 measured BoxPush steps.
    """

    num_samples: Optional[int] = None
    state_sigma: Tuple[float, float] = (0.01, 0.02)
    action_sigma: float = 0.0
    force_threshold: Optional[float] = None
    trigger: str = "force"
    horizon: int = 2
    space: str = "cartesian"
    forward: str = "nominal"
    antithetic: bool = False
    damping: float = 1e-4
    seed: int = 0
    perturb_base: bool = False
    allow_underdetermined: bool = False
    alpha_tolerance: float = ALPHA_TOLERANCE
    alpha_bound: str = "relative"

    def __post_init__(self) -> None:
        def bad(field: str, expected: str, value: object) -> ValueError:
            return ValueError(f"BundleConfig.{field} must be {expected}, got {value!r}")

        if self.num_samples is not None and (not _is_int(self.num_samples) or self.num_samples < 1):
            raise bad("num_samples", "None or an integer >= 1", self.num_samples)
        if self.antithetic and self.num_samples is not None and self.num_samples % 2:
            raise bad("num_samples", "even when antithetic=True", self.num_samples)
        sigma = self.state_sigma
        if (
            not isinstance(sigma, (tuple, list))
            or len(sigma) != 2
            or not all(_is_real(s) and s >= 0 and math.isfinite(s) for s in sigma)
        ):
            raise bad("state_sigma", "a pair of finite floats >= 0 (positions, velocities)", sigma)
        object.__setattr__(self, "state_sigma", (float(sigma[0]), float(sigma[1])))
        if not _is_real(self.action_sigma) or not self.action_sigma >= 0 or not math.isfinite(self.action_sigma):
            raise bad("action_sigma", "a finite float >= 0", self.action_sigma)
        if self.force_threshold is not None and (not _is_real(self.force_threshold) or not self.force_threshold >= 0):
            raise bad("force_threshold", "None or a float >= 0 (newtons)", self.force_threshold)
        if self.trigger not in TRIGGERS:
            raise bad("trigger", f"one of {TRIGGERS}", self.trigger)
        if not _is_int(self.horizon) or self.horizon < 1:
            raise bad("horizon", "an integer >= 1 (control steps)", self.horizon)
        if self.space not in ("cartesian", "joint"):
            raise bad("space", "'cartesian' or 'joint'", self.space)
        if self.forward not in ("nominal", "mean"):
            raise bad("forward", "'nominal' or 'mean'", self.forward)
        if not isinstance(self.antithetic, bool):
            raise bad("antithetic", "a bool", self.antithetic)
        if not _is_real(self.damping) or not self.damping > 0:
            raise bad("damping", "a float > 0", self.damping)
        if not _is_int(self.seed) or self.seed < 0:
            raise bad("seed", "an integer >= 0", self.seed)
        if not isinstance(self.perturb_base, bool):
            raise bad("perturb_base", "a bool", self.perturb_base)
        if not isinstance(self.allow_underdetermined, bool):
            raise bad("allow_underdetermined", "a bool", self.allow_underdetermined)
        if (
            not _is_real(self.alpha_tolerance)
            or not self.alpha_tolerance > 0
            or not math.isfinite(self.alpha_tolerance)
        ):
            raise bad("alpha_tolerance", "a finite float > 0", self.alpha_tolerance)
        if self.alpha_bound not in ALPHA_BOUNDS:
            raise bad("alpha_bound", f"one of {ALPHA_BOUNDS}", self.alpha_bound)

    def with_defaults(self, force_threshold: float) -> "BundleConfig":
        """This config with an environment's default force threshold filled in."""
        if self.force_threshold is not None:
            return self
        return dataclasses.replace(self, force_threshold=float(force_threshold))


def samples_for(config: BundleConfig, estimator: Union[str, Estimator], nx: int, nu: int) -> int:
    """The branch count ``estimator`` uses on a system of ``nx`` states and ``nu`` actions
    (``num_samples``, or its per-estimator default); raises ``ValueError`` for a
    ``zeroth`` count below ``nx + nu``, or an ``alpha`` count not above it, unless
    ``allow_underdetermined``."""
    est = resolve(estimator)
    n = config.num_samples
    if n is None:
        n = est.default_samples(nx, nu)
        n += n % 2 if config.antithetic else 0
    elif not config.allow_underdetermined:
        est.check_samples(n, nx, nu)
    return n


def check_estimator(estimator: str) -> str:
    """``estimator`` if it names an estimator, else ``ValueError`` naming the argument
    (``registry.resolve`` gives the ``Estimator`` itself)."""
    return resolve(estimator).name


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
