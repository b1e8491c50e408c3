"""Class and sample weights of TTK and MultiTTK: ``0.5 ||w||^2 + C sum_i c_i xi_i``.

The optima come from the independent brute force (tests/_oracle.py: every k-subset, each
fixed-set QP by scipy's SLSQP with the weights in its own objective), cached in
tests/data/oracle_optima.json like the unweighted ones (test_oracle_cache.py recomputes a
sample). A second check needs no oracle: integer weights must give the fit of the data with
each row repeated that often, which catches a weight applied in one solver and not another.
"""

from __future__ import annotations

import numpy as np
import pytest

from reserve.errors import InvalidInputError
from reserve.solvers import TTK, MultiTTK
from tests._oracle import (
    ORACLE_SEEDS,
    _objective,
    make_weighted_instance,
    make_weighted_multi_instance,
)

pytest.importorskip("pyscipopt")


def _sample_weight(y, c):
    """``c`` on the labelled rows, NaN on the candidates (their entries must not be read)."""
    sw = np.full(y.shape[0], np.nan)
    sw[np.asarray(y).reshape(y.shape[0], -1)[:, 0] != -1] = c
    return sw


def _rescored(model, X, y, C, c):
    """The weighted objective recomputed by the oracle's own function from coef_, intercept_."""
    lab = y != -1
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    return _objective(model.coef_, model.intercept_, X[lab], y_pm, C, c)


@pytest.mark.parametrize("seed", ORACLE_SEEDS["ttk_weighted"])
@pytest.mark.parametrize("mip_solver", ["scip", "bnb"])
def test_mip_and_bnb_reach_the_weighted_optimum(oracle_optima, seed, mip_solver):
    X, y, k, C, c = make_weighted_instance(seed)
    opt = oracle_optima["ttk_weighted"][str(seed)]
    model = TTK(k=k, C=C, solver="mip", mip_solver=mip_solver)
    model.fit(X, y, sample_weight=_sample_weight(y, c))
    assert model.objective_ == pytest.approx(opt, rel=1e-6)
    assert model.objective_ == pytest.approx(_rescored(model, X, y, C, c), rel=1e-9)
    assert int((X[y == -1] @ model.coef_ + model.intercept_ > 0).sum()) <= k


@pytest.mark.parametrize("seed", ORACLE_SEEDS["ttk_weighted"])
def test_fd_and_polish_come_close_and_never_below(oracle_optima, seed):
    X, y, k, C, c = make_weighted_instance(seed)
    opt = oracle_optima["ttk_weighted"][str(seed)]
    model = TTK(k=k, C=C).fit(X, y, sample_weight=_sample_weight(y, c))
    assert opt * (1 - 1e-6) <= model.objective_ <= opt * 1.01
    assert model.objective_ == pytest.approx(_rescored(model, X, y, C, c), rel=1e-9)
    assert model.objective_history_ == sorted(model.objective_history_, reverse=True)


@pytest.mark.parametrize("seed", ORACLE_SEEDS["multi_weighted"])
def test_multi_species_weighted_optimum(oracle_optima, seed):
    X, Y, k, C, sw, c = make_weighted_multi_instance(seed)
    opt = oracle_optima["multi_weighted"][str(seed)]
    lab = Y[:, 0] != -1
    Y_pm = np.where(Y[lab] == 1, 1.0, -1.0)
    sw_all = _sample_weight(Y, sw)
    for solver in ("mip", "fd"):
        model = MultiTTK(k=k, C=C, solver=solver, class_weight="balanced")
        model.fit(X, Y, sample_weight=sw_all)
        rescored = sum(
            _objective(model.coef_[s], model.intercept_[s], X[lab], Y_pm[:, s], C, c[:, s])
            for s in range(Y.shape[1])
        )
        assert model.objective_ == pytest.approx(rescored, rel=1e-9)
        assert model.objective_ >= opt * (1 - 1e-6)
        assert model.objective_ <= opt * (1 + (1e-6 if solver == "mip" else 1e-2)), solver


def _repeated(X, y, reps):
    """The labelled rows repeated ``reps`` times each, then the candidates."""
    lab = np.flatnonzero(np.asarray(y).reshape(len(y), -1)[:, 0] != -1)
    cand = np.setdiff1d(np.arange(len(y)), lab)
    rows = np.r_[np.repeat(lab, reps), cand]
    return X[rows], y[rows], rows


@pytest.mark.parametrize("seed", [0, 3, 9])
@pytest.mark.parametrize(
    ("solver", "mip_solver"), [("fd", "auto"), ("mip", "scip"), ("mip", "bnb")]
)
def test_integer_weights_equal_repeated_rows(seed, solver, mip_solver):
    X, y, k, C, _ = make_weighted_instance(seed)
    reps = np.random.default_rng(seed).integers(1, 4, int((y != -1).sum()))
    Xr, yr, rows = _repeated(X, y, reps)
    a = TTK(k=k, C=C, solver=solver, mip_solver=mip_solver)
    a.fit(X, y, sample_weight=_sample_weight(y, reps.astype(float)))
    b = TTK(k=k, C=C, solver=solver, mip_solver=mip_solver).fit(Xr, yr)
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-6)
    assert a.selected_.tolist() == rows[b.selected_].tolist()


@pytest.mark.parametrize("solver", ["fd", "mip"])
def test_integer_weights_equal_repeated_rows_multi(solver):
    X, Y, k, C, _, _ = make_weighted_multi_instance(1)
    reps = np.random.default_rng(1).integers(1, 4, int((Y[:, 0] != -1).sum()))
    Xr, Yr, rows = _repeated(X, Y, reps)
    a = MultiTTK(k=k, C=C, solver=solver)
    a.fit(X, Y, sample_weight=_sample_weight(Y, reps.astype(float)))
    b = MultiTTK(k=k, C=C, solver=solver).fit(Xr, Yr)
    assert a.objective_ == pytest.approx(b.objective_, rel=1e-6)
    assert a.selected_.tolist() == rows[b.selected_].tolist()


def test_zero_weight_is_an_absent_row_and_unit_weights_are_no_weights():
    X, y, k, C, _ = make_weighted_instance(2)
    lab = np.flatnonzero(y != -1)
    sw = np.ones(len(y))
    sw[lab[2:5]] = 0.0
    a = TTK(k=k, C=C).fit(X, y, sample_weight=sw)
    keep = np.setdiff1d(np.arange(len(y)), lab[2:5])
    b = TTK(k=k, C=C).fit(X[keep], y[keep])
    assert a.selected_.tolist() == keep[b.selected_].tolist()
    np.testing.assert_array_equal(a.coef_, b.coef_)
    ones = TTK(k=k, C=C).fit(X, y, sample_weight=np.ones(len(y)))
    plain = TTK(k=k, C=C).fit(X, y)
    np.testing.assert_array_equal(ones.coef_, plain.coef_)
    assert ones.intercept_ == plain.intercept_


def test_class_weight_is_a_sample_weight_per_class():
    X, y, k, C, c = make_weighted_instance(4)
    lab = y != -1
    n, n_pos = int(lab.sum()), int((y == 1).sum())
    balanced = np.where(y == 1, n / (2.0 * n_pos), n / (2.0 * (n - n_pos)))
    a = TTK(k=k, C=C, class_weight="balanced").fit(X, y)
    b = TTK(k=k, C=C).fit(X, y, sample_weight=balanced)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12, atol=1e-12)
    sw = _sample_weight(y, c)
    d = TTK(k=k, C=C, class_weight={0: 0.5, 1: 3.0}).fit(X, y, sample_weight=sw)
    e = TTK(k=k, C=C).fit(X, y, sample_weight=np.where(y == 1, 3.0, 0.5) * sw)
    np.testing.assert_allclose(d.coef_, e.coef_, rtol=1e-12, atol=1e-12)
    assert a.objective_ != pytest.approx(TTK(k=k, C=C).fit(X, y).objective_, rel=1e-3)


def _rare_class(seed: int):
    """8 positives among 120 labelled rows, one weakly informative feature of 4."""
    rng = np.random.default_rng(seed)
    n, m = 120, 60
    X = rng.normal(size=(n + m, 4))
    y = np.zeros(n, dtype=int)
    y[rng.choice(n, 8, replace=False)] = 1
    X[:n][y == 1, 0] += 0.7
    return X, np.r_[y, -np.ones(m, dtype=int)]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_trivial_scorer_is_flagged_and_balancing_leaves_it(seed):
    X, y = _rare_class(seed)
    plain = TTK(k=5).fit(X, y)
    assert plain.trivial_ and plain.score_spread_ < 1e-6
    assert np.linalg.norm(plain.coef_) < 1e-6
    balanced = TTK(k=5, class_weight="balanced").fit(X, y)
    assert not balanced.trivial_ and balanced.score_spread_ > 1.0
    X0, y0, *_ = make_weighted_instance(4)
    assert not TTK(k=2).fit(X0, y0).trivial_


@pytest.mark.parametrize(
    ("kwargs", "fit_kw", "needle"),
    [
        ({"class_weight": "balance"}, {}, "class_weight must be"),
        ({"class_weight": {2: 1.0}}, {}, "class_weight must be"),
        ({"class_weight": {1: -1.0}}, {}, "class_weight must be"),
        ({}, {"sample_weight": np.ones(3)}, "sample_weight must be one number per row"),
        ({}, {"sample_weight": "heavy"}, "sample_weight must be one number per row"),
        ({}, {"sample_weight": "neg"}, "finite and >= 0"),
        ({}, {"sample_weight": "nan"}, "finite and >= 0"),
        ({}, {"sample_weight": "no_pos"}, "class 1 has sample_weight 0"),
    ],
)
def test_bad_weights_are_refused_with_the_fix(kwargs, fit_kw, needle):
    X, y, k, C, _ = make_weighted_instance(3)
    sw = fit_kw.get("sample_weight")
    if isinstance(sw, str) and sw != "heavy":
        arr = np.ones(len(y))
        arr[{"neg": 0, "nan": 1}.get(sw, 0)] = {"neg": -1.0, "nan": np.nan}.get(sw, 1.0)
        if sw == "no_pos":
            arr[y == 1] = 0.0
        fit_kw = {"sample_weight": arr}
    with pytest.raises(InvalidInputError, match=needle):
        TTK(k=k, C=C, **kwargs).fit(X, y, **fit_kw)
    with pytest.raises(InvalidInputError, match=needle):
        MultiTTK(k=k, C=C, **kwargs).fit(X, y.reshape(-1, 1), **fit_kw)


def test_candidate_weights_are_not_read():
    X, y, k, C, c = make_weighted_instance(6)
    sw = _sample_weight(y, c)
    a = TTK(k=k, C=C).fit(X, y, sample_weight=sw)
    sw[y == -1] = 1e6
    b = TTK(k=k, C=C).fit(X, y, sample_weight=sw)
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_cutting_plane_minimises_the_weighted_hinge():
    from reserve.solvers._qp import solve_fixed_set

    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 3))
    y_pm = np.where(X[:, 0] + 0.8 * rng.normal(size=300) > 1.0, 1.0, -1.0)
    Z = rng.normal(size=(40, 3)) + 1.0
    c = np.where(y_pm > 0, 3.0, 1.0) * rng.integers(1, 3, 300)
    cp = solve_fixed_set(X, y_pm, 0.5 * c, Z, method="cutting_plane", tol=1e-9)
    ip = solve_fixed_set(X, y_pm, 0.5 * c, Z, method="clarabel")
    rows = np.repeat(np.arange(300), c.astype(int))
    rep = solve_fixed_set(X[rows], y_pm[rows], 0.5, Z, method="clarabel")
    assert cp.objective == pytest.approx(ip.objective, rel=1e-6)
    assert cp.objective == pytest.approx(rep.objective, rel=1e-6)
    assert cp.objective == pytest.approx(_objective(cp.w, cp.b, X, y_pm, 0.5, c), rel=1e-9)
    assert float((Z @ cp.w + cp.b).max()) <= 0.0


def test_multi_species_flags_the_trivial_species():
    X, y = _rare_class(0)
    common = np.r_[(X[:120, 1] > 0).astype(int), -np.ones(60, dtype=int)]
    Y = np.c_[y, common]
    plain = MultiTTK(k=5).fit(X, Y)
    assert plain.trivial_.tolist() == [True, False]
    balanced = MultiTTK(k=5, class_weight="balanced").fit(X, Y)
    assert balanced.trivial_.tolist() == [False, False]
