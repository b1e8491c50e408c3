"""Defaults live here, in one place; CLI flags and Python arguments share these names."""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from reserve.errors import InvalidInputError

__all__ = [
    "CONFIG_KEYS",
    "DEFAULT_REGION",
    "EFFORT_COLUMNS",
    "EFFORT_PREFIX",
    "INGEST_DEFAULTS",
    "LEARN_FROM",
    "MAX_DEFAULT_JOBS",
    "MAX_SEED",
    "MULTI_SPECIES_METHODS",
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
    "SelectOptions",
    "TTKDefaults",
    "check_config_values",
    "load_config",
    "resolve_config",
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


#: Methods of ``reserve select --method``: TTK (feasible direction; exact by SCIP or by the
#: package's own branch and bound), the baselines.
SELECT_METHODS = ("ttk", "ttk-mip", "ttk-bnb", "svm", "tsvm", "svmperf", "toppush", "aatp")


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


SELECT_DEFAULTS = SelectDefaults()

#: Values of ``learn_from=`` / ``--learn-from``.
LEARN_FROM = ("public", "surveyed")

#: Values of ``model=`` / ``--model`` (the feature maps of :mod:`reserve.solvers.features`,
#: and ``auto``, which chooses among them by cross-validation).
SELECT_MODELS = ("auto", "linear", "spline", "interactions", "rbf", "stack", "forest")


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


# --------------------------------------------------------------------------- select options

#: Methods that select for several species at once (``--species A --species B``).
MULTI_SPECIES_METHODS = ("ttk", "ttk-mip", "svm")

_PATH_KEYS = ("cells", "out", "map", "locked_in", "locked_out")


#: The largest seed NumPy's legacy generator and scikit-learn's ``random_state`` accept.
MAX_SEED = 2**32 - 1


def _as_seed(value: Any, name: str = "seed") -> int:
    """``value`` as a seed: an integer from 0 to :data:`MAX_SEED`."""
    seed = _as_int(value, name, low=0)
    if seed > MAX_SEED:
        raise InvalidInputError(
            f"{name} must be an integer from 0 to {MAX_SEED} (2**32 - 1, the largest seed "
            f"NumPy and scikit-learn accept); received {seed}. Pass a smaller seed"
        )
    return seed


def _as_int(value: Any, name: str, *, low: int | None = None) -> int:
    """``value`` (an integer or its text) as an int, at least ``low``."""
    if isinstance(value, bool):
        ok = False
    elif isinstance(value, int) or (hasattr(value, "dtype") and value.dtype.kind in "iu"):
        ok, value = True, int(value)
    elif isinstance(value, str):
        try:
            value, ok = int(value.strip()), True
        except ValueError:
            ok = False
    else:
        ok = False
    if not ok or (low is not None and value < low):
        lo = f" >= {low}" if low is not None else ""
        raise InvalidInputError(f"{name} must be an integer{lo}; received {value!r}")
    return value


def _positive_float(value: Any) -> float | None:
    """``value`` as a positive finite float, or None when it is not one."""
    try:
        v = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        return None
    return v if v == v and v not in (float("inf"), float("-inf")) and v > 0 else None


def _as_money(value: Any) -> float:
    v = _positive_float(value)
    if v is None:
        raise InvalidInputError(
            f"budget must be a positive total cost when --cost-column is given; received "
            f"{value!r}. Pass e.g. --budget 1500 (in the cost column's units)"
        )
    return v


def _as_cells(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        if not (hasattr(value, "dtype") and value.dtype.kind in "iu" and value >= 1):
            raise InvalidInputError(
                f"budget must be a positive integer (number of cells); received {value!r}. "
                "For a total cost, pass --cost-column with the cells' cost column"
            )
    return int(value)


def _as_C(value: Any) -> float | str | None:
    if value is None:
        return None  # the model's default: chosen with the map (auto), else TTK's C = 1
    if isinstance(value, str) and value.strip().lower() in ("cv", "auto"):
        return "cv"
    c = _positive_float(value)
    if c is None:
        raise InvalidInputError(
            f"C must be a positive number or 'cv' (cross-validation); received {value!r}"
        )
    return c


def _as_species(value: Any) -> tuple[str, ...] | None:
    """Species names: None, one name, or several (``--species`` repeated)."""
    if value is None:
        return None
    if isinstance(value, str):
        names = [value]
    elif isinstance(value, list | tuple):
        names = list(value)
    else:
        names = [value]  # refused below, with the message
    if not names:
        return None
    if not all(isinstance(n, str) and n.strip() for n in names):
        raise InvalidInputError(
            f"species must be species names; received {value!r}. Pass e.g. "
            "--species 'Wood Thrush' --species 'Northern Bobwhite'"
        )
    return tuple(n.strip() for n in names)


def _as_model(value: Any) -> str:
    m = str(value).strip().lower()
    if m not in SELECT_MODELS:
        raise InvalidInputError(
            f"model={value!r} is unknown; choose one of {', '.join(SELECT_MODELS)}"
        )
    return m


def _as_learn_from(value: Any) -> str:
    m = str(value).strip().lower()
    if m not in LEARN_FROM:
        raise InvalidInputError(
            f"learn_from={value!r} is unknown; choose one of {', '.join(LEARN_FROM)}"
        )
    return m


def _as_method(value: Any) -> str:
    m = str(value).strip().lower()
    if m not in SELECT_METHODS:
        raise InvalidInputError(
            f"method={value!r} is unknown; choose one of {', '.join(SELECT_METHODS)}"
        )
    return m


def _as_penalty(value: Any) -> float | str:
    """A boundary penalty: a finite number >= 0 (text parsed) or ``"auto"``."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        v = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        v = float("nan")
    if not math.isfinite(v) or v < 0:
        raise InvalidInputError(
            f"boundary_penalty={value!r} must be a number >= 0 or 'auto'; pass e.g. "
            "--boundary-penalty 0.0001 (objective per metre of boundary) or "
            "--boundary-penalty auto (calibrated)"
        )
    return v


def _as_seconds(value: Any) -> float:
    seconds = _positive_float(value)
    if seconds is None:
        raise InvalidInputError(f"time_limit must be a number of seconds > 0; received {value!r}")
    return seconds


@dataclass(frozen=True)
class SelectOptions:
    """The options of one selection, checked once: ``reserve select``'s flags, by name.

    Built from Python keyword arguments (``SelectOptions(budget=30, method="svm")``), or from
    the command line and a TOML file by :meth:`from_sources`; every value is checked and
    normalised when the object is made, so the code that runs the selection trusts it. The
    defaults are those of :data:`SELECT_DEFAULTS`.

    Attributes
    ----------
    budget : int or float
        Number of cells to select (an int >= 1) or, with ``cost_column``, a positive total
        cost.
    cells : path-like or None
        ``planning_units`` GeoPackage; None for the embedded default region.
    method : str
        One of :data:`SELECT_METHODS`.
    C : float, "cv" or None
        Hinge-loss weight, or ``"cv"`` (cross-validation over ``SELECT_DEFAULTS.Cs``); None
        (the default): chosen with the feature map when ``model`` is ``auto``, else 1.
    seed : int
        Seed of the cross-validation folds, the solver and the bootstrap.
    out : path-like or None
        Folder of ``reserve.gpkg``; nothing is written when None.
    map : path-like, bool or None
        HTML map path; None or True for the default name, False for no map.
    overwrite : bool
        Replace existing outputs.
    time_limit : float
        Seconds per exact fit.
    locked_in, locked_out : str, path-like or None
        Boolean column names or polygon files of cells always / never selected.
    bootstrap : int
        Refits on resampled training cells (0: none).
    exclude_novel : bool
        Never select a candidate whose habitat lies outside the training cells' range
        (negative MESS): such cells are locked out.
    n_jobs : int
        Worker processes of AutoTTK's folds and of the bootstrap refits.
    cost_column : str or None
        Column of each cell's cost; makes ``budget`` a total cost.
    species : tuple of str or None
        Species of a multi-species ingest.
    model : str
        One of :data:`SELECT_MODELS`; ``auto`` means ``linear`` for the baselines, the exact
        methods and several species (see :attr:`effective_model`).
    effort : bool
        Survey effort as covariates, candidates scored at the standard effort.
    boundary_penalty : float or "auto"
        Weight of the selection's boundary length in TTK's objective (per metre; 0: none),
        or ``"auto"`` for Cohon's calibration (:func:`reserve.solvers.calibrate_penalty`).
    learn_from : str
        ``"public"`` or ``"surveyed"`` (:attr:`SelectDefaults.learn_from`).

    Examples
    --------
    >>> SelectOptions(budget=30, C="cv").C
    'cv'
    >>> SelectOptions.from_sources({"budget": "30", "seed": "2"}).seed
    2
    """

    budget: int | float | None
    cells: str | os.PathLike[str] | None = None
    method: str = SELECT_DEFAULTS.method
    C: float | str | None = None
    seed: int = SELECT_DEFAULTS.seed
    out: str | os.PathLike[str] | None = None
    map: str | os.PathLike[str] | bool | None = None
    overwrite: bool = False
    time_limit: float = SELECT_DEFAULTS.time_limit
    locked_in: str | os.PathLike[str] | None = None
    locked_out: str | os.PathLike[str] | None = None
    bootstrap: int = SELECT_DEFAULTS.bootstrap
    exclude_novel: bool = SELECT_DEFAULTS.exclude_novel
    n_jobs: int = SELECT_DEFAULTS.n_jobs
    cost_column: str | None = None
    species: tuple[str, ...] | None = None
    model: str = SELECT_DEFAULTS.model
    effort: bool = SELECT_DEFAULTS.effort
    boundary_penalty: float | str = 0.0
    learn_from: str = SELECT_DEFAULTS.learn_from

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "method", _as_method(self.method))
        put(self, "model", _as_model(self.model))
        put(self, "C", _as_C(self.C))
        put(self, "seed", _as_seed(self.seed))
        put(self, "bootstrap", _as_int(self.bootstrap, "bootstrap", low=0))
        put(self, "n_jobs", _as_int(self.n_jobs, "n_jobs", low=1))
        put(self, "time_limit", _as_seconds(self.time_limit))
        if self.budget is None:
            raise InvalidInputError("budget is required; pass --budget K (e.g. --budget 30)")
        if self.cost_column is not None:
            put(self, "cost_column", str(self.cost_column))
            put(self, "budget", _as_money(self.budget))
        else:
            put(self, "budget", _as_cells(self.budget))
        put(self, "species", _as_species(self.species))
        for key in ("overwrite", "effort", "exclude_novel"):
            if not isinstance(getattr(self, key), bool):
                raise InvalidInputError(
                    f"{key} must be true or false; received {getattr(self, key)!r}"
                )
        for key in _PATH_KEYS:
            value = getattr(self, key)
            if value is not None and not isinstance(value, str | os.PathLike):
                if not (key == "map" and isinstance(value, bool)):
                    raise InvalidInputError(f"{key} must be a path; received {value!r}")
        put(self, "boundary_penalty", _as_penalty(self.boundary_penalty))
        put(self, "learn_from", _as_learn_from(self.learn_from))
        self._check_species()
        self._check_model()
        self._check_penalty()
        self._check_learn_from()

    def _check_learn_from(self) -> None:
        if self.learn_from == "public":
            return
        if self.species is not None and len(self.species) > 1:
            raise InvalidInputError(
                "learn_from='surveyed' with several --species is not supported; pass one "
                "--species, or --learn-from public"
            )
        if self.boundary_penalty != 0.0:
            raise InvalidInputError(
                "learn_from='surveyed' with a boundary penalty is not supported; drop "
                "--boundary-penalty, or pass --learn-from public"
            )

    def _check_penalty(self) -> None:
        if self.boundary_penalty == 0.0:
            return
        if self.method not in ("ttk", "ttk-mip", "ttk-bnb"):
            raise InvalidInputError(
                f"boundary_penalty needs method 'ttk', 'ttk-mip' or 'ttk-bnb' (received "
                f"{self.method!r}); "
                "drop --boundary-penalty or pass --method ttk"
            )
        if self.species is not None and len(self.species) > 1:
            raise InvalidInputError(
                "boundary_penalty with several --species is not supported yet; pass one "
                "--species, or drop --boundary-penalty"
            )
        if self.bootstrap:
            raise InvalidInputError(
                f"boundary_penalty with bootstrap={self.bootstrap} is not supported: the "
                "bootstrap refits resample the cells, which breaks the grid the boundary is "
                "measured on; drop --bootstrap or --boundary-penalty"
            )

    def _check_model(self) -> None:
        if self.model in ("auto", "linear") or self.effective_model == self.model:
            return
        raise InvalidInputError(
            f"model={self.model!r} needs method 'ttk' and one species (received method "
            f"{self.method!r}); pass --model linear or --model auto for this method"
        )

    @property
    def effective_model(self) -> str:
        """The model fitted: ``linear`` for every method but ``ttk`` on one species."""
        if self.method != "ttk" or (self.species is not None and len(self.species) > 1):
            return "linear"
        return self.model

    @property
    def fixed_C(self) -> float | str:
        """``C`` of a linear fit: the given value or ``"cv"``, else TTK's default."""
        return SELECT_DEFAULTS.C if self.C is None else self.C

    def _check_species(self) -> None:
        if not self.species or len(self.species) < 2:
            return
        if self.method not in MULTI_SPECIES_METHODS:
            raise InvalidInputError(
                f"method={self.method!r} selects for one species; with several --species use "
                f"one of {', '.join(MULTI_SPECIES_METHODS)}"
            )
        if self.cost_column is not None:
            raise InvalidInputError(
                "a money budget (--cost-column) with several --species is not supported; "
                "pass one --species, or drop --cost-column and give a number of cells"
            )
        if self.C == "cv":
            raise InvalidInputError(
                "C='cv' chooses C for one species; with several --species pass a number, e.g. --C 1"
            )

    @property
    def money(self) -> bool:
        """Whether ``budget`` is a total cost (``cost_column`` given)."""
        return self.cost_column is not None

    @classmethod
    def from_sources(
        cls, given: Mapping[str, Any], config: str | os.PathLike[str] | None = None
    ) -> SelectOptions:
        """Explicit values over a TOML file over the defaults; text values are parsed.

        Parameters
        ----------
        given : mapping
            Values set explicitly (command-line flags, as text); ``None`` values are ignored.
        config : path-like, optional
            TOML file read with :func:`load_config`.

        Returns
        -------
        SelectOptions
        """
        merged: dict[str, Any] = {}
        if config is not None:
            merged.update(check_config_values(load_config(config), config))
        merged.update({k: v for k, v in given.items() if v is not None})
        default_out = merged.get("out") is None
        if default_out:  # today's paths: results/reserve.gpkg and maps/<name>.html
            merged["out"] = SELECT_DEFAULTS.out
        budget = merged.get("budget")
        if budget is not None and merged.get("cost_column") is None:
            merged["budget"] = _as_int(budget, "budget", low=1)  # "30" from a flag
        for key in _PATH_KEYS:
            value = merged.get(key)
            if value is not None and not isinstance(value, str | os.PathLike):
                raise InvalidInputError(f"{key} must be a path; received {value!r}")
            if value is not None:
                merged[key] = str(value)
        opts = cls(**{"budget": None, **merged})
        if default_out:
            object.__setattr__(opts, "_map_dir", SELECT_DEFAULTS.map_dir)
        return opts

    def to_dict(self) -> dict[str, Any]:
        """The options as a dict of :data:`CONFIG_KEYS` (species as a list, as given)."""
        out = asdict(self)
        out["species"] = None if self.species is None else list(self.species)
        return out

    def map_path(self, cells_path: Path) -> Path | None:
        """The map asked for: ``maps/<cells>_<method>_k<budget>.html`` by default, or none.

        ``<cells>`` is the cells file's stem (``georgia`` for the default region); with
        ``species``, their slugs are appended.
        """
        if self.map is False:
            return None
        if self.map is not None and self.map is not True:
            return Path(self.map)
        stem = "georgia" if self.cells is None else cells_path.stem
        # the map goes with the GeoPackage: into ``out``, unless the command line's default
        # folders are in use (no --out: results/ and maps/, see from_sources)
        map_dir = self.__dict__.get("_map_dir")
        if map_dir is None and self.out is not None:
            map_dir = self.out
        folder = Path(map_dir if map_dir is not None else SELECT_DEFAULTS.map_dir)
        size = f"k{self.budget}" if not self.money else f"cost{self.budget:g}"
        name = f"{stem}_{self.method}_{size}"
        if self.species:  # one map per species set, not over the default run's
            name += "_" + "_".join(species_slug(n) for n in self.species)
        return folder / f"{name}.html"

    def recorded(self, map_path: Path | None) -> dict[str, Any]:
        """The effective configuration of a Python call, as recorded in the summary."""
        out = self.to_dict()
        for key in ("cells", "out", "locked_in", "locked_out"):
            out[key] = None if out[key] is None else str(out[key])
        out["map"] = None if map_path is None else str(map_path)
        return out


#: Names a ``--config`` TOML file may use: the flags of ``reserve select``.
CONFIG_KEYS = tuple(f.name for f in fields(SelectOptions))


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``reserve select`` TOML configuration (keys: the flag names).

    Parameters
    ----------
    path : path-like
        TOML file, e.g. ``budget = 30`` and ``method = "ttk"`` on separate lines.

    Returns
    -------
    dict

    Raises
    ------
    InvalidInputError
        Missing or unreadable file, invalid TOML, unknown keys.
    """
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(
            f"config={str(p)!r} cannot be read ({type(exc).__name__}); pass a UTF-8 TOML file"
        ) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(
            f"config={str(p)!r} is not valid TOML ({exc}); write e.g. budget = 30"
        ) from None
    out = {str(k).replace("-", "_"): v for k, v in raw.items()}
    unknown = sorted(set(out) - set(CONFIG_KEYS))
    if unknown:
        raise InvalidInputError(
            f"config={str(p)!r} has unknown keys {unknown}; allowed: {', '.join(CONFIG_KEYS)}"
        )
    return out


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name} must be true or false; received {value!r}")
    return value


def _check_path(value: Any, name: str) -> Any:
    if not isinstance(value, str | os.PathLike):
        raise InvalidInputError(f"{name} must be a path; received {value!r}")
    return value


def _check_map(value: Any, name: str) -> Any:
    return value if isinstance(value, bool) else _check_path(value, name)


def _check_budget(value: Any, name: str) -> Any:
    if isinstance(value, bool) or _positive_float(value) is None:
        raise InvalidInputError(
            f"{name} must be an integer >= 1 (cells), or a positive total cost with "
            f"cost_column; received {value!r}"
        )
    return value


def _check_cost_column(value: Any, name: str) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{name} must be a column name; received {value!r}")
    return value


#: The check of each key of a ``--config`` file, run on the file's values alone, so a bad
#: value in the file is refused even when a flag overrides it.
_CONFIG_CHECKS: dict[str, Any] = {
    "budget": _check_budget,
    "method": lambda v, n: _as_method(v),
    "model": lambda v, n: _as_model(v),
    "C": lambda v, n: _as_C(v),
    "seed": lambda v, n: _as_seed(v, n),
    "bootstrap": lambda v, n: _as_int(v, n, low=0),
    "n_jobs": lambda v, n: _as_int(v, n, low=1),
    "time_limit": lambda v, n: _as_seconds(v),
    "boundary_penalty": lambda v, n: _as_penalty(v),
    "overwrite": _check_bool,
    "exclude_novel": _check_bool,
    "species": lambda v, n: _as_species(v),
    "cost_column": _check_cost_column,
    "map": _check_map,
    **{key: _check_path for key in ("cells", "out", "locked_in", "locked_out")},
}


def check_config_values(
    values: Mapping[str, Any], path: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """Check every value of a ``--config`` file on its own; refuse the first bad one.

    Parameters
    ----------
    values : mapping
        The file's keys and values (:func:`load_config`).
    path : path-like, optional
        The file, named in the message.

    Returns
    -------
    dict
        ``values``, unchanged.

    Raises
    ------
    InvalidInputError
        A value that the option of that name refuses; the message names the file and the key.

    Examples
    --------
    >>> check_config_values({"budget": 30, "method": "svm"})
    {'budget': 30, 'method': 'svm'}
    """
    where = f"config={str(path)!r}" if path is not None else "config"
    for key, value in values.items():
        check = _CONFIG_CHECKS.get(key)
        if check is None:
            continue
        try:
            check(value, key)
        except InvalidInputError as exc:
            raise InvalidInputError(
                f"{where}: key {key!r} is invalid ({exc}); fix it in the file (a flag given "
                "on the command line does not excuse a bad value in the file)"
            ) from None
    return dict(values)


def resolve_config(
    given: Mapping[str, Any], config: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """Merge explicit values over a TOML config over the defaults; check and coerce types.

    Parameters
    ----------
    given : mapping
        Values set explicitly (flags); ``None`` values are ignored.
    config : path-like, optional
        TOML file read with :func:`load_config`.

    Returns
    -------
    dict
        Keyword arguments for :func:`select_reserve` (the effective configuration).

    Examples
    --------
    >>> resolve_config({"budget": "30"})["budget"]
    30
    """
    return SelectOptions.from_sources(given, config).to_dict()
