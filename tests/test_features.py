"""Feature maps in front of TTK and the forest score they may add."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.pipeline import Pipeline

from reserve.errors import InvalidInputError
from reserve.solvers.features import (
    FEATURE_MAPS,
    JOINING_MAPS,
    MAX_EXPANDED_BYTES,
    ForestScore,
    expanded_width,
    feature_map,
    fit_feature_map,
)


def quadratic_problem(seed: int, n: int = 240, m: int = 400):
    """Presence where x0 is near 0 (a hump): no linear scorer can rank it, a spline can."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + m, 3))
    occupied = (np.abs(X[:, 0]) < 0.6).astype(int)
    y = np.r_[occupied[:n], -np.ones(m, dtype=int)]
    return X, y, occupied


def test_forest_score_is_out_of_bag_on_labelled_rows():
    X, y, _ = quadratic_problem(0)
    fs = ForestScore(n_estimators=50, random_state=0)
    Z = fs.fit_transform(X, y)
    assert Z.shape == (X.shape[0], X.shape[1] + 1)
    np.testing.assert_array_equal(Z[:, :3], X)
    later = fs.transform(X)[:, -1]
    lab = y != -1
    # Candidates get the whole forest's score in both; labelled rows differ (out-of-bag).
    np.testing.assert_allclose(Z[~lab, -1], later[~lab])
    assert not np.allclose(Z[lab, -1], later[lab])


def test_forest_score_threads_give_the_one_thread_scores():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(25_000, 3))
    y = np.r_[(X[:400, 0] > 0.5).astype(int), -np.ones(24_600, dtype=int)]
    kw = {"n_estimators": 20, "passthrough": False, "random_state": 0}
    one = ForestScore(n_jobs=1, **kw)
    two = ForestScore(n_jobs=2, **kw)
    np.testing.assert_array_equal(two.fit_transform(X, y), one.fit_transform(X, y))
    np.testing.assert_array_equal(two.transform(X[::-1]), one.transform(X[::-1]))
    assert two.forest_.n_jobs == 1  # later predicts (the tie-break) on one thread too


def test_feature_map_widths_match_the_transformers():
    X = np.random.default_rng(1).normal(size=(50, 4))
    y = np.r_[np.tile([0, 1], 15), -np.ones(20, dtype=int)]
    for name in FEATURE_MAPS:
        Z = X
        for _, step in feature_map(name, n_features=4, n_samples=50, random_state=0):
            Z = step.fit_transform(Z, y)
        assert Z.shape == (50, expanded_width(name, 4, 50)), name


def test_a_map_too_large_for_memory_is_refused_with_its_size():
    n = MAX_EXPANDED_BYTES // (8 * expanded_width("interactions", 1000, 1)) + 1
    with pytest.raises(InvalidInputError, match=r"interactions.*GiB"):
        feature_map("interactions", n_features=1000, n_samples=n)


@pytest.mark.parametrize("first", ["stack", "forest"])
def test_the_stack_and_forest_maps_share_one_forest_as_if_fitted_alone(first):
    X, y, _ = quadratic_problem(5, n=120, m=200)
    shared: dict = {}
    order = [first, "forest" if first == "stack" else "stack"]
    together = {m: fit_feature_map(m, X, y, random_state=0, shared=shared) for m in order}
    new_rows = np.random.default_rng(9).normal(size=(30, 3))
    for model, (steps, Z) in together.items():
        alone_steps, alone_Z = fit_feature_map(model, X, y, random_state=0)
        np.testing.assert_array_equal(Z, alone_Z)  # the mapped rows, labelled ones out of bag
        twin, alone = (Pipeline(s).transform(new_rows) for s in (steps, alone_steps))
        np.testing.assert_array_equal(twin, alone)  # and later rows
    forests = [dict(steps)["forest"].forest_ for steps, _ in together.values()]
    assert forests[0] is forests[1]


def test_each_map_has_its_steps_and_standardises_first():
    names = {
        name: [s for s, _ in feature_map(name, n_features=3, n_samples=50)] for name in FEATURE_MAPS
    }
    assert names["linear"] == ["scale"]
    assert names["spline"] == ["scale", "spline", "rescale"]
    assert names["interactions"] == ["scale", "interactions", "rescale"]
    assert names["rbf"] == ["scale", "rbf", "rescale"]
    assert names["stack"] == names["forest"] == ["scale", "forest", "rescale"]
    assert set(JOINING_MAPS) <= set(FEATURE_MAPS)
    with pytest.raises(InvalidInputError, match="linear, spline"):
        feature_map("gam", n_features=3, n_samples=50)


def test_fit_feature_map_returns_the_fitted_steps_and_their_output():
    X, y, _ = quadratic_problem(1, n=80, m=40)
    for name in ("linear", "spline", "stack"):
        steps, Z = fit_feature_map(name, X, y, random_state=0)
        assert Z.shape == (120, expanded_width(name, 3, 120))
        if name != "stack":  # stack's labelled rows get their out-of-bag score in the fit
            np.testing.assert_allclose(Pipeline(steps).transform(X), Z, atol=1e-12)
    _, Z = fit_feature_map("linear", X, y)
    np.testing.assert_allclose(Z, (X - X.mean(axis=0)) / X.std(axis=0), atol=1e-12)


def test_forest_score_alone_and_its_twin():
    X, y, occupied = quadratic_problem(2, n=200, m=100)
    alone = ForestScore(n_estimators=30, passthrough=False, random_state=0).fit(X, y)
    score = alone.transform(X)
    assert score.shape == (300, 1)
    cand = y == -1
    # the forest learns the hump: occupied candidates score higher on average
    assert score[cand][occupied[cand] == 1].mean() > score[cand][occupied[cand] == 0].mean() + 1
    both = ForestScore(n_estimators=30, random_state=0).fit(X, y)
    np.testing.assert_array_equal(both.twin(False).transform(X), score)
    np.testing.assert_array_equal(both.transform(X)[:, -1:], score)


def test_forest_score_refuses_missing_or_one_class_labels():
    X, y, _ = quadratic_problem(3, n=40, m=20)
    with pytest.raises(InvalidInputError, match="requires y"):
        ForestScore().fit(X)
    with pytest.raises(InvalidInputError, match="two classes"):
        ForestScore().fit(X, np.where(y == -1, -1, 0))
    with pytest.raises(InvalidInputError, match="entries like X"):
        ForestScore().fit(X, y[:10])
