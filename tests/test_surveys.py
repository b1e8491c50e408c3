"""Tests for reserve.surveys: the value of a survey, the plan, new surveys and their refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pyogrio
import pytest
from click.testing import CliRunner

from reserve.cli import main
from reserve.config import SelectOptions
from reserve.design import build_problem
from reserve.errors import DataFileError
from reserve.maps import build_map
from reserve.select import select_reserve
from reserve.surveys import (
    REFIT_NEIGHBOURS,
    REFIT_PRIOR,
    REFIT_STRENGTH,
    REFIT_WIDTH,
    SURVEY_CHECKLISTS,
    SURVEY_NEXT_COLUMNS,
    Habitat,
    apply_surveys,
    joint_gain,
    plan_surveys,
    read_surveys,
    refit_spillover,
    settle_selection,
    single_values,
    survey_detection,
)
from tests.conftest import assert_one_line_error, snapshot
from tests.test_select import make_units, write_units

# ------------------------------------------------------------------------------------------
# the value of information against an exact enumeration of the outcomes


def brute_gain(p: np.ndarray, d: float, k: int, cells: tuple[int, ...]) -> float:
    """Expected gain by enumerating every outcome and settling the selection on it."""
    total = 0.0
    for outcome in itertools.product([False, True], repeat=len(cells)):
        chance, post = 1.0, p.copy()
        surveyed = np.zeros(p.size, bool)
        detected = np.zeros(p.size, bool)
        for c, hit in zip(cells, outcome, strict=True):
            chance *= p[c] * d if hit else 1 - p[c] * d
            post[c] = 1.0 if hit else p[c] * (1 - d) / (1 - p[c] * d)
            surveyed[c], detected[c] = True, hit
        chosen = settle_selection(post, surveyed, detected, k).chosen
        total += chance * (post[chosen].sum() - post[:k].sum())
    return total


def exact_gain(p: np.ndarray, d: float, k: int, cells: tuple[int, ...]) -> float:
    """:func:`joint_gain` over every outcome, weighted by its chance."""
    idx = np.array(cells)
    outcomes = np.array(list(itertools.product([False, True], repeat=len(cells))))
    chance = np.prod(np.where(outcomes, p[idx] * d, 1 - p[idx] * d), axis=1)
    return float((joint_gain(p, d, k, idx, outcomes) * chance).sum())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_joint_gain_matches_the_enumerated_outcomes(seed):
    rng = np.random.default_rng(seed)
    p = np.sort(rng.uniform(0.05, 0.95, 9))[::-1]
    p = np.r_[p[:3], rng.permutation(p[3:])]  # a ranking need not follow the probabilities
    d, k = 0.7, 4
    for size in (1, 2, 3, 4):
        for cells in itertools.combinations(range(9), size):
            assert exact_gain(p, d, k, cells) == pytest.approx(brute_gain(p, d, k, cells))


def test_value_alone_is_the_exact_gain_of_one_survey():
    p = np.array([0.9, 0.8, 0.75, 0.7, 0.6, 0.3, 0.2])
    alone = single_values(p, 0.6, 3)
    assert alone == pytest.approx([brute_gain(p, 0.6, 3, (j,)) for j in range(7)])
    assert alone[4] > 0 and alone[5] > 0  # entering on a detection
    assert (alone >= 0).all()


def test_the_value_of_two_surveys_is_not_the_sum_of_theirs():
    p = np.array([0.9, 0.5, 0.45, 0.45, 0.1])
    d, k = 0.9, 2
    pair = brute_gain(p, d, k, (2, 3))
    assert pair < brute_gain(p, d, k, (2,)) + brute_gain(p, d, k, (3,)) - 1e-6


def test_settlement_buys_detections_first_and_drops_weak_misses():
    p = np.array([0.9, 0.2, 0.8, 0.7, 0.6, 1.0])
    surveyed = np.array([0, 1, 0, 0, 0, 1], bool)
    detected = np.array([0, 0, 0, 0, 0, 1], bool)
    s = settle_selection(p, surveyed, detected, 3)
    # the detection first; the miss (0.2 < runner-up 0.7) leaves; the ranking fills in
    assert s.chosen.tolist() == [5, 0, 2]
    assert (s.n_detected, s.n_dropped) == (1, 1)
    # a miss still at least as likely as the runner-up stays
    kept = settle_selection(np.array([0.9, 0.85, 0.8, 0.7]), surveyed[:4], detected[:4], 2)
    assert kept.chosen.tolist() == [0, 1]


def test_survey_detection_is_one_minus_the_misses():
    assert survey_detection(0.4) == pytest.approx(1 - 0.6**SURVEY_CHECKLISTS)
    assert survey_detection(0.4, 1) == pytest.approx(0.4)


def test_value_over_calibration_draws_matches_the_enumerated_outcomes():
    rng = np.random.default_rng(5)
    P = np.sort(rng.uniform(0.05, 0.95, (3, 8)), axis=1)[:, ::-1]
    P[1] = P[1, rng.permutation(8)]  # a draw need not follow the ranking
    d, k = np.array([0.5, 0.7, 0.9]), 3
    alone = single_values(P, d, k)
    assert alone == pytest.approx(
        [np.mean([brute_gain(P[b], d[b], k, (j,)) for b in range(3)]) for j in range(8)]
    )
    for size in (1, 2, 3):
        for cells in itertools.combinations(range(8), size):
            idx = np.array(cells)
            outcomes = np.array(list(itertools.product([False, True], repeat=size)))
            rows = np.repeat(np.arange(3), len(outcomes))  # every draw with every outcome
            det = np.tile(outcomes, (3, 1))
            chance = np.prod(
                np.where(det, P[rows][:, idx] * d[rows, None], 1 - P[rows][:, idx] * d[rows, None]),
                axis=1,
            )
            got = (joint_gain(P[rows], d[rows], k, idx, det) * chance).sum() / 3
            want = np.mean([brute_gain(P[b], d[b], k, cells) for b in range(3)])
            assert got == pytest.approx(want)


def test_plan_takes_the_best_cells_alone_and_values_them_jointly():
    rng = np.random.default_rng(3)
    p = np.sort(rng.uniform(0.1, 0.9, 60))[::-1]
    a = plan_surveys(p, 0.7, 10, 6, seed=4)
    b = plan_surveys(p, 0.7, 10, 6, seed=4)
    assert a.cells.tolist() == b.cells.tolist() and a.total == b.total
    alone = single_values(p, 0.7, 10)
    assert a.cells.tolist() == np.lexsort((np.arange(60), -alone))[:6].tolist()
    assert a.gain.sum() == pytest.approx(a.total)
    # the first cell's share is its own value (on the drawn outcomes)
    assert a.gain[0] == pytest.approx(alone[a.cells[0]], abs=0.03)
    # a cell with a known detection is never suggested
    known = np.ones(60, bool)
    known[a.cells[0]] = False
    assert a.cells[0] not in plan_surveys(p, 0.7, 10, 6, eligible=known).cells


def _habitat_case(seed: int, n: int = 40, n_labelled: int = 30):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 3))
    labelled = rng.normal(size=(n_labelled, 3)) + 0.5
    p = np.sort(rng.uniform(0.45, 0.55, n))[::-1]  # close: a label reorders them
    return p, Habitat.from_features(Z, labelled), Z, labelled


def test_habitat_width_and_mass_follow_their_definitions():
    _, hab, Z, labelled = _habitat_case(0)
    d = np.sqrt(((Z[:, None, :] - labelled[None, :, :]) ** 2).sum(axis=2))
    width = REFIT_WIDTH * np.median(np.sort(d, axis=1)[:, REFIT_NEIGHBOURS - 1])
    assert hab.width == pytest.approx(width)
    assert hab.mass == pytest.approx(np.exp(-(d**2) / (2 * width**2)).sum(axis=1))


def brute_spillover(p, d, k, hab, j, mass):
    """The refit's gain of a survey at ``j`` over every cell in contention (no band)."""
    n = p.size
    contention = (p < 1) | (np.arange(n) < k)
    now = np.sort(p[contention])[-k:].sum()
    w = np.exp(-((hab.Z - hab.Z[j]) ** 2).sum(axis=1) / (2 * hab.width**2))
    gain = 0.0
    miss = p[j] * (1 - d) / (1 - p[j] * d)
    for after, chance in ((1.0, p[j] * d), (miss, 1 - p[j] * d)):
        reach = np.where(p < 1, REFIT_STRENGTH / (mass + REFIT_PRIOR), 0.0)
        post = np.clip(p + reach * w * (after - p[j]), 0, 1)
        post[j] = p[j]
        gain += chance * (np.sort(post[contention])[-k:].sum() - now)
    return gain


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_refit_spillover_matches_every_cell_recomputed(seed):
    p, hab, _, _ = _habitat_case(seed)
    p[5] = 1.0  # a known detection outside the chosen set is not in contention
    mass = hab.mass * (0.1 if seed == 2 else 1.0)  # thin labels: long reach, wide band
    got = refit_spillover(p, 0.7, 8, hab, np.arange(p.size), mass)
    want = [brute_spillover(p, 0.7, 8, hab, j, mass) for j in range(p.size)]
    assert got == pytest.approx(want, abs=1e-5)
    assert (got > 1e-6).any() and (got > -1e-6).all()  # the shift has mean zero


def test_the_refit_greedy_is_the_plain_greedy():
    p, hab, _, _ = _habitat_case(3, n=60, n_labelled=20)
    d, k, m = 0.7, 10, 8
    plan = plan_surveys(p, d, k, m, habitat=hab)
    alone = single_values(p, d, k)
    mass, taken = hab.mass.copy(), []
    for _ in range(m):
        rest = np.setdiff1d(np.arange(p.size), taken)
        value = alone[rest] + refit_spillover(p, d, k, hab, rest, mass)
        taken.append(int(rest[np.lexsort((rest, -value))[0]]))
        mass += np.exp(-((hab.Z - hab.Z[taken[-1]]) ** 2).sum(axis=1) / (2 * hab.width**2))
    assert plan.cells.tolist() == taken
    assert plan.cells.tolist() != np.lexsort((np.arange(60), -alone))[:m].tolist()


def test_a_label_moves_well_labelled_habitat_less():
    rng = np.random.default_rng(4)
    labelled = np.r_[rng.normal(0, 0.3, (40, 2)), rng.normal(5, 0.3, (2, 2))]
    Z = np.r_[rng.normal(0, 0.3, (20, 2)), rng.normal(5, 0.3, (20, 2))]
    hab = Habitat.from_features(Z, labelled)
    assert hab.mass[:20].min() > hab.mass[20:].max()
    p = np.full(40, 0.5) + rng.uniform(-0.01, 0.01, 40)
    p = p[np.argsort(-p)]
    value = refit_spillover(p, 0.7, 10, hab, np.arange(40))
    assert value[20:].mean() > 2 * value[:20].mean()


def test_habitat_of_a_run_is_standardised_on_its_fitted_cells(units):
    units = units.copy()
    units.loc[units.index[units["role"] == "other"][0], "lc_forest"] = np.nan  # not fitted
    problem = build_problem(units, SelectOptions(budget=6), "test")
    cand = units.loc[units["role"] == "candidate", "cell_id"].to_numpy()
    hab = Habitat.from_problem(problem, cand)
    fitted = units[units["role"].isin(["train", "candidate"])]
    for j, name in enumerate(f for f in problem.features if f not in problem.effort):
        col = fitted[name].to_numpy(dtype=float)
        want = (units.set_index("cell_id").loc[cand, name] - col.mean()) / col.std()
        assert hab.Z[:, j] == pytest.approx(want.to_numpy())
    train = units.loc[units["role"] == "train", "cell_id"].to_numpy()
    assert hab.mass == pytest.approx(Habitat.from_features(hab.Z, _z(problem, train)).mass)


def _z(problem, cells):
    return Habitat.from_problem(problem, cells).Z


def test_clusters_are_contiguous_and_at_most_g():
    n_side = 8
    neighbours = []
    for i in range(n_side * n_side):
        r, c = divmod(i, n_side)
        near = [(r + dr) * n_side + c + dc for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0))]
        ok = [
            0 <= r + dr < n_side and 0 <= c + dc < n_side
            for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0))
        ]
        neighbours.append(np.array([j for j, o in zip(near, ok, strict=True) if o]))
    rng = np.random.default_rng(0)
    p = rng.uniform(0.1, 0.9, n_side * n_side)
    plan = plan_surveys(p, 0.7, 8, 10, clusters=2, adjacency=neighbours, seed=1)
    assert plan.cells.size == 10 and set(plan.cluster.tolist()) <= {1, 2}
    for g in set(plan.cluster.tolist()):
        members = set(plan.cells[plan.cluster == g].tolist())
        seen, todo = set(), [next(iter(members))]
        while todo:
            i = todo.pop()
            seen.add(i)
            todo += [j for j in neighbours[i].tolist() if j in members and j not in seen]
        assert seen == members  # one contiguous area


# ------------------------------------------------------------------------------------------
# new survey results


@pytest.fixture(scope="module")
def units():
    return make_units()


def _write(tmp_path, text: str):
    path = tmp_path / "surveys.csv"
    path.write_text(text)
    return path


def test_surveys_set_labels_and_add_checklists(units, tmp_path):
    cand = (units["role"] == "candidate").to_numpy()
    a, b = units.loc[cand, "cell_id"].to_numpy()[:2]
    path = _write(tmp_path, f"cell_id,detected,checklists\n{a},1,2\n{b},0,4\n")
    surveys = read_surveys(path, units, cand)
    out = apply_surveys(units, surveys)
    row = out.set_index("cell_id")
    assert row.loc[a, "label"] == 1 and row.loc[b, "label"] == 0
    assert row.loc[a, "n_checklists"] == 2 and row.loc[b, "n_checklists"] == 4
    default = read_surveys(_write(tmp_path, f"cell_id,detected\n{a},1\n"), units, cand)
    assert default.checklists.tolist() == [SURVEY_CHECKLISTS]


@pytest.mark.parametrize(
    ("rows", "needle"),
    [
        ("cell_id\n{a}\n", "lacks columns ['detected']"),
        ("cell_id,detected\n{a},2\n{b},yes\n", "detected must be 0 or 1; rows 2, 3"),
        ("cell_id,detected\n{a},1\n{a},0\n", "rows 2, 3 repeat a cell"),
        ("cell_id,detected\n{a},1\n99999,0\n", "rows 3 name cells not in the planning units"),
        ("cell_id,detected\n{a},1\n{t},0\n", "rows 3 name cells that are not candidates"),
        ("cell_id,detected,checklists\n{a},1,0\n", "checklists must be positive integers; rows 2"),
        ("cell_id,detected\n", "has no rows"),
    ],
)
def test_bad_surveys_are_refused_naming_the_rows(units, tmp_path, rows, needle):
    cand = (units["role"] == "candidate").to_numpy()
    a, b = units.loc[cand, "cell_id"].to_numpy()[:2]
    t = units.loc[units["role"] == "train", "cell_id"].to_numpy()[0]
    path = _write(tmp_path, rows.format(a=a, b=b, t=t))
    with pytest.raises(DataFileError) as err:
        read_surveys(path, units, cand)
    assert needle in str(err.value)


# ------------------------------------------------------------------------------------------
# reserve select --suggest-surveys / --surveys


@pytest.fixture(scope="module")
def suggested(tmp_path_factory):
    d = tmp_path_factory.mktemp("suggest")
    cells = write_units(d / "cells.gpkg")
    args = ["select", "--cells", str(cells), "--budget", "6", "--model", "linear"]
    args += ["--out", str(d / "out"), "--map", str(d / "map.html")]
    res = CliRunner().invoke(
        main, [*args, "--suggest-surveys", "5", "--survey-clusters", "2"], catch_exceptions=False
    )
    return {"cells": cells, "dir": d, "res": res, "gpkg": d / "out" / "reserve.gpkg"}


def test_suggest_writes_the_layer_and_prints_the_rows(suggested):
    res = suggested["res"]
    assert res.exit_code == 0, res.stderr
    layer = pyogrio.read_dataframe(suggested["gpkg"], layer="survey_next")
    assert list(layer.columns) == [*SURVEY_NEXT_COLUMNS, "geometry"]
    assert layer["rank"].tolist() == [1, 2, 3, 4, 5]
    assert set(layer["why"]) <= {"near the cut", "outside the surveyed habitat", "both"}
    assert layer["cluster"].between(1, 2).all()
    assert (layer.geometry.area > 0).all()
    assert "5 cells to survey next" in res.stdout
    for cell in layer["cell_id"]:
        assert f" {cell} " in res.stdout
    summary = pyogrio.read_dataframe(suggested["gpkg"], layer="run_summary")
    assert summary["suggest_surveys"][0] == 5
    assert summary["survey_expected_gain"][0] == pytest.approx(layer["expected_gain"].sum())
    units = pyogrio.read_dataframe(suggested["gpkg"], layer="planning_units")
    marked = units[units["survey_rank"] > 0].sort_values("survey_rank")
    assert marked["cell_id"].tolist() == layer["cell_id"].tolist()


def test_suggestions_are_deterministic_and_leave_the_selection_alone(suggested):
    cells = suggested["cells"]
    a = select_reserve(6, cells, model="linear", suggest_surveys=5, survey_clusters=2)
    plain = select_reserve(6, cells, model="linear")
    layer = pyogrio.read_dataframe(suggested["gpkg"], layer="survey_next")
    assert a.survey_next["cell_id"].tolist() == layer["cell_id"].tolist()
    assert a.selected["cell_id"].tolist() == plain.selected["cell_id"].tolist()
    assert plain.survey_next is None and "survey_rank" not in plain.planning_units


def test_the_map_draws_the_suggested_cells_as_their_own_layer(suggested):
    page = suggested["dir"].joinpath("map.html").read_text()
    assert "survey next (5, dashed orange)" in page
    assert page.count('"className": "reserve-survey"') == 5
    plain = build_map(
        pyogrio.read_dataframe(suggested["gpkg"], layer="planning_units").drop(
            columns="survey_rank"
        )
    )
    assert "survey next" not in plain


def test_surveys_feed_the_next_run(suggested, tmp_path):
    cells = suggested["cells"]
    before = select_reserve(6, cells, model="linear")
    ranking = before.ranking
    low = ranking["cell_id"].to_numpy()[-1]  # the worst candidate, found occupied
    top = ranking["cell_id"].to_numpy()[0]  # the best, surveyed without a detection
    path = _write(tmp_path, f"cell_id,detected,checklists\n{low},1,3\n{top},0,20\n")
    after = select_reserve(6, cells, model="linear", surveys=path)
    assert after.selected["cell_id"].iloc[0] == low  # a known detection is bought first
    assert top not in after.selected["cell_id"].tolist()  # 20 checklists without one
    s = after.summary
    assert (s["n_surveys"], s["n_surveys_detected"], s["n_selected_surveys_detected"]) == (2, 1, 1)
    assert s["n_surveys_dropped"] == 1 and s["n_learned"] == 2
    pu = after.planning_units.set_index("cell_id")
    assert pu.loc[low, "label"] == 1 and pu.loc[top, "n_checklists"] == 20


# ------------------------------------------------------------------------------------------
# refusals: one error line, nothing written


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile_surveys")
    units = make_units()
    cells = write_units(d / "cells.gpkg", units)
    cand = units.loc[units["role"] == "candidate", "cell_id"].to_numpy()
    train = units.loc[units["role"] == "train", "cell_id"].to_numpy()
    files = {
        "unknown": f"cell_id,detected\n{cand[0]},1\n123456,0\n",
        "labels": f"cell_id,detected\n{cand[0]},1\n{cand[1]},0.5\n",
        "dup": f"cell_id,detected\n{cand[0]},1\n{cand[0]},1\n",
        "train": f"cell_id,detected\n{train[0]},1\n",
        "nocol": f"cell,detected\n{cand[0]},1\n",
    }
    out = {"cells": cells, "n_cand": cand.size}
    for name, text in files.items():
        (d / f"{name}.csv").write_text(text)
        out[name] = d / f"{name}.csv"
    return out


CASES = {
    "m_zero": (["--suggest-surveys", "0"], 2, "suggest_surveys must be an integer >= 1"),
    "m_word": (["--suggest-surveys", "many"], 2, "suggest_surveys must be an integer"),
    "m_too_many": (["--suggest-surveys", "@many"], 2, "more than the"),
    "g_alone": (["--survey-clusters", "2"], 2, "pass --suggest-surveys M with it"),
    "g_zero": (["--suggest-surveys", "3", "--survey-clusters", "0"], 2, "integer >= 1"),
    "unknown": (["--surveys", "@unknown"], 1, "rows 3 name cells not in the planning units"),
    "labels": (["--surveys", "@labels"], 1, "detected must be 0 or 1; rows 3"),
    "dup": (["--surveys", "@dup"], 1, "rows 2, 3 repeat a cell"),
    "train": (["--surveys", "@train"], 1, "rows 2 name cells that are not candidates"),
    "nocol": (["--surveys", "@nocol"], 1, "lacks columns ['cell_id']"),
    "missing": (["--surveys", "nofile.csv"], 1, "is not a file"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_refused(name, hostile, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args, code, needle = CASES[name]
    args = [str(hostile[a[1:]]) if a.startswith("@") and a != "@many" else a for a in args]
    args = [str(hostile["n_cand"] + 1) if a == "@many" else a for a in args]
    base = ["select", "--cells", str(hostile["cells"]), "--budget", "4", "--model", "linear"]
    before = snapshot(tmp_path)
    res = CliRunner().invoke(main, [*base, *args], catch_exceptions=False)
    assert_one_line_error(res.stderr, res.exit_code, code, needle)
    assert res.stdout == ""
    assert snapshot(tmp_path) == before


def test_money_budgets_and_several_species_are_refused():
    from reserve.config import SelectOptions
    from reserve.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="money budget"):
        SelectOptions(budget=10.0, cost_column="price", suggest_surveys=3)
    with pytest.raises(InvalidInputError, match="several --species"):
        SelectOptions(budget=3, species=("a", "b"), surveys="x.csv")
