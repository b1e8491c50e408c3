"""What every transductive top-k estimator shares: the top-k rule and the fitted API."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from reserve.errors import InvalidInputError

__all__ = ["TopKClassifierMixin", "top_k"]


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
        scores = X[candidates] @ self.coef_ + self.intercept_
        self.candidates_ = candidates
        self.candidate_scores_ = scores
        self.selected_ = candidates[top_k(scores, k)]
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = X.shape[1]
