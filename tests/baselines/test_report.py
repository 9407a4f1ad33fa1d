"""The results page is what ``python -m baselines.report`` writes from the committed CSVs;
the prose's claims are guarded; the curves keep one colour per algorithm and a legend on
every panel; the table of runs lists the complete ones with their counters."""

from __future__ import annotations

import csv
import difflib
import json
import re

import pytest

from baselines import comparisons, final_scores, protocol, report, run_csv, summary
from baselines.seed_stats import final_values, seed_text


def test_results_page_is_fresh():
    """baselines/results/README.md equals the generator's output (tables only: no figures
    are drawn). On failure: run ``python -m baselines.report``."""
    expected = report.build(figures=False)
    current = report.PAGE.read_text()
    if current != expected:
        diff = "\n".join(
            list(
                difflib.unified_diff(current.splitlines(), expected.splitlines(), "README.md", "generated", lineterm="")
            )[:40]
        )
        pytest.fail(f"baselines/results/README.md is stale; run `python -m baselines.report`:\n{diff}")


def test_contents_link_each_section_by_githubs_anchor():
    """GitHub's anchors: punctuation but ``-``/``_`` dropped, spaces as ``-``, a repeated
    heading suffixed; a ``#`` line in a code block is not a heading."""
    text = (
        "# Page\n\n{{contents}}\n\n## Finals: the learner's grid, 2,097,152 env steps\n\n"
        "```bash\n# a comment\n```\n\n### kappa 300\n\n### `moreau` at kappa_50 (in progress)\n\n"
        "## G1Jump-v0\n\n### kappa 300\n"
    )
    page = report.Page().render(text)
    assert (
        "* [Finals: the learner's grid, 2,097,152 env steps](#finals-the-learners-grid-2097152-env-steps): "
        "[kappa 300](#kappa-300); [`moreau` at kappa_50 (in progress)](#moreau-at-kappa_50-in-progress)\n"
        "* [G1Jump-v0](#g1jump-v0): [kappa 300](#kappa-300-1)\n"
    ) in page
    assert "a-comment" not in page


def test_every_link_within_the_results_page_names_one_of_its_headings():
    page = report.PAGE.read_text()
    anchors = {anchor for _, _, anchor in report.heading_anchors(page)}
    links = re.findall(r"\]\(#([^)]+)\)", page)
    assert len(links) > 20
    assert set(links) <= anchors, sorted(set(links) - anchors)


def test_check_mode_reports_a_stale_page(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(report, "build", lambda figures=False: "# Baseline results, generated\n")
    stale = tmp_path / "README.md"
    stale.write_text("# Baseline results\n")
    assert report.main(["--check", "--out", str(stale)]) == 1
    assert "stale" in capsys.readouterr().out


def test_a_false_claim_stops_the_page():
    """``ahead`` refuses a claim the seed-level intervals do not support; unknown
    placeholders are errors, not text."""
    page = report.Page()
    assert "ahead at seed level" in page.render("{{ahead:BoxPush-v0/long:success:shac_exact:sb3_ppo}}")
    with pytest.raises(ValueError, match="do not show it"):
        page.render("{{ahead:BoxPush-v0/long:success:sb3_ppo:shac_exact}}")
    with pytest.raises(ValueError, match="unknown placeholder"):
        page.render("{{nonsense:BoxPush-v0/long}}")


def test_a_learner_can_be_compared_with_one_from_another_comparison():
    """``ALGO@DIR`` takes that learner's seeds from comparison DIR: here SHAC exact's 4M
    runs against its own 2M runs, each cut at its own command's budget."""
    page = report.Page()
    text = page.render("{{apart:BoxPush-v0/long:success:shac_exact:shac_exact@BoxPush-v0/long_4m}}")
    long, long_4m = (
        final_values(page.seeds(key, "shac_exact"), "eval_success") for key in ("BoxPush-v0/long", "BoxPush-v0/long_4m")
    )
    assert f"shac_exact@BoxPush-v0/long_4m {seed_text(long_4m, True)}" in text
    assert f"(shac_exact {seed_text(long, True)} vs" in text
    with pytest.raises(KeyError, match="no runs of 'nobody'"):
        page.render("{{apart:BoxPush-v0/long:success:shac_exact:nobody@BoxPush-v0/long_4m}}")


def test_curves_keep_one_colour_per_algorithm_and_a_legend_per_panel(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    assert set(protocol.ALGORITHMS) <= set(summary.ALGORITHM_COLORS)
    assert len(set(summary.ALGORITHM_COLORS.values())) == len(summary.ALGORITHM_COLORS)
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)

    def run(returns):
        return [
            dict(
                env_steps=s,
                sim_steps=3.0 * s,
                wall_clock=s / 100,
                eval_return=r,
                eval_success=r / 10,
                eval_length=200.0,
                eval_episodes=64,
            )
            for s, r in zip((0, 1000, 2000), returns)
        ]

    runs = {"shac_bcg": [run((1, 3, 5)), run((1, 4, 6))], "sb3_ppo": [run((1, 2, 3))]}
    summary.plot_curves(
        runs, tmp_path / "curves.png", budget=2000, references={"do nothing": (2.0, 0.0), "scripted push": (7.0, 1.0)}
    )
    assert (tmp_path / "curves.png").exists()
    (fig,) = figures
    for ax in fig.axes:
        labels = ax.get_legend_handles_labels()[1]
        assert ax.get_legend() is not None
        assert any(label.startswith("do nothing") for label in labels)
        for line in ax.get_lines():
            for algo in runs:
                if line.get_label().startswith(algo):
                    assert matplotlib.colors.same_color(line.get_color(), summary.ALGORITHM_COLORS[algo])


def test_run_table_lists_complete_runs_with_their_counters(tmp_path, monkeypatch):
    """One row per run that reached its budget, by algorithm and seed; SHAC's skipped
    updates and bundled fraction at the budget; "—" for PPO's missing counters."""
    key = "BoxPush-v0/fake"
    comparison = comparisons.Comparison(key, "BoxPush-v0", 4096, 2, "true")
    monkeypatch.setattr(comparisons, "RESULTS", tmp_path)
    monkeypatch.setitem(comparisons.COMPARISONS, key, comparison)
    budget = comparison.budgets()["shac_exact"]

    def write(name, rows):
        path = tmp_path / key / f"{name}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [",".join(run_csv.CSV_FIELDS)]
        lines += [",".join(str(r.get(f, "nan")) for f in run_csv.CSV_FIELDS) for r in rows]
        path.write_text("\n".join(lines) + "\n")

    base = dict(sim_steps=0, wall_clock=1.0, eval_length=200, eval_episodes=64)
    write(
        "shac_exact_seed10",
        [
            dict(base, env_steps=0, eval_return=200.0, eval_success=0.0, skipped_updates=0, bundled_fraction=0.0),
            dict(
                base, env_steps=budget, eval_return=250.0, eval_success=0.25, skipped_updates=3, bundled_fraction=0.04
            ),
            dict(
                base, env_steps=2 * budget, eval_return=999.0, eval_success=1.0, skipped_updates=9, bundled_fraction=0.5
            ),
        ],
    )
    write("shac_exact_seed2", [dict(base, env_steps=budget // 2, eval_return=1.0, eval_success=0.0)])
    write("sb3_ppo_seed0", [dict(base, env_steps=comparison.budgets()["sb3_ppo"], eval_return=260.0, eval_success=0.5)])

    table = report.Page().run_table(key).splitlines()
    assert table[2:] == [
        "| sb3_ppo | 0 | 50.0 | 260.0 | — | — |",
        "| shac_exact | 10 | 25.0 | 250.0 | 3 | 4.0 |",
    ]

    # With final_scores.csv: each scored run's falls and tracking error, MJX then MuJoCo C;
    # a score at another budget does not count.
    score = dict(algo="shac_exact", seed=10, env_steps=budget, episodes=8)
    score.update(falls=2, falls_mjx=0, tracking_error_cm=12.26, tracking_error_cm_mjx=3.5)
    score.update(tracking_error_cm_no_fall=14.04, tracking_error_cm_no_fall_mjx=3.5)
    score.update(success_rate=0.5, success_rate_mjx=0.5, completed=6, completed_mjx=8)
    score.update(joint_error_rad=0.1, joint_error_rad_mjx=0.1)
    stale = dict(score, algo="sb3_ppo", seed=0, env_steps=budget // 2)
    with (tmp_path / key / "final_scores.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=final_scores.COLUMNS)
        writer.writeheader()
        writer.writerows([score, stale])
    table = report.Page().run_table(key).splitlines()
    assert table[0].endswith(
        "| falls per episode, MJX / MuJoCo C | tracking error without a fall (cm), MJX / MuJoCo C |"
    )
    assert table[2:] == [
        "| sb3_ppo | 0 | 50.0 | 260.0 | — | — | — | — |",
        "| shac_exact | 10 | 25.0 | 250.0 | 3 | 4.0 | 0.00 / 0.25 | 3.5 / 14.0 |",
    ]


def test_reference_levels_follow_the_physics_asked_for():
    """``ref`` reads a level under the default physics, ``ref_of`` under a comparison's
    (here the authors' contact model): each the row of references.csv for that physics."""
    page = report.Page()
    # The row read straight from the CSV, for the physics written out here (the config's).
    with comparisons.RESULTS.joinpath("references.csv").open() as f:
        row = next(
            r
            for r in csv.DictReader(f)
            if r["env"] == "BoxPush-v0"
            and json.loads(r["env_kwargs"]) == {"contact_model": "moreau", "kappa": 300.0}
            and r["policy"].startswith("scripted")
        )
    ret, success = float(row["eval_return"]), float(row["eval_success"])
    assert page.render("{{ref_of:BoxPush-v0/moreau_k300:scripted}}").endswith(
        f"{ret:.1f} ({100 * success:.1f} % success)\n"
    )
    assert page.render("{{ref_of:BoxPush-v0/moreau_k300:scripted}}") != page.render("{{ref:BoxPush-v0:scripted}}")
    with pytest.raises(KeyError, match="no reference"):
        page.render("{{ref_of:BoxPush-v0/moreau_k300:nonsense}}")
