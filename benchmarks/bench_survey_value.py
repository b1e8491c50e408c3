"""Does the surveys' value rank plans as the truth does? The criterion checked across plans.

For every case of the survey benchmark (:mod:`benchmarks.bench_surveys`: simulation seed,
virtual species, budget ``k``) and every number of surveys ``M``, each of the five plans
(suggested, random, top, uncertain, coverage) is valued as ``reserve select`` values a
plan: the joint expected gain of its outcomes (:func:`reserve.surveys.expected_joint_gain`)
and, added to it, its value through the refit (:func:`reserve.surveys.refit_spillover`,
each survey counted as labelled habitat for the next, in the plan's order). The realised
gain of each plan is read from the benchmark's records (``--records``, occupied chosen cells
after the refit and settlement minus before). The figure is the Spearman correlation between
a value and the realised gain across the five plans of a case, averaged over the cases: how
well the value orders plans by what they truly buy.

Run: ``python -m benchmarks.bench_survey_value [--seeds 0-9] [--records CSV] [--csv F]``
(prints the figures; no assertions).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from benchmarks.bench_coverage import WORK, cached_region, parse_seeds
from benchmarks.bench_surveys import load_case, plans
from reserve.surveys import (
    VALUE_DRAWS,
    Habitat,
    expected_joint_gain,
    refit_spillover,
    survey_detection,
)

RECORDS = Path(__file__).resolve().parent / "results" / "surveys_refit_runs.csv"


def plan_values(seed: int, species: str, k: int, ms: list[int], work: Path) -> list[dict]:
    """Each plan's value (own outcomes, and through the refit) for one case."""
    cells, folder = cached_region(seed, work)
    case = load_case(seed, species, k, cells, folder)
    free = case.res.ranking[~case.res.ranking["locked_in"].astype(bool)].reset_index(drop=True)
    p = np.nan_to_num(free["probability"].to_numpy(dtype=np.float64))
    chosen = int(free["selected"].astype(bool).sum())
    d = survey_detection(case.res.summary["detection_per_checklist"])
    habitat = Habitat.from_problem(case.problem, free["cell_id"].to_numpy())
    at = pd.Index(free["cell_id"])
    uniforms = np.random.default_rng(0).random((VALUE_DRAWS, p.size))
    out = []
    for m in ms:
        for plan, (ids, _) in plans(case.res, m, seed, species, problem=case.problem).items():
            surveyed = at.get_indexer(np.asarray(ids))
            mass, refit = habitat.mass.copy(), 0.0
            for c in surveyed:
                refit += float(refit_spillover(p, d, chosen, habitat, np.array([c]), mass)[0])
                mass += habitat.weights(np.arange(p.size), np.array([c]))[:, 0]
            own = expected_joint_gain(p, d, chosen, surveyed, uniforms)
            out.append({"seed": seed, "species": species, "k": k, "m": m, "plan": plan, "own": own})
            out[-1]["own+refit"] = own + refit
    return out


def correlations(values: pd.DataFrame, records: pd.DataFrame) -> pd.DataFrame:
    """Mean within-case Spearman correlation of each value with the realised gain, by M."""
    keys = ["seed", "species", "k", "m", "plan"]
    both = values.merge(records[[*keys, "gain"]], on=keys)
    rows = []
    for m, at_m in both.groupby("m"):
        row: dict = {"M": m}
        for col in ("own", "own+refit"):
            rs = [
                spearmanr(g[col], g["gain"])[0]
                for _, g in at_m.groupby(["seed", "species", "k"])
                if g[col].nunique() > 1 and g["gain"].nunique() > 1
            ]
            row[col] = float(np.mean(rs))
            row[f"{col} > 0"] = float(np.mean(np.array(rs) > 0))
        row["cases"] = len(rs)
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    """Value every plan of the records' cases and print the correlations."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-9"))
    parser.add_argument("--records", type=Path, default=RECORDS)
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--csv", type=Path, default=None, help="write the plans' values")
    parser.add_argument("--from-csv", type=Path, default=None, help="values of an earlier run")
    args = parser.parse_args(argv)
    records = pd.read_csv(args.records)
    if args.from_csv is not None:
        values = pd.read_csv(args.from_csv)
    else:
        ms = sorted(records["m"].unique().tolist())
        rows = [
            r
            for seed in args.seeds
            for species in ("Virtual Thrush", "Virtual Quail")
            for k in sorted(records["k"].unique().tolist())
            for r in plan_values(seed, species, int(k), ms, args.work)
        ]
        values = pd.DataFrame(rows)
        if args.csv is not None:
            values.to_csv(args.csv, index=False)
    table = correlations(values, records)
    print("| M | own outcomes | share > 0 | own + refit | share > 0 | cases |")
    print("|---|---|---|---|---|---|")
    for _, r in table.iterrows():
        print(
            f"| {r['M']:.0f} | {r['own']:.3f} | {r['own > 0']:.2f} | {r['own+refit']:.3f} | "
            f"{r['own+refit > 0']:.2f} | {r['cases']:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
