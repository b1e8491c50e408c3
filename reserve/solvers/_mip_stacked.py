"""Several scorers sharing ``k`` cells, solved exactly with SCIP (multi-species TTK's MIP).

The model, its warm start, the result type and the certified gap are the single-scorer
MIP's (:func:`reserve.solvers._mip.build_scip_model` over ``S`` scorers,
:class:`reserve.solvers._mip.MIPResult`, :func:`reserve.solvers._mip.certify_gap`); this
module adds only the per-(cell, scorer) big-M values and box bounds, from the SVM optima.
"""

from __future__ import annotations

import math
import time

import numpy as np

from reserve.solvers._base import feasible_intercepts, top_k
from reserve.solvers._hinge import species_objectives
from reserve.solvers._mip import (
    MIPResult,
    build_scip_model,
    certify_gap,
    import_scip,
    intercept_box,
    scip_best_point,
    scip_optimize,
    scip_warm_start,
    start_eta,
)
from reserve.solvers.budget import Budget

__all__ = ["solve_stacked_mip"]


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
    for s in range(S):
        r = math.sqrt(2.0 * ub_species[s])
        Cs = _species_C(C, s, Xl.shape[0])
        b_lo[s], b_hi[s] = intercept_box(Xl, Y_pm[:, s], Cs, ub_species[s])
        neg = Y_pm[:, s] < 0
        if np.ndim(Cs) == 0:
            M[:, s] = ub_species[s] / C - 1.0 + r * cKDTree(Xl[neg]).query(Xc, k=1)[0]
            continue
        neg &= Cs > 0
        dist, near = cKDTree(Xl[neg]).query(Xc, k=1)
        M[:, s] = ub_species[s] / Cs[neg][near] - 1.0 + r * dist
    return M, b_lo, b_hi


def _species_C(C, s: int, n: int):
    """Species ``s``'s hinge weight: ``C`` itself, or its per-row weights, shape ``(n,)``."""
    if np.ndim(C) == 0:
        return C
    C = np.asarray(C, dtype=np.float64)
    return C[:, s] if C.ndim == 2 else C


def _best_point(W_new, b_new, Xl, Y_pm, Xc, k, C, W0, b0c, ub):
    """SCIP's best point made exactly feasible, if it beats the warm start; else the start."""
    if W_new is None:
        return W0, b0c
    # Scores recomputed from (w, b): SCIP's 1e-6 feasibility tolerance can leave a cell a
    # hair positive, and its objective figure is not ours.
    bn = feasible_intercepts(Xc @ W_new.T, b_new, k)
    if float(species_objectives(W_new, bn, Xl, Y_pm, C).sum()) < ub:
        return W_new, bn
    return W0, b0c


def _run(Xl, Y_pm, Xc, k, C, W0, b0c, ub_species, deadline, mip_gap):
    """Build the shared model over the ``S`` scorers, warm-start and solve it."""
    # SCIP's gap is (primal - dual) / min(|primal|, |dual|), never below ours,
    # (objective - bound) / objective; but its primal figure uses t >= w^2 only to its 1e-6
    # feasibility tolerance, a hair below the recomputed objective (measured: 1.002e-6 for a
    # 1e-6 target). Half the target leaves room for that.
    m = Xc.shape[0]
    M, b_lo, b_hi = _big_m(Xl, Y_pm, Xc, C, ub_species)
    limits = {"time": deadline - time.perf_counter(), "gap": 0.5 * mip_gap}
    limits["fast_heuristics"] = False  # as this model always ran
    none = np.zeros(m, dtype=bool)
    bud = Budget.cells(k, m)
    boxes = (np.sqrt(2.0 * ub_species), b_lo, b_hi)
    mdl, variables = build_scip_model(
        Xl, Y_pm, Xc, bud, C, np.maximum(M, 0.0), none, none, "tight", limits, boxes
    )
    # eta = 1 on the top k cells by max-score (they hold every positive cell).
    sel = start_eta(bud, none, np.arange(m), (Xc @ W0.T + b0c).max(axis=1))
    accepted = scip_warm_start(mdl, variables, Xl, Y_pm, W0, b0c, sel)
    status = scip_optimize(mdl)
    W_new, b_new = scip_best_point(mdl, variables)
    return mdl, status, accepted, W_new, b_new


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
) -> MIPResult:
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
    MIPResult
        ``w`` of shape (S, d) and ``b`` of shape (S,); ``selected`` the top ``k`` cells by
        max-score; ``objective`` recomputed from ``(W, b)`` made exactly feasible, never
        above the warm start's; ``status`` as certified by :func:`reserve.solvers._mip.certify_gap`.
    """
    import_scip()
    t0 = time.perf_counter()
    mu = np.vstack([X_lab, X_cand]).mean(axis=0)
    Xl, Xc = X_lab - mu, X_cand - mu
    W0 = np.asarray(W0, dtype=np.float64)
    b0c = np.asarray(b0, dtype=np.float64) + W0 @ mu
    ub = float(species_objectives(W0, b0c, Xl, Y_pm, C).sum())
    ub_safe = ub * (1.0 + 1e-7) + 1e-9
    lb_species = np.maximum(np.asarray(svm_objectives, dtype=np.float64) * (1.0 - 1e-6), 0.0)
    ub_species = ub_safe - (lb_species.sum() - lb_species)
    args = (Xl, Y_pm, Xc, k, C, W0, b0c, ub_species, t0 + time_limit, mip_gap)
    mdl, status, accepted, W_new, b_new = _run(*args)
    W_best, b_best = _best_point(W_new, b_new, Xl, Y_pm, Xc, k, C, W0, b0c, ub)
    W_out = np.array(W_best, dtype=np.float64)
    b_out = feasible_intercepts(X_cand @ W_out.T, b_best - W_out @ mu, k)
    objective = float(species_objectives(W_out, b_out, X_lab, Y_pm, C).sum())
    best_lb = max(float(mdl.getDualbound()), float(lb_species.sum()))
    bound, gap, status = certify_gap(objective, best_lb, status, mip_gap, "Report it.")
    return MIPResult(
        w=W_out,
        b=b_out,
        objective=objective,
        bound=float(bound),
        gap=float(gap),
        status=status,
        n_nodes=int(mdl.getNNodes()),
        runtime=time.perf_counter() - t0,
        solver="scip",
        selected=top_k((X_cand @ W_out.T + b_out).max(axis=1), k),
        details={"warm_start_accepted": accepted},
    )
