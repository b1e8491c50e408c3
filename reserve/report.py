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
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["confidence_lines", "summary_text"]


def _interval(s: Mapping[str, Any], key: str, spec: str = ".2f", ends: str = "") -> str:
    """``0.70 (90% 0.65-0.74)`` from ``key``, ``key_low`` and ``key_high`` of the summary."""
    pct = round(100 * float(s.get("interval_level", 0.9)))
    low, high = s.get(f"{key}_low"), s.get(f"{key}_high")
    point = format(s[key], spec)
    if low is None or low != low:
        return point
    ends = ends or spec
    return f"{point} ({pct}% {format(low, ends)}-{format(high, ends)})"


def confidence_lines(s: Mapping[str, Any]) -> list[str]:
    """The footer's lines on how sure the run is: the verdict, the private-land check, the
    cross-validation and the expected occupied cells, each figure with its interval."""
    lines = [f"signal {s['signal']}: decided by the {s['signal_evidence']}"]
    if s.get("check_available"):
        lines.append(
            f"private-land check: {s['check_n_surveyed']} surveyed private cells "
            f"({s['check_n_detected']} detected), within effort strata: AUC "
            f"{_interval(s, 'check_auc')} against 0.50 blind; top 5%: "
            f"{_interval(s, 'check_precision_top')} detected against {s['check_blind']:.2f} blind"
        )
    else:
        alone = (
            ""
            if s["signal_evidence"] == "ties"
            else "; the verdict rests on the training cells alone"
        )
        lines.append(f"private-land check: {s.get('check_note') or 'not available'}{alone}")
    if s.get("cv_precision") == s.get("cv_precision"):  # not NaN
        lines.append(
            f"cross-validation: precision {_interval(s, 'cv_precision')} on the "
            f"{s['n_train'] + int(s.get('n_learned') or 0)} labelled cells against "
            f"{s['cv_blind']:.2f} blind"
        )
    known = int(s.get("n_selected_known_detection") or 0)
    missed = int(s.get("n_selected_no_detection") or 0)
    lines.append(
        f"expected occupied: {_interval(s, 'expected_occupied', '.1f', '.0f')} of the "
        f"{s['n_selected']} chosen cells; {known} chosen with a detection of their own, "
        f"{missed} surveyed {s['no_detection_checklists']}+ times without one"
    )
    if "prevalence" in str(s.get("calibration_source", "")):
        lines.append("probability: the model ranks nothing, so every cell's probability of "
                     "presence is the occupancy prevalence")  # fmt: skip
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


def summary_text(summary: Mapping[str, Any], selected: pd.DataFrame) -> str:
    """The printable summary of a run: what was chosen, how sure, and the chosen cells.

    Parameters
    ----------
    summary : mapping
        The run summary (``run_summary``'s row).
    selected : pandas.DataFrame
        The ``selected`` layer.

    Returns
    -------
    str
        Plain text, one line per figure, then the chosen cells as a fixed-width table.
    """
    species = summary.get("species") or "the species"
    date = str(summary.get("created_utc") or "")[:10]
    head = (f"{species}: {summary['n_selected']} cells to buy of {summary['n_candidates']:,} "
            f"private candidate cells" + (f" ({date})" if date else ""))  # fmt: skip
    table = pd.DataFrame(selected).assign(surveyed=_surveyed(selected))
    cols = [c for c in SUMMARY_COLUMNS if c in table.columns]
    body = table[cols].to_string(index=False, formatters={
        name: (lambda v, spec=spec: format(v, spec)) for name, spec in SPECS.items()
        if name in cols})  # fmt: skip
    note = str(summary.get("signal_note") or "")  # stderr's warning, kept with the file
    warning = [f"warning: {note}", ""] if note else []
    return "\n".join([head, "", *warning, *confidence_lines(summary), "", body, ""])
