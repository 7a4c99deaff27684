"""The wording of planning and code generation decisions (``report.md``, ``plan.json``).

Every decision record of :mod:`polyfuse.fusion.decisions` and :mod:`polyfuse.codegen.decisions`
has one sentence here; the sentences are the ones the notes always had, so reports and plans
read as before while the records stay the data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from polyfuse.codegen.decisions import (
    CodeMotion,
    FragmentPartial,
    FragmentPlaced,
    Generated,
    KeptApart,
    KernelNote,
    NoWavefront,
    OptimizationsSkipped,
    WavefrontLaunch,
)
from polyfuse.fusion.decisions import (
    Apart,
    ApartReason,
    CertificateSplit,
    CommonConsumer,
    Decision,
    EdgeRef,
    GroupNote,
    GroupStart,
    HeteroPlacement,
    P1Merge,
    P1Rebuilt,
    P1Step,
    P3Merge,
    Refusal,
    Refused,
    Searched,
    StartCause,
    StartReason,
    WavefrontSchedule,
)
from polyfuse.fusion.exhaustive import SEARCHED


def _launches(ids: Sequence[int]) -> str:
    return ", ".join(f"L{m}" for m in ids)


def _bar(barrier: bool) -> str:
    return " (barrier before it)" if barrier else ""


def edge_text(e: EdgeRef) -> str:
    """``kind L<src>->L<dst> on array (width)``, with the witness a decision shows."""
    text = f"{e.kind} L{e.src}->L{e.dst} on {e.array} ({e.width}"
    if e.witness:
        text += f"; witness {e.witness}"
    return text + ")"


def _start(n: GroupStart) -> str:
    return f"L{n.launch} ({n.kernel}): starts a group"


def _p1(n: P1Merge) -> str:
    return (f"L{n.launch} ({n.kernel}) fused with {_launches(n.producers)} by P1, "
            f"{n.anchor.value}{_bar(n.barrier)}: " + "; ".join(edge_text(e) for e in n.edges))


def _p1_step(n: P1Step) -> str:
    return f"L{n.launch} ({n.kernel}) fused by P1, {n.anchor.value}{_bar(n.barrier)}"


def _p1_rebuilt(n: P1Rebuilt) -> str:
    return f"{_launches(n.members)} fused by P1, rebuilt anchored on each consumer"


def _common(n: CommonConsumer) -> str:
    return (f"L{n.launch} is a common consumer: its producers' groups are fused too "
            "(each re-indexed onto the consumer's work-items)")


def _p3(n: P3Merge) -> str:
    step = "" if n.step is None else f"same step {n.step}, "
    return (f"P3: {_launches(n.joined)} fused with {_launches(n.into)} ({n.mode}): {step}"
            "identical code, no dependence between them")


def _hetero(n: HeteroPlacement) -> str:
    return (f"heterogeneous horizontal fusion: {_launches(n.placed)} placed beside "
            f"{_launches(n.beside)} (independent: no dependence path; same step {n.step}; "
            "concatenated grids, a group-id branch per fragment)")


def _searched(n: Searched) -> str:
    return f"{SEARCHED}: {n.cost} launches where greedy planning gave {n.greedy}"


def _wavefront(n: WavefrontSchedule) -> str:
    how = f" in {n.steps} steps" if n.steps else ""
    return (f"wavefront schedule {n.front}{how}: every loop-carried dependence crosses to a "
            "later step, so the launches of one step are independent")


def _split(n: CertificateSplit) -> str:
    return (f"{n.refused.value}: group {list(n.members)} not fused "
            f"({'; '.join(n.problems)})")


def _fragment(n: FragmentPlaced) -> str:
    loc = f" ({n.loc})" if n.loc else ""
    return f"fragment {n.k}: launch #{n.launch} {n.kernel}{loc}"


def _partial(n: FragmentPartial) -> str:
    return (f"fragment {n.k}: some work-items of launch #{n.launch} are not run (outside the "
            "re-indexing map's range)")


def _kept_apart(n: KeptApart) -> str:
    return f"code motion: fragment {n.k} kept apart ({n.why})"


def _motion(n: CodeMotion) -> str:
    frags = ", ".join(str(k) for k in n.fragments)
    return (f"code motion: fragments {frags} share {n.barriers} barriers "
            f"({n.barriers + n.saved} -> {n.barriers})")


def _wave_launch(n: WavefrontLaunch) -> str:
    return (f"wavefront launch fusion: one launch of {n.slots} fragments per step {n.outer} + "
            f"{n.inner} (kernel {n.kernel})")


def _no_wave(n: NoWavefront) -> str:
    return f"{Generated.NO_WAVEFRONT.value}: {n.why}"


def _skipped(n: OptimizationsSkipped) -> str:
    return f"{Generated.SKIPPED.value}: {n.why}"


_WORDING: dict[Any, Callable[[Any], str]] = {
    Decision.START: _start, Decision.P1_MERGE: _p1, Decision.P1_STEP: _p1_step,
    Decision.P1_REBUILT: _p1_rebuilt, Decision.COMMON_CONSUMER: _common,
    Decision.P3_MERGE: _p3, Decision.HETERO: _hetero, Decision.SEARCHED: _searched,
    Decision.WAVEFRONT_SCHEDULE: _wavefront, Decision.CERTIFICATE_SPLIT: _split,
    Generated.FRAGMENT: _fragment, Generated.PARTIAL: _partial,
    Generated.KEPT_APART: _kept_apart, Generated.CODE_MOTION: _motion,
    Generated.WAVEFRONT: _wave_launch, Generated.NO_WAVEFRONT: _no_wave,
    Generated.SKIPPED: _skipped,
}


def note_text(note: GroupNote | KernelNote) -> str:
    """The sentence of a group's planning or code generation decision."""
    return _WORDING[note.kind](note)


def refusal_text(r: Refusal) -> str:
    """Why a merge was refused, in full (``plan.json``'s ``blocked[].reason``)."""
    if r.kind is Refused.GLOBAL:
        return f"{r.summary}: {r.detail}".rstrip(": ")
    if r.detail or r.kind is Refused.NO_REINDEXING:
        return f"{r.summary}: {r.detail}"
    return r.summary


def start_text(s: StartReason) -> str:
    """Why a launch starts a group (``report.md``'s planning decisions)."""
    if s.cause is StartCause.BLOCKED:
        assert s.edge is not None and s.refusal is not None
        why = refusal_text(s.refusal)
        return f"blocked by {edge_text(s.edge)}: {why}"
    if s.cause is StartCause.CROSS_LOOP:
        assert s.edge is not None
        return (f"different host-loop body: its dependences ({edge_text(s.edge)}) cross "
                "host-loop iterations, and only one loop body is fused")
    if s.cause in (StartCause.JOINED_LATER, StartCause.JOINED):
        head = ("independent (no dependence on an earlier launch in the same host-loop "
                "iteration), so P1 has nothing to merge it into; ")
        if s.cause is StartCause.JOINED_LATER:
            return head + (f"placed with {_launches(s.joined)} later (P3, heterogeneous "
                           "horizontal fusion or a common consumer)")
        return head + f"{_launches(s.joined)} joined its group"
    if not s.others:
        p3 = f"P3: no other group at launch step {s.step} (different step)"
    else:
        p3 = f"P3 at launch step {s.step}: " + "; ".join(
            f"{_launches(members)}: {verdict.value}" for members, verdict in s.others)
    return ("independent (no dependence on an earlier launch), so P1 has nothing to merge it "
            f"into; {p3}")


_APART = {
    Apart.PLACEMENT: "the fused launch would run at the later one's place: {}",
    Apart.NO_GRID: "no concatenated grid ({})",
    Apart.BREAKS: "the fused launch would break a dependence or barrier placement",
    Apart.NOT_IN_VARIANT: ("not fused in this variant: heterogeneous horizontal fusion "
                           "(orchestration 'hetero') is chosen only when measured faster "
                           "(--tune times it against leaving them apart)"),
}


def apart_text(a: ApartReason) -> str:
    """Why two independent groups were left apart."""
    if a.kind is Apart.INCOMPATIBLE:
        return a.detail
    return _APART[a.kind].format(a.detail)


__all__ = ["apart_text", "edge_text", "note_text", "refusal_text", "start_text"]
