"""baselines/summary.py: the table, its success levels and gap, and the curves figure on synthetic CSVs."""

import pytest

from baselines import run_csv, seed_stats, summary


def _write(path, rows):
    run_csv.write_csv(path, [dict(env_steps=s, wall_clock=w, eval_return=r) for s, w, r in rows])


def test_summary_table_from_synthetic_csv(tmp_path):
    _write(tmp_path / "sb3_ppo_seed0.csv", [(0, 0, -10), (1000, 5, 0), (2000, 10, 10)])
    _write(tmp_path / "sb3_ppo_seed1.csv", [(0, 0, -10), (1000, 6, 2), (2000, 12, 10)])
    _write(tmp_path / "shac_bcg_seed0.csv", [(0, 0, -10), (500, 20, 9), (1000, 40, 12)])
    runs = run_csv.read_runs(tmp_path)
    table = summary.summary_table(runs)
    lines = table.splitlines()
    assert lines[0] == (
        "| algorithm | seeds | final return | final success [95% CI] | episode length "
        "| env steps to 90% of PPO | env steps to 50% of best success "
        "| env steps to 90% of best success | simulated steps | wall-clock (s) "
        "| wall-clock to 50% / 90% of best success (s) | CPU time (s) |"
    )
    # target = -10 + 0.9 * (10 - -10) = 8: PPO reaches it at 2000 steps, SHAC at 500.
    # These CSVs predate the success, simulated-steps and CPU columns: '—', and their
    # wall-clock is not known to be a timing.
    assert (
        "| sb3_ppo | 2 | 10.00 ± 0.00 | — | — | 2,000 (2/2) | — (no success) | — (no success) | — | 11 (shared) "
        "| — / — | — |"
    ) in lines
    assert (
        "| shac_bcg | 1 | 12.00 ± 0.00 | — | — | 500 (1/1) | — (no success) | — (no success) | — | 40 (shared) "
        "| — / — | — |"
    ) in lines
    summary.plot_curves(runs, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_summary_table_reports_success_with_a_wilson_interval(tmp_path):
    from bcg_envs.stats import wilson_interval

    for seed, final in enumerate((0.5, 0.75)):
        run_csv.write_csv(
            tmp_path / f"sb3_ppo_seed{seed}.csv",
            [
                dict(env_steps=0, wall_clock=0, eval_return=-5, eval_success=0.0, eval_length=200, eval_episodes=16),
                dict(env_steps=100, wall_clock=1, eval_return=5, eval_success=final, eval_length=150, eval_episodes=16),
            ],
        )
    runs = run_csv.read_runs(tmp_path)
    table = summary.summary_table(runs)
    low, high = wilson_interval(20, 32)  # 8 + 12 of 2 x 16 episodes
    assert f"| 62.5 % [{100 * low:.1f}, {100 * high:.1f}] | 150 |" in table
    summary.plot_curves(runs, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_the_gap_in_env_steps_to_the_best_success(tmp_path):
    """Best success 0.8 (SHAC's seed mean at 2,000 steps): 50 % of it is 0.4, 90 % is 0.72.
    PPO's seeds reach 0.4 at 20k and 40k (median 30k) and one reaches 0.72 at 40k; SHAC's
    both reach 0.4 at 1k and 0.72 at 2k. The table gives each learner's median over the
    seeds that reach a level with their count; the gap counts every seed (a miss as
    inf), so at 90 % PPO's median seed never gets there: not 40k / 2k = 20x."""

    def rows(points, sims_per_step):
        return [
            dict(
                env_steps=s,
                sim_steps=sims_per_step * s,
                wall_clock=s / 100,
                eval_return=0.0,
                eval_success=p,
                eval_length=200,
                eval_episodes=64,
            )
            for s, p in points
        ]

    run_csv.write_csv(tmp_path / "sb3_ppo_seed0.csv", rows([(0, 0), (20_000, 0.5), (40_000, 0.75)], 1))
    run_csv.write_csv(tmp_path / "sb3_ppo_seed1.csv", rows([(0, 0), (20_000, 0.1), (40_000, 0.45)], 1))
    run_csv.write_csv(tmp_path / "shac_bcg_seed0.csv", rows([(0, 0), (1_000, 0.5), (2_000, 0.8)], 3.5))
    run_csv.write_csv(tmp_path / "shac_bcg_seed1.csv", rows([(0, 0), (1_000, 0.4), (2_000, 0.8)], 3.5))
    runs = run_csv.read_runs(tmp_path)
    assert summary.best_success(runs) == pytest.approx(0.8)
    table = summary.summary_table(runs)
    assert "| 30,000 (2/2) | 40,000 (1/2) | 40,000 | 400 (shared) | — / — | — |" in table
    assert "| 1,000 (2/2) | 2,000 (2/2) | 7,000 | 20 (shared) | — / — | — |" in table
    gap = seed_stats.gap_table(runs).splitlines()
    assert gap[2].startswith("| sb3_ppo | shac_bcg | 50 % of 80.0 % | 30.0x [")
    assert gap[3].startswith("| sb3_ppo | shac_bcg | 90 % of 80.0 % | ∞ [")
    summary.plot_curves(runs, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_steps_to_reach_is_none_when_never_reached():
    rows = [dict(env_steps=1, wall_clock=0, eval_return=0.0)]
    assert summary.steps_to_reach(rows, 1.0) is None


def test_wall_clock_to_a_level_says_how_many_seeds_reach_it(tmp_path):
    """Two runs alone on their CPUs: both reach 50 % of the best success, one reaches 90 %;
    the wall-clock cell is that seed's time with "(1/2)", as the env-steps cell is."""

    def rows(points):
        return [
            dict(
                env_steps=s,
                sim_steps=s,
                wall_clock=s / 100,
                eval_return=0.0,
                eval_success=p,
                eval_length=200,
                eval_episodes=64,
                cpu_time=s / 100,
                others_cpu_time=0.0,
                cpus=1,
            )
            for s, p in points
        ]

    run_csv.write_csv(tmp_path / "sb3_ppo_seed0.csv", rows([(0, 0), (10_000, 0.6), (20_000, 1.0)]))
    run_csv.write_csv(tmp_path / "sb3_ppo_seed1.csv", rows([(0, 0), (10_000, 0.6), (20_000, 0.6)]))
    table = summary.summary_table(run_csv.read_runs(tmp_path))
    assert "| 10,000 (2/2) | 20,000 (1/2) | 20,000 | 200 | 100 / 200 (1/2) | 200 |" in table
