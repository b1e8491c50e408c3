"""Write outputs atomically: a hidden temporary file beside the target, then a rename.

A reader sees the old file or the new one, never a partial one; a run killed before the rename
leaves the old file untouched, and its temporary file (``.<target name>.<pid>.tmp...``) is
removed by the next run that writes the same target (:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from reserve.fork import Forked, fork_call

__all__ = [
    "atomic_target",
    "check_target",
    "remove_stale_temporaries",
    "replacing",
    "write_together",
]

_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp(\..*)?$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _stale_of(name: str, target_name: str) -> bool:
    """Whether ``name`` is a dead run's temporary of ``target_name`` (or of one of those)."""
    m = _TMP.match(name)
    if m is None or _alive(int(m["pid"])):
        return False
    return m["name"] == target_name or _stale_of(m["name"], target_name)


def remove_stale_temporaries(target: str | os.PathLike[str]) -> list[Path]:
    """Delete temporary files of ``target`` left by runs that were killed.

    Temporary files are named ``.<target name>.<pid>.tmp...`` beside the target (or, for a
    file written through a temporary of its own, ``.<temporary name>.<pid>.tmp...``); only
    those whose process no longer exists are removed.

    Returns
    -------
    list of Path
        The files removed.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> remove_stale_temporaries(pathlib.Path(tempfile.mkdtemp()) / "out.gpkg")
    []
    """
    target = Path(target)
    removed = []
    if not target.parent.is_dir():
        return removed
    for p in target.parent.iterdir():
        if _stale_of(p.name, target.name):
            try:
                p.unlink()
                removed.append(p)
            except OSError:  # raced with another cleaner; harmless
                pass
    return removed


def atomic_target(target: str | os.PathLike[str], suffix: str = "") -> Path:
    """The hidden temporary path beside ``target`` that is later renamed onto it.

    Examples
    --------
    >>> atomic_target("out/reserve.gpkg", ".gpkg").name.endswith(".tmp.gpkg")
    True
    """
    target = Path(target)
    return target.with_name(f".{target.name}.{os.getpid()}.tmp{suffix}")


@contextmanager
def replacing(target: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``target``; rename it onto ``target`` when the block ends.

    Stale temporaries of killed runs are removed first. If the block raises, ``target`` is
    left as it was. The temporary file, and any SQLite side files of it (``-journal``,
    ``-wal``, ``-shm``), never outlive the block.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> with replacing(out, ".txt") as tmp:
    ...     _ = tmp.write_text("done")
    >>> out.read_text(), sorted(p.name for p in out.parent.iterdir())
    ('done', ['a.txt'])
    """
    target = Path(target)
    remove_stale_temporaries(target)
    tmp = atomic_target(target, suffix)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, Path(f"{tmp}-journal"), Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            if leftover.exists():
                leftover.unlink()


def _side_files(path: Path) -> tuple[Path, ...]:
    """``path`` and the SQLite side files a GeoPackage being written may have beside it."""
    return (path, Path(f"{path}-journal"), Path(f"{path}-wal"), Path(f"{path}-shm"))


def _existing_ancestor(folder: Path) -> Path:
    """The nearest folder among ``folder`` and its parents that exists (or ``folder``)."""
    probe = folder.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def check_target(target: str | os.PathLike[str], *, overwrite: bool, option: str) -> Path:
    """Refuse, before any work, an output path that cannot be written or may not be replaced.

    Nothing is created: a missing folder is only checked to be creatable (its nearest
    existing parent is a writable folder, tested by creating and removing a temporary file,
    which is also what tells a read-only or virtual file system such as ``/proc``).

    Parameters
    ----------
    target : path-like
        The file to be written.
    overwrite : bool
        Whether an existing ``target`` may be replaced.
    option : str
        The option that names the path, for messages (``--map``, ``--out``).

    Returns
    -------
    Path

    Raises
    ------
    reserve.errors.OutputExistsError
        ``target`` exists and ``overwrite`` is False.
    reserve.errors.DataFileError
        ``target`` is a folder; a parent is a file; the folder is not writable.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> check_target(d / "new" / "map.html", overwrite=False, option="--map").name
    'map.html'
    >>> (d / "new").exists()
    False
    """
    import tempfile

    from reserve.errors import DataFileError, OutputExistsError

    target = Path(target)
    shown = f"output {str(target)!r} ({option})"
    if target.is_dir():
        raise DataFileError(f"{shown} is a folder; pass a file path inside it")
    if target.exists() and not overwrite:
        raise OutputExistsError(f"{shown} already exists; pass --overwrite to replace it")
    base = _existing_ancestor(target.parent)
    if not base.is_dir():
        raise DataFileError(
            f"{shown} cannot be written: {str(base)!r} is a file, not a folder; pass a path "
            "in a folder"
        )
    try:
        # named as our temporaries are, so a run killed right here leaves nothing the next
        # run does not remove
        fd, probe = tempfile.mkstemp(
            prefix=f".{target.name}.{os.getpid()}.tmp.", suffix=".probe", dir=base
        )
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise DataFileError(
            f"{shown} cannot be written: folder {str(base)!r} is not writable "
            f"({exc.strerror or exc}); pass a path in a writable folder"
        ) from None
    return target


def _write_temporaries(writers: list[Callable[[Path], object]], temps: list[Path],
                       parallel: bool) -> None:  # fmt: skip
    """``writer(tmp)`` for each pair; with ``parallel``, all but the last in forked children.

    A writer may also hand its work to a child of its own and return that child's
    :class:`reserve.fork.Forked`: it is waited for (or ended) like the forked ones.
    """
    started = []
    try:
        for write, tmp in zip(writers[:-1], temps[:-1], strict=True):
            job = fork_call(write, tmp) if parallel else None
            if job is None:
                job = write(tmp)
            if isinstance(job, Forked):
                started.append(job)
        last = writers[-1](temps[-1]) if writers else None
        if isinstance(last, Forked):
            started.append(last)
        for job in started:
            job.result()
    except BaseException:
        for job in started:  # no child may write on after the temporaries are removed
            job.cancel()
        raise


def write_together(
    jobs: Sequence[tuple[str | os.PathLike[str], str, Callable[[Path], object]]],
    *,
    parallel: bool = False,
) -> list[Path]:
    """Write several outputs so that they are replaced together or not at all.

    Each job is ``(target, suffix, write)``: ``write(tmp)`` writes the output to a hidden
    temporary path beside ``target`` (``.<name>.<pid>.tmp<suffix>``). Missing folders are
    created first. Only when every job has written its temporary file are they renamed onto
    their targets, one after the other; if a rename fails, the targets already renamed are
    restored (the previous file, or none) and the folders this call created are removed.
    Killed before the renames, a run leaves every previous output intact; its temporaries
    are removed by the next run that writes the same targets. (Killed in the microseconds
    between two renames, it leaves the first target new and the others previous: a rename
    is atomic, a set of them is not.)

    Parameters
    ----------
    jobs : sequence of (path-like, str, callable)
        The outputs, in the order they are written (write the quick ones first). A
        ``write`` may return a :class:`reserve.fork.Forked` (a child it handed the writing
        to): it is waited for before the renames.
    parallel : bool, default=False
        Write every output but the last in a forked child of its own while this process
        writes the last (:func:`reserve.fork.fork_call`; here, in order, where no child may
        be forked). An error in a child is raised here, and nothing is renamed.

    Returns
    -------
    list of Path
        The targets written.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> paths = write_together([(d / "a" / "x.txt", ".txt", lambda t: t.write_text("x")),
    ...                         (d / "y.txt", ".txt", lambda t: t.write_text("y"))])
    >>> sorted(str(p.relative_to(d)) for p in d.rglob("*"))
    ['a', 'a/x.txt', 'y.txt']
    """
    targets = [Path(t) for t, _, _ in jobs]
    created: list[Path] = []
    temps: list[Path] = []
    backups: dict[Path, Path | None] = {}
    try:
        for target in targets:
            created += _make_folders(target.parent)
            remove_stale_temporaries(target)
        temps += [atomic_target(t, suffix) for t, (_, suffix, _) in zip(targets, jobs, strict=True)]
        _write_temporaries([write for _, _, write in jobs], temps, parallel)
        for target, tmp in zip(targets, temps, strict=True):
            backups[target] = _backup(target)
            os.replace(tmp, target)
    except BaseException:
        for target, backup in backups.items():
            _restore(target, backup)
        _remove_leftovers(temps, backups)
        _remove_folders(created)  # empty now that the temporaries are gone
        raise
    _remove_leftovers(temps, backups)
    return targets


def _remove_leftovers(temps: list[Path], backups: dict[Path, Path | None]) -> None:
    """Remove the temporaries (and their SQLite side files) and backups still on disk."""
    for path in [*temps, *(b for b in backups.values() if b is not None)]:
        for leftover in _side_files(path):
            if leftover.exists():
                leftover.unlink()


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; return those created, deepest last."""
    missing = []
    probe = folder
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for path in reversed(missing):
        path.mkdir()
    return list(reversed(missing))


def _remove_folders(created: list[Path]) -> None:
    for path in reversed(created):
        try:
            path.rmdir()
        except OSError:  # not empty: something else wrote there meanwhile; keep it
            pass


def _backup(target: Path) -> Path | None:
    """A hard link (else a copy) of an existing ``target``, to restore it; None if none."""
    if not target.exists():
        return None
    backup = atomic_target(target, ".bak")
    try:
        os.link(target, backup)
    except OSError:
        import shutil

        shutil.copy2(target, backup)
    return backup


def _restore(target: Path, backup: Path | None) -> None:
    try:
        if backup is None:
            target.unlink(missing_ok=True)
        else:
            os.replace(backup, target)
    except OSError:  # best effort: the error being raised says what went wrong
        pass
