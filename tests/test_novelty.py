"""Tests for reserve.novelty: MESS against a literal oracle, hand cases, the sign property."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from reserve.errors import InvalidInputError
from reserve.novelty import CONSTANT_MISMATCH, mess, similarity


def oracle_similarity(p: float, ref: list[float]) -> float:
    """Elith et al. (2010) as dismo::mess counts f (reference values <= p), one value at a time."""
    if not math.isfinite(p):
        return math.nan
    lo, hi = min(ref), max(ref)
    if lo == hi:
        return 100.0 if p == lo else CONSTANT_MISMATCH
    below = 0
    for r in ref:
        if r <= p:
            below += 1
    f = 100.0 * below / len(ref)
    if f == 0:
        return (p - lo) / (hi - lo) * 100.0
    if f <= 50:
        return 2.0 * f
    if f < 100:
        return 2.0 * (100.0 - f)
    return (hi - p) / (hi - lo) * 100.0


def oracle_mess(points: np.ndarray, reference: np.ndarray) -> tuple[list[float], list[int]]:
    values, mods = [], []
    for i in range(points.shape[0]):
        sims = [
            oracle_similarity(float(points[i, j]), reference[:, j].tolist())
            for j in range(points.shape[1])
        ]
        if any(math.isnan(s) for s in sims):
            values.append(math.nan)
            mods.append(-1)
            continue
        best = 0
        for j, s in enumerate(sims):
            if s < sims[best]:
                best = j
        values.append(sims[best])
        mods.append(best)
    return values, mods


@pytest.mark.parametrize("seed", range(5))
def test_matches_the_literal_oracle_on_random_data(seed):
    rng = np.random.default_rng(seed)
    reference = rng.normal(size=(40, 4))
    reference[:, 2] = np.round(reference[:, 2])  # ties in the reference
    points = np.vstack([rng.normal(scale=1.8, size=(200, 4)), reference[:10]])
    points[::17, 1] = np.nan
    points[5, 3] = np.inf
    points[7, 2] = reference[:, 2].max()  # exactly at the ends
    points[8, 2] = reference[:, 2].min()
    value, mod = mess(points, reference)
    want_value, want_mod = oracle_mess(points, reference)
    np.testing.assert_allclose(value, want_value, rtol=1e-12, atol=1e-12, equal_nan=True)
    assert mod.tolist() == want_mod


def test_hand_computed_cases():
    ref = np.array([[0.0, 5.0], [1.0, 5.0], [2.0, 5.0], [3.0, 5.0], [4.0, 5.0]])
    pts = np.array(
        [
            [-2.0, 5.0],  # below the range: 100 * (-2 - 0) / 4 = -50
            [0.0, 5.0],  # at the minimum: 1 of 5 values <= 0, f = 20, similarity 40
            [2.0, 5.0],  # the median: f = 60 -> 2 * (100 - 60) = 80
            [1.5, 5.0],  # f = 40 -> 80
            [4.0, 5.0],  # at the maximum: f = 100, 100 * (4 - 4) / 4 = 0, not novel
            [5.0, 5.0],  # above: -25
            [2.0, 6.0],  # the constant variable differs: -100, variable 1
            [9.0, 6.0],  # -125 on variable 0 beats the constant variable's -100
        ]
    )
    sim = similarity(pts, ref)
    assert sim[:, 0].tolist() == [-50.0, 40.0, 80.0, 80.0, 0.0, -25.0, 80.0, -125.0]
    assert sim[:, 1].tolist() == [100.0] * 6 + [CONSTANT_MISMATCH] * 2
    value, mod = mess(pts, ref)
    assert value.tolist() == [-50.0, 40.0, 80.0, 80.0, 0.0, -25.0, -100.0, -125.0]
    assert mod.tolist() == [0, 0, 0, 0, 0, 0, 1, 0]


def test_f_counts_reference_values_equal_to_the_point():
    """dismo's findInterval: ties count as below, so f reaches 50 at the lower median."""
    ref = np.array([[1.0], [1.0], [1.0], [2.0]])
    # at 1: 3 of 4 values <= 1, f = 75, similarity 50 (a strict < would give f = 0, 0)
    assert similarity([[1.0]], ref)[0, 0] == 50.0
    assert similarity([[1.5]], ref)[0, 0] == 50.0
    assert similarity([[2.0]], ref)[0, 0] == 0.0


def test_mod_breaks_ties_on_the_first_variable():
    ref = np.array([[0.0, 0.0], [1.0, 1.0]])
    value, mod = mess([[2.0, 2.0], [0.5, 3.0]], ref)
    assert value.tolist() == [-100.0, -200.0] and mod.tolist() == [0, 1]


def test_one_dimensional_input_is_one_variable():
    value, mod = mess([0.0, 5.0], [1.0, 2.0, 3.0])
    assert value.tolist() == [-50.0, -100.0] and mod.tolist() == [0, 0]


@pytest.mark.parametrize(
    ("points", "reference", "needle"),
    [
        ([[1.0, 2.0]], [[1.0]], "same columns"),
        ([[1.0]], np.zeros((0, 1)), "no rows"),
        ([[1.0]], [[np.nan], [1.0]], "finite"),
        ([[1.0]], [["a"], ["b"]], "numeric"),
        (np.zeros((2, 2, 2)), [[1.0]], "2-D"),
    ],
)
def test_bad_input_is_refused(points, reference, needle):
    with pytest.raises(InvalidInputError, match=needle):
        mess(points, reference)


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(np.float64, st.tuples(st.integers(1, 12), st.integers(1, 3)), elements=finite),
    st.data(),
)
def test_sign_property_and_oracle(reference, data):
    d = reference.shape[1]
    points = data.draw(
        hnp.arrays(np.float64, st.tuples(st.integers(1, 10), st.just(d)), elements=finite)
    )
    value, mod = mess(points, reference)
    lo, hi = reference.min(axis=0), reference.max(axis=0)
    inside = ((points >= lo) & (points <= hi)).all(axis=1)
    assert (value[inside] >= 0).all()
    assert (value[~inside] < 0).all()
    assert (value <= 100).all()
    want_value, want_mod = oracle_mess(points, reference)
    np.testing.assert_allclose(value, want_value, rtol=1e-9, atol=1e-9)
    assert mod.tolist() == want_mod


@settings(max_examples=30, deadline=None)
@given(
    hnp.arrays(np.float64, st.tuples(st.integers(2, 15), st.just(2)), elements=finite),
    st.randoms(use_true_random=False),
)
def test_reference_order_does_not_matter(reference, rnd):
    order = list(range(reference.shape[0]))
    rnd.shuffle(order)
    points = np.vstack([reference, reference * 1.5 + 1.0])
    a, b = mess(points, reference), mess(points, reference[order])
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


# ------------------------------------------------------------------ through reserve select

HABITAT = ["lc_forest", "lc_crop", "elev_mean"]


def novel_units(n_novel: int = 4):
    """``make_units`` with the ``n_novel`` most forested candidates below the training cells'
    elevation: the model (forest drives detection) ranks them first, their habitat is novel."""
    from tests.test_select import make_units

    units = make_units()
    cand = np.flatnonzero((units["role"] == "candidate").to_numpy())
    top = cand[np.argsort(-units["lc_forest"].to_numpy()[cand], kind="stable")[:n_novel]]
    train = (units["role"] == "train").to_numpy()
    units.loc[top, "elev_mean"] = units.loc[train, "elev_mean"].min() - 10.0
    return units


def run_cli(*args: str):
    from click.testing import CliRunner

    from reserve.cli import main

    return CliRunner().invoke(main, ["select", "--model", "linear", "--n-jobs", "1", *args])


def _layers(out):
    import pyogrio

    gpkg = out / "reserve.gpkg"
    return {
        name: pyogrio.read_dataframe(gpkg, layer=name)
        for name in ("planning_units", "selected", "ranking", "run_summary")
    }


def test_columns_in_every_layer_match_the_oracle_and_stdout_names_the_fix(tmp_path):
    from tests.test_select import write_units

    units = novel_units()
    cells = write_units(tmp_path / "cells.gpkg", units)
    res = run_cli(
        "--budget",
        "6",
        "--cells",
        str(cells),
        "--out",
        str(tmp_path / "out"),
        "--map",
        str(tmp_path / "m.html"),
    )
    assert res.exit_code == 0, res.stderr
    layers = _layers(tmp_path / "out")
    pu, sel, ranking, summary = (
        layers[k] for k in ("planning_units", "selected", "ranking", "run_summary")
    )
    for frame in (pu, sel, ranking):
        assert {"mess", "novel", "mess_variable"} <= set(frame.columns)
    # every cell's MESS against the literal oracle on the training cells' habitat
    X = units[HABITAT].to_numpy(float)
    train = (units["role"] == "train").to_numpy()
    want, want_mod = oracle_mess(X, X[train])
    np.testing.assert_allclose(pu["mess"], want, rtol=1e-12)
    assert pu["mess_variable"].tolist() == [HABITAT[j] for j in want_mod]
    assert pu["novel"].tolist() == [v < 0 for v in want]
    # the other layers carry the same values for the same cells
    by_id = pu.set_index("cell_id")
    for frame in (sel, ranking):
        np.testing.assert_array_equal(frame["mess"], by_id.loc[frame["cell_id"], "mess"])
        assert frame["novel"].tolist() == by_id.loc[frame["cell_id"], "novel"].tolist()
    cand = (units["role"] == "candidate").to_numpy()
    n_cand_novel = int((pu["novel"].to_numpy() & cand).sum())
    assert n_cand_novel >= 4
    assert summary["n_candidates_novel"][0] == n_cand_novel
    assert summary["n_selected_novel"][0] == int(sel["novel"].sum()) == 4
    assert summary["n_novel_excluded"][0] == 0
    assert "novel habitat: 4 of the 6 chosen cells lie outside the surveyed habitat" in res.stdout
    assert "--exclude-novel keeps them out" in res.stdout


def test_exclude_novel_selects_no_novel_cell_and_equals_locking_them_out(tmp_path):
    from tests.test_select import write_units

    units = novel_units()
    plain = tmp_path / "plain"
    cells = write_units(tmp_path / "cells.gpkg", units)
    assert (
        run_cli(
            "--budget",
            "6",
            "--cells",
            str(cells),
            "--out",
            str(plain),
            "--map",
            str(tmp_path / "p.html"),
        ).exit_code
        == 0
    )
    pu = _layers(plain)["planning_units"]
    novel_cand = (pu["novel"] & (pu["role"] == "candidate")).to_numpy()
    # the same cells locked out by hand: the oracle of --exclude-novel
    units["is_novel"] = novel_cand
    cells = write_units(tmp_path / "cells2.gpkg", units)
    res = run_cli(
        "--budget",
        "6",
        "--cells",
        str(cells),
        "--out",
        str(tmp_path / "x"),
        "--map",
        str(tmp_path / "x.html"),
        "--exclude-novel",
    )
    assert res.exit_code == 0, res.stderr
    hand = run_cli(
        "--budget",
        "6",
        "--cells",
        str(cells),
        "--out",
        str(tmp_path / "h"),
        "--map",
        str(tmp_path / "h.html"),
        "--locked-out",
        "is_novel",
    )
    assert hand.exit_code == 0, hand.stderr
    got, oracle = _layers(tmp_path / "x"), _layers(tmp_path / "h")
    assert not got["selected"]["novel"].any() and len(got["selected"]) == 6
    assert got["selected"]["cell_id"].tolist() == oracle["selected"]["cell_id"].tolist()
    np.testing.assert_allclose(got["selected"]["score"], oracle["selected"]["score"])
    ranked = got["ranking"]["cell_id"].isin(units["cell_id"][novel_cand])
    assert not ranked.any()  # kept out of the ranking too, as locked-out cells are
    s = got["run_summary"]
    assert s["n_novel_excluded"][0] == int(novel_cand.sum()) == s["n_candidates_novel"][0]
    assert s["n_selected_novel"][0] == 0 and bool(s["exclude_novel"][0])
    assert json.loads(s["config"][0])["exclude_novel"] is True
    assert f"{int(novel_cand.sum())} candidate cells outside the surveyed habitat kept out" in (
        res.stdout
    )
    assert "novel candidate cells kept out" in res.stderr


@pytest.mark.parametrize(("method", "model"), [("ttk", "linear"), ("ttk", "auto"), ("svm", "auto")])
def test_the_default_selection_is_that_of_a_run_without_novelty(
    tmp_path, monkeypatch, method, model
):
    from reserve import design
    from reserve.select import select_reserve
    from tests.test_select import write_units

    cells = write_units(tmp_path / "cells.gpkg", novel_units())
    kw = {"method": method, "model": model, "n_jobs": 1}
    with_feature = select_reserve(6, cells, **kw)
    assert with_feature.summary["n_selected_novel"] > 0  # novel cells stay selectable

    def no_novelty(X, features, train):
        return np.full(len(X), np.nan), np.full(len(X), "", dtype=object)

    monkeypatch.setattr(design, "habitat_novelty", no_novelty)
    without = select_reserve(6, cells, **kw)
    assert without.summary["n_candidates_novel"] == 0
    a, b = with_feature.planning_units, without.planning_units
    assert with_feature.selected["cell_id"].tolist() == without.selected["cell_id"].tolist()
    np.testing.assert_array_equal(a["score"], b["score"])
    np.testing.assert_array_equal(a["rank"], b["rank"])


def test_effort_covariates_are_not_habitat():
    from reserve.design import habitat_novelty

    X = np.array([[0.0, 1.0], [1.0, 2.0], [2.0, 3.0], [1.0, 50.0]])
    train = np.array([True, True, True, False])
    value, name = habitat_novelty(X, ["lc_forest", "effort__log_n_checklists"], train)
    assert value[3] > 0 and name[3] == "lc_forest"  # effort far outside: not novel habitat
    value, name = habitat_novelty(X, ["lc_forest", "n_hedgerows"], train)
    assert value[3] < 0 and name[3] == "n_hedgerows"  # the same column as habitat: novel


def _refused(res, code: int, needle: str, out) -> None:
    from tests.conftest import assert_one_line_error

    progress = [ln for ln in res.stderr.splitlines() if not ln.startswith("[")]
    assert_one_line_error("\n".join(progress), res.exit_code, code, needle)
    assert res.stdout == "" and not (out / "reserve.gpkg").exists()


@pytest.mark.parametrize(
    ("n_novel", "budget", "needle"),
    [
        (None, "3", "exclude_novel keeps out all"),
        ("few", "5", "pass --budget <= 2 or drop --exclude-novel"),
    ],
)
def test_too_few_cells_left_is_refused_with_the_fix(tmp_path, n_novel, budget, needle):
    from tests.test_select import make_units, write_units

    units = make_units()
    cand = np.flatnonzero((units["role"] == "candidate").to_numpy())
    novel = cand if n_novel is None else cand[3:]
    units.loc[novel, "elev_mean"] = 1e4  # far above every training cell
    cells = write_units(tmp_path / "cells.gpkg", units)
    res = run_cli(
        "--budget",
        budget,
        "--cells",
        str(cells),
        "--out",
        str(tmp_path / "out"),
        "--map",
        str(tmp_path / "m.html"),
        "--exclude-novel",
    )
    _refused(res, 2, needle, tmp_path / "out")
    assert not (tmp_path / "m.html").exists()
    # without the option the same cells are selectable
    ok = run_cli(
        "--budget",
        budget,
        "--cells",
        str(cells),
        "--map",
        str(tmp_path / "m.html"),
        "--out",
        str(tmp_path / "out"),
    )
    assert ok.exit_code == 0, ok.stderr


@pytest.mark.parametrize("value", ['"yes"', "1", "[true]"])
def test_a_non_boolean_in_the_config_is_one_error_line(tmp_path, value):
    from tests.test_select import write_units

    cells = write_units(tmp_path / "cells.gpkg")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"exclude_novel = {value}\n")
    res = run_cli(
        "--budget",
        "3",
        "--cells",
        str(cells),
        "--out",
        str(tmp_path / "out"),
        "--config",
        str(cfg),
        "--exclude-novel",
    )
    _refused(
        res,
        2,
        "key 'exclude_novel' is invalid (exclude_novel must be true or false",
        tmp_path / "out",
    )


def test_a_non_boolean_from_python_is_refused(tmp_path):
    from reserve.select import select_reserve
    from tests.test_select import write_units

    cells = write_units(tmp_path / "cells.gpkg")
    with pytest.raises(InvalidInputError, match="exclude_novel must be true or false"):
        select_reserve(3, cells, exclude_novel="yes")


def test_a_point_far_outside_a_subnormal_range_is_novel_not_missing():
    value, mod = mess(np.array([[1.0], [0.0]]), np.array([[2.22507386e-313], [0.0]]))
    assert value[0] == -np.inf and mod.tolist() == [0, 0]
    assert value[1] == 100.0  # half the reference at or below it
