"""The boundary-length term of a selection, as a solver sees it: ``penalty * B(S)``.

``B(S)`` is the exposed boundary of the selected candidates ``S`` together with the cells
that are selected whatever the solver does (locked-in cells)::

    B(S) = const + sum_{i in S} own_i - sum_{i, j in S} A_ij

where ``A`` is the symmetric matrix of edge lengths shared by two candidates (each shared
edge appears as ``A_ij`` and ``A_ji``, so the double sum removes it twice: once from each
cell's own perimeter), ``own_i`` is the boundary candidate ``i`` adds on its own (its
perimeter, edges facing no planning unit weighted by the edge factor, less twice the edges it
shares with locked-in cells) and ``const`` the boundary of the locked-in cells alone.
:mod:`reserve.adjacency` builds these from the grid; this module only evaluates them.

Examples
--------
>>> import numpy as np
>>> from scipy import sparse
>>> A = sparse.csr_matrix(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))
>>> term = Boundary(own=np.array([4.0, 4.0, 4.0]), shared=A)
>>> term.length(np.array([True, True, False])), term.length(np.array([True, False, True]))
(6.0, 8.0)
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from reserve.errors import InvalidInputError

__all__ = ["CALIBRATION_STEPS", "Boundary", "calibrate_penalty"]


class Boundary:
    """Boundary length of candidate sets: ``const + own . x - x' A x`` for the set's mask ``x``.

    Parameters
    ----------
    own : array-like of shape (m,)
        Boundary each unit adds on its own (finite, ``>= 0`` before locked-in neighbours are
        taken off).
    shared : sparse matrix of shape (m, m)
        Symmetric edge lengths shared by two units (zero diagonal).
    const : float, default=0.0
        Boundary of the cells selected in any case (locked in).
    """

    def __init__(self, own: object, shared: object, const: float = 0.0) -> None:
        self.own = np.asarray(own, dtype=np.float64).reshape(-1)
        m = self.own.size
        A = sparse.csr_matrix(shared, dtype=np.float64)
        if A.shape != (m, m):
            raise InvalidInputError(
                f"the shared-edge matrix must be {m} x {m} like own; received {A.shape}"
            )
        if not np.all(np.isfinite(self.own)) or not np.all(np.isfinite(A.data)):
            raise InvalidInputError("boundary lengths must be finite")
        if (A - A.T).count_nonzero() or A.diagonal().any():
            raise InvalidInputError("the shared-edge matrix must be symmetric with a zero diagonal")
        self.shared = A
        self.const = float(const)

    @property
    def m(self) -> int:
        """Units covered."""
        return self.own.size

    def take(self, rows: np.ndarray, selected_rows: np.ndarray | None = None) -> Boundary:
        """The term over ``rows`` only; ``selected_rows`` (outside ``rows``) count as selected.

        Units in ``selected_rows`` join ``const``, and the edges they share with ``rows``
        come off those rows' ``own``; all other units are left out (never selected).
        """
        rows = np.asarray(rows, dtype=np.int64)
        own, const = self.own[rows], self.const
        if selected_rows is not None and np.size(selected_rows):
            fixed = np.zeros(self.m, dtype=bool)
            fixed[np.asarray(selected_rows, dtype=np.int64)] = True
            own = own - 2.0 * (self.shared[rows] @ fixed)
            const = self.length(fixed)
        return Boundary(own, self.shared[rows][:, rows], const)

    def link(self, in_S: np.ndarray) -> np.ndarray:
        """Edge length each unit shares with the units of ``in_S``."""
        return self.shared @ np.asarray(in_S, dtype=np.float64)

    def length(self, in_S: np.ndarray) -> float:
        """``B`` of the set marked by ``in_S`` (a boolean mask of the units)."""
        mask = np.asarray(in_S)
        if mask.dtype == bool:
            # Only the selected rows: no pass over every unit, no BLAS call (under load its
            # threads cost more than the sum). Edge lengths on a grid add up exactly anyway.
            idx = np.flatnonzero(mask)
            inner = self.shared[idx] @ mask.astype(np.float64)
            return float(self.const + self.own[idx].sum() - inner.sum())
        x = mask.astype(np.float64)
        return float(self.const + self.own @ x - x @ (self.shared @ x))

    def add_cost(self, in_S: np.ndarray) -> np.ndarray:
        """Change of ``B`` when each unit outside ``in_S`` joins it (exact, one at a time)."""
        return self.own - 2.0 * self.link(in_S)

    def drop_cost(self, in_S: np.ndarray) -> np.ndarray:
        """Change of ``B`` when each unit of ``in_S`` leaves it (exact, one at a time)."""
        return -(self.own - 2.0 * self.link(in_S))


#: Multiples of Cohon's penalty tried by :func:`calibrate_penalty`.
CALIBRATION_STEPS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)

#: The "boundary only" end of the trade-off is fitted at this many times ``f0 / B0``.
_BOUNDARY_ONLY = 1e3


def calibrate_penalty(
    fit: object, steps: tuple[float, ...] = CALIBRATION_STEPS
) -> tuple[float, list[dict]]:
    """Choose a boundary penalty at the knee of the objective / boundary trade-off.

    Cohon's method, as prioritizr's ``calibrate_cohon_penalty`` adapts it to conservation
    planning: fit once without the penalty (objective ``f0``, boundary ``B0``) and once with
    a penalty so large that only the boundary matters (``f1``, ``B1``); the slope between the
    two ends, ``(f1 - f0) / (B0 - B1)``, is the penalty at which one unit of boundary is worth
    what it costs in objective. The penalties ``steps`` times that are fitted too, and the
    knee is the fit nearest the ideal corner once both axes are scaled to ``[0, 1]`` between
    the ends (the smallest sum of the two scaled values; ties to the smaller penalty).

    Parameters
    ----------
    fit : callable
        ``fit(penalty) -> dict`` with at least ``"objective"`` (the objective without the
        penalty) and ``"boundary"``; other entries are kept in the table.
    steps : tuple of float
        Multiples of Cohon's penalty to try.

    Returns
    -------
    penalty : float
        The chosen penalty (0 when the penalty cannot shorten the boundary).
    table : list of dict
        One row per fit, by increasing penalty, with ``"penalty"``, ``"chosen"`` and the
        entries of ``fit``'s dicts.

    Examples
    --------
    >>> def fit(lam):  # a toy trade-off: the boundary halves as the objective grows
    ...     b = 100.0 / (1.0 + 50.0 * lam)
    ...     return {"objective": 10.0 + 0.2 * (100.0 - b), "boundary": b}
    >>> lam, table = calibrate_penalty(fit)
    >>> 0 < lam < 1, len(table), sum(row["chosen"] for row in table)
    (True, 7, 1)
    """
    ends = {0.0: fit(0.0)}
    f0, b0 = ends[0.0]["objective"], ends[0.0]["boundary"]
    big = _BOUNDARY_ONLY * max(abs(f0), 1.0) / max(b0, 1e-300)
    ends[big] = fit(big)
    f1, b1 = ends[big]["objective"], ends[big]["boundary"]
    if not b0 - b1 > 1e-9 * max(b0, 1.0):
        rows = [{"penalty": p, **r, "chosen": p == 0.0} for p, r in sorted(ends.items())]
        return 0.0, rows
    cohon = max(f1 - f0, 0.0) / (b0 - b1)
    fits = dict(ends)
    for s in steps:
        if cohon * s not in fits:
            fits[cohon * s] = fit(cohon * s)
    rows = [{"penalty": p, **r} for p, r in sorted(fits.items())]
    f_span, b_span = max(f1 - f0, 1e-300), b0 - b1
    score = [(r["objective"] - f0) / f_span + (r["boundary"] - b1) / b_span for r in rows]
    best = int(np.argmin(score))
    for i, r in enumerate(rows):
        r["chosen"] = i == best
    return float(rows[best]["penalty"]), rows
