"""Time budgets: run one pipeline job in a worker process that is stopped when it overruns.

An isl computation cannot be interrupted from Python (it holds the interpreter inside C), so a
budget is enforced from outside: the job runs in a *spawned* process (no OpenCL context is ever
shared across a fork) and reports each stage it enters; the parent kills it when the whole job
exceeds ``timeout`` seconds or one stage exceeds ``stage_timeout``, and raises
:class:`BudgetExceeded` naming the stage that was running::

    >>> from polyfuse.core.watchdog import call_with_budget                    # doctest: +SKIP
    >>> call_with_budget(fuse_model, ("m.onnx", "out"), timeout=120)      # doctest: +SKIP
    BudgetExceeded: m.onnx: stopped after 120 s in stage 'planning fusion' (--timeout 120)

The job is called as ``fn(*args, progress=callback, **kwargs)``; its result must be picklable.
"""

from __future__ import annotations

import ctypes
import importlib
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Optional

from polyfuse.core.program import PolyfuseError

#: the stage before the job reports its first one (starting the interpreter, importing)
_STARTING = "starting the worker process"


class BudgetExceeded(PolyfuseError):
    """A job overran its time budget; ``stage`` is the stage it was in."""

    def __init__(self, message: str, stage: str, file: Optional[str] = None):
        super().__init__(message, file)
        self.stage = stage


class WorkerInternalError(PolyfuseError):
    """An unexpected exception (a bug) in the worker; ``traceback`` is the worker's text."""

    def __init__(self, message: str, traceback_text: str):
        super().__init__(message)
        self.traceback = traceback_text


class WorkerCrashed(PolyfuseError):
    """The worker died in native code; ``stage`` is the stage it was in, ``signal`` the
    signal's name (``None`` when it exited without one)."""

    def __init__(self, message: str, stage: str, signal_name: Optional[str]):
        super().__init__(message)
        self.stage = stage
        self.signal = signal_name


#: ``prctl`` option: the signal a process gets when its parent dies (linux/prctl.h)
_PR_SET_PDEATHSIG = 1
#: the running worker's stage reporter (empty outside a worker)
_REPORTER: list[Callable[[str], None]] = []
#: the stages entered through :func:`stage`, innermost last
_STAGES: list[str] = []


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Report ``name`` as the worker's stage for the body, then the enclosing one again: a
    native crash in a kernel build deep inside a command then names the kernel.  Does nothing
    outside a worker process."""
    if not _REPORTER:
        yield
        return
    _STAGES.append(name)
    _REPORTER[0](name)
    try:
        yield
    finally:
        _STAGES.pop()
        if _STAGES:
            _REPORTER[0](_STAGES[-1])


def _die_with_parent() -> None:
    """Ask the kernel to kill this worker when its parent dies (Linux ``PR_SET_PDEATHSIG``).

    Why: a parent killed from outside (a timeout, Ctrl-C twice, a test runner's kill) cannot
    stop its worker, and an orphan inside an isl computation or a kernel build would go on
    using a core for minutes; a thread cannot watch for this, as isl holds the interpreter."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    parent = multiprocessing.parent_process()
    if parent is not None and os.getppid() != parent.pid:  # it died before prctl
        os._exit(1)


def _child(conn: Any, fn: Callable, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    _die_with_parent()

    def progress(stage: str) -> None:
        conn.send(("stage", stage))

    _REPORTER.append(progress)
    try:
        conn.send(("result", fn(*args, progress=progress, **kwargs)))
    except PolyfuseError as err:
        conn.send(("polyfuse_error", (err.message, err.file, err.line)))
    except MemoryError:
        conn.send(("polyfuse_error", ("out of memory (the sizes are too large for this machine; "
                                  "fix them with --param or use smaller inputs)", None, None)))
    except RecursionError:
        conn.send(("polyfuse_error", ("the input nests too deeply for polyfuse's parser and "
                                  "analyses", None, None)))
    except BaseException as err:  # noqa: BLE001 - everything goes back to the parent as one line
        first = (str(err).strip().splitlines() or [""])[0]
        conn.send(("internal_error", (f"{type(err).__name__}: {first}", traceback.format_exc())))


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` and its live descendants
    (Linux ``/proc``; 0 elsewhere).  A budget in CPU time judges the job, not how busy the
    machine is."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    stats: dict[int, tuple[int, float]] = {}
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return 0.0
    for e in entries:
        try:
            with open(f"/proc/{e}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # after the command name: state ppid ... utime (14th field) stime (15th)
        stats[int(e)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    total, todo = 0.0, [pid]
    children: dict[int, list[int]] = {}
    for p, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(p)
    while todo:
        p = todo.pop()
        total += stats.get(p, (0, 0.0))[1]
        todo += children.get(p, [])
    return total


def _death(exitcode: Optional[int], stage: str, prefix: str) -> WorkerCrashed:
    """One line for a worker that ended without an answer: a signal is a native crash (isl,
    PoCL, the compiler of generated code), named with the stage it happened in."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown signal"
        return WorkerCrashed(f"{prefix}stage '{stage}' crashed (signal {-exitcode}, {name}) in "
                             "native code; the job ran in a worker process, so nothing else "
                             "was affected", stage, name)
    return WorkerCrashed(f"{prefix}the worker process died (exit code {exitcode}) in stage "
                         f"'{stage}'", stage, None)


@contextmanager
def _user_script_hidden() -> Iterator[None]:
    """While a spawned worker is prepared, ``__main__`` is a bare module: the worker then does
    not run the user's script again (which, without an ``if __name__ == "__main__"`` guard,
    would open the session that started the worker once more and fail, and with one still
    re-imports everything the script imports)."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


#: held while ``__main__`` is swapped out and a worker starts: threads of one process that
#: start workers at once (the fuzzer's ``--jobs``) would otherwise pickle their jobs while
#: another thread had hidden the script, and fail
_START_LOCK = threading.Lock()


def _start_without_user_script(proc: multiprocessing.process.BaseProcess) -> None:
    """Start ``proc`` without re-running the user's script in it, unless the job needs it (a
    function or value defined in the script pickles by a reference into ``__main__``)."""
    with _START_LOCK:
        try:
            with _user_script_hidden():
                proc.start()
        except (pickle.PicklingError, AttributeError, TypeError):
            proc.start()


def _importable(fn: Callable) -> Callable:
    """``fn`` by a name a worker can import.  A function of a module run as a program
    (``python -m polyfuse.oracle.fuzz``) is ``__main__.f`` to pickle, which a worker that
    does not re-run the program lacks; its module's real name (``__main__.__spec__``)
    reaches the same code."""
    if getattr(fn, "__module__", None) != "__main__":
        return fn
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    name = getattr(spec, "name", None)
    if not name or name == "__main__":
        return fn
    try:
        module = importlib.import_module(name)
    except ImportError:
        return fn
    return getattr(module, getattr(fn, "__qualname__", ""), fn)


def call_with_budget(fn: Callable, args: Sequence[Any] = (),
                     kwargs: Optional[Mapping[str, Any]] = None, *,
                     timeout: Optional[float] = None, stage_timeout: Optional[float] = None,
                     label: str = "", on_stage: Optional[Callable[[str], None]] = None,
                     poll: float = 0.25, cpu_timeout: Optional[float] = None) -> Any:
    """``fn(*args, progress=..., **kwargs)`` in a worker process under a time budget.

    Errors of the job come back as :class:`PolyfuseError` (bad input) or as a
    :class:`PolyfuseError` saying ``internal error`` (a bug); an overrun kills the worker and
    raises :class:`BudgetExceeded`.  ``on_stage`` sees every stage the job enters.
    ``cpu_timeout`` bounds the CPU seconds of the worker (and its children) instead of the
    wall clock: on a loaded machine it tells a job that hangs from one that waits for a core.
    """
    if multiprocessing.current_process().daemon:
        # a daemonic process (a dask or multiprocessing-pool worker, itself the isolation the
        # batch gives each model) may not start children: the job runs here, unbudgeted
        return fn(*args, progress=on_stage or (lambda _stage: None), **(kwargs or {}))
    ctx = multiprocessing.get_context("spawn")
    # a pipe, not a Queue: a message is written when sent, so the stage a crash happened in
    # has reached the parent even when the worker dies right after
    recv_end, send_end = ctx.Pipe(duplex=False)
    # not a daemon: a worker may start its own (a kernel build checked in a worker of its own
    # inside a command's worker); the ``finally`` below ends it either way
    proc = ctx.Process(target=_child, args=(send_end, _importable(fn), tuple(args),
                                            dict(kwargs or {})))
    start = time.monotonic()
    _start_without_user_script(proc)
    send_end.close()
    stage, stage_start = _STARTING, start
    prefix = f"{label}: " if label else ""
    try:
        while True:
            now = time.monotonic()
            over = None
            if timeout is not None and now - start > timeout:
                over = f"stopped after {timeout:g} s in stage '{stage}' (--timeout {timeout:g})"
            elif cpu_timeout is not None and proc.pid is not None \
                    and tree_cpu_seconds(proc.pid) > cpu_timeout:
                over = f"stopped after {cpu_timeout:g} s of CPU time in stage '{stage}'"
            elif stage_timeout is not None and stage != _STARTING \
                    and now - stage_start > stage_timeout:
                over = (f"stage '{stage}' took more than {stage_timeout:g} s "
                        f"(--stage-timeout {stage_timeout:g})")
            if over:
                raise BudgetExceeded(prefix + over, stage)
            try:
                if not recv_end.poll(poll):
                    continue
                kind, value = recv_end.recv()
            except EOFError:  # the worker ended without an answer
                proc.join(timeout=5)
                raise _death(proc.exitcode, stage, prefix) from None
            if kind == "stage":
                stage, stage_start = value, time.monotonic()
                if on_stage is not None:
                    on_stage(value)
            elif kind == "result":
                return value
            elif kind == "polyfuse_error":
                raise PolyfuseError(*value)
            else:
                raise WorkerInternalError(f"{prefix}internal error in stage '{stage}': "
                                          f"{value[0]}", value[1])
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=5)
        recv_end.close()


__all__ = ["BudgetExceeded", "WorkerCrashed", "WorkerInternalError", "call_with_budget", "stage",
           "tree_cpu_seconds"]
