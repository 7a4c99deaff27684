"""Global fusion (principles P2, P3) with the isl scheduler, and :func:`plan_fusion`.

After local fusion (:mod:`.local`) every group is one isl statement ``G<k>[h...]`` whose domain is
its host-loop iterations; host operations with memory effects are statements ``H<id>[h...]``
(synchronizations carry no data and are left out).  Validity constraints are all dependences
between different statements — the global edges that cut local fusion, any thread/block edge that
could not be fused, host edges — projected onto host-loop dims, plus the loop-carried part of the
dependences inside a group (so the host loop stays ordered); proximity is the same relation.
``isl.ScheduleConstraints.on_domain(...).set_validity(...).set_proximity(...).compute_schedule()``
gives the schedule tree; a long run of zero-dimensional statements (an unrolled host) gets its
topological sequence directly (:func:`_sequence_schedule`).

**Launch steps.**  A group's step is read from the tree below the host-loop bands: a ``sequence``
node places its children one after another, a ``set`` node (independent children) places them at
the same step.  Without host loops this is a scalar per group; with host loops it is the position
inside one iteration, and the band(s) above (possibly a wavefront) are reported as the group's
``schedule``.

**Keeping a global dependence out of one launch.**  Two groups run in one launch only when P3
fuses them, and P3 only considers groups at the *same* step.  After scheduling we check every
validity constraint between two statements of the same loop body that has a same-iteration
part: its source's step must be strictly smaller than its destination's.  isl's sequence/set
nodes guarantee this, but it is checked, not assumed: :func:`separate_steps` moves a destination
to a later step whenever a constraint is not strictly satisfied, propagating in topological
order.  The result is verified again by :func:`polyfuse.fusion.local.check_plan`.  Instances of
different host-loop iterations are never fused into one launch (a group runs once per
iteration), so a shift of a statement by isl along a host loop never puts two iterations in one
kernel; the plan keeps the host's loop order and reports isl's schedule only.

**P3.**  Groups at the same step, in the same loop body, whose members' kernels are identical
code in the same order (:mod:`.similarity`), with no dependence of any kind between them and a
legal common position, are fused: ``vertical`` (identical fused grids; each work-item runs the
fragments in sequence; re-indexings unchanged) or ``horizontal`` (grids concatenated along
dimension 0 of the group grid; the later group's re-indexings shift ``g0``).  ``auto`` tries
vertical first (SIRIUS measured it best for QKV), then horizontal.  Every fused group is checked
with isl (:func:`polyfuse.fusion.reindex.frame_problems`).

Orchestration labels: ``single`` (one fragment), ``vertical`` (every fused work-item runs its
fragments in sequence: P1 chains, vertical P3), ``horizontal`` (P3 of single launches side by
side), ``hybrid`` (P3 of P1 chains side by side: chains vertical, copies horizontal).
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional

import islpy as isl
import networkx as nx
import sympy

from polyfuse.core.islutil import coalesce, pwqp_to_sympy
from polyfuse.core.program import (
    REFERENCE_TARGET,
    HostOp,
    Launch,
    Target,
    UnsupportedError,
    host_loop_ids,
)
from polyfuse.fusion.decisions import (
    GroupStart,
    P3Merge,
    Refusal,
    Refused,
    StartReason,
    WavefrontSchedule,
)
from polyfuse.fusion.hetero import apart_reasons, hetero_fusion
from polyfuse.fusion.local import (
    LocalGroup,
    edge_key,
    local_fusion,
    placement_problem,
)
from polyfuse.fusion.plan import BlockedFusion, Fragment, FusedGroup, FusionPlan
from polyfuse.fusion.reindex import (
    FUSED,
    Frame,
    _ctx,
    frame_problems,
    in_iteration_empty,
    normalize,
    reindex_map,
)
from polyfuse.fusion.similarity import kernel_signature
from polyfuse.uar.graph import UAR

ORCHESTRATION_CHOICES = ("auto", "vertical", "horizontal", "hetero")


@dataclass
class Unit:
    """A statement of the global schedule: a group of launches or a host operation."""

    name: str
    members: tuple[int, ...]
    group: Optional[LocalGroup] = None
    orchestration: str = "single"
    #: structural signature of one copy (kept when P3 fuses identical copies)
    sig: tuple[str, ...] = ()


# ----------------------------------------------------------------------------------------------
# isl scheduling
# ----------------------------------------------------------------------------------------------


def _host_projection(uar: UAR, op_id: int, name: str) -> isl.Map:
    """``L<id>[h, g, l] -> <name>[h]``."""
    inst = uar.instances(op_id)
    dims = ", ".join(inst.dims)
    host = ", ".join(inst.host_dims)
    return isl.Map(f"{{ {inst.name}[{dims}] -> {name}[{host}] }}").align_params(
        inst.domain.get_space())


def _units_constraints(uar: UAR, units: Sequence[Unit]) -> tuple[isl.UnionSet, isl.UnionMap]:
    unit_of = {m: u for u in units for m in u.members}
    proj = {m: _host_projection(uar, m, u.name) for u in units for m in u.members}
    domains = []
    for u in units:
        m = u.members[0]
        dom = _ctx(uar, uar.instances(m).domain).apply(proj[m])
        domains.append(isl.UnionSet.from_set(dom))
    domain = _union_all(domains, isl.UnionSet("{ }"))
    relations = []
    for e in uar.edges:
        if e.src not in unit_of or e.dst not in unit_of:
            continue
        rel = proj[e.src].reverse().apply_range(e.relation.align_params(
            proj[e.src].get_space())).apply_range(proj[e.dst])
        rel = _ctx(uar, rel)
        if uar.instances(e.src).loop_ids == uar.instances(e.dst).loop_ids:
            rel = _forward(rel, strict=e.src >= e.dst)
        if unit_of[e.src] is unit_of[e.dst]:
            rel = rel.subtract(rel.domain().identity())  # loop-carried part only
        if not rel.is_empty():
            relations.append(isl.UnionMap.from_map(coalesce(rel)))
    return domain, _union_all(relations, isl.UnionMap("{ }"))


def _union_all(parts: list, empty: Any) -> Any:
    """The union of isl union sets (maps).  Joined one at a time, each union copies all the
    statements before it (quadratic in a long unrolled program): from
    :data:`DIRECT_SEQUENCE_MIN` parts on they are joined pairwise in a balanced tree (below,
    one at a time, which fixes the order isl prints them in, as the checked-in plans have it)."""
    if len(parts) < DIRECT_SEQUENCE_MIN:
        out = empty
        for p in parts:
            out = out.union(p)
        return out
    while len(parts) > 1:
        parts = [parts[k].union(parts[k + 1]) if k + 1 < len(parts) else parts[k]
                 for k in range(0, len(parts), 2)]
    return parts[0] if parts else empty


def _forward(rel: isl.Map, *, strict: bool) -> isl.Map:
    """The part of a dependence between host iterations of the same loops that goes forward
    in program order: to a later iteration, or to the same one when its source comes first
    (``strict`` when it does not).  A dependence never goes back in time; an edge relation
    over-approximated without order (a may-access of a whole buffer) must not make the
    schedule constraints cyclic."""
    n = rel.dim(isl.dim_type.in_)
    if n == 0 or n != rel.dim(isl.dim_type.out):
        return rel
    ins = [f"i{k}" for k in range(n)]
    outs = [f"o{k}" for k in range(n)]
    later = [" and ".join([f"{o} = {i}" for i, o in zip(ins[:k], outs[:k])]
                          + [f"{outs[k]} > {ins[k]}"]) for k in range(n)]
    if not strict:
        later.append(" and ".join(f"{o} = {i}" for i, o in zip(ins, outs)))
    src = rel.get_tuple_name(isl.dim_type.in_)
    dst = rel.get_tuple_name(isl.dim_type.out)
    order = isl.Map(f"{{ {src}[{', '.join(ins)}] -> {dst}[{', '.join(outs)}] : "
                    f"{' or '.join(f'({c})' for c in later)} }}")
    return rel.intersect(order.align_params(rel.get_space()))


def _names(us: isl.UnionSet) -> set[str]:
    out: set[str] = set()
    us.foreach_set(lambda s: out.add(s.get_tuple_name()))
    return out


def schedule_steps(schedule: isl.Schedule, names: set[str]) -> dict[str, int]:
    """Each statement's step read from the schedule tree (see module docstring)."""
    steps: dict[str, int] = {}
    T = isl.schedule_node_type

    def walk(node: isl.ScheduleNode, base: int, active: set[str]) -> int:
        t = node.get_type()
        if t == T.filter:
            active = active & _names(node.filter_get_filter())
        if t == T.leaf:
            for n in active:
                steps.setdefault(n, base)
            return 1 if active else 0
        if t == T.sequence:
            span = 0
            for i in range(node.n_children()):
                span += walk(node.get_child(i), base + span, active)
            return span
        if t == T.set:
            return max((walk(node.get_child(i), base, active)
                        for i in range(node.n_children())), default=0)
        span = 0
        for i in range(node.n_children()):
            span = max(span, walk(node.get_child(i), base, active))
        return span

    walk(schedule.get_root(), 0, set(names))
    for n in names:
        steps.setdefault(n, 0)
    return steps


def separate_steps(steps: dict[str, int], constraints: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Steps where every constraint ``(a, b)`` has ``steps[a] < steps[b]`` (moved only later).

    This is how a dependence between two statements is kept out of one launch whatever the
    scheduler did: equal (or reversed) steps are separated by pushing the destination to the
    step after its source, in topological order.  Raises ValueError on a cyclic constraint set.
    """
    g = nx.DiGraph()
    g.add_nodes_from(steps)
    g.add_edges_from((a, b) for a, b in constraints if a != b)
    if not nx.is_directed_acyclic_graph(g):
        raise ValueError("cyclic validity constraints between launch groups")
    out = dict(steps)
    for n in nx.topological_sort(g):
        for p in g.predecessors(n):
            if out[p] >= out[n]:
                out[n] = out[p] + 1
    return out


def asap_steps(steps: dict[str, int], constraints: Sequence[tuple[str, str]],
               host_ops: set[str]) -> dict[str, int]:
    """Launch steps as early as the constraints allow; host operations take no step.

    isl's schedule of zero-dimensional statements is a sequence that interleaves independent
    components with their host writes (QKV: write Wq, G0, write Wk, G1, ...), which would give
    identical independent branches different steps and hide them from P3.  The isl order stays
    the reported schedule; the step used for P3 is the ASAP level of each group in the same
    constraint DAG (every dependence still goes from a lower step to a higher one, checked by
    ``check_plan``), counting only kernel launches.
    """
    g = nx.DiGraph()
    g.add_nodes_from(steps)
    g.add_edges_from((a, b) for a, b in constraints if a != b)
    level: dict[str, int] = {}
    for n in nx.topological_sort(g):
        level[n] = max((level[p] + (0 if p in host_ops else 1) for p in g.predecessors(n)),
                       default=1)
    return level


def _step_constraints(uar: UAR, units: Sequence[Unit]) -> list[tuple[str, str]]:
    """Pairs of statements of one loop body joined by a dependence with a same-iteration part."""
    unit_of = {m: u for u in units for m in u.members}
    out: set[tuple[str, str]] = set()
    for e in uar.edges:
        a, b = unit_of.get(e.src), unit_of.get(e.dst)
        if a is None or b is None or a is b:
            continue
        if uar.instances(e.src).loop_ids != uar.instances(e.dst).loop_ids:
            continue
        if e.src >= e.dst:  # within one iteration a dependence goes from earlier to later
            continue
        if not in_iteration_empty(uar, e):
            out.add((a.name, b.name))
    return sorted(out)


#: from this many statements, all zero-dimensional (no host loop left: a long unrolled run
#: of launches), the schedule is their topological sequence, built directly: it is what isl's
#: scheduler gives such statements, at a cost that grows much faster than their number
DIRECT_SEQUENCE_MIN = 96


def _sequence_schedule(domain: isl.UnionSet, validity: isl.UnionMap,
                       order: Sequence[str]) -> Optional[isl.Schedule]:
    """The schedule of zero-dimensional statements as a sequence in a topological order of
    the validity constraints (ties in program ``order``); None where a statement has host
    dimensions, there are fewer than :data:`DIRECT_SEQUENCE_MIN`, or the constraints are
    cyclic (isl then decides)."""
    sets = domain.get_set_list()
    n = sets.n_set()
    if n < DIRECT_SEQUENCE_MIN or any(sets.get_at(k).dim(isl.dim_type.set) > 0
                                      for k in range(n)):
        return None
    rank = {name: k for k, name in enumerate(order)}
    g = nx.DiGraph()
    g.add_nodes_from(sets.get_at(k).get_tuple_name() for k in range(n))
    validity.foreach_map(lambda m: g.add_edge(m.get_tuple_name(isl.dim_type.in_),
                                              m.get_tuple_name(isl.dim_type.out)))
    g.remove_edges_from(nx.selfloop_edges(g))
    if not nx.is_directed_acyclic_graph(g):
        return None
    ctx = domain.get_ctx()
    filters = isl.UnionSetList.alloc(ctx, n)
    for name in nx.lexicographical_topological_sort(g, key=lambda v: rank.get(v, len(rank))):
        filters = filters.add(isl.UnionSet(f"{{ {name}[] }}", context=ctx))
    root = isl.Schedule.from_domain(domain).get_root()
    return root.child(0).insert_sequence(filters).get_schedule()


def _compute_schedule(domain: isl.UnionSet, validity: isl.UnionMap,
                      order: Sequence[str] = ()) -> isl.Schedule:
    """isl's schedule of the units (a long run of zero-dimensional ones: their topological
    sequence, :func:`_sequence_schedule`); where its default (Pluto-like) algorithm cannot
    carry the dependences, Feautrier's algorithm (which carries them one by one); else a
    refusal naming the cause rather than an isl error."""
    direct = _sequence_schedule(domain, validity, order)
    if direct is not None:
        return direct
    sc = isl.ScheduleConstraints.on_domain(domain).set_validity(validity).set_proximity(validity)
    try:
        return sc.compute_schedule()
    except isl.Error:
        pass
    ctx = domain.get_ctx()
    algorithm = ctx.get_schedule_algorithm()
    ctx.set_schedule_algorithm(1)  # ISL_SCHEDULE_ALGORITHM_FEAUTRIER
    try:
        return sc.compute_schedule()
    except isl.Error as err:
        raise UnsupportedError("global fusion: isl finds no affine schedule of the fusion "
                               f"groups that carries their host-loop dependences ({err})"
                               ) from None
    finally:
        ctx.set_schedule_algorithm(algorithm)


def global_schedule(uar: UAR, units: Sequence[Unit]) -> tuple[isl.Schedule, dict[str, int]]:
    """The isl schedule of all statements and each statement's (separated) launch step."""
    domain, validity = _units_constraints(uar, units)
    schedule = _compute_schedule(domain, validity, [u.name for u in units])
    constraints = _step_constraints(uar, units)
    steps = schedule_steps(schedule, {u.name for u in units})
    steps = separate_steps(steps, constraints)
    return schedule, asap_steps(steps, constraints, {u.name for u in units if u.group is None})


def wavefront_schedules(uar: UAR, units: Sequence[Unit]
                        ) -> dict[str, tuple[isl.Map, WavefrontSchedule]]:
    """Wavefront schedules of groups in a nest of two or more host loops (SIRIUS §7.5).

    A recurrence such as a stacked RNN over (layer, time) carries dependences along both host
    loops, so neither loop alone is parallel; its launches on one anti-diagonal are independent.
    For each such group the wavefront ``G[i0..in] -> [i0 + ... + in, i1, ..., in]`` is kept
    when isl proves that every loop-carried dependence of the group strictly increases the
    wavefront coordinate (so the order is legal and the launches of one wavefront step are
    mutually independent).  Only a group alone in its loop nest is considered (otherwise a chain
    of dependences through another statement of the nest could join two launches of one
    anti-diagonal).  Returned per group name with a one-line note; the plan reports it, and
    code generation runs such a group once per wavefront step (``fused.cl``, the runtime and
    ``fused_host.c``: :mod:`polyfuse.codegen.wavefront`).
    """
    domain, validity = _units_constraints(uar, units)
    out: dict[str, tuple[isl.Map, str]] = {}
    outer = {u.name: uar.instances(u.members[0]).loop_ids[:1] for u in units}
    for u in units:
        if u.group is None or len(u.group.frame.host_dims) < 2:
            continue
        if any(v is not u and outer[v.name] and outer[v.name] == outer[u.name] for v in units):
            # another statement in the same loop nest could chain two launches of one
            # anti-diagonal through itself; only a group alone in its nest is claimed
            continue
        dims = list(u.group.frame.host_dims)
        space = f"{u.name}[{', '.join(dims)}]"
        dom = isl.UnionSet.from_set(_ctx(uar, isl.Set(f"{{ {space} }}")))
        self_deps = validity.intersect_domain(dom).intersect_range(dom)
        if self_deps.is_empty():
            continue
        carried_outer = self_deps.intersect(isl.UnionMap(
            f"{{ {space} -> {u.name}[{', '.join(d + '_' for d in dims)}] : "
            f"{dims[0]}_ > {dims[0]} }}"))
        if carried_outer.is_empty():
            continue  # the outer loop is parallel already: no wavefront needed
        front = " + ".join(dims)
        wave = isl.Map(f"{{ {space} -> [{front}, {', '.join(dims[1:])}] }}")
        wave_u = isl.UnionMap.from_map(wave)
        steps = self_deps.apply_domain(wave_u).apply_range(wave_u)
        first = isl.UnionMap(f"{{ [w, {', '.join(d + 'a' for d in dims[1:])}] -> "
                             f"[w2, {', '.join(d + 'b' for d in dims[1:])}] : w2 <= w }}")
        if not steps.intersect(first).is_empty():
            continue  # some dependence stays within a wavefront step (or goes backwards)
        n_fronts = _ctx(uar, uar.instances(u.members[0]).domain).apply(
            _host_projection(uar, u.members[0], u.name)).apply(wave).project_out(
            isl.dim_type.set, 1, len(dims) - 1)
        count = str(n_fronts.card()).strip() if hasattr(n_fronts, "card") else ""
        if count.startswith("{") and count.endswith("}") and ":" not in count:
            count = count[1:-1].strip()  # a constant: "{ 6 }" -> "6"
        out[u.name] = (wave, WavefrontSchedule(front, count))
    return out


def wavefront_proof(uar: UAR, members: Sequence[int]) -> Optional[str]:
    """Why the launches ``members`` (one group in a nest of two host loops) cannot run along
    the wavefront ``outer + inner``, or None when isl proves they can: every dependence among
    their instances of different iterations goes to a strictly later anti-diagonal, and nothing
    else of the program runs in their loop nest.  Code generation checks it again before
    restructuring the loops, so a plan read back from ``plan.json`` is never trusted."""
    ids = host_loop_ids(uar.program.ops)
    first = ids[members[0]][:1]
    if len(ids[members[0]]) != 2 or any(ids[m] != ids[members[0]] for m in members):
        return "the group's launches are not all in one nest of two host loops"
    others = [op.id for op in uar.program.ops if op.id not in members and ids[op.id][:1] == first
              and not (isinstance(op, HostOp) and op.kind == "sync")]
    if others:
        return f"operation {others[0]} also runs in the loop nest"
    unit = types.SimpleNamespace(name="W", members=tuple(members))
    _domain, validity = _units_constraints(uar, [unit])
    wave = isl.UnionMap("{ W[a, b] -> [a + b] }")
    steps = validity.apply_domain(wave).apply_range(wave)
    if not steps.intersect(isl.UnionMap("{ [x] -> [y] : y <= x }")).is_empty():
        return "a dependence stays within a wavefront step (or goes backwards)"
    return None


# ----------------------------------------------------------------------------------------------
# P3
# ----------------------------------------------------------------------------------------------


def _signature(uar: UAR, u: Unit, memo: Optional[dict[tuple, str]] = None
               ) -> tuple[str, ...]:
    return tuple(kernel_signature(uar.program.kernels[_launch(uar, m).kernel], memo)
                 for m in u.members)


def _launch(uar: UAR, lid: int) -> Launch:
    op = uar.program.op(lid)
    assert isinstance(op, Launch)
    return op


def _connected(uar: UAR, a: Unit, b: Unit) -> bool:
    sa, sb = set(a.members), set(b.members)
    return any((e.src in sa and e.dst in sb) or (e.src in sb and e.dst in sa) for e in uar.edges)


def _vertical(uar: UAR, fa: Frame, fb: Frame) -> tuple[Optional[Frame], str]:
    if (fa.work_dim, fa.local_size, len(fa.host_dims)) != (fb.work_dim, fb.local_size,
                                                           len(fb.host_dims)):
        return None, "different work-group shapes"
    assert fa.grid is not None and fb.grid is not None
    if not fa.grid.is_equal(fb.grid.align_params(fa.grid.get_space())):
        return None, "different fused grids"
    maps = {**fa.maps, **fb.maps}
    frame = replace(fa, maps=maps, barriers=fa.barriers | fb.barriers, anchor=fa.anchor)
    return frame, ""


def _horizontal(uar: UAR, fa: Frame, fb: Frame) -> tuple[Optional[Frame], str]:
    if (fa.work_dim, fa.local_size, len(fa.host_dims)) != (fb.work_dim, fb.local_size,
                                                           len(fb.host_dims)):
        return None, "different work-group shapes"
    if fa.work_dim == 0 or not isinstance(fa.groups[0], int):
        return None, "symbolic number of work-groups in dimension 0"
    if fa.groups[1:] != fb.groups[1:]:
        return None, "different grids beyond dimension 0"
    off = fa.groups[0]
    nh = len(fa.host_dims)
    src = list(fa.dims)
    dst = list(src)
    dst[nh] = f"g0 - {off}"
    shift = isl.Map(f"{{ {FUSED}[{', '.join(src)}] -> {FUSED}[{', '.join(dst)}] }}")
    maps = dict(fa.maps)
    for k, r in fb.maps.items():
        maps[k] = coalesce(_ctx(uar, shift.align_params(r.get_space()).apply_range(r)))
    frame = normalize(uar, replace(fa, maps=maps, grid=None, anchor=None,
                                   barriers=fa.barriers | fb.barriers))
    if frame is None:
        return None, "concatenated grid is not a box of whole work-groups"
    return frame, ""


def p3_fusion(uar: UAR, units: list[Unit], steps: dict[str, int], orchestration: str,
              graph: nx.DiGraph) -> list[Unit]:
    """Fuse same-step groups with identical code and no edge between them (P3)."""
    modes = {"auto": ["vertical", "horizontal"], "vertical": ["vertical"],
             "horizontal": ["horizontal"]}[orchestration]
    pos = {op.id: k for k, op in enumerate(uar.program.ops)}
    groups = [u for u in units if u.group is not None]
    groups.sort(key=lambda u: pos[u.members[0]])
    alive = list(groups)
    changed = True
    while changed:
        changed = False
        for i, a in enumerate(alive):
            for b in alive[i + 1:]:
                if steps[a.name] != steps[b.name]:
                    continue
                ia, ib = uar.instances(a.members[0]), uar.instances(b.members[0])
                if ia.loop_ids != ib.loop_ids or a.sig != b.sig:
                    continue
                if _connected(uar, a, b):
                    continue
                unit_of = {m: id(u) for u in alive for m in u.members}
                if placement_problem(uar, graph, a.members + b.members, unit_of):
                    continue
                assert a.group is not None and b.group is not None
                for mode in modes:
                    fn = _vertical if mode == "vertical" else _horizontal
                    frame, why = fn(uar, a.group.frame, b.group.frame)
                    if frame is None:
                        continue
                    order = sorted(frame.maps, key=lambda m: pos[m])
                    frame = replace(frame, maps={m: frame.maps[m] for m in order})
                    problems, need = frame_problems(uar, frame)
                    if problems:
                        continue
                    frame = replace(frame, barriers=need)
                    # hybrid = P1 chains (vertical inside) placed side by side
                    multi = any(u.orchestration in ("vertical", "hybrid") and len(u.members) > 1
                                for u in (a, b))
                    if mode == "vertical":
                        orch = "hybrid" if "horizontal" in (a.orchestration, b.orchestration) \
                            or "hybrid" in (a.orchestration, b.orchestration) else "vertical"
                    else:
                        orch = "hybrid" if multi else "horizontal"
                    notes = a.group.notes + b.group.notes + [
                        P3Merge(tuple(b.members), tuple(a.members), mode, steps[a.name])]
                    merged = LocalGroup(frame, notes, a.group.how | b.group.how | {"P3"})
                    a.group, a.members, a.orchestration = merged, tuple(order), orch
                    alive.remove(b)
                    changed = True
                    break
                if changed:
                    break
            if changed:
                break
    hosts = [u for u in units if u.group is None]
    return alive + hosts


# ----------------------------------------------------------------------------------------------
# Counts
# ----------------------------------------------------------------------------------------------


def _trip_count(uar: UAR, op_id: int) -> sympy.Expr:
    """Executions of an operation: its host-loop iterations (barvinok), 1 without loops."""
    inst = uar.instances(op_id)
    dom = _ctx(uar, inst.domain)
    n = len(inst.host_dims)
    host = dom.project_out(isl.dim_type.set, n, dom.dim(isl.dim_type.set) - n)
    if n == 0:
        return sympy.Integer(0 if host.is_empty() else 1)
    return sympy.sympify(pwqp_to_sympy(host.card(), uar.context))


def _count_value(expr: sympy.Expr) -> Any:
    expr = sympy.simplify(expr)
    return int(expr) if expr.is_Integer else str(expr)


# ----------------------------------------------------------------------------------------------
# The plan
# ----------------------------------------------------------------------------------------------


def _global_size(uar: UAR, frame: Frame) -> tuple[Any, ...]:
    out: list[Any] = []
    info = {li.id: li for li in uar.launches}
    for d in range(frame.work_dim):
        cnt = frame.groups[d] if d < len(frame.groups) else None
        ls = frame.local_size[d]
        if isinstance(cnt, int):
            out.append(cnt * ls)
        elif frame.anchor is not None:
            out.append(info[frame.anchor].global_size[d])
        else:
            out.append(f"{ls}*({cnt})")
    return tuple(out)


def plan_fusion(uar: UAR, *, orchestration: str = "auto", anchor: str = "auto",
                target: Target = REFERENCE_TARGET) -> FusionPlan:
    """The fusion plan of a program's UAR: local fusion (P1), then isl global fusion (P2, P3).

    ``orchestration``: how P3 fuses independent groups (``auto``: vertical, else horizontal;
    ``horizontal`` also keeps a common consumer out of its producers' groups, so that they
    stay independent and run side by side);
    ``anchor``: how re-indexing is anchored in local fusion (``auto``, ``producer``,
    ``consumer``); ``target``: the device's limits (independent launches whose ``__local``
    memory together exceeds it are left apart).  Every group of the result passes
    :func:`polyfuse.fusion.check_plan`.  With ``auto`` for both, a program of few launches is
    also planned by exhaustive search (:mod:`.exhaustive`), kept when it needs fewer launches.
    """
    if orchestration not in ORCHESTRATION_CHOICES:
        raise ValueError(f"orchestration must be one of {ORCHESTRATION_CHOICES}, "
                         f"not {orchestration!r}")
    local = local_fusion(uar, anchor, join_producers=orchestration != "horizontal")
    units: list[Unit] = []
    bodies: dict[tuple, str] = {}  # function bodies walked, shared by identical layers
    for k, g in enumerate(local.groups):
        u = Unit(f"G{k}", g.frame.members, g,
                 "single" if len(g.frame.members) == 1 else "vertical")
        u.sig = _signature(uar, u, bodies)
        units.append(u)
    for op in uar.program.ops:
        if isinstance(op, HostOp) and op.kind != "sync":
            units.append(Unit(f"H{op.id}", (op.id,)))
    schedule, steps = global_schedule(uar, units)
    waves = wavefront_schedules(uar, units)
    units = p3_fusion(uar, units, steps, "auto" if orchestration == "hetero" else orchestration,
                      local.graph)
    if orchestration == "hetero":
        units = hetero_fusion(uar, units, steps, local.graph, target)
    starters = [n.launch for g in local.groups for n in g.notes if isinstance(n, GroupStart)]
    plan = assemble_plan(uar, units, schedule, steps, waves, local.reasons, starters,
                         local.graph, hetero=orchestration == "hetero", target=target)
    if (orchestration, anchor) != ("auto", "auto"):
        return plan  # a chosen orchestration or anchoring is kept as asked
    from polyfuse.fusion.exhaustive import fewest_launches

    return fewest_launches(plan, target)


def assemble_plan(uar: UAR, units: list[Unit], schedule: isl.Schedule, steps: dict[str, int],
                  waves: dict[str, tuple[isl.Map, WavefrontSchedule]],
                  reasons: dict[tuple[int, int, str, str], Refusal], starters: list[int],
                  graph: nx.DiGraph, *, hetero: bool, target: Target) -> FusionPlan:
    """The plan of the final ``units`` (groups and host operations) at their launch ``steps``;
    ``reasons`` say why an edge between groups was not fused, ``starters`` are the launches
    that started a group (both for report.md).  Shared by the greedy planner and the
    exhaustive search (:mod:`.exhaustive`)."""
    sched_map = schedule.get_map()
    pos = {op.id: k for k, op in enumerate(uar.program.ops)}
    groups = [u for u in units if u.group is not None]
    groups.sort(key=lambda u: (steps[u.name], pos[u.members[0]]))
    fused: list[FusedGroup] = []
    for gid, u in enumerate(groups):
        assert u.group is not None
        frame = u.group.frame
        frags = tuple(Fragment(launch=m, kernel=_launch(uar, m).kernel,
                               reindex=reindex_map(_named(frame, frame.maps[m])),
                               barrier_before=m in frame.barriers)
                      for m in u.members)
        gsched = sched_map.intersect_domain(isl.UnionSet(
            f"{{ {u.name}[{', '.join(frame.host_dims)}] }}")) if frame.host_dims else None
        notes = tuple(u.group.notes)
        if u.name in waves:
            gsched, note = waves[u.name]
            notes += (note,)
        fused.append(FusedGroup(
            id=gid, members=tuple(u.members),
            orchestration="single" if len(u.members) == 1 else u.orchestration,
            fragments=frags, step=steps[u.name], global_size=_global_size(uar, frame),
            local_size=tuple(frame.local_size), notes=notes,
            schedule=None if gsched is None else str(gsched)))
    before = sum((_trip_count(uar, op.id) for op in uar.program.launches), sympy.Integer(0))
    after = sum((_trip_count(uar, g.members[0]) for g in fused), sympy.Integer(0))
    group_of = {m: g.id for g in fused for m in g.members}
    blocked: list[BlockedFusion] = []
    for e in uar.edges:
        if e.host or group_of.get(e.src) == group_of.get(e.dst):
            continue
        reason = reasons.get(edge_key(e))
        if reason is None:
            kind = Refused.GLOBAL if e.width == "global" else Refused.ENDPOINTS
            reason = Refusal(kind, kind.value)
        blocked.append(BlockedFusion(src=e.src, dst=e.dst, array=e.array, kind=e.kind,
                                     width=e.width, reason=reason, witness=e.witness))
    return FusionPlan(program=uar.program, uar=uar, groups=tuple(fused),
                      launches_before=_count_value(before), launches_after=_count_value(after),
                      blocked=tuple(blocked), schedule=str(schedule),
                      starts=_start_reasons(uar, starters, reasons, groups, steps, group_of),
                      apart=tuple(apart_reasons(uar, units, steps, graph, hetero, target)))


def _start_reasons(uar: UAR, starters: list[int],
                   reasons: dict[tuple[int, int, str, str], Refusal], groups: list[Unit],
                   steps: dict[str, int], group_of: dict[int, int]) -> dict[int, StartReason]:
    """Why each launch that starts a local group does (data for report.md)."""
    from polyfuse.fusion.explain import start_reasons

    return start_reasons(uar, starters, reasons, edge_key, group_of,
                         {gid: steps[u.name] for gid, u in enumerate(groups)},
                         {gid: u.sig for gid, u in enumerate(groups)},
                         {gid: uar.instances(u.members[0]).loop_ids
                          for gid, u in enumerate(groups)})


def _named(frame: Frame, rel: isl.Map) -> isl.Map:
    """The re-indexing with the fused grid's dim names (readable plans)."""
    for i, name in enumerate(frame.dims):
        if i < rel.dim(isl.dim_type.in_):
            rel = rel.set_dim_name(isl.dim_type.in_, i, name)
    return rel
