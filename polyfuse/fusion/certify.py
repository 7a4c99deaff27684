"""Certify a plan before code generation: a group that fails the certificate is not emitted fused.

The planner builds every group from checked merges, but a bug in how a merge is recorded (a
dropped ``barrier_before``, a re-indexing written wrongly) would still reach code generation
and give wrong results.  :func:`certify` re-checks every multi-launch group of the finished plan
with :func:`polyfuse.fusion.local.group_problems` (isl, under the operation quota, memoized on
the canonical form so identical layers cost one check) and splits a group that fails, or whose
check hits the quota, back into single-launch groups.

Code generation splits the same way a multi-launch group it cannot produce (a guard that cannot
move below the fragment's barriers, a helper it cannot copy, a fused kernel the compiler
rejects), with its reason (:func:`split_groups`, ``Refused.CODEGEN``): a plan never merges what
cannot be generated.

Splitting is always legal: a group runs at the host position of its last member, so its
members, run apart, each run at their own host position, no later than in the group, and in
host order among themselves; every other group keeps its place.  Steps stay separated: the
split members take consecutive steps in host order and every later step moves up to make room.
The reason goes where refused merges are recorded: a note on each split member's group
(``report.md``'s planning decisions) and the reason of every edge between them that is now
blocked (``plan.json``'s ``blocked``, ``report.md``'s edges that blocked fusion).

Padded heterogeneous groups (:mod:`.hetero`) pass: the certificate accepts a fragment without
barriers whose work-items keep their local ids in a larger fused work-group (its padded
work-items run none of its code), by the predicate :mod:`.hetero` merges with.  Wavefront
groups are certified like any group (same-iteration legality of the fused kernel); their
wavefront order is proved again by code generation (``wavefront_proof``), and a split group
loses its wavefront schedule (its pieces run per host-loop iteration, in host order).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import sympy

from polyfuse.fusion.decisions import CertificateSplit, Refusal, Refused
from polyfuse.fusion.global_ import _count_value, _global_size, _named, _trip_count
from polyfuse.fusion.local import group_problems
from polyfuse.fusion.plan import BlockedFusion, FusedGroup, FusionPlan
from polyfuse.fusion.reindex import identity_frame, reindex_map

REFUSED = Refused.CERTIFICATE.value


def certify(plan: FusionPlan) -> FusionPlan:
    """``plan`` unchanged when every group passes the certificate; else the failing groups split
    into single launches, each with the reason (module docstring)."""
    refused = {g.id: probs for g in plan.groups if len(g.members) > 1
               if (probs := group_problems(plan.uar, g))}
    if not refused:
        return plan
    return split_groups(plan, refused, Refused.CERTIFICATE)


def split_groups(plan: FusionPlan, refused: Mapping[int, list[str]], by: Refused) -> FusionPlan:
    """``plan`` with the groups ``refused`` names (group id -> problems) split into single
    launches, each with the reason ``by`` gives (module docstring): the certificate's, or code
    generation's for a group it cannot produce."""
    uar = plan.uar
    pos = {op.id: k for k, op in enumerate(uar.program.ops)}
    pieces: list[tuple[int, int, FusedGroup]] = []  # (step, host position, group)
    why_of: dict[int, Refusal] = {}
    for g in plan.groups:
        if g.id not in refused:
            shift = sum(len(plan.groups[r].members) - 1 for r in refused
                        if plan.groups[r].step < g.step)
            pieces.append((g.step + shift, pos[g.members[0]], g))
            continue
        split = CertificateSplit(tuple(g.members), tuple(refused[g.id]), by)
        why = Refusal(by, by.value,
                      f"group {list(g.members)} not fused ({'; '.join(refused[g.id])})")
        base = g.step + sum(len(plan.groups[r].members) - 1 for r in refused
                            if plan.groups[r].step < g.step)
        for k, m in enumerate(sorted(g.members, key=pos.get)):
            why_of[m] = why
            frag = next(f for f in g.fragments if f.launch == m)
            alone = identity_frame(uar, m)
            pieces.append((base + k, pos[m], FusedGroup(
                id=-1, members=(m,), orchestration="single",
                fragments=(dataclasses.replace(frag, barrier_before=False, reindex=reindex_map(
                    _named(alone, alone.maps[m]))),),
                step=base + k, global_size=_global_size(uar, alone),
                local_size=tuple(alone.local_size), notes=(split,))))
    pieces.sort(key=lambda p: (p[0], p[1]))
    groups = tuple(dataclasses.replace(g, id=k, step=step)
                   for k, (step, _, g) in enumerate(pieces))
    group_of = {m: g.id for g in groups for m in g.members}
    blocked = list(plan.blocked)
    for e in uar.edges:
        if (not e.host and e.src in why_of and e.dst in why_of and e.src != e.dst
                and group_of[e.src] != group_of[e.dst]):
            blocked.append(BlockedFusion(src=e.src, dst=e.dst, array=e.array, kind=e.kind,
                                         width=e.width, reason=why_of[e.dst],
                                         witness=e.witness))
    after = sum((_trip_count(uar, g.members[0]) for g in groups), sympy.Integer(0))
    return dataclasses.replace(plan, groups=groups, launches_after=_count_value(after),
                               blocked=tuple(blocked))


__all__ = ["REFUSED", "certify", "split_groups"]
