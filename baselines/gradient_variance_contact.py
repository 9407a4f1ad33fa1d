"""Contact models of the gradient-variance sweep: their stiffness levels, contact options and variants."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

#: Contact models whose level is ``kappa`` and that take ``contact_options``.
KAPPA_MODELS = ("penalty", "moreau")


@dataclasses.dataclass(frozen=True)
class ContactModel:
    """A contact model, its stiffness levels and how ``make_jax`` takes a level."""

    name: str
    levels: Tuple[float, ...]
    axis_label: str
    #: True where a smaller level is stiffer (time constants): the plots flip the x axis.
    smaller_is_stiffer: bool
    #: Physics timestep (s); None: the task's.
    physics_dt: Optional[float]
    #: ``contact_options`` of the penalty and Moreau models as sorted (key, value) pairs;
    #: () keeps the model's defaults.
    options: Tuple[Tuple[str, object], ...] = ()

    @property
    def variant(self) -> str:
        """The options as written in the CSV's ``contact_options`` column: ``key=value``
        pairs joined by ``;`` (e.g. ``midpoint=False``), "" for the defaults."""
        return options_key(dict(self.options))

    @property
    def label(self) -> str:
        """The model and its options, for messages."""
        return f"{self.name} [{self.variant}]" if self.options else self.name

    def env_kwargs(self, level: float) -> Dict[str, object]:
        """``make_jax`` keyword arguments of one stiffness level."""
        kwargs: Dict[str, object] = {}
        if self.physics_dt is not None:
            kwargs["physics_dt"] = self.physics_dt
        if self.options:
            kwargs["contact_options"] = dict(self.options)
        if self.name in KAPPA_MODELS:
            return {**kwargs, "contact_model": self.name, "kappa": float(level)}
        return {**kwargs, "contact_stiffness": float(level)}

    def block_key(self, level: float, estimator: str) -> tuple:
        """(contact model, options, physics_dt, level, estimator) as ``done_blocks`` keys
        the CSV's rows."""
        return (self.name, self.variant, dt_key(self.physics_dt), level_key(level), estimator)

    def file_stem(self) -> str:
        """This variant's prefix of the data files: the model's name, then its options and
        its physics timestep where they differ from the defaults (so that the default
        variant keeps the names of older sweeps)."""
        stem = self.name
        if self.options:
            stem += "_" + self.variant.replace(";", "_")
        default = CONTACT_MODELS[self.name].physics_dt if self.name in CONTACT_MODELS else None
        if self.physics_dt != default:
            stem += f"_dt{dt_key(self.physics_dt) or 'task'}"
        return stem


CONTACT_MODELS = {
    "mujoco": ContactModel(
        "mujoco", (0.05, 0.02, 0.008, 0.004, 0.002), "solref time constant (s), stiffer ->", True, 0.001
    ),
    "penalty": ContactModel("penalty", (50.0, 100.0, 200.0, 300.0, 500.0), "kappa (1/m), stiffer ->", False, None),
    "moreau": ContactModel("moreau", (50.0, 100.0, 300.0, 1000.0, 3000.0), "kappa (1/m), stiffer ->", False, None),
}
#: What ``--contact-model both`` selects (its meaning before the Moreau model was added).
BOTH = ("mujoco", "penalty")
#: One level per model for ``--quick``.
QUICK_LEVELS = {"mujoco": (0.004,), "penalty": (300.0,), "moreau": (300.0,)}


def level_key(level: float) -> str:
    """A level as written in the CSV (shortest round-trip float text)."""
    return repr(float(level))


def dt_key(value) -> str:
    """A ``physics_dt`` as compared between the CSV and a model: "" for the task's."""
    if value is None or value == "":
        return ""
    return repr(float(value))


def _option_text(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def options_key(options: Dict[str, object]) -> str:
    """``contact_options`` as one canonical text: sorted ``key=value`` joined by ``;``."""
    return ";".join(f"{k}={_option_text(v)}" for k, v in sorted(options.items()))


def parse_contact_options(tokens: Optional[Sequence[str]]) -> Dict[str, object]:
    """``--contact-options`` tokens ``KEY=VALUE`` as a dict: ``true``/``false`` (any case)
    become bools, integer and float literals numbers, anything else stays a string
    (``friction=regularized``). Keys must be identifiers and values plain words (they go
    into the data files' names)."""
    import re

    out: Dict[str, object] = {}
    for token in tokens or ():
        key, eq, text = token.partition("=")
        if not eq or not key.isidentifier() or not re.fullmatch(r"[A-Za-z0-9_.+-]+", text):
            raise ValueError(f"--contact-options {token!r}: expected KEY=VALUE (e.g. midpoint=False)")
        if key in out:
            raise ValueError(f"--contact-options: {key!r} given twice")
        value: object
        if text.lower() in ("true", "false"):
            value = text.lower() == "true"
        else:
            try:
                value = int(text)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    value = text
        out[key] = value
    return out


def select_models(
    which: str | Sequence[str],
    levels: Optional[Sequence[str]],
    physics_dt: Optional[float],
    quick: bool,
    options: Optional[Dict[str, object]] = None,
) -> List[ContactModel]:
    """Contact models of ``--contact-model`` (one name or several; ``both``: mujoco and
    penalty) with ``--levels`` (``1e-3``: every selected model; ``mujoco=0.004``: one
    model), ``--physics-dt`` (the mujoco and moreau models'; 0: the task's; the penalty
    model always steps at the task's) and ``--contact-options`` (``options``, a dict: the
    penalty and moreau models', checked against their parameters here)."""
    names: List[str] = []
    for name in [which] if isinstance(which, str) else which:
        if name != "both" and name not in CONTACT_MODELS:
            raise ValueError(f"--contact-model {name!r}: not one of {[*CONTACT_MODELS, 'both']}")
        names += [n for n in (BOTH if name == "both" else (name,)) if n not in names]
    options = dict(options or {})
    if options:
        kappa_models = [n for n in names if n in KAPPA_MODELS]
        if not kappa_models:
            raise ValueError("--contact-options parametrize the penalty and moreau models; neither is selected")
        for n in kappa_models:
            _check_options(n, options)
    chosen = {n: (QUICK_LEVELS[n] if quick else CONTACT_MODELS[n].levels) for n in names}
    if levels:
        override: Dict[str, List[float]] = {}
        for token in levels:
            name, _, value = token.rpartition("=")
            for n in [name] if name else names:
                if n not in names:
                    raise ValueError(f"--levels {token!r}: contact model {n!r} is not selected")
                override.setdefault(n, []).append(float(value))
        chosen.update({n: tuple(v) for n, v in override.items()})
    models = []
    for n in names:
        dt = CONTACT_MODELS[n].physics_dt
        if n in ("mujoco", "moreau") and physics_dt is not None:
            dt = physics_dt or None
        opts = tuple(sorted(options.items())) if n in KAPPA_MODELS else ()
        models.append(dataclasses.replace(CONTACT_MODELS[n], levels=chosen[n], physics_dt=dt, options=opts))
    return models


def _check_options(model: str, options: Dict[str, object]) -> None:
    """ValueError unless ``options`` are valid ``contact_options`` of ``model`` (the
    parameters class's own checks, before any start state is searched or program built)."""
    from bcg_envs.physics.moreau_contact import MoreauContact
    from bcg_envs.physics.penalty_contact import PenaltyContact

    cls = MoreauContact if model == "moreau" else PenaltyContact
    known = [f.name for f in dataclasses.fields(cls) if f.name != "kappa"]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"--contact-options {unknown}: not options of the {model} model; known: {known}")
    try:
        cls(**options)
    except (TypeError, ValueError) as e:
        raise ValueError(f"--contact-options for the {model} model: {e}") from e
