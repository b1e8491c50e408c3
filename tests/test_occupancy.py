"""The occupancy calibration (reserve.occupancy): gradient, recovery, posterior, intervals."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import check_grad, minimize
from scipy.special import expit

from reserve import occupancy
from reserve.occupancy import OccupancyCalibration


def simulate(seed, size=3000, a=-0.5, b=1.0, p=0.3):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=size)
    occupied = rng.random(size) < 1 / (1 + np.exp(-(a + b * s)))
    n = rng.integers(1, 12, size)
    detected = occupied & (rng.random(size) < 1 - (1 - p) ** n)
    return s, n, detected, occupied


def test_gradient_matches_finite_differences():
    s, n, det, _ = simulate(0, 80)
    A = np.column_stack([np.ones_like(s), s, np.maximum(s - 0.5, 0.0)])
    nll = occupancy._nll  # the module's own objective, checked against finite differences
    err = check_grad(
        lambda t: nll(t, A, n, det)[0],
        lambda t: nll(t, A, n, det)[1],
        np.array([0.2, -0.4, 0.3, 0.1]),
    )
    assert err < 1e-4


def test_recovers_occupancy_and_detection():
    s, n, det, occupied = simulate(1)
    cal = OccupancyCalibration().fit(s, n, det)
    assert cal.detection_ == pytest.approx(0.3, abs=0.06)
    truth = 1 / (1 + np.exp(-(-0.5 + s)))
    assert np.abs(cal.probability(s) - truth).mean() < 0.05
    # a naive share of detections would understate occupancy; the model does not
    assert det.mean() < occupied.mean() - 0.05
    assert cal.probability(s).mean() == pytest.approx(occupied.mean(), abs=0.04)


def test_posterior_uses_the_cells_own_survey():
    s, n, det, _ = simulate(2)
    cal = OccupancyCalibration().fit(s, n, det)
    post = cal.posterior(np.zeros(3), np.array([0, 5, 5]), np.array([False, False, True]))
    prior = cal.probability(np.zeros(1))[0]
    assert post[0] == pytest.approx(prior)
    assert post[1] < prior and post[2] == 1.0


def test_without_slope_every_cell_gets_the_prevalence():
    s, n, det, _ = simulate(3)
    cal = OccupancyCalibration(slope=False).fit(s, n, det)
    p = cal.probability(np.array([-3.0, 0.0, 3.0]))
    assert np.ptp(p) == 0 and p[0] == pytest.approx(expit(cal.params_[0]))


def test_expected_count_interval_covers_the_truth_nine_times_in_ten():
    """The stated 90 % interval of the occupied count, over 40 simulated calibrations."""
    covered = 0
    for seed in range(40):
        s, n, det, occupied = simulate(seed, 600)
        cal = OccupancyCalibration().fit(s[:500], n[:500], det[:500])
        top = 500 + np.argsort(-s[500:])[:30]  # the 30 best-scored unsurveyed cells
        _, low, high = cal.expected_count(s[top], np.zeros(30), np.zeros(30, bool), seed=seed)
        covered += low <= occupied[top].sum() <= high
    assert covered >= 34  # 90 % of 40 is 36; allow for the draw


def test_stacking_weights_maximise_the_held_out_log_score():
    """Against a grid search over two members' mixture weight (the oracle)."""
    rng = np.random.default_rng(5)
    held = np.log(rng.uniform(0.05, 1.0, size=(2, 300)))
    held[0, :150] += 1.0  # each member predicts its own half of the cells better
    held[1, 150:] += 0.8
    w = occupancy._stacking_weights(held)
    grid = np.linspace(0, 1, 2001)
    score = [np.log(g * np.exp(held[0]) + (1 - g) * np.exp(held[1])).sum() for g in grid]
    assert w[0] == pytest.approx(grid[int(np.argmax(score))], abs=1e-3)
    assert 0.2 < w[0] < 0.8  # both keep weight, where pseudo-BMA would put it on one
    assert occupancy._stacking_weights(held[:1]).tolist() == [1.0]


@pytest.mark.parametrize("link", occupancy.LINKS)
def test_probability_never_falls_as_the_score_rises(link):
    """Calibration cells whose top tenth is empty: a free hinge turns the top down; the
    bounded fit keeps the order, and matches the best fit with a flat top (the oracle: the
    likelihood maximised over the other parameters with the slope above the knot at 0)."""
    s, n, det, _ = simulate(6, 1500)
    det = det & (s < np.quantile(s, 0.9))  # nothing detected above the knot
    cal = OccupancyCalibration(link=link).fit(s, n, det)
    grid = np.linspace(s.min() - 1, s.max() + 1, 400)
    assert np.all(np.diff(cal.probability(grid)) >= -1e-12)
    assert cal.params_[1] >= 0
    if link.endswith("+tail"):
        A = cal._design(s)
        free = minimize(occupancy._nll, np.zeros(4), args=(A, n, det), jac=True).x
        assert free[1] + free[2] < -0.1  # without the bound, the top would fall
        assert cal.params_[1] + cal.params_[2] == pytest.approx(0.0, abs=1e-6)

        def flat(t):  # the tail slope set to minus the slope: flat above the knot
            f, g = occupancy._nll(np.r_[t[:2], -t[1], t[2]], A, n, det)
            return f, np.r_[g[0], g[1] - g[2], g[3]]

        oracle = minimize(flat, cal.params_[[0, 1, 3]], jac=True, method="BFGS")
        assert occupancy._nll(cal.params_, A, n, det)[0] == pytest.approx(oracle.fun, rel=1e-6)


def test_a_free_fit_that_keeps_the_order_is_the_fit():
    """Where no slope turns down, the bound changes nothing: the free optimum."""
    s, n, det, _ = simulate(7, 1500)
    cal = OccupancyCalibration(link="score+tail").fit(s, n, det)
    free = minimize(occupancy._nll, np.zeros(4), args=(cal._design(s), n, det), jac=True).x
    assert free[1] > 0 and free[1] + free[2] > 0
    np.testing.assert_array_equal(cal.params_, free)
