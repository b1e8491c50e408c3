"""Coverage of the expected occupied cells' 90 % interval against the truth on the default region.

``reserve select`` states, for every run, how many of the chosen cells the species is expected
to occupy, with a 90 % interval (``run_summary``: ``expected_occupied``,
``expected_occupied_low``, ``expected_occupied_high``; :func:`reserve.result.assess_evidence`
with :class:`reserve.occupancy.OccupancyCalibration`). On the default region the truth is
known, so the statement can be checked: for every simulation seed the species and the birders
are redrawn on the shipped landscape
(:func:`benchmarks.bench_default_region.simulated_region`, ingested once per seed and cached in
``--work``), and for both virtual species and every budget ``k``,
:func:`reserve.select.select_reserve` runs with its defaults (``seed=0``, ``n_jobs=1``, no
outputs). Each run records the stated count and interval, the true number of occupied chosen
cells (:func:`reserve.evaluate.evaluate_selection`) and whether the interval covers it.

A second figure checks the per-cell ``probability`` column (the calibrated probability of
presence) against the truth: a reliability table (deciles of probability against the share of
truly occupied cells) and the Brier score, on the unsurveyed candidate cells of every run, and
the same on the chosen cells, with diagnostics of the count (bias by kind of chosen cell, the
chosen cells' scores beyond the calibration cells', the fitted detection against the one the
truth implies).

Run: ``python -m benchmarks.bench_coverage [--seeds 0-9] [--budgets 10,30,100] [--csv FILE]``
(writes ``benchmarks/results/coverage.md``; figures, no assertions). ``--from-csv FILE``
writes the report from the records of an earlier run (with the candidates' arrays saved
beside it) without selecting anything; with ``--calibration score|links|score+rank`` it first
recomputes every run's count, interval and probabilities with that occupancy calibration
(:func:`recalibrate`: the selection does not depend on it, so before and after are compared
on the same selections).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reserve.config import DEFAULT_REGION, SPECIES_LABEL_PREFIX, species_slug
from reserve.default_region import FILES
from reserve.evaluate import evaluate_selection, read_truth
from reserve.io.atomic import replacing
from reserve.occupancy import LINKS

OUT = Path(__file__).resolve().parent / "results" / "coverage.md"
WORK = Path(os.environ.get("TMPDIR", "/tmp")) / "reserve-bench-coverage"
#: Columns of the per-run records, in the CSV's order.
FIELDS = (
    "seed",
    "species",
    "k",
    "expected",
    "low",
    "high",
    "true",
    "covered",
    "signal",
    "check_auc",
    "seconds",
    "detection",
    "n_known_detection",
    "n_surveyed_no_detection",
    "n_unsurveyed",
    "expected_unsurveyed",
    "true_unsurveyed",
    "expected_no_detection",
    "true_no_detection",
    "beyond_calibration",
    "n_calibration",
    "detection_truth",
    "psi_unsurveyed",
)
#: Columns of the report's table of runs.
RUN_COLUMNS = [
    "seed",
    "species",
    "k",
    "expected",
    "low",
    "high",
    "true",
    "covered",
    "signal",
    "check_auc",
    "detection",
    "seconds",
]
#: Quantities pooled over runs for the calibration figure (one array per run).
CALIB_KEYS = ("prob", "occupied", "psi", "chosen", "surveyed", "score", "n_checklists", "label")
#: ``--calibration``: what ``--from-csv`` recomputes the counts with (``library``: none).
CALIBRATIONS = ("library", "score", "links", "score+rank")


def parse_seeds(text: str) -> list[int]:
    """Seeds from ``"0-9"``, ``"0,3,5"`` or a mix (``"0-2,7"``).

    Examples
    --------
    >>> parse_seeds("0-3,7")
    [0, 1, 2, 3, 7]
    """
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        seeds += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return seeds


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=parse_seeds, default=parse_seeds("0-9"))
    parser.add_argument(
        "--budgets", type=lambda s: [int(k) for k in s.split(",")], default=[10, 30, 100]
    )
    parser.add_argument(
        "--species", type=lambda s: s.split(","), default=list(DEFAULT_REGION.species_all)
    )
    parser.add_argument(
        "--csv",
        type=Path,
        default=None,
        help="write every record as its run ends (and the calibration arrays beside it, FILE.npz)",
    )
    parser.add_argument(
        "--from-csv",
        type=Path,
        default=None,
        help="report from an earlier --csv without selecting anything",
    )
    parser.add_argument(
        "--calibration",
        choices=CALIBRATIONS,
        default="library",
        help="with --from-csv: recompute the counts with the old one-link calibration "
        "(score), the link average (links) or the average of the score and rank links",
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=WORK,
        help="cache of the simulated regions (one ingest per seed)",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    return parser.parse_args(argv)


def cached_region(seed: int, work: Path) -> tuple[Path, Path]:
    """Planning units and folder of simulation ``seed``, ingested once and kept in ``work``."""
    from benchmarks.bench_default_region import simulated_region

    folder = work / f"seed{seed}"
    cached = sorted((folder / "cache").glob("*.gpkg")) if folder.is_dir() else []
    if cached:
        return cached[0], folder
    if folder.exists():  # an interrupted simulation: start it again
        shutil.rmtree(folder)
    work.mkdir(parents=True, exist_ok=True)
    cells, folder, _, _ = simulated_region(seed, work)
    return Path(cells), folder


def truth_path(folder: Path, species: str) -> Path:
    """The simulation's truth file of ``species``."""
    i = DEFAULT_REGION.species_all.index(species)
    return folder / FILES["truth" if i == 0 else f"truth_{species_slug(species)}"]


def _detection_from_truth(n: np.ndarray, detected: np.ndarray, occupied: np.ndarray) -> float:
    """Per-checklist detection the truth implies: ML of ``1 - (1-p)**n`` on occupied cells."""
    from scipy.optimize import minimize_scalar

    n, y = n[occupied], detected[occupied]
    if n.size == 0:
        return float("nan")

    def nll(p: float) -> float:
        d = np.clip(-np.expm1(n * np.log1p(-p)), 1e-12, 1 - 1e-12)
        return -float(np.where(y, np.log(d), np.log1p(-d)).sum())

    return float(minimize_scalar(nll, bounds=(1e-4, 1 - 1e-4), method="bounded").x)


def run_record(res: Any, species: str, truth_file: Path) -> tuple[dict, dict]:
    """The figures of one selection against the truth, and its calibration arrays.

    Parameters
    ----------
    res : reserve.result.SelectionResult
    species : str
    truth_file : Path
        The simulation's truth of the species (``cell_id, psi, occupied``).

    Returns
    -------
    (dict, dict)
        The record (the :data:`FIELDS` that a run determines) and, over the candidate cells,
        the arrays of :data:`CALIB_KEYS`.
    """
    s, pu = res.summary, res.planning_units
    label = pu[SPECIES_LABEL_PREFIX + species_slug(species)].to_numpy()
    n_chk = np.nan_to_num(pu["n_checklists"].to_numpy(dtype=np.float64))
    cand = (pu["role"].astype(str).to_numpy() == "candidate") & ~pu["locked_out"].to_numpy(bool)
    score, prob = pu["score"].to_numpy(np.float64), pu["probability"].to_numpy(np.float64)
    chosen = pu["selected"].to_numpy(bool)
    t = read_truth(truth_file).reindex(pu["cell_id"].to_numpy())
    occupied = t["occupied"].fillna(False).to_numpy(bool)
    surveyed = np.isin(label, (0, 1)) & (n_chk >= 1)
    calib = cand & surveyed & np.isfinite(score)
    unsurveyed, no_det = chosen & ~surveyed, chosen & surveyed & (label == 0)
    top = score[calib].max() if calib.any() else np.nan
    true = evaluate_selection(pu.loc[chosen, "cell_id"].to_numpy(), truth_file)["n_occupied"]
    rec = {
        "expected": float(s["expected_occupied"]),
        "low": float(s["expected_occupied_low"]),
        "high": float(s["expected_occupied_high"]),
        "true": true,
        "signal": s["signal"],
        "check_auc": float(s.get("check_auc", np.nan)),
        "detection": float(s["detection_per_checklist"]),
        "n_known_detection": int((chosen & (label == 1)).sum()),
        "n_surveyed_no_detection": int(no_det.sum()),
        "n_unsurveyed": int(unsurveyed.sum()),
        "expected_unsurveyed": float(prob[unsurveyed].sum()),
        "true_unsurveyed": int(occupied[unsurveyed].sum()),
        "expected_no_detection": float(prob[no_det].sum()),
        "true_no_detection": int(occupied[no_det].sum()),
        "beyond_calibration": int((chosen & (score > top)).sum()),
        "n_calibration": int(calib.sum()),
        "detection_truth": _detection_from_truth(n_chk[calib], label[calib] == 1, occupied[calib]),
        "psi_unsurveyed": float(t["psi"].to_numpy()[unsurveyed].sum()),
    }
    rec["covered"] = bool(rec["low"] <= true <= rec["high"])
    arrays = {
        "prob": prob[cand],
        "occupied": occupied[cand],
        "psi": t["psi"].to_numpy()[cand],
        "chosen": chosen[cand],
        "surveyed": surveyed[cand],
        "score": score[cand],
        "n_checklists": n_chk[cand],
        "label": label[cand],
    }
    return rec, arrays


def _calibrator(name: str, slope: bool) -> Any:
    """The occupancy calibration ``--calibration name`` stands for."""
    from reserve.occupancy import LinkAverage, OccupancyCalibration

    if name == "score":
        return OccupancyCalibration(slope=slope)
    return LinkAverage(slope=slope, links=("score", "rank") if name == "score+rank" else LINKS)


def recalibrate(rec: dict, arrays: dict, name: str) -> tuple[dict, dict]:
    """A run's count, interval and probabilities recomputed with another calibration.

    The selection does not depend on the calibration, so the stored candidates (their
    scores, labels and checklists) suffice: the calibration is fitted on the surveyed ones,
    as :func:`reserve.result.assess_evidence` does when the private-land check is available
    (a run without it is returned unchanged).
    """
    from reserve.confidence import LEVEL

    if name == "library" or not np.isfinite(float(rec["check_auc"])):
        return rec, arrays
    s, n, label = arrays["score"], arrays["n_checklists"], arrays["label"]
    finite = np.isfinite(s)
    calib = arrays["surveyed"] & finite
    cal = _calibrator(name, rec["signal"] != "none")
    cal.fit(s[calib], n[calib], label[calib] == 1, reference=s[finite])
    known_n = np.where(np.isin(label, (0, 1)), n, 0.0)
    prob = np.full(s.shape, np.nan)
    prob[finite] = cal.posterior(s[finite], known_n[finite], (label == 1)[finite])
    ch = arrays["chosen"]
    e, lo, hi = cal.expected_count(s[ch], known_n[ch], (label == 1)[ch], LEVEL, 0)
    un, no_det = ch & ~arrays["surveyed"], ch & arrays["surveyed"] & (label == 0)
    out = {
        **rec,
        "expected": e,
        "low": lo,
        "high": hi,
        "detection": cal.detection_,
        "covered": bool(lo <= float(rec["true"]) <= hi),
        "expected_unsurveyed": float(prob[un].sum()),
        "expected_no_detection": float(prob[no_det].sum()),
    }
    return out, {**arrays, "prob": prob}


def run_seed(
    seed: int, budgets: list[int], species_list: list[str], work: Path
) -> list[tuple[dict, dict]]:
    """Every species and budget of one simulation seed: (record, calibration arrays) each."""
    from reserve.select import select_reserve

    cells, folder = cached_region(seed, work)
    out = []
    for species in species_list:
        for k in budgets:
            t0 = time.perf_counter()
            res = select_reserve(k, cells, species=species, seed=0, n_jobs=1)
            seconds = time.perf_counter() - t0
            rec, arrays = run_record(res, species, truth_path(folder, species))
            rec = {"seed": seed, "species": species, "k": k, **rec, "seconds": seconds}
            print(
                f"seed {seed} {species} k {k:>3}: expected {rec['expected']:.1f} "
                f"[{rec['low']:.0f}, {rec['high']:.0f}], true {rec['true']} "
                f"({'covered' if rec['covered'] else 'MISSED'}; signal {rec['signal']}; "
                f"{seconds:.0f} s)",
                flush=True,
            )
            out.append(({f: rec[f] for f in FIELDS}, arrays))
    return out


def coverage_rows(records: list[dict], by: str | None = None) -> list[dict]:
    """Coverage, bias (expected - true) and interval width, overall or per value of ``by``.

    Parameters
    ----------
    records : list of dict
        Runs with ``expected``, ``low``, ``high``, ``true`` (and the key ``by``).
    by : str, optional
        Group by this key (in order of first appearance); None: one row for all.

    Returns
    -------
    list of dict
        ``group``, ``n``, ``covered`` (runs), ``coverage`` (share), ``bias``, ``width``,
        ``expected``, ``true`` (means), ``below`` and ``above`` (runs whose truth lies
        below / above the interval).

    Examples
    --------
    >>> recs = [{"expected": 5.0, "low": 3, "high": 7, "true": 6},
    ...         {"expected": 5.0, "low": 3, "high": 7, "true": 9}]
    >>> row = coverage_rows(recs)[0]
    >>> row["coverage"], row["bias"], row["width"], row["above"]
    (0.5, -2.5, 4.0, 1)
    """
    groups: dict[Any, list[dict]] = {}
    for r in records:
        groups.setdefault("all" if by is None else r[by], []).append(r)
    rows = []
    for group, rs in groups.items():
        e, lo, hi, t = (
            np.array([float(r[f]) for r in rs]) for f in ("expected", "low", "high", "true")
        )
        covered = (lo <= t) & (t <= hi)
        rows.append(
            {
                "group": group,
                "n": len(rs),
                "covered": int(covered.sum()),
                "coverage": float(covered.mean()),
                "bias": float((e - t).mean()),
                "width": float((hi - lo).mean()),
                "expected": float(e.mean()),
                "true": float(t.mean()),
                "below": int((t < lo).sum()),
                "above": int((t > hi).sum()),
            }
        )
    return rows


def reliability(prob: np.ndarray, occupied: np.ndarray, bins: int = 10) -> list[dict]:
    """Deciles (``bins`` quantile groups) of probability against the occupied share.

    Examples
    --------
    >>> p = np.array([0.1, 0.1, 0.9, 0.9])
    >>> [(r["n"], r["mean_probability"], r["occupied_share"])
    ...  for r in reliability(p, np.array([0, 0, 1, 0]), bins=2)]
    [(2, 0.1, 0.0), (2, 0.9, 0.5)]
    """
    ok = np.isfinite(prob)
    prob, occupied = prob[ok], np.asarray(occupied, dtype=np.float64)[ok]
    order = np.argsort(prob, kind="stable")
    rows = []
    for part in np.array_split(order, bins):
        if part.size:
            rows.append(
                {
                    "n": int(part.size),
                    "low": float(prob[part].min()),
                    "high": float(prob[part].max()),
                    "mean_probability": float(prob[part].mean()),
                    "occupied_share": float(occupied[part].mean()),
                }
            )
    return rows


def brier(prob: np.ndarray, occupied: np.ndarray) -> float:
    """Mean squared difference between probability and occupancy (finite probabilities)."""
    ok = np.isfinite(prob)
    return float(np.mean((prob[ok] - np.asarray(occupied, dtype=np.float64)[ok]) ** 2))


def pool(arrays: list[dict]) -> dict[str, np.ndarray]:
    """The calibration arrays of every run, concatenated."""
    if not arrays:
        return {key: np.array([]) for key in CALIB_KEYS}
    return {key: np.concatenate([a[key] for a in arrays]) for key in CALIB_KEYS}


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _table(rows: list[dict], columns: list[str]) -> list[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(r[c]) for c in columns) + " |" for r in rows]
    return lines


def _coverage_section(records: list[dict]) -> list[str]:
    cols = [
        "group",
        "n",
        "covered",
        "coverage",
        "below",
        "above",
        "bias",
        "width",
        "expected",
        "true",
    ]
    rows = coverage_rows(records) + coverage_rows(records, "k") + coverage_rows(records, "species")
    lines = [
        "## Coverage of the 90 % interval of the expected occupied chosen cells",
        "",
        "bias = mean (expected - true); width = mean (high - low); below / above: runs "
        "whose true count lies below / above the interval.",
        "",
    ]
    lines += _table(rows, cols)
    lines += ["", "By signal (the run's verdict):", ""]
    lines += _table(coverage_rows(records, "signal"), cols)
    return lines


def _parts_row(k: Any, rs: list[dict]) -> dict:
    """Means over the runs ``rs`` of the count's parts (see :func:`_parts_section`)."""

    def m(key: str) -> float:
        return float(np.mean([float(r[key]) for r in rs]))

    return {
        "k": k,
        "known detection": m("n_known_detection"),
        "no detection: n": m("n_surveyed_no_detection"),
        "expected": m("expected_no_detection"),
        "true": m("true_no_detection"),
        "unsurveyed: n": m("n_unsurveyed"),
        "expected ": m("expected_unsurveyed"),
        "true psi sum": m("psi_unsurveyed"),
        "true ": m("true_unsurveyed"),
        "beyond calibration": m("beyond_calibration"),
        "calibration cells": m("n_calibration"),
        "p fitted": m("detection"),
        "p truth": m("detection_truth"),
    }


def _parts_section(records: list[dict]) -> list[str]:
    """Where the count's bias comes from: each kind of chosen cell, expected against true."""
    ks = dict.fromkeys(r["k"] for r in records)
    groups = [("all", records), *((k, [r for r in records if r["k"] == k]) for k in ks)]
    rows = [_parts_row(k, rs) for k, rs in groups]
    lines = [
        "## Diagnosis: the count by kind of chosen cell (means over runs)",
        "",
        "Known detection: occupied for certain. No detection: surveyed private cells "
        "without a detection (their posterior). Unsurveyed: the calibrated probability; "
        "`true psi sum` is the simulation's occupancy probability summed over them (the "
        "count a perfect model expects). `beyond calibration`: chosen cells scored above "
        "every calibration cell. `p fitted`: the calibration's detection per checklist; "
        "`p truth`: the constant per-checklist detection the truth implies on the "
        "calibration cells (ML of 1 - (1 - p)^n on the truly occupied ones).",
        "",
    ]
    return lines + _table(rows, list(rows[0]))


def _calibration_section(arrays: list[dict]) -> list[str]:
    pooled = pool(arrays)
    un = ~pooled["surveyed"]
    lines = [
        "## Calibration of the per-cell `probability` against the truth",
        "",
        "Pooled over the runs (each run's candidate cells; a cell appears once per run).",
    ]
    cols = ["n", "low", "high", "mean_probability", "occupied_share"]
    for name, mask in (
        ("unsurveyed candidate cells", un),
        ("chosen unsurveyed cells", un & pooled["chosen"]),
        (
            "surveyed candidate cells without a detection",
            pooled["surveyed"] & (pooled["label"] == 0),
        ),
    ):
        p, occ = pooled["prob"][mask], pooled["occupied"][mask]
        if not p.size:
            continue
        psi = pooled["psi"][mask]
        lines += [
            "",
            f"### {name}",
            "",
            f"Brier score {brier(p, occ):.4f} (the truth's psi: {brier(psi, occ):.4f}; "
            f"the constant mean occupancy: {brier(np.full(occ.size, occ.mean()), occ):.4f})"
            f"; mean probability {np.nanmean(p):.3f}, occupied share {occ.mean():.3f}, "
            f"mean true psi {psi.mean():.3f}. Deciles of probability:",
            "",
        ]
        lines += _table(reliability(p, occ), cols)
    return lines


def report(records: list[dict], arrays: list[dict], command: str) -> str:
    """The markdown report (see the module)."""
    lines = [
        "# Coverage of the expected occupied cells against the truth (default region)",
        "",
        f"`{command}`",
        "",
        f"{datetime.date.today().isoformat()}, {platform.node()}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}. Each simulation seed redraws both virtual species "
        "and the birders on the shipped landscape; `select_reserve(k, cells, "
        "species=..., seed=0, n_jobs=1)`, defaults otherwise. Requirement: coverage "
        ">= 0.90.",
        "",
    ]
    lines += [*_coverage_section(records), "", *_parts_section(records), ""]
    lines += [*_calibration_section(arrays), "", "## Runs", ""]
    lines += _table(records, RUN_COLUMNS)
    return "\n".join(lines) + "\n"


def _write_csv(path: Path, records: list[dict], arrays: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(records)
    runs = np.concatenate([np.full(a["prob"].size, i) for i, a in enumerate(arrays)])
    np.savez_compressed(path.with_suffix(".npz"), run=runs, **pool(arrays))


def _read_csv(path: Path) -> tuple[list[dict], list[dict]]:
    table = pd.read_csv(path)
    records = table.to_dict("records")
    data = np.load(path.with_suffix(".npz"))
    arrays = [{key: data[key][data["run"] == i] for key in CALIB_KEYS} for i in range(len(records))]
    return records, arrays


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    args = parse_args(argv)
    command = "python -m benchmarks.bench_coverage " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    if args.from_csv is not None:
        records, arrays = _read_csv(args.from_csv)
        redone = [recalibrate(r, a, args.calibration) for r, a in zip(records, arrays, strict=True)]
        records, arrays = [r for r, _ in redone], [a for _, a in redone]
    else:
        records, arrays = [], []
        for seed in args.seeds:
            for rec, arr in run_seed(seed, args.budgets, args.species, args.work):
                records.append(rec)
                arrays.append(arr)
                if args.csv is not None:
                    _write_csv(args.csv, records, arrays)
    text = report(records, arrays, command.strip())
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with replacing(args.out, ".md") as tmp:
        tmp.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
