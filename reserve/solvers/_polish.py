"""Polish: a swap local search that carries a TTK solution to the optimum of its neighbourhood.

For a fixed set ``S`` of ``k`` candidates allowed to score positive, TTK is a convex QP (every
other candidate must score ``<= 0``; see :mod:`reserve.solvers._qp`). The global optimum is the
best ``S``. Starting from the top ``k`` of the feasible-direction solution, we solve the QP for
``S`` and then try swaps ``S - {i} + {j}``:

* outsiders ``j`` in decreasing order of their constraint's multiplier ``beta_j`` (the first-order
  gain of letting ``j`` score positive; ``beta_j = 0`` means no gain, so they are never tried);
* insiders ``i`` in increasing order of score (an insider already scoring ``<= 0`` costs nothing
  to give up).

Pairs are tried along anti-diagonals of that ranking (best outsider with best insider first),
the first swap that lowers the objective is accepted, and the search stops when ``max_pairs``
pairs in a row bring nothing or no constraint is active (then the QP optimum is the plain SVM,
the global optimum), or after ``max_rounds`` accepted swaps; ``PolishResult.stop_reason`` says
which (``"no_improving_swap"`` or ``"max_rounds"``).

With a money budget (costs ``c_j``, budget ``B``) ``S`` is any set whose cost fits ``B``. The
start is :func:`reserve.solvers._base.budget_select` of the start scores. A pair ``(i, j)`` is
the swap ``S - {i} + {j}`` when ``cost(S) - c_i + c_j`` fits; when it does not, further
insiders are dropped too, lowest score first, until ``j`` fits (a 1-for-1 swap cannot bring
in a candidate dearer than any insider plus the budget left over: on 30 tiny random instances
plain swaps left 2 at 1.7% and 17% above the optimum, with this move all 30 are within 0.1%
of it). The trial set is
then filled greedily with further outsiders that still fit (positive-multiplier outsiders by
decreasing ``beta``, then the rest by decreasing score; skip what does not fit), since letting
one more candidate score positive removes a constraint and can only lower the QP optimum.
With unit costs every swap fits as it is and nothing ever fits on top (``S`` is full), so the
search takes exactly the cell-budget path.

With many candidates the QP keeps only the outsiders near the boundary (constraint
generation): it adds every violated outsider and re-solves until none is violated.

Speed with many candidates: every candidate's score is computed once per accepted solution
(a :class:`CandidateScreen`); a trial QP's solution is checked against the working set of the
candidates nearest the boundary only, the others being vouched for by the Cauchy-Schwarz bound
the feasible-direction method uses (``|z~ . (v - v_ref)| <= ||z~|| ||v - v_ref||`` with
``z~ = (z, 1)``, ``v = (w, b)``). When the bound cannot vouch for them, every candidate is
checked. The screened and the full check find the same violated rows, so the search takes the
same path either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice

import numpy as np

from reserve.solvers._base import greedy_fit, top_k
from reserve.solvers._fd import augmented_norms, working_set
from reserve.solvers._hinge import species_objectives, species_weights
from reserve.solvers._qp import CuttingPlaneState, QPResult, hinge_objective, solve_fixed_set
from reserve.solvers.boundary import Boundary
from reserve.solvers.budget import Budget
from reserve.solvers.constraints import Constraints

__all__ = [
    "POLISH_STOPS",
    "CandidateScreen",
    "PolishResult",
    "polish",
    "solve_subset",
    "swap_pairs",
]

#: From this many labelled rows the polish's QPs on narrow rows use the cutting plane: its
#: cuts carry over from solve to solve and a lower bound can reject a trial early (spambase,
#: n = 2,300: one fit 121 s on Clarabel, 39 s on the cutting plane before early rejection).
#: Wide rows (a spline map) keep the dense interior point (``solve_fixed_set``).
_POLISH_CP_MIN_ROWS = 1000

#: Below this many candidates the QP carries every outsider's constraint.
_FULL_CONSTRAINTS = 400
#: Candidates in the screen's working set: ``max(_SCREEN_PER_K * k, _SCREEN_MIN)``.
_SCREEN_PER_K = 20
_SCREEN_MIN = 4096


class CandidateScreen:
    """Candidate scores at a reference point and a working set vouched for by Cauchy-Schwarz.

    The candidates outside the working set satisfy ``s_ref_j / ||z~_j|| <= -tau``, so at any
    ``v`` with ``||v - v_ref|| < tau`` they score below zero and cannot violate a constraint
    nor be the highest-scoring outsider when that one is positive.

    Parameters
    ----------
    X_cand : ndarray of shape (m, d)
        Candidate rows (not copied).
    size : int
        Rows in the working set.

    Attributes
    ----------
    scores : ndarray of shape (m,)
        ``X_cand @ w_ref + b_ref``.
    idx : ndarray of int
        Working-set rows, increasing.
    tau : float
        Radius around ``v_ref`` within which the rows outside ``idx`` stay negative
        (``inf`` when the working set is every row, ``-inf`` when no bound holds).
    x_max : float
        ``max |X_cand|`` (the scale of the violation tolerance), computed once.
    n_refresh, n_full_checks : int
        Reference points taken; trial solutions the bound could not vouch for.

    Examples
    --------
    >>> import numpy as np
    >>> Z = np.array([[1.0], [0.0], [-1.0], [-3.0]])
    >>> scr = CandidateScreen(Z, 3)
    >>> scr.refresh(np.array([1.0]), 0.0)
    >>> scr.idx.tolist(), round(scr.tau, 3), scr.vouches(np.array([1.1]), 0.0)
    ([0, 1, 2], 0.707, True)
    >>> scr = CandidateScreen(Z, 2)  # a row at score 0 is left out: tau = 0 vouches for nothing
    >>> scr.refresh(np.array([1.0]), 0.0)
    >>> scr.vouches(np.array([1.0]), 0.0)
    False
    """

    def __init__(self, X_cand: np.ndarray, size: int) -> None:
        self.X = X_cand
        self.m = X_cand.shape[0]
        self.size = int(min(max(size, 1), self.m))
        self.norm = augmented_norms(X_cand)
        # max |X_cand| without the copy np.abs would make.
        self.x_max = max(float(X_cand.max()), -float(X_cand.min())) if self.m else 0.0
        self.n_refresh = 0
        self.n_full_checks = 0
        self.tau = -np.inf

    def refresh(self, w: np.ndarray, b: float) -> None:
        """Score every candidate at ``(w, b)`` and rebuild the working set around it."""
        self.scores = self.X @ w + b
        self.v_ref = np.r_[w, b]
        self.n_refresh += 1
        # A non-positive tau vouches for nothing: vouches() then says so.
        self.idx, self.tau = working_set(self.scores, self.norm, self.size)
        self.Z = np.ascontiguousarray(self.X[self.idx])

    def vouches(self, w: np.ndarray, b: float) -> bool:
        """Whether every row outside the working set scores below zero at ``(w, b)``."""
        if self.tau == np.inf:
            return True
        if not self.tau > 0.0:
            return False
        v = np.r_[w, b]
        dv = float(np.linalg.norm(v - self.v_ref))
        # A margin for the rounding of the scores (relative 1e-12 of the point's size).
        slack = 1e-12 * (float(np.linalg.norm(v)) + float(np.linalg.norm(self.v_ref)))
        return dv + slack < self.tau

    def outsider_scores(
        self, w: np.ndarray, b: float, in_S: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows not in S that may score positive at ``(w, b)`` and their scores.

        The working set's outsiders when the bound vouches for the rest, else every outsider.
        """
        if self.vouches(w, b):
            rows = self.idx[~in_S[self.idx]]
            return rows, self.Z[~in_S[self.idx]] @ w + b
        self.n_full_checks += 1
        out = np.flatnonzero(~in_S)
        return out, (self.X @ w)[out] + b


def _top_rows(hint: np.ndarray, rows: np.ndarray, n0: int) -> np.ndarray:
    """The ``n0`` entries of ``rows`` with the largest ``hint``, ties to the lower row; sorted."""
    if n0 >= rows.size:
        return np.sort(rows)
    return np.sort(rows[top_k(hint[rows], n0)])


#: Why the polish stopped: no swap among ``max_pairs`` tried pairs improved (a local optimum of
#: the swap neighbourhood as far as it was searched), or ``max_rounds`` swaps were accepted and
#: the search was cut short (a better swap may remain).
POLISH_STOPS = ("no_improving_swap", "max_rounds")


@dataclass
class PolishResult:
    """Outcome of the polish: ``w`` of shape (S, d), ``b`` of shape (S,).

    ``stop_reason`` is one of :data:`POLISH_STOPS`.
    """

    w: np.ndarray
    b: np.ndarray
    objective: float
    selected: np.ndarray
    stop_reason: str = "no_improving_swap"
    n_swaps: int = 0
    n_qp: int = 0
    history: list[float] = field(default_factory=list)
    n_refresh: int = 0
    n_full_checks: int = 0
    boundary: float = 0.0
    selected_mask: np.ndarray | None = field(default=None, repr=False)


class _Penalty:
    """``penalty * B(S)`` in the polish: its value, and how it reorders the swaps.

    Outsiders are tried by ``beta_j - penalty * dB_add(j)`` (their multiplier less what they
    add to the boundary), which brings in neighbours of the selection as well as the cells
    whose constraints bind; insiders by ``score_i + penalty * dB_drop(i)`` (a lone cell, whose
    departure shortens the boundary, before a cell inside a patch).
    """

    def __init__(self, term: Boundary, penalty: float) -> None:
        self.term, self.penalty = term, float(penalty)

    def value(self, in_S: np.ndarray) -> float:
        return self.penalty * self.term.length(in_S)

    def outsiders(self, in_S: np.ndarray, beta: np.ndarray, beta_tol: float) -> np.ndarray:
        gain = beta - self.penalty * self.term.add_cost(in_S)
        near = self.term.link(in_S) > 0
        outs = np.flatnonzero(~in_S & ((beta > beta_tol) | near))
        return outs[np.lexsort((outs, -gain[outs]))]

    def insider_key(self, key: np.ndarray, in_S: np.ndarray) -> np.ndarray:
        return key + self.penalty * self.term.drop_cost(in_S)


def solve_subset(
    X_lab: np.ndarray,
    y_pm: np.ndarray,
    X_cand: np.ndarray,
    in_S: np.ndarray,
    C: float,
    hint_scores: np.ndarray | None = None,
    warm_start: CuttingPlaneState | None = None,
    *,
    rows0: np.ndarray | None = None,
    screen: CandidateScreen | None = None,
    cutoff: float | None = None,
) -> tuple[QPResult, np.ndarray, int]:
    """Solve the fixed-set QP for the candidates marked ``in_S``.

    Parameters
    ----------
    X_lab, y_pm, X_cand, C : the TTK problem.
    in_S : ndarray of bool, shape (m,)
        Candidates allowed to score positive.
    hint_scores : ndarray of shape (m,) or None
        Current scores, used to pick the first constraints when there are many candidates:
        the ``max(4 |S|, 128)`` outsiders scoring highest (ties to the lower row).
    warm_start : CuttingPlaneState or None
        Cuts shared between solves on the same labelled rows (used by the cutting-plane QP
        solver, i.e. from ``CUTTING_PLANE_MIN_ROWS`` labelled rows); updated in place.
    rows0 : ndarray of int or None
        The first constraints, when the caller already picked them from ``hint_scores``
        (increasing row numbers).
    screen : CandidateScreen or None
        Checks a solution for violated outsiders on its working set when its bound allows
        (the same rows are found as by checking every candidate).
    cutoff : float or None
        Only a solution below ``cutoff`` is wanted: the cutting plane stops once its lower bound
        (valid for the full set: fewer constraints relax the QP) proves there is none; the point
        returned is then feasible with an objective ``>= cutoff``.

    Returns
    -------
    result : QPResult
    beta : ndarray of shape (m,)
        Multiplier of every candidate's constraint (0 for members of S and inactive rows).
    n_solves : int
        QPs solved (more than one when constraints were generated).
    """
    m = X_cand.shape[0]
    n_out = m - int(np.count_nonzero(in_S))
    full = m <= _FULL_CONSTRAINTS or (hint_scores is None and rows0 is None)
    if full:
        rows = np.flatnonzero(~in_S)
    elif rows0 is not None:
        rows = rows0
    else:
        rows = _top_rows(hint_scores, np.flatnonzero(~in_S), max(4 * (m - n_out), 128))
    x_max = None if screen is None else screen.x_max
    n_solves = 0
    while True:
        res = solve_fixed_set(
            X_lab,
            y_pm,
            C,
            X_cand[rows],
            warm_start=warm_start,
            cutoff=cutoff,
            cutting_plane_min_rows=_POLISH_CP_MIN_ROWS,
        )
        n_solves += 1
        if rows.size == n_out or res.status.startswith("Cutoff"):
            break
        if x_max is None:
            x_max = max(float(X_cand.max()), -float(X_cand.min()))  # np.abs would copy
        viol = np.setdiff1d(_violated(res, X_cand, in_S, screen, x_max), rows, assume_unique=True)
        if viol.size == 0:
            break
        rows = np.union1d(rows, viol)
    beta = np.zeros(m)
    beta[rows] = res.beta
    if rows.size:
        res = _lower_to_feasible(res, X_lab, y_pm, X_cand, in_S, C, screen)
    return res, beta, n_solves


def _violated(res, X_cand, in_S, screen, x_max) -> np.ndarray:
    """Outsiders of ``in_S`` scoring above a relative 1e-7 at ``res`` (increasing rows)."""
    if screen is not None:
        cand, s_cand = screen.outsider_scores(res.w, res.b, in_S)
    else:
        cand = np.flatnonzero(~in_S)
        s_cand = (X_cand @ res.w)[cand] + res.b  # no copy of X_cand[out]
    scale = abs(res.b) + float(np.linalg.norm(res.w)) * x_max
    return cand[s_cand > 1e-7 * max(scale, 1.0)]


def _lower_to_feasible(res, X_lab, y_pm, X_cand, in_S, C, screen) -> QPResult:
    """``res`` with ``b`` lowered so that no outsider of ``in_S`` scores above zero.

    A point the interior-point method leaves a hair above zero is made feasible exactly; the
    objective is recomputed from ``(w, b)``.
    """
    if screen is not None:
        _, s_cand = screen.outsider_scores(res.w, res.b, in_S)
        top = float(s_cand.max(initial=-np.inf))
    else:
        top = float((X_cand @ res.w)[~in_S].max()) + res.b
    if top <= 0.0:
        return res
    b = res.b - top
    objective = hinge_objective(res.w, b, X_lab, y_pm, C)
    return QPResult(w=res.w, b=b, objective=objective, beta=res.beta, status=res.status)


def _iter_pairs(n_in: int, n_out: int) -> Iterator[tuple[int, int]]:
    """Every pair (insider rank, outsider rank), along anti-diagonals."""
    for diag in range(n_in + n_out - 1):
        for a in range(max(0, diag - n_out + 1), min(diag, n_in - 1) + 1):
            yield a, diag - a


def swap_pairs(n_in: int, n_out: int, limit: int) -> list[tuple[int, int]]:
    """Rank pairs (insider rank, outsider rank) along anti-diagonals, at most ``limit``."""
    return list(islice(_iter_pairs(n_in, n_out), limit))


def _fill(
    trial: np.ndarray,
    room: float,
    cost: np.ndarray,
    beta: np.ndarray,
    beta_tol: float,
    hint: np.ndarray,
    cost_min: float = 0.0,
) -> np.ndarray:
    """Outsiders of ``trial`` that fit greedily in ``room``: by ``beta`` (if above ``beta_tol``),
    then by ``hint``; ties to the lower row. Returns the rows added (``trial`` is updated).
    ``cost_min`` (the cheapest candidate's cost) lets a ``room`` below it return at once."""
    if room < cost_min:  # nothing can fit (always so with unit costs): skip the pass over m
        return np.zeros(0, dtype=np.int64)
    rows = np.flatnonzero(~trial & (cost <= room))  # only these can fit at all
    if rows.size == 0:
        return rows
    active = beta[rows] > beta_tol
    # Positive multipliers first (decreasing), then decreasing score; ties to the lower row.
    key_beta = np.where(active, -beta[rows], 0.0)
    order = rows[np.lexsort((rows, np.where(active, 0.0, -hint[rows]), key_beta, ~active))]
    taken, _ = greedy_fit(cost[order], 0.0, room)
    out = order[taken]
    trial[out] = True
    return out


class _OneSet:
    """Fixed-set solves for one scorer: the screen, the first constraints, the cuts.

    ``k`` (about how many candidates a selection holds) sizes the screen and the first
    constraints only.
    """

    #: A swap's QP has a cheap lower bound (:func:`_swap_bound`) that may skip it.
    bounds_swaps = True

    def __init__(self, X_lab, y_pm, X_cand, k, C, w, b, warm_start, screen):
        self.X_lab, self.y_pm, self.X_cand, self.C = X_lab, y_pm, X_cand, C
        m = X_cand.shape[0]
        self.m = m
        self.scr = None
        if screen and m > _FULL_CONSTRAINTS:
            self.scr = CandidateScreen(X_cand, max(_SCREEN_PER_K * k, _SCREEN_MIN))
            self.scr.refresh(w, b)
            self.scores0 = self.scr.scores
        else:
            self.scores0 = X_cand @ w + b
        # Cuts of the cutting-plane QP solver (large n) stay valid whatever the set: share them.
        self.warm = CuttingPlaneState() if warm_start is None else warm_start
        # The first solve starts from the given point (feasible for S), not from the old state's.
        self.warm.w, self.warm.b = np.array(w, dtype=np.float64, copy=True), float(b)
        self.n0 = max(4 * k, 128)

    def start(self, bud: Budget):
        """The start's set (``bud.select`` of its scores), its cost and its solve."""
        S = bud.select(self.scores0)
        in_S = np.zeros(self.m, dtype=bool)
        in_S[S] = True
        res, beta, n_qp = solve_subset(
            self.X_lab,
            self.y_pm,
            self.X_cand,
            in_S,
            self.C,
            self.scores0,
            self.warm,
            screen=self.scr,
        )
        return in_S, float(bud.cost[S].sum()), res, beta, n_qp

    def stack(self, w, b):
        """The solution as one scorer of ``S = 1``: ``(w[None], [b])``."""
        return w[None, :], np.array([b], dtype=np.float64)

    def hint(self, res, in_S):
        """Scores at ``res`` (the solver's hint) and the insiders' ranking key."""
        if self.scr is not None:
            self.scr.refresh(res.w, res.b)
            hint = self.scr.scores
        else:
            hint = self.X_cand @ res.w + res.b
        # A swap changes the outsiders by one row each way: their n0 + 1 best by the hint
        # hold every trial's first constraints (the n0 best of the trial's outsiders).
        self.best_out = None
        n_S = int(np.count_nonzero(in_S))
        if self.m > _FULL_CONSTRAINTS and self.n0 + 1 <= self.m - n_S:
            self.best_out = top_k(np.where(in_S, -np.inf, hint), self.n0 + 1)
        return hint, hint

    def solve(self, trial, hint, cutoff, swap):
        """Solve the set ``trial``; ``swap = (drop, added, j)`` says how it was made."""
        drop, added, j = swap
        rows0 = None
        if self.best_out is not None and len(drop) == 1 and added.size == 0:
            rows = np.sort(np.r_[self.best_out[self.best_out != j], drop[0]])
            rows0 = _top_rows(hint, rows, self.n0)
        return solve_subset(
            self.X_lab,
            self.y_pm,
            self.X_cand,
            trial,
            self.C,
            hint,
            self.warm,
            rows0=rows0,
            screen=self.scr,
            cutoff=cutoff,
        )


@dataclass
class _StackedSolution:
    w: np.ndarray  # (S, d)
    b: np.ndarray  # (S,)
    objective: float


class _StackedSets:
    """Fixed-set solves for ``S`` scorers sharing ``k`` cells: one QP per scorer, summed."""

    bounds_swaps = False
    scr = None  # no candidate screen: every score is computed

    def __init__(self, X_lab, Y_pm, X_cand, k, C, W, b):
        self.X_lab, self.Y_pm, self.X_cand, self.k, self.C = X_lab, Y_pm, X_cand, k, C
        self.W0, self.b0 = W, b
        # Cuts of the cutting-plane QP solver stay valid whatever the set: one state per scorer.
        self.warms = []
        for s in range(Y_pm.shape[1]):
            st = CuttingPlaneState()
            st.w, st.b = np.array(W[s], dtype=np.float64, copy=True), float(b[s])
            self.warms.append(st)

    def start(self, bud: Budget):
        hint = self.X_cand @ self.W0.T + self.b0
        in_S = np.zeros(self.X_cand.shape[0], dtype=bool)
        in_S[top_k(hint.max(axis=1), self.k)] = True
        res, beta, n_qp = self._solve_set(in_S, hint)
        return in_S, float(self.k), res, beta, n_qp

    def stack(self, w, b):
        return w, b

    def hint(self, res, in_S):
        hint = self.X_cand @ res.w.T + res.b
        return hint, hint.max(axis=1)

    def solve(self, trial, hint, cutoff, swap):
        return self._solve_set(trial, hint, cutoff)

    def _solve_set(self, in_S, hint, cutoff=None):
        """``F(S) = sum_s QP_s(S)``; ``None`` once the scorers solved so far reach ``cutoff``.

        Every ``QP_s >= 0``, so a partial sum at or above ``cutoff`` rejects the trial exactly;
        the cutting-plane QP (many labelled rows) also stops early on the remaining budget.
        """
        Ws, bs, beta = [], [], np.zeros(self.X_cand.shape[0])
        total, n_qp = 0.0, 0
        for s in range(self.Y_pm.shape[1]):
            cut = None if cutoff is None else cutoff - total
            y, C_s = self.Y_pm[:, s], species_weights(self.C, s)
            res, beta_s, used = solve_subset(
                self.X_lab, y, self.X_cand, in_S, C_s, hint[:, s], self.warms[s], cutoff=cut
            )
            n_qp += used
            total += res.objective
            if cutoff is not None and total >= cutoff:
                return None, None, n_qp
            Ws.append(res.w)
            bs.append(res.b)
            beta += beta_s
        W, b = np.vstack(Ws), np.asarray(bs, dtype=np.float64)
        obj = float(species_objectives(W, b, self.X_lab, self.Y_pm, self.C).sum())
        return _StackedSolution(w=W, b=b, objective=obj), beta, n_qp


def _make_room(ins, i, j, cost, cost_S, limit):
    """Insiders to drop so that ``j`` fits in place of ``i``, and the cost after the swap."""
    drop, after = [i], cost_S - cost[i] + cost[j]
    if after > limit:
        # With costs one insider may not make room for j: drop further insiders, lowest
        # score first, until j fits (never happens with unit costs).
        for i2 in ins:
            if after <= limit:
                break
            if i2 != i:
                drop.append(i2)
                after -= cost[i2]
    return drop, after


#: A swap is skipped when its lower bound exceeds the acceptance level by this (relative):
#: far above the QP solver's 1e-9 tolerances, so the skipped QP would have been rejected.
_SKIP_RTOL = 1e-6
#: Active outsiders (largest multipliers) tried as donors in :func:`_swap_bound`.
_DONORS = 8


def _swap_bound(X_cand, res, beta, scores, i, j, donors) -> float:
    """Lower bound on the fixed-set QP after swapping insider ``i`` for outsider ``j``.

    Weak duality: the current multipliers ``beta`` with ``beta_j`` moved onto ``i``'s new
    constraint, and a further ``t <= beta_k`` moved there from an active outsider ``k`` (one
    of ``donors``), keep ``sum beta`` (the intercept's condition), so they are dual feasible
    for the new set. With ``u = beta_j (z_j - z_i) + t (z_k - z_i)`` the dual function there
    is the current optimum ``- beta_j (s_j - s_i) - t (s_k - s_i) - ||u||^2 / 2`` (``s`` the
    current scores, whose intercept cancels), maximised over ``t`` in closed form.
    """
    bj = float(beta[j])
    zi, dj = X_cand[i], X_cand[j] - X_cand[i]
    base = float(res.objective) - bj * float(scores[j] - scores[i]) - 0.5 * bj * bj * float(dj @ dj)
    best = base
    for k in donors:
        if k == j:
            continue
        dk = X_cand[k] - zi
        kk = float(dk @ dk)
        if kk <= 0.0:
            continue
        t = (float(scores[i] - scores[k]) - bj * float(dj @ dk)) / kk
        t = min(max(t, 0.0), float(beta[k]))
        best = max(
            best,
            base + t * float(scores[i] - scores[k]) - bj * t * float(dj @ dk) - 0.5 * t * t * kk,
        )
    return best


def _swap_round(sets, bud, in_S, cost_S, res, beta, max_pairs, tol, pen=None):
    """One round of swaps: the first improving trial ``(res, beta, in_S, cost_S)``, or None.

    With a boundary penalty ``pen`` a trial is scored by its QP objective plus
    ``pen.value(trial)``. Returns ``(improvement or None, QPs solved)``.
    """
    cost, limit = bud.cost, bud.limit
    beta_tol = 1e-7 * max(float(beta.max(initial=0.0)), 1e-300)
    if pen is None:
        outs = np.flatnonzero((~in_S) & (beta > beta_tol))
        outs = outs[np.lexsort((outs, -beta[outs]))]
    else:
        outs = pen.outsiders(in_S, beta, beta_tol)
    if outs.size == 0:
        return None, 0  # no active constraint (and no neighbour): nothing can improve
    hint, key = sets.hint(res, in_S)
    ins = np.flatnonzero(in_S)
    ins_key = key[ins] if pen is None else pen.insider_key(key, in_S)[ins]
    ins = ins[np.lexsort((ins, ins_key))]
    cost_min = float(cost.min()) if cost.size else 0.0
    current = res.objective + (0.0 if pen is None else pen.value(in_S))
    donors = np.argsort(-beta, kind="stable")[:_DONORS] if pen is not None else ()
    n_tried, n_qp = 0, 0
    for a, c in _iter_pairs(ins.size, outs.size):
        if n_tried >= max_pairs:
            break
        i, j = ins[a], outs[c]
        if cost[j] > limit:
            continue  # j alone breaks the budget: it can never score positive
        drop, after = _make_room(ins, i, j, cost, cost_S, limit)
        n_tried += 1
        trial = in_S.copy()
        trial[drop], trial[j] = False, True
        added = _fill(trial, limit - after, cost, beta, beta_tol, key, cost_min)
        # A trial is accepted only below `target`; a lower bound at or above it rejects
        # the trial exactly as its full solve would, so the search path is unchanged.
        target = current - tol * max(1.0, abs(current))
        extra = 0.0 if pen is None else pen.value(trial)
        if pen is not None and added.size == 0 and len(drop) == 1 and sets.bounds_swaps:
            # A lower bound proves the trial would be rejected: skip its QP (same path).
            bound = _swap_bound(sets.X_cand, res, beta, hint, i, j, donors) + extra
            if bound >= target + _SKIP_RTOL * max(1.0, abs(target)):
                continue
        new, new_beta, used = sets.solve(trial, hint, target - extra, (drop, added, j))
        n_qp += used
        if new is not None and new.objective + extra < target:
            return (new, new_beta, trial, float(cost[trial].sum())), n_qp
    return None, n_qp


def polish(
    X_lab: np.ndarray,
    Y_pm: np.ndarray,
    X_cand: np.ndarray,
    constraints: Constraints,
    C: float,
    W: np.ndarray,
    b: np.ndarray,
    *,
    max_rounds: int = 200,
    max_pairs: int = 40,
    tol: float = 1e-9,
    warm_start: CuttingPlaneState | None = None,
    screen: bool = True,
) -> PolishResult:
    """Improve a feasible TTK solution by fixed-set QPs and swap moves.

    Parameters
    ----------
    X_lab, Y_pm, X_cand, C : the TTK problem, labels of shape (n, S).
    constraints : Constraints
        The budget (``constraints.n_cells`` sizes the screen and the first constraints), the
        number of scorers ``S``, and the boundary term: with ``boundary_penalty > 0`` the
        search minimises the QP objective plus the penalty times the selection's boundary
        length, and ``PolishResult.objective`` is that sum.
    W, b : ndarray of shape (S, d) and (S,)
        A feasible start (its positive candidates fit the budget).
    max_rounds : int
        Accepted swaps at most; a search cut short by it says so
        (``PolishResult.stop_reason == "max_rounds"``).
    max_pairs : int
        Pairs tried per round before the search stops.
    tol : float
        Relative objective decrease that counts as an improvement.
    warm_start : CuttingPlaneState or None
        Cuts of an earlier cutting-plane solve on ``(X_lab, y)`` (e.g. the SVM start's); one
        scorer only; updated in place. Its first solve starts from ``(W, b)`` either way.
    screen : bool
        With more than ``_FULL_CONSTRAINTS`` candidates, score every candidate once per
        accepted solution and check trial solutions on a :class:`CandidateScreen`'s working
        set (same path as checking all of them, fewer passes over ``X_cand``). One scorer.

    Returns
    -------
    PolishResult
        ``w`` of shape (S, d), ``b`` of shape (S,).

    Notes
    -----
    One scorer searches with :class:`_OneSet` (costs, the screen, the swap bound), several
    with :class:`_StackedSets` (one QP per scorer on the shared cells); the choice is made
    here, from ``constraints.n_species``.
    """
    constraints.check(Y_pm, X_cand, W, b)
    bud, term = constraints.budget, constraints.boundary
    if constraints.n_species == 1:
        y, C0, n = Y_pm[:, 0], species_weights(C, 0), constraints.n_cells
        sets = _OneSet(X_lab, y, X_cand, n, C0, W[0], float(b[0]), warm_start, screen)
    else:
        sets = _StackedSets(X_lab, Y_pm, X_cand, bud.card, C, W, b)
    pen = None
    if term is not None and constraints.boundary_penalty > 0:
        pen = _Penalty(term, constraints.boundary_penalty)
    out = _search(sets, bud, pen, max_rounds, max_pairs, tol)
    out.w, out.b = sets.stack(out.w, out.b)
    scr = sets.scr
    out.n_refresh = 0 if scr is None else scr.n_refresh
    out.n_full_checks = 0 if scr is None else scr.n_full_checks
    out.boundary = 0.0 if term is None else term.length(out.selected_mask)
    return out


#: Patches of at most this many cells are tried by the patch move.
_PATCH_MOVE_MAX = 4


def _grow(term: Boundary, keep: np.ndarray, size: int, hint: np.ndarray) -> np.ndarray:
    """``size`` outsiders of ``keep`` added one at a time, each touching the set most (ties:
    the highest ``hint``): a block grown onto the rest of the selection."""
    cur = keep.copy()
    added = []
    for _ in range(size):
        link = term.link(cur)
        key = np.where(cur, -np.inf, link * 1e6 + hint)  # touching first, then by score
        j = int(np.argmax(key))
        if not np.isfinite(key[j]):
            break
        cur[j] = True
        added.append(j)
    return np.asarray(added, dtype=np.int64)


def _patch_move(sets, in_S: np.ndarray, res, pen: _Penalty, tol: float):
    """Move a whole small patch next to the rest of the selection, if that lowers the total.

    Single swaps cannot merge two patches of several cells (every step lengthens the
    boundary before the last one shortens it); this move drops a patch of at most
    :data:`_PATCH_MOVE_MAX` cells and grows as many cells onto the rest, in one QP.
    Cell budgets only. Returns ``(improvement or None, QPs solved)``.
    """
    from scipy.sparse.csgraph import connected_components

    term = pen.term
    sel = np.flatnonzero(in_S)
    _, comp = connected_components(term.shared[sel][:, sel], directed=False)
    sizes = np.bincount(comp)
    if sizes.size < 2:
        return None, 0
    hint, key = sets.hint(res, in_S)
    current = res.objective + pen.value(in_S)
    target = current - tol * max(1.0, abs(current))
    n_qp = 0
    for c in np.argsort(sizes, kind="stable"):
        if sizes[c] > _PATCH_MOVE_MAX or sizes[c] == sizes.max():
            continue
        keep = in_S.copy()
        keep[sel[comp == c]] = False
        added = _grow(term, keep, int(sizes[c]), key)
        trial = keep.copy()
        trial[added] = True
        extra = pen.value(trial)
        if extra >= target:
            continue
        new, new_beta, used = sets.solve(trial, hint, target - extra, (sel[comp == c], added, -1))
        n_qp += used
        if new is not None and new.objective + extra < target:
            return (new, new_beta, trial, float(trial.sum())), n_qp
    return None, n_qp


def _search(
    sets, bud: Budget, pen: _Penalty | None, max_rounds: int, max_pairs: int, tol: float
) -> PolishResult:
    """Accept improving swaps from the start's set until none is found or ``max_rounds``.

    The result's ``stop_reason`` says which (``"max_rounds"`` only when the last round still
    found an improving swap: with ``max_rounds = 0``, too, since no round was searched).
    """
    in_S, cost_S, res, beta, n_qp = sets.start(bud)
    extra = 0.0 if pen is None else pen.value(in_S)
    history = [res.objective + extra]
    n_swaps, stop_reason = 0, "max_rounds"
    for _ in range(max_rounds):
        found, used = _swap_round(sets, bud, in_S, cost_S, res, beta, max_pairs, tol, pen)
        n_qp += used
        if found is None and pen is not None and bud.card is not None:
            found, used = _patch_move(sets, in_S, res, pen, tol)
            n_qp += used
        if found is None:
            stop_reason = "no_improving_swap"
            break
        res, beta, in_S, cost_S = found
        extra = 0.0 if pen is None else pen.value(in_S)
        history.append(res.objective + extra)
        n_swaps += 1
    return PolishResult(
        w=res.w,
        b=res.b,
        objective=res.objective + extra,
        selected=np.flatnonzero(in_S),
        stop_reason=stop_reason,
        n_swaps=n_swaps,
        n_qp=n_qp,
        history=history,
        selected_mask=in_S,
    )
