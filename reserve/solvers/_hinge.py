"""The hinge objective and the fixed-set QP's result: the bottom of the QP solvers.

Both the Clarabel path (:mod:`reserve.solvers._qp`) and the cutting plane
(:mod:`reserve.solvers._cutting_plane`) return a :class:`QPResult`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "QPResult",
    "hinge_objective",
    "hinge_weights",
    "species_objectives",
    "species_weights",
    "weighted_hinge",
]


@dataclass(frozen=True)
class QPResult:
    """Solution of a fixed-set QP.

    Attributes
    ----------
    w : ndarray of shape (d,)
    b : float
    objective : float
        Recomputed from ``(w, b)`` (not the solver's own figure).
    beta : ndarray
        Multipliers of the candidate constraints, aligned with the ``Z`` rows passed in.
    status : str
        Clarabel's status string.
    """

    w: np.ndarray
    b: float
    objective: float
    beta: np.ndarray
    status: str


def hinge_weights(C, u: np.ndarray):
    """``C`` shaped to multiply the hinge arguments ``u`` element by element.

    ``C`` is the hinge weight of every labelled row: a float (every row ``C``), or per-row
    weights ``C c_i`` of shape ``(n,)`` (class and sample weights), or ``(n, S)`` (one column
    per species). A float stays a float: the unweighted problem multiplies by a scalar.
    """
    if np.ndim(C) == 0:
        return C
    C = np.asarray(C, dtype=np.float64)
    if C.ndim == 1 and u.ndim == 2:
        return C[:, None]
    if C.ndim == 2 and u.ndim == 1 and C.size == u.size:
        return C.ravel()  # stacked arguments (n, S) raveled row by row
    if C.ndim == 1 and u.ndim == 1 and C.size != u.size and u.size % C.size == 0:
        return np.repeat(C, u.size // C.size)  # the same, per-row weights
    return C


def species_weights(C, s: int):
    """Species ``s``'s hinge weight: ``C`` itself (a float, or per-row weights of shape
    ``(n,)``), or column ``s`` of per-(row, species) weights of shape ``(n, S)``.

    Examples
    --------
    >>> import numpy as np
    >>> species_weights(2.0, 1), species_weights(np.array([[1.0, 3.0]]), 1).tolist()
    (2.0, [3.0])
    """
    return C[:, s] if np.ndim(C) == 2 else C


def weighted_hinge(C, u: np.ndarray, axis=None):
    """``sum_i C_i [u_i]_+`` (over ``axis``) for a float or per-row ``C`` (:func:`hinge_weights`).

    Examples
    --------
    >>> import numpy as np
    >>> float(weighted_hinge(2.0, np.array([1.0, -1.0, 0.5])))
    3.0
    >>> float(weighted_hinge(np.array([1.0, 5.0, 2.0]), np.array([1.0, -1.0, 0.5])))
    2.0
    """
    h = np.maximum(u, 0.0)
    if np.ndim(C) == 0:
        return C * h.sum(axis=axis)
    return (hinge_weights(C, u) * h).sum(axis=axis)


def hinge_objective(w: np.ndarray, b: float, X: np.ndarray, y_pm: np.ndarray, C) -> float:
    """Regularised hinge objective ``0.5 ||w||^2 + C sum_i [1 - y_i (w.x_i + b)]_+``.

    ``C`` may be per-row weights (``sum_i C_i [...]_+``; see :func:`hinge_weights`).

    Examples
    --------
    >>> import numpy as np
    >>> hinge_objective(np.zeros(1), 0.0, np.ones((2, 1)), np.array([1.0, -1.0]), 1.0)
    2.0
    """
    margins = 1.0 - y_pm * (X @ w + b)
    return float(0.5 * (w @ w) + weighted_hinge(C, margins))


def species_objectives(
    W: np.ndarray, b: np.ndarray, X_lab: np.ndarray, Y_pm: np.ndarray, C: float
) -> np.ndarray:
    """``0.5 ||w_s||^2 + C sum_i [1 - y_is (w_s . x_i + b_s)]_+`` for every species ``s``.

    Examples
    --------
    >>> import numpy as np
    >>> species_objectives(np.zeros((1, 1)), np.zeros(1), np.ones((2, 1)),
    ...                    np.array([[1.0], [-1.0]]), 1.0).tolist()
    [2.0]
    """
    margins = 1.0 - Y_pm * (X_lab @ W.T + b)
    return 0.5 * np.einsum("sd,sd->s", W, W) + weighted_hinge(C, margins, axis=0)
