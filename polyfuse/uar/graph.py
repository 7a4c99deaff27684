"""The UAR record: operations, their effects, labelled dependences and virtual dependences.

``build_uar(program)`` instantiates every operation (:mod:`.effects`), computes dataflow over the
host schedule (:mod:`.deps`) and labels every launch-to-launch edge with its width
(:mod:`.width`).  Edges touching a host operation are ``host`` edges, always ``global``.  Host
synchronizations are nodes with virtual edges (transitively reduced: from the operations since the
previous synchronization, to the operations up to the next one); kernel barriers are nodes of the
per-kernel graph :meth:`UAR.kernel_graph`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import islpy as isl
import networkx as nx
import sympy

from polyfuse.core.program import HostOp, Kernel, Launch, Program
from polyfuse.uar.deps import KINDS, dependences, host_schedule
from polyfuse.uar.effects import Effects, Instantiation, OpInstances, instantiate
from polyfuse.uar.width import WidthResult, classify_shared, pair_witness


def _jsonable(expr: Any) -> Any:
    if expr is None:
        return None
    e = sympy.sympify(expr)
    return int(e) if e.is_Integer else str(e)


@dataclass(frozen=True, eq=False)
class Edge:
    """A data dependence between two operations on one root buffer.

    ``relation`` relates the source's instances (``L<id>[h,g,l]`` / ``H<id>[h]``) to the
    destination's; ``conditions`` maps each label finer than ``width`` to the isl set string of
    the parameters where the edge has exactly that width; ``witness`` (global edges) is one
    concrete pair of instances with parameter values.
    """

    src: int
    dst: int
    src_kernel: Optional[str]
    dst_kernel: Optional[str]
    array: str
    kind: str
    width: str
    loop_carried: bool
    host: bool
    relation: isl.Map = field(compare=False, repr=False)
    conditions: dict[str, str] = field(default_factory=dict, compare=False)
    witness: Optional[dict] = field(default=None, compare=False, repr=False)
    #: label -> isl parameter set where the width is exactly that label
    regions: dict[str, isl.Set] = field(default_factory=dict, compare=False, repr=False)

    @property
    def relation_str(self) -> str:
        return str(self.relation)

    def to_json(self) -> dict:
        """The docs/interfaces.md ``edges`` object."""
        return {
            "src": self.src, "dst": self.dst,
            "src_kernel": self.src_kernel, "dst_kernel": self.dst_kernel,
            "array": self.array, "kind": self.kind, "width": self.width,
            "conditions": dict(self.conditions), "loop_carried": self.loop_carried,
            "relation": self.relation_str, "witness": self.witness, "host": self.host,
        }

    def _repr_html_(self) -> str:
        from polyfuse.report.display import edge_to_html

        return edge_to_html(self)


@dataclass(frozen=True)
class VirtualEdge:
    """An ordering without data: into and out of a host synchronization."""

    src: int
    dst: int
    reason: str = "sync"


@dataclass(frozen=True)
class LaunchInfo:
    """JSON-friendly facts about one launch (sizes are ints or expression strings)."""

    id: int
    kernel: str
    work_dim: int
    global_size: tuple
    local_size: Optional[tuple]
    host_loops: tuple
    instances: str  # the isl tuple, e.g. "L3[t, g0, l0]"

    def to_json(self) -> dict:
        return {
            "id": self.id, "kernel": self.kernel,
            "global_size": list(self.global_size),
            "local_size": None if self.local_size is None else list(self.local_size),
            "host_loops": [dict(lp) for lp in self.host_loops],
        }


@dataclass(frozen=True, eq=False)
class UAR:
    """The unified abstract representation of a program (immutable; caches aside)."""

    program: Program
    instantiation: Instantiation
    schedules: dict[int, isl.Map]
    edges: tuple[Edge, ...]
    virtual_edges: tuple[VirtualEdge, ...]
    launches: tuple[LaunchInfo, ...]
    _kernel_graphs: dict = field(default_factory=dict, repr=False)
    _memos: dict = field(default_factory=dict, repr=False)

    # -- accessors -----------------------------------------------------------------------------

    @property
    def context(self) -> isl.Set:
        """The parameter context (program context on every parameter of the analysis)."""
        return self.instantiation.context

    @property
    def params(self) -> tuple[str, ...]:
        return self.instantiation.params

    @property
    def fresh_params(self) -> dict[str, str]:
        """Parameters invented for values isl cannot express, with what they stand for."""
        return dict(self.instantiation.fresh_params)

    def effects(self, op_id: int) -> Effects:
        """Memory effects of an operation; ``.reads(level)``/``.writes(level)`` give isl maps."""
        return self.instantiation.effects[op_id]

    def instances(self, op_id: int) -> OpInstances:
        return self.instantiation.ops[op_id]

    def schedule(self, op_id: int) -> isl.Map:
        """The host-schedule map of an operation's instances."""
        return self.schedules[op_id]

    def edges_between(self, a: int, b: int) -> tuple[Edge, ...]:
        """Data edges from ``a`` to ``b``."""
        return tuple(e for e in self.edges if e.src == a and e.dst == b)

    def global_edges(self) -> tuple[Edge, ...]:
        return tuple(e for e in self.edges if e.width == "global")

    def memo(self, name: str) -> dict:
        """A dict, one per ``name``, for facts derived from this (immutable) UAR: planning asks
        the same question of one edge at every merge attempt."""
        memo = self._memos.get(name)
        if memo is None:
            memo = self._memos[name] = {}
        return memo

    def device_edges_from(self, op_id: int) -> tuple[tuple[int, Edge], ...]:
        """The launch-to-launch edges out of ``op_id``, each with its position in :attr:`edges`
        (an index: a long unrolled sequence has tens of thousands of edges)."""
        index = self.memo("device_edges_from")
        if not index:
            for k, e in enumerate(self.edges):
                if not e.host:
                    index.setdefault(e.src, []).append((k, e))
            index[None] = []  # built, even without device edges
        return tuple(index.get(op_id, ()))

    # -- views ---------------------------------------------------------------------------------

    def to_json(self) -> dict:
        """``{"launches": [...], "edges": [...]}`` as ``polyfuse analyze --json`` prints it."""
        return {
            "launches": [li.to_json() for li in self.launches],
            "edges": [e.to_json() for e in self.edges],
        }

    def to_networkx(self) -> nx.MultiDiGraph:
        """One node per operation, one edge per data dependence (+ virtual edges)."""
        g = nx.MultiDiGraph(name=self.program.name)
        infos = {li.id: li for li in self.launches}
        for op in self.program.ops:
            inst = self.instances(op.id)
            attrs: dict[str, Any] = {"kind": inst.kind, "tuple": inst.name}
            if isinstance(op, Launch):
                li = infos[op.id]
                attrs.update(kernel=op.kernel, label=f"{inst.name}: {op.kernel}",
                             global_size=li.global_size, local_size=li.local_size,
                             host_loops=li.host_loops, work_dim=op.work_dim)
            else:
                attrs.update(kernel=None, label=f"{inst.name}: {op.name or op.kind}",
                             op=op.kind, host_loops=_loops_json(op))
            g.add_node(op.id, **attrs)
        for e in self.edges:
            g.add_edge(e.src, e.dst, key=f"{e.kind}:{e.array}", width=e.width, kind=e.kind,
                       array=e.array, relation=e.relation_str, loop_carried=e.loop_carried,
                       host=e.host, conditions=dict(e.conditions), witness=e.witness,
                       virtual=False)
        for v in self.virtual_edges:
            g.add_edge(v.src, v.dst, key=f"virtual:{v.reason}", kind="virtual", width=None,
                       virtual=True, reason=v.reason, array=None, host=True,
                       loop_carried=False, conditions={}, witness=None, relation=None)
        return g

    def kernel_graph(self, launch_id: int) -> nx.DiGraph:
        """Statements and barriers of a launch's kernel, with work-group-local dependences.

        Data edges (``kind`` RAW/WAR/WAW, ``array``, ``address_space``, ``scope`` = ``thread``
        when only the same work-item is involved, else ``block``; ``deps`` lists every such
        dependence between the pair, the edge's own attributes are the first) relate statements
        whose instances in one work-group touch the same element; virtual edges run statement →
        next barrier → statements up to the following barrier.
        """
        if launch_id not in self._kernel_graphs:
            op = self.program.op(launch_id)
            if not isinstance(op, Launch):
                raise KeyError(f"operation {launch_id} is not a launch")
            self._kernel_graphs[launch_id] = _kernel_graph(self.program.kernels[op.kernel])
        return self._kernel_graphs[launch_id]

    def __repr__(self) -> str:
        """One line (the relations are in ``edges``; Jupyter shows the rich display)."""
        kernels = {li.kernel for li in self.launches}
        widths = {w: sum(1 for e in self.edges if e.width == w and not e.host)
                  for w in ("thread", "block", "global")}
        host = sum(1 for e in self.edges if e.host)
        params = f", parameters {', '.join(self.params)}" if self.params else ""
        return (f"<UAR {self.program.name!r}: {len(self.program.ops)} operations "
                f"({len(self.launches)} launches of {len(kernels)} kernels), "
                f"{len(self.edges)} dependence edges ("
                + ", ".join(f"{n} {w}" for w, n in widths.items())
                + f", {host} with a host operation), {len(self.virtual_edges)} virtual"
                + f"{params}>")

    def _repr_html_(self) -> str:
        from polyfuse.report.display import uar_to_html

        return uar_to_html(self)

    def to_svg(self, path: Union[str, os.PathLike, None] = None,
               launches_only: bool = False) -> str:
        """The drawing Jupyter shows, as standalone SVG (also written to ``path``)."""
        from polyfuse.report.display import uar_to_svg, write_text

        return write_text(uar_to_svg(self, launches_only), path)

    def to_dot(self, path: Union[str, os.PathLike, None] = None,
               launches_only: bool = False) -> str:
        """The drawing as Graphviz DOT (also written to ``path``): ``dot -Tpng`` renders it."""
        from polyfuse.report.display import uar_to_dot, write_text

        return write_text(uar_to_dot(self, launches_only), path)


# ----------------------------------------------------------------------------------------------
# Construction
# ----------------------------------------------------------------------------------------------


def _loops_json(op) -> list[dict]:
    return [{"iterator": lp.iterator, "lower": _jsonable(lp.lower),
             "upper": _jsonable(lp.upper), "step": lp.step} for lp in op.loops]


def _launch_info(launch: Launch, inst: OpInstances) -> LaunchInfo:
    return LaunchInfo(
        id=launch.id, kernel=launch.kernel, work_dim=launch.work_dim,
        global_size=tuple(_jsonable(x) for x in launch.global_size),
        local_size=None if launch.local_size is None else tuple(
            _jsonable(x) for x in launch.local_size),
        host_loops=tuple(_loops_json(launch)),
        instances=f"{inst.name}[{', '.join(inst.dims)}]",
    )


def _shared_loops(a: OpInstances, b: OpInstances) -> int:
    n = 0
    for x, y in zip(a.loop_ids, b.loop_ids):
        if x != y:
            break
        n += 1
    return n


def _loop_carried(rel: isl.Map, n: int) -> bool:
    if n == 0:
        return False
    sn, dn = rel.get_tuple_name(isl.dim_type.in_), rel.get_tuple_name(isl.dim_type.out)
    a = [f"a{i}" for i in range(rel.dim(isl.dim_type.in_))]
    b = [f"b{i}" for i in range(rel.dim(isl.dim_type.out))]
    same = " and ".join(f"a{i} = b{i}" for i in range(n))
    eq = isl.Map(f"{{ {sn}[{', '.join(a)}] -> {dn}[{', '.join(b)}] : {same} }}")
    return not rel.is_subset(eq.align_params(rel.get_space()))


def _virtual_edges(program: Program) -> list[VirtualEdge]:
    ops = program.ops
    syncs = [i for i, op in enumerate(ops) if isinstance(op, HostOp) and op.kind == "sync"]
    out: list[VirtualEdge] = []
    for n, p in enumerate(syncs):
        prev = syncs[n - 1] if n else -1
        nxt = syncs[n + 1] if n + 1 < len(syncs) else len(ops)
        before = range(prev + 1, p)
        if before:
            out += [VirtualEdge(ops[i].id, ops[p].id) for i in before]
        elif prev >= 0:
            out.append(VirtualEdge(ops[prev].id, ops[p].id))
        out += [VirtualEdge(ops[p].id, ops[i].id) for i in range(p + 1, nxt)]
    return out


#: the witness of a dependence the exact analysis could not compute within isl's quota
APPROXIMATE_REASON = ("dependence analysis exceeded isl's operation quota: every pair of "
                      "instances assumed dependent (not fused)")


def build_uar(program: Program) -> UAR:
    """Instantiate ``program``, compute its dependences and label each with its width."""
    inst = instantiate(program)
    schedules = host_schedule(inst)
    position = {op.id: k for k, op in enumerate(program.ops)}
    edges: list[Edge] = []
    widths: dict[tuple[str, str, int, int], WidthResult] = {}
    for dep in dependences(inst, schedules):
        src_op, dst_op = program.op(dep.src), program.op(dep.dst)
        si, di = inst.ops[dep.src], inst.ops[dep.dst]
        host = not (isinstance(src_op, Launch) and isinstance(dst_op, Launch))
        if dep.approximate:
            width, conditions, regions = "global", {}, {"global": inst.context}
            witness = pair_witness(dep.relation, inst.context, APPROXIMATE_REASON)
        elif host:
            width, conditions, regions = "global", {}, {"global": inst.context}
            witness = pair_witness(dep.relation, inst.context,
                                   "a host operation is at one end")
        else:
            res = classify_shared(dep.relation, inst.context, si.n_group_dims,
                                  di.n_group_dims, widths)
            width, conditions, regions, witness = (res.width, res.conditions, res.regions,
                                                   res.witness)
        edges.append(Edge(
            src=dep.src, dst=dep.dst,
            src_kernel=src_op.kernel if isinstance(src_op, Launch) else None,
            dst_kernel=dst_op.kernel if isinstance(dst_op, Launch) else None,
            array=dep.buffer, kind=dep.kind, width=width,
            loop_carried=_loop_carried(dep.relation, _shared_loops(si, di)), host=host,
            relation=dep.relation, conditions=conditions, witness=witness, regions=regions,
        ))
    edges.sort(key=lambda e: (position[e.src], position[e.dst], e.array, KINDS.index(e.kind)))
    launches = tuple(_launch_info(op, inst.ops[op.id]) for op in program.launches)
    return UAR(program=program, instantiation=inst, schedules=schedules, edges=tuple(edges),
               virtual_edges=tuple(_virtual_edges(program)), launches=launches)


# ----------------------------------------------------------------------------------------------
# Kernel-local graph
# ----------------------------------------------------------------------------------------------


def _same_dims_map(src: isl.Set, dst: isl.Set, n: int) -> isl.Map:
    sn, dn = src.get_tuple_name(), dst.get_tuple_name()
    a = [f"a{i}" for i in range(src.dim(isl.dim_type.set))]
    b = [f"b{i}" for i in range(dst.dim(isl.dim_type.set))]
    same = " and ".join([f"a{i} = b{i}" for i in range(n)] or ["0 = 0"])
    return isl.Map(f"{{ {sn}[{', '.join(a)}] -> {dn}[{', '.join(b)}] : {same} }}")


def _kernel_graph(kernel: Kernel) -> nx.DiGraph:
    g = nx.DiGraph(name=kernel.name)
    for s in kernel.statements:
        g.add_node(s.id, kind="statement", code=s.code, order=s.order)
    for b in kernel.barriers:
        g.add_node(b.id, kind="barrier", fences=sorted(b.fences), order=b.order,
                   uniform=b.uniform)
    stmts = list(kernel.statements)
    for i, s in enumerate(stmts):
        for t in stmts[i:]:
            _data_edges(g, s, t)
    items = sorted([(s.order, "s", s.id) for s in kernel.statements]
                   + [(b.order, "b", b.id) for b in kernel.barriers])
    last_barrier: Optional[str] = None
    pending: list[str] = []
    for _, what, ident in items:
        if what == "b":
            for s in pending:
                g.add_edge(s, ident, kind="virtual")
            if not pending and last_barrier is not None:
                g.add_edge(last_barrier, ident, kind="virtual")
            last_barrier, pending = ident, []
        else:
            if last_barrier is not None:
                g.add_edge(last_barrier, ident, kind="virtual")
            pending.append(ident)
    return g


def _data_edges(g: nx.DiGraph, s, t) -> None:
    for a in s.accesses:
        for b in t.accesses:
            if a.array != b.array or "write" not in (a.direction, b.direction):
                continue
            kind = {("write", "read"): "RAW", ("read", "write"): "WAR",
                    ("write", "write"): "WAW"}[(a.direction, b.direction)]
            try:
                ra = a.relation.intersect_domain(s.domain)
                rb = b.relation.intersect_domain(t.domain)
                rel = ra.apply_range(rb.reverse())
            except isl.Error:
                continue
            rel = rel.intersect(_same_dims_map(s.domain, t.domain, 3).align_params(
                rel.get_space()))
            if s is t:
                rel = rel.subtract(s.domain.identity().align_params(rel.get_space()))
            if rel.is_empty():
                continue
            same_item = _same_dims_map(s.domain, t.domain, 6).align_params(rel.get_space())
            scope = "thread" if rel.is_subset(same_item) else "block"
            dep = {"kind": kind, "array": a.array, "address_space": a.address_space,
                   "scope": scope, "relation": str(rel)}
            prev = g.get_edge_data(s.id, t.id)
            if prev and prev.get("kind") != "virtual":
                prev["deps"].append(dep)
                if scope == "block":
                    prev["scope"] = "block"
            else:
                g.add_edge(s.id, t.id, **dep, deps=[dep])
