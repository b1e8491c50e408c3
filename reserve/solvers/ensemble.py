"""The ensemble of the maps: AutoTTK's grid points, its members and its final scorer.

A grid point of AutoTTK is a feature map, ``C`` and a class weight: :class:`MappedTTK` fits
one (the estimator of its search), :func:`map_members` and :func:`fit_members` fit the final
fit's members on all rows.

With few positives a cross-validation's scores differ by a cell or two between feature maps,
too little to choose one reliably. :func:`map_winners` keeps the winner and every other map
whose fold-by-fold deficit to it is within one standard error; :class:`MapMean` scores by the
mean of their standardised TTK scores, each clipped to +- 3 (docs/algorithm.md, "The
ensemble of the maps").
Arrays in, arrays out.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.pipeline import Pipeline

from reserve.errors import InvalidInputError
from reserve.fork import fork_map, one_blas_thread
from reserve.solvers._validation import check_positive_real
from reserve.solvers.features import FEATURE_MAPS, fit_feature_map
from reserve.solvers.ttk import TTK

__all__ = [
    "ENSEMBLES",
    "MEMBER_CLIP",
    "MapMean",
    "MappedTTK",
    "check_members",
    "combine_members",
    "describe_members",
    "fit_guarded",
    "fit_members",
    "map_members",
    "map_winners",
]

#: Values of AutoTTK's ``ensemble``: the mean of the maps the CV cannot tell from the
#: winner (:func:`map_winners`), or the winner alone.
ENSEMBLES: tuple[str, ...] = ("maps", "none")

#: A member's standardised score is clipped to +- this many standard deviations before the
#: mean, so that no member's extreme tail (a linear fit extrapolating to candidates unlike
#: any surveyed cell) decides the top of the ranking alone (docs/algorithm.md, "The clipped
#: mean").
MEMBER_CLIP: float = 3.0


def map_winners(grid: list[tuple], scores: np.ndarray, best: int) -> list[int]:
    """Grid positions of the feature maps the CV cannot tell from the winner: the overall
    ``best`` first, then each other map's best point whose paired deficit is within noise.

    ``scores`` holds each grid point's fold scores (one column per fold). A map's best point
    (by mean score; ties: grid order) joins when its mean deficit to ``best`` over the folds
    both scored is at most the deficit's standard error (the one-standard-error rule), so a
    map the folds show clearly worse is left out; with fewer than two such folds it joins
    only when it ties. Maps no fold could score are left out.

    Examples
    --------
    >>> grid = [("linear", 1.0, "auto"), ("linear", 10.0, "auto"), ("spline", 1.0, "auto")]
    >>> folds = np.array([[0.5, 0.5, 0.5], [0.75, 0.5, 1.0], [0.5, 0.75, 0.75]])
    >>> map_winners(grid, folds, 1)  # spline's deficit (1/12) is within its error (1/6)
    [1, 2]
    >>> map_winners(grid, np.array([[0.5, 0.5], [1.0, 1.0], [0.0, 0.0]]), 1)
    [1]
    """
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(np.where(np.isfinite(scores), scores, np.nan), axis=1)
    first: dict[str, int] = {grid[best][0]: best}
    for i in np.argsort(-np.nan_to_num(mean, nan=-np.inf), kind="stable"):
        if np.isfinite(mean[i]):
            first.setdefault(grid[i][0], int(i))
    return [i for i in first.values() if i == best or _within_noise(scores[best], scores[i])]


def _within_noise(winner: np.ndarray, other: np.ndarray) -> bool:
    """Whether ``other``'s mean deficit to ``winner`` over the folds both scored is at most
    its standard error (a tie when fewer than two folds were scored by both)."""
    both = np.isfinite(winner) & np.isfinite(other)
    gap = winner[both] - other[both]
    if gap.size < 2:
        return gap.size == 1 and gap[0] <= 0
    return float(gap.mean()) <= float(gap.std(ddof=1)) / np.sqrt(gap.size)


def check_members(members: object) -> list[tuple[str, float, str | None]]:
    """``members`` as a list of checked ``(model, C, class_weight)`` grid points."""
    out = []
    for point in members if isinstance(members, list | tuple) else [members]:
        ok = isinstance(point, list | tuple) and len(point) == 3
        if ok and point[0] in FEATURE_MAPS and point[2] in ("auto", "balanced", None):
            out.append((str(point[0]), check_positive_real(point[1], "members' C"), point[2]))
            continue
        raise InvalidInputError(
            f"members must hold (model, C, class_weight) triples with a model from "
            f"{', '.join(FEATURE_MAPS)} and class_weight 'auto', 'balanced' or None; "
            f"received {point!r}"
        )
    if not out:
        raise InvalidInputError("members must hold at least one (model, C, class_weight)")
    return out


def describe_members(members: list[tuple] | tuple[tuple, ...]) -> str:
    """A short description of the fitted grid points, for progress lines.

    Examples
    --------
    >>> describe_members([("linear", 1.0, "auto")])
    'linear with C=1'
    >>> describe_members([("linear", 1.0, "auto"), ("spline", 0.1, "balanced")])
    'the mean of linear with C=1 and spline with C=0.1 (balanced)'
    """
    parts = [
        f"{m} with C={C:g}" + (" (balanced)" if cw == "balanced" else "") for m, C, cw in members
    ]
    if len(parts) == 1:
        return parts[0]
    return "the mean of " + ", ".join(parts[:-1]) + " and " + parts[-1]


class MapMean:
    """The ensemble's scorer: the mean of its members' standardised TTK scores, clipped.

    Each member is a fitted pipeline (a feature map and TTK). Its scores are standardised by
    the mean and standard deviation of its candidates' scores in the fit, so that every
    member weighs alike whatever the scale of its margin, and clipped to
    +- :data:`MEMBER_CLIP`, so that a few candidates far out in one member's tail cannot
    outweigh every other member; a member whose candidates all score alike (the trivial
    scorer) adds nothing.

    Parameters
    ----------
    members : list of Pipeline
        The fitted members.
    fit_scores : list of ndarray
        Each member's scores of the fit's candidates.

    Attributes
    ----------
    offsets_, scales_ : ndarray
        Each member's candidate mean and standard deviation (scale ``inf`` for a member
        whose candidates all score alike).
    fit_scores_ : ndarray
        The candidates' mean clipped standardised score.
    threshold_ : float
        Subtracted by :meth:`decision_function`: midway between the last selected candidate
        and the best one left out (0 when the selection is not a cut, as with costs).

    Examples
    --------
    >>> tail = np.r_[np.zeros(19), 1.0]  # one candidate far out in the first member's tail
    >>> rank = np.arange(20.0)[::-1]  # the second member ranks it last
    >>> s = MapMean([], [tail, rank]).fit_scores_
    >>> int(s.argmax()), round(float(s[19]), 3)  # unclipped, the outlier would lead (1.356)
    (0, 0.676)
    """

    def __init__(self, members: list, fit_scores: list[np.ndarray]) -> None:
        S = np.vstack([np.asarray(f, dtype=np.float64) for f in fit_scores])
        self.members = members
        self.offsets_ = S.mean(axis=1)
        sd = S.std(axis=1)
        self.scales_ = np.where(sd > 0, sd, np.inf)
        self.threshold_ = 0.0
        self.fit_scores_ = self._mean(S)

    def cut(self, chosen: np.ndarray) -> None:
        """Set ``threshold_`` midway between the last chosen candidate (``chosen``: a mask of
        the fit's candidates) and the best one left out, so that exactly the chosen score
        above 0 (unless they tie); left at 0 when all or none are chosen."""
        s = self.fit_scores_
        if chosen.any() and not chosen.all():
            self.threshold_ = 0.5 * (s[chosen].min() + s[~chosen].max())

    def _mean(self, S: np.ndarray) -> np.ndarray:
        Z = (S - self.offsets_[:, None]) / self.scales_[:, None]
        return np.clip(Z, -MEMBER_CLIP, MEMBER_CLIP).mean(axis=0)

    def transform(self, X: object) -> np.ndarray:
        """The members' mapped features of each row, side by side (their union)."""
        return np.hstack(
            [m[:-1].transform(X) if len(m) > 1 else np.asarray(X) for m in self.members]
        )

    def decision_function(self, X: object) -> np.ndarray:
        """The members' mean clipped standardised score of each row, less ``threshold_``."""
        S = np.vstack([m.decision_function(X) for m in self.members])
        return self._mean(S) - self.threshold_


def fit_guarded(
    Z: np.ndarray,
    y: np.ndarray,
    class_weight: str | None,
    cost: object = None,
    boundary: object = None,
    **params,
) -> tuple[TTK, str | None]:
    """``TTK(**params)`` on ``(Z, y)``; with ``class_weight="auto"``, refitted balanced when
    the fit is trivial (:attr:`TTK.trivial_`).

    Returns the fitted TTK and the class weight it used (``None`` or ``"balanced"``).

    Examples
    --------
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


class MappedTTK(ClassifierMixin, BaseEstimator):
    """One grid point of AutoTTK: feature map ``model``, then TTK guarded by
    :func:`fit_guarded`. The estimator of AutoTTK's search.

    Parameters
    ----------
    model : str, default="linear"
        A feature map (:data:`reserve.solvers.features.FEATURE_MAPS`).
    C : float, default=1.0
    class_weight : {"auto", None, "balanced"}, default="auto"
    k : int, default=10
    polish : bool, default=False
        TTK's polish (the search's fits go without it).
    random_state : int or None, default=None

    Attributes
    ----------
    pipeline_ : Pipeline
        The fitted map and TTK.
    selected_, candidates_, candidate_scores_ : ndarray
        TTK's.
    cutoff_ties_ : reserve.solvers.ties.CutoffTies
        TTK's (what the fold's scorer reads, :func:`reserve.solvers.search.held_out_precision`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(90, 3)); y = (X[:, 0] > 0).astype(int); y[60:] = -1
    >>> MappedTTK(model="spline", k=4, random_state=0).fit(X, y).selected_.size
    4
    """

    def __init__(
        self,
        model: str = "linear",
        C: float = 1.0,
        class_weight: str | None = "auto",
        k: int = 10,
        polish: bool = False,
        random_state: int | None = None,
    ) -> None:
        self.model = model
        self.C = C
        self.class_weight = class_weight
        self.k = k
        self.polish = polish
        self.random_state = random_state

    def fit(self, X: np.ndarray, y: np.ndarray, shared: dict | None = None) -> MappedTTK:
        """Map the rows and fit TTK; return ``self``.

        ``shared`` is a dict kept across the fits of one search fold (the same rows and
        ``random_state``): each map is fitted once in it, and the ``stack`` and ``forest``
        maps share one forest (:func:`reserve.solvers.features.fit_feature_map`).
        """
        shared = {} if shared is None else shared
        key = ("mapped", self.model)
        if key not in shared:
            shared[key] = fit_feature_map(
                self.model, X, y, random_state=self.random_state, shared=shared
            )
        steps, Z = shared[key]
        ttk, _ = fit_guarded(
            Z,
            y,
            self.class_weight,
            k=self.k,
            C=self.C,
            polish=self.polish,
            random_state=self.random_state,
        )
        self.pipeline_ = Pipeline([*steps, ("ttk", ttk)])
        self.selected_ = ttk.selected_
        self.candidates_ = ttk.candidates_
        self.candidate_scores_ = ttk.candidate_scores_
        self.cutoff_ties_ = ttk.cutoff_ties_
        return self


def map_members(
    points: list[tuple], X: np.ndarray, y: np.ndarray, random_state: int | None, n_jobs: int | None
) -> list[tuple[list, np.ndarray]]:
    """Each member's feature map fitted on all rows: ``(steps, mapped rows)`` per point (the
    ``stack`` and ``forest`` maps share one forest)."""
    shared: dict = {}
    return [
        fit_feature_map(model, X, y, random_state=random_state, n_jobs=n_jobs, shared=shared)
        for model, _, _ in points
    ]


def _fit_member(
    Z: np.ndarray,
    y: np.ndarray,
    class_weight: str | None,
    cost: object,
    boundary: object,
    C: float,
    params: dict,
) -> tuple[TTK, str | None]:
    """One member: :func:`fit_guarded` on one BLAS thread (the members share the
    processors; the numbers are the same wherever it runs)."""
    with one_blas_thread():
        return fit_guarded(Z, y, class_weight, cost, boundary, C=C, **params)


def fit_members(
    points: list[tuple],
    mapped: list[tuple],
    y: np.ndarray,
    cost: object,
    boundary: object,
    params: dict,
    n_jobs: int | None,
    progress: Callable[[str], None] | None = None,
) -> list[tuple[TTK, str | None]]:
    """TTK of every member on its mapped rows: ``(fitted TTK, class weight used)`` each.

    ``params`` are TTK's (``k``, ``ladder``, ``random_state``, ...). One member uses the
    ``n_jobs`` processors for its ladder's fits; several share them, one each.
    """
    if len(points) == 1:
        (_, Z), (_, C, cw) = mapped[0], points[0]
        return [fit_guarded(Z, y, cw, cost, boundary, C=C, n_jobs=n_jobs, **params)]
    params = params | {"n_jobs": 1}
    tasks = [
        (Z, y, cw, cost, boundary, C, params)
        for (_, Z), (_, C, cw) in zip(mapped, points, strict=True)
    ]
    on_done = None
    if progress is not None:
        progress(f"fitting the {len(points)} chosen habitat models on every cell")

        def on_done(n: int) -> None:
            progress(f"fitting the chosen habitat models: {n} of {len(points)}")

    return fork_map(_fit_member, tasks, effective_n_jobs(n_jobs), on_done)


def combine_members(mapped: list[tuple], fits: list[tuple]) -> tuple[object, np.ndarray]:
    """The final scorer of fitted members and its candidates' scores: the one member's
    pipeline (map and TTK), or the :class:`MapMean` of several."""
    pipes = [Pipeline([*st, ("ttk", t)]) for (st, _), (t, _) in zip(mapped, fits, strict=True)]
    if len(pipes) == 1:
        return pipes[0], np.asarray(fits[0][0].candidate_scores_)
    mean = MapMean(pipes, [t.candidate_scores_ for t, _ in fits])
    return mean, mean.fit_scores_
