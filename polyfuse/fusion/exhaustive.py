"""Exhaustive search over the legal groupings of a small program's launches.

The greedy planner decides once per launch, in host order: local fusion merges a launch into
its producers' groups (and a merge taken early can stop a later, better one), and P3 joins only
groups that the ASAP launch steps happen to put at the same step (two identical launches at
different depths of independent branches stay apart).  Its result is kept when nothing better
exists, but on a program of at most :data:`MAX_LAUNCHES` launches every grouping can be tried.

A *legal grouping* is a partition of the launches into groups that the greedy planner's own
checks accept: members share their host loops; no same-iteration ``global`` edge joins two
members (P2); the members joined by dependences (each connected part) get one consistent
re-indexing by :func:`polyfuse.fusion.reindex.merge_frames` (barriers derived and checked, the
structured-fragment and whole-work-group box rules included); independent parts have identical
code and no dependence of any kind between them (P3) and fit one grid vertically or
horizontally; each group can run at its last member's host position, and the groups together
are acyclic (:func:`polyfuse.fusion.local.placement_problem`).

The search assigns launches in host order to an open group or a new one (branch and bound on
the launch count, best = the greedy count), pruning a partial group as soon as a condition that
no later launch can repair fails (two members in different host loops or joined by a ``global``
edge; a member feeding an operation already placed outside before the group's last member).
Group frames are memoized.  It stops within :data:`MAX_NODES` search nodes and
:data:`MAX_FRAMES` group frames (deterministic budgets, so plans do not depend on the machine)
with the best grouping found so far.  The greedy plan stays when nothing better was found,
when a path of the dependence graph already shows the greedy count is the minimum (the search
is not run), and on a tie (checked-in schedules stay byte-identical).  A
plan found by the search is returned only when :func:`polyfuse.fusion.local.check_plan` (the
certificate) finds no problem; every group notes which planner produced it and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Optional

import networkx as nx

from polyfuse.core.program import REFERENCE_TARGET, HostOp, Launch, Target
from polyfuse.fusion.decisions import (
    Anchor,
    GroupNote,
    GroupStart,
    P1Rebuilt,
    P1Step,
    P3Merge,
    Refusal,
    Refused,
    Searched,
)
from polyfuse.fusion.global_ import (
    Unit,
    _connected,
    _horizontal,
    _signature,
    _trip_count,
    _vertical,
    assemble_plan,
    global_schedule,
    wavefront_schedules,
)
from polyfuse.fusion.local import (
    LocalGroup,
    _between,
    _consumer_first,
    check_plan,
    dependence_graph,
    edge_key,
    placement_problem,
)
from polyfuse.fusion.plan import FusionPlan
from polyfuse.fusion.reindex import (
    frame_problems,
    identity_frame,
    in_iteration_empty,
    iteration_width,
    merge_frames,
)
from polyfuse.uar.graph import UAR

#: programs with more kernel launches (host loops not unrolled) keep the greedy plan
MAX_LAUNCHES = 12
#: search nodes (partial assignments) and distinct group frames built before giving up
MAX_NODES = 20_000
MAX_FRAMES = 300
#: the note every group of a plan found by the search carries
SEARCHED = "exhaustive search over legal groupings"


def fewest_launches(plan: FusionPlan, target: Target = REFERENCE_TARGET) -> FusionPlan:
    """``plan`` (the greedy one), or a certified plan with fewer launches found by search."""
    uar = plan.uar
    launches = [op.id for op in uar.program.launches]
    if not 1 < len(launches) <= MAX_LAUNCHES or not isinstance(plan.launches_after, int):
        return plan
    trips = {m: _trip_count(uar, m) for m in launches}
    if not all(t.is_Integer for t in trips.values()):
        return plan
    search = _Search(uar, launches, {m: int(t) for m, t in trips.items()})
    if plan.launches_after <= search.lower_bound():
        return plan
    found = search.run(plan.launches_after)
    if found is None:
        return plan
    cost, groups = found
    better = _plan_of(search, groups, cost, plan.launches_after, target)
    if better is None or better.launches_after != cost or check_plan(better):
        return plan
    return better


class _Search:
    """Branch and bound over partitions of the launches (module docstring)."""

    def __init__(self, uar: UAR, launches: Sequence[int], trips: dict[int, int]):
        self.uar, self.launches, self.trips = uar, list(launches), trips
        self.pos = {op.id: k for k, op in enumerate(uar.program.ops)}
        self.graph = dependence_graph(uar)
        self.loops = {m: uar.instances(m).loop_ids for m in launches}
        self.apart: set[frozenset[int]] = set()  # pairs a same-iteration global edge joins
        for e in uar.edges:
            if (e.host or e.src == e.dst or e.src not in trips or e.dst not in trips
                    or in_iteration_empty(uar, e)):
                continue
            if iteration_width(uar, e)[0] == "global":
                self.apart.add(frozenset((e.src, e.dst)))
        self.frames: dict[frozenset[int], Optional[Unit]] = {}
        self.nodes = self.built = 0

    def lower_bound(self) -> int:
        """Launches on the costliest dependence path: a group holds one contiguous run of a
        path (else it is cyclic), and a run ends at a global edge, a host operation or a change
        of host loops, so the runs of one path are distinct groups."""
        best: dict[int, int] = {}
        for v in nx.topological_sort(self.graph):
            preds = list(self.graph.predecessors(v))
            if v not in self.trips:
                best[v] = max((best[p] for p in preds), default=0)
                continue
            own = self.trips[v]
            best[v] = max([own] + [best[p] + (0 if self._joinable(p, v) else own)
                                   for p in preds])
        return max(best.values(), default=0)

    def _joinable(self, a: int, b: int) -> bool:
        return (a in self.trips and b in self.trips and self.loops[a] == self.loops[b]
                and frozenset((a, b)) not in self.apart)

    def _can_join(self, group: list[int], y: int) -> bool:
        """Whether ``y`` (later in host order than every member) may join ``group`` for good:
        a member feeding an operation placed outside, before ``y``, would run after it."""
        if not all(self._joinable(m, y) for m in group):
            return False
        ms = set(group) | {y}
        return not any(w not in ms and self.pos[w] < self.pos[y]
                       for m in group for w in self.graph.successors(m))

    def run(self, greedy: int) -> Optional[tuple[int, list[frozenset[int]]]]:
        """The cheapest legal grouping costing less than ``greedy``, or None (none, or the
        budget ran out before one was found)."""
        best: list[Optional[tuple[int, list[frozenset[int]]]]] = [None]
        bound = [greedy]

        def dfs(k: int, groups: list[list[int]], cost: int) -> None:
            self.nodes += 1
            if self.nodes > MAX_NODES or self.built > MAX_FRAMES:
                return
            if k == len(self.launches):
                sets = [frozenset(g) for g in groups]
                if cost < bound[0] and self._legal(sets):
                    best[0], bound[0] = (cost, sets), cost
                return
            y = self.launches[k]
            for g in groups:  # joining an open group first: cheap plans are found early
                if self._can_join(g, y):
                    g.append(y)
                    dfs(k + 1, groups, cost)
                    g.pop()
            if cost + self.trips[y] < bound[0]:
                groups.append([y])
                dfs(k + 1, groups, cost + self.trips[y])
                groups.pop()

        dfs(0, [], 0)
        return best[0]

    def _legal(self, sets: list[frozenset[int]]) -> bool:
        units = [self.unit(s) for s in sets]
        if any(u is None for u in units):
            return False
        of = {m: i for i, s in enumerate(sets) for m in s}
        q = nx.DiGraph()
        q.add_nodes_from(("op", n) for n in self.graph if n not in of)
        q.add_nodes_from(range(len(sets)))
        for a, b in self.graph.edges:
            ua, ub = of.get(a, ("op", a)), of.get(b, ("op", b))
            if ua != ub:
                q.add_edge(ua, ub)
        return nx.is_directed_acyclic_graph(q)

    def unit(self, members: frozenset[int]) -> Optional[Unit]:
        """The group of ``members`` with its frame, or None when it is not legal (memoized)."""
        if members not in self.frames:
            self.frames[members] = self._unit(members)
        return self.frames[members]

    def _unit(self, members: frozenset[int]) -> Optional[Unit]:
        uar = self.uar
        order = sorted(members, key=self.pos.get)
        if len(order) > 1 and placement_problem(uar, self.graph, order, {}):
            return None
        same = nx.Graph()
        same.add_nodes_from(order)
        same.add_edges_from((a, b) for a, b in self.graph.edges if a in members and b in members)
        comps = [sorted(c, key=self.pos.get) for c in nx.connected_components(same)]
        comps.sort(key=lambda c: self.pos[c[0]])
        shells = [Unit("G", tuple(c)) for c in comps]
        for u in shells:
            u.sig = _signature(uar, u)
        if any(u.sig != shells[0].sig or _connected(uar, shells[0], u) for u in shells[1:]):
            return None  # P3: independent parts only when identical and unrelated
        self.built += 1
        parts: list[Unit] = []
        for u in shells:
            lg = self._part(list(u.members))
            if lg is None:
                return None
            parts.append(replace(u, group=lg, orchestration="single" if len(u.members) == 1
                                 else "vertical"))
        whole: Optional[Unit] = parts[0]
        for u in parts[1:]:  # P3: side by side
            assert whole is not None
            whole = self._p3(whole, u)
            if whole is None:
                return None
        return whole

    def _part(self, members: list[int]) -> Optional[LocalGroup]:
        """P1: ``members`` (connected by same-iteration dependences, host order) on one frame,
        each launch merged once the launches it touches are in, anchored on the producer's
        grid, else the consumer's, else the chain rebuilt consumer-first (as local fusion)."""
        uar = self.uar
        frame = identity_frame(uar, members[0])
        notes: list[GroupNote] = [GroupStart(members[0], _kernel(uar, members[0]))]
        rest = members[1:]
        while rest:
            y = next((m for m in rest if any(self.graph.has_edge(x, m) or self.graph.has_edge(m, x)
                                             for x in frame.maps)), rest[0])
            rest.remove(y)
            yf = identity_frame(uar, y)
            merged, _ = merge_frames(uar, frame, yf, _between(uar, frame, yf))
            how = Anchor.PRODUCER
            if merged is None:
                merged, _ = merge_frames(uar, yf, frame, _between(uar, yf, frame))
                how = Anchor.CONSUMER
            if merged is None:
                return self._rebuilt(members)
            frame = merged
            notes.append(P1Step(y, _kernel(uar, y), how, y in frame.barriers))
        return LocalGroup(frame, notes, {"P1"} if len(members) > 1 else set())

    def _rebuilt(self, members: list[int]) -> Optional[LocalGroup]:
        frame = _consumer_first(self.uar, members)
        if frame is None:
            return None
        return LocalGroup(frame, [P1Rebuilt(tuple(members))], {"P1"})

    def _p3(self, a: Unit, b: Unit) -> Optional[Unit]:
        assert a.group is not None and b.group is not None
        for mode, fn in (("vertical", _vertical), ("horizontal", _horizontal)):
            frame, _ = fn(self.uar, a.group.frame, b.group.frame)
            if frame is None:
                continue
            order = sorted(frame.maps, key=self.pos.get)
            frame = replace(frame, maps={m: frame.maps[m] for m in order})
            problems, need = frame_problems(self.uar, frame)
            if problems:
                continue
            chains = any(len(u.members) > 1 for u in (a, b)) or a.orchestration == "hybrid"
            orch = "hybrid" if chains and (mode == "horizontal" or a.orchestration != "vertical"
                                           ) else mode
            notes = a.group.notes + b.group.notes + [
                P3Merge(tuple(b.members), tuple(a.members), mode)]
            group = LocalGroup(replace(frame, barriers=need), notes,
                               a.group.how | b.group.how | {"P3"})
            return Unit("G", tuple(order), group, orch, sig=a.sig + b.sig)
        return None


def _kernel(uar: UAR, lid: int) -> str:
    op = uar.program.op(lid)
    return op.kernel if isinstance(op, Launch) else str(lid)


def _plan_of(search: _Search, sets: list[frozenset[int]], cost: int, greedy: int,
             target: Target) -> Optional[FusionPlan]:
    """The plan of a grouping the search found: scheduled like the greedy plan's groups."""
    uar = search.uar
    why = Searched(cost, greedy)
    units: list[Unit] = []
    for k, s in enumerate(sorted(sets, key=lambda s: min(map(search.pos.get, s)))):
        u = search.unit(s)
        assert u is not None and u.group is not None
        units.append(replace(u, name=f"G{k}", group=replace(u.group,
                                                             notes=u.group.notes + [why])))
    units += [Unit(f"H{op.id}", (op.id,)) for op in uar.program.ops
              if isinstance(op, HostOp) and op.kind != "sync"]
    try:
        schedule, steps = global_schedule(uar, units)
    except ValueError:
        return None
    group_of = {m: u.name for u in units for m in u.members}
    apart = Refusal(Refused.SEARCHED, f"left apart by the {SEARCHED} (no grouping with fewer "
                    "launches joins them)")
    reasons = {edge_key(e): (Refusal(Refused.GLOBAL, Refused.GLOBAL.value)
                             if e.width == "global" else apart)
               for e in uar.edges if not e.host and group_of.get(e.src) != group_of.get(e.dst)}
    starters = [m for u in units if u.group is not None for m in u.members
                if not any(search.graph.has_edge(x, m) for x in u.members)]
    return assemble_plan(uar, units, schedule, steps, wavefront_schedules(uar, units), reasons,
                         starters, search.graph, hetero=False, target=target)


__all__ = ["MAX_FRAMES", "MAX_LAUNCHES", "MAX_NODES", "SEARCHED", "fewest_launches"]
