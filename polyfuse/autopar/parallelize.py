"""Mapping a SCoP's loops onto OpenCL launches (KernelGen/PPCG-style, from exact dependences).

For a loop nest at host level (enclosing host loops ``H`` fixed):

1. In the perfect chain of loops starting there, every loop whose iterator no dependence crosses
   (with ``H`` equal; :func:`deps.carried_by` with ``p`` = its depth) can run in parallel while
   the others run sequentially, in original order, inside each work-item.  Up to three such loops
   (outermost first) become NDRange dimensions, the innermost of them dimension 0.  This covers
   plain parallel loops and legal interchanges (``bicg``'s ``s[j] += r[i]*A[i][j]``: ``j``).
2. Otherwise, if the loop has several children, it is distributed into the finest sequence of
   loops in which no dependence goes backwards (children joined by a backward dependence, or by
   a private scalar, stay together), and each piece is mapped again (``atax``, ``bicg``).
3. Otherwise the loop stays on the host (a *time* loop, as in Jacobi) and its body is mapped with
   the loop added to ``H``; inside such a loop, parts without parallelism run as one-work-item
   kernels so that data stays on the device.  If nothing below is parallel, the whole nest runs
   on the host as the original C code.

Loops that carry only the self-dependence of a reduction statement (``s += ...``) are reported as
reductions and not parallelized (reordering would change floating-point results).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional, Union

import islpy as isl
from pycparser import c_ast

from polyfuse.autopar import deps as D
from polyfuse.autopar.scop import Block, Item, Loop, Region, Stmt
from polyfuse.c import syntax

MAX_DIMS = 3


@dataclass
class KernelPlan:
    """One kernel: ``chain`` (perfect nest, outermost first) of which ``mapped`` are parallel.

    ``body`` are the children of the last chain loop (a subset after distribution).  A serial
    kernel (one work-item) has an empty chain and ``body`` the items it runs.
    """

    name: str
    host_loops: list[Loop]
    chain: list[Loop]
    mapped: list[Loop]
    body: list[Item]
    stmts: list[Stmt]

    @property
    def serial(self) -> bool:
        return not self.mapped

    def dim_of(self, loop: Loop) -> int:
        """NDRange dimension of a mapped loop: innermost mapped loop on dimension 0."""
        return len(self.mapped) - 1 - self.mapped.index(loop)


@dataclass
class HostLoopPlan:
    """A loop kept on the host around launches (e.g. a time loop)."""

    loop: Loop
    body: list[PlanNode]


@dataclass
class HostCode:
    """Items executed on the host as (reprinted) original C; ``loop`` set for a distributed
    piece of a loop (its header with ``items`` as body)."""

    items: list[Item]
    reason: str = ""


PlanNode = Union[KernelPlan, HostLoopPlan, HostCode]


@dataclass
class LoopInfo:
    """What the report says about one source loop."""

    loop: Loop
    status: str = "sequential"  # parallel | sequential | reduction
    carried: list[D.Carried] = field(default_factory=list)
    mapping: list[str] = field(default_factory=list)  # where it ended up (per kernel / host)
    hoistable: bool = False


@dataclass
class RegionPlan:
    region: Region
    deps: list[D.Dep]
    nodes: list[PlanNode]
    loops: dict[str, LoopInfo]
    notes: list[str] = field(default_factory=list)

    def kernels(self) -> list[KernelPlan]:
        out: list[KernelPlan] = []

        def walk(nodes: list[PlanNode]) -> None:
            for n in nodes:
                if isinstance(n, KernelPlan):
                    out.append(n)
                elif isinstance(n, HostLoopPlan):
                    walk(n.body)
        walk(self.nodes)
        return out


def _stmts(items: list[Item]) -> list[Stmt]:
    out: list[Stmt] = []
    for it in items:
        if isinstance(it, Loop):
            out += D.stmts_in(it)
        else:
            out += it.stmts
    return out


class _Planner:
    def __init__(self, region: Region):
        self.r = region
        self.deps = D.compute(region)
        self.nkernel = 0
        self.loops: dict[str, LoopInfo] = {}
        self.notes: list[str] = []
        for lp in region.loops:
            info = LoopInfo(lp)
            carried = D.carried_by(self.deps, D.stmts_in(lp), lp.depth, lp.depth)
            info.carried = carried
            if not carried:
                info.status = "parallel"
            elif all(c.reduction for c in carried):
                info.status = "reduction"
            self.loops[lp.id] = info

    def new_name(self) -> str:
        name = f"pf_r{self.r.index}_k{self.nkernel}"
        self.nkernel += 1
        return name

    def device_ok(self, stmts: list[Stmt]) -> Optional[str]:
        """Why these statements cannot run on the device (None if they can)."""
        for s in stmts:
            for a in s.accesses:
                if a.write and a.array in self.r.scalars_written:
                    return (f"statement at line {s.line} writes the scalar {a.array} declared "
                            f"outside the region")
        return None

    # -------------------------------------------------------------------------------------------

    def plan(self) -> list[PlanNode]:
        out: list[PlanNode] = []
        for item in self.r.tree:
            if isinstance(item, Loop):
                nodes = self.map_loop(item, [])
                if any(isinstance(n, (KernelPlan, HostLoopPlan)) for n in nodes):
                    out += nodes
                else:
                    out.append(HostCode([item], "no parallel loop"))
            else:
                out.append(HostCode([item], "statement outside loops"))
        # merge consecutive host code
        merged: list[PlanNode] = []
        for n in out:
            if isinstance(n, HostCode) and merged and isinstance(merged[-1], HostCode):
                merged[-1].items += n.items
            else:
                merged.append(n)
        return merged

    def chain(self, loop: Loop) -> list[Loop]:
        out = [loop]
        while len(out[-1].children) == 1 and isinstance(out[-1].children[0], Loop):
            out.append(out[-1].children[0])
        return out

    def map_loop(self, loop: Loop, host: list[Loop], split: bool = True) -> list[PlanNode]:
        stmts = D.stmts_in(loop)
        why = self.device_ok(stmts)
        if why:
            self.notes.append(f"loop at line {loop.line} stays on the host: {why}")
            return [HostCode([loop], why)]
        chain = self.chain(loop)
        par = []
        for c in chain:
            if c.step != 1:
                continue
            if not D.carried_by(self.deps, stmts, len(host), c.depth, limit=1):
                par.append(c)
                self.loops[c.id].hoistable = True
        if par:
            k = KernelPlan(self.new_name(), list(host), chain, par[:MAX_DIMS],
                           list(chain[-1].children), stmts)
            for c in chain:
                info = self.loops[c.id]
                if c in k.mapped:
                    info.mapping.append(f"{k.name}: NDRange dimension {k.dim_of(c)}")
                else:
                    info.mapping.append(f"{k.name}: sequential inside the work-item")
            for it in k.body:
                for lp in ([it] + _sub_loops(it)) if isinstance(it, Loop) else it.loops:
                    self.loops[lp.id].mapping.append(f"{k.name}: sequential inside the work-item")
            return [k]
        if split:
            pieces = self.split(loop, host)
            if len(pieces) > 1:
                merged = [pieces[0]]
                for piece in pieces[1:]:
                    cand = replace(loop, children=merged[-1].children + piece.children)
                    if self.hoist_ok(merged[-1], host) and self.hoist_ok(cand, host):
                        merged[-1] = cand
                    else:
                        merged.append(piece)
                if len(merged) > 1:
                    self.loops[loop.id].mapping.append(f"distributed into {len(merged)} loops")
                    out: list[PlanNode] = []
                    for piece in merged:
                        out += self.map_loop(piece, host, split=False)
                    return out
        body: list[PlanNode] = []
        for ch in loop.children:
            if isinstance(ch, Loop):
                body += self.map_loop(ch, host + [loop])
            else:
                body.append(HostCode([ch], "statement"))
        if any(isinstance(n, (KernelPlan, HostLoopPlan)) for n in body):
            final: list[PlanNode] = []
            for n in body:
                if isinstance(n, HostCode):
                    k = KernelPlan(self.new_name(), host + [loop], [], [], n.items,
                                   _stmts(n.items))
                    for it in n.items:
                        for lp in ([it] if isinstance(it, Loop) else []) + \
                                (_sub_loops(it) if isinstance(it, Loop) else []):
                            self.loops[lp.id].mapping.append(
                                f"{k.name}: one work-item (sequential)")
                    final.append(k)
                else:
                    final.append(n)
            self.loops[loop.id].mapping.append("host loop around launches")
            return [HostLoopPlan(loop, final)]
        return [HostCode([loop], "no parallel loop")]

    def hoist_ok(self, loop: Loop, host: list[Loop]) -> bool:
        """The loop can run in parallel with the host loops fixed (no dependence crosses it)."""
        return loop.step == 1 and not D.carried_by(self.deps, D.stmts_in(loop), len(host),
                                                   loop.depth, limit=1)

    def split(self, loop: Loop, host: list[Loop]) -> list[Loop]:
        """Finest legal distribution of the nest rooted at ``loop``, at every nesting level.

        A child loop alone in its group is split in turn (its pieces wrapped in copies of
        ``loop``); legality is checked with only the host loops held equal, so the pieces can
        run one after the other as whole nests.
        """
        out: list[Loop] = []
        for g in self.distribute(loop, host):
            if len(g) == 1 and isinstance(g[0], Loop):
                for sub in self.split(g[0], host):
                    out.append(replace(loop, children=[sub]))
            else:
                out.append(replace(loop, children=g))
        return out

    def distribute(self, loop: Loop, host: list[Loop]) -> list[list[Item]]:
        """Children of ``loop`` grouped into consecutive intervals with only forward deps."""
        kids = loop.children
        n = len(kids)
        where: dict[str, int] = {}
        for k, ch in enumerate(kids):
            for s in _stmts([ch]):
                where[s.id] = k
        link = [False] * n  # link[k]: child k stays in the same loop as child k - 1

        def join(a: int, b: int) -> None:
            for x in range(min(a, b) + 1, max(a, b) + 1):
                link[x] = True

        for d in self.deps:
            src = d.relation.get_tuple_name(isl.dim_type.in_)
            dst = d.relation.get_tuple_name(isl.dim_type.out)
            if src not in where or dst not in where:
                continue
            a, b = where[src], where[dst]
            if a > b and not D._pair_constraint(d.relation, len(host), None).is_empty():
                join(b, a)
        # private scalars declared in the loop body must stay with their uses
        for k, ch in enumerate(kids):
            node = ch.node
            if isinstance(node, c_ast.Decl):
                for j in range(k + 1, n):
                    if any(isinstance(x, c_ast.ID) and x.name == node.name
                           for x in syntax.walk(kids[j].node)):
                        join(k, j)
        groups: list[list[Item]] = []
        for k in range(n):
            if k and link[k]:
                groups[-1].append(kids[k])
            else:
                groups.append([kids[k]])
        return groups


def _sub_loops(loop: Loop) -> list[Loop]:
    out: list[Loop] = []
    for ch in loop.children:
        if isinstance(ch, Loop):
            out.append(ch)
            out += _sub_loops(ch)
        elif isinstance(ch, Block):
            out += ch.loops
    return out


def plan_region(region: Region) -> RegionPlan:
    """Dependences, per-loop verdicts and the launch plan of a modelled region."""
    p = _Planner(region)
    nodes = p.plan()
    for info in p.loops.values():
        if not info.mapping:
            info.mapping.append("host (original code)")
    return RegionPlan(region, p.deps, nodes, p.loops, p.notes)


def loop_reason(info: LoopInfo) -> dict[str, Any]:
    """The report entry of one loop."""
    lp = info.loop
    return {
        "loop": lp.id, "line": lp.line, "iterator": lp.iterator, "depth": lp.depth,
        "status": info.status,
        "carries": [c.to_json() for c in info.carried[:4]],
        "parallel_when_hoisted": info.hoistable,
        "mapping": info.mapping,
    }
