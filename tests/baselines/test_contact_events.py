"""baselines/contact_events.py: the measurement behind BoxPush's bcg threshold."""

import csv

import pytest

from baselines import contact_events
from bcg_envs.physics.penalty_contact import PenaltyContact


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


def test_penalty_model_rows_name_their_contact_model(tmp_path):
    out = tmp_path / "events.csv"
    rows = contact_events.main(
        ["--env", "BoxPush-v0", "--episodes", "1", "--contact-model", "penalty", "--kappa", "300", "--out", str(out)]
    )
    assert rows and all(r["contact_model"] == "penalty" and r["kappa"] == 300.0 for r in rows)
    written = list(csv.DictReader(open(out)))
    assert [r["contact_model"] for r in written] == ["penalty"] * len(rows)
    # the scripted push touches the box in every episode, under either model
    assert int(next(r for r in written if r["policy"] == "scripted" and r["group"] == "sustained")["steps"]) > 0
    assert "penalty (kappa 300)" in contact_events.table(rows)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--kappa", "300"], "kappa is the sharpness of the penalty and Moreau contact models"),
        (["--contact-model", "penalty", "--kappa", "0"], "kappa must be a positive"),
    ],
)
def test_a_bad_kappa_is_refused_by_name(argv, message):
    with pytest.raises(ValueError, match=message):
        contact_events.main(["--env", "BoxPush-v0", "--out", ""] + argv)


def test_penalty_model_without_kappa_records_the_default():
    rows = contact_events.measure("BoxPush-v0", 1, contact_model="penalty")
    assert {r["kappa"] for r in rows} == {float(PenaltyContact.kappa)}
