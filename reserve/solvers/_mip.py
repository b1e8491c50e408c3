"""Exact TTK by mixed-integer quadratic programming (the paper's eq. ``opt_mip``, made strong).

TTK with the relaxed budget ("at most ``k`` candidates score positive") is

    min_{w, b, xi, eta}  0.5 ||w||^2 + C sum_i xi_i
    s.t.  xi_i >= 1 - y_i (w . x_i + b),  xi_i >= 0           (labelled rows i)
          w . z_j + b <= M_j eta_j,  eta_j in {0, 1}           (candidates j)
          sum_j eta_j = k

With a money budget (costs ``c_j > 0``, budget ``B``) the last row is the knapsack
``sum_j c_j eta_j <= B (1 + 1e-12)`` (the package's "fits" tolerance). When every cost is the
same (the cell budget is ``c = 1``, ``B = k``) it is written as the cardinality row above with
``k`` the number of candidates that fit, so the cell budget builds exactly the model it always
had; ``= k`` is valid there because letting one more candidate score positive only removes a
constraint.

The paper uses one large constant ``G`` for every ``M_j``. Here each ``M_j`` is the largest
score candidate ``j`` can reach among points whose objective is at most an upper bound ``UB``
(the warm start's objective), which contains the optimum, so the values are valid:

1. a first pass maximises each score over ``{hinge rows, objective <= UB}``, one small
   second-order-cone problem per candidate (Clarabel); 100-300x smaller than
   ``sqrt(2 UB) ||z_j|| + b_max`` on the benchmarks;
2. if the MIP's continuous relaxation still leaves a wide gap, further rounds maximise each
   score over that relaxation intersected with ``objective <= UB``, feeding each new value
   back at once (Gauss-Seidel); on ionosphere this lifts the root bound from 28 to 97
   (optimum 121).

The same problems fix variables before branching: a candidate whose largest reachable score is
``<= 0`` can never be positive (``eta_j = 0``, plain linear constraint); one whose smallest
reachable score is ``> 0`` is always positive (``eta_j = 1``). The quadratic objective enters
SCIP as one epigraph constraint per coordinate, ``t_l >= w_l^2``, which SCIP linearises
coordinate by coordinate. Measurements behind these choices: benchmarks/results/mip.md.

Several scorers (multi-species TTK, labels of shape ``(n, S)``) share the binaries: a cell is
positive when any scorer scores it positive. Everything above is written once over scorers
``W`` of shape ``(S, d)``: the first pass bounds each scorer over ``{hinge rows, objective_s
<= UB_s}`` with ``UB_s = UB - sum_{s' != s} svm_s'`` (every other scorer's objective is at
least its SVM optimum), the rounds run over the relaxation with all scorers. One scorer
(``UB_s = UB``) builds exactly the single model.

Features are centred internally (exactly equivalent: ``w`` is unchanged and the intercept is
shifted back), which keeps the intercept and the big-M coefficients small. They are *not*
rescaled: rescaling a column changes ``||w||`` and hence the problem being solved, so scaling
is the caller's job (``TTK.fit`` asks for standardised features).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import clarabel
import numpy as np
import scipy.sparse as sp

from reserve.errors import InvalidInputError, MissingDependencyError, SolverError
from reserve.solvers._base import feasible_intercepts, greedy_fit, top_k
from reserve.solvers._conic import clarabel_settings
from reserve.solvers._hinge import species_objectives, species_weights
from reserve.solvers._qp import hinge_objective, solve_fixed_set
from reserve.solvers._validation import check_positive_real
from reserve.solvers.constraints import Constraints

__all__ = [
    "FORMULATIONS",
    "SCIP_STATUS",
    "SOLVERS",
    "MIPResult",
    "build_scip_model",
    "certify_gap",
    "import_scip",
    "intercept_box",
    "scip_best_point",
    "scip_optimize",
    "scip_warm_start",
    "solve_ttk_mip",
    "start_eta",
]

#: Values accepted by ``solver``.
SOLVERS: tuple[str, ...] = ("auto", "scip", "gurobi", "bnb")
#: Values accepted by ``formulation`` (``"tight"`` measured fastest; see benchmarks/results).
FORMULATIONS: tuple[str, ...] = ("tight", "simple", "indicator")

SCIP_STATUS = {
    "optimal": "optimal",
    "gaplimit": "gap_limit",
    "timelimit": "time_limit",
    "nodelimit": "node_limit",
    "totalnodelimit": "node_limit",
    "memlimit": "memory_limit",
    "userinterrupt": "interrupted",
}
# Gurobi status codes (gurobipy.GRB.Status) to ours; the numbers are stable across versions.
_GUROBI_STATUS = {2: "optimal", 9: "time_limit", 8: "node_limit", 11: "interrupted"}
_GUROBI_SIZE_LIMIT = 10010  # GRB.Error.SIZE_LIMIT_EXCEEDED: restricted (pip) licence
_BOUND_TIME_SHARE = 0.5
_ROUNDS_GAP = 0.25  # relaxation rounds only when the plain pass leaves a wider gap
_MAX_BOUND_ROUNDS = 30


@dataclass(frozen=True)
class MIPResult:
    """Outcome of :func:`solve_ttk_mip` (and of the ``S``-scorer MIP of multi-species TTK).

    Attributes
    ----------
    w : ndarray of shape (d,), or (S, d) for ``S`` scorers
        Weights in the caller's feature space.
    b : float, or ndarray of shape (S,) for ``S`` scorers
        Intercept in the caller's feature space.
    objective : float
        ``0.5 ||w||^2 + C sum hinge``, recomputed from ``(w, b)`` (not the solver's figure).
    bound : float
        Proven lower bound on the optimum; never above ``objective``.
    gap : float
        ``(objective - bound) / objective``.
    status : str
        ``"optimal"`` (the solver proved it), ``"gap_limit"`` (proved within ``mip_gap``),
        ``"time_limit"`` (incumbent returned, optimality not proved), ``"not_proved"`` (the
        solver stopped but the recomputed gap misses ``mip_gap``), or another limit.
    n_nodes : int
        Branch-and-bound nodes processed.
    runtime : float
        Wall time of the whole call in seconds, bound tightening included.
    solver : str
        ``"scip"``, ``"gurobi"`` or ``"bnb"``: the solver that ran.
    selected : ndarray of int64, shape (k,) or (n_selected,)
        Positions (``0 .. m-1``) of the chosen candidates by the returned scores, best first:
        the ``k`` best, or with costs :func:`reserve.solvers._base.budget_select`'s choice.
    details : dict
        Diagnostics: time spent tightening bounds and in the MIP, how many candidates were
        fixed in or out, whether the warm start was accepted, the big-M statistics.
    """

    w: np.ndarray
    b: float
    objective: float
    bound: float
    gap: float
    status: str
    n_nodes: int
    runtime: float
    solver: str
    selected: np.ndarray
    details: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Feasible points and the upper bound
# --------------------------------------------------------------------------------------------


def _scorer(Y, C, s: int):
    """Scorer ``s``'s labels (contiguous) and hinge weight: ``C``, or its per-row weights."""
    return np.ascontiguousarray(Y[:, s]), species_weights(C, s)


def _scores(W, b, Xc):
    """Candidate scores, shape (m, S); one scorer's are TTK's own ``Xc @ w + b``."""
    if W.shape[0] == 1:
        return (Xc @ W[0] + b[0])[:, None]
    return Xc @ W.T + b


def _mu_dot(W, mu):
    """``w_s . mu`` per scorer (one scorer: a plain dot product)."""
    return np.array([mu @ W[0]]) if W.shape[0] == 1 else W @ mu


def _objective(W, b, Xl, Y, C) -> float:
    """The objective summed over the scorers (one scorer: :func:`hinge_objective`)."""
    if W.shape[0] == 1:
        y, c = _scorer(Y, C, 0)
        return hinge_objective(W[0], float(b[0]), Xl, y, c)
    return float(species_objectives(W, b, Xl, Y, C).sum())


def _feasible(bud, W, b, Xc):
    """Intercepts lowered until the positive candidates fit (several scorers: ``k`` cells)."""
    if W.shape[0] == 1:
        return np.array([bud.make_feasible(W[0], float(b[0]), Xc)])
    return feasible_intercepts(Xc @ W.T, np.asarray(b, dtype=np.float64), bud.card)


def _select(bud, W, b, Xc):
    """The chosen candidates, best first (several scorers: top ``k`` by max-score)."""
    if W.shape[0] == 1:
        return bud.select(Xc @ W[0] + b[0])
    return top_k((Xc @ W.T + b).max(axis=1), bud.card)


def _polish(Xl, Y, Xc, bud, C, W, b):
    """Best of ``(W, b)`` made feasible and the fixed-set QPs (one per scorer) on its set."""
    b = _feasible(bud, W, b, Xc)
    best = (_objective(W, b, Xl, Y, C), W, b)
    out = np.ones(Xc.shape[0], dtype=bool)
    out[_select(bud, W, b, Xc)] = False
    try:
        fits = [solve_fixed_set(Xl, *_scorer(Y, C, s), Xc[out]) for s in range(Y.shape[1])]
    except SolverError:
        return best
    W2 = np.vstack([r.w for r in fits])
    b2 = _feasible(bud, W2, np.array([r.b for r in fits], dtype=np.float64), Xc)
    obj2 = _objective(W2, b2, Xl, Y, C)
    if obj2 < best[0]:
        best = (obj2, W2, b2)
    return best


# --------------------------------------------------------------------------------------------
# Bounds on candidate scores over {objective <= UB}
# --------------------------------------------------------------------------------------------


class _Relaxation:
    """The MIP's continuous relaxation over ``S`` scorers, as one Clarabel conic problem.

    Variables ``(w_1..w_S, b_1..b_S, xi_1..xi_S, eta_free)``; constraints: each scorer's hinge
    rows, ``w_s.z_j + b_s <= 0`` for candidates fixed out and ``w_s.z_j + b_s <= M_js eta_j``
    for free ones; ``0 <= eta_j <= 1`` and ``sum eta = k_rem`` (or ``<=`` when fewer than
    ``k_rem`` are free), or with unequal costs ``sum c_j eta_j <= room`` (``knapsack = (c_free,
    room)``). Candidates fixed in are unconstrained. One scorer (``Y`` and ``M`` of one
    column) builds the single model.

    With ``ub`` given, the objective becomes the constraint ``0.5 ||w||^2 + C sum xi <= ub``
    over all scorers (rotated cone ``||w||^2 <= 2 s``, ``s = ub - C sum xi``, written as
    ``||(s - 1/2, w)|| <= s + 1/2``) and :meth:`max_score` maximises one scorer's score of one
    candidate over it: the problem is built once, each candidate only changes the linear
    objective. Without ``ub``, :meth:`lower_bound` returns the relaxation's optimum, a valid
    lower bound.
    """

    def __init__(self, Xl, Y, Xc, C, k_rem, M, out_idx, free_idx, ub=None, knapsack=None) -> None:
        (n, d), S = Xl.shape, Y.shape[1]
        f, o = free_idx.size, out_idx.size
        self.d, self.S = d, S
        nw, nx = S * (d + 1), S * n  # the (w, b) columns, the xi columns
        nv = nw + nx + f

        def zeros(r: int, c: int) -> sp.csr_matrix:
            return sp.csr_matrix((r, c))

        eye = lambda r: sp.identity(r, format="csr")  # noqa: E731
        rows, rhs = _scorer_rows(Xl, Y, Xc, M, out_idx, free_idx)
        n_nonneg = sum(r.shape[0] for r in rows)
        cones = []
        if f and knapsack is not None:
            c_free, room = knapsack
            rows.append(sp.hstack([zeros(1, nw + nx), np.asarray(c_free)[None, :]]))
            rhs.append(np.array([float(room)]))
            n_nonneg += 1
        elif f:
            rows.append(sp.hstack([zeros(1, nw + nx), np.ones((1, f))]))
            rhs.append(np.array([float(k_rem)]))
            if f > k_rem:
                cones.append(clarabel.ZeroConeT(1))
            else:
                n_nonneg += 1
        cones.insert(0, clarabel.NonnegativeConeT(n_nonneg))
        c_xi = np.concatenate([np.full(n, _scorer(Y, C, s)[1]) for s in range(S)])
        if ub is not None:
            cvec = sp.csr_matrix(np.r_[np.zeros(nw), c_xi, np.zeros(f)][None, :])
            rows += [cvec, cvec, sp.hstack([-eye(S * d), zeros(S * d, S + nx + f)])]
            rhs += [np.array([ub + 0.5]), np.array([ub - 0.5]), np.zeros(S * d)]
            cones.append(clarabel.SecondOrderConeT(S * d + 2))
            P = sp.csc_matrix((nv, nv))
            q = np.zeros(nv)
        else:
            P = sp.diags(np.r_[np.ones(S * d), np.zeros(S + nx + f)], format="csc")
            q = np.r_[np.zeros(nw), c_xi, np.zeros(f)]
        A = sp.vstack(rows, format="csc")
        A.sort_indices()
        # Data positions of the -M_js entries: in each eta column the S big-M rows come first.
        first = A.indptr[nw + nx : nw + nx + f]
        for s in range(S if f else 0):
            if not np.array_equal(A.indices[first + s], 2 * nx + S * o + s * f + np.arange(f)):
                raise SolverError("internal error: unexpected sparsity pattern of the relaxation.")
        self._m_pos = first.astype(np.int64)
        self._nv = nv
        self._solver = clarabel.DefaultSolver(
            P, q, A, np.concatenate(rhs), cones, clarabel_settings()
        )

    def set_big_m(self, pos: int, value: float, s: int = 0) -> None:
        """Replace scorer ``s``'s ``M`` of the ``pos``-th free candidate (no rebuild)."""
        self._solver.update(A=(self._m_pos[pos : pos + 1] + s, np.array([-max(value, 0.0)])))

    def max_score(self, z: np.ndarray, sign: float = 1.0, s: int = 0) -> float | None:
        """Upper bound on ``sign * (w_s . z + b_s)`` over the relaxation (``None`` on failure).

        ``sign=-1`` gives minus a lower bound on the score.
        """
        q = np.zeros(self._nv)
        q[s * self.d : (s + 1) * self.d] = -sign * z
        q[self.S * self.d + s] = -sign
        self._solver.update(q=q)
        sol = self._solver.solve()
        if str(sol.status) != "Solved":  # not "AlmostSolved": the bound must be reliable
            return None
        # We minimise -sign*score; the dual objective bounds that from below, so -dual bounds
        # sign*score from above. Take the larger of both and pad for the solver's tolerances.
        val = float(max(-sol.obj_val, -sol.obj_val_dual))
        return val + 1e-6 * (1.0 + abs(val))

    def lower_bound(self) -> float:
        """Optimum of the relaxation, padded downwards (``-inf`` if the solve failed)."""
        sol = self._solver.solve()
        if str(sol.status) != "Solved":
            return -math.inf
        val = float(min(sol.obj_val, sol.obj_val_dual))
        return val - 1e-7 * (1.0 + abs(val))  # solved to 1e-8; pad tenfold


def _scorer_rows(Xl, Y, Xc, M, out_idx, free_idx):
    """The relaxation's rows over the ``S`` scorers: hinge, ``xi >= 0``, fixed out, big-M and
    ``0 <= eta <= 1``; ``(rows, rhs)``. One scorer gives the single model's blocks."""
    (n, d), S = Xl.shape, Y.shape[1]
    f, o = free_idx.size, out_idx.size
    nw, nx = S * (d + 1), S * n

    def zeros(r: int, c: int) -> sp.csr_matrix:
        return sp.csr_matrix((r, c))

    def per_scorer(blocks):  # block-diagonal over the scorers (one scorer: the block itself)
        return blocks[0] if S == 1 else sp.block_diag(blocks)

    eye = lambda r: sp.identity(r, format="csr")  # noqa: E731
    ys = [np.ascontiguousarray(Y[:, s])[:, None] for s in range(S)]
    rows = [
        sp.hstack(
            [
                per_scorer([-(y * Xl) for y in ys]),
                per_scorer([-y for y in ys]),
                -eye(nx),
                zeros(nx, f),
            ]
        ),
        sp.hstack([zeros(nx, nw), -eye(nx), zeros(nx, f)]),
    ]
    rhs = [-np.ones(nx), np.zeros(nx)]
    if o:
        rows.append(
            sp.hstack(
                [
                    per_scorer([Xc[out_idx]] * S),
                    per_scorer([np.ones((o, 1))] * S),
                    zeros(S * o, nx + f),
                ]
            )
        )
        rhs.append(np.zeros(S * o))
    if f:
        if S == 1:
            big_m = sp.diags(M[free_idx, 0])
        else:  # a scorer's M of 0 on a free candidate: kept as an entry (a hair above 0)
            big_m = sp.vstack([sp.diags(np.maximum(M[free_idx, s], 1e-300)) for s in range(S)])
        rows += [
            sp.hstack(
                [
                    per_scorer([Xc[free_idx]] * S),
                    per_scorer([np.ones((f, 1))] * S),
                    zeros(S * f, nx),
                    -big_m,
                ]
            ),
            sp.hstack([zeros(f, nw + nx), -eye(f)]),
            sp.hstack([zeros(f, nw + nx), eye(f)]),
        ]
        rhs += [np.zeros(S * f), np.zeros(f), np.ones(f)]
    return rows, rhs


def _tighten(Xl, Y, Xc, C, bud, ub, ub_total, M, fixed_in, s0, deadline, max_rounds, target):
    """Iterated bound tightening of the big-M values ``M`` of shape (m, S), with fixing.

    Pass 0, per scorer ``s``, maximises every candidate's score over the plain region
    ``{hinge rows, objective_s <= ub_s}`` (and, for candidates positive at the start point,
    minimises it: a smallest score ``> 0`` fixes the candidate in, for every scorer). Every
    point no
    worse than the start lies in these regions, so the values stay valid. Then
    :func:`_rounds` over the MIP's continuous relaxation with ``objective <= ub_total``. A
    candidate whose largest score is ``<= 0`` for every scorer is fixed out.

    Returns
    -------
    M, fixed_in, lb, history
        The tightened values, the candidates fixed in, the relaxation's best lower bound
        (``-inf`` without rounds) and its history.
    """
    M, fixed_in = M.copy(), fixed_in.copy()
    # Pass 0 over the plain region {hinge rows, objective <= ub}: no eta variables, so each
    # problem is several times smaller than the relaxation's; it does most of the shrinking.
    none = np.zeros(0, dtype=np.int64)
    for s in range(Y.shape[1]):
        y, c = _scorer(Y, C, s)
        plain = _Relaxation(Xl, y[:, None], Xc, c, 0, M[:, [s]], none, none, ub=ub[s])
        for j in range(Xc.shape[0]):
            if time.perf_counter() > deadline:
                break
            v = plain.max_score(Xc[j])
            if v is not None:
                M[j, s] = min(M[j, s], v)
        for j in np.flatnonzero((s0[:, s] > 0) & (M[:, s] > 0) & ~fixed_in):
            if time.perf_counter() > deadline or not bud.fits_with(fixed_in, j):
                break
            v = plain.max_score(Xc[j], sign=-1.0)  # v >= -(smallest score)
            if v is not None and v < 0.0:
                fixed_in[j] = True
    lb, history = _rounds(
        Xl, Y, Xc, C, bud, ub_total, M, fixed_in, s0, deadline, max_rounds, target
    )
    return M, fixed_in, lb, history


def _rounds(Xl, Y, Xc, C, bud, ub, M, fixed_in, s0, deadline, max_rounds, target):
    """Relaxation rounds over the ``S`` scorers; ``M`` (m, S) and ``fixed_in`` updated in place.

    Each round maximises (and, where a scorer is positive at the start point, minimises) every
    free candidate's score of every scorer over the continuous relaxation built with the
    current ``M`` plus ``objective <= ub``; each new value goes into the relaxation at once
    (Gauss-Seidel). Every point with objective at most ``ub`` whose positive candidates fit
    the budget is feasible for that relaxation, so the new values stay valid; smaller ``M``
    tighten the relaxation in turn. A candidate with a scorer whose smallest score is ``> 0``
    is fixed in (and uses up its cost of the budget). Rounds stop once the relaxation's lower
    bound reaches ``target``, when it gains less than 1% of the remaining gap while the sum of
    the free ``M`` shrank by less than 5%, at ``max_rounds`` or at ``deadline``. Returns
    ``(lb, history)``.
    """
    lb, history, shrink = -math.inf, [], 1.0
    for _ in range(max_rounds):
        fixed_out = (M <= 0.0).all(axis=1)
        free = np.flatnonzero(~fixed_out & ~fixed_in)
        k_rem, knapsack = bud.row(fixed_in, free)
        args = (Xl, Y, Xc, C, k_rem, np.maximum(M, 0.0), np.flatnonzero(fixed_out), free)
        new_lb = _Relaxation(*args, knapsack=knapsack).lower_bound()
        history.append(new_lb)
        stalled = (new_lb - lb) < 0.01 * (ub - lb) and shrink < 0.05
        # No free candidate fits any more (k_rem == 0): the rest is convex.
        done = new_lb >= target or free.size == 0 or bud.none_fits(fixed_in, free)
        # A relaxation already within _ROUNDS_GAP of ub is left to branch and bound, which
        # closes such gaps faster than further rounds (diabetes: 12% gap, plain pass + SCIP
        # 35 s, with rounds not proved in 60 s; ionosphere: 77% gap, proved only with rounds).
        done = done or (not history[:-1] and new_lb >= (1.0 - _ROUNDS_GAP) * ub)
        if done or stalled or time.perf_counter() > deadline:
            lb = max(lb, new_lb)
            break
        lb = new_lb
        before = float(np.maximum(M[free], 0.0).ravel().sum())
        rel = _Relaxation(*args, ub=ub, knapsack=knapsack)
        for s in range(M.shape[1]):
            for pos, j in enumerate(free):
                if time.perf_counter() > deadline:
                    break
                v = rel.max_score(Xc[j], s=s)
                if v is not None and v < M[j, s]:
                    M[j, s] = v
                    # Gauss-Seidel: the next candidates already see this tighter value.
                    rel.set_big_m(pos, v, s)
        for j in free[(s0[free] > 0).any(axis=1)]:
            if time.perf_counter() > deadline or not bud.fits_with(fixed_in, j):
                break
            for s in np.flatnonzero(s0[j] > 0):
                v = rel.max_score(Xc[j], sign=-1.0, s=s)  # v >= -(smallest score)
                if v is not None and v < 0.0 and M[j, s] > 0.0:
                    fixed_in[j] = True
                    break
        shrink = 1.0 - float(np.maximum(M[free], 0.0).ravel().sum()) / max(before, 1e-300)
    return lb, history


def intercept_box(Xl, y_pm, C, ub):
    """Bounds ``(b_lo, b_hi)`` on the intercept over ``{objective <= ub}``.

    For a negative row i, ``xi_i >= 1 + w.x_i + b`` and ``C xi_i <= ub`` with
    ``||w|| <= sqrt(2 ub)`` give ``b <= ub / C - 1 + sqrt(2 ub) ||x_i||``; positive rows bound
    ``b`` from below the same way (``ub / C_i`` with per-row weights; a row of weight 0 bounds
    nothing).

    Parameters
    ----------
    Xl : ndarray of shape (n, d)
    y_pm : ndarray of shape (n,)
        Labels in {-1, +1}.
    C : float or ndarray of shape (n,)
    ub : float
        Upper bound on the objective.

    Returns
    -------
    b_lo, b_hi : float
    """
    r = math.sqrt(2.0 * ub)
    neg, pos = y_pm < 0, y_pm > 0
    if np.ndim(C) == 0:
        b_hi = ub / C - 1.0 + r * float(np.linalg.norm(Xl[neg], axis=1).min())
        b_lo = 1.0 - ub / C - r * float(np.linalg.norm(Xl[pos], axis=1).min())
        return b_lo, b_hi
    Cv = np.asarray(C)
    neg, pos = neg & (Cv > 0), pos & (Cv > 0)
    b_hi = float(np.min(ub / Cv[neg] + r * np.linalg.norm(Xl[neg], axis=1))) - 1.0
    if not pos.any():  # every positive row has weight 0: no lower bound
        return -math.inf, b_hi
    b_lo = 1.0 - float(np.min(ub / Cv[pos] + r * np.linalg.norm(Xl[pos], axis=1)))
    return b_lo, b_hi


def simple_upper(Xl, y_pm, Xc, C, ub):
    """The simple big-M of each candidate over ``{objective <= ub}``: ``sqrt(2 UB) ||z_j||
    + b_max``, with ``b_max`` from :func:`intercept_box`."""
    _, b_max = intercept_box(Xl, y_pm, C, ub)
    return math.sqrt(2.0 * ub) * np.linalg.norm(Xc, axis=1) + b_max


# --------------------------------------------------------------------------------------------
# Solvers
# --------------------------------------------------------------------------------------------


def import_scip():
    try:
        import pyscipopt
    except ImportError:
        raise MissingDependencyError(
            "solver='mip' needs the SCIP optimisation suite's Python interface, which is not "
            "installed. Install it with:\npip install pyscipopt"
        ) from None
    return pyscipopt


def _import_gurobi():
    try:
        import gurobipy
    except ImportError:
        return None
    return gurobipy


def _start_eta(bud, fixed_in, free, s0, k_rem):
    """Warm-start ``eta`` over the free candidates: positives first, then the best that fit."""
    order = free[np.lexsort((free, -s0[free]))]
    sel = np.zeros(s0.shape[0], dtype=bool)
    if k_rem is not None:
        sel[order[:k_rem]] = True
    else:
        taken, _ = greedy_fit(bud.cost[order], 0.0, bud.room(fixed_in))
        sel[order[taken]] = True
    return sel[free]


def _hinge_term(pyscipopt, C, xi_vars):
    """``sum_s C sum_i xi_is``, or ``sum_s sum_i C_is xi_is`` with per-row weights."""
    if np.ndim(C) == 0:
        if len(xi_vars) == 1:
            return C * xi_vars[0].sum()
        return C * sum(xi.sum() for xi in xi_vars)
    Cv = np.asarray(C, dtype=np.float64)
    if len(xi_vars) == 1:
        c0 = species_weights(Cv, 0)
        return pyscipopt.quicksum(float(c) * xi_vars[0][i] for i, c in enumerate(c0))
    return pyscipopt.quicksum(
        float(c) * xi[i]
        for s, xi in enumerate(xi_vars)
        for i, c in enumerate(species_weights(Cv, s))
        if c != 0.0
    )


def _scip_params(pyscipopt, mdl, limits) -> None:
    """Time and gap limits, a fixed seed, heuristics and any experiment parameters."""
    mdl.hideOutput()
    mdl.setParam("limits/time", max(limits["time"], 0.01))
    mdl.setParam("limits/gap", limits["gap"])
    mdl.setParam("randomization/randomseedshift", 0)
    if limits.get("fast_heuristics", True):
        mdl.setHeuristics(pyscipopt.SCIP_PARAMSETTING.FAST)
    for key, value in limits.get("scip_params", {}).items():  # experiments only
        mdl.setParam(key, value)


def _scip_scorer_vars(mdl, S, n, d, boxes):
    """Per scorer ``s``: ``w_s``, ``b_s``, ``xi_s``, ``t_s`` (boxed when ``boxes`` is given)."""
    w_vars, b_vars, xi_vars, t_vars = [], [], [], []
    for s in range(S):
        tag = "" if S == 1 else str(s)
        if boxes is None:
            w = mdl.addMatrixVar(d, vtype="C", lb=None, name=f"w{tag}")
            bv = mdl.addVar(lb=None, name=f"b{tag}")
        else:
            r, b_lo, b_hi = boxes[0][s], boxes[1][s], boxes[2][s]
            w = mdl.addMatrixVar(d, vtype="C", lb=-r, ub=r, name=f"w{tag}")
            bv = mdl.addVar(lb=float(b_lo), ub=float(b_hi), name=f"b{tag}")
        w_vars.append(w)
        b_vars.append(bv)
        xi_vars.append(mdl.addMatrixVar(n, vtype="C", lb=0.0, name=f"xi{tag}"))
        t_vars.append(mdl.addMatrixVar(d, vtype="C", lb=0.0, name=f"t{tag}"))
    return w_vars, b_vars, xi_vars, t_vars


def build_scip_model(Xl, Y_pm, Xc, bud, C, M, fixed_out, fixed_in, formulation, limits, boxes=None):
    """The TTK MIP over ``S`` scorers sharing one binary per free candidate, in SCIP.

    For each scorer ``s``: hinge rows ``Y_is (w_s . x_i + b_s) + xi_is >= 1``, epigraphs
    ``t_sl >= w_sl^2`` and ``w_s . z_j + b_s <= M_js eta_j`` (or an indicator) for free
    candidates, ``<= 0`` for those fixed out; the budget row over ``eta``. One scorer
    (``S = 1``) builds exactly the single-species model.

    Parameters
    ----------
    Xl, Y_pm, Xc : ndarray of shape (n, d), (n, S), (m, d)
        Centred labelled rows, labels per scorer, centred candidates.
    bud : Budget
        The budget (cells or money).
    C : float or ndarray of shape (n,) or (n, S)
        The hinge weight, or per-row weights.
    M : ndarray of shape (m, S)
        Big-M values ``>= 0`` per candidate and scorer.
    fixed_out, fixed_in : ndarray of bool, shape (m,)
        Candidates never / always positive.
    formulation : str
        ``"indicator"`` for indicator constraints, else big-M rows.
    limits : dict
        ``time``, ``gap``; optional ``fast_heuristics`` (default True) and ``scip_params``.
    boxes : tuple (r, b_lo, b_hi) of ndarray of shape (S,), or None
        Bounds ``|w_sl| <= r_s`` and ``b_lo_s <= b_s <= b_hi_s``; ``None``: free.

    Returns
    -------
    mdl : pyscipopt.Model
    variables : tuple
        ``(w_vars, b_vars, xi_vars, t_vars, eta)``, lists over scorers; ``eta`` over the
        free candidates (``None`` when none is free).
    """
    pyscipopt = import_scip()
    (n, d), S = Xl.shape, Y_pm.shape[1]
    free = np.flatnonzero(~fixed_out & ~fixed_in)
    k_rem, knapsack = bud.row(fixed_in, free)
    mdl = pyscipopt.Model("ttk")
    _scip_params(pyscipopt, mdl, limits)
    w_vars, b_vars, xi_vars, t_vars = _scip_scorer_vars(mdl, S, n, d, boxes)
    eta = mdl.addMatrixVar(free.size, vtype="B", name="eta") if free.size else None
    for s in range(S):
        y = Y_pm[:, s]
        mdl.addMatrixCons(y * (Xl @ w_vars[s]) + y * b_vars[s] + xi_vars[s] >= 1.0)
    out = np.flatnonzero(fixed_out)
    for s in range(S):
        if out.size:
            mdl.addMatrixCons(Xc[out] @ w_vars[s] + b_vars[s] <= 0.0)
        if not free.size:
            continue
        score = Xc[free] @ w_vars[s] + b_vars[s]
        if formulation == "indicator":
            mdl.addMatrixConsIndicator(score <= 0.0, eta, activeone=False)
        else:
            mdl.addMatrixCons(score - M[free, s] * eta <= 0.0)
    if free.size:
        if knapsack is not None:
            c_free, room = knapsack
            mdl.addCons(pyscipopt.quicksum(float(c) * eta[p] for p, c in enumerate(c_free)) <= room)
        elif free.size >= k_rem:
            mdl.addCons(eta.sum() == k_rem)
        else:
            mdl.addCons(eta.sum() <= k_rem)
    for t, w in zip(t_vars, w_vars, strict=True):
        for j in range(d):
            # Per-coordinate epigraph: SCIP needs a linear objective, and separate t_l >= w_l^2
            # rows give it one outer-approximation cut per coordinate instead of one for ||w||^2.
            mdl.addCons(t[j] >= w[j] * w[j])
    quad = t_vars[0].sum() if S == 1 else sum(t.sum() for t in t_vars)
    mdl.setObjective(0.5 * quad + _hinge_term(pyscipopt, C, xi_vars), "minimize")
    return mdl, (w_vars, b_vars, xi_vars, t_vars, eta)


def scip_warm_start(mdl, variables, Xl, Y_pm, W0, b0, sel, extra=()) -> bool:
    """Offer ``(W0, b0)`` of shape (S, d), (S,) (``eta`` from ``sel``); whether SCIP took it.

    ``extra``: further ``(variable, value)`` pairs of the start (a model's own variables).
    """
    w_vars, b_vars, xi_vars, t_vars, eta = variables
    n, d = Xl.shape
    sol = mdl.createSol()
    for s in range(Y_pm.shape[1]):
        for j in range(d):
            mdl.setSolVal(sol, w_vars[s][j], float(W0[s, j]))
            # A hair above w^2 so the epigraph row is not rejected by rounding.
            mdl.setSolVal(sol, t_vars[s][j], float(W0[s, j] ** 2) * (1.0 + 1e-12))
        mdl.setSolVal(sol, b_vars[s], float(b0[s]))
        xi0 = np.maximum(0.0, 1.0 - Y_pm[:, s] * (Xl @ W0[s] + b0[s]))
        for i in range(n):
            mdl.setSolVal(sol, xi_vars[s][i], float(xi0[i]))
    if sel is not None:
        # eta = 1 for the positive free candidates first, then the best of the rest.
        for pos in range(sel.size):
            mdl.setSolVal(sol, eta[pos], 1.0 if sel[pos] else 0.0)
    for var, value in extra:
        mdl.setSolVal(sol, var, float(value))
    return bool(mdl.addSol(sol, free=True))


def scip_best_point(mdl, variables):
    """SCIP's best ``(W, b)`` of shape (S, d), (S,), or ``(None, None)`` without a solution."""
    w_vars, b_vars = variables[0], variables[1]
    if mdl.getNSols() == 0:
        return None, None
    best = mdl.getBestSol()
    W = np.array([[mdl.getSolVal(best, w[j]) for j in range(w.shape[0])] for w in w_vars])
    b = np.array([mdl.getSolVal(best, bv) for bv in b_vars], dtype=np.float64)
    return W, b


def scip_optimize(mdl) -> str:
    """Run SCIP; its status mapped to ours (a declared infeasibility is an error)."""
    mdl.optimize()
    status = str(mdl.getStatus())
    if status == "infeasible":
        raise SolverError(
            "SCIP declared the TTK mixed-integer problem infeasible although a feasible point "
            "is known; this is a numerical failure. Standardise the features and retry, or "
            "pass formulation='simple'."
        )
    return SCIP_STATUS.get(status, status)


def start_eta(bud, fixed_in, free, s0):
    """Warm-start ``eta`` over the free candidates: positives first, then the best that fit."""
    k_rem, _ = bud.row(fixed_in, free)
    return _start_eta(bud, fixed_in, free, s0, k_rem) if free.size else None


def _solve_scip(Xl, Y, Xc, bud, C, M, fixed_out, fixed_in, start, formulation, limits, boxes):
    """Build and solve the MIQP over the ``S`` scorers in SCIP; return the raw outcome."""
    mdl, variables = build_scip_model(
        Xl, Y, Xc, bud, C, M, fixed_out, fixed_in, formulation, limits, boxes
    )
    accepted = False
    if start is not None:
        free = np.flatnonzero(~fixed_out & ~fixed_in)
        W0, b0 = start
        sel = start_eta(bud, fixed_in, free, _scores(W0, b0, Xc).max(axis=1))
        accepted = scip_warm_start(mdl, variables, Xl, Y, W0, b0, sel)
    status = scip_optimize(mdl)
    W, b = scip_best_point(mdl, variables)
    return {
        "w": W,
        "b": b,
        "bound": float(mdl.getDualbound()),
        "status": status,
        "n_nodes": int(mdl.getNNodes()),
        "warm_start_accepted": accepted,
        "solver": "scip",
    }


def _gurobi_scorers(gp, mdl, Xl, Y, Xc, M, fixed_out, free, eta, formulation):
    """Per scorer: ``w_s``, ``b_s``, ``xi_s`` and their hinge, fixed-out and big-M rows."""
    (n, d), S = Xl.shape, Y.shape[1]
    out = np.flatnonzero(fixed_out)
    ones = lambda r: np.ones((r, 1))  # noqa: E731
    w_vars, b_vars, xi_vars = [], [], []
    for s in range(S):
        tag, y = ("" if S == 1 else str(s)), Y[:, s]
        w = mdl.addMVar(d, lb=-gp.GRB.INFINITY, name=f"w{tag}")
        b = mdl.addMVar(1, lb=-gp.GRB.INFINITY, name=f"b{tag}")
        xi = mdl.addMVar(n, lb=0.0, name=f"xi{tag}")
        mdl.addConstr((y[:, None] * Xl) @ w + y[:, None] @ b + xi >= 1.0)
        if out.size:
            mdl.addConstr(Xc[out] @ w + ones(out.size) @ b <= 0.0)
        if free.size and formulation == "indicator":
            for pos, j in enumerate(free):
                mdl.addGenConstrIndicator(eta[pos].item(), False, Xc[j] @ w + b[0] <= 0.0)
        elif free.size:
            mdl.addConstr(Xc[free] @ w + ones(free.size) @ b - np.diag(M[free, s]) @ eta <= 0.0)
        w_vars.append(w)
        b_vars.append(b)
        xi_vars.append(xi)
    return w_vars, b_vars, xi_vars


def _gurobi_objective(C, w_vars, xi_vars):
    """``0.5 sum_s ||w_s||^2 + sum_s C_s . xi_s`` (one scorer: the single model's terms)."""
    obj = None
    for s, (w, xi) in enumerate(zip(w_vars, xi_vars, strict=True)):
        c = species_weights(C, s)
        term = 0.5 * (w @ w) + (c * xi.sum() if np.ndim(c) == 0 else c @ xi)
        obj = term if obj is None else obj + term
    return obj


def _solve_gurobi(gp, Xl, Y, Xc, bud, C, M, fixed_out, fixed_in, start, formulation, limits, boxes):
    """Build and solve the MIQP over the ``S`` scorers in Gurobi (native quadratic objective).

    ``boxes`` is not used: Gurobi presolves its own bounds.
    """
    del boxes
    free = np.flatnonzero(~fixed_out & ~fixed_in)
    k_rem, knapsack = bud.row(fixed_in, free)
    env = gp.Env(empty=True)
    env.setParam("OutputFlag", 0)
    env.start()
    mdl = gp.Model("ttk", env=env)
    mdl.Params.TimeLimit = max(limits["time"], 0.01)
    mdl.Params.MIPGap = limits["gap"]
    mdl.Params.Threads = limits["threads"]
    eta = mdl.addMVar(free.size, vtype=gp.GRB.BINARY, name="eta") if free.size else None
    w_vars, b_vars, xi_vars = _gurobi_scorers(
        gp, mdl, Xl, Y, Xc, M, fixed_out, free, eta, formulation
    )
    if free.size:
        if knapsack is not None:
            mdl.addConstr(knapsack[0] @ eta <= knapsack[1])
        elif free.size >= k_rem:
            mdl.addConstr(eta.sum() == k_rem)
        else:
            mdl.addConstr(eta.sum() <= k_rem)
    mdl.setObjective(_gurobi_objective(C, w_vars, xi_vars), gp.GRB.MINIMIZE)
    if start is not None:
        W0, b0 = start
        for s, (w, b, xi) in enumerate(zip(w_vars, b_vars, xi_vars, strict=True)):
            w.Start = W0[s]
            b.Start = np.array([b0[s]])
            xi.Start = np.maximum(0.0, 1.0 - Y[:, s] * (Xl @ W0[s] + b0[s]))
        if free.size:
            sel = start_eta(bud, fixed_in, free, _scores(W0, b0, Xc).max(axis=1))
            eta.Start = sel.astype(float)
    mdl.optimize()
    code = int(mdl.Status)
    wv = bv = None
    if mdl.SolCount > 0:
        wv = np.vstack([np.asarray(w.X, dtype=float) for w in w_vars])
        bv = np.array([float(b.X[0]) for b in b_vars])
    res = {
        "w": wv,
        "b": bv,
        "bound": float(mdl.ObjBound),
        "status": _GUROBI_STATUS.get(code, f"gurobi_status_{code}"),
        "n_nodes": int(mdl.NodeCount),
        "warm_start_accepted": start is not None,
        "solver": "gurobi",
    }
    mdl.dispose()
    env.dispose()
    return res


def certify_gap(
    objective: float, best_lb: float, status: str, mip_gap: float, advice: str
) -> tuple[float, float, str]:
    """The bound, gap and status a MIP can show for a feasible point's recomputed objective.

    The solver's own figures use its tolerances (SCIP: 1e-6 feasibility); what is reported
    is what the recomputed objective and the best proven lower bound show.

    Parameters
    ----------
    objective : float
        Recomputed from the returned point (made exactly feasible).
    best_lb : float
        The best valid lower bound (solver's dual bound, relaxation bounds).
    status : str
        The solver's status, mapped (``"optimal"``, ``"gap_limit"``, ``"time_limit"``, ...).
    mip_gap : float
        The target relative gap.
    advice : str
        What the error message tells the user when the bound exceeds the objective.

    Returns
    -------
    bound, gap : float
    status : str
        ``"optimal"`` or ``"gap_limit"`` only when the recomputed gap shows it.

    Raises
    ------
    SolverError
        The lower bound exceeds the objective of a feasible point: a bound is wrong.

    Examples
    --------
    >>> certify_gap(10.0, 9.0, "time_limit", 0.2, "")
    (9.0, 0.1, 'gap_limit')
    """
    if best_lb > objective * (1.0 + 1e-6) + 1e-9:
        raise SolverError(
            f"the MIP's lower bound ({best_lb:.10g}) exceeds the objective of a feasible point "
            f"({objective:.10g}); a bound is wrong. {advice}"
        )
    bound = min(best_lb, objective)
    if not math.isfinite(bound):
        bound = 0.0  # the objective is a sum of non-negative terms
    gap = (objective - bound) / objective if objective > 0 else 0.0
    if gap <= mip_gap and status not in ("optimal", "gap_limit"):
        status = "gap_limit"  # proved by a relaxation's bound
    elif gap > mip_gap and status in ("optimal", "gap_limit"):
        # SCIP's own tolerances (1e-6 feasibility) can leave a recomputed gap a hair above
        # the target; report what we can show rather than what the solver said.
        status = "optimal" if gap <= 1e-6 and status == "optimal" else "not_proved"
    return bound, gap, status


# --------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------


def _check_C(C, n: int, S: int):
    """``C`` a positive float, or per-row weights: ``(n,)`` (or ``(n, S)``), finite, ``>= 0``,
    some ``> 0``."""
    if np.ndim(C) == 0:
        return check_positive_real(C, "C")
    Cv = np.asarray(C, dtype=np.float64)
    shape_ok = Cv.shape == (n,) or (S > 1 and Cv.shape == (n, S))
    if not shape_ok or not np.isfinite(Cv).all() or (Cv < 0).any() or not (Cv > 0).any():
        raise InvalidInputError(
            f"C must be a positive number or one finite weight >= 0 per labelled row ({n}), "
            f"not all 0; received an array of shape {Cv.shape}. Pass e.g. C=1.0."
        )
    return Cv


def _check_inputs(
    X_lab, y_pm, X_cand, constraints, C, time_limit, mip_gap, threads, solver, formulation
):
    Xl = np.ascontiguousarray(X_lab, dtype=np.float64)
    Xc = np.ascontiguousarray(X_cand, dtype=np.float64)
    Y = np.asarray(y_pm, dtype=np.float64)
    if Xl.ndim != 2 or Xc.ndim != 2 or Xl.shape[1] != Xc.shape[1]:
        raise InvalidInputError(
            f"X_lab and X_cand must be 2-D with the same number of columns; received shapes "
            f"{np.shape(X_lab)} and {np.shape(X_cand)}. Pass (n, d) and (m, d) arrays."
        )
    if Y.shape[0] != Xl.shape[0]:
        raise InvalidInputError(
            f"y_pm must have one label per row of X_lab ({Xl.shape[0]}); received "
            f"{Y.shape[0]}. Pass labels in {{-1, +1}} aligned with X_lab."
        )
    one_class = Y.shape[0] == 0 or (Y.min(axis=0) == Y.max(axis=0)).any()
    if not np.isin(Y, (-1.0, 1.0)).all() or one_class:
        raise InvalidInputError(
            "y_pm must contain both -1 and +1 (in every column) and nothing else; received "
            f"values {np.unique(Y)[:5].tolist()}. Map labels 0/1 to -1/+1 first."
        )
    if not (np.isfinite(Xl).all() and np.isfinite(Xc).all()):
        raise InvalidInputError(
            "X_lab and X_cand must be finite; received NaN or infinite values. "
            "Impute or drop those rows before solving."
        )
    S = constraints.n_species
    constraints.check(Y, Xc)
    if S > 1 and solver == "bnb":
        raise InvalidInputError(
            f"y_pm has {S} columns (scorers) but solver='bnb' was asked for; several scorers "
            "are solved by SCIP or Gurobi only: pass solver='auto', 'scip' or 'gurobi'."
        )
    C = _check_C(C, Xl.shape[0], S)
    time_limit = check_positive_real(time_limit, "time_limit")
    mip_gap = check_positive_real(mip_gap, "mip_gap", allow_zero=True)
    if isinstance(threads, bool) or not isinstance(threads, int | np.integer) or threads < 1:
        raise InvalidInputError(
            f"threads must be a whole number >= 1; received {threads!r}. Pass e.g. threads=1."
        )
    if solver not in SOLVERS:
        raise InvalidInputError(
            f"solver must be one of {', '.join(map(repr, SOLVERS))}; received {solver!r}. "
            "Use 'auto' to pick Gurobi when its licence fits, else SCIP; 'bnb' for the "
            "package's own branch and bound."
        )
    if formulation not in FORMULATIONS:
        raise InvalidInputError(
            f"formulation must be one of {', '.join(map(repr, FORMULATIONS))}; received "
            f"{formulation!r}. Use 'tight' (the default)."
        )
    return Xl, Y, Xc, constraints, C, time_limit, mip_gap, int(threads)


def solve_ttk_mip(
    X_lab: np.ndarray,
    y_pm: np.ndarray,
    X_cand: np.ndarray,
    constraints: Constraints,
    C: float,
    *,
    warm_start: tuple[np.ndarray, np.ndarray] | None = None,
    time_limit: float = 60.0,
    mip_gap: float = 1e-6,
    threads: int = 1,
    solver: str = "auto",
    formulation: str = "tight",
) -> MIPResult:
    """Solve TTK exactly (or to a proven gap) as a mixed-integer quadratic program.

    Parameters
    ----------
    X_lab, y_pm, X_cand : ndarray of shape (n, d), (n, S), (m, d)
        Labelled rows, their labels in {-1, +1} (both in every column), candidate rows; the
        ``S = constraints.n_species`` columns are scorers sharing the selection (one binary
        per cell). ``(w, b)`` come back in this feature space (centred internally and undone).
    constraints : Constraints
        The budget: cells (``budget.card``: the cardinality row) or money (the knapsack row;
        one scorer only). The boundary term is solved by
        :func:`reserve.solvers._mip_boundary.solve_boundary_mip`, not here.
    C : float or ndarray
        The hinge weight ``> 0``, or per-row weights (``(n,)``, or ``(n, S)``).
    warm_start : tuple (W, b) or None
        A feasible-direction point, ``W`` (S, d), ``b`` (S,); ``b`` is lowered until its
        positive candidates fit. Its objective (or its fixed-set polish's) is the upper bound
        behind the big-M values; the returned objective is never above it. Default: a
        shifted, polished SVM per scorer.
    time_limit, mip_gap : float
        Seconds for the whole call (tightening included; on expiry the best point, with
        ``status == "time_limit"``); stop once ``(objective - bound) / objective <= mip_gap``.
    threads : int
        Threads for Gurobi (SCIP's standard solve is sequential).
    solver : {"auto", "scip", "gurobi", "bnb"}
        ``"auto"``: Gurobi if installed with a licence that fits the model (the pip licence
        stops at 200 variables), else SCIP. ``"bnb"``: the package's own branch and bound
        (:mod:`reserve.solvers._bnb`; proves sonar, which SCIP leaves open), one scorer only.
    formulation : {"tight", "simple", "indicator"}
        ``"tight"``: per-candidate big-M from one convex bound problem each, with fixing.
        ``"simple"``: ``M_j = sqrt(2 UB) ||z_j|| + b_max`` in closed form.
        ``"indicator"``: indicator constraints (no big-M), fixing from the tight bounds.

    Returns
    -------
    MIPResult
        ``w`` of shape (S, d), ``b`` of shape (S,).

    Raises
    ------
    InvalidInputError
        Bad shapes, labels, budget, ``C``, ``time_limit``, ``mip_gap``, ``threads``;
        ``solver="bnb"`` or a money budget with several scorers.
    MissingDependencyError, SolverError
        ``pyscipopt`` (or ``gurobipy`` for ``solver="gurobi"``) missing; a numerical failure.

    Examples
    --------
    >>> import numpy as np
    >>> from reserve.solvers.budget import Budget
    >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0]])
    >>> y = np.array([[-1.0], [-1.0], [1.0], [1.0]])
    >>> Z = np.array([[0.5], [1.5], [3.0]])
    >>> r = solve_ttk_mip(X, y, Z, Constraints.cells(1, 3), 1.0, time_limit=10)
    >>> r.status, r.selected.tolist(), r.bound <= r.objective, r.w.shape
    ('optimal', [2], True, (1, 1))
    >>> money = Constraints(Budget(np.array([1.0, 1.0, 3.0]), 2.0))
    >>> solve_ttk_mip(X, y, Z, money, 1.0).selected.tolist()  # z = 3 is too dear
    [1, 0]
    """
    t0 = time.perf_counter()
    checked = _check_inputs(
        X_lab, y_pm, X_cand, constraints, C, time_limit, mip_gap, threads, solver, formulation
    )
    return _solve(t0, *checked, warm_start, solver, formulation)


def _solve(t0, Xl, Y, Xc, cons, C, time_limit, mip_gap, threads, warm_start, solver, formulation):
    """:func:`solve_ttk_mip` on checked inputs; ``w`` of shape (S, d), ``b`` of shape (S,)."""
    bud = cons.budget
    gp = _backend(solver)
    # Centre: scores and objective are unchanged with b' = b + mu . w.
    mu = np.vstack([Xl, Xc]).mean(axis=0)
    Xl0, Xc0 = Xl - mu, Xc - mu
    W0, b0 = _start(warm_start, Xl0, Y, C, mu)
    ub, W0, b0 = _polish(Xl0, Y, Xc0, bud, C, W0, b0)
    lb = _scorer_lower_bounds(Xl0, Y, C)
    bounds = _bounds(Xl0, Y, Xc0, C, bud, ub, lb, W0, b0, formulation, t0 + time_limit, mip_gap)
    limits = {"time": t0 + time_limit - time.perf_counter(), "gap": mip_gap, "threads": threads}
    if cons.n_species > 1:
        # Several scorers: SCIP's primal figure uses t >= w^2 only to its 1e-6 feasibility
        # tolerance, so half the target gap leaves room for the recomputed one.
        limits.update(gap=0.5 * mip_gap, fast_heuristics=False)
    fixed_out = (bounds["M"] <= 0.0).all(axis=1)
    args = (Xl0, Y, Xc0, bud, C, np.maximum(bounds["M"], 0.0), fixed_out, bounds["fixed_in"])
    args += ((W0, b0), formulation, limits, bounds["boxes"])
    t_m = time.perf_counter()
    raw, note = _run_backend(solver, gp, args, t0 + time_limit, cons)
    t_mip = time.perf_counter() - t_m
    # The MIP's bound and the relaxations' are all valid: the model only cuts off points
    # worse than the start.
    best_lb = max(bounds["best_lb"], raw["bound"], float(lb.sum()))
    if raw["w"] is not None:
        b_new = _feasible(bud, raw["w"], raw["b"], Xc0)
        obj_new = _objective(raw["w"], b_new, Xl0, Y, C)
        if obj_new < ub:  # else keep the start (SCIP may have dropped it)
            ub, W0, b0 = obj_new, raw["w"], b_new
    # Recompute everything from (w, b) in the caller's space.
    W_out = np.asarray(W0, dtype=np.float64).copy()
    b_out = _feasible(bud, W_out, b0 - _mu_dot(W_out, mu), Xc)
    objective = _objective(W_out, b_out, Xl, Y, C)
    bound, gap, status = certify_gap(
        objective,
        best_lb,
        raw["status"],
        mip_gap,
        "Retry with formulation='simple' and report this instance.",
    )
    details = _details(bounds, raw, t_mip, formulation, note)
    return MIPResult(
        w=W_out,
        b=b_out,
        objective=objective,
        bound=float(bound),
        gap=float(gap),
        status=status,
        n_nodes=raw["n_nodes"],
        runtime=time.perf_counter() - t0,
        solver=raw["solver"],
        selected=_select(bud, W_out, b_out, Xc),
        details=details,
    )


def _backend(solver: str):
    """``gurobipy`` when it is to be tried, else ``None``; fail early on a missing solver."""
    gp = None
    if solver in ("auto", "gurobi"):
        gp = _import_gurobi()
        if gp is None and solver == "gurobi":
            raise MissingDependencyError(
                "solver='gurobi' needs gurobipy, which is not installed. Install it with:\n"
                "pip install gurobipy\n(or pass solver='scip' or 'auto' to use SCIP)."
            )
    if gp is None and solver != "bnb":
        import_scip()  # fail before any work if SCIP is missing
    return gp


def _start(warm_start, Xl0, Y, C, mu):
    """The start in the centred space: the warm start, or the SVM of each scorer."""
    S, d = Y.shape[1], Xl0.shape[1]
    if warm_start is None:
        fits = [solve_fixed_set(Xl0, *_scorer(Y, C, s)) for s in range(S)]
        return np.vstack([r.w for r in fits]), np.array([r.b for r in fits], dtype=np.float64)
    W0 = np.asarray(warm_start[0], dtype=np.float64)
    b0 = np.asarray(warm_start[1], dtype=np.float64).reshape(-1)
    if (
        W0.shape != (S, d)
        or b0.shape != (S,)
        or not (np.isfinite(W0).all() and np.isfinite(b0).all())
    ):
        raise InvalidInputError(
            f"warm_start must be (W, b) with W of shape ({S}, {d}) and finite values; "
            f"received w of shape {np.shape(warm_start[0])}. Pass the FD solver's (w, b)."
        )
    return W0, b0 + _mu_dot(W0, mu)


def _scorer_lower_bounds(Xl0, Y, C) -> np.ndarray:
    """Per scorer, a lower bound on its objective at any point: its SVM's, padded down.

    One scorer needs none (zero): its bound is the objective's own.
    """
    if Y.shape[1] == 1:
        return np.zeros(1)
    svm = np.array([solve_fixed_set(Xl0, *_scorer(Y, C, s)).objective for s in range(Y.shape[1])])
    # Clarabel solves them to 1e-9; pad tenfold and more.
    return np.maximum(svm * (1.0 - 1e-6), 0.0)


def _bounds(Xl0, Y, Xc0, C, bud, ub, lb, W0, b0, formulation, deadline, mip_gap) -> dict:
    """Big-M values of shape (m, S) tightened against the start's objective ``ub``.

    Scorer ``s`` has ``objective_s <= ub_s = ub - sum_{s' != s} lb_s'`` at every point no
    worse than the start (``lb``: :func:`_scorer_lower_bounds`). Several scorers also get the
    boxes ``|w_sl| <= sqrt(2 ub_s)`` and :func:`intercept_box`.
    (Re-tightening after a short MIP run had found a better incumbent was measured worse on
    ionosphere.)
    """
    ub_safe = ub * (1.0 + 1e-7) + 1e-9
    ub_s = ub_safe - (lb.sum() - lb)
    m, S = Xc0.shape[0], Y.shape[1]
    columns = []
    for s in range(S):
        y, c = _scorer(Y, C, s)
        columns.append(simple_upper(Xl0, y, Xc0, c, ub_s[s]))
    simple = np.column_stack(columns)
    M, fixed_in = simple.copy(), np.zeros(m, dtype=bool)
    best_lb, lb_history, t_bounds = 0.0, [], 0.0
    if formulation in ("tight", "indicator"):
        t_b = time.perf_counter()
        M, fixed_in, best_lb, lb_history = _tighten(
            Xl0,
            Y,
            Xc0,
            C,
            bud,
            ub_s,
            ub_safe,
            M,
            fixed_in,
            _scores(W0, b0, Xc0),
            t_b + _BOUND_TIME_SHARE * max(deadline - t_b, 0.0),
            _MAX_BOUND_ROUNDS,
            ub * (1.0 - mip_gap),
        )
        t_bounds = time.perf_counter() - t_b
    boxes = None
    if S > 1:
        box = np.array([intercept_box(Xl0, *_scorer(Y, C, s), ub_s[s]) for s in range(S)])
        boxes = (np.sqrt(2.0 * ub_s), box[:, 0], box[:, 1])
    return {
        "M": M,
        "fixed_in": fixed_in,
        "best_lb": best_lb,
        "lb_history": lb_history,
        "simple": simple,
        "ub_start": ub,
        "t_bounds": t_bounds,
        "boxes": boxes,
    }


def _run_backend(solver, gp, args, deadline, cons):
    """Run the chosen MIP backend; ``(raw result, note or None)``."""
    if solver == "bnb":  # one scorer (checked): its own arrays
        from reserve.solvers._bnb import solve_bnb

        Xl, Y, Xc, _, C, M, fixed_out, fixed_in, (W0, b0), formulation, limits, _ = args
        start = (W0[0], float(b0[0]))
        y, M0 = np.ascontiguousarray(Y[:, 0]), M[:, 0]
        raw = solve_bnb(Xl, y, Xc, cons, C, M0, fixed_out, fixed_in, start, formulation, limits)
        raw["w"], raw["b"] = np.asarray(raw["w"])[None, :], np.array([raw["b"]], dtype=float)
        return raw, None
    note = None
    if gp is not None:
        try:
            return _solve_gurobi(gp, *args), None
        except gp.GurobiError as exc:
            if solver == "gurobi" or getattr(exc, "errno", None) != _GUROBI_SIZE_LIMIT:
                raise SolverError(f"Gurobi failed on the TTK model: {exc}") from None
            note = f"gurobi skipped: {exc}"
            args[-2]["time"] = deadline - time.perf_counter()
    return _solve_scip(*args), note


def _details(bounds: dict, raw: dict, t_mip: float, formulation: str, note) -> dict:
    """The diagnostics of :attr:`MIPResult.details`."""
    M, fixed_in, simple = bounds["M"], bounds["fixed_in"], bounds["simple"]
    fixed_out = (M <= 0.0).all(axis=1)
    free = ~fixed_out & ~fixed_in
    details = {
        "upper_bound_start": bounds["ub_start"],
        "bound_time": bounds["t_bounds"],
        "mip_time": t_mip,
        "n_fixed_out": int(fixed_out.sum()),
        "n_fixed_in": int(fixed_in.sum()),
        "n_free": int(free.sum()),
        "bound_rounds": len(bounds["lb_history"]),
        "relaxation_bounds": bounds["lb_history"],
        "median_M": float(np.median(np.maximum(M[free], 0.0))) if free.any() else 0.0,
        "median_simple_M": float(np.median(np.maximum(simple, 0.0))) if M.size else 0.0,
        "warm_start_accepted": raw["warm_start_accepted"],
        "formulation": formulation,
    }
    if "n_open" in raw:
        details["n_open"] = raw["n_open"]  # bnb: nodes left open at the end
    if note:
        details["note"] = note
    return details
