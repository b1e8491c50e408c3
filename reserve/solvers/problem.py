"""The selection problem as one frozen, arrays-only object: what every selector's ``fit`` receives.

:class:`SelectionProblem` holds the rows a selector fits (features ``X``, labels ``Y`` for
``S`` species), the :class:`~reserve.solvers.constraints.Constraints` the selection must meet
(the :class:`~reserve.solvers.budget.Budget` over the candidate rows, the number of species,
the boundary term), the effort columns and per-row weights. It is built once: by
:func:`reserve.design.build_problem` from the planning units, or by
:meth:`SelectionProblem.from_arrays` from plain arrays (scikit-learn's ``fit(X, y, ...)``
route), which runs the same input checks. Every selector accepts it as its one data
argument, ``est.fit(problem)``.

Locks are applied before the object is built: locked cells are not among its rows, the
budget is what the locked-in cells leave of the planner's, and the boundary term counts the
locked-in cells as selected.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from reserve.errors import InvalidInputError
from reserve.solvers._validation import (
    MultiData,
    TransductiveData,
    check_cost_budget,
    check_multi_transductive,
    check_transductive,
)
from reserve.solvers.boundary import Boundary
from reserve.solvers.budget import Budget
from reserve.solvers.constraints import Constraints

__all__ = ["SelectionProblem", "as_problem", "cells_for_budget"]


def cells_for_budget(budget: Budget) -> int:
    """The cells a money budget buys at the median candidate cost (at least 1, below all).

    The number of cells a selector that ranks a fixed number (the baselines, TTK's working
    sets, a cross-validation) trains for when the budget is money.

    Examples
    --------
    >>> import numpy as np
    >>> cells_for_budget(Budget(np.array([1.0, 2.0, 3.0, 4.0]), 5.0))
    2
    """
    m = budget.cost.size
    return int(np.clip(budget.budget // float(np.median(budget.cost)), 1, m - 1))


@dataclass(frozen=True, eq=False)
class SelectionProblem:
    """Rows to fit, labels, the budget and boundary over the candidates, effort, weights.

    Build it with :meth:`from_arrays` (checked) or :func:`reserve.design.build_problem`;
    the constructor itself checks nothing. Frozen: no field can be reassigned, and every
    change (:meth:`take`, :meth:`with_X`, :meth:`with_penalty`) returns a new object; the
    arrays are not copied from the caller's, so leave them unchanged while it is in use.

    Parameters
    ----------
    X : ndarray of float64, shape (n, d)
        Features of the labelled and the candidate rows.
    Y : ndarray of int64, shape (n, S)
        1 / 0 on labelled rows, -1 in every column of a candidate row; one column per
        species (``S = 1``: one species).
    constraints : Constraints
        The budget over the candidate rows (in row order), ``n_species == S``, the boundary
        term over the candidates and its penalty.
    k : int
        Cells the fit selects: the budget's ``k`` for a cell budget; with a money budget,
        the cells it buys at the median candidate cost (:func:`cells_for_budget`), which
        the baselines train for and shift their intercept at.
    money : bool, default=False
        Whether the budget is money (per-candidate costs) rather than ``k`` cells.
    effort_columns : tuple of int, default=()
        Columns of ``X`` holding survey effort covariates.
    sample_weight : ndarray of shape (n,) or None, default=None
        Hinge weight of each labelled row (candidates' entries are not read).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0], [0.5], [3.0], [-3.0]])
    >>> p = SelectionProblem.from_arrays(X, [0, 0, 1, 1, -1, -1, -1], k=1)
    >>> p.candidates.tolist(), p.budget.card, p.n_species
    ([4, 5, 6], 1, 1)
    >>> money = SelectionProblem.from_arrays(X, [0, 0, 1, 1, -1, -1, -1],
    ...                                      cost=[0, 0, 0, 0, 1.0, 2.0, 1.0], budget=2.0)
    >>> money.money, money.k
    (True, 2)
    """

    X: np.ndarray
    Y: np.ndarray
    constraints: Constraints
    k: int
    money: bool = False
    effort_columns: tuple[int, ...] = ()
    sample_weight: np.ndarray | None = None

    @classmethod
    def from_arrays(
        cls,
        X: object,
        y: object,
        k: object = None,
        cost: object = None,
        budget: object = None,
        boundary: Boundary | None = None,
        *,
        boundary_penalty: float = 0.0,
        effort_columns: tuple[int, ...] | None = None,
        sample_weight: object = None,
        species_table: bool = False,
    ) -> SelectionProblem:
        """Check plain arrays and build the problem (scikit-learn's ``fit(X, y, ...)`` route).

        Parameters
        ----------
        X : array-like of shape (n, d)
        y : array-like of shape (n,) or (n, S)
            1 / 0 on labelled rows, -1 on candidates (every column, with several species).
        k : int or None
            Cells to select. With a money budget, the cells the fit trains for (default
            :func:`cells_for_budget`).
        cost : array-like of shape (n,) or None
            Per-row costs of a money budget (candidates' entries read, finite and > 0).
        budget : float or None
            The money budget; required with ``cost``, refused without it.
        boundary : Boundary or None
            Boundary length over the rows of ``X`` (candidates' entries are read).
        boundary_penalty : float, default=0.0
        effort_columns : tuple of int or None
        sample_weight : array-like of shape (n,) or None
        species_table : bool, default=False
            Check ``y`` as a species table ``Y`` (a 1-D ``y`` is one species) even with one
            column: the several-species selectors' wording of the checks.

        Returns
        -------
        SelectionProblem

        Raises
        ------
        InvalidInputError
            What :func:`~reserve.solvers.check_transductive` (one label column) or
            ``check_multi_transductive`` (several) refuses, a bad money budget
            (``check_cost_budget``), ``budget`` without ``cost`` or the reverse, a boundary
            that is not over the rows of ``X``.
        """
        if cost is None and budget is not None:
            raise InvalidInputError(
                f"budget={budget!r} needs cost= in fit: a money budget is spent on per-row "
                "costs. Pass fit(X, y, cost=...), or leave budget=None and use k."
            )
        if cost is not None and budget is None:
            raise InvalidInputError(
                "cost= in fit needs a money budget; received budget=None. Pass "
                "TTK(budget=...) (the most the selected candidates may cost in total)."
            )
        n_cols = np.shape(y)[1] if np.ndim(y) == 2 else 1
        kk = k if cost is None else None
        if n_cols > 1 or species_table:
            data = check_multi_transductive(X, y, kk)
            Xa, Y, cand = data.X, data.Y, data.candidates
        else:
            one = check_transductive(X, y, kk)
            Xa, Y, cand = one.X, one.y[:, None], one.candidates
        if cost is None:
            bud = Budget.cells(kk, cand.size)
            k_fit = int(bud.card)
        else:
            bud = Budget(*check_cost_budget(cost, budget, cand, Xa.shape[0]))
            k_fit = cells_for_budget(bud) if k is None else int(k)
        term = None
        if boundary is not None:
            n = Xa.shape[0]
            if not isinstance(boundary, Boundary) or boundary.m != n:
                raise InvalidInputError(
                    f"boundary must be a reserve.solvers.Boundary over the {n} rows of X; "
                    f"received {type(boundary).__name__} over {getattr(boundary, 'm', '?')} rows"
                )
            term = boundary.take(cand)
        constraints = Constraints(bud, Y.shape[1], term, float(boundary_penalty))
        weights = None if sample_weight is None else np.asarray(sample_weight)
        effort = tuple(effort_columns or ())
        return cls(Xa, Y, constraints, k_fit, cost is not None, effort, weights)

    @property
    def budget(self) -> Budget:
        """The budget over the candidate rows (row order)."""
        return self.constraints.budget

    @property
    def boundary(self) -> Boundary | None:
        """The boundary term over the candidate rows (row order), or None."""
        return self.constraints.boundary

    @property
    def n_species(self) -> int:
        """Species fitted together (columns of ``Y``)."""
        return self.Y.shape[1]

    @property
    def y(self) -> np.ndarray:
        """The labels as scikit-learn takes them: ``(n,)`` for one species, else ``Y``."""
        return self.Y[:, 0] if self.Y.shape[1] == 1 else self.Y

    @property
    def candidates(self) -> np.ndarray:
        """Row indices of the candidates (``-1``), increasing."""
        return np.flatnonzero(self.Y[:, 0] == -1)

    @property
    def labelled(self) -> np.ndarray:
        """Row indices of the labelled rows, increasing."""
        return np.flatnonzero(self.Y[:, 0] != -1)

    def transductive(self) -> TransductiveData:
        """The one-species arrays a single-scorer solver reads (``k`` is :attr:`k`)."""
        if self.n_species > 1:
            raise InvalidInputError(
                f"this selector fits one species; the problem has {self.n_species}. Use "
                "MultiTTK or MultiSVM, or pass one species' labels."
            )
        lab, cand = self.labelled, self.candidates
        y = self.Y[:, 0]
        y_pm = np.where(y[lab] == 1, 1.0, -1.0)
        return TransductiveData(X=self.X, y=y, labelled=lab, candidates=cand, y_pm=y_pm, k=self.k)

    def multi(self) -> MultiData:
        """The species table's arrays a several-scorer solver reads (``k`` is :attr:`k`)."""
        lab, cand = self.labelled, self.candidates
        Y_pm = np.where(self.Y[lab] == 1, 1.0, -1.0)
        return MultiData(X=self.X, Y=self.Y, labelled=lab, candidates=cand, Y_pm=Y_pm, k=self.k)

    def with_X(self, X: np.ndarray) -> SelectionProblem:
        """The same problem over other features of the same rows (e.g. standardised)."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.shape[0] != self.X.shape[0]:
            raise InvalidInputError(
                f"X must keep the problem's {self.X.shape[0]} rows; received {X.shape[0]}"
            )
        return replace(self, X=X)

    def with_penalty(self, boundary_penalty: float) -> SelectionProblem:
        """The same problem with another boundary penalty."""
        constraints = replace(self.constraints, boundary_penalty=float(boundary_penalty))
        return replace(self, constraints=constraints)

    def take(self, rows: np.ndarray) -> SelectionProblem:
        """The problem over ``rows`` (a CV fold, a bootstrap resample), the budget's meaning kept.

        Labelled rows may repeat (a resample); each candidate kept must appear once. The
        budget, its costs and the boundary term follow the candidates kept: the same ``k``
        cells, or the same money over the kept candidates' costs.

        Examples
        --------
        >>> import numpy as np
        >>> X = np.arange(6.0)[:, None]
        >>> p = SelectionProblem.from_arrays(X, [0, 1, -1, -1, -1, -1], k=2)
        >>> q = p.take(np.array([1, 1, 0, 2, 4, 5]))
        >>> q.Y[:, 0].tolist(), q.budget.card, q.budget.cost.size
        ([1, 1, 0, -1, -1, -1], 2, 3)
        """
        rows = np.asarray(rows, dtype=np.int64)
        kept = rows[self.Y[rows, 0] == -1]
        if np.unique(kept).size != kept.size:
            raise InvalidInputError(
                "take(rows) keeps each candidate row once; received repeated candidate rows. "
                "Resample the labelled rows only."
            )
        pos = np.searchsorted(self.candidates, kept)
        weights = None if self.sample_weight is None else self.sample_weight[rows]
        constraints = self.constraints.take(pos)
        return replace(
            self, X=self.X[rows], Y=self.Y[rows], constraints=constraints, sample_weight=weights
        )

    def row_cost(self) -> np.ndarray | None:
        """Each row's cost of a money budget (NaN on labelled rows), or None for cells."""
        if not self.money:
            return None
        cost = np.full(self.X.shape[0], np.nan)
        cost[self.candidates] = self.budget.cost
        return cost

    def row_boundary(self) -> Boundary | None:
        """The boundary term over every row (labelled rows never selected), or None."""
        term = self.boundary
        if term is None:
            return None
        from scipy import sparse

        n, cand = self.X.shape[0], self.candidates
        ones = np.ones(cand.size)
        place = sparse.csr_matrix((ones, (cand, np.arange(cand.size))), shape=(n, cand.size))
        own = np.zeros(n)
        own[cand] = term.own
        return Boundary(own, place @ term.shared @ place.T, term.const)


def as_problem(
    X: object, y: object = None, k: object = None, *, species_table: bool = False, **arrays: object
) -> SelectionProblem:
    """What a selector's ``fit`` receives, as one :class:`SelectionProblem`.

    ``X`` is the problem itself (``y`` and every array then None), or the arrays of
    scikit-learn's ``fit(X, y, **arrays)``, built by :meth:`SelectionProblem.from_arrays`
    with the estimator's ``k`` (and ``budget=``, ``cost=``, ``boundary=``,
    ``sample_weight=`` among ``arrays``).

    Examples
    --------
    >>> import numpy as np
    >>> p = as_problem(np.eye(4), [0, 1, -1, -1], 1)
    >>> as_problem(p) is p
    True
    """
    if isinstance(X, SelectionProblem):
        extra = sorted(name for name, v in arrays.items() if v is not None and name != "budget")
        if y is not None or extra:
            raise InvalidInputError(
                f"fit(problem) takes the SelectionProblem alone; received "
                f"{['y', *extra] if y is not None else extra} as well. The problem carries the "
                "labels, costs, boundary and weights."
            )
        return X
    return SelectionProblem.from_arrays(X, y, k, species_table=species_table, **arrays)
