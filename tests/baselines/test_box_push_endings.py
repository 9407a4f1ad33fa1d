"""``baselines.box_push_endings``: the endings table of a folder of comparison runs."""

from baselines import box_push_endings


def test_table_has_the_scripted_row_and_success_within_both_bars(tmp_path):
    text = box_push_endings.endings_table(tmp_path, steps=1000, episodes=3)  # no runs in tmp_path
    rows = [line for line in text.splitlines() if line.startswith("| scripted push")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[1:3] == ["1", "3"]
    within, aligned = (float(c.rstrip(" %")) for c in cells[4:6])
    success, interval = cells[6].split(" % ")
    low, high = (float(x) for x in interval.strip("[]").split(","))
    assert float(success) <= min(within, aligned)
    assert float(success) == 100.0  # the scripted push solves these episodes (tests/test_demo.py)
    assert low < 100.0 == high  # 3 episodes cannot pin the rate: the Wilson interval says so


def test_one_row_per_run_and_one_pooled_row_per_algorithm(tmp_path, monkeypatch):
    from baselines import final_scores
    from bcg_envs.envs.box_push import scripted

    runs = [
        ("shac_exact", 1, tmp_path / "a", 1000),
        ("shac_exact", 2, tmp_path / "b", 1000),
        ("sb3_ppo", 2, tmp_path / "c", 1000),
    ]
    monkeypatch.setattr(final_scores, "final_runs", lambda out, steps: runs)
    for algo in ("shac_exact", "sb3_ppo"):
        monkeypatch.setitem(final_scores.POLICIES, algo, lambda path: scripted.scripted_push)
    text = box_push_endings.endings_table(tmp_path, steps=1000, episodes=2)
    names = [line.strip("|").split("|")[0].strip() for line in text.splitlines() if line.startswith("| ")]
    assert names == [
        "policy",
        "scripted push",
        "shac_exact seed 1",
        "shac_exact seed 2",
        "shac_exact, pooled",
        "sb3_ppo seed 2",
    ]  # a single run's row names its seed
    pooled = [line for line in text.splitlines() if line.startswith("| shac_exact, pooled")][0]
    assert [c.strip() for c in pooled.strip("|").split("|")][1:3] == ["2", "4"]
