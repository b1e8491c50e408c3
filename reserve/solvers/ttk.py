"""TTK: Transductive Top K as a scikit-learn estimator."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from joblib import effective_n_jobs

from reserve.config import TTK_DEFAULTS
from reserve.errors import InvalidInputError
from reserve.fork import fork_map, one_blas_thread
from reserve.solvers._base import TopKClassifierMixin, canonical_order
from reserve.solvers._fd import feasible_direction
from reserve.solvers._polish import polish
from reserve.solvers._qp import hinge_objective, solve_fixed_set
from reserve.solvers._validation import (
    check_choice,
    check_hinge_weights,
    check_positive_real,
    check_solver_params,
)
from reserve.solvers.boundary import Boundary
from reserve.solvers.budget import Budget
from reserve.solvers.constraints import Constraints
from reserve.solvers.svm import shifted_intercept_budget

__all__ = [
    "LADDERS",
    "TRIVIAL_SPREAD",
    "TTK",
    "best_intercept",
    "ladder_budgets",
    "shifted_svm_start",
]

#: A fit whose candidate scores ``w . z`` span less than this (the hinge margin is 1) ended at
#: the trivial scorer: ``TTK.trivial_``.
TRIVIAL_SPREAD = 0.01


#: The attributes :meth:`TTK._fit_local` sets (a worker hands them back with its fit).
_LOCAL_STATE = (
    "fd_objective_",
    "n_iter_",
    "stop_reason_",
    "n_swaps_",
    "polish_stop_",
    "_chosen",
)

#: Values of TTK's ``ladder``.
LADDERS: tuple[str, ...] = ("none", "mean")


def ladder_budgets(k: int, m: int) -> tuple[int, ...]:
    """The budgets of the ladder 1, 2, 4, 8, ... that bracket ``k``, below ``m`` candidates.

    The largest power of 2 at most ``k`` and the next one. Every ``k`` from one power of 2 up
    to the next shares the same two, which is what makes ``ladder="mean"`` stable in ``k``.

    Examples
    --------
    >>> ladder_budgets(30, 1000), ladder_budgets(32, 1000), ladder_budgets(30, 40)
    ((16, 32), (32, 64), (16, 32))
    """
    lo = 1 << (int(k).bit_length() - 1)
    return tuple(r for r in (lo, 2 * lo) if r < m)


def best_intercept(margins: np.ndarray, y_pm: np.ndarray, c: object = 1.0) -> float:
    """The intercept ``b`` minimising ``sum_i c_i [1 - y_i (margins_i + b)]_+``.

    The sum is convex and piecewise linear in ``b``: a positive row's term falls (slope
    ``-c_i``) while ``b < 1 - margins_i``, a negative row's rises (``+c_i``) once
    ``b > -1 - margins_i``. The minimum is the first breakpoint where the slope stops being
    negative (a weighted median of the breakpoints).

    Examples
    --------
    >>> best_intercept(np.array([0.0, 0.0]), np.array([1.0, -1.0]))  # any b in [-1, 1]
    -1.0
    >>> best_intercept(np.array([3.0, 2.0, -1.0]), np.array([1.0, 1.0, -1.0]))
    -1.0
    """
    y_pm = np.asarray(y_pm, dtype=np.float64)
    c = np.broadcast_to(np.asarray(c, dtype=np.float64), y_pm.shape)
    t = np.where(y_pm > 0, 1.0 - margins, -1.0 - margins)
    order = np.argsort(t, kind="stable")
    # slope just right of t[order[j]]: -(positives with t > b) + (negatives with t <= b)
    pos = np.where(y_pm[order] > 0, c[order], 0.0)
    neg = np.where(y_pm[order] > 0, 0.0, c[order])
    slope = -(pos.sum() - np.cumsum(pos)) + np.cumsum(neg)
    j = int(np.searchsorted(slope, 0.0, side="left"))
    return float(t[order[min(j, t.size - 1)]])


def shifted_svm_start(
    X_lab: np.ndarray, y_pm: np.ndarray, X_cand: np.ndarray, budget: Budget, C: float
) -> tuple[np.ndarray, float, float]:
    """The paper's starting point: a true-hinge SVM with ``b`` shifted to the k-constraint.

    The SVM has an unregularised intercept and the plain (not squared) hinge loss. Given its
    ``w``, the objective is convex in ``b`` and "at most k candidates positive" means
    ``b <= -s_(k+1)`` (``s_(k+1)`` the (k+1)-th largest candidate score ``w . z``). So the best
    feasible ``b`` is ``min(b_svm, -s_(k+1))``: in the usual case the top ``k`` candidates score
    positive and the (k+1)-th sits on the boundary; if the SVM itself already marks fewer than
    ``k + 1`` candidates positive it is left unshifted, being optimal for the relaxed problem.

    ``budget`` (a :class:`reserve.solvers.Budget` over the candidates) says what "at most k"
    means: with costs the shift is to the score of the first candidate, in decreasing score
    order, whose cumulative cost breaks the budget
    (:func:`reserve.solvers.svm.shifted_intercept_budget`); ``Budget.cells(k, m)`` gives the
    (k+1)-th largest score above.

    Returns
    -------
    w, b : the start
    b_svm : the SVM's own intercept
    """
    svm = solve_fixed_set(X_lab, y_pm, C)
    b = shifted_intercept_budget(svm.b, X_cand @ svm.w, budget.cost, budget.budget)
    return svm.w, b, svm.b


class TTK(TopKClassifierMixin):
    """Transductive Top K: the hinge-loss linear scorer whose top k candidates are its positives.

    Minimises ``0.5 ||w||^2 + C sum_i c_i [1 - y_i (w . x_i + b)]_+`` over the labelled rows
    subject to at most ``k`` candidate rows scoring positive, then selects exactly ``k``
    candidates: the top ``k`` by score, ties to the lower row index. The row weights ``c_i``
    are 1 unless ``class_weight`` or ``sample_weight`` (in :meth:`fit`) say otherwise; every
    solver (the start, FD, the polish, the MIP, the branch and bound) minimises the weighted
    objective itself (no row is repeated). Candidates carry no loss.

    With a money budget (``budget=B`` here and ``cost=c`` in :meth:`fit`) the constraint is
    that the candidates scoring positive cost at most ``B`` in total, and the selection is
    :func:`reserve.solvers._base.budget_select` of the final scores: best first, each
    candidate taken when its cost still fits (so every positive candidate is selected). The
    cell budget is the special case ``c = 1``, ``B = k`` and runs the same code.

    Parameters
    ----------
    k : int
        Number of candidates to select (``0 < k < number of candidates``). Not used when
        ``fit`` is given ``cost``.
    C : float
        Hinge-loss weight.
    solver : {"fd", "mip"}
        ``"fd"``: the paper's feasible-direction method (plus the polish, by default).
        ``"mip"``: the exact mixed-integer program, warm-started from FD + polish.
    polish : bool
        Follow FD with the swap local search over fixed-set QPs, which reaches the optimum on
        small instances where plain FD stops short.
    max_iter : int
        Feasible-direction iterations at most (500, as in the paper).
    step_shrink : float
        The line search covers ``[0, step_shrink * alpha]`` of the maximal feasible step.
    boundary_rtol : float
        Relative width of the decision-boundary set (see :mod:`reserve.solvers._fd`).
    tol : float
        Relative objective decrease that counts as progress.
    polish_max_rounds, polish_pairs : int
        Swaps accepted at most; pairs tried per round before the polish stops.
    time_limit : float
        Seconds for the MIP solver (``solver="mip"``).
    mip_gap : float
        Relative gap at which the MIP solver may stop.
    threads : int
        Threads for the MIP solver.
    mip_solver : {"auto", "scip", "gurobi", "bnb"}
        Which exact solver ``solver="mip"`` runs: ``"auto"`` (Gurobi when installed with a
        licence that fits the model, else SCIP), or the package's own branch and bound
        ``"bnb"`` (convex-QP nodes; proves high-dimensional instances SCIP leaves open; see
        :func:`reserve.solvers._mip.solve_ttk_mip`).
    random_state : int or None
        Seed of the draw that breaks a tie at the cell budget's cut (candidates whose scores
        tie the last chosen one's, more than the places left;
        :func:`reserve.solvers.ties.rank_selection`); None is 0. Nothing else in the
        fit draws random numbers (the row order that makes the answer order-independent uses
        a fixed projection, the same for every seed). ``reserve select --seed`` hands its
        seed to the estimator (``get_params`` then records it in the run summary).
    budget : float or None
        Money budget: the selected candidates' costs (``cost`` in :meth:`fit`) add up to at
        most ``budget`` (a relative 1e-12 of rounding allowed). Required with ``cost``, refused
        without it.
    class_weight : None, "balanced" or dict
        Hinge weight of each class: ``None`` (1 each), ``"balanced"`` (``n_lab / (2 n_c)``
        for class ``c``, scikit-learn's rule: the rare class weighs as much as the common
        one), or ``{0: w0, 1: w1}``. Multiplies ``sample_weight``.
    boundary_penalty : float, default=0.0
        Adds ``boundary_penalty`` times the selection's boundary length (``boundary=`` in
        :meth:`fit`, a :class:`reserve.solvers.Boundary`) to the objective, as Marxan's
        boundary length modifier; the transductive constraint is unchanged. The polish (or
        the exact solver: SCIP, or ``mip_solver="bnb"``; not Gurobi) minimises the sum; FD
        does not see it. 0: no boundary term.
    ladder : {"none", "mean"}, default="none"
        ``"mean"``: the scorer is the mean of the TTK fits (each FD + polish from the shifted
        SVM) at ``k`` and at the budgets of the ladder 1, 2, 4, 8, ... that bracket ``k``
        (:func:`ladder_budgets`), with the intercept that minimises the hinge loss among those
        that let at most ``k`` candidates score positive. Each budget's fit ends in its own
        local optimum, and which one swings the top ``k`` between neighbouring budgets; every
        ``k`` from one power of 2 to the next shares the two ladder fits, so the mean moves
        little with ``k`` (docs/algorithm.md, "The ladder mean"). Costs up to two more fits.
        Cell budgets, ``solver="fd"``, no boundary penalty; ignored otherwise.
    n_jobs : int or None, default=None
        Processors the ladder mean's fits share (``None``: 1; -1: all). On Linux they run in
        forked children; elsewhere, and without the ladder, in this process. The result does
        not depend on it.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    selected_ : ndarray of shape (k,) or (n_selected,)
        Row indices (into ``X``) of the chosen candidates, best first (with a money budget,
        as many as fit).
    selected_cost_ : float
        Total cost of ``selected_`` (``float(k)`` for the cell budget).
    budget_ : float
        The budget used: ``budget``, or ``k`` for the cell budget.
    candidates_ : ndarray
        Row indices of all candidates; ``candidate_scores_`` their scores.
    candidate_rank_ : ndarray of int64, shape (n_candidates,)
        Each candidate's place in the ranking (0 = best): with a cell budget and no boundary
        penalty the chosen, the tie's runners-up, then the others by score; else by score.
    cutoff_ties_ : reserve.solvers.ties.CutoffTies
        The tie at the cell budget's cut and how it was broken (none with a money budget or a
        boundary penalty).
    objective_ : float
        Objective recomputed from ``coef_`` and ``intercept_`` (plus the boundary penalty of
        ``selected_`` with ``boundary_penalty``).
    boundary_length_ : float
        Boundary length of ``selected_`` (with ``boundary=`` in :meth:`fit`; else NaN).
    init_objective_ : float
        Objective of the shifted-SVM start.
    fd_objective_ : float
        Objective after the feasible-direction method.
    objective_history_ : list of float
        Objective after every FD iteration, then after every accepted polish swap.
    n_iter_ : int
        FD iterations taken.
    n_swaps_ : int
        Polish swaps accepted.
    polish_stop_ : str
        Why the polish stopped: ``"no_improving_swap"`` (no swap among ``polish_pairs``
        tried pairs lowered the objective), ``"max_rounds"`` (``polish_max_rounds`` swaps
        were accepted and the search was cut short: a better swap may remain), or ``"off"``
        (``polish=False``).
    stop_reason_ : str
        Why FD stopped: ``"max_iter"``, ``"no_progress"``, ``"zero_direction"`` (the boundary
        constrains every direction), ``"infeasible_step"`` (rounding would have let the
        positives exceed the budget; the step was refused).
    status_ : str
        ``"local"`` for FD (+ polish): a feasible point with no proof of optimality (whether
        the polish ended at its swap neighbourhood's optimum or on its round cap is
        ``polish_stop_``); the MIP reports its own status (``"optimal"``, ``"time_limit"``,
        ...).
    score_spread_ : float
        ``max - min`` of ``coef_ . z`` over the candidates: how far apart the scorer puts
        them, in units of the hinge margin (1).
    trivial_ : bool
        ``score_spread_ < TRIVIAL_SPREAD`` (0.01): the fit ended at the trivial scorer
        (``w`` near 0, every row classified by ``b`` alone), so the top ``k`` differ from the
        rest by rounding noise, not by habitat. Typical of a rare class (few positives among
        many labelled rows); ``class_weight="balanced"`` usually moves the fit away from it.
    ladder_budgets_ : tuple of int
        The budgets whose fits the scorer averages (``(k,)`` without the ladder mean).
    runtime_ : float
        Seconds spent in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3))
    >>> y = np.r_[(X[:30, 0] > 0).astype(int), -np.ones(30, dtype=int)]
    >>> model = TTK(k=5).fit(X, y)
    >>> model.selected_.shape
    (5,)
    >>> cost = np.r_[np.full(30, np.nan), np.linspace(1.0, 3.0, 30)]  # labelled rows: unused
    >>> money = TTK(budget=6.0).fit(X, y, cost=cost)
    >>> bool(money.selected_cost_ <= 6.0), money.budget_
    (True, 6.0)
    """

    def __init__(
        self,
        k: int = 10,
        C: float = TTK_DEFAULTS.C,
        solver: str = "fd",
        polish: bool = TTK_DEFAULTS.polish,
        max_iter: int = TTK_DEFAULTS.max_iter,
        step_shrink: float = TTK_DEFAULTS.step_shrink,
        boundary_rtol: float = TTK_DEFAULTS.boundary_rtol,
        tol: float = TTK_DEFAULTS.tol,
        polish_max_rounds: int = TTK_DEFAULTS.polish_max_rounds,
        polish_pairs: int = TTK_DEFAULTS.polish_pairs,
        time_limit: float = 60.0,
        mip_gap: float = 1e-6,
        threads: int = 1,
        random_state: int | None = None,
        budget: float | None = None,
        mip_solver: str = "auto",
        class_weight: str | dict | None = None,
        boundary_penalty: float = 0.0,
        ladder: str = "none",
        n_jobs: int | None = None,
    ) -> None:
        self.k = k
        self.C = C
        self.solver = solver
        self.polish = polish
        self.max_iter = max_iter
        self.step_shrink = step_shrink
        self.boundary_rtol = boundary_rtol
        self.tol = tol
        self.polish_max_rounds = polish_max_rounds
        self.polish_pairs = polish_pairs
        self.time_limit = time_limit
        self.mip_gap = mip_gap
        self.threads = threads
        self.random_state = random_state
        self.budget = budget
        self.mip_solver = mip_solver
        self.class_weight = class_weight
        self.boundary_penalty = boundary_penalty
        self.ladder = ladder
        self.n_jobs = n_jobs

    def _check_params(self) -> float:
        counts = ("max_iter", "polish_max_rounds", "polish_pairs", "threads")
        C = check_solver_params(self, {n: getattr(TTK_DEFAULTS, n, 1) for n in counts})
        step = check_positive_real(self.step_shrink, "step_shrink")
        if step > 1.0:
            raise InvalidInputError(
                f"step_shrink must be in (0, 1]; received {self.step_shrink!r}. "
                "Pass e.g. step_shrink=0.5 (the paper's value)."
            )
        check_positive_real(self.boundary_rtol, "boundary_rtol")
        check_positive_real(self.tol, "tol", allow_zero=True)
        check_choice(self.ladder, LADDERS, "ladder")
        nj = self.n_jobs
        if nj is not None and (
            isinstance(nj, bool) or not isinstance(nj, int | np.integer) or nj == 0
        ):
            raise InvalidInputError(
                f"n_jobs must be None or a non-zero integer (-1: every processor); received {nj!r}"
            )
        if self.solver == "mip":
            from reserve.solvers._mip import SOLVERS as MIP_SOLVERS

            if self.mip_solver not in MIP_SOLVERS:
                raise InvalidInputError(
                    f"mip_solver must be one of {', '.join(MIP_SOLVERS)}; received "
                    f"{self.mip_solver!r}. Use mip_solver='auto' (SCIP, or Gurobi when "
                    "installed) or 'bnb' (the package's own branch and bound)."
                )
        return C

    def fit(
        self,
        X: object,
        y: object = None,
        cost: np.ndarray | None = None,
        sample_weight: np.ndarray | None = None,
        boundary: Boundary | None = None,
    ) -> TTK:
        """Fit the scorer and select exactly ``k`` candidates, or what fits a money budget.

        Parameters
        ----------
        X : SelectionProblem or array-like of shape (n_samples, n_features)
            The problem (:class:`reserve.solvers.problem.SelectionProblem`: its budget,
            cells or money, replaces ``k`` and ``budget``; ``y`` and the other arguments
            then None), or labelled and candidate rows (standardise features first: ``C``
            and the regulariser assume comparable scales).
        y : array-like of shape (n_samples,) or None
            1 / 0 for labelled rows, -1 for candidates (with array ``X``).
        cost : array-like of shape (n_samples,) or None
            Cost of each row for a money budget (``budget`` must be set; ``k`` is then not
            used). Only the candidate rows' entries are read: finite and ``> 0``; labelled
            rows' entries are ignored and may be NaN. ``None``: the cell budget ``k``.
        sample_weight : array-like of shape (n_samples,) or None
            Hinge weight of each labelled row (finite, ``>= 0``; times ``class_weight``).
            Candidates' entries are not read. A row of weight 0 is as if it were absent;
            integer weights give the fit of the data with each row repeated that often.
        boundary : Boundary or None
            Boundary length of candidate sets, over the rows of ``X`` (candidates' entries
            are read). Required with ``boundary_penalty > 0``.

        Returns
        -------
        self
        """
        t0 = time.perf_counter()
        C = self._check_params()
        problem = self._problem(X, y, cost=cost, sample_weight=sample_weight, boundary=boundary)
        lam = check_positive_real(self.boundary_penalty, "boundary_penalty", allow_zero=True)
        problem = problem.with_penalty(lam)  # the estimator's penalty is the solvers' one
        data, bud, money = problem.transductive(), problem.budget, problem.money
        lab_y, n = data.y[data.labelled], data.X.shape[0]
        c = check_hinge_weights(self.class_weight, problem.sample_weight, lab_y, data.labelled, n)
        # Solve in a canonical row order so that the answer does not depend on the input order.
        lab = canonical_order(data.X, data.labelled)
        if c is not None:
            c = c[np.searchsorted(data.labelled, lab)]
            lab, c = lab[c > 0], c[c > 0]  # a row of weight 0 adds nothing: drop it
            C = C * c  # per-row hinge weights C c_i, through every solver
        cand_rows = canonical_order(data.X, data.candidates)
        X_lab, X_cand = data.X[lab], data.X[cand_rows]
        self._check_boundary(problem.boundary)
        # the problem's constraints in the solvers' candidate order
        solve = problem.constraints.take(np.searchsorted(data.candidates, cand_rows))
        b_solve, self._term = solve.budget, solve.boundary
        y_pm = np.where(data.y[lab] == 1, 1.0, -1.0)

        w, b, b_svm = shifted_svm_start(X_lab, y_pm, X_cand, b_solve, C)
        # With unequal costs the selection's size is about what the start buys.
        bought = None if b_solve.card is not None else int(b_solve.select(X_cand @ w + b).size)
        cons = replace(solve, expected_cells=bought)
        k = cons.n_cells
        self.init_objective_ = hinge_objective(w, b, X_lab, y_pm, C)
        laddered = self.ladder == "mean" and self.solver == "fd"
        if laddered and not money and not self.boundary_penalty:
            w, b, history = self._ladder_mean((X_lab, y_pm, X_cand, cons, C), (w, b, b_svm))
        else:
            w, b, history = self._fit_local(X_lab, y_pm, X_cand, cons, C, w, b)
            self.ladder_budgets_ = (k,)
        self.status_ = "local"
        if self.solver == "mip":
            w, b = self._fit_mip(X_lab, y_pm, X_cand, cons, C, w, b)
        self.coef_ = np.asarray(w, dtype=np.float64)
        self.intercept_ = float(b)
        self.objective_ = hinge_objective(self.coef_, self.intercept_, X_lab, y_pm, C)
        self.objective_history_ = history
        spread = X_cand @ self.coef_
        self.score_spread_ = float(spread.max() - spread.min())
        self.trivial_ = bool(self.score_spread_ < TRIVIAL_SPREAD)
        self._select(problem)
        self._select_set(data, cand_rows)
        sel_pos = np.searchsorted(data.candidates, self.selected_)
        self.selected_cost_ = float(bud.cost[sel_pos].sum())
        self.budget_ = bud.budget
        self.runtime_ = time.perf_counter() - t0
        return self

    def _check_boundary(self, boundary: Boundary | None) -> None:
        """Refuse a boundary penalty without a boundary, or with a solver that ignores it."""
        lam = check_positive_real(self.boundary_penalty, "boundary_penalty", allow_zero=True)
        if boundary is None:
            if lam > 0:
                raise InvalidInputError(
                    f"boundary_penalty={self.boundary_penalty!r} needs boundary= in fit (a "
                    "reserve.solvers.Boundary over the rows of X); pass it, or leave the "
                    "penalty at 0"
                )
            return
        if lam > 0 and self.solver == "mip" and self.mip_solver not in ("auto", "scip", "bnb"):
            raise InvalidInputError(
                f"boundary_penalty > 0 is solved exactly by SCIP or the branch and bound only "
                f"(received mip_solver={self.mip_solver!r}); pass mip_solver='scip', 'bnb' "
                "or 'auto'"
            )
        if lam > 0 and not self.polish:
            raise InvalidInputError(
                "boundary_penalty > 0 needs polish=True: the feasible-direction method alone "
                "does not see the boundary (nor the exact solvers' start); pass polish=True"
            )

    def _select_set(self, data: object, cand_rows: np.ndarray) -> None:
        """With a boundary penalty, select the set the search chose; record its boundary."""
        term = self._term
        if term is None:
            self.boundary_length_ = float("nan")
            return
        in_S = np.zeros(term.m, dtype=bool)
        lam = float(self.boundary_penalty)
        if lam > 0 and self._chosen is not None:
            in_S[self._chosen] = True
            rows = cand_rows[self._chosen]
            score = data.X[rows] @ self.coef_ + self.intercept_
            self.selected_ = rows[np.lexsort((rows, -score))]
        else:
            where = {int(r): i for i, r in enumerate(cand_rows)}
            in_S[[where[int(r)] for r in self.selected_]] = True
        self.boundary_length_ = term.length(in_S)
        self.objective_ += lam * self.boundary_length_

    def _ladder_mean(self, problem: tuple, start: tuple) -> tuple:
        """``ladder="mean"``: the mean of the fits at ``k`` and its ladder budgets.

        ``problem`` is ``(X_lab, y_pm, X_cand, constraints, C)`` (a cell budget of ``k``),
        ``start`` the shifted SVM at ``k`` ``(w, b, b_svm)`` (``b_svm`` the unshifted
        intercept). The fits are independent and share ``n_jobs`` processors. Returns
        ``(w, b, history)``; the attributes FD and the polish set (``fd_objective_``,
        ``n_iter_``, ...) and the history are those of the fit at ``k``, which is returned as
        it is when no other budget is on the ladder.
        """
        X_lab, y_pm, X_cand, cons, C = problem
        w_svm, b_k, b_svm = start
        k, m = cons.n_cells, X_cand.shape[0]
        tasks, budgets = [(cons, b_k)], [k]
        for rung in ladder_budgets(k, m):
            if rung != k:
                rb = Budget.cells(rung, m)
                b0 = shifted_intercept_budget(b_svm, X_cand @ w_svm, rb.cost, rb.budget)
                tasks.append((replace(cons, budget=rb), b0))
                budgets.append(rung)
        jobs = effective_n_jobs(self.n_jobs)
        problems = [(X_lab, y_pm, X_cand, rc, C, w_svm, b0) for rc, b0 in tasks]
        fits = fork_map(self._fit_local_state, problems, jobs)
        (w, b, history), state = fits[0]
        for name, value in state.items():
            setattr(self, name, value)
        self.ladder_budgets_ = tuple(budgets)
        if len(fits) == 1:
            return w, b, history
        w = np.mean([fit[0][0] for fit in fits], axis=0)
        b = best_intercept(X_lab @ w, y_pm, C)
        bud = cons.budget
        return w, shifted_intercept_budget(b, X_cand @ w, bud.cost, bud.budget), history

    def _fit_local_state(self, *problem) -> tuple:
        """:meth:`_fit_local`'s ``(w, b, history)`` and the attributes it set (for a worker).

        The ladder's fits share the processors, so each uses one BLAS thread.
        """
        with one_blas_thread():
            out = self._fit_local(*problem)
        return out, {name: getattr(self, name) for name in _LOCAL_STATE}

    def _fd(self, X_lab, y_pm, X_cand, cons, C, w, b):
        """The feasible-direction method from ``(w, b)`` with this TTK's settings."""
        return feasible_direction(
            X_lab,
            y_pm[:, None],
            X_cand,
            cons,
            C,
            w[None, :],
            np.array([b], dtype=np.float64),
            max_iter=self.max_iter,
            step_shrink=self.step_shrink,
            boundary_rtol=self.boundary_rtol,
            tol=self.tol,
        )

    def _fit_local(self, X_lab, y_pm, X_cand, cons, C, w, b):
        """Feasible direction from ``(w, b)``, then the polish; ``(w, b, history)``."""
        fd = self._fd(X_lab, y_pm, X_cand, cons, C, w, b)
        w, b = fd.w[0], float(fd.b[0])
        self.fd_objective_ = fd.objective
        self.n_iter_ = fd.n_iter
        self.stop_reason_ = fd.stop_reason
        history = list(fd.history)
        self.n_swaps_ = 0
        self.polish_stop_ = "off"
        term, lam = cons.boundary, cons.boundary_penalty
        self._chosen = None if term is None else cons.budget.select(X_cand @ w + b)
        if self.polish:
            pol = polish(
                X_lab,
                y_pm[:, None],
                X_cand,
                cons,
                C,
                w[None, :],
                np.array([b], dtype=np.float64),
                max_rounds=self.polish_max_rounds,
                max_pairs=self.polish_pairs,
                tol=self.tol,
            )
            fd_total = fd.objective
            if term is not None and lam > 0:
                fd_total += lam * term.length(np.isin(np.arange(term.m), self._chosen))
            # The polish starts from the FD point's own set, so it cannot be worse; keep FD's
            # point if the QP solver's rounding made it so by a hair.
            if pol.objective <= fd_total:
                w, b = pol.w[0], float(pol.b[0])
                history.extend(pol.history[1:])
                self._chosen = pol.selected if term is not None else None
            self.n_swaps_ = pol.n_swaps
            self.polish_stop_ = pol.stop_reason
        return w, b, history

    def _fit_mip(
        self,
        X_lab: np.ndarray,
        y_pm: np.ndarray,
        X_cand: np.ndarray,
        cons: Constraints,
        C: float,
        w: np.ndarray,
        b: float,
    ) -> tuple[np.ndarray, float]:
        from reserve.solvers._mip import solve_ttk_mip

        start = (w[None, :], np.array([b], dtype=np.float64))
        if cons.boundary is not None and cons.boundary_penalty > 0:
            return self._fit_boundary_mip(X_lab, y_pm, X_cand, cons, C, start)
        res = solve_ttk_mip(
            X_lab,
            y_pm[:, None],
            X_cand,
            cons,
            C,
            warm_start=start,
            time_limit=float(self.time_limit),
            mip_gap=float(self.mip_gap),
            threads=int(self.threads),
            solver=self.mip_solver,
        )
        self._record_mip(res)
        return res.w[0], float(res.b[0])

    def _record_mip(self, res: object) -> None:
        self.status_ = res.status
        self.bound_ = res.bound
        self.gap_ = res.gap
        self.n_nodes_ = res.n_nodes
        self.mip_solver_ = res.solver
        self.mip_runtime_ = res.runtime

    def _fit_boundary_mip(self, X_lab, y_pm, X_cand, cons, C, start):
        """The exact fit with the boundary penalty (SCIP, or the branch and bound), from the
        polish's set; ``start`` is ``(w[None], [b])``."""
        from reserve.solvers._mip_boundary import solve_boundary_bnb, solve_boundary_mip

        solve = solve_boundary_bnb if self.mip_solver == "bnb" else solve_boundary_mip
        limits = float(self.time_limit), float(self.mip_gap)
        res = solve(X_lab, y_pm[:, None], X_cand, cons, C, start, self._chosen, *limits)
        self._record_mip(res)
        self._chosen = res.selected
        return res.w[0], float(res.b[0])
