"""The results page is what ``python -m baselines.report`` writes from the committed CSVs;
the prose's claims are guarded; the curves keep one colour per algorithm and a legend on
every panel; the page's own tables (runs, gradient variance) read their CSVs."""

from __future__ import annotations

import difflib

import pytest

from baselines import comparisons, protocol, report, run_csv, summary


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


def _sweep_row(model, options, level, variance, **fields):
    """One ``gradient_variance.csv`` row of 8 starts: exact at H=64 unless ``fields`` say
    otherwise, its variance interval collapsed to ``variance``."""
    from baselines.gradient_variance_csv import COLUMNS

    r = {c: "" for c in COLUMNS}
    r.update(
        env="BoxPush-v0",
        contact_model=model,
        contact_options=options,
        level=str(float(level)),
        estimator="exact",
        horizon="64",
        starts="8",
        variance=str(variance),
        variance_lo=str(variance),
        variance_hi=str(variance),
        cosine_to_reference="0.5",
        bundled_fraction="0",
    )
    r.update(fields)
    return r


def test_starts_table_puts_the_scripted_starts_first_and_keeps_sources_apart(tmp_path, monkeypatch):
    from baselines.gradient_variance_csv import append_rows
    from baselines.gradient_variance_starts import starts_tag

    def row(source, estimator, horizon, variance):
        return _sweep_row(
            "moreau",
            "",
            300.0,
            variance,
            estimator=estimator,
            horizon=str(horizon),
            starts_source=source,
            variance_ratio="0.5",
            ratio_lo="0.5",
            ratio_hi="0.5",
            bundled_fraction="0.1",
        )

    policy = "policy p.npz episodes (deterministic; seeds 0..), 2 steps before the first contact > 1 N"
    scripted = "scripted episodes (seeds 0..), 2 steps before the first contact > 1 N"
    rows = [row(policy, "exact", h, 7.0) for h in (8, 32, 64)] + [row(scripted, "exact", h, 3.0) for h in (8, 32, 64)]
    append_rows(rows, tmp_path / "sweep")
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    lines = report.starts_table("sweep", "moreau", "300").splitlines()
    assert lines[2].startswith("| scripted controller | 8 | 3 | 3 | 3 |")
    assert lines[3].startswith(f"| `{starts_tag(policy)}` | 8 | 7 | 7 | 7 |")
    assert len(lines) == 4


def test_gradient_table_shows_one_contact_options_variant_across_levels(tmp_path, monkeypatch):
    from baselines.gradient_variance_csv import append_rows

    def row(options, level, variance):
        return _sweep_row("penalty", options, level, variance)

    append_rows(
        [row("", 300.0, 9e9), row("baumgarte=0", 300.0, 2.0), row("baumgarte=0", 30000.0, 5.0)], tmp_path / "sweep"
    )
    monkeypatch.setattr(report, "RESULTS", tmp_path)
    built = report.gradient_table("sweep", "penalty").splitlines()[2:]
    variant = report.gradient_table("sweep", "penalty", "baumgarte=0").splitlines()[2:]
    assert built == ["| 300 | 8 | — | — | 9.0e9 | 0.50 | — | — | — |"]
    assert variant == ["| 300 | 8 | — | — | 2 | 0.50 | — | — | — |", "| 30000 | 8 | — | — | 5 | 0.50 | — | — | — |"]
