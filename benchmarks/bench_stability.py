"""Stable across budgets: precision at every k in 10..100 on the default region, one fit per k.

A planner who asks ``reserve select --budget k`` gets one fit at that ``k``; this benchmark
does the same for every ``k`` of ``--ks`` (default 10..100) and reports, per simulation seed
and species, the largest drop of precision (against the simulated truth) between adjacent
budgets. A ranking that only grows with ``k`` cannot drop by more than ``p / (k + 1)`` from
``k`` to ``k + 1`` (one more cell, at worst unoccupied), below 0.10 from ``k = 10`` on; a
larger drop means the selection at ``k + 1`` swapped good cells out, as boundary ties broken
by noise do. Target (issue 15 item 5): no drop larger than 0.10.

Models (``--models``):

- ``auto``: ``reserve select``'s default, :class:`reserve.solvers.AutoTTK`, fitted at every
  ``k``. Its cross-validation depends on ``k`` only through the folds' budgets
  (:func:`reserve.solvers.fold_k`), so the full cross-validated fit runs once per group of
  budgets with the same fold budgets (:func:`fold_budget_groups`, computed for
  every fold size the stratified folds can have); every other ``k`` of the run fits
  ``AutoTTK(k, **full.refit_params())``, the same final fit (the same members) without repeating the
  cross-validation, and at the group's first ``k`` both are fitted and must agree (checked);
- ``linear``: ``TTK(k, C=1)``, as ``reserve select --model linear`` runs it.

Rows and features are those of ``reserve select`` (:func:`benchmarks.bench_peers.
region_problems`: habitat features and, as by default, the effort covariates, standardised
over the training and candidate cells).

Run: ``python -m benchmarks.bench_stability [--seeds 0,1,2,3,4] [--species both|thrush|quail]
[--models auto,linear] [--ks 10-100] [--work DIR]`` (writes ``benchmarks/results/stability.md``;
``--csv`` keeps the precision of every fit, appended as each curve ends).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from reserve.config import SELECT_DEFAULTS
from reserve.solvers import TTK, AutoTTK, fold_k

OUT = Path(__file__).resolve().parent / "results" / "stability.md"

#: Largest drop of precision allowed between adjacent budgets (issue 15 item 5).
TARGET_DROP = 0.10


def largest_drop(ks: list[int], precision: list[float]) -> tuple[float, int]:
    """The largest fall of precision from one budget to the next, and the ``k`` it starts at.

    Only adjacent budgets (``k`` and ``k + 1``) are compared; a rise is no drop (0.0 when the
    curve never falls; the ``k`` is then the first).

    Examples
    --------
    >>> largest_drop([28, 29, 30, 31], [0.89, 0.86, 0.63, 0.19])
    (0.44, 30)
    """
    best, where = 0.0, ks[0]
    for i in range(len(ks) - 1):
        if ks[i + 1] != ks[i] + 1:
            continue
        d = round(precision[i] - precision[i + 1], 12)
        if d > best:
            best, where = d, ks[i]
    return best, where


def fold_budget_groups(
    ks: list[int], n_labelled: int, n_positive: int, n_candidates: int, cv: int = 3
) -> list[list[int]]:
    """The ``ks`` grouped by the budgets their cross-validation folds get (first seen first).

    AutoTTK's folds hold ``n_labelled / cv`` rows (one more or less) with ``n_positive / cv``
    positives (one more or less); the budget of each is :func:`reserve.solvers.fold_k`. Two
    budgets ``k`` with equal fold budgets for every such fold size give the same
    cross-validation, so the same winner.

    Examples
    --------
    >>> fold_budget_groups([10, 11, 12], 400, 90, 5000)
    [[10, 11, 12]]
    """
    sizes = range(max(n_labelled // cv - 1, 1), math.ceil(n_labelled / cv) + 2)
    pos = range(max(n_positive // cv - 1, 0), math.ceil(n_positive / cv) + 2)

    def signature(k: int) -> tuple[int, ...]:
        return tuple(fold_k(n, p, k, n_candidates) for n in sizes for p in pos if p <= n)

    groups: dict[tuple[int, ...], list[int]] = {}
    for k in ks:
        groups.setdefault(signature(k), []).append(k)
    return list(groups.values())


def auto_curve(X: np.ndarray, y: np.ndarray, ks: list[int], seed: int) -> dict[int, np.ndarray]:
    """AutoTTK's selection at every ``k``: full CV once per fold-budget group (see module)."""
    n_lab = int((y != -1).sum())
    groups = fold_budget_groups(ks, n_lab, int((y == 1).sum()), int((y == -1).sum()))
    out: dict[int, np.ndarray] = {}
    for group in groups:
        full = AutoTTK(k=group[0], random_state=seed).fit(X, y)
        best = full.members_
        out[group[0]] = np.asarray(full.selected_)
        for k in group:
            est = AutoTTK(k=k, random_state=seed, **full.refit_params())
            with warnings.catch_warnings():  # one grid point: no CV scores to average
                warnings.simplefilter("ignore", RuntimeWarning)
                sel = np.asarray(est.fit(X, y).selected_)
            if k == group[0] and not np.array_equal(sel, out[k]):
                raise RuntimeError(f"the final fit alone differs from the full fit at k={k}")
            out[k] = sel
        print(f"  auto: k {group[0]}-{group[-1]} with {best}", flush=True)
    return out


def linear_curve(X: np.ndarray, y: np.ndarray, ks: list[int], seed: int) -> dict[int, np.ndarray]:
    """Linear TTK's selection at every ``k`` (C = 1, as ``--model linear``)."""
    return {k: np.asarray(TTK(k=k, C=1.0, random_state=seed).fit(X, y).selected_) for k in ks}


CURVES = {"auto": auto_curve, "linear": linear_curve}


def parse_ks(text: str) -> list[int]:
    """``"10-100"`` or ``"10,20,30"`` (or both, comma-separated) as a sorted list of budgets.

    Examples
    --------
    >>> parse_ks("10-13,20")
    [10, 11, 12, 13, 20]
    """
    ks: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        ks.update(range(int(lo), int(hi or lo) + 1))
    return sorted(ks)


def report(rows: list[dict], command: str, notes: list[str]) -> str:
    """Markdown: one line per (model, species, seed) with its largest drop, and the verdict."""
    lines = [
        "# Stable across budgets: precision at k, one fit per k",
        "",
        f"`{command}` (Python {platform.python_version()}, {os.cpu_count()} CPUs). "
        "Method: see `benchmarks/bench_stability.py`.",
        "",
        *[f"- {n}" for n in notes],
        "",
        f"Largest drop of precision between adjacent k (target: none above {TARGET_DROP:.2f}).",
        "",
        "| model | species | seed | ks | precision at 10 / 30 / 100 | mean precision | "
        "largest drop | at k | target met | s per k |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p = r["precision"]
        at = " / ".join(f"{p[k]:.2f}" if k in p else "-" for k in (10, 30, 100))
        ok = "yes" if r["drop"] <= TARGET_DROP else "**no**"
        lines.append(
            f"| {r['model']} | {r['species']} | {r['seed']} | {len(p)} in {min(p)}-{max(p)} | "
            f"{at} | "
            f"{np.mean(list(p.values())):.3f} | {r['drop']:.3f} | {r['at']} → {r['at'] + 1} | "
            f"{ok} | {r['seconds'] / len(p):.1f} |"
        )
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        met = sum(r["drop"] <= TARGET_DROP for r in mine)
        lines.append("")
        lines.append(
            f"- {model}: target met on {met} of {len(mine)} curves; worst drop "
            f"{max(r['drop'] for r in mine):.3f}."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    from benchmarks.bench_peers import region_problems, write_atomic

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--species", choices=("both", "thrush", "quail"), default="both")
    parser.add_argument("--models", default="auto,linear")
    parser.add_argument("--ks", default="10-100")
    parser.add_argument("--no-effort", action="store_true", help="habitat features only")
    parser.add_argument("--work", type=Path, default=None, help="folder of the redrawn regions")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--csv", type=Path, default=None)
    args = parser.parse_args(argv)
    ks, models = parse_ks(args.ks), args.models.split(",")
    effort = SELECT_DEFAULTS.effort and not args.no_effort
    want = {"both": (0, 1), "thrush": (0,), "quail": (1,)}[args.species]
    rows: list[dict] = []
    notes = [f"effort covariates: {'on' if effort else 'off'}"]
    command = "python -m benchmarks.bench_stability " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    with tempfile.TemporaryDirectory() as tmp, threadpool_limits(1):
        work = args.work or Path(tmp)
        for seed in [int(s) for s in args.seeds.split(",")]:
            problems = list(region_problems([seed], work, tuple(ks), effort))
            for j in want:
                pr = problems[j]
                for model in models:
                    t0 = time.perf_counter()
                    sel = CURVES[model](pr.X, pr.y, ks, 0)
                    seconds = time.perf_counter() - t0
                    prec = {k: float(pr.truth[sel[k]].mean()) for k in ks}
                    drop, at = largest_drop(ks, [prec[k] for k in ks])
                    rows.append(
                        {
                            "model": model,
                            "species": pr.group,
                            "seed": seed,
                            "precision": prec,
                            "drop": drop,
                            "at": at,
                            "seconds": seconds,
                        }
                    )
                    print(
                        f"{model} | {pr.group} | seed {seed}: largest drop {drop:.3f} at k "
                        f"{at}; {seconds:.0f} s",
                        flush=True,
                    )
                    if args.csv is not None:
                        _append(args.csv, rows[-1], fresh=len(rows) == 1)
                    write_atomic(args.out, report(rows, command.strip(), notes))
    print(report(rows, command.strip(), notes))
    return 0


def _append(path: Path, row: dict, *, fresh: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w" if fresh else "a", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        if fresh:
            writer.writerow(["model", "species", "seed", "k", "precision"])
        for k, p in row["precision"].items():
            writer.writerow([row["model"], row["species"], row["seed"], k, f"{p:.6f}"])


if __name__ == "__main__":
    raise SystemExit(main())
