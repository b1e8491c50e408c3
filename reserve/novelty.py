"""How far each cell's habitat lies from the surveyed habitat: the MESS of Elith et al. (2010).

A model fitted on the training (surveyed public) cells scores every candidate, but where a
candidate's habitat is unlike any training cell's the score is an extrapolation. The
*multivariate environmental similarity surface* (MESS; Elith, Kearney & Phillips 2010,
Methods in Ecology and Evolution 1: 330-342) measures it, variable by variable, against the
reference (the training cells' values) and keeps the worst variable:

for variable ``j`` with reference values ``r_j`` (minimum ``min_j``, maximum ``max_j``) and a
point's value ``p``, let ``f`` be the percentage of reference values ``<= p`` (as R's
``dismo::mess`` counts them, with ``findInterval``); the similarity is

* ``100 (p - min_j) / (max_j - min_j)`` when ``f == 0`` (below the range: negative),
* ``2 f`` when ``0 < f <= 50``,
* ``2 (100 - f)`` when ``50 < f < 100``,
* ``100 (max_j - p) / (max_j - min_j)`` when ``f == 100`` (``p == max_j`` gives 0, above the
  range is negative).

A point's MESS is the minimum over the variables, and its *most dissimilar variable* (MoD)
the variable where that minimum falls (the first such variable on a tie). A negative MESS
means the point lies outside the reference range on at least one variable: its habitat is
*novel*. A point inside every variable's range (ends included) has MESS ``>= 0``; the
highest value, 100, is reached at the reference median of every variable.

A *constant* reference variable (``max_j == min_j == c``) has no range to scale by: a value
equal to ``c`` is as similar as can be (100; every reference value is the point's own), any
other value is novel with similarity -100 (a fixed stand-in for "outside a range of width
zero", where the formula would divide by zero).

Only finite values are compared: a point with a missing (NaN) or infinite value on any
variable gets MESS NaN and no MoD (-1), and is not novel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from reserve.errors import InvalidInputError

__all__ = ["CONSTANT_MISMATCH", "mess", "similarity"]

#: Similarity of a value that differs from a constant reference variable (no range to scale by).
CONSTANT_MISMATCH = -100.0


def _as_matrix(values: Any, name: str) -> np.ndarray:
    try:
        out = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"{name} must be a numeric 2-D array; received {values!r}"
        ) from None
    if out.ndim == 1:
        out = out[:, None]
    if out.ndim != 2:
        raise InvalidInputError(f"{name} must be 2-D (cells x variables); shape {out.shape}")
    return out


def _checked(points: Any, reference: Any) -> tuple[np.ndarray, np.ndarray]:
    P, R = _as_matrix(points, "points"), _as_matrix(reference, "reference")
    if R.shape[0] == 0:
        raise InvalidInputError("reference has no rows; pass the training cells' values")
    if P.shape[1] != R.shape[1]:
        raise InvalidInputError(
            f"points have {P.shape[1]} variables and reference {R.shape[1]}; pass the same "
            "columns in the same order"
        )
    if not np.isfinite(R).all():
        raise InvalidInputError(
            "reference holds NaN or infinite values; pass finite values (drop those rows)"
        )
    return P, R


def _column(p: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Similarity of the values ``p`` to one reference variable ``ref`` (finite, 1-D)."""
    s = np.sort(ref)
    lo, hi = s[0], s[-1]
    f = 100.0 * np.searchsorted(s, p, side="right") / s.size  # share of reference <= p
    sim = np.where(f <= 50.0, 2.0 * f, 2.0 * (100.0 - f))
    if hi > lo:
        # a range so narrow (subnormal) that the quotient overflows gives -inf: far outside
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            sim = np.where(f == 0.0, 100.0 * (p - lo) / (hi - lo), sim)
            sim = np.where(f == 100.0, 100.0 * (hi - p) / (hi - lo), sim)
    else:  # a constant reference: equal is fully similar, anything else novel
        sim = np.where(p == lo, 100.0, CONSTANT_MISMATCH)
    return np.where(np.isfinite(p), sim, np.nan)


def similarity(points: Any, reference: Any) -> np.ndarray:
    """Each point's similarity to the reference on each variable (dismo's ``full=TRUE``).

    Parameters
    ----------
    points : array-like of shape (n_points, n_variables)
        Values to assess (NaN allowed: its similarity is NaN).
    reference : array-like of shape (n_reference, n_variables)
        The reference values (finite), e.g. the training cells' features.

    Returns
    -------
    numpy.ndarray of shape (n_points, n_variables)

    Raises
    ------
    InvalidInputError
        Not 2-D, different numbers of variables, no reference row, non-finite reference.

    Examples
    --------
    >>> ref = [[0.0], [1.0], [2.0], [3.0]]
    >>> similarity([[-1.0], [0.0], [1.5], [3.0], [4.5]], ref)[:, 0].round(2).tolist()
    [-33.33, 50.0, 100.0, 0.0, -50.0]
    """
    P, R = _checked(points, reference)
    out = np.empty(P.shape, dtype=np.float64)
    for j in range(P.shape[1]):  # a few habitat variables; each column is one vector step
        out[:, j] = _column(P[:, j], R[:, j])
    return out


def mess(points: Any, reference: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each point's MESS and most dissimilar variable against the reference.

    Parameters
    ----------
    points : array-like of shape (n_points, n_variables)
        Values to assess; a point with a non-finite value gets NaN and -1.
    reference : array-like of shape (n_reference, n_variables)
        The reference values (finite).

    Returns
    -------
    mess : numpy.ndarray of float, shape (n_points,)
        Minimum similarity over the variables; negative = novel (outside the reference
        range on some variable).
    most_dissimilar : numpy.ndarray of int, shape (n_points,)
        Column of the variable giving that minimum (the first on a tie); -1 where MESS is NaN.

    Raises
    ------
    InvalidInputError
        As :func:`similarity`.

    Examples
    --------
    >>> ref = [[0.0, 10.0], [1.0, 20.0], [2.0, 30.0], [3.0, 40.0]]
    >>> value, mod = mess([[2.5, 25.0], [1.5, 50.0], [np.nan, 20.0]], ref)
    >>> value.round(2).tolist(), mod.tolist()
    ([50.0, -33.33, nan], [0, 1, -1])
    """
    sim = similarity(points, reference)
    if sim.shape[1] == 0:
        n = sim.shape[0]
        return np.full(n, np.nan), np.full(n, -1, dtype=np.int64)
    ok = ~np.isnan(sim).any(axis=1)  # -inf: a point far outside a subnormal range
    mod = np.where(ok, np.argmin(np.where(np.isnan(sim), np.inf, sim), axis=1), -1)
    value = np.where(ok, np.take_along_axis(sim, np.maximum(mod, 0)[:, None], 1)[:, 0], np.nan)
    return value, mod.astype(np.int64)
