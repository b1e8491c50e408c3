"""The cached brute-force optima agree with the brute force run now, on a sample."""

from __future__ import annotations

import os
import zlib

import numpy as np
import pytest

from tests._oracle import ORACLE_SEEDS, oracle_optimum

# A different sample on each run (the seed is printed on failure), two instances per family.
# Under pytest-xdist every worker collects the same sample: the run's id seeds it.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
_RNG = np.random.default_rng(zlib.crc32(_RUN.encode()) if _RUN else None)
SAMPLE = [
    (family, int(seed))
    for family, seeds in ORACLE_SEEDS.items()
    for seed in _RNG.choice(seeds, size=2, replace=False)
]


def test_the_cache_holds_every_oracle_instance(oracle_optima):
    for family, seeds in ORACLE_SEEDS.items():
        assert sorted(oracle_optima[family]) == sorted(str(s) for s in seeds), family
        assert all(np.isfinite(v) and v > 0 for v in oracle_optima[family].values()), family


@pytest.mark.parametrize(("family", "seed"), SAMPLE)
def test_a_sample_of_the_cache_matches_the_brute_force(oracle_optima, family, seed):
    assert oracle_optimum(family, seed) == pytest.approx(oracle_optima[family][str(seed)], rel=1e-9)
