"""The results page's gradient-variance tables: the starts table puts the scripted starts
first and keeps sources apart; the gradient table shows one contact-options variant
across levels."""

from __future__ import annotations

from baselines import gradient_variance_tables


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
    monkeypatch.setattr(gradient_variance_tables, "RESULTS", tmp_path)
    lines = gradient_variance_tables.starts_table("sweep", "moreau", "300").splitlines()
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
    monkeypatch.setattr(gradient_variance_tables, "RESULTS", tmp_path)
    built = gradient_variance_tables.gradient_table("sweep", "penalty").splitlines()[2:]
    variant = gradient_variance_tables.gradient_table("sweep", "penalty", "baumgarte=0").splitlines()[2:]
    assert built == ["| 300 | 8 | — | — | 9.0e9 | 0.50 | — | — | — |"]
    assert variant == ["| 300 | 8 | — | — | 2 | 0.50 | — | — | — |", "| 30000 | 8 | — | — | 5 | 0.50 | — | — | — |"]


def test_gradients_at_float32s_range_are_not_shown_as_measurements(tmp_path, monkeypatch):
    """A zeroth-order block whose mean gradient norm reached float32's range (the backward
    pass zeroes overflowing steps there) reads "float32 overflow", not a ratio."""
    from baselines.gradient_variance_csv import append_rows

    ratio = dict(variance_ratio="2.0", ratio_lo="1.0", ratio_hi="3.0")
    rows = [_sweep_row("penalty", "", 300.0, 5.0, horizon=str(h), mean_grad_norm="10.0") for h in (8, 32, 64)]
    rows.append(_sweep_row("penalty", "", 300.0, 1e75, estimator="zeroth", mean_grad_norm="7.6e37", **ratio))
    rows.append(_sweep_row("penalty", "", 300.0, 50.0, estimator="bundle", mean_grad_norm="3.0", **ratio))
    append_rows(rows, tmp_path / "BoxPush-v0")
    monkeypatch.setattr(gradient_variance_tables, "RESULTS", tmp_path)
    lines = gradient_variance_tables.gradient_table("BoxPush-v0", "penalty").splitlines()
    assert lines[0].endswith("| bundle/exact H=64 | zeroth/exact H=64 |")
    assert lines[2].endswith("| 2 [1, 3] | float32 overflow |")
