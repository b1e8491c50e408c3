"""A regular grid of square cells in an equal-area CRS, and points assigned to it by arithmetic.

The grid knows nothing of eBird or rasters: it takes a region, a CRS and a cell size, and maps
coordinates to cell ids. Cells are numbered row by row from the top-left corner
(``cell_id = row * n_cols + col``); the grid's corners are multiples of the cell size in the
CRS, so two runs over overlapping regions share cell edges.

Examples
--------
>>> import shapely
>>> g = Grid.covering((0.0, 10.0, 2500.0, 1000.0), cell_size=1000.0, crs="EPSG:6933")
>>> g.n_rows, g.n_cols
(1, 3)
>>> g.cell_of([10.0, 2400.0, 5000.0], [500.0, 999.0, 500.0]).tolist()
[0, 2, -1]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyproj
import shapely

from reserve.config import INGEST_DEFAULTS
from reserve.errors import InvalidInputError

__all__ = [
    "Grid",
    "aggregate_checklists",
    "cell_locations",
    "equal_area_crs",
    "require_equal_area",
]


def equal_area_crs(lon: float, lat: float) -> pyproj.CRS:
    """A Lambert azimuthal equal-area CRS (WGS84, metres) centred on ``lon``, ``lat``.

    Examples
    --------
    >>> equal_area_crs(-83.5, 32.7).coordinate_operation.method_name
    'Lambert Azimuthal Equal Area'
    """
    if not (-180 <= lon <= 180 and -90 <= lat <= 90):
        raise InvalidInputError(f"centre ({lon}, {lat}) is not a longitude/latitude in degrees")
    from pyproj.crs import GeographicCRS, ProjectedCRS
    from pyproj.crs.coordinate_operation import LambertAzimuthalEqualAreaConversion

    return ProjectedCRS(
        conversion=LambertAzimuthalEqualAreaConversion(round(lat, 6), round(lon, 6)),
        geodetic_crs=GeographicCRS(datum="WGS84"),
        name=(
            f"WGS 84 / LAEA centred on {abs(lat):.4f}{'N' if lat >= 0 else 'S'} "
            f"{abs(lon):.4f}{'E' if lon >= 0 else 'W'}"
        ),
    )


def require_equal_area(crs: pyproj.CRS | str, name: str = "crs") -> pyproj.CRS:
    """Return ``crs`` as a :class:`pyproj.CRS`, refusing geographic or known non-equal-area ones.

    A projected CRS whose projection is not one of the common equal-area methods is refused,
    because cell areas and land fractions would be wrong.
    """
    try:
        crs = pyproj.CRS.from_user_input(crs)
    except pyproj.exceptions.CRSError as exc:
        raise InvalidInputError(f"{name}={crs!r} is not a CRS pyproj understands ({exc})") from None
    if not crs.is_projected:
        raise InvalidInputError(
            f"{name}={crs.to_string()!r} is geographic (degrees); grids need an equal-area "
            "projected CRS in metres. Fix: leave it unset for a Lambert azimuthal equal-area "
            "centred on the region, or name one such as EPSG:5070 (US) or EPSG:3035 (Europe)"
        )
    method = (crs.coordinate_operation.method_name if crs.coordinate_operation else "").lower()
    if "equal area" not in method and "albers" not in method and "mollweide" not in method:
        if "sinusoidal" not in method and "eckert" not in method:
            raise InvalidInputError(
                f"{name}={crs.to_string()!r} uses projection {method!r}, which is not "
                "equal-area, so cell areas would be distorted. Fix: name an equal-area CRS "
                "(Lambert azimuthal equal area, Albers, Mollweide) or leave it unset"
            )
    unit = crs.axis_info[0].unit_name if crs.axis_info else "metre"
    if unit not in ("metre", "meter"):
        raise InvalidInputError(f"{name}={crs.to_string()!r} has units {unit!r}; use metres")
    return crs


@dataclass(frozen=True)
class Grid:
    """A regular grid of square cells.

    Attributes
    ----------
    crs : pyproj.CRS
        Equal-area projected CRS, metres.
    cell_size : float
        Side of a cell, metres.
    x0, y0 : float
        Left and *top* edges of the grid.
    n_rows, n_cols : int
    """

    crs: pyproj.CRS
    cell_size: float
    x0: float
    y0: float
    n_rows: int
    n_cols: int

    @classmethod
    def covering(
        cls,
        bounds: Sequence[float],
        *,
        cell_size: float = INGEST_DEFAULTS.cell_size,
        crs: pyproj.CRS | str,
    ) -> Grid:
        """The smallest grid with edges on multiples of ``cell_size`` covering ``bounds``.

        Parameters
        ----------
        bounds : (xmin, ymin, xmax, ymax)
            In ``crs`` units.
        cell_size : float
            Metres, > 0.
        crs : CRS or str
        """
        if not (isinstance(cell_size, int | float) and math.isfinite(cell_size) and cell_size > 0):
            raise InvalidInputError(f"cell_size={cell_size!r} must be a number of metres > 0")
        xmin, ymin, xmax, ymax = (float(v) for v in bounds)
        if not (xmin <= xmax and ymin <= ymax) or not all(
            map(math.isfinite, (xmin, ymin, xmax, ymax))
        ):
            raise InvalidInputError(f"bounds={tuple(bounds)!r} must be finite with min <= max")
        s = float(cell_size)
        # Every point of the closed box must fall in a cell, so the right and bottom edges lie
        # strictly beyond xmax and ymin (cell_of gives left and top edges to the cell).
        x0 = math.floor(xmin / s) * s
        if x0 > xmin:  # the division rounded up
            x0 -= s
        y0 = math.ceil(ymax / s) * s
        if y0 < ymax:
            y0 += s
        # Same arithmetic as cell_of, so the extreme points get valid rows and columns.
        n_cols = math.floor((xmax - x0) / s) + 1
        n_rows = math.floor((y0 - ymin) / s) + 1
        return cls(pyproj.CRS.from_user_input(crs), s, x0, y0, n_rows, n_cols)

    @property
    def n_cells(self) -> int:
        """Number of cells in the full rectangle."""
        return self.n_rows * self.n_cols

    @property
    def bounds(self) -> tuple[float, float, float, float]:
        """(xmin, ymin, xmax, ymax) of the whole grid."""
        s = self.cell_size
        return (self.x0, self.y0 - self.n_rows * s, self.x0 + self.n_cols * s, self.y0)

    def cell_of(
        self, x: np.ndarray | Sequence[float], y: np.ndarray | Sequence[float]
    ) -> np.ndarray:
        """Cell id of every point, -1 outside the grid (left/top edges belong to the cell)."""
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        col = np.floor((x - self.x0) / self.cell_size)
        row = np.floor((self.y0 - y) / self.cell_size)
        inside = (col >= 0) & (col < self.n_cols) & (row >= 0) & (row < self.n_rows)
        ids = np.where(inside, row * self.n_cols + col, -1)
        return np.nan_to_num(ids, nan=-1).astype(np.int64)

    def rows_cols(self, cell_id: np.ndarray | Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Row and column of each cell id."""
        ids = np.asarray(cell_id, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= self.n_cells):
            raise InvalidInputError(f"cell ids must lie in [0, {self.n_cells}); got out of range")
        return ids // self.n_cols, ids % self.n_cols

    def polygons(self, cell_id: np.ndarray | Sequence[int]) -> np.ndarray:
        """Square shapely polygons of the given cells (an array, built without a Python loop)."""
        row, col = self.rows_cols(cell_id)
        s = self.cell_size
        left = self.x0 + col * s
        top = self.y0 - row * s
        return shapely.box(left, top - s, left + s, top)

    def cells_in(self, region: shapely.Geometry) -> np.ndarray:
        """Ids of the cells that intersect ``region`` (a geometry in the grid CRS), sorted."""
        xmin, ymin, xmax, ymax = region.bounds
        s = self.cell_size
        c0 = max(math.floor((xmin - self.x0) / s), 0)
        c1 = min(math.ceil((xmax - self.x0) / s), self.n_cols)
        r0 = max(math.floor((self.y0 - ymax) / s), 0)
        r1 = min(math.ceil((self.y0 - ymin) / s), self.n_rows)
        if c1 <= c0 or r1 <= r0:
            return np.empty(0, dtype=np.int64)
        rows, cols = np.meshgrid(np.arange(r0, r1), np.arange(c0, c1), indexing="ij")
        ids = (rows * self.n_cols + cols).ravel()
        shapely.prepare(region)
        hit = shapely.intersects(region, self.polygons(ids))
        # Cells that merely touch the region along an edge hold none of it.
        edge = hit & shapely.touches(region, self.polygons(ids))
        return np.sort(ids[hit & ~edge])


def aggregate_checklists(
    cell_id: np.ndarray,
    detected: np.ndarray,
    duration_minutes: np.ndarray,
    distance_km: np.ndarray,
) -> pd.DataFrame:
    """Per-cell checklist counts, detections, label and effort totals.

    Parameters
    ----------
    cell_id : int array
        Cell of each checklist (-1 = outside the grid, ignored).
    detected : bool array
    duration_minutes, distance_km : float arrays
        NaN counts as 0 in the totals.

    Returns
    -------
    DataFrame indexed by ``cell_id`` (surveyed cells only, sorted) with ``n_checklists``,
    ``n_detections``, ``label`` (1 if any detection else 0), ``effort_hours``, ``effort_km``.

    Examples
    --------
    >>> a = aggregate_checklists(np.array([3, 3, 1]), np.array([False, True, False]),
    ...                          np.array([60.0, 30.0, 120.0]), np.array([1.0, np.nan, 0.5]))
    >>> a.loc[3].tolist(), a.loc[1].tolist()
    ([2.0, 1.0, 1.0, 1.5, 1.0], [1.0, 0.0, 0.0, 2.0, 0.5])
    """
    cell_id = np.asarray(cell_id, dtype=np.int64)
    keep = cell_id >= 0
    ids, inverse = np.unique(cell_id[keep], return_inverse=True)
    n = len(ids)
    det = np.asarray(detected, dtype=bool)[keep]
    hours = np.nan_to_num(np.asarray(duration_minutes, dtype=float)[keep]) / 60.0
    km = np.nan_to_num(np.asarray(distance_km, dtype=float)[keep])
    n_checklists = np.bincount(inverse, minlength=n)
    n_detections = np.bincount(inverse, weights=det, minlength=n).astype(np.int64)
    return pd.DataFrame(
        {
            "n_checklists": n_checklists.astype(np.int64),
            "n_detections": n_detections,
            "label": (n_detections > 0).astype(np.int64),
            "effort_hours": np.bincount(inverse, weights=hours, minlength=n),
            "effort_km": np.bincount(inverse, weights=km, minlength=n),
        },
        index=pd.Index(ids, name="cell_id"),
    )


def cell_locations(geometry: np.ndarray, crs: pyproj.CRS | str | int) -> pd.DataFrame:
    """Each cell's centroid in longitude/latitude (EPSG:4326) and its area in hectares.

    The centroid is taken in the cells' own CRS (the equal-area grid), then converted; the
    area is measured in that CRS, or on an equal-area projection (EPSG:6933) when the cells
    are in degrees.

    Parameters
    ----------
    geometry : numpy.ndarray of shapely geometries
    crs : pyproj.CRS, str or int
        The CRS of ``geometry``.

    Returns
    -------
    pandas.DataFrame
        ``longitude``, ``latitude`` (6 decimals, about 0.1 m) and ``area_ha``, one row per cell.

    Examples
    --------
    >>> cell_locations(np.array([shapely.box(0, 0, 1000, 1000)]), 6933).round(4).values.tolist()
    [[0.0052, 0.0039, 100.0]]
    """
    crs = pyproj.CRS.from_user_input(crs)
    centre = shapely.centroid(geometry)
    to_lonlat = pyproj.Transformer.from_crs(crs, 4326, always_xy=True)
    lon, lat = to_lonlat.transform(shapely.get_x(centre), shapely.get_y(centre))
    flat = geometry
    if crs.is_geographic:
        to_area = pyproj.Transformer.from_crs(crs, 6933, always_xy=True)
        flat = shapely.transform(geometry, lambda xy: np.column_stack(to_area.transform(*xy.T)))
    return pd.DataFrame(
        {
            "longitude": np.round(np.asarray(lon, dtype=np.float64), 6),
            "latitude": np.round(np.asarray(lat, dtype=np.float64), 6),
            "area_ha": shapely.area(flat) / 1e4,
        }
    )
