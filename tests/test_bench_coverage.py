"""The interval-coverage benchmark's pure pieces: parsing, aggregation, calibration figures."""

from pathlib import Path

import numpy as np
import pytest

from benchmarks.bench_coverage import (
    CALIB_KEYS,
    FIELDS,
    _read_csv,
    _write_csv,
    brier,
    coverage_rows,
    parse_args,
    parse_seeds,
    recalibrate,
    reliability,
    report,
)


def _record(seed, species, k, expected, low, high, true, signal="strong"):
    rec = dict.fromkeys(FIELDS, 0.0)
    rec.update(
        seed=seed,
        species=species,
        k=k,
        expected=expected,
        low=low,
        high=high,
        true=true,
        covered=low <= true <= high,
        signal=signal,
    )
    return rec


RECORDS = [
    _record(0, "Virtual Thrush", 10, 6.0, 4, 8, 7),  # covered
    _record(0, "Virtual Thrush", 30, 20.0, 16, 24, 27),  # above
    _record(0, "Virtual Quail", 10, 5.0, 3, 7, 2),  # below
    _record(1, "Virtual Quail", 30, 18.0, 14, 22, 14),  # covered at the low end
]


def test_parse_seeds_ranges_and_lists():
    assert parse_seeds("0-9") == list(range(10))
    assert parse_seeds("3") == [3]
    assert parse_seeds("0-2,7,9-10") == [0, 1, 2, 7, 9, 10]


def test_parse_args_defaults_and_options(tmp_path):
    args = parse_args([])
    assert args.seeds == list(range(10))
    assert args.budgets == [10, 30, 100]
    assert args.species == ["Virtual Thrush", "Virtual Quail"]
    assert args.csv is None
    args = parse_args(["--seeds", "2-3", "--budgets", "5,50", "--csv", str(tmp_path / "r.csv")])
    assert (args.seeds, args.budgets, args.csv) == ([2, 3], [5, 50], tmp_path / "r.csv")


def test_coverage_rows_overall():
    (row,) = coverage_rows(RECORDS)
    assert row["group"] == "all" and row["n"] == 4
    assert row["covered"] == 2 and row["coverage"] == 0.5
    assert (row["below"], row["above"]) == (1, 1)
    # expected - true: -1, -7, +3, +4
    assert row["bias"] == pytest.approx(-0.25)
    assert row["width"] == pytest.approx(np.mean([4, 8, 4, 8]))


def test_coverage_rows_grouped_in_order_of_appearance():
    by_k = coverage_rows(RECORDS, "k")
    assert [r["group"] for r in by_k] == [10, 30]
    assert [r["coverage"] for r in by_k] == [0.5, 0.5]
    by_species = {r["group"]: r for r in coverage_rows(RECORDS, "species")}
    assert by_species["Virtual Thrush"]["bias"] == pytest.approx(-4.0)
    assert by_species["Virtual Quail"]["bias"] == pytest.approx(3.5)
    assert by_species["Virtual Quail"]["below"] == 1


def test_reliability_deciles_and_brier():
    prob = np.r_[np.full(50, 0.2), np.full(50, 0.8), np.nan]
    occupied = np.r_[np.zeros(40), np.ones(10), np.ones(30), np.zeros(20), 1]
    rows = reliability(prob, occupied, bins=2)
    assert [r["n"] for r in rows] == [50, 50]  # the NaN probability is left out
    assert [r["occupied_share"] for r in rows] == pytest.approx([0.2, 0.6])
    assert [r["mean_probability"] for r in rows] == pytest.approx([0.2, 0.8])
    expected = (40 * 0.04 + 10 * 0.64 + 30 * 0.04 + 20 * 0.64) / 100
    assert brier(prob, occupied) == pytest.approx(expected)


def _arrays(n, seed):
    rng = np.random.default_rng(seed)
    surveyed = np.arange(n) % 4 == 0
    return {
        "prob": rng.random(n),
        "occupied": rng.random(n) < 0.3,
        "psi": rng.random(n),
        "chosen": np.arange(n) < 3,
        "surveyed": surveyed,
        "score": rng.normal(size=n),
        "n_checklists": np.where(surveyed, rng.integers(1, 6, n), 0),
        "label": np.where(surveyed, rng.random(n) < 0.3, -1),
    }


def test_csv_round_trip_and_report(tmp_path: Path):
    arrays = [_arrays(20 + i, i) for i in range(len(RECORDS))]
    path = tmp_path / "runs.csv"
    _write_csv(path, RECORDS, arrays)
    records, back = _read_csv(path)
    assert [r["true"] for r in records] == [r["true"] for r in RECORDS]
    for a, b in zip(arrays, back, strict=True):
        for key in CALIB_KEYS:
            np.testing.assert_array_equal(a[key], b[key])
    text = report(records, back, "python -m benchmarks.bench_coverage --seeds 0-1")
    assert "`python -m benchmarks.bench_coverage --seeds 0-1`" in text
    assert "| all | 4 | 2 | 0.500 | 1 | 1 | -0.250 |" in text
    assert "Brier score" in text


@pytest.mark.parametrize("name", ["score", "links", "score+rank"])
def test_recalibrate_recomputes_the_count_of_the_chosen_cells(name):
    arrays = _arrays(400, 0)
    rec = _record(0, "Virtual Thrush", 3, 99.0, 98, 99, 1)
    rec["check_auc"] = 0.6
    out, arr = recalibrate(rec, arrays, name)
    assert 0 <= out["low"] <= out["expected"] <= out["high"] <= 3
    assert out["covered"] == (out["low"] <= 1 <= out["high"])
    detected = arrays["label"] == 1
    np.testing.assert_allclose(arr["prob"][detected], 1.0)  # a detection is presence
    assert np.all((arr["prob"] >= 0) & (arr["prob"] <= 1))
    assert rec["expected"] == 99.0  # the input record is left as it was


def test_recalibrate_leaves_runs_without_the_check():
    arrays = _arrays(50, 1)
    rec = _record(0, "Virtual Quail", 3, 2.0, 1, 3, 2)
    rec["check_auc"] = float("nan")
    assert recalibrate(rec, arrays, "links") == (rec, arrays)
