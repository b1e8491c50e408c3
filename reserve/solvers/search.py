"""One transductive grid search: scikit-learn's ``BaseSearchCV`` with candidates for held-out rows.

:class:`TransductiveSearchCV` is generic over an estimator, a grid of its parameters, a
splitter and a scorer, as scikit-learn's searches are. What makes it transductive is the
splitter, :class:`TransductiveSplit`: it splits the *labelled* rows into folds, and in each
fold's fit the held-out rows are candidates (``y == -1``) with the fold's budget
(:func:`fold_k`) and at the standard effort (:func:`at_standard_effort`), as the real
candidates are; the scorer reads the held-out labels of what the fit selected
(:func:`held_out_precision`). AutoTTK's choice of feature map, ``C`` and class weights and
:func:`reserve.model_selection.select_C`'s choice of ``C`` are both this search.

It lives among the solvers (not in :mod:`reserve.model_selection`) because AutoTTK, a solver,
runs it, and the solvers import nothing from later stages.
"""

from __future__ import annotations

import copy
import itertools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import GroupKFold, StratifiedKFold

from reserve.errors import InvalidInputError, SolverError
from reserve.fork import can_fork, fork_map, one_blas_thread
from reserve.solvers._base import top_k
from reserve.solvers._validation import check_choice, check_transductive

__all__ = [
    "FOLD_BUDGET_RULES",
    "PARALLEL_MIN_ROWS",
    "TransductiveFold",
    "TransductiveSearchCV",
    "TransductiveSplit",
    "at_standard_effort",
    "best_mean",
    "fold_k",
    "fold_scores",
    "held_out_precision",
    "search_results",
    "time_limited",
]

#: Without fork (see :meth:`TransductiveSearchCV.fit`): labelled rows in the search below
#: which the folds run in this process whatever ``n_jobs``.
PARALLEL_MIN_ROWS = 1000

#: The rules of a fold's budget (:func:`fold_k`).
FOLD_BUDGET_RULES: tuple[str, ...] = ("positives", "share")


def fold_k(
    n_held: int, n_pos_held: int, k: float, n_candidates: int = 1, rule: str = "positives"
) -> int:
    """The budget of a held-out fold of ``n_held`` rows standing in for ``n_candidates``.

    Its share of the run's budget is ``n_held * k / n_candidates`` cells (rounded): with
    ``n_candidates=1``, ``k`` is the share of the fold itself (the paper's 5 %). The rule
    ``"share"`` (:func:`reserve.model_selection.select_C`, the paper's) takes that share, at
    least 1. The rule ``"positives"`` (AutoTTK) raises it to half the fold's positives, so
    that a handful of lucky cells cannot decide the model (precision at one or two cells is
    mostly noise), and keeps it below ``n_held``.

    Examples
    --------
    >>> fold_k(100, 20, 30, 10000)  # share 0.3 cells; raised to half of 20 positives
    10
    >>> fold_k(100, 20, 5000, 10000)
    50
    >>> fold_k(100, 20, 0.05, rule="share")  # 5 % of the fold
    5
    """
    share = round(n_held * k / max(n_candidates, 1))
    if rule == "share":
        return int(max(1, share))
    return int(min(max(share, math.ceil(n_pos_held / 2), 1), max(n_held - 1, 1)))


def at_standard_effort(
    X: np.ndarray, fit_rows: np.ndarray, score_rows: np.ndarray, columns: np.ndarray
) -> np.ndarray:
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


def held_out_precision(estimator: BaseEstimator, y_fold: np.ndarray) -> float:
    """The share of a fold's selection that the held-out labels call present.

    ``y_fold`` holds the true labels of the fold's rows in the fit's order (the held-out
    rows' too, which the fit saw as -1); the fit selected among the held-out rows. A tie at
    the fold's cut that the fit broke by its seeded draw (``cutoff_ties_``,
    :mod:`reserve.solvers.ties`) is counted as the budget's top ``k`` takes it, the tied rows
    in row order (:func:`reserve.solvers.top_k`): a fold's score, and so the choice it
    informs, does not follow the draw.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> held_out_precision(SimpleNamespace(selected_=[3, 5]), np.array([1, 0, 0, 1, 1, 0]))
    0.5
    """
    chosen = np.asarray(estimator.selected_)
    ties = getattr(estimator, "cutoff_ties_", None)
    if ties is not None and ties.n_drawn:  # the top k before the draw
        scores = np.asarray(estimator.candidate_scores_)
        chosen = np.asarray(estimator.candidates_)[top_k(scores, chosen.size)]
    return float(y_fold[chosen].mean())


def time_limited(estimator: BaseEstimator) -> bool:
    """Whether a fit stopped at a time limit and returned its best point so far (a TSVM with
    ``stop_reason_ == "max_time"``, a TTK-MIP whose ``status_`` is not ``"optimal"``)."""
    if getattr(estimator, "stop_reason_", None) == "max_time":
        return True
    status = getattr(estimator, "status_", None)
    return status is not None and status not in ("local", "optimal")


@dataclass(frozen=True)
class TransductiveFold:
    """One fold of the labelled rows.

    Attributes
    ----------
    train, held : ndarray of int
        Positions in the labelled rows: fitted with their labels, held out as candidates.
    k : int
        The fold's budget (:func:`fold_k`).
    """

    train: np.ndarray
    held: np.ndarray
    k: int


class TransductiveSplit:
    """Stratified (or grouped) folds of the labelled rows whose held-out rows are candidates.

    Parameters
    ----------
    n_splits : int, default=3
        Folds; fewer when a class has fewer labelled rows (``note`` of :meth:`split` says so).
    n_repeats : int, default=1
        Repeats of the stratified folds, each with its own shuffle (grouped folds are not
        repeated).
    k : float, default=10
        The run's budget in cells, or the share of a fold with ``rule="share"``
        (:func:`fold_k`).
    rule : {"positives", "share"}, default="positives"
        The fold budget's rule (:func:`fold_k`): AutoTTK's, or the paper's share of the fold.
    effort_columns : sequence of int, default=()
        Columns holding survey effort: the held-out rows are set to the median of the fold's
        training rows (:func:`at_standard_effort`), as the candidates are.
    max_rows : int or None, default=None
        With more labelled rows, the folds split a stratified sample of this many.
    random_state : int or None, default=None
        Seed of the shuffles and of the sample.

    Examples
    --------
    >>> y = np.r_[np.tile([0, 1], 10), -np.ones(5, int)]
    >>> folds, note = TransductiveSplit(n_splits=2, k=1, random_state=0).split(y)
    >>> len(folds), folds[0].held.size, folds[0].k, note
    (2, 10, 3, '')
    """

    def __init__(
        self,
        n_splits: int = 3,
        n_repeats: int = 1,
        k: float = 10,
        rule: str = "positives",
        effort_columns: Sequence[int] = (),
        max_rows: int | None = None,
        random_state: int | None = None,
    ) -> None:
        self.n_splits = n_splits
        self.n_repeats = n_repeats
        self.k = k
        self.rule = rule
        self.effort_columns = effort_columns
        self.max_rows = max_rows
        self.random_state = random_state

    def split(
        self,
        y: np.ndarray,
        groups: np.ndarray | None = None,
    ) -> tuple[list[TransductiveFold], str]:
        """The folds of the labelled rows of ``y`` (``y != -1``) and a note ('' or why fewer).

        ``groups`` (one per row) holds out whole spatial blocks
        (:class:`~sklearn.model_selection.GroupKFold`).
        """
        check_choice(self.rule, FOLD_BUDGET_RULES, "rule")
        y = np.asarray(y).reshape(-1)
        lab = np.flatnonzero(y != -1)
        pick = self._sample(y[lab])
        y_cv = y[lab][pick]
        g = None if groups is None else np.asarray(groups).reshape(-1)[lab][pick]
        pairs, note = self._pairs(y_cv, g)
        m = int(np.sum(y == -1))
        return [self._fold(pick[tr], pick[he], y[lab], m) for tr, he in pairs], note

    def rows(
        self,
        X_lab: np.ndarray,
        y_lab: np.ndarray,
        fold: TransductiveFold,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The fold's fit: its training rows, then its held-out rows as candidates (-1)."""
        cols = np.asarray(self.effort_columns, dtype=np.int64).reshape(-1)
        X = at_standard_effort(X_lab, fold.train, fold.held, cols) if cols.size else X_lab
        Xf = np.vstack([X[fold.train], X[fold.held]])
        yf = np.concatenate([y_lab[fold.train], np.full(fold.held.size, -1)])
        return Xf, yf

    def _fold(
        self, train: np.ndarray, held: np.ndarray, y_lab: np.ndarray, m: int
    ) -> TransductiveFold:
        if self.rule == "share":
            k = fold_k(held.size, 0, self.k, 1, "share")
        else:
            k = fold_k(held.size, int(y_lab[held].sum()), self.k, m)
        return TransductiveFold(train, held, k)

    def _sample(self, y_lab: np.ndarray) -> np.ndarray:
        """Positions of the labelled rows the folds split (a stratified sample when many)."""
        n = y_lab.size
        if self.max_rows is None or n <= self.max_rows:
            return np.arange(n)
        rng = np.random.default_rng(self.random_state)
        keep = []
        for cls in (0, 1):
            rows = np.flatnonzero(y_lab == cls)
            take = max(round(self.max_rows * rows.size / n), min(rows.size, 2 * self.n_splits))
            keep.append(rng.choice(rows, size=min(take, rows.size), replace=False))
        return np.sort(np.concatenate(keep))

    def _pairs(self, y_lab: np.ndarray, groups: np.ndarray | None) -> tuple[list, str]:
        """(train, held) positions of every fold, and a note."""
        n_pos = int(y_lab.sum())
        n_neg = int(y_lab.size - n_pos)
        splits = min(self.n_splits, n_pos, n_neg)
        if splits < 2:
            counts = f"{n_pos} positive and {n_neg} negative labelled rows"
            return [], f"{counts}: too few to cross-validate"
        note = ""
        if splits != self.n_splits:
            note = f"cv reduced to {splits} folds ({n_pos} positives)"
        if groups is not None:
            splits = min(splits, np.unique(groups).size)
            if splits < 2:
                return [], "fewer than 2 spatial blocks hold labelled rows: no cross-validation"
            return list(GroupKFold(n_splits=splits).split(y_lab, y_lab, groups)), note
        pairs = []
        for seed in np.random.SeedSequence(self.random_state).generate_state(self.n_repeats):
            skf = StratifiedKFold(n_splits=splits, shuffle=True, random_state=int(seed))
            pairs.extend(skf.split(y_lab, y_lab))
        return pairs, note


def _points(param_grid: object) -> list[dict]:
    """The grid as a list of parameter dicts: a dict of lists expands in its keys' order (the
    first key varies slowest); a list of dicts is taken as it is."""
    if isinstance(param_grid, dict):
        keys = list(param_grid)
        return [dict(zip(keys, v, strict=True)) for v in itertools.product(*param_grid.values())]
    points = [dict(p) for p in param_grid]  # type: ignore[attr-defined]
    if not points:
        raise InvalidInputError("param_grid must hold at least one point; received none")
    return points


def _column(values: list) -> np.ndarray:
    """A ``cv_results_`` column: floats when every value is a number, else objects."""
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return np.array(values, dtype=np.float64)
    return np.array(values, dtype=object)


def search_results(points: list[dict], scores: np.ndarray) -> dict[str, object]:
    """``cv_results_`` of ``points`` from their fold scores (one row per point, one column per
    fold, NaN where a fold could not score it).

    The mean and standard deviation are over the folds that scored the point (NaN when none
    did); ``rank_test_score`` ranks by the mean, the first listed first among equals.

    Examples
    --------
    >>> res = search_results([{"C": 0.1}, {"C": 1.0}], np.array([[0.5, 0.5], [1.0, np.nan]]))
    >>> res["C"].tolist(), res["mean_test_score"].tolist(), res["rank_test_score"].tolist()
    ([0.1, 1.0], [0.5, 1.0], [2, 1])
    """
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # points without a fold: NaN
        valid = np.isfinite(scores).any(axis=1)
        finite = np.where(np.isfinite(scores), scores, np.nan)
        mean = np.where(valid, np.nanmean(finite, axis=1), np.nan)
        std = np.where(valid, np.nanstd(scores, axis=1), np.nan)
    res: dict[str, object] = {"params": [dict(p) for p in points]}
    for key in points[0]:
        res[key] = _column([p[key] for p in points])
    res["mean_test_score"], res["std_test_score"] = mean, std
    order = np.argsort(-np.nan_to_num(mean, nan=-np.inf), kind="stable")
    rank = np.empty(len(points), dtype=np.int64)
    rank[order] = np.arange(1, len(points) + 1)
    res["rank_test_score"] = rank
    for i in range(scores.shape[1]):
        res[f"split{i}_test_score"] = scores[:, i]
    return res


def fold_scores(cv_results: dict) -> np.ndarray:
    """The ``split<i>_test_score`` columns of ``cv_results`` side by side (point x fold)."""
    keys = [key for key in cv_results if key.startswith("split")]
    n = len(cv_results["params"])
    return np.column_stack([cv_results[key] for key in keys]) if keys else np.empty((n, 0))


def best_mean(cv_results: dict) -> int:
    """The point with the best mean score (the first of equals; the first if none scored)."""
    return int(np.flatnonzero(cv_results["rank_test_score"] == 1)[0])


class TransductiveSearchCV(BaseEstimator):
    """Choose an estimator's parameters by transductive cross-validation on the labelled rows.

    Every point of ``param_grid`` is fitted on every fold of ``splitter``: the fold's
    training rows with their labels, its held-out rows as candidates with the fold's budget
    (set as the estimator's ``budget_param``); ``scorer`` scores the fit against the
    held-out labels. The folds run on up to ``n_jobs`` processors, and each fold computes the same
    wherever it runs (one BLAS thread), so the results never depend on ``n_jobs``.

    Parameters
    ----------
    estimator : estimator
        Cloned for every fit; ``fit(X, y, **fit_params)`` selects among the rows ``y == -1``
        and sets ``selected_`` and ``candidates_``.
    param_grid : dict of lists or list of dicts
        The points: a dict expands in its keys' order (the first key varies slowest), a list
        is taken as given. The first point wins among equal scores.
    splitter : TransductiveSplit
    scorer : callable, default=held_out_precision
        ``scorer(fitted, y_fold) -> float``, ``y_fold`` the fold's true labels in the fit's
        row order (the held-out rows last).
    budget_param : str, default="k"
        The estimator's parameter that receives each fold's budget.
    choose : callable or None, default=None
        ``choose(cv_results_) -> index`` of the best point; None: the best mean score.
    refit : bool, default=False
        Fit the best point on all rows (``best_estimator_``).
    catch : tuple of exception types, default=(SolverError,)
        A fit that raises one of these scores NaN on its fold; others propagate.
    n_jobs : int or None, default=None
        Processors the folds share. On Linux this process runs its share and forked children
        the rest; elsewhere joblib's workers do, from :data:`PARALLEL_MIN_ROWS` labelled rows
        (a fresh worker's imports cost more than a small fold).

    Attributes
    ----------
    cv_results_ : dict
        ``params``, one column per parameter, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score`` and ``split<i>_test_score`` (:func:`search_results`).
    best_index_, best_params_, best_score_ : int, dict, float
    best_estimator_ : estimator
        With ``refit``.
    note_ : str
        Why the folds are fewer than asked, or none ('' when they ran as asked).
    n_limited_ : int
        Fits that stopped at a time limit (:func:`time_limited`).

    Examples
    --------
    >>> from reserve.solvers import SVM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 2)); y = (X[:, 0] > 0).astype(int); y[60:] = -1
    >>> split = TransductiveSplit(n_splits=2, k=0.1, rule="share", random_state=0)
    >>> search = TransductiveSearchCV(SVM(), {"C": [0.1, 1.0]}, split).fit(X, y)
    >>> search.cv_results_["split1_test_score"].shape, search.best_params_["C"] in (0.1, 1.0)
    ((2,), True)
    """

    def __init__(
        self,
        estimator: BaseEstimator,
        param_grid: object,
        splitter: TransductiveSplit,
        scorer: Callable = held_out_precision,
        *,
        budget_param: str = "k",
        choose: Callable[[dict], int] | None = None,
        refit: bool = False,
        catch: tuple[type[Exception], ...] = (SolverError,),
        n_jobs: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.param_grid = param_grid
        self.splitter = splitter
        self.scorer = scorer
        self.budget_param = budget_param
        self.choose = choose
        self.refit = refit
        self.catch = catch
        self.n_jobs = n_jobs

    def fit(
        self,
        X: object,
        y: object,
        groups: object = None,
        on_fold: Callable[[int, int, int], None] | None = None,
        **fit_params: object,
    ) -> TransductiveSearchCV:
        """Score every point on every fold; choose the best; refit it if asked.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            1 / 0 for labelled rows, -1 for candidates (which only size the folds' budgets).
        groups : array-like of shape (n_samples,) or None
            Spatial blocks, for :meth:`TransductiveSplit.split`.
        on_fold : callable or None
            ``on_fold(done, n_folds, n_rows)``: once before the first fold (``done`` 0), then
            as folds finish; ``n_rows`` is the labelled rows the folds split.
        **fit_params
            Passed to every fit; each fold gets its own deep copy, so that a dict in them is
            a cache the fits of one fold share and no other fold sees.

        Returns
        -------
        self
        """
        points = _points(self.param_grid)
        data = check_transductive(X, y, None)
        X_lab, y_lab = data.X[data.labelled], data.y[data.labelled]
        folds, self.note_ = self.splitter.split(data.y, groups)
        tasks = [
            (
                self.estimator,
                points,
                X_lab,
                y_lab,
                fold,
                self.splitter,
                self.scorer,
                self.budget_param,
                fit_params,
                self.catch,
            )
            for fold in folds
        ]
        n_rows = int(sum(f.train.size + f.held.size for f in folds[:1]))
        on_done = None
        if on_fold is not None and folds:
            on_fold(0, len(folds), n_rows)

            def on_done(n: int) -> None:
                on_fold(n, len(folds), n_rows)

        jobs = min(effective_n_jobs(self.n_jobs), len(folds))
        runs = _map_folds(tasks, jobs, n_rows, on_done)
        scores = np.column_stack([r[0] for r in runs]) if runs else np.empty((len(points), 0))
        self.n_limited_ = int(sum(r[1] for r in runs))
        self.cv_results_ = search_results(points, scores)
        self.best_index_ = int((self.choose or best_mean)(self.cv_results_))
        self.best_params_ = dict(points[self.best_index_])
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        if self.refit:
            best = clone(self.estimator).set_params(**self.best_params_)
            self.best_estimator_ = best.fit(X, y, **fit_params)
        return self


def _score_fold(*task: object) -> tuple[np.ndarray, int]:
    """:func:`_score_fold_here` on one BLAS thread (the folds share the processors)."""
    with one_blas_thread():
        return _score_fold_here(*task)


def _score_fold_here(
    estimator: BaseEstimator,
    points: list[dict],
    X_lab: np.ndarray,
    y_lab: np.ndarray,
    fold: TransductiveFold,
    splitter: TransductiveSplit,
    scorer: Callable,
    budget_param: str,
    fit_params: dict,
    catch: tuple,
) -> tuple[np.ndarray, int]:
    """Every point's score on one fold (NaN where it cannot be scored), and the fits that
    stopped at a time limit."""
    y_held = y_lab[fold.held]
    out = np.full(len(points), np.nan)
    if y_held.sum() == 0:
        return out, 0  # a fold without a positive cannot rank anything
    Xf, yf = splitter.rows(X_lab, y_lab, fold)
    y_fold = np.concatenate([y_lab[fold.train], y_held])
    params = copy.deepcopy(fit_params)
    n_limited = 0
    for i, point in enumerate(points):
        est = clone(estimator).set_params(**point, **{budget_param: fold.k})
        try:
            est.fit(Xf, yf, **params)
        except catch:
            continue
        out[i] = scorer(est, y_fold)
        n_limited += time_limited(est)
    return out, n_limited


def _map_folds(
    tasks: list[tuple], jobs: int, n_rows: int, on_done: Callable[[int], None] | None = None
) -> list:
    """``_score_fold(*task)`` for every task, in order, on up to ``jobs`` processors.

    On Linux the folds are shared between this process and ``jobs - 1`` forked children: a
    forked child inherits every module already imported and starts in milliseconds, so even
    the few-second search of a small region gains from a second core. Elsewhere (no fork, not
    the main thread, or other Python threads running) joblib's worker processes run the folds
    from :data:`PARALLEL_MIN_ROWS` labelled rows: a fresh worker costs about 2 s of CPU to
    start and import, more than the folds of a small search take.

    ``on_done(n)`` is called here as folds finish, with the number finished so far.
    """
    if jobs > 1 and can_fork():
        return fork_map(_score_fold, tasks, jobs, on_done=on_done)
    jobs = jobs if n_rows >= PARALLEL_MIN_ROWS else 1
    results = Parallel(n_jobs=max(jobs, 1), return_as="generator")(
        delayed(_score_fold)(*task) for task in tasks
    )
    out = []
    for scores in results:  # in order, each as soon as it and those before it are done
        out.append(scores)
        if on_done is not None:
            on_done(len(out))
    return out
