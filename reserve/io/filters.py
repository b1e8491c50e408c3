"""The eBird best-practice filters of checklists, and the one object that holds their settings.

Each step is a small function over a parsed SED table (:mod:`reserve.io.parse`); each docstring
states the columns it needs. :class:`ChecklistFilter` holds the settings of every step, with the
best-practice defaults (Strimas-Mackey et al.) of :data:`reserve.config.INGEST_DEFAULTS`, and is
what the readers, :func:`reserve.ingest.ingest` and ``reserve ingest`` pass around.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import shapely

from reserve.config import INGEST_DEFAULTS
from reserve.errors import InvalidInputError
from reserve.io.log import FilterLog
from reserve.io.parse import clean_text, drop_malformed, parse_sampling

__all__ = [
    "ChecklistFilter",
    "deduplicate_groups",
    "drop_repeated_events",
    "empty_message",
    "filter_checklists",
    "filter_complete",
    "filter_dates",
    "filter_effort",
    "filter_protocol",
    "filter_region",
    "with_checklist_id",
]


def filter_complete(checklists: pd.DataFrame) -> pd.DataFrame:
    """Keep complete checklists only (``ALL SPECIES REPORTED = 1``).

    Precondition: a boolean ``all_species_reported`` column (see :func:`reserve.io.parse_sampling`).
    Only complete checklists say anything about absence, so zero-filling needs them.
    """
    return checklists[checklists["all_species_reported"].to_numpy(dtype=bool)]


def filter_protocol(
    checklists: pd.DataFrame, protocols: Sequence[str] = INGEST_DEFAULTS.protocols
) -> pd.DataFrame:
    """Keep the named protocols (default Stationary and Traveling), ignoring case.

    Precondition: a text ``protocol_type`` column (``PROTOCOL TYPE`` or ``PROTOCOL NAME``).
    """
    wanted = {p.strip().lower() for p in protocols}
    return checklists[clean_text(checklists["protocol_type"]).str.lower().isin(wanted).to_numpy()]


def filter_effort(
    checklists: pd.DataFrame,
    *,
    max_hours: float | None = INGEST_DEFAULTS.max_hours,
    max_km: float | None = INGEST_DEFAULTS.max_km,
    max_observers: int | None = INGEST_DEFAULTS.max_observers,
    max_speed_kmh: float | None = INGEST_DEFAULTS.max_speed_kmh,
) -> pd.DataFrame:
    """Keep checklists within the effort limits (duration, distance, party size, speed).

    Precondition: numeric ``duration_minutes``, ``effort_distance_km``, ``number_observers`` and
    a text ``protocol_type``. A stationary count travels 0 km (its distance is blank in the
    files); any other missing value fails its limit, as in the best-practice guide. A limit set
    to ``None`` is not applied (and its missing values pass). The returned table has the
    stationary distances set to 0.

    Examples
    --------
    >>> t = pd.DataFrame({"duration_minutes": [60.0, 420.0, 6.0], "protocol_type":
    ...     ["Stationary", "Traveling", "Traveling"], "effort_distance_km": [np.nan, 1.0, 9.0],
    ...     "number_observers": [1.0, 1.0, 1.0]})
    >>> filter_effort(t).index.tolist()  # 7 h is too long; 9 km in 6 min is 90 km/h, allowed
    [0, 2]
    """
    hours = checklists["duration_minutes"].to_numpy(dtype=float) / 60.0
    km = checklists["effort_distance_km"].to_numpy(dtype=float)
    stationary = (clean_text(checklists["protocol_type"]).str.lower() == "stationary").to_numpy()
    km = np.where(stationary & np.isnan(km), 0.0, km)
    observers = checklists["number_observers"].to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        speed = np.where(km == 0, 0.0, km / hours)
    ok = np.ones(len(checklists), dtype=bool)
    for values, limit in (
        (hours, max_hours),
        (km, max_km),
        (observers, max_observers),
        (speed, max_speed_kmh),
    ):
        if limit is not None:
            ok &= values <= limit
    out = checklists[ok].copy()
    out["effort_distance_km"] = km[ok]
    return out


def filter_dates(
    checklists: pd.DataFrame,
    *,
    start_date: str | None = None,
    end_date: str | None = None,
    months: Sequence[int] | None = None,
    years: Sequence[int] | None = None,
) -> pd.DataFrame:
    """Keep checklists inside a date window (inclusive), a set of months and a set of years.

    Precondition: a datetime ``observation_date`` column. Every criterion left ``None`` keeps
    everything.
    """
    dates = checklists["observation_date"]
    ok = np.ones(len(checklists), dtype=bool)
    if start_date is not None:
        ok &= (dates >= _date(start_date, "start_date")).to_numpy()
    if end_date is not None:
        ok &= (dates <= _date(end_date, "end_date")).to_numpy()
    if months is not None:
        ok &= dates.dt.month.isin(list(months)).to_numpy()
    if years is not None:
        ok &= dates.dt.year.isin(list(years)).to_numpy()
    return checklists[ok]


def _date(value: str, name: str) -> pd.Timestamp:
    try:
        return pd.Timestamp(_dt.date.fromisoformat(str(value)))
    except ValueError:
        raise InvalidInputError(
            f"{name}={value!r} is not a date; pass it as YYYY-MM-DD, e.g. 2018-05-01"
        ) from None


def filter_region(
    checklists: pd.DataFrame,
    *,
    bbox: Sequence[float] | None = None,
    polygon: shapely.Geometry | None = None,
) -> pd.DataFrame:
    """Keep checklists inside a longitude/latitude box and/or a polygon (boundary included).

    Parameters
    ----------
    checklists : DataFrame
        Precondition: numeric ``longitude`` and ``latitude`` (WGS84 degrees).
    bbox : (min_lon, min_lat, max_lon, max_lat), optional
    polygon : shapely geometry in longitude/latitude, optional
    """
    lon = checklists["longitude"].to_numpy(dtype=float)
    lat = checklists["latitude"].to_numpy(dtype=float)
    ok = np.ones(len(checklists), dtype=bool)
    if bbox is not None:
        x0, y0, x1, y1 = bbox
        ok &= (lon >= x0) & (lon <= x1) & (lat >= y0) & (lat <= y1)
    if polygon is not None:
        shapely.prepare(polygon)
        ok &= shapely.intersects_xy(polygon, lon, lat)
    return checklists[ok]


def drop_repeated_events(checklists: pd.DataFrame, log: FilterLog | None = None) -> pd.DataFrame:
    """Keep one of the identical rows of a sampling event; refuse an event whose rows differ.

    A line repeated in the SED (a copy-paste, two downloads concatenated) is harmless once
    dropped. Two rows of one ``sampling_event_identifier`` that differ (other coordinates, date
    or effort) cannot both be right, and no rule can tell which is. When rows are dropped,
    ``log`` (if given) records them as step ``sed:repeated_rows``.

    Raises
    ------
    InvalidInputError
        When an identifier has rows that differ; the message names up to three identifiers
        and the columns in which they differ.

    Examples
    --------
    >>> t = pd.DataFrame({"sampling_event_identifier": ["S1", "S2", "S1"],
    ...                   "latitude": [35.0, 36.0, 35.0]})
    >>> drop_repeated_events(t)["sampling_event_identifier"].tolist()
    ['S1', 'S2']
    """
    unique = checklists
    if checklists["sampling_event_identifier"].duplicated().any():
        unique = _one_row_per_event(checklists)
    if log is not None:
        log.record(
            "sed",
            "repeated_rows",
            kept=len(unique),
            dropped=len(checklists) - len(unique),
            detail="identical rows of one sampling event",
        )
    return unique


def _one_row_per_event(checklists: pd.DataFrame) -> pd.DataFrame:
    """The first of each event's identical rows (see :func:`drop_repeated_events`).

    Columns named with a leading underscore (a reader's own row numbers) are not compared.
    """
    data = [c for c in checklists.columns if not str(c).startswith("_")]
    unique = checklists.drop_duplicates(subset=data)
    clash = unique["sampling_event_identifier"].duplicated(keep=False).to_numpy()
    if clash.any():
        rows = unique[clash]
        ids = sorted(rows["sampling_event_identifier"].astype(str).unique())
        by_id = rows.groupby("sampling_event_identifier")
        differ = [c for c in data if (by_id[c].nunique(dropna=False) > 1).any()]
        shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        raise InvalidInputError(
            f"the SED has {len(ids)} sampling event(s) on several rows that differ ({shown}; "
            f"in {', '.join(differ)}): the file is damaged or two versions were joined. Keep "
            "one row per SAMPLING EVENT IDENTIFIER (download the SED again)"
        )
    return unique.reset_index(drop=True)


def deduplicate_groups(checklists: pd.DataFrame) -> pd.DataFrame:
    """Keep one checklist per shared-checklist group and give every row a ``checklist_id``.

    Precondition: ``sampling_event_identifier`` and ``group_identifier`` (NaN when not shared).
    ``checklist_id`` is the group identifier for shared checklists and the sampling event
    identifier otherwise. Of a group, the member with the smallest sampling event identifier
    (as text) is kept, so the result does not depend on row order. Run it *after* the other
    filters, so the member kept is one that passed them.

    Examples
    --------
    >>> t = pd.DataFrame({"sampling_event_identifier": ["S2", "S1", "S3"],
    ...                   "group_identifier": ["G1", "G1", np.nan]})
    >>> deduplicate_groups(t)[["sampling_event_identifier", "checklist_id"]].values.tolist()
    [['S1', 'G1'], ['S3', 'S3']]
    """
    out = with_checklist_id(checklists)
    out = out.sort_values(["checklist_id", "sampling_event_identifier"], kind="stable")
    return out.drop_duplicates("checklist_id", keep="first").reset_index(drop=True)


def with_checklist_id(checklists: pd.DataFrame, *, groups: bool = True) -> pd.DataFrame:
    """Add ``checklist_id``: the group identifier when ``groups`` and shared, else the event id."""
    out = checklists.copy()
    sid = out["sampling_event_identifier"]
    out["checklist_id"] = out["group_identifier"].fillna(sid) if groups else sid
    return out


@dataclass(frozen=True)
class ChecklistFilter:
    """The eBird best-practice filters of checklists, with their defaults.

    The readers (:func:`reserve.io.read_checklists`, :func:`reserve.io.load_observations`),
    :func:`reserve.ingest.ingest` and ``reserve ingest`` take one of these instead of a
    keyword per filter. The values are checked when the object is made.

    Parameters
    ----------
    complete : bool
        Keep complete checklists only (``ALL SPECIES REPORTED = 1``).
    protocols : sequence of str or None
        Protocols kept, compared case-insensitively; ``None`` keeps all.
    max_hours, max_km, max_observers, max_speed_kmh : float or None
        Effort limits (duration, distance, party size, speed); ``None`` removes a limit.
    start_date, end_date : str, optional
        Inclusive ISO dates (``YYYY-MM-DD``).
    months, years : sequence of int, optional
        Months (1..12) and years kept.
    bbox : (min_lon, min_lat, max_lon, max_lat), optional
        Keep checklists inside this longitude/latitude box.
    polygon : shapely geometry in longitude/latitude, optional
        Keep checklists inside this polygon (:func:`reserve.ingest.ingest` sets it to its
        ``region``).
    deduplicate : bool
        Keep one checklist per shared-checklist group (``GROUP IDENTIFIER``); applied by
        :func:`reserve.io.load_observations` once the members are linked to their detections.

    Examples
    --------
    >>> f = ChecklistFilter(months=[5, 6], max_km=None)
    >>> f.months, f.effort_limits()["max_km"], f.effort_limits()["max_hours"]
    ((5, 6), None, 6.0)
    >>> ChecklistFilter(months=[13])
    Traceback (most recent call last):
    ...
    reserve.errors.InvalidInputError: months=[13] has [13]; pass integers 1..12
    """

    complete: bool = True
    protocols: tuple[str, ...] | None = INGEST_DEFAULTS.protocols
    max_hours: float | None = INGEST_DEFAULTS.max_hours
    max_km: float | None = INGEST_DEFAULTS.max_km
    max_observers: int | None = INGEST_DEFAULTS.max_observers
    max_speed_kmh: float | None = INGEST_DEFAULTS.max_speed_kmh
    start_date: str | None = None
    end_date: str | None = None
    months: tuple[int, ...] | None = None
    years: tuple[int, ...] | None = None
    bbox: tuple[float, float, float, float] | None = None
    polygon: shapely.Geometry | None = None
    deduplicate: bool = True

    def __post_init__(self) -> None:
        for name, value in self._limits().items():
            if value is not None and not (np.isfinite(value) and value >= 0):
                raise InvalidInputError(
                    f"{name}={value!r} must be a number >= 0 (or None for no limit)"
                )
        if self.months is not None:
            bad = [m for m in self.months if int(m) != m or not 1 <= int(m) <= 12]
            if bad:
                raise InvalidInputError(
                    f"months={list(self.months)!r} has {bad}; pass integers 1..12"
                )
        protocols = self.protocols
        if isinstance(protocols, str):
            protocols = (protocols,)
        self._set("protocols", None if protocols is None else tuple(protocols))
        self._set("months", None if self.months is None else tuple(self.months))
        self._set("years", None if self.years is None else tuple(self.years))
        if self.bbox is not None:
            bbox = tuple(float(v) for v in self.bbox)
            if len(bbox) != 4 or not (bbox[0] < bbox[2] and bbox[1] < bbox[3]):
                raise InvalidInputError(
                    f"bbox={bbox!r} must be (min_lon, min_lat, max_lon, max_lat) with min < max"
                )
            self._set("bbox", bbox)
        for name, value in (("start_date", self.start_date), ("end_date", self.end_date)):
            if value is not None:
                _date(value, name)

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # normalising a frozen dataclass at creation

    def _limits(self) -> dict[str, float | None]:
        return {
            "max_hours": self.max_hours,
            "max_km": self.max_km,
            "max_observers": self.max_observers,
            "max_speed_kmh": self.max_speed_kmh,
        }

    def effort_limits(self) -> dict[str, float | None] | None:
        """The keywords of :func:`filter_effort` as floats; ``None`` when no limit is set."""
        limits = self._limits()
        if all(v is None for v in limits.values()):
            return None
        return {k: (None if v is None else float(v)) for k, v in limits.items()}

    def date_window(self) -> dict[str, Any]:
        """The keywords of :func:`filter_dates` (months and years as lists)."""
        return {
            "start_date": self.start_date,
            "end_date": self.end_date,
            "months": None if self.months is None else list(self.months),
            "years": None if self.years is None else list(self.years),
        }


def filter_checklists(text: pd.DataFrame, log: FilterLog, filters: ChecklistFilter) -> pd.DataFrame:
    """Parse one chunk of SED text and apply every row-level filter, recording counts.

    Steps, in order: malformed rows, complete checklists, protocol, effort, dates, region.
    Group de-duplication is not a row-level step (see :func:`deduplicate_groups`).
    """
    log.record("sed", "read", kept=len(text), dropped=0)
    frame = parse_sampling(text)
    frame = log.apply("sed", "malformed", drop_malformed, frame, detail="id, lat, lon or date")
    if filters.complete:
        frame = log.apply("sed", "complete", filter_complete, frame, detail="ALL SPECIES = 1")
    if filters.protocols is not None:
        detail = ",".join(filters.protocols)
        frame = log.apply(
            "sed", "protocol", filter_protocol, frame, protocols=filters.protocols, detail=detail
        )
    effort = filters.effort_limits()
    if effort is not None:
        detail = ", ".join(f"{k}={v}" for k, v in effort.items())
        frame = log.apply("sed", "effort", filter_effort, frame, detail=detail, **effort)
    dates = filters.date_window()
    if any(v is not None for v in dates.values()):
        detail = ", ".join(f"{k}={v}" for k, v in dates.items() if v is not None)
        frame = log.apply("sed", "dates", filter_dates, frame, detail=detail, **dates)
    bbox, polygon = filters.bbox, filters.polygon
    if bbox is not None or polygon is not None:
        detail = f"bbox={tuple(bbox)}" if bbox is not None else "polygon"
        frame = log.apply(
            "sed", "region", filter_region, frame, detail=detail, bbox=bbox, polygon=polygon
        )
    return frame


def empty_message(sed: str | os.PathLike[str], log: FilterLog) -> str:
    """The error message when no checklist of ``sed`` is left: names the step that emptied it."""
    read = log.kept("sed", "read")
    if read == 0:
        return (
            f"sed={str(sed)!r} has no data rows (only a header); pass a non-empty Sampling "
            "Event Data file"
        )
    step = "the filters"
    for (table, name), (kept, dropped) in log.counts.items():
        if table == "sed" and kept == 0 and dropped > 0:
            step = f"{table}:{name} ({log.details.get((table, name), '')})"
            break
    return (
        f"no checklist of sed={str(sed)!r} is left after filtering ({read} read); the last rows "
        f"were dropped by {step}. Fix: widen the region / dates or relax the effort limits"
    )
