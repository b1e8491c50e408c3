"""The ``reserve`` command line: parse options, call one library function, print.

Errors derived from :class:`reserve.errors.ReserveError` become one line on stderr and a
non-zero exit code (2 for usage errors, 1 for data errors), never a traceback.
"""

from __future__ import annotations

import sys

import click

from reserve import __version__
from reserve.errors import InvalidInputError, ReserveError

__all__ = ["main"]


class _ReserveGroup(click.Group):
    """A click group that turns ``ReserveError`` into a one-line message and an exit code."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ReserveError as exc:
            click.echo(f"reserve: error: {exc}", err=True)
            code = 2 if isinstance(exc, InvalidInputError) else 1
            sys.exit(code)


@click.group(cls=_ReserveGroup)
@click.version_option(__version__, prog_name="reserve")
def main() -> None:
    """Choose k private land cells for an endangered species with Transductive Top K."""


if __name__ == "__main__":  # pragma: no cover
    main()
