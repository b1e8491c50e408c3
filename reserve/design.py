"""Planning units in, one checked :class:`Problem` out: features, labels, costs, locks, rows.

:func:`read_planning_units` reads the ``planning_units`` layer written by
:func:`reserve.ingest.ingest`; :func:`build_problem` checks it against the options of a run
and returns the arrays the solvers see. Every refusal happens here, before anything is fitted
or written.

Rows and labels
---------------
``train`` cells are labelled 1 (detected) or 0 (not detected), ``candidate`` cells -1 (the
unlabelled rows of the transductive fit); ``other`` cells, locked-out cells and locked-in
cells are left out of the fit. With ``species=`` the labels come from the ``label__<slug>``
columns of a multi-species ingest (one column per species: ``y`` has one column each).

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
does. Refused: a cell both locked in and locked out; locked-in cells that are not
``candidate`` cells (public training or ``other`` cells cannot be bought); more locked-in
cells than the budget (exactly the budget is allowed: nothing is left to choose, the
estimator is still fitted with ``k = 1`` to score and rank the other candidates, and none of
them is selected); a polygon file without a CRS or that locks no cell of the region.

Money budgets
-------------
With ``cost_column=`` the budget is a total cost, not a number of cells: the named column
holds each cell's price (any currency; it is never a feature). The problem object
(``Problem.selection``) then carries the money budget: TTK solves its knapsack form, and the
baselines, fitted for the number of cells the budget buys at the median candidate cost
(:func:`reserve.solvers.cells_for_budget`), select by decreasing score within the budget
themselves (:meth:`reserve.solvers.Budget.select`). Locked-in cells use up their cost of the
budget first. Every candidate's cost must be a positive finite number; a budget that buys
every candidate, or no candidate at all (without locked-in cells), is refused.

Novel habitat
-------------
Every cell whose habitat features are finite gets its MESS against the training cells'
habitat features (:func:`reserve.novelty.mess`; the effort covariates are not habitat and
are left out): negative means *novel*, outside the surveyed habitat's range on some feature,
where the model extrapolates. With ``exclude_novel=True`` the novel candidates leave the
candidate set like locked-out cells (never selected, not fitted, not ranked); locked-in
cells stay, whatever their habitat (the planner chose them). Refused: every candidate
novel, or too few left for the budget.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from reserve.adjacency import EDGE_FACTOR, grid_adjacency
from reserve.config import (
    EFFORT_COLUMNS,
    EFFORT_PREFIX,
    INGEST_DEFAULTS,
    PLANNING_UNIT_COLUMNS,
    SPECIES_DETECTIONS_PREFIX,
    SPECIES_LABEL_PREFIX,
    SelectOptions,
    species_slug,
)
from reserve.errors import DataFileError, InvalidInputError
from reserve.novelty import mess
from reserve.solvers import Boundary, Budget, SelectionProblem, cells_for_budget

__all__ = [
    "MAX_FEATURE_MAGNITUDE",
    "NON_FEATURES",
    "REQUIRED_COLUMNS",
    "Problem",
    "boolean_values",
    "boundary_term",
    "build_problem",
    "default_cells",
    "effort_covariates",
    "feature_columns",
    "file_sha256",
    "habitat_novelty",
    "locate_cells",
    "read_planning_units",
]

#: Columns ``planning_units`` must have (besides the geometry and at least one feature).
REQUIRED_COLUMNS = ("cell_id", "role", "label", "locked_out")

#: Columns of ``planning_units`` that are never features.
NON_FEATURES = (
    *PLANNING_UNIT_COLUMNS,
    # added by reserve select, so a reserve.gpkg read back is not mistaken for features
    "score",
    "rank",
    "selected",
    "locked_in",
    "selection_frequency",
    "cumulative_cost",
    "mess",
)
#: Prefixes of per-species columns that are never features (labels, counts, scores).
NON_FEATURE_PREFIXES = (SPECIES_LABEL_PREFIX, SPECIES_DETECTIONS_PREFIX, "score__", EFFORT_PREFIX)


@dataclass(frozen=True)
class Problem:
    """One selection problem: what the estimator sees and what the result tables need.

    Attributes
    ----------
    units : geopandas.GeoDataFrame
        The planning units as read (CRS with its EPSG code looked up once).
    source : str
        The cells file, for messages and the summary.
    features : list of str
        Feature columns, in the order of ``X``'s columns.
    X : numpy.ndarray of shape (n_cells, n_features)
        Raw feature values of every cell (NaN where missing).
    rows : numpy.ndarray of int
        Cells fitted (unlocked ``train`` and ``candidate`` cells), in cell order.
    y : numpy.ndarray of int
        Labels of ``rows``: 1 / 0 on training cells, -1 on candidates; shape
        (n_rows, n_species) with several species.
    label : numpy.ndarray of float
        Every cell's label (the first species' with ``species=``).
    train, candidate : numpy.ndarray of bool
        Unlocked training / candidate cells.
    locked_in, locked_out : numpy.ndarray of bool
        Cells always / never selected.
    mess : numpy.ndarray of float or None
        Every cell's MESS against the training cells' habitat features (NaN where a habitat
        feature is missing; :func:`habitat_novelty`).
    mess_variable : numpy.ndarray of str or None
        Each cell's most dissimilar habitat feature ('' where ``mess`` is NaN).
    novel_out : numpy.ndarray of bool or None
        Candidate cells kept out for their novel habitat (``exclude_novel=True``).
    cost : numpy.ndarray or None
        Each cell's cost (money budgets).
    labels : numpy.ndarray or None
        Per-species labels of every cell, shape (n_cells, n_species), with ``species=``.
    species : tuple of str
        Species names given (empty: the file's ``label`` column).
    slugs : tuple of str
        Their column suffixes.
    k_free : int
        Cells still to choose (cell budgets); with a money budget 1 when some candidate
        still fits, else 0.
    k_fit : int
        ``k`` of the fitted estimator (at least 1; money budgets: the cells the free budget
        buys at the median candidate cost).
    free_budget : float or None
        Money left after the locked-in cells (money budgets).
    effort : dict of str to float
        With ``effort=True``: each effort covariate (the last columns of ``features``) and the
        standard value every cell but the training cells is scored at; empty otherwise.
    X_fit : numpy.ndarray of shape (len(rows), n_features) or None
        Raw features of the fitted rows (``X[rows]``, but for the labelled copies of learned
        cells, which keep their own survey effort).
    learned : numpy.ndarray of bool or None
        With ``learn_from="surveyed"``: the surveyed candidate cells whose labels the fit
        learns from (each is a labelled row and a candidate row).
    boundary : reserve.solvers.Boundary or None
        With a boundary penalty: the boundary length of sets of ``rows`` (candidates' entries
        are read), locked-in cells counted as selected; None otherwise.
    selection : reserve.solvers.SelectionProblem or None
        What every selector fits, built once here (:meth:`selection_problem`): the raw
        features ``X_fit`` of the ``rows``, their labels, the budget over the candidate rows
        (what the locked-in cells leave: ``k_free`` cells, or ``free_budget`` of money; with
        nothing left, ``k_fit = 1`` cell, fitted only to score and rank the candidates), the
        boundary term (locked-in cells counted as selected) and the effort columns.
    """

    units: gpd.GeoDataFrame
    source: str
    features: list[str]
    X: np.ndarray
    rows: np.ndarray
    y: np.ndarray
    label: np.ndarray
    train: np.ndarray
    candidate: np.ndarray
    locked_in: np.ndarray
    locked_out: np.ndarray
    cost: np.ndarray | None
    labels: np.ndarray | None
    species: tuple[str, ...]
    slugs: tuple[str, ...]
    k_free: int
    k_fit: int
    free_budget: float | None
    effort: dict[str, float] = field(default_factory=dict)
    mess: np.ndarray | None = None
    mess_variable: np.ndarray | None = None
    novel_out: np.ndarray | None = None
    boundary: Boundary | None = None
    X_fit: np.ndarray | None = None
    learned: np.ndarray | None = None
    selection: SelectionProblem | None = None

    def selection_problem(self, boundary_penalty: float = 0.0) -> SelectionProblem:
        """The :class:`~reserve.solvers.SelectionProblem` of the fitted rows (checked).

        A money budget when some candidate still fits what the locked-in cells leave, else
        the cell budget ``k_fit``.
        """
        money = self.cost is not None and self.k_free > 0
        cost = self.cost[self.rows] if money else None
        budget = self.free_budget if money else None
        effort = tuple(i for i, f in enumerate(self.features) if f in self.effort)
        return SelectionProblem.from_arrays(
            self.X_fit,
            self.y,
            self.k_fit,
            cost=cost,
            budget=budget,
            boundary=self.boundary,
            boundary_penalty=boundary_penalty,
            effort_columns=effort,
        )

    @property
    def multi(self) -> bool:
        """Whether several species share the selection."""
        return len(self.species) > 1

    @property
    def n_locked_in(self) -> int:
        """Number of locked-in cells."""
        return int(self.locked_in.sum())

    @property
    def private_land(self) -> np.ndarray:
        """Private cells whose surveys check the ranking and calibrate its probabilities.

        The candidates, and the cells locked out of the purchase that are not training
        cells: ``role`` ``other`` when ``reserve ingest`` locked them out, ``candidate`` when
        the run does (``locked_out=``). A locked-out cell is not for sale, but its surveys
        still say how the species uses private land (a public cell with surveys is a
        training cell, and an unsurveyed one has no label). The fit never sees either kind's
        labels (unless ``learn_from="surveyed"`` learns the candidates'), and a locked-out
        cell is not a row of the fit at all, so its score is out of sample.
        """
        role = self.units["role"].astype(str).to_numpy()
        return self.candidate | (self.locked_out & (role != "train"))

    @property
    def novel(self) -> np.ndarray:
        """Cells whose habitat lies outside the training cells' range (negative MESS)."""
        if self.mess is None:
            return np.zeros(len(self.X), dtype=bool)
        return np.nan_to_num(self.mess, nan=0.0) < 0

    def bootstrap_samples(self, n: int, seed: int) -> list[np.ndarray]:
        """``n`` resamples of the fitted rows (positions in ``rows``) for bootstrap refits.

        Each replicate draws the training rows (``y >= 0``) with replacement, detections and
        non-detections separately (so every replicate keeps both classes and their counts),
        and keeps every candidate row (``y == -1``) once; with several species the strata
        are the first species'. The draws come from ``numpy.random.SeedSequence(seed)
        .spawn(n)``, so they do not depend on how the refits are spread over processes.
        """
        lab = self.y if self.y.ndim == 1 else self.y[:, 0]
        pos, neg, cand = (np.flatnonzero(lab == v) for v in (1, 0, -1))
        samples = []
        for child in np.random.SeedSequence(seed).spawn(n):
            rng = np.random.default_rng(child)
            draw = [
                rng.choice(pos, pos.size, replace=True),
                rng.choice(neg, neg.size, replace=True),
            ]
            samples.append(np.concatenate([*draw, cand]))
        return samples


def read_planning_units(path: str | os.PathLike[str]) -> gpd.GeoDataFrame:
    """Read and check the ``planning_units`` layer of a GeoPackage.

    Parameters
    ----------
    path : path-like
        A GeoPackage from ``reserve ingest``.

    Returns
    -------
    geopandas.GeoDataFrame
        The cells sorted by ``cell_id``, whatever the file's row order.

    Raises
    ------
    DataFileError
        Missing file, not a GeoPackage, no ``planning_units`` layer, missing columns, no CRS.
    """
    import pyogrio
    from pyogrio.errors import DataSourceError

    p = Path(path)
    if p.is_dir():
        raise DataFileError(
            f"cells={str(p)!r} is a folder; pass the .gpkg file written by 'reserve ingest' "
            "inside it"
        )
    if not p.is_file():
        raise DataFileError(f"cells={str(p)!r} does not exist; pass a GeoPackage from ingest")
    try:
        str(p.absolute()).encode("utf-8")
    except UnicodeError:
        raise DataFileError(
            f"cells={str(p)!a} holds bytes that are not UTF-8 text (shown as escapes); "
            "GDAL reads GeoPackages from UTF-8 paths only: rename the file or its folder"
        ) from None
    try:
        info = pyogrio.list_layers(p)
        driver = pyogrio.read_info(p, layer=info[0][0])["driver"] if len(info) else None
    except (DataSourceError, OSError, IndexError) as exc:
        if "locked" in str(exc):
            raise DataFileError(
                f"cells={str(p)!r} is locked by another program (SQLite: database is locked); "
                "close it there (in QGIS: stop editing the layer, or remove it) and run again"
            ) from None
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
    try:
        units = pyogrio.read_dataframe(p, layer="planning_units")
    except (DataSourceError, OSError, ValueError, RuntimeError) as exc:
        raise DataFileError(
            f"cells={str(p)!r}: the planning_units layer cannot be read ({exc}); "
            "re-create it with 'reserve ingest'"
        ) from None
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
    _check_crs(units, str(p))
    _check_cells(units, str(p))
    # Everything random downstream (folds, forests, bootstraps, tie-breaks) draws over rows:
    # in cell_id order, the same cells select the same in any row order of the file.
    units = units.sort_values("cell_id", kind="stable", ignore_index=True)
    return _unsurveyed_labels(units)


def _unsurveyed_labels(units: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """A missing ``label`` of a cell that is not a training cell read as -1 (unsurveyed).

    ``reserve ingest`` writes -1 for cells nobody surveyed; a file edited elsewhere may leave
    them empty (NaN). Training cells keep what they hold (checked by :func:`build_problem`).
    """
    label = pd.to_numeric(units["label"], errors="coerce")
    fill = label.isna() & (units["role"] != "train")
    if not fill.any() and pd.api.types.is_numeric_dtype(units["label"]):
        return units
    label = label.where(~fill, -1.0)
    if label.notna().all() and (label % 1 == 0).all():
        label = label.astype(np.int64)
    return units.assign(label=label)


def _check_crs(units: gpd.GeoDataFrame, source: str) -> None:
    """Refuse a CRS that cannot be the cells': degrees out of range, or a unit other than metres.

    Areas, boundaries and the map's placement all read the coordinates in the CRS's unit: a
    grid in metres labelled EPSG:4326 would be drawn off the globe, one in feet would give
    boundaries 3.28 times too long.
    """
    crs = units.crs
    x0, y0, x1, y1 = (float(v) for v in units.total_bounds)
    if crs.is_geographic:
        if max(abs(x0), abs(x1)) <= 360.0 and max(abs(y0), abs(y1)) <= 90.0:
            return
        raise DataFileError(
            f"cells={source!r}: planning_units' CRS ({crs.name}) is in degrees but its "
            f"coordinates reach x {x0:.6g}..{x1:.6g}, y {y0:.6g}..{y1:.6g}, beyond "
            "longitude/latitude: the grid is in metres and its CRS is mislabelled. Assign the "
            "grid's real CRS (e.g. ogr2ogr -a_srs EPSG:5070 fixed.gpkg cells.gpkg) or "
            "re-create it with 'reserve ingest'"
        )
    unit = crs.axis_info[0].unit_name if crs.axis_info else "metre"
    if unit not in ("metre", "meter"):
        raise DataFileError(
            f"cells={source!r}: planning_units' CRS ({crs.name}) is in {unit}, and reserve "
            "measures cells and boundaries in metres. Reproject it to an equal-area CRS in "
            "metres (e.g. ogr2ogr -t_srs EPSG:5070 fixed.gpkg cells.gpkg) or re-create it with "
            "'reserve ingest'"
        )


def _check_cells(units: gpd.GeoDataFrame, source: str) -> None:
    """Refuse repeated or missing cell ids, unknown roles, missing or empty geometries."""
    ids = units["cell_id"]
    if ids.isna().any():
        raise DataFileError(
            f"cells={source!r}: {int(ids.isna().sum())} planning units have no cell_id; give "
            "every cell an id (re-create the file with 'reserve ingest')"
        )
    dup = ids[ids.duplicated(keep=False)]
    if len(dup):
        shown = sorted({str(v) for v in dup.tolist()})[:5]
        raise DataFileError(
            f"cells={source!r}: cell_id repeats {shown} ({len(dup)} rows); each cell must "
            "appear once: remove the duplicate rows"
        )
    roles = units["role"]
    odd = ~roles.isin(("train", "candidate", "other"))
    if odd.any():
        shown = sorted({str(v) for v in roles[odd].tolist()})[:5]
        raise DataFileError(
            f"cells={source!r}: column role holds {shown} in {int(odd.sum())} rows; each "
            "role must be 'train', 'candidate' or 'other' (lower case)"
        )
    geom = units.geometry
    bad = (geom.isna() | geom.is_empty).to_numpy()
    if bad.any():
        shown = [str(v) for v in ids[bad].tolist()[:5]]
        raise DataFileError(
            f"cells={source!r}: {int(bad.sum())} planning units have no geometry (null or "
            f"empty; cell_id {shown}); a cell without a shape cannot be mapped or bought: "
            "give them their square or delete those rows"
        )
    invalid = ~geom.is_valid.to_numpy()
    if invalid.any():
        shown = [str(v) for v in ids[invalid].tolist()[:5]]
        raise DataFileError(
            f"cells={source!r}: {int(invalid.sum())} planning units have invalid geometry "
            f"(self-intersecting or otherwise; cell_id {shown}): their area and boundary "
            "cannot be measured. Repair them (QGIS 'Fix geometries', or shapely.make_valid) "
            "or re-create the file with 'reserve ingest'"
        )


def default_cells() -> tuple[Path, Path | None, Path | None]:
    """The embedded default region: its planning units, public land and outline files."""
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


def locate_cells(
    cells: str | os.PathLike[str] | None, public: Any = None, outline: Any = None
) -> tuple[Path, Any, Any]:
    """The cells file and the map's public-land and outline files.

    ``cells=None`` is the embedded default region (:func:`default_cells`), whose own public
    land and outline files fill a ``public`` / ``outline`` not given.
    """
    if cells is not None:
        return Path(cells), public, outline
    path, default_public, default_outline = default_cells()
    public = public if public is not None else default_public
    outline = outline if outline is not None else default_outline
    return path, public, outline


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file (the cells file, recorded in the run summary)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def feature_columns(units: pd.DataFrame, exclude: tuple[str, ...] = ()) -> list[str]:
    """The numeric, non-boolean columns of ``units`` that are features (not ``exclude``)."""
    return [
        c
        for c in units.columns
        if c not in NON_FEATURES
        and c not in exclude
        and not str(c).startswith(NON_FEATURE_PREFIXES)
        and c != units.geometry.name
        and pd.api.types.is_numeric_dtype(units[c])
        and not pd.api.types.is_bool_dtype(units[c])
    ]


_TRUE = frozenset({"true", "t", "yes", "y", "1", "1.0"})
_FALSE = frozenset({"false", "f", "no", "n", "0", "0.0"})


def boolean_values(
    values: Any, name: str, *, missing: bool = False, error: type[Exception] = DataFileError
) -> np.ndarray:
    """A column that looks boolean as a bool array; anything else refused, naming the values.

    Accepted: real booleans, the numbers 0 and 1, and the texts ``true/false``, ``t/f``,
    ``yes/no``, ``y/n``, ``1/0`` in any case (surrounding blanks ignored). Missing values
    (None, NaN, empty text) become ``missing``.

    Parameters
    ----------
    values : array-like
        The column.
    name : str
        What it is, for the message (e.g. ``"planning_units column 'locked_out'"``).
    missing : bool
        The value of a missing entry.
    error : exception class
        Raised for a value that is not boolean: :class:`DataFileError` for a column of an input
        file, :class:`InvalidInputError` for a column the user named (``--locked-in COL``).

    Returns
    -------
    numpy.ndarray of bool

    Raises
    ------
    DataFileError or InvalidInputError
        A value that is none of the above (``error``); the message lists up to five of them.

    Examples
    --------
    >>> boolean_values(["TRUE", "no", "0", None, 1], "locked_out").tolist()
    [True, False, False, False, True]
    """
    col = pd.Series(values, copy=False)
    if pd.api.types.is_bool_dtype(col) and not col.isna().any():
        return col.to_numpy(dtype=bool)
    if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
        num = col.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~(np.isnan(num) | np.isin(num, (0.0, 1.0)))
        out = np.where(np.isnan(num), missing, num == 1.0)
    else:
        text = col.map(lambda v: v if v is None or v != v else str(v).strip().lower())
        absent = col.isna().to_numpy() | (text == "").to_numpy()
        is_true = text.isin(_TRUE).to_numpy()
        bad = ~(absent | is_true | text.isin(_FALSE).to_numpy())
        out = np.where(absent, missing, is_true)
    if bad.any():
        shown = sorted({str(v) for v in col[bad].tolist()})[:5]
        raise error(
            f"{name} is not boolean (true/false, yes/no, t/f or 0/1): it holds {shown} in "
            f"{int(bad.sum())} rows. Fix those values, or name a boolean column"
        )
    return out.astype(bool)


def locked_mask(
    units: gpd.GeoDataFrame, spec: str | os.PathLike[str] | None, name: str
) -> np.ndarray:
    """Cells marked by ``spec``: a boolean column of ``units`` or a polygon file.

    A polygon file (read and reprojected by :func:`reserve.ownership.read_polygons`) marks
    the cells more than ``INGEST_DEFAULTS.locked_threshold`` of whose area it covers.
    """
    if spec is None:
        return np.zeros(len(units), dtype=bool)
    text = str(spec)
    if text in units.columns and text != units.geometry.name:
        return boolean_values(
            units[text], f"{name}={text!r} (a planning_units column)", error=InvalidInputError
        )
    if not Path(text).exists():
        raise InvalidInputError(
            f"{name}={text!r} is neither a column of planning_units nor an existing file; pass "
            "a boolean column name or a polygon file (GeoPackage, shapefile, GeoJSON)"
        )
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


def _locks(units: gpd.GeoDataFrame, opts: SelectOptions) -> tuple[np.ndarray, np.ndarray]:
    """The locked-in and locked-out masks, refused when they conflict."""
    role = units["role"].astype(str).to_numpy()
    lock_out = boolean_values(units["locked_out"], "planning_units column 'locked_out'")
    lock_out = lock_out | locked_mask(units, opts.locked_out, "locked_out")
    lock_in = locked_mask(units, opts.locked_in, "locked_in")
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
            f"locked_in={str(opts.locked_in)!r} marks {int(not_cand.sum())} cells that are not "
            f"candidates (public or 'other' cells, cell_id {ids}); lock in private candidate "
            "cells only"
        )
    return lock_in, lock_out


#: Words of a column name that say it holds money (a hint when ``--cost-column`` is wrong).
_MONEY_WORDS = re.compile(r"cost|price|value|usd|eur|dollar|money|paid|land_?val", re.IGNORECASE)


def _cost_hint(units: pd.DataFrame, column: str) -> str:
    """What to pass instead of a missing cost column: close names, or columns named as money.

    Habitat features, labels and counts are never suggested: a land-cover fraction is no price.
    """
    geometry = units.geometry.name if isinstance(units, gpd.GeoDataFrame) else None
    numeric = [
        str(c)
        for c in units.columns
        if c != geometry
        and pd.api.types.is_numeric_dtype(units[c])
        and not pd.api.types.is_bool_dtype(units[c])
    ]
    money = [c for c in numeric if _MONEY_WORDS.search(c)]
    close = difflib.get_close_matches(column, numeric, n=3, cutoff=0.75)
    shown = list(dict.fromkeys([*close, *money]))[:5]
    if shown:
        return f"did you mean {' or '.join(repr(c) for c in shown)}?"
    return (
        "no column of it looks like a cost (its numeric columns are habitat features, labels "
        "and counts). Add each cell's cost as a column (e.g. a parcel layer's price joined in "
        "QGIS), or drop --cost-column to give the budget in cells"
    )


def cost_values(units: pd.DataFrame, column: str, need: np.ndarray) -> np.ndarray:
    """The cost column as floats; refused unless positive and finite on the ``need`` rows."""
    if column not in units.columns or column == units.geometry.name:
        raise InvalidInputError(
            f"cost_column={column!r} is not a column of planning_units; {_cost_hint(units, column)}"
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


def _check_locked_budget(
    opts: SelectOptions, lock_in: np.ndarray, cost: np.ndarray | None
) -> float | None:
    """The money left after the locked-in cells (None for cell budgets); refused if none."""
    n_in = int(lock_in.sum())
    if cost is not None:
        cost_in = float(cost[lock_in].sum())
        if cost_in > opts.budget * (1.0 + 1e-12):
            raise InvalidInputError(
                f"locked_in={str(opts.locked_in)!r} marks {n_in} cells costing {cost_in:g}, "
                f"more than budget={opts.budget:g}; pass --budget >= {cost_in:g} or lock in "
                "fewer cells"
            )
        return max(opts.budget - cost_in, 0.0)
    if n_in > opts.budget:
        raise InvalidInputError(
            f"locked_in={str(opts.locked_in)!r} marks {n_in} cells, more than "
            f"budget={opts.budget}; pass --budget >= {n_in} or lock in fewer cells"
        )
    return None


def species_labels(units: pd.DataFrame, species: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """Per-species labels (n, S) from the ``label__<slug>`` columns of a multi-species ingest."""
    slugs = [species_slug(name) for name in species]
    dup = sorted({n for n, sl in zip(species, slugs, strict=True) if slugs.count(sl) > 1})
    if dup:
        raise InvalidInputError(
            f"species {dup} name the same species column twice; pass each species once"
        )
    have = [
        str(c)[len(SPECIES_LABEL_PREFIX) :]
        for c in units.columns
        if str(c).startswith(SPECIES_LABEL_PREFIX)
    ]
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


def _fit_rows(
    units: pd.DataFrame, label: np.ndarray, locked: np.ndarray, source: str
) -> tuple[np.ndarray, np.ndarray]:
    """The unlocked training and candidate masks, refused without both classes or candidates."""
    role = units["role"].astype(str).to_numpy()
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
    return train, cand


def _feature_names(units: pd.DataFrame, exclude: tuple[str, ...], source: str) -> list[str]:
    features = feature_columns(units, exclude)
    if not features:
        raise DataFileError(
            f"cells={source!r}: planning_units has no numeric feature column; ingest with "
            "--categorical / --continuous rasters"
        )
    return features


def _feature_values(
    units: pd.DataFrame, features: list[str], fit_rows: np.ndarray, source: str
) -> np.ndarray:
    """Raw feature values of every cell; refused when not finite on the fitted rows."""
    raw = units[features].to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~np.isfinite(raw[fit_rows])
    if bad.any():
        cols = sorted({features[j] for j in np.flatnonzero(bad.any(axis=0))})
        n_rows = int(bad.any(axis=1).sum())
        raise DataFileError(
            f"cells={source!r}: {n_rows} train/candidate cells have NaN or infinite features "
            f"(columns {cols[:5]}); re-ingest with rasters covering the region, or set those "
            "cells' role to 'other'"
        )
    return raw


#: The largest feature magnitude accepted: far above any habitat measure or effort, far below
#: the values whose squares overflow when the features are standardised.
MAX_FEATURE_MAGNITUDE = 1e12


def _check_magnitude(
    units: pd.DataFrame, features: list[str], raw: np.ndarray, fit_rows: np.ndarray, source: str
) -> None:
    """Refuse finite feature values beyond :data:`MAX_FEATURE_MAGNITUDE` (a nodata read as data).

    Runs before anything computes with the features (the habitat novelty first), so such a
    value gives this one message and no overflow warning.
    """
    rows = np.flatnonzero(fit_rows)
    with np.errstate(invalid="ignore"):
        huge = np.isfinite(raw[rows]) & (np.abs(raw[rows]) > MAX_FEATURE_MAGNITUDE)
    if not huge.any():
        return
    cols = [features[j] for j in np.flatnonzero(huge.any(axis=0))]
    at = rows[huge.any(axis=1)]
    ids = units["cell_id"].to_numpy()[at]
    biggest = float(np.abs(raw[rows][huge]).max())
    raise DataFileError(
        f"cells={source!r}: {at.size} train/candidate cells have feature values as large as "
        f"{biggest:.3g} (columns {cols[:5]}; cell_id {ids[:5].tolist()}), beyond "
        f"{MAX_FEATURE_MAGNITUDE:g}: a raster's nodata value read as data, most likely. "
        "Re-ingest with the raster's nodata set, or set those cells' role to 'other'"
    )


def _check_species_classes(
    labels: np.ndarray, train: np.ndarray, species: tuple[str, ...], source: str
) -> None:
    for j, name in enumerate(species):
        classes = np.unique(labels[train, j])
        if not np.array_equal(classes, [0.0, 1.0]):
            raise DataFileError(
                f"cells={source!r}: species {name!r} has labels "
                f"{classes.astype(int).tolist()} on the training cells; each species needs "
                "detections (1) and non-detections (0) there. Drop it from --species"
            )


def _allocate(
    opts: SelectOptions,
    n_in: int,
    cand_cost: np.ndarray | None,
    n_cand: int,
    free_budget: float | None,
) -> tuple[int, int]:
    """``(k_free, k_fit)``: cells still to choose and the fitted estimator's ``k``."""
    if cand_cost is None:
        k_free = int(opts.budget) - n_in
        if k_free >= n_cand:
            # every solver ranks candidates against each other: one must stay unselected
            extra = f" ({n_in} of them locked in)" if n_in else ""
            raise InvalidInputError(
                f"budget={opts.budget} must be smaller than the {n_cand + n_in} candidate "
                f"cells{extra}; pass --budget <= {n_cand + n_in - 1}"
            )
        return k_free, max(k_free, 1)  # k_free == 0: fit only to score and rank the others
    free_budget = 0.0 if free_budget is None else free_budget
    if free_budget >= float(cand_cost.sum()):
        raise InvalidInputError(
            f"budget={opts.budget:g} buys every candidate cell (they cost {cand_cost.sum():g} "
            f"in all{' besides the locked-in cells' if n_in else ''}); there is nothing "
            f"to choose: pass --budget < {cand_cost.sum() + opts.budget - free_budget:g}"
        )
    if free_budget < float(cand_cost.min()) and not n_in:
        raise InvalidInputError(
            f"budget={opts.budget:g} buys no candidate cell (the cheapest costs "
            f"{cand_cost.min():g}); pass --budget >= {cand_cost.min():g}"
        )
    # k_free: 1 when some candidate still fits (the knapsack decides how many), else 0
    k_free = int(free_budget >= float(cand_cost.min()))
    # baselines and the CV fit a number of cells: what the budget buys at the median cost
    k_fit = cells_for_budget(Budget(cand_cost, free_budget))
    return k_free, k_fit


def effort_covariates(
    units: pd.DataFrame, train: np.ndarray, columns: tuple[str, ...] = EFFORT_COLUMNS
) -> tuple[pd.DataFrame, dict[str, float]]:
    """Each cell's survey effort as covariates, every cell but ``train`` at the standard effort.

    eBird's analytical guidelines model detection with the effort of the checklists and
    predict at one standard effort, so that a map shows where the species lives rather than
    where birders look. Here each effort column of ``columns`` that ``units`` has becomes
    ``effort__log_<column>`` = ``log1p(value)`` (effort counts and sums are skewed); the
    training cells keep their own value and every other cell (candidates, whose effort says
    nothing about their habitat, and the rest) gets the *standard effort*: the median of the
    training cells' values. A column with the same value on every training cell is left out
    (nothing can be learned from it). Candidates then differ in habitat only. For a fitted
    model additive in its features the choice of the standard shifts every candidate's score
    equally; TTK's fit itself depends on the candidates' rows (the top-k constraint), so for
    TTK the standard can change the ranking (docs/algorithm.md, "Survey effort in the
    cross-validation").

    Parameters
    ----------
    units : pandas.DataFrame
        The planning units.
    train : numpy.ndarray of bool
        The cells whose labels are fitted.
    columns : tuple of str
        Effort columns to use when present.

    Returns
    -------
    covariates : pandas.DataFrame
        One column per effort column present and not constant on ``train``, indexed like
        ``units``.
    standard : dict of str to float
        The standard value of each covariate.

    Raises
    ------
    DataFileError
        An effort value of a training cell that is missing, negative or not finite.

    Examples
    --------
    >>> import pandas as pd, numpy as np
    >>> units = pd.DataFrame({"n_checklists": [1, 3, 7, 0]})
    >>> cov, std = effort_covariates(units, np.array([True, True, True, False]))
    >>> np.round(np.expm1(cov["effort__log_n_checklists"].to_numpy()), 6).tolist()
    [1.0, 3.0, 7.0, 3.0]
    """
    present = [c for c in columns if c in units.columns]
    out: dict[str, np.ndarray] = {}
    standard: dict[str, float] = {}
    for col in present:
        raw = pd.to_numeric(units[col], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        bad = train & ~(np.isfinite(raw) & (raw >= 0))
        if bad.any():
            ids = units["cell_id"].to_numpy()[bad][:5].tolist() if "cell_id" in units else []
            raise DataFileError(
                f"{int(bad.sum())} training cells have a missing, negative or infinite {col!r} "
                f"(cell_id {ids}); re-create the file with 'reserve ingest', or pass --no-effort"
            )
        value = np.log1p(np.where(train, raw, 0.0))
        if not train.any() or np.ptp(value[train]) == 0:
            continue  # the same effort on every training cell: nothing to learn from it
        name = f"{EFFORT_PREFIX}log_{col}"
        standard[name] = float(np.median(value[train]))
        out[name] = np.where(train, value, standard[name])
    return pd.DataFrame(out, index=units.index), standard


def habitat_novelty(
    X: np.ndarray, features: list[str], train: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Every cell's MESS against the training cells' habitat, and its most dissimilar feature.

    The habitat features are ``features`` without the effort covariates (prefix
    :data:`reserve.config.EFFORT_PREFIX`): effort says where birders went, not what the land
    is. The reference is the ``train`` rows of ``X`` (finite); every row with finite habitat
    features is assessed (:func:`reserve.novelty.mess`), the others get NaN and ''.

    Parameters
    ----------
    X : numpy.ndarray of shape (n_cells, n_features)
        Raw feature values of every cell.
    features : list of str
        Their names.
    train : numpy.ndarray of bool
        The training cells.

    Returns
    -------
    mess : numpy.ndarray of float
        Negative where the cell's habitat is novel.
    most_dissimilar : numpy.ndarray of str
        The habitat feature giving each cell's MESS ('' where it is NaN).

    Examples
    --------
    >>> X = np.array([[0.0, 1.0], [1.0, 5.0], [2.0, 1.0], [5.0, 9.0]])
    >>> value, name = habitat_novelty(X, ["lc_forest", "effort__log_n_checklists"],
    ...                               np.array([True, True, True, False]))
    >>> value.round(1).tolist(), name.tolist()
    ([66.7, 66.7, 0.0, -150.0], ['lc_forest', 'lc_forest', 'lc_forest', 'lc_forest'])
    """
    cols = [j for j, f in enumerate(features) if not str(f).startswith(EFFORT_PREFIX)]
    reference = X[np.ix_(train, cols)]
    reference = reference[np.isfinite(reference).all(axis=1)]  # others are refused elsewhere
    if not reference.size:
        return np.full(len(X), np.nan), np.full(len(X), "", dtype=object)
    value, mod = mess(X[:, cols], reference)
    names = np.array([*(str(features[j]) for j in cols), ""], dtype=object)
    return value, names[mod]  # mod == -1 picks the trailing ''


def _novelty(
    units: pd.DataFrame,
    features: list[str],
    train: np.ndarray,
    cand: np.ndarray,
    opts: SelectOptions,
    lock_in: np.ndarray,
    cost: np.ndarray | None,
    free_budget: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every cell's MESS and most dissimilar feature, and the candidates kept out.

    ``train`` holds the cells whose labels the fit learns from: the training cells, and the
    learned surveyed candidates with ``learn_from="surveyed"`` (never novel themselves).
    """
    X = units[features].to_numpy(dtype=np.float64, na_value=np.nan)
    value, name = habitat_novelty(X, features, train)
    return value, name, _keep_out_novel(opts, cand, value < 0, lock_in, cost, free_budget)


def _keep_out_novel(
    opts: SelectOptions,
    cand: np.ndarray,
    novel: np.ndarray,
    lock_in: np.ndarray,
    cost: np.ndarray | None,
    free_budget: float | None,
) -> np.ndarray:
    """Candidates kept out for novel habitat (``exclude_novel``); refused when too few remain."""
    out = cand & novel if opts.exclude_novel else np.zeros_like(cand)
    left = cand & ~out
    n_out, n_left, n_in = int(out.sum()), int(left.sum()), int(lock_in.sum())
    fix = "or drop --exclude-novel (novel cells are then flagged in the novel column, not kept out)"
    if not n_out:
        return out
    if not n_left:
        raise InvalidInputError(
            f"exclude_novel keeps out all {n_out} candidate cells: the habitat of each lies "
            "outside the training cells' range on some feature (negative MESS); survey public "
            f"cells with that habitat {fix}"
        )
    if cost is None and int(opts.budget) - n_in >= n_left:
        raise InvalidInputError(
            f"budget={opts.budget} leaves nothing to choose among the {n_left} candidate cells "
            f"exclude_novel keeps ({n_out} novel cells kept out); pass --budget <= "
            f"{n_left - 1 + n_in} {fix}"
        )
    if cost is not None and (free_budget or 0.0) >= float(cost[left].sum()):
        raise InvalidInputError(
            f"budget={opts.budget:g} buys all {n_left} candidate cells exclude_novel keeps "
            f"({n_out} novel cells kept out; the others cost {cost[left].sum():g}); pass a "
            f"smaller --budget {fix}"
        )
    return out


def boundary_term(units: gpd.GeoDataFrame, source: str) -> Boundary:
    """The boundary length of sets of ``units`` (rook edges, edge factor 0.5), from the grid.

    Raises
    ------
    DataFileError
        The planning units are not the cells of one regular square grid.
    """
    try:
        adj = grid_adjacency(units.geometry.to_numpy())
    except InvalidInputError as exc:
        raise DataFileError(f"cells={source!r} cannot take a boundary penalty: {exc}") from None
    return Boundary(4 * adj.cell_size - (1 - EDGE_FACTOR) * adj.outer(), adj.matrix())


def _fit_arrays(
    raw: np.ndarray,
    features: list[str],
    label: np.ndarray,
    train: np.ndarray,
    cand: np.ndarray,
    learned: np.ndarray | None,
    effort: dict[str, float],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every cell's ``X`` and the fit's ``rows``, ``y``, ``X_fit``; ``learned`` cells twice.

    Every training and candidate cell is a row (candidates unlabelled). Each ``learned`` cell
    (a surveyed candidate, with ``learn_from="surveyed"``) is a candidate row *and* a
    labelled row appended at the end, with its own survey effort; the candidate rows, and
    ``raw`` (from which every cell is scored), hold the standard effort.
    """
    base = np.flatnonzero(train | cand)
    y = np.where(cand[base], -1, label[base]).astype(np.int64)
    if learned is None or not learned.any():
        return raw, base, y, raw[base]
    extra = np.flatnonzero(learned)
    own, raw = raw[extra], raw.copy()
    for j, name in enumerate(features):
        if name in effort:
            raw[cand, j] = effort[name]
    rows = np.concatenate([base, extra])
    y = np.concatenate([y, label[extra].astype(np.int64)])
    return raw, rows, y, np.vstack([raw[base], own])


def build_problem(
    units: gpd.GeoDataFrame,
    opts: SelectOptions,
    source: str,
    learn: np.ndarray | None = None,
) -> Problem:
    """Check ``units`` against ``opts`` and build the :class:`Problem`.

    Parameters
    ----------
    units : geopandas.GeoDataFrame
        The ``planning_units`` layer (:func:`read_planning_units`).
    opts : SelectOptions
        Budget, locks, cost column and species of the run.
    source : str
        The cells file, named in messages.
    learn : numpy.ndarray of bool, optional
        Candidate cells whose labels the fit learns from whatever ``learn_from`` says (the
        cells of new surveys, :mod:`reserve.surveys`).

    Returns
    -------
    Problem

    Raises
    ------
    InvalidInputError
        Conflicting locks, bad costs or species, a budget that leaves nothing to choose.
    DataFileError
        No features, no training cells of both classes, no candidates, non-finite features.
    """
    lock_in, lock_out = _locks(units, opts)
    role = units["role"].astype(str).to_numpy()
    cost = None
    if opts.cost_column is not None:
        cost = cost_values(units, opts.cost_column, (role == "candidate") & ~lock_out)
    free_budget = _check_locked_budget(opts, lock_in, cost)
    labels, slugs = None, []
    label = pd.to_numeric(units["label"], errors="coerce").to_numpy()
    if opts.species:
        labels, slugs = species_labels(units, opts.species)
        label = labels[:, 0]  # the first species' checks and summary
    exclude = () if opts.cost_column is None else (opts.cost_column,)
    features = _feature_names(units, exclude, source)
    train, cand = _fit_rows(units, label, lock_out | lock_in, source)
    learned = cand & np.isin(label, (0, 1)) if opts.learn_from == "surveyed" else None
    if learn is not None:
        extra = cand & np.isin(label, (0, 1)) & learn
        learned = extra if learned is None else learned | extra
    labelled = train if learned is None else train | learned  # the cells the fit learns from
    effort: dict[str, float] = {}
    if opts.effort:
        covariates, effort = effort_covariates(units, labelled)
        units = units.assign(**{c: covariates[c].to_numpy() for c in covariates.columns})
        features = [*features, *effort]
    values = units[features].to_numpy(dtype=np.float64, na_value=np.nan)
    _check_magnitude(units, features, values, train | cand, source)
    mess_value, mess_variable, novel_out = _novelty(
        units, features, labelled, cand, opts, lock_in, cost, free_budget
    )
    cand = cand & ~novel_out
    raw = _feature_values(units, features, train | cand, source)
    raw, rows, y, X_fit = _fit_arrays(raw, features, label, train, cand, learned, effort)
    if labels is not None and len(opts.species) > 1:
        _check_species_classes(labels, train, opts.species, source)
        y = np.where(cand[rows][:, None], -1, labels[rows]).astype(np.int64)
    boundary = None
    if opts.boundary_penalty != 0.0:
        boundary = boundary_term(units, source).take(rows, np.flatnonzero(lock_in))
    n_in = int(lock_in.sum())
    k_free, k_fit = _allocate(
        opts, n_in, None if cost is None else cost[cand], int(cand.sum()), free_budget
    )
    problem = Problem(
        mess=mess_value,
        mess_variable=mess_variable,
        novel_out=novel_out,
        units=units,
        source=source,
        features=features,
        X=raw,
        rows=rows,
        y=y,
        label=label,
        train=train,
        candidate=cand,
        locked_in=lock_in,
        locked_out=lock_out,
        cost=cost,
        labels=labels,
        species=tuple(opts.species or ()),
        slugs=tuple(slugs),
        k_free=k_free,
        k_fit=k_fit,
        free_budget=free_budget,
        effort=effort,
        boundary=boundary,
        X_fit=X_fit,
        learned=learned,
    )
    penalty = opts.boundary_penalty if opts.boundary_penalty != "auto" else 0.0
    return replace(problem, selection=problem.selection_problem(float(penalty)))
