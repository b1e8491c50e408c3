"""One-scorer calls of the solvers, for the tests of their single-species arithmetic.

The solvers take labels of shape (n, S), scorers (S, d) and (S,), and one
:class:`reserve.solvers.constraints.Constraints`; these wrappers pass one species and hand back
``w`` of shape (d,) and a float ``b``, so a test reads as the problem it states.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from reserve.solvers._fd import feasible_direction
from reserve.solvers._mip import solve_ttk_mip
from reserve.solvers._polish import polish
from reserve.solvers.budget import Budget
from reserve.solvers.constraints import Constraints


def cells(k: int, X_cand: np.ndarray) -> Constraints:
    """The cell budget ``k`` over the candidate rows ``X_cand``."""
    return Constraints.cells(k, np.shape(X_cand)[0])


def money(cost, budget: float, expected_cells: int | None = None) -> Constraints:
    """The money budget ``budget`` over candidates of costs ``cost``."""
    bud = Budget(np.asarray(cost, dtype=np.float64), budget)
    return Constraints(bud, expected_cells=expected_cells)


def _one(result):
    return replace(result, w=result.w[0], b=float(result.b[0]))


def _start(w, b):
    return np.asarray(w, dtype=np.float64)[None, :], np.array([b], dtype=np.float64)


def fd1(X_lab, y, X_cand, constraints, C, w, b, **kwargs):
    """:func:`feasible_direction` of one scorer: ``y`` of shape (n,), ``w`` (d,), float ``b``."""
    y = np.asarray(y, dtype=np.float64)[:, None]
    return _one(feasible_direction(X_lab, y, X_cand, constraints, C, *_start(w, b), **kwargs))


def polish1(X_lab, y, X_cand, constraints, C, w, b, **kwargs):
    """:func:`polish` of one scorer: ``y`` of shape (n,), ``w`` (d,), float ``b``."""
    y = np.asarray(y, dtype=np.float64)[:, None]
    return _one(polish(X_lab, y, X_cand, constraints, C, *_start(w, b), **kwargs))


def mip1(X_lab, y, X_cand, constraints, C, warm_start=None, **kwargs):
    """:func:`solve_ttk_mip` of one scorer: ``y`` of shape (n,), ``w`` (d,), float ``b``."""
    y = np.asarray(y)[:, None]
    start = None if warm_start is None else _start(*warm_start)
    return _one(solve_ttk_mip(X_lab, y, X_cand, constraints, C, warm_start=start, **kwargs))
