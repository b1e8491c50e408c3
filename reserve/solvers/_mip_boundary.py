"""TTK plus a boundary penalty, solved exactly by SCIP.

The TTK model of :func:`reserve.solvers._mip.build_scip_model` (one binary ``eta_j`` per
candidate: ``eta_j = 0`` forces ``w . z_j + b <= 0``) gets the boundary term of the set
``{eta = 1}``::

    penalty * (const + sum_j own_j eta_j - 2 sum_{i < j} A_ij y_ij),  y_ij <= eta_i, y_ij <= eta_j

with one continuous ``y_ij`` per pair of adjacent candidates (the usual linearisation, as
prioritizr's and Marxan's MIPs; a shared edge shortens the boundary, so the minimisation
raises ``y_ij`` to ``min(eta_i, eta_j)``). With the penalty a selected cell may score below
zero (its neighbours may be worth keeping it), so no candidate is fixed out or in, and the
big-M values are the simple ones over ``{objective <= UB}``, UB the start's objective plus
penalty (the hinge part alone is below it, so the bound stays valid).
"""

from __future__ import annotations

import time

import numpy as np

from reserve.solvers._bnb import solve_bnb_boundary
from reserve.solvers._mip import (
    MIPResult,
    build_scip_model,
    certify_gap,
    import_scip,
    scip_best_point,
    scip_optimize,
    scip_warm_start,
    simple_upper,
)
from reserve.solvers._qp import hinge_objective
from reserve.solvers.boundary import Boundary
from reserve.solvers.constraints import Constraints

__all__ = ["solve_boundary_bnb", "solve_boundary_mip"]


def _pairs(term: Boundary) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    A = term.shared.tocoo()
    upper = A.row < A.col
    return A.row[upper], A.col[upper], A.data[upper]


def _add_boundary(mdl, eta, term: Boundary, penalty: float):
    """The boundary term on ``eta``; returns the pair variables and their index arrays."""
    pyscipopt = import_scip()
    pi, pj, ell = _pairs(term)
    y = mdl.addMatrixVar(pi.size, vtype="C", lb=0.0, ub=1.0, name="y") if pi.size else None
    for p in range(pi.size):
        mdl.addCons(y[p] <= eta[int(pi[p])])
        mdl.addCons(y[p] <= eta[int(pj[p])])
    extra = pyscipopt.quicksum(penalty * float(term.own[j]) * eta[j] for j in range(term.m))
    if y is not None:
        extra += pyscipopt.quicksum(-2.0 * penalty * float(ell[p]) * y[p] for p in range(pi.size))
    mdl.setObjective(mdl.getObjective() + extra, "minimize")
    mdl.addObjoffset(penalty * term.const)
    return y, pi, pj


def _total(w, b, X_lab, y_pm, C, term, penalty, in_S) -> float:
    return hinge_objective(w, b, X_lab, y_pm, C) + penalty * term.length(in_S)


def _start(X_lab, y_pm, X_cand, C, term, penalty, start, start_set):
    """The start ``(w0, b0, in0)``, its total ``ub`` and the simple big-M over ``{total <= ub}``.

    ``start`` is ``(W, b)`` of one scorer, shapes (1, d) and (1,). The hinge part alone is
    below the total (``B >= 0``), so ``M`` stays valid.
    """
    w0, b0 = np.asarray(start[0], dtype=np.float64)[0], float(start[1][0])
    in0 = np.zeros(X_cand.shape[0], dtype=bool)
    in0[np.asarray(start_set, dtype=np.int64)] = True
    ub = _total(w0, b0, X_lab, y_pm, C, term, penalty, in0)
    M = np.maximum(simple_upper(X_lab, y_pm, X_cand, C, ub * (1 + 1e-7) + 1e-9), 0.0)
    return w0, b0, in0, ub, M


def solve_boundary_mip(
    X_lab: np.ndarray,
    Y_pm: np.ndarray,
    X_cand: np.ndarray,
    constraints: Constraints,
    C: object,
    start: tuple,
    start_set: np.ndarray,
    time_limit: float,
    mip_gap: float,
) -> MIPResult:
    """TTK's objective plus ``penalty * B(S)`` over sets ``S`` that fit the budget, by SCIP.

    Parameters
    ----------
    X_lab, Y_pm, X_cand : ndarray of shape (n, d), (n, 1), (m, d)
        Labelled rows, labels in {-1, +1} (one scorer), candidates.
    constraints : Constraints
        The budget (cells or money), the boundary term ``B`` (``X_cand``'s order) and its
        penalty ``> 0``; one species.
    C : float or ndarray of shape (n,)
        Hinge weight (per row with weights).
    start : tuple (W, b)
        A feasible point for ``start_set`` (every other candidate scores ``<= 0``), shapes
        (1, d) and (1,).
    start_set : ndarray of int
        The start's selected candidates.
    time_limit, mip_gap : float
        SCIP's limits.

    Returns
    -------
    MIPResult
        ``w`` of shape (1, d), ``b`` of shape (1,); ``selected`` is the set ``{eta = 1}``
        (best score first); ``objective`` the hinge objective plus the penalty, recomputed
        from ``(w, b)`` and the set.
    """
    t0 = time.perf_counter()
    constraints.check(Y_pm, X_cand, *start)
    bud, term, penalty = constraints.budget, constraints.boundary, constraints.boundary_penalty
    y_pm, m = Y_pm[:, 0], X_cand.shape[0]
    w0, b0, in0, ub, M = _start(X_lab, y_pm, X_cand, C, term, penalty, start, start_set)
    none = np.zeros(m, dtype=bool)
    limits = {"time": time_limit, "gap": mip_gap}
    mdl, variables = build_scip_model(
        X_lab, y_pm[:, None], X_cand, bud, C, M[:, None], none, none, "simple", limits
    )
    y_vars, pi, pj = _add_boundary(mdl, variables[4], term, penalty)
    start_y = (
        []
        if y_vars is None
        else [(y_vars[p], float(in0[pi[p]] and in0[pj[p]])) for p in range(pi.size)]
    )
    scip_warm_start(mdl, variables, X_lab, y_pm[:, None], w0[None, :], np.array([b0]), in0, start_y)
    status = scip_optimize(mdl)
    W, b = scip_best_point(mdl, variables)
    w, bb, in_S = w0, b0, in0
    if W is not None:
        eta = variables[4]
        best = mdl.getBestSol()
        cand_in = np.array([mdl.getSolVal(best, eta[j]) for j in range(m)]) > 0.5
        out_top = float((X_cand[~cand_in] @ W[0]).max(initial=-np.inf))
        b_new = min(float(b[0]), -out_top)  # every outsider exactly at or below zero
        if _total(W[0], b_new, X_lab, y_pm, C, term, penalty, cand_in) < ub:
            w, bb, in_S = W[0], b_new, cand_in
    objective = _total(w, bb, X_lab, y_pm, C, term, penalty, in_S)
    bound, gap, status = certify_gap(
        objective, float(mdl.getDualbound()), status, mip_gap, "Report this instance."
    )
    chosen = np.flatnonzero(in_S)
    score = X_cand[chosen] @ w + bb
    return MIPResult(
        w=w[None, :],
        b=np.array([bb]),
        objective=objective,
        bound=float(bound),
        gap=float(gap),
        status=status,
        n_nodes=int(mdl.getNNodes()),
        runtime=time.perf_counter() - t0,
        solver="scip",
        selected=chosen[np.lexsort((chosen, -score))],
    )


def solve_boundary_bnb(
    X_lab: np.ndarray,
    Y_pm: np.ndarray,
    X_cand: np.ndarray,
    constraints: Constraints,
    C: object,
    start: tuple,
    start_set: np.ndarray,
    time_limit: float,
    mip_gap: float,
) -> MIPResult:
    """As :func:`solve_boundary_mip`, by the package's own branch and bound.

    Its node QPs carry the same linearisation of the boundary
    (:func:`reserve.solvers._bnb.solve_bnb_boundary`); the parameters and the result are
    :func:`solve_boundary_mip`'s (``solver="bnb"``).
    """
    t0 = time.perf_counter()
    constraints.check(Y_pm, X_cand, *start)
    term, penalty = constraints.boundary, constraints.boundary_penalty
    y_pm = Y_pm[:, 0]
    w0, b0, in0, _, M = _start(X_lab, y_pm, X_cand, C, term, penalty, start, start_set)
    limits = {"time": time_limit, "gap": mip_gap}
    raw = solve_bnb_boundary(
        X_lab, y_pm, X_cand, constraints, C, M, (w0, b0), np.flatnonzero(in0), limits
    )
    w, bb, in_S = raw["w"], raw["b"], raw["in_S"]
    objective = _total(w, bb, X_lab, y_pm, C, term, penalty, in_S)
    bound, gap, status = certify_gap(
        objective, raw["bound"], raw["status"], mip_gap, "Report this instance."
    )
    chosen = np.flatnonzero(in_S)
    score = X_cand[chosen] @ w + bb
    return MIPResult(
        w=w[None, :],
        b=np.array([bb]),
        objective=objective,
        bound=float(bound),
        gap=float(gap),
        status=status,
        n_nodes=int(raw["n_nodes"]),
        runtime=time.perf_counter() - t0,
        solver="bnb",
        selected=chosen[np.lexsort((chosen, -score))],
        details={"n_open": raw["n_open"]},
    )
