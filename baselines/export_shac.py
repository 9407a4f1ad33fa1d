"""Export the final policy of a SHAC run of ``baselines.compare`` (its newest checkpoint)
to the framework-free ``.npz`` of ``bcg_envs.export``, run with NumPy alone by ``NumpyPolicy``,
or (``--format onnx``) to the same computation in ONNX.

    python -m baselines.export_shac --checkpoint <out>/checkpoints/shac_exact_seed0 \\
        --env G1Jump-v0 --out policy.npz [--format onnx]

What is exported is SHAC's deterministic policy: the normalized observation, the actor's
Dense -> activation -> LayerNorm blocks, and ``tanh`` of the mean. The network's shape comes
from the checkpoint's stored network config (``bcg_envs.learners.shac.load_policy``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from bcg_envs.export import FORMATS, policy_arrays, write_policy


def checkpoint_policy_arrays(checkpoint: Path) -> Dict[str, np.ndarray]:
    """The export format's arrays of the newest SHAC checkpoint in ``checkpoint`` (a file or directory)."""
    from bcg_envs.learners import shac

    _, params, network = shac.load_policy(checkpoint)
    return policy_arrays(
        params,
        actor_hidden=network.actor_hidden,
        activation=network.activation,
        layer_norm=network.layer_norm,
        normalize_observations=network.normalize_observations,
    )


def export_shac(checkpoint: Path, out: Path, env_id: str = "", *, format: str = "npz") -> Path:
    """Write the policy of the SHAC checkpoint ``checkpoint`` to ``out`` as ``format`` (``"npz"``
    or ``"onnx"``, ``bcg_envs.export.write_policy``); returns the path written."""
    arrays = checkpoint_policy_arrays(checkpoint)
    arrays["env_id"] = np.asarray(env_id)
    return write_policy(arrays, out, format=format)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--checkpoint", required=True, help="a SHAC checkpoint file or a directory of them (its newest)"
    )
    parser.add_argument("--env", default="", help="environment id stored with the policy")
    parser.add_argument("--out", required=True, help="the file to write")
    parser.add_argument("--format", default="npz", choices=list(FORMATS), help="file format (default: npz)")
    args = parser.parse_args(argv)
    print(f"wrote {export_shac(Path(args.checkpoint), Path(args.out), args.env, format=args.format)}")


if __name__ == "__main__":
    main()
