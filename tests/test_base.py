"""The shared top-k rule and canonical order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from reserve.solvers._base import canonical_order, top_k

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
