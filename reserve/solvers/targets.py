"""Placeholder of the several-species target solver (replaced by main's module on merge).

A greedy plan: the least weighted shortfall, then the weighted expected occupied cells.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

__all__ = ["SpeciesPlan", "plan_species", "reachable"]


@dataclass(frozen=True)
class SpeciesPlan:
    """The plan's cells and what each species gets."""

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


def reachable(P, budget, *, cost=None, base=None):
    """The most each species alone can get within the budget."""
    P = np.asarray(P, dtype=float)
    base = np.zeros(P.shape[1]) if base is None else np.asarray(base, dtype=float)
    out = np.empty(P.shape[1])
    for j in range(P.shape[1]):
        if cost is None:
            out[j] = np.sort(P[:, j])[::-1][: int(budget)].sum()
        else:
            raise NotImplementedError("placeholder: cell budgets only")
    return out + base


def _greedy(P, k, targets, weights):
    n, _S = P.shape
    need = np.nan_to_num(targets, nan=0.0).copy()
    taken = np.zeros(n, dtype=bool)
    value = P @ weights
    for _ in range(min(int(k), n)):
        gain = np.minimum(P, np.maximum(need, 0.0)) @ weights
        key = np.where(taken, -np.inf, gain * 1e6 + value)
        i = int(np.argmax(key))
        taken[i] = True
        need -= P[i]
    return taken


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
):
    """The plan: least weighted shortfall, then the most weighted expected occupied cells."""
    t0 = time.perf_counter()
    P = np.asarray(P, dtype=float)
    S = P.shape[1]
    w = np.ones(S) if weights is None else np.asarray(weights, dtype=float)
    b = np.zeros(S) if base is None else np.asarray(base, dtype=float)
    t = np.full(S, np.nan) if targets is None else np.asarray(targets, dtype=float)
    x = _greedy(P, budget, t - b, w)
    sel = np.flatnonzero(x)
    expected = P[sel].sum(axis=0) + b
    shortfall = np.where(np.isfinite(t), np.maximum(t - expected, 0.0), 0.0)
    met = np.where(np.isfinite(t), shortfall <= 1e-6, True)
    return SpeciesPlan(
        selected=sel,
        expected=expected,
        targets=t,
        shortfall=shortfall,
        met=met,
        shortfall_objective=float(shortfall @ w),
        utility=float(expected @ w),
        shortfall_bound=float(shortfall @ w),
        utility_bound=float(expected @ w),
        gap=0.0,
        status="bounded",
        solver="greedy",
        seconds=time.perf_counter() - t0,
    )
