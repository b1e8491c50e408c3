"""What every transductive top-k estimator shares: the top-k and budget rules, the fitted API."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from reserve.errors import InvalidInputError

__all__ = [
    "BUDGET_RTOL",
    "TopKClassifierMixin",
    "budget_cut",
    "budget_limit",
    "budget_select",
    "canonical_order",
    "feasible_intercepts",
    "greedy_fit",
    "top_k",
]

#: A set of candidates fits a money budget ``B`` when its total cost is at most
#: ``B * (1 + BUDGET_RTOL)``: costs read from files (hectares, dollars) rarely add up to a
#: budget exactly in floating point, and a set that misses by rounding should still fit. With
#: unit costs and an integer budget ``k`` the tolerance changes nothing (k + 1 > k (1 + 1e-12)).
BUDGET_RTOL = 1e-12


def canonical_order(X: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """A row order that depends only on the rows' values, not on their input order.

    Solving in this order makes a fit a function of the multiset of rows, so permuting the
    input permutes the answer and nothing else (floating-point sums and every tie-break see
    the same sequence). Rows are sorted by two fixed random projections (O(n log n), unlike a
    lexicographic sort over every column); identical rows keep their input order, which cannot
    matter because they are interchangeable. With ``rows``, returns those row indices reordered.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[3.0], [1.0], [2.0]])
    >>> X[canonical_order(X)].ravel().tolist()
    [1.0, 2.0, 3.0]
    """
    rng = np.random.default_rng(20150607)
    r = rng.standard_normal((X.shape[1], 2))
    r[:, 0] = np.abs(r[:, 0])  # keep the 1-D case increasing, which reads naturally
    keys = X @ r
    if rows is None:
        return np.lexsort((keys[:, 1], keys[:, 0]))
    sub = keys[rows]
    return rows[np.lexsort((sub[:, 1], sub[:, 0]))]


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest scores, best first, ties broken by lower position.

    The tie-break makes the selection deterministic and independent of the sort algorithm.

    Parameters
    ----------
    scores : ndarray of shape (m,)
    k : int
        ``0 < k <= m``.

    Returns
    -------
    ndarray of int64, shape (k,)

    Examples
    --------
    >>> import numpy as np
    >>> top_k(np.array([0.5, 2.0, 0.5, -1.0]), 2).tolist()
    [1, 0]
    """
    m = scores.shape[0]
    if k >= m:
        return np.lexsort((np.arange(m), -scores))[:k]
    # Partition first (O(m)), then order only the rows that can be in the top k.
    kth = np.partition(-scores, k - 1)[k - 1]
    pool = np.flatnonzero(-scores <= kth)
    order = np.lexsort((pool, -scores[pool]))
    return pool[order[:k]].astype(np.int64)


def budget_limit(budget: float) -> float:
    """The largest total cost that fits ``budget``: ``budget * (1 + BUDGET_RTOL)``.

    Examples
    --------
    >>> budget_limit(3.0) > 3.0
    True
    """
    return float(budget) * (1.0 + BUDGET_RTOL)


def greedy_fit(c: np.ndarray, total: float, limit: float) -> tuple[np.ndarray, float]:
    """Greedy fill of ``c`` (costs in walking order): which entries are taken, and the new total.

    Sequentially, entry ``i`` is taken when ``total + c[i] <= limit``. Done as runs: the longest
    prefix that fits is taken at once (a cumulative sum seeded with ``total``, so the sums are
    exactly those of the sequential walk), the next entry is skipped, and the entries that can
    no longer fit are dropped before the next run.

    Parameters
    ----------
    c : ndarray of shape (n,)
        Positive costs, in the order to walk them.
    total : float
        Cost already spent.
    limit : float
        Largest total that fits (:func:`budget_limit` of the budget, or what is left of it).

    Returns
    -------
    taken : ndarray of bool, shape (n,)
    total : float
        ``total`` plus the cost of the entries taken.

    Examples
    --------
    >>> import numpy as np
    >>> taken, total = greedy_fit(np.array([2.0, 3.0, 1.0, 1.0]), 0.0, 4.0)
    >>> taken.tolist(), total
    ([True, False, True, True], 4.0)
    """
    taken = np.zeros(c.shape[0], dtype=bool)
    idx = np.arange(c.shape[0])
    # A hair of slack in the pre-filter only: the cumulative sum decides, so it never admits
    # an entry the sequential rule would refuse, and it cannot drop one the rule would take.
    pad = 4.0 * float(np.spacing(limit))
    while idx.size:
        cs = np.cumsum(np.r_[total, c[idx]])[1:]
        n_fit = int(np.searchsorted(cs, limit, side="right"))  # cs increases: costs are > 0
        taken[idx[:n_fit]] = True
        if n_fit:
            total = float(cs[n_fit - 1])
        rest = idx[n_fit + 1 :]
        idx = rest[c[rest] <= limit - total + pad]
    return taken, total


def budget_select(scores: np.ndarray, cost: np.ndarray, budget: float) -> np.ndarray:
    """Greedy selection under a money budget: best score first, skip what no longer fits.

    Candidates are walked in decreasing score (ties to the lower position); each one is taken
    when its cost fits in what is left of the budget and skipped otherwise (a later, cheaper
    one may still fit). "Fits" allows a relative ``BUDGET_RTOL`` (1e-12) of rounding: the
    selection's total cost is at most ``budget * (1 + 1e-12)``. With ``cost = ones`` and
    ``budget = k`` this is exactly ``top_k(scores, k)``.

    Parameters
    ----------
    scores : ndarray of shape (m,)
    cost : ndarray of shape (m,)
        Positive, finite costs (not checked here: validate user input with
        :func:`reserve.solvers._validation.check_cost_budget`).
    budget : float
        Positive.

    Returns
    -------
    ndarray of int64
        Positions of the chosen candidates, best first (variable length).

    Examples
    --------
    >>> import numpy as np
    >>> scores = np.array([0.9, 0.8, 0.7, 0.1])
    >>> cost = np.array([2.0, 5.0, 1.0, 1.0])
    >>> budget_select(scores, cost, 4.0).tolist()  # 1 does not fit after 0; 2 and 3 do
    [0, 2, 3]
    >>> budget_select(scores, np.ones(4), 2).tolist() == top_k(scores, 2).tolist()
    True
    """
    scores = np.asarray(scores, dtype=np.float64)
    cost = np.asarray(cost, dtype=np.float64)
    if cost.shape != scores.shape:
        raise InvalidInputError(
            f"cost must have one entry per score ({scores.shape[0]}); received shape "
            f"{cost.shape}. Pass the candidates' costs in the order of their scores."
        )
    limit = budget_limit(budget)
    m = scores.shape[0]
    chosen: list[np.ndarray] = []
    total = 0.0
    # Walk the score order in blocks (partition, then sort one block) rather than sorting all
    # m: with unit costs the first block of 2k holds the whole selection, as cheap as top_k.
    rest = np.arange(m)
    while rest.size:
        rest = rest[cost[rest] <= limit - total + 4.0 * float(np.spacing(limit))]
        if rest.size == 0:
            break
        size = min(rest.size, max(2 * int(min(limit / cost[rest].mean(), m)), 64))
        if size < rest.size:
            pos = top_k(scores[rest], size)  # rest increases, so ties still go to the lower
            block = rest[pos]
            keep = np.ones(rest.size, dtype=bool)
            keep[pos] = False
            rest = rest[keep]
        else:
            block = rest[np.lexsort((rest, -scores[rest]))]
            rest = rest[:0]
        taken, total = greedy_fit(cost[block], total, limit)
        chosen.append(block[taken])
    if not chosen:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate(chosen).astype(np.int64)


def budget_cut(scores: np.ndarray, cost: np.ndarray, budget: float) -> float:
    """Score of the first candidate that breaks the budget when taken as a prefix.

    Walking candidates in decreasing score (ties to the lower position) and summing their
    costs, this is the score of the first one at which the sum no longer fits (``-inf`` when
    everything fits). Scores ``> 0`` are always a prefix of that order, so the positives fit
    the budget exactly when this score is ``<= 0``; lowering the intercept by it (when
    positive) is the least shift that makes them fit. With unit costs and ``budget = k`` it
    is the (k+1)-th largest score.

    Examples
    --------
    >>> import numpy as np
    >>> budget_cut(np.array([3.0, 1.0, 2.0]), np.ones(3), 1)
    2.0
    >>> budget_cut(np.array([3.0, 1.0, 2.0]), np.array([1.0, 1.0, 5.0]), 3.0)
    2.0
    """
    m = scores.shape[0]
    limit = budget_limit(budget)
    cmin = float(cost.min()) if m else 1.0
    # A prefix that fits holds at most limit / cmin candidates, so the first one that breaks
    # the budget is among the best floor(limit / cmin) + 1.
    size = m if limit / cmin >= m else int(limit / cmin) + 1
    order = top_k(scores, size) if size < m else np.lexsort((np.arange(m), -scores))
    cs = np.cumsum(cost[order])
    first = int(np.searchsorted(cs, limit, side="right"))
    if first >= order.size:
        return -np.inf
    return float(scores[order[first]])


def feasible_intercepts(
    margins: np.ndarray, b: np.ndarray, k: int, rank: np.ndarray | None = None
) -> np.ndarray:
    """Lower the intercepts just enough that only ``k`` chosen cells can score positive.

    The chosen cells are the top ``k`` of ``rank`` (default: the max-score
    ``max_s margins_js + b_s``; ties to the lower row). Each ``b_s`` becomes
    ``min(b_s, -max_{j not chosen} margins_js)``, so every other cell scores ``<= 0`` for every
    species (exactly: ``a - max <= 0`` in floating point when scores are formed as
    ``margins + b``). For a point that is already feasible this changes nothing: the chosen
    cells then include every positive one. With one species it is TTK's shifted intercept,
    ``min(b, -s_(k+1))``.

    Parameters
    ----------
    margins : ndarray of shape (m, S)
        ``w_s . z_j`` without the intercepts.
    b : ndarray of shape (S,)
    k : int
    rank : ndarray of shape (m,) or None
        Scores that choose the ``k`` cells.

    Returns
    -------
    ndarray of shape (S,)

    Examples
    --------
    >>> import numpy as np
    >>> feasible_intercepts(np.array([[3.0, 0.0], [2.0, 1.0], [1.0, 2.0]]), np.zeros(2), 1)
    array([-2., -2.])
    """
    m = margins.shape[0]
    if m <= k:
        return b.copy()
    if rank is None:
        rank = (margins + b).max(axis=1)
    out = np.ones(m, dtype=bool)
    out[top_k(rank, k)] = False
    return np.minimum(b, -margins[out].max(axis=0))


class TopKClassifierMixin(ClassifierMixin, BaseEstimator):
    """Shared fitted API: linear scores, the budget's selection, 0/1 predictions.

    A subclass's ``fit`` reads its data with ``_problem`` (a
    :class:`~reserve.solvers.problem.SelectionProblem`, given or built from the arrays), sets
    ``coef_`` and ``intercept_``, and calls ``_select``, the one place scores become the
    budget's selection (cells or money, a cell budget's tie at the cut broken by the one
    rule of :mod:`reserve.solvers.ties`).
    """

    def __sklearn_tags__(self):  # sklearn protocol: declare binary-only
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # binary, -1 is reserved for candidates
        return tags

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Linear score ``X @ coef_ + intercept_`` of each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "coef_")
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[1] != self.coef_.shape[0]:
            raise InvalidInputError(
                f"X must have shape (n, {self.coef_.shape[0]}) like the data seen in fit; "
                f"received shape {Xa.shape}. Pass the same feature columns."
            )
        return Xa @ self.coef_ + self.intercept_

    def predict(self, X: np.ndarray) -> np.ndarray:
        """1 where the score is positive, else 0.

        On the training data of a TTK fit this marks at most ``k`` candidates (with a money
        budget, candidates whose costs fit it); use ``selected_`` for exactly ``k`` (or the
        full greedy selection under the budget).
        """
        return (self.decision_function(X) > 0).astype(np.int64)

    def _problem(self, X: object, y: object, **arrays: object) -> Any:
        """The :class:`~reserve.solvers.problem.SelectionProblem` a ``fit`` receives.

        ``X`` is the problem itself (``y`` then None), or the arrays of scikit-learn's
        ``fit(X, y, **arrays)``, checked and built into one by
        :meth:`~reserve.solvers.problem.SelectionProblem.from_arrays` with this estimator's
        ``k`` (and ``budget``, for estimators that have one).
        """
        # Imported here: the problem module imports the budget, which imports this module.
        from reserve.solvers.problem import as_problem

        return as_problem(X, y, self.k, budget=getattr(self, "budget", None), **arrays)

    def _select(self, problem: Any) -> None:
        """Set ``candidate_scores_``, ``selected_`` (row indices, best first),
        ``candidate_rank_``, ``cutoff_ties_`` and ``classes_``.

        The selection is the problem's budget's (:meth:`reserve.solvers.Budget.select`):
        best score first, each candidate taken while it still fits (a cell budget: exactly the
        top ``k``). A cell budget's tie at the cut, without a boundary penalty, is broken once
        here by the one rule (:func:`reserve.solvers.ties.rank_selection`, seeded with
        ``random_state``) and reported as ``cutoff_ties_``; ``candidate_rank_`` is each
        candidate's place in the ranking (the chosen, the tie's runners-up, then by score).
        Every selector turns its scores into a selection here, so a money budget needs nothing
        from the caller.
        """
        # Imported here: the ties module imports the budget rule from this module.
        from reserve.solvers.ties import rank_selection

        X, candidates = problem.X, problem.candidates
        # (X @ w)[rows], not X[rows] @ w: the latter copies the candidate block first.
        scores = (X @ self.coef_)[candidates] + self.intercept_
        self.candidates_ = candidates
        self.candidate_scores_ = scores
        top = not problem.money and not problem.constraints.boundary_penalty
        pick, order, self.cutoff_ties_ = rank_selection(
            scores, problem.budget.select(scores), self.random_state, top=top
        )
        self.selected_ = candidates[pick]
        self.candidate_rank_ = np.empty(order.size, dtype=np.int64)
        self.candidate_rank_[order] = np.arange(order.size)
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = X.shape[1]
