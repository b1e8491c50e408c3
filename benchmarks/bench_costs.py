"""Money budgets on the default region: occupied cells bought per million USD.

Every cell of the default region is priced by the synthetic surface of
:mod:`pipelines.land_price` (dearer near developed land and on cropland). For each money
budget ``B`` (million USD) four ways of spending it are scored against the simulated truth:

* **TTK, costs**: ``reserve select --cost-column land_price --budget B`` (TTK's knapsack form:
  the candidates scoring positive cost at most ``B``; the selection walks the scores);
* **TTK, ignoring costs**: TTK fitted for ``k`` cells (``k`` = what ``B`` buys at the median
  candidate price), its scores walked within ``B`` by the same rule;
* **SVM, score/cost**: the shifted SVM's scores turned into a positive benefit
  ``1 / (1 + exp(-score))`` and bought greedily by benefit per dollar while they fit;
* **random**: the expectation of buying candidates uniformly at random: precision is the
  candidates' share of occupied cells, occupied per M USD their occupied count over their
  total price.

Figures: cells bought, money spent, precision (share of bought cells truly occupied) and
occupied cells per million USD spent, per budget and simulation seed (seed 0 is the shipped
region; other seeds redraw species and birders as ``bench_default_region`` does), C = 1.

Run: ``python -m benchmarks.bench_costs [--seeds 0,1,2] [--budgets 50,150,500]`` (writes
``benchmarks/results/costs.md``; figures, no assertions).
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import numpy as np
import pyogrio

from benchmarks.bench_default_region import region_cli, region_for_seed
from pipelines.land_price import PRICE_COLUMN, land_price
from reserve.default_region import FILES
from reserve.evaluate import read_truth
from reserve.select import select_reserve
from reserve.solvers import budget_select

OUT = Path(__file__).resolve().parent / "results" / "costs.md"
METHODS = ("ttk_costs", "ttk_ignoring", "svm_ratio")
LABELS = {
    "ttk_costs": "TTK, costs",
    "ttk_ignoring": "TTK, ignoring costs",
    "svm_ratio": "SVM, score/cost",
}


def _walk_ratio(benefit: np.ndarray, price: np.ndarray, budget: float) -> np.ndarray:
    """Greedy by benefit per dollar (ties to the lower position), skipping what does not fit."""
    order = np.lexsort((np.arange(benefit.size), -benefit / price))
    take, left = [], budget
    for j in order:
        if price[j] <= left * (1 + 1e-12):
            take.append(j)
            left -= price[j]
    return np.asarray(take, dtype=np.int64)


def run_region(seed: int, cells: Path, truth_path: Path, budgets: list[float], work: Path):
    """Price the region's cells, spend every budget four ways; one record per (budget, method)."""
    units = pyogrio.read_dataframe(cells, layer="planning_units")
    price_all = land_price(units, seed=0)
    priced = work / f"priced{seed}.gpkg"
    pyogrio.write_dataframe(
        units.assign(**{PRICE_COLUMN: price_all}), priced, layer="planning_units", driver="GPKG"
    )
    truth = read_truth(truth_path)
    cand = ((units["role"] == "candidate") & ~units["locked_out"]).to_numpy()
    ids = units["cell_id"].to_numpy()
    occ_all = truth.loc[ids, "occupied"].to_numpy(dtype=bool)
    c_price, c_occ = price_all[cand], occ_all[cand]
    median = float(np.median(c_price))
    records = []
    for B in budgets:
        k = int(max(1, B // median))
        picks: dict[str, np.ndarray] = {}
        seconds: dict[str, float] = {}
        t0 = time.perf_counter()
        res = select_reserve(B, priced, cost_column=PRICE_COLUMN, C=1.0, seed=0, model="linear")
        seconds["ttk_costs"] = time.perf_counter() - t0
        picks["ttk_costs"] = res.selected["cell_id"].to_numpy()
        for name, method in (("ttk_ignoring", "ttk"), ("svm_ratio", "svm")):
            t0 = time.perf_counter()
            r = select_reserve(k, cells, method=method, C=1.0, seed=0, model="linear")
            score = r.planning_units["score"].to_numpy()[cand]
            if name == "ttk_ignoring":
                pos = budget_select(score, c_price, B)
            else:
                pos = _walk_ratio(1.0 / (1.0 + np.exp(-score)), c_price, B)
            seconds[name] = time.perf_counter() - t0
            picks[name] = ids[cand][pos]
        rec = {"seed": seed, "budget": B, "k_median": k}
        for name, chosen in picks.items():
            rows = np.isin(ids, chosen)
            spent = float(price_all[rows].sum())
            n_occ = int(occ_all[rows].sum())
            rec[name] = {
                "n": int(rows.sum()),
                "spent": spent,
                "precision": n_occ / max(int(rows.sum()), 1),
                "per_musd": n_occ / spent,
                "seconds": seconds[name],
            }
        rec["random"] = {
            "n": float("nan"),
            "spent": float("nan"),
            "precision": float(c_occ.mean()),
            "per_musd": float(c_occ.sum() / c_price.sum()),
            "seconds": 0.0,
        }
        records.append(rec)
        print(
            f"seed {seed} B {B:g}: "
            + "  ".join(
                f"{LABELS.get(m, m)} {rec[m]['precision']:.3f} ({rec[m]['per_musd']:.4f}/M)"
                for m in (*METHODS, "random")
            ),
            flush=True,
        )
    return records


def report(records: list[dict], seeds: list[int], budgets: list[float]) -> str:
    """Markdown: means over seeds per budget and method, then every run."""
    lines = [
        "# Money budgets on the default region (synthetic land prices)",
        "",
        f"`python -m benchmarks.bench_costs --seeds {','.join(map(str, seeds))} --budgets "
        f"{','.join(f'{b:g}' for b in budgets)}` ({platform.python_version()}, "
        f"{os.cpu_count()} CPUs). Prices: `pipelines.land_price` (seed 0), million USD per "
        "3 km cell. C = 1, standardised features. Occupied/M = truly occupied cells bought "
        "per million USD spent.",
        "",
        "| budget (M USD) | method | cells | spent | precision | occupied/M |",
        "|---|---|---|---|---|---|",
    ]
    for B in budgets:
        rows = [r for r in records if r["budget"] == B]
        for m in (*METHODS, "random"):
            vals = {f: np.array([r[m][f] for r in rows], dtype=float) for f in rows[0][m]}
            lines.append(
                f"| {B:g} | {LABELS.get(m, m + ' (expected)')} | {np.nanmean(vals['n']):.1f} | "
                f"{np.nanmean(vals['spent']):.1f} | {vals['precision'].mean():.3f} | "
                f"{vals['per_musd'].mean():.4f} |"
                if np.isfinite(vals["n"]).any()
                else f"| {B:g} | {m} (expected) | | | {vals['precision'].mean():.3f} | "
                f"{vals['per_musd'].mean():.4f} |"
            )
    lines += ["", "Per seed (precision / occupied per M USD):", ""]
    lines.append("| seed | budget | " + " | ".join(LABELS[m] for m in METHODS) + " | random |")
    lines.append("|---" * (3 + len(METHODS)) + "|")
    for r in records:
        cells = " | ".join(
            f"{r[m]['precision']:.3f} / {r[m]['per_musd']:.4f}" for m in (*METHODS, "random")
        )
        lines.append(f"| {r['seed']} | {r['budget']:g} | {cells} |")
    return "\n".join(lines) + "\n"


def run_seed(seed: int, budgets: list[float], work: Path) -> list[dict]:
    """Every budget on simulation ``seed`` (0: the shipped region)."""
    cells, folder = region_for_seed(seed, work)
    return run_region(seed, cells, folder / FILES["truth"], budgets, work)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    return region_cli(argv, __doc__, OUT, "0,1,2", "50,150,500", run_seed, report, float)


if __name__ == "__main__":
    raise SystemExit(main())
