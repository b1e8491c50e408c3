"""Several species planned together: each species' own fit, one plan, the representation table.

With two or more ``--species`` (and no ``--joint-fit``) every species is fitted alone, exactly
as a single-species run (:func:`reserve.select.run_selection` runs those fits), and its
calibrated probability of presence (:class:`reserve.result.Evidence`) is the species' value
of each candidate cell. :func:`plan_representation` then chooses the cells for all species at
once (:func:`reserve.solvers.targets.plan_species`: the weighted expected occupied cells, or
with targets the least weighted shortfall first), and :func:`combine_results` writes the
tables of that plan: ``probability__<slug>`` and ``score__<slug>`` per species, ``score`` as
the cell's weighted sum of probabilities (what it adds to the plan), and the
``representation`` table (one row per species, :data:`REPRESENTATION_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from reserve.config import SelectOptions, species_slug
from reserve.design import Problem
from reserve.errors import InvalidInputError
from reserve.grid import cell_locations
from reserve.result import LOCATION_COLUMNS, SelectionResult, expected_among, patch_report
from reserve.solvers.targets import SpeciesPlan, plan_species, reachable

__all__ = [
    "REPRESENTATION_COLUMNS",
    "PlanInputs",
    "SpeciesFit",
    "combine_results",
    "plan_inputs",
    "plan_representation",
]

#: Columns of the ``representation`` table, one row per species.
REPRESENTATION_COLUMNS = (
    "species",
    "weight",
    "target_given",
    "target",
    "reachable",
    "expected",
    "expected_low",
    "expected_high",
    "expected_total",
    "share",
    "shortfall",
    "met",
    "signal",
    "model_fitted",
)

#: Verdicts from the weakest: the run's verdict is its weakest species'.
_SIGNALS = ("none", "weak", "ok")

#: Per-cell columns of a species' own run that the plan's tables do not carry over: they
#: are the species', and the plan's tables have them per species.
_SPECIES_COLUMNS = ("score", "probability", "known_detection", "surveyed_no_detection")


@dataclass(frozen=True)
class SpeciesFit:
    """One species' own single-species run: its problem and its result (not written)."""

    name: str
    problem: Problem
    result: SelectionResult

    @property
    def slug(self) -> str:
        """The species' column suffix."""
        return species_slug(self.name)


@dataclass(frozen=True)
class PlanInputs:
    """What the plan solves: the free candidates' probabilities, targets and weights.

    Attributes
    ----------
    rows : numpy.ndarray of int
        The free candidate cells (rows of ``P``).
    P : numpy.ndarray of shape (len(rows), S)
        Each species' calibrated probability of presence there.
    base : numpy.ndarray of shape (S,)
        Each species' expected occupied cells among the locked-in cells.
    total : numpy.ndarray of shape (S,)
        Each species' expected occupied cells over the free candidates.
    targets : numpy.ndarray of shape (S,)
        Absolute targets (NaN: none).
    weights : numpy.ndarray of shape (S,)
    reachable : numpy.ndarray of shape (S,)
        The most each species alone can get within the budget (with a money budget, the
        fractional-knapsack bound: the most it could get).
    budget : float
        What the plan may spend: the free cells, or the free money with ``cost``.
    cost : numpy.ndarray or None
        Each free candidate's cost (a money budget), else None.
    """

    rows: np.ndarray
    P: np.ndarray
    base: np.ndarray
    total: np.ndarray
    targets: np.ndarray
    weights: np.ndarray
    reachable: np.ndarray
    budget: float
    cost: np.ndarray | None


def _probabilities(fits: Sequence[SpeciesFit]) -> np.ndarray:
    """Every cell's calibrated probability per species, shape (n_cells, S)."""
    return np.column_stack(
        [f.result.planning_units["probability"].to_numpy(dtype=np.float64) for f in fits]
    )


def plan_inputs(problem: Problem, opts: SelectOptions, fits: Sequence[SpeciesFit]) -> PlanInputs:
    """The plan's arrays: probabilities of the free candidates, absolute targets, weights."""
    # a calibrated probability may overshoot 1 by a rounding error
    prob = np.clip(np.nan_to_num(_probabilities(fits), nan=0.0), 0.0, 1.0)
    rows = np.flatnonzero(problem.candidate)
    P = prob[rows]
    base = prob[problem.locked_in].sum(axis=0)
    total = P.sum(axis=0)
    given = {t.species: t for t in opts.target}
    targets = np.array(
        [
            given[f.name].absolute(total[j], base[j]) if f.name in given else np.nan
            for j, f in enumerate(fits)
        ]
    )
    cost = None if problem.cost is None else problem.cost[rows]
    budget = problem.k_free if cost is None else float(problem.free_budget)
    most = reachable(P, budget, cost=cost, base=base)
    weights = np.asarray(opts.weights())
    return PlanInputs(rows, P, base, total, targets, weights, most, budget, cost)


def _unreachable(inputs: PlanInputs, fits: Sequence[SpeciesFit], opts: SelectOptions) -> list[str]:
    """One message per target above what the candidates can reach; refused when strict."""
    out = []
    for j, f in enumerate(fits):
        t, most = inputs.targets[j], inputs.reachable[j]
        if np.isfinite(t) and t > most + 1e-9:
            given = next(g for g in opts.target if g.species == f.name)
            out.append(
                f"target {str(given)!r} asks for {t:.1f} expected occupied cells; the "
                f"budget {opts.budget:g} can reach at most {most:.1f} for {f.name!r}"
            )
    if out and opts.strict_targets:
        raise InvalidInputError(
            f"{out[0]}; lower the target, raise --budget, or drop --strict-targets to plan "
            "with the shortfall reported"
        )
    return [f"{m}: planned with the shortfall reported" for m in out]


def plan_representation(
    problem: Problem,
    opts: SelectOptions,
    fits: Sequence[SpeciesFit],
    say: Callable[[str], None],
) -> tuple[PlanInputs, SpeciesPlan, list[str]]:
    """Solve the plan over the species' probabilities.

    Parameters
    ----------
    problem : reserve.design.Problem
        The several-species problem (its candidates, locks and budget).
    opts : reserve.config.SelectOptions
        The run's options (targets, weights, ``strict_targets``, ``time_limit``, ``seed``).
    fits : sequence of SpeciesFit
        Each species' own run, in the order of ``opts.species``.
    say : callable
        Progress messages.

    Returns
    -------
    (PlanInputs, SpeciesPlan, list of str)
        The arrays solved, the plan, and a warning per unreachable target.

    Raises
    ------
    InvalidInputError
        A target above what the candidates can reach, with ``strict_targets``.
    """
    inputs = plan_inputs(problem, opts, fits)
    warnings = _unreachable(inputs, fits, opts)
    objective = "least weighted shortfall, then" if opts.target else "the most"
    spend = f"{problem.k_free} cells" if inputs.cost is None else f"{inputs.budget:g} of cost"
    say(f"planning {spend} for {len(fits)} species: {objective} weighted expected occupied cells")
    plan = plan_species(
        inputs.P,
        inputs.budget,
        cost=inputs.cost,
        targets=inputs.targets if opts.target else None,
        weights=inputs.weights,
        base=inputs.base,
        time_limit=opts.time_limit,
        random_state=opts.seed,
    )
    return inputs, plan, warnings


def _table(
    opts: SelectOptions,
    fits: Sequence[SpeciesFit],
    inputs: PlanInputs,
    plan: SpeciesPlan,
    sel_rows: np.ndarray,
) -> pd.DataFrame:
    """The ``representation`` table: one row per species."""
    given = {t.species: t.given for t in opts.target}
    rows = []
    for j, f in enumerate(fits):
        score = f.result.planning_units["score"].to_numpy(dtype=np.float64)
        _, low, high = expected_among(f.result.evidence, f.problem, score, sel_rows, opts.seed)
        whole = inputs.total[j] + inputs.base[j]
        rows.append(
            {
                "species": f.name,
                "weight": float(inputs.weights[j]),
                "target_given": given.get(f.name, ""),
                "target": float(inputs.targets[j]),
                "reachable": float(inputs.reachable[j]),
                "expected": float(plan.expected[j]),
                "expected_low": low,
                "expected_high": high,
                "expected_total": float(whole),
                "share": float(plan.expected[j] / whole) if whole > 0 else float("nan"),
                "shortfall": float(plan.shortfall[j]),
                "met": bool(plan.met[j]) if np.isfinite(inputs.targets[j]) else None,
                "signal": str(f.result.summary.get("signal", "")),
                "model_fitted": str(f.result.summary.get("model_fitted", "")),
            }
        )
    return pd.DataFrame(rows, columns=list(REPRESENTATION_COLUMNS))


def _units(
    template: gpd.GeoDataFrame, fits: Sequence[SpeciesFit], weights: np.ndarray, sel: np.ndarray
) -> tuple[gpd.GeoDataFrame, np.ndarray, np.ndarray]:
    """``planning_units`` of the plan, the selected cells (locked-in first, then by
    ``score``) and the rank order of every ranked cell."""
    units = template.drop(columns=[c for c in _SPECIES_COLUMNS if c in template.columns])
    prob = _probabilities(fits)
    score = np.where(np.isfinite(prob), prob, 0.0) @ weights
    score = np.where(np.isfinite(prob).any(axis=1), score, np.nan)
    at = units.columns.get_loc("locked_in") + 1
    columns = {"score": score}
    for j, f in enumerate(fits):
        columns[f"probability__{f.slug}"] = prob[:, j]
    for f in fits:
        columns[f"score__{f.slug}"] = f.result.planning_units["score"].to_numpy()
    for i, (name, values) in enumerate(columns.items()):
        units.insert(at + i, name, values)
    locked = units["locked_in"].to_numpy(dtype=bool)
    key = -np.nan_to_num(score, nan=-np.inf)
    chosen = np.zeros(len(units), dtype=bool)
    chosen[sel] = True
    ranked = units["rank"].to_numpy() > 0  # every candidate and locked-in cell
    group = np.where(locked, 0, np.where(chosen, 1, 2))
    order = np.flatnonzero(ranked)
    order = order[np.lexsort((order, key[order], group[order]))]
    rank = np.zeros(len(units), dtype=np.int64)
    rank[order] = np.arange(1, order.size + 1)
    units["rank"] = rank
    units["selected"] = chosen | locked
    sel_rows = order[: int((chosen | locked).sum())]
    return units, sel_rows, order


def _layers(
    units: gpd.GeoDataFrame,
    template: SelectionResult,
    sel_rows: np.ndarray,
    order: np.ndarray,
    per_species: list[str],
) -> tuple[gpd.GeoDataFrame, gpd.GeoDataFrame, pd.DataFrame, dict[str, Any]]:
    """The tables with the plan's patches: ``planning_units``, ``selected``, ``ranking``."""
    patch, patches = patch_report(units.geometry.to_numpy(), sel_rows)
    units["patch_id"] = patch
    where = cell_locations(units.geometry.to_numpy(), units.crs)
    keep = [c for c in template.selected.columns if c in units.columns and c != "score"]
    sel = units.iloc[sel_rows][keep].copy()
    at = sel.columns.get_loc("cell_id") + 1
    for i, col in enumerate(LOCATION_COLUMNS):
        sel.insert(at + i, col, where[col].to_numpy()[sel_rows])
    at = sel.columns.get_loc("patch_id") + 1
    for i, col in enumerate(["score", *per_species]):
        sel.insert(at + i, col, units[col].to_numpy()[sel_rows])
    ranked = [
        c
        for c in template.ranking.columns
        if c in units.columns and c not in LOCATION_COLUMNS and c != "score"
    ]
    ranking = pd.DataFrame(units.iloc[order][ranked]).reset_index(drop=True)
    for i, col in enumerate(["score", *per_species]):
        ranking.insert(2 + i, col, units[col].to_numpy()[order])
    for col in LOCATION_COLUMNS:
        ranking[col] = where[col].to_numpy()[order]
    return units, gpd.GeoDataFrame(sel.reset_index(drop=True)), ranking, patches


def _summary(
    template: Mapping[str, Any],
    opts: SelectOptions,
    fits: Sequence[SpeciesFit],
    plan: SpeciesPlan,
    table: pd.DataFrame,
    warnings: list[str],
) -> dict[str, Any]:
    """``run_summary``: the first species' run-level keys, the plan's, and per species."""
    s = {k: v for k, v in template.items() if not _species_key(k)}
    weakest = min(table["signal"], key=lambda v: _SIGNALS.index(v) if v in _SIGNALS else 0)
    notes = [
        f"{f.name}: {f.result.summary.get('signal_note', '')}"
        for f in fits
        if f.result.summary.get("signal") != "ok"
    ]
    targeted = table["target"].notna()
    s.update(
        {
            "species": ", ".join(f.name for f in fits),
            "c": float("nan"),
            "c_source": "per species",
            "model_fitted": " / ".join(table["model_fitted"]),
            "fit_seconds": round(sum(f.result.summary["fit_seconds"] for f in fits), 3),
            "solver_status": plan.status,
            "objective": plan.utility,
            "bound": plan.utility_bound,
            "gap": plan.gap,
            "plan_objective": "shortfall, then utility" if opts.target else "utility",
            "plan_solver": plan.solver,
            "plan_seconds": round(plan.seconds, 3),
            "shortfall_objective": plan.shortfall_objective,
            "shortfall_bound": plan.shortfall_bound,
            "utility": plan.utility,
            "utility_bound": plan.utility_bound,
            "n_targets": int(targeted.sum()),
            "n_targets_met": int((table["met"] == True).sum()),  # noqa: E712 (None: no target)
            "target_warnings": " | ".join(warnings),
            "signal": weakest,
            "signal_evidence": "species' own checks (representation layer)",
            "signal_reason": "the weakest species' verdict",
            "signal_note": "; ".join(notes),
            "check_available": False,
            "check_note": "one per species: each species' verdict is in the representation layer",
        }
    )
    for f, row in zip(fits, table.itertuples(index=False), strict=True):
        s[f"signal__{f.slug}"] = row.signal
        s[f"model_fitted__{f.slug}"] = row.model_fitted
        s[f"check_auc__{f.slug}"] = float(f.result.summary.get("check_auc", float("nan")))
    return s


def _species_key(key: str) -> bool:
    """Whether a run-summary key describes one species' fit (dropped from the plan's)."""
    prefixes = ("check_", "cv_", "signal", "expected_", "calibration", "detection_", "n_selected_")
    return key.startswith(prefixes) or key in ("no_detection_checklists", "n_tied_at_cutoff")


def combine_results(
    problem: Problem,
    opts: SelectOptions,
    fits: Sequence[SpeciesFit],
    inputs: PlanInputs,
    plan: SpeciesPlan,
    warnings: list[str],
) -> SelectionResult:
    """The plan's :class:`~reserve.result.SelectionResult`, with its ``representation``.

    Parameters
    ----------
    problem : reserve.design.Problem
        The several-species problem.
    opts : reserve.config.SelectOptions
    fits : sequence of SpeciesFit
    inputs : PlanInputs
    plan : reserve.solvers.targets.SpeciesPlan
    warnings : list of str
        The unreachable targets' messages (``run_summary``'s ``target_warnings``).

    Returns
    -------
    reserve.result.SelectionResult
    """
    first = fits[0].result
    units, sel_rows, order = _units(
        first.planning_units, fits, inputs.weights, inputs.rows[plan.selected]
    )
    per_species = [f"probability__{f.slug}" for f in fits]
    units, sel, ranking, patches = _layers(units, first, sel_rows, order, per_species)
    table = _table(opts, fits, inputs, plan, sel_rows)
    summary = _summary(first.summary, opts, fits, plan, table, warnings)
    summary.update(patches, n_selected=int(sel_rows.size))
    if problem.cost is not None:  # the plan's spending, not the first species' own run's
        summary["total_cost"] = float(problem.cost[sel_rows].sum())
    parts = [f.result.contributions for f in fits if f.result.contributions is not None]
    result = SelectionResult(
        planning_units=units,
        selected=sel,
        summary=summary,
        estimator=[f.result.estimator for f in fits],
        feature_names=first.feature_names,
        config=first.config,
        contributions=np.sum(parts, axis=0) if parts else None,
        ranking=ranking,
        representation=table,
    )
    summary["main_features"] = ", ".join(result.main_features())
    return result
