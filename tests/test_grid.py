"""Tests for reserve.grid: grid layout, point-to-cell arithmetic, per-cell aggregation."""

from __future__ import annotations

import numpy as np
import pyproj
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

from reserve.errors import InvalidInputError
from reserve.grid import Grid, aggregate_checklists, equal_area_crs, require_equal_area

CRS = "EPSG:6933"  # an equal-area CRS in metres


def test_covering_snaps_to_multiples_of_the_cell_size():
    g = Grid.covering((1500.0, -2500.0, 4100.0, 900.0), cell_size=1000.0, crs=CRS)
    assert (g.x0, g.y0) == (1000.0, 1000.0)
    # columns 1000..5000 (4), rows 1000..-3000 (4)
    assert (g.n_cols, g.n_rows) == (4, 4)
    assert g.bounds == (1000.0, -3000.0, 5000.0, 1000.0)


def test_cell_of_hand_computed():
    g = Grid.covering((0.0, 10.0, 2999.0, 1999.0), cell_size=1000.0, crs=CRS)
    assert (g.n_rows, g.n_cols) == (2, 3)
    x = [0.0, 999.9, 1000.0, 2500.0, 500.0, -1.0, 500.0]
    y = [1999.0, 1500.0, 1500.0, 500.0, 0.5, 500.0, 2000.5]
    # top row is row 0: y in (1000, 2000]; left and top edges belong to the cell
    assert g.cell_of(x, y).tolist() == [0, 0, 1, 5, 3, -1, -1]


def test_cell_of_ignores_nan():
    g = Grid.covering((0.0, 0.0, 10.0, 10.0), cell_size=5.0, crs=CRS)
    assert g.cell_of([np.nan], [1.0]).tolist() == [-1]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-5e5, 5e5), st.floats(-5e5, 5e5)),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from([250.0, 1000.0, 3000.0]),
)
def test_every_point_of_the_bounds_lands_in_the_cell_that_contains_it(points, size):
    x = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    g = Grid.covering((x.min(), y.min(), x.max(), y.max()), cell_size=size, crs=CRS)
    ids = g.cell_of(x, y)
    assert (ids >= 0).all()
    cells = g.polygons(ids)
    # The point is in (or on) its square, up to rounding of x - x0 at the last bit.
    assert (shapely.distance(cells, shapely.points(x, y)) <= 1e-9 * size).all()
    assert np.allclose(shapely.area(cells), size * size)


def test_polygons_are_squares_at_the_right_place():
    g = Grid.covering((0.0, 0.0, 2999.0, 1999.0), cell_size=1000.0, crs=CRS)
    # n_cols = 3; cell 4 is row 1, col 1
    poly = g.polygons([4])[0]
    assert poly.bounds == (1000.0, 0.0, 2000.0, 1000.0)
    with pytest.raises(InvalidInputError):
        g.polygons([g.n_cells])


def test_cells_in_region_excludes_cells_that_only_touch():
    g = Grid.covering((0.0, 0.0, 3999.0, 3999.0), cell_size=1000.0, crs=CRS)
    region = shapely.box(1000.0, 1000.0, 2000.0, 2500.0)
    got = g.cells_in(region)
    expected = g.cell_of([1500.0, 1500.0], [1500.0, 2200.0])
    assert got.tolist() == sorted(expected.tolist())


def test_aggregate_checklists_hand_computed():
    cell = np.array([7, 7, 7, 2, -1])
    det = np.array([False, False, True, False, True])
    minutes = np.array([30.0, 90.0, np.nan, 60.0, 10.0])
    km = np.array([1.0, np.nan, 2.0, 0.0, 5.0])
    a = aggregate_checklists(cell, det, minutes, km)
    assert a.index.tolist() == [2, 7]
    assert a.loc[7, "n_checklists"] == 3
    assert a.loc[7, "n_detections"] == 1
    assert a.loc[7, "label"] == 1
    assert a.loc[2, "label"] == 0
    assert a.loc[7, "effort_hours"] == pytest.approx(2.0)
    assert a.loc[7, "effort_km"] == pytest.approx(3.0)
    assert a["n_checklists"].sum() == 4  # the point outside the grid is ignored


def test_equal_area_crs_is_centred_and_equal_area():
    crs = equal_area_crs(-83.5, 32.7)
    x, y = pyproj.Transformer.from_crs(4326, crs, always_xy=True).transform(-83.5, 32.7)
    assert abs(x) < 1e-6 and abs(y) < 1e-6
    assert require_equal_area(crs) == crs


@pytest.mark.parametrize("bad", ["EPSG:4326", "EPSG:3857", "not a crs"])
def test_require_equal_area_refuses_bad_crs(bad):
    with pytest.raises(InvalidInputError, match="crs="):
        require_equal_area(bad)


def test_bad_cell_size():
    with pytest.raises(InvalidInputError, match="cell_size"):
        Grid.covering((0, 0, 1, 1), cell_size=0, crs=CRS)


def test_default_crs_name_uses_hemisphere_letters():
    from reserve.grid import equal_area_crs

    assert equal_area_crs(-71.6, 44.05).name.endswith("44.0500N 71.6000W")
    assert equal_area_crs(10.0, -5.0).name.endswith("5.0000S 10.0000E")
