"""Tests for reserve.ownership: polygon reading, cover fractions, roles."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pytest
import shapely

from reserve.errors import DataFileError, InvalidInputError
from reserve.grid import Grid
from reserve.ownership import assign_roles, cover_fraction, read_polygons

CRS = "EPSG:6933"


def test_cover_fraction_hand_computed():
    g = Grid.covering((0.0, 1.0, 2999.0, 1000.0), cell_size=1000.0, crs=CRS)
    cells = g.polygons(np.arange(g.n_cells))
    public = shapely.union(shapely.box(500, 0, 1250, 1000), shapely.box(2000, 0, 3000, 100))
    got = cover_fraction(cells, public)
    assert got.tolist() == pytest.approx([0.5, 0.25, 0.1])


def test_cover_fraction_of_overlapping_polygons_counts_area_once(tmp_path):
    cells = shapely.box([0.0], [0.0], [10.0], [10.0])
    a = gpd.GeoDataFrame(geometry=[shapely.box(0, 0, 6, 10), shapely.box(4, 0, 8, 10)], crs=CRS)
    a.to_file(tmp_path / "pub.gpkg")
    merged = read_polygons(tmp_path / "pub.gpkg", CRS)
    assert cover_fraction(cells, merged).tolist() == pytest.approx([0.8])


def test_read_polygons_reprojects_and_merges_files(tmp_path):
    ll = gpd.GeoDataFrame(geometry=[shapely.box(0, 0, 0.01, 0.01)], crs="EPSG:4326")
    ll.to_file(tmp_path / "a.geojson", driver="GeoJSON")
    other = gpd.GeoDataFrame(geometry=[shapely.Point(0, 0).buffer(10)], crs=CRS)
    other.to_file(tmp_path / "b.gpkg")
    got = read_polygons([tmp_path / "a.geojson", tmp_path / "b.gpkg"], CRS)
    x1 = shapely.get_coordinates(gpd.GeoSeries([shapely.Point(0.01, 0)], crs=4326).to_crs(CRS))
    assert got.bounds[2] == pytest.approx(x1[0, 0], rel=1e-6)
    assert got.bounds[0] == pytest.approx(-10.0, abs=0.01)


def test_read_polygons_refuses_missing_crs_and_missing_file(tmp_path):
    frame = gpd.GeoDataFrame(geometry=[shapely.box(0, 0, 1, 1)])
    frame.to_file(tmp_path / "nocrs.gpkg")
    with pytest.raises(DataFileError, match="has no CRS"):
        read_polygons(tmp_path / "nocrs.gpkg", CRS, name="public")
    with pytest.raises(DataFileError, match="does not exist"):
        read_polygons(tmp_path / "nope.gpkg", CRS)


def test_roles_table():
    public = np.array([0.9, 0.9, 0.2, 0.2, 0.5, 0.51])
    surveyed = np.array([True, False, True, False, True, True])
    locked = np.array([False, False, False, True, False, False])
    got = assign_roles(public, surveyed, locked, public_threshold=0.5)
    # 0.5 is not above the threshold: private
    assert got.tolist() == ["train", "other", "candidate", "other", "candidate", "train"]
    with pytest.raises(InvalidInputError, match="public_threshold"):
        assign_roles(public, surveyed, public_threshold=2)


def test_cover_fraction_matches_plain_intersection_for_inside_edge_and_outside_cells():
    x0, y0 = np.repeat(np.arange(6.0), 6), np.tile(np.arange(6.0), 6)
    cells = shapely.box(x0, y0, x0 + 1, y0 + 1)
    region = shapely.Polygon([(0.5, 0.2), (4.7, 0.9), (3.3, 5.5), (0.1, 3.9)])
    expected = shapely.area(shapely.intersection(cells, region)) / shapely.area(cells)
    got = cover_fraction(cells, region)
    np.testing.assert_allclose(got, expected, atol=1e-12)
    assert (got == 1.0).any() and (got == 0.0).any() and ((got > 0) & (got < 1)).any()


def test_cells_mostly_outside_the_region_are_never_candidates():
    public = np.array([0.0, 0.0, 0.9, 0.9, 0.0])
    surveyed = np.array([True, False, True, True, True])
    outside = np.array([False, True, False, True, True])
    roles = assign_roles(public, surveyed, outside=outside).tolist()
    assert roles == ["candidate", "other", "train", "train", "other"]
