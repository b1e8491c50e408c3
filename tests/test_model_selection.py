"""Model selection: folds, budget, the argmax over C, reproducibility, parallel = serial."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator

from reserve.errors import InvalidInputError
from reserve.model_selection import PAPER_CS, select_and_fit, select_C
from reserve.solvers.svm import SVM

_LOG = []  # module level: clone() deep-copies parameters, so a list parameter would not do


class _Oracle(BaseEstimator):
    """Selects the true best candidates (feature 0 is the label) only when C == good_C."""

    def __init__(self, k=1, C=1.0, good_C=10.0):
        self.k = k
        self.C = C
        self.good_C = good_C

    def fit(self, X, y):
        cand = np.flatnonzero(y == -1)
        _LOG.append((cand.size, self.k, X.shape[0]))
        score = X[cand, 0] if self.C == self.good_C else -X[cand, 0]
        self.selected_ = cand[np.argsort(-score, kind="stable")[: self.k]]
        return self


def _data(n=200, m=40):
    rng = np.random.default_rng(0)
    y = np.r_[rng.random(n) < 0.4, np.zeros(m)].astype(np.int64)
    X = np.c_[y + 0.01 * rng.normal(size=n + m), rng.normal(size=n + m)]
    y[n:] = -1
    return X, y


@pytest.mark.parametrize("good", [0.1, 10.0])
def test_picks_the_C_that_selects_well(good):
    X, y = _data()
    sel = select_C(_Oracle(good_C=good), X, y, random_state=1)
    assert sel.best_C == good
    assert sel.scores.shape == (len(PAPER_CS), 10)
    i = PAPER_CS.index(good)
    assert (sel.scores[i] == 1.0).all()
    assert sel.mean_scores[i] == sel.mean_scores.max()


def test_held_out_fold_plays_the_candidates_with_5_percent_budget():
    X, y = _data(n=200, m=40)
    _LOG.clear()
    select_C(_Oracle(), X, y, random_state=0, Cs=(1.0,))
    assert len(_LOG) == 10
    for n_cand, k, n_rows in _LOG:
        assert n_rows == 200  # only the labelled rows take part, real candidates excluded
        assert n_cand == 100
        assert k == 5


def test_reproducible_and_parallel_equals_serial():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] + 3 * rng.normal(size=120) > 0).astype(np.int64)
    y[100:] = -1
    a = select_C(SVM(k=1), X, y, random_state=7, n_jobs=1)
    b = select_C(SVM(k=1), X, y, random_state=7, n_jobs=2)
    np.testing.assert_array_equal(a.scores, b.scores)
    assert a.best_C == b.best_C
    c = select_C(SVM(k=1), X, y, random_state=8)
    assert not np.array_equal(a.scores, c.scores)


def test_select_and_fit_uses_best_C_and_keeps_k():
    X, y = _data()
    est, sel = select_and_fit(_Oracle(k=3, good_C=0.01), X, y, random_state=0)
    assert est.C == sel.best_C == 0.01
    assert est.k == 3


def test_bad_inputs():
    X, y = _data()
    with pytest.raises(InvalidInputError, match="parameters C and k"):
        select_C(BaseEstimator(), X, y)
    with pytest.raises(InvalidInputError, match="n_folds"):
        select_C(SVM(), X, y, n_folds=1)
    y2 = y.copy()
    y2[(y2 == 1)] = 0
    y2[0] = 1
    with pytest.raises(InvalidInputError, match="at least n_folds"):
        select_C(SVM(), X, y2)


@pytest.mark.parametrize("polish", [False, True])
def test_parallel_cv_of_ttk_chooses_the_same_C_as_serial(polish):
    # the benchmark's TTK-FD CV (with and without the polish) over joblib workers
    from reserve.solvers import TTK

    rng = np.random.default_rng(5)
    X = rng.normal(size=(140, 3))
    y = (X[:, 0] + rng.normal(size=140) > 0.5).astype(np.int64)
    y[120:] = -1
    est = TTK(k=1, polish=polish)
    a = select_C(est, X, y, random_state=11, n_jobs=1)
    b = select_C(est, X, y, random_state=11, n_jobs=2)
    np.testing.assert_array_equal(a.scores, b.scores)
    assert a.best_C == b.best_C
    assert np.unique(a.mean_scores).size > 1  # the grid matters here, so agreement means something
