"""Dependences between operation instances: exact dataflow over the host schedule
(docs/definitions.md).

The host schedule gives every instance of an operation the time of its host statement: a 2d+1
vector interleaving textual positions with host-loop iterators.  All work-items of one launch
instance share that time, so isl never orders them against each other: communication inside a
launch is not an inter-launch dependence.

RAW is the last-writer dataflow (``must`` sources: exact writes, ``may`` sources: approximated
writes).  WAR relates a write to the reads since the last exact write that covers the element
(reads are ``may`` sources, exact writes kill).  WAW relates a write to the last writer.  Flow is
computed per root buffer, with only the operations touching it, which keeps a long chain of
launches linear in its length.  isl's dataflow (:func:`_flow`) serves buffers used inside host
loops; on the others every operation runs once, and a walk back from each sink gives the same
relations (:func:`_windowed_flow`) without subtracting footprints where nothing is overwritten.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Optional

import islpy as isl

from polyfuse.core.islutil import IslQuotaExceeded, bounded, coalesce
from polyfuse.uar.effects import Effects, Instantiation, OpInstances

KINDS = ("RAW", "WAR", "WAW")
#: isl's operation quota for one buffer's dataflow analysis: ten times the default, since one
#: analysis covers every operation on the buffer and racing may-writers multiply its work (a
#: 2-launch generated program with racy writes needed more than the default); a problem whose
#: size explodes still stops at it instead of running for hours
DATAFLOW_OPERATIONS = 2_000_000


@dataclass(frozen=True, eq=False)
class Dependence:
    """One dependence relation between the instances of two operations on one root buffer."""

    kind: str
    buffer: str
    src: int
    dst: int
    relation: isl.Map
    #: the relation is every pair of instances (the exact one exceeded isl's quota)
    approximate: bool = False


def host_schedule(inst: Instantiation) -> dict[int, isl.Map]:
    """The 2d+1 host schedule of every operation's instances (work-items share their time)."""
    ops = inst.program.ops
    depth = max((len(op.loops) for op in ops), default=0)
    positions: dict[tuple[Optional[int], Hashable], int] = {}
    next_pos: dict[Optional[int], int] = defaultdict(int)

    def position(parent: Optional[int], child: Hashable) -> int:
        key = (parent, child)
        if key not in positions:
            positions[key] = next_pos[parent]
            next_pos[parent] += 1
        return positions[key]

    result = {}
    for op in ops:
        oi = inst.ops[op.id]
        vec: list[str] = []
        parent: Optional[int] = None
        for loop, lid, dim in zip(oi.loops, oi.loop_ids, oi.host_dims):
            vec.append(str(position(parent, ("loop", lid))))
            vec.append(dim if (loop.step or 1) > 0 else f"-{dim}")
            parent = lid
        vec.append(str(position(parent, ("op", op.id))))
        vec += ["0"] * (2 * depth + 1 - len(vec))
        text = f"{{ {oi.name}[{', '.join(oi.dims)}] -> [{', '.join(vec)}] }}"
        result[op.id] = isl.Map(text)
    return result


def _union(maps) -> isl.UnionMap:
    result = isl.UnionMap("{ }")
    for m in maps:
        if m is not None and not m.is_empty():
            result = result.union(isl.UnionMap.from_map(m))
    return result


def _then(sched: isl.Map, step: int) -> isl.Map:
    """``sched`` with one more time dimension fixed to ``step`` (orders roles in an instance)."""
    n = sched.dim(isl.dim_type.out)
    return sched.add_dims(isl.dim_type.out, 1).fix_val(isl.dim_type.out, n, step)


def _tagged(rel: Optional[isl.Map], ksched: isl.Map) -> tuple[isl.UnionMap, isl.UnionMap]:
    """A kernel-level access ``Op[h] -> b[e]`` as instances ``[Op[h] -> b[e]]`` (access, time)."""
    if rel is None or rel.is_empty():
        return isl.UnionMap("{ }"), isl.UnionMap("{ }")
    return (isl.UnionMap.from_map(rel.range_map()),
            isl.UnionMap.from_map(rel.domain_map().apply_range(ksched)))


def _to_instance(oi: OpInstances) -> isl.Map:
    """``Op[h, g, l] -> Op[h]``: a work-item to its launch instance."""
    return isl.Map(f"{{ {oi.name}[{', '.join(oi.dims)}] -> {oi.name}[{', '.join(oi.host_dims)}] }}")


def dependences(inst: Instantiation, schedule: dict[int, isl.Map]) -> list[Dependence]:
    """All RAW, WAR and WAW dependences, one relation per (kind, buffer, src op, dst op).

    Sources are computed per (operation instance, element) — instances ``[Op[h] -> b[e]]`` —
    so that isl's "last source" is the last *instance* that wrote an element; every work-item
    of it that touched the element is then a source (writes racing inside a launch all count).
    """
    users: dict[str, list[int]] = defaultdict(list)
    for op in inst.program.ops:
        for b in inst.effects[op.id].buffers:
            users[b].append(op.id)
    out: list[Dependence] = []
    for buffer in sorted(users):
        ids = users[buffer]
        if all(not inst.effects[i].must_writes.get(buffer) and
               not inst.effects[i].may_writes.get(buffer) for i in ids):
            continue
        if len(ids) > WINDOW_MIN_OPS and not any(inst.ops[i].loops for i in ids):
            out += _windowed_flow(inst, schedule, buffer, ids)
        else:
            out += _flow(inst, schedule, buffer, ids, ids)
    return out


#: a buffer used by more operations than this, none inside a host loop (an ONNX graph, an
#: unrolled sequence of launches), gets its dependences sink by sink (see _windowed_flow)
WINDOW_MIN_OPS = 0
#: past this many operations on a buffer, the walk bounds what earlier ones touch by a hull
HULL_MIN_OPS = 48


def _windowed_flow(inst: Instantiation, schedule: dict[int, isl.Map], buffer: str,
                   ids: list[int]) -> list[Dependence]:
    """The dependences of :func:`_flow` for operations that each run once, sink by sink.

    isl's dataflow over a long sequence of operations (1,000+ unrolled launches) grows faster
    than quadratically, and over a convolution's footprint (existentially quantified: the
    work-item's block of channels and columns, the padded window) it subtracts footprints to
    find the elements no source wrote, which took minutes at 56x56.  Without host loops every
    operation is one instance and program order is the schedule, so the flow into a sink ``t``
    is found by walking back from ``t`` with the elements it touches that are not yet
    overwritten: an earlier ``s`` is a source for the elements it accesses among them (RAW,
    WAW: its writes; WAR: its reads), and its exact writes then kill those elements.  The walk
    stops when nothing remains or no operation before ``s`` touches what remains, so a buffer
    written once (every tensor of an ONNX graph) subtracts nothing.  The relations are those
    :func:`_flow` gives: source work-items to sink work-items that access a common element of
    the flow.  A kill that exceeds isl's quota gives the buffer :func:`_coarse_flow`.
    """
    effs = {i: inst.effects[i] for i in ids}

    def elements(rel: Optional[isl.Map]) -> Optional[isl.Set]:
        return None if rel is None or rel.is_empty() else rel.range()

    # per operation, computed once: thread-level accesses and the elements they touch
    acc = {(i, d): effs[i].access(d, buffer) for i in ids for d in ("read", "write")}
    elems = {(i, d): elements(effs[i].access(d, buffer, "kernel"))
             for i in ids for d in ("read", "write")}
    must = {i: elements(effs[i].access("write", buffer, "kernel", must_only=True)) for i in ids}
    # the elements touched by the operations before each: exact for a few operations, a
    # superset (a convex hull) for long sequences, where it stays cheap over 1,000s of them (a
    # larger set only makes a walk go further back)
    hull = len(ids) > HULL_MIN_OPS
    touched: list[Optional[isl.Set]] = []
    seen: Optional[isl.Set] = None
    for i in ids:
        touched.append(seen)
        for d in ("read", "write"):
            e = elems[(i, d)]
            if e is not None:
                seen = e if seen is None else seen.union(e)
                if hull:
                    seen = isl.Set.from_basic_set(seen.simple_hull())
    out: list[Dependence] = []
    for pos, t in enumerate(ids):
        sinks = {"RAW": acc[(t, "read")], "WAR": acc[(t, "write")], "WAW": acc[(t, "write")]}
        remaining = {"RAW": elems[(t, "read")], "WAR": elems[(t, "write")],
                     "WAW": elems[(t, "write")]}
        # kinds whose remaining elements were cut by a kill (the others are the sink's own)
        cut: set[str] = set()
        for start in range(pos - 1, -1, -1):
            live = [k for k, r in remaining.items() if r is not None and not r.is_empty()]
            if not live:
                break
            s = ids[start]
            for kind in live:
                direction = "read" if kind == "WAR" else "write"
                src_elems = elems[(s, direction)]
                if src_elems is None or src_elems.intersect(remaining[kind]).is_empty():
                    continue
                sink = sinks[kind]
                if kind in cut:
                    sink = sink.intersect_range(remaining[kind])
                rel = acc[(s, direction)].apply_range(sink.reverse())
                if not rel.is_empty():
                    out.append(Dependence(kind, buffer, s, t, coalesce(rel)))
            # before the kills: subtracting footprints with existentially quantified
            # variables (convolutions) is isl's costliest step, and often not needed
            if _untouched(remaining, touched[start]):
                break
            if must[s] is not None:
                for k in live:
                    if not remaining[k].intersect(must[s]).is_empty():
                        try:
                            with bounded():
                                remaining[k] = remaining[k].subtract(must[s])
                        except IslQuotaExceeded:
                            return _coarse_flow(inst, schedule, buffer, ids, ids)
                        cut.add(k)
                if _untouched(remaining, touched[start]):
                    break
    return out


def _untouched(remaining: dict[str, Optional[isl.Set]], before: Optional[isl.Set]) -> bool:
    """Whether no operation before (which touched ``before``) touches what ``remaining`` holds."""
    return before is None or all(r is None or r.intersect(before).is_empty()
                                 for r in remaining.values())


def _flow(inst: Instantiation, schedule: dict[int, isl.Map], buffer: str, ids: list[int],
          sinks: list[int]) -> list[Dependence]:
    """Dependences on ``buffer`` from the operations ``ids`` to those of ``sinks`` (a subset)."""
    by_name = {inst.ops[i].name: i for i in ids}
    effs = {i: inst.effects[i] for i in ids}
    sink_effs = [effs[i] for i in sinks]
    reads = _union(e.access("read", buffer) for e in sink_effs)
    writes = _union(e.access("write", buffer) for e in sink_effs)
    kills = _union(e.must_writes.get(buffer) for e in effs.values())
    # sinks and kills at step 0 of their instance, tagged reads at step 1: an instance's
    # own write does not kill its reads (they still precede the next write), while its
    # reads are never sources for its own writes (same instance, not earlier)
    sched = _union(_then(schedule[i], 0) for i in ids)
    tags = {k: (isl.UnionMap("{ }"), isl.UnionMap("{ }")) for k in ("must", "may", "read")}
    for i, e in effs.items():
        oi = inst.ops[i]
        ksched = schedule[i].project_out(
            isl.dim_type.in_, len(oi.host_dims), 2 * oi.work_dim).set_tuple_name(
            isl.dim_type.in_, oi.name)
        must = e.access("write", buffer, "kernel", must_only=True)
        every = e.access("write", buffer, "kernel")
        may = every if must is None or every is None else every.subtract(must)
        for key, rel in (("must", must), ("may", may),
                         ("read", e.access("read", buffer, "kernel"))):
            acc, tim = _tagged(rel, _then(ksched, 1 if key == "read" else 0))
            tags[key] = (tags[key][0].union(acc), tags[key][1].union(tim))
    tsched = sched
    for acc_tim in tags.values():
        tsched = tsched.union(acc_tim[1])
    flows = {
        "RAW": isl.UnionAccessInfo.from_sink(reads).set_must_source(tags["must"][0])
        .set_may_source(tags["may"][0]),
        "WAR": isl.UnionAccessInfo.from_sink(writes).set_may_source(tags["read"][0])
        .set_kill(kills),
        "WAW": isl.UnionAccessInfo.from_sink(writes).set_must_source(tags["must"][0])
        .set_may_source(tags["may"][0]),
    }
    try:
        with bounded(DATAFLOW_OPERATIONS):
            return _exact_flow(inst, buffer, by_name, effs, flows, tsched, reads, writes, tags)
    except IslQuotaExceeded:
        return _coarse_flow(inst, schedule, buffer, ids, sinks)


def _exact_flow(inst: Instantiation, buffer: str, by_name: dict[str, int],
                effs: dict[int, Effects], flows: dict[str, isl.UnionAccessInfo],
                tsched: isl.UnionMap, reads: isl.UnionMap, writes: isl.UnionMap,
                tags: dict[str, tuple[isl.UnionMap, isl.UnionMap]]) -> list[Dependence]:
    """isl's dataflow analysis of :func:`_flow`'s access infos (called under the quota)."""
    out: list[Dependence] = []
    for kind in KINDS:
        sink_side = reads if kind == "RAW" else writes
        if sink_side.is_empty() or (kind == "WAR" and tags["read"][0].is_empty()):
            continue
        dep = flows[kind].set_schedule_map(tsched).compute_flow().get_may_dependence()
        maps: list[isl.Map] = []
        dep.foreach_map(maps.append)
        for m in maps:
            src = by_name[m.domain().unwrap().get_tuple_name(isl.dim_type.in_)]
            dst = by_name[m.get_tuple_name(isl.dim_type.out)]
            oi = inst.ops[src]
            access = effs[src].access("read" if kind == "WAR" else "write", buffer)
            rel = coalesce(_to_instance(oi).range_product(access).apply_range(m))
            if not rel.is_empty():
                out.append(Dependence(kind, buffer, src, dst, rel))
    return out


def _coarse_flow(inst: Instantiation, schedule: dict[int, isl.Map], buffer: str,
                 ids: list[int], sinks: list[int]) -> list[Dependence]:
    """The safe answer when the exact dataflow exceeds isl's quota (convolutions over large
    images): every instance pair of two operations that may conflict on ``buffer``, in
    program order (the host ``schedule``'s: launches in two loops one after the other are
    ordered one way only, as in one shared loop they are by iteration), marked approximate."""
    out: list[Dependence] = []
    for kind in KINDS:
        src_dir, dst_dir = {"RAW": ("write", "read"), "WAR": ("read", "write"),
                            "WAW": ("write", "write")}[kind]
        for s in ids:
            if inst.effects[s].access(src_dir, buffer) is None:
                continue
            for t in sinks:
                if inst.effects[t].access(dst_dir, buffer) is None:
                    continue
                rel = schedule[s].lex_lt_map(schedule[t]).intersect_domain(
                    inst.ops[s].domain).intersect_range(inst.ops[t].domain)
                if not rel.is_empty():
                    out.append(Dependence(kind, buffer, s, t, rel, approximate=True))
    return out
