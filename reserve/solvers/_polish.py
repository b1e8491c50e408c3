"""Polish: a swap local search that carries a TTK solution to the optimum of its neighbourhood.

For a fixed set ``S`` of ``k`` candidates allowed to score positive, TTK is a convex QP (every
other candidate must score ``<= 0``; see :mod:`reserve.solvers._qp`). The global optimum is the
best ``S``. Starting from the top ``k`` of the feasible-direction solution, we solve the QP for
``S`` and then try swaps ``S - {i} + {j}``:

* outsiders ``j`` in decreasing order of their constraint's multiplier ``beta_j`` (the first-order
  gain of letting ``j`` score positive; ``beta_j = 0`` means no gain, so they are never tried);
* insiders ``i`` in increasing order of score (an insider already scoring ``<= 0`` costs nothing
  to give up).

Pairs are tried along anti-diagonals of that ranking (best outsider with best insider first),
the first swap that lowers the objective is accepted, and the search stops when ``max_pairs``
pairs in a row bring nothing or no constraint is active (then the QP optimum is the plain SVM,
the global optimum).

With many candidates the QP keeps only the outsiders near the boundary (constraint
generation): it adds every violated outsider and re-solves until none is violated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reserve.solvers._base import top_k
from reserve.solvers._qp import CuttingPlaneState, QPResult, hinge_objective, solve_fixed_set

__all__ = ["PolishResult", "polish", "solve_subset"]

#: Below this many candidates the QP carries every outsider's constraint.
_FULL_CONSTRAINTS = 400


@dataclass
class PolishResult:
    """Outcome of the polish."""

    w: np.ndarray
    b: float
    objective: float
    selected: np.ndarray
    n_swaps: int = 0
    n_qp: int = 0
    history: list[float] = field(default_factory=list)


def solve_subset(
    X_lab: np.ndarray,
    y_pm: np.ndarray,
    X_cand: np.ndarray,
    in_S: np.ndarray,
    C: float,
    hint_scores: np.ndarray | None = None,
    warm_start: CuttingPlaneState | None = None,
) -> tuple[QPResult, np.ndarray, int]:
    """Solve the fixed-set QP for the candidates marked ``in_S``.

    Parameters
    ----------
    X_lab, y_pm, X_cand, C : the TTK problem.
    in_S : ndarray of bool, shape (m,)
        Candidates allowed to score positive.
    hint_scores : ndarray of shape (m,) or None
        Current scores, used to pick the first constraints when there are many candidates.
    warm_start : CuttingPlaneState or None
        Cuts shared between solves on the same labelled rows (used by the cutting-plane QP
        solver, i.e. from ``CUTTING_PLANE_MIN_ROWS`` labelled rows); updated in place.

    Returns
    -------
    result : QPResult
    beta : ndarray of shape (m,)
        Multiplier of every candidate's constraint (0 for members of S and inactive rows).
    n_solves : int
        QPs solved (more than one when constraints were generated).
    """
    m = X_cand.shape[0]
    out = np.flatnonzero(~in_S)
    if m <= _FULL_CONSTRAINTS or hint_scores is None:
        rows = out
    else:
        n0 = min(out.size, max(4 * int(in_S.sum()), 128))
        rows = out[np.argpartition(-hint_scores[out], n0 - 1)[:n0]]
    n_solves = 0
    while True:
        res = solve_fixed_set(X_lab, y_pm, C, X_cand[rows], warm_start=warm_start)
        n_solves += 1
        if rows.size == out.size:
            break
        s_out = (X_cand @ res.w)[out] + res.b  # no copy of X_cand[out]
        x_max = max(float(X_cand.max()), -float(X_cand.min()))  # np.abs would copy X_cand
        scale = abs(res.b) + float(np.linalg.norm(res.w)) * x_max
        viol = out[s_out > 1e-7 * max(scale, 1.0)]
        viol = np.setdiff1d(viol, rows, assume_unique=True)
        if viol.size == 0:
            break
        rows = np.union1d(rows, viol)
    beta = np.zeros(m)
    beta[rows] = res.beta
    # A point the interior-point method leaves a hair above zero is made feasible exactly by
    # lowering b; the objective is recomputed by the caller from (w, b).
    if rows.size:
        top = float((X_cand @ res.w)[out].max()) + res.b
        if top > 0.0:
            b = res.b - top
            res = QPResult(
                w=res.w,
                b=b,
                objective=hinge_objective(res.w, b, X_lab, y_pm, C),
                beta=res.beta,
                status=res.status,
            )
    return res, beta, n_solves


def _pairs(n_in: int, n_out: int, limit: int) -> list[tuple[int, int]]:
    """Rank pairs (insider rank, outsider rank) along anti-diagonals, at most ``limit``."""
    pairs: list[tuple[int, int]] = []
    for diag in range(n_in + n_out - 1):
        for a in range(max(0, diag - n_out + 1), min(diag, n_in - 1) + 1):
            pairs.append((a, diag - a))
            if len(pairs) >= limit:
                return pairs
    return pairs


def polish(
    X_lab: np.ndarray,
    y_pm: np.ndarray,
    X_cand: np.ndarray,
    k: int,
    C: float,
    w: np.ndarray,
    b: float,
    *,
    max_rounds: int = 200,
    max_pairs: int = 40,
    tol: float = 1e-9,
) -> PolishResult:
    """Improve a feasible TTK solution by fixed-set QPs and swap moves.

    Parameters
    ----------
    X_lab, y_pm, X_cand, k, C : the TTK problem.
    w, b : a feasible start (at most ``k`` candidates score positive).
    max_rounds : int
        Accepted swaps at most.
    max_pairs : int
        Pairs tried per round before the search stops.
    tol : float
        Relative objective decrease that counts as an improvement.

    Returns
    -------
    PolishResult
    """
    scores = X_cand @ w + b
    S = top_k(scores, k)
    in_S = np.zeros(X_cand.shape[0], dtype=bool)
    in_S[S] = True
    # Cuts of the cutting-plane QP solver (large n) stay valid whatever the set: share them.
    warm = CuttingPlaneState()
    res, beta, n_qp = solve_subset(X_lab, y_pm, X_cand, in_S, C, scores, warm)
    history = [res.objective]
    n_swaps = 0
    for _ in range(max_rounds):
        beta_tol = 1e-7 * max(float(beta.max(initial=0.0)), 1e-300)
        outs = np.flatnonzero((~in_S) & (beta > beta_tol))
        if outs.size == 0:
            break  # no active constraint: the QP optimum is the unconstrained SVM
        outs = outs[np.lexsort((outs, -beta[outs]))]
        hint = X_cand @ res.w + res.b
        ins = np.flatnonzero(in_S)
        ins = ins[np.lexsort((ins, hint[ins]))]
        improved = False
        for a, c in _pairs(ins.size, outs.size, max_pairs):
            i, j = ins[a], outs[c]
            trial = in_S.copy()
            trial[i], trial[j] = False, True
            new, new_beta, used = solve_subset(X_lab, y_pm, X_cand, trial, C, hint, warm)
            n_qp += used
            if new.objective < res.objective - tol * max(1.0, abs(res.objective)):
                res, beta, in_S = new, new_beta, trial
                history.append(res.objective)
                n_swaps += 1
                improved = True
                break
        if not improved:
            break
    selected = np.flatnonzero(in_S)
    return PolishResult(
        w=res.w,
        b=res.b,
        objective=res.objective,
        selected=selected,
        n_swaps=n_swaps,
        n_qp=n_qp,
        history=history,
    )
