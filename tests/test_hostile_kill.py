"""kill -9 in the middle of the writes of ``reserve select`` and ``reserve ingest``.

A real ``reserve`` process is started and the test watches the output folders; as soon as
the run's own temporary file appears (the map's, the GeoPackage's, the ingest's), it sends
SIGKILL. No hook in the product: the kill point is the temporary file on disk. Then the
previous outputs must be byte for byte intact (or still absent), and the next run must
replace them and remove the killed run's temporaries, and only those.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyogrio
import pytest
from click.testing import CliRunner

from reserve.cli import main
from reserve.io.atomic import remove_stale_temporaries
from tests.conftest import snapshot
from tests.test_hostile_ingest import _base
from tests.test_ingest import make_inputs
from tests.test_select import write_units

#: What a run with --out and --map writes there.
OUTPUT_FILES = ["m.html", "ranking.csv", "reserve.gpkg", "summary.txt"]

REPO = Path(__file__).resolve().parents[1]


def _run_and_kill(args: list[str], cwd: Path, watched: Callable[[], bool]) -> bool:
    """Start ``reserve args`` in ``cwd``; SIGKILL it once ``watched()`` is true.

    Returns whether it was killed (False: it finished before the kill point was seen).
    """
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "reserve.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if watched():
                proc.send_signal(signal.SIGKILL)
                return proc.wait(timeout=60) == -signal.SIGKILL
            time.sleep(0.0005)
        return False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _temporaries(folder: Path, target: str) -> list[str]:
    """Temporary files of ``target`` in ``folder`` (``.<target>.<pid>.tmp...``), being written.

    The instant probe of the output check (``....tmp.<random>.probe``) is not a write.
    """
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return [
        n
        for n in names
        if n.lstrip(".").startswith(target + ".") and ".tmp" in n and not n.endswith(".probe")
    ]


def _kill_until_caught(args, cwd, watched, tries: int = 3):
    """Kill a run at its kill point; retry (rarely needed) when the run was too quick.

    Returns the working folder's snapshot taken just before the killed run started.
    """
    for _ in range(tries):
        before = snapshot(cwd)
        if _run_and_kill(args, cwd, watched):
            return before
    pytest.fail(f"the run finished {tries} times before its kill point was seen")


@pytest.fixture
def cells(tmp_path):
    return write_units(tmp_path / "cells.gpkg")


def _select(cells: Path, *extra: str) -> list[str]:
    return ["select", "--budget", "5", "--model", "linear", "--cells", str(cells), *extra]


@pytest.mark.parametrize("point", ["map", "geopackage"])
def test_select_killed_while_writing_keeps_previous_outputs(point, cells, workdir):
    out = ["--out", "run", "--map", "run/m.html"]
    res = CliRunner().invoke(main, _select(cells, *out), catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    target = "m.html" if point == "map" else "reserve.gpkg"
    before = _kill_until_caught(
        [*_select(cells, *out), "--budget", "7", "--overwrite"],
        workdir,
        lambda: bool(_temporaries(workdir / "run", target)),
    )
    now = snapshot(workdir)
    visible = {k: v for k, v in now[1].items() if not Path(k).name.startswith(".")}
    assert visible == before[1]  # the previous GeoPackage and map, byte for byte
    assert _temporaries(workdir / "run", target)  # the killed run's temporary is left
    res = CliRunner().invoke(
        main, [*_select(cells, *out), "--budget", "7", "--overwrite"], catch_exceptions=False
    )
    assert res.exit_code == 0, res.stderr
    assert sorted(os.listdir(workdir / "run")) == [
        "m.html",
        "ranking.csv",
        "reserve.gpkg",
        "summary.txt",
    ]
    summary = pyogrio.read_dataframe(workdir / "run" / "reserve.gpkg", layer="run_summary")
    assert summary["budget"].tolist() == [7]


def test_select_killed_on_its_first_run_leaves_no_output(cells, workdir):
    """Default paths, nothing there before: killed while writing, no reserve.gpkg appears."""
    _kill_until_caught(
        _select(cells), workdir, lambda: bool(_temporaries(workdir / "results", "reserve.gpkg"))
    )
    visible = [k for k in snapshot(workdir)[1] if not Path(k).name.startswith(".")]
    assert visible == []
    res = CliRunner().invoke(main, _select(cells), catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    assert sorted(snapshot(workdir)[1]) == [
        "maps/cells_ttk_k5.html",
        "results/ranking.csv",
        "results/reserve.gpkg",
        "results/summary.txt",
    ]


@pytest.fixture
def ebird(tmp_path):
    folder = tmp_path / "inputs"
    folder.mkdir()
    return make_inputs(folder)


@pytest.mark.parametrize("previous", [True, False])
def test_ingest_killed_while_writing(previous, ebird, workdir):
    args = _base(ebird)
    if previous:
        assert CliRunner().invoke(main, args, catch_exceptions=False).exit_code == 0
    before = _kill_until_caught(
        [*args, "--overwrite", "--cell-size", "1500"],
        workdir,
        lambda: bool(_temporaries(workdir, "units.gpkg")),
    )
    now = snapshot(workdir)
    visible = {k: v for k, v in now[1].items() if not k.startswith(".")}
    assert visible == before[1]  # the previous units byte for byte, or still none
    assert (workdir / "units.gpkg").exists() == previous
    assert _temporaries(workdir, "units.gpkg")
    res = CliRunner().invoke(main, [*args, "--overwrite"], catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    assert os.listdir(workdir) == ["units.gpkg"]  # the temporaries (and journal) are gone


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_next_run_removes_only_dead_runs_temporaries(ebird, workdir):
    dead = _dead_pid()
    ours = [
        f".units.gpkg.{dead}.tmp.gpkg",
        f".units.gpkg.{dead}.tmp.gpkg-journal",
        f"..units.gpkg.{dead}.tmp.gpkg.{dead}.tmp.gpkg",  # a temporary's own temporary
        f".units.gpkg.{dead}.tmp.x1y2.probe",  # the output check's probe
    ]
    kept = [
        ".units.gpkg.notes",  # a user's file: not our pattern
        f"units.gpkg.{dead}.tmp.gpkg",  # not hidden: not ours
        f".other.gpkg.{dead}.tmp.gpkg",  # another target's
        ".units.gpkg.1.tmp.gpkg",  # a live process's (pid 1)
        f".units.gpkg.{dead}.tmpfile",  # not our suffix form
    ]
    for name in ours + kept:
        (workdir / name).write_bytes(b"x")
    res = CliRunner().invoke(main, _base(ebird), catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    assert sorted(os.listdir(workdir)) == sorted([*kept, "units.gpkg"])
    assert remove_stale_temporaries(workdir / "units.gpkg") == []


def _term_while_writing(args: list[str], cwd: Path, watched: Callable[[], bool]):
    """Start ``reserve args``; SIGTERM it once ``watched()``; its exit code and stderr."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "reserve.cli", *args]
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline and not watched():
        time.sleep(0.0005)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


@pytest.mark.parametrize("command", ["select", "ingest"])
def test_sigterm_while_writing_removes_the_temporaries_at_once(command, cells, ebird, workdir):
    """SIGTERM mid-write: exit 143, one error line, no temporary left (not even for a while)."""
    if command == "select":
        args = [*_select(cells, "--out", "run", "--map", "run/m.html"), "--overwrite"]
        folder, target = workdir / "run", "reserve.gpkg"
        assert CliRunner().invoke(main, args, catch_exceptions=False).exit_code == 0
    else:
        args = [*_base(ebird), "--overwrite", "--cell-size", "1500"]
        folder, target = workdir, "units.gpkg"
        assert CliRunner().invoke(main, args, catch_exceptions=False).exit_code == 0
    before = snapshot(workdir)
    for _ in range(3):  # rarely, the run ends before its temporary is seen
        code, err = _term_while_writing(args, workdir, lambda: bool(_temporaries(folder, target)))
        if code != 0:
            break
        before = snapshot(workdir)
    assert code == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    said = "reserve: error: stopped (SIGTERM); nothing was written, and any previous outputs"
    assert err.splitlines()[-1] == f"{said} are unchanged"
    assert snapshot(workdir) == before  # previous outputs intact, no temporary, no journal


def _interrupt_after(args: list[str], cwd: Path, delay: float, *, module: str = "reserve.cli"):
    """Start ``python -m module args``; Ctrl-C (SIGINT) it ``delay`` s later; code, stderr.

    A signal that comes while Python itself is still starting (its ``site`` import, about the
    first 40 ms, longer under a loaded test suite, or runpy finding the package) reaches no
    code of ours: such a run, whose traceback holds no frame of ``reserve``, is started
    again with the delay doubled, up to five starts in all. So is a run that ends as if no
    signal had come (exit 0): under a loaded test suite about one run in twenty at 0.2 s
    does, a loss whose cause is not yet found; five starts that all miss fail the test.
    Such a run wrote its outputs: they are removed before the next start, so the folder the
    caller compares is the one it gave.
    """
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    given = set(cwd.rglob("*"))
    for _ in range(5):
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        before_ours = "init_import_site" in err or (
            err.rstrip().endswith("KeyboardInterrupt") and f"{os.sep}reserve{os.sep}" not in err
        )
        lost = proc.returncode == 0
        if not before_ours and not lost and (proc.returncode, err) != (-signal.SIGINT, ""):
            break
        _remove_new(cwd, given)
        if before_ours:
            delay *= 2.0
    return proc.returncode, err


def _remove_new(cwd: Path, given: set[Path]) -> None:
    """Remove what a run added under ``cwd`` (files, then folders, deepest first)."""
    for path in sorted(set(cwd.rglob("*")) - given, key=lambda p: len(p.parts), reverse=True):
        if path.is_dir():
            path.rmdir()
        else:
            path.unlink()


INTERRUPTED = (
    "reserve: error: interrupted (Ctrl-C); nothing was written, and any previous outputs are "
    "unchanged"
)


def _assert_interrupted(code: int, err: str) -> None:
    assert code == 128 + signal.SIGINT, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    lines = err.splitlines()
    assert lines[-1] == INTERRUPTED
    assert sum(line.startswith("reserve: error") for line in lines) == 1, err


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5, 1.0, 3.0])
def test_ctrl_c_at_any_moment_of_select(delay, workdir):
    """From the imports on, Ctrl-C gives one line and exit 130 (not -2), and writes nothing."""
    (workdir / "run").mkdir()
    (workdir / "run" / "notes.txt").write_text("a planner's file\n")
    before = snapshot(workdir)
    code, err = _interrupt_after(["select", "--budget", "30", "--out", "run"], workdir, delay)
    _assert_interrupted(code, err)
    assert snapshot(workdir) == before


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5])  # the whole run takes about 0.9 s
def test_ctrl_c_at_any_moment_of_ingest(delay, ebird, workdir):
    before = snapshot(workdir)
    code, err = _interrupt_after(_base(ebird), workdir, delay)
    _assert_interrupted(code, err)
    assert snapshot(workdir) == before


@pytest.mark.parametrize("module", ["reserve", "reserve.cli"])
def test_ctrl_c_while_the_command_line_is_loading(module, workdir):
    """``python -m reserve`` too; 50 ms in, Python is still importing the command line."""
    code, err = _interrupt_after(
        ["select", "--budget", "30", "--out", "run"], workdir, 0.05, module=module
    )
    _assert_interrupted(code, err)
    assert os.listdir(workdir) == []


def test_importing_reserve_changes_no_signal_handling():
    code = "import signal, reserve.cli; print(signal.getsignal(signal.SIGINT).__name__)"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "default_int_handler", out.stderr
