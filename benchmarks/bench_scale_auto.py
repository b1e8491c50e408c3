"""The default selector at scale against the random forest a planner would fit instead.

Usage::

    .venv/bin/python -m benchmarks.bench_scale_auto [--n 100000 --m 1000000 --d 38 --k 1000]
        [--jobs N] [--write]

Same synthetic data as :mod:`benchmarks.bench_scale` (standard normal features, about 30 %
positives from a noisy logistic model). In one run it times

* ``AutoTTK(k, random_state=0, n_jobs=...).fit(X, y)``: ``reserve select``'s default, model
  selection (the cross-validation on a stratified sample of at most 4,000 labelled rows)
  included, with the ``n_jobs`` that ``reserve select`` passes (one per processor, at most
  ``MAX_DEFAULT_JOBS``; ``--jobs`` overrides it): the forest gets two;
* ``RandomForestClassifier(n_estimators=300, n_jobs=2, random_state=0)`` fitted on the same
  labelled rows, plus its ``predict_proba`` of the candidates (what buying its top k needs);

and prints both, their ratio, how much of AutoTTK's fit was the cross-validation, the model
AutoTTK chose and issue 15's target (the default's whole fit no longer than that forest).
Figures only: nothing is asserted. ``--write`` writes them to
``benchmarks/results/scale_auto.md`` (the results file's notes are kept by hand: rewrite
them after a run).
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import time
from pathlib import Path

import numpy as np

from benchmarks.bench_scale import make_data

RESULTS = Path(__file__).resolve().parent / "results" / "scale_auto.md"


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print (and with ``--write`` record) the figures."""
    from sklearn.ensemble import RandomForestClassifier

    from reserve.config import SELECT_DEFAULTS
    from reserve.solvers import AutoTTK, describe_members

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--m", type=int, default=1_000_000)
    parser.add_argument("--d", type=int, default=38)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=SELECT_DEFAULTS.n_jobs)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    X, y = make_data(args.n, args.m, args.d)
    lab = y != -1

    def forest():
        rf = RandomForestClassifier(n_estimators=300, n_jobs=2, random_state=0)
        rf.fit(X[lab], y[lab])
        return rf.predict_proba(X[~lab])[:, 1]

    _, t_rf = _timed(forest)
    auto = AutoTTK(k=args.k, random_state=0, n_jobs=args.jobs)
    est, t_auto = _timed(lambda: auto.fit(X, y))
    lines = [
        f"n = {args.n:,} labelled, m = {args.m:,} candidates, d = {args.d}, k = {args.k}",
        f"RandomForestClassifier(300, n_jobs=2) fit + predict: {t_rf:.1f} s",
        f"AutoTTK(k, n_jobs={args.jobs}) whole fit: {t_auto:.1f} s = {t_auto / t_rf:.2f}x the "
        f"forest (cross-validation {est.cv_runtime_:.1f} s, the rest "
        f"{t_auto - est.cv_runtime_:.1f} s); "
        f"chose {est.best_params_} (cv_note: {est.cv_note_ or 'none'}); the final fit held "
        f"{len(est.members_)} member(s): {describe_members(est.members_)}",
        f"tie-break scores computed for {int(np.isfinite(est.secondary_scores_).sum()):,} of "
        f"{args.m:,} candidates (those whose TTK score another's comes within two tie widths)",
        f"target (default <= forest): {'met' if t_auto <= t_rf else 'NOT met'}",
    ]
    print("\n".join(lines))
    if args.write:
        cmd = "python -m benchmarks.bench_scale_auto " + " ".join(argv or [])
        head = (
            f"# The default selector at scale\n\n`{cmd.strip()}` on {dt.date.today()} "
            f"({platform.python_version()}, {platform.machine()}):\n\n"
        )
        RESULTS.write_text(head + "\n".join(f"- {line}" for line in lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
