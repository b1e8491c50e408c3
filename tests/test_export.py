"""Tests for reserve.export: layers GDAL and GeoPandas can read, reproducible bytes, atomicity."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess

import geopandas as gpd
import numpy as np
import pyogrio
import pytest

from reserve.errors import OutputExistsError
from reserve.export import FIXED_TIMESTAMP, LAYERS, write_geopackage
from reserve.io.atomic import remove_stale_temporaries
from reserve.select import select_reserve
from tests.test_select import make_units, write_units

SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


@pytest.fixture
def written(tmp_path):
    cells = write_units(tmp_path / "cells.gpkg")
    return select_reserve(5, cells, out=tmp_path / "out", map=False, model="linear")


def test_layers_geometry_and_crs_through_gdal_and_geopandas(written):
    path = written.gpkg_path
    layers = dict(pyogrio.list_layers(path).tolist())
    assert layers == {
        "planning_units": "Polygon",
        "selected": "Polygon",
        "run_summary": None,
        "ranking": None,
        "layer_styles": None,
    }
    for name in ("planning_units", "selected"):
        info = pyogrio.read_info(path, layer=name)
        assert info["crs"] == "EPSG:5070" and info["driver"] == "GPKG"
        frame = gpd.read_file(path, layer=name)
        assert frame.crs == "EPSG:5070" and set(frame.geom_type) == {"Polygon"}
        assert all(SNAKE.match(c) for c in frame.columns), list(frame.columns)
    assert all(SNAKE.match(n) for n in layers)
    sel = gpd.read_file(path, layer="selected")
    assert sel["rank"].tolist() == [1, 2, 3, 4, 5]
    assert sel["cell_id"].tolist() == written.selected["cell_id"].tolist()
    pu = gpd.read_file(path, layer="planning_units")
    assert int(pu["selected"].sum()) == 5 and {"score", "rank", "role", "label"} <= set(pu)


def test_run_summary_row(tmp_path):
    cells = write_units(tmp_path / "cells.gpkg")
    written = select_reserve(5, cells, out=tmp_path / "out", map=False)  # the default model
    summary = pyogrio.read_dataframe(written.gpkg_path, layer="run_summary")
    assert len(summary) == 1 and all(SNAKE.match(c) for c in summary.columns)
    row = summary.iloc[0]
    assert row["budget"] == 5 and row["n_selected"] == 5 and row["method"] == "ttk"
    assert row["seed"] == 0 and row["solver_status"] == "local"
    # the default model chooses the feature map and C by cross-validation, and says so
    assert row["model"] == "auto" and row["c_source"] == "cv"
    assert row["model_fitted"] == "+".join(m for m, _, _ in written.estimator.members_)
    assert row["c"] == written.estimator.best_params_["C"]
    assert 0.0 <= row["cv_precision"] <= 1.0 and row["n_tied_at_cutoff"] >= 1
    assert row["objective"] == pytest.approx(written.estimator.objective_)
    assert len(row["cells_sha256"]) == 64 and row["version_reserve"]
    assert '"budget": 5' in row["config"]


@pytest.mark.skipif(shutil.which("ogrinfo") is None, reason="GDAL's ogrinfo is not installed")
def test_ogrinfo_reads_it(written):
    out = subprocess.run(
        ["ogrinfo", "-ro", "-so", str(written.gpkg_path), "selected"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Geometry: Polygon" in out and "Feature Count: 5" in out
    assert 'ID["EPSG",5070]' in out
    listing = subprocess.run(
        ["ogrinfo", "-ro", "-q", str(written.gpkg_path)], capture_output=True, text=True
    ).stdout
    assert "planning_units (Polygon)" in listing and "run_summary (None)" in listing


def _layer_dump(path, table):
    """The layer's rows and its metadata rows, as SQL text."""
    con = sqlite3.connect(path)
    try:
        rows = con.execute(f'SELECT * FROM "{table}" ORDER BY fid').fetchall()
        meta = con.execute("SELECT * FROM gpkg_contents WHERE table_name = ?", (table,)).fetchall()
        cols = con.execute(f'PRAGMA table_info("{table}")').fetchall()
    finally:
        con.close()
    return rows, meta, cols


def test_same_seed_gives_a_byte_identical_selected_layer(tmp_path):
    cells = write_units(tmp_path / "cells.gpkg")
    a = select_reserve(5, cells, out=tmp_path / "a", map=False, seed=1)
    b = select_reserve(5, cells, out=tmp_path / "b", map=False, seed=1)
    dump_a = _layer_dump(a.gpkg_path, "selected")
    assert dump_a == _layer_dump(b.gpkg_path, "selected")
    assert FIXED_TIMESTAMP[:10] in str(dump_a[1])  # GDAL's last_change is pinned
    assert _layer_dump(a.gpkg_path, "planning_units") == _layer_dump(b.gpkg_path, "planning_units")


def test_refuses_to_overwrite_and_replaces_with_overwrite(written):
    path = written.gpkg_path
    before = path.read_bytes()
    with pytest.raises(OutputExistsError, match="--overwrite"):
        write_geopackage(written.planning_units, written.selected, written.summary, path)
    assert path.read_bytes() == before
    write_geopackage(written.planning_units, written.selected, {"budget": 99}, path, overwrite=True)
    assert pyogrio.read_dataframe(path, layer="run_summary")["budget"].tolist() == [99]


def test_failure_mid_write_keeps_the_old_file_and_leaves_no_temporary(written, monkeypatch):
    path = written.gpkg_path
    before = path.read_bytes()
    real = pyogrio.write_dataframe

    def fail_on_second_layer(df, target, layer=None, **kw):
        if layer == "selected":
            raise OSError(28, "No space left on device")
        return real(df, target, layer=layer, **kw)

    monkeypatch.setattr(pyogrio, "write_dataframe", fail_on_second_layer)
    with pytest.raises(OSError, match="No space left"):
        write_geopackage(
            written.planning_units, written.selected, written.summary, path, overwrite=True
        )
    assert path.read_bytes() == before
    assert sorted(os.listdir(path.parent)) == ["ranking.csv", "reserve.gpkg", "summary.txt"]


def test_stale_temporaries_of_dead_runs_are_removed(tmp_path):
    target = tmp_path / "reserve.gpkg"
    dead = tmp_path / ".reserve.gpkg.999999999.tmp.gpkg"
    live = tmp_path / f".reserve.gpkg.{os.getppid()}.tmp.gpkg"  # a running process
    unrelated = tmp_path / ".other.gpkg.999999999.tmp.gpkg"
    for p in (dead, live, unrelated):
        p.write_text("partial")
    assert remove_stale_temporaries(target) == [dead]
    assert live.exists() and unrelated.exists() and not dead.exists()


def test_layer_names_constant():
    assert LAYERS == ("planning_units", "selected", "run_summary", "ranking")


def test_ranking_layer_lists_every_candidate_in_rank_order(written):
    ranking = pyogrio.read_dataframe(written.gpkg_path, layer="ranking")
    pu = written.planning_units
    assert list(ranking.columns) == [
        "rank",
        "cell_id",
        "score",
        "probability",
        "known_detection",
        "surveyed_no_detection",
        "selected",
        "locked_in",
        "mess",
        "novel",
        "mess_variable",
        "longitude",
        "latitude",
        "area_ha",
    ]
    assert ranking["rank"].tolist() == list(range(1, int((pu["rank"] > 0).sum()) + 1))
    assert set(ranking["cell_id"]) == set(pu.loc[pu["role"] == "candidate", "cell_id"])
    assert ranking["selected"].tolist() == [True] * 5 + [False] * (len(ranking) - 5)
    # the runners-up follow by score; scores tied within 1e-7 (relative) are ordered by the
    # model's secondary score instead
    rest = ranking["score"].to_numpy()[5:]
    tol = 1e-7 * max(1.0, float(np.abs(rest).max()))
    assert (rest[:-1] >= rest[1:] - tol).all()


LAEA = "+proj=laea +lat_0=32.69 +lon_0=-83.25 +x_0=0 +y_0=0 +datum=WGS84 +units=m +no_defs"


def test_a_custom_crs_is_identified_once_and_written_unchanged(tmp_path, monkeypatch):
    """pyproj searches its database on every to_epsg(); a write asks once, not per layer."""
    import pyproj

    from reserve.export import identified_crs

    cells = gpd.GeoDataFrame(
        {"rank": [1, 2]},
        geometry=gpd.GeoSeries.from_xy([0, 3000], [0, 0]).buffer(1000, cap_style="square"),
        crs=LAEA,
    )
    calls = []
    real = pyproj.CRS.to_epsg

    def counting(self, min_confidence=70):
        calls.append(min_confidence)
        return real(self, min_confidence)

    monkeypatch.setattr(pyproj.CRS, "to_epsg", counting)
    path = write_geopackage(cells, cells.iloc[:1], {"budget": 1}, tmp_path / "r.gpkg")
    assert len(calls) == 1
    for layer in ("planning_units", "selected"):
        assert pyproj.CRS(pyogrio.read_info(path, layer=layer)["crs"]) == pyproj.CRS(LAEA)
    crs = identified_crs(LAEA)
    assert crs == pyproj.CRS(LAEA) and identified_crs(crs) is crs
    assert crs.to_epsg() is None and identified_crs(5070).to_epsg() == 5070
    assert type(cells.crs) is pyproj.CRS  # the caller's frame is left as it was


def _sql(path, query, *args):
    con = sqlite3.connect(path)
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


def test_layer_styles_open_the_layers_styled_in_qgis(written):
    import xml.etree.ElementTree as ET

    from reserve.qgis_styles import STYLE_COLUMNS

    path = written.gpkg_path
    cols = [c[1] for c in _sql(path, 'PRAGMA table_info("layer_styles")')]
    assert set(STYLE_COLUMNS) <= set(cols)  # the columns QGIS reads
    geom = dict(_sql(path, "SELECT table_name, column_name FROM gpkg_geometry_columns"))
    rows = _sql(
        path,
        "SELECT f_table_name, f_geometry_column, styleQML, useAsDefault "
        "FROM layer_styles ORDER BY f_table_name",
    )
    assert [r[0] for r in rows] == ["planning_units", "selected"]
    qml = {}
    for name, column, text, default in rows:
        assert column == geom[name] and default == 1
        qml[name] = ET.fromstring(text.split("\n", 1)[1])  # after the DOCTYPE line
    renderer = qml["planning_units"].find("renderer-v2")
    assert renderer.get("type") == "graduatedSymbol" and renderer.get("attr") == "score"
    ranges = renderer.findall("ranges/range")
    pu = written.planning_units
    cand = pu.loc[pu["role"] == "candidate", "score"]
    assert float(ranges[0].get("lower")) <= cand.min() + 1e-5
    assert float(ranges[-1].get("upper")) >= cand.max() - 1e-5
    colors = [o.get("value") for o in renderer.iter("Option") if o.get("name") == "color"]
    assert colors[0] == "68,1,84,255" and "253,231,37,255" in colors  # viridis ends
    sel = qml["selected"]
    assert sel.get("labelsEnabled") == "1"
    assert sel.find("labeling/settings/text-style").get("fieldName") == "rank"


def test_crs_is_recorded_with_its_epsg_code(written):
    srs = _sql(
        written.gpkg_path,
        "SELECT organization, organization_coordsys_id, description "
        "FROM gpkg_spatial_ref_sys WHERE srs_id IN (SELECT srs_id FROM "
        "gpkg_geometry_columns)",
    )
    assert {(org, code) for org, code, _ in srs} == {("EPSG", 5070)}
    assert "Albers" in srs[0][2] and "EPSG:5070" in srs[0][2]


def test_a_custom_grid_crs_is_named_with_wkt2_parameters(tmp_path):
    import pyproj

    laea = pyproj.CRS.from_proj4("+proj=laea +lat_0=44 +lon_0=-71.6 +datum=WGS84 +units=m")
    units = make_units(n_side=8)
    units = units.set_crs(None, allow_override=True).set_crs(laea)
    cells = write_units(tmp_path / "laea.gpkg", units)
    res = select_reserve(3, cells, out=tmp_path / "out", map=False, model="linear")
    ((_name, org, wkt2, desc),) = _sql(
        res.gpkg_path,
        "SELECT srs_name, organization, definition_12_063, description "
        "FROM gpkg_spatial_ref_sys WHERE srs_id IN (SELECT srs_id FROM gpkg_geometry_columns)",
    )
    assert org == "NONE"  # no EPSG code exists for it
    assert wkt2.startswith("PROJCRS[") and 'METHOD["Lambert Azimuthal Equal Area"' in wkt2
    assert 'PARAMETER["Latitude of natural origin",44' in wkt2
    assert "Lambert Azimuthal Equal Area" in desc and "Latitude of natural origin 44" in desc
