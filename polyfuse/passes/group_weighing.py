"""Never slower by choice: every fused group weighed against its launches run apart.

Fusion removes launches and round trips through memory, but a fused kernel can still be slower
than its parts: an epilogue that costs a product its register blocking, a reduction's barriers
inside a product, a horizontal group whose work-items wait for the longest fragment.  The plan
cannot see that.  This pass, after code generation and before the build, weighs each group of
several launches: ``F``, the seconds of its fused launch, against ``A``, the summed seconds of
its members run apart (one execution, every instance).

1. **The model decides** (:mod:`polyfuse.perf.model`, counts exact from barvinok, with the
   device's calibration or, on a CPU without one, the shipped reference):
   ``F <= A / MODEL_MARGIN``: kept fused; ``F >= A * MODEL_MARGIN``: split.
2. **Timing confirms when close.**  Between the two, a group whose stake ``|F - A|`` is below
   :data:`STAKE_FLOOR_S` follows the model's direction (kept fused where
   ``F <= A * TIMING_MARGIN``, else split:
   too little to measure, and the model's sign is the better bet than fusing regardless --
   the bundled tiled BERT layers' product + LayerNorm groups, predicted 1.2-1.35x slower
   under the floor, measured 1.44-1.9x slower fused).  The others are timed: the unfused and
   the fused program run alternately (profiling events per launch, medians), and a group is
   split when its fused launch is measured more than :data:`TIMING_MARGIN` slower than its
   members; where timing is off or over its budget they too follow the model's direction.
   Predicted or measured, a difference within :data:`TIMING_MARGIN` keeps the plan's fused
   group: neither the model nor a measurement resolves it, and a verdict on its sign would
   follow the calibration's noise (the QKV example: 0.517 ms fused against 0.516 ms apart
   under one quick calibration, 0.503 against 0.508 under the shipped one).
   Groups with the same kernels (the layers of a model) are timed once, in the same runs.
3. A group the model cannot predict (a count it cannot bound) is kept fused, with the reason.

A split goes through :func:`polyfuse.fusion.certify.split_groups` (``Refused.SLOWER``: always
legal, its docstring says why) and the plan is generated again.  The record
(:class:`GroupWeighing`) keeps every group's figures and verdict for ``report.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from polyfuse.core.program import PolyfuseError, Program
from polyfuse.passes.compilation import Compilation, Stage

if TYPE_CHECKING:
    from polyfuse.perf.model import Calibration

#: the model's margin on the ratio of two forms of the same computation: outside it the model
#: decides alone (its absolute errors cancel in the ratio: both sides run the same products)
MODEL_MARGIN = 1.5
#: a group whose predicted gain or loss is below this many seconds per execution is not timed
#: (a measurement could not resolve it): the model's direction decides
STAKE_FLOOR_S = 100e-6
#: a group measured or predicted slower than its members apart by more than this factor is
#: split; within it the fused group stands
TIMING_MARGIN = 1.05
#: measured runs of each program (medians per launch)
TIMING_RUNS = 5
#: the timing is skipped when one unfused execution is predicted to take longer than this
TIMING_BUDGET_S = 2.0


@dataclass(frozen=True)
class GroupVerdict:
    """One fused group weighed: its figures (seconds per execution) and what was kept."""

    #: the group's members (launch ids of the unfused program) and its fused kernel
    members: tuple[int, ...]
    kernel: str
    predicted_fused_s: float
    predicted_apart_s: float
    measured_fused_s: Optional[float] = None
    measured_apart_s: Optional[float] = None
    #: "model", "timing", "stake" (too small to time) or "no prediction"
    decided_by: str = "model"
    fused: bool = True

    @property
    def why(self) -> str:
        """The verdict in words, with its figures (``report.md``, the split's reason)."""
        pred = (f"model: fused {_ms(self.predicted_fused_s)} vs apart "
                f"{_ms(self.predicted_apart_s)}")
        if self.decided_by == "no prediction":
            return "kept fused: the model cannot predict it"
        if self.decided_by == "timing":
            return (f"{'kept fused' if self.fused else 'split'} by timing: fused "
                    f"{_ms(self.measured_fused_s)} vs apart {_ms(self.measured_apart_s)} "
                    f"({pred})")
        verdict = f"{'kept fused' if self.fused else 'split'} by the model's direction"
        if self.fused and self.predicted_fused_s > self.predicted_apart_s:
            verdict = f"kept fused: within the {TIMING_MARGIN - 1:.0%} the model does not resolve"
        if self.decided_by == "stake":
            return f"{verdict}; the difference is under {STAKE_FLOOR_S * 1e6:g} us, too " \
                   f"little to time ({pred})"
        return f"{verdict} ({pred})"

    def to_dict(self) -> dict[str, Any]:
        return {"members": list(self.members), "kernel": self.kernel,
                "predicted_fused_s": self.predicted_fused_s,
                "predicted_apart_s": self.predicted_apart_s,
                "measured_fused_s": self.measured_fused_s,
                "measured_apart_s": self.measured_apart_s, "decided_by": self.decided_by,
                "fused": self.fused, "why": self.why}


@dataclass(frozen=True)
class GroupWeighing:
    """What the pass weighed: the calibration that predicted, every group's verdict, and why
    nothing was weighed when that is so."""

    calibration: str
    verdicts: tuple[GroupVerdict, ...] = ()
    #: why the groups were not weighed (no calibration, counts that fail), else ""
    skipped: str = ""
    #: why close groups were not timed (a program too long to run), else ""
    untimed: str = ""

    @property
    def split(self) -> tuple[GroupVerdict, ...]:
        return tuple(v for v in self.verdicts if not v.fused)

    def to_dict(self) -> dict[str, Any]:
        return {"calibration": self.calibration, "skipped": self.skipped,
                "untimed": self.untimed, "groups": [v.to_dict() for v in self.verdicts]}


def _ms(s: Optional[float]) -> str:
    return "-" if s is None else f"{s * 1e3:.3g} ms"


def _launch_seconds(program: Program, cal: Calibration, params: Mapping[str, int]
                    ) -> dict[int, float]:
    """The model's seconds of every launch of ``program`` (all its instances)."""
    from polyfuse.perf.launches import predict_program

    return {lp.launch: lp.predicted_s * lp.count
            for lp in predict_program(program, cal, params=params)}


def _fused_launches(c: Compilation) -> dict[int, list[int]]:
    """Plan group id -> the fused program's launches of its kernel."""
    assert c.fused is not None
    group_of = {k.kernel: k.group for k in c.fused.groups}
    out: dict[int, list[int]] = {}
    for launch in c.fused.program.launches:
        if launch.kernel in group_of:
            out.setdefault(group_of[launch.kernel], []).append(launch.id)
    return out


def _signature(c: Compilation, gid: int) -> tuple[Any, ...]:
    """Groups with the same signature run the same kernels (a model's repeated layers): the
    member kernels' and the fused kernel's bodies, without their names."""
    assert c.program is not None and c.fused is not None and c.plan is not None

    def text(program: Program, launch_id: int) -> tuple[str, str, str]:
        launch = next(op for op in program.launches if op.id == launch_id)
        kernel = program.kernels[launch.kernel]
        return (kernel.source.replace(kernel.name, ""), str(launch.global_size),
                str(launch.local_size))

    group = c.plan.groups[gid]
    fused = c.fused.program
    return (tuple(text(c.program, m) for m in group.members),
            tuple(text(fused, lid) for lid in _fused_launches(c).get(gid, [])))


def weigh(c: Compilation, *, timing: bool = True) -> GroupWeighing:
    """Every multi-launch group of ``c`` weighed (module docstring); ``timing=False`` lets the
    model decide alone (close groups stay fused)."""
    from polyfuse.perf.launches import ranking_calibration

    assert c.program is not None and c.fused is not None and c.plan is not None
    groups = [g for g in c.plan.groups if len(g.members) > 1]
    cal, note = ranking_calibration(c.options.device, c.target.is_cpu)
    if cal is None:
        return GroupWeighing("", skipped=note)
    label = note or f"the device's own ({cal.device})"
    params = c.params
    try:
        apart = _launch_seconds(c.program, cal, params)
        fused = _launch_seconds(c.fused.program, cal, params)
    except (PolyfuseError, TypeError, ValueError, ZeroDivisionError) as err:
        return GroupWeighing(label, skipped=f"the model cannot count the program "
                                            f"({str(err)[:160]})")
    launches = _fused_launches(c)
    verdicts: dict[int, GroupVerdict] = {}
    close: list[int] = []
    for g in groups:
        kernel = c.fused.group(g.id).kernel
        ids = launches.get(g.id, [])
        f = sum(fused.get(lid, math.nan) for lid in ids) if ids else math.nan
        a = sum(apart.get(m, math.nan) for m in g.members)
        if not (math.isfinite(f) and math.isfinite(a)) or f <= 0 or a <= 0:
            verdicts[g.id] = GroupVerdict(g.members, kernel, f, a, decided_by="no prediction")
        elif f <= a / MODEL_MARGIN or f >= a * MODEL_MARGIN:
            verdicts[g.id] = GroupVerdict(g.members, kernel, f, a, fused=f < a)
        elif abs(f - a) < STAKE_FLOOR_S:
            verdicts[g.id] = GroupVerdict(g.members, kernel, f, a, decided_by="stake",
                                          fused=f <= a * TIMING_MARGIN)
        else:  # the model's direction unless timing confirms otherwise
            verdicts[g.id] = GroupVerdict(g.members, kernel, f, a,
                                          fused=f <= a * TIMING_MARGIN)
            close.append(g.id)
    untimed = ""
    if close:
        total = sum(apart.values())
        if not timing:
            untimed = "timing is off"
        elif total > TIMING_BUDGET_S:
            untimed = (f"one unfused run is predicted at {total:.1f} s, over the "
                       f"{TIMING_BUDGET_S:g} s timing budget")
        else:
            untimed = _confirm(c, close, launches, verdicts)
    order = [g.id for g in groups]
    return GroupWeighing(label, tuple(verdicts[i] for i in order), untimed=untimed)


def _confirm(c: Compilation, close: Sequence[int], launches: Mapping[int, list[int]],
             verdicts: dict[int, GroupVerdict]) -> str:
    """Time the close groups (into ``verdicts``): the unfused and the fused program, each
    checked in a worker first, then measured per launch
    (:func:`polyfuse.perf.launches.measure_launches`: medians; on a device that runs kernels in
    the calling thread, its CPU time, which other jobs' load does not inflate); "" or why
    they were not timed."""
    import dataclasses

    from polyfuse.perf.launches import LaunchPrediction, measure_launches

    assert c.program is not None and c.fused is not None and c.plan is not None
    c.say(Stage.GENERATE, f"timing {len(close)} fused group(s) the model cannot rank against "
                          "their launches apart")
    measured: list[dict[int, float]] = []
    try:
        for program in (c.program, c.fused.program):
            blank = [LaunchPrediction(op.id, op.kernel, 1, {}, 0.0) for op in program.launches]
            measured.append({lp.launch: lp.measured_s for lp in measure_launches(
                program, blank, params=c.params, device=c.options.device, repeat=TIMING_RUNS)
                if lp.measured_s is not None})
    except PolyfuseError as err:
        return f"the programs cannot be timed here ({str(err)[:160]})"
    apart_s, fused_s = measured
    # groups with the same kernels share the verdict of their measured mean
    by_signature: dict[tuple[Any, ...], list[int]] = {}
    for gid in close:
        by_signature.setdefault(_signature(c, gid), []).append(gid)
    for same in by_signature.values():
        f = [sum(fused_s.get(lid, 0.0) for lid in launches[gid]) for gid in same]
        a = [sum(apart_s.get(m, 0.0) for m in c.plan.groups[gid].members) for gid in same]
        keep = sum(f) <= sum(a) * TIMING_MARGIN
        for gid, fi, ai in zip(same, f, a):
            verdicts[gid] = dataclasses.replace(verdicts[gid], measured_fused_s=fi,
                                                measured_apart_s=ai, decided_by="timing",
                                                fused=keep)
    return ""


def weigh_groups(c: Compilation) -> Compilation:
    """The weighing pass: with ``options.weigh`` and a program that is built, every fused group
    weighed; the groups found slower split and the plan generated again."""
    if not c.options.weigh or not c.options.build or c.weighing is not None or c.built:
        return c
    from polyfuse.codegen import generate_fused
    from polyfuse.fusion.certify import split_groups
    from polyfuse.fusion.decisions import Refused

    assert c.plan is not None and c.fused is not None
    if not any(len(g.members) > 1 for g in c.plan.groups):
        return c
    c.say(Stage.GENERATE, "weighing each fused group against its launches apart")
    weighing = weigh(c, timing=c.options.weigh_timing)
    slower = {g.id: [v.why] for g in c.plan.groups for v in weighing.split
              if v.members == g.members}
    if not slower:
        return c.replace(weighing=weighing)
    plan = split_groups(c.plan, slower, Refused.SLOWER)
    fused = generate_fused(plan, target=c.target)
    return c.replace(weighing=weighing, plan=fused.plan, fused=fused)


__all__ = ["MODEL_MARGIN", "STAKE_FLOOR_S", "TIMING_MARGIN", "GroupVerdict", "GroupWeighing",
           "weigh", "weigh_groups"]
