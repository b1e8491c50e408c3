"""Several species on the default region: true presences in k shared cells.

The default region carries two virtual species with opposite habitats (the Virtual Thrush,
a forest bird of mid elevations, and the Virtual Quail, an open-country bird of low
elevations; :mod:`reserve.paper.simulate`). For each budget ``k`` and simulation seed, ``k`` cells
are chosen by

* **multi-species TTK** (``reserve select --species "Virtual Thrush" --species "Virtual
  Quail"``: one scorer per species, the ``k`` cells shared; :class:`reserve.solvers.multi.
  MultiTTK`);
* **sum of SVMs**: a true-hinge SVM per species, cells ranked by the sum of their scores
  (``--method svm`` with both species; :class:`reserve.solvers.multi.MultiSVM`);
* **TTK for one species** (thrush only, quail only): what a single-species plan buys for
  the other species;
* **random**: the expectation of a uniform pick of candidate cells.

Each selection is scored against both species' simulated truth: precision per species
(share of the chosen cells the species truly occupies) and presences per cell (their sum,
the expected number of (cell, species) presences per chosen cell). C = 1.

Run: ``python -m benchmarks.bench_multi [--seeds 0,1,2] [--budgets 10,30,100]`` (writes
``benchmarks/results/multi.md``; figures, no assertions).
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import numpy as np
import pyogrio

from benchmarks.bench_default_region import region_cli, region_for_seed
from reserve.config import DEFAULT_REGION, species_slug
from reserve.default_region import FILES
from reserve.evaluate import read_truth
from reserve.select import select_reserve

OUT = Path(__file__).resolve().parent / "results" / "multi.md"
SPECIES = DEFAULT_REGION.species_all[:2]
RUNS = {
    "multi_ttk": ("multi-species TTK", "ttk", list(SPECIES)),
    "sum_svm": ("sum of SVMs", "svm", list(SPECIES)),
    "ttk_first": (f"TTK, {SPECIES[0]} only", "ttk", [SPECIES[0]]),
    "ttk_second": (f"TTK, {SPECIES[1]} only", "ttk", [SPECIES[1]]),
}


def _truth_files(folder: Path) -> list[Path]:
    """Truth file of each species in ``SPECIES`` inside a default-region folder."""
    return [
        folder / FILES["truth" if i == 0 else f"truth_{species_slug(name)}"]
        for i, name in enumerate(SPECIES)
    ]


def run_region(seed: int, cells: Path, folder: Path, budgets: list[int]) -> list[dict]:
    """Every run of :data:`RUNS` at every budget; one record per budget."""
    units = pyogrio.read_dataframe(cells, layer="planning_units", read_geometry=False)
    ids = units["cell_id"].to_numpy()
    cand = ((units["role"] == "candidate") & ~units["locked_out"]).to_numpy()
    occ = np.column_stack(
        [
            read_truth(path).loc[ids, "occupied"].to_numpy(dtype=bool)
            for path in _truth_files(folder)
        ]
    )
    train = (units["role"] == "train").to_numpy()
    records = []
    for k in budgets:
        rec: dict = {"seed": seed, "k": k}
        for key, (_, method, species) in RUNS.items():
            t0 = time.perf_counter()
            res = select_reserve(
                k, cells, method=method, C=1.0, seed=0, species=species, model="linear"
            )
            seconds = time.perf_counter() - t0
            rows = np.isin(ids, res.selected["cell_id"].to_numpy())
            prec = occ[rows].mean(axis=0)
            rec[key] = {"precision": prec, "presences": float(prec.sum()), "seconds": seconds}
            if key == "multi_ttk":
                rec["expected"] = [
                    res.summary[f"expected_precision__{species_slug(s)}"] for s in SPECIES
                ]
        prec = occ[cand].mean(axis=0)
        rec["random"] = {"precision": prec, "presences": float(prec.sum()), "seconds": 0.0}
        rec["train_positive"] = [int(occ[train, j].sum()) for j in range(len(SPECIES))]
        records.append(rec)
        print(
            f"seed {seed} k {k}: "
            + "  ".join(
                f"{key} {rec[key]['precision'][0]:.2f}/{rec[key]['precision'][1]:.2f}"
                for key in (*RUNS, "random")
            ),
            flush=True,
        )
    return records


def report(records: list[dict], seeds: list[int], budgets: list[int]) -> str:
    """Markdown: mean precision per species and presences per cell, then every run."""
    a, b = SPECIES
    lines = [
        "# Several species on the default region",
        "",
        f"`python -m benchmarks.bench_multi --seeds {','.join(map(str, seeds))} --budgets "
        f"{','.join(map(str, budgets))}` ({platform.python_version()}, {os.cpu_count()} CPUs). "
        f"Precision = share of the k chosen cells the species truly occupies; presences per "
        "cell = the sum over both species. C = 1.",
        "",
        f"| k | method | {a} | {b} | presences per cell | seconds |",
        "|---|---|---|---|---|---|",
    ]
    labels = {key: v[0] for key, v in RUNS.items()} | {"random": "random (expected)"}
    for k in budgets:
        rows = [r for r in records if r["k"] == k]
        for key in (*RUNS, "random"):
            p = np.mean([r[key]["precision"] for r in rows], axis=0)
            pres = np.mean([r[key]["presences"] for r in rows])
            sec = np.mean([r[key]["seconds"] for r in rows])
            lines.append(
                f"| {k} | {labels[key]} | {p[0]:.3f} | {p[1]:.3f} | {pres:.3f} | {sec:.1f} |"
            )
    lines += [
        "",
        "Multi-species TTK's expected precision (Platt-calibrated on the training cells, as "
        "`reserve select` reports it) beside the truth, per seed:",
        "",
        f"| seed | k | {a} expected / true | {b} expected / true |",
        "|---|---|---|---|",
    ]
    for r in records:
        e, t = r["expected"], r["multi_ttk"]["precision"]
        lines.append(
            f"| {r['seed']} | {r['k']} | {e[0]:.3f} / {t[0]:.3f} | {e[1]:.3f} / {t[1]:.3f} |"
        )
    return "\n".join(lines) + "\n"


def run_seed(seed: int, budgets: list[int], work: Path) -> list[dict]:
    """Every budget on simulation ``seed`` (0: the shipped region)."""
    cells, folder = region_for_seed(seed, work)
    return run_region(seed, cells, folder, budgets)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    return region_cli(argv, __doc__, OUT, "0,1,2", "10,30,100", run_seed, report)


if __name__ == "__main__":
    raise SystemExit(main())
