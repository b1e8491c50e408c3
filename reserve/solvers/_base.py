"""What every transductive top-k estimator shares: the top-k rule and the fitted API."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from reserve.errors import InvalidInputError

__all__ = ["TopKClassifierMixin", "canonical_order", "top_k"]


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


class TopKClassifierMixin(ClassifierMixin, BaseEstimator):
    """Shared fitted API: linear scores, exactly-k selection, 0/1 predictions.

    Subclasses set ``coef_``, ``intercept_``, ``candidates_`` and call ``_select`` in ``fit``.
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

        On the training data of a TTK fit this marks at most ``k`` candidates; use
        ``selected_`` for exactly ``k``.
        """
        return (self.decision_function(X) > 0).astype(np.int64)

    def _select(self, X: np.ndarray, candidates: np.ndarray, k: int) -> None:
        """Set ``candidate_scores_``, ``selected_`` (row indices, best first) and ``classes_``."""
        # (X @ w)[rows], not X[rows] @ w: the latter copies the candidate block first.
        scores = (X @ self.coef_)[candidates] + self.intercept_
        self.candidates_ = candidates
        self.candidate_scores_ = scores
        self.selected_ = candidates[top_k(scores, k)]
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = X.shape[1]
