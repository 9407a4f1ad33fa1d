"""Export a trained policy to a framework-free ``.npz`` (run with NumPy alone) or to ONNX.

``export_policy(run_dir, path)`` writes the deterministic policy of a run folder
(``bcg_envs.learners.runs``): the actor MLP's weights, the observation normalizer's
mean/variance, the activation, the LayerNorm flag and the layer sizes.
``NumpyPolicy.load(path)(obs)`` (``bcg_envs.numpy_policy``) recomputes ``tanh(mean)`` exactly as
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

``format="onnx"`` (``write_policy``, ``export_policy``; needs ``pip install "/path/to/bcg_envs[onnx]"``)
writes the same computation as an ONNX graph (``onnx_model``): input ``obs`` (float32,
``(batch, observation size)``), output ``action`` (float32, ``(batch, action size)``), and the
env id and format version in the model's metadata.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Dict, List, Sequence, Union

import numpy as np

from bcg_envs.envs.resources import trained_policy_path
from bcg_envs.numpy_policy import (  # noqa: F401  (the format's names, also importable from here)
    ACTIVATIONS,
    FORMAT_VERSION,
    LN_EPS,
    OBS_EPS,
    OUTPUTS,
    NumpyPolicy,
    read_policy_arrays,
)

if TYPE_CHECKING:
    import onnx

#: File formats of ``write_policy`` and ``export_policy``.
FORMATS = ("npz", "onnx")
#: ONNX opset of the exported graphs: 17 is the first with ``LayerNormalization``.
ONNX_OPSET = 17
#: How to install what ``format="onnx"`` needs.
ONNX_INSTALL = 'pip install "/path/to/bcg_envs[onnx]"'


def export_policy(run_dir: Union[str, Path], path: Union[str, Path], *, format: str = "npz") -> Path:
    """Write the deterministic policy of the SHAC run folder ``run_dir`` to ``path``
    (``format`` ``"npz"`` or ``"onnx"``).

    Returns the path written. Raises ``FileNotFoundError`` if ``run_dir`` is not a
    finished run, ``ValueError`` for an unsupported ``format`` and ``ImportError`` if
    ``"onnx"`` is asked for without the onnx package.
    """
    check_format(format)
    return write_policy(run_policy_arrays(run_dir), path, format=format)


def run_policy_arrays(run_dir: Union[str, Path]) -> Dict[str, np.ndarray]:
    """The arrays of the format of the SHAC run folder ``run_dir``'s deterministic policy, its
    env id included (``FileNotFoundError`` if ``run_dir`` is not a finished run)."""
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
    return arrays


def check_format(format: str) -> str:
    """``format`` if it is one of ``FORMATS``, else ``ValueError``."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    return format


def write_policy(arrays: Dict[str, np.ndarray], path: Union[str, Path], *, format: str = "npz") -> Path:
    """Write the arrays of the format (checked by building a ``NumpyPolicy``) to ``path``
    as ``format`` ``"npz"`` (the arrays themselves) or ``"onnx"`` (``onnx_model``'s graph)."""
    check_format(format)
    if format == "onnx":
        return write_onnx(arrays, path)
    NumpyPolicy(arrays)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as f:  # a file object keeps numpy from appending ".npz"
        np.savez(f, **arrays)
    return out


def trained_policy(env_id: str, learner: str = "sb3_ppo") -> NumpyPolicy:
    """The shipped closed-loop policy of ``env_id`` trained by ``learner`` (``"sb3_ppo"`` or
    ``"shac_exact"``; the env's default observation and action mode as trained):
    ``observation -> action`` in NumPy. The file is ``bcg_envs.envs.resources.trained_policy_path``;
    how each was trained and exported is in docs/environments.md. ``FileNotFoundError``
    names the ids that have one."""
    return NumpyPolicy.load(trained_policy_path(env_id, learner))


def policy_arrays(
    params: Dict[str, Any],
    *,
    actor_hidden: Sequence[int],
    activation: str = "elu",
    layer_norm: bool = True,
    normalize_observations: bool = True,
) -> Dict[str, np.ndarray]:
    """The arrays of the export format from SHAC ``params`` (``{"normalizer", "actor", ...}``)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
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


def import_onnx() -> ModuleType:
    """The ``onnx`` module, else an ``ImportError`` that says how to install it."""
    try:
        import onnx
    except ImportError as err:
        raise ImportError(f"ONNX export needs the onnx package: {ONNX_INSTALL}") from err
    return onnx


def onnx_model(arrays: Dict[str, np.ndarray], *, opset: int = ONNX_OPSET) -> "onnx.ModelProto":
    """The policy of the format's ``arrays`` as a checked ONNX model (float32 throughout).

    Graph: ``obs`` (``(batch, observation size)``) -> ``Sub`` mean, ``Div`` std and ``Clip`` at
    ``obs_clip`` (when normalized) -> per hidden layer ``MatMul``, ``Add``, the activation
    (``Elu``, ``Relu``, ``Tanh``, or ``Sigmoid`` and ``Mul`` for silu) and
    ``LayerNormalization`` (when ``layer_norm``) -> ``MatMul``, ``Add`` -> ``Tanh`` or
    ``Clip`` to [-1, 1] -> ``action``. The metadata holds ``env_id``, ``format_version``
    (of the ``.npz`` format the graph computes), ``output`` and ``layer_sizes``.
    """
    onnx = import_onnx()
    from onnx import TensorProto, helper, numpy_helper

    if opset < ONNX_OPSET:
        raise ValueError(f"opset must be >= {ONNX_OPSET} (LayerNormalization), got {opset}")
    policy = NumpyPolicy(arrays)
    nodes: List[Any] = []
    initializers: List[Any] = []

    def const(name: str, value) -> str:
        initializers.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def node(op: str, inputs: List[str], output: str, **attributes) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attributes))
        return output

    x = "obs"
    if policy.normalize_observations:
        x = node("Sub", [x, const("obs_mean", policy.obs_mean)], "obs_centered")
        x = node("Div", [x, const("obs_std", policy.obs_std)], "obs_normalized")
        if np.isfinite(policy.obs_clip):
            x = node(
                "Clip",
                [x, const("obs_clip_min", -policy.obs_clip), const("obs_clip_max", policy.obs_clip)],
                "obs_clipped",
            )
    hidden = len(policy.kernels) - 1
    for i in range(hidden + 1):
        x = node("MatMul", [x, const(f"kernel_{i}", policy.kernels[i])], f"dense_{i}_matmul")
        x = node("Add", [x, const(f"bias_{i}", policy.biases[i])], f"dense_{i}")
        if i == hidden:
            break
        if policy.activation == "elu":
            x = node("Elu", [x], f"elu_{i}", alpha=1.0)
        elif policy.activation == "relu":
            x = node("Relu", [x], f"relu_{i}")
        elif policy.activation == "tanh":
            x = node("Tanh", [x], f"tanh_{i}")
        else:  # silu: x * sigmoid(x)
            x = node("Mul", [x, node("Sigmoid", [x], f"sigmoid_{i}")], f"silu_{i}")
        if policy.layer_norm:
            scale, bias = policy.ln[i]
            x = node(
                "LayerNormalization",
                [x, const(f"ln_scale_{i}", scale), const(f"ln_bias_{i}", bias)],
                f"layer_norm_{i}",
                axis=-1,
                epsilon=policy.ln_eps,
            )
    if policy.output == "tanh":
        node("Tanh", [x], "action")
    else:
        node("Clip", [x, const("action_min", -1.0), const("action_max", 1.0)], "action")

    graph = helper.make_graph(
        nodes,
        "bcg_envs_policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", policy.observation_size])],
        [helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", policy.action_size])],
        initializer=initializers,
    )
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(
        graph,
        opset_imports=opsets,
        producer_name="bcg_envs",
        doc_string=f"deterministic policy of {policy.env_id or 'an unnamed env'}",
    )
    model.ir_version = helper.find_min_ir_version_for(opsets)  # readable by the oldest runtimes of the opset
    helper.set_model_props(
        model,
        {
            "env_id": policy.env_id,
            "format_version": str(FORMAT_VERSION),
            "output": policy.output,
            "layer_sizes": " ".join(str(s) for s in policy.layer_sizes),
        },
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def write_onnx(arrays: Dict[str, np.ndarray], path: Union[str, Path]) -> Path:
    """Write ``onnx_model(arrays)`` to ``path``; returns the path written."""
    onnx = import_onnx()
    model = onnx_model(arrays)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(out))
    return out
