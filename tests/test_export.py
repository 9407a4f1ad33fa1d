"""Policy export: the NumPy policy reproduces the JAX deterministic policy of a run folder, and
the ONNX graph (run by onnxruntime) reproduces the NumPy policy."""

import itertools
import json
import sys

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bcg_envs.envs.resources import POLICY_DIR
from bcg_envs.export import NumpyPolicy, export_policy, read_policy_arrays, write_policy
from bcg_envs.learners import networks, shac
from bcg_envs.learners.runs import load_run

OBS, ACT = 11, 3


def _fake_run(path, hidden, activation, layer_norm, normalize):
    """A run folder as ``runs.train_run`` writes it, with random (not trained) parameters."""
    actor = networks.Actor(ACT, tuple(hidden), activation, layer_norm)
    params = actor.init(jax.random.PRNGKey(0), jnp.zeros((OBS,)))
    leaves, treedef = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    # Random values everywhere (the output layer starts tiny) so tanh and LayerNorm matter.
    leaves = [jax.random.normal(k, x.shape) * 0.7 for k, x in zip(keys, leaves)]
    params = jax.tree.unflatten(treedef, leaves)
    rng = np.random.default_rng(2)
    normalizer = {
        "mean": rng.normal(size=OBS).astype(np.float32),
        "var": rng.uniform(0.1, 4.0, size=OBS).astype(np.float32),
        "count": np.float32(10.0),
    }
    tree = jax.tree.map(np.asarray, {"normalizer": normalizer, "actor": params, "critic": {}})
    path.mkdir()
    learner = {
        "actor_hidden": list(hidden),
        "activation": activation,
        "layer_norm": layer_norm,
        "normalize_observations": normalize,
        "seed": 0,
        "estimator": "bcg",
    }
    config = {
        "env_id": "BoxPush-v0",
        "algo": "shac",
        "estimator": "bcg",
        "steps": 1,
        "seed": 0,
        "observation_size": OBS,
        "action_size": ACT,
        "episode_length": 10,
        "learner": learner,
    }
    (path / "config.json").write_text(json.dumps(config))
    (path / "params.msgpack").write_bytes(flax.serialization.msgpack_serialize(tree))
    return path


@pytest.mark.parametrize(
    "hidden,activation,layer_norm,normalize",
    [
        ((32, 16), "elu", True, True),
        ((8,), "tanh", False, False),
        ((16, 16, 8), "silu", True, False),
        ((12,), "relu", False, True),
    ],
)
def test_numpy_policy_matches_jax_policy(tmp_path, hidden, activation, layer_norm, normalize):
    run = _fake_run(tmp_path / "run", hidden, activation, layer_norm, normalize)
    out = export_policy(run, tmp_path / "policy.npz")
    policy = NumpyPolicy.load(out)
    assert policy.layer_sizes == [OBS, *hidden, ACT] and policy.activation == activation

    config, params, make_policy = load_run(run)
    jax_policy = jax.jit(make_policy(params, deterministic=True))
    obs = np.random.default_rng(3).normal(scale=3.0, size=(1000, OBS)).astype(np.float32)
    expected = np.asarray(jax_policy(jnp.asarray(obs), jax.random.PRNGKey(0))[0])
    got = policy(obs)
    assert got.shape == (1000, ACT) and got.dtype == np.float32
    assert np.abs(expected).max() > 0.5  # the check exercises the nonlinear range
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    np.testing.assert_allclose(policy(obs[0]), expected[0], atol=1e-5, rtol=0)  # unbatched


def test_export_file_contents_and_errors(tmp_path):
    run = _fake_run(tmp_path / "run", (8, 4), "elu", True, True)
    out = export_policy(run, tmp_path / "sub" / "p.npz")
    with np.load(out, allow_pickle=False) as data:
        assert {
            "layer_sizes",
            "kernel_0",
            "kernel_2",
            "ln_scale_1",
            "obs_mean",
            "obs_var",
            "activation",
            "layer_norm",
        } <= set(data.files)
        assert str(data["activation"]) == "elu" and bool(data["layer_norm"])
    with pytest.raises(ValueError, match=r"format must be one of \('npz', 'onnx'\), got 'pt'"):
        export_policy(run, tmp_path / "p.pt", format="pt")
    with pytest.raises(FileNotFoundError, match="not a finished run"):
        export_policy(tmp_path / "missing", tmp_path / "q.npz")
    with pytest.raises(ValueError, match=r"obs must have shape \(\.\.\., 11\)"):
        NumpyPolicy.load(out)(np.zeros(5))


def test_make_inference_fn_is_what_is_exported():
    """Guard: the exported layout assumes shac's policy is tanh(Actor mean) of normalized obs."""
    make_policy = shac.make_inference_fn(ACT, actor_hidden=(4,))
    actor = networks.Actor(ACT, (4,))
    params = {
        "actor": actor.init(jax.random.PRNGKey(0), jnp.zeros((OBS,))),
        "normalizer": networks.normalizer_init(OBS),
    }
    assert set(params["actor"]["params"]) == {"MLP_0", "log_std"}
    assert set(params["actor"]["params"]["MLP_0"]) == {"Dense_0", "LayerNorm_0", "Dense_1"}
    obs = jnp.ones((OBS,))
    a = make_policy(params, deterministic=True)(obs, jax.random.PRNGKey(0))[0]
    np.testing.assert_allclose(
        a, jnp.tanh(actor.apply(params["actor"], networks.normalize(params["normalizer"], obs))[0])
    )


SHIPPED = sorted(POLICY_DIR.glob("*.npz"))


def _random_arrays(hidden, activation, layer_norm, normalize, output="tanh", obs_clip=None, obs_eps=1e-5, seed=0):
    """The format's arrays of a random MLP (weights of scale 1 / sqrt(fan in), so the output
    layer reaches the nonlinear range of tanh and the clip)."""
    rng = np.random.default_rng(seed)
    sizes = [OBS, *hidden, ACT]
    arrays = {
        "layer_sizes": np.asarray(sizes, np.int64),
        "activation": np.asarray(activation),
        "layer_norm": np.asarray(layer_norm),
        "normalize_observations": np.asarray(normalize),
        "obs_eps": np.asarray(obs_eps),
        "ln_eps": np.asarray(1e-6),
        "output": np.asarray(output),
        "env_id": np.asarray("BoxPush-v0"),
        "format_version": np.asarray(2),
    }
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        arrays[f"kernel_{i}"] = (rng.normal(size=(n_in, n_out)) * 2.0 / np.sqrt(n_in)).astype(np.float32)
        arrays[f"bias_{i}"] = rng.normal(scale=0.3, size=n_out).astype(np.float32)
        if layer_norm and i < len(hidden):
            arrays[f"ln_scale_{i}"] = rng.uniform(0.5, 1.5, size=n_out).astype(np.float32)
            arrays[f"ln_bias_{i}"] = rng.normal(scale=0.1, size=n_out).astype(np.float32)
    if normalize:
        arrays["obs_mean"] = rng.normal(size=OBS).astype(np.float32)
        arrays["obs_var"] = rng.uniform(0.01, 4.0, size=OBS).astype(np.float32)
    if obs_clip is not None:
        arrays["obs_clip"] = np.asarray(float(obs_clip))
    return arrays


def _observations(size, seed=0):
    """512 observations: normal of scale 3, and 64 of scale 1e3 (past any clip)."""
    obs = np.random.default_rng(seed).normal(scale=3.0, size=(512, size)).astype(np.float32)
    obs[:64] *= 1e3
    return obs


def _onnx_actions(path, obs):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(["action"], {"obs": obs})
    return got


def _check_onnx_matches(path, policy, obs):
    got, want = _onnx_actions(path, obs), policy(obs)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    return want


def test_onnx_matches_numpy_for_a_shac_run(tmp_path):
    """SHAC layout: normalizer, Dense -> elu -> LayerNorm, tanh output."""
    pytest.importorskip("onnx")
    run = _fake_run(tmp_path / "run", (32, 16), "elu", True, True)
    npz, onnx_path = export_policy(run, tmp_path / "p.npz"), export_policy(run, tmp_path / "p.onnx", format="onnx")
    want = _check_onnx_matches(onnx_path, NumpyPolicy.load(npz), _observations(OBS))
    assert np.abs(want).max() > 0.9


@pytest.mark.parametrize("activation", ["elu", "relu", "tanh", "silu"])
@pytest.mark.parametrize("layer_norm,normalize", [(True, True), (False, False)])
def test_onnx_matches_numpy_for_each_activation(tmp_path, activation, layer_norm, normalize):
    pytest.importorskip("onnx")
    arrays = _random_arrays((24, 16), activation, layer_norm, normalize)
    path = write_policy(arrays, tmp_path / "p.onnx", format="onnx")
    _check_onnx_matches(path, NumpyPolicy(arrays), _observations(OBS))


def test_onnx_matches_numpy_for_an_sb3_policy(tmp_path):
    """SB3 layout: VecNormalize (epsilon 1e-8, clipped at 10), tanh layers, clipped output."""
    pytest.importorskip("onnx")
    arrays = _random_arrays((64, 64), "tanh", False, True, output="clip", obs_clip=10.0, obs_eps=1e-8)
    path = write_policy(arrays, tmp_path / "p.onnx", format="onnx")
    want = _check_onnx_matches(path, NumpyPolicy(arrays), _observations(OBS))
    assert (np.abs(want) == 1.0).mean() > 0.05 and (np.abs(want) < 1.0).mean() > 0.05  # clipped and not


@pytest.mark.parametrize("shipped", SHIPPED, ids=lambda p: p.name)
def test_onnx_matches_numpy_for_the_shipped_policies(tmp_path, shipped):
    pytest.importorskip("onnx")
    policy = NumpyPolicy.load(shipped)
    path = write_policy(read_policy_arrays(shipped), tmp_path / "p.onnx", format="onnx")
    _check_onnx_matches(path, policy, _observations(policy.observation_size))


def test_onnx_model_graph_and_metadata(tmp_path):
    onnx = pytest.importorskip("onnx")
    arrays = _random_arrays((8,), "silu", True, True, output="clip", obs_clip=5.0)
    model = onnx.load(str(write_policy(arrays, tmp_path / "p.onnx", format="onnx")))
    onnx.checker.check_model(model, full_check=True)
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta["env_id"] == "BoxPush-v0" and meta["format_version"] == "2" and meta["output"] == "clip"
    (inp,), (out,) = model.graph.input, model.graph.output
    assert inp.name == "obs" and out.name == "action"
    assert inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim] == ["batch", OBS]
    assert [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim] == ["batch", ACT]
    ops = [n.op_type for n in model.graph.node]
    assert ops == [
        "Sub",
        "Div",
        "Clip",
        "MatMul",
        "Add",
        "Sigmoid",
        "Mul",
        "LayerNormalization",
        "MatMul",
        "Add",
        "Clip",
    ]
    one = _onnx_actions(tmp_path / "p.onnx", _observations(OBS)[:1])  # a batch of one
    assert one.shape == (1, ACT)


def test_onnx_export_without_onnx_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # what a missing package looks like to import
    with pytest.raises(ImportError, match=r'pip install "/path/to/bcg_envs\[onnx\]"'):
        write_policy(_random_arrays((8,), "elu", False, False), tmp_path / "p.onnx", format="onnx")
    assert not (tmp_path / "p.onnx").exists()
