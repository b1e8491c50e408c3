"""AutoTTK and the feature maps in front of TTK."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from reserve import fork as _fork
from reserve.errors import InvalidInputError
from reserve.solvers import search, ties
from reserve.solvers.auto import TIE_BREAKS, AutoTTK, auto_grid, leading_point, nearly_balanced
from reserve.solvers.ensemble import map_winners
from reserve.solvers.features import (
    ForestScore,
)


def quadratic_problem(seed: int, n: int = 240, m: int = 400):
    """Presence where x0 is near 0 (a hump): no linear scorer can rank it, a spline can."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + m, 3))
    occupied = (np.abs(X[:, 0]) < 0.6).astype(int)
    y = np.r_[occupied[:n], -np.ones(m, dtype=int)]
    return X, y, occupied


def test_unknown_model_is_refused_listing_the_maps():
    X, y, _ = quadratic_problem(0, n=40, m=20)
    with pytest.raises(InvalidInputError, match="linear, spline"):
        AutoTTK(k=2, models=("gam",)).fit(X, y)


def test_selects_exactly_k_candidates_deterministically():
    X, y, _ = quadratic_problem(2)
    a = AutoTTK(k=15, models=("linear", "spline"), Cs=(1.0,), random_state=3).fit(X, y)
    b = AutoTTK(k=15, models=("linear", "spline"), Cs=(1.0,), random_state=3).fit(X, y)
    cand = np.flatnonzero(y == -1)
    assert a.selected_.size == 15 and np.unique(a.selected_).size == 15
    assert set(a.selected_) <= set(cand)
    np.testing.assert_array_equal(a.selected_, b.selected_)
    assert a.best_params_ == b.best_params_


def test_cv_prefers_the_spline_on_a_hump_and_beats_linear():
    X, y, occupied = quadratic_problem(4)
    auto = AutoTTK(k=20, models=("linear", "spline"), Cs=(1.0,), random_state=0).fit(X, y)
    lin = AutoTTK(k=20, models=("linear",), Cs=(1.0,), random_state=0).fit(X, y)
    assert auto.best_params_["model"] == "spline"
    res = auto.cv_results_
    score = res["mean_test_score"]
    assert score[res["model"] == "spline"].max() > score[res["model"] == "linear"].max()
    assert occupied[auto.selected_].mean() > occupied[lin.selected_].mean() + 0.2


def test_cv_results_describe_every_grid_point():
    X, y, _ = quadratic_problem(5, n=90, m=60)
    est = AutoTTK(
        k=5,
        models=("linear", "stack"),
        Cs=(0.1, 1.0),
        cv=3,
        n_repeats=2,
        random_state=0,
        class_weight="auto",
    ).fit(X, y)
    res = est.cv_results_
    assert [p["model"] for p in res["params"]] == ["linear", "linear", "stack", "stack"]
    assert sorted(res["rank_test_score"].tolist()) == [1, 2, 3, 4]
    assert sum(key.startswith("split") for key in res) == 6
    best = int(np.flatnonzero(res["rank_test_score"] == 1)[0])
    assert est.best_params_ == res["params"][best]


def test_too_few_positives_falls_back_with_a_note():
    X, y, _ = quadratic_problem(6, n=60, m=30)
    y[:60] = 0
    y[0] = 1  # a single positive: no stratified fold can hold one out and keep one in
    est = AutoTTK(k=3, models=("spline", "linear"), Cs=(1.0,), random_state=0, small_training=0)
    est.fit(X, y)
    assert "too few" in est.cv_note_ and "fell back" in est.cv_note_
    assert est.best_params_ == {"model": "spline", "C": 1.0, "class_weight": "auto"}
    assert est.selected_.size == 3


def test_few_labelled_cells_compare_the_linear_map_alone():
    X, y, _ = quadratic_problem(7, n=60, m=40)
    est = AutoTTK(k=5, Cs=(0.1, 1.0), random_state=0).fit(X, y)  # 60 labelled: the rule
    assert set(est.cv_results_["model"]) == {"linear"}
    assert {m for m, _, _ in est.members_} == {"linear"}
    assert "60 labelled cells (at most 60): the linear map alone" in est.cv_note_
    assert est.small_training_note_ == "60 labelled cells (at most 60): the linear map alone"
    # the same fit as asking for the linear map alone
    lin = AutoTTK(k=5, models=("linear",), Cs=(0.1, 1.0), random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.selected_, lin.selected_)
    # a refit of the chosen members keeps them, whatever the rows
    refit = AutoTTK(k=5, random_state=0, **est.refit_params()).fit(X, y)
    assert refit.members_ == est.members_


def test_the_rule_for_few_labelled_cells_leaves_other_grids_alone():
    X, y, _ = quadratic_problem(7, n=61, m=40)
    kw = dict(k=5, Cs=(1.0,), random_state=0, class_weight="auto")
    above = AutoTTK(models=("linear", "spline"), **kw).fit(X, y)  # 61 labelled
    assert set(above.cv_results_["model"]) == {"linear", "spline"}
    assert "linear map alone" not in above.cv_note_
    assert above.small_training_note_ == ""
    X, y, _ = quadratic_problem(7, n=40, m=40)
    no_linear = AutoTTK(models=("spline", "stack"), **kw).fit(X, y)
    assert set(no_linear.cv_results_["model"]) == {"spline", "stack"}
    off = AutoTTK(models=("linear", "spline"), small_training=0, **kw).fit(X, y)
    assert set(off.cv_results_["model"]) == {"linear", "spline"}


@pytest.mark.parametrize("bad", [-1, 1.5, True, "60"])
def test_bad_small_training_is_refused(bad):
    X, y, _ = quadratic_problem(0, n=40, m=20)
    with pytest.raises(InvalidInputError, match="small_training must be an integer >= 0"):
        AutoTTK(k=2, small_training=bad).fit(X, y)


def test_one_grid_point_skips_the_cross_validation():
    X, y, _ = quadratic_problem(9, n=60, m=30)
    est = AutoTTK(k=3, models=("spline",), Cs=(2.0,), random_state=0, class_weight="auto")
    est.fit(X, y)
    assert est.best_params_ == {"model": "spline", "C": 2.0, "class_weight": "auto"}
    assert "no cross-validation" in est.cv_note_
    assert est.best_estimator_[-1].C == 2.0


def test_spatial_blocks_hold_out_whole_groups():
    X, y, _ = quadratic_problem(7, n=120, m=60)
    groups = np.arange(X.shape[0]) // 20
    est = AutoTTK(k=5, models=("linear",), Cs=(0.1, 1.0), cv=3, random_state=0)
    est.fit(X, y, groups=groups)
    assert sum(key.startswith("split") for key in est.cv_results_) == 3  # not repeated
    with pytest.raises(InvalidInputError, match="groups"):
        est.fit(X, y, groups=groups[:10])


def test_money_budget_is_respected():
    X, y, _ = quadratic_problem(8, n=100, m=50)
    cost = np.random.default_rng(0).uniform(1.0, 3.0, size=X.shape[0])
    est = AutoTTK(k=5, budget=9.0, models=("linear",), Cs=(1.0,), random_state=0)
    est.fit(X, y, cost=cost)
    assert cost[est.selected_].sum() <= 9.0 + 1e-9
    assert est.selected_.size >= 3


def _rare_positives(seed: int):
    """8 positives among 120 labelled rows and no signal: linear TTK collapses to w = 0."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(180, 4))
    y = np.r_[np.zeros(120, dtype=int), -np.ones(60, dtype=int)]
    y[rng.choice(120, 8, replace=False)] = 1
    return X, y


def test_the_guard_refits_a_trivial_scorer_balanced():
    X, y = _rare_positives(0)
    plain = AutoTTK(k=5, models=("linear",), Cs=(1.0,), class_weight=None).fit(X, y)
    assert plain.best_estimator_[-1].trivial_ and plain.best_estimator_[-1].class_weight is None
    guarded = AutoTTK(k=5, models=("linear",), Cs=(1.0,), class_weight="auto").fit(X, y)
    assert guarded.best_estimator_[-1].class_weight == "balanced"
    assert not guarded.best_estimator_[-1].trivial_
    # A fit that does not collapse keeps the unweighted loss.
    Xq = np.random.default_rng(2).normal(size=(150, 3))
    yq = np.r_[(Xq[:90, 0] > 0).astype(int), -np.ones(60, dtype=int)]
    normal = AutoTTK(k=5, models=("linear",), Cs=(1.0,), class_weight="auto").fit(Xq, yq)
    assert normal.best_estimator_[-1].class_weight is None
    assert not normal.best_estimator_[-1].trivial_


def test_class_weight_cv_puts_both_weightings_in_the_grid():
    X, y = _rare_positives(1)
    est = AutoTTK(k=5, models=("linear",), Cs=(1.0,), class_weight="cv", random_state=0)
    est.fit(X, y)
    assert est.cv_results_["class_weight"].tolist() == ["auto", "balanced"]
    assert est.best_params_["class_weight"] in ("auto", "balanced")
    assert AutoTTK().class_weight == "cv"  # the default
    with pytest.raises(InvalidInputError, match="class_weight must be one of"):
        AutoTTK(k=5, class_weight="rare").fit(X, y)


def test_nearly_balanced_classes_skip_the_balanced_twins():
    # 8 of 120 positives keep both weightings (above); 55 of 120 are nearly balanced: the
    # balanced twin is almost the unweighted problem, so the CV does not pay for it.
    X, y = _rare_positives(1)
    y[:120] = 0
    y[np.random.default_rng(3).choice(120, 55, replace=False)] = 1
    assert nearly_balanced(y[:120]) and not nearly_balanced(y[:120][y[:120] == 0][:50])
    est = AutoTTK(k=5, models=("linear",), Cs=(0.1, 1.0), random_state=0).fit(X, y)
    assert est.cv_results_["class_weight"].tolist() == ["auto", "auto"]
    assert "nearly balanced" in est.cv_note_ and est.best_params_["class_weight"] == "auto"
    # Asked for explicitly, the balanced loss is still used.
    bal = AutoTTK(k=5, models=("linear",), Cs=(0.1, 1.0), class_weight="balanced").fit(X, y)
    assert bal.cv_results_["class_weight"].tolist() == ["balanced", "balanced"]


_FOLD_PIDS: list[str] = []  # where _pid_fold_scores writes the process id of each fold


def _pid_fold_scores(*task):  # module level: a forked child finds it by name
    with open(_FOLD_PIDS[0], "a") as fh:
        fh.write(f"{os.getpid()}\n")
    return _FOLD_SCORES(*task)


_FOLD_SCORES = search._score_fold


def _same_cv(par, seq):
    for key, value in seq.cv_results_.items():
        if key.startswith(("split", "mean", "std")):
            np.testing.assert_array_equal(par.cv_results_[key], value, err_msg=key)
    np.testing.assert_array_equal(par.selected_, seq.selected_)


@pytest.mark.skipif(not _fork.can_fork(), reason="forked fold workers are Linux only")
def test_forked_folds_give_the_sequential_answer(monkeypatch, tmp_path):
    # reserve select runs the folds on every processor by default: that must not change a
    # thing. On Linux this process runs some folds and a forked child the others, whatever
    # the size of the CV (a forked child costs no imports).
    X, y, _ = quadratic_problem(8, n=90, m=60)
    kw = dict(k=5, models=("linear", "spline"), Cs=(1.0,), random_state=1)
    seq = AutoTTK(n_jobs=1, **kw).fit(X, y)
    _FOLD_PIDS[:] = [str(tmp_path / "pids.txt")]
    monkeypatch.setattr(search, "_score_fold", _pid_fold_scores)
    # an earlier test of this worker may have left a Python thread running, which makes
    # AutoTTK fall back (next test); here the fork path itself is under test
    monkeypatch.setattr(_fork.threading, "active_count", lambda: 1)
    par = AutoTTK(n_jobs=2, **kw).fit(X, y)
    pids = (tmp_path / "pids.txt").read_text().split()
    # each process takes the next fold not yet taken: both take some
    assert len(pids) == 6 and str(os.getpid()) in pids and len(set(pids)) == 2
    _same_cv(par, seq)


@pytest.mark.skipif(not _fork.can_fork(), reason="forked fold workers are Linux only")
def test_no_fork_while_another_python_thread_runs(monkeypatch, tmp_path):
    # a fork copies one thread: a lock another thread holds would stay locked in the child,
    # so with a second Python thread alive the small CV stays in this process
    X, y, _ = quadratic_problem(8, n=90, m=60)
    kw = dict(k=5, models=("linear",), Cs=(0.1, 1.0), random_state=1)
    _FOLD_PIDS[:] = [str(tmp_path / "pids.txt")]
    monkeypatch.setattr(search, "_score_fold", _pid_fold_scores)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        AutoTTK(n_jobs=2, **kw).fit(X, y)
    finally:
        stop.set()
        other.join()
    pids = (tmp_path / "pids.txt").read_text().split()
    assert len(pids) == 6 and set(pids) == {str(os.getpid())}


def test_joblib_folds_give_the_sequential_answer(monkeypatch):
    # Without fork (or off the main thread) joblib's workers run the folds of a large CV.
    X, y, _ = quadratic_problem(8, n=90, m=60)
    kw = dict(k=5, models=("linear", "spline"), Cs=(1.0,), random_state=1)
    seq = AutoTTK(n_jobs=1, **kw).fit(X, y)
    asked = []

    class Spy(search.Parallel):
        def __init__(self, n_jobs=None, **kw):
            asked.append(n_jobs)
            super().__init__(n_jobs=n_jobs, **kw)

    monkeypatch.setattr(search, "Parallel", Spy)
    monkeypatch.setattr(_fork, "_FORK", False)
    AutoTTK(n_jobs=2, **kw).fit(X, y)
    assert asked == [1]  # 90 labelled rows: too small a CV to pay for worker processes
    monkeypatch.setattr(search, "PARALLEL_MIN_ROWS", 2)
    par = AutoTTK(n_jobs=2, **kw).fit(X, y)
    assert asked == [1, 2]
    _same_cv(par, seq)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_progress_tells_each_fold_and_changes_nothing(n_jobs, monkeypatch):
    X, y, _ = quadratic_problem(8, n=90, m=60)
    kw = dict(k=5, models=("linear", "spline"), Cs=(1.0,), random_state=1, n_jobs=n_jobs)
    monkeypatch.setattr(_fork.threading, "active_count", lambda: 1)  # the fork path too
    quiet = AutoTTK(**kw).fit(X, y)
    told: list[str] = []
    est = AutoTTK(**kw).fit(X, y, progress=told.append)
    assert "progress" not in est.get_params()  # a fit argument, not a parameter
    np.testing.assert_array_equal(est.selected_, quiet.selected_)
    assert told[0] == (
        "cross-validating the habitat models: 2 settings (2 feature maps) on 6 folds of 90 cells"
    )
    folds = [int(m.split(": ")[1].split()[0]) for m in told if m.endswith(" of 6 folds")]
    assert folds == sorted(set(folds)) and folds[-1] == 6
    assert (len(folds) == 6) if n_jobs == 1 else (len(folds) >= 2)  # two finish together
    with pytest.raises(InvalidInputError, match="progress must be a function"):
        AutoTTK(**kw).fit(X, y, progress="stderr")


def test_ties_are_broken_by_the_forest_probability():
    # class_weight=None leaves the trivial scorer: every candidate ties on TTK's score, so the
    # secondary score alone chooses.
    X, y = _rare_positives(0)
    est = AutoTTK(k=5, models=("linear",), Cs=(1.0,), class_weight=None, random_state=3)
    est.fit(X, y)
    assert est.best_estimator_[-1].trivial_ and est.cutoff_ties_.n_tied > 5
    forest = ForestScore(random_state=3).fit(X, y)
    proba = forest.forest_.predict_proba(X[y == -1])[:, -1]
    np.testing.assert_allclose(est.secondary_scores_, proba)  # all tie: all are scored
    best = est.candidates_[np.argsort(-proba, kind="stable")[:5]]
    assert sorted(est.selected_.tolist()) == sorted(best.tolist())


def test_the_forest_fitted_beside_ttk_gives_the_sequential_answer(monkeypatch):
    # With two processors the tie-break forest runs in a forked child while TTK (and its
    # ladder) fits: the scores and the cells must be those of the run on one processor.
    monkeypatch.setattr(_fork.threading, "active_count", lambda: 1)
    X, y = _rare_positives(0)
    kw = dict(k=5, models=("linear",), Cs=(1.0,), class_weight=None, random_state=3)
    seq = AutoTTK(n_jobs=1, **kw).fit(X, y)
    forked = []
    real = _fork.Forked
    monkeypatch.setattr(_fork, "Forked", lambda fn, args: forked.append(fn) or real(fn, args))
    par = AutoTTK(n_jobs=2, **kw).fit(X, y)
    assert ties.tie_forest in forked or not _fork.can_fork()
    np.testing.assert_array_equal(par.secondary_scores_, seq.secondary_scores_)
    np.testing.assert_array_equal(par.selected_, seq.selected_)
    np.testing.assert_array_equal(par.candidate_rank_, seq.candidate_rank_)


def test_the_stack_map_breaks_ties_with_its_own_forest():
    X, y = _rare_positives(1)
    cand = np.flatnonzero(y == -1)
    X[cand[1:20:2]] = X[cand[0:20:2]]  # 10 pairs of twin candidates: equal scores
    est = AutoTTK(k=5, models=("stack",), Cs=(1.0,), random_state=0).fit(X, y)
    steps = est.best_estimator_.steps
    forest = dict(steps)["forest"]
    inside = dict(steps)["scale"].transform(X[y == -1])  # the forest sees scaled rows
    proba = forest.forest_.predict_proba(inside)[:, 1]
    scored = np.isfinite(est.secondary_scores_)
    assert scored.sum() >= 20
    np.testing.assert_allclose(est.secondary_scores_[scored], proba[scored])
    np.testing.assert_array_equal(scored, _near_another(est))


def test_the_forest_map_selects_its_forests_top_k():
    X, y, occupied = quadratic_problem(3)
    est = AutoTTK(k=20, models=("forest",), Cs=(1.0,), random_state=0).fit(X, y)
    steps = dict(est.best_estimator_.steps)
    cand = np.flatnonzero(y == -1)
    proba = steps["forest"].forest_.predict_proba(steps["scale"].transform(X[cand]))[:, 1]
    order = np.argsort(-proba, kind="stable")
    assert proba[order[19]] > proba[order[20]]  # no tie at the cutoff: one right answer
    assert set(est.selected_) == set(cand[order[:20]])
    assert est.best_estimator_.named_steps["ttk"].coef_.ravel()[0] > 0
    assert occupied[est.selected_].mean() > occupied[cand].mean() + 0.3


def test_the_forest_map_has_one_grid_point_and_never_leads():
    est = AutoTTK(models=("forest", "linear"), Cs=(0.1, 1.0, 10.0), class_weight="cv")
    X, y, _ = quadratic_problem(0, n=60, m=40)
    grid = auto_grid(est.set_params(k=3))
    assert [p for p in grid if p[0] == "forest"] == [("forest", 0.1, "auto")]
    assert len(grid) == 7
    scores = np.array([[1.0, 1.0], *[[0.5, 0.25]] * 6])  # the forest scores best
    res = search.search_results([dict(model=m, C=c, class_weight=w) for m, c, w in grid], scores)
    assert leading_point(res) == 1  # the best point of a map that may lead
    only = AutoTTK(models=("forest",), Cs=(1.0,), random_state=0).fit(X, y)
    assert only.members_ == (("forest", 1.0, "auto"),)  # alone, it is fitted


def test_autottk_fits_one_forest_per_fold_for_stack_and_forest(monkeypatch):
    fits = []
    real_fit = ForestScore.fit
    monkeypatch.setattr(
        ForestScore, "fit", lambda self, X, y=None: fits.append(1) or real_fit(self, X, y)
    )
    X, y, _ = quadratic_problem(2, n=120, m=200)
    kw = {"k": 10, "Cs": (1.0,), "class_weight": "auto", "random_state": 0, "n_jobs": 1}
    AutoTTK(models=("stack", "forest"), cv=3, n_repeats=1, **kw).fit(X, y)
    assert len(fits) == 3 + 1  # one forest in each fold, one in the final fit
    fits.clear()
    both = (("stack", 1.0, "auto"), ("forest", 1.0, "auto"))
    est = AutoTTK(members=both, tie_break="logistic", **kw).fit(X, y)
    assert est.members_ == both and len(fits) == 1


def _near_another(est) -> np.ndarray:
    """Candidates whose TTK score lies within two tie widths of another's (by brute force)."""
    s = est.candidate_scores_
    gap = np.abs(s[:, None] - s[None, :]) + np.diag(np.full(s.size, np.inf))
    return gap.min(axis=1) <= 2e-7 * max(1.0, np.abs(s).max())


def test_the_secondary_score_is_computed_where_scores_tie_only():
    X, y, _ = quadratic_problem(0, n=120, m=200)
    cand = np.flatnonzero(y == -1)
    X[cand[1:40:2]] = X[cand[0:40:2]]  # 20 pairs of twin candidates: equal scores
    for tie_break in TIE_BREAKS:
        est = AutoTTK(k=6, models=("linear",), Cs=(1.0,), tie_break=tie_break, random_state=0)
        est.fit(X, y)
        scored = np.isfinite(est.secondary_scores_)
        np.testing.assert_array_equal(scored, _near_another(est))
        assert 40 <= scored.sum() < scored.size


def test_logistic_tie_break_and_a_bad_tie_break():
    X, y = _rare_positives(0)
    est = AutoTTK(k=5, models=("linear",), Cs=(1.0,), class_weight=None, tie_break="logistic")
    est.fit(X, y)
    lo = est.secondary_scores_
    assert lo.min() < 0 < lo.max()  # log-odds, not a probability
    with pytest.raises(InvalidInputError, match="tie_break must be one of 'forest', 'logistic'"):
        AutoTTK(k=5, tie_break="oracle").fit(X, y)


def test_the_final_fit_is_the_ladder_mean_and_a_bad_ladder_is_refused():
    X, y, _ = quadratic_problem(0, n=120, m=200)
    est = AutoTTK(k=6, models=("linear",), Cs=(1.0,), random_state=0).fit(X, y)
    assert est.best_estimator_[-1].ladder_budgets_ == (6, 4, 8)
    plain = AutoTTK(k=6, models=("linear",), Cs=(1.0,), random_state=0, ladder="none")
    assert plain.fit(X, y).best_estimator_[-1].ladder_budgets_ == (6,)
    with pytest.raises(InvalidInputError, match="ladder must be one of"):
        AutoTTK(k=6, ladder="often").fit(X, y)


def _fold_matrix(res: dict) -> np.ndarray:
    return np.column_stack([res[key] for key in res if key.startswith("split")])


def test_the_ensemble_holds_the_maps_within_noise_of_the_winner():
    # Recomputed from cv_results_: the winner (the best point of a map that may lead) first;
    # every other map's best point joins exactly when its mean paired deficit over the
    # folds is within one standard error.
    X, y, _ = quadratic_problem(3, n=150, m=250)
    est = AutoTTK(k=12, Cs=(0.1, 1.0), random_state=0).fit(X, y)
    res, folds = est.cv_results_, _fold_matrix(est.cv_results_)
    rank = res["rank_test_score"]
    best = min(np.flatnonzero(res["model"] != "forest"), key=lambda i: rank[i])
    assert est.members_[0] == tuple(res["params"][best].values())
    joined = []
    for model in ("linear", "spline", "stack", "forest"):
        mine = np.flatnonzero(res["model"] == model)
        i = mine[np.argmin(rank[mine])]  # the map's best point
        gap = folds[best] - folds[i]
        if i == best or gap.mean() <= gap.std(ddof=1) / np.sqrt(gap.size):
            joined.append(tuple(res["params"][i].values()))
    assert sorted(est.members_) == sorted(joined)
    assert [m for m, _, _ in est.members_] == ["stack", "forest", "spline"]  # linear is out


def test_the_ensemble_is_the_mean_of_its_members_clipped_standardised_scores():
    # Oracle: each member refitted alone (no CV; its ladder mean, as a lone winner), its
    # candidates' scores standardised by hand, clipped to +-3 and averaged; the top k of
    # that mean are the selection.
    X, y = _rare_positives(0)
    est = AutoTTK(k=5, Cs=(0.1, 1.0), random_state=0).fit(X, y)
    assert [m for m, _, _ in est.members_] == ["spline", "forest", "linear", "stack"]
    assert all(m[-1].ladder_budgets_ == (5, 4, 8) for m in est.best_estimator_.members)
    z = []
    for model, C, cw in est.members_:
        alone = AutoTTK(k=5, models=(model,), Cs=(C,), class_weight=cw, random_state=0)
        alone.fit(X, y)
        assert alone.best_estimator_[-1].ladder_budgets_ == (5, 4, 8)
        s = alone.candidate_scores_
        z.append(np.clip((s - s.mean()) / s.std(), -3.0, 3.0))
    assert np.abs(z).max() == 3.0  # some member's tail is clipped: the clip is exercised
    mean = np.mean(z, axis=0)
    np.testing.assert_allclose(est.candidate_scores_, mean, atol=1e-9)
    top = est.candidates_[np.argsort(-mean, kind="stable")[:5]]
    assert sorted(est.selected_.tolist()) == sorted(top.tolist())
    positive = est.candidates_[est.decision_function(X[est.candidates_]) > 0]
    assert sorted(positive.tolist()) == sorted(est.selected_.tolist())  # exactly the k chosen


@pytest.mark.skipif(not _fork.can_fork(), reason="forked members are Linux only")
def test_forked_members_give_the_sequential_answer(monkeypatch):
    monkeypatch.setattr(_fork.threading, "active_count", lambda: 1)
    X, y = _rare_positives(0)
    seq = AutoTTK(k=5, Cs=(0.1, 1.0), random_state=0, n_jobs=1).fit(X, y)
    par = AutoTTK(k=5, Cs=(0.1, 1.0), random_state=0, n_jobs=2).fit(X, y)
    assert par.members_ == seq.members_ and len(par.members_) == 4
    np.testing.assert_array_equal(par.candidate_scores_, seq.candidate_scores_)
    np.testing.assert_array_equal(par.selected_, seq.selected_)


def test_ensemble_none_fits_the_winner_alone():
    X, y, _ = quadratic_problem(3, n=150, m=250)
    one = AutoTTK(k=12, Cs=(0.1, 1.0), random_state=0, ensemble="none").fit(X, y)
    model, C, cw = one.members_[0]
    assert len(one.members_) == 1 and one.best_params_ == {
        "model": model,
        "C": C,
        "class_weight": cw,
    }
    alone = AutoTTK(k=12, models=(model,), Cs=(C,), class_weight=cw, random_state=0).fit(X, y)
    np.testing.assert_array_equal(one.selected_, alone.selected_)
    with pytest.raises(InvalidInputError, match="ensemble must be one of"):
        AutoTTK(k=12, ensemble="vote").fit(X, y)


def test_refit_params_refit_the_members_without_cv():
    X, y = _rare_positives(0)
    est = AutoTTK(k=10, Cs=(1.0,), random_state=0).fit(X, y)
    assert len(est.members_) > 1
    again = AutoTTK(k=10, random_state=0).set_params(**est.refit_params()).fit(X, y)
    assert again.members_ == est.members_ and "without cross-validation" in again.cv_note_
    assert again.cv_runtime_ == 0.0
    np.testing.assert_array_equal(again.selected_, est.selected_)
    np.testing.assert_allclose(again.candidate_scores_, est.candidate_scores_)


@pytest.mark.parametrize(
    "members",
    [(("gam", 1.0, "auto"),), (("linear", -1.0, None),), (("linear", 1.0, "cv"),), ("linear",), ()],
)
def test_bad_members_are_refused(members):
    X, y, _ = quadratic_problem(5, n=60, m=40)
    with pytest.raises(InvalidInputError, match="members"):
        AutoTTK(k=3, members=members).fit(X, y)


def test_a_boundary_penalty_fits_the_winner_alone():
    # The penalised fit selects the set TTK chose; a mean of several fits has none to give.
    from scipy import sparse

    from reserve.solvers import Boundary

    X, y, _ = quadratic_problem(2, n=100, m=60)
    n = X.shape[0]
    boundary = Boundary(np.ones(n), sparse.csr_matrix((n, n)))
    plain = AutoTTK(k=5, Cs=(1.0,), random_state=0).fit(X, y, boundary=boundary)
    penalised = AutoTTK(k=5, Cs=(1.0,), random_state=0, boundary_penalty=0.5)
    penalised.fit(X, y, boundary=boundary)
    assert len(plain.members_) == 3 and len(penalised.members_) == 1
    assert plain.boundary_length_ == 5.0  # the ensemble's own selection: 5 lone cells
    assert map_winners([("linear", 1.0, None)], np.array([[np.nan, np.nan]]), 0) == [0]


@pytest.mark.parametrize(
    ("spline_folds", "joins"),
    [
        ([0.5, 0.5, 0.5], True),  # ties the winner on every fold
        ([0.0, 0.0, 0.0], False),  # worse on every fold: no noise to hide in
        ([0.25, 1.0, 0.25], True),  # worse on average, within one standard error
        ([0.0, np.nan, np.nan], False),  # one paired fold, worse
        ([0.5, np.nan, np.nan], True),  # one paired fold, a tie
        ([np.nan, np.nan, np.nan], False),  # never scored
    ],
)
def test_map_winners_keep_the_maps_within_one_standard_error(spline_folds, joins):
    grid = [("linear", 1.0, "auto"), ("spline", 1.0, "auto")]
    scores = np.array([[0.5, 0.5, 0.5], spline_folds])
    assert map_winners(grid, scores, 0) == ([0, 1] if joins else [0])


def test_the_tie_at_the_cut_is_broken_once_by_the_one_rule():
    # Oracle: the ranking by score level then secondary score, the cut's tie re-chosen by
    # reserve.solvers.ties.break_cutoff_ties seeded with random_state; the selection's tables
    # report cutoff_ties_ and do not break it again.
    X, y = _rare_positives(0)
    cand = np.flatnonzero(y == -1)
    X[cand[1:30:2]] = X[cand[0:30:2]]  # 15 pairs of twin candidates: equal forest scores too
    est = AutoTTK(k=6, models=("linear",), Cs=(1.0,), class_weight=None, random_state=4)
    est.fit(X, y)
    s, sec = est.candidate_scores_, est.secondary_scores_
    order = ties.rank_with_ties(s, sec)
    pick, runners, cut = ties.break_cutoff_ties(s, np.arange(s.size), order[:6], sec, 4)
    np.testing.assert_array_equal(est.selected_, cand[pick])
    assert est.cutoff_ties_ == cut and cut.flat and cut.n_tied == s.size
    first = np.concatenate([pick, runners])
    np.testing.assert_array_equal(np.argsort(est.candidate_rank_)[: first.size], first)
    # the 6th and 7th best secondary scores are twins: one place, drawn between them
    assert cut.n_tied_chosen == 6 and cut.n_drawn == 1 and runners[0] in order[5:7]
