"""Cutting-plane fixed-set QP against Clarabel's exact solve, warm starts, degenerate inputs."""

from __future__ import annotations

import numpy as np
import pytest

from reserve.errors import InvalidInputError, SolverError
from reserve.solvers._cutting_plane import CuttingPlaneState, solve_cutting_plane
from reserve.solvers._qp import hinge_objective, solve_fixed_set


def _instance(seed: int, n: int = 300, d: int = 4, p: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    beta = rng.normal(size=d)
    y = np.where(X @ beta - 0.8 + rng.normal(size=n) > 0, 1.0, -1.0)
    # Candidates shifted towards the positive side, so that many constraints bind.
    Z = rng.normal(size=(p, d)) + 0.5 * beta / np.linalg.norm(beta)
    return X, y, Z


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("p", [0, 5, 60])
def test_matches_clarabel(seed, p):
    X, y, Z = _instance(seed, p=p)
    C = [0.1, 1.0, 10.0, 1.0][seed]
    Zp = Z if p else None
    ref = solve_fixed_set(X, y, C, Zp, method="clarabel")
    tol = 1e-7
    ours, state = solve_cutting_plane(X, y, C, Zp, tol=tol)
    # The returned objective is that of a feasible point and the gap certifies it.
    assert ours.objective == pytest.approx(hinge_objective(ours.w, ours.b, X, y, C), rel=1e-12)
    assert ours.objective >= ref.objective * (1 - 1e-8)
    assert ours.objective <= ref.objective * (1 + 2 * tol)
    lower = state.history[-1][1]
    assert lower <= ref.objective * (1 + 1e-8)
    if p:
        assert np.all(Z @ ours.w + ours.b <= 0.0)
        assert ours.beta.shape == (p,) and np.all(ours.beta >= 0.0)
        # Multipliers agree with the interior-point ones where they are clearly nonzero.
        np.testing.assert_allclose(ours.beta, ref.beta, atol=1e-3 * max(ref.beta.max(), 1.0))
    assert "Solved" in ours.status


def test_dispatch_uses_the_cutting_plane_when_asked():
    X, y, Z = _instance(7, p=10)
    r = solve_fixed_set(X, y, 1.0, Z, method="cutting_plane", tol=1e-8)
    ref = solve_fixed_set(X, y, 1.0, Z, method="clarabel")
    assert "cutting plane" in r.status and "cutting plane" not in ref.status
    assert r.objective == pytest.approx(ref.objective, rel=1e-7)


def test_dispatch_rejects_an_unknown_method():
    X, y, _ = _instance(0)
    with pytest.raises(InvalidInputError, match="method"):
        solve_fixed_set(X, y, 1.0, method="simplex")


def test_warm_start_gives_the_same_answer_with_fewer_iterations():
    X, y, Z = _instance(3, n=600, p=80)
    ref = solve_fixed_set(X, y, 1.0, Z[1:], method="clarabel")
    cold, cold_state = solve_cutting_plane(X, y, 1.0, Z[1:], tol=1e-7)
    # Solve another constraint set first, then re-solve with its cuts (what the polish does).
    state = CuttingPlaneState()
    solve_cutting_plane(X, y, 1.0, Z, tol=1e-7, state=state)
    total_before = state.n_iter_total
    warm, state = solve_cutting_plane(X, y, 1.0, Z[1:], tol=1e-7, state=state)
    assert warm.objective == pytest.approx(ref.objective, rel=2e-7)
    assert cold.objective == pytest.approx(ref.objective, rel=2e-7)
    assert state.n_iter < cold_state.n_iter
    assert state.n_iter_total == total_before + state.n_iter


def test_warm_start_from_the_svm_to_constraints():
    X, y, Z = _instance(5, n=500, p=40)
    svm, state = solve_cutting_plane(X, y, 1.0, tol=1e-7)
    cons, state = solve_cutting_plane(X, y, 1.0, Z, tol=1e-7, state=state)
    ref = solve_fixed_set(X, y, 1.0, Z, method="clarabel")
    assert cons.objective == pytest.approx(ref.objective, rel=2e-7)
    assert np.all(Z @ cons.w + cons.b <= 0.0)
    # Constraints can only raise the optimum.
    assert cons.objective >= svm.objective * (1 - 1e-7)


def test_state_for_other_features_is_refused():
    X, y, _ = _instance(0, d=4)
    _, state = solve_cutting_plane(X, y, 1.0)
    X3, y3, _ = _instance(0, d=3)
    with pytest.raises(InvalidInputError, match="features"):
        solve_cutting_plane(X3, y3, 1.0, state=state)


def test_separable_data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(200, 3))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    X[:, 0] += 0.5 * y  # a gap of width 1 around x0 = 0
    ref = solve_fixed_set(X, y, 100.0, method="clarabel")
    ours, _ = solve_cutting_plane(X, y, 100.0, tol=1e-8)
    assert ours.objective == pytest.approx(ref.objective, rel=1e-7)
    # Hard margin: every row on the right side of its margin (up to the tolerance).
    assert np.all(y * (X @ ours.w + ours.b) >= 1 - 1e-3)


def test_candidates_all_on_the_negative_side_change_nothing():
    X, y, _ = _instance(2)
    svm, _ = solve_cutting_plane(X, y, 1.0, tol=1e-8)
    # Far on the negative side: no constraint binds, every multiplier is zero (up to the
    # interior-point residue of the master).
    Z = X[y < 0][:20] - 50.0 * svm.w / np.linalg.norm(svm.w)
    ours, _ = solve_cutting_plane(X, y, 1.0, Z, tol=1e-8)
    assert ours.objective == pytest.approx(svm.objective, rel=1e-7)
    assert np.all(ours.beta <= 1e-9)
    assert np.all(Z @ ours.w + ours.b < -1.0)


def test_candidates_all_on_the_positive_side_force_everything_down():
    X, y, _ = _instance(4)
    ref_svm = solve_fixed_set(X, y, 1.0, method="clarabel")
    Z = X[y > 0][:30] + 3.0 * ref_svm.w / np.linalg.norm(ref_svm.w)
    ref = solve_fixed_set(X, y, 1.0, Z, method="clarabel")
    ours, _ = solve_cutting_plane(X, y, 1.0, Z, tol=1e-8)
    assert ours.objective == pytest.approx(ref.objective, rel=1e-7)
    assert ours.objective > ref_svm.objective * (1 + 1e-3)
    assert np.all(Z @ ours.w + ours.b <= 0.0)
    assert ours.beta.sum() > 0.0


def test_one_class_only():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 2))
    y = np.ones(50)
    ref = solve_fixed_set(X, y, 1.0, method="clarabel")
    ours, _ = solve_cutting_plane(X, y, 1.0, tol=1e-8)
    assert ours.objective == pytest.approx(ref.objective, abs=1e-7)


def test_too_few_iterations_raise_a_solver_error_saying_what_to_do():
    X, y, Z = _instance(0, n=400, p=30)
    with pytest.raises(SolverError, match="max_iter"):
        solve_cutting_plane(X, y, 1.0, Z, tol=1e-12, max_iter=2)


@pytest.mark.parametrize("seed", [1, 5, 7])  # instances where the polish makes 2-3 swaps
def test_polish_with_the_cutting_plane_matches_clarabel(seed, monkeypatch):
    # The polish shares one CuttingPlaneState across its solves; forcing the cutting plane on
    # a small instance must make the same swaps and reach the same set and objective as exact
    # Clarabel solves, from the same start.
    from reserve.solvers import _polish, _qp
    from reserve.solvers.budget import Budget
    from reserve.solvers.ttk import shifted_svm_start
    from tests._single import cells, polish1

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(260, 3))
    labels = X[:160] @ np.array([1.0, -0.5, 0.3]) + 0.3 * rng.normal(size=160) > 0.4
    X_lab, X_cand, y = X[:160], X[160:], np.where(labels, 1.0, -1.0)
    w, b, _ = shifted_svm_start(X_lab, y, X_cand, Budget.cells(8, X_cand.shape[0]), 1.0)
    ref = polish1(X_lab, y, X_cand, cells(8, X_cand), 1.0, w, b)
    states = []
    original = _qp.solve_cutting_plane

    def recording(*args, **kwargs):
        states.append(kwargs.get("state"))
        return original(*args, **kwargs)

    monkeypatch.setattr(_polish, "_POLISH_CP_MIN_ROWS", 0)
    monkeypatch.setattr(_qp, "solve_cutting_plane", recording)
    ours = polish1(X_lab, y, X_cand, cells(8, X_cand), 1.0, w, b)
    assert len(states) == ours.n_qp > 1
    # Trials are rejected early by the lower bound (cutoff); the decisions must not change.
    assert sum(st is not None for st in states) == len(states)
    assert states[0] is not None and all(st is states[0] for st in states)  # one shared state
    assert ref.n_swaps >= 2 and ours.n_swaps == ref.n_swaps
    np.testing.assert_array_equal(np.sort(ours.selected), np.sort(ref.selected))
    assert ours.objective == pytest.approx(ref.objective, rel=1e-6)


@pytest.mark.parametrize("n_columns", [10, 70])
def test_polish_keeps_wide_rows_off_the_cutting_plane(monkeypatch, n_columns):
    from reserve.solvers import _qp
    from reserve.solvers.budget import Budget
    from reserve.solvers.ttk import shifted_svm_start
    from tests._single import cells, polish1

    rng = np.random.default_rng(5)
    X = rng.normal(size=(1300, n_columns))
    labels = X[:1000, :3] @ np.array([1.0, -0.5, 0.3]) + 0.5 * rng.normal(size=1000) > 0.4
    X_lab, X_cand, y = X[:1000], X[1000:], np.where(labels, 1.0, -1.0)
    w, b, _ = shifted_svm_start(X_lab, y, X_cand, Budget.cells(10, X_cand.shape[0]), 1.0)
    calls = []
    original = _qp.solve_cutting_plane

    def recording(*args, **kwargs):
        calls.append(args[0].shape)
        return original(*args, **kwargs)

    monkeypatch.setattr(_qp, "solve_cutting_plane", recording)
    res = polish1(X_lab, y, X_cand, cells(10, X_cand), 1.0, w, b)
    assert res.n_qp >= 1
    # 1,000 labelled rows: the cutting plane for narrow rows, the dense solver for wide ones
    assert bool(calls) == (n_columns < _qp.DENSE_MIN_COLUMNS)
    assert res.objective == pytest.approx(hinge_objective(res.w, res.b, X_lab, y, 1.0), rel=1e-9)


def test_auto_falls_back_to_clarabel_when_the_cutting_plane_fails(monkeypatch):
    from reserve.solvers import _qp

    def failing(*args, **kwargs):
        raise SolverError("did not converge")

    X, y, Z = _instance(1, p=10)
    monkeypatch.setattr(_qp, "solve_cutting_plane", failing)
    # the threshold passed, not the module constant: the default was bound when defined
    r = solve_fixed_set(X, y, 1.0, Z, cutting_plane_min_rows=0)
    ref = solve_fixed_set(X, y, 1.0, Z, method="clarabel")
    assert r.objective == pytest.approx(ref.objective, rel=1e-12)
    with pytest.raises(SolverError, match="did not converge"):
        solve_fixed_set(X, y, 1.0, Z, method="cutting_plane")


def test_cut_updates_match_full_passes():
    from reserve.solvers import _cutting_plane as cp

    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 5))
    y = np.where(rng.random(400) < 0.4, 1.0, -1.0)
    state = CuttingPlaneState()
    active = rng.random(400) < 0.5
    n_incremental = []
    for step in range(80):
        # Few flips (updated) and, every tenth step, many (a full pass).
        flip = rng.random(400) < (0.4 if step % 10 == 9 else 0.01)
        active = active ^ flip
        c, g = cp._cut_update(state, X, y, active)
        c_ref, g_ref = cp._cut(X, y, active)
        assert c == c_ref
        np.testing.assert_allclose(g, g_ref, rtol=0, atol=1e-13)
        n_incremental.append(state.n_incremental)
    assert 0 in n_incremental and max(n_incremental) >= 5  # both paths were taken


def test_cutoff_stops_early_with_a_valid_bound():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 4))
    y = np.where(X @ np.array([1.0, -1.0, 0.5, 0.0]) + 0.5 * rng.normal(size=400) > 0, 1.0, -1.0)
    Z = rng.normal(size=(30, 4)) + 1.0
    exact, _ = solve_cutting_plane(X, y, 1.0, Z, tol=1e-9)
    # A cutoff well below the optimum: the bound passes it quickly, the point stays feasible.
    early, state = solve_cutting_plane(X, y, 1.0, Z, tol=1e-9, cutoff=0.5 * exact.objective)
    assert early.status.startswith("Cutoff")
    assert state.n_iter < 40
    assert early.objective >= exact.objective * (1 - 1e-9)  # a feasible point, never better
    assert np.all(Z @ early.w + early.b <= 1e-12)
    # A cutoff above the optimum can never be reached by the bound: a normal solve.
    full, _ = solve_cutting_plane(X, y, 1.0, Z, tol=1e-9, cutoff=2.0 * exact.objective)
    assert full.status.startswith("Solved")
    assert full.objective == pytest.approx(exact.objective, rel=1e-8)


def test_a_stalled_solve_gives_up_early_and_auto_falls_back_to_clarabel():
    # Thousands of candidate rows on 20 points (copies a hair apart): many constraints tie on
    # the boundary, the best point cannot move and the gap stops shrinking.
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 5))
    beta = rng.normal(size=5)
    y = np.where(X @ beta + rng.normal(size=400) > 0.5, 1.0, -1.0)
    Z = np.repeat(rng.normal(size=(20, 5)) + beta / np.linalg.norm(beta), 150, axis=0)
    Z[:, -1] += 1e-6 * rng.normal(size=Z.shape[0])
    state = CuttingPlaneState()
    with pytest.raises(SolverError, match="stalled"):
        solve_cutting_plane(X, y, 1.0, Z, state=state)
    assert state.n_iter < 1000  # gave up on the stall, not on max_iter
    r = solve_fixed_set(X, y, 1.0, Z, cutting_plane_min_rows=0)
    ref = solve_fixed_set(X, y, 1.0, Z, method="clarabel")
    assert r.objective == pytest.approx(ref.objective, rel=1e-12)
