"""The command line explains itself: help and types for every option, whole sentences,
explaining columns that explain, `evaluate` that says what it needs; a clean package build."""

from __future__ import annotations

import gc
import importlib.metadata as md
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from reserve.cli import main
from reserve.config import (
    INGEST_DEFAULTS,
    MAX_DEFAULT_JOBS,
    SELECT_DEFAULTS,
    SELECT_METHODS,
    SELECT_MODELS,
)
from reserve.report import selection_table
from reserve.select import select_reserve
from tests.test_select import write_units

ROOT = Path(__file__).resolve().parents[1]

#: Options whose values are words or lists, where TEXT is the proper type.
TEXT_OPTIONS = {
    "species",
    "target",
    "weight",
    "region",
    "region_layer",
    "crs",
    "categorical",
    "continuous",
    "legend",
    "protocols",
    "start_date",
    "end_date",
    "months",
    "years",
    "scheduler",
    "cost_column",
    "method",
    "model",
    "locked_in",
    "cell_ids",
    "tables",
    "datasets",
    "methods",
}

#: Options that must be numbers.
NUMERIC = {
    "seed": "integer",
    "n_jobs": "integer",
    "bootstrap": "integer",
    "time_limit": "float",
    "budget": "number",
    "C": "float|cv",
    "boundary_penalty": "float|auto",
}


def _commands(group: click.Group, prefix: str = "reserve"):
    for name, cmd in group.commands.items():
        yield f"{prefix} {name}", cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, f"{prefix} {name}")


def test_every_option_has_help_and_a_proper_type():
    seen = set()
    for path, cmd in _commands(main):
        for p in cmd.params:
            if not isinstance(p, click.Option) or p.name == "help":
                continue
            assert p.help and p.help.strip().endswith((".", ")")), (path, p.name)
            if p.is_flag or isinstance(p.type, click.Choice | click.Path):
                continue
            if p.name in NUMERIC and path == "reserve select":
                assert p.type.name == NUMERIC[p.name], (path, p.name, p.type.name)
                seen.add(p.name)
            elif (path, p.name) in (("reserve select", "locked_out"),):
                assert p.type is click.STRING  # a column name or a polygon file
            elif p.name in (
                "ebd",
                "sed",
                "output",
                "public",
                "locked_out",
                "cells",
                "out",
                "map",
                "config",
                "truth_path",
                "data_dir",
                "out_dir",
            ):
                raise AssertionError(f"{path} --{p.name} must be a click.Path")
            else:
                assert p.type is not click.STRING or p.name in TEXT_OPTIONS, (path, p.name)
    assert seen == set(NUMERIC)


def test_typed_options_convert_and_leave_bad_values_to_the_library(tmp_path):
    cmd = main.commands["select"]
    ctx = cmd.make_context(
        "select", ["--budget", "5", "--seed", "3", "--C", "cv", "--time-limit", "2.5"]
    )
    assert ctx.params["budget"] == 5 and isinstance(ctx.params["budget"], int)
    assert ctx.params["seed"] == 3 and ctx.params["C"] == "cv"
    assert ctx.params["time_limit"] == 2.5
    res = CliRunner().invoke(main, ["select", "--budget", "5", "--seed", "x"])
    assert res.exit_code == 2 and res.stderr.startswith("reserve: error: ")
    assert len(res.stderr.strip().splitlines()) == 1 and "seed" in res.stderr


def test_command_summaries_are_whole_sentences():
    for args in ([], ["benchmark"]):
        out = CliRunner().invoke(main, [*args, "--help"]).output
        lines = out.split("Commands:")[1].strip().splitlines()
        assert lines
        for line in lines:
            _name, text = line.split(None, 1)
            assert text.endswith(".") and "..." not in text and text[0].isupper(), line


def test_explaining_columns_skip_features_constant_among_the_selected(tmp_path):
    res = select_reserve(6, write_units(tmp_path / "c.gpkg"), model="linear")
    top = res.main_features(len(res.feature_names))[0]
    _, cols = selection_table(res)
    assert top in cols  # it varies among the selected cells: shown
    res.selected[top] = 0.0  # now one value for every selected cell, as landcover_savannas was
    _, cols = selection_table(res)
    assert top not in cols and "score" in cols


def test_evaluate_says_what_to_pass():
    res = CliRunner().invoke(main, ["evaluate"])
    assert res.exit_code == 2
    err = res.stderr.strip()
    assert "SELECTION" in err and "--cell-ids" in err and "not both" not in err


def test_evaluate_explains_a_real_region_has_no_truth(tmp_path):
    cells = write_units(tmp_path / "c.gpkg")
    select_reserve(4, cells, model="linear", out=tmp_path / "out", map=False)
    res = CliRunner().invoke(main, ["evaluate", str(tmp_path / "out" / "reserve.gpkg")])
    assert res.exit_code == 1
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "real region" in err[0] and "simulated" in err[0]
    assert "not in the truth" not in err[0]


def _setuptools_major() -> int:
    try:
        return int(md.version("setuptools").split(".")[0])
    except md.PackageNotFoundError:
        return 0


@pytest.mark.slow
@pytest.mark.skipif(_setuptools_major() < 77, reason="needs setuptools >= 77 in the venv")
def test_package_builds_without_warnings(tmp_path):
    """The wheel builds with no packaging warning and ships the data and the map's assets."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("reserve", "data"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-v",
            "--no-index",
            str(src),
            "-w",
            str(tmp_path / "wheel"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    log = out.stdout + out.stderr
    for bad in (
        "BuildBackendWarning",
        "DeprecationWarning",
        "is absent from the",
        "SetuptoolsWarning",
    ):
        assert bad not in log, [line for line in log.splitlines() if bad in line][:3]
    import zipfile

    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "reserve/static/leaflet.min.js",
        "reserve/data/default_region/georgia.geojson",
        "reserve/data/uci/sonar.csv",
        "reserve/py.typed",
    } <= names


_RUN_PROBE = """
import atexit, gc, sys
atexit.register(lambda: print("frozen", gc.get_freeze_count() > 0))
from reserve.__main__ import run
sys.argv = ["reserve", *sys.argv[1:]]
run()
"""


@pytest.mark.parametrize(("args", "code"), [(["--version"], 0), (["select", "--model", "x"], 2)])
def test_console_script_freezes_objects_before_exit(args, code):
    """The console script (``run``) exits as ``main`` does, its objects frozen for the exit.

    The freeze spares the interpreter's last garbage collection (see ``reserve.cli.run``);
    ``main``, which the other tests call in-process, must not freeze anything.
    """
    assert pyproject_script() == "reserve.__main__:run"
    out = subprocess.run(
        [sys.executable, "-c", _RUN_PROBE, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert out.returncode == code, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "frozen True"
    assert gc.get_freeze_count() == 0  # nothing in this test process was frozen


def pyproject_script() -> str:
    """The entry point of the ``reserve`` console script in pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["reserve"]


def _option_rows(page: str, section: str) -> dict[str, list[str]]:
    """The options table under ``section`` of ``docs/page``: each flag of a row's first cell
    (``--effort`` / ``--no-effort`` gives two) -> the row's cells."""
    text = (ROOT / "docs" / page).read_text()
    body = text.split(f"\n{section}\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in body.splitlines():
        if not line.startswith("| `--"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        for flag in re.findall(r"--[A-Za-z][A-Za-z0-9-]*", cells[0]):
            assert flag not in rows, f"{page}: {flag} has two rows"
            rows[flag] = cells
    return rows


def _spellings(value: object) -> list[str]:
    """How a documented default may write ``value``: 60.0 as 60, 500000 as 500,000."""
    if isinstance(value, tuple):
        return [",".join(map(str, value))]
    if isinstance(value, int | float):
        return [format(value, "g"), f"{value:,.0f}" if value == int(value) else format(value, "g")]
    return [str(value)]


def _said(spellings: list[str], text: str) -> bool:
    return any(re.search(rf"(?<![\w.,]){re.escape(s)}(?![\w,]|\.\d)", text) for s in spellings)


#: Choices checked by the library rather than by click, per option.
_CHOICES = {"method": SELECT_METHODS, "model": SELECT_MODELS}


@pytest.mark.parametrize(
    ("command", "page", "section", "defaults"),
    [
        ("select", "select.md", "## Options", SELECT_DEFAULTS),
        ("ingest", "ingest.md", "## Inputs", INGEST_DEFAULTS),
    ],
)
def test_the_docs_option_tables_agree_with_the_command(command, page, section, defaults):
    """Every option of the command has a row, and no row names another; each row gives the
    option's default and its choices as the command and reserve.config define them."""
    params = [p for p in main.commands[command].params if isinstance(p, click.Option)]
    rows = _option_rows(page, section)
    flags = {f for p in params for f in (*p.opts, *p.secondary_opts) if f != "--help"}
    assert set(rows) == flags, (
        f"docs/{page} lacks {sorted(flags - set(rows))}, names {sorted(set(rows) - flags)}"
    )
    for p in params:
        cells = rows[p.opts[0]]
        where = f"docs/{page}, {p.opts[0]}"
        # select's table has a default column; ingest's says "(default X)" in its text
        said = cells[-1] if command == "select" else " ".join(cells[1:])
        for choice in getattr(p.type, "choices", None) or _CHOICES.get(p.name, ()):
            assert f"`{choice}`" in " ".join(cells), f"{where}: the choice {choice} is missing"
        click_default = p.default if isinstance(p.default, bool | int | float | str) else None
        if p.name in defaults.__dataclass_fields__ and click_default is not None:
            value = getattr(defaults, p.name)
            assert _spellings(click_default)[0] == _spellings(value)[0], (
                f"{command} --help's default for {p.opts[0]} is {click_default!r}; "
                f"reserve.config says {value!r}"
            )
        if p.is_flag and not p.secondary_opts and not click_default:
            continue  # a switch (--overwrite): off unless given
        if p.is_flag:
            on = bool(getattr(defaults, p.name, click_default))
            words = [*p.opts, "on"] if on else [*p.secondary_opts, "off"]
            assert any(
                re.search(rf"`{w}`|\b{w}\b" if w[0] != "-" else f"`{w}`", said) for w in words
            ), f"{where}: the default is {words[0]}"
        elif p.name == "n_jobs":
            assert f"at most {MAX_DEFAULT_JOBS}" in said, f"{where}: the default is computed"
        elif p.name in defaults.__dataclass_fields__ or click_default is not None:
            value = getattr(defaults, p.name, click_default)
            assert _said(_spellings(value), said), f"{where}: the default is {value!r}"
        elif command == "select":  # nothing to compare: a phrase, never left empty
            assert said and said != "-", f"{where}: no default given"


def test_select_options_are_the_declared_ones():
    """``reserve select``'s options, a --config file's keys and the options object share one
    declaration (reserve.options.SELECT_OPTIONS): names, flags, help and order; ``reserve
    ingest``'s come from INGEST_OPTIONS, with the ingest's defaults shown."""
    from reserve.options import CONFIG_KEYS, INGEST_OPTIONS, SELECT_OPTIONS

    params = [p for p in main.commands["select"].params if isinstance(p, click.Option)]
    declared = [p for p in params if p.name != "config"]
    assert [p.name for p in declared] == list(SELECT_OPTIONS) == list(CONFIG_KEYS)
    for p in declared:
        spec = SELECT_OPTIONS[p.name]
        assert p.opts[0] == spec.flag and p.help == spec.help, p.name
        assert p.multiple == spec.multiple and (p.is_flag == (spec.kind in ("switch", "flag")))
    ingest = [p for p in main.commands["ingest"].params if isinstance(p, click.Option)]
    assert [p.name for p in ingest] == list(INGEST_OPTIONS)
    for p in ingest:  # the ingest types its values itself: a bad one is click's usage error
        spec = INGEST_OPTIONS[p.name]
        assert (p.help, p.required) == (spec.help, spec.required), p.name
        if spec.default is not None:  # shown in --help, as the ingest's defaults say
            assert p.default == spec.default and p.show_default, p.name
