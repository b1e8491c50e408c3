"""The one budget object: cells are unit costs and budget k, money is costs and a total."""

import numpy as np
import pytest

from reserve.solvers import Budget, budget_select, top_k
from reserve.solvers._base import budget_cut


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


def test_resolve_writes_the_no_cost_rule_once():
    assert Budget.resolve(4, 6).cost.tolist() == Budget.cells(4, 6).cost.tolist()
    money = Budget.resolve(None, 3, [1.0, 2.0, 4.0], 3.0)
    assert money.card is None and money.budget == 3.0
    assert Budget.resolve(7, 3, None, money) is money


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
