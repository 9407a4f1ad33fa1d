"""``BundleConfig``: how a gradient bundle is sampled and aggregated."""

from __future__ import annotations

import dataclasses
import math
from typing import Optional, Tuple

ESTIMATORS = ("exact", "bundle", "zeroth", "bcg", "alpha")


@dataclasses.dataclass(frozen=True, kw_only=True)
class BundleConfig:
    """Settings of the randomized-smoothing bundle (all fields keyword-only).

    Attributes:
      num_samples: branches B per bundle (10, as in Bundled Contact Gradients).
      state_sigma: perturbation std of (positions, velocities). With ``space="cartesian"``
        they are the contact point's displacement in metres and velocity in m/s (paper:
        1 cm, 2 cm/s); in joint space (and for the global ``bundle``/``zeroth``/``alpha``
        estimators) they apply to every tangent position and velocity coordinate.
      action_sigma: perturbation std of the normalized action (0.0: actions unperturbed).
        The zeroth-order fit needs every input perturbed; where this is 0 it uses
        ``state_sigma[0]`` for the actions.
      force_threshold: contact normal force (N) above which ``bcg`` bundles; ``None`` takes
        the environment's default (400 N on G1 as in the paper).
      horizon: control steps a triggered ``bcg`` bundle stays active (the paper's H; 1 in
        ``grad_step``, which differentiates one step at a time).
      space: ``"cartesian"`` maps contact-point perturbations to joints through the damped
        pseudo-inverse of the contact Jacobian; ``"joint"`` perturbs the contacting chain's
        joints directly.
      forward: ``"nominal"`` advances the unperturbed state; ``"mean"`` advances to the
        mean of the branch states (the paper's forward pass).
      antithetic: sample perturbations in +/- pairs (needs an even ``num_samples``).
      damping: damping of the contact-Jacobian pseudo-inverse (paper: 1e-4).
      seed: base seed of the perturbations when no key is threaded through (``grad_step``).
    """

    num_samples: int = 10
    state_sigma: Tuple[float, float] = (0.01, 0.02)
    action_sigma: float = 0.0
    force_threshold: Optional[float] = None
    horizon: int = 1
    space: str = "cartesian"
    forward: str = "nominal"
    antithetic: bool = False
    damping: float = 1e-4
    seed: int = 0

    def __post_init__(self) -> None:
        def bad(field: str, expected: str, value: object) -> ValueError:
            return ValueError(f"BundleConfig.{field} must be {expected}, got {value!r}")

        if not _is_int(self.num_samples) or self.num_samples < 1:
            raise bad("num_samples", "an integer >= 1", self.num_samples)
        if self.antithetic and self.num_samples % 2:
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
        if self.force_threshold is not None and (
            not _is_real(self.force_threshold) or not self.force_threshold >= 0
        ):
            raise bad("force_threshold", "None or a float >= 0 (newtons)", self.force_threshold)
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
        if not _is_int(self.seed):
            raise bad("seed", "an integer", self.seed)

    def with_defaults(self, force_threshold: float) -> "BundleConfig":
        """This config with an environment's default force threshold filled in."""
        if self.force_threshold is not None:
            return self
        return dataclasses.replace(self, force_threshold=float(force_threshold))


def check_estimator(estimator: str) -> str:
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    return estimator


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
