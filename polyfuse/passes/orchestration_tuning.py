"""Autotuning of orchestration variants (docs/fusion.md: orchestration is chosen by measurement).

:func:`autotune` plans a program once per orchestration variant, generates each distinct plan,
**verifies** it against the unfused program (a variant that computes something else is reported
and never chosen: a fast wrong answer is not an answer), times the survivors with
:func:`~polyfuse.runtime.execute.time_program` on one context and queue (so every variant meets
the same device state and compiler cache), and returns the fastest as a :class:`TuneResult`.

Results are cached as JSON per device (:func:`~polyfuse.runtime.device.device_key`) and program
(:func:`program_hash`: kernel sources, host-op structure, parameter values) under ``cache_dir``
(default ``$POLYFUSE_CACHE`` or ``~/.cache/polyfuse/tune``).  A cache hit skips all timing; the
chosen variant is still re-planned, regenerated and verified, because the cache stores a
decision, not code — and if the planner now produces a different plan for that variant, or the
regenerated code fails verification, the entry is stale and the program is tuned again.

Progress messages go to the ``progress`` callback (e.g. :func:`stderr_progress`), never stdout,
so ``--json`` output of callers stays clean.

>>> import polyfuse
>>> from polyfuse.passes.orchestration_tuning import autotune, stderr_progress
>>> p = polyfuse.load_opencl("examples/qkv/kernels.cl",
...                           host="examples/qkv/host.c")     # doctest: +SKIP
>>> res = autotune(p, progress=stderr_progress)               # doctest: +SKIP
>>> res.variant, res.speedup, print(res.table_text())          # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pyopencl as cl
import sympy

from polyfuse.codegen import FusedProgram
from polyfuse.core.program import PolyfuseError, Program, Target
from polyfuse.fusion.plan import FusionPlan
from polyfuse.passes import compilation as passes
from polyfuse.passes.compilation import Compilation, Options, run_passes
from polyfuse.runtime.device import DeviceSpec, device_key, device_target, get_context
from polyfuse.runtime.execute import (
    ProgramTiming,
    precheck_programs,
    program_source,
    time_program,
)
from polyfuse.runtime.verify import verify_programs
from polyfuse.uar import UAR, build_uar

#: bump when the cache layout or the meaning of its fields changes (old entries are then misses)
CACHE_FORMAT = 1

Progress = Callable[[str], None]


def stderr_progress(message: str) -> None:
    """A ``progress`` callback that writes one line to stderr (stdout stays machine-readable)."""
    print(f"[autotune] {message}", file=sys.stderr, flush=True)


def default_cache_dir() -> Path:
    """``$POLYFUSE_CACHE/tune`` when set, else ``~/.cache/polyfuse/tune``.

    The variable names the polyfuse cache root (other caches may share it), hence the ``tune``
    sub-directory in both cases.
    """
    root = os.environ.get("POLYFUSE_CACHE")
    if root:
        return Path(root).expanduser() / "tune"
    return Path("~/.cache/polyfuse/tune").expanduser()


# ----------------------------------------------------------------------------------------------
# Records
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VariantResult:
    """One row of the tuning table.

    Times are medians in seconds (``None`` when the variant was not timed: it failed, or the
    row is a duplicate whose numbers are copied from ``duplicate_of``).  ``error`` says why a
    variant was discarded (planning, code generation or verification failure).
    """

    variant: str
    launches: Optional[int] = None
    kernel_time: Optional[float] = None
    wall_time: Optional[float] = None
    verified: bool = False
    error: Optional[str] = None
    #: the earlier variant whose plan is identical (this one was not generated or timed again)
    duplicate_of: Optional[str] = None
    #: max absolute / relative error of verification against the unfused program
    max_abs_err: Optional[float] = None
    max_rel_err: Optional[float] = None

    @property
    def ok(self) -> bool:
        """A candidate for choice: verified, no error."""
        return self.verified and self.error is None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> VariantResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(frozen=True)
class TuneResult:
    """What :func:`autotune` chose, and the measurements behind the choice."""

    #: the chosen variant (an orchestration name passed to ``plan_fusion``)
    variant: str
    plan: FusionPlan
    fused: FusedProgram
    #: every requested variant, in request order (duplicates and failures included)
    table: tuple[VariantResult, ...]
    #: the unfused program's timing (variant ``"unfused"``, verified by definition)
    unfused: VariantResult
    #: True when the choice came from the cache (no timing was done)
    cached: bool
    device: str
    program_hash: str
    cache_path: Optional[Path] = None
    #: which median decided: ``"kernel"`` (profiling events) or ``"wall"``
    metric: str = "kernel"

    @property
    def chosen(self) -> VariantResult:
        """The table row of the chosen variant."""
        return next(r for r in self.table if r.variant == self.variant)

    @property
    def speedup(self) -> Optional[float]:
        """Unfused / chosen median time for ``metric`` (None when either is unknown or zero)."""
        key = "kernel_time" if self.metric == "kernel" else "wall_time"
        before, after = getattr(self.unfused, key), getattr(self.chosen, key)
        if not before or not after:
            return None
        return float(before) / float(after)

    def table_text(self) -> str:
        """The table as aligned plain text (times in microseconds)."""
        head = f"{'variant':<12} {'launches':>8} {'kernel us':>10} {'wall us':>10} verified  error"
        lines = [head]
        for r in (self.unfused, *self.table):
            mark = "*" if r.variant == self.variant else " "
            note = r.error or (f"same plan as {r.duplicate_of}" if r.duplicate_of else "")
            lines.append(f"{mark}{r.variant:<11} {_fmt(r.launches, 'd'):>8} "
                         f"{_fmt_us(r.kernel_time):>10} {_fmt_us(r.wall_time):>10} "
                         f"{'yes' if r.verified else 'no':<9} {note}")
        return "\n".join(lines)


class TuneError(PolyfuseError):
    """No variant survived planning, generation and verification; ``table`` says why."""

    def __init__(self, message: str, table: Sequence[VariantResult]):
        super().__init__(message)
        self.table = tuple(table)


def _fmt(v: Optional[int], spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _fmt_us(v: Optional[float]) -> str:
    return "-" if v is None else f"{v * 1e6:.1f}"


# ----------------------------------------------------------------------------------------------
# Program and plan identity
# ----------------------------------------------------------------------------------------------


def _canon(obj: Any) -> Any:
    """A JSON-able, deterministic image of a program record (source locations left out, so a
    program moved to another directory keeps its hash)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"@": type(obj).__name__,
                **{f.name: _canon(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                   if f.name not in ("loc", "ast")}}
    if isinstance(obj, Mapping):
        return {str(k): _canon(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canon(v) for v in obj]
    if isinstance(obj, (frozenset, set)):
        return sorted(str(v) for v in obj)
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, sympy.Basic):
        return sympy.srepr(obj)
    return str(obj)


def program_hash(program: Program, params: Optional[Mapping[str, int]] = None) -> str:
    """SHA-256 (hex, 20 chars) of what determines a tuning: the OpenCL source that runs, the
    host operations (launch geometry, argument bindings, copies, loops), buffers and the values
    of the parameters.  The program's name and file paths are not part of it."""
    try:
        source = program_source(program)
    except PolyfuseError:
        source = "\n".join(k.source for _, k in sorted(program.kernels.items()))
    ident = {
        "source": source,
        "ops": _canon(program.ops),
        "buffers": _canon(program.buffers),
        "params": list(program.params),
        "context": program.context,
        "values": {k: int(v) for k, v in sorted((params or {}).items())},
    }
    text = json.dumps(ident, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def plan_signature(plan: FusionPlan) -> str:
    """Identity of a plan as far as code generation is concerned: groups, members, their
    orchestration, re-indexing maps, barriers and steps.  Two variants with equal signatures
    generate the same code, so only the first is generated and timed."""
    groups = [
        (g.members, g.orchestration, g.step, g.global_size, g.local_size,
         tuple((f.launch, f.kernel, f.reindex_text, f.barrier_before) for f in g.fragments))
        for g in plan.groups
    ]
    return hashlib.sha256(repr(_canon(groups)).encode()).hexdigest()[:20]


# ----------------------------------------------------------------------------------------------
# Cache
# ----------------------------------------------------------------------------------------------


def _cache_file(cache_dir: Path, dev: str, phash: str) -> Path:
    return cache_dir / dev / f"{phash}.json"


def _entry_key(variants: Sequence[str], metric: str) -> str:
    return f"{','.join(variants)}|{metric}"


def load_cache_entry(path: Path, key: str) -> Optional[dict[str, Any]]:
    """The cached entry for ``key``, or None (missing, unreadable or of another format: a
    cache must never turn into an error)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        return None
    entry = data.get("entries", {}).get(key)
    return entry if isinstance(entry, dict) else None


def store_cache_entry(path: Path, key: str, entry: dict[str, Any]) -> None:
    """Write atomically (temp file + rename) so concurrent tuners never read half a file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
                raise ValueError
        except (OSError, ValueError):
            data = {"format": CACHE_FORMAT, "entries": {}}
        data.setdefault("entries", {})[key] = entry
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as err:  # a read-only cache is not worth failing a tuning for
        print(f"polyfuse: warning: cannot write tuning cache {path}: {err}", file=sys.stderr)


# ----------------------------------------------------------------------------------------------
# Tuning
# ----------------------------------------------------------------------------------------------


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def _label(program: Program) -> str:
    """A readable name for messages: a host program is named after its directory."""
    if program.name in ("host", "program") and program.files:
        return Path(program.files[-1]).resolve().parent.name or program.name
    return program.name


def _timing_row(variant: str, t: ProgramTiming, **extra: Any) -> VariantResult:
    return VariantResult(variant=variant, launches=t.launches, kernel_time=t.kernel_time,
                         wall_time=t.wall_time, **extra)


def _prune_by_model(built: dict[str, FusedProgram], rows: dict[str, VariantResult],
                    params: Mapping[str, int], dev: cl.Device, factor: float, say: Progress,
                    name: str) -> None:
    """Drop (from ``built``) variants the performance model predicts to be far slower."""
    from polyfuse.perf.model import Calibration, rank_variants

    names = list(built)
    try:
        calibration = Calibration.for_device(dev, quick=True)
        ranked = dict(rank_variants([built[v].program for v in names], calibration,
                                    params=params))
    except Exception as err:  # no model: time everything
        say(f"{name}: performance model unavailable ({_short(err)}); timing every variant")
        return
    finite = [t for t in ranked.values() if math.isfinite(t)]
    if not finite:
        return
    best = min(finite)
    for i, variant in enumerate(names):
        predicted = ranked[i]
        if math.isfinite(predicted) and predicted > factor * best:
            rows[variant] = dataclasses.replace(
                rows[variant], error=f"pruned: model predicts {predicted / best:.1f}x the best")
            del built[variant]
            say(f"{name}: {variant}: pruned by the performance model "
                f"({predicted / best:.1f}x the best prediction)")


def autotune(
    program: Program,
    *,
    params: Optional[Mapping[str, int]] = None,
    variants: Sequence[str] = ("vertical", "horizontal"),
    repeat: int = 5,
    device: DeviceSpec = None,
    cache_dir: Optional[os.PathLike[str] | str] = None,
    progress: Optional[Progress] = None,
    metric: str = "kernel",
    use_cache: bool = True,
    ctx: Optional[cl.Context] = None,
    queue: Optional[cl.CommandQueue] = None,
    prune_factor: Optional[float] = 3.0,
    uar: Optional[UAR] = None,
    target: Optional[Target] = None,
) -> TuneResult:
    """Choose the fastest verified orchestration variant of ``program`` (module docstring).

    ``variants`` are ``orchestration`` values of :func:`polyfuse.fusion.plan_fusion`;
    ``metric`` picks the median that decides (``"kernel"``: profiling-event kernel time, the
    device's own measure; ``"wall"``: host wall time of a whole execution, which also counts
    launch overhead); ``use_cache=False`` neither reads nor writes the cache; ``ctx``/``queue``
    reuse an existing profiling queue (else one is opened on ``device``).  With
    ``prune_factor``, verified variants that the calibrated performance model
    (:mod:`polyfuse.perf.model`) predicts to be more than that many times slower than the best
    prediction are not timed; the factor is wide because the model is coarse on CPUs (see
    ``analysis/model_accuracy.py``), and a model that cannot predict prunes nothing.  ``uar`` is
    the program's UAR when the caller has built it already, ``target`` the limits planning
    reads (default: the queue's device's).  Raises :class:`TuneError` when no variant
    verifies.
    """
    if not variants:
        raise ValueError("autotune needs at least one variant")
    if metric not in ("kernel", "wall"):
        raise ValueError(f"metric must be 'kernel' or 'wall', not {metric!r}")
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    variants = tuple(dict.fromkeys(variants))  # a variant named twice is tuned once
    if queue is not None:
        ctx = queue.context
    elif ctx is None:
        ctx, queue = get_context(device)
    if queue is None:
        queue = cl.CommandQueue(ctx, ctx.devices[0],
                                properties=cl.command_queue_properties.PROFILING_ENABLE)
    tuner = _Tuner(program, dict(params or {}), ctx, queue, progress or (lambda _msg: None), uar,
                   target)
    cdir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    cpath = _cache_file(cdir, tuner.dkey, tuner.phash)
    ekey = _entry_key(variants, metric)

    entry = load_cache_entry(cpath, ekey) if use_cache else None
    if entry is not None:
        hit = tuner.from_cache(entry, cpath, metric)
        if hit is not None:
            return hit

    rows, built, signatures = tuner.verified_variants(variants)
    if prune_factor is not None and len(built) > 1:
        _prune_by_model(built, rows, tuner.params, tuner.dev, prune_factor, tuner.say,
                        tuner.name)
    unfused = tuner.time(built, rows, repeat)
    best, table = tuner.choose(built, rows, variants, metric, unfused)
    if use_cache:
        store_cache_entry(cpath, ekey, {
            "variant": best.variant,
            "plan_signature": signatures[best.variant],
            "table": [r.to_dict() for r in table],
            "unfused": unfused.to_dict(),
            "program": program.name,
            "params": tuner.params,
            "repeat": repeat,
            "device": tuner.dkey,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        })
    fused = built[best.variant]
    return TuneResult(best.variant, fused.plan, fused, table, unfused, False, tuner.dkey,
                      tuner.phash, cpath if use_cache else None, metric)


class _Tuner:
    """One program on one queue: plans, builds, verifies and times its variants."""

    def __init__(self, program: Program, params: dict[str, int], ctx: cl.Context,
                 queue: cl.CommandQueue, say: Progress, uar: Optional[UAR],
                 target: Optional[Target]):
        self.program, self.params, self.ctx, self.queue, self.say = (program, params, ctx,
                                                                     queue, say)
        self.dev = ctx.devices[0]
        self.dkey = device_key(self.dev)
        self.phash = program_hash(program, params)
        self.name = _label(program)
        if uar is None:
            t0 = time.perf_counter()
            uar = build_uar(program)
            say(f"{self.name}: UAR built ({len(program.launches)} launches, "
                f"{time.perf_counter() - t0:.2f}s)")
        self.uar = uar
        self.target = target or device_target(self.dev)
        #: the compilation every variant starts from (the passes fill in the rest)
        self.base = Compilation(target=self.target, program=program, uar=uar,
                                options=Options(params=params, device=self.dev))

    def plan(self, variant: str) -> FusionPlan:
        """The certified plan of ``variant`` (the plan and certify passes)."""
        base = self.base.replace(options=dataclasses.replace(self.base.options,
                                                             orchestration=variant))
        c = run_passes(base, (passes.plan, passes.certify))
        assert c.plan is not None
        return c.plan

    def unbuilt(self, plan: FusionPlan) -> FusedProgram:
        """Fused code for ``plan`` (the generate pass)."""
        fused = passes.generate(self.base.replace(plan=plan, certified=True)).fused
        assert fused is not None
        return fused

    def build(self, fused: FusedProgram) -> None:
        """``fused`` built on the device (the build pass: a kernel that does not build fails)."""
        passes.build(self.base.replace(fused=fused))

    def built(self, plan: FusionPlan) -> FusedProgram:
        """Fused code for ``plan``, built on the device."""
        fused = self.unbuilt(plan)
        self.build(fused)
        return fused

    def verify(self, fused: FusedProgram) -> tuple[bool, Optional[str], Optional[float],
                                                   Optional[float]]:
        """(ok, why not, max abs error, max rel error) of the fused against the unfused run."""
        v = verify_programs(self.program, fused.program, params=self.params,
                            buffers=fused.compared_buffers, ctx=self.ctx, queue=self.queue)
        return v.ok, (None if v.ok else f"verification failed: {v.summary()}"[:300]), \
            v.max_abs_err, v.max_rel_err

    def from_cache(self, entry: dict[str, Any], cpath: Path, metric: str
                   ) -> Optional[TuneResult]:
        """The cached choice, re-planned, regenerated and re-verified (nothing is timed); None
        when the entry is stale."""
        try:
            chosen = str(entry["variant"])
            plan = self.plan(chosen)
            if plan_signature(plan) != entry.get("plan_signature"):
                raise LookupError("the planner now gives a different plan")
            fused = self.built(plan)
            ok, err, _a, _r = self.verify(fused)
            if not ok:
                raise LookupError(err)
            table = tuple(VariantResult.from_dict(r) for r in entry["table"])
            unfused = VariantResult.from_dict(entry["unfused"])
            self.say(f"{self.name}: cache hit, {chosen} ({cpath})")
            return TuneResult(chosen, fused.plan, fused, table, unfused, True, self.dkey,
                              self.phash, cpath, metric)
        except (LookupError, KeyError, TypeError, ValueError, PolyfuseError) as why:
            self.say(f"{self.name}: stale cache entry ignored ({_short(why)})")
            return None

    def verified_variants(self, variants: Sequence[str]
                          ) -> tuple[dict[str, VariantResult], dict[str, FusedProgram],
                                     dict[str, str]]:
        """Plan every variant (a plan equal to an earlier one's is not generated again),
        generate and verify it: the table rows, the verified fused programs and each variant's
        plan signature.  Raises :class:`TuneError` when none verifies."""
        rows: dict[str, VariantResult] = {}
        built: dict[str, FusedProgram] = {}
        first_with: dict[str, str] = {}  # plan signature -> first variant with it
        generated: dict[str, FusedProgram] = {}
        signatures: dict[str, str] = {}
        for variant in variants:
            try:
                plan = self.plan(variant)
            except Exception as err:  # any planner failure discards the variant
                rows[variant] = VariantResult(variant, error=f"planning failed: {_short(err)}")
                self.say(f"{self.name}: {variant}: planning failed: {_short(err)}")
                continue
            sig = plan_signature(plan)
            signatures[variant] = sig
            if sig in first_with:
                rows[variant] = VariantResult(variant, duplicate_of=first_with[sig])
                self.say(f"{self.name}: {variant}: same plan as {first_with[sig]}, skipped")
                continue
            first_with[sig] = variant
            try:
                generated[variant] = self.unbuilt(plan)
            except Exception as err:  # a generation failure discards the variant
                self.say(f"{self.name}: {variant}: code generation failed: {_short(err)}")
                rows[variant] = VariantResult(variant, error=f"codegen failed: {_short(err)}")
        # each variant (and the unfused program) runs once in a worker first: one the device
        # compiler rejects or aborts on is skipped with why, the others are tuned
        original, *why = precheck_programs(
            [self.program, *(f.program for f in generated.values())], self.params, self.dev)
        if original is not None:
            raise PolyfuseError(f"{self.name}: the unfused program cannot run: {original}")
        for (variant, fused), rejected in zip(generated.items(), why):
            if rejected is not None:
                self.say(f"{self.name}: {variant}: skipped ({rejected})")
                rows[variant] = VariantResult(variant, error=f"skipped: {rejected}")
                continue
            rows[variant], checked = self._checked(variant, fused)
            if checked is not None:
                built[variant] = checked
        if not built:
            table = tuple(rows[v] for v in variants)
            raise TuneError(f"{self.name}: no orchestration variant verified: "
                            + "; ".join(f"{r.variant}: {r.error}" for r in table if r.error),
                            table)
        return rows, built, signatures

    def _checked(self, variant: str, fused: FusedProgram
                 ) -> tuple[VariantResult, Optional[FusedProgram]]:
        try:
            self.build(fused)
        except Exception as err:  # a generation failure discards the variant
            self.say(f"{self.name}: {variant}: code generation failed: {_short(err)}")
            return VariantResult(variant, error=f"codegen failed: {_short(err)}"), None
        try:
            ok, err_text, abs_err, rel_err = self.verify(fused)
        except Exception as err:  # a crash in the fused code is a failure too
            ok, err_text, abs_err, rel_err = False, f"run failed: {_short(err)}", None, None
        if not ok:
            self.say(f"{self.name}: {variant}: DISCARDED ({err_text})")
            return VariantResult(variant, error=err_text, max_abs_err=abs_err,
                                 max_rel_err=rel_err), None
        self.say(f"{self.name}: {variant}: verified")
        return VariantResult(variant, verified=True, max_abs_err=abs_err,
                             max_rel_err=rel_err), fused

    def time(self, built: dict[str, FusedProgram], rows: dict[str, VariantResult],
             repeat: int) -> VariantResult:
        """Time the unfused program and every verified variant on one queue (into ``rows``;
        duplicates report their original's numbers); the unfused program's row."""
        self.say(f"{self.name}: timing unfused ({repeat} repeats)")
        t_unfused = time_program(self.program, params=self.params, repeat=repeat, ctx=self.ctx,
                                 queue=self.queue)
        for variant, fused in built.items():
            self.say(f"{self.name}: timing {variant} ({repeat} repeats)")
            try:
                t = time_program(fused.program, params=self.params, repeat=repeat,
                                 ctx=self.ctx, queue=self.queue)
            except Exception as err:  # verified once but cannot be timed: discard
                rows[variant] = dataclasses.replace(rows[variant],
                                                    error=f"timing failed: {_short(err)}")
                continue
            rows[variant] = dataclasses.replace(
                rows[variant], launches=t.launches, kernel_time=t.kernel_time,
                wall_time=t.wall_time)
        for variant, row in list(rows.items()):
            if row.duplicate_of is not None:
                src = rows[row.duplicate_of]
                rows[variant] = dataclasses.replace(
                    src, variant=variant, duplicate_of=row.duplicate_of)
        return _timing_row("unfused", t_unfused, verified=True)

    def choose(self, built: dict[str, FusedProgram], rows: dict[str, VariantResult],
               variants: Sequence[str], metric: str, unfused: VariantResult
               ) -> tuple[VariantResult, tuple[VariantResult, ...]]:
        """The fastest verified, timed variant by ``metric`` and the table of all."""
        key = "kernel_time" if metric == "kernel" else "wall_time"
        candidates = [rows[v] for v in built if rows[v].ok and getattr(rows[v], key) is not None]
        table = tuple(rows[v] for v in variants)
        if not candidates:
            raise TuneError(f"{self.name}: no verified variant could be timed", table)
        best = min(candidates, key=lambda r: getattr(r, key))
        self.say(f"{self.name}: chose {best.variant} ({_fmt_us(getattr(best, key))} us "
                 f"{metric}, unfused {_fmt_us(getattr(unfused, key))} us)")
        return best, table


__all__ = [
    "CACHE_FORMAT",
    "TuneError",
    "TuneResult",
    "VariantResult",
    "autotune",
    "default_cache_dir",
    "plan_signature",
    "program_hash",
    "stderr_progress",
]
