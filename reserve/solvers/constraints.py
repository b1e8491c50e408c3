"""What a selection must satisfy, as one object handed from the estimator to every solver.

:class:`Constraints` is built once, where the estimator reads its data, and passed whole to
the feasible-direction method, the swap polish, the MIP and the branch and bound: none of them
rebuilds a budget or tests the labels' shape for the number of species. Every solver takes
labels of shape ``(n, S)`` and scorers of shape ``(S, d)``, ``(S,)`` with
``S = constraints.n_species`` (one species: ``S = 1``), and reads the number of cells a
selection holds (working-set sizes) from :attr:`Constraints.n_cells`. Locks are already
applied when a problem reaches a solver: the locked cells are not among its rows, the budget is
what the locked-in cells leave, and the boundary term counts them as selected.

A new per-species constraint (e.g. a target per species) touches:

* this module: a field of :class:`Constraints` (and :meth:`Constraints.take` if it is per
  candidate, :meth:`Constraints.check` if it has a shape);
* the estimators that build the object: ``multi.py`` (several species), and ``ttk.py`` if it
  applies to one;
* the solvers of several species: ``_fd.py`` (``_StackedScorers``: ``begin``, ``trial``,
  ``breaks_budget``, ``finish``), ``_polish.py`` (which trial sets ``_swap_round`` and
  ``_patch_move`` may try) and ``_mip.py`` (one row in ``build_scip_model``, in
  ``_solve_gurobi`` and in ``_Relaxation``). The branch and bound (``_bnb.py``) takes one
  species and refuses several, so it is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from reserve.errors import InvalidInputError
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
        Scorers fitted together (label columns); the same candidate set is chosen for all of
        them. Several species take a budget of equal costs (``budget.card`` cells).
    boundary : Boundary or None, default=None
        Boundary length of candidate sets (candidates' row order), with its penalty
        ``boundary_penalty``; None: no boundary term.
    boundary_penalty : float, default=0.0
        Weight of the selection's boundary length in the objective.
    expected_cells : int or None, default=None
        With unequal costs, about how many candidates a selection holds (the estimator counts
        what its start buys); it sizes working sets only. None: as many as fit cheapest first.

    Examples
    --------
    >>> c = Constraints.cells(3, 10)
    >>> c.budget.card, c.n_cells, c.n_species, c.boundary is None
    (3, 3, 1, True)
    >>> import numpy as np
    >>> Constraints(Budget(np.array([1.0, 2.0, 4.0]), 3.5)).n_cells  # 1 + 2 fit, not 4
    2
    """

    budget: Budget
    n_species: int = 1
    boundary: Boundary | None = None
    boundary_penalty: float = 0.0
    expected_cells: int | None = None

    @classmethod
    def cells(cls, k: int, m: int, n_species: int = 1) -> Constraints:
        """The cell budget: ``k`` of ``m`` candidates for ``n_species`` scorers, no boundary."""
        return cls(Budget.cells(k, m), n_species)

    @property
    def n_cells(self) -> int:
        """How many candidates a selection holds: ``budget.card`` with equal costs (``k`` for
        the cell budget), else ``expected_cells``, else as many as fit cheapest first."""
        if self.budget.card is not None:
            return self.budget.card
        if self.expected_cells is not None:
            return self.expected_cells
        return int(self.budget.select(-self.budget.cost).size)

    def check(self, Y_pm: np.ndarray, X_cand: np.ndarray, W=None, b=None) -> None:
        """Refuse labels, candidates or a start that do not fit these constraints.

        ``Y_pm`` must have one column per species, the budget one finite, positive cost per row
        of ``X_cand`` and a limit that fits some candidate and leaves some out, a start ``W``,
        ``b`` the shapes ``(S, d)``, ``(S,)``; several species need a budget of equal costs
        (they share ``budget.card`` cells).
        """
        S, m, d = self.n_species, X_cand.shape[0], X_cand.shape[1]
        if np.shape(Y_pm)[1:] != (S,) or self.budget.cost.shape != (m,):
            raise InvalidInputError(
                f"labels of shape (n, {S}) and a budget over the {m} candidates are needed for "
                f"n_species={S}; received labels of shape {np.shape(Y_pm)} and {self.budget!r}. "
                "Pass one label column per species (y[:, None] for one)."
            )
        if W is not None and (np.shape(W) != (S, d) or np.shape(b) != (S,)):
            raise InvalidInputError(
                f"the start must be W of shape ({S}, {d}) and b of shape ({S},); received "
                f"{np.shape(W)} and {np.shape(b)}. Pass w[None, :] and [b] for one scorer."
            )
        cost, limit = self.budget.cost, self.budget.limit
        if not (np.isfinite(cost).all() and (cost > 0).all()):
            raise InvalidInputError(
                "candidate costs must be finite and > 0; received "
                f"{cost[~(np.isfinite(cost) & (cost > 0))][:3].tolist()}. Fix or drop those rows."
            )
        if not cost.min() <= limit < cost.sum():
            raise InvalidInputError(
                f"the budget must fit some candidate and leave some out; received {self.budget!r} "
                f"over candidates costing {cost.min():g} to {cost.max():g}, {cost.sum():g} in all."
            )
        if S > 1 and self.budget.card is None:
            raise InvalidInputError(
                f"{S} species share a cell budget (equal costs); received {self.budget!r}. "
                "Pass Budget.cells(k, m), or fit one species with the money budget."
            )

    def take(self, idx) -> Constraints:
        """The same constraints over the candidates ``idx`` (another order, or a subset)."""
        boundary = None if self.boundary is None else self.boundary.take(idx)
        return replace(self, budget=self.budget.take(idx), boundary=boundary)
