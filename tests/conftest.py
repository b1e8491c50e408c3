"""Fixtures shared by the test modules."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from tests._oracle import OPTIMA_PATH, ORACLE_SEEDS, load_optima, oracle_optimum


def _share_the_cores_among_workers() -> None:
    """Under ``pytest -n N``, give each worker's BLAS and OpenMP its share of the processors.

    Each library starts as many threads as the machine has processors: with one worker per
    processor, N workers then run N times too many threads, and OpenBLAS's waiting threads
    spin on processors the other workers need (on a busy machine the BLAS-heavy tests took
    up to twice their CPU time). The variables reach the commands the tests start,
    ``threadpool_limits`` the libraries this process has loaded. The library's own forked
    folds run on one BLAS thread already (:func:`reserve.fork.one_blas_thread`).
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers <= 1:
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = max((cpus or 1) // workers, 1)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, str(threads))
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=int(os.environ["OPENBLAS_NUM_THREADS"]))


_share_the_cores_among_workers()


@pytest.fixture(scope="session")
def oracle_optima() -> dict[str, dict[str, float]]:
    """Brute-force optima of the oracle instances, cached in tests/data/oracle_optima.json.

    They are computed by the independent brute force (``python -m tests._oracle`` writes the
    file); tests/test_oracle_cache.py recomputes a sample of them on every run and compares.
    Without the file they are computed here (slow: about a minute).
    """
    if OPTIMA_PATH.exists():
        return load_optima()
    return {
        fam: {str(s): oracle_optimum(fam, s) for s in seeds} for fam, seeds in ORACLE_SEEDS.items()
    }


# ------------------------------------------------------------------------------------------
# hostile input: a refused run leaves the working folder byte for byte as it was


def snapshot(root: Path) -> tuple[frozenset[str], dict[str, str]]:
    """Every folder (relative path) and every file (relative path -> SHA-256) under ``root``."""
    dirs, files = set(), {}
    for folder, _, names in os.walk(root):
        dirs.add(os.path.relpath(folder, root))
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return frozenset(dirs), files


@pytest.fixture
def only_thread(monkeypatch):
    """Let :func:`reserve.fork.can_fork` say yes in a test worker.

    An earlier test of this worker (or the test runner) may have left a Python thread
    running, and then no child is forked.
    """
    from reserve import fork

    monkeypatch.setattr(fork.threading, "active_count", lambda: 1)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working folder, made the current directory for the test."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def assert_one_line_error(stderr: str, code: int, expected: int, needle: str = "") -> str:
    """Exit ``expected``; stderr is exactly one ``reserve: error: ...`` line (with ``needle``)."""
    assert code == expected, (code, stderr)
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("reserve: error: "), stderr
    assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ------------------------------------------------------------------------------------------
# planning units shared by the tests of the public functions


@pytest.fixture(scope="session")
def small_units_file(tmp_path_factory) -> Path:
    """A 12 x 12 planning_units GeoPackage (``tests.test_select.make_units``), written once.

    Read-only: a test that changes the cells writes its own file.
    """
    from tests.test_select import write_units

    return write_units(tmp_path_factory.mktemp("units") / "cells.gpkg")


# ------------------------------------------------------------------------------------------
# quiet output: ``make test`` prints the dots and the summary line, nothing else on success


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """Drop pytest-xdist's "bringing up nodes..." lines under ``-q`` when stdout is no terminal.

    On a terminal xdist rewrites that status in place; into a log (CI, ``make test | tee``) it
    writes it as lines that say nothing about the tests.
    """
    reporter = session.config.pluginmanager.getplugin("terminaldistreporter")
    if reporter is not None and session.config.option.verbose < 0:
        reporter.ensure_show_status = lambda: None
