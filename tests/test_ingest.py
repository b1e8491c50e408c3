"""Tests for reserve.ingest and ``reserve ingest``: the GeoPackage contract and bad input."""

from __future__ import annotations

import glob
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pyproj
import pytest
import rasterio
import shapely
from click.testing import CliRunner
from rasterio.transform import from_origin

from reserve.cli import main
from reserve.errors import DataFileError, InvalidInputError, OutputExistsError
from reserve.ingest import PLANNING_UNIT_COLUMNS, ingest, parse_region
from reserve.io import ChecklistFilter
from tests.test_io import (
    NEW_EBD,
    NEW_SED,
    OLD_EBD,
    OLD_SED,
    SHARED,
    checklist,
    observation,
    write,
)

# A small study area around (-80, 35): checklists on a 5 x 4 lattice 0.02 degrees apart.
LONS = -80.045 + 0.02 * np.arange(5)  # none on the centre meridian (a cell edge)
LATS = 34.97 + 0.02 * np.arange(4)


@pytest.fixture
def inputs(tmp_path):
    return make_inputs(tmp_path)


def make_inputs(tmp_path):
    """The small study area's EBD, SED, rasters, legend and public land, in ``tmp_path``."""
    sed_rows, ebd_rows = [], []
    k = 0
    for lon in LONS:
        for lat in LATS:
            k += 1
            sid = f"S{k}"
            sed_rows.append(checklist(sid, lon=f"{lon:.5f}", lat=f"{lat:.5f}", minutes=30, km=1))
            if k % 3 == 0:
                ebd_rows.append(observation(sid, lon=f"{lon:.5f}", lat=f"{lat:.5f}", count="X"))
            ebd_rows.append(observation(sid, "Veery", "Catharus fuscescens"))
    sed_rows.append(checklist("S900", lon="-80.0", lat="35.0", protocol="Incidental"))
    sed = write(tmp_path / "sed.txt", NEW_SED, sed_rows)
    ebd = write(tmp_path / "ebd.txt", NEW_EBD, ebd_rows)
    # land cover in lon/lat: class 1 west of -80, class 2 east; elevation = 100 everywhere
    res = 0.002
    n_x, n_y = 100, 60
    lons = -80.1 + res * (np.arange(n_x) + 0.5)
    lc = np.where(lons < -80.0, 1, 2)[None, :].repeat(n_y, axis=0).astype("uint8")
    transform = from_origin(-80.1, 35.06, res, res)
    lc_path = tmp_path / "lc.tif"
    dem_path = tmp_path / "dem.tif"
    for path, values, dtype in (
        (lc_path, lc, "uint8"),
        (dem_path, np.full(lc.shape, 100.0), "float32"),
    ):
        with rasterio.open(
            path,
            "w",
            driver="GTiff",
            width=n_x,
            height=n_y,
            count=1,
            dtype=dtype,
            crs="EPSG:4326",
            transform=transform,
        ) as dst:
            dst.write(values.astype(dtype), 1)
    legend = tmp_path / "legend.csv"
    legend.write_text("class,name\n1,Evergreen Needleleaf Forests\n2,Croplands\n")
    public = tmp_path / "public.geojson"
    gpd.GeoDataFrame(geometry=[shapely.box(-80.06, 34.96, -80.0, 35.04)], crs=4326).to_file(public)
    return {
        "ebd": ebd,
        "sed": sed,
        "lc": lc_path,
        "dem": dem_path,
        "legend": legend,
        "public": public,
        "region": "-80.06,34.96,-79.96,35.04",
        "dir": tmp_path,
        "rows": (sed_rows, ebd_rows),
    }


def run(inputs, output=None, **kw):
    args = dict(
        region=inputs["region"],
        categorical={"landcover": inputs["lc"]},
        continuous={"elevation": inputs["dem"]},
        legend={"landcover": inputs["legend"]},
        public=inputs["public"],
        cell_size=2000.0,
    )
    args.update(kw)
    out = output or inputs["dir"] / "pu.gpkg"
    return ingest(inputs["ebd"], inputs["sed"], "Wood Thrush", out, **args)


def test_planning_units_contract(inputs):
    res = run(inputs)
    pu = pyogrio.read_dataframe(res.path, layer="planning_units")
    features = ["landcover_evergreen_needleleaf_forests", "landcover_croplands"]
    features += ["elevation_mean", "elevation_sd"]
    assert list(pu.columns) == [*PLANNING_UNIT_COLUMNS, *features, "geometry"]
    assert pu["cell_id"].dtype == np.int64 and pu["cell_id"].is_unique
    assert pu["label"].dtype == np.int64
    assert set(pu["label"]) <= {-1, 0, 1}
    assert set(pu["role"]) <= {"train", "candidate", "other"}
    assert pu["locked_out"].dtype == bool
    for col in [*features, "effort_hours", "effort_km", "public_fraction"]:
        assert pu[col].dtype == np.float64
    crs = pyproj.CRS.from_user_input(pu.crs)
    assert crs.is_projected
    assert "Equal Area" in crs.coordinate_operation.method_name
    assert np.allclose(pu.geometry.area, 2000.0**2)
    assert (pu.geometry.bounds.maxx - pu.geometry.bounds.minx == 2000.0).all()
    # unsurveyed cells are -1 with no checklists; surveyed ones have some
    assert ((pu["label"] == -1) == (pu["n_checklists"] == 0)).all()


def test_public_land_and_region_are_stored_beside_the_cells(inputs):
    res = run(inputs)
    names = [str(n) for n, _ in pyogrio.list_layers(res.path)]
    assert names[0] == "planning_units" and {"public_land", "region"} <= set(names)
    pu = res.planning_units
    public = pyogrio.read_dataframe(res.path, layer="public_land")
    region = pyogrio.read_dataframe(res.path, layer="region")
    for layer in (public, region):
        assert len(layer) == 1 and pyproj.CRS.from_user_input(layer.crs) == pu.crs
    # independent: the stored polygons give back the cells' own fractions
    cells = pu.geometry.to_numpy()
    for layer, column in ((public, "public_fraction"), (region, "region_fraction")):
        share = shapely.area(shapely.intersection(cells, layer.geometry.iloc[0])) / 2000.0**2
        assert np.allclose(share, pu[column], atol=1e-6)
    # the input's public box, as drawn in lon/lat (clipped to the cells' extent)
    back = public.to_crs(4326).total_bounds
    assert back == pytest.approx([-80.06, 34.96, -80.0, 35.04], abs=1e-3)
    # without public land no public_land layer, and the cells are read as before
    with pytest.warns(UserWarning, match="no public polygons"):
        bare = run(inputs, inputs["dir"] / "bare.gpkg", public=None)
    assert "public_land" not in [str(n) for n, _ in pyogrio.list_layers(bare.path)]


def test_counts_and_labels_match_a_spatial_join(inputs):
    res = run(inputs)
    pu = res.planning_units
    # Independent oracle: project the kept checklists and join them to the cell squares.
    kept = res.checklists
    pts = gpd.GeoDataFrame(
        kept[["detected"]],
        geometry=gpd.points_from_xy(kept.longitude, kept.latitude),
        crs=4326,
    ).to_crs(pu.crs)
    joined = gpd.sjoin(pts, pu[["cell_id", "geometry"]], predicate="within")
    per_cell = joined.groupby("cell_id")["detected"].agg(["size", "sum"])
    got = pu.set_index("cell_id")
    assert len(joined) == len(kept) == 20  # the Incidental checklist was dropped
    assert (got.loc[per_cell.index, "n_checklists"] == per_cell["size"]).all()
    assert (got.loc[per_cell.index, "n_detections"] == per_cell["sum"]).all()
    assert (got.loc[per_cell.index, "label"] == (per_cell["sum"] > 0).astype(int)).all()
    assert got["effort_hours"].sum() == pytest.approx(20 * 0.5)
    assert got["effort_km"].sum() == pytest.approx(20 * 1.0)
    assert int(got["n_detections"].sum()) == sum(k % 3 == 0 for k in range(1, 21))


def test_features_roles_and_summary(inputs):
    with pytest.warns(UserWarning, match="does not fully cover"):
        res = run(inputs, region="-80.08,34.95,-79.9,35.05")  # wider than the rasters
    pu = res.planning_units.set_index("cell_id")
    full = pu.dropna(subset=["elevation_mean"])
    assert len(full) > 0 and len(full) < len(pu)
    assert np.allclose(full["elevation_mean"], 100.0)
    frac = full["landcover_evergreen_needleleaf_forests"] + full["landcover_croplands"]
    assert np.allclose(frac, 1.0)
    # roles follow public_fraction and surveyed status
    public = pu["public_fraction"] > 0.5
    surveyed = pu["label"] >= 0
    assert (pu.loc[public & surveyed, "role"] == "train").all()
    assert (pu.loc[public & ~surveyed, "role"] == "other").all()
    # a private cell is a candidate only when more than half of it lies in the region
    inside = pu["region_fraction"] > 0.5
    assert (pu.loc[~public & inside, "role"] == "candidate").all()
    assert (pu.loc[~public & ~inside, "role"] == "other").all() and (~inside).any()
    assert pu["region_fraction"].between(0.0, 1.0).all() and (pu["region_fraction"] == 1.0).any()
    assert (pu["role"] == "train").sum() > 0
    summary = pyogrio.read_dataframe(res.path, layer="ingest_summary")
    items = summary.set_index("item")
    for step in ("sed:complete", "sed:protocol", "sed:effort", "sed:region", "sed:group_dedup"):
        assert step in items.index
    assert items.loc["sed:protocol", "dropped"] == 1
    assert items.loc["cell_size", "value"] == "2000.0"
    assert pyproj.CRS.from_wkt(items.loc["crs", "value"]) == pyproj.CRS.from_user_input(pu.crs)
    assert "version:rasterio" in items.index
    assert items.loc["cells:train", "kept"] == (pu["role"] == "train").sum()


def test_locked_out_cells_are_never_candidates(inputs):
    locked = inputs["dir"] / "urban.gpkg"
    gpd.GeoDataFrame(geometry=[shapely.box(-80.0, 34.9, -79.9, 35.1)], crs=4326).to_file(locked)
    res = run(inputs, locked_out=locked)
    pu = res.planning_units
    assert pu["locked_out"].any()
    assert not (pu["locked_out"] & (pu["role"] == "candidate")).any()


def test_old_layout_gz_and_zip_give_the_same_units(inputs, tmp_path):
    base = run(inputs).planning_units
    sed_rows, ebd_rows = inputs["rows"]
    old_sed = write(tmp_path / "old_sed", OLD_SED, sed_rows, "gz")
    old_ebd = write(tmp_path / "old_ebd", OLD_EBD, ebd_rows, "zip")
    moved = dict(inputs, sed=old_sed, ebd=old_ebd)
    other = run(moved, output=tmp_path / "other.gpkg").planning_units
    pd.testing.assert_frame_equal(
        pd.DataFrame(base.drop(columns="geometry")), pd.DataFrame(other.drop(columns="geometry"))
    )


# ------------------------------------------------------------------------------------------
# bad input: one clear error, no partial output


def _no_output(directory, name="pu.gpkg"):
    assert not (Path(directory) / name).exists()
    assert not list(Path(directory).glob(".*tmp.gpkg"))


def test_missing_file(inputs):
    with pytest.raises(DataFileError, match="does not exist"):
        run(dict(inputs, sed=inputs["dir"] / "missing.txt"))
    _no_output(inputs["dir"])


def test_not_an_ebird_file(inputs):
    bad = inputs["dir"] / "bad.txt"
    bad.write_text("col1\tcol2\n1\t2\n")
    with pytest.raises(DataFileError, match="is not an eBird SED file"):
        run(dict(inputs, sed=bad))
    _no_output(inputs["dir"])


def test_species_not_in_file(inputs):
    with pytest.raises(InvalidInputError, match="species='Dodo'"):
        ingest(inputs["ebd"], inputs["sed"], "Dodo", inputs["dir"] / "pu.gpkg")
    _no_output(inputs["dir"])


def test_region_outside_every_raster(inputs):
    far = inputs["dir"] / "far.tif"
    with rasterio.open(
        far,
        "w",
        driver="GTiff",
        width=2,
        height=2,
        count=1,
        dtype="uint8",
        crs="EPSG:4326",
        transform=from_origin(10.0, 50.0, 0.1, 0.1),
    ) as dst:
        dst.write(np.ones((2, 2), dtype="uint8"), 1)
    with pytest.raises(DataFileError, match=r"far\.tif.*does not overlap the region"):
        run(inputs, categorical={"lc": far}, legend=None, continuous=None)
    _no_output(inputs["dir"])


def test_raster_without_crs(inputs):
    path = inputs["dir"] / "nocrs.tif"
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=2,
        height=2,
        count=1,
        dtype="uint8",
        transform=from_origin(0, 2, 1, 1),
    ) as dst:
        dst.write(np.ones((2, 2), dtype="uint8"), 1)
    with pytest.raises(DataFileError, match="has no CRS"):
        run(inputs, categorical={"lc": path}, legend=None)
    _no_output(inputs["dir"])


def test_polygons_without_crs(inputs):
    path = inputs["dir"] / "nocrs.gpkg"
    gpd.GeoDataFrame(geometry=[shapely.box(0, 0, 1, 1)]).to_file(path)
    with pytest.raises(DataFileError, match="has no CRS"):
        run(inputs, public=path)
    _no_output(inputs["dir"])


def test_empty_after_filtering_names_the_step(inputs):
    with pytest.raises(InvalidInputError, match="sed:dates"):
        run(inputs, filters=ChecklistFilter(years=[1999]))
    _no_output(inputs["dir"])


def test_refuses_to_overwrite_and_keeps_the_old_output(inputs):
    res = run(inputs)
    before = res.path.read_bytes()
    with pytest.raises(OutputExistsError, match="overwrite"):
        run(inputs)
    assert res.path.read_bytes() == before
    run(inputs, overwrite=True, cell_size=4000.0)
    assert len(pyogrio.read_dataframe(res.path, layer="planning_units")) < len(res.planning_units)


def test_failure_midway_leaves_no_temporary_file(inputs, monkeypatch):
    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(pyogrio, "write_dataframe", boom)
    with pytest.raises(OSError, match="disk full"):
        run(inputs)
    _no_output(inputs["dir"])


def test_parse_region_forms(tmp_path):
    assert parse_region((-80, 34, -79, 35)).bounds == (-80.0, 34.0, -79.0, 35.0)
    path = tmp_path / "r.gpkg"
    gpd.GeoDataFrame(geometry=[shapely.box(0, 0, 1000, 1000)], crs="EPSG:6933").to_file(path)
    assert parse_region(path).bounds[2] == pytest.approx(0.0104, abs=1e-3)
    with pytest.raises(InvalidInputError, match="not a bbox"):
        parse_region("1,2,3")
    with pytest.raises(DataFileError, match="neither a bbox"):
        parse_region(tmp_path / "nope.gpkg")


# ------------------------------------------------------------------------------------------
# command line


def _cli_args(inputs, output):
    return [
        "ingest",
        "--ebd",
        str(inputs["ebd"]),
        "--sed",
        str(inputs["sed"]),
        "--species",
        "Hylocichla mustelina",
        "--output",
        str(output),
        "--region",
        inputs["region"],
        "--cell-size",
        "2000",
        "--categorical",
        f"landcover={inputs['lc']}",
        "--legend",
        f"landcover={inputs['legend']}",
        "--continuous",
        f"elevation={inputs['dem']}",
        "--public",
        str(inputs["public"]),
        "--no-progress",
    ]


def test_cli_ingest_matches_the_function(inputs):
    out = inputs["dir"] / "cli.gpkg"
    result = CliRunner().invoke(main, _cli_args(inputs, out))
    assert result.exit_code == 0, result.output
    assert "train" in result.output and "candidate" in result.output
    direct = run(inputs).planning_units
    cli = pyogrio.read_dataframe(out, layer="planning_units")
    assert cli["role"].tolist() == direct["role"].tolist()
    assert cli["label"].tolist() == direct["label"].tolist()


def test_cli_errors_are_one_line_with_exit_codes(inputs):
    out = inputs["dir"] / "cli.gpkg"
    args = _cli_args(inputs, out)
    bad_species = [a if a != "Hylocichla mustelina" else "Dodo" for a in args]
    result = CliRunner().invoke(main, bad_species)
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "--species 'Dodo'" in result.output
    missing = [a if a != str(inputs["sed"]) else "/nonexistent/sed.txt" for a in args]
    result = CliRunner().invoke(main, missing)
    assert result.exit_code == 1 and "does not exist" in result.output
    assert not out.exists()


# ------------------------------------------------------------------------------------------
# several species in one ingest

THREE = ["Wood Thrush", "Catharus fuscescens", "Hermit Thrush"]  # the Veery by its sci name


@pytest.fixture
def several(inputs):
    """The lattice of ``inputs`` with three species on different checklists.

    Wood Thrush on every 3rd checklist (as in ``inputs``), the Veery on every 2nd (a subspecies
    row on some, an X on others, a zero count on one: a non-detection), the Hermit Thrush only
    on the Incidental checklist S900, which the filters drop.
    """
    sed_rows, _ = inputs["rows"]
    ebd_rows = []
    for row in sed_rows[:-1]:
        k = int(row["id"][1:])
        where = {"lon": row["lon"], "lat": row["lat"]}
        if k % 3 == 0:
            ebd_rows.append(observation(row["id"], count="X", **where))
        if k % 2 == 0:
            common, count = ("Veery (fuliginosa)", "2") if k % 4 == 0 else ("Veery", "X")
            count = "0" if k == 10 else count
            ebd_rows.append(observation(row["id"], common, "Catharus fuscescens", count, **where))
    ebd_rows.append(observation("S900", "Hermit Thrush", "Catharus guttatus"))
    ebd = write(inputs["dir"] / "ebd3.txt", NEW_EBD, ebd_rows)
    return dict(inputs, ebd=ebd)


def _one(inputs, species, name, **kw):
    args = dict(region=inputs["region"], public=inputs["public"], cell_size=2000.0)
    args.update(categorical={"landcover": inputs["lc"]}, legend={"landcover": inputs["legend"]})
    args.update(kw)
    return ingest(inputs["ebd"], inputs["sed"], species, inputs["dir"] / f"{name}.gpkg", **args)


def test_several_species_equal_one_ingest_per_species(several):
    with pytest.warns(UserWarning, match=r"species 'Hermit Thrush' .*has no detection"):
        multi = _one(several, THREE, "multi")
    slugs = ["wood_thrush", "catharus_fuscescens", "hermit_thrush"]
    pu = multi.planning_units
    read = pyogrio.read_dataframe(multi.path, layer="planning_units")
    pairs = [c for s in slugs for c in (f"label__{s}", f"n_detections__{s}")]
    assert list(read.columns[: len(PLANNING_UNIT_COLUMNS) + 6]) == [*PLANNING_UNIT_COLUMNS, *pairs]
    for name, slug in zip(THREE, slugs, strict=True):
        single = _one(several, name, slug).planning_units
        assert not single.columns.str.contains("__").any()  # one species: the old columns only
        assert read[f"label__{slug}"].tolist() == single["label"].tolist()
        assert read[f"n_detections__{slug}"].tolist() == single["n_detections"].tolist()
        if name == THREE[0]:  # the first species keeps label / n_detections; the rest is equal
            pd.testing.assert_frame_equal(
                pd.DataFrame(pu.drop(columns=pairs)), pd.DataFrame(single), check_exact=True
            )
    # An independent count of the Veery: detected on the even checklists but S10 (count 0).
    veery = read["n_detections__catharus_fuscescens"].sum()
    assert veery == sum(k % 2 == 0 and k != 10 for k in range(1, 21)) == 9
    assert (
        set(read["label__hermit_thrush"]) <= {0, -1} and (read["label__hermit_thrush"] == 0).any()
    )
    assert (read["label"] == read["label__wood_thrush"]).all()
    summary = multi.summary.set_index("item")
    assert summary.loc["species", "value"] == "; ".join(THREE)
    assert summary.loc["species:catharus_fuscescens", "value"] == "Catharus fuscescens"
    assert summary.loc["checklists:detections:catharus_fuscescens", "kept"] == 9
    assert summary.loc["checklists:detections:hermit_thrush", "kept"] == 0
    assert summary.loc["ebd:species:hermit_thrush", "kept"] == 1  # in the file, not kept
    positive = int((read["label__catharus_fuscescens"] == 1).sum())
    assert summary.loc["cells:positive:catharus_fuscescens", "kept"] == positive > 0


def test_several_species_read_the_files_once(several, monkeypatch):
    from reserve.io import readers

    opened = []
    original = readers.iter_table

    def spy(path, *args, **kwargs):
        opened.append(Path(path).name)
        return original(path, *args, **kwargs)

    monkeypatch.setattr(readers, "iter_table", spy)
    _one(several, THREE[:2], "two")
    assert sorted(opened) == ["ebd3.txt", "sed.txt"]


@pytest.mark.parametrize(
    ("species", "match"),
    [
        (["Wood Thrush", "wood  thrush"], r"'Wood Thrush' and 'wood  thrush' are the same name"),
        (["Veery", "Wood Thrush", "Veery"], r"'Veery' is given twice"),
        (["Wood Thrush", "Hylocichla mustelina"], r"are the same species"),
        (["Wood Thrush", "Dodo"], r"species='Dodo' matches no row"),
        ([], r"pass a common or scientific name, or a list"),
        (["Wood Thrush", "?"], r"no letter or digit"),
    ],
)
def test_several_species_refused_in_one_line(several, species, match):
    with pytest.raises(InvalidInputError, match=match) as info:
        _one(several, species, "bad")
    assert "\n" not in str(info.value) and "pass" in str(info.value)
    _no_output(several["dir"], "bad.gpkg")


def test_cli_several_species(several):
    out = several["dir"] / "cli3.gpkg"
    args = _cli_args(several, out)
    i = args.index("--species")
    args[i : i + 2] = ["--species", "Wood Thrush", "--species", "Catharus fuscescens"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "label__wood_thrush = Wood Thrush (train positive" in result.output
    assert "label__catharus_fuscescens = Catharus fuscescens" in result.output
    cli = pyogrio.read_dataframe(out, layer="planning_units")
    direct = _one(several, THREE[:2], "direct", continuous={"elevation": several["dem"]})
    for col in ("label", "label__wood_thrush", "label__catharus_fuscescens"):
        assert cli[col].tolist() == direct.planning_units[col].tolist()
    args[i : i + 4] = ["--species", "Veery", "--species", "veery"]
    result = CliRunner().invoke(main, [*args, "--overwrite"])
    assert result.exit_code == 2 and result.output.strip().count("\n") == 0
    assert "same name" in result.output


# ------------------------------------------------------------------------------------------
# real data (read from ../shared, never copied)


def test_real_nh_ingest_is_consistent(tmp_path):
    nh = SHARED / "nh_thrush"
    lc = SHARED / "global" / "MCD12C1.A2019001.006.2020220162300.tif"
    if not (nh / "ebd_thrush_nh.txt").exists() or not lc.exists():
        pytest.skip(f"real eBird files not available under {SHARED}")
    res = ingest(
        nh / "ebd_thrush_nh.txt",
        nh / "ebd_thrush_nh_sampling.txt",
        "Bicknell's Thrush",
        tmp_path / "nh.gpkg",
        region="-72.6,42.7,-70.6,45.4",
        categorical={"landcover": lc},
        public=sorted(glob.glob(str(nh / "wmnf_ranger_districts" / "*.geojson"))),
    )
    pu = res.planning_units
    assert pu["n_checklists"].sum() == len(res.checklists)
    assert pu["n_detections"].sum() == res.checklists["detected"].sum()
    counts = res.counts()
    assert counts["train"] > 0 and counts["candidate"] > 0 and counts["train_positive"] > 0


@pytest.fixture(scope="module")
def scheduler():
    """A loopback LocalCluster of two worker processes (the --scheduler path), per module."""
    distributed = pytest.importorskip("distributed", reason="the Dask engine needs distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


def test_dask_engine_gives_exactly_the_local_planning_units(inputs, monkeypatch, scheduler):
    from reserve.io import dask_engine

    monkeypatch.setattr(dask_engine, "DASK_BLOCK_BYTES", 2000)  # several tasks on a small file
    local = run(inputs)
    dask = run(inputs, output=inputs["dir"] / "dask.gpkg", engine="dask", scheduler=scheduler)
    pd.testing.assert_frame_equal(
        pd.DataFrame(local.planning_units), pd.DataFrame(dask.planning_units), check_exact=True
    )
    assert dask.checklists is None  # the per-checklist table stayed on the workers
    assert dask.counts() == local.counts()
    assert dask.counts()["checklists"] == len(local.checklists)


def _frames(obj):
    """Every DataFrame inside a gathered result (lists, tuples, dicts)."""
    if isinstance(obj, pd.DataFrame):
        yield obj
    elif isinstance(obj, list | tuple):
        for item in obj:
            yield from _frames(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _frames(item)


def test_dask_grids_on_the_workers_with_groups_split_across_tasks(tmp_path, monkeypatch, scheduler):
    """Groups spread over byte ranges; the client gathers per-cell totals, never checklists."""
    from distributed import Client

    from reserve.io import dask_engine

    monkeypatch.setattr(dask_engine, "DASK_BLOCK_BYTES", 1500)
    sed_rows, ebd_rows = [], []
    for i in range(90):
        # 90 checklists at 6 sites (3 cells of 2 km); every 4th in one of 5 groups that span
        # the file, so the members of a group are read by different tasks.
        lon, lat = -80.03 + 0.02 * (i % 3), 34.99 + 0.004 * (i % 2)
        group = f"G{i % 5}" if i % 4 == 0 else ""
        sed_rows.append(
            checklist(
                f"S{i}",
                lon=f"{lon:.4f}",
                lat=f"{lat:.4f}",
                minutes=str(7 + i % 41),
                km=f"{0.1 * (i % 13):.3f}",
                group=group,
            )
        )
        if i % 3 == 1 or i % 8 == 4:
            ebd_rows.append(observation(f"S{i}", count=str(i % 6) if i % 5 else "X"))
    sed = write(tmp_path / "sed.txt", NEW_SED, sed_rows)
    ebd = write(tmp_path / "ebd.txt", NEW_EBD, ebd_rows)
    kw = dict(region="-80.06,34.96,-79.96,35.04", cell_size=2000.0)
    with pytest.warns(UserWarning, match="no public polygons"):
        local = ingest(ebd, sed, "Wood Thrush", tmp_path / "local.gpkg", **kw)
    gathered = []
    original = Client.gather

    def spy(self, futures, *args, **kwargs):
        out = original(self, futures, *args, **kwargs)
        gathered.append(out)
        return out

    monkeypatch.setattr(Client, "gather", spy)
    with pytest.warns(UserWarning, match="no public polygons"):
        dask = ingest(
            ebd,
            sed,
            "Wood Thrush",
            tmp_path / "dask.gpkg",
            engine="dask",
            scheduler=scheduler,
            **kw,
        )
    pd.testing.assert_frame_equal(
        pd.DataFrame(local.planning_units), pd.DataFrame(dask.planning_units), check_exact=True
    )
    kept = local.checklists
    assert kept["checklist_id"].is_unique and (kept["checklist_id"] == "G0").sum() == 1
    assert len(kept) == 90 - 23 + 5  # 23 grouped checklists become 5
    pu = local.planning_units
    surveyed = int((pu["n_checklists"] > 0).sum())
    assert surveyed <= 6 < len(kept)
    frames = list(_frames(gathered))
    assert frames, "the Dask engine gathered nothing"
    for frame in frames:
        assert not {"checklist_id", "sampling_event_identifier"} & set(frame.columns)
        assert len(frame) <= surveyed
    per_cell = [f for f in frames if "n_checklists" in f.columns]
    assert sum(len(f) for f in per_cell) == surveyed
    assert sum(int(f["n_checklists"].sum()) for f in per_cell) == len(kept)


def test_dask_engine_gives_the_local_units_for_several_species(several, monkeypatch, scheduler):
    from reserve.io import dask_engine

    monkeypatch.setattr(dask_engine, "DASK_BLOCK_BYTES", 2000)
    with pytest.warns(UserWarning, match="Hermit Thrush"):
        local = _one(several, THREE, "local3")
    with pytest.warns(UserWarning, match="Hermit Thrush"):
        dask = _one(several, THREE, "dask3", engine="dask", scheduler=scheduler)
    pd.testing.assert_frame_equal(
        pd.DataFrame(local.planning_units), pd.DataFrame(dask.planning_units), check_exact=True
    )


def test_cli_ingest_warns_at_once_when_training_cells_are_too_few(inputs):
    """The warning follows the verdict's own rule (reserve.signal.too_few_training_cells)."""
    from reserve.signal import too_few_training_cells

    out = inputs["dir"] / "few.gpkg"
    result = CliRunner().invoke(main, _cli_args(inputs, out))
    assert result.exit_code == 0, result.output
    units = pyogrio.read_dataframe(out, layer="planning_units", read_geometry=False)
    train = units["role"] == "train"
    few = too_few_training_cells(int(train.sum()), int((train & (units["label"] == 1)).sum()))
    assert ("too few for any habitat model" in result.stderr) == few
    args = _cli_args(inputs, inputs["dir"] / "none.gpkg")
    at = args.index("--public")
    no_public = args[:at] + args[at + 2 :]  # no public land: no training cell at all
    result = CliRunner().invoke(main, no_public)
    assert result.exit_code == 0, result.output
    warning = [ln for ln in result.stderr.splitlines() if "too few for any habitat" in ln]
    assert len(warning) == 1 and warning[0].startswith("reserve: warning: only 0 training cells")
