"""Brute-force TTK oracle for tiny instances, independent of the package's solvers.

Enumerates every k-subset S of the candidates (with a money budget: every maximal subset whose
cost fits), solves the convex QP "hinge SVM with every candidate outside S scoring <= 0" with
scipy's SLSQP (not Clarabel, which the package uses), and returns the smallest objective. This
is the exact optimum of TTK's relaxed problem (at most k candidates score positive; or the
positive candidates cost at most the budget).
"""

from __future__ import annotations

import json
from itertools import combinations
from math import comb
from pathlib import Path

import numpy as np
from scipy.optimize import minimize


def _objective(w, b, X, y_pm, C, c=None) -> float:
    """``0.5 ||w||^2 + C sum_i c_i [1 - y_i (w.x_i + b)]_+`` (``c`` None: every ``c_i = 1``)."""
    hinge = np.maximum(0.0, 1.0 - y_pm * (X @ w + b))
    if c is None:
        return float(0.5 * w @ w + C * hinge.sum())
    return float(0.5 * w @ w + C * sum(ci * hi for ci, hi in zip(c, hinge, strict=True)))


def solve_subset_qp(X, y_pm, C, Z, c=None):
    """Primal QP in (w, b, xi) with constraints Z w + b <= 0, by SLSQP from a feasible start.

    ``c``: row weights of the hinge terms (``None``: all 1).
    """
    n, d = X.shape
    nv = d + 1 + n
    cw = np.ones(n) if c is None else np.asarray(c, dtype=float)

    def f(v):
        w, xi = v[:d], v[d + 1 :]
        if c is None:
            return 0.5 * w @ w + C * xi.sum()
        return 0.5 * w @ w + C * (cw @ xi)

    def g(v):
        out = np.zeros(nv)
        out[:d] = v[:d]
        out[d + 1 :] = C * cw if c is not None else C
        return out

    A_h = np.hstack([y_pm[:, None] * X, y_pm[:, None], np.eye(n)])  # A_h v - 1 >= 0
    cons = [
        {"type": "ineq", "fun": lambda v: A_h @ v - 1.0, "jac": lambda v: A_h},
        {"type": "ineq", "fun": lambda v: v[d + 1 :], "jac": lambda v: np.eye(nv)[d + 1 :]},
    ]
    if Z.shape[0]:
        A_z = np.hstack([-Z, -np.ones((Z.shape[0], 1)), np.zeros((Z.shape[0], n))])
        cons.append({"type": "ineq", "fun": lambda v: A_z @ v, "jac": lambda v: A_z})
    v0 = np.zeros(nv)
    v0[d] = -1.0
    v0[d + 1 :] = np.maximum(0.0, 1.0 - y_pm * v0[d]) + 1e-3
    res = minimize(
        f, v0, jac=g, constraints=cons, method="SLSQP", options={"ftol": 1e-12, "maxiter": 2000}
    )
    w, b = res.x[:d], float(res.x[d])
    # Clip tiny violations so the reported point is feasible, then score it exactly.
    if Z.shape[0]:
        b = min(b, float(-(Z @ w).max()))
    return w, b, _objective(w, b, X, y_pm, C, c)


def brute_force_ttk(X, y, k, C, c=None):
    """Exact TTK optimum by enumeration: returns (objective, w, b, best_subset).

    ``y`` uses the package convention: 1/0 labelled, -1 candidates. ``c``: one hinge weight
    per labelled row, in row order (``None``: all 1).
    """
    y = np.asarray(y)
    lab, cand = np.flatnonzero(y != -1), np.flatnonzero(y == -1)
    Xl, Xc = X[lab], X[cand]
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    best = (np.inf, None, None, None)
    for S in combinations(range(len(cand)), k):
        mask = np.ones(len(cand), dtype=bool)
        mask[list(S)] = False
        w, b, obj = solve_subset_qp(Xl, y_pm, C, Xc[mask], c)
        if obj < best[0]:
            best = (obj, w, b, S)
    return best


def maximal_fitting_subsets(cost, budget):
    """Every subset of ``range(len(cost))`` whose cost fits ``budget`` and that is maximal.

    Maximal: no further candidate fits. Non-maximal subsets need no QP, since adding a
    candidate only removes a constraint. "Fits" is ``total <= budget * (1 + 1e-12)``, the
    package's rule.
    """
    m, limit = len(cost), budget * (1 + 1e-12)
    out = []
    for mask in range(1 << m):
        S = [j for j in range(m) if mask >> j & 1]
        total = sum(cost[j] for j in S)
        if total <= limit and all(total + cost[j] > limit for j in range(m) if not mask >> j & 1):
            out.append(tuple(S))
    return out


def brute_force_ttk_cost(X, y, cost, budget, C):
    """Exact TTK optimum under a money budget: returns (objective, w, b, best_subset).

    Enumerates the maximal subsets S of the candidates whose cost fits ``budget`` and solves
    the QP with every candidate outside S scoring <= 0 (SLSQP, as above). ``cost`` has one
    entry per row of ``X``; only the candidates' entries are read.
    """
    y = np.asarray(y)
    lab, cand = np.flatnonzero(y != -1), np.flatnonzero(y == -1)
    Xl, Xc = X[lab], X[cand]
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    c = np.asarray(cost, dtype=float)[cand]
    best = (np.inf, None, None, None)
    for S in maximal_fitting_subsets(c.tolist(), float(budget)):
        mask = np.ones(len(cand), dtype=bool)
        mask[list(S)] = False
        w, b, obj = solve_subset_qp(Xl, y_pm, C, Xc[mask])
        if obj < best[0]:
            best = (obj, w, b, S)
    return best


def make_cost_instance(seed: int):
    """A tiny problem with costs: m <= 10 candidates leaning positive, so the budget binds.

    Returns X, y, cost (NaN on labelled rows: they must be ignored), budget, C.
    """
    rng = np.random.default_rng(seed)
    n, m, d = int(rng.integers(12, 30)), int(rng.integers(6, 11)), int(rng.integers(2, 5))
    X = rng.normal(size=(n + m, d))
    u = rng.normal(size=d)
    X[n:] += u / np.linalg.norm(u)
    p = 1.0 / (1.0 + np.exp(-2.0 * (X[:n] @ u)))
    y_lab = (rng.random(n) < p).astype(int)
    if y_lab.min() == y_lab.max():
        y_lab[0] = 1 - y_lab[0]
    cost = np.r_[np.full(n, np.nan), rng.uniform(0.5, 3.0, m)]
    c = cost[n:]
    budget = float(rng.uniform(max(c.max(), 0.1 * c.sum()), 0.35 * c.sum()))
    C = float(rng.choice([0.1, 1.0, 10.0]))
    return X, np.r_[y_lab, -np.ones(m, dtype=int)], cost, budget, C


def binding_instance(seed: int, n: int = 10, m: int = 7, d: int = 2):
    """Tiny instance whose candidates sit mostly on the positive side, so the budget binds.

    Returns X, y (labelled rows then candidates, y == -1), X_lab, y_pm (labels in {-1, +1})
    and X_cand.
    """
    rng = np.random.default_rng(seed)
    y_lab = np.r_[0, 1, rng.integers(0, 2, n - 2)]
    X_lab = rng.standard_normal((n, d)) + np.where(y_lab[:, None] == 1, 1.0, -1.0)
    X_cand = rng.standard_normal((m, d)) * 1.5 + 0.8
    X = np.vstack([X_lab, X_cand])
    y = np.r_[y_lab, -np.ones(m, dtype=np.int64)]
    return X, y, X_lab, np.where(y_lab == 1, 1.0, -1.0), X_cand


def split_cost_instance(X, y, cost):
    """``X_lab, y_pm, X_cand, cand_cost`` of a :func:`make_cost_instance` problem."""
    lab = y != -1
    return X[lab], np.where(y[lab] == 1, 1.0, -1.0), X[~lab], cost[~lab]


def make_ttk_instance(seed: int, max_subsets: int = 400):
    """A tiny random problem: n labelled rows, m <= 14 candidates, C(m, k) <= max_subsets."""
    rng = np.random.default_rng(seed)
    while True:
        n, m, d = int(rng.integers(12, 30)), int(rng.integers(6, 15)), int(rng.integers(2, 6))
        k = int(rng.integers(1, min(5, m - 1) + 1))
        if comb(m, k) <= max_subsets:
            break
    X = rng.normal(size=(n + m, d))
    p = 1.0 / (1.0 + np.exp(-2.0 * (X[:n] @ rng.normal(size=d))))
    y_lab = (rng.random(n) < p).astype(int)
    if y_lab.min() == y_lab.max():
        y_lab[0] = 1 - y_lab[0]
    C = float(rng.choice([0.1, 1.0, 10.0]))
    return X, np.r_[y_lab, -np.ones(m, dtype=int)], k, C


def make_multi_instance(seed: int, n_species: int = 2, max_m: int = 8):
    """A tiny problem: 10-15 labelled rows, 6..max_m candidates leaning positive, k in 2..3.

    Candidates are shifted towards the positive side so that the species' SVMs mark more than
    k cells positive and the shared budget binds.
    """
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(10, 16)), int(rng.integers(6, max_m + 1))
    d, k = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    X = rng.normal(size=(n + m, d))
    X[n:] += 0.7
    Y = np.full((n + m, n_species), -1, dtype=np.int64)
    for s in range(n_species):
        p = 1.0 / (1.0 + np.exp(-2.0 * (X[:n] @ rng.normal(size=d) + 0.5)))
        y = (rng.random(n) < p).astype(np.int64)
        y[0], y[1] = 0, 1  # both classes for every species
        Y[:n, s] = y
    C = float(rng.choice([0.1, 1.0, 10.0]))
    return X, Y, k, C


def brute_force_multi(X, Y, k, C, c=None):
    """Exact optimum: every k-subset, each species' fixed-set QP by SLSQP, summed; the min.

    ``c``: hinge weights of shape (n_labelled, n_species) (``None``: all 1).
    """
    lab = Y[:, 0] != -1
    Xl, Xc = X[lab], X[~lab]
    Y_pm = np.where(Y[lab] == 1, 1.0, -1.0)
    m = Xc.shape[0]
    best = np.inf
    for subset in combinations(range(m), k):
        out = np.ones(m, dtype=bool)
        out[list(subset)] = False
        total = sum(
            solve_subset_qp(Xl, Y_pm[:, s], C, Xc[out], None if c is None else c[:, s])[2]
            for s in range(Y.shape[1])
        )
        best = min(best, total)
    return best


def make_weighted_instance(seed: int):
    """A tiny problem with hinge weights: 10-16 labelled rows, 5-8 candidates, k in 1..3.

    Returns X, y, k, C and ``c``, one weight per labelled row in 0.2 .. 3 (the positives
    weighted up, as ``class_weight="balanced"`` does, times a random factor).
    """
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(10, 17)), int(rng.integers(5, 9))
    d, k = int(rng.integers(2, 4)), int(rng.integers(1, 4))
    X = rng.normal(size=(n + m, d))
    X[n:] += 0.5
    p = 1.0 / (1.0 + np.exp(-2.0 * (X[:n] @ rng.normal(size=d) - 0.5)))
    y_lab = (rng.random(n) < p).astype(int)
    y_lab[0], y_lab[1] = 0, 1
    c = np.where(y_lab == 1, 2.0, 0.5) * rng.uniform(0.4, 1.5, n)
    C = float(rng.choice([0.1, 1.0, 10.0]))
    return X, np.r_[y_lab, -np.ones(m, dtype=int)], k, C, c


def make_weighted_multi_instance(seed: int):
    """:func:`make_multi_instance` (at most 7 candidates) with sample weights and balanced classes.

    Returns X, Y, k, C, ``sw`` (one weight per labelled row, 0.3 .. 2) and ``c`` (n_lab, S):
    ``sw_i`` times the balanced class weight of row i for species s, ``n / (2 n_class)``,
    written out here independently of the package.
    """
    X, Y, k, C = make_multi_instance(seed, max_m=7)
    rng = np.random.default_rng(1000 + seed)
    lab = Y[:, 0] != -1
    n = int(lab.sum())
    sw = rng.uniform(0.3, 2.0, n)
    c = np.empty((n, Y.shape[1]))
    for s in range(Y.shape[1]):
        ys = Y[lab, s]
        n_pos = int((ys == 1).sum())
        c[:, s] = sw * np.where(ys == 1, n / (2.0 * n_pos), n / (2.0 * (n - n_pos)))
    return X, Y, k, C, sw, c


#: Seeds of the cost oracle: their brute force runs in well under a second each.
COST_ORACLE_SEEDS = (2, 3, 8, 11, 14, 20, 21, 27, 29, 4, 23)
#: The instances whose brute-force optima are cached, per family.
ORACLE_SEEDS = {
    "ttk": tuple(range(40)),
    "ttk_cost": COST_ORACLE_SEEDS,
    "multi": tuple(range(20)),
    # Weighted families: the seeds whose brute force takes at most a few seconds.
    "ttk_weighted": (0, 2, 3, 4, 6, 7, 8, 9, 10, 11),
    "multi_weighted": (1, 6, 8, 9),
    # TTK plus a boundary penalty on a 4 x 4 grid (boundaries by shapely unions).
    "ttk_boundary": tuple(range(40)),
}


def grid_boundary_instance(seed: int, side: int = 4):
    """A tiny region: ``side x side`` unit cells, some labelled (public), 7-10 candidates.

    Returns X, y (1/0 labelled, -1 candidates; one row per cell), the cells (shapely boxes),
    k and C. The habitat is smooth in space, so good cells cluster and compete with lone ones.
    """
    import shapely

    rng = np.random.default_rng(seed)
    n_cells = side * side
    xy = np.array([(c, r) for r in range(side) for c in range(side)], dtype=float)
    cells = np.asarray([shapely.box(x, y, x + 1, y + 1) for x, y in xy], dtype=object)
    d = int(rng.integers(2, 4))
    X = np.hstack([xy / side, rng.normal(size=(n_cells, d - 1)) * 0.5])
    m = int(rng.integers(7, 11))
    cand = np.sort(rng.choice(n_cells, m, replace=False))
    lab = np.setdiff1d(np.arange(n_cells), cand)
    p = 1.0 / (1.0 + np.exp(-3.0 * (X[lab] @ rng.normal(size=X.shape[1]))))
    y = -np.ones(n_cells, dtype=int)
    y[lab] = (rng.random(lab.size) < p).astype(int)
    if y[lab].min() == y[lab].max():
        y[lab[0]] = 1 - y[lab[0]]
    k = int(rng.integers(2, 4))
    C = float(rng.choice([0.3, 1.0, 3.0]))
    return X, y, cells, k, C


def union_boundary(cells, chosen, edge_factor: float) -> float:
    """Boundary length of the union of ``cells[chosen]`` by shapely, edges on the region's
    border weighted by ``edge_factor`` (independent of reserve.adjacency)."""
    import shapely

    mine = shapely.unary_union(cells[np.asarray(chosen)]).boundary
    outer = shapely.unary_union(cells).boundary
    return mine.length - (1.0 - edge_factor) * shapely.intersection(mine, outer).length


def boundary_instance(seed: int):
    """:func:`grid_boundary_instance` with its penalty and edge factor (set by the seed)."""
    X, y, cells, k, C = grid_boundary_instance(seed)
    return X, y, cells, k, C, [0.05, 0.2, 0.5][seed % 3], [1.0, 0.5][seed % 2]


def brute_force_ttk_boundary(X, y, cells, k, C, penalty, edge_factor):
    """Exact optimum of TTK plus ``penalty`` x boundary: every k-subset of the candidates."""
    lab, cand = np.flatnonzero(y != -1), np.flatnonzero(y == -1)
    Xl, Xc = X[lab], X[cand]
    y_pm = np.where(y[lab] == 1, 1.0, -1.0)
    best = (np.inf, None)
    for S in combinations(range(cand.size), k):
        mask = np.ones(cand.size, dtype=bool)
        mask[list(S)] = False
        _, _, obj = solve_subset_qp(Xl, y_pm, C, Xc[mask])
        total = obj + penalty * union_boundary(cells, cand[list(S)], edge_factor)
        if total < best[0]:
            best = (total, cand[list(S)])
    return best


#: Where the cached optima live (written by ``python -m tests._oracle``).
OPTIMA_PATH = Path(__file__).parent / "data" / "oracle_optima.json"


def oracle_optimum(family: str, seed: int) -> float:
    """The brute force's optimum of instance ``seed`` of ``family`` (computed now, not cached)."""
    if family == "ttk":
        X, y, k, C = make_ttk_instance(seed)
        return float(brute_force_ttk(X, y, k, C)[0])
    if family == "ttk_cost":
        X, y, cost, budget, C = make_cost_instance(seed)
        return float(brute_force_ttk_cost(X, y, cost, budget, C)[0])
    if family == "ttk_weighted":
        X, y, k, C, c = make_weighted_instance(seed)
        return float(brute_force_ttk(X, y, k, C, c)[0])
    if family == "multi_weighted":
        X, Y, k, C, _, c = make_weighted_multi_instance(seed)
        return float(brute_force_multi(X, Y, k, C, c))
    if family == "ttk_boundary":
        X, y, cells, k, C, penalty, ef = boundary_instance(seed)
        return float(brute_force_ttk_boundary(X, y, cells, k, C, penalty, ef)[0])
    X, Y, k, C = make_multi_instance(seed)
    return float(brute_force_multi(X, Y, k, C))


def load_optima() -> dict[str, dict[str, float]]:
    """The cached optima: ``{family: {str(seed): optimum}}``."""
    return json.loads(OPTIMA_PATH.read_text())


if __name__ == "__main__":  # regenerate the cache: python -m tests._oracle
    optima = {
        fam: {str(s): oracle_optimum(fam, s) for s in seeds} for fam, seeds in ORACLE_SEEDS.items()
    }
    OPTIMA_PATH.parent.mkdir(exist_ok=True)
    OPTIMA_PATH.write_text(json.dumps(optima, indent=1, sort_keys=True) + "\n")
