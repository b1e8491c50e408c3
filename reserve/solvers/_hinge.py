"""The hinge objective and the fixed-set QP's result: the bottom of the QP solvers.

Both the Clarabel path (:mod:`reserve.solvers._qp`) and the cutting plane
(:mod:`reserve.solvers._cutting_plane`) return a :class:`QPResult`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["QPResult", "hinge_objective", "species_objectives"]


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


def hinge_objective(w: np.ndarray, b: float, X: np.ndarray, y_pm: np.ndarray, C: float) -> float:
    """Regularised hinge objective ``0.5 ||w||^2 + C sum_i [1 - y_i (w.x_i + b)]_+``.

    Examples
    --------
    >>> import numpy as np
    >>> hinge_objective(np.zeros(1), 0.0, np.ones((2, 1)), np.array([1.0, -1.0]), 1.0)
    2.0
    """
    margins = 1.0 - y_pm * (X @ w + b)
    return float(0.5 * (w @ w) + C * np.maximum(margins, 0.0).sum())


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
    return 0.5 * np.einsum("sd,sd->s", W, W) + C * np.maximum(margins, 0.0).sum(axis=0)
