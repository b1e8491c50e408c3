"""Which cells to survey before buying: the suggested surveys against four other plans.

For every simulation seed the species and the birders are redrawn on the shipped landscape
(:func:`benchmarks.bench_coverage.cached_region`, one ingest per seed, cached in ``--work``).
For both virtual species and every budget ``k``, :func:`reserve.select.select_reserve` runs
with its defaults (``seed=0``, ``n_jobs=1``, no outputs): the run before any survey. Then,
for every number of surveys ``M``, five plans of ``M`` cells are surveyed:

* ``suggested``: :func:`reserve.surveys.suggest_surveys` with the run's problem, as
  ``reserve select --suggest-surveys`` calls it (its value includes the refit's
  approximation); its expected gain is recorded beside the realised one;
* ``random``: a uniform draw;
* ``top``: the highest scores (verify the top of the ranking);
* ``uncertain``: the calibrated probability closest to 0.5 (uncertainty sampling);
* ``coverage``: farthest-point sampling of the unsurveyed candidates in the standardised
  feature space, from the training and surveyed cells (the habitat nobody looked at).

Every plan draws from the same cells: candidates not locked in and without a detection on
record (whose presence is already known). A survey is the simulation's own: in a truly
occupied cell each of :data:`reserve.surveys.SURVEY_CHECKLISTS` checklists of a standard
visit (the simulated birders' median duration and distance, one observer, a complete
checklist; ``data/default_region/simulation.json``) detects the species with the probability
the simulation's detection model gives it; an empty cell is never detected. The draws are
common to the plans (one per cell and checklist, seeded by the run), so two plans that
survey a cell see the same outcome. The reselection is :func:`reserve.select.reselect`: the
run's model refitted on the surveyed labels without a new search, the chosen cells settled
on the outcomes. Each run is scored by its precision at ``k`` against the truth.

Run: ``python -m benchmarks.bench_surveys [--seeds 0-9] [--budgets 30,100]
[--surveys 10,20,50] [--plans suggested,top] [--draws 0,1,2,3] [--csv FILE]`` (writes
``benchmarks/results/surveys.md``; figures, no assertions). ``--draws`` surveys every plan
again on independent outcome draws (:func:`outcome_draws`); the report's tables read draw 0
and a last table pairs the plans on each case's gain averaged over its draws.
``--from-csv FILE`` writes the report from the records of an earlier run.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import pickle
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import wilcoxon

from benchmarks.bench_coverage import WORK, cached_region, parse_seeds, truth_path
from reserve.config import DEFAULT_REGION, SelectOptions
from reserve.default_region import FILES, default_data_dir
from reserve.defaults import SPECIES_LABEL_PREFIX, species_slug
from reserve.design import build_problem, read_planning_units
from reserve.evaluate import read_truth
from reserve.io.atomic import replacing
from reserve.select import reselect, select_reserve
from reserve.surveys import (
    SURVEY_CHECKLISTS,
    SurveyResults,
    calibration_draws,
    settle_selection,
    single_values,
    suggest_surveys,
    survey_detection,
)

OUT = Path(__file__).resolve().parent / "results" / "surveys.md"
PLANS = ("suggested", "random", "top", "uncertain", "coverage")
FIELDS = ("seed", "species", "k", "m", "plan", "precision", "base", "gain", "n_detected", "seconds")


def checklist_detection(meta: dict) -> float:
    """The simulation's detection per checklist of a standard visit in an occupied cell.

    The birder model's logit: intercept + hours * log(duration / 60) + km * log1p(distance)
    + observers * log(1), at the median duration and distance of the simulated checklists.
    """
    m = meta["birder_model"]
    logit = (
        m["detection_intercept"]
        + m["detection_hours"] * np.log(m["duration_median_min"] / 60.0)
        + m["detection_km"] * np.log1p(m["distance_median_km"])
    )
    return float(1.0 / (1.0 + np.exp(-logit)))


def _eligible(ranking: pd.DataFrame) -> pd.DataFrame:
    """The ranked cells any plan may survey: not locked in, presence not yet known."""
    free = ranking[~ranking["locked_in"].astype(bool)]
    return free[free["probability"].to_numpy() < 1.0].reset_index(drop=True)


def _coverage_plan(res: Any, pool: pd.DataFrame, m: int) -> np.ndarray:
    """Farthest-point sampling of the unsurveyed pool cells in standardised features."""
    pu = res.planning_units
    feats = [f for f in res.feature_names if f in pu.columns and not f.startswith("effort")]
    X = pu[feats].to_numpy(dtype=np.float64)
    fitted = pu["role"].isin(["train", "candidate"]).to_numpy()
    mu, sd = np.nanmean(X[fitted], axis=0), np.nanstd(X[fitted], axis=0)
    Z = np.nan_to_num((X - mu) / np.where(sd > 0, sd, 1.0))
    at = pd.Index(pu["cell_id"])
    n = pd.to_numeric(pu.get("n_checklists", 0), errors="coerce").fillna(0).to_numpy()
    known = (pu["role"] == "train").to_numpy() | (n > 0)
    ids = pool["cell_id"].to_numpy()
    unsurveyed = n[at.get_indexer(ids)] == 0
    ids = ids[unsurveyed] if unsurveyed.sum() >= m else ids
    cand = Z[at.get_indexer(ids)]
    ref = Z[known]
    dist = np.full(len(ids), np.inf)
    sq = (cand**2).sum(axis=1)
    for start in range(0, len(ref), 500):
        block = ref[start : start + 500]
        d2 = sq[:, None] - 2.0 * cand @ block.T + (block**2).sum(axis=1)[None, :]
        dist = np.minimum(dist, d2.min(axis=1))
    chosen = []
    for _ in range(m):
        i = int(np.argmax(dist))
        chosen.append(i)
        dist = np.minimum(dist, ((cand - cand[i]) ** 2).sum(axis=1))
        dist[i] = -np.inf
    return ids[chosen]


def _visits(res: Any, species: str) -> np.ndarray:
    """Each ranked cell's checklists where the species' label is known (the calibration's)."""
    pu = res.planning_units
    label = pd.to_numeric(pu[SPECIES_LABEL_PREFIX + species_slug(species)], errors="coerce")
    n = pd.to_numeric(pu["n_checklists"], errors="coerce").fillna(0).to_numpy()
    visits = np.where(np.isin(label.to_numpy(), (0, 1)), n, 0.0)
    return visits[pd.Index(pu["cell_id"]).get_indexer(res.ranking["cell_id"])]


def plans(
    res: Any,
    m: int,
    seed: int,
    species: str = "",
    draws: bool = False,
    problem: Any = None,
    promised: dict[int, float] | None = None,
) -> dict[str, tuple[np.ndarray, float]]:
    """Each plan's ``m`` cells and the seconds it took to choose them (``draws``: also the
    value averaged over the calibration's draws, a design measured in settled mode;
    ``problem``: the run's, for the refit's approximation in the suggestions; ``promised``
    takes the suggestions' expected gain under ``m``)."""
    promised = {} if promised is None else promised
    pool = _eligible(res.ranking)
    out: dict[str, tuple[np.ndarray, float]] = {}
    t = time.perf_counter()
    layer, expected = suggest_surveys(
        res.ranking,
        res.planning_units,
        res.summary["detection_per_checklist"],
        m,
        seed=0,
        problem=problem,
    )
    out["suggested"] = (layer["cell_id"].to_numpy(), time.perf_counter() - t)
    promised[m] = expected
    if draws:  # the value averaged over the calibration's parameter draws
        free = res.ranking[~res.ranking["locked_in"].astype(bool)].reset_index(drop=True)
        p_all = np.nan_to_num(free["probability"].to_numpy(dtype=np.float64))
        k = int(free["selected"].astype(bool).sum())
        P, D = calibration_draws(
            res.evidence.calibration,
            free["score"].to_numpy(dtype=np.float64),
            _visits(res, species)[~res.ranking["locked_in"].astype(bool).to_numpy()],
            p_all >= 1.0,
        )
        value = np.where(p_all < 1.0, single_values(P, D, k), -np.inf)
        out["draws"] = (free["cell_id"].to_numpy()[np.argsort(-value, kind="stable")[:m]], 0.0)
    rng = np.random.default_rng([seed, m])
    out["random"] = (rng.choice(pool["cell_id"].to_numpy(), m, replace=False), 0.0)
    out["top"] = (pool["cell_id"].to_numpy()[:m], 0.0)
    p = pool["probability"].to_numpy()
    out["uncertain"] = (
        pool["cell_id"].to_numpy()[np.argsort(np.abs(p - 0.5), kind="stable")[:m]],
        0.0,
    )
    t = time.perf_counter()
    out["coverage"] = (_coverage_plan(res, pool, m), time.perf_counter() - t)
    return out


def survey(
    ids: np.ndarray, occupied: pd.Series, draws: pd.DataFrame, p_check: float
) -> SurveyResults:
    """The simulated surveys of ``ids``: detected where occupied and a checklist detects."""
    hit = (draws.loc[ids].to_numpy() < p_check).any(axis=1)
    detected = occupied.loc[ids].to_numpy().astype(bool) & hit
    return SurveyResults(
        cell_id=ids, detected=detected, checklists=np.full(ids.size, float(SURVEY_CHECKLISTS))
    )


def settled_without_refit(res: Any, surveys: SurveyResults) -> np.ndarray:
    """The run's ranking settled on the surveys without a refit: the chosen cell ids.

    Each surveyed cell's probability is updated by Bayes' rule with the run's calibration
    (1 after a detection), and :func:`reserve.surveys.settle_selection` decides the set:
    the world the suggestions' value is computed in, scored against the truth.
    """
    free = res.ranking[~res.ranking["locked_in"].astype(bool)].reset_index(drop=True)
    p = np.nan_to_num(free["probability"].to_numpy(dtype=np.float64))
    d = survey_detection(res.summary["detection_per_checklist"])
    at = pd.Index(free["cell_id"]).get_indexer(surveys.cell_id)
    surveyed = np.zeros(p.size, dtype=bool)
    surveyed[at] = True
    detected = np.zeros(p.size, dtype=bool)
    detected[at[surveys.detected]] = True
    after = p.copy()
    after[at] = np.where(surveys.detected, 1.0, p[at] * (1 - d) / (1 - p[at] * d))
    k = int(free["selected"].astype(bool).sum())
    return free["cell_id"].to_numpy()[settle_selection(after, surveyed, detected, k).chosen]


def precision(ids: np.ndarray, occupied: pd.Series) -> float:
    """Share of truly occupied cells among ``ids``."""
    return float(occupied.loc[ids].to_numpy().astype(bool).mean())


@dataclass(frozen=True)
class Case:
    """One seed, species and budget: the truth, the run before surveys and its problem, and
    the survey draws every plan shares (one uniform per cell and checklist)."""

    truth: pd.Series
    p_check: float
    res: Any
    base_seconds: float
    units: Any
    opts: SelectOptions
    problem: Any
    draws: pd.DataFrame


def outcome_draws(seed: int, species: str, k: int, ids: np.ndarray, draw: int = 0) -> pd.DataFrame:
    """One uniform per cell and checklist, shared by the plans of a case: its survey outcomes.

    Draw 0 is seeded by the seed, ``k`` and the species; draw ``r > 0`` by those and ``r``
    (independent outcomes of the same surveys, to average a case's gain over).
    """
    key = [seed, k, DEFAULT_REGION.species_all.index(species)]
    rng = np.random.default_rng(key if draw == 0 else [*key, draw])
    return pd.DataFrame(rng.random((ids.size, SURVEY_CHECKLISTS)), index=ids)


def load_case(seed: int, species: str, k: int, cells: Path, folder: Path) -> Case:
    """The :class:`Case` of a simulated region (the run before surveys cached beside it),
    with the outcomes of draw 0."""
    meta_path = folder / FILES["meta"]
    meta = json.loads(
        (meta_path if meta_path.exists() else default_data_dir() / FILES["meta"]).read_text()
    )
    res, base_s = base_run(k, cells, species, folder)
    units = read_planning_units(cells)
    opts = SelectOptions(budget=k, cells=cells, species=(species,), seed=0, n_jobs=1)
    ids = units["cell_id"].to_numpy()
    return Case(
        truth=read_truth(truth_path(folder, species))["occupied"],
        p_check=checklist_detection(meta),
        res=res,
        base_seconds=base_s,
        units=units,
        opts=opts,
        problem=build_problem(units, opts, str(cells)),
        draws=outcome_draws(seed, species, k, ids),
    )


def run_case(
    seed: int,
    species: str,
    k: int,
    ms: list[int],
    cells: Path,
    folder: Path,
    reselection: str = "refit",
    only: list[str] | None = None,
    draws: list[int] | None = None,
) -> list[dict]:
    """One seed, species and budget: the run before surveys and every plan's reselection,
    for each outcome draw of ``draws`` (default ``[0]``, :func:`outcome_draws`)."""
    case = load_case(seed, species, k, cells, folder)
    res, truth = case.res, case.truth
    base = precision(res.selected["cell_id"].to_numpy(), truth)
    ids = case.units["cell_id"].to_numpy()
    outcomes = {
        r: case.draws if r == 0 else outcome_draws(seed, species, k, ids, r) for r in draws or [0]
    }
    records = []
    for m in ms:
        promised: dict[int, float] = {}
        chosen_plans = plans(res, m, seed, species, reselection == "settle", case.problem, promised)
        for draw, (plan, (cells_m, plan_s)) in itertools.product(outcomes, chosen_plans.items()):
            if only is not None and plan not in only:
                continue
            t = time.perf_counter()
            surveys = survey(np.asarray(cells_m), truth, outcomes[draw], case.p_check)
            if reselection == "settle":
                chosen = settled_without_refit(res, surveys)
            else:
                chosen = (
                    reselect(case.opts, case.units, surveys, res.estimator, str(cells))
                    .selected["cell_id"]
                    .to_numpy()
                )
            got = precision(chosen, truth)
            rec = {
                "seed": seed,
                "species": species,
                "k": k,
                "m": m,
                "plan": plan,
                "draw": draw,
                "precision": got,
                "base": base,
                "gain": got - base,
                "n_detected": int(surveys.detected.sum()),
                "seconds": plan_s + time.perf_counter() - t,
                "expected": promised[m] if plan == "suggested" else np.nan,
                "base_seconds": case.base_seconds,
                "reselection": reselection,
            }
            records.append(rec)
            print(
                f"seed {seed} {species} k {k:>3} M {m:>2} draw {draw} {plan:<9}: precision "
                f"{got:.3f} (before {base:.3f}; {rec['n_detected']} detected, "
                f"{rec['seconds']:.1f} s)",
                flush=True,
            )
    return records


def code_tag(root: Path | None = None) -> str:
    """A digest of the package's source but :mod:`reserve.surveys`: what a pickled run's
    objects mean (a change to them reruns the cached runs; a change to the plans does not).

    ``root`` is the package's folder (default: the installed ``reserve``)."""
    import hashlib

    import reserve

    root = Path(reserve.__file__).parent if root is None else root
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        if path.name != "surveys.py":
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def base_run(k: int, cells: Path, species: str, folder: Path) -> tuple[Any, float]:
    """The run before any survey and its seconds, cached beside the region.

    The run is the cost of a case and does not depend on the survey plans, so designs of
    the plans are compared on the same runs: the result is pickled in ``folder`` under a
    name of the species, ``k``, the cells file's size and time (a new ingest reruns it) and
    :func:`code_tag` (so does a change to the code the run's objects come from).
    """
    st = cells.stat()
    tag = f"{species.replace(' ', '_')}_k{k}_{st.st_size}_{int(st.st_mtime)}_{code_tag()}"
    path = folder / f"surveys_base_{tag}.pkl"
    if path.exists():
        with path.open("rb") as fh:
            return pickle.load(fh)
    t0 = time.perf_counter()
    res = select_reserve(k, cells, species=species, seed=0, n_jobs=1)
    out = (res, time.perf_counter() - t0)
    with replacing(path, ".pkl") as tmp, tmp.open("wb") as fh:
        pickle.dump(out, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return out


def _paired(records: pd.DataFrame, m: int, plan: str) -> dict[str, Any]:
    """Suggested against ``plan`` at ``m``: wins, losses, Wilcoxon p, and the mean paired
    difference in points with its standard error over the cases."""
    at = records[records["m"] == m].pivot_table(
        index=["seed", "species", "k"], columns="plan", values="gain"
    )
    diff = (at["suggested"] - at[plan]).to_numpy()
    nonzero = diff[np.abs(diff) > 1e-12]
    p = float(wilcoxon(nonzero).pvalue) if nonzero.size >= 2 else float("nan")
    return {
        "wins": int((diff > 1e-12).sum()),
        "losses": int((diff < -1e-12).sum()),
        "p": p,
        "mean": 100 * float(diff.mean()),
        "se": 100 * float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else np.nan,
    }


def _differences(records: pd.DataFrame, plan_names: list[str]) -> list[str]:
    """The table of paired differences, suggested minus each plan, with standard errors."""
    lines = [
        "",
        "Paired difference, the suggestions' gain minus each plan's (points; mean and its "
        "standard error over the cases): how far apart the plans are against what one "
        "draw of the survey outcomes per case can resolve.",
        "",
        "| M | " + " | ".join(f"vs {p}" for p in plan_names[1:]) + " |",
        "|---" * len(plan_names) + "|",
    ]
    for m in sorted(records["m"].unique()):
        rs = [_paired(records, m, p) for p in plan_names[1:]]
        lines.append(
            f"| {m} | " + " | ".join(f"{r['mean']:+.2f} ± {r['se']:.2f}" for r in rs) + " |"
        )
    return lines


def first_draw(records: pd.DataFrame) -> pd.DataFrame:
    """The records of outcome draw 0 (every record, in files from before the draws)."""
    if "draw" not in records:
        return records
    return records[records["draw"].fillna(0).astype(int) == 0]


def over_draws(records: pd.DataFrame) -> pd.DataFrame:
    """Each case's gain averaged over its outcome draws, per ``m`` and plan: ``gain``,
    ``draws`` (how many) and ``draw_set``; only plans measured on the same draws as the
    suggestions in every case of that ``m`` are kept."""
    rec = records.assign(draw=records.get("draw", 0)).fillna({"draw": 0})
    keys = ["m", "plan", "seed", "species", "k"]
    per = rec.groupby(keys).agg(
        gain=("gain", "mean"),
        draws=("draw", "size"),
        draw_set=("draw", lambda d: ",".join(map(str, sorted(d.astype(int))))),
    )
    per = per.reset_index()
    kept = []
    for _, at in per.groupby("m"):
        mine = at[at["plan"] == "suggested"].set_index(["seed", "species", "k"])["draw_set"]
        for _, rows in at.groupby("plan"):
            sets = rows.set_index(["seed", "species", "k"])["draw_set"]
            if sets.index.equals(mine.index) and (sets == mine).all():
                kept.append(rows)
    return pd.concat(kept, ignore_index=True) if kept else per.iloc[:0]


def _draws_section(records: pd.DataFrame) -> list[str]:
    """The suggestions against each plan on every case's gain averaged over its outcome
    draws (when some case has more than draw 0)."""
    if "draw" not in records or records["draw"].fillna(0).max() == 0:
        return []
    per = over_draws(records)
    lines = [
        "",
        "## Averaged over outcome draws",
        "",
        "Each case's gain averaged over independent draws of the same surveys' outcomes "
        "(`--draws`): an estimate of the case's expected gain, with less of one draw's luck. "
        "Wins / losses and the Wilcoxon p pair the cases; the difference is the suggestions' "
        "mean gain minus the plan's, with its standard error over the cases (points).",
        "",
        "| M | draws per case | plan | suggested gain | plan gain | W/L, p | difference |",
        "|---|---|---|---|---|---|---|",
    ]
    for m, at in per.groupby("m"):
        n = int(at.loc[at["plan"] == "suggested", "draws"].min())
        mine = 100 * at.loc[at["plan"] == "suggested", "gain"].mean()
        for plan in [p for p in PLANS[1:] if p in set(at["plan"])]:
            r = _paired(at, m, plan)
            theirs = 100 * at.loc[at["plan"] == plan, "gain"].mean()
            lines.append(
                f"| {m} | {n} | {plan} | {mine:+.2f} | {theirs:+.2f} | "
                f"{r['wins']}/{r['losses']}, {r['p']:.3g} | {r['mean']:+.2f} ± {r['se']:.2f} |"
            )
    return lines


def report(records: pd.DataFrame, command: str) -> str:
    """The markdown report: the tables on outcome draw 0, then the averages over draws."""
    every = records
    records = first_draw(records)
    plan_names = [p for p in (*PLANS, "draws") if p in set(records["plan"])]
    seeds = sorted(records["seed"].unique())
    lines = [
        "# Surveys before buying: suggested against four other plans",
        "",
        f"`{command}` on {datetime.date.today().isoformat()}, {platform.machine()}, Python "
        f"{platform.python_version()}; seeds {', '.join(map(str, seeds))}, species "
        f"{', '.join(sorted(records['species'].unique()))}, k "
        f"{', '.join(map(str, sorted(records['k'].unique())))}. A survey is "
        f"{SURVEY_CHECKLISTS} checklists of the simulation's standard visit. Gain: "
        "precision at k after the surveys minus before, in percentage points; wins / losses "
        "and the Wilcoxon signed-rank p are the suggested plan's against each other plan, "
        "paired by seed, species and k. Reselection: "
        + ", ".join(sorted(set(records.get("reselection", pd.Series(["refit"])).astype(str))))
        + " (refit: the model refitted on the surveys, then settled; settle: the ranking "
        "settled on the outcomes without a refit). `draws` (settle only): the M best cells by "
        "their value averaged over the calibration's parameter draws.",
        "",
        "| M | "
        + " | ".join(f"{p} gain" for p in plan_names)
        + " | "
        + " | ".join(f"vs {p} (W/L, p)" for p in plan_names[1:])
        + " |",
        "|---" * (1 + len(plan_names) + len(plan_names) - 1) + "|",
    ]
    for m in sorted(records["m"].unique()):
        at = records[records["m"] == m]
        gains = [100 * at.loc[at["plan"] == p, "gain"].mean() for p in plan_names]
        best = max(gains)
        cells = [(f"**{g:+.2f}**" if g == best else f"{g:+.2f}") for g in gains]
        vs = []
        for p in plan_names[1:]:
            r = _paired(records, m, p)
            vs.append(f"{r['wins']}/{r['losses']}, {r['p']:.3g}")
        lines.append(f"| {m} | " + " | ".join(cells) + " | " + " | ".join(vs) + " |")
    if "suggested" in plan_names and len(plan_names) > 1:
        lines += _differences(records, plan_names)
    lines += ["", "By budget:", ""]
    lines.append("| k | M | " + " | ".join(plan_names) + " | before |")
    lines.append("|---" * (3 + len(plan_names)) + "|")
    for (k, m), at in records.groupby(["k", "m"]):
        gains = [f"{100 * at.loc[at['plan'] == p, 'gain'].mean():+.2f}" for p in plan_names]
        before = at["base"].mean()
        lines.append(f"| {k} | {m} | " + " | ".join(gains) + f" | {before:.3f} |")
    lines += _promised(records)
    lines += ["", "Seconds (mean per reselection, plan included; the run before surveys):", ""]
    secs = records.groupby("plan")["seconds"].mean()
    lines.append(
        ", ".join(f"{p} {secs[p]:.1f} s" for p in plan_names)
        + f"; run before surveys {records['base_seconds'].mean():.1f} s."
    )
    lines += _draws_section(every)
    return "\n".join(lines) + "\n"


def _promised(records: pd.DataFrame) -> list[str]:
    """The suggestions' expected gain against the realised one, in occupied chosen cells."""
    if "expected" not in records:
        return []
    at = records[(records["plan"] == "suggested") & records["expected"].notna()]
    if at.empty:
        return []
    lines = [
        "",
        "The suggestions' expected gain (what `survey_expected_gain` promises) against the "
        "realised gain, both in occupied chosen cells (mean over the cases):",
        "",
        "| k | M | expected | realised |",
        "|---|---|---|---|",
    ]
    for (k, m), g in at.groupby(["k", "m"]):
        lines.append(f"| {k} | {m} | {g['expected'].mean():.2f} | {(g['gain'] * k).mean():.2f} |")
    return lines


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ints = lambda s: [int(v) for v in s.split(",")]  # noqa: E731
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-9"))
    parser.add_argument("--budgets", type=ints, default=[30, 100])
    parser.add_argument("--surveys", type=ints, default=[10, 20, 50])
    parser.add_argument(
        "--species", type=lambda s: s.split(","), default=list(DEFAULT_REGION.species_all)
    )
    parser.add_argument(
        "--reselection",
        choices=("refit", "settle"),
        default="refit",
        help="refit: the run's model refitted on the surveys, then settled (what reserve "
        "select --surveys does); settle: the ranking settled on the outcomes without a refit",
    )
    parser.add_argument(
        "--plans",
        type=lambda s: s.split(","),
        default=None,
        help="reselect only these plans (default all; each plan costs one reselection)",
    )
    parser.add_argument(
        "--draws",
        type=ints,
        default=[0],
        help="outcome draws of every plan's surveys (default 0; 1,2,3: three more, averaged "
        "per case in the report's last table)",
    )
    parser.add_argument("--csv", type=Path, default=None, help="write every record as it ends")
    parser.add_argument("--from-csv", type=Path, default=None, help="report from an earlier --csv")
    parser.add_argument("--work", type=Path, default=WORK, help="cache of the simulated regions")
    parser.add_argument("--out", type=Path, default=OUT)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    args = parse_args(argv)
    command = "python -m benchmarks.bench_surveys " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    if args.from_csv is not None:
        records = pd.read_csv(args.from_csv)
    else:
        rows: list[dict] = []
        for seed in args.seeds:
            cells, folder = cached_region(seed, args.work)
            for species in args.species:
                for k in args.budgets:
                    new = run_case(
                        seed,
                        species,
                        k,
                        args.surveys,
                        cells,
                        folder,
                        args.reselection,
                        args.plans,
                        args.draws,
                    )
                    rows += new
                    if args.csv is not None:
                        pd.DataFrame(rows).to_csv(args.csv, index=False)
        records = pd.DataFrame(rows)
    text = report(records, command.strip())
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with replacing(args.out, ".md") as tmp:
        tmp.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
