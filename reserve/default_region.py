"""The embedded default region: real Georgia landscape, simulated species and birders.

``reserve select`` runs on this region when no ``--cells`` file is given, so it works on a fresh
machine with no download. The files live in ``data/default_region/`` (shipped inside the wheel
as ``reserve.data``): MODIS land cover, GMTED elevation, the Georgia outline and the
Chattahoochee-Oconee National Forest districts (public data, see ``SOURCES.md`` there), and a
simulated EBD + SED written by ``python -m pipelines.default_region``
(:mod:`reserve.paper.simulate`).

:func:`default_planning_units` ingests them once with :func:`reserve.ingest.ingest` (the
settings are in :data:`reserve.config.DEFAULT_REGION`) and caches the GeoPackage in a user
cache folder, keyed by a hash of the input files' bytes, the settings and the package version.
It labels both virtual species (``DEFAULT_REGION.species_all``): ``label`` is the first's
(the Virtual Thrush), and ``label__virtual_thrush`` / ``label__virtual_quail`` are each
species'. The species' true occupancy (:func:`default_truth_path`, one file per species) is
for evaluation only; nothing here reads it.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import os
from pathlib import Path

from reserve.config import DEFAULT_REGION, INGEST_DEFAULTS, PLANNING_UNIT_COLUMNS, species_slug
from reserve.errors import DataFileError, InvalidInputError

__all__ = [
    "FILES",
    "cache_key",
    "default_cache_dir",
    "default_data_dir",
    "default_planning_units",
    "default_public_land_path",
    "default_region_outline_path",
    "default_truth_path",
    "ingest_inputs",
]

#: File names inside ``data/default_region`` (written by ``pipelines/default_region.py``).
FILES = {
    "landcover": "landcover_mcd12q1_umd_us-ga_2022.tif",
    "legend": "landcover_mcd12q1_umd_classes.csv",
    "elevation": "elevation_gmted_1km_us-ga.tif",
    "region": "georgia.geojson",
    "public": "public_land_chattahoochee_oconee.geojson",
    "ebd": "ebd_us-ga_simulated.txt.gz",
    "sed": "sed_us-ga_simulated.txt.gz",
    "truth": "truth.csv.gz",
    "truth_virtual_quail": "truth_virtual_quail.csv.gz",
    "meta": "simulation.json",
}

#: Inputs of the ingest, in the order they enter the cache key (the truth is not one of them).
_INGEST_FILES = ("ebd", "sed", "landcover", "legend", "elevation", "region", "public")


def default_data_dir() -> Path:
    """Folder of the embedded default region (inside the installed package).

    ``RESERVE_DEFAULT_REGION_DIR`` overrides it (used by tests and to try a regenerated region).
    """
    override = os.environ.get("RESERVE_DEFAULT_REGION_DIR")
    if override:
        return Path(override)
    return Path(str(importlib.resources.files("reserve.data") / "default_region"))


def _path(key: str) -> Path:
    path = default_data_dir() / FILES[key]
    if not path.is_file():
        raise DataFileError(
            f"default-region file {str(path)!r} is missing; reinstall reserve or regenerate it "
            "with python -m pipelines.default_region --seed 0"
        )
    return path


def default_truth_path(species: str | None = None) -> Path:
    """A simulated species' true occupancy per cell; for evaluation only.

    Parameters
    ----------
    species : str, optional
        Common or scientific name of one of ``DEFAULT_REGION.species_all`` (any case);
        default the first, whose truth is ``truth.csv.gz``. The others' are
        ``truth_<slug>.csv.gz``.
    """
    if species is None:
        return _path("truth")
    names = zip(DEFAULT_REGION.species_all, DEFAULT_REGION.scientific_names_all, strict=True)
    for i, (common, scientific) in enumerate(names):
        if species_slug(species) in (species_slug(common), species_slug(scientific)):
            return _path("truth" if i == 0 else f"truth_{species_slug(common)}")
    raise InvalidInputError(
        f"species={species!r} is not a species of the default region; pass one of "
        f"{', '.join(map(repr, DEFAULT_REGION.species_all))} (or None for the first)"
    )


def default_public_land_path() -> Path:
    """Public-land polygons of the default region (GeoJSON, EPSG:4326), e.g. for a map."""
    return _path("public")


def default_region_outline_path() -> Path:
    """The Georgia outline (GeoJSON, EPSG:4326), e.g. for a map."""
    return _path("region")


def ingest_inputs() -> dict[str, Path]:
    """Paths of the files the default ingest reads (EBD, SED, rasters, legend, polygons)."""
    return {key: _path(key) for key in _INGEST_FILES}


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/reserve``, else ``~/.cache/reserve``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reserve"


def cache_key() -> str:
    """SHA-256 of the ingest inputs' bytes, the ingest settings and the package version.

    Examples
    --------
    >>> len(cache_key())
    64
    """
    import reserve

    digest = hashlib.sha256()
    settings = (
        reserve.__version__,
        # a changed ingest default or planning-units schema must not reuse an old cache
        INGEST_DEFAULTS,
        PLANNING_UNIT_COLUMNS,
        DEFAULT_REGION.species_all,
        DEFAULT_REGION.months,
        DEFAULT_REGION.cell_size,
    )
    digest.update(repr(settings).encode())
    for key, path in ingest_inputs().items():
        digest.update(f"\0{key}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def default_planning_units(
    cache_dir: str | os.PathLike[str] | None = None, *, overwrite: bool = False
) -> Path:
    """Ingest the default region once and return the cached ``planning_units`` GeoPackage.

    Parameters
    ----------
    cache_dir : path-like, optional
        Where to keep the GeoPackage; default :func:`default_cache_dir`. Created if needed.
    overwrite : bool
        Ingest again even when a cached file for the same inputs exists.

    Returns
    -------
    Path
        ``<cache_dir>/default_region-<key>.gpkg``; the key changes whenever an input file, the
        ingest settings or the package version changes. The file is written atomically.
    """
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / f"default_region-{cache_key()[:16]}.gpkg"
    if path.is_file() and not overwrite:
        return path
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataFileError(
            f"cache_dir={str(folder)!r} cannot be created ({exc.strerror}); pass a writable "
            "folder or set XDG_CACHE_HOME"
        ) from None
    from reserve.ingest import ingest  # heavy (geopandas, rasterio): only on a cache miss
    from reserve.io import ChecklistFilter

    files = ingest_inputs()
    ingest(
        files["ebd"],
        files["sed"],
        list(DEFAULT_REGION.species_all),
        path,
        region=files["region"],
        cell_size=DEFAULT_REGION.cell_size,
        categorical={"landcover": files["landcover"]},
        legend={"landcover": files["legend"]},
        continuous={"elevation": files["elevation"]},
        public=files["public"],
        filters=ChecklistFilter(months=list(DEFAULT_REGION.months)),
        overwrite=True,
    )
    return path
