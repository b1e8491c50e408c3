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
* **Feasible direction** (:func:`multi_feasible_direction`) on the stacked variable
  ``v = (w_1, b_1, ..., w_S, b_S)``; see its docstring for how the paper's rules carry over.
* **Polish** (:func:`multi_polish`): for a fixed set of ``k`` cells the problem separates into
  one fixed-set QP per species (each scorer must score the outsiders ``<= 0``); swap moves over
  that set as in :mod:`reserve.solvers._polish`.
* **MIP** (:func:`solve_multi_mip`): one binary per candidate shared by all species, SCIP.

``MultiSVM`` is the baseline: one SVM per species, cells ranked by the sum of the scores.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from reserve.errors import InvalidInputError, SolverError
from reserve.solvers._base import canonical_order, top_k
from reserve.solvers._fd import augmented_norms, line_search, project_direction
from reserve.solvers._polish import _pairs, solve_subset
from reserve.solvers._qp import CuttingPlaneState, solve_fixed_set
from reserve.solvers._validation import (
    _as_float_matrix,
    check_budget,
    check_positive_real,
    check_solver_params,
)

__all__ = [
    "MultiData",
    "MultiFDResult",
    "MultiMIPResult",
    "MultiPolishResult",
    "MultiSVM",
    "MultiTTK",
    "check_multi_transductive",
    "feasible_intercepts",
    "multi_feasible_direction",
    "multi_polish",
    "solve_multi_mip",
    "species_objectives",
]


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MultiData:
    """Validated arrays of a multi-species transductive top-k problem.

    Attributes
    ----------
    X : ndarray of shape (n_samples, n_features), float64
    Y : ndarray of shape (n_samples, n_species), int64 in {-1, 0, 1}
    labelled, candidates : ndarray of int64
        Row indices, increasing.
    Y_pm : ndarray of shape (n_labelled, n_species)
        Labels of the labelled rows mapped to {-1, +1}.
    k : int
    """

    X: np.ndarray
    Y: np.ndarray
    labelled: np.ndarray
    candidates: np.ndarray
    Y_pm: np.ndarray
    k: int


def check_multi_transductive(X: object, Y: object, k: object) -> MultiData:
    """Validate a multi-species problem: 0/1 in every column of a labelled row, -1 in every
    column of a candidate row.

    A 1-D ``Y`` is read as a single species.

    Raises
    ------
    InvalidInputError
        One line naming the parameter, what was received and the fix.

    Examples
    --------
    >>> import numpy as np
    >>> d = check_multi_transductive(np.eye(4), [[0, 1], [1, 0], [-1, -1], [-1, -1]], 1)
    >>> d.candidates.tolist(), d.Y_pm.shape
    ([2, 3], (2, 2))
    """
    if Y is None:
        raise InvalidInputError(
            "Y is None; this estimator needs labels. Pass Y of shape (n_samples, n_species): "
            "1 / 0 for labelled rows, -1 in every column for candidates."
        )
    Xa = _as_float_matrix(X)
    Ya = np.asarray(Y)
    if Ya.ndim == 1:
        Ya = Ya[:, None]
    if Ya.ndim != 2 or Ya.shape[1] == 0:
        raise InvalidInputError(
            f"Y must be 2-D (n_samples, n_species) with at least one species column; received "
            f"shape {Ya.shape}. Pass one column of labels per species."
        )
    if Ya.shape[0] != Xa.shape[0]:
        raise InvalidInputError(
            f"X and Y disagree: X has {Xa.shape[0]} rows, Y has {Ya.shape[0]}. "
            "Pass one row of labels per row of X."
        )
    try:
        Yf = Ya.astype(np.float64)
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"Y must hold the numbers 1, 0 or -1; received dtype {Ya.dtype}. "
            "Encode detected as 1, not detected as 0, candidates as -1."
        ) from None
    bad = ~np.isin(Yf, (-1.0, 0.0, 1.0))
    if bad.any():
        vals = np.unique(Ya[bad])[:5].tolist()
        raise InvalidInputError(
            f"Y must contain only 1, 0 and -1; received other values {vals}. "
            "Recode the labels (1 detected, 0 not detected, -1 candidate)."
        )
    Yi = Yf.astype(np.int64)
    is_cand = Yi == -1
    mixed = np.flatnonzero(is_cand.any(axis=1) & ~is_cand.all(axis=1))
    if mixed.size:
        r = int(mixed[0])
        raise InvalidInputError(
            f"Y row {r} mixes -1 with 0/1 labels ({Yi[r].tolist()}; {mixed.size} such row(s)); "
            "a row is either labelled for every species (0/1 in every column) or a candidate "
            "(-1 in every column). Label the row for every species or mark it -1 throughout."
        )
    candidates = np.flatnonzero(is_cand[:, 0])
    labelled = np.flatnonzero(~is_cand[:, 0])
    if candidates.size == 0:
        raise InvalidInputError(
            "Y has no candidate rows (-1 in every column): there is nothing to select from. "
            "Append the candidate rows to X with labels -1."
        )
    Yl = Yi[labelled]
    one_class = np.flatnonzero(Yl.min(axis=0) == Yl.max(axis=0)) if labelled.size else [0]
    if len(one_class):
        s = int(one_class[0])
        got = np.unique(Yl[:, s]).tolist() if labelled.size else []
        raise InvalidInputError(
            f"Y column {s} (species {s}) must contain both classes 0 and 1 among labelled rows; "
            f"received only {got}. Add labelled rows of the missing class or drop the species."
        )
    kk = check_budget(k, candidates.size)
    Y_pm = np.where(Yl == 1, 1.0, -1.0)
    return MultiData(X=Xa, Y=Yi, labelled=labelled, candidates=candidates, Y_pm=Y_pm, k=kk)


# --------------------------------------------------------------------------------------------
# Shared pieces
# --------------------------------------------------------------------------------------------


def species_objectives(
    W: np.ndarray, b: np.ndarray, X_lab: np.ndarray, Y_pm: np.ndarray, C: float
) -> np.ndarray:
    """``0.5 ||w_s||^2 + C sum_i [1 - y_is (w_s . x_i + b_s)]_+`` for every species ``s``.

    Examples
    --------
    >>> import numpy as np
    >>> species_objectives(np.zeros((1, 1)), np.zeros(1), np.ones((2, 1)),
    ...                    np.array([[1.0], [-1.0]]), 1.0).tolist()
    [2.0]
    """
    margins = 1.0 - Y_pm * (X_lab @ W.T + b)
    return 0.5 * np.einsum("sd,sd->s", W, W) + C * np.maximum(margins, 0.0).sum(axis=0)


def _objective(W: np.ndarray, U: np.ndarray, C: float) -> float:
    """Total objective from the hinge arguments ``U`` (n, S)."""
    return float(0.5 * np.einsum("sd,sd->", W, W) + C * np.maximum(U, 0.0).sum())


def feasible_intercepts(
    margins: np.ndarray, b: np.ndarray, k: int, rank: np.ndarray | None = None
) -> np.ndarray:
    """Lower the intercepts just enough that only ``k`` chosen cells can score positive.

    The chosen cells are the top ``k`` of ``rank`` (default: the max-score
    ``max_s margins_js + b_s``; ties to the lower row). Each ``b_s`` becomes
    ``min(b_s, -max_{j not chosen} margins_js)``, so every other cell scores ``<= 0`` for every
    species (exactly: ``a - max <= 0`` in floating point when scores are formed as
    ``margins + b``). For a point that is already feasible this changes nothing: the chosen
    cells then include every positive one. With one species it is TTK's shifted intercept,
    ``min(b, -s_(k+1))``.

    Parameters
    ----------
    margins : ndarray of shape (m, S)
        ``w_s . z_j`` without the intercepts.
    b : ndarray of shape (S,)
    k : int
    rank : ndarray of shape (m,) or None
        Scores that choose the ``k`` cells.

    Returns
    -------
    ndarray of shape (S,)

    Examples
    --------
    >>> import numpy as np
    >>> feasible_intercepts(np.array([[3.0, 0.0], [2.0, 1.0], [1.0, 2.0]]), np.zeros(2), 1)
    array([-2., -2.])
    """
    m = margins.shape[0]
    if m <= k:
        return b.copy()
    if rank is None:
        rank = (margins + b).max(axis=1)
    out = np.ones(m, dtype=bool)
    out[top_k(rank, k)] = False
    return np.minimum(b, -margins[out].max(axis=0))


# --------------------------------------------------------------------------------------------
# Feasible direction
# --------------------------------------------------------------------------------------------


@dataclass
class MultiFDResult:
    """Outcome of :func:`multi_feasible_direction`."""

    W: np.ndarray
    b: np.ndarray
    objective: float
    n_iter: int
    history: list[float] = field(default_factory=list)
    stop_reason: str = ""


def _boundary_rows(X_cand: np.ndarray, Ej: np.ndarray, Es: np.ndarray, S: int) -> np.ndarray:
    """Pairs ``(j, s)`` as rows of the stacked space: ``(z_j, 1)`` in block ``s``, 0 elsewhere."""
    d = X_cand.shape[1]
    A = np.zeros((Ej.size, S * (d + 1)))
    cols = Es[:, None] * (d + 1) + np.arange(d + 1)
    A[np.arange(Ej.size)[:, None], cols] = np.hstack([X_cand[Ej], np.ones((Ej.size, 1))])
    return A


def multi_feasible_direction(
    X_lab: np.ndarray,
    Y_pm: np.ndarray,
    X_cand: np.ndarray,
    k: int,
    C: float,
    W0: np.ndarray,
    b0: np.ndarray,
    *,
    max_iter: int = 500,
    step_shrink: float = 0.5,
    boundary_rtol: float = 1e-9,
    tol: float = 1e-9,
) -> MultiFDResult:
    """The paper's feasible-direction method on the stacked variable ``(w_1, b_1, ..., w_S, b_S)``.

    Parameters
    ----------
    X_lab : ndarray of shape (n, d)
    Y_pm : ndarray of shape (n, S)
        Labels in {-1, +1}.
    X_cand : ndarray of shape (m, d)
    k : int
    C : float
    W0, b0 : ndarray of shape (S, d) and (S,)
        A start at which at most ``k`` cells have a positive max-score.
    max_iter, step_shrink, boundary_rtol, tol
        As in :func:`reserve.solvers._fd.feasible_direction`.

    Returns
    -------
    MultiFDResult
        ``history`` is non-increasing (a step is taken only when it lowers the objective).

    Notes
    -----
    How the single-species rules carry over:

    * the objective is separable, so the subgradient is block-wise (species ``s``'s block is
      the single-species subgradient of its own hinge terms);
    * ``L`` is the set of cells positive through some species (score ``> btol_s``, with
      ``btol_s = boundary_rtol * (|b_s| + ||w_s|| max_j ||z_j||)``, species by species because
      each scorer has its own scale); a pair ``(j, s)`` is on the boundary when
      ``|w_s . z_j + b_s| <= btol_s`` and ``j`` is not in ``L`` (raising another species' score
      of a cell already positive costs nothing);
    * Algorithm 1 runs on the boundary pairs as rows of the stacked space with the first
      ``max(k - |L|, 0)`` pairs free: each freed pair makes at most one more cell positive, so
      at most ``k`` cells end positive;
    * the maximal step is the first crossing of a below-boundary pair of a cell not in ``L``;
      the exact line search sees the per-species hinge terms concatenated;
    * a step leaving more than ``k`` cells positive is refused (rounding safety net), and a
      pair that blocked the previous step too may reach the boundary (anti-jamming), as in
      :mod:`reserve.solvers._fd`.
    """
    S, d = W0.shape
    W = np.array(W0, dtype=np.float64, copy=True)
    b = np.array(b0, dtype=np.float64, copy=True)
    r_max = float(np.sqrt(np.max(augmented_norms(X_cand) ** 2 - 1.0)))
    U = 1.0 - Y_pm * (X_lab @ W.T + b)  # hinge arguments, (n, S)
    Sc = X_cand @ W.T + b  # candidate scores, (m, S)
    f = _objective(W, U, C)
    history = [f]
    stop = "max_iter"
    last_blocker = -1
    for _ in range(max_iter):
        btol = boundary_rtol * np.maximum(np.abs(b) + np.linalg.norm(W, axis=1) * r_max, 1e-300)
        in_L = (Sc > btol).any(axis=1)
        n_free = max(k - int(in_L.sum()), 0)
        Ej, Es = np.nonzero((np.abs(Sc) <= btol) & ~in_L[:, None])
        A_E = _boundary_rows(X_cand, Ej, Es, S)
        step = None
        for kink_active in (False, True):
            act = U > (-1e-12 if kink_active else 1e-12)
            YA = np.where(act, Y_pm, 0.0)
            G = np.hstack([W - C * (YA.T @ X_lab), -C * YA.sum(axis=0)[:, None]])
            g = -G.ravel()  # block s = (-grad w_s, -grad b_s)
            dv, _ = project_direction(g, A_E, n_free)
            if float(np.linalg.norm(dv)) <= 1e-10 * float(np.linalg.norm(g)):
                stop = "zero_direction"
                continue
            D = dv.reshape(S, d + 1)
            Dw, Db = D[:, :d], D[:, d]
            rate = X_cand @ Dw.T + Db
            below = (Sc < -btol) & (rate > 0) & ~in_L[:, None]
            if below.any():
                ratios = np.full(Sc.shape, np.inf)
                ratios[below] = -Sc[below] / rate[below]
                blocker = int(np.argmin(ratios))  # flat index j * S + s; ties to the lower j
                alpha = float(ratios.flat[blocker])
            else:
                blocker, alpha = -1, np.inf
            V = -Y_pm * (X_lab @ Dw.T + Db)
            # Anti-jamming: a pair that blocked the previous step too may reach the boundary.
            shrink = 1.0 if (blocker >= 0 and blocker == last_blocker) else step_shrink
            wd, dd = float(np.einsum("sd,sd->", W, Dw)), float(np.einsum("sd,sd->", Dw, Dw))
            a = line_search(wd, dd, U.ravel(), V.ravel(), C, shrink * alpha)
            if not np.isfinite(a):
                stop = "unbounded"
                break
            f_new = _objective(W + a * Dw, U + a * V, C)
            # Safety net: never accept a step that leaves more than k cells positive.
            if int(((Sc + a * rate) > btol).any(axis=1).sum()) > k:
                stop = "infeasible_step"
                continue
            if a > 0.0 and f - f_new > tol * max(1.0, abs(f)):
                step = (a, Dw, Db, rate, V, f_new, alpha, blocker)
                break
            stop = "no_progress"
        if step is None:
            break
        a, Dw, Db, rate, V, f_new, alpha, blocker = step
        W += a * Dw
        b += a * Db
        U += a * V
        Sc += a * rate
        if a >= alpha:  # the blocker landed on the boundary: pin it there exactly
            Sc.flat[blocker] = 0.0
        last_blocker = blocker if a >= step_shrink * alpha else -1
        f = f_new
        history.append(f)
    else:
        stop = "max_iter"
    # Rounding at a degenerate point can leave a score a hair above zero: restore feasibility.
    b = feasible_intercepts(X_cand @ W.T, b, k)
    return MultiFDResult(
        W=W,
        b=b,
        objective=float(species_objectives(W, b, X_lab, Y_pm, C).sum()),
        n_iter=len(history) - 1,
        history=history,
        stop_reason=stop,
    )


# --------------------------------------------------------------------------------------------
# Polish
# --------------------------------------------------------------------------------------------


@dataclass
class MultiPolishResult:
    """Outcome of :func:`multi_polish`."""

    W: np.ndarray
    b: np.ndarray
    objective: float
    selected: np.ndarray
    n_swaps: int = 0
    n_qp: int = 0
    history: list[float] = field(default_factory=list)


@dataclass
class _SetSolution:
    W: np.ndarray
    b: np.ndarray
    objective: float
    beta: np.ndarray  # sum over species of the outsider multipliers, (m,)


def _solve_set(X_lab, Y_pm, X_cand, in_S, C, hint, warms, cutoff=None):
    """``F(S) = sum_s QP_s(S)``; ``None`` once the species solved so far reach ``cutoff``.

    Every ``QP_s >= 0``, so a partial sum at or above ``cutoff`` rejects the trial exactly; the
    cutting-plane QP (many labelled rows) also stops early on the remaining budget.
    """
    S = Y_pm.shape[1]
    Ws, bs, beta = [], [], np.zeros(X_cand.shape[0])
    total, n_qp = 0.0, 0
    for s in range(S):
        cut = None if cutoff is None else cutoff - total
        res, beta_s, used = solve_subset(
            X_lab, Y_pm[:, s], X_cand, in_S, C, hint[:, s], warms[s], cutoff=cut
        )
        n_qp += used
        total += res.objective
        if cutoff is not None and total >= cutoff:
            return None, n_qp
        Ws.append(res.w)
        bs.append(res.b)
        beta += beta_s
    W, b = np.vstack(Ws), np.asarray(bs, dtype=np.float64)
    obj = float(species_objectives(W, b, X_lab, Y_pm, C).sum())
    return _SetSolution(W=W, b=b, objective=obj, beta=beta), n_qp


def multi_polish(
    X_lab: np.ndarray,
    Y_pm: np.ndarray,
    X_cand: np.ndarray,
    k: int,
    C: float,
    W: np.ndarray,
    b: np.ndarray,
    *,
    max_rounds: int = 200,
    max_pairs: int = 40,
    tol: float = 1e-9,
) -> MultiPolishResult:
    """Swap local search over the shared set: ``F(S) = sum_s QP_s(S)``.

    Starts from the top ``k`` cells by max-score of ``(W, b)``. Swaps ``S - {i} + {j}`` are
    tried with outsiders ``j`` in decreasing order of ``sum_s beta_sj`` (the first-order gain
    of letting ``j`` score positive for every species) and insiders ``i`` in increasing order
    of max-score, along the anti-diagonals of :func:`reserve.solvers._polish._pairs`; the first
    improving swap is accepted; the search stops after ``max_pairs`` fruitless pairs or when no
    outsider constraint is active (then every species has its unconstrained SVM: the global
    optimum). Each species' QP is :func:`reserve.solvers._polish.solve_subset`, which carries
    every outsider constraint up to 400 candidates and generates constraints beyond.

    Returns
    -------
    MultiPolishResult
    """
    S = Y_pm.shape[1]
    m = X_cand.shape[0]
    hint = X_cand @ W.T + b
    in_S = np.zeros(m, dtype=bool)
    in_S[top_k(hint.max(axis=1), k)] = True
    # Cuts of the cutting-plane QP solver stay valid whatever the set: one state per species.
    warms = []
    for s in range(S):
        st = CuttingPlaneState()
        st.w, st.b = np.array(W[s], dtype=np.float64, copy=True), float(b[s])
        warms.append(st)
    res, n_qp = _solve_set(X_lab, Y_pm, X_cand, in_S, C, hint, warms)
    history = [res.objective]
    n_swaps = 0
    for _ in range(max_rounds):
        beta = res.beta
        beta_tol = 1e-7 * max(float(beta.max(initial=0.0)), 1e-300)
        outs = np.flatnonzero((~in_S) & (beta > beta_tol))
        if outs.size == 0:
            break
        outs = outs[np.lexsort((outs, -beta[outs]))]
        hint = X_cand @ res.W.T + res.b
        ins = np.flatnonzero(in_S)
        ins = ins[np.lexsort((ins, hint.max(axis=1)[ins]))]
        improved = False
        for a, c in _pairs(ins.size, outs.size, max_pairs):
            trial = in_S.copy()
            trial[ins[a]], trial[outs[c]] = False, True
            target = res.objective - tol * max(1.0, abs(res.objective))
            new, used = _solve_set(X_lab, Y_pm, X_cand, trial, C, hint, warms, cutoff=target)
            n_qp += used
            if new is not None and new.objective < target:
                res, in_S = new, trial
                history.append(res.objective)
                n_swaps += 1
                improved = True
                break
        if not improved:
            break
    return MultiPolishResult(
        W=res.W,
        b=res.b,
        objective=res.objective,
        selected=np.flatnonzero(in_S),
        n_swaps=n_swaps,
        n_qp=n_qp,
        history=history,
    )


# --------------------------------------------------------------------------------------------
# MIP
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MultiMIPResult:
    """Outcome of :func:`solve_multi_mip` (fields as in :class:`reserve.solvers._mip.MIPResult`)."""

    W: np.ndarray
    b: np.ndarray
    objective: float
    bound: float
    gap: float
    status: str
    n_nodes: int
    runtime: float
    solver: str
    warm_start_accepted: bool


def _big_m(Xl, Y_pm, Xc, C, ub_species):
    """Per-(cell, species) upper bounds on the score over ``{objective_s <= ub_species_s}``.

    For a row ``i`` labelled negative for species ``s``, ``C xi_is <= objective_s`` and
    ``xi_is >= 1 + w_s . x_i + b_s`` give ``w_s . x_i + b_s <= ub_s / C - 1``; with
    ``||w_s|| <= sqrt(2 ub_s)`` (from ``0.5 ||w_s||^2 <= objective_s``),

        w_s . z_j + b_s = (w_s . x_i + b_s) + w_s . (z_j - x_i)
                        <= ub_s / C - 1 + sqrt(2 ub_s) min_i ||z_j - x_i||.

    Also returns box bounds on ``b_s`` from the same argument (``||x_i||`` in place of the
    distance; positive rows bound it from below).
    """
    from scipy.spatial import cKDTree

    m, S = Xc.shape[0], Y_pm.shape[1]
    M = np.empty((m, S))
    b_lo, b_hi = np.empty(S), np.empty(S)
    norms = np.linalg.norm(Xl, axis=1)
    for s in range(S):
        r = math.sqrt(2.0 * ub_species[s])
        neg, pos = Y_pm[:, s] < 0, Y_pm[:, s] > 0
        dist = cKDTree(Xl[neg]).query(Xc, k=1)[0]
        M[:, s] = ub_species[s] / C - 1.0 + r * dist
        b_hi[s] = ub_species[s] / C - 1.0 + r * float(norms[neg].min())
        b_lo[s] = 1.0 - ub_species[s] / C - r * float(norms[pos].min())
    return M, b_lo, b_hi


def solve_multi_mip(
    X_lab: np.ndarray,
    Y_pm: np.ndarray,
    X_cand: np.ndarray,
    k: int,
    C: float,
    W0: np.ndarray,
    b0: np.ndarray,
    svm_objectives: np.ndarray,
    *,
    time_limit: float = 60.0,
    mip_gap: float = 1e-6,
) -> MultiMIPResult:
    """Solve multi-species TTK exactly (or to a proven gap) with SCIP.

    Model: one binary ``eta_j`` per cell shared by every species,
    ``w_s . z_j + b_s <= M_js eta_j``, ``sum_j eta_j = k``, hinge slacks per (row, species) and
    the quadratic part through per-coordinate epigraphs ``t_sl >= w_sl^2`` (SCIP wants a linear
    objective).

    Big-M (see :func:`_big_m`): ``UB`` is the warm start's objective (padded by ``1e-7``
    relative). Every other species' objective is at least its SVM optimum (``svm_objectives``,
    padded down by ``1e-6`` relative: Clarabel solves them to ``1e-9``), so species ``s`` has
    ``objective_s <= UB_s = UB - sum_{s' != s} svm_s'``. Any point no worse than the warm start
    satisfies those bounds, so the optimum is kept; the same bounds give ``|w_sl| <= sqrt(2
    UB_s)`` and a box on ``b_s``. Features are centred first (scores unchanged, intercepts
    shifted back), which keeps the intercepts small.

    Parameters
    ----------
    X_lab, Y_pm, X_cand, k, C : the problem, as for :func:`multi_feasible_direction`.
    W0, b0 : ndarray of shape (S, d) and (S,)
        A feasible warm start (FD + polish); its objective is the upper bound behind the big-M
        values and the returned objective is never above it.
    svm_objectives : ndarray of shape (S,)
        Each species' unconstrained SVM objective (a lower bound on its part of any point).
    time_limit : float
        Seconds for the whole call (big-M values included).
    mip_gap : float
        Stop once ``(objective - bound) / objective <= mip_gap`` is proved.

    Returns
    -------
    MultiMIPResult
        ``objective`` recomputed from ``(W, b)`` after making them exactly feasible; never
        above the warm start's. ``status`` is ``"optimal"`` or ``"gap_limit"`` only when the
        recomputed gap ``(objective - bound) / objective`` shows it, else ``"not_proved"``,
        ``"time_limit"`` or another SCIP limit.
    """
    from reserve.solvers._mip import _SCIP_STATUS, _import_scip

    pyscipopt = _import_scip()
    t0 = time.perf_counter()
    n, d = X_lab.shape
    m, S = X_cand.shape[0], Y_pm.shape[1]
    mu = np.vstack([X_lab, X_cand]).mean(axis=0)
    Xl, Xc = X_lab - mu, X_cand - mu
    W0 = np.asarray(W0, dtype=np.float64)
    b0c = np.asarray(b0, dtype=np.float64) + W0 @ mu
    obj0 = species_objectives(W0, b0c, Xl, Y_pm, C)
    ub = float(obj0.sum())
    ub_safe = ub * (1.0 + 1e-7) + 1e-9
    lb_species = np.maximum(np.asarray(svm_objectives, dtype=np.float64) * (1.0 - 1e-6), 0.0)
    ub_species = ub_safe - (lb_species.sum() - lb_species)
    M, b_lo, b_hi = _big_m(Xl, Y_pm, Xc, C, ub_species)

    mdl = pyscipopt.Model("multi_ttk")
    mdl.hideOutput()
    mdl.setParam("limits/time", max(time_limit - (time.perf_counter() - t0), 0.01))
    # SCIP's gap is (primal - dual) / min(|primal|, |dual|), never below ours,
    # (objective - bound) / objective; but its primal figure uses t >= w^2 only to its 1e-6
    # feasibility tolerance, a hair below the recomputed objective (measured: 1.002e-6 for a
    # 1e-6 target). Half the target leaves room for that.
    mdl.setParam("limits/gap", 0.5 * mip_gap)
    mdl.setParam("randomization/randomseedshift", 0)
    eta = mdl.addMatrixVar(m, vtype="B", name="eta")
    mdl.addCons(eta.sum() == k)
    w_vars, b_vars, xi_vars, t_vars = [], [], [], []
    for s in range(S):
        r = math.sqrt(2.0 * ub_species[s])
        w = mdl.addMatrixVar(d, vtype="C", lb=-r, ub=r, name=f"w{s}")
        bv = mdl.addVar(lb=float(b_lo[s]), ub=float(b_hi[s]), name=f"b{s}")
        xi = mdl.addMatrixVar(n, vtype="C", lb=0.0, name=f"xi{s}")
        t = mdl.addMatrixVar(d, vtype="C", lb=0.0, name=f"t{s}")
        y = Y_pm[:, s]
        mdl.addMatrixCons(y * (Xl @ w) + y * bv + xi >= 1.0)
        mdl.addMatrixCons(Xc @ w + bv - np.maximum(M[:, s], 0.0) * eta <= 0.0)
        for j in range(d):
            mdl.addCons(t[j] >= w[j] * w[j])
        w_vars.append(w)
        b_vars.append(bv)
        xi_vars.append(xi)
        t_vars.append(t)
    mdl.setObjective(
        0.5 * sum(t.sum() for t in t_vars) + C * sum(xi.sum() for xi in xi_vars), "minimize"
    )

    # Warm start: eta = 1 on the top k cells by max-score (they hold every positive cell).
    sol = mdl.createSol()
    chosen = np.zeros(m, dtype=bool)
    chosen[top_k((Xc @ W0.T + b0c).max(axis=1), k)] = True
    for j in range(m):
        mdl.setSolVal(sol, eta[j], 1.0 if chosen[j] else 0.0)
    for s in range(S):
        xi0 = np.maximum(0.0, 1.0 - Y_pm[:, s] * (Xl @ W0[s] + b0c[s]))
        for j in range(d):
            mdl.setSolVal(sol, w_vars[s][j], float(W0[s, j]))
            # A hair above w^2 so the epigraph row is not rejected by rounding.
            mdl.setSolVal(sol, t_vars[s][j], float(W0[s, j] ** 2) * (1.0 + 1e-12))
        mdl.setSolVal(sol, b_vars[s], float(b0c[s]))
        for i in range(n):
            mdl.setSolVal(sol, xi_vars[s][i], float(xi0[i]))
    accepted = bool(mdl.addSol(sol, free=True))

    mdl.optimize()
    raw_status = str(mdl.getStatus())
    status = _SCIP_STATUS.get(raw_status, raw_status)
    W_best, b_best, obj_best = W0, b0c, ub
    if mdl.getNSols() > 0:
        best = mdl.getBestSol()
        Wn = np.array([[mdl.getSolVal(best, w_vars[s][j]) for j in range(d)] for s in range(S)])
        bn = np.array([mdl.getSolVal(best, b_vars[s]) for s in range(S)])
        # Scores recomputed from (w, b): SCIP's 1e-6 feasibility tolerance can leave a cell a
        # hair positive, and its objective figure is not ours.
        bn = feasible_intercepts(Xc @ Wn.T, bn, k)
        obj_n = float(species_objectives(Wn, bn, Xl, Y_pm, C).sum())
        if obj_n < obj_best:
            W_best, b_best, obj_best = Wn, bn, obj_n
    dual = float(mdl.getDualbound())
    n_nodes = int(mdl.getNNodes())

    W_out = np.array(W_best, dtype=np.float64)
    b_out = feasible_intercepts(X_cand @ W_out.T, b_best - W_out @ mu, k)
    objective = float(species_objectives(W_out, b_out, X_lab, Y_pm, C).sum())
    best_lb = max(dual, float(lb_species.sum()))
    if best_lb > objective * (1.0 + 1e-6) + 1e-9:
        raise SolverError(
            f"the MIP's lower bound ({best_lb:.10g}) exceeds the objective of a feasible point "
            f"({objective:.10g}); a bound is wrong. Report this instance."
        )
    bound = min(best_lb, objective)
    gap = (objective - bound) / objective if objective > 0 else 0.0
    if gap <= mip_gap and status not in ("optimal", "gap_limit"):
        status = "gap_limit"
    elif gap > mip_gap and status in ("optimal", "gap_limit"):
        # SCIP's own tolerances can leave the recomputed gap a hair above the target; report
        # what we can show rather than what the solver said.
        status = "optimal" if gap <= 1e-6 and status == "optimal" else "not_proved"
    return MultiMIPResult(
        W=W_out,
        b=b_out,
        objective=objective,
        bound=float(bound),
        gap=float(gap),
        status=status,
        n_nodes=n_nodes,
        runtime=time.perf_counter() - t0,
        solver="scip",
        warm_start_accepted=accepted,
    )


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

    def _finish(self, data: MultiData, W: np.ndarray, b: np.ndarray, C: float, by: str) -> None:
        """Set the fitted attributes from ``(W, b)``; ``by`` is ``"max"`` or ``"sum"``."""
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
        self.selected_ = cand[top_k(key, data.k)]
        self.species_objective_ = species_objectives(self.coef_, b, X[data.labelled], data.Y_pm, C)
        self.objective_ = float(self.species_objective_.sum())
        self.n_features_in_ = X.shape[1]
        self.n_species_ = W.shape[0]


def _svm_per_species(X_lab, Y_pm, C):
    fits = [solve_fixed_set(X_lab, Y_pm[:, s], C) for s in range(Y_pm.shape[1])]
    W = np.vstack([r.w for r in fits])
    b = np.array([r.b for r in fits], dtype=np.float64)
    return W, b, np.array([r.objective for r in fits])


class MultiTTK(_MultiTopKMixin):
    """Multi-species Transductive Top K: one hinge scorer per species, ``k`` shared cells.

    Minimises ``sum_s [0.5 ||w_s||^2 + C sum_i [1 - y_is (w_s . x_i + b_s)]_+]`` subject to at
    most ``k`` candidate cells having a positive max-score ``max_s (w_s . z_j + b_s)``, then
    selects exactly ``k`` cells: the top ``k`` by max-score, ties to the lower row. With one
    species it is :class:`reserve.solvers.TTK`.

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
        Accepted for the same interface as :class:`reserve.solvers.TTK`; SCIP's standard solve
        is sequential.
    random_state : int or None
        The fit is deterministic; accepted for the common interface.

    Attributes
    ----------
    coef_ : ndarray of shape (n_species, n_features)
    intercept_ : ndarray of shape (n_species,)
    selected_ : ndarray of shape (k,)
        Row indices of the chosen cells, best first.
    candidates_ : ndarray
        Row indices of all candidates; ``candidate_scores_`` (m, n_species) their scores.
    objective_ : float
        Recomputed from ``coef_`` and ``intercept_``; ``species_objective_`` per species.
    init_objective_, fd_objective_ : float
        Objective of the start and after the feasible-direction method.
    objective_history_ : list of float
        After every FD iteration, then after every accepted polish swap (non-increasing).
    n_iter_, n_swaps_ : int
        FD iterations; polish swaps accepted.
    stop_reason_ : str
        Why FD stopped (see :func:`reserve.solvers._fd.feasible_direction`).
    status_ : str
        ``"local"`` for FD (+ polish); the MIP's status otherwise (``"optimal"``,
        ``"gap_limit"``, ``"time_limit"``, ``"not_proved"``, ...).
    bound_, gap_, n_nodes_, mip_solver_ : MIP only
        Proven lower bound, relative gap, branch-and-bound nodes, ``"scip"``.
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

    def _check_params(self) -> float:
        return check_solver_params(self, {"max_iter": 500, "threads": 1})

    def fit(self, X: np.ndarray, Y: np.ndarray) -> MultiTTK:
        """Fit one scorer per species and select exactly ``k`` shared cells.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Labelled and candidate rows (standardised features).
        Y : array-like of shape (n_samples, n_species)
            1 / 0 in every column of a labelled row, -1 in every column of a candidate row.

        Returns
        -------
        self
        """
        t0 = time.perf_counter()
        C = self._check_params()
        data = check_multi_transductive(X, Y, self.k)
        k = data.k
        # Solve in a canonical row order: the answer does not depend on the input order.
        lab_pos = canonical_order(data.X[data.labelled])
        X_lab = data.X[data.labelled[lab_pos]]
        Y_pm = data.Y_pm[lab_pos]
        X_cand = data.X[canonical_order(data.X, data.candidates)]

        W, b, svm_obj = _svm_per_species(X_lab, Y_pm, C)
        b = feasible_intercepts(X_cand @ W.T, b, k)
        self.init_objective_ = float(species_objectives(W, b, X_lab, Y_pm, C).sum())
        fd = multi_feasible_direction(X_lab, Y_pm, X_cand, k, C, W, b, max_iter=self.max_iter)
        W, b = fd.W, fd.b
        self.fd_objective_ = fd.objective
        self.n_iter_ = fd.n_iter
        self.stop_reason_ = fd.stop_reason
        history = list(fd.history)
        self.n_swaps_ = 0
        if self.polish:
            pol = multi_polish(X_lab, Y_pm, X_cand, k, C, W, b)
            # The polish starts from FD's own set, so it cannot be worse; keep FD's point if
            # the QP solver's rounding made it so by a hair.
            if pol.objective <= fd.objective:
                W, b = pol.W, pol.b
                history.extend(pol.history[1:])
            self.n_swaps_ = pol.n_swaps
        self.status_ = "local"
        if self.solver == "mip":
            res = solve_multi_mip(
                X_lab,
                Y_pm,
                X_cand,
                k,
                C,
                W,
                b,
                svm_obj,
                time_limit=float(self.time_limit),
                mip_gap=float(self.mip_gap),
            )
            W, b = res.W, res.b
            self.status_ = res.status
            self.bound_ = res.bound
            self.gap_ = res.gap
            self.n_nodes_ = res.n_nodes
            self.mip_solver_ = res.solver
        self.objective_history_ = history
        self._finish(data, W, b, C, "max")
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

    Attributes
    ----------
    coef_ : ndarray of shape (n_species, n_features)
    intercept_ : ndarray of shape (n_species,)
        Shifted intercepts; ``raw_intercept_`` the SVMs' own.
    selected_, candidates_, candidate_scores_, objective_, species_objective_, runtime_
        As for :class:`MultiTTK`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[-2.0], [-1.0], [1.0], [2.0], [0.5], [3.0], [-3.0]])
    >>> Y = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [-1, -1], [-1, -1], [-1, -1]])
    >>> MultiSVM(k=1, C=1.0).fit(X, Y).selected_.tolist()
    [5]
    """

    def __init__(self, k: int = 10, C: float = 1.0) -> None:
        self.k = k
        self.C = C

    def fit(self, X: np.ndarray, Y: np.ndarray) -> MultiSVM:
        """Fit one SVM per species on the labelled rows, select ``k`` cells; return ``self``."""
        t0 = time.perf_counter()
        C = check_positive_real(self.C, "C")
        data = check_multi_transductive(X, Y, self.k)
        W, b, _ = _svm_per_species(data.X[data.labelled], data.Y_pm, C)
        self.raw_intercept_ = b
        self._finish(data, W, b, C, "sum")
        self.runtime_ = time.perf_counter() - t0
        return self
