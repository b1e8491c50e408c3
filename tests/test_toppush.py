"""TopPush: projection and optimum against SLSQP, zero duality gap, top-negative focus."""

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
from reserve.solvers.toppush import TopPush, project_balanced, toppush_objective


def _slsqp_projection(a0, q0):
    m = a0.size
    v0 = np.r_[a0, q0]
    cons = [
        {"type": "eq", "fun": lambda v: v[:m].sum() - v[m:].sum()},
        {"type": "ineq", "fun": lambda v: v},
    ]
    res = minimize(
        lambda v: 0.5 * np.sum((v - v0) ** 2),
        np.zeros_like(v0),
        jac=lambda v: v - v0,
        constraints=cons,
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    return res.x[:m], res.x[m:]


@pytest.mark.parametrize("seed", range(8))
def test_projection_matches_generic_qp(seed):
    rng = np.random.default_rng(seed)
    a0 = rng.normal(size=rng.integers(1, 7)) * 2
    q0 = rng.normal(size=rng.integers(1, 7)) * 2
    a, q = project_balanced(a0, q0)
    a_ref, q_ref = _slsqp_projection(a0, q0)
    assert (a >= 0).all() and (q >= 0).all()
    assert a.sum() == pytest.approx(q.sum(), abs=1e-12)
    np.testing.assert_allclose(np.r_[a, q], np.r_[a_ref, q_ref], atol=1e-6)


def _primal_by_slsqp(Xp, Xn, C):
    """min 0.5||w||^2 + C sum s_i^2, s_i >= 1 + t - w.xp_i, s >= 0, t >= w.xn_j."""
    d, m = Xp.shape[1], Xp.shape[0]

    def f(v):
        w, s = v[:d], v[d + 1 :]
        return 0.5 * w @ w + C * s @ s

    cons = [
        {"type": "ineq", "fun": lambda v: v[d + 1 :] - 1.0 - v[d] + Xp @ v[:d]},
        {"type": "ineq", "fun": lambda v: v[d + 1 :]},
        {"type": "ineq", "fun": lambda v: v[d] - Xn @ v[:d]},
    ]
    v0 = np.r_[np.zeros(d), 0.0, np.ones(m)]
    res = minimize(
        f, v0, constraints=cons, method="SLSQP", options={"ftol": 1e-13, "maxiter": 1000}
    )
    return float(res.fun)


def _problem(seed, n=14, m=10, d=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + m, d))
    y = (X[:, 0] + 0.8 * rng.normal(size=n + m) > 0).astype(np.int64)
    y[n:] = -1
    return X, y


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("C", [0.1, 1.0])
def test_objective_matches_generic_primal_solver(seed, C):
    X, y = _problem(seed)
    est = TopPush(k=2, C=C, tol=1e-9, max_iter=20000).fit(X, y)
    lab = y != -1
    Xp, Xn = X[lab][y[lab] == 1], X[lab][y[lab] == 0]
    oracle = _primal_by_slsqp(Xp, Xn, C)
    assert est.objective_ == pytest.approx(toppush_objective(est.coef_, Xp, Xn, C))
    assert est.objective_ == pytest.approx(oracle, rel=1e-4, abs=1e-6)
    assert 0.0 <= est.duality_gap_ <= 1e-6 * max(1.0, est.objective_) + 1e-9


def test_only_the_top_negative_matters():
    # TopPush's loss sees the negatives only through the highest-scoring one: moving a
    # low-scoring negative further down must leave the solution unchanged.
    X, y = _problem(7, n=30)
    est = TopPush(k=2, C=1.0, tol=1e-10, max_iter=20000).fit(X, y)
    neg = np.flatnonzero(y == 0)
    s = X[neg] @ est.coef_
    low = neg[np.argmin(s)]
    assert s.max() - s.min() > 1.0
    X2 = X.copy()
    X2[low] -= 0.5 * est.coef_ / np.linalg.norm(est.coef_)
    est2 = TopPush(k=2, C=1.0, tol=1e-10, max_iter=20000).fit(X2, y)
    np.testing.assert_allclose(est2.coef_, est.coef_, atol=1e-4)


def test_selects_exactly_k_and_predict_marks_them():
    X, y = _problem(3)
    est = TopPush(k=3).fit(X, y)
    assert est.selected_.shape == (3,)
    assert set(est.selected_) <= set(np.flatnonzero(y == -1))
    marked = np.flatnonzero(est.predict(X[y == -1]) == 1)
    assert set(np.flatnonzero(y == -1)[marked]) == set(est.selected_.tolist())


def test_rejects_bad_params():
    X, y = _problem(0)
    with pytest.raises(InvalidInputError, match="max_iter"):
        TopPush(k=2, max_iter=0).fit(X, y)
    with pytest.raises(InvalidInputError, match="C"):
        TopPush(k=2, C=0).fit(X, y)


def test_sklearn_parameter_checks():
    est = TopPush()
    check_parameters_default_constructible("TopPush", est)
    check_no_attributes_set_in_init("TopPush", est)
    check_get_params_invariance("TopPush", est)
    check_set_params("TopPush", est)
