"""baselines/runners.py: the committed configs, the learners' own settings, each learner end to end on a tiny budget."""

import csv
import math

import numpy as np
import pytest

from baselines import protocol, run_csv, runners


def cfg_env(path):
    """``G1Jump-v0.json``, ``G1Jump-v0.gpu.json`` and ``G1Jump-v0.<variant>.json`` configure G1Jump-v0."""
    return path.name.split(".")[0]


@pytest.mark.parametrize("path", sorted(protocol.CONFIGS.glob("*.json")), ids=lambda p: p.stem)
def test_committed_configs_are_accepted_by_their_algorithms(path):
    """Every task's own config and the GPU config (which no GPU has run yet) configure
    every algorithm; a variant (tuned, zero_start) configures the ones it names. All keys
    are checked."""
    cfg = protocol.load_config(cfg_env(path), path)
    algos = [a for a in protocol.ALGORITHMS if protocol.config_section(a) in cfg]
    if path.stem in (cfg_env(path), cfg_env(path) + ".gpu"):
        assert algos == list(protocol.ALGORITHMS)
    assert algos
    runners.validate_config(cfg, cfg_env(path), algos)


def test_sb3_learning_rate_constant_or_linear_to_min_lr():
    """SB3 calls the schedule with the fraction of the run remaining: 1 at the start, 0 at the end."""
    assert runners.sb3_learning_rate({"learning_rate": 3e-4}) == 3e-4
    linear = runners.sb3_learning_rate({"learning_rate": 3e-4, "lr_schedule": "linear", "min_lr": 1e-5})
    assert [linear(p) for p in (1.0, 0.5, 0.0)] == pytest.approx([3e-4, 1.55e-4, 1e-5])


#: Each run is a 2-8 minute XLA compile on 2 cores. SHAC exact also trains in
#: tests/learners/shac/test_train.py; it and Brax APG run here in the integration tier.
_SLOW = ("shac_exact", "brax_apg")


#: Learners that checkpoint at every evaluation and resume from it.
_RESUMABLE = ("sb3_ppo", "shac_exact", "shac_bcg")


@pytest.mark.integration
@pytest.mark.parametrize(
    "algo", [pytest.param(a, marks=pytest.mark.long) if a in _SLOW else a for a in protocol.ALGORITHMS]
)
def test_every_algorithm_runs_end_to_end(tmp_path, algo, monkeypatch):
    """Brax PPO takes the JAX env unchanged (``enable_brax`` aside); SHAC bcg is the demo's.
    Every row is scored by the shared protocol (here 3 episodes from ``EVAL_SEED``) and
    appended to the CSV as it is measured. SB3 PPO and SHAC run half the budget, stop, and
    resume from their checkpoint: the first half's rows stay, the run reaches the budget."""
    monkeypatch.setattr(protocol, "EVAL_EPISODES", 3)
    cfg = protocol.load_config("BoxPush-v0")
    cfg["brax_ppo"].update(num_envs=4, batch_size=4, num_minibatches=2, unroll_length=8, init_noise_std=0.37)
    cfg["shac"].update(num_envs=4, horizon=8, actor_hidden=[16], critic_hidden=[16])
    cfg["brax_apg"].update(num_envs=4, horizon_length=8)
    path, checkpoints = tmp_path / f"{algo}_seed0.csv", tmp_path / "checkpoints"
    first: list = []
    if algo in _RESUMABLE:
        runners.RUNNERS[algo]("BoxPush-v0", 256, 0, cfg, 1, protocol.Recorder("BoxPush-v0", path), checkpoints)
        first = run_csv.read_rows(path)
        assert first[-1]["env_steps"] >= 256 and any(checkpoints.iterdir())
        assert not run_csv.is_complete(path, 512)
    recorder = protocol.Recorder("BoxPush-v0", path, budget=512, train_backend=protocol.training_backend(algo, {}))
    runners.RUNNERS[algo]("BoxPush-v0", 512, 0, cfg, 1, recorder, checkpoints)
    assert run_csv.is_complete(path, 512)
    with path.open() as f:
        parsed = list(csv.DictReader(f))
    assert parsed and tuple(parsed[0]) == run_csv.CSV_FIELDS
    rows = run_csv.read_rows(path)
    # resumed: the rows before the checkpoint are kept (NaN counters of PPO compared as text)
    assert [{k: repr(v) for k, v in r.items()} for r in rows[: len(first)]] == [
        {k: repr(v) for k, v in r.items()} for r in first
    ]
    steps = [r["env_steps"] for r in rows]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert all(r["eval_episodes"] == 3 for r in rows)
    if algo != "brax_apg":  # APG exposes its policy only at the end
        assert steps[0] == 0 and len(rows) >= 2
    assert all(r["eval_return"] == r["eval_return"] for r in rows)  # no NaN
    assert 0.0 <= rows[-1]["eval_success"] <= 1.0  # every learner reports its final success
    assert rows[-1]["eval_length"] > 0
    # The clocks of a timing, and the final policy scored in the simulator it trained in
    # (MJX for the JAX learners; SB3 PPO trains where it is scored).
    assert rows[-1]["cpu_time"] > 0 and rows[-1]["others_cpu_time"] >= 0 and rows[-1]["cpus"] >= 1
    own = rows[-1]["train_sim_success"]
    assert math.isnan(own) if algo == "sb3_ppo" else 0.0 <= own <= 1.0
    # Simulated control steps: one per env step for PPO, >= 3 (forward, recompute, VJP) for
    # the gradient learners, more where bcg bundled.
    per_step = rows[-1]["sim_steps"] / rows[-1]["env_steps"]
    if "ppo" in algo:
        assert per_step == 1.0
    else:
        assert per_step >= 3.0
    # SHAC's own counters: skipped updates and the fraction of training steps bcg bundled.
    last = rows[-1]
    if algo.startswith("shac"):
        assert last["skipped_updates"] >= 0 and 0.0 <= last["bundled_fraction"] <= 1.0
        if algo == "shac_exact":
            assert last["bundled_fraction"] == 0.0
        # bcg's default bundle (B = 10 branches rolled H = 2 steps): 1 + 3 B per bundled step.
        bundled_cost = 31.0 if algo == "shac_bcg" else 3.0
        assert per_step == pytest.approx(3.0 + last["bundled_fraction"] * (bundled_cost - 3.0))
    else:
        assert math.isnan(last["skipped_updates"]) and math.isnan(last["bundled_fraction"])


@pytest.mark.parametrize("std", [1.0, 0.37])
def test_brax_ppo_init_noise_std_sets_the_initial_policy_std(std):
    """Brax's default tanh-normal policy ignores ``init_noise_std``; the config key selects
    the Gaussian policy whose initial std (action scale) is the value."""
    import jax

    networks = runners.brax_ppo_network_factory(std)(observation_size=5, action_size=3)
    params = networks.policy_network.init(jax.random.PRNGKey(0))
    logits = networks.policy_network.apply(None, params, jax.numpy.zeros((1, 5)))
    dist = networks.parametric_action_distribution.create_dist(logits)
    assert dist.scale.shape == (1, 3)
    assert np.allclose(dist.scale, std, rtol=1e-5)
    assert runners.brax_ppo_network_factory(None) is None
    with pytest.raises(ValueError, match="init_noise_std"):
        runners.brax_ppo_network_factory(-1.0)


@pytest.mark.integration  # ~1.5 min: a Brax PPO and a SHAC compile
def test_shac_runs_after_brax_ppo_in_one_process(tmp_path, monkeypatch):
    """Both learners share the cached JAX env; Brax PPO's sharded trainer is the first to use
    its MJX model, which must still be a plain concrete model for SHAC's programs (it used
    to carry Brax's ``"i"`` mesh axis: "Mesh for all inputs should be equal")."""
    monkeypatch.setattr(protocol, "EVAL_EPISODES", 2)
    cfg = protocol.load_config("BoxPush-v0")
    cfg["env_kwargs"] = {"physics_dt": 0.004}  # the default step, but an env no other test made
    cfg["brax_ppo"].update(num_envs=4, batch_size=4, num_minibatches=2, unroll_length=8)
    cfg["shac"].update(num_envs=4, horizon=8, actor_hidden=[16], critic_hidden=[16])
    for algo in ("brax_ppo", "shac_exact"):
        path = tmp_path / f"{algo}_seed0.csv"
        runners.RUNNERS[algo]("BoxPush-v0", 256, 0, cfg, 1, protocol.Recorder("BoxPush-v0", path), tmp_path / "ck")
        assert run_csv.is_complete(path, 256)
