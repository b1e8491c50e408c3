"""Multi-species TTK: one linear scorer per species, one shared set of ``k`` cells.

Problem (``S`` species, labelled rows ``x_i`` with labels ``y_is`` in {-1, +1}, candidate rows
``z_j``):

    min_{w_s, b_s}  sum_s [ 0.5 ||w_s||^2 + C sum_i [1 - y_is (w_s . x_i + b_s)]_+ ]
    s.t.            #{j : max_s (w_s . z_j + b_s) > 0} <= k

A cell is *positive* when any species scores it positive; the ``k`` cells are shared. With
``S = 1`` this is single-species TTK (:class:`reserve.solvers.TTK`).

Solvers, each reusing the single-species pieces:

* **Start.** Per species the true-hinge SVM; then the ``k`` cells with the largest max-score are
  kept and each intercept is lowered to ``b_s <= -max_{j outside} w_s . z_j`` (see
  :func:`feasible_intercepts`). With ``S = 1`` this is TTK's shifted-SVM start.
* **Feasible direction**: TTK's own loop (:func:`reserve.solvers._fd.feasible_direction`) on
  the stacked variable ``v = (w_1, b_1, ..., w_S, b_S)``; its docstring says how the paper's
  rules carry over.
* **Polish**: TTK's own swap search (:func:`reserve.solvers._polish.polish`); for a fixed set
  of ``k`` cells the problem separates into one fixed-set QP per species (each scorer must
  score the outsiders ``<= 0``).
* **MIP**: TTK's own (:func:`reserve.solvers._mip.solve_ttk_mip` with one label column per
  species): one binary per cell shared by all species, SCIP (or Gurobi).

``MultiSVM`` is the baseline: one SVM per species, cells ranked by the sum of the scores.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from reserve.errors import InvalidInputError
from reserve.solvers._base import canonical_order, feasible_intercepts, top_k
from reserve.solvers._fd import feasible_direction
from reserve.solvers._hinge import species_objectives, species_weights
from reserve.solvers._mip import solve_ttk_mip
from reserve.solvers._polish import polish
from reserve.solvers._qp import solve_fixed_set
from reserve.solvers._validation import (
    MultiData,
    check_hinge_weights,
    check_multi_transductive,
    check_positive_real,
    check_solver_params,
)
from reserve.solvers.problem import as_problem
from reserve.solvers.ties import rank_selection
from reserve.solvers.ttk import TRIVIAL_SPREAD

__all__ = [
    "MultiData",
    "MultiSVM",
    "MultiTTK",
    "check_multi_transductive",
    "feasible_intercepts",
    "species_objectives",
]


# --------------------------------------------------------------------------------------------
# Estimators
# --------------------------------------------------------------------------------------------


class _MultiTopKMixin(BaseEstimator):
    """Fitted API shared by the multi-species selectors: (n, S) scores, exactly k cells."""

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Scores ``X @ coef_.T + intercept_``: one column per species.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_species)
        """
        check_is_fitted(self, "coef_")
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[1] != self.coef_.shape[1]:
            raise InvalidInputError(
                f"X must have shape (n, {self.coef_.shape[1]}) like the data seen in fit; "
                f"received shape {Xa.shape}. Pass the same feature columns."
            )
        return Xa @ self.coef_.T + self.intercept_

    def predict(self, X: np.ndarray) -> np.ndarray:
        """1 where a species' score is positive, else 0; shape (n_samples, n_species)."""
        return (self.decision_function(X) > 0).astype(np.int64)

    def _finish(
        self, data: MultiData, W: np.ndarray, b: np.ndarray, C, by: str, lab_pos=None
    ) -> None:
        """Set the fitted attributes from ``(W, b)``; ``by`` is ``"max"`` or ``"sum"``.

        ``lab_pos``: positions (among the labelled rows) aligned with per-row weights ``C``.
        """
        X, cand = data.X, data.candidates
        # (X @ W.T)[rows], not X[rows] @ W.T: no copy of the candidate block. The intercepts
        # are made feasible on exactly these products, so the stored scores honour the budget.
        margins = (X @ W.T)[cand]
        rank = (margins + b).sum(axis=1) if by == "sum" else None
        b = feasible_intercepts(margins, np.asarray(b, dtype=np.float64), data.k, rank)
        self.coef_ = np.asarray(W, dtype=np.float64)
        self.intercept_ = b
        scores = margins + b
        self.candidates_ = cand
        self.candidate_scores_ = scores
        key = scores.sum(axis=1) if by == "sum" else scores.max(axis=1)
        self._choose(key, top_k(key, data.k), top=True)
        lab = np.arange(data.labelled.size) if lab_pos is None or np.ndim(C) == 0 else lab_pos
        self.species_objective_ = species_objectives(
            self.coef_, b, X[data.labelled[lab]], data.Y_pm[lab], C
        )
        self.objective_ = float(self.species_objective_.sum())
        # Per species, as TTK.trivial_: a scorer whose candidate scores span < 1 % of the margin.
        self.score_spread_ = np.ptp(margins, axis=0)
        self.trivial_ = self.score_spread_ < TRIVIAL_SPREAD
        self.n_features_in_ = X.shape[1]
        self.n_species_ = W.shape[0]

    def _choose(self, key: np.ndarray, pick: np.ndarray, *, top: bool) -> None:
        """Set ``selected_``, ``candidate_rank_`` and ``cutoff_ties_`` from the candidates'
        combined scores ``key`` and the budget's ``pick`` (:func:`rank_selection`: with
        ``top``, a tie at the cut broken by the one rule, seeded with ``random_state``)."""
        pick, order, self.cutoff_ties_ = rank_selection(key, pick, self.random_state, top=top)
        self.selected_ = self.candidates_[pick]
        self.candidate_rank_ = np.empty(order.size, dtype=np.int64)
        self.candidate_rank_[order] = np.arange(order.size)


def _species_weights(class_weight, sample_weight, data: MultiData) -> np.ndarray | None:
    """Per-(labelled row, species) hinge weights ``c_is``, or ``None`` when all are 1."""
    if class_weight is None and sample_weight is None:
        return None
    n = data.X.shape[0]
    cols = []
    for s in range(data.Y_pm.shape[1]):
        y01 = (data.Y_pm[:, s] > 0).astype(np.int64)
        c = check_hinge_weights(class_weight, sample_weight, y01, data.labelled, n)
        cols.append(np.ones(y01.size) if c is None else c)
    Cw = np.column_stack(cols)
    return None if np.all(Cw == 1.0) else Cw


def _svm_per_species(X_lab, Y_pm, C):
    Cs = [species_weights(C, s) for s in range(Y_pm.shape[1])]
    fits = [solve_fixed_set(X_lab, Y_pm[:, s], Cs[s]) for s in range(Y_pm.shape[1])]
    W = np.vstack([r.w for r in fits])
    b = np.array([r.b for r in fits], dtype=np.float64)
    return W, b, np.array([r.objective for r in fits])


class MultiTTK(_MultiTopKMixin):
    """Multi-species Transductive Top K: one hinge scorer per species, ``k`` shared cells.

    Minimises ``sum_s [0.5 ||w_s||^2 + C sum_i c_is [1 - y_is (w_s . x_i + b_s)]_+]`` subject
    to at most ``k`` candidate cells having a positive max-score ``max_s (w_s . z_j + b_s)``,
    then selects exactly ``k`` cells: the top ``k`` by max-score, a tie at the cut broken by
    the one rule (:func:`reserve.solvers.ties.rank_selection`, seeded with ``random_state``). With
    one species it is :class:`reserve.solvers.TTK`. The weights ``c_is`` are 1 unless
    ``class_weight`` (per species: ``"balanced"`` balances each species' own classes) or
    ``sample_weight`` in :meth:`fit` (per row, every species) say otherwise.

    Parameters
    ----------
    k : int
        Number of cells to select (``0 < k < number of candidates``).
    C : float
        Hinge-loss weight (the same for every species).
    solver : {"fd", "mip"}
        ``"fd"``: feasible direction on the stacked variable (plus the polish, by default).
        ``"mip"``: the exact mixed-integer program in SCIP, warm-started from FD + polish.
    polish : bool
        Follow FD with the swap local search over the shared set.
    max_iter : int
        Feasible-direction iterations at most.
    time_limit : float
        Seconds for the MIP (``solver="mip"``).
    mip_gap : float
        Relative gap at which the MIP may stop.
    threads : int
        Threads for Gurobi, as for :class:`reserve.solvers.TTK`; SCIP's standard solve is
        sequential.
    random_state : int or None
        Seed of the draw that breaks a tie at the cut (candidates whose max-scores tie the
        last chosen one's, more than the places left); None is 0. Nothing else in
        the fit draws random numbers.
    class_weight : None, "balanced" or dict
        As for :class:`reserve.solvers.TTK`, species by species.

    Attributes
    ----------
    coef_ : ndarray of shape (n_species, n_features)
    intercept_ : ndarray of shape (n_species,)
    selected_ : ndarray of shape (k,)
        Row indices of the chosen cells, best first.
    candidates_ : ndarray
        Row indices of all candidates; ``candidate_scores_`` (m, n_species) their scores.
    candidate_rank_ : ndarray of int64, shape (n_candidates,)
        Each candidate's place in the ranking (0 = best): the chosen, the tie's runners-up,
        then the others by max-score.
    cutoff_ties_ : reserve.solvers.ties.CutoffTies
        The tie at the cut and how it was broken.
    objective_ : float
        Recomputed from ``coef_`` and ``intercept_``; ``species_objective_`` per species.
    init_objective_, fd_objective_ : float
        Objective of the start and after the feasible-direction method.
    objective_history_ : list of float
        After every FD iteration, then after every accepted polish swap (non-increasing).
    score_spread_, trivial_ : ndarray of shape (n_species,)
        Per species, as :attr:`reserve.solvers.TTK.trivial_`: ``True`` where the species'
        scorer ended at ``w`` near 0 (its ranking is noise; the shared cells are in effect
        chosen by the other species). ``class_weight="balanced"`` usually helps.
    n_iter_, n_swaps_ : int
        FD iterations; polish swaps accepted.
    polish_stop_ : str
        Why the polish stopped, as :attr:`reserve.solvers.TTK.polish_stop_`.
    stop_reason_ : str
        Why FD stopped (see :func:`reserve.solvers._fd.feasible_direction`).
    status_ : str
        ``"local"`` for FD (+ polish); the MIP's status otherwise (``"optimal"``,
        ``"gap_limit"``, ``"time_limit"``, ``"not_proved"``, ...).
    bound_, gap_, n_nodes_, mip_solver_ : MIP only
        Proven lower bound, relative gap, branch-and-bound nodes, ``"scip"`` (or
        ``"gurobi"``, as for :class:`reserve.solvers.TTK`).
    runtime_ : float
        Seconds spent in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3))
    >>> Y = np.c_[X[:, 0] > 0, X[:, 1] > 0].astype(int)
    >>> Y[30:] = -1  # the last 30 rows are candidate cells
    >>> model = MultiTTK(k=5).fit(X, Y)
    >>> model.selected_.shape, model.coef_.shape, model.decision_function(X).shape
    ((5,), (2, 3), (60, 2))
    >>> bool((model.candidate_scores_.max(axis=1) > 0).sum() <= 5)
    True
    """

    def __init__(
        self,
        k: int = 10,
        C: float = 1.0,
        solver: str = "fd",
        polish: bool = True,
        max_iter: int = 500,
        time_limit: float = 60.0,
        mip_gap: float = 1e-6,
        threads: int = 1,
        random_state: int | None = None,
        class_weight: str | dict | None = None,
    ) -> None:
        self.k = k
        self.C = C
        self.solver = solver
        self.polish = polish
        self.max_iter = max_iter
        self.time_limit = time_limit
        self.mip_gap = mip_gap
        self.threads = threads
        self.random_state = random_state
        self.class_weight = class_weight

    def _check_params(self) -> float:
        return check_solver_params(self, {"max_iter": 500, "threads": 1})

    def fit(self, X: object, Y: object = None, sample_weight: np.ndarray | None = None) -> MultiTTK:
        """Fit one scorer per species and select exactly ``k`` shared cells.

        Parameters
        ----------
        X : SelectionProblem or array-like of shape (n_samples, n_features)
            The problem (a cell budget; ``Y`` and ``sample_weight`` then None), or labelled
            and candidate rows (standardised features).
        Y : array-like of shape (n_samples, n_species) or None
            1 / 0 in every column of a labelled row, -1 in every column of a candidate row.
        sample_weight : array-like of shape (n_samples,) or None
            Hinge weight of each labelled row for every species (see :class:`TTK`).

        Returns
        -------
        self
        """
        t0 = time.perf_counter()
        C = self._check_params()
        problem = as_problem(X, Y, self.k, species_table=True, sample_weight=sample_weight)
        if problem.money:
            raise InvalidInputError(
                "MultiTTK selects a number of cells; received a money budget. Pass a cell "
                "budget (k), or fit one species with TTK."
            )
        data, sample_weight = problem.multi(), problem.sample_weight
        k = data.k
        # Solve in a canonical row order: the answer does not depend on the input order.
        lab_pos = canonical_order(data.X[data.labelled])
        Cw = _species_weights(self.class_weight, sample_weight, data)
        if Cw is not None:
            Cw = Cw[lab_pos]
            keep = (Cw > 0).any(axis=1)  # a row of weight 0 for every species adds nothing
            lab_pos, C = lab_pos[keep], C * Cw[keep]
        X_lab = data.X[data.labelled[lab_pos]]
        Y_pm = data.Y_pm[lab_pos]
        cand_rows = canonical_order(data.X, data.candidates)
        X_cand = data.X[cand_rows]
        # the problem's constraints in the solvers' candidate order
        cons = problem.constraints.take(np.searchsorted(data.candidates, cand_rows))

        W, b, _ = _svm_per_species(X_lab, Y_pm, C)
        b = feasible_intercepts(X_cand @ W.T, b, k)
        self.init_objective_ = float(species_objectives(W, b, X_lab, Y_pm, C).sum())
        fd = feasible_direction(X_lab, Y_pm, X_cand, cons, C, W, b, max_iter=self.max_iter)
        W, b = fd.w, fd.b
        self.fd_objective_ = fd.objective
        self.n_iter_ = fd.n_iter
        self.stop_reason_ = fd.stop_reason
        history = list(fd.history)
        self.n_swaps_ = 0
        self.polish_stop_ = "off"
        if self.polish:
            pol = polish(X_lab, Y_pm, X_cand, cons, C, W, b)
            # The polish starts from FD's own set, so it cannot be worse; keep FD's point if
            # the QP solver's rounding made it so by a hair.
            if pol.objective <= fd.objective:
                W, b = pol.w, pol.b
                history.extend(pol.history[1:])
            self.n_swaps_ = pol.n_swaps
            self.polish_stop_ = pol.stop_reason
        self.status_ = "local"
        if self.solver == "mip":
            res = solve_ttk_mip(
                X_lab,
                Y_pm,
                X_cand,
                cons,
                C,
                warm_start=(W, b),
                time_limit=float(self.time_limit),
                mip_gap=float(self.mip_gap),
                threads=int(self.threads),
            )
            W, b = res.w, res.b
            self.status_ = res.status
            self.bound_ = res.bound
            self.gap_ = res.gap
            self.n_nodes_ = res.n_nodes
            self.mip_solver_ = res.solver
        self.objective_history_ = history
        self._finish(data, W, b, C, "max", lab_pos)
        if self.solver == "mip":
            # The bound was proved for the solver's point; the stored one may differ by the
            # rounding of the final feasibility shift only.
            self.bound_ = min(self.bound_, self.objective_)
            self.gap_ = (self.objective_ - self.bound_) / self.objective_
        self.runtime_ = time.perf_counter() - t0
        return self


class MultiSVM(_MultiTopKMixin):
    """Baseline: a true-hinge SVM per species; cells ranked by the sum of the species' scores.

    Each species' SVM is fitted to the labelled rows only. The top ``k`` cells by
    ``sum_s (w_s . z_j + b_s)`` are selected; then each intercept is lowered so that every
    other cell scores ``<= 0`` for every species, which makes the model a feasible point of
    :class:`MultiTTK`'s problem and its ``objective_`` comparable (the shift does not change
    the ranking: it moves every sum by the same amount).

    Parameters
    ----------
    k : int
        Number of cells to select.
    C : float
        Hinge-loss weight.
    random_state : int or None, default=0
        Seed of the draw that breaks a tie at the cell budget's cut (candidates whose summed
        scores tie the last chosen one's, more than the places left); None is 0.

    Attributes
    ----------
    coef_ : ndarray of shape (n_species, n_features)
    intercept_ : ndarray of shape (n_species,)
        Shifted intercepts; ``raw_intercept_`` the SVMs' own.
    selected_, candidates_, candidate_scores_, objective_, species_objective_, runtime_
        As for :class:`MultiTTK`.
    candidate_rank_, cutoff_ties_
        As for :class:`MultiTTK`, by the summed scores (no tie with a money budget).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0], [0.5], [3.0], [-3.0]])
    >>> Y = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [-1, -1], [-1, -1], [-1, -1]])
    >>> MultiSVM(k=1, C=1.0).fit(X, Y).selected_.tolist()
    [5]
    """

    def __init__(self, k: int = 10, C: float = 1.0, random_state: int | None = 0) -> None:
        self.k = k
        self.C = C
        self.random_state = random_state

    def fit(self, X: object, Y: object = None) -> MultiSVM:
        """Fit one SVM per species on the labelled rows, select cells; return ``self``.

        ``X`` is a :class:`~reserve.solvers.problem.SelectionProblem` (``Y`` None; a money
        budget selects, by the sum of the scores, what fits it) or the rows, with ``Y``.
        """
        t0 = time.perf_counter()
        C = check_positive_real(self.C, "C")
        problem = as_problem(X, Y, self.k, species_table=True)
        data = problem.multi()
        W, b, _ = _svm_per_species(data.X[data.labelled], data.Y_pm, C)
        self.raw_intercept_ = b
        self._finish(data, W, b, C, "sum")
        if problem.money:  # the intercepts shifted at k cells; the budget walks the sums
            key = self.candidate_scores_.sum(axis=1)
            self._choose(key, problem.budget.select(key), top=False)
        self.runtime_ = time.perf_counter() - t0
        return self
