"""Predict, then optimise: the best set of ``k`` cells for given scores and a boundary penalty.

The planner's usual pipeline with a suitability map from any model (a random forest, say):
choose the ``k`` candidates that maximise the summed score less ``penalty`` times the
boundary length of the set, exactly, with SCIP. The shared edges are linearised the usual
way (prioritizr's and Marxan's MIP): one variable ``y_ij`` per pair of adjacent candidates
with ``y_ij <= x_i``, ``y_ij <= x_j``; since a shared edge shortens the boundary, the solver
raises ``y_ij`` to ``min(x_i, x_j)`` by itself.

This is what ``benchmarks/bench_boundary.py`` compares TTK's joint fit against.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from reserve.errors import InvalidInputError
from reserve.solvers._mip import SCIP_STATUS, import_scip
from reserve.solvers.boundary import Boundary

__all__ = ["CompactSelection", "candidate_pool", "select_compact"]


@dataclass(frozen=True)
class CompactSelection:
    """Outcome of :func:`select_compact`.

    Attributes
    ----------
    selected : ndarray of int
        Positions of the chosen units, best score first.
    objective : float
        ``sum of scores - penalty * boundary``, recomputed from ``selected``.
    boundary : float
        Boundary length of the selection.
    status : str
        SCIP's status (``"optimal"`` when proved).
    gap : float
        Relative gap SCIP reports.
    runtime : float
        Seconds.
    """

    selected: np.ndarray
    objective: float
    boundary: float
    status: str
    gap: float
    runtime: float


def candidate_pool(scores: np.ndarray, term: Boundary, k: int, penalty: float) -> np.ndarray:
    """The units that can belong to an optimal set: a sound reduction before the MIP.

    Swapping a selected unit ``j`` for an outsider ``i`` changes the boundary by at most
    ``D = max(own) - min(own) + 2 max_j sum_l A_jl``, so an optimal set holds no unit scoring
    below ``s_(k) - penalty * D`` (``s_(k)`` the ``k``-th best score): else one of the ``k``
    best would be outside it, and swapping it in would gain. Returns their positions.
    """
    if penalty == 0.0:
        return np.sort(np.argsort(-scores, kind="stable")[:k])
    reach = float(term.own.max() - term.own.min())
    reach += 2.0 * float(np.asarray(term.shared.sum(axis=1)).max(initial=0.0))
    kth = float(np.partition(scores, scores.size - k)[scores.size - k])
    return np.flatnonzero(scores >= kth - penalty * reach)


def select_compact(
    scores: object,
    term: Boundary,
    k: int,
    penalty: float,
    *,
    time_limit: float = 60.0,
    gap: float = 1e-6,
    max_pool: int | None = None,
) -> CompactSelection:
    """The ``k`` units maximising ``sum(scores[S]) - penalty * B(S)``, solved by SCIP.

    Only the units of :func:`candidate_pool` enter the MIP (the others cannot be in an
    optimal set); ``max_pool`` caps them at that many best scores, and ``status`` then
    says ``"restricted"`` unless the cap removed none.

    Parameters
    ----------
    scores : array-like of shape (m,)
        Each unit's value (e.g. a model's probability of presence).
    term : Boundary
        Boundary length of sets of these ``m`` units.
    k : int
        Units to choose (``0 < k <= m``).
    penalty : float
        Weight of the boundary length (``>= 0``), in score units per unit of length.
    time_limit, gap : float
        SCIP's limits; the best set found is returned either way (``status`` says which).
    max_pool : int or None
        At most this many units in the MIP (the best scores of the pool).

    Returns
    -------
    CompactSelection

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import sparse
    >>> A = sparse.diags([1.0, 1.0], [-1, 1], shape=(4, 4))  # four cells in a row
    >>> term = Boundary(np.full(4, 4.0), A)
    >>> s = np.array([1.0, 0.2, 0.9, 0.95])
    >>> select_compact(s, term, 2, 0.0).selected.tolist()
    [0, 3]
    >>> select_compact(s, term, 2, 0.1).selected.tolist()
    [3, 2]
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.size != term.m or not np.all(np.isfinite(s)):
        raise InvalidInputError(f"scores must be {term.m} finite values, one per unit")
    if not 0 < int(k) <= s.size or not np.isfinite(penalty) or penalty < 0:
        raise InvalidInputError(f"need 0 < k <= {s.size} and penalty >= 0; got {k}, {penalty}")
    t0 = time.perf_counter()
    pool = candidate_pool(s, term, int(k), float(penalty))
    restricted = max_pool is not None and pool.size > max_pool
    if restricted:
        pool = np.sort(pool[np.argsort(-s[pool], kind="stable")[:max_pool]])
    chosen, status, gap_ = _solve_pool(
        s[pool], term.take(pool), int(k), float(penalty), float(time_limit), float(gap)
    )
    chosen = pool[chosen]
    chosen = chosen[np.lexsort((chosen, -s[chosen]))]
    mask = np.zeros(s.size, dtype=bool)
    mask[chosen] = True
    length = term.length(mask)
    return CompactSelection(
        selected=chosen,
        objective=float(s[chosen].sum() - penalty * length),
        boundary=length,
        status="restricted" if restricted else status,
        gap=gap_,
        runtime=time.perf_counter() - t0,
    )


def _solve_pool(s, term, k, penalty, time_limit, gap):
    """SCIP on the pool: positions chosen, status, gap."""
    pyscipopt = import_scip()
    mdl = pyscipopt.Model("compact")
    mdl.hideOutput()
    mdl.setParam("limits/time", float(time_limit))
    mdl.setParam("limits/gap", float(gap))
    mdl.setParam("randomization/randomseedshift", 0)
    x = mdl.addMatrixVar(s.size, vtype="B", name="x")
    A = term.shared.tocoo()
    upper = A.row < A.col
    pi, pj, ell = A.row[upper], A.col[upper], A.data[upper]
    y = mdl.addMatrixVar(pi.size, vtype="C", lb=0.0, ub=1.0, name="y") if pi.size else None
    mdl.addCons(x.sum() == int(k))
    lin = s - penalty * term.own
    obj = pyscipopt.quicksum(float(lin[i]) * x[i] for i in range(s.size))
    if y is not None:
        for p in range(pi.size):
            mdl.addCons(y[p] <= x[int(pi[p])])
            mdl.addCons(y[p] <= x[int(pj[p])])
        obj += pyscipopt.quicksum(2.0 * penalty * float(ell[p]) * y[p] for p in range(pi.size))
    mdl.setObjective(obj, "maximize")
    start = mdl.createSol()
    for i in np.argsort(-s, kind="stable")[: int(k)]:
        mdl.setSolVal(start, x[int(i)], 1.0)
    mdl.addSol(start, free=True)
    mdl.optimize()
    best = mdl.getBestSol()
    chosen = np.flatnonzero(np.array([mdl.getSolVal(best, x[i]) for i in range(s.size)]) > 0.5)
    status = str(mdl.getStatus())
    return chosen, SCIP_STATUS.get(status, status), float(mdl.getGap())
