"""Tests for the public API: ``reserve``'s own names, lazily imported, end to end."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import reserve
from reserve.config import CONFIG_KEYS, SelectOptions

PUBLIC = {
    "select_reserve": "reserve.select",
    "run_selection": "reserve.select",
    "SelectOptions": "reserve.config",
    "SelectionResult": "reserve.result",
    "ingest_ebird": "reserve.ingest",
    "IngestResult": "reserve.ingest",
    "ChecklistFilter": "reserve.io.filters",
    "evaluate_selection": "reserve.evaluate",
    "read_selection": "reserve.evaluate",
    "ReserveError": "reserve.errors",
    "InvalidInputError": "reserve.errors",
    "DataFileError": "reserve.errors",
    "OutputExistsError": "reserve.errors",
    "MissingDependencyError": "reserve.errors",
    "SolverError": "reserve.errors",
    "WorkerError": "reserve.errors",
}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_name_is_the_library_object(name):
    value = getattr(reserve, name)
    assert value.__module__ == PUBLIC[name]
    # the same object as the module's own, e.g. reserve.ingest_ebird is reserve.ingest.ingest
    home = importlib.import_module(PUBLIC[name])
    assert any(getattr(home, attr, None) is value for attr in (name, value.__name__))


def test_all_and_dir_list_the_same_names():
    assert sorted(reserve.__all__) == sorted(dir(reserve))
    assert set(PUBLIC) | {"__version__"} == set(reserve.__all__)
    assert len(set(reserve.__all__)) == len(reserve.__all__)


def test_from_reserve_import_star_gives_every_public_name():
    namespace: dict = {}
    exec("from reserve import *", namespace)
    assert set(reserve.__all__) <= set(namespace)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        reserve.no_such_name  # noqa: B018
    assert not hasattr(reserve, "_no_such_private")


def test_ingest_module_stays_a_module():
    import reserve.ingest

    assert inspect.ismodule(reserve.ingest)
    assert reserve.ingest_ebird is reserve.ingest.ingest


def test_select_reserve_takes_every_option_with_its_default():
    params = inspect.signature(reserve.select_reserve).parameters
    # every option a planner sets (the TOML keys); map_dir is where the command line puts
    # a map it names itself, not an option
    options = [f for f in dataclasses.fields(SelectOptions) if f.name in CONFIG_KEYS]
    assert {f.name for f in dataclasses.fields(SelectOptions)} - {f.name for f in options} == {
        "map_dir"
    }
    for f in options:
        assert f.name in params, f"select_reserve has no parameter {f.name!r}"
        if f.name == "budget":
            continue  # required, as in the CLI
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        assert params[f.name].default == default, f.name


def run_python(code: str) -> str:
    """Standard output of ``python -c code`` in a fresh interpreter importing this checkout."""
    root = Path(reserve.__file__).parents[1]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    return done.stdout


def test_importing_reserve_loads_no_heavy_module():
    code = (
        "import sys, reserve; "
        "heavy = [m for m in ('numpy', 'pandas', 'sklearn', 'scipy', 'geopandas', 'click', "
        "'typing', 'reserve.select', 'reserve.config', 'reserve.interrupt') if m in sys.modules]; "
        "print(','.join(heavy)); "
        "reserve.SelectOptions; "
        "print('reserve.config' in sys.modules, 'reserve.select' in sys.modules)"
    )
    # nothing heavy until a public name is used, then only that name's module
    assert run_python(code).splitlines() == ["", "True False"]


def test_import_reserve_changes_no_signal_handler():
    code = (
        "import signal; before = signal.getsignal(signal.SIGINT); import reserve; "
        "print(signal.getsignal(signal.SIGINT) is before)"
    )
    assert run_python(code).strip() == "True"


def test_select_then_evaluate_end_to_end(small_units_file, tmp_path):
    result = reserve.select_reserve(6, small_units_file, model="linear", out=tmp_path, map=False)
    assert isinstance(result, reserve.SelectionResult)
    sel, pu = result.selected, result.planning_units
    assert len(sel) == 6 and sel["rank"].tolist() == [1, 2, 3, 4, 5, 6]
    cand = pu[pu["role"] == "candidate"]
    top = cand.sort_values("score", ascending=False, kind="stable").head(6)
    assert set(sel["cell_id"]) == set(top["cell_id"])
    # the file written holds the same cells
    ids = reserve.read_selection(result.gpkg_path)
    assert sorted(ids.tolist()) == sorted(sel["cell_id"].tolist())
    # a truth over every cell: occupied where the cell id is even
    truth = pd.DataFrame({"cell_id": pu["cell_id"], "psi": np.linspace(0, 1, len(pu))})
    truth["occupied"] = truth["cell_id"] % 2 == 0
    truth.to_csv(tmp_path / "truth.csv", index=False)
    r = reserve.evaluate_selection(ids, tmp_path / "truth.csv")
    occupied = int((ids % 2 == 0).sum())
    assert (r["k"], r["n_occupied"], r["precision"]) == (6, occupied, occupied / 6)
    psi = truth.set_index("cell_id").loc[ids, "psi"]
    assert r["expected_precision"] == pytest.approx(psi.mean(), abs=1e-6)


def test_run_selection_with_options_equals_select_reserve(small_units_file):
    opts = reserve.SelectOptions(budget=5, cells=small_units_file, model="linear", map=False)
    by_options = reserve.run_selection(opts)
    by_keywords = reserve.select_reserve(5, small_units_file, model="linear", map=False)
    assert by_options.selected["cell_id"].tolist() == by_keywords.selected["cell_id"].tolist()


def test_boundary_penalty_reaches_the_selection(small_units_file):
    plain = reserve.select_reserve(8, small_units_file, model="linear", map=False)
    compact = reserve.select_reserve(
        8, small_units_file, model="linear", map=False, boundary_penalty=1.0
    )
    assert plain.summary["boundary_penalty"] == 0.0
    assert compact.summary["boundary_penalty"] == 1.0
    # 1 per metre outweighs any score difference: the selection clumps (72 km -> 48 km)
    assert perimeter(compact) < perimeter(plain)


def perimeter(result) -> float:
    """Outer boundary length of the selected cells (shared edges counted zero)."""
    return float(result.selected.geometry.union_all().length)


def test_bad_option_is_a_reserve_error(small_units_file):
    with pytest.raises(reserve.InvalidInputError, match="boundary_penalty"):
        reserve.select_reserve(5, small_units_file, boundary_penalty=-1.0)
