"""Baseline: TopPush (Li, Jin and Zhou, 2014), ranking with the positives pushed above the
highest-scoring negative.

Primal, in the ``C`` form shared by every estimator here (``lambda = 1 / (C m)`` in the
paper's notation, ``m`` positives)::

    min_w  0.5 ||w||^2 + C sum_i l(max_j w.x_j^- - w.x_i^+),   l(z) = [1 + z]_+^2

Writing ``l(z) = max_{a >= 0} a (1 + z) - a^2 / 4`` and the max over negatives as a max over
the simplex, then minimising over ``w``, gives the dual (derived here, not copied)::

    min_{a, q}  g(a, q) = (C / 2) ||X+^T a - X-^T q||^2 - sum a + sum a^2 / 4
    s.t.        a >= 0, q >= 0, sum a = sum q

with ``w = C (X+^T a - X-^T q)`` and zero duality gap: ``P(w*) = -C g(a*, q*)``. The dual is
solved by Nesterov's accelerated projected gradient with a fixed step ``1 / L`` and adaptive
restart; the projection onto the feasible set reduces to one scalar equation.
"""

from __future__ import annotations

import numpy as np

from reserve.errors import InvalidInputError
from reserve.solvers._base import TopKClassifierMixin
from reserve.solvers._validation import check_positive_real
from reserve.solvers.svm import midpoint_intercept

__all__ = ["TopPush", "project_balanced", "toppush_objective"]


def project_balanced(a0: np.ndarray, q0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Euclidean projection of ``(a0, q0)`` onto ``{a >= 0, q >= 0, sum a = sum q}``.

    The optimality conditions give ``a = [a0 - t]_+`` and ``q = [q0 + t]_+`` for the scalar
    ``t`` solving ``f(t) = sum [a0 - t]_+ - sum [q0 + t]_+ = 0``; ``f`` is non-increasing and
    piecewise linear with breakpoints at ``a0`` and ``-q0``. We evaluate ``f`` at every
    breakpoint with sorted prefix sums (vectorised, ``O(N log N)``; the paper's linear-time
    variant replaces the sort by median selection) and interpolate on the crossing piece.

    Examples
    --------
    >>> import numpy as np
    >>> a, q = project_balanced(np.array([2.0]), np.array([0.0]))
    >>> a.tolist(), q.tolist()
    ([1.0], [1.0])
    """
    a_sorted = np.sort(a0)
    c_sorted = np.sort(-q0)  # q_j > 0 exactly when t > -q0_j
    a_suffix = np.concatenate([np.cumsum(a_sorted[::-1])[::-1], [0.0]])
    c_prefix = np.concatenate([[0.0], np.cumsum(c_sorted)])
    m = a_sorted.shape[0]

    def f_and_slope(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ia = np.searchsorted(a_sorted, t, side="right")  # a0 <= t are inactive
        n_a = m - ia
        ic = np.searchsorted(c_sorted, t, side="left")  # -q0 < t are active
        f = (a_suffix[ia] - t * n_a) - (t * ic - c_prefix[ic])
        return f, n_a + ic

    T = np.sort(np.concatenate([a0, -q0]))
    fT, _ = f_and_slope(T)
    if fT[0] <= 0.0:
        # the root lies at or left of every breakpoint: all a active, no q active
        t = float(a0.sum() / m) if fT[0] < 0.0 else float(T[0])
    else:
        i = int(np.flatnonzero(fT > 0.0)[-1])
        if i == T.shape[0] - 1:  # cannot happen for finite input; guard anyway
            t = float(T[-1])
        else:
            mid = np.array([(T[i] + T[i + 1]) / 2.0])
            _, slope = f_and_slope(mid)
            t = float(T[i] + fT[i] / slope[0]) if slope[0] > 0 else float(T[i])
    return np.maximum(a0 - t, 0.0), np.maximum(q0 + t, 0.0)


def toppush_objective(w: np.ndarray, X_pos: np.ndarray, X_neg: np.ndarray, C: float) -> float:
    """Primal TopPush objective ``0.5 ||w||^2 + C sum_i [1 + max_j w.x_j^- - w.x_i^+]_+^2``.

    Examples
    --------
    >>> import numpy as np
    >>> toppush_objective(np.zeros(1), np.ones((2, 1)), np.ones((1, 1)), 1.0)
    2.0
    """
    top_neg = float((X_neg @ w).max())
    z = np.maximum(0.0, 1.0 + top_neg - X_pos @ w)
    return float(0.5 * (w @ w) + C * (z @ z))


class TopPush(TopKClassifierMixin):
    """TopPush ranking (squared hinge on the gap to the top negative) as a top-k selector.

    Trained on the labelled rows only; the candidates are ranked by ``w . z`` and the top
    ``k`` selected. TopPush has no intercept: ``intercept_`` is placed halfway between the
    ``k``-th and ``k+1``-th candidate scores so that ``predict`` marks the selection.

    Parameters
    ----------
    k : int
        Number of candidates to select.
    C : float
        Loss weight (``lambda = 1 / (C m)`` in the paper's notation).
    max_iter : int
        Accelerated-gradient iterations at most. At large ``C`` the dual is badly conditioned
        and the limit is reached before ``tol``; ``duality_gap_`` reports how far off it is.
    tol : float
        Stop when the duality gap is below ``tol * max(1, primal objective)``.
    random_state : int or None, default=0
        Seed of the draw that breaks a tie at the cell budget's cut (candidates whose
        scores tie the last chosen one's, more than the places left;
        :func:`reserve.solvers.ties.rank_selection`); None is 0.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    objective_ : float
        Primal objective of ``coef_`` (recomputed).
    duality_gap_ : float
        Primal minus dual objective at the returned point (>= 0).
    n_iter_ : int
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
    >>> TopPush(k=1).fit(X, y).selected_.tolist()
    [5]
    """

    def __init__(
        self,
        k: int = 10,
        C: float = 1.0,
        max_iter: int = 1000,
        tol: float = 1e-4,
        random_state: int | None = 0,
    ) -> None:
        self.k = k
        self.C = C
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def fit(self, X: object, y: object = None) -> TopPush:
        """Fit on labelled rows, select candidates within the budget; return ``self``.

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
        tol = check_positive_real(self.tol, "tol")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, int | np.integer):
            raise InvalidInputError(
                f"max_iter must be a positive integer; received {self.max_iter!r}. "
                "Pass e.g. max_iter=1000."
            )
        if self.max_iter < 1:
            raise InvalidInputError(
                f"max_iter must be >= 1; received {self.max_iter}. Pass e.g. max_iter=1000."
            )
        Xl = data.X_lab
        Xp, Xn = Xl[data.y_pm > 0], Xl[data.y_pm < 0]
        w, gap, n_iter = _solve_dual(Xp, Xn, C, int(self.max_iter), tol)
        self.coef_ = w
        self.objective_ = toppush_objective(w, Xp, Xn, C)
        self.duality_gap_ = gap
        self.n_iter_ = n_iter
        self.intercept_ = midpoint_intercept(data.X_cand @ w, data.k)
        self._select(problem)
        return self


def _solve_dual(
    Xp: np.ndarray, Xn: np.ndarray, C: float, max_iter: int, tol: float
) -> tuple[np.ndarray, float, int]:
    m, n = Xp.shape[0], Xn.shape[0]
    # Lipschitz constant of grad g: C * sigma_max([Xp; Xn])^2 (Gram form) + 1/2 (the a^2 term)
    G = Xp.T @ Xp + Xn.T @ Xn
    L = C * float(np.linalg.eigvalsh(G)[-1]) + 0.5

    def g_and_grad(
        a: np.ndarray, q: np.ndarray
    ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        v = Xp.T @ a - Xn.T @ q
        g = 0.5 * C * (v @ v) - a.sum() + 0.25 * (a @ a)
        return g, C * (Xp @ v) - 1.0 + 0.5 * a, -C * (Xn @ v), v

    a = np.zeros(m)
    q = np.zeros(n)
    ya, yq = a.copy(), q.copy()
    t = 1.0
    g_prev = np.inf
    gap = np.inf
    it = 0
    for it in range(1, max_iter + 1):
        _, ga, gq, _ = g_and_grad(ya, yq)
        a_new, q_new = project_balanced(ya - ga / L, yq - gq / L)
        g_new, _, _, v = g_and_grad(a_new, q_new)
        if g_new > g_prev:  # adaptive restart (O'Donoghue and Candes): drop momentum
            ya, yq, t = a.copy(), q.copy(), 1.0
            g_prev = np.inf
            continue
        t_new = (1.0 + np.sqrt(1.0 + 4.0 * t * t)) / 2.0
        mom = (t - 1.0) / t_new
        ya, yq = a_new + mom * (a_new - a), q_new + mom * (q_new - q)
        a, q, t, g_prev = a_new, q_new, t_new, g_new
        if it % 10 == 0 or it == max_iter:
            w = C * v
            primal = toppush_objective(w, Xp, Xn, C)
            gap = primal + C * g_new
            if gap <= tol * max(1.0, abs(primal)):
                break
    w = C * (Xp.T @ a - Xn.T @ q)
    g_fin, _, _, _ = g_and_grad(a, q)
    gap = toppush_objective(w, Xp, Xn, C) + C * g_fin
    return w, float(gap), it
