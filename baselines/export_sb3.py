"""Export a stable-baselines3 PPO policy (and its ``VecNormalize`` statistics) to the
framework-free ``.npz`` of ``bcg_envs.export``, run with NumPy alone by ``NumpyPolicy``,
or (``--format onnx``) to the same computation in ONNX.

    python -m baselines.export_sb3 --model <run>/model.zip --stats <run>/vecnormalize.pkl \\
        --env G1Jump-v0 --out policy.npz [--format onnx]

What is exported is SB3's deterministic ``predict`` for an ``MlpPolicy`` on a flat Box
observation: the normalized observation ``clip((obs - mean) / sqrt(var + eps), -c, c)``
(``VecNormalize``), the actor's hidden layers (``mlp_extractor.policy_net``: Linear +
activation), the action net's mean, clipped to [-1, 1]. ``baselines.compare`` and
``baselines.tune`` save these two files per run under ``<out>/checkpoints/``.
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from bcg_envs.export import FORMAT_VERSION, FORMATS, write_policy

#: SB3's activation classes (torch.nn) by the export format's names.
_ACTIVATIONS = {"Tanh": "tanh", "ReLU": "relu", "ELU": "elu", "SiLU": "silu"}


def sb3_policy_arrays(model, vec_normalize=None) -> Dict[str, np.ndarray]:
    """The export format's arrays of an SB3 PPO ``model`` (a ``stable_baselines3.PPO``);
    ``vec_normalize`` (a ``VecNormalize``, or None) supplies the observation statistics."""
    import torch

    policy = model.policy
    if getattr(policy, "squash_output", False):
        raise ValueError("policies with squash_output=True (gSDE) are not supported")
    layers = [m for m in policy.mlp_extractor.policy_net]
    linears = [m for m in layers if isinstance(m, torch.nn.Linear)]
    activations = {type(m).__name__ for m in layers if not isinstance(m, torch.nn.Linear)}
    if len(activations) > 1 or not activations <= set(_ACTIVATIONS):
        raise ValueError(
            f"the policy net's activations must be one of {sorted(_ACTIVATIONS)}, got {sorted(activations)}"
        )
    activation = _ACTIVATIONS[activations.pop()] if activations else "tanh"
    linears.append(policy.action_net)
    arrays: Dict[str, np.ndarray] = {}
    sizes: List[int] = [int(linears[0].in_features)]
    for i, linear in enumerate(linears):
        arrays[f"kernel_{i}"] = linear.weight.detach().cpu().numpy().T.astype(np.float32)
        arrays[f"bias_{i}"] = linear.bias.detach().cpu().numpy().astype(np.float32)
        sizes.append(int(linear.out_features))
    normalize = vec_normalize is not None and bool(vec_normalize.norm_obs)
    if normalize:
        rms = vec_normalize.obs_rms
        arrays["obs_mean"] = np.asarray(rms.mean, np.float32)
        arrays["obs_var"] = np.asarray(rms.var, np.float32)
        arrays["obs_clip"] = np.asarray(float(vec_normalize.clip_obs), np.float64)
    arrays.update(
        layer_sizes=np.asarray(sizes, np.int64),
        activation=np.asarray(activation),
        layer_norm=np.asarray(False),
        normalize_observations=np.asarray(normalize),
        obs_eps=np.asarray(float(vec_normalize.epsilon) if normalize else 0.0, np.float64),
        ln_eps=np.asarray(0.0, np.float64),
        output=np.asarray("clip"),
        format_version=np.asarray(FORMAT_VERSION, np.int64),
    )
    return arrays


def saved_policy_arrays(model_path: Path, stats_path: Optional[Path]) -> Dict[str, np.ndarray]:
    """The export format's arrays of a saved SB3 PPO ``model.zip`` (and ``vecnormalize.pkl``)."""
    from stable_baselines3 import PPO

    model = PPO.load(str(model_path), device="cpu")
    vec_normalize = None
    if stats_path is not None:
        with open(stats_path, "rb") as f:  # VecNormalize.load needs an env; the statistics do not
            vec_normalize = pickle.load(f)
    return sb3_policy_arrays(model, vec_normalize)


def export_sb3(
    model_path: Path, stats_path: Optional[Path], out: Path, env_id: str = "", *, format: str = "npz"
) -> Path:
    """Load an SB3 PPO ``model.zip`` (and ``vecnormalize.pkl``) and write it to ``out`` as
    ``format`` (``"npz"`` or ``"onnx"``, ``bcg_envs.export.write_policy``)."""
    arrays = saved_policy_arrays(model_path, stats_path)
    arrays["env_id"] = np.asarray(env_id)
    return write_policy(arrays, out, format=format)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="SB3 PPO model.zip")
    parser.add_argument(
        "--stats", default=None, help="VecNormalize statistics (vecnormalize.pkl); none: raw observations"
    )
    parser.add_argument("--env", default="", help="environment id stored with the policy")
    parser.add_argument("--out", required=True, help="the file to write")
    parser.add_argument("--format", default="npz", choices=list(FORMATS), help="file format (default: npz)")
    args = parser.parse_args(argv)
    out = export_sb3(
        Path(args.model), Path(args.stats) if args.stats else None, Path(args.out), args.env, format=args.format
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
