"""Can a cross-validation on the labelled rows see where a random forest leads at the top?

Usage::

    .venv/bin/python -m benchmarks.bench_cv_forest [--datasets german_numer,svmguide3,diabetes]
        [--splits 10] [--csv FILE]

On the paper's UCI sets (:func:`benchmarks.bench_peers.uci_problems`: random 50/50 splits,
``k`` = 5 % of the test half) a random forest can select better than every linear scorer
(german_numer: 0.80 against 0.68 in ``benchmarks/results/peers.md``), while
AutoTTK's cross-validation prefers the linear maps. This benchmark asks whether any
cross-validation design would pick the forest there. For every split it compares two
models on the labelled half, as AutoTTK's CV compares maps:

* ``forest``: ``RandomForestClassifier(300)`` (the peers' forest), ranking by its probability;
* ``ttk``: linear TTK (``C = 1``, no polish, as in AutoTTK's folds), each held-out fold
  playing the candidates, ranking by its decision function.

Each is scored on the held-out folds under every CV design (folds x repeats, so that 3 x 4,
5 x 2 and 10 x 1 all hold each row out 4, 2 or 1 times) and every fold score:

* ``auto``: precision at AutoTTK's fold budget (:func:`reserve.solvers.fold_k`: the fold's
  share of ``k``, raised to half its positives);
* ``true``: precision at the fold's share of ``k`` only (the test's depth);
* ``mean``: the mean of the precisions at 1, 2, ..., the ``auto`` budget (weighs the top).

The CV picks the model with the higher mean fold score; the line printed per design is how
often it picked the forest and the mean test precision at ``k`` of what it picked, beside
each model's own. Figures only: nothing is chosen or asserted. The printed report of a run,
with its command, is kept in ``benchmarks/results/cv_forest.md``.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import StratifiedKFold

from benchmarks.bench_peers import uci_problems
from reserve.solvers import TTK, fold_k

#: (folds, repeats) of each CV design.
DESIGNS: tuple[tuple[int, int], ...] = ((3, 2), (3, 4), (5, 2), (10, 1))

#: Fold scores (module docstring).
SCORES: tuple[str, ...] = ("auto", "true", "mean")


def top_precisions(scores: np.ndarray, y: np.ndarray, depth: int) -> np.ndarray:
    """Precision of the top 1, 2, ..., ``depth`` rows by ``scores`` (ties: lower row first).

    Examples
    --------
    >>> top_precisions(np.array([0.9, 0.1, 0.5, 0.7]), np.array([1, 0, 0, 1]), 3).tolist()
    [1.0, 1.0, 0.6666666666666666]
    """
    top = y[np.argsort(-scores, kind="stable")[:depth]]
    return np.cumsum(top) / np.arange(1, top.size + 1)


def fold_scores(s: np.ndarray, y_held: np.ndarray, k: int, m: int) -> dict[str, float]:
    """Every fold score of the held-out rows' scores ``s`` (``k`` of ``m`` candidates)."""
    n, n_pos = y_held.size, int(y_held.sum())
    budget = fold_k(n, n_pos, k, m)
    share = int(min(max(round(n * k / m), 1), n - 1))
    prec = top_precisions(s, y_held, budget)
    return {"auto": float(prec[-1]), "true": float(prec[share - 1]), "mean": float(prec.mean())}


def model_scores(
    name: str,
    X: np.ndarray,
    y: np.ndarray,
    train: np.ndarray,
    held: np.ndarray,
    k: int,
    polish: bool = False,
) -> np.ndarray:
    """Scores of the ``held`` rows by model ``name`` fitted on the ``train`` rows (TTK:
    selecting ``k`` of the held rows, with or without its ``polish``)."""
    if name == "forest":
        rf = RandomForestClassifier(n_estimators=300, random_state=0)
        return rf.fit(X[train], y[train]).predict_proba(X[held])[:, 1]
    Xf = np.vstack([X[train], X[held]])
    yf = np.concatenate([y[train], np.full(held.size, -1)])
    ttk = TTK(k=k, C=1.0, polish=polish, random_state=0).fit(Xf, yf)
    return ttk.decision_function(X[held])


def cv_means(X: np.ndarray, y: np.ndarray, k: int, m: int) -> dict[tuple, float]:
    """Mean fold score of each (model, design, score) on the labelled rows ``X, y``."""
    out: dict[tuple, list[float]] = {}
    for n_folds, repeats in DESIGNS:
        for rep in range(repeats):
            skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=rep)
            for train, held in skf.split(X, y):
                k_fold = fold_k(held.size, int(y[held].sum()), k, m)
                for name in ("forest", "ttk"):
                    s = model_scores(name, X, y, train, held, k_fold)
                    for score, v in fold_scores(s, y[held], k, m).items():
                        out.setdefault((name, n_folds, repeats, score), []).append(v)
    return {key: float(np.mean(v)) for key, v in out.items()}


def candidate_precision(
    name: str, X: np.ndarray, y: np.ndarray, truth: np.ndarray, k: int
) -> float:
    """Precision at ``k`` on the candidates (``y == -1``) of model ``name`` fitted on the rest
    (TTK as the peers benchmark fits it: with the polish)."""
    lab, cand = np.flatnonzero(y != -1), np.flatnonzero(y == -1)
    s = model_scores(name, X, y, lab, cand, k, polish=True)
    return float(top_precisions(s, truth[cand], k)[-1])


def run(datasets: list[str], n_splits: int) -> list[dict]:
    """One record per (dataset, split, design, score): the CV's pick and the test figures."""
    records = []
    for p in uci_problems(n_splits):
        if p.group not in datasets:
            continue
        t0 = time.perf_counter()
        k, lab = p.ks[0], p.y != -1
        m = int((~lab).sum())
        test = {name: candidate_precision(name, p.X, p.y, p.truth, k) for name in ("forest", "ttk")}
        cv = cv_means(p.X[lab], p.y[lab], k, m)
        for n_folds, repeats in DESIGNS:
            for score in SCORES:
                f, t = cv[("forest", n_folds, repeats, score)], cv[("ttk", n_folds, repeats, score)]
                pick = "forest" if f > t else "ttk"
                records.append(
                    {
                        "dataset": p.group,
                        "split": p.name,
                        "design": f"{n_folds}x{repeats}",
                        "score": score,
                        "cv_forest": f,
                        "cv_ttk": t,
                        "pick": pick,
                        "test_pick": test[pick],
                        "test_forest": test["forest"],
                        "test_ttk": test["ttk"],
                    }
                )
        print(
            f"{p.group} {p.name}: forest {test['forest']:.3f}, ttk {test['ttk']:.3f} "
            f"({time.perf_counter() - t0:.0f} s)",
            flush=True,
        )
    return records


def summary(records: list[dict]) -> list[str]:
    """A line per (dataset, design, score): forest picks and the picked model's precision."""
    lines = ["dataset | design | score | forest picked | test: picked / forest / ttk"]
    keys = sorted({(r["dataset"], r["design"], r["score"]) for r in records})
    for ds, design, score in keys:
        rs = [r for r in records if (r["dataset"], r["design"], r["score"]) == (ds, design, score)]
        n_f = sum(r["pick"] == "forest" for r in rs)
        mean = {c: np.mean([r[c] for r in rs]) for c in ("test_pick", "test_forest", "test_ttk")}
        lines.append(
            f"{ds} | {design} | {score} | {n_f} of {len(rs)} | "
            f"{mean['test_pick']:.3f} / {mean['test_forest']:.3f} / "
            f"{mean['test_ttk']:.3f}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="german_numer,svmguide3,diabetes")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--csv", type=Path, default=None, help="also write every record here")
    args = parser.parse_args(argv)
    records = run(args.datasets.split(","), args.splits)
    print("\n".join(summary(records)))
    if args.csv is not None and records:
        with open(args.csv, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(records[0]))
            writer.writeheader()
            writer.writerows(records)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
