"""The run as plain text: how sure it is, and a printable summary beside the GeoPackage.

:func:`confidence_lines` states the verdict and its evidence, each figure with its interval
(``reserve select``'s footer prints them); :func:`summary_text` is the printable summary that
``reserve select --out DIR`` writes as ``DIR/summary.txt``
(:data:`reserve.export.SUMMARY_NAME`) with the GeoPackage: the species and budget, how sure
the run is, and the chosen cells with their longitude, latitude, area, score, probability of
presence and own surveys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from reserve.defaults import species_slug

__all__ = ["Interval", "RunReport", "confidence_lines", "summary_text"]

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
    n_selected_known_detection, n_selected_no_detection, no_detection_checklists : int
    calibration_source : str
    interval_level : float
    created_utc : str
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
    n_selected_known_detection: int = 0
    n_selected_no_detection: int = 0
    no_detection_checklists: int = 0
    calibration_source: str = ""
    interval_level: float = 0.9
    created_utc: str = ""

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
    lines.append(
        f"expected occupied: {r.expected_occupied.text(level, '.1f', '.0f')} of the "
        f"{r.n_selected} chosen cells; {r.n_selected_known_detection} chosen with a detection "
        f"of their own, {r.n_selected_no_detection} surveyed {r.no_detection_checklists}+ "
        "times without one"
    )
    if "prevalence" in r.calibration_source:
        lines.append(
            "probability: the model ranks nothing, so every cell's probability of "
            "presence is the occupancy prevalence"
        )
    return lines


#: The chosen cells' columns in the printable summary, those present.
SUMMARY_COLUMNS = ("rank", "cell_id", "longitude", "latitude", "area_ha", "score",
                   "probability", "surveyed")  # fmt: skip


#: How the printable summary writes each number.
SPECS = {"longitude": ".5f", "latitude": ".5f", "area_ha": ".1f", "score": ".3f",
         "probability": ".2f"}  # fmt: skip


def _surveyed(selected: pd.DataFrame) -> pd.Series:
    """``detected`` / ``never detected`` / '' from the survey flags (all '' without them)."""
    if "known_detection" not in selected.columns:
        return pd.Series([""] * len(selected), index=selected.index)
    never = np.where(selected["surveyed_no_detection"].astype(bool), "never detected", "")
    return pd.Series(np.where(selected["known_detection"].astype(bool), "detected", never),
                     index=selected.index)  # fmt: skip


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
    body = table[cols].to_string(index=False, formatters={
        name: (lambda v, spec=spec: format(v, spec)) for name, spec in SPECS.items()
        if name in cols})  # fmt: skip
    note = r.signal_note  # stderr's warning, kept with the file
    warning = [f"warning: {note}", ""] if note else []
    return "\n".join([head, "", *warning, *confidence_lines(r), "", body, ""])
