"""Compact reserves on the default region: TTK's joint fit against predict-then-optimise.

For each simulation seed of the default region (Virtual Thrush, against the simulated truth)
and each budget ``k``:

* **ttk**: ``reserve select``'s default selector (AutoTTK) chooses its feature map and ``C``
  by cross-validation once, then the chosen pipeline is refitted with the boundary penalty at
  the Cohon calibration's penalties (:func:`reserve.solvers.boundary.calibrate_penalty`: the
  two ends and 0.25x-4x their slope; the knee is marked ``chosen``);
* **rf+scip**: the planner's usual pipeline, a random forest's probability of presence
  (300 trees) as the suitability map and the boundary-penalised selection of the same
  budget solved by SCIP (:func:`reserve.solvers.compact.select_compact`), calibrated the
  same way on its own objective (the summed probability).

Every row records the precision of the selection against the truth, its boundary length
(km; edges on the region's border at prioritizr's edge factor 0.5), its patches (rook
neighbours) and the seconds of that fit.

Run ``python -m benchmarks.bench_boundary --help``; results go to
``benchmarks/results/boundary.md``.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).parent / "results" / "boundary.md"


def _region(seed: int, work: Path, k: int) -> dict[str, Any]:
    """The region's problem for seed ``seed``: rows, labels, truth, adjacency and terms."""
    import pyogrio

    from benchmarks.bench_peers import region_problems
    from reserve.adjacency import EDGE_FACTOR, grid_adjacency
    from reserve.solvers import Boundary

    prob = next(region_problems([seed], work, (k,)))
    cells = sorted((work / f"seed{seed}" / "cache").glob("*.gpkg"))[0]
    units = pyogrio.read_dataframe(cells, layer="planning_units", columns=["cell_id"])
    where = {c: i for i, c in enumerate(units["cell_id"].to_numpy())}
    rows = np.array([where[c] for c in prob.context["cell_id"]])
    adj = grid_adjacency(units.geometry.to_numpy())
    full = Boundary(4 * adj.cell_size - (1 - EDGE_FACTOR) * adj.outer(), adj.matrix())
    return {
        "X": prob.X,
        "y": prob.y,
        "truth": prob.truth,
        "rows": rows,
        "adj": adj,
        "full": full,
        "term": full.take(rows),
    }


def _measure(reg: dict[str, Any], picked: np.ndarray, seconds: float) -> dict[str, Any]:
    from reserve.adjacency import patch_labels

    mask = np.zeros(reg["adj"].n, dtype=bool)
    mask[reg["rows"][picked]] = True
    patches = patch_labels(reg["adj"], mask)
    return {
        "precision": float(reg["truth"][picked].mean()),
        "boundary_km": reg["full"].length(mask) / 1000.0,
        "n_patches": int(patches.max()),
        "largest": int(np.bincount(patches)[1:].max()),
        "seconds": round(seconds, 2),
    }


def ttk_curve(reg: dict[str, Any], k: int, seed: int) -> list[dict[str, Any]]:
    """AutoTTK's chosen pipeline refitted along the Cohon calibration."""
    from sklearn.base import clone

    from reserve.solvers import AutoTTK
    from reserve.solvers.boundary import calibrate_penalty

    X, y = reg["X"], reg["y"]
    auto = AutoTTK(k=k, random_state=seed).fit(X, y)

    def fit(lam: float) -> dict[str, Any]:
        t0 = time.perf_counter()
        pipe = clone(auto.best_estimator_).set_params(ttk__boundary_penalty=lam)
        pipe.fit(X, y, ttk__boundary=reg["term"])
        ttk = pipe.named_steps["ttk"]
        out = _measure(reg, ttk.selected_, time.perf_counter() - t0)
        return {
            "objective": ttk.objective_ - lam * ttk.boundary_length_,
            "boundary": ttk.boundary_length_,
            **out,
        }

    return calibrate_penalty(fit)[1]


def rf_curve(reg: dict[str, Any], k: int, seed: int, time_limit: float) -> list[dict[str, Any]]:
    """A random forest's suitability map, selected with the penalty by SCIP."""
    from sklearn.ensemble import RandomForestClassifier

    from reserve.solvers.boundary import calibrate_penalty
    from reserve.solvers.compact import select_compact

    X, y = reg["X"], reg["y"]
    lab, cand = np.flatnonzero(y != -1), np.flatnonzero(y == -1)
    rf = RandomForestClassifier(n_estimators=300, n_jobs=2, random_state=seed)
    p = rf.fit(X[lab], y[lab]).predict_proba(X[cand])[:, 1]
    term = reg["term"].take(cand)

    def fit(lam: float) -> dict[str, Any]:
        res = select_compact(p, term, k, lam, time_limit=time_limit, max_pool=3000)
        out = _measure(reg, cand[res.selected], res.runtime)
        return {
            "objective": -float(p[res.selected].sum()),
            "boundary": res.boundary,
            "status": res.status,
            **out,
        }

    return calibrate_penalty(fit)[1]


def time_fit(reg: dict[str, Any], k: int, seed: int, penalty: float, reps: int) -> None:
    """Seconds (wall and CPU) of the chosen pipeline's final fit without and with ``penalty``,
    alternating, ``reps`` times each; prints one line per fit and the medians."""
    from sklearn.base import clone

    from reserve.solvers import AutoTTK

    auto = AutoTTK(k=k, random_state=seed).fit(reg["X"], reg["y"])
    seen: dict[float, list[tuple[float, float]]] = {0.0: [], penalty: []}
    for _ in range(reps):
        for lam in seen:
            t0, c0 = time.perf_counter(), time.process_time()
            pipe = clone(auto.best_estimator_).set_params(ttk__boundary_penalty=lam)
            pipe.fit(reg["X"], reg["y"], ttk__boundary=reg["term"])
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            seen[lam].append((wall, cpu))
            ttk = pipe.named_steps["ttk"]
            print(
                f"penalty {lam:.3g}: wall {wall:.2f} s, CPU {cpu:.2f} s, objective "
                f"{ttk.objective_:.6f}, boundary {ttk.boundary_length_ / 1000:.1f} km",
                flush=True,
            )
    for lam, rows in seen.items():
        wall, cpu = np.median(np.asarray(rows), axis=0)
        print(f"median at penalty {lam:.3g}: wall {wall:.2f} s, CPU {cpu:.2f} s")


def _table(records: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| method | k | seed | penalty | chosen | precision | boundary km | patches | "
        "largest | s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['method']} | {r['k']} | {r['seed']} | {r['penalty']:.3g} | "
            f"{'**yes**' if r['chosen'] else ''} | {r['precision']:.3f} | "
            f"{r['boundary_km']:.1f} | {r['n_patches']} | {r['largest']} | {r['seconds']} |"
        )
    return lines


def _summary(records: list[dict[str, Any]]) -> list[str]:
    """Per method and k, the chosen (knee) fit against the unpenalised one, means over seeds."""
    lines = [
        "| method | k | seeds | precision at 0 | at the knee | boundary km at 0 | "
        "at the knee | patches at 0 | at the knee |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r["method"], r["k"]) for r in records})
    for method, k in keys:
        rs = [r for r in records if r["method"] == method and r["k"] == k]
        zero = [r for r in rs if r["penalty"] == 0.0]
        knee = [r for r in rs if r["chosen"]]
        if not zero or len(zero) != len(knee):
            continue

        def m(rows: list[dict[str, Any]], key: str) -> float:
            return float(np.mean([r[key] for r in rows]))

        lines.append(
            f"| {method} | {k} | {len(zero)} | {m(zero, 'precision'):.3f} | "
            f"{m(knee, 'precision'):.3f} | {m(zero, 'boundary_km'):.1f} | "
            f"{m(knee, 'boundary_km'):.1f} | {m(zero, 'n_patches'):.1f} | "
            f"{m(knee, 'n_patches'):.1f} |"
        )
    return lines


def _multiples(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each record with ``multiple``: its penalty over Cohon's (the curve's middle fit), so
    that seeds line up although their penalties differ; the large end is ``inf``."""
    out = []
    for key in sorted({(r["method"], r["k"], r["seed"]) for r in records}):
        rs = sorted(
            (r for r in records if (r["method"], r["k"], r["seed"]) == key),
            key=lambda r: float(r["penalty"]),
        )
        cohon = float(rs[len(rs) // 2]["penalty"]) if len(rs) == 7 else float("nan")
        for i, r in enumerate(rs):
            mult = float(r["penalty"]) / cohon if i < len(rs) - 1 else float("inf")
            out.append({**r, "multiple": round(mult, 3)})
    return out


def target_table(records: list[dict[str, Any]]) -> list[str]:
    """Per method, k and multiple of Cohon's penalty: means over seeds against no penalty.

    The issue's target (k = 30): a penalty that at least halves the boundary, leaves fewer
    than 10 patches and costs at most 0.05 of precision, means over the seeds.
    """
    recs = _multiples(records)
    lines = [
        "| method | k | x Cohon | seeds | precision - at 0 | boundary / at 0 | patches | "
        "target met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method, k, mult in sorted({(r["method"], r["k"], r["multiple"]) for r in recs}):
        rows = [r for r in recs if (r["method"], r["k"], r["multiple"]) == (method, k, mult)]
        zero = {
            r["seed"]: r for r in recs if (r["method"], r["k"], r["multiple"]) == (method, k, 0.0)
        }
        rows = [r for r in rows if r["seed"] in zero]
        if not rows or mult == 0.0:
            continue
        dp = np.mean([float(r["precision"]) - float(zero[r["seed"]]["precision"]) for r in rows])
        ratio = np.mean(
            [float(r["boundary_km"]) / float(zero[r["seed"]]["boundary_km"]) for r in rows]
        )
        patches = np.mean([float(r["n_patches"]) for r in rows])
        met = ratio <= 0.5 and patches < 10 and dp >= -0.05
        lines.append(
            f"| {method} | {k} | {mult:g} | {len(rows)} | {dp:+.3f} | {ratio:.2f} | "
            f"{patches:.1f} | {'yes' if met else 'no'} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--ks", default="30,100")
    parser.add_argument(
        "--work",
        type=Path,
        default=Path("bench_boundary_regions"),
        help="Folder for the simulated regions (reused across runs).",
    )
    parser.add_argument(
        "--time-limit", type=float, default=30.0, help="SCIP seconds per rf+scip selection."
    )
    parser.add_argument("--methods", default="ttk,rf+scip")
    parser.add_argument("--csv", type=Path, default=None, help="Also append every row here.")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--from-csv",
        type=Path,
        default=None,
        help="Write the report from these records instead of running.",
    )
    parser.add_argument(
        "--time-penalty",
        type=float,
        default=None,
        help="Only time the final fit without and with this penalty (first seed and k).",
    )
    parser.add_argument("--reps", type=int, default=3, help="Repetitions of --time-penalty.")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    if args.from_csv is not None:
        with args.from_csv.open() as fh:
            records = [
                {**r, "chosen": r["chosen"] == "True", "penalty": float(r["penalty"])}
                for r in csv.DictReader(fh)
            ]
        _report(args.out, argv, records)
        return 0
    if args.time_penalty is not None:
        seed, k = int(args.seeds.split(",")[0]), int(args.ks.split(",")[0])
        time_fit(_region(seed, args.work, k), k, seed, args.time_penalty, args.reps)
        return 0
    records = []
    methods = args.methods.split(",")
    for seed in (int(s) for s in args.seeds.split(",")):
        for k in (int(v) for v in args.ks.split(",")):
            reg = _region(seed, args.work, k)
            for method in methods:
                rows = (
                    ttk_curve(reg, k, seed)
                    if method == "ttk"
                    else rf_curve(reg, k, seed, args.time_limit)
                )
                new = [{"method": method, "k": k, "seed": seed, **r} for r in rows]
                records.extend(new)
                for line in _table(new)[2:]:
                    print(line, flush=True)
                if args.csv is not None:
                    _append(args.csv, new)
    _report(args.out, argv, records)
    return 0


def _report(out: Path, argv: list[str] | None, records: list[dict[str, Any]]) -> None:
    for r in records:
        for key in ("precision", "boundary_km"):
            r[key] = float(r[key])
        for key in ("n_patches", "largest", "k", "seed"):
            r[key] = int(float(r[key]))
    text = [
        "# Compact reserves: boundary penalty on the default region",
        "",
        f"Command: `python -m benchmarks.bench_boundary {' '.join(argv or [])}`".rstrip(),
        "",
        "## The knee (means over seeds)",
        "",
        *_summary(records),
        "",
        "## Each multiple of Cohon's penalty against none (means over seeds)",
        "",
        *target_table(records),
        "",
        "## Every fit",
        "",
        *_table(records),
        "",
    ]
    out.write_text("\n".join(text))


def _append(path: Path, rows: list[dict[str, Any]]) -> None:
    fields = [
        "method",
        "k",
        "seed",
        "penalty",
        "chosen",
        "precision",
        "boundary_km",
        "n_patches",
        "largest",
        "seconds",
        "objective",
        "boundary",
        "status",
    ]
    new = not path.exists()
    with path.open("a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    raise SystemExit(main())
