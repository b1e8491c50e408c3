"""The transductive search: its splitter, its fold budget, its results and its parallel runs."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from reserve.errors import InvalidInputError, SolverError
from reserve.solvers import SVM
from reserve.solvers.search import (
    TransductiveSearchCV,
    TransductiveSplit,
    fold_k,
    fold_scores,
    held_out_precision,
    search_results,
)

_FITS: list[tuple[np.ndarray, np.ndarray, int]] = []  # (X, y, k) of every in-process fit


class _Oracle(BaseEstimator):
    """Ranks the candidates by feature 0 (the label plus noise) when ``C == good``, else by
    its negation; records what each fit received."""

    def __init__(self, k=1, C=1.0, good=10.0, fail=None):
        self.k = k
        self.C = C
        self.good = good
        self.fail = fail

    def fit(self, X, y, log=None):
        if self.C == self.fail:
            raise SolverError("this C fails")
        _FITS.append((np.array(X), np.array(y), self.k))
        if log is not None:
            log.append(self.C)
        cand = np.flatnonzero(y == -1)
        score = X[cand, 0] if self.C == self.good else -X[cand, 0]
        self.candidates_ = cand
        self.selected_ = cand[np.argsort(-score, kind="stable")[: self.k]]
        return self


def _problem(n=120, m=30, seed=0):
    rng = np.random.default_rng(seed)
    y = (rng.random(n + m) < 0.3).astype(np.int64)
    X = np.c_[y + 0.01 * rng.normal(size=n + m), rng.normal(size=(n + m, 2))]
    y[n:] = -1
    return X, y


def test_the_best_params_are_the_known_best():
    X, y = _problem()
    split = TransductiveSplit(n_splits=3, n_repeats=2, k=0.1, rule="share", random_state=0)
    grid = {"C": [0.1, 1.0, 10.0]}
    search = TransductiveSearchCV(_Oracle(), grid, split).fit(X, y)
    assert search.best_params_ == {"C": 10.0} and search.best_index_ == 2
    assert search.best_score_ == 1.0  # feature 0 is the label: a perfect pick on every fold
    res = search.cv_results_
    assert res["C"].tolist() == [0.1, 1.0, 10.0]
    assert res["rank_test_score"].tolist() == [2, 3, 1]  # 0.1 and 1.0 tie: the first first
    scores = fold_scores(res)
    assert scores.shape == (3, 6)  # one column per fold: 3 folds x 2 repeats
    np.testing.assert_array_equal(res["mean_test_score"], scores.mean(axis=1))
    assert (scores[2] == 1.0).all() and (scores[:2] < 1.0).all()


def test_cv_results_have_one_row_per_point_and_one_column_per_fold():
    X, y = _problem()
    split = TransductiveSplit(n_splits=4, n_repeats=1, k=0.1, rule="share", random_state=1)
    grid = {"good": [10.0, 5.0], "C": [1.0, 10.0]}  # the first key varies slowest
    res = TransductiveSearchCV(_Oracle(), grid, split).fit(X, y).cv_results_
    assert res["params"] == [
        {"good": 10.0, "C": 1.0},
        {"good": 10.0, "C": 10.0},
        {"good": 5.0, "C": 1.0},
        {"good": 5.0, "C": 10.0},
    ]
    assert sorted(k for k in res if k.startswith("split")) == [
        f"split{i}_test_score" for i in range(4)
    ]
    for key in ("good", "C", "mean_test_score", "std_test_score", "rank_test_score"):
        assert len(res[key]) == 4, key
    assert sorted(res["rank_test_score"].tolist()) == [1, 2, 3, 4]
    assert res["rank_test_score"][1] == 1  # good == C: the only perfect point


def test_the_splitter_marks_the_held_out_rows_as_candidates_and_nothing_else():
    X, y = _problem(n=90, m=20)
    lab = np.flatnonzero(y != -1)
    split = TransductiveSplit(n_splits=3, n_repeats=1, k=0.1, rule="share", random_state=2)
    folds, note = split.split(y)
    assert note == "" and len(folds) == 3
    _FITS.clear()
    TransductiveSearchCV(_Oracle(), {"C": [1.0]}, split).fit(X, y)
    assert len(_FITS) == 3
    held_all = []
    for (Xf, yf, k), fold in zip(_FITS, folds, strict=True):
        n_train = fold.train.size
        np.testing.assert_array_equal(yf[:n_train], y[lab][fold.train])  # labels kept
        assert (yf[n_train:] == -1).all() and yf.size == n_train + fold.held.size
        np.testing.assert_array_equal(Xf, np.vstack([X[lab][fold.train], X[lab][fold.held]]))
        assert k == fold.k == max(1, round(0.1 * fold.held.size))
        assert np.intersect1d(fold.train, fold.held).size == 0
        held_all.append(fold.held)
    # the real candidates never take part; every labelled row is held out exactly once
    np.testing.assert_array_equal(np.sort(np.concatenate(held_all)), np.arange(lab.size))


def test_held_out_rows_are_scored_at_the_training_rows_median_effort():
    X, y = _problem(n=90, m=20)
    lab = np.flatnonzero(y != -1)
    split = TransductiveSplit(n_splits=3, k=0.1, rule="share", effort_columns=(2,), random_state=3)
    folds, _ = split.split(y)
    for fold in folds:
        Xf, _ = split.rows(X[lab], y[lab], fold)
        n_train = fold.train.size
        np.testing.assert_array_equal(Xf[:n_train], X[lab][fold.train])
        np.testing.assert_array_equal(Xf[n_train:, :2], X[lab][fold.held, :2])
        assert (Xf[n_train:, 2] == np.median(X[lab][fold.train, 2])).all()


def test_n_jobs_changes_nothing(monkeypatch):
    from reserve import fork

    monkeypatch.setattr(fork.threading, "active_count", lambda: 1)  # the fork path on Linux
    rng = np.random.default_rng(3)
    X = rng.normal(size=(150, 3))
    y = (X[:, 0] + 3 * rng.normal(size=150) > 0).astype(np.int64)
    y[120:] = -1
    split = TransductiveSplit(n_splits=2, n_repeats=3, k=0.1, rule="share", random_state=5)
    runs = [
        TransductiveSearchCV(SVM(), {"C": [0.01, 1.0, 100.0]}, split, n_jobs=jobs).fit(X, y)
        for jobs in (1, 2)
    ]
    one, two = (r.cv_results_ for r in runs)
    np.testing.assert_array_equal(fold_scores(one), fold_scores(two))
    assert runs[0].best_params_ == runs[1].best_params_
    assert np.unique(fold_scores(one)).size > 1  # the scores differ, so agreement means something


def test_a_failed_fit_scores_nan_and_other_errors_propagate():
    X, y = _problem()
    split = TransductiveSplit(n_splits=2, k=0.1, rule="share", random_state=0)
    search = TransductiveSearchCV(_Oracle(fail=10.0), {"C": [1.0, 10.0]}, split).fit(X, y)
    assert np.isnan(fold_scores(search.cv_results_)[1]).all()
    assert search.best_index_ == 0  # a point no fold scored never wins
    with pytest.raises(SolverError):
        TransductiveSearchCV(_Oracle(fail=10.0), {"C": [10.0]}, split, catch=()).fit(X, y)


def test_fit_params_are_a_fresh_copy_in_every_fold():
    X, y = _problem()
    split = TransductiveSplit(n_splits=3, k=0.1, rule="share", random_state=0)
    log: list = []
    _FITS.clear()
    TransductiveSearchCV(_Oracle(), {"C": [1.0, 10.0]}, split).fit(X, y, log=log)
    assert log == [] and len(_FITS) == 6  # each fold logged into its own copy


def test_refit_and_choose():
    X, y = _problem()
    split = TransductiveSplit(n_splits=2, k=0.1, rule="share", random_state=0)
    grid = [{"C": 1.0}, {"C": 10.0}]
    search = TransductiveSearchCV(_Oracle(k=4), grid, split, refit=True).fit(X, y)
    best = search.best_estimator_
    assert best.C == 10.0 and best.k == 4 and best.selected_.size == 4
    assert set(best.selected_) <= set(np.flatnonzero(y == -1))  # fitted on all rows
    worst = TransductiveSearchCV(_Oracle(), grid, split, choose=lambda res: 0).fit(X, y)
    assert worst.best_params_ == {"C": 1.0}


def test_the_fold_budget_rules():
    # AutoTTK's rule: the fold's share of k, raised to half its positives, below the fold
    assert fold_k(100, 20, 30, 10000) == 10
    assert fold_k(100, 20, 5000, 10000) == 50
    assert fold_k(10, 0, 1, 1000) == 1
    assert fold_k(10, 9, 5000, 10) == 9
    # the paper's rule: a share of the fold, at least 1 (the formula select_C always used)
    for n in range(1, 300):
        for share in (0.05, 0.1, 0.5):
            assert fold_k(n, n, share, rule="share") == max(1, round(share * n))


def test_a_large_labelled_set_is_sampled_by_class():
    rng = np.random.default_rng(0)
    y = np.r_[(rng.random(1000) < 0.2).astype(np.int64), -np.ones(10, dtype=np.int64)]
    folds, _ = TransductiveSplit(n_splits=2, max_rows=200, random_state=0).split(y)
    rows = np.concatenate([folds[0].train, folds[0].held])
    assert 195 <= rows.size <= 205 and rows.max() < 1000
    assert abs(y[rows].mean() - y[:1000].mean()) < 0.02  # stratified


def test_groups_hold_out_whole_blocks_and_too_few_rows_give_a_note():
    _, y = _problem(n=120, m=30)
    groups = np.arange(y.size) // 10
    folds, note = TransductiveSplit(n_splits=3, n_repeats=4, random_state=0).split(y, groups)
    lab = np.flatnonzero(y != -1)
    assert len(folds) == 3 and note == ""  # grouped folds are not repeated
    for fold in folds:
        assert not set(groups[lab][fold.train]) & set(groups[lab][fold.held])
    y_few = y.copy()
    y_few[y_few == 1] = 0
    y_few[0] = 1
    assert TransductiveSplit().split(y_few) == (
        [],
        "1 positive and 119 negative labelled rows: too few to cross-validate",
    )
    folds, note = TransductiveSplit(n_splits=5).split(np.r_[np.tile([0, 0, 0, 1], 3), -1])
    assert len(folds) == 3 and note == "cv reduced to 3 folds (3 positives)"


def test_search_results_and_the_precision_scorer():
    res = search_results(
        [{"C": 1.0}, {"C": 2.0}, {"C": 3.0}],
        np.array([[0.5, np.nan], [np.nan, np.nan], [0.5, 0.5]]),
    )
    assert res["mean_test_score"][0] == 0.5 and np.isnan(res["mean_test_score"][1])
    assert res["rank_test_score"].tolist() == [1, 3, 2]  # equal means: the first listed first

    class Fit:
        selected_ = np.array([4, 6])

    assert held_out_precision(Fit(), np.array([1, 1, 1, 1, 0, 0, 1])) == 0.5


def test_a_bad_rule_and_an_empty_grid_are_refused():
    X, y = _problem()
    with pytest.raises(InvalidInputError, match="rule must be one of"):
        TransductiveSplit(rule="half").split(y)
    with pytest.raises(InvalidInputError, match="param_grid"):
        TransductiveSearchCV(_Oracle(), [], TransductiveSplit()).fit(X, y)
