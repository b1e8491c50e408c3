"""The real-eBird suite of the peers benchmark: rankings of the surveyed private cells.

For each BCR 27 state with national-forest ranger districts, each species of
:data:`pipelines.ebird_bcr27.SPECIES` and each cell size, the planning units are built as the
README walkthrough builds them (:func:`pipelines.ebird_bcr27.rebuild`, then
:func:`reserve.ingest.ingest` with the bundle's MODIS land cover and its legend) and cached in
a work folder outside the repository (eBird's terms forbid redistributing the data or anything
derived from it with labels). Training rows are the surveyed public cells (``train``),
candidates every private cell (``candidate``, ``y == -1``). Each method scores every
candidate; the score is checked on the *surveyed* private candidates (their labels are in the
ingest, never in the fit) with the effort-stratified precision at
:data:`reserve.confidence.TOP_SHARE` and the effort-stratified AUC
(:mod:`reserve.confidence`), so a ranking by birder effort gains nothing.

Settings (suite names):

- ``ebird (public)``: fitted on the public cells, scored on all surveyed private cells;
- ``ebird (surveyed, blocked)``: the surveyed private cells in cell-id order (latitude bands
  of the grid) cut into contiguous blocks; on each block the public fit is scored (method
  ``m``), and so is a fit on the public cells plus the surveyed private cells outside the
  block (method ``m+surveyed``: the learn-from-surveyed setting);
- ``ebird (surveyed, random)``: the same with seeded random folds.

In the learn-from-surveyed fits each labelled private cell is in the rows twice, as
``reserve select --learn-from surveyed`` puts it: a labelled training row and an unlabelled
candidate row (the candidates stay all the private cells). Peers fit on the labelled rows and
score the candidates, so for them this is simply training on more rows.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from reserve.confidence import TOP_SHARE, private_land_check, stratified_auc, stratified_precision

#: States of BCR 27 whose national forests have ranger districts in the bundle.
STATES = ("US-FL", "US-NC", "US-SC", "US-AL", "US-MS")
#: Cell sides (m) of the suite.
CELL_SIZES = (3000, 10000)
#: TTK's budget in every fit (the README walkthrough's ``--budget 20``).
BUDGET = 20
#: Folds of the surveyed private cells in the learn-from-surveyed settings.
N_FOLDS = 5
#: Fewest detected and fewest undetected training (public) cells for a problem to run.
MIN_TRAIN_CLASS = 3
#: Land cover of the walkthrough, relative to the bundle.
LANDCOVER = "landcover/modis_mcd12q1_umd_2018_bcr27.tif"
LEGEND = "landcover/mcd12q1_umd_classes.csv"

#: A method's ``score_candidates`` (:data:`benchmarks.bench_peers.SCORERS`).
Scorer = Callable[..., np.ndarray]


def bundle_dir() -> Path:
    """The ``ebird-bcr27`` bundle: ``RESERVE_BCR27_DIR``, else ``../shared/real/ebird-bcr27``."""
    env = os.environ.get("RESERVE_BCR27_DIR")
    root = Path(__file__).resolve().parents[1]
    return Path(env) if env else root.parent / "shared" / "real" / "ebird-bcr27"


def build_units(work: Path, state: str, species: str, cell_size: int, source: Path) -> pd.DataFrame:
    """The planning units of one state, species and cell size, ingested once and cached.

    Parameters
    ----------
    work : Path
        Work folder (outside the repository); ``<state>/<species>/units_<size>.gpkg``.
    state, species : str
        eBird state code and one of :data:`pipelines.ebird_bcr27.SPECIES`.
    cell_size : int
        Cell side in metres.
    source : Path
        The ``ebird-bcr27`` bundle.

    Returns
    -------
    pandas.DataFrame
        The ``planning_units`` layer.
    """
    import pyogrio

    from pipelines.ebird_bcr27 import rebuild
    from reserve.ingest import ingest

    folder = work / state / species.replace(" ", "_").lower()
    units = folder / f"units_{cell_size}.gpkg"
    if not units.is_file():
        if not (folder / "public.gpkg").is_file():
            rebuild(folder, state, species, source)
        ingest(
            folder / "ebd.txt",
            folder / "sed.txt",
            species,
            units,
            region=folder / "region.gpkg",
            public=folder / "public.gpkg",
            categorical={"landcover": source / LANDCOVER},
            legend={"landcover": source / LEGEND},
            cell_size=cell_size,
        )
    return pyogrio.read_dataframe(units, layer="planning_units")


@dataclass
class Split:
    """The rows of one fit and the surveyed private cells each of its scores is checked on.

    ``rows`` index the planning units (a labelled private cell appears twice in the
    learn-from-surveyed fits), ``y`` is their label in the fit (-1: candidate); ``checks``
    maps ``(setting, problem)`` to the units (indices) of the surveyed private cells scored
    there.
    """

    rows: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    checks: dict[tuple[str, str], np.ndarray] = field(default_factory=dict, repr=False)


def surveyed_folds(n: int, n_folds: int, blocked: bool, seed: int = 0) -> list[np.ndarray]:
    """Positions ``0 .. n-1`` cut into ``n_folds`` folds: contiguous blocks, or seeded random.

    Examples
    --------
    >>> [f.tolist() for f in surveyed_folds(5, 2, blocked=True)]
    [[0, 1, 2], [3, 4]]
    """
    order = np.arange(n) if blocked else np.random.default_rng(seed).permutation(n)
    return [np.sort(f) for f in np.array_split(order, n_folds)]


def fit_rows(units: pd.DataFrame, learn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a fit: public training cells and the private cells of ``learn`` labelled,
    then every private candidate unlabelled (so the ``learn`` cells are in it twice).

    Parameters
    ----------
    units : pandas.DataFrame
        Planning units with ``role`` and ``label``.
    learn : ndarray of int
        Units (indices) of surveyed private cells whose labels are fitted.

    Returns
    -------
    rows, y : ndarray of int
        Indices into ``units`` and the label of each row in the fit (-1: candidate).
    """
    role = units["role"].astype(str).to_numpy()
    label = units["label"].to_numpy(dtype=np.int64)
    train = np.flatnonzero((role == "train") & (label >= 0))
    cand = np.flatnonzero(role == "candidate")
    lab = np.concatenate([train, np.asarray(learn, dtype=np.int64)])
    rows = np.concatenate([lab, cand])
    y = np.concatenate([label[lab], -np.ones(cand.size, dtype=np.int64)])
    return rows, y


def splits(
    units: pd.DataFrame, n_folds: int = N_FOLDS, learn: bool = True
) -> Iterator[tuple[str, Split]]:
    """Every fit of one set of units: ``(fit kind, split)``; ``split.checks`` is keyed by
    ``(setting, problem)``.

    The public fit (kind ``""``) is checked on all surveyed private cells (setting
    ``public``) and on every fold of both fold settings; each fold of ``blocked`` and
    ``random`` then gets its learn-from-surveyed fit (kind ``"+surveyed"``), unless
    ``learn`` is False. With ``n_folds=0`` the public fit alone, checked on all surveyed
    private cells.
    """
    role = units["role"].astype(str).to_numpy()
    label = units["label"].to_numpy(dtype=np.int64)
    surveyed = np.flatnonzero((role == "candidate") & (label >= 0))  # cell-id order
    settings = ("blocked", "random") if n_folds else ()  # 0 folds: the public fit alone
    folds = {name: surveyed_folds(surveyed.size, n_folds, name == "blocked") for name in settings}
    rows, y = fit_rows(units, surveyed[:0])
    checks = {("public", "all"): surveyed}
    for name, parts in folds.items():
        checks |= {(name, f"fold {j}"): surveyed[f] for j, f in enumerate(parts)}
    yield "", Split(rows, y, checks)
    for name, parts in folds.items() if learn else ():
        for j, f in enumerate(parts):
            rows, y = fit_rows(units, np.delete(surveyed, f))
            yield "+surveyed", Split(rows, y, {(name, f"fold {j}"): surveyed[f]})


def checkable(label: np.ndarray, n_checklists: np.ndarray) -> bool:
    """Whether the private-land check is available on these cells (enough detected and
    undetected cells of comparable effort: :func:`reserve.confidence.private_land_check`)."""
    check = private_land_check(np.zeros(label.size), label, n_checklists, TOP_SHARE, n_boot=1)
    return check.available


def check_scores(score: np.ndarray, label: np.ndarray, n_checklists: np.ndarray) -> dict:
    """The effort-stratified precision at :data:`TOP_SHARE` and AUC of ``score``.

    Examples
    --------
    >>> lab = np.array([1, 0, 1, 0])
    >>> check_scores(lab.astype(float), lab, np.array([1, 1, 4, 4]))["auc"]
    1.0
    """
    return {
        "precision": stratified_precision(score, label, n_checklists, TOP_SHARE),
        "auc": stratified_auc(score, label, n_checklists),
        "n_surveyed": int(label.size),
        "n_detected": int(label.sum()),
    }


def features(units: pd.DataFrame, rows: np.ndarray, y: np.ndarray, effort: bool) -> tuple:
    """Standardised habitat features of ``rows`` (with the effort covariates when ``effort``)
    and the columns holding effort, as the other suites build them."""
    from benchmarks.bench_peers import standardise, with_effort
    from reserve.config import EFFORT_COLUMNS
    from reserve.design import feature_columns

    habitat = feature_columns(units, exclude=tuple(EFFORT_COLUMNS))
    raw = units[habitat].to_numpy(dtype=np.float64)[rows]
    raw = np.nan_to_num(raw, nan=0.0)
    n_habitat = raw.shape[1]
    if effort:
        frame = units[[c for c in EFFORT_COLUMNS if c in units]].iloc[rows].reset_index(drop=True)
        raw = with_effort(raw, frame, y != -1)
    return standardise(raw), tuple(range(n_habitat, raw.shape[1]))


def usable(units: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """``units`` with train and candidate cells whose habitat features are not finite (cells
    the land cover covers only partly) set to ``other``, as ``reserve select`` refuses them;
    and how many there were."""
    from reserve.config import EFFORT_COLUMNS
    from reserve.design import feature_columns

    habitat = feature_columns(units, exclude=tuple(EFFORT_COLUMNS))
    finite = np.isfinite(units[habitat].to_numpy(dtype=np.float64, na_value=np.nan)).all(axis=1)
    bad = ~finite & units["role"].isin(["train", "candidate"]).to_numpy()
    out = units.copy()
    out.loc[bad, "role"] = "other"
    return out, int(bad.sum())


def skip_reason(units: pd.DataFrame) -> str:
    """Why a set of units cannot run ('' when it can): too few training cells of a class."""
    train = (units["role"] == "train").to_numpy()
    label = units["label"].to_numpy()
    pos, neg = int((label[train] == 1).sum()), int((label[train] == 0).sum())
    if min(pos, neg) < MIN_TRAIN_CLASS:
        return (
            f"{pos} detected and {neg} undetected public training cells (fewer than "
            f"{MIN_TRAIN_CLASS} of a class)"
        )
    return ""


def score_splits(
    units: pd.DataFrame,
    scorers: dict[str, Scorer],
    effort: bool,
    n_folds: int = N_FOLDS,
    seed: int = 0,
    learn: bool = True,
) -> Iterator[dict]:
    """One record per (fit, method, check) of one set of units (:func:`splits`; the
    learn-from-surveyed fits only when ``learn``).

    A check whose cells do not allow the private-land check (too few detected or undetected
    cells of comparable effort) is left out, for every method alike.
    """
    label = units["label"].to_numpy(dtype=np.int64)
    n = units["n_checklists"].to_numpy(dtype=np.int64)
    ids = units["cell_id"].to_numpy()
    for kind, split in splits(units, n_folds, learn):
        X, effort_cols = features(units, split.rows, split.y, effort)
        context = {"cell_id": ids[split.rows], "effort_columns": effort_cols}
        cand = split.rows[split.y == -1]
        where = np.full(len(units), -1)
        where[cand] = np.arange(cand.size)
        checks = {
            key: cells for key, cells in split.checks.items() if checkable(label[cells], n[cells])
        }
        for name, scorer in scorers.items():
            t0 = time.perf_counter()
            score = np.asarray(scorer(X, split.y, BUDGET, seed, **context), dtype=np.float64)
            seconds = time.perf_counter() - t0
            if score.shape != cand.shape:
                raise RuntimeError(f"{name} scored {score.size} rows, not {cand.size} candidates")
            for (variant, problem), cells in checks.items():
                yield {
                    "variant": variant,
                    "problem": problem,
                    "method": name + kind,
                    "seconds": seconds,
                    "n_labelled": int((split.y != -1).sum()),
                    "n_positive": int((split.y == 1).sum()),
                    "n_candidates": int(cand.size),
                    **check_scores(score[where[cells]], label[cells], n[cells]),
                }


#: Suite name of each setting (``variant`` of :func:`splits`).
SUITES = {
    "public": "ebird (public)",
    "blocked": "ebird (surveyed, blocked)",
    "random": "ebird (surveyed, random)",
}


def ebird_records(
    scorers: dict[str, Scorer],
    work: Path,
    efforts: tuple[bool, ...],
    notes: list[str],
    *,
    source: Path | None = None,
    states: tuple[str, ...] = STATES,
    sizes: tuple[int, ...] = CELL_SIZES,
    species: tuple[str, ...] | None = None,
    n_folds: int = N_FOLDS,
    learn: bool = True,
) -> Iterator[list[dict]]:
    """The records of the suite, one list per (state, species, cell size, effort).

    Records carry the keys of :func:`benchmarks.bench_peers.run_problem`'s (``precision`` is
    the stratified precision at :data:`TOP_SHARE`, ``k`` the fits' budget) and ``auc``,
    ``n_surveyed``, ``n_detected``. Units that cannot run, and their reasons, go to ``notes``.
    With ``learn`` False the learn-from-surveyed fits are left out (the public fit is still
    checked on every fold).
    """
    from pipelines.ebird_bcr27 import SPECIES

    source = bundle_dir() if source is None else source
    for state in states:
        for name in species or tuple(SPECIES):
            for size in sizes:
                units, n_bad = usable(build_units(work, state, name, size, source))
                place = f"{state[3:]} {size // 1000} km"
                why = skip_reason(units)
                if why:
                    notes.append(f"{name}, {place} skipped: {why}")
                    continue
                if n_bad:
                    notes.append(
                        f"{name}, {place}: {n_bad} cells the land cover covers partly set aside"
                    )
                for effort in efforts:
                    suffix = " + effort" if effort else ""
                    yield [
                        {
                            "suite": SUITES[r.pop("variant")] + suffix,
                            "group": name,
                            "problem": f"{place}, {r.pop('problem')}",
                            "k": BUDGET,
                            **r,
                        }
                        for r in score_splits(units, scorers, effort, n_folds, learn=learn)
                    ]
