"""Metrics: hand-computed values, tie-breaking, and input errors."""

import numpy as np
import pytest

from reserve.errors import InvalidInputError
from reserve.metrics import hinge_loss_sum, precision_at_k, selection_precision


def test_precision_at_k_by_hand():
    y = [1, 0, 1, 0, 1]
    s = [0.1, 0.9, 0.8, 0.3, 0.7]
    assert precision_at_k(y, s, 1) == 0.0
    assert precision_at_k(y, s, 2) == 0.5
    assert precision_at_k(y, s, 3) == pytest.approx(2 / 3)
    assert precision_at_k(y, s, 5) == pytest.approx(3 / 5)


def test_precision_at_k_ties_prefer_lower_index():
    assert precision_at_k([1, 0], [0.5, 0.5], 1) == 1.0
    assert precision_at_k([0, 1], [0.5, 0.5], 1) == 0.0


def test_selection_precision_and_hinge():
    assert selection_precision(np.array([1, 0, 1, 1]), np.array([2, 3])) == 1.0
    # y=+1 with f=2 -> 0; y=-1 with f=0.5 -> 1.5; y=+1 with f=-1 -> 2
    assert hinge_loss_sum([1, 0, 1], [2.0, 0.5, -1.0]) == pytest.approx(3.5)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: precision_at_k([1, 2], [0.1, 0.2], 1), "0 and 1"),
        (lambda: precision_at_k([1, 0], [0.1], 1), "shape"),
        (lambda: precision_at_k([1, 0], [0.1, 0.2], 3), "k must"),
        (lambda: selection_precision([1, 0], [5]), "outside"),
        (lambda: selection_precision([1, 0], []), "non-empty"),
        (lambda: hinge_loss_sum([1, 0], [1.0]), "shape"),
    ],
)
def test_bad_input_is_named(call, match):
    with pytest.raises(InvalidInputError, match=match):
        call()
