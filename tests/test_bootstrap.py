"""Bootstrap refits: each a clone fitted on a resample of the problem, within its budget."""

from __future__ import annotations

import numpy as np

from reserve.bootstrap import refit, selection_frequency
from reserve.config import SelectOptions
from reserve.design import build_problem
from reserve.select import standardised
from reserve.solvers import SVM, TTK
from tests.test_select import make_units


def _fitted(**options):
    opts = SelectOptions(model="linear", n_jobs=1, **options)
    problem = build_problem(make_units(), opts, "mem")
    return opts, problem, standardised(problem.selection)[1]


def test_refit_is_a_fit_of_the_resampled_arrays():
    _, problem, fitted = _fitted(budget=6)
    sample = problem.bootstrap_samples(1, seed=3)[0]
    rows = refit(TTK(k=6), fitted, sample)
    # the same fit from plain arrays, mapped back to the problem's rows
    direct = TTK(k=6).fit(fitted.X[sample], fitted.y[sample])
    assert rows.tolist() == np.sort(sample[direct.selected_]).tolist()
    assert rows.size == 6 and (fitted.y[rows] == -1).all()


def test_baseline_refit_stays_within_a_money_budget():
    units = make_units()
    units["price"] = 1.0 + (units["cell_id"].to_numpy() % 3)
    opts = SelectOptions(budget=9.0, cost_column="price", model="linear", n_jobs=1)
    problem = build_problem(units, opts, "mem")
    fitted = standardised(problem.selection)[1]
    cost = problem.cost[problem.rows]
    for sample in problem.bootstrap_samples(3, seed=0):
        rows = refit(SVM(k=problem.k_fit), fitted, sample)
        assert cost[rows].sum() <= 9.0
        # nothing left out would still fit what is left
        left = np.setdiff1d(fitted.candidates, rows)
        assert (cost[left] > 9.0 - cost[rows].sum()).all()


def test_selection_frequency_counts_the_refits():
    units = make_units()
    cand = np.flatnonzero(units["role"].to_numpy() == "candidate")
    units["owned"] = False
    units.loc[cand[:1], "owned"] = True
    opts = SelectOptions(budget=5, model="linear", n_jobs=1, bootstrap=4, seed=2, locked_in="owned")
    problem = build_problem(units, opts, "mem")
    fitted = standardised(problem.selection)[1]
    est = TTK(k=problem.k_fit)
    freq = selection_frequency(opts, problem, est, fitted, lambda message: None)
    assert freq.shape == (len(units),)
    assert (freq[problem.locked_in] == 1.0).all()
    # an independent recount from the same resamples
    counts = np.zeros(len(units))
    for sample in problem.bootstrap_samples(4, seed=2):
        counts[problem.rows[refit(est, fitted, sample)]] += 1
    free = ~problem.locked_in
    assert np.array_equal(freq[free], counts[free] / 4)
    assert freq[problem.train].sum() == 0  # training cells are never selected
    assert np.isclose(freq[problem.candidate].sum(), problem.k_free)  # k cells per refit


def test_no_bootstrap_no_frequency():
    opts, problem, fitted = _fitted(budget=5, bootstrap=0)
    assert selection_frequency(opts, problem, TTK(k=5), fitted, print) is None
