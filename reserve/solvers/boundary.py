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

__all__ = ["Boundary"]


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
        x = np.asarray(in_S, dtype=np.float64)
        return float(self.const + self.own @ x - x @ (self.shared @ x))

    def add_cost(self, in_S: np.ndarray) -> np.ndarray:
        """Change of ``B`` when each unit outside ``in_S`` joins it (exact, one at a time)."""
        return self.own - 2.0 * self.link(in_S)

    def drop_cost(self, in_S: np.ndarray) -> np.ndarray:
        """Change of ``B`` when each unit of ``in_S`` leaves it (exact, one at a time)."""
        return -(self.own - 2.0 * self.link(in_S))
