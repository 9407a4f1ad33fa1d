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
