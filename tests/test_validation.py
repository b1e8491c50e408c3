"""Input checks shared by the transductive estimators."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from reserve.errors import InvalidInputError
from reserve.solvers._validation import check_budget, check_positive_real, check_transductive


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
