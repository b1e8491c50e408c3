"""Input checks shared by the transductive estimators."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from reserve.errors import InvalidInputError
from reserve.solvers._validation import (
    check_budget,
    check_cost_budget,
    check_positive_real,
    check_transductive,
)


def test_valid_problem_is_split_into_labelled_and_candidates():
    X = np.arange(12.0).reshape(6, 2)
    d = check_transductive(X, [1, 0, -1, 1, -1, -1], 2)
    assert d.labelled.tolist() == [0, 1, 3] and d.candidates.tolist() == [2, 4, 5]
    assert d.y_pm.tolist() == [1.0, -1.0, 1.0] and d.k == 2
    assert np.array_equal(d.X_cand, X[[2, 4, 5]]) and d.X.flags.c_contiguous


def test_column_vector_labels_are_accepted():
    d = check_transductive(np.eye(4), np.array([[0], [1], [-1], [-1]]), 1)
    assert d.candidates.tolist() == [2, 3]


@pytest.mark.parametrize(
    ("X", "y", "k", "fragment"),
    [
        (sp.csr_matrix(np.eye(4)), [0, 1, -1, -1], 1, "sparse input is not supported"),
        (np.eye(4) + 1j, [0, 1, -1, -1], 1, "Complex data not supported"),
        ([[1, 2], [3]], [0, 1], 1, "2-D numeric array"),
        (np.eye(4), None, 1, "requires y to be passed"),
        (np.eye(4), [0.5, 1, -1, -1], 1, "Unknown label type"),
        (np.eye(4), [[0, 1], [1, 0], [-1, 1], [-1, 0]], 1, "y must be 1-D"),
        (np.eye(4), ["a", "b", "c", "d"], 1, "y must hold the numbers"),
    ],
)
def test_bad_input(X, y, k, fragment):
    with pytest.raises(InvalidInputError, match=fragment):
        check_transductive(X, y, k)


def test_budget_and_positive_reals():
    assert check_budget(np.int64(3), 5) == 3
    with pytest.raises(InvalidInputError, match="received k=5"):
        check_budget(5, 5)
    with pytest.raises(InvalidInputError, match="whole number"):
        check_budget(True, 5)
    assert check_positive_real(0, "tol", allow_zero=True) == 0.0
    with pytest.raises(InvalidInputError, match="C must be a number"):
        check_positive_real("1", "C")
    with pytest.raises(InvalidInputError, match=r"finite number > 0"):
        check_positive_real(-1, "C")


def test_cost_budget_reads_candidate_rows_only():
    cand = np.array([2, 3, 5])
    c, B = check_cost_budget([np.nan, -1.0, 1.0, 2, 99.0, 3.0], 4, cand, 6)
    assert c.tolist() == [1.0, 2.0, 3.0] and B == 4.0 and c.dtype == np.float64
    c, _ = check_cost_budget(np.array([None, 1, 2.5], dtype=object), 3, np.array([1, 2]), 3)
    assert c.tolist() == [1.0, 2.5]


@pytest.mark.parametrize(
    ("cost", "budget", "fragment"),
    [
        (None, 2.0, "cost must be a 1-D numeric array; received NoneType"),
        (
            np.array([True, False, True]),
            2.0,
            "cost must be numeric; received ndarray with dtype bool",
        ),
        ([1.0, "x", 2.0], 2.0, "cost must be numeric"),
        ([1.0, 1.0, 1.0], True, "budget must be a positive finite number; received True"),
        ([1.0, 1.0, 1.0], -np.inf, "received -inf"),
        ([1.0, 2.0, np.inf], 2.0, "1 NaN or infinite value(s), first at row 2 (inf)"),
        ([1.0, 2.0, 3.0], 2.0 - 1e-9, "budget=2 is below the cheapest candidate's cost (2, row 1)"),
        ([1.0, 2.0, 3.0], 5.0 * (1 + 1e-13), "covers the total cost of all 2 candidates (5)"),
    ],
)
def test_bad_cost_budget(cost, budget, fragment):
    with pytest.raises(InvalidInputError) as info:
        check_cost_budget(cost, budget, np.array([1, 2]), 3)
    assert fragment in str(info.value) and "\n" not in str(info.value)
