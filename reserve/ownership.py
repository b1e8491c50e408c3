"""Per-cell public-land fraction, locked-out cells, and the train / candidate / other roles.

Roles (the contract with ``reserve select``):

* ``train``: public (public fraction > ``public_threshold``) and surveyed: its label is known;
* ``candidate``: private (not public) and not locked out: a cell that may be chosen;
* ``other``: public and unsurveyed, or private but locked out (urban, already protected, ...).

Examples
--------
>>> assign_roles(np.array([0.9, 0.9, 0.1, 0.1]), np.array([True, False, True, False]),
...              np.array([False, False, False, True])).tolist()
['train', 'other', 'candidate', 'other']
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import geopandas as gpd
import numpy as np
import pyproj
import shapely

from reserve.config import INGEST_DEFAULTS
from reserve.errors import DataFileError, InvalidInputError

__all__ = ["ROLES", "assign_roles", "cover_fraction", "read_polygons"]

ROLES = ("train", "candidate", "other")


def read_polygons(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    crs: pyproj.CRS | str,
    *,
    layer: str | None = None,
    name: str = "public",
) -> shapely.Geometry:
    """Read polygon layers (any format GDAL reads), reproject to ``crs`` and dissolve them.

    Parameters
    ----------
    paths : path-like or sequence of path-like
        Files (GeoPackage, shapefile, GeoJSON, ...). Non-polygon features are ignored.
    crs : CRS or str
        Target (grid) CRS.
    layer : str, optional
        Layer name for multi-layer files.
    name : str
        Parameter name used in messages (``public``, ``locked_out``).

    Returns
    -------
    shapely geometry
        The union, valid, in ``crs`` (empty when the files hold no polygon).
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    parts = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise DataFileError(f"{name} polygon file {str(path)!r} does not exist; check the path")
        try:
            frame = gpd.read_file(path, layer=layer, engine="pyogrio")
        except Exception as exc:  # pyogrio raises its own DataSourceError / DataLayerError
            raise DataFileError(
                f"{name} polygon file {str(path)!r} cannot be read by GDAL ({exc}); pass a "
                "GeoPackage, shapefile or GeoJSON of polygons"
            ) from None
        if frame.crs is None:
            raise DataFileError(
                f"{name} polygon file {str(path)!r} has no CRS, so it cannot be placed on the "
                "grid. Fix: set one, e.g. ogr2ogr -a_srs EPSG:4326 OUT IN (the CRS it was made in)"
            )
        geoms = frame.to_crs(pyproj.CRS.from_user_input(crs)).geometry.to_numpy()
        keep = shapely.get_type_id(geoms) >= 0
        geoms = geoms[keep]
        polys = geoms[np.isin(shapely.get_type_id(geoms), [3, 6, 7])]
        parts.append(shapely.make_valid(polys))
    if not parts:
        return shapely.Polygon()
    merged = shapely.union_all(np.concatenate(parts))
    # Keep only the areal part of any GeometryCollection make_valid produced.
    return shapely.union_all(
        [g for g in shapely.get_parts(merged) if shapely.get_dimensions(g) == 2]
        or [shapely.Polygon()]
    )


def cover_fraction(cells: np.ndarray, polygons: shapely.Geometry) -> np.ndarray:
    """Fraction of each cell's area inside ``polygons`` (both in the same equal-area CRS).

    Only cells whose bounding boxes meet the polygons are intersected (an STRtree query), so
    the cost grows with the polygons' extent, not with the whole grid.

    Examples
    --------
    >>> cells = shapely.box([0, 1], [0, 0], [1, 2], [1, 1])
    >>> cover_fraction(cells, shapely.box(0.5, 0, 1.5, 1)).tolist()
    [0.5, 0.5]
    """
    cells = np.asarray(cells)
    out = np.zeros(len(cells), dtype=float)
    if shapely.is_empty(polygons) or len(cells) == 0:
        return out
    parts = shapely.get_parts(polygons)
    tree = shapely.STRtree(cells)
    cell_idx = np.unique(tree.query(parts, predicate="intersects")[1])
    if cell_idx.size == 0:
        return out
    shapely.prepare(polygons)
    # cells wholly inside need no intersection (most of them, for a region outline)
    inside = shapely.contains_properly(polygons, cells[cell_idx])
    out[cell_idx[inside]] = 1.0
    edge = cell_idx[~inside]
    inter = shapely.intersection(cells[edge], polygons)
    out[edge] = shapely.area(inter) / shapely.area(cells[edge])
    return np.clip(out, 0.0, 1.0)


def assign_roles(
    public_fraction: np.ndarray,
    surveyed: np.ndarray,
    locked_out: np.ndarray | None = None,
    *,
    public_threshold: float = INGEST_DEFAULTS.public_threshold,
    outside: np.ndarray | None = None,
) -> np.ndarray:
    """Role of every cell: ``train``, ``candidate`` or ``other`` (see the module docstring).

    Parameters
    ----------
    public_fraction : float array in [0, 1]
    surveyed : bool array
        At least one kept checklist in the cell.
    locked_out : bool array, optional
        Cells that must never be selected.
    public_threshold : float
        A cell is public when its fraction is strictly above this.
    outside : bool array, optional
        Cells mostly outside the region: never candidates (``other`` unless they train).
    """
    if not (0.0 <= float(public_threshold) <= 1.0):
        raise InvalidInputError(
            f"public_threshold={public_threshold!r} must lie in [0, 1] (default "
            f"{INGEST_DEFAULTS.public_threshold})"
        )
    public = np.asarray(public_fraction, dtype=float) > public_threshold
    surveyed = np.asarray(surveyed, dtype=bool)
    locked = (
        np.zeros(len(public), dtype=bool) if locked_out is None else np.asarray(locked_out, bool)
    )
    out = np.zeros(len(public), dtype=bool) if outside is None else np.asarray(outside, bool)
    role = np.full(len(public), "other", dtype=object)
    role[public & surveyed] = "train"
    role[~public & ~locked & ~out] = "candidate"
    return role
