"""Batch fusion of ONNX models (``polyfuse fuse MODEL.onnx... --out DIR --jobs N``).

Each model is handled on its own (in a worker process when ``jobs > 1``): load, plan, generate,
optionally verify (onnxruntime and the unfused program) and time, then write
``DIR/<stem>/{plan.json, fused.cl, report.md}``.  A model that fails does not stop the others;
its summary row carries the one-line reason.  Worker processes are *spawned*, not forked, so no
OpenCL context is ever shared across a fork.
"""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from polyfuse.program import PolyfuseError

SUMMARY_HEADERS = ["model", "nodes", "launches before", "launches after", "max abs err",
                   "verified", "unfused ms", "fused ms", "status"]


@dataclass(frozen=True)
class ModelSummary:
    """One row of the batch summary."""

    model: str
    nodes: Optional[int] = None
    launches_before: Optional[int] = None
    launches_after: Optional[int] = None
    max_abs_err: Optional[float] = None
    verified: Optional[bool] = None
    unfused_ms: Optional[float] = None
    fused_ms: Optional[float] = None
    error: Optional[str] = None

    def row(self) -> list[str]:
        def fmt(v: Any, spec: str = "") -> str:
            return "-" if v is None else format(v, spec)

        verified = "-" if self.verified is None else ("ok" if self.verified else "MISMATCH")
        return [self.model, fmt(self.nodes), fmt(self.launches_before),
                fmt(self.launches_after), fmt(self.max_abs_err, ".2e"), verified,
                fmt(self.unfused_ms, ".3f"), fmt(self.fused_ms, ".3f"),
                f"FAILED: {self.error}" if self.error else "ok"]

    @property
    def ok(self) -> bool:
        return self.error is None and self.verified is not False


def fuse_model(path: str, out_root: str, *, verify: bool = False, tune: bool = False,
               timing: bool = True, params: Optional[dict[str, int]] = None,
               repeat: int = 5, index: str = "", progress: Optional[Callable[[str], None]] = None
               ) -> ModelSummary:
    """Fuse one model and write its outputs; errors become the summary's ``error``.

    ``progress`` sees the name of every stage entered (the time budget names it on overrun).
    """
    from polyfuse.frontend.onnx import load_onnx_model
    from polyfuse.onnx_run import fuse_onnx
    from polyfuse.pipeline import write_outputs

    stem = Path(path).name.removesuffix(".onnx")

    def say(stage: str) -> None:
        print(f"polyfuse: {index}{stem}: {stage}", file=sys.stderr, flush=True)
        if progress is not None:
            progress(stage)

    try:
        say("loading")
        model = load_onnx_model(path, params=params)
        result = fuse_onnx(path, verify=verify, params=params, tune=tune, progress=say)
        write_outputs(result, Path(out_root) / stem)
        plan = result.plan
        unfused_ms = fused_ms = None
        if timing:
            from polyfuse.runtime import time_program
            from polyfuse.runtime.budget import check_run_budget

            check_run_budget(model.program, params, runs=2, what="timing")
            say("timing unfused and fused")
            unfused_ms = time_program(model.program, repeat=repeat).kernel_time * 1e3
            fused_ms = time_program(result.fused.program, repeat=repeat).kernel_time * 1e3
        v = plan.verified
        say("done")
        return ModelSummary(model=stem, nodes=model.op_count,
                            launches_before=int(plan.launches_before),
                            launches_after=int(plan.launches_after),
                            max_abs_err=None if v is None else float(v["max_abs_err"]),
                            verified=None if v is None else bool(v["ok"]),
                            unfused_ms=unfused_ms, fused_ms=fused_ms)
    except PolyfuseError as err:
        return ModelSummary(model=stem, error=str(err))
    except Exception as err:  # a bug, not bad input: keep the batch going, say what it was
        return ModelSummary(model=stem, error=f"internal error: {type(err).__name__}: {err}")


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = round(width * done / total) if total else width
    return "[" + "#" * filled + "-" * (width - filled) + f"] {done}/{total} models"


def _fuse_model_job(args: tuple) -> dict:
    path, out_root, kwargs = args
    return asdict(fuse_model(path, out_root, **kwargs))


def _fuse_model_budgeted(path: str, out_root: str, timeout: Optional[float],
                         stage_timeout: Optional[float], kwargs: dict) -> ModelSummary:
    """:func:`fuse_model` in a worker process stopped when it overruns its time budget."""
    from polyfuse.watchdog import call_with_budget

    stem = Path(path).name.removesuffix(".onnx")
    try:
        return call_with_budget(fuse_model, (path, out_root), kwargs, timeout=timeout,
                                stage_timeout=stage_timeout)
    except PolyfuseError as err:
        return ModelSummary(model=stem, error=str(err))


def fuse_models(paths: Sequence[str], out_root: str, *, jobs: int = 1,
                timeout: Optional[float] = None, stage_timeout: Optional[float] = None,
                **kwargs: Any) -> list[ModelSummary]:
    """Fuse every model (in ``jobs`` processes); summaries in the order of ``paths``.

    With ``timeout`` (seconds per model) or ``stage_timeout`` (seconds per stage) every model
    runs in its own worker process, killed when it overruns; its row names the stage.
    """
    n = len(paths)
    if timeout is not None or stage_timeout is not None:
        from concurrent.futures import ThreadPoolExecutor

        def one(k: int) -> ModelSummary:
            return _fuse_model_budgeted(paths[k], out_root, timeout, stage_timeout,
                                        {**kwargs, "index": f"[{k + 1}/{n}] "})

        out: list[Optional[ModelSummary]] = [None] * n
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {pool.submit(one, k): k for k in range(n)}
            for done, fut in enumerate(as_completed(futures), 1):
                out[futures[fut]] = fut.result()
                print(f"polyfuse: {_bar(done, n)}", file=sys.stderr, flush=True)
        return [s for s in out if s is not None]
    if jobs <= 1 or n <= 1:
        out = []
        for k, p in enumerate(paths):
            out.append(fuse_model(p, out_root, index=f"[{k + 1}/{n}] ", **kwargs))
            print(f"polyfuse: {_bar(k + 1, n)}", file=sys.stderr, flush=True)
        return out
    results: dict[int, ModelSummary] = {}
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = {pool.submit(_fuse_model_job,
                               (p, out_root, {**kwargs, "index": f"[{k + 1}/{n}] "})): k
                   for k, p in enumerate(paths)}
        for done, fut in enumerate(as_completed(futures), 1):
            k = futures[fut]
            results[k] = ModelSummary(**fut.result())
            print(f"polyfuse: {_bar(done, n)}", file=sys.stderr, flush=True)
    return [results[k] for k in range(n)]
