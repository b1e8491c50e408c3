"""reserve: choose k private land cells for a species with Transductive Top K (TTK)."""

from __future__ import annotations

import sys

from reserve.errors import (
    DataFileError,
    InvalidInputError,
    MissingDependencyError,
    OutputExistsError,
    ReserveError,
    SolverError,
    WorkerError,
)

#: Signals that came before :mod:`reserve.interrupt` was loaded (``python -m reserve``).
_held: list[int] = []


def _hold(signum: int, frame: object) -> None:
    _held.append(signum)


def _run_as_command() -> bool:
    """Whether ``python -m reserve`` or ``python -m reserve.cli`` is importing this package.

    Python imports the package before it reads the module to run: the earliest moment at
    which a Ctrl-C can be given its one line (:mod:`reserve.interrupt`). An ``import
    reserve`` from Python code changes no signal handling.
    """
    argv = getattr(sys, "orig_argv", [])
    if sys.argv[:1] != ["-m"] or "-m" not in argv[:-1]:
        return False
    return argv[argv.index("-m") + 1] in ("reserve", "reserve.cli")


if _run_as_command():
    # the C module, loaded with the interpreter: a Ctrl-C from here on is held, not raised
    # inside an import, until reserve.interrupt says its one line (install)
    import _signal

    _signal.signal(_signal.SIGINT, _hold)
    _signal.signal(_signal.SIGTERM, _hold)
    from reserve import interrupt

    interrupt.install(held=_held)

__version__ = "0.1.0"

__all__ = [
    "DataFileError",
    "InvalidInputError",
    "MissingDependencyError",
    "OutputExistsError",
    "ReserveError",
    "SolverError",
    "WorkerError",
    "__version__",
]
