"""Ties at the budget's cut: one tolerance, one rule, and AutoTTK's secondary score.

Two scores tie when they differ by at most :func:`tie_width`, :data:`TIE_RTOL` of the
largest magnitude (at least 1). When more candidates share the last chosen cell's score than
the budget has places left, the choice among them is not the model's; :func:`break_cutoff_ties`
makes it in a documented, spatially neutral way: first by a secondary score when the
estimator has one (AutoTTK's forest presence probability, :func:`secondary_scores`), then by a
random permutation seeded with the run's seed, never by row order (rows follow the grid, so
an id order picks a strip along one edge of the region). Without a tie across the cut the
selection is the estimator's, unchanged.

Every selector breaks its ties once, where its scores become the budget's selection: the
selector base (:func:`rank_selection`, seeded with the estimator's ``random_state``) and
AutoTTK (:func:`select_with_ties`, with its secondary score) report the outcome as
``cutoff_ties_`` and the ranking as ``candidate_rank_``; the selection's tables report them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression

from reserve.fork import Forked, fork_call
from reserve.solvers._base import budget_select
from reserve.solvers.features import ForestScore

__all__ = [
    "TIE_BREAKS",
    "TIE_RTOL",
    "CutoffTies",
    "break_cutoff_ties",
    "near_another",
    "rank_selection",
    "secondary_scores",
    "select_with_ties",
    "start_tie_forest",
    "tie_levels",
    "tie_width",
]

#: Relative width of a tie in a score: two scores closer than this fraction of the largest
#: magnitude (at least 1) tie.
TIE_RTOL = 1e-7

#: Values of AutoTTK's ``tie_break``: the secondary score that orders candidates whose TTK
#: scores tie.
TIE_BREAKS: tuple[str, ...] = ("forest", "logistic")


def tie_width(values: np.ndarray) -> float:
    """Two of ``values`` closer than this tie (:data:`TIE_RTOL` of the largest, at least 1).

    Examples
    --------
    >>> tie_width(np.array([0.5, -0.25])), tie_width(np.array([1e7, np.nan]))
    (1e-07, 1.0)
    """
    return TIE_RTOL * max(1.0, float(np.nanmax(np.abs(values), initial=0.0)))


def tie_levels(values: np.ndarray, width: float | None = None) -> np.ndarray:
    """Each value as a whole number of tie widths (NaN: below every level); equal levels tie.

    Examples
    --------
    >>> tie_levels(np.array([0.5, 0.5 + 1e-9, 0.75, np.nan])).tolist()[:3]
    [5000000.0, 5000000.0, 7500000.0]
    """
    width = tie_width(values) if width is None else width
    return np.round(np.nan_to_num(values, nan=-np.inf) / width)


def near_another(s: np.ndarray, width: float) -> np.ndarray:
    """Whether each score lies within ``width`` of another score.

    Examples
    --------
    >>> near_another(np.array([0.0, 5.0, 1e-9, 3.0]), 1e-7).tolist()
    [True, False, True, False]
    """
    order = np.argsort(s, kind="stable")
    close = np.diff(s[order]) <= width
    near = np.zeros(s.size, dtype=bool)
    near[order[1:][close]] = True
    near[order[:-1][close]] = True
    return near


@dataclass(frozen=True)
class CutoffTies:
    """The tie at the budget's cut.

    Attributes
    ----------
    n_tied : int
        Candidates whose score ties the last chosen cell's (the model cannot order them).
    n_tied_chosen : int
        Of these, how many are chosen.
    n_drawn : int
        Chosen cells decided by the seeded random permutation (0 when the secondary score,
        or the budget, separated the tie).
    flat : bool
        Every candidate has the same score.
    """

    n_tied: int = 0
    n_tied_chosen: int = 0
    n_drawn: int = 0
    flat: bool = False


def break_cutoff_ties(
    score: np.ndarray,
    cand: np.ndarray,
    chosen: np.ndarray,
    secondary: np.ndarray | None = None,
    seed: int | None = 0,
) -> tuple[np.ndarray, np.ndarray, CutoffTies]:
    """Re-choose the cells of a tie that straddles the cut; spatially neutral.

    Parameters
    ----------
    score : ndarray of shape (n,)
        Score of every row (NaN: no score).
    cand : ndarray of int
        Rows of the rankable candidates (chosen ones included).
    chosen : ndarray of int
        Rows chosen by the estimator, best first; a top-``len(chosen)`` of ``score``.
    secondary : ndarray of shape (n,), optional
        A second score for the rows (higher first) that orders a tie before the draw.
    seed : int or None
        Seed of the permutation that orders what is still tied.

    Returns
    -------
    chosen : ndarray of int
        The chosen rows, best first (unchanged unless a tie straddles the cut).
    runners_up : ndarray of int
        The tied rows left out, in tie-break order (empty when none).
    ties : CutoffTies

    Examples
    --------
    >>> s = np.array([3.0, 1.0, 1.0, 1.0, 0.0])
    >>> new, rest, ties = break_cutoff_ties(s, np.arange(5), np.array([0, 1]))
    >>> int(new[0]), ties.n_tied, ties.n_tied_chosen, ties.n_drawn, len(rest)
    (0, 3, 1, 1, 2)
    """
    chosen = np.asarray(chosen, dtype=np.int64)
    cand = np.asarray(cand, dtype=np.int64)
    if chosen.size == 0 or cand.size == 0:
        return chosen, np.zeros(0, dtype=np.int64), CutoffTies()
    width = tie_width(score[cand])
    level = tie_levels(score[cand], width)
    flat = bool(np.unique(level).size == 1)
    last = tie_levels(score[chosen[-1:]], width)[0]
    group = cand[level == last]
    is_chosen = np.isin(group, chosen)
    m = int(is_chosen.sum())
    others = np.setdiff1d(cand, chosen)
    above = others[np.isin(others, group, invert=True)]
    if group.size == m or (level[np.isin(cand, above)] > last).any():
        # no tie across the cut, or not a top-k of the score: the estimator's choice stands
        return chosen, np.zeros(0, dtype=np.int64), CutoffTies(group.size, m, 0, flat)
    group = np.sort(group)
    perm = np.random.default_rng(seed).permutation(group.size)
    sec = np.zeros(group.size) if secondary is None else -tie_levels(secondary[group])
    order = group[np.lexsort((perm, sec))]
    keep, rest = order[:m], order[m:]
    drawn = m if secondary is None else _drawn(tie_levels(secondary[group]), group, keep, rest)
    new = np.concatenate([chosen[~np.isin(chosen, group)], keep])
    return new, rest, CutoffTies(group.size, m, drawn, flat)


def rank_selection(
    s: np.ndarray, pick: np.ndarray, seed: int | None, *, top: bool = True
) -> tuple[np.ndarray, np.ndarray, CutoffTies]:
    """A budget's selection of candidates scored ``s``, its tie at the cut broken, the ranking.

    With ``top`` (``pick`` is a cell budget's top ``k`` and no boundary penalty chose it) a tie
    across the cut is broken by :func:`break_cutoff_ties`, seeded with ``seed``, without a
    secondary score, and the ranking lists the chosen, the tie's runners-up, then the other
    candidates by score, then position; otherwise (a money budget, a boundary penalty)
    ``pick`` stands, no tie is reported and the ranking is by score, then position.

    Parameters
    ----------
    s : ndarray of shape (m,)
        The candidates' scores.
    pick : ndarray of int
        Positions of the chosen candidates, best first.
    seed : int or None
        Seed of the permutation that orders the tie; None is 0, so that a fit stays a
        function of its input.
    top : bool, default=True
        Whether ``pick`` is a top ``k`` whose tie at the cut the rule breaks.

    Returns
    -------
    pick : ndarray of int
        Positions of the chosen candidates, best first.
    order : ndarray of int
        Positions of every candidate, best first.
    ties : CutoffTies

    Examples
    --------
    >>> s = np.array([3.0, 1.0, 1.0, 1.0, 0.0])
    >>> pick, order, ties = rank_selection(s, np.array([0, 1]), 0)
    >>> len(pick), ties.n_tied, ties.n_drawn, sorted(order[2:4].tolist() + pick[1:].tolist())
    (2, 3, 1, [1, 2, 3])
    >>> rank_selection(s, np.array([0, 1]), 0, top=False)[1].tolist()
    [0, 1, 2, 3, 4]
    """
    pick = np.asarray(pick, dtype=np.int64)
    order = np.lexsort((np.arange(s.size), -s))
    if not top:
        return pick, order, CutoffTies()
    seed = 0 if seed is None else seed
    pick, runners, ties = break_cutoff_ties(s, np.arange(s.size), pick, None, seed)
    first = np.concatenate([pick, runners])
    return pick, np.concatenate([first, order[~np.isin(order, first)]]), ties


def _drawn(s_lev: np.ndarray, group: np.ndarray, keep: np.ndarray, rest: np.ndarray) -> int:
    """Kept cells the draw decided: those at the last kept cell's secondary level, when a
    cell left out shares it (the part of the tie the secondary score did not separate)."""
    cut = s_lev[np.searchsorted(group, keep[-1])] if keep.size else np.inf
    at_cut = group[s_lev == cut]
    return int(np.isin(keep, at_cut).sum()) if np.isin(rest, at_cut).any() else 0


def tie_forest(X: np.ndarray, y: np.ndarray, seed: int | None, n_jobs: int | None) -> object:
    """:class:`ForestScore`'s random forest fitted on the labelled rows' raw features (the
    tie-break forest when no member of the final fit is ``stack`` or ``forest``), on
    ``n_jobs`` threads.

    It predicts on one thread (:class:`ForestScore` leaves it so): a forest's threads add
    the trees' votes in the order they finish, which can change the last bits of a
    probability and so the order of two candidates whose probabilities are equal.
    """
    return ForestScore(random_state=seed, n_jobs=n_jobs).fit(X, y).forest_


def forest_step(steps: list) -> ForestScore | None:
    """The :class:`ForestScore` among a feature map's fitted steps (the ``stack`` map's)."""
    return next((step for _, step in steps if isinstance(step, ForestScore)), None)


def start_tie_forest(
    tie_break: str, steps: list, X: np.ndarray, y: np.ndarray, seed: int | None, jobs: int
) -> Forked | None:
    """Start the tie-break forest in a forked child while TTK fits, where it will be needed
    (``tie_break="forest"``, no forest among ``steps``) and a second processor is allowed
    (``jobs`` > 1); None otherwise. The child fits on one thread: it shares the processors."""
    if tie_break != "forest" or forest_step(steps) is not None or jobs < 2:
        return None
    return fork_call(tie_forest, X, y, seed, 1)


def secondary_scores(
    tie_break: str,
    s: np.ndarray,
    steps: list,
    Z: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    *,
    seed: int | None = None,
    n_jobs: int | None = None,
    forest: Forked | None = None,
) -> np.ndarray:
    """The candidates' secondary score, from the labelled rows; NaN for candidates whose
    score ``s`` no other candidate's comes near (two tie widths: nothing to order).

    Parameters
    ----------
    tie_break : {"forest", "logistic"}
        ``"forest"``: the presence probability of the random forest of ``steps`` (fed as
        in the map) or else of :func:`tie_forest` on the raw features; ``"logistic"``: the
        log-odds of a balanced logistic regression on the mapped features ``Z``.
    s : ndarray
        The candidates' scores (rows of ``y == -1``, in order).
    steps : list
        A fitted feature map's steps; ``Z`` its output for every row.
    X, y : ndarray
        The raw rows and their labels (-1: candidate).
    seed, n_jobs : int or None
        Of :func:`tie_forest`, when one is fitted here.
    forest : reserve.fork.Forked or None
        The tie-break forest started by :func:`start_tie_forest`, if it was.
    """
    need = near_another(s, 2 * tie_width(s))
    out = np.full(s.size, np.nan)
    if not need.any():
        if forest is not None:
            forest.cancel()
        return out
    lab, rows = np.flatnonzero(y != -1), np.flatnonzero(y == -1)[need]
    if tie_break == "logistic":
        lr = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000)
        out[need] = lr.fit(Z[lab], y[lab]).decision_function(Z[rows])
        return out
    Xr = X[rows]
    for _, step in steps:  # the stack map's own forest, fed as in the map
        if isinstance(step, ForestScore):
            out[need] = step.forest_.predict_proba(Xr)[:, -1]
            return out
        Xr = step.transform(Xr)
    rf = tie_forest(X, y, seed, n_jobs) if forest is None else forest.result()
    out[need] = rf.predict_proba(X[rows])[:, -1]  # on the raw features
    return out


def rank_with_ties(s: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """The candidates' order, best first: by score level, then secondary score, then position.

    Examples
    --------
    >>> rank_with_ties(np.array([1.0, 2.0, 1.0]), np.array([0.1, np.nan, 0.9])).tolist()
    [1, 2, 0]
    """
    level = tie_levels(s)
    return np.lexsort((np.arange(s.size), -secondary, -level))


def select_with_ties(
    s: np.ndarray,
    secondary: np.ndarray,
    k: int,
    seed: int | None,
    cost: np.ndarray | None = None,
    budget: float | None = None,
) -> tuple[np.ndarray, np.ndarray, CutoffTies]:
    """The selection and ranking of candidates scored ``s``, ties broken by the one rule.

    The ranking is by score level, then ``secondary``, then position
    (:func:`rank_with_ties`). With a cell budget the top ``k`` are chosen and a tie across the
    cut is broken by :func:`break_cutoff_ties` (the secondary score's levels, then a
    permutation seeded with ``seed``); the ranking then lists the chosen, the tie's runners-up
    and the rest. With ``cost`` the ranking is walked within ``budget``
    (:func:`reserve.solvers.budget_select`) and no tie is reported.

    Returns
    -------
    pick : ndarray of int
        Positions of the chosen candidates, best first.
    order : ndarray of int
        Positions of every candidate, best first.
    ties : CutoffTies

    Examples
    --------
    >>> s = np.array([3.0, 1.0, 1.0, 0.0])
    >>> pick, order, ties = select_with_ties(s, np.array([np.nan, 0.2, 0.7, np.nan]), 2, 0)
    >>> pick.tolist(), order.tolist(), ties.n_tied, ties.n_drawn
    ([0, 2], [0, 2, 1, 3], 2, 0)
    """
    order = rank_with_ties(s, secondary)
    if cost is not None:
        rank_score = np.empty(s.size)
        rank_score[order] = -np.arange(s.size, dtype=np.float64)
        return budget_select(rank_score, cost, float(budget)), order, CutoffTies()
    pick, runners, ties = break_cutoff_ties(s, np.arange(s.size), order[:k], secondary, seed)
    first = np.concatenate([pick, runners])
    return pick, np.concatenate([first, order[~np.isin(order, first)]]), ties
