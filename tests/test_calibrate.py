"""``--boundary-penalty auto``: refits along Cohon's calibration, each re-scored independently."""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression

from reserve.calibrate import calibrate_boundary, presence_probability
from reserve.config import SelectOptions
from reserve.design import build_problem
from reserve.select import standardised
from reserve.solvers import TTK
from tests.test_select import make_units

N_SIDE = 8


def _grid_boundary(cells: np.ndarray) -> float:
    """Exposed boundary of grid cells (ids row-major on an ``N_SIDE`` square, 3 km sides):
    an edge to an unselected cell counts whole, an edge to no cell counts half."""
    chosen = set(cells.tolist())
    total = 0.0
    for cell in chosen:
        r, c = divmod(cell, N_SIDE)
        for dr, dc in ((0, 1), (0, -1), (1, 0), (-1, 0)):
            rr, cc = r + dr, c + dc
            if not (0 <= rr < N_SIDE and 0 <= cc < N_SIDE):
                total += 0.5 * 3000.0
            elif rr * N_SIDE + cc not in chosen:
                total += 3000.0
    return total


def test_calibration_table_is_rescored_from_the_selections():
    units = make_units(n_side=N_SIDE, seed=1)
    opts = SelectOptions(budget=6, boundary_penalty="auto", model="linear")
    problem = build_problem(units, opts, "mem")
    fitted = standardised(problem.selection)[1]
    est = TTK(k=problem.k_fit).fit(fitted)
    chosen, penalty, table = calibrate_boundary(problem, est, fitted, lambda message: None)
    assert int(table["chosen"].sum()) == 1
    row = table[table["chosen"]].iloc[0]
    assert row["penalty"] == penalty == chosen.boundary_penalty
    assert chosen.boundary_length_ == row["boundary_length"]
    # the chosen fit's boundary, recounted from its cells on the grid
    cells = problem.rows[chosen.selected_]
    assert np.isclose(_grid_boundary(cells), row["boundary_length"])
    assert len(cells) == 6
    # the objective without the penalty: the hinge objective of the fitted scorer
    assert np.isclose(row["objective"], chosen.objective_ - penalty * chosen.boundary_length_)
    assert table["expected_precision"].between(0, 1).all()
    # penalising the boundary never leaves a longer one than no penalty
    unpenalised = table[table["penalty"] == 0.0]["boundary_length"].iloc[0]
    assert row["boundary_length"] <= unpenalised


def test_presence_probability_of_a_linear_fit_is_a_logistic_fit_of_the_labelled_rows():
    rng = np.random.default_rng(2)
    Z = rng.normal(size=(80, 2))
    y = np.r_[(Z[:50, 0] > 0).astype(int), -np.ones(30, dtype=int)]
    est = TTK(k=5).fit(Z, y)
    p = presence_probability(est, Z, y)
    lr = LogisticRegression(C=1.0, max_iter=1000).fit(Z[:50], y[:50])
    assert np.allclose(p, lr.predict_proba(Z)[:, 1])
