"""Policy export: the NumPy policy reproduces the JAX deterministic policy of a run folder."""

import json

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bcg_envs.export import NumpyPolicy, export_policy
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
    normalizer = {"mean": rng.normal(size=OBS).astype(np.float32),
                  "var": rng.uniform(0.1, 4.0, size=OBS).astype(np.float32), "count": np.float32(10.0)}
    tree = jax.tree.map(np.asarray, {"normalizer": normalizer, "actor": params, "critic": {}})
    path.mkdir()
    learner = {"actor_hidden": list(hidden), "activation": activation, "layer_norm": layer_norm,
               "normalize_observations": normalize, "seed": 0, "estimator": "bcg"}
    config = {"env_id": "BoxPush-v0", "algo": "shac", "estimator": "bcg", "steps": 1, "seed": 0,
              "observation_size": OBS, "action_size": ACT, "episode_length": 10, "learner": learner}
    (path / "config.json").write_text(json.dumps(config))
    (path / "params.msgpack").write_bytes(flax.serialization.msgpack_serialize(tree))
    return path


@pytest.mark.parametrize("hidden,activation,layer_norm,normalize", [
    ((32, 16), "elu", True, True),
    ((8,), "tanh", False, False),
    ((16, 16, 8), "silu", True, False),
    ((12,), "relu", False, True),
])
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
        assert {"layer_sizes", "kernel_0", "kernel_2", "ln_scale_1", "obs_mean", "obs_var", "activation",
                "layer_norm"} <= set(data.files)
        assert str(data["activation"]) == "elu" and bool(data["layer_norm"])
    with pytest.raises(ValueError, match="format must be 'npz'"):
        export_policy(run, tmp_path / "p.onnx", format="onnx")
    with pytest.raises(FileNotFoundError, match="not a finished run"):
        export_policy(tmp_path / "missing", tmp_path / "q.npz")
    with pytest.raises(ValueError, match=r"obs must have shape \(\.\.\., 11\)"):
        NumpyPolicy.load(out)(np.zeros(5))


def test_make_inference_fn_is_what_is_exported():
    """Guard: the exported layout assumes shac's policy is tanh(Actor mean) of normalized obs."""
    make_policy = shac.make_inference_fn(ACT, actor_hidden=(4,))
    actor = networks.Actor(ACT, (4,))
    params = {"actor": actor.init(jax.random.PRNGKey(0), jnp.zeros((OBS,))), "normalizer": networks.normalizer_init(OBS)}
    assert set(params["actor"]["params"]) == {"MLP_0", "log_std"}
    assert set(params["actor"]["params"]["MLP_0"]) == {"Dense_0", "LayerNorm_0", "Dense_1"}
    obs = jnp.ones((OBS,))
    a = make_policy(params, deterministic=True)(obs, jax.random.PRNGKey(0))[0]
    np.testing.assert_allclose(a, jnp.tanh(actor.apply(params["actor"], networks.normalize(params["normalizer"], obs))[0]))
