"""Export a trained SHAC policy to a framework-free ``.npz`` and run it with NumPy alone.

``export_policy(run_dir, path)`` writes the deterministic policy of a run folder
(``bcg_envs.learners.runs``): the actor MLP's weights, the observation normalizer's
mean/variance, the activation, the LayerNorm flag and the layer sizes.
``NumpyPolicy.load(path)(obs)`` recomputes ``tanh(mean)`` exactly as
``shac.make_inference_fn(...)(params, deterministic=True)`` does, with no JAX or flax:

* ``x = (obs - mean) / sqrt(var + 1e-5)`` (if the run normalized observations);
* per hidden layer ``x = LayerNorm(act(x @ W + b))`` (LayerNorm epsilon 1e-6, as flax);
* ``action = tanh(x @ W_out + b_out)``, in [-1, 1].

The same format holds other learners' MLP policies (``baselines.export_sb3`` writes SB3
PPO's): ``obs_clip`` bounds the normalized observation (SB3's ``VecNormalize`` clips at
10) and ``output="clip"`` clips the output layer to [-1, 1] instead of squashing it
(SB3's deterministic ``predict``).

Arrays in the file: ``layer_sizes`` (obs size, hidden widths..., action size),
``kernel_i``/``bias_i`` (i = 0 .. number of hidden layers; the last is the output layer),
``ln_scale_i``/``ln_bias_i`` per hidden layer when ``layer_norm``, ``obs_mean``/``obs_var``
when ``normalize_observations``, and the scalars ``activation``, ``layer_norm``,
``normalize_observations``, ``obs_eps``, ``ln_eps``, ``env_id``, ``format_version``; since
format 2, optionally ``obs_clip`` (default: none) and ``output`` (``"tanh"``, the default,
or ``"clip"``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Union

import numpy as np

FORMAT_VERSION = 2
#: How the output layer becomes an action in [-1, 1].
OUTPUTS = ("tanh", "clip")
#: The normalizer's epsilon (``networks.normalize``) and flax LayerNorm's default epsilon.
OBS_EPS = 1e-5
LN_EPS = 1e-6

_ACTIVATIONS: Dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "silu": lambda x: x / (1.0 + np.exp(-x)),
}


def export_policy(run_dir: Union[str, Path], path: Union[str, Path], *, format: str = "npz") -> Path:
    """Write the deterministic policy of the SHAC run folder ``run_dir`` to ``path`` (.npz).

    Returns the path written. Raises ``FileNotFoundError`` if ``run_dir`` is not a
    finished run and ``ValueError`` for an unsupported ``format``.
    """
    if format != "npz":
        raise ValueError(f"format must be 'npz', got {format!r}")
    from bcg_envs.learners.runs import load_run

    config, params, _ = load_run(run_dir)
    if config.get("algo", "shac") != "shac":
        raise ValueError(f"run_dir must hold a SHAC run, got algo {config.get('algo')!r}")
    learner = config.get("learner", {})
    arrays = policy_arrays(
        params,
        actor_hidden=learner.get("actor_hidden", (512, 256, 128)),
        activation=learner.get("activation", "elu"),
        layer_norm=learner.get("layer_norm", True),
        normalize_observations=learner.get("normalize_observations", True),
    )
    arrays["env_id"] = np.asarray(str(config.get("env_id", "")))
    return write_policy(arrays, path)


def write_policy(arrays: Dict[str, np.ndarray], path: Union[str, Path]) -> Path:
    """Write the arrays of the format (checked by building a ``NumpyPolicy``) to ``path``."""
    NumpyPolicy(arrays)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as f:  # a file object keeps numpy from appending ".npz"
        np.savez(f, **arrays)
    return out


def policy_arrays(
    params: Dict[str, Any],
    *,
    actor_hidden,
    activation: str = "elu",
    layer_norm: bool = True,
    normalize_observations: bool = True,
) -> Dict[str, np.ndarray]:
    """The arrays of the export format from SHAC ``params`` (``{"normalizer", "actor", ...}``)."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
    hidden = [int(w) for w in actor_hidden]
    actor = params["actor"]
    actor = actor.get("params", actor)
    mlp = actor["MLP_0"]
    arrays: Dict[str, np.ndarray] = {}
    sizes = []
    for i in range(len(hidden) + 1):
        dense = mlp.get(f"Dense_{i}")
        if dense is None:
            raise ValueError(f"params['actor'] has no Dense_{i}: actor_hidden {hidden} does not match the params")
        kernel = np.asarray(dense["kernel"], np.float32)
        arrays[f"kernel_{i}"] = kernel
        arrays[f"bias_{i}"] = np.asarray(dense["bias"], np.float32)
        sizes.append(kernel.shape[0])
        if i < len(hidden):
            if kernel.shape[1] != hidden[i]:
                raise ValueError(f"Dense_{i} has width {kernel.shape[1]}, actor_hidden says {hidden[i]}")
            if layer_norm:
                arrays[f"ln_scale_{i}"] = np.asarray(mlp[f"LayerNorm_{i}"]["scale"], np.float32)
                arrays[f"ln_bias_{i}"] = np.asarray(mlp[f"LayerNorm_{i}"]["bias"], np.float32)
        else:
            sizes.append(kernel.shape[1])
    if normalize_observations:
        arrays["obs_mean"] = np.asarray(params["normalizer"]["mean"], np.float32)
        arrays["obs_var"] = np.asarray(params["normalizer"]["var"], np.float32)
    arrays.update(
        layer_sizes=np.asarray(sizes, np.int64),
        activation=np.asarray(activation),
        layer_norm=np.asarray(bool(layer_norm)),
        normalize_observations=np.asarray(bool(normalize_observations)),
        obs_eps=np.asarray(OBS_EPS, np.float64),
        ln_eps=np.asarray(LN_EPS, np.float64),
        format_version=np.asarray(FORMAT_VERSION, np.int64),
    )
    return arrays


class NumpyPolicy:
    """Deterministic MLP policy in NumPy: ``policy(obs) -> action`` (float32, in [-1, 1]).

    ``obs`` has shape ``(..., observation_size)``; the math runs in float64.
    """

    def __init__(self, arrays: Dict[str, np.ndarray]):
        self.layer_sizes = [int(s) for s in np.asarray(arrays["layer_sizes"])]
        self.activation = str(arrays["activation"])
        if self.activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {self.activation!r}")
        self.layer_norm = bool(arrays["layer_norm"])
        self.normalize_observations = bool(arrays["normalize_observations"])
        self.obs_eps = float(arrays.get("obs_eps", OBS_EPS))
        self.ln_eps = float(arrays.get("ln_eps", LN_EPS))
        self.env_id = str(arrays.get("env_id", ""))
        self.obs_clip = float(arrays.get("obs_clip", np.inf))
        self.output = str(arrays.get("output", "tanh"))
        if self.output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, got {self.output!r}")
        n = len(self.layer_sizes) - 1
        f64 = lambda k: np.asarray(arrays[k], np.float64)  # noqa: E731
        self.kernels = [f64(f"kernel_{i}") for i in range(n)]
        self.biases = [f64(f"bias_{i}") for i in range(n)]
        self.ln = [(f64(f"ln_scale_{i}"), f64(f"ln_bias_{i}")) for i in range(n - 1)] if self.layer_norm else []
        if self.normalize_observations:
            self.obs_mean, self.obs_std = f64("obs_mean"), np.sqrt(f64("obs_var") + self.obs_eps)

    @classmethod
    def load(cls, path: Union[str, Path]) -> "NumpyPolicy":
        """Read a file written by ``export_policy``."""
        with np.load(Path(path), allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
        version = int(arrays.get("format_version", FORMAT_VERSION))
        if version > FORMAT_VERSION:
            raise ValueError(f"{path}: format_version {version} is newer than this reader ({FORMAT_VERSION})")
        return cls(arrays)

    @property
    def observation_size(self) -> int:
        return self.layer_sizes[0]

    @property
    def action_size(self) -> int:
        return self.layer_sizes[-1]

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, np.float64)
        if x.shape[-1:] != (self.observation_size,):
            raise ValueError(f"obs must have shape (..., {self.observation_size}), got {x.shape}")
        if self.normalize_observations:
            x = np.clip((x - self.obs_mean) / self.obs_std, -self.obs_clip, self.obs_clip)
        act = _ACTIVATIONS[self.activation]
        for i in range(len(self.kernels) - 1):
            x = act(x @ self.kernels[i] + self.biases[i])
            if self.layer_norm:
                scale, bias = self.ln[i]
                mean = x.mean(axis=-1, keepdims=True)
                var = np.square(x - mean).mean(axis=-1, keepdims=True)
                x = (x - mean) / np.sqrt(var + self.ln_eps) * scale + bias
        out = x @ self.kernels[-1] + self.biases[-1]
        out = np.tanh(out) if self.output == "tanh" else np.clip(out, -1.0, 1.0)
        return out.astype(np.float32)
