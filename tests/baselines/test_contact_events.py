"""baselines/contact_events.py: the measurement behind BoxPush's bcg threshold."""

import csv

from baselines import contact_events


def test_box_push_strikes_are_bundled_and_pushing_is_not(tmp_path):
    out = tmp_path / "events.csv"
    contact_events.main(["--env", "BoxPush-v0", "--episodes", "2", "--out", str(out)])
    rows = {(r["policy"], r["group"]): r for r in csv.DictReader(open(out))}
    assert set(rows) == {(p, g) for p in ("scripted", "random") for g in ("onset", "sustained")}
    strikes, pushing = rows[("scripted", "onset")], rows[("scripted", "sustained")]
    assert int(strikes["steps"]) > 0 and int(pushing["steps"]) > int(strikes["steps"])
    threshold = float(strikes["threshold"])
    assert float(strikes["force_p50"]) > threshold > float(pushing["force_p99"])
    assert float(strikes["bundled_force"]) > 0.5 and float(pushing["bundled_force"]) == 0.0
    # a strike's rise is its force (contact starts from nothing); pushing barely rises
    assert float(strikes["rise_p50"]) == float(strikes["force_p50"])
    assert float(pushing["rise_p50"]) < 0.1 * float(pushing["force_p50"])
