"""reserve: choose k private land cells for a species with Transductive Top K (TTK).

The Python API mirrors the command line, one function per command:

* :func:`select_reserve` (``reserve select``), or :func:`run_selection` with a checked
  :class:`SelectOptions`, returns a :class:`SelectionResult`;
* :func:`ingest_ebird` (``reserve ingest``, :func:`reserve.ingest.ingest`) grids eBird
  checklists filtered by a :class:`ChecklistFilter` and returns an :class:`IngestResult`;
* :func:`evaluate_selection` (``reserve evaluate``) scores the ids of a selection
  (:func:`read_selection` reads them from a ``reserve.gpkg``) against the true occupancy.

Every error derives from :class:`ReserveError`. ``import reserve`` loads only the errors: the
functions and types are imported on first use (PEP 562), so the command line starts as fast
as without them. The ingest function is not named ``reserve.ingest``, which stays the module
(``import reserve.ingest``).

Examples
--------
>>> import reserve
>>> "select_reserve" in reserve.__all__ and issubclass(reserve.InvalidInputError, ValueError)
True
"""

from __future__ import annotations

import importlib
import sys

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


_AS_COMMAND = _run_as_command()
if _AS_COMMAND:
    # the C module, loaded with the interpreter: a Ctrl-C from here on is held, not raised
    # inside an import (this package's first one included), until reserve.interrupt says
    # its one line (install)
    import _signal

    _signal.signal(_signal.SIGINT, _hold)
    _signal.signal(_signal.SIGTERM, _hold)

# after the signals are held: a Ctrl-C while they load is said in one line too
from reserve.errors import (  # noqa: E402
    DataFileError,
    InvalidInputError,
    MissingDependencyError,
    OutputExistsError,
    ReserveError,
    SolverError,
    WorkerError,
)

if _AS_COMMAND:
    from reserve import interrupt

    interrupt.install(held=_held)

__version__ = "0.1.0"

#: Public name -> (module, name in that module), imported on first access.
_LAZY = {
    "ChecklistFilter": ("reserve.io", "ChecklistFilter"),
    "IngestResult": ("reserve.ingest", "IngestResult"),
    "SelectOptions": ("reserve.config", "SelectOptions"),
    "SelectionResult": ("reserve.result", "SelectionResult"),
    "evaluate_selection": ("reserve.evaluate", "evaluate_selection"),
    "ingest_ebird": ("reserve.ingest", "ingest"),
    "read_selection": ("reserve.evaluate", "read_selection"),
    "run_selection": ("reserve.select", "run_selection"),
    "select_reserve": ("reserve.select", "select_reserve"),
}

# typing's own constant would import typing (2 ms) into every command's start
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from reserve.config import SelectOptions
    from reserve.evaluate import evaluate_selection, read_selection
    from reserve.ingest import IngestResult
    from reserve.ingest import ingest as ingest_ebird
    from reserve.io import ChecklistFilter
    from reserve.result import SelectionResult
    from reserve.select import run_selection, select_reserve

__all__ = [
    "ChecklistFilter",
    "DataFileError",
    "IngestResult",
    "InvalidInputError",
    "MissingDependencyError",
    "OutputExistsError",
    "ReserveError",
    "SelectOptions",
    "SelectionResult",
    "SolverError",
    "WorkerError",
    "__version__",
    "evaluate_selection",
    "ingest_ebird",
    "read_selection",
    "run_selection",
    "select_reserve",
]


def __getattr__(name: str) -> Any:
    """Import a public function or type of :data:`_LAZY` when it is first asked for."""
    if name not in _LAZY:
        raise AttributeError(f"module 'reserve' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # later accesses skip this function
    return value


def __dir__() -> list[str]:
    return list(__all__)
