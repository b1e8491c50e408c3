"""Polish: fixed-set QPs with constraint generation, and the swap search."""

from __future__ import annotations

import numpy as np
import pytest

from reserve.solvers import _polish
from reserve.solvers._polish import solve_subset
from reserve.solvers.budget import Budget
from reserve.solvers.ttk import shifted_svm_start
from tests._single import cells, money, polish1


def _problem(seed, n=60, m=300, d=4, k=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + m, d))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-2 * X[:n] @ rng.normal(size=d))), 1.0, -1.0)
    return X[:n], y, X[n:], k


@pytest.mark.parametrize("seed", [0, 1])
def test_constraint_generation_equals_all_constraints(seed, monkeypatch):
    Xl, y, Xc, k = _problem(seed)
    w, b, _ = shifted_svm_start(Xl, y, Xc, Budget.cells(k, Xc.shape[0]), 1.0)
    scores = Xc @ w + b
    in_S = np.zeros(Xc.shape[0], dtype=bool)
    in_S[np.argsort(-scores)[:k]] = True
    full, beta_full, n_full = solve_subset(Xl, y, Xc, in_S, 1.0, scores)
    monkeypatch.setattr(_polish, "_FULL_CONSTRAINTS", 10)  # force generation on this size
    gen, beta_gen, _ = solve_subset(Xl, y, Xc, in_S, 1.0, scores)
    assert n_full == 1
    assert gen.objective == pytest.approx(full.objective, rel=1e-6)
    assert np.all(Xc[~in_S] @ gen.w + gen.b <= 1e-12)
    assert np.flatnonzero(beta_gen > 1e-6).tolist() == np.flatnonzero(beta_full > 1e-6).tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_polish_never_worsens_and_keeps_k(seed):
    Xl, y, Xc, k = _problem(seed)
    w, b, _ = shifted_svm_start(Xl, y, Xc, Budget.cells(k, Xc.shape[0]), 1.0)
    start = 0.5 * w @ w + np.maximum(0, 1 - y * (Xl @ w + b)).sum()
    res = polish1(Xl, y, Xc, cells(k, Xc), 1.0, w, b)
    assert res.objective <= start + 1e-9
    assert res.selected.size == k
    assert np.all(np.diff(res.history) < 0)  # every accepted swap strictly improved
    assert len(res.history) == res.n_swaps + 1
    outside = np.setdiff1d(np.arange(Xc.shape[0]), res.selected)
    assert np.all(Xc[outside] @ res.w + res.b <= 1e-12)


def test_pairs_follow_antidiagonals():
    assert _polish.swap_pairs(2, 3, 10) == [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (1, 2)]
    assert _polish.swap_pairs(3, 3, 4) == [(0, 0), (0, 1), (1, 0), (0, 2)]


@pytest.mark.parametrize("seed", [0, 3])
def test_screened_polish_takes_the_same_path_as_the_full_check(seed, monkeypatch):
    # Mid-size: constraint generation and a working set much smaller than m, so trial
    # solutions are checked on the screen and, when its bound fails, on every candidate.
    Xl, y, Xc, k = _problem(seed, n=150, m=3000, d=5, k=12)
    monkeypatch.setattr(_polish, "_SCREEN_MIN", 150)
    monkeypatch.setattr(_polish, "_SCREEN_PER_K", 1)
    w, b, _ = shifted_svm_start(Xl, y, Xc, Budget.cells(k, Xc.shape[0]), 1.0)
    full = polish1(Xl, y, Xc, cells(k, Xc), 1.0, w, b, screen=False)
    fast = polish1(Xl, y, Xc, cells(k, Xc), 1.0, w, b, screen=True)
    assert full.n_swaps >= 1  # the instance exercises the swap search
    assert fast.selected.tolist() == full.selected.tolist()
    assert fast.history == pytest.approx(full.history, rel=1e-9)
    assert fast.n_qp == full.n_qp
    assert fast.n_refresh >= fast.n_swaps + 1
    assert np.all(Xc[np.setdiff1d(np.arange(Xc.shape[0]), fast.selected)] @ fast.w + fast.b <= 0)


def test_screen_vouches_only_where_the_bound_holds():
    rng = np.random.default_rng(4)
    Z = rng.normal(size=(2000, 3))
    scr = _polish.CandidateScreen(Z, 100)
    w, b = np.array([1.0, -0.5, 0.2]), -3.0
    scr.refresh(w, b)
    outside = np.setdiff1d(np.arange(Z.shape[0]), scr.idx)
    assert scr.idx.size == 100 and scr.tau > 0
    for _ in range(200):
        step = rng.normal(size=4)
        step *= rng.uniform(0, 2 * scr.tau) / np.linalg.norm(step)
        w2, b2 = w + step[:3], b + step[3]
        if scr.vouches(w2, b2):
            assert np.all(Z[outside] @ w2 + b2 < 0)
        else:
            assert np.linalg.norm(step) >= scr.tau * (1 - 1e-9)
    # A point far away is never vouched for, and the check then covers every outsider.
    in_S = np.zeros(Z.shape[0], dtype=bool)
    rows, _ = scr.outsider_scores(w * 10, 5.0, in_S)
    assert rows.size == Z.shape[0] and scr.n_full_checks == 1


# --- money budgets ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_polish_with_costs_fits_the_budget_and_never_worsens(seed):
    Xl, y, Xc, _ = _problem(seed)
    cost = np.random.default_rng(seed).uniform(0.3, 3.0, Xc.shape[0])
    B = 9.0
    w, b, _ = shifted_svm_start(Xl, y, Xc, Budget(cost, B), 1.0)
    start = 0.5 * w @ w + np.maximum(0, 1 - y * (Xl @ w + b)).sum()
    res = polish1(Xl, y, Xc, money(cost, B, 6), 1.0, w, b)
    assert res.objective <= start + 1e-9
    assert cost[res.selected].sum() <= B * (1 + 1e-12)
    assert np.all(np.diff(res.history) < 0)
    outside = np.setdiff1d(np.arange(Xc.shape[0]), res.selected)
    assert np.all(Xc[outside] @ res.w + res.b <= 1e-12)
    # The set stays maximal: no outsider would still fit (swaps are filled up).
    assert np.all(cost[res.selected].sum() + cost[outside] > B * (1 + 1e-12))


def test_polish_with_equal_costs_takes_the_cell_budget_path():
    Xl, y, Xc, k = _problem(1)
    w, b, _ = shifted_svm_start(Xl, y, Xc, Budget.cells(k, Xc.shape[0]), 1.0)
    a = polish1(Xl, y, Xc, cells(k, Xc), 1.0, w, b)
    c = polish1(Xl, y, Xc, money(np.full(Xc.shape[0], 2.5), 2.5 * k), 1.0, w, b)
    assert a.n_swaps >= 1
    assert a.history == c.history and a.selected.tolist() == c.selected.tolist()
    assert np.array_equal(a.w, c.w) and a.b == c.b and a.n_qp == c.n_qp


def test_fill_takes_positive_multipliers_first_then_scores_and_skips_what_does_not_fit():
    trial = np.array([True, False, False, False, False, False])
    cost = np.array([1.0, 2.0, 1.5, 1.0, 0.5, 0.4])
    beta = np.array([0.0, 0.0, 0.3, 0.9, 0.0, 0.0])
    hint = np.array([9.0, 5.0, 0.0, 0.0, -1.0, 3.0])
    added = _polish._fill(trial, 2.0, cost, beta, 1e-9, hint)
    # beta order: 3 (1.0, fits: 1.0 left), 2 (1.5, no); then scores: 5 (0.4, fits: 0.6 left),
    # 1 (2.0, no), 4 (0.5, fits: 0.1 left).
    assert added.tolist() == [3, 5, 4]
    assert trial.tolist() == [True, False, False, True, True, True]


def test_a_polish_cut_short_by_max_rounds_says_so_and_keeps_k():
    # seed 0: the full polish accepts 4 swaps; one round is a limit that binds.
    Xl, y, Xc, k = _problem(0)
    w, b, _ = shifted_svm_start(Xl, y, Xc, Budget.cells(k, Xc.shape[0]), 1.0)
    full = polish1(Xl, y, Xc, cells(k, Xc), 1.0, w, b)
    cut = polish1(Xl, y, Xc, cells(k, Xc), 1.0, w, b, max_rounds=1)
    assert full.n_swaps > 1 and full.stop_reason == "no_improving_swap"
    assert cut.n_swaps == 1 and cut.stop_reason == "max_rounds"
    assert full.objective < cut.objective < cut.history[0]
    scores = Xc @ cut.w + cut.b
    outside = np.setdiff1d(np.arange(Xc.shape[0]), cut.selected)
    assert cut.selected.size == k and np.all(scores[outside] <= 1e-12)
    assert np.count_nonzero(scores > 1e-9) <= k


def test_ttk_reports_a_polish_cut_short_by_its_round_cap():
    from reserve.solvers import TTK

    Xl, y_pm, Xc, _ = _problem(0)  # the instance above: the FD start leaves swaps to make
    X = np.vstack([Xl, Xc])
    y = np.r_[(y_pm > 0).astype(np.int64), np.full(Xc.shape[0], -1)]  # -1: a candidate
    capped = TTK(k=6, C=1.0, ladder="none", polish_max_rounds=1).fit(X, y)
    free = TTK(k=6, C=1.0, ladder="none").fit(X, y)
    assert capped.polish_stop_ == "max_rounds" and capped.n_swaps_ == 1
    assert free.polish_stop_ == "no_improving_swap"
    assert capped.selected_.size == 6
    assert TTK(k=6, C=1.0, ladder="none", polish=False).fit(X, y).polish_stop_ == "off"
