"""Tests for reserve.design: planning units -> one Problem; the pipeline's scaler."""

from __future__ import annotations

import numpy as np
import pytest

from reserve.config import SelectOptions
from reserve.design import build_problem, feature_columns
from reserve.errors import DataFileError, InvalidInputError
from reserve.select import standardised
from tests.test_select import FEATURES, make_units


def test_problem_rows_labels_and_features():
    units = make_units()
    problem = build_problem(units, SelectOptions(budget=5), "mem")
    role = units["role"].to_numpy()
    assert problem.features == FEATURES == feature_columns(units)
    np.testing.assert_array_equal(problem.rows, np.flatnonzero(role != "other"))
    assert set(problem.y[problem.candidate[problem.rows]]) == {-1}
    assert set(problem.y[problem.train[problem.rows]]) == {0, 1}
    assert problem.X.shape == (len(units), len(FEATURES))
    assert (problem.k_free, problem.k_fit, problem.free_budget) == (5, 5, None)
    assert not problem.multi and problem.n_locked_in == 0


def test_locked_in_cells_leave_the_fit_and_use_the_budget():
    units = make_units()
    cand = np.flatnonzero(units["role"].to_numpy() == "candidate")[:2]
    units["owned"] = False
    units.loc[cand, "owned"] = True
    problem = build_problem(units, SelectOptions(budget=5, locked_in="owned"), "mem")
    assert problem.n_locked_in == 2 and (problem.k_free, problem.k_fit) == (3, 3)
    assert not np.isin(cand, problem.rows).any()


def test_money_budget_allocation():
    units = make_units().assign(price=2.0)
    problem = build_problem(units, SelectOptions(budget=9.0, cost_column="price"), "mem")
    assert "price" not in problem.features
    assert (problem.k_free, problem.k_fit, problem.free_budget) == (1, 4, 9.0)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda u: u.drop(columns=FEATURES), DataFileError, "no numeric feature column"),
        (lambda u: u.assign(role="candidate"), DataFileError, "no training cells"),
        (lambda u: u.assign(role="train", label=1), DataFileError, "every training cell"),
        (lambda u: u.assign(locked_out=u["role"] == "candidate"), DataFileError, "no candidate"),
    ],
)
def test_unusable_units_are_refused(change, error, message):
    with pytest.raises(error, match=message):
        build_problem(change(make_units()), SelectOptions(budget=3), "mem")


def test_budget_must_leave_a_candidate_unselected():
    units = make_units()
    n = int((units["role"] == "candidate").sum())
    with pytest.raises(InvalidInputError, match=f"the {n} candidate cells"):
        build_problem(units, SelectOptions(budget=n), "mem")


def test_the_problem_is_standardised_on_its_fitted_rows():
    problem = build_problem(make_units(), SelectOptions(budget=5), "mem")
    scaler, fitted = standardised(problem.selection)
    X = problem.selection.X
    # numpy's mean and (population) std of the train and candidate rows, not of other cells
    np.testing.assert_allclose(scaler.mean_, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(scaler.scale_, X.std(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(fitted.X, scaler.transform(X))
    assert fitted.budget is problem.selection.budget and fitted.Y is problem.selection.Y
    # a cell with a missing feature gets no standardised value (so no score)
    row = problem.X[:1].copy()
    row[0, 0] = np.nan
    assert np.isnan(scaler.transform(row)[0, 0])
