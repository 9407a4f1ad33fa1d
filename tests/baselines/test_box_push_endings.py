"""``baselines.box_push_endings``: the endings table of a folder of comparison runs."""

from baselines import box_push_endings


def test_table_has_the_scripted_row_and_success_within_both_bars(tmp_path):
    text = box_push_endings.endings_table(tmp_path, steps=1000, episodes=3)  # no runs in tmp_path
    rows = [line for line in text.splitlines() if line.startswith("| scripted push")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[1:3] == ["1", "3"]
    within, aligned, success = (float(c.rstrip(" %")) for c in cells[4:7])
    assert success <= min(within, aligned)
    assert success == 100.0  # the scripted push solves these episodes (tests/test_demo.py)
