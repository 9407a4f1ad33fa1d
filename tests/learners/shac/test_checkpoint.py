"""SHAC checkpoints (``bcg_envs.learners.shac.checkpoint``): file naming, the exact state
round trip, and the policy rebuilt from a checkpoint alone (network config in its metadata)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bcg_envs.learners import shac


def _state(scale=1.0, width=3):
    """A small hand-made ``TrainState`` (no env, no compile)."""
    arr = lambda *shape: scale * jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape)  # noqa: E731
    return shac.TrainState(
        iteration=jnp.asarray(5, jnp.int32),
        key=jax.random.PRNGKey(7),
        actor={"params": {"w": arr(2, width), "log_std": arr(width)}},
        critic={"params": {"w": arr(2, 1)}},
        target_critic={"params": {"w": arr(2, 1) + 1}},
        actor_opt=(arr(4),),
        critic_opt=(arr(4),),
        normalizer={"mean": arr(2), "var": arr(2) + 1, "count": jnp.asarray(3.0)},
        env_state={"obs": arr(4, 2)},
        ep_return=arr(4),
        ep_length=jnp.arange(4, dtype=jnp.int32),
        skipped=jnp.asarray(1, jnp.int32),
    )


def test_checkpoint_names(tmp_path):
    assert shac.checkpoint_path(tmp_path, 7) == tmp_path / f"{shac.CHECKPOINT_PREFIX}00000007.msgpack"
    with pytest.raises(FileNotFoundError, match="no SHAC checkpoint"):
        shac.latest_checkpoint(tmp_path)
    for it in (2, 10, 4):
        shac.save_checkpoint(shac.checkpoint_path(tmp_path, it), _state())
    assert shac.latest_checkpoint(tmp_path).name == "shac_00000010.msgpack"
    assert shac.latest_checkpoint(tmp_path / "shac_00000002.msgpack").name == "shac_00000002.msgpack"
    assert not list(tmp_path.glob("*.tmp"))  # written atomically


def test_state_round_trip_and_mismatch(tmp_path):
    ts = _state()
    path = shac.save_checkpoint(tmp_path / "c.msgpack", ts, {"note": "x"})
    back = shac.load_checkpoint(path, _state(scale=0.0))
    assert jax.tree.structure(back) == jax.tree.structure(ts)
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(ts)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert shac.checkpoint_metadata(path) == {"note": "x"}
    with pytest.raises(ValueError, match="different config"):
        shac.load_checkpoint(path, _state(width=4))
    # a checkpoint without the network config cannot rebuild a policy
    with pytest.raises(ValueError, match="no network config"):
        shac.load_policy(path)


def test_network_config_dict_round_trip():
    cfg = shac.NetworkConfig(6, 2, (16, 8), (8,), "tanh", False, -0.5, False)
    d = cfg.to_dict()
    assert d["actor_hidden"] == [16, 8] and d["action_size"] == 2
    assert shac.NetworkConfig.from_dict(d) == cfg


def test_policy_from_checkpoint_alone(point_mass, tmp_path):
    """``train``'s checkpoints store the network config; ``load_policy`` rebuilds the
    returned policy from the last one without the env or any training argument."""
    kw = dict(
        num_envs=4,
        horizon=4,
        num_timesteps=3 * 16,
        actor_hidden=(16,),
        critic_hidden=(8,),
        activation="tanh",
        layer_norm=False,
        normalize_observations=True,
        critic_iterations=2,
        critic_minibatches=2,
        num_evals=0,
        progress_bar=False,
        checkpoint_every=2,
        init_log_std=-2.0,
        actor_output_scale=1e-4,
    )
    make_policy, params, _ = shac.train(point_mass, checkpoint_dir=tmp_path, **kw)
    assert sorted(p.name for p in tmp_path.glob("shac_*.msgpack")) == ["shac_00000002.msgpack", "shac_00000003.msgpack"]
    meta = shac.checkpoint_metadata(tmp_path)
    assert meta["algo"] == "shac" and meta["config"]["network"] == {
        "observation_size": 6,
        "action_size": 2,
        "actor_hidden": [16],
        "critic_hidden": [8],
        "activation": "tanh",
        "layer_norm": False,
        "init_log_std": -2.0,
        "normalize_observations": True,
        "actor_output_scale": 1e-4,
    }
    loaded_make_policy, loaded, network = shac.load_policy(tmp_path)
    assert network == shac.NetworkConfig.from_dict(meta["config"]["network"])
    assert set(loaded) == {"normalizer", "actor", "critic"}
    assert jax.tree.structure(loaded) == jax.tree.structure(params)
    for a, b in zip(jax.tree.leaves(loaded), jax.tree.leaves(params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    obs = jax.random.normal(jax.random.PRNGKey(0), (5, 6))
    for deterministic in (True, False):
        a, _ = loaded_make_policy(loaded, deterministic)(obs, jax.random.PRNGKey(1))
        b, _ = make_policy(params, deterministic)(obs, jax.random.PRNGKey(1))
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_checkpoint_older_than_an_added_info_entry_resumes(tmp_path):
    """Info entries added to the env state after a checkpoint was written
    (``checkpoint.ADDED_INFO``) take the template's value; every other leaf is restored."""
    import flax
    import jax.numpy as jnp
    import numpy as np

    from bcg_envs.learners.shac import checkpoint

    template = {
        "info": {"a": jnp.ones(2), "max_point_force": jnp.zeros(3), "z": jnp.full(1, 5.0)},
        "p": jnp.arange(4.0),
    }
    old = [np.array([7.0, 7.0], np.float32), np.array([9.0], np.float32), np.arange(4.0, dtype=np.float32) + 1]
    path = tmp_path / "old.msgpack"
    path.write_bytes(flax.serialization.msgpack_serialize({"leaves": {str(i): x for i, x in enumerate(old)}}))
    got = checkpoint.load_checkpoint(path, template)
    assert (
        (got["info"]["a"] == 7).all() and (got["info"]["z"] == 9).all() and (got["info"]["max_point_force"] == 0).all()
    )
    assert (got["p"] == np.arange(4.0) + 1).all()
    path.write_bytes(flax.serialization.msgpack_serialize({"leaves": {str(i): x for i, x in enumerate(old[:2])}}))
    with pytest.raises(ValueError, match="checkpoint has 2 arrays, this trainer expects 4"):
        checkpoint.load_checkpoint(path, template)


def test_checkpoints_at_the_evaluations_follow_their_progress_fn(point_mass, tmp_path):
    """``checkpoint_every=0`` saves at the evaluation points (iterations 2 and 4 of 4), each
    after its ``progress_fn``: a run stopped while its caller records an evaluation has no
    checkpoint past it, so a resume repeats that evaluation."""

    class Stopped(Exception):
        pass

    def stop_at(steps):
        def progress(num_steps, metrics):
            if num_steps == steps:
                raise Stopped

        return progress

    kw = dict(
        num_envs=4,
        horizon=4,
        num_timesteps=4 * 16,
        actor_hidden=(8,),
        critic_hidden=(8,),
        critic_iterations=2,
        critic_minibatches=2,
        num_evals=3,
        run_evals=False,
        progress_bar=False,
        checkpoint_every=0,
    )
    for steps, saved in ((32, []), (64, ["shac_00000002.msgpack"])):
        with pytest.raises(Stopped):
            shac.train(point_mass, checkpoint_dir=tmp_path / str(steps), progress_fn=stop_at(steps), **kw)
        assert sorted(p.name for p in (tmp_path / str(steps)).glob("shac_*")) == saved
    shac.train(point_mass, checkpoint_dir=tmp_path / "whole", **kw)
    assert sorted(p.name for p in (tmp_path / "whole").glob("shac_*")) == [
        "shac_00000002.msgpack",
        "shac_00000004.msgpack",
    ]
    with pytest.raises(ValueError, match="checkpoint_every must be >= 0"):
        shac.train(point_mass, checkpoint_every=-1, **{k: v for k, v in kw.items() if k != "checkpoint_every"})
