"""Tests of the package's own branch and bound for exact TTK (reserve.solvers._bnb).

Independent checks: brute force over every k-subset (or every maximal affordable set) on tiny
instances, and SCIP's proved optimum on a larger one.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from reserve.errors import InvalidInputError
from reserve.paper.datasets import load_benchmark, transductive_split
from reserve.solvers import _bnb
from reserve.solvers._base import budget_select, top_k
from reserve.solvers._qp import hinge_objective
from reserve.solvers.ttk import TTK
from tests._oracle import (
    binding_instance,
    brute_force_ttk,
    brute_force_ttk_cost,
    make_cost_instance,
    split_cost_instance,
)
from tests._single import cells, mip1, money

PROVED = ("optimal", "gap_limit")


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("formulation", ["tight", "simple"])
def test_matches_brute_force_oracle(seed, formulation):
    X, y, X_lab, y_pm, X_cand = binding_instance(seed)
    k, C = 2, 1.0
    oracle_obj, *_ = brute_force_ttk(X, y, k, C)
    # "simple" skips the tightening, so the branch and bound does all the proving.
    r = mip1(
        X_lab,
        y_pm,
        X_cand,
        cells(k, X_cand),
        C,
        time_limit=30,
        mip_gap=1e-9,
        solver="bnb",
        formulation=formulation,
    )
    assert r.solver == "bnb"
    assert r.status in PROVED
    assert abs(r.objective - oracle_obj) <= 1e-6 * oracle_obj
    assert oracle_obj * (1 - 1e-6) <= r.bound <= r.objective
    assert np.count_nonzero(X_cand @ r.w + r.b > 0) <= k
    assert r.objective == hinge_objective(r.w, r.b, X_lab, y_pm, C)
    np.testing.assert_array_equal(r.selected, top_k(X_cand @ r.w + r.b, k))


def test_the_oracle_instances_need_branching():
    # Guard for the test above: with the closed-form big-M the root relaxation does not
    # settle these instances, so the tree search is exercised (more than one node).
    nodes = []
    for seed in range(6):
        _, _, X_lab, y_pm, X_cand = binding_instance(seed)
        r = mip1(X_lab, y_pm, X_cand, cells(2, X_cand), 1.0, solver="bnb", formulation="simple")
        nodes.append(r.n_nodes)
    assert max(nodes) > 1


@pytest.mark.parametrize("seed", [2, 3, 6, 11])
def test_costs_match_the_brute_force_oracle(seed):
    X, y, cost, budget, C = make_cost_instance(seed)
    X_lab, y_pm, X_cand, c = split_cost_instance(X, y, cost)
    oracle_obj, *_ = brute_force_ttk_cost(X, y, cost, budget, C)
    r = mip1(
        X_lab,
        y_pm,
        X_cand,
        money(c, budget),
        C,
        time_limit=30,
        mip_gap=1e-9,
        solver="bnb",
        formulation="simple",
    )
    assert r.status in PROVED
    assert abs(r.objective - oracle_obj) <= 1e-6 * oracle_obj
    assert oracle_obj * (1 - 1e-6) <= r.bound <= r.objective
    scores = X_cand @ r.w + r.b
    assert c[scores > 0].sum() <= budget * (1 + 1e-12)
    np.testing.assert_array_equal(r.selected, budget_select(scores, c, budget))


def test_agrees_with_scip_on_a_larger_instance():
    # 40 labelled rows, 30 candidates, k = 4: far beyond brute force's comfort, proved by both.
    _, _, X_lab, y_pm, X_cand = binding_instance(8, n=40, m=30, d=5)
    scip = mip1(X_lab, y_pm, X_cand, cells(4, X_cand), 1.0, time_limit=60, solver="scip")
    bnb = mip1(X_lab, y_pm, X_cand, cells(4, X_cand), 1.0, time_limit=60, solver="bnb")
    assert scip.status in PROVED and bnb.status in PROVED
    assert bnb.objective == pytest.approx(scip.objective, rel=1e-6)
    assert bnb.bound <= bnb.objective and scip.bound <= scip.objective
    assert bnb.bound >= scip.objective * (1 - 2e-6)


def test_never_worse_than_the_warm_start():
    _, _, X_lab, y_pm, X_cand = binding_instance(3, n=14, m=9, d=3)
    w0, b0 = np.array([0.1, 0.1, 0.1]), 50.0  # every candidate positive: repaired first
    r = mip1(X_lab, y_pm, X_cand, cells(2, X_cand), 1.0, warm_start=(w0, b0), solver="bnb")
    s = np.sort(X_cand @ w0 + b0)[::-1]
    assert r.objective <= hinge_objective(w0, b0 - s[2], X_lab, y_pm, 1.0)
    assert r.bound <= r.objective


def test_time_limit_returns_a_feasible_incumbent_and_an_honest_gap():
    X, y = load_benchmark("sonar")
    Xa, y_fit, _, k = transductive_split(X, y, random_state=0)
    lab = y_fit != -1
    y_pm = np.where(y_fit[lab] == 1, 1.0, -1.0)
    X_cand = Xa[~lab]
    r = mip1(Xa[lab], y_pm, X_cand, cells(k, X_cand), 1.0, time_limit=2.0, solver="bnb")
    assert r.status == "time_limit"
    assert r.gap > 1e-3 and r.bound < r.objective
    assert r.selected.shape == (k,) and len(set(r.selected.tolist())) == k
    assert np.count_nonzero(X_cand @ r.w + r.b > 0) <= k
    assert r.objective == hinge_objective(r.w, r.b, Xa[lab], y_pm, 1.0)


def test_a_failed_relaxation_is_never_counted_as_proof(monkeypatch):
    # If no node relaxation can be solved, nothing may be pruned: the bound stays what the
    # tightening proved and the status must not claim optimality.
    _, _, X_lab, y_pm, X_cand = binding_instance(0)

    def fail(self, out_mask, in_mask):
        return -math.inf, None, None

    monkeypatch.setattr(_bnb._NodeRelaxation, "solve", fail)
    r = mip1(X_lab, y_pm, X_cand, cells(2, X_cand), 1.0, solver="bnb", formulation="simple")
    assert r.status == "not_proved"
    assert r.bound == 0.0 and r.gap == 1.0
    assert np.count_nonzero(X_cand @ r.w + r.b > 0) <= 2


def test_needs_no_mip_solver(monkeypatch):
    X, y, X_lab, y_pm, X_cand = binding_instance(1)
    monkeypatch.setitem(sys.modules, "pyscipopt", None)
    monkeypatch.setitem(sys.modules, "gurobipy", None)
    r = mip1(X_lab, y_pm, X_cand, cells(2, X_cand), 1.0, solver="bnb")
    assert r.status in PROVED
    assert r.objective == pytest.approx(brute_force_ttk(X, y, 2, 1.0)[0], rel=1e-6)


def test_through_the_estimator():
    X, y, *_ = binding_instance(2)
    fd = TTK(k=2, C=1.0).fit(X, y)
    est = TTK(k=2, C=1.0, solver="mip", mip_solver="bnb", mip_gap=1e-9).fit(X, y)
    assert est.mip_solver_ == "bnb" and est.status_ in PROVED
    assert est.objective_ <= fd.objective_ + 1e-9
    assert est.objective_ == pytest.approx(brute_force_ttk(X, y, 2, 1.0)[0], rel=1e-6)
    assert est.bound_ <= est.objective_


def test_an_unknown_mip_solver_is_refused_before_fitting():
    X, y, *_ = binding_instance(0)
    with pytest.raises(InvalidInputError, match="mip_solver must be one of") as info:
        TTK(k=2, solver="mip", mip_solver="cplex").fit(X, y)
    assert "'bnb'" in str(info.value) and "\n" not in str(info.value)
