"""SVMperf: separation oracle vs enumeration; cutting-plane optimum vs the full QP."""

from itertools import combinations

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from reserve.errors import InvalidInputError
from reserve.solvers.svmperf import SVMPerf, most_violated_labelling


def _all_labellings(y_pm, k):
    n = y_pm.size
    for S in combinations(range(n), k):
        yb = -np.ones(n)
        yb[list(S)] = 1.0
        delta = 100.0 * (1.0 - (y_pm[list(S)] > 0).sum() / k)
        yield yb, delta


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("k", [1, 2, 3])
def test_most_violated_matches_enumeration(seed, k):
    rng = np.random.default_rng(seed)
    y_pm = np.where(rng.random(8) < 0.5, 1.0, -1.0)
    y_pm[:2] = [1.0, -1.0]
    s = rng.normal(size=8) * 30
    best = max(d + s @ (yb - y_pm) for yb, d in _all_labellings(y_pm, k))
    ybar, delta, viol = most_violated_labelling(s, y_pm, k)
    assert viol == pytest.approx(best)
    assert ybar.sum() == 2 * k - 8  # exactly k positives
    assert viol == pytest.approx(delta + s @ (ybar - y_pm))


def _full_qp(X, y_pm, k, C):
    """Every labelling's constraint written out, solved by SLSQP in (w, xi)."""
    G, D = [], []
    for yb, d in _all_labellings(y_pm, k):
        G.append(X.T @ (y_pm - yb))
        D.append(d)
    G, D = np.array(G), np.array(D)
    dim = X.shape[1]
    cons = [
        {"type": "ineq", "fun": lambda v: G @ v[:dim] + v[dim] - D},
        {"type": "ineq", "fun": lambda v: v[dim:]},
    ]
    res = minimize(
        lambda v: 0.5 * v[:dim] @ v[:dim] + C * v[dim],
        np.r_[np.zeros(dim), 100.0],
        constraints=cons,
        method="SLSQP",
        options={"ftol": 1e-12, "maxiter": 1000},
    )
    return float(res.fun)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("C", [0.001, 0.01, 1.0])
def test_cutting_plane_reaches_full_qp_optimum(seed, C):
    rng = np.random.default_rng(seed)
    n, m, d = 8, 8, 2
    X = rng.normal(size=(n + m, d))
    y = (X[:, 0] + rng.normal(size=n + m) > 0).astype(np.int64)
    y[:2] = [1, 0]
    y[n:] = -1
    est = SVMPerf(k=2, C=C, tol=1e-6).fit(X, y)
    assert est.k_train_ == 2
    y_pm = np.where(y[:n] == 1, 1.0, -1.0)
    oracle = _full_qp(X[:n], y_pm, 2, C)
    assert est.objective_ == pytest.approx(oracle, rel=1e-4, abs=1e-6)


def test_selects_exactly_k_from_candidates():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 3))
    y = (X[:, 1] > 0).astype(np.int64)
    y[30:] = -1
    est = SVMPerf(k=4).fit(X, y)
    assert est.selected_.shape == (4,)
    assert (est.selected_ >= 30).all()
    assert (est.predict(X[30:]) == 1).sum() == 4


def test_rejects_bad_params():
    X = np.eye(4)
    y = np.array([0, 1, -1, -1])
    with pytest.raises(InvalidInputError, match="tol"):
        SVMPerf(k=1, tol=-1).fit(X, y)


def test_sklearn_parameter_checks():
    est = SVMPerf()
    check_parameters_default_constructible("SVMPerf", est)
    check_no_attributes_set_in_init("SVMPerf", est)
    check_get_params_invariance("SVMPerf", est)
    check_set_params("SVMPerf", est)
