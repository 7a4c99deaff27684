"""The whole fusion pipeline in one call: UAR → plan → fused code → (verify).

Each stage returns its own record and leaves the earlier ones as they were: the
:class:`~polyfuse.fusion.FusionPlan` (planning decisions), the
:class:`~polyfuse.codegen.FusedProgram` (kernels, launched NDRanges, optimizations) and the
verification summary of :class:`FuseResult`; :mod:`polyfuse.report` renders ``plan.json``,
``report.md`` and the other files from them.

Used by ``polyfuse fuse``, by ``schedules/regenerate.py`` and by research scripts::

    >>> import polyfuse
    >>> from polyfuse.pipeline import fuse_program
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Union

from polyfuse.codegen import FusedProgram, generate
from polyfuse.fusion import FusionPlan, plan_fusion
from polyfuse.fusion.certify import certify
from polyfuse.program import REFERENCE_TARGET, PolyfuseError, Program, Target
from polyfuse.uar import UAR, build_uar

if TYPE_CHECKING:  # imported where they run (they load pyopencl)
    from polyfuse.coarsen_tune import CoarsenReport
    from polyfuse.frontend.onnx_nodes import NodeOutcome
    from polyfuse.runtime.verify import Verification
    from polyfuse.tune import TuneResult

Progress = Optional[Callable[[str], None]]


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
    #: polyfuse.coarsen_tune.CoarsenReport; written as coarsened.cl + coarsening.json
    coarsening: Optional[CoarsenReport] = None

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
    uar = uar or build_uar(program)
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
                 device: Any = None, build: bool = True, progress: Progress = None,
                 coarsen: Optional[bool] = None) -> FuseResult:
    """Plan, generate and optionally verify (fused vs unfused on random inputs) or autotune.

    With ``tune`` (or ``coarsen=True``) the fused kernels are then coarsened, factors chosen by
    timing (:func:`polyfuse.coarsen_tune.tune_coarsening`): fuse first, then coarsen.
    """
    from polyfuse.c.cpp import RECURSION_LIMIT, recursion_limit

    with recursion_limit(RECURSION_LIMIT):  # kernels' syntax trees are copied and walked
        return _fuse_program(program, params=params, orchestration=orchestration,
                             verify=verify, tune=tune, device=device, build=build,
                             progress=progress, coarsen=coarsen)


def _fuse_program(program: Program, *, params: Optional[dict[str, int]], orchestration: str,
                  verify: bool, tune: bool, device: Any, build: bool, progress: Progress,
                  coarsen: Optional[bool]) -> FuseResult:
    say = progress or (lambda _msg: None)
    too_big: dict[str, int] = {}  # given sizes beyond the run budget, verified scaled down
    if verify:
        from polyfuse.runtime.budget import check_run_budget

        try:
            check_run_budget(program, params, runs=2, what="verification")  # before planning
        except PolyfuseError as err:
            # the plan and the fused code are made for symbolic sizes: when the values beyond
            # the budget are parameters, a small instance verifies the same code
            too_big = {k: v for k, v in (params or {}).items() if k in program.params}
            if not too_big:
                raise
            say(f"note: {err.message}; verifying a small instance instead")
    say("building the UAR")
    uar = build_uar(program)
    tuning = None
    if tune:
        from polyfuse.tune import autotune

        say("autotuning orchestration variants")
        tuning = autotune(program, params=params, device=device, progress=progress,
                          variants=TUNE_VARIANTS, uar=uar)
        plan, fused = tuning.plan, tuning.fused
    else:
        say("planning fusion")
        target = _target(device, build)
        plan = plan_fusion(uar, orchestration=orchestration, target=target)
        say("planning: certifying every fused group (isl checks)")
        plan = certify(plan)
        say(f"generating {len(plan.groups)} fused kernel(s)")
        if build:
            from polyfuse.runtime.build import build_fused

            fused = generate(plan, target=target)
            build_fused(fused, device)
        else:
            fused = generate(plan)
    coarsening = None
    if coarsen if coarsen is not None else tune:
        from polyfuse.coarsen_tune import fused_candidates, tune_coarsening

        say("coarsening the fused kernels (factors chosen by timing)")
        try:
            coarsening = tune_coarsening(fused.program, params=params, device=device,
                                         factors=fused_candidates, progress=progress,
                                         time_whole=False)
        except PolyfuseError as err:
            say(f"coarsening not applied: {err}")
    verification = verified = None
    if verify:
        from polyfuse.runtime import verify_programs
        from polyfuse.runtime.budget import small_instance

        # symbolic sizes: the plan and the fused code hold for every value, so a small
        # instance of the same fused code is verified (the values are in the report)
        kept = {k: v for k, v in (params or {}).items() if k not in too_big}
        instance = small_instance(program, kept) if program.launches else {}
        at = dict(kept, **instance)
        say("verifying fused against unfused on random inputs" + (
            " at " + ", ".join(f"{k}={v}" for k, v in instance.items()) if instance else ""))
        verification = verify_programs(program, fused.program, params=at,
                                       buffers=list(fused.compared_buffers), device=device)
        verified = dict(verification.to_dict(), device=device_name(device))
        racing = [r.describe() for r in uar.instantiation.races]
        if racing:
            verified["races"] = racing
        if instance:
            verified["instance"] = instance
        if too_big:
            verified["instead_of"] = too_big
    return FuseResult(program=program, uar=uar, plan=plan, fused=fused,
                      verification=verification, verified=verified, tuning=tuning,
                      coarsening=coarsening)


def device_name(device: Any) -> str:
    """The device a run used, as ``plan.json``'s ``verified.device`` names it (which one the
    default rule picked is otherwise invisible in the results)."""
    from polyfuse.runtime.device import device_limits

    lim = device_limits(device)
    return f"{lim.name} ({lim.platform})"


def _target(device: Any, build: bool) -> Target:
    """The device's limits for planning (the reference target when no device is used)."""
    if build is False or device is False:
        return REFERENCE_TARGET
    from polyfuse.runtime.device import device_target

    return device_target(device)


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

    warnings.warn(f"polyfuse.pipeline.{name} moved to polyfuse.report.{name}",
                  DeprecationWarning, stacklevel=2)
    return getattr(report, name)


__all__ = ["FuseResult", "PolyfuseError", "fuse_program"]
