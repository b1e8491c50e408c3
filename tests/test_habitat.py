"""Tests for reserve.habitat: exact zonal fractions and statistics on tiny in-code rasters."""

from __future__ import annotations

import numpy as np
import pyproj
import pytest
import rasterio
from rasterio.transform import from_origin

from reserve.errors import DataFileError, InvalidInputError
from reserve.grid import Grid
from reserve.habitat import (
    RasterLayer,
    categorical_fractions,
    continuous_stats,
    feature_name,
    habitat_features,
    read_legend,
)

CRS = "EPSG:6933"  # cylindrical equal area: metres, and x is proportional to longitude


def raster(path, values, transform, crs=CRS, nodata=None, dtype=None):
    values = np.asarray(values)
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=values.shape[1],
        height=values.shape[0],
        count=1,
        dtype=dtype or values.dtype,
        crs=crs,
        transform=transform,
        nodata=nodata,
    ) as dst:
        dst.write(values.astype(dtype or values.dtype), 1)
    return path


@pytest.fixture
def two_cells():
    # cells [0, 1000] x [0, 1000] (id 0) and [1000, 2000] x [0, 1000] (id 1)
    return Grid.covering((0.0, 1.0, 1999.0, 1000.0), cell_size=1000.0, crs=CRS)


# 5 columns of 400 m (pixel 2 straddles the cell edge at x = 1000), 2 rows of 500 m
CLASSES = [[1, 1, 2, 3, 3], [1, 2, 2, 3, 1]]
STRADDLE = from_origin(0.0, 1000.0, 400.0, 500.0)


def test_class_fractions_with_pixels_straddling_cells(tmp_path, two_cells):
    path = raster(tmp_path / "lc.tif", CLASSES, STRADDLE, dtype="uint8")
    got = categorical_fractions(two_cells, [0, 1], path, "lc", legend={1: "a", 2: "b", 3: "c"})
    # Hand computed in the test's docstring terms: cell 0 holds columns 0, 1 and half of 2.
    # row 0: 1 (400 m), 1 (400), 2 (200); row 1: 1 (400), 2 (400), 2 (200); rows 500 m high
    expected0 = {"lc_a": 1200 / 2000, "lc_b": 800 / 2000, "lc_c": 0.0}
    # cell 1: row 0: 2 (200), 3 (400), 3 (400); row 1: 2 (200), 3 (400), 1 (400)
    expected1 = {"lc_a": 400 / 2000, "lc_b": 400 / 2000, "lc_c": 1200 / 2000}
    assert got.loc[0].to_dict() == pytest.approx(expected0)
    assert got.loc[1].to_dict() == pytest.approx(expected1)


def test_nodata_pixels_are_left_out_of_the_denominator(tmp_path, two_cells):
    values = np.array(CLASSES)
    values[0, 0] = 0  # 400 m x 500 m of nodata: 1600 of 2000 m of width-rows stay valid
    path = raster(tmp_path / "lc.tif", values, STRADDLE, nodata=0, dtype="uint8")
    got = categorical_fractions(two_cells, [0], path, "lc", legend={0: "none", 1: "a", 2: "b"})
    assert list(got.columns) == ["lc_a", "lc_b"]  # the nodata class gets no column
    assert got.loc[0, "lc_a"] == pytest.approx(800 / 1600)
    assert got.loc[0, "lc_b"] == pytest.approx(800 / 1600)


def test_classes_found_without_a_legend(tmp_path, two_cells):
    path = raster(tmp_path / "lc.tif", CLASSES, STRADDLE, dtype="uint8")
    got = categorical_fractions(two_cells, [0, 1], path, "Land Cover")
    assert list(got.columns) == [f"land_cover_class_{v}" for v in (1, 2, 3)]
    assert np.allclose(got.sum(axis=1), 1.0)


def test_continuous_mean_and_sd_weighted_by_area(tmp_path, two_cells):
    elev = np.array([[10.0, 20.0, 30.0, 40.0, 50.0], [60.0, 70.0, 80.0, 90.0, 100.0]])
    path = raster(tmp_path / "dem.tif", elev, STRADDLE, dtype="float32")
    got = continuous_stats(two_cells, [0, 1], path, "elevation")
    # Independent oracle: areas of each pixel inside cell 0 are 400, 400, 200 m wide x 500 m.
    w0 = np.array([400, 400, 200, 400, 400, 200], dtype=float)
    v0 = np.array([10, 20, 30, 60, 70, 80], dtype=float)
    mean0 = np.average(v0, weights=w0)
    sd0 = np.sqrt(np.average((v0 - mean0) ** 2, weights=w0))
    assert got.loc[0, "elevation_mean"] == pytest.approx(mean0)
    assert got.loc[0, "elevation_sd"] == pytest.approx(sd0)
    w1 = np.array([200, 400, 400, 200, 400, 400], dtype=float)
    v1 = np.array([30, 40, 50, 80, 90, 100], dtype=float)
    assert got.loc[1, "elevation_mean"] == pytest.approx(np.average(v1, weights=w1))


def test_cells_partly_outside_the_raster_get_nan_and_a_warning(tmp_path, two_cells):
    # the raster covers x in [0, 1600]: cell 1 only partly
    path = raster(
        tmp_path / "lc.tif", [[1, 1, 2, 2]], from_origin(0, 1000, 400, 1000), dtype="uint8"
    )
    with pytest.warns(UserWarning, match="does not fully cover 1 of 2 cells"):
        got = categorical_fractions(two_cells, [0, 1], path, "lc", legend={1: "a", 2: "b"})
    assert got.loc[0].tolist() == pytest.approx([0.8, 0.2])
    assert got.loc[1].isna().all()


def test_region_outside_the_raster_is_an_error(tmp_path, two_cells):
    path = raster(tmp_path / "far.tif", [[1]], from_origin(1e6, 1e6, 100, 100), dtype="uint8")
    with pytest.raises(DataFileError, match="does not overlap the region"):
        categorical_fractions(two_cells, [0, 1], path, "lc")


def test_raster_without_crs_is_an_error(tmp_path, two_cells):
    path = raster(tmp_path / "nocrs.tif", CLASSES, STRADDLE, crs=None, dtype="uint8")
    with pytest.raises(DataFileError, match="has no CRS"):
        continuous_stats(two_cells, [0], path, "x")


def test_reprojected_raster_matches_the_geometry(tmp_path):
    """A lon/lat raster split at one meridian: the split cell's fraction follows x(lon)."""
    to_x = pyproj.Transformer.from_crs(4326, CRS, always_xy=True)
    split_lon = 0.0135  # about 1500 m east of lon 0 in EPSG:6933
    split_x = to_x.transform(split_lon, 0.0)[0]
    res = 0.0005  # about 55 m
    lons = -0.05 + res * (np.arange(200) + 0.5)
    values = np.where(lons < split_lon, 1, 2)[None, :].repeat(100, axis=0)
    path = raster(
        tmp_path / "ll.tif", values, from_origin(-0.05, 0.025, res, res), "EPSG:4326", None, "uint8"
    )
    g = Grid.covering((-3000.0, -2000.0, 2999.0, 1999.0), cell_size=1000.0, crs=CRS)
    cells = g.cell_of([-500.0, 1500.0, 2500.0], [500.0, 500.0, 500.0])
    got = categorical_fractions(g, cells, path, "lc", legend={1: "west", 2: "east"})
    straddled = (split_x - 1000.0) / 1000.0  # share of cell [1000, 2000] west of the split
    assert got["lc_west"].tolist() == pytest.approx([1.0, straddled, 0.0], abs=0.1)


def test_feature_names_and_legend_csv(tmp_path):
    csv = tmp_path / "classes.csv"
    csv.write_text('class,name,description\n1,Evergreen Needleleaf Forests,"x, y"\n13,Urban,z\n')
    assert read_legend(csv) == {1: "Evergreen Needleleaf Forests", 13: "Urban"}
    assert feature_name("landcover", "Evergreen Needleleaf Forests") == (
        "landcover_evergreen_needleleaf_forests"
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(DataFileError, match="value column"):
        read_legend(bad)


def test_habitat_features_combines_any_number_of_rasters(tmp_path, two_cells):
    lc = raster(tmp_path / "lc.tif", CLASSES, STRADDLE, dtype="uint8")
    dem = raster(tmp_path / "dem.tif", np.ones((2, 5)), STRADDLE, dtype="float32")
    got = habitat_features(
        two_cells,
        [0, 1],
        [
            RasterLayer("lc", lc, "categorical", {1: "a", 2: "b", 3: "c"}),
            RasterLayer("elevation", dem, "continuous"),
        ],
    )
    assert list(got.columns) == ["lc_a", "lc_b", "lc_c", "elevation_mean", "elevation_sd"]
    assert got["elevation_mean"].tolist() == [1.0, 1.0]
    assert got["elevation_sd"].tolist() == [0.0, 0.0]
    with pytest.raises(InvalidInputError, match="repeat"):
        habitat_features(two_cells, [0], [RasterLayer("e", dem, "continuous")] * 2)


@pytest.mark.parametrize("crs", [CRS, "EPSG:4326"])
def test_processing_in_bands_of_rows_changes_nothing(tmp_path, monkeypatch, crs):
    import reserve.habitat as habitat

    rng = np.random.default_rng(0)
    values = rng.integers(1, 4, (40, 60)).astype("uint8")
    if crs == CRS:
        transform = from_origin(-3100.0, 2900.0, 110.0, 130.0)
    else:
        transform = from_origin(-0.032, 0.026, 0.0011, 0.0013)
    path = raster(tmp_path / "lc.tif", values, transform, crs, dtype="uint8")
    g = Grid.covering((-3000.0, -2000.0, 2999.0, 1999.0), cell_size=1000.0, crs=CRS)
    cells = np.arange(g.n_cells)
    whole = categorical_fractions(g, cells, path, "lc")
    monkeypatch.setattr(habitat, "MAX_BAND_PIXELS", 10)  # one row of cells per band
    banded = categorical_fractions(g, cells, path, "lc")
    assert list(banded.columns) == ["lc_class_1", "lc_class_2", "lc_class_3"]
    np.testing.assert_allclose(banded.to_numpy(), whole.to_numpy(), rtol=1e-12, atol=1e-12)
    full = whole.dropna()
    assert np.allclose(full.sum(axis=1), 1.0)
    if crs == CRS:  # the raster spans y in [-2300, 2900]: only the bottom row is partial
        assert len(full) == g.n_cells - g.n_cols
