"""The ensemble of the maps: its grid point estimator, its members, the winners, the mean."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.pipeline import Pipeline

from reserve import fork as _fork
from reserve.errors import InvalidInputError
from reserve.solvers import TTK
from reserve.solvers.ensemble import (
    MEMBER_CLIP,
    MapMean,
    MappedTTK,
    check_members,
    describe_members,
    fit_guarded,
    fit_members,
    map_members,
    map_winners,
)
from reserve.solvers.features import ForestScore, fit_feature_map


def _problem(seed=0, n=120, m=80):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + m, 3))
    y = np.r_[(np.abs(X[:n, 0]) < 0.7).astype(np.int64), -np.ones(m, dtype=np.int64)]
    return X, y


def _rare(seed=0):
    """8 positives among 120 labelled rows and no signal: unweighted TTK ends at w = 0."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(180, 4))
    y = np.r_[np.zeros(120, dtype=np.int64), -np.ones(60, dtype=np.int64)]
    y[rng.choice(120, 8, replace=False)] = 1
    return X, y


def test_map_winners_keep_the_winner_and_the_maps_within_one_standard_error():
    grid = [
        ("linear", 1.0, "auto"),
        ("linear", 10.0, "auto"),
        ("spline", 1.0, "auto"),
        ("stack", 1.0, "auto"),
    ]
    folds = np.array(
        [
            [0.5, 0.5, 0.5, 0.5],
            [1.0, 0.75, 1.0, 0.75],  # the winner
            [0.75, 0.75, 1.0, 0.5],  # deficit 0.125 +- 0.0625 (standard error): left out
            [1.0, 0.5, 1.0, 1.0],  # deficit 0 +- 0.125: joins
        ]
    )
    assert map_winners(grid, folds, 1) == [1, 3]
    # the winner is listed first even when another map's best point scores more
    assert map_winners(grid, folds, 2)[0] == 2


def test_map_winners_leave_out_a_map_never_scored():
    grid = [("linear", 1.0, None), ("spline", 1.0, None)]
    scores = np.array([[0.5, 0.5], [np.nan, np.nan]])
    assert map_winners(grid, scores, 0) == [0]


def test_map_mean_is_the_mean_of_clipped_standardised_scores():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=50), rng.normal(size=50) * 10 + 3
    a[0] = 40.0  # far out in the tail: clipped
    mean = MapMean([], [a, b])
    za = np.clip((a - a.mean()) / a.std(), -MEMBER_CLIP, MEMBER_CLIP)
    zb = np.clip((b - b.mean()) / b.std(), -MEMBER_CLIP, MEMBER_CLIP)
    np.testing.assert_allclose(mean.fit_scores_, (za + zb) / 2)
    assert za[0] == MEMBER_CLIP
    flat = MapMean([], [np.ones(50), b])  # a member whose candidates all tie adds nothing
    np.testing.assert_allclose(flat.fit_scores_, zb / 2)


def test_map_mean_scores_new_rows_through_its_members():
    X, y = _problem()
    pipes = [
        MappedTTK(model=m, k=5, random_state=0).fit(X, y).pipeline_ for m in ("linear", "spline")
    ]
    cand = np.flatnonzero(y == -1)
    mean = MapMean(pipes, [p.decision_function(X[cand]) for p in pipes])
    np.testing.assert_allclose(mean.decision_function(X[cand]), mean.fit_scores_, atol=1e-12)
    mean.threshold_ = 0.25
    np.testing.assert_allclose(mean.decision_function(X[cand]), mean.fit_scores_ - 0.25, atol=1e-12)
    assert mean.transform(X[:4]).shape == (4, 3 + 3 * 6)  # linear's 3 and spline's 18 columns


@pytest.mark.parametrize(
    "members",
    [(("gam", 1.0, "auto"),), (("linear", -1.0, None),), (("linear", 1.0, "cv"),), ("linear",), ()],
)
def test_check_members_refuses_what_is_not_a_grid_point(members):
    with pytest.raises(InvalidInputError, match="members"):
        check_members(members)


def test_check_members_and_describe_members():
    points = check_members([["linear", 1, None], ("spline", 0.1, "balanced")])
    assert points == [("linear", 1.0, None), ("spline", 0.1, "balanced")]
    assert (
        describe_members(points) == "the mean of linear with C=1 and spline with C=0.1 (balanced)"
    )
    assert describe_members(points[:1]) == "linear with C=1"


def test_fit_guarded_refits_the_trivial_scorer_balanced_and_only_it():
    X, y = _rare(0)
    plain = TTK(k=5, C=1.0).fit(X, y)
    assert plain.trivial_
    ttk, used = fit_guarded(X, y, "auto", k=5, C=1.0)
    assert used == "balanced" and ttk.class_weight == "balanced" and not ttk.trivial_
    ttk, used = fit_guarded(X, y, None, k=5, C=1.0)  # no guard asked: the trivial fit stays
    assert used is None and ttk.trivial_
    Xq = np.random.default_rng(2).normal(size=(150, 3))
    yq = np.r_[(Xq[:90, 0] > 0).astype(np.int64), -np.ones(60, dtype=np.int64)]
    ttk, used = fit_guarded(Xq, yq, "auto", k=5, C=1.0)  # not trivial: unweighted
    assert used is None and ttk.class_weight is None


def test_mapped_ttk_is_the_map_then_guarded_ttk():
    X, y = _problem(2)
    est = MappedTTK(model="spline", C=0.5, k=6, random_state=0).fit(X, y)
    _, Z = fit_feature_map("spline", X, y, random_state=0)
    ttk, _ = fit_guarded(Z, y, "auto", k=6, C=0.5, polish=False, random_state=0)
    np.testing.assert_array_equal(est.selected_, ttk.selected_)
    np.testing.assert_array_equal(est.candidates_, np.flatnonzero(y == -1))
    assert isinstance(est.pipeline_, Pipeline) and est.pipeline_[-1].C == 0.5
    np.testing.assert_allclose(
        est.pipeline_.decision_function(X[y == -1]), est.candidate_scores_, atol=1e-9
    )


def test_mapped_ttk_fits_a_map_once_per_shared_cache(monkeypatch):
    fits = []
    real = ForestScore.fit
    monkeypatch.setattr(
        ForestScore, "fit", lambda self, X, y=None: fits.append(1) or real(self, X, y)
    )
    X, y = _problem(3)
    shared: dict = {}
    a = MappedTTK(model="stack", C=0.1, k=5, random_state=0).fit(X, y, shared=shared)
    b = MappedTTK(model="stack", C=10.0, k=5, random_state=0).fit(X, y, shared=shared)
    MappedTTK(model="forest", k=5, random_state=0).fit(X, y, shared=shared)
    assert len(fits) == 1  # one forest for both C and for the forest map
    alone = MappedTTK(model="stack", C=10.0, k=5, random_state=0).fit(X, y)
    np.testing.assert_array_equal(b.selected_, alone.selected_)
    assert a.pipeline_[0] is b.pipeline_[0]  # the same fitted map


def test_map_members_share_one_forest_and_match_each_map_alone():
    X, y = _problem(4)
    points = [("stack", 1.0, "auto"), ("forest", 1.0, "auto"), ("linear", 1.0, "auto")]
    mapped = map_members(points, X, y, 0, None)
    for (model, _, _), (_, Z) in zip(points, mapped, strict=True):
        np.testing.assert_array_equal(Z, fit_feature_map(model, X, y, random_state=0)[1])
    assert dict(mapped[0][0])["forest"].forest_ is dict(mapped[1][0])["forest"].forest_


@pytest.mark.skipif(not _fork.can_fork(), reason="forked members are Linux only")
def test_fit_members_fit_each_member_as_alone_wherever_they_run(monkeypatch):
    monkeypatch.setattr(_fork.threading, "active_count", lambda: 1)
    X, y = _problem(5)
    points = [("linear", 1.0, "auto"), ("spline", 0.1, "balanced")]
    mapped = map_members(points, X, y, 0, None)
    params = {"k": 6, "random_state": 0, "ladder": "none"}
    told: list[str] = []
    one = fit_members(points, mapped, y, None, None, params, 1)
    two = fit_members(points, mapped, y, None, None, params, 2, told.append)
    assert told[0] == "fitting the 2 chosen habitat models on every cell"
    assert told[-1] == "fitting the chosen habitat models: 2 of 2"
    for (t1, cw1), (t2, cw2), (_, C, cw), (_, Z) in zip(one, two, points, mapped, strict=True):
        alone, used = fit_guarded(Z, y, cw, C=C, n_jobs=1, **params)
        np.testing.assert_array_equal(t1.selected_, alone.selected_)
        np.testing.assert_array_equal(t2.candidate_scores_, t1.candidate_scores_)
        assert cw1 == cw2 == used
