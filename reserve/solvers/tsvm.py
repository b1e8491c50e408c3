"""Baseline: transductive SVM by the concave-convex procedure (CCCP), as in UniverSVM.

The candidates are the unlabelled rows. With ``f(x) = w.x + b``, hinge ``H_a(t) = [a - t]_+``
and the ramp ``R_s(t) = H_1(t) - H_s(t)`` (``s < 1``), the TSVM objective is::

    J(w, b) = 0.5 ||w||^2 + C sum_i H_1(y_i f(x_i)) + C* sum_u [R_s(f(z_u)) + R_s(-f(z_u))]
    s.t.      mean_u f(z_u) = mean_i y_i                                (balancing constraint)

``J`` is a convex part minus ``C* sum_u [H_s(f_u) + H_s(-f_u)]``. CCCP replaces the concave
part by its tangent at the current point, which adds the linear term
``C* sum_u f_u (1[f_u < s] - 1[f_u > -s])``, and solves the resulting convex QP (Clarabel);
``J`` never increases, and the procedure stops when the tangent (the set of unlabelled rows
on the flat parts of the ramp) repeats or ``J`` stalls. The start is the SVM on the labelled
rows with its intercept moved to satisfy the balancing constraint.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from reserve.errors import InvalidInputError
from reserve.solvers._base import TopKClassifierMixin
from reserve.solvers._conic import solve_qp
from reserve.solvers._qp import solve_fixed_set
from reserve.solvers._validation import check_positive_real
from reserve.solvers.svm import shifted_intercept

__all__ = ["TSVM", "tsvm_objective"]


def tsvm_objective(
    w: np.ndarray,
    b: float,
    X: np.ndarray,
    y_pm: np.ndarray,
    Z: np.ndarray,
    C: float,
    C_unlabelled: float,
    s: float,
) -> float:
    """The non-convex TSVM objective ``J(w, b)`` (symmetric ramp on the unlabelled rows).

    Examples
    --------
    >>> import numpy as np
    >>> tsvm_objective(np.zeros(1), 0.0, np.ones((1, 1)), np.ones(1), np.ones((1, 1)),
    ...                1.0, 1.0, -0.3)
    3.0
    """
    f = Z @ w + b

    def ramp(t: np.ndarray) -> np.ndarray:
        return np.maximum(0.0, 1.0 - t) - np.maximum(0.0, s - t)

    lab = np.maximum(0.0, 1.0 - y_pm * (X @ w + b)).sum()
    return float(0.5 * w @ w + C * lab + C_unlabelled * (ramp(f) + ramp(-f)).sum())


class TSVM(TopKClassifierMixin):
    """Transductive SVM (CCCP, ramp loss, balancing constraint) as a top-k selector.

    Parameters
    ----------
    k : int
        Number of candidates to select.
    C : float
        Hinge weight of the labelled rows.
    C_unlabelled : float or None
        Ramp weight of the candidates; ``None`` uses ``C``.
    s : float
        Ramp parameter, ``-1 < s < 1`` (UniverSVM's default -0.3).
    max_iter : int
        CCCP iterations at most.
    tol : float
        Also stop when a CCCP step lowers ``J`` by less than ``tol * |J|``.
    max_time : float or None
        Seconds after which no further CCCP step is started. Every CCCP iterate is a
        balanced point with lower ``J`` than the last, so stopping early returns a valid,
        less optimised model; ``stop_reason_`` says so.
    random_state : int or None, default=0
        Seed of the draw that breaks a tie at the cell budget's cut (candidates whose
        scores tie the last chosen one's, more than the places left;
        :func:`reserve.solvers.ties.rank_selection`); None is 0.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
        Intercept shifted so that at most ``k`` candidates score positive.
    raw_intercept_ : float
        The TSVM's own intercept.
    objective_ : float
        ``J(coef_, raw_intercept_)``.
    objective_path_ : list of float
        ``J`` at the start and after every CCCP step (non-increasing up to solver tolerance).
    n_iter_ : int
    stop_reason_ : str
        ``"converged"``, ``"stalled"``, ``"max_iter"`` or ``"max_time"``.
    selected_, candidates_, candidate_scores_, classes_, n_features_in_
    candidate_rank_ : ndarray of int64, shape (n_candidates,)
        Each candidate's place in the ranking (0 = best): with a cell budget the chosen,
        the tie's runners-up, then the others by score; with a money budget by score.
    cutoff_ties_ : reserve.solvers.ties.CutoffTies
        The tie at the cell budget's cut and how it was broken (none with a money
        budget).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0], [0.5], [3.0], [-3.0]])
    >>> y = np.array([0, 0, 1, 1, -1, -1, -1])
    >>> TSVM(k=1).fit(X, y).selected_.tolist()
    [5]
    """

    def __init__(
        self,
        k: int = 10,
        C: float = 1.0,
        C_unlabelled: float | None = None,
        s: float = -0.3,
        max_iter: int = 20,
        tol: float = 1e-4,
        max_time: float | None = None,
        random_state: int | None = 0,
    ) -> None:
        self.k = k
        self.C = C
        self.C_unlabelled = C_unlabelled
        self.s = s
        self.max_iter = max_iter
        self.tol = tol
        self.max_time = max_time
        self.random_state = random_state

    def fit(self, X: object, y: object = None) -> TSVM:
        """Fit on labelled rows and candidates (``y == -1``), select within the budget.

        Parameters
        ----------
        X : SelectionProblem or array-like of shape (n_samples, n_features)
            The problem (``y`` None; its budget, cells or money, replaces ``k``), or
            labelled and candidate rows.
        y : array-like of shape (n_samples,) or None
            1 / 0 for labelled rows, -1 for candidates (with array ``X``).

        Returns
        -------
        self
        """
        problem = self._problem(X, y)
        data = problem.transductive()
        C = check_positive_real(self.C, "C")
        Cu = (
            C
            if self.C_unlabelled is None
            else check_positive_real(self.C_unlabelled, "C_unlabelled")
        )
        s = self.s
        if isinstance(s, bool) or not isinstance(s, int | float) or not -1.0 < s < 1.0:
            raise InvalidInputError(
                f"s must be a number strictly between -1 and 1; received {s!r}. Pass e.g. s=-0.3."
            )
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, int | np.integer):
            raise InvalidInputError(
                f"max_iter must be a positive integer; received {self.max_iter!r}."
            )
        tol = check_positive_real(self.tol, "tol")
        max_time = None if self.max_time is None else check_positive_real(self.max_time, "max_time")
        t_start = time.perf_counter()
        Xl, y_pm, Z = data.X_lab, data.y_pm, data.X_cand
        target = float(y_pm.mean())
        start = solve_fixed_set(Xl, y_pm, C)
        w = start.w
        b = target - float((Z @ w).mean())  # balance the start
        path = [tsvm_objective(w, b, Xl, y_pm, Z, C, Cu, s)]
        prev_key: bytes | None = None
        it = 0
        reason = "max_iter"
        for _ in range(int(self.max_iter)):
            if max_time is not None and time.perf_counter() - t_start > max_time:
                reason = "max_time"
                break
            f = Z @ w + b
            lo, hi = f < s, f > -s
            key = np.packbits(np.concatenate([lo, hi])).tobytes()
            if key == prev_key:
                reason = "converged"
                break
            prev_key = key
            w_new, b_new = _cccp_step(Xl, y_pm, Z, C, Cu, Cu * (lo.astype(float) - hi), target)
            it += 1
            j_new = tsvm_objective(w_new, b_new, Xl, y_pm, Z, C, Cu, s)
            if j_new > path[-1] + 1e-7 * max(1.0, abs(path[-1])):
                reason = "stalled"  # solver noise at convergence; keep the better point
                break
            w, b = w_new, b_new
            path.append(j_new)
            if path[-2] - j_new <= tol * max(1.0, abs(j_new)):
                reason = "stalled"
                break
        self.stop_reason_ = reason
        self.coef_ = w
        self.raw_intercept_ = float(b)
        self.objective_ = path[-1]
        self.objective_path_ = path
        self.n_iter_ = it
        self.intercept_ = shifted_intercept(float(b), Z @ w, data.k)
        self._select(problem)
        return self


def _cccp_step(
    X: np.ndarray,
    y_pm: np.ndarray,
    Z: np.ndarray,
    C: float,
    Cu: float,
    lin: np.ndarray,
    target: float,
) -> tuple[np.ndarray, float]:
    """Convex CCCP subproblem in (w, b, xi_lab, xi_unl).

    min 0.5||w||^2 + C sum xi_lab + Cu sum xi_unl + sum_u lin_u (w.z_u + b)
    s.t. hinge constraints of the labelled rows, xi_unl >= |w.z_u + b| - 1, xi >= 0,
         mean_u (w.z_u + b) = target.

    The candidate's two hinges (labels +1 and -1) add up to ``2 + [|f| - 1]_+``, so one slack
    per candidate suffices (the constant 2 is dropped).
    """
    n, d = X.shape
    u = Z.shape[0]
    nv = d + 1 + n + u
    P = sp.diags(np.r_[np.ones(d), np.zeros(nv - d)], format="csc")
    q = np.r_[Z.T @ lin, lin.sum(), np.full(n, C), np.full(u, Cu)]
    I_n = sp.identity(n, format="csr")
    I_u = sp.identity(u, format="csr")
    ones_u = np.ones((u, 1))
    # 1 - y (w.x + b) <= xi   ->   -y x.w - y b - xi <= -1
    rows_lab = sp.hstack(
        [sp.csr_matrix(-(y_pm[:, None] * X)), -y_pm[:, None], -I_n, sp.csr_matrix((n, u))]
    )
    zu_n = sp.csr_matrix((u, n))
    rows_pos = sp.hstack([sp.csr_matrix(Z), ones_u, zu_n, -I_u])  # f - 1 <= xi
    rows_neg = sp.hstack([sp.csr_matrix(-Z), -ones_u, zu_n, -I_u])  # -f - 1 <= xi
    nonneg = sp.hstack([sp.csr_matrix((n + u, d + 1)), -sp.identity(n + u)])
    A_le = sp.vstack([rows_lab, rows_pos, rows_neg, nonneg], format="csr")
    b_le = np.r_[-np.ones(n), np.ones(2 * u), np.zeros(n + u)]
    A_eq = sp.csr_matrix(np.r_[Z.mean(axis=0), 1.0, np.zeros(n + u)][None, :])
    x, _ = solve_qp(P, q, A_le, b_le, A_eq, np.array([target]), what="TSVM CCCP step")
    return x[:d], float(x[d])
