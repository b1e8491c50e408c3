"""The peers benchmark with two more weights of the forest in AutoTTK's ensemble.

Usage::

    .venv/bin/python -m benchmarks.bench_forest_weight --suites uci --splits 5 \\
        --methods forest_half --reference forest_half --csv FILE [bench_peers options]

Every option is :mod:`benchmarks.bench_peers`'s; this script adds two methods:

* ``forest_always``: AutoTTK's own choice of members (its cross-validation, as
  ``reserve select``'s default), with the ``forest`` map's grid point added when the
  one-standard-error rule left it out (the forest always joins, as one member);
* ``forest_half``: the same, with the forest's point repeated once per TTK member, so that
  the forest weighs as much as all of them together in :class:`reserve.solvers.MapMean`.

Both refit the chosen members with ``AutoTTK(members=...)`` (no second cross-validation),
so their selections differ from ``auto``'s only by the forest's weight. Neither is the
default: on german_numer, where the random forest leads, they gain there and lose elsewhere
(``benchmarks/results/forest_weight.md``, the file this script writes).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import bench_peers

OUT = Path(__file__).resolve().parent / "results" / "forest_weight.md"


def forest_members(members: tuple[tuple, ...], forest: tuple, weight: str) -> list[tuple]:
    """``members`` without the forest's point, then that point once (``"always"``) or once
    per remaining member (``"half"``).

    Examples
    --------
    >>> f = ("forest", 0.1, "auto")
    >>> both = forest_members((("linear", 1.0, "auto"), f, ("stack", 0.1, "auto")), f, "half")
    >>> [model for model, _, _ in both]
    ['linear', 'stack', 'forest', 'forest']
    >>> forest_members((("linear", 1.0, "auto"),), f, "always")
    [('linear', 1.0, 'auto'), ('forest', 0.1, 'auto')]
    """
    ttk = [tuple(m) for m in members if m[0] != "forest"]
    return ttk + [tuple(forest)] * (len(ttk) if weight == "half" else 1)


def weighted(weight: str) -> bench_peers.FitAndRank:
    """A peers method: AutoTTK's members, the forest weighed as ``weight`` says."""

    def fit_and_rank(X: np.ndarray, y: np.ndarray, k: int, seed: int, **context: Any):
        from reserve.solvers import AutoTTK

        effort = context.get("effort_columns")
        chosen = AutoTTK(k=k, random_state=seed, effort_columns=effort).fit(X, y)
        points = [p for p in chosen.cv_results_["params"] if p["model"] == "forest"]
        if not points:  # no forest in the grid: the default's own selection
            return np.asarray(chosen.selected_, dtype=np.int64)
        forest = (points[0]["model"], points[0]["C"], points[0]["class_weight"])
        members = forest_members(chosen.members_, forest, weight)
        est = AutoTTK(k=k, random_state=seed, effort_columns=effort, members=members)
        return np.asarray(est.fit(X, y).selected_, dtype=np.int64)

    return fit_and_rank


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: :func:`benchmarks.bench_peers.main` with the two methods,
    writing ``OUT`` unless ``--out`` is given (never the peers benchmark's own file)."""
    methods = dict(bench_peers.METHODS)
    methods["forest_always"] = weighted("always")
    methods["forest_half"] = weighted("half")
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--out" not in argv:
        argv += ["--out", str(OUT)]
    return bench_peers.main(argv, methods=methods)


if __name__ == "__main__":
    sys.exit(main())
