"""How sure a selection is, earned on the surveyed private land: the private-land check.

The candidates of a run are private cells, and birders survey some of them: an ingest already
holds their labels (detected on at least one checklist, or not) and their checklist counts.
The fit never sees those labels (with ``learn_from="public"``), so they are an independent
check of the ranking on the very land being bought. :func:`private_land_check` scores the
ranking against them.

Effort
------
"Detected on at least one checklist" grows with the number of checklists, so a ranking that
follows birder effort would look good for the wrong reason. Every figure here is therefore
computed **within effort strata**: cells are grouped by half-octaves of their checklist count
(1, 2, 3, 4-5, 6-7, 8-11, 12-15, 16-22, ... checklists, :func:`effort_strata`) and compared
only with cells of their own stratum:

* the **stratified AUC** is the Mann-Whitney AUC of each stratum (a detected cell against a
  cell without detection of the same stratum), averaged with weights equal to each stratum's
  number of such pairs; a blind pick has 0.5;
* the **stratified precision at a share** ``q`` takes the top ``q`` of every stratum by score
  (the last cell fractionally) and returns the share of detected cells among them; a blind
  pick has the surveyed cells' prevalence exactly, and so does a ranking by effort.

Intervals are percentile intervals of a bootstrap that resamples the surveyed cells within
their strata (:data:`N_BOOT` replicates, level :data:`LEVEL`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "LEVEL",
    "MIN_CHECK_CLASS",
    "N_BOOT",
    "TOP_SHARE",
    "CrossValidation",
    "PrivateCheck",
    "checkable",
    "cv_interval",
    "effort_strata",
    "private_land_check",
    "stratified_auc",
    "stratified_precision",
]

#: Confidence level of every interval reported.
LEVEL = 0.90
#: Bootstrap replicates of the private-land check.
N_BOOT = 1000
#: The second share of the check: the top 5 % of the surveyed private cells.
TOP_SHARE = 0.05
#: Fewest detected, and fewest undetected, surveyed private cells in comparable strata for the
#: check to be reported at all.
MIN_CHECK_CLASS = 5


def effort_strata(n_checklists: np.ndarray) -> np.ndarray:
    """The effort stratum of each cell: ``floor(2 log2(n_checklists))`` (half-octaves).

    Half-octaves rather than octaves: on the Mississippi walkthrough's 327 surveyed private
    cells, ranking by ``log1p(n_checklists)`` scores a stratified AUC of 0.54 with octave
    strata and 0.51 with half-octaves (``docs/confidence.md``).

    Parameters
    ----------
    n_checklists : array-like of shape (n,)
        Checklists in each surveyed cell (at least 1).

    Returns
    -------
    ndarray of int of shape (n,)

    Examples
    --------
    >>> effort_strata(np.array([1, 2, 3, 4, 5, 6, 8, 12, 16])).tolist()
    [0, 2, 3, 4, 4, 5, 6, 7, 8]
    """
    n = np.maximum(np.asarray(n_checklists, dtype=np.float64), 1.0)
    return np.floor(2.0 * np.log2(n) + 1e-9).astype(np.int64)


def _weights(strata: np.ndarray, s: int, boot: dict | None) -> np.ndarray:
    """Each cell of stratum ``s``: 1 (the sample itself) or its bootstrap counts (B, m)."""
    m = int((strata == s).sum())
    return np.ones((1, m)) if boot is None else boot[s]


def _strata_auc(
    score: np.ndarray, label: np.ndarray, strata: np.ndarray, boot: dict | None
) -> np.ndarray:
    """Stratified AUC of the sample (``boot`` None) or of each bootstrap replicate.

    A replicate weighs each cell by how often it was drawn, so that no replicate is sorted:
    within a stratum the cells are sorted by score once, grouped into ties, and a detected
    cell's wins are the undetected weight below its group plus half of its group's.
    """
    u_sum, pairs = 0.0, 0.0
    for s in np.unique(strata):
        rows = np.flatnonzero(strata == s)
        perm = np.argsort(score[rows], kind="stable")
        order = rows[perm]
        starts = np.flatnonzero(np.r_[True, np.diff(score[order]) != 0])
        w = _weights(strata, s, boot)[:, perm].astype(np.float64)
        pos = label[order].astype(bool)
        w_pos = np.add.reduceat(w * pos, starts, axis=1)
        w_neg = np.add.reduceat(w * ~pos, starts, axis=1)
        below = np.cumsum(w_neg, axis=1) - w_neg
        u_sum = u_sum + (w_pos * (below + 0.5 * w_neg)).sum(axis=1)
        pairs = pairs + w_pos.sum(axis=1) * w_neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, u_sum / np.where(pairs > 0, pairs, 1.0), np.nan)


def _strata_precision(
    score: np.ndarray, label: np.ndarray, strata: np.ndarray, share: float, boot: dict | None
) -> np.ndarray:
    """Stratified precision at ``share`` of the sample (``boot`` None) or of each replicate:
    the cells of a stratum by decreasing score (ties in row order), weighted by their draws,
    taken until ``share`` of the stratum's weight, the last one fractionally."""
    hits, taken = 0.0, 0.0
    for s in np.unique(strata):
        rows = np.flatnonzero(strata == s)
        rank = np.argsort(-score[rows], kind="stable")
        w = _weights(strata, s, boot)[:, rank].astype(np.float64)
        lab = label[rows[rank]].astype(np.float64)
        m = share * rows.size  # weight taken from this stratum
        before = np.cumsum(w, axis=1) - w
        part = np.clip(m - before, 0.0, w)
        hits = hits + part @ lab
        taken = taken + m
    return hits / taken


def _check_inputs(
    score: np.ndarray, label: np.ndarray, n_checklists: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    score = np.asarray(score, dtype=np.float64)
    label = np.asarray(label)
    strata = effort_strata(n_checklists)
    if not (score.shape == label.shape == strata.shape) or score.ndim != 1:
        raise ValueError("score, label and n_checklists must be 1-D arrays of one length")
    return score, label.astype(np.int64), strata


def stratified_auc(score: np.ndarray, label: np.ndarray, n_checklists: np.ndarray) -> float:
    """AUC of ``score`` against ``label`` within effort strata (0.5: a blind pick).

    Parameters
    ----------
    score : array-like of shape (n,)
        Higher ranks first.
    label : array-like of shape (n,)
        1 detected, 0 not detected.
    n_checklists : array-like of shape (n,)
        Checklists per cell, which define the strata (:func:`effort_strata`).

    Returns
    -------
    float
        NaN when no stratum holds both a detected and an undetected cell.

    Examples
    --------
    Effort alone ranks nothing within strata:

    >>> n = np.array([1, 1, 8, 8, 8, 8])
    >>> lab = np.array([0, 0, 1, 1, 0, 0])
    >>> stratified_auc(n.astype(float), lab, n)
    0.5
    >>> stratified_auc(np.array([0, 0, 2, 3, 1, 0.5]), lab, n)
    1.0
    """
    score, label, strata = _check_inputs(score, label, n_checklists)
    return float(_strata_auc(score, label, strata, None)[0])


def stratified_precision(
    score: np.ndarray, label: np.ndarray, n_checklists: np.ndarray, share: float
) -> float:
    """Share of detected cells in the top ``share`` of every effort stratum.

    Parameters
    ----------
    score, label, n_checklists
        As in :func:`stratified_auc`.
    share : float
        In (0, 1]: the top share of each stratum taken (the last cell fractionally).

    Returns
    -------
    float
        A blind pick, and a ranking by effort, get the cells' prevalence.

    Examples
    --------
    >>> n = np.array([1, 1, 8, 8])
    >>> lab = np.array([0, 1, 1, 0])
    >>> stratified_precision(np.array([0.0, 1.0, 3.0, 2.0]), lab, n, 0.5)
    1.0
    >>> stratified_precision(n.astype(float), lab, n, 0.5)  # ties keep row order
    0.5
    """
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1]; received {share!r}")
    score, label, strata = _check_inputs(score, label, n_checklists)
    return float(_strata_precision(score, label, strata, share, None)[0])


@dataclass(frozen=True)
class PrivateCheck:
    """The ranking scored against the surveyed private cells (effort strata).

    Attributes
    ----------
    available : bool
        False when too few surveyed private cells were detected or not (``reason`` says why);
        every figure is then NaN.
    reason : str
        Why the check is not available ('' when it is).
    n_surveyed, n_detected : int
        Surveyed candidate cells, and those with a detection.
    auc, auc_low, auc_high : float
        Stratified AUC and its interval (a blind pick: 0.5).
    share : float
        The selection's share of the candidates (``k / n_candidates``).
    precision_share, precision_share_low, precision_share_high : float
        Stratified precision at ``share``, with its interval.
    precision_top, precision_top_low, precision_top_high : float
        Stratified precision at :data:`TOP_SHARE`, with its interval.
    blind : float
        A blind pick's precision: the surveyed private cells' prevalence.
    n_strata : int
        Effort strata with both detected and undetected cells.
    """

    available: bool
    reason: str = ""
    n_surveyed: int = 0
    n_detected: int = 0
    auc: float = float("nan")
    auc_low: float = float("nan")
    auc_high: float = float("nan")
    share: float = float("nan")
    precision_share: float = float("nan")
    precision_share_low: float = float("nan")
    precision_share_high: float = float("nan")
    precision_top: float = float("nan")
    precision_top_low: float = float("nan")
    precision_top_high: float = float("nan")
    blind: float = float("nan")
    n_strata: int = 0


def _bootstrap_counts(strata: np.ndarray, n_boot: int, seed: int | None) -> dict:
    """Per stratum, ``(n_boot, m)``: how often each of its ``m`` cells is drawn, when ``m``
    cells are drawn with replacement (one row per replicate)."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in np.unique(strata):
        m = int((strata == s).sum())
        drawn = rng.integers(0, m, size=(n_boot, m)) + m * np.arange(n_boot)[:, None]
        out[s] = np.bincount(drawn.ravel(), minlength=n_boot * m).reshape(n_boot, m)
    return out


def _interval(values: np.ndarray) -> tuple[float, float]:
    tail = (1.0 - LEVEL) / 2.0
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.quantile(finite, [tail, 1.0 - tail])
    return float(lo), float(hi)


def _mixed_strata(label: np.ndarray, strata: np.ndarray) -> list[int]:
    """The effort strata that hold both a detected and an undetected cell."""
    return [s for s in np.unique(strata) if 0 < label[strata == s].sum() < (strata == s).sum()]


def checkable(label: np.ndarray, n_checklists: np.ndarray) -> bool:
    """Whether surveyed cells with these labels and efforts allow the private-land check.

    The check compares detected with undetected cells of one effort stratum, so it needs
    at least :data:`MIN_CHECK_CLASS` of each in strata that hold both.

    Parameters
    ----------
    label : array-like of shape (n,)
        1 detected, 0 surveyed without a detection.
    n_checklists : array-like of shape (n,)
        Checklists in each cell (at least 1).

    Returns
    -------
    bool

    Examples
    --------
    >>> checkable(np.array([1, 0] * 5), np.full(10, 3))
    True
    >>> checkable(np.array([1, 0] * 5), np.array([1, 9] * 5))
    False
    """
    label = np.asarray(label).astype(np.int64)
    strata = effort_strata(n_checklists)
    paired = np.isin(strata, _mixed_strata(label, strata))
    return min(int(label[paired].sum()), int((1 - label[paired]).sum())) >= MIN_CHECK_CLASS


def private_land_check(
    score: np.ndarray,
    label: np.ndarray,
    n_checklists: np.ndarray,
    share: float,
    *,
    n_boot: int = N_BOOT,
    seed: int | None = 0,
) -> PrivateCheck:
    """Score a ranking against the surveyed private cells, within effort strata.

    Parameters
    ----------
    score : array-like of shape (n,)
        The run's score of each surveyed candidate (higher first).
    label : array-like of shape (n,)
        1 detected, 0 surveyed without a detection.
    n_checklists : array-like of shape (n,)
        Checklists in each cell (at least 1).
    share : float
        The selection's share of the candidates, in (0, 1].
    n_boot : int
        Bootstrap replicates of the intervals.
    seed : int or None
        Seed of the bootstrap.

    Returns
    -------
    PrivateCheck

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> n = rng.integers(1, 20, 400)
    >>> lab = (rng.random(400) < 0.3).astype(int)
    >>> check = private_land_check(lab + rng.normal(0, 0.5, 400), lab, n, 0.05)
    >>> check.available, check.auc_low > 0.5, round(check.blind, 2)
    (True, True, 0.27)
    """
    score, label, strata = _check_inputs(score, label, n_checklists)
    n, n_det = int(label.size), int(label.sum())
    mixed = _mixed_strata(label, strata)
    if not checkable(label, n_checklists):
        reason = (
            f"not available: {n} surveyed private cells ({n_det} with a detection); it needs "
            f"at least {MIN_CHECK_CLASS} detected and {MIN_CHECK_CLASS} undetected cells of "
            "comparable survey effort"
        )
        return PrivateCheck(False, reason, n, n_det)
    boot = _bootstrap_counts(strata, n_boot, seed)
    auc = _strata_auc(score, label, strata, None)[0]
    out = {"auc": (auc, *_interval(_strata_auc(score, label, strata, boot)))}
    for key, q in (("precision_share", share), ("precision_top", TOP_SHARE)):
        point = _strata_precision(score, label, strata, q, None)[0]
        out[key] = (point, *_interval(_strata_precision(score, label, strata, q, boot)))
    figures = {
        f"{key}{end}": float(v)
        for key, vals in out.items()
        for end, v in zip(("", "_low", "_high"), vals, strict=True)
    }
    return PrivateCheck(
        True, "", n, n_det, share=float(share), blind=n_det / n, n_strata=len(mixed), **figures
    )


@dataclass(frozen=True)
class CrossValidation:
    """Held-out precision of the chosen model in cross-validation on the training cells.

    Attributes
    ----------
    precision, low, high : float
        Mean held-out precision over the folds and its interval (NaN: not measured).
    n_splits : int
        Folds scored.
    blind : float
        A blind pick's precision: the training cells' prevalence.
    """

    precision: float = float("nan")
    low: float = float("nan")
    high: float = float("nan")
    n_splits: int = 0
    blind: float = float("nan")

    @property
    def measured(self) -> bool:
        """Whether the cross-validation scored the model at all."""
        return bool(np.isfinite(self.precision))


def cv_interval(split_scores: np.ndarray, test_fraction: float, blind: float) -> CrossValidation:
    """The mean held-out precision of repeated cross-validation with its interval.

    Folds of repeated cross-validation share their training cells, so the spread of their
    scores understates the uncertainty of the mean. The interval is Nadeau and Bengio's
    (2003) corrected resampled t: variance ``(1/J + n_test/n_train) s**2`` over ``J``
    scored folds, ``t`` with ``J - 1`` degrees of freedom, level :data:`LEVEL`.

    Parameters
    ----------
    split_scores : array-like
        Held-out precision of every fold (NaN: not scored).
    test_fraction : float
        ``n_test / n_train`` of a fold (``1 / (K - 1)`` for K folds).
    blind : float
        The training cells' prevalence.

    Returns
    -------
    CrossValidation

    Examples
    --------
    >>> cv = cv_interval(np.array([0.6, 0.5, 0.7, 0.6]), 0.5, 0.3)
    >>> round(cv.precision, 2), round(cv.low, 2), round(cv.high, 2)
    (0.6, 0.43, 0.77)
    """
    from scipy.stats import t as student_t

    s = np.asarray(split_scores, dtype=np.float64)
    s = s[np.isfinite(s)]
    if s.size == 0:
        return CrossValidation(blind=blind)
    mean = float(s.mean())
    if s.size < 2:
        return CrossValidation(mean, float("nan"), float("nan"), 1, blind)
    half = float(student_t.ppf(0.5 + LEVEL / 2.0, s.size - 1)) * np.sqrt(
        (1.0 / s.size + test_fraction) * s.var(ddof=1)
    )
    low, high = max(mean - float(half), 0.0), min(mean + float(half), 1.0)
    return CrossValidation(mean, low, high, int(s.size), blind)
