"""Exact TTK (MIP) benchmarks: Table 2's MIP column, formulation choice, and scale.

Sections (each prints one markdown table row per run as it finishes, so an interrupted run
still leaves figures):

``table2``
    diabetes, ionosphere, sonar; C = 1; k = 5% of the test half; splits 0..S-1 of
    ``transductive_split``. FD + polish (the TTK estimator) gives the warm start; the MIP runs
    single-threaded under a per-dataset time limit. Reports the time to proven optimality (or
    the gap left) and the FD + polish gap to the MIP objective.
``formulations``
    tight (iterated bound tightening), simple (closed-form big-M) and indicator constraints
    on the same instances and time limit.
``scale``
    synthetic standardised Gaussian data with n = m at d = 8, 30, 60, growing n until a run
    is not proved optimal within the limit.

Run: ``python -m benchmarks.bench_mip [--sections table2,formulations,scale]``. The printed
tables, with their commands, are kept in ``benchmarks/results/mip.md``.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from datetime import UTC, datetime

import numpy as np

from reserve.paper.benchmark import PAPER_TABLE2
from reserve.paper.datasets import load_benchmark, transductive_split
from reserve.solvers._mip import solve_ttk_mip
from reserve.solvers.constraints import Constraints
from reserve.solvers.ttk import TTK

#: The paper's Table 2 MIP train objective (mean, sd).
PAPER_MIP = {name: cols["TTK-MIP"][0] for name, cols in PAPER_TABLE2.items()}


def _split(name: str, seed: int):
    X, y = load_benchmark(name)
    Xa, yf, _, k = transductive_split(X, y, random_state=seed)
    lab = yf != -1
    return Xa, yf, Xa[lab], np.where(yf[lab] == 1, 1.0, -1.0), Xa[~lab], k


def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _emit(line: str) -> None:
    print(line, flush=True)


def _fd(Xa, yf, k):
    t0 = time.perf_counter()
    est = TTK(k=k, C=1.0).fit(Xa, yf)
    return est, time.perf_counter() - t0


def _exact(Xl, y_pm, Xc, k, est, limit, **kw):
    """The exact solve at C = 1, warm-started from the fitted TTK ``est``."""
    start = (est.coef_[None, :], np.array([est.intercept_]))
    cons = Constraints.cells(k, Xc.shape[0])
    return solve_ttk_mip(Xl, y_pm[:, None], Xc, cons, 1.0, warm_start=start, time_limit=limit, **kw)


def table2(splits: int, limits: dict[str, float], solver: str = "auto", first: int = 0) -> None:
    _emit("\n## Table 2, MIP column\n")
    _emit(
        _row(
            [
                "dataset",
                "split",
                "solver",
                "n, m, d, k",
                "FD+polish obj",
                "MIP obj",
                "bound",
                "gap",
                "status",
                "time (s)",
                "of which bounds (s)",
                "nodes",
                "FD gap to MIP",
            ]
        )
    )
    _emit(_row(["---"] * 13))
    for name, limit in limits.items():
        for seed in range(first, first + splits):
            Xa, yf, Xl, y_pm, Xc, k = _split(name, seed)
            est, _ = _fd(Xa, yf, k)
            r = _exact(Xl, y_pm, Xc, k, est, limit, solver=solver)
            fd_gap = (est.objective_ - r.objective) / r.objective
            _emit(
                _row(
                    [
                        name,
                        seed,
                        r.solver,
                        f"{Xl.shape[0]}, {Xc.shape[0]}, {Xl.shape[1]}, {k}",
                        f"{est.objective_:.4f}",
                        f"{r.objective:.4f}",
                        f"{r.bound:.4f}",
                        f"{r.gap:.2e}",
                        r.status,
                        f"{r.runtime:.1f}",
                        f"{r.details['bound_time']:.1f}",
                        r.n_nodes,
                        f"{fd_gap:.2e}",
                    ]
                )
            )


def formulations(instances: list[tuple[str, int]], limit: float) -> None:
    _emit(f"\n## Formulations (time limit {limit:g} s, warm start FD + polish)\n")
    _emit(
        _row(
            [
                "instance",
                "formulation",
                "status",
                "objective",
                "bound",
                "gap",
                "time (s)",
                "bounds (s)",
                "nodes",
                "fixed out/in",
                "median M",
            ]
        )
    )
    _emit(_row(["---"] * 11))
    for name, seed in instances:
        Xa, yf, Xl, y_pm, Xc, k = _split(name, seed)
        est, _ = _fd(Xa, yf, k)
        for form in ("tight", "simple", "indicator"):
            r = _exact(Xl, y_pm, Xc, k, est, limit, formulation=form)
            d = r.details
            _emit(
                _row(
                    [
                        f"{name} split {seed}",
                        form,
                        r.status,
                        f"{r.objective:.4f}",
                        f"{r.bound:.4f}",
                        f"{r.gap:.2e}",
                        f"{r.runtime:.1f}",
                        f"{d['bound_time']:.1f}",
                        r.n_nodes,
                        f"{d['n_fixed_out']}/{d['n_fixed_in']}",
                        f"{d['median_M']:.3g}",
                    ]
                )
            )


def synthetic(n: int, d: int, seed: int = 0):
    """Two overlapping Gaussian classes (30% positive), n labelled + n candidates, standardised."""
    rng = np.random.default_rng(seed)
    total = 2 * n
    y = (rng.random(total) < 0.3).astype(np.int64)
    shift = np.zeros(d)
    shift[: max(1, d // 4)] = 1.0
    X = rng.standard_normal((total, d)) + np.outer(y, shift)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y_fit = np.r_[y[:n], -np.ones(n, dtype=np.int64)]
    y[:2] = (0, 1)  # both classes among the labelled rows
    y_fit[:2] = (0, 1)
    return X, y_fit, max(1, round(0.05 * n))


def scale(ladder: dict[int, list[int]], limit: float, solver: str = "auto") -> None:
    _emit(
        f"\n## Scale (synthetic, n = m, k = 5% of m, C = 1, time limit {limit:g} s, "
        f"solver {solver})\n"
    )
    _emit(_row(["d", "n = m", "k", "status", "gap", "time (s)", "bounds (s)", "nodes", "FD gap"]))
    _emit(_row(["---"] * 9))
    for d, sizes in ladder.items():
        for n in sizes:
            X, y_fit, k = synthetic(n, d)
            lab = y_fit != -1
            y_pm = np.where(y_fit[lab] == 1, 1.0, -1.0)
            est, _ = _fd(X, y_fit, k)
            r = _exact(X[lab], y_pm, X[~lab], k, est, limit, solver=solver)
            fd_gap = (est.objective_ - r.objective) / r.objective
            _emit(
                _row(
                    [
                        d,
                        n,
                        k,
                        r.status,
                        f"{r.gap:.2e}",
                        f"{r.runtime:.1f}",
                        f"{r.details['bound_time']:.1f}",
                        r.n_nodes,
                        f"{fd_gap:.2e}",
                    ]
                )
            )
            if r.status not in ("optimal", "gap_limit"):
                break


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sections", default="table2,formulations,scale")
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--first-split", type=int, default=0, help="table2: first split to run")
    p.add_argument(
        "--solver",
        default="auto",
        help="table2 and scale sections: auto (SCIP, or Gurobi) or bnb (our branch and bound)",
    )
    p.add_argument(
        "--datasets",
        default="diabetes,ionosphere,sonar",
        help="table2 section: which of diabetes, ionosphere, sonar to run",
    )
    p.add_argument("--limit-diabetes", type=float, default=60.0)
    p.add_argument("--limit-ionosphere", type=float, default=100.0)
    p.add_argument("--limit-sonar", type=float, default=30.0)
    p.add_argument("--limit-formulations", type=float, default=60.0)
    p.add_argument("--limit-scale", type=float, default=90.0)
    p.add_argument("--formulation-splits", default="0,2", help="diabetes splits to compare on")
    p.add_argument(
        "--ladder",
        default="8:250,500;30:100,200,500;60:100,200",
        help="scale section: d:n,n;d:n,... (n = m; each d stops at its first unproved size)",
    )
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    _emit(
        f"Command: `python -m benchmarks.bench_mip {' '.join(sys.argv[1:])}`  \n"
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {platform.machine()}, Python "
        f"{platform.python_version()}; SCIP single-threaded."
    )
    sections = a.sections.split(",")
    if "table2" in sections:
        limits = {
            "diabetes": a.limit_diabetes,
            "ionosphere": a.limit_ionosphere,
            "sonar": a.limit_sonar,
        }
        chosen = a.datasets.split(",")
        unknown = sorted(set(chosen) - set(limits))
        if unknown:
            p.error(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(limits)}")
        table2(a.splits, {name: limits[name] for name in chosen}, a.solver, a.first_split)
    if "formulations" in sections:
        splits = [int(v) for v in a.formulation_splits.split(",")]
        formulations([("diabetes", s) for s in splits], a.limit_formulations)
    if "scale" in sections:
        ladder = {
            int(d): [int(n) for n in sizes.split(",")]
            for d, sizes in (part.split(":") for part in a.ladder.split(";"))
        }
        scale(ladder, a.limit_scale, a.solver)
    _emit(f"\nTotal wall time {time.perf_counter() - t0:.0f} s.")


if __name__ == "__main__":
    main()
