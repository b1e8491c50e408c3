"""``reserve select`` under hostile input: one error line, the right exit code, nothing written.

Every refused case runs in process (click's runner) in an empty working folder, and fails
before any model is fitted; the folder must be byte for byte as before (no file, no folder,
no temporary). The legal-but-odd inputs at the end are solved with ``--model linear``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyogrio
import pytest
import shapely
from click.testing import CliRunner

from reserve.cli import main
from tests.conftest import assert_one_line_error, snapshot
from tests.test_select import make_units, write_units


def _variants(units: gpd.GeoDataFrame) -> dict[str, gpd.GeoDataFrame]:
    """Planning units that are wrong in one way each."""
    cand = units["role"] == "candidate"
    train = units["role"] == "train"
    n = len(units)
    every7 = np.arange(n) % 7 == 0
    empty = units.geometry.copy()
    empty[3] = shapely.Polygon()
    bowtie = units.geometry.copy()
    x0, y0, x1, y1 = bowtie[8].bounds
    bowtie[8] = shapely.Polygon([(x0, y0), (x1, y1), (x1, y0), (x0, y1)])
    return {
        "bowtie": units.set_geometry(bowtie),
        "nocol": units.drop(columns="label"),
        "notrain": units.assign(role=units.role.where(~train, "other")),
        "oneclass": units.assign(label=units.label.where(~train, 1)),
        "nan": units.assign(lc_forest=units.lc_forest.where(~cand)),
        "inf": units.assign(elev_mean=units.elev_mean.where(~cand, np.inf)),
        "huge": units.assign(elev_mean=units.elev_mean.where(units.index != 7, 1e308)),
        "nodata": units.assign(lc_crop=units.lc_crop.where(~(cand & every7), -3.4028235e38)),
        "dup": units.assign(cell_id=units.cell_id.where(units.index != 3, 2)),
        "noid": units.assign(cell_id=units.cell_id.astype(float).where(units.index != 4)),
        "nullgeom": units.set_geometry(units.geometry.where(units.index != 5, None)),
        "emptygeom": units.set_geometry(empty),
        "badrole": units.assign(role=units.role.where(units.index != 6, "Train")),
        "boolword": units.assign(locked_out=np.where(every7, "maybe", "false")),
        "booltwo": units.assign(locked_out=np.where(every7, 2, 0)),
        "boolfloat": units.assign(locked_out=np.where(every7, 0.5, 0.0)),
        "labeltext": units.assign(label=units.label.astype(str).where(~train, "yes")),
        "label2": units.assign(label=units.label.where(~train | (units.label == 0), 2)),
        "nofeatures": units.drop(columns=["lc_forest", "lc_crop", "elev_mean"]),
        "alllocked": units.assign(locked_out=cand),
        "price_nan": units.assign(price=np.where(cand & every7, np.nan, 10.0)),
        "price_zero": units.assign(price=np.where(cand & every7, 0.0, 10.0)),
        "price_text": units.assign(price="cheap"),
        "land_price": units.assign(land_price=np.where(cand, 10.0, 0.0)),
        "public_col": units.assign(owned=train),
        "many_in": units.assign(owned=cand),
        "text_col": units.assign(owned=np.where(cand, "x", "")),
        "notable": units.drop(columns="geometry"),
        "notgrid": units.set_geometry(
            units.geometry.where(~every7, units.geometry.translate(xoff=700.0))
        ),
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """Every input file of the cases, written once, outside the working folder."""
    d = tmp_path_factory.mktemp("hostile_select_inputs")
    units = make_units()
    out = {"cells": write_units(d / "cells.gpkg"), "folder": d / "afolder"}
    out["folder"].mkdir()
    for name, frame in _variants(units).items():
        path = d / f"{name}.gpkg"
        if name == "notable":
            pyogrio.write_dataframe(pd.DataFrame(frame), path, layer="planning_units")
        else:
            write_units(path, frame)
        out[name] = path
    for name, frame in {
        "mislabelled": units.set_crs(4326, allow_override=True),
        "feet": units.to_crs(2264),
        "footgrid": units.set_crs(2264, allow_override=True),
    }.items():
        write_units(d / f"{name}.gpkg", frame)
        out[name] = d / f"{name}.gpkg"
    nocrs = units.set_crs(None, allow_override=True)
    pyogrio.write_dataframe(nocrs, d / "nocrs.gpkg", layer="planning_units", driver="GPKG")
    out["nocrs"] = d / "nocrs.gpkg"
    pyogrio.write_dataframe(units, d / "nolayer.gpkg", layer="cells", driver="GPKG")
    out["nolayer"] = d / "nolayer.gpkg"
    for name, data in {"text": b"not a geopackage", "empty": b"", "half": None}.items():
        path = d / f"{name}.gpkg"
        path.write_bytes(data if data is not None else out["cells"].read_bytes()[:3000])
        out[name] = path
    far = gpd.GeoDataFrame(geometry=[shapely.box(0, 0, 1000, 1000)], crs=5070)
    far.to_file(d / "far.geojson")
    out["far"] = d / "far.geojson"
    nocrs_poly = d / "nocrs_poly.gpkg"
    pyogrio.write_dataframe(far.set_crs(None, allow_override=True), nocrs_poly, driver="GPKG")
    out["nocrs_poly"] = nocrs_poly
    (d / "garbage.geojson").write_text("{ not json")
    out["garbage_poly"] = d / "garbage.geojson"
    toml = {
        "badtoml": "budget = [\n",
        "unknownkey": "budgets = 3\n",
        "cfg_method": 'method = "bogus"\n',
        "cfg_budget": 'budget = "abc"\n',
        "cfg_budget0": "budget = 0\n",
        "cfg_seed": "seed = -1\n",
        "cfg_seed_huge": "seed = 99999999999999999999\n",
        "cfg_overwrite": 'overwrite = "yes"\n',
        "cfg_C": "C = -1\n",
        "cfg_model": 'model = "gam"\n',
        "cfg_out": "out = 5\n",
        "cfg_species": "species = 3\n",
        "cfg_njobs": "n_jobs = 0\n",
        "cfg_time": 'time_limit = "soon"\n',
    }
    for name, text in toml.items():
        (d / f"{name}.toml").write_text(text)
        out[name] = d / f"{name}.toml"
    (d / "latin1.toml").write_bytes("method = 'caf\xe9'\n".encode("latin-1"))
    out["latin1"] = d / "latin1.toml"
    out["not_utf8"] = d / "cells\udcff.gpkg"  # the name's byte 0xff is not UTF-8
    out["not_utf8"].write_bytes(out["cells"].read_bytes())
    (d / "afile").write_text("x")
    out["afile"] = d / "afile"
    return out


# (arguments, exit code, a fragment of the message); "@name" is a file of the fixture.
# --cells @cells and --model linear are added unless the case gives --cells.
CASES = {
    # options (usage errors, exit 2)
    "budget_zero": (["--budget", "0"], 2, "budget must be an integer >= 1"),
    "budget_negative": (["--budget", "-2"], 2, "budget must be an integer >= 1"),
    "budget_fraction": (["--budget", "2.5"], 2, "budget must be an integer"),
    "budget_word": (["--budget", "ten"], 2, "budget must be an integer"),
    "budget_empty": (["--budget", ""], 2, "budget must be an integer"),
    "budget_exp": (["--budget", "1e3"], 2, "budget must be an integer"),
    "budget_missing": ([], 2, "budget is required"),
    "budget_too_big": (["--budget", "100000"], 2, "must be smaller than the"),
    "method_unknown": (["--budget", "3", "--method", "ttk2"], 2, "--method 'ttk2' is unknown"),
    "method_empty": (["--budget", "3", "--method", ""], 2, "is unknown"),
    "model_unknown": (["--budget", "3", "--model", "gam"], 2, "--model 'gam' is unknown"),
    "model_method": (["--budget", "3", "--method", "svm", "--model", "rbf"], 2, "needs method"),
    "penalty_negative": (["--budget", "3", "--boundary-penalty", "-1"], 2, "must be a number >= 0"),
    "penalty_word": (["--budget", "3", "--boundary-penalty", "much"], 2, "or 'auto'"),
    "penalty_inf": (["--budget", "3", "--boundary-penalty", "inf"], 2, "must be a number >= 0"),
    "penalty_bootstrap": (
        ["--budget", "3", "--bootstrap", "2", "--boundary-penalty", "1"],
        2,
        "drop --bootstrap or --boundary-penalty",
    ),
    "penalty_method": (
        ["--budget", "3", "--method", "svm", "--boundary-penalty", "1"],
        2,
        "needs method 'ttk', 'ttk-mip' or 'ttk-bnb'",
    ),
    "penalty_notgrid": (
        ["--budget", "3", "--cells", "@notgrid", "--boundary-penalty", "1"],
        1,
        "not a regular square grid",
    ),
    "C_negative": (["--budget", "3", "--C", "-1"], 2, "C must be a positive number"),
    "C_zero": (["--budget", "3", "--C", "0"], 2, "C must be a positive number"),
    "C_word": (["--budget", "3", "--C", "abc"], 2, "C must be a positive number"),
    "C_nan": (["--budget", "3", "--C", "nan"], 2, "C must be a positive number"),
    "C_inf": (["--budget", "3", "--C", "inf"], 2, "C must be a positive number"),
    "seed_negative": (["--budget", "3", "--seed", "-1"], 2, "seed must be an integer >= 0"),
    "seed_word": (["--budget", "3", "--seed", "x"], 2, "seed must be an integer"),
    "seed_fraction": (["--budget", "3", "--seed", "1.5"], 2, "seed must be an integer"),
    "seed_huge": (["--budget", "3", "--seed", "99999999999999999999"], 2, "0 to 4294967295"),
    "seed_2_32": (["--budget", "3", "--seed", "4294967296"], 2, "0 to 4294967295"),
    "bootstrap_negative": (["--budget", "3", "--bootstrap", "-1"], 2, "bootstrap must be"),
    "bootstrap_word": (["--budget", "3", "--bootstrap", "x"], 2, "bootstrap must be"),
    "n_jobs_zero": (["--budget", "3", "--n-jobs", "0"], 2, "n_jobs must be an integer >= 1"),
    "n_jobs_word": (["--budget", "3", "--n-jobs", "x"], 2, "n_jobs must be an integer"),
    "time_word": (["--budget", "3", "--time-limit", "x"], 2, "time_limit must be a number"),
    "time_negative": (["--budget", "3", "--time-limit", "-5"], 2, "time_limit must be"),
    "time_nan": (["--budget", "3", "--time-limit", "nan"], 2, "time_limit must be"),
    "unknown_flag": (["--budget", "3", "--bogus"], 2, "No such option"),
    "flag_without_value": (
        ["--cells", "@cells", "--model", "linear", "--budget"],
        2,
        "requires an argument",
    ),
    "money_negative": (["--budget", "-5", "--cost-column", "lc_crop"], 2, "positive total"),
    "money_word": (["--budget", "lots", "--cost-column", "lc_crop"], 2, "positive total"),
    "cost_no_column": (["--budget", "100", "--cost-column", "price"], 2, "not a column"),
    "cost_misspelt": (
        ["--budget", "100", "--cells", "@land_price", "--cost-column", "land_prise"],
        2,
        "is not a column of planning_units; did you mean 'land_price'?",
    ),
    "cost_text_column": (["--budget", "100", "--cost-column", "role"], 2, "is not numeric"),
    "species_unknown": (["--budget", "3", "--species", "Dodo"], 2, "have no label__"),
    "species_empty": (["--budget", "3", "--species", ""], 2, "species must be species names"),
    "species_twice": (["--budget", "3", "--species", "A b", "--species", "a-B"], 2, "twice"),
    "species_method": (
        ["--budget", "3", "--species", "A", "--species", "B", "--joint-fit", "--method", "tsvm"],
        2,
        "selects for one species",
    ),
    "species_cv": (
        ["--budget", "3", "--species", "A", "--species", "B", "--joint-fit", "--C", "cv"],
        2,
        "--C 'cv' chooses C for one species",
    ),
    "species_money": (
        ["--budget", "3", "--species", "A", "--species", "B", "--joint-fit", "--cost-column", "x"],
        2,
        "not supported",
    ),
    "locked_in_unknown": (["--budget", "3", "--locked-in", "nosuch"], 2, "neither a column"),
    "locked_out_unknown": (["--budget", "3", "--locked-out", "nosuch"], 2, "neither a column"),
    "locked_in_text_role": (["--budget", "3", "--locked-in", "role"], 2, "is not boolean"),
    "locked_in_float": (["--budget", "3", "--locked-in", "lc_forest"], 2, "is not boolean"),
    "locked_in_folder": (["--budget", "3", "--locked-in", "@folder"], 1, "cannot be read by GDAL"),
    "locked_in_far": (["--budget", "3", "--locked-in", "@far"], 1, "touches no cell"),
    "locked_in_nocrs": (["--budget", "3", "--locked-in", "@nocrs_poly"], 1, "CRS"),
    "locked_in_garbage": (
        ["--budget", "3", "--locked-in", "@garbage_poly"],
        1,
        "cannot be read by GDAL",
    ),
    # config files (usage errors); a flag given for the same key does not excuse the file
    "config_toml": (["--budget", "3", "--config", "@badtoml"], 2, "is not valid TOML"),
    "config_unknown": (["--budget", "3", "--config", "@unknownkey"], 2, "unknown keys"),
    "config_missing": (["--budget", "3", "--config", "nosuch.toml"], 2, "cannot be read"),
    "config_folder": (["--budget", "3", "--config", "@folder"], 2, "cannot be read"),
    "config_latin1": (["--budget", "3", "--config", "@latin1"], 2, "cannot be read"),
    "config_method": (
        ["--budget", "3", "--method", "ttk", "--config", "@cfg_method"],
        2,
        "key 'method' is invalid",
    ),
    "config_budget": (["--budget", "3", "--config", "@cfg_budget"], 2, "key 'budget'"),
    "config_budget0": (["--budget", "3", "--config", "@cfg_budget0"], 2, "key 'budget'"),
    "config_seed": (["--budget", "3", "--seed", "1", "--config", "@cfg_seed"], 2, "key 'seed'"),
    "config_seed_huge": (["--budget", "3", "--config", "@cfg_seed_huge"], 2, "0 to 4294967295"),
    "config_overwrite": (
        ["--budget", "3", "--overwrite", "--config", "@cfg_overwrite"],
        2,
        "key 'overwrite'",
    ),
    "config_C": (["--budget", "3", "--C", "1", "--config", "@cfg_C"], 2, "key 'C'"),
    "config_model": (["--budget", "3", "--config", "@cfg_model"], 2, "key 'model'"),
    "config_out": (["--budget", "3", "--out", "o", "--config", "@cfg_out"], 2, "key 'out'"),
    "config_species": (["--budget", "3", "--config", "@cfg_species"], 2, "key 'species'"),
    "config_n_jobs": (
        ["--budget", "3", "--n-jobs", "1", "--config", "@cfg_njobs"],
        2,
        "key 'n_jobs'",
    ),
    "config_time": (["--budget", "3", "--config", "@cfg_time"], 2, "key 'time_limit'"),
    # the cells file (data errors, exit 1)
    "cells_missing": (["--budget", "3", "--cells", "nosuch.gpkg"], 1, "does not exist"),
    "cells_folder": (["--budget", "3", "--cells", "@folder"], 1, "is a folder"),
    "cells_text": (["--budget", "3", "--cells", "@text"], 1, "is not a GeoPackage"),
    "cells_empty": (["--budget", "3", "--cells", "@empty"], 1, "is not a GeoPackage"),
    "cells_half": (["--budget", "3", "--cells", "@half"], 1, "is not a GeoPackage"),
    "cells_nolayer": (["--budget", "3", "--cells", "@nolayer"], 1, "no 'planning_units' layer"),
    "cells_nocrs": (["--budget", "3", "--cells", "@nocrs"], 1, "has no CRS"),
    "cells_mislabelled": (
        ["--budget", "3", "--cells", "@mislabelled"],
        1,
        "is in degrees but its coordinates reach x 1.1e+06..1.136e+06",
    ),
    "cells_feet": (["--budget", "3", "--cells", "@feet"], 1, "is in US survey foot"),
    "cells_footgrid": (["--budget", "3", "--cells", "@footgrid"], 1, "ogr2ogr -t_srs EPSG:5070"),
    "cells_bowtie": (
        ["--budget", "3", "--cells", "@bowtie"],
        1,
        "1 planning units have invalid geometry (self-intersecting or otherwise; cell_id ['8'])",
    ),
    "cells_nocol": (["--budget", "3", "--cells", "@nocol"], 1, "lacks the columns ['label']"),
    "cells_notable": (["--budget", "3", "--cells", "@notable"], 1, "['geometry']"),
    "cells_notrain": (["--budget", "3", "--cells", "@notrain"], 1, "has no training cells"),
    "cells_oneclass": (["--budget", "3", "--cells", "@oneclass"], 1, "every training cell"),
    "cells_nan": (["--budget", "3", "--cells", "@nan"], 1, "NaN or infinite features"),
    "cells_inf": (["--budget", "3", "--cells", "@inf"], 1, "NaN or infinite features"),
    "cells_huge": (
        ["--budget", "3", "--cells", "@huge"],
        1,
        "as large as 1e+308 (columns ['elev_mean']; cell_id [7])",
    ),
    "cells_nodata": (
        ["--budget", "3", "--cells", "@nodata"],
        1,
        "a raster's nodata value read as data",
    ),
    "cells_dup": (["--budget", "3", "--cells", "@dup"], 1, "cell_id repeats ['2']"),
    "cells_noid": (["--budget", "3", "--cells", "@noid"], 1, "have no cell_id"),
    "cells_nullgeom": (["--budget", "3", "--cells", "@nullgeom"], 1, "have no geometry"),
    "cells_emptygeom": (["--budget", "3", "--cells", "@emptygeom"], 1, "have no geometry"),
    "cells_badrole": (["--budget", "3", "--cells", "@badrole"], 1, "column role holds ['Train']"),
    "cells_boolword": (["--budget", "3", "--cells", "@boolword"], 1, "holds ['maybe']"),
    "cells_booltwo": (["--budget", "3", "--cells", "@booltwo"], 1, "is not boolean"),
    "cells_boolfloat": (["--budget", "3", "--cells", "@boolfloat"], 1, "is not boolean"),
    "cells_labeltext": (["--budget", "3", "--cells", "@labeltext"], 1, "label other than 0"),
    "cells_label2": (["--budget", "3", "--cells", "@label2"], 1, "label other than 0 or 1"),
    "cells_nofeatures": (["--budget", "3", "--cells", "@nofeatures"], 1, "no numeric feature"),
    "cells_alllocked": (["--budget", "3", "--cells", "@alllocked"], 1, "no candidate cells"),
    "cost_nan": (
        ["--budget", "100", "--cells", "@price_nan", "--cost-column", "price"],
        2,
        "missing/NaN",
    ),
    "cost_zero": (
        ["--budget", "100", "--cells", "@price_zero", "--cost-column", "price"],
        2,
        "zero or negative",
    ),
    "cost_text": (
        ["--budget", "100", "--cells", "@price_text", "--cost-column", "price"],
        2,
        "is not numeric",
    ),
    "cost_everything": (
        ["--budget", "1e9", "--cells", "@price_zero", "--cost-column", "lc_crop"],
        2,
        "buys every candidate",
    ),
    "cost_nothing": (
        ["--budget", "1e-9", "--cells", "@price_zero", "--cost-column", "elev_mean"],
        2,
        "buys no candidate",
    ),
    "locked_in_public": (
        ["--budget", "3", "--cells", "@public_col", "--locked-in", "owned"],
        2,
        "not candidates",
    ),
    "locked_in_over_budget": (
        ["--budget", "3", "--cells", "@many_in", "--locked-in", "owned"],
        2,
        "more than budget=3",
    ),
    "locked_in_text": (
        ["--budget", "3", "--cells", "@text_col", "--locked-in", "owned"],
        2,
        "holds ['x']",
    ),
    "locked_both": (
        [
            "--budget",
            "3",
            "--cells",
            "@public_col",
            "--locked-in",
            "owned",
            "--locked-out",
            "owned",
        ],
        2,
        "share",
    ),
    # output paths (data errors, exit 1), all refused before the solve
    "out_is_file": (["--budget", "3", "--out", "@afile"], 1, "is a file"),
    "out_under_file": (["--budget", "3", "--out", "@afile/sub"], 1, "is a file, not a folder"),
    "out_proc": (["--budget", "3", "--out", "/proc/reserve_out"], 1, "cannot be written"),
    "map_is_folder": (["--budget", "3", "--map", "@folder"], 1, "is a folder"),
    "map_in_proc": (["--budget", "3", "--map", "/proc/x.html"], 1, "cannot be written"),
    "map_under_file": (["--budget", "3", "--map", "@afile/m.html"], 1, "is a file"),
    "map_proc_overwrite": (
        ["--budget", "3", "--map", "/proc/x.html", "--overwrite"],
        1,
        "cannot be written",
    ),
    "out_name_552": (["--budget", "3", "--out", "a" * 552], 1, "is 552 bytes, longer than the 255"),
    "out_name_256": (["--budget", "3", "--out", "b" * 256 + "/run"], 1, "is 256 bytes"),
    "map_name_256": (["--budget", "3", "--map", "m" * 251 + ".html"], 1, "is 256 bytes"),
    "out_path_4k": (["--budget", "3", "--out", "/".join(["d" * 200] * 21)], 1, "too long for the"),
    "out_not_utf8": (["--budget", "3", "--out", "bad\udcff"], 1, "'bad\\udcff' holds bytes"),
    "map_not_utf8": (["--budget", "3", "--map", "m\udcff.html"], 1, "not UTF-8"),
    "cells_not_utf8": (["--budget", "3", "--cells", "@not_utf8"], 1, "not UTF-8 text"),
    "out_existing": (["--budget", "3", "--out", "prev"], 1, "already exists; pass --overwrite"),
    "map_existing": (
        ["--budget", "3", "--out", "new", "--map", "prev/m.html"],
        1,
        "already exists; pass --overwrite",
    ),
    "default_existing": (["--budget", "3"], 1, "results/reserve.gpkg"),
    "map_is_gpkg": (
        ["--budget", "3", "--out", "prev", "--overwrite", "--map", "prev/reserve.gpkg"],
        2,
        "the GeoPackage's own path",
    ),
    "out_replaces_cells": (
        ["--budget", "3", "--cells", "prev/reserve.gpkg", "--out", "prev", "--overwrite"],
        2,
        "would replace the --cells file",
    ),
    "out_map_existing": (["--budget", "3", "--out", "onlymap"], 1, "cells_ttk_k3.html"),
    "out_csv_existing": (["--budget", "3", "--out", "onlycsv"], 1, "ranking.csv' (--out) already"),
    # the outputs are checked before the cells file is read (a refusal in well under 1 s)
    "out_before_cells_read": (
        ["--budget", "3", "--cells", "@text", "--out", "prev"],
        1,
        "already exists; pass --overwrite",
    ),
    # a missing input is named even when the default output exists (inputs before outputs)
    "input_before_output": (["--budget", "3", "--cells", "nosuch.gpkg"], 1, "does not exist"),
}
# where the working folder holds previous outputs
PREVIOUS = {
    "out_replaces_cells",
    "out_map_existing",
    "out_existing",
    "map_existing",
    "default_existing",
    "input_before_output",
    "map_proc_overwrite",
    "map_is_gpkg",
    "out_before_cells_read",
    "out_csv_existing",
}


def _args(case: list[str], files: dict[str, Path]) -> list[str]:
    def expand(a: str) -> str:
        if not a.startswith("@"):
            return a
        name, _, rest = a[1:].partition("/")
        return str(files[name] / rest) if rest else str(files[name])

    args = [expand(a) for a in case]
    if "--cells" not in args:
        args += ["--cells", str(files["cells"])]
    if "--model" not in args:
        args += ["--model", "linear"]
    return args


def _previous_outputs(folder: Path) -> None:
    """Outputs of an earlier run: default paths and a folder of its own."""
    for sub in ("results", "prev"):
        (folder / sub).mkdir()
        (folder / sub / "reserve.gpkg").write_bytes(b"previous " + sub.encode())
    write_units(folder / "prev" / "reserve.gpkg")  # a cells file too (out_replaces_cells)
    (folder / "prev" / "m.html").write_text("previous map")
    (folder / "maps").mkdir()
    (folder / "maps" / "cells_ttk_k3.html").write_text("previous default map")
    (folder / "onlymap").mkdir()  # --out onlymap: the map of the same name is already there
    (folder / "onlymap" / "cells_ttk_k3.html").write_text("previous map in --out")
    (folder / "onlycsv").mkdir()  # --out onlycsv: a ranking table of an earlier run is there
    (folder / "onlycsv" / "ranking.csv").write_text("rank,cell_id\n")


@pytest.mark.parametrize("name", list(CASES))
def test_refused(name, files, workdir):
    case, code, needle = CASES[name]
    if name in PREVIOUS:
        _previous_outputs(workdir)
    before = snapshot(workdir)
    inputs_before = snapshot(files["cells"].parent)
    res = CliRunner().invoke(main, ["select", *_args(case, files)], catch_exceptions=False)
    assert_one_line_error(res.stderr, res.exit_code, code, needle)
    assert res.stdout == ""
    assert snapshot(workdir) == before
    assert snapshot(files["cells"].parent) == inputs_before


# ------------------------------------------------------------------------------------------
# legal but odd: handled, not refused or mangled


def _odd(units: gpd.GeoDataFrame) -> dict[str, tuple[gpd.GeoDataFrame, np.ndarray]]:
    """Odd planning units and the cells each must leave out of the selection."""
    n = len(units)
    cand = (units["role"] == "candidate").to_numpy()
    lock = cand & (np.arange(n) % 3 == 0)
    none = np.zeros(n, bool)
    words = [("TRUE", "false"), ("Yes", "no"), ("t", "F"), ("1", "0")]
    out = {
        f"text_bool_{t}": (units.assign(locked_out=np.where(lock, t, f)), lock) for t, f in words
    }
    out["int_bool"] = (units.assign(locked_out=lock.astype(np.int64)), lock)
    with_missing = pd.Series(np.where(lock, True, None), dtype=object)
    out["bool_with_missing"] = (units.assign(locked_out=with_missing), lock)
    out["text_ids"] = (units.assign(cell_id=[f"c{i:03d}" for i in range(n)]), none)
    nan_labels = units["label"].astype(float).where(units["role"] == "train")
    out["nan_labels"] = (units.assign(label=nan_labels), none)
    return out


@pytest.mark.parametrize(
    "name",
    [
        "text_bool_TRUE",
        "text_bool_Yes",
        "text_bool_t",
        "text_bool_1",
        "int_bool",
        "bool_with_missing",
        "text_ids",
        "nan_labels",
    ],
)
def test_odd_but_legal(name, workdir):
    units, never = _odd(make_units())[name]
    cells = write_units(workdir / "cells.gpkg", units)
    args = ["select", "--budget", "5", "--model", "linear", "--cells", str(cells), "--out", "run"]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    selected = pyogrio.read_dataframe(workdir / "run" / "reserve.gpkg", layer="selected")
    assert len(selected) == 5
    ids = units["cell_id"].astype(str).to_numpy()
    assert not set(selected["cell_id"].astype(str)) & set(ids[never])
    assert set(selected["cell_id"].astype(str)) <= set(ids[units["role"] == "candidate"])
    if name == "text_ids":
        assert selected["cell_id"].str.startswith("c").all()  # kept as text
    assert sorted(os.listdir(workdir / "run")) == [
        "cells_ttk_k5.html",
        "ranking.csv",
        "reserve.gpkg",
        "summary.txt",
    ]


def test_text_booleans_select_as_real_booleans(workdir):
    """Locks written as text give the selection of the same locks written as booleans."""
    units = make_units()
    lock = ((units["role"] == "candidate") & (np.arange(len(units)) % 3 == 0)).to_numpy()
    picked = []
    for i, column in enumerate([lock, np.where(lock, "yes", "NO")]):
        cells = write_units(workdir / f"c{i}.gpkg", units.assign(locked_out=column))
        args = [
            "select",
            "--budget",
            "5",
            "--model",
            "linear",
            "--cells",
            str(cells),
            "--out",
            f"r{i}",
        ]
        assert CliRunner().invoke(main, args, catch_exceptions=False).exit_code == 0
        sel = pyogrio.read_dataframe(workdir / f"r{i}" / "reserve.gpkg", layer="selected")
        picked.append(sel["cell_id"].tolist())
    assert picked[0] == picked[1]


# ------------------------------------------------------------------------------------------
# where the outputs go (issue 17 item 3)


def test_out_holds_the_map_and_default_keeps_todays_paths(files, workdir):
    base = ["select", "--budget", "4", "--model", "linear", "--cells", str(files["cells"])]
    res = CliRunner().invoke(main, [*base, "--out", "region2"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    assert sorted(os.listdir(workdir)) == ["region2"]
    assert sorted(os.listdir(workdir / "region2")) == [
        "cells_ttk_k4.html",
        "ranking.csv",
        "reserve.gpkg",
        "summary.txt",
    ]
    res = CliRunner().invoke(main, base, catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    assert sorted(os.listdir(workdir)) == ["maps", "region2", "results"]
    assert sorted(os.listdir(workdir / "results")) == ["ranking.csv", "reserve.gpkg", "summary.txt"]
    assert os.listdir(workdir / "maps") == ["cells_ttk_k4.html"]


def test_refused_overwrite_keeps_both_outputs(files, workdir):
    """A run refused at the map (after a good run) leaves the GeoPackage and map as they were."""
    base = [
        "select",
        "--budget",
        "4",
        "--model",
        "linear",
        "--cells",
        str(files["cells"]),
        "--out",
        "run",
    ]
    assert CliRunner().invoke(main, base, catch_exceptions=False).exit_code == 0
    before = snapshot(workdir)
    (workdir / "run" / "blocker.html").mkdir()  # a folder where the new map would go
    before = snapshot(workdir)
    res = CliRunner().invoke(
        main,
        [*base, "--budget", "6", "--overwrite", "--map", "run/blocker.html"],
        catch_exceptions=False,
    )
    assert_one_line_error(res.stderr, res.exit_code, 1, "is a folder")
    assert snapshot(workdir) == before
    shutil.rmtree(workdir / "run" / "blocker.html")


def test_largest_seed_selects(files, workdir):
    """The largest accepted seed reaches every random step without an error."""
    args = [
        "select",
        "--budget",
        "4",
        "--cells",
        str(files["cells"]),
        "--out",
        "run",
        "--seed",
        "4294967295",
        "--C",
        "cv",
        "--bootstrap",
        "2",
    ]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    selected = pyogrio.read_dataframe(workdir / "run" / "reserve.gpkg", layer="selected")
    assert len(selected) == 4


@pytest.mark.parametrize("name", ["huge", "nodata"])
def test_huge_feature_refused_before_any_overflow(name, files, workdir):
    """A nodata value read as a feature stops the run before anything computes with it."""
    import warnings

    args = ["select", "--budget", "3", "--cells", str(files[name])]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert_one_line_error(res.stderr, res.exit_code, 1, "nodata value read as data")
    assert os.listdir(workdir) == []


# ------------------------------------------------------------------------------------------
# the same cells in another row order (a layer re-exported from QGIS): the same answer

# run_summary columns that name the input file or the clock, not the selection
_FILE_AND_CLOCK = [
    "cells_path",
    "cells_sha256",
    "config",
    "created_utc",
    "fit_seconds",
    "runtime_seconds",
]


def _layers(gpkg: Path) -> dict[str, pd.DataFrame]:
    out = {}
    for layer in pyogrio.list_layers(gpkg)[:, 0]:
        frame = pyogrio.read_dataframe(gpkg, layer=layer)
        out[layer] = frame.drop(columns=[c for c in _FILE_AND_CLOCK if c in frame])
    return out


@pytest.mark.parametrize("model", ["linear", "auto"])
def test_shuffled_rows_select_the_same(model, workdir):
    """Every layer of the outputs is identical for the planning units in two row orders."""
    units = make_units()
    shuffled = units.iloc[np.random.default_rng(1).permutation(len(units))]
    layers = []
    for i, frame in enumerate([units, shuffled.reset_index(drop=True)]):
        cells = write_units(workdir / f"c{i}.gpkg", frame)
        args = [
            "select",
            "--budget",
            "8",
            "--model",
            model,
            "--cells",
            str(cells),
            "--out",
            f"r{i}",
            "--bootstrap",
            "3",
        ]
        res = CliRunner().invoke(main, args, catch_exceptions=False)
        assert res.exit_code == 0, res.stderr
        layers.append(_layers(workdir / f"r{i}" / "reserve.gpkg"))
    assert layers[0].keys() == layers[1].keys()
    for name, frame in layers[0].items():
        pd.testing.assert_frame_equal(frame, layers[1][name], check_exact=True, obj=name)


@pytest.mark.slow
def test_default_region_shuffled_selects_the_same(tmp_path):
    """The embedded region's 30 cells, from its planning units in a random row order."""
    from reserve.design import default_cells
    from reserve.select import select_reserve

    path = default_cells()[0]
    units = pyogrio.read_dataframe(path, layer="planning_units")
    shuffled = units.iloc[np.random.default_rng(3).permutation(len(units))]
    pyogrio.write_dataframe(shuffled, tmp_path / "shuffled.gpkg", layer="planning_units")
    picked = [
        select_reserve(30, cells=cells).selected["cell_id"].tolist()
        for cells in (path, tmp_path / "shuffled.gpkg")
    ]
    assert picked[0] == picked[1]


def test_longest_names_are_written(files, workdir):
    """A 255-byte --out folder and a 250-byte --map: the tool's own temporaries still fit."""
    out, page = "o" * 255, "m" * 245 + ".html"
    args = [
        "select",
        "--budget",
        "3",
        "--model",
        "linear",
        "--cells",
        str(files["cells"]),
        "--out",
        out,
        "--map",
        page,
    ]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    assert sorted(os.listdir(workdir)) == [page, out]
    assert sorted(os.listdir(workdir / out)) == ["ranking.csv", "reserve.gpkg", "summary.txt"]


def _single_species_cells(path: Path) -> Path:
    """Planning units with the ingest's record of its one species (Wood Thrush)."""
    write_units(path)
    summary = pd.DataFrame(
        {"item": ["species"], "kept": [np.nan], "dropped": [np.nan], "value": ["Wood Thrush"]}
    )
    pyogrio.write_dataframe(summary, path, layer="ingest_summary", driver="GPKG", append=True)
    return path


def test_species_of_a_single_species_ingest_is_accepted(workdir):
    cells = str(_single_species_cells(workdir / "c.gpkg"))
    picked = []
    for i, extra in enumerate([[], ["--species", "wood thrush"]]):
        args = [
            "select",
            "--budget",
            "4",
            "--model",
            "linear",
            "--cells",
            cells,
            "--out",
            f"r{i}",
            *extra,
        ]
        res = CliRunner().invoke(main, args, catch_exceptions=False)
        assert res.exit_code == 0, res.stderr
        sel = pyogrio.read_dataframe(workdir / f"r{i}" / "reserve.gpkg", layer="selected")
        picked.append(sel["cell_id"].tolist())
    assert picked[0] == picked[1]


def test_another_species_of_a_single_species_ingest_is_refused(workdir):
    cells = str(_single_species_cells(workdir / "c.gpkg"))
    before = snapshot(workdir)
    args = ["select", "--budget", "4", "--cells", cells, "--species", "Veery", "--out", "r"]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert_one_line_error(
        res.stderr,
        res.exit_code,
        2,
        "--species 'Veery': the cells were ingested for one species, "
        "'Wood Thrush' (column label); pass --species 'Wood Thrush'",
    )
    assert snapshot(workdir) == before


def test_ranking_csv_beside_the_geopackage_with_lonlat_and_area(files, workdir):
    """ranking.csv is the ranking layer; centroids and areas agree with an independent sum."""
    import pyproj

    args = [
        "select",
        "--budget",
        "4",
        "--model",
        "linear",
        "--cells",
        str(files["cells"]),
        "--out",
        "run",
    ]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    assert "ranking CSV: run/ranking.csv" in res.stdout
    table = pd.read_csv(workdir / "run" / "ranking.csv")
    layer = pyogrio.read_dataframe(workdir / "run" / "reserve.gpkg", layer="ranking")
    pd.testing.assert_frame_equal(table, layer, check_dtype=False)
    assert table.columns[-3:].tolist() == ["longitude", "latitude", "area_ha"]
    units = make_units().set_index("cell_id")
    x0, y0, x1, y1 = shapely.bounds(units.loc[table["cell_id"]].geometry.to_numpy()).T
    lon, lat = pyproj.Transformer.from_crs(units.crs, 4326, always_xy=True).transform(
        (x0 + x1) / 2, (y0 + y1) / 2
    )
    np.testing.assert_allclose(table["longitude"], lon, atol=1e-6)
    np.testing.assert_allclose(table["latitude"], lat, atol=1e-6)
    np.testing.assert_allclose(table["area_ha"], (x1 - x0) * (y1 - y0) / 1e4)
    selected = pyogrio.read_dataframe(workdir / "run" / "reserve.gpkg", layer="selected")
    assert selected.columns[2:6].tolist() == ["cell_id", "longitude", "latitude", "area_ha"]
    mine = table[table["selected"]].set_index("cell_id")
    pd.testing.assert_frame_equal(
        selected.set_index("cell_id")[["longitude", "latitude", "area_ha"]],
        mine[["longitude", "latitude", "area_ha"]],
    )


def test_cells_locked_by_another_program(workdir):
    """A GeoPackage another program holds locked (QGIS editing) is named as locked."""
    import subprocess
    import sys

    cells = write_units(workdir.parent / "locked.gpkg")
    holder = (
        "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\nsys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", holder, str(cells)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "locked"
        args = ["select", "--budget", "3", "--cells", str(cells), "--out", "run"]
        res = CliRunner().invoke(main, args, catch_exceptions=False)
    finally:
        child.communicate("", timeout=30)
    assert_one_line_error(res.stderr, res.exit_code, 1, "is locked by another program")
    assert os.listdir(workdir) == []


def test_missing_cost_column_never_suggests_habitat_features(files, workdir):
    """Land-cover fractions and labels are no prices: a file without one says so."""
    args = ["select", "--budget", "100", "--cells", str(files["cells"]), "--cost-column", "price"]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    line = assert_one_line_error(res.stderr, res.exit_code, 2, "no column of it looks like a cost")
    for column in make_units().columns:
        assert f"'{column}'" not in line and f" {column}," not in line
    assert "drop --cost-column to give the budget in cells" in line


# ------------------------------------------------------------------------------------------
# a disk that fills up while the GeoPackage is written


def _disk_full(monkeypatch, layer: str, error: type) -> None:
    """pyogrio fails on ``layer`` as GDAL's SQLite does on a full disk."""
    real = pyogrio.write_dataframe

    def write(df, path, layer_=None, **kw):
        name = kw.pop("layer", layer_)
        if name == layer:
            raise error("sqlite3_exec(INSERT ...) failed: database or disk is full")
        return real(df, path, layer=name, **kw)

    monkeypatch.setattr(pyogrio, "write_dataframe", write)


def _failed_after_the_work(res, needle: str) -> str:
    """Exit 1, the progress lines of the work done, then one error line; no traceback."""
    assert res.exit_code == 1, res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
    lines = res.stderr.splitlines()
    assert all(ln.startswith("[") for ln in lines[:-1]), res.stderr
    assert lines[-1].startswith("reserve: error: ") and needle in lines[-1], lines[-1]
    return lines[-1]


@pytest.mark.parametrize("layer", ["planning_units", "ranking"])
def test_disk_full_while_writing_keeps_the_previous_outputs(layer, files, workdir, monkeypatch):
    from pyogrio.errors import DataSourceError, FeatureError

    args = [
        "select",
        "--budget",
        "4",
        "--model",
        "linear",
        "--cells",
        str(files["cells"]),
        "--out",
        "run",
    ]
    assert CliRunner().invoke(main, args, catch_exceptions=False).exit_code == 0
    before = snapshot(workdir)
    _disk_full(monkeypatch, layer, FeatureError if layer == "ranking" else DataSourceError)
    res = CliRunner().invoke(main, [*args, "--budget", "5", "--overwrite"], catch_exceptions=False)
    line = _failed_after_the_work(res, "run/reserve.gpkg': the disk is full")
    assert "nothing was changed" in line and ".tmp" not in line
    assert snapshot(workdir) == before


def test_disk_full_on_a_real_small_disk(files, tmp_path):
    """A 150 kB tmpfs (where the machine lets this test mount one): one line, nothing left."""
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=150k", "tmpfs", str(disk)], capture_output=True
    )
    if mount.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        args = [
            "select",
            "--budget",
            "3",
            "--model",
            "linear",
            "--cells",
            str(files["cells"]),
            "--out",
            str(disk / "run"),
            "--map",
            str(tmp_path / "m.html"),
        ]
        res = CliRunner().invoke(main, args, catch_exceptions=False)
        _failed_after_the_work(res, "the disk is full")
        assert os.listdir(disk) == []
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_ctrl_c_while_writing(files, workdir, monkeypatch):
    """Ctrl-C mid-write: exit 130, one error line after the progress, nothing changed."""
    args = [
        "select",
        "--budget",
        "4",
        "--model",
        "linear",
        "--cells",
        str(files["cells"]),
        "--out",
        "run",
    ]
    assert CliRunner().invoke(main, args, catch_exceptions=False).exit_code == 0
    before = snapshot(workdir)
    real = pyogrio.write_dataframe

    def write(df, path, **kw):
        if kw.get("layer") == "selected":
            raise KeyboardInterrupt
        return real(df, path, **kw)

    monkeypatch.setattr(pyogrio, "write_dataframe", write)
    res = CliRunner().invoke(main, [*args, "--overwrite"], catch_exceptions=False)
    assert res.exit_code == 130 and "Traceback" not in res.stderr
    said = "reserve: error: interrupted (Ctrl-C); nothing was written, and any previous"
    assert res.stderr.splitlines()[-1] == f"{said} outputs are unchanged"
    assert snapshot(workdir) == before


def test_a_printable_summary_beside_the_geopackage(files, workdir):
    """summary.txt: the run's species and budget, how sure it is, and the chosen cells."""
    args = [
        "select",
        "--budget",
        "4",
        "--model",
        "linear",
        "--cells",
        str(files["cells"]),
        "--out",
        "run",
    ]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    text = (workdir / "run" / "summary.txt").read_text(encoding="utf-8")
    selected = pd.read_csv(workdir / "run" / "ranking.csv").query("selected")
    assert "cells to buy" in text and "signal " in text and "expected occupied:" in text
    rows = [line.split() for line in text.splitlines() if line[:5].strip().isdigit()]
    assert [int(r[0]) for r in rows] == selected["rank"].tolist()
    assert [r[1] for r in rows] == selected["cell_id"].astype(str).tolist()
    assert "summary: run/summary.txt" in res.stdout
