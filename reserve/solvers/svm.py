"""Baseline: true-hinge linear SVM, ranked and thresholded to exactly ``k`` candidates.

The SVM is fitted to the labelled rows only (candidates play no part in training). Its
scores rank the candidates; the top ``k`` are selected. As in the paper's Table 2, the
intercept is then *shifted* just enough that at most ``k`` candidates score positive, which
makes the SVM a feasible point of TTK's problem and its objective comparable.
"""

from __future__ import annotations

import numpy as np

from reserve.solvers._base import TopKClassifierMixin, budget_cut
from reserve.solvers._qp import hinge_objective, solve_fixed_set
from reserve.solvers._validation import check_positive_real

__all__ = ["SVM", "kth_largest", "shifted_intercept", "shifted_intercept_budget"]


def kth_largest(scores: np.ndarray, k: int) -> float:
    """The ``k``-th largest value of ``scores`` (1-based); ``-inf`` when ``k > len(scores)``.

    Examples
    --------
    >>> import numpy as np
    >>> kth_largest(np.array([3.0, 1.0, 2.0]), 2)
    2.0
    """
    if k > scores.shape[0]:
        return -np.inf
    return float(-np.partition(-scores, k - 1)[k - 1])


def shifted_intercept(raw_intercept: float, candidate_margins: np.ndarray, k: int) -> float:
    """Largest intercept ``<= raw_intercept`` under which at most ``k`` candidates score > 0.

    ``candidate_margins`` are ``w . z_j`` (without intercept). The hinge objective is convex in
    the intercept, so moving it the least distance from the unconstrained optimum gives the
    best objective among intercepts that satisfy the budget (ties at the ``k+1``-th score may
    leave fewer than ``k`` strictly positive).

    Examples
    --------
    >>> import numpy as np
    >>> shifted_intercept(0.0, np.array([3.0, 2.0, 1.0]), 1)
    -2.0
    """
    return float(min(raw_intercept, -kth_largest(candidate_margins, k + 1)))


def shifted_intercept_budget(
    raw_intercept: float, candidate_margins: np.ndarray, cost: np.ndarray, budget: float
) -> float:
    """Largest intercept ``<= raw_intercept`` under which the positive candidates fit ``budget``.

    The money-budget form of :func:`shifted_intercept`. Positive candidates are always a prefix
    of the decreasing-score order, so they fit exactly when the first candidate of that order
    whose cumulative cost breaks the budget (:func:`reserve.solvers._base.budget_cut`) scores
    ``<= 0``: the intercept is ``min(raw_intercept, -margin of that candidate)``. With unit
    costs and ``budget = k`` it equals ``shifted_intercept(raw_intercept, margins, k)``.

    Examples
    --------
    >>> import numpy as np
    >>> m = np.array([3.0, 2.0, 1.0])
    >>> shifted_intercept_budget(0.0, m, np.array([1.0, 4.0, 1.0]), 3.0)  # 2.0 does not fit
    -2.0
    >>> shifted_intercept_budget(0.0, m, np.ones(3), 1) == shifted_intercept(0.0, m, 1)
    True
    """
    return float(min(raw_intercept, -budget_cut(candidate_margins, cost, budget)))


def midpoint_intercept(candidate_margins: np.ndarray, k: int) -> float:
    """Intercept halfway between the ``k``-th and ``k+1``-th candidate margins.

    For ranking methods without an intercept of their own (SVMPerf, TopPush): ``predict``
    then marks exactly the ``k`` selected candidates when their scores are distinct.
    """
    a = kth_largest(candidate_margins, k)
    b = kth_largest(candidate_margins, k + 1)
    if not np.isfinite(b):
        return float(-a + 1.0)
    return float(-(a + b) / 2.0)


class SVM(TopKClassifierMixin):
    """Soft-margin linear SVM (true hinge loss, unregularised intercept) as a top-k selector.

    Minimises ``0.5 ||w||^2 + C sum_i [1 - y_i (w . x_i + b)]_+`` over the labelled rows, ranks
    the candidates by ``w . z``, selects the top ``k`` and shifts the intercept so that at most
    ``k`` candidates score positive. Fitted on a
    :class:`~reserve.solvers.problem.SelectionProblem` with a money budget it selects what
    fits the budget (best first, each candidate taken while it fits); the intercept is then
    shifted at the problem's ``k``, the cells the budget buys at the median cost.

    Parameters
    ----------
    k : int
        Number of candidates to select.
    C : float
        Hinge-loss weight.
    random_state : int or None, default=0
        Seed of the draw that breaks a tie at the cell budget's cut (candidates whose
        scores tie the last chosen one's, more than the places left;
        :func:`reserve.solvers.ties.rank_selection`); None is 0.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
        Shifted intercept (at most ``k`` candidates score > 0).
    raw_intercept_ : float
        The SVM's own intercept before the shift.
    objective_ : float
        ``0.5 ||w||^2 + C * hinge`` on the labelled rows with the shifted intercept.
    selected_ : ndarray of int64, shape (k,) or (n_selected,)
        Row indices of the selected candidates, best first (a money budget: what fits).
    candidates_, candidate_scores_, classes_, n_features_in_
        As for every top-k estimator.
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
    >>> SVM(k=1, C=1.0).fit(X, y).selected_.tolist()
    [5]
    """

    def __init__(self, k: int = 10, C: float = 1.0, random_state: int | None = 0) -> None:
        self.k = k
        self.C = C
        self.random_state = random_state

    def fit(self, X: object, y: object = None) -> SVM:
        """Fit on labelled rows, select within the budget among candidates; return ``self``.

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
        res = solve_fixed_set(data.X_lab, data.y_pm, C)
        self.coef_ = res.w
        self.raw_intercept_ = res.b
        self.intercept_ = shifted_intercept(res.b, data.X_cand @ res.w, data.k)
        self.objective_ = hinge_objective(res.w, self.intercept_, data.X_lab, data.y_pm, C)
        self._select(problem)
        return self
