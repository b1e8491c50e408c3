"""Baseline: Accuracy At The Top (Boyd, Cortes, Mohri and Radovanovic, 2012), pivot relaxation.

AATP minimises the regularised hinge loss of the labelled rows with the threshold at the
top-``q`` quantile of the training scores. The quantile is not convex, so the relaxation
assumes the decision boundary passes through one labelled row ``x_s`` (the *pivot*,
``b = -w . x_s``) and asks that at least ``q n`` labelled rows score above it, using the
concave lower bound ``min(1, t) <= 1[t >= 0]`` of the indicator. For each pivot this is the
convex QP::

    min_w  0.5 ||w||^2 + C sum_i [1 - y_i w.(x_i - x_s)]_+
    s.t.   sum_i min(1, w.(x_i - x_s)) >= q n

(written with slacks and solved by Clarabel). The pivot with the lowest objective wins.
Trying every row is ``n`` QPs, so only a window of ``n_pivots`` rows around the target rank
``q n`` of the SVM's training scores is tried; pivots whose QP is infeasible are skipped.
``q`` is the share of candidates to select, ``k / m``.

This follows the paper's description of AATP ("one instance on the decision boundary,
classify at least quantile q training examples as positive, minimise the training hinge
loss"); it is our reading of the method, written from the math.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from reserve.errors import InvalidInputError, SolverError
from reserve.solvers._base import TopKClassifierMixin
from reserve.solvers._conic import solve_qp
from reserve.solvers._qp import hinge_objective, solve_fixed_set
from reserve.solvers._validation import check_positive_real
from reserve.solvers.svm import shifted_intercept

__all__ = ["AATP", "pivot_objective", "solve_pivot"]


def pivot_objective(w: np.ndarray, X: np.ndarray, y_pm: np.ndarray, pivot: int, C: float) -> float:
    """``0.5 ||w||^2 + C sum_i [1 - y_i w.(x_i - x_s)]_+`` for pivot row ``s``."""
    return hinge_objective(w, -float(X[pivot] @ w), X, y_pm, C)


def solve_pivot(
    X: np.ndarray, y_pm: np.ndarray, pivot: int, C: float, q: float
) -> tuple[np.ndarray, float]:
    """Solve the AATP QP for one pivot row; return ``(w, objective)``.

    Variables ``(w, xi, u)``: ``xi_i >= 1 - y_i w.(x_i - x_s)``, ``xi >= 0``, ``u_i <= 1``,
    ``u_i <= w.(x_i - x_s)``, ``sum u >= q n``.

    Raises
    ------
    SolverError
        If the QP is infeasible or the solver fails.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([-1.0, -1.0, 1.0, 1.0])
    >>> w, obj = solve_pivot(X, y, 1, 1.0, 0.25)
    >>> round(float(w[0]), 4), round(obj, 4)
    (1.0, 1.5)
    """
    n, d = X.shape
    D = X - X[pivot]
    nv = d + 2 * n
    P = sp.diags(np.r_[np.ones(d), np.zeros(2 * n)], format="csc")
    c = np.r_[np.zeros(d), np.full(n, C), np.zeros(n)]
    I_n = sp.identity(n, format="csr")
    Z_n = sp.csr_matrix((n, n))
    A = sp.vstack(
        [
            sp.hstack([sp.csr_matrix(-(y_pm[:, None] * D)), -I_n, Z_n]),  # hinge
            sp.hstack([sp.csr_matrix((n, d)), -I_n, Z_n]),  # xi >= 0
            sp.hstack([sp.csr_matrix((n, d + n)), I_n]),  # u <= 1
            sp.hstack([sp.csr_matrix(-D), Z_n, I_n]),  # u <= w.(x_i - x_s)
            sp.csr_matrix(np.r_[np.zeros(d + n), -np.ones(n)][None, :]),  # sum u >= q n
        ],
        format="csr",
    )
    rhs = np.r_[-np.ones(n), np.zeros(n), np.ones(n), np.zeros(n), -q * n]
    x, _ = solve_qp(P, c, A, rhs, what=f"AATP pivot QP (pivot row {pivot})")
    assert x.shape[0] == nv  # internal invariant, not an input check
    w = x[:d]
    return w, pivot_objective(w, X, y_pm, pivot, C)


class AATP(TopKClassifierMixin):
    """Accuracy At The Top (pivot relaxation) as a top-k selector.

    Parameters
    ----------
    k : int
        Number of candidates to select.
    C : float
        Hinge weight.
    n_pivots : int
        Pivot rows tried: the labelled rows ranked nearest to the target rank ``q n`` by the
        SVM's training scores (all rows if ``n_pivots >= n``).
    random_state : int or None, default=0
        Seed of the draw that breaks a tie at the cell budget's cut (candidates whose
        scores tie the last chosen one's, more than the places left;
        :func:`reserve.solvers.ties.rank_selection`); None is 0.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
        Intercept shifted so that at most ``k`` candidates score positive (as in the paper,
        "obtain a top-k prediction by adjusting the intercept").
    raw_intercept_ : float
        ``-w . x_s``: the boundary through the pivot.
    pivot_ : int
        Row index (into ``X``) of the chosen pivot.
    aatp_objective_ : float
        Objective of the chosen pivot QP.
    objective_ : float
        ``0.5 ||w||^2 + C * hinge`` on the labelled rows with the shifted intercept (the
        quantity in the paper's Table 2).
    pivot_objectives_ : dict of int to float
        Objective per tried pivot row (infeasible pivots absent).
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
    >>> AATP(k=1).fit(X, y).selected_.tolist()
    [5]
    """

    def __init__(
        self, k: int = 10, C: float = 1.0, n_pivots: int = 9, random_state: int | None = 0
    ) -> None:
        self.k = k
        self.C = C
        self.n_pivots = n_pivots
        self.random_state = random_state

    def fit(self, X: object, y: object = None) -> AATP:
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
        npv = self.n_pivots
        if isinstance(npv, bool) or not isinstance(npv, int | np.integer) or npv < 1:
            raise InvalidInputError(
                f"n_pivots must be a positive integer; received {npv!r}. Pass e.g. n_pivots=9."
            )
        Xl, y_pm = data.X_lab, data.y_pm
        n = Xl.shape[0]
        q = data.k / data.candidates.size
        svm = solve_fixed_set(Xl, y_pm, C)
        order = np.lexsort((np.arange(n), -(Xl @ svm.w)))  # best first
        target = min(n - 1, max(0, int(np.ceil(q * n)) - 1))
        ranks = np.argsort(np.abs(np.arange(n) - target), kind="stable")[: int(npv)]
        pivots = order[ranks]
        results: dict[int, tuple[np.ndarray, float]] = {}
        for p in pivots:
            try:
                results[int(p)] = solve_pivot(Xl, y_pm, int(p), C, q)
            except SolverError:
                continue  # infeasible pivot: no direction puts q n rows above it
        if not results:
            raise SolverError(
                f"every AATP pivot QP failed ({len(pivots)} pivots tried); increase n_pivots "
                "or standardise the features."
            )
        best = min(results, key=lambda p: (results[p][1], p))
        w, obj = results[best]
        self.coef_ = w
        self.pivot_ = int(data.labelled[best])
        self.pivot_objectives_ = {int(data.labelled[p]): v[1] for p, v in results.items()}
        self.aatp_objective_ = obj
        self.raw_intercept_ = -float(Xl[best] @ w)
        self.intercept_ = shifted_intercept(self.raw_intercept_, data.X_cand @ w, data.k)
        self.objective_ = hinge_objective(w, self.intercept_, Xl, y_pm, C)
        self._select(problem)
        return self
