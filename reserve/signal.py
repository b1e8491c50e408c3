"""Ties at the budget's cut and whether the fitted model ranks anything at all.

Two questions a planner must not have to ask the code:

* **Which of several equally scored cells is bought?** When more candidates share the score
  of the last chosen cell than the budget has places left, the choice among them is not the
  model's. :func:`break_cutoff_ties` makes it in a documented, spatially neutral way: first by
  the estimator's secondary score when it has one (AutoTTK's forest presence probability), then by a
  random permutation seeded with the run's ``seed``, never by cell id (ids follow the grid, so
  an id order picks a strip along one edge of the region). Without a tie across the cut the
  selection is the estimator's, unchanged.
* **Does the model rank anything?** :func:`assess_signal` says ``"none"`` when the candidates'
  scores are all tied or every chosen cell was drawn from a tie, ``"weak"`` when part of the
  selection was drawn from a tie or the cross-validated precision is no better than the
  training cells' prevalence, else ``"ok"``, with a one-line note naming the fix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TIE_RTOL", "CutoffTies", "assess_signal", "break_cutoff_ties"]

#: Relative width of a tie in the score (the same as AutoTTK's).
TIE_RTOL = 1e-7

#: What gives a selection meaning, named in every warning.
FIX = (
    "use features that vary between cells (a finer land-cover raster, its --legend, an "
    "elevation raster, larger --cell-size) or more surveyed public land"
)


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


def _levels(values: np.ndarray) -> np.ndarray:
    tol = TIE_RTOL * max(1.0, float(np.nanmax(np.abs(values), initial=0.0)))
    return np.round(np.nan_to_num(values, nan=-np.inf) / tol)


def break_cutoff_ties(
    score: np.ndarray, cand: np.ndarray, chosen: np.ndarray,
    secondary: np.ndarray | None = None, seed: int | None = 0,
) -> tuple[np.ndarray, np.ndarray, CutoffTies]:  # fmt: skip
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
    tol = TIE_RTOL * max(1.0, float(np.nanmax(np.abs(score[cand]), initial=0.0)))
    level = np.round(np.nan_to_num(score[cand], nan=-np.inf) / tol)
    flat = bool(np.unique(level).size == 1)
    last = np.round(np.nan_to_num(score[chosen[-1]], nan=-np.inf) / tol)
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
    sec = np.zeros(group.size) if secondary is None else -_levels(secondary[group])
    order = group[np.lexsort((perm, sec))]
    keep, rest = order[:m], order[m:]
    if secondary is None:
        drawn = m
    else:  # only the part of the tie the secondary score did not separate is a draw
        s_lev = _levels(secondary[group])
        # the last kept cell's level among the group's (one tie width for all of them)
        cut = s_lev[np.searchsorted(group, keep[-1])] if m else np.inf
        drawn = int(np.isin(keep, group[s_lev == cut]).sum()) if (
            np.isin(rest, group[s_lev == cut]).any()) else 0  # fmt: skip
    new = np.concatenate([chosen[~np.isin(chosen, group)], keep])
    return new, rest, CutoffTies(group.size, m, drawn, flat)


def assess_signal(
    ties: CutoffTies, k_free: int, cv_precision: float, prevalence: float, seed: int | None
) -> tuple[str, str]:
    """``("ok" | "weak" | "none", note)``: does the fitted model rank the candidates?

    Parameters
    ----------
    ties : CutoffTies
        From :func:`break_cutoff_ties`.
    k_free : int
        Cells the estimator chose (the budget less locked-in cells).
    cv_precision : float
        Cross-validated precision of the chosen model (NaN when not measured).
    prevalence : float
        Share of the training cells with a detection.
    seed : int or None
        The run's seed (named in the note).

    Returns
    -------
    (str, str)
        The verdict and a one-line note ('' for "ok").

    Examples
    --------
    >>> assess_signal(CutoffTies(500, 20, 20, True), 20, float("nan"), 0.1, 0)[0]
    'none'
    >>> assess_signal(CutoffTies(1, 1, 0, False), 20, 0.5, 0.1, 0)
    ('ok', '')
    """
    if ties.flat:
        return "none", (
            f"the habitat model ranks nothing: every candidate has the same score, so the "
            f"{k_free} cells are a random draw (seed {seed}); {FIX}"
        )
    if ties.n_drawn and ties.n_tied_chosen >= k_free:
        return "none", (
            f"the habitat model ranks nothing here: {ties.n_tied} candidates tie at the top "
            f"score and all {k_free} cells are a random draw among them (seed {seed}); {FIX}"
        )
    if ties.n_drawn:
        return "weak", (
            f"{ties.n_tied} candidates tie at the last chosen cell's score; {ties.n_drawn} of "
            f"the {k_free} cells are a random draw among them (seed {seed}); {FIX}"
        )
    if np.isfinite(cv_precision) and np.isfinite(prevalence) and cv_precision <= prevalence:
        return "weak", (
            f"weak signal: the cross-validated precision {cv_precision:.2f} is no better than "
            f"the share of surveyed training cells with a detection ({prevalence:.2f}); {FIX}"
        )
    return "ok", ""
