"""Forked children: the same answers as this process, in order; errors and deaths reported."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from reserve import fork
from reserve.errors import WorkerError

needs_fork = pytest.mark.skipif(not fork.can_fork(), reason="forked children are Linux only")


def _pid_square(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _fail(x: int) -> int:
    raise ValueError(f"bad task {x}")


def _die(x: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return x


def _slow_pid_square(x: int) -> tuple[int, int]:
    time.sleep(0.02)
    return x * x, os.getpid()


def _refuse_to_load():
    raise RuntimeError("cannot be loaded here")


class _Unloadable:
    def __reduce__(self):  # pickles, but loading it raises
        return _refuse_to_load, ()


def _unloadable(x: int):
    return _Unloadable()


def _unpicklable(x: int):
    return lambda: x


def _fail_or_sleep(x: int) -> int:
    if x == 1:
        raise ValueError("task 1 failed")
    time.sleep(3)
    return x


@needs_fork
def test_fork_map_returns_every_value_in_order_from_several_processes(only_thread):
    out = fork.fork_map(_slow_pid_square, [(i,) for i in range(40)], jobs=2)
    assert [v for v, _ in out] == [i * i for i in range(40)]
    pids = {p for _, p in out}
    assert os.getpid() in pids and len(pids) == 2  # each task takes 20 ms: both took some


@needs_fork
def test_fork_map_tells_progress_here_as_tasks_finish_anywhere(only_thread):
    told = []
    out = fork.fork_map(
        _slow_pid_square,
        [(i,) for i in range(40)],
        jobs=2,
        on_done=lambda n: told.append((n, os.getpid())),
    )
    assert [v for v, _ in out] == [i * i for i in range(40)]
    counts = [n for n, _ in told]
    assert counts == sorted(set(counts)) and counts[-1] == 40 and len(counts) >= 10
    assert {pid for _, pid in told} == {os.getpid()}  # told in this process only


def test_fork_map_tells_every_task_without_fork(monkeypatch):
    monkeypatch.setattr(fork, "_FORK", False)
    told = []
    fork.fork_map(_pid_square, [(i,) for i in range(5)], jobs=4, on_done=told.append)
    assert told == [1, 2, 3, 4, 5]


def test_fork_map_runs_here_without_fork(monkeypatch):
    monkeypatch.setattr(fork, "_FORK", False)
    out = fork.fork_map(_pid_square, [(i,) for i in range(5)], jobs=4)
    assert out == [(i * i, os.getpid()) for i in range(5)]
    assert fork.fork_call(_pid_square, 3) is None


def test_no_fork_while_another_python_thread_runs():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not fork.can_fork()
        out = fork.fork_map(_pid_square, [(i,) for i in range(4)], jobs=2)
    finally:
        stop.set()
        other.join()
    assert {p for _, p in out} == {os.getpid()}


@needs_fork
def test_fork_call_runs_in_a_child_and_returns_its_value(only_thread):
    job = fork.fork_call(_pid_square, 7)
    value, pid = job.result()
    assert value == 49 and pid != os.getpid()


@needs_fork
def test_a_child_error_is_raised_here(only_thread):
    job = fork.fork_call(_fail, 3)
    with pytest.raises(ValueError, match="bad task 3"):
        job.result()
    with pytest.raises(ValueError, match="bad task"):
        fork.fork_map(_fail, [(1,), (2,), (3,)], jobs=2)


@needs_fork
def test_a_child_that_dies_is_a_worker_error(only_thread):
    job = fork.fork_call(_die, 1)
    with pytest.raises(WorkerError, match=r"ended without a result \(exit code -9\)"):
        job.result()


@needs_fork
def test_cancel_ends_the_child(only_thread):
    job = fork.fork_call(signal.pause)
    job.cancel()
    assert job._proc.exitcode == -signal.SIGTERM


@needs_fork
def test_an_error_that_does_not_cross_the_pipe_is_a_worker_error(only_thread):
    with pytest.raises(WorkerError, match=r"worker process failed.*cannot be loaded here"):
        fork.fork_call(_unloadable, 3).result()
    with pytest.raises(WorkerError, match="could not be sent back") as info:
        fork.fork_call(_unpicklable, 3).result()
    assert "pickle" in str(info.value.__cause__).lower()  # the child's traceback says why


@needs_fork
def test_a_failing_child_ends_its_siblings(only_thread, monkeypatch):
    # task 1 fails in one process while the others sleep: the error is raised here and no
    # child is left computing (or holding this process at exit)
    started = []
    real = fork.Forked

    def spy(fn, args):
        started.append(real(fn, args))
        return started[-1]

    monkeypatch.setattr(fork, "Forked", spy)
    with pytest.raises(ValueError, match="task 1 failed"):
        fork.fork_map(_fail_or_sleep, [(0,), (1,), (2,)], jobs=3)
    assert len(started) == 2
    assert not any(child._proc.is_alive() for child in started)


def test_a_fork_that_fails_leaves_the_work_here(only_thread, monkeypatch):
    def no_fork(fn, args):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(fork, "Forked", no_fork)
    assert fork.fork_call(_pid_square, 2) is None
    out = fork.fork_map(_pid_square, [(i,) for i in range(4)], jobs=2)
    assert out == [(i * i, os.getpid()) for i in range(4)]


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_one_blas_thread_inside_the_block_only():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        with fork.one_blas_thread():
            assert _blas_threads() and set(_blas_threads()) == {1}
        assert _blas_threads() == before


def test_fold_scores_and_ladder_fits_run_on_one_blas_thread(monkeypatch):
    """The CV's folds and the ladder's fits share the processors: one BLAS thread each,
    wherever they run (so they compute the same way on one processor or many)."""
    from threadpoolctl import threadpool_limits

    from reserve.solvers import TTK, search
    from reserve.solvers import ttk as ttk_module

    seen = []
    monkeypatch.setattr(search, "_score_fold_here", lambda *a: seen.append(_blas_threads()))
    ttk = TTK()
    monkeypatch.setattr(ttk, "_fit_local", lambda *a: seen.append(_blas_threads()))
    monkeypatch.setattr(ttk_module, "_LOCAL_STATE", ())
    with threadpool_limits(limits=2, user_api="blas"):  # more than one outside
        assert set(_blas_threads()) == {2}
        search._score_fold(*range(10))
        ttk._fit_local_state()
    assert len(seen) == 2 and all(t and set(t) == {1} for t in seen)


def _imported(name: str) -> tuple[bool, int]:
    return name in sys.modules, os.getpid()


@needs_fork
def test_standby_imports_its_modules_at_once_then_runs_the_call_sent(only_thread):
    name = "tabnanny"  # a module nothing here imports
    had = name in sys.modules
    child = fork.fork_standby([name])
    assert child is not None
    assert child.submit(_imported, name).result() == (True, child._job._proc.pid)
    assert (name in sys.modules) == had  # imported there, not here
    assert child._job._proc.exitcode is not None  # it ended after sending the value


@needs_fork
def test_standby_raises_the_calls_error_and_a_failed_import(only_thread):
    with pytest.raises(ValueError, match="bad task 4"):
        fork.fork_standby(["json"]).submit(_fail, 4).result()
    with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
        fork.fork_standby(["no_such_module_here"]).submit(_pid_square, 2).result()


@needs_fork
def test_a_cancelled_standby_ends_without_a_call_and_twice_is_harmless(only_thread):
    child = fork.fork_standby(["json"])
    child.cancel()
    child.cancel()
    assert child._job._proc.exitcode is not None
    with pytest.raises(OSError):  # the channel is closed: nothing can be sent any more
        child.submit(_pid_square, 2)


def test_no_standby_where_no_child_may_be_forked(monkeypatch):
    monkeypatch.setattr(fork, "can_fork", lambda: False)
    assert fork.fork_standby(["json"]) is None


def _sleepy_value(x: int) -> int:
    time.sleep(0.6)
    return x


@needs_fork
def test_a_child_ignores_ctrl_c_which_is_the_parents_to_handle(only_thread):
    job = fork.fork_call(_sleepy_value, 5)
    time.sleep(0.3)  # the child has set its handler
    os.kill(job._proc.pid, signal.SIGINT)
    assert job.result() == 5
