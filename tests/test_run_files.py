"""Tests for reserve.run_files: a run's inputs checked first, its outputs written together."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest
import shapely

import reserve
from reserve import run_files
from reserve.config import SelectOptions
from reserve.errors import DataFileError, InvalidInputError, OutputExistsError
from reserve.run_files import (
    check_decoration,
    check_outputs,
    default_region_cached,
    ingest_species,
    map_polygons,
    one_species_options,
    stored_polygons,
    write_outputs,
)
from tests.test_select import make_units, write_units


def with_ingest_summary(path: Path, species: str) -> Path:
    """``path`` with the ``ingest_summary`` table ``reserve ingest`` writes (item, value)."""
    table = pd.DataFrame({"item": ["checklists", "species"], "value": ["12", species]})
    pyogrio.write_dataframe(table, path, layer="ingest_summary", driver="GPKG")
    return path


def with_polygons(path: Path) -> Path:
    """``path`` with a ``public_land`` and a ``region`` layer in the cells' CRS (EPSG:5070)."""
    public = gpd.GeoDataFrame(geometry=[shapely.box(1_100_000, 1_100_000, 1_106_000, 1_103_000)])
    region = gpd.GeoDataFrame(geometry=[shapely.box(1_100_000, 1_100_000, 1_136_000, 1_136_000)])
    for name, frame in (("public_land", public), ("region", region)):
        pyogrio.write_dataframe(frame.set_crs(5070), path, layer=name, driver="GPKG")
    return path


# ------------------------------------------------------------------------------------------
# what the ingest stored beside the cells


def test_ingest_species_is_the_first_recorded_species(tmp_path):
    path = with_ingest_summary(write_units(tmp_path / "a.gpkg"), "Wood Thrush; Veery")
    assert ingest_species(path) == "Wood Thrush"


def test_ingest_species_of_a_hand_made_file_is_empty(small_units_file, tmp_path):
    assert ingest_species(small_units_file) == ""
    assert ingest_species(tmp_path / "missing.gpkg") == ""


def test_stored_polygons_are_returned_in_lon_lat(tmp_path):
    path = with_polygons(write_units(tmp_path / "a.gpkg"))
    got = stored_polygons(path)
    assert set(got) == {"public", "outline"}
    for key, layer in (("public", "public_land"), ("outline", "region")):
        expected = gpd.read_file(path, layer=layer).to_crs(4326).geometry.iloc[0]
        assert got[key].equals_exact(expected, tolerance=1e-9)
        assert -180 <= got[key].bounds[0] <= 180 and -90 <= got[key].bounds[1] <= 90


def test_stored_polygons_of_a_file_without_them(small_units_file, tmp_path):
    assert stored_polygons(small_units_file) == {}
    (tmp_path / "junk.gpkg").write_bytes(b"not a geopackage")
    assert stored_polygons(tmp_path / "junk.gpkg") == {}


def test_map_polygons_prefers_the_files_given(tmp_path):
    path = with_polygons(write_units(tmp_path / "a.gpkg"))
    public, outline, drawn = map_polygons(path, "given_public.shp", None)
    assert public == "given_public.shp"
    assert outline.equals_exact(stored_polygons(path)["outline"], tolerance=1e-9)
    assert drawn == {"public": "given_public.shp", "outline": f"{path} (layer region)"}


def test_map_polygons_without_any(small_units_file):
    assert map_polygons(small_units_file, None, None) == (None, None, {"public": "", "outline": ""})


# ------------------------------------------------------------------------------------------
# --species on a single-species ingest


@pytest.fixture
def one_species_file(tmp_path):
    return with_ingest_summary(write_units(tmp_path / "a.gpkg"), "Wood Thrush")


def test_the_ingested_species_selects_for_label(one_species_file):
    columns = make_units().columns
    opts = SelectOptions(budget=5, species=["wood  thrush"])
    assert one_species_options(opts, columns, one_species_file).species is None
    assert one_species_options(opts, columns, one_species_file).budget == 5


def test_another_species_is_refused(one_species_file):
    opts = SelectOptions(budget=5, species=["Veery"])
    with pytest.raises(InvalidInputError, match="'Wood Thrush'"):
        one_species_options(opts, make_units().columns, one_species_file)


def test_species_options_left_alone(one_species_file, small_units_file):
    columns = make_units().columns
    for opts, cols, path in [
        (SelectOptions(budget=5), columns, one_species_file),  # no species
        (SelectOptions(budget=5, species=["A", "B"]), columns, one_species_file),  # several
        (SelectOptions(budget=5, species=["Veery"]), [*columns, "label__veery"], one_species_file),
        (SelectOptions(budget=5, species=["Veery"]), columns, small_units_file),  # not recorded
    ]:
        assert one_species_options(opts, cols, path) is opts


# ------------------------------------------------------------------------------------------
# outputs: where they go, checked before any work


def test_no_out_means_no_outputs(small_units_file):
    assert check_outputs(SelectOptions(budget=5), small_units_file) == (None, None)


def test_outputs_go_into_out(small_units_file, tmp_path):
    opts = SelectOptions(budget=5, cells=small_units_file, out=tmp_path / "run", method="svm")
    gpkg, html = check_outputs(opts, small_units_file)
    assert gpkg == tmp_path / "run" / "reserve.gpkg"
    assert html == tmp_path / "run" / "cells_svm_k5.html"
    assert not (tmp_path / "run").exists()  # checked, nothing created
    no_map = SelectOptions(budget=5, cells=small_units_file, out=tmp_path / "run", map=False)
    assert check_outputs(no_map, small_units_file)[1] is None


def test_existing_outputs_need_overwrite(small_units_file, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "reserve.gpkg").write_bytes(b"old")
    opts = SelectOptions(budget=5, cells=small_units_file, out=tmp_path / "run", map=False)
    with pytest.raises(OutputExistsError):
        check_outputs(opts, small_units_file)
    again = SelectOptions(
        budget=5, cells=small_units_file, out=tmp_path / "run", map=False, overwrite=True
    )
    assert check_outputs(again, small_units_file)[0] == tmp_path / "run" / "reserve.gpkg"


def test_out_may_not_replace_the_cells(tmp_path):
    cells = write_units(tmp_path / "reserve.gpkg")
    opts = SelectOptions(budget=5, cells=cells, out=tmp_path, map=False, overwrite=True)
    with pytest.raises(InvalidInputError, match="would replace the --cells file"):
        check_outputs(opts, cells)


def test_check_decoration(tmp_path):
    polygon = tmp_path / "public.gpkg"
    polygon.write_bytes(b"x")
    check_decoration(None, None)
    check_decoration(polygon, str(polygon))
    with pytest.raises(DataFileError, match="outline="):
        check_decoration(polygon, tmp_path / "missing.gpkg")
    with pytest.raises(DataFileError, match="public="):
        check_decoration(tmp_path, None)  # a folder
    with pytest.raises(InvalidInputError, match="public must be a path"):
        check_decoration(3, None)


def test_default_region_cached_looks_in_the_cache_folder(monkeypatch, tmp_path):
    from reserve import default_region

    monkeypatch.setattr(default_region, "default_cache_dir", lambda: tmp_path)
    assert default_region_cached() is False
    key = default_region.cache_key()
    (tmp_path / f"default_region-{key[:16]}.gpkg").write_bytes(b"")
    assert default_region_cached() is True


# ------------------------------------------------------------------------------------------
# writing: every output, or none


@pytest.fixture(scope="module")
def unwritten(tmp_path_factory):
    """A run's result with nothing written (no ``out``)."""
    path = write_units(tmp_path_factory.mktemp("unwritten") / "cells.gpkg")
    return reserve.select_reserve(6, path, model="linear", map=False)


def aimed_at(result, folder: Path):
    """A copy of ``result`` whose GeoPackage, CSV and summary go into ``folder``."""
    from dataclasses import replace

    return replace(
        result,
        summary=dict(result.summary),
        gpkg_path=folder / "reserve.gpkg",
        csv_path=folder / "ranking.csv",
        summary_path=folder / "summary.txt",
        map_path=None,
    )


def test_write_outputs_writes_what_the_result_holds(unwritten, tmp_path):
    result = aimed_at(unwritten, tmp_path / "run")
    said: list[str] = []
    write_outputs(result, said.append, 0.0, None, None)
    ids = pyogrio.read_dataframe(result.gpkg_path, layer="selected", read_geometry=False)
    assert ids["cell_id"].tolist() == unwritten.selected["cell_id"].tolist()
    csv = pd.read_csv(result.csv_path)
    assert csv["cell_id"].tolist() == unwritten.ranking["cell_id"].tolist()
    np.testing.assert_allclose(csv["score"], unwritten.ranking["score"], rtol=1e-6)
    assert str(len(unwritten.selected)) in result.summary_path.read_text(encoding="utf-8")
    assert said == [f"writing {result.gpkg_path}"]
    assert result.summary["runtime_seconds"] > 0


def test_a_failed_write_changes_nothing(unwritten, tmp_path, monkeypatch):
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("reserve.gpkg", "ranking.csv", "summary.txt"):
        (folder / name).write_bytes(b"previous " + name.encode())
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def fail(result, path, overwrite):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(run_files, "write_result", fail)
    with pytest.raises(DataFileError, match="nothing was changed"):
        write_outputs(aimed_at(unwritten, folder), lambda message: None, 0.0, None, None)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
