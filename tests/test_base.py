"""The shared top-k rule and canonical order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from reserve.solvers._base import budget_cut, budget_select, canonical_order, top_k

scores_st = arrays(np.float64, st.integers(2, 60), elements=st.sampled_from([-1.0, 0.0, 0.5, 2.0]))


@settings(max_examples=200, deadline=None)
@given(scores_st, st.data())
def test_top_k_is_the_sorted_reference(scores, data):
    k = data.draw(st.integers(1, scores.size))
    # Reference: a plain Python sort by (-score, position).
    ref = sorted(range(scores.size), key=lambda i: (-scores[i], i))[:k]
    assert top_k(scores, k).tolist() == ref


def test_top_k_returns_exactly_k_even_with_ties():
    assert top_k(np.zeros(10), 4).tolist() == [0, 1, 2, 3]


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10**6))
def test_canonical_order_ignores_input_order(seed):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 3, size=(30, 3)).astype(float)  # duplicates on purpose
    perm = rng.permutation(30)
    a = X[canonical_order(X)]
    b = X[perm][canonical_order(X[perm])]
    assert np.array_equal(a, b)
    rows = np.array([3, 7, 11, 20])
    sub = canonical_order(X, rows)
    assert sorted(sub.tolist()) == rows.tolist()
    assert np.array_equal(X[sub], X[rows][canonical_order(X[rows])])


# --- money budgets ---------------------------------------------------------------------------


def _greedy_reference(scores, cost, budget):
    """The docstring's rule as a plain loop: best score first, take what still fits."""
    limit = budget * (1 + 1e-12)
    total, out = 0.0, []
    for i in sorted(range(scores.size), key=lambda i: (-scores[i], i)):
        if total + cost[i] <= limit:
            out.append(i)
            total += cost[i]
    return out


@settings(max_examples=200, deadline=None)
@given(scores_st, st.data())
def test_budget_select_with_unit_costs_is_top_k(scores, data):
    k = data.draw(st.integers(1, scores.size))
    got = budget_select(scores, np.ones(scores.size), k)
    assert got.dtype == np.int64
    assert got.tolist() == top_k(scores, k).tolist()


costs_st = st.sampled_from([0.3, 1.0, 1.7, 2.5, 4.0])


@settings(max_examples=300, deadline=None)
@given(scores_st, st.data())
def test_budget_select_is_the_greedy_walk_and_fits(scores, data):
    cost = np.array(data.draw(st.lists(costs_st, min_size=scores.size, max_size=scores.size)))
    budget = data.draw(st.floats(0.1, float(cost.sum()) * 1.2))
    got = budget_select(scores, cost, budget)
    assert got.tolist() == _greedy_reference(scores, cost, budget)
    assert cost[got].sum() <= budget * (1 + 1e-12)
    # Maximal: nothing left out would still fit.
    left = np.setdiff1d(np.arange(scores.size), got)
    assert np.all(cost[got].sum() + cost[left] > budget * (1 + 1e-12))
    # Best first.
    assert np.all(np.diff(scores[got]) <= 0)


def test_budget_select_skips_what_does_not_fit_and_goes_on():
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    cost = np.array([3.0, 3.0, 1.0, 2.0, 1.0])
    # 0 (3) fits; 1 (3 more) does not; 2 (1) fits: total 4; 3 (2) does not; 4 (1) fits: 5.
    assert budget_select(scores, cost, 5.0).tolist() == [0, 2, 4]
    # Nothing fits: an empty selection, not an error (validation refuses such budgets).
    assert budget_select(scores, cost, 0.5).size == 0
    # The relative tolerance: a total a rounding error above the budget still fits.
    assert budget_select(np.array([1.0, 0.0]), np.array([0.1, 0.2]), 0.3 - 1e-17).size == 2


def test_budget_select_blocks_match_one_sort_on_many_candidates():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 50, 20_000).astype(float)  # many ties
    cost = rng.choice([0.5, 1.0, 3.0, 40.0], 20_000)
    for budget in (1.0, 37.5, 400.0, 5000.0):
        got = budget_select(scores, cost, budget)
        assert got.tolist() == _greedy_reference(scores, cost, budget)


@settings(max_examples=200, deadline=None)
@given(scores_st, st.data())
def test_budget_cut_is_the_first_prefix_breaker(scores, data):
    cost = np.array(data.draw(st.lists(costs_st, min_size=scores.size, max_size=scores.size)))
    budget = data.draw(st.floats(0.1, float(cost.sum()) * 1.2))
    order = sorted(range(scores.size), key=lambda i: (-scores[i], i))
    cs = np.cumsum(cost[order])
    breakers = np.flatnonzero(cs > budget * (1 + 1e-12))
    want = scores[order[breakers[0]]] if breakers.size else -np.inf
    assert budget_cut(scores, cost, budget) == want
    k = data.draw(st.integers(1, scores.size))
    ref = np.sort(scores)[::-1][k] if k < scores.size else -np.inf
    assert budget_cut(scores, np.ones(scores.size), k) == ref
