"""Where the shipped files are: ``ASSETS`` (MJCF models, motion clips, trained policies;
package data, found with ``importlib.resources`` so that wheel and editable installs
resolve alike), and ``trained_policy``, which loads a shipped policy."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from bcg_envs.export import NumpyPolicy

#: ``bcg_envs/assets``: ``box_push/``, ``planar_hand/``, ``g1/`` (MJCF), ``motions/`` (G1
#: clips) and ``policies/`` (trained policies).
ASSETS: Path = Path(str(resources.files("bcg_envs").joinpath("assets")))

#: The shipped trained policies (``bcg_envs.export`` format): ``<env id><suffix>.npz``.
POLICY_DIR = ASSETS / "policies"
#: File-name suffix of each learner's shipped policies.
LEARNER_SUFFIX = {"sb3_ppo": "", "shac_exact": ".shac_exact"}


def trained_policy(env_id: str, learner: str = "sb3_ppo") -> NumpyPolicy:
    """The shipped closed-loop policy of ``env_id`` trained by ``learner`` (``"sb3_ppo"`` or
    ``"shac_exact"``; the env's default observation and action mode as trained):
    ``observation -> action`` in NumPy. How each was trained and exported is in docs/environments.md;
    ``FileNotFoundError`` names the ids that have one."""
    if learner not in LEARNER_SUFFIX:
        raise ValueError(f"learner must be one of {sorted(LEARNER_SUFFIX)}, got {learner!r}")
    suffix = LEARNER_SUFFIX[learner]
    path = POLICY_DIR / f"{env_id}{suffix}.npz"
    if not path.exists():
        split = (p.name.removesuffix(".npz").partition(".") for p in POLICY_DIR.glob("*.npz"))
        shipped = sorted(env for env, dot, rest in split if dot + rest == suffix)
        raise FileNotFoundError(f"no shipped {learner} policy for {env_id!r}; shipped: {shipped}")
    return NumpyPolicy.load(path)
