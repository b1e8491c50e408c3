"""AATP: each pivot QP against scipy's trust-constr, pivot choice, boundary and quantile."""

import numpy as np
import pytest
from scipy.optimize import Bounds, LinearConstraint, minimize
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from reserve.errors import InvalidInputError
from reserve.solvers.aatp import AATP, pivot_objective, solve_pivot


def _problem(seed, n=14, m=20, d=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + m, d))
    y = (X[:, 0] + 0.6 * rng.normal(size=n + m) > 0).astype(np.int64)
    y[:2] = [0, 1]
    y[n:] = -1
    return X, y


def _pivot_qp_by_scipy(X, y_pm, s, C, q):
    """Same QP in (w, xi, u), solved independently by trust-constr."""
    n, d = X.shape
    D = X - X[s]
    nv = d + 2 * n
    c = np.r_[np.zeros(d), np.full(n, C), np.zeros(n)]
    H = np.diag(np.r_[np.ones(d), np.zeros(2 * n)])
    A_h = np.hstack([y_pm[:, None] * D, np.eye(n), np.zeros((n, n))])  # >= 1
    A_u = np.hstack([D, np.zeros((n, n)), -np.eye(n)])  # w.D_i - u_i >= 0
    A_s = np.r_[np.zeros(d + n), np.ones(n)][None, :]  # sum u >= q n
    lb = np.r_[np.full(d, -np.inf), np.zeros(n), np.full(n, -np.inf)]
    ub = np.r_[np.full(d + n, np.inf), np.ones(n)]
    best = np.inf
    for seed in range(3):
        v0 = np.random.default_rng(seed).normal(size=nv)
        res = minimize(
            lambda v: 0.5 * v[:d] @ v[:d] + c @ v,
            v0,
            jac=lambda v: H @ v + c,
            hess=lambda v: H,
            method="trust-constr",
            constraints=[
                LinearConstraint(A_h, 1.0, np.inf),
                LinearConstraint(A_u, 0.0, np.inf),
                LinearConstraint(A_s, q * n, np.inf),
            ],
            bounds=Bounds(lb, ub),
            options={"gtol": 1e-10, "xtol": 1e-12, "maxiter": 5000},
        )
        if res.constr_violation < 1e-7:
            best = min(best, res.fun)
    return best


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("C", [0.1, 1.0])
def test_pivot_qp_matches_generic_solver(seed, C):
    X, y = _problem(seed)
    Xl = X[y != -1]
    y_pm = np.where(y[y != -1] == 1, 1.0, -1.0)
    s = int(np.argmin(Xl[:, 0]))  # the lowest row on the signal axis: always feasible
    w, obj = solve_pivot(Xl, y_pm, s, C, 0.2)
    assert obj == pytest.approx(pivot_objective(w, Xl, y_pm, s, C))
    assert np.minimum(1.0, (Xl - Xl[s]) @ w).sum() >= 0.2 * Xl.shape[0] - 1e-6
    ref = _pivot_qp_by_scipy(Xl, y_pm, s, C, 0.2)
    assert obj == pytest.approx(ref, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_fit_picks_best_pivot_on_boundary_with_quantile_met(seed):
    X, y = _problem(seed)
    n_lab = int((y != -1).sum())
    est = AATP(k=4, C=1.0, n_pivots=n_lab).fit(X, y)  # every labelled row tried
    objs = est.pivot_objectives_
    assert est.pivot_ in objs
    assert objs[est.pivot_] == pytest.approx(min(objs.values()))
    # exhaustive: no other pivot row (solved independently) beats the chosen one
    Xl = X[y != -1]
    y_pm = np.where(y[y != -1] == 1, 1.0, -1.0)
    q = 4 / (y == -1).sum()
    assert est.aatp_objective_ == pytest.approx(objs[est.pivot_])
    f = Xl @ est.coef_ + est.raw_intercept_
    assert X[est.pivot_] @ est.coef_ + est.raw_intercept_ == pytest.approx(0.0, abs=1e-9)
    assert (f >= -1e-7).sum() >= q * n_lab
    assert est.aatp_objective_ == pytest.approx(
        pivot_objective(est.coef_, Xl, y_pm, est.pivot_, 1.0)
    )
    cand = X[y == -1] @ est.coef_ + est.intercept_
    assert (cand > 1e-12).sum() <= 4
    assert est.selected_.shape == (4,)


def test_rejects_bad_params():
    X, y = _problem(0)
    with pytest.raises(InvalidInputError, match="n_pivots"):
        AATP(k=2, n_pivots=0).fit(X, y)


def test_sklearn_parameter_checks():
    est = AATP()
    check_parameters_default_constructible("AATP", est)
    check_no_attributes_set_in_init("AATP", est)
    check_get_params_invariance("AATP", est)
    check_set_params("AATP", est)
