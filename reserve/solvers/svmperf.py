"""Baseline: SVMperf for precision@k (Joachims, 2005), 1-slack cutting-plane training.

With ``Psi(ybar) = sum_i ybar_i x_i`` over the labelled rows and ``Delta(ybar) = 100 (1 - prec@k)``
of a labelling ``ybar`` with exactly ``k`` positives, the structural SVM is::

    min_{w, xi >= 0}  0.5 ||w||^2 + C xi
    s.t.  w . (Psi(y) - Psi(ybar)) >= Delta(ybar) - xi     for every ybar with k positives

It is solved by adding the most violated labelling to a working set and re-solving the small
QP until no labelling is violated by more than ``tol``. The most violated labelling takes the
``a`` best-scoring positives and ``k - a`` best-scoring negatives for the ``a`` maximising
``-100 a / k + 2 (sum of top-a positive scores + sum of top-(k-a) negative scores)``: two sorts
and a scan of prefix sums.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from reserve.errors import InvalidInputError
from reserve.solvers._base import TopKClassifierMixin
from reserve.solvers._conic import solve_qp
from reserve.solvers._validation import check_positive_real
from reserve.solvers.svm import midpoint_intercept

__all__ = ["SVMPerf", "most_violated_labelling", "structural_loss"]

#: Delta is measured in percent, as in SVMperf, so that ``C`` has the same useful range
#: (0.01 .. 100) as for the other estimators; with Delta in [0, 1] the margin constraints are
#: met by a tiny ``w`` at every C of the grid and C has no effect.
_LOSS_SCALE = 100.0


def most_violated_labelling(
    scores: np.ndarray, y_pm: np.ndarray, k: int
) -> tuple[np.ndarray, float, float]:
    """Labelling with exactly ``k`` positives maximising ``Delta + w.Psi(ybar) - w.Psi(y)``.

    Parameters
    ----------
    scores : ndarray of shape (n,)
        ``w . x_i`` of the labelled rows.
    y_pm : ndarray of shape (n,)
        True labels in {-1, +1}.
    k : int
        Positives in a labelling, ``1 <= k <= n``.

    Returns
    -------
    ybar : ndarray of shape (n,) in {-1, +1}
    delta : float
        ``100 * (1 - (true positives among ybar's positives) / k)`` (percent).
    violation : float
        ``delta + w . (Psi(ybar) - Psi(y))``.

    Examples
    --------
    >>> import numpy as np
    >>> ybar, delta, v = most_violated_labelling(np.array([2.0, 0.0, 1.0]),
    ...                                          np.array([1.0, 1.0, -1.0]), 1)
    >>> ybar.tolist(), delta
    ([-1.0, -1.0, 1.0], 100.0)
    """
    pos = np.flatnonzero(y_pm > 0)
    neg = np.flatnonzero(y_pm < 0)
    ps = pos[np.argsort(-scores[pos], kind="stable")]
    ns = neg[np.argsort(-scores[neg], kind="stable")]
    A = np.concatenate([[0.0], np.cumsum(scores[ps])])
    B = np.concatenate([[0.0], np.cumsum(scores[ns])])
    a = np.arange(max(0, k - ns.size), min(k, ps.size) + 1)
    value = -_LOSS_SCALE * a / k + 2.0 * (A[a] + B[k - a])
    best = int(a[np.argmax(value)])
    ybar = -np.ones_like(y_pm)
    ybar[ps[:best]] = 1.0
    ybar[ns[: k - best]] = 1.0
    delta = _LOSS_SCALE * (1.0 - best / k)
    violation = delta + float(scores @ (ybar - y_pm))
    return ybar, delta, violation


def structural_loss(w: np.ndarray, X: np.ndarray, y_pm: np.ndarray, k: int) -> float:
    """``max(0, max_ybar Delta + w.Psi(ybar) - w.Psi(y))``: the exact 1-slack loss of ``w``."""
    return max(0.0, most_violated_labelling(X @ w, y_pm, k)[2])


class SVMPerf(TopKClassifierMixin):
    """SVMperf trained for precision@k on the labelled rows, as a top-k selector.

    The training budget is the same share of the labelled rows as ``k`` is of the
    candidates (at least 1). No intercept is learned (the loss is invariant to it):
    ``intercept_`` sits halfway between the ``k``-th and ``k+1``-th candidate scores.

    Parameters
    ----------
    k : int
        Number of candidates to select.
    C : float
        Weight of the slack.
    tol : float
        Stop when no labelling violates the working set's slack by more than ``tol``.
    max_iter : int
        Cutting-plane iterations at most.
    random_state : int or None, default=0
        Seed of the draw that breaks a tie at the cell budget's cut (candidates whose
        scores tie the last chosen one's, more than the places left;
        :func:`reserve.solvers.ties.rank_selection`); None is 0.

    Attributes
    ----------
    coef_, intercept_, selected_, candidates_, candidate_scores_, classes_, n_features_in_
    candidate_rank_ : ndarray of int64, shape (n_candidates,)
        Each candidate's place in the ranking (0 = best): with a cell budget the chosen,
        the tie's runners-up, then the others by score; with a money budget by score.
    cutoff_ties_ : reserve.solvers.ties.CutoffTies
        The tie at the cell budget's cut and how it was broken (none with a money
        budget).
    objective_ : float
        ``0.5 ||w||^2 + C * structural_loss(w)`` (exact, recomputed by the separation oracle).
    k_train_ : int
        Positives per labelling during training.
    n_iter_ : int
        Cutting-plane iterations.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0], [0.5], [3.0], [-3.0]])
    >>> y = np.array([0, 0, 1, 1, -1, -1, -1])
    >>> SVMPerf(k=1).fit(X, y).selected_.tolist()
    [5]
    """

    def __init__(
        self,
        k: int = 10,
        C: float = 1.0,
        tol: float = 1e-3,
        max_iter: int = 500,
        random_state: int | None = 0,
    ) -> None:
        self.k = k
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def fit(self, X: object, y: object = None) -> SVMPerf:
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
                f"max_iter must be a positive integer; received {self.max_iter!r}."
            )
        Xl, y_pm = data.X_lab, data.y_pm
        n, d = Xl.shape
        k_train = max(1, round(data.k / data.candidates.size * n))
        psi_y = Xl.T @ y_pm
        w = np.zeros(d)
        xi = 0.0
        G: list[np.ndarray] = []
        D: list[float] = []
        it = 0
        for it in range(1, int(self.max_iter) + 1):  # noqa: B007
            ybar, delta, violation = most_violated_labelling(Xl @ w, y_pm, k_train)
            if violation <= xi + tol:
                break
            G.append(psi_y - Xl.T @ ybar)
            D.append(delta)
            w, xi = _working_set_qp(np.array(G), np.array(D), C)
        self.coef_ = w
        self.k_train_ = k_train
        self.n_iter_ = it
        self.objective_ = float(0.5 * w @ w + C * structural_loss(w, Xl, y_pm, k_train))
        self.intercept_ = midpoint_intercept(data.X_cand @ w, data.k)
        self._select(problem)
        return self


def _working_set_qp(G: np.ndarray, D: np.ndarray, C: float) -> tuple[np.ndarray, float]:
    """min 0.5||w||^2 + C xi  s.t.  G w + xi >= D, xi >= 0, solved through its dual.

    The dual ``min 0.5 a'(G G')a - D'a  s.t.  a >= 0, sum a <= C`` has one variable per
    working-set labelling and gives ``w = G' a``; it proved numerically steadier in Clarabel
    than the primal, whose slack coefficient ``C`` and margins ``G w`` differ by orders of
    magnitude at small C.
    """
    p = G.shape[0]
    K = G @ G.T
    A = sp.vstack([-sp.identity(p, format="csr"), sp.csr_matrix(np.ones((1, p)))])
    alpha, _ = solve_qp(
        sp.csc_matrix(np.triu(K)), -D, A, np.r_[np.zeros(p), C], what="SVMperf working-set QP"
    )
    w = G.T @ np.maximum(alpha, 0.0)
    return w, float(max(0.0, (D - G @ w).max()))
