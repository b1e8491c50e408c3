"""Bundled benchmark tables and the transductive split."""

from __future__ import annotations

import numpy as np
import pytest

from reserve.errors import InvalidInputError
from reserve.paper.datasets import BENCHMARKS, load_benchmark, transductive_split

# Shapes and positives as documented in data/uci/SOURCES.md.
EXPECTED = {
    "diabetes": (768, 8, 268),
    "ionosphere": (351, 34, 225),
    "sonar": (208, 60, 111),
    "spambase": (4601, 57, 1813),
    "splice": (3175, 60, 1648),
    "german_numer": (1000, 24, 300),
    "svmguide3": (1243, 22, 296),
}


@pytest.mark.parametrize("name", BENCHMARKS)
def test_bundled_tables_match_their_sources(name):
    X, y = load_benchmark(name)
    n, d, pos = EXPECTED[name]
    assert X.shape == (n, d) and int(y.sum()) == pos and set(np.unique(y)) == {0, 1}


def test_unknown_dataset_is_refused():
    with pytest.raises(InvalidInputError, match="unknown dataset 'iris'"):
        load_benchmark("iris")


def test_split_hides_half_and_standardises():
    X, y = load_benchmark("diabetes")
    Xa, y_fit, y_hidden, k = transductive_split(X, y, random_state=3)
    assert (y_fit == -1).sum() == 384 and y_hidden.size == 384 and k == 19
    assert np.allclose(Xa.mean(axis=0), 0.0, atol=1e-12)
    assert np.allclose(Xa.std(axis=0), 1.0)
    # Rows are the originals, reordered: the hidden labels belong to the hidden rows.
    assert y_hidden.sum() + y_fit[y_fit != -1].sum() == y.sum()
    again = transductive_split(X, y, random_state=3)
    assert all(np.array_equal(a, b) for a, b in zip(again[:3], (Xa, y_fit, y_hidden), strict=True))
