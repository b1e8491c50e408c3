"""The Dask engine: the readers' steps run over byte ranges of the files on a Dask cluster.

Imported only when ``engine="dask"`` is asked for; it needs ``dask[distributed]``.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reserve.config import INGEST_DEFAULTS, species_slug
from reserve.errors import DataFileError, InvalidInputError, MissingDependencyError
from reserve.io.filters import (
    ChecklistFilter,
    deduplicate_groups,
    drop_repeated_events,
    empty_message,
    filter_checklists,
    with_checklist_id,
)
from reserve.io.log import FilterLog
from reserve.io.parse import EBD_COLUMNS, SED_COLUMNS, empty_text, parse_detections, parse_sampling
from reserve.io.species import (
    no_row_error,
    rollup_species,
    species_key,
    species_list,
    species_rows,
    tag_species,
)
from reserve.io.text import (
    EBD_REQUIRED,
    SED_REQUIRED,
    check_columns,
    header_from_line,
    iter_table,
    open_binary,
)
from reserve.io.zerofill import link_detections, log_zero_fill, note_unlinked, zero_fill

__all__ = [
    "DASK_BLOCK_BYTES",
    "DaskObservations",
    "dask_client",
    "dask_observations",
    "ebd_block",
    "gather_observations",
    "map_blocks",
    "sed_block",
    "split_by",
]


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


def sed_block(chunk: pd.DataFrame, log: FilterLog, filters: ChecklistFilter) -> pd.DataFrame:
    """The per-chunk step of :func:`reserve.io.read_checklists`, for :func:`map_blocks`."""
    return filter_checklists(chunk, log, filters)


def ebd_block(chunk: pd.DataFrame, log: FilterLog, options: dict[str, Any]) -> pd.DataFrame:
    """The per-chunk step of :func:`reserve.io.read_detections`, for :func:`map_blocks`.

    ``options`` holds ``targets`` (:func:`reserve.io.species.species_key` of every name) and
    ``names`` (filled with the distinct names seen).
    """
    return species_rows(chunk, log, options["targets"], options["names"])


def _dask_task(
    path: str,
    kind: str,
    columns: Sequence[str],
    required: Sequence[str],
    chunksize: int,
    byte_range: tuple[int, int] | None,
    block_fn: Callable[[pd.DataFrame, FilterLog, Any], pd.DataFrame],
    options: Any,
) -> tuple[list[pd.DataFrame], FilterLog, dict[str, str]]:
    """Read one byte range on a worker and run the same per-chunk steps as the local engine."""
    log = FilterLog()
    names: dict[str, str] = {}
    if isinstance(options, dict) and "names" in options:
        options = {**options, "names": names}
    parts = [
        block_fn(chunk, log, options)
        for chunk in iter_table(
            path, columns, required=required, kind=kind, chunksize=chunksize, byte_range=byte_range
        )
    ]
    return parts, log, names


def map_blocks(
    path: Path,
    kind: str,
    columns: Sequence[str],
    required: Sequence[str],
    chunksize: int,
    block_fn: Callable[[pd.DataFrame, FilterLog, Any], pd.DataFrame],
    options: Any,
    scheduler: str | None,
    with_names: bool = False,
) -> Any:
    """Run ``block_fn`` on every chunk of byte ranges of ``path`` on a Dask cluster, in order.

    The client connects to ``scheduler`` or starts a LocalCluster on the loopback interface
    (or is the one of an enclosing :func:`dask_client` block). Per-chunk results are
    concatenated in file order, so the output equals the local engine's.

    Returns
    -------
    tuple
        ``(parts, log)``, or ``(parts, log, names)`` with ``with_names``.
    """
    _require_dask()
    ranges = _byte_ranges(path, kind, required)
    if _ACTIVE_CLIENT:
        return _gather(
            _ACTIVE_CLIENT[-1],
            path,
            kind,
            columns,
            required,
            chunksize,
            block_fn,
            options,
            ranges,
            with_names,
        )
    with dask_client(scheduler) as client:
        return _gather(
            client, path, kind, columns, required, chunksize, block_fn, options, ranges, with_names
        )


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


def _gather(
    client, path, kind, columns, required, chunksize, block_fn, options, ranges, with_names
):
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


@dataclass
class DaskObservations:
    """Zero-filled checklists held on a Dask cluster, one partition per checklist-id bucket.

    Attributes
    ----------
    client : distributed.Client
    parts : list of distributed.Future
        Each resolves to a DataFrame with the columns of :func:`reserve.io.load_observations` plus
        ``_row`` (position in the filtered SED, file order). Partitions share no ``checklist_id``.
    order : str
        Column whose ascending order is the local engine's row order: ``checklist_id`` after
        group de-duplication, ``_row`` without it.
    log : FilterLog
        The counts of every step, as :func:`reserve.io.load_observations` records them.
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
    filters: ChecklistFilter,
    n_buckets: int,
) -> tuple[list[pd.DataFrame], list[pd.DataFrame], FilterLog, int]:
    """Read and filter one SED byte range; split it by checklist id and its members by event."""
    log = FilterLog()
    parts = [
        filter_checklists(chunk, log, filters)
        for chunk in iter_table(
            path,
            SED_COLUMNS,
            required=SED_REQUIRED,
            kind="SED",
            chunksize=chunksize,
            byte_range=byte_range,
        )
    ]
    frame = _concat(parts) if parts else parse_sampling(empty_text(SED_COLUMNS))
    frame["_row"] = (index << _ROW_BITS) + np.arange(len(frame), dtype=np.int64)
    frame = with_checklist_id(frame, groups=filters.deduplicate)
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
        species_rows(chunk, log, targets, names)
        for chunk in iter_table(
            path,
            EBD_COLUMNS,
            required=EBD_REQUIRED,
            kind="EBD",
            chunksize=chunksize,
            byte_range=byte_range,
        )
    ]
    frame = _concat(parts) if parts else parse_detections(empty_text(EBD_COLUMNS))
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
        rows = tag_species(rows, species, rollup_log)
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
    frame = drop_repeated_events(_concat(checklists), dedup_log)
    if deduplicate:
        frame = dedup_log.apply(
            "sed", "group_dedup", deduplicate_groups, frame, detail="GROUP IDENTIFIER"
        )
    filled = zero_fill(frame, _concat(detections), None if isinstance(species, str) else species)
    log_zero_fill(fill_log, filled, species)
    return filled, dedup_log, fill_log


def _byte_ranges(path: Path, kind: str, required: Sequence[str]) -> list[tuple[int, int] | None]:
    """Byte ranges of :data:`DASK_BLOCK_BYTES` for a plain file; one whole-file task otherwise."""
    with open_binary(path) as (stream, _, _):  # validates the path and the header up front
        check_columns(header_from_line(stream.readline(), path), required, path, kind)
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
    filters: ChecklistFilter | None = None,
    *,
    client: Any,
    log: FilterLog | None = None,
    chunksize: int = INGEST_DEFAULTS.chunksize,
) -> DaskObservations:
    """Run :func:`reserve.io.load_observations` on a Dask cluster; leave the result there.

    The client receives only filter counts and, from the EBD, the distinct species names; the
    zero-filled checklists stay in worker memory as partitions (see :class:`DaskObservations`)
    for a later step, such as gridding, to reduce there.

    Parameters
    ----------
    ebd, sed, species, filters, log, chunksize
        As in :func:`reserve.io.load_observations`.
    client : distributed.Client

    Returns
    -------
    DaskObservations
        Concatenated and sorted by ``order``, the partitions are the local engine's table (plus
        ``_row``).
    """
    log = FilterLog() if log is None else log
    filters = ChecklistFilter() if filters is None else filters
    names_given = species_list(species)
    several = None if isinstance(species, str) else names_given
    sed_path, ebd_path = Path(sed), Path(ebd)
    sed_ranges = _byte_ranges(sed_path, "SED", SED_REQUIRED)
    ebd_ranges = _byte_ranges(ebd_path, "EBD", EBD_REQUIRED)
    n = max(len(sed_ranges), len(ebd_ranges))  # buckets of about one byte range each
    sed_tasks = _read_sed(client, sed, sed_ranges, filters, n, chunksize, log)
    targets = tuple(species_key(s) for s in names_given)
    ebd_tasks, ebd_log, names = _read_ebd(client, ebd_path, ebd_ranges, targets, n, chunksize)
    if ebd_log.kept("ebd", "malformed") == 0:
        raise no_row_error(names_given[0], names, ebd_path)
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
            filters.deduplicate,
            species if several is None else several,
        )
        for j in range(n)
    ]
    rollup_logs, link_logs = _logs_of(client, links)
    if several is not None:
        _check_every_species_found(rollup_logs, several, names, ebd_path)
    dedup_logs, fill_logs = _logs_of(client, fills)
    for part in (dedup_logs, [ebd_log], rollup_logs, link_logs, fill_logs):
        for block_log in part:
            log.merge(block_log)
    note_unlinked(log)
    parts = [client.submit(_pick, t, 0) for t in fills]
    del sed_tasks, ebd_tasks, links, fills  # the pieces are freed once ``parts`` are computed
    return DaskObservations(client, parts, "checklist_id" if filters.deduplicate else "_row", log)


def _read_sed(
    client: Any,
    sed: str | os.PathLike[str],
    ranges: list[tuple[int, int] | None],
    filters: ChecklistFilter,
    n_buckets: int,
    chunksize: int,
    log: FilterLog,
) -> list[Any]:
    """Submit the SED tasks, merge their counts into ``log``; refuse when none is kept."""
    tasks = [
        client.submit(
            _sed_shuffle_task, str(Path(sed)), chunksize, r, i, filters, n_buckets, pure=False
        )
        for i, r in enumerate(ranges)
    ]
    counts = client.gather([client.submit(_pick, t, slice(2, 4)) for t in tasks])
    for block_log, _ in counts:
        log.merge(block_log)
    if sum(n_kept for _, n_kept in counts) == 0:
        raise InvalidInputError(empty_message(sed, log))
    return tasks


def _read_ebd(
    client: Any,
    path: Path,
    ranges: list[tuple[int, int] | None],
    targets: tuple[str, ...],
    n_buckets: int,
    chunksize: int,
) -> tuple[list[Any], FilterLog, dict[str, str]]:
    """Submit the EBD tasks; gather their counts and the distinct species names seen."""
    tasks = [
        client.submit(_ebd_shuffle_task, str(path), chunksize, r, targets, n_buckets, pure=False)
        for r in ranges
    ]
    log = FilterLog()
    names: dict[str, str] = {}
    for block_log, block_names in client.gather(
        [client.submit(_pick, t, slice(1, 3)) for t in tasks]
    ):
        log.merge(block_log)
        for k, v in block_names.items():
            names.setdefault(k, v)
    return tasks, log, names


def _logs_of(client: Any, tasks: list[Any]) -> tuple[tuple[FilterLog, ...], ...]:
    """The two logs (items 1 and 2) of every task, as two tuples."""
    return tuple(
        zip(*client.gather([client.submit(_pick, t, slice(1, 3)) for t in tasks]), strict=True)
    )


def _check_every_species_found(
    rollup_logs: Sequence[FilterLog], several: tuple[str, ...], names: dict[str, str], path: Path
) -> None:
    tagged = FilterLog()
    for block_log in rollup_logs:
        tagged.merge(block_log)
    for name in several:
        if tagged.kept("ebd", f"species:{species_slug(name)}") == 0:
            raise no_row_error(name, names, path)


def gather_observations(
    ebd: str | os.PathLike[str],
    sed: str | os.PathLike[str],
    species: str | Sequence[str],
    filters: ChecklistFilter,
    log: FilterLog,
    chunksize: int,
    scheduler: str | None,
) -> pd.DataFrame:
    """:func:`dask_observations`, gathered into the local engine's table (same rows, order)."""
    with dask_client(scheduler, reuse=True) as client:
        held = dask_observations(
            ebd, sed, species, filters, client=client, log=log, chunksize=chunksize
        )
        parts = client.gather(held.parts)
    table = _concat(parts).sort_values(held.order, kind="stable")
    return table.drop(columns="_row").reset_index(drop=True)
