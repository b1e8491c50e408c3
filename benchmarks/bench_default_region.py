"""Precision against the truth on the default region: TTK, the shifted SVM and a random pick.

For every simulation seed, the species and the birders are redrawn on the shipped landscape
(``pipelines.default_region.build``), the simulated EBD + SED are ingested exactly as
``reserve select`` does without ``--cells`` (:func:`reserve.default_region.default_planning_units`),
and :func:`reserve.select.select_reserve` picks ``k`` cells with ``method="ttk"`` and
``method="svm"`` (C = 1, standardised features: the defaults of ``reserve select``). Each
selection is scored by :func:`reserve.evaluate.evaluate_selection`. The random pick is the
exact expectation of a uniform draw of ``k`` candidate cells: the candidates' share of
occupied cells.

Run: ``python -m benchmarks.bench_default_region [--seeds 0,1,2,3,4] [--budgets 10,30,100]``
(writes ``benchmarks/results/default_region.md``; figures, no assertions).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyogrio

from pipelines.default_region import build
from reserve.default_region import FILES, default_data_dir, default_planning_units
from reserve.evaluate import evaluate_selection, read_truth
from reserve.io.atomic import replacing
from reserve.select import select_reserve

OUT = Path(__file__).resolve().parent / "results" / "default_region.md"
_LANDSCAPE = ("landcover", "legend", "elevation", "region", "public")
_METHODS = ("ttk", "svm")


def simulated_region(seed: int, work: Path) -> tuple[Path, Path, Path, float]:
    """Redraw the species and birders with ``seed`` on the shipped landscape and ingest them.

    Returns the planning-units GeoPackage, the simulation's folder, its truth file and the
    ingest's seconds.
    """
    folder = work / f"seed{seed}"
    folder.mkdir()
    for key in _LANDSCAPE:
        shutil.copy2(default_data_dir() / FILES[key], folder / FILES[key])
    build(seed, folder, source=None)
    old = os.environ.get("RESERVE_DEFAULT_REGION_DIR")
    os.environ["RESERVE_DEFAULT_REGION_DIR"] = str(folder)
    try:
        t0 = time.perf_counter()
        cells = default_planning_units(cache_dir=folder / "cache")
        t_ingest = time.perf_counter() - t0
    finally:
        if old is None:
            del os.environ["RESERVE_DEFAULT_REGION_DIR"]
        else:
            os.environ["RESERVE_DEFAULT_REGION_DIR"] = old
    return cells, folder, folder / FILES["truth"], t_ingest


def run_seed(seed: int, budgets: list[int], work: Path) -> list[dict]:
    """Simulate, ingest and select for one seed; one record per budget."""
    cells, folder, _, t_ingest = simulated_region(seed, work)
    units = pyogrio.read_dataframe(cells, layer="planning_units", read_geometry=False)
    truth = read_truth(folder / FILES["truth"])
    train = (units["role"] == "train") & ~units["locked_out"]
    cand = (units["role"] == "candidate") & ~units["locked_out"]
    cand_occ = truth.loc[units.loc[cand, "cell_id"], "occupied"].to_numpy()
    records = []
    for k in budgets:
        rec = {
            "seed": seed,
            "k": k,
            "n_train": int(train.sum()),
            "n_positive": int((train & (units["label"] == 1)).sum()),
            "n_candidate": int(cand.sum()),
            "random": float(cand_occ.mean()),
            "ingest_s": t_ingest,
        }
        for method in _METHODS:
            t0 = time.perf_counter()
            res = select_reserve(k, cells, method=method, C=1.0, seed=0, model="linear")
            rec[f"{method}_s"] = time.perf_counter() - t0
            ids = res.selected["cell_id"].to_numpy()
            rec[method] = evaluate_selection(ids, folder / FILES["truth"])["precision"]
        records.append(rec)
        print(
            f"seed {seed} k {k:>3}: TTK {rec['ttk']:.3f}  SVM {rec['svm']:.3f}  "
            f"random {rec['random']:.3f}  (train {rec['n_train']}, positives "
            f"{rec['n_positive']}; TTK {rec['ttk_s']:.1f} s)",
            flush=True,
        )
    return records


def report(records: list[dict], seeds: list[int], budgets: list[int]) -> str:
    """Markdown table of the means over seeds and the paired TTK - SVM differences."""
    lines = [
        "# Default region: precision@k against the simulated truth",
        "",
        "`python -m benchmarks.bench_default_region --seeds "
        f"{','.join(map(str, seeds))} --budgets {','.join(map(str, budgets))}` "
        f"({platform.python_version()}, {os.cpu_count()} CPUs). Each seed redraws the species "
        "and the birders on the same real landscape; `reserve select` defaults (C = 1, "
        "standardised features). Random = expected precision of a uniform pick of candidate "
        "cells.",
        "",
        "| k | TTK | shifted SVM | random | TTK - SVM: mean ± sd (min, max) | TTK wins/ties/losses "
        "| train cells | positives |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k in budgets:
        rows = [r for r in records if r["k"] == k]
        ttk = np.array([r["ttk"] for r in rows])
        svm = np.array([r["svm"] for r in rows])
        rnd = np.array([r["random"] for r in rows])
        d = ttk - svm
        sd = d.std(ddof=1) if d.size > 1 else float("nan")
        wtl = f"{int((d > 0).sum())}/{int((d == 0).sum())}/{int((d < 0).sum())}"
        n_train = np.array([r["n_train"] for r in rows])
        n_pos = np.array([r["n_positive"] for r in rows])
        lines.append(
            f"| {k} | {ttk.mean():.3f} | {svm.mean():.3f} | {rnd.mean():.3f} | "
            f"{d.mean():+.3f} ± {sd:.3f} ({d.min():+.3f}, {d.max():+.3f}) | {wtl} | "
            f"{n_train.mean():.0f} ({n_train.min()}-{n_train.max()}) | "
            f"{n_pos.mean():.0f} ({n_pos.min()}-{n_pos.max()}) |"
        )
    lines += ["", "Per seed:", "", "| seed | k | TTK | SVM | random | TTK s | ingest s |"]
    lines.append("|---|---|---|---|---|---|---|")
    for r in records:
        lines.append(
            f"| {r['seed']} | {r['k']} | {r['ttk']:.3f} | {r['svm']:.3f} | {r['random']:.3f} | "
            f"{r['ttk_s']:.1f} | {r['ingest_s']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def region_for_seed(seed: int, work: Path) -> tuple[Path, Path]:
    """Planning units and data folder of simulation ``seed``: 0 is the shipped region."""
    if seed == 0:
        return Path(default_planning_units()), default_data_dir()
    cells, folder, _, _ = simulated_region(seed, work)
    return Path(cells), folder


def region_cli(
    argv: list[str] | None,
    doc: str,
    out: Path,
    seeds: str,
    budgets: str,
    run: Callable[[int, list, Path], list[dict]],
    report: Callable[[list[dict], list[int], list], str],
    cast: Callable[[str], Any] = int,
) -> int:
    """The benchmarks' shared command line: run every seed, print and write the report.

    ``run(seed, budgets, work)`` returns records, ``report(records, seeds, budgets)`` the
    markdown, written atomically to ``--out``.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seeds", default=seeds)
    parser.add_argument("--budgets", default=budgets)
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args(argv)
    seed_list = [int(s) for s in args.seeds.split(",")]
    budget_list = [cast(k) for k in args.budgets.split(",")]
    records: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seed_list:
            records += run(seed, budget_list, Path(tmp))
    text = report(records, seed_list, budget_list)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with replacing(args.out, ".md") as tmp:
        tmp.write_text(text, encoding="utf-8")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    return region_cli(argv, __doc__, OUT, "0,1,2,3,4", "10,30,100", run_seed, report)


if __name__ == "__main__":
    raise SystemExit(main())
