"""The feasible-direction (FD) method of the TTK paper, vectorised and incremental.

Problem (the paper's relaxed TTK):

    min_{w, b}  f(w, b) = 0.5 ||w||^2 + C sum_i [1 - y_i (w . x_i + b)]_+
    s.t.        #{j : w . z_j + b > 0} <= k          (z_j: candidate rows)

or, with a money budget, ``sum_{j : w . z_j + b > 0} c_j <= B`` (costs ``c_j > 0``). The cell
budget is the case ``c = 1``, ``B = k``, and runs the same code: every count of positives is a
sum of unit costs, exact in floating point, so the unit case needs no code of its own.

Each iteration: the hinge subgradient; Algorithm 1's projection of the negative subgradient
into the null space of boundary candidates; the maximal feasible step ``alpha`` (the first
candidate below the boundary that would cross it); an exact line search of the convex
piecewise-quadratic objective on ``[0, step_shrink * alpha]``.

Decisions the paper leaves open (documented here and in the README):

* **Boundary tolerance.** A candidate is on the boundary (set E) when
  ``|score| <= boundary_rtol * (|b| + ||w|| * max_j ||z_j||)``: relative to a bound on every
  candidate score, so rescaling the features does not change which points are on it.
* **Start index of Algorithm 1.** The paper frees at most one boundary point when |L| < k. We
  free the longest prefix of the sorted order whose cumulative cost fits in what the current
  positives leave of the budget (``max(k - |L|, 0)`` points with unit costs: all of them may
  become positive without breaking the constraint), and constrain the rest. This never admits
  positives beyond the budget. With costs a later, cheaper boundary point that would still
  fit is constrained too (conservative).
* **Ratio test.** Every candidate below the boundary that would cross it blocks the step, even
  when the budget could afford it becoming positive (the paper's rule; conservative with
  costs as with counts).
* **Fits** means a total cost at most ``B (1 + 1e-12)`` (``reserve.solvers._base.BUDGET_RTOL``).
* **No candidate rises** (``alpha`` infinite): the line search runs on ``[0, inf)``; the
  objective is strongly convex in w and both classes are present, so its minimum is finite.
* **Zero-length steps.** If the projected direction is zero or the exact line search returns a
  step that does not decrease the objective by a relative ``tol``, the method stops
  (``stop_reason`` says which); the polish then takes over.
* **Ties at the k-th score** are resolved by the final top-k rule (lower index first); with
  costs by :func:`reserve.solvers._base.budget_select`.

Speed: labelled margins and candidate scores are updated incrementally (``s += a * X d``).
Candidates far below the boundary are skipped: with ``v = (w, b)`` and ``z~ = (z, 1)``,
``|z~ . (v - v_ref)| <= ||z~|| ||v - v_ref||`` (Cauchy-Schwarz), so a candidate whose score at
the last full refresh satisfied ``s_ref / ||z~|| < -tau`` stays negative while
``||v - v_ref|| < tau``. Only the working set of the other candidates is multiplied each
iteration; a full refresh happens when the bound can no longer vouch for the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from reserve.errors import InvalidInputError
from reserve.solvers._base import feasible_intercepts
from reserve.solvers._hinge import (
    hinge_weights,
    species_objectives,
    species_weights,
    weighted_hinge,
)
from reserve.solvers.constraints import Constraints

__all__ = [
    "WIDE_COLUMNS",
    "FDResult",
    "augmented_norms",
    "feasible_direction",
    "line_search",
    "project_direction",
    "working_set",
]


#: Columns of the augmented boundary rows above which Algorithm 1's projection works on the
#: basis as one matrix (classical Gram-Schmidt, twice) instead of vector by vector (modified
#: Gram-Schmidt, twice). Both are orthogonal to working precision and differ in rounding only;
#: the loop is cheaper on narrow rows, the matrix on wide ones (a spline map of 229 columns at
#: 4,000 rows: 24 s of the loop per 500 FD iterations against 1.4 s). The rounding matters on
#: narrow rows: with the matrix form there, FD on the two-species reference run
#: (``benchmarks/bench_reference.py``, ``two_species_mip``) takes another path to another local
#: optimum and the time-limited MIP ends 0.15% higher, on other cells.
WIDE_COLUMNS = 64


@dataclass
class FDResult:
    """Outcome of the feasible-direction method: ``w`` of shape (S, d), ``b`` of shape (S,)."""

    w: np.ndarray
    b: np.ndarray
    objective: float
    n_iter: int
    history: list[float] = field(default_factory=list)
    stop_reason: str = ""
    n_refresh: int = 0


def line_search(
    w_dot_d: float,
    d_sq: float,
    u: np.ndarray,
    v: np.ndarray,
    C: float,
    a_max: float,
    kink_tol: float = 1e-12,
) -> float:
    """Exact minimiser of a convex piecewise-quadratic on ``[0, a_max]``.

    ``phi(a) = 0.5 ||w + a d||^2 + C sum_i max(0, u_i + a v_i)`` where ``u_i`` is the hinge
    argument ``1 - y_i m_i`` now and ``v_i`` its rate along the direction. The derivative is
    non-decreasing; we walk the breakpoints ``-u_i / v_i`` in order and stop where it turns
    non-negative (no sampling).

    Parameters
    ----------
    w_dot_d : float
        ``w . d_w`` (derivative of the quadratic part at 0).
    d_sq : float
        ``||d_w||^2`` (curvature of the quadratic part).
    u, v : ndarray
        Hinge arguments and their rates.
    C : float or ndarray
        Hinge weight, or per-row weights aligned with ``u``.
    a_max : float
        Upper end of the interval (may be ``inf``).
    kink_tol : float
        ``|u_i| <= kink_tol`` counts as sitting on the kink.

    Returns
    -------
    float
        The minimising step in ``[0, a_max]``.

    Examples
    --------
    >>> import numpy as np
    >>> # phi(a) = 0.5 (1 - a)^2 has its minimum at a = 1
    >>> line_search(-1.0, 1.0, np.zeros(0), np.zeros(0), 1.0, 5.0)
    1.0
    """
    on_kink = np.abs(u) <= kink_tol
    active0 = (u > kink_tol) | (on_kink & (v > 0))
    if np.ndim(C) == 0:
        D0 = w_dot_d + C * float(v[active0].sum())
    else:  # per-row weights
        C = hinge_weights(C, u)
        D0 = w_dot_d + float((C * v)[active0].sum())
    if D0 >= 0.0:
        return 0.0
    # Breakpoints strictly inside (0, a_max): leaving (u>0, v<0) or entering (u<0, v>0).
    cross = (~on_kink) & (((u > 0) & (v < 0)) | ((u < 0) & (v > 0)))
    a_br = -u[cross] / v[cross]
    jump = (C if np.ndim(C) == 0 else C[cross]) * np.abs(v[cross])
    inside = a_br < a_max
    a_br, jump = a_br[inside], jump[inside]
    if a_br.size:
        order = np.argsort(a_br, kind="stable")
        a_br, jump = a_br[order], jump[order]
        cum = np.cumsum(jump)
        before = np.r_[0.0, cum[:-1]]
        D_left = D0 + a_br * d_sq + before  # derivative just before each breakpoint
        D_right = D_left + jump  # and just after
        hit = np.flatnonzero(D_right >= 0.0)
        if hit.size:
            i = hit[0]
            if D_left[i] >= 0.0 and d_sq > 0.0:
                # The zero lies inside the segment ending at breakpoint i.
                a = -(D0 + before[i]) / d_sq
                lo = a_br[i - 1] if i > 0 else 0.0
                return float(min(max(a, lo), a_br[i]))
            return float(a_br[i])
        tail = D0 + cum[-1]
    else:
        tail = D0
    if d_sq > 0.0:
        return float(min(-tail / d_sq, a_max))
    return float(a_max)


def project_direction(
    d: np.ndarray,
    A_E: np.ndarray,
    n_free: int = 0,
    tol: float = 1e-12,
    *,
    cost: np.ndarray | None = None,
    slack: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1: project ``d`` into the null space of boundary points until none rises.

    Parameters
    ----------
    d : ndarray of shape (p,)
        The negative subgradient in the augmented space ``(d_w, d_b)``.
    A_E : ndarray of shape (|E|, p)
        Augmented boundary rows ``(z_j, 1)``.
    n_free : int
        How many boundary points (the first in descending order of ``z~ . d``) may rise.
        Ignored when ``cost`` is given.
    tol : float
        Relative tolerance for "positive inner product" and for linear dependence.
    cost : ndarray of shape (|E|,) or None
        Cost of each boundary point. With it, the points that may rise are the longest prefix
        of the descending order whose cumulative cost is at most ``slack`` (with unit costs
        and ``slack`` in ``[n, n + 1)`` that is ``n`` points, as ``n_free = n``).
    slack : float or None
        What the current positives leave of the budget (required with ``cost``).

    Returns
    -------
    d_star : ndarray of shape (p,)
        The projected direction.
    B : ndarray of int
        Rows of ``A_E`` whose null space ``d_star`` lies in.

    Examples
    --------
    >>> import numpy as np
    >>> d, B = project_direction(np.array([1.0, 1.0]), np.array([[1.0, 0.0]]), 0)
    >>> d.tolist(), B.tolist()
    ([0.0, 1.0], [0])
    >>> A = np.array([[1.0, 0.0], [0.5, 0.0]])  # both rise along d; the first costs 3
    >>> c = np.array([3.0, 1.0])
    >>> project_direction(np.array([1.0, 0.0]), A, cost=c, slack=2.0)[1].tolist()  # no room
    [0]
    >>> project_direction(np.array([1.0, 0.0]), A, cost=c, slack=3.0)[1].tolist()  # 0 may rise
    [1]
    """
    d = d.astype(np.float64, copy=True)
    nE = A_E.shape[0]
    if nE == 0:
        return d, np.zeros(0, dtype=np.int64)
    ip = A_E @ d
    order = np.argsort(-ip, kind="stable")
    A = A_E[order]
    ip = ip[order]
    if cost is not None:
        n_free = int(np.searchsorted(np.cumsum(cost[order]), slack, side="right"))
    B = _constrain(d, A, ip, n_free, tol)
    return d, np.asarray([int(order[jp]) for jp in B], dtype=np.int64)


def _constrain(d: np.ndarray, A: np.ndarray, ip: np.ndarray, n_free: int, tol: float) -> list:
    """Walk the sorted rows ``A`` from ``n_free`` on, projecting ``d`` (in place) off each.

    Rows longer than :data:`WIDE_COLUMNS` go to :func:`_constrain_wide` (the basis grows to
    hundreds of vectors, and the loop's ``|B|^2`` small products would cost more than the
    solve), the others to :func:`_constrain_narrow`. Returns the positions (in ``A``) of the
    constrained rows.
    """
    if A.shape[1] > WIDE_COLUMNS:
        return _constrain_wide(d, A, ip, n_free, tol)
    return _constrain_narrow(d, A, ip, n_free, tol)


def _constrain_narrow(
    d: np.ndarray, A: np.ndarray, ip: np.ndarray, n_free: int, tol: float
) -> list:
    """:func:`_constrain` vector by vector (modified Gram-Schmidt, twice).

    An orthonormal basis of the span of the constrained rows is grown by Gram-Schmidt (with
    one re-orthogonalisation pass), and the inner products ``ip`` of the remaining rows are
    updated with each new basis vector, so the cost is O(|E| |B| p) <= O(|E|^2 p). Returns
    the positions (in ``A``) of the constrained rows.

    The loop runs thousands of times per fit on a few short rows, so it is written for low
    per-call overhead: ``np.dot`` on 1-D arrays, ``sqrt(a . a)`` for the norm and a threshold
    computed once; the arithmetic is the same operation for operation (bit-identical).
    """
    nE = A.shape[0]
    row_norm = np.linalg.norm(A, axis=1)
    Q: list[np.ndarray] = []
    B: list[int] = []
    scale = max(float(np.linalg.norm(d)), 1e-300)
    thr = tol * scale * row_norm
    rising = ip > thr
    dot = np.dot
    for jp in range(n_free, nE):
        if not rising[jp:].any():
            break
        a = A[jp].copy()
        for q in Q:
            a -= dot(q, a) * q
        for q in Q:  # second pass keeps the basis orthogonal to working precision
            a -= dot(q, a) * q
        na = math.sqrt(dot(a, a))  # what np.linalg.norm computes for a 1-D array
        B.append(jp)
        if na <= tol * max(row_norm[jp], 1.0):
            continue  # dependent on rows already in B: d is already orthogonal to it
        q = a / na
        coef = float(dot(q, d))
        d -= coef * q
        ip -= coef * (A @ q)
        rising = ip > thr
        Q.append(q)
        if len(Q) == d.shape[0]:
            d[:] = 0.0
            break
    return B


def _constrain_wide(d: np.ndarray, A: np.ndarray, ip: np.ndarray, n_free: int, tol: float) -> list:
    """:func:`_constrain` for wide rows: the basis as one matrix.

    An orthonormal basis of the span of the constrained rows is grown by classical
    Gram-Schmidt with one re-orthogonalisation pass (CGS2: each pass one product with the
    basis matrix, as accurate as modified Gram-Schmidt twice), and the inner products ``ip``
    of the remaining rows are updated with each new basis vector, so the cost is
    O(|E| |B| p) <= O(|E|^2 p) in a few matrix-vector products per row. Returns the
    positions (in ``A``) of the constrained rows.
    """
    nE, p = A.shape
    row_norm = np.linalg.norm(A, axis=1)
    Q = np.empty((p, p))  # rows 0..r-1: the basis
    r = 0
    B: list[int] = []
    scale = max(float(np.linalg.norm(d)), 1e-300)
    thr = tol * scale * row_norm
    rising = ip > thr
    for jp in range(n_free, nE):
        if not rising[jp:].any():
            break
        a = A[jp].copy()
        if r:
            Qr = Q[:r]
            a -= (Qr @ a) @ Qr
            a -= (Qr @ a) @ Qr  # the second pass keeps the basis orthogonal to working precision
        na = math.sqrt(a @ a)
        B.append(jp)
        if na <= tol * max(row_norm[jp], 1.0):
            continue  # dependent on rows already in B: d is already orthogonal to it
        q = a / na
        coef = float(q @ d)
        d -= coef * q
        ip -= coef * (A @ q)
        rising = ip > thr
        Q[r] = q
        r += 1
        if r == p:
            d[:] = 0.0
            break
    return B


def _hinge_obj(w: np.ndarray, margins: np.ndarray, C) -> float:
    return float(0.5 * (w @ w) + weighted_hinge(C, margins))


def augmented_norms(X_cand: np.ndarray) -> np.ndarray:
    """``||(z_j, 1)||`` per candidate row: the Cauchy-Schwarz factor of the score ``w.z_j + b``."""
    return np.sqrt(np.einsum("ij,ij->i", X_cand, X_cand) + 1.0)


def working_set(scores: np.ndarray, norm: np.ndarray, size: int) -> tuple[np.ndarray, float]:
    """The ``size`` rows with the largest ``score / norm`` and the radius that vouches for the rest.

    With ``v = (w, b)``, a row outside the set has ``score / ||z~|| <= -tau`` at the reference
    point, so it stays ``<= 0`` while ``||v - v_ref|| < tau``. A ``tau <= 0`` vouches for nothing
    (callers decide what to do then); ``size >= len(scores)`` gives every row and ``inf``.

    Returns
    -------
    idx : ndarray of int, increasing
    tau : float

    Examples
    --------
    >>> import numpy as np
    >>> idx, tau = working_set(np.array([1.0, -3.0, -0.5, -1.0]), np.ones(4), 2)
    >>> idx.tolist(), tau
    ([0, 2], 0.5)
    """
    m = scores.shape[0]
    if size >= m:
        return np.arange(m), np.inf
    ratio = scores / norm
    part = np.argpartition(-ratio, size - 1)[:size]
    return np.sort(part), float(-ratio[part].min())


class _CandidateScores:
    """Candidate scores kept on a working set; the rest vouched for by Cauchy-Schwarz."""

    def __init__(self, X_cand: np.ndarray, ws_size: int, cost: np.ndarray) -> None:
        self.X = X_cand
        self.cost = cost
        self.m = X_cand.shape[0]
        self.norm = augmented_norms(X_cand)
        self.r_max = float(np.sqrt(np.max(self.norm**2 - 1.0)))
        self.ws_size = min(self.m, ws_size)
        self.n_refresh = 0

    def refresh(self, w: np.ndarray, b: float) -> None:
        """Recompute every score and rebuild the working set around ``(w, b)``."""
        scores = self.X @ w + b
        self.n_refresh += 1
        idx, self.tau = working_set(scores, self.norm, self.ws_size)
        if not self.tau > 0.0:  # too many rows at the boundary: keep them all
            idx, self.tau = np.arange(self.m), np.inf
        self.idx = idx
        self.Z = np.ascontiguousarray(self.X[idx]) if idx.size < self.m else self.X
        self.s = scores[idx]
        self.c = self.cost[idx]  # costs of the working-set rows, aligned with s
        self.v_ref = np.r_[w, b]

    def pin(self, row: int, w: np.ndarray, b: float) -> None:
        """Set candidate ``row``'s score to exactly 0 (it was stepped onto the boundary)."""
        pos = int(np.searchsorted(self.idx, row))
        if pos >= self.idx.size or self.idx[pos] != row:
            # The exact fallback found a blocker outside the working set: rebuild around it.
            self.refresh(w, b)
            pos = int(np.searchsorted(self.idx, row))
        self.s[pos] = 0.0

    def max_step(self, w: np.ndarray, b: float, d_w: np.ndarray, d_b: float, btol: float):
        """Largest ``a`` keeping every candidate below the boundary at or under zero.

        Returns ``(alpha, rate, blocker)``: ``rate`` the working-set rates ``z . d_w + d_b``,
        ``blocker`` the candidate (row of ``X_cand``) that limits the step, or -1.
        """
        d_norm = float(np.sqrt(d_w @ d_w + d_b * d_b))
        for check in range(2):
            rate = self.Z @ d_w + d_b
            alpha, pos = _ratio_test(self.s, rate, btol)
            blocker = int(self.idx[pos]) if pos >= 0 else -1
            if not np.isfinite(self.tau):
                return alpha, rate, blocker
            dv = float(np.linalg.norm(np.r_[w, b] - self.v_ref))
            if alpha <= (self.tau - dv) / d_norm:
                return alpha, rate, blocker
            if check == 0:
                self.refresh(w, b)
        # The bound cannot vouch for a step this long: take it exactly over every row.
        alpha, blocker = _ratio_test(self.X @ w + b, self.X @ d_w + d_b, btol)
        return alpha, rate, blocker


def _ratio_test(s: np.ndarray, rate: np.ndarray, btol: float) -> tuple[float, int]:
    """First crossing ``min -s_j / rate_j`` over rows below the boundary that rise."""
    below = np.flatnonzero((s < -btol) & (rate > 0))
    if below.size == 0:
        return np.inf, -1
    ratios = -s[below] / rate[below]
    pos = int(np.argmin(ratios))
    return float(ratios[pos]), int(below[pos])


class _OneScorer:
    """One scorer ``(w, b)``: the FD iterate with costs and a working set of candidates.

    The arithmetic of every step (vector products, Cauchy-Schwarz working set, cost slack) is
    the single-species method's; :func:`_run` drives it.
    """

    def __init__(self, X_lab, y_pm, X_cand, constraints, C, w0, b0, working_set):
        bud = constraints.budget
        self.X_lab, self.y_pm, self.X_cand, self.C, self.bud = X_lab, y_pm, X_cand, C, bud
        self.dim = X_lab.shape[1]
        self.w = np.array(w0, dtype=np.float64, copy=True)
        self.b = float(b0)
        ws_size = max(8 * constraints.n_cells, 2048) if working_set is None else working_set
        self.cand = _CandidateScores(X_cand, ws_size, bud.cost)
        self.cand.refresh(self.w, self.b)
        self.margins = 1.0 - y_pm * (X_lab @ self.w + self.b)  # hinge arguments u_i

    @property
    def n_refresh(self) -> int:
        return self.cand.n_refresh

    def objective(self) -> float:
        return _hinge_obj(self.w, self.margins, self.C)

    def begin(self, boundary_rtol: float) -> None:
        """Boundary tolerance, what the positives leave of the budget, the boundary rows."""
        cand = self.cand
        r = float(np.linalg.norm(self.w)) * cand.r_max
        self.btol = boundary_rtol * max(abs(self.b) + r, 1e-300)
        # What the positives leave of the budget (k - |L| + a hair with unit costs).
        self.slack = self.bud.limit - float(cand.c[cand.s > self.btol].sum())
        self.E_pos = np.flatnonzero(np.abs(cand.s) <= self.btol)
        self.A_E = np.hstack([cand.Z[self.E_pos], np.ones((self.E_pos.size, 1))])

    def direction(self, kink_active: bool) -> tuple[np.ndarray, np.ndarray]:
        """The negative subgradient and its projection (Algorithm 1)."""
        act = self.margins > (-1e-12 if kink_active else 1e-12)
        ya = np.where(act, self.y_pm, 0.0)  # a masked product: X_lab[act] would copy rows
        C = self.C
        if np.ndim(C) == 0:
            g_aug = -np.r_[self.w - C * (ya @ self.X_lab), -C * float(ya.sum())]
        else:  # per-row weights
            ya = C * ya
            g_aug = -np.r_[self.w - ya @ self.X_lab, -float(ya.sum())]
        cost_E = self.cand.c[self.E_pos]
        d_aug, _ = project_direction(g_aug, self.A_E, cost=cost_E, slack=self.slack)
        return g_aug, d_aug

    def trial(self, d_aug: np.ndarray):
        """Maximal feasible step along ``d_aug``; ``(alpha, blocker, trial data)``."""
        d_w, d_b = d_aug[: self.dim], float(d_aug[self.dim])
        alpha, rate, blocker = self.cand.max_step(self.w, self.b, d_w, d_b, self.btol)
        v_rate = -self.y_pm * (self.X_lab @ d_w + d_b)
        return alpha, blocker, (d_w, d_b, rate, v_rate)

    def line_search(self, tr, a_max: float) -> float:
        d_w, _, _, v_rate = tr
        w_dot_d, d_sq = float(self.w @ d_w), float(d_w @ d_w)
        return line_search(w_dot_d, d_sq, self.margins, v_rate, self.C, a_max)

    def objective_at(self, a: float, tr) -> float:
        d_w, _, _, v_rate = tr
        return _hinge_obj(self.w + a * d_w, self.margins + a * v_rate, self.C)

    def breaks_budget(self, a: float, tr) -> bool:
        cand = self.cand
        return float(cand.c[(cand.s + a * tr[2]) > self.btol].sum()) > self.bud.limit

    def move(self, a: float, tr, pin: int) -> None:
        d_w, d_b, rate, v_rate = tr
        self.w += a * d_w
        self.b += a * d_b
        self.margins += a * v_rate
        self.cand.s += a * rate
        if pin >= 0:  # the blocker landed on the boundary: pin it there exactly
            self.cand.pin(pin, self.w, self.b)

    def finish(self) -> tuple[np.ndarray, np.ndarray, float]:
        """Safety net, then the exact objective (incremental updates accumulate rounding);
        ``(w[None], [b], objective)``."""
        w, b, cand = self.w, self.b, self.cand
        # At a degenerate point (w near 0, every candidate on the boundary) rounding can leave
        # more than k candidates a hair above zero; lower b under the score of the first
        # candidate (by decreasing score) whose cost no longer fits: the (k+1)-th with unit
        # costs.
        s_cut = self.bud.cut(self.X_cand @ w + b)
        if s_cut > 0.0:
            b -= s_cut + 1e-15 * (abs(b) + float(np.linalg.norm(w)) * cand.r_max)
        f = _hinge_obj(w, 1.0 - self.y_pm * (self.X_lab @ w + b), self.C)
        return w[None, :], np.array([b], dtype=np.float64), f


def _objective_stacked(W: np.ndarray, U: np.ndarray, C) -> float:
    """Total objective of the scorers ``W`` (S, d) from the hinge arguments ``U`` (n, S)."""
    return float(0.5 * np.einsum("sd,sd->", W, W) + weighted_hinge(C, U))


def _boundary_rows(X_cand: np.ndarray, Ej: np.ndarray, Es: np.ndarray, S: int) -> np.ndarray:
    """Pairs ``(j, s)`` as rows of the stacked space: ``(z_j, 1)`` in block ``s``, 0 elsewhere."""
    d = X_cand.shape[1]
    A = np.zeros((Ej.size, S * (d + 1)))
    cols = Es[:, None] * (d + 1) + np.arange(d + 1)
    A[np.arange(Ej.size)[:, None], cols] = np.hstack([X_cand[Ej], np.ones((Ej.size, 1))])
    return A


class _StackedScorers:
    """``S`` scorers ``W`` (S, d), ``b`` (S,) sharing ``k`` cells: the FD iterate.

    A cell is positive when any scorer scores it positive. Every candidate score is kept
    (no working set) and the budget is ``k`` cells.

    With ``S`` scorers the variable is stacked, ``v = (w_1, b_1, ..., w_S, b_S)``, and the
    single-scorer rules carry over:

    * the objective is separable, so the subgradient is block-wise (block ``s`` is the
      single-scorer subgradient of its own hinge terms);
    * ``L`` is the set of cells positive through some scorer (score ``> btol_s``, with
      ``btol_s = boundary_rtol * (|b_s| + ||w_s|| max_j ||z_j||)``, scorer by scorer because
      each has its own scale); a pair ``(j, s)`` is on the boundary when
      ``|w_s . z_j + b_s| <= btol_s`` and ``j`` is not in ``L`` (raising another scorer's
      score of a cell already positive costs nothing);
    * Algorithm 1 runs on the boundary pairs as rows of the stacked space with the first
      ``max(k - |L|, 0)`` pairs free: each freed pair makes at most one more cell positive;
    * the maximal step is the first crossing of a below-boundary pair of a cell not in ``L``;
      the exact line search sees the per-scorer hinge terms concatenated;
    * the kink retry, the anti-jamming rule and the safety net are the same code
      (:func:`_step`, :func:`_run`).
    """

    def __init__(self, X_lab, Y_pm, X_cand, k, C, W0, b0):
        self.X_lab, self.Y_pm, self.X_cand, self.k, self.C = X_lab, Y_pm, X_cand, k, C
        self.S, self.dim = W0.shape
        self.W = np.array(W0, dtype=np.float64, copy=True)
        self.b = np.array(b0, dtype=np.float64, copy=True)
        self.r_max = float(np.sqrt(np.max(augmented_norms(X_cand) ** 2 - 1.0)))
        self.U = 1.0 - Y_pm * (X_lab @ self.W.T + self.b)  # hinge arguments, (n, S)
        self.Sc = X_cand @ self.W.T + self.b  # candidate scores, (m, S)
        self.n_refresh = 0  # every score is kept: no working set to refresh

    def objective(self) -> float:
        return _objective_stacked(self.W, self.U, self.C)

    def begin(self, boundary_rtol: float) -> None:
        W, b, Sc = self.W, self.b, self.Sc
        self.btol = boundary_rtol * np.maximum(
            np.abs(b) + np.linalg.norm(W, axis=1) * self.r_max, 1e-300
        )
        self.in_L = (Sc > self.btol).any(axis=1)
        self.n_free = max(self.k - int(self.in_L.sum()), 0)
        Ej, Es = np.nonzero((np.abs(Sc) <= self.btol) & ~self.in_L[:, None])
        self.A_E = _boundary_rows(self.X_cand, Ej, Es, self.S)

    def direction(self, kink_active: bool) -> tuple[np.ndarray, np.ndarray]:
        act = self.U > (-1e-12 if kink_active else 1e-12)
        YA = np.where(act, self.Y_pm, 0.0)
        C = self.C
        if np.ndim(C) == 0:
            G = np.hstack([self.W - C * (YA.T @ self.X_lab), -C * YA.sum(axis=0)[:, None]])
        else:  # per-row (or per-row and species) weights
            YA = hinge_weights(C, YA) * YA
            G = np.hstack([self.W - YA.T @ self.X_lab, -YA.sum(axis=0)[:, None]])
        g = -G.ravel()  # block s = (-grad w_s, -grad b_s)
        dv, _ = project_direction(g, self.A_E, self.n_free)
        return g, dv

    def trial(self, dv: np.ndarray):
        D = dv.reshape(self.S, self.dim + 1)
        Dw, Db = D[:, : self.dim], D[:, self.dim]
        rate = self.X_cand @ Dw.T + Db
        Sc = self.Sc
        below = (Sc < -self.btol) & (rate > 0) & ~self.in_L[:, None]
        if below.any():
            ratios = np.full(Sc.shape, np.inf)
            ratios[below] = -Sc[below] / rate[below]
            blocker = int(np.argmin(ratios))  # flat index j * S + s; ties to the lower j
            alpha = float(ratios.flat[blocker])
        else:
            blocker, alpha = -1, np.inf
        V = -self.Y_pm * (self.X_lab @ Dw.T + Db)
        return alpha, blocker, (Dw, Db, rate, V)

    def line_search(self, tr, a_max: float) -> float:
        Dw, _, _, V = tr
        wd, dd = float(np.einsum("sd,sd->", self.W, Dw)), float(np.einsum("sd,sd->", Dw, Dw))
        return line_search(wd, dd, self.U.ravel(), V.ravel(), self.C, a_max)

    def objective_at(self, a: float, tr) -> float:
        Dw, _, _, V = tr
        return _objective_stacked(self.W + a * Dw, self.U + a * V, self.C)

    def breaks_budget(self, a: float, tr) -> bool:
        return int(((self.Sc + a * tr[2]) > self.btol).any(axis=1).sum()) > self.k

    def move(self, a: float, tr, pin: int) -> None:
        Dw, Db, rate, V = tr
        self.W += a * Dw
        self.b += a * Db
        self.U += a * V
        self.Sc += a * rate
        if pin >= 0:  # the blocker landed on the boundary: pin it there exactly
            self.Sc.flat[pin] = 0.0

    def finish(self) -> tuple[np.ndarray, np.ndarray, float]:
        # Rounding at a degenerate point can leave a score a hair above zero: restore
        # feasibility.
        W = self.W
        b = feasible_intercepts(self.X_cand @ W.T, self.b, self.k)
        return W, b, float(species_objectives(W, b, self.X_lab, self.Y_pm, self.C).sum())


def _step(it, f: float, last_blocker: int, step_shrink: float, tol: float):
    """One FD iteration's search: ``(step or None, stop reason)``.

    Subgradient: the paper's, ``-C sum_{xi_i > 0} y_i x_i``. A labelled row sitting exactly on
    the hinge kink (the line search often stops there) makes that element an ascent direction
    for the row; when the paper's choice yields no progress we retry once with kink rows
    counted as active, the other extreme of the subdifferential, before stopping.
    """
    stop = "max_iter"
    for kink_active in (False, True):
        g, d = it.direction(kink_active)
        # Relative test: when the boundary rows span the space the exact projection is
        # zero and what is left is rounding noise, along which boundary points may rise.
        if float(np.linalg.norm(d)) <= 1e-10 * float(np.linalg.norm(g)):
            stop = "zero_direction"
            continue
        alpha, blocker, tr = it.trial(d)
        # Anti-jamming: a candidate that blocked the previous step too is allowed to reach
        # the boundary (search the full [0, alpha]) so that it joins E.
        shrink = 1.0 if (blocker >= 0 and blocker == last_blocker) else step_shrink
        a = it.line_search(tr, shrink * alpha)
        if not np.isfinite(a):
            return None, "unbounded"
        f_new = it.objective_at(a, tr)
        # Safety net: never accept a step whose positives break the budget.
        if it.breaks_budget(a, tr):
            stop = "infeasible_step"
            continue
        if a > 0.0 and f - f_new > tol * max(1.0, abs(f)):
            return (a, tr, f_new, alpha, blocker), stop
        stop = "no_progress"
    return None, stop


def _run(it, max_iter: int, step_shrink: float, boundary_rtol: float, tol: float):
    """The feasible-direction loop over an iterate (one scorer or ``S`` stacked ones).

    Returns the objective history and the stop reason; the iterate is moved in place.
    """
    f = it.objective()
    history = [f]
    stop = "max_iter"
    last_blocker = -1
    for _ in range(max_iter):
        it.begin(boundary_rtol)
        step, stop = _step(it, f, last_blocker, step_shrink, tol)
        if step is None:
            break
        a, tr, f_new, alpha, blocker = step
        it.move(a, tr, blocker if a >= alpha else -1)
        last_blocker = blocker if a >= step_shrink * alpha else -1
        f = f_new
        history.append(f)
    else:
        stop = "max_iter"
    return history, stop


def feasible_direction(
    X_lab: np.ndarray,
    Y_pm: np.ndarray,
    X_cand: np.ndarray,
    constraints: Constraints,
    C: float,
    W0: np.ndarray,
    b0: np.ndarray,
    *,
    max_iter: int = 500,
    step_shrink: float = 0.5,
    boundary_rtol: float = 1e-9,
    tol: float = 1e-9,
    working_set: int | None = None,
) -> FDResult:
    """Run the paper's feasible-direction method from a feasible start, for ``S`` scorers.

    Parameters
    ----------
    X_lab : ndarray of shape (n, d)
    Y_pm : ndarray of shape (n, S)
        Labels in {-1, +1}, one column per scorer (``S = constraints.n_species``).
    X_cand : ndarray of shape (m, d)
    constraints : Constraints
        The budget over the candidates (several scorers: a budget of equal costs) and the
        number of scorers; ``constraints.n_cells`` sizes the working set. The boundary term is
        not seen here.
    C : float or ndarray
        Hinge weight; or per-row weights ``C c_i``, shape ``(n,)`` or ``(n, S)``.
    W0, b0 : ndarray of shape (S, d) and (S,)
        The start; the positive candidates (cells with a positive score for some scorer) must
        fit the budget.
    max_iter : int
    step_shrink : float
        Line search on ``[0, step_shrink * alpha]``.
    boundary_rtol : float
        Relative width of the boundary set E.
    tol : float
        Relative decrease below which a step counts as no progress.
    working_set : int or None
        Candidates multiplied per iteration (the rest vouched for by Cauchy-Schwarz);
        ``None`` chooses ``max(8 n_cells, 2048)``. One scorer only.

    Returns
    -------
    FDResult
        ``w`` of shape (S, d), ``b`` of shape (S,); ``history`` is non-increasing.

    Notes
    -----
    One scorer runs :class:`_OneScorer` (costs, a working set of candidates); several run
    :class:`_StackedScorers` (every score kept, a cell budget; see its docstring for how the
    rules carry over). The choice is made here, from ``constraints.n_species``; the loop is
    one (:func:`_run`, :func:`_step`).
    """
    S = constraints.n_species
    constraints.check(Y_pm, X_cand, W0, b0)
    if S == 1:
        C0 = species_weights(C, 0)
        it = _OneScorer(X_lab, Y_pm[:, 0], X_cand, constraints, C0, W0[0], b0[0], working_set)
    elif working_set is not None:
        raise InvalidInputError(
            f"working_set= is for one scorer; received it with {S} species. Drop it."
        )
    else:
        it = _StackedScorers(X_lab, Y_pm, X_cand, constraints.budget.card, C, W0, b0)
    history, stop = _run(it, max_iter, step_shrink, boundary_rtol, tol)
    W, b, f = it.finish()
    return FDResult(
        w=W,
        b=b,
        objective=f,
        n_iter=len(history) - 1,
        history=history,
        stop_reason=stop,
        n_refresh=it.n_refresh,
    )
