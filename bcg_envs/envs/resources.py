"""Where the shipped files are: ``ASSETS`` (MJCF models, motion clips, trained policies;
package data, found with ``importlib.resources`` so that wheel and editable installs
resolve alike) and ``trained_policy_path``, the file of a shipped policy.

This module only locates files, so the envs import nothing that reads policies or
trains them; ``bcg_envs.export.trained_policy`` loads a shipped policy."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: The repository's ``assets/`` (``bcg_envs/assets`` in a wheel): ``box_push/``, ``planar_hand/``, ``g1/`` (MJCF), ``motions/`` (G1
#: clips) and ``policies/`` (trained policies).
ASSETS: Path = Path(str(resources.files("bcg_envs.assets")))

#: The shipped trained policies (``bcg_envs.export`` format): ``<env id><suffix>.npz``.
POLICY_DIR = ASSETS / "policies"
#: File-name suffix of each learner's shipped policies.
LEARNER_SUFFIX = {"sb3_ppo": "", "shac_exact": ".shac_exact"}


def trained_policy_path(env_id: str, learner: str = "sb3_ppo") -> Path:
    """The ``.npz`` of the shipped policy of ``env_id`` trained by ``learner`` (``"sb3_ppo"`` or
    ``"shac_exact"``); ``ValueError`` for another learner, ``FileNotFoundError`` naming the
    ids that have one when ``env_id`` has none."""
    if learner not in LEARNER_SUFFIX:
        raise ValueError(f"learner must be one of {sorted(LEARNER_SUFFIX)}, got {learner!r}")
    suffix = LEARNER_SUFFIX[learner]
    path = POLICY_DIR / f"{env_id}{suffix}.npz"
    if not path.exists():
        split = (p.name.removesuffix(".npz").partition(".") for p in POLICY_DIR.glob("*.npz"))
        shipped = sorted(env for env, dot, rest in split if dot + rest == suffix)
        raise FileNotFoundError(f"no shipped {learner} policy for {env_id!r}; shipped: {shipped}")
    return path
