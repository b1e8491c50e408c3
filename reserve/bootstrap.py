"""Robustness: refit the chosen estimator on resampled training cells.

``selection_frequency`` is the share of ``bootstrap`` refits that select each cell (locked-in
cells count 1); ``reserve select --bootstrap N`` adds it to the outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import clone

from reserve.config import SelectOptions
from reserve.design import Problem
from reserve.solvers import TTK_METHODS, budget_select

__all__ = ["fit_params", "picked_rows", "refit", "selection_frequency"]


def picked_rows(est: Any, method: str, cost: np.ndarray | None, budget: float | None) -> np.ndarray:
    """Selected rows of a fitted estimator, best first; baselines walked within a money budget."""
    if cost is None or method in TTK_METHODS:
        return np.asarray(est.selected_, dtype=np.int64)
    cand = np.asarray(est.candidates_)
    return cand[budget_select(np.asarray(est.candidate_scores_), cost[cand], float(budget))]


def fit_params(method: str, cost: np.ndarray | None) -> dict[str, Any]:
    """Keyword arguments of ``fit``: ``cost`` for a TTK fit under a money budget, else none."""
    return {} if cost is None or method not in TTK_METHODS else {"cost": cost}  # knapsack TTK only


def refit(
    est: Any, method: str, Z: np.ndarray, y: np.ndarray, sample: np.ndarray,
    cost: np.ndarray | None, budget: float | None,
) -> np.ndarray:  # fmt: skip
    """Rows of ``Z`` selected by a clone of ``est`` refitted on the rows ``sample``."""
    sub_cost = None if cost is None else cost[sample]
    refitted = clone(est).fit(Z[sample], y[sample], **fit_params(method, sub_cost))
    return np.sort(sample[picked_rows(refitted, method, sub_cost, budget)])


def selection_frequency(
    opts: SelectOptions, problem: Problem, est: Any, Z_rows: np.ndarray,
    cost: np.ndarray | None, say: Callable[[str], None],
) -> np.ndarray | None:  # fmt: skip
    """Share of ``opts.bootstrap`` refits selecting each cell (locked-in cells: 1), or None.

    The replicates are :meth:`reserve.design.Problem.bootstrap_samples`; each refit is a
    :func:`~sklearn.base.clone` of ``est`` fitted on the already standardised rows.
    """
    if not opts.bootstrap:
        return None
    from joblib import Parallel, delayed

    frequency = np.zeros(len(problem.X))
    frequency[problem.locked_in] = 1.0
    if problem.k_free:
        say(f"bootstrap: {opts.bootstrap} refits on resampled training cells ({opts.n_jobs} jobs)")
        samples = problem.bootstrap_samples(opts.bootstrap, opts.seed)
        chosen = getattr(est, "refit_params", None)
        if chosen is not None:  # refits keep the chosen maps, C and weightings (no CV each)
            est = clone(est).set_params(**chosen())
        picks = Parallel(n_jobs=opts.n_jobs)(
            delayed(refit)(clone(est), opts.method, Z_rows, problem.y, sample, cost,
                            problem.free_budget) for sample in samples
        )  # fmt: skip
        counts = np.zeros(len(problem.rows), dtype=np.int64)
        for chosen in picks:
            counts[chosen] += 1
        cand = (problem.y if problem.y.ndim == 1 else problem.y[:, 0]) == -1
        frequency[problem.rows[cand]] = counts[cand] / opts.bootstrap  # not learned copies
    return frequency
