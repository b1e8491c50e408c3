"""AutoTTK: TTK with its feature map and ``C`` chosen by transductive cross-validation.

The default estimator of ``reserve select``, and a composition of three parts. Its search
(:class:`reserve.solvers.search.TransductiveSearchCV` over :class:`MappedTTK`) tries every
(feature map, C, class weight) of a small grid on the labelled rows, where each held-out fold
plays the candidates (its rows are unlabelled in the fit, :func:`reserve.solvers.search.fold_k`
of them are selected, and the score is the precision of that selection against their hidden
labels). Its ensemble (:mod:`reserve.solvers.ensemble`) then fits TTK on all rows with the
winner and with every other feature map's best grid point whose deficit to it is within the
folds' noise, and selects by the mean of their standardised scores, clipped
(``ensemble="maps"``, the default; ``"none"`` fits the winner alone). Its tie-break
(:mod:`reserve.solvers.ties`) orders candidates whose scores tie by a secondary score.

Class weights are chosen like the map and ``C`` (``class_weight="cv"``, the default): every
grid point is tried unweighted and with ``class_weight="balanced"``. The guard against the
trivial scorer is always on: an unweighted TTK fit that ends at ``w`` near 0
(:attr:`reserve.solvers.TTK.trivial_`: the candidates' scores differ by rounding noise) is
refitted balanced, in every fold and in the final fit, so that noise never wins the CV. See
docs/algorithm.md, "Class weights and the trivial scorer", for the measurements behind this.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from reserve.errors import InvalidInputError, SolverError
from reserve.solvers._validation import (
    TransductiveData,
    check_choice,
    check_positive_real,
    check_transductive,
)
from reserve.solvers.ensemble import (
    ENSEMBLES,
    MappedTTK,
    check_members,
    combine_members,
    fit_members,
    map_members,
    map_winners,
)
from reserve.solvers.features import FEATURE_MAPS, JOINING_MAPS
from reserve.solvers.problem import SelectionProblem
from reserve.solvers.search import (
    TransductiveSearchCV,
    TransductiveSplit,
    at_standard_effort,
    fold_scores,
    search_results,
)
from reserve.solvers.ties import (
    TIE_BREAKS,
    CutoffTies,
    forest_step,
    secondary_scores,
    select_with_ties,
    start_tie_forest,
)
from reserve.solvers.ttk import LADDERS

__all__ = [
    "AUTO_CS",
    "AUTO_MODELS",
    "BALANCE_RATIO",
    "CLASS_WEIGHTS",
    "SMALL_TRAINING",
    "TIE_BREAKS",
    "AutoTTK",
    "nearly_balanced",
]

#: Feature maps AutoTTK compares by default (see :mod:`reserve.solvers.features`).
AUTO_MODELS: tuple[str, ...] = ("linear", "spline", "stack", "forest")

#: Values of ``C`` AutoTTK compares by default.
AUTO_CS: tuple[float, ...] = (0.1, 1.0, 10.0)

#: Values of AutoTTK's ``class_weight``: chosen by the CV (guarded), the guard alone, never,
#: always.
CLASS_WEIGHTS: tuple[str | None, ...] = ("cv", "auto", None, "balanced")

#: Labelled rows at or below which AutoTTK compares the linear map alone (``small_training``).
#: With 10-60 labelled cells the linear map alone selected better than the ensemble of the
#: maps in mean in 9 of the 10 settings of ``benchmarks/bench_small_training.py`` (the
#: simulated region and BCR 27's folds cut to 10-60 labelled cells): the folds of so few
#: cells cannot tell the maps apart, and the flexible maps fit their noise.
SMALL_TRAINING = 60

#: Labelled rows above which the cross-validation runs on a stratified sample of this size.
MAX_CV_ROWS = 4000

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


def leading_point(cv_results: dict) -> int:
    """The winner of AutoTTK's search: the best mean score (first of the ties) among the maps
    that may lead (not :data:`reserve.solvers.features.JOINING_MAPS`, unless only they were
    scored); the first point when no fold scored any.

    Examples
    --------
    >>> res = search_results([{"model": "forest"}, {"model": "linear"}],
    ...                      np.array([[1.0, 1.0], [0.5, 0.25]]))
    >>> leading_point(res)
    1
    """
    valid = np.isfinite(fold_scores(cv_results)).any(axis=1)
    if not valid.any():
        return 0
    order = np.argsort(cv_results["rank_test_score"], kind="stable")
    models = cv_results["model"]
    leads = [i for i in order if models[i] not in JOINING_MAPS and valid[i]]
    return int(leads[0] if leads else order[0])


def _as_points(grid: list[tuple]) -> list[dict]:
    return [{"model": m, "C": c, "class_weight": cw} for m, c, cw in grid]


def _check_choices(est: AutoTTK) -> None:
    """Refuse a bad ``cv``, ``n_repeats``, ``small_training``, ``class_weight``,
    ``tie_break``, ``ladder`` or ``ensemble``."""
    for name, low in (("cv", 2), ("n_repeats", 1), ("small_training", 0)):
        v = getattr(est, name)
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < low:
            raise InvalidInputError(f"{name} must be an integer >= {low}; received {v!r}")
    if est.class_weight not in CLASS_WEIGHTS:
        raise InvalidInputError(
            f"class_weight must be one of {', '.join(map(repr, CLASS_WEIGHTS))}; received "
            f"{est.class_weight!r}. Use 'auto' (balanced only when the fit is trivial)."
        )
    check_choice(est.tie_break, TIE_BREAKS, "tie_break")
    check_choice(est.ladder, LADDERS, "ladder")
    check_choice(est.ensemble, ENSEMBLES, "ensemble")


def auto_grid(est: AutoTTK) -> list[tuple[str, float, str | None]]:
    """Check ``est``'s parameters; its grid points ``(model, C, class_weight)`` (its
    ``members`` when given), the models slowest, then ``C``, then the class weights."""
    models = tuple(est.models) if not isinstance(est.models, str) else (est.models,)
    if not models or any(m not in FEATURE_MAPS for m in models):
        raise InvalidInputError(
            f"models must name feature maps from {', '.join(FEATURE_MAPS)}; received {est.models!r}"
        )
    Cs = [check_positive_real(c, "Cs") for c in np.atleast_1d(est.Cs)]
    if not Cs:
        raise InvalidInputError("Cs must hold at least one value; received an empty grid")
    _check_choices(est)
    if est.members is not None:
        return check_members(est.members)
    cws = ("auto", "balanced") if est.class_weight == "cv" else (est.class_weight,)
    grid: list[tuple[str, float, str | None]] = []
    for point in ((m, float(c), cw) for m in models for c in Cs for cw in cws):
        # a joining map ranks as its one column does whatever C and weights: one point
        if point[0] not in JOINING_MAPS or all(p[0] != point[0] for p in grid):
            grid.append(point)
    return grid


def small_training_grid(grid: list[tuple], n_labelled: int, small_training: int) -> tuple:
    """The grid AutoTTK searches with ``n_labelled`` labelled rows, and a note ('' when the
    grid is unchanged): the linear map's points alone when the rows are at most
    ``small_training`` and the grid holds the linear map beside others.

    Examples
    --------
    >>> grid = [("linear", 1.0, "auto"), ("forest", 1.0, "auto")]
    >>> small_training_grid(grid, 40, 60)[0]
    [('linear', 1.0, 'auto')]
    >>> small_training_grid(grid, 61, 60)[0] == grid
    True
    """
    maps = {model for model, _, _ in grid}
    if n_labelled > small_training or "linear" not in maps or len(maps) == 1:
        return grid, ""
    note = f"{n_labelled} labelled cells (at most {small_training}): the linear map alone"
    return [p for p in grid if p[0] == "linear"], note


def _fold_progress(grid: list[tuple], progress: Callable[[str], None] | None) -> Callable | None:
    """The search's ``on_fold``: its progress lines (None without ``progress``)."""
    if progress is None:
        return None
    n_maps = len({model for model, _, _ in grid})

    def on_fold(done: int, n_folds: int, n_rows: int) -> None:
        progress(
            f"cross-validating the habitat models: {len(grid)} settings ({n_maps} feature "
            f"map{'s' if n_maps > 1 else ''}) on {n_folds} folds of {n_rows} cells"
            if done == 0
            else f"cross-validating the habitat models: {done} of {n_folds} folds"
        )

    return on_fold


def _effort_columns(columns: object, n_features: int) -> np.ndarray:
    """``effort_columns`` checked, as sorted unique column indices."""
    cols = np.atleast_1d(np.asarray(() if columns is None else columns))
    if cols.size and (
        cols.dtype.kind not in "iu" or cols.ndim != 1 or cols.min() < 0 or cols.max() >= n_features
    ):
        raise InvalidInputError(
            f"effort_columns must be column indices of X (0 to {n_features - 1}); "
            f"received {columns!r}"
        )
    return np.unique(cols).astype(np.int64)


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
    small_training : int, default=SMALL_TRAINING
        With at most this many labelled rows, and ``"linear"`` among several ``models``,
        the search compares the linear map alone (its ``C`` and class weights) and
        ``cv_note_`` says so; 0 never. Folds of a few dozen cells cannot tell the maps
        apart, and the flexible maps then fit noise (docs/algorithm.md, "Few labelled
        cells").
    members : sequence of (model, C, class_weight) or None, default=None
        Grid points to fit as the final model without any cross-validation (their mean
        when several). :meth:`refit_params` sets it, so that the bootstrap's and the
        boundary calibration's refits keep the model this fit chose.

    Attributes
    ----------
    best_params_ : dict
        ``{"model": ..., "C": ..., "class_weight": ...}`` of the winner (its grid point:
        ``class_weight`` is ``"auto"`` for the guard; the fitted TTK's ``class_weight`` says
        what it did).
    members_ : tuple of (model, C, class_weight)
        The grid points of the final fit, the winner first (then the maps within noise of
        it, with ``ensemble="maps"``).
    cv_results_ : dict of ndarray
        ``params``, ``model``, ``C``, ``class_weight``, ``mean_test_score``,
        ``std_test_score``, ``rank_test_score`` and ``split<i>_test_score`` per grid point.
    cv_note_ : str
        Why the cross-validation was reduced or skipped ('' when it ran as asked).
    small_training_note_ : str
        The rule for few labelled cells, when it narrowed the search to the linear map
        (``small_training``; '' otherwise). Also in ``cv_note_``.
    best_estimator_ : Pipeline or MapMean
        The feature map and TTK, fitted on all rows; with several members, their
        :class:`MapMean`.
    selected_, candidates_, candidate_scores_ : ndarray
        As TTK's; ties at the cutoff are broken by ``secondary_scores_`` (``cutoff_ties_``).
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
    cutoff_ties_ : reserve.solvers.ties.CutoffTies
        The tie at the cut and how it was broken (:func:`reserve.solvers.ties.break_cutoff_ties`:
        the secondary score, then a permutation seeded with ``random_state``); empty with
        costs or a boundary penalty (not a cut of the ranking).
    standard_effort_ : ndarray
        The standard effort of each of ``effort_columns`` (empty without them).
    cv_runtime_ : float
        Seconds of the cross-validation.

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

    def __init__(
        self,
        k: int = 10,
        budget: float | None = None,
        models: tuple[str, ...] = AUTO_MODELS,
        Cs: tuple[float, ...] = AUTO_CS,
        cv: int = 3,
        n_repeats: int = 2,
        random_state: int | None = None,
        n_jobs: int | None = None,
        class_weight: str | None = "cv",
        effort_columns: tuple[int, ...] | None = None,
        boundary_penalty: float = 0.0,
        tie_break: str = "forest",
        ladder: str = "mean",
        ensemble: str = "maps",
        small_training: int = SMALL_TRAINING,
        members: tuple[tuple, ...] | None = None,
    ) -> None:
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
        self.small_training = small_training
        self.members = members

    def __sklearn_tags__(self):  # sklearn protocol: binary only, -1 marks candidates
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(
        self,
        X: object,
        y: object = None,
        cost: object = None,
        groups: object = None,
        boundary: object = None,
        progress: Callable[[str], None] | None = None,
    ) -> AutoTTK:
        """Choose the feature map and ``C`` by CV on the labelled rows, then fit on all rows.

        Parameters
        ----------
        X : SelectionProblem or array-like of shape (n_samples, n_features)
            The problem (:class:`reserve.solvers.problem.SelectionProblem`, read as its
            arrays: ``y``, ``cost`` and ``boundary`` then None), or the raw features of
            labelled and candidate rows.
        y : array-like of shape (n_samples,) or None
            1 / 0 for labelled rows, -1 for candidates (with array ``X``).
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
        if isinstance(X, SelectionProblem):  # the one problem object: read as its arrays
            X, y, cost, boundary = X.X, X.y, X.row_cost(), X.row_boundary()
        if progress is not None and not callable(progress):
            raise InvalidInputError(
                f"progress must be a function of one message, or None; received {progress!r}"
            )
        grid = auto_grid(self)
        data = check_transductive(X, y, None if self.budget is not None else self.k)
        g = None if groups is None else np.asarray(groups).reshape(-1)
        if g is not None and g.shape[0] != data.X.shape[0]:
            raise InvalidInputError(
                f"groups must have one entry per row of X ({data.X.shape[0]}); "
                f"received {g.shape[0]}"
            )
        data, cols = self._standard_effort(data)
        if self.members is None:
            points = self._choose(data, g, grid, cols, progress)
        else:  # a refit of chosen members: nothing to choose (penalised: the winner only)
            points = grid[:1] if self.boundary_penalty else grid
            self.cv_results_ = search_results(_as_points(grid), np.empty((len(grid), 0)))
            self.cv_note_ = "members given: fitted without cross-validation"
            self.small_training_note_ = ""
            self.cv_runtime_ = 0.0
        self._fit_final(data, points, cost, boundary, progress)
        model, C, cw = points[0]
        self.best_params_ = {"model": model, "C": C, "class_weight": cw}
        self.members_ = tuple(points)
        return self

    def _choose(
        self,
        data: TransductiveData,
        groups: np.ndarray | None,
        grid: list[tuple],
        cols: np.ndarray,
        progress: Callable[[str], None] | None = None,
    ) -> list[tuple]:
        """Search ``grid``; the grid points the final fit uses, the winner first."""
        notes = []
        grid, note = small_training_grid(grid, int(data.labelled.size), self.small_training)
        self.small_training_note_ = note
        notes.append(note)
        if self.class_weight == "cv" and nearly_balanced(data.y[data.labelled]):
            grid = [p for p in grid if p[2] != "balanced"]
            notes.append(
                f"classes nearly balanced (at most {BALANCE_RATIO:g} to 1): "
                "class_weight='balanced' not tried"
            )
        t_cv = time.perf_counter()
        if len(grid) == 1:
            self.cv_results_ = search_results(_as_points(grid), np.empty((1, 0)))
            notes.insert(0, "one grid point: nothing to choose, no cross-validation")
            best = 0
        else:
            search = self._search(grid, cols).fit(
                data.X, data.y, groups, _fold_progress(grid, progress), shared={}
            )
            self.cv_results_, best = search.cv_results_, search.best_index_
            notes.insert(0, search.note_)
            if not np.isfinite(fold_scores(self.cv_results_)).any():
                notes = notes if any(notes) else ["no fold could be scored (no positive held out)"]
                notes.append("fell back to the first grid point")
        self.cv_runtime_ = time.perf_counter() - t_cv
        self.cv_note_ = "; ".join(n for n in notes if n)
        if self.ensemble == "none" or self.boundary_penalty:
            return [grid[best]]
        return [grid[i] for i in map_winners(grid, fold_scores(self.cv_results_), best)]

    def _search(self, grid: list[tuple], cols: np.ndarray) -> TransductiveSearchCV:
        """The search over ``grid``: :class:`MappedTTK` on AutoTTK's folds."""
        k = int(self.k) if self.budget is None else max(int(self.k), 1)
        split = TransductiveSplit(
            n_splits=int(self.cv),
            n_repeats=int(self.n_repeats),
            k=k,
            effort_columns=cols,
            max_rows=MAX_CV_ROWS,
            random_state=self.random_state,
        )
        return TransductiveSearchCV(
            MappedTTK(random_state=self.random_state),
            _as_points(grid),
            split,
            choose=leading_point,
            catch=(SolverError, InvalidInputError),
            n_jobs=self.n_jobs,
        )

    def refit_params(self) -> dict[str, object]:
        """Parameters with which an unfitted clone refits this fit's model without CV.

        The bootstrap's and the boundary calibration's refits use them: the same feature
        maps, ``C`` and class weights (every member of the ensemble), no cross-validation.
        """
        check_is_fitted(self, "members_")
        return {"members": tuple(self.members_)}

    def _standard_effort(self, data: TransductiveData) -> tuple[TransductiveData, np.ndarray]:
        """The candidates at the labelled rows' median effort, and the effort columns."""
        cols = _effort_columns(self.effort_columns, data.X.shape[1])
        if not cols.size:
            self.standard_effort_ = np.empty(0)
            return data, cols
        X = at_standard_effort(data.X, data.labelled, data.candidates, cols)
        self.standard_effort_ = X[data.candidates[0], cols]
        return replace(data, X=X), cols

    def _fit_final(
        self,
        data: TransductiveData,
        points: list[tuple],
        cost: object,
        boundary: object = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        """Fit the members on all rows; select by their (mean) score, ties broken."""
        mapped = map_members(points, data.X, data.y, self.random_state, self.n_jobs)
        tie_steps = next((st for st, _ in mapped if forest_step(st) is not None), mapped[0][0])
        jobs = effective_n_jobs(self.n_jobs)
        forest = start_tie_forest(
            self.tie_break, tie_steps, data.X, data.y, self.random_state, jobs
        )
        params = {"k": int(self.k), "random_state": self.random_state, "ladder": self.ladder}
        params |= {} if self.budget is None else {"budget": self.budget}
        params |= {"boundary_penalty": self.boundary_penalty} if self.boundary_penalty else {}
        try:
            fits = fit_members(
                points, mapped, data.y, cost, boundary, params, self.n_jobs, progress
            )
        except BaseException:
            if forest is not None:
                forest.cancel()
            raise
        ttk = fits[0][0]
        self.best_estimator_, self.candidate_scores_ = combine_members(mapped, fits)
        self.objective_, self.status_ = ttk.objective_, ttk.status_
        self.candidates_ = data.candidates
        self.secondary_scores_ = secondary_scores(
            self.tie_break,
            self.candidate_scores_,
            tie_steps,
            mapped[0][1],
            data.X,
            data.y,
            seed=self.random_state,
            n_jobs=self.n_jobs,
            forest=forest,
        )
        self._select(ttk, cost, boundary, len(fits) > 1)
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = data.X.shape[1]

    def _select(self, ttk: object, cost: object, boundary: object, ensemble: bool) -> None:
        """Selection, ranking and the tie at the cut (:func:`select_with_ties`); with a
        boundary penalty, the set TTK chose; the ensemble's threshold and boundary length."""
        cand = self.candidates_
        pick, order, self.cutoff_ties_ = select_with_ties(
            self.candidate_scores_,
            self.secondary_scores_,
            int(self.k),
            self.random_state,
            cost=None if cost is None else np.asarray(cost, dtype=np.float64)[cand],
            budget=None if cost is None else float(ttk.budget_),
        )
        self.selected_ = cand[pick]
        self.candidate_rank_ = np.empty(order.size, dtype=np.int64)
        self.candidate_rank_[order] = np.arange(order.size)
        self.boundary_length_ = ttk.boundary_length_
        if self.boundary_penalty:  # the set TTK chose with the penalty, as it ranked it
            self.selected_ = np.asarray(ttk.selected_)
            self.cutoff_ties_ = CutoffTies()  # not a cut of the ranking: no tie decides it
        elif ensemble:
            chosen = np.isin(cand, self.selected_)
            if cost is None:
                self.best_estimator_.cut(chosen)
            if boundary is not None:
                self.boundary_length_ = float(boundary.take(cand).length(chosen))

    def decision_function(self, X: object) -> np.ndarray:
        """TTK's score of each row, through the chosen feature map."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.decision_function(X)

    def predict(self, X: object) -> np.ndarray:
        """1 where the score is positive, else 0."""
        return (self.decision_function(X) > 0).astype(np.int64)
