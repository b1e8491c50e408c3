"""The fixed-set QP by a dense primal-dual interior point in the space of ``(w, b)``.

The QP of :mod:`reserve.solvers._qp` has ``d + 1`` free variables ``u = (w, b)`` and one
inequality per row: a hinge row ``a_i . u + xi_i >= 1`` (``a_i = y_i (x_i, 1)``, slack
``xi_i >= 0`` at cost ``c_i``) or a candidate row ``-(z_j, 1) . u >= 0``. Eliminating the
row variables from the Newton system of Mehrotra's predictor-corrector leaves the
``(d + 1) x (d + 1)`` normal equations

    (H + sum_rows g_r g_r' / D_r) du = rhs,      H = diag(1, ..., 1, 0),

formed with one matrix product and solved by Cholesky. An iteration costs ``O(rows d^2)``
arithmetic in BLAS, independent of how the rows' variables are coupled, where a sparse
factorisation of the whole KKT system (Clarabel) pays for the dense ``rows x d`` block's
fill-in: on 2,700 rows of 228 spline columns this solves the SVM in about a twentieth of
Clarabel's CPU, to the same tolerances (benchmarks/results/start.md; docs/algorithm.md, "Speed").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, qr, solve_triangular

from reserve.errors import SolverError
from reserve.solvers._hinge import QPResult, hinge_objective

__all__ = ["solve_dense"]

#: Fraction of the step to the boundary of the positive orthant taken each iteration.
_STEP = 0.99

#: Iterations without a better iterate after which the iteration is stalled.
_STALL = 5

#: Error (:func:`_error`) below which a stalled iteration's best iterate is still taken
#: (status "AlmostSolved", like Clarabel's reduced tolerances).
_REDUCED_TOL = 1e-6


@dataclass
class _Point:
    """An iterate: ``u = (w, b)``; hinge rows' slack ``s``, loss ``xi`` and their
    multipliers ``a``, ``eta``; candidate rows' slack ``t`` and multiplier ``beta``."""

    u: np.ndarray
    s: np.ndarray
    xi: np.ndarray
    a: np.ndarray
    eta: np.ndarray
    t: np.ndarray
    beta: np.ndarray

    def moved(self, step: float, d: _Point) -> _Point:
        """The point ``self + step d``."""
        return _Point(*(x + step * dx for x, dx in zip(self.parts(), d.parts(), strict=True)))

    def parts(self) -> tuple[np.ndarray, ...]:
        """``u`` and the row variables, in the order of the fields."""
        return (self.u, self.s, self.xi, self.a, self.eta, self.t, self.beta)

    def gap(self) -> float:
        """The duality gap: the sum of the complementary products."""
        return float(self.s @ self.a + self.xi @ self.eta + self.t @ self.beta)


def _max_step(x: np.ndarray, dx: np.ndarray) -> float:
    """Largest step in (0, 1] keeping ``x + step dx >= 0``."""
    neg = dx < 0
    return float(min(1.0, np.min(-x[neg] / dx[neg]))) if neg.any() else 1.0


def _step_to_boundary(p: _Point, d: _Point) -> float:
    """Largest step in (0, 1] keeping every row variable of ``p + step d`` nonnegative."""
    return min(_max_step(x, dx) for x, dx in zip(p.parts()[1:], d.parts()[1:], strict=True))


class _Newton:
    """The reduced Newton system at one iterate, factorised once for both of its solves."""

    def __init__(self, A: np.ndarray, B: np.ndarray, c: np.ndarray, p: _Point) -> None:
        self.A, self.B, self.p = A, B, p
        d1 = A.shape[1]
        u = p.u
        reg = np.ones(d1)
        reg[-1] = 0.0  # the intercept is not regularised
        self.r_d = reg * u - A.T @ p.a - B.T @ p.beta
        self.Au = A @ u
        self.r_a = self.Au + p.xi - p.s - 1.0
        self.r_b = B @ u - p.t
        self.r_c = c - p.a - p.eta
        self.xi_eta = p.xi / p.eta
        self.Da = 1.0 / (self.xi_eta + p.s / p.a)
        self.Db = p.beta / p.t
        M = (A.T * self.Da) @ A + (B.T * self.Db) @ B
        M[np.diag_indices(d1)] += reg
        try:
            factor = cho_factor(M)
            self.solve = lambda r: cho_solve(factor, r)
        except LinAlgError:
            # rounding made M indefinite (rows on the margin: D_r -> 0, M's entries grow
            # without bound): factorise it as R'R from the QR of its square root, which
            # never squares the conditioning (2-3 times the cost)
            root = np.vstack(
                [
                    np.sqrt(self.Da)[:, None] * A,
                    np.sqrt(self.Db)[:, None] * B,
                    np.diag(np.sqrt(reg)),
                ]
            )
            R = qr(root, mode="r", overwrite_a=True)[0][:d1]
            self.solve = lambda r: solve_triangular(R, solve_triangular(R, r, trans="T"))

    def direction(self, r1: np.ndarray, r2: np.ndarray, r3: np.ndarray) -> _Point:
        """The Newton step whose complementarity equations have right-hand sides ``r1`` (for
        ``s a``), ``r2`` (``xi eta``) and ``r3`` (``t beta``): each a target minus the product."""
        p = self.p
        t2 = (r2 - p.xi * self.r_c) / p.eta
        g_a = -self.r_a - t2 + r1 / p.a
        g_b = -self.r_b + r3 / p.beta
        rhs = -self.r_d + self.A.T @ (self.Da * g_a) + self.B.T @ (self.Db * g_b)
        du = self.solve(rhs)
        da = self.Da * (g_a - self.A @ du)
        dbeta = self.Db * (g_b - self.B @ du)
        ds = (r1 - p.s * da) / p.a
        dxi = t2 + self.xi_eta * da
        deta = self.r_c - da
        dt = (r3 - p.t * dbeta) / p.beta
        return _Point(du, ds, dxi, da, deta, dt, dbeta)


def _error(nt: _Newton, p: _Point, c: np.ndarray, abs_A: np.ndarray, abs_B: np.ndarray) -> float:
    """The largest of the primal residual, the dual residual and the duality gap, each
    relative to the size of the terms it sums (as Clarabel and OSQP measure them);
    ``abs_A``, ``abs_B`` are ``|A|`` and ``|B|``, formed once per solve."""
    w = p.u[:-1]
    primal = 0.5 * float(w @ w) + float(c @ p.xi)
    scale_p = 1.0 + max(float(np.abs(nt.Au).max(initial=0.0)), 1.0)
    res_p = max(np.abs(nt.r_a).max(initial=0.0), np.abs(nt.r_b).max(initial=0.0))
    res_d = max(np.abs(nt.r_d).max(initial=0.0), np.abs(nt.r_c).max(initial=0.0))
    sums = abs_A.T @ p.a + abs_B.T @ p.beta  # the terms of A'a + B'beta
    scale_d = 1.0 + max(
        float(np.abs(w).max(initial=0.0)), float(c.max(initial=0.0)), float(sums.max(initial=0.0))
    )
    return max(res_p / scale_p, res_d / scale_d, p.gap() / (1.0 + abs(primal)))


def _iterate(
    A: np.ndarray, B: np.ndarray, c: np.ndarray, tol: float, max_iter: int
) -> tuple[_Point, float]:
    """Mehrotra's predictor-corrector from a fixed interior start; the best iterate and its
    error (:func:`_error`).

    It stops at an error within ``tol``, after ``max_iter`` iterations, when the Newton
    system cannot be factorised, or when, within ``_REDUCED_TOL``, no iterate has improved
    on the best for :data:`_STALL` iterations: on a degenerate problem (many rows exactly on
    the margin, as when there are hardly more rows than columns) the system's conditioning
    caps the dual residual near 1e-8 while the gap closes.
    """
    n, m = A.shape[0], B.shape[0]
    p = _Point(
        np.zeros(A.shape[1]), np.ones(n), np.ones(n), 0.5 * c, 0.5 * c, np.ones(m), np.ones(m)
    )
    best, best_err, since = p, np.inf, 0
    accept = max(tol, _REDUCED_TOL)
    abs_A, abs_B = np.abs(A), np.abs(B)
    for it in range(max_iter + 1):  # the last pass only measures the last step's point
        try:
            nt = _Newton(A, B, c, p)
        except (LinAlgError, ValueError):  # not factorisable, or not finite
            break
        err = _error(nt, p, c, abs_A, abs_B)
        best, best_err, since = (p, err, 0) if err < best_err else (best, best_err, since + 1)
        if err <= tol or (since >= _STALL and best_err <= accept) or it == max_iter:
            break
        try:
            p = _step(nt, p)
        except (LinAlgError, ValueError):
            break
    return best, best_err


def _step(nt: _Newton, p: _Point) -> _Point:
    """One predictor-corrector step from ``p``."""
    n_pairs = p.s.size + p.xi.size + p.t.size
    mu = p.gap() / n_pairs
    aff = nt.direction(-p.s * p.a, -p.xi * p.eta, -p.t * p.beta)
    trial = p.moved(_step_to_boundary(p, aff), aff)
    sigma = (trial.gap() / n_pairs / mu) ** 3
    d = nt.direction(
        sigma * mu - p.s * p.a - aff.s * aff.a,
        sigma * mu - p.xi * p.eta - aff.xi * aff.eta,
        sigma * mu - p.t * p.beta - aff.t * aff.beta,
    )
    return p.moved(_STEP * _step_to_boundary(p, d), d)


def solve_dense(
    X: np.ndarray,
    y_pm: np.ndarray,
    C,
    Z: np.ndarray | None = None,
    *,
    tol: float = 1e-9,
    max_iter: int = 100,
) -> QPResult:
    """The fixed-set QP of :func:`reserve.solvers._qp.solve_fixed_set` by the dense
    interior point.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Labelled rows.
    y_pm : ndarray of shape (n,)
        Labels in {-1, +1}.
    C : float or ndarray of shape (n,)
        Hinge weight of every row, or per row.
    Z : ndarray of shape (p, d) or None
        Candidate rows that must not score positive.
    tol : float
        Relative tolerance of the residuals and the duality gap.
    max_iter : int
        Iterations before giving up.

    Returns
    -------
    QPResult
        ``beta`` holds the candidate constraints' multipliers.

    Raises
    ------
    SolverError
        When no iterate comes within ``_REDUCED_TOL`` (1e-6) of optimal (the caller falls
        back to Clarabel). Between that and ``tol`` the status is ``"AlmostSolved ..."``.

    Examples
    --------
    >>> import numpy as np
    >>> r = solve_dense(np.array([[-1.0], [1.0]]), np.array([-1.0, 1.0]), 10.0)
    >>> round(float(r.w[0]), 6), abs(round(r.b, 6))
    (1.0, 0.0)
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    c = np.broadcast_to(np.asarray(C, dtype=np.float64), (n,)).copy()
    keep = c > 0  # a row of weight 0 does not enter the QP
    A = np.hstack([y_pm[keep, None] * X[keep], y_pm[keep, None]])
    c = c[keep]
    Zc = np.empty((0, d)) if Z is None else np.asarray(Z, dtype=np.float64)
    B = -np.hstack([Zc, np.ones((Zc.shape[0], 1))])
    try:
        with np.errstate(divide="raise", invalid="raise", over="raise"):
            p, err = _iterate(A, B, c, tol, max_iter)
    except FloatingPointError as exc:
        raise SolverError(f"the dense interior point failed: {exc}") from exc
    if not err <= max(tol, _REDUCED_TOL):
        raise SolverError(
            f"the dense interior point stopped at a relative error of {err:.1e} "
            f"(within {max_iter} iterations)"
        )
    w, b = p.u[:d].copy(), float(p.u[d])
    status = "Solved" if err <= tol else "AlmostSolved"
    return QPResult(
        w=w,
        b=b,
        objective=hinge_objective(w, b, X, y_pm, C),
        beta=p.beta.copy(),
        status=f"{status} (dense interior point)",
    )
