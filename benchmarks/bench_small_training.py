"""Few labelled cells: does AutoTTK's ensemble or a simpler fit rank the candidates better?

Real regions often hold few surveyed public cells (the ``ebird`` suite's states: 10-62, with
3-16 detections), where the cross-validation that chooses AutoTTK's feature maps sees folds
of a handful of cells. This benchmark asks, on data other than that suite, whether a simpler
fit then does better (it is the evidence for AutoTTK's rule for few labelled cells,
:data:`reserve.solvers.auto.SMALL_TRAINING`): the labelled cells of two suites of
:mod:`benchmarks.bench_peers` are cut down to ``n`` cells (a seeded stratified draw keeping
the prevalence, with at least :data:`MIN_CLASS` cells of each class), the candidates and the
truth unchanged, and every method is scored by its precision at ``k`` against the truth:

* ``region``: the default region's simulation, seeds 0-4, both virtual species (16,141
  candidates, truth: the simulated occupancy), ``k = 30``;
* ``bcr27``: BCR 27's three species on the random folds of the ``bcr27`` suite (about 1,130
  candidates per fold, truth: the held-out detection), ``k`` = 5 % of the fold.

Methods: ``auto`` (the default, :class:`reserve.solvers.AutoTTK`: with at most 60 labelled
cells the linear map alone), the design probes ``auto-ensemble`` (the search over every map
whatever the number of labelled cells) and ``auto-winner`` (the winner of that search alone)
of :data:`benchmarks.bench_peers.AUTO_VARIANTS`, and the peers ``hgb``, ``rf``, ``logreg``.

Run: ``python -m benchmarks.bench_small_training [--suites region,bcr27] [--sizes 20,40]
[--draws 2] [--seeds 0-4] [--methods auto,...] [--csv FILE] [--from-csv FILE]`` (writes
``benchmarks/results/small_training.md``; figures, no assertions; BCR 27 reads
``RESERVE_BCR27_DIR`` when set).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.bench_coverage import parse_seeds
from benchmarks.bench_peers import (
    METHODS,
    Problem,
    append_records,
    bcr27_problems,
    read_records,
    region_problems,
    run_problem,
    summary_table,
    wilcoxon_p,
)

OUT = Path(__file__).resolve().parent / "results" / "small_training.md"
WORK = Path(os.environ.get("TMPDIR", "/tmp")) / "reserve-bench-peers"
COMPARED = ("auto", "auto-ensemble", "auto-winner", "hgb", "rf", "logreg")
#: Fewest cells of each class a cut-down labelled set keeps.
MIN_CLASS = 3


def cut_labelled(y: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Rows kept when the labelled rows (``y != -1``) are cut to ``n``: a seeded draw of each
    class in proportion (at least :data:`MIN_CLASS` of each), and every candidate row.

    Examples
    --------
    >>> y = np.r_[np.ones(10), np.zeros(30), -np.ones(5)].astype(int)
    >>> keep = cut_labelled(y, 20, seed=0)
    >>> int((y[keep] == 1).sum()), int((y[keep] == 0).sum()), int((y[keep] == -1).sum())
    (5, 15, 5)
    """
    rng = np.random.default_rng(seed)
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    n_pos = min(pos.size, max(MIN_CLASS, round(n * pos.size / (pos.size + neg.size))))
    n_neg = min(neg.size, max(MIN_CLASS, n - n_pos))
    kept = np.concatenate(
        [rng.choice(pos, n_pos, replace=False), rng.choice(neg, n_neg, replace=False)]
    )
    return np.sort(np.concatenate([kept, np.flatnonzero(y == -1)]))


def cut_problem(problem: Problem, n: int, draw: int) -> Problem:
    """``problem`` with its labelled rows cut to ``n`` (:func:`cut_labelled`, seeded by the
    draw), its name saying so."""
    keep = cut_labelled(problem.y, n, seed=draw)
    context = {
        key: (value[keep] if isinstance(value, np.ndarray) else value)
        for key, value in problem.context.items()
    }
    return replace(
        problem,
        suite=f"{problem.suite.split(' ')[0]}, {n} labelled",
        name=f"{problem.name}, draw {draw}",
        X=problem.X[keep],
        y=problem.y[keep],
        truth=problem.truth[keep],
        context=context,
    )


def problems(args: argparse.Namespace) -> Iterator[Problem]:
    """Every cut-down problem of the chosen suites."""
    bases: list[Problem] = []
    if "region" in args.suites:
        bases += list(region_problems(args.seeds, args.work, (30,)))
    if "bcr27" in args.suites:
        bases += [p for p in bcr27_problems(3) if p.suite == "bcr27 (random)"]
    for base in bases:
        for n in args.sizes:
            for draw in range(args.draws):
                yield cut_problem(base, n, draw)


def report(records: list[dict], command: str) -> str:
    """Mean precision per method and suite with ``auto``'s wins / ties / losses against each
    (:func:`benchmarks.bench_peers.summary_table`), then the Wilcoxon p of those pairs."""
    lines = [
        "# Few labelled cells: the default against simpler fits and the peers",
        "",
        f"`{command}`. Precision at k against the truth; in brackets `auto`'s wins / ties / "
        "losses against the method over the problems of a suite.",
        "",
        *summary_table(records, list(COMPARED), "auto"),
        "",
        "Wilcoxon p of `auto` against each method:",
        "",
        "| suite | " + " | ".join(COMPARED[1:]) + " |",
        "|---" * len(COMPARED) + "|",
    ]
    frame = pd.DataFrame(records)
    for suite, at in frame.groupby("suite", sort=False):
        prec = at.pivot_table(index=["group", "problem"], columns="method", values="precision")
        cells = [
            f"{wilcoxon_p((prec['auto'] - prec[m]).to_numpy()):.2g}" if m in prec else "-"
            for m in COMPARED[1:]
        ]
        lines.append(f"| {suite} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ints = lambda s: [int(v) for v in s.split(",")]  # noqa: E731
    parser.add_argument("--suites", type=lambda s: s.split(","), default=["region", "bcr27"])
    parser.add_argument("--sizes", type=ints, default=[20, 40])
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-4"))
    parser.add_argument(
        "--methods",
        type=lambda s: s.split(","),
        default=list(COMPARED),
        help="methods to run (default: every compared one; the report reads what is there)",
    )
    parser.add_argument("--work", type=Path, default=WORK, help="cache of the simulated regions")
    parser.add_argument("--csv", type=Path, default=None, help="append every record")
    parser.add_argument("--from-csv", type=Path, default=None, help="report an earlier --csv")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    command = "python -m benchmarks.bench_small_training " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    if args.from_csv is not None:
        records = read_records(args.from_csv)
    else:
        unknown = sorted(set(args.methods) - set(METHODS))
        if unknown:
            parser.error(f"unknown methods {unknown}; methods: {', '.join(METHODS)}")
        methods = {m: METHODS[m] for m in args.methods}
        rows: list[dict] = []
        for problem in problems(args):
            recs = run_problem(problem, methods)  # prints the problem's line
            if args.csv is not None:
                append_records(args.csv, recs, fresh=not rows)
            rows += recs
        records = rows
    args.out.write_text(report(records, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
