"""reserve: choose k private land cells for a species with Transductive Top K (TTK)."""

from __future__ import annotations

from reserve.errors import (
    DataFileError,
    InvalidInputError,
    MissingDependencyError,
    OutputExistsError,
    ReserveError,
    SolverError,
    WorkerError,
)

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
