"""The selection problem object: built from arrays, taken over rows, frozen, fitted whole."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import sparse

from reserve.errors import InvalidInputError
from reserve.solvers import (
    AATP,
    SVM,
    TSVM,
    TTK,
    Boundary,
    MultiSVM,
    MultiTTK,
    SelectionProblem,
    SVMPerf,
    TopPush,
    cells_for_budget,
)
from reserve.solvers.problem import as_problem


def _data(seed: int = 0, n_lab: int = 30, n_cand: int = 20, d: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_lab + n_cand, d))
    y = np.r_[(X[:n_lab, 0] + 0.3 * rng.normal(size=n_lab) > 0).astype(int), -np.ones(n_cand, int)]
    cost = np.r_[np.full(n_lab, np.nan), 1.0 + rng.integers(0, 4, n_cand)]
    return X, y, cost


def _two_species(seed: int = 0):
    X, y, _ = _data(seed)
    y2 = np.where(y == -1, -1, (X[:, 1] > 0).astype(int))
    return X, np.column_stack([y, y2])


# --- from_arrays ------------------------------------------------------------------------------


def test_cells_problem_from_arrays():
    X, y, _ = _data()
    p = SelectionProblem.from_arrays(X, y, k=5)
    assert p.X.dtype == np.float64 and p.X.shape == (50, 3)
    assert p.Y.shape == (50, 1) and p.n_species == 1 and p.y.shape == (50,)
    assert p.candidates.tolist() == list(range(30, 50))
    assert p.labelled.tolist() == list(range(30))
    assert not p.money and p.k == 5
    assert p.budget.card == 5 and p.budget.cost.tolist() == [1.0] * 20
    assert p.constraints.n_species == 1 and p.boundary is None


def test_money_problem_from_arrays_keeps_the_candidates_costs():
    X, y, cost = _data()
    p = SelectionProblem.from_arrays(X, y, cost=cost, budget=12.0)
    assert p.money and p.budget.budget == 12.0
    assert np.array_equal(p.budget.cost, cost[30:])
    # k: the cells the budget buys at the median candidate cost
    assert p.k == int(12.0 // np.median(cost[30:])) == cells_for_budget(p.budget)
    assert SelectionProblem.from_arrays(X, y, 4, cost=cost, budget=12.0).k == 4
    assert np.array_equal(p.row_cost()[30:], cost[30:]) and np.isnan(p.row_cost()[:30]).all()


def test_two_species_problem():
    X, Y = _two_species()
    p = SelectionProblem.from_arrays(X, Y, k=3)
    assert p.Y.shape == (50, 2) and p.n_species == p.constraints.n_species == 2
    assert p.y is not None and p.y.shape == (50, 2)
    assert p.multi().Y_pm.shape == (30, 2)
    with pytest.raises(InvalidInputError, match="fits one species"):
        p.transductive()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": 20}, "0 < k < number of candidates"),
        ({"budget": 3.0}, "needs cost="),
        ({"cost": np.ones(50)}, "needs a money budget"),
        ({"cost": np.ones(50), "budget": 0.5}, "nothing fits"),
        ({"cost": np.ones(50), "budget": 20.0}, "covers the total cost"),
        ({"k": 3, "boundary": "edges"}, "boundary must be a reserve.solvers.Boundary"),
    ],
)
def test_from_arrays_runs_the_shared_checks(kwargs, match):
    X, y, _ = _data()
    with pytest.raises(InvalidInputError, match=match):
        SelectionProblem.from_arrays(X, y, **kwargs)


def test_from_arrays_refuses_what_check_transductive_refuses():
    X, y, _ = _data()
    with pytest.raises(InvalidInputError, match="requires y"):
        SelectionProblem.from_arrays(X, None, k=3)
    X_bad = X.copy()
    X_bad[0, 0] = np.nan
    with pytest.raises(InvalidInputError, match="NaN"):
        SelectionProblem.from_arrays(X_bad, y, k=3)


# --- frozen ----------------------------------------------------------------------------------


def test_problem_is_frozen():
    X, y, _ = _data()
    p = SelectionProblem.from_arrays(X, y, k=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.k = 6
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.constraints.budget = None
    q = p.with_penalty(2.0)
    assert q.constraints.boundary_penalty == 2.0 and p.constraints.boundary_penalty == 0.0


# --- take --------------------------------------------------------------------------------------


def test_take_of_a_bootstrap_sample_keeps_the_money_budget():
    X, y, cost = _data()
    p = SelectionProblem.from_arrays(X, y, cost=cost, budget=12.0, sample_weight=np.arange(50.0))
    rng = np.random.default_rng(1)
    cand = np.arange(30, 50)
    sample = np.r_[rng.choice(30, 30), cand[::-1]]  # labelled rows repeat, candidates reversed
    q = p.take(sample)
    assert np.array_equal(q.X, X[sample]) and np.array_equal(q.y, y[sample])
    assert q.money and q.budget.budget == 12.0 and q.k == p.k
    # the budget follows the candidates kept, in their new row order
    assert np.array_equal(q.budget.cost, cost[sample[q.candidates]])
    assert np.array_equal(q.sample_weight, np.arange(50.0)[sample])
    with pytest.raises(InvalidInputError, match="each candidate row once"):
        p.take(np.r_[cand, cand[:1]])


def test_take_of_a_fold_keeps_k_cells():
    X, Y = _two_species()
    p = SelectionProblem.from_arrays(X, Y, k=3)
    keep = np.setdiff1d(np.arange(50), np.arange(0, 30, 3))
    q = p.take(keep)
    assert q.budget.card == 3 and q.n_species == 2 and q.X.shape[0] == keep.size
    assert np.array_equal(q.Y, Y[keep])


def test_take_keeps_the_boundary_of_the_kept_candidates():
    X, y, _ = _data(n_cand=6)
    n = X.shape[0]
    chain = sparse.diags([np.ones(n - 1), np.ones(n - 1)], [-1, 1])
    p = SelectionProblem.from_arrays(X, y, k=2, boundary=Boundary(np.full(n, 4.0), chain))
    kept = np.r_[np.arange(30), [31, 32, 35]]
    q = p.take(kept)
    mask = np.array([True, True, False])  # rows 31 and 32: neighbours, sharing one edge
    assert q.boundary.m == 3 and q.boundary.length(mask) == 6.0
    assert p.row_boundary().length(np.isin(np.arange(n), [31, 32])) == 6.0


# --- every selector fits the object, as it fits the arrays -------------------------------------

ONE_SPECIES = [SVM, TSVM, SVMPerf, TopPush, AATP, TTK]


@pytest.mark.parametrize("cls", ONE_SPECIES)
def test_fit_problem_equals_fit_arrays(cls):
    X, y, _ = _data()
    by_arrays = cls(k=4).fit(X, y)
    by_problem = cls(k=99).fit(SelectionProblem.from_arrays(X, y, k=4))  # its k, not the est's
    assert by_problem.selected_.tolist() == by_arrays.selected_.tolist()
    assert by_problem.intercept_ == by_arrays.intercept_


@pytest.mark.parametrize("cls", [MultiSVM, MultiTTK])
def test_multi_fit_problem_equals_fit_arrays(cls):
    X, Y = _two_species()
    by_arrays = cls(k=4).fit(X, Y)
    by_problem = cls(k=4).fit(as_problem(X, Y, 4))
    assert by_problem.selected_.tolist() == by_arrays.selected_.tolist()


def test_ttk_money_problem_equals_ttk_money_arrays():
    X, y, cost = _data()
    by_arrays = TTK(budget=9.0).fit(X, y, cost=cost)
    by_problem = TTK().fit(SelectionProblem.from_arrays(X, y, cost=cost, budget=9.0))
    assert by_problem.selected_.tolist() == by_arrays.selected_.tolist()
    assert by_problem.selected_cost_ <= 9.0


def test_fit_problem_refuses_arrays_beside_it():
    X, y, cost = _data()
    p = SelectionProblem.from_arrays(X, y, k=4)
    with pytest.raises(InvalidInputError, match="takes the SelectionProblem alone"):
        SVM(k=4).fit(p, y)
    with pytest.raises(InvalidInputError, match="takes the SelectionProblem alone"):
        TTK(k=4).fit(p, cost=cost)
    with pytest.raises(InvalidInputError, match="selects a number of cells"):
        MultiTTK(k=4).fit(SelectionProblem.from_arrays(X, y, cost=cost, budget=9.0))


# --- baselines under a money budget: an oracle ---------------------------------------------------


def _oracle_pick(scores: np.ndarray, cost: np.ndarray, budget: float) -> list[int]:
    """Best score first (ties to the lower position), each one taken while it still fits."""
    total, out = 0.0, []
    for i in sorted(range(scores.size), key=lambda i: (-scores[i], i)):
        if total + cost[i] <= budget * (1 + 1e-12):
            out.append(i)
            total += cost[i]
    return out


@pytest.mark.parametrize("cls", [SVM, TSVM, SVMPerf, TopPush, AATP])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_baselines_select_within_a_money_budget(cls, seed):
    X, y, cost = _data(seed)
    budget = 11.0
    p = SelectionProblem.from_arrays(X, y, cost=cost, budget=budget)
    est = cls().fit(p)
    cand = np.arange(30, 50)
    scores = est.candidate_scores_
    assert np.allclose(scores, X[cand] @ est.coef_ + est.intercept_)
    expected = cand[_oracle_pick(scores, cost[cand], budget)]
    assert est.selected_.tolist() == expected.tolist()
    assert cost[est.selected_].sum() <= budget
    # nothing left out would still fit
    left = np.setdiff1d(cand, est.selected_)
    assert (cost[left] > budget - cost[est.selected_].sum()).all()
    # the ranking model is the one fitted for the cells the budget buys at the median cost
    assert np.array_equal(est.coef_, cls(k=p.k).fit(X, y).coef_)


def test_multisvm_selects_within_a_money_budget():
    X, Y = _two_species()
    _, _, cost = _data()
    p = SelectionProblem.from_arrays(X, Y, cost=cost, budget=10.0)
    est = MultiSVM().fit(p)
    cand = np.arange(30, 50)
    summed = est.candidate_scores_.sum(axis=1)
    assert np.allclose(summed, X[cand] @ est.coef_.sum(axis=0) + est.intercept_.sum())
    assert est.selected_.tolist() == cand[_oracle_pick(summed, cost[cand], 10.0)].tolist()
