"""Per-cell habitat features from rasters: class fractions and continuous mean / sd.

Zonal statistics are computed with exact cell coverage. In the grid's CRS, every raster pixel
and every cell is an axis-aligned rectangle, so the area a pixel shares with a cell is the
product of its overlap along x and along y. Summing pixel values weighted by that area is then
two sparse matrix products, ``Wy @ values @ Wx.T``, with no loop over cells. A raster in another
CRS is first reprojected (nearest neighbour for classes, bilinear for continuous values) onto a
pixel grid in the grid CRS whose pixels nest exactly in the cells, at about its native
resolution; that reprojection is the only approximation.

A cell that the raster covers only partly gets NaN features and a warning, never zeros computed
from the part that happens to be covered. Pixels equal to the raster's nodata value are left
out; a cell made only of nodata pixels gets NaN.

Examples
--------
>>> import numpy as np, rasterio, tempfile, pathlib
>>> from rasterio.transform import from_origin
>>> from reserve.grid import Grid
>>> g = Grid.covering((0, 1, 1999, 1000), cell_size=1000, crs="EPSG:6933")
>>> path = pathlib.Path(tempfile.mkdtemp()) / "lc.tif"
>>> with rasterio.open(path, "w", driver="GTiff", width=4, height=2, count=1, dtype="uint8",
...                    crs="EPSG:6933", transform=from_origin(0, 1000, 500, 500)) as dst:
...     dst.write(np.array([[1, 2, 2, 2], [1, 1, 2, 2]], dtype="uint8"), 1)
>>> f = categorical_fractions(g, [0, 1], path, "lc", legend={1: "Forest", 2: "Crop land"})
>>> list(f.columns), f.to_numpy().tolist()
(['lc_forest', 'lc_crop_land'], [[0.75, 0.25], [0.0, 1.0]])
"""

from __future__ import annotations

import csv
import math
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyproj
import rasterio
import scipy.sparse as sp
from rasterio.enums import Resampling
from rasterio.warp import calculate_default_transform, reproject, transform_bounds
from rasterio.windows import Window, from_bounds

from reserve.errors import DataFileError, InvalidInputError
from reserve.grid import Grid

__all__ = [
    "RasterLayer",
    "categorical_fractions",
    "continuous_stats",
    "feature_name",
    "habitat_features",
    "read_legend",
]

#: Pixels processed at once are bounded by cutting the cells into bands of rows.
MAX_BAND_PIXELS = 16_000_000


@dataclass(frozen=True)
class RasterLayer:
    """One raster to summarise per cell.

    Attributes
    ----------
    name : str
        Feature prefix (lower_snake is enforced on output).
    path : path-like
        Any raster GDAL reads, with a CRS.
    kind : {"categorical", "continuous"}
    legend : mapping or path, optional
        Class value to class name (categorical only); a CSV with a value column (``class``,
        ``value`` or ``code``) and a ``name`` column also works.
    band : int
        1-based band index.
    """

    name: str
    path: str | os.PathLike[str]
    kind: str = "categorical"
    legend: Mapping[int, str] | str | os.PathLike[str] | None = None
    band: int = 1


def _snake(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", str(text).strip().lower()).strip("_")


def feature_name(raster: str, label: str | int) -> str:
    """A lower_snake feature name from a raster name and a class or statistic name.

    Examples
    --------
    >>> feature_name("Land Cover", "Evergreen Needleleaf Forests")
    'land_cover_evergreen_needleleaf_forests'
    """
    return f"{_snake(raster)}_{_snake(str(label))}"


def read_legend(legend: Mapping[int, str] | str | os.PathLike[str]) -> dict[int, str]:
    """Class value -> class name, from a mapping or a CSV file.

    The CSV needs a header with a value column (``class``, ``value`` or ``code``) and a ``name``
    (or ``label``) column, like ``mcd12q1_umd_classes.csv``.
    """
    if isinstance(legend, Mapping):
        return {int(k): str(v) for k, v in legend.items()}
    path = Path(legend)
    if not path.is_file():
        raise DataFileError(f"legend file {str(path)!r} does not exist; pass a CSV class,name")
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise DataFileError(f"legend file {str(path)!r} is empty; it needs class,name rows")
    keys = {_snake(k): k for k in rows[0]}
    value_key = next((keys[k] for k in ("class", "value", "code") if k in keys), None)
    name_key = next((keys[k] for k in ("name", "label") if k in keys), None)
    if value_key is None or name_key is None:
        raise DataFileError(
            f"legend file {str(path)!r} has columns {list(rows[0])}; it needs a value column "
            "(class, value or code) and a name column (name or label)"
        )
    try:
        return {int(r[value_key]): r[name_key] for r in rows}
    except ValueError:
        raise DataFileError(
            f"legend file {str(path)!r}: column {value_key!r} must hold integer class values"
        ) from None


def _overlap(
    pix_start: float, pix_size: float, n_pix: int, cell_start: float, s: float, n_cells: int
) -> sp.csr_array:
    """Lengths shared by 1-D pixels and 1-D cells, as a sparse (n_cells, n_pix) matrix.

    Pixel ``p`` spans ``[pix_start + p * pix_size, pix_start + (p + 1) * pix_size]`` and cell
    ``j`` spans ``[cell_start + j * s, cell_start + (j + 1) * s]``.
    """
    lo = pix_start + pix_size * np.arange(n_pix)
    hi = lo + pix_size
    first = np.floor((lo - cell_start) / s).astype(np.int64)
    last = np.ceil((hi - cell_start) / s).astype(np.int64) - 1
    first = np.clip(first, 0, n_cells)
    last = np.clip(last, -1, n_cells - 1)
    span = np.maximum(last - first + 1, 0)
    pix = np.repeat(np.arange(n_pix), span)
    offsets = np.arange(span.sum()) - np.repeat(np.cumsum(span) - span, span)
    cell = np.repeat(first, span) + offsets
    c_lo = cell_start + cell * s
    length = np.minimum(hi[pix], c_lo + s) - np.maximum(lo[pix], c_lo)
    keep = length > 0
    return sp.csr_array(
        (length[keep], (cell[keep], pix[keep])), shape=(n_cells, n_pix), dtype=np.float64
    )


def _zonal_sum(wy: sp.csr_array, values: np.ndarray, wx: sp.csr_array) -> np.ndarray:
    """``wy @ values @ wx.T`` for a dense 2-D ``values``."""
    left = wy @ values.astype(np.float64, copy=False)
    return (wx @ left.T).T


@dataclass
class _Band:
    """Pixels of one raster over a rectangle of cells, in the grid CRS, with overlap weights."""

    values: np.ndarray  # 2-D, float64, NaN where nodata
    footprint: np.ndarray  # 2-D bool, True where the raster exists
    wy: sp.csr_array
    wx: sp.csr_array


def _crs_of(src: rasterio.io.DatasetReader, path: Path) -> pyproj.CRS:
    if src.crs is None:
        raise DataFileError(
            f"raster {str(path)!r} has no CRS, so it cannot be placed on the grid. Fix: assign "
            "one, e.g. gdal_edit.py -a_srs EPSG:4326 FILE (use the CRS it was made in)"
        )
    return pyproj.CRS.from_user_input(src.crs.to_wkt())


def _band_pixels(
    src: rasterio.io.DatasetReader,
    band: int,
    src_crs: pyproj.CRS,
    grid: Grid,
    rows: tuple[int, int],
    cols: tuple[int, int],
    resampling: Resampling,
) -> _Band:
    s = grid.cell_size
    n_r, n_c = rows[1] - rows[0], cols[1] - cols[0]
    left = grid.x0 + cols[0] * s
    top = grid.y0 - rows[0] * s
    nodata = src.nodatavals[band - 1]
    same = src_crs == grid.crs and src.transform.b == 0 and src.transform.d == 0
    if same:
        a, e = src.transform.a, src.transform.e
        win = from_bounds(left, top - n_r * s, left + n_c * s, top, transform=src.transform)
        win = _clip(win, src)
        data = src.read(band, window=win).astype(np.float64)
        transform = src.window_transform(win)
        footprint = np.ones(data.shape, dtype=bool)
    else:
        native = calculate_default_transform(
            src.crs, grid.crs.to_wkt(), src.width, src.height, *src.bounds
        )[0].a
        k = max(math.ceil(s / abs(native)), 1)
        k = min(k, 64)
        res = s / k
        shape = (n_r * k, n_c * k)
        transform = rasterio.transform.from_origin(left, top, res, res)
        sb = transform_bounds(
            grid.crs.to_wkt(), src.crs, left, top - n_r * s, left + n_c * s, top, densify_pts=51
        )
        win = from_bounds(*sb, transform=src.transform)
        # a margin of 2 source pixels, so resampling at the edges sees real neighbours
        win = _clip(Window(win.col_off - 2, win.row_off - 2, win.width + 4, win.height + 4), src)
        data = np.full(shape, np.nan)
        footprint = np.zeros(shape, dtype=np.uint8)
        if win.width > 0 and win.height > 0:
            raw = src.read(band, window=win).astype(np.float64)
            if nodata is not None:
                raw[raw == nodata] = np.nan
            wt = src.window_transform(win)
            reproject(
                raw,
                data,
                src_transform=wt,
                src_crs=src.crs,
                dst_transform=transform,
                dst_crs=grid.crs.to_wkt(),
                src_nodata=np.nan,
                dst_nodata=np.nan,
                resampling=resampling,
            )
            reproject(
                np.ones(raw.shape, dtype=np.uint8),
                footprint,
                src_transform=wt,
                src_crs=src.crs,
                dst_transform=transform,
                dst_crs=grid.crs.to_wkt(),
                src_nodata=0,
                dst_nodata=0,
                resampling=Resampling.nearest,
            )
        footprint = footprint.astype(bool)
        nodata = None  # already NaN
    if nodata is not None:
        data[data == nodata] = np.nan
    a, e = transform.a, transform.e
    if data.size == 0:
        wx = sp.csr_array((n_c, 0))
        wy = sp.csr_array((n_r, 0))
    else:
        wx = _overlap(transform.c, a, data.shape[1], left, s, n_c)
        # rows: distance below the band's top edge
        wy = _overlap(top - transform.f, -e, data.shape[0], 0.0, s, n_r)
    return _Band(data, footprint, wy, wx)


def _clip(win: Window, src: rasterio.io.DatasetReader) -> Window:
    """The whole pixels touched by a fractional window, clipped to the dataset."""
    c0 = max(math.floor(win.col_off), 0)
    r0 = max(math.floor(win.row_off), 0)
    c1 = min(math.ceil(win.col_off + win.width), src.width)
    r1 = min(math.ceil(win.row_off + win.height), src.height)
    return Window(c0, r0, max(c1 - c0, 0), max(r1 - r0, 0))


def _bands(grid: Grid, cell_ids: np.ndarray, pixels_per_cell: float) -> list[tuple]:
    """Split the cells' bounding rows into bands of at most ``MAX_BAND_PIXELS`` pixels."""
    rows, cols = grid.rows_cols(cell_ids)
    c0, c1 = int(cols.min()), int(cols.max()) + 1
    r0, r1 = int(rows.min()), int(rows.max()) + 1
    per_row = max((c1 - c0) * pixels_per_cell, 1.0)
    step = max(int(MAX_BAND_PIXELS // per_row), 1)
    return [((r, min(r + step, r1)), (c0, c1)) for r in range(r0, r1, step)]


def _summarise(
    grid: Grid,
    cell_ids: np.ndarray,
    layer: RasterLayer,
    reducer,
    resampling: Resampling,
) -> pd.DataFrame:
    path = Path(layer.path)
    if not path.is_file():
        raise DataFileError(f"raster {str(path)!r} (layer {layer.name!r}) does not exist")
    cell_ids = np.asarray(cell_ids, dtype=np.int64)
    if cell_ids.size == 0:
        raise InvalidInputError("cell_ids is empty; the region holds no cell")
    try:
        src = rasterio.open(path)
    except rasterio.errors.RasterioIOError as exc:
        raise DataFileError(f"raster {str(path)!r} cannot be read by GDAL ({exc})") from None
    with src:
        if not 1 <= layer.band <= src.count:
            raise InvalidInputError(
                f"band={layer.band} for raster {str(path)!r}, which has {src.count} band(s)"
            )
        src_crs = _crs_of(src, path)
        native = abs(
            calculate_default_transform(
                src.crs, grid.crs.to_wkt(), src.width, src.height, *src.bounds
            )[0].a
        )
        per_cell = max(grid.cell_size / native, 1.0) ** 2 * 2
        rows_all, cols_all = grid.rows_cols(cell_ids)
        frames = []
        for (r0, r1), (c0, c1) in _bands(grid, cell_ids, per_cell):
            band = _band_pixels(src, layer.band, src_crs, grid, (r0, r1), (c0, c1), resampling)
            coverage = _zonal_sum(band.wy, band.footprint, band.wx) / grid.cell_size**2
            valid = band.footprint & np.isfinite(band.values)
            stats = reducer(band, valid)
            pick = (rows_all >= r0) & (rows_all < r1)
            rr, cc = rows_all[pick] - r0, cols_all[pick] - c0
            frame = pd.DataFrame(
                {name: grid_values[rr, cc] for name, grid_values in stats.items()},
                index=pd.Index(cell_ids[pick], name="cell_id"),
            )
            frame["_coverage"] = coverage[rr, cc]
            frames.append(frame)
    out = pd.concat(frames).loc[cell_ids]
    coverage = out.pop("_coverage").to_numpy()
    if not np.any(coverage > 1e-9):
        raise DataFileError(
            f"raster {str(path)!r} (layer {layer.name!r}) does not overlap the region at all "
            f"(raster bounds {tuple(round(b, 3) for b in src.bounds)} in {src.crs}). Fix: pass a "
            "raster that covers the region, or a region inside the raster"
        )
    partial = coverage < 1 - 1e-6
    if partial.any():
        warnings.warn(
            f"raster {path.name!r} (layer {layer.name!r}) does not fully cover "
            f"{int(partial.sum())} of {len(coverage)} cells (they lie partly or wholly outside "
            f"it); their {layer.name} features are NaN",
            UserWarning,
            stacklevel=3,
        )
        out.loc[partial] = np.nan
    return out


def categorical_fractions(
    grid: Grid,
    cell_ids: Sequence[int] | np.ndarray,
    path: str | os.PathLike[str],
    name: str,
    legend: Mapping[int, str] | str | os.PathLike[str] | None = None,
    band: int = 1,
) -> pd.DataFrame:
    """Fraction of each cell's area in every class of a categorical raster.

    Parameters
    ----------
    grid : Grid
    cell_ids : int array
    path : path-like
        Raster with integer classes and a CRS.
    name : str
        Feature prefix.
    legend : mapping or CSV path, optional
        Class names; without one, the classes found are named ``class_<value>``. With one,
        every class of the legend but the nodata value gets a column, found or not.
    band : int

    Returns
    -------
    DataFrame indexed by ``cell_id``: one float column per class, ``<name>_<class name>``;
    fractions of the cell area with valid (non-nodata) pixels, summing to 1.
    """
    layer = RasterLayer(name, path, "categorical", legend, band)
    names = read_legend(legend) if legend is not None else None

    def reduce(b: _Band, valid: np.ndarray) -> dict[str, np.ndarray]:
        area = _zonal_sum(b.wy, valid, b.wx)
        found = np.unique(b.values[valid]).astype(np.int64)
        classes = sorted(names) if names is not None else found.tolist()
        out = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            for value in classes:
                label = names[value] if names is not None else f"class_{value}"
                if value in found:
                    part = _zonal_sum(b.wy, valid & (b.values == value), b.wx) / area
                else:
                    part = np.where(area > 0, 0.0, np.nan)
                out[feature_name(name, label)] = part
        return out

    if names is not None:
        nodata = _nodata(Path(path), band)
        names = {k: v for k, v in names.items() if k != nodata}
    frame = _summarise(grid, np.asarray(cell_ids), layer, reduce, Resampling.nearest)
    if names is None:
        # Bands of rows may find different classes: a class absent from a band is 0 there.
        frame = frame.fillna({c: 0.0 for c in frame.columns}).where(
            frame.notna().any(axis=1), np.nan, axis=0
        )
        frame = frame[sorted(frame.columns, key=lambda c: int(c.rsplit("_", 1)[1]))]
    return frame


def _nodata(path: Path, band: int) -> float | None:
    if not path.is_file():
        raise DataFileError(f"raster {str(path)!r} does not exist; check the path")
    try:
        with rasterio.open(path) as src:
            return src.nodatavals[band - 1] if 1 <= band <= src.count else None
    except rasterio.errors.RasterioIOError as exc:
        raise DataFileError(f"raster {str(path)!r} cannot be read by GDAL ({exc})") from None


def continuous_stats(
    grid: Grid,
    cell_ids: Sequence[int] | np.ndarray,
    path: str | os.PathLike[str],
    name: str,
    band: int = 1,
) -> pd.DataFrame:
    """Area-weighted mean and standard deviation of a continuous raster in every cell.

    Returns
    -------
    DataFrame indexed by ``cell_id`` with ``<name>_mean`` and ``<name>_sd`` (population sd over
    the cell's valid area).
    """
    layer = RasterLayer(name, path, "continuous", None, band)

    def reduce(b: _Band, valid: np.ndarray) -> dict[str, np.ndarray]:
        area = _zonal_sum(b.wy, valid, b.wx)
        ref = float(np.nanmean(b.values[valid])) if valid.any() else 0.0
        v = np.where(valid, b.values - ref, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            m1 = _zonal_sum(b.wy, v, b.wx) / area
            m2 = _zonal_sum(b.wy, v * v, b.wx) / area
        return {
            feature_name(name, "mean"): m1 + ref,
            feature_name(name, "sd"): np.sqrt(np.maximum(m2 - m1 * m1, 0.0)),
        }

    return _summarise(grid, np.asarray(cell_ids), layer, reduce, Resampling.bilinear)


def habitat_features(
    grid: Grid, cell_ids: Sequence[int] | np.ndarray, layers: Sequence[RasterLayer]
) -> pd.DataFrame:
    """All features of all rasters for the given cells, one column per feature.

    Raises
    ------
    InvalidInputError
        When two layers produce the same feature name or a kind is unknown.
    """
    cell_ids = np.asarray(cell_ids, dtype=np.int64)
    frames = [pd.DataFrame(index=pd.Index(cell_ids, name="cell_id"))]
    for layer in layers:
        if layer.kind == "categorical":
            frames.append(
                categorical_fractions(
                    grid, cell_ids, layer.path, layer.name, layer.legend, layer.band
                )
            )
        elif layer.kind == "continuous":
            frames.append(continuous_stats(grid, cell_ids, layer.path, layer.name, layer.band))
        else:
            raise InvalidInputError(
                f"raster layer {layer.name!r} has kind={layer.kind!r}; use 'categorical' or "
                "'continuous'"
            )
    out = pd.concat(frames, axis=1)
    dup = out.columns[out.columns.duplicated()].tolist()
    if dup:
        raise InvalidInputError(f"feature names {dup} repeat; give each raster a distinct name")
    return out.astype(np.float64)
