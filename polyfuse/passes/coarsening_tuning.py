"""Choose coarsening factors per launch by measurement.

Polygeist-GPU §VI, "alternative code paths".

For every launch: generate variants (thread factors, block factors and their combinations per
dimension), refuse the illegal ones (:mod:`polyfuse.codegen.coarsen` says why), prune before
timing — ``__local`` use above the device's local memory, a work-group the compiled kernel cannot
run (``CL_KERNEL_WORK_GROUP_SIZE``), and on GPUs more private memory than the original
(``CL_KERNEL_PRIVATE_MEM_SIZE``: new spills) — verify every survivor against the original on
random inputs (every buffer), time the survivors interleaved with the original, and confirm the
fastest in a second interleaved run against the original: the original (factor 1) stays unless
the variant is faster there too (by :data:`MARGIN`), so the tuner does not pick something slower
on noise.  The winner is cached
per device and program hash (:func:`polyfuse.passes.orchestration_tuning.program_hash`).

Each launch is tuned on its own: a one-launch program (the launch, with its host loops) from
random inputs, so other launches neither add noise nor cost time.  The chosen factors of all
launches are then applied together and the whole program is verified against the original.

A time budget (``budget_s``) bounds the tuning of a large program: once it is spent, the
variants not yet verified are pruned and the launches not yet tuned keep the original, each
with that reason; what was already measured is kept.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Union

import pyopencl as cl

from polyfuse.codegen.coarsen import (
    CoarsenedProgram,
    CoarsenError,
    Factors,
    LaunchGeometry,
    coarsen,
    launch_geometry,
    spread_factors,
)
from polyfuse.core.program import Launch, PolyfuseError, Program
from polyfuse.passes.orchestration_tuning import (
    default_cache_dir,
    load_cache_entry,
    program_hash,
    store_cache_entry,
)
from polyfuse.runtime.device import DeviceLimits, DeviceSpec, device_key, get_context
from polyfuse.runtime.execute import build, precheck_programs, run_program, time_interleaved
from polyfuse.runtime.verify import Verification, compare_runs, verify_programs

__all__ = ["VariantRow", "LaunchTuning", "CoarsenReport", "candidate_factors", "fused_candidates",
           "tune_coarsening"]

#: a variant replaces the original only when it is this much faster in the confirmation run
MARGIN = 0.02
#: most copies one coarsened work-item runs (code size grows with it)
MAX_COPIES = 32
#: the reason of what a spent time budget left out
BUDGET_SPENT = "time budget spent before it was reached"


@dataclass(frozen=True)
class VariantRow:
    """One variant of one launch: what happened to it and why."""

    factors: Factors
    status: str  # "timed" | "pruned" | "illegal" | "failed"
    reason: str = ""
    time_s: Optional[float] = None
    verified: Optional[bool] = None
    local_mem_bytes: Optional[int] = None
    private_mem_bytes: Optional[int] = None
    geometry: tuple[dict[str, Any], ...] = ()

    def to_dict(self, work_dim: int) -> dict[str, Any]:
        return {"thread_factors": list(self.factors.thread[:work_dim]),
                "block_factors": list(self.factors.block[:work_dim]),
                "status": self.status, "reason": self.reason, "time_s": self.time_s,
                "verified": self.verified, "local_mem_bytes": self.local_mem_bytes,
                "private_mem_bytes": self.private_mem_bytes, "launches": list(self.geometry)}


@dataclass(frozen=True)
class LaunchTuning:
    """The variants of one launch and the choice."""

    launch: int
    kernel: str
    work_dim: int
    variants: tuple[VariantRow, ...]
    chosen: Factors
    original_time_s: Optional[float] = None
    chosen_time_s: Optional[float] = None
    reason: str = ""
    cached: bool = False
    geometry: Optional[LaunchGeometry] = None

    @property
    def speedup(self) -> Optional[float]:
        if self.original_time_s and self.chosen_time_s:
            return self.original_time_s / self.chosen_time_s
        return None

    @property
    def pruned(self) -> int:
        return sum(1 for v in self.variants if v.status == "pruned")

    def to_dict(self) -> dict[str, Any]:
        wd = self.work_dim
        chosen_row = next((v for v in self.variants if v.factors == self.chosen), None)
        return {
            "launch": self.launch, "kernel": self.kernel, "work_dim": wd,
            "original": None if self.geometry is None else {
                "global_size": list(self.geometry.global_size[:wd]),
                "local_size": list(self.geometry.local_size[:wd])},
            "variants": [v.to_dict(wd) for v in self.variants],
            "chosen": {"thread_factors": list(self.chosen.thread[:wd]),
                       "block_factors": list(self.chosen.block[:wd]),
                       "launches": list(chosen_row.geometry) if chosen_row else []},
            "original_time_s": self.original_time_s, "chosen_time_s": self.chosen_time_s,
            "speedup": self.speedup, "reason": self.reason, "cached": self.cached,
            "pruned": self.pruned,
        }


@dataclass(frozen=True)
class CoarsenReport:
    """The result of :func:`tune_coarsening`: per-launch tunings and the coarsened program."""

    program: str
    device: str
    launches: tuple[LaunchTuning, ...]
    result: CoarsenedProgram
    verification: Optional[Verification] = None
    original_time_s: Optional[float] = None
    coarsened_time_s: Optional[float] = None
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def speedup(self) -> Optional[float]:
        if self.original_time_s and self.coarsened_time_s:
            return self.original_time_s / self.coarsened_time_s
        return None

    def to_dict(self) -> dict[str, Any]:
        v = self.verification
        return {
            "program": self.program, "device": self.device,
            "params": {k: (int(x) if isinstance(x, int) else x) for k, x in self.params.items()},
            "launches": [lt.to_dict() for lt in self.launches],
            "original_time_s": self.original_time_s, "coarsened_time_s": self.coarsened_time_s,
            "speedup": self.speedup,
            "verified": None if v is None else {
                "ok": v.ok, "reference": "original", "max_abs_err": v.max_abs_err,
                "max_rel_err": v.max_rel_err},
            "host_code": "not generated (host-code generation does not exist yet); the new "
                         "launch geometry of every launch is under launches[].chosen.launches",
        }

    def markdown(self) -> str:
        lines = [f"# Coarsening of {self.program}", "", f"Device: {self.device}", ""]
        if self.speedup is not None:
            lines += [f"Whole program: original {self.original_time_s * 1e3:.3f} ms, coarsened "
                      f"{self.coarsened_time_s * 1e3:.3f} ms, speedup {self.speedup:.2f}x "
                      "(kernel time, medians, interleaved in one run).", ""]
        if self.verification is not None:
            v = self.verification
            lines += [f"Verified against the original on random inputs (every buffer): "
                      f"{'ok' if v.ok else 'FAILED'} (max abs err {v.max_abs_err:.3g}).", ""]
        lines += ["Host code: `coarsened_host.c` is not written (host-code generation does not "
                  "exist yet); the launches that replace each original launch are listed "
                  "below.", ""]
        for lt in self.launches:
            wd = lt.work_dim
            lines.append(f"## Launch {lt.launch}: `{lt.kernel}`")
            lines.append("")
            if lt.geometry is not None:
                g = lt.geometry
                lines.append(f"Original NDRange: global {list(g.global_size[:wd])}, local "
                             f"{list(g.local_size[:wd])}.")
            sp = f", speedup {lt.speedup:.2f}x" if lt.speedup else ""
            lines.append(f"Chosen: thread {list(lt.chosen.thread[:wd])}, block "
                         f"{list(lt.chosen.block[:wd])}{sp}"
                         f"{' (cached)' if lt.cached else ''}. {lt.reason}".rstrip())
            row = next((v for v in lt.variants if v.factors == lt.chosen), None)
            if row and row.geometry:
                for geo in row.geometry:
                    lines.append(f"- {geo['role']} launch `{geo['kernel']}`: global "
                                 f"{geo['global_size']}, local {geo['local_size']}, group "
                                 f"base {geo['group_base']}")
            lines += ["", "| thread | block | status | time (ms) | verified | reason |",
                      "|---|---|---|---|---|---|"]
            for v in lt.variants:
                t = f"{v.time_s * 1e3:.3f}" if v.time_s is not None else ""
                ver = "" if v.verified is None else ("yes" if v.verified else "NO")
                lines.append(f"| {list(v.factors.thread[:wd])} | {list(v.factors.block[:wd])} "
                             f"| {v.status} | {t} | {ver} | {v.reason} |")
            lines.append("")
        return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# Variants
# ----------------------------------------------------------------------------------------------


def candidate_factors(geom: LaunchGeometry, *, max_copies: int = MAX_COPIES) -> list[Factors]:
    """Thread factors, block factors and their combinations per dimension (Polygeist-GPU §VI).

    1-D: thread 1 with block 1, 2, 3, 4, 8, 16 (3 exercises the epilogue), thread 2 with block
    1, 2, 4, 8, thread 4 with block 1, 4.  More dimensions: total thread factors 1, 2, 4 and
    block factors 1, 2, 4, 8, each spread evenly over the non-unit dimensions (Polygeist-GPU §IV-C).
    Factors that do not fit the geometry are skipped.
    """
    wd = geom.work_dim
    L, G = geom.local_size, geom.groups
    out: list[Factors] = []

    def add(f: Factors) -> None:
        if f in out or f.total > max_copies:
            return
        if any(L[d] % f.thread[d] for d in range(3)) or any(f.block[d] > G[d] for d in range(3)):
            return
        out.append(f)

    if wd == 1:
        for t, bs in ((1, (1, 2, 3, 4, 8, 16)), (2, (1, 2, 4, 8)), (4, (1, 4))):
            for b in bs:
                add(Factors((t, 1, 1), (b, 1, 1)))
        return out

    def spread(total: int, extents: Sequence[int]) -> Optional[tuple[int, int, int]]:
        try:
            return spread_factors(total, extents)
        except PolyfuseError:
            return None

    for tt in (1, 2, 4):
        for bt in (1, 2, 4, 8):
            t, b = spread(tt, L[:wd]), spread(bt, G[:wd])
            if t is not None and b is not None:
                add(Factors(t, b))
    return out


def fused_candidates(geom: LaunchGeometry) -> list[Factors]:
    """The short list tried on fused kernels inside ``polyfuse fuse --tune``: thread 2, block 2
    and 4, thread 2 with block 2 (each spread over the non-unit dimensions), block factors only
    where they divide the group count, so no epilogue adds a launch."""
    wd = geom.work_dim
    out: list[Factors] = []
    for tt, bt in ((2, 1), (1, 2), (1, 4), (2, 2)):
        try:
            t = spread_factors(tt, geom.local_size[:wd]) if tt > 1 else (1, 1, 1)
            b = spread_factors(bt, geom.groups[:wd]) if bt > 1 else (1, 1, 1)
        except PolyfuseError:
            continue
        if any(geom.groups[d] % b[d] for d in range(3)):
            continue
        out.append(Factors(t, b))
    return out


# ----------------------------------------------------------------------------------------------
# Tuning
# ----------------------------------------------------------------------------------------------


def _one_launch(program: Program, launch: Launch) -> Program:
    """``program`` reduced to one launch (with its host loops), from random inputs."""
    return replace(program, ops=(launch,), name=f"{program.name}-L{launch.id}")


def _kernel_info(prog: Program, ctx: cl.Context, dev: cl.Device) -> tuple[int, int]:
    """(max private memory bytes, min work-group size) over the kernels of ``prog``."""
    built = build(prog, ctx)
    priv, wg = 0, 1 << 30
    for name in prog.kernels:
        k = cl.Kernel(built, name)
        try:
            priv = max(priv, int(k.get_work_group_info(
                cl.kernel_work_group_info.PRIVATE_MEM_SIZE, dev)))
        except cl.Error:
            pass
        wg = min(wg, int(k.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, dev)))
    return priv, wg


def _cache_path(cache_dir: Path, dev: str, phash: str) -> Path:
    return cache_dir / dev / f"coarsen-{phash}.json"


def tune_launch(program: Program, launch: Launch, *, params: Mapping[str, Any],
                candidates: Optional[Sequence[Factors]] = None, tune: bool = True,
                verify: bool = True, ctx: cl.Context, queue: cl.CommandQueue,
                limits: DeviceLimits, repeat: int = 10, rounds: int = 5,
                cache_dir: Optional[Path] = None,
                progress: Optional[Callable[[str], None]] = None,
                deadline: Optional[float] = None) -> LaunchTuning:
    """Variants of one launch, pruned, verified and (with ``tune``) timed; the choice.

    ``deadline`` (a :func:`time.monotonic` time): past it, variants are no longer verified
    (pruned, with that reason) and the launch keeps the original unless its variants were
    already timed.
    """
    say = progress or (lambda _m: None)
    ident = Factors()

    def late() -> bool:
        return deadline is not None and time.monotonic() > deadline

    try:
        geom = launch_geometry(launch, params)
    except PolyfuseError as err:
        return LaunchTuning(launch.id, launch.kernel, launch.work_dim,
                            (VariantRow(ident, "illegal", str(err)),), ident, reason=str(err))
    if late():
        say(f"launch {launch.id} ({launch.kernel}): time budget spent, original kept")
        return LaunchTuning(launch.id, launch.kernel, geom.work_dim,
                            (VariantRow(ident, "timed", "original"),), ident,
                            reason=BUDGET_SPENT, geometry=geom)
    wd = geom.work_dim
    cands = list(candidates) if candidates is not None else candidate_factors(geom)
    if ident not in cands:
        cands.insert(0, ident)
    sub = _one_launch(program, launch)
    dev = queue.device
    key = ",".join(f.label(3) for f in cands) + f"|tune={tune}"
    cpath = None
    if tune and cache_dir is not None:
        cpath = _cache_path(cache_dir, device_key(limits), program_hash(sub, params))
        hit = load_cache_entry(cpath, key)
        if hit is not None:
            chosen = Factors(tuple(hit["thread"]), tuple(hit["block"]))  # type: ignore[arg-type]
            rows = tuple(VariantRow(Factors(tuple(r["thread"]), tuple(r["block"])),  # type: ignore[arg-type]
                                    r["status"], r["reason"], r.get("time_s"), r.get("verified"))
                         for r in hit["rows"])
            say(f"launch {launch.id} ({launch.kernel}): cached choice {chosen.label(wd)}")
            return LaunchTuning(launch.id, launch.kernel, wd, rows, chosen,
                                hit.get("original_time_s"), hit.get("chosen_time_s"),
                                "cached choice", True, geom)
    rows: dict[Factors, VariantRow] = {}
    progs: dict[Factors, Program] = {}
    variants: dict[Factors, CoarsenedProgram] = {}
    for f in cands:
        if f.identity:
            rows[f] = VariantRow(f, "timed", "original", verified=True)
            progs[f] = sub
            continue
        try:
            cp = coarsen(sub, {launch.id: f}, params=params)
        except PolyfuseError as err:
            rows[f] = VariantRow(f, "illegal", str(err))
            continue
        info = cp.launches[0]
        if info.local_bytes > limits.local_mem_size:
            rows[f] = VariantRow(f, "pruned", f"__local use {info.local_bytes} B exceeds the "
                                 f"device's {limits.local_mem_size} B", local_mem_bytes=
                                 info.local_bytes, geometry=tuple(info.to_dict()["launches"]))
            continue
        variants[f] = cp
    # each variant (and the original) run once in a worker first: one the device compiler
    # rejects or aborts on is skipped with why, the others are tuned
    original, *why = precheck_programs([sub, *(cp.program for cp in variants.values())],
                                       params, dev)
    if original is not None:
        raise PolyfuseError(f"launch {launch.id} ({launch.kernel}): {original}")
    orig_priv, _ = _kernel_info(sub, ctx, dev)
    ref = run_program(sub, params=params, ctx=ctx, queue=queue) if verify else None
    for (f, cp), rejected in zip(variants.items(), why):
        info = cp.launches[0]
        geo = tuple(info.to_dict()["launches"])
        if late():
            rows[f] = VariantRow(f, "pruned", BUDGET_SPENT, geometry=geo)
            continue
        if rejected is not None:
            rows[f] = VariantRow(f, "failed", f"skipped: {rejected}", geometry=geo)
            say(f"launch {launch.id} ({launch.kernel}): variant {f.label(wd)} skipped "
                f"({rejected})")
            continue
        try:
            priv, wgmax = _kernel_info(cp.program, ctx, dev)
        except (PolyfuseError, cl.Error) as err:
            rows[f] = VariantRow(f, "failed", f"build failed: {str(err).splitlines()[0]}",
                                 geometry=geo)
            continue
        lsz = math.prod(geom.local_size[d] // f.thread[d] for d in range(3))
        if wgmax < lsz:
            rows[f] = VariantRow(f, "pruned", f"the compiled kernel allows work-groups of "
                                 f"{wgmax}, the variant needs {lsz}", info.local_bytes, priv,
                                 geometry=geo)
            continue
        if not limits.is_cpu and priv > orig_priv:
            rows[f] = VariantRow(f, "pruned", f"private memory {priv} B > original "
                                 f"{orig_priv} B (spills)", local_mem_bytes=info.local_bytes,
                                 private_mem_bytes=priv, geometry=geo)
            continue
        ok: Optional[bool] = None
        reason = ""
        if ref is not None:
            try:
                cand = run_program(cp.program, params=params, ctx=ctx, queue=queue,
                                   inputs={n: a for n, a in ref.initial.items()
                                           if n in cp.program.buffers})
            except (PolyfuseError, cl.Error) as err:
                rows[f] = VariantRow(f, "failed", f"run failed: {str(err).splitlines()[0]}",
                                     geometry=geo)
                continue
            v = compare_runs(ref, cand, label="original")
            ok = v.ok
            if not ok:
                reason = "results differ from the original"
        rows[f] = VariantRow(f, "timed" if ok is not False else "failed", reason,
                             verified=ok, local_mem_bytes=info.local_bytes,
                             private_mem_bytes=priv, geometry=geo)
        if ok is not False:
            progs[f] = cp.program
    say(f"launch {launch.id} ({launch.kernel}): {len(progs) - 1} variants to time, "
        f"{sum(r.status == 'pruned' for r in rows.values())} pruned, "
        f"{sum(r.status == 'illegal' for r in rows.values())} illegal")
    chosen = ident
    t_orig = t_chosen = None
    reason = ""
    if tune and len(progs) > 1:
        names = {f.label(3): f for f in progs}
        times = time_interleaved({n: progs[f] for n, f in names.items()}, params=params,
                                 repeat=repeat, rounds=rounds, ctx=ctx, queue=queue)
        for n, f in names.items():
            rows[f] = replace(rows[f], time_s=times[n].kernel_time)
        best = min(progs, key=lambda f: rows[f].time_s or math.inf)
        if not best.identity:
            confirm = time_interleaved({"original": sub, "best": progs[best]}, params=params,
                                       repeat=repeat * 2, rounds=rounds * 2, ctx=ctx,
                                       queue=queue)
            t_orig, t_best = confirm["original"].kernel_time, confirm["best"].kernel_time
            if t_best is not None and t_orig is not None and t_best < t_orig * (1 - MARGIN):
                chosen, t_chosen = best, t_best
                reason = "fastest variant, confirmed against the original in a second run"
            else:
                t_chosen = t_orig
                reason = (f"fastest variant {best.label(wd)} was not {MARGIN:.0%} faster than the "
                          "original when re-timed: kept the original")
        else:
            t_orig = t_chosen = rows[ident].time_s
            reason = "no variant beats the original"
    elif not tune:
        legal = [f for f in progs if not f.identity]
        if candidates is not None and len(legal) == 1:
            chosen = legal[0]
            reason = "the requested factors (not timed)"
        else:
            reason = "not tuned: original kept" if legal else "no legal variant"
    lt = LaunchTuning(launch.id, launch.kernel, wd, tuple(rows[f] for f in cands), chosen,
                      t_orig, t_chosen, reason, False, geom)
    if cpath is not None and not any(r.reason == BUDGET_SPENT for r in lt.variants):
        # a tuning the budget cut short is not the choice the full tuning would make
        store_cache_entry(cpath, key, {
            "thread": list(chosen.thread), "block": list(chosen.block),
            "original_time_s": t_orig, "chosen_time_s": t_chosen,
            "rows": [{"thread": list(r.factors.thread), "block": list(r.factors.block),
                      "status": r.status, "reason": r.reason, "time_s": r.time_s,
                      "verified": r.verified} for r in lt.variants]})
    return lt


def tune_coarsening(program: Program, *, params: Optional[Mapping[str, Any]] = None,
                    kernel: Optional[str] = None,
                    factors: Union[None, Sequence[Factors],
                                   Callable[[LaunchGeometry], Sequence[Factors]]] = None,
                    tune: bool = True,
                    verify: bool = True, device: DeviceSpec = None,
                    cache_dir: Optional[Path] = None, use_cache: bool = True,
                    repeat: int = 10, rounds: int = 5, time_whole: bool = True,
                    progress: Optional[Callable[[str], None]] = None,
                    budget_s: Optional[float] = None) -> CoarsenReport:
    """Coarsen every launch (of ``kernel`` when given) with factors chosen by measurement.

    ``factors`` restricts the variants (a list, or a function of a launch's geometry); each
    launch still keeps the original as a choice;
    with ``tune=False`` nothing is timed and a single requested variant is applied as is.
    ``budget_s`` bounds the tuning of the launches (module doc); the coarsened program is
    verified and timed after it.
    """
    params = dict(params or {})
    deadline = None if budget_s is None else time.monotonic() + budget_s
    ctx, queue = get_context(device)
    limits = DeviceLimits.from_device(queue.device)
    cdir = (cache_dir or default_cache_dir()) if use_cache else None
    tunings = []
    for launch in program.launches:
        if kernel is not None and launch.kernel != kernel:
            continue
        cands = factors
        if callable(factors):
            try:
                cands = factors(launch_geometry(launch, params))
            except PolyfuseError:
                cands = []
        tunings.append(tune_launch(program, launch, params=params, candidates=cands,
                                   tune=tune, verify=verify, ctx=ctx, queue=queue,
                                   limits=limits, repeat=repeat, rounds=rounds, cache_dir=cdir,
                                   progress=progress, deadline=deadline))
    if kernel is not None and not tunings:
        raise PolyfuseError(f"no launch of kernel {kernel!r}")
    per = {lt.launch: lt.chosen for lt in tunings if not lt.chosen.identity}
    try:
        result = coarsen(program, per, params=params)
    except CoarsenError:
        raise
    ver = None
    if verify and per:
        ver = verify_programs(program, result.program, params=params, ctx=ctx, queue=queue,
                              label="original")
        if not ver.ok:
            raise PolyfuseError(f"the coarsened program differs from the original: "
                                f"{ver.summary() if hasattr(ver, 'summary') else ver}")
    t0 = t1 = None
    if time_whole and tune and per:
        tw = time_interleaved({"original": program, "coarsened": result.program}, params=params,
                              repeat=repeat, rounds=rounds, ctx=ctx, queue=queue)
        t0, t1 = tw["original"].kernel_time, tw["coarsened"].kernel_time
    return CoarsenReport(program.name, limits.name, tuple(tunings), result, ver, t0, t1, params)
