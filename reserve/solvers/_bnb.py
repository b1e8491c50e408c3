"""Exact TTK by a branch and bound of our own over the candidates, with convex nodes.

SCIP solves TTK's MIQP with linear relaxations: the quadratic objective enters as outer
approximation cuts. On sonar (d = 60, n = m = 104) it keeps a 45% gap after two minutes. This
branch and bound instead solves each node's continuous relaxation exactly as a convex QP
(Clarabel) and branches on the candidates themselves:

* a node fixes some candidates *out* (``w . z_j + b <= 0``) and some *in* (allowed to score
  positive, up to the valid ``M_j``, spending their share of the budget); the rest are
  *free*, under the big-M rows ``w . z_j + b <= M_j eta_j`` with ``0 <= eta <= 1`` and the
  budget row ``sum c_j eta_j <= B`` (``c = 1``, ``B = k`` for the cell budget). Its
  relaxation optimum is a lower bound on every TTK point the node covers;
* the relaxation's ``(w, b)``, with ``b`` lowered until its positive candidates fit the
  budget, is a feasible point: a candidate incumbent at every node, and when lowering ``b``
  costs nothing the node is solved;
* otherwise the free candidate with the highest score is branched on: out, or in (when it
  still fits). Every TTK point lies in one of the two children, so no optimum is lost. Both
  children are solved when they are created and stored with their bound;
* nodes are processed best bound first (the deepest on ties), and a node whose bound is
  within the relative gap target of the incumbent is pruned.

The returned bound is the smallest bound of the nodes left open or pruned (and of any node
whose relaxation failed numerically, which is never pruned), so a time-limited run still
reports an honest gap. The big-M values come from :func:`reserve.solvers._mip._tighten`, as
for SCIP. Measurements: benchmarks/results/mip.md.
"""

from __future__ import annotations

import heapq
import math
import time

import clarabel
import numpy as np
import scipy.sparse as sp

from reserve.errors import SolverError
from reserve.solvers._conic import clarabel_settings
from reserve.solvers._qp import hinge_objective
from reserve.solvers.constraints import Constraints

__all__ = ["solve_bnb", "solve_bnb_boundary"]

# A node whose repaired relaxation point is this close to its bound is solved (the bound is
# padded by 1e-7 relative, so the solved node's own gap is about that).
_SOLVED_RTOL = 1e-6
# Candidates whose children are solved before choosing where to branch (strong branching),
# and how they are ranked. Measured (benchmarks/results/mip.md): strong branching over 4-8
# candidates ranked by eta = score / M gains on ionosphere but costs 2.6x the time on sonar,
# so the default branches on the single highest score.
_STRONG = 1
_BRANCH_KEY = "score"
# With the boundary penalty, an ``eta`` this far from 0 and 1 is fractional (branched on).
_FRAC_TOL = 1e-6


class _NodeRelaxation:
    """Every node's continuous relaxation as one Clarabel QP, built once.

    Variables ``(w, b, xi, eta)`` with one ``eta_j`` per candidate; rows: the hinge rows,
    ``w . z_j + b - M_j eta_j <= 0``, ``lo_j <= eta_j <= 1`` and the budget row
    ``sum c_j eta_j <= B`` (``c = 1``, ``B = k`` for the cell budget). A node changes data
    only, never the sparsity: fixing ``j`` out sets its ``M_j`` to 0 (the row becomes
    ``w . z_j + b <= 0``, and ``eta_j`` then buys nothing); fixing it in sets ``lo_j = 1``
    (it spends its share of the budget and keeps the valid ``w . z_j + b <= M_j``). The
    relaxation of a node is thus a restriction of its parent's.
    """

    def __init__(self, Xl, y_pm, Xc, C, M, cost, limit, penalty=None) -> None:
        n, d = Xl.shape
        m = Xc.shape[0]
        self.d = d
        zeros = lambda r, c: sp.csr_matrix((r, c))  # noqa: E731
        eye = lambda r: sp.identity(r, format="csr")  # noqa: E731
        blocks = [
            sp.hstack([-(y_pm[:, None] * Xl), -y_pm[:, None], -eye(n), zeros(n, m)]),
            sp.hstack([zeros(n, d + 1), -eye(n), zeros(n, m)]),
            sp.hstack([Xc, np.ones((m, 1)), zeros(m, n), -sp.diags(np.maximum(M, 1.0))]),
            sp.hstack([zeros(m, d + 1 + n), -eye(m)]),
            sp.hstack([zeros(m, d + 1 + n), eye(m)]),
            sp.hstack([zeros(1, d + 1 + n), np.asarray(cost, dtype=np.float64)[None, :]]),
        ]
        rhs = [-np.ones(n), np.zeros(n), np.zeros(m), np.zeros(m), np.ones(m), [float(limit)]]
        q_extra, self.offset = np.zeros(m), 0.0
        if penalty is not None:  # the boundary term's pair columns and rows (_boundary_rows)
            blocks, rhs, q_extra = _boundary_rows(blocks, rhs, d + 1 + n, m, *penalty)
            self.offset = float(penalty[1] * penalty[0].const)
        A = sp.vstack(blocks, format="csc")
        A.sort_indices()
        # Data positions of the -M_j entries: in each eta column the big-M row comes first.
        first = A.indptr[d + 1 + n : d + 1 + n + m]
        if not np.array_equal(A.indices[first], 2 * n + np.arange(m)):
            raise SolverError("internal error: unexpected sparsity pattern of the node QP.")
        self._m_pos = first.astype(np.int64)
        self._rhs = np.concatenate(rhs)
        self._lo_rows = 2 * n + m + np.arange(m)
        # With the penalty a fixed-out candidate's eta is 0 (it is no part of the set's
        # boundary); without it eta_j buys nothing there and is left as it always was.
        self._up_rows = self._lo_rows + m if penalty is not None else None
        self._M = np.maximum(M, 0.0)
        P = sp.diags(np.r_[np.ones(d), np.zeros(A.shape[1] - d)], format="csc")
        q = np.r_[np.zeros(d + 1), np.full(n, C), q_extra]
        self.x = None
        cones = [clarabel.NonnegativeConeT(A.shape[0])]
        self._solver = clarabel.DefaultSolver(P, q, A, self._rhs.copy(), cones, clarabel_settings())

    def solve(self, out_mask: np.ndarray, in_mask: np.ndarray):
        """``(bound, w, b)`` of the node; ``(-inf, None, None)`` if the solve failed."""
        self._solver.update(A=(self._m_pos, -np.where(out_mask, 0.0, self._M)))
        rhs = self._rhs.copy()
        rhs[self._lo_rows] = -in_mask.astype(np.float64)
        if self._up_rows is not None:
            rhs[self._up_rows] = np.where(out_mask, 0.0, 1.0)
        self._solver.update(b=rhs)
        sol = self._solver.solve()
        if str(sol.status) != "Solved":  # not "AlmostSolved": the bound must be reliable
            return -math.inf, None, None
        x = np.asarray(sol.x)
        self.x = x
        val = float(min(sol.obj_val, sol.obj_val_dual)) + self.offset
        return val - 1e-7 * (1.0 + abs(val)), x[: self.d].copy(), float(x[self.d])


def _boundary_rows(blocks, rhs, n_cols, m, term, penalty, card):
    """The node QP's rows and objective for ``penalty * B(S)``, the usual linearisation.

    One column ``y_p`` per pair of adjacent candidates ``(i, j)`` with rows
    ``y_p <= eta_i``, ``y_p <= eta_j``, ``y_p >= 0`` and the objective
    ``penalty * (own . eta - 2 sum_p A_p y_p)`` (the constant is the caller's offset): at
    0/1 ``eta`` the minimisation raises ``y_p`` to ``eta_i eta_j``, so an integral node is
    scored exactly, and a fractional one from below. With a cell budget (``card``) the
    selection has exactly ``card`` cells, as in the MIP (``eta`` sums to it).

    Returns the row blocks, right-hand sides and the linear objective of ``(eta, y)``.
    """
    A = sp.triu(term.shared, k=1).tocoo()
    pi, pj, ell = A.row, A.col, A.data
    p = pi.size
    blocks = [sp.hstack([blk, sp.csr_matrix((blk.shape[0], p))]) for blk in blocks]
    link = sp.csr_matrix((-np.ones(2 * p), (np.arange(2 * p), np.r_[pi, pj])), shape=(2 * p, m))
    ident = sp.vstack([sp.identity(p), sp.identity(p)])
    blocks.append(sp.hstack([sp.csr_matrix((2 * p, n_cols)), link, ident]))
    blocks.append(sp.hstack([sp.csr_matrix((p, n_cols + m)), -sp.identity(p)]))
    rhs = [*rhs, np.zeros(2 * p), np.zeros(p)]
    if card is not None:
        row = np.r_[np.zeros(n_cols), -np.ones(m), np.zeros(p)][None, :]
        blocks.append(sp.csr_matrix(row))
        rhs.append([-float(min(card, m))])
    q = np.r_[penalty * term.own, -2.0 * penalty * ell]
    return blocks, rhs, q


def _prune_level(ub: float, gap: float) -> float:
    """Bounds at or above this cannot improve ``ub`` by more than the gap target."""
    return ub - gap * abs(ub)


def solve_bnb(
    Xl: np.ndarray,
    y_pm: np.ndarray,
    Xc: np.ndarray,
    constraints: Constraints,
    C: float,
    M: np.ndarray,
    fixed_out: np.ndarray,
    fixed_in: np.ndarray,
    start: tuple[np.ndarray, float],
    formulation: str,
    limits: dict,
) -> dict:
    """Best-first branch and bound over the candidates; the raw outcome as ``_solve_scip``'s.

    Parameters
    ----------
    Xl, y_pm, Xc : ndarray
        Centred labelled rows, their labels in {-1, +1}, centred candidate rows.
    constraints : Constraints
        The budget: the cardinality or the knapsack row (one scorer; no boundary term:
        :func:`solve_bnb_boundary`).
    C : float or ndarray of shape (n,)
        Hinge weight.
    M : ndarray of shape (m,)
        Valid upper bounds on every candidate's score among points no worse than ``start``.
    fixed_out, fixed_in : ndarray of bool, shape (m,)
        Candidates known never / always to score positive at such points.
    start : tuple (w, b)
        A feasible point (its positive candidates fit the budget): the first incumbent.
    formulation : str
        Unused (the node relaxations always use the big-M rows with ``M``); accepted for the
        common call signature.
    limits : dict
        ``"time"`` (seconds) and ``"gap"`` (relative gap target). The branching rule is set
        by the module constants ``_STRONG`` and ``_BRANCH_KEY`` (experiments only).

    Returns
    -------
    dict
        ``w``, ``b`` (the incumbent), ``bound``, ``status`` (``"optimal"`` when every node was
        pruned within the gap target, ``"time_limit"``, or ``"not_proved"`` when a node's
        relaxation failed and its bound was kept unimproved), ``n_nodes`` (relaxations
        solved), ``n_open``, ``warm_start_accepted`` (True: the start is the first incumbent)
        and ``solver`` (``"bnb"``).
    """
    del formulation
    t_end = time.perf_counter() + max(limits["time"], 0.0)
    bud = constraints.budget
    search = _Search(Xl, y_pm, Xc, bud, C, np.maximum(M, 0.0), fixed_out, fixed_in, start)
    status, lower, n_open = _run(search, float(limits["gap"]), t_end)
    return {
        "w": search.w,
        "b": search.b,
        "bound": float(lower),
        "status": status,
        "n_nodes": search.n_nodes,
        "n_open": n_open,
        "warm_start_accepted": True,
        "solver": "bnb",
    }


def _run(search, gap: float, t_end: float) -> tuple[str, float, int]:
    """Best-first search from the root: ``(status, lower bound, nodes left open)``."""
    search.gap = gap  # the pruning level's relative gap
    # Heap entries: (bound, -depth, counter, fixed out, fixed in, branching candidates)
    heap: list = []
    counter, root = 0, search.evaluate((), (), -math.inf)
    if root is not None:
        heap.append((root[0], 0, counter, (), (), root[1]))
    status = "optimal"
    while heap:
        if heap[0][0] >= _prune_level(search.ub, search.gap):
            break  # every open node is within the gap target
        if time.perf_counter() > t_end:
            status = "time_limit"
            break
        value, neg_depth, _, outs, ins, cands = heapq.heappop(heap)
        for o, i, r in search.branch(value, outs, ins, cands, t_end):
            if r is not None:
                counter += 1
                heapq.heappush(heap, (r[0], neg_depth - 1, counter, o, i, r[1]))
    if math.isfinite(search.unresolved) and status == "optimal":
        status = "not_proved"
    # Every TTK point lies in an open node, a pruned one or an unresolved one.
    lower = min(heap[0][0] if heap else math.inf, search.pruned, search.unresolved, search.ub)
    return status, lower, len(heap)


class _Search:
    """The incumbent, the bounds of closed nodes, and how a node is solved and branched."""

    def __init__(self, Xl, y_pm, Xc, bud, C, M, fixed_out, fixed_in, start):
        self.Xl, self.y_pm, self.Xc, self.bud, self.C, self.M = Xl, y_pm, Xc, bud, C, M
        self.fixed_out, self.fixed_in = fixed_out, fixed_in
        self.node_qp = _NodeRelaxation(Xl, y_pm, Xc, C, M, bud.cost, bud.limit)
        self.ub = hinge_objective(start[0], float(start[1]), Xl, y_pm, C)
        self.w = np.asarray(start[0], dtype=np.float64)
        self.b = float(start[1])
        self.pruned = math.inf  # smallest bound of the nodes pruned or solved
        self.unresolved = math.inf  # smallest bound of nodes whose relaxation failed
        self.n_nodes = 0
        self.gap = 0.0

    def masks(self, outs: tuple[int, ...], ins: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The node's fixed-out and fixed-in candidates: the root's plus its branchings."""
        out_mask = self.fixed_out.copy()
        out_mask[list(outs)] = True
        in_mask = self.fixed_in.copy()
        in_mask[list(ins)] = True
        return out_mask, in_mask

    def solve_node(self, out_mask: np.ndarray, in_mask: np.ndarray, parent: float):
        """The node QP's bound and point; ``w`` is None when it failed (bound kept unresolved)."""
        self.n_nodes += 1
        value, w, b = self.node_qp.solve(out_mask, in_mask)
        if w is None:
            self.unresolved = min(self.unresolved, parent)
            return parent, None, b
        return max(value, parent), w, b  # a child's relaxation is a restriction of its parent's

    def evaluate(self, outs: tuple[int, ...], ins: tuple[int, ...], parent: float):
        """Solve a node; ``None`` if it is closed (pruned, solved or failed), else its data."""
        out_mask, in_mask = self.masks(outs, ins)
        value, w, b = self.solve_node(out_mask, in_mask, parent)
        if w is None:
            return None
        b_fit = self.bud.make_feasible(w, b, self.Xc)
        obj = hinge_objective(w, b_fit, self.Xl, self.y_pm, self.C)
        if obj < self.ub:
            self.ub, self.w, self.b = obj, w, b_fit
        solved = obj <= value + _SOLVED_RTOL * (1.0 + abs(value))
        if solved or value >= _prune_level(self.ub, self.gap):
            # Pruned by bound, or solved: the relaxation's own point fits the budget (up to
            # the relaxation's tolerances, which can leave a score at +1e-10). Either way the
            # node's bound is kept for the final gap.
            self.pruned = min(self.pruned, value)
            return None
        free = np.flatnonzero(~out_mask & ~in_mask)
        scores = self.Xc[free] @ w + b
        if not free.size or scores.max() <= 0.0:
            # Nothing to branch on, yet the point did not prove the node (rounding in the
            # relaxation): keep its bound as unresolved rather than claim it.
            self.unresolved = min(self.unresolved, value)
            return None
        key = scores / np.maximum(self.M[free], 1e-12) if _BRANCH_KEY == "eta" else scores
        order = np.argsort(-key, kind="stable")[:_STRONG]
        return value, free[order[scores[order] > 0.0]]

    def branch(self, value, outs, ins, cands, t_end):
        """Strong branching over the best-scoring candidates: solve both children of each and
        keep the candidate whose weaker child gains most (the product rule); its children."""
        in_mask = self.fixed_in.copy()
        in_mask[list(ins)] = True
        best = None
        for j in cands:
            j = int(j)
            kids = [((*outs, j), ins)]
            if self.bud.fits_with(in_mask, j):
                kids.append((outs, (*ins, j)))
            solved = [(o, i, self.evaluate(o, i, value)) for o, i in kids]
            gains = [(r[0] if r is not None else math.inf) - value for _, _, r in solved]
            gains += [math.inf] * (2 - len(gains))
            score = max(gains[0], 1e-9) * max(gains[1], 1e-9)
            if best is None or score > best[0]:
                best = (score, solved)
            if time.perf_counter() > t_end:
                break
        return best[1] if best is not None else ()


class _BoundarySearch(_Search):
    """The search for TTK plus ``penalty * B(S)``: ``S`` is the set ``{eta = 1}``.

    With the penalty a selected cell may score below zero, so nothing is fixed before the
    search and a node is closed by its own ``eta``: the incumbents tried at a node are the
    set of its largest ``eta``, the set of its best scores and (when it fits) the set
    ``{eta > 0.5}``, each with the relaxation's ``(w, b)`` and ``b`` lowered until every
    other candidate scores ``<= 0``; the node is
    solved when that point reaches its bound (at 0/1 ``eta`` it does, up to tolerances), and
    otherwise branched on the best-scoring candidate whose ``eta`` is fractional.
    """

    def __init__(self, Xl, y_pm, Xc, bud, C, M, term, penalty, start, start_set):
        m = Xc.shape[0]
        none = np.zeros(m, dtype=bool)
        self.Xl, self.y_pm, self.Xc, self.bud, self.C, self.M = Xl, y_pm, Xc, bud, C, M
        self.fixed_out, self.fixed_in = none, none
        self.term, self.penalty = term, float(penalty)
        self.node_qp = _NodeRelaxation(
            Xl, y_pm, Xc, C, M, bud.cost, bud.limit, (term, self.penalty, bud.card)
        )
        self.w = np.asarray(start[0], dtype=np.float64)
        self.b = float(start[1])
        self.in_S = none.copy()
        self.in_S[np.asarray(start_set, dtype=np.int64)] = True
        self.ub = self.total(self.w, self.b, self.in_S)
        self.pruned = self.unresolved = math.inf
        self.n_nodes = 0
        self.gap = 0.0
        self._eta = slice(Xl.shape[1] + 1 + Xl.shape[0], Xl.shape[1] + 1 + Xl.shape[0] + m)

    def total(self, w: np.ndarray, b: float, in_S: np.ndarray) -> float:
        """TTK's objective at ``(w, b)`` plus the penalty of the set ``in_S``."""
        hinge = hinge_objective(w, b, self.Xl, self.y_pm, self.C)
        return hinge + self.penalty * self.term.length(in_S)

    def _incumbent(self, w: np.ndarray, b: float, eta: np.ndarray) -> float:
        """The best total of the node's rounded sets (up to three); the incumbent is updated."""
        raw = self.Xc @ w
        order = np.lexsort((-(raw + b), -np.round(eta, 6)))
        rank = np.empty(raw.size)
        rank[order] = -np.arange(raw.size, dtype=np.float64)
        best = math.inf
        sets = []
        for keys in (rank, raw + b):
            sets.append(np.zeros(raw.size, dtype=bool))
            sets[-1][self.bud.select(keys)] = True
        rounded = eta > 0.5  # at 0/1 eta the node's own set (a money budget may leave room)
        card = self.bud.card
        if card is None and float(self.bud.cost[rounded].sum()) <= self.bud.limit:
            sets.append(rounded)
        for in_S in sets:
            b_set = min(b, -float(raw[~in_S].max(initial=-math.inf)))
            obj = self.total(w, b_set, in_S)
            best = min(best, obj)
            if obj < self.ub:
                self.ub, self.w, self.b, self.in_S = obj, w, b_set, in_S
        return best

    def evaluate(self, outs: tuple[int, ...], ins: tuple[int, ...], parent: float):
        """Solve a node; ``None`` if it is closed (pruned, solved, failed or empty)."""
        out_mask, in_mask = self.masks(outs, ins)
        if self.bud.card is not None and (~out_mask).sum() < min(self.bud.card, out_mask.size):
            return None  # too few candidates left for the cell budget: the node holds no point
        value, w, b = self.solve_node(out_mask, in_mask, parent)
        if w is None:
            return None
        eta = self.node_qp.x[self._eta]
        obj = self._incumbent(w, b, eta)
        solved = obj <= value + _SOLVED_RTOL * (1.0 + abs(value))
        if solved or value >= _prune_level(self.ub, self.gap):
            self.pruned = min(self.pruned, value)
            return None
        frac = np.flatnonzero(~out_mask & ~in_mask & (eta > _FRAC_TOL) & (eta < 1.0 - _FRAC_TOL))
        if not frac.size:
            self.unresolved = min(self.unresolved, value)  # integral yet not proved: rounding
            return None
        return value, frac[[int(np.argmax(self.Xc[frac] @ w))]]


def solve_bnb_boundary(
    X_lab: np.ndarray,
    y_pm: np.ndarray,
    X_cand: np.ndarray,
    constraints: Constraints,
    C: object,
    M: np.ndarray,
    start: tuple,
    start_set: np.ndarray,
    limits: dict,
) -> dict:
    """TTK plus ``penalty * B(S)`` by this branch and bound; the raw outcome.

    Parameters
    ----------
    X_lab, y_pm, X_cand : ndarray
        Labelled rows, labels in {-1, +1} of one scorer, candidates.
    constraints : Constraints
        The budget (cells: the set has exactly ``k`` cells, as in the MIP; or money), the
        boundary term ``B`` (``X_cand``'s order) and its penalty ``> 0``.
    C : float or ndarray of shape (n,)
        Hinge weight.
    M : ndarray of shape (m,)
        Valid upper bounds on every candidate's score among points whose objective plus
        penalty is no worse than the start's.
    start, start_set : tuple (w, b), ndarray of int
        A feasible point and its set (every other candidate scores ``<= 0``).
    limits : dict
        ``"time"`` (seconds) and ``"gap"`` (relative gap target).

    Returns
    -------
    dict
        ``w``, ``b``, ``in_S`` (the incumbent and its set), ``objective`` (its total),
        ``bound``, ``status``, ``n_nodes``, ``n_open``.
    """
    t_end = time.perf_counter() + max(limits["time"], 0.0)
    bud, term, penalty = constraints.budget, constraints.boundary, constraints.boundary_penalty
    M = np.maximum(M, 0.0)
    search = _BoundarySearch(X_lab, y_pm, X_cand, bud, C, M, term, penalty, start, start_set)
    status, lower, n_open = _run(search, float(limits["gap"]), t_end)
    return {
        "w": search.w,
        "b": search.b,
        "in_S": search.in_S,
        "objective": search.ub,
        "bound": float(lower),
        "status": status,
        "n_nodes": search.n_nodes,
        "n_open": n_open,
    }
