"""The run clocks: others' CPU time on a run's CPUs, and when a wall-clock is a timing."""

import math
from pathlib import Path

import pytest

from baselines import cpu_clock, run_csv, summary


def test_contention_is_others_share_of_the_run_cpus():
    assert cpu_clock.contention(dict(wall_clock=100.0, others_cpu_time=50.0, cpus=2)) == 0.25
    assert math.isnan(cpu_clock.contention(dict(wall_clock=100.0)))  # a CSV from before the clocks
    assert math.isnan(cpu_clock.contention(dict(wall_clock=0.0, others_cpu_time=0.0, cpus=1)))


def test_wall_clock_is_a_timing_only_for_runs_that_ran_alone(tmp_path):
    def run(name, others):
        rows = [
            dict(
                env_steps=2 * wall,
                wall_clock=float(wall),
                eval_return=float(wall > 0),
                eval_success=float(wall > 0),
                eval_episodes=64,
                cpu_time=0.96 * wall,
                others_cpu_time=others * wall,
                cpus=1,
            )
            for wall in (0, 50, 100)
        ]
        run_csv.write_csv(tmp_path / name, rows)

    run("shac_exact_seed0.csv", 0.01)
    run("sb3_ppo_seed0.csv", 0.5)
    runs = run_csv.read_runs(tmp_path)
    assert cpu_clock.ran_alone(runs["shac_exact"]) and not cpu_clock.ran_alone(runs["sb3_ppo"])
    lines = summary.summary_table(runs).splitlines()
    shac = next(line for line in lines if line.startswith("| shac_exact"))
    ppo = next(line for line in lines if line.startswith("| sb3_ppo"))
    assert shac.endswith("| 100 | 50 / 50 | 96 |")
    assert ppo.endswith("| 100 (shared) | — / — | 96 |")


def test_a_resumed_run_is_no_timing():
    """A resumed run's clocks count a second start-up and its ``cpus`` is the last
    process's: not a timing, however little others took. A CSV without the count is judged
    by contention alone."""
    alone = dict(wall_clock=100.0, others_cpu_time=1.0, cpus=1)
    assert cpu_clock.ran_alone([[dict(alone, resumes=0)]]) and cpu_clock.ran_alone([[alone]])
    assert cpu_clock.ran_alone([[dict(alone, resumes=math.nan)]])
    assert not cpu_clock.ran_alone([[dict(alone, resumes=0)], [dict(alone, resumes=1)]])
    assert cpu_clock.resumed(dict(resumes=2)) and not cpu_clock.resumed({})


def test_busy_cpu_seconds_reads_the_machine_clock():
    """Every process's CPU time on the CPUs this one may use, from /proc/stat: finite and
    not decreasing on Linux."""
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat")
    cpus = cpu_clock.CpuMeter().cpus
    first = cpu_clock.busy_cpu_seconds(cpus)
    sum(i * i for i in range(200_000))
    assert math.isfinite(first) and cpu_clock.busy_cpu_seconds(cpus) >= first > 0
