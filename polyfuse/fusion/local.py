"""Local fusion (principle P1) and the legality certificate of a plan (:func:`check_plan`).

Breadth-first over the launches in host order (a topological order of the UAR), each launch
``Y`` is merged with the groups of its predecessors when

* the same host loops enclose all of them (a group is launched once per loop iteration, so the
  loop-carried part of any edge between members is satisfied by the host loop order);
* every edge between the parts (its same-iteration part) is ``thread`` or ``block`` for every
  parameter value (a ``global`` edge is P2: never fused);
* the merge keeps the operation graph acyclic after contraction (networkx) and the group can run
  at the host position of its last member: no member feeds a non-member operation placed before
  that position;
* one consistent re-indexing serves every edge in the group (:mod:`.reindex`; each candidate is
  checked against *all* edges of the merged group, which is the group's re-derived effects
  talking to the new member: ``R_X ; D`` over all members ``X`` is exactly the fused
  work-items' accesses related to ``Y``).

With several predecessor groups the launch is first tried with all of them (a common consumer
such as QKV's ``combine`` joins three independent producers), then with each one alone (latest
first).  Re-indexing is anchored on the producer (the new launch re-indexed into the existing
fused grid) and/or on the consumer (the existing fragments re-indexed into the new launch's
grid), as ``anchor`` says; ``auto`` tries the producer first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Optional

import islpy as isl
import networkx as nx

from polyfuse.core.islutil import IslQuotaExceeded, bounded
from polyfuse.core.program import HostOp, Launch
from polyfuse.fusion.decisions import (
    Anchor,
    CommonConsumer,
    EdgeRef,
    GroupNote,
    GroupStart,
    P1Merge,
    Refusal,
    Refused,
)
from polyfuse.fusion.plan import FusedGroup, FusionPlan
from polyfuse.fusion.reindex import (
    FUSED,
    PARTIAL_GROUPS,
    QUOTA_REASON,
    Frame,
    frame_problems,
    identity_frame,
    in_iteration_empty,
    iteration_width,
    merge_frames,
    normalize,
    partial_groups,
    partial_groups_reason,
)
from polyfuse.uar.graph import UAR, Edge

ANCHORS = ("auto", "producer", "consumer")


@dataclass
class LocalGroup:
    """A group under construction: its frame and why it looks like it does."""

    frame: Frame
    notes: list[GroupNote] = field(default_factory=list)
    #: "P1" when some member joined through a dependence
    how: set[str] = field(default_factory=set)


@dataclass
class LocalResult:
    groups: list[LocalGroup]
    #: (src, dst, array, kind) -> why the edge was not fused inside one group
    reasons: dict[tuple[int, int, str, str], Refusal]
    #: operation graph: same-iteration data dependences between non-sync operations
    graph: nx.DiGraph


def edge_key(e: Edge) -> tuple[int, int, str, str]:
    return (e.src, e.dst, e.array, e.kind)


def dependence_graph(uar: UAR) -> nx.DiGraph:
    """Operations (host syncs left out: they carry no data) and same-iteration dependences.

    Synchronizations only wait; every data ordering they protect is a data edge of its own
    (host reads/writes are operations here), so they do not constrain fusion.
    """
    g = nx.DiGraph()
    for op in uar.program.ops:
        if isinstance(op, HostOp) and op.kind == "sync":
            continue
        g.add_node(op.id)
    for e in uar.edges:
        if e.src == e.dst or e.src not in g or e.dst not in g:
            continue
        if not in_iteration_empty(uar, e):
            g.add_edge(e.src, e.dst)
    return g


def placement_problem(uar: UAR, graph: nx.DiGraph, members: Sequence[int],
                      unit_of: dict[int, int]) -> Optional[str]:
    """Why ``members`` cannot run together at the position of their last member (None: can).

    Checked twice: contraction of the candidate group in the graph of current units stays
    acyclic (networkx), and no member feeds a non-member operation that lies before the last
    member in host order (it would run before its producer once the member moves down).
    """
    pos = {op.id: k for k, op in enumerate(uar.program.ops)}
    last = max(pos[m] for m in members)
    ms = set(members)
    for m in members:
        for w in graph.successors(m):
            if w not in ms and pos[m] < pos[w] < last:
                return (f"L{m} feeds operation {w}, which runs before L{max(ms, key=pos.get)}"
                        " (moving the group there would reorder them)")
    label = {n: ("new" if n in ms else unit_of.get(n, ("op", n))) for n in graph}
    q = nx.DiGraph()
    q.add_nodes_from(set(label.values()))
    # each pair of units once, in the order of its first edge (the order a cycle is found in)
    q.add_edges_from(dict.fromkeys((label[a], label[b]) for a, b in graph.edges
                                   if label[a] != label[b]))
    if not nx.is_directed_acyclic_graph(q):
        cyc = nx.find_cycle(q)
        return f"merging would create a cycle through an unfused node ({cyc})"
    return None


def local_fusion(uar: UAR, anchor: str = "auto", *, join_producers: bool = True
                 ) -> LocalResult:
    """P1: merge launches joined only by thread/block edges (see module docstring).

    ``auto`` runs one breadth-first pass that prefers the producer anchor at each merge and
    tries the consumer anchor only where that merge failed.  Re-anchoring the last merge alone
    is not always enough: a group built producer-first may have re-indexings whose composition
    with a later consumer splits into pieces that cannot be extended, while the consumer-first
    build of the same chain composes simple pieces (a shift, then a pair exchange inside a
    group).  So where a merge into one group fails on its re-indexing, that group is rebuilt
    consumer-first with the new launch, and only there (a second whole pass doubled the
    planning time of large models).

    ``join_producers=False`` leaves a launch with several producer groups (a common consumer)
    in a group of its own, so that independent producers stay separate for P3 to place side by
    side: the fully horizontal orchestration (SIRIUS Fig. 4b: each work-group runs one branch).
    """
    if anchor not in ANCHORS:
        raise ValueError(f"anchor must be one of {ANCHORS}, not {anchor!r}")
    modes = ("producer", "consumer") if anchor == "auto" else (anchor,)
    return _local_pass(uar, modes, join_producers)


def _local_pass(uar: UAR, modes: Sequence[str], join_producers: bool) -> LocalResult:
    graph = dependence_graph(uar)
    pos = {op.id: k for k, op in enumerate(uar.program.ops)}
    groups: list[Optional[LocalGroup]] = []
    unit_of: dict[int, int] = {}
    reasons: dict[tuple[int, int, str, str], Refusal] = {}
    # the device edges by their source and by their target, in UAR order: a merge attempt
    # looks at its members' edges only (a program has thousands of edges and attempts)
    by_src: dict[int, list[tuple[int, Edge]]] = {}
    by_dst: dict[int, list[Edge]] = {}
    for k, e in enumerate(uar.edges):
        if not e.host:
            by_src.setdefault(e.src, []).append((k, e))
            by_dst.setdefault(e.dst, []).append(e)
    for op in uar.program.launches:
        y = op.id
        preds: list[int] = []
        for e in by_dst.get(y, ()):
            if e.src == y or e.src not in unit_of:
                continue
            if in_iteration_empty(uar, e):
                continue
            if unit_of[e.src] not in preds:
                preds.append(unit_of[e.src])
        preds.sort(key=lambda g: max(pos[m] for m in groups[g].frame.members))  # type: ignore
        attempts: list[list[int]] = []
        if len(preds) > 1 and join_producers:
            attempts.append(preds)
        if len(preds) == 1 or join_producers:
            attempts += [[p] for p in reversed(preds)]
        merged = False
        for attempt in attempts:
            lg, why, blame = _try_merge(uar, graph, groups, unit_of, attempt, y, modes,
                                        by_src)
            for k, reason in blame.items():
                # a merge with one producer group says what blocks its own edges better than
                # the merge with all of them, which fails on the first problem among any
                if len(attempt) == 1:
                    reasons[k] = reason
                else:
                    reasons.setdefault(k, reason)
            if lg is None:
                continue
            keep = attempt[0]
            for g in attempt:
                groups[g] = None
            groups[keep] = lg
            for m in lg.frame.members:
                unit_of[m] = keep
            merged = True
            break
        if not merged:
            frame = identity_frame(uar, y)
            groups.append(LocalGroup(frame, [GroupStart(y, op.kernel)]))
            unit_of[y] = len(groups) - 1
    return LocalResult([g for g in groups if g is not None], reasons, graph)


def _kernel(uar: UAR, lid: int) -> str:
    op = uar.program.op(lid)
    return op.kernel if isinstance(op, Launch) else str(lid)


def _merged(uar: UAR, parts: Sequence[Optional[LocalGroup]], members: list[int], frame: Frame,
            anchor: Anchor, details: list[EdgeRef]) -> LocalGroup:
    """The group of ``parts`` joined by P1 with the last of ``members`` on ``frame``, its notes
    saying how (``anchor``) and on which edges (``details``)."""
    y = members[-1]
    notes = [n for p in parts if p is not None for n in p.notes]
    how = set().union(*(p.how for p in parts if p is not None)) | {"P1"}
    notes.append(P1Merge(y, _kernel(uar, y), tuple(members[:-1]), anchor, y in frame.barriers,
                         tuple(details)))
    return LocalGroup(frame, notes, how)


def _try_merge(uar: UAR, graph: nx.DiGraph, groups: list[Optional[LocalGroup]],
               unit_of: dict[int, int], attempt: list[int], y: int, modes: Sequence[str],
               by_src: Mapping[int, list[tuple[int, Edge]]]
               ) -> tuple[Optional[LocalGroup], Optional[Refusal], dict]:
    parts = [groups[g] for g in attempt]
    assert all(p is not None for p in parts)
    frames = [p.frame for p in parts if p is not None]
    members = [m for f in frames for m in f.members] + [y]
    unit = {m: i for i, f in enumerate(frames) for m in f.members}
    unit[y] = len(frames)
    blame: dict[tuple[int, int, str, str], Refusal] = {}
    cross = [e for _, e in sorted((ke for m in unit for ke in by_src.get(m, ())),
                                  key=lambda ke: ke[0])
             if e.dst in unit and unit[e.src] != unit[e.dst]]
    loops = {uar.instances(m).loop_ids for m in members}
    if len(loops) > 1:
        why = Refusal(Refused.HOST_LOOPS, Refused.HOST_LOOPS.value)
        for e in cross:  # only the edges this is true of: others are blocked by their own
            if uar.instances(e.src).loop_ids != uar.instances(e.dst).loop_ids:
                blame[edge_key(e)] = why
        return None, why, blame
    details: list[EdgeRef] = []
    for e in cross:
        if in_iteration_empty(uar, e):
            continue
        w, witness = iteration_width(uar, e)
        if w == "global":
            text = witness.get("text") if witness else ""
            blame[edge_key(e)] = Refusal(Refused.GLOBAL, Refused.GLOBAL.value, text or "")
            return None, blame[edge_key(e)], blame
        details.append(EdgeRef(e.kind, e.src, e.dst, e.array, w))
    place = placement_problem(uar, graph, members, unit_of)
    if place is not None:
        why = Refusal(Refused.PLACEMENT, place)
        for e in cross:
            blame[edge_key(e)] = why
        return None, why, blame
    yframe = identity_frame(uar, y)
    last_why = ""
    frame: Optional[Frame] = None
    for mode in modes:
        seq = [frames[0], yframe] + frames[1:] if mode == "producer" else [yframe] + frames
        frame = seq[0]
        for nxt in seq[1:]:
            assert frame is not None
            frame, why = merge_frames(uar, frame, nxt, _between(uar, frame, nxt))
            if QUOTA_REASON not in last_why:  # an undecided check is the reason to report
                last_why = why
            if frame is None:
                break
        if frame is None:
            continue
        group = _merged(uar, parts, members, frame, Anchor(f"anchored on the {mode}"), details)
        if len(frames) > 1:
            group.notes.append(CommonConsumer(y))
        return group, None, blame
    if len(modes) > 1 and len(frames) == 1:
        rebuilt = _consumer_first(uar, [*frames[0].members, y])
        if rebuilt is not None:
            return _merged(uar, parts, members, rebuilt, Anchor.REBUILT, details), None, blame
    if PARTIAL_GROUPS in last_why:
        summary, _, detail = last_why.partition(": ")
        why = Refusal(Refused.PARTIAL_GROUPS, summary, detail)
    else:
        why = Refusal(Refused.NO_REINDEXING, Refused.NO_REINDEXING.value, last_why)
    for e in cross:
        blame[edge_key(e)] = why
    return None, why, blame


def _consumer_first(uar: UAR, members: Sequence[int]) -> Optional[Frame]:
    """The frame of ``members`` (a chain in host order) merged one by one, each on the newer
    launch's grid where that works and on the group's otherwise; None when a merge fails."""
    frame = identity_frame(uar, members[0])
    for m in members[1:]:
        nxt = identity_frame(uar, m)
        merged, _ = merge_frames(uar, nxt, frame, _between(uar, nxt, frame))
        if merged is None:
            merged, _ = merge_frames(uar, frame, nxt, _between(uar, frame, nxt))
        if merged is None:
            return None
        frame = merged
    return frame


def _between(uar: UAR, a: Frame, b: Frame) -> list[Edge]:
    """The launch-to-launch edges joining ``a`` and ``b`` either way, in UAR order."""
    found = {k: e for x, y in ((a, b), (b, a)) for m in x.maps
             for k, e in uar.device_edges_from(m) if e.dst in y.maps}
    return [found[k] for k in sorted(found)]


# ----------------------------------------------------------------------------------------------
# The certificate
# ----------------------------------------------------------------------------------------------


def _frame_of_group(uar: UAR, group) -> Frame:
    maps: dict[int, isl.Map] = {}
    for f in group.fragments:
        maps[f.launch] = f.reindex
    first = uar.instances(group.members[0])
    wd = max((uar.instances(m).work_dim for m in group.members), default=1)
    any_map = next(iter(maps.values()))
    wd = (any_map.dim(isl.dim_type.in_) - len(first.host_dims)) // 2
    local = tuple(group.local_size or ())
    frame = Frame(host_dims=first.host_dims, work_dim=wd, local_size=local, maps=maps,
                  barriers=frozenset(f.launch for f in group.fragments if f.barrier_before))
    return frame


def group_problems(uar: UAR, g: FusedGroup) -> list[str]:
    """Problems of one group of a plan (empty: legal); the per-group part of :func:`check_plan`.

    Reading and normalizing the group's frame run under isl's operation quota, like the member
    and edge checks of :func:`frame_problems` (those are memoized on their canonical form, so
    identical layers are checked once); a check that hits the quota is a problem, never a pass.
    """
    if [f.launch for f in g.fragments] != list(g.members):
        return ["fragments do not match members"]
    if len({uar.instances(m).loop_ids for m in g.members}) > 1:
        return ["members in different host loops"]
    if not g.local_size or not g.global_size:
        return ["NDRange missing"]
    try:
        with bounded():
            frame = _frame_of_group(uar, g)
            norm = normalize(uar, frame)
    except IslQuotaExceeded:
        return [QUOTA_REASON]
    except isl.Error as err:
        return [f"unreadable re-indexing ({err})"]
    if norm is None:
        return ["fragments do not form a box of whole work-groups starting at 0"]
    problems = [f"global size {gs} in dim {d} but fragments span {norm.groups[d]} groups of {ls}"
                for d, (gs, ls) in enumerate(zip(g.global_size, g.local_size))
                if isinstance(gs, int) and isinstance(norm.groups[d], int)
                and gs != norm.groups[d] * ls]
    frame = replace(frame, grid=norm.grid)
    if len(g.members) > 1:  # alone, a launch runs on its own NDRange, partial groups and all
        problems += [partial_groups_reason(uar, frame, m) for m in frame.maps
                     if partial_groups(uar, frame, m)]
    probs, _ = frame_problems(uar, frame, barriers=frame.barriers)
    if g.orchestration in ("horizontal", "hybrid"):
        from polyfuse.fusion.hetero import padding_only

        # a padded fragment of a heterogeneous group: its own local ids kept, no barriers,
        # the padded work-items guarded off (no code of it runs there)
        probs = [p for p in probs if not padding_only(uar, frame, p)]
    return problems + probs


def check_plan(plan: FusionPlan) -> list[str]:
    """Problems of a plan (empty list: every group is legal).  The legality certificate.

    Checked with isl for every group: each fragment's re-indexing is a bijection from its domain
    onto the launch's whole work-item set; the domains lie in the declared NDRange
    (``global_size``/``local_size``) and form a box of whole work-groups; structured fragments
    keep their work-groups; every edge between members pairs the same fused work-item, or the
    same fused work-group with a ``barrier_before`` between the fragments (a fragment of a
    heterogeneous group may have a smaller local size than the group's, padded: accepted when it
    has no barriers and keeps its local ids, so the guarded padding runs none of its code).
    Across groups: every
    launch is in exactly one group, members of a group share their host loops, and every edge
    between two groups with a same-iteration part runs from a lower step to a higher one.
    """
    uar = plan.uar
    problems: list[str] = []
    seen: dict[int, int] = {}
    for g in plan.groups:
        for m in g.members:
            if m in seen:
                problems.append(f"L{m} is in groups {seen[m]} and {g.id}")
            seen[m] = g.id
        problems += [f"group {g.id}: {p}" for p in group_problems(uar, g)]
    for op in uar.program.launches:
        if op.id not in seen:
            problems.append(f"L{op.id} is in no group")
    step = {m: g.step for g in plan.groups for m in g.members}
    for e in uar.edges:
        if e.host or seen.get(e.src) == seen.get(e.dst):
            continue
        if e.src not in seen or e.dst not in seen:
            continue
        if in_iteration_empty(uar, e):
            continue
        same_body = uar.instances(e.src).loop_ids == uar.instances(e.dst).loop_ids
        if same_body and step[e.src] >= step[e.dst]:
            problems.append(f"{e.kind} L{e.src}->L{e.dst} on {e.array} ({e.width}) between "
                            f"groups {seen[e.src]} and {seen[e.dst]} is not separated by "
                            f"steps ({step[e.src]} >= {step[e.dst]})")
    return problems


__all__ = ["ANCHORS", "FUSED", "LocalGroup", "LocalResult", "check_plan", "dependence_graph",
           "group_problems", "local_fusion", "placement_problem"]
