"""Write the selection to one GeoPackage, atomically and reproducibly.

Layers of ``<out>/reserve.gpkg`` (lower_snake names, CRS stored: the planning units' own,
equal-area CRS; only the map is drawn in EPSG:4326):

``planning_units`` (polygons, every input cell)
    the input columns (``cell_id``, ``role``, ``label``, ``n_checklists``, ...,
    ``locked_out``: the input column or ``--locked-out``), then ``locked_in`` (bool),
    ``score`` (``X @ w + b`` on standardised features; NaN where a feature is missing),
    ``rank`` (1 = best among the selected and candidate cells; 0 for the others),
    ``selected`` (bool), ``selection_frequency`` (only with ``--bootstrap``: share of refits
    that select the cell, 0 for non-candidates), ``mess`` (similarity of the cell's habitat
    to the training cells', :mod:`reserve.novelty`; negative outside their range, NaN
    without finite features), ``novel`` (bool, ``mess < 0``), ``mess_variable`` (the most
    dissimilar habitat feature), then the feature columns.
``selected`` (polygons, the ``k`` selected cells, locked-in first, then best first)
    ``rank``, ``cell_id``, ``longitude``, ``latitude`` (the cell's centroid in EPSG:4326),
    ``area_ha`` (its area), ``score``, ``selection_frequency`` (with ``--bootstrap``),
    ``locked_in`` (when any cell is locked in), ``mess``, ``novel``, ``mess_variable``,
    ``role``, ``label``, the feature columns.
``ranking`` (a table without geometry, every ranked cell in rank order)
    ``rank``, ``cell_id``, ``score``, ``selected``, ``locked_in``, ``selection_frequency``
    (with ``--bootstrap``), ``mess``, ``novel``, ``mess_variable``, ``longitude``,
    ``latitude``, ``area_ha``: the selected cells, then every other candidate by score, so
    the runners-up are visible (the best ``k + 1`` cells are not always the best ``k`` plus
    one). The same table is written beside the GeoPackage as ``ranking.csv``
    (:data:`CSV_NAME`), for a spreadsheet or a GPS.
``layer_styles`` (QGIS's style table; :mod:`reserve.qgis_styles`)
    the default QGIS styles of ``planning_units`` (graduated by score, viridis) and
    ``selected`` (magenta, labelled by rank): the layers open styled in QGIS.
``run_summary`` (a table without geometry, one row)
    budget, ``n_selected``, method, ``c`` and how it was chosen, solver status, objective,
    bound and gap (NaN when unknown), iterations, runtimes, seed, cell counts (novel habitat:
    ``n_candidates_novel``, ``n_selected_novel``, ``n_novel_excluded``), input paths and
    SHA-256 checksums, package versions (``version_*``) and the effective configuration
    (``config``, JSON).

The file is written to a hidden temporary file beside the target and renamed over it, so a
reader sees the old file or the new one, never a partial one; a run killed before the rename
leaves the old file untouched (the stale temporary file is removed by the next run). GDAL's
``last_change`` timestamps are fixed (:data:`FIXED_TIMESTAMP`), so the same selection gives a
byte-identical ``selected`` layer; the time of the run is ``run_summary.created_utc``.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import geopandas as gpd
import pandas as pd
from pyproj import CRS

from reserve.errors import DataFileError, InvalidInputError, OutputExistsError
from reserve.io.atomic import atomic_target, remove_stale_temporaries, write_failure
from reserve.qgis_styles import describe_crs, style_table

if TYPE_CHECKING:
    from reserve.result import SelectionResult

__all__ = [
    "CSV_NAME",
    "FIXED_TIMESTAMP",
    "GPKG_NAME",
    "LAYERS",
    "SUMMARY_NAME",
    "identified_crs",
    "prepare_outputs",
    "write_geopackage",
    "write_ranking_csv",
    "write_result",
]

#: File name of the selection's GeoPackage in the output folder.
GPKG_NAME = "reserve.gpkg"

#: File name of the ranking table (CSV, with longitude and latitude) beside the GeoPackage.
CSV_NAME = "ranking.csv"
#: The printable summary beside them (:func:`reserve.report.summary_text`).
SUMMARY_NAME = "summary.txt"

#: Layer names of ``reserve.gpkg``.
LAYERS = ("planning_units", "selected", "run_summary", "ranking")

#: Value of GDAL's ``OGR_CURRENT_DATE`` while writing (``gpkg_contents.last_change``).
FIXED_TIMESTAMP = "2000-01-01T00:00:00.000Z"


class _IdentifiedCRS(CRS):
    """A CRS whose EPSG code (or its absence) is looked up once.

    pyproj answers ``to_epsg()`` by searching its database on every call, slowly for a CRS
    that is not in it (the default region's LAEA grid), and pyogrio asks once per
    layer written; the answer cannot change, so it is kept.
    """

    def __init__(self, crs: Any) -> None:
        super().__init__(crs.srs if isinstance(crs, CRS) else crs)  # keep the definition as read
        self._epsg = CRS.to_epsg(self)

    def to_epsg(self, min_confidence: int = 70) -> int | None:
        """EPSG code as :meth:`pyproj.crs.CRS.to_epsg` (default confidence: remembered)."""
        if min_confidence == 70 and "_epsg" in self.__dict__:
            return self._epsg
        return super().to_epsg(min_confidence)


def identified_crs(crs: Any) -> CRS:
    """``crs`` as a pyproj CRS that looks its EPSG code up only once.

    Parameters
    ----------
    crs : any input of :class:`pyproj.crs.CRS`

    Returns
    -------
    pyproj.crs.CRS
        Equal to ``CRS(crs)``; ``to_epsg()`` (default confidence) is computed once.

    Examples
    --------
    >>> identified_crs("EPSG:5070").to_epsg()
    5070
    """
    return crs if isinstance(crs, _IdentifiedCRS) else _IdentifiedCRS(crs)


#: The CRS also as WKT2 with all its parameters (GeoPackage extension gpkg_crs_wkt).
_WKT2 = {"dataset_options": {"CRS_WKT_EXTENSION": "YES"}}


def _qgis_extras(tmp: Path, planning_units: gpd.GeoDataFrame) -> None:
    """QGIS's ``layer_styles`` table and a readable CRS description, in the file being written."""
    import pyogrio

    if {"score", "role"} <= set(planning_units.columns):
        styles = style_table(planning_units, update_time=FIXED_TIMESTAMP)
        pyogrio.write_dataframe(styles, tmp, layer="layer_styles", append=True, driver="GPKG")
    describe_crs(tmp, planning_units.crs)


def _fixed_dates() -> tuple[Any, Any]:
    import pyogrio

    old = pyogrio.get_gdal_config_option("OGR_CURRENT_DATE")
    pyogrio.set_gdal_config_options({"OGR_CURRENT_DATE": FIXED_TIMESTAMP})
    return pyogrio, old


def _identified(planning_units: gpd.GeoDataFrame, selected: gpd.GeoDataFrame):
    """Both frames with their CRS's EPSG code looked up once (pyogrio asks for each layer)."""
    if not isinstance(planning_units.crs, _IdentifiedCRS):
        planning_units = planning_units.set_crs(
            identified_crs(planning_units.crs), allow_override=True
        )
    if not isinstance(selected.crs, _IdentifiedCRS):
        same = selected.crs == planning_units.crs  # cheap: compares definitions
        crs = planning_units.crs if same else identified_crs(selected.crs)
        selected = selected.set_crs(crs, allow_override=True)
    return planning_units, selected


def write_geopackage(
    planning_units: gpd.GeoDataFrame,
    selected: gpd.GeoDataFrame,
    summary: Mapping[str, Any],
    path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    ranking: pd.DataFrame | None = None,
    tradeoff: pd.DataFrame | None = None,
    representation: pd.DataFrame | None = None,
    survey_next: gpd.GeoDataFrame | None = None,
) -> Path:
    """Write ``planning_units``, ``selected``, ``run_summary`` (and ``ranking``) to a GeoPackage.

    Parameters
    ----------
    planning_units, selected : geopandas.GeoDataFrame
        Both with a CRS (stored in the file).
    summary : mapping
        One row of the ``run_summary`` table (scalars); ``created_utc`` is added.
    path : path-like
        Target ``.gpkg``.
    overwrite : bool
        Replace an existing file.
    ranking : pandas.DataFrame, optional
        The ranked cells, written as the table ``ranking`` (no geometry).
    tradeoff : pandas.DataFrame, optional
        The boundary calibration, written as the table ``boundary_tradeoff``.
    representation : pandas.DataFrame, optional
        With several species planned together: one row per species, written as the table
        ``representation``.
    survey_next : geopandas.GeoDataFrame, optional
        The suggested surveys, written as the layer ``survey_next`` (in ``selected``'s CRS).

    Returns
    -------
    Path

    Examples
    --------
    >>> import geopandas as gpd, shapely, tempfile, pathlib
    >>> cells = gpd.GeoDataFrame({"rank": [1]}, geometry=[shapely.box(0, 0, 1, 1)], crs=5070)
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "reserve.gpkg"
    >>> write_geopackage(cells, cells, {"budget": 1}, out).name
    'reserve.gpkg'
    """
    path = Path(path)
    for name, frame in (("planning_units", planning_units), ("selected", selected)):
        if frame.crs is None:
            raise DataFileError(f"{name} has no CRS; a GeoPackage layer must store its CRS")
    if path.exists() and not overwrite:
        raise OutputExistsError(
            f"output {str(path)!r} already exists; pass --overwrite to replace it"
        )
    remove_stale_temporaries(path)
    planning_units, selected = _identified(planning_units, selected)
    row = dict(summary)
    row["created_utc"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    table = pd.DataFrame([row])
    tmp = atomic_target(path, ".gpkg")
    pyogrio, old = _fixed_dates()
    try:
        kw = {"driver": "GPKG"}
        pyogrio.write_dataframe(planning_units, tmp, layer="planning_units", **kw, **_WKT2)
        pyogrio.write_dataframe(selected, tmp, layer="selected", append=True, **kw)
        pyogrio.write_dataframe(table, tmp, layer="run_summary", append=True, **kw)
        if survey_next is not None:
            survey_next = survey_next.set_crs(selected.crs, allow_override=True)
            pyogrio.write_dataframe(survey_next, tmp, layer="survey_next", append=True, **kw)
        tables = (
            ("ranking", ranking),
            ("boundary_tradeoff", tradeoff),
            ("representation", representation),
        )
        for name, frame in tables:
            if frame is not None:  # tables without geometry, when the run made them
                frame = pd.DataFrame(frame).reset_index(drop=True)
                pyogrio.write_dataframe(frame, tmp, layer=name, append=True, **kw)
        _qgis_extras(tmp, planning_units)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:  # pyogrio's errors are RuntimeErrors
        raise DataFileError(
            f"cannot write {str(path)!r}: {write_failure(exc, path.parent)}; nothing was "
            "changed: free space on that disk or pass a writable output folder on another"
        ) from None
    finally:
        pyogrio.set_gdal_config_options({"OGR_CURRENT_DATE": old})
        for leftover in (tmp, Path(f"{tmp}-journal"), Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            if leftover.exists():
                leftover.unlink()
    return path


def prepare_outputs(
    out: str | os.PathLike[str], map_path: Path | None = None, *, overwrite: bool = False
) -> Path:
    """Check, before any work, that the outputs can be written and may be replaced.

    Nothing is created here (a refused run leaves the file system as it was): the folders
    are made when the outputs are committed (:func:`reserve.io.atomic.write_together`).

    Parameters
    ----------
    out : path-like
        Folder of ``reserve.gpkg`` (created when the outputs are written).
    map_path : Path, optional
        The HTML map to be written too.
    overwrite : bool
        Whether existing outputs may be replaced.

    Returns
    -------
    Path
        ``<out>/reserve.gpkg``.

    Raises
    ------
    OutputExistsError
        An output exists and ``overwrite`` is False.
    DataFileError
        An output path that is a folder, a folder that is a file or is not writable.
    """
    from reserve.io.atomic import check_path_name, check_target

    out_dir = check_path_name(out, "--out")
    if map_path is not None:  # a bad --map is named before anything looks it up
        check_path_name(map_path, "--map")
    if out_dir.exists() and not out_dir.is_dir():
        raise DataFileError(f"--out {str(out_dir)!r} is a file; pass a folder path")
    gpkg = check_target(out_dir / GPKG_NAME, overwrite=overwrite, option="--out")
    check_target(out_dir / CSV_NAME, overwrite=overwrite, option="--out")
    check_target(out_dir / SUMMARY_NAME, overwrite=overwrite, option="--out")
    if map_path is not None:
        if Path(map_path).absolute() == gpkg.absolute():
            raise InvalidInputError(
                f"--map {str(map_path)!r} is the GeoPackage's own path; pass an .html path"
            )
        check_target(map_path, overwrite=overwrite, option="--map")
    return gpkg


def write_ranking_csv(ranking: pd.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write the ranking table as UTF-8 CSV (no index): one row per ranked cell.

    Parameters
    ----------
    ranking : pandas.DataFrame
        :attr:`reserve.result.SelectionResult.ranking`.
    path : path-like
        The file to write (the caller makes it atomic).

    Returns
    -------
    Path
    """
    path = Path(path)
    pd.DataFrame(ranking).to_csv(path, index=False, encoding="utf-8", lineterminator="\n")
    return path


def write_result(
    result: SelectionResult, path: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write a selection's tables to ``path`` (:func:`write_geopackage` of its layers).

    Parameters
    ----------
    result : reserve.result.SelectionResult
        Its ``planning_units``, ``selected``, ``summary`` and ``ranking``.
    path : path-like
        Target ``.gpkg``.
    overwrite : bool
        Replace an existing file.

    Returns
    -------
    Path
    """
    return write_geopackage(
        result.planning_units,
        result.selected,
        result.summary,
        path,
        overwrite=overwrite,
        ranking=result.ranking,
        tradeoff=result.tradeoff,
        representation=result.representation,
        survey_next=result.survey_next,
    )
