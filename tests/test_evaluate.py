"""Tests for reserve.evaluate and the ``reserve evaluate`` command."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pyogrio
import pytest
from click.testing import CliRunner

from reserve.cli import main
from reserve.errors import DataFileError, InvalidInputError
from reserve.evaluate import evaluate_selection, read_selection, read_truth


@pytest.fixture
def truth(tmp_path):
    path = tmp_path / "truth.csv.gz"
    text = "cell_id,psi,occupied,lon,lat\n" + "".join(
        f"{i},{p},{o},0,0\n"
        for i, p, o in [(10, 0.9, 1), (11, 0.1, 0), (12, 0.6, 1), (13, 0.3, 0), (14, 0.5, 1)]
    )
    path.write_bytes(gzip.compress(text.encode()))
    return path


def test_precision_and_counts(truth):
    r = evaluate_selection([10, 11, 12, 13], truth)
    assert r["k"] == 4 and r["n_occupied"] == 2 and r["precision"] == 0.5
    assert r["expected_precision"] == pytest.approx((0.9 + 0.1 + 0.6 + 0.3) / 4)
    assert r["prevalence"] == pytest.approx(3 / 5)
    assert evaluate_selection(np.array([14, 12]), truth)["precision"] == 1.0
    assert evaluate_selection([13.0], truth)["precision"] == 0.0  # integral floats are ids


@pytest.mark.parametrize(
    ("ids", "match"),
    [
        ([10, 99], "not in the truth"),
        ([10, 10], "repeats"),
        ([], "non-empty"),
        ([[10, 11]], "1-D"),
        ([10.5], "integers"),
    ],
)
def test_bad_selection_is_refused(truth, ids, match):
    with pytest.raises(InvalidInputError, match=match):
        evaluate_selection(ids, truth)


def test_bad_truth_is_refused(tmp_path):
    with pytest.raises(DataFileError, match="does not exist"):
        read_truth(tmp_path / "none.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("cell_id,psi\n1,0.5\n")
    with pytest.raises(DataFileError, match="occupied"):
        read_truth(bad)
    dup = tmp_path / "dup.csv"
    dup.write_text("cell_id,psi,occupied\n1,0.5,1\n1,0.5,1\n")
    with pytest.raises(DataFileError, match="repeats"):
        read_truth(dup)


def test_default_truth_is_the_embedded_one():
    truth = read_truth()
    assert truth["occupied"].dtype == bool and len(truth) > 10_000
    ids = truth.index[truth["occupied"].to_numpy()][:7]
    r = evaluate_selection(ids)
    assert r["precision"] == 1.0 and r["truth_path"].endswith("truth.csv.gz")


def test_truth_of_each_default_species():
    first = read_truth()
    pd.testing.assert_frame_equal(read_truth(species="Virtual Thrush"), first)
    quail = read_truth(species="Virtual Quail")
    pd.testing.assert_frame_equal(read_truth(species="colinus simulatus"), quail)
    assert quail.index.equals(first.index) and not quail["occupied"].equals(first["occupied"])
    assert 0.1 < quail["occupied"].mean() < 0.3
    with pytest.raises(InvalidInputError, match="'Virtual Thrush', 'Virtual Quail'") as info:
        read_truth(species="Dodo")
    assert "\n" not in str(info.value)
    with pytest.raises(InvalidInputError, match="not both"):
        read_truth("truth.csv.gz", species="Virtual Quail")


def test_read_selection_formats(tmp_path):
    gpkg = tmp_path / "reserve.gpkg"
    pyogrio.write_dataframe(
        pd.DataFrame({"cell_id": [12, 10], "rank": [1, 2]}), gpkg, layer="selected", driver="GPKG"
    )
    assert read_selection(gpkg).tolist() == [12, 10]
    other = tmp_path / "other.gpkg"
    pyogrio.write_dataframe(pd.DataFrame({"cell_id": [1]}), other, layer="x", driver="GPKG")
    with pytest.raises(DataFileError, match="no layer 'selected'"):
        read_selection(other)
    csv = tmp_path / "ids.csv"
    csv.write_text("cell_id\n14\n13\n")
    assert read_selection(csv).tolist() == [14, 13]
    plain = tmp_path / "ids.txt"
    plain.write_text("11\n12\n")
    assert read_selection(plain).tolist() == [11, 12]
    with pytest.raises(DataFileError, match="does not exist"):
        read_selection(tmp_path / "none.gpkg")


def test_cli(truth, tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["evaluate", "--cell-ids", "10,12,13", "--truth", str(truth)])
    assert res.exit_code == 0, res.output
    assert "precision@3 = 2/3 = 0.667" in res.output
    gpkg = tmp_path / "reserve.gpkg"
    pyogrio.write_dataframe(
        pd.DataFrame({"cell_id": [11, 13]}), gpkg, layer="selected", driver="GPKG"
    )
    res = runner.invoke(main, ["evaluate", str(gpkg), "--truth", str(truth)])
    assert res.exit_code == 0 and "precision@2 = 0/2 = 0.000" in res.output
    res = runner.invoke(main, ["evaluate", "--truth", str(truth)])
    assert res.exit_code == 2 and "pass what to evaluate: SELECTION" in res.output
    res = runner.invoke(main, ["evaluate", "--cell-ids", "10,99", "--truth", str(truth)])
    assert res.exit_code == 2 and "not in the truth" in res.output
    assert "Traceback" not in res.output


def test_evaluate_a_selection_for_each_default_species():
    quail = read_truth(species="Virtual Quail")
    ids = quail.index[quail["occupied"].to_numpy()][:4]
    assert evaluate_selection(ids, species="Virtual Quail")["precision"] == 1.0
    r = evaluate_selection(ids)  # the thrush's truth by default
    assert r["truth_path"].endswith("truth.csv.gz")
    assert r["n_occupied"] == int(read_truth().loc[ids, "occupied"].sum())
    with pytest.raises(InvalidInputError, match="not both"):
        evaluate_selection(ids, "truth.csv.gz", species="Virtual Quail")
    res = CliRunner().invoke(
        main, ["evaluate", "--cell-ids", ",".join(map(str, ids)), "--species", "Virtual Quail"]
    )
    assert res.exit_code == 0 and "precision@4 = 4/4 = 1.000" in res.output
    res = CliRunner().invoke(main, ["evaluate", "--cell-ids", "1", "--species", "Dodo"])
    assert res.exit_code == 2 and "Virtual Quail" in res.output
