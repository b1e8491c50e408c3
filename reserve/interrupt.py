"""Ctrl-C and SIGTERM at the command line: one line on stderr, exit 130 or 143, at any moment.

:func:`install` is the first thing the ``reserve`` command does, before it imports anything
heavy. From then on a signal is handled by what the run is doing when it comes:

* **starting** (the imports, parsing the options): nothing has been written and no child
  started, so the process says so and ends at once;
* **working** (inside :func:`working`, i.e. the command's body): the signal raises
  :class:`Interrupted` (Ctrl-C) or :class:`Terminated` (SIGTERM), so that the ``with`` and
  ``finally`` blocks unwind: temporary files are removed and forked children ended; the
  command line then prints the line and exits (:func:`stopping`);
* **ending** (a message said, or the work done): ignored, the run is already ending.

Both exceptions derive from :class:`KeyboardInterrupt`, so code that lets Ctrl-C through
lets them through, but neither is of that exact type, which matters: CPython ends a process
with status -2 (killed by SIGINT) instead of its exit code when an exception of exactly that
type has crossed certain frames of an import (``reserve select`` about 0.5 s in, while SciPy
is being imported), even when it was caught afterwards.

Without :func:`install` (the Python API, tests calling :func:`reserve.cli.main` in-process)
signals keep Python's defaults: Ctrl-C raises a plain ``KeyboardInterrupt``, which the
command line reports in the same way.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Interrupted", "Terminated", "install", "message", "stopping", "working"]


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by Ctrl-C (SIGINT) once :func:`install` has run."""


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM once :func:`install` has run: unwinds as Ctrl-C."""


#: "starting", "working" or "ending"; only read by the handler installed by :func:`install`.
_phase = "starting"


def message(signum: int) -> str:
    """The one line said when signal ``signum`` stops a run (without the ``reserve:`` prefix).

    Examples
    --------
    >>> message(signal.SIGINT)[:31]
    'error: interrupted (Ctrl-C); no'
    """
    what = "stopped (SIGTERM)" if signum == signal.SIGTERM else "interrupted (Ctrl-C)"
    return f"error: {what}; nothing was written, and any previous outputs are unchanged"


def _handle(signum: int, frame: Any) -> None:
    if _phase == "working":
        raise Terminated if signum == signal.SIGTERM else Interrupted
    if _phase == "ending":
        return
    # starting: nothing to undo, so nothing to unwind through (an import's traceback)
    os.write(2, f"reserve: {message(signum)}\n".encode())
    os._exit(128 + signum)


def install(held: list[int] | None = None) -> None:
    """Route SIGINT and SIGTERM through this module (the ``reserve`` entry points only).

    ``held`` lists signals that came before this module was loaded (``reserve/__init__.py``
    holds them from its first line): the first of them ends the run now, as it would have.
    """
    global _phase
    _phase = "starting"
    signal.signal(signal.SIGINT, _handle)
    signal.signal(signal.SIGTERM, _handle)
    if held:
        _handle(held[0], None)


@contextmanager
def working() -> Iterator[None]:
    """Inside the block a signal unwinds the run; after it, signals are ignored."""
    global _phase
    _phase = "working"
    try:
        yield
    finally:
        _phase = "ending"


def stopping(exc: KeyboardInterrupt) -> int:
    """The signal that raised ``exc``; from now on signals are ignored while the run ends.

    A second Ctrl-C must not cut the message short or add another line.
    """
    global _phase
    _phase = "ending"
    return signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
