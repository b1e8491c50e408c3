"""Choose the reserve: planning units in, ``k`` ranked cells (GeoPackage, map, summary) out.

:func:`select_reserve` is the one place that runs the whole sequence:

1. read the ``planning_units`` layer written by :func:`reserve.ingest.ingest` (or the embedded
   default region) and check it (columns, CRS, roles, classes, finite features);
2. **standardise** every feature column to mean 0 and standard deviation 1, with the mean and
   deviation computed on the rows the estimator sees (``train`` and ``candidate`` cells
   together, the transductive setting of the paper). A constant column is centred and left
   unscaled (it is 0 everywhere and cannot influence the scores);
3. build ``X`` and ``y``: ``train`` cells labelled 1 (detected) or 0 (not detected),
   ``candidate`` cells -1; ``other`` cells, locked-out cells and locked-in cells are left
   out of the fit;
4. choose ``C`` (given, or by the paper's cross-validation on the training cells,
   :func:`reserve.model_selection.select_C`);
5. fit the estimator of ``method`` with ``k = budget - (number of locked-in cells)`` (or,
   with ``cost_column``, a money budget: see below);
6. optionally (``bootstrap=N``) refit N times on resampled training cells and record, for
   every candidate, the share of refits that select it (``selection_frequency``);
7. assemble the results: every cell's score (``X @ w + b`` in standardised units, NaN where a
   feature is missing), the rank of every candidate (1 = best), the ``k`` selected cells,
   and a one-row run summary; then, when ``out`` is given, write ``<out>/reserve.gpkg``
   (:mod:`reserve.export`) and the HTML map (:mod:`reserve.maps`), both atomically.

Locked cells
------------
``locked_out`` (the ``planning_units`` column of that name, always honoured, plus an optional
``locked_out=`` boolean column name or polygon file) removes cells from the fit: they are
never selected. ``locked_in=`` (a boolean column name or a polygon file) marks cells already
owned or committed: they are always selected and count against the budget, and they leave
the candidate set, so the solver chooses ``budget - n_locked_in`` more cells among the other
candidates (a locked-in cell is neither fitted as unlabelled nor ranked against the others;
it is ranked first in the selection). A polygon file locks the cells more than
``INGEST_DEFAULTS.locked_threshold`` (half) of whose area it covers, as ``reserve ingest``
does. Refused, before anything is written: a cell both locked in and locked out; locked-in
cells that are not ``candidate`` cells (public training or ``other`` cells cannot be
bought); more locked-in cells than the budget (exactly the budget is allowed: nothing is
left to choose, the estimator is still fitted with ``k = 1`` to score and rank the other
candidates, and none of them is selected); a polygon file without a CRS or that locks no
cell of the region.

Money budgets
-------------
With ``cost_column=`` (``--cost-column``) the budget is a total cost, not a number of cells:
the named column of ``planning_units`` holds each cell's price (any currency; it is never a
feature). TTK then solves its knapsack form, "the candidates scoring positive cost at most
the budget" (``TTK(budget=...)``, exact in ``ttk-mip``), and the selection walks the
candidates by decreasing score, taking each one that still fits and skipping those that do
not (``reserve.solvers._base.budget_select``). The baselines score the candidates as usual
(fitted with the number of cells the budget buys at the median candidate cost) and are
selected by the same walk. Locked-in cells use up their cost of the budget first. Every
candidate's cost must be a positive finite number (a missing, non-numeric, zero, negative
or NaN cost is refused with the cells it concerns); a budget that buys every candidate, or
no candidate at all (without locked-in cells), is refused. With every cost equal to ``c``,
``budget = k * c`` gives exactly the cells of ``budget = k``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from reserve.config import (
    PLANNING_UNIT_COLUMNS,
    SELECT_DEFAULTS,
    SELECT_METHODS,
    SPECIES_DETECTIONS_PREFIX,
    SPECIES_LABEL_PREFIX,
    species_slug,
)
from reserve.errors import DataFileError, InvalidInputError, OutputExistsError

__all__ = [
    "CONFIG_KEYS",
    "METHODS",
    "REQUIRED_COLUMNS",
    "SelectionResult",
    "load_config",
    "read_planning_units",
    "resolve_config",
    "select_reserve",
]

#: Methods accepted by ``method=`` / ``--method``.
METHODS = SELECT_METHODS

#: Columns ``planning_units`` must have (besides the geometry and at least one feature).
REQUIRED_COLUMNS = ("cell_id", "role", "label", "locked_out")

#: Columns of ``planning_units`` that are never features.
_NON_FEATURES = (
    *PLANNING_UNIT_COLUMNS,
    # added by reserve select, so a reserve.gpkg read back is not mistaken for features
    "score",
    "rank",
    "selected",
    "locked_in",
    "selection_frequency",
    "cumulative_cost",
)
#: Prefixes of per-species columns that are never features (labels, counts, scores).
_NON_FEATURE_PREFIXES = (SPECIES_LABEL_PREFIX, SPECIES_DETECTIONS_PREFIX, "score__")

#: Methods that select for several species at once (``--species A --species B``).
MULTI_SPECIES_METHODS = ("ttk", "ttk-mip", "svm")

#: Names a ``--config`` TOML file may use: the flags of ``reserve select``.
CONFIG_KEYS = (
    "budget",
    "cells",
    "method",
    "C",
    "seed",
    "out",
    "map",
    "overwrite",
    "time_limit",
    "locked_in",
    "locked_out",
    "bootstrap",
    "n_jobs",
    "cost_column",
    "species",
)

GPKG_NAME = "reserve.gpkg"


@dataclass
class SelectionResult:
    """What :func:`select_reserve` chose and wrote.

    Attributes
    ----------
    planning_units : geopandas.GeoDataFrame
        Every cell of the input with ``locked_out`` (the column and ``locked_out=``),
        ``locked_in``, ``score``, ``rank`` (selected and candidate cells, 1 = best; 0 for
        other cells), ``selected`` and, when bootstrapped, ``selection_frequency``, in the
        input CRS.
    selected : geopandas.GeoDataFrame
        The ``k`` selected cells, locked-in first, then best first (``rank`` 1..k); with
        ``locked_in`` when any cell is locked in, ``selection_frequency`` when bootstrapped.
    summary : dict
        The run summary (the ``run_summary`` layer's one row).
    estimator : estimator
        The fitted estimator.
    feature_names : list of str
        Feature columns, in the order of ``estimator.coef_``.
    cv : reserve.model_selection.CSelection or None
        The cross-validation outcome when ``C`` was chosen automatically.
    gpkg_path, map_path : Path or None
        Files written (None when ``out`` was not given / no map was asked for).
    config : dict
        The effective configuration.
    contributions : numpy.ndarray or None
        Per feature (order of ``feature_names``), the mean over the selected cells of
        ``coef_[j] * z[i, j]`` (``z``: standardised features, mean 0 on the fitted cells):
        how much feature ``j`` lifts the selected cells' scores above those of an average
        fitted cell. Their sum is the selected cells' mean score minus the intercept.
    ranking : pandas.DataFrame or None
        Every ranked cell (the selected, locked-in first, then the other candidates by
        score): ``rank``, ``cell_id``, ``score``, ``selected``, ``locked_in`` and, when
        bootstrapped, ``selection_frequency`` (the ``ranking`` layer).
    """

    planning_units: gpd.GeoDataFrame
    selected: gpd.GeoDataFrame
    summary: dict[str, Any]
    estimator: Any
    feature_names: list[str]
    cv: Any = None
    gpkg_path: Path | None = None
    map_path: Path | None = None
    config: dict[str, Any] = field(default_factory=dict)
    contributions: np.ndarray | None = None
    ranking: pd.DataFrame | None = None

    def main_features(self, n: int = 3) -> list[str]:
        """The ``n`` features that explain most of the selected cells' scores.

        Features are ordered by ``|contributions|`` (weight times the selected cells' mean
        standardised value), largest first, ties in column order. A feature with a large
        weight on which the selected cells are average, and a feature on which they are
        extreme but that the model ignores, both rank low. Without ``contributions`` the
        absolute weights are used.

        Parameters
        ----------
        n : int
            Number of features.

        Returns
        -------
        list of str
        """
        key = self.contributions if self.contributions is not None else self.estimator.coef_
        order = np.argsort(-np.abs(np.asarray(key, dtype=np.float64)), kind="stable")[:n]
        return [self.feature_names[i] for i in order]


# --------------------------------------------------------------------------- configuration


def _as_int(value: Any, name: str, *, low: int | None = None) -> int:
    if isinstance(value, bool):
        ok = False
    elif isinstance(value, int | np.integer):
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


def _as_species(value: Any) -> list[str] | None:
    """Species names: None, one name, or a list of names (``--species`` repeated)."""
    if value is None:
        return None
    names = [value] if isinstance(value, str) else list(value)
    if not names:
        return None
    if not all(isinstance(n, str) and n.strip() for n in names):
        raise InvalidInputError(
            f"species must be species names; received {value!r}. Pass e.g. "
            "--species 'Wood Thrush' --species 'Northern Bobwhite'"
        )
    return [n.strip() for n in names]


def _positive_float(value: Any) -> float | None:
    """``value`` as a positive finite float, or None when it is not one."""
    try:
        v = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        return None
    return v if np.isfinite(v) and v > 0 else None


def _as_money(value: Any) -> float:
    """A money budget: a positive finite number."""
    v = _positive_float(value)
    if v is None:
        raise InvalidInputError(
            f"budget must be a positive total cost when --cost-column is given; received "
            f"{value!r}. Pass e.g. --budget 1500 (in the cost column's units)"
        )
    return v


def _as_C(value: Any) -> float | str:
    if isinstance(value, str) and value.strip().lower() in ("cv", "auto"):
        return "cv"
    c = _positive_float(value)
    if c is None:
        raise InvalidInputError(
            f"C must be a positive number or 'cv' (cross-validation); received {value!r}"
        )
    return c


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
    merged: dict[str, Any] = {
        "budget": None,
        "cells": None,
        "method": SELECT_DEFAULTS.method,
        "C": SELECT_DEFAULTS.C,
        "seed": SELECT_DEFAULTS.seed,
        "out": SELECT_DEFAULTS.out,
        "map": None,
        "overwrite": False,
        "time_limit": SELECT_DEFAULTS.time_limit,
        "locked_in": None,
        "locked_out": None,
        "bootstrap": SELECT_DEFAULTS.bootstrap,
        "n_jobs": SELECT_DEFAULTS.n_jobs,
        "cost_column": None,
        "species": None,
    }
    if config is not None:
        merged.update(load_config(config))
    merged.update({k: v for k, v in given.items() if v is not None})
    if merged["budget"] is None:
        raise InvalidInputError("budget is required; pass --budget K (e.g. --budget 30)")
    merged["species"] = _as_species(merged["species"])
    if merged["cost_column"] is not None:
        merged["cost_column"] = str(merged["cost_column"])
        merged["budget"] = _as_money(merged["budget"])
    else:
        merged["budget"] = _as_int(merged["budget"], "budget", low=1)
    merged["seed"] = _as_int(merged["seed"], "seed", low=0)
    merged["bootstrap"] = _as_int(merged["bootstrap"], "bootstrap", low=0)
    merged["n_jobs"] = _as_int(merged["n_jobs"], "n_jobs", low=1)
    merged["C"] = _as_C(merged["C"])
    merged["method"] = _check_method(merged["method"])
    if not isinstance(merged["overwrite"], bool):
        raise InvalidInputError(
            f"overwrite must be true or false; received {merged['overwrite']!r}"
        )
    try:
        merged["time_limit"] = float(merged["time_limit"])
    except (TypeError, ValueError):
        raise InvalidInputError(
            f"time_limit must be a number of seconds; received {merged['time_limit']!r}"
        ) from None
    for key in ("cells", "out", "map", "locked_in", "locked_out"):
        if merged[key] is not None and not isinstance(merged[key], str | os.PathLike):
            raise InvalidInputError(f"{key} must be a path; received {merged[key]!r}")
        if merged[key] is not None:
            merged[key] = str(merged[key])
    return merged


def _check_method(method: Any) -> str:
    m = str(method).strip().lower()
    if m not in METHODS:
        raise InvalidInputError(f"method={method!r} is unknown; choose one of {', '.join(METHODS)}")
    return m


# --------------------------------------------------------------------------- reading


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_planning_units(path: str | os.PathLike[str]) -> gpd.GeoDataFrame:
    """Read and check the ``planning_units`` layer of a GeoPackage.

    Parameters
    ----------
    path : path-like
        A GeoPackage from ``reserve ingest``.

    Returns
    -------
    geopandas.GeoDataFrame

    Raises
    ------
    DataFileError
        Missing file, not a GeoPackage, no ``planning_units`` layer, missing columns, no CRS,
        no feature column.
    """
    import pyogrio
    from pyogrio.errors import DataSourceError

    p = Path(path)
    if not p.is_file():
        raise DataFileError(f"cells={str(p)!r} does not exist; pass a GeoPackage from ingest")
    try:
        info = pyogrio.list_layers(p)
        driver = pyogrio.read_info(p, layer=info[0][0])["driver"] if len(info) else None
    except (DataSourceError, OSError, IndexError):
        driver = None
    if driver != "GPKG":
        raise DataFileError(
            f"cells={str(p)!r} is not a GeoPackage; pass the .gpkg written by 'reserve ingest'"
        )
    names = [str(n) for n in info[:, 0]]
    if "planning_units" not in names:
        raise DataFileError(
            f"cells={str(p)!r} has no 'planning_units' layer (layers: {names}); "
            "pass the .gpkg written by 'reserve ingest'"
        )
    units = pyogrio.read_dataframe(p, layer="planning_units")
    missing = [c for c in REQUIRED_COLUMNS if c not in units.columns]
    if missing or not isinstance(units, gpd.GeoDataFrame):
        missing = missing or ["geometry"]
        raise DataFileError(
            f"cells={str(p)!r}: planning_units lacks the columns {missing}; "
            "re-create it with 'reserve ingest'"
        )
    if units.crs is None:
        raise DataFileError(
            f"cells={str(p)!r}: planning_units has no CRS; re-create it with 'reserve ingest' "
            "or assign the grid's CRS (e.g. ogr2ogr -a_srs)"
        )
    return units


def _feature_columns(units: pd.DataFrame, exclude: tuple[str, ...] = ()) -> list[str]:
    cols = [
        c
        for c in units.columns
        if c not in _NON_FEATURES
        and c not in exclude
        and not str(c).startswith(_NON_FEATURE_PREFIXES)
        and c != units.geometry.name
        and pd.api.types.is_numeric_dtype(units[c])
        and not pd.api.types.is_bool_dtype(units[c])
    ]
    return cols


def _design(
    units: gpd.GeoDataFrame,
    source: str,
    locked_out: np.ndarray | None = None,
    locked_in: np.ndarray | None = None,
    exclude: tuple[str, ...] = (),
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Standardised features of all cells, and the rows / labels the estimator sees.

    ``locked_out`` (default: the ``locked_out`` column) and ``locked_in`` cells are left out
    of the fit, and so out of the standardisation. Columns in ``exclude`` (the cost column)
    are never features.
    """
    features = _feature_columns(units, exclude)
    if not features:
        raise DataFileError(
            f"cells={source!r}: planning_units has no numeric feature column; ingest with "
            "--categorical / --continuous rasters"
        )
    role = units["role"].astype(str).to_numpy()
    label = pd.to_numeric(units["label"], errors="coerce").to_numpy()
    locked = (
        units["locked_out"].fillna(False).astype(bool).to_numpy()
        if locked_out is None
        else np.asarray(locked_out, dtype=bool)
    )
    if locked_in is not None:
        locked = locked | np.asarray(locked_in, dtype=bool)
    train = (role == "train") & ~locked
    cand = (role == "candidate") & ~locked
    if not train.any():
        raise DataFileError(
            f"cells={source!r} has no training cells (role 'train'); ingest with --public "
            "polygons that contain surveyed cells"
        )
    bad_label = train & ~np.isin(label, (0, 1))
    if bad_label.any():
        raise DataFileError(
            f"cells={source!r}: {int(bad_label.sum())} training cells have a label other than "
            "0 or 1; re-create the file with 'reserve ingest'"
        )
    classes = np.unique(label[train])
    if classes.size < 2:
        raise DataFileError(
            f"cells={source!r}: every training cell has label {int(classes[0])}; TTK needs "
            "detections (1) and non-detections (0) on training cells. Widen the region, "
            "dates or public land"
        )
    if not cand.any():
        raise DataFileError(
            f"cells={source!r} has no candidate cells (role 'candidate') that are not locked; "
            "nothing to select"
        )
    raw = units[features].to_numpy(dtype=np.float64, na_value=np.nan)
    fit_rows = train | cand
    bad = ~np.isfinite(raw[fit_rows])
    if bad.any():
        cols = sorted({features[j] for j in np.flatnonzero(bad.any(axis=0))})
        n_rows = int(bad.any(axis=1).sum())
        raise DataFileError(
            f"cells={source!r}: {n_rows} train/candidate cells have NaN or infinite features "
            f"(columns {cols[:5]}); re-ingest with rasters covering the region, or set those "
            "cells' role to 'other'"
        )
    mean = raw[fit_rows].mean(axis=0)
    sd = raw[fit_rows].std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)  # constant column: centred to 0, cannot matter
    Z = (raw - mean) / sd
    rows = np.flatnonzero(fit_rows)
    y = np.where(cand[rows], -1, label[rows]).astype(np.int64)
    return Z, rows, y, features, train, cand


def _estimator(
    method: str,
    k: int,
    C: float,
    seed: int,
    time_limit: float,
    budget: float | None = None,
    n_species: int = 1,
) -> Any:
    """The estimator of ``method``; ``budget`` (a money budget) only for the TTK methods.

    With ``n_species > 1``: :class:`reserve.solvers.multi.MultiTTK` (``ttk``, ``ttk-mip``)
    or :class:`reserve.solvers.multi.MultiSVM` (``svm``: the sum of per-species SVM scores).
    """
    from reserve.solvers import AATP, SVM, TSVM, TTK, SVMPerf, TopPush

    if n_species > 1:
        from reserve.solvers.multi import MultiSVM, MultiTTK

        if method == "svm":
            return MultiSVM(k=k, C=C)
        solver = "fd" if method == "ttk" else "mip"
        return MultiTTK(k=k, C=C, solver=solver, time_limit=time_limit, random_state=seed)

    # budget= only when given, so a cell-budget run builds the same estimator as always
    money = {} if budget is None else {"budget": budget}
    if method == "ttk":
        return TTK(k=k, C=C, solver="fd", random_state=seed, **money)
    if method in ("ttk-mip", "ttk-bnb"):
        exact = "bnb" if method == "ttk-bnb" else "auto"
        return TTK(k=k, C=C, solver="mip", mip_solver=exact, time_limit=time_limit,
                   random_state=seed, **money)  # fmt: skip
    cls = {"svm": SVM, "tsvm": TSVM, "svmperf": SVMPerf, "toppush": TopPush, "aatp": AATP}
    return cls[method](k=k, C=C)


def _fit_select(
    method: str,
    k: int,
    C: float,
    seed: int,
    time_limit: float,
    X: np.ndarray,
    y: np.ndarray,
    cost: np.ndarray | None = None,
    budget: float | None = None,
) -> tuple[Any, np.ndarray]:
    """Fit ``method`` and return it with the selected rows of ``X`` (best first).

    Without ``cost``: the estimator's own ``k`` cells. With ``cost`` (one value per row of
    ``X``; only the candidates' are used) and a money ``budget``: TTK solves its knapsack form
    and selects within the budget; a baseline is fitted with ``k`` cells and its candidate
    scores are walked by :func:`reserve.solvers._base.budget_select`.
    """
    if cost is None:
        n_species = y.shape[1] if y.ndim == 2 else 1
        est = _estimator(method, k, C, seed, time_limit, n_species=n_species).fit(X, y)
        return est, np.asarray(est.selected_, dtype=np.int64)
    if method in ("ttk", "ttk-mip", "ttk-bnb"):
        est = _estimator(method, k, C, seed, time_limit, budget=budget).fit(X, y, cost=cost)
        return est, np.asarray(est.selected_, dtype=np.int64)
    from reserve.solvers._base import budget_select

    est = _estimator(method, k, C, seed, time_limit).fit(X, y)
    cand = np.asarray(est.candidates_)
    pick = budget_select(np.asarray(est.candidate_scores_), cost[cand], float(budget))
    return est, cand[pick]


def _species_labels(units: pd.DataFrame, species: list[str]) -> tuple[np.ndarray, list[str]]:
    """Per-species labels (n, S) from the ``label__<slug>`` columns of a multi-species ingest."""
    slugs = [species_slug(name) for name in species]
    dup = sorted({n for n, sl in zip(species, slugs, strict=True) if slugs.count(sl) > 1})
    if dup:
        raise InvalidInputError(
            f"species {dup} name the same species column twice; pass each species once"
        )
    have = [str(c)[len(SPECIES_LABEL_PREFIX) :] for c in units.columns
            if str(c).startswith(SPECIES_LABEL_PREFIX)]  # fmt: skip
    missing = [n for n, sl in zip(species, slugs, strict=True) if sl not in have]
    if missing:
        known = ", ".join(have) if have else "none (a single-species ingest)"
        raise InvalidInputError(
            f"species {missing} have no {SPECIES_LABEL_PREFIX}<species> column in planning_units "
            f"(species in the file: {known}); ingest them with reserve ingest --species NAME "
            "--species NAME2 ..."
        )
    cols = [SPECIES_LABEL_PREFIX + sl for sl in slugs]
    labels = units[cols].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    return labels, slugs


def _expected_precision(
    train_scores: np.ndarray, train_labels: np.ndarray, chosen_scores: np.ndarray
) -> float:
    """Mean Platt-calibrated probability of presence over the chosen cells.

    A one-feature logistic regression of the training cells' labels on their scores maps a
    score to a probability of detection; its mean over the selection is the share of the
    chosen cells expected to hold the species (an in-sample calibration: optimistic when the
    training cells are few).
    """
    from sklearn.linear_model import LogisticRegression

    if chosen_scores.size == 0:
        return float("nan")
    lr = LogisticRegression(C=1e4).fit(train_scores[:, None], train_labels.astype(int))
    return float(lr.predict_proba(chosen_scores[:, None])[:, 1].mean())


def _cost_values(units: pd.DataFrame, column: str, need: np.ndarray) -> np.ndarray:
    """The cost column as floats; refused unless positive and finite on the ``need`` rows."""
    if column not in units.columns or column == units.geometry.name:
        numeric = [
            c
            for c in units.columns
            if c not in _NON_FEATURES
            and c != units.geometry.name
            and pd.api.types.is_numeric_dtype(units[c])
        ][:8]
        raise InvalidInputError(
            f"cost_column={column!r} is not a column of planning_units; pass one of its "
            f"numeric columns (e.g. {', '.join(numeric)}) or add a cost column to the file"
        )
    col = units[column]
    if pd.api.types.is_bool_dtype(col) or not pd.api.types.is_numeric_dtype(col):
        raise InvalidInputError(
            f"cost_column={column!r} is not numeric (dtype {col.dtype}); store each cell's "
            "cost as a number"
        )
    cost = col.to_numpy(dtype=np.float64, na_value=np.nan)
    bad = need & ~(np.isfinite(cost) & (cost > 0))
    if bad.any():
        ids = units["cell_id"].to_numpy()[bad][:5].tolist()
        kinds = []
        if np.isnan(cost[bad]).any():
            kinds.append("missing/NaN")
        if np.isinf(cost[bad]).any():
            kinds.append("infinite")
        if (cost[bad] <= 0).any():
            kinds.append("zero or negative")
        raise InvalidInputError(
            f"cost_column={column!r} has {int(bad.sum())} candidate cells with a "
            f"{' or '.join(kinds)} cost (cell_id {ids}); every candidate needs a positive "
            "cost: fill them in, or lock those cells out with --locked-out"
        )
    return cost


def _default_cells() -> tuple[Path, Path | None, Path | None]:
    try:
        from reserve import default_region
    except ImportError:
        raise DataFileError(
            "no cells given and the embedded default region is not available in this build; "
            "pass --cells PATH (a GeoPackage from 'reserve ingest')"
        ) from None
    cells = Path(default_region.default_planning_units())
    public = outline = None
    try:
        public = Path(default_region.default_public_land_path())
        outline = Path(default_region.default_region_outline_path())
    except (AttributeError, OSError):  # outlines are decoration; selection does not need them
        pass
    return cells, public, outline


# --------------------------------------------------------------------------- locks, bootstrap


def _locked_mask(
    units: gpd.GeoDataFrame, spec: str | os.PathLike[str] | None, name: str
) -> np.ndarray:
    """Cells marked by ``spec``: a boolean column of ``units`` or a polygon file.

    A polygon file (read and reprojected by :func:`reserve.ownership.read_polygons`) marks
    the cells more than ``INGEST_DEFAULTS.locked_threshold`` of whose area it covers.
    """
    n = len(units)
    if spec is None:
        return np.zeros(n, dtype=bool)
    text = str(spec)
    if text in units.columns and text != units.geometry.name:
        col = units[text]
        if pd.api.types.is_bool_dtype(col):
            return col.fillna(False).to_numpy(dtype=bool)
        values = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64)
        ok = np.isnan(values) | np.isin(values, (0.0, 1.0))
        if not ok.all() or not pd.api.types.is_numeric_dtype(col):
            raise InvalidInputError(
                f"{name}={text!r} is a column that is not boolean (true/false or 0/1); pass a "
                "boolean column of planning_units or a polygon file"
            )
        return np.nan_to_num(values, nan=0.0) == 1.0
    if not Path(text).exists():
        raise InvalidInputError(
            f"{name}={text!r} is neither a column of planning_units nor an existing file; pass "
            "a boolean column name or a polygon file (GeoPackage, shapefile, GeoJSON)"
        )
    from reserve.config import INGEST_DEFAULTS
    from reserve.ownership import cover_fraction, read_polygons

    polygons = read_polygons(text, units.crs, name=name)
    frac = cover_fraction(units.geometry.to_numpy(), polygons)
    mask = frac > INGEST_DEFAULTS.locked_threshold
    if not mask.any():
        where = "touches no cell" if not (frac > 0).any() else "covers no cell by more than half"
        raise DataFileError(
            f"{name} polygon file {text!r} {where} of the region (planning units in "
            f"{units.crs.name}); check its CRS and that it lies inside the region"
        )
    return mask


def _refit_selected(
    method: str,
    k: int,
    C: float,
    seed: int,
    time_limit: float,
    X: np.ndarray,
    y: np.ndarray,
    sample: np.ndarray,
    cost: np.ndarray | None = None,
    budget: float | None = None,
) -> np.ndarray:
    """Rows of ``X`` selected by one refit on the rows ``sample`` (a bootstrap replicate)."""
    sub_cost = None if cost is None else cost[sample]
    _, picked = _fit_select(method, k, C, seed, time_limit, X[sample], y[sample], sub_cost, budget)
    return np.sort(sample[picked])


def _bootstrap_frequency(
    method: str,
    k: int,
    C: float,
    seed: int,
    time_limit: float,
    X: np.ndarray,
    y: np.ndarray,
    n_boot: int,
    n_jobs: int,
    cost: np.ndarray | None = None,
    budget: float | None = None,
) -> np.ndarray:
    """Share of ``n_boot`` refits on resampled training rows that select each row of ``X``.

    Each replicate draws the training rows (``y >= 0``) with replacement, detections and
    non-detections separately (so every replicate keeps both classes and their counts), and
    keeps every candidate row (``y == -1``) once. The draws come from
    ``numpy.random.SeedSequence(seed).spawn(n_boot)`` in the calling process, so the result
    is the same for any ``n_jobs``.
    """
    from joblib import Parallel, delayed

    lab = y if y.ndim == 1 else y[:, 0]  # several species: strata of the first
    pos = np.flatnonzero(lab == 1)
    neg = np.flatnonzero(lab == 0)
    cand = np.flatnonzero(lab == -1)
    samples = []
    for child in np.random.SeedSequence(seed).spawn(n_boot):
        rng = np.random.default_rng(child)
        samples.append(
            np.concatenate(
                [rng.choice(pos, pos.size, replace=True), rng.choice(neg, neg.size, replace=True),
                 cand]
            )
        )  # fmt: skip
    picks = Parallel(n_jobs=n_jobs)(
        delayed(_refit_selected)(method, k, C, seed, time_limit, X, y, sample, cost, budget)
        for sample in samples
    )
    counts = np.zeros(len(y), dtype=np.int64)
    for chosen in picks:
        counts[chosen] += 1
    return counts / n_boot


# --------------------------------------------------------------------------- outputs


def _prepare_outputs(
    out: str | os.PathLike[str], map_path: Path | None, overwrite: bool
) -> tuple[Path, Path | None]:
    """Check before any work that the outputs can be written and may be replaced."""
    out_dir = Path(out)
    gpkg = out_dir / GPKG_NAME
    for target in (gpkg, map_path):
        if target is not None and target.exists() and not overwrite:
            raise OutputExistsError(
                f"output {str(target)!r} already exists; pass --overwrite (overwrite=True) "
                "to replace it"
            )
    for folder in {out_dir, *([map_path.parent] if map_path is not None else [])}:
        if folder.exists() and not folder.is_dir():
            raise DataFileError(f"output folder {str(folder)!r} is a file; pass a folder path")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataFileError(
                f"output folder {str(folder)!r} cannot be created ({exc.strerror}); "
                "pass a writable folder"
            ) from None
        if not os.access(folder, os.W_OK | os.X_OK):
            raise DataFileError(
                f"output folder {str(folder)!r} is not writable; pass a writable folder"
            )
    return gpkg, map_path


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for pkg in ("reserve", "numpy", "scipy", "scikit-learn", "geopandas", "pyogrio", "shapely",
                "folium", "clarabel", "pyscipopt"):  # fmt: skip
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = ""
    return out


def _crs_text(crs: Any) -> str:
    """``EPSG:<code>`` when the CRS has one, else its definition as read (WKT)."""
    epsg = crs.to_epsg()
    return f"EPSG:{epsg}" if epsg else str(crs.srs)


def _nan_or(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return v


# --------------------------------------------------------------------------- main entry


def select_reserve(
    budget: int | float,
    cells: str | os.PathLike[str] | None = None,
    *,
    method: str = SELECT_DEFAULTS.method,
    C: float | str = SELECT_DEFAULTS.C,
    seed: int = SELECT_DEFAULTS.seed,
    out: str | os.PathLike[str] | None = None,
    map: str | os.PathLike[str] | bool | None = None,
    overwrite: bool = False,
    time_limit: float = SELECT_DEFAULTS.time_limit,
    locked_in: str | os.PathLike[str] | None = None,
    locked_out: str | os.PathLike[str] | None = None,
    bootstrap: int = SELECT_DEFAULTS.bootstrap,
    n_jobs: int = SELECT_DEFAULTS.n_jobs,
    cost_column: str | None = None,
    species: list[str] | tuple[str, ...] | str | None = None,
    public: str | os.PathLike[str] | None = None,
    outline: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    config: Mapping[str, Any] | None = None,
) -> SelectionResult:
    """Select ``budget`` candidate cells for the reserve and (optionally) write the outputs.

    Parameters
    ----------
    budget : int or float
        Number of cells to select, ``1 <= budget <`` the number of candidate cells; with
        ``cost_column``, the total cost the selection may spend (see "Money budgets").
    cells : path-like, optional
        GeoPackage with a ``planning_units`` layer (``reserve ingest``). Default: the
        embedded Georgia region, ingested and cached on first use.
    method : str
        One of :data:`METHODS`.
    C : float or "cv"
        Hinge-loss weight, or ``"cv"``: the paper's repeated 2-fold cross-validation over
        ``SELECT_DEFAULTS.Cs`` on the training cells.
    seed : int
        Seed of the cross-validation folds and of the solver.
    out : path-like, optional
        Folder of ``reserve.gpkg``; nothing is written when None.
    map : path-like or bool, optional
        HTML map path; default (None or True) ``maps/<cells>_<method>_k<budget>.html``
        (``<cells>`` is the cells file's stem, ``georgia`` for the default region);
        False for no map. Only used when ``out`` is given.
    overwrite : bool
        Replace existing outputs; without it an existing output is an error, raised before
        any work.
    time_limit : float
        Seconds per exact (``ttk-mip``, ``ttk-bnb``) fit.
    locked_in : str or path-like, optional
        Cells always selected (already owned or committed), counted in the budget: the name
        of a boolean column of ``planning_units`` or a polygon file (cells more than half
        covered). They must be candidate cells. See "Locked cells" in the module docstring.
    locked_out : str or path-like, optional
        Cells never selected, in addition to the ``locked_out`` column: a boolean column
        name or a polygon file.
    bootstrap : int
        Number of refits on resampled training cells (0: none); adds
        ``selection_frequency`` (share of refits selecting the cell) to the outputs.
    n_jobs : int
        Worker processes for the bootstrap refits; the frequencies do not depend on it.
    cost_column : str, optional
        Column of ``planning_units`` with each cell's cost; makes ``budget`` a total cost.
    species : str or list of str, optional
        Species to select for, from a multi-species ingest (its ``label__<slug>`` columns).
        One name: that species alone. Several: the ``budget`` cells are shared by all of
        them (see "Several species"). Default: the file's ``label`` column.
    public, outline : path-like, optional
        Public-land and region polygons drawn on the map (default region: its own files).
    progress : callable, optional
        Called with a short message at the start of every step.
    config : mapping, optional
        The effective configuration to record (default: these arguments).

    Returns
    -------
    SelectionResult

    Raises
    ------
    InvalidInputError
        Bad budget, method, C, bootstrap or n_jobs; conflicting locks (a usage error).
    DataFileError
        Unusable cells or lock polygon file; unwritable output folder.
    OutputExistsError
        An output exists and ``overwrite`` is False.
    """
    t0 = time.perf_counter()
    say = progress or (lambda message: None)
    method = _check_method(method)
    C = _as_C(C)
    seed = _as_int(seed, "seed", low=0)
    bootstrap = _as_int(bootstrap, "bootstrap", low=0)
    n_jobs = _as_int(n_jobs, "n_jobs", low=1)
    if cost_column is not None:
        cost_column = str(cost_column)
        budget = _as_money(budget)
    elif isinstance(budget, bool) or not isinstance(budget, int | np.integer) or budget < 1:
        raise InvalidInputError(
            f"budget must be a positive integer (number of cells); received {budget!r}. "
            "For a total cost, pass --cost-column with the cells' cost column"
        )
    else:
        budget = int(budget)
    species_names = _as_species(species) or []
    multi = len(species_names) > 1
    if multi:
        if method not in MULTI_SPECIES_METHODS:
            raise InvalidInputError(
                f"method={method!r} selects for one species; with several --species use one "
                f"of {', '.join(MULTI_SPECIES_METHODS)}"
            )
        if cost_column is not None:
            raise InvalidInputError(
                "a money budget (--cost-column) with several --species is not supported; "
                "pass one --species, or drop --cost-column and give a number of cells"
            )
        if C == "cv":
            raise InvalidInputError(
                "C='cv' chooses C for one species; with several --species pass a number, e.g. --C 1"
            )
    effective = dict(config) if config is not None else None

    if cells is None:
        say("preparing the default region (cached after the first run)")
        cells_path, default_public, default_outline = _default_cells()
        public = public if public is not None else default_public
        outline = outline if outline is not None else default_outline
    else:
        cells_path = Path(cells)

    gpkg_path = map_path = None
    if out is not None:
        if map is None or map is True:
            stem = "georgia" if cells is None else cells_path.stem
            size = f"k{budget}" if cost_column is None else f"cost{budget:g}"
            name = f"{stem}_{method}_{size}"
            if species_names:  # one map per species set, not over the default run's
                name += "_" + "_".join(species_slug(n) for n in species_names)
            map_path = Path(SELECT_DEFAULTS.map_dir) / f"{name}.html"
        elif map is not False:
            map_path = Path(map)
        gpkg_path, map_path = _prepare_outputs(out, map_path, overwrite)

    say(f"reading {cells_path}")
    units = read_planning_units(cells_path)
    from reserve.export import identified_crs

    # its EPSG code is looked up once here, not again by the summary and every layer written
    units = units.set_crs(identified_crs(units.crs), allow_override=True)
    role = units["role"].astype(str).to_numpy()
    lock_out = units["locked_out"].fillna(False).astype(bool).to_numpy()
    lock_out = lock_out | _locked_mask(units, locked_out, "locked_out")
    lock_in = _locked_mask(units, locked_in, "locked_in")
    both = lock_in & lock_out
    if both.any():
        ids = units["cell_id"].to_numpy()[both][:5].tolist()
        raise InvalidInputError(
            f"locked_in and locked_out share {int(both.sum())} cells (cell_id {ids}); a cell "
            "cannot be both: remove it from one of them"
        )
    not_cand = lock_in & (role != "candidate")
    if not_cand.any():
        ids = units["cell_id"].to_numpy()[not_cand][:5].tolist()
        raise InvalidInputError(
            f"locked_in={str(locked_in)!r} marks {int(not_cand.sum())} cells that are not "
            f"candidates (public or 'other' cells, cell_id {ids}); lock in private candidate "
            "cells only"
        )
    n_in = int(lock_in.sum())
    cost = None
    if cost_column is not None:
        cost = _cost_values(units, cost_column, (role == "candidate") & ~lock_out)
        cost_in = float(cost[lock_in].sum())
        if cost_in > budget * (1.0 + 1e-12):
            raise InvalidInputError(
                f"locked_in={str(locked_in)!r} marks {n_in} cells costing {cost_in:g}, more "
                f"than budget={budget:g}; pass --budget >= {cost_in:g} or lock in fewer cells"
            )
        free_budget: float = max(budget - cost_in, 0.0)
    elif n_in > budget:
        raise InvalidInputError(
            f"locked_in={str(locked_in)!r} marks {n_in} cells, more than budget={budget}; "
            f"pass --budget >= {n_in} or lock in fewer cells"
        )
    exclude = () if cost_column is None else (cost_column,)
    labels = None  # (n, S) per-species labels when --species is given
    units_fit = units
    if species_names:
        labels, slugs = _species_labels(units, species_names)
        units_fit = units.assign(label=labels[:, 0])  # the first species' checks in _design
    Z, rows, y, features, train, cand = _design(
        units_fit, str(cells_path), lock_out, lock_in, exclude
    )
    y_fit: np.ndarray = y
    if multi:
        assert labels is not None
        for j, name in enumerate(species_names):
            classes = np.unique(labels[train, j])
            if not np.array_equal(classes, [0.0, 1.0]):
                raise DataFileError(
                    f"cells={str(cells_path)!r}: species {name!r} has labels "
                    f"{classes.astype(int).tolist()} on the training cells; each species needs "
                    "detections (1) and non-detections (0) there. Drop it from --species"
                )
        y_fit = np.where(cand[rows][:, None], -1, labels[rows]).astype(np.int64)
    n_cand = int(cand.sum())
    if cost is None:
        k_free = budget - n_in
        if k_free >= n_cand:
            # every solver ranks candidates against each other: one must stay unselected
            extra = f" ({n_in} of them locked in)" if n_in else ""
            raise InvalidInputError(
                f"budget={budget} must be smaller than the {n_cand + n_in} candidate "
                f"cells{extra}; pass --budget <= {n_cand + n_in - 1}"
            )
        k_fit = max(k_free, 1)  # k_free == 0: fit only to score and rank the other candidates
        choosing = f"choosing {k_free} more"
    else:
        cand_cost = cost[cand]
        if free_budget >= float(cand_cost.sum()):
            raise InvalidInputError(
                f"budget={budget:g} buys every candidate cell (they cost {cand_cost.sum():g} "
                f"in all{' besides the locked-in cells' if n_in else ''}); there is nothing "
                f"to choose: pass --budget < {cand_cost.sum() + budget - free_budget:g}"
            )
        if free_budget < float(cand_cost.min()) and not n_in:
            raise InvalidInputError(
                f"budget={budget:g} buys no candidate cell (the cheapest costs "
                f"{cand_cost.min():g}); pass --budget >= {cand_cost.min():g}"
            )
        # k_free: 1 when some candidate still fits (the knapsack decides how many), else 0
        k_free = int(free_budget >= float(cand_cost.min()))
        # baselines and the CV fit a number of cells: what the budget buys at the median cost
        k_fit = int(np.clip(free_budget // float(np.median(cand_cost)), 1, n_cand - 1))
        choosing = f"choosing more for {free_budget:g} of the budget"
    if n_in or lock_out.any():
        say(f"{n_in} cells locked in, {int(lock_out.sum())} locked out; {choosing}")

    cv = None
    if C == "cv":
        from reserve.model_selection import select_C

        say(f"choosing C by cross-validation over {list(SELECT_DEFAULTS.Cs)}")
        est0 = _estimator(method, k_fit, 1.0, seed, time_limit)
        cv = select_C(
            est0,
            Z[rows],
            y,
            Cs=SELECT_DEFAULTS.Cs,
            n_repeats=SELECT_DEFAULTS.cv_repeats,
            n_folds=SELECT_DEFAULTS.cv_folds,
            k_fraction=SELECT_DEFAULTS.cv_k_fraction,
            random_state=seed,
        )
        C_value, C_source = float(cv.best_C), "cv"
    else:
        C_value, C_source = float(C), "given"

    say(f"fitting {method} (k={k_fit}, C={C_value:g}) on {int(train.sum())} training and "
        f"{n_cand} candidate cells")  # fmt: skip
    t_fit = time.perf_counter()
    cost_rows = None if cost is None or not k_free else cost[rows]
    fit_budget = free_budget if cost_rows is not None else None
    est, picked = _fit_select(
        method, k_fit, C_value, seed, time_limit, Z[rows], y_fit, cost_rows, fit_budget
    )
    fit_seconds = time.perf_counter() - t_fit

    frequency = None
    if bootstrap:
        frequency = np.zeros(len(units))
        frequency[lock_in] = 1.0
        if k_free:
            say(f"bootstrap: {bootstrap} refits on resampled training cells ({n_jobs} jobs)")
            frequency[rows] = _bootstrap_frequency(
                method,
                k_fit if cost_rows is not None else k_free,
                C_value,
                seed,
                time_limit,
                Z[rows],
                y_fit,
                bootstrap,
                n_jobs,
                cost_rows,
                fit_budget,
            )

    # assemble: scores of every cell with finite features, ranks of candidates
    finite = np.isfinite(Z).all(axis=1)
    coef = np.atleast_2d(np.asarray(est.coef_, dtype=np.float64))  # (S, d), S = 1 usually
    per_species = np.full((len(units), coef.shape[0]), np.nan)
    per_species[finite] = Z[finite] @ coef.T + np.atleast_1d(est.intercept_)
    # one score per cell: the species' own; several species: the max (MultiTTK's positives)
    # or the sum (MultiSVM's ranking), so that the rank follows what the method selected by
    score = per_species[:, 0] if not multi else (
        per_species.sum(axis=1) if method == "svm" else per_species.max(axis=1)
    )  # fmt: skip
    cand_rows = rows[est.candidates_]
    sel_rows = rows[picked] if k_free else np.zeros(0, dtype=np.int64)
    # rank: locked-in cells first (by score), the estimator's selection in its order, then
    # the other candidates by score
    in_rows = np.flatnonzero(lock_in)
    in_rows = in_rows[np.lexsort((in_rows, -np.nan_to_num(score[in_rows], nan=-np.inf)))]
    rest = np.setdiff1d(cand_rows, sel_rows)
    rest = rest[np.lexsort((rest, -score[rest]))]
    sel_rows = np.concatenate([in_rows, sel_rows]).astype(np.int64)
    order = np.concatenate([sel_rows, rest])
    rank = np.zeros(len(units), dtype=np.int64)
    rank[order] = np.arange(1, order.size + 1)
    selected = np.zeros(len(units), dtype=bool)
    selected[sel_rows] = True

    fixed = [c for c in units.columns if c not in features and c != units.geometry.name]
    fixed = [c for c in fixed if c not in ("score", "rank", "selected", "locked_in",
                                           "selection_frequency")]  # fmt: skip
    table = units[fixed].copy()
    table["locked_out"] = lock_out
    table["locked_in"] = lock_in
    table["score"] = score
    table["rank"] = rank
    table["selected"] = selected
    if frequency is not None:
        table["selection_frequency"] = frequency
    score_cols = [f"score__{sl}" for sl in slugs] if multi else []
    for j, col in enumerate(score_cols):
        table[col] = per_species[:, j]
    result_units = gpd.GeoDataFrame(
        pd.concat([table, units[features]], axis=1), geometry=units.geometry, crs=units.crs
    )
    sel = result_units.iloc[sel_rows].copy()
    # the extra columns only when used, so a plain run's selected layer is as before
    extra = (
        ([cost_column] if cost_column is not None else [])
        + (["selection_frequency"] if frequency is not None else [])
        + (["locked_in"] if n_in else [])
    )
    cols = ["rank", "cell_id", "score", *score_cols, *extra, "role", "label", *features,
            sel.geometry.name]  # fmt: skip
    sel = sel[cols].reset_index(drop=True)
    ranking = pd.DataFrame(result_units.iloc[order][
        ["rank", "cell_id", "score", *score_cols, "selected", "locked_in",
         *([cost_column] if cost_column is not None else []),
         *(["selection_frequency"] if frequency is not None else [])]
    ]).reset_index(drop=True)  # fmt: skip
    if cost is not None:
        # what buying down the ranking would cost: the runners-up priced for the planner
        ranking.insert(ranking.columns.get_loc(cost_column) + 1, "cumulative_cost",
                       np.cumsum(cost[order]))  # fmt: skip

    if effective is None:
        effective = {
            "budget": budget, "cells": None if cells is None else str(cells), "method": method,
            "C": C, "seed": seed, "out": None if out is None else str(out),
            "map": None if map_path is None else str(map_path), "overwrite": overwrite,
            "time_limit": time_limit,
            "locked_in": None if locked_in is None else str(locked_in),
            "locked_out": None if locked_out is None else str(locked_out),
            "bootstrap": bootstrap, "n_jobs": n_jobs, "cost_column": cost_column,
            "species": species_names or None,
        }  # fmt: skip
    effective = {**effective, "C_searched": list(SELECT_DEFAULTS.Cs) if C == "cv" else None}
    summary: dict[str, Any] = {
        "budget": budget,
        "budget_unit": "cells" if cost_column is None else f"cost ({cost_column})",
        "cost_column": cost_column or "",
        "n_selected": int(selected.sum()),
        "total_cost": float(cost[sel_rows].sum()) if cost is not None else float("nan"),
        "method": method,
        "c": C_value,
        "c_source": C_source,
        "c_cv_scores": "" if cv is None else json.dumps(
            {f"{c:g}": _nan_or(s) for c, s in zip(cv.Cs, cv.mean_scores, strict=True)}
        ),
        "solver_status": str(getattr(est, "status_", "fitted")),
        "objective": _nan_or(getattr(est, "objective_", np.nan)),
        "bound": _nan_or(getattr(est, "bound_", np.nan)),
        "gap": _nan_or(getattr(est, "gap_", np.nan)),
        "n_iter": int(getattr(est, "n_iter_", -1) if getattr(est, "n_iter_", None) is not None
                      else -1),
        "fit_seconds": round(fit_seconds, 3),
        "runtime_seconds": np.nan,  # set below, after the outputs are written
        "seed": seed,
        "n_train": int(train.sum()),
        "n_train_positive": int((train & (pd.to_numeric(units_fit["label"]) == 1)).sum()),
        "n_candidates": n_cand,
        "n_locked_in": n_in,
        "n_locked_out": int(lock_out.sum()),
        "effective_budget": k_free if cost is None else free_budget,
        "bootstrap": bootstrap,
        "n_cells": len(units),
        "n_features": len(features),
        "main_features": "",
        "standardisation": "mean 0, sd 1 on train + candidate cells",
        "crs": _crs_text(units.crs),
        "cells_path": str(cells_path),
        "cells_sha256": _sha256(cells_path),
        "public_path": "" if public is None else str(public),
        "outline_path": "" if outline is None else str(outline),
        "config": json.dumps(effective, sort_keys=True, default=str),
    }  # fmt: skip
    summary.update({f"version_{k.replace('-', '_')}": v for k, v in _versions().items()})
    result = SelectionResult(
        planning_units=result_units,
        selected=sel,
        summary=summary,
        estimator=est,
        feature_names=features,
        cv=cv,
        config=effective,
        # several species: the sum over species of each species' contribution
        contributions=Z[sel_rows].mean(axis=0) * coef.sum(axis=0),
        ranking=ranking,
    )
    summary["main_features"] = ", ".join(result.main_features())
    if species_names:
        summary["species"] = ", ".join(species_names)
    if multi:
        assert labels is not None
        presences = 0.0
        for j, sl in enumerate(slugs):
            ep = _expected_precision(
                per_species[train, j], labels[train, j], per_species[sel_rows, j]
            )
            summary[f"n_train_positive__{sl}"] = int((labels[train, j] == 1).sum())
            summary[f"expected_precision__{sl}"] = ep
            presences += ep * sel_rows.size
        summary["expected_presences"] = presences

    if gpkg_path is not None:
        from reserve.export import write_geopackage

        summary["runtime_seconds"] = round(time.perf_counter() - t0, 3)
        say(f"writing {gpkg_path}")
        write_geopackage(
            result_units, sel, summary, gpkg_path, overwrite=overwrite, ranking=ranking
        )
        result.gpkg_path = gpkg_path
    if map_path is not None:
        from reserve.maps import write_map

        say(f"drawing the map {map_path}")
        write_map(
            result_units,
            map_path,
            summary=summary,
            main_features=result.main_features(),
            public=public,
            outline=outline,
            overwrite=overwrite,
        )
        result.map_path = map_path
    summary["runtime_seconds"] = round(time.perf_counter() - t0, 3)
    return result
