"""The feasible-direction (FD) method of the TTK paper, vectorised and incremental.

Problem (the paper's relaxed TTK):

    min_{w, b}  f(w, b) = 0.5 ||w||^2 + C sum_i [1 - y_i (w . x_i + b)]_+
    s.t.        #{j : w . z_j + b > 0} <= k          (z_j: candidate rows)

or, with a money budget, ``sum_{j : w . z_j + b > 0} c_j <= B`` (costs ``c_j > 0``). The cell
budget is the case ``c = 1``, ``B = k``, and runs the same code: every count of positives is a
sum of unit costs, exact in floating point, so the unit case takes exactly the old path.

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

from dataclasses import dataclass, field

import numpy as np

from reserve.solvers._base import budget_cut, budget_limit

__all__ = [
    "FDResult",
    "augmented_norms",
    "feasible_direction",
    "line_search",
    "project_direction",
    "working_set",
]


@dataclass
class FDResult:
    """Outcome of the feasible-direction method."""

    w: np.ndarray
    b: float
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
    C : float
        Hinge weight.
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
    D0 = w_dot_d + C * float(v[active0].sum())
    if D0 >= 0.0:
        return 0.0
    # Breakpoints strictly inside (0, a_max): leaving (u>0, v<0) or entering (u<0, v>0).
    cross = (~on_kink) & (((u > 0) & (v < 0)) | ((u < 0) & (v > 0)))
    a_br = -u[cross] / v[cross]
    jump = C * np.abs(v[cross])
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

    Notes
    -----
    An orthonormal basis of the span of the constrained rows is grown by Gram-Schmidt (with
    one re-orthogonalisation pass), and the inner products of the remaining rows are updated
    with each new basis vector, so the cost is O(|E| |B| p) ≤ O(|E|^2 p).

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
    row_norm = np.linalg.norm(A, axis=1)
    Q: list[np.ndarray] = []
    B: list[int] = []
    scale = max(float(np.linalg.norm(d)), 1e-300)
    for jp in range(n_free, nE):
        rest = ip[jp:]
        if not np.any(rest > tol * scale * row_norm[jp:]):
            break
        a = A[jp].copy()
        for q in Q:
            a -= (q @ a) * q
        for q in Q:  # second pass keeps the basis orthogonal to working precision
            a -= (q @ a) * q
        na = float(np.linalg.norm(a))
        B.append(int(order[jp]))
        if na <= tol * max(row_norm[jp], 1.0):
            continue  # dependent on rows already in B: d is already orthogonal to it
        q = a / na
        coef = float(q @ d)
        d -= coef * q
        ip -= coef * (A @ q)
        Q.append(q)
        if len(Q) == d.shape[0]:
            d[:] = 0.0
            break
    return d, np.asarray(B, dtype=np.int64)


def _hinge_obj(w: np.ndarray, margins: np.ndarray, C: float) -> float:
    return float(0.5 * (w @ w) + C * np.maximum(margins, 0.0).sum())


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
        for attempt in range(2):
            rate = self.Z @ d_w + d_b
            alpha, pos = _ratio_test(self.s, rate, btol)
            blocker = int(self.idx[pos]) if pos >= 0 else -1
            if not np.isfinite(self.tau):
                return alpha, rate, blocker
            dv = float(np.linalg.norm(np.r_[w, b] - self.v_ref))
            if alpha <= (self.tau - dv) / d_norm:
                return alpha, rate, blocker
            if attempt == 0:
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


def feasible_direction(
    X_lab: np.ndarray,
    y_pm: np.ndarray,
    X_cand: np.ndarray,
    k: int,
    C: float,
    w0: np.ndarray,
    b0: float,
    *,
    max_iter: int = 500,
    step_shrink: float = 0.5,
    boundary_rtol: float = 1e-9,
    tol: float = 1e-9,
    working_set: int | None = None,
    cost: np.ndarray | None = None,
    budget: float | None = None,
) -> FDResult:
    """Run the paper's feasible-direction method from a feasible ``(w0, b0)``.

    Parameters
    ----------
    X_lab : ndarray of shape (n, d)
    y_pm : ndarray of shape (n,)
        Labels in {-1, +1}.
    X_cand : ndarray of shape (m, d)
    k : int
        The cell budget; with ``cost`` only a size hint for the working set (pass about the
        number of candidates the budget buys).
    C : float
    w0, b0 : start; the positive candidates must fit the budget.
    max_iter : int
    step_shrink : float
        Line search on ``[0, step_shrink * alpha]``.
    boundary_rtol : float
        Relative width of the boundary set E.
    tol : float
        Relative decrease below which a step counts as no progress.
    working_set : int or None
        Candidates multiplied per iteration (the rest vouched for by Cauchy-Schwarz);
        ``None`` chooses ``max(8 k, 2048)``.
    cost : ndarray of shape (m,) or None
        Positive candidate costs (a money budget); ``None`` means unit costs.
    budget : float or None
        The money budget ``B`` (required with ``cost``); ``None`` means ``k``.

    Returns
    -------
    FDResult

    Notes
    -----
    Subgradient: the paper's, ``-C sum_{xi_i > 0} y_i x_i``. A labelled row sitting exactly on
    the hinge kink (the line search often stops there) makes that element an ascent direction
    for the row; when the paper's choice yields no progress we retry once with kink rows
    counted as active, the other extreme of the subdifferential, before stopping.
    """
    dim = X_lab.shape[1]
    if cost is None:
        cost, budget = np.ones(X_cand.shape[0]), float(k)
    limit = budget_limit(budget)
    w = np.array(w0, dtype=np.float64, copy=True)
    b = float(b0)
    ws_size = working_set if working_set is not None else max(8 * k, 2048)
    cand = _CandidateScores(X_cand, ws_size, np.asarray(cost, dtype=np.float64))
    cand.refresh(w, b)
    margins = 1.0 - y_pm * (X_lab @ w + b)  # hinge arguments u_i
    f = _hinge_obj(w, margins, C)
    history = [f]
    stop = "max_iter"
    last_blocker = -1
    for _ in range(max_iter):
        btol = boundary_rtol * max(abs(b) + float(np.linalg.norm(w)) * cand.r_max, 1e-300)
        # What the positives leave of the budget (k - |L| + a hair with unit costs).
        slack = limit - float(cand.c[cand.s > btol].sum())
        E_pos = np.flatnonzero(np.abs(cand.s) <= btol)
        A_E = np.hstack([cand.Z[E_pos], np.ones((E_pos.size, 1))])
        step = None
        for kink_active in (False, True):
            act = margins > (-1e-12 if kink_active else 1e-12)
            ya = np.where(act, y_pm, 0.0)  # a masked product: X_lab[act] would copy rows
            g_aug = -np.r_[w - C * (ya @ X_lab), -C * float(ya.sum())]
            d_aug, _ = project_direction(g_aug, A_E, cost=cand.c[E_pos], slack=slack)
            d_w, d_b = d_aug[:dim], float(d_aug[dim])
            # Relative test: when the boundary rows span the space the exact projection is
            # zero and what is left is rounding noise, along which boundary points may rise.
            if float(np.linalg.norm(d_aug)) <= 1e-10 * float(np.linalg.norm(g_aug)):
                stop = "zero_direction"
                continue
            alpha, rate, blocker = cand.max_step(w, b, d_w, d_b, btol)
            v_rate = -y_pm * (X_lab @ d_w + d_b)
            # Anti-jamming: a candidate that blocked the previous step too is allowed to reach
            # the boundary (search the full [0, alpha]) so that it joins E.
            shrink = 1.0 if (blocker >= 0 and blocker == last_blocker) else step_shrink
            a = line_search(float(w @ d_w), float(d_w @ d_w), margins, v_rate, C, shrink * alpha)
            if not np.isfinite(a):
                stop = "unbounded"
                break
            f_new = _hinge_obj(w + a * d_w, margins + a * v_rate, C)
            # Safety net: never accept a step whose positives break the budget.
            if float(cand.c[(cand.s + a * rate) > btol].sum()) > limit:
                stop = "infeasible_step"
                continue
            if a > 0.0 and f - f_new > tol * max(1.0, abs(f)):
                step = (a, d_w, d_b, rate, v_rate, f_new, alpha, blocker)
                break
            stop = "no_progress"
        if step is None:
            break
        a, d_w, d_b, rate, v_rate, f_new, alpha, blocker = step
        w += a * d_w
        b += a * d_b
        margins += a * v_rate
        cand.s += a * rate
        if a >= alpha:  # the blocker landed on the boundary: pin it there exactly
            cand.pin(blocker, w, b)
        last_blocker = blocker if a >= step_shrink * alpha else -1
        f = f_new
        history.append(f)
    else:
        stop = "max_iter"

    # Safety net: at a degenerate point (w near 0, every candidate on the boundary) rounding
    # can leave more than k candidates a hair above zero; lower b under the score of the first
    # candidate (by decreasing score) whose cost no longer fits: the (k+1)-th with unit costs.
    s_cut = budget_cut(X_cand @ w + b, cand.cost, budget)
    if s_cut > 0.0:
        b -= s_cut + 1e-15 * (abs(b) + float(np.linalg.norm(w)) * cand.r_max)
    # Leave the caller with exact margins/objective (incremental updates accumulate rounding).
    f = _hinge_obj(w, 1.0 - y_pm * (X_lab @ w + b), C)
    return FDResult(
        w=w,
        b=b,
        objective=f,
        n_iter=len(history) - 1,
        history=history,
        stop_reason=stop,
        n_refresh=cand.n_refresh,
    )
