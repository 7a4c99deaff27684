"""One compilation as a frozen record, and the passes that fill it in, one stage each.

A :class:`Compilation` holds the :class:`~polyfuse.core.program.Program` (or the ONNX file it is
loaded from), the :class:`~polyfuse.core.program.Target` it is compiled for (device limits and the
kernel variant), the :class:`Options`, and each stage's record once that stage has run: the
:class:`~polyfuse.uar.UAR`, the certified :class:`~polyfuse.fusion.FusionPlan`, the
:class:`~polyfuse.codegen.FusedProgram`, the verification, the timings.  A pass is a function
``Compilation -> Compilation`` that fills in its stage when the options ask for it and it is not
filled in yet (so a record that arrives tuned, or from a cache, is not planned again).

Why one record: every application (``polyfuse fuse``, the batch, ``InferenceSession``, the
ONNX runner, the autotuner) runs the same passes (:data:`polyfuse.passes.pipeline.PASSES`) with
other options, instead of each sequencing ``plan_fusion -> certify -> generate -> build_fused``
itself; and the target travels in the record, so no stage asks a device for its limits.

Progress is reported as :class:`Event` records (a :class:`Stage` and a message), so a caller
that times stages reads the stage instead of parsing the message.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union

from polyfuse.core.program import PolyfuseError, Program, Target

if TYPE_CHECKING:  # the records of the stages, imported where they run
    from polyfuse.codegen import FusedProgram
    from polyfuse.frontend.onnx import OnnxModel
    from polyfuse.fusion import FusionPlan
    from polyfuse.runtime.device import DeviceSpec
    from polyfuse.runtime.verify import Verification
    from polyfuse.uar import UAR


class Stage(enum.Enum):
    """The stage a pass (and each of its progress events) belongs to."""

    LOAD = "load"
    UAR = "uar"
    TUNE = "tune"
    PLAN = "plan"
    CERTIFY = "certify"
    GENERATE = "generate"
    BUILD = "build"
    COARSEN = "coarsen"
    VERIFY = "verify"
    WRITE = "write"
    TIME = "time"


@dataclass(frozen=True)
class Event:
    """One progress report: the stage it comes from and what it says (``str(event)``)."""

    stage: Stage
    message: str

    def __str__(self) -> str:
        return self.message


Progress = Callable[[Event], None]


class Tuning(Protocol):
    """What the tuning pass records (:class:`polyfuse.passes.orchestration_tuning.TuneResult`, a
    layer above)."""

    variant: str
    plan: FusionPlan
    fused: FusedProgram


class Coarsening(Protocol):
    """What the coarsening pass records
    (:class:`polyfuse.passes.coarsening_tuning.CoarsenReport`)."""

    def to_dict(self) -> dict[str, Any]: ...


class Weighing(Protocol):
    """What the weighing pass records (:class:`polyfuse.passes.group_weighing.GroupWeighing`)."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Options:
    """What a compilation is asked to do (the passes read these; none is implicit)."""

    #: sizes and scalar values of the program (``--param``)
    params: Mapping[str, int] = field(default_factory=dict)
    #: orchestration of independent fragments (``plan_fusion``'s ``orchestration``)
    orchestration: str = "auto"
    #: build the fused program on the device (``False``: generate only, device-free)
    build: bool = True
    #: choose the orchestration by timing (:func:`polyfuse.passes.orchestration_tuning.autotune`)
    tune: bool = False
    #: coarsen the fused kernels, factors chosen by timing
    coarsen: bool = False
    #: verify fused against unfused (ONNX models: and against onnxruntime)
    verify: bool = False
    #: weigh every fused group against its launches apart and split the slower ones
    #: (:mod:`polyfuse.passes.group_weighing`; only for a program that is built)
    weigh: bool = True
    #: ... and time the groups the model cannot rank (off: the model decides alone)
    weigh_timing: bool = True
    #: time the unfused and the fused program (``repeat`` runs each)
    timing: bool = False
    repeat: int = 5
    #: seed of the random inputs of verification
    seed: int = 0
    #: the OpenCL device building, verifying and timing run on (None: the default rule)
    device: DeviceSpec = None
    #: the directory the write pass writes plan.json, fused.cl, report.md... into (None: none)
    out: Optional[str] = None
    #: how the fused host is preprocessed (``-I``, ``-D`` of the host program)
    host_include_dirs: tuple[str, ...] = ()
    host_defines: Mapping[str, Optional[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Timing:
    """Median kernel time of the unfused and the fused program, in milliseconds, and what was
    timed: the kernel form (empty: the compilation's own) and the runs of each program."""

    unfused_ms: float
    fused_ms: float
    form: str = ""
    runs: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Compilation:
    """One program (or ONNX file) compiled for one target: the stage records as produced."""

    target: Target
    options: Options = Options()
    program: Optional[Program] = None
    #: the ONNX file the load pass reads (when ``program`` is not given)
    source: Optional[str] = None
    model: Optional[OnnxModel] = None
    uar: Optional[UAR] = None
    tuning: Optional[Tuning] = None
    plan: Optional[FusionPlan] = None
    #: whether :attr:`plan` passed the certificate (groups that fail it are split)
    certified: bool = False
    fused: Optional[FusedProgram] = None
    #: whether :attr:`fused` is built on the device (a kernel that does not build fails)
    built: bool = False
    coarsening: Optional[Coarsening] = None
    #: every fused group weighed against its launches apart
    #: (:class:`polyfuse.passes.group_weighing.GroupWeighing`)
    weighing: Optional[Weighing] = None
    #: given sizes beyond the run budget: verification runs a small instance instead
    scaled_down: Optional[Mapping[str, int]] = None
    #: the check that decides whether the fused program is right (the failing one of several)
    verification: Optional[Verification] = None
    #: the verification summary ``plan.json`` writes as ``verified``
    verified: Optional[dict[str, Any]] = None
    timing: Optional[Timing] = None
    #: the files written (``plan``, ``source``, ``report``, ``host``...)
    written: Optional[Mapping[str, Any]] = None
    progress: Optional[Progress] = field(default=None, compare=False, repr=False)

    def say(self, stage: Stage, message: str) -> None:
        if self.progress is not None:
            self.progress(Event(stage, message))

    def replace(self, **changes: Any) -> Compilation:
        return dataclasses.replace(self, **changes)

    @property
    def params(self) -> dict[str, int]:
        return dict(self.options.params)


Pass = Callable[[Compilation], Compilation]


def run_passes(compilation: Compilation, passes: tuple[Pass, ...]) -> Compilation:
    """``compilation`` through ``passes`` in order."""
    for p in passes:
        compilation = p(compilation)
    return compilation


def stage_progress(progress: Optional[Callable[[str], None]], stage: Stage
                   ) -> Optional[Callable[[str], None]]:
    """A text callback (what the tuners report) turned into events of ``stage``."""
    if progress is None:
        return None
    return lambda message: progress(Event(stage, message))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------------
# The passes
# ----------------------------------------------------------------------------------------------


def load(c: Compilation) -> Compilation:
    """The ONNX file's program, its kernels laid out for the target (once per compilation)."""
    if c.program is not None:
        return c
    if c.source is None:
        raise PolyfuseError("nothing to compile: give a program or an ONNX file")
    from polyfuse.frontend.onnx import load_onnx_model

    c.say(Stage.LOAD, f"loading {c.source}")
    model = load_onnx_model(c.source, params=c.options.params, target=c.target)
    return c.replace(program=model.program, model=model)


def check_budget(c: Compilation) -> Compilation:
    """Before planning: verification must fit the run budget; when the given sizes are
    parameters beyond it, a small instance verifies the same (symbolic) fused code."""
    if not c.options.verify or c.scaled_down is not None or c.model is not None:
        return c
    from polyfuse.runtime.budget import check_run_budget

    assert c.program is not None
    try:
        check_run_budget(c.program, c.params, runs=2, what="verification")
        return c.replace(scaled_down={})
    except PolyfuseError as err:
        too_big = {k: v for k, v in c.params.items() if k in c.program.params}
        if not too_big:
            raise
        c.say(Stage.VERIFY, f"note: {err.message}; verifying a small instance instead")
        return c.replace(scaled_down=too_big)


def build_uar(c: Compilation) -> Compilation:
    if c.uar is not None:
        return c
    from polyfuse.uar import build_uar as build

    assert c.program is not None
    c.say(Stage.UAR, "building the UAR")
    return c.replace(uar=build(c.program))


def plan(c: Compilation) -> Compilation:
    if c.plan is not None:
        return c
    from polyfuse.fusion import plan_fusion

    assert c.uar is not None
    c.say(Stage.PLAN, "planning fusion")
    return c.replace(plan=plan_fusion(c.uar, orchestration=c.options.orchestration,
                                      target=c.target))


def certify(c: Compilation) -> Compilation:
    if c.certified:
        return c
    from polyfuse.fusion.certify import certify as check

    assert c.plan is not None
    c.say(Stage.CERTIFY, "planning: certifying every fused group (isl checks)")
    return c.replace(plan=check(c.plan), certified=True)


def generate(c: Compilation) -> Compilation:
    """The fused kernels of the certified plan; device limits are checked only for a program
    that is built (a device-free one is generated for the reference sizes unchecked)."""
    if c.fused is not None:
        return c
    from polyfuse.codegen import generate_fused as fuse

    assert c.plan is not None and c.certified
    c.say(Stage.GENERATE, f"generating {len(c.plan.groups)} fused kernel(s)")
    fused = fuse(c.plan, target=c.target) if c.options.build else fuse(c.plan)
    # the plan as generated: groups code generation could not produce are split, with why
    return c.replace(fused=fused, plan=fused.plan)


def build(c: Compilation) -> Compilation:
    if c.built or not c.options.build:
        return c
    from polyfuse.runtime.build import build_fused

    assert c.fused is not None
    build_fused(c.fused, c.options.device)
    return c.replace(built=True)


def verify(c: Compilation) -> Compilation:
    """Fused against unfused on random inputs; symbolic sizes are verified at a small instance
    of the same fused code (the values are in the summary)."""
    if not c.options.verify or c.verified is not None:
        return c
    from polyfuse.runtime import verify_programs
    from polyfuse.runtime.budget import small_instance

    assert c.program is not None and c.fused is not None and c.uar is not None
    too_big = dict(c.scaled_down or {})
    kept = {k: v for k, v in c.params.items() if k not in too_big}
    instance = small_instance(c.program, kept) if c.program.launches else {}
    at = dict(kept, **instance)
    c.say(Stage.VERIFY, "verifying fused against unfused on random inputs" + (
        " at " + ", ".join(f"{k}={v}" for k, v in instance.items()) if instance else ""))
    verification = verify_programs(c.program, c.fused.program, params=at,
                                   buffers=list(c.fused.compared_buffers),
                                   device=c.options.device)
    verified = dict(verification.to_dict(), device=device_name(c.options.device))
    racing = [r.describe() for r in c.uar.instantiation.races]
    if racing:
        verified["races"] = racing
    if instance:
        verified["instance"] = instance
    if too_big:
        verified["instead_of"] = too_big
    return c.replace(verification=verification, verified=verified)


def time_runs(c: Compilation) -> Compilation:
    """Median kernel time of the unfused and the fused program (``repeat`` runs each)."""
    if not c.options.timing or c.timing is not None:
        return c
    from polyfuse.runtime import time_program
    from polyfuse.runtime.budget import check_run_budget

    assert c.program is not None and c.fused is not None
    check_run_budget(c.program, c.params, runs=2, what="timing")
    c.say(Stage.TIME, f"timing unfused and fused ({c.options.repeat} repeats)")
    kw: dict[str, Any] = {"repeat": c.options.repeat, "device": c.options.device}
    unfused = time_program(c.program, **kw)
    fused = time_program(c.fused.program, **kw)
    return c.replace(timing=Timing(unfused.kernel_time * 1e3, fused.kernel_time * 1e3,
                                   runs=(len(unfused.kernel_samples),
                                         len(fused.kernel_samples))))


def device_name(device: Union[DeviceSpec, None]) -> str:
    """The device a run used, as ``plan.json``'s ``verified.device`` names it (which one the
    default rule picked is otherwise invisible in the results)."""
    from polyfuse.runtime.device import device_limits

    lim = device_limits(device)
    return f"{lim.name} ({lim.platform})"


__all__ = ["Coarsening", "Compilation", "Event", "Options", "Pass", "Progress", "Stage", "Timing",
           "Tuning", "Weighing", "build", "build_uar", "certify", "check_budget", "device_name",
           "generate", "load", "plan", "run_passes", "stage_progress", "time_runs", "verify"]
