"""Peers: the cells TTK selects against what a planner's ten lines of scikit-learn would select.

Every method is one entry of :data:`METHODS`, a callable
``fit_and_rank(X_all, y, k, seed, **context) -> rows``: ``X_all`` holds the features of the
labelled and the candidate rows (standardised as ``reserve select`` does, over both), ``y`` is
0/1 on labelled rows and -1 on candidates, and the callable returns ``k`` candidate rows of
``X_all``, best first. ``context`` carries what a method may use besides (``cell_id`` of every
row when the rows are grid cells, ``effort_columns``: the columns of ``X_all`` that hold the
effort covariates, empty without them; methods ignore what they do not need). Adding a method is
adding one entry. The peers get honest library defaults, the same features and the same rows,
and select their ``k`` best-scoring candidates:

- ``auto``: ``reserve select``'s default, :class:`reserve.solvers.AutoTTK` (the feature map and
  ``C`` chosen by transductive cross-validation on the labelled rows);
- ``ttk``: linear TTK as ``reserve select --model linear`` runs it (``TTK(k, C=1)``, FD + polish);
- ``svm``: the shifted SVM (:class:`reserve.solvers.SVM`, ``C = 1``);
- ``logreg``: ``LogisticRegression()``; ``rf``: ``RandomForestClassifier(n_estimators=300)``;
  ``hgb``: ``HistGradientBoostingClassifier()``; ``maxent``:
  ``elapid.MaxentModel(random_state=seed)`` fitted with detections as presences and
  non-detections as background (skipped with a note when elapid is not installed:
  ``pip install elapid``);
- ``random``: a seeded uniform draw of ``k`` candidates.

Design probes, run only when ``--methods`` names them (:data:`AUTO_VARIANTS`): AutoTTK with
one choice fixed, ``auto-ensemble`` (the search over every map at any number of labelled
cells: without the rule for few labelled cells, ``small_training=0``), ``auto-winner`` (that
search's winner alone, no ensemble), ``auto-linear`` (the linear map alone) and
``auto-balanced`` (balanced class weights always).

Every method also has a scorer in :data:`SCORERS`, ``score_candidates(X_all, y, k, seed,
**context) -> one score per candidate row, in row order`` (``auto``, ``ttk``, ``svm``: the
fitted estimator's ``decision_function`` on the candidate rows; the scikit-learn peers:
``predict_proba[:, 1]``; ``maxent``: elapid's ``predict``; ``random``: a seeded uniform score);
the ``ebird`` suite ranks every candidate with it.

Suites (``--suites``):

- ``region``: the default region, simulation seeds 0-4 redrawn on the shipped landscape
  (:func:`benchmarks.bench_default_region.simulated_region`), both virtual species, k = 10,
  30, 100, precision against the simulated truth of each species;
- ``bcr27``: the BCR 27 surrogates (:mod:`reserve.paper.surrogates`; skipped when the eBird
  folder is absent), 3 species x 10 candidate folds (k = 5 % of the fold), scored on all candidates
  (``random`` folds), on the candidates with at least 5 checklists (``random, >= 5``: the fold
  restricted to them, k = 5 % of those), and on spatially blocked folds (``blocked``: the
  candidates in cell-id order, i.e. latitude bands of the grid, cut into 10 contiguous blocks);
- ``ebird``: real eBird planning units (:mod:`benchmarks.peers_ebird`): each BCR 27 state
  with national forests (``--states``), the three species of :mod:`pipelines.ebird_bcr27`,
  3 and 10 km cells (``--sizes``), ingested as the README walkthrough does; every method
  scores every private candidate (TTK's budget k = 20) and is checked on the *surveyed*
  private cells with the effort-stratified precision in the top 5 % (``precision``) and AUC
  (``auc``) of :mod:`reserve.confidence`: fitted on the public cells (``ebird (public)``), and
  on contiguous blocks or random folds of the surveyed private cells (``--surveyed-folds``),
  where each method ``m`` is the public fit and ``m+surveyed`` a fit that also learns the
  labels of the surveyed private cells outside the fold. Run it on its own with ``--csv``;
  ``--work`` keeps the ingested units (outside the repository: eBird data is never
  redistributed);
- ``multi``: several species at once (:mod:`benchmarks.peers_multi`, run on its own): the
  default region (both virtual species, seeds as ``region``) and BCR 27 (its three species,
  ``--folds`` random candidate folds; ``--regions`` picks them), budgets 30 and 100, each
  species' target half of what its own single-species plan reaches; the several-species
  path with targets against separate plans split by budget share, a random forest per
  species with the same targets, and ``MultiTTK``; targets met and true occupied cells.
  Its figures are in ``benchmarks/results/peers_multi.md`` (the default ``--out`` of the
  suite);
- ``uci``: the seven UCI sets of the paper, 10 random 50/50 splits each
  (:func:`reserve.paper.datasets.transductive_split`, seeds 0-9), k = 5 % of the test half; unlike
  the paper's Table 3, no method tunes ``C``.

For each suite: mean precision per method (and per group), the paired wins / ties / losses and
the two-sided Wilcoxon signed-rank p of the reference method (``--reference``, by default the
method ``reserve select`` runs by default) against every other, and mean seconds per fit (the
``ebird`` suites: for the precision and the AUC, and against ``auto+surveyed`` too).

Effort (``--effort on|off|both``, default as ``reserve select``'s): the region, BCR 27 and
ebird rows get the survey-effort covariates of ``reserve select --effort`` (:func:`with_effort`:
``log1p`` checklists, hours and km; BCR 27 has checklists only), the same for every method,
candidates at the labelled rows' median (the peers fit on the labelled rows with the
covariates and score the candidates at that standard effort; ``auto``'s cross-validation also
scores each held-out fold at the standard effort, see ``AutoTTK(effort_columns=...)``);
``both`` runs each suite twice (``region`` and ``region + effort``) and adds a section pairing
every method with and without them. UCI rows have no effort.

Run: ``python -m benchmarks.bench_peers [--suites region,bcr27,uci|ebird] [--quick]`` (writes
``benchmarks/results/peers.md``; the ``ebird`` suite's figures are kept in
``benchmarks/results/peers_ebird.md``, written with ``--out`` naming it; ``--quick``: 2 seeds,
3 folds, 3 splits; ``--seeds``, ``--folds``, ``--splits`` set them, ``--first-split`` starts
the UCI splits later, so that two runs can share them; BCR 27 reads ``RESERVE_BCR27_DIR`` when
set). ``--csv`` appends every record as each problem ends; ``--from-csv`` writes the report
from such a file (a stopped run's too) without fitting anything.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from reserve.config import SELECT_DEFAULTS
from reserve.solvers import SVM, TTK, top_k

OUT = Path(__file__).resolve().parent / "results" / "peers.md"

#: ``fit_and_rank(X_all, y, k, seed, **context) -> k candidate rows of X_all, best first``.
FitAndRank = Callable[..., np.ndarray]
#: ``score_candidates(X_all, y, k, seed, **context) -> one score per candidate row (y == -1),
#: in row order, higher first``.
ScoreCandidates = Callable[..., np.ndarray]


def rank_candidates(scores: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` candidate rows (``y == -1``) with the largest ``scores``, best first.

    ``scores`` holds one value per candidate, in row order; ties go to the lower row.
    """
    cand = np.flatnonzero(y == -1)
    return cand[top_k(np.asarray(scores, dtype=np.float64), k)]


def _labelled(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lab = y != -1
    return X[lab], y[lab], X[~lab]


def ttk_linear(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any) -> np.ndarray:
    """Linear TTK as ``reserve select --method ttk`` runs it today (C = 1, FD + polish)."""
    return np.asarray(TTK(k=k, C=1.0, random_state=seed).fit(X, y).selected_, dtype=np.int64)


def auto_ttk(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any) -> np.ndarray:
    """``reserve select``'s default: AutoTTK (feature map and C chosen by transductive CV).

    With the effort covariates (``context["effort_columns"]``) its CV scores each held-out
    fold at the standard effort, as ``reserve select --effort`` runs it.
    """
    return auto_selection({})(X, y, k, seed, **context)


def auto_selection(params: dict[str, Any]) -> FitAndRank:
    """The ``fit_and_rank`` of AutoTTK with ``params`` (none: the default): its selected
    cells, ties at the cut broken as ``reserve select`` breaks them."""

    def fit_and_rank(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any):
        est = auto_estimator(k, seed, params, **context)
        return np.asarray(est.fit(X, y).selected_, dtype=np.int64)

    return fit_and_rank


def auto_estimator(k: int, seed: int, params: dict[str, Any], **context: Any) -> Any:
    """AutoTTK as the benchmarks fit it: budget ``k``, seeded, the context's effort columns,
    then ``params`` (a design probe's, or none for the default)."""
    from reserve.solvers import AutoTTK

    est = AutoTTK(k=k, random_state=seed, effort_columns=context.get("effort_columns"))
    return est.set_params(**params)


def shifted_svm(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any) -> np.ndarray:
    """The shifted SVM baseline (C = 1): a hinge-loss SVM on the labelled rows, top k."""
    return np.asarray(SVM(k=k, C=1.0).fit(X, y).selected_, dtype=np.int64)


def ranked(score_candidates: ScoreCandidates) -> FitAndRank:
    """The ``fit_and_rank`` of a scorer: its ``k`` best-scoring candidates."""

    def fit_and_rank(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any):
        return rank_candidates(score_candidates(X, y, k, seed, **context), y, k)

    return fit_and_rank


def sklearn_scores(make: Callable[[int], Any]) -> ScoreCandidates:
    """A scorer from a classifier factory ``make(seed)``: fit on labelled rows, P(1)."""

    def score_candidates(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any):
        Xl, yl, Xc = _labelled(X, y)
        return make(seed).fit(Xl, yl).predict_proba(Xc)[:, 1]

    return score_candidates


def sklearn_peer(make: Callable[[int], Any]) -> FitAndRank:
    """A peer from a classifier factory ``make(seed)``: fit on labelled rows, top k by P(1)."""
    return ranked(sklearn_scores(make))


def _logreg(seed: int) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(random_state=seed)


def _forest(seed: int) -> Any:
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=300, random_state=seed, n_jobs=1)


def _boosting(seed: int) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(random_state=seed)


def maxent_scores(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any) -> np.ndarray:
    """elapid's Maxent with its defaults: detections are presences, non-detections background.

    Seeded with the problem's ``seed`` (its only non-default argument): without glmnet elapid
    fits with scikit-learn's liblinear, whose coordinate order is random, so an unseeded fit
    selects different cells from run to run.
    """
    import elapid

    Xl, yl, Xc = _labelled(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = elapid.MaxentModel(random_state=seed).fit(Xl, yl)
        return np.asarray(model.predict(Xc), dtype=np.float64).ravel()


def random_pick(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any) -> np.ndarray:
    """A seeded uniform draw of ``k`` candidates."""
    cand = np.flatnonzero(y == -1)
    return np.sort(np.random.default_rng(seed).choice(cand, size=k, replace=False))


def auto_scores(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any) -> np.ndarray:
    """AutoTTK fitted as in :func:`auto_ttk`; its ``decision_function`` on the candidates."""
    est = auto_estimator(k, seed, {}, **context)
    return est.fit(X, y).decision_function(X[y == -1])


#: AutoTTK with one of its choices fixed (a design probe, not a peer): the search over every
#: map whatever the labelled cells, that search's winner alone, the linear map alone, balanced
#: class weights always. In :data:`METHODS` each selects as the default does
#: (:func:`auto_selection`), in :data:`SCORERS` it scores every candidate.
AUTO_VARIANTS: dict[str, dict[str, Any]] = {
    "auto-winner": {"ensemble": "none", "small_training": 0},
    "auto-linear": {"models": ("linear",)},
    "auto-balanced": {"class_weight": "balanced"},
    "auto-ensemble": {"small_training": 0},
}


def auto_variant(name: str) -> ScoreCandidates:
    """The scorer of :data:`AUTO_VARIANTS` ``name``: AutoTTK fitted as in :func:`auto_scores`
    with that variant's parameters."""

    def score_candidates(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any):
        est = auto_estimator(k, seed, AUTO_VARIANTS[name], **context)
        return est.fit(X, y).decision_function(X[y == -1])

    return score_candidates


def default_methods(methods: dict[str, Any]) -> list[str]:
    """The methods a run compares when ``--methods`` is not given: all but the design probes
    of :data:`AUTO_VARIANTS`."""
    return [m for m in methods if m not in AUTO_VARIANTS]


def ttk_scores(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any) -> np.ndarray:
    """Linear TTK as in :func:`ttk_linear`; its ``decision_function`` on the candidates."""
    return TTK(k=k, C=1.0, random_state=seed).fit(X, y).decision_function(X[y == -1])


def svm_scores(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any) -> np.ndarray:
    """The shifted SVM as in :func:`shifted_svm`; its ``decision_function`` on the candidates."""
    return SVM(k=k, C=1.0).fit(X, y).decision_function(X[y == -1])


def random_scores(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any) -> np.ndarray:
    """A seeded uniform score per candidate."""
    return np.random.default_rng(seed).random(int((y == -1).sum()))


#: The methods compared, by name. Add a method by adding an entry.
METHODS: dict[str, FitAndRank] = {
    "auto": auto_ttk,
    "ttk": ttk_linear,
    "svm": shifted_svm,
    "logreg": sklearn_peer(_logreg),
    "rf": sklearn_peer(_forest),
    "hgb": sklearn_peer(_boosting),
    "maxent": ranked(maxent_scores),
    "random": random_pick,
    **{name: auto_selection(params) for name, params in AUTO_VARIANTS.items()},
}

#: Each method's scorer of every candidate (the ``ebird`` suite ranks them all).
SCORERS: dict[str, ScoreCandidates] = {
    "auto": auto_scores,
    "ttk": ttk_scores,
    "svm": svm_scores,
    "logreg": sklearn_scores(_logreg),
    "rf": sklearn_scores(_forest),
    "hgb": sklearn_scores(_boosting),
    "maxent": maxent_scores,
    "random": random_scores,
    **{name: auto_variant(name) for name in AUTO_VARIANTS},
}

#: The method ``reserve select`` runs by default (the reference of the paired comparisons).
DEFAULT_METHOD = "auto"


@dataclass
class Problem:
    """One transductive problem: features of all rows, labels (-1 = candidate), the truth."""

    suite: str
    group: str
    name: str
    X: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    truth: np.ndarray = field(repr=False)  # 0/1 per row; only the candidates' are read
    ks: tuple[int, ...]
    context: dict[str, Any] = field(default_factory=dict, repr=False)


def standardise(X: np.ndarray) -> np.ndarray:
    """Mean 0, sd 1 per column over all rows (constant columns centred), as select does."""
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


# --------------------------------------------------------------------------- suites


def effort_suffix(effort: bool) -> str:
    """What a suite's name gets when its rows carry the effort covariates."""
    return " + effort" if effort else ""


def with_effort(raw: np.ndarray, effort: pd.DataFrame, labelled: np.ndarray) -> np.ndarray:
    """``raw`` features with the effort covariates of ``reserve select --effort`` appended.

    ``effort`` holds the effort columns of the same rows (any of
    :data:`reserve.config.EFFORT_COLUMNS`); the labelled rows keep their ``log1p`` effort and
    every other row is set to the labelled rows' median before anything is fitted
    (:func:`reserve.design.effort_covariates`), for every method alike.
    """
    from reserve.design import effort_covariates

    cov, _ = effort_covariates(effort, np.asarray(labelled, dtype=bool))
    return np.hstack([raw, cov.to_numpy(dtype=np.float64)])


def region_problems(
    seeds: list[int], work: Path, budgets: tuple[int, ...], effort: bool = False
) -> Iterator[Problem]:
    """The default region, redrawn per seed: both species, features and rows as select's."""
    import pyogrio

    from benchmarks.bench_default_region import simulated_region
    from reserve.config import DEFAULT_REGION, EFFORT_COLUMNS, SPECIES_LABEL_PREFIX, species_slug
    from reserve.default_region import FILES
    from reserve.evaluate import read_truth

    for seed in seeds:
        folder = work / f"seed{seed}"
        cached = sorted((folder / "cache").glob("*.gpkg")) if folder.is_dir() else []
        cells = cached[0] if cached else simulated_region(seed, work)[0]
        units = pyogrio.read_dataframe(cells, layer="planning_units", read_geometry=False)
        features = [c for c in units.columns if c.startswith(("landcover_", "elevation_"))]
        role = units["role"].astype(str).to_numpy()
        locked = units["locked_out"].fillna(False).astype(bool).to_numpy()
        rows = np.flatnonzero(np.isin(role, ("train", "candidate")) & ~locked)
        is_cand = role[rows] == "candidate"
        raw = units[features].to_numpy(dtype=np.float64)[rows]
        n_habitat = raw.shape[1]
        if effort:
            raw = with_effort(
                raw, units[list(EFFORT_COLUMNS)].iloc[rows].reset_index(drop=True), ~is_cand
            )
        X = standardise(raw)
        ids = units["cell_id"].to_numpy()[rows]
        context = {"cell_id": ids, "effort_columns": tuple(range(n_habitat, X.shape[1]))}
        for i, species in enumerate(DEFAULT_REGION.species_all):
            label = units[SPECIES_LABEL_PREFIX + species_slug(species)].to_numpy()[rows]
            y = np.where(is_cand, -1, label).astype(np.int64)
            key = "truth" if i == 0 else f"truth_{species_slug(species)}"
            truth = read_truth(folder / FILES[key]).loc[ids, "occupied"].to_numpy(dtype=np.int64)
            yield Problem(
                "region" + effort_suffix(effort),
                species,
                f"seed {seed}",
                X,
                y,
                truth,
                budgets,
                context,
            )


def _bcr27_folds(inst: Any, n_folds: int, blocked: bool, seed: int) -> list[np.ndarray]:
    """Candidate positions (0..m-1) of each fold: a seeded permutation, or cell-id bands."""
    m = inst.n_candidates
    order = np.arange(m) if blocked else np.random.default_rng(seed).permutation(m)
    return [np.sort(f) for f in np.array_split(order, n_folds)]


def bcr27_problems(
    n_folds: int, min_checklists: int = 5, effort: bool = False
) -> Iterator[Problem]:
    """BCR 27 surrogates: random folds (all / well-surveyed candidates) and blocked folds.

    With ``effort`` the covariate is the checklists per cell (the surrogates keep no hours or
    kilometres); candidates are scored at the labelled cells' median.
    """
    from reserve.paper.surrogates import BCR27_SPECIES, bcr27_instance

    for code, common in BCR27_SPECIES.items():
        inst = bcr27_instance(code)
        lab = np.flatnonzero(inst.y != -1)
        cand = np.flatnonzero(inst.y == -1)
        raw = inst.features.to_numpy(dtype=np.float64)
        variants = (
            ("random", False, 1),
            (f"random, >= {min_checklists}", False, min_checklists),
            ("blocked", True, 1),
        )
        for variant, blocked, least in variants:
            for j, fold in enumerate(_bcr27_folds(inst, n_folds, blocked, seed=0)):
                fold = fold[inst.n_checklists[cand[fold]] >= least]
                rows = np.concatenate([lab, cand[fold]])
                y = np.concatenate([inst.y[lab], -np.ones(fold.size, dtype=np.int64)])
                truth = np.concatenate([inst.y[lab], inst.y_candidates[fold]])
                k = max(1, round(0.05 * fold.size))
                context = {"cell_id": inst.cell_ids[rows], "n_checklists": inst.n_checklists[rows]}
                Xr = raw[rows]
                if effort:
                    frame = pd.DataFrame({"n_checklists": inst.n_checklists[rows]})
                    Xr = with_effort(Xr, frame, y != -1)
                context["effort_columns"] = tuple(range(raw.shape[1], Xr.shape[1]))
                X = standardise(Xr)
                yield Problem(
                    f"bcr27 ({variant}){effort_suffix(effort)}",
                    common,
                    f"fold {j}",
                    X,
                    y,
                    truth,
                    (k,),
                    context,
                )


def uci_problems(n_splits: int, first: int = 0) -> Iterator[Problem]:
    """The paper's seven UCI sets: random 50/50 splits ``first .. n_splits - 1``, k = 5 % of
    the test half (split ``s`` is the same whichever runs beside it)."""
    from reserve.paper.datasets import BENCHMARKS, load_benchmark, transductive_split

    data = {name: load_benchmark(name) for name in BENCHMARKS}
    for s in range(first, n_splits):  # splits outermost: a partial run covers every set
        for name, (X, y0) in data.items():
            Xa, yf, yh, k = transductive_split(X, y0, random_state=s)
            truth = np.concatenate([yf[yf != -1], yh])
            yield Problem("uci", name, f"split {s}", Xa, yf, truth, (k,))


# --------------------------------------------------------------------------- running


def run_problem(problem: Problem, methods: dict[str, FitAndRank], seed: int = 0) -> list[dict]:
    """Fit every method for every ``k`` of ``problem``; one record per (method, k)."""
    records = []
    for k in problem.ks:
        for name, fit_and_rank in methods.items():
            t0 = time.perf_counter()
            rows = np.asarray(fit_and_rank(problem.X, problem.y, k, seed, **problem.context))
            seconds = time.perf_counter() - t0
            if rows.size != k or (problem.y[rows] != -1).any():
                raise RuntimeError(f"{name} returned {rows.size} rows, not {k} candidates")
            records.append(
                {
                    "suite": problem.suite,
                    "group": problem.group,
                    "problem": problem.name,
                    "k": k,
                    "method": name,
                    "precision": float(problem.truth[rows].mean()),
                    "seconds": seconds,
                    "n_labelled": int((problem.y != -1).sum()),
                    "n_positive": int((problem.y == 1).sum()),
                    "n_candidates": int((problem.y == -1).sum()),
                }
            )
        line = "  ".join(f"{r['method']} {r['precision']:.2f}" for r in records if r["k"] == k)
        print(f"{problem.suite} | {problem.group} | {problem.name} | k {k}: {line}", flush=True)
    return records


def wilcoxon_p(diff: np.ndarray) -> float:
    """Two-sided Wilcoxon signed-rank p of paired differences (1 when all are zero)."""
    from scipy.stats import wilcoxon

    if not np.any(diff != 0):
        return 1.0
    return float(wilcoxon(diff).pvalue)


def _paired(records: list[dict], method: str, key: str = "precision") -> dict[tuple, float]:
    return {
        (r["group"], r["problem"], r["k"]): r[key]
        for r in records
        if r["method"] == method and np.isfinite(r[key])
    }


def _mean(records: list[dict], key: str, **match: Any) -> float:
    """Mean ``key`` of the records matching ``match`` (NaN when none; NaN values skipped)."""
    v = [r[key] for r in records if all(r[f] == x for f, x in match.items())]
    v = [x for x in v if np.isfinite(x)]
    return float(np.mean(v)) if v else float("nan")


def mean_table(
    records: list[dict], methods: list[str], reference: str, key: str = "precision"
) -> list[str]:
    """Markdown table of the mean ``key`` per method and group (and k when several)."""
    groups = list(dict.fromkeys((r["group"], r["k"]) for r in records if r["method"] == reference))
    per_problem = {(r["group"], r["problem"]) for r in records}
    multi_k = len({(r["group"], r["problem"], r["k"]) for r in records}) > len(per_problem)
    lines = ["| group | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    keys = groups if multi_k else list(dict.fromkeys((g, None) for g, _ in groups))
    for group, k in keys:
        match = {"group": group} if k is None else {"group": group, "k": k}
        cells = [_mean(records, key, method=m, **match) for m in methods]
        label = f"{group}, k = {k}" if multi_k else group
        lines.append(
            f"| {label} | " + " | ".join("-" if np.isnan(c) else f"{c:.3f}" for c in cells) + " |"
        )
    best = {m: _mean(records, key, method=m) for m in methods}
    top = np.nanmax(list(best.values()))
    lines.append(
        "| **all** | "
        + " | ".join(f"**{best[m]:.3f}**" if best[m] == top else f"{best[m]:.3f}" for m in methods)
        + " |"
    )
    return lines


def paired_table(
    records: list[dict], methods: list[str], reference: str, key: str = "precision"
) -> list[str]:
    """Markdown: ``reference`` against each method, paired per problem and k."""
    ref = _paired(records, reference, key)
    word = "precision" if key == "precision" else key
    lines = [
        f"Paired, {reference} against each method ({len(ref)} problems): wins / ties / "
        "losses, Wilcoxon p; mean seconds per fit.",
        "",
        f"| method | mean {word} | wins/ties/losses | Wilcoxon p | s per fit |",
        "|---|---|---|---|---|",
    ]
    for m in methods:
        other = _paired(records, m, key)
        common = [c for c in ref if c in other]
        d = np.array([ref[c] - other[c] for c in common])
        wtl = (
            "-"
            if m == reference
            else (
                f"{int((d > 1e-12).sum())}/{int((abs(d) <= 1e-12).sum())}/{int((d < -1e-12).sum())}"
            )
        )
        p = "-" if m == reference else f"{wilcoxon_p(np.where(abs(d) <= 1e-12, 0, d)):.3g}"
        sec = np.mean([r["seconds"] for r in records if r["method"] == m])
        lines.append(f"| {m} | {_mean(records, key, method=m):.3f} | {wtl} | {p} | {sec:.2f} |")
    return lines


def suite_report(records: list[dict], methods: list[str], reference: str) -> list[str]:
    """Markdown of one suite: means per group and k, paired comparison, seconds per fit."""
    return [
        f"## {records[0]['suite']}",
        "",
        *mean_table(records, methods, reference),
        "",
        *paired_table(records, methods, reference),
        "",
    ]


def _wtl(records: list[dict], reference: str, method: str, key: str) -> str:
    """``reference``'s wins / ties / losses against ``method``, paired per problem and k."""
    ref, other = _paired(records, reference, key), _paired(records, method, key)
    d = np.array([ref[c] - other[c] for c in ref if c in other])
    return f"{int((d > 1e-12).sum())}/{int((abs(d) <= 1e-12).sum())}/{int((d < -1e-12).sum())}"


def summary_table(
    records: list[dict], methods: list[str], reference: str, key: str = "precision"
) -> list[str]:
    """Markdown: the mean ``key`` of every method in every suite of ``records``, with the
    wins / ties / losses of ``reference`` against it (of ``reference + "+surveyed"`` against a
    ``+surveyed`` method; of ``reference`` against ``reference + "+surveyed"``)."""
    suites = list(dict.fromkeys(r["suite"] for r in records))
    lines = ["| method | " + " | ".join(suites) + " |", "|---|" + "---|" * len(suites)]
    for m in methods:
        cells = []
        for suite in suites:
            mine = [r for r in records if r["suite"] == suite]
            mean = _mean(mine, key, method=m)
            ref = reference + "+surveyed" if m.endswith("+surveyed") else reference
            ref = reference if m == ref else ref
            tally = "" if m == ref else f" ({_wtl(mine, ref, m, key)})"
            cells.append("-" if np.isnan(mean) else f"{mean:.3f}{tally}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines


def ebird_report(records: list[dict], methods: list[str], reference: str) -> list[str]:
    """Markdown of one ``ebird`` suite: the stratified precision at the top share, then the
    stratified AUC, each paired against ``reference`` and, when it ran, against
    ``reference + "+surveyed"`` (the same model learning from the surveyed private cells)."""
    refs = [m for m in (reference, reference + "+surveyed") if m in methods]
    lines = [f"## {records[0]['suite']}", ""]
    for key, what in (
        ("precision", "effort-stratified precision in the top 5 %"),
        ("auc", "effort-stratified AUC"),
    ):
        lines += [
            f"**{what}** (mean per species)",
            "",
            *mean_table(records, methods, reference, key),
            "",
        ]
        for ref in refs:
            lines += [*paired_table(records, methods, ref, key), ""]
    return lines


def effort_report(records: list[dict], methods: list[str], key: str = "precision") -> list[str]:
    """Markdown: each method with and without the effort covariates, paired per problem.

    Pairs a suite ``S`` with ``S + effort`` (the same problems and ``k``) on ``key``; empty
    when no suite ran both ways.
    """
    suffix = effort_suffix(True)
    suites = list(dict.fromkeys(r["suite"] for r in records))
    pairs = [(s, s + suffix) for s in suites if s + suffix in suites]
    word = "precision" if key == "precision" else key
    lines: list[str] = []
    for off, on in pairs:
        title = "" if key == "precision" else f" ({key})"
        lines += [
            f"## Effort covariates: {on} against {off}{title}",
            "",
            f"Per method: mean {word} without and with the covariates, and the paired "
            "wins / ties / losses and Wilcoxon p of *with* against *without* (same "
            "problems and k).",
            "",
            "| method | without | with | with - without | wins/ties/losses | Wilcoxon p |",
            "|---|---|---|---|---|---|",
        ]
        for m in methods:
            a = _paired([r for r in records if r["suite"] == off], m, key)
            b = _paired([r for r in records if r["suite"] == on], m, key)
            common = [c for c in a if c in b]
            if not common:
                continue
            d = np.array([b[c] - a[c] for c in common])
            d = np.where(abs(d) <= 1e-12, 0.0, d)
            wtl = f"{int((d > 0).sum())}/{int((d == 0).sum())}/{int((d < 0).sum())}"
            ma, mb = np.mean([a[c] for c in common]), np.mean([b[c] for c in common])
            lines.append(
                f"| {m} | {ma:.3f} | {mb:.3f} | {mb - ma:+.3f} | {wtl} | {wilcoxon_p(d):.3g} |"
            )
        lines.append("")
    return lines


def report(
    records: list[dict], methods: list[str], reference: str, command: str, notes: list[str]
) -> str:
    """The whole markdown report: one section per suite (the methods that ran in it)."""
    lines = [
        "# Peers: precision at k of TTK and a planner's alternatives",
        "",
        f"`{command}` (Python {platform.python_version()}, {os.cpu_count()} CPUs). "
        "Methods and suites: see `benchmarks/bench_peers.py`. Bold: the best mean.",
        "",
    ]
    lines += [f"- {n}" for n in notes] + ([""] if notes else [])
    for suite in dict.fromkeys(r["suite"] for r in records):
        mine = [r for r in records if r["suite"] == suite]
        ran = [m for m in methods if any(r["method"] == m for r in mine)]
        ebird = "auc" in mine[0]
        lines += (ebird_report if ebird else suite_report)(mine, ran, reference)
    lines += effort_report([r for r in records if "auc" not in r], methods)
    ebird = [r for r in records if "auc" in r]
    if ebird:
        lines[lines.index("## " + ebird[0]["suite"]) : 0] = [
            "## ebird: summary",
            "",
            f"Mean per method and suite, in brackets {reference}'s wins / ties / losses against "
            f"it ({reference}+surveyed's against a +surveyed method).",
            "",
            "**effort-stratified precision in the top 5 %**",
            "",
            *summary_table(ebird, methods, reference),
            "",
            "**effort-stratified AUC**",
            "",
            *summary_table(ebird, methods, reference, "auc"),
            "",
        ]
    lines += effort_report(ebird, methods) + effort_report(ebird, methods, "auc")
    return "\n".join(lines)


def effort_variants(choice: str) -> tuple[bool, ...]:
    """``--effort`` as the variants run: ``on``, ``off`` or ``both`` (off first)."""
    return {"on": (True,), "off": (False,), "both": (False, True)}[choice]


def _problems(args: argparse.Namespace, work: Path, notes: list[str]) -> Iterator[Problem]:
    suites = args.suites.split(",")
    efforts = effort_variants(args.effort)
    if "region" in suites:
        seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else list(range(5))
        for seed in seeds[:2] if args.quick else seeds:  # a partial run compares like with like
            for effort in efforts:
                yield from region_problems([seed], work, (10, 30, 100), effort)
    if "bcr27" in suites:
        from reserve.paper.surrogates import default_bcr27_dir

        folder = default_bcr27_dir()
        if folder is None or not folder.is_dir():
            notes.append(
                "bcr27 skipped: the eBird folder ../shared/real/ebird-bcr27 is absent "
                "(set RESERVE_BCR27_DIR)"
            )
        else:
            for effort in efforts:
                yield from bcr27_problems(3 if args.quick else args.folds, effort=effort)
    if "uci" in suites:
        yield from uci_problems(3 if args.quick else args.splits, args.first_split)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str] | None = None, methods: dict[str, FitAndRank] | None = None) -> int:
    """Command-line entry point; ``methods`` (default :data:`METHODS`) for scripts that add some."""
    methods = dict(METHODS if methods is None else methods)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default="region,bcr27,uci")
    parser.add_argument("--methods", default=None, help="default: every method of the suite")
    parser.add_argument("--reference", default=DEFAULT_METHOD)
    parser.add_argument("--quick", action="store_true", help="2 seeds, 3 folds, 3 splits")
    parser.add_argument("--seeds", default=None, help="region simulation seeds (0,1,2,3,4)")
    parser.add_argument("--folds", type=int, default=10, help="BCR 27 candidate folds")
    parser.add_argument("--splits", type=int, default=10, help="UCI random splits per set")
    parser.add_argument(
        "--first-split",
        type=int,
        default=0,
        help="UCI: start at this split (several runs can share the splits)",
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="folder for the redrawn regions (kept; default a temporary one)",
    )
    parser.add_argument(
        "--effort",
        choices=("on", "off", "both"),
        default="on" if SELECT_DEFAULTS.effort else "off",
        help="survey effort covariates on the region and BCR 27 rows (default: as reserve "
        "select's default); both: every suite twice",
    )
    parser.add_argument(
        "--surveyed-folds", type=int, default=5, help="ebird: folds of the surveyed cells"
    )
    parser.add_argument(
        "--public-fits-only",
        action="store_true",
        help="ebird: leave out the learn-from-surveyed fits (the public fit is still checked "
        "on every fold)",
    )
    parser.add_argument("--states", default=None, help="ebird: states (US-FL,...; default all)")
    parser.add_argument("--sizes", default="3000,10000", help="ebird: cell sides in metres")
    parser.add_argument("--regions", default="region,bcr27", help="multi: the regions of the suite")
    parser.add_argument("--out", type=Path, default=None, help="report (default by suite)")
    parser.add_argument("--csv", type=Path, default=None, help="also write every record here")
    parser.add_argument(
        "--from-csv",
        type=Path,
        default=None,
        help="rebuild the report from the records of an earlier --csv (a partial run too)",
    )
    args = parser.parse_args(argv)
    suites = args.suites.split(",")
    command = "python -m benchmarks.bench_peers " + " ".join(sys.argv[1:] if argv is None else argv)
    if "multi" in suites:
        if suites != ["multi"]:
            parser.error("run --suites multi on its own (its methods and records differ)")
        from benchmarks.peers_multi import OUT as MULTI_OUT
        from benchmarks.peers_multi import cli

        args.out = args.out or MULTI_OUT
        return cli(args, command.strip())
    args.out = args.out or OUT
    args.methods = args.methods or ",".join(default_methods(methods))
    chosen = args.methods.split(",")
    unknown = [m for m in [*chosen, args.reference] if m not in methods]
    if unknown or set(suites) - {"region", "bcr27", "uci", "ebird"}:
        parser.error(f"unknown method or suite: {unknown or suites}; methods: {', '.join(methods)}")
    if "ebird" in suites:
        _check_ebird_args(parser, args, chosen)
    notes: list[str] = []
    if "maxent" in chosen:
        try:
            import elapid  # noqa: F401
        except ImportError:
            chosen.remove("maxent")
            notes.append("maxent skipped: elapid is not installed (pip install elapid)")
    if args.reference not in chosen:
        chosen.insert(0, args.reference)
    run = {m: methods[m] for m in chosen}
    if args.from_csv is not None:
        records = read_records(args.from_csv)
        chosen = [*chosen, *(m + "+surveyed" for m in chosen)]
        chosen = [m for m in chosen if any(r["method"] == m for r in records)]
    else:
        records = _run_all(args, run, notes)
        chosen = [
            *chosen,
            *(
                m + "+surveyed"
                for m in chosen
                if any(r["method"] == m + "+surveyed" for r in records)
            ),
        ]
    text = report(records, chosen, args.reference, command.strip(), notes)
    print(text)
    write_atomic(args.out, text)
    return 0


def _run_all(args: argparse.Namespace, run: dict[str, FitAndRank], notes: list[str]) -> list[dict]:
    """Every problem of the suites asked for; records appended to ``--csv`` as they come."""
    records: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp, threadpool_limits(1):
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for problem in _problems(args, work, notes):
            new = run_problem(problem, run)
            if args.csv is not None:
                append_records(args.csv, new, fresh=not records)
            records += new
        for new in _ebird_batches(args, list(run), work, notes):
            if args.csv is not None:
                append_records(args.csv, new, fresh=not records)
            records += new
    return records


def _check_ebird_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace, chosen: list[str]
) -> None:
    """Refuse what the ``ebird`` suite cannot run: methods without a scorer, a shared CSV."""
    missing = [m for m in chosen if m not in SCORERS]
    if missing:
        parser.error(f"the ebird suite needs a scorer of {missing}; scorers: {', '.join(SCORERS)}")
    if args.csv is not None and args.suites != "ebird":
        parser.error("with --csv run --suites ebird on its own (its records have more columns)")


def _ebird_batches(
    args: argparse.Namespace, chosen: list[str], work: Path, notes: list[str]
) -> Iterator[list[dict]]:
    """The ``ebird`` suite's records, one list per state, species, cell size and effort."""
    if "ebird" not in args.suites.split(","):
        return
    from benchmarks.peers_ebird import STATES, bundle_dir, ebird_records

    source = bundle_dir()
    if not (source / "checklists").is_dir():
        notes.append(f"ebird skipped: the eBird folder {source} is absent (set RESERVE_BCR27_DIR)")
        return
    states = tuple(args.states.split(",")) if args.states else STATES
    sizes = tuple(int(v) for v in args.sizes.split(","))
    scorers = {m: SCORERS[m] for m in chosen}
    for batch in ebird_records(
        scorers,
        work / "ebird",
        effort_variants(args.effort),
        notes,
        source=source,
        states=states,
        sizes=sizes,
        n_folds=args.surveyed_folds,
        learn=not args.public_fits_only,
    ):
        first = batch[0] if batch else {}
        line = "  ".join(
            f"{m} {_mean(batch, 'precision', method=m):.2f}"
            for m in dict.fromkeys(r["method"] for r in batch)
        )
        print(
            f"{first.get('suite', '')} | {first.get('group', '')} | "
            f"{first.get('problem', '')}: {line}",
            flush=True,
        )
        yield batch


_NUMERIC = {
    "k": int,
    "precision": float,
    "seconds": float,
    "n_labelled": int,
    "n_positive": int,
    "n_candidates": int,
    "auc": float,
    "n_surveyed": int,
    "n_detected": int,
}


def append_records(path: Path, records: list[dict], *, fresh: bool) -> None:
    """Append ``records`` to the CSV at ``path`` (a new file with a header when ``fresh``)."""
    if not records:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w" if fresh else "a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(records[0]))
        if fresh:
            writer.writeheader()
        writer.writerows(records)


def read_records(path: Path, numeric: dict[str, Callable[[str], Any]] | None = None) -> list[dict]:
    """The records of a ``--csv`` file, numbers parsed back (the columns of ``numeric``,
    by default this suite's)."""
    parse = _NUMERIC if numeric is None else numeric
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [{k: parse.get(k, str)(v) for k, v in row.items()} for row in rows]


if __name__ == "__main__":
    raise SystemExit(main())
