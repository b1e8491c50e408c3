"""Choosing ``C`` as in the paper: repeated 2-fold transductive cross-validation.

Within the labelled rows, each run splits the rows into two stratified folds; the estimator
is fitted on one fold with the other fold's rows as candidates (``y == -1``) and a budget of
``k_fraction`` of them, and scored by the precision of its selection. Five repeats of 2-fold
give ten scores per ``C``; the ``C`` with the highest mean wins (the first listed on ties).
It is :class:`reserve.solvers.TransductiveSearchCV` over the grid of ``C``, with the paper's
fold budget (:func:`reserve.solvers.fold_k`, rule ``"share"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator, clone

from reserve.errors import InvalidInputError, SolverError
from reserve.solvers import TransductiveSearchCV, TransductiveSplit, check_transductive
from reserve.solvers.search import fold_scores

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


def _check_int(value: object, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise InvalidInputError(
            f"{name} must be an integer >= {low}; received {value!r}. Pass e.g. {name}={low}."
        )
    return int(value)


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


def _check_classes(yl: np.ndarray, n_folds: int) -> None:
    """Refuse labelled rows with fewer than ``n_folds`` rows of a class."""
    counts = np.bincount(yl, minlength=2)
    if counts.min() < n_folds:
        raise InvalidInputError(
            f"each class needs at least n_folds={n_folds} labelled rows for cross-validation; "
            f"received {counts[0]} negatives and {counts[1]} positives. Add labelled rows "
            "or pass a fixed C."
        )


def _best_complete(cv_results: dict) -> int:
    """The point with the best mean over all folds; a point with a failed fold never wins."""
    means = fold_scores(cv_results).mean(axis=1)
    return 0 if np.isnan(means).all() else int(np.nanargmax(means))


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
        Processors the folds share (:class:`reserve.solvers.TransductiveSearchCV`).
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
    _check_classes(data.y[data.labelled], n_folds)
    split = TransductiveSplit(
        n_splits=n_folds,
        n_repeats=n_repeats,
        k=float(k_fraction),
        rule="share",
        effort_columns=effort_columns,
        random_state=random_state,
    )
    search = TransductiveSearchCV(
        estimator, {"C": Cs}, split, choose=_best_complete, n_jobs=n_jobs
    ).fit(data.X, data.y)
    scores = fold_scores(search.cv_results_)
    means = scores.mean(axis=1)
    if np.isnan(means).all():
        raise SolverError(
            f"every cross-validation fit of {type(estimator).__name__} failed for every C in "
            f"{Cs}; standardise the features or change the grid."
        )
    return CSelection(
        best_C=Cs[search.best_index_],
        Cs=Cs,
        scores=scores,
        mean_scores=means,
        n_limited=search.n_limited_,
    )


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
