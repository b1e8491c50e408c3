"""Which cells to survey before buying, and how new surveys enter the next selection.

Two halves of one loop, ``reserve select --suggest-surveys M`` then ``reserve select
--surveys PATH``:

* :func:`suggest_surveys` ranks candidate cells by the expected value of the information
  their survey would bring: the expected gain in the chosen set's expected occupied cells
  once the survey's outcome is known. The probabilities are the run's calibrated
  probabilities of presence given each cell's own surveys (``probability``,
  :func:`reserve.result.assess_evidence`), a survey is :data:`SURVEY_CHECKLISTS`
  checklists, each detecting the species in an occupied cell with the calibration's
  detection per checklist (``detection_per_checklist``). A survey's value has two parts.
  Its own outcome settles the selection (:func:`settle_selection`; exact,
  :func:`single_values`). Its label teaches the next run's refit, which moves the cells of
  similar habitat (:func:`refit_spillover`, in the approximation of :class:`Habitat`: a
  kernel regression of the labels on the habitat features whose constants are fitted to
  measured refits). A plan is chosen greedily: each survey counts as labelled habitat for
  the values after it, so a plan spreads over the habitats whose labels move the cut. The
  plan's expected gain is the joint value of its outcomes (not the sum of theirs: two
  detections displace two chosen cells, the second a better one), estimated on
  :data:`VALUE_DRAWS` seeded draws, plus the refit's values. With ``clusters=G`` every cell
  after the G-th must touch (share an edge with) a cell already suggested, so the plan is
  at most G contiguous areas.
* :func:`read_surveys` reads new results: a CSV (``cell_id,detected[,checklists]``), or the
  new checklists themselves, an eBird EBD and its Sampling Event Data
  (:func:`read_survey_checklists`: the checklists ``reserve ingest`` would keep, each put in
  the candidate cell that contains it). :func:`apply_surveys` writes them into the
  planning units (labels, ``n_checklists``) and :func:`settle_selection` decides the
  surveyed cells: a detection is bought first (the species is known to be there), and a
  cell surveyed without one stays chosen only while its probability given the survey is at
  least that of the best candidate left out.

``why`` names what drove a suggestion: ``near the cut`` (its own outcome would move the
chosen set), ``outside the surveyed habitat`` (negative MESS, or its label moves the
refit more than its outcome moves the set: habitat with few labels) or ``both``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from reserve.adjacency import grid_adjacency
from reserve.errors import DataFileError, InvalidInputError
from reserve.io import ChecklistFilter, load_observations, read_header

__all__ = [
    "REFIT_NEIGHBOURS",
    "REFIT_PRIOR",
    "REFIT_STRENGTH",
    "REFIT_WIDTH",
    "SURVEY_CHECKLISTS",
    "SURVEY_NEXT_COLUMNS",
    "VALUE_DRAWS",
    "Habitat",
    "Plan",
    "Settlement",
    "SurveyResults",
    "apply_surveys",
    "calibration_draws",
    "expected_joint_gain",
    "is_ebd",
    "joint_gain",
    "locate_points",
    "plan_surveys",
    "read_survey_checklists",
    "read_surveys",
    "refit_spillover",
    "settle_selection",
    "single_values",
    "suggest_surveys",
    "survey_detection",
]

#: Checklists of one suggested survey (a morning's visit: three checklists).
SURVEY_CHECKLISTS = 3
#: Seeded draws of the survey outcomes behind a joint expected gain.
VALUE_DRAWS = 256
#: The refit's approximation (:class:`Habitat`): the kernel's width is this share of the
#: median distance from a ranked cell to its ``REFIT_NEIGHBOURS``-th nearest labelled cell.
REFIT_WIDTH = 0.7
REFIT_NEIGHBOURS = 10
#: A label moves a cell's probability by ``REFIT_STRENGTH * w (y - p_j) / (mass + REFIT_PRIOR)``
#: (least squares on measured refits: ``benchmarks/results/refit_shift.md``).
REFIT_STRENGTH = 0.447
REFIT_PRIOR = 1.0
#: Values a plan's lazy greedy recomputes at once.
LAZY_BATCH = 32
#: Columns of the ``survey_next`` layer, before its geometry.
SURVEY_NEXT_COLUMNS = (
    "rank",
    "cell_id",
    "why",
    "expected_gain",
    "value_alone",
    "value_refit",
    "probability",
    "p_detect",
    "selected",
    "novel",
    "cluster",
    "longitude",
    "latitude",
)


@dataclass(frozen=True)
class SurveyResults:
    """New survey results, one row per surveyed cell.

    Attributes
    ----------
    cell_id : numpy.ndarray
        The surveyed cells, as in the planning units.
    detected : numpy.ndarray of bool
        Whether any of the survey's checklists detected the species.
    checklists : numpy.ndarray of float
        The survey's checklists (:data:`SURVEY_CHECKLISTS` when the file has none).
    source : str
        The file, for messages and the summary.
    notes : tuple of str
        What the reading left out or found nothing of, for the run's messages (the EBD
        form: checklists outside the candidate cells, a species no checklist reports).
    """

    cell_id: np.ndarray
    detected: np.ndarray
    checklists: np.ndarray
    source: str = ""
    notes: tuple[str, ...] = ()


def _rows(mask: np.ndarray, limit: int = 5) -> str:
    """The data rows (2 = the first after the header) where ``mask`` holds, in words."""
    rows = (np.flatnonzero(mask) + 2).tolist()
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return ", ".join(str(r) for r in rows[:limit]) + more


def _table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The CSV as text columns, or one refusal naming what is wrong."""
    p = Path(path)
    if not p.is_file():
        raise DataFileError(f"surveys {str(p)!r} is not a file; pass a CSV of cell_id,detected")
    try:
        table = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (ValueError, OSError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataFileError(f"surveys {str(p)!r} is not a readable CSV ({exc})") from None
    table.columns = [str(c).strip() for c in table.columns]
    missing = [c for c in ("cell_id", "detected") if c not in table.columns]
    if missing:
        raise DataFileError(
            f"surveys {str(p)!r} lacks columns {missing}; it needs cell_id,detected and "
            "optionally checklists (found: " + ", ".join(map(str, table.columns)) + ")"
        )
    if table.empty:
        raise DataFileError(f"surveys {str(p)!r} has no rows; add one row per surveyed cell")
    return table


def is_ebd(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is eBird Basic Dataset text: its header has ``GLOBAL UNIQUE IDENTIFIER``.

    Plain, ``.gz`` or ``.zip`` text, as ``reserve ingest`` reads it; the name of the file
    does not matter. A file that cannot be read is not one (the CSV reader then says why).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "surveys.csv"
    >>> _ = p.write_text("cell_id,detected\\n17,1\\n")
    >>> is_ebd(p)
    False
    """
    try:
        return "global_unique_identifier" in read_header(path)
    except DataFileError:
        return False


def read_surveys(
    path: str | os.PathLike[str],
    units: gpd.GeoDataFrame,
    candidate: np.ndarray,
    *,
    sed: str | os.PathLike[str] | None = None,
    species: str | None = None,
) -> SurveyResults:
    """Read and check new survey results against the planning units: a CSV, or an EBD/SED pair.

    Parameters
    ----------
    path : path-like
        CSV with ``cell_id``, ``detected`` (0 or 1) and optionally ``checklists`` (a positive
        integer; default :data:`SURVEY_CHECKLISTS`); or an eBird EBD of the new checklists
        (:func:`is_ebd`), read by :func:`read_survey_checklists`.
    units : geopandas.GeoDataFrame
        The planning units (``cell_id``; their geometry for an EBD).
    candidate : numpy.ndarray of bool
        The cells that may be surveyed results (the run's candidates).
    sed : path-like, optional
        The Sampling Event Data of an EBD ``path`` (required with one, refused without).
    species : str, optional
        The species an EBD is read for (required with one).

    Returns
    -------
    SurveyResults

    Raises
    ------
    InvalidInputError
        An EBD without ``sed`` or ``species``, or ``sed`` with a CSV.
    DataFileError
        A missing or unreadable file, missing columns, labels other than 0/1, checklists
        that are not positive integers, repeated cells, unknown cells or cells that are not
        candidates; the message names the rows.
    """
    if is_ebd(path):
        if sed is None:
            raise InvalidInputError(
                f"surveys {str(path)!r} is an eBird EBD file; pass the Sampling Event Data of "
                "the same checklists with --surveys-sed PATH"
            )
        if species is None:
            raise InvalidInputError(
                f"surveys {str(path)!r} is an eBird EBD file and the cells name no species; "
                "pass --species NAME to read it for"
            )
        return read_survey_checklists(path, sed, units, candidate, species)
    if sed is not None:
        raise InvalidInputError(
            f"surveys_sed {str(sed)!r} goes with an eBird EBD --surveys, and surveys "
            f"{str(path)!r} is not one (its header lacks GLOBAL UNIQUE IDENTIFIER); drop "
            "--surveys-sed for a CSV of cell_id,detected, or pass the EBD as --surveys"
        )
    return _read_csv(path, units, candidate)


def _read_csv(
    path: str | os.PathLike[str], units: pd.DataFrame, candidate: np.ndarray
) -> SurveyResults:
    """:func:`read_surveys` of a CSV."""
    table, source = _table(path), str(path)
    detected = table["detected"].str.strip()
    bad = ~detected.isin(("0", "1"))
    if bad.any():
        raise DataFileError(
            f"surveys {source!r}: detected must be 0 or 1; rows {_rows(bad.to_numpy())} are "
            "not. Write 1 for a survey that detected the species, 0 for one that did not"
        )
    if "checklists" in table.columns:
        raw = pd.to_numeric(table["checklists"].str.strip(), errors="coerce")
        ok = raw.notna() & (raw >= 1) & (raw == np.floor(raw))
        if not ok.all():
            raise DataFileError(
                f"surveys {source!r}: checklists must be positive integers; rows "
                f"{_rows(~ok.to_numpy())} are not"
            )
        checklists = raw.to_numpy(dtype=np.float64)
    else:
        checklists = np.full(len(table), float(SURVEY_CHECKLISTS))
    ids = table["cell_id"].str.strip()
    known = pd.Index(units["cell_id"].astype(str))
    pos = known.get_indexer(ids)
    for mask, what, fix in (
        (ids.duplicated(keep=False).to_numpy(), "repeat a cell", "one row per cell"),
        (pos < 0, "name cells not in the planning units", "use the cells' cell_id"),
    ):
        if mask.any():
            raise DataFileError(f"surveys {source!r}: rows {_rows(mask)} {what}; {fix}")
    outside = ~np.asarray(candidate, dtype=bool)[pos]
    if outside.any():
        raise DataFileError(
            f"surveys {source!r}: rows {_rows(outside)} name cells that are not candidates "
            "(training, other or locked-out cells); only candidate cells take new surveys"
        )
    return SurveyResults(
        cell_id=units["cell_id"].to_numpy()[pos],
        detected=detected.to_numpy() == "1",
        checklists=checklists,
        source=source,
    )


def locate_points(
    longitude: np.ndarray, latitude: np.ndarray, units: gpd.GeoDataFrame
) -> np.ndarray:
    """The planning unit that contains each point, by position (-1: none).

    The points are transformed from longitude/latitude (EPSG:4326) into the units' CRS and
    matched on the units' spatial index; a point on an edge shared by two units goes to the
    first of them.

    Parameters
    ----------
    longitude, latitude : numpy.ndarray of shape (n,)
        Degrees.
    units : geopandas.GeoDataFrame
        The planning units, in a projected CRS.

    Returns
    -------
    numpy.ndarray of int of shape (n,)

    Examples
    --------
    >>> import shapely
    >>> units = gpd.GeoDataFrame(geometry=[shapely.box(0, 0, 1, 1), shapely.box(1, 0, 2, 1)],
    ...                          crs=4326)
    >>> locate_points(np.array([0.5, 1.5, 5.0]), np.array([0.5, 0.5, 0.5]), units).tolist()
    [0, 1, -1]
    """
    points = gpd.GeoSeries(gpd.points_from_xy(longitude, latitude), crs=4326).to_crs(units.crs)
    point, unit = units.sindex.query(points.to_numpy(), predicate="intersects")
    order = np.lexsort((unit, point))
    point, unit = point[order], unit[order]
    first = np.r_[True, point[1:] != point[:-1]] if point.size else np.zeros(0, dtype=bool)
    out = np.full(len(points), -1, dtype=np.int64)
    out[point[first]] = unit[first]
    return out


def read_survey_checklists(
    ebd: str | os.PathLike[str],
    sed: str | os.PathLike[str],
    units: gpd.GeoDataFrame,
    candidate: np.ndarray,
    species: str,
    filters: ChecklistFilter | None = None,
) -> SurveyResults:
    """New survey results from the new checklists themselves: an eBird EBD and its SED.

    The checklists are read as ``reserve ingest`` reads them
    (:func:`reserve.io.load_observations`: the best-practice filters, shared checklists
    kept once, every checklist a detection or a non-detection of ``species``). Each is put
    in the planning unit that contains it (:func:`locate_points`); a cell's survey is its
    checklists, and it detected the species when any of them did. Checklists outside the
    planning units, and in cells that are not candidates, are left out and counted in
    ``notes``; so is a species no kept checklist reports (every surveyed cell is then a
    non-detection).

    Parameters
    ----------
    ebd, sed : path-like
        EBD and Sampling Event Data text of the new checklists (plain, ``.gz`` or ``.zip``).
    units : geopandas.GeoDataFrame
        The planning units (``cell_id`` and the geometry).
    candidate : numpy.ndarray of bool
        The cells that may take new surveys (the run's candidates).
    species : str
        Common or scientific name, as ``reserve ingest`` takes it.
    filters : reserve.io.ChecklistFilter, optional
        Default ``ChecklistFilter()``: the best-practice defaults of ``reserve ingest``
        (complete checklists, stationary and traveling counts, the effort limits, shared
        checklists once), with no date or region window.

    Returns
    -------
    SurveyResults
        One row per surveyed candidate cell, in the planning units' order.

    Raises
    ------
    InvalidInputError
        No checklist left after the filters (the message names the step that emptied it).
    DataFileError
        Unreadable files; no kept checklist in a candidate cell.
    """
    source = str(ebd)
    obs = load_observations(ebd, sed, species, filters, require_species=False)
    cell = locate_points(
        obs["longitude"].to_numpy(dtype=np.float64),
        obs["latitude"].to_numpy(dtype=np.float64),
        units,
    )
    found = cell >= 0
    kept = found & np.asarray(candidate, dtype=bool)[np.where(found, cell, 0)]
    n_outside, n_other = int((~found).sum()), int((found & ~kept).sum())
    if not kept.any():
        raise DataFileError(
            f"surveys {source!r}: none of its {len(obs)} kept checklists lies in a candidate "
            f"cell ({n_outside} outside the planning units, {n_other} in training, other or "
            "locked-out cells); pass the checklists of surveys of candidate cells"
        )
    positions, inverse = np.unique(cell[kept], return_inverse=True)
    hits = np.bincount(inverse, weights=obs["detected"].to_numpy(dtype=bool)[kept])
    notes = []
    if n_outside:
        notes.append(f"{n_outside} checklists of {source} outside the planning units left out")
    if n_other:
        notes.append(
            f"{n_other} checklists of {source} in training, other or locked-out cells left out "
            "(only candidate cells take new surveys)"
        )
    if not hits.any():
        notes.append(
            f"no kept checklist of {source} reports {species}: the {positions.size} surveyed "
            "cells are non-detections"
        )
    return SurveyResults(
        cell_id=units["cell_id"].to_numpy()[positions],
        detected=hits > 0,
        checklists=np.bincount(inverse).astype(np.float64),
        source=source,
        notes=tuple(notes),
    )


def apply_surveys(
    units: gpd.GeoDataFrame, surveys: SurveyResults, label_column: str = "label"
) -> gpd.GeoDataFrame:
    """The planning units with the surveys' labels and checklists.

    A surveyed cell's label becomes 1 when the new survey or an earlier one detected the
    species, else 0; its ``n_checklists`` grow by the survey's checklists.

    Parameters
    ----------
    units : geopandas.GeoDataFrame
    surveys : SurveyResults
    label_column : str
        The run's species' label column (``label``, or ``label__<species>``).

    Returns
    -------
    geopandas.GeoDataFrame
        A copy.
    """
    out = units.copy()
    pos = pd.Index(out["cell_id"]).get_indexer(surveys.cell_id)
    label = pd.to_numeric(out[label_column], errors="coerce").to_numpy(dtype=np.float64)
    before = np.nan_to_num(label[pos], nan=0.0) == 1
    label[pos] = (before | surveys.detected).astype(np.float64)
    out[label_column] = label
    if "n_checklists" in out.columns:
        n = pd.to_numeric(out["n_checklists"], errors="coerce").to_numpy(dtype=np.float64)
        n = np.nan_to_num(n, nan=0.0)
    else:
        n = np.zeros(len(out))
    n[pos] += surveys.checklists
    out["n_checklists"] = n.astype(np.int64)
    return out


@dataclass(frozen=True)
class Settlement:
    """The chosen cells once the surveyed ones are decided (:func:`settle_selection`).

    Attributes
    ----------
    chosen : numpy.ndarray of int
        Positions in the ranking of the chosen cells, best first: detections, then the
        ranking's order.
    n_detected : int
        Surveyed cells with a detection among the chosen.
    n_dropped : int
        Surveyed cells without one that the ranking chose and the settlement left out.
    """

    chosen: np.ndarray
    n_detected: int
    n_dropped: int


def settle_selection(
    probability: np.ndarray, surveyed: np.ndarray, detected: np.ndarray, k: int
) -> Settlement:
    """Decide the surveyed cells of a ranking: detections first, weak misses out.

    Parameters
    ----------
    probability : numpy.ndarray of shape (n,)
        Each ranked cell's probability of presence given its surveys, in the ranking's
        order (the estimator's chosen cells first).
    surveyed : numpy.ndarray of bool of shape (n,)
        Cells with a new survey.
    detected : numpy.ndarray of bool of shape (n,)
        Surveyed cells whose survey detected the species.
    k : int
        Cells to choose.

    Returns
    -------
    Settlement

    Examples
    --------
    >>> p = np.array([0.9, 0.2, 0.7, 0.6, 0.5])  # cell 1 after a miss
    >>> s = settle_selection(p, np.array([0, 1, 0, 0, 1], bool), np.array([0, 0, 0, 0, 1], bool), 3)
    >>> s.chosen.tolist(), s.n_detected, s.n_dropped
    ([4, 0, 2], 1, 1)
    """
    surveyed = np.asarray(surveyed, dtype=bool)
    hit = surveyed & np.asarray(detected, dtype=bool)
    order = np.arange(probability.size)
    runner_up = order[(order >= k) & ~surveyed]
    bar = float(probability[runner_up[0]]) if runner_up.size else -np.inf
    weak = surveyed & ~hit & (probability < bar)
    first = order[hit][:k]
    rest = order[~hit & ~weak][: k - first.size]
    return Settlement(
        chosen=np.concatenate([first, rest]),
        n_detected=int(first.size),
        n_dropped=int((weak[:k]).sum()),
    )


def survey_detection(
    detection_per_checklist: float, checklists: float = SURVEY_CHECKLISTS
) -> float:
    """Chance that a survey of ``checklists`` checklists detects the species where it is."""
    q = min(max(1.0 - float(detection_per_checklist), 0.0), 1.0)
    return 1.0 - q**checklists


def single_values(p: np.ndarray, d: float | np.ndarray, k: int) -> np.ndarray:
    """Each ranked cell's expected gain from its survey alone (no refit), exactly.

    A cell outside the chosen set (the first ``k`` of the ranking) gains when detected: it
    enters and the ``k``-th leaves, ``p d (1 - p_k)``. A chosen cell gains when missed and
    its probability after the miss, ``p' = p (1 - d) / (1 - p d)``, falls below the best
    cell left out, ``r``, which takes its place: ``(1 - p d) max(0, p_r - p')``.

    Parameters
    ----------
    p : numpy.ndarray of shape (n,) or (B, n)
        Probabilities of presence in the ranking's order (rows: draws of the calibration).
    d : float or numpy.ndarray of shape (B,)
        A survey's chance of detecting the species in an occupied cell (per draw).
    k : int
        Cells chosen.

    Returns
    -------
    numpy.ndarray of shape (n,)
        With draws, the mean over them.
    """
    P = np.atleast_2d(np.asarray(p, dtype=np.float64))
    d = np.broadcast_to(np.asarray(d, dtype=np.float64).reshape(-1, 1), (P.shape[0], 1))
    out = np.zeros(P.shape)
    n = P.shape[1]
    if k < 1 or k >= n:
        return out.mean(axis=0)
    hit = P * d
    out[:, k:] = hit[:, k:] * (1.0 - P[:, k - 1 : k])
    missed = P[:, :k] * (1.0 - d) / np.maximum(1.0 - hit[:, :k], 1e-12)
    out[:, :k] = (1.0 - hit[:, :k]) * np.maximum(P[:, k : k + 1] - missed, 0.0)
    return out.mean(axis=0)


def joint_gain(
    p: np.ndarray, d: float | np.ndarray, k: int, cells: np.ndarray, detected: np.ndarray
) -> np.ndarray:
    """The gain of surveying ``cells`` in each drawn outcome (rows of ``detected``).

    The selection is settled on each outcome as :func:`settle_selection` does, and its
    expected occupied cells, at the probabilities after the outcome, are compared with the
    current chosen set's at the same probabilities. The mean over the draws estimates the
    expected value of the surveys' information.

    Parameters
    ----------
    p : numpy.ndarray of shape (n,) or (B, n)
        Probabilities of presence in the ranking's order; with rows, outcome ``b`` is
        valued at the probabilities of row ``b`` (a draw of the calibration).
    d : float or numpy.ndarray of shape (B,)
        A survey's chance of detecting the species in an occupied cell (per row).
    k : int
        Cells chosen.
    cells : numpy.ndarray of int
        Surveyed positions in the ranking (distinct).
    detected : numpy.ndarray of bool of shape (B, len(cells))
        Drawn outcomes.

    Returns
    -------
    numpy.ndarray of shape (B,)
    """
    cells = np.asarray(cells, dtype=np.int64)
    B = detected.shape[0]
    P = np.asarray(p, dtype=np.float64)
    n = P.shape[-1]
    P = np.broadcast_to(P, (B, n)) if P.ndim == 1 else P
    d = np.broadcast_to(np.asarray(d, dtype=np.float64).reshape(-1, 1), (B, 1))
    top = min(n, k + cells.size + 1)  # a settled set never reaches beyond these
    inside = cells < top
    post = P[:, :top].copy()
    pc = P[:, cells[inside]]
    miss = pc * (1.0 - d) / np.maximum(1.0 - pc * d, 1e-12)
    post[:, cells[inside]] = np.where(detected[:, inside], 1.0, miss)
    surveyed = np.zeros(top, dtype=bool)
    surveyed[cells[inside]] = True
    hit = np.zeros((B, top), dtype=bool)
    hit[:, cells[inside]] = detected[:, inside]
    free = np.flatnonzero(~surveyed[k:]) + k
    bar = P[:, free[0] : free[0] + 1] if free.size else np.full((B, 1), -np.inf)
    # in line: unsurveyed cells, and misses still at least as likely as the runner-up
    keep = ~surveyed[None, :] | (~hit & (post >= bar))
    n_hit = np.minimum(detected.sum(axis=1), k)
    slots = k - n_hit
    filled = np.cumsum(np.where(keep, post, 0.0), axis=1)
    reach = np.minimum((np.cumsum(keep, axis=1) < slots[:, None]).sum(axis=1), top - 1)
    rest = np.where(slots > 0, filled[np.arange(B), reach], 0.0)
    return n_hit + rest - post[:, :k].sum(axis=1)


def expected_joint_gain(
    p: np.ndarray, d: float | np.ndarray, k: int, cells: np.ndarray, uniforms: np.ndarray
) -> float:
    """The expected gain of surveying ``cells`` together, over seeded draws.

    Parameters
    ----------
    p, d, k, cells
        As in :func:`joint_gain` (with rows of ``p``, as many as ``uniforms``).
    uniforms : numpy.ndarray of shape (B, n)
        One uniform draw per outcome and ranked cell: a survey of cell ``j`` detects the
        species in draw ``b`` when ``uniforms[b, j] < p[b, j] d[b]`` (common draws, so the
        gains of different sets are compared on the same outcomes).

    Returns
    -------
    float
    """
    cells = np.asarray(cells, dtype=np.int64)
    if cells.size == 0:
        return 0.0
    P = np.atleast_2d(np.asarray(p, dtype=np.float64))
    dd = np.asarray(d, dtype=np.float64).reshape(-1, 1)
    detected = uniforms[:, cells] < P[:, cells] * dd
    return float(joint_gain(p, d, k, cells, detected).mean())


def calibration_draws(
    calibration: Any,
    score: np.ndarray,
    visits: np.ndarray,
    detected: np.ndarray,
    size: int = VALUE_DRAWS,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Probabilities of presence and survey detections under draws of the calibration.

    A draw picks a link of the :class:`reserve.occupancy.LinkAverage` by its weight, then
    that link's parameters from their Laplace approximation, as the expected count's
    interval does; each cell's probability given its own surveys and a survey's detection
    (:data:`SURVEY_CHECKLISTS` checklists) follow from the drawn parameters.

    Parameters
    ----------
    calibration : reserve.occupancy.LinkAverage
    score, visits, detected : numpy.ndarray of shape (n,)
        The cells' scores, checklists where their label is known, and known detections.
    size : int
        Draws.
    seed : int

    Returns
    -------
    (numpy.ndarray of shape (size, n), numpy.ndarray of shape (size,))
    """
    rng = np.random.default_rng(seed)
    per = rng.multinomial(size, calibration.weights_)
    P, D = [], []
    for member, b in zip(calibration.members_, per, strict=True):
        if b == 0:
            continue
        theta = member.draws(int(b), rng)
        P.append(member.posterior(score, visits, detected, theta))
        q = 1.0 / (1.0 + np.exp(theta[:, -1]))  # a checklist's miss in an occupied cell
        D.append(1.0 - q**SURVEY_CHECKLISTS)
    order = rng.permutation(size)  # the rows of the links interleaved
    return np.vstack(P)[order], np.concatenate(D)[order]


@dataclass(frozen=True)
class Habitat:
    """The refit's approximation: a kernel regression of the labels on the habitat.

    A survey's label at cell ``j`` moves each ranked cell ``i``'s probability of presence by
    ``REFIT_STRENGTH * w_ij (y_j - p_j) / (mass_i + REFIT_PRIOR)``: ``y_j`` is ``j``'s
    probability after the outcome (1 after a detection), ``w_ij`` a Gaussian kernel of their
    distance in standardised habitat features, ``mass_i`` the kernel weight of the cells the
    model learned from near ``i`` (a cell in well-labelled habitat moves less). The shift has
    mean zero over the outcomes, so the value of a label is the gain of the best ``k`` cells
    it may reorder. Build with :meth:`from_features`.

    Attributes
    ----------
    Z : numpy.ndarray of shape (n, p)
        The ranked cells' standardised habitat features.
    width : float
        The kernel's width.
    mass : numpy.ndarray of shape (n,)
        Each ranked cell's labelled weight ``sum_t exp(-d_it^2 / (2 width^2))``.
    """

    Z: np.ndarray
    width: float
    mass: np.ndarray

    @classmethod
    def from_features(cls, Z: np.ndarray, labelled: np.ndarray) -> Habitat:
        """The approximation for ranked cells ``Z`` and the labelled cells' features.

        Parameters
        ----------
        Z : numpy.ndarray of shape (n, p)
            The ranked cells' standardised habitat features (no missing values).
        labelled : numpy.ndarray of shape (n_labelled, p)
            The features of the cells the model learned from.

        Returns
        -------
        Habitat
        """
        Z = np.asarray(Z, dtype=np.float64)
        L = np.asarray(labelled, dtype=np.float64)
        if L.shape[0] == 0:  # nothing labelled: no habitat is covered
            return cls(Z, 1.0, np.zeros(Z.shape[0]))
        kth = min(REFIT_NEIGHBOURS, L.shape[0]) - 1
        d2 = [_sq_distances(Z[s : s + 2048], L) for s in range(0, Z.shape[0], 2048)]
        near = np.sqrt(np.concatenate([np.partition(x, kth, axis=1)[:, kth] for x in d2]))
        width = REFIT_WIDTH * max(float(np.median(near)), 1e-6)
        mass = np.concatenate([np.exp(-x / (2.0 * width**2)).sum(axis=1) for x in d2])
        return cls(Z, width, mass)

    @classmethod
    def from_problem(cls, problem: Any, cell_id: np.ndarray) -> Habitat:
        """The approximation for a run's ranked cells ``cell_id``.

        Parameters
        ----------
        problem : reserve.design.Problem
            The run's problem: its habitat features (not the effort covariates), standardised
            on the fitted cells, and the cells it learned from (training and learned).
        cell_id : numpy.ndarray
            The ranked cells, in the ranking's order.

        Returns
        -------
        Habitat
        """
        habitat = [i for i, f in enumerate(problem.features) if f not in problem.effort]
        X = np.asarray(problem.X, dtype=np.float64)[:, habitat]
        known = np.isfinite(X)
        fitted = (problem.train | problem.candidate)[:, None] & known
        n = np.maximum(fitted.sum(axis=0), 1)
        mu = np.where(fitted, X, 0.0).sum(axis=0) / n
        sd = np.sqrt(np.where(fitted, (X - mu) ** 2, 0.0).sum(axis=0) / n)
        # a missing feature sits at the mean
        Z = np.where(known, (X - mu) / np.where(sd > 0, sd, 1.0), 0.0)
        labelled = problem.train if problem.learned is None else problem.train | problem.learned
        at = pd.Index(problem.units["cell_id"]).get_indexer(cell_id)
        return cls.from_features(Z[at], Z[labelled])

    def weights(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Kernel weights between ranked cells ``rows`` and ``cols``, shape (rows, cols)."""
        return np.exp(-_sq_distances(self.Z[rows], self.Z[cols]) / (2.0 * self.width**2))


def _sq_distances(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    d2 = (A**2).sum(axis=1)[:, None] - 2.0 * A @ B.T + (B**2).sum(axis=1)[None, :]
    return np.maximum(d2, 0.0)


def refit_spillover(
    p: np.ndarray,
    d: float,
    k: int,
    habitat: Habitat,
    cells: np.ndarray,
    mass: np.ndarray | None = None,
) -> np.ndarray:
    """Each cell's expected gain through the refit: its label moving the cells like it.

    The gain of the best ``k`` cells in contention (presence unknown, or chosen) at the
    probabilities after the outcome over the best ``k`` now, in expectation over a
    detection and a miss (:class:`Habitat`); the surveyed cell itself is left at its
    probability (its own outcome is :func:`single_values`).

    Parameters
    ----------
    p : numpy.ndarray of shape (n,)
        Probabilities of presence in the ranking's order.
    d : float
        A survey's chance of detecting the species in an occupied cell.
    k : int
        Cells chosen.
    habitat : Habitat
    cells : numpy.ndarray of int
        The surveys to value (positions in the ranking).
    mass : numpy.ndarray of shape (n,) or None
        Labelled weights (default ``habitat.mass``; a plan adds its own surveys').

    Returns
    -------
    numpy.ndarray of shape (len(cells),)
    """
    p = np.asarray(p, dtype=np.float64)
    cells = np.asarray(cells, dtype=np.int64)
    n = p.size
    out = np.zeros(cells.size)
    if k < 1 or k >= n or cells.size == 0:
        return out
    mass = habitat.mass if mass is None else mass
    contention = (p < 1.0) | (np.arange(n) < k)
    kth = np.sort(p[contention])[-k]
    # the most one label moves a cell (a detection on record: presence known, it stays)
    reach = np.where(p < 1.0, REFIT_STRENGTH / (mass + REFIT_PRIOR), 0.0)
    band = np.flatnonzero(contention & (p + reach >= kth))
    pb, rb = p[band], reach[band]
    pb32 = pb.astype(np.float32)
    now = float(np.sort(pb32)[-k:].sum(dtype=np.float64))
    at = np.full(n, -1)
    at[band] = np.arange(band.size)
    miss = p * (1.0 - d) / np.maximum(1.0 - p * d, 1e-12)
    step = max(16, 2_000_000 // band.size)
    for s in range(0, cells.size, step):
        j = cells[s : s + step]
        w = (habitat.weights(j, band) * rb[None, :]).astype(np.float32)
        own = at[j]
        rows = np.flatnonzero(own >= 0)
        for after, chance in ((np.ones(j.size), p[j] * d), (miss[j], 1.0 - p[j] * d)):
            post = pb32[None, :] + (after - p[j]).astype(np.float32)[:, None] * w
            np.clip(post, 0.0, 1.0, out=post)
            post[rows, own[rows]] = pb32[own[rows]]
            top = np.partition(post, band.size - k, axis=1)[:, band.size - k :]
            out[s : s + step] += chance * (top.sum(axis=1, dtype=np.float64) - now)
    return out


@dataclass(frozen=True)
class Plan:
    """The suggested surveys, in the order they were chosen.

    Attributes
    ----------
    cells : numpy.ndarray of int
        Positions in the ranking.
    gain : numpy.ndarray of float
        Each cell's marginal expected gain when it was added (its share of the outcomes'
        joint gain, and its value through the refit).
    total : float
        The plan's expected gain: the joint gain of its outcomes and the refit's values.
    cluster : numpy.ndarray of int
        Each cell's cluster (1 = the first started; 0 without clusters).
    refit : numpy.ndarray of float
        Each cell's value through the refit when it was added (:func:`refit_spillover`;
        zeros without a habitat).
    """

    cells: np.ndarray
    gain: np.ndarray
    total: float
    cluster: np.ndarray
    refit: np.ndarray


def _neighbours(adjacency: list[np.ndarray] | None, chosen: list[int]) -> set[int]:
    if adjacency is None:
        return set()
    return {int(j) for i in chosen for j in adjacency[i]} - set(chosen)


def plan_surveys(
    p: np.ndarray,
    d: float,
    k: int,
    m: int,
    *,
    seed: int = 0,
    clusters: int | None = None,
    adjacency: list[np.ndarray] | None = None,
    eligible: np.ndarray | None = None,
    draws: tuple[np.ndarray, np.ndarray] | None = None,
    habitat: Habitat | None = None,
) -> Plan:
    """Choose ``m`` surveys by their expected value, and value the plan jointly.

    A cell's value is its survey's gain alone (:func:`single_values`) and, with
    ``habitat``, the gain through the refit (:func:`refit_spillover`). Each step adds the
    eligible cell of highest value (ties to the better ranked cell); a suggested survey
    counts as labelled for the values after it (the habitat's mass grows by its kernel), so
    the next survey in the same habitat is worth less (lazy greedy: a value is recomputed
    when its cell comes first). With ``clusters``, only cells that touch a suggested cell
    are eligible once ``clusters`` areas are started. The plan's expected gain is the joint
    expected gain of its outcomes (:func:`expected_joint_gain`, seeded draws) plus the
    refit's marginal values.

    Parameters
    ----------
    p : numpy.ndarray of shape (n,)
        Probabilities of presence in the ranking's order.
    d : float
        A survey's chance of detecting the species in an occupied cell.
    k : int
        Cells chosen.
    m : int
        Surveys to suggest.
    seed : int
        Seed of the outcome draws.
    clusters : int or None
        Most contiguous areas of the plan.
    adjacency : list of numpy.ndarray or None
        Each ranked cell's edge neighbours among the ranked cells (with ``clusters``).
    eligible : numpy.ndarray of bool or None
        Cells that may be suggested (default every cell).
    draws : (numpy.ndarray of shape (B, n), numpy.ndarray of shape (B,)) or None
        Probabilities and detections under draws of the calibration
        (:func:`calibration_draws`) for the values alone and the joint gain; None values
        everything at ``p`` and ``d``.
    habitat : Habitat or None
        The refit's approximation; None values each survey by its own outcome alone.

    Returns
    -------
    Plan
    """
    n = p.size
    eligible = np.ones(n, dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    vp, vd = (p, d) if draws is None else draws
    alone = single_values(vp, vd, k)
    value = np.where(eligible, alone, -np.inf)
    if habitat is not None:
        free = np.flatnonzero(eligible)
        value[free] += refit_spillover(p, d, k, habitat, free)
    mass = None if habitat is None else habitat.mass.copy()
    spill = np.zeros(n)
    chosen: list[int] = []
    area = np.zeros(n, dtype=np.int64)
    for _ in range(min(m, int(eligible.sum()))):
        pool = _pool(value, chosen, clusters, adjacency, area)
        if pool.size == 0:
            break
        cell = _best(pool, value, alone, (p, d, k), habitat, mass, spill)
        near = [area[j] for j in (adjacency[cell] if adjacency is not None else ()) if area[j]]
        area[cell] = min(near) if near else area.max() + 1
        chosen.append(cell)
        value[cell] = -np.inf
        if mass is not None:
            mass += habitat.weights(np.arange(n), np.array([cell]))[:, 0]
    cells = np.array(chosen, dtype=np.int64)
    rows = VALUE_DRAWS if draws is None else vp.shape[0]
    uniforms = np.random.default_rng(seed).random((rows, n))
    totals = np.array(
        [expected_joint_gain(vp, vd, k, cells[: i + 1], uniforms) for i in range(cells.size)]
    )
    gains = np.diff(np.r_[0.0, totals]) + spill[cells]
    cluster = area[cells] if clusters is not None else np.zeros(cells.size, dtype=np.int64)
    return Plan(cells, gains, float(gains.sum()), cluster, spill[cells])


def _pool(
    value: np.ndarray,
    chosen: list[int],
    clusters: int | None,
    adjacency: list[np.ndarray] | None,
    area: np.ndarray,
) -> np.ndarray:
    """The cells the next survey may be: eligible, not yet suggested, and with ``clusters``
    areas started, touching a suggested cell."""
    if clusters is not None and area.max() >= clusters:
        near = np.array(sorted(_neighbours(adjacency, chosen)), dtype=np.int64)
        return near[np.isfinite(value[near])] if near.size else near
    return np.flatnonzero(np.isfinite(value))


def _best(
    pool: np.ndarray,
    value: np.ndarray,
    alone: np.ndarray,
    ranking: tuple[np.ndarray, float, int],
    habitat: Habitat | None,
    mass: np.ndarray | None,
    spill: np.ndarray,
) -> int:
    """The pool's cell of highest value, refit values brought up to date (lazy greedy:
    values only fall as the plan labels more habitat, so the leaders are recomputed, a batch
    at a time, until the best fresh value beats every stale one); ``spill`` records it."""
    fresh = np.zeros(value.size, dtype=bool)
    while True:
        order = pool[np.lexsort((pool, -value[pool]))]
        if habitat is None or fresh[order[0]]:
            cell = int(order[0])
            spill[cell] = value[cell] - alone[cell]
            return cell
        lead = order[:LAZY_BATCH][~fresh[order[:LAZY_BATCH]]]
        p, d, k = ranking
        value[lead] = alone[lead] + refit_spillover(p, d, k, habitat, lead, mass)
        fresh[lead] = True


def _why(alone: np.ndarray, refit: np.ndarray, novel: np.ndarray) -> np.ndarray:
    """``near the cut``, ``outside the surveyed habitat`` or ``both`` (see the module)."""
    cut = alone > 0
    outside = novel | (refit > alone)
    return np.where(
        cut & outside, "both", np.where(outside, "outside the surveyed habitat", "near the cut")
    )


def _ranked_adjacency(geometry: np.ndarray) -> list[np.ndarray]:
    """Each cell's edge neighbours among the given cells (positions)."""
    adj = grid_adjacency(geometry)
    pairs = np.concatenate([np.c_[adj.i, adj.j], np.c_[adj.j, adj.i]])
    pairs = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    starts = np.searchsorted(pairs[:, 0], np.arange(adj.n + 1))
    return [pairs[starts[i] : starts[i + 1], 1] for i in range(adj.n)]


def suggest_surveys(
    ranking: pd.DataFrame,
    planning_units: gpd.GeoDataFrame,
    detection_per_checklist: float,
    m: int,
    *,
    clusters: int | None = None,
    seed: int = 0,
    problem: Any = None,
) -> tuple[gpd.GeoDataFrame, float]:
    """The ``survey_next`` layer: the ``m`` candidate cells best surveyed before buying.

    Parameters
    ----------
    ranking : pandas.DataFrame
        The run's ranking (:attr:`reserve.result.SelectionResult.ranking`: ``cell_id``,
        ``selected``, ``locked_in``, ``probability``, ``novel``, ``longitude``,
        ``latitude``), best first.
    planning_units : geopandas.GeoDataFrame
        The run's cells (their geometry).
    detection_per_checklist : float
        The calibration's detection per checklist.
    m : int
        Surveys to suggest (at most the ranked cells that are not locked in).
    clusters : int or None
        Most contiguous areas of the plan (:func:`plan_surveys`).
    seed : int
        Seed of the outcome draws.
    problem : reserve.design.Problem or None
        The run's problem, for the refit's approximation (:meth:`Habitat.from_problem`);
        None values each survey by its own outcome alone.

    Returns
    -------
    (geopandas.GeoDataFrame, float)
        The layer (:data:`SURVEY_NEXT_COLUMNS` and the geometry, by ``rank``) and the joint
        expected gain of the plan.
    """
    free = ranking[~ranking["locked_in"].astype(bool)].reset_index(drop=True)
    p = np.nan_to_num(free["probability"].to_numpy(dtype=np.float64), nan=0.0)
    k = int(free["selected"].astype(bool).sum())
    d = survey_detection(detection_per_checklist)
    geometry = planning_units.set_index("cell_id").geometry.loc[free["cell_id"]].to_numpy()
    adjacency = _ranked_adjacency(geometry) if clusters is not None else None
    unknown = p < 1.0  # a detection on record: its survey cannot tell anything more
    habitat = None if problem is None else Habitat.from_problem(problem, free["cell_id"])
    plan = plan_surveys(
        p,
        d,
        k,
        m,
        seed=seed,
        clusters=clusters,
        adjacency=adjacency,
        eligible=unknown,
        habitat=habitat,
    )
    rows = free.iloc[plan.cells]
    novel = rows["novel"].astype(bool).to_numpy() if "novel" in rows else np.zeros(len(rows), bool)
    alone = single_values(p, d, k)[plan.cells]
    table = pd.DataFrame(
        {
            "rank": np.arange(1, plan.cells.size + 1),
            "cell_id": rows["cell_id"].to_numpy(),
            "why": _why(alone, plan.refit, novel),
            "expected_gain": plan.gain,
            "value_alone": alone,
            "value_refit": plan.refit,
            "probability": p[plan.cells],
            "p_detect": p[plan.cells] * d,
            "selected": rows["selected"].astype(bool).to_numpy(),
            "novel": novel,
            "cluster": plan.cluster,
            "longitude": rows["longitude"].to_numpy(),
            "latitude": rows["latitude"].to_numpy(),
        }
    )
    layer = gpd.GeoDataFrame(table, geometry=geometry[plan.cells], crs=planning_units.crs)
    return layer, plan.total
