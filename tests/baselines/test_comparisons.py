"""The registry of committed comparisons: every command names its directory and budget, and
a comparison with one config per learner budgets only the learners that have one."""

from __future__ import annotations

from baselines import comparisons, protocol


def test_every_command_names_its_directory_and_budget():
    for key, c in comparisons.COMPARISONS.items():
        assert f"baselines/results/{key}" in c.command, key
        assert f"--steps {c.steps}" in c.command, key
        assert f"--evals {c.evals}" in c.command, key
        if c.config:  # a config per learner is named through the command's loop variable
            assert c.config.replace("{algo}", "$algo") in c.command, key
        assert c.path.is_dir(), key


def test_a_comparison_with_one_config_per_learner_budgets_the_learners_that_have_one():
    """The finals: ``config`` names one file per learner (``{algo}``); a learner without a
    file has no budget, and every budget is the command's, rounded to the learner's batch."""
    finals = comparisons.Comparison(
        "BoxPush-v0/finals", "BoxPush-v0", 2_097_152, 32, "", "baselines/configs/finals/BoxPush-v0.{algo}.json"
    )
    budgets = finals.budgets()
    have = {a for a in protocol.ALGORITHMS if (comparisons.ROOT / finals.config.format(algo=a)).exists()}
    assert set(budgets) == have and {"sb3_ppo", "brax_ppo"} <= have
    assert all(abs(n - 2_097_152) <= 0.1 * 2_097_152 for n in budgets.values())
    assert finals.env_kwargs() == {}
