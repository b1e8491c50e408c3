"""Stream eBird EBD and SED text: both column layouts, plain, gzip or zip.

Both EBD column layouts in circulation are accepted: the older one (``PROTOCOL TYPE``,
``PROJECT CODE``, ``TRIP COMMENTS``) and the newer one (``OBSERVATION TYPE``, ``PROTOCOL NAME``,
``PROJECT NAMES`` / ``PROJECT IDENTIFIERS``, ``CHECKLIST COMMENTS``). Header names are trimmed and
made lower_snake (``" LOCALITY TYPE"`` becomes ``locality_type``) and the newer names are mapped
onto one canonical set (``protocol_name`` becomes ``protocol_type``). Files may be plain text,
gzip or zip (detected from their first bytes). Every column is read as text; the parsers of
:mod:`reserve.io.parse` type the columns used. Files are streamed in chunks of ``chunksize``
rows, so memory depends on the rows kept, not the file size.
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import re
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from reserve.config import INGEST_DEFAULTS
from reserve.errors import DataFileError

__all__ = [
    "EBD_REQUIRED",
    "SED_REQUIRED",
    "check_columns",
    "header_from_line",
    "iter_table",
    "normalise_columns",
    "open_binary",
    "read_header",
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
def open_binary(path: Path) -> Iterator[tuple[BinaryIO, Callable[[], int], int]]:
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
                try:
                    yield gz, raw.tell, total  # type: ignore[misc]
                except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                    raise DataFileError(
                        f"file {str(path)!r} is a truncated or damaged gzip file ({exc}); "
                        "download it again (or pass the uncompressed .txt)"
                    ) from None
        elif magic == b"PK\x03\x04":
            with _zip_archive(raw, path) as zf:
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


@contextmanager
def _zip_archive(raw: BinaryIO, path: Path) -> Iterator[zipfile.ZipFile]:
    """The zip archive of ``raw``; a damaged one refused with a message naming the file."""
    try:
        zf = zipfile.ZipFile(raw)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise DataFileError(
            f"file {str(path)!r} starts like a zip archive but is not a readable one ({exc}); "
            "download it again, or pass the unzipped .txt file"
        ) from None
    with zf:
        yield zf


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
    with open_binary(Path(path)) as (stream, _, _):
        return header_from_line(stream.readline(), Path(path))


def header_from_line(line: bytes, path: Path) -> list[str]:
    """The normalised column names of a header line; refuses text that is not UTF-8."""
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataFileError(
            f"file {str(path)!r} is not UTF-8 text ({exc}); pass an eBird EBD or SED .txt file"
        ) from None
    return normalise_columns(text.rstrip("\r\n").split("\t"))


def check_columns(header: list[str], required: Sequence[str], path: Path, kind: str) -> None:
    """Refuse a header that lacks a required column; say when the EBD and SED look swapped."""
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
    with open_binary(path) as (stream, consumed, total):
        header = header_from_line(stream.readline(), path)
        check_columns(header, required, path, kind)
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
        tail = _Tail(body)
        body = io.BufferedReader(tail, buffer_size=1 << 20)  # type: ignore[assignment]
        body, names = _align_fields(body, header, path, kind, numbered=byte_range is None)
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
        if byte_range is None or byte_range[1] >= total:
            tail.check_last_line(len(names), path, kind, numbered=byte_range is None)


def _align_fields(
    body: BinaryIO, header: list[str], path: Path, kind: str, numbered: bool
) -> tuple[BinaryIO, list[str]]:
    """The data stream and its column names, matched to the fields of the first data line.

    Some files end data lines, but not the header, with a tab: peek at the first data line and
    give that trailing field a name, so columns do not shift. Extra fields that hold text are
    no trailing tab but a damaged line (a tab inside a field, a column added by hand):
    refused, naming the line (``numbered``: the stream began right after the header).
    """
    first = body.readline()
    names = list(header)
    fields = first.rstrip(b"\r\n").split(b"\t") if first else []
    n_fields = len(fields) if first else len(names)
    extra = [f.decode("utf-8", "replace") for f in fields[len(names) :] if f.strip()]
    if extra:
        which = "line 2" if numbered else "a line"
        raise DataFileError(
            f"{kind} file {str(path)!r}: {which} has {n_fields} fields where the header has "
            f"{len(names)} (the extra text: {extra[:2]}), so its values would shift: a field "
            "holds a tab, or the line was edited by hand. Fix or delete that line"
        )
    while n_fields > len(names):
        names.append(f"_unnamed_{len(names)}")
    while n_fields < len(names) and names[-1].startswith("_unnamed_"):
        names.pop()  # a trailing tab on the header line only
    stream = io.BufferedReader(_Prefixed(first, body), buffer_size=1 << 20)
    return stream, names  # type: ignore[return-value]


def _parse_errors(reader: Iterable[pd.DataFrame], path: Path, kind: str) -> Iterator[pd.DataFrame]:
    """Re-raise the tokenizer's errors as DataFileError naming the file."""
    try:
        yield from reader
    except (EOFError, zlib.error, zipfile.BadZipFile, gzip.BadGzipFile) as exc:
        raise DataFileError(
            f"{kind} file {str(path)!r} is a truncated or damaged compressed file ({exc}); "
            "download it again (or pass the uncompressed .txt)"
        ) from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise DataFileError(
            f"{kind} file {str(path)!r} cannot be parsed as tab-separated eBird text ({exc}); "
            "check that it is an uncorrupted EBD/SED download"
        ) from None


class _Tail(io.RawIOBase):
    """Pass a stream through, counting its lines and keeping its last bytes.

    After the whole file is read, :meth:`check_last_line` refuses a last line with fewer
    fields than the header: the mark of a file cut short (an interrupted download or copy),
    whose last row would otherwise be read, wrongly, as a row with empty fields.
    """

    _KEEP = 1 << 18

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.newlines = 0
        self.tail = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        self.newlines += data.count(b"\n")
        self.tail = (self.tail + data)[-self._KEEP :]
        return len(data)

    def check_last_line(self, n_fields: int, path: Path, kind: str, numbered: bool) -> None:
        """Refuse a last data line with fewer than ``n_fields`` tab-separated fields.

        ``numbered``: the stream began right after the header, so the line number is known.
        """
        body = self.tail.rstrip(b"\r\n")
        if not body:
            return
        last = body.rsplit(b"\n", 1)[-1]
        found = last.count(b"\t") + 1
        if found >= n_fields:
            return
        after = self.tail[len(body) :].count(b"\n")
        line = 1 + (self.newlines - after) + 1  # the header, the body's newlines, this line
        which = f"line {line}" if numbered else "its last line"
        raise DataFileError(
            f"{kind} file {str(path)!r} ends with a cut line: {which} has {found} of the "
            f"header's {n_fields} fields, so the file looks truncated (an interrupted download "
            "or copy); download it again"
        )


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
