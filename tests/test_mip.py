"""Tests of the exact TTK solver (reserve.solvers._mip) against an independent oracle."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from reserve.errors import InvalidInputError, MissingDependencyError
from reserve.paper.datasets import load_benchmark, transductive_split
from reserve.solvers._base import budget_select, top_k
from reserve.solvers._mip import solve_ttk_mip
from reserve.solvers._qp import hinge_objective
from reserve.solvers.constraints import Constraints
from tests._oracle import (
    binding_instance,
    brute_force_ttk,
    brute_force_ttk_cost,
    make_cost_instance,
    split_cost_instance,
)
from tests._single import cells, mip1, money

PROVED = ("optimal", "gap_limit")


def _n_positive(r, X_cand) -> int:
    return int(np.count_nonzero(X_cand @ r.w + r.b > 0))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_matches_brute_force_oracle(seed):
    X, y, X_lab, y_pm, X_cand = binding_instance(seed)
    k, C = 2, 1.0
    oracle_obj, *_ = brute_force_ttk(X, y, k, C)
    r = mip1(X_lab, y_pm, X_cand, cells(k, X_cand), C, time_limit=20, mip_gap=1e-9)
    assert r.status in PROVED
    assert abs(r.objective - oracle_obj) <= 1e-6 * oracle_obj
    assert r.bound <= r.objective
    assert r.bound >= oracle_obj * (1 - 1e-6)  # a proved bound cannot exceed the optimum
    assert _n_positive(r, X_cand) <= k


def test_budget_binds_on_the_oracle_instances():
    # Guard for the test above: without the budget the SVM would select more than k,
    # so agreement with the oracle really exercises the integer part.
    _, _, X_lab, y_pm, X_cand = binding_instance(0)
    from reserve.solvers._qp import solve_fixed_set

    svm = solve_fixed_set(X_lab, y_pm, 1.0)
    assert np.count_nonzero(X_cand @ svm.w + svm.b > 0) > 2


@pytest.mark.parametrize("formulation", ["tight", "simple", "indicator"])
def test_formulations_agree(formulation):
    _, _, X_lab, y_pm, X_cand = binding_instance(5, n=12, m=8, d=3)
    ref = mip1(X_lab, y_pm, X_cand, cells(3, X_cand), 2.0, time_limit=20, mip_gap=1e-9)
    r = mip1(
        X_lab,
        y_pm,
        X_cand,
        cells(3, X_cand),
        2.0,
        time_limit=20,
        mip_gap=1e-9,
        formulation=formulation,
    )
    assert ref.status in PROVED and r.status in PROVED
    assert r.objective == pytest.approx(ref.objective, rel=1e-6)


def test_objective_and_selection_are_recomputed_from_w_b():
    _, _, X_lab, y_pm, X_cand = binding_instance(7, n=14, m=9, d=3)
    k = 3
    r = mip1(X_lab, y_pm, X_cand, cells(k, X_cand), 1.0, time_limit=20)
    assert r.objective == hinge_objective(r.w, r.b, X_lab, y_pm, 1.0)
    scores = X_cand @ r.w + r.b
    np.testing.assert_array_equal(r.selected, top_k(scores, k))
    assert len(set(r.selected.tolist())) == k
    assert r.solver in ("scip", "gurobi")
    assert r.n_nodes >= 0 and r.runtime > 0
    assert r.gap == pytest.approx((r.objective - r.bound) / r.objective)


def test_never_worse_than_the_warm_start_even_an_infeasible_one():
    _, _, X_lab, y_pm, X_cand = binding_instance(3, n=14, m=9, d=3)
    k, C = 2, 1.0
    # A poor start that scores every candidate positive: the solver must repair it
    # (lower b) and still return at most its objective once repaired.
    w0 = np.array([0.1, 0.1, 0.1])
    b0 = 50.0
    r = mip1(X_lab, y_pm, X_cand, cells(k, X_cand), C, warm_start=(w0, b0), time_limit=20)
    assert _n_positive(r, X_cand) <= k
    s = np.sort(X_cand @ w0 + b0)[::-1]
    repaired = hinge_objective(w0, b0 - s[k], X_lab, y_pm, C)
    assert r.objective <= repaired
    assert r.bound <= r.objective


def test_warm_start_from_optimum_is_kept_and_proved():
    X, y, X_lab, y_pm, X_cand = binding_instance(1)
    oracle_obj, w, b, _ = brute_force_ttk(X, y, 2, 1.0)
    r = mip1(X_lab, y_pm, X_cand, cells(2, X_cand), 1.0, warm_start=(w, b), time_limit=20)
    assert r.objective <= hinge_objective(w, b, X_lab, y_pm, 1.0) + 1e-9
    assert r.status in PROVED
    assert r.objective == pytest.approx(oracle_obj, rel=1e-6)


def test_centring_is_exact():
    # Shifting every feature by a constant changes only the intercept of the optimum.
    _, _, X_lab, y_pm, X_cand = binding_instance(2)
    shift = np.array([100.0, -40.0])
    a = mip1(X_lab, y_pm, X_cand, cells(2, X_cand), 1.0, time_limit=20, mip_gap=1e-9)
    c = mip1(
        X_lab + shift, y_pm, X_cand + shift, cells(2, X_cand), 1.0, time_limit=20, mip_gap=1e-9
    )
    assert c.objective == pytest.approx(a.objective, rel=1e-6)
    np.testing.assert_allclose(c.w, a.w, atol=1e-4)
    assert c.b == pytest.approx(a.b - shift @ a.w, abs=1e-3)
    assert sorted(c.selected.tolist()) == sorted(a.selected.tolist())


def test_time_limit_returns_feasible_incumbent_and_says_so():
    # Sonar (d = 60, n = m = 104) is far from proved in a second and a half.
    X, y = load_benchmark("sonar")
    Xa, y_fit, _, k = transductive_split(X, y, random_state=0)
    lab = y_fit != -1
    y_pm = np.where(y_fit[lab] == 1, 1.0, -1.0)
    X_cand = Xa[~lab]
    r = mip1(Xa[lab], y_pm, X_cand, cells(k, X_cand), 1.0, time_limit=1.5)
    assert r.status == "time_limit"
    assert r.gap > 1e-3
    assert r.bound < r.objective
    assert r.selected.shape == (k,) and len(set(r.selected.tolist())) == k
    assert _n_positive(r, X_cand) <= k
    assert r.objective == hinge_objective(r.w, r.b, Xa[lab], y_pm, 1.0)
    assert r.runtime < 10.0


@pytest.mark.parametrize("bad", [0, -1.0, 0.0, float("nan"), "60"])
def test_time_limit_must_be_positive(bad):
    _, _, X_lab, y_pm, X_cand = binding_instance(0)
    with pytest.raises(InvalidInputError, match="time_limit"):
        mip1(X_lab, y_pm, X_cand, cells(2, X_cand), 1.0, time_limit=bad)


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"k": 0}, "budget must fit some candidate"),
        ({"k": 7}, "budget must fit some candidate"),
        ({"C": -1.0}, "C"),
        ({"mip_gap": -0.1}, "mip_gap"),
        ({"threads": 0}, "threads"),
        ({"solver": "cplex"}, "solver"),
        ({"formulation": "sos"}, "formulation"),
    ],
)
def test_bad_parameters_are_refused(kwargs, word):
    _, _, X_lab, y_pm, X_cand = binding_instance(0)
    args = {"k": 2, "C": 1.0} | kwargs
    k, C = args.pop("k"), args.pop("C")
    with pytest.raises(InvalidInputError, match=word):
        mip1(X_lab, y_pm, X_cand, cells(k, X_cand), C, **args)


def test_bad_arrays_are_refused():
    _, _, X_lab, y_pm, X_cand = binding_instance(0)
    with pytest.raises(InvalidInputError, match="y_pm"):
        mip1(X_lab, np.abs(y_pm), X_cand, cells(2, X_cand), 1.0)
    with pytest.raises(InvalidInputError, match="columns"):
        mip1(X_lab, y_pm, X_cand[:, :1], cells(2, X_cand), 1.0)
    with pytest.raises(InvalidInputError, match=r"labels of shape \(n, 2\)"):
        two = Constraints.cells(2, X_cand.shape[0], n_species=2)
        solve_ttk_mip(X_lab, y_pm[:, None], X_cand, two, 1.0)
    with pytest.raises(InvalidInputError, match="warm_start"):
        mip1(X_lab, y_pm, X_cand, cells(2, X_cand), 1.0, warm_start=(np.zeros(5), 0.0))


def test_missing_scip_gives_the_install_line(monkeypatch):
    _, _, X_lab, y_pm, X_cand = binding_instance(0)
    monkeypatch.setitem(sys.modules, "pyscipopt", None)  # makes `import pyscipopt` fail
    monkeypatch.setitem(sys.modules, "gurobipy", None)
    with pytest.raises(MissingDependencyError) as info:
        mip1(X_lab, y_pm, X_cand, cells(2, X_cand), 1.0, solver="scip")
    assert "pip install pyscipopt" in str(info.value).splitlines()


def test_gurobi_requested_but_missing(monkeypatch):
    _, _, X_lab, y_pm, X_cand = binding_instance(0)
    monkeypatch.setitem(sys.modules, "gurobipy", None)
    with pytest.raises(MissingDependencyError, match="pip install gurobipy"):
        mip1(X_lab, y_pm, X_cand, cells(2, X_cand), 1.0, solver="gurobi")


# --------------------------------------------------------------------------------------------
# End to end through the estimator: TTK(solver="mip")
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 2])
def test_ttk_mip_end_to_end_matches_oracle_and_beats_fd(seed):
    from reserve.solvers.ttk import TTK

    X, y, *_ = binding_instance(seed)
    k = 2
    oracle_obj, *_ = brute_force_ttk(X, y, k, 1.0)
    fd = TTK(k=k, C=1.0).fit(X, y)
    est = TTK(k=k, C=1.0, solver="mip", time_limit=20, mip_gap=1e-9).fit(X, y)
    assert est.status_ in PROVED
    assert est.objective_ == pytest.approx(oracle_obj, rel=1e-6)
    assert est.objective_ <= fd.objective_ + 1e-9
    assert est.bound_ <= est.objective_
    assert est.gap_ == pytest.approx((est.objective_ - est.bound_) / est.objective_, abs=1e-9)
    assert est.mip_solver_ in ("scip", "gurobi") and est.n_nodes_ >= 0
    cand = np.flatnonzero(y == -1)
    assert est.selected_.shape == (k,) and set(est.selected_.tolist()) <= set(cand.tolist())
    np.testing.assert_array_equal(
        est.selected_, cand[top_k(X[cand] @ est.coef_ + est.intercept_, k)]
    )


def test_ttk_mip_time_limit_is_reported():
    from reserve.solvers.ttk import TTK

    X, y = load_benchmark("sonar")
    Xa, y_fit, _, k = transductive_split(X, y, random_state=1)
    est = TTK(k=k, C=1.0, solver="mip", time_limit=1.0).fit(Xa, y_fit)
    assert est.status_ == "time_limit" and est.gap_ > 0
    assert est.selected_.shape == (k,)
    cand = np.flatnonzero(y_fit == -1)
    assert np.count_nonzero(Xa[cand] @ est.coef_ + est.intercept_ > 0) <= k


@pytest.mark.parametrize("bad", [0, -5.0])
def test_ttk_mip_refuses_non_positive_time_limit(bad):
    from reserve.solvers.ttk import TTK

    X, y, *_ = binding_instance(0)
    with pytest.raises(InvalidInputError, match="time_limit"):
        TTK(k=2, solver="mip", time_limit=bad).fit(X, y)


def test_ttk_mip_without_scip_gives_the_install_line(monkeypatch):
    from reserve.solvers.ttk import TTK

    X, y, *_ = binding_instance(0)
    monkeypatch.setitem(sys.modules, "pyscipopt", None)
    monkeypatch.setitem(sys.modules, "gurobipy", None)
    with pytest.raises(MissingDependencyError, match="pip install pyscipopt"):
        TTK(k=2, solver="mip").fit(X, y)


@pytest.mark.parametrize("seed", [0, 2])
def test_tightening_and_fixing_agree_with_the_plain_big_m(seed):
    # On these diabetes subsamples the tightening fixes candidates in and out; the
    # closed-form big-M formulation fixes nothing, so it is an independent check that no
    # fixing cuts off the optimum (a sign error in the lower score bound once did).
    X, y = load_benchmark("diabetes")
    idx = np.random.default_rng(seed).choice(X.shape[0], 80, replace=False)
    Xa, y_fit, _, k = transductive_split(X[idx], y[idx], random_state=seed, k_fraction=0.1)
    lab = y_fit != -1
    y_pm = np.where(y_fit[lab] == 1, 1.0, -1.0)
    args = (Xa[lab], y_pm, Xa[~lab], cells(k, Xa[~lab]), 1.0)
    tight = mip1(*args, time_limit=20, mip_gap=1e-9)
    plain = mip1(*args, time_limit=20, mip_gap=1e-9, formulation="simple")
    assert tight.details["n_fixed_in"] > 0 and tight.details["n_fixed_out"] > 0
    assert plain.details["n_fixed_in"] == 0
    assert tight.status in PROVED and plain.status in PROVED
    assert tight.objective == pytest.approx(plain.objective, rel=1e-6)


# --------------------------------------------------------------------------------------------
# Money budgets
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [2, 3, 6, 11])
def test_costs_match_the_brute_force_oracle_and_beat_fd(seed):
    from reserve.solvers.ttk import TTK

    X, y, cost, budget, C = make_cost_instance(seed)
    X_lab, y_pm, X_cand, c = split_cost_instance(X, y, cost)
    oracle_obj, *_ = brute_force_ttk_cost(X, y, cost, budget, C)
    r = mip1(X_lab, y_pm, X_cand, money(c, budget), C, time_limit=20, mip_gap=1e-9)
    assert r.status in PROVED
    assert abs(r.objective - oracle_obj) <= 1e-6 * oracle_obj
    assert oracle_obj * (1 - 1e-6) <= r.bound <= r.objective
    scores = X_cand @ r.w + r.b
    assert c[scores > 0].sum() <= budget * (1 + 1e-12)
    np.testing.assert_array_equal(r.selected, budget_select(scores, c, budget))
    # Through the estimator: warm-started from FD + polish, never above it, FD never below.
    fd = TTK(C=C, budget=budget).fit(X, y, cost=cost)
    est = TTK(C=C, budget=budget, solver="mip", time_limit=20, mip_gap=1e-9).fit(X, y, cost=cost)
    assert est.status_ in PROVED
    assert est.objective_ <= fd.objective_ + 1e-9
    assert fd.objective_ >= oracle_obj * (1 - 1e-6)
    assert est.objective_ == pytest.approx(oracle_obj, rel=1e-6)
    assert est.selected_cost_ <= budget * (1 + 1e-12) and est.budget_ == budget


def test_costs_bind_on_the_oracle_instances():
    # Guard: the knapsack row really cuts the SVM off on these instances.
    from reserve.solvers._qp import solve_fixed_set

    for seed in (2, 3, 6, 11):
        X, y, cost, budget, C = make_cost_instance(seed)
        X_lab, y_pm, X_cand, c = split_cost_instance(X, y, cost)
        svm = solve_fixed_set(X_lab, y_pm, C)
        assert c[X_cand @ svm.w + svm.b > 0].sum() > budget


@pytest.mark.parametrize("formulation", ["simple", "indicator"])
def test_formulations_agree_with_costs(formulation):
    X, y, cost, budget, C = make_cost_instance(0)
    args = (*split_cost_instance(X, y, cost)[:3], money(cost[y == -1], budget), C)
    kw = {"time_limit": 20, "mip_gap": 1e-9}
    ref = mip1(*args, **kw)
    r = mip1(*args, formulation=formulation, **kw)
    assert ref.details["n_fixed_in"] + ref.details["n_fixed_out"] > 0  # fixing ran
    assert ref.status in PROVED and r.status in PROVED
    assert r.objective == pytest.approx(ref.objective, rel=1e-6)


@pytest.mark.parametrize("c", [1.0, 2.5])
def test_equal_costs_build_the_cell_budget_model(c):
    _, _, X_lab, y_pm, X_cand = binding_instance(5, n=12, m=8, d=3)
    k = 3
    a = mip1(X_lab, y_pm, X_cand, cells(k, X_cand), 2.0, time_limit=20, mip_gap=1e-9)
    cons = money(np.full(8, c), k * c)
    b = mip1(X_lab, y_pm, X_cand, cons, 2.0, time_limit=20, mip_gap=1e-9)
    assert np.array_equal(a.w, b.w) and a.b == b.b and a.n_nodes == b.n_nodes
    assert a.selected.tolist() == b.selected.tolist()
    assert a.details["relaxation_bounds"] == b.details["relaxation_bounds"]


def test_a_warm_start_over_the_budget_is_repaired():
    X, y, cost, budget, C = make_cost_instance(3)
    X_lab, y_pm, X_cand, c = split_cost_instance(X, y, cost)
    w0, b0 = np.full(X.shape[1], 0.1), 50.0  # every candidate positive
    r = mip1(X_lab, y_pm, X_cand, money(c, budget), C, warm_start=(w0, b0), time_limit=20)
    assert c[X_cand @ r.w + r.b > 0].sum() <= budget * (1 + 1e-12)
    assert r.bound <= r.objective


@pytest.mark.parametrize(
    ("cost", "budget", "fragment"),
    [
        (np.ones(6), 3.0, "a budget over the 7 candidates"),
        (np.r_[np.ones(6), 0.0], 3.0, "costs must be finite and > 0; received [0.0]"),
        (np.r_[np.ones(6), np.nan], 3.0, "costs must be finite and > 0; received [nan]"),
        (np.ones(7), 7.0, "must fit some candidate and leave some out"),
        (np.ones(7), 0.5, "must fit some candidate and leave some out"),
    ],
)
def test_bad_costs_are_refused(cost, budget, fragment):
    _, _, X_lab, y_pm, X_cand = binding_instance(0)
    with pytest.raises(InvalidInputError) as info:
        mip1(X_lab, y_pm, X_cand, money(cost, budget), 1.0)
    assert fragment in str(info.value)


# --------------------------------------------------------------------------------------------
# Gurobi: run only where gurobipy is installed (not a dependency; CI skips these)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("formulation", ["tight", "simple", "indicator"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gurobi_matches_the_oracle_when_installed(seed, formulation):
    pytest.importorskip("gurobipy")
    X, y, X_lab, y_pm, X_cand = binding_instance(seed)
    oracle_obj, *_ = brute_force_ttk(X, y, 2, 1.0)
    r = mip1(
        X_lab,
        y_pm,
        X_cand,
        cells(2, X_cand),
        1.0,
        time_limit=20,
        mip_gap=1e-9,
        solver="gurobi",
        formulation=formulation,
    )
    assert r.solver == "gurobi" and r.status in PROVED
    assert abs(r.objective - oracle_obj) <= 1e-6 * oracle_obj
    assert r.bound <= r.objective


def test_auto_runs_scip_when_the_gurobi_licence_is_too_small():
    pytest.importorskip("gurobipy")
    rng = np.random.default_rng(0)
    X_lab = rng.standard_normal((150, 10))
    y_pm = np.where(X_lab[:, 0] > 0, 1.0, -1.0)
    X_cand = rng.standard_normal((150, 10)) + 0.5
    r = mip1(X_lab, y_pm, X_cand, cells(5, X_cand), 1.0, time_limit=20)
    # the pip wheel's licence stops at 200 variables with a quadratic objective; a full
    # licence would run Gurobi itself
    if r.solver == "scip":
        assert "gurobi skipped" in r.details["note"]
    else:
        assert r.solver == "gurobi"
    assert r.status in PROVED


@pytest.mark.parametrize("seed", [0, 1])
def test_the_s_scorer_model_with_one_scorer_is_the_single_mip(seed):
    # One model builder serves TTK (S = 1) and multi-species TTK (S > 1): the S-scorer entry
    # point with one scorer must reach the same optimum as the single-scorer one, and both
    # the brute force's.
    from reserve.solvers._base import feasible_intercepts
    from reserve.solvers._qp import solve_fixed_set

    X, y, X_lab, y_pm, X_cand = binding_instance(seed)
    k, C = 2, 1.0
    oracle_obj, *_ = brute_force_ttk(X, y, k, C)
    single = mip1(X_lab, y_pm, X_cand, cells(k, X_cand), C, time_limit=20, mip_gap=1e-9)
    svm = solve_fixed_set(X_lab, y_pm, C)
    W0 = svm.w[None, :]
    b0 = feasible_intercepts(X_cand @ W0.T, np.array([svm.b]), k)  # a feasible start
    cons = cells(k, X_cand)
    stacked = solve_ttk_mip(
        X_lab, y_pm[:, None], X_cand, cons, C, warm_start=(W0, b0), time_limit=20
    )
    assert single.status in PROVED and stacked.status in PROVED
    assert stacked.w.shape == (1, X_lab.shape[1]) and stacked.b.shape == (1,)
    assert abs(stacked.objective - oracle_obj) <= 1e-6 * oracle_obj
    assert abs(stacked.objective - single.objective) <= 1e-6 * oracle_obj
    assert stacked.selected.tolist() == top_k(X_cand @ stacked.w[0] + stacked.b[0], k).tolist()
