"""baselines/runners.py: the committed configs, the learners' own settings, each learner end to end on a tiny budget."""

import csv
import json
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
#: The columns a resumed run measures again: its clocks, and its count of resumes.
_CLOCKS = ("wall_clock", "cpu_time", "others_cpu_time", "cpus", "resumes")


class _Killed(Exception):
    """Stands for the process being killed while it records an evaluation."""


def _killed_at_row(recorder: protocol.Recorder, row: int) -> protocol.Recorder:
    """``recorder`` raising ``_Killed`` when it starts to measure its ``row``-th row (0-based)."""
    record, calls = recorder.record, []

    def killing(*args, **kwargs):
        calls.append(None)
        if len(calls) > row:
            raise _Killed
        return record(*args, **kwargs)

    recorder.record = killing
    return recorder


def _as_text(rows, drop=()):
    """Rows compared bit for bit (NaN counters of PPO compared as text)."""
    return [{k: repr(v) for k, v in r.items() if k not in drop} for r in rows]


@pytest.mark.integration
@pytest.mark.parametrize(
    "algo", [pytest.param(a, marks=pytest.mark.long) if a in _SLOW else a for a in protocol.ALGORITHMS]
)
def test_every_algorithm_runs_end_to_end(tmp_path, algo, monkeypatch):
    """Brax PPO takes the JAX env unchanged (``enable_brax`` aside); SHAC bcg is the demo's.
    Every row is scored by the shared protocol (here 3 episodes from ``EVAL_SEED``) and
    appended to the CSV as it is measured. SB3 PPO and SHAC are killed while they measure
    their fourth row and run again: they resume from the checkpoint of the row before it,
    keep the rows measured so far and record every evaluation exactly once; SHAC's resumed
    rows are the uninterrupted run's, bit for bit (clocks aside)."""
    monkeypatch.setattr(protocol, "EVAL_EPISODES", 3)
    cfg = protocol.load_config("BoxPush-v0")
    cfg["sb3_ppo"].update(n_envs=2, n_steps=16, batch_size=16, n_epochs=2)  # 32-step rollouts: 4 per evaluation
    cfg["brax_ppo"].update(num_envs=4, batch_size=4, num_minibatches=2, unroll_length=8, init_noise_std=0.37)
    cfg["shac"].update(num_envs=4, horizon=8, actor_hidden=[16], critic_hidden=[16])
    cfg["brax_apg"].update(num_envs=4, horizon_length=8)
    path, checkpoints = tmp_path / f"{algo}_seed0.csv", tmp_path / "checkpoints"
    evals = 4 if algo in _RESUMABLE else 1

    def recorder(csv_path):
        backend = protocol.training_backend(algo, {})
        return protocol.Recorder("BoxPush-v0", csv_path, budget=512, train_backend=backend)

    first: list = []
    if algo in _RESUMABLE:
        with pytest.raises(_Killed):
            runners.RUNNERS[algo]("BoxPush-v0", 512, 0, cfg, evals, _killed_at_row(recorder(path), 3), checkpoints)
        first = run_csv.read_rows(path)
        assert [r["env_steps"] for r in first] == [0, 128, 256] and (checkpoints / "run.json").exists()
    runners.RUNNERS[algo]("BoxPush-v0", 512, 0, cfg, evals, recorder(path), checkpoints)
    assert run_csv.is_complete(path, 512)
    with path.open() as f:
        parsed = list(csv.DictReader(f))
    assert parsed and tuple(parsed[0]) == run_csv.CSV_FIELDS
    rows = run_csv.read_rows(path)
    # resumed: the rows before the checkpoint are kept as they were
    assert _as_text(rows[: len(first)]) == _as_text(first)
    steps = [r["env_steps"] for r in rows]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    if algo in _RESUMABLE:
        assert steps == [0, 128, 256, 384, 512]
        assert [r["resumes"] for r in rows] == [0, 0, 0, 1, 1]
    else:
        assert {r["resumes"] for r in rows} == {0}
    if algo.startswith("shac"):
        whole = tmp_path / "uninterrupted.csv"
        runners.RUNNERS[algo]("BoxPush-v0", 512, 0, cfg, evals, recorder(whole), tmp_path / "uninterrupted")
        assert _as_text(rows, _CLOCKS) == _as_text(run_csv.read_rows(whole), _CLOCKS)
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


def _tiny_sb3(monkeypatch):
    """BoxPush with 32-step SB3 rollouts, evaluated on one episode."""
    monkeypatch.setattr(protocol, "EVAL_EPISODES", 1)
    cfg = protocol.load_config("BoxPush-v0")
    cfg["sb3_ppo"].update(n_envs=2, n_steps=16, batch_size=16, n_epochs=1)
    return cfg


def test_sb3_refuses_a_resume_under_other_settings_or_from_a_mismatched_pair(tmp_path, monkeypatch):
    """A checkpoint made for 256 env steps does not continue as a 512-step run (its
    learning-rate schedule and evaluation points are another run's), nor under another seed;
    a model whose statistics file is not the one saved with it (stopped between the two
    moves) is refused. Each refusal leaves the CSV as it was."""
    cfg = _tiny_sb3(monkeypatch)
    path, checkpoints = tmp_path / "sb3_ppo_seed0.csv", tmp_path / "ck"
    runners.run_sb3_ppo("BoxPush-v0", 256, 0, cfg, 2, protocol.Recorder("BoxPush-v0", path), checkpoints)
    assert [r["env_steps"] for r in run_csv.read_rows(path)] == [0, 128, 256]
    written = path.read_bytes()
    for steps, seed, message in ((512, 0, "budget 256 -> 512"), (256, 1, "seed 0 -> 1")):
        with pytest.raises(ValueError, match=f"other settings .*{message}.*delete .* to start the run afresh"):
            runners.run_sb3_ppo("BoxPush-v0", steps, seed, cfg, 2, protocol.Recorder("BoxPush-v0", path), checkpoints)
    other = dict(cfg, sb3_ppo={**cfg["sb3_ppo"], "learning_rate": 1e-3})
    with pytest.raises(ValueError, match=r"config\['sb3_ppo'\]\['learning_rate'\] 0.0003 -> 0.001"):
        runners.run_sb3_ppo("BoxPush-v0", 256, 0, other, 2, protocol.Recorder("BoxPush-v0", path), checkpoints)
    (checkpoints / "vecnormalize.pkl").write_bytes(b"another run's statistics")
    with pytest.raises(ValueError, match="not the pair its run.json records"):
        runners.run_sb3_ppo("BoxPush-v0", 256, 0, cfg, 2, protocol.Recorder("BoxPush-v0", path), checkpoints)
    assert path.read_bytes() == written and not list(checkpoints.glob("*.tmp"))


class _FakeShac:
    """``shac.train`` replaced by a recorder of its ``restore_from`` (no env, no compile)."""

    def __init__(self, monkeypatch):
        from bcg_envs.learners import shac

        self.restored = []
        monkeypatch.setattr(shac, "train", lambda env, restore_from=None, **kw: self.restored.append(restore_from))
        monkeypatch.setattr(runners, "jax_env_for", lambda env_id, estimator, cfg: None)


def _shac_checkpoint(checkpoint_dir, iteration, meta):
    """A checkpoint file with ``meta`` and no state (the runner reads only its metadata)."""
    import flax.serialization

    from bcg_envs.learners import shac

    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    payload = {"iteration": iteration, "meta": json.dumps(meta), "leaves": {}}
    shac.checkpoint_path(checkpoint_dir, iteration).write_bytes(flax.serialization.msgpack_serialize(payload))


def test_shac_resumes_only_its_own_run(tmp_path, monkeypatch):
    """SHAC's runner refuses a checkpoint made under other settings (``run.json``) or, for a
    checkpoint older than that file, another budget, seed or hyper-parameter in its
    metadata; it resumes one made under the same ones; an unfinished ``.tmp`` file alone is
    no checkpoint: the run starts afresh."""
    fake = _FakeShac(monkeypatch)
    cfg = {"shac": {"num_envs": 4, "horizon": 8, "actor_lr": 0.002, "actor_hidden": [16], "critic_hidden": [16]}}
    run = runners.RUNNERS["shac_exact"]
    path, checkpoints = tmp_path / "shac_exact_seed0.csv", tmp_path / "ck"
    checkpoints.mkdir()
    (checkpoints / "shac_00000002.msgpack.tmp").write_bytes(b"cut short")
    run("BoxPush-v0", 256, 0, cfg, 4, protocol.Recorder("BoxPush-v0", path), checkpoints)
    assert fake.restored == [None] and json.loads((checkpoints / "run.json").read_text())["budget"] == 256
    _shac_checkpoint(checkpoints, 2, {"num_steps": 64, "num_timesteps": 256, "seed": 0, "hyper": {"actor_lr": 0.002}})
    run_csv.write_csv(path, [dict(env_steps=0, wall_clock=1.0, cpu_time=1.0, others_cpu_time=0.0, eval_return=0.0)])
    run("BoxPush-v0", 256, 0, cfg, 4, protocol.Recorder("BoxPush-v0", path), checkpoints)
    assert fake.restored[-1] == checkpoints / "shac_00000002.msgpack"
    with pytest.raises(ValueError, match="budget 256 -> 512; evals 4 -> 2"):
        run("BoxPush-v0", 512, 0, cfg, 2, protocol.Recorder("BoxPush-v0", path), checkpoints)
    (checkpoints / "run.json").unlink()  # an older checkpoint: its metadata is checked
    lr = {"shac": {**cfg["shac"], "actor_lr": 0.005}}
    with pytest.raises(ValueError, match="actor_lr 0.002 -> 0.005; budget 256 -> 512; seed 0 -> 1"):
        run("BoxPush-v0", 512, 1, lr, 4, protocol.Recorder("BoxPush-v0", path), checkpoints)
    run("BoxPush-v0", 256, 0, cfg, 4, protocol.Recorder("BoxPush-v0", path), checkpoints)
    assert len(fake.restored) == 3


def test_shac_resumes_from_the_newest_checkpoint_whose_row_the_csv_holds(tmp_path, monkeypatch):
    """Older code saved a checkpoint before its evaluation row: stopped while recording the
    row at 128 env steps, the run holds a checkpoint there but no row. It resumes from the
    checkpoint at 64 and measures the row again (SHAC resumes exactly)."""
    fake = _FakeShac(monkeypatch)
    cfg = {"shac": {"num_envs": 4, "horizon": 8, "actor_hidden": [16], "critic_hidden": [16]}}
    path, checkpoints = tmp_path / "shac_exact_seed0.csv", tmp_path / "ck"
    for iteration in (2, 4):
        _shac_checkpoint(checkpoints, iteration, {"num_steps": 32 * iteration, "num_timesteps": 256, "seed": 0})
    row = dict(wall_clock=1.0, cpu_time=1.0, others_cpu_time=0.0, eval_return=0.0)
    run_csv.write_csv(path, [dict(row, env_steps=0), dict(row, env_steps=64)])
    runners.RUNNERS["shac_exact"]("BoxPush-v0", 256, 0, cfg, 4, protocol.Recorder("BoxPush-v0", path), checkpoints)
    assert fake.restored == [checkpoints / "shac_00000002.msgpack"]


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
