"""Benchmark TTK at scale: n labelled rows, m candidates, d features, k selected.

Usage::

    .venv/bin/python -m benchmarks.bench_scale [--n 100000 --m 1000000 --d 38 --k 1000]
        [--write] [--profile]

Synthetic data: standard normal features; labels from a noisy logistic model whose intercept
is set for about 30% positives. Prints, in one run:

* wall time of ``TTK(k, C=1.0).fit(X, y)`` and of the FD-only fit (``polish=False``), each
  timed plainly and then run again for its peak memory: tracemalloc's peak of traced (numpy
  and Python) allocations during the fit, so it excludes ``X`` itself, which exists before
  (tracing, and ``--profile``, slow the fit: their times are printed apart); the process's
  ``ru_maxrss`` at the end is printed too;
* seconds per FD iteration (``feasible_direction`` from the shifted-SVM start, run alone)
  divided by the time of one ``X @ v`` on the full ``(n + m) x d`` matrix and on the ``m x d``
  candidate block;
* the fit times divided by one ``sklearn.svm.LinearSVC()`` fit on the labelled rows;
* the issue's targets (fit <= 2x LinearSVC, FD iteration <= 3x ``X @ v``, peak memory <= 3x
  ``X.nbytes``) and whether each was met. Figures only: nothing is asserted.

``--write`` writes the figures to ``benchmarks/results/scale.md`` (command and date included).
``--profile`` prints the top functions of the whole fit by cumulative time (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import os
import platform
import pstats
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "scale.md"
NOTES_MARKER = "<!-- notes: kept by --write -->"


def make_data(n: int, m: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Standard normal features; labels 1/0 from a noisy logistic model (~30% positive)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n + m, d))
    beta = 2.0 * rng.standard_normal(d) / np.sqrt(d)
    logit = X[:n] @ beta + 0.5 * rng.standard_normal(n)
    lo, hi = -10.0, 10.0
    for _ in range(60):  # intercept giving a 30% positive rate in expectation
        c = 0.5 * (lo + hi)
        rate = float(np.mean(1.0 / (1.0 + np.exp(-(logit + c)))))
        lo, hi = (c, hi) if rate < 0.3 else (lo, c)
    y_lab = (rng.random(n) < 1.0 / (1.0 + np.exp(-(logit + c)))).astype(np.int64)
    y = np.r_[y_lab, -np.ones(m, dtype=np.int64)]
    return X, y


def best_of(fn, repeat: int = 5) -> float:
    """Fastest of ``repeat`` timed calls (the usual way to time a short kernel)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def traced(fn):
    """Run ``fn``; return (result, seconds, tracemalloc peak bytes during the call)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    out = fn()
    secs = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, secs, peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--m", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=38)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--write", action="store_true", help="write benchmarks/results/scale.md")
    parser.add_argument("--profile", action="store_true", help="cProfile the whole fit")
    args = parser.parse_args(argv)

    from sklearn.svm import LinearSVC

    from reserve.solvers import TTK
    from reserve.solvers._base import canonical_order
    from reserve.solvers._fd import feasible_direction
    from reserve.solvers.constraints import Constraints
    from reserve.solvers.ttk import shifted_svm_start

    n, m, d, k = args.n, args.m, args.d, args.k
    X, y = make_data(n, m, d)
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    say(f"n={n} labelled, m={m} candidates, d={d}, k={k}; positives {y[:n].mean():.1%}")
    say(f"X: {X.shape[0]} x {X.shape[1]} float64, X.nbytes = {X.nbytes / 2**20:.0f} MiB")

    v = np.ones(d)
    t_xv = best_of(lambda: X @ v)
    X_cand_block = X[n:]
    t_xv_cand = best_of(lambda: X_cand_block @ v)
    say(f"one X @ v: full {t_xv * 1e3:.2f} ms, candidate block {t_xv_cand * 1e3:.2f} ms")

    X_lab, y_lab = X[:n], y[:n]
    t_svc = best_of(lambda: LinearSVC().fit(X_lab, y_lab), repeat=2)
    say(f"sklearn LinearSVC().fit on the labelled rows: {t_svc:.2f} s")

    # FD alone, from the shifted-SVM start, on the rows in TTK's canonical order.
    lab, cand = np.flatnonzero(y != -1), np.flatnonzero(y == -1)
    Xl = X[canonical_order(X, lab)]
    Xc = X[canonical_order(X, cand)]
    yl = np.where(y[canonical_order(X, lab)] == 1, 1.0, -1.0)
    t0 = time.perf_counter()
    cons = Constraints.cells(k, Xc.shape[0])
    w0, b0, _ = shifted_svm_start(Xl, yl, Xc, cons.budget, 1.0)
    t_start = time.perf_counter() - t0
    t0 = time.perf_counter()
    fd = feasible_direction(Xl, yl[:, None], Xc, cons, 1.0, w0[None, :], np.array([b0]))
    t_fd = time.perf_counter() - t0
    per_it = t_fd / max(fd.n_iter, 1)
    say(
        f"shifted-SVM start (true-hinge SVM, cutting plane): {t_start:.2f} s; "
        f"FD alone: {fd.n_iter} iterations ({fd.stop_reason}), {t_fd:.2f} s, "
        f"{per_it * 1e3:.2f} ms per iteration, {fd.n_refresh} full refreshes"
    )
    del Xl, Xc

    ratio_full, ratio_cand = per_it / t_xv, per_it / t_xv_cand
    say(f"FD iteration / X @ v: {ratio_full:.2f} (full X), {ratio_cand:.2f} (candidate block)")

    # Timed plainly; then again under tracemalloc (which slows numpy-heavy code) for memory.
    t_fit_fd = best_of(lambda: TTK(k=k, C=1.0, polish=False).fit(X, y), repeat=1)
    fd_fit, t_traced_fd, peak_fd = traced(lambda: TTK(k=k, C=1.0, polish=False).fit(X, y))
    say(
        f"TTK(k={k}, C=1.0, polish=False).fit: {t_fit_fd:.2f} s ({t_traced_fd:.2f} s traced), "
        f"peak traced memory {peak_fd / 2**20:.0f} MiB = {peak_fd / X.nbytes:.2f} x X.nbytes "
        f"({fd_fit.n_iter_} FD iterations)"
    )
    prof = cProfile.Profile() if args.profile else None

    def full_fit():
        if prof is not None:
            prof.enable()
        try:
            return TTK(k=k, C=1.0).fit(X, y)
        finally:
            if prof is not None:
                prof.disable()

    t_fit = best_of(lambda: TTK(k=k, C=1.0).fit(X, y), repeat=1)
    model, t_traced, peak = traced(full_fit)
    say(
        f"TTK(k={k}, C=1.0).fit: {t_fit:.2f} s ({t_traced:.2f} s traced"
        f"{' and profiled' if prof is not None else ''}), peak traced memory "
        f"{peak / 2**20:.0f} MiB = "
        f"{peak / X.nbytes:.2f} x X.nbytes ({model.n_iter_} FD iterations, "
        f"{model.n_swaps_} polish swaps, objective {model.objective_:.6g} vs FD "
        f"{model.fd_objective_:.6g})"
    )
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    say(
        f"process ru_maxrss at the end: {maxrss / 2**20:.0f} MiB = {maxrss / X.nbytes:.2f} x "
        "X.nbytes (includes X, y and the interpreter)"
    )

    say()
    say("| target | figure | met |")
    say("|---|---|---|")
    for name, value, limit in [
        ("whole fit <= 2x LinearSVC", t_fit / t_svc, 2.0),
        ("FD-only fit <= 2x LinearSVC", t_fit_fd / t_svc, 2.0),
        ("FD iteration <= 3x X @ v (full X)", ratio_full, 3.0),
        ("FD iteration <= 3x X @ v (candidate block)", ratio_cand, 3.0),
        ("whole fit peak memory <= 3x X.nbytes (tracemalloc)", peak / X.nbytes, 3.0),
        ("FD-only fit peak memory <= 3x X.nbytes (tracemalloc)", peak_fd / X.nbytes, 3.0),
    ]:
        say(f"| {name} | {value:.2f}x | {'yes' if value <= limit else 'no'} |")

    if prof is not None:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(25)
        say()
        say("Profile of the whole fit (cProfile, cumulative):")
        say("```")
        for line in buf.getvalue().splitlines()[:60]:
            say(line)
        say("```")

    if args.write:
        cmd = ".venv/bin/python -m benchmarks.bench_scale " + " ".join(
            sys.argv[1:] if argv is None else argv
        )
        head = [
            "# TTK at scale",
            "",
            f"Command: `{cmd.strip()}`  ",
            f"Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC  ",
            f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs), "
            f"Python {platform.python_version()}, numpy {np.__version__}",
            "",
            "```",
        ]
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        tmp = RESULTS.with_suffix(".md.tmp")
        body = [ln for ln in lines]
        # The figures are plain text; the target table and profile follow the code block.
        split = body.index("| target | figure | met |") - 1
        text = "\n".join(head + body[:split] + ["```", ""] + body[split + 1 :]) + "\n"
        # Hand-written notes below the marker survive a re-run.
        old = RESULTS.read_text() if RESULTS.exists() else ""
        if NOTES_MARKER in old:
            text += "\n" + old[old.index(NOTES_MARKER) :]
        tmp.write_text(text)
        tmp.replace(RESULTS)
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
