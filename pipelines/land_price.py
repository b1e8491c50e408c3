"""A synthetic land-price surface for the default region, for money budgets (``--cost-column``).

No public parcel-price data covers Georgia cell by cell, so this job prices every planning
unit with a documented, deterministic surface. It is a stand-in for a planner's own cost
column (assessor values, easement quotes), not an estimate of real prices.

Price of a cell, in million USD (a 3 km cell is 900 ha)::

    price = base * (1 + near * exp(-d / scale)) * (1 + crop * f_crop) * exp(noise * e)

* ``d``: distance (km) from the cell's centre to the nearest *developed* cell, one whose
  urban and built-up fraction exceeds ``developed`` (land is dearer near towns and cities);
* ``f_crop``: the cell's cropland fraction (cleared farmland sells above woodland);
* ``e``: a standard normal draw per cell from ``numpy.random.default_rng(seed)`` in
  ``cell_id`` order (parcel-to-parcel variation).

With the defaults a remote wooded cell costs about 2 (M USD), a cell next to a city about 10.

Run: ``python -m pipelines.land_price [--seed 0] [--out results/georgia_priced.gpkg]
[--overwrite]`` writes the embedded region's ``planning_units`` with a ``land_price`` column;
then ``reserve select --cells results/georgia_priced.gpkg --cost-column land_price
--budget 150``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import geopandas as gpd
import numpy as np
import pyogrio
from scipy.spatial import cKDTree

from reserve.errors import DataFileError, OutputExistsError, ReserveError

__all__ = ["PRICE_COLUMN", "land_price", "main", "priced_cells"]

#: Name of the price column written by :func:`priced_cells`.
PRICE_COLUMN = "land_price"

_URBAN = "landcover_urban_and_built_up_lands"
_CROP = "landcover_croplands"


def land_price(
    units: gpd.GeoDataFrame,
    seed: int = 0,
    *,
    base: float = 2.0,
    near: float = 4.0,
    scale_km: float = 15.0,
    crop: float = 0.5,
    noise: float = 0.25,
    developed: float = 0.2,
) -> np.ndarray:
    """Price of every planning unit (million USD) on the surface described in the module.

    Parameters
    ----------
    units : geopandas.GeoDataFrame
        ``planning_units`` of the default region (projected, metres), with the columns
        ``cell_id``, ``landcover_urban_and_built_up_lands`` and ``landcover_croplands``.
    seed : int
        Seed of the parcel-to-parcel noise.
    base, near, scale_km, crop, noise, developed : float
        The surface's constants (see the module docstring).

    Returns
    -------
    ndarray of shape (len(units),)
        Positive, finite prices, in the rows' order.

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> u = gpd.GeoDataFrame({"cell_id": [0, 1], _URBAN: [1.0, 0.0], _CROP: [0.0, 0.0]},
    ...                      geometry=[shapely.box(0, 0, 1, 1), shapely.box(90e3, 0, 90001, 1)],
    ...                      crs=5070)
    >>> p = land_price(u, noise=0.0)
    >>> [round(float(v), 3) for v in p]
    [10.0, 2.02]
    """
    missing = [c for c in ("cell_id", _URBAN, _CROP) if c not in units.columns]
    if missing:
        raise DataFileError(
            f"planning_units lacks {missing}; price the embedded region's cells (ingested with "
            "the MODIS land-cover legend)"
        )
    if units.crs is None or not units.crs.is_projected:
        raise DataFileError(
            "planning_units must be in a projected CRS (metres) to measure distances"
        )
    centre = units.geometry.centroid
    xy = np.column_stack([centre.x.to_numpy(), centre.y.to_numpy()])
    urban = np.nan_to_num(units[_URBAN].to_numpy(dtype=np.float64))
    dev = urban > developed
    if dev.any():
        dist_km = cKDTree(xy[dev]).query(xy)[0] / 1000.0
    else:  # no town at all: every cell is remote
        dist_km = np.full(len(units), np.inf)
    f_crop = np.nan_to_num(units[_CROP].to_numpy(dtype=np.float64))
    # the noise follows cell_id, not the row order, so a reordered table gets the same prices
    order = np.argsort(units["cell_id"].to_numpy(), kind="stable")
    e = np.empty(len(units))
    e[order] = np.random.default_rng(seed).standard_normal(len(units))
    price = base * (1 + near * np.exp(-dist_km / scale_km)) * (1 + crop * f_crop)
    return price * np.exp(noise * e)


def priced_cells(
    cells: str | os.PathLike[str],
    out: str | os.PathLike[str],
    seed: int = 0,
    *,
    overwrite: bool = False,
) -> Path:
    """Write ``cells``' ``planning_units`` with a :data:`PRICE_COLUMN` column to ``out``.

    The GeoPackage is written to a temporary file beside ``out`` and renamed.
    """
    target = Path(out)
    if target.exists() and not overwrite:
        raise OutputExistsError(f"output {str(target)!r} already exists; pass --overwrite")
    units = pyogrio.read_dataframe(cells, layer="planning_units")
    units[PRICE_COLUMN] = np.round(land_price(units, seed), 4)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.stem}.{os.getpid()}.tmp.gpkg")
    try:
        pyogrio.write_dataframe(units, tmp, layer="planning_units", driver="GPKG")
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    return target


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cells", help="planning_units GeoPackage (default: the embedded region)")
    parser.add_argument("--out", default="results/georgia_priced.gpkg")
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    try:
        cells = args.cells
        if cells is None:
            from reserve.default_region import default_planning_units

            cells = default_planning_units()
        path = priced_cells(cells, args.out, args.seed, overwrite=args.overwrite)
    except ReserveError as exc:
        print(f"land_price: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path} (column {PRICE_COLUMN}, million USD per cell)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
