"""The options of the commands, declared once: flag, help, type and the check of a value.

:data:`SELECT_OPTIONS` is the one table of ``reserve select``'s options. :mod:`reserve.cli`
builds its click options (and so ``--help``) from it, :func:`load_config` accepts exactly its
names as the keys of a ``--config`` TOML file, :func:`check_config_values` checks a file's
values with each option's own check, and :class:`reserve.config.SelectOptions` normalises its
attributes with the same checks. :data:`INGEST_OPTIONS` declares ``reserve ingest``'s options
the same way. The defaults are those of :mod:`reserve.defaults`.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from reserve.defaults import (
    INGEST_DEFAULTS,
    LEARN_FROM,
    MAX_DEFAULT_JOBS,
    MAX_SEED,
    SELECT_DEFAULTS,
)
from reserve.errors import InvalidInputError
from reserve.goals import parse_targets, parse_weights
from reserve.methods import METHODS, MODELS, check_method, check_model

__all__ = [
    "CONFIG_KEYS",
    "INGEST_OPTIONS",
    "PATH_KEYS",
    "SELECT_OPTIONS",
    "OptionSpec",
    "check_config_values",
    "load_config",
    "parse_budget",
]

#: How an option is typed on the command line (:mod:`reserve.cli` maps each to a click type).
Kind = Literal[
    "number",
    "integer",
    "float",
    "float|cv",
    "float|auto",
    "text",
    "path",
    "choice",
    "switch",
    "flag",
]


@dataclass(frozen=True)
class OptionSpec:
    """One option of a command: its name, how it is typed, its help and its check.

    Attributes
    ----------
    name : str
        The Python argument and the TOML key (``time_limit``); the flag is derived from it
        (``--time-limit``).
    help : str
        The ``--help`` text, a whole sentence, with the default.
    kind : str
        How the command line types the value (:data:`Kind`): ``switch`` is an on/off pair
        (``--effort/--no-effort``), ``flag`` an on-only switch (``--overwrite``).
    check : callable or None
        ``check(value, name)``: the value normalised, or a one-line
        :class:`~reserve.errors.InvalidInputError`; run on a TOML file's values and on the
        options' attributes alike (``reserve select``). None: the command's own types and
        the library check the value (``reserve ingest``).
    metavar : str or None
        The value's placeholder in ``--help``.
    choices : tuple of str
        Allowed values of a ``choice``.
    multiple : bool
        Repeatable (``--species A --species B``).
    default : object or None
        The default ``--help`` shows (None: the help text states it). ``reserve select``'s
        options have none, so that only the values given override a TOML file.
    required : bool
        The command refuses to run without it.
    strict : bool
        The command line refuses a value of the wrong type itself (``reserve ingest``);
        otherwise it passes the value on, for the options' check to refuse in one line.
    """

    name: str
    help: str
    kind: Kind
    check: Callable[[Any, str], Any] | None = None
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    multiple: bool = False
    default: Any = None
    required: bool = False
    strict: bool = False

    @property
    def flag(self) -> str:
        """The long flag, e.g. ``--time-limit``.

        Examples
        --------
        >>> SELECT_OPTIONS["n_jobs"].flag
        '--n-jobs'
        """
        return "--" + self.name.replace("_", "-")


def _positive_float(value: Any) -> float | None:
    """``value`` as a positive finite float, or None when it is not one."""
    try:
        v = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and v > 0 else None


def _int(value: Any, name: str, *, low: int | None = None) -> int:
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


def _count(low: int) -> Callable[[Any, str], int]:
    return lambda value, name: _int(value, name, low=low)


def _seed(value: Any, name: str) -> int:
    """``value`` as a seed: an integer from 0 to :data:`MAX_SEED`."""
    seed = _int(value, name, low=0)
    if seed > MAX_SEED:
        raise InvalidInputError(
            f"{name} must be an integer from 0 to {MAX_SEED} (2**32 - 1, the largest seed "
            f"NumPy and scikit-learn accept); received {seed}. Pass a smaller seed"
        )
    return seed


def _budget(value: Any, name: str) -> Any:
    """A budget on its own: cells (an integer >= 1) or a total cost (a positive number)."""
    if isinstance(value, bool) or _positive_float(value) is None:
        raise InvalidInputError(
            f"{name} must be an integer >= 1 (cells), or a positive total cost with "
            f"cost_column; received {value!r}"
        )
    return value


def parse_budget(value: Any, *, money: bool, text: bool = False) -> int | float:
    """The budget: a positive total cost (``money``) or a number of cells (an int >= 1).

    Parameters
    ----------
    value : object
        The budget given.
    money : bool
        Whether a cost column makes it a total cost.
    text : bool, default=False
        Whether a number of cells may be given as text (a flag's ``"30"``).

    Returns
    -------
    int or float

    Examples
    --------
    >>> parse_budget("30", money=False, text=True), parse_budget(12.5, money=True)
    (30, 12.5)
    """
    if money:
        v = _positive_float(value)
        if v is None:
            raise InvalidInputError(
                f"budget must be a positive total cost when --cost-column is given; received "
                f"{value!r}. Pass e.g. --budget 1500 (in the cost column's units)"
            )
        return v
    if text:
        return _int(value, "budget", low=1)
    cells = isinstance(value, int) or (hasattr(value, "dtype") and value.dtype.kind in "iu")
    if isinstance(value, bool) or not cells or value < 1:
        raise InvalidInputError(
            f"budget must be a positive integer (number of cells); received {value!r}. "
            "For a total cost, pass --cost-column with the cells' cost column"
        )
    return int(value)


def _C(value: Any, name: str) -> float | str | None:
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


def _species(value: Any, name: str) -> tuple[str, ...] | None:
    """Species names: None, one name, or several (``--species`` repeated)."""
    if value is None:
        return None
    names = list(value) if isinstance(value, list | tuple) else [value]
    if not names:
        return None
    if not all(isinstance(n, str) and n.strip() for n in names):
        raise InvalidInputError(
            f"species must be species names; received {value!r}. Pass e.g. "
            "--species 'Wood Thrush' --species 'Northern Bobwhite'"
        )
    return tuple(n.strip() for n in names)


def _learn_from(value: Any, name: str) -> str:
    m = str(value).strip().lower()
    if m not in LEARN_FROM:
        raise InvalidInputError(
            f"learn_from={value!r} is unknown; choose one of {', '.join(LEARN_FROM)}"
        )
    return m


def _penalty(value: Any, name: str) -> float | str:
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


def _seconds(value: Any, name: str) -> float:
    seconds = _positive_float(value)
    if seconds is None:
        raise InvalidInputError(f"{name} must be a number of seconds > 0; received {value!r}")
    return seconds


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name} must be true or false; received {value!r}")
    return value


def _path(value: Any, name: str) -> Any:
    if not isinstance(value, str | os.PathLike):
        raise InvalidInputError(f"{name} must be a path; received {value!r}")
    return value


#: What ``--map`` takes to draw no map (TOML and Python also take ``false``).
NO_MAP = ("none", "false", "off", "no")


def _map(value: Any, name: str) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in NO_MAP:
        return False
    return _path(value, name)


def _column(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{name} must be a column name; received {value!r}")
    return value


def _on_off(name: str, on: bool) -> str:
    return f"--{name}" if on else f"--no-{name}"


_D = SELECT_DEFAULTS

#: The options of ``reserve select``, in ``--help``'s order (``--config`` aside: it names the
#: TOML file whose keys are these names).
SELECT_OPTIONS: dict[str, OptionSpec] = {
    spec.name: spec
    for spec in (
        OptionSpec(
            "budget",
            "Number of cells to select (required); a total cost with --cost-column.",
            "number",
            _budget,
            metavar="K",
        ),
        OptionSpec(
            "cost_column",
            "planning_units column with each cell's cost: --budget becomes a total cost.",
            "text",
            _column,
            metavar="COL",
        ),
        OptionSpec(
            "species",
            "Species of a multi-species ingest; repeat it to share the cells among several.",
            "text",
            _species,
            metavar="NAME",
            multiple=True,
        ),
        OptionSpec(
            "target",
            "With several --species: a species' expected occupied cells among the chosen "
            "(SPECIES=N) or a share of its expected occupied candidate cells (SPECIES=P%); "
            "repeat it per species.",
            "text",
            parse_targets,
            metavar="SPECIES=N|P%",
            multiple=True,
        ),
        OptionSpec(
            "weight",
            "With several --species: a species' weight in the plan (SPECIES=W, default 1); "
            "repeat it per species.",
            "text",
            parse_weights,
            metavar="SPECIES=W",
            multiple=True,
        ),
        OptionSpec(
            "strict_targets",
            "Refuse a target above what the candidates can reach (default: warn, plan, and "
            "report the shortfall).",
            "flag",
            _bool,
        ),
        OptionSpec(
            "joint_fit",
            "With several --species: one joint TTK fit with a shared k (MultiTTK) instead "
            "of a fit per species and a plan over their calibrated probabilities.",
            "flag",
            _bool,
        ),
        OptionSpec(
            "cells",
            "planning_units GeoPackage from 'reserve ingest' (default: the "
            "embedded Georgia region).",
            "path",
            _path,
        ),
        OptionSpec(
            "method",
            f"One of {', '.join(METHODS)} (default {_D.method}).",
            "text",
            lambda v, n: check_method(v),
            metavar="NAME",
        ),
        OptionSpec(
            "model",
            f"What TTK learns from the features: one of {', '.join(MODELS)} "
            f"(default {_D.model}: the feature map and C chosen by cross-validation; linear "
            "is the paper's TTK).",
            "text",
            lambda v, n: check_model(v),
            metavar="NAME",
        ),
        OptionSpec(
            "C",
            f"Hinge-loss weight, or 'cv' (default: chosen with --model auto, else {_D.C}).",
            "float|cv",
            _C,
        ),
        OptionSpec(
            "seed",
            f"Seed of the CV folds, the solver and the tie-break (default {_D.seed}).",
            "integer",
            _seed,
        ),
        OptionSpec("out", f"Folder of reserve.gpkg (default {_D.out}).", "path", _path),
        OptionSpec(
            "map",
            f"HTML map (default {_D.map_dir}/<cells>_<method>_k<budget>.html); "
            "'none' draws no map.",
            "path",
            _map,
        ),
        OptionSpec(
            "time_limit",
            f"Seconds per exact (ttk-mip, ttk-bnb) fit (default {_D.time_limit:g}).",
            "float",
            _seconds,
        ),
        OptionSpec(
            "locked_in",
            "Cells always selected, counted in the budget: a boolean column or a polygon file.",
            "text",
            _path,
            metavar="COLUMN|PATH",
        ),
        OptionSpec(
            "locked_out",
            "Cells never selected (besides the locked_out column): a column or a polygon file.",
            "text",
            _path,
            metavar="COLUMN|PATH",
        ),
        OptionSpec(
            "exclude_novel",
            "Never select a candidate whose habitat lies outside the "
            "surveyed (training) cells' range on some feature (negative MESS: its score is "
            "an extrapolation) (default "
            f"{_on_off('exclude-novel', _D.exclude_novel)}).",
            "switch",
            _bool,
        ),
        OptionSpec(
            "bootstrap",
            "Refit on N resamples of the training cells; adds "
            f"selection_frequency (default {_D.bootstrap}).",
            "integer",
            _count(0),
            metavar="N",
        ),
        OptionSpec(
            "n_jobs",
            "Worker processes for the bootstrap refits, AutoTTK's folds and "
            "final fits, and the map drawn beside the GeoPackage (default: one per "
            f"processor, at most {MAX_DEFAULT_JOBS}).",
            "integer",
            _count(1),
        ),
        OptionSpec(
            "effort",
            "Survey effort (checklists, hours, km) as covariates, candidates "
            "scored at the training median effort (default "
            f"{_on_off('effort', _D.effort)}).",
            "switch",
            _bool,
        ),
        OptionSpec(
            "learn_from",
            "Whose labels train the habitat model: 'public' (the surveyed "
            "public cells) or 'surveyed' (the surveyed private cells too; they stay "
            "candidates, and the private-land check is then cross-fitted) (default "
            f"{_D.learn_from}).",
            "choice",
            _learn_from,
            choices=LEARN_FROM,
        ),
        OptionSpec(
            "boundary_penalty",
            "Trade objective for compact patches: LAMBDA times the "
            "selection's boundary length (metres, as Marxan's BLM) joins TTK's objective; "
            "'auto' calibrates it (Cohon's method) and writes the trade-off (default "
            f"{_D.boundary_penalty:g}: no penalty).",
            "float|auto",
            _penalty,
            metavar="LAMBDA|auto",
        ),
        OptionSpec("overwrite", "Replace existing outputs.", "flag", _bool),
        OptionSpec(
            "suggest_surveys",
            "Also suggest the M candidate cells whose survey is expected to improve the "
            "purchase most (the survey_next layer; default: none).",
            "integer",
            _count(1),
            metavar="M",
        ),
        OptionSpec(
            "survey_clusters",
            "Group the suggested surveys into at most G contiguous areas (default: no grouping).",
            "integer",
            _count(1),
            metavar="G",
        ),
        OptionSpec(
            "surveys",
            "New survey results: a CSV of cell_id,detected[,checklists], or an eBird EBD "
            "(.txt/.gz/.zip) of the new checklists with --surveys-sed; their labels and "
            "checklists join the run, the model learns from them, and a detection is bought "
            "first (default: none).",
            "path",
            _path,
        ),
        OptionSpec(
            "surveys_sed",
            "Sampling Event Data (.txt/.gz/.zip) of an EBD --surveys: its checklists pass "
            "reserve ingest's default filters and each joins the candidate cell it lies in "
            "(default: none).",
            "path",
            _path,
        ),
    )
}


def _ingest(name: str, help: str, kind: Kind = "text", **kw: Any) -> OptionSpec:
    """An option of ``reserve ingest``: typed strictly, its default shown in ``--help``."""
    if "default" not in kw and name in INGEST_DEFAULTS.__dataclass_fields__:
        kw["default"] = getattr(INGEST_DEFAULTS, name)
    return OptionSpec(name, help, kind, strict=True, **kw)


_I = INGEST_DEFAULTS

#: The options of ``reserve ingest``, in ``--help``'s order.
INGEST_OPTIONS: dict[str, OptionSpec] = {
    spec.name: spec
    for spec in (
        _ingest("ebd", "eBird Basic Dataset (.txt/.gz/.zip).", "path", required=True),
        _ingest("sed", "Sampling Event Data (.txt/.gz/.zip).", "path", required=True),
        _ingest(
            "species",
            "Common or scientific name, e.g. 'Wood Thrush'; repeat for several species "
            "(label = the first; label__<slug> for each).",
            required=True,
            multiple=True,
        ),
        _ingest("output", "GeoPackage to write (.gpkg).", "path", required=True),
        _ingest(
            "region",
            "The region: a bbox min_lon,min_lat,max_lon,max_lat or a polygon file.",
            metavar="BBOX|PATH",
        ),
        _ingest("region_layer", "Layer of a multi-layer region file.", metavar="LAYER"),
        _ingest("cell_size", "Cell side in metres.", "float"),
        _ingest("crs", "Equal-area grid CRS (default: LAEA centred on the region).", metavar="CRS"),
        _ingest(
            "categorical",
            "Categorical raster (class fractions); repeatable.",
            metavar="NAME=PATH",
            multiple=True,
        ),
        _ingest(
            "continuous",
            "Continuous raster (mean, sd); repeatable.",
            metavar="NAME=PATH",
            multiple=True,
        ),
        _ingest(
            "legend",
            "Class legend (class,name CSV) of a categorical raster; repeatable.",
            metavar="NAME=CSV",
            multiple=True,
        ),
        _ingest("public", "Public-land polygons; repeatable.", "path", multiple=True),
        _ingest(
            "locked_out",
            "Polygons never to select (urban, protected); repeatable.",
            "path",
            multiple=True,
        ),
        _ingest(
            "public_threshold",
            "A surveyed cell is a training cell if more than this share of it is public.",
            "float",
        ),
        _ingest(
            "locked_threshold",
            "A cell is locked out if more than this share of it is in --locked-out polygons.",
            "float",
        ),
        _ingest(
            "region_threshold",
            "A private cell is a candidate only if more than this share of it is in the region.",
            "float",
        ),
        _ingest(
            "protocols",
            "Protocols kept, comma-separated ('all' keeps every protocol).",
            default=",".join(_I.protocols),
        ),
        _ingest("max_hours", "Longest checklist kept, in hours.", "float"),
        _ingest("max_km", "Longest distance travelled, in km.", "float"),
        _ingest("max_observers", "Most observers on a checklist.", "integer"),
        _ingest("max_speed_kmh", "Fastest travelling speed kept, in km/h.", "float"),
        _ingest("start_date", "First date kept.", metavar="YYYY-MM-DD"),
        _ingest("end_date", "Last date kept.", metavar="YYYY-MM-DD"),
        _ingest("months", "Months kept, e.g. 5,6.", metavar="M,M"),
        _ingest("years", "Years kept, e.g. 2017,2018.", metavar="Y,Y"),
        _ingest("deduplicate", "One checklist per shared-checklist group.", "switch", default=True),
        _ingest("chunksize", "Rows read at a time (memory versus speed).", "integer"),
        _ingest(
            "engine",
            "Read the files here (local) or on a Dask cluster (dask).",
            "choice",
            choices=("local", "dask"),
        ),
        _ingest(
            "scheduler", "Dask scheduler address (default: a local cluster).", metavar="ADDRESS"
        ),
        _ingest("progress", "Show progress bars.", "switch", default=True),
        _ingest("overwrite", "Replace an existing output.", "flag"),
    )
}

#: Names a ``--config`` TOML file may use: the options of ``reserve select``.
CONFIG_KEYS: tuple[str, ...] = tuple(SELECT_OPTIONS)

#: Options whose value is a path (``map`` may also be true or false).
PATH_KEYS = ("cells", "out", "map", "locked_in", "locked_out", "surveys", "surveys_sed")


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
        spec = SELECT_OPTIONS.get(key)
        if spec is None or spec.check is None:
            continue
        try:
            spec.check(value, key)
        except InvalidInputError as exc:
            raise InvalidInputError(
                f"{where}: key {key!r} is invalid ({exc}); fix it in the file (a flag given "
                "on the command line does not excuse a bad value in the file)"
            ) from None
    return dict(values)
