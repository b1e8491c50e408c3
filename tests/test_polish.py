"""Polish: fixed-set QPs with constraint generation, and the swap search."""

from __future__ import annotations

import numpy as np
import pytest

from reserve.solvers import _polish
from reserve.solvers._polish import polish, solve_subset
from reserve.solvers.ttk import shifted_svm_start


def _problem(seed, n=60, m=300, d=4, k=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + m, d))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-2 * X[:n] @ rng.normal(size=d))), 1.0, -1.0)
    return X[:n], y, X[n:], k


@pytest.mark.parametrize("seed", [0, 1])
def test_constraint_generation_equals_all_constraints(seed, monkeypatch):
    Xl, y, Xc, k = _problem(seed)
    w, b, _ = shifted_svm_start(Xl, y, Xc, k, 1.0)
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
    w, b, _ = shifted_svm_start(Xl, y, Xc, k, 1.0)
    start = 0.5 * w @ w + np.maximum(0, 1 - y * (Xl @ w + b)).sum()
    res = polish(Xl, y, Xc, k, 1.0, w, b)
    assert res.objective <= start + 1e-9
    assert res.selected.size == k
    assert np.all(np.diff(res.history) < 0)  # every accepted swap strictly improved
    assert len(res.history) == res.n_swaps + 1
    outside = np.setdiff1d(np.arange(Xc.shape[0]), res.selected)
    assert np.all(Xc[outside] @ res.w + res.b <= 1e-12)


def test_pairs_follow_antidiagonals():
    assert _polish._pairs(2, 3, 10) == [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (1, 2)]
    assert _polish._pairs(3, 3, 4) == [(0, 0), (0, 1), (1, 0), (0, 2)]
