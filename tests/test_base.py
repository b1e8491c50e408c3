"""The shared top-k rule, canonical order and tie at the cut."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from reserve.solvers._base import budget_cut, budget_select, canonical_order, top_k
from reserve.solvers.ties import break_cutoff_ties

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


# --- a tie at the cell budget's cut: broken once, by the one rule, in the selector base ------


def _tied_instance():
    """Labelled rows on a line and candidates whose scores tie across the cut: four
    duplicate rows at 0.5 below one at 3, for k = 3 (two places for four tied rows)."""
    X = np.array([[-2.0], [-1.0], [1.0], [2.0], [0.5], [3.0], [0.5], [-3.0], [0.5], [0.5]])
    y = np.array([0, 0, 1, 1, -1, -1, -1, -1, -1, -1])
    return X, y, 3


@pytest.mark.parametrize("name", ["SVM", "TSVM", "SVMPerf", "TopPush", "AATP"])
def test_a_baseline_breaks_its_tie_at_the_cut_by_the_one_rule(name):
    import reserve.solvers as solvers

    X, y, k = _tied_instance()
    picks = set()
    for seed in range(8):
        est = getattr(solvers, name)(k=k, random_state=seed).fit(X, y)
        s = est.candidate_scores_
        # oracle: the lower-row top k, then break_cutoff_ties with the estimator's seed
        want, runners, ties = break_cutoff_ties(s, np.arange(s.size), top_k(s, k), None, seed)
        assert est.selected_.tolist() == est.candidates_[want].tolist()
        assert est.cutoff_ties_ == ties and (ties.n_tied, ties.n_tied_chosen) == (4, 2)
        assert ties.n_drawn == 2 and runners.size == 2
        # the ranking: the chosen, the tie's runners-up, then the rest by score
        order = np.argsort(est.candidate_rank_)
        assert order.tolist() == [*want, *runners, int(np.argmin(s))]
        again = getattr(solvers, name)(k=k, random_state=seed).fit(X, y)
        assert np.array_equal(again.selected_, est.selected_)  # one seed repeats
        picks.add(frozenset(est.selected_.tolist()))
    assert len(picks) > 1  # seeds can differ


def test_a_money_budget_breaks_no_tie():
    from reserve.solvers import SVM, SelectionProblem

    X, y, _ = _tied_instance()
    problem = SelectionProblem.from_arrays(X, y, 3, cost=np.ones(len(y)), budget=3.0)
    est = SVM(random_state=5).fit(problem)
    assert est.cutoff_ties_.n_tied == 0
    assert est.selected_.tolist() == est.candidates_[top_k(est.candidate_scores_, 3)].tolist()


def test_a_folds_precision_counts_the_tie_in_row_order():
    # held_out_precision scores the top k before the draw: the same for every seed, while
    # the selections differ (the tied rows 4, 6, 8, 9 hold labels 1, 0, 0, 1).
    from reserve.solvers import SVM
    from reserve.solvers.search import held_out_precision

    X, y, k = _tied_instance()
    truth = np.r_[y[:4], [1, 1, 0, 0, 0, 1]]
    fits = [SVM(k=k, random_state=seed).fit(X, y) for seed in range(8)]
    assert len({frozenset(f.selected_.tolist()) for f in fits}) > 1
    before = truth[[5, 4, 6]].mean()  # row 5, then the lower tied rows 4 and 6
    assert all(held_out_precision(f, truth) == before for f in fits)
