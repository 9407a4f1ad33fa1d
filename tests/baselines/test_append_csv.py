"""baselines.append_csv and write_csv: rows go under the file's own header, never under another."""

import csv

import pytest

from baselines import append_csv


def test_appends_under_one_header(tmp_path):
    path = tmp_path / "sub" / "rows.csv"
    append_csv(path, ["a", "b"], [{"a": 1, "b": 2}])
    append_csv(path, ["a", "b"], [{"a": 3, "b": 4}])
    assert list(csv.DictReader(open(path))) == [{"a": "1", "b": "2"}, {"a": "3", "b": "4"}]


def test_refuses_a_file_with_other_columns(tmp_path):
    path = tmp_path / "rows.csv"
    append_csv(path, ["a", "b"], [{"a": 1, "b": 2}])
    with pytest.raises(ValueError, match="differ"):
        append_csv(path, ["a", "c", "b"], [{"a": 1, "c": 0, "b": 2}])
    assert len(list(csv.DictReader(open(path)))) == 1  # nothing was appended


def test_write_csv_replaces_the_file(tmp_path):
    from baselines import write_csv

    path = tmp_path / "rows.csv"
    write_csv(path, ["a", "b"], [{"a": 1, "b": 2}])
    write_csv(path, ["a", "b"], [{"a": 3, "b": 4}, {"a": 5, "b": 6}])
    assert path.read_text().splitlines() == ["a,b", "3,4", "5,6"]
