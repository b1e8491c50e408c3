"""AutoTTK: TTK with its feature map and ``C`` chosen by transductive cross-validation.

The default estimator of ``reserve select``. It tries every (feature map, C) of a small grid
on the labelled rows, where each held-out fold plays the candidates (its rows are unlabelled
in the fit, exactly ``k_fold`` of them are selected, and the score is the precision of that
selection against their hidden labels), then fits TTK on all rows with the winner and with
every other feature map's best grid point whose deficit to it is within the folds' noise, and
selects by the mean of their standardised scores, clipped (``ensemble="maps"``, the default:
:mod:`reserve.solvers.ensemble`; ``"none"`` fits the winner alone).

Class weights are chosen like the map and ``C`` (``class_weight="cv"``, the default): every
grid point is tried unweighted and with ``class_weight="balanced"``. The guard against the
trivial scorer is always on: an unweighted TTK fit that ends at ``w`` near 0
(:attr:`reserve.solvers.TTK.trivial_`: the candidates' scores differ by rounding noise) is
refitted balanced, in every fold and in the final fit, so that noise never wins the CV. See
docs/algorithm.md, "Class weights and the trivial scorer", for the measurements behind this.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

from reserve.errors import InvalidInputError, SolverError
from reserve.fork import Forked, can_fork, fork_call, fork_map, one_blas_thread
from reserve.solvers._base import budget_select
from reserve.solvers._validation import (
    TransductiveData,
    check_choice,
    check_positive_real,
    check_transductive,
)
from reserve.solvers.ensemble import ENSEMBLES, MapMean, check_members, map_winners
from reserve.solvers.features import (
    FEATURE_MAPS,
    JOINING_MAPS,
    ForestScore,
    fit_feature_map,
)
from reserve.solvers.problem import SelectionProblem
from reserve.solvers.ttk import LADDERS, TTK

__all__ = [
    "AUTO_CS",
    "AUTO_MODELS",
    "BALANCE_RATIO",
    "CLASS_WEIGHTS",
    "PARALLEL_MIN_ROWS",
    "TIE_BREAKS",
    "AutoTTK",
    "at_standard_effort",
    "fold_k",
    "nearly_balanced",
]

#: Feature maps AutoTTK compares by default (see :mod:`reserve.solvers.features`).
AUTO_MODELS: tuple[str, ...] = ("linear", "spline", "stack", "forest")

#: Values of ``C`` AutoTTK compares by default.
AUTO_CS: tuple[float, ...] = (0.1, 1.0, 10.0)

#: Values of AutoTTK's ``class_weight``: chosen by the CV (guarded), the guard alone, never,
#: always.
CLASS_WEIGHTS: tuple[str | None, ...] = ("cv", "auto", None, "balanced")

#: Values of AutoTTK's ``tie_break``: the secondary score that orders candidates whose TTK
#: scores tie.
TIE_BREAKS: tuple[str, ...] = ("forest", "logistic")

#: Labelled rows above which the cross-validation runs on a stratified sample of this size.
_MAX_CV_ROWS = 4000

#: Relative width of a tie in the TTK score (see ``AutoTTK.n_tied_at_cutoff_``).
_TIE_RTOL = 1e-7

#: Without fork (see ``_map_folds``): labelled rows in the CV below which the folds run in
#: this process whatever ``n_jobs``.
PARALLEL_MIN_ROWS = 1000

#: With ``class_weight="cv"`` the ``"balanced"`` twins are tried only when the larger class
#: of the labelled rows outnumbers the smaller by more than this: below it the balanced
#: weights ``n / (2 n_class)`` stay within 0.83-1.25 of 1, a nudge far finer than the grid's
#: tenfold steps of ``C``, and the twins cost half the CV to rank what is nearly one problem.
BALANCE_RATIO = 1.5


def nearly_balanced(y_lab: np.ndarray, ratio: float = BALANCE_RATIO) -> bool:
    """Whether neither class of the 0/1 labels outnumbers the other by more than ``ratio``.

    Examples
    --------
    >>> nearly_balanced(np.r_[np.ones(200), np.zeros(196)])
    True
    >>> nearly_balanced(np.r_[np.ones(24), np.zeros(206)])
    False
    """
    n_pos = int(np.sum(y_lab == 1))
    n_neg = int(np.size(y_lab)) - n_pos
    return min(n_pos, n_neg) > 0 and max(n_pos, n_neg) <= ratio * min(n_pos, n_neg)


def fold_k(n_held: int, n_pos_held: int, k: int, n_candidates: int) -> int:
    """The budget of a held-out fold: its share of ``k``, at least half its positives.

    A fold of ``n_held`` rows standing in for ``n_candidates`` candidates gets
    ``n_held * k / n_candidates`` cells; when that is smaller than half the fold's positives
    it is raised to that, so that a handful of lucky cells cannot decide the model (precision
    at one or two cells is mostly noise). Always at least 1 and below ``n_held``.

    Examples
    --------
    >>> fold_k(100, 20, 30, 10000)  # share 0.3 cells; raised to half of 20 positives
    10
    >>> fold_k(100, 20, 5000, 10000)
    50
    """
    share = round(n_held * k / max(n_candidates, 1))
    return int(min(max(share, math.ceil(n_pos_held / 2), 1), max(n_held - 1, 1)))


def at_standard_effort(X: np.ndarray, fit_rows: np.ndarray, score_rows: np.ndarray,
                       columns: np.ndarray) -> np.ndarray:  # fmt: skip
    """A copy of ``X`` whose ``score_rows`` carry the standard effort in ``columns``.

    The standard effort of a column is the median of its ``fit_rows`` (the labelled rows a
    model learns from). Rows scored at it differ in habitat only: that is how the candidates
    are scored (:func:`reserve.design.effort_covariates`), and how a cross-validation fold's
    held-out rows, which play the candidates, must be scored too.

    Examples
    --------
    >>> X = np.array([[0.0, 1.0], [1.0, 3.0], [2.0, 8.0], [3.0, 50.0]])
    >>> at_standard_effort(X, np.array([0, 1, 2]), np.array([3]), np.array([1]))[3].tolist()
    [3.0, 3.0]
    """
    out = np.array(X, dtype=np.float64, copy=True)
    if columns.size and score_rows.size and fit_rows.size:
        standard = np.median(out[np.ix_(fit_rows, columns)], axis=0)
        out[np.ix_(score_rows, columns)] = standard
    return out


@dataclass(frozen=True)
class _Fold:
    train: np.ndarray  # positions in the labelled rows
    held: np.ndarray


def _folds(y_lab: np.ndarray, groups: np.ndarray | None, n_splits: int, n_repeats: int,
           seed: int | None) -> tuple[list[_Fold], str]:  # fmt: skip
    """Stratified (or grouped, for spatial blocks) folds of the labelled rows, and a note."""
    n_pos = int(y_lab.sum())
    n_neg = int(y_lab.size - n_pos)
    splits = min(n_splits, n_pos, n_neg)
    if splits < 2:
        return [], f"{n_pos} positive and {n_neg} negative labelled rows: too few to cross-validate"
    note = "" if splits == n_splits else f"cv reduced to {splits} folds ({n_pos} positives)"
    out: list[_Fold] = []
    if groups is not None:
        n_groups = np.unique(groups).size
        splits = min(splits, n_groups)
        if splits < 2:
            return [], "fewer than 2 spatial blocks hold labelled rows: no cross-validation"
        for tr, he in GroupKFold(n_splits=splits).split(y_lab, y_lab, groups):
            out.append(_Fold(tr, he))
        return out, note
    for seed_r in np.random.SeedSequence(seed).generate_state(n_repeats):
        skf = StratifiedKFold(n_splits=splits, shuffle=True, random_state=int(seed_r))
        out.extend(_Fold(tr, he) for tr, he in skf.split(y_lab, y_lab))
    return out, note


def fit_guarded(Z: np.ndarray, y: np.ndarray, class_weight: str | None, cost: object = None,
                boundary: object = None, **params) -> tuple[TTK, str | None]:  # fmt: skip
    """``TTK(**params)`` on ``(Z, y)``; with ``class_weight="auto"``, refitted balanced when
    the fit is trivial (:attr:`TTK.trivial_`).

    Returns the fitted TTK and the class weight it used (``None`` or ``"balanced"``).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(180, 4)); y = np.r_[np.zeros(120, int), -np.ones(60, int)]
    >>> y[rng.choice(120, 8, replace=False)] = 1  # 8 positives in 120, no signal
    >>> ttk, used = fit_guarded(X, y, "auto", k=5, C=1.0)
    >>> used, ttk.trivial_
    ('balanced', False)
    """
    cw = None if class_weight == "auto" else class_weight
    extra = {} if boundary is None else {"boundary": boundary}
    ttk = TTK(class_weight=cw, **params).fit(Z, y, cost=cost, **extra)
    if class_weight == "auto" and ttk.trivial_:
        return TTK(class_weight="balanced", **params).fit(Z, y, cost=cost, **extra), "balanced"
    return ttk, cw


def _fit_member(Z: np.ndarray, y: np.ndarray, class_weight: str | None, cost: object,
                boundary: object, C: float, params: dict) -> tuple[TTK, str | None]:  # fmt: skip
    """One member of the ensemble: :func:`fit_guarded` (with ``params``' ladder), on one BLAS
    thread (the members share the processors; the numbers are the same wherever it runs)."""
    with one_blas_thread():
        return fit_guarded(Z, y, class_weight, cost, boundary, C=C, **params)


def _fold_scores(X_lab: np.ndarray, y_lab: np.ndarray, fold: _Fold, grid: list[tuple],
                 k: int, m: int, seed: int | None) -> np.ndarray:  # fmt: skip
    """Held-out precision of every grid point on one fold (NaN where it cannot be scored).

    Each feature map is fitted once per fold (on the fold's rows, held-out ones included, as
    in the final fit; the ``stack`` and ``forest`` maps share one forest); every ``C`` then
    fits TTK without the polish on the mapped rows. The folds share the processors, so each
    uses one BLAS thread (:func:`reserve.fork.one_blas_thread`).
    """
    with one_blas_thread():
        return _fold_scores_here(X_lab, y_lab, fold, grid, k, m, seed)


def _fold_scores_here(X_lab: np.ndarray, y_lab: np.ndarray, fold: _Fold, grid: list[tuple],
                      k: int, m: int, seed: int | None) -> np.ndarray:  # fmt: skip
    """:func:`_fold_scores` in the BLAS threads as they are."""
    y_held = y_lab[fold.held]
    out = np.full(len(grid), np.nan)
    if y_held.sum() == 0:
        return out  # a fold without a positive cannot rank anything
    Xf = np.vstack([X_lab[fold.train], X_lab[fold.held]])
    yf = np.concatenate([y_lab[fold.train], np.full(fold.held.size, -1)])
    kf = fold_k(fold.held.size, int(y_held.sum()), k, m)
    mapped: dict[str, np.ndarray] = {}
    shared: dict = {}  # the stack and forest maps' one forest
    for i, (model, C, cw) in enumerate(grid):
        try:
            if model not in mapped:
                mapped[model] = fit_feature_map(model, Xf, yf, random_state=seed,
                                                shared=shared)[1]  # fmt: skip
            ttk, _ = fit_guarded(mapped[model], yf, cw, k=kf, C=C, polish=False,
                                 random_state=seed)  # fmt: skip
        except (SolverError, InvalidInputError):
            continue
        out[i] = float(y_held[ttk.selected_ - fold.train.size].mean())
    return out


def _map_folds(tasks: list[tuple], jobs: int, n_rows: int,
               on_done: Callable[[int], None] | None = None) -> list[np.ndarray]:  # fmt: skip
    """``_fold_scores(*task)`` for every task, in order, on up to ``jobs`` processors.

    On Linux the folds are shared between this process and ``jobs - 1`` forked children:
    a forked child inherits every module already imported and starts in milliseconds, so
    even the few-second CV of a small region gains from a second core. Elsewhere (no fork, not
    the main thread, or other Python threads running) joblib's worker processes run the folds from
    :data:`PARALLEL_MIN_ROWS` labelled rows: a fresh worker costs about 2 s of CPU to start
    and import, more than the folds of a small CV take. Each fold is computed the same way
    wherever it runs, so the scores never depend on ``jobs``.

    ``on_done(n)`` is called here as folds finish, with the number finished so far.
    """
    jobs = min(jobs, len(tasks))
    if jobs > 1 and can_fork():
        return fork_map(_fold_scores, tasks, jobs, on_done=on_done)
    jobs = jobs if n_rows >= PARALLEL_MIN_ROWS else 1
    results = Parallel(n_jobs=jobs, return_as="generator")(
        delayed(_fold_scores)(*task) for task in tasks
    )
    out = []
    for scores in results:  # in order, each as soon as it and those before it are done
        out.append(scores)
        if on_done is not None:
            on_done(len(out))
    return out


def _tie_forest(data: TransductiveData, seed: int | None, n_jobs: int | None) -> object:
    """:class:`ForestScore`'s random forest fitted on the labelled rows' raw features (the
    tie-break forest when no member of the final fit is ``stack`` or ``forest``), on
    ``n_jobs`` threads.

    It predicts on one thread (:class:`ForestScore` leaves it so): a forest's threads add
    the trees' votes in the order they finish, which can change the last bits of a
    probability and so the order of two candidates whose probabilities are equal.
    """
    return ForestScore(random_state=seed, n_jobs=n_jobs).fit(data.X, data.y).forest_


def _tie_width(s: np.ndarray) -> float:
    """Two TTK scores closer than this tie (:data:`_TIE_RTOL` of the largest, at least 1)."""
    return _TIE_RTOL * max(1.0, float(np.abs(s).max(initial=0.0)))


def _near_another(s: np.ndarray, width: float) -> np.ndarray:
    """Whether each score lies within ``width`` of another score.

    Examples
    --------
    >>> _near_another(np.array([0.0, 5.0, 1e-9, 3.0]), 1e-7).tolist()
    [True, False, True, False]
    """
    order = np.argsort(s, kind="stable")
    close = np.diff(s[order]) <= width
    near = np.zeros(s.size, dtype=bool)
    near[order[1:][close]] = True
    near[order[:-1][close]] = True
    return near


def _forest_step(steps: list) -> ForestScore | None:
    """The :class:`ForestScore` among a feature map's fitted steps (the ``stack`` map's)."""
    return next((step for _, step in steps if isinstance(step, ForestScore)), None)


class AutoTTK(ClassifierMixin, BaseEstimator):
    """TTK whose feature map and ``C`` are chosen by transductive cross-validation.

    Takes raw features (standardising is part of every map) and follows TTK's contract:
    ``fit(X, y)`` with ``y == -1`` for candidates selects exactly ``k`` candidates (or what a
    money ``budget`` buys), ``selected_`` lists them best first.

    Parameters
    ----------
    k : int, default=10
        Candidates to select (with ``budget``: only sizes the folds' budgets).
    budget : float or None, default=None
        A money budget; pass ``cost=`` to ``fit``. Cross-validation always uses cell budgets.
    models : tuple of str, default=AUTO_MODELS
        Feature maps compared (:data:`reserve.solvers.features.FEATURE_MAPS`).
    Cs : tuple of float, default=AUTO_CS
        Values of ``C`` compared.
    cv : int, default=3
        Folds of the labelled rows.
    n_repeats : int, default=2
        Repeats of the stratified folds (grouped folds are not repeated). With the class
        weights in the grid the CV makes 114 fits (3 maps x 3 C x 2 weightings, plus the
        ``forest`` map's one point, x 6 folds); one repeat would halve them but made the
        choice too noisy to find the balanced loss on BCR 27 (docs/algorithm.md).
    random_state : int or None, default=None
        Seed of the folds, the randomised maps and TTK.
    n_jobs : int or None, default=None
        Processors the folds share (never more than the folds). On Linux this process runs
        its share and forked children the rest, whatever the size of the CV; elsewhere
        joblib's worker processes do, and only when the CV holds at least
        :data:`PARALLEL_MIN_ROWS` labelled rows (a fresh worker's imports cost more than
        such a fold). The final fit uses them too: TTK's ladder fits (or the ensemble's
        members) share them, and the tie-break forest is fitted in a child beside them
        (Linux). The results do not depend
        on it. ``reserve select`` passes one per processor.
    effort_columns : sequence of int or None, default=None
        Columns of ``X`` that hold survey effort covariates (``reserve select --effort``:
        :func:`reserve.design.effort_covariates`). The candidates are scored at the
        *standard effort*, the median of the labelled rows in each of these columns: ``fit``
        sets the candidates' entries to it (a no-op when they already carry it, as in
        ``reserve select``). In the cross-validation each held-out fold plays the candidates,
        so its rows are set to the median of the fold's training rows: the CV then scores a
        model as the candidates will be scored, by habitat at one effort, and cannot reward
        a ranking that rests on the held-out rows' own effort. ``decision_function`` scores
        rows as given.
    class_weight : {"cv", "auto", None, "balanced"}, default="cv"
        TTK's class weights. ``"cv"``: ``"auto"`` and ``"balanced"`` are both grid points
        of the cross-validation (``"auto"`` alone when the classes are nearly balanced,
        :data:`BALANCE_RATIO`; ``cv_note_`` says so). ``"auto"``: the guard against the
        trivial scorer (unweighted, refitted ``"balanced"`` when a fit ends at ``w`` near 0;
        in every fold and in the final fit). ``None`` / ``"balanced"``: always that.
    boundary_penalty : float, default=0.0
        The final fit's :attr:`reserve.solvers.TTK.boundary_penalty` (``boundary=`` in
        :meth:`fit`); the cross-validation chooses the model without it. With a penalty the
        selection is the set TTK chose (no tie-break reorders it).
    tie_break : {"forest", "logistic"}, default="forest"
        The secondary score that orders candidates whose TTK scores tie (within 1e-7
        relative): ``"forest"``, the presence probability of the random forest of
        :class:`reserve.solvers.features.ForestScore` fitted on the labelled rows' raw
        features (the ``stack`` or ``forest`` map's own forest when one is a member);
        ``"logistic"``, the log-odds of a balanced logistic regression on the mapped
        features. A fit that ends near the trivial scorer, or a linear fit that pins many
        candidates to the margin, can tie a hundred candidates at the cutoff; the secondary
        score then picks them.
        See docs/algorithm.md, "Nonlinear TTK and its model selection" (Ties).
    ladder : {"mean", "none"}, default="mean"
        The final fit's :attr:`reserve.solvers.TTK.ladder`: ``"mean"`` averages the TTK fits
        at ``k`` and at the two powers of 2 that bracket ``k``, so that the selection does
        not jump between neighbouring budgets (each budget's fit ends in its own local
        optimum). The cross-validation's fits are single fits.
    ensemble : {"maps", "none"}, default="maps"
        ``"maps"``: the final scorer is the mean of the standardised TTK scores (each
        clipped to +-3) of the winner and of every other map's best grid point whose
        fold-by-fold deficit to it is within one standard error (:func:`map_winners`,
        :class:`MapMean`; each fitted as a lone winner is, with the ladder); ``"none"``:
        the winner alone. With few positives the CV's scores differ by a cell or two
        between maps, too little to choose one map reliably; the mean does not bet on one,
        while a map the folds show clearly better stays alone (docs/algorithm.md, "The
        ensemble of the maps"). With a ``boundary_penalty`` the winner alone is fitted.
    members : sequence of (model, C, class_weight) or None, default=None
        Grid points to fit as the final model without any cross-validation (their mean
        when several). :meth:`refit_params` sets it, so that the bootstrap's and the
        boundary calibration's refits keep the model this fit chose.

    Attributes
    ----------
    best_params_ : dict
        ``{"model": ..., "C": ..., "class_weight": ...}`` of the winner (its grid point:
        ``class_weight`` is ``"auto"`` for the guard; ``class_weight_`` says what it did).
    members_ : tuple of (model, C, class_weight)
        The grid points of the final fit, the winner first (then the maps within noise of
        it, with ``ensemble="maps"``).
    cv_results_ : dict of ndarray
        ``params``, ``model``, ``C``, ``class_weight``, ``mean_test_score``,
        ``std_test_score``, ``rank_test_score`` and ``split<i>_test_score`` per grid point.
    class_weight_ : None or "balanced"
        The class weight of the final fit (``"balanced"`` when the guard fired).
    trivial_ : bool
        The final fit is still the trivial scorer (``w`` near 0 even after the guard): its
        ranking of the candidates is noise. ``reserve select`` warns. ``score_spread_`` is
        the spread of its candidate scores (:attr:`reserve.solvers.TTK.trivial_`).
    cv_note_ : str
        Why the cross-validation was reduced or skipped ('' when it ran as asked).
    best_estimator_ : Pipeline or MapMean
        The feature map and TTK, fitted on all rows; with several members, their
        :class:`MapMean`.
    selected_, candidates_, candidate_scores_ : ndarray
        As TTK's; ties at the cutoff are broken by ``secondary_scores_``.
    secondary_scores_ : ndarray
        The candidates' secondary score (``tie_break``): the forest's presence
        probability or the logistic log-odds. Computed only for the candidates it can
        order, those whose TTK score lies within two tie widths of another candidate's;
        NaN for the others (at a million candidates it saves predicting them all).
    objective_, status_ : float, str
        The final TTK fit's objective (in the mapped features) and status (the winner's,
        with several members).
    candidate_rank_ : ndarray of int
        Rank of each candidate (0 = best; aligned with ``candidates_``).
    n_tied_at_cutoff_ : int
        Candidates whose TTK score ties (within 1e-7 relative) the last selected one's (0
        with a boundary penalty: that set is not a cut of the ranking).
    standard_effort_ : ndarray
        The standard effort of each of ``effort_columns`` (empty without them).
    runtime_, cv_runtime_ : float
        Seconds of the whole fit, and of its cross-validation.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 3)); y = (X[:, 0] + X[:, 1] ** 2 > 1).astype(int)
    >>> y[80:] = -1
    >>> est = AutoTTK(k=5, models=("linear",), Cs=(1.0,), random_state=0).fit(X, y)
    >>> est.selected_.shape, est.best_params_["model"]
    ((5,), 'linear')
    """

    def __init__(self, k: int = 10, budget: float | None = None,
                 models: tuple[str, ...] = AUTO_MODELS, Cs: tuple[float, ...] = AUTO_CS,
                 cv: int = 3, n_repeats: int = 2, random_state: int | None = None,
                 n_jobs: int | None = None, class_weight: str | None = "cv",
                 effort_columns: tuple[int, ...] | None = None,
                 boundary_penalty: float = 0.0, tie_break: str = "forest",
                 ladder: str = "mean", ensemble: str = "maps",
                 members: tuple[tuple, ...] | None = None) -> None:  # fmt: skip
        self.k = k
        self.budget = budget
        self.models = models
        self.Cs = Cs
        self.cv = cv
        self.n_repeats = n_repeats
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.class_weight = class_weight
        self.effort_columns = effort_columns
        self.boundary_penalty = boundary_penalty
        self.tie_break = tie_break
        self.ladder = ladder
        self.ensemble = ensemble
        self.members = members

    def __sklearn_tags__(self):  # sklearn protocol: binary only, -1 marks candidates
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def _grid(self) -> list[tuple[str, float, str | None]]:
        models = tuple(self.models) if not isinstance(self.models, str) else (self.models,)
        bad = [m for m in models if m not in FEATURE_MAPS]
        if bad or not models:
            raise InvalidInputError(
                f"models must name feature maps from {', '.join(FEATURE_MAPS)}; "
                f"received {self.models!r}"
            )
        Cs = [check_positive_real(c, "Cs") for c in np.atleast_1d(self.Cs)]
        if not Cs:
            raise InvalidInputError("Cs must hold at least one value; received an empty grid")
        for name, low in (("cv", 2), ("n_repeats", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
                raise InvalidInputError(f"{name} must be an integer >= {low}; received {v!r}")
        if self.class_weight not in CLASS_WEIGHTS:
            raise InvalidInputError(
                f"class_weight must be one of {', '.join(map(repr, CLASS_WEIGHTS))}; received "
                f"{self.class_weight!r}. Use 'auto' (balanced only when the fit is trivial)."
            )
        check_choice(self.tie_break, TIE_BREAKS, "tie_break")
        check_choice(self.ladder, LADDERS, "ladder")
        check_choice(self.ensemble, ENSEMBLES, "ensemble")
        if self.members is not None:
            return check_members(self.members)
        cws = ("auto", "balanced") if self.class_weight == "cv" else (self.class_weight,)
        grid: list[tuple[str, float, str | None]] = []
        for point in ((m, float(c), cw) for m in models for c in Cs for cw in cws):
            # a joining map ranks as its one column does whatever C and weights: one point
            if point[0] not in JOINING_MAPS or all(p[0] != point[0] for p in grid):
                grid.append(point)
        return grid

    def _cv_sample(self, y_lab: np.ndarray) -> np.ndarray:
        """Positions of the labelled rows the CV uses (a stratified sample when many)."""
        n = y_lab.size
        if n <= _MAX_CV_ROWS:
            return np.arange(n)
        rng = np.random.default_rng(self.random_state)
        keep = []
        for cls in (0, 1):
            rows = np.flatnonzero(y_lab == cls)
            take = max(round(_MAX_CV_ROWS * rows.size / n), min(rows.size, 2 * self.cv))
            keep.append(rng.choice(rows, size=min(take, rows.size), replace=False))
        return np.sort(np.concatenate(keep))

    def _cross_validate(self, X: np.ndarray, data: object, groups: np.ndarray | None,
                        grid: list[tuple], progress: Callable[[str], None] | None,
                        ) -> np.ndarray:  # fmt: skip
        if len(grid) == 1:
            self.cv_note_ = "one grid point: nothing to choose, no cross-validation"
            return np.empty((1, 0))
        y_lab = data.y[data.labelled]
        pick = self._cv_sample(y_lab)
        X_lab, y_cv = X[data.labelled][pick], y_lab[pick]
        g = None if groups is None else np.asarray(groups)[data.labelled][pick]
        folds, self.cv_note_ = _folds(y_cv, g, int(self.cv), int(self.n_repeats),
                                      self.random_state)  # fmt: skip
        if not folds:
            return np.empty((len(grid), 0))
        k = int(self.k) if self.budget is None else max(int(self.k), 1)
        cols, m = self._effort_cols, data.candidates.size

        def rows(f: _Fold) -> np.ndarray:  # the held-out rows play the candidates
            return at_standard_effort(X_lab, f.train, f.held, cols) if cols.size else X_lab

        jobs = min(effective_n_jobs(self.n_jobs), len(folds))
        tasks = [(rows(f), y_cv, f, grid, k, m, self.random_state) for f in folds]
        on_done = None
        if progress is not None:
            models = len({model for model, _, _ in grid})
            progress(
                f"cross-validating the habitat models: {len(grid)} settings ({models} feature "
                f"maps) on {len(folds)} folds of {y_cv.size} cells"
            )

            def on_done(n: int) -> None:
                progress(f"cross-validating the habitat models: {n} of {len(folds)} folds")

        return np.column_stack(_map_folds(tasks, jobs, y_cv.size, on_done))

    def _record(self, grid: list[tuple], scores: np.ndarray) -> int:
        """Fill ``cv_results_`` and return the winner's grid position: the best mean score
        (first of the ties) among the maps that may lead (not :data:`JOINING_MAPS`, unless
        only they were scored)."""
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # rows without a fold: NaN
            valid = np.isfinite(scores).any(axis=1)
            mean = np.where(valid, np.nanmean(np.where(np.isfinite(scores), scores, np.nan),
                                              axis=1), np.nan)  # fmt: skip
            std = np.where(valid, np.nanstd(scores, axis=1), np.nan)
        res: dict[str, object] = {
            "params": [{"model": m, "C": c, "class_weight": cw} for m, c, cw in grid],
            "model": np.array([m for m, _, _ in grid]),
            "C": np.array([c for _, c, _ in grid]),
            "class_weight": np.array([cw for _, _, cw in grid], dtype=object),
            "mean_test_score": mean,
            "std_test_score": std,
        }
        order = np.argsort(-np.nan_to_num(mean, nan=-np.inf), kind="stable")
        rank = np.empty(len(grid), dtype=np.int64)
        rank[order] = np.arange(1, len(grid) + 1)
        res["rank_test_score"] = rank
        for i in range(scores.shape[1]):
            res[f"split{i}_test_score"] = scores[:, i]
        self.cv_results_ = res
        if not valid.any():
            if scores.shape[1] == 0 and len(grid) == 1:
                return 0
            if not self.cv_note_:
                self.cv_note_ = "no fold could be scored (no positive held out)"
            self.cv_note_ += "; fell back to the first grid point"
            return 0
        leads = [i for i in order if grid[i][0] not in JOINING_MAPS and valid[i]]
        return int(leads[0] if leads else order[0])

    def fit(self, X: object, y: object = None, cost: object = None, groups: object = None,
            boundary: object = None,
            progress: Callable[[str], None] | None = None) -> AutoTTK:  # fmt: skip
        """Choose the feature map and ``C`` by CV on the labelled rows, then fit on all rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Raw features of labelled and candidate rows.
        y : array-like of shape (n_samples,)
            1 / 0 for labelled rows, -1 for candidates.
        cost : array-like of shape (n_samples,) or None
            Per-row costs for a money ``budget`` (candidates' entries are read).
        groups : array-like of shape (n_samples,) or None
            Spatial block of each row: the folds then hold out whole blocks
            (:class:`~sklearn.model_selection.GroupKFold`), so a cell is never scored by a
            model fitted on its neighbours.
        boundary : reserve.solvers.Boundary or None
            Boundary length of candidate sets over the rows of ``X``, for
            ``boundary_penalty`` (the final fit only).
        progress : callable or None
            Called with one line of text as the cross-validation's folds finish (``reserve
            select`` prints them on stderr); None says nothing. The fit does no I/O itself.

        Returns
        -------
        self
        """
        t0 = time.perf_counter()
        if isinstance(X, SelectionProblem):  # the one problem object: read as its arrays
            X, y, cost, boundary = X.X, X.y, X.row_cost(), X.row_boundary()
        if progress is not None and not callable(progress):
            raise InvalidInputError(
                f"progress must be a function of one message, or None; received {progress!r}"
            )
        grid = self._grid()
        data = check_transductive(X, y, None if self.budget is not None else self.k)
        g = None if groups is None else np.asarray(groups).reshape(-1)
        if g is not None and g.shape[0] != data.X.shape[0]:
            raise InvalidInputError(
                f"groups must have one entry per row of X ({data.X.shape[0]}); "
                f"received {g.shape[0]}"
            )
        data = self._standard_effort(data)
        if self.members is None:
            points = self._choose(data, g, grid, progress)
        else:  # a refit of chosen members: nothing to choose (penalised: the winner only)
            self.cv_note_, self.cv_runtime_ = "", 0.0
            points = grid[:1] if self.boundary_penalty else grid
            self._record(grid, np.empty((len(grid), 0)))
            self.cv_note_ = "members given: fitted without cross-validation"
        self._fit_final(data, points, cost, boundary, progress)
        model, C, cw = points[0]
        self.best_params_ = {"model": model, "C": C, "class_weight": cw}
        self.members_ = tuple(points)
        self.runtime_ = time.perf_counter() - t0
        return self

    def _choose(self, data: TransductiveData, groups: np.ndarray | None, grid: list[tuple],
                progress: Callable[[str], None] | None = None) -> list[tuple]:  # fmt: skip
        """Cross-validate ``grid``; the grid points the final fit uses, the winner first."""
        twin_note = ""
        if self.class_weight == "cv" and nearly_balanced(data.y[data.labelled]):
            grid = [p for p in grid if p[2] != "balanced"]
            twin_note = (
                f"classes nearly balanced (at most {BALANCE_RATIO:g} to 1): "
                "class_weight='balanced' not tried"
            )
        t_cv = time.perf_counter()
        scores = self._cross_validate(data.X, data, groups, grid, progress)
        self.cv_runtime_ = time.perf_counter() - t_cv
        self.cv_note_ = "; ".join(n for n in (self.cv_note_, twin_note) if n)
        best = self._record(grid, scores)
        if self.ensemble == "none" or self.boundary_penalty:
            return [grid[best]]
        return [grid[i] for i in map_winners(grid, scores, best)]

    def refit_params(self) -> dict[str, object]:
        """Parameters with which an unfitted clone refits this fit's model without CV.

        The bootstrap's and the boundary calibration's refits use them: the same feature
        maps, ``C`` and class weights (every member of the ensemble), no cross-validation.
        """
        check_is_fitted(self, "members_")
        return {"members": tuple(self.members_)}

    def _standard_effort(self, data: TransductiveData) -> TransductiveData:
        """Check ``effort_columns``; the candidates at the labelled rows' median effort."""
        n_features = data.X.shape[1]
        cols = np.atleast_1d(np.asarray(() if self.effort_columns is None
                                        else self.effort_columns))  # fmt: skip
        if cols.size and (cols.dtype.kind not in "iu" or cols.ndim != 1 or cols.min() < 0
                          or cols.max() >= n_features):  # fmt: skip
            raise InvalidInputError(
                f"effort_columns must be column indices of X (0 to {n_features - 1}); "
                f"received {self.effort_columns!r}"
            )
        self._effort_cols = np.unique(cols).astype(np.int64)
        if not self._effort_cols.size:
            self.standard_effort_ = np.empty(0)
            return data
        X = at_standard_effort(data.X, data.labelled, data.candidates, self._effort_cols)
        self.standard_effort_ = X[data.candidates[0], self._effort_cols]
        return replace(data, X=X)

    def _fit_final(self, data: TransductiveData, points: list[tuple], cost: object,
                   boundary: object = None,
                   progress: Callable[[str], None] | None = None) -> None:  # fmt: skip
        """Fit every grid point of ``points`` on all rows; select by their (mean) score."""
        shared: dict = {}  # the stack and forest maps' one forest
        mapped = [fit_feature_map(model, data.X, data.y, random_state=self.random_state,
                                  n_jobs=self.n_jobs, shared=shared)
                  for model, _, _ in points]  # fmt: skip
        tie_steps = next((st for st, _ in mapped if _forest_step(st) is not None), mapped[0][0])
        forest = self._start_forest(tie_steps, data)
        money = {} if self.budget is None else {"budget": self.budget}
        if self.boundary_penalty:
            money["boundary_penalty"] = self.boundary_penalty
        common = {"k": int(self.k), "random_state": self.random_state, **money}
        try:
            if len(points) == 1:  # the ladder's fits share the processors
                (_, Z), (_, C, cw) = mapped[0], points[0]
                fits = [fit_guarded(Z, data.y, cw, cost, boundary, C=C, ladder=self.ladder,
                                    n_jobs=self.n_jobs, **common)]  # fmt: skip
            else:  # the members share them, each with its ladder on one processor
                common |= {"ladder": self.ladder, "n_jobs": 1}
                tasks = [(Z, data.y, cw, cost, boundary, C, common)
                         for (_, Z), (_, C, cw) in zip(mapped, points, strict=True)]  # fmt: skip
                on_done = None
                if progress is not None:
                    progress(f"fitting the {len(points)} chosen habitat models on every cell")

                    def on_done(n: int) -> None:
                        progress(f"fitting the chosen habitat models: {n} of {len(points)}")

                fits = fork_map(_fit_member, tasks, effective_n_jobs(self.n_jobs), on_done)
        except BaseException:
            if forest is not None:
                forest.cancel()
            raise
        ttk, self.class_weight_ = fits[0]
        pipes = [Pipeline([*st, ("ttk", t)]) for (st, _), (t, _) in zip(mapped, fits, strict=True)]
        self.trivial_ = all(t.trivial_ for t, _ in fits)
        self.score_spread_ = max(t.score_spread_ for t, _ in fits)
        self.objective_, self.status_ = ttk.objective_, ttk.status_
        self.candidates_ = data.candidates
        if len(fits) == 1:
            self.best_estimator_ = pipes[0]
            self.candidate_scores_ = np.asarray(ttk.candidate_scores_)
        else:
            self.best_estimator_ = MapMean(pipes, [t.candidate_scores_ for t, _ in fits])
            self.candidate_scores_ = self.best_estimator_.fit_scores_
        self.secondary_scores_ = self._secondary(tie_steps, mapped[0][1], data, forest)
        self._select(ttk, cost)
        self.boundary_length_ = ttk.boundary_length_
        if self.boundary_penalty:  # the set TTK chose with the penalty, as it ranked it
            self.selected_ = np.asarray(ttk.selected_)
            self.n_tied_at_cutoff_ = 0  # not a cut of the ranking: no tie decides it
        elif len(fits) > 1:
            self._ensemble_tail(boundary, cost)
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = data.X.shape[1]

    def _ensemble_tail(self, boundary: object, cost: object) -> None:
        """The ensemble's threshold (a cut between selected and not) and boundary length."""
        s = self.candidate_scores_
        chosen = np.zeros(s.size, dtype=bool)
        chosen[np.searchsorted(self.candidates_, self.selected_)] = True
        if cost is None and chosen.any() and not chosen.all():
            self.best_estimator_.threshold_ = 0.5 * (s[chosen].min() + s[~chosen].max())
        if boundary is not None:
            self.boundary_length_ = float(boundary.take(self.candidates_).length(chosen))

    def _start_forest(self, steps: list, data: TransductiveData) -> Forked | None:
        """Start the tie-break forest in a forked child while TTK fits, where it will be
        needed (``tie_break="forest"``, no ``stack`` map) and a second processor is allowed."""
        needed = self.tie_break == "forest" and _forest_step(steps) is None
        if not needed or effective_n_jobs(self.n_jobs) < 2:
            return None
        # one thread: the child shares the processors with the TTK fits
        return fork_call(_tie_forest, data, self.random_state, 1)

    def _secondary(self, steps: list, Z: np.ndarray, data: TransductiveData,
                   forest: Forked | None = None) -> np.ndarray:  # fmt: skip
        """The candidates' secondary score (``tie_break``), from the labelled rows; NaN for
        candidates whose TTK score no other candidate's comes near (nothing to order).

        ``forest`` is the tie-break forest started by :meth:`_start_forest`, if it was.
        """
        s = self.candidate_scores_
        need = _near_another(s, 2 * _tie_width(s))
        out = np.full(s.size, np.nan)
        if not need.any():
            if forest is not None:
                forest.cancel()
            return out
        rows = data.candidates[need]
        if self.tie_break == "logistic":
            lr = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000)
            lr.fit(Z[data.labelled], data.y[data.labelled])
            out[need] = lr.decision_function(Z[rows])
            return out
        X = data.X[rows]
        for _, step in steps:  # the stack map's own forest, fed as in the map
            if isinstance(step, ForestScore):
                out[need] = step.forest_.predict_proba(X)[:, -1]
                return out
            X = step.transform(X)
        if forest is None:
            rf = _tie_forest(data, self.random_state, self.n_jobs)
        else:
            rf = forest.result()
        out[need] = rf.predict_proba(data.X[rows])[:, -1]  # on the raw features
        return out

    def _select(self, ttk: TTK, cost: object) -> None:
        """Selection and ranking: TTK's score, ties broken by the secondary score."""
        s = self.candidate_scores_
        tol = _tie_width(s)
        level = np.round(s / tol)
        order = np.lexsort((np.arange(s.size), -self.secondary_scores_, -level))
        rank_score = np.empty(s.size)
        rank_score[order] = -np.arange(s.size, dtype=np.float64)
        if cost is None:
            pick = order[: int(self.k)]
        else:
            c = np.asarray(cost, dtype=np.float64)[self.candidates_]
            pick = budget_select(rank_score, c, float(ttk.budget_))
        self.selected_ = self.candidates_[pick]
        self.candidate_rank_ = np.empty(s.size, dtype=np.int64)
        self.candidate_rank_[order] = np.arange(s.size)
        last = s[pick[-1]] if pick.size else np.inf
        self.n_tied_at_cutoff_ = int((np.abs(s - last) <= tol).sum()) if pick.size else 0

    def decision_function(self, X: object) -> np.ndarray:
        """TTK's score of each row, through the chosen feature map."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.decision_function(X)

    def predict(self, X: object) -> np.ndarray:
        """1 where the score is positive, else 0."""
        return (self.decision_function(X) > 0).astype(np.int64)
