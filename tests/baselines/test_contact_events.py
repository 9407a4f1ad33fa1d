"""baselines/contact_events.py: the measurement behind BoxPush's bcg threshold."""

import csv
from pathlib import Path

import pytest

from baselines import contact_events
from bcg_envs.physics.penalty_contact import PenaltyContact

ROOT = Path(__file__).resolve().parents[2]


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
    # a single contact carries at most its event's force, so the paper's trigger fires at most as often
    for row in (r for r in rows.values() if int(r["steps"])):
        assert 0 < float(row["point_p50"]) <= float(row["force_p50"]) and float(row["point_p99"]) <= float(
            row["force_p99"]
        )
        assert float(row["bundled_point"]) <= float(row["bundled_force"])


@pytest.mark.integration  # a BoxPush program under the penalty model: ~20 s of compile
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
    assert "penalty (kappa 300)" in contact_events.table(rows) and "single contact" in contact_events.table(rows)


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


@pytest.mark.integration
def test_penalty_model_without_kappa_records_the_default():
    rows = contact_events.measure("BoxPush-v0", 1, contact_model="penalty")
    assert {r["kappa"] for r in rows} == {float(PenaltyContact.kappa)}


def test_an_exported_policy_is_measured_by_its_file_name(tmp_path):
    policy = ROOT / "assets" / "policies" / "BoxPush-v0.npz"
    rows = contact_events.main(["--env", "BoxPush-v0", "--episodes", "1", "--policy", str(policy), "--out", ""])
    assert rows and {r["policy"] for r in rows} == {"BoxPush-v0.npz"}
    with pytest.raises(ValueError, match="--policy .* is a policy of BoxPush-v0, not of PlanarHand-v0"):
        contact_events.main(["--env", "PlanarHand-v0", "--episodes", "1", "--policy", str(policy), "--out", ""])
