"""What a selection must satisfy, as one object handed from the estimator to every solver.

:class:`Constraints` is resolved once, where the estimator reads its data, and passed whole to
the feasible-direction method, the swap polish, the MIP and the branch and bound: none of them
rebuilds a budget from ``k``, ``cost`` and ``budget`` or tests the labels' shape for the number
of species. Locks are already applied when a problem reaches a solver: the locked cells are not
among its rows, the budget is what the locked-in cells leave, and the boundary term counts them
as selected.
"""

from __future__ import annotations

from dataclasses import dataclass

from reserve.solvers.boundary import Boundary
from reserve.solvers.budget import Budget

__all__ = ["Constraints"]


@dataclass(frozen=True, eq=False)
class Constraints:
    """The budget over the candidates, the number of species, and the boundary term.

    Parameters
    ----------
    budget : Budget
        The candidates' costs (unit costs for a cell budget) and the most they may add up to,
        in the candidates' row order.
    n_species : int, default=1
        Scorers fitted together; the same candidate set is chosen for all of them.
    boundary : Boundary or None, default=None
        Boundary length of candidate sets (candidates' row order), with its penalty
        ``boundary_penalty``; None: no boundary term.
    boundary_penalty : float, default=0.0
        Weight of the selection's boundary length in the objective.

    Examples
    --------
    >>> c = Constraints(Budget.cells(3, 10))
    >>> c.budget.card, c.n_species, c.boundary is None
    (3, 1, True)
    """

    budget: Budget
    n_species: int = 1
    boundary: Boundary | None = None
    boundary_penalty: float = 0.0

    def take(self, idx) -> Constraints:
        """The same constraints over the candidates ``idx`` (another order, or a subset)."""
        boundary = None if self.boundary is None else self.boundary.take(idx)
        return Constraints(self.budget.take(idx), self.n_species, boundary, self.boundary_penalty)
