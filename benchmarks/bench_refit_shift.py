"""How far a refit moves the candidates' probabilities: the constants of the surveys' value.

:class:`reserve.surveys.Habitat` approximates the refit that new survey labels bring
(``reserve select --surveys``, :func:`reserve.select.reselect`): a label at cell ``j`` moves
cell ``i``'s probability of presence by ``strength * w_ij (y_j - p_j) / (mass_i + prior)``,
``w_ij`` a Gaussian kernel in standardised habitat features whose width is a share of the
median distance from a candidate to its 10th nearest labelled cell. This benchmark measures
the real movement and fits the three constants to it.

For each case (simulation seed, virtual species, budget ``k`` on the default region, the run
before surveys cached as :mod:`benchmarks.bench_surveys` caches it), six plans are surveyed
with the simulation's own detection and the run is refitted on their labels: M = 20 cells
drawn at random, the suggestions by their own outcome alone (no refit term), farthest-point
coverage of the habitat and the top of the ranking, and M = 50 at random and by uncertainty.
Every unsurveyed candidate's change in probability (4,000 drawn and every cell within 0.3 of
the k-th probability) is the response. For each width share and prior the strength is the
least-squares slope through the origin of the response on the kernel's predicted shift; the
report gives the share of the response's variance explained, pooled and leaving each case
out (the strength refitted on the others), and the median correlation per refit.

Run: ``python -m benchmarks.bench_refit_shift [--cases 0:Virtual_Quail:100,...] [--csv F]``
(writes ``benchmarks/results/refit_shift.md``; figures, no assertions). ``--from-npz F``
refits the constants on the responses saved by an earlier run.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.bench_coverage import WORK, cached_region
from benchmarks.bench_surveys import load_case, plans, survey
from reserve.io.atomic import replacing
from reserve.select import reselect
from reserve.surveys import (
    REFIT_NEIGHBOURS,
    REFIT_PRIOR,
    REFIT_STRENGTH,
    REFIT_WIDTH,
    Habitat,
    survey_detection,
)

OUT = Path(__file__).resolve().parent / "results" / "refit_shift.md"
CASES = ",".join(
    f"{seed}:{species}:{k}"
    for seed in (10, 11, 12)
    for species in ("Virtual_Quail", "Virtual_Thrush")
    for k in (30, 100)
)
PLANS = ((10, "random"), (10, "suggested"), (20, "random"), (20, "suggested"), (20, "top"))
PLANS += ((50, "random"), (50, "uncertain"), (50, "top"))
WIDTHS = (0.5, 0.7, 1.0, 1.4)
PRIORS = (0.3, 1.0, 3.0, 10.0)
#: A design measured: the strength at M surveys ``strength * (M / PLAN) ** exponent``.
EXPONENTS = (0.0, 0.5, 1.0)
PLAN = 20


def _case(text: str) -> tuple[int, str, int]:
    seed, species, k = text.split(":")
    return int(seed), species.replace("_", " "), int(k)


def responses(seed: int, species: str, k: int, work: Path) -> list[dict]:
    """Every plan's refit of one case: the surveyed cells, their outcome and the response."""
    cells, folder = cached_region(seed, work)
    case = load_case(seed, species, k, cells, folder)
    res, problem = case.res, case.problem
    free = res.ranking[~res.ranking["locked_in"].astype(bool)].reset_index(drop=True)
    habitat = Habitat.from_problem(problem, free["cell_id"].to_numpy())
    p = np.nan_to_num(free["probability"].to_numpy(dtype=np.float64))
    d = survey_detection(res.summary["detection_per_checklist"])
    kth = np.sort(p)[-k]
    labelled = _labelled(problem)
    out = []
    for m, plan in PLANS:
        surveyed = np.asarray(plans(res, m, seed, species)[plan][0])
        results = survey(surveyed, case.truth, case.draws, case.p_check)
        new = reselect(case.opts, case.units, results, res.estimator, str(cells)).ranking
        after = new.set_index("cell_id")["probability"].reindex(free["cell_id"]).to_numpy()
        js = pd.Index(free["cell_id"]).get_indexer(surveyed)
        others = np.setdiff1d(np.arange(p.size), js)
        pick = np.random.default_rng([seed, k, m]).choice(others, min(4000, others.size), False)
        rows = np.union1d(pick, others[np.abs(p[others] - kth) <= 0.3])
        miss = p[js] * (1 - d) / (1 - p[js] * d)
        out.append(
            {
                "case": f"{seed}:{species}:{k}",
                "plan": f"{plan} M={m}",
                "m": m,
                "innovation": np.where(results.detected, 1.0, miss) - p[js],
                "response": np.nan_to_num(after[rows]) - p[rows],
                "Z_rows": habitat.Z[rows],
                "Z_surveyed": habitat.Z[js],
                "Z_labelled": labelled,
                "spread": habitat.width / REFIT_WIDTH,
            }
        )
        print(f"{out[-1]['case']} {out[-1]['plan']}: {results.detected.sum()} detected", flush=True)
    return out


def _labelled(problem) -> np.ndarray:
    """The standardised features of the cells the run learned from (as the habitat's)."""
    cells = problem.units["cell_id"].to_numpy()
    full = Habitat.from_problem(problem, cells)
    labelled = problem.train if problem.learned is None else problem.train | problem.learned
    return full.Z[labelled]


def _sq(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    return np.maximum((A**2).sum(1)[:, None] - 2 * A @ B.T + (B**2).sum(1)[None, :], 0.0)


def predicted(rec: dict, share: float, prior: float) -> np.ndarray:
    """The kernel's shift of every response cell, before the strength."""
    width = share * rec["spread"]
    w = np.exp(-_sq(rec["Z_rows"], rec["Z_surveyed"]) / (2 * width**2))
    mass = np.exp(-_sq(rec["Z_rows"], rec["Z_labelled"]) / (2 * width**2)).sum(axis=1)
    return (w * rec["innovation"][None, :]).sum(axis=1) / (mass + prior)


def fit(records: list[dict]) -> pd.DataFrame:
    """Strength, pooled and leave-one-case-out R^2 and median correlation for every form."""
    rows = []
    cases = sorted({r["case"] for r in records})
    for share in WIDTHS:
        for prior in PRIORS:
            base = [predicted(r, share, prior) for r in records]
            for exponent in EXPONENTS:
                scale = [(r["m"] / PLAN) ** exponent for r in records]
                P = [b * s for b, s in zip(base, scale, strict=True)]
                rows.append({"width": share, "prior": prior, "exponent": exponent})
                rows[-1].update(_scores(P, [r["response"] for r in records], records, cases))
    return pd.DataFrame(rows)


def _scores(P: list, A: list, records: list[dict], cases: list[str]) -> dict:
    """The least-squares strength and its fit, pooled and leaving each case out."""
    p_all, a_all = np.concatenate(P), np.concatenate(A)
    strength = float(p_all @ a_all / (p_all @ p_all))
    sse = sst = 0.0
    for case in cases:
        mine = [i for i, r in enumerate(records) if r["case"] == case]
        rest = [i for i in range(len(records)) if i not in mine]
        pr, ar = np.concatenate([P[i] for i in rest]), np.concatenate([A[i] for i in rest])
        g = pr @ ar / (pr @ pr)
        for i in mine:
            sse += float(((A[i] - g * P[i]) ** 2).sum())
            sst += float(((A[i] - A[i].mean()) ** 2).sum())
    resid = float(((a_all - strength * p_all) ** 2).sum())
    return {
        "strength": strength,
        "r2": 1 - resid / float(((a_all - a_all.mean()) ** 2).sum()),
        "r2_loco": 1 - sse / sst,
        "median_r": float(
            np.nanmedian([np.corrcoef(p, a)[0, 1] for p, a in zip(P, A, strict=True)])
        ),
    }


def report(table: pd.DataFrame, records: list[dict], command: str) -> str:
    """The markdown report."""
    best = table.loc[table["r2_loco"].idxmax()]
    lines = [
        "# How far a refit moves the candidates' probabilities",
        "",
        f"`{command}` on {datetime.date.today().isoformat()}, {platform.machine()}, Python "
        f"{platform.python_version()}; {len(records)} refits of "
        f"{len({r['case'] for r in records})} cases (seed:species:k: "
        f"{', '.join(sorted({r['case'] for r in records}))}), plans "
        f"{', '.join(sorted({r['plan'] for r in records}))}. The kernel's width is the "
        f"share times the median distance to the {REFIT_NEIGHBOURS}th nearest labelled cell.",
        "",
        "| width share | prior | exponent | strength | R^2 pooled | R^2 leaving a case out "
        "| median r |",
        "|---|---|---|---|---|---|---|",
    ]
    for _, r in table.iterrows():
        lines.append(
            f"| {r['width']:g} | {r['prior']:g} | {r['exponent']:g} | {r['strength']:.3g} | "
            f"{r['r2']:.3f} | "
            f"{r['r2_loco']:.3f} | {r['median_r']:.2f} |"
        )
    lines += [
        "",
        f"Best leaving a case out: width share {best['width']:g}, prior {best['prior']:g}, "
        f"exponent {best['exponent']:g} (the strength at M surveys: strength * (M / {PLAN}) "
        f"** exponent), strength {best['strength']:.3g}. `reserve.surveys` uses "
        f"`REFIT_WIDTH` = {REFIT_WIDTH:g}, `REFIT_PRIOR` = {REFIT_PRIOR:g}, "
        f"`REFIT_STRENGTH` = {REFIT_STRENGTH:g} (no dependence on M).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Run the refits (or read their responses) and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES)
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--npz", type=Path, default=None, help="save the responses")
    parser.add_argument(
        "--from-npz", type=Path, nargs="+", default=None, help="refit saved responses"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    command = "python -m benchmarks.bench_refit_shift " + " ".join(argv or sys.argv[1:])
    if args.from_npz is not None:
        records = [r for f in args.from_npz for r in np.load(f, allow_pickle=True)["records"]]
    else:
        records = [r for c in args.cases.split(",") for r in responses(*_case(c), args.work)]
        if args.npz is not None:
            np.savez_compressed(args.npz, records=np.array(records, dtype=object))
    text = report(fit(records), records, command.strip())
    print(text)
    with replacing(args.out, ".md") as tmp:
        tmp.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
