"""Convex QPs behind TTK: the true-hinge SVM and the fixed-set problem.

For a fixed set ``S`` of candidates allowed to score positive, TTK is the convex QP

    min_{w, b, xi}  0.5 ||w||^2 + C sum_i xi_i
    s.t.            xi_i >= 1 - y_i (w . x_i + b),  xi_i >= 0     (labelled rows)
                    w . z_j + b <= 0                              (candidates j not in S)

With no candidate rows it is the soft-margin linear SVM with true hinge loss and an
unregularised intercept. Both are solved in the primal by an interior point, which returns
the multipliers we use to rank swap moves: Clarabel's (sparse), or for wide rows our dense one
(:mod:`reserve.solvers._dense_qp`); from many rows, by the cutting plane.
"""

from __future__ import annotations

import clarabel
import numpy as np
import scipy.sparse as sp

from reserve.errors import InvalidInputError, SolverError
from reserve.solvers._cutting_plane import CuttingPlaneState, solve_cutting_plane
from reserve.solvers._dense_qp import solve_dense
from reserve.solvers._hinge import QPResult, hinge_objective

__all__ = [
    "CUTTING_PLANE_MIN_ROWS",
    "DENSE_MIN_COLUMNS",
    "CuttingPlaneState",
    "QPResult",
    "hinge_objective",
    "solve_fixed_set",
]


def _settings() -> clarabel.DefaultSettings:
    s = clarabel.DefaultSettings()
    s.verbose = False
    s.tol_gap_abs = 1e-9
    s.tol_gap_rel = 1e-9
    s.tol_feas = 1e-9
    s.max_iter = 200
    return s


#: ``method="auto"`` uses the cutting plane from this many labelled rows (measured crossover
#: with Clarabel; see benchmarks/results/scale.md).
CUTTING_PLANE_MIN_ROWS = 10_000

#: Below ``CUTTING_PLANE_MIN_ROWS``, ``method="auto"`` solves rows of at least this many
#: columns by the dense interior point (spline maps: 25-30 times faster than Clarabel at 228
#: columns, docs/algorithm.md), narrower rows by Clarabel. Both meet the same tolerances and
#: differ in the last digits; on narrow rows those digits steer the polish and the MIP: with
#: the dense solver there, the two-species MIP reference run
#: (``benchmarks/bench_reference.py``, ``two_species_mip``) ends at another local optimum, on
#: other cells.
DENSE_MIN_COLUMNS = 65


def solve_fixed_set(
    X: np.ndarray,
    y_pm: np.ndarray,
    C: float,
    Z: np.ndarray | None = None,
    *,
    method: str = "auto",
    warm_start: CuttingPlaneState | None = None,
    tol: float = 1e-6,
    cutoff: float | None = None,
    cutting_plane_min_rows: int = CUTTING_PLANE_MIN_ROWS,
) -> QPResult:
    """Solve the hinge SVM with the extra constraints ``w . z_j + b <= 0`` for rows of ``Z``.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Labelled rows.
    y_pm : ndarray of shape (n,)
        Labels in {-1, +1}.
    C : float
        Hinge weight.
    Z : ndarray of shape (p, d) or None
        Candidate rows that must not score positive.
    method : {"auto", "clarabel", "dense", "cutting_plane"}
        ``"clarabel"``: the whole QP by Clarabel's interior point (exact to 1e-9; time grows
        with ``n``). ``"dense"``: :func:`reserve.solvers._dense_qp.solve_dense`, an interior
        point on the ``(d + 1) x (d + 1)`` normal equations (the same tolerances; time grows
        with ``(n + p) d^2``). ``"cutting_plane"``:
        :func:`reserve.solvers._cutting_plane.solve_cutting_plane` (relative gap ``tol``; two
        passes over ``X`` per iteration). ``"auto"``: the cutting plane from
        ``cutting_plane_min_rows`` labelled rows for rows narrower than
        ``DENSE_MIN_COLUMNS`` columns, and from ``CUTTING_PLANE_MIN_ROWS`` for wider ones
        (Clarabel if it fails to reach ``tol``); below, the dense interior point for wide
        rows (Clarabel if it fails), Clarabel for narrow ones.
    warm_start : CuttingPlaneState or None
        Cuts of earlier solves on the same ``(X, y_pm)``, updated in place; used by the
        cutting plane only.
    tol : float
        Relative gap of the cutting plane.
    cutoff : float or None
        Cutting plane only: stop once the optimum is proved to be >= ``cutoff`` (status
        ``"Cutoff ..."``, a feasible point returned). Clarabel ignores it.
    cutting_plane_min_rows : int
        The ``"auto"`` threshold for narrow rows: from this many labelled rows, the cutting
        plane (the polish lowers it: its cuts carry over between solves). Wide rows keep the
        dense interior point up to ``CUTTING_PLANE_MIN_ROWS``: the cutting plane needs more
        cuts the more columns a row has (UCI splice, 1,587 labelled rows, 360 spline columns,
        C = 10: one ensemble member's polish had not ended after 25 minutes on the cutting
        plane; the member's whole fit took 199 s on the dense interior point).

    Returns
    -------
    QPResult

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[-1.0], [1.0]]); y = np.array([-1.0, 1.0])
    >>> r = solve_fixed_set(X, y, 10.0)
    >>> round(float(r.w[0]), 6), abs(round(r.b, 6))
    (1.0, 0.0)
    """
    if method not in ("auto", "clarabel", "dense", "cutting_plane"):
        raise InvalidInputError(
            f'method must be "auto", "clarabel", "dense" or "cutting_plane"; received {method!r}.'
        )
    wide = X.shape[1] >= DENSE_MIN_COLUMNS
    from_rows = CUTTING_PLANE_MIN_ROWS if wide else cutting_plane_min_rows
    if method == "cutting_plane" or (method == "auto" and X.shape[0] >= from_rows):
        try:
            return solve_cutting_plane(X, y_pm, C, Z, tol=tol, state=warm_start, cutoff=cutoff)[0]
        except SolverError:
            if method == "cutting_plane":
                raise
            # "auto": the interior point below is slow at this size but does converge.
    if method == "dense" or (method == "auto" and wide):
        try:
            return solve_dense(X, y_pm, C, Z)
        except SolverError:
            if method == "dense":
                raise
            # "auto": Clarabel's regularised factorisation is the sturdier of the two.
    return _solve_clarabel(X, y_pm, C, Z)


def _constraint_matrix(X: np.ndarray, y_pm: np.ndarray, Z: np.ndarray | None) -> sp.csc_matrix:
    """The constraint rows of the QP over ``(w, b, xi)``, built column by column in CSC.

    Rows: the hinge rows ``-y_i (x_i, 1) . (w, b) - xi_i <= -1``, then ``-xi_i <= 0``, then the
    candidate rows ``(z_j, 1) . (w, b) <= 0``. The same matrix, nonzero for nonzero, as
    stacking the blocks with ``scipy.sparse`` (zeros of ``X`` and ``Z`` are not stored), in a
    fraction of the time: the polish solves hundreds of small QPs.
    """
    n, d = X.shape
    Zc = np.empty((0, d)) if Z is None else Z
    p = Zc.shape[0]
    dense = np.empty((d + 1, n + p))  # columns w and b, over the hinge and candidate rows
    dense[:d, :n] = (-(y_pm[:, None] * X)).T
    dense[d, :n] = -y_pm
    dense[:d, n:] = Zc.T
    dense[d, n:] = 1.0
    keep = dense != 0
    rows = np.concatenate([np.arange(n), 2 * n + np.arange(p)])
    head_idx = np.broadcast_to(rows, dense.shape)[keep]
    head_ptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))])
    xi_idx = np.column_stack([np.arange(n), n + np.arange(n)]).ravel()  # rows i and n + i
    indptr = np.concatenate([head_ptr, head_ptr[-1] + 2 * np.arange(1, n + 1)])
    data = np.concatenate([dense[keep], np.full(2 * n, -1.0)])
    indices = np.concatenate([head_idx, xi_idx]).astype(np.int32)
    return sp.csc_matrix((data, indices, indptr.astype(np.int32)), shape=(2 * n + p, d + 1 + n))


def _solve_clarabel(X: np.ndarray, y_pm: np.ndarray, C: float, Z: np.ndarray | None) -> QPResult:
    """The fixed-set QP in the primal by Clarabel (interior point, tolerances 1e-9)."""
    n, d = X.shape
    p = 0 if Z is None else Z.shape[0]
    P = sp.diags(np.r_[np.ones(d), np.zeros(1 + n)], format="csc")
    q = np.r_[np.zeros(d + 1), np.full(n, C)]
    A = _constraint_matrix(X, y_pm, Z)
    rhs_v = np.concatenate([-np.ones(n), np.zeros(n + p)])  # hinge, xi >= 0, candidates
    cones = [clarabel.NonnegativeConeT(A.shape[0])]
    solver = clarabel.DefaultSolver(P, q, A, rhs_v, cones, _settings())
    sol = solver.solve()
    status = str(sol.status)
    if "Solved" not in status and "AlmostSolved" not in status:
        raise SolverError(
            f"the convex QP solver (Clarabel) stopped with status {status} on a problem with "
            f"{n} labelled rows and {p} candidate constraints; standardise the features "
            "(very different scales slow interior-point methods) and retry."
        )
    x = np.asarray(sol.x)
    w, b = x[:d].copy(), float(x[d])
    z = np.asarray(sol.z)
    beta = z[2 * n :].copy() if p else np.zeros(0)
    return QPResult(w=w, b=b, objective=hinge_objective(w, b, X, y_pm, C), beta=beta, status=status)
