"""The run as plain text: how sure it is, and a printable summary beside the GeoPackage.

:func:`confidence_lines` states the verdict and its evidence, each figure with its interval
(``reserve select``'s footer prints them); :func:`summary_text` is the printable summary that
``reserve select --out DIR`` writes as ``DIR/summary.txt``
(:data:`reserve.export.SUMMARY_NAME`) with the GeoPackage: the species and budget, how sure
the run is, and the chosen cells with their longitude, latitude, area, score, probability of
presence and own surveys.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
import pandas as pd

from reserve.defaults import species_slug

if TYPE_CHECKING:
    from reserve.result import SelectionResult

__all__ = [
    "Interval",
    "RunReport",
    "confidence_lines",
    "print_selection",
    "selection_table",
    "summary_text",
]

_NAN = float("nan")


@dataclass(frozen=True)
class Interval:
    """A figure and the ends of its interval (NaN: no interval).

    Examples
    --------
    >>> Interval(0.7, 0.65, 0.74).text(0.9)
    '0.70 (90% 0.65-0.74)'
    >>> Interval(3.0).text(0.9, ".1f")
    '3.0'
    """

    value: float = _NAN
    low: float = _NAN
    high: float = _NAN

    @classmethod
    def read(cls, s: Mapping[str, Any], key: str) -> Interval:
        """``key``, ``key_low`` and ``key_high`` of a run summary (NaN where absent)."""
        return cls(*(_float(s.get(name)) for name in (key, f"{key}_low", f"{key}_high")))

    def text(self, level: float, spec: str = ".2f", ends: str = "") -> str:
        """``0.70 (90% 0.65-0.74)``: the figure, then the interval when it has one."""
        point = format(self.value, spec)
        if self.low != self.low:
            return point
        ends = ends or spec
        return f"{point} ({round(100 * level)}% {format(self.low, ends)}-{format(self.high, ends)})"


def _float(value: Any) -> float:
    return _NAN if value is None else float(value)


@dataclass(frozen=True)
class RunReport:
    """The figures of a run that the command line prints and ``summary.txt`` writes.

    Built once from the run summary (the ``run_summary`` layer's row) by
    :meth:`from_summary`; the names are the summary's keys (an :class:`Interval` gathers a
    figure with its ``_low`` and ``_high`` ends).

    Attributes
    ----------
    method, model_fitted : str
        The method and the model it fitted.
    c : float
        The C of the fit; ``c_source`` says how it was chosen (``given`` or ``cv``).
    seed : int
    budget : int or float
        Cells, or a total cost when ``budget_unit`` is ``cost (<column>)``.
    effective_budget : int or float
        The part of the budget the solver chose (without the locked-in cells).
    total_cost, runtime_seconds : float
    solver_status : str
    objective, bound, gap : float
        What an exact solver proved (NaN: nothing).
    n_selected, n_candidates, n_cells, n_train, n_train_positive, n_learned : int
    n_locked_in, n_locked_out : int
    n_patches, largest_patch_cells : int
        -1 when the cells are not a regular grid.
    boundary_length, boundary_penalty : float
    n_selected_novel, n_novel_excluded : int
    exclude_novel : bool
    species : tuple of str
        The species selected for (empty: the one species of ``label``).
    expected_precision : tuple of float
        With several species: each one's expected precision, in ``species``' order.
    expected_presences : float or None
        With several species: the expected presences in the chosen cells.
    bootstrap : int
    signal, signal_evidence, signal_note : str
        The verdict, what decided it, and the warning when it is weak or none.
    check_available : bool
    check_note : str
    check_n_surveyed, check_n_detected : int
    check_auc, check_precision_top : Interval
    check_blind : float
    cv_precision : Interval
    cv_blind : float
    expected_occupied : Interval
        Cells where the species is present (detected or not) among the chosen ones.
    expected_occupied_blind : float
        The same among as many candidates picked blind.
    detection_per_checklist : float
        The calibration's chance that a checklist in an occupied cell detects the species.
    n_selected_known_detection, n_selected_no_detection, no_detection_checklists : int
    calibration_source : str
    interval_level : float
    created_utc : str
    plan_solver, plan_objective : str
        Several species planned together: the plan's solver and objective ('' otherwise).
    n_targets, n_targets_met : int
        Species with a target, and those whose target the plan meets.
    """

    method: str = ""
    model_fitted: str = ""
    c: float = _NAN
    c_source: str = ""
    seed: int = 0
    budget: int | float = 0
    budget_unit: str = "cells"
    cost_column: str = ""
    effective_budget: int | float = 0
    total_cost: float = _NAN
    runtime_seconds: float = _NAN
    solver_status: str = "?"
    objective: float = _NAN
    bound: float = _NAN
    gap: float = _NAN
    n_selected: int = 0
    n_candidates: int = 0
    n_cells: int = 0
    n_train: int = 0
    n_train_positive: int = 0
    n_learned: int = 0
    n_locked_in: int = 0
    n_locked_out: int = 0
    n_patches: int = -1
    largest_patch_cells: int = -1
    boundary_length: float = _NAN
    boundary_penalty: float = 0.0
    n_selected_novel: int = 0
    n_novel_excluded: int = 0
    exclude_novel: bool = False
    species: tuple[str, ...] = ()
    expected_precision: tuple[float, ...] = ()
    expected_presences: float | None = None
    bootstrap: int = 0
    signal: str = "ok"
    signal_evidence: str = ""
    signal_note: str = ""
    check_available: bool = False
    check_note: str = ""
    check_n_surveyed: int = 0
    check_n_detected: int = 0
    check_auc: Interval = Interval()
    check_precision_top: Interval = Interval()
    check_blind: float = _NAN
    cv_precision: Interval = Interval()
    cv_blind: float = _NAN
    expected_occupied: Interval = Interval()
    expected_occupied_blind: float = _NAN
    detection_per_checklist: float = _NAN
    n_selected_known_detection: int = 0
    n_selected_no_detection: int = 0
    no_detection_checklists: int = 0
    calibration_source: str = ""
    interval_level: float = 0.9
    created_utc: str = ""
    plan_solver: str = ""
    plan_objective: str = ""
    n_targets: int = 0
    n_targets_met: int = 0

    @property
    def money(self) -> bool:
        """Whether the budget is a total cost."""
        return self.budget_unit != "cells"

    @classmethod
    def from_summary(cls, s: Mapping[str, Any]) -> RunReport:
        """The record of a run summary (a ``run_summary`` row as a mapping).

        Examples
        --------
        >>> RunReport.from_summary({"n_selected": 30, "cv_precision": 0.5}).cv_precision
        Interval(value=0.5, low=nan, high=nan)
        """
        kw: dict[str, Any] = {}
        for name, f in cls.__dataclass_fields__.items():
            if name in _DERIVED or name not in s or s[name] is None:
                continue
            kw[name] = Interval.read(s, name) if f.type == "Interval" else _typed(f.type, s[name])
        kw.update(_species_figures(s))
        return cls(**kw)


#: Fields not read under their own name (:func:`_species_figures`).
_DERIVED = frozenset({"species", "expected_precision", "expected_presences"})


def _typed(kind: str, value: Any) -> Any:
    """``value`` as the field's type (``int``, ``float``, ``bool``, ``str``); numbers given
    either way (a budget) are kept as they are."""
    casts = {"int": int, "float": float, "bool": bool, "str": str}
    return casts[kind](value) if kind in casts else value


def _species_figures(s: Mapping[str, Any]) -> dict[str, Any]:
    """``species``, and with several species their expected precision and presences."""
    names = tuple(n.strip() for n in str(s.get("species") or "").split(",") if n.strip())
    out: dict[str, Any] = {"species": names}
    if s.get("expected_presences") is not None and len(names) > 1:
        out["expected_presences"] = float(s["expected_presences"])
        out["expected_precision"] = tuple(
            float(s["expected_precision__" + species_slug(n)]) for n in names
        )
    return out


def confidence_lines(r: RunReport) -> list[str]:
    """The footer's lines on how sure the run is: the verdict, the private-land check, the
    cross-validation and the expected occupied cells, each figure with its interval."""
    level = r.interval_level
    lines = [f"signal {r.signal}: decided by the {r.signal_evidence}"]
    if r.plan_solver:  # several species planned: each one's check is its own
        return lines
    if r.check_available:
        lines.append(
            f"private-land check: {r.check_n_surveyed} surveyed private cells "
            f"({r.check_n_detected} detected), within effort strata: AUC "
            f"{r.check_auc.text(level)} against 0.50 blind; top 5%: "
            f"{r.check_precision_top.text(level)} detected against {r.check_blind:.2f} blind"
        )
    else:
        alone = (
            "" if r.signal_evidence == "ties" else "; the verdict rests on the training cells alone"
        )
        lines.append(f"private-land check: {r.check_note or 'not available'}{alone}")
    if r.cv_precision.value == r.cv_precision.value:  # not NaN
        lines.append(
            f"cross-validation: precision {r.cv_precision.text(level)} on the "
            f"{r.n_train + r.n_learned} labelled cells against {r.cv_blind:.2f} blind"
        )
    if r.expected_occupied.value != r.expected_occupied.value:  # NaN: one per species
        return lines
    blind = r.expected_occupied_blind
    against = f", against {blind:.1f} for a blind pick" if blind == blind else ""
    per = r.detection_per_checklist
    detect = (
        f"; a checklist in an occupied cell detects the species with probability {per:.2f}"
        if per == per
        else ""
    )
    lines.append(
        f"expected occupied: {r.expected_occupied.text(level, '.1f', '.0f')} of the "
        f"{r.n_selected} chosen cells{against} (the species present, detected or not)"
    )
    lines.append(
        f"surveys of the chosen cells: {r.n_selected_known_detection} with a detection of "
        f"their own, {r.n_selected_no_detection} surveyed {r.no_detection_checklists}+ times "
        f"without one{detect}"
    )
    if "prevalence" in r.calibration_source:
        lines.append(
            "probability: the model ranks nothing, so every cell's probability of "
            "presence is the occupancy prevalence"
        )
    return lines


#: The chosen cells' columns in the printable summary, those present.
SUMMARY_COLUMNS = (
    "rank",
    "cell_id",
    "longitude",
    "latitude",
    "area_ha",
    "score",
    "probability",
    "surveyed",
)


#: How the printable summary writes each number.
SPECS = {
    "longitude": ".5f",
    "latitude": ".5f",
    "area_ha": ".1f",
    "score": ".3f",
    "probability": ".2f",
}


def _surveyed(selected: pd.DataFrame) -> pd.Series:
    """``detected`` / ``never detected`` / '' from the survey flags (all '' without them)."""
    if "known_detection" not in selected.columns:
        return pd.Series([""] * len(selected), index=selected.index)
    never = np.where(selected["surveyed_no_detection"].astype(bool), "never detected", "")
    return pd.Series(
        np.where(selected["known_detection"].astype(bool), "detected", never), index=selected.index
    )


def summary_text(summary: Mapping[str, Any] | RunReport, selected: pd.DataFrame) -> str:
    """The printable summary of a run: what was chosen, how sure, and the chosen cells.

    Parameters
    ----------
    summary : mapping or RunReport
        The run summary (``run_summary``'s row), or its record.
    selected : pandas.DataFrame
        The ``selected`` layer.

    Returns
    -------
    str
        Plain text, one line per figure, then the chosen cells as a fixed-width table.
    """
    r = summary if isinstance(summary, RunReport) else RunReport.from_summary(summary)
    species = ", ".join(r.species) or "the species"
    date = r.created_utc[:10]
    head = (
        f"{species}: {r.n_selected} cells to buy of {r.n_candidates:,} private candidate "
        "cells" + (f" ({date})" if date else "")
    )
    table = pd.DataFrame(selected).assign(surveyed=_surveyed(selected))
    cols = [c for c in SUMMARY_COLUMNS if c in table.columns]
    body = table[cols].to_string(
        index=False,
        formatters={
            name: (lambda v, spec=spec: format(v, spec))
            for name, spec in SPECS.items()
            if name in cols
        },
    )
    note = r.signal_note  # stderr's warning, kept with the file
    warning = [f"warning: {note}", ""] if note else []
    return "\n".join([head, "", *warning, *confidence_lines(r), "", body, ""])


def selection_table(result: SelectionResult) -> tuple[Any, list[str]]:
    """The selected cells as a compact table (a rich ``Table``) and its columns.

    The habitat columns are the first three of
    :meth:`reserve.select.SelectionResult.main_features` (the features that lift the
    selected cells' scores most) that take more than one value among the selected cells.
    Two closing rows give the mean of the selected cells and of all candidate cells, so the
    contrast reads at a glance.
    """
    import numpy as np
    from rich.table import Table

    r = RunReport.from_summary(result.summary)
    sel = result.selected
    # the three features that explain the choice most, among those that vary between the
    # selected cells (a column with one value for every row explains nothing on screen)
    ranked = result.main_features(len(result.feature_names))
    feats = [f for f in ranked if sel[f].nunique(dropna=True) > 1][:3]
    # optional columns, only when the run used them: locks and bootstrap frequencies
    flags = [c for c in ("locked_in", "selection_frequency") if c in sel.columns]
    if "known_detection" in sel.columns and (
        sel["known_detection"].any() or sel["surveyed_no_detection"].any()
    ):  # the chosen cells' own surveys, when any says something
        said = np.where(sel["surveyed_no_detection"], "never detected", "")
        sel = sel.assign(surveyed=np.where(sel["known_detection"], "detected", said))
        flags.append("surveyed")
    cost_col = r.cost_column
    if cost_col:
        flags.insert(0, cost_col)
    patched = "patch_id" in sel.columns and bool((sel["patch_id"] > 0).any())
    per_species = [c for c in sel.columns if c.startswith(PROBABILITY_PREFIX)]
    cols = [
        "rank",
        "cell_id",
        *(["patch_id"] if patched else []),
        *flags,
        "score",
        *per_species,
        *feats,
    ]
    heads = {"locked_in": "locked", "selection_frequency": "freq", "patch_id": "patch"}
    heads.update({c: "p " + c.removeprefix(PROBABILITY_PREFIX) for c in per_species})
    table = Table(title=f"{r.n_selected} selected cells ({r.method})", box=None)
    for col in cols:
        table.add_column(heads.get(col, col), justify="right", no_wrap=True)

    def cell(col: str, v: Any) -> str:
        if col in ("patch_id", "surveyed"):
            return str(v)
        if col == "locked_in":
            return "in" if v else ""
        if col == cost_col:
            return f"{v:.6g}"
        return f"{v:.3f}" if col != "selection_frequency" else f"{v:.2f}"

    # grouped by patch (1 = the largest), best rank first within each
    rows = sel.sort_values(["patch_id", "rank"], kind="stable") if patched else sel
    last = None
    for row in rows[cols].itertuples(index=False):
        if patched and last is not None and row[2] != last:
            table.add_section()
        last = row[2] if patched else None
        values = zip(cols[2:], row[2:], strict=True)
        table.add_row(str(row[0]), str(row[1]), *(cell(c, v) for c, v in values))
    units = result.planning_units
    cand = units[units["rank"] > 0]  # every candidate cell that was ranked
    table.add_section()
    for name, frame in (("selected", sel), ("candidates", cand)):
        means = frame[["score", *per_species, *feats]].mean(axis=0).to_numpy()
        pad = [""] * (len(flags) + patched)
        table.add_row("mean", name, *pad, *(f"{v:.3f}" for v in means))
    return table, cols


def survey_table(layer: Any, summary: Mapping[str, Any]) -> Any:
    """The suggested surveys (the ``survey_next`` layer) as a rich ``Table``.

    Columns: the survey's rank, the cell, its cluster (with ``--survey-clusters``), why,
    its marginal expected gain in the chosen set's occupied cells, its probability of
    presence and whether it is chosen now; the title states the plan's joint expected gain.
    """
    from rich.table import Table

    clustered = int(summary.get("survey_clusters", 0) or 0) > 0
    gain = float(summary.get("survey_expected_gain", float("nan")))
    table = Table(
        title=f"{len(layer)} cells to survey next",
        caption=f"expected gain {gain:.2f} occupied chosen cells; a survey is "
        f"{summary.get('survey_checklists', '')} checklists",
        box=None,
    )
    cols = ["rank", "cell_id", *(["cluster"] if clustered else []), "why", "gain", "p", "chosen"]
    for col in cols:
        table.add_column(col, justify="left" if col == "why" else "right", no_wrap=True)
    for row in layer.itertuples(index=False):
        table.add_row(
            str(row.rank),
            str(row.cell_id),
            *([str(row.cluster)] if clustered else []),
            row.why,
            f"{row.expected_gain:.3f}",
            f"{row.probability:.2f}",
            "yes" if row.selected else "",
        )
    return table


def print_selection(result: SelectionResult, file: TextIO | None = None) -> None:
    """The selected cells as a compact table, then the run's figures (``reserve select``'s
    standard output).

    Parameters
    ----------
    result : reserve.result.SelectionResult
        The run.
    file : file-like or None, default=None
        Where to print (None: standard output).
    """
    from rich.console import Console

    table, cols = selection_table(result)
    # wide enough for the full column names (a table is read, not wrapped)
    width = max(100, sum(max(len(c), 9) + 2 for c in cols))
    console = Console(file=file or sys.stdout, width=width, highlight=False)
    console.print(table)
    if result.representation is not None:
        console.print(representation_table(result.representation, result.summary))
    _print_figures(console, RunReport.from_summary(result.summary))
    s = result.summary
    if "n_surveys" in s:
        console.print(
            f"new surveys: {s['n_surveys']} cells ({s['n_surveys_detected']} with a detection, "
            f"{s['n_selected_surveys_detected']} of them bought first); "
            f"{s['n_surveys_dropped']} chosen cells left out after a survey without one"
        )
    if result.survey_next is not None:
        console.print(survey_table(result.survey_next, s))
    paths = {
        "GeoPackage": result.gpkg_path,
        "ranking CSV": result.csv_path,
        "summary": result.summary_path,
        "map": result.map_path,
    }
    for label, path in paths.items():
        if path is not None:
            console.print(f"{label}: {path}")


#: Prefix of the per-species probability columns of a several-species plan.
PROBABILITY_PREFIX = "probability__"


def representation_table(table: pd.DataFrame, summary: Mapping[str, Any]) -> Any:
    """The ``representation`` table (one row per species) as a rich ``Table``.

    Parameters
    ----------
    table : pandas.DataFrame
        The ``representation`` layer (:data:`reserve.representation.REPRESENTATION_COLUMNS`).
    summary : mapping
        The run summary (its ``interval_level``).

    Returns
    -------
    rich.table.Table
    """
    from rich.table import Table

    level = round(100 * float(summary.get("interval_level") or 0.9))
    out = Table(title="representation (expected occupied cells among the chosen)", box=None)
    heads = ("species", "weight", "target", "in cells", "expected", f"{level}%", "share", "short")
    for i, head in enumerate((*heads, "met", "signal")):
        out.add_column(head, justify="left" if i == 0 else "right", no_wrap=True)
    for r in table.itertuples(index=False):
        has = r.target == r.target  # not NaN
        out.add_row(
            r.species,
            f"{r.weight:g}",
            r.target_given or "-",
            f"{r.target:.1f}" if has else "-",
            f"{r.expected:.1f}",
            f"{r.expected_low:.0f}-{r.expected_high:.0f}",
            f"{r.share:.1%}",
            f"{r.shortfall:.1f}" if has else "-",
            ("yes" if r.met else "no") if has else "-",
            r.signal,
        )
    return out


def _print_figures(console: Any, r: RunReport) -> None:
    """The run's figures (budget, solver, cells, locks, species, bootstrap)."""
    console.print(_plain_line(r), soft_wrap=True)
    console.print(_method_line(r), soft_wrap=True)
    console.print(
        f"cells: {r.n_train} training ({r.n_train_positive} detected), "
        f"{r.n_candidates} candidates, {r.n_cells} in all"
        + (f"; learned also from {r.n_learned} surveyed candidates" if r.n_learned else "")
    )
    for line in confidence_lines(r):
        console.print(line, soft_wrap=True)
    if r.n_patches >= 0:
        penalty = r.boundary_penalty
        console.print(
            f"patches: {r.n_patches} (largest {r.largest_patch_cells} cells), boundary "
            f"{r.boundary_length / 1000:.4g} km"
            + (f" at boundary penalty {penalty:.4g}" if penalty else "")
        )
    if r.n_locked_in or r.n_locked_out:
        console.print(_locked_line(r))
    _print_novelty(console, r)
    if r.plan_solver:
        console.print(
            f"plan: {r.plan_objective} by {r.plan_solver}, {r.solver_status}; targets met "
            f"{r.n_targets_met} of {r.n_targets}; gap {r.gap:.1%}",
            soft_wrap=True,
        )
    if r.expected_presences is not None:
        per = ", ".join(
            f"{name} {p:.2f}" for name, p in zip(r.species, r.expected_precision, strict=True)
        )
        console.print(
            f"species: expected precision (Platt-calibrated on the training cells) {per}; "
            f"expected presences {r.expected_presences:.1f} in {r.n_selected} cells"
        )
    if r.bootstrap:
        console.print(
            f"bootstrap: {r.bootstrap} refits on resampled training cells; freq = share "
            "of refits selecting the cell (ranking layer: every candidate)"
        )


def _locked_line(r: RunReport) -> str:
    """The locks and what the solver chose beside them."""
    chose = (
        f"{r.effective_budget} of the {r.budget} cells"
        if not r.money
        else f"within {r.effective_budget:.6g} of the budget {r.budget:g}"
    )
    return (
        f"locked: {r.n_locked_in} in (selected, counted in the budget), "
        f"{r.n_locked_out} out (never selected); the solver chose {chose}"
    )


def _plain_line(r: RunReport) -> str:
    """The footer's first line: how many cells were chosen, of how many, in how long.

    Examples
    --------
    >>> _plain_line(RunReport(n_selected=30, n_candidates=16141, budget=30,
    ...                       runtime_seconds=4.96, seed=0))
    '30 cells chosen of 16,141 private candidates (budget 30) in 5.0 s; seed 0'
    """
    if not r.money:
        budget = f"budget {r.budget}"
    else:  # "cost (price)": a budget in the --cost-column's money
        column = r.budget_unit.removeprefix("cost (").removesuffix(")")
        budget = f"budget {_amount(r.budget)} of {column}; spent {_amount(r.total_cost)}"
    return (
        f"{r.n_selected:,} cells chosen of {r.n_candidates:,} private candidates "
        f"({budget}) in {r.runtime_seconds:.1f} s; seed {r.seed}"
    )


def _amount(v: float) -> str:
    """A sum of money: in full with thousands separators when large (1,500,000), else 6.5."""
    return f"{v:,.0f}" if abs(v) >= 1e5 else f"{v:.6g}"


def _method_line(r: RunReport) -> str:
    """The method, its model and C; what an exact solver proved, when it proved something.

    A heuristic's status ("local"), objective and iterations stay in ``run_summary``: on
    screen they would only be figures without a reference.

    Examples
    --------
    >>> _method_line(RunReport(method="ttk", model_fitted="linear", c=1.0, c_source="cv"))
    'method ttk, model linear, C 1 (cv)'
    >>> _method_line(RunReport(method="ttk-mip", model_fitted="linear", c=1.0, c_source="cv",
    ...                        solver_status="time_limit", objective=12.5, bound=12.0, gap=0.04))
    'method ttk-mip, model linear, C 1 (cv); solver time_limit: objective 12.5, bound 12, gap 4.0%'
    """
    c = f"C {r.c:g} ({r.c_source})" if r.c == r.c else f"C {r.c_source}"
    line = f"method {r.method}, model {r.model_fitted}, {c}"
    figures = {"objective": (r.objective, ".6g"), "bound": (r.bound, ".6g"), "gap": (r.gap, ".1%")}
    proved = [f"{name} {v:{spec}}" for name, (v, spec) in figures.items() if v == v]
    if r.bound != r.bound and r.gap != r.gap:
        return line
    return f"{line}; solver {r.solver_status}: {', '.join(proved)}"


def _print_novelty(console: Any, r: RunReport) -> None:
    """Chosen cells outside the surveyed habitat (negative MESS), or those kept out."""
    if r.n_selected_novel:
        fix = (
            "they are locked in, which --exclude-novel leaves in"
            if r.exclude_novel
            else "--exclude-novel keeps them out"
        )
        console.print(
            f"novel habitat: {r.n_selected_novel} of the {r.n_selected} chosen cells lie "
            "outside the surveyed habitat (negative mess: their score is an extrapolation; "
            "column novel); " + fix
        )
    if r.n_novel_excluded:
        console.print(
            f"novel habitat: {r.n_novel_excluded} candidate cells outside the surveyed "
            "habitat kept out (--exclude-novel)"
        )
