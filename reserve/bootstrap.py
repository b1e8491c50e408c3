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
from reserve.solvers import SelectionProblem
from reserve.solvers.registry import fixed_model

__all__ = ["refit", "selection_frequency"]


def refit(est: Any, problem: SelectionProblem, sample: np.ndarray) -> np.ndarray:
    """Rows of ``problem`` selected by a clone of ``est`` refitted on the rows ``sample``.

    The refit sees :meth:`~reserve.solvers.SelectionProblem.take`'s problem: the same
    budget (cells or money) over the same candidates, so every method selects within it.
    """
    refitted = clone(est).fit(problem.take(sample))
    return np.sort(sample[np.asarray(refitted.selected_, dtype=np.int64)])


def selection_frequency(
    opts: SelectOptions,
    problem: Problem,
    est: Any,
    fitted: SelectionProblem,
    say: Callable[[str], None],
) -> np.ndarray | None:
    """Share of ``opts.bootstrap`` refits selecting each cell (locked-in cells: 1), or None.

    The replicates are :meth:`reserve.design.Problem.bootstrap_samples`; each refit is a
    :func:`~sklearn.base.clone` of ``est`` fitted on those rows of ``fitted``, the problem
    over the already standardised rows.
    """
    if not opts.bootstrap:
        return None
    from joblib import Parallel, delayed

    frequency = np.zeros(len(problem.X))
    frequency[problem.locked_in] = 1.0
    if problem.k_free:
        say(f"bootstrap: {opts.bootstrap} refits on resampled training cells ({opts.n_jobs} jobs)")
        samples = problem.bootstrap_samples(opts.bootstrap, opts.seed)
        est = fixed_model(est)  # refits keep the chosen maps, C and weightings (no CV each)
        jobs = (delayed(refit)(clone(est), fitted, sample) for sample in samples)
        picks = Parallel(n_jobs=opts.n_jobs)(jobs)
        counts = np.zeros(len(problem.rows), dtype=np.int64)
        for chosen in picks:
            counts[chosen] += 1
        cand = fitted.Y[:, 0] == -1
        frequency[problem.rows[cand]] = counts[cand] / opts.bootstrap  # not learned copies
    return frequency
