"""Whole-file readers: stream the SED and EBD, filter, and zero-fill (local or Dask engine)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pandas as pd

from reserve.config import INGEST_DEFAULTS, species_slug
from reserve.errors import InvalidInputError
from reserve.io.filters import (
    ChecklistFilter,
    deduplicate_groups,
    drop_repeated_events,
    empty_message,
    filter_checklists,
    with_checklist_id,
)
from reserve.io.log import FilterLog
from reserve.io.parse import EBD_COLUMNS, SED_COLUMNS, empty_text, parse_sampling
from reserve.io.species import (
    no_row_error,
    rollup_species,
    species_key,
    species_list,
    species_rows,
    tag_species,
)
from reserve.io.text import EBD_REQUIRED, SED_REQUIRED, iter_table
from reserve.io.zerofill import link_detections, log_zero_fill, note_unlinked, zero_fill

__all__ = ["load_observations", "read_checklists", "read_detections"]


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
        transient=True,  # a refused run leaves only its error line on stderr
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


def _engine(engine: str) -> str:
    if engine not in ("local", "dask"):
        raise InvalidInputError(f"engine={engine!r} is not one of 'local', 'dask'")
    return engine


def read_checklists(
    sed: str | os.PathLike[str],
    filters: ChecklistFilter | None = None,
    *,
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
    filters : ChecklistFilter, optional
        The best-practice filters; default ``ChecklistFilter()``. Its ``deduplicate`` is not
        used here (see :func:`load_observations`).
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
    filters = ChecklistFilter() if filters is None else filters
    path = Path(sed)
    if _engine(engine) == "dask":
        from reserve.io.dask_engine import map_blocks, sed_block

        parts, chunk_log = map_blocks(
            path, "SED", SED_COLUMNS, SED_REQUIRED, chunksize, sed_block, filters, scheduler
        )
        log.merge(chunk_log)
    else:
        parts = _read(
            path,
            SED_COLUMNS,
            SED_REQUIRED,
            "SED",
            chunksize,
            progress,
            lambda chunk: filter_checklists(chunk, log, filters),
        )
    if not parts:
        return parse_sampling(empty_text(SED_COLUMNS))
    return pd.concat(parts, ignore_index=True)


def read_detections(
    ebd: str | os.PathLike[str],
    species: str | Sequence[str],
    *,
    chunksize: int = INGEST_DEFAULTS.chunksize,
    progress: bool = False,
    log: FilterLog | None = None,
    engine: str = "local",
    scheduler: str | None = None,
    require_species: bool = True,
) -> pd.DataFrame:
    """Stream an EBD file and return the rows of one species, rolled up to species level.

    Parameters
    ----------
    ebd : path-like
        EBD text (plain, ``.gz`` or ``.zip``).
    species : str or sequence of str
        Common or scientific name, any case (``"Wood Thrush"``, ``"hylocichla mustelina"``).
        Subspecies and forms of it are included; spuhs, slashes and hybrids are not. A
        sequence reads several species in one pass (see :func:`reserve.io.species_list`).
    chunksize, progress, log, engine, scheduler
        As in :func:`read_checklists`.
    require_species : bool
        Refuse a species no row of the file is of (the default). False returns no rows for
        it instead: every checklist is then a non-detection (new surveys that did not find
        the species, :func:`reserve.surveys.read_survey_checklists`).

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
    targets = tuple(species_key(s) for s in names_given)
    log = FilterLog() if log is None else log
    names: dict[str, str] = {}
    path = Path(ebd)
    if _engine(engine) == "dask":
        from reserve.io.dask_engine import ebd_block, map_blocks

        options = {"targets": targets, "names": names}
        parts, chunk_log, names = map_blocks(
            path,
            "EBD",
            EBD_COLUMNS,
            EBD_REQUIRED,
            chunksize,
            ebd_block,
            options,
            scheduler,
            with_names=True,
        )
        log.merge(chunk_log)
    else:
        parts = _read(
            path,
            EBD_COLUMNS,
            EBD_REQUIRED,
            "EBD",
            chunksize,
            progress,
            lambda chunk: species_rows(chunk, log, targets, names),
        )
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=EBD_COLUMNS)
    if rows.empty and (require_species or not isinstance(species, str)):
        raise no_row_error(names_given[0], names, path)
    rows = log.apply("ebd", "rollup", rollup_species, rows, detail="drop spuh/slash/hybrid")
    if isinstance(species, str):
        return rows
    rows = tag_species(rows, names_given, log)
    for name in names_given:
        if log.kept("ebd", f"species:{species_slug(name)}") == 0:
            raise no_row_error(name, names, path)
    return rows


def load_observations(
    ebd: str | os.PathLike[str],
    sed: str | os.PathLike[str],
    species: str | Sequence[str],
    filters: ChecklistFilter | None = None,
    *,
    log: FilterLog | None = None,
    chunksize: int = INGEST_DEFAULTS.chunksize,
    progress: bool = False,
    engine: str = "local",
    scheduler: str | None = None,
    require_species: bool = True,
) -> pd.DataFrame:
    """Run the best-practice sequence and return zero-filled checklists for one species.

    Steps, in order: SED malformed rows, complete checklists, protocol, effort, dates, region
    (all streamed, see :func:`read_checklists`), shared-checklist de-duplication
    (``filters.deduplicate``), EBD species selection and roll-up (:func:`read_detections`),
    then zero-filling.

    Parameters
    ----------
    ebd, sed : path-like
    species : str or sequence of str
        One name, or several read in the same pass (:func:`reserve.io.species_list`).
    filters : ChecklistFilter, optional
        The best-practice filters; default ``ChecklistFilter()``.
    log : FilterLog, optional
    chunksize, progress, engine, scheduler
        As in :func:`read_checklists`.
    require_species : bool
        As in :func:`read_detections` (one species, ``engine="local"``; the Dask engine
        always refuses a species no row is of).

    Returns
    -------
    DataFrame
        One row per checklist: ``checklist_id``, ``sampling_event_identifier``, ``latitude``,
        ``longitude``, ``observation_date``, effort columns, ``detected``,
        ``observation_count``. With a sequence of species, ``detected`` and
        ``observation_count`` are the first species', and every species has
        ``detected__<slug>`` and ``observation_count__<slug>`` (:func:`reserve.io.zero_fill`).
    """
    log = FilterLog() if log is None else log
    filters = ChecklistFilter() if filters is None else filters
    names_given = species_list(species)
    if _engine(engine) == "dask":
        from reserve.io.dask_engine import gather_observations

        return gather_observations(ebd, sed, species, filters, log, chunksize, scheduler)
    reading = {"chunksize": chunksize, "progress": progress, "engine": engine}
    checklists = read_checklists(sed, filters, log=log, **reading)
    if checklists.empty:
        raise InvalidInputError(empty_message(sed, log))
    checklists = drop_repeated_events(checklists, log)
    members = with_checklist_id(checklists, groups=filters.deduplicate)
    if filters.deduplicate:
        checklists = log.apply(
            "sed", "group_dedup", deduplicate_groups, checklists, detail="GROUP IDENTIFIER"
        )
    else:
        checklists = members
    detections = read_detections(ebd, species, log=log, require_species=require_species, **reading)
    example = str(detections["sampling_event_identifier"].iloc[0]) if len(detections) else None
    detections = log.apply(
        "ebd",
        "in_kept_checklists",
        link_detections,
        detections,
        members=members[["sampling_event_identifier", "checklist_id"]],
    )
    note_unlinked(log, example)
    filled = zero_fill(checklists, detections, None if isinstance(species, str) else names_given)
    log_zero_fill(log, filled, species)
    return filled
