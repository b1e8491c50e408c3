"""Defaults live here, in one place; CLI flags and Python arguments share these names."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["INGEST_DEFAULTS", "TTK_DEFAULTS", "IngestDefaults", "TTKDefaults"]


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


@dataclass(frozen=True)
class IngestDefaults:
    """Default parameters of :func:`reserve.ingest.ingest` (the eBird best-practice values).

    Attributes
    ----------
    cell_size : float
        Side of the square planning units, in metres of the equal-area CRS.
    protocols : tuple of str
        eBird protocols kept (compared case-insensitively).
    max_hours : float
        Longest checklist duration kept, in hours.
    max_km : float
        Longest distance travelled kept, in kilometres (stationary counts travel 0 km).
    max_observers : int
        Largest party size kept.
    max_speed_kmh : float
        Fastest travel speed kept (distance / duration), in km/h.
    public_threshold : float
        A cell whose public-land fraction exceeds this is public.
    locked_threshold : float
        A cell whose locked-out fraction exceeds this is locked out.
    chunksize : int
        Rows parsed per chunk while streaming EBD / SED text; bounds memory.
    engine : str
        ``"local"`` (one process, streaming) or ``"dask"`` (a Dask cluster).
    """

    cell_size: float = 3000.0
    protocols: tuple[str, ...] = ("Stationary", "Traveling")
    max_hours: float = 6.0
    max_km: float = 10.0
    max_observers: int = 10
    max_speed_kmh: float = 100.0
    public_threshold: float = 0.5
    locked_threshold: float = 0.5
    chunksize: int = 500_000
    engine: str = "local"


INGEST_DEFAULTS = IngestDefaults()
