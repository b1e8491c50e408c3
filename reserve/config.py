"""Defaults live here, in one place; CLI flags and Python arguments share these names."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TTK_DEFAULTS", "TTKDefaults"]


@dataclass(frozen=True)
class TTKDefaults:
    """Default parameters of :class:`reserve.solvers.TTK`.

    Attributes
    ----------
    C : float
        Hinge-loss weight (the paper's C).
    max_iter : int
        Feasible-direction iterations (500, as in the paper).
    step_shrink : float
        Fraction of the maximal feasible step searched by the line search (0.5, as in the paper).
    boundary_rtol : float
        A candidate is *on* the boundary when ``|score| <= boundary_rtol * scale`` where
        ``scale = |b| + ||w|| * max_j ||x_j||`` bounds every candidate score.
    polish : bool
        Run the swap local search after the feasible-direction method.
    polish_max_rounds : int
        Upper bound on improving swaps accepted by the polish.
    polish_pairs : int
        Swap pairs evaluated per polish round before giving up on that round.
    tol : float
        Relative objective decrease below which an iteration or a swap counts as no progress.
    """

    C: float = 1.0
    max_iter: int = 500
    step_shrink: float = 0.5
    boundary_rtol: float = 1e-9
    polish: bool = True
    polish_max_rounds: int = 200
    polish_pairs: int = 40
    tol: float = 1e-9


TTK_DEFAULTS = TTKDefaults()
