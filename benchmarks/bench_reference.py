"""Reference selections: the cells each reference run chooses, recorded and compared.

A change to how the selection problem reaches the solvers must not change what is chosen.
This runs :func:`reserve.select.run_selection` on the embedded default region for a fixed set
of runs (budgets 10/30/100 for both species, a money budget for TTK and for the SVM, locked
cells, the calibrated boundary penalty, ``ttk-mip``, two species, the cross-validated C of the
linear model, the bootstrap and learning from the surveyed cells) and writes each run's
selected cell ids in rank order, its C and its score digest to
``benchmarks/results/reference.json``.

Run: ``python -m benchmarks.bench_reference`` (record) or
``python -m benchmarks.bench_reference --check`` (compare with the record; exit 1 and list
every run whose cells differ). ``--only NAME[,NAME]`` runs a subset.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np

from reserve.config import SelectOptions
from reserve.default_region import default_planning_units
from reserve.select import run_selection

OUT = Path(__file__).resolve().parent / "results" / "reference.json"
THRUSH, QUAIL = "Virtual Thrush", "Virtual Quail"

#: Each reference run: its name and its :class:`reserve.config.SelectOptions`.
RUNS: dict[str, dict[str, Any]] = {
    **{f"thrush_k{k}": {"budget": k} for k in (10, 30, 100)},
    **{f"quail_k{k}": {"budget": k, "species": QUAIL} for k in (10, 30, 100)},
    "money_ttk": {"budget": 30.0, "cost_column": "price", "cells": "priced"},
    "money_svm": {"budget": 30.0, "cost_column": "price", "cells": "priced", "method": "svm"},
    "locked": {"budget": 30, "locked_in": "keep", "locked_out": "avoid", "cells": "priced"},
    "boundary_auto": {"budget": 30, "boundary_penalty": "auto", "n_jobs": 1},
    "ttk_mip": {"budget": 30, "method": "ttk-mip", "time_limit": 20},
    "two_species": {"budget": 30, "species": [THRUSH, QUAIL], "model": "linear", "joint_fit": True},
    "two_species_mip": {
        "budget": 10,
        "species": [THRUSH, QUAIL],
        "joint_fit": True,
        "method": "ttk-mip",
        "time_limit": 20,
    },
    "linear_cv": {"budget": 30, "model": "linear", "C": "cv"},
    "bootstrap": {"budget": 30, "model": "linear", "bootstrap": 5, "n_jobs": 1},
    "surveyed": {"budget": 30, "learn_from": "surveyed"},
    "svm_k30": {"budget": 30, "method": "svm"},
}


def priced_cells(work: Path) -> Path:
    """The default region with a ``price`` column and ``keep`` / ``avoid`` lock columns.

    Prices are a deterministic function of the cell id (1 to 3 per cell, mean about 2), so
    a budget of 30 buys about 15 cells; ``keep`` locks in three candidate cells and
    ``avoid`` locks out ten.
    """
    units = gpd.read_file(default_planning_units(), layer="planning_units")
    ids = units["cell_id"].astype(str).to_numpy()
    digest = np.array([int(hashlib.sha256(i.encode()).hexdigest()[:8], 16) for i in ids])
    units["price"] = 1.0 + (digest % 2001) / 1000.0
    cand = np.flatnonzero(units["role"].to_numpy() == "candidate")
    units["keep"] = False
    units.loc[units.index[cand[[5, 500, 5000]]], "keep"] = True
    units["avoid"] = False
    units.loc[units.index[cand[1000:1010]], "avoid"] = True
    path = work / "priced.gpkg"
    units.to_file(path, layer="planning_units", driver="GPKG")
    return path


def run(name: str, kwargs: dict[str, Any], priced: Path) -> dict[str, Any]:
    """One reference run's record: its cells in rank order, C and a digest of the scores."""
    kwargs = dict(kwargs)
    if kwargs.pop("cells", None) == "priced":
        kwargs["cells"] = priced
    t0 = time.perf_counter()
    result = run_selection(SelectOptions(map=False, **kwargs))
    seconds = time.perf_counter() - t0
    ranking = result.ranking
    scores = np.round(ranking["score"].to_numpy(dtype=float), 9)
    return {
        "cells": [str(c) for c in result.selected["cell_id"]],
        "C": result.summary.get("C"),
        "scores_sha256": hashlib.sha256(scores.tobytes()).hexdigest()[:16],
        "seconds": round(seconds, 1),
    }


def compare(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """One line per run whose cells (or order) differ from the record."""
    lines = []
    for name, rec in now.items():
        old = recorded.get(name)
        if old is None:
            lines.append(f"{name}: not recorded")
        elif old["cells"] != rec["cells"]:
            gone = sorted(set(old["cells"]) - set(rec["cells"]))
            new = sorted(set(rec["cells"]) - set(old["cells"]))
            lines.append(f"{name}: cells differ (out {gone}, in {new}; same set: {not gone})")
        elif old["scores_sha256"] != rec["scores_sha256"]:
            lines.append(f"{name}: same cells, scores differ after 9 decimals")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the record")
    parser.add_argument("--only", default="", help="comma-separated run names")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(RUNS)
    with tempfile.TemporaryDirectory() as tmp:
        priced = priced_cells(Path(tmp))
        now = {}
        for name in names:
            now[name] = run(name, RUNS[name], priced)
            print(f"{name}: {now[name]['seconds']} s", file=sys.stderr)
    if args.check:
        lines = compare(json.loads(OUT.read_text()), now)
        print("\n".join(lines) or f"all {len(now)} runs choose the recorded cells")
        return 1 if lines else 0
    recorded = json.loads(OUT.read_text()) if OUT.exists() and args.only else {}
    recorded.update(now)
    OUT.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(now)} runs in {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
