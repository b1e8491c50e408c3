"""Several species with targets: a joint plan over calibrated occupancy probabilities.

``P`` (n, S) holds the probability that species ``s`` occupies free candidate ``i``; a plan
``x in {0, 1}^n`` within the budget (exactly ``k`` cells, or total cost ``<= B``) expects
``e_s = base_s + sum_i P_is x_i`` occupied cells of species ``s``. With targets ``T_s`` the plan
is hierarchical, as in prioritizr's minimum-shortfall then maximum-utility objectives:

1. minimise ``F(x) = sum_s a_s u_s`` with ``a_s = w_s / T_s``, ``u_s >= T_s - e_s``,
   ``u_s >= 0`` (species without a target do not enter);
2. maximise ``U(x) = sum_s w_s e_s`` subject to ``F(x) <= F* + tol`` with
   ``tol = STAGE_TOLERANCE * max(1, F*)``.

A cell counts for every species it serves, so the selection is joint (complementarity).

Two solvers:

* **exact** (``solver="scip"``): both stages as mixed-integer programs, one binary per row and
  one continuous shortfall per species, solved by SCIP; its dual bounds are reported;
* **bounded** (``solver="lp-rounding"``): the linear relaxation of each stage, solved by
  column generation (HiGHS on a working set of rows, every row priced against the duals; only
  ``S + 2`` coupling rows, so few rows are ever needed). The Lagrangian of the relaxation at
  the duals, evaluated over *all* rows in closed form (a top-``k`` sum, or a fractional
  knapsack), is a proven bound whatever the LP's tolerances. The plan rounds the stage-2
  relaxation (its basic optimum has at most ``S + 2`` fractional rows): integral rows fixed,
  the rest completed greedily (shortfall first, then utility), then a swap polish that never
  worsens the stage-1 objective.

Without targets the plan maximises the utility; for a cell budget that is the top ``k`` of
``P @ w`` (ties by lower row), exact (``solver="top-k"``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from reserve.errors import InvalidInputError, MissingDependencyError, SolverError

__all__ = [
    "EXACT_MAX_ROWS",
    "STAGE_TOLERANCE",
    "SpeciesPlan",
    "plan_species",
    "reachable",
    "shortfall_objective",
]

#: Stage 2 keeps ``F(x) <= F* + STAGE_TOLERANCE * max(1, F*)``.
STAGE_TOLERANCE = 1e-6
#: ``exact=None`` runs SCIP when ``n * S`` is at most this (benchmarks/results/targets.md).
EXACT_MAX_ROWS = 10_000
_MET_TOL = 1e-9
_FIT_TOL = 1e-12  # the package's "fits the budget" tolerance
_MAX_ROUNDS = 60
_SWAP_POOL = 200
_MAX_SWAPS = 200


@dataclass(frozen=True)
class SpeciesPlan:
    """A joint plan for several species (:func:`plan_species`).

    Attributes
    ----------
    selected : ndarray of int64
        Sorted row indices of ``P`` chosen.
    expected : ndarray of shape (S,)
        Expected occupied cells among the chosen: ``base + P[selected].sum(0)``.
    targets : ndarray of shape (S,)
        Absolute targets as given (NaN: none).
    shortfall : ndarray of shape (S,)
        ``max(0, target - expected)`` (0 where no target).
    met : ndarray of bool, shape (S,)
        ``expected >= target`` up to a tiny tolerance (True where no target).
    shortfall_objective : float
        ``sum_s w_s * shortfall_s / target_s`` over species with a target (0 if none).
    utility : float
        ``sum_s w_s * expected_s``.
    shortfall_bound : float
        Proven lower bound on the stage-1 (shortfall) optimum.
    utility_bound : float
        Proven upper bound on the utility of any plan whose shortfall objective is at most
        this plan's (plus ``STAGE_TOLERANCE``).
    gap : float
        The larger of the utility stage's relative gap ``(utility_bound - utility) /
        |utility|`` and the shortfall stage's ``(shortfall_objective - shortfall_bound) /
        sum of the weights of species with a target``; 0 when both are proven optimal.
    status : str
        ``"optimal"``, ``"bounded"`` (heuristic plan with proven bounds) or ``"time_limit"``
        (SCIP stopped before proving optimality).
    solver : str
        ``"scip"``, ``"lp-rounding"`` or ``"top-k"`` (cell budget, no targets).
    seconds : float
        Wall time of the call.
    """

    selected: np.ndarray
    expected: np.ndarray
    targets: np.ndarray
    shortfall: np.ndarray
    met: np.ndarray
    shortfall_objective: float
    utility: float
    shortfall_bound: float
    utility_bound: float
    gap: float
    status: str
    solver: str
    seconds: float


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def _check(P, budget, cost, targets, weights, base):
    """Checked float arrays ``(P, budget, cost or None, targets, weights, base)``."""
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] == 0 or P.shape[1] == 0:
        raise InvalidInputError(
            f"P must be a 2-D array (candidates, species) with at least one of each; "
            f"received shape {P.shape}. Pass P[:, None] for one species."
        )
    if not np.isfinite(P).all() or P.min() < 0.0 or P.max() > 1.0:
        raise InvalidInputError(
            "P must hold finite probabilities in [0, 1]; received values from "
            f"{np.nanmin(P):g} to {np.nanmax(P):g} (non-finite: {int((~np.isfinite(P)).sum())}). "
            "Calibrate the scores first."
        )
    n, S = P.shape

    def per_species(name, value, default):
        if value is None:
            return np.full(S, default, dtype=np.float64)
        arr = np.asarray(value, dtype=np.float64)
        if arr.shape != (S,):
            raise InvalidInputError(
                f"{name} must have one value per species, shape ({S},); received shape {arr.shape}."
            )
        return arr

    targets = per_species("targets", targets, np.nan)
    weights = per_species("weights", weights, 1.0)
    base = per_species("base", base, 0.0)
    if np.isinf(targets).any() or (targets < 0).any():
        raise InvalidInputError(
            f"targets must be finite and >= 0 (NaN: no target); received {targets.tolist()}."
        )
    for name, arr in (("weights", weights), ("base", base)):
        if not np.isfinite(arr).all() or (arr < 0).any():
            raise InvalidInputError(f"{name} must be finite and >= 0; received {arr.tolist()}.")
    budget = float(budget)
    if cost is None:
        if not (math.isfinite(budget) and 1 <= int(budget) <= n):
            raise InvalidInputError(
                f"a cell budget must be between 1 and the {n} candidates; received {budget:g}."
            )
        return P, budget, None, targets, weights, base
    cost = np.asarray(cost, dtype=np.float64)
    if cost.shape != (n,) or not np.isfinite(cost).all() or (cost <= 0).any():
        raise InvalidInputError(
            f"cost must hold one finite cost > 0 per row of P, shape ({n},); received shape "
            f"{cost.shape}."
        )
    if not (math.isfinite(budget) and budget >= cost.min()):
        raise InvalidInputError(
            f"a money budget must afford the cheapest candidate ({cost.min():g}); received "
            f"{budget:g}."
        )
    return P, budget, cost, targets, weights, base


# --------------------------------------------------------------------------------------------
# Objectives and closed-form bounds
# --------------------------------------------------------------------------------------------


def shortfall_objective(expected, targets, weights=None) -> float:
    """``sum_s w_s max(0, T_s - e_s) / T_s`` over species with a target (NaN: none).

    A target of 0 is always met and adds nothing.

    Examples
    --------
    >>> shortfall_objective(np.array([1.0, 3.0]), np.array([2.0, np.nan]))
    0.5
    """
    expected = np.asarray(expected, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.float64)
    w = np.ones_like(expected) if weights is None else np.asarray(weights, dtype=np.float64)
    has = np.isfinite(targets) & (targets > 0)
    if not has.any():
        return 0.0
    short = np.maximum(targets[has] - expected[has], 0.0)
    return float((w[has] * short / targets[has]).sum())


def _best_linear(scores, budget, cost) -> float:
    """``max scores . x`` over the budget polytope: the top-``k`` sum (``sum x = k``), or the
    fractional knapsack over the positive scores (``cost . x <= budget``)."""
    if cost is None:
        k = int(budget)
        return float(np.partition(scores, scores.size - k)[scores.size - k :].sum())
    pos = scores > 0
    s, c = scores[pos], cost[pos]
    order = np.argsort(-s / c, kind="stable")
    s, c = s[order], c[order]
    room = budget - np.concatenate([[0.0], np.cumsum(c)[:-1]])
    take = np.clip(room / c, 0.0, 1.0)
    return float((s * take).sum())


def reachable(P, budget, *, cost=None, base=None) -> np.ndarray:
    """The most expected occupied cells each species alone can get within the budget.

    For a cell budget this is exact: ``base + `` the sum of the ``k`` largest probabilities of
    each column. For a money budget it is a proven *upper bound*, the fractional knapsack
    (the linear relaxation: candidates by probability per cost, the last one in part); the
    exact value is a knapsack problem.

    Parameters
    ----------
    P : array-like of shape (n, S)
        Probabilities in [0, 1].
    budget : int or float
        ``k`` cells (``cost`` None), or the money available.
    cost : array-like of shape (n,), optional
        Positive costs.
    base : array-like of shape (S,), optional
        Expected occupied cells already in locked-in cells.

    Returns
    -------
    ndarray of shape (S,)

    Examples
    --------
    >>> reachable(np.array([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]]), 2).tolist()
    [1.4, 1.3]
    """
    P, budget, cost, _, _, base = _check(P, budget, cost, None, None, base)
    return base + np.array([_best_linear(P[:, s], budget, cost) for s in range(P.shape[1])])


def _cover_bound(P, R, a, budget, cost, lam) -> float:
    """Lagrangian lower bound on stage 1 at multipliers ``lam`` clipped to ``[0, a]``."""
    lam = np.clip(lam, 0.0, a)
    return float(lam @ R - _best_linear(P @ lam, budget, cost))


def _utility_bound(P, v, R, a, F, budget, cost, lam, mu) -> float:
    """Lagrangian upper bound on stage 2 (``F(x) <= F``) at ``lam`` clipped to ``[0, mu a]``."""
    mu = max(float(mu), 0.0)
    lam = np.clip(lam, 0.0, mu * a)
    return float(mu * F - lam @ R + _best_linear(v + P @ lam, budget, cost))


# --------------------------------------------------------------------------------------------
# The linear relaxation by column generation
# --------------------------------------------------------------------------------------------


class _Relaxation:
    """One stage's linear relaxation over the rows ``cols`` (the others at 0), grown by pricing.

    Columns: ``x`` over ``cols``, then ``u`` over the target species. Rows: the cover rows
    ``-P x - u <= -R``, optionally ``a . u <= F_cap``, and the budget (``sum x = k`` or
    ``cost . x <= B``).
    """

    def __init__(self, Pt, R, a, v, budget, cost, F_cap=None):
        self.Pt, self.R, self.a, self.v = Pt, R, a, v
        self.budget, self.cost, self.F_cap = budget, cost, F_cap

    def solve(self, cols):
        Pt, R, a, m = self.Pt, self.R, self.a, self.R.size
        nc = cols.size
        stage2 = self.F_cap is not None
        c = np.r_[-self.v[cols], np.zeros(m)] if stage2 else np.r_[np.zeros(nc), a]
        A = np.hstack([-Pt[cols].T, -np.eye(m)])
        b = -R
        if stage2:
            A = np.vstack([A, np.r_[np.zeros(nc), a]])
            b = np.r_[b, self.F_cap]
        kw = {}
        if self.cost is None:
            kw = {"A_eq": np.r_[np.ones(nc), np.zeros(m)][None, :], "b_eq": [float(self.budget)]}
        else:
            A = np.vstack([A, np.r_[self.cost[cols], np.zeros(m)]])
            b = np.r_[b, self.budget]
        bounds = np.array([(0.0, 1.0)] * nc + [(0.0, None)] * m, dtype=object)
        res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs", **kw)
        if res.status != 0:
            raise SolverError(f"HiGHS failed on the relaxation: {res.message}")
        y = res.ineqlin.marginals
        y_budget = float(res.eqlin.marginals[0]) if self.cost is None else float(y[-1])
        lam = -y[:m]
        mu = -float(y[m]) if stage2 else 0.0
        return res.x[:nc], float(res.fun), lam, mu, y_budget

    def reduced_costs(self, lam, y_budget):
        """Reduced cost of every row's ``x`` (negative: it would improve the relaxation)."""
        stage2 = self.F_cap is not None
        obj = -self.v if stage2 else 0.0
        budget_col = 1.0 if self.cost is None else self.cost
        return obj + self.Pt @ lam - budget_col * y_budget


def _grow(rel, cols, deadline):
    """Column generation: solve on ``cols``, add the most negative reduced costs, repeat."""
    n = rel.Pt.shape[0]
    batch = max(100, 4 * rel.R.size)
    for _ in range(_MAX_ROUNDS):
        x, fun, lam, mu, yb = rel.solve(cols)
        rc = rel.reduced_costs(lam, yb)
        inside = np.zeros(n, dtype=bool)
        inside[cols] = True
        rc[inside] = 0.0
        tol = 1e-9 * (1.0 + np.abs(rc).max())
        cand = np.flatnonzero(rc < -tol)
        if cand.size == 0 or time.perf_counter() > deadline:
            break
        add = cand[np.argsort(rc[cand], kind="stable")[:batch]]
        cols = np.sort(np.concatenate([cols, add]))
    return cols, x, fun, lam, mu


def _start_cols(P, score, budget, cost):
    """Rows a relaxation starts from: the best by ``score`` (per cost), about twice a plan."""
    n = P.shape[0]
    pad = 50 + 4 * P.shape[1]
    if cost is None:
        count = min(n, 2 * int(budget) + pad)
        return np.sort(np.argsort(-score, kind="stable")[:count])
    order = np.argsort(-score / cost, kind="stable")
    count = int(np.searchsorted(np.cumsum(cost[order]), 2.0 * budget)) + pad
    return np.sort(order[: min(n, count)])


# --------------------------------------------------------------------------------------------
# Rounding
# --------------------------------------------------------------------------------------------


def _F_of(cover, R, a):
    """Stage-1 objective of coverages ``cover`` (..., m) (``R``: targets less base)."""
    return (a * np.maximum(R - cover, 0.0)).sum(axis=-1)


def _better(F_new, U_new, F, U):
    """Lexicographic improvement: lower shortfall, else equal shortfall and higher utility."""
    eps_f = 1e-12 * (1.0 + abs(F))
    eps_u = 1e-12 * (1.0 + abs(U))
    return (F_new < F - eps_f) | ((F_new <= F + eps_f) & (U_new > U + eps_u))


def _complete(Pt, R, a, v, chosen, budget, cost):
    """Add rows greedily: largest shortfall reduction (per cost), then utility (per cost)."""
    n = Pt.shape[0]
    spent = 0.0 if cost is None else float(cost[chosen].sum())
    while True:
        free = ~chosen
        if cost is None:
            if chosen.sum() >= int(budget):
                return chosen
        else:
            free &= cost <= budget * (1 + _FIT_TOL) - spent
        idx = np.flatnonzero(free)
        if idx.size == 0:
            return chosen
        cover = Pt[chosen].sum(0)
        F = _F_of(cover, R, a)
        gain = F - _F_of(cover + Pt[idx], R, a)
        per = 1.0 if cost is None else cost[idx]
        if gain.max() > 1e-15:
            i = idx[np.argmax(gain / per)]
        elif cost is not None and v[idx].max() <= 0:
            return chosen
        else:
            i = idx[np.argmax(v[idx] / per)]
        chosen[i] = True
        if cost is not None:
            spent += cost[i]
        if n == 0:
            return chosen


def _polish(Pt, R, a, v, chosen, budget, cost, rank, deadline):
    """Best swap among the ``_SWAP_POOL`` worst chosen and best unchosen rows by ``rank``,
    repeated while it improves (lexicographically; the shortfall never rises)."""
    cover = Pt[chosen].sum(0)
    F, U = float(_F_of(cover, R, a)), float(v[chosen].sum())
    for _ in range(_MAX_SWAPS):
        if time.perf_counter() > deadline:
            break
        ins, outs = np.flatnonzero(~chosen), np.flatnonzero(chosen)
        if ins.size == 0 or outs.size == 0:
            break
        ins = ins[np.argsort(-rank[ins], kind="stable")[:_SWAP_POOL]]
        outs = outs[np.argsort(rank[outs], kind="stable")[:_SWAP_POOL]]
        new = cover[None, None, :] - Pt[outs][:, None, :] + Pt[ins][None, :, :]
        Fn = _F_of(new, R, a)
        Un = U - v[outs][:, None] + v[ins][None, :]
        ok = _better(Fn, Un, F, U)
        if cost is not None:
            spent = cost[chosen].sum()
            ok &= spent - cost[outs][:, None] + cost[ins][None, :] <= budget * (1 + _FIT_TOL)
        if not ok.any():
            break
        # Best move: lowest shortfall, then highest utility, then first pair.
        key = np.where(ok, Fn, np.inf)
        fmin = key.min()
        tie = ok & (Fn <= fmin + 1e-12 * (1 + abs(fmin)))
        o, i = np.unravel_index(np.argmax(np.where(tie, Un, -np.inf)), Fn.shape)
        chosen[outs[o]], chosen[ins[i]] = False, True
        cover = cover - Pt[outs[o]] + Pt[ins[i]]
        F, U = float(_F_of(cover, R, a)), float(v[chosen].sum())
    return chosen


# --------------------------------------------------------------------------------------------
# The two solvers
# --------------------------------------------------------------------------------------------


def _heuristic(P, v, R, a, tg, budget, cost, deadline):
    """LP rounding; ``(chosen mask, shortfall bound, stage-2 duals (lam, mu))``."""
    Pt = P[:, tg]
    m = tg.size
    lam1 = np.zeros(m)
    F_lp, F_bound = 0.0, 0.0
    cols = _start_cols(P, v + Pt @ a, budget, cost)
    if m:
        rel1 = _Relaxation(Pt, R, a, v, budget, cost)
        cols, _, F_lp, lam1, _ = _grow(rel1, cols, deadline)
        F_bound = max(_cover_bound(Pt, R, a, budget, cost, lam1), 0.0)
    F_cap = F_lp + STAGE_TOLERANCE * max(1.0, F_lp)
    rel2 = _Relaxation(Pt, R, a, v, budget, cost, F_cap if m else None)
    if not m:
        rel2.F_cap = None
    cols, x, _, lam2, mu2 = _grow(rel2, cols, deadline)
    chosen = np.zeros(P.shape[0], dtype=bool)
    chosen[cols[x >= 1.0 - 1e-7]] = True
    if cost is None and chosen.sum() > int(budget):  # degenerate LP output: keep the best k
        keep = cols[np.argsort(-x, kind="stable")[: int(budget)]]
        chosen[:] = False
        chosen[keep] = True
    if cost is not None and cost[chosen].sum() > budget * (1 + _FIT_TOL):
        chosen[:] = False
    chosen = _complete(Pt, R, a, v, chosen, budget, cost)
    rank = v + Pt @ lam2 if m else v.copy()
    if cost is not None:
        rank = rank / cost
    chosen = _polish(Pt, R, a, v, chosen, budget, cost, rank, deadline)
    F_h = float(_F_of(Pt[chosen].sum(0), R, a))
    if m and F_h > F_cap:
        # The utility bound is over plans no worse than this one: re-solve at its shortfall.
        rel2.F_cap = F_h + STAGE_TOLERANCE * max(1.0, F_h)
        _, _, _, lam2, mu2 = _grow(rel2, cols, deadline)
    return chosen, F_bound, (lam2, mu2 if m else 0.0)


def _scip_stage(P, v, R, a, tg, budget, cost, F_cap, start, time_limit):
    """One SCIP stage: ``(chosen mask, dual bound, status)``; stage 2 when ``F_cap`` given."""
    try:
        import pyscipopt
    except ImportError:
        raise MissingDependencyError(
            "exact=True needs SCIP through pyscipopt, which is not installed. Install it with:\n"
            "pip install pyscipopt\n(or pass exact=False for the bounded heuristic)."
        ) from None
    n, m = P.shape[0], tg.size
    mdl = pyscipopt.Model("targets")
    mdl.hideOutput()
    mdl.setParam("limits/time", max(time_limit, 0.01))
    mdl.setParam("randomization/randomseedshift", 0)
    x = [mdl.addVar(vtype="B", name=f"x{i}") for i in range(n)]
    u = [mdl.addVar(lb=0.0, name=f"u{s}") for s in range(m)]
    for j, s in enumerate(tg):
        col = P[:, s]
        nz = np.flatnonzero(col)
        mdl.addCons(u[j] + pyscipopt.quicksum(float(col[i]) * x[i] for i in nz) >= float(R[j]))
    if cost is None:
        mdl.addCons(pyscipopt.quicksum(x) == int(budget))
    else:
        mdl.addCons(pyscipopt.quicksum(float(c) * x[i] for i, c in enumerate(cost)) <= budget)
    shortfall = pyscipopt.quicksum(float(a[j]) * u[j] for j in range(m))
    if F_cap is None:
        mdl.setObjective(shortfall, "minimize")
    else:
        if m:
            mdl.addCons(shortfall <= F_cap)
        mdl.setObjective(pyscipopt.quicksum(float(v[i]) * x[i] for i in range(n)), "maximize")
    sol = mdl.createSol()
    cover = P[start][:, tg].sum(0)
    for i in np.flatnonzero(start):
        mdl.setSolVal(sol, x[i], 1.0)
    for j in range(m):
        mdl.setSolVal(sol, u[j], float(max(R[j] - cover[j], 0.0)))
    mdl.addSol(sol, free=True)
    mdl.optimize()
    status = str(mdl.getStatus())
    if mdl.getNSols() == 0:
        raise SolverError(f"SCIP found no plan (status {status}).")
    best = mdl.getBestSol()
    chosen = np.array([mdl.getSolVal(best, xi) > 0.5 for xi in x])
    return chosen, float(mdl.getDualbound()), "optimal" if status == "optimal" else "time_limit"


def plan_species(
    P,
    budget,
    *,
    cost=None,
    targets=None,
    weights=None,
    base=None,
    exact=None,
    time_limit=60.0,
    random_state=0,
) -> SpeciesPlan:
    """Choose candidates jointly for several species: targets first, then utility.

    Parameters
    ----------
    P : array-like of shape (n, S)
        Calibrated occupancy probabilities in [0, 1], one row per free candidate.
    budget : int or float
        ``k`` cells to choose exactly (``cost`` None, ``1 <= k <= n``), or the money
        available (total cost ``<= budget``).
    cost : array-like of shape (n,), optional
        Positive candidate costs (money budget).
    targets : array-like of shape (S,), optional
        Absolute targets in expected occupied cells (NaN: none). None: no targets.
    weights : array-like of shape (S,), optional
        Species weights ``w_s >= 0`` (default 1).
    base : array-like of shape (S,), optional
        Expected occupied cells already in locked-in cells (default 0).
    exact : bool or None, default=None
        True: SCIP; False: LP rounding; None: SCIP when ``n * S <= EXACT_MAX_ROWS``.
    time_limit : float, default=60.0
        Seconds for the whole call (SCIP's limit; the heuristic stops refining at it).
    random_state : int, default=0
        Accepted for the estimator convention; every step is deterministic.

    Returns
    -------
    SpeciesPlan
        Every figure recomputed from ``selected``.

    Raises
    ------
    InvalidInputError
        Shapes that do not match, ``P`` outside [0, 1] or not finite, negative weights,
        targets or base, a budget out of range.

    Examples
    --------
    >>> P = np.array([[0.9, 0.0], [0.8, 0.0], [0.0, 0.6], [0.5, 0.5]])
    >>> plan = plan_species(P, 2, targets=[1.0, 0.5])
    >>> plan.selected.tolist(), plan.met.tolist(), plan.status
    ([0, 3], [True, True], 'optimal')
    """
    t0 = time.perf_counter()
    P, budget, cost, targets, weights, base = _check(P, budget, cost, targets, weights, base)
    n, S = P.shape
    has = np.isfinite(targets) & (targets > 0)
    tg = np.flatnonzero(has)
    a = weights[tg] / targets[tg]
    R = targets[tg] - base[tg]
    v = P @ weights
    deadline = t0 + float(time_limit)
    use_exact = (n * S <= EXACT_MAX_ROWS) if exact is None else bool(exact)

    if tg.size == 0 and cost is None:
        chosen = np.zeros(n, dtype=bool)
        chosen[np.lexsort((np.arange(n), -v))[: int(budget)]] = True
        U = float(v[chosen].sum() + weights @ base)
        return _plan(chosen, P, targets, weights, base, 0.0, U, "optimal", "top-k", t0)

    chosen, F_bound, (lam2, mu2) = _heuristic(P, v, R, a, tg, budget, cost, deadline)
    cover = P[chosen][:, tg].sum(0)
    F_h = float(_F_of(cover, R, a))
    if not use_exact:
        F_cap = F_h + STAGE_TOLERANCE * max(1.0, F_h)
        U_bound = _utility_bound(P[:, tg], v, R, a, F_cap, budget, cost, lam2, mu2)
        U_bound += float(weights @ base)
        F_bound = min(F_bound, F_h)
        return _plan(
            chosen, P, targets, weights, base, F_bound, U_bound, "bounded", "lp-rounding", t0
        )

    status = "optimal"
    if tg.size:
        chosen, F_dual, st1 = _scip_stage(
            P, v, R, a, tg, budget, cost, None, chosen, deadline - time.perf_counter()
        )
        F_h = float(_F_of(P[chosen][:, tg].sum(0), R, a))
        F_bound = F_h if st1 == "optimal" else min(max(F_dual, F_bound), F_h)
        status = st1
    F_cap = F_h + STAGE_TOLERANCE * max(1.0, F_h)
    chosen, U_dual, st2 = _scip_stage(
        P, v, R, a, tg, budget, cost, F_cap, chosen, deadline - time.perf_counter()
    )
    U = float(v[chosen].sum())
    U_bound = U if st2 == "optimal" else max(U_dual, U)
    if st2 != "optimal":
        status = st2
    U_bound += float(weights @ base)
    return _plan(chosen, P, targets, weights, base, F_bound, U_bound, status, "scip", t0)


def _plan(chosen, P, targets, weights, base, F_bound, U_bound, status, solver, t0):
    """The :class:`SpeciesPlan` of ``chosen``, every figure recomputed from it."""
    selected = np.flatnonzero(chosen).astype(np.int64)
    expected = base + P[selected].sum(0)
    has = np.isfinite(targets) & (targets > 0)
    shortfall = np.where(has, np.maximum(np.nan_to_num(targets) - expected, 0.0), 0.0)
    met = ~has | (expected >= np.nan_to_num(targets) - _MET_TOL * np.maximum(1.0, expected))
    F = shortfall_objective(expected, targets, weights)
    U = float(weights @ expected)
    F_bound, U_bound = min(float(F_bound), F), max(float(U_bound), U)
    w_t = float(weights[has].sum())
    gap_f = (F - F_bound) / w_t if w_t > 0 else 0.0
    gap_u = (U_bound - U) / abs(U) if U != 0 else (0.0 if U_bound <= 0 else math.inf)
    return SpeciesPlan(
        selected=selected,
        expected=expected,
        targets=targets,
        shortfall=shortfall,
        met=met,
        shortfall_objective=F,
        utility=U,
        shortfall_bound=F_bound,
        utility_bound=U_bound,
        gap=float(max(gap_f, gap_u, 0.0)),
        status=status,
        solver=solver,
        seconds=time.perf_counter() - t0,
    )
