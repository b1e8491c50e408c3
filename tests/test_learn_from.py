"""``--learn-from surveyed``: surveyed private cells train the model and stay candidates."""

from __future__ import annotations

import numpy as np
import pyogrio
import pytest
from click.testing import CliRunner

from reserve.cli import main
from reserve.config import SelectOptions
from reserve.design import build_problem, read_planning_units
from reserve.errors import InvalidInputError
from reserve.select import select_reserve
from tests.test_signal import surveyed_cells


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    return surveyed_cells(tmp_path_factory.mktemp("learn") / "cells.gpkg")


def problem(cells, **kw):
    units = read_planning_units(cells)
    return units, build_problem(units, SelectOptions(budget=5, **kw), str(cells))


def test_learned_cells_are_both_labelled_and_candidate_rows(cells):
    units, p = problem(cells, learn_from="surveyed", effort=True)
    surveyed = (units["role"] == "candidate").to_numpy() & units["label"].isin((0, 1)).to_numpy()
    assert p.learned.sum() == surveyed.sum() > 0
    base = np.flatnonzero(p.train | p.candidate)
    assert p.rows.size == base.size + surveyed.sum()
    extra = p.rows[base.size :]
    assert np.array_equal(np.sort(extra), np.flatnonzero(surveyed))
    assert np.array_equal(p.y[base.size :], units["label"].to_numpy()[extra])
    assert set(p.rows[p.y == -1]) == set(np.flatnonzero(p.candidate))  # all stay candidates
    # the labelled copies keep their own effort; the candidate rows and X the standard one
    j = p.features.index("effort__log_n_checklists")
    own = np.log1p(units["n_checklists"].to_numpy()[extra])
    assert np.allclose(p.X_fit[base.size :, j], own)
    assert np.allclose(p.X[p.candidate, j], p.effort["effort__log_n_checklists"])


def test_public_is_the_default_and_leaves_the_rows_alone(cells):
    _, p = problem(cells)
    assert p.learned is None and np.array_equal(p.X_fit, p.X[p.rows])


def test_surveyed_run_cross_fits_the_check_and_flags_known_detections(cells):
    res = select_reserve(8, cells, model="linear", learn_from="surveyed")
    s = res.summary
    assert s["learn_from"] == "surveyed" and s["n_learned"] > 0
    assert s["check_available"] and s["check_n_surveyed"] == s["n_learned"]
    sel = res.selected
    assert {"probability", "known_detection", "surveyed_no_detection"} <= set(sel.columns)
    assert s["n_selected_known_detection"] == int(sel["known_detection"].sum())
    detected = sel["known_detection"].to_numpy()
    assert np.allclose(sel["probability"].to_numpy()[detected], 1.0)
    public = select_reserve(8, cells, model="linear")
    assert public.summary["check_n_surveyed"] == s["check_n_surveyed"]


def test_bad_learn_from_values_are_refused(tmp_path, cells):
    with pytest.raises(InvalidInputError, match="learn_from='private' is unknown"):
        SelectOptions(budget=5, learn_from="private")
    with pytest.raises(InvalidInputError, match="several --species"):
        SelectOptions(budget=5, learn_from="surveyed", species=("a", "b"))
    argv = [
        "select",
        "--budget",
        "5",
        "--cells",
        str(cells),
        "--learn-from",
        "all",
        "--out",
        str(tmp_path / "o"),
    ]
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 2 and "'all' is not one of" in res.stderr
    assert not (tmp_path / "o").exists()


def test_flags_and_probability_land_in_every_layer(tmp_path, cells):
    out = tmp_path / "out"
    res = CliRunner().invoke(
        main,
        [
            "select",
            "--budget",
            "6",
            "--cells",
            str(cells),
            "--model",
            "linear",
            "--out",
            str(out),
            "--map",
            str(tmp_path / "m.html"),
        ],
    )
    assert res.exit_code == 0, res.output
    for layer in ("planning_units", "selected", "ranking"):
        cols = pyogrio.read_info(out / "reserve.gpkg", layer=layer)["fields"]
        assert {"probability", "known_detection", "surveyed_no_detection"} <= set(cols)
    row = pyogrio.read_dataframe(out / "reserve.gpkg", layer="run_summary").iloc[0]
    assert row["expected_occupied_low"] <= row["expected_occupied"] <= row["expected_occupied_high"]
    assert "expected occupied:" in res.stdout and "private-land check:" in res.stdout


def test_learned_cells_join_the_habitat_reference_of_novelty(cells):
    """The surveyed cells the fit learns from are covered habitat: never novel themselves."""
    _, public = problem(cells)
    _, surveyed = problem(cells, learn_from="surveyed")
    assert np.all(surveyed.mess[surveyed.learned] >= 0)
    assert surveyed.novel.sum() <= public.novel.sum()


def test_the_table_and_the_map_show_the_chosen_cells_own_surveys(tmp_path, cells):
    out = tmp_path / "out"
    argv = [
        "select",
        "--budget",
        "8",
        "--cells",
        str(cells),
        "--model",
        "linear",
        "--learn-from",
        "surveyed",
        "--out",
        str(out),
        "--map",
        str(tmp_path / "m.html"),
    ]
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 0, res.output
    sel = pyogrio.read_dataframe(out / "reserve.gpkg", layer="selected")
    assert sel["known_detection"].any()  # learning from them favours cells known to hold it
    header = next(line for line in res.stdout.splitlines() if "cell_id" in line)
    assert "surveyed" in header
    assert res.stdout.count(" detected ") >= int(sel["known_detection"].sum())
    page = (tmp_path / "m.html").read_text()
    assert "known detection" in page and '"sv":' in page
