"""Tests for the effort covariates: training cells keep their effort, the rest the standard."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from reserve.config import EFFORT_PREFIX, SelectOptions
from reserve.design import build_problem, effort_covariates, feature_columns
from reserve.errors import DataFileError, InvalidInputError
from reserve.select import select_reserve
from tests.test_select import FEATURES, make_units, write_units

NAMES = [f"{EFFORT_PREFIX}log_{c}" for c in ("n_checklists", "effort_hours", "effort_km")]


def effort_units(seed: int = 0):
    """The tiny planning units of test_select with varying effort on every cell.

    Candidates get much more effort than training cells, so a fit that read the candidates'
    own effort would rank them by it.
    """
    units = make_units(seed=seed)
    rng = np.random.default_rng(seed + 10)
    n = len(units)
    train = (units["role"] == "train").to_numpy()
    units["n_checklists"] = np.where(train, rng.integers(1, 20, n), rng.integers(0, 200, n))
    units["effort_hours"] = units["n_checklists"] * rng.uniform(0.2, 2.0, n)
    units["effort_km"] = units["n_checklists"] * rng.uniform(0.0, 3.0, n)
    # detection rises with effort on the training cells, as on eBird
    more = train & (units["n_checklists"].to_numpy() > 12)
    units.loc[more, "label"] = 1
    return units


def test_effort_covariates_keep_training_effort_and_standardise_the_rest():
    units = pd.DataFrame({"n_checklists": [1, 3, 7, 0, 50], "effort_hours": [2.0] * 5,
                          "effort_km": [0.0, 1.0, 4.0, 9.0, 9.0]})  # fmt: skip
    train = np.array([True, True, True, False, False])
    cov, standard = effort_covariates(units, train)
    # hours are the same on every training cell: nothing to learn, left out
    assert list(cov.columns) == [NAMES[0], NAMES[2]] == list(standard)
    np.testing.assert_allclose(cov[NAMES[0]], np.log1p([1, 3, 7, 3, 3]))
    np.testing.assert_allclose(cov[NAMES[2]], np.log1p([0, 1, 4, 1, 1]))
    assert standard[NAMES[0]] == pytest.approx(np.log1p(3.0))


def test_effort_covariates_refuse_bad_training_effort():
    units = pd.DataFrame({"cell_id": [5, 6, 7], "n_checklists": [1.0, -2.0, np.nan]})
    with pytest.raises(DataFileError, match=r"2 training cells .*'n_checklists'.*--no-effort"):
        effort_covariates(units, np.array([True, True, True]))
    # a candidate's missing effort is not read at all: it gets the standard
    cov, standard = effort_covariates(units.assign(n_checklists=[1.0, 4.0, np.nan]),
                                      np.array([True, True, False]))  # fmt: skip
    mid = np.median(np.log1p([1.0, 4.0]))
    np.testing.assert_allclose(cov[NAMES[0]], [np.log1p(1.0), np.log1p(4.0), mid])
    assert standard == {NAMES[0]: pytest.approx(mid)}


def test_problem_carries_the_covariates_and_candidates_at_the_standard():
    units = effort_units()
    on = build_problem(units, SelectOptions(budget=5, effort=True), "mem")
    off = build_problem(units, SelectOptions(budget=5, effort=False), "mem")
    assert off.features == FEATURES and off.effort == {}
    assert on.features == [*FEATURES, *NAMES] and list(on.effort) == NAMES
    train = on.train
    for j, name in enumerate(NAMES):
        col = on.X[:, len(FEATURES) + j]
        raw = units[name[len(EFFORT_PREFIX) + 4 :]].to_numpy(float)
        np.testing.assert_allclose(col[train], np.log1p(raw[train]))
        assert np.all(col[~train] == on.effort[name])  # candidates and the rest: the standard
        assert on.effort[name] == pytest.approx(np.median(np.log1p(raw[train])))
    # the covariates are never read back as habitat features (a reserve.gpkg as cells)
    assert feature_columns(on.units) == FEATURES


def test_candidates_are_scored_at_the_standard_effort(tmp_path):
    units = effort_units()
    res = select_reserve(6, write_units(tmp_path / "a.gpkg", units), model="linear",
                         effort=True)  # fmt: skip
    # independent re-scorer: habitat + log1p effort (candidates at the training median),
    # standardised on train + candidate cells, then X @ w + b
    train = (units["role"] == "train").to_numpy()
    fit = units["role"].isin(["train", "candidate"]).to_numpy()
    eff = np.log1p(units[["n_checklists", "effort_hours", "effort_km"]].to_numpy(float))
    eff = np.where(train[:, None], eff, np.median(eff[train], axis=0))
    X = np.column_stack([units[FEATURES].to_numpy(float), eff])
    Z = (X - X[fit].mean(axis=0)) / X[fit].std(axis=0)
    expect = Z @ res.estimator.coef_ + float(res.estimator.intercept_)
    np.testing.assert_allclose(res.planning_units["score"].to_numpy(), expect, atol=1e-9)
    assert np.any(res.estimator.coef_[len(FEATURES) :] != 0)  # effort did enter the model
    # the candidates' own effort is never read: change it, the selection stays the same
    cand = units["role"].to_numpy() == "candidate"
    other = units.copy()
    other.loc[cand, ["n_checklists", "effort_hours", "effort_km"]] = [[0, 0.0, 0.0]]
    res2 = select_reserve(6, write_units(tmp_path / "b.gpkg", other), model="linear",
                          effort=True)  # fmt: skip
    assert res2.selected["cell_id"].tolist() == res.selected["cell_id"].tolist()
    # the run says what it did; effort is no "main feature" of the chosen cells
    assert set(json.loads(res.summary["effort_covariates"])) == set(NAMES)
    assert json.loads(res.summary["config"])["effort"] is True
    assert not set(res.main_features()) & set(NAMES)


def test_no_effort_is_the_habitat_model_alone(tmp_path):
    units = effort_units()
    cells = write_units(tmp_path / "a.gpkg", units)
    off = select_reserve(6, cells, model="linear", effort=False)
    assert json.loads(off.summary["effort_covariates"]) == {}
    assert len(off.estimator.coef_) == len(FEATURES)
    on = select_reserve(6, cells, model="linear", effort=True)
    assert len(on.estimator.coef_) == len(FEATURES) + len(NAMES)


def test_effort_option_is_checked():
    assert SelectOptions.from_sources({"budget": "3", "effort": False}).effort is False
    with pytest.raises(InvalidInputError, match="effort must be true or false"):
        SelectOptions(budget=3, effort="yes")
