"""Wavefront launch fusion: one launch per wavefront step of a (layer x time) recurrence.

Global fusion (:func:`polyfuse.fusion.global_.wavefront_schedules`) proves with isl that every
loop-carried dependence of a group in a nest of two host loops ``l`` (outer) and ``t`` (inner)
crosses to a later wavefront step ``l + t``: the group's launches on one anti-diagonal are
independent.  Code generation then runs the group along its wavefront:

* the *wave kernel* holds ``slots`` copies of the group's kernel side by side (horizontal
  orchestration over the outer loop): copy ``j`` runs on work-groups
  ``[j * groups0, (j + 1) * groups0)`` of dimension 0, keeping its work-groups and local ids,
  with its own arguments and an ``active`` flag (a step where ``t = w - l`` is outside its
  range runs nothing in that copy);
* the host loop nest becomes one loop over the steps ``w``; slot ``j`` (``l = lower + j``) takes
  the arguments of iteration ``(l, t = w - l)``, ``t`` clamped into range when inactive.

So ``L x T x k`` launches become ``(L + T - 1)`` launches of one fused kernel.  What the
transformation cannot express (a computed work dimension, buffers whose sub-buffer depends on
the loop iterators, non-constant outer bounds) keeps the group per iteration, with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Optional

import islpy as isl
import sympy

from polyfuse.core.program import ArgBinding, HostLoop, Launch, PolyfuseError, Program
from polyfuse.fusion.decisions import WavefrontSchedule

#: iterator of the wavefront-step loop in the fused program
STEP_ITERATOR = "pf_w"

_SIG = re.compile(r"__kernel\s+void\s+(\w+)\s*\((.*?)\)\s*\{", re.S)


class WavefrontError(PolyfuseError):
    """The group cannot run along its wavefront (the reason is reported, nothing is refused)."""


@dataclass(frozen=True)
class Wavefront:
    """A plan group run along its wavefront: one launch of ``slots`` copies per step."""

    group: int
    kernel: str  # name of the wave kernel
    step_kernel: str  # the group's kernel for one host-loop iteration
    outer: str  # host-loop iterators of the nest
    inner: str
    slot: str  # the one whose value picks the copy: the loop with constant bounds (the layers)
    lower0: int  # lower bound of the slot loop
    slots: int
    groups0: int  # work-groups of one copy in dimension 0
    local0: int
    #: the launch of ``step_kernel`` for one iteration (its arguments as host expressions)
    launch: Launch


def wave_kernel(text: str, name: str, slots: int, groups0: int, local0: int) -> str:
    """OpenCL source of one wavefront step: ``slots`` copies of the kernel ``text`` side by side.

    Copy ``j`` runs on work-groups ``[j * groups0, (j + 1) * groups0)`` of dimension 0 with its
    own arguments (renamed ``s<j>_``) and its own active flag; work-item functions of dimension
    0 are shifted so each copy sees its original NDRange.
    """
    m = _SIG.search(text)
    if m is None:
        raise WavefrontError(f"cannot read the signature of kernel {name}")
    params = [p.strip() for p in m.group(2).split(",") if p.strip()]
    names = [re.findall(r"\w+", p)[-1] for p in params]
    body = text[m.end() - 1:].rstrip()
    bad = re.search(r"get_(?:global_id|group_id|num_groups|global_size|global_offset)"
                    r"\s*\(\s*(?![012]\s*\))", body)
    if bad or "get_global_offset" in body:
        raise WavefrontError("a work-item function of a computed dimension cannot be shifted "
                             "for the wavefront launch")
    decls, branches = [], []
    for j in range(slots):
        b = body
        for nm in names:
            b = re.sub(rf"\b{nm}\b", f"s{j}_{nm}", b)
        b = re.sub(r"get_group_id\s*\(\s*0\s*\)", f"(get_group_id(0) - {j * groups0})", b)
        b = re.sub(r"get_global_id\s*\(\s*0\s*\)",
                   f"(get_global_id(0) - {j * groups0 * local0})", b)
        b = re.sub(r"get_num_groups\s*\(\s*0\s*\)", f"((size_t){groups0})", b)
        b = re.sub(r"get_global_size\s*\(\s*0\s*\)", f"((size_t){groups0 * local0})", b)
        decls += [re.sub(rf"\b{nm}\b", f"s{j}_{nm}", p) for p, nm in zip(params, names)]
        branches.append(f"  {'else ' if j else ''}if (pf_slot == {j} && pf_active{j})\n"
                        + "\n".join("  " + ln for ln in b.splitlines()))
    decls += [f"const int pf_active{j}" for j in range(slots)]
    sig = ",\n        ".join(decls)
    return (f"\n/* wavefront step: {slots} copies of {m.group(1)} side by side (polyfuse) */\n"
            f"__kernel void {name}({sig})\n{{\n"
            f"  const int pf_slot = (int)(get_group_id(0) / {groups0});\n"
            + "\n".join(branches) + "\n}\n")


def _int(e: Any, what: str) -> int:
    v = sympy.sympify(e)
    if not v.is_Integer:
        raise WavefrontError(f"{what} ({v}) is not a constant")
    return int(v)


def plan_wavefront(uar: Any, group: Any, step: Launch, text: str) -> tuple[Wavefront, str]:
    """The wavefront of plan ``group`` whose per-iteration launch is ``step`` (kernel ``text``)
    and the wave kernel's source; raises :class:`WavefrontError` when it cannot run so.  The
    legality is proved again with isl on the program's UAR (never taken from the plan)."""
    from polyfuse.fusion.global_ import wavefront_proof

    if group.schedule is None or not any(isinstance(n, WavefrontSchedule) for n in group.notes):
        raise WavefrontError("no wavefront schedule")
    if uar is None:
        raise WavefrontError("the plan has no UAR to prove the wavefront on")
    why = wavefront_proof(uar, group.members)
    if why is not None:
        raise WavefrontError(why)
    if len(step.loops) != 2:
        raise WavefrontError("only a nest of two host loops runs along its wavefront")
    outer, inner = step.loops
    try:
        sched = isl.Map(group.schedule)
        tup = sched.get_tuple_name(isl.dim_type.in_)
        want = isl.Map(f"{{ {tup}[a, b] -> [a + b, b] }}").align_params(sched.get_space())
        same = sched.dim(isl.dim_type.in_) == 2 and sched.is_equal(want)
    except isl.Error:
        same = False
    if not same:
        raise WavefrontError(f"the group's schedule {group.schedule} is not the proved "
                             "wavefront (outer + inner, inner)")
    program: Program = uar.program
    its = {sympy.Symbol(outer.iterator), sympy.Symbol(inner.iterator)}
    if outer.step != 1 or inner.step != 1:
        raise WavefrontError("the host loops must have unit steps")
    if (sympy.sympify(inner.lower).free_symbols | sympy.sympify(inner.upper).free_symbols) & its:
        raise WavefrontError("the inner loop's bounds depend on the outer iterator")
    # the copies side by side run the iterations of the loop with constant bounds (the layers,
    # outer or inner); the other loop (time) becomes the steps
    bounded = [lp for lp in (outer, inner) if sympy.sympify(lp.lower).is_Integer
               and sympy.sympify(lp.upper).is_Integer]
    if not bounded:
        raise WavefrontError("neither host loop has constant bounds (pass --args)")
    slot = min(bounded, key=lambda lp: int(lp.upper) - int(lp.lower))
    lo0, hi0 = int(slot.lower), int(slot.upper)
    if step.local_size is None:
        raise WavefrontError("the fused launch has no local size")
    gs0 = _int(step.global_size[0], "the global size")
    ls0 = _int(step.local_size[0], "the local size")
    if ls0 <= 0 or gs0 % ls0 or hi0 - lo0 < 2:
        raise WavefrontError("needs whole work-groups and at least two layers")
    for x in (*step.global_size, *step.local_size):
        if sympy.sympify(x).free_symbols & its:
            raise WavefrontError("the NDRange depends on the host-loop iterators")
    for b in step.args:
        if b.kind != "buffer" or b.buffer is None:
            continue
        name: Optional[str] = b.buffer
        while name is not None:
            buf = program.buffers[name]
            free = set()
            for e in (buf.origin, buf.size):
                if e is not None:
                    free |= sympy.sympify(e).free_symbols
            if free & its:
                raise WavefrontError(f"buffer {name} depends on the host-loop iterators")
            name = buf.parent
    wname = f"pf_wave_g{group.id}"
    wf = Wavefront(group=group.id, kernel=wname, step_kernel=step.kernel,
                   outer=outer.iterator, inner=inner.iterator, slot=slot.iterator, lower0=lo0,
                   slots=hi0 - lo0,
                   groups0=gs0 // ls0, local0=ls0, launch=step)
    return wf, wave_kernel(text, wname, wf.slots, wf.groups0, wf.local0)


def wave_launch(wf: Wavefront) -> Launch:
    """The fused program's launch of one wavefront step (inside the loop over the steps)."""
    step = wf.launch
    slot, other = step.loops if step.loops[0].iterator == wf.slot else step.loops[::-1]
    w = sympy.Symbol(STEP_ITERATOR)
    lo1, hi1 = sympy.sympify(other.lower), sympy.sympify(other.upper)
    args: list[ArgBinding] = []
    n = len(step.args)
    actives = []
    for j in range(wf.slots):
        layer = sympy.Integer(wf.lower0 + j)
        t = w - layer
        sub = {sympy.Symbol(slot.iterator): layer,
               sympy.Symbol(other.iterator): sympy.Max(lo1, sympy.Min(hi1 - 1, t))}
        for b in step.args:
            args.append(replace(
                b, index=j * n + b.index,
                value=None if b.value is None else sympy.sympify(b.value).xreplace(sub),
                local_bytes=None if b.local_bytes is None
                else sympy.sympify(b.local_bytes).xreplace(sub)))
        actives.append(ArgBinding(index=wf.slots * n + j, kind="scalar",
                                  value=sympy.Max(0, sympy.Min(1, t - lo1 + 1, hi1 - t))))
    loop = HostLoop(STEP_ITERATOR, lo1 + wf.lower0, hi1 + wf.lower0 + wf.slots - 1, 1,
                    step.loops[0].loc)
    gs = (sympy.Integer(wf.slots * wf.groups0 * wf.local0), *step.global_size[1:])
    return replace(step, kernel=wf.kernel, global_size=gs, args=tuple(args + actives),
                   loops=(loop,))


__all__ = ["STEP_ITERATOR", "Wavefront", "WavefrontError", "plan_wavefront", "wave_kernel",
           "wave_launch"]
