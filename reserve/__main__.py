"""The ``reserve`` console script and ``python -m reserve``: signals first, then the commands.

Ctrl-C is handled from the first instant (:mod:`reserve.interrupt`), before the command line
and what it imports (a second or two) are loaded.
"""

from __future__ import annotations

from reserve import interrupt

__all__ = ["run"]


def run() -> None:
    """Install the signal handling, then run :func:`reserve.cli.run`."""
    interrupt.install()
    from reserve.cli import run as run_cli

    run_cli()


if __name__ == "__main__":  # pragma: no cover
    run()
