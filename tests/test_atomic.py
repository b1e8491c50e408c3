"""write_together with the outputs written side by side in forked children."""

from __future__ import annotations

import os
import time

import pytest

from reserve import fork
from reserve.errors import DataFileError
from reserve.io.atomic import atomic_target, remove_stale_temporaries, write_together


def _pid_writer(tmp):
    tmp.write_text(str(os.getpid()))


def _refuse(tmp):
    tmp.write_text("half")
    raise DataFileError("cannot write the map")


def _slow_writer(tmp):
    tmp.write_text("start")
    time.sleep(30)


@pytest.mark.skipif(not fork.can_fork(), reason="forked children are Linux only")
def test_parallel_writes_every_output_and_the_first_in_a_child(only_thread, tmp_path):
    jobs = [
        (tmp_path / "a" / "m.html", ".html", _pid_writer),
        (tmp_path / "r.gpkg", ".gpkg", _pid_writer),
    ]
    write_together(jobs, parallel=True)
    first, last = (tmp_path / "a" / "m.html").read_text(), (tmp_path / "r.gpkg").read_text()
    assert last == str(os.getpid()) and first != last
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "m.html", "r.gpkg"]


@pytest.mark.parametrize("parallel", [True, False])
def test_a_failed_child_renames_nothing_and_leaves_no_temporary(only_thread, tmp_path, parallel):
    (tmp_path / "r.gpkg").write_text("previous")
    jobs = [
        (tmp_path / "new" / "m.html", ".html", _refuse),
        (tmp_path / "r.gpkg", ".gpkg", _pid_writer),
    ]
    with pytest.raises(DataFileError, match="cannot write the map"):
        write_together(jobs, parallel=parallel)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["r.gpkg"]
    assert (tmp_path / "r.gpkg").read_text() == "previous"


@pytest.mark.skipif(not fork.can_fork(), reason="forked children are Linux only")
def test_an_error_here_ends_the_child_before_the_temporaries_go(only_thread, tmp_path):
    jobs = [(tmp_path / "m.html", ".html", _slow_writer), (tmp_path / "r.gpkg", ".gpkg", _refuse)]
    t0 = time.monotonic()
    with pytest.raises(DataFileError):
        write_together(jobs, parallel=True)
    assert time.monotonic() - t0 < 20  # the sleeping child was ended, not waited for
    assert list(tmp_path.iterdir()) == []


def _late_writer(tmp):
    time.sleep(0.3)
    tmp.write_text(str(os.getpid()))


def _handed_to_a_child(write):
    """A writer that hands ``write`` to a forked child and returns at once (as a drawer)."""
    return lambda tmp: fork.fork_call(write, tmp)


@pytest.mark.skipif(not fork.can_fork(), reason="forked children are Linux only")
@pytest.mark.parametrize("first", [True, False])
def test_a_write_handed_to_a_child_is_waited_for_before_the_renames(only_thread, tmp_path, first):
    handed = (tmp_path / "m.html", ".html", _handed_to_a_child(_late_writer))
    here = (tmp_path / "r.gpkg", ".gpkg", _pid_writer)
    write_together([handed, here] if first else [here, handed])
    assert (tmp_path / "m.html").read_text() not in ("", str(os.getpid()))  # the child's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.html", "r.gpkg"]


@pytest.mark.skipif(not fork.can_fork(), reason="forked children are Linux only")
def test_a_failed_write_handed_to_a_child_renames_nothing(only_thread, tmp_path):
    (tmp_path / "r.gpkg").write_text("previous")
    jobs = [
        (tmp_path / "m.html", ".html", _handed_to_a_child(_refuse)),
        (tmp_path / "r.gpkg", ".gpkg", _pid_writer),
    ]
    with pytest.raises(DataFileError, match="cannot write the map"):
        write_together(jobs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.gpkg"]
    assert (tmp_path / "r.gpkg").read_text() == "previous"


def _dead(path):
    """``path`` (a temporary of this process) as a dead process's would be named."""
    return path.with_name(path.name.replace(f".{os.getpid()}.tmp", ".999999999.tmp"))


def test_temporaries_of_a_long_name_fit_and_are_found_stale(tmp_path):
    target = tmp_path / ("m" * 250 + ".html")
    first = atomic_target(target, ".html")
    nested = atomic_target(first, ".html")  # a writer called on a temporary path
    assert len(nested.name) + len("-journal") <= 255
    stale = [_dead(first), _dead(nested)]
    other = tmp_path / ".other.html.999999999.tmp.html"
    for path in [*stale, other]:
        path.write_text("left by a killed run")
    assert sorted(remove_stale_temporaries(target)) == sorted(stale)
    assert [p.name for p in tmp_path.iterdir()] == [other.name]
