"""Read the eBird Basic Dataset (EBD) and Sampling Event Data (SED) and apply the best practices.

This module turns eBird text files into two tables and knows nothing of grids or rasters:

* **checklists**: one row per sampling event of the SED that passes the filters, with
  ``checklist_id``, ``latitude``, ``longitude``, ``observation_date``, ``duration_minutes``,
  ``effort_distance_km``, ``number_observers``;
* **detections**: the EBD rows of one target species, rolled up to species level.

:func:`zero_fill` joins them: a checklist with no EBD row for the species is a non-detection.
Several species can be read in one pass (``species=["Wood Thrush", "Veery"]``): the EBD is
streamed once, the rows of every species are tagged with the name asked for, and each species
is zero-filled against the same checklists (columns ``detected__<slug>``,
``observation_count__<slug>``, see :func:`reserve.config.species_slug`).
:func:`load_observations` runs the whole sequence in the order of the eBird best-practice guide
(Strimas-Mackey et al.) and records, in a :class:`FilterLog`, how many rows every step kept and
dropped.

Reading
-------
Both EBD column layouts in circulation are accepted: the older one (``PROTOCOL TYPE``,
``PROJECT CODE``, ``TRIP COMMENTS``) and the newer one (``OBSERVATION TYPE``, ``PROTOCOL NAME``,
``PROJECT NAMES`` / ``PROJECT IDENTIFIERS``, ``CHECKLIST COMMENTS``). Header names are trimmed and
made lower_snake (``" LOCALITY TYPE"`` becomes ``locality_type``) and the newer names are mapped
onto one canonical set (``protocol_name`` becomes ``protocol_type``). Files may be plain text,
gzip or zip (detected from their first bytes). Every column is read as text, then the columns
used are parsed; rows that do not parse are counted as *malformed* and dropped. Files are
streamed in chunks of ``chunksize`` rows, so memory depends on the rows kept, not the file size.

Each best-practice step is a small function over a parsed table (``filter_complete``,
``filter_protocol``, ``filter_effort``, ``filter_dates``, ``filter_region``,
``deduplicate_groups``, ``rollup_species``, ``zero_fill``); each docstring states the columns it
needs.
"""

from __future__ import annotations

import csv
import datetime as _dt
import difflib
import gzip
import io
import os
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd
import shapely

from reserve.config import INGEST_DEFAULTS, species_slug
from reserve.errors import DataFileError, InvalidInputError, MissingDependencyError

__all__ = [
    "COUNT_PREFIX",
    "DETECTED_PREFIX",
    "EBD_REQUIRED",
    "SED_REQUIRED",
    "DaskObservations",
    "FilterLog",
    "dask_client",
    "dask_observations",
    "deduplicate_groups",
    "filter_complete",
    "filter_dates",
    "filter_effort",
    "filter_protocol",
    "filter_region",
    "iter_table",
    "link_detections",
    "load_observations",
    "normalise_columns",
    "parse_detections",
    "parse_sampling",
    "read_checklists",
    "read_detections",
    "read_header",
    "rollup_species",
    "species_list",
    "split_by",
    "zero_fill",
]

#: Newer (and a few older) header names mapped onto the canonical names used here.
ALIASES = {
    "protocol_name": "protocol_type",
    "trip_comments": "checklist_comments",
    "project_code": "project_identifiers",
    "breeding_bird_atlas_code": "breeding_code",
    "breeding_bird_atlas_category": "breeding_category",
}

#: Columns a Sampling Event Data file must have (canonical names).
SED_REQUIRED = (
    "sampling_event_identifier",
    "latitude",
    "longitude",
    "observation_date",
    "protocol_type",
    "duration_minutes",
    "effort_distance_km",
    "number_observers",
    "all_species_reported",
    "group_identifier",
)

#: Columns an EBD file must have (canonical names).
EBD_REQUIRED = (
    "sampling_event_identifier",
    "category",
    "common_name",
    "scientific_name",
    "observation_count",
)

#: Taxonomic categories that are not identified to one species and are dropped by the roll-up.
NON_SPECIES_CATEGORIES = ("spuh", "slash", "hybrid")

_SPECIES_CATEGORIES = ("species", "issf", "form", "intergrade", "domestic")

#: Per-species columns of zero-filled checklists when several species are read:
#: ``detected__<slug>`` and ``observation_count__<slug>``.
DETECTED_PREFIX = "detected__"
COUNT_PREFIX = "observation_count__"
_PAREN = re.compile(r"\s*\(.*\)\s*$")


# --------------------------------------------------------------------------------------------
# Bookkeeping


@dataclass
class FilterLog:
    """Rows kept and dropped by every step, in the order the steps first ran.

    Counts from several chunks of the same step add up, so a streamed file gives the same log as
    the whole file read at once.

    Examples
    --------
    >>> log = FilterLog()
    >>> log.record("sed", "complete", kept=8, dropped=2)
    >>> log.record("sed", "complete", kept=1, dropped=0)
    >>> log.to_frame()[["table", "step", "kept", "dropped"]].values.tolist()
    [['sed', 'complete', 9, 2]]
    """

    counts: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    details: dict[tuple[str, str], str] = field(default_factory=dict)

    def record(self, table: str, step: str, *, kept: int, dropped: int, detail: str = "") -> None:
        """Add ``kept`` and ``dropped`` rows to step ``step`` of table ``table``."""
        slot = self.counts.setdefault((table, step), [0, 0])
        slot[0] += int(kept)
        slot[1] += int(dropped)
        if detail:
            self.details[(table, step)] = detail

    def apply(
        self,
        table: str,
        step: str,
        func: Callable[..., pd.DataFrame],
        frame: pd.DataFrame,
        /,
        detail: str = "",
        **kwargs: Any,
    ) -> pd.DataFrame:
        """Run ``func(frame, **kwargs)`` and record how many rows it kept and dropped."""
        out = func(frame, **kwargs)
        self.record(table, step, kept=len(out), dropped=len(frame) - len(out), detail=detail)
        return out

    def merge(self, other: FilterLog) -> None:
        """Add every count of ``other`` to this log."""
        for (table, step), (kept, dropped) in other.counts.items():
            self.record(table, step, kept=kept, dropped=dropped)
        self.details.update(other.details)

    def kept(self, table: str, step: str) -> int:
        """Rows kept by one step (0 when the step never ran)."""
        return self.counts.get((table, step), [0, 0])[0]

    def to_frame(self) -> pd.DataFrame:
        """One row per step: ``table``, ``step``, ``kept``, ``dropped``, ``detail``."""
        rows = [
            (t, s, k, d, self.details.get((t, s), "")) for (t, s), (k, d) in self.counts.items()
        ]
        return pd.DataFrame(rows, columns=["table", "step", "kept", "dropped", "detail"])


# --------------------------------------------------------------------------------------------
# Reading text


def normalise_columns(names: Iterable[str]) -> list[str]:
    """Trim header names, make them lower_snake and map layout variants onto canonical names.

    Empty names (a trailing tab) become ``_unnamed_<position>``.

    Examples
    --------
    >>> normalise_columns(["SAMPLING EVENT IDENTIFIER", " LOCALITY TYPE", "PROTOCOL NAME", ""])
    ['sampling_event_identifier', 'locality_type', 'protocol_type', '_unnamed_3']
    """
    out = []
    for i, name in enumerate(names):
        snake = re.sub(r"[^0-9a-z]+", "_", name.strip().lower()).strip("_")
        out.append(ALIASES.get(snake, snake) if snake else f"_unnamed_{i}")
    return out


@contextmanager
def _open_binary(path: Path) -> Iterator[tuple[BinaryIO, Callable[[], int], int]]:
    """Open plain, gzip or zip text; yield (stream, bytes-consumed function, total bytes)."""
    if not path.is_file():
        raise DataFileError(
            f"file {str(path)!r} does not exist or is not a file; check the path "
            "(eBird downloads are .txt, .txt.gz or .zip)"
        )
    with open(path, "rb") as raw:
        magic = raw.read(4)
        raw.seek(0)
        total = path.stat().st_size
        if magic[:2] == b"\x1f\x8b":
            with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
                yield gz, raw.tell, total  # type: ignore[misc]
        elif magic == b"PK\x03\x04":
            with zipfile.ZipFile(raw) as zf:
                members = [
                    m
                    for m in zf.infolist()
                    if not m.is_dir() and m.filename.lower().endswith((".txt", ".tsv", ".csv"))
                ]
                if not members:
                    raise DataFileError(
                        f"zip file {str(path)!r} holds no .txt member; pass the EBD or SED text "
                        "file (or a zip containing it)"
                    )
                member = max(members, key=lambda m: m.file_size)
                with zf.open(member) as stream:
                    size = member.file_size
                    yield stream, stream.tell, size  # type: ignore[misc]
        else:
            yield raw, raw.tell, total


def read_header(path: str | os.PathLike[str]) -> list[str]:
    """Return the normalised header of an EBD or SED file (plain, gzip or zip).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "s.txt"
    >>> _ = p.write_text("SAMPLING EVENT IDENTIFIER\\tPROTOCOL TYPE\\n")
    >>> read_header(p)
    ['sampling_event_identifier', 'protocol_type']
    """
    with _open_binary(Path(path)) as (stream, _, _):
        return _header_from_line(stream.readline(), Path(path))


def _header_from_line(line: bytes, path: Path) -> list[str]:
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataFileError(
            f"file {str(path)!r} is not UTF-8 text ({exc}); pass an eBird EBD or SED .txt file"
        ) from None
    return normalise_columns(text.rstrip("\r\n").split("\t"))


def _check_columns(header: list[str], required: Sequence[str], path: Path, kind: str) -> None:
    missing = [c for c in required if c not in header]
    if kind == "SED" and "common_name" in header and "scientific_name" in header:
        # An EBD holds every SED column too, but one row per species, not per checklist.
        missing.append("(no species columns)")
    if not missing:
        return
    hint = ""
    if kind == "SED" and "common_name" in header:
        hint = " It looks like an EBD (observations) file; pass it as the EBD, not the SED."
    elif kind == "EBD" and "common_name" not in header and "sampling_event_identifier" in header:
        hint = " It looks like a sampling event (SED) file; pass it as the SED, not the EBD."
    raise DataFileError(
        f"file {str(path)!r} is not an eBird {kind} file: its header lacks column(s) "
        f"{', '.join(missing)} (found {len(header)} columns starting {header[:3]}).{hint} "
        f"Fix: pass the tab-separated {kind} text from an eBird download."
    )


class _Counting(io.RawIOBase):
    """A read-only stream that reports progress after every read."""

    def __init__(self, stream: BinaryIO, on_read: Callable[[], None]) -> None:
        self._stream = stream
        self._on_read = on_read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        self._on_read()
        return len(data)


def iter_table(
    path: str | os.PathLike[str],
    columns: Sequence[str],
    *,
    required: Sequence[str] = (),
    kind: str = "EBD",
    chunksize: int = INGEST_DEFAULTS.chunksize,
    progress: Callable[[int, int], None] | None = None,
    byte_range: tuple[int, int] | None = None,
) -> Iterator[pd.DataFrame]:
    """Stream the named columns of an eBird text file as chunks of text columns.

    Parameters
    ----------
    path : path-like
        EBD or SED text, plain, ``.gz`` or ``.zip``.
    columns : sequence of str
        Canonical column names to return; those absent from the file are returned empty (NaN).
    required : sequence of str
        Canonical names that must be in the header, else :class:`DataFileError`.
    kind : str
        ``"EBD"`` or ``"SED"``, used in messages.
    chunksize : int
        Rows per chunk.
    progress : callable, optional
        Called as ``progress(bytes_consumed, total_bytes)`` while reading.
    byte_range : (int, int), optional
        Read only the lines that *start* in ``[start, stop)`` of a plain file (used by the Dask
        engine; the header is always read from the top).

    Yields
    ------
    pandas.DataFrame
        Every value is text (``str``) or NaN. Fields are taken by position, so a row with
        missing or extra fields yields values that do not parse, and the parsers drop it as
        malformed.
    """
    path = Path(path)
    with _open_binary(path) as (stream, consumed, total):
        header = _header_from_line(stream.readline(), path)
        _check_columns(header, required, path, kind)
        start_offset = stream.tell()
        if byte_range is not None:
            start, stop = byte_range
            if start > start_offset:
                stream.seek(start - 1)
                stream.readline()  # finish the line in progress; it belongs to the previous range
            body: BinaryIO = _Bounded(stream, stop)  # type: ignore[assignment]
        else:
            body = stream
        if body is not stream or progress is not None:
            report = (lambda: progress(consumed(), total)) if progress else (lambda: None)
            body = io.BufferedReader(_Counting(body, report), buffer_size=1 << 20)  # type: ignore[assignment]
        # Some files end data lines, but not the header, with a tab: peek at the first data
        # line and give that trailing field a name, so columns do not shift.
        first = body.readline()
        names = list(header)
        n_fields = first.rstrip(b"\r\n").count(b"\t") + 1 if first else len(names)
        while n_fields > len(names):
            names.append(f"_unnamed_{len(names)}")
        while n_fields < len(names) and names[-1].startswith("_unnamed_"):
            names.pop()  # a trailing tab on the header line only
        body = io.BufferedReader(_Prefixed(first, body), buffer_size=1 << 20)  # type: ignore[assignment]
        wanted = [c for c in columns if c in names]
        reader = pd.read_csv(
            body,
            sep="\t",
            header=None,
            names=names,
            usecols=wanted,
            dtype=str,
            quoting=csv.QUOTE_NONE,
            keep_default_na=False,
            na_values=[""],
            index_col=False,
            chunksize=chunksize,
            engine="c",
            encoding="utf-8",
            encoding_errors="replace",
        )
        for chunk in _parse_errors(reader, path, kind):
            for c in columns:
                if c not in chunk.columns:
                    chunk[c] = np.nan
            yield chunk[list(columns)]


def _parse_errors(reader: Iterable[pd.DataFrame], path: Path, kind: str) -> Iterator[pd.DataFrame]:
    """Re-raise the tokenizer's errors as DataFileError naming the file."""
    try:
        yield from reader
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataFileError(
            f"{kind} file {str(path)!r} cannot be parsed as tab-separated eBird text ({exc}); "
            "check that it is an uncorrupted EBD/SED download"
        ) from None


class _Prefixed(io.RawIOBase):
    """A stream that first returns ``prefix``, then the rest of ``stream``."""

    def __init__(self, prefix: bytes, stream: BinaryIO) -> None:
        self._prefix = prefix
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _Bounded(io.RawIOBase):
    """Read a seekable stream up to the end of the line that crosses ``stop``.

    A line belongs to the byte range it *starts* in, so consecutive ranges read every line
    exactly once.
    """

    def __init__(self, stream: BinaryIO, stop: int) -> None:
        self._stream = stream
        self._stop = stop
        self._pending = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._pending and not self._done:
            pos = self._stream.tell()
            if pos >= self._stop:
                self._done = True  # a line starting at or after stop belongs to the next range
            else:
                data = self._stream.read(min(len(buffer), self._stop - pos))
                if pos + len(data) >= self._stop or not data:
                    self._done = True
                    if data and not data.endswith(b"\n"):
                        data += self._stream.readline()  # finish the line that crosses stop
                self._pending = data
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


# --------------------------------------------------------------------------------------------
# Parsing


_SED_COLUMNS = (
    "sampling_event_identifier",
    "group_identifier",
    "latitude",
    "longitude",
    "observation_date",
    "time_observations_started",
    "protocol_type",
    "duration_minutes",
    "effort_distance_km",
    "number_observers",
    "all_species_reported",
)

_EBD_COLUMNS = (
    "sampling_event_identifier",
    "category",
    "common_name",
    "scientific_name",
    "observation_count",
)


def _text(series: pd.Series) -> pd.Series:
    """Stripped text; missing stays missing (an all-empty column may arrive as float NaN)."""
    return series.astype("str").str.strip()


def _num(series: pd.Series) -> np.ndarray:
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)


def parse_sampling(text: pd.DataFrame) -> pd.DataFrame:
    """Parse SED text columns into typed columns; rows that do not parse get NaN / NaT.

    Precondition: the columns of :data:`SED_REQUIRED`, as text. Use :func:`drop_malformed`
    afterwards to remove rows whose identifier, coordinates or date did not parse.

    Examples
    --------
    >>> t = pd.DataFrame({"sampling_event_identifier": ["S1"], "group_identifier": [np.nan],
    ...     "latitude": ["1.5"], "longitude": ["x"], "observation_date": ["2018-05-01"],
    ...     "time_observations_started": ["07:30:00"], "protocol_type": ["Traveling"],
    ...     "duration_minutes": ["60"], "effort_distance_km": ["2.5"],
    ...     "number_observers": ["1"], "all_species_reported": ["1"]})
    >>> p = parse_sampling(t)
    >>> float(p.latitude[0]), bool(np.isnan(p.longitude[0])), bool(p.all_species_reported[0])
    (1.5, True, True)
    """
    out = pd.DataFrame(index=text.index)
    out["sampling_event_identifier"] = _text(text["sampling_event_identifier"])
    group = _text(text["group_identifier"])
    out["group_identifier"] = group.where(group != "", np.nan)
    out["latitude"] = _num(text["latitude"])
    out["longitude"] = _num(text["longitude"])
    out["observation_date"] = pd.to_datetime(
        text["observation_date"], format="%Y-%m-%d", errors="coerce"
    )
    if "time_observations_started" in text:
        t = pd.to_timedelta(text["time_observations_started"], errors="coerce")
        out["time_observations_started"] = t.dt.total_seconds().to_numpy() / 3600.0
    out["protocol_type"] = _text(text["protocol_type"])
    out["duration_minutes"] = _num(text["duration_minutes"])
    out["effort_distance_km"] = _num(text["effort_distance_km"])
    out["number_observers"] = _num(text["number_observers"])
    complete = _text(text["all_species_reported"]).str.lower()
    out["all_species_reported"] = complete.isin(["1", "true", "t", "yes"]).to_numpy()
    return out


def drop_malformed(checklists: pd.DataFrame) -> pd.DataFrame:
    """Drop parsed SED rows whose identifier, latitude, longitude or date is missing or invalid.

    Precondition: the output of :func:`parse_sampling`.
    """
    ok = (
        checklists["sampling_event_identifier"].notna().to_numpy()
        & np.isfinite(checklists["latitude"].to_numpy())
        & np.isfinite(checklists["longitude"].to_numpy())
        & (np.abs(checklists["latitude"].to_numpy()) <= 90)
        & (np.abs(checklists["longitude"].to_numpy()) <= 180)
        & checklists["observation_date"].notna().to_numpy()
    )
    return checklists[ok]


def parse_detections(text: pd.DataFrame) -> pd.DataFrame:
    """Parse EBD text rows: counts to numbers, ``"X"`` to detected with an unknown (NaN) count.

    Precondition: the columns of :data:`EBD_REQUIRED`, as text. Rows whose identifier or names
    are missing, or whose count is neither a number nor ``X``, are dropped (they are malformed).

    Examples
    --------
    >>> t = pd.DataFrame({"sampling_event_identifier": ["S1", "S2", "S3"],
    ...     "category": ["species"] * 3, "common_name": ["Wood Thrush"] * 3,
    ...     "scientific_name": ["Hylocichla mustelina"] * 3,
    ...     "observation_count": ["2", "X", "two"]})
    >>> p = parse_detections(t)
    >>> p.observation_count.tolist(), p.detected.tolist()
    ([2.0, nan], [True, True])
    """
    raw = _text(text["observation_count"])
    is_x = (raw.str.upper() == "X").to_numpy()
    count = _num(raw)
    ok = (
        (is_x | np.isfinite(count))
        & text["sampling_event_identifier"].notna().to_numpy()
        & text["scientific_name"].notna().to_numpy()
        & text["common_name"].notna().to_numpy()
    )
    out = pd.DataFrame(
        {
            "sampling_event_identifier": _text(text["sampling_event_identifier"]),
            "category": _text(text["category"]).str.lower(),
            "common_name": _text(text["common_name"]),
            "scientific_name": _text(text["scientific_name"]),
            "observation_count": np.where(is_x, np.nan, count),
            "detected": is_x | (count > 0),
        },
        index=text.index,
    )
    return out[ok]


# --------------------------------------------------------------------------------------------
# Best-practice steps


def filter_complete(checklists: pd.DataFrame) -> pd.DataFrame:
    """Keep complete checklists only (``ALL SPECIES REPORTED = 1``).

    Precondition: a boolean ``all_species_reported`` column (see :func:`parse_sampling`).
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
    return checklists[_text(checklists["protocol_type"]).str.lower().isin(wanted).to_numpy()]


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
    stationary = (_text(checklists["protocol_type"]).str.lower() == "stationary").to_numpy()
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


def rollup_species(detections: pd.DataFrame) -> pd.DataFrame:
    """Roll EBD rows up to species: drop spuh, slash and hybrid; merge subspecies rows.

    Precondition: parsed EBD rows (:func:`parse_detections`): ``category``, ``common_name``,
    ``scientific_name``, ``observation_count``, ``detected``, ``sampling_event_identifier``.
    Subspecies, forms, intergrades and domestic types count as their species; the species name is
    the scientific binomial (first two words) and the common name without any parenthesis. Rows
    of the same species on the same checklist become one: their counts add up, and an ``X`` on
    any of them makes the total unknown (NaN).

    Examples
    --------
    >>> t = pd.DataFrame({"sampling_event_identifier": ["S1", "S1", "S1"],
    ...     "category": ["issf", "species", "slash"],
    ...     "common_name": ["Yellow-rumped Warbler"] * 2 + ["Yellow-rumped/Palm Warbler"],
    ...     "scientific_name": ["Setophaga coronata", "Setophaga coronata",
    ...                         "Setophaga coronata/palmarum"],
    ...     "observation_count": [2.0, 3.0, 1.0], "detected": [True, True, True]})
    >>> rollup_species(t)[["scientific_name", "observation_count"]].values.tolist()
    [['Setophaga coronata', 5.0]]
    """
    keep = ~detections["category"].isin(NON_SPECIES_CATEGORIES).to_numpy()
    rows = detections[keep]
    if rows.empty:
        return rows.reset_index(drop=True)
    sci = _binomial(rows["scientific_name"])
    common = _strip_paren(rows["common_name"])
    rows = rows.assign(
        scientific_name=sci,
        common_name=common,
        category="species",
        _unknown=rows["observation_count"].isna().to_numpy(),
    )
    grouped = rows.groupby(["sampling_event_identifier", "scientific_name"], sort=True)
    out = grouped.agg(
        common_name=("common_name", "first"),
        detected=("detected", "any"),
        observation_count=("observation_count", "sum"),
        unknown=("_unknown", "any"),
    )
    out["observation_count"] = out["observation_count"].where(~out.pop("unknown"), np.nan)
    out["category"] = "species"
    return out.reset_index()[list(detections.columns)]


def _binomial(names: pd.Series) -> pd.Series:
    uniq = pd.unique(names.to_numpy())
    mapped = {u: " ".join(str(u).split()[:2]) for u in uniq}
    return names.map(mapped)


def _strip_paren(names: pd.Series) -> pd.Series:
    uniq = pd.unique(names.to_numpy())
    mapped = {u: _PAREN.sub("", str(u)) for u in uniq}
    return names.map(mapped)


def link_detections(detections: pd.DataFrame, members: pd.DataFrame) -> pd.DataFrame:
    """Attach ``checklist_id`` to EBD rows through the SED members; drop rows of no kept member.

    Precondition: ``members`` has ``sampling_event_identifier`` and ``checklist_id`` for every
    sampling event that passed the filters (before group de-duplication, so a detection on any
    member of a shared checklist counts for the group).
    """
    table = members.set_index("sampling_event_identifier")["checklist_id"]
    ids = detections["sampling_event_identifier"].map(table)
    out = detections.assign(checklist_id=ids)
    return out[ids.notna().to_numpy()]


def zero_fill(
    checklists: pd.DataFrame,
    detections: pd.DataFrame,
    species: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Mark every checklist as a detection or a non-detection of the target species.

    Precondition: ``checklists`` unique on ``checklist_id``; ``detections`` are the rolled-up
    EBD rows of *one* species with a ``checklist_id`` (:func:`link_detections`). A checklist
    with no row for the species is a non-detection (count 0); an ``X`` count is a detection with
    an unknown (NaN) count. Shared checklists with rows from several members take the largest
    count (members count the same birds).

    With ``species`` (names, as in :func:`species_list`), ``detections`` hold the rows of
    several species tagged by a ``species`` column, and each is zero-filled against the same
    checklists: ``detected__<slug>`` and ``observation_count__<slug>`` for every species;
    ``detected`` and ``observation_count`` repeat the first species'.

    Examples
    --------
    >>> c = pd.DataFrame({"checklist_id": ["S1", "S2", "S3"]})
    >>> d = pd.DataFrame({"checklist_id": ["S1", "S3"], "observation_count": [2.0, np.nan],
    ...                   "detected": [True, True]})
    >>> z = zero_fill(c, d)
    >>> z.detected.tolist(), z.observation_count.tolist()
    ([True, False, True], [2.0, 0.0, nan])
    >>> d["species"] = ["Veery", "Wood Thrush"]
    >>> z = zero_fill(c, d, species=["Wood Thrush", "Veery"])
    >>> z.detected__wood_thrush.tolist(), z.detected__veery.tolist()
    ([False, False, True], [True, False, False])
    """
    if checklists["checklist_id"].duplicated().any():
        raise InvalidInputError(
            "zero_fill: checklists has duplicated checklist_id values; run deduplicate_groups "
            "(or with_checklist_id) first"
        )
    ids = checklists["checklist_id"]
    out = checklists.copy()
    if species is None:
        out["detected"], out["observation_count"] = _fill(ids, detections)
        return out
    tags = detections["species"].to_numpy()
    for j, name in enumerate(species):
        detected, count = _fill(ids, detections[tags == name])
        if j == 0:
            out["detected"], out["observation_count"] = detected, count
        slug = species_slug(name)
        out[DETECTED_PREFIX + slug], out[COUNT_PREFIX + slug] = detected, count
    return out


def _fill(ids: pd.Series, detections: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``detected`` and ``observation_count`` of every checklist id (see :func:`zero_fill`)."""
    det = detections[detections["detected"].to_numpy(dtype=bool)]
    grouped = det.groupby("checklist_id", sort=False)["observation_count"]
    count = grouped.max()  # NaN only when every member's count is an X
    detected = ids.isin(count.index).to_numpy()
    filled = ids.map(count).to_numpy(dtype=float)
    return detected, np.where(detected, filled, 0.0)


# --------------------------------------------------------------------------------------------
# Whole-file readers


def _sed_chunk(
    text: pd.DataFrame,
    log: FilterLog,
    *,
    complete: bool,
    protocols: Sequence[str] | None,
    effort: dict[str, float] | None,
    dates: dict[str, Any],
    bbox: Sequence[float] | None,
    polygon: shapely.Geometry | None,
) -> pd.DataFrame:
    """Parse one SED chunk and apply every row-level filter, recording counts."""
    log.record("sed", "read", kept=len(text), dropped=0)
    frame = parse_sampling(text)
    frame = log.apply("sed", "malformed", drop_malformed, frame, detail="id, lat, lon or date")
    if complete:
        frame = log.apply("sed", "complete", filter_complete, frame, detail="ALL SPECIES = 1")
    if protocols is not None:
        frame = log.apply(
            "sed",
            "protocol",
            filter_protocol,
            frame,
            protocols=protocols,
            detail=",".join(protocols),
        )
    if effort is not None:
        detail = ", ".join(f"{k}={v}" for k, v in effort.items())
        frame = log.apply("sed", "effort", filter_effort, frame, detail=detail, **effort)
    if any(v is not None for v in dates.values()):
        detail = ", ".join(f"{k}={v}" for k, v in dates.items() if v is not None)
        frame = log.apply("sed", "dates", filter_dates, frame, detail=detail, **dates)
    if bbox is not None or polygon is not None:
        detail = f"bbox={tuple(bbox)}" if bbox is not None else "polygon"
        frame = log.apply(
            "sed", "region", filter_region, frame, detail=detail, bbox=bbox, polygon=polygon
        )
    return frame


def _ebd_chunk(
    text: pd.DataFrame, log: FilterLog, targets: tuple[str, ...], names: dict[str, str]
) -> pd.DataFrame:
    """Parse the EBD rows of one chunk that may belong to ``targets`` (lower-case names)."""
    log.record("ebd", "read", kept=len(text), dropped=0)
    sci = text["scientific_name"]
    common = text["common_name"]
    u_sci = pd.unique(sci.dropna().to_numpy())
    u_common = pd.unique(common.dropna().to_numpy())
    # Roll names up on the distinct values only: a chunk of a million rows has a few thousand.
    sci_key = {u: " ".join(str(u).split()[:2]) for u in u_sci}
    common_key = {u: _PAREN.sub("", str(u)) for u in u_common}
    for u in u_common:
        names.setdefault(common_key[u].lower(), common_key[u])
    for u in u_sci:
        names.setdefault(sci_key[u].lower(), sci_key[u])
    hit_sci = [u for u in u_sci if sci_key[u].lower() in targets]
    hit_common = [u for u in u_common if common_key[u].lower() in targets]
    mask = sci.isin(hit_sci).to_numpy() | common.isin(hit_common).to_numpy()
    log.record("ebd", "species", kept=int(mask.sum()), dropped=int((~mask).sum()))
    rows = text[mask]
    parsed = parse_detections(rows)
    log.record("ebd", "malformed", kept=len(parsed), dropped=len(rows) - len(parsed))
    return parsed


def _progress_bar(enabled: bool, description: str) -> Any:
    if not enabled:
        return nullcontext(None)
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )


def _read(
    path: Path,
    columns: Sequence[str],
    required: Sequence[str],
    kind: str,
    chunksize: int,
    progress: bool,
    each: Callable[[pd.DataFrame], pd.DataFrame],
) -> list[pd.DataFrame]:
    """Stream ``path`` (with a progress bar when asked) and apply ``each`` to every chunk."""
    parts = []
    with _progress_bar(progress, kind) as bar:
        task = bar.add_task(f"reading {kind} {path.name}", total=None) if bar else None

        def report(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        for chunk in iter_table(
            path,
            columns,
            required=required,
            kind=kind,
            chunksize=chunksize,
            progress=report if bar else None,
        ):
            parts.append(each(chunk))
    return parts


def _sed_options(
    complete: bool,
    protocols: Sequence[str] | None,
    max_hours: float | None,
    max_km: float | None,
    max_observers: int | None,
    max_speed_kmh: float | None,
    start_date: str | None,
    end_date: str | None,
    months: Sequence[int] | None,
    years: Sequence[int] | None,
    bbox: Sequence[float] | None,
    polygon: shapely.Geometry | None,
) -> dict[str, Any]:
    limits = {
        "max_hours": max_hours,
        "max_km": max_km,
        "max_observers": max_observers,
        "max_speed_kmh": max_speed_kmh,
    }
    for name, value in limits.items():
        if value is not None and not (np.isfinite(value) and value >= 0):
            raise InvalidInputError(
                f"{name}={value!r} must be a number >= 0 (or None for no limit)"
            )
    effort = {k: (None if v is None else float(v)) for k, v in limits.items()}
    if all(v is None for v in effort.values()):
        effort = None
    if months is not None:
        bad = [m for m in months if int(m) != m or not 1 <= int(m) <= 12]
        if bad:
            raise InvalidInputError(f"months={list(months)!r} has {bad}; pass integers 1..12")
    if bbox is not None:
        bbox = tuple(float(v) for v in bbox)
        if len(bbox) != 4 or not (bbox[0] < bbox[2] and bbox[1] < bbox[3]):
            raise InvalidInputError(
                f"bbox={bbox!r} must be (min_lon, min_lat, max_lon, max_lat) with min < max"
            )
    for name, value in (("start_date", start_date), ("end_date", end_date)):
        if value is not None:
            _date(value, name)
    return {
        "complete": complete,
        "protocols": None if protocols is None else tuple(protocols),
        "effort": effort,
        "dates": {"start_date": start_date, "end_date": end_date, "months": months, "years": years},
        "bbox": bbox,
        "polygon": polygon,
    }


def _sed_options_from(
    complete: bool = True,
    protocols: Sequence[str] | None = INGEST_DEFAULTS.protocols,
    max_hours: float | None = INGEST_DEFAULTS.max_hours,
    max_km: float | None = INGEST_DEFAULTS.max_km,
    max_observers: int | None = INGEST_DEFAULTS.max_observers,
    max_speed_kmh: float | None = INGEST_DEFAULTS.max_speed_kmh,
    start_date: str | None = None,
    end_date: str | None = None,
    months: Sequence[int] | None = None,
    years: Sequence[int] | None = None,
    bbox: Sequence[float] | None = None,
    polygon: shapely.Geometry | None = None,
) -> dict[str, Any]:
    """:func:`_sed_options` with the defaults of :func:`read_checklists`, by keyword."""
    return _sed_options(
        complete, protocols, max_hours, max_km, max_observers, max_speed_kmh, start_date,
        end_date, months, years, bbox, polygon,
    )  # fmt: skip


def read_checklists(
    sed: str | os.PathLike[str],
    *,
    complete: bool = True,
    protocols: Sequence[str] | None = INGEST_DEFAULTS.protocols,
    max_hours: float | None = INGEST_DEFAULTS.max_hours,
    max_km: float | None = INGEST_DEFAULTS.max_km,
    max_observers: int | None = INGEST_DEFAULTS.max_observers,
    max_speed_kmh: float | None = INGEST_DEFAULTS.max_speed_kmh,
    start_date: str | None = None,
    end_date: str | None = None,
    months: Sequence[int] | None = None,
    years: Sequence[int] | None = None,
    bbox: Sequence[float] | None = None,
    polygon: shapely.Geometry | None = None,
    chunksize: int = INGEST_DEFAULTS.chunksize,
    progress: bool = False,
    log: FilterLog | None = None,
    engine: str = "local",
    scheduler: str | None = None,
) -> pd.DataFrame:
    """Stream a Sampling Event Data file and keep the checklists that pass every filter.

    Parameters
    ----------
    sed : path-like
        SED text (plain, ``.gz`` or ``.zip``).
    complete : bool
        Keep complete checklists only.
    protocols : sequence of str or None
        Protocols kept; ``None`` keeps all.
    max_hours, max_km, max_observers, max_speed_kmh : float or None
        Effort limits; ``None`` removes a limit.
    start_date, end_date : str, optional
        Inclusive ISO dates.
    months, years : sequence of int, optional
    bbox : (min_lon, min_lat, max_lon, max_lat), optional
    polygon : shapely geometry in longitude/latitude, optional
    chunksize : int
        Rows per streamed chunk.
    progress : bool
        Show a rich progress bar on stderr.
    log : FilterLog, optional
        Receives the counts of every step.
    engine : {"local", "dask"}
    scheduler : str, optional
        Dask scheduler address (``engine="dask"`` only); default a local cluster.

    Returns
    -------
    DataFrame
        Parsed checklists (one row per sampling event), in file order.
    """
    log = FilterLog() if log is None else log
    options = _sed_options(
        complete,
        protocols,
        max_hours,
        max_km,
        max_observers,
        max_speed_kmh,
        start_date,
        end_date,
        months,
        years,
        bbox,
        polygon,
    )
    path = Path(sed)
    if engine == "dask":
        parts, chunk_log = _dask_map_blocks(
            path, "SED", _SED_COLUMNS, SED_REQUIRED, chunksize, _sed_block, options, scheduler
        )
        log.merge(chunk_log)
    elif engine == "local":
        parts = _read(
            path,
            _SED_COLUMNS,
            SED_REQUIRED,
            "SED",
            chunksize,
            progress,
            lambda chunk: _sed_chunk(chunk, log, **options),
        )
    else:
        raise InvalidInputError(f"engine={engine!r} is not one of 'local', 'dask'")
    if not parts:
        return parse_sampling(pd.DataFrame({c: pd.Series(dtype=str) for c in _SED_COLUMNS}))
    return pd.concat(parts, ignore_index=True)


def _sed_block(chunk: pd.DataFrame, log: FilterLog, options: dict[str, Any]) -> pd.DataFrame:
    return _sed_chunk(chunk, log, **options)


def _ebd_block(chunk: pd.DataFrame, log: FilterLog, options: dict[str, Any]) -> pd.DataFrame:
    return _ebd_chunk(chunk, log, options["targets"], options["names"])


def species_list(species: str | Sequence[str]) -> tuple[str, ...]:
    """The species names of ``species`` (one name or several), checked.

    Every name must be a non-empty string. Several names must give distinct column suffixes
    (:func:`reserve.config.species_slug`), so the same species cannot be asked for twice.

    Examples
    --------
    >>> species_list("Wood Thrush"), species_list(["Wood Thrush", "Veery"])
    (('Wood Thrush',), ('Wood Thrush', 'Veery'))
    """
    if isinstance(species, str):
        if not species.strip():
            raise InvalidInputError(
                f"species={species!r}; pass a common or scientific name, e.g. 'Wood Thrush'"
            )
        return (species,)
    try:
        names = tuple(species)
    except TypeError:
        names = ()
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise InvalidInputError(
            f"species={species!r}; pass a common or scientific name, or a list of them, e.g. "
            "['Wood Thrush', 'Veery']"
        )
    seen: dict[str, str] = {}
    for name in names:
        slug = species_slug(name)
        if not slug:
            raise InvalidInputError(
                f"species name {name!r} has no letter or digit; pass a common or scientific name"
            )
        if slug in seen:
            what = "is given twice" if seen[slug] == name else f"and {name!r} are the same name"
            raise InvalidInputError(
                f"species {seen[slug]!r} {what} (both would be column suffix {slug!r}); "
                "pass each species once"
            )
        seen[slug] = name
    return names


def _target(name: str) -> str:
    """The lower-case, single-spaced form of a species name matched against the EBD."""
    return " ".join(name.split()).lower()


def _no_row_error(species: str, names: dict[str, str], path: Path) -> InvalidInputError:
    target = _target(species)
    close = difflib.get_close_matches(target, list(names), n=3, cutoff=0.6)
    hint = f" Close names in the file: {', '.join(names[c] for c in close)}." if close else ""
    return InvalidInputError(
        f"species={species!r} matches no row of EBD file {str(path)!r} "
        f"({len(names)} distinct names seen).{hint} Fix: pass a common or scientific name "
        "as spelled in the file."
    )


def _tag_species(rows: pd.DataFrame, species: tuple[str, ...], log: FilterLog) -> pd.DataFrame:
    """Tag rolled-up EBD rows with the name asked for (column ``species``); record the counts.

    Refuses two names of the same species (a common and a scientific name, say): a row that
    matches both.
    """
    sci = rows["scientific_name"].str.lower().to_numpy()
    common = rows["common_name"].str.lower().to_numpy()
    hits = np.zeros((len(rows), len(species)), dtype=bool)
    for j, name in enumerate(species):
        hits[:, j] = (sci == _target(name)) | (common == _target(name))
    both = np.flatnonzero(hits.sum(axis=1) > 1)
    if both.size:
        i, j = np.flatnonzero(hits[both[0]])[:2]
        raise InvalidInputError(
            f"species {species[i]!r} and {species[j]!r} are the same species "
            f"({rows['common_name'].iloc[both[0]]}, {rows['scientific_name'].iloc[both[0]]}); "
            "pass each species once"
        )
    which = hits.argmax(axis=1)
    keep = hits.any(axis=1)
    for j, name in enumerate(species):
        n = int((keep & (which == j)).sum())
        log.record("ebd", f"species:{species_slug(name)}", kept=n, dropped=0, detail=name)
    tags = np.asarray(species, dtype=object)[which[keep]]
    return rows[keep].assign(species=tags)


def read_detections(
    ebd: str | os.PathLike[str],
    species: str | Sequence[str],
    *,
    chunksize: int = INGEST_DEFAULTS.chunksize,
    progress: bool = False,
    log: FilterLog | None = None,
    engine: str = "local",
    scheduler: str | None = None,
) -> pd.DataFrame:
    """Stream an EBD file and return the rows of one species, rolled up to species level.

    Parameters
    ----------
    ebd : path-like
        EBD text (plain, ``.gz`` or ``.zip``).
    species : str or sequence of str
        Common or scientific name, any case (``"Wood Thrush"``, ``"hylocichla mustelina"``).
        Subspecies and forms of it are included; spuhs, slashes and hybrids are not. A
        sequence reads several species in one pass (see :func:`species_list`).
    chunksize, progress, log, engine, scheduler
        As in :func:`read_checklists`.

    Returns
    -------
    DataFrame
        ``sampling_event_identifier``, ``category``, ``common_name``, ``scientific_name``,
        ``observation_count`` (NaN for ``X``) and ``detected``, one row per checklist (and
        species). With a sequence, also ``species``: the name, as given, each row is of.

    Raises
    ------
    InvalidInputError
        When no row of the file is of a species (the message names it and lists close
        names), or two names are of the same species.
    """
    names_given = species_list(species)
    targets = tuple(_target(s) for s in names_given)
    log = FilterLog() if log is None else log
    names: dict[str, str] = {}
    path = Path(ebd)
    if engine == "dask":
        options = {"targets": targets, "names": names}
        parts, chunk_log, names = _dask_map_blocks(
            path,
            "EBD",
            _EBD_COLUMNS,
            EBD_REQUIRED,
            chunksize,
            _ebd_block,
            options,
            scheduler,
            with_names=True,
        )
        log.merge(chunk_log)
    elif engine == "local":
        parts = _read(
            path,
            _EBD_COLUMNS,
            EBD_REQUIRED,
            "EBD",
            chunksize,
            progress,
            lambda chunk: _ebd_chunk(chunk, log, targets, names),
        )
    else:
        raise InvalidInputError(f"engine={engine!r} is not one of 'local', 'dask'")
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=_EBD_COLUMNS)
    if rows.empty:
        raise _no_row_error(names_given[0], names, path)
    rows = log.apply("ebd", "rollup", rollup_species, rows, detail="drop spuh/slash/hybrid")
    if isinstance(species, str):
        return rows
    rows = _tag_species(rows, names_given, log)
    for name in names_given:
        if log.kept("ebd", f"species:{species_slug(name)}") == 0:
            raise _no_row_error(name, names, path)
    return rows


def _empty_message(sed: str | os.PathLike[str], log: FilterLog) -> str:
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


def load_observations(
    ebd: str | os.PathLike[str],
    sed: str | os.PathLike[str],
    species: str | Sequence[str],
    *,
    deduplicate: bool = True,
    log: FilterLog | None = None,
    **options: Any,
) -> pd.DataFrame:
    """Run the best-practice sequence and return zero-filled checklists for one species.

    Steps, in order: SED malformed rows, complete checklists, protocol, effort, dates, region
    (all streamed, see :func:`read_checklists`), shared-checklist de-duplication
    (``deduplicate``), EBD species selection and roll-up (:func:`read_detections`), then
    zero-filling.

    Parameters
    ----------
    ebd, sed : path-like
    species : str or sequence of str
        One name, or several read in the same pass (:func:`species_list`).
    deduplicate : bool
        Keep one checklist per ``GROUP IDENTIFIER``.
    log : FilterLog, optional
    **options
        Passed to :func:`read_checklists` (filters, ``chunksize``, ``progress``, ``engine``,
        ``scheduler``); ``chunksize``, ``progress``, ``engine`` and ``scheduler`` also go to
        :func:`read_detections`.

    Returns
    -------
    DataFrame
        One row per checklist: ``checklist_id``, ``sampling_event_identifier``, ``latitude``,
        ``longitude``, ``observation_date``, effort columns, ``detected``,
        ``observation_count``. With a sequence of species, ``detected`` and
        ``observation_count`` are the first species', and every species has
        ``detected__<slug>`` and ``observation_count__<slug>`` (:func:`zero_fill`).
    """
    log = FilterLog() if log is None else log
    names_given = species_list(species)
    if options.get("engine") == "dask":
        filters = {k: v for k, v in options.items() if k not in ("engine", "scheduler", "progress")}
        with dask_client(options.get("scheduler"), reuse=True) as client:
            held = dask_observations(
                ebd, sed, species, client=client, deduplicate=deduplicate, log=log, **filters
            )
            parts = client.gather(held.parts)
        table = _concat(parts).sort_values(held.order, kind="stable")
        return table.drop(columns="_row").reset_index(drop=True)
    checklists = read_checklists(sed, log=log, **options)
    if checklists.empty:
        raise InvalidInputError(_empty_message(sed, log))
    members = with_checklist_id(checklists, groups=deduplicate)
    if deduplicate:
        checklists = log.apply(
            "sed", "group_dedup", deduplicate_groups, checklists, detail="GROUP IDENTIFIER"
        )
    else:
        checklists = members
    shared = {
        k: options[k] for k in ("chunksize", "progress", "engine", "scheduler") if k in options
    }
    detections = read_detections(ebd, species, log=log, **shared)
    detections = log.apply(
        "ebd",
        "in_kept_checklists",
        link_detections,
        detections,
        members=members[["sampling_event_identifier", "checklist_id"]],
    )
    filled = zero_fill(checklists, detections, None if isinstance(species, str) else names_given)
    _log_zero_fill(log, filled, species)
    return filled


def _require_dask() -> Any:
    try:
        import dask  # noqa: F401
        import distributed  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            "engine='dask' needs dask and distributed; install them with: "
            "pip install 'reserve[dask]'  (or: pip install 'dask[distributed]')"
        ) from None


#: Bytes of plain text per Dask task (compressed files are read by one task).
DASK_BLOCK_BYTES = 64 * 2**20


def _dask_task(
    path: str,
    kind: str,
    columns: Sequence[str],
    required: Sequence[str],
    chunksize: int,
    byte_range: tuple[int, int] | None,
    block_fn: Callable[[pd.DataFrame, FilterLog, dict[str, Any]], pd.DataFrame],
    options: dict[str, Any],
) -> tuple[list[pd.DataFrame], FilterLog, dict[str, str]]:
    """Read one byte range on a worker and run the same per-chunk steps as the local engine."""
    log = FilterLog()
    options = dict(options)
    names: dict[str, str] = {}
    if "names" in options:
        options["names"] = names
    parts = [
        block_fn(chunk, log, options)
        for chunk in iter_table(
            path, columns, required=required, kind=kind, chunksize=chunksize, byte_range=byte_range
        )
    ]
    return parts, log, names


def _dask_map_blocks(
    path: Path,
    kind: str,
    columns: Sequence[str],
    required: Sequence[str],
    chunksize: int,
    block_fn: Callable[[pd.DataFrame, FilterLog, dict[str, Any]], pd.DataFrame],
    options: dict[str, Any],
    scheduler: str | None,
    with_names: bool = False,
) -> Any:
    """Run :func:`_dask_task` over byte ranges of ``path`` on a Dask cluster, in file order.

    The client connects to ``scheduler`` or starts a LocalCluster on the loopback interface.
    Per-chunk results are concatenated in file order, so the output equals the local engine's.
    """
    _require_dask()
    with _open_binary(path) as (stream, _, _):  # validates the path and the header up front
        _check_columns(_header_from_line(stream.readline(), path), required, path, kind)
        plain = isinstance(stream, io.BufferedReader)
    size = path.stat().st_size
    if plain and size > DASK_BLOCK_BYTES:
        starts = list(range(0, size, DASK_BLOCK_BYTES))
        ranges: list[tuple[int, int] | None] = [
            (a, min(a + DASK_BLOCK_BYTES, size)) for a in starts
        ]
    else:
        ranges = [None]
    if _ACTIVE_CLIENT:
        return _gather(_ACTIVE_CLIENT[-1], path, kind, columns, required, chunksize, block_fn,
                       options, ranges, with_names)  # fmt: skip
    with dask_client(scheduler) as client:
        return _gather(client, path, kind, columns, required, chunksize, block_fn, options,
                       ranges, with_names)  # fmt: skip


_ACTIVE_CLIENT: list[Any] = []


@contextmanager
def dask_client(scheduler: str | None = None, *, reuse: bool = False) -> Iterator[Any]:
    """A Dask client for ``scheduler``, or for a new LocalCluster on loopback; closed on exit.

    While the block runs, the EBD and SED readers reuse this client instead of starting their
    own cluster. With ``reuse``, a client already open in an enclosing block is yielded (and
    left open) instead of a new one.
    """
    _require_dask()
    from distributed import Client, LocalCluster

    if reuse and _ACTIVE_CLIENT:
        yield _ACTIVE_CLIENT[-1]
        return
    if scheduler is None:
        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        )
        client = Client(cluster)
    else:
        cluster = None
        try:
            client = Client(scheduler, timeout=10)
        except OSError as exc:
            raise DataFileError(
                f"scheduler={scheduler!r} cannot be reached ({exc}); pass the address of a "
                "running dask scheduler (tcp://HOST:8786) or leave it unset for a local cluster"
            ) from None
    try:
        _ACTIVE_CLIENT.append(client)
        yield client
    finally:
        _ACTIVE_CLIENT.remove(client)
        client.close()
        if cluster is not None:
            cluster.close()


def _gather(client, path, kind, columns, required, chunksize, block_fn, options, ranges,
            with_names):  # fmt: skip
    futures = [
        client.submit(
            _dask_task,
            str(path),
            kind,
            list(columns),
            list(required),
            chunksize,
            r,
            block_fn,
            options,
            pure=False,
        )
        for r in ranges
    ]
    results = client.gather(futures)
    log = FilterLog()
    parts: list[pd.DataFrame] = []
    names: dict[str, str] = {}
    for block_parts, block_log, block_names in results:
        parts.extend(block_parts)
        log.merge(block_log)
        for k, v in block_names.items():
            names.setdefault(k, v)
    return (parts, log, names) if with_names else (parts, log)


# --------------------------------------------------------------------------------------------
# Dask: zero-filled checklists that stay on the workers
#
# The SED and EBD byte ranges are read and filtered on the workers as above. Then two hash
# shuffles keep every step exact without bringing rows to the client:
#
# 1. EBD rows and SED members (``sampling_event_identifier`` -> ``checklist_id``) go to bucket
#    ``hash(sampling_event_identifier) % P``: every row of one sampling event lands in one
#    bucket, so the species roll-up and :func:`link_detections` see all of them.
# 2. Filtered SED rows and linked detections go to bucket ``hash(checklist_id) % P``: every
#    member of a shared-checklist group, wherever it was in the file, lands in one bucket, so
#    :func:`deduplicate_groups` keeps the same member as on the whole table, and
#    :func:`zero_fill` sees every detection of every member.


@dataclass
class DaskObservations:
    """Zero-filled checklists held on a Dask cluster, one partition per checklist-id bucket.

    Attributes
    ----------
    client : distributed.Client
    parts : list of distributed.Future
        Each resolves to a DataFrame with the columns of :func:`load_observations` plus
        ``_row`` (position in the filtered SED, file order). Partitions share no ``checklist_id``.
    order : str
        Column whose ascending order is the local engine's row order: ``checklist_id`` after
        group de-duplication, ``_row`` without it.
    log : FilterLog
        The counts of every step, as :func:`load_observations` records them.
    """

    client: Any
    parts: list[Any]
    order: str
    log: FilterLog


def _bucket_of(values: pd.Series, n_buckets: int) -> np.ndarray:
    """Bucket of every value, ``hash % n_buckets``; the hash is the same in every process."""
    hashed = pd.util.hash_pandas_object(values, index=False).to_numpy()
    return (hashed % np.uint64(n_buckets)).astype(np.int64)


def split_by(frame: pd.DataFrame, bucket: np.ndarray, n_buckets: int) -> list[pd.DataFrame]:
    """Split ``frame`` into ``n_buckets`` frames by ``bucket``; rows keep their relative order.

    Examples
    --------
    >>> f = pd.DataFrame({"a": [1, 2, 3, 4]})
    >>> [p["a"].tolist() for p in split_by(f, np.array([1, 0, 1, 0]), 3)]
    [[2, 4], [1, 3], []]
    """
    order = np.argsort(bucket, kind="stable")
    edges = np.searchsorted(bucket[order], np.arange(n_buckets + 1))
    return [frame.iloc[order[a:b]] for a, b in pairwise(edges)]


def _concat(pieces: Sequence[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(list(pieces), ignore_index=True)


#: Bits of ``_row`` that number rows inside one byte range.
_ROW_BITS = 40


def _sed_shuffle_task(
    path: str,
    chunksize: int,
    byte_range: tuple[int, int] | None,
    index: int,
    options: dict[str, Any],
    n_buckets: int,
    groups: bool,
) -> tuple[list[pd.DataFrame], list[pd.DataFrame], FilterLog, int]:
    """Read and filter one SED byte range; split it by checklist id and its members by event."""
    log = FilterLog()
    parts = [
        _sed_chunk(chunk, log, **options)
        for chunk in iter_table(
            path, _SED_COLUMNS, required=SED_REQUIRED, kind="SED", chunksize=chunksize,
            byte_range=byte_range,
        )
    ]  # fmt: skip
    frame = _concat(parts) if parts else parse_sampling(_empty_text(_SED_COLUMNS))
    frame["_row"] = (index << _ROW_BITS) + np.arange(len(frame), dtype=np.int64)
    frame = with_checklist_id(frame, groups=groups)
    by_id = split_by(frame, _bucket_of(frame["checklist_id"], n_buckets), n_buckets)
    members = frame[["sampling_event_identifier", "checklist_id"]]
    by_event = split_by(
        members, _bucket_of(members["sampling_event_identifier"], n_buckets), n_buckets
    )
    return by_id, by_event, log, len(frame)


def _ebd_shuffle_task(
    path: str,
    chunksize: int,
    byte_range: tuple[int, int] | None,
    targets: tuple[str, ...],
    n_buckets: int,
) -> tuple[list[pd.DataFrame], FilterLog, dict[str, str]]:
    """Read one EBD byte range, keep the targets' rows, split them by sampling event."""
    log = FilterLog()
    names: dict[str, str] = {}
    parts = [
        _ebd_chunk(chunk, log, targets, names)
        for chunk in iter_table(
            path, _EBD_COLUMNS, required=EBD_REQUIRED, kind="EBD", chunksize=chunksize,
            byte_range=byte_range,
        )
    ]  # fmt: skip
    frame = _concat(parts) if parts else parse_detections(_empty_text(_EBD_COLUMNS))
    bucket = _bucket_of(frame["sampling_event_identifier"], n_buckets)
    return split_by(frame, bucket, n_buckets), log, names


def _link_task(
    detections: Sequence[pd.DataFrame],
    members: Sequence[pd.DataFrame],
    n_buckets: int,
    species: tuple[str, ...] | None = None,
) -> tuple[list[pd.DataFrame], FilterLog, FilterLog]:
    """Roll up, tag (several ``species``) and link the EBD rows of one event bucket; split them
    by checklist id."""
    rollup_log, link_log = FilterLog(), FilterLog()
    rows = _concat(detections)
    rows = rollup_log.apply("ebd", "rollup", rollup_species, rows, detail="drop spuh/slash/hybrid")
    if species is not None:
        rows = _tag_species(rows, species, rollup_log)
    linked = link_log.apply(
        "ebd", "in_kept_checklists", link_detections, rows, members=_concat(members)
    )
    pieces = split_by(linked, _bucket_of(linked["checklist_id"], n_buckets), n_buckets)
    return pieces, rollup_log, link_log


def _zero_fill_task(
    checklists: Sequence[pd.DataFrame],
    detections: Sequence[pd.DataFrame],
    deduplicate: bool,
    species: str | tuple[str, ...],
) -> tuple[pd.DataFrame, FilterLog, FilterLog]:
    """De-duplicate and zero-fill one checklist-id bucket (it holds whole groups)."""
    dedup_log, fill_log = FilterLog(), FilterLog()
    frame = _concat(checklists)
    if deduplicate:
        frame = dedup_log.apply(
            "sed", "group_dedup", deduplicate_groups, frame, detail="GROUP IDENTIFIER"
        )
    filled = zero_fill(frame, _concat(detections), None if isinstance(species, str) else species)
    _log_zero_fill(fill_log, filled, species)
    return filled, dedup_log, fill_log


def _log_zero_fill(log: FilterLog, filled: pd.DataFrame, species: str | Sequence[str]) -> None:
    several = not isinstance(species, str)
    detail = "; ".join(species) if several else species
    log.record("checklists", "zero_fill", kept=len(filled), dropped=0, detail=detail)
    log.record(
        "checklists",
        "detections",
        kept=int(filled["detected"].sum()),
        dropped=int((~filled["detected"]).sum()),
        detail="kept = detections, dropped = non-detections"
        + (f" (of {species[0]})" if several else ""),
    )
    for name in species if several else ():
        detected = filled[DETECTED_PREFIX + species_slug(name)].to_numpy(dtype=bool)
        log.record(
            "checklists",
            f"detections:{species_slug(name)}",
            kept=int(detected.sum()),
            dropped=int((~detected).sum()),
            detail=f"{name}: kept = detections, dropped = non-detections",
        )


def _empty_text(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=str) for c in columns})


def _byte_ranges(path: Path, kind: str, required: Sequence[str]) -> list[tuple[int, int] | None]:
    """Byte ranges of :data:`DASK_BLOCK_BYTES` for a plain file; one whole-file task otherwise."""
    with _open_binary(path) as (stream, _, _):  # validates the path and the header up front
        _check_columns(_header_from_line(stream.readline(), path), required, path, kind)
        plain = isinstance(stream, io.BufferedReader)
    size = path.stat().st_size
    if plain and size > DASK_BLOCK_BYTES:
        return [(a, min(a + DASK_BLOCK_BYTES, size)) for a in range(0, size, DASK_BLOCK_BYTES)]
    return [None]


def _pick(result: Any, *keys: int) -> Any:
    """``result[k0][k1]...``: run on the worker that holds ``result``, so only a piece moves."""
    for k in keys:
        result = result[k]
    return result


def dask_observations(
    ebd: str | os.PathLike[str],
    sed: str | os.PathLike[str],
    species: str | Sequence[str],
    *,
    client: Any,
    deduplicate: bool = True,
    log: FilterLog | None = None,
    chunksize: int = INGEST_DEFAULTS.chunksize,
    **filters: Any,
) -> DaskObservations:
    """Run :func:`load_observations` on a Dask cluster and leave the result on the workers.

    The client receives only filter counts and, from the EBD, the distinct species names; the
    zero-filled checklists stay in worker memory as partitions (see :class:`DaskObservations`)
    for a later step, such as gridding, to reduce there.

    Parameters
    ----------
    ebd, sed, species, deduplicate, log, chunksize
        As in :func:`load_observations`.
    client : distributed.Client
    **filters
        The filters of :func:`read_checklists` (``complete``, ``protocols``, ...).

    Returns
    -------
    DaskObservations
        Concatenated and sorted by ``order``, the partitions are the local engine's table (plus
        ``_row``).
    """
    log = FilterLog() if log is None else log
    names_given = species_list(species)
    several = None if isinstance(species, str) else names_given
    targets = tuple(_target(s) for s in names_given)
    options = _sed_options_from(**filters)
    sed_path, ebd_path = Path(sed), Path(ebd)
    sed_ranges = _byte_ranges(sed_path, "SED", SED_REQUIRED)
    ebd_ranges = _byte_ranges(ebd_path, "EBD", EBD_REQUIRED)
    n = max(len(sed_ranges), len(ebd_ranges))  # buckets of about one byte range each

    sed_tasks = [
        client.submit(_sed_shuffle_task, str(sed_path), chunksize, r, i, options, n, deduplicate,
                      pure=False)
        for i, r in enumerate(sed_ranges)
    ]  # fmt: skip
    sed_counts = client.gather([client.submit(_pick, t, slice(2, 4)) for t in sed_tasks])
    for block_log, _ in sed_counts:
        log.merge(block_log)
    if sum(n_kept for _, n_kept in sed_counts) == 0:
        raise InvalidInputError(_empty_message(sed, log))
    ebd_tasks = [
        client.submit(_ebd_shuffle_task, str(ebd_path), chunksize, r, targets, n, pure=False)
        for r in ebd_ranges
    ]
    ebd_log = FilterLog()
    names: dict[str, str] = {}
    for block_log, block_names in client.gather(
        [client.submit(_pick, t, slice(1, 3)) for t in ebd_tasks]
    ):
        ebd_log.merge(block_log)
        for k, v in block_names.items():
            names.setdefault(k, v)
    if ebd_log.kept("ebd", "malformed") == 0:
        raise _no_row_error(names_given[0], names, ebd_path)
    links = [
        client.submit(
            _link_task,
            [client.submit(_pick, t, 0, j) for t in ebd_tasks],
            [client.submit(_pick, t, 1, j) for t in sed_tasks],
            n,
            several,
        )
        for j in range(n)
    ]
    fills = [
        client.submit(
            _zero_fill_task,
            [client.submit(_pick, t, 0, j) for t in sed_tasks],
            [client.submit(_pick, t, 0, j) for t in links],
            deduplicate,
            species if several is None else several,
        )
        for j in range(n)
    ]
    rollup_logs, link_logs = zip(
        *client.gather([client.submit(_pick, t, slice(1, 3)) for t in links]), strict=True
    )
    if several is not None:
        tagged = FilterLog()
        for block_log in rollup_logs:
            tagged.merge(block_log)
        for name in several:
            if tagged.kept("ebd", f"species:{species_slug(name)}") == 0:
                raise _no_row_error(name, names, ebd_path)
    dedup_logs, fill_logs = zip(
        *client.gather([client.submit(_pick, t, slice(1, 3)) for t in fills]), strict=True
    )
    for part in (dedup_logs, [ebd_log], rollup_logs, link_logs, fill_logs):
        for block_log in part:
            log.merge(block_log)
    parts = [client.submit(_pick, t, 0) for t in fills]
    del sed_tasks, ebd_tasks, links, fills  # the pieces are freed once ``parts`` are computed
    return DaskObservations(client, parts, "checklist_id" if deduplicate else "_row", log)
