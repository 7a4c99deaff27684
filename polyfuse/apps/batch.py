"""Batch fusion of ONNX models (``polyfuse fuse MODEL.onnx... --out DIR --jobs N``).

Each model is handled on its own: load, plan, generate, optionally verify (onnxruntime and the
unfused program) and time, then write ``DIR/<stem>/{plan.json, fused.cl, report.md}``.  A model
that fails does not stop the others; its summary row carries the one-line reason.

Where the models run:

* in this process (``jobs`` 1), one after the other;
* in ``jobs`` worker processes, *spawned*, not forked, so no OpenCL context is ever shared
  across a fork;
* on a Dask cluster (``scheduler="tcp://HOST:PORT"``, or ``"local"`` for a
  ``dask.distributed.LocalCluster`` on this machine): one task per model.  The workers write the
  output files, so ``DIR`` must be on a file system they share with the client (on one machine it
  is).

All three return the same summaries in the order of the inputs, and write byte-identical files.
Results are kept in the disk cache (:mod:`polyfuse.core.cache`) unless ``cache=False``.
Progress is a ``tqdm`` bar on stderr when it is a terminal (models done, and the current model's
stage), else one line per stage.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from polyfuse.core.mathtext import readable
from polyfuse.core.program import PolyfuseError
from polyfuse.passes.compilation import Compilation, Stage, Timing

SUMMARY_HEADERS = ["model", "nodes", "launches before", "launches after", "max abs err",
                   "verified", "unfused ms", "fused ms", "timed", "status"]

#: pipeline stages in the order they run (the ``--profile`` table's rows)
STAGES = ("cache", "load", "build_uar", "plan", "generate", "verify", "write", "timing")
#: the ``--profile`` row each pass's time is counted in (coarsening has a timer of its own)
STAGE_OF: dict[Stage, str] = {
    Stage.LOAD: "load", Stage.UAR: "build_uar", Stage.TUNE: "plan", Stage.PLAN: "plan",
    Stage.CERTIFY: "plan", Stage.GENERATE: "generate", Stage.BUILD: "generate",
    Stage.COARSEN: "coarsen", Stage.VERIFY: "verify", Stage.WRITE: "write", Stage.TIME: "timing",
}


@dataclass(frozen=True)
class ModelSummary:
    """One row of the batch summary, with the seconds each stage took."""

    model: str
    nodes: Optional[int] = None
    #: an int, or the exact str of a symbolic count (the row prints it readable)
    launches_before: Union[int, str, None] = None
    launches_after: Union[int, str, None] = None
    max_abs_err: Optional[float] = None
    verified: Optional[bool] = None
    unfused_ms: Optional[float] = None
    fused_ms: Optional[float] = None
    #: what was timed: the kernel form and the runs (``blocked, 5+5 runs``)
    timed: Optional[str] = None
    error: Optional[str] = None
    stages: dict[str, float] = field(default_factory=dict, compare=False)
    cached: bool = field(default=False, compare=False)

    def row(self) -> list[str]:
        def fmt(v: Any, spec: str = "") -> str:
            return "-" if v is None else format(v, spec)

        verified = "-" if self.verified is None else ("ok" if self.verified else "MISMATCH")
        def count(v: Union[int, str, None]) -> str:
            return "-" if v is None else readable(v)

        return [self.model, fmt(self.nodes), count(self.launches_before),
                count(self.launches_after), fmt(self.max_abs_err, ".2e"), verified,
                fmt(self.unfused_ms, ".3f"), fmt(self.fused_ms, ".3f"), fmt(self.timed),
                f"FAILED: {self.error}" if self.error else "ok"]

    @property
    def ok(self) -> bool:
        return self.error is None and self.verified is not False


class _Stages:
    """Seconds per stage, and the stage callback for progress."""

    def __init__(self, say: Callable[[str], None]):
        self.times: dict[str, float] = {}
        self.say = say

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        self.say(stage)
        t = time.perf_counter()
        try:
            yield
        finally:
            self.times[stage] = self.times.get(stage, 0.0) + time.perf_counter() - t


def _summary_fields(s: ModelSummary) -> dict:
    return {k: v for k, v in asdict(s).items() if k not in ("stages", "cached")}


def fuse_model(path: str, out_root: str, *, verify: bool = False, tune: bool = False,
               timing: bool = True, params: Optional[dict[str, int]] = None,
               repeat: int = 5, cache: bool = True, device: Optional[str] = None,
               weigh: bool = True,
               progress: Optional[Callable[[str], None]] = None) -> ModelSummary:
    """Fuse one model and write its outputs; errors become the summary's ``error``;
    ``weigh=False`` keeps every group the planner fused (:mod:`polyfuse.passes.group_weighing`)."""
    from polyfuse.core import cache as disk

    stem = Path(path).name.removesuffix(".onnx")
    out_dir = Path(out_root) / stem
    stage = _Stages(progress or (lambda _s: None))
    options = {"verify": verify, "tune": tune, "timing": timing, "repeat": repeat,
               "params": sorted((params or {}).items()), "weigh": weigh}
    try:
        key = None
        if cache:
            with stage("cache"):
                from polyfuse.runtime.device import get_device, stable_device_key

                # the plan is made for the device's limits: its key is part of the entry's
                key = disk.key([path], options, stable_device_key(get_device(device)))
                hit = disk.load(key, out_dir)
            if hit is not None:
                return ModelSummary(**hit, stages=stage.times, cached=True)
        summary = _fuse_uncached(path, out_dir, stem, stage, verify=verify, tune=tune,
                                 timing=timing, params=params, repeat=repeat, device=device,
                                 weigh=weigh)
        if key is not None and summary.error is None:
            disk.store(key, out_dir, _summary_fields(summary))
        return summary
    except PolyfuseError as err:
        return ModelSummary(model=stem, error=str(err), stages=stage.times)
    except Exception as err:  # a bug, not bad input: keep the batch going, say what it was
        return ModelSummary(model=stem, error=f"internal error: {type(err).__name__}: {err}",
                            stages=stage.times)


#: seconds ``polyfuse fuse`` times each program of a model for, at most a few runs: as many as
#: fit after one warm-up run, at least one (a 12-layer BERT-base runs for seconds)
TIMING_BUDGET_S = 5.0


#: what the ``timed`` column of ``polyfuse fuse``'s summary means
TIMED = ("timed: the kernel form an InferenceSession runs (its measured choice when cached, "
         f"else its usual one), unfused+fused runs after a warm-up, at most about "
         f"{TIMING_BUDGET_S:g} s each")


def time_session_form(c: Compilation, repeat: int = 5) -> Timing:
    """Kernel time of the unfused and the fused model in the form an
    :class:`~polyfuse.apps.session.InferenceSession` runs (:func:`session_form`), not the
    plan's form ``c`` was compiled in (reused when they are the same), on the device a session
    runs it on (:func:`session_device` when none is named); each program timed for at most
    ``repeat`` runs within :data:`TIMING_BUDGET_S`."""
    from polyfuse.apps.onnx_run import compile_onnx, form_target
    from polyfuse.apps.session import session_device, session_form
    from polyfuse.runtime import time_program
    from polyfuse.runtime.budget import check_run_budget
    from polyfuse.runtime.device import device_spec

    assert c.source is not None
    device, params = c.options.device, c.options.params
    on = ""
    chosen = session_device(c.source, params) if device is None else None
    if chosen is not None:  # where a session given no device would run it
        device = device_spec(chosen[0])
        on = f" on {chosen[0].name.strip()}, as a session given no device"
    form, why = session_form(c.source, params, device, c.options.tune)
    c.say(Stage.TIME, f"timing unfused and fused in the {form} form{on} ({why}; at most "
                      f"{repeat} runs or about {TIMING_BUDGET_S:g} s each)")
    target = form_target(c.source, params, device, form)
    # the same kernels where only the device's name differs (PoCL's basic and pthread)
    if dataclasses.replace(target, name=c.target.name) != c.target:
        c = compile_onnx(c.source, params, device, c.options.tune, form=form)
    assert c.program is not None and c.fused is not None
    check_run_budget(c.program, c.params, runs=2, what="timing")
    unfused = time_program(c.program, repeat=repeat, device=device, budget_s=TIMING_BUDGET_S)
    fused = time_program(c.fused.program, repeat=repeat, device=device,
                         budget_s=TIMING_BUDGET_S)
    return Timing(unfused.kernel_time * 1e3, fused.kernel_time * 1e3, form=form,
                  runs=(len(unfused.kernel_samples), len(fused.kernel_samples)))


def _fuse_uncached(path: str, out_dir: Path, stem: str, stage: _Stages, *, verify: bool,
                   tune: bool, timing: bool, params: Optional[dict[str, int]], weigh: bool,
                   repeat: int, device: Optional[str]) -> ModelSummary:
    """The model through the ONNX passes (loaded once, coarsened once with ``tune``), its
    outputs written before it is timed; each pass's events start its stage timer."""
    from polyfuse.apps.onnx_run import ONNX_PASSES
    from polyfuse.passes.compilation import Event, Options
    from polyfuse.passes.pipeline import compile_program, target_of

    current: list[Any] = [None]

    def on_event(event: Event) -> None:
        name = STAGE_OF[event.stage]
        if current[0] is not None:
            current[0].__exit__(None, None, None)
        current[0] = stage(name)
        current[0].__enter__()

    # timed apart from the passes: in the form a session runs, not the plan's
    options = Options(params=dict(params or {}), tune=tune, coarsen=tune, verify=verify,
                      timing=False, repeat=repeat, device=device, out=str(out_dir), weigh=weigh)
    try:
        c = compile_program(Compilation(target=target_of(device), options=options, source=path,
                                        progress=on_event), ONNX_PASSES)
        if timing:
            c = c.replace(timing=time_session_form(c, repeat))
    finally:
        if current[0] is not None:
            current[0].__exit__(None, None, None)
    assert c.model is not None and c.plan is not None and c.fused is not None
    v = c.verified
    return ModelSummary(model=stem, nodes=c.model.op_count,
                        launches_before=_count(c.plan.launches_before),
                        launches_after=_count(c.fused.launches_after),
                        max_abs_err=None if v is None else float(v["max_abs_err"]),
                        verified=None if v is None else bool(v["ok"]),
                        unfused_ms=None if c.timing is None else c.timing.unfused_ms,
                        fused_ms=None if c.timing is None else c.timing.fused_ms,
                        timed=None if c.timing is None else
                        f"{c.timing.form}, {c.timing.runs[0]}+{c.timing.runs[1]} runs",
                        stages=stage.times)


def _count(value: Any) -> Union[int, str]:
    """A launch count as the summary keeps it: an int, else the exact str (it crosses
    processes and Dask as plain data)."""
    return value if isinstance(value, int) else str(value)


def _fuse_model_job(args: tuple) -> dict:
    path, out_root, kwargs = args
    return asdict(fuse_model(path, out_root, **kwargs))


class _LineProgress:
    """The progress bar's stand-in when stderr is no terminal (a log, CI, a pipe): one line per
    stage instead of ``\\r`` redraws, which pile up there as one unreadable line."""

    def __init__(self, total: int, quiet: bool):
        self.total, self.quiet, self.done, self.last = total, quiet, 0, ""

    def __enter__(self) -> _LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set_postfix_str(self, text: str) -> None:
        if not self.quiet and text != self.last:
            print(f"polyfuse: [{self.done}/{self.total}] {text}", file=sys.stderr, flush=True)
        self.last = text

    def update(self, n: int = 1) -> None:
        self.done += n


def _bar(total: int, quiet: bool) -> Any:
    """A tqdm bar on a terminal, else a line per stage (:class:`_LineProgress`)."""
    if not sys.stderr.isatty():
        return _LineProgress(total, quiet)
    from tqdm import tqdm

    return tqdm(total=total, unit="model", file=sys.stderr, disable=quiet, dynamic_ncols=True,
                desc="polyfuse")


def _fuse_model_budgeted(path: str, out_root: str, timeout: Optional[float],
                         stage_timeout: Optional[float], kwargs: dict) -> ModelSummary:
    """:func:`fuse_model` in a worker process stopped when it overruns its time budget."""
    from polyfuse.core.watchdog import call_with_budget

    stem = Path(path).name.removesuffix(".onnx")
    try:
        return call_with_budget(fuse_model, (path, out_root), kwargs, timeout=timeout,
                                stage_timeout=stage_timeout)
    except PolyfuseError as err:
        return ModelSummary(model=stem, error=str(err))


def fuse_models(paths: Sequence[str], out_root: str, *, jobs: int = 1,
                scheduler: Optional[str] = None, quiet: bool = False,
                timeout: Optional[float] = None, stage_timeout: Optional[float] = None,
                isolate: bool = False, **kwargs: Any) -> list[ModelSummary]:
    """Fuse every model (here, in ``jobs`` processes, or on a Dask ``scheduler``); summaries in
    the order of ``paths``.

    With ``timeout`` (seconds per model) or ``stage_timeout`` (seconds per stage) every model
    runs in its own worker process, killed when it overruns; its row names the stage.
    ``isolate`` runs every model in its own worker even without a budget, so a native crash
    (isl, the OpenCL driver) fails that model's row instead of the whole batch.
    """
    n = len(paths)
    with _bar(n, quiet) as bar:
        if scheduler:
            if timeout is not None or stage_timeout is not None:
                raise PolyfuseError("--timeout/--stage-timeout are not supported with a Dask "
                                    "scheduler (use the scheduler's own limits)")
            return _on_dask(paths, out_root, scheduler, jobs, bar, **kwargs)
        if timeout is not None or stage_timeout is not None or isolate:
            from concurrent.futures import ThreadPoolExecutor

            budgeted: list[Optional[ModelSummary]] = [None] * n
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                futures = {pool.submit(_fuse_model_budgeted, paths[k], out_root, timeout,
                                       stage_timeout, kwargs): k for k in range(n)}
                for fut in as_completed(futures):
                    k = futures[fut]
                    budgeted[k] = fut.result()
                    bar.set_postfix_str(f"{budgeted[k].model}: done")
                    bar.update(1)
            return [s for s in budgeted if s is not None]
        if jobs <= 1 or n <= 1:
            out = []
            for p in paths:
                stem = Path(p).name.removesuffix(".onnx")
                out.append(fuse_model(p, out_root, progress=lambda s, stem=stem:
                                      bar.set_postfix_str(f"{stem}: {s}"), **kwargs))
                bar.update(1)
            return out
        results: dict[int, ModelSummary] = {}
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = {pool.submit(_fuse_model_job, (p, out_root, kwargs)): k
                       for k, p in enumerate(paths)}
            for fut in as_completed(futures):
                k = futures[fut]
                results[k] = ModelSummary(**fut.result())
                bar.set_postfix_str(f"{results[k].model}: done")
                bar.update(1)
        return [results[k] for k in range(n)]


def _on_dask(paths: Sequence[str], out_root: str, scheduler: str, jobs: int, bar: Any,
             **kwargs: Any) -> list[ModelSummary]:
    """One Dask task per model on ``scheduler`` (``local``: a LocalCluster of ``jobs`` workers)."""
    try:
        from dask.distributed import Client, LocalCluster
        from dask.distributed import as_completed as dask_completed
    except ImportError as err:
        raise PolyfuseError("--scheduler/--dask need dask.distributed "
                            "(pip install 'dask[distributed]')") from err
    cluster = None
    try:
        if scheduler == "local":
            cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1,
                                   processes=True, dashboard_address=None)
            client = Client(cluster)
        else:
            client = Client(scheduler, timeout="30s")
    except OSError as err:
        raise PolyfuseError(f"cannot reach the Dask scheduler {scheduler}: {err}") from err
    try:
        out_root = str(Path(out_root).resolve())
        futures = [client.submit(_fuse_model_job, (str(Path(p).resolve()), out_root, kwargs),
                                 key=f"polyfuse-{k}-{Path(p).name}", pure=False)
                   for k, p in enumerate(paths)]
        index = {f.key: k for k, f in enumerate(futures)}
        results: dict[int, ModelSummary] = {}
        for fut in dask_completed(futures):
            k = index[fut.key]
            try:
                results[k] = ModelSummary(**fut.result())
            except Exception as err:  # the worker died or the task could not run
                stem = Path(paths[k]).name.removesuffix(".onnx")
                results[k] = ModelSummary(model=stem, error=f"Dask task failed: "
                                                            f"{type(err).__name__}: {err}")
            bar.set_postfix_str(f"{results[k].model}: done")
            bar.update(1)
        return [results[k] for k in range(len(paths))]
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
