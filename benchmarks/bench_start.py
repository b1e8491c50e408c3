"""The start's SVM QP on a cross-validation fold: the dense interior point against Clarabel.

Usage::

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.bench_start [--rows 2700] [--repeat 3]

A fold of AutoTTK's cross-validation at the scale benchmark's size trains on about 2,700
labelled rows (two thirds of its 4,000-row sample) of :mod:`benchmarks.bench_scale`'s
synthetic data (d = 38). For the ``linear`` map (38 columns) and the ``spline`` map (228) and
C = 0.1, 1, 10 it solves the true-hinge SVM (``solve_fixed_set(Z, y, C, method=...)``) by
Clarabel and by the dense interior point (:mod:`reserve.solvers._dense_qp`) and prints the
CPU seconds of each (fastest of ``--repeat``), their ratio and the relative difference of the
objectives. Set ``OPENBLAS_NUM_THREADS=1``: that is how the CV's folds run
(:func:`reserve.fork.one_blas_thread`). Figures only: nothing is asserted. The printed
figures of a run, with its command, are kept in ``benchmarks/results/start.md``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.bench_scale import make_data


def _cpu(repeat: int, fn, *args, **kwargs) -> tuple[float, object]:
    """Fastest CPU seconds of ``repeat`` calls ``fn(*args, **kwargs)``, and its value."""
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn(*args, **kwargs)
        best = min(best, time.process_time() - t0)
    return best, out


def main(argv: list[str] | None = None) -> int:
    """Print the two solvers' CPU seconds per map and ``C``."""
    from reserve.solvers._qp import solve_fixed_set
    from reserve.solvers.features import feature_map

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2700)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    X, y = make_data(args.rows, 0, 38)
    y_pm = np.where(y == 1, 1.0, -1.0)
    print("map      cols  C     clarabel  dense    ratio  objective rel. diff.")
    for model in ("linear", "spline"):
        Z = X
        for _, step in feature_map(model, n_features=38, n_samples=args.rows, random_state=0):
            Z = step.fit_transform(Z, y)
        for C in (0.1, 1.0, 10.0):
            t_c, ref = _cpu(args.repeat, solve_fixed_set, Z, y_pm, C, method="clarabel")
            t_d, ours = _cpu(args.repeat, solve_fixed_set, Z, y_pm, C, method="dense")
            rel = (ours.objective - ref.objective) / ref.objective
            print(
                f"{model:8s} {Z.shape[1]:4d}  {C:<5g} {t_c:7.2f} s {t_d:6.2f} s "
                f"{t_d / t_c:6.3f}  {rel:+.1e}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
