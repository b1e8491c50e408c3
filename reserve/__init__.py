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
    from reserve import interrupt

    interrupt.install()

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
