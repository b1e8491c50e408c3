"""TSVM (CCCP): recomputed objective, monotone descent, balancing, fixed point vs scipy."""

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
from reserve.solvers.tsvm import TSVM


def _problem(seed, n=10, m=10, d=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + m, d))
    y = (X[:, 0] + 0.5 * rng.normal(size=n + m) > 0).astype(np.int64)
    y[:2] = [0, 1]
    y[n:] = -1
    return X, y


def _J(w, b, X, y_pm, Z, C, Cu, s):
    """TSVM objective written independently: ramp = clip(1 - t, 0, 1 - s)."""
    f = Z @ w + b
    lab = np.clip(1 - y_pm * (X @ w + b), 0, None).sum()
    unl = np.clip(1 - f, 0, 1 - s).sum() + np.clip(1 + f, 0, 1 - s).sum()
    return 0.5 * w @ w + C * lab + Cu * unl


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_objective_recomputed_descends_and_balances(seed, C):
    X, y = _problem(seed)
    est = TSVM(k=2, C=C).fit(X, y)
    lab, cand = y != -1, y == -1
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    J = _J(est.coef_, est.raw_intercept_, X[lab], y_pm, X[cand], C, C, -0.3)
    assert est.objective_ == pytest.approx(J, rel=1e-9)
    path = np.array(est.objective_path_)
    assert (np.diff(path) <= 1e-6 * np.abs(path[:-1]) + 1e-9).all()
    f = X[cand] @ est.coef_ + est.raw_intercept_
    assert f.mean() == pytest.approx(y_pm.mean(), abs=1e-6)


def _cccp_subproblem_by_trust_constr(X, y_pm, Z, C, Cu, lin, target):
    """The linearised convex problem as a QP with slacks, solved by scipy's trust-constr."""
    n, d = X.shape
    u = Z.shape[0]
    nw, nv = d + 1, d + 1 + n + 2 * u
    c = np.r_[Z.T @ lin, lin.sum(), np.full(n, C), np.full(2 * u, Cu)]
    H = np.diag(np.r_[np.ones(d), np.zeros(nv - d)])
    # xi_l + y (Xw + b) >= 1 ; xi_p + (Zw + b) >= 1 ; xi_n - (Zw + b) >= 1
    A = np.zeros((n + 2 * u, nv))
    A[:n, :d], A[:n, d] = y_pm[:, None] * X, y_pm
    A[n : n + u, :d], A[n : n + u, d] = Z, 1.0
    A[n + u :, :d], A[n + u :, d] = -Z, -1.0
    A[:, nw:] = np.eye(n + 2 * u)
    eq = np.r_[Z.mean(axis=0), 1.0, np.zeros(n + 2 * u)][None, :]
    lb = np.r_[np.full(nw, -np.inf), np.zeros(n + 2 * u)]
    res = minimize(
        lambda v: 0.5 * v[:d] @ v[:d] + c @ v,
        np.r_[np.zeros(d), target, np.full(n + 2 * u, 3.0)],
        jac=lambda v: H @ v + c,
        hess=lambda v: H,
        method="trust-constr",
        constraints=[LinearConstraint(A, 1.0, np.inf), LinearConstraint(eq, target, target)],
        bounds=Bounds(lb, np.inf),
        options={"gtol": 1e-10, "xtol": 1e-12, "maxiter": 5000},
    )
    return float(res.fun)


@pytest.mark.parametrize("seed", range(3))
def test_converged_point_is_a_cccp_fixed_point(seed):
    # At convergence (w, b) solves the convex problem linearised at itself: no other point
    # of that convex problem (found here by a generic solver) does better.
    X, y = _problem(seed)
    C, s = 1.0, -0.3
    est = TSVM(k=2, C=C, tol=1e-12, max_iter=100).fit(X, y)
    lab, cand = y != -1, y == -1
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    Z = X[cand]
    w, b = est.coef_, est.raw_intercept_
    f = Z @ w + b
    lin = C * ((f < s).astype(float) - (f > -s))
    ours = (
        0.5 * w @ w
        + C * np.clip(1 - y_pm * (X[lab] @ w + b), 0, None).sum()
        + C * (np.clip(1 - f, 0, None).sum() + np.clip(1 + f, 0, None).sum())
        + lin @ f
    )
    ref = _cccp_subproblem_by_trust_constr(X[lab], y_pm, Z, C, C, lin, y_pm.mean())
    assert ours <= ref + 1e-4 * max(1.0, abs(ref))


def test_selects_exactly_k_and_at_most_k_positive():
    X, y = _problem(1, n=30, m=30)
    est = TSVM(k=3).fit(X, y)
    assert est.selected_.shape == (3,)
    assert (est.decision_function(X[y == -1]) > 1e-12).sum() <= 3


def test_rejects_bad_params():
    X, y = _problem(0)
    with pytest.raises(InvalidInputError, match="s must"):
        TSVM(k=2, s=1.5).fit(X, y)
    with pytest.raises(InvalidInputError, match="C_unlabelled"):
        TSVM(k=2, C_unlabelled=-1.0).fit(X, y)


def test_sklearn_parameter_checks():
    est = TSVM()
    check_parameters_default_constructible("TSVM", est)
    check_no_attributes_set_in_init("TSVM", est)
    check_get_params_invariance("TSVM", est)
    check_set_params("TSVM", est)


def test_time_limit_returns_the_balanced_start():
    X, y = _problem(2, n=30, m=30)
    est = TSVM(k=3, max_time=1e-9).fit(X, y)
    assert est.stop_reason_ == "max_time"
    assert est.n_iter_ == 0 and len(est.objective_path_) == 1
    full = TSVM(k=3).fit(X, y)
    assert full.stop_reason_ in {"converged", "stalled"}
    assert full.objective_ <= est.objective_
