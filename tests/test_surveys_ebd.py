"""Tests for the EBD/SED form of new surveys: ``reserve select --surveys EBD --surveys-sed SED``.

The eBird files are synthesized (``tests.test_io``'s writers, column names only); the
checklists lie at the centres of known cells of ``tests.test_select.make_units``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyogrio
import pytest
from click.testing import CliRunner

from reserve.cli import main
from reserve.errors import InvalidInputError
from reserve.select import select_reserve
from reserve.surveys import SurveyResults, is_ebd, locate_points, read_surveys
from tests.conftest import assert_one_line_error, snapshot
from tests.test_io import NEW_EBD, NEW_SED, OLD_EBD, OLD_SED, checklist, observation, write
from tests.test_select import make_units, write_units

SPECIES = "Wood Thrush"


def _lonlat(units, cell_id, dx=0.0):
    """Longitude and latitude (text) of a cell's centre, shifted ``dx`` metres east."""
    centre = units.set_index("cell_id").geometry.loc[[cell_id]].centroid.translate(xoff=dx)
    point = centre.to_crs(4326).iloc[0]
    return f"{point.x:.7f}", f"{point.y:.7f}"


def _at(units, cell_id, id_, dx=0.0, **kw):
    lon, lat = _lonlat(units, cell_id, dx)
    return checklist(id_, lon=lon, lat=lat, **kw)


def _seen(units, cell_id, id_, dx=0.0, **kw):
    lon, lat = _lonlat(units, cell_id, dx)
    return observation(id_, lon=lon, lat=lat, **kw)


def write_pair(folder, units, sed_rows, ebd_rows, layout="new", compress=(None, None)):
    """An EBD/SED pair of ``rows`` (new or old column layout, each plain, gz or zip)."""
    ebd_header, sed_header = (NEW_EBD, NEW_SED) if layout == "new" else (OLD_EBD, OLD_SED)
    ebd = write(folder / "new_ebd.txt", ebd_header, ebd_rows, compress=compress[0])
    sed = write(folder / "new_sed.txt", sed_header, sed_rows, compress=compress[1])
    return ebd, sed


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """Cells (with the ingest's species on record), an EBD/SED pair and the same as a CSV.

    Cell ``a``: two checklists, one with the species; cell ``b``: three without it (one
    reports another species) and an incomplete one with it (dropped by the filters); a
    training cell and a point outside the grid: one checklist each, left out.
    """
    d = tmp_path_factory.mktemp("surveys_ebd")
    units = make_units()
    cells = write_units(d / "cells.gpkg", units)
    summary = pd.DataFrame({"item": ["species"], "kept": [np.nan], "dropped": [np.nan]})
    summary["value"] = [SPECIES]
    pyogrio.write_dataframe(summary, cells, layer="ingest_summary", driver="GPKG", append=True)
    cand = units.loc[units["role"] == "candidate", "cell_id"].to_numpy()
    train = units.loc[units["role"] == "train", "cell_id"].to_numpy()
    a, b = sorted(cand[[3, 11]])
    corner = units["cell_id"].iloc[-1]
    sed_rows = [
        _at(units, a, "S1"),
        _at(units, a, "S2", dx=500, protocol="Stationary", km=""),
        _at(units, b, "S3"),
        _at(units, b, "S4", dx=-700),
        _at(units, b, "S5", dx=900, minutes="30"),
        _at(units, b, "S6", complete="0"),
        _at(units, train[0], "S7"),
        _at(units, corner, "S8", dx=30_000),  # 10 cells east of the grid's last column
    ]
    ebd_rows = [
        _seen(units, a, "S2", protocol="Stationary", km=""),
        _seen(units, b, "S4", dx=-700, common="Veery", sci="Catharus fuscescens"),
        _seen(units, b, "S6", complete="0"),
        _seen(units, train[0], "S7"),
        _seen(units, corner, "S8", dx=30_000),
    ]
    ebd, sed = write_pair(d, units, sed_rows, ebd_rows)
    csv = d / "surveys.csv"
    csv.write_text(f"cell_id,detected,checklists\n{a},1,2\n{b},0,3\n")
    return {
        "dir": d,
        "units": units,
        "cells": cells,
        "cand": (units["role"] == "candidate").to_numpy(),
        "a": a,
        "b": b,
        "train": train,
        "sed_rows": sed_rows,
        "ebd_rows": ebd_rows,
        "ebd": ebd,
        "sed": sed,
        "csv": csv,
    }


def _same(x: SurveyResults, y: SurveyResults) -> None:
    np.testing.assert_array_equal(x.cell_id, y.cell_id)
    np.testing.assert_array_equal(x.detected, y.detected)
    np.testing.assert_array_equal(x.checklists, y.checklists)


# ------------------------------------------------------------------------------------------
# reading


def test_an_ebd_is_told_by_its_header_not_its_name(case, tmp_path):
    assert is_ebd(case["ebd"]) and not is_ebd(case["sed"]) and not is_ebd(case["csv"])
    renamed = tmp_path / "surveys.csv"
    renamed.write_bytes(case["ebd"].read_bytes())
    assert is_ebd(renamed)
    assert not is_ebd(tmp_path / "missing.txt")


def test_checklists_fall_in_the_cell_that_contains_them(case):
    units = case["units"]
    ids = units["cell_id"].to_numpy()
    centres = units.geometry.centroid.to_crs(4326)
    pos = locate_points(centres.x.to_numpy(), centres.y.to_numpy(), units)
    np.testing.assert_array_equal(ids[pos], ids)  # every centre in its own cell
    far = locate_points(np.array([0.0]), np.array([0.0]), units)
    assert far.tolist() == [-1]


def test_the_ebd_form_gives_the_csv_forms_surveys(case):
    args = (case["units"], case["cand"])
    ebd = read_surveys(case["ebd"], *args, sed=case["sed"], species=SPECIES)
    csv = read_surveys(case["csv"], *args)
    _same(ebd, csv)
    assert ebd.cell_id.tolist() == [case["a"], case["b"]]
    assert ebd.detected.tolist() == [True, False] and ebd.checklists.tolist() == [2.0, 3.0]
    notes = " | ".join(ebd.notes)
    assert "1 checklists of" in notes and "outside the planning units left out" in notes
    assert "in training, other or locked-out cells left out" in notes
    assert ebd.source == str(case["ebd"]) and csv.notes == ()


@pytest.mark.parametrize(
    ("layout", "compress"), [("old", (None, None)), ("new", ("gz", "zip")), ("old", ("zip", "gz"))]
)
def test_both_layouts_and_compressions_read_the_same(case, tmp_path, layout, compress):
    ebd, sed = write_pair(
        tmp_path, case["units"], case["sed_rows"], case["ebd_rows"], layout, compress
    )
    got = read_surveys(ebd, case["units"], case["cand"], sed=sed, species=SPECIES)
    _same(got, read_surveys(case["csv"], case["units"], case["cand"]))


def test_a_species_no_checklist_reports_is_a_non_detection(case):
    args = (case["units"], case["cand"])
    got = read_surveys(case["ebd"], *args, sed=case["sed"], species="Hooded Warbler")
    assert got.cell_id.tolist() == [case["a"], case["b"]]
    assert not got.detected.any() and got.checklists.tolist() == [2.0, 3.0]
    assert any("reports Hooded Warbler" in note for note in got.notes)


def test_the_ebd_needs_its_sed_and_a_species(case):
    args = (case["units"], case["cand"])
    with pytest.raises(InvalidInputError, match="--surveys-sed PATH"):
        read_surveys(case["ebd"], *args, species=SPECIES)
    with pytest.raises(InvalidInputError, match="pass --species NAME"):
        read_surveys(case["ebd"], *args, sed=case["sed"])
    with pytest.raises(InvalidInputError, match="is not one"):
        read_surveys(case["csv"], *args, sed=case["sed"])


# ------------------------------------------------------------------------------------------
# reserve select: the same run from either form


def test_select_gives_the_same_run_from_either_form(case, tmp_path, monkeypatch):
    kw = {"model": "linear"}
    by_csv = select_reserve(6, case["cells"], surveys=case["csv"], **kw)
    by_ebd = select_reserve(6, case["cells"], surveys=case["ebd"], surveys_sed=case["sed"], **kw)
    assert by_ebd.selected["cell_id"].tolist() == by_csv.selected["cell_id"].tolist()
    assert by_ebd.ranking["cell_id"].tolist() == by_csv.ranking["cell_id"].tolist()
    np.testing.assert_allclose(by_ebd.ranking["score"], by_csv.ranking["score"])
    for key in ("n_surveys", "n_surveys_detected", "n_selected_surveys_detected", "n_learned"):
        assert by_ebd.summary[key] == by_csv.summary[key], key
    pu = by_ebd.planning_units.set_index("cell_id")
    assert pu.loc[case["a"], "label"] == 1 and pu.loc[case["b"], "n_checklists"] == 3
    # the command line, its options from a TOML file: the same GeoPackage layer
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "run.toml"
    config.write_text(f"surveys = '{case['ebd']}'\nsurveys_sed = '{case['sed']}'\n")
    args = ["select", "--cells", str(case["cells"]), "--budget", "6", "--model", "linear"]
    args += ["--config", str(config), "--out", "out", "--map", "false"]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    assert "outside the planning units left out" in res.stderr
    assert "2 new surveys from" in res.stderr
    layer = pyogrio.read_dataframe(tmp_path / "out" / "reserve.gpkg", layer="selected")
    assert layer["cell_id"].tolist() == by_csv.selected["cell_id"].tolist()


# ------------------------------------------------------------------------------------------
# refusals: one error line, nothing written


def _refusal_files(case, folder):
    """EBD/SED pairs whose checklists the run cannot take."""
    units, train = case["units"], case["train"]
    off = write_pair(
        folder / "off",
        units,
        [_at(units, train[0], "T1"), _at(units, units["cell_id"].iloc[-1], "T2", dx=30_000)],
        [_seen(units, train[0], "T1")],
    )
    empty = write_pair(
        folder / "empty",
        units,
        [_at(units, case["a"], "E1", complete="0"), _at(units, case["b"], "E2", minutes="600")],
        [_seen(units, case["a"], "E1", complete="0")],
    )
    return {"off": off, "empty": empty}


CASES = {
    "no_sed": (["--surveys", "@ebd"], 2, "pass the Sampling Event Data"),
    "sed_alone": (["--surveys-sed", "@sed"], 2, "pass the EBD with --surveys PATH"),
    "sed_with_csv": (["--surveys", "@csv", "--surveys-sed", "@sed"], 2, "drop --surveys-sed"),
    "none_in_candidates": (
        ["--surveys", "@off:0", "--surveys-sed", "@off:1"],
        1,
        "none of its 2 kept checklists lies in a candidate cell (1 outside",
    ),
    "nothing_kept": (
        ["--surveys", "@empty:0", "--surveys-sed", "@empty:1"],
        2,
        "is left after filtering",
    ),
    "sed_missing": (["--surveys", "@ebd", "--surveys-sed", "nofile.txt"], 1, "nofile.txt"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_refused(name, case, tmp_path, monkeypatch):
    for sub in ("off", "empty"):
        (tmp_path / "inputs" / sub).mkdir(parents=True)
    files = _refusal_files(case, tmp_path / "inputs")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args, code, needle = CASES[name]

    def value(a):
        if not a.startswith("@"):
            return a
        key, _, i = a[1:].partition(":")
        return str(files[key][int(i)] if i else case[key])

    base = ["select", "--cells", str(case["cells"]), "--budget", "4", "--model", "linear"]
    before = snapshot(work)
    res = CliRunner().invoke(main, [*base, *map(value, args)], catch_exceptions=False)
    assert_one_line_error(res.stderr, res.exit_code, code, needle)
    assert res.stdout == ""
    assert snapshot(work) == before
