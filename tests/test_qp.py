"""Fixed-set QP (Clarabel) against the independent SLSQP solver of the oracle."""

from __future__ import annotations

import numpy as np
import pytest

from reserve.solvers._qp import hinge_objective, solve_fixed_set
from tests._oracle import solve_subset_qp


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n_constraints", [0, 3, 8])
def test_matches_an_independent_qp_solver(seed, n_constraints):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(25, 3))
    y = np.where(X @ rng.normal(size=3) + 0.5 * rng.normal(size=25) > 0, 1.0, -1.0)
    Z = rng.normal(size=(n_constraints, 3))
    C = float(rng.choice([0.1, 1.0, 10.0]))
    ours = solve_fixed_set(X, y, C, Z if n_constraints else None)
    _, _, ref = solve_subset_qp(X, y, C, Z)
    assert ours.objective == pytest.approx(ref, rel=1e-5, abs=1e-7)
    if n_constraints:
        assert np.all(Z @ ours.w + ours.b <= 1e-6)
        assert ours.beta.shape == (n_constraints,) and np.all(ours.beta >= -1e-8)


def test_objective_is_recomputed_from_w_and_b():
    X = np.array([[0.0], [1.0], [3.0]])
    y = np.array([-1.0, 1.0, 1.0])
    r = solve_fixed_set(X, y, 2.0)
    assert r.objective == pytest.approx(hinge_objective(r.w, r.b, X, y, 2.0), rel=1e-12)


def test_hinge_objective_by_hand():
    # w = 1, b = 0: margins 1 - y x = 1 - (-1)(-2) = -1 -> 0, and 1 - 1 * 0.5 = 0.5.
    X = np.array([[-2.0], [0.5]])
    y = np.array([-1.0, 1.0])
    assert hinge_objective(np.array([1.0]), 0.0, X, y, 3.0) == pytest.approx(0.5 + 3.0 * 0.5)


@pytest.mark.parametrize("seed", range(5))
def test_the_constraint_matrix_is_the_stacked_blocks_entry_for_entry(seed):
    """Built column by column, it must equal the scipy.sparse stacking it replaced (same
    stored entries in the same order), so that Clarabel's answers stay bit for bit."""
    import scipy.sparse as sp

    from reserve.solvers._qp import _constraint_matrix

    rng = np.random.default_rng(seed)
    n, d, p = 30 + seed, 4 + seed, 5 * seed  # seed 0: no candidate rows
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.7)  # zeros are not stored
    Z = rng.normal(size=(p, d)) * (rng.random((p, d)) < 0.5)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    minus_i = -sp.identity(n, format="csr")
    blocks = [
        sp.hstack([sp.csr_matrix(-(y[:, None] * X)), sp.csr_matrix(-y[:, None]), minus_i]),
        sp.hstack([sp.csr_matrix((n, d + 1)), minus_i]),
    ]
    if p:
        blocks.append(sp.hstack([sp.csr_matrix(Z), np.ones((p, 1)), sp.csr_matrix((p, n))]))
    ref = sp.vstack(blocks, format="csc")
    ours = _constraint_matrix(X, y, Z if p else None)
    assert ours.shape == ref.shape
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(ours, name), getattr(ref, name))
