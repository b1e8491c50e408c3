"""Regenerate the embedded default region in ``data/default_region/`` from a seed.

Two parts, both deterministic (the same seed gives the same bytes):

1. **The real landscape** (public data, clipped to Georgia; see ``data/default_region/SOURCES.md``):
   MODIS MCD12Q1 UMD land cover of 2022, GMTED2010 1 km elevation, the Natural Earth polygon of
   Georgia and the four Chattahoochee-Oconee National Forest ranger districts. They are read from
   the shared bundle (``--source``), which is needed only to rebuild them; ``--simulate-only``
   keeps the shipped landscape and redraws the simulation.
2. **The simulation** (:func:`reserve.paper.simulate.simulate_region`): two virtual species (the
   Virtual Thrush, and the Virtual Quail drawn after it from its own random stream) and virtual
   birders written as gzipped EBD + SED in eBird's current column layout, and each species'
   true occupancy per cell in its own file (``truth.csv.gz``, ``truth_virtual_quail.csv.gz``;
   for evaluation only).

Run: ``python -m pipelines.default_region --seed 0 [--out DIR] [--source DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import pyogrio
import rasterio
import shapely
from rasterio.warp import transform_bounds
from rasterio.windows import from_bounds

from reserve.config import DEFAULT_REGION
from reserve.default_region import FILES
from reserve.errors import DataFileError, ReserveError
from reserve.paper.simulate import (
    LANDCOVER_CLASSES,
    BirderModel,
    SpeciesModel,
    simulate_region,
)

__all__ = ["FILES", "build", "build_landscape", "main"]

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "data" / "default_region"
DEFAULT_SOURCE = ROOT.parent / "shared" / "real" / "ebird-bcr27"

_LANDCOVER_YEAR = "2022"
_MARGIN_DEG = 0.1  # raster margin around Georgia's bounding box, so edge cells are covered
_DISTRICTS = ("blue_ridge", "chattooga_river", "conasauga", "oconee")


def _atomic_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _geojson(geoms: list[shapely.Geometry], props: list[dict[str, str]]) -> bytes:
    """A small, byte-stable GeoJSON FeatureCollection in EPSG:4326 (coordinates to 1e-6 deg)."""
    feats = []
    for geom, prop in zip(geoms, props, strict=True):
        g = json.loads(shapely.to_geojson(shapely.set_precision(geom, 1e-6)))
        feats.append({"type": "Feature", "properties": prop, "geometry": g})
    doc = {"type": "FeatureCollection", "features": feats}
    return (json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n").encode()


def _write_raster(path: Path, array: np.ndarray, profile: dict) -> None:
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.tif")
    try:
        with rasterio.open(tmp, "w", **profile) as dst:
            dst.write(array, 1)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def build_landscape(source: Path, out: Path) -> None:
    """Clip the public landscape layers of the shared bundle to Georgia and write them to ``out``.

    Parameters
    ----------
    source : Path
        The ``ebird-bcr27`` bundle (only its public, non-eBird files are read).
    out : Path
        Destination folder (created).
    """
    if not source.is_dir():
        raise DataFileError(
            f"source={str(source)!r} is not a folder; pass --source with the ebird-bcr27 bundle, "
            "or --simulate-only to keep the shipped landscape"
        )
    out.mkdir(parents=True, exist_ok=True)
    states = pyogrio.read_dataframe(
        source / "boundaries" / "gis-data_us-states.gpkg", layer="ne_states"
    )
    georgia = shapely.union_all(states.loc[states["state_code"] == "US-GA"].geometry.to_numpy())
    _atomic_bytes(
        out / FILES["region"], _geojson([georgia], [{"state": "Georgia", "state_code": "US-GA"}])
    )
    x0, y0, x1, y1 = georgia.bounds
    box = (x0 - _MARGIN_DEG, y0 - _MARGIN_DEG, x1 + _MARGIN_DEG, y1 + _MARGIN_DEG)

    geoms, props = [], []
    for name in _DISTRICTS:
        path = (
            source / "public_land" / "usfs_ranger_districts_ga" / f"{name}_ranger_district.geojson"
        )
        frame = pyogrio.read_dataframe(path).to_crs(4326)
        geoms.append(shapely.union_all(frame.geometry.to_numpy()))
        props.append(
            {
                "forest": str(frame["FORESTNAME"].iloc[0]),
                "district": str(frame["DISTRICTNA"].iloc[0]),
            }
        )
    _atomic_bytes(out / FILES["public"], _geojson(geoms, props))

    # Land cover: one year, as uint8 classes with 255 = no data (the source is float32, NaN).
    with rasterio.open(source / "landcover" / "landcover_mcd12q1_umd_us-ga_2014-2022.tif") as src:
        band = list(src.descriptions).index(_LANDCOVER_YEAR) + 1
        win = from_bounds(*transform_bounds("EPSG:4326", src.crs, *box), src.transform)
        win = win.round_offsets().round_lengths()
        win = win.intersection(rasterio.windows.Window(0, 0, src.width, src.height))
        values = src.read(band, window=win)
        lc = np.where(np.isfinite(values), values, 255).astype(np.uint8)
        profile = {
            "driver": "GTiff",
            "width": lc.shape[1],
            "height": lc.shape[0],
            "count": 1,
            "dtype": "uint8",
            "nodata": 255,
            "crs": src.crs,
            "transform": src.window_transform(win),
            "compress": "deflate",
            "predictor": 2,
        }
    _write_raster(out / FILES["landcover"], lc, profile)
    lines = ["class,name"] + [f"{k},{v}" for k, v in LANDCOVER_CLASSES.items()]
    _atomic_bytes(out / FILES["legend"], ("\n".join(lines) + "\n").encode())

    # Elevation: whole metres as int16 (the 1 km median needs no finer step), -32768 = no data.
    with rasterio.open(source / "elevation" / "elevation_gmted_1km_us-ga.tif") as src:
        win = from_bounds(*box, src.transform).round_offsets().round_lengths()
        win = win.intersection(rasterio.windows.Window(0, 0, src.width, src.height))
        values = src.read(1, window=win)
        elev = np.where(np.isfinite(values), np.round(values), -32768).astype(np.int16)
        profile = {
            "driver": "GTiff",
            "width": elev.shape[1],
            "height": elev.shape[0],
            "count": 1,
            "dtype": "int16",
            "nodata": -32768,
            "crs": src.crs,
            "transform": src.window_transform(win),
            "compress": "deflate",
            "predictor": 2,
        }
    _write_raster(out / FILES["elevation"], elev, profile)


def build(
    seed: int = DEFAULT_REGION.seed,
    out: Path = DEFAULT_OUT,
    *,
    source: Path | None = DEFAULT_SOURCE,
    species: SpeciesModel | None = None,
    birders: BirderModel | None = None,
) -> dict:
    """Write the default region for ``seed`` into ``out`` and return the simulation summary.

    Parameters
    ----------
    seed : int
        Seed of the simulation (the landscape does not depend on it).
    out : Path
        Destination folder.
    source : Path or None
        The shared bundle to clip the landscape from; ``None`` keeps the landscape already in
        ``out`` (it must be there).
    species, birders : optional
        Models of the simulation; defaults are the documented ones.

    Returns
    -------
    dict
        The summary also written to ``simulation.json``.
    """
    out = Path(out)
    if source is not None:
        build_landscape(Path(source), out)
    for key in ("landcover", "legend", "elevation", "region", "public"):
        if not (out / FILES[key]).is_file():
            raise DataFileError(
                f"{FILES[key]} is missing in {str(out)!r}; rebuild the landscape with --source"
            )
    return simulate_region(
        landcover=out / FILES["landcover"],
        legend=out / FILES["legend"],
        elevation=out / FILES["elevation"],
        region=out / FILES["region"],
        public=out / FILES["public"],
        ebd=out / FILES["ebd"],
        sed=out / FILES["sed"],
        truth=out / FILES["truth"],
        meta=out / FILES["meta"],
        second_truth=out / FILES["truth_virtual_quail"],
        seed=seed,
        species=species,
        birders=birders,
    )


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_REGION.seed)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument(
        "--simulate-only", action="store_true", help="keep the landscape already in --out"
    )
    args = parser.parse_args(argv)
    try:
        summary = build(args.seed, args.out, source=None if args.simulate_only else args.source)
    except ReserveError as exc:
        print(f"default_region: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary["counts"], indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
