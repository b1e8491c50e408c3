"""Tests for pipelines.land_price: the synthetic price surface and the priced copy of cells."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pyogrio
import pytest
import shapely

from pipelines.land_price import PRICE_COLUMN, land_price, priced_cells
from reserve.errors import DataFileError, OutputExistsError


def grid(n_side: int = 10, seed: int = 0) -> gpd.GeoDataFrame:
    rng = np.random.default_rng(seed)
    n = n_side * n_side
    r, c = np.divmod(np.arange(n), n_side)
    urban = np.where(rng.uniform(size=n) < 0.05, 0.8, 0.0)
    crop = rng.uniform(0, 1, n)
    return gpd.GeoDataFrame(
        {
            "cell_id": np.arange(n),
            "landcover_urban_and_built_up_lands": urban,
            "landcover_croplands": crop,
        },
        geometry=shapely.box(c * 3000.0, r * 3000.0, c * 3000.0 + 3000, r * 3000.0 + 3000),
        crs=5070,
    )


def test_prices_are_positive_deterministic_and_follow_cell_id():
    u = grid()
    p = land_price(u, seed=1)
    assert np.isfinite(p).all() and (p > 0).all()
    np.testing.assert_array_equal(p, land_price(u, seed=1))
    assert not np.array_equal(p, land_price(u, seed=2))
    # reordering the rows reorders the prices and changes nothing else
    perm = np.random.default_rng(0).permutation(len(u))
    np.testing.assert_allclose(land_price(u.iloc[perm], seed=1), p[perm])


def test_prices_fall_with_distance_to_developed_land_and_rise_with_cropland():
    u = grid()
    p = land_price(u, noise=0.0, crop=0.0)
    xy = np.column_stack([u.geometry.centroid.x, u.geometry.centroid.y])
    dev = u["landcover_urban_and_built_up_lands"].to_numpy() > 0.2
    d = np.min(np.linalg.norm(xy[:, None] - xy[dev][None], axis=2), axis=1) / 1000
    np.testing.assert_allclose(p, 2.0 * (1 + 4.0 * np.exp(-d / 15.0)))
    with_crop = land_price(u, noise=0.0)
    np.testing.assert_allclose(with_crop / p, 1 + 0.5 * u["landcover_croplands"].to_numpy())


def test_bad_input_is_refused(tmp_path):
    with pytest.raises(DataFileError, match="lacks"):
        land_price(grid().drop(columns="landcover_croplands"))
    with pytest.raises(DataFileError, match="projected"):
        land_price(grid().to_crs(4326))


def test_priced_cells_writes_a_copy_and_never_overwrites(tmp_path):
    src = tmp_path / "cells.gpkg"
    pyogrio.write_dataframe(grid(), src, layer="planning_units", driver="GPKG")
    out = priced_cells(src, tmp_path / "priced.gpkg", seed=3)
    back = pyogrio.read_dataframe(out, layer="planning_units")
    np.testing.assert_allclose(back[PRICE_COLUMN], np.round(land_price(grid(), 3), 4))
    with pytest.raises(OutputExistsError):
        priced_cells(src, out)
    assert priced_cells(src, out, seed=4, overwrite=True) == out
