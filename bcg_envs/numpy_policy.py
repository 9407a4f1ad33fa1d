"""The exported-policy format and its NumPy reader, ``NumpyPolicy``; NumPy is its only import.

Envs, tools and learners all read policies through this module, and it imports nothing
from ``bcg_envs``, so reading a policy never pulls in the learners. The writers are in
``bcg_envs.export``, which describes the arrays of the format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Union

import numpy as np

FORMAT_VERSION = 2
#: How the output layer becomes an action in [-1, 1].
OUTPUTS = ("tanh", "clip")
#: The normalizer's epsilon (``networks.normalize``) and flax LayerNorm's default epsilon.
OBS_EPS = 1e-5
LN_EPS = 1e-6

#: The hidden layers' activations by their names in the format.
ACTIVATIONS: Dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "silu": lambda x: x * (0.5 + 0.5 * np.tanh(0.5 * x)),  # x * sigmoid(x), no overflow at large |x|
}


def read_policy_arrays(path: Union[str, Path]) -> Dict[str, np.ndarray]:
    """The arrays of a policy ``.npz`` (``FileNotFoundError`` if missing, ``ValueError`` if
    its ``format_version`` is newer than ``FORMAT_VERSION``)."""
    with np.load(Path(path), allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    version = int(arrays.get("format_version", FORMAT_VERSION))
    if version > FORMAT_VERSION:
        raise ValueError(f"{path}: format_version {version} is newer than this reader ({FORMAT_VERSION})")
    return arrays


class NumpyPolicy:
    """Deterministic MLP policy in NumPy: ``policy(obs) -> action`` (float32, in [-1, 1]).

    ``obs`` has shape ``(..., observation_size)``; the math runs in float64.
    """

    def __init__(self, arrays: Dict[str, np.ndarray]):
        self.layer_sizes = [int(s) for s in np.asarray(arrays["layer_sizes"])]
        self.activation = str(arrays["activation"])
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
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

        def f64(key: str) -> np.ndarray:
            return np.asarray(arrays[key], np.float64)

        self.kernels = [f64(f"kernel_{i}") for i in range(n)]
        self.biases = [f64(f"bias_{i}") for i in range(n)]
        self.ln = [(f64(f"ln_scale_{i}"), f64(f"ln_bias_{i}")) for i in range(n - 1)] if self.layer_norm else []
        if self.normalize_observations:
            self.obs_mean, self.obs_std = f64("obs_mean"), np.sqrt(f64("obs_var") + self.obs_eps)

    @classmethod
    def load(cls, path: Union[str, Path]) -> "NumpyPolicy":
        """Read a file written by ``bcg_envs.export`` (``export_policy``, ``write_policy``)."""
        return cls(read_policy_arrays(path))

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
        act = ACTIVATIONS[self.activation]
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
