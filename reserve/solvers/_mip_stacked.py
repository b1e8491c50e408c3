"""Several scorers sharing ``k`` cells, solved exactly with SCIP (multi-species TTK's MIP).

One binary per cell shared by every scorer; per scorer the hinge slacks and the epigraph of
the quadratic part. The status and gap are certified from the recomputed objective by the
same rule as the single-scorer MIP (:func:`reserve.solvers._mip.certify_gap`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from reserve.solvers._base import feasible_intercepts, top_k
from reserve.solvers._hinge import species_objectives
from reserve.solvers._mip import SCIP_STATUS, certify_gap, import_scip

__all__ = ["StackedMIPResult", "solve_stacked_mip"]


@dataclass(frozen=True)
class StackedMIPResult:
    """Outcome of :func:`solve_stacked_mip` (fields as in ``reserve.solvers._mip.MIPResult``)."""

    W: np.ndarray
    b: np.ndarray
    objective: float
    bound: float
    gap: float
    status: str
    n_nodes: int
    runtime: float
    solver: str
    warm_start_accepted: bool


def _big_m(Xl, Y_pm, Xc, C, ub_species):
    """Per-(cell, species) upper bounds on the score over ``{objective_s <= ub_species_s}``.

    For a row ``i`` labelled negative for species ``s``, ``C xi_is <= objective_s`` and
    ``xi_is >= 1 + w_s . x_i + b_s`` give ``w_s . x_i + b_s <= ub_s / C - 1``; with
    ``||w_s|| <= sqrt(2 ub_s)`` (from ``0.5 ||w_s||^2 <= objective_s``),

        w_s . z_j + b_s = (w_s . x_i + b_s) + w_s . (z_j - x_i)
                        <= ub_s / C - 1 + sqrt(2 ub_s) min_i ||z_j - x_i||.

    Also returns box bounds on ``b_s`` from the same argument (``||x_i||`` in place of the
    distance; positive rows bound it from below). With per-row weights ``C_is`` each row's
    bound uses its own ``ub_s / C_is`` (the nearest row's for ``M``: still valid); rows of
    weight 0 bound nothing.
    """
    from scipy.spatial import cKDTree

    m, S = Xc.shape[0], Y_pm.shape[1]
    M = np.empty((m, S))
    b_lo, b_hi = np.empty(S), np.empty(S)
    norms = np.linalg.norm(Xl, axis=1)
    for s in range(S):
        r = math.sqrt(2.0 * ub_species[s])
        Cs = _species_C(C, s, Xl.shape[0])
        if np.ndim(Cs) == 0:
            neg, pos = Y_pm[:, s] < 0, Y_pm[:, s] > 0
            dist = cKDTree(Xl[neg]).query(Xc, k=1)[0]
            M[:, s] = ub_species[s] / C - 1.0 + r * dist
            b_hi[s] = ub_species[s] / C - 1.0 + r * float(norms[neg].min())
            b_lo[s] = 1.0 - ub_species[s] / C - r * float(norms[pos].min())
            continue
        neg, pos = (Y_pm[:, s] < 0) & (Cs > 0), (Y_pm[:, s] > 0) & (Cs > 0)
        dist, near = cKDTree(Xl[neg]).query(Xc, k=1)
        M[:, s] = ub_species[s] / Cs[neg][near] - 1.0 + r * dist
        b_hi[s] = float(np.min(ub_species[s] / Cs[neg] + r * norms[neg])) - 1.0
        b_lo[s] = 1.0 - float(np.min(ub_species[s] / Cs[pos] + r * norms[pos]))
    return M, b_lo, b_hi


def _species_C(C, s: int, n: int):
    """Species ``s``'s hinge weight: ``C`` itself, or its per-row weights, shape ``(n,)``."""
    if np.ndim(C) == 0:
        return C
    C = np.asarray(C, dtype=np.float64)
    return C[:, s] if C.ndim == 2 else C


def _hinge_sum(pyscipopt, C, xi_vars):
    """``sum_s sum_i C_is xi_is``."""
    if np.ndim(C) == 0:
        return C * sum(xi.sum() for xi in xi_vars)
    n = xi_vars[0].shape[0]
    return pyscipopt.quicksum(
        float(c) * xi[i]
        for s, xi in enumerate(xi_vars)
        for i, c in enumerate(_species_C(C, s, n))
        if c != 0.0
    )


def _model(pyscipopt, Xl, Y_pm, Xc, k, C, ub_species, deadline, mip_gap):
    """The SCIP model and its variables ``(eta, w, b, xi, t)`` (lists over scorers)."""
    n, d = Xl.shape
    m, S = Xc.shape[0], Y_pm.shape[1]
    M, b_lo, b_hi = _big_m(Xl, Y_pm, Xc, C, ub_species)
    mdl = pyscipopt.Model("multi_ttk")
    mdl.hideOutput()
    mdl.setParam("limits/time", max(deadline - time.perf_counter(), 0.01))
    # SCIP's gap is (primal - dual) / min(|primal|, |dual|), never below ours,
    # (objective - bound) / objective; but its primal figure uses t >= w^2 only to its 1e-6
    # feasibility tolerance, a hair below the recomputed objective (measured: 1.002e-6 for a
    # 1e-6 target). Half the target leaves room for that.
    mdl.setParam("limits/gap", 0.5 * mip_gap)
    mdl.setParam("randomization/randomseedshift", 0)
    eta = mdl.addMatrixVar(m, vtype="B", name="eta")
    mdl.addCons(eta.sum() == k)
    w_vars, b_vars, xi_vars, t_vars = [], [], [], []
    for s in range(S):
        r = math.sqrt(2.0 * ub_species[s])
        w = mdl.addMatrixVar(d, vtype="C", lb=-r, ub=r, name=f"w{s}")
        bv = mdl.addVar(lb=float(b_lo[s]), ub=float(b_hi[s]), name=f"b{s}")
        xi = mdl.addMatrixVar(n, vtype="C", lb=0.0, name=f"xi{s}")
        t = mdl.addMatrixVar(d, vtype="C", lb=0.0, name=f"t{s}")
        y = Y_pm[:, s]
        mdl.addMatrixCons(y * (Xl @ w) + y * bv + xi >= 1.0)
        mdl.addMatrixCons(Xc @ w + bv - np.maximum(M[:, s], 0.0) * eta <= 0.0)
        for j in range(d):
            mdl.addCons(t[j] >= w[j] * w[j])
        w_vars.append(w)
        b_vars.append(bv)
        xi_vars.append(xi)
        t_vars.append(t)
    mdl.setObjective(
        0.5 * sum(t.sum() for t in t_vars) + _hinge_sum(pyscipopt, C, xi_vars), "minimize"
    )
    return mdl, (eta, w_vars, b_vars, xi_vars, t_vars)


def _warm_start(mdl, variables, Xl, Y_pm, Xc, k, W0, b0c) -> bool:
    """Offer ``(W0, b0c)`` with ``eta = 1`` on its top ``k`` cells; whether SCIP took it."""
    eta, w_vars, b_vars, xi_vars, t_vars = variables
    n, d = Xl.shape
    m, S = Xc.shape[0], Y_pm.shape[1]
    # eta = 1 on the top k cells by max-score (they hold every positive cell).
    sol = mdl.createSol()
    chosen = np.zeros(m, dtype=bool)
    chosen[top_k((Xc @ W0.T + b0c).max(axis=1), k)] = True
    for j in range(m):
        mdl.setSolVal(sol, eta[j], 1.0 if chosen[j] else 0.0)
    for s in range(S):
        xi0 = np.maximum(0.0, 1.0 - Y_pm[:, s] * (Xl @ W0[s] + b0c[s]))
        for j in range(d):
            mdl.setSolVal(sol, w_vars[s][j], float(W0[s, j]))
            # A hair above w^2 so the epigraph row is not rejected by rounding.
            mdl.setSolVal(sol, t_vars[s][j], float(W0[s, j] ** 2) * (1.0 + 1e-12))
        mdl.setSolVal(sol, b_vars[s], float(b0c[s]))
        for i in range(n):
            mdl.setSolVal(sol, xi_vars[s][i], float(xi0[i]))
    return bool(mdl.addSol(sol, free=True))


def _best_point(mdl, variables, Xl, Y_pm, Xc, k, C, W0, b0c, ub):
    """SCIP's best point made exactly feasible, if it beats the warm start; else the start."""
    _, w_vars, b_vars, _, _ = variables
    d, S = Xl.shape[1], Y_pm.shape[1]
    if mdl.getNSols() == 0:
        return W0, b0c
    best = mdl.getBestSol()
    Wn = np.array([[mdl.getSolVal(best, w_vars[s][j]) for j in range(d)] for s in range(S)])
    bn = np.array([mdl.getSolVal(best, b_vars[s]) for s in range(S)])
    # Scores recomputed from (w, b): SCIP's 1e-6 feasibility tolerance can leave a cell a
    # hair positive, and its objective figure is not ours.
    bn = feasible_intercepts(Xc @ Wn.T, bn, k)
    obj_n = float(species_objectives(Wn, bn, Xl, Y_pm, C).sum())
    if obj_n < ub:
        return Wn, bn
    return W0, b0c


def solve_stacked_mip(
    X_lab: np.ndarray,
    Y_pm: np.ndarray,
    X_cand: np.ndarray,
    k: int,
    C: float,
    W0: np.ndarray,
    b0: np.ndarray,
    svm_objectives: np.ndarray,
    *,
    time_limit: float = 60.0,
    mip_gap: float = 1e-6,
) -> StackedMIPResult:
    """Solve multi-species TTK exactly (or to a proven gap) with SCIP.

    Model: one binary ``eta_j`` per cell shared by every species,
    ``w_s . z_j + b_s <= M_js eta_j``, ``sum_j eta_j = k``, hinge slacks per (row, species) and
    the quadratic part through per-coordinate epigraphs ``t_sl >= w_sl^2`` (SCIP wants a linear
    objective).

    Big-M (see :func:`_big_m`): ``UB`` is the warm start's objective (padded by ``1e-7``
    relative). Every other species' objective is at least its SVM optimum (``svm_objectives``,
    padded down by ``1e-6`` relative: Clarabel solves them to ``1e-9``), so species ``s`` has
    ``objective_s <= UB_s = UB - sum_{s' != s} svm_s'``. Any point no worse than the warm start
    satisfies those bounds, so the optimum is kept; the same bounds give ``|w_sl| <= sqrt(2
    UB_s)`` and a box on ``b_s``. Features are centred first (scores unchanged, intercepts
    shifted back), which keeps the intercepts small.

    Parameters
    ----------
    X_lab, Y_pm, X_cand, k, C : the problem (as for :func:`reserve.solvers._fd.feasible_direction`)
    W0, b0 : ndarray of shape (S, d) and (S,)
        A feasible warm start (FD + polish); its objective is the upper bound behind the big-M
        values and the returned objective is never above it.
    svm_objectives : ndarray of shape (S,)
        Each species' unconstrained SVM objective (a lower bound on its part of any point).
    time_limit, mip_gap : float
        Seconds for the whole call; stop once ``(objective - bound) / objective <= mip_gap``.

    Returns
    -------
    StackedMIPResult
        ``objective`` recomputed from ``(W, b)`` made exactly feasible, never above the warm
        start's; ``status`` as certified by :func:`reserve.solvers._mip.certify_gap`.
    """
    pyscipopt = import_scip()
    t0 = time.perf_counter()
    mu = np.vstack([X_lab, X_cand]).mean(axis=0)
    Xl, Xc = X_lab - mu, X_cand - mu
    W0 = np.asarray(W0, dtype=np.float64)
    b0c = np.asarray(b0, dtype=np.float64) + W0 @ mu
    ub = float(species_objectives(W0, b0c, Xl, Y_pm, C).sum())
    ub_safe = ub * (1.0 + 1e-7) + 1e-9
    lb_species = np.maximum(np.asarray(svm_objectives, dtype=np.float64) * (1.0 - 1e-6), 0.0)
    ub_species = ub_safe - (lb_species.sum() - lb_species)
    mdl, variables = _model(pyscipopt, Xl, Y_pm, Xc, k, C, ub_species, t0 + time_limit, mip_gap)
    accepted = _warm_start(mdl, variables, Xl, Y_pm, Xc, k, W0, b0c)
    mdl.optimize()
    raw_status = str(mdl.getStatus())
    W_best, b_best = _best_point(mdl, variables, Xl, Y_pm, Xc, k, C, W0, b0c, ub)
    W_out = np.array(W_best, dtype=np.float64)
    b_out = feasible_intercepts(X_cand @ W_out.T, b_best - W_out @ mu, k)
    objective = float(species_objectives(W_out, b_out, X_lab, Y_pm, C).sum())
    best_lb = max(float(mdl.getDualbound()), float(lb_species.sum()))
    bound, gap, status = certify_gap(
        objective, best_lb, SCIP_STATUS.get(raw_status, raw_status), mip_gap, "Report it."
    )
    return StackedMIPResult(
        W=W_out,
        b=b_out,
        objective=objective,
        bound=float(bound),
        gap=float(gap),
        status=status,
        n_nodes=int(mdl.getNNodes()),
        runtime=time.perf_counter() - t0,
        solver="scip",
        warm_start_accepted=accepted,
    )
