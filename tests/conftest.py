"""Fixtures shared by the test modules."""

from __future__ import annotations

import pytest

from tests._oracle import OPTIMA_PATH, ORACLE_SEEDS, load_optima, oracle_optimum


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
