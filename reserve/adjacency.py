"""Which planning units touch, how long the boundary of a selection is, and its patches.

Planning units from ``reserve ingest`` are the cells of a regular square grid. Their adjacency
is read off the grid: each cell's lower-left corner gives its (row, column) on the lattice, and
two cells are *rook* neighbours when they share an edge, *queen* neighbours when they share an
edge or a corner. It is computed once, by sorting lattice keys (no pairwise geometry tests),
and kept sparse.

The boundary length of a selection is defined as Marxan and prioritizr define it: the edges
of selected cells not shared with another selected cell, in the grid's units (metres). An edge
that faces no planning unit at all (the region's border, a coast) counts ``edge_factor`` times
its length (prioritizr's ``edge_factor``; 0.5 by default, as prioritizr's default). An edge
shared with a planning unit that is not selected counts in full.

Examples
--------
>>> import shapely
>>> cells = [shapely.box(x, y, x + 1, y + 1) for y in (0, 1) for x in (0, 1, 2)]
>>> adj = grid_adjacency(cells)
>>> adj.n_pairs, adj.cell_size
(7, 1.0)
>>> pick = np.array([True, True, False, False, False, False])
>>> float(boundary_length(adj, pick, edge_factor=1.0))
6.0
>>> patch_labels(adj, np.array([True, False, True, False, False, False])).tolist()
[1, 0, 2, 0, 0, 0]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from reserve.errors import InvalidInputError

__all__ = ["EDGE_FACTOR", "Adjacency", "boundary_length", "grid_adjacency", "patch_labels"]

#: Default weight of an edge that faces no planning unit (prioritizr's default).
EDGE_FACTOR = 0.5

#: Relative tolerance on the lattice: corners may be off by this share of a cell.
_LATTICE_RTOL = 1e-6

_ROOK = ((0, 1), (1, 0))
_QUEEN = ((0, 1), (1, 0), (1, 1), (1, -1))


@dataclass(frozen=True)
class Adjacency:
    """The neighbour pairs of the planning units of one regular grid.

    Attributes
    ----------
    n : int
        Planning units (positions ``0 .. n - 1``, in the order given).
    i, j : numpy.ndarray of int
        The neighbour pairs, ``i < j``, each once.
    length : numpy.ndarray of float
        The edge the pair shares (``cell_size`` for rook pairs, 0 for queen-only corners).
    degree : numpy.ndarray of int
        Rook neighbours of each unit (0 to 4).
    cell_size : float
        Side of a cell, in the grid's units.
    queen : bool
        Whether corner neighbours are pairs too (they count for patches, not for boundary).
    """

    n: int
    i: np.ndarray
    j: np.ndarray
    length: np.ndarray
    degree: np.ndarray
    cell_size: float
    queen: bool = False

    @property
    def n_pairs(self) -> int:
        """Number of neighbour pairs."""
        return int(self.i.size)

    def outer(self) -> np.ndarray:
        """Length of each unit's edges that face no planning unit."""
        return self.cell_size * (4 - self.degree).astype(np.float64)

    def matrix(self) -> sparse.csr_matrix:
        """The symmetric ``n x n`` matrix of shared edge lengths (0 for corners)."""
        a = sparse.coo_matrix((self.length, (self.i, self.j)), shape=(self.n, self.n))
        return (a + a.T).tocsr()


def _lattice(geometry: object) -> tuple[np.ndarray, np.ndarray, float]:
    """Row and column of each cell on the grid's lattice, and the cell size."""
    geoms = np.asarray(geometry, dtype=object).reshape(-1)
    if geoms.size == 0:
        raise InvalidInputError("adjacency needs at least one planning unit; received none")
    empty = shapely.is_missing(geoms) | shapely.is_empty(geoms)
    if empty.any():
        raise InvalidInputError(
            f"{int(empty.sum())} planning units have no geometry, so their neighbours are "
            "unknown; re-create the cells with 'reserve ingest'"
        )
    b = shapely.bounds(geoms)
    w, h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    size = float(np.median(w))
    tol = _LATTICE_RTOL * max(size, 1e-300)
    square = (np.abs(w - size) <= tol) & (np.abs(h - size) <= tol)
    square &= np.abs(shapely.area(geoms) - size * size) <= 2 * tol * max(size, 1.0)
    col_f, row_f = (b[:, 0] - b[:, 0].min()) / size, (b[:, 1] - b[:, 1].min()) / size
    col, row = np.rint(col_f).astype(np.int64), np.rint(row_f).astype(np.int64)
    on = (np.abs(col_f - col) <= _LATTICE_RTOL) & (np.abs(row_f - row) <= _LATTICE_RTOL)
    bad = np.flatnonzero(~(square & on))
    if size <= 0 or bad.size:
        first = int(bad[0]) if bad.size else 0
        raise InvalidInputError(
            f"the planning units are not a regular square grid (unit at position {first}, "
            f"and {max(bad.size - 1, 0)} more, is not a {size:g} x {size:g} square on the "
            "grid's lattice), so their neighbours cannot be derived; use the cells written "
            "by 'reserve ingest', or drop the boundary penalty"
        )
    return row, col, size


def grid_adjacency(geometry: object, *, queen: bool = False) -> Adjacency:
    """The neighbour pairs of planning units that are cells of one regular square grid.

    Parameters
    ----------
    geometry : array-like of shapely.Polygon
        One square per planning unit, axis-aligned, all of one size, corners on one lattice
        (as ``reserve ingest`` writes them).
    queen : bool, default=False
        Also pair cells that share only a corner (they join patches but share no boundary).

    Returns
    -------
    Adjacency

    Raises
    ------
    InvalidInputError
        A unit without geometry, not a square of the common size, off the lattice, or two
        units on one cell.
    """
    row, col, size = _lattice(geometry)
    width = int(col.max()) + 3
    key = (row + 1) * width + (col + 1)
    order = np.argsort(key, kind="stable")
    sk = key[order]
    dup = np.flatnonzero(np.diff(sk) == 0)
    if dup.size:
        raise InvalidInputError(
            f"planning units at positions {int(order[dup[0]])} and {int(order[dup[0] + 1])} "
            "cover the same grid cell; each cell must appear once"
        )
    ii, jj, ll = [], [], []
    for dr, dc in _QUEEN if queen else _ROOK:
        want = key + dr * width + dc
        at = np.minimum(np.searchsorted(sk, want), sk.size - 1)
        hit = sk[at] == want
        ii.append(np.flatnonzero(hit))
        jj.append(order[at[hit]])
        ll.append(np.full(int(hit.sum()), size if dr == 0 or dc == 0 else 0.0))
    i, j, length = np.concatenate(ii), np.concatenate(jj), np.concatenate(ll)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    srt = np.lexsort((hi, lo))
    lo, hi, length = lo[srt], hi[srt], length[srt]
    rook = length > 0
    degree = np.bincount(lo[rook], minlength=row.size) + np.bincount(hi[rook], minlength=row.size)
    return Adjacency(
        n=int(row.size), i=lo, j=hi, length=length, degree=degree, cell_size=size, queen=queen
    )


def _mask(adj: Adjacency, selected: object) -> np.ndarray:
    sel = np.asarray(selected)
    if sel.dtype != bool:
        mask = np.zeros(adj.n, dtype=bool)
        mask[sel.astype(np.int64)] = True
        return mask
    if sel.shape != (adj.n,):
        raise InvalidInputError(f"selected must have {adj.n} entries; received {sel.shape}")
    return sel


def boundary_length(adj: Adjacency, selected: object, edge_factor: float = EDGE_FACTOR) -> float:
    """The exposed boundary of the selected units, in the grid's units.

    Parameters
    ----------
    adj : Adjacency
    selected : array-like of bool of shape (n,), or of int
        A mask of the selected units, or their positions.
    edge_factor : float, default=EDGE_FACTOR
        Weight of edges that face no planning unit.

    Returns
    -------
    float
        ``sum over selected of (4 cells' edges, outer ones times edge_factor)`` minus twice
        the edges shared by two selected units.
    """
    sel = _mask(adj, selected)
    own = 4 * adj.cell_size - (1.0 - edge_factor) * adj.outer()
    shared = float(adj.length[sel[adj.i] & sel[adj.j]].sum())
    return float(own[sel].sum()) - 2.0 * shared


def patch_labels(adj: Adjacency, selected: object) -> np.ndarray:
    """Patch of each unit: 1 for the largest patch of selected units, 2 next, ...; 0 unselected.

    Units join a patch through the pairs of ``adj`` (edges; corners too with ``queen``).
    Patches of equal size are ordered by their first unit's position.
    """
    sel = _mask(adj, selected)
    keep = sel[adj.i] & sel[adj.j]
    graph = sparse.coo_matrix(
        (np.ones(int(keep.sum())), (adj.i[keep], adj.j[keep])), shape=(adj.n, adj.n)
    )
    _, comp = connected_components(graph, directed=False)
    out = np.zeros(adj.n, dtype=np.int64)
    if not sel.any():
        return out
    ids, first, sizes = np.unique(comp[sel], return_index=True, return_counts=True)
    first_pos = np.flatnonzero(sel)[first]
    rank = np.lexsort((first_pos, -sizes))
    new = np.empty(ids.size, dtype=np.int64)
    new[rank] = np.arange(1, ids.size + 1)
    out[sel] = new[np.searchsorted(ids, comp[sel])]
    return out
