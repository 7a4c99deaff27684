"""The whole fusion pipeline in one call: UAR → plan → fused code → (verify).

Each stage returns its own record and leaves the earlier ones as they were: the
:class:`~polyfuse.fusion.FusionPlan` (planning decisions), the
:class:`~polyfuse.codegen.FusedProgram` (kernels, launched NDRanges, optimizations) and the
verification summary of :class:`FuseResult`; :mod:`polyfuse.report` renders ``plan.json``,
``report.md`` and the other files from them.

Used by ``polyfuse fuse``, by ``schedules/regenerate.py`` and by research scripts::

    >>> import polyfuse
    >>> from polyfuse.passes.pipeline import fuse_program
    >>> from polyfuse.report import write_outputs
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
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union, cast

from polyfuse.codegen import FusedProgram
from polyfuse.core.program import REFERENCE_TARGET, PolyfuseError, Program, Target
from polyfuse.fusion import FusionPlan
from polyfuse.passes.compilation import (
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
from polyfuse.passes.compilation import device_name as compilation_device_name
from polyfuse.passes.group_weighing import GroupWeighing, weigh_groups
from polyfuse.uar import UAR
from polyfuse.uar import build_uar as uar_of

if TYPE_CHECKING:  # imported where they run (they load pyopencl)
    from polyfuse.frontend.onnx_nodes import NodeOutcome
    from polyfuse.passes.coarsening_tuning import CoarsenReport
    from polyfuse.passes.orchestration_tuning import TuneResult
    from polyfuse.runtime.device import DeviceSpec
    from polyfuse.runtime.verify import Verification

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
    #: where the launches came from, for the report (ONNX: node -> its launch, alias or fold)
    source_nodes: Optional[dict[str, NodeOutcome]] = None
    #: thread/block coarsening of the fused kernels (``fuse --tune``), a
    #: polyfuse.passes.coarsening_tuning.CoarsenReport; written as coarsened.cl + coarsening.json
    coarsening: Optional[CoarsenReport] = None
    #: every fused group weighed against its launches apart (a
    #: polyfuse.passes.group_weighing.GroupWeighing; None when nothing was weighed)
    weighing: Optional[GroupWeighing] = None
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
                 coarsen: Optional[bool] = None, weigh: bool = True) -> FuseResult:
    """Plan, generate and optionally verify (fused vs unfused on random inputs) or autotune:
    :data:`PASSES` over a :class:`~polyfuse.passes.compilation.Compilation` of ``program``.

    Planning and code generation read the limits of ``target`` (default: the device's when
    the fused program is built on ``device``, else the reference target).  With ``tune`` (or
    ``coarsen=True``) the fused kernels are then coarsened, factors chosen by timing
    (:func:`polyfuse.passes.coarsening_tuning.tune_coarsening`): fuse first, then coarsen.
    ``progress`` receives :class:`~polyfuse.passes.compilation.Event` records (``str(event)`` is the
    message).  ``weigh`` (a built program only): every fused group weighed against its launches
    apart, the slower split (:mod:`polyfuse.passes.group_weighing`).
    """
    if device is False:  # the old spelling of "no device"
        warnings.warn("fuse_program(device=False) is deprecated: give target=REFERENCE_TARGET "
                      "(or build=False)", DeprecationWarning, stacklevel=2)
        device, target = None, target or REFERENCE_TARGET
    options = Options(params=dict(params or {}), orchestration=orchestration, build=build,
                      tune=tune, coarsen=tune if coarsen is None else coarsen, verify=verify,
                      device=device, weigh=weigh)
    return result_of(compile_program(Compilation(
        target=target or target_of(device, build), options=options, program=program,
        progress=progress)))


def compile_program(compilation: Compilation, passes: tuple[Pass, ...] = ()) -> Compilation:
    """``compilation`` through ``passes`` (default :data:`PASSES`)."""
    from polyfuse.c.preprocessor import RECURSION_LIMIT, recursion_limit

    with recursion_limit(RECURSION_LIMIT):  # kernels' syntax trees are copied and walked
        return run_passes(compilation, passes or PASSES)


def result_of(c: Compilation) -> FuseResult:
    """The :class:`FuseResult` of a compilation that ran through generation."""
    assert c.program is not None and c.uar is not None and c.plan is not None \
        and c.fused is not None
    return FuseResult(program=c.program, uar=c.uar, plan=c.plan, fused=c.fused,
                      verification=c.verification, verified=c.verified,
                      tuning=cast(Optional["TuneResult"], c.tuning),
                      source_nodes=None if c.model is None else dict(c.model.outcomes),
                      coarsening=cast(Optional["CoarsenReport"], c.coarsening),
                      weighing=cast(Optional[GroupWeighing], c.weighing), compilation=c)


def target_of(device: DeviceSpec, build: bool = True) -> Target:
    """The device's limits for planning (the reference target when nothing is built): the one
    place an application turns its device into a :class:`~polyfuse.core.program.Target`."""
    if not build:
        return REFERENCE_TARGET
    from polyfuse.runtime.device import device_target

    return device_target(device)


def tune(c: Compilation) -> Compilation:
    """The tuning pass: with ``options.tune``, the orchestration chosen by timing
    (:func:`polyfuse.passes.orchestration_tuning.autotune`); it plans, certifies, generates and
    builds each variant with the passes of :mod:`polyfuse.passes.compilation`, so the record comes
    back built."""
    if not c.options.tune or c.tuning is not None:
        return c
    from polyfuse.passes.orchestration_tuning import autotune

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
    from polyfuse.passes.coarsening_tuning import fused_candidates, tune_coarsening

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
    from polyfuse.report.outputs import write_outputs  # the record handed to its renderer

    c.say(Stage.WRITE, f"writing {c.options.out}")
    paths = write_outputs(result_of(c), c.options.out,
                          host_include_dirs=c.options.host_include_dirs,
                          host_defines=dict(c.options.host_defines))
    return c.replace(written=paths)


#: The passes every application runs, in order; each fills in its stage when the options ask
#: for it (ONNX verification swaps :func:`~polyfuse.passes.compilation.verify` for
#: :func:`polyfuse.apps.onnx_run.verify_onnx`).
PASSES: tuple[Pass, ...] = (load, check_budget, build_uar, tune, plan, certify, generate,
                            weigh_groups, build, coarsen, verify, write, time_runs)


def device_name(device: DeviceSpec) -> str:
    """The device a run used (:func:`polyfuse.passes.compilation.device_name`)."""
    return compilation_device_name(device)


#: orchestration variants ``fuse --tune`` times (heterogeneous horizontal fusion only wins
#: when it is measured faster than leaving independent launches apart)
TUNE_VARIANTS = ("vertical", "horizontal", "hetero")


#: names that moved to :mod:`polyfuse.report` (docs/interfaces.md), kept here for one release
_MOVED = ("plan_json", "report_markdown", "summary_row", "write_outputs")


def __getattr__(name: str) -> Any:
    """The deprecated re-exports of :data:`_MOVED` (rendering lives in :mod:`polyfuse.report`)."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    from polyfuse import report

    warnings.warn(f"polyfuse.passes.pipeline.{name} moved to polyfuse.report.{name}",
                  DeprecationWarning, stacklevel=2)
    return getattr(report, name)


__all__ = ["FuseResult", "PolyfuseError", "fuse_program"]
