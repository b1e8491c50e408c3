"""TTK estimator: the brute-force oracle, invariants, sklearn conventions, bad input."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from reserve.errors import InvalidInputError, ReserveError
from reserve.solvers import TTK, top_k
from reserve.solvers._qp import hinge_objective
from reserve.solvers.ties import break_cutoff_ties
from tests._oracle import COST_ORACLE_SEEDS, brute_force_ttk, make_cost_instance
from tests._oracle import make_ttk_instance as make_instance


def recomputed_objective(model: TTK, X, y, C):
    lab = y != -1
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    return hinge_objective(model.coef_, model.intercept_, X[lab], y_pm, C)


@pytest.fixture(scope="module")
def oracle_results(oracle_optima):
    # The optima come from the brute force, cached (tests/test_oracle_cache.py re-derives some).
    out = []
    for seed in range(40):
        X, y, k, C = make_instance(seed)
        opt = oracle_optima["ttk"][str(seed)]
        model = TTK(k=k, C=C).fit(X, y)
        out.append((seed, opt, model, X, y, C))
    return out


def test_fd_polish_matches_brute_force_on_95_percent(oracle_results):
    within = [
        (model.objective_ - opt) <= 1e-3 * max(abs(opt), 1e-12)
        for _, opt, model, *_ in oracle_results
    ]
    assert sum(within) >= 38, f"only {sum(within)}/40 within 0.1% of the optimum"


def test_never_below_the_optimum(oracle_results):
    # Below the exact optimum would mean an infeasible answer (more than k positives).
    for seed, opt, model, X, y, C in oracle_results:
        obj = recomputed_objective(model, X, y, C)
        assert obj >= opt - 1e-6 * max(1.0, abs(opt)), seed
        assert obj == pytest.approx(model.objective_, rel=1e-12)


def test_at_most_k_candidates_score_positive(oracle_results):
    for seed, _, model, *_ in oracle_results:
        k = model.k
        assert (model.candidate_scores_ > 1e-7).sum() <= k, seed
        assert model.selected_.size == k
        assert np.unique(model.selected_).size == k


def test_polish_beats_plain_fd_somewhere(oracle_results):
    # The paper's FD alone stops short on some instances; the polish must reach further there.
    gains = [
        TTK(k=model.k, C=C, polish=False).fit(X, y).objective_ - model.objective_
        for _, _, model, X, y, C in oracle_results[:20]
    ]
    assert min(gains) >= -1e-9
    assert max(gains) > 1e-3


def test_selected_are_top_k_by_score():
    X, y, k, C = make_instance(3)
    model = TTK(k=k, C=C).fit(X, y)
    scores = model.decision_function(X)
    cand = np.flatnonzero(y == -1)
    chosen = set(model.selected_.tolist())
    worst_in = min(scores[j] for j in chosen)
    best_out = max(scores[j] for j in cand if j not in chosen)
    assert worst_in >= best_out
    assert np.all(np.diff(scores[model.selected_]) <= 0)  # best first


def test_a_tie_at_the_cut_is_broken_by_the_one_rule():
    # Duplicate candidate rows tie exactly; the top k (lower row first), then a tie across
    # the cut broken by break_cutoff_ties seeded with random_state.
    X, y, k, C = make_instance(5)
    X = np.vstack([X, X[y == -1]])
    y = np.r_[y, -np.ones((y == -1).sum(), dtype=int)]
    for seed in (0, 3):
        a = TTK(k=k, C=C, random_state=seed).fit(X, y)
        s = a.candidate_scores_
        want, _, ties = break_cutoff_ties(s, np.arange(s.size), top_k(s, k), None, seed)
        assert a.selected_.tolist() == a.candidates_[want].tolist() and a.cutoff_ties_ == ties
        for j in a.selected_:
            twins = np.flatnonzero((y == -1) & np.all(X == X[j], axis=1))
            assert twins.size == 2  # each candidate has exactly one duplicate
            assert set(twins) <= set(a.selected_) or ties.n_drawn > 0  # else the draw decided


def test_shifted_svm_start_is_feasible_and_history_descends():
    X, y, k, C = make_instance(7)
    model = TTK(k=k, C=C, polish=False).fit(X, y)
    h = np.asarray(model.objective_history_)
    assert h[0] == pytest.approx(model.init_objective_)
    assert np.all(np.diff(h) <= 1e-9 * np.abs(h[:-1]).clip(1.0))
    assert model.objective_ <= model.init_objective_ + 1e-9


problem = st.builds(
    make_instance, st.integers(0, 10_000), st.just(10**9)
)  # any size; no oracle needed for the properties


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem, st.booleans())
def test_properties(inst, polish):
    X, y, k, C = inst
    model = TTK(k=k, C=C, polish=polish).fit(X, y)
    # exactly k, all candidates, no repeats
    assert model.selected_.size == k
    assert set(model.selected_.tolist()) <= set(np.flatnonzero(y == -1).tolist())
    assert np.unique(model.selected_).size == k
    # FD never increases the objective; the final objective is <= the shifted-SVM start
    h = np.asarray(model.objective_history_)
    assert np.all(np.diff(h) <= 1e-9 * np.abs(h[:-1]).clip(1.0))
    assert model.objective_ <= model.init_objective_ * (1 + 1e-9) + 1e-12
    # same input, same output
    again = TTK(k=k, C=C, polish=polish).fit(X, y)
    assert np.array_equal(again.selected_, model.selected_)
    assert np.array_equal(again.coef_, model.coef_)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_permuting_rows_permutes_the_answer(seed, perm_seed):
    X, y, k, C = make_instance(seed, 10**9)
    model = TTK(k=k, C=C).fit(X, y)
    perm = np.random.default_rng(perm_seed).permutation(len(y))
    other = TTK(k=k, C=C).fit(X[perm], y[perm])
    # Same objective and the same chosen rows (mapped back), unless scores tie at the k-th
    # place, where the lower-index rule legitimately depends on the order.
    assert other.objective_ == pytest.approx(model.objective_, rel=1e-6, abs=1e-9)
    s = np.sort(model.candidate_scores_)[::-1]
    gap = s[k - 1] - s[k]
    if gap > 1e-6 * max(1.0, abs(s[0])):
        assert set(perm[other.selected_].tolist()) == set(model.selected_.tolist())


def test_pickle_and_clone_roundtrip():
    X, y, k, C = make_instance(11)
    model = TTK(k=k, C=C).fit(X, y)
    again = pickle.loads(pickle.dumps(model))
    assert np.array_equal(again.selected_, model.selected_)
    assert np.array_equal(again.decision_function(X), model.decision_function(X))
    fresh = clone(model)
    assert not hasattr(fresh, "coef_") and fresh.get_params() == model.get_params()


def test_predict_marks_at_most_k_candidates():
    X, y, k, C = make_instance(13)
    model = TTK(k=k, C=C).fit(X, y)
    assert model.predict(X[y == -1]).sum() <= k
    assert set(np.unique(model.predict(X)).tolist()) <= {0, 1}


# --- bad input -------------------------------------------------------------------------

GOOD_X = np.random.default_rng(0).normal(size=(10, 2))
GOOD_Y = np.array([0, 1, 0, 1, 0, -1, -1, -1, -1, -1])


@pytest.mark.parametrize(
    ("X", "y", "params", "fragment"),
    [
        (np.where(np.eye(10, 2) > 0, np.nan, GOOD_X), GOOD_Y, {}, "NaN or infinite"),
        (np.where(np.eye(10, 2) > 0, np.inf, GOOD_X), GOOD_Y, {}, "NaN or infinite"),
        (GOOD_X, GOOD_Y, {"k": 0}, "k=0"),
        (GOOD_X, GOOD_Y, {"k": -2}, "k=-2"),
        (GOOD_X, GOOD_Y, {"k": 5}, "k=5"),
        (GOOD_X, GOOD_Y, {"k": 2.5}, "whole number"),
        (GOOD_X, np.array([0, 1] * 5), {}, "no candidate rows"),
        (GOOD_X, np.array([1] * 5 + [-1] * 5), {}, "both classes"),
        (GOOD_X[:9], GOOD_Y, {}, "X has 9 rows, y has 10"),
        (np.array([["a", "b"]] * 10), GOOD_Y, {}, "numeric"),
        (GOOD_X, np.array([0, 1, 2, 1, 0, -1, -1, -1, -1, -1]), {}, "other values [2]"),
        (GOOD_X, GOOD_Y, {"C": 0.0}, "C must be"),
        (GOOD_X, GOOD_Y, {"C": np.nan}, "C must be"),
        (GOOD_X, GOOD_Y, {"solver": "cplex"}, "solver must be one of"),
        (GOOD_X, GOOD_Y, {"max_iter": -1}, "max_iter"),
        (GOOD_X, GOOD_Y, {"step_shrink": 2.0}, "step_shrink"),
        (GOOD_X, GOOD_Y, {"solver": "mip", "threads": 0}, "threads must be at least 1"),
        (GOOD_X, GOOD_Y, {"solver": "mip", "time_limit": 0}, "time_limit must be"),
        (GOOD_X[:, :0], GOOD_Y, {}, "0 feature(s)"),
        (GOOD_X[:, 0], GOOD_Y, {}, "must be 2-D"),
    ],
)
def test_bad_input_names_the_problem(X, y, params, fragment):
    model = TTK(**{"k": 2, **params})
    with pytest.raises(InvalidInputError) as info:
        model.fit(X, y)
    assert isinstance(info.value, ReserveError) and isinstance(info.value, ValueError)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_input_messages_say_how_to_fix():
    with pytest.raises(InvalidInputError, match=r"Choose k between 1 and 4"):
        TTK(k=5).fit(GOOD_X, GOOD_Y)
    with pytest.raises(InvalidInputError, match=r"Impute or drop"):
        TTK(k=2).fit(np.where(np.eye(10, 2) > 0, np.nan, GOOD_X), GOOD_Y)


# scikit-learn's own estimator checks: tests/test_sklearn_checks.py (every estimator).


def test_hand_solved_instance():
    """1-D, labelled -1 (neg) and +1 (pos), candidates z = 2 and z = 0.5, k = 1, C = 10.

    The plain SVM (w = 1, b = 0, objective 0.5) scores both candidates positive. Allowing only
    z = 2: b <= -0.5 w, and for w >= 2 both hinges vanish, so the optimum is w = 2, b = -1,
    objective 2. Allowing only z = 0.5: b <= -2 w keeps the positive's hinge >= 1 + w, and the
    best is 0.5/9 + 40/3 > 13. So TTK must reach 2 and pick z = 2; the oracle must agree.
    """
    X = np.array([[-1.0], [1.0], [2.0], [0.5]])
    y = np.array([0, 1, -1, -1])
    opt, _, _, S = brute_force_ttk(X, y, 1, 10.0)
    assert opt == pytest.approx(2.0, rel=1e-6)
    assert S == (0,)
    model = TTK(k=1, C=10.0).fit(X, y)
    assert model.objective_ == pytest.approx(2.0, rel=1e-6)
    assert model.coef_[0] == pytest.approx(2.0, rel=1e-5)
    assert model.intercept_ == pytest.approx(-1.0, rel=1e-5)
    assert model.selected_.tolist() == [2]


# --- money budgets ---------------------------------------------------------------------------


def _check_money_selection(model, X, y, cost, budget):
    cand = np.flatnonzero(y == -1)
    sel = model.selected_
    assert set(sel.tolist()) <= set(cand.tolist()) and np.unique(sel).size == sel.size
    assert model.selected_cost_ == pytest.approx(cost[sel].sum(), rel=1e-12)
    assert model.selected_cost_ <= budget * (1 + 1e-12)
    assert model.budget_ == budget
    # Every candidate scoring positive is selected, so the positives fit the budget.
    scores = model.decision_function(X)
    assert set(cand[scores[cand] > 0].tolist()) <= set(sel.tolist())
    # The selection is the greedy walk of the final scores: best first, maximal.
    assert np.all(np.diff(scores[sel]) <= 0)
    left = np.setdiff1d(cand, sel)
    assert np.all(model.selected_cost_ + cost[left] > budget * (1 + 1e-12))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.booleans(), st.floats(0.0, 1.0))
def test_properties_with_costs(seed, polish, where):
    X, y, _, C = make_instance(seed, 10**9)
    rng = np.random.default_rng(seed)
    cand = y == -1
    cost = np.where(cand, rng.uniform(0.2, 4.0, y.size), np.nan)
    c = cost[cand]
    lo, hi = c.max(), c.sum() - 1e-6  # from "the dearest fits" to "all but a hair"
    budget = float(lo + where * (hi - lo)) if hi > lo else float(c.min())
    model = TTK(C=C, polish=polish, budget=budget).fit(X, y, cost=cost)
    _check_money_selection(model, X, y, cost, budget)
    h = np.asarray(model.objective_history_)
    assert np.all(np.diff(h) <= 1e-9 * np.abs(h[:-1]).clip(1.0))
    assert model.objective_ <= model.init_objective_ * (1 + 1e-9) + 1e-12
    again = TTK(C=C, polish=polish, budget=budget).fit(X, y, cost=cost)
    assert np.array_equal(again.selected_, model.selected_)
    assert np.array_equal(again.coef_, model.coef_) and again.intercept_ == model.intercept_


@pytest.mark.parametrize("c", [1.0, 2.5])
@pytest.mark.parametrize("polish", [True, False])
def test_equal_costs_reproduce_the_cell_budget_exactly(c, polish):
    # Sums of 1.0 and of 2.5 are exact in binary floating point, so every budget comparison
    # the solvers make is the same as with counts: identical paths, identical answers.
    for seed in range(12):
        X, y, k, C = make_instance(seed, 10**9)
        cells = TTK(k=k, C=C, polish=polish).fit(X, y)
        money = TTK(C=C, polish=polish, budget=k * c).fit(X, y, cost=np.full(y.size, c))
        assert np.array_equal(money.selected_, cells.selected_), seed
        assert np.array_equal(money.coef_, cells.coef_), seed
        assert money.intercept_ == cells.intercept_, seed
        assert money.objective_history_ == cells.objective_history_, seed
        assert money.selected_cost_ == k * c and money.budget_ == k * c
        assert cells.selected_cost_ == float(k) and cells.budget_ == float(k)


@pytest.fixture(scope="module")
def cost_oracle_results(oracle_optima):
    out = []
    for seed in COST_ORACLE_SEEDS:
        X, y, cost, budget, C = make_cost_instance(seed)
        opt = oracle_optima["ttk_cost"][str(seed)]
        model = TTK(C=C, budget=budget).fit(X, y, cost=cost)
        out.append((seed, opt, model, X, y, cost, budget, C))
    return out


def test_fd_polish_with_costs_matches_the_brute_force(cost_oracle_results):
    # Seeds 4 and 23 need the polish's multi-drop move (plain swaps: 17% and 1.7% above).
    for seed, opt, model, *_ in cost_oracle_results:
        assert model.objective_ - opt <= 1e-3 * opt, seed


def test_fd_polish_with_costs_is_never_below_the_optimum(cost_oracle_results):
    for seed, opt, model, X, y, cost, budget, C in cost_oracle_results:
        obj = recomputed_objective(model, X, y, C)
        assert obj >= opt - 1e-6 * max(1.0, opt), seed
        _check_money_selection(model, X, y, cost, budget)


def test_the_cost_oracle_instances_bind():
    # Guard: without the budget the SVM's positives would cost more than it, so agreement
    # with the oracle exercises the constraint.
    from reserve.solvers._qp import solve_fixed_set

    for seed in (2, 4, 23):
        X, y, cost, budget, C = make_cost_instance(seed)
        lab = y != -1
        svm = solve_fixed_set(X[lab], np.where(y[lab] == 1, 1.0, -1.0), C)
        assert cost[~lab][X[~lab] @ svm.w + svm.b > 0].sum() > budget


def test_labelled_rows_costs_are_ignored_and_input_order_does_not_matter():
    X, y, cost, budget, C = make_cost_instance(5)
    a = TTK(C=C, budget=budget).fit(X, y, cost=cost)
    b = TTK(C=C, budget=budget).fit(X, y, cost=np.where(y == -1, cost, -7.0))
    assert np.array_equal(a.selected_, b.selected_)
    perm = np.random.default_rng(1).permutation(y.size)
    p = TTK(C=C, budget=budget).fit(X[perm], y[perm], cost=cost[perm])
    assert p.objective_ == pytest.approx(a.objective_, rel=1e-9)
    assert sorted(perm[p.selected_].tolist()) == sorted(a.selected_.tolist())


COST = np.r_[np.full(5, np.nan), [1.0, 2.0, 3.0, 4.0, 5.0]]  # candidates: rows 5..9, total 15


@pytest.mark.parametrize(
    ("budget", "cost", "fragments"),
    [
        (5.0, COST[:9], ["cost must have shape (10,)", "received shape (9,)"]),
        (5.0, COST.reshape(2, 5), ["cost must have shape (10,)", "(2, 5)"]),
        (5.0, np.array(["a"] * 10), ["cost must be numeric", "<U1"]),
        (5.0, np.r_[COST[:6], np.nan, 3.0, np.inf, 5.0], ["2 NaN or infinite", "first at row 6"]),
        (5.0, np.r_[COST[:7], 0.0, -1.0, 5.0], ["must be > 0", "2 value(s) <= 0", "at row 7"]),
        (0.0, COST, ["budget must be a positive finite number", "received 0.0"]),
        (np.nan, COST, ["budget must be a positive finite number", "nan"]),
        ("5", COST, ["budget must be a positive finite number", "'5'"]),
        (0.5, COST, ["budget=0.5 is below the cheapest", "(1, row 5)", "at least 1"]),
        (15.0, COST, ["budget=15 covers the total cost of all 5 candidates", "below 15"]),
    ],
)
def test_bad_costs_and_budgets_name_the_problem(budget, cost, fragments):
    with pytest.raises(InvalidInputError) as info:
        TTK(budget=budget).fit(GOOD_X, GOOD_Y, cost=cost)
    msg = str(info.value)
    assert all(f in msg for f in fragments), msg
    assert "\n" not in msg


def test_budget_and_cost_come_together():
    with pytest.raises(InvalidInputError, match=r"budget=5.0 needs cost= in fit"):
        TTK(budget=5.0).fit(GOOD_X, GOOD_Y)
    with pytest.raises(InvalidInputError, match=r"cost= in fit needs a money budget"):
        TTK(k=2).fit(GOOD_X, GOOD_Y, cost=COST)


def test_k_is_not_used_with_costs():
    # k=10 would be refused for 5 candidates; with a money budget it plays no part.
    model = TTK(k=10, budget=6.0).fit(GOOD_X, GOOD_Y, cost=COST)
    _check_money_selection(model, GOOD_X, GOOD_Y, COST, 6.0)


def test_ladder_mean_is_feasible_and_averages_the_fits_at_its_budgets():
    # The mean of the fits at k and at the bracketing powers of 2: at most k candidates
    # positive, its objective recomputed from its coefficients, and its coefficients the mean
    # of the separate fits'.
    for seed in range(10):
        X, y, k, C = make_instance(seed)
        model = TTK(k=k, C=C, ladder="mean").fit(X, y)
        assert model.ladder_budgets_[0] == k
        assert recomputed_objective(model, X, y, C) == pytest.approx(model.objective_, rel=1e-12)
        assert model.selected_.size == k and (model.candidate_scores_ > 1e-7).sum() <= k
        fits = [TTK(k=b, C=C).fit(X, y).coef_ for b in model.ladder_budgets_]
        np.testing.assert_allclose(model.coef_, np.mean(fits, axis=0), rtol=1e-9, atol=1e-12)


def test_best_intercept_minimises_the_weighted_hinge_sum():
    from reserve.solvers.ttk import best_intercept

    rng = np.random.default_rng(4)
    m, y_pm, c = rng.normal(size=40), np.where(rng.random(40) < 0.4, 1.0, -1.0), rng.random(40)
    grid = np.linspace(-5, 5, 20001)
    brute = [np.sum(c * np.maximum(0, 1 - y_pm * (m + b))) for b in grid]
    b = best_intercept(m, y_pm, c)
    assert np.sum(c * np.maximum(0, 1 - y_pm * (m + b))) <= min(brute) + 1e-9


def test_ladder_budgets_and_where_the_ladder_applies():
    from reserve.solvers.ttk import ladder_budgets

    assert ladder_budgets(1, 10) == (1, 2)
    assert ladder_budgets(7, 10) == (4, 8)
    assert ladder_budgets(8, 10) == (8,)  # 16 candidates are not there
    X, y, k, C = make_instance(3)
    assert len(TTK(k=k, C=C, ladder="mean").fit(X, y).ladder_budgets_) >= 2
    assert TTK(k=k, C=C).fit(X, y).ladder_budgets_ == (k,)
    cost = np.where(y == -1, 1.0, np.nan)
    money = TTK(budget=float(k), C=C, ladder="mean").fit(X, y, cost=cost)
    assert money.ladder_budgets_ == (k,)  # money budgets: no ladder
    with pytest.raises(InvalidInputError, match="ladder must be one of 'none', 'mean'"):
        TTK(k=k, ladder="many").fit(X, y)


def test_ladder_fits_in_forked_children_give_the_same_answer(monkeypatch):
    from reserve import fork as _fork

    monkeypatch.setattr(_fork.threading, "active_count", lambda: 1)  # allow the fork here
    forked = []
    real = _fork.Forked

    def spy(fn, args):
        forked.append(fn)
        return real(fn, args)

    monkeypatch.setattr(_fork, "Forked", spy)
    for seed in range(4):
        X, y, k, C = make_instance(seed)
        one = TTK(k=k, C=C, ladder="mean").fit(X, y)
        two = TTK(k=k, C=C, ladder="mean", n_jobs=2).fit(X, y)
        np.testing.assert_array_equal(two.coef_, one.coef_)
        assert two.intercept_ == one.intercept_
        np.testing.assert_array_equal(two.selected_, one.selected_)
        for name in ("fd_objective_", "n_iter_", "stop_reason_", "n_swaps_", "ladder_budgets_"):
            assert getattr(two, name) == getattr(one, name), name
        assert two.objective_history_ == one.objective_history_
    assert len(forked) == 4 or not _fork.can_fork()


@pytest.mark.parametrize("n_jobs", [0, 1.5, True, "2"])
def test_a_bad_n_jobs_is_refused(n_jobs):
    X, y, k, _ = make_instance(0)
    with pytest.raises(InvalidInputError, match="n_jobs must be None or a non-zero integer"):
        TTK(k=k, n_jobs=n_jobs).fit(X, y)
