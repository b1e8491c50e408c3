"""The options of one selection, checked once (:class:`SelectOptions`), and their sources.

The defaults live in :mod:`reserve.defaults` and the declarations of ``reserve select``'s
options (flag, help, the check of one value, the TOML keys) in :mod:`reserve.options`; both
are re-exported here. This module adds what depends on several options at once: the rules
that combine them, each derived from the method's declared capabilities
(:mod:`reserve.methods`), and the merge of flags over a TOML file over the defaults.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from reserve.defaults import (
    DEFAULT_REGION,
    EFFORT_COLUMNS,
    EFFORT_PREFIX,
    INGEST_DEFAULTS,
    LEARN_FROM,
    MAX_DEFAULT_JOBS,
    MAX_SEED,
    PLANNING_UNIT_COLUMNS,
    SELECT_DEFAULTS,
    SELECT_METHODS,
    SELECT_MODELS,
    SPECIES_DETECTIONS_PREFIX,
    SPECIES_LABEL_PREFIX,
    TTK_DEFAULTS,
    DefaultRegion,
    IngestDefaults,
    SelectDefaults,
    TTKDefaults,
    species_slug,
)
from reserve.errors import InvalidInputError
from reserve.goals import Target, Weight, check_named
from reserve.methods import capabilities, methods_with, quoted
from reserve.options import (
    CONFIG_KEYS,
    PATH_KEYS,
    SELECT_OPTIONS,
    check_config_values,
    load_config,
    parse_budget,
)

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

#: Methods that select for several species at once (``--species A --species B``): those
#: declaring ``several_species``.
MULTI_SPECIES_METHODS = methods_with("several_species")


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
        One of :data:`SELECT_METHODS`; what it supports (several species, a boundary
        penalty, feature maps) is declared in :data:`reserve.methods.CAPABILITIES`, and
        the options it does not support are refused with the methods that do.
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
    target : tuple of reserve.goals.Target
        Several species: each species' target (expected occupied cells among the chosen,
        or a share of its expected occupied candidate cells); none by default.
    weight : tuple of reserve.goals.Weight
        Several species: each species' weight in the plan (1 when not given).
    strict_targets : bool
        Refuse a target above what the candidates can reach, instead of planning with the
        shortfall reported.
    joint_fit : bool
        Several species: one joint fit (``MultiTTK``, a method declaring
        ``several_species``) instead of a fit per species and a plan over their calibrated
        probabilities (the default).
    model : str
        One of :data:`SELECT_MODELS`; ``auto`` means ``linear`` for the methods without
        feature maps and for several species (see :attr:`effective_model`).
    effort : bool
        Survey effort as covariates, candidates scored at the standard effort.
    boundary_penalty : float or "auto"
        Weight of the selection's boundary length in TTK's objective (per metre; 0: none),
        or ``"auto"`` for Cohon's calibration (:func:`reserve.solvers.calibrate_penalty`).
    learn_from : str
        ``"public"`` or ``"surveyed"`` (:attr:`SelectDefaults.learn_from`).
    suggest_surveys : int or None
        Candidate cells to suggest for a survey before buying (:mod:`reserve.surveys`).
    survey_clusters : int or None
        Most contiguous areas the suggested surveys are grouped into.
    surveys : path-like or None
        New survey results: a CSV (``cell_id,detected[,checklists]``) or an eBird EBD of
        the new checklists (:func:`reserve.surveys.read_surveys`).
    surveys_sed : path-like or None
        The Sampling Event Data of an EBD ``surveys``.
    map_dir : str or None
        Folder of the map when ``map`` names none: None puts it beside the GeoPackage (in
        ``out``); :meth:`from_sources` sets :attr:`SelectDefaults.map_dir` when it supplies
        the default ``out`` (the command line's ``results/`` and ``maps/``). Not an option of
        the command line: not in :data:`CONFIG_KEYS` nor in :meth:`to_dict`.

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
    overwrite: bool = SELECT_DEFAULTS.overwrite
    time_limit: float = SELECT_DEFAULTS.time_limit
    locked_in: str | os.PathLike[str] | None = None
    locked_out: str | os.PathLike[str] | None = None
    bootstrap: int = SELECT_DEFAULTS.bootstrap
    exclude_novel: bool = SELECT_DEFAULTS.exclude_novel
    n_jobs: int = SELECT_DEFAULTS.n_jobs
    cost_column: str | None = None
    species: tuple[str, ...] | None = None
    target: tuple[Target, ...] = ()
    weight: tuple[Weight, ...] = ()
    strict_targets: bool = SELECT_DEFAULTS.strict_targets
    joint_fit: bool = SELECT_DEFAULTS.joint_fit
    model: str = SELECT_DEFAULTS.model
    effort: bool = SELECT_DEFAULTS.effort
    boundary_penalty: float | str = SELECT_DEFAULTS.boundary_penalty
    learn_from: str = SELECT_DEFAULTS.learn_from
    suggest_surveys: int | None = None
    survey_clusters: int | None = None
    surveys: str | os.PathLike[str] | None = None
    surveys_sed: str | os.PathLike[str] | None = None
    map_dir: str | None = None

    def __post_init__(self) -> None:
        for spec in SELECT_OPTIONS.values():  # each value on its own, by its option's check
            value = getattr(self, spec.name)
            if spec.name != "budget" and (value is not None or spec.name not in _MAY_BE_NONE):
                object.__setattr__(self, spec.name, spec.check(value, spec.name))
        if self.budget is None:
            raise InvalidInputError("budget is required; pass --budget K (e.g. --budget 30)")
        if self.cost_column is not None:
            object.__setattr__(self, "cost_column", str(self.cost_column))
        object.__setattr__(self, "budget", parse_budget(self.budget, money=self.money))
        self._check_species()
        self._check_goals()
        self._check_capabilities()
        self._check_penalty()
        self._check_learn_from()
        self._check_surveys()

    @property
    def several_species(self) -> bool:
        """Whether the selection is for more than one species."""
        return self.species is not None and len(self.species) > 1

    @property
    def planned(self) -> bool:
        """Whether several species are fitted one by one and planned together (not
        ``joint_fit``)."""
        return self.several_species and not self.joint_fit

    def for_species(self, name: str) -> SelectOptions:
        """The options of ``name``'s own single-species fit (no targets or weights)."""
        from dataclasses import replace

        return replace(
            self, species=(name,), target=(), weight=(), strict_targets=False, joint_fit=False
        )

    def weights(self) -> tuple[float, ...]:
        """Each species' weight, in the order of ``species`` (1 when not given)."""
        given = {w.species: w.value for w in self.weight}
        return tuple(given.get(s, 1.0) for s in self.species or ())

    @property
    def money(self) -> bool:
        """Whether ``budget`` is a total cost (``cost_column`` given)."""
        return self.cost_column is not None

    @property
    def effective_model(self) -> str:
        """The model fitted: the one asked for by a method with feature maps on one species,
        else ``linear``."""
        if not capabilities(self.method).feature_maps or (self.several_species and self.joint_fit):
            return "linear"
        return self.model

    @property
    def fixed_C(self) -> float | str:
        """``C`` of a linear fit: the given value or ``"cv"``, else TTK's default."""
        return SELECT_DEFAULTS.C if self.C is None else self.C

    def _check_capabilities(self) -> None:
        """Refuse an option the method does not declare, naming the methods that do."""
        if self.joint_fit and not capabilities(self.method).several_species:
            raise InvalidInputError(
                f"method={self.method!r} selects for one species at a time; with --joint-fit use "
                f"one of {', '.join(MULTI_SPECIES_METHODS)}"
            )
        if self.boundary_penalty != 0.0 and not capabilities(self.method).boundary:
            able = methods_with("boundary")
            raise InvalidInputError(
                f"boundary_penalty needs method {quoted(able)} (received {self.method!r}); "
                f"drop --boundary-penalty or pass --method {able[0]}"
            )
        if self.model not in ("auto", "linear") and self.effective_model != self.model:
            raise InvalidInputError(
                f"model={self.model!r} needs method {quoted(methods_with('feature_maps'))} and "
                f"one species (received method {self.method!r}); pass --model linear or "
                "--model auto for this method"
            )

    def _check_goals(self) -> None:
        """Targets and weights: for two or more species fitted one by one, each named once."""
        asked = [f for f in ("target", "weight", "strict_targets") if getattr(self, f)]
        if asked and not self.planned:
            why = "--joint-fit fits no targets" if self.joint_fit else "they need two or more"
            raise InvalidInputError(
                f"{asked[0]} plans several species ({why}); pass two or more --species "
                f"without --joint-fit, or drop --{asked[0].replace('_', '-')}"
            )
        if self.joint_fit and not self.several_species:
            raise InvalidInputError(
                "joint_fit needs two or more --species; drop --joint-fit or add a --species"
            )
        check_named(self.target, self.species or (), "target")
        check_named(self.weight, self.species or (), "weight")

    def _check_species(self) -> None:
        if not self.several_species:
            return
        if self.cost_column is not None and self.joint_fit:
            raise InvalidInputError(
                "a money budget (--cost-column) with --joint-fit is not supported; drop "
                "--joint-fit (each species fitted, then planned within the money), or "
                "drop --cost-column and give a number of cells"
            )
        if self.C == "cv" and self.joint_fit:
            raise InvalidInputError(
                "C='cv' chooses C for one species; with --joint-fit pass a number, e.g. --C 1"
            )

    def _check_penalty(self) -> None:
        if self.boundary_penalty == 0.0:
            return
        if self.several_species:
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

    def _check_learn_from(self) -> None:
        if self.learn_from == "public":
            return
        if self.several_species:
            raise InvalidInputError(
                "learn_from='surveyed' with several --species is not supported; pass one "
                "--species, or --learn-from public"
            )
        if self.boundary_penalty != 0.0:
            raise InvalidInputError(
                "learn_from='surveyed' with a boundary penalty is not supported; drop "
                "--boundary-penalty, or pass --learn-from public"
            )

    def _check_surveys(self) -> None:
        """Survey suggestions and new surveys: one species, a budget in cells, no boundary."""
        if self.survey_clusters is not None and self.suggest_surveys is None:
            raise InvalidInputError(
                "survey_clusters groups suggested surveys; pass --suggest-surveys M with it"
            )
        if self.surveys_sed is not None and self.surveys is None:
            raise InvalidInputError(
                "surveys_sed is the Sampling Event Data of an eBird EBD --surveys; pass the "
                "EBD with --surveys PATH, or drop --surveys-sed"
            )
        if self.suggest_surveys is None and self.surveys is None:
            return
        asked = "--suggest-surveys" if self.suggest_surveys is not None else "--surveys"
        for refused, what, fix in (
            (self.several_species, "several --species", "pass one --species"),
            (self.money, "a money budget (--cost-column)", "give the budget in cells"),
            (self.boundary_penalty != 0.0, "a boundary penalty", "drop --boundary-penalty"),
        ):
            if refused:
                raise InvalidInputError(f"{asked} with {what} is not supported; {fix}")

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
        if merged.get("out") is None:  # the command line's folders: results/ and maps/
            merged["out"], merged["map_dir"] = SELECT_DEFAULTS.out, SELECT_DEFAULTS.map_dir
        budget = merged.get("budget")
        if budget is not None and merged.get("cost_column") is None:
            merged["budget"] = parse_budget(budget, money=False, text=True)  # "30" from a flag
        for key in PATH_KEYS:  # paths as text; map may be true or false (no map)
            value = merged.get(key)
            if value is not None and not isinstance(value, bool):
                checked = SELECT_OPTIONS[key].check(value, key)  # --map none: False
                merged[key] = checked if isinstance(checked, bool) else str(checked)
        return cls(**{"budget": None, **merged})

    def to_dict(self) -> dict[str, Any]:
        """The options as a dict of :data:`CONFIG_KEYS` (species as a list, as given)."""
        out = {key: getattr(self, key) for key in _FIELD_ORDER}
        out["species"] = None if self.species is None else list(self.species)
        out["target"] = [str(t) for t in self.target]
        out["weight"] = [str(w) for w in self.weight]
        return out

    def map_path(self, cells_path: Path) -> Path | None:
        """The map asked for: ``maps/<cells>_<method>_k<budget>.html`` by default, or none.

        ``<cells>`` is the cells file's stem (``georgia`` for the default region); with
        ``species``, their slugs are appended. The default folder is :attr:`map_dir`, else
        ``out`` (the map goes with the GeoPackage), else :attr:`SelectDefaults.map_dir`.
        """
        if self.map is False:
            return None
        if self.map is not None and self.map is not True:
            return Path(self.map)
        stem = "georgia" if self.cells is None else cells_path.stem
        folder = Path(
            next(d for d in (self.map_dir, self.out, SELECT_DEFAULTS.map_dir) if d is not None)
        )
        size = f"k{self.budget}" if not self.money else f"cost{self.budget:g}"
        name = f"{stem}_{self.method}_{size}"
        if self.species:  # one map per species set, not over the default run's
            name += "_" + "_".join(species_slug(n) for n in self.species)
        return folder / f"{name}.html"

    def recorded(self, map_path: Path | None) -> dict[str, Any]:
        """The effective configuration of a Python call, as recorded in the summary."""
        out = self.to_dict()
        for key in ("cells", "out", "locked_in", "locked_out", "surveys", "surveys_sed"):
            out[key] = None if out[key] is None else str(out[key])
        out["map"] = None if map_path is None else str(map_path)
        return out


#: Options that may be absent (None): those whose default is None.
_MAY_BE_NONE = frozenset(f.name for f in fields(SelectOptions) if f.default is None)

#: The options in the order of :class:`SelectOptions`' attributes (the recorded config's).
_FIELD_ORDER = tuple(name for name in SelectOptions.__dataclass_fields__ if name in CONFIG_KEYS)


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
