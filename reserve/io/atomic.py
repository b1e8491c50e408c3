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
    "check_path_name",
    "check_target",
    "remove_stale_temporaries",
    "replacing",
    "write_failure",
    "write_together",
]

_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp(\..*)?$")

#: Bytes of a target's name kept whole in its temporaries' names; a longer name is cut to
#: :data:`_STEM_CUT` bytes and a hash, so that a temporary of a temporary (a writer called
#: on a temporary path) plus SQLite's ``-journal`` stays under the 255 bytes of a file name.
_STEM_MAX, _STEM_CUT = 120, 100


def _stem(name: str) -> str:
    """``name`` as it appears in its temporaries' names (cut and hashed when long)."""
    raw = os.fsencode(name)
    if len(raw) <= _STEM_MAX:
        return name
    import hashlib

    digest = hashlib.blake2b(raw, digest_size=5).hexdigest()
    return raw[:_STEM_CUT].decode("utf-8", errors="ignore") + "~" + digest


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
    inner = m["name"]
    if inner in (target_name, _stem(target_name)):
        return True
    # a temporary of a temporary whose name was cut: it begins as that temporary's name does
    cut = "~" in inner and inner.startswith("." + _stem(target_name)[: _STEM_CUT - 1])
    return cut or _stale_of(inner, target_name)


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
    return target.with_name(f".{_stem(target.name)}.{os.getpid()}.tmp{suffix}")


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
    while not _exists(probe) and probe != probe.parent:
        probe = probe.parent
    return probe


def _exists(path: Path) -> bool:
    """``path.exists()``, False for a path the system cannot even look up (a name too long)."""
    try:
        return path.exists()
    except OSError:
        return False


def check_path_name(target: str | os.PathLike[str], option: str) -> Path:
    """Refuse a path that no file can have here: not UTF-8, or a name or path too long.

    GDAL (GeoPackages) takes UTF-8 paths only. Each name in the path must fit the file
    system's limit (``NAME_MAX``, 255 bytes on Linux), and the whole path, with the longest
    temporary this package writes beside it, ``PATH_MAX``. Nothing is touched but ``stat``.

    Parameters
    ----------
    target : path-like
        The file to be written.
    option : str
        The option that names the path, for messages.

    Returns
    -------
    Path

    Raises
    ------
    reserve.errors.DataFileError
        Naming the part that is wrong and the fix.

    Examples
    --------
    >>> check_path_name("out/reserve.gpkg", "--out").name
    'reserve.gpkg'
    """
    from reserve.errors import DataFileError

    target = Path(target)
    try:
        os.fsdecode(os.fsencode(str(target.absolute()))).encode("utf-8")
    except UnicodeError:
        raise DataFileError(
            f"{option} {str(target)!a} holds bytes that are not UTF-8 text (shown as "
            "escapes); GeoPackages and maps are written to UTF-8 paths only: rename the "
            "folder or pass another path"
        ) from None
    name_max, path_max = _limits(_existing_ancestor(target.parent))
    shown = str(target) if len(str(target)) <= 80 else f"{str(target)[:60]}..."
    for part in target.absolute().parts:
        if len(os.fsencode(part)) > name_max:
            raise DataFileError(
                f"{option} {shown!r}: the name {part[:30]!r}... is {len(os.fsencode(part))} "
                f"bytes, longer than the {name_max} a file or folder name may have here; "
                "pass a shorter name"
            )
    longest = atomic_target(atomic_target(target.absolute(), ".gpkg"), ".gpkg")
    if len(os.fsencode(str(longest))) + len("-journal") >= path_max:
        raise DataFileError(
            f"{option} {shown!r} is {len(os.fsencode(str(target.absolute())))} bytes long, too "
            f"long for the {path_max} a path may have here with the temporary files written "
            "beside it; pass a shorter path"
        )
    return target


def _limits(folder: Path) -> tuple[int, int]:
    """``NAME_MAX`` and ``PATH_MAX`` of the file system of ``folder`` (255, 4096 if unknown)."""
    out = []
    for key, default in (("PC_NAME_MAX", 255), ("PC_PATH_MAX", 4096)):
        try:
            out.append(int(os.pathconf(folder, key)))
        except (OSError, ValueError, AttributeError):
            out.append(default)
    return out[0], out[1]


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

    target = check_path_name(target, option)
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
            prefix=f".{_stem(target.name)}.{os.getpid()}.tmp.", suffix=".probe", dir=base
        )
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise DataFileError(
            f"{shown} cannot be written: folder {str(base)!r} is not writable "
            f"({exc.strerror or exc}); pass a path in a writable folder"
        ) from None
    return target


def _write_temporaries(
    writers: list[Callable[[Path], object]], temps: list[Path], parallel: bool
) -> None:
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


#: Free bytes under which a failed write is put down to a full disk (GDAL's SQLite says
#: "database or disk is full", "Failed to commit transaction" or worse when it runs out).
_NEARLY_FULL = 1 << 20


def write_failure(exc: BaseException, folder: str | os.PathLike[str]) -> str:
    """Why writing a file in ``folder`` failed, in a planner's words.

    A full disk is named as such (``ENOSPC``, or less than 1 MiB left in ``folder``: GDAL's
    own messages then vary); otherwise the error's first line.

    Parameters
    ----------
    exc : BaseException
        The error (an ``OSError`` or a pyogrio error).
    folder : path-like
        The folder written to.

    Returns
    -------
    str

    Examples
    --------
    >>> import errno
    >>> write_failure(OSError(errno.ENOSPC, "No space left on device"), ".")
    'the disk is full (No space left on device)'
    """
    import errno
    import shutil

    text = (getattr(exc, "strerror", None) or str(exc)).strip().splitlines()
    first = text[0][:200] if text else type(exc).__name__
    try:
        free = shutil.disk_usage(_existing_ancestor(Path(folder))).free
    except OSError:
        free = None
    if getattr(exc, "errno", None) == errno.ENOSPC or "disk is full" in first:
        return f"the disk is full ({first[:80]})"
    if free is not None and free < _NEARLY_FULL:
        return f"the disk is full ({free // 1024} KiB left; {first[:80]})"
    return first
