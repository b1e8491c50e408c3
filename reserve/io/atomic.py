"""Write outputs atomically: a hidden temporary file beside the target, then a rename.

A reader sees the old file or the new one, never a partial one; a run killed before the rename
leaves the old file untouched, and its temporary file (``.<target name>.<pid>.tmp...``) is
removed by the next run that writes the same target (:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_target", "remove_stale_temporaries", "replacing"]

_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp(\..*)?$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temporaries(target: str | os.PathLike[str]) -> list[Path]:
    """Delete temporary files of ``target`` left by runs that were killed.

    Temporary files are named ``.<target name>.<pid>.tmp...`` beside the target; only those
    whose process no longer exists are removed.

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
        m = _TMP.match(p.name)
        if m and m["name"] == target.name and not _alive(int(m["pid"])):
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
