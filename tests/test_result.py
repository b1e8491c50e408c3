"""Tests for reserve.result: the tables, columns and summary of a selection, recomputed.

The tables are built by :func:`reserve.result.build_result` inside
:func:`reserve.select_reserve`; every figure checked here is recounted from the input cells
and the output tables, not read back from the code that made it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import shapely

import reserve
from reserve.adjacency import EDGE_FACTOR
from reserve.result import patch_report
from reserve.solvers import top_k
from reserve.solvers.ties import break_cutoff_ties
from tests.test_select import make_units, write_units

K = 10


def surveyed_units():
    """The test cells with half of the candidates surveyed (label 0 / 1, 1 to 29 checklists)."""
    units = make_units(seed=3)
    rng = np.random.default_rng(1)
    surveyed = (units["role"] == "candidate").to_numpy() & (rng.uniform(size=len(units)) < 0.5)
    units.loc[surveyed, "n_checklists"] = rng.integers(1, 30, int(surveyed.sum()))
    detected = rng.uniform(size=int(surveyed.sum())) < units.loc[surveyed, "lc_forest"]
    units.loc[surveyed, "label"] = detected.astype(int)
    units.loc[surveyed, "n_detections"] = detected.astype(int)
    return units


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The input cells and the result of one linear TTK run for ``K`` cells."""
    units = surveyed_units()
    path = write_units(tmp_path_factory.mktemp("result") / "cells.gpkg", units)
    return units, reserve.select_reserve(K, path, model="linear", map=False)


def test_selected_are_the_top_k_candidates_ranked_1_to_k(run):
    res = run[1]
    sel, pu = res.selected, res.planning_units
    assert sel["rank"].tolist() == list(range(1, K + 1))
    assert sel["patch_id"].min() >= 1
    cand = pu[pu["role"] == "candidate"]
    assert sorted(cand["rank"]) == list(range(1, len(cand) + 1))
    assert (pu.loc[pu["role"] != "candidate", "rank"] == 0).all()
    kth = np.sort(cand["score"].to_numpy())[::-1][K - 1]
    assert (sel["score"] >= kth).all()  # no unselected candidate scores above a selected one
    assert (cand.loc[~cand["selected"], "score"] <= kth).all()
    assert np.all(np.diff(sel["score"].to_numpy()) <= 0)
    assert set(pu.loc[pu["selected"], "cell_id"]) == set(sel["cell_id"])


def test_ranking_lists_every_candidate_in_rank_order(run):
    res = run[1]
    ranking, pu = res.ranking, res.planning_units
    cand = pu[pu["role"] == "candidate"].set_index("cell_id")
    assert ranking["rank"].tolist() == list(range(1, len(cand) + 1))
    assert ranking["selected"].tolist() == [True] * K + [False] * (len(cand) - K)
    np.testing.assert_array_equal(
        ranking["score"].to_numpy(), cand.loc[ranking["cell_id"], "score"].to_numpy()
    )
    lon, lat = ranking["longitude"].to_numpy(), ranking["latitude"].to_numpy()
    centre = cand.loc[ranking["cell_id"]].geometry.centroid.to_crs(4326)
    np.testing.assert_allclose(lon, centre.x, atol=1e-4)
    np.testing.assert_allclose(lat, centre.y, atol=1e-4)
    np.testing.assert_allclose(ranking["area_ha"], 3000.0**2 / 10_000, rtol=1e-9)


def test_summary_counts_equal_recounted_counts(run):
    units, res = run
    s, role, label = res.summary, units["role"], units["label"]
    assert s["n_cells"] == len(units) == len(res.planning_units)
    assert s["n_candidates"] == int((role == "candidate").sum())
    assert s["n_train"] == int((role == "train").sum())
    assert s["n_train_positive"] == int(((role == "train") & (label == 1)).sum())
    assert s["n_selected"] == len(res.selected) == K == s["budget"]
    assert (s["n_locked_in"], s["n_locked_out"]) == (0, 0)
    assert s["n_features"] == 3 and s["crs"] == "EPSG:5070"
    assert s["budget_unit"] == "cells" and np.isnan(s["total_cost"])


def test_evidence_columns_and_summary_equal_recomputed_ones(run):
    units, res = run
    pu, s, sel = res.planning_units, res.summary, res.selected
    label, visits = units["label"].to_numpy(), units["n_checklists"].to_numpy()
    np.testing.assert_array_equal(pu["known_detection"], label == 1)
    many = s["no_detection_checklists"]
    np.testing.assert_array_equal(pu["surveyed_no_detection"], (label == 0) & (visits >= many))
    chosen = pu["selected"].to_numpy()
    assert s["n_selected_known_detection"] == int((chosen & (label == 1)).sum())
    assert s["n_selected_no_detection"] == int((chosen & (label == 0) & (visits >= many)).sum())
    # the private-land check runs on the surveyed candidates
    surveyed = (units["role"] == "candidate").to_numpy() & np.isin(label, (0, 1))
    assert s["check_available"]
    assert s["check_n_surveyed"] == int(surveyed.sum())
    assert s["check_n_detected"] == int((surveyed & (label == 1)).sum())
    p = pu["probability"].to_numpy()
    scored = np.isfinite(pu["score"].to_numpy())
    assert np.all((p[scored] >= 0) & (p[scored] <= 1)) and np.isnan(p[~scored]).all()
    assert s["expected_occupied_low"] <= s["expected_occupied"] <= s["expected_occupied_high"]
    assert 0 <= s["expected_occupied_low"] and s["expected_occupied_high"] <= K
    free = (pu["role"] == "candidate").to_numpy() & ~pu["locked_out"].to_numpy(bool)
    assert s["expected_occupied_blind"] == pytest.approx(p[free].mean() * K)
    by_id = pu.set_index("cell_id")
    for column in ("probability", "known_detection", "surveyed_no_detection"):
        np.testing.assert_array_equal(sel[column], by_id.loc[sel["cell_id"], column])


def test_contributions_add_up_to_the_selected_mean_score(run):
    res = run[1]
    est = res.estimator
    mean_score = res.selected["score"].mean()
    total = float(np.sum(res.contributions))
    assert total == pytest.approx(mean_score - float(est.intercept_), abs=1e-9)
    order = np.argsort(-np.abs(res.contributions), kind="stable")
    assert res.main_features() == [res.feature_names[i] for i in order]
    assert res.summary["main_features"] == ", ".join(res.main_features())


def test_patches_match_an_independent_flood_fill(tmp_path):
    # a boundary penalty clumps the selection into patches of several cells
    res = reserve.select_reserve(
        8, write_units(tmp_path / "cells.gpkg"), model="linear", map=False, boundary_penalty=1.0
    )
    pu = res.planning_units
    cells = patches_by_flood_fill(pu.loc[pu["selected"]].geometry)
    assert max(len(c) for c in cells) > 1
    assert res.summary["n_patches"] == len(cells)
    assert res.summary["largest_patch_cells"] == max(len(c) for c in cells)
    assert (pu.loc[~pu["selected"], "patch_id"] == 0).all()
    sizes = pu.loc[pu["selected"], "patch_id"].value_counts()
    assert sorted(sizes, reverse=True) == sorted((len(c) for c in cells), reverse=True)
    assert sizes.idxmax() == 1  # patch 1 is the largest
    geometry, rows = pu.geometry.to_numpy(), list(np.flatnonzero(pu["selected"]))
    assert res.summary["boundary_length"] == pytest.approx(exposed_boundary(geometry, rows, 3000.0))


def patches_by_flood_fill(geometry) -> list[set[int]]:
    """Groups of positions whose squares share an edge (not only a corner)."""
    geoms = list(geometry)
    left, groups = set(range(len(geoms))), []
    while left:
        todo, group = [left.pop()], set()
        while todo:
            i = todo.pop()
            group.add(i)
            joined = {j for j in left if geoms[i].intersection(geoms[j]).length > 0}
            left -= joined
            todo.extend(joined)
        groups.append(group)
    return groups


def grid(n_rows: int, n_cols: int, side: float = 10.0) -> np.ndarray:
    r, c = np.divmod(np.arange(n_rows * n_cols), n_cols)
    return shapely.box(c * side, r * side, (c + 1) * side, (r + 1) * side)


def exposed_boundary(geometry: np.ndarray, rows: list[int], side: float) -> float:
    """Each selected square's edges: 0 toward a selected one, the side toward an unselected
    cell, ``EDGE_FACTOR`` times the side where there is no cell."""
    centres = {(round(g.centroid.x), round(g.centroid.y)): i for i, g in enumerate(geometry)}
    chosen, total = set(rows), 0.0
    for i in rows:
        x, y = round(geometry[i].centroid.x), round(geometry[i].centroid.y)
        for dx, dy in ((side, 0), (-side, 0), (0, side), (0, -side)):
            j = centres.get((round(x + dx), round(y + dy)))
            total += 0.0 if j in chosen else side if j is not None else EDGE_FACTOR * side
    return total


def test_patch_report_on_a_drawn_grid():
    geometry = grid(4, 5)
    # an L of 4 cells (0, 1, 2, 7), a pair (18, 19), a single cell (10)
    rows = [0, 1, 2, 7, 18, 19, 10]
    patch, figures = patch_report(geometry, np.array(rows))
    assert figures["n_patches"] == 3 and figures["largest_patch_cells"] == 4
    assert figures["edge_factor"] == EDGE_FACTOR
    assert figures["boundary_length"] == pytest.approx(exposed_boundary(geometry, rows, 10.0))
    assert set(patch[[0, 1, 2, 7]]) == {1}
    assert patch[18] == patch[19] != patch[10]
    assert {int(patch[18]), int(patch[10])} == {2, 3}
    assert (np.delete(patch, rows) == 0).all()


def test_patch_report_without_a_grid_has_no_patches():
    geometry = np.array([shapely.box(0, 0, 1, 1), shapely.box(5, 0, 7, 3), shapely.Point(9, 9)])
    patch, figures = patch_report(geometry, np.array([0, 1]))
    assert (patch == -1).all()
    assert figures["n_patches"] == -1 and np.isnan(figures["boundary_length"])


def test_result_tables_keep_the_input_columns(run):
    units, res = run
    pu = res.planning_units
    for column in ("cell_id", "role", "label", "lc_forest", "lc_crop", "elev_mean"):
        np.testing.assert_array_equal(pu[column].to_numpy(), units[column].to_numpy())
    assert pu.crs == units.crs
    assert isinstance(res.ranking, pd.DataFrame) and res.tradeoff is None


def test_the_tables_report_the_estimators_tie_without_changing_its_selection(tmp_path):
    # Candidates share four feature rows (about 20 each), so K cells cut the best group:
    # the estimator breaks that tie (the one rule, seeded with the run's seed), and the
    # tables select, rank and count what it chose.
    units = make_units(seed=3)
    cand = np.flatnonzero((units["role"] == "candidate").to_numpy())
    protos = units.loc[cand[:4], ["lc_forest", "lc_crop", "elev_mean"]].to_numpy()
    units.loc[cand, ["lc_forest", "lc_crop", "elev_mean"]] = protos[np.arange(cand.size) % 4]
    path = write_units(tmp_path / "cells.gpkg", units)
    fit_rows = np.flatnonzero(units["role"].isin(["train", "candidate"]).to_numpy())
    chosen = set()
    for seed in (0, 1, 2):
        res = reserve.select_reserve(K, path, method="svm", seed=seed, map=False)
        est = res.estimator
        s = est.candidate_scores_
        want, runners, ties = break_cutoff_ties(s, np.arange(s.size), top_k(s, K), None, seed)
        assert est.cutoff_ties_ == ties and ties.n_tied > K and ties.n_drawn > 0
        # the tables: the estimator's selection, its runners-up next, its tie counted
        assert res.selected["cell_id"].tolist() == fit_rows[est.candidates_[want]].tolist()
        ranked = res.ranking["cell_id"].tolist()
        assert ranked[K : K + runners.size] == fit_rows[est.candidates_[runners]].tolist()
        assert res.summary["n_tied_drawn"] == ties.n_drawn
        assert res.summary["n_tied_at_cutoff"] == ties.n_tied
        chosen.add(frozenset(res.selected["cell_id"]))
    assert len(chosen) > 1  # the draw follows the seed


def noise_units(n_noise: int = 40):
    """The test cells, unsurveyed candidates, with ``n_noise`` habitat columns of pure noise
    and training labels drawn at random: a linear fit memorises its training labels."""
    units = make_units(n_side=16, seed=5)
    rng = np.random.default_rng(5)
    for j in range(n_noise):
        units[f"lc_noise_{j}"] = rng.uniform(size=len(units))
    train = (units["role"] == "train").to_numpy()
    labels = (rng.uniform(size=int(train.sum())) < 0.4).astype(int)
    units.loc[train, "label"] = labels
    units.loc[train, "n_detections"] = labels
    return units


def test_without_surveyed_candidates_the_training_cells_are_scored_out_of_fold():
    from sklearn.metrics import roc_auc_score

    from reserve.config import SelectOptions
    from reserve.design import build_problem
    from reserve.select import (
        TRAINING_FOLDS,
        needs_training_calibration,
        standardised,
        training_held_out_scores,
    )
    from reserve.solvers import make_estimator

    units = noise_units()
    opts = SelectOptions(budget=K, model="linear", C=1.0, map=False)
    problem = build_problem(units, opts, "noise")
    assert needs_training_calibration(opts, problem)
    # an exact solve under a time limit keeps its in-sample calibration (refits stop by the clock)
    exact = SelectOptions(budget=K, method="ttk-mip", C=1.0, map=False)
    assert not needs_training_calibration(exact, problem)
    scaler, fitted = standardised(problem.selection)
    est = make_estimator("ttk", k=problem.k_fit, C=1.0, random_state=0).fit(fitted)
    Z = scaler.transform(problem.X)
    held, folds = training_held_out_scores(opts, problem, est, fitted, Z, lambda _: None)
    assert folds == TRAINING_FOLDS
    train = problem.train
    y = problem.label[train]
    in_sample = est.decision_function(Z[train])
    # the final fit has learned the noise; the refits that did not see a label have not
    assert roc_auc_score(y, in_sample) > 0.75
    assert abs(roc_auc_score(y, held[train]) - 0.5) < 0.1
    # every other cell keeps the final fit's score
    np.testing.assert_allclose(held[~train], est.decision_function(Z[~train]))


@pytest.mark.parametrize("learn_from", ["public", "surveyed"])
def test_too_few_surveyed_candidates_calibrate_on_out_of_fold_scores(tmp_path, learn_from):
    units = noise_units()
    few = np.flatnonzero((units["role"] == "candidate").to_numpy())[:4]
    units.loc[few, ["label", "n_checklists", "n_detections"]] = [[1, 3, 1], [0, 3, 0]] * 2
    path = write_units(tmp_path / "cells.gpkg", units)
    s = reserve.select_reserve(
        K, path, model="linear", C=1.0, map=False, learn_from=learn_from
    ).summary
    assert not s["check_available"]
    n_labelled = int((units["role"] == "train").sum()) + (4 if learn_from == "surveyed" else 0)
    assert s["calibration_source"].startswith(
        f"the {n_labelled} labelled cells, each scored by one of 3 refits that did not see"
    )


def test_on_scale_of_carries_an_affine_rescoring_back_exactly():
    from reserve.select import on_scale_of

    rng = np.random.default_rng(0)
    own = rng.normal(size=50)
    scores = rng.normal(size=7)
    np.testing.assert_allclose(on_scale_of(scores, own, 3.0 * own - 2.0), 3.0 * scores - 2.0)
    np.testing.assert_array_equal(on_scale_of(scores, np.ones(5), own[:5]), scores)


def test_a_blind_pick_keeps_the_locked_in_cells(tmp_path):
    units = make_units(seed=0)
    cand = np.flatnonzero((units["role"] == "candidate").to_numpy())[:4]
    units["lock"] = False
    units.loc[cand, ["lock", "label", "n_checklists", "n_detections"]] = [True, 1, 5, 2]
    path = write_units(tmp_path / "cells.gpkg", units)
    res = reserve.select_reserve(6, path, model="linear", map=False, locked_in="lock")
    pu, s = res.planning_units, res.summary
    prob, locked = pu["probability"].to_numpy(), pu["lock"].to_numpy(bool)
    free = (pu["role"] == "candidate").to_numpy() & ~locked
    assert np.isin(pu.loc[pu["selected"], "cell_id"], pu.loc[locked, "cell_id"]).sum() == 4
    blind = prob[locked].sum() + prob[free].mean() * (6 - 4)
    assert s["expected_occupied_blind"] == pytest.approx(blind)


@pytest.mark.parametrize("learn_from", ["public", "surveyed"])
@pytest.mark.parametrize("locked_role", ["candidate", "other"])  # locked by select / by ingest
def test_locked_out_private_cells_check_and_calibrate_without_moving_the_fit(
    tmp_path, learn_from, locked_role
):
    from reserve.confidence import private_land_check

    units = surveyed_units()
    label = units["label"].to_numpy()
    surveyed = (units["role"] == "candidate").to_numpy() & np.isin(label, (0, 1))
    locked = surveyed & (np.arange(len(units)) % 2 == 0)  # half the surveyed cells not for sale
    units["locked_out"] = locked
    units.loc[locked, "role"] = locked_role

    def run(cells, name):
        path = write_units(tmp_path / name, cells)
        return reserve.select_reserve(
            K, path, model="linear", C=1.0, map=False, learn_from=learn_from
        )

    res = run(units, "a.gpkg")
    s, pu = res.summary, res.planning_units
    # the check and the calibration read every surveyed private cell, for sale or not
    assert s["check_available"] and s["check_n_surveyed"] == int(surveyed.sum())
    assert s["calibration_source"].startswith(
        f"the {int(surveyed.sum())} surveyed private cells ({int(locked.sum())} of them locked "
        "out of the purchase), scored out of sample"
    )
    if learn_from == "public":  # one fit scores every cell: the check recomputed from its scores
        score, visits = pu["score"].to_numpy(), units["n_checklists"].to_numpy()
        share = K / int(((units["role"] == "candidate") & ~units["locked_out"]).sum())
        assert np.isfinite(score[surveyed]).all()
        check = private_land_check(score[surveyed], label[surveyed], visits[surveyed], share)
        assert s["check_auc"] == pytest.approx(check.auc)
        assert s["check_precision_top"] == pytest.approx(check.precision_top)
    # a locked-out cell's survey is never a row of the fit: without it, the same selection
    blind = units.copy()
    blind.loc[locked, ["label", "n_checklists", "n_detections"]] = [-1, 0, 0]
    again = run(blind, "b.gpkg")
    np.testing.assert_array_equal(res.selected["cell_id"], again.selected["cell_id"])
    assert again.summary["check_n_surveyed"] == int((surveyed & ~locked).sum())
