"""Tests for reserve.select: the sequence, an independent re-scorer, determinism, bad input."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest
import shapely

from reserve.config import SELECT_METHODS
from reserve.errors import DataFileError, InvalidInputError, OutputExistsError
from reserve.select import load_config, read_planning_units, resolve_config, select_reserve

FEATURES = ["lc_forest", "lc_crop", "elev_mean"]


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
    res = select_reserve(5, cells)
    units = read_planning_units(cells)
    expect = rescore(units, res.estimator.coef_, float(res.estimator.intercept_))
    np.testing.assert_allclose(res.planning_units["score"].to_numpy(), expect, atol=1e-9)
    # the objective recorded is the estimator's
    assert res.summary["objective"] == pytest.approx(res.estimator.objective_)


def test_main_features_are_those_that_lift_the_selected_scores(cells):
    res = select_reserve(6, cells)
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
    res = select_reserve(5, write_units(tmp_path / "c.gpkg", units))
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
    if method == "ttk-mip":
        assert np.isfinite(res.summary["bound"])


def test_writes_outputs_only_when_out_is_given(cells, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    select_reserve(4, cells)
    assert not (tmp_path / "results").exists() and not (tmp_path / "maps").exists()
    res = select_reserve(4, cells, out=tmp_path / "o")
    assert res.gpkg_path == tmp_path / "o" / "reserve.gpkg" and res.gpkg_path.is_file()
    assert res.map_path == Path("maps") / "cells_ttk_k4.html" and res.map_path.is_file()
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
    with pytest.raises(DataFileError, match="cannot be created"):
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
