"""Ties at the budget's cut and whether the fitted model ranks anything at all.

Two questions a planner must not have to ask the code:

* **Which of several equally scored cells is bought?** When more candidates share the score
  of the last chosen cell than the budget has places left, the choice among them is not the
  model's. :func:`break_cutoff_ties` (the one rule, :mod:`reserve.solvers.ties`, re-exported
  here) makes it in a documented, spatially neutral way: by a secondary score when the
  estimator has one, then by a random permutation seeded with the run's ``seed`` (the
  estimator's ``random_state``), never by cell id. Every estimator breaks its ties once, as
  it selects, and reports them as ``cutoff_ties_``; the selection's tables report them.
* **Does the model rank anything?** :func:`assess_signal` decides ``"ok"``, ``"weak"`` or
  ``"none"`` from intervals, the evidence about the land being bought first (the private-land
  check of :mod:`reserve.confidence`), then cross-validation on the training cells, and says
  which evidence decided and what would help.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reserve.confidence import LEVEL, CrossValidation, PrivateCheck
from reserve.solvers.ties import TIE_RTOL, CutoffTies, break_cutoff_ties

__all__ = [
    "MIN_TRAIN_CELLS",
    "MIN_TRAIN_POSITIVE",
    "TIE_RTOL",
    "CutoffTies",
    "Verdict",
    "assess_signal",
    "break_cutoff_ties",
    "too_few_training_cells",
]

#: What gives a selection meaning, named in every warning.
FIX = (
    "use features that vary between cells (a finer land-cover raster, its --legend, an "
    "elevation raster, larger --cell-size) or more surveyed public land"
)

#: What would help a model that does not rank the land, named in every weak or none note.
HELP = (
    "what would help: more surveyed public land, other habitat features (elevation, a finer "
    "land cover), larger --cell-size, or --learn-from surveyed --effort"
)
#: The same, for a model that already learned from the surveyed private cells.
HELP_LEARNED = (
    "what would help: more surveys, other habitat features (elevation, a finer land cover) or "
    "larger --cell-size"
)

#: Fewest training cells, and fewest with a detection, for cross-validation to judge a model.
MIN_TRAIN_CELLS = 20
MIN_TRAIN_POSITIVE = 5


def too_few_training_cells(n_train: int, n_positive: int) -> bool:
    """Whether the training cells are too few for cross-validation to judge any model.

    Examples
    --------
    >>> too_few_training_cells(35, 9), too_few_training_cells(10, 3)
    (False, True)
    """
    return n_train < MIN_TRAIN_CELLS or min(n_positive, n_train - n_positive) < MIN_TRAIN_POSITIVE


@dataclass(frozen=True)
class Verdict:
    """Does the fitted model rank the candidates, and on what evidence.

    Attributes
    ----------
    signal : str
        ``"ok"``, ``"weak"`` or ``"none"``.
    evidence : str
        What decided it: ``"private-land check"``, ``"cross-validation"``, ``"ties"``,
        ``"too few training cells"`` or ``"nothing measured"``.
    reason : str
        One sentence: the evidence and its interval.
    note : str
        The warning line for ``"weak"`` and ``"none"`` (the reason and what would help);
        '' for ``"ok"``.
    """

    signal: str
    evidence: str
    reason: str
    note: str = ""


def _ties_verdict(ties: CutoffTies, k_free: int, seed: int | None) -> Verdict | None:
    """The verdict when a tie at the cut decides (part of) the selection, else None."""
    if ties.flat:
        reason = (
            f"the habitat model ranks nothing: every candidate has the same score, so "
            f"the {k_free} cells are a random draw (seed {seed})"
        )
        return Verdict("none", "ties", reason, f"{reason}; {FIX}")
    if ties.n_drawn and ties.n_tied_chosen >= k_free:
        reason = (
            f"the habitat model ranks nothing here: {ties.n_tied} candidates tie at the "
            f"top score and all {k_free} cells are a random draw among them "
            f"(seed {seed})"
        )
        return Verdict("none", "ties", reason, f"{reason}; {FIX}")
    return None


def _check_verdict(check: PrivateCheck, hint: str) -> Verdict:
    """The verdict of the private-land check (it is available)."""
    pct = round(LEVEL * 100)
    reason = (
        f"on {check.n_surveyed} surveyed private cells ({check.n_detected} with a detection), "
        f"the ranking's AUC within effort strata is {check.auc:.2f} ({pct}% interval "
        f"{check.auc_low:.2f}-{check.auc_high:.2f}; a blind pick has 0.50)"
    )
    if check.auc_low > 0.5:
        return Verdict("ok", "private-land check", reason)
    if check.auc_high < 0.5:
        return Verdict(
            "none",
            "private-land check",
            reason,
            (
                f"the habitat model ranks the surveyed private land worse than a blind pick: "
                f"{reason}; {hint}"
            ),
        )
    return Verdict(
        "weak",
        "private-land check",
        reason,
        (
            f"weak signal: the habitat model does not rank the surveyed private land better than "
            f"a blind pick: {reason}; {hint}"
        ),
    )


def _cv_verdict(cv: CrossValidation, n_train: int, n_positive: int, hint: str) -> Verdict:
    """The verdict of cross-validation on the training cells (no private-land check)."""
    if too_few_training_cells(n_train, n_positive):
        reason = (
            f"{n_train} training cells ({n_positive} with a detection) are too few to judge any "
            f"habitat model (it takes at least {MIN_TRAIN_CELLS} cells, {MIN_TRAIN_POSITIVE} "
            "with and without a detection), and no surveyed private cells check the ranking"
        )
        return Verdict("none", "too few training cells", reason, f"{reason}; {hint}")
    if not cv.measured:
        reason = "nothing measured how well the model ranks (no cross-validation, no surveyed "
        reason += "private cells)"
        return Verdict(
            "weak", "nothing measured", reason, f"weak signal: {reason}; use --model auto or --C cv"
        )
    pct = round(LEVEL * 100)
    interval = (
        f" ({pct}% interval {cv.low:.2f}-{cv.high:.2f})"
        if np.isfinite(cv.low)
        else " (one fold: no interval)"
    )
    reason = (
        f"in cross-validation on the {n_train} training cells, {cv.precision:.2f} of the "
        f"held-out picks had a detection{interval} against {cv.blind:.2f} for a blind pick"
    )
    if np.isfinite(cv.low) and cv.low > cv.blind:
        return Verdict("ok", "cross-validation", reason)
    return Verdict(
        "weak",
        "cross-validation",
        reason,
        (
            f"weak signal: the cross-validated precision is not clearly above a blind pick's: "
            f"{reason}; {hint}"
        ),
    )


def assess_signal(
    ties: CutoffTies,
    k_free: int,
    check: PrivateCheck,
    cv: CrossValidation,
    n_train: int,
    n_positive: int,
    seed: int | None,
    learned: bool = False,
) -> Verdict:
    """Does the fitted model rank the candidates? Intervals decide, the land being bought first.

    In order: a tie that decides every chosen cell gives ``"none"``; then the private-land
    check (:func:`reserve.confidence.private_land_check`), when the surveyed private cells allow
    one: ``"ok"`` when the lower end of its AUC interval is above a blind pick's 0.5,
    ``"none"`` when the upper end is below, else ``"weak"``; without it, too few training
    cells (fewer than :data:`MIN_TRAIN_CELLS`, or fewer than :data:`MIN_TRAIN_POSITIVE` with
    or without a detection) give ``"none"``, and cross-validation gives ``"ok"`` only when
    the lower end of its interval is above the training cells' prevalence. A tie that decides
    part of the selection turns ``"ok"`` into ``"weak"``, and so does a tie that holds every
    chosen cell when a secondary score, not the draw, chose among them (the reason says so
    whatever the verdict).

    Parameters
    ----------
    ties : CutoffTies
        From :func:`break_cutoff_ties`.
    k_free : int
        Cells the estimator chose (the budget less locked-in cells).
    check : reserve.confidence.PrivateCheck
        The private-land check.
    cv : reserve.confidence.CrossValidation
        The cross-validated precision of the chosen model.
    n_train, n_positive : int
        Training cells, and those with a detection.
    seed : int or None
        The run's seed (named in the note).
    learned : bool
        The model learned from the surveyed private cells (``learn_from="surveyed"``): the
        note does not suggest it.

    Returns
    -------
    Verdict

    Examples
    --------
    >>> from reserve.confidence import CrossValidation, PrivateCheck
    >>> none, cv = PrivateCheck(False), CrossValidation()
    >>> flat, clear = CutoffTies(500, 20, 20, True), CutoffTies()
    >>> assess_signal(flat, 20, none, cv, 50, 9, 0).signal
    'none'
    >>> assess_signal(clear, 20, none, cv, 10, 3, 0).evidence
    'too few training cells'
    >>> good = PrivateCheck(True, n_surveyed=300, n_detected=60, auc=0.7, auc_low=0.65,
    ...                     auc_high=0.75)
    >>> assess_signal(clear, 20, good, cv, 10, 3, 0).signal
    'ok'
    """
    tied = _ties_verdict(ties, k_free, seed)
    if tied is not None:
        return tied
    hint = HELP_LEARNED if learned else HELP
    if check.available:
        verdict = _check_verdict(check, hint)
    else:
        verdict = _cv_verdict(cv, n_train, n_positive, hint)
    if ties.n_drawn and verdict.signal == "ok":
        reason = (
            f"{ties.n_tied} candidates tie at the last chosen cell's score; "
            f"{ties.n_drawn} of the {k_free} cells are a random draw among them "
            f"(seed {seed})"
        )
        return Verdict("weak", "ties", reason, f"{reason}; {FIX}")
    if _ordered_by_secondary(ties, k_free):
        reason = (
            f"{ties.n_tied} candidates tie at the top score (the habitat model does not order "
            f"them) and all {k_free} cells were chosen among them by the tie-break's secondary "
            f"score, not by the habitat model; {verdict.reason}"
        )
        signal = "weak" if verdict.signal == "ok" else verdict.signal
        return Verdict(signal, "ties", reason, f"{reason}; {FIX}")
    return verdict


def _ordered_by_secondary(ties: CutoffTies, k_free: int) -> bool:
    """Whether every chosen cell ties at the cut with a cell left out and the secondary score,
    not the draw, chose among them (AutoTTK's tie-break): the model's scores chose none."""
    return not ties.n_drawn and ties.n_tied_chosen >= k_free > 0 and ties.n_tied > k_free
