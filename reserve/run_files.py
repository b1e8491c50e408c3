"""The files of one selection run: its inputs checked before any work, its outputs written.

:func:`reserve.select.run_selection` asks this module, in order: where the outputs go
(:func:`check_outputs`, nothing created yet), whether the map's public-land and outline files
exist (:func:`check_decoration`), which species the ingest recorded (:func:`ingest_species`),
the public land and region outline the ingest stored beside the cells (:func:`stored_polygons`),
and finally to write the GeoPackage and the map together (:func:`write_outputs`: both
replaced, or neither).
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reserve.errors import DataFileError, InvalidInputError, ReserveError
from reserve.export import prepare_outputs, write_ranking_csv, write_result
from reserve.io.atomic import write_failure, write_together
from reserve.report import summary_text

if TYPE_CHECKING:
    from reserve.config import SelectOptions
    from reserve.fork import Forked, Standby
    from reserve.result import SelectionResult

__all__ = [
    "check_decoration",
    "check_outputs",
    "default_region_cached",
    "ingest_species",
    "map_polygons",
    "one_species_options",
    "stored_polygons",
    "write_outputs",
]

#: The polygon layers ``reserve ingest`` writes beside ``planning_units``: public land, outline.
POLYGON_LAYERS = ("public_land", "region")


def ingest_species(path: Any) -> str:
    """The species ``reserve ingest`` recorded in the file's ``ingest_summary`` ('' if none).

    A multi-species ingest records ``"A; B"``; its ``label`` (what a run without
    ``--species`` selects for) is the first species'.

    Parameters
    ----------
    path : path-like
        A planning-units GeoPackage.

    Returns
    -------
    str
    """
    import pyogrio

    try:
        table = pyogrio.read_dataframe(path, layer="ingest_summary", columns=["item", "value"])
    except Exception:  # no such table (a hand-made file): the species is simply not named
        return ""
    hit = table.loc[table["item"] == "species", "value"]
    return str(hit.iloc[0]).split(";")[0].strip() if len(hit) else ""


def stored_polygons(path: Any) -> dict[str, Any]:
    """The public land and region outline stored in a cells file, in EPSG:4326.

    ``reserve ingest`` writes them as the layers ``public_land`` and ``region``
    (:data:`POLYGON_LAYERS`); a file written before, or by hand, has none, and the map is
    drawn without them. They only decorate the map, so an unreadable layer is left out too.

    Parameters
    ----------
    path : path-like
        A planning-units GeoPackage.

    Returns
    -------
    dict
        ``{"public": geometry, "outline": geometry}``, each only when stored.
    """
    import geopandas as gpd
    import pyogrio
    import shapely

    try:
        names = {str(n) for n, _ in pyogrio.list_layers(path)}
    except Exception:  # read as cells already; a failure here only costs the decoration
        return {}
    out = {}
    for key, layer in zip(("public", "outline"), POLYGON_LAYERS, strict=True):
        if layer not in names:
            continue
        try:
            frame = gpd.read_file(path, layer=layer, engine="pyogrio")
            geom = shapely.union_all(frame.to_crs(4326).geometry.to_numpy())
        except Exception:  # decoration: the map is drawn without it
            continue
        if not geom.is_empty:
            out[key] = geom
    return out


def map_polygons(cells_path: Path, public: Any, outline: Any) -> tuple[Any, Any, dict[str, str]]:
    """The map's public land and outline: the files given, else those stored in the cells file.

    Parameters
    ----------
    cells_path : Path
        The planning-units GeoPackage read.
    public, outline : path-like or None
        The files given (``public=``, ``outline=``; the default region's own).

    Returns
    -------
    public, outline : path-like, shapely geometry (EPSG:4326) or None
    drawn : dict
        Where each came from, for the run summary (``public``, ``outline``; '' when none).
    """
    given = {"public": public, "outline": outline}
    drawn = {k: "" if v is None else str(v) for k, v in given.items()}
    if public is None or outline is None:
        layers = dict(zip(("public", "outline"), POLYGON_LAYERS, strict=True))
        for key, geom in stored_polygons(cells_path).items():
            if given[key] is None:
                given[key] = geom
                drawn[key] = f"{cells_path} (layer {layers[key]})"
    return given["public"], given["outline"], drawn


def one_species_options(opts: SelectOptions, columns: Any, path: Any) -> SelectOptions:
    """``opts`` without ``species`` when it names the one species of a single-species ingest.

    A single-species ingest has ``label`` and no ``label__<species>`` columns; ``--species
    NAME`` then selects for ``label`` when NAME is the species the ingest recorded (compared
    as :func:`reserve.config.species_slug` does: case and punctuation aside).

    Parameters
    ----------
    opts : reserve.config.SelectOptions
    columns : sequence of str
        The planning units' columns.
    path : path-like
        The planning-units GeoPackage (its ``ingest_summary`` names the species).

    Returns
    -------
    reserve.config.SelectOptions

    Raises
    ------
    InvalidInputError
        One name that is not the ingest's species.
    """
    from dataclasses import replace

    from reserve.config import SPECIES_LABEL_PREFIX, species_slug

    several = any(str(c).startswith(SPECIES_LABEL_PREFIX) for c in columns)
    if opts.species is None or len(opts.species) != 1 or several:
        return opts
    recorded = ingest_species(path)
    if not recorded:  # not named by an ingest: the multi-species message says what is missing
        return opts
    if species_slug(opts.species[0]) != species_slug(recorded):
        raise InvalidInputError(
            f"--species {opts.species[0]!r}: the cells were ingested for one species, "
            f"{recorded!r} (column label); pass --species {recorded!r} or leave --species out"
        )
    return replace(opts, species=None)


def write_outputs(
    result: SelectionResult,
    say: Callable[[str], None],
    t0: float,
    public: Any,
    outline: Any,
    parallel: bool = False,
    drawer: Standby | None = None,
) -> None:
    """Write the map and the GeoPackage asked for, together (both replaced, or neither).

    Each goes to a temporary file beside its target (the map drawn in a forked child with
    ``parallel``, or in ``drawer``), and the renames happen only once both are complete
    (:func:`write_together`).

    Parameters
    ----------
    result : reserve.result.SelectionResult
        With ``gpkg_path``, ``map_path`` and ``csv_path`` set (``None``: not written).
    say : callable
        Progress messages.
    t0 : float
        ``time.perf_counter()`` at the start of the run (for ``runtime_seconds``).
    public, outline : path-like, shapely geometry (EPSG:4326) or None
        Polygons drawn on the map.
    parallel : bool, default=False
        Draw the map in a forked child while this process writes the GeoPackage
        (:func:`write_together`).
    drawer : reserve.fork.Standby or None, default=None
        A child forked earlier (:func:`reserve.fork.fork_standby`; ``reserve select`` forks
        it before importing the models) that has imported folium: it draws the map while
        this process writes the GeoPackage. The caller cancels it when done. If it can no
        longer be sent the map (it died), the map is drawn as without it.

    Raises
    ------
    DataFileError
        An output cannot be written; nothing was changed.
    """
    jobs: list[tuple[Any, str, Callable[[Path], object]]] = []
    result.summary["runtime_seconds"] = round(time.perf_counter() - t0, 3)
    if result.map_path is not None:
        from reserve.maps import write_page

        page = partial(
            write_page,
            summary=result.summary,
            main_features=result.main_features(),
            public=public,
            outline=outline,
        )

        def draw(tmp: Path) -> Forked | None:
            say(f"drawing the map {result.map_path}")
            drawing = _submit(drawer, page, tmp, result.planning_units)
            if drawing is None:
                page(tmp, result.planning_units)
            return drawing  # drawn and written there while the GeoPackage is written here

        jobs.append((result.map_path, ".html", draw))
    if result.csv_path is not None and result.ranking is not None:
        ranking = result.ranking
        jobs.insert(0, (result.csv_path, ".csv", lambda tmp: write_ranking_csv(ranking, tmp)))
    if result.summary_path is not None:
        text = summary_text(result.summary, result.selected)
        jobs.insert(
            0, (result.summary_path, ".txt", lambda tmp: tmp.write_text(text, encoding="utf-8"))
        )
    if result.gpkg_path is not None:

        def store(tmp: Path) -> None:
            say(f"writing {result.gpkg_path}")
            try:
                write_result(result, tmp, overwrite=True)
            except DataFileError as exc:  # named by the target, not its hidden temporary
                raise DataFileError(str(exc).replace(str(tmp), str(result.gpkg_path))) from None

        jobs.append((result.gpkg_path, ".gpkg", store))
    try:
        write_together(jobs, parallel=parallel and drawer is None)
    except ReserveError:
        raise
    except OSError as exc:
        where = Path(jobs[0][0]).parent if jobs else Path(".")
        raise DataFileError(
            f"cannot write the outputs {[str(t) for t, _, _ in jobs]} "
            f"({write_failure(exc, where)}); nothing was changed: pass a writable --out folder "
            "(and --map path) with free space"
        ) from None


def _submit(drawer: Standby | None, page: Callable, tmp: Path, units: Any) -> Forked | None:
    """``page(tmp, units)`` sent to ``drawer``; None without one, or when it cannot take it."""
    if drawer is None:
        return None
    try:
        return drawer.submit(page, tmp, units)
    except (OSError, pickle.PicklingError):  # the child has gone: the map is drawn as without
        return None


def check_outputs(opts: SelectOptions, cells_path: Path) -> tuple[Path | None, Path | None]:
    """``(gpkg_path, map_path)`` of the run, checked (none when ``opts.out`` is None).

    Parameters
    ----------
    opts : reserve.config.SelectOptions
    cells_path : Path
        The planning units read (an output may not replace them).

    Returns
    -------
    gpkg_path, map_path : Path or None

    Raises
    ------
    OutputExistsError, DataFileError, InvalidInputError
        As :func:`reserve.export.prepare_outputs`; ``--out`` would replace ``--cells``.
    """
    if opts.out is None:
        return None, None
    map_path = opts.map_path(cells_path)
    gpkg_path = prepare_outputs(opts.out, map_path, overwrite=opts.overwrite)
    if opts.cells is not None and gpkg_path.resolve() == cells_path.resolve():
        raise InvalidInputError(
            f"--out {str(opts.out)!r} would replace the --cells file {str(cells_path)!r} "
            "itself; pass another --out folder"
        )
    return gpkg_path, map_path


def default_region_cached() -> bool:
    """Whether the embedded region's planning units are already in the cache.

    Returns
    -------
    bool
    """
    try:
        from reserve.default_region import cache_key, default_cache_dir
    except ImportError:
        return False
    return (default_cache_dir() / f"default_region-{cache_key()[:16]}.gpkg").is_file()


def check_decoration(public: Any, outline: Any) -> None:
    """Refuse a missing public-land or outline file before any work (they are drawn last).

    Parameters
    ----------
    public, outline : path-like or None

    Raises
    ------
    InvalidInputError
        Not a path.
    DataFileError
        Not a file.
    """
    for name, path in (("public", public), ("outline", outline)):
        if path is None:
            continue
        if not isinstance(path, str | os.PathLike):
            raise InvalidInputError(f"{name} must be a path to a polygon file; received {path!r}")
        if not Path(path).is_file():
            raise DataFileError(f"{name}={str(path)!r} is not a file; pass a polygon file")
