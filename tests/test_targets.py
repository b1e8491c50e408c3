"""Tests of reserve.solvers.targets: brute-force oracle, complementarity, bounds, validation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from reserve.errors import InvalidInputError
from reserve.solvers import plan_species, reachable
from reserve.solvers.targets import STAGE_TOLERANCE, shortfall_objective


def _subsets(n, k=None, cost=None, budget=None):
    """Every feasible plan: the k-subsets, or every subset within the money budget."""
    if cost is None:
        yield from itertools.combinations(range(n), k)
        return
    for r in range(1, n + 1):
        for sub in itertools.combinations(range(n), r):
            if cost[list(sub)].sum() <= budget * (1 + 1e-12):
                yield sub


def _brute(P, targets, weights, base, k=None, cost=None, budget=None):
    """Hierarchical optimum ``(F*, U*)`` by enumeration, with the module's stage tolerance."""
    rows = []
    for sub in _subsets(P.shape[0], k, cost, budget):
        e = base + P[list(sub)].sum(0)
        rows.append((shortfall_objective(e, targets, weights), float(weights @ e)))
    F = np.array([r[0] for r in rows])
    U = np.array([r[1] for r in rows])
    F_star = F.min()
    return F_star, U[F <= F_star + STAGE_TOLERANCE * max(1.0, F_star)].max()


def _rescore(plan, P, targets, weights, base):
    """``(F, U)`` recomputed from the selected rows alone."""
    e = base + P[plan.selected].sum(0)
    return shortfall_objective(e, targets, weights), float(weights @ e)


def _instance(seed, n, S, with_targets):
    rng = np.random.default_rng(seed)
    P = rng.beta(0.5, 1.5, size=(n, S))
    weights = rng.uniform(0.5, 2.0, S)
    base = rng.uniform(0.0, 0.3, S)
    targets = None
    if with_targets:
        targets = rng.uniform(0.8, 2.5, S)
        targets[0] = np.nan
    return P, weights, base, targets


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("with_targets", [True, False])
@pytest.mark.parametrize("money", [False, True])
def test_matches_brute_force(seed, with_targets, money):
    n, S = 8 + seed % 3, 2 + seed % 2
    P, weights, base, targets = _instance(seed, n, S, with_targets)
    tv = np.full(S, np.nan) if targets is None else targets
    if money:
        cost = np.random.default_rng(seed + 100).uniform(0.5, 2.0, n)
        budget = float(cost.sum() / 3)
        F_star, U_star = _brute(P, tv, weights, base, cost=cost, budget=budget)
        kw = {"cost": cost}
    else:
        budget = 3
        F_star, U_star = _brute(P, tv, weights, base, k=3)
        kw = {}
    args = {"targets": targets, "weights": weights, "base": base, **kw}
    exact = plan_species(P, budget, exact=True, **args)
    F, U = _rescore(exact, P, tv, weights, base)
    assert exact.status == "optimal"
    assert F == pytest.approx(F_star, abs=1e-6)
    assert U == pytest.approx(U_star, abs=1e-6)
    heur = plan_species(P, budget, exact=False, **args)
    F, U = _rescore(heur, P, tv, weights, base)
    assert heur.shortfall_bound <= F_star + 1e-9
    assert heur.shortfall_bound <= F + 1e-12
    assert F >= F_star - 1e-9
    # The bound covers every plan with shortfall <= the heuristic's (>= F*): the optimum too.
    assert heur.utility_bound >= U_star - 1e-9
    assert heur.utility_bound >= U - 1e-12
    assert heur.shortfall_objective == pytest.approx(F)
    assert heur.utility == pytest.approx(U)
    if not money:
        assert heur.selected.size == 3
    else:
        assert kw["cost"][heur.selected].sum() <= budget * (1 + 1e-12)


def test_complementarity_joint_plan_meets_both_targets():
    # Rows 0-1 are each species' best alone; row 2 serves both. Two cells: per-species
    # top-1 picks {0, 1} and meets neither target of 1.0; {2, 0} or {2, 1} meets both.
    P = np.array(
        [
            [0.60, 0.00],
            [0.00, 0.60],
            [0.55, 0.55],
            [0.45, 0.45],
        ]
    )
    targets = np.array([1.0, 1.0])
    per_species = [int(np.argmax(P[:, s])) for s in range(2)]
    e = P[per_species].sum(0)
    assert (e < targets).all()
    for exact in (True, False):
        plan = plan_species(P, 2, targets=targets, exact=exact)
        assert plan.met.all(), exact
        assert plan.shortfall_objective == 0.0
        assert 2 in plan.selected


@pytest.mark.parametrize("n", [300, 2000])
def test_heuristic_within_its_gap_of_scip(n):
    rng = np.random.default_rng(n)
    S, k = 5, n // 20
    P = rng.beta(0.3, 2.0, size=(n, S))
    targets = 0.4 * reachable(P, k)
    heur = plan_species(P, k, targets=targets, exact=False)
    scip = plan_species(P, k, targets=targets, exact=True, time_limit=30)
    assert heur.status == "bounded" and heur.solver == "lp-rounding"
    assert heur.shortfall_bound <= scip.shortfall_objective + 1e-9
    assert heur.shortfall_objective >= scip.shortfall_bound - 1e-9
    assert heur.utility_bound >= scip.utility - 1e-6
    assert heur.gap <= 0.01  # measured ~1e-3 at these sizes
    assert heur.selected.size == k


def test_reachable_matches_brute_force():
    rng = np.random.default_rng(3)
    P = rng.uniform(size=(7, 3))
    base = np.array([0.1, 0.0, 1.0])
    best = np.max([P[list(s)].sum(0) for s in itertools.combinations(range(7), 3)], axis=0)
    assert np.allclose(reachable(P, 3, base=base), base + best)
    cost = rng.uniform(0.5, 2.0, 7)
    exact = np.max(
        [P[list(s)].sum(0) for s in _subsets(7, cost=cost, budget=2.5)],
        axis=0,
    )
    bound = reachable(P, 2.5, cost=cost)
    assert (bound >= exact - 1e-12).all()


def test_no_targets_is_top_k_with_ties_by_row():
    P = np.array([[0.5, 0.5], [0.2, 0.2], [0.5, 0.5], [0.9, 0.1]])
    plan = plan_species(P, 2)
    assert plan.selected.tolist() == [0, 2]
    assert plan.solver == "top-k" and plan.status == "optimal" and plan.gap == 0.0
    assert plan.met.all() and (plan.shortfall == 0).all()


def test_deterministic():
    P, weights, base, targets = _instance(1, 400, 4, True)
    a = plan_species(P, 20, targets=targets, weights=weights, base=base, exact=False)
    b = plan_species(P, 20, targets=targets, weights=weights, base=base, exact=False)
    assert np.array_equal(a.selected, b.selected)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"P": np.ones(3)}, "2-D"),
        ({"P": np.full((3, 2), 1.5)}, r"\[0, 1\]"),
        ({"P": np.array([[0.1, np.nan], [0.2, 0.3]])}, "finite"),
        ({"targets": [1.0]}, "targets"),
        ({"targets": [-1.0, 1.0]}, "targets"),
        ({"weights": [1.0, -1.0]}, "weights"),
        ({"base": [0.0, 0.0, 0.0]}, "base"),
        ({"budget": 0}, "cell budget"),
        ({"budget": 5}, "cell budget"),
        ({"cost": [1.0, 1.0]}, "cost"),
        ({"cost": [1.0, 0.0, 1.0]}, "cost"),
        ({"cost": [2.0, 2.0, 2.0], "budget": 1.0}, "money budget"),
    ],
)
def test_validation(kwargs, match):
    args = {"P": np.full((3, 2), 0.5), "budget": 2, **kwargs}
    with pytest.raises(InvalidInputError, match=match):
        plan_species(args.pop("P"), args.pop("budget"), **args)
    with pytest.raises(ValueError):
        plan_species(np.ones(3), 1)
