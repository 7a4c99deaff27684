"""The whole fusion pipeline in one call: UAR → plan → fused code → (verify) → files.

Each stage returns its own record and leaves the earlier ones as they were: the
:class:`~polyfuse.fusion.FusionPlan` (planning decisions), the
:class:`~polyfuse.codegen.FusedProgram` (kernels, launched NDRanges, optimizations) and the
verification summary of :class:`FuseResult`; :func:`plan_json` assembles ``plan.json`` from them.

Used by ``polyfuse fuse``, by ``schedules/regenerate.py`` and by research scripts::

    >>> import polyfuse
    >>> from polyfuse.pipeline import fuse_program, write_outputs
    >>> program = polyfuse.load_opencl("examples/qkv/kernels.cl",
    ...                                host="examples/qkv/host.c")         # doctest: +SKIP
    >>> result = fuse_program(program, verify=True)                         # doctest: +SKIP
    >>> result.plan.launches_before, result.fused.launches_after           # doctest: +SKIP
    (4, 1)
    >>> result.verified["ok"], result.fused.group(0).kernel                 # doctest: +SKIP
    (True, 'fused_g0')
    >>> write_outputs(result, "out/qkv")                                     # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union, cast

from polyfuse.codegen import FusedProgram
from polyfuse.compilation import (
    Compilation,
    Options,
    Pass,
    Progress,
    Stage,
    build,
    build_uar,
    certify,
    check_budget,
    generate,
    load,
    plan,
    run_passes,
    stage_progress,
    time_runs,
    verify,
)
from polyfuse.compilation import device_name as compilation_device_name
from polyfuse.fusion import FusionPlan, plan_to_json, plan_to_text, size_json
from polyfuse.mathtext import readable
from polyfuse.program import REFERENCE_TARGET, PolyfuseError, Program, Target
from polyfuse.uar import UAR
from polyfuse.uar import build_uar as uar_of

if TYPE_CHECKING:  # imported where they run (they load pyopencl)
    from polyfuse.coarsen_tune import CoarsenReport
    from polyfuse.runtime.device import DeviceSpec
    from polyfuse.runtime.verify import Verification
    from polyfuse.tune import TuneResult

@dataclass(frozen=True)
class FuseResult:
    """Everything one fusion run produced, one record per stage."""

    program: Program
    uar: UAR
    plan: FusionPlan
    fused: FusedProgram
    #: the run that decides :attr:`ok` (for ONNX models, the failing one of the two checks)
    verification: Optional[Verification] = None
    #: the verification summary written as ``plan.json``'s ``verified`` ({"ok", "reference",
    #: "max_abs_err", "max_rel_err", ...}); None when verification did not run
    verified: Optional[dict[str, Any]] = None
    tuning: Optional[TuneResult] = None
    #: where the launches came from, for the report (ONNX: node -> "launch k" / "alias of b" /
    #: "folded on the host")
    source_nodes: Optional[dict[str, str]] = None
    #: thread/block coarsening of the fused kernels (``fuse --tune``), a
    #: polyfuse.coarsen_tune.CoarsenReport; written as coarsened.cl + coarsening.json
    coarsening: Optional[CoarsenReport] = None
    #: the compilation record the result was read from (target, options, timings)
    compilation: Optional[Compilation] = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.verification is None or bool(self.verification.ok)

    @property
    def undetermined(self) -> Optional[str]:
        """Why a failed verification says nothing about fusion: every buffer that differs is
        one the original writes from several work-items of a launch at once (a race), so its
        contents depend on the order they run; None otherwise."""
        if self.verification is None or self.verification.ok:
            return None
        races = {r.buffer: r for r in self.uar.instantiation.races}
        failed = [b.name for b in self.verification.failed]
        if not failed or any(self.program.root(name)[0] not in races for name in failed):
            return None
        return "the original program's result is not determined: " + "; ".join(
            races[self.program.root(name)[0]].describe() for name in dict.fromkeys(failed))

    @property
    def optimizations(self) -> Mapping[str, Any]:
        """The post-fusion optimizations that fired (``fused.optimizations``)."""
        return self.fused.optimizations

    def to_svg(self, path: Union[str, os.PathLike, None] = None) -> str:
        """The plan's drawing (:meth:`FusionPlan.to_svg`), each group framed with the name of
        the kernel code generation made of it; also written to ``path``."""
        return self.plan.to_svg(path, names={k.group: k.kernel for k in self.fused.groups})

    def to_dot(self, path: Union[str, os.PathLike, None] = None) -> str:
        """:meth:`to_svg`'s drawing as Graphviz DOT (also written to ``path``)."""
        return self.plan.to_dot(path, names={k.group: k.kernel for k in self.fused.groups})


def size_buffers(program: Program, params: Optional[dict[str, int]] = None,
                 uar: Optional[UAR] = None) -> Program:
    """``program`` with every root buffer of unknown size sized to what its operations touch.

    Kernels given without a host program have buffers of unknown size; once ``params`` fix the
    launch sizes and scalars, the extent each buffer needs is exact (the UAR's kernel-level
    accesses), so random inputs can be generated for ``--verify``.  Raises a
    :class:`PolyfuseError` naming the values still missing.
    """
    import islpy as isl

    unsized = [n for n, b in program.buffers.items() if b.size is None and b.parent is None]
    if not unsized:
        return program
    params = dict(params or {})
    uar = uar or uar_of(program)
    missing = [p for p in uar.params if p not in params]
    if missing:
        raise PolyfuseError(
            f"the sizes of buffers {', '.join(unsized)} are unknown without a host program; "
            f"give the values {', '.join(f'--param {m}=...' for m in missing)} (global sizes "
            f"are <kernel>_gs<d>) or the host program with --host")
    fix = isl.Set("[" + ", ".join(uar.params) + "] -> { : "
                  + " and ".join(f"{k} = {params[k]}" for k in uar.params) + " }")
    extent: dict[str, int] = {}
    for op in program.ops:
        eff = uar.effects(op.id)
        for name in unsized:
            for direction in ("read", "write"):
                rel = eff.access(direction, name, "kernel")
                if rel is None:
                    continue
                rng = rel.range().intersect_params(fix.align_params(rel.get_space().params()))
                if rng.is_empty():
                    continue
                if not rng.is_bounded():
                    raise PolyfuseError(f"buffer {name!r}: the accesses are not bounded at the "
                                        "given values; give the host program with --host")
                top = rng.lexmax().sample_point().get_coordinate_val(isl.dim_type.set, 0)
                extent[name] = max(extent.get(name, 0), top.to_python() + 1)
    units = uar.instantiation.units
    buffers = dict(program.buffers)
    for name in unsized:
        buffers[name] = dataclasses.replace(
            buffers[name], size=max(1, extent.get(name, 1)) * units.get(name, 1))
    return dataclasses.replace(program, buffers=buffers)


def fuse_program(program: Program, *, params: Optional[dict[str, int]] = None,
                 orchestration: str = "auto", verify: bool = False, tune: bool = False,
                 device: DeviceSpec = None, target: Optional[Target] = None,
                 build: bool = True, progress: Optional[Progress] = None,
                 coarsen: Optional[bool] = None) -> FuseResult:
    """Plan, generate and optionally verify (fused vs unfused on random inputs) or autotune:
    :data:`PASSES` over a :class:`~polyfuse.compilation.Compilation` of ``program``.

    Planning and code generation read the limits of ``target`` (default: the device's when
    the fused program is built on ``device``, else the reference target).  With ``tune`` (or
    ``coarsen=True``) the fused kernels are then coarsened, factors chosen by timing
    (:func:`polyfuse.coarsen_tune.tune_coarsening`): fuse first, then coarsen.  ``progress``
    receives :class:`~polyfuse.compilation.Event` records (``str(event)`` is the message).
    """
    if device is False:  # the old spelling of "no device"
        warnings.warn("fuse_program(device=False) is deprecated: give target=REFERENCE_TARGET "
                      "(or build=False)", DeprecationWarning, stacklevel=2)
        device, target = None, target or REFERENCE_TARGET
    options = Options(params=dict(params or {}), orchestration=orchestration, build=build,
                      tune=tune, coarsen=tune if coarsen is None else coarsen, verify=verify,
                      device=device)
    return result_of(compile_program(Compilation(
        target=target or target_of(device, build), options=options, program=program,
        progress=progress)))


def compile_program(compilation: Compilation, passes: tuple[Pass, ...] = ()) -> Compilation:
    """``compilation`` through ``passes`` (default :data:`PASSES`)."""
    from polyfuse.c.cpp import RECURSION_LIMIT, recursion_limit

    with recursion_limit(RECURSION_LIMIT):  # kernels' syntax trees are copied and walked
        return run_passes(compilation, passes or PASSES)


def result_of(c: Compilation) -> FuseResult:
    """The :class:`FuseResult` of a compilation that ran through generation."""
    assert c.program is not None and c.uar is not None and c.plan is not None \
        and c.fused is not None
    return FuseResult(program=c.program, uar=c.uar, plan=c.plan, fused=c.fused,
                      verification=c.verification, verified=c.verified,
                      tuning=cast(Optional["TuneResult"], c.tuning),
                      source_nodes=None if c.model is None else dict(c.model.nodes),
                      coarsening=cast(Optional["CoarsenReport"], c.coarsening), compilation=c)


def target_of(device: DeviceSpec, build: bool = True) -> Target:
    """The device's limits for planning (the reference target when nothing is built): the one
    place an application turns its device into a :class:`~polyfuse.program.Target`."""
    if not build:
        return REFERENCE_TARGET
    from polyfuse.runtime.device import device_target

    return device_target(device)


def tune(c: Compilation) -> Compilation:
    """The tuning pass: with ``options.tune``, the orchestration chosen by timing
    (:func:`polyfuse.tune.autotune`); it plans, certifies, generates and builds each variant
    with the passes of :mod:`polyfuse.compilation`, so the record comes back built."""
    if not c.options.tune or c.tuning is not None:
        return c
    from polyfuse.tune import autotune

    c.say(Stage.TUNE, "autotuning orchestration variants")
    assert c.program is not None
    tuning = autotune(c.program, params=c.params, device=c.options.device,
                      progress=stage_progress(c.progress, Stage.TUNE), variants=TUNE_VARIANTS,
                      uar=c.uar, target=c.target)
    return c.replace(tuning=tuning, plan=tuning.plan, certified=True, fused=tuning.fused,
                     built=True)


def coarsen(c: Compilation) -> Compilation:
    """The coarsening pass: with ``options.coarsen``, thread/block coarsening of the fused
    kernels, factors chosen by timing (once; ``fused.cl`` stays uncoarsened)."""
    if not c.options.coarsen or c.coarsening is not None:
        return c
    from polyfuse.coarsen_tune import fused_candidates, tune_coarsening

    assert c.fused is not None
    c.say(Stage.COARSEN, "coarsening the fused kernels (factors chosen by timing)")
    try:
        coarsening = tune_coarsening(c.fused.program, params=c.params, device=c.options.device,
                                     factors=fused_candidates,
                                     progress=stage_progress(c.progress, Stage.COARSEN),
                                     time_whole=False)
    except PolyfuseError as err:
        c.say(Stage.COARSEN, f"coarsening not applied: {err}")
        return c
    return c.replace(coarsening=coarsening)


def write(c: Compilation) -> Compilation:
    """The write pass: with ``options.out``, the output files (:func:`write_outputs`)."""
    if c.options.out is None or c.written is not None:
        return c
    c.say(Stage.WRITE, f"writing {c.options.out}")
    paths = write_outputs(result_of(c), c.options.out,
                          host_include_dirs=c.options.host_include_dirs,
                          host_defines=dict(c.options.host_defines))
    return c.replace(written=paths)


#: The passes every application runs, in order; each fills in its stage when the options ask
#: for it (ONNX verification swaps :func:`~polyfuse.compilation.verify` for
#: :func:`polyfuse.onnx_run.verify_onnx`).
PASSES: tuple[Pass, ...] = (load, check_budget, build_uar, tune, plan, certify, generate, build,
                            coarsen, verify, write, time_runs)


def device_name(device: DeviceSpec) -> str:
    """The device a run used (:func:`polyfuse.compilation.device_name`)."""
    return compilation_device_name(device)


#: orchestration variants ``fuse --tune`` times (heterogeneous horizontal fusion only wins
#: when it is measured faster than leaving independent launches apart)
TUNE_VARIANTS = ("vertical", "horizontal", "hetero")


def _apart(plan: FusionPlan, tuning: Optional[TuneResult]
           ) -> tuple[tuple[tuple[int, ...], tuple[int, ...], str], ...]:
    """The plan's independent groups left apart, with why; after tuning, the ones the chosen
    variant leaves apart say how the heterogeneous variant measured."""
    rows = {r.variant: r for r in tuning.table} if tuning is not None else {}
    het = rows.get("hetero")
    if tuning is None or tuning.variant == "hetero" or het is None or \
            het.duplicate_of is not None:
        return plan.apart
    key = "kernel_time" if tuning.metric == "kernel" else "wall_time"
    mine, theirs = getattr(tuning.chosen, key), getattr(het, key)
    if het.ok and mine is not None and theirs is not None:
        why = (f"slower when measured: fused side by side {theirs * 1e6:.1f} us, apart "
               f"({tuning.variant}) {mine * 1e6:.1f} us ({tuning.metric} time, median)")
    else:
        why = f"the heterogeneous variant was discarded: {het.error}"
    return tuple((a, b, why if r.startswith("not fused in this variant") else r)
                 for a, b, r in plan.apart)


def plan_json(fused: FusedProgram, verified: Optional[Mapping[str, Any]] = None
              ) -> dict[str, Any]:
    """``plan.json`` (docs/interfaces.md): the plan's decisions, what code generation made of
    each group (kernel name, launched NDRange, its notes after the plan's), the fused program's
    launch count and optimizations, and the verification summary when verification ran."""
    out = plan_to_json(fused.plan)
    for group in out["groups"]:
        k = fused.group(group["id"])
        group.update(kernel=k.kernel, global_size=size_json(k.global_size),
                     local_size=size_json(k.local_size), notes=group["notes"] + list(k.notes))
    out["launches_after"] = fused.launches_after
    for key in ("launches_before", "launches_after"):
        if not isinstance(out[key], int):  # symbolic: the exact str stays, readable beside it
            out[f"{key}_readable"] = readable(out[key])
    out["optimizations"] = dict(sorted(fused.optimizations.items()))
    if verified is not None:
        out["verified"] = dict(verified)
    return out


def write_outputs(result: FuseResult, out_dir: Union[str, Path], *,
                  host_include_dirs: tuple[str, ...] = (),
                  host_defines: Optional[dict[str, Optional[str]]] = None) -> dict[str, Path]:
    """Write ``plan.json``, ``fused.cl``, ``report.md`` and, for a program with a C/C++ host,
    ``fused_host.c``/``.cpp`` (the host rewritten to launch the fused kernels) into ``out_dir``.

    A host that cannot be rewritten is not an error of the fusion: ``report.md`` says why and
    ``paths["host_error"]`` is set to the message.
    """
    from polyfuse.codegen.host_rewrite import HostRewriteError, host_files_of, rewrite_hosts

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"plan": out / "plan.json", "source": out / "fused.cl", "report": out / "report.md"}
    paths["plan"].write_text(plan_to_text(plan_json(result.fused, result.verified)),
                             encoding="utf-8")
    paths["source"].write_text(result.fused.source)
    host_note = ""
    hosts = host_files_of(result.program)
    if hosts:
        try:
            from polyfuse.program import shared_runtime_options

            # the fused program is built with the host's own -cl-* options
            fhs = rewrite_hosts(result.program, result.fused, hosts,
                                include_dirs=host_include_dirs, defines=host_defines or {},
                                build_options=" ".join(shared_runtime_options(
                                    result.program.kernels.values())))
        except HostRewriteError as err:
            host_note = f"fused host not written: {err}"
            paths["host_error"] = Path(host_note)
        else:
            for i, fh in enumerate(fhs):
                key = "host" if i == 0 else f"host{i + 1}"
                paths[key] = out / fh.name
                paths[key].write_text(fh.text)
            names = ", ".join(f"`{fh.name}`" for fh in fhs)
            host_note = (f"{names}: the host program rewritten to launch the fused kernels "
                         "(build it like the original, plus `-lOpenCL`).")
            host_note += "".join(f"\n\n- {n}" for fh in fhs for n in fh.notes)
    report = report_markdown(result)
    if host_note:
        report += f"\n## Fused host\n\n{host_note}\n"
    paths["report"].write_text(report)
    if result.coarsening is not None:
        import json

        from polyfuse.runtime.execute import program_source

        paths["coarsened"] = out / "coarsened.cl"
        paths["coarsened"].write_text(program_source(result.coarsening.result.program))
        paths["coarsening"] = out / "coarsening.json"
        paths["coarsening"].write_text(json.dumps(result.coarsening.to_dict(), indent=2) + "\n")
    return paths


def _md_table(headers: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


#: The key of ``report.md``: every term its sections use.
REPORT_LEGEND = """\
## Legend

- **launch #N / LN**: the N-th operation of the program, a kernel launch; a **group** is a set
  of launches fused into one kernel, each member a **fragment** of it, in order.
- **Widths** of a dependence: **thread** (each consumer work-item needs what one producer
  work-item wrote: fusable without synchronization), **block** (one producer work-group:
  fusable with a barrier), **global** (several producer work-groups: not fusable).
- **P1**: launches joined only by thread/block dependences are merged, in order.
  **P2**: a global dependence keeps launches apart.
  **P3**: independent launches with identical code are merged too (see orchestration).
- **anchored on the producer / consumer**: the fused kernel runs on that launch's grid; the
  other fragment is re-indexed into it (so each consumer runs where its input was produced).
- **orchestration**: how independent fragments share the fused kernel — **vertical** (one
  work-item runs them in sequence), **horizontal** (different work-groups), **single** (one
  fragment).
- **step**: the launch step the isl scheduler gave the group (groups run in step order)."""


def _onnx_summary(nodes: dict[str, str]) -> str:
    launches = sum(1 for v in nodes.values() if v.startswith("launch"))
    aliases = sum(1 for v in nodes.values() if v.startswith("alias"))
    folded = sum(1 for v in nodes.values() if v.startswith("folded"))
    parts = [f"{launches} kernel launch(es)"]
    if aliases:
        parts.append(f"{aliases} alias(es) (a Reshape, Squeeze, ... is a new view of the same "
                     "buffer: no data moves, no launch)")
    if folded:
        parts.append(f"{folded} folded on the host (shape arithmetic on constants)")
    others = len(nodes) - launches - aliases - folded
    if others:
        parts.append(f"{others} other")
    return f"The model's {len(nodes)} ONNX ops became " + ", ".join(parts) + "."


def _kernel_form_notes(nodes: dict[str, str]) -> list[str]:
    """How the front-end laid out the kernels of nodes whose form depends on their consumers
    (a matrix product computing whole rows for its row reduction, or why it could not)."""
    notes = [(label, m.group(1)) for label, desc in nodes.items()
             if (m := re.fullmatch(r"launch \S+ \((.*)\)", desc))]
    if not notes:
        return []
    return ["", "Kernel forms chosen for fusion:", ""] + [f"- `{label}`: {why}"
                                                          for label, why in notes]


def _is_fragment_listing(note: str, group: Any, kernel_of: dict[int, str]) -> bool:
    """``fragment k: launch #N name`` only restates the members column."""
    m = re.fullmatch(r"fragment (\d+): launch #(\d+) (\S+)( \([^)]*\))?", note)
    if not m:
        return False
    k, lid = int(m.group(1)), int(m.group(2))
    members = list(group.members)
    return 1 <= k <= len(members) and members[k - 1] == lid


def report_markdown(result: FuseResult) -> str:
    """A readable report: a summary first, the legend, groups, what blocked fusion and why,
    optimizations, verification."""
    plan, fused, program, v = result.plan, result.fused, result.program, result.verified
    kernel_of = {launch.id: launch.kernel for launch in program.launches}
    title = " + ".join(Path(f).name for f in program.files) if program.files else program.name
    out = [f"# polyfuse report: {title}", "", "## Summary", ""]
    out.append(f"Kernel launches executed: **{readable(plan.launches_before)} → "
               f"{readable(fused.launches_after)}** "
               f"({len(program.launches)} launch sites in {len(plan.groups)} fused "
               f"group(s)).")
    if result.source_nodes:
        out.append(_onnx_summary(result.source_nodes))
        out += _kernel_form_notes(result.source_nodes)
    blocked = len(plan.blocked)
    out.append("Every dependence between launches was fusable." if not blocked else
               f"{blocked} dependence(s) kept launches apart (see *Edges that blocked fusion*).")
    if v:
        out.append(f"Verified against {v.get('reference', 'unfused')}: "
                   + ("passed." if v.get("ok") else "**FAILED**."))
    out += ["", REPORT_LEGEND, "", "## Groups", ""]
    rows = []
    for g in plan.groups:
        members = ", ".join(f"#{m} {kernel_of.get(m, '?')}" for m in g.members)
        k = fused.group(g.id)
        rows.append([g.id, members, g.orchestration, k.kernel, g.step,
                     _fmt_size(k.global_size), _fmt_size(k.local_size)])
    out.append(_md_table(["group", "members (fragments, in order)", "orchestration", "kernel",
                          "step", "global", "local"], rows))
    notes = [(g.id, _explained(n, plan.starts)) for g in plan.groups
             for n in g.notes + fused.group(g.id).notes
             if not _is_fragment_listing(n, g, kernel_of)]
    if notes:
        out += ["", "Planning decisions:", ""]
        out += [f"- group {gid}: {note}" for gid, note in notes]
    apart = _apart(plan, result.tuning)
    if apart:
        out += ["", "Independent launches left apart (no dependence path between them):", ""]
        for a, b, why in apart:
            names = [", ".join(f"#{m} {kernel_of.get(m, '?')}" for m in ms) for ms in (a, b)]
            out.append(f"- {names[0]} | {names[1]}: {why}")
    out += ["", "## Edges that blocked fusion", ""]
    if plan.blocked:
        rows = []
        for b in plan.blocked:
            witness = (b.witness or {}).get("text", "") if isinstance(b.witness, dict) else ""
            rows.append([f"#{b.src} {kernel_of.get(b.src, 'host')} → "
                         f"#{b.dst} {kernel_of.get(b.dst, 'host')}", b.array, b.kind, b.width,
                         b.reason.split(": ", 1)[0], witness or "-"])
        out.append(_md_table(["edge", "array", "kind", "width", "why", "witness"], rows))
    else:
        out.append("None: every dependence between launches was fusable.")
    out += ["", "## Post-fusion optimizations", ""]
    opts = {k: n for k, n in fused.optimizations.items() if k != "details"}
    if opts:
        out += [f"- {k.replace('_', ' ')}: {n}" for k, n in sorted(opts.items())]
        details = fused.optimizations.get("details") or {}
        for key, items in sorted(details.items()):
            if isinstance(items, dict):
                items = [f"{k} = {x}" for k, x in items.items()]
            if items:
                out.append(f"  - {key.replace('_', ' ')}: " + "; ".join(map(str, items)))
    else:
        out.append("None fired.")
    out += ["", "## Verification", ""]
    if v:
        status = "passed" if v.get("ok") else "**FAILED**"
        out.append(f"Fused vs {v.get('reference', 'unfused')} on random inputs: {status} "
                   f"(max abs err {v.get('max_abs_err')}, max rel err {v.get('max_rel_err')}).")
        if v.get("tolerance_reason"):
            out.append(f"Tolerance: {v['tolerance_reason']}.")
        if v.get("instance"):
            values = ", ".join(f"{k} = {x}" for k, x in v["instance"].items())
            given = ", ".join(f"{k} = {x}" for k, x in (v.get("instead_of") or {}).items())
            why = (f"The given sizes ({given}) exceed the run budget" if given else
                   "The sizes are symbolic")
            out.append(f"{why}: verified at the small instance {values} "
                       "(chosen so that every launch runs on a non-empty, uniform NDRange "
                       "within the program's constraints). The fused code is the one "
                       "generated for symbolic sizes, not re-generated for the instance.")
    else:
        out.append("Not run (use `--verify`).")
    if result.tuning is not None:
        tuning = result.tuning
        out += ["", "## Autotuning", ""]
        source = "cached measurement" if tuning.cached else "measured now"
        out.append(f"Chosen variant: **{tuning.variant}** ({source}, median {tuning.metric} "
                   f"time over repeats; * marks the choice):")
        out += ["", "```", tuning.table_text(), "```"]
    if result.coarsening is not None:
        out += ["", "## Coarsening of the fused kernels", ""]
        for lt in result.coarsening.launches:
            wd = lt.work_dim
            sp = f", {lt.speedup:.2f}x" if lt.speedup else ""
            out.append(f"- launch {lt.launch} `{lt.kernel}`: thread {list(lt.chosen.thread[:wd])}, "
                       f"block {list(lt.chosen.block[:wd])}{sp} ({lt.reason or 'original kept'})")
        out.append("")
        out.append("The coarsened program is in `coarsened.cl` (variants in `coarsening.json`); "
                   "`fused.cl` stays the uncoarsened fused program.")
    return "\n".join(out) + "\n"


def _explained(note: str, starts: dict[int, str]) -> str:
    """A planning note with its reason (``starts a group`` -> ``starts a group: why``)."""
    m = re.match(r"^L(\d+) \(.*\): starts a group$", note)
    if m and int(m.group(1)) in starts:
        return f"{note}: {starts[int(m.group(1))]}"
    return note


def _fmt_size(size: Any) -> str:
    if size is None:
        return "-"
    return "(" + ", ".join(str(s) for s in size) + ")"


def summary_row(name: str, result: Optional[FuseResult], error: Optional[str] = None
                ) -> list[str]:
    """One row of the ``polyfuse fuse`` summary table."""
    if result is None:
        return [name, "-", "-", "-", f"FAILED: {error}"]
    v = result.verified
    verified = "-" if v is None else ("ok" if v.get("ok") else "MISMATCH")
    err = "-" if v is None else f"{v.get('max_abs_err', 0):.2e}"
    return [name, readable(result.plan.launches_before), readable(result.fused.launches_after),
            err,
            verified]


__all__ = ["FuseResult", "PolyfuseError", "fuse_program", "plan_json", "report_markdown",
           "summary_row", "write_outputs"]
