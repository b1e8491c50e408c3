"""Real stand-ins for the paper's unpublished eBird instances (NY16, NY18, NY88).

The paper's three reserve-design instances (New York, June 2012, 634 cells, 38 habitat
features) were never published. These surrogates are built the same way from real data that
*is* at hand: eBird checklists of Bird Conservation Region 27 (the US Southeast Coastal Plain,
May-June 2017 and 2018) for Wood Thrush (``woothr``), Northern Bobwhite (``norbob``) and White
Ibis (``whiibi``), read at run time from a local folder (``../shared/real/ebird-bcr27``, see
:func:`default_bcr27_dir`). **eBird's terms forbid redistributing eBird data**, so nothing
derived from the checklists is stored in the project or cached on disk; building an instance
takes about two seconds.

How an instance is made (the project's own stages, in ingest's order):

1. **Checklists**: both files of the folder (2018, "train", and 2017, "test"; 36,330
   checklists). They are already complete, Stationary/Traveling, zero-filled, May-June,
   <= 5 h, <= 5 km, <= 10 observers, with shared checklists collapsed and BBS-like stops
   removed, so of :mod:`reserve.io`'s filters only the speed limit (<= 100 km/h,
   :func:`reserve.io.filter_effort`) and the region (inside the BCR 27 polygon,
   :func:`reserve.io.filter_region`) still remove anything. A checklist can take two rows
   (a pivot quirk of the files): :func:`collapse_pivot` keeps one row per checklist with the
   maximum of each species column; an all-NA species column is an "X" count, i.e. detected.
2. **Cells**: a 3 km equal-area grid (:class:`reserve.grid.Grid`, Lambert azimuthal equal
   area centred on the region). A cell is *surveyed* when it holds at least one kept
   checklist; its label is 1 when any of them detected the species. Only surveyed cells enter
   the instance (an unsurveyed cell has no label to learn from or to score).
3. **Features**: the fractions of the 16 MODIS MCD12Q1 UMD land-cover classes in each cell
   (:func:`reserve.habitat.categorical_fractions`), averaged over the two years' rasters.
   Elevation is not used: the folder's elevation raster covers Georgia only.
4. **Roles**: a cell is public when more than half of its area lies in a national-forest
   ranger district (:func:`reserve.ownership.cover_fraction` and
   :func:`~reserve.ownership.assign_roles`, ``public_threshold = 0.5`` as in ingest). Public
   surveyed cells are the labelled set; every other surveyed cell is a candidate whose label
   is held out and used only to score a selection.

Benchmark protocol (:func:`surrogate_splits`): the labelled national-forest cells are fixed;
the candidates are cut at random into ``n_splits`` disjoint folds (a seeded permutation),
and each fold is one transductive problem: the labelled cells plus that fold's candidates,
``k`` = 5 % of the fold, features standardised over those rows as for the other benchmark
datasets. Ten folds give problems close to the paper's NY size (634 cells; here 230 labelled
+ about 566 candidates, k = 28), so AATP and TTK-MIP run as they did there. Every candidate
is scored exactly once, and the paired t-test compares methods on ten disjoint candidate
pools. What the sd measures: the spread of precision@5% over random pools of the region's
surveyed non-forest cells, *given* this one labelled set (all folds share it, so the folds
are independent only conditionally on it); it says nothing about how results would vary
with another labelled set, year or region.

Caveats: the public layer holds national forests only (state land, refuges and parks count
as candidates); ranger districts are administrative boundaries with private inholdings; a
label is "detected on at least one checklist", so lightly surveyed cells carry false
absences and the label grows with effort, which is not a feature.

Examples
--------
>>> collapse_pivot(pd.DataFrame({"checklist_id": ["S1", "S1", "S2"],
...     "woothr": [2.0, np.nan, 0.0], "norbob": [np.nan, 0.0, np.nan],
...     "whiibi": [np.nan, np.nan, 0.0]})).to_dict("list")
{'checklist_id': ['S1', 'S2'], 'woothr': [2.0, 0.0], 'norbob': [0.0, nan], 'whiibi': [nan, 0.0]}
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyproj
import shapely

from reserve.config import INGEST_DEFAULTS
from reserve.errors import DataFileError, InvalidInputError
from reserve.grid import Grid, aggregate_checklists, equal_area_crs
from reserve.habitat import categorical_fractions
from reserve.ingest import parse_region
from reserve.io import filter_effort, filter_region
from reserve.ownership import assign_roles, cover_fraction, read_polygons

__all__ = [
    "BCR27_SPECIES",
    "SURROGATES",
    "SurrogateInstance",
    "bcr27_instance",
    "collapse_pivot",
    "default_bcr27_dir",
    "load_surrogate",
    "read_bcr27_checklists",
    "surrogate_splits",
]

#: Species columns of the BCR 27 checklist files and their common names.
BCR27_SPECIES: dict[str, str] = {
    "woothr": "Wood Thrush",
    "norbob": "Northern Bobwhite",
    "whiibi": "White Ibis",
}

#: Benchmark names of the surrogates (``reserve benchmark paper --datasets``), to species code.
SURROGATES: dict[str, str] = {f"bcr27_{code}": code for code in BCR27_SPECIES}

#: Files of the folder, relative to it; ``{year}`` is 2017 or 2018.
_CHECKLISTS = {
    2018: "checklists/train_data_mayjune_201718_bcr27.txt",
    2017: "checklists/test_data_2017_mayjune_201718_bcr27.txt",
}
_LANDCOVER = "landcover/modis_mcd12q1_umd_{year}_bcr27.tif"
_LEGEND = "landcover/mcd12q1_umd_classes.csv"
_REGION = "boundaries/gis-data_bcr27.gpkg"
_PUBLIC = "public_land/usfs_ranger_districts_bcr27"

#: Columns a checklist file must have (the species columns are added per species).
_COLUMNS = (
    "checklist_id",
    "latitude",
    "longitude",
    "protocol_type",
    "duration_minutes",
    "effort_distance_km",
    "number_observers",
)


def default_bcr27_dir() -> Path | None:
    """The BCR 27 data folder, or ``None`` when it is absent.

    ``RESERVE_BCR27_DIR`` names it explicitly (an empty or missing folder then counts as
    absent). Otherwise ``shared/real/ebird-bcr27`` beside the source checkout (``../shared``
    from the repository root) or beside the working directory's parent is used.
    """
    override = os.environ.get("RESERVE_BCR27_DIR")
    if override is not None:
        candidates = [Path(override)] if override else []
    else:
        rel = Path("shared", "real", "ebird-bcr27")
        candidates = [Path(__file__).resolve().parents[3] / rel, Path.cwd().parent / rel]
    for folder in candidates:
        if (folder / _CHECKLISTS[2018]).is_file():
            return folder
    return None


def collapse_pivot(table: pd.DataFrame, species: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per ``checklist_id``: the maximum of each species column, other columns first.

    The files were pivoted with ``species_observed`` still a column, so a checklist can take
    two rows, each holding some species' counts and NA for the others. The maximum ignores
    NA, so it recovers the count; a species NA on every row of its checklist was an "X"
    (present, not counted) and stays NA. ``species_observed`` is dropped (meaningless after
    the pivot); every other column is the same on both rows and the first value is kept.
    """
    species = [c for c in (species or BCR27_SPECIES) if c in table.columns]
    table = table.drop(columns=["species_observed"], errors="ignore")
    groups = table.groupby("checklist_id", sort=True)
    counts = groups[species].max()
    rest = [c for c in table.columns if c not in species and c != "checklist_id"]
    out = groups[rest].first().join(counts) if rest else counts
    return out.reset_index()


def read_bcr27_checklists(paths: Sequence[str | os.PathLike[str]]) -> pd.DataFrame:
    """Read and collapse the space-separated checklist tables (quoted header, NA for "X")."""
    parts = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise DataFileError(f"checklist file {str(path)!r} does not exist; check the folder")
        try:
            part = pd.read_csv(path, sep=" ", low_memory=False)
        except (ValueError, pd.errors.ParserError) as exc:
            raise DataFileError(f"checklist file {str(path)!r} cannot be parsed ({exc})") from None
        missing = [c for c in (*_COLUMNS, *BCR27_SPECIES) if c not in part.columns]
        if missing:
            raise DataFileError(
                f"checklist file {str(path)!r} lacks columns {missing}; it should be one of "
                "the zero-filled BCR 27 tables (space-separated, quoted header)"
            )
        wanted = [c for c in (*_COLUMNS[1:], *BCR27_SPECIES) if c != "protocol_type"]
        numeric = [c for c in wanted if not pd.api.types.is_numeric_dtype(part[c])]
        if numeric:
            raise DataFileError(
                f"checklist file {str(path)!r}: columns {numeric} are not numeric; missing "
                "values must be written NA"
            )
        parts.append(collapse_pivot(part))
    table = pd.concat(parts, ignore_index=True)
    if table["checklist_id"].duplicated().any():
        raise DataFileError(
            f"{int(table['checklist_id'].duplicated().sum())} checklist ids occur in more than "
            "one file; pass each year's BCR 27 table once"
        )
    return table


@dataclass(frozen=True)
class SurrogateInstance:
    """One species' transductive instance: labelled national-forest cells, then candidates.

    Attributes
    ----------
    name : str
        Benchmark name, e.g. ``"bcr27_woothr"``.
    species : str
        Species code of the checklist files.
    X : ndarray of shape (n_labelled + n_candidates, n_features)
        Land-cover fractions standardised over all rows (mean 0, sd 1; constant columns 0).
    y : ndarray of int64
        0/1 for the labelled (public) rows, -1 for every candidate.
    y_candidates : ndarray of int64
        Held-out 0/1 labels of the candidate rows, in row order; for scoring only.
    cell_ids : ndarray of int64
        Grid cell of every row.
    n_checklists : ndarray of int64
        Kept checklists in every row's cell.
    public_fraction : ndarray of float64
    feature_names : tuple of str
    features : DataFrame
        The unstandardised fractions (one row per row of ``X``).
    counts : dict
        Checklists read and kept, cells, positives.
    """

    name: str
    species: str
    X: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    y_candidates: np.ndarray = field(repr=False)
    cell_ids: np.ndarray = field(repr=False)
    n_checklists: np.ndarray = field(repr=False)
    public_fraction: np.ndarray = field(repr=False)
    feature_names: tuple[str, ...] = field(repr=False)
    features: pd.DataFrame = field(repr=False)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def n_labelled(self) -> int:
        return int((self.y != -1).sum())

    @property
    def n_candidates(self) -> int:
        return int((self.y == -1).sum())

    def describe(self, n_splits: int | None = None, k_fraction: float = 0.05) -> str:
        """One line: labelled cells and positives, candidates and positives, k."""
        c = self.counts
        text = (
            f"{self.name} ({BCR27_SPECIES[self.species]}): {c['labelled']} labelled "
            f"national-forest cells ({c['labelled_positive']} positive), {c['candidates']} "
            f"candidate cells ({c['candidate_positive']} positive, prevalence "
            f"{c['candidate_positive'] / max(c['candidates'], 1):.2f}), "
            f"{c['checklists_kept']} checklists"
        )
        if n_splits:
            sizes = [len(f) for f in np.array_split(np.arange(self.n_candidates), n_splits)]
            ks = sorted({max(1, round(k_fraction * s)) for s in sizes})
            text += (
                f"; {n_splits} disjoint candidate folds of {min(sizes)}-{max(sizes)} cells, "
                f"k = {'/'.join(map(str, ks))} per fold"
            )
        return text


def _standardise(X: np.ndarray) -> np.ndarray:
    mu = X.mean(axis=0)
    sd = X.std(axis=0)
    sd[sd == 0] = 1.0
    return (X - mu) / sd


def _stamp(folder: Path, years: tuple[int, ...]) -> tuple:
    """Sizes and modification times of the checklist files: a changed file misses the cache."""
    stats = [(folder / _CHECKLISTS[y]).stat() for y in years if (folder / _CHECKLISTS[y]).is_file()]
    return tuple((st.st_size, st.st_mtime_ns) for st in stats)


@functools.lru_cache(maxsize=2)
def _cells(
    folder: str, stamp: tuple, cell_size: float, years: tuple[int, ...], threshold: float
) -> tuple:
    """Species-independent part: surveyed cells, their checklists, features and roles.

    Kept in memory only (never on disk), so the three species share one build per process;
    ``stamp`` (:func:`_stamp`) is part of the key.
    """
    root = Path(folder)
    raw = read_bcr27_checklists([root / _CHECKLISTS[y] for y in years])
    n_read = len(raw)
    kept = filter_effort(raw)  # the files meet every limit but the speed (<= 100 km/h)
    region = parse_region(root / _REGION, layer="bcr")
    kept = filter_region(kept, polygon=region)
    x0, y0, x1, y1 = region.bounds
    crs = equal_area_crs((x0 + x1) / 2, (y0 + y1) / 2)
    to_grid = pyproj.Transformer.from_crs(pyproj.CRS.from_epsg(4326), crs, always_xy=True)
    region_xy = shapely.transform(
        shapely.segmentize(region, 0.05), lambda c: np.column_stack(to_grid.transform(*c.T))
    )
    grid = Grid.covering(region_xy.bounds, cell_size=cell_size, crs=crs)
    x, y = to_grid.transform(kept["longitude"].to_numpy(), kept["latitude"].to_numpy())
    cell = grid.cell_of(x, y)
    cells = np.unique(cell[cell >= 0])
    polygons = grid.polygons(cells)
    public_files = sorted((root / _PUBLIC).glob("*.geojson"))
    if not public_files:
        raise DataFileError(f"no national-forest polygons (*.geojson) in {str(root / _PUBLIC)!r}")
    public_fraction = cover_fraction(polygons, read_polygons(public_files, crs))
    role = assign_roles(public_fraction, np.ones(len(cells), bool), public_threshold=threshold)
    frames = [
        categorical_fractions(
            grid, cells, root / _LANDCOVER.format(year=y), "landcover", legend=root / _LEGEND
        )
        for y in years
    ]
    features = sum(frames[1:], frames[0]) / len(frames)
    return kept.assign(cell_id=cell), n_read, cells, role, public_fraction, features


def _check_instance_args(
    species: str, years: Sequence[int], shared_dir: str | os.PathLike[str] | None
) -> tuple[tuple[int, ...], Path]:
    """Refuse an unknown species or year and an absent folder; the sorted years and folder."""
    if species not in BCR27_SPECIES:
        raise InvalidInputError(
            f"species={species!r} is not in the BCR 27 files; choose from "
            f"{', '.join(BCR27_SPECIES)}."
        )
    years = tuple(sorted({int(y) for y in years}))
    if not years or any(y not in _CHECKLISTS for y in years):
        raise InvalidInputError(f"years={years!r} must be a non-empty subset of 2017, 2018.")
    folder = Path(shared_dir) if shared_dir is not None else default_bcr27_dir()
    if folder is None or not folder.is_dir():
        shown = "../shared/real/ebird-bcr27" if folder is None else str(folder)
        raise DataFileError(
            f"the BCR 27 eBird folder {shown!r} is absent; set RESERVE_BCR27_DIR or pass "
            "shared_dir (eBird data is never shipped with reserve)"
        )
    return years, folder


def bcr27_instance(
    species: str,
    shared_dir: str | os.PathLike[str] | None = None,
    *,
    cell_size: float = INGEST_DEFAULTS.cell_size,
    years: Sequence[int] = (2017, 2018),
    public_threshold: float = INGEST_DEFAULTS.public_threshold,
) -> SurrogateInstance:
    """Build one species' instance from the BCR 27 folder (see the module docstring).

    Parameters
    ----------
    species : {"woothr", "norbob", "whiibi"}
        Species code (Wood Thrush, Northern Bobwhite, White Ibis).
    shared_dir : path-like, optional
        The ``ebird-bcr27`` folder; default :func:`default_bcr27_dir`.
    cell_size : float
        Cell side in metres (3 km).
    years : sequence of {2017, 2018}
        Checklist files used (both by default); land-cover fractions are averaged over the
        same years' rasters.
    public_threshold : float
        A cell is public (labelled) when its national-forest fraction is strictly above this.

    Returns
    -------
    SurrogateInstance
        Rows ordered labelled cells first, then candidates, each by cell id; deterministic.

    Raises
    ------
    DataFileError
        When the folder or one of its files is missing or unreadable.
    InvalidInputError
        Unknown species or year.
    """
    years, folder = _check_instance_args(species, years, shared_dir)
    kept, n_read, cells, role, public_fraction, features = _cells(
        str(folder.resolve()),
        _stamp(folder, years),
        float(cell_size),
        years,
        float(public_threshold),
    )
    counts_col = kept[species].to_numpy(dtype=float)
    detected = np.isnan(counts_col) | (counts_col > 0)  # NA = an "X" count
    agg = aggregate_checklists(
        kept["cell_id"].to_numpy(),
        detected,
        kept["duration_minutes"].to_numpy(),
        kept["effort_distance_km"].to_numpy(),
    ).reindex(cells)
    label = agg["label"].to_numpy(dtype=np.int64)
    complete = features.notna().all(axis=1).to_numpy()
    train = (role == "train") & complete
    cand = (role == "candidate") & complete
    order = np.concatenate([np.flatnonzero(train), np.flatnonzero(cand)])
    feats = features.iloc[order].reset_index(drop=True)
    y = np.concatenate([label[train], -np.ones(int(cand.sum()), dtype=np.int64)])
    counts = {
        "checklists_read": int(n_read),
        "checklists_kept": len(kept),
        "detections": int(detected.sum()),
        "cells_surveyed": len(cells),
        "cells_no_features": int((~complete).sum()),
        "labelled": int(train.sum()),
        "labelled_positive": int(label[train].sum()),
        "candidates": int(cand.sum()),
        "candidate_positive": int(label[cand].sum()),
    }
    return SurrogateInstance(
        name=f"bcr27_{species}",
        species=species,
        X=_standardise(feats.to_numpy(dtype=np.float64)),
        y=y,
        y_candidates=label[cand].copy(),
        cell_ids=cells[order].astype(np.int64),
        n_checklists=agg["n_checklists"].to_numpy(dtype=np.int64)[order],
        public_fraction=public_fraction[order],
        feature_names=tuple(feats.columns),
        features=feats,
        counts=counts,
    )


def load_surrogate(
    name: str, shared_dir: str | os.PathLike[str] | None = None
) -> SurrogateInstance:
    """The instance of a benchmark name in :data:`SURROGATES` (e.g. ``"bcr27_woothr"``)."""
    if name not in SURROGATES:
        raise InvalidInputError(f"unknown surrogate {name!r}; choose from {', '.join(SURROGATES)}.")
    return bcr27_instance(SURROGATES[name], shared_dir)


def surrogate_splits(
    instance: SurrogateInstance,
    n_splits: int,
    *,
    k_fraction: float = 0.05,
    random_state: int | None = None,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]:
    """The instance as ``n_splits`` transductive problems on disjoint candidate folds.

    Each problem holds every labelled row and one fold of the candidates (a seeded random
    permutation cut into ``n_splits`` nearly equal parts), returned like
    :func:`reserve.paper.datasets.transductive_split`: features standardised over the problem's
    rows, labels with ``-1`` for the fold's candidates, the fold's held-out labels, and
    ``k = max(1, round(k_fraction * fold size))``. Every candidate is scored in exactly one
    problem.
    """
    if isinstance(n_splits, bool) or not isinstance(n_splits, int) or n_splits < 1:
        raise InvalidInputError(f"n_splits must be an integer >= 1; received {n_splits!r}.")
    lab = np.flatnonzero(instance.y != -1)
    cand = np.flatnonzero(instance.y == -1)
    if n_splits > cand.size:
        raise InvalidInputError(
            f"n_splits={n_splits} exceeds the {cand.size} candidates of {instance.name}."
        )
    perm = np.random.default_rng(random_state).permutation(cand.size)
    out = []
    for fold in np.array_split(perm, n_splits):
        fold = np.sort(fold)
        rows = np.concatenate([lab, cand[fold]])
        y_fit = np.concatenate([instance.y[lab], -np.ones(fold.size, dtype=np.int64)])
        k = max(1, round(k_fraction * fold.size))
        out.append((_standardise(instance.X[rows]), y_fit, instance.y_candidates[fold].copy(), k))
    return out
