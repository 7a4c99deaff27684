"""Dependences between operation instances: exact dataflow over the host schedule (DESIGN §3).

The host schedule gives every instance of an operation the time of its host statement: a 2d+1
vector interleaving textual positions with host-loop iterators.  All work-items of one launch
instance share that time, so isl never orders them against each other: communication inside a
launch is not an inter-launch dependence.

RAW is the last-writer dataflow (``must`` sources: exact writes, ``may`` sources: approximated
writes).  WAR relates a write to the reads since the last exact write that covers the element
(reads are ``may`` sources, exact writes kill).  WAW relates a write to the last writer.  Flow is
computed per root buffer, with only the operations touching it, which keeps a long chain of
launches linear in its length.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Optional

import islpy as isl

from polyfuse.uar.effects import Instantiation

KINDS = ("RAW", "WAR", "WAW")


@dataclass(frozen=True, eq=False)
class Dependence:
    """One dependence relation between the instances of two operations on one root buffer."""

    kind: str
    buffer: str
    src: int
    dst: int
    relation: isl.Map


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


def dependences(inst: Instantiation, schedule: dict[int, isl.Map]) -> list[Dependence]:
    """All RAW, WAR and WAW dependences, one relation per (kind, buffer, src op, dst op)."""
    by_name = {oi.name: op_id for op_id, oi in inst.ops.items()}
    users: dict[str, list[int]] = defaultdict(list)
    for op in inst.program.ops:
        for b in inst.effects[op.id].buffers:
            users[b].append(op.id)
    out: list[Dependence] = []
    for buffer in sorted(users):
        ids = users[buffer]
        effs = [inst.effects[i] for i in ids]
        reads = _union(e.access("read", buffer) for e in effs)
        must_w = _union(e.must_writes.get(buffer) for e in effs)
        may_w = _union(e.may_writes.get(buffer) for e in effs)
        if must_w.is_empty() and may_w.is_empty():
            continue
        writes = must_w.union(may_w)
        sched = _union(schedule[i] for i in ids)
        flows = {
            "RAW": isl.UnionAccessInfo.from_sink(reads).set_must_source(must_w)
            .set_may_source(may_w),
            "WAR": isl.UnionAccessInfo.from_sink(writes).set_may_source(reads).set_kill(must_w),
            "WAW": isl.UnionAccessInfo.from_sink(writes).set_must_source(must_w)
            .set_may_source(may_w),
        }
        for kind in KINDS:
            if kind == "RAW" and reads.is_empty() or kind == "WAR" and reads.is_empty():
                continue
            dep = flows[kind].set_schedule_map(sched).compute_flow().get_may_dependence()
            found = []
            maps: list[isl.Map] = []
            dep.foreach_map(maps.append)
            for m in maps:
                m = m.coalesce()
                if m.is_empty():
                    continue
                src = by_name[m.get_tuple_name(isl.dim_type.in_)]
                dst = by_name[m.get_tuple_name(isl.dim_type.out)]
                found.append(Dependence(kind, buffer, src, dst, m))
            out.extend(found)
    return out
