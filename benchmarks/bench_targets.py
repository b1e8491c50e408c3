"""Several species with targets at scale: LP rounding against SCIP.

Synthetic probabilities ``P ~ Beta(0.3, 2)`` of shape (n, S), a cell budget ``k = n / 50``
and a target of 40 % of each species' :func:`reserve.solvers.reachable` (70 % for every third
species, so some targets bind and others cannot be met). At each size
:func:`reserve.solvers.plan_species` runs with ``exact=False`` (LP rounding) and, where
``n * S`` allows, ``exact=True`` (SCIP, 60 s limit). Figures: seconds, status, gap, the
targets met, and the seconds as a ratio to SCIP's on the same instance where it ran.

Run: ``python -m benchmarks.bench_targets [--sizes 500x5,2000x5,...]`` (writes
``benchmarks/results/targets.md``; figures, no assertions).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from reserve.solvers import plan_species, reachable

OUT = Path(__file__).resolve().parent / "results" / "targets.md"
SIZES = "500x5,2000x5,5000x5,2000x20,10000x20,20000x50,100000x50"
SCIP_MAX = 50_000  # n * S above which SCIP is not run


def instance(n: int, S: int, seed: int = 0):
    """``(P, k, targets)`` of the synthetic instance."""
    rng = np.random.default_rng(seed)
    P = rng.beta(0.3, 2.0, size=(n, S))
    k = max(n // 50, 1)
    frac = np.where(np.arange(S) % 3 == 0, 0.7, 0.4)
    return P, k, frac * reachable(P, k)


def run(sizes: list[tuple[int, int]]) -> list[dict]:
    """One record per size and solver."""
    records = []
    for n, S in sizes:
        P, k, targets = instance(n, S)
        runs = [("lp-rounding", False)] + ([("scip", True)] if n * S <= SCIP_MAX else [])
        ref = None
        for name, exact in runs[::-1]:  # SCIP first: the reference
            t0 = time.perf_counter()
            plan = plan_species(P, k, targets=targets, exact=exact, time_limit=60.0)
            sec = time.perf_counter() - t0
            ref = sec if exact else ref
            rec = {
                "n": n,
                "S": S,
                "k": k,
                "solver": name,
                "seconds": sec,
                "status": plan.status,
                "gap": plan.gap,
                "F": plan.shortfall_objective,
                "F_bound": plan.shortfall_bound,
                "U": plan.utility,
                "met": int(plan.met.sum()),
                "ratio": None if ref is None else sec / ref,
            }
            records.append(rec)
            print(rec, flush=True)
    return records


def write(records: list[dict], command: str) -> None:
    """The markdown table of ``records`` into :data:`OUT`."""
    lines = [
        "# Several species with targets at scale",
        "",
        f"`{command}` ({platform.python_version()}, {os.cpu_count()} CPUs, "
        f"{platform.processor() or platform.machine()}, shared with other jobs). "
        "P ~ Beta(0.3, 2), k = n / 50, targets 40 % (every third species 70 %) of each "
        "species' reachable. Gap: the larger of the utility stage's relative gap and the "
        "shortfall stage's (per unit of target weight), against proven bounds. "
        "x SCIP: seconds as a ratio to SCIP's on the same instance.",
        "",
        "| n | S | k | solver | seconds | x SCIP | status | gap | shortfall | its bound "
        "| utility | targets met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.3f}"
        lines.append(
            f"| {r['n']} | {r['S']} | {r['k']} | {r['solver']} | {r['seconds']:.2f} | {ratio} "
            f"| {r['status']} | {r['gap']:.2e} | {r['F']:.4f} | {r['F_bound']:.4f} "
            f"| {r['U']:.1f} | {r['met']} / {r['S']} |"
        )
    OUT.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=SIZES, help="comma-separated n x S")
    args = parser.parse_args()
    sizes = [tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")]
    command = "python -m benchmarks.bench_targets"
    if args.sizes != SIZES:
        command += f" --sizes {args.sizes}"
    write(run(sizes), command)


if __name__ == "__main__":
    main()
