"""Grid adjacency, boundary length and patches against shapely's geometry as the oracle."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from reserve.adjacency import boundary_length, grid_adjacency, patch_labels
from reserve.errors import InvalidInputError


def _region(seed: int, size: float = 3000.0, shape: tuple[int, int] = (7, 9), keep: float = 0.8):
    """Cells of a ragged region (some lattice cells missing), shuffled, offset from 0."""
    rng = np.random.default_rng(seed)
    x0, y0 = 1_234_000.0 + size * rng.integers(50), -987_000.0 + size * rng.integers(50)
    cells = [
        shapely.box(x0 + c * size, y0 + r * size, x0 + (c + 1) * size, y0 + (r + 1) * size)
        for r in range(shape[0])
        for c in range(shape[1])
        if rng.random() < keep
    ]
    return np.asarray(cells, dtype=object)[rng.permutation(len(cells))]


def _oracle_pairs(cells: np.ndarray, queen: bool) -> dict[tuple[int, int], float]:
    out = {}
    for a in range(cells.size):
        for b in range(a + 1, cells.size):
            if not shapely.touches(cells[a], cells[b]):
                continue
            shared = shapely.intersection(cells[a], cells[b]).length
            if shared > 0 or queen:
                out[(a, b)] = shared
    return out


def _oracle_boundary(cells: np.ndarray, sel: np.ndarray, edge_factor: float) -> float:
    mine = shapely.unary_union(cells[sel]).boundary
    outside = shapely.unary_union(cells).boundary
    on_border = shapely.intersection(mine, outside).length
    return mine.length - (1.0 - edge_factor) * on_border


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("queen", [False, True])
def test_pairs_match_the_geometry(seed, queen):
    cells = _region(seed)
    adj = grid_adjacency(cells, queen=queen)
    got = {(int(i), int(j)): float(x) for i, j, x in zip(adj.i, adj.j, adj.length, strict=True)}
    want = _oracle_pairs(cells, queen)
    assert got.keys() == want.keys()
    assert np.allclose([got[p] for p in want], list(want.values()))
    assert adj.cell_size == 3000.0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("edge_factor", [1.0, 0.5, 0.0])
def test_boundary_length_matches_the_union(seed, edge_factor):
    cells = _region(seed)
    adj = grid_adjacency(cells)
    sel = np.random.default_rng(100 + seed).random(cells.size) < 0.4
    sel[0] = True
    got = boundary_length(adj, sel, edge_factor)
    assert got == pytest.approx(_oracle_boundary(cells, sel, edge_factor), rel=1e-9)
    assert boundary_length(adj, np.flatnonzero(sel), edge_factor) == got


@pytest.mark.parametrize("seed", range(6))
def test_patches_are_the_parts_of_the_union(seed):
    cells = _region(seed)
    sel = np.random.default_rng(200 + seed).random(cells.size) < 0.35
    labels = patch_labels(grid_adjacency(cells), sel)
    union = shapely.unary_union(cells[sel])
    parts = list(getattr(union, "geoms", [union]))
    assert labels.max() == len(parts)
    assert (labels[~sel] == 0).all() and (labels[sel] > 0).all()
    sizes = np.bincount(labels[sel])[1:]
    assert sorted(sizes, reverse=True) == sizes.tolist()  # 1 is the largest patch
    for p in range(1, labels.max() + 1):  # each label is one part of the union
        assert shapely.unary_union(cells[labels == p]).geom_type == "Polygon"


def test_queen_patches_join_corners():
    cells = np.asarray([shapely.box(x, y, x + 1, y + 1) for y in (0, 1) for x in (0, 1)])
    diagonal = np.array([True, False, False, True])
    assert patch_labels(grid_adjacency(cells), diagonal).tolist() == [1, 0, 0, 2]
    assert patch_labels(grid_adjacency(cells, queen=True), diagonal).tolist() == [1, 0, 0, 1]


@pytest.mark.parametrize(
    ("cells", "match"),
    [
        ([shapely.box(0, 0, 1, 1), shapely.box(1, 0, 2, 2)], "not a regular square grid"),
        ([shapely.box(0, 0, 1, 1), shapely.box(1.5, 0, 2.5, 1)], "not a regular square grid"),
        ([shapely.box(0, 0, 1, 1), shapely.Polygon([(1, 0), (2, 0), (1, 1)])], "square grid"),
        ([shapely.box(0, 0, 1, 1), shapely.box(0, 0, 1, 1)], "cover the same grid cell"),
        ([shapely.box(0, 0, 1, 1), None], "have no geometry"),
        ([], "at least one planning unit"),
    ],
)
def test_not_a_grid_is_refused_in_one_line(cells, match):
    with pytest.raises(InvalidInputError, match=match) as info:
        grid_adjacency(np.asarray(cells, dtype=object))
    assert "\n" not in str(info.value)
