"""The error hierarchy: every error is a ReserveError and the builtin it resembles."""

from __future__ import annotations

import pytest

from reserve import errors


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (errors.InvalidInputError, ValueError),
        (errors.DataFileError, OSError),
        (errors.OutputExistsError, FileExistsError),
        (errors.SolverError, RuntimeError),
        (errors.MissingDependencyError, ImportError),
    ],
)
def test_each_error_is_both(cls, builtin):
    exc = cls("message")
    assert isinstance(exc, errors.ReserveError) and isinstance(exc, builtin)
    with pytest.raises(builtin):
        raise exc
