"""``reserve evaluate`` and the Python functions under hostile input.

The command: one ``reserve: error:`` line, exit 1 (data) or 2 (usage). The functions
(``select_reserve``, ``ingest``, ``evaluate_selection``, ``read_selection``, ``read_truth``,
``read_planning_units``): a :class:`reserve.errors.ReserveError` (``InvalidInputError`` for a
wrong value or type, which the command turns into exit 2), a one-line message, never a bare
``TypeError``. Every case leaves the working folder byte for byte as it was.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyogrio
import pytest
from click.testing import CliRunner

from reserve.cli import main
from reserve.errors import DataFileError, InvalidInputError, OutputExistsError, ReserveError
from reserve.evaluate import evaluate_selection, read_selection, read_truth
from reserve.ingest import ingest
from reserve.select import read_planning_units, select_reserve
from tests.conftest import assert_one_line_error, snapshot
from tests.test_select import write_units


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("hostile_api_inputs")
    texts = {
        "text.gpkg": b"not a geopackage",
        "empty.gpkg": b"",
        "empty.csv": b"",
        "ids.csv": b"cell_id\n1\n2\n",
        "ids_text.csv": b"cell_id\na\nb\n",
        "garbage.csv": b"\x00\x01\xff\xfe garbage \n\x89PNG",
        "truth_psi.csv": b"cell_id,psi,occupied\n1,abc,1\n2,0.5,1\n",
        "truth_psi_range.csv": b"cell_id,psi,occupied\n1,1.5,1\n2,0.5,1\n",
        "truth_occupied.csv": b"cell_id,psi,occupied\n1,0.2,maybe\n2,0.5,1\n",
        "truth_ids.csv": b"cell_id,psi,occupied\nx,0.2,1\n2,0.5,1\n",
        "truth_dup.csv": b"cell_id,psi,occupied\n1,0.2,1\n1,0.5,1\n",
        "truth_cols.csv": b"id,p,o\n1,0.2,1\n",
        "truth_ok.csv": b"cell_id,psi,occupied\n1,0.2,true\n2,0.5,no\n3,0.9,1\n",
    }
    out = {}
    for name, data in texts.items():
        (d / name).write_bytes(data)
        out[name] = d / name
    (d / "folder").mkdir()
    out["folder"] = d / "folder"
    pyogrio.write_dataframe(pd.DataFrame({"x": [1]}), d / "nolayer.gpkg", layer="other")
    out["nolayer.gpkg"] = d / "nolayer.gpkg"
    pyogrio.write_dataframe(pd.DataFrame({"x": [1]}), d / "noid.gpkg", layer="selected")
    out["noid.gpkg"] = d / "noid.gpkg"
    out["cells"] = write_units(d / "cells.gpkg")
    return out


# evaluate: (arguments, exit code, message fragment); "@name" is a file of the fixture
EVALUATE = {
    "selection_text": (["@text.gpkg"], 1, "is not a GeoPackage"),
    "selection_empty": (["@empty.gpkg"], 1, "is an empty file"),
    "selection_empty_csv": (["@empty.csv"], 1, "is an empty file"),
    "selection_folder": (["@folder"], 1, "is a folder"),
    "selection_missing": (["nosuch.gpkg"], 1, "does not exist"),
    "selection_no_layer": (["@nolayer.gpkg"], 1, "has no layer 'selected'"),
    "selection_no_id": (["@noid.gpkg"], 1, "has no column 'cell_id'"),
    "selection_text_ids": (["@ids_text.csv"], 1, "must hold integer cell ids"),
    "selection_garbage": (["@garbage.csv"], 1, ""),
    "no_arguments": ([], 2, "SELECTION"),
    "both": (["@ids.csv", "--cell-ids", "1"], 2, "not both"),
    "ids_words": (["--cell-ids", "a,b"], 2, "must be integers"),
    "ids_repeated": (["--cell-ids", "1,1", "--truth", "@truth_ok.csv"], 2, "repeats"),
    "ids_unknown": (["--cell-ids", "1,99", "--truth", "@truth_ok.csv"], 2, "not in the truth"),
    "ids_empty": (["--cell-ids", ","], 2, "non-empty"),
    "truth_garbage": (["--cell-ids", "1", "--truth", "@garbage.csv"], 1, "not a readable CSV"),
    "truth_empty": (["--cell-ids", "1", "--truth", "@empty.csv"], 1, "is an empty file"),
    "truth_folder": (["--cell-ids", "1", "--truth", "@folder"], 1, "is a folder"),
    "truth_missing": (["--cell-ids", "1", "--truth", "nosuch.csv"], 1, "does not exist"),
    "truth_psi": (["--cell-ids", "1", "--truth", "@truth_psi.csv"], 1, "psi must hold"),
    "truth_psi_range": (["--cell-ids", "1", "--truth", "@truth_psi_range.csv"], 1, "[0, 1]"),
    "truth_occupied": (["--cell-ids", "1", "--truth", "@truth_occupied.csv"], 1, "['maybe']"),
    "truth_ids": (["--cell-ids", "2", "--truth", "@truth_ids.csv"], 1, "integer cell ids"),
    "truth_dup": (["--cell-ids", "1", "--truth", "@truth_dup.csv"], 1, "repeats cell ids"),
    "truth_columns": (["--cell-ids", "1", "--truth", "@truth_cols.csv"], 1, "lacks columns"),
    "species_unknown": (["--cell-ids", "1", "--species", "Dodo"], 2, "--species 'Dodo'"),
    "species_and_truth": (
        ["--cell-ids", "1", "--species", "Virtual Quail", "--truth", "@truth_ok.csv"],
        2,
        "not both",
    ),
}


def _expand(args: list[str], files: dict[str, Path]) -> list[str]:
    return [str(files[a[1:]]) if a.startswith("@") else a for a in args]


@pytest.mark.parametrize("name", list(EVALUATE))
def test_evaluate_refused(name, files, workdir):
    args, code, needle = EVALUATE[name]
    before = snapshot(workdir)
    res = CliRunner().invoke(main, ["evaluate", *_expand(args, files)], catch_exceptions=False)
    assert_one_line_error(res.stderr, res.exit_code, code, needle)
    assert res.stdout == "" and snapshot(workdir) == before


def test_evaluate_reads_boolean_words(files):
    """``occupied`` written as true/no/1 is read as booleans (text is not all True)."""
    r = evaluate_selection([1, 2, 3], files["truth_ok.csv"])
    assert (r["n_occupied"], r["prevalence"]) == (2, round(2 / 3, 6))


# ------------------------------------------------------------------------------------------
# the Python functions: a ReserveError of the right kind, one line, nothing written

SELECT_ARGS = {"cells": "@cells", "out": "run"}  # a select call's defaults here: nothing is written
INGEST_ARGS = {"ebd": "e.txt", "sed": "s.txt", "species": "Wood Thrush", "output": "o.gpkg"}

API = {
    # select_reserve (budget is the first argument, given as "budget")
    "select_cells_int": ("select", {"budget": 30, "cells": 5}, InvalidInputError, "cells"),
    "select_species_int": ("select", {"budget": 30, "species": 3}, InvalidInputError, "species"),
    "select_species_list_int": ("select", {"budget": 3, "species": [3]}, InvalidInputError, ""),
    "select_budget_text": ("select", {"budget": "30"}, InvalidInputError, "budget"),
    "select_budget_none": ("select", {"budget": None}, InvalidInputError, "budget is required"),
    "select_budget_list": ("select", {"budget": [3]}, InvalidInputError, "budget"),
    "select_budget_bool": ("select", {"budget": True}, InvalidInputError, "budget"),
    "select_budget_nan": ("select", {"budget": float("nan")}, InvalidInputError, "budget"),
    "select_method_int": ("select", {"budget": 3, "method": 3}, InvalidInputError, "method"),
    "select_model_none": ("select", {"budget": 3, "model": None}, InvalidInputError, "model"),
    "select_C_list": ("select", {"budget": 3, "C": [1]}, InvalidInputError, "C must be"),
    "select_seed_float": ("select", {"budget": 3, "seed": 1.5}, InvalidInputError, "seed"),
    "select_out_int": ("select", {"budget": 3, "out": 3}, InvalidInputError, "out must be"),
    "select_map_int": ("select", {"budget": 3, "map": 3}, InvalidInputError, "map must be"),
    "select_overwrite_text": (
        "select",
        {"budget": 3, "overwrite": "yes"},
        InvalidInputError,
        "overwrite",
    ),
    "select_time_nan": (
        "select",
        {"budget": 3, "time_limit": float("nan")},
        InvalidInputError,
        "time_limit",
    ),
    "select_locked_int": ("select", {"budget": 3, "locked_in": 3}, InvalidInputError, "locked"),
    "select_bootstrap": ("select", {"budget": 3, "bootstrap": -1}, InvalidInputError, "boot"),
    "select_n_jobs": ("select", {"budget": 3, "n_jobs": 0}, InvalidInputError, "n_jobs"),
    "select_progress": ("select", {"budget": 3, "progress": 3}, InvalidInputError, "progress"),
    "select_config": ("select", {"budget": 3, "config": 3}, InvalidInputError, "config"),
    "select_public_int": ("select", {"budget": 3, "public": 3}, InvalidInputError, "public"),
    "select_public_missing": (
        "select",
        {"budget": 3, "public": "nosuch.geojson"},
        DataFileError,
        "public",
    ),
    "select_cells_folder": (
        "select",
        {"budget": 3, "cells": "@folder"},
        DataFileError,
        "is a folder",
    ),
    "select_cells_text": (
        "select",
        {"budget": 3, "cells": "@text.gpkg"},
        DataFileError,
        "is not a GeoPackage",
    ),
    "select_out_existing": (
        "select",
        {"budget": 3, "out": "prev"},
        OutputExistsError,
        "--overwrite",
    ),
    "select_map_folder": ("select", {"budget": 3, "map": "@folder"}, DataFileError, "folder"),
    "select_map_proc": (
        "select",
        {"budget": 3, "map": "/proc/x.html"},
        DataFileError,
        "cannot be written",
    ),
    # ingest
    "ingest_ebd_int": ("ingest", {"ebd": 5}, InvalidInputError, "ebd must be a path"),
    "ingest_species_int": ("ingest", {"species": 3}, InvalidInputError, "species"),
    "ingest_species_empty": ("ingest", {"species": []}, InvalidInputError, "species"),
    "ingest_output_int": ("ingest", {"output": 5}, InvalidInputError, "output must be"),
    "ingest_cell_size": ("ingest", {"cell_size": "x"}, InvalidInputError, "cell_size"),
    "ingest_chunksize": ("ingest", {"chunksize": 0}, InvalidInputError, "chunksize"),
    "ingest_chunksize_float": ("ingest", {"chunksize": 1.5}, InvalidInputError, "chunksize"),
    "ingest_threshold": ("ingest", {"public_threshold": "a"}, InvalidInputError, "threshold"),
    "ingest_categorical_int": ("ingest", {"categorical": 5}, InvalidInputError, "categorical"),
    "ingest_raster_int": ("ingest", {"categorical": {"a": 5}}, InvalidInputError, "raster"),
    "ingest_legend_int": ("ingest", {"legend": 3}, InvalidInputError, "legend"),
    "ingest_public_int": ("ingest", {"public": 5}, InvalidInputError, "public"),
    "ingest_public_list": ("ingest", {"public": [5]}, InvalidInputError, "public"),
    "ingest_filters": ("ingest", {"filters": 5}, InvalidInputError, "filters"),
    "ingest_progress": ("ingest", {"progress": "x"}, InvalidInputError, "progress"),
    "ingest_overwrite": ("ingest", {"overwrite": "x"}, InvalidInputError, "overwrite"),
    "ingest_engine": ("ingest", {"engine": "x"}, InvalidInputError, "engine"),
    "ingest_region_int": ("ingest", {"region": 5}, InvalidInputError, "region"),
    "ingest_crs": ("ingest", {"crs": "EPSG:4326"}, InvalidInputError, "equal-area"),
    "ingest_ebd_missing": ("ingest", {}, DataFileError, "does not exist"),
    # evaluate
    "evaluate_words": ("evaluate", {"selected_cell_ids": ["a"]}, InvalidInputError, "integers"),
    "evaluate_bools": ("evaluate", {"selected_cell_ids": [True]}, InvalidInputError, "integers"),
    "evaluate_text": ("evaluate", {"selected_cell_ids": "abc"}, InvalidInputError, "1-D"),
    "evaluate_none": ("evaluate", {"selected_cell_ids": None}, InvalidInputError, "1-D"),
    "evaluate_nested": ("evaluate", {"selected_cell_ids": [[1]]}, InvalidInputError, "1-D"),
    "evaluate_fraction": ("evaluate", {"selected_cell_ids": [1.5]}, InvalidInputError, "integ"),
    "evaluate_truth_int": (
        "evaluate",
        {"selected_cell_ids": [1], "truth_path": 5},
        InvalidInputError,
        "--truth must be a path",
    ),
    "read_selection_int": ("read_selection", {"path": 5}, InvalidInputError, "must be a path"),
    "read_selection_dir": ("read_selection", {"path": "@folder"}, DataFileError, "folder"),
    "read_truth_garbage": ("read_truth", {"truth_path": "@garbage.csv"}, DataFileError, "CSV"),
    "read_units_folder": ("read_planning_units", {"path": "@folder"}, DataFileError, "folder"),
    "read_units_empty": ("read_planning_units", {"path": "@empty.gpkg"}, DataFileError, "Geo"),
}
CALLS = {
    "select": lambda kw: select_reserve(kw.pop("budget"), **{**SELECT_ARGS, **kw}),
    "ingest": lambda kw: ingest(**{**INGEST_ARGS, **kw}),
    "evaluate": lambda kw: evaluate_selection(**kw),
    "read_selection": lambda kw: read_selection(**kw),
    "read_truth": lambda kw: read_truth(**kw),
    "read_planning_units": lambda kw: read_planning_units(**kw),
}


@pytest.mark.parametrize("name", list(API))
def test_api_refused(name, files, workdir):
    what, kw, error, needle = API[name]
    (workdir / "prev").mkdir()
    (workdir / "prev" / "reserve.gpkg").write_bytes(b"previous")
    before = snapshot(workdir)
    kw = {
        k: str(files[v[1:]]) if isinstance(v, str) and v.startswith("@") else v
        for k, v in kw.items()
    }
    if what == "select":
        kw = {
            k: str(files[v[1:]]) if v == "@cells" else v for k, v in {**SELECT_ARGS, **kw}.items()
        }
    with pytest.raises(ReserveError) as info:
        CALLS[what](dict(kw))
    assert isinstance(info.value, error), repr(info.value)
    message = str(info.value)
    assert "\n" not in message and needle in message, message
    assert snapshot(workdir) == before
