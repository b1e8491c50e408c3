"""``--boundary-penalty auto``: choose the penalty at the knee of the objective / boundary curve.

The fitted estimator's model (AutoTTK's chosen feature map, ``C`` and class weight; or the
linear TTK as it is) is refitted at the penalties of Cohon's calibration
(:func:`reserve.solvers.calibrate_penalty`), without a new cross-validation. Each fit's
objective without the penalty, boundary length, patches and expected precision (from the
training cells alone: :func:`presence_probability`) make the trade-off table that
``reserve select`` writes as the ``boundary_tradeoff`` layer and draws on the map.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from reserve.adjacency import grid_adjacency, patch_labels
from reserve.design import Problem
from reserve.solvers import MapMean, SelectionProblem, at_standard_effort, calibrate_penalty
from reserve.solvers.registry import fixed_model

__all__ = ["calibrate_boundary", "presence_probability"]


def presence_probability(est: Any, Z_rows: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each row's probability of a presence label, from the training cells alone.

    A logistic regression (``C = 1``, unweighted, so that its probabilities keep the
    training cells' prevalence) on the fitted model's features: AutoTTK's chosen feature map
    (every member's, side by side, for an ensemble), or the standardised features of a linear
    fit. Candidates are scored at the training
    cells' median effort when the model has effort columns, as the model scores them. The
    mean over a selection is its expected precision: the share of its cells a survey like
    the training ones would report the species in. No test label enters it.

    Parameters
    ----------
    est : estimator
        The fitted selector (``best_estimator_`` and ``effort_columns`` are read if present).
    Z_rows : numpy.ndarray
        The standardised fitted rows.
    y : numpy.ndarray
        Their labels (1, 0; -1 for candidates).

    Returns
    -------
    numpy.ndarray
        Probabilities, one per row of ``Z_rows``.
    """
    lab, cand = np.flatnonzero(y != -1), np.flatnonzero(y == -1)
    cols = np.asarray(getattr(est, "effort_columns", None) or (), dtype=np.int64)
    Z = at_standard_effort(Z_rows, lab, cand, cols)
    pipe = getattr(est, "best_estimator_", None)
    if isinstance(pipe, MapMean):  # an ensemble: its members' features together
        Z = pipe.transform(Z)
    elif pipe is not None and len(pipe.steps) > 1:
        Z = pipe[:-1].transform(Z)
    lr = LogisticRegression(C=1.0, max_iter=1000).fit(Z[lab], y[lab])
    return lr.predict_proba(Z)[:, 1]


def calibrate_boundary(
    problem: Problem, est: Any, fitted: SelectionProblem, say: Callable[[str], None]
) -> tuple[Any, float, pd.DataFrame]:
    """Refit ``est`` along Cohon's calibration; the fit at the knee, its penalty, the table.

    Parameters
    ----------
    problem : Problem
        The planning units' problem (its grid, locks and rows).
    est : estimator
        Fitted without a penalty (``boundary_penalty=0``) on ``fitted``.
    fitted : SelectionProblem
        The problem ``est`` was fitted on (standardised rows, with its boundary term).
    say : callable
        Progress messages.

    Returns
    -------
    estimator, float, pandas.DataFrame
        The fit at the chosen penalty, the penalty, and one row per fit: ``penalty``,
        ``objective`` (without the penalty), ``boundary_length``, ``n_patches``,
        ``largest_patch_cells``, ``expected_precision`` (:func:`presence_probability`'s mean
        over the selected cells), ``chosen``.
    """
    adj = grid_adjacency(problem.units.geometry.to_numpy())
    base = fixed_model(est)
    presence = presence_probability(est, fitted.X, fitted.y)
    fits: dict[float, Any] = {0.0: est}

    def fit(lam: float) -> dict[str, Any]:
        if lam not in fits:
            say(f"boundary calibration: refitting at penalty {lam:.4g}")
            e = clone(base).set_params(boundary_penalty=lam)
            e.fit(fitted)
            fits[lam] = e
        e = fits[lam]
        mask = np.zeros(adj.n, dtype=bool)
        mask[problem.rows[np.asarray(e.selected_)]] = True
        mask |= problem.locked_in
        patches = patch_labels(adj, mask)
        sizes = np.bincount(patches)[1:]
        length = float(e.boundary_length_)
        picked = np.asarray(e.selected_, dtype=np.int64)
        expected = float(presence[picked].mean()) if picked.size else float("nan")
        return {
            "objective": float(e.objective_) - lam * length,
            "boundary_length": length,
            "boundary": length,
            "n_patches": int(sizes.size),
            "largest_patch_cells": int(sizes.max(initial=0)),
            "expected_precision": expected,
        }

    lam, rows = calibrate_penalty(fit)
    table = pd.DataFrame(rows).drop(columns="boundary")
    return fits[lam], lam, table
