"""The private-land check (reserve.confidence): effort-stratified AUC and precision against
brute-force oracles, the intervals, and cross-validation's corrected interval."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from reserve.confidence import (
    CrossValidation,
    cv_interval,
    effort_strata,
    private_land_check,
    stratified_auc,
    stratified_precision,
)


def brute_auc(score, label, n):
    """Every (detected, undetected) pair of one stratum: 1 if ordered, 1/2 if tied."""
    strata = effort_strata(n)
    wins = pairs = 0.0
    for i, j in itertools.product(range(len(score)), repeat=2):
        if strata[i] == strata[j] and label[i] == 1 and label[j] == 0:
            pairs += 1
            wins += 1.0 if score[i] > score[j] else 0.5 if score[i] == score[j] else 0.0
    return wins / pairs


def brute_precision(score, label, n, share):
    """Per stratum: the top share by score, the boundary cell weighted by its fraction."""
    strata = effort_strata(n)
    hits = taken = 0.0
    for s in np.unique(strata):
        rows = np.flatnonzero(strata == s)
        order = rows[np.argsort(-score[rows], kind="stable")]
        m = share * rows.size
        for rank, row in enumerate(order):
            w = min(max(m - rank, 0.0), 1.0)
            hits += w * label[row]
        taken += m
    return hits / taken


@pytest.mark.parametrize("seed", range(5))
def test_stratified_auc_and_precision_equal_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 30, 60)
    label = (rng.random(60) < 0.4).astype(int)
    score = np.round(rng.normal(size=60) + label, 1)  # rounded: ties occur
    assert stratified_auc(score, label, n) == pytest.approx(brute_auc(score, label, n))
    for share in (0.05, 0.3, 1.0):
        assert stratified_precision(score, label, n, share) == pytest.approx(
            brute_precision(score, label, n, share)
        )


def test_ranking_by_effort_earns_nothing_within_strata():
    """Detection grows with checklists; a ranking by effort alone must look blind."""
    rng = np.random.default_rng(0)
    from sklearn.metrics import roc_auc_score

    n = rng.integers(1, 30, 4000)
    occupied = rng.random(4000) < 0.3
    label = (occupied & (rng.random(4000) < 1 - 0.9**n)).astype(int)
    assert roc_auc_score(label, n) > 0.58  # effort alone does predict a detection
    check = private_land_check(np.log(n), label, n, 0.05)
    assert check.auc == pytest.approx(0.5, abs=0.03)
    assert check.precision_top == pytest.approx(check.blind, abs=0.05)
    habitat = private_land_check(occupied + rng.normal(0, 0.5, 4000), label, n, 0.05)
    assert habitat.auc_low > 0.6 and habitat.precision_top_low > habitat.blind


def test_intervals_bracket_the_point_and_shrink_with_more_cells():
    rng = np.random.default_rng(1)
    widths = []
    for size in (100, 1600):
        n = rng.integers(1, 20, size)
        label = (rng.random(size) < 0.3).astype(int)
        check = private_land_check(label + rng.normal(0, 1, size), label, n, 0.1, seed=3)
        assert check.auc_low <= check.auc <= check.auc_high
        assert check.precision_top_low <= check.precision_top <= check.precision_top_high
        widths.append(check.auc_high - check.auc_low)
    assert widths[1] < widths[0] / 2


def test_check_is_deterministic_under_its_seed():
    rng = np.random.default_rng(2)
    n, label, score = rng.integers(1, 9, 200), rng.integers(0, 2, 200), rng.normal(size=200)
    a = private_land_check(score, label, n, 0.05, seed=7)
    assert a == private_land_check(score, label, n, 0.05, seed=7)


def test_check_not_available_without_both_classes_in_a_stratum():
    n = np.array([1, 1, 1, 8, 8, 8, 8, 8])
    label = np.array([1, 1, 1, 0, 0, 0, 0, 0])  # detections and non-detections never compare
    check = private_land_check(np.arange(8.0), label, n, 0.1)
    assert not check.available and "comparable survey effort" in check.reason
    assert np.isnan(check.auc)


def test_bad_shapes_and_shares_are_refused():
    with pytest.raises(ValueError, match="one length"):
        stratified_auc(np.zeros(3), np.zeros(4), np.ones(3))
    with pytest.raises(ValueError, match="share"):
        stratified_precision(np.zeros(3), np.zeros(3), np.ones(3), 0.0)


def test_cv_interval_is_the_corrected_resampled_t():
    from scipy.stats import t

    s = np.array([0.2, 0.4, 0.5, 0.3, np.nan, 0.6])
    cv = cv_interval(s, 0.5, 0.25)
    finite = s[np.isfinite(s)]
    half = t.ppf(0.95, 4) * np.sqrt((1 / 5 + 0.5) * finite.var(ddof=1))
    assert cv.precision == pytest.approx(finite.mean())
    assert (cv.low, cv.high) == pytest.approx((finite.mean() - half, finite.mean() + half))
    assert cv.n_splits == 5 and cv.measured
    assert not cv_interval(np.array([np.nan]), 0.5, 0.2).measured
    one = cv_interval(np.array([0.4]), 0.5, 0.2)
    assert one.precision == 0.4 and np.isnan(one.low)
    assert CrossValidation().blind != CrossValidation().blind  # NaN by default
