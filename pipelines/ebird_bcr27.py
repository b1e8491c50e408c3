"""Turn the shared BCR 27 checklists back into an eBird EBD + SED pair, one state at a time.

The ``ebird-bcr27`` bundle (``../shared/real/ebird-bcr27``, not part of the project: eBird's
terms forbid redistributing it) holds real eBird checklists of BCR 27 for May-June 2017 and
2018 as the *zero-filled* tables of the eBird best-practices paper, not as the EBD + SED pair
that eBird's download gives and ``reserve ingest`` reads. This job rewrites the checklists of
one state as that pair (current column layout, tab-separated), and writes the state's outline
and its national-forest ranger districts (the bundle's public land) beside them, so the
README's walkthrough runs ``reserve ingest`` on real data exactly as on a fresh download.

The tables' pivot quirk (a checklist can take two rows) is collapsed as ``SOURCES.md`` says:
the species column's maximum per checklist; all-NA means an "X" count (detected).

Run: ``python -m pipelines.ebird_bcr27 --state US-MS --species "Wood Thrush" --out DIR``
(writes ``DIR/ebd.txt``, ``DIR/sed.txt``, ``DIR/region.gpkg`` and ``DIR/public.gpkg``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from reserve.errors import DataFileError, ReserveError
from reserve.io.atomic import atomic_target

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "real" / "ebird-bcr27"

#: The tables in the bundle (2018 and 2017 checklists).
TABLES = (
    "checklists/train_data_mayjune_201718_bcr27.txt",
    "checklists/test_data_2017_mayjune_201718_bcr27.txt",
)

#: Species columns of the tables: common name -> (column, scientific name).
SPECIES = {
    "Wood Thrush": ("woothr", "Hylocichla mustelina"),
    "Northern Bobwhite": ("norbob", "Colinus virginianus"),
    "White Ibis": ("whiibi", "Eudocimus albus"),
}

SED_HEADER = [
    "STATE CODE",
    "LOCALITY ID",
    "LATITUDE",
    "LONGITUDE",
    "OBSERVATION DATE",
    "TIME OBSERVATIONS STARTED",
    "OBSERVER ID",
    "SAMPLING EVENT IDENTIFIER",
    "PROTOCOL NAME",
    "DURATION MINUTES",
    "EFFORT DISTANCE KM",
    "NUMBER OBSERVERS",
    "ALL SPECIES REPORTED",
    "GROUP IDENTIFIER",
]
EBD_HEADER = ["CATEGORY", "COMMON NAME", "SCIENTIFIC NAME", "OBSERVATION COUNT", *SED_HEADER]


def _checklists(source: Path, state: str, column: str) -> pd.DataFrame:
    """One row per checklist of ``state``: the sampling fields and the species' count."""
    frames = []
    for rel in TABLES:
        path = source / rel
        if not path.is_file():
            raise DataFileError(
                f"{str(path)!r} not found; pass --source with the ebird-bcr27 bundle"
            )
        frames.append(pd.read_csv(path, sep=" ", quotechar='"', dtype={"checklist_id": str}))
    table = pd.concat(frames, ignore_index=True)
    table = table[table["state_code"] == state]
    if table.empty:
        raise DataFileError(f"no checklist of state {state!r} in the bundle; pass e.g. US-MS")
    by = table.groupby("checklist_id", sort=True)
    out = by.first().drop(columns=[column, "species_observed"])
    out["count"] = by[column].max()
    out["x"] = by[column].apply(lambda s: s.isna().all())
    return out.reset_index()


def _text(c: pd.DataFrame) -> pd.DataFrame:
    """The SED columns as text (start time from decimal hours back to HH:MM:SS)."""
    hours = c["time_observations_started"].fillna(0.0).to_numpy()
    minutes = np.clip(np.round(hours * 60).astype(np.int64), 0, 24 * 60 - 1)

    def opt(col: str, fmt: str) -> pd.Series:
        return c[col].map(lambda v: "" if pd.isna(v) else format(v, fmt))

    return pd.DataFrame(
        {
            "STATE CODE": c["state_code"],
            "LOCALITY ID": c["locality_id"],
            "LATITUDE": c["latitude"].map(repr),
            "LONGITUDE": c["longitude"].map(repr),
            "OBSERVATION DATE": c["observation_date"],
            "TIME OBSERVATIONS STARTED": [f"{m // 60:02d}:{m % 60:02d}:00" for m in minutes],
            "OBSERVER ID": c["observer_id"].str.split(",").str[0],
            "SAMPLING EVENT IDENTIFIER": c["sampling_event_identifier"].str.split(",").str[0],
            "PROTOCOL NAME": c["protocol_type"],
            "DURATION MINUTES": opt("duration_minutes", ".0f"),
            "EFFORT DISTANCE KM": opt("effort_distance_km", "g"),
            "NUMBER OBSERVERS": opt("number_observers", ".0f"),
            "ALL SPECIES REPORTED": np.where(c["all_species_reported"], "1", "0"),
            "GROUP IDENTIFIER": np.where(
                c["checklist_id"].str.startswith("G"), c["checklist_id"], ""
            ),
        }
    )


def _polygons(source: Path, state: str, folder: Path) -> None:
    """The state's outline and the ranger districts that overlap it, as two GeoPackages."""
    import geopandas as gpd

    states = gpd.read_file(source / "boundaries" / "gis-data_us-states.gpkg", layer="ne_states")
    outline = states[states["state_code"] == state]
    if outline.empty:
        raise DataFileError(f"no outline of state {state!r} in the bundle; pass e.g. US-MS")
    districts = sorted((source / "public_land" / "usfs_ranger_districts_bcr27").glob("*.geojson"))
    public = pd.concat([gpd.read_file(p).to_crs(outline.crs) for p in districts])
    public = public[public.intersects(outline.geometry.union_all())]
    for frame, name in ((outline, "region.gpkg"), (public, "public.gpkg")):
        path = folder / name
        tmp = atomic_target(path, ".gpkg")
        try:
            frame.reset_index(drop=True).to_file(tmp, driver="GPKG", layer=name[:-5])
            tmp.replace(path)
        finally:
            if tmp.exists():
                tmp.unlink()


def _write(frame: pd.DataFrame, path: Path) -> None:
    tmp = atomic_target(path, ".txt")
    try:
        frame.to_csv(tmp, sep="\t", index=False)
        tmp.replace(path)
    finally:
        if tmp.exists():
            tmp.unlink()


def rebuild(
    out: str | Path, state: str = "US-MS", species: str = "Wood Thrush", source: Path | None = None
) -> tuple[Path, Path, int]:
    """Write ``ebd.txt``, ``sed.txt``, ``region.gpkg`` and ``public.gpkg`` of one state.

    Parameters
    ----------
    out : path-like
        Folder to write into (created when missing).
    state : str
        eBird state code, e.g. ``"US-MS"``.
    species : str
        One of :data:`SPECIES`.
    source : Path, optional
        The ``ebird-bcr27`` bundle (default ``../shared/real/ebird-bcr27``).

    Returns
    -------
    (Path, Path, int)
        The EBD, the SED and the number of checklists of the state.
    """
    if species not in SPECIES:
        raise DataFileError(
            f"species {species!r} is not in the bundle; pass one of {list(SPECIES)}"
        )
    column, scientific = SPECIES[species]
    source = Path(source or DEFAULT_SOURCE)
    c = _checklists(source, state, column)
    sed = _text(c)
    seen = (c["x"] | (c["count"] > 0)).to_numpy()
    ebd = sed[seen].copy()
    ebd.insert(
        0,
        "OBSERVATION COUNT",
        np.where(c["x"][seen], "X", c["count"][seen].fillna(0).astype(int).astype(str)),
    )
    ebd.insert(0, "SCIENTIFIC NAME", scientific)
    ebd.insert(0, "COMMON NAME", species)
    ebd.insert(0, "CATEGORY", "species")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    _write(ebd[EBD_HEADER], folder / "ebd.txt")
    _write(sed[SED_HEADER], folder / "sed.txt")
    _polygons(source, state, folder)
    return folder / "ebd.txt", folder / "sed.txt", len(c)


def main(argv: list[str] | None = None) -> int:
    """Command line of :func:`rebuild`."""
    p = argparse.ArgumentParser(prog="python -m pipelines.ebird_bcr27", description=__doc__)
    p.add_argument("--out", required=True, help="folder for ebd.txt and sed.txt")
    p.add_argument("--state", default="US-MS", help="eBird state code (default US-MS)")
    p.add_argument("--species", default="Wood Thrush", help=f"one of {list(SPECIES)}")
    p.add_argument("--source", type=Path, default=None, help="the ebird-bcr27 bundle")
    args = p.parse_args(argv)
    try:
        ebd, sed, n = rebuild(args.out, args.state, args.species, args.source)
    except ReserveError as exc:
        print(f"reserve: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {ebd}, {sed} ({n} checklists of {args.state}), region.gpkg and public.gpkg")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
