"""Pre-flight of the GPU scripts (``baselines/gpu_g1jump.sh``, ``baselines/gpu_measure.sh``):
JAX runs on a GPU with the pinned jax and jaxlib, and the planned runs train every learner
for exactly the same env steps.

    python -m baselines.gpu_check --jax 0.10.2 \
        --config baselines/configs/G1Jump-v0.gpu.json --steps 1966080 --evals 10 \
        --algos shac_bcg brax_ppo shac_exact sb3_ppo

Prints the device and the planned env steps per learner; exits 1 with the reason when a
check fails.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Optional

from baselines import protocol, runners

#: JAX's CUDA plugins, one per CUDA major version (``jax[cuda12]``, ``jax[cuda13]``).
CUDA_PLUGINS = ("jax-cuda12-plugin", "jax-cuda13-plugin")


def installed_plugins() -> Dict[str, str]:
    """Installed CUDA plugins of JAX: distribution name -> version."""
    found = {}
    for name in CUDA_PLUGINS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def check_device(pinned: str) -> str:
    """One line naming JAX's first device, its kind and the versions, e.g. ``gpu (NVIDIA
    H200), 1 device(s); jax 0.10.2, jaxlib 0.10.2, jax-cuda12-plugin 0.10.2``. Raises
    RuntimeError when jax or jaxlib is not ``pinned``, a CUDA plugin of another version is
    installed, or the first device is not a GPU."""
    import jax
    import jaxlib

    versions = {"jax": jax.__version__, "jaxlib": jaxlib.__version__}
    wrong = {k: v for k, v in versions.items() if v != pinned}
    if wrong:
        raise RuntimeError(
            f"{wrong} differ from the version pyproject.toml pins ({pinned}); "
            f"reinstall jax=={pinned} jaxlib=={pinned} in {sys.executable}"
        )
    plugins = installed_plugins()
    stale = {k: v for k, v in plugins.items() if v != pinned}
    if stale:
        raise RuntimeError(
            f"CUDA plugin {stale} differs from jax {pinned}; install jax[cuda12]=={pinned} (or jax[cuda13]=={pinned})"
        )
    devices = jax.devices()
    first = devices[0]
    if first.platform != "gpu":
        hint = (
            f"{', '.join(plugins)} is installed: check that nvidia-smi lists the GPU and that the driver "
            "is new enough for its CUDA version (CUDA 12: >= 525, CUDA 13: >= 580)"
            if plugins
            else f'no CUDA plugin of JAX is installed in {sys.executable}: pip install "jax[cuda12]=={pinned}"'
        )
        raise RuntimeError(f"JAX sees no GPU (devices: {devices}); {hint}")
    plugin_text = ", ".join(f"{k} {v}" for k, v in plugins.items()) or "no CUDA plugin"
    return (
        f"{first.platform} ({first.device_kind}), {len(devices)} device(s); "
        f"jax {versions['jax']}, jaxlib {versions['jaxlib']}, {plugin_text}"
    )


def check_plan(env_id: str, config: Path, steps: int, evals: int, algos: List[str]) -> Dict[str, int]:
    """Planned env steps per learner (``protocol.planned_env_steps``) after the config checks
    of ``runners.validate_config``. Raises ValueError unless every learner trains for
    exactly ``steps`` env steps."""
    cfg = protocol.load_config(env_id, config)
    runners.validate_config(cfg, env_id, algos)
    planned = {algo: protocol.planned_env_steps(algo, cfg, steps, evals) for algo in algos}
    off = {a: n for a, n in planned.items() if n != steps}
    if off:
        raise ValueError(
            f"with {config}, --steps {steps:,} and --evals {evals} these learners would train for "
            f"other env steps: { {a: f'{n:,}' for a, n in off.items()} }; pick a budget that is a "
            "whole number of every learner's updates (see baselines.protocol.planned_env_steps)"
        )
    return planned


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jax", required=True, help="the jax and jaxlib version pyproject.toml pins")
    parser.add_argument("--env", default="G1Jump-v0")
    parser.add_argument("--config", default=None, help="config of the planned runs (with --steps, --evals, --algos)")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--evals", type=int, default=None)
    parser.add_argument("--algos", nargs="+", default=list(protocol.ALGORITHMS[:4]), choices=list(protocol.ALGORITHMS))
    args = parser.parse_args(argv)
    try:
        print("device:", check_device(args.jax), flush=True)
        if args.config is not None:
            if args.steps is None or args.evals is None:
                parser.error("--config needs --steps and --evals")
            planned = check_plan(args.env, Path(args.config), args.steps, args.evals, args.algos)
            print(
                f"plan: {args.env}, {args.config}, {args.evals} evaluations, env steps per learner: "
                + ", ".join(f"{a} {n:,}" for a, n in planned.items())
            )
    except (RuntimeError, ValueError) as err:
        print(f"gpu_check: error: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
