"""SVM baseline: its optimum against an independent SLSQP solve, the intercept shift, API."""

import numpy as np
import pytest
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from reserve.errors import InvalidInputError
from reserve.solvers._qp import hinge_objective
from reserve.solvers.svm import SVM, kth_largest, shifted_intercept
from tests._oracle import solve_subset_qp


def _problem(seed, n=16, m=12, d=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + m, d))
    y = (X[:, 0] + 0.7 * rng.normal(size=n + m) > 0).astype(np.int64)
    y[n:] = -1
    return X, y


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_unshifted_svm_matches_slsqp_optimum(seed, C):
    X, y = _problem(seed)
    est = SVM(k=3, C=C).fit(X, y)
    lab = y != -1
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    _, _, oracle = solve_subset_qp(X[lab], y_pm, C, np.zeros((0, 2)))
    ours = hinge_objective(est.coef_, est.raw_intercept_, X[lab], y_pm, C)
    assert ours == pytest.approx(oracle, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_shift_keeps_at_most_k_positive_and_selects_top_k(seed):
    X, y = _problem(seed)
    est = SVM(k=3, C=1.0).fit(X, y)
    cand = np.flatnonzero(y == -1)
    scores = X[cand] @ est.coef_ + est.intercept_
    assert (scores > 1e-12).sum() <= 3
    assert est.intercept_ <= est.raw_intercept_
    assert sorted(est.selected_.tolist()) == sorted(cand[np.argsort(-scores)[:3]].tolist())
    lab = y != -1
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    assert est.objective_ == pytest.approx(
        hinge_objective(est.coef_, est.intercept_, X[lab], y_pm, 1.0)
    )


def test_shift_is_zero_when_budget_already_met():
    assert shifted_intercept(-5.0, np.array([1.0, 2.0, 3.0]), 1) == -5.0
    assert shifted_intercept(0.0, np.array([1.0, 2.0, 3.0]), 1) == -2.0
    assert kth_largest(np.array([1.0]), 2) == -np.inf


def test_rejects_bad_C_and_k():
    X, y = _problem(0)
    with pytest.raises(InvalidInputError, match="C"):
        SVM(k=2, C=-1.0).fit(X, y)
    with pytest.raises(InvalidInputError, match="k"):
        SVM(k=50).fit(X, y)


def test_sklearn_parameter_checks():
    est = SVM()
    check_parameters_default_constructible("SVM", est)
    check_no_attributes_set_in_init("SVM", est)
    check_get_params_invariance("SVM", est)
    check_set_params("SVM", est)
