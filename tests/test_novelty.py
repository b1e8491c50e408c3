"""Tests for reserve.novelty: MESS against a literal oracle, hand cases, the sign property."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from reserve.errors import InvalidInputError
from reserve.novelty import CONSTANT_MISMATCH, mess, similarity


def oracle_similarity(p: float, ref: list[float]) -> float:
    """Elith et al. (2010) as dismo::mess counts f (reference values <= p), one value at a time."""
    if not math.isfinite(p):
        return math.nan
    lo, hi = min(ref), max(ref)
    if lo == hi:
        return 100.0 if p == lo else CONSTANT_MISMATCH
    below = 0
    for r in ref:
        if r <= p:
            below += 1
    f = 100.0 * below / len(ref)
    if f == 0:
        return (p - lo) / (hi - lo) * 100.0
    if f <= 50:
        return 2.0 * f
    if f < 100:
        return 2.0 * (100.0 - f)
    return (hi - p) / (hi - lo) * 100.0


def oracle_mess(points: np.ndarray, reference: np.ndarray) -> tuple[list[float], list[int]]:
    values, mods = [], []
    for i in range(points.shape[0]):
        sims = [oracle_similarity(float(points[i, j]), reference[:, j].tolist())
                for j in range(points.shape[1])]  # fmt: skip
        if any(math.isnan(s) for s in sims):
            values.append(math.nan)
            mods.append(-1)
            continue
        best = 0
        for j, s in enumerate(sims):
            if s < sims[best]:
                best = j
        values.append(sims[best])
        mods.append(best)
    return values, mods


@pytest.mark.parametrize("seed", range(5))
def test_matches_the_literal_oracle_on_random_data(seed):
    rng = np.random.default_rng(seed)
    reference = rng.normal(size=(40, 4))
    reference[:, 2] = np.round(reference[:, 2])  # ties in the reference
    points = np.vstack([rng.normal(scale=1.8, size=(200, 4)), reference[:10]])
    points[::17, 1] = np.nan
    points[5, 3] = np.inf
    points[7, 2] = reference[:, 2].max()  # exactly at the ends
    points[8, 2] = reference[:, 2].min()
    value, mod = mess(points, reference)
    want_value, want_mod = oracle_mess(points, reference)
    np.testing.assert_allclose(value, want_value, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert mod.tolist() == want_mod


def test_hand_computed_cases():
    ref = np.array([[0.0, 5.0], [1.0, 5.0], [2.0, 5.0], [3.0, 5.0], [4.0, 5.0]])
    pts = np.array([
        [-2.0, 5.0],  # below the range: 100 * (-2 - 0) / 4 = -50
        [0.0, 5.0],   # at the minimum: 1 of 5 values <= 0, f = 20, similarity 40
        [2.0, 5.0],   # the median: f = 60 -> 2 * (100 - 60) = 80
        [1.5, 5.0],   # f = 40 -> 80
        [4.0, 5.0],   # at the maximum: f = 100, 100 * (4 - 4) / 4 = 0, not novel
        [5.0, 5.0],   # above: -25
        [2.0, 6.0],   # the constant variable differs: -100, variable 1
        [9.0, 6.0],   # -125 on variable 0 beats the constant variable's -100
    ])  # fmt: skip
    sim = similarity(pts, ref)
    assert sim[:, 0].tolist() == [-50.0, 40.0, 80.0, 80.0, 0.0, -25.0, 80.0, -125.0]
    assert sim[:, 1].tolist() == [100.0] * 6 + [CONSTANT_MISMATCH] * 2
    value, mod = mess(pts, ref)
    assert value.tolist() == [-50.0, 40.0, 80.0, 80.0, 0.0, -25.0, -100.0, -125.0]
    assert mod.tolist() == [0, 0, 0, 0, 0, 0, 1, 0]


def test_f_counts_reference_values_equal_to_the_point():
    """dismo's findInterval: ties count as below, so f reaches 50 at the lower median."""
    ref = np.array([[1.0], [1.0], [1.0], [2.0]])
    # at 1: 3 of 4 values <= 1, f = 75, similarity 50 (a strict < would give f = 0, 0)
    assert similarity([[1.0]], ref)[0, 0] == 50.0
    assert similarity([[1.5]], ref)[0, 0] == 50.0
    assert similarity([[2.0]], ref)[0, 0] == 0.0


def test_mod_breaks_ties_on_the_first_variable():
    ref = np.array([[0.0, 0.0], [1.0, 1.0]])
    value, mod = mess([[2.0, 2.0], [0.5, 3.0]], ref)
    assert value.tolist() == [-100.0, -200.0] and mod.tolist() == [0, 1]


def test_one_dimensional_input_is_one_variable():
    value, mod = mess([0.0, 5.0], [1.0, 2.0, 3.0])
    assert value.tolist() == [-50.0, -100.0] and mod.tolist() == [0, 0]


@pytest.mark.parametrize(
    ("points", "reference", "needle"),
    [
        ([[1.0, 2.0]], [[1.0]], "same columns"),
        ([[1.0]], np.zeros((0, 1)), "no rows"),
        ([[1.0]], [[np.nan], [1.0]], "finite"),
        ([[1.0]], [["a"], ["b"]], "numeric"),
        (np.zeros((2, 2, 2)), [[1.0]], "2-D"),
    ],
)
def test_bad_input_is_refused(points, reference, needle):
    with pytest.raises(InvalidInputError, match=needle):
        mess(points, reference)


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(np.float64, st.tuples(st.integers(1, 12), st.integers(1, 3)), elements=finite),
    st.data(),
)
def test_sign_property_and_oracle(reference, data):
    d = reference.shape[1]
    points = data.draw(hnp.arrays(np.float64, st.tuples(st.integers(1, 10), st.just(d)),
                                  elements=finite))  # fmt: skip
    value, mod = mess(points, reference)
    lo, hi = reference.min(axis=0), reference.max(axis=0)
    inside = ((points >= lo) & (points <= hi)).all(axis=1)
    assert (value[inside] >= 0).all()
    assert (value[~inside] < 0).all()
    assert (value <= 100).all()
    want_value, want_mod = oracle_mess(points, reference)
    np.testing.assert_allclose(value, want_value, rtol=1e-9, atol=1e-9)
    assert mod.tolist() == want_mod


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float64, st.tuples(st.integers(2, 15), st.just(2)), elements=finite),
       st.randoms(use_true_random=False))  # fmt: skip
def test_reference_order_does_not_matter(reference, rnd):
    order = list(range(reference.shape[0]))
    rnd.shuffle(order)
    points = np.vstack([reference, reference * 1.5 + 1.0])
    a, b = mess(points, reference), mess(points, reference[order])
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
