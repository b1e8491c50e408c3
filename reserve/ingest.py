"""eBird EBD + SED -> one GeoPackage of gridded, labelled planning units with habitat features.

:func:`ingest` is the one place that runs the sequence: read and filter checklists
(:mod:`reserve.io`), grid them (:mod:`reserve.grid`), summarise rasters per cell
(:mod:`reserve.habitat`), and assign ownership roles (:mod:`reserve.ownership`).

Output schema
-------------
The GeoPackage holds two layers of cells and tables, and the polygons the roles came from.

``planning_units`` (one row per grid cell of the region, surveyed or not; this is the
contract with ``reserve select``):

=========================  ==========  =====================================================
column                     type        meaning
=========================  ==========  =====================================================
``cell_id``                int64       ``row * n_cols + col`` of the grid (stable per grid)
``role``                   text        ``train`` (public, surveyed), ``candidate`` (private,
                                       not locked out), ``other`` (public unsurveyed, or
                                       locked out)
``label``                  int64       1 detected on some checklist, 0 only non-detections,
                                       -1 unsurveyed (never NaN)
``n_checklists``           int64       kept checklists in the cell (0 when unsurveyed)
``n_detections``           int64       of which detected the species
``effort_hours``           float64     total checklist duration
``effort_km``              float64     total distance travelled (stationary counts 0)
``public_fraction``        float64     fraction of the cell inside the public polygons
``locked_out``             bool        locked-out fraction > ``locked_threshold``
``region_fraction``        float64     fraction of the cell inside the region; a private
                                       cell at or below ``region_threshold`` is ``other``
``label__<slug>``          int64       several species only: ``label`` of each species, the
                                       first included (``<slug>``: ``species_slug(name)``,
                                       e.g. ``wood_thrush``)
``n_detections__<slug>``   int64       several species only: ``n_detections`` of each species
``<raster>_<class>``       float64     fraction of the cell's valid area in each class
``<raster>_mean``, ``_sd`` float64     area-weighted mean and sd of a continuous raster
``geometry``               polygon     the square cell, in the grid's equal-area CRS (stored)
=========================  ==========  =====================================================

Feature columns are NaN for a cell the raster covers only partly (a warning says how many).

With several species (``species=["Wood Thrush", "Veery"]``, ``--species`` repeated) the files
are read and filtered once and every species is zero-filled against the same kept checklists;
``label`` and ``n_detections`` are the first species' (so a one-species reader is unchanged)
and each species, the first included, adds a ``label__<slug>`` / ``n_detections__<slug>`` pair
after ``locked_out`` (prefixes :data:`reserve.config.SPECIES_LABEL_PREFIX` and
:data:`reserve.config.SPECIES_DETECTIONS_PREFIX`). A species with no detection in the kept
checklists is written (labels 0 and -1 only) with a warning naming it.

``public_land`` and ``region`` (one multipolygon row each, in the grid's CRS): the public-land
polygons (dissolved, clipped to the grid's extent; absent without ``public``) and the region
outline the roles were assigned from, so that ``reserve select`` draws them on the map of any
region. Readers take ``planning_units`` by name; these layers are never cells.

``ingest_summary`` (a table without geometry): columns ``item``, ``kept``, ``dropped``,
``value``. One row per filter (``sed:complete``, ``ebd:species``, ...: the rows it kept and
dropped), then the cell counts (``cells:train``, ...), the run settings (``crs``,
``cell_size``, ``species``, inputs) and the versions of the libraries used. With several
species: ``ebd:species:<slug>`` (rolled-up EBD rows of each species),
``checklists:detections:<slug>`` (kept = detections, dropped = non-detections),
``cells:positive:<slug>``, ``species`` (the names joined by ``"; "``) and one ``species:<slug>``
row per species whose value is its name.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pyproj
import shapely

from reserve.config import (
    INGEST_DEFAULTS,
    PLANNING_UNIT_COLUMNS,
    SPECIES_DETECTIONS_PREFIX,
    SPECIES_LABEL_PREFIX,
    species_slug,
)
from reserve.errors import DataFileError, InvalidInputError, OutputExistsError
from reserve.grid import Grid, aggregate_checklists, equal_area_crs, require_equal_area
from reserve.habitat import RasterLayer, habitat_features
from reserve.io import (
    DETECTED_PREFIX,
    ChecklistFilter,
    FilterLog,
    load_observations,
    species_list,
)
from reserve.io.atomic import replacing, write_failure
from reserve.ownership import assign_roles, cover_fraction, read_polygons

__all__ = [
    "BYTES_PER_CELL",
    "PLANNING_UNIT_COLUMNS",
    "IngestResult",
    "available_memory",
    "check_grid_size",
    "ingest",
    "parse_region",
]

if TYPE_CHECKING:
    from reserve.io.dask_engine import DaskObservations

_WGS84 = pyproj.CRS.from_epsg(4326)


@dataclass
class IngestResult:
    """What :func:`ingest` wrote and the tables behind it.

    Attributes
    ----------
    path : Path
        The GeoPackage written.
    planning_units : geopandas.GeoDataFrame
    summary : pandas.DataFrame
    checklists : pandas.DataFrame or None
        The zero-filled checklists with their ``cell_id`` (``engine="local"``). ``None`` with
        ``engine="dask"``: that table stays on the workers, which send only per-cell totals.
    grid : Grid
    """

    path: Path
    planning_units: gpd.GeoDataFrame
    summary: pd.DataFrame
    checklists: pd.DataFrame | None
    grid: Grid

    def counts(self) -> dict[str, int]:
        """Cells per role and positives (train cells with label 1)."""
        pu = self.planning_units
        out = {r: int((pu["role"] == r).sum()) for r in ("train", "candidate", "other")}
        out["train_positive"] = int(((pu["role"] == "train") & (pu["label"] == 1)).sum())
        out["surveyed_positive"] = int((pu["label"] == 1).sum())
        out["checklists"] = int(pu["n_checklists"].sum())
        return out


def parse_region(
    region: str | os.PathLike[str] | Sequence[float] | shapely.Geometry | None,
    layer: str | None = None,
) -> shapely.Geometry | None:
    """Turn a region into one polygon in longitude/latitude (EPSG:4326).

    Parameters
    ----------
    region : bbox, path, geometry or None
        ``(min_lon, min_lat, max_lon, max_lat)``, the same as a ``"a,b,c,d"`` string, a
        polygon file GDAL reads (any CRS, reprojected), or a shapely geometry in lon/lat.
    layer : str, optional
        Layer of a multi-layer polygon file.

    Examples
    --------
    >>> parse_region("-85,30,-80,35").bounds
    (-85.0, 30.0, -80.0, 35.0)
    """
    if region is None:
        return None
    if isinstance(region, shapely.Geometry):
        geom = region
    elif isinstance(region, str) and re.fullmatch(r"[\s\d.,+eE-]+", region):
        try:
            values = [float(v) for v in region.split(",")]
        except ValueError:
            values = []
        geom = _bbox_polygon(values, region)
    elif isinstance(region, str | os.PathLike):
        path = Path(region)
        if not path.exists():
            raise DataFileError(
                f"region={str(region)!r} is neither a bbox 'min_lon,min_lat,max_lon,max_lat' "
                "nor an existing polygon file; check the path"
            )
        geom = read_polygons(path, _WGS84, layer=layer, name="region")
    elif isinstance(region, Sequence | np.ndarray):
        geom = _bbox_polygon(list(region), region)
    else:
        raise InvalidInputError(
            f"region={region!r} is neither a bbox (min_lon, min_lat, max_lon, max_lat), a "
            "polygon file nor a shapely geometry"
        )
    if geom.is_empty or shapely.get_dimensions(geom) != 2:
        raise InvalidInputError(f"region={region!r} holds no polygon; pass a bbox or polygons")
    x0, y0, x1, y1 = geom.bounds
    if x0 < -180 or x1 > 180 or y0 < -90 or y1 > 90:
        raise InvalidInputError(
            f"region={region!r} has bounds {geom.bounds} outside longitude/latitude; give it in "
            "degrees (EPSG:4326) or as a file with its CRS"
        )
    return geom


def _bbox_polygon(values: list[float], shown: Any) -> shapely.Geometry:
    if len(values) != 4 or not (values[0] < values[2] and values[1] < values[3]):
        raise InvalidInputError(
            f"region={shown!r} is not a bbox; pass min_lon,min_lat,max_lon,max_lat with "
            "min < max, e.g. -85.6,30.4,-80.8,35.0"
        )
    return shapely.box(*values)


def _check_output(output: str | os.PathLike[str], overwrite: bool) -> Path:
    """The output path, refused unless a GeoPackage that can be written (nothing created)."""
    from reserve.io.atomic import check_path_name, check_target

    if not isinstance(output, str | os.PathLike):
        raise InvalidInputError(f"output must be a path to a .gpkg file; received {output!r}")
    path = check_path_name(output, "--output")
    if path.is_dir():
        raise DataFileError(
            f"--output {str(path)!r} is a folder; pass a .gpkg file path, e.g. "
            f"{str(path / 'units.gpkg')!r}"
        )
    if path.suffix.lower() != ".gpkg":
        raise InvalidInputError(f"--output {str(path)!r} must end in .gpkg (a GeoPackage)")
    if not path.parent.is_dir():
        raise DataFileError(f"--output folder {str(path.parent)!r} does not exist; create it first")
    if path.exists() and not overwrite:
        raise OutputExistsError(
            f"--output {str(path)!r} already exists; pass --overwrite to replace it"
        )
    return check_target(path, overwrite=overwrite, option="--output")


def _species_columns(species: str | Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The species names, checked, and their column suffixes (none for one name as a str)."""
    names = species_list(species)
    return names, (() if isinstance(species, str) else tuple(species_slug(n) for n in names))


def _check_kinds(filters: Any, progress: Any, **named: Any) -> None:
    """Refuse arguments of the wrong kind (mappings of rasters, path lists, filters, flags)."""
    if not isinstance(named["output"], str | os.PathLike):
        raise InvalidInputError(
            f"output must be a path to a .gpkg file; received {named['output']!r}"
        )
    for name in ("categorical", "continuous", "legend"):
        value = named[name]
        if value is not None and not isinstance(value, Mapping):
            raise InvalidInputError(
                f"{name} must map names to files, e.g. {{'landcover': 'lc.tif'}}; received "
                f"{value!r}"
            )
    for name in ("public", "locked_out"):
        value = named[name]
        files = [value] if isinstance(value, str | os.PathLike) else value
        if value is not None and (
            not isinstance(files, list | tuple)
            or not all(isinstance(f, str | os.PathLike) for f in files)
        ):
            raise InvalidInputError(
                f"{name} must be a polygon file or a list of them; received {value!r}"
            )
    if filters is not None and not isinstance(filters, ChecklistFilter):
        raise InvalidInputError(
            f"filters must be a reserve.io.ChecklistFilter; received {filters!r}"
        )
    if not isinstance(progress, bool):
        raise InvalidInputError(f"progress must be True or False; received {progress!r}")


def _check_numbers(cell_size: Any, chunksize: Any, engine: Any, overwrite: Any) -> None:
    """Refuse a cell size, chunk size, engine or overwrite flag of the wrong kind."""
    size = (
        cell_size
        if isinstance(cell_size, int | float) and not isinstance(cell_size, bool)
        else None
    )
    if size is None or not np.isfinite(size) or size <= 0:
        raise InvalidInputError(
            f"cell_size must be a positive number of metres; received {cell_size!r}. "
            "Pass e.g. --cell-size 3000"
        )
    if isinstance(chunksize, bool) or not isinstance(chunksize, int | np.integer) or chunksize < 1:
        raise InvalidInputError(
            f"chunksize must be an integer >= 1 (rows read at a time); received {chunksize!r}. "
            f"Pass e.g. --chunksize {INGEST_DEFAULTS.chunksize}"
        )
    if engine not in ("local", "dask"):
        raise InvalidInputError(f"engine={engine!r} is not one of 'local', 'dask'")
    if not isinstance(overwrite, bool):
        raise InvalidInputError(f"overwrite must be True or False; received {overwrite!r}")


def _layers(
    categorical: Mapping[str, Any] | None,
    continuous: Mapping[str, Any] | None,
    legend: Mapping[str, Any] | None,
) -> list[RasterLayer]:
    categorical = dict(categorical or {})
    continuous = dict(continuous or {})
    legend = dict(legend or {})
    unknown = sorted(set(legend) - set(categorical))
    if unknown:
        raise InvalidInputError(
            f"legend names {unknown} match no categorical raster (have {sorted(categorical)}); "
            "use the same NAME in --legend NAME=CSV and --categorical NAME=PATH"
        )
    both = sorted(set(categorical) & set(continuous))
    if both:
        raise InvalidInputError(f"raster names {both} are used twice; give each a distinct name")
    layers = [RasterLayer(n, p, "categorical", legend.get(n)) for n, p in categorical.items()]
    layers += [RasterLayer(n, p, "continuous") for n, p in continuous.items()]
    return layers


def _versions() -> dict[str, str]:
    import rasterio

    import reserve

    return {
        "reserve": reserve.__version__,
        "numpy": np.__version__,
        "pandas": pd.__version__,
        "geopandas": gpd.__version__,
        "shapely": shapely.__version__,
        "pyproj": pyproj.__version__,
        "rasterio": rasterio.__version__,
        "gdal": rasterio.__gdal_version__,
    }


def ingest(
    ebd: str | os.PathLike[str],
    sed: str | os.PathLike[str],
    species: str | Sequence[str],
    output: str | os.PathLike[str],
    *,
    filters: ChecklistFilter | None = None,
    region: str | os.PathLike[str] | Sequence[float] | shapely.Geometry | None = None,
    region_layer: str | None = None,
    cell_size: float = INGEST_DEFAULTS.cell_size,
    crs: pyproj.CRS | str | None = None,
    categorical: Mapping[str, str | os.PathLike[str]] | None = None,
    continuous: Mapping[str, str | os.PathLike[str]] | None = None,
    legend: Mapping[str, Any] | None = None,
    public: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    locked_out: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
    public_threshold: float = INGEST_DEFAULTS.public_threshold,
    locked_threshold: float = INGEST_DEFAULTS.locked_threshold,
    region_threshold: float = INGEST_DEFAULTS.region_threshold,
    chunksize: int = INGEST_DEFAULTS.chunksize,
    engine: str = INGEST_DEFAULTS.engine,
    scheduler: str | None = None,
    progress: bool = False,
    overwrite: bool = False,
) -> IngestResult:
    """Ingest eBird data for one species, or several, into a GeoPackage of planning units.

    Parameters
    ----------
    ebd, sed : path-like
        eBird Basic Dataset and Sampling Event Data (plain, ``.gz`` or ``.zip``).
    species : str or sequence of str
        Common or scientific name. A sequence (even of one name) labels every species in one
        pass and adds ``label__<slug>`` / ``n_detections__<slug>`` (see the module docstring);
        two names of the same species, or with the same slug, are refused.
    output : path-like
        ``.gpkg`` to write (atomically: a temporary file beside it, then a rename).
    filters : ChecklistFilter, optional
        eBird best-practice filters (default ``ChecklistFilter()``); the region is their polygon.
    region, region_layer : bbox, polygon file or geometry; str, optional
        See :func:`parse_region`; default the bounding box of the kept checklists.
    cell_size, crs : float; CRS or str, optional
        Cell side in metres; equal-area grid CRS (default a LAEA centred on the region).
    categorical, continuous, legend : mapping name -> path, optional
        Rasters summarised per cell (class fractions; mean, sd); class names of categorical ones.
    public, locked_out : path or paths, optional
        Public-land polygons (without them no cell is ``train``); polygons never selected.
    public_threshold, locked_threshold, region_threshold : float
        Fractions of a cell above which it is public / locked out / inside the region (a
        private cell the region's edge merely clips is ``other``, not a candidate).
    chunksize, engine, scheduler, progress
        Rows per streamed chunk; ``"local"`` or ``"dask"`` (a cluster that sends only per-cell
        totals: the same units); Dask scheduler (default local); progress bar (local engine).
    overwrite : bool
        Replace an existing ``output``.

    Returns
    -------
    IngestResult
    """
    names, slugs = _species_columns(species)
    _check_numbers(cell_size, chunksize, engine, overwrite)
    _check_kinds(
        filters,
        progress,
        categorical=categorical,
        continuous=continuous,
        legend=legend,
        public=public,
        locked_out=locked_out,
        output=output,
    )
    thresholds = _check_thresholds(public_threshold, locked_threshold, region_threshold)
    layers = _layers(categorical, continuous, legend)
    region_ll = parse_region(region, region_layer)
    if region_ll is not None:  # the grid's size is known before any file is read
        check_grid_size(_geodesic_area(shapely.box(*region_ll.bounds)), cell_size)
    where = (region, region_ll, None if crs is None else require_equal_area(crs))
    _check_files(ebd, sed, layers, public, locked_out)
    path = _check_output(output, overwrite)  # every input first, then the output
    reading = dict(chunksize=chunksize, engine=engine, scheduler=scheduler, progress=progress)
    obs, grid, region_xy, agg, log = _observe(
        ebd, sed, species, _with_region(filters, region_ll), reading, where, cell_size, slugs
    )
    public_xy = None if public is None else read_polygons(public, grid.crs, name="public")
    units = _planning_units(
        grid, region_xy, agg, layers, names, slugs, public_xy, locked_out, thresholds
    )
    summary = _summary(log, units, grid, names, slugs, ebd, sed, region, layers, public, locked_out)
    _write(units, summary, path, _polygon_layers(units, public_xy, region_xy))
    return IngestResult(path, units, summary, obs, grid)


def _observe(
    ebd: Any,
    sed: Any,
    species: str | Sequence[str],
    filters: ChecklistFilter,
    reading: Mapping[str, Any],
    where: tuple[Any, shapely.Geometry | None, pyproj.CRS | None],
    cell_size: float,
    slugs: Sequence[str],
) -> tuple[pd.DataFrame | None, Grid, shapely.Geometry, pd.DataFrame, FilterLog]:
    """Read, filter, zero-fill and grid the checklists; aggregate them per cell.

    ``where`` is ``(region, region_ll, grid_crs)`` as in :func:`_grid_region`. Returns the
    checklists with their ``cell_id`` (``None`` with the Dask engine: they stay on the
    workers), the grid, the region in the grid CRS, the per-cell totals and the filter log.
    """
    log = FilterLog()
    if reading["engine"] == "dask":
        from reserve.io.dask_engine import dask_client, dask_observations

        with dask_client(reading["scheduler"], reuse=True) as client:
            held = dask_observations(
                ebd, sed, species, filters, client=client, log=log, chunksize=reading["chunksize"]
            )
            grid, region_xy, agg = _grid_on_cluster(held, *where, cell_size, slugs)
        return None, grid, region_xy, agg, log
    obs = load_observations(ebd, sed, species, filters, log=log, **reading)
    lon = obs["longitude"].to_numpy()
    lat = obs["latitude"].to_numpy()
    region, region_ll, grid_crs = where
    region_xy, grid_crs = _grid_region(region, region_ll, _bounds(lon, lat), grid_crs)
    x, y = _to_grid(grid_crs).transform(lon, lat)
    grid = _covering_grid(region_xy, _bounds(x, y), cell_size, grid_crs)
    obs = obs.assign(cell_id=grid.cell_of(x, y))
    return obs, grid, region_xy, _aggregate(obs, slugs), log


def _planning_units(
    grid: Grid,
    region_xy: shapely.Geometry,
    agg: pd.DataFrame,
    layers: Sequence[RasterLayer],
    names: Sequence[str],
    slugs: Sequence[str],
    public: shapely.Geometry | None,
    locked_out: Any,
    thresholds: tuple[float, float, float],
) -> gpd.GeoDataFrame:
    """Every cell of the region or with a kept checklist: totals, roles and habitat features.

    ``public`` is the public land in the grid CRS (None: not given).
    """
    cells = np.union1d(grid.cells_in(region_xy), agg.index.to_numpy())
    agg = agg.reindex(cells)
    polygons = grid.polygons(cells)
    features = habitat_features(grid, cells, layers) if layers else pd.DataFrame(index=cells)
    surveyed = agg["n_checklists"].notna().to_numpy()
    ownership = _ownership(grid, polygons, region_xy, surveyed, public, locked_out, thresholds)
    table = _cell_table(cells, agg, ownership, names, slugs)
    feats = features.reindex(cells).reset_index(drop=True).astype(np.float64)
    table = pd.concat([table, feats], axis=1)
    return gpd.GeoDataFrame(table, geometry=polygons, crs=grid.crs)


def _check_thresholds(public: float, locked: float, region: float) -> tuple[float, float, float]:
    """The three thresholds of :func:`ingest`, checked."""
    for name, value in (("public", public), ("locked", locked), ("region", region)):
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise InvalidInputError(
                f"{name}_threshold must be a number in [0, 1]; received {value!r}"
            )
    if not (0.0 <= locked <= 1.0):
        raise InvalidInputError(f"locked_threshold={locked!r} must lie in [0, 1]")
    if not (0.0 <= public <= 1.0):
        raise InvalidInputError(f"public_threshold={public!r} must lie in [0, 1]")
    if not (0.0 <= region < 1.0):
        raise InvalidInputError(f"region_threshold={region!r} must lie in [0, 1); pass e.g. 0.5")
    return public, locked, region


def _check_files(
    ebd: Any, sed: Any, layers: Sequence[RasterLayer], public: Any, locked_out: Any
) -> None:
    """Refuse a missing input file (or a folder, or a non-path) before anything is read."""
    for name, f in (("ebd", ebd), ("sed", sed)):
        if not isinstance(f, str | os.PathLike):
            raise InvalidInputError(f"{name} must be a path to an eBird text file; received {f!r}")
        if Path(f).is_dir():
            raise DataFileError(
                f"--{name} {str(f)!r} is a folder; pass the eBird .txt, .gz or .zip file in it"
            )
    for layer in layers:
        if not isinstance(layer.path, str | os.PathLike):
            raise InvalidInputError(
                f"raster {layer.name!r} must be a path; received {layer.path!r}"
            )
        if not Path(layer.path).is_file():
            raise DataFileError(f"raster {str(layer.path)!r} ({layer.name}) does not exist")
    for name, files in (("public", public), ("locked_out", locked_out)):
        for f in [files] if isinstance(files, str | os.PathLike) else files or []:
            if not Path(f).exists():
                raise DataFileError(f"{name} polygon file {str(f)!r} does not exist")
    for name, f in (("ebd", ebd), ("sed", sed)):
        if not Path(f).is_file():
            raise DataFileError(f"{name}={str(f)!r} does not exist; check the path")


def _with_region(
    filters: ChecklistFilter | None, region_ll: shapely.Geometry | None
) -> ChecklistFilter:
    """The filters with the region as their polygon (the ingest's region is the filter's)."""
    filters = ChecklistFilter() if filters is None else filters
    if filters.polygon is not None:
        raise InvalidInputError(
            "filters.polygon is set; pass the region as region= (a bbox, a polygon file or a "
            "geometry) and leave filters.polygon None"
        )
    return replace(filters, polygon=region_ll)


def _ownership(
    grid: Grid,
    polygons: np.ndarray,
    region_xy: shapely.Geometry,
    surveyed: np.ndarray,
    public: shapely.Geometry | None,
    locked_out: Any,
    thresholds: tuple[float, float, float],
) -> dict[str, np.ndarray]:
    """Public and region fractions, locked-out flags and roles of the cells ``polygons``.

    ``thresholds`` is ``(public_threshold, locked_threshold, region_threshold)``.
    """
    public_threshold, locked_threshold, region_threshold = thresholds
    n = len(polygons)
    if public is None:
        warnings.warn(
            "no public polygons given: every cell is private, so no cell has role 'train'",
            UserWarning,
            stacklevel=4,
        )
        public_fraction = np.zeros(n)
    else:
        public_fraction = cover_fraction(polygons, public)
    if locked_out is None:
        locked = np.zeros(n, dtype=bool)
    else:
        locked_geom = read_polygons(locked_out, grid.crs, name="locked_out")
        locked = cover_fraction(polygons, locked_geom) > locked_threshold
    region_fraction = cover_fraction(polygons, region_xy)
    outside = region_fraction <= region_threshold
    role = assign_roles(
        public_fraction, surveyed, locked, public_threshold=public_threshold, outside=outside
    )
    return {
        "role": role,
        "public_fraction": public_fraction,
        "locked_out": locked,
        "region_fraction": region_fraction,
        "surveyed": surveyed,
    }


def _cell_table(
    cells: np.ndarray,
    agg: pd.DataFrame,
    ownership: Mapping[str, np.ndarray],
    names: Sequence[str],
    slugs: Sequence[str],
) -> pd.DataFrame:
    """The leading columns of ``planning_units`` (:data:`PLANNING_UNIT_COLUMNS`, species pairs)."""
    surveyed = ownership["surveyed"]
    table = pd.DataFrame(
        {
            "cell_id": cells.astype(np.int64),
            "role": ownership["role"].astype(str),
            "label": np.where(surveyed, agg["label"].fillna(-1), -1).astype(np.int64),
            "n_checklists": agg["n_checklists"].fillna(0).to_numpy().astype(np.int64),
            "n_detections": agg["n_detections"].fillna(0).to_numpy().astype(np.int64),
            "effort_hours": agg["effort_hours"].fillna(0.0).to_numpy(dtype=float),
            "effort_km": agg["effort_km"].fillna(0.0).to_numpy(dtype=float),
            "public_fraction": ownership["public_fraction"].astype(float),
            "locked_out": ownership["locked_out"].astype(bool),
            "region_fraction": ownership["region_fraction"].astype(float),
        }
    )
    for name, slug in zip(names[: len(slugs)], slugs, strict=True):
        n_det = agg[SPECIES_DETECTIONS_PREFIX + slug].fillna(0).to_numpy().astype(np.int64)
        table[SPECIES_LABEL_PREFIX + slug] = np.where(surveyed, n_det > 0, -1).astype(np.int64)
        table[SPECIES_DETECTIONS_PREFIX + slug] = n_det
        if n_det.sum() == 0:
            warnings.warn(
                f"species {name!r} (of {list(names)}) has no detection in the "
                f"{int(table['n_checklists'].sum())} kept checklists: its column "
                f"{SPECIES_LABEL_PREFIX + slug} holds only 0 and -1. Check the name, the dates "
                "and the region",
                UserWarning,
                stacklevel=4,
            )
    return table


def _aggregate(table: pd.DataFrame, slugs: Sequence[str]) -> pd.DataFrame:
    """Per-cell totals of checklists with a ``cell_id`` (:func:`aggregate_checklists`), plus
    ``n_detections__<slug>`` of every species in ``slugs`` (columns ``detected__<slug>``)."""
    cell_id = table["cell_id"].to_numpy()
    agg = aggregate_checklists(
        cell_id,
        table["detected"].to_numpy(),
        table["duration_minutes"].to_numpy(),
        table["effort_distance_km"].to_numpy(),
    )
    if slugs:
        keep = np.asarray(cell_id, dtype=np.int64) >= 0
        _, inverse = np.unique(cell_id[keep], return_inverse=True)
        for slug in slugs:
            det = table[DETECTED_PREFIX + slug].to_numpy(dtype=bool)[keep]
            counts = np.bincount(inverse, weights=det, minlength=len(agg))
            agg[SPECIES_DETECTIONS_PREFIX + slug] = counts.astype(np.int64)
    return agg


def _bounds(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    """(xmin, ymin, xmax, ymax) of points; empty arrays give an inverted (+inf, -inf) box."""
    if len(x) == 0:
        return (np.inf, np.inf, -np.inf, -np.inf)
    return (float(x.min()), float(y.min()), float(x.max()), float(y.max()))


def _merge_bounds(boxes: Sequence[Sequence[float]]) -> tuple[float, float, float, float]:
    b = np.asarray(boxes, dtype=float).reshape(-1, 4)
    return (b[:, 0].min(), b[:, 1].min(), b[:, 2].max(), b[:, 3].max())


def _to_grid(grid_crs: pyproj.CRS) -> pyproj.Transformer:
    return pyproj.Transformer.from_crs(_WGS84, grid_crs, always_xy=True)


def _grid_region(
    region: Any,
    region_ll: shapely.Geometry | None,
    lonlat_bounds: Sequence[float],
    grid_crs: pyproj.CRS | None,
) -> tuple[shapely.Geometry, pyproj.CRS]:
    """The region in the grid CRS, and that CRS (default: centred on the region).

    Without a region, the region is the bounding box ``lonlat_bounds`` of the kept checklists.
    """
    if region_ll is None:
        region_ll = shapely.box(*lonlat_bounds)
    if grid_crs is None:
        x0, y0, x1, y1 = region_ll.bounds
        grid_crs = equal_area_crs((x0 + x1) / 2, (y0 + y1) / 2)
    # Densify the region in degrees so its edges stay true after projection.
    to_grid = _to_grid(grid_crs)
    region_xy = shapely.transform(
        shapely.segmentize(region_ll, 0.05), lambda c: np.column_stack(to_grid.transform(*c.T))
    )
    region_xy = shapely.make_valid(region_xy)
    if region_xy.is_empty:
        raise InvalidInputError(f"region={region!r} is empty in the grid CRS")
    return region_xy, grid_crs


def _geodesic_area(polygon: shapely.Geometry) -> float:
    """Square metres of a longitude/latitude polygon on the WGS84 ellipsoid."""
    return abs(pyproj.Geod(ellps="WGS84").geometry_area_perimeter(polygon)[0])


def _covering_grid(
    region_xy: shapely.Geometry,
    xy_bounds: Sequence[float],
    cell_size: float,
    grid_crs: pyproj.CRS,
) -> Grid:
    """The grid covering the region and every kept checklist (``xy_bounds``, grid CRS)."""
    box = _merge_bounds([region_xy.bounds, xy_bounds])
    check_grid_size((box[2] - box[0]) * (box[3] - box[1]), cell_size)
    return Grid.covering(box, cell_size=cell_size, crs=grid_crs)


#: Memory an ingest takes per grid cell, in bytes: about 700 measured on the test region
#: (``/usr/bin/time -v``, 8,000 and 33,000 cells of 100 and 50 m), doubled for the rasters.
BYTES_PER_CELL = 1500


def available_memory() -> int | None:
    """Bytes of memory the system can give a process now (``MemAvailable``); None if unknown.

    Returns
    -------
    int or None
    """
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def check_grid_size(area: float, cell_size: float) -> None:
    """Refuse a grid that cannot fit in memory, naming the count, the memory, and a likely mistake.

    Parameters
    ----------
    area : float
        Square metres of the box the grid covers.
    cell_size : float
        Cell side in metres.

    Raises
    ------
    InvalidInputError
        When the cells would take more than :func:`available_memory`; a ``cell_size`` under
        100 is named as kilometres typed as metres.

    Examples
    --------
    >>> check_grid_size(1e10, 3000.0)  # 1,111 cells of 3 km over 10,000 km2
    """
    n_cells = area / cell_size**2
    need, have = n_cells * BYTES_PER_CELL, available_memory()
    if have is None or need <= have:
        return
    hint = (
        f" --cell-size is in metres: {cell_size:g} means cells of {cell_size:g} m; for "
        f"{cell_size:g} km pass --cell-size {cell_size * 1000:g}."
        if cell_size < 100
        else ""
    )
    raise InvalidInputError(
        f"--cell-size {cell_size:g} would grid {area / 1e6:,.0f} km2 into about "
        f"{n_cells:,.0f} cells, needing about {need / 1e9:,.1f} GB of memory where "
        f"{have / 1e9:,.1f} GB are available.{hint} Pass a larger --cell-size or a smaller "
        "--region"
    )


# Dask: gridding on the workers. The zero-filled checklists stay in worker memory; the client
# receives per-partition bounding boxes (4 numbers each) and per-cell aggregates.


def _lonlat_bounds_task(part: pd.DataFrame) -> tuple[float, float, float, float]:
    return _bounds(part["longitude"].to_numpy(), part["latitude"].to_numpy())


def _xy_bounds_task(part: pd.DataFrame, grid_crs: pyproj.CRS) -> tuple[float, float, float, float]:
    x, y = _to_grid(grid_crs).transform(part["longitude"].to_numpy(), part["latitude"].to_numpy())
    return _bounds(np.asarray(x), np.asarray(y))


def _cells_task(
    part: pd.DataFrame, grid: Grid, order: str, n_buckets: int, slugs: Sequence[str] = ()
) -> list[pd.DataFrame]:
    """Assign one partition's checklists to cells; split the few columns needed by cell."""
    from reserve.io.dask_engine import split_by

    x, y = _to_grid(grid.crs).transform(part["longitude"].to_numpy(), part["latitude"].to_numpy())
    cell = grid.cell_of(x, y)
    table = pd.DataFrame(
        {
            "cell_id": cell,
            "key": part[order].to_numpy(),
            "detected": part["detected"].to_numpy(),
            "duration_minutes": part["duration_minutes"].to_numpy(),
            "effort_distance_km": part["effort_distance_km"].to_numpy(),
            **{DETECTED_PREFIX + s: part[DETECTED_PREFIX + s].to_numpy() for s in slugs},
        }
    )
    return split_by(table, cell % n_buckets, n_buckets)


def _aggregate_task(pieces: Sequence[pd.DataFrame], slugs: Sequence[str] = ()) -> pd.DataFrame:
    """Aggregate the checklists of a set of whole cells, in the local engine's row order.

    The rows are sorted by ``key`` first, so every cell's effort totals are summed in the same
    order as on the whole table, and the floating-point sums are identical.
    """
    table = pd.concat(list(pieces), ignore_index=True).sort_values("key", kind="stable")
    return _aggregate(table, slugs)


def _piece(result: Sequence[Any], index: int) -> Any:
    return result[index]


def _grid_on_cluster(
    held: DaskObservations,
    region: Any,
    region_ll: shapely.Geometry | None,
    grid_crs: pyproj.CRS | None,
    cell_size: float,
    slugs: Sequence[str] = (),
) -> tuple[Grid, shapely.Geometry, pd.DataFrame]:
    """Grid the checklists held on a Dask cluster; return the grid, region and cell aggregates.

    Three rounds on the workers: bounding boxes in degrees (for the default region and CRS),
    bounding boxes in the grid CRS (for the grid), then cell assignment with a shuffle by
    ``cell_id`` so each task aggregates whole cells. The client gathers one small frame per
    bucket, one row per surveyed cell in all.
    """
    client, parts = held.client, held.parts
    lonlat = _merge_bounds(client.gather(client.map(_lonlat_bounds_task, parts)))
    region_xy, grid_crs = _grid_region(region, region_ll, lonlat, grid_crs)
    xy = _merge_bounds(client.gather([client.submit(_xy_bounds_task, p, grid_crs) for p in parts]))
    grid = _covering_grid(region_xy, xy, cell_size, grid_crs)
    n = len(parts)
    split = [client.submit(_cells_task, p, grid, held.order, n, slugs) for p in parts]
    aggregates = [
        client.submit(_aggregate_task, [client.submit(_piece, s, j) for s in split], slugs)
        for j in range(n)
    ]
    agg = pd.concat(client.gather(aggregates)).sort_index()
    return grid, region_xy, agg


def _summary(
    log: FilterLog,
    units: gpd.GeoDataFrame,
    grid: Grid,
    names: Sequence[str],
    slugs: Sequence[str],
    ebd: Any,
    sed: Any,
    region: Any,
    layers: list[RasterLayer],
    public: Any,
    locked_out: Any,
) -> pd.DataFrame:
    rows: list[tuple[str, float, float, str]] = []
    for r in log.to_frame().itertuples(index=False):
        rows.append((f"{r.table}:{r.step}", r.kept, r.dropped, r.detail))
    for role in ("train", "candidate", "other"):
        rows.append((f"cells:{role}", int((units["role"] == role).sum()), 0, ""))
    rows.append(("cells:positive", int((units["label"] == 1).sum()), 0, "label = 1"))
    rows.append(("cells:surveyed", int((units["label"] >= 0).sum()), 0, "label >= 0"))
    for slug in slugs:
        column = SPECIES_LABEL_PREFIX + slug
        rows.append((f"cells:positive:{slug}", int((units[column] == 1).sum()), 0, f"{column} = 1"))
    settings = {
        "species": "; ".join(names),
        **{f"species:{slug}": name for slug, name in zip(slugs, names[: len(slugs)], strict=True)},
        "ebd": str(ebd),
        "sed": str(sed),
        "region": str(region) if not isinstance(region, shapely.Geometry) else region.wkt[:200],
        "crs": grid.crs.to_wkt(),
        "crs_name": grid.crs.name,
        "cell_size": str(grid.cell_size),
        "rasters": "; ".join(f"{lay.name}={lay.path} ({lay.kind})" for lay in layers),
        "public": str(public),
        "locked_out": str(locked_out),
        "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    settings.update({f"version:{k}": v for k, v in _versions().items()})
    rows += [(k, np.nan, np.nan, v) for k, v in settings.items()]
    return pd.DataFrame(rows, columns=["item", "kept", "dropped", "value"])


def _polygon_layers(
    units: gpd.GeoDataFrame, public: shapely.Geometry | None, region: shapely.Geometry
) -> dict[str, gpd.GeoDataFrame]:
    """The ``public_land`` and ``region`` layers (grid CRS; public land clipped to the cells)."""
    out = {}
    if public is not None and not public.is_empty:
        out["public_land"] = shapely.clip_by_rect(public, *units.total_bounds)
    out["region"] = region
    parts = {name: _polygons(geom) for name, geom in out.items()}
    return {
        name: gpd.GeoDataFrame(geometry=[shapely.MultiPolygon(polys)], crs=units.crs)
        for name, polys in parts.items()
        if polys
    }


def _polygons(geom: shapely.Geometry) -> list[shapely.Polygon]:
    """The polygon parts of ``geom`` (a clip or make_valid may leave lines or collections)."""
    parts = shapely.get_parts(shapely.get_parts(geom))  # collections of multipolygons too
    return [g for g in parts if isinstance(g, shapely.Polygon) and not g.is_empty]


def _write(
    units: gpd.GeoDataFrame,
    summary: pd.DataFrame,
    path: Path,
    polygons: Mapping[str, gpd.GeoDataFrame] | None = None,
) -> None:
    """Write every layer to a temporary file beside ``path``, then rename it into place."""
    import pyogrio

    try:
        with replacing(path, ".gpkg") as tmp:
            pyogrio.write_dataframe(units, tmp, layer="planning_units", driver="GPKG")
            pyogrio.write_dataframe(
                summary, tmp, layer="ingest_summary", driver="GPKG", append=True
            )
            for name, frame in (polygons or {}).items():
                pyogrio.write_dataframe(
                    frame, tmp, layer=name, driver="GPKG", append=True, promote_to_multi=True
                )
    except (OSError, RuntimeError) as exc:  # pyogrio's errors are RuntimeErrors
        raise DataFileError(
            f"--output {str(path)!r} cannot be written: {write_failure(exc, path.parent)}; the "
            "previous file, if any, is unchanged: pass a path in a writable folder with free "
            "space"
        ) from None
