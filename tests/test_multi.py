"""Multi-species TTK: a brute-force oracle, invariants, S = 1 against TTK, bad input."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from reserve.errors import InvalidInputError, ReserveError
from reserve.solvers import TTK, MultiSVM, MultiTTK, top_k
from reserve.solvers.ties import break_cutoff_ties, tie_width
from tests._oracle import make_multi_instance as make_instance

PROVED = ("optimal", "gap_limit")


def recomputed_objective(model, X, Y, C):
    """The objective from coef_ / intercept_ alone, written out independently of the package."""
    lab = Y[:, 0] != -1
    total = 0.0
    for s in range(Y.shape[1]):
        w, b = model.coef_[s], model.intercept_[s]
        y = np.where(Y[lab, s] == 1, 1.0, -1.0)
        hinge = np.maximum(0.0, 1.0 - y * (X[lab] @ w + b))
        total += 0.5 * float(w @ w) + C * float(hinge.sum())
    return total


@pytest.fixture(scope="module")
def oracle_results(oracle_optima):
    # The optima come from the brute force, cached (tests/test_oracle_cache.py re-derives some).
    out = []
    for seed in range(20):
        X, Y, k, C = make_instance(seed)
        opt = oracle_optima["multi"][str(seed)]
        fd = MultiTTK(k=k, C=C).fit(X, Y)
        mip = MultiTTK(k=k, C=C, solver="mip", time_limit=20.0).fit(X, Y)
        out.append((seed, opt, fd, mip, X, Y, C))
    return out


def test_fd_polish_within_0_1_percent_on_90_percent(oracle_results):
    within = [(fd.objective_ - opt) <= 1e-3 * opt for _, opt, fd, *_ in oracle_results]
    assert sum(within) >= 18, f"only {sum(within)}/20 within 0.1% of the optimum"


def test_never_below_the_optimum(oracle_results):
    # Below the exact optimum would mean an infeasible answer (more than k positive cells).
    for seed, opt, fd, mip, X, Y, C in oracle_results:
        for model in (fd, mip):
            obj = recomputed_objective(model, X, Y, C)
            assert obj == pytest.approx(model.objective_, rel=1e-12), seed
            assert obj >= opt * (1.0 - 1e-6), seed


def test_mip_matches_the_oracle_and_never_exceeds_fd(oracle_results):
    proved = 0
    for seed, opt, fd, mip, *_ in oracle_results:
        assert mip.objective_ <= fd.objective_ * (1.0 + 1e-9), seed
        assert mip.bound_ <= mip.objective_
        assert mip.bound_ <= opt * (1.0 + 1e-6), seed  # a proved bound cannot exceed the optimum
        if mip.status_ in PROVED:
            proved += 1
            assert mip.gap_ <= 1e-6, seed
            assert abs(mip.objective_ - opt) <= 1e-6 * opt, seed
    assert proved >= 18  # else the comparison above would be nearly vacuous


def test_mip_from_a_poor_start_still_reaches_the_oracle(oracle_results):
    # With the plain shifted-SVM start (no FD, no polish) the big-M values come from a looser
    # upper bound and the MIP itself must find the optimum: this is what tests their validity.
    tested = 0
    for seed, opt, fd, _, X, Y, C in oracle_results[:10]:
        mip = MultiTTK(k=fd.k, C=C, solver="mip", polish=False, max_iter=0, time_limit=20.0)
        mip.fit(X, Y)
        if mip.init_objective_ <= opt * (1 + 1e-3):
            continue  # the start is already optimal: nothing to show
        tested += 1
        assert mip.status_ in PROVED, seed
        assert abs(mip.objective_ - opt) <= 1e-6 * opt, seed
    assert tested >= 5


def test_mip_never_claims_an_unproved_optimum():
    X, Y, _, C = make_instance(1, max_m=40)
    rng = np.random.default_rng(0)
    X = np.vstack([X, rng.normal(size=(60, X.shape[1])) + 0.7])
    Y = np.vstack([Y, -np.ones((60, Y.shape[1]), dtype=np.int64)])
    fd = MultiTTK(k=5, C=C).fit(X, Y)
    mip = MultiTTK(k=5, C=C, solver="mip", time_limit=0.05).fit(X, Y)
    assert mip.bound_ <= mip.objective_ <= fd.objective_ * (1 + 1e-9)
    assert mip.status_ not in PROVED or mip.gap_ <= 1e-6
    assert mip.gap_ == pytest.approx((mip.objective_ - mip.bound_) / mip.objective_)


def test_the_budget_binds_and_the_polish_matters(oracle_results):
    # Guards for the oracle tests: the per-species SVMs mark more than k cells positive
    # (the integer part is exercised) and plain FD stops short somewhere.
    binds = 0
    for _, _, fd, _, X, Y, C in oracle_results:
        svm = MultiSVM(k=fd.k, C=C).fit(X, Y)
        raw = X[Y[:, 0] == -1] @ svm.coef_.T + svm.raw_intercept_  # before the shift
        binds += int((raw.max(axis=1) > 0).sum() > fd.k)
    assert binds >= 15
    gains = [fd.fd_objective_ - fd.objective_ for _, _, fd, *_ in oracle_results]
    assert min(gains) >= -1e-9 and max(gains) > 1e-3


def test_multisvm_is_feasible_so_never_below_the_optimum(oracle_results):
    for seed, opt, fd, _, X, Y, C in oracle_results:
        svm = MultiSVM(k=fd.k, C=C).fit(X, Y)
        assert (svm.candidate_scores_.max(axis=1) > 0).sum() <= fd.k
        assert recomputed_objective(svm, X, Y, C) == pytest.approx(svm.objective_, rel=1e-12)
        assert svm.objective_ >= opt * (1.0 - 1e-6), seed


# --- one species is TTK ------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_one_species_agrees_with_ttk(seed):
    X, Y, k, C = make_instance(seed, n_species=1, max_m=20)
    y = Y[:, 0]
    ttk = TTK(k=k, C=C).fit(X, y)
    multi = MultiTTK(k=k, C=C).fit(X, Y)
    assert multi.objective_ == pytest.approx(ttk.objective_, rel=1e-6)
    assert set(multi.selected_.tolist()) == set(ttk.selected_.tolist())
    np.testing.assert_allclose(multi.coef_[0], ttk.coef_, rtol=1e-5, atol=1e-7)
    # A 1-D y is read as one species.
    assert MultiTTK(k=k, C=C).fit(X, y).objective_ == multi.objective_


# --- properties --------------------------------------------------------------------------


@st.composite
def problems(draw):
    seed = draw(st.integers(0, 10_000))
    return make_instance(seed, n_species=draw(st.integers(1, 3)), max_m=draw(st.integers(6, 25)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.booleans())
def test_properties(inst, polish):
    X, Y, k, C = inst
    model = MultiTTK(k=k, C=C, polish=polish).fit(X, Y)
    cand = np.flatnonzero(Y[:, 0] == -1)
    # exactly k distinct candidates
    assert model.selected_.size == k and np.unique(model.selected_).size == k
    assert set(model.selected_.tolist()) <= set(cand.tolist())
    # every cell positive through some species beyond a tie is selected (scores recomputed
    # from the model; a tie at the cut is the one rule's, reserve.solvers.ties)
    top = model.decision_function(X)[cand].max(axis=1)
    assert set(cand[top > tie_width(top)].tolist()) <= set(model.selected_.tolist())
    np.testing.assert_array_equal(model.candidate_scores_.max(axis=1), top)
    # the objective never rises: FD part, then the accepted swaps
    h = np.asarray(model.objective_history_)
    assert h.size >= model.n_iter_ + 1
    assert np.all(np.diff(h) <= 1e-9 * np.abs(h[:-1]).clip(1.0))
    assert model.objective_ <= model.init_objective_ * (1 + 1e-9) + 1e-12
    assert model.objective_ == pytest.approx(recomputed_objective(model, X, Y, C), rel=1e-12)
    # same input, same output
    again = MultiTTK(k=k, C=C, polish=polish).fit(X, Y)
    assert np.array_equal(again.selected_, model.selected_)
    assert np.array_equal(again.coef_, model.coef_)
    assert np.array_equal(again.intercept_, model.intercept_)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_permuting_rows_permutes_the_answer(seed, perm_seed):
    X, Y, k, C = make_instance(seed, max_m=15)
    model = MultiTTK(k=k, C=C).fit(X, Y)
    perm = np.random.default_rng(perm_seed).permutation(len(Y))
    other = MultiTTK(k=k, C=C).fit(X[perm], Y[perm])
    assert other.objective_ == pytest.approx(model.objective_, rel=1e-6, abs=1e-9)


def test_a_tie_at_the_cut_is_broken_by_the_one_rule():
    # Duplicate candidate rows tie exactly; the top k by max-score (lower row first), then a
    # tie across the cut broken by break_cutoff_ties seeded with random_state.
    X, Y, k, C = make_instance(3)
    cand = Y[:, 0] == -1
    X2 = np.vstack([X, X[cand]])
    Y2 = np.vstack([Y, Y[cand]])
    for seed in (0, 3):
        model = MultiTTK(k=k, C=C, random_state=seed).fit(X2, Y2)
        key = model.candidate_scores_.max(axis=1)
        want, _, ties = break_cutoff_ties(key, np.arange(key.size), top_k(key, k), None, seed)
        assert model.selected_.tolist() == model.candidates_[want].tolist()
        assert model.cutoff_ties_ == ties
        for j in model.selected_:  # a twin left out only where the draw decided
            twins = np.flatnonzero((Y2[:, 0] == -1) & np.all(X2 == X2[j], axis=1))
            assert twins.size == 2
            assert set(twins) <= set(model.selected_) or ties.n_drawn > 0


def test_selection_is_top_k_by_max_score_best_first():
    X, Y, k, C = make_instance(5, max_m=15)
    model = MultiTTK(k=k, C=C).fit(X, Y)
    top = model.decision_function(X).max(axis=1)
    cand = np.flatnonzero(Y[:, 0] == -1)
    out = np.setdiff1d(cand, model.selected_)
    assert top[model.selected_].min() >= top[out].max()
    assert np.all(np.diff(top[model.selected_]) <= 0)


def test_multisvm_ranks_by_the_sum_of_scores():
    X, Y, k, C = make_instance(2, n_species=3, max_m=15)
    svm = MultiSVM(k=k, C=C).fit(X, Y)
    total = svm.decision_function(X).sum(axis=1)
    cand = np.flatnonzero(Y[:, 0] == -1)
    out = np.setdiff1d(cand, svm.selected_)
    assert total[svm.selected_].min() >= total[out].max()
    assert svm.coef_.shape == (3, X.shape[1]) and svm.raw_intercept_.shape == (3,)
    assert np.all(svm.intercept_ <= svm.raw_intercept_)


def test_multisvm_with_one_species_selects_like_svm():
    from reserve.solvers import SVM

    X, Y, k, C = make_instance(4, n_species=1, max_m=15)
    svm = SVM(k=k, C=C).fit(X, Y[:, 0])
    multi = MultiSVM(k=k, C=C).fit(X, Y)
    assert multi.selected_.tolist() == svm.selected_.tolist()
    assert multi.objective_ == pytest.approx(svm.objective_, rel=1e-9)


def test_hand_solved_instance():
    """Species 0 is TTK's hand-solved case (w = 2, b = -1, objective 2, picks z = 2); species 1
    has the same data, so with k = 1 both must pick z = 2 and the objective doubles."""
    X = np.array([[-1.0], [1.0], [2.0], [0.5]])
    Y = np.array([[0, 0], [1, 1], [-1, -1], [-1, -1]])
    model = MultiTTK(k=1, C=10.0).fit(X, Y)
    assert model.objective_ == pytest.approx(4.0, rel=1e-6)
    np.testing.assert_allclose(model.coef_.ravel(), [2.0, 2.0], rtol=1e-5)
    np.testing.assert_allclose(model.intercept_, [-1.0, -1.0], rtol=1e-5)
    assert model.selected_.tolist() == [2]
    mip = MultiTTK(k=1, C=10.0, solver="mip", time_limit=10.0).fit(X, Y)
    assert mip.status_ in PROVED and mip.objective_ == pytest.approx(4.0, rel=1e-6)
    assert mip.mip_solver_ == "scip" and mip.n_nodes_ >= 0 and mip.gap_ <= 1e-6


def test_pickle_clone_and_shapes():
    X, Y, k, C = make_instance(11)
    model = MultiTTK(k=k, C=C).fit(X, Y)
    again = pickle.loads(pickle.dumps(model))
    assert np.array_equal(again.decision_function(X), model.decision_function(X))
    fresh = clone(model)
    assert not hasattr(fresh, "coef_") and fresh.get_params() == model.get_params()
    assert model.decision_function(X).shape == (len(Y), 2)
    assert model.predict(X).shape == (len(Y), 2)
    assert model.candidate_scores_.shape == ((Y[:, 0] == -1).sum(), 2)
    assert model.species_objective_.sum() == pytest.approx(model.objective_)
    assert model.status_ == "local" and model.runtime_ > 0
    with pytest.raises(InvalidInputError, match="Pass the same feature columns"):
        model.decision_function(X[:, :1])


# --- bad input ---------------------------------------------------------------------------

GOOD_X = np.random.default_rng(0).normal(size=(10, 2))
GOOD_Y = np.array([[0, 1], [1, 0], [0, 0], [1, 1], [0, 1]] + [[-1, -1]] * 5)


def _with_row(row, values):
    Y = GOOD_Y.copy()
    Y[row] = values
    return Y


@pytest.mark.parametrize(
    ("X", "Y", "params", "fragment"),
    [
        (GOOD_X, _with_row(6, [-1, 1]), {}, "Y row 6 mixes -1 with 0/1"),
        (GOOD_X, _with_row(1, [1, -1]), {}, "Y row 1 mixes -1 with 0/1"),
        (GOOD_X, np.c_[GOOD_Y[:, 0], np.where(GOOD_Y[:, 1] == -1, -1, 1)], {}, "column 1"),
        (GOOD_X, np.where(GOOD_Y == 1, 2, GOOD_Y), {}, "other values [2]"),
        (GOOD_X, GOOD_Y[:, :, None], {}, "Y must be 2-D"),
        (GOOD_X, GOOD_Y[:, :0], {}, "at least one species"),
        (GOOD_X[:9], GOOD_Y, {}, "X has 9 rows, Y has 10"),
        (GOOD_X, np.abs(GOOD_Y) * (np.arange(10) % 2)[:, None], {}, "no candidate rows"),
        (np.where(np.eye(10, 2) > 0, np.nan, GOOD_X), GOOD_Y, {}, "NaN or infinite"),
        (GOOD_X, GOOD_Y, {"k": 0}, "k=0"),
        (GOOD_X, GOOD_Y, {"k": 5}, "k=5"),
        (GOOD_X, GOOD_Y, {"k": 2.5}, "whole number"),
        (GOOD_X, GOOD_Y, {"C": -1.0}, "C must be"),
        (GOOD_X, GOOD_Y, {"solver": "cplex"}, "solver must be one of"),
        (GOOD_X, GOOD_Y, {"max_iter": -1}, "max_iter"),
        (GOOD_X, GOOD_Y, {"solver": "mip", "threads": 0}, "threads must be at least 1"),
        (GOOD_X, GOOD_Y, {"solver": "mip", "time_limit": 0}, "time_limit must be"),
        (GOOD_X, None, {}, "Y is None"),
    ],
)
def test_bad_input_names_the_problem(X, Y, params, fragment):
    model = MultiTTK(**{"k": 2, **params})
    with pytest.raises(InvalidInputError) as info:
        model.fit(X, Y)
    assert isinstance(info.value, ReserveError) and isinstance(info.value, ValueError)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_input_messages_say_how_to_fix():
    with pytest.raises(InvalidInputError, match=r"mark it -1 throughout"):
        MultiTTK(k=2).fit(GOOD_X, _with_row(6, [-1, 0]))
    with pytest.raises(InvalidInputError, match=r"Add labelled rows of the missing class"):
        MultiSVM(k=2).fit(GOOD_X, np.c_[GOOD_Y[:, 0], np.minimum(GOOD_Y[:, 1], 0)])
    with pytest.raises(InvalidInputError, match=r"Choose k between 1 and 4"):
        MultiSVM(k=7).fit(GOOD_X, GOOD_Y)
