"""Precision at k and the surrogate losses reported in the paper's tables."""

from __future__ import annotations

import numpy as np

from reserve.errors import InvalidInputError
from reserve.solvers import top_k

__all__ = ["hinge_loss_sum", "precision_at_k", "selection_precision"]


def _labels01(y_true: object, name: str = "y_true") -> np.ndarray:
    y = np.asarray(y_true)
    if y.ndim != 1:
        raise InvalidInputError(f"{name} must be 1-D; received shape {y.shape}. Pass 0/1 labels.")
    if not np.isin(y, (0, 1)).all():
        vals = np.unique(y[~np.isin(y, (0, 1))])[:5].tolist()
        raise InvalidInputError(
            f"{name} must contain only 0 and 1; received other values {vals}. Recode the labels."
        )
    return y.astype(np.int64)


def precision_at_k(y_true: object, y_score: object, k: int) -> float:
    """Share of true positives among the ``k`` highest scores (ties: lower index first).

    Parameters
    ----------
    y_true : array-like of shape (m,)
        0/1 labels.
    y_score : array-like of shape (m,)
        Scores; larger is better.
    k : int
        ``1 <= k <= m``.

    Returns
    -------
    float

    Examples
    --------
    >>> precision_at_k([1, 0, 1, 0], [0.9, 0.8, 0.1, 0.2], 2)
    0.5
    """
    y = _labels01(y_true)
    s = np.asarray(y_score, dtype=np.float64)
    if s.shape != y.shape:
        raise InvalidInputError(
            f"y_score must have the shape of y_true {y.shape}; received {s.shape}. "
            "Pass one score per label."
        )
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= y.shape[0]:
        raise InvalidInputError(
            f"k must be an integer between 1 and {y.shape[0]}; received {k!r}. Lower k."
        )
    return float(y[top_k(s, int(k))].mean())


def selection_precision(y_true: object, selected: object) -> float:
    """Share of positives among the selected rows.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        0/1 labels of all rows the indices refer to.
    selected : array-like of int
        Row indices (e.g. an estimator's ``selected_`` mapped to these rows).

    Examples
    --------
    >>> selection_precision([1, 0, 1, 1], [0, 1])
    0.5
    """
    y = _labels01(y_true)
    idx = np.asarray(selected)
    if idx.ndim != 1 or idx.size == 0 or idx.dtype.kind not in "iu":
        raise InvalidInputError(
            f"selected must be a non-empty 1-D array of row indices; received {idx!r}."
        )
    if idx.min() < 0 or idx.max() >= y.shape[0]:
        raise InvalidInputError(
            f"selected holds indices outside 0..{y.shape[0] - 1}; received min {idx.min()}, "
            f"max {idx.max()}. Map the indices to the rows of y_true."
        )
    return float(y[idx].mean())


def hinge_loss_sum(y_true: object, decision: object) -> float:
    """Summed hinge loss ``sum_j [1 - y_j f_j]_+`` with 0/1 labels mapped to -1/+1.

    The paper's Table 2 reports this on the test rows ("test loss").

    Examples
    --------
    >>> hinge_loss_sum([1, 0], [0.5, 0.5])
    2.0
    """
    y = _labels01(y_true)
    f = np.asarray(decision, dtype=np.float64)
    if f.shape != y.shape:
        raise InvalidInputError(
            f"decision must have the shape of y_true {y.shape}; received {f.shape}."
        )
    return float(np.maximum(0.0, 1.0 - np.where(y == 1, 1.0, -1.0) * f).sum())
