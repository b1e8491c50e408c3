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
    units = pd.DataFrame(
        {
            "n_checklists": [1, 3, 7, 0, 50],
            "effort_hours": [2.0] * 5,
            "effort_km": [0.0, 1.0, 4.0, 9.0, 9.0],
        }
    )
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
    cov, standard = effort_covariates(
        units.assign(n_checklists=[1.0, 4.0, np.nan]), np.array([True, True, False])
    )
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
    res = select_reserve(6, write_units(tmp_path / "a.gpkg", units), model="linear", effort=True)
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
    res2 = select_reserve(6, write_units(tmp_path / "b.gpkg", other), model="linear", effort=True)
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


def _effort_only_problem(seed: int = 0):
    """Labels decided by effort alone: habitat is noise, effort separates the classes.

    Column 0 is habitat (pure noise), column 1 effort; a labelled row is a detection exactly
    when its effort is high. The candidates sit at the standard effort, as
    :func:`reserve.design.effort_covariates` puts them.
    """
    rng = np.random.default_rng(seed)
    n_lab, n_cand = 240, 120
    X = rng.normal(size=(n_lab + n_cand, 2))
    y = np.r_[(X[:n_lab, 1] > 0.8).astype(np.int64), -np.ones(n_cand, dtype=np.int64)]
    X[n_lab:, 1] = np.median(X[:n_lab, 1])
    return X, y


def test_cv_scores_held_out_rows_at_the_standard_effort():
    from reserve.solvers import AutoTTK

    X, y = _effort_only_problem()
    grid = {"k": 6, "models": ("linear",), "Cs": (0.1, 1.0), "class_weight": "auto"}
    own = AutoTTK(**grid, random_state=0).fit(X, y)
    std = AutoTTK(**grid, random_state=0, effort_columns=(1,)).fit(X, y)
    prevalence = y[y != -1].mean()
    # held out at their own effort, the folds reward reading effort: a near-perfect CV score
    # that cannot carry over to candidates which all share one effort
    assert np.nanmax(own.cv_results_["mean_test_score"]) > 0.9
    # held out at the standard effort, the folds see what the candidates will: habitat only,
    # here noise, so no grid point scores much above the prevalence
    assert np.nanmax(std.cv_results_["mean_test_score"]) < prevalence + 0.25
    np.testing.assert_allclose(std.standard_effort_, np.median(X[y != -1, 1]))


def test_cv_folds_get_the_median_of_their_training_rows(monkeypatch):
    from reserve.solvers import auto
    from reserve.solvers.search import TransductiveSplit

    X, y = _effort_only_problem(1)
    seen = []
    real = TransductiveSplit.rows

    def spy(self, X_lab, y_lab, fold):
        seen.append((X_lab.copy(), fold, real(self, X_lab, y_lab, fold)[0]))
        return real(self, X_lab, y_lab, fold)

    monkeypatch.setattr(TransductiveSplit, "rows", spy)
    auto.AutoTTK(
        k=6,
        models=("linear",),
        Cs=(0.1, 1.0),
        n_repeats=1,
        random_state=0,
        effort_columns=[1],
        n_jobs=1,
    ).fit(X, y)
    X_lab = X[y != -1]
    assert len(seen) == 3
    for given, fold, Xf in seen:
        np.testing.assert_array_equal(given, X_lab)  # the labelled rows as given
        n_train = fold.train.size
        np.testing.assert_array_equal(Xf[:n_train], X_lab[fold.train])  # fitted as given
        np.testing.assert_array_equal(Xf[n_train:, 0], X_lab[fold.held, 0])  # habitat kept
        assert np.all(Xf[n_train:, 1] == np.median(X_lab[fold.train, 1]))


def test_fit_sets_candidates_to_the_standard_effort():
    from reserve.solvers import AutoTTK

    X, y = _effort_only_problem(2)
    grid = {"k": 6, "models": ("linear",), "Cs": (1.0,), "random_state": 0}
    ref = AutoTTK(**grid, effort_columns=(1,)).fit(X, y)
    moved = X.copy()
    moved[y == -1, 1] = np.linspace(-5, 5, int((y == -1).sum()))  # the candidates' own effort
    est = AutoTTK(**grid, effort_columns=(1,)).fit(moved, y)
    np.testing.assert_array_equal(est.selected_, ref.selected_)
    assert AutoTTK(**grid).fit(X, y).standard_effort_.size == 0
    for bad in ((2,), (-1,), (0.5,), "1"):
        with pytest.raises(InvalidInputError, match="effort_columns must be column indices"):
            AutoTTK(**grid, effort_columns=bad).fit(X, y)


def test_select_passes_the_effort_columns_to_the_default_model():
    from reserve.select import _estimator

    units = effort_units()
    on = build_problem(units, SelectOptions(budget=5, effort=True), "mem")
    est = _estimator(SelectOptions(budget=5, effort=True), on, 1.0)
    assert [on.features[i] for i in est.effort_columns] == NAMES
    assert est.effort_columns == on.selection.effort_columns  # the problem carries them
    off = build_problem(units, SelectOptions(budget=5, effort=False), "mem")
    assert _estimator(SelectOptions(budget=5), off, 1.0).effort_columns is None
    assert off.selection.effort_columns == ()


def test_select_C_scores_held_out_rows_at_the_standard_effort():
    from reserve.model_selection import select_C
    from reserve.solvers import SVM

    X, y = _effort_only_problem(3)
    kw = {"Cs": (0.1, 1.0), "n_repeats": 2, "k_fraction": 0.1, "random_state": 0}
    own = select_C(SVM(k=5), X, y, **kw)
    std = select_C(SVM(k=5), X, y, effort_columns=(1,), **kw)
    assert own.mean_scores.max() > 0.9  # effort alone separates held-out rows at own effort
    assert std.mean_scores.max() < y[y != -1].mean() + 0.25  # at one effort: habitat, noise
