"""Independent work on several processors: forked children on Linux, this process elsewhere.

A forked child inherits every module already imported and the data already in memory, so it
starts in milliseconds: even the few-second fits of a small region gain from a second core.
A child is forked only where that is safe (:func:`can_fork`); otherwise the work runs here,
in order. Each call computes the same thing wherever it runs, so results never depend on
the number of processors.

A child that needs modules this process has not imported can be forked early, before this
process imports and computes, and import them meanwhile on another processor
(:func:`fork_standby`: ``reserve select`` draws its map in one).

Work that runs beside other work uses one BLAS thread (:func:`one_blas_thread`): two
processes each running a BLAS thread per processor oversubscribe them, and the threads' spin
waits then cost several times the work (docs/algorithm.md, "Speed").
"""

from __future__ import annotations

import ctypes
import importlib
import multiprocessing
import os
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from threadpoolctl import threadpool_limits

from reserve.errors import WorkerError

__all__ = [
    "Forked",
    "Standby",
    "can_fork",
    "fork_call",
    "fork_map",
    "fork_standby",
    "one_blas_thread",
]

#: Seconds a child has to end after sending its result before it is terminated.
_EXIT_GRACE = 10.0

_FORK = sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


def can_fork() -> bool:
    """Whether a child may be forked here: Linux, the only Python thread, not a daemon.

    A fork copies one thread; a lock another Python thread held at that moment would stay
    locked in the child forever.
    """
    return (
        _FORK
        and threading.current_thread() is threading.main_thread()
        and threading.active_count() == 1
        and not multiprocessing.current_process().daemon
    )


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Inside the block, the BLAS libraries (OpenBLAS, MKL) use one thread.

    For a task that may share the processors with other tasks: wrap it whether it runs here
    or in a child, so that it computes the same way wherever it runs (a BLAS library may sum
    in another order on another number of threads). The limit is process-wide
    (threadpoolctl): two Python threads entering and leaving it at once can leave the other's
    setting behind, so fits meant to run side by side go to processes (:func:`fork_map`).

    Examples
    --------
    >>> import numpy as np
    >>> with one_blas_thread():
    ...     float(np.ones(3) @ np.ones(3))
    3.0
    """
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _die_with_parent(parent: int) -> None:
    """In a forked child: end it when the parent ends (Linux ``prctl``).

    Without it a parent killed mid-fit would leave its children computing.
    """
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - no prctl: the work still ends
        return
    if os.getppid() != parent:  # the parent ended before prctl took effect
        os._exit(1)


def _run_child(conn: Any, parent: int, fn: Callable, args: tuple) -> None:
    _die_with_parent(parent)
    # Ctrl-C at a terminal reaches the whole process group: the parent stops (and ends its
    # children), and a child must not print a traceback of its own meanwhile
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # and SIGTERM (how the parent ends it) ends it at once, not through the parent's handler
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        out: tuple = (True, fn(*args))
    except Exception as exc:  # handed to the parent, which raises it there
        out = (False, exc, traceback.format_exc())
    try:
        conn.send(out)
    except Exception:  # the value or the error does not pickle: say so, with the traceback
        conn.send((False, None, traceback.format_exc() if out[0] else out[2]))
    conn.close()


class Forked:
    """A call running in a forked child; :meth:`result` waits for its value.

    Made by :func:`fork_call`. The child's exception is raised again by :meth:`result`, with
    the child's traceback as its cause. The child is a daemon: it never outlives this
    process, and it dies with it (Linux ``prctl``) when this process is killed.
    """

    def __init__(self, fn: Callable, args: tuple) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child_conn = ctx.Pipe(duplex=False)
        try:
            self._proc = ctx.Process(
                target=_run_child, daemon=True, args=(child_conn, os.getpid(), fn, args)
            )
            with warnings.catch_warnings():
                # Python 3.12+ warns at every fork of a process with threads; here those are
                # BLAS's (no other Python thread: can_fork), and the child only computes.
                warnings.filterwarnings(
                    "ignore", "This process .* multi-threaded", DeprecationWarning
                )
                self._proc.start()
        except BaseException:
            self._conn.close()
            raise
        finally:
            child_conn.close()

    def result(self) -> Any:
        """The call's value (blocks until the child sends it); the child is ended after."""
        try:
            message = self._conn.recv()
        except EOFError:
            self._proc.join()
            raise WorkerError(
                f"a worker process ended without a result (exit code {self._proc.exitcode}); "
                "it may have been killed or run out of memory: retry on one processor "
                "(--n-jobs 1, n_jobs=1)"
            ) from None
        except Exception as exc:  # an error the child sent that does not unpickle here
            raise WorkerError(f"a worker process failed: {exc!r}") from None
        finally:
            self._proc.join(timeout=_EXIT_GRACE)  # it ends right after sending
            self.cancel()
        if message[0]:
            return message[1]
        _, exc, trace = message
        cause = _ChildTraceback(trace)
        if exc is None:
            raise WorkerError(
                "a worker process failed; its result or error could not be "
                "sent back (see the cause)"
            ) from cause
        raise exc from cause

    def poll(self, timeout: float = 0.0) -> bool:
        """Whether :meth:`result` would return at once (waiting up to ``timeout`` seconds)."""
        return self._proc.exitcode is not None or self._conn.poll(timeout)

    def cancel(self) -> None:
        """End the child (at once, if it still runs) and close its pipe."""
        if self._proc.is_alive():
            self._proc.terminate()
        self._proc.join()
        self._conn.close()


class _ChildTraceback(Exception):
    """The traceback of an error in a forked child, shown as the cause of the one raised."""

    def __str__(self) -> str:
        return "\n" + str(self.args[0]) if self.args else ""


def _start(fn: Callable, args: tuple) -> Forked | None:
    """:class:`Forked`, or None when the fork itself fails (out of memory, process limit)."""
    try:
        return Forked(fn, args)
    except OSError:
        return None


def fork_call(fn: Callable, *args: Any) -> Forked | None:
    """Start ``fn(*args)`` in a forked child, or return None where :func:`can_fork` is false.

    The caller runs ``fn(*args)`` itself on None.

    Examples
    --------
    >>> job = fork_call(sum, [1, 2, 3])
    >>> (sum([1, 2, 3]) if job is None else job.result())
    6
    """
    return _start(fn, args) if can_fork() else None


def _standby(calls: Any, sender: Any, modules: tuple[str, ...]) -> Any:
    """In a :class:`Standby` child: import ``modules``, then run the one call sent."""
    sender.close()  # this child's copy: the parent's close (or death) then ends the wait
    for name in modules:
        importlib.import_module(name)
    try:
        fn, args = calls.recv()
    except EOFError:  # cancelled before a call came
        return None
    finally:
        calls.close()
    return fn(*args)


class Standby:
    """A child forked now that imports what a later call needs, then runs that call.

    Made by :func:`fork_standby`. A forked child inherits only the modules imported before
    the fork; one that must import slow modules (folium compiles its page templates on
    import) can do so on a second processor while this process imports and computes, and
    then start its call at once when :meth:`submit` sends it.

    Parameters
    ----------
    modules : sequence of str
        Modules the child imports as soon as it starts.
    """

    def __init__(self, modules: Sequence[str]) -> None:
        ctx = multiprocessing.get_context("fork")
        calls, self._sender = ctx.Pipe(duplex=False)
        try:
            self._job = Forked(_standby, (calls, self._sender, tuple(modules)))
        except BaseException:
            self._sender.close()
            raise
        finally:
            calls.close()

    def submit(self, fn: Callable, *args: Any) -> Forked:
        """Send ``fn(*args)`` (pickled) to the child; its :meth:`Forked.result` waits for it.

        One call per child: the channel is closed after it.
        """
        try:
            self._sender.send((fn, args))
        except BaseException:
            self.cancel()
            raise
        finally:
            self._sender.close()
        return self._job

    def cancel(self) -> None:
        """End the child, whether it was sent a call or not (a no-op once it has ended)."""
        self._sender.close()
        self._job.cancel()


def fork_standby(modules: Sequence[str]) -> Standby | None:
    """A :class:`Standby` child importing ``modules``, or None where none may be forked.

    Examples
    --------
    >>> child = fork_standby(["json"])
    >>> (len([1, 2]) if child is None else child.submit(len, [1, 2]).result())
    2
    """
    if not can_fork():
        return None
    try:
        return Standby(modules)
    except OSError:  # out of memory or processes: the caller does the work itself
        return None


def _claim(counter: Any) -> int:
    with counter.get_lock():
        i = counter.value
        counter.value = i + 1
    return i


class _Tally:
    """Tasks finished by any process of a :func:`fork_map`, told to ``on_done`` in this one."""

    def __init__(self, finished: Any, on_done: Callable[[int], None]) -> None:
        self.finished, self.on_done, self.told, self.pid = finished, on_done, 0, os.getpid()

    def add(self) -> None:
        """One more task finished, in whichever process ran it (told if that is this one)."""
        with self.finished.get_lock():
            self.finished.value += 1
        if os.getpid() == self.pid:
            self.tell()

    def tell(self) -> None:
        """In this process: call ``on_done`` with the new count, if it grew."""
        n = self.finished.value
        if n > self.told:
            self.told = n
            self.on_done(n)


def _run_claimed(
    fn: Callable, tasks: Sequence[tuple], counter: Any, tally: _Tally | None = None
) -> dict[int, Any]:
    """Run the tasks not yet claimed by another process, one at a time; ``{index: value}``."""
    out = {}
    while (i := _claim(counter)) < len(tasks):
        out[i] = fn(*tasks[i])
        if tally is not None:
            tally.add()
    return out


def fork_map(
    fn: Callable, tasks: Sequence[tuple], jobs: int, on_done: Callable[[int], None] | None = None
) -> list:
    """``[fn(*task) for task in tasks]``, shared between this process and forked children.

    ``jobs`` processes (this one and ``jobs - 1`` children) each take the next task not yet
    taken until none is left, so a long task does not hold up the others' share; without
    fork (:func:`can_fork`) all run here, in order.

    ``on_done(n)`` is called in this process as the tasks finish, wherever they ran, with the
    number finished so far (1 to ``len(tasks)``, growing; a count may be skipped when two
    tasks finish together): for progress messages.

    Examples
    --------
    >>> fork_map(pow, [(2, 3), (3, 2), (10, 0)], jobs=2)
    [8, 9, 1]
    """
    jobs = max(1, min(int(jobs), len(tasks)))
    if jobs == 1 or not can_fork():
        out = []
        for i, task in enumerate(tasks):
            out.append(fn(*task))
            if on_done is not None:
                on_done(i + 1)
        return out
    ctx = multiprocessing.get_context("fork")
    counter = ctx.Value("q", 0)
    tally = None if on_done is None else _Tally(ctx.Value("q", 0), on_done)
    children: list[Forked] = []
    try:
        # a child that cannot be forked leaves its share to the others
        children = [
            c
            for c in (_start(_run_claimed, (fn, tasks, counter, tally)) for _ in range(jobs - 1))
            if c is not None
        ]
        done = _run_claimed(fn, tasks, counter, tally)
        if tally is not None:  # tell the children's tasks as they finish
            while not all(child.poll(0.2 / len(children)) for child in children):
                tally.tell()
        for child in children:
            done.update(child.result())
        if tally is not None:
            tally.tell()
    except BaseException:
        for child in children:  # none may compute on, or hold this process at exit
            child.cancel()
        raise
    return [done[i] for i in range(len(tasks))]
