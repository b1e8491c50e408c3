"""Tests for reserve.select: the sequence, an independent re-scorer, determinism, bad input."""

from __future__ import annotations

import tempfile
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reserve.config import SELECT_METHODS
from reserve.errors import DataFileError, InvalidInputError, OutputExistsError
from reserve.select import load_config, read_planning_units, resolve_config
from reserve.select import select_reserve as run_select

FEATURES = ["lc_forest", "lc_crop", "elev_mean"]


def select_reserve(*args, **kwargs):
    """``reserve.select.select_reserve`` fitting the linear model unless a test names another.

    These tests are about the sequence (locks, costs, species, outputs, the bootstrap), not the
    model; the default model (``auto``) runs a cross-validation of 54 fits, tested where it is
    the subject (``model="auto"`` below, and tests/test_auto.py).
    """
    kwargs.setdefault("model", "linear")
    return run_select(*args, **kwargs)


def make_units(n_side: int = 12, seed: int = 0, cell: float = 3000.0) -> gpd.GeoDataFrame:
    """A small planning_units table like ``reserve ingest`` writes (EPSG:5070, 3 km squares).

    Detection follows forest cover; about 35 % of cells are training cells, 55 % candidates,
    10 % other (with extreme feature values, so standardising on the wrong rows shows).
    """
    rng = np.random.default_rng(seed)
    n = n_side * n_side
    r, c = np.divmod(np.arange(n), n_side)
    x0 = 1_100_000 + c * cell
    y0 = 1_100_000 + r * cell
    forest = rng.uniform(0, 1, n)
    crop = rng.uniform(0, 1 - forest)
    elev = rng.normal(200, 50, n)
    u = rng.uniform(size=n)
    role = np.where(u < 0.35, "train", np.where(u < 0.9, "candidate", "other"))
    elev[role == "other"] += 5000.0
    p = 1 / (1 + np.exp(-(5 * forest - 2 * crop - 2)))
    label = np.where(role == "train", (rng.uniform(size=n) < p).astype(int), -1)
    table = pd.DataFrame(
        {
            "cell_id": np.arange(n, dtype=np.int64),
            "role": role,
            "label": label,
            "n_checklists": np.where(role == "train", 3, 0),
            "n_detections": np.where(label == 1, 1, 0),
            "effort_hours": 1.0,
            "effort_km": 0.5,
            "public_fraction": np.where(role == "train", 1.0, 0.0),
            "locked_out": np.zeros(n, bool),
            "lc_forest": forest,
            "lc_crop": crop,
            "elev_mean": elev,
        }
    )
    return gpd.GeoDataFrame(table, geometry=shapely.box(x0, y0, x0 + cell, y0 + cell), crs=5070)


def write_units(path: Path, units: gpd.GeoDataFrame | None = None, **kw: object) -> Path:
    units = make_units(**kw) if units is None else units  # type: ignore[arg-type]
    pyogrio.write_dataframe(units, path, layer="planning_units", driver="GPKG")
    return path


@pytest.fixture
def cells(tmp_path):
    return write_units(tmp_path / "cells.gpkg")


def rescore(units: gpd.GeoDataFrame, coef: np.ndarray, intercept: float) -> np.ndarray:
    """Independent re-scorer: standardise on train + candidate rows, then X @ w + b."""
    fit = units["role"].isin(["train", "candidate"]) & ~units["locked_out"]
    X = units[FEATURES].to_numpy(float)
    mu, sd = X[fit].mean(axis=0), X[fit].std(axis=0)
    return (X - mu) / sd @ coef + intercept


def test_selects_exactly_k_candidates_ranked(cells):
    res = select_reserve(7, cells)
    pu, sel = res.planning_units, res.selected
    assert len(sel) == 7 and sel["rank"].tolist() == list(range(1, 8))
    assert pu["selected"].sum() == 7
    assert (pu.loc[pu["selected"], "role"] == "candidate").all()
    cand = pu["role"] == "candidate"
    assert sorted(pu.loc[cand, "rank"]) == list(range(1, cand.sum() + 1))
    assert (pu.loc[~cand, "rank"] == 0).all()
    # the selected are the k best-scoring candidates, in score order
    best = pu[cand].sort_values("score", ascending=False).head(7)
    assert set(best["cell_id"]) == set(sel["cell_id"])
    assert np.all(np.diff(sel["score"].to_numpy()) <= 1e-12)
    assert res.summary["n_selected"] == 7 and res.summary["budget"] == 7
    assert sel.crs == pu.crs == "EPSG:5070"


def test_scores_match_an_independent_rescorer(cells):
    res = select_reserve(5, cells, model="linear")
    units = read_planning_units(cells)
    expect = rescore(units, res.estimator.coef_, float(res.estimator.intercept_))
    np.testing.assert_allclose(res.planning_units["score"].to_numpy(), expect, atol=1e-9)


def test_auto_scores_match_the_fitted_map_on_independently_standardised_features(cells):
    res = select_reserve(5, cells, model="auto")
    units = read_planning_units(cells)
    fit = units["role"].isin(["train", "candidate"]) & ~units["locked_out"]
    X = units[FEATURES].to_numpy(float)
    Z = (X - X[fit].mean(axis=0)) / X[fit].std(axis=0)
    expect = res.estimator.best_estimator_.decision_function(Z)
    np.testing.assert_allclose(res.planning_units["score"].to_numpy(), expect, atol=1e-9)
    assert res.summary["model"] == "auto"
    assert res.summary["model_fitted"] == "+".join(m for m, _, _ in res.estimator.members_)
    # the objective recorded is the estimator's
    assert res.summary["objective"] == pytest.approx(res.estimator.objective_)


def test_main_features_are_those_that_lift_the_selected_scores(cells):
    res = select_reserve(6, cells, model="linear")
    units = read_planning_units(cells)
    fit = units["role"].isin(["train", "candidate"]) & ~units["locked_out"]
    X = units[FEATURES].to_numpy(float)
    z = (X - X[fit].mean(axis=0)) / X[fit].std(axis=0)
    chosen = units["cell_id"].isin(res.selected["cell_id"]).to_numpy()
    expect = z[chosen].mean(axis=0) * res.estimator.coef_
    np.testing.assert_allclose(res.contributions, expect, atol=1e-12)
    # contributions add up to the selected cells' mean score above the intercept
    mean_score = res.selected["score"].mean()
    assert res.contributions.sum() == pytest.approx(mean_score - res.estimator.intercept_)
    order = [FEATURES[j] for j in np.argsort(-np.abs(expect), kind="stable")]
    assert res.main_features(2) == order[:2] and res.main_features() == order
    assert res.summary["main_features"] == ", ".join(order)


def test_main_features_skip_a_heavy_weight_the_selection_does_not_use(tmp_path):
    # 'rare' separates 10 detected from 10 undetected training cells and gets the largest
    # weight, but every candidate (so every selected cell) sits at 0 on it: ranking by
    # |weight| alone would show a column that does not tell the selected cells apart
    units = make_units(seed=1)
    units["rare"] = 0.0
    train = np.flatnonzero((units["role"] == "train").to_numpy())
    positive = units.loc[train, "label"].to_numpy() == 1
    units.loc[train[positive][:10], "rare"] = 1.0
    units.loc[train[~positive][:10], "rare"] = -1.0
    res = select_reserve(5, write_units(tmp_path / "c.gpkg", units), model="linear")
    j = res.feature_names.index("rare")
    assert np.argmax(np.abs(res.estimator.coef_)) == j  # the old rule would pick it
    assert abs(res.contributions[j]) < 1e-9
    assert "rare" not in res.main_features(3)


def test_other_and_locked_out_cells_are_never_fitted_or_selected(tmp_path):
    units = make_units()
    cand = np.flatnonzero(units["role"] == "candidate")
    # lock out the best-looking candidates: full forest
    units.loc[cand[:10], ["lc_forest", "lc_crop"]] = [1.0, 0.0]
    units.loc[cand[:10], "locked_out"] = True
    path = write_units(tmp_path / "c.gpkg", units)
    res = select_reserve(10, path)
    assert not set(res.selected["cell_id"]) & set(units.loc[cand[:10], "cell_id"])
    n_fit = int((units["role"].isin(["train", "candidate"]) & ~units["locked_out"]).sum())
    assert res.summary["n_train"] + res.summary["n_candidates"] == n_fit


def test_same_seed_same_cells(cells):
    a = select_reserve(6, cells, seed=3)
    b = select_reserve(6, cells, seed=3)
    pd.testing.assert_frame_equal(a.selected, b.selected)


def test_cross_validated_C_is_recorded(cells):
    res = select_reserve(5, cells, method="svm", C="cv")
    assert res.summary["c_source"] == "cv"
    assert res.summary["c"] in (0.01, 0.1, 1.0, 10.0, 100.0)
    assert res.cv is not None and res.cv.best_C == res.summary["c"]


@pytest.mark.parametrize("method", SELECT_METHODS)
def test_every_method_selects_k(tmp_path, method):
    path = write_units(tmp_path / "c.gpkg", n_side=7)
    res = select_reserve(3, path, method=method, time_limit=10.0)
    assert len(res.selected) == 3 and res.summary["method"] == method
    if method in ("ttk-mip", "ttk-bnb"):
        assert np.isfinite(res.summary["bound"])


def test_both_exact_solvers_prove_the_same_optimum(tmp_path):
    # SCIP and the package's branch and bound are independent exact solvers of one model.
    path = write_units(tmp_path / "c.gpkg", n_side=7)
    scip = select_reserve(3, path, method="ttk-mip", time_limit=30.0)
    bnb = select_reserve(3, path, method="ttk-bnb", time_limit=30.0)
    assert scip.summary["solver_status"] == bnb.summary["solver_status"] == "optimal"
    assert bnb.summary["objective"] == pytest.approx(scip.summary["objective"], rel=1e-6)
    assert bnb.summary["bound"] <= bnb.summary["objective"]


def test_writes_outputs_only_when_out_is_given(cells, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    select_reserve(4, cells)
    assert not (tmp_path / "results").exists() and not (tmp_path / "maps").exists()
    res = select_reserve(4, cells, out=tmp_path / "o")
    assert res.gpkg_path == tmp_path / "o" / "reserve.gpkg" and res.gpkg_path.is_file()
    # the map goes with the GeoPackage into out (issue 17 item 3)
    assert res.map_path == tmp_path / "o" / "cells_ttk_k4.html" and res.map_path.is_file()
    assert not (tmp_path / "maps").exists()
    with pytest.raises(OutputExistsError, match="--overwrite"):
        select_reserve(4, cells, out=tmp_path / "o")
    select_reserve(4, cells, out=tmp_path / "o", overwrite=True)


# ---------------------------------------------------------------------- bad input


@pytest.mark.parametrize("budget", [0, -3, 2.5, True, "7"])
def test_bad_budget(cells, budget):
    with pytest.raises(InvalidInputError, match="budget"):
        select_reserve(budget, cells)


def test_budget_above_candidates(cells):
    n = int((read_planning_units(cells)["role"] == "candidate").sum())
    for budget in (n, n + 1):
        with pytest.raises(InvalidInputError, match=f"the {n} candidate cells"):
            select_reserve(budget, cells)
    assert len(select_reserve(n - 1, cells).selected) == n - 1


def test_unknown_method(cells):
    with pytest.raises(InvalidInputError, match="method='ttk2' is unknown"):
        select_reserve(3, cells, method="ttk2")


def _variant(tmp_path, change):
    units = make_units()
    units = change(units)
    return write_units(tmp_path / "v.gpkg", units)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda u: u.drop(columns="role"), "lacks the columns \\['role'\\]"),
        (lambda u: u.set_crs(None, allow_override=True), "has no CRS"),
        (lambda u: u.assign(role=np.where(u.role == "train", "other", u.role)), "no training"),
        (lambda u: u.assign(label=np.where(u.role == "train", 0, u.label)), "every training"),
        (lambda u: u.assign(role="train", label=1), "every training"),
        (lambda u: u.assign(role=np.where(u.role == "candidate", "other", u.role)), "no candid"),
        (lambda u: u.drop(columns=FEATURES), "no numeric feature"),
    ],
)
def test_bad_cells_content(tmp_path, change, message):
    path = _variant(tmp_path, change)
    with pytest.raises(DataFileError, match=message):
        select_reserve(3, path)


def test_nan_features_in_fitted_cells_are_refused_but_allowed_elsewhere(tmp_path):
    def nan_in(role):
        def change(u):
            u.loc[np.flatnonzero(u.role == role)[0], "lc_crop"] = np.nan
            return u

        return change

    with pytest.raises(DataFileError, match=r"NaN or infinite features.*lc_crop"):
        select_reserve(3, _variant(tmp_path, nan_in("candidate")))
    res = select_reserve(3, _variant(tmp_path, nan_in("other")))
    assert res.planning_units["score"].isna().sum() == 1


def test_bad_cells_files(tmp_path):
    with pytest.raises(DataFileError, match="does not exist"):
        select_reserve(3, tmp_path / "nope.gpkg")
    text = tmp_path / "t.gpkg"
    text.write_text("cell_id,role\n1,train\n")
    with pytest.raises(DataFileError, match="is not a GeoPackage"):
        select_reserve(3, text)
    shp = tmp_path / "cells.geojson"
    make_units().to_file(shp)
    with pytest.raises(DataFileError, match="is not a GeoPackage"):
        select_reserve(3, shp)
    other = tmp_path / "o.gpkg"
    pyogrio.write_dataframe(make_units(), other, layer="cells", driver="GPKG")
    with pytest.raises(DataFileError, match="no 'planning_units' layer"):
        select_reserve(3, other)


def test_no_output_on_bad_input(cells, tmp_path):
    out = tmp_path / "o"
    with pytest.raises(InvalidInputError):
        select_reserve(10_000, cells, out=out, map=tmp_path / "m.html")
    assert not (out / "reserve.gpkg").exists() and not (tmp_path / "m.html").exists()


def test_unwritable_output(cells, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DataFileError, match="is a file"):
        select_reserve(3, cells, out=blocker)
    with pytest.raises(DataFileError, match="cannot be written"):  # nothing is created
        select_reserve(3, cells, out=blocker / "sub")


# ---------------------------------------------------------------------- configuration


def test_config_merges_flags_over_file_over_defaults(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('budget = 12\nmethod = "svm"\nC = 0.5\nseed = 4\n')
    eff = resolve_config({"budget": "20", "seed": None}, cfg)
    assert eff["budget"] == 20 and eff["method"] == "svm" and eff["C"] == 0.5
    assert eff["seed"] == 4 and eff["out"] == "results"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("budget = ", "not valid TOML"),
        ("budgit = 3", "unknown keys \\['budgit'\\]"),
        ('budget = "ten"', "budget must be an integer"),
        ("budget = 3\nC = -1", "C must be a positive number"),
        ("budget = 3\noverwrite = 1", "overwrite must be true or false"),
    ],
)
def test_bad_config(tmp_path, text, message):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    with pytest.raises(InvalidInputError, match=message):
        resolve_config({}, cfg)


def test_missing_config_and_budget(tmp_path):
    with pytest.raises(InvalidInputError, match="cannot be read"):
        load_config(tmp_path / "none.toml")
    with pytest.raises(InvalidInputError, match="budget is required"):
        resolve_config({})


# --------------------------------------------------------------------------- locked cells


def lock_units(n_in: int, n_out: int, seed: int = 0) -> gpd.GeoDataFrame:
    """make_units with boolean columns 'mine' (n_in candidates) and 'excl' (n_out others)."""
    units = make_units()
    cand = np.flatnonzero((units["role"] == "candidate").to_numpy())
    pick = np.random.default_rng(seed).permutation(cand)
    units["mine"] = np.isin(np.arange(len(units)), pick[:n_in])
    units["excl"] = np.isin(np.arange(len(units)), pick[n_in : n_in + n_out])
    return units


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_in=st.integers(0, 4),
    n_out=st.integers(0, 20),
    extra=st.integers(0, 5),
    seed=st.integers(0, 10_000),
)
def test_locked_cells_are_always_respected(n_in, n_out, extra, seed):
    budget = max(n_in + extra, 1)
    units = lock_units(n_in, n_out, seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_units(Path(tmp) / "cells.gpkg", units)
        # a property of the locks, not of the model: the fast linear model keeps it cheap
        res = select_reserve(budget, path, locked_in="mine", locked_out="excl", model="linear")
    pu = res.planning_units
    mine, excl = units["mine"].to_numpy(), units["excl"].to_numpy()
    chosen = pu["selected"].to_numpy()
    assert chosen.sum() == budget and len(res.selected) == budget
    assert chosen[mine].all() and not chosen[excl].any()
    assert (pu["locked_in"].to_numpy() == mine).all() and pu["locked_out"].to_numpy()[excl].all()
    # locked-in cells come first in the selection
    assert res.selected["rank"].tolist() == list(range(1, budget + 1))
    assert set(res.selected["cell_id"][:n_in]) == set(units["cell_id"][mine])
    s = res.summary
    assert (s["n_locked_in"], s["n_locked_out"], s["effective_budget"]) == (
        n_in,
        n_out,
        budget - n_in,
    )


def test_locked_in_cells_leave_the_fit(tmp_path):
    # the fit without the locked-in cells (marked 'other') picks the same remaining cells
    units = lock_units(2, 0)
    path = write_units(tmp_path / "a.gpkg", units)
    res = select_reserve(6, path, locked_in="mine")
    other = units.copy()
    other.loc[other["mine"], "role"] = "other"
    ref = select_reserve(4, write_units(tmp_path / "b.gpkg", other))
    assert list(res.selected["cell_id"][2:]) == list(ref.selected["cell_id"])
    assert res.selected["locked_in"].tolist() == [True, True, False, False, False, False]


def test_locks_from_polygon_files(tmp_path, cells):
    units = read_planning_units(cells)
    cand = units[units["role"] == "candidate"]
    # more than half of two candidate cells, and a sliver of a third (not locked)
    polys = [
        cand.geometry.iloc[0].buffer(-100),
        cand.geometry.iloc[1].buffer(-100),
        cand.geometry.iloc[2].buffer(-1400),
    ]
    gpd.GeoDataFrame(geometry=polys[:2], crs=5070).to_crs(4326).to_file(tmp_path / "in.gpkg")
    gpd.GeoDataFrame(geometry=[polys[2]], crs=5070).to_file(tmp_path / "out.geojson")
    res = select_reserve(5, cells, locked_in=tmp_path / "in.gpkg", out=tmp_path / "o", map=False)
    got = res.planning_units.loc[res.planning_units["locked_in"], "cell_id"]
    assert sorted(got) == sorted(cand["cell_id"].iloc[:2])
    assert set(got) <= set(res.selected["cell_id"])
    layer = pyogrio.read_dataframe(res.gpkg_path, layer="selected")
    assert layer["locked_in"].tolist() == [True, True, False, False, False]
    # the sliver (a 200 m square inside a 3 km cell) is too little to lock any cell
    with pytest.raises(DataFileError, match="covers no cell by more than half"):
        select_reserve(5, cells, locked_out=tmp_path / "out.geojson")


def test_budget_equal_to_locked_in_selects_only_them(tmp_path):
    path = write_units(tmp_path / "cells.gpkg", lock_units(3, 0))
    res = select_reserve(3, path, locked_in="mine", bootstrap=2)
    assert res.selected["locked_in"].all() and len(res.selected) == 3
    assert res.summary["effective_budget"] == 0
    freq = res.planning_units["selection_frequency"].to_numpy()
    assert set(freq[res.planning_units["locked_in"]]) == {1.0}
    assert freq[~res.planning_units["locked_in"]].sum() == 0


def _bad_lock_cases(tmp_path: Path) -> list[tuple[dict, type, str]]:
    far = tmp_path / "far.gpkg"
    gpd.GeoDataFrame(geometry=[shapely.box(0, 0, 1, 1)], crs=4326).to_file(far)
    nocrs = tmp_path / "nocrs.shp"
    gpd.GeoDataFrame(geometry=[shapely.box(0, 0, 1, 1)]).to_file(nocrs)
    return [
        ({"locked_in": "mine", "locked_out": "mine"}, InvalidInputError, "cannot be both"),
        ({"locked_in": "train_flag"}, InvalidInputError, "not candidates"),
        ({"locked_in": "mine", "budget": 2}, InvalidInputError, "more than budget=2"),
        ({"locked_in": "role"}, InvalidInputError, "not boolean"),
        ({"locked_in": "nope"}, InvalidInputError, "neither a column"),
        ({"locked_out": far}, DataFileError, "touches no cell"),
        ({"locked_in": nocrs}, DataFileError, "has no CRS"),
    ]


def test_bad_locks_are_refused_and_nothing_is_written(tmp_path):
    units = lock_units(3, 0)
    units["train_flag"] = (units["role"] == "train").to_numpy()
    path = write_units(tmp_path / "cells.gpkg", units)
    for kw, error, message in _bad_lock_cases(tmp_path):
        kw = {"budget": 5, **kw}
        with pytest.raises(error, match=message) as info:
            select_reserve(kw.pop("budget"), path, out=tmp_path / "out", **kw)
        assert "\n" not in str(info.value)
        assert not (tmp_path / "out" / "reserve.gpkg").exists()


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_frequencies_are_deterministic_and_independent_of_n_jobs(cells):
    a = select_reserve(5, cells, bootstrap=6, seed=3)
    b = select_reserve(5, cells, bootstrap=6, seed=3)
    c = select_reserve(5, cells, bootstrap=6, seed=3, n_jobs=2)
    fa = a.planning_units["selection_frequency"].to_numpy()
    np.testing.assert_array_equal(fa, b.planning_units["selection_frequency"].to_numpy())
    np.testing.assert_array_equal(fa, c.planning_units["selection_frequency"].to_numpy())
    # each refit selects exactly k candidates: frequencies are multiples of 1/6 summing to k
    cand = (a.planning_units["role"] == "candidate").to_numpy()
    assert fa[~cand].sum() == 0 and fa.sum() == pytest.approx(5)
    np.testing.assert_allclose(fa * 6, np.round(fa * 6))
    assert a.ranking["selection_frequency"].sum() == pytest.approx(5)
    assert "selection_frequency" in a.selected.columns
    assert "selection_frequency" not in select_reserve(5, cells).selected.columns


def test_bootstrap_of_the_default_model_is_independent_of_n_jobs(cells):
    # AutoTTK runs its own cross-validation (in parallel with n_jobs) inside every refit
    a = select_reserve(5, cells, bootstrap=2, seed=3, model="auto")
    c = select_reserve(5, cells, bootstrap=2, seed=3, model="auto", n_jobs=2)
    fa = a.planning_units["selection_frequency"].to_numpy()
    np.testing.assert_array_equal(fa, c.planning_units["selection_frequency"].to_numpy())
    assert fa.sum() == pytest.approx(5)
    np.testing.assert_allclose(fa * 2, np.round(fa * 2))


def test_bootstrap_resamples_differ_by_seed(cells):
    # an oracle for the resampling itself: the seed changes the replicates
    fa = select_reserve(5, cells, bootstrap=6, seed=1).planning_units["selection_frequency"]
    fb = select_reserve(5, cells, bootstrap=6, seed=2).planning_units["selection_frequency"]
    assert not np.array_equal(fa.to_numpy(), fb.to_numpy())


# --------------------------------------------------------------------------- money budgets


def with_cost(units: gpd.GeoDataFrame, seed: int = 0, equal: float | None = None):
    """``units`` plus a ``price`` column (never a feature): lognormal, or all ``equal``."""
    units = units.copy()
    rng = np.random.default_rng(seed)
    units["price"] = equal if equal is not None else np.round(rng.lognormal(0, 0.6, len(units)), 3)
    return units


@pytest.mark.parametrize("price", [1.0, 2.5])
def test_equal_costs_reproduce_the_cell_budget(tmp_path, price):
    path = write_units(tmp_path / "c.gpkg", with_cost(make_units(), equal=price))
    by_cells = select_reserve(7, write_units(tmp_path / "plain.gpkg", make_units()))
    by_money = select_reserve(7 * price, path, cost_column="price")
    assert by_money.selected["cell_id"].tolist() == by_cells.selected["cell_id"].tolist()
    assert by_money.summary["total_cost"] == pytest.approx(7 * price)
    assert by_money.summary["budget_unit"] == "cost (price)"
    np.testing.assert_array_equal(
        by_money.estimator.candidate_scores_, by_cells.estimator.candidate_scores_
    )
    # the cost column is not a feature
    assert "price" not in by_money.feature_names


@pytest.mark.parametrize("method", SELECT_METHODS)
def test_money_budget_is_respected_by_every_method(tmp_path, method):
    units = with_cost(make_units(n_side=9, seed=3), seed=3)
    path = write_units(tmp_path / "c.gpkg", units)
    res = select_reserve(6.0, path, cost_column="price", method=method, time_limit=20)
    sel = res.selected
    assert 0 < len(sel) and sel["price"].sum() <= 6.0 + 1e-9
    assert res.summary["total_cost"] == pytest.approx(sel["price"].sum())
    # budget_select's walk: every candidate scoring above the lowest selected one either is
    # selected or would not have fitted in what was left when the walk reached it
    pu = res.planning_units
    cand = pu[(pu["role"] == "candidate") & (pu["rank"] > 0)].sort_values(
        ["score", "cell_id"], ascending=[False, True]
    )
    left = 6.0
    for row in cand.itertuples():
        if row.price <= left * (1 + 1e-12):
            assert row.selected, f"cell {row.cell_id} fits but was skipped"
            left -= row.price
        else:
            assert not row.selected


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 10_000), budget=st.floats(1.0, 12.0), n_in=st.integers(0, 3))
def test_money_budget_and_locks_always_respected(seed, budget, n_in):
    units = with_cost(make_units(n_side=8, seed=seed), seed=seed)
    cand = np.flatnonzero(units["role"].to_numpy() == "candidate")
    rng = np.random.default_rng(seed)
    chosen = rng.choice(cand, size=n_in + 2, replace=False)
    units["owned"] = False
    units.loc[chosen[:n_in], "owned"] = True
    units["urban"] = False
    units.loc[chosen[n_in:], "urban"] = True
    cost_in = float(units.loc[units["owned"], "price"].sum())
    budget = budget + cost_in
    with tempfile.TemporaryDirectory() as tmp:
        path = write_units(Path(tmp) / "c.gpkg", units)
        res = select_reserve(
            budget, path, cost_column="price", locked_in="owned", model="linear", locked_out="urban"
        )
    pu = res.planning_units
    assert pu.loc[pu["selected"], "price"].sum() <= budget * (1 + 1e-12)
    assert pu.loc[pu["owned"], "selected"].all()
    assert not pu.loc[pu["urban"], "selected"].any()
    assert res.summary["total_cost"] == pytest.approx(pu.loc[pu["selected"], "price"].sum())


def test_money_ranking_layer_prices_the_runners_up(tmp_path):
    path = write_units(tmp_path / "c.gpkg", with_cost(make_units()))
    res = select_reserve(5.0, path, cost_column="price", out=tmp_path / "out", map=False)
    rk = res.ranking
    assert rk["rank"].tolist() == list(range(1, len(rk) + 1))
    np.testing.assert_allclose(rk["cumulative_cost"], np.cumsum(rk["price"]))
    layers = [str(n) for n in pyogrio.list_layers(res.gpkg_path)[:, 0]]
    assert "ranking" in layers
    back = pyogrio.read_dataframe(res.gpkg_path, layer="ranking")
    assert "cumulative_cost" in back.columns
    summary = pyogrio.read_dataframe(res.gpkg_path, layer="run_summary")
    assert summary["budget_unit"].iloc[0] == "cost (price)"


@pytest.mark.parametrize(
    "change, budget, message",
    [
        (lambda u: u.drop(columns="price"), 5.0, "not a column of planning_units"),
        (lambda u: u.assign(price="cheap"), 5.0, "not numeric"),
        (
            lambda u: u.assign(price=np.where(u["role"] == "candidate", 0.0, 1.0)),
            5.0,
            "zero or negative",
        ),
        (lambda u: u.assign(price=np.where(u.index == 3, np.nan, 1.0)), 5.0, "missing/NaN"),
        (lambda u: u.assign(price=-1.0), 5.0, "zero or negative"),
        (lambda u: u, 0.0, "positive total cost"),
        (lambda u: u, float("nan"), "positive total cost"),
        (lambda u: u.assign(price=1.0), 1e6, "buys every candidate"),
        (lambda u: u.assign(price=10.0), 5.0, "buys no candidate"),
    ],
)
def test_bad_costs_are_refused_and_nothing_is_written(tmp_path, change, budget, message):
    units = with_cost(make_units())
    units = units.assign(role=np.where(units.index == 3, "candidate", units["role"]))
    path = write_units(tmp_path / "c.gpkg", change(units))
    out = tmp_path / "out"
    with pytest.raises(InvalidInputError, match=message):
        select_reserve(budget, path, cost_column="price", out=out)
    assert not (out / "reserve.gpkg").exists()


def test_locked_in_costs_above_the_budget_are_refused(tmp_path):
    units = with_cost(make_units(), equal=2.0)
    cand = np.flatnonzero(units["role"].to_numpy() == "candidate")[:3]
    units["owned"] = False
    units.loc[cand, "owned"] = True
    path = write_units(tmp_path / "c.gpkg", units)
    with pytest.raises(InvalidInputError, match="costing 6"):
        select_reserve(5.0, path, cost_column="price", locked_in="owned")
    # exactly their cost: only they are selected
    res = select_reserve(6.0, path, cost_column="price", locked_in="owned")
    assert sorted(res.selected["cell_id"]) == sorted(units.loc[cand, "cell_id"])


def test_cost_column_in_config_makes_the_budget_money(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('budget = 12.5\ncost_column = "price"\n')
    assert resolve_config({}, cfg)["budget"] == 12.5
    with pytest.raises(InvalidInputError, match="must be an integer"):
        resolve_config({"budget": "12.5"})


# --------------------------------------------------------------------------- several species


def two_species(seed: int = 0) -> gpd.GeoDataFrame:
    """make_units plus label__/n_detections__ columns for a forest and a cropland species."""
    units = make_units(seed=seed)
    rng = np.random.default_rng(seed + 100)
    train = units["role"].to_numpy() == "train"
    p_crop = 1 / (1 + np.exp(-(6 * units["lc_crop"].to_numpy() - 2)))
    crop_label = np.where(train, (rng.uniform(size=len(units)) < p_crop).astype(int), -1)
    units["label__forest_bird"] = units["label"]
    units["n_detections__forest_bird"] = units["n_detections"]
    units["label__crop_bird"] = crop_label
    units["n_detections__crop_bird"] = np.where(crop_label == 1, 1, 0)
    return units


def test_two_species_share_the_cells(tmp_path):
    path = write_units(tmp_path / "c.gpkg", two_species())
    res = select_reserve(8, path, species=["Forest Bird", "Crop Bird"], joint_fit=True)
    pu, sel, est = res.planning_units, res.selected, res.estimator
    assert type(est).__name__ == "MultiTTK" and est.coef_.shape == (2, len(FEATURES))
    assert len(sel) == 8 and pu["selected"].sum() == 8
    # per-species columns are never features; the scores are recomputed independently
    assert res.feature_names == FEATURES
    for j, slug in enumerate(("forest_bird", "crop_bird")):
        np.testing.assert_allclose(
            pu[f"score__{slug}"], rescore(pu, est.coef_[j], est.intercept_[j]), atol=1e-9
        )
        assert 0.0 <= res.summary[f"expected_precision__{slug}"] <= 1.0
    # the cell score is the max over species, and the selection is its top 8
    np.testing.assert_allclose(
        pu["score"], pu[["score__forest_bird", "score__crop_bird"]].max(axis=1)
    )
    cand = pu[pu["role"] == "candidate"].sort_values(["score", "cell_id"], ascending=[False, True])
    assert set(sel["cell_id"]) == set(cand["cell_id"][:8])
    assert res.summary["species"] == "Forest Bird, Crop Bird"
    again = select_reserve(8, path, species=["Forest Bird", "Crop Bird"], joint_fit=True)
    assert again.selected["cell_id"].tolist() == sel["cell_id"].tolist()


def test_two_species_sum_of_svms_ranks_by_the_sum(tmp_path):
    path = write_units(tmp_path / "c.gpkg", two_species())
    res = select_reserve(
        8, path, species=["Forest Bird", "Crop Bird"], method="svm", joint_fit=True
    )
    pu = res.planning_units
    assert type(res.estimator).__name__ == "MultiSVM"
    np.testing.assert_allclose(pu["score"], pu["score__forest_bird"] + pu["score__crop_bird"])
    cand = pu[pu["role"] == "candidate"].sort_values(["score", "cell_id"], ascending=[False, True])
    assert res.selected["cell_id"].tolist() == cand["cell_id"][:8].tolist()


def test_one_species_reads_its_own_label_column(tmp_path):
    units = two_species()
    path = write_units(tmp_path / "c.gpkg", units)
    by_name = select_reserve(6, path, species="Crop Bird")
    plain = write_units(tmp_path / "p.gpkg", units.assign(label=units["label__crop_bird"]))
    by_label = select_reserve(6, plain)
    assert by_name.selected["cell_id"].tolist() == by_label.selected["cell_id"].tolist()
    assert by_name.summary["n_train_positive"] == int((units["label__crop_bird"] == 1).sum())


@pytest.mark.parametrize(
    "kw, error, message",
    [
        ({"species": ["Forest Bird", "Owl"]}, InvalidInputError, "species in the file"),
        ({"species": ["Forest Bird", "forest bird"]}, InvalidInputError, "twice"),
        (
            {"species": ["Forest Bird", "Crop Bird"], "joint_fit": True, "method": "tsvm"},
            InvalidInputError,
            "selects for one species",
        ),
        (
            {"species": ["Forest Bird", "Crop Bird"], "joint_fit": True, "C": "cv"},
            InvalidInputError,
            "one species",
        ),
        (
            {"species": ["Forest Bird", "Crop Bird"], "joint_fit": True, "cost_column": "lc_crop"},
            InvalidInputError,
            "not supported",
        ),
        ({"species": ["Forest Bird", "Rare Bird"]}, DataFileError, "needs detections"),
    ],
)
def test_bad_species_are_refused_and_nothing_is_written(tmp_path, kw, error, message):
    units = two_species()
    units["label__rare_bird"] = np.where(units["role"] == "train", 0, -1)
    path = write_units(tmp_path / "c.gpkg", units)
    out = tmp_path / "out"
    with pytest.raises(error, match=message):
        select_reserve(budget=6, cells=path, out=out, **kw)
    assert not (out / "reserve.gpkg").exists()


def test_two_species_plan_within_a_money_budget(tmp_path):
    """The plan spends at most the budget and its weighted expected occupied cells are the
    optimum of an independent knapsack solve (scipy's MILP) over the same probabilities."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    units = two_species()
    units["price"] = np.round(np.random.default_rng(3).lognormal(0, 0.6, len(units)), 3)
    path = write_units(tmp_path / "c.gpkg", units)
    species = ["Forest Bird", "Crop Bird"]
    res = select_reserve(6.0, path, species=species, cost_column="price", model="linear")
    pu = res.planning_units
    chosen = pu["selected"].to_numpy(dtype=bool)
    assert pu.loc[chosen, "price"].sum() <= 6.0 + 1e-9
    assert res.summary["total_cost"] == pytest.approx(pu.loc[chosen, "price"].sum())
    cand = (pu["role"] == "candidate").to_numpy()
    P = pu.loc[cand, ["probability__forest_bird", "probability__crop_bird"]].to_numpy()
    value = np.clip(np.nan_to_num(P), 0, 1).sum(axis=1)
    price = pu.loc[cand, "price"].to_numpy()
    best = milp(
        -value,
        constraints=LinearConstraint(price[None, :], -np.inf, 6.0),
        integrality=np.ones(value.size),
        bounds=Bounds(0, 1),
    )
    got = value[chosen[cand]].sum()
    assert got == pytest.approx(-best.fun, rel=1e-6)
