"""The one budget object: cells are unit costs and budget k, money is costs and a total."""

import numpy as np
import pytest

from reserve.errors import InvalidInputError
from reserve.solvers import Budget, budget_select, top_k
from reserve.solvers._base import budget_cut
from reserve.solvers.constraints import Constraints


def test_cells_are_unit_costs_and_k():
    bud = Budget.cells(3, 5)
    assert bud.cost.tolist() == [1.0] * 5
    assert bud.budget == 3.0
    assert bud.card == 3
    assert bud.limit > 3.0
    scores = np.array([0.2, 0.9, 0.9, -1.0, 0.5])
    assert bud.select(scores).tolist() == top_k(scores, 3).tolist()
    assert bud.cut(scores) == 0.2  # the 4th best score
    assert repr(bud) == "Budget.cells(3, 5)"


def test_constraints_say_how_many_cells_a_selection_holds():
    assert Constraints.cells(4, 6).n_cells == 4
    assert Constraints(Budget(np.full(6, 2.5), 10.0)).n_cells == 4  # equal costs: the card
    money = Budget(np.array([4.0, 1.0, 2.0, 1.5]), 4.6)
    assert Constraints(money).n_cells == 3  # cheapest first: 1 + 1.5 + 2 fit, 4 does not
    assert Constraints(money, expected_cells=2).n_cells == 2  # what the estimator counted


def test_constraints_take_reorders_the_budget_and_the_boundary():
    from reserve.solvers import Boundary

    money = Budget(np.array([4.0, 1.0, 2.0]), 4.5)
    term = Boundary(own=np.array([4.0, 3.0, 2.0]), shared=np.zeros((3, 3)))
    cons = Constraints(money, 1, term, 0.5, expected_cells=2).take(np.array([2, 0, 1]))
    assert cons.budget.cost.tolist() == [2.0, 4.0, 1.0] and cons.budget.budget == 4.5
    assert cons.boundary.own.tolist() == [2.0, 4.0, 3.0]
    assert (cons.boundary_penalty, cons.expected_cells) == (0.5, 2)


@pytest.mark.parametrize(
    ("cons", "shape", "fragment"),
    [
        (Constraints.cells(2, 5), (4, 2), "labels of shape (n, 1)"),
        (Constraints.cells(2, 4), (4, 1), "a budget over the 5 candidates"),
        (Constraints.cells(0, 5), (4, 1), "must fit some candidate and leave some out"),
        (Constraints.cells(5, 5), (4, 1), "must fit some candidate and leave some out"),
        (Constraints(Budget(np.ones(5), 2.0), 2), (4, 2), None),
        (Constraints(Budget(np.r_[np.ones(4), 2.0], 2.0), 2), (4, 2), "share a cell budget"),
    ],
)
def test_constraints_refuse_what_does_not_fit_them(cons, shape, fragment):
    X_cand = np.zeros((5, 3))
    if fragment is None:  # several species on equal costs: accepted
        cons.check(np.ones(shape), X_cand)
        return
    with pytest.raises(InvalidInputError) as info:
        cons.check(np.ones(shape), X_cand)
    assert fragment in str(info.value)


def test_money_budget_matches_the_free_functions():
    rng = np.random.default_rng(0)
    scores, cost = rng.normal(size=40), rng.uniform(0.5, 3.0, 40)
    bud = Budget(cost, 10.0)
    assert bud.select(scores).tolist() == budget_select(scores, cost, 10.0).tolist()
    assert bud.cut(scores) == budget_cut(scores, cost, 10.0)
    sub = bud.take(np.arange(40)[::-1])
    assert sub.cost.tolist() == cost[::-1].tolist() and sub.budget == 10.0


@pytest.mark.parametrize("k", [1, 3])
def test_make_feasible_leaves_only_what_fits_positive(k):
    rng = np.random.default_rng(k)
    Xc, w = rng.normal(size=(30, 3)), rng.normal(size=3)
    bud = Budget.cells(k, 30)
    b = bud.make_feasible(w, 5.0, Xc)
    assert int((Xc @ w + b > 0).sum()) <= k
    assert bud.make_feasible(w, b, Xc) == b  # already feasible: unchanged


def test_fits_and_rows():
    bud = Budget(np.array([1.0, 2.0, 3.0]), 4.0)
    fixed = np.array([True, False, False])
    assert bud.room(fixed) == pytest.approx(3.0)
    assert bud.fits_with(fixed, 1) and bud.fits_with(fixed, 2)
    k_rem, (c_free, room) = bud.row(fixed, np.array([1, 2]))
    assert k_rem is None and c_free.tolist() == [2.0, 3.0] and room == pytest.approx(3.0)
    assert Budget.cells(2, 3).row(fixed, np.array([1, 2])) == (1, None)
    assert not bud.none_fits(fixed, np.array([1, 2]))
