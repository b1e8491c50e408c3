"""Tests for ``reserve select`` on the command line: output, config, bad input, SIGKILL."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyogrio
import pytest
from click.testing import CliRunner

from reserve.cli import main
from tests.test_select import make_units, write_units

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cells(tmp_path):
    return write_units(tmp_path / "cells.gpkg")


def run(*args: str):
    """``reserve select ARGS``, with ``--model linear`` unless a test names the model (fast)."""
    model = [] if "--model" in args else ["--model", "linear"]
    return CliRunner().invoke(main, ["select", *args, *model])


def test_select_prints_table_and_figures_and_writes_outputs(cells, tmp_path):
    out, html = tmp_path / "out", tmp_path / "m.html"
    res = run("--budget", "5", "--cells", str(cells), "--out", str(out), "--map", str(html))
    assert res.exit_code == 0, res.stderr
    rows = re.findall(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(-?\d+\.\d+)", res.stdout, flags=re.M)
    # grouped by patch (1 = the largest), best rank first within a patch
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3, 4, 5]
    keys = [(int(r[2]), int(r[0])) for r in rows]
    assert keys == sorted(keys)
    assert "5 selected cells (ttk)" in res.stdout
    # habitat columns: the main features, named in full, then the two mean rows
    summary = pyogrio.read_dataframe(out / "reserve.gpkg", layer="run_summary")
    feats = summary["main_features"][0].split(", ")
    header = next(ln for ln in res.stdout.splitlines() if ln.split()[:2] == ["rank", "cell_id"])
    assert header.split()[2:4] == ["patch", "score"]
    assert header.split()[4:] == feats and len(feats) == 3
    selected = pyogrio.read_dataframe(out / "reserve.gpkg", layer="selected")
    mean_sel = re.search(r"^\s*mean\s+selected\s+(.*)$", res.stdout, flags=re.M).group(1)
    np.testing.assert_allclose(
        [float(v) for v in mean_sel.split()],
        selected[["score", *feats]].mean().to_numpy(),
        atol=5e-4,
    )
    assert re.search(r"^\s*mean\s+candidates(\s+-?\d+\.\d{3}){4}\s*$", res.stdout, flags=re.M)
    # the plain line first; a heuristic's status, objective and iterations stay in run_summary
    figures = res.stdout.splitlines()[res.stdout.splitlines().index(mean_sel_line(res)) + 1 :]
    n_cand = int(summary["n_candidates"][0])
    assert re.fullmatch(
        rf"5 cells chosen of {n_cand:,} private candidates \(budget 5\) in \d+\.\d s; seed 0",
        figures[0],
    )
    assert figures[1] == "method ttk, model linear, C 1 (given)"
    assert not re.search(r"n/a|-1\b|objective|iterations|status", res.stdout)
    assert "reading" in res.stderr and "fitting ttk" in res.stderr
    assert (out / "reserve.gpkg").is_file() and html.is_file()


def mean_sel_line(res) -> str:
    """The stdout table's last row (the candidates' mean): the figures follow it."""
    return next(ln for ln in res.stdout.splitlines() if ln.split()[:2] == ["mean", "candidates"])


def test_an_exact_method_says_what_it_proved(cells, tmp_path):
    res = run(
        "--budget",
        "5",
        "--cells",
        str(cells),
        "--out",
        str(tmp_path / "o"),
        "--method",
        "ttk-mip",
        "--C",
        "1",
        "--map",
        str(tmp_path / "m.html"),
    )
    assert res.exit_code == 0, res.stderr
    summary = pyogrio.read_dataframe(tmp_path / "o" / "reserve.gpkg", layer="run_summary")
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("method ttk-mip"))
    status, gap = summary["solver_status"][0], summary["gap"][0]
    assert line.startswith(f"method ttk-mip, model linear, C 1 (given); solver {status}: ")
    assert f"gap {gap:.1%}" in line and "bound " in line


def test_the_model_choice_tells_its_folds_on_stderr(cells, tmp_path):
    res = run(
        "--budget",
        "5",
        "--cells",
        str(cells),
        "--out",
        str(tmp_path / "o"),
        "--map",
        str(tmp_path / "m.html"),
        "--model",
        "auto",
    )
    assert res.exit_code == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if "cross-validating the habitat models" in ln]
    assert re.search(r"\] cross-validating the habitat models: \d+ settings", lines[0])
    last = re.search(r"models: (\d+) of (\d+) folds$", lines[-1])
    assert last and last.group(1) == last.group(2) and len(lines) >= 2
    assert "progress" not in res.stdout


def test_config_file_and_flags(cells, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'budget = 4\nmethod = "svm"\ncells = "{cells}"\nout = "{tmp_path / "o"}"\n')
    res = run("--config", str(cfg), "--budget", "6", "--map", str(tmp_path / "m.html"))
    assert res.exit_code == 0, res.stderr
    summary = pyogrio.read_dataframe(tmp_path / "o" / "reserve.gpkg", layer="run_summary")
    effective = json.loads(summary["config"][0])
    assert effective["budget"] == 6 and effective["method"] == "svm"  # flag over file
    assert summary["n_selected"][0] == 6 and summary["method"][0] == "svm"
    assert str(tmp_path / "m.html") == effective["map"]


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    text = tmp_path / "text.gpkg"
    text.write_text("not a geopackage")
    nolayer = tmp_path / "nolayer.gpkg"
    pyogrio.write_dataframe(make_units(), nolayer, layer="cells", driver="GPKG")
    out = {"missing": tmp_path / "missing.gpkg", "text": text, "nolayer": nolayer}
    units = make_units()
    variants = {
        "nocol": units.drop(columns="label"),
        "nocrs": units.set_crs(None, allow_override=True),
        "notrain": units.assign(role=units.role.where(units.role != "train", "other")),
        "oneclass": units.assign(label=units.label.where(units.role != "train", 1)),
        "nan": units.assign(lc_forest=units.lc_forest.where(units.role != "candidate")),
    }
    for name, frame in variants.items():
        with pytest.warns(UserWarning) if name == "nocrs" else _null():
            out[name] = write_units(tmp_path / f"{name}.gpkg", frame)
    return out


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize(
    ("case", "code", "needle"),
    [
        (["--budget", "0"], 2, "budget must be an integer >= 1"),
        (["--budget", "-2"], 2, "budget must be an integer >= 1"),
        (["--budget", "2.5"], 2, "budget must be an integer"),
        (["--budget", "ten"], 2, "budget must be an integer"),
        (["--budget", "100000"], 2, "must be smaller than the"),
        ([], 2, "budget is required"),
        (["--budget", "3", "--method", "ttk2"], 2, "--method 'ttk2' is unknown"),
        (["--budget", "3", "--C", "-1"], 2, "C must be a positive number"),
        (["--budget", "3", "--model", "gam"], 2, "--model 'gam' is unknown; choose one of auto"),
        (["--budget", "3", "--method", "svm", "--model", "rbf"], 2, "needs method 'ttk'"),
        (["--budget", "3", "--cells", "@missing"], 1, "does not exist"),
        (["--budget", "3", "--cells", "@text"], 1, "is not a GeoPackage"),
        (["--budget", "3", "--cells", "@nolayer"], 1, "no 'planning_units' layer"),
        (["--budget", "3", "--cells", "@nocol"], 1, "lacks the columns ['label']"),
        (["--budget", "3", "--cells", "@nocrs"], 1, "has no CRS"),
        (["--budget", "3", "--cells", "@notrain"], 1, "has no training cells"),
        (["--budget", "3", "--cells", "@oneclass"], 1, "every training cell has label 1"),
        (["--budget", "3", "--cells", "@nan"], 1, "NaN or infinite features"),
        (["--budget", "3", "--config", "@badtoml"], 2, "is not valid TOML"),
        (["--budget", "3", "--config", "@unknownkey"], 2, "unknown keys"),
        (["--budget", "3", "--out", "@afile"], 1, "is a file"),
        (["--budget", "3", "--out", "@existing"], 1, "already exists; pass --overwrite"),
    ],
)
def test_bad_input_one_line_exit_code_no_output(cells, tmp_path, case, code, needle):
    files = _bad_files(tmp_path)
    (tmp_path / "badtoml.toml").write_text("budget = [\n")
    (tmp_path / "unknownkey.toml").write_text("budgets = 3\n")
    (tmp_path / "afile").write_text("x")
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "reserve.gpkg").write_bytes(b"previous")
    files |= {
        "badtoml": tmp_path / "badtoml.toml",
        "unknownkey": tmp_path / "unknownkey.toml",
        "afile": tmp_path / "afile",
        "existing": existing,
    }
    args = [str(files[a[1:]]) if a.startswith("@") else a for a in case]
    if "--cells" not in args:
        args += ["--cells", str(cells)]
    out_given = "--out" in args
    if not out_given:
        args += ["--out", str(tmp_path / "out")]
    args += ["--map", str(tmp_path / "map.html")]
    res = run(*args)
    assert res.exit_code == code, (res.exit_code, res.stderr)
    err = res.stderr.strip().splitlines()
    assert err[-1].startswith("reserve: error: ") and needle in err[-1]
    assert all(ln.startswith("[") for ln in err[:-1])  # only progress lines before it
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert not (tmp_path / "out" / "reserve.gpkg").exists()
    assert not (tmp_path / "map.html").exists()
    assert (existing / "reserve.gpkg").read_bytes() == b"previous"


# A child that runs `reserve select` and SIGKILLs itself in the middle of writing the
# GeoPackage: after the first layer of the temporary file is on disk, before the rename.
KILLER = """
import os, signal, sys
import pyogrio
real = pyogrio.write_dataframe
def write(df, path, layer=None, **kw):
    real(df, path, layer=layer, **kw)
    if layer == "planning_units":
        os.kill(os.getpid(), signal.SIGKILL)
pyogrio.write_dataframe = write
from reserve.cli import main

#: What a run with --out and --map writes there.
OUTPUT_FILES = ["m.html", "ranking.csv", "reserve.gpkg", "summary.txt"]
main(sys.argv[1:])
"""


def test_sigkill_mid_write_keeps_previous_outputs(cells, tmp_path):
    out, html = tmp_path / "out", tmp_path / "m.html"
    args = [
        "select",
        "--budget",
        "5",
        "--cells",
        str(cells),
        "--out",
        str(out),
        "--map",
        str(html),
        "--model",
        "linear",
    ]
    assert run(*args[1:]).exit_code == 0
    gpkg_before, html_before = (out / "reserve.gpkg").read_bytes(), html.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, *args, "--budget", "7", "--overwrite"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL
    assert (out / "reserve.gpkg").read_bytes() == gpkg_before
    assert html.read_bytes() == html_before
    visible = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert visible == ["ranking.csv", "reserve.gpkg", "summary.txt"]
    assert [p.name for p in out.iterdir() if p.name.startswith(".")]  # the killed run's temp
    # the next run replaces the outputs and removes the dead run's temporary file
    assert run(*args[1:], "--budget", "7", "--overwrite").exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == ["ranking.csv", "reserve.gpkg", "summary.txt"]
    summary = pyogrio.read_dataframe(out / "reserve.gpkg", layer="run_summary")
    assert summary["budget"].tolist() == [7]


def test_select_with_locks_and_bootstrap(tmp_path):
    units = make_units()
    cand = np.flatnonzero((units["role"] == "candidate").to_numpy())
    units["mine"] = np.isin(np.arange(len(units)), cand[:2])
    units["excl"] = np.isin(np.arange(len(units)), cand[2:6])
    cells = write_units(tmp_path / "cells.gpkg", units)
    out, html = tmp_path / "out", tmp_path / "m.html"
    res = run(
        "--budget",
        "5",
        "--cells",
        str(cells),
        "--out",
        str(out),
        "--map",
        str(html),
        "--locked-in",
        "mine",
        "--locked-out",
        "excl",
        "--bootstrap",
        "3",
        "--n-jobs",
        "2",
    )
    assert res.exit_code == 0, res.stderr
    header = next(ln for ln in res.stdout.splitlines() if ln.split()[:2] == ["rank", "cell_id"])
    assert header.split()[2:6] == ["patch", "locked", "freq", "score"]
    rows = re.findall(r"^\s*(\d+)\s+(\d+)\s+\d+\s+in\s+1\.00\s", res.stdout, flags=re.M)
    assert sorted(int(r[1]) for r in rows) == sorted(units["cell_id"].iloc[cand[:2]])
    assert (
        "locked: 2 in" in res.stdout and "4 out" in res.stdout and "chose 3 of the 5" in res.stdout
    )
    assert "bootstrap: 3 refits" in res.stdout
    summary = pyogrio.read_dataframe(out / "reserve.gpkg", layer="run_summary")
    assert summary[["n_locked_in", "n_locked_out", "effective_budget", "bootstrap"]].iloc[
        0
    ].tolist() == [2, 4, 3, 3]
    ranking = pyogrio.read_dataframe(out / "reserve.gpkg", layer="ranking")
    assert "selection_frequency" in ranking.columns
    page = html.read_text()
    assert "selection frequency" in page and '"freq"' in page and '"locked"' in page


def test_conflicting_locks_one_line_nothing_written(tmp_path):
    units = make_units()
    units["mine"] = (units["role"] == "candidate").to_numpy()
    cells = write_units(tmp_path / "cells.gpkg", units)
    res = run(
        "--budget",
        "5",
        "--cells",
        str(cells),
        "--out",
        str(tmp_path / "out"),
        "--locked-in",
        "mine",
        "--locked-out",
        "mine",
    )
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert lines[-1].startswith("reserve: error: locked_in and locked_out share")
    assert not (tmp_path / "out" / "reserve.gpkg").exists()


def test_select_with_a_money_budget(tmp_path):
    units = make_units()
    units["price"] = np.round(np.random.default_rng(1).lognormal(0, 0.5, len(units)), 3)
    cand = np.flatnonzero((units["role"] == "candidate").to_numpy())
    units["mine"] = np.isin(np.arange(len(units)), cand[:1])
    cells = write_units(tmp_path / "cells.gpkg", units)
    out = tmp_path / "out"
    res = run(
        "--budget",
        "6.5",
        "--cost-column",
        "price",
        "--cells",
        str(cells),
        "--out",
        str(out),
        "--map",
        str(tmp_path / "m.html"),
        "--locked-in",
        "mine",
    )
    assert res.exit_code == 0, res.stderr
    header = next(ln for ln in res.stdout.splitlines() if ln.split()[:2] == ["rank", "cell_id"])
    assert header.split()[2:5] == ["patch", "price", "locked"]
    summary = pyogrio.read_dataframe(out / "reserve.gpkg", layer="run_summary").iloc[0]
    assert summary["budget_unit"] == "cost (price)" and summary["total_cost"] <= 6.5 + 1e-9
    n, spent = summary["n_selected"], f"{summary['total_cost']:.6g}"
    plain = (
        f"{n} cells chosen of {summary['n_candidates']} private candidates "
        f"(budget 6.5 of price; spent {spent}) in "
    )
    assert plain in res.stdout
    assert "within" in res.stdout and "of the budget 6.5" in res.stdout
    assert "cost (price)" in (tmp_path / "m.html").read_text()
    bad = run(
        "--budget",
        "6.5",
        "--cost-column",
        "nope",
        "--cells",
        str(cells),
        "--out",
        str(tmp_path / "bad"),
    )
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines()[-1].startswith("reserve: error: --cost-column 'nope'")
    assert not (tmp_path / "bad" / "reserve.gpkg").exists()


def test_select_for_two_species(tmp_path):
    from tests.test_select import two_species

    cells = write_units(tmp_path / "cells.gpkg", two_species())
    res = run(
        "--budget",
        "6",
        "--cells",
        str(cells),
        "--species",
        "Forest Bird",
        "--species",
        "Crop Bird",
        "--out",
        str(tmp_path / "out"),
        "--map",
        str(tmp_path / "m.html"),
    )
    assert res.exit_code == 0, res.stderr
    assert "representation" in res.stdout and "Crop Bird" in res.stdout
    sel = pyogrio.read_dataframe(tmp_path / "out" / "reserve.gpkg", layer="selected")
    assert {"probability__forest_bird", "probability__crop_bird"} <= set(sel.columns)
    assert len(sel) == 6


def _page(path: Path) -> str:
    """The map's HTML without folium's random element ids."""
    return re.sub(r"_[0-9a-f]{32}", "_ID", path.read_text(encoding="utf-8"))


def test_the_map_drawn_by_the_standby_child_is_the_map_drawn_here(
    cells, tmp_path, monkeypatch, only_thread
):
    from reserve import fork

    started = []
    real = fork.fork_standby
    monkeypatch.setattr(fork, "fork_standby", lambda mods: started.append(mods) or real(mods))
    pages, out = {}, tmp_path / "out"
    for jobs in ("2", "1"):
        res = run(
            "--budget",
            "5",
            "--cells",
            str(cells),
            "--out",
            str(out),
            "--map",
            str(out / "m.html"),
            "--n-jobs",
            jobs,
            "--overwrite",
        )
        assert res.exit_code == 0, res.stderr
        pages[jobs] = _page(out / "m.html")
        assert sorted(p.name for p in out.iterdir()) == [
            "m.html",
            "ranking.csv",
            "reserve.gpkg",
            "summary.txt",
        ]
    assert started == [("reserve.maps", "folium", "branca.element", "jinja2")]  # --n-jobs 2
    # only the run summary's runtimes, time of day and n_jobs differ
    strip = re.compile(r'(runtime|created|seconds)[^<"]*|"n_jobs": \d')
    assert strip.sub("", pages["2"]) == strip.sub("", pages["1"])


def test_a_dead_standby_child_leaves_the_map_to_the_usual_path(
    cells, tmp_path, monkeypatch, only_thread
):
    from reserve import fork

    dead = []

    def cancelled(mods):
        child = fork.Standby(mods)
        child.cancel()  # as if it had been killed before the map was sent
        dead.append(child)
        return child

    monkeypatch.setattr(fork, "fork_standby", cancelled)
    out = tmp_path / "out"
    res = run(
        "--budget",
        "5",
        "--cells",
        str(cells),
        "--out",
        str(out),
        "--map",
        str(out / "m.html"),
        "--n-jobs",
        "2",
    )
    assert res.exit_code == 0, res.stderr
    assert len(dead) == 1 and "Leaflet" in (out / "m.html").read_text(encoding="utf-8")
    assert sorted(p.name for p in out.iterdir()) == [
        "m.html",
        "ranking.csv",
        "reserve.gpkg",
        "summary.txt",
    ]
