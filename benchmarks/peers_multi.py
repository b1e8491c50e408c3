"""The several-species suite of the peers benchmark: species targets met and true occupied cells.

Each problem is one set of planning units holding several species, one budget ``k`` (cells)
and one target per species. The targets are set from each species' own single-species plan:
``reserve select --species S --budget k`` (AutoTTK, the default) chooses ``k`` cells, and the
species' target is :data:`TARGET_SHARE` of the expected occupied cells of that plan by the
run's calibrated probabilities (the ``probability`` column: the unit of ``--target "S=N"``),
passed as an absolute target. Every method then chooses ``k`` candidate cells for all the
species at once, with the same budget and the same targets:

- ``ours``: ``reserve select`` with every species and ``--target "S=N"`` for each, its
  default several-species path (:mod:`reserve.representation`: one AutoTTK fit per species
  as a single-species run makes it, its calibrated probabilities, then
  :func:`reserve.solvers.targets.plan_species`: the least weighted relative shortfall
  first, then the sum of expected occupied cells);
- ``split``: separate single-species plans split by budget share (:func:`budget_share_split`:
  ``k / S`` cells from each species' own ranking, their union, overlaps refilled from the
  next-best cell of each species in turn);
- ``rf+targets``: the planner's alternative: a ``RandomForestClassifier(n_estimators=300,
  random_state=seed)`` per species on the same features and training rows, its
  ``predict_proba`` as the probabilities, and the same target model solved by
  :func:`~reserve.solvers.targets.plan_species` (a prioritizr user with SDM layers);
- ``multittk``: :class:`reserve.solvers.multi.MultiTTK`, ``reserve select`` with several
  species and ``--joint-fit`` (the linear joint fit that was the several-species path
  before targets: the sum of the species' SVM objectives, ``k`` cells shared; no targets).

A diagnostic beside them, ``rf+detections``: ``rf+targets`` with the probability of every
candidate whose own survey detected the species set to 1. ``reserve select``'s calibrated
probability is the posterior given each cell's own checklists (a candidate with a detection
is known to be occupied), which a forest layer does not know; this variant gives the forest
the same knowledge. It is not one of the issue's alternatives.

Scores (:func:`score_plan`): per species the truly occupied cells among the ``k`` chosen and
whether that meets the species' target; per method the species whose target is met and the
total of truly occupied (cell, species) pairs. Targets are met in two units: the planner's
target (expected occupied cells, as passed), and the *truth unit*: half the truly occupied
cells of the species' own single-species plan (:data:`TARGET_SHARE` of what that plan
reaches, both sides counted against the truth).

Regions (suite names):

- ``multi (region)``: the default region redrawn per simulation seed
  (:func:`benchmarks.bench_default_region.simulated_region`, as the ``region`` suite does),
  both virtual species, truth: each species' simulated occupancy
  (:func:`reserve.evaluate.read_truth`);
- ``multi (bcr27)``: the three BCR 27 surrogate species (:mod:`reserve.paper.surrogates`),
  the candidates cut into seeded random folds as the ``bcr27`` suite cuts them; each fold is
  written as planning units (labelled national-forest cells with their checklists; the
  fold's candidates unsurveyed: label -1, no checklists; every other candidate locked out of
  the purchase with its labels and checklists, the surveyed private land a real run holds,
  which checks and calibrates each species' run but is never bought or fitted) to a
  temporary folder outside the repository and removed after the run (eBird's terms forbid
  redistributing the data). Truth:
  the held-out label of each candidate (detected on at least one of its checklists), the
  ``bcr27`` suite's truth. A label undercounts occupancy (a lightly surveyed cell carries
  false absences), while the targets are expected *occupied* cells, so on BCR 27 a target is
  harder to meet for every method alike; the truth-unit targets compare like with like
  there. Skipped when the eBird folder is absent.

Run through :mod:`benchmarks.bench_peers`: ``python -m benchmarks.bench_peers --suites multi``
(``--seeds``, ``--folds``, ``--work``, ``--csv``, ``--from-csv``, ``--quick``; writes
``benchmarks/results/peers_multi.md``).
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_peers import append_records
from benchmarks.bench_peers import read_records as read_peer_records

#: Budgets (cells) of the suite.
BUDGETS = (30, 100)
#: A species' target: this share of its own single-species plan's expected occupied cells.
TARGET_SHARE = 0.5
#: Methods of the suite, the reference first (the issue's alternatives after it).
METHODS = ("ours", "split", "rf+targets", "multittk")
#: Diagnostic methods, reported beside the alternatives but not among them.
DIAGNOSTICS = ("rf+detections",)
#: Fewest paired differences for a Wilcoxon p to be reported.
MIN_PAIRS = 5

OUT = Path(__file__).resolve().parent / "results" / "peers_multi.md"


@dataclass
class MultiProblem:
    """One set of planning units with several species and the truth of its candidates.

    ``candidates`` are the ``cell_id`` of the candidate cells (role ``candidate``, not locked
    out), in file order; ``truth`` is 0/1 of shape ``(n_candidates, n_species)``.
    """

    suite: str
    name: str
    cells: Path
    species: tuple[str, ...]
    candidates: np.ndarray = field(repr=False)
    truth: np.ndarray = field(repr=False)


@dataclass
class SpeciesRun:
    """One species' single-species ``reserve select`` run, on the candidates' positions."""

    probability: np.ndarray = field(repr=False)
    ranking: np.ndarray = field(repr=False)  # every candidate position, best first
    selected: np.ndarray = field(repr=False)
    seconds: float


# --------------------------------------------------------------------------- helpers


def budget_share_split(rankings: Sequence[np.ndarray], k: int) -> np.ndarray:
    """``k`` cells from separate single-species plans split by budget share.

    Species ``s`` gets ``k // S`` cells (the first ``k % S`` species one more), the top of its
    own ranking; the union is taken, and while it holds fewer than ``k`` cells (two species
    chose the same cell) each species in turn adds its next-best cell not yet chosen.

    Parameters
    ----------
    rankings : sequence of ndarray of int
        Per species, candidate positions best first (each may be a full ranking).
    k : int
        Cells to choose.

    Returns
    -------
    ndarray of int
        The ``k`` chosen positions, in the order they were taken.

    Examples
    --------
    >>> budget_share_split([np.array([0, 1, 2, 3]), np.array([0, 4, 5, 6])], 4).tolist()
    [0, 1, 4, 2]
    """
    n = len(rankings)
    shares = [k // n + (1 if s < k % n else 0) for s in range(n)]
    chosen: list[int] = []
    seen: set[int] = set()
    pointer = list(shares)
    for ranking, share in zip(rankings, shares, strict=True):
        for cell in np.asarray(ranking[:share]).tolist():
            if cell not in seen:
                seen.add(cell)
                chosen.append(cell)
    s = 0
    while len(chosen) < k:
        ranking = rankings[s]
        while pointer[s] < len(ranking) and int(ranking[pointer[s]]) in seen:
            pointer[s] += 1
        if pointer[s] < len(ranking):
            cell = int(ranking[pointer[s]])
            seen.add(cell)
            chosen.append(cell)
        elif all(p >= len(r) for p, r in zip(pointer, rankings, strict=True)):
            raise ValueError(f"the rankings hold fewer than k = {k} distinct cells")
        s = (s + 1) % n
    return np.asarray(chosen, dtype=np.int64)


def plan_targets(probability: np.ndarray, selected: Sequence[np.ndarray]) -> np.ndarray:
    """Each species' target: :data:`TARGET_SHARE` of its own plan's expected occupied cells.

    Parameters
    ----------
    probability : ndarray of shape (n_candidates, n_species)
        Calibrated probabilities of presence.
    selected : sequence of ndarray of int
        Per species, the candidate positions its own single-species plan chose.

    Returns
    -------
    ndarray of shape (n_species,)

    Examples
    --------
    >>> P = np.array([[0.9, 0.1], [0.5, 0.8], [0.2, 0.6]])
    >>> plan_targets(P, [np.array([0, 1]), np.array([1, 2])]).tolist()
    [0.7, 0.7]
    """
    P = np.asarray(probability, dtype=np.float64)
    return np.array(
        [TARGET_SHARE * P[np.asarray(rows), s].sum() for s, rows in enumerate(selected)]
    )


def score_plan(chosen: np.ndarray, truth: np.ndarray, targets: np.ndarray) -> dict[str, Any]:
    """Score chosen candidates against the truth: per species occupied cells and target met.

    Parameters
    ----------
    chosen : ndarray of int
        Candidate positions chosen.
    truth : ndarray of shape (n_candidates, n_species)
        1 where the species truly occupies the cell.
    targets : ndarray of shape (n_species,)
        Targets in cells (NaN: none, never met nor missed).

    Returns
    -------
    dict
        ``occupied`` (per species), ``met`` (per species, bool), ``n_met`` and ``total``
        (occupied (cell, species) pairs).

    Examples
    --------
    >>> truth = np.array([[1, 0], [1, 1], [0, 1], [0, 0]])
    >>> s = score_plan(np.array([0, 1]), truth, np.array([2.0, 1.5]))
    >>> s["occupied"].tolist(), s["met"].tolist(), s["n_met"], s["total"]
    ([2, 1], [True, False], 1, 3)
    """
    occupied = np.asarray(truth, dtype=np.int64)[np.asarray(chosen, dtype=np.int64)].sum(axis=0)
    targets = np.asarray(targets, dtype=np.float64)
    met = np.isfinite(targets) & (occupied >= targets - 1e-9)
    return {
        "occupied": occupied,
        "met": met,
        "n_met": int(met.sum()),
        "total": int(occupied.sum()),
    }


# --------------------------------------------------------------------------- problems


def region_problems(seeds: Sequence[int], work: Path) -> Iterator[MultiProblem]:
    """The default region redrawn per seed (cached in ``work``), both virtual species."""
    import pyogrio

    from benchmarks.bench_default_region import simulated_region
    from reserve.config import DEFAULT_REGION, species_slug
    from reserve.default_region import FILES
    from reserve.evaluate import read_truth

    species = tuple(DEFAULT_REGION.species_all)
    for seed in seeds:
        folder = work / f"seed{seed}"
        cached = sorted((folder / "cache").glob("*.gpkg")) if folder.is_dir() else []
        cells = Path(cached[0] if cached else simulated_region(seed, work)[0])
        units = pyogrio.read_dataframe(cells, layer="planning_units", read_geometry=False)
        locked = units["locked_out"].fillna(False).astype(bool).to_numpy()
        ids = units["cell_id"].to_numpy()[(units["role"] == "candidate").to_numpy() & ~locked]
        truth = np.column_stack(
            [
                read_truth(folder / FILES["truth" if i == 0 else f"truth_{species_slug(s)}"])
                .loc[ids, "occupied"]
                .to_numpy(dtype=np.int64)
                for i, s in enumerate(species)
            ]
        )
        yield MultiProblem("multi (region)", f"seed {seed}", cells, species, ids, truth)


def _bcr27_grid_polygons(cell_ids: np.ndarray, source: Path) -> tuple[np.ndarray, Any]:
    """The 3 km grid squares of BCR 27's cells, as :mod:`reserve.paper.surrogates` builds
    the grid (equal-area CRS centred on the region), and that CRS."""
    import pyproj
    import shapely

    from reserve.config import INGEST_DEFAULTS
    from reserve.grid import Grid, equal_area_crs
    from reserve.ingest import parse_region

    region = parse_region(source / "boundaries" / "gis-data_bcr27.gpkg", layer="bcr")
    x0, y0, x1, y1 = region.bounds
    crs = equal_area_crs((x0 + x1) / 2, (y0 + y1) / 2)
    to_grid = pyproj.Transformer.from_crs(pyproj.CRS.from_epsg(4326), crs, always_xy=True)
    region_xy = shapely.transform(
        shapely.segmentize(region, 0.05), lambda c: np.column_stack(to_grid.transform(*c.T))
    )
    grid = Grid.covering(region_xy.bounds, cell_size=INGEST_DEFAULTS.cell_size, crs=crs)
    return np.asarray(grid.polygons(cell_ids)), crs


def bcr27_problems(n_folds: int, work: Path, source: Path) -> Iterator[MultiProblem]:
    """BCR 27's three species, one problem per seeded random fold of the candidates.

    Each fold's planning units are written to ``work`` (a temporary folder outside the
    repository): training cells with their labels and checklists; the fold's candidates with
    label -1 and no checklists (their labels are the truth, never in the fit); the other
    folds' candidates locked out with their labels and checklists. A locked-out cell is
    neither bought nor a row of the fit, so the fold's rankings are those of its candidates
    alone, and its survey is the private-land evidence ``reserve select`` checks each
    ranking against and calibrates its probabilities on (``Problem.private_land``), as on a
    real ingest.
    """
    import geopandas as gpd

    from reserve.config import SPECIES_LABEL_PREFIX, species_slug
    from reserve.paper.surrogates import BCR27_SPECIES, bcr27_instance

    insts = [bcr27_instance(code, source) for code in BCR27_SPECIES]
    first = insts[0]
    for inst in insts[1:]:
        if not np.array_equal(inst.cell_ids, first.cell_ids):
            raise RuntimeError("the BCR 27 species instances do not share their cells")
    species = tuple(BCR27_SPECIES.values())
    polygons, crs = _bcr27_grid_polygons(first.cell_ids, source)
    lab = np.flatnonzero(first.y != -1)
    cand = np.flatnonzero(first.y == -1)
    order = np.random.default_rng(0).permutation(cand.size)  # the bcr27 suite's folds
    for j, fold in enumerate(np.array_split(order, n_folds)):
        fold = np.sort(fold)
        others = np.setdiff1d(np.arange(cand.size), fold)
        rows = np.concatenate([lab, cand[fold], cand[others]])
        is_lab = np.arange(rows.size) < lab.size
        is_other = np.arange(rows.size) >= lab.size + fold.size
        known = is_lab | is_other
        labels = {
            SPECIES_LABEL_PREFIX + species_slug(name): np.concatenate(
                [inst.y[lab], np.full(fold.size, -1), inst.y_candidates[others]]
            )
            for name, inst in zip(species, insts, strict=True)
        }
        units = gpd.GeoDataFrame(
            {
                "cell_id": first.cell_ids[rows],
                "role": np.where(is_lab, "train", "candidate"),
                "label": labels[SPECIES_LABEL_PREFIX + species_slug(species[0])],
                "n_checklists": np.where(known, first.n_checklists[rows], 0),
                "public_fraction": first.public_fraction[rows],
                "locked_out": is_other,
                **labels,
                **{c: first.features[c].to_numpy()[rows] for c in first.features.columns},
            },
            geometry=polygons[rows],
            crs=crs,
        )
        path = work / f"bcr27_fold{j}.gpkg"
        units.to_file(path, layer="planning_units", driver="GPKG")
        truth = np.column_stack([inst.y_candidates[fold] for inst in insts])
        yield MultiProblem(
            "multi (bcr27)", f"fold {j}", path, species, first.cell_ids[cand[fold]], truth
        )


# --------------------------------------------------------------------------- methods


def _positions(problem: MultiProblem, cell_ids: np.ndarray) -> np.ndarray:
    """Candidate positions of ``cell_ids`` (in the order given)."""
    where = {int(c): i for i, c in enumerate(problem.candidates)}
    return np.array([where[int(c)] for c in cell_ids], dtype=np.int64)


def species_run(
    problem: MultiProblem, species: str, k: int, seed: int, cache: Path | None = None
) -> SpeciesRun:
    """``reserve select --species species --budget k`` (the default method) on the cells.

    With ``cache`` (a folder outside the repository) the run is kept there and read back by
    a later run of the same problem, species, budget and seed.
    """
    from reserve.config import species_slug
    from reserve.select import select_reserve

    key = f"{problem.suite} {problem.name} k{k} seed{seed} {species}"
    path = None if cache is None else cache / (species_slug(key) + ".npz")
    if path is not None and path.is_file():
        with np.load(path) as kept:
            return SpeciesRun(
                kept["probability"], kept["ranking"], kept["selected"], float(kept["seconds"])
            )
    t0 = time.perf_counter()
    res = select_reserve(k, problem.cells, species=species, seed=seed, n_jobs=1)
    seconds = time.perf_counter() - t0
    pu = res.planning_units.set_index("cell_id")
    prob = pu.loc[problem.candidates, "probability"].to_numpy(dtype=np.float64)
    ranked = res.ranking.sort_values("rank")["cell_id"].to_numpy()
    ranked = ranked[np.isin(ranked, problem.candidates)]
    chosen = res.selected["cell_id"].to_numpy()
    run = SpeciesRun(
        np.nan_to_num(prob, nan=0.0),
        _positions(problem, ranked),
        _positions(problem, chosen),
        seconds,
    )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            path,
            probability=run.probability,
            ranking=run.ranking,
            selected=run.selected,
            seconds=run.seconds,
        )
    return run


def forest_probabilities(problem: MultiProblem, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """P(detected) of every candidate per species from a random forest per species, fitted
    on the species' labelled training cells with the features ``reserve select`` uses
    (standardised over the training and candidate cells); and whether each candidate's own
    survey detected the species."""
    import pyogrio
    from sklearn.ensemble import RandomForestClassifier

    from benchmarks.bench_peers import standardise
    from reserve.config import SPECIES_LABEL_PREFIX, species_slug
    from reserve.design import feature_columns

    units = pyogrio.read_dataframe(problem.cells, layer="planning_units")
    locked = units["locked_out"].fillna(False).astype(bool).to_numpy()
    role = units["role"].astype(str).to_numpy()
    rows = np.flatnonzero(np.isin(role, ("train", "candidate")) & ~locked)
    X = standardise(units[feature_columns(units)].to_numpy(dtype=np.float64)[rows])
    cand = role[rows] == "candidate"
    if not np.array_equal(units["cell_id"].to_numpy()[rows][cand], problem.candidates):
        raise RuntimeError("candidate order differs between the problem and its cells")
    out = np.zeros((int(cand.sum()), len(problem.species)))
    detected = np.zeros(out.shape, dtype=bool)
    for s, name in enumerate(problem.species):
        label = units[SPECIES_LABEL_PREFIX + species_slug(name)].to_numpy()[rows]
        fit = ~cand & np.isin(label, (0, 1))
        model = RandomForestClassifier(n_estimators=300, random_state=seed, n_jobs=1)
        model.fit(X[fit], label[fit].astype(np.int64))
        proba = model.predict_proba(X[cand])
        out[:, s] = proba[:, list(model.classes_).index(1)] if 1 in model.classes_ else 0.0
        detected[:, s] = label[cand] == 1
    return out, detected


def target_plan(P: np.ndarray, k: int, targets: np.ndarray, seed: int) -> tuple[np.ndarray, str]:
    """``k`` candidate positions by :func:`reserve.solvers.targets.plan_species` (its
    defaults: SCIP up to its size limit, else LP rounding with a proven bound), and its
    status, solver and gap."""
    from reserve.solvers.targets import plan_species

    plan = plan_species(P, k, targets=targets, random_state=seed)
    status = f"{plan.status} ({plan.solver}, gap {plan.gap:.2g})"
    return np.asarray(plan.selected, dtype=np.int64), status


def ours_plan(
    problem: MultiProblem, k: int, targets: np.ndarray, seed: int
) -> tuple[np.ndarray, str]:
    """``k`` candidate positions from ``reserve select`` with every species and their
    absolute targets (``--target "S=N"``): what the command runs by default with several
    species (:mod:`reserve.representation`); and the plan's status, solver and gap."""
    from reserve.select import select_reserve

    res = select_reserve(
        k,
        problem.cells,
        species=list(problem.species),
        target={s: float(t) for s, t in zip(problem.species, targets, strict=True)},
        seed=seed,
        n_jobs=1,
    )
    sm = res.summary
    status = f"{sm['solver_status']} ({sm['plan_solver']}, gap {float(sm['gap']):.2g})"
    return _positions(problem, res.selected["cell_id"].to_numpy()), status


def multittk_plan(problem: MultiProblem, k: int, seed: int) -> np.ndarray:
    """``k`` candidate positions from ``reserve select`` with every species, ``--method ttk
    --joint-fit``: the linear joint fit (:class:`reserve.solvers.multi.MultiTTK`)."""
    from reserve.select import select_reserve

    res = select_reserve(
        k,
        problem.cells,
        species=list(problem.species),
        method="ttk",
        joint_fit=True,
        seed=seed,
        n_jobs=1,
    )
    if "MultiTTK" not in type(res.estimator).__name__:
        raise RuntimeError(f"expected MultiTTK, reserve select ran {res.estimator!r}")
    return _positions(problem, res.selected["cell_id"].to_numpy())


# --------------------------------------------------------------------------- running


def run_problem(
    problem: MultiProblem,
    budgets: Sequence[int],
    seed: int = 0,
    methods: Sequence[str] = (*METHODS, *DIAGNOSTICS),
    cache: Path | None = None,
) -> list[dict]:
    """``methods`` at every budget of one problem; one record per method, budget, species.

    The single-species runs that set the targets run (or are read from ``cache``) whatever
    ``methods`` holds.
    """
    records = []
    code = revision()
    forest_seconds = 0.0
    if {"rf+targets", "rf+detections"} & set(methods):
        t0 = time.perf_counter()
        forest, detected = forest_probabilities(problem, seed)
        forest_seconds = time.perf_counter() - t0
    for k in budgets:
        runs = [species_run(problem, s, k, seed, cache) for s in problem.species]
        P = np.column_stack([r.probability for r in runs])
        targets = plan_targets(P, [r.selected for r in runs])
        true_targets = plan_targets(problem.truth, [r.selected for r in runs])
        single = sum(r.seconds for r in runs)
        chosen: dict[str, tuple[np.ndarray, float, str]] = {}
        if "ours" in methods:
            t0 = time.perf_counter()
            rows, status = ours_plan(problem, k, targets, seed)
            chosen["ours"] = (rows, time.perf_counter() - t0, status)
        if "split" in methods:
            t0 = time.perf_counter()
            rows = budget_share_split([r.ranking for r in runs], k)
            chosen["split"] = (rows, single + time.perf_counter() - t0, "")
        if "rf+targets" in methods:
            t0 = time.perf_counter()
            rows, status = target_plan(forest, k, targets, seed)
            chosen["rf+targets"] = (rows, forest_seconds + time.perf_counter() - t0, status)
        if "multittk" in methods:
            t0 = time.perf_counter()
            rows = multittk_plan(problem, k, seed)
            chosen["multittk"] = (rows, time.perf_counter() - t0, "")
        if "rf+detections" in methods:
            t0 = time.perf_counter()
            rows, status = target_plan(np.where(detected, 1.0, forest), k, targets, seed)
            chosen["rf+detections"] = (rows, forest_seconds + time.perf_counter() - t0, status)
        for method, (rows, seconds, status) in chosen.items():
            if rows.size != k or np.unique(rows).size != k:
                raise RuntimeError(f"{method} chose {np.unique(rows).size} cells, not {k}")
            score = score_plan(rows, problem.truth, targets)
            true_met = score_plan(rows, problem.truth, true_targets)["met"]
            for s, name in enumerate(problem.species):
                records.append(
                    {
                        "suite": problem.suite,
                        "problem": problem.name,
                        "k": k,
                        "method": method,
                        "species": name,
                        "target": float(targets[s]),
                        "expected": float(P[rows, s].sum()),
                        "occupied": int(score["occupied"][s]),
                        "met": int(score["met"][s]),
                        "target_true": float(true_targets[s]),
                        "met_true": int(true_met[s]),
                        "seconds": seconds,
                        "status": status,
                        "code": code,
                    }
                )
        line = "  ".join(
            f"{m} {_n_met(records, problem, k, m)}/{len(problem.species)} "
            f"{_total(records, problem, k, m)}"
            for m in chosen
        )
        print(f"{problem.suite} | {problem.name} | k {k}: {line}", flush=True)
    return records


def _n_met(records: list[dict], problem: MultiProblem, k: int, method: str) -> int:
    return sum(
        r["met"]
        for r in records
        if r["problem"] == problem.name and r["k"] == k and r["method"] == method
    )


def _total(records: list[dict], problem: MultiProblem, k: int, method: str) -> int:
    return sum(
        r["occupied"]
        for r in records
        if r["problem"] == problem.name and r["k"] == k and r["method"] == method
    )


# --------------------------------------------------------------------------- report


def per_plan(records: list[dict]) -> dict[tuple, dict[str, float]]:
    """Per ``(suite, problem, k, method)``: ``n_met``, ``n_met_true``, ``total`` and
    ``seconds``."""
    out: dict[tuple, dict[str, float]] = {}
    for r in records:
        key = (r["suite"], r["problem"], r["k"], r["method"])
        cur = out.setdefault(
            key, {"n_met": 0, "n_met_true": 0, "total": 0, "seconds": r["seconds"], "n": 0}
        )
        cur["n_met"] += r["met"]
        cur["n_met_true"] += r["met_true"]
        cur["total"] += r["occupied"]
        cur["n"] += 1
    return out


def paired(
    plans: dict[tuple, dict[str, float]], ref: str, other: str, key: str
) -> tuple[np.ndarray, int]:
    """``ref``'s ``key`` minus ``other``'s over the plans both made; and their count."""
    d = [
        v[key] - plans[(*c[:3], other)][key]
        for c, v in plans.items()
        if c[3] == ref and (*c[:3], other) in plans
    ]
    return np.asarray(d, dtype=np.float64), len(d)


def _wtl_p(d: np.ndarray) -> tuple[str, str]:
    from benchmarks.bench_peers import wilcoxon_p

    wtl = f"{int((d > 0).sum())}/{int((d == 0).sum())}/{int((d < 0).sum())}"
    p = f"{wilcoxon_p(d):.3g}" if d.size >= MIN_PAIRS else "-"
    return wtl, p


#: What each score of a plan is called in the report.
SCORES = {
    "n_met": "targets met",
    "n_met_true": "targets met, truth unit",
    "total": "total occupied",
}


def suite_report(records: list[dict], methods: Sequence[str]) -> list[str]:
    """Markdown of one suite: per budget the means per method and species, the paired
    comparison of ``ours`` with each method and the issue's targets."""
    suite = records[0]["suite"]
    species = list(dict.fromkeys(r["species"] for r in records))
    plans = per_plan(records)
    ref = methods[0]
    problems = list(dict.fromkeys(r["problem"] for r in records))
    lines = [
        f"## {suite}",
        "",
        f"{len(problems)} problems ({', '.join(problems)}); means over them. *Targets met*: "
        f"species (of {len(species)}) whose truly occupied chosen cells reach the target "
        "passed to the planner (expected occupied cells); *truth unit*: reach half the truly "
        "occupied cells of the species' own single-species plan; *total*: truly occupied "
        "(cell, species) pairs among the chosen cells; per species: truly occupied chosen "
        "cells (share of problems meeting the planner's target / the truth-unit target); "
        "*expected*: the sum of the calibrated probabilities (ours') over the chosen cells; "
        "seconds per plan include the fits it needs.",
        "",
    ]
    for k in dict.fromkeys(r["k"] for r in records):
        mine = [r for r in records if r["k"] == k and r["method"] == ref]
        tgt = [
            (
                np.mean([r["target"] for r in mine if r["species"] == sp]),
                np.mean([r["target_true"] for r in mine if r["species"] == sp]),
            )
            for sp in species
        ]
        lines += [
            f"**k = {k}**; targets, mean (planner's / truth unit): "
            + ", ".join(f"{sp} {a:.1f} / {b:.1f}" for sp, (a, b) in zip(species, tgt, strict=True)),
            "",
            "| method | targets met | truth unit | total occupied | "
            + " | ".join(species)
            + " | expected | s per plan |",
            "|---|---|---|---|" + "---|" * len(species) + "---|---|",
        ]
        for m in methods:
            rows = [r for r in records if r["k"] == k and r["method"] == m]
            if not rows:
                continue
            pl = [v for c, v in plans.items() if c[2] == k and c[3] == m]
            cells = []
            for sp in species:
                rs = [r for r in rows if r["species"] == sp]
                cells.append(
                    f"{np.mean([r['occupied'] for r in rs]):.1f} "
                    f"({np.mean([r['met'] for r in rs]):.0%} / "
                    f"{np.mean([r['met_true'] for r in rs]):.0%})"
                )
            expected = np.mean([r["expected"] for r in rows]) * len(species)
            lines.append(
                f"| {m} | {np.mean([v['n_met'] for v in pl]):.2f} | "
                f"{np.mean([v['n_met_true'] for v in pl]):.2f} | "
                f"{np.mean([v['total'] for v in pl]):.1f} | "
                + " | ".join(cells)
                + f" | {expected:.1f} | {np.mean([v['seconds'] for v in pl]):.1f} |"
            )
        lines.append("")
    lines += [
        f"Paired, {ref} against each method over every problem and budget: wins / ties / "
        f"losses and Wilcoxon p (when at least {MIN_PAIRS} pairs).",
        "",
        "| method | pairs | " + " | ".join(f"{what}: w/t/l | p" for what in SCORES.values()) + " |",
        "|---|---|" + "---|---|" * len(SCORES),
    ]
    for m in methods[1:]:
        cells = []
        for key in SCORES:
            d, n = paired(plans, ref, m, key)
            cells += list(_wtl_p(d))
        if n:
            lines.append(f"| {m} | {n} | " + " | ".join(cells) + " |")
    lines += ["", *target_check(records, methods), ""]
    return lines


def target_check(records: list[dict], methods: Sequence[str]) -> list[str]:
    """The issue's targets per budget: ours' mean targets met (in both units) and total
    occupied at least every alternative's (the diagnostics aside); where not, by how much."""
    plans = per_plan(records)
    ref = methods[0]
    out = ["Issue targets (means over the problems, per budget):", ""]
    for k in dict.fromkeys(r["k"] for r in records):
        mean = {
            m: {
                key: np.mean([v[key] for c, v in plans.items() if c[2] == k and c[3] == m])
                for key in SCORES
            }
            for m in methods
            if m not in DIAGNOSTICS and any(c[2] == k and c[3] == m for c in plans)
        }
        for key, what in SCORES.items():
            short = [
                f"{m} by {mean[m][key] - mean[ref][key]:.2f}"
                for m in mean
                if m != ref and mean[m][key] > mean[ref][key] + 1e-12
            ]
            verdict = "met" if not short else "not met: below " + ", ".join(short)
            out.append(f"- k = {k}, {what} ({ref} {mean[ref][key]:.2f}): {verdict}")
    return out


def revision() -> str:
    """The repository's commit (short), ``+`` when the work tree has changes; ``unknown``
    outside a git checkout."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+" if dirty else "")


def report(records: list[dict], command: str, notes: Sequence[str]) -> str:
    """The whole markdown report of the several-species suite."""
    methods = [m for m in (*METHODS, *DIAGNOSTICS) if any(r["method"] == m for r in records)]
    codes = ", ".join(dict.fromkeys(str(r.get("code", "unknown")) for r in records))
    lines = [
        "# Peers, several species: targets met and true occupied cells",
        "",
        f"`{command}` (Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{platform.machine()}; code {codes}, report written {time.strftime('%Y-%m-%d')}). "
        "Methods, targets and truth: see `benchmarks/peers_multi.py`.",
        "",
        *[f"- {n}" for n in notes],
        *([""] if notes else []),
    ]
    for suite in dict.fromkeys(r["suite"] for r in records):
        lines += suite_report([r for r in records if r["suite"] == suite], methods)
    return "\n".join(lines) + "\n"


_NUMERIC: dict[str, Callable[[str], Any]] = {
    "k": int,
    "target": float,
    "expected": float,
    "occupied": int,
    "met": int,
    "target_true": float,
    "met_true": int,
    "seconds": float,
}


def read_records(path: Path) -> list[dict]:
    """The records of a ``--csv`` file of this suite, numbers parsed back."""
    return read_peer_records(path, _NUMERIC)


def multi_problems(
    seeds: Sequence[int], n_folds: int, work: Path, notes: list[str], regions: Sequence[str]
) -> Iterator[MultiProblem]:
    """The suite's problems: the default region's seeds, then BCR 27's folds (when present)."""
    if "region" in regions:
        yield from region_problems(seeds, work)
    if "bcr27" in regions:
        from reserve.paper.surrogates import default_bcr27_dir

        source = default_bcr27_dir()
        if source is None or not source.is_dir():
            notes.append(
                "multi (bcr27) skipped: the eBird folder ../shared/real/ebird-bcr27 is absent "
                "(set RESERVE_BCR27_DIR)"
            )
            return
        with tempfile.TemporaryDirectory(prefix="peers_multi_bcr27_") as tmp:
            yield from bcr27_problems(n_folds, Path(tmp), source)


def run_suite(
    seeds: Sequence[int],
    n_folds: int,
    work: Path,
    *,
    regions: Sequence[str] = ("region", "bcr27"),
    budgets: Sequence[int] = BUDGETS,
    methods: Sequence[str] = (*METHODS, *DIAGNOSTICS),
    cache: Path | None = None,
    csv_path: Path | None = None,
    notes: list[str] | None = None,
) -> list[dict]:
    """Every problem of the suite at every budget; records appended to ``csv_path`` as each
    problem ends (``cache``: see :func:`species_run`)."""
    from threadpoolctl import threadpool_limits

    notes = [] if notes is None else notes
    records: list[dict] = []
    with threadpool_limits(1):
        for problem in multi_problems(seeds, n_folds, work, notes, regions):
            new = run_problem(problem, budgets, methods=methods, cache=cache)
            if csv_path is not None:
                append_records(csv_path, new, fresh=not records)
            records += new
    return records


def cli(args: Any, command: str) -> int:
    """``python -m benchmarks.bench_peers --suites multi``: run (or read ``--from-csv``),
    print and write the report.

    ``args`` are :mod:`benchmarks.bench_peers`' parsed options: ``seeds`` (default 0-4,
    ``--quick`` the first 2), ``folds`` (BCR 27 candidate folds, ``--quick`` 2), ``regions``,
    ``methods`` (default all), ``work`` (kept: the redrawn regions and, under
    ``species_runs``, the single-species runs, read back by a later run; keep it outside the
    repository), ``csv``, ``from_csv`` and ``out``.
    """
    from benchmarks.bench_peers import write_atomic

    notes: list[str] = []
    methods = tuple(args.methods.split(",")) if args.methods else (*METHODS, *DIAGNOSTICS)
    unknown = sorted(set(methods) - {*METHODS, *DIAGNOSTICS})
    if unknown:
        raise SystemExit(
            f"unknown method {unknown}; the multi suite has {', '.join((*METHODS, *DIAGNOSTICS))}"
        )
    if args.from_csv is not None:
        records = read_records(args.from_csv)
    else:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else list(range(5))
        seeds = seeds[:2] if args.quick else seeds
        with tempfile.TemporaryDirectory() as tmp:
            work = args.work or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            records = run_suite(
                seeds,
                2 if args.quick else args.folds,
                work,
                regions=tuple(args.regions.split(",")),
                methods=methods,
                cache=None if args.work is None else args.work / "species_runs",
                csv_path=args.csv,
                notes=notes,
            )
    text = report(records, command, notes)
    print(text)
    write_atomic(args.out, text)
    return 0
