"""Choosing ``C`` as in the paper: repeated 2-fold transductive cross-validation.

Within the labelled rows, each run splits the rows into two stratified folds; the estimator
is fitted on one fold with the other fold's rows as candidates (``y == -1``) and a budget of
``k_fraction`` of them, and scored by the precision of its selection. Five repeats of 2-fold
give ten scores per ``C``; the ``C`` with the highest mean wins (the first listed on ties).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import StratifiedKFold

from reserve.errors import InvalidInputError, SolverError
from reserve.solvers import at_standard_effort, check_transductive

__all__ = ["PAPER_CS", "CSelection", "select_C", "select_and_fit"]

#: The grid of ``C`` values searched in the paper.
PAPER_CS: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)


@dataclass(frozen=True)
class CSelection:
    """Outcome of :func:`select_C`.

    Attributes
    ----------
    best_C : float
    Cs : tuple of float
    scores : ndarray of shape (len(Cs), n_repeats * n_folds)
        Held-out precision of every run; NaN where the fit failed (``SolverError``).
    mean_scores : ndarray of shape (len(Cs),)
        Mean over runs; NaN for a ``C`` with any failed run (such a ``C`` is never chosen).
    n_limited : int
        Fits that stopped at a time limit and returned their best point so far (a TSVM with
        ``stop_reason_ == "max_time"``, a TTK-MIP whose ``status_`` is not ``"optimal"``).
    """

    best_C: float
    Cs: tuple[float, ...]
    scores: np.ndarray = field(repr=False)
    mean_scores: np.ndarray
    n_limited: int = 0


def _time_limited(est: BaseEstimator) -> bool:
    if getattr(est, "stop_reason_", None) == "max_time":
        return True
    status = getattr(est, "status_", None)
    return status is not None and status not in ("local", "optimal")


def _check_int(value: object, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise InvalidInputError(
            f"{name} must be an integer >= {low}; received {value!r}. Pass e.g. {name}={low}."
        )
    return int(value)


def _run_one(
    estimator: BaseEstimator,
    X: np.ndarray,
    y: np.ndarray,
    train: np.ndarray,
    held: np.ndarray,
    Cs: tuple[float, ...],
    k_fraction: float,
) -> tuple[np.ndarray, int]:
    Xcv = np.vstack([X[train], X[held]])
    ycv = np.concatenate([y[train], -np.ones(held.size, dtype=np.int64)])
    k = max(1, round(k_fraction * held.size))
    y_held = y[held]
    out = np.full(len(Cs), np.nan)
    n_limited = 0
    for i, C in enumerate(Cs):
        est = clone(estimator).set_params(C=C, k=k)
        try:
            est.fit(Xcv, ycv)
        except SolverError:
            continue
        out[i] = float(y_held[est.selected_ - train.size].mean())
        n_limited += _time_limited(est)
    return out, n_limited


def _check_grid(
    n_repeats: int, n_folds: int, k_fraction: float, Cs: tuple[float, ...]
) -> tuple[int, int, tuple[float, ...]]:
    """Refuse a bad repeat or fold count, budget share or empty grid; the grid as floats."""
    n_repeats = _check_int(n_repeats, "n_repeats", 1)
    n_folds = _check_int(n_folds, "n_folds", 2)
    if not (isinstance(k_fraction, float | int) and 0.0 < k_fraction < 1.0):
        raise InvalidInputError(
            f"k_fraction must be a number strictly between 0 and 1; received {k_fraction!r}."
        )
    Cs = tuple(float(c) for c in Cs)
    if not Cs:
        raise InvalidInputError("Cs must hold at least one value; received an empty grid.")
    return n_repeats, n_folds, Cs


def _cv_folds(
    Xl: np.ndarray, yl: np.ndarray, n_folds: int, n_repeats: int, random_state: int | None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, held-out) row indices of every fold of every repeat, stratified by class."""
    counts = np.bincount(yl, minlength=2)
    if counts.min() < n_folds:
        raise InvalidInputError(
            f"each class needs at least n_folds={n_folds} labelled rows for cross-validation; "
            f"received {counts[0]} negatives and {counts[1]} positives. Add labelled rows "
            "or pass a fixed C."
        )
    seeds = np.random.SeedSequence(random_state).generate_state(n_repeats)
    tasks = []
    for seed in seeds:
        skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=int(seed))
        for train, held in skf.split(Xl, yl):
            tasks.append((train, held))
    return tasks


def select_C(
    estimator: BaseEstimator,
    X: object,
    y: object,
    *,
    Cs: tuple[float, ...] = PAPER_CS,
    n_repeats: int = 5,
    n_folds: int = 2,
    k_fraction: float = 0.05,
    random_state: int | None = None,
    n_jobs: int | None = 1,
    effort_columns: tuple[int, ...] = (),
) -> CSelection:
    """Choose ``C`` by repeated ``n_folds``-fold transductive CV on the labelled rows.

    Parameters
    ----------
    estimator : estimator with parameters ``C`` and ``k``
        Cloned for every fit; its other parameters are kept.
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
        1/0 for labelled rows, -1 for candidates (candidates are ignored here).
    Cs : tuple of float
        Grid searched (the paper's by default).
    n_repeats, n_folds : int
        Five repeats of 2-fold CV in the paper.
    k_fraction : float
        Budget as a share of the held-out fold (5 % in the paper), at least 1.
    random_state : int or None
        Seed of the fold assignment; the same seed gives the same folds and result.
    n_jobs : int or None
        Parallel runs (joblib); one task per (repeat, fold).
    effort_columns : tuple of int
        Columns of ``X`` holding survey effort covariates: each held-out fold, which plays
        the candidates, is scored at the standard effort (the median of the fold's training
        rows), as the candidates are (:func:`reserve.solvers.at_standard_effort`).

    Returns
    -------
    CSelection

    Examples
    --------
    >>> import numpy as np
    >>> from reserve.solvers import SVM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 2)); y = (X[:, 0] > 0).astype(int); y[60:] = -1
    >>> select_C(SVM(k=2), X, y, random_state=0).best_C in PAPER_CS
    True
    """
    params = estimator.get_params(deep=False)
    if "C" not in params or "k" not in params:
        raise InvalidInputError(
            f"estimator must have parameters C and k; {type(estimator).__name__} has "
            f"{sorted(params)}. Pass one of reserve.solvers' estimators."
        )
    data = check_transductive(X, y, 1)
    n_repeats, n_folds, Cs = _check_grid(n_repeats, n_folds, k_fraction, Cs)
    Xl = data.X[data.labelled]
    yl = data.y[data.labelled]
    tasks = _cv_folds(Xl, yl, n_folds, n_repeats, random_state)
    cols = np.asarray(effort_columns, dtype=np.int64).reshape(-1)

    def rows(tr: np.ndarray, he: np.ndarray) -> np.ndarray:  # held-out rows play candidates
        return at_standard_effort(Xl, tr, he, cols) if cols.size else Xl

    runs = Parallel(n_jobs=n_jobs)(
        delayed(_run_one)(estimator, rows(tr, he), yl, tr, he, Cs, float(k_fraction))
        for tr, he in tasks
    )
    scores = np.column_stack([r[0] for r in runs])
    means = scores.mean(axis=1)
    if np.isnan(means).all():
        raise SolverError(
            f"every cross-validation fit of {type(estimator).__name__} failed for every C in "
            f"{Cs}; standardise the features or change the grid."
        )
    best = int(np.nanargmax(means))
    n_limited = sum(r[1] for r in runs)
    return CSelection(best_C=Cs[best], Cs=Cs, scores=scores, mean_scores=means, n_limited=n_limited)


def select_and_fit(
    estimator: BaseEstimator, X: object, y: object, **kwargs: object
) -> tuple[BaseEstimator, CSelection]:
    """:func:`select_C`, then fit a clone with the chosen ``C`` on all of ``X, y``.

    The clone keeps ``estimator``'s ``k``. Keyword arguments go to :func:`select_C`.

    Examples
    --------
    >>> import numpy as np
    >>> from reserve.solvers import SVM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 2)); y = (X[:, 0] > 0).astype(int); y[60:] = -1
    >>> est, sel = select_and_fit(SVM(k=2), X, y, random_state=0)
    >>> est.selected_.shape
    (2,)
    """
    sel = select_C(estimator, X, y, **kwargs)  # type: ignore[arg-type]
    est = clone(estimator).set_params(C=sel.best_C)
    est.fit(X, y)
    return est, sel
