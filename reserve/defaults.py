"""Defaults, in one place: of the solvers, the ingest, the default region and ``reserve select``.

The command line's flags and the Python arguments share these names; the options of
``reserve select`` are declared in :mod:`reserve.options` and checked together in
:class:`reserve.config.SelectOptions`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from reserve.methods import METHODS, MODELS

__all__ = [
    "DEFAULT_REGION",
    "EFFORT_COLUMNS",
    "EFFORT_PREFIX",
    "INGEST_DEFAULTS",
    "LEARN_FROM",
    "MAX_DEFAULT_JOBS",
    "MAX_SEED",
    "PLANNING_UNIT_COLUMNS",
    "SELECT_DEFAULTS",
    "SELECT_METHODS",
    "SELECT_MODELS",
    "SPECIES_DETECTIONS_PREFIX",
    "SPECIES_LABEL_PREFIX",
    "TTK_DEFAULTS",
    "DefaultRegion",
    "IngestDefaults",
    "SelectDefaults",
    "TTKDefaults",
    "species_slug",
]

#: Fixed leading columns of the ``planning_units`` layer written by ``reserve ingest`` (the
#: habitat features and the geometry follow). ``reserve select`` reads it as the schema.
PLANNING_UNIT_COLUMNS = (
    "cell_id",
    "role",
    "label",
    "n_checklists",
    "n_detections",
    "effort_hours",
    "effort_km",
    "public_fraction",
    "locked_out",
    "region_fraction",
)


#: Per-cell survey effort columns of ``planning_units`` that ``effort=True`` turns into
#: covariates (those present): checklists, hours and kilometres, each ``log1p``-transformed.
EFFORT_COLUMNS = ("n_checklists", "effort_hours", "effort_km")

#: Prefix of the effort covariate columns ``reserve select`` adds (``effort__log_n_checklists``);
#: never read back as habitat features.
EFFORT_PREFIX = "effort__"


#: Most worker processes ``n_jobs`` defaults to (one per processor up to this many).
MAX_DEFAULT_JOBS = 8


def _available_cpus(cap: int) -> int:
    """Processors this process may run on (its affinity mask where the OS has one), capped."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity masks (macOS, Windows)
        n = os.cpu_count() or 1
    return max(1, min(n, cap))


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
    region_threshold : float
        A private cell is a candidate only when more than this fraction of it lies inside the
        region (a planner buys land in the region, not across its border).
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
    region_threshold: float = 0.5
    chunksize: int = 500_000
    engine: str = "local"


INGEST_DEFAULTS = IngestDefaults()


@dataclass(frozen=True)
class DefaultRegion:
    """The embedded default region: a real Georgia landscape with a simulated species.

    Attributes
    ----------
    species : str
        Common name of the first virtual species in the simulated EBD (see
        :mod:`reserve.paper.simulate`); its labels are the ``label`` column of the default ingest.
    scientific_name : str
        Its (invented) scientific name.
    species_all : tuple of str
        Every virtual species of the simulation, the first being ``species``; the default
        ingest labels all of them (``label__<slug>`` columns, see :func:`species_slug`).
    scientific_names_all : tuple of str
        Their (invented) scientific names, in the same order.
    months : tuple of int
        Months of the checklists kept by the ingest (the breeding season).
    cell_size : float
        Side of the planning units, in metres.
    seed : int
        Seed of the shipped simulation (``python -m pipelines.default_region --seed 0``).
    prevalence : float
        Target share of the region's cells the species truly occupies.
    """

    species: str = "Virtual Thrush"
    scientific_name: str = "Hylocichla simulata"
    species_all: tuple[str, ...] = ("Virtual Thrush", "Virtual Quail")
    scientific_names_all: tuple[str, ...] = ("Hylocichla simulata", "Colinus simulatus")
    months: tuple[int, ...] = (5, 6)
    cell_size: float = 3000.0
    seed: int = 0
    prevalence: float = 0.22


DEFAULT_REGION = DefaultRegion()

#: Methods of ``reserve select --method`` (:data:`reserve.methods.METHODS`, where each one's
#: capabilities are declared).
SELECT_METHODS = METHODS


@dataclass(frozen=True)
class SelectDefaults:
    """Default parameters of :func:`reserve.select.select_reserve` and ``reserve select``.

    Attributes
    ----------
    method : str
        ``ttk`` (feasible direction + polish), ``ttk-mip`` (exact, SCIP or Gurobi),
        ``ttk-bnb`` (exact, the package's own branch and bound; stronger on many features) or
        a baseline: ``svm``, ``tsvm``, ``svmperf``, ``toppush``, ``aatp``.
    C : float or "cv"
        Hinge-loss weight; ``"cv"`` chooses it from ``Cs`` by the paper's repeated 2-fold
        transductive cross-validation on the training cells. The default is a fixed C = 1
        (TTK's default) because the cross-validation costs 50 fits (about 10 s for 300
        training cells), more than the 5 s budget of a cached default run.
    Cs : tuple of float
        Grid searched when ``C == "cv"`` (the paper's).
    cv_repeats, cv_folds : int
        Repeats and folds of that cross-validation.
    cv_k_fraction : float
        Budget inside the cross-validation, as a share of the held-out fold.
    seed : int
        Seed of the cross-validation folds and of the solvers' random choices.
    out : str
        Folder of ``reserve.gpkg``.
    map_dir : str
        Folder of the HTML map when no map path is given (``maps/<name>.html``).
    time_limit : float
        Seconds allowed to the exact solver (``ttk-mip``, ``ttk-bnb``) per fit.
    map_max_cells : int
        Most candidate and training cells drawn on the map as polygons; beyond it the
        lowest-scoring candidates are thinned (selected cells are always drawn).
    bootstrap : int
        Refits on resampled training cells for ``selection_frequency``; 0 for none.
    exclude_novel : bool
        Keep out of the selection every candidate cell whose habitat is *novel*: outside the
        training cells' range on some habitat feature (a negative MESS,
        :mod:`reserve.novelty`), where the model's score is an extrapolation. Off by default:
        such cells are flagged (the ``novel`` column), not removed.
    n_jobs : int
        Worker processes for AutoTTK's cross-validation folds and the bootstrap refits
        (results do not depend on it): the processors this process may use, at most
        :data:`MAX_DEFAULT_JOBS`. On 2 cores the default model's 6 folds then run 2 at a
        time (docs/benchmarks.md, "Speed of the default run").
    model : str
        What TTK learns from the features: ``auto`` (the feature map and C chosen by
        cross-validation on the training cells, :class:`reserve.solvers.AutoTTK`), ``linear``
        (the paper's TTK on the standardised features) or one map of :data:`SELECT_MODELS`.
    effort : bool
        Add each cell's survey effort (:data:`EFFORT_COLUMNS`, ``log1p``) as covariates:
        training cells keep their own, every other cell is scored at the standard effort
        (the training cells' median), so the ranking is of habitat, not of birder density
        (eBird's analytical guidelines). See ``docs/benchmarks.md`` for the measurement
        behind the default.
    learn_from : str
        Whose labels train the habitat model: ``public`` (the surveyed public cells) or
        ``surveyed`` (the surveyed private cells too).
    boundary_penalty : float
        Weight of the selection's boundary length in TTK's objective (0: none).
    overwrite : bool
        Replace existing outputs (off: an existing output is refused).
    strict_targets : bool
        Refuse a species' target above what the candidates can reach (off: warn and plan,
        the shortfall reported).
    joint_fit : bool
        Several species: one joint TTK fit with a shared k (``MultiTTK``) instead of a fit
        per species and a plan over their calibrated probabilities.
    """

    method: str = "ttk"
    C: float | str = 1.0
    Cs: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)
    cv_repeats: int = 5
    cv_folds: int = 2
    cv_k_fraction: float = 0.05
    seed: int = 0
    out: str = "results"
    map_dir: str = "maps"
    time_limit: float = 60.0
    map_max_cells: int = 25_000
    bootstrap: int = 0
    exclude_novel: bool = False
    n_jobs: int = field(default_factory=lambda: _available_cpus(MAX_DEFAULT_JOBS))
    model: str = "auto"
    effort: bool = False
    learn_from: str = "public"
    boundary_penalty: float = 0.0
    overwrite: bool = False
    strict_targets: bool = False
    joint_fit: bool = False


SELECT_DEFAULTS = SelectDefaults()

#: Values of ``learn_from=`` / ``--learn-from``.
LEARN_FROM = ("public", "surveyed")

#: Values of ``model=`` / ``--model`` (:data:`reserve.methods.MODELS`: ``auto``, which
#: chooses among the feature maps by cross-validation, or one feature map).
SELECT_MODELS = MODELS


#: Prefixes of the per-species columns of ``planning_units`` written by an ingest of several
#: species: ``label__<slug>`` (1 / 0 / -1, as ``label``) and ``n_detections__<slug>`` for every
#: species, the first included; ``<slug>`` is :func:`species_slug` of the name as given.
SPECIES_LABEL_PREFIX = "label__"
SPECIES_DETECTIONS_PREFIX = "n_detections__"


def species_slug(name: str) -> str:
    """A species name as a column suffix: lower case, runs of non-alphanumerics become ``_``.

    Examples
    --------
    >>> species_slug("Wood Thrush"), species_slug("Bicknell's Thrush")
    ('wood_thrush', 'bicknell_s_thrush')
    >>> SPECIES_LABEL_PREFIX + species_slug("  Hylocichla  mustelina ")
    'label__hylocichla_mustelina'
    """
    return re.sub(r"[^0-9a-z]+", "_", str(name).lower()).strip("_")


#: The largest seed NumPy's legacy generator and scikit-learn's ``random_state`` accept.
MAX_SEED = 2**32 - 1
