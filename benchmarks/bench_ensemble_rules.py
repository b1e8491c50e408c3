"""How AutoTTK's ensemble combines its members: the mean of clipped standardised scores and others.

Usage::

    .venv/bin/python -m benchmarks.bench_ensemble_rules [--suites uci,bcr27,region]
        [--splits 2] [--folds 3] [--seeds 0,1,2,3,4] [--work DIR] [--csv FILE]

For every problem of the peers suites (:mod:`benchmarks.bench_peers`, same rows, features and
``k``) it fits ``reserve select``'s default, ``AutoTTK(k, random_state=0)``, once. When the
final fit holds several members (:class:`reserve.solvers.MapMean`), it scores the candidates
with each member alone and with several ways of combining them, and prints the precision at
``k`` of each (ties go to the lower row; AutoTTK's own tie-break is not applied, so
``zclip3`` may differ from ``auto`` where scores tie):

* ``zmean``: the mean of the members' scores standardised over the candidates;
* ``zclip3``: the same with each standardised score clipped to [-3, 3], by ``MapMean``
  itself (what the default selects by);
* ``zmedian``: their median;
* ``rankmean``: the mean of the members' candidate ranks (Borda), ties by ``zmean``;
* ``normscore``: the mean of the ranks' normal scores.

Figures only: nothing is chosen or asserted. A rule is only worth adopting if it wins on
every suite; the per-suite means are printed at the end. The printed report of a run, with
its command, is kept in ``benchmarks/results/ensemble_rules.md``.
"""

from __future__ import annotations

import argparse
import csv
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from scipy.stats import norm, rankdata

from benchmarks.bench_peers import Problem, bcr27_problems, region_problems, uci_problems

RULES: tuple[str, ...] = ("zmean", "zclip3", "zmedian", "rankmean", "normscore")


def combinations(S: np.ndarray) -> dict[str, np.ndarray]:
    """Each rule's combined score of the candidates from the members' scores ``S`` (rows).

    Examples
    --------
    >>> S = np.array([[0.0, 1.0, 2.0, 30.0], [3.0, 2.0, 1.0, 0.0]])
    >>> combinations(S)["zmean"].round(2).tolist()  # the first member's outlier counts
    [0.34, -0.06, -0.47, 0.19]
    >>> combinations(S)["rankmean"].round(2).tolist()  # by rank the members cancel out
    [0.63, 0.62, 0.62, 0.63]
    """
    from reserve.solvers import MapMean

    sd = S.std(axis=1, keepdims=True)
    Z = (S - S.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, np.inf)
    m = S.shape[1]
    R = np.vstack([rankdata(s) for s in S])
    return {
        "zmean": Z.mean(axis=0),
        "zclip3": MapMean([], list(S)).fit_scores_,  # the product's own mean
        "zmedian": np.median(Z, axis=0),
        "rankmean": R.mean(axis=0) / m + 1e-9 * Z.mean(axis=0),
        "normscore": norm.ppf((R - 0.5) / m).mean(axis=0),
    }


def top(score: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` largest scores, ties to the lower position."""
    return np.lexsort((np.arange(score.size), -score))[:k]


def evaluate(problem: Problem, k: int) -> dict[str, object]:
    """One AutoTTK fit of ``problem`` at ``k``: the precision of each rule and member."""
    from reserve.solvers import AutoTTK, MapMean

    cand = np.flatnonzero(problem.y == -1)
    truth = problem.truth[cand]
    t0 = time.perf_counter()
    est = AutoTTK(k=k, random_state=0).fit(problem.X, problem.y)
    rec: dict[str, object] = {
        "suite": problem.suite,
        "group": problem.group,
        "problem": problem.name,
        "k": k,
        "members": len(est.members_),
        "auto": float(problem.truth[est.selected_].mean()),
    }
    if isinstance(est.best_estimator_, MapMean):
        S = np.vstack([m.decision_function(problem.X[cand]) for m in est.best_estimator_.members])
        for rule, score in combinations(S).items():
            rec[rule] = float(truth[top(score, k)].mean())
        for i, s in enumerate(S):
            rec[f"member{i}"] = float(truth[top(s, k)].mean())
    rec["seconds"] = time.perf_counter() - t0
    return rec


def problems(args: argparse.Namespace) -> Iterator[Problem]:
    """The peers' problems of the suites asked for (BCR 27 needs its eBird folder)."""
    suites = args.suites.split(",")
    if "uci" in suites:
        yield from uci_problems(args.splits)
    if "bcr27" in suites:
        from reserve.paper.surrogates import default_bcr27_dir

        folder = default_bcr27_dir()
        if folder is not None and folder.is_dir():
            yield from bcr27_problems(args.folds)
        else:
            print("bcr27 skipped: the eBird folder is absent (set RESERVE_BCR27_DIR)")
    if "region" in suites:
        seeds = [int(s) for s in args.seeds.split(",")]
        yield from region_problems(seeds, Path(args.work), (10, 30, 100))


def summary(records: list[dict]) -> list[str]:
    """Per suite: problems, those with several members, and each rule's mean precision."""
    lines = [
        "| suite | problems | several members | " + " | ".join(RULES) + " |",
        "|---|---|---|" + "---|" * len(RULES),
    ]
    for suite in dict.fromkeys(r["suite"] for r in records):
        rs = [r for r in records if r["suite"] == suite]
        means = [np.mean([r.get(rule, r["auto"]) for r in rs]) for rule in RULES]
        multi = sum(r["members"] > 1 for r in rs)
        lines.append(
            f"| {suite} | {len(rs)} | {multi} | " + " | ".join(f"{v:.3f}" for v in means) + " |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the problems, print each record and the per-suite table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suites", default="uci,bcr27,region")
    parser.add_argument("--splits", type=int, default=2)
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--work", default="bench_regions")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args(argv)
    records = []
    for problem in problems(args):
        for k in problem.ks:
            rec = evaluate(problem, k)
            records.append(rec)
            shown = "  ".join(f"{key} {v:.2f}" for key, v in rec.items() if isinstance(v, float))
            print(
                f"{rec['suite']} | {rec['group']} | {rec['problem']} | k {k}: {shown}", flush=True
            )
    if args.csv and records:
        keys = list(dict.fromkeys(key for r in records for key in r))
        with open(args.csv, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=keys)
            writer.writeheader()
            writer.writerows(records)
    print("\n".join(summary(records)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
