"""The budget a selection must fit: ``k`` cells, or a total cost of the chosen candidates.

One value object carries the budget from the estimator to every solver (feasible direction,
polish, MIP, branch and bound), inside :class:`reserve.solvers.constraints.Constraints`. The
cell budget is the money budget with unit costs and ``budget = k``: every sum of unit costs is
exact in floating point, so both run the same code.
"""

from __future__ import annotations

import numpy as np

from reserve.solvers._base import budget_cut, budget_limit, budget_select

__all__ = ["Budget"]


class Budget:
    """Candidate costs and the most they may add up to (``k`` cells: unit costs, ``k``).

    Parameters
    ----------
    cost : array-like of shape (m,)
        Positive, finite candidate costs (validate user input first:
        :func:`reserve.solvers.check_transductive` for ``k``,
        ``reserve.solvers._validation.check_cost_budget`` for costs).
    budget : float
        ``B``: the chosen candidates' costs add up to at most ``B (1 + 1e-12)``.

    Attributes
    ----------
    cost : ndarray of float64, shape (m,)
    budget : float
    limit : float
        The largest total that fits, ``budget * (1 + 1e-12)``.
    card : int or None
        With equal costs, how many candidates fit (``k`` for the cell budget): the MIP then
        writes the cardinality row. ``None``: unequal costs, the knapsack row.

    Examples
    --------
    >>> import numpy as np
    >>> cells = Budget.cells(2, 4)
    >>> cells.card, cells.select(np.array([0.1, 0.9, 0.5, 0.3])).tolist()
    (2, [1, 2])
    >>> money = Budget(np.array([2.0, 5.0, 1.0, 1.0]), 4.0)
    >>> money.card is None, money.select(np.array([0.9, 0.8, 0.7, 0.1])).tolist()
    (True, [0, 2, 3])
    """

    def __init__(self, cost: np.ndarray, budget: float) -> None:
        self.cost = np.asarray(cost, dtype=np.float64)
        self.budget = float(budget)
        self.limit = budget_limit(self.budget)
        self.card = None
        if self.cost.size and np.all(self.cost == self.cost[0]):
            self.card = int(np.searchsorted(np.cumsum(self.cost), self.limit, side="right"))

    @classmethod
    def cells(cls, k: int, m: int) -> Budget:
        """The cell budget: ``k`` of ``m`` candidates, as unit costs and ``budget = k``.

        This is the one place that says what "no cost" means.
        """
        return cls(np.ones(m), float(k))

    def __repr__(self) -> str:
        if self.card is not None and np.all(self.cost == 1.0):
            return f"Budget.cells({self.card}, {self.cost.size})"
        return f"Budget(cost=<{self.cost.size} costs>, budget={self.budget!r})"

    def take(self, idx: np.ndarray) -> Budget:
        """The same budget over the candidates ``idx`` (e.g. in another row order)."""
        return Budget(self.cost[idx], self.budget)

    def select(self, scores: np.ndarray) -> np.ndarray:
        """Best score first, each candidate taken when it still fits (:func:`budget_select`)."""
        return budget_select(scores, self.cost, self.budget)

    def cut(self, scores: np.ndarray) -> float:
        """Score of the first candidate, by decreasing score, that breaks the budget
        (:func:`reserve.solvers._base.budget_cut`; the (k+1)-th score for ``k`` cells)."""
        return budget_cut(scores, self.cost, self.budget)

    def make_feasible(self, w: np.ndarray, b: float, Xc: np.ndarray) -> float:
        """Lower ``b`` just enough that the candidates ``Xc`` scoring ``> 0`` fit the budget."""
        # The first candidate (by decreasing score) whose cost breaks the budget must score
        # <= 0: with unit costs, the (k+1)-th largest score.
        cut = self.cut(Xc @ w + b)
        if cut > 0:
            b = b - cut
        # Rounding in Xc @ w + b can leave a score at +1e-16; step down until the positives fit.
        step = 1e-12 * (1.0 + abs(b))
        while self.cut(Xc @ w + b) > 0:
            b -= step
            step *= 2.0
        return float(b)

    def room(self, fixed_in: np.ndarray) -> float:
        """What the candidates fixed in leave of the budget."""
        return self.limit - float(self.cost[fixed_in].sum())

    def fits_with(self, fixed_in: np.ndarray, j: int) -> bool:
        """Whether candidate ``j`` fits next to those fixed in (count < k, unit costs)."""
        return float(self.cost[j]) <= self.room(fixed_in)

    def row(self, fixed_in: np.ndarray, free: np.ndarray):
        """``(k_rem, None)`` for the cardinality row, ``(None, (c_free, room))`` for knapsack."""
        if self.card is not None:
            return self.card - int(fixed_in.sum()), None
        return None, (self.cost[free], self.room(fixed_in))

    def none_fits(self, fixed_in: np.ndarray, free: np.ndarray) -> bool:
        """No free candidate fits any more (``k_rem == 0``): the rest of the problem is convex."""
        return not bool(np.any(self.cost[free] <= self.room(fixed_in)))
