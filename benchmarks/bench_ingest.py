"""Benchmark ``reserve.ingest.ingest``: a synthetic 10-million-row EBD, and a real BCR 27 run.

Usage::

    .venv/bin/python benchmarks/bench_ingest.py synthetic --rows 10000000 [--engine local]
    .venv/bin/python benchmarks/bench_ingest.py real

``synthetic`` writes (once, cached under ``$RESERVE_BENCH_DIR``, default
``/tmp/reserve-bench``) an EBD of ``--rows`` rows in the current 52-column layout, about 20
species per checklist, and the matching SED, plus a land-cover raster and a public-land
polygon, then runs the whole ingest in a *fresh* child process and prints wall time, rows per
second and the child's peak resident memory (``ru_maxrss``). It prints figures; it asserts
nothing about timings.

``real`` converts the zero-filled BCR 27 checklists of ``../shared/real/ebird-bcr27``
(Wood Thrush, May-June 2018) back into an EBD + SED pair in a temporary folder (eBird data is
never written inside the project), then ingests them with the BCR 27 polygon, MODIS 2018 land
cover and the national-forest ranger districts as public land, and prints the role counts.

The printed figures of both, with their commands, are kept in
``benchmarks/results/ingest.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "real" / "ebird-bcr27"
BENCH_DIR = Path(os.environ.get("RESERVE_BENCH_DIR", "/tmp/reserve-bench"))

SED_HEADER = (
    "LAST EDITED DATE|COUNTRY|COUNTRY CODE|STATE|STATE CODE|COUNTY|COUNTY CODE|IBA CODE|BCR CODE|"
    "USFWS CODE|ATLAS BLOCK|LOCALITY|LOCALITY ID|LOCALITY TYPE|LATITUDE|LONGITUDE|"
    "OBSERVATION DATE|TIME OBSERVATIONS STARTED|OBSERVER ID|OBSERVER ORCID ID|"
    "SAMPLING EVENT IDENTIFIER|OBSERVATION TYPE|PROTOCOL NAME|PROTOCOL CODE|PROJECT NAMES|"
    "PROJECT IDENTIFIERS|DURATION MINUTES|EFFORT DISTANCE KM|EFFORT AREA HA|NUMBER OBSERVERS|"
    "ALL SPECIES REPORTED|GROUP IDENTIFIER|CHECKLIST COMMENTS"
).split("|")
EBD_SPECIES_HEADER = (
    "GLOBAL UNIQUE IDENTIFIER|LAST EDITED DATE|TAXONOMIC ORDER|CATEGORY|TAXON CONCEPT ID|"
    "COMMON NAME|SCIENTIFIC NAME|SUBSPECIES COMMON NAME|SUBSPECIES SCIENTIFIC NAME|EXOTIC CODE|"
    "OBSERVATION COUNT|BREEDING CODE|BREEDING CATEGORY|BEHAVIOR CODE|AGE/SEX"
).split("|")
# The EBD repeats the checklist columns after the species columns (minus LAST EDITED DATE),
# then HAS MEDIA, APPROVED, REVIEWED, REASON, CHECKLIST COMMENTS, SPECIES COMMENTS.
EBD_CHECKLIST_HEADER = [h for h in SED_HEADER[1:] if h != "CHECKLIST COMMENTS"]
EBD_TAIL_HEADER = ["HAS MEDIA", "APPROVED", "REVIEWED", "REASON"]
EBD_HEADER = (
    EBD_SPECIES_HEADER
    + EBD_CHECKLIST_HEADER
    + EBD_TAIL_HEADER
    + ["CHECKLIST COMMENTS", "SPECIES COMMENTS"]
)

REGION = (-85.0, 31.0, -81.0, 35.0)  # lon/lat box, Georgia-sized
SPECIES_PER_CHECKLIST = 20


def _checklist_fields(rng: np.random.Generator, n: int) -> tuple[list[str], list[str]]:
    """Text of the checklist columns for the SED and for the EBD, one string per checklist."""
    lon = rng.uniform(REGION[0], REGION[2], n)
    lat = rng.uniform(REGION[1], REGION[3], n)
    day = rng.integers(0, 365 * 3, n)
    dates = (np.datetime64("2016-01-01") + day).astype(str)
    protocol = rng.choice(
        ["Traveling", "Stationary", "Incidental", "Area"], n, p=[0.55, 0.3, 0.1, 0.05]
    )
    minutes = rng.integers(1, 480, n)
    km = np.round(rng.exponential(2.5, n), 3)
    observers = rng.integers(1, 14, n)
    complete = (rng.random(n) < 0.85).astype(int)
    group = np.where(rng.random(n) < 0.05, rng.integers(1, n // 10 + 2, n), 0)
    sed, ebd = [], []
    for i in range(n):
        travel = protocol[i] == "Traveling"
        code = {"Traveling": "P22", "Stationary": "P21", "Incidental": "P20", "Area": "P23"}
        g = f"G{group[i]}" if group[i] else ""
        common = (
            f"United States\tUS\tGeorgia\tUS-GA\tFulton\tUS-GA-121\t\t27\t\t\t"
            f"Loc {i % 99991} road side park\tL{1000000 + i % 99991}\tH\t"
            f"{lat[i]:.7f}\t{lon[i]:.7f}\t{dates[i]}\t07:{i % 60:02d}:00\tobsr{i % 50021}\t\t"
            f"S{10000000 + i}\t{protocol[i]}\t{protocol[i]}\t{code[protocol[i]]}\t"
            f"eBird - Checklist Data\tEBIRD\t{minutes[i]}\t{km[i] if travel else ''}\t\t"
            f"{observers[i]}\t{complete[i]}\t{g}"
        )
        sed.append(f"2023-01-0{1 + i % 9} 10:11:12.123456\t{common}\t\t")
        ebd.append(common)
    return sed, ebd


def write_synthetic(n_rows: int, folder: Path, seed: int = 0) -> dict[str, Path]:
    """Write the synthetic EBD, SED, raster and polygon once; return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "ebd": folder / f"ebd_{n_rows}.txt",
        "sed": folder / f"sed_{n_rows}.txt",
        "lc": folder / "landcover.tif",
        "public": folder / "public.gpkg",
    }
    if all(p.exists() for p in paths.values()):
        return paths
    rng = np.random.default_rng(seed)
    n_check = max(n_rows // SPECIES_PER_CHECKLIST, 1)
    t0 = time.perf_counter()
    sed_text, ebd_check = _checklist_fields(rng, n_check)
    with open(paths["sed"], "w") as f:
        f.write("\t".join(SED_HEADER) + "\t\n")
        f.writelines(line + "\n" for line in sed_text)
    del sed_text
    names = [("Wood Thrush", "Hylocichla mustelina")] + [
        (f"Synthetic Bird {k}", f"Genus{k} epithet{k}") for k in range(1, 400)
    ]
    species_part = [
        f"{1000 + k}\t{'issf' if k % 37 == 5 else 'species'}\tavibase-{k:08X}\t{c}\t{s}\t\t\t\t"
        for k, (c, s) in enumerate(names)
    ]
    per = SPECIES_PER_CHECKLIST
    with open(paths["ebd"], "w") as f:
        f.write("\t".join(EBD_HEADER) + "\n")
        block = 200_000
        for start in range(0, n_rows, block):
            idx = np.arange(start, min(start + block, n_rows))
            check = np.minimum(idx // per, n_check - 1)
            # species: the target on ~6% of checklists, otherwise popular birds more often
            sp = 1 + (rng.zipf(1.3, len(idx)) % 399)
            sp[(idx % per == 0) & (rng.random(len(idx)) < 0.06)] = 0
            count = rng.integers(1, 30, len(idx)).astype(str)
            count[rng.random(len(idx)) < 0.03] = "X"
            f.writelines(
                f"URN:CornellLabOfOrnithology:EBIRD:OBS{i}\t2023-02-03 04:05:06\t"
                f"{species_part[s]}{c}\t\t\t\t\t{ebd_check[k]}\t0\t1\t0\t\t\t\n"
                for i, s, c, k in zip(
                    idx.tolist(), sp.tolist(), count.tolist(), check.tolist(), strict=True
                )
            )
    _write_raster_and_polygon(paths["lc"], paths["public"], rng)
    print(f"wrote synthetic inputs in {time.perf_counter() - t0:.1f} s to {folder}", flush=True)
    return paths


def _write_raster_and_polygon(lc: Path, public: Path, rng: np.random.Generator) -> None:
    import geopandas as gpd
    import rasterio
    import shapely
    from rasterio.transform import from_origin

    res = 0.005  # about 500 m
    w = int((REGION[2] - REGION[0]) / res) + 20
    h = int((REGION[3] - REGION[1]) / res) + 20
    values = rng.integers(0, 16, (h // 10 + 1, w // 10 + 1)).repeat(10, 0).repeat(10, 1)[:h, :w]
    with rasterio.open(
        lc,
        "w",
        driver="GTiff",
        width=w,
        height=h,
        count=1,
        dtype="uint8",
        crs="EPSG:4326",
        transform=from_origin(REGION[0] - 10 * res, REGION[3] + 10 * res, res, res),
        nodata=255,
    ) as dst:
        dst.write(values.astype("uint8"), 1)
    centres = rng.uniform([REGION[0], REGION[1]], [REGION[2], REGION[3]], (40, 2))
    blobs = shapely.buffer(shapely.points(centres), rng.uniform(0.05, 0.25, 40))
    gpd.GeoDataFrame(geometry=blobs, crs=4326).to_file(public)


_CHILD = """
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
from reserve.ingest import ingest
from reserve.io import ChecklistFilter
args = json.loads(sys.argv[1])
args["filters"] = ChecklistFilter(**args.pop("filters", {}))
t = time.perf_counter()
res = ingest(**args)
dt = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
pu = res.planning_units
feats = [c for c in pu.columns if c.startswith("landcover_")]
nan_cells = int(pu[feats].isna().any(axis=1).sum()) if feats else 0
out = dict(seconds=dt, peak_rss_mb=rss, counts=res.counts(), nan_feature_cells=nan_cells,
           ebd_rows=int(res.summary.set_index("item").loc["ebd:read", "kept"]),
           sed_rows=int(res.summary.set_index("item").loc["sed:read", "kept"]))
print("RESULT " + json.dumps(out))
"""


def run_child(args: dict) -> dict:
    """Run one ingest in a fresh Python process; return its timing and peak memory."""
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(args, default=str)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"ingest failed:\n{proc.stderr[-3000:]}")
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def synthetic(rows: int, engine: str) -> None:
    paths = write_synthetic(rows, BENCH_DIR)
    out = Path(tempfile.mkdtemp()) / "bench.gpkg"
    args = dict(
        ebd=paths["ebd"],
        sed=paths["sed"],
        species="Wood Thrush",
        output=out,
        region=",".join(map(str, REGION)),
        categorical={"landcover": paths["lc"]},
        public=paths["public"],
        engine=engine,
    )
    size = paths["ebd"].stat().st_size + paths["sed"].stat().st_size
    r = run_child(args)
    print(
        f"synthetic ingest ({engine}): EBD {r['ebd_rows']:,} rows + SED {r['sed_rows']:,} rows "
        f"({size / 1e9:.2f} GB) in {r['seconds']:.1f} s = "
        f"{r['ebd_rows'] / r['seconds']:,.0f} EBD rows/s; peak RSS {r['peak_rss_mb']:,.0f} MB; "
        f"cells {r['counts']}"
    )


def _zero_filled_to_raw(src: Path, folder: Path, species_col: str, common: str, sci: str):
    """Rebuild an EBD + SED pair from the ebp-paper zero-filled table (see SOURCES.md)."""
    import pandas as pd

    table = pd.read_csv(src, sep=" ", quotechar='"', dtype={"checklist_id": str})
    # Collapse the pivot quirk: one checklist can take two rows.
    agg = {c: "first" for c in table.columns if c not in ("checklist_id", species_col)}
    counts = table.groupby("checklist_id")[species_col].agg(lambda s: s.max(skipna=True))
    all_na = table.groupby("checklist_id")[species_col].agg(lambda s: s.isna().all())
    first = table.groupby("checklist_id").agg(agg)
    first["count"] = counts
    first["x"] = all_na
    hours = first["time_observations_started"]
    hh = np.floor(hours.fillna(0)).astype(int)
    mm = np.round((hours.fillna(0) - hh) * 60).astype(int).clip(0, 59)
    start = [f"{h:02d}:{m:02d}:00" for h, m in zip(hh, mm, strict=True)]
    sed_rows = []
    ebd_rows = []
    for (cid, r), t in zip(first.iterrows(), start, strict=True):
        sid = r["sampling_event_identifier"].split(",")[0]
        group = cid if cid.startswith("G") else ""
        fields = {
            "SAMPLING EVENT IDENTIFIER": sid,
            "GROUP IDENTIFIER": group,
            "LATITUDE": f"{r['latitude']}",
            "LONGITUDE": f"{r['longitude']}",
            "OBSERVATION DATE": r["observation_date"],
            "TIME OBSERVATIONS STARTED": t,
            "PROTOCOL NAME": r["protocol_type"],
            "DURATION MINUTES": ""
            if pd.isna(r["duration_minutes"])
            else str(int(r["duration_minutes"])),
            "EFFORT DISTANCE KM": ""
            if pd.isna(r["effort_distance_km"])
            else str(r["effort_distance_km"]),
            "NUMBER OBSERVERS": ""
            if pd.isna(r["number_observers"])
            else str(int(r["number_observers"])),
            "ALL SPECIES REPORTED": "1" if r["all_species_reported"] else "0",
            "STATE CODE": r["state_code"],
        }
        sed_rows.append("\t".join(fields.get(h, "") for h in SED_HEADER))
        if r["x"] or r["count"] > 0:
            ebd = dict(fields)
            ebd.update({"COMMON NAME": common, "SCIENTIFIC NAME": sci, "CATEGORY": "species"})
            ebd["OBSERVATION COUNT"] = "X" if r["x"] else str(int(r["count"]))
            ebd_rows.append("\t".join(ebd.get(h, "") for h in EBD_HEADER))
    sed = folder / "sed.txt"
    ebd = folder / "ebd.txt"
    sed.write_text("\t".join(SED_HEADER) + "\n" + "\n".join(sed_rows) + "\n")
    ebd.write_text("\t".join(EBD_HEADER) + "\n" + "\n".join(ebd_rows) + "\n")
    return ebd, sed, len(first)


def real() -> None:
    src = SHARED / "checklists" / "train_data_mayjune_201718_bcr27.txt"
    if not src.exists():
        raise SystemExit(f"real data not found at {src}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ebd, sed, n = _zero_filled_to_raw(
            src, folder, "woothr", "Wood Thrush", "Hylocichla mustelina"
        )
        bcr = folder / "bcr27.gpkg"
        import geopandas as gpd

        gpd.read_file(SHARED / "boundaries" / "gis-data_bcr27.gpkg", layer="bcr").to_file(bcr)
        public = sorted(
            str(p)
            for p in (SHARED / "public_land" / "usfs_ranger_districts_bcr27").glob("*.geojson")
        )
        args = dict(
            ebd=ebd,
            sed=sed,
            species="Wood Thrush",
            output=folder / "bcr27.gpkg.out.gpkg",
            region=bcr,
            categorical={"landcover": SHARED / "landcover" / "modis_mcd12q1_umd_2018_bcr27.tif"},
            legend={"landcover": SHARED / "landcover" / "mcd12q1_umd_classes.csv"},
            public=public,
            filters={"years": [2018], "months": [5, 6]},  # ChecklistFilter keywords
        )
        r = run_child(args)
    c = r["counts"]
    print(
        f"real BCR 27 Wood Thrush 2018 ({n:,} zero-filled checklists in the source): "
        f"{c['checklists']:,} checklists kept; cells train {c['train']:,} "
        f"(positive {c['train_positive']}), candidate {c['candidate']:,}, other {c['other']:,}; "
        f"surveyed positive cells {c['surveyed_positive']:,}; "
        f"cells with NaN land cover (partly outside the raster) {r['nan_feature_cells']:,}; "
        f"{r['seconds']:.1f} s, peak RSS {r['peak_rss_mb']:,.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("synthetic")
    s.add_argument("--rows", type=int, default=10_000_000)
    s.add_argument("--engine", default="local")
    sub.add_parser("real")
    a = parser.parse_args()
    if a.what == "synthetic":
        synthetic(a.rows, a.engine)
    else:
        real()


if __name__ == "__main__":
    main()
