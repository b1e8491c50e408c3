"""Tests for reserve.default_region and the pipeline that regenerates it."""

from __future__ import annotations

import shutil
import sys
import threading

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pyproj
import pytest

import reserve
from reserve import default_region as dr
from reserve.errors import DataFileError
from reserve.evaluate import read_truth

_OPENED: list[str] = []
_RECORDING = threading.Event()


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _RECORDING.is_set() and args and isinstance(args[0], str | bytes):
        _OPENED.append(str(args[0]))


sys.addaudithook(_audit)


@pytest.fixture(scope="module")
def no_truth_dir(tmp_path_factory):
    """A copy of the default region *without* its truth file (selection must not need it)."""
    folder = tmp_path_factory.mktemp("region")
    for key in ("landcover", "legend", "elevation", "region", "public", "ebd", "sed"):
        shutil.copy2(dr.default_data_dir() / dr.FILES[key], folder / dr.FILES[key])
    return folder


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    """The default region ingested once into a fresh cache; records the files it opened."""
    cache = tmp_path_factory.mktemp("cache")
    _OPENED.clear()
    _RECORDING.set()
    try:
        path = dr.default_planning_units(cache)
    finally:
        _RECORDING.clear()
    return path, list(_OPENED)


def test_ingest_is_cached_and_keyed(cached, monkeypatch):
    path, _ = cached
    assert path.is_file() and path.name == f"default_region-{dr.cache_key()[:16]}.gpkg"
    stamp = path.stat().st_mtime_ns
    assert dr.default_planning_units(path.parent) == path
    assert path.stat().st_mtime_ns == stamp  # served from the cache, not rewritten
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp left
    key = dr.cache_key()
    monkeypatch.setattr(reserve, "__version__", "0.0.0-test")
    assert dr.cache_key() != key


def test_a_changed_input_changes_the_key(no_truth_dir, tmp_path, monkeypatch):
    folder = tmp_path / "region"
    shutil.copytree(no_truth_dir, folder)
    monkeypatch.setenv("RESERVE_DEFAULT_REGION_DIR", str(folder))
    key = dr.cache_key()
    legend = folder / dr.FILES["legend"]
    legend.write_bytes(legend.read_bytes() + b"\n")
    assert dr.cache_key() != key


def test_overwrite_ingests_again(cached):
    path, _ = cached
    stamp = path.stat().st_mtime_ns
    assert dr.default_planning_units(path.parent, overwrite=True) == path
    assert path.stat().st_mtime_ns != stamp


def test_cells_match_the_truth(cached):
    path, opened = cached
    assert not [p for p in opened if dr.FILES["truth"] in p]  # ingest never reads the truth
    units = pyogrio.read_dataframe(path, layer="planning_units")
    truth = read_truth(dr.default_truth_path())
    assert np.array_equal(np.sort(units["cell_id"].to_numpy()), truth.index.to_numpy())
    # Same cells, not merely the same ids: the centres agree with the truth's lon/lat.
    centre = units.geometry.centroid.to_crs(4326)
    raw = pd.read_csv(dr.default_truth_path()).set_index("cell_id").loc[units["cell_id"]]
    assert np.abs(centre.x.to_numpy() - raw["lon"].to_numpy()).max() < 1e-5
    assert np.abs(centre.y.to_numpy() - raw["lat"].to_numpy()).max() < 1e-5
    train = units["role"] == "train"
    assert train.sum() > 100 and set(units.loc[train, "label"]) == {0, 1}
    features = units.columns[units.columns.str.startswith(("landcover_", "elevation_"))]
    assert len(features) > 5
    fit = units["role"].isin(["train", "candidate"])
    assert np.isfinite(units.loc[fit, features].to_numpy(float)).all()
    prevalence = truth["occupied"].mean()
    assert 0.15 <= prevalence <= 0.30
    # Detections happen only in occupied cells.
    det = units.loc[units["n_detections"] > 0, "cell_id"]
    assert len(det) > 50 and truth.loc[det, "occupied"].all()
    # Candidates lie mostly in Georgia: cells its border merely clips cannot be bought.
    georgia = gpd.read_file(dr.default_region_outline_path()).to_crs(units.crs).union_all()
    share = units.geometry.intersection(georgia).area / units.geometry.area
    cand = (units["role"] == "candidate").to_numpy()
    assert (share[cand] > 0.5).all() and ((share <= 0.5) & ~cand).sum() > 100
    # the ingest projects the outline itself (edges densified differently): close, not equal
    np.testing.assert_allclose(units["region_fraction"], share, atol=0.01)


def test_both_virtual_species_are_labelled(cached):
    path, opened = cached
    assert not [p for p in opened if "truth" in p]
    units = pyogrio.read_dataframe(path, layer="planning_units", read_geometry=False)
    assert (units["label"] == units["label__virtual_thrush"]).all()  # label is the thrush's
    assert (units["n_detections"] == units["n_detections__virtual_thrush"]).all()
    train = units["role"] == "train"
    assert set(units.loc[train, "label__virtual_quail"]) == {0, 1}
    assert set(units.loc[units["role"] == "candidate", "label__virtual_quail"]) == {-1, 0, 1}
    surveyed = units["label"] >= 0
    assert ((units["label__virtual_quail"] >= 0) == surveyed).all()
    quail = read_truth(dr.default_truth_path("Virtual Quail"))
    det = units.loc[units["n_detections__virtual_quail"] > 0, "cell_id"]
    assert len(det) > 50 and quail.loc[det, "occupied"].all()
    assert dr.default_truth_path("Virtual Quail").name == dr.FILES["truth_virtual_quail"]


#: SHA-256 of the one-species files as shipped before the second species was added: the SED,
#: the thrush's truth and the EBD text without the quail's rows must stay these bytes.
_FIRST_SPECIES_SHA256 = {
    "sed": "d2346bf7f59ca18d6097b2788a25f5ecf3978d480509518d4d3141cce0100973",
    "truth": "629565567b5c70bae157f298a3b6e6e8c102647baa992b54cb33b42e3f145316",
    "ebd_text_without_quail": "791ae47e2fcb2e2175b1c18bbb8b040f33656d70b3eb1625a8098256337ceaf8",
}


def test_first_species_bytes_are_unchanged():
    import gzip
    import hashlib

    folder = dr.default_data_dir()
    for key in ("sed", "truth"):
        digest = hashlib.sha256((folder / dr.FILES[key]).read_bytes()).hexdigest()
        assert digest == _FIRST_SPECIES_SHA256[key], key
    lines = gzip.decompress((folder / dr.FILES["ebd"]).read_bytes()).splitlines(keepends=True)
    quail = [i for i, line in enumerate(lines) if b"\tVirtual Quail\t" in line]
    assert quail and quail == list(range(quail[0], len(lines)))  # appended, after all others
    text = b"".join(lines[: quail[0]])
    digest = hashlib.sha256(text).hexdigest()
    assert digest == _FIRST_SPECIES_SHA256["ebd_text_without_quail"]


def test_selection_never_reads_the_truth(no_truth_dir, cached, monkeypatch):
    select = pytest.importorskip("reserve.select")
    monkeypatch.setenv("RESERVE_DEFAULT_REGION_DIR", str(no_truth_dir))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cached[0].parent.parent / "xdg"))
    _OPENED.clear()
    _RECORDING.set()
    try:
        result = select.select_reserve(30)  # ingest included (fresh cache), no truth on disk
    finally:
        _RECORDING.clear()
    assert len(result.selected) == 30
    assert not [p for p in _OPENED if dr.FILES["truth"] in p]
    with pytest.raises(DataFileError, match=r"truth\.csv\.gz"):
        dr.default_truth_path()


def test_outline_and_public_land_paths():
    for path in (dr.default_public_land_path(), dr.default_region_outline_path()):
        frame = pyogrio.read_dataframe(path)
        assert frame.crs == pyproj.CRS.from_epsg(4326) and len(frame) >= 1
    assert len(pyogrio.read_dataframe(dr.default_public_land_path())) == 4


def test_missing_file_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("RESERVE_DEFAULT_REGION_DIR", str(tmp_path))
    with pytest.raises(DataFileError, match=r"pipelines\.default_region"):
        dr.default_planning_units(tmp_path / "cache")


def test_unwritable_cache_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DataFileError, match="cache_dir"):
        dr.default_planning_units(blocker / "cache")


def test_pipeline_regenerates_the_shipped_files(tmp_path):
    from pipelines.default_region import build

    for key in ("landcover", "legend", "elevation", "region", "public"):
        shutil.copy2(dr.default_data_dir() / dr.FILES[key], tmp_path / dr.FILES[key])
    build(0, tmp_path, source=None)
    for key in ("ebd", "sed", "truth", "truth_virtual_quail", "meta"):
        shipped = (dr.default_data_dir() / dr.FILES[key]).read_bytes()
        assert (tmp_path / dr.FILES[key]).read_bytes() == shipped, key


def test_data_folder_is_small():
    total = sum(p.stat().st_size for p in dr.default_data_dir().iterdir())
    assert total < 10_000_000


def test_landscape_rebuild_is_byte_identical(tmp_path):
    from pipelines.default_region import DEFAULT_SOURCE, build_landscape

    if not DEFAULT_SOURCE.is_dir():
        pytest.skip(f"the shared bundle {DEFAULT_SOURCE} is needed to rebuild the landscape")
    build_landscape(DEFAULT_SOURCE, tmp_path)
    for key in ("landcover", "legend", "elevation", "region", "public"):
        shipped = (dr.default_data_dir() / dr.FILES[key]).read_bytes()
        assert (tmp_path / dr.FILES[key]).read_bytes() == shipped, key
