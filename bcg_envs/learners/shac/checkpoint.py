"""SHAC checkpoints: the whole training state, resumable, and the policy on its own.

A checkpoint ``shac_XXXXXXXX.msgpack`` (XXXXXXXX: iterations done) is a flax msgpack
dict of

* ``iteration``;
* ``leaves``: every array of the ``TrainState`` in ``jax.tree.leaves`` order (restored
  into a template of the same structure by ``load_checkpoint``: exact resume);
* ``params``: ``{"normalizer", "actor", "critic"}`` by name, as ``train`` returns them;
* ``meta``: JSON text; ``train`` writes ``algo``, ``config`` (the compiled shapes and
  ``config["network"]``, a ``NetworkConfig``: observation/action sizes, hidden sizes,
  activation, LayerNorm, ``normalize_observations``), ``hyper``, ``seed`` and
  ``num_timesteps``.

``load_policy`` rebuilds ``make_policy`` and ``params`` from ``params`` and the network
config alone (no env, no template).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple, Union

import flax.serialization
import jax
import numpy as np
from jax.experimental import multihost_utils

from bcg_envs.learners.shac.networks import NetworkConfig, Params, inference_fn_from_config

#: The training state (``train.TrainState``): a pytree with ``iteration``, ``normalizer``,
#: ``actor`` and ``critic``. Typed loosely here so that this module does not import the
#: trainer that imports it.
TrainingState = Any

CHECKPOINT_PREFIX = "shac_"


def checkpoint_path(checkpoint_dir: Union[str, Path], iteration: int) -> Path:
    """``checkpoint_dir/shac_XXXXXXXX.msgpack`` of ``iteration`` iterations done."""
    return Path(checkpoint_dir) / f"{CHECKPOINT_PREFIX}{int(iteration):08d}.msgpack"


def host_state(ts: TrainingState) -> TrainingState:
    """``ts`` with every array fetched to this host as numpy, the env states of every
    process included (``save_checkpoint`` writes it).

    With several processes (``jax.distributed``) this gathers the env shards across
    processes: a collective, so every process calls it at the same point of the run,
    and only one then writes the file."""

    def fetch(x: Any) -> np.ndarray:
        if isinstance(x, jax.Array) and not x.is_fully_addressable and not x.is_fully_replicated:
            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return np.asarray(jax.device_get(x))

    return jax.tree.map(fetch, ts)


def save_checkpoint(path: Union[str, Path], ts: TrainingState, meta: Optional[Dict[str, Any]] = None) -> Path:
    """Write the whole training state (flax msgpack of its leaves) atomically. With
    several processes give it ``host_state(ts)`` (the gathered state), from one process."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    host = jax.device_get(ts)
    leaves = [np.asarray(x) for x in jax.tree.leaves(host)]
    payload = {
        "iteration": int(ts.iteration),
        "meta": json.dumps(meta or {}),
        "leaves": {str(i): leaf for i, leaf in enumerate(leaves)},
        "params": jax.tree.map(np.asarray, {"normalizer": host.normalizer, "actor": host.actor, "critic": host.critic}),
    }
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(flax.serialization.msgpack_serialize(payload))
    os.replace(tmp, path)
    return path


def latest_checkpoint(path: Union[str, Path]) -> Path:
    """``path`` itself if it is a file, else the newest ``shac_*.msgpack`` in it."""
    path = Path(path)
    if path.is_file():
        return path
    found = sorted(path.glob(f"{CHECKPOINT_PREFIX}*.msgpack"))
    if not found:
        raise FileNotFoundError(f"no SHAC checkpoint ({CHECKPOINT_PREFIX}*.msgpack) in {path}")
    return found[-1]


def _read(path: Union[str, Path]) -> Dict[str, Any]:
    return flax.serialization.msgpack_restore(latest_checkpoint(path).read_bytes())


#: Env-state info entries newer than some checkpoints (``bcg_envs.envs.base.STEP_INFO``):
#: a checkpoint without them resumes with the template's values.
ADDED_INFO = ("max_point_force",)


def load_checkpoint(path: Union[str, Path], template: TrainingState) -> TrainingState:
    """Restore a ``TrainState`` saved by ``save_checkpoint`` into ``template``'s structure."""
    leaves = _read(path)["leaves"]
    paths, treedef = jax.tree_util.tree_flatten_with_path(template)
    ref = [leaf for _, leaf in paths]
    # Env-state entries added after a checkpoint was written take the template's value.
    added = [i for i, (keys, _) in enumerate(paths) if any(getattr(k, "key", None) in ADDED_INFO for k in keys)]
    saved = [i for i in range(len(ref)) if i not in added] if len(leaves) == len(ref) - len(added) else range(len(ref))
    if len(leaves) != len(saved):
        raise ValueError(f"checkpoint has {len(leaves)} arrays, this trainer expects {len(ref)}: different config?")
    # Missing entries keep the template's array as is: with several processes it spans
    # devices this process cannot read, so it is never fetched to the host.
    out = list(ref)
    for n, i in enumerate(saved):
        r = ref[i]
        x = np.asarray(leaves[str(n)])
        if x.shape != tuple(r.shape) or x.dtype != r.dtype:
            raise ValueError(
                f"checkpoint array {n} is {x.dtype}{x.shape}, expected {r.dtype}{tuple(r.shape)}: different config?"
            )
        out[i] = x
    return jax.tree.unflatten(treedef, out)


def checkpoint_metadata(path: Union[str, Path]) -> Dict[str, Any]:
    """The ``meta`` dict of a checkpoint file (or of a directory's newest checkpoint)."""
    return json.loads(_read(path)["meta"])


def load_policy(path: Union[str, Path]) -> Tuple[Callable[..., Any], Params, NetworkConfig]:
    """``(make_policy, params, network_config)`` from a checkpoint file (or a directory's
    newest checkpoint) alone: ``make_policy(params, deterministic=True)`` is the policy
    ``train`` returned at that iteration (``params``: ``normalizer``, ``actor``,
    ``critic``). Raises ``ValueError`` for a checkpoint that lacks the named parameters
    or the network config (written before they were stored)."""
    payload = _read(path)
    meta = json.loads(payload["meta"])
    network = meta.get("config", {}).get("network")
    if network is None or "params" not in payload:
        raise ValueError(
            f"{latest_checkpoint(path)} stores no network config or named parameters (an older checkpoint); "
            "resume it with train(restore_from=...) to write a new one"
        )
    config = NetworkConfig.from_dict(network)
    return inference_fn_from_config(config), payload["params"], config
