"""A thin wrapper around Clarabel for the baselines' convex QPs.

``min 0.5 x'Px + q'x  s.t.  A_eq x = b_eq,  A_le x <= b_le``. Callers build sparse matrices;
this module only stacks them, calls the solver and turns failures into ``SolverError``.
"""

from __future__ import annotations

import clarabel
import numpy as np
import scipy.sparse as sp

from reserve.errors import SolverError

__all__ = ["clarabel_settings", "solve_qp"]


def solve_qp(
    P: sp.spmatrix,
    q: np.ndarray,
    A_le: sp.spmatrix,
    b_le: np.ndarray,
    A_eq: sp.spmatrix | None = None,
    b_eq: np.ndarray | None = None,
    *,
    what: str = "QP",
) -> tuple[np.ndarray, str]:
    """Solve the QP; return the primal solution and the solver status.

    Raises
    ------
    SolverError
        When Clarabel neither solves nor almost solves the problem (infeasible included).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> x, _ = solve_qp(sp.eye(1, format="csc"), np.array([-2.0]),
    ...                 sp.csr_matrix([[1.0]]), np.array([1.0]))
    >>> round(float(x[0]), 6)
    1.0
    """
    s = clarabel.DefaultSettings()
    s.verbose = False
    s.tol_gap_abs = 1e-8
    s.tol_gap_rel = 1e-8
    s.tol_feas = 1e-8
    s.max_iter = 200
    blocks, rhs, cones = [], [], []
    if A_eq is not None and A_eq.shape[0]:
        blocks.append(sp.csr_matrix(A_eq))
        rhs.append(np.asarray(b_eq, dtype=np.float64))
        cones.append(clarabel.ZeroConeT(A_eq.shape[0]))
    blocks.append(sp.csr_matrix(A_le))
    rhs.append(np.asarray(b_le, dtype=np.float64))
    cones.append(clarabel.NonnegativeConeT(A_le.shape[0]))
    A = sp.vstack(blocks, format="csc")
    solver = clarabel.DefaultSolver(
        sp.csc_matrix(P), np.asarray(q, dtype=np.float64), A, np.concatenate(rhs), cones, s
    )
    sol = solver.solve()
    status = str(sol.status)
    if "Solved" not in status:
        raise SolverError(
            f"the convex solver (Clarabel) stopped with status {status} on the {what} "
            f"({A.shape[1]} variables, {A.shape[0]} constraints); standardise the features "
            "and retry, or change C."
        )
    return np.asarray(sol.x), status


def clarabel_settings() -> clarabel.DefaultSettings:
    """Clarabel settings for the bound problems: quiet, tolerances 1e-8, data updates allowed.

    Bounds computed from these solves are padded by 1e-7 relative (ten times the tolerance).
    """
    st = clarabel.DefaultSettings()
    st.verbose = False
    st.presolve_enable = False  # required for data updates
    st.tol_gap_abs = 1e-8
    st.tol_gap_rel = 1e-8
    st.tol_feas = 1e-8
    st.max_iter = 100
    return st
