"""Tests for the peers benchmark's real-eBird suite on tiny synthetic units (no eBird data)."""

from __future__ import annotations

import itertools

import geopandas as gpd
import numpy as np
import pytest
import shapely

from benchmarks.bench_peers import SCORERS, append_records, read_records, report
from benchmarks.peers_ebird import (
    check_scores,
    fit_rows,
    score_splits,
    skip_reason,
    splits,
    surveyed_folds,
    usable,
)


def _units(n_train: int = 30, n_private: int = 400, seed: int = 0) -> gpd.GeoDataFrame:
    """Public training cells, then private candidates, 60 % of them surveyed."""
    rng = np.random.default_rng(seed)
    n = n_train + n_private
    role = np.array(["train"] * n_train + ["candidate"] * n_private, dtype=object)
    habitat = rng.random(n)
    label = (rng.random(n) < habitat).astype(np.int64)
    label[:n_train:5] = 1  # both classes among the training cells
    label[1:n_train:5] = 0
    surveyed = np.ones(n, dtype=bool)
    surveyed[n_train:] = rng.random(n_private) < 0.6
    label[~surveyed] = -1
    checklists = np.where(surveyed, rng.integers(1, 5, n), 0)  # few, large effort strata
    return gpd.GeoDataFrame(
        {
            "cell_id": np.arange(n) * 3,
            "role": role,
            "label": label,
            "n_checklists": checklists,
            "n_detections": np.where(label == 1, 1, 0),
            "effort_hours": checklists * 1.5,
            "effort_km": checklists * 0.5,
            "public_fraction": np.where(role == "train", 1.0, 0.0),
            "locked_out": np.zeros(n, dtype=bool),
            "region_fraction": np.ones(n),
            "landcover_forest": habitat,
            "landcover_water": 1.0 - habitat + rng.normal(0, 0.01, n),
        },
        geometry=shapely.points(np.arange(n), np.zeros(n)),
    )


def _oracle(units: gpd.GeoDataFrame):
    """A scorer that knows every cell's label (through the rows' ``cell_id``)."""
    truth = dict(zip(units["cell_id"], units["label"], strict=True))

    def score(X, y, k, seed, **context):
        return np.array([truth[c] for c in context["cell_id"][y == -1]], dtype=np.float64)

    return score


def test_check_scores_of_a_perfect_ranking_is_one_and_a_random_one_blind():
    rng = np.random.default_rng(1)
    n = rng.integers(1, 40, 4000)
    label = (rng.random(4000) < 0.3).astype(np.int64)
    perfect = check_scores(label + rng.random(4000) * 0.5, label, n)
    assert perfect["precision"] == 1.0 and perfect["auc"] == 1.0
    blind = check_scores(rng.random(4000), label, n)
    assert abs(blind["auc"] - 0.5) < 0.05
    assert abs(blind["precision"] - label.mean()) < 0.1
    assert check_scores(n.astype(float), label, n)["auc"] == pytest.approx(0.5, abs=0.05)


def test_fit_rows_put_the_learnt_private_cells_in_twice():
    units = _units()
    role, label = units["role"].to_numpy(), units["label"].to_numpy()
    surveyed = np.flatnonzero((role == "candidate") & (label >= 0))
    learn = surveyed[:10]
    rows, y = fit_rows(units, learn)
    cand = np.flatnonzero(role == "candidate")
    np.testing.assert_array_equal(np.sort(rows[y == -1]), cand)  # every private cell
    labelled = rows[y != -1]
    assert set(learn) <= set(labelled) and set(learn) <= set(rows[y == -1])
    np.testing.assert_array_equal(y[y != -1], label[labelled])
    assert (role[labelled] == "train").sum() == 30
    public_rows, public_y = fit_rows(units, learn[:0])
    assert (public_y != -1).sum() == 30 and public_rows.size == 30 + cand.size


@pytest.mark.parametrize("blocked", [True, False])
def test_folds_partition_the_positions(blocked):
    folds = surveyed_folds(23, 5, blocked)
    assert len(folds) == 5
    np.testing.assert_array_equal(np.sort(np.concatenate(folds)), np.arange(23))
    if blocked:  # contiguous blocks in order
        assert all(np.all(np.diff(f) == 1) for f in folds)
        assert all(a[-1] < b[0] for a, b in itertools.pairwise(folds))


def test_splits_check_each_block_once_and_never_learn_its_labels():
    units = _units()
    role, label = units["role"].to_numpy(), units["label"].to_numpy()
    surveyed = np.flatnonzero((role == "candidate") & (label >= 0))
    fits = list(splits(units, n_folds=4))
    assert [kind for kind, _ in fits] == [""] + ["+surveyed"] * 8
    public = fits[0][1]
    ((kind, alone),) = list(splits(units, n_folds=0))
    assert kind == "" and list(alone.checks) == [("public", "all")]
    # without the learn-from-surveyed fits: the public fit alone, still checked on every fold
    ((kind, only),) = list(splits(units, n_folds=4, learn=False))
    assert kind == "" and only.checks.keys() == public.checks.keys()
    np.testing.assert_array_equal(public.checks[("public", "all")], surveyed)
    for setting in ("blocked", "random"):
        blocks = [public.checks[(setting, f"fold {j}")] for j in range(4)]
        np.testing.assert_array_equal(np.sort(np.concatenate(blocks)), surveyed)
    for _, split in fits[1:]:
        ((_, cells),) = split.checks.items()
        learnt = split.rows[split.y != -1]
        assert not set(cells) & set(learnt)  # the block's labels stay out of the fit
        assert set(learnt) == set(np.flatnonzero(role == "train")) | (set(surveyed) - set(cells))


def test_score_splits_score_the_checked_cells_of_each_fit():
    units = _units()
    scorers = {"oracle": _oracle(units), "random": SCORERS["random"]}
    records = list(score_splits(units, scorers, effort=True, n_folds=3))
    oracle = [r for r in records if r["method"].startswith("oracle")]
    assert {r["method"] for r in oracle} == {"oracle", "oracle+surveyed"}
    assert len(oracle) == (1 + 3 + 3) + 6  # public fit: 7 checks; 6 learn-from-surveyed fits
    assert all(r["precision"] == 1.0 and r["auc"] == 1.0 for r in oracle)
    rand = [r["auc"] for r in records if r["method"] == "random"]
    assert 0.3 < np.mean(rand) < 0.7


def test_usable_and_skip_reason():
    units = _units()
    units.loc[3, "landcover_forest"] = np.nan
    kept, n_bad = usable(units)
    assert n_bad == 1 and kept.loc[3, "role"] == "other" and units.loc[3, "role"] == "train"
    assert skip_reason(kept) == ""
    kept.loc[kept["role"] == "train", "label"] = 0
    assert "0 detected" in skip_reason(kept)


def test_ebird_records_round_trip_and_report(tmp_path):
    units = _units()
    scorers = {"a": _oracle(units), "random": SCORERS["random"]}
    records = []
    for r in score_splits(units, scorers, effort=False, n_folds=2):
        if r.pop("variant") == "public":
            r["problem"] = "XX, " + r["problem"]
            records.append({"suite": "ebird (public)", "group": "Bird", "k": 20, **r})
    path = tmp_path / "r.csv"
    append_records(path, records, fresh=True)
    back = read_records(path)
    assert back == records
    text = report(back, ["a", "random"], "a", "cmd", [])
    assert "effort-stratified AUC" in text and "| a | 1.000 | - | - |" in text
    assert "## ebird: summary" in text and "| random | " in text
