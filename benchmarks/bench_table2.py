"""Table 2 of the paper: train objective and test hinge loss at C = 1.

diabetes, ionosphere and sonar; standardised features; 10 random 50/50 splits; k = 5% of the
test half. Methods: the shifted SVM (TTK's start), the paper's feasible-direction method (FD),
and FD + polish (our default), printed beside the paper's SVM / MIP / FD numbers.

Run: ``python -m benchmarks.bench_table2 [--splits 10] [--out benchmarks/results/table2.md]``
"""

from __future__ import annotations

import argparse
import platform
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from reserve.paper.benchmark import PAPER_TABLE2
from reserve.paper.datasets import load_benchmark, transductive_split
from reserve.solvers import TTK, hinge_objective
from reserve.solvers.budget import Budget
from reserve.solvers.ttk import shifted_svm_start

#: The paper's Table 2 per dataset; the columns we print beside ours.
PAPER_COLUMNS = {"SVM": "SVM", "MIP": "TTK-MIP", "FD": "TTK-FD"}


def test_hinge(w: np.ndarray, b: float, X: np.ndarray, y01: np.ndarray) -> float:
    """Hinge loss summed over the hidden (test) rows."""
    y_pm = np.where(y01 == 1, 1.0, -1.0)
    return float(np.maximum(0.0, 1.0 - y_pm * (X @ w + b)).sum())


def run(splits: int = 10) -> tuple[str, dict]:
    """Measure every method on every split; return the markdown report and raw rows."""
    rows: dict[str, dict[str, list[tuple[float, float, float]]]] = {}
    for name in PAPER_TABLE2:
        X, y = load_benchmark(name)
        per = rows.setdefault(name, {"shifted SVM": [], "FD": [], "FD + polish": []})
        for seed in range(splits):
            Xa, yf, yh, k = transductive_split(X, y, random_state=seed)
            lab = yf != -1
            Xl, Xc = Xa[lab], Xa[~lab]
            y_pm = np.where(yf[lab] == 1, 1.0, -1.0)
            t0 = time.perf_counter()
            w, b, _ = shifted_svm_start(Xl, y_pm, Xc, Budget.cells(k, Xc.shape[0]), 1.0)
            t_svm = time.perf_counter() - t0
            per["shifted SVM"].append(
                (hinge_objective(w, b, Xl, y_pm, 1.0), test_hinge(w, b, Xc, yh), t_svm)
            )
            for label, pol in (("FD", False), ("FD + polish", True)):
                m = TTK(k=k, C=1.0, polish=pol).fit(Xa, yf)
                per[label].append(
                    (m.objective_, test_hinge(m.coef_, m.intercept_, Xc, yh), m.runtime_)
                )
    lines = [
        "| dataset | measure | shifted SVM | FD | FD + polish | paper SVM | paper MIP | paper FD |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, per in rows.items():
        paper = PAPER_TABLE2[name]
        for col, label in ((0, "train obj."), (1, "test loss")):
            ours = [
                f"{np.mean([r[col] for r in per[m]]):.1f} ± {np.std([r[col] for r in per[m]]):.1f}"
                for m in ("shifted SVM", "FD", "FD + polish")
            ]
            theirs = ["{} ± {}".format(*paper[PAPER_COLUMNS[m]][col]) for m in ("SVM", "MIP", "FD")]
            lines.append(f"| {name} | {label} | " + " | ".join(ours + theirs) + " |")
    lines.append("")
    lines.append(
        "Mean fit time per split (s): "
        + "; ".join(
            f"{name}: " + ", ".join(f"{m} {np.mean([r[2] for r in per[m]]):.2f}" for m in per)
            for name, per in rows.items()
        )
    )
    return "\n".join(lines), rows


def main(argv: list[str] | None = None) -> None:
    """Print the table and record it."""
    parser = argparse.ArgumentParser(description="Reproduce the paper's Table 2 (C = 1).")
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--out", default="benchmarks/results/table2.md")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    table, _ = run(args.splits)
    wall = time.perf_counter() - t0
    header = (
        "# Table 2 reproduction (train objective and test hinge loss, C = 1)\n\n"
        f"Command: `python -m benchmarks.bench_table2 --splits {args.splits}`  \n"
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {platform.machine()}, "
        f"Python {platform.python_version()}; wall time {wall:.0f} s.\n\n"
        "Features standardised over all rows of the split; k = 5% of the test half; "
        "mean ± sd over splits (seeds 0..n-1 of `reserve.paper.datasets.transductive_split`).\n\n"
    )
    print(header + table)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(header + table + "\n")


if __name__ == "__main__":
    main()
