"""The fixed-set QP for many labelled rows and few features, by an optimised cutting plane.

Problem (as in :mod:`reserve.solvers._qp`), with ``v = (w, b)``:

    min_v  f(v) = 0.5 ||w||^2 + C H(v),   H(v) = sum_i [1 - y_i (w . x_i + b)]_+
    s.t.   w . z_j + b <= 0               (rows z_j of Z)

The hinge sum is the maximum of linear functions, one per labelling ``s`` in {0, 1}^n,

    H(v) = max_s  sum_{i in s} (1 - y_i (w . x_i + b)) = max_s  c_s + g_s . v,

so every labelling gives a *cut* ``H(v) >= c_s + g_s . v`` valid everywhere (the 1-slack
formulation of Joachims, 2006). The master problem replaces ``H`` by the maximum of the cuts
found so far; it has ``d + 2`` variables (``w``, the free intercept ``b`` and one slack) and
one constraint per cut and per candidate row, and is solved exactly by Clarabel. Its optimum
is a lower bound of the QP's; a feasible point gives an upper bound; we stop when the relative
gap between them is at most ``tol``.

Each iteration costs two passes over ``X`` (``X @ w`` for the new margins, ``X.T @ r`` for the
new cut). Plain cutting planes zig-zag; as in OCAS (Franc and Sonnenburg, 2008) we keep the
best feasible point, move it by an exact line search towards the master's solution (the
objective is piecewise quadratic on the segment) and take the next cut between the two points.

Decisions:

* **The intercept stays free and exact.** The master would be unbounded in ``b`` with a single
  cut, so every state starts with the two cuts of the labellings "all positives" and "all
  negatives": their slopes in ``b`` have opposite signs, which bounds the master in ``b``.
* **Cuts do not depend on Z or C.** A :class:`CuttingPlaneState` keeps them (and the last
  solution) for a warm start of the next solve on the same ``(X, y)`` with other candidate
  rows, which is what the polish does after every swap.
* **Row weights.** With per-row hinge weights ``C_i`` (``C`` an array: class and sample
  weights) the hinge sum is ``H(v) = sum_i C_i [...]_+``, the master's weight is 1 and each
  cut sums the weighted rows; the state then belongs to ``(X, y, C)``.
* **Feasibility is exact.** The best point only moves along segments that keep every ``Z`` row
  at or under zero; at the end ``b`` is lowered by any rounding excess.
* **Working sets.** The master carries the cuts and candidate rows that had a multiplier in
  the last ``keep_age`` solves; any other cut of the pool or candidate row violated at its
  solution is added and the master re-solved. A cut unused for ``max_age`` solves leaves the
  pool (the two starting cuts stay). The master's optimum over a subset is still a lower
  bound.
* **A box on b.** ``|b| <= b_max``, a bound some optimum satisfies, keeps the master bounded
  when a class is missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import clarabel
import numpy as np
import scipy.sparse as sp

from reserve.errors import InvalidInputError, SolverError
from reserve.solvers._fd import line_search
from reserve.solvers._hinge import QPResult, hinge_objective, weighted_hinge

__all__ = ["CuttingPlaneState", "solve_cutting_plane"]

#: Candidate rows added to the master per re-solve, at most (the most violated first).
_ADD_PER_ROUND = 256
#: Master re-solves per iteration while candidate rows are violated, at most.
_MAX_ROUNDS = 50
#: A cut is computed by a full pass over X when more than n / _FULL_CUT_FRACTION rows changed
#: side since the last cut, or after _MAX_INCREMENTAL updates in a row.
_FULL_CUT_FRACTION = 8
_MAX_INCREMENTAL = 32
#: The solve gives up (``SolverError``, so ``method="auto"`` falls back to Clarabel) when the
#: gap ``upper - lower`` shrank by less than ``tol * upper`` over this many iterations. With
#: thousands of candidate rows on the boundary (scores tied at 0) the best point cannot move
#: and the master stays inexact: on the default region learning from the surveyed cells
#: (1,414 labelled rows, 16,111 candidate rows, 4,077 active) neither bound moved after the
#: 5th iteration and the solve ran its 1,000 iterations (24 s) before Clarabel solved the QP
#: in 1 s.
_STALL_ITERS = 100


@dataclass
class CuttingPlaneState:
    """Cuts of the hinge sum of one ``(X, y)``, reusable whatever ``Z`` and ``C`` are.

    Pass the same object to successive :func:`solve_cutting_plane` calls on the same labelled
    rows; it is updated in place. A state built for other labelled rows is refused when the
    shapes differ; with equal shapes the cuts would be wrong, so keep one state per ``(X, y)``.

    Attributes
    ----------
    offsets : ndarray of shape (T,)
        ``c_t / n``: the cut offsets divided by the number of labelled rows.
    slopes : ndarray of shape (T, d + 1)
        ``g_t / n``: the cut slopes in ``(w, b)``, divided likewise.
    age : ndarray of shape (T,)
        Master solves since each cut last had a multiplier.
    w, b : the last solution (a start for the next solve), or ``None``.
    x_norm_max : float or None
        Largest row norm of ``X`` (for the intercept's bound).
    n_iter : int
        Iterations of the last solve.
    n_iter_total : int
        Iterations over every solve that used this state.
    history : list of tuple
        ``(upper bound, lower bound)`` per iteration of the last solve.
    ref_active, ref_sum : the labelling of the last cut and its sums ``(r @ X, sum r)``
        (``r = y`` on the labelling, 0 elsewhere), from which the next cut is updated.
    n_incremental : int
        Cuts updated from ``ref_sum`` since the last full pass over ``X``.
    """

    offsets: np.ndarray | None = None
    slopes: np.ndarray | None = None
    age: np.ndarray | None = None
    w: np.ndarray | None = None
    b: float | None = None
    x_norm_max: float | None = None
    n_iter: int = 0
    n_iter_total: int = 0
    history: list[tuple[float, float]] = field(default_factory=list)
    ref_active: np.ndarray | None = field(default=None, repr=False)
    ref_sum: np.ndarray | None = field(default=None, repr=False)
    n_incremental: int = 0

    @property
    def n_cuts(self) -> int:
        """Cuts currently held."""
        return 0 if self.offsets is None else int(self.offsets.size)


def _cut(
    X: np.ndarray, y_pm: np.ndarray, active: np.ndarray, c: np.ndarray | None = None
) -> tuple[float, np.ndarray]:
    """Offset and slope (both divided by n) of the cut of labelling ``active``.

    With row weights ``c``, ``y_pm`` is the weighted labels ``c_i y_i`` and the offset sums
    the active rows' weights.
    """
    n = X.shape[0]
    r = np.where(active, y_pm, 0.0)
    slope = np.empty(X.shape[1] + 1)
    slope[:-1] = -(r @ X) / n
    slope[-1] = -float(r.sum()) / n
    return _offset(active, c) / n, slope


def _offset(active: np.ndarray, c: np.ndarray | None) -> float:
    if c is None:
        return float(np.count_nonzero(active))
    return float(c[active].sum())


def _cut_update(
    state: CuttingPlaneState,
    X: np.ndarray,
    y_pm: np.ndarray,
    active: np.ndarray,
    c: np.ndarray | None = None,
) -> tuple[float, np.ndarray]:
    """The cut of labelling ``active``, updated from the state's last labelling.

    Consecutive cuts' labellings differ in few rows once the margins settle, so the sums
    ``r @ X`` are updated over the flipped rows only. A full pass over ``X`` is made when more
    than ``n / _FULL_CUT_FRACTION`` rows flip, and after ``_MAX_INCREMENTAL`` updates in a row
    (so that rounding cannot accumulate).
    """
    n, d = X.shape
    sums = None
    ref = state.ref_active
    if ref is not None and ref.shape == active.shape and state.n_incremental < _MAX_INCREMENTAL:
        flips = np.flatnonzero(active != ref)
        if flips.size * _FULL_CUT_FRACTION <= n:
            dr = np.where(active[flips], y_pm[flips], -y_pm[flips])
            sums = state.ref_sum.copy()
            sums[:d] += dr @ X[flips]
            sums[d] += float(dr.sum())
            state.n_incremental += 1
    if sums is None:
        r = np.where(active, y_pm, 0.0)
        sums = np.empty(d + 1)
        sums[:d] = r @ X
        sums[d] = float(r.sum())
        state.n_incremental = 0
    state.ref_active, state.ref_sum = active.copy(), sums
    return _offset(active, c) / n, -sums / n


def _master(
    offsets: np.ndarray,
    slopes: np.ndarray,
    Zw: np.ndarray,
    C: float,
    n: int,
    d: int,
    b_max: float,
) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, bool]:
    """Solve the master QP; returns ``(v, t, cut multipliers, Z multipliers, accurate)``.

    ``accurate`` is False when Clarabel only reached its reduced tolerances ("AlmostSolved"):
    the point is still usable, its value is not a trustworthy lower bound.
    """
    T = offsets.size + 2
    p = Zw.shape[0]
    # Variables (w, b, t) with t = H / n, so the objective is 0.5 ||w||^2 + C n t.
    P = sp.csc_matrix(
        (np.ones(d), np.arange(d), np.r_[np.arange(d + 1), d, d]), shape=(d + 2, d + 2)
    )
    q = np.zeros(d + 2)
    q[-1] = C * n
    A = np.zeros((T + 1 + p, d + 2))
    # Rows: cuts; |b| <= b_max (twice); t >= 0; candidate rows.
    A[: T - 2, : d + 1] = slopes
    A[: T - 2, -1] = -1.0
    A[T - 2, d] = 1.0
    A[T - 1, d] = -1.0
    A[T, -1] = -1.0
    A[T + 1 :, :d] = Zw
    A[T + 1 :, d] = 1.0
    rhs = np.r_[-offsets, b_max, b_max, 0.0, np.zeros(p)]
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = 1e-9
    settings.tol_gap_rel = 1e-10
    settings.tol_feas = 1e-10
    settings.max_iter = 200
    M = A.shape[0]
    # Dense column-major CSC built directly (scipy's converters cost more than the solve).
    A_csc = sp.csc_matrix(
        (A.ravel(order="F"), np.tile(np.arange(M), d + 2), np.arange(0, M * (d + 2) + 1, M)),
        shape=(M, d + 2),
    )
    solver = clarabel.DefaultSolver(P, q, A_csc, rhs, [clarabel.NonnegativeConeT(M)], settings)
    sol = solver.solve()
    status = str(sol.status)
    if "Solved" not in status:
        raise SolverError(
            f"the cutting-plane master QP (Clarabel) stopped with status {status} with {T} cuts "
            f"and {p} candidate constraints; standardise the features and retry, or pass "
            'method="clarabel" to solve the full QP directly.'
        )
    x = np.asarray(sol.x)
    z = np.asarray(sol.z)
    lam = np.maximum(z[: T - 2], 0.0)
    mu = np.maximum(z[T + 1 :], 0.0)
    return x[: d + 1].copy(), float(x[d + 1]), lam, mu, status == "Solved"


def solve_cutting_plane(
    X: np.ndarray,
    y_pm: np.ndarray,
    C: float,
    Z: np.ndarray | None = None,
    *,
    tol: float = 1e-6,
    max_iter: int = 1000,
    state: CuttingPlaneState | None = None,
    mix: float = 0.01,
    max_age: int = 10,
    keep_age: int = 10,
    cutoff: float | None = None,
) -> tuple[QPResult, CuttingPlaneState]:
    """Solve the fixed-set QP by the optimised cutting-plane method.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Labelled rows.
    y_pm : ndarray of shape (n,)
        Labels in {-1, +1}.
    C : float or ndarray of shape (n,)
        Hinge weight, or per-row weights ``C c_i``.
    Z : ndarray of shape (p, d) or None
        Candidate rows that must not score positive.
    tol : float
        Stop when ``(upper - lower) <= tol * upper`` (upper: objective of the returned point;
        lower: the master's optimum, a lower bound of the QP's).
    max_iter : int
        Iterations at most; :class:`~reserve.errors.SolverError` if the gap is still larger,
        or as soon as it shrank by less than ``tol * upper`` over ``_STALL_ITERS`` (100)
        iterations (a stall: the bounds have stopped moving).
    state : CuttingPlaneState or None
        Cuts of earlier solves on the same ``(X, y_pm)`` and row weights (any ``Z``), updated
        in place; ``None`` starts afresh. A scalar ``C`` may change between solves.
    mix : float
        The next cut is taken at ``(1 - mix) * best + mix * master``. OCAS uses 0.1; on the
        benchmark's data (n = 20,000, d = 38, tol = 1e-6) the unconstrained SVM took 123
        iterations with 0.01, 137 with 0.03, 229 with 0.1, 555 with 0.3 (0 stalls).
    max_age : int
        Master solves a cut may go without a multiplier before it leaves the pool.
    keep_age : int
        Master solves a cut or candidate row may go without a multiplier before it leaves the
        master's working set (it comes back when violated).
    cutoff : float or None
        Stop as soon as the lower bound reaches ``cutoff``: the optimum cannot be below it
        (status ``"Cutoff ..."``; the returned point is feasible, its objective >= cutoff). A
        caller that only wants solutions better than ``cutoff`` saves the remaining iterations.

    Returns
    -------
    result : QPResult
        ``w``, ``b``, the objective recomputed from them, the multipliers ``beta`` of the ``Z``
        rows (from the last master solve; 0 for rows never in the master) and a status.
    state : CuttingPlaneState
        The cuts (the object passed in, or a new one).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[-1.0], [1.0]]); y = np.array([-1.0, 1.0])
    >>> r, st = solve_cutting_plane(X, y, 10.0, tol=1e-9)
    >>> round(float(r.w[0]), 6), round(r.b, 6)
    (1.0, 0.0)
    """
    X, y_pm = np.asarray(X, dtype=np.float64), np.asarray(y_pm, dtype=np.float64)
    n, d = X.shape
    Zm = np.zeros((0, d)) if Z is None else np.asarray(Z, dtype=np.float64).reshape(-1, d)
    wt = _Weights(y_pm, C)  # row weights enter the cuts; the master's C is then 1
    pt = _best_point(state := _init_state(state, X, wt), X, y_pm, Zm, C, wt)
    run = _Master(state, Zm, wt.C_master, n, d, _b_max(state, X, Zm, C), keep_age, wt)
    run.start_work(pt.zs)
    args = (tol, max_iter, mix, max_age, cutoff)
    it, lower, converged, cut_off = _iterate(state, pt, run, X, y_pm, Zm, C, *args)
    if not (converged or cut_off):
        raise SolverError(
            f"the cutting-plane QP solver did not reach the relative gap tol={tol:g} in "
            f"{it} iterations (max_iter={max_iter}; gap "
            f"{(pt.upper - lower) / max(pt.upper, 1e-300):.2e}"
            f"{', stalled' if it < max_iter else ''}); raise max_iter or tol, standardise "
            'the features, or pass method="clarabel".'
        )
    return _result(state, pt, run, X, y_pm, Zm, C, it, lower, cutoff if cut_off else None), state


def _iterate(state, pt, run, X, y_pm, Zm, C, tol, max_iter, mix, max_age, cutoff):
    """The cutting-plane iterations; ``(iterations, lower bound, converged, cut off)``."""
    n, d = X.shape
    lower = -np.inf
    history: list[tuple[float, float]] = []
    converged = cut_off = False
    it = 0
    while it < max_iter:
        it += 1
        v_m, t_m, accurate = run.solve()
        # The relaxed master's optimum: a lower bound even if generation stopped early.
        lower_m = 0.5 * float(v_m[:d] @ v_m[:d]) + run.C * n * max(t_m, 0.0)
        if accurate:
            lower = max(lower, lower_m)  # every master optimum is a lower bound: keep the best
        history.append((pt.upper, lower))
        if pt.upper - lower <= tol * max(pt.upper, 1e-300):
            converged = True
            break
        if cutoff is not None and lower >= cutoff:
            cut_off = True
            break
        if _stalled(history, tol):
            break
        u_m = pt.step_towards(v_m, X, y_pm, Zm, C)
        # Next cut between the best point and the master's point.
        u_c = (1.0 - mix) * pt.u + mix * u_m
        c_new, g_new = _cut_update(state, X, run.wt.yc, u_c > 0, run.wt.c)
        _add_cut(state, c_new, g_new)
        run.cw = _prune(state, max_age, run.cw)
    state.n_iter = it
    state.n_iter_total += it
    state.history = history
    return it, lower, converged, cut_off


def _stalled(history: list[tuple[float, float]], tol: float) -> bool:
    """Whether the gap shrank by less than ``tol * upper`` over the last ``_STALL_ITERS``."""
    if len(history) <= _STALL_ITERS:
        return False
    upper_then, lower_then = history[-1 - _STALL_ITERS]
    upper, lower = history[-1]
    progress = (upper_then - lower_then) - (upper - lower)  # nan or inf while lower is -inf
    return bool(progress < tol * max(upper, 1e-300))


class _Weights:
    """Row weights of the cuts: ``yc = c y`` and ``c`` (``None`` without weights)."""

    def __init__(self, y_pm: np.ndarray, C) -> None:
        self.y_pm = y_pm
        if np.ndim(C) == 0:
            self.yc, self.c, self.C_master = y_pm, None, C
        else:
            self.c = np.asarray(C, dtype=np.float64)
            self.yc, self.C_master = self.c * y_pm, 1.0


def _init_state(state, X, wt: _Weights) -> CuttingPlaneState:
    """``state``, or a new one, with the two class cuts when it has no cuts yet."""
    d = X.shape[1]
    if state is None:
        state = CuttingPlaneState()
    if state.slopes is not None and state.slopes.shape[1] != d + 1:
        raise InvalidInputError(
            f"the cutting-plane state has cuts for {state.slopes.shape[1] - 1} features but X "
            f"has {d}; pass state=None or the state built for these labelled rows."
        )
    if state.slopes is None:
        y_pm = wt.y_pm
        c1, g1 = _cut(X, wt.yc, y_pm > 0, wt.c)
        c2, g2 = _cut(X, wt.yc, y_pm < 0, wt.c)
        state.offsets = np.array([c1, c2])
        state.slopes = np.vstack([g1, g2])
        state.age = np.zeros(2, dtype=np.int64)
    return state


class _BestPoint:
    """The best feasible point ``(w, b)``, its hinge arguments ``u``, scores ``zs``, objective."""

    def __init__(self, w, b, u, zs, upper):
        self.w, self.b, self.u, self.zs, self.upper = w, b, u, zs, upper

    def step_towards(self, v_m, X, y_pm, Zm, C) -> np.ndarray:
        """Exact line search from the point towards the master's; the master's ``u``."""
        d = X.shape[1]
        w, b, u = self.w, self.b, self.u
        w_m, b_m = v_m[:d], float(v_m[d])
        Xw_m = X @ w_m
        u_m = 1.0 - y_pm * (Xw_m + b_m)
        d_w = w_m - w
        a_max = np.inf
        p = Zm.shape[0]
        if p:
            rate_z = Zm @ d_w + (b_m - b)
            up = rate_z > 0
            if np.any(up):
                a_max = float(np.min(-np.minimum(self.zs[up], 0.0) / rate_z[up]))
        du = u_m - u
        w_dot_d, d_sq = float(w @ d_w), float(d_w @ d_w)
        a_hi = _bracket(w_dot_d, d_sq, u, du, C, a_max)
        # Only kinks inside (0, a_hi) are sorted: few once the margins settle.
        a = line_search(w_dot_d, d_sq, u, du, C, a_hi)
        if a > 0.0:
            self.w = w + a * d_w
            self.b = b + a * (b_m - b)
            self.u = u + a * (u_m - u)
            if p:
                self.zs = self.zs + a * rate_z
            self.upper = 0.5 * float(self.w @ self.w) + float(weighted_hinge(C, self.u))
        return u_m


def _best_point(state, X, y_pm, Zm, C, wt: _Weights) -> _BestPoint:
    """The last solution with ``b`` lowered onto the new constraints; adds its cut."""
    d = X.shape[1]
    if state.w is not None and state.w.shape == (d,):
        w = state.w.copy()
        b = float(state.b)
    else:
        w, b = np.zeros(d), 0.0
    Zw_b = Zm @ w
    if Zm.shape[0]:
        b = min(b, -float(Zw_b.max()))
    zs = Zw_b + b  # candidate scores at the best point, all <= 0
    Xw = X @ w
    u = 1.0 - y_pm * (Xw + b)  # hinge arguments at the best point
    upper = 0.5 * float(w @ w) + float(weighted_hinge(C, u))
    c0, g0 = _cut_update(state, X, wt.yc, u > 0, wt.c)
    _add_cut(state, c0, g0)
    return _BestPoint(w, b, u, zs, upper)


def _b_max(state, X, Zm, C) -> float:
    """A bound on ``|b|`` that some optimum satisfies.

    For fixed w the best b lies between the hinge kinks y_i - w . x_i or at the candidates'
    cap -max_j w . z_j, and ||w||^2 <= 2 f(0, 0) = 2 C n. The box keeps the master bounded
    when one class is missing (it never binds otherwise).
    """
    n = X.shape[0]
    if state.x_norm_max is None:
        state.x_norm_max = float(np.sqrt(np.einsum("ij,ij->i", X, X).max(initial=0.0)))
    r_max = state.x_norm_max
    if Zm.shape[0]:
        r_max = max(r_max, float(np.sqrt(np.einsum("ij,ij->i", Zm, Zm).max())))
    C_total = C * n if np.ndim(C) == 0 else float(np.sum(C))
    return 2.0 * (1.0 + r_max * np.sqrt(2.0 * C_total))


class _Master:
    """The master QP over working sets of cuts ``cw`` and candidate rows ``work``."""

    def __init__(self, state, Zm, C, n, d, b_max, keep_age, wt):
        self.state, self.Zm, self.C, self.n, self.d, self.b_max = state, Zm, C, n, d, b_max
        self.wt = wt
        self.keep_age = keep_age
        p = Zm.shape[0]
        # Candidate rows in the master: those closest to the boundary relative to their norm.
        self.znorm = np.sqrt(np.einsum("ij,ij->i", Zm, Zm) + 1.0)
        self.zs0 = None
        self.work = np.zeros(0, np.int64)
        self.beta_keep = np.zeros(0)
        self.z_age = np.zeros(p, dtype=np.int64)
        self.cw = np.arange(state.n_cuts)

    def start_work(self, zs: np.ndarray) -> None:
        p, d = self.Zm.shape[0], self.d
        n0 = min(p, 2 * (d + 1))
        if n0:
            self.work = np.sort(np.argpartition(-zs / self.znorm, n0 - 1)[:n0])
        self.work_keep = self.work

    def solve(self):
        """Master solves, generating cuts and rows until they hold; ``(v, t, accurate)``.

        Generated until the pool's cuts and every candidate row hold at its solution: then
        its point is optimal for the master over all of them, whose optimum is a lower bound
        of the QP's. Then the working sets are aged.
        """
        state, Zm, d = self.state, self.Zm, self.d
        self.cw = np.union1d(self.cw, [state.n_cuts - 1])
        for _ in range(_MAX_ROUNDS):
            v_m, t_m, lam, beta_work, accurate = _master(
                state.offsets[self.cw],
                state.slopes[self.cw],
                Zm[self.work],
                self.C,
                self.n,
                d,
                self.b_max,
            )
            vals = state.slopes @ v_m + state.offsets
            add_c = np.flatnonzero(vals > t_m + 1e-10 * max(abs(t_m), 1e-3))
            add_c = add_c[~np.isin(add_c, self.cw)]
            viol = self._violated(v_m)
            if add_c.size == 0 and viol.size == 0:
                break
            self.cw = np.union1d(self.cw, add_c)
            self.work = np.union1d(self.work, viol)
        self._age(lam, beta_work)
        return v_m, t_m, accurate

    def _violated(self, v_m: np.ndarray) -> np.ndarray:
        Zm, d = self.Zm, self.d
        if not Zm.shape[0]:
            return np.zeros(0, dtype=np.int64)
        s_m = Zm @ v_m[:d] + v_m[d]
        scale = abs(v_m[d]) + float(np.linalg.norm(v_m[:d])) * float(self.znorm.max())
        viol = np.flatnonzero(s_m > 1e-9 * max(scale, 1.0))
        viol = viol[~np.isin(viol, self.work)]
        if viol.size > _ADD_PER_ROUND:
            viol = viol[np.argpartition(-s_m[viol], _ADD_PER_ROUND - 1)[:_ADD_PER_ROUND]]
        return viol

    def _age(self, lam: np.ndarray, beta_work: np.ndarray) -> None:
        """Cuts and candidate rows without a multiplier leave the working sets (they come back
        when violated); pool cuts unused for max_age solves are forgotten by the caller."""
        state, keep_age = self.state, self.keep_age
        used = lam > 1e-7 * max(float(lam.max(initial=0.0)), 1e-300)
        state.age += 1
        state.age[self.cw[used]] = 0
        # Keeping recently used cuts saves re-solves when the active set flickers.
        self.cw = np.union1d(np.flatnonzero(state.age <= keep_age), [0, 1])
        self.beta_keep, self.work_keep = beta_work, self.work
        work = self.work
        if work.size:
            self.z_age[work] += 1
            self.z_age[work[beta_work > 1e-7 * max(float(beta_work.max()), 1e-300)]] = 0
            self.work = work[self.z_age[work] <= keep_age]


def _result(state, pt, run, X, y_pm, Zm, C, it, lower, cutoff) -> QPResult:
    """Exact feasibility and objective from ``(w, b)``, whatever rounding the updates left."""
    w, b, upper = pt.w, pt.b, pt.upper
    p = Zm.shape[0]
    if p:
        top = float((Zm @ w).max()) + b
        if top > 0.0:
            b -= top
    state.w, state.b = w.copy(), float(b)
    beta = np.zeros(p)
    beta[run.work_keep] = run.beta_keep
    gap = (upper - lower) / max(upper, 1e-300)
    return QPResult(
        w=w,
        b=float(b),
        objective=hinge_objective(w, float(b), X, y_pm, C),
        beta=beta,
        status=(
            f"Cutoff (cutting plane: {it} iterations, lower bound {lower:.6g} >= {cutoff:.6g})"
            if cutoff is not None
            else f"Solved (cutting plane: {it} iterations, relative gap {gap:.1e})"
        ),
    )


def _bracket(
    w_dot_d: float, d_sq: float, u: np.ndarray, du: np.ndarray, C: float, a_max: float
) -> float:
    """A step ``a_hi <= a_max`` past the minimiser of the segment objective (or ``a_max``).

    The right derivative ``w.d + a ||d||^2 + C sum_{u_i + a du_i > 0} du_i`` is
    non-decreasing; doubling from 1 until it is non-negative brackets the minimiser, so the
    exact line search need only sort the kinks before ``a_hi``.
    """
    a = min(1.0, a_max)
    for _ in range(60):
        on = (u + a * du) > 0.0
        if np.ndim(C) == 0:
            slope = w_dot_d + a * d_sq + C * float(du[on].sum())
        else:
            slope = w_dot_d + a * d_sq + float((C * du)[on].sum())
        if slope >= 0.0 or a >= a_max:
            return a
        a = min(2.0 * a, a_max)
    return a_max


def _add_cut(state: CuttingPlaneState, offset: float, slope: np.ndarray) -> None:
    state.offsets = np.r_[state.offsets, offset]
    state.slopes = np.vstack([state.slopes, slope])
    state.age = np.r_[state.age, 0]


def _prune(state: CuttingPlaneState, max_age: int, cw: np.ndarray) -> np.ndarray:
    """Forget pool cuts unused for ``max_age`` solves; returns the working set renumbered."""
    keep = state.age <= max_age
    keep[:2] = True  # the two starting cuts bound the master in b
    keep[-1] = True  # the newest cut
    keep[cw] = True
    if keep.all():
        return cw
    new_index = np.cumsum(keep) - 1
    state.offsets = state.offsets[keep]
    state.slopes = state.slopes[keep]
    state.age = state.age[keep]
    return new_index[cw]
