"""One small error hierarchy for the whole package.

Every error a user can cause derives from :class:`ReserveError` and also from the builtin
it resembles, so ``except ValueError`` keeps working for callers who do not know our names.
Messages name the parameter, what was received, what is allowed, and the fix.
"""

from __future__ import annotations

__all__ = [
    "DataFileError",
    "InvalidInputError",
    "MissingDependencyError",
    "OutputExistsError",
    "ReserveError",
    "SolverError",
    "WorkerError",
]


class ReserveError(Exception):
    """Root of every error raised on purpose by ``reserve``."""


class InvalidInputError(ReserveError, ValueError):
    """A parameter or an input array is unusable (wrong shape, value, type or content)."""


class DataFileError(ReserveError, OSError):
    """An input file is missing, unreadable, or not in the expected format."""


class OutputExistsError(ReserveError, FileExistsError):
    """An output already exists and ``overwrite`` was not requested."""


class SolverError(ReserveError, RuntimeError):
    """A numerical solver failed in a way the input did not predict."""


class MissingDependencyError(ReserveError, ImportError):
    """An optional package is needed; the message gives the exact install line."""


class WorkerError(ReserveError, RuntimeError):
    """A worker process ended without handing back its result (killed, out of memory)."""
