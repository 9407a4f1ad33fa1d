"""Seed-level statistics: the bootstrap interval over seeds is deterministic and covers the
truth; rliable's aggregates match a hand computation; the simulators and gap tables state
each learner's scores and PPO's steps over SHAC's."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines import seed_stats


def test_seed_interval_is_deterministic_and_brackets_the_mean():
    values = [0.34, 0.48, 0.27]
    first = seed_stats.seed_interval(values)
    assert seed_stats.seed_interval(values) == first
    mean, low, high = first
    assert mean == pytest.approx(np.mean(values))
    assert min(values) <= low <= mean <= high <= max(values)


def test_seed_interval_covers_the_true_mean():
    """Synthetic seeds from a known distribution: the 95 % interval covers the true mean in
    most of 200 experiments (a percentile bootstrap over 10 seeds undercovers a little) and
    narrows with more seeds."""
    rng = np.random.default_rng(1)
    truth, spread = 0.4, 0.1
    hits = 0
    for _ in range(200):
        _, low, high = seed_stats.seed_interval(rng.normal(truth, spread, size=10), resamples=2000)
        hits += low <= truth <= high
    assert 0.85 <= hits / 200 <= 0.99

    def width(n: int) -> float:
        _, low, high = seed_stats.seed_interval(rng.normal(truth, spread, size=n), resamples=2000)
        return high - low

    assert np.mean([width(40) for _ in range(20)]) < 0.5 * np.mean([width(5) for _ in range(20)])


def test_seed_interval_needs_two_seeds_and_finite_values():
    mean, low, high = seed_stats.seed_interval([0.5])
    assert mean == 0.5 and math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError):
        seed_stats.seed_interval([])
    with pytest.raises(ValueError):
        seed_stats.seed_interval([0.5, float("nan")])


def test_apart_is_disjoint_seed_intervals():
    assert seed_stats.apart([0.30, 0.35, 0.40], [0.01, 0.02, 0.0])
    assert not seed_stats.apart([0.30, 0.35, 0.40], [0.20, 0.38, 0.25])


def test_apart_refuses_fewer_than_three_seeds():
    """Two seeds' interval is their range: two learners could be called apart on 2 + 2 runs."""
    with pytest.raises(ValueError, match="3 seeds per learner, got 2 and 3"):
        seed_stats.apart([0.30, 0.40], [0.01, 0.02, 0.0])


def test_apart_at_three_seeds_is_every_seed_above_every_seed():
    """At three seeds the percentile interval is the seeds' range, so the rule's false-claim
    rate for one named learner between two identical distributions is 1 / C(6, 3) = 1/20."""
    rng = np.random.default_rng(1)
    draws = rng.normal(size=(400, 6))
    ahead = [seed_stats.apart(d[:3], d[3:]) and d[:3].min() > d[3:].max() for d in draws]
    every_above = [d[:3].min() > d[3:].max() for d in draws]
    assert ahead == every_above
    assert abs(np.mean(every_above) - 1 / 20) < 0.03


def _runs_with_final_success(values_per_algo):
    return {
        algo: [[{"eval_success": v, "eval_return": 0.0, "eval_episodes": 64}] for v in values]
        for algo, values in values_per_algo.items()
    }


def test_rliable_iqm_and_probability_of_improvement_match_hand_computation():
    """The table's point estimates equal an interquartile mean from scipy and a
    probability of improvement counted pair by pair (ties half); intervals bracket them."""
    from scipy import stats

    ppo = [0.0, 0.1, 0.1, 0.3, 0.9]
    shac = [0.2, 0.1, 0.5, 0.6, 0.7, 0.4, 0.0, 0.8]
    text = seed_stats.rliable_table(_runs_with_final_success({"sb3_ppo": ppo, "shac_exact": shac}))
    rows = {line.split("|")[1].strip(): line.split("|")[2:-1] for line in text.splitlines() if line.startswith("| ")}
    for algo, values in (("sb3_ppo", ppo), ("shac_exact", shac)):
        estimate = rows[algo][1].strip()
        point = float(estimate.split(" %")[0])
        low, high = (float(v) for v in estimate.split("[")[1].rstrip("]").split(","))
        assert point == pytest.approx(100 * stats.trim_mean(values, 0.25), abs=0.051)
        assert low <= point <= high
    wins = sum((s > p) + 0.5 * (s == p) for s in shac for p in ppo) / (len(shac) * len(ppo))
    cell = rows["P(shac_exact > sb3_ppo)"][0].strip()
    assert float(cell.split(" ")[0]) == pytest.approx(wins, abs=0.005)
    low, high = (float(v) for v in cell.split("[")[1].rstrip("]").split(","))
    assert low <= wins <= high and high - low > 0.1


def test_rliable_table_is_deterministic():
    runs = _runs_with_final_success({"brax_ppo": [0.1, 0.2, 0.0], "shac_bcg": [0.3, 0.5, 0.2]})
    assert seed_stats.rliable_table(runs) == seed_stats.rliable_table(runs)


def test_a_rliable_row_depends_only_on_its_own_scores():
    """A learner's interval is the same whether or not other learners' rows come first."""
    shac = [0.3, 0.5, 0.2, 0.4, 0.35]
    alone = seed_stats.rliable_table(_runs_with_final_success({"shac_bcg": shac, "brax_ppo": [0.1, 0.2, 0.0]}))
    after = seed_stats.rliable_table(
        _runs_with_final_success({"sb3_ppo": [0.6, 0.1, 0.9, 0.3], "shac_bcg": shac, "brax_ppo": [0.1, 0.2, 0.0]})
    )

    def row(text, name):
        return next(line for line in text.splitlines() if line.startswith(f"| {name} |"))

    assert row(alone, "shac_bcg") == row(after, "shac_bcg")
    assert row(alone, "P(shac_bcg > brax_ppo)") == row(after, "P(shac_bcg > brax_ppo)")


def test_simulators_table_gives_each_learner_its_own_simulator_beside_the_protocol():
    def run(success, own):
        rows = [
            dict(env_steps=0, eval_return=0.0, eval_success=0.0, train_sim_return=math.nan, train_sim_success=math.nan)
        ]
        rows.append(
            dict(
                env_steps=100,
                eval_return=100 * success,
                eval_success=success,
                train_sim_return=100 * own,
                train_sim_success=own,
            )
        )
        return rows

    runs = {
        "sb3_ppo": [run(0.5, math.nan), run(0.25, math.nan)],
        "shac_exact": [run(0.5, 0.75), run(0.5, 0.75)],
        "brax_ppo": [run(0.5, math.nan)],
    }
    lines = seed_stats.simulators_table(runs, {}).splitlines()
    assert lines[0].startswith(
        "| algorithm | seeds | trains in | final success, MuJoCo C | final success, own simulator"
    )
    assert lines[2].startswith("| sb3_ppo | 2 | MuJoCo C | 37.5 % [25.0, 50.0] | same |")
    assert (
        lines[3]
        == "| shac_exact | 2 | MJX | 50.0 % [50.0, 50.0] | 75.0 % [75.0, 75.0] | 50.0 [50.0, 50.0] | 75.0 [75.0, 75.0] |"
    )
    assert lines[4] == "| brax_ppo | 1 | MJX | 50.0 % (one seed) | — | 50.0 (one seed) | — |"


def test_ratio_interval_of_medians_over_seeds():
    same = seed_stats.ratio_interval(np.full(5, 100.0), np.full(5, 10.0))
    assert same == (10.0, 10.0, 10.0)
    point, low, high = seed_stats.ratio_interval(np.array([100.0, 200.0, 300.0]), np.array([10.0, 20.0, 30.0]))
    assert point == 10.0 and 100 / 30 <= low <= point <= high <= 300 / 10
    assert seed_stats.ratio_interval(np.array([100.0, 200.0, 300.0]), np.array([10.0, 20.0, 30.0])) == (
        point,
        low,
        high,
    )
    never = seed_stats.ratio_interval(np.array([100.0, math.inf, math.inf]), np.array([10.0, 10.0, 10.0]))
    assert math.isinf(never[0]) and never[1] == 10.0 and math.isinf(never[2])
    assert seed_stats.ratio_interval(np.array([100.0]), np.array([math.inf])) == (0.0, 0.0, 0.0)
    assert math.isnan(seed_stats.ratio_interval(np.array([math.inf]), np.array([math.inf]))[0])
    # A level held from the first evaluation (0 env steps): no ratio, either way round.
    assert all(math.isnan(v) for v in seed_stats.ratio_interval(np.zeros(3), np.full(3, 10.0)))
    assert all(math.isnan(v) for v in seed_stats.ratio_interval(np.full(3, 10.0), np.zeros(3)))


def test_gap_table_states_the_ratio_in_env_steps_and_wall_clock_only_for_runs_alone():
    def run(steps_to_half, alone):
        rows = []
        for step in (0, 100, 200, 300):
            rows.append(
                dict(
                    env_steps=step,
                    wall_clock=step / 10,
                    eval_success=1.0 if step >= steps_to_half else 0.0,
                    others_cpu_time=0.0 if alone else step,
                    cpus=1,
                )
            )
        return rows

    runs = {"sb3_ppo": [run(300, True)] * 3, "shac_exact": [run(100, True)] * 3}
    lines = seed_stats.gap_table(runs).splitlines()
    assert lines[2] == "| sb3_ppo | shac_exact | 50 % of 100.0 % | 3.0x [3.0, 3.0] | 3.0x [3.0, 3.0] |"
    runs["shac_exact"] = [run(100, False)] * 3
    assert seed_stats.gap_table(runs).splitlines()[2].endswith("| 3.0x [3.0, 3.0] | — (runs shared their CPUs) |")
    # A learner with one seed has no interval: its pairs are left out, its success still
    # sets the level.
    runs["shac_bcg"] = [run(0, True)]
    lines = seed_stats.gap_table(runs).splitlines()
    assert not any("shac_bcg" in line for line in lines)
    assert lines[2].startswith("| sb3_ppo | shac_exact | 50 % of 100.0 % |")
    assert "no gap" in seed_stats.gap_table({"sb3_ppo": [run(300, True)], "shac_exact": [run(100, True)] * 3})
    # PPO's untrained policy already at the level: no ratio is stated.
    lines = seed_stats.gap_table({"sb3_ppo": [run(0, True)] * 3, "shac_exact": [run(100, True)] * 3}).splitlines()
    assert lines[2].endswith(
        "| — (a median seed is at the level from the first evaluation) | — (a median seed is at the level from the first evaluation) |"
    )


def test_success_trend_compares_the_last_evaluation_with_an_earlier_one():
    def run(successes):
        return [{"env_steps": 100 * i, "eval_success": x} for i, x in enumerate(successes)]

    rising = [run([0.0, 0.1, 0.2, 0.3]), run([0.0, 0.0, 0.1, 0.2])]
    text = seed_stats.success_trend(rising, 2)
    assert text.startswith("still rising") and "25.0 %" in text and "5.0 %" in text
    flat = [run([0.0, 0.3, 0.2, 0.3]), run([0.0, 0.2, 0.1, 0.2])]
    assert seed_stats.success_trend(flat, 2).startswith("not rising")  # equal is not rising
    with pytest.raises(ValueError, match="window"):
        seed_stats.success_trend(rising, 4)
    # Each seed's own last evaluation: one seed a row longer is refused, not read at the
    # shorter seed's last index.
    with pytest.raises(ValueError, match="no common schedule"):
        seed_stats.success_trend([run([0.0, 0.0, 0.3, 0.3, 0.3, 0.3]), run([0.0, 0.0, 0.3, 0.3, 0.3, 0.3, 0.0])], 4)
