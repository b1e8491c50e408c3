"""The dense interior point of the fixed-set QP against Clarabel and an independent solver."""

from __future__ import annotations

import numpy as np
import pytest

from reserve.errors import InvalidInputError, SolverError
from reserve.solvers import _qp
from reserve.solvers._dense_qp import solve_dense
from reserve.solvers._qp import DENSE_MIN_COLUMNS, hinge_objective, solve_fixed_set
from tests._oracle import solve_subset_qp


def _problem(seed: int, n: int, d: int, p: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + rng.normal(size=n) > 0.3, 1.0, -1.0)
    Z = rng.normal(size=(p, d)) + 0.4
    return X, y, Z


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n_constraints", [0, 3, 8])
def test_matches_an_independent_qp_solver(seed, n_constraints):
    X, y, Z = _problem(seed, 25, 3, n_constraints)
    C = [0.1, 1.0, 10.0, 100.0][seed]
    ours = solve_dense(X, y, C, Z if n_constraints else None)
    _, _, ref = solve_subset_qp(X, y, C, Z)
    assert ours.objective == pytest.approx(ref, rel=1e-5, abs=1e-7)
    assert ours.beta.shape == (n_constraints,) and np.all(ours.beta >= 0)
    if n_constraints:
        assert np.all(Z @ ours.w + ours.b <= 1e-7)


@pytest.mark.parametrize("seed", range(8))
def test_matches_clarabel_with_weights_and_candidates(seed):
    """Objective, solution and the candidate multipliers (the polish ranks swaps by them)."""
    rng = np.random.default_rng(100 + seed)
    n, d, p = int(rng.integers(20, 200)), int(rng.integers(1, 30)), int(rng.integers(0, 120))
    X, y, Z = _problem(seed, n, d, p)
    C = float(10 ** rng.uniform(-2, 2)) * (rng.uniform(0.2, 3.0, size=n) if seed % 2 else 1.0)
    ours = solve_dense(X, y, C, Z if p else None)
    ref = _qp._solve_clarabel(X, y, C, Z if p else None)
    assert ours.objective <= ref.objective * (1 + 1e-8) + 1e-10
    assert ours.objective == pytest.approx(ref.objective, rel=1e-7)
    assert ours.objective == pytest.approx(hinge_objective(ours.w, ours.b, X, y, C), rel=1e-12)
    np.testing.assert_allclose(ours.w, ref.w, atol=1e-5 * max(1.0, np.abs(ref.w).max()))
    np.testing.assert_allclose(ours.beta, ref.beta, atol=1e-5 * max(1.0, np.abs(ref.beta).max()))


def test_degenerate_rows():
    """One class only, duplicated rows and rows of weight 0 still solve to the optimum."""
    X, y, Z = _problem(7, 60, 4, 10)
    X[30:] = X[:30]
    one_class = -np.ones(60)
    for labels in (y, one_class):
        ref = _qp._solve_clarabel(X, labels, 1.0, Z)
        assert solve_dense(X, labels, 1.0, Z).objective == pytest.approx(ref.objective, rel=1e-7)
    weights = np.r_[np.zeros(10), np.ones(50)]  # the first 10 rows carry no loss
    ours = solve_dense(X, y, weights, Z)
    ref = _qp._solve_clarabel(X[10:], y[10:], 1.0, Z)
    assert ours.objective == pytest.approx(ref.objective, rel=1e-7)


@pytest.mark.parametrize("C", [1.0, 10.0, 1000.0])
def test_fewer_rows_than_columns(C):
    """Separable rows, most on the margin: the normal equations' conditioning caps the dual
    residual, and the best iterate is still within 1e-7 of the optimum ("AlmostSolved" at
    worst)."""
    X, y, Z = _problem(11, 60, 80, 20)
    ref = _qp._solve_clarabel(X, y, C, Z)
    ours = solve_dense(X, y, C, Z)
    assert ours.status.split()[0] in ("Solved", "AlmostSolved")
    assert ours.objective == pytest.approx(ref.objective, rel=1e-7)
    assert np.all(Z @ ours.w + ours.b <= 1e-6)


def test_auto_takes_the_dense_solver_for_wide_rows_only():
    X, y, Z = _problem(3, 80, DENSE_MIN_COLUMNS, 5)
    assert "dense" in solve_fixed_set(X, y, 1.0, Z).status
    assert "dense" not in solve_fixed_set(X[:, :-1], y, 1.0, Z[:, :-1]).status
    assert "dense" in solve_fixed_set(X[:, :3], y, 1.0, method="dense").status


def test_auto_falls_back_to_clarabel(monkeypatch):
    def broken(*args, **kwargs):
        raise SolverError("did not converge")

    monkeypatch.setattr(_qp, "solve_dense", broken)
    X, y, _ = _problem(4, 80, DENSE_MIN_COLUMNS + 1, 0)
    res = solve_fixed_set(X, y, 1.0)
    assert "dense" not in res.status and "Solved" in res.status
    with pytest.raises(SolverError, match="did not converge"):
        solve_fixed_set(X, y, 1.0, method="dense")


def test_a_loose_tolerance_is_met_not_refused():
    X, y, Z = _problem(8, 120, 6, 10)
    ref = _qp._solve_clarabel(X, y, 1.0, Z)
    loose = solve_dense(X, y, 1.0, Z, tol=1e-3)
    assert loose.status.startswith("Solved")
    assert loose.objective == pytest.approx(ref.objective, rel=1e-2)


def test_too_few_iterations_is_a_solver_error():
    X, y, _ = _problem(5, 50, 3, 0)
    with pytest.raises(SolverError, match="stopped at a relative error of"):
        solve_dense(X, y, 1.0, max_iter=2)


def test_unknown_method_names_the_choices():
    X, y, _ = _problem(6, 10, 2, 0)
    with pytest.raises(InvalidInputError, match='"clarabel", "dense" or "cutting_plane"'):
        solve_fixed_set(X, y, 1.0, method="newton")
