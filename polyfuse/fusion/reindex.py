"""Re-indexing: placing launches into one fused grid so that every dependence stays inside it.

A *frame* is a fused grid ``F[h..., g0.., l0..]`` (host-loop iterators, group ids, local ids)
with one re-indexing map per member launch, ``R_X : F -> L<X>[h..., g.., l..]``.  The frame is
legal (:func:`frame_problems`) when

* each ``R_X`` is single-valued and injective and its range is exactly the launch's work-item set
  (every original work-item runs exactly once);
* for every dependence ``D`` between members (same host-loop iteration; the loop-carried part is
  satisfied by the host loop order because a group is launched once per iteration),
  ``R_X ; D ; R_Y^-1`` is inside the identity of ``F`` (``thread``: the pair runs in one fused
  work-item, ``X``'s fragment first) or inside "same fused work-group" (``block``: the later
  fragment gets ``barrier_before``);
* a *structured* fragment (its kernel has barriers, ``__local`` memory, or reads local ids or
  sizes) keeps its work-groups: ``R_X`` leaves local ids unchanged, maps fused groups one-to-one
  onto its groups, and its local size is the fused local size;
* the union of the fragments' domains is a box of whole work-groups (translated so that group
  ids start at 0); fragments are guarded by their domains.

Candidates come from the dependences themselves (:func:`merge_frames`): for frames ``A`` (kept)
and ``B`` joined by an edge ``X -> Y`` the relation ``T = R_Y ; D^-1 ; R_X^-1 : F_A -> F_B`` (or
its mirror) must be a partial bijection; candidates are ``T`` itself, then each affine piece of
``T`` as a ``PwMultiAff`` extended to all of ``F_A`` (so a fragment that is only partly reached by
the dependence still lands whole), then, for block edges, the group-level piece with local ids
unchanged.  Every candidate is *checked* with isl (:func:`frame_problems`); nothing is assumed.

Written here rather than taken from isl: the box test (isl has no "is a box" predicate; we compare
the set with the product of its one-dimensional projections) and the candidate generation (isl
gives the pieces, choosing among them is ours).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import islpy as isl

from polyfuse.core.islutil import IslQuotaExceeded, bounded, coalesce
from polyfuse.core.program import Kernel, Launch
from polyfuse.uar.graph import UAR, Edge
from polyfuse.uar.width import classify

FUSED = "F"

#: work-item functions whose use ties a kernel to its work-group shape
_LOCAL_FUNCTIONS = frozenset({"get_local_id", "get_local_size"})


# ----------------------------------------------------------------------------------------------
# Small isl helpers
# ----------------------------------------------------------------------------------------------


def _ctx(uar: UAR, obj: Any) -> Any:
    """``obj`` restricted to the program's parameter context (aligned)."""
    ctx = uar.context.align_params(obj.get_space())
    return obj.align_params(ctx.get_space()).intersect_params(ctx)


def same_iteration(rel: isl.Map, n: int) -> isl.Map:
    """The part of a dependence whose first ``n`` (shared host-loop) dims are equal."""
    if n == 0:
        return rel
    n_in, n_out = rel.dim(isl.dim_type.in_), rel.dim(isl.dim_type.out)
    sn, dn = rel.get_tuple_name(isl.dim_type.in_), rel.get_tuple_name(isl.dim_type.out)
    a = [f"a{i}" for i in range(n_in)]
    b = [f"b{i}" for i in range(n_out)]
    eq = " and ".join(f"a{i} = b{i}" for i in range(n))
    m = isl.Map(f"{{ {sn}[{', '.join(a)}] -> {dn}[{', '.join(b)}] : {eq} }}")
    return rel.intersect(m.align_params(rel.get_space()))


def shared_loops(uar: UAR, a: int, b: int) -> int:
    """Number of host loops enclosing both operations."""
    la, lb = uar.instances(a).loop_ids, uar.instances(b).loop_ids
    n = 0
    for x, y in zip(la, lb):
        if x != y:
            break
        n += 1
    return n


def edge_in_iteration(uar: UAR, e: Edge) -> isl.Map:
    """The same-iteration part of an edge (all of it when no host loop is shared), computed
    once per edge: planning a long unrolled sequence asks for it a million times."""
    memo = uar.memo("edge_in_iteration")
    rel = memo.get(e)
    if rel is None:
        rel = memo[e] = same_iteration(e.relation, shared_loops(uar, e.src, e.dst))
    return rel


def in_iteration_empty(uar: UAR, e: Edge) -> bool:
    """Whether an edge has no same-iteration part (decided once per edge)."""
    memo = uar.memo("in_iteration_empty")
    empty = memo.get(e)
    if empty is None:
        empty = memo[e] = edge_in_iteration(uar, e).is_empty()
    return empty


def iteration_width(uar: UAR, e: Edge) -> tuple[str, Optional[dict]]:
    """Width (and witness) of the same-iteration part of a launch-to-launch edge (computed
    once per edge, like :func:`edge_in_iteration`)."""
    memo = uar.memo("iteration_width")
    got = memo.get(e)
    if got is None:
        got = memo[e] = _iteration_width(uar, e)
    return got


def _iteration_width(uar: UAR, e: Edge) -> tuple[str, Optional[dict]]:
    n = shared_loops(uar, e.src, e.dst)
    if n == 0 or not e.loop_carried:
        return e.width, e.witness
    rel = same_iteration(e.relation, n)
    if rel.is_empty():
        return "thread", None
    res = classify(rel, uar.context, uar.instances(e.src).n_group_dims,
                   uar.instances(e.dst).n_group_dims)
    return res.width, res.witness


def is_bijective(m: isl.Map) -> bool:
    """Single-valued and injective for every parameter value (isl decides, no sampling).

    Equalities hidden in floor/mod constraints are made explicit first: a blocked kernel's
    identity between work-items, written with divisions, took isl seconds to test."""
    m = m.detect_equalities()
    return bool(m.is_single_valued() and m.is_injective())


def structured(kernel: Kernel) -> bool:
    """True when the kernel's work-items talk through the work-group: keep its groups whole."""
    if kernel.barriers:
        return True
    if any(a.address_space == "local" for a in kernel.arrays):
        return True
    if any(p.pointer and p.address_space == "local" for p in kernel.params):
        return True
    return bool(kernel.uses & _LOCAL_FUNCTIONS)


# ----------------------------------------------------------------------------------------------
# Frames
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Frame:
    """A fused grid with its fragments (see module docstring)."""

    host_dims: tuple[str, ...]
    work_dim: int
    local_size: tuple[int, ...]
    #: launch id -> isl map F -> L<id>, members in host order
    maps: dict[int, isl.Map]
    #: fragments preceded by a work-group barrier
    barriers: frozenset[int] = frozenset()
    #: the fused work-item set (box of whole work-groups)
    grid: Optional[isl.Set] = None
    #: group counts per NDRange dim (int, or isl text when parametric)
    groups: tuple[Any, ...] = ()
    #: the launch whose grid is the fused grid (None once the grid was extended or moved)
    anchor: Optional[int] = None
    notes: tuple[str, ...] = field(default=())

    @property
    def members(self) -> tuple[int, ...]:
        return tuple(self.maps)

    @property
    def dims(self) -> tuple[str, ...]:
        wd = range(self.work_dim)
        return self.host_dims + tuple(f"g{d}" for d in wd) + tuple(f"l{d}" for d in wd)


def _kernel_of(uar: UAR, lid: int) -> Kernel:
    op = uar.program.op(lid)
    assert isinstance(op, Launch)
    return uar.program.kernels[op.kernel]


def identity_frame(uar: UAR, lid: int) -> Frame:
    """The frame of one launch: its own grid, identity re-indexing."""
    inst = uar.instances(lid)
    rel = _ctx(uar, inst.domain.identity()).set_tuple_name(isl.dim_type.in_, FUSED)
    frame = Frame(host_dims=inst.host_dims, work_dim=inst.work_dim,
                  local_size=tuple(inst.local_size), maps={lid: rel}, anchor=lid)
    done = normalize(uar, frame)
    return done if done is not None else replace(frame, grid=rel.domain())


def _order(uar: UAR, ids: Iterable[int]) -> list[int]:
    pos = {op.id: k for k, op in enumerate(uar.program.ops)}
    return sorted(ids, key=lambda i: pos[i])


def _interval(s: isl.Set) -> bool:
    """A one-dimensional set is an interval (convex, no holes)."""
    hull = isl.Set.from_basic_set(s.polyhedral_hull())
    return bool(s.is_equal(hull))


def _lift(s: isl.Set, total: int, pos: int, name: str) -> isl.Set:
    """A set on dims ``[pos, pos + dim(s))`` of a ``total``-dim tuple ``name``."""
    n = s.dim(isl.dim_type.set)
    s = s.insert_dims(isl.dim_type.set, 0, pos).add_dims(isl.dim_type.set, total - pos - n)
    return s.set_tuple_name(name)


def _const(pa: isl.PwAff) -> Optional[int]:
    if pa.n_piece() != 1 or not pa.is_cst():
        return None
    (_, aff), = pa.get_pieces()
    v = aff.get_constant_val()
    return int(v.to_python()) if v.is_int() else None


def normalize(uar: UAR, frame: Frame) -> Optional[Frame]:
    """Check the fused grid is a box of whole work-groups and translate it to start at 0.

    Returns None when the union of the fragments' domains is not such a box (then the merge is
    refused).  The grid is the box times the full local range; idle work-items are fine, idle
    holes are not accepted (we only accept a union whose group set *equals* its box).
    """
    nh, wd = len(frame.host_dims), frame.work_dim
    union: Optional[isl.Set] = None
    for rel in frame.maps.values():
        dom = rel.domain()
        union = dom if union is None else union.union(dom)
    assert union is not None
    union = coalesce(_ctx(uar, union))
    if any(x <= 0 for x in frame.local_size):
        return None
    lcons = " and ".join(f"0 <= l{d} < {frame.local_size[d]}" for d in range(wd)) or "0 = 0"
    names = ", ".join(frame.dims)
    lbox = isl.Set(f"{{ {FUSED}[{names}] : {lcons} }}").align_params(union.get_space())
    if not union.is_subset(lbox):
        return None
    groups = union.project_out(isl.dim_type.set, nh + wd, wd).set_tuple_name(FUSED)
    box = _lift(groups.project_out(isl.dim_type.set, nh, wd), nh + wd, 0, FUSED)
    shifts: list[int] = []
    counts: list[Any] = []
    for d in range(wd):
        one = groups.project_out(isl.dim_type.set, nh + d + 1, wd - d - 1)
        one = one.project_out(isl.dim_type.set, 0, nh + d)
        if not _interval(one):
            return None
        try:
            lo = _const(one.dim_min(0))
            hi = one.dim_max(0)
        except isl.Error:  # unbounded: a candidate that is not injective on Z^n
            return None
        if lo is None:
            return None
        shifts.append(lo)
        box = box.intersect(_lift(one, nh + wd, nh + d, FUSED))
        hic = _const(hi)
        counts.append(hic - lo + 1 if hic is not None else str(coalesce(hi.add_constant_val(
            isl.Val.int_from_si(hi.get_ctx(), 1 - lo)))))
    if not groups.is_equal(box.align_params(groups.get_space())):
        return None
    maps = dict(frame.maps)
    anchor = frame.anchor
    if any(shifts):
        src = ", ".join(frame.dims)
        dst = list(frame.dims)
        for d, s in enumerate(shifts):
            dst[nh + d] = f"g{d} + ({s})"
        shift = isl.Map(f"{{ {FUSED}[{src}] -> {FUSED}[{', '.join(dst)}] }}")
        maps = {k: shift.align_params(v.get_space()).apply_range(v) for k, v in maps.items()}
        anchor = None
    gcons = " and ".join(f"0 <= g{d}" for d in range(wd)) or "0 = 0"
    grid = box.insert_dims(isl.dim_type.set, nh + wd, wd).set_tuple_name(FUSED)
    if any(shifts):
        src = ", ".join(frame.dims)
        dst = list(frame.dims)
        for d, s in enumerate(shifts):
            dst[nh + d] = f"g{d} - ({s})"
        grid = grid.apply(isl.Map(f"{{ {FUSED}[{src}] -> {FUSED}[{', '.join(dst)}] }}")
                          .align_params(grid.get_space())).set_tuple_name(FUSED)
    grid = coalesce(grid.intersect(isl.Set(f"{{ {FUSED}[{names}] : {gcons} and {lcons} }}")
                          .align_params(grid.get_space())))
    return replace(frame, maps=maps, grid=grid, groups=tuple(counts), anchor=anchor)


# ----------------------------------------------------------------------------------------------
# Legality
# ----------------------------------------------------------------------------------------------


def _same_group_map(frame: Frame, space_of: isl.Map) -> tuple[isl.Map, isl.Map]:
    """(identity, same-work-group) relations on the fused grid."""
    a = list(frame.dims)
    b = [f"{x}_" for x in a]
    ng = len(frame.host_dims) + frame.work_dim
    ident = isl.Map(f"{{ {FUSED}[{', '.join(a)}] -> {FUSED}[{', '.join(a)}] }}")
    same = " and ".join(f"{x} = {y}" for x, y in zip(a[:ng], b[:ng])) or "0 = 0"
    group = isl.Map(f"{{ {FUSED}[{', '.join(a)}] -> {FUSED}[{', '.join(b)}] : {same} }}")
    return ident.align_params(space_of.get_space()), group.align_params(space_of.get_space())


def edge_pairs(uar: UAR, frame: Frame, e: Edge) -> isl.Map:
    """``R_src ; D ; R_dst^-1``: fused work-items related by the edge (same iteration)."""
    rs, rd = frame.maps[e.src], frame.maps[e.dst]
    d = edge_in_iteration(uar, e)
    return _ctx(uar, rs.apply_range(d.align_params(rs.get_space())).apply_range(rd.reverse()))


def _edge_index(uar: UAR) -> dict[int, list[tuple[int, Edge]]]:
    """Launch id -> (position in ``uar.edges``, edge) of its launch-to-launch edges."""
    index = _EDGE_INDEX.get(uar)
    if index is None:
        index = {}
        for k, e in enumerate(uar.edges):
            if e.host:
                continue
            index.setdefault(e.src, []).append((k, e))
            if e.dst != e.src:
                index.setdefault(e.dst, []).append((k, e))
        _EDGE_INDEX[uar] = index
    return index


_EDGE_INDEX: weakref.WeakKeyDictionary[UAR, dict[int, list[tuple[int, Edge]]]] = \
    weakref.WeakKeyDictionary()


def edges_touching(uar: UAR, ids: Iterable[int], within: Iterable[int]) -> list[Edge]:
    """Launch-to-launch edges with one end in ``ids`` and both ends in ``within`` (UAR order)."""
    inside = set(within)
    found: dict[int, Edge] = {}
    index = _edge_index(uar)
    for i in set(ids):
        for k, e in index.get(i, ()):
            if e.src in inside and e.dst in inside:
                found[k] = e
    return [found[k] for k in sorted(found)]


def frame_problems(uar: UAR, frame: Frame, edges: Optional[Sequence[Edge]] = None,
                   barriers: Optional[frozenset[int]] = None,
                   new: Optional[Iterable[int]] = None) -> tuple[list[str], frozenset[int]]:
    """Problems of a frame (empty: legal) and the fragments that need ``barrier_before``.

    ``barriers`` given: check those barriers suffice instead of deriving them.  ``new`` given:
    only those fragments and the edges touching them are checked (the rest of the frame was
    checked when it was built and a translation of the grid keeps it legal); the derived
    barriers then add to ``frame.barriers``.  Every check runs under isl's operation quota; a
    check that hits it is a problem (:data:`QUOTA_REASON`), never a pass.
    """
    problems: list[str] = []
    need: set[int] = set()
    order = list(frame.maps)
    checked = set(order) if new is None else set(new)
    for lid, rel in frame.maps.items():
        if lid in checked:
            problems += _member_problems_cached(uar, frame, lid, rel)
    if problems:
        return problems, frozenset()
    for e in edges_touching(uar, checked, order):
        where = f"{e.kind} L{e.src}->L{e.dst} on {e.array}"
        verdict = _edge_verdict_cached(uar, frame, e)
        if verdict == "quota":
            problems.append(f"{where}: {QUOTA_REASON}")
            continue
        if verdict in ("empty", "thread"):
            continue
        if order.index(e.src) > order.index(e.dst):
            problems.append(f"{where}: source fragment runs after its destination")
            continue
        if verdict == "block":
            between = order[order.index(e.src) + 1: order.index(e.dst) + 1]
            if barriers is None:
                need.add(e.dst)
            elif not barriers & set(between):
                problems.append(f"{where}: block-level pair without a barrier between the "
                                "fragments")
            continue
        problems.append(f"{where}: a dependence pair crosses fused work-groups")
    if barriers is not None:
        return problems, barriers
    if new is not None:
        need |= set(frame.barriers)
    return problems, frozenset(need)


#: canonical text of a check's inputs -> its result, shared by identical structure (the layers
#: of a model repeat the same launches, kernels and re-indexings under other launch ids);
#: emptied when it holds :data:`_MAX_CHECKS` results, so a long batch does not grow it forever
_CHECKS: dict[tuple, Any] = {}
_MAX_CHECKS = 100_000


def clear_memo() -> None:
    """Forget every memoized check (benchmarks time cold runs with it)."""
    _CHECKS.clear()


def _remember(key: tuple, value: Any) -> None:
    if len(_CHECKS) >= _MAX_CHECKS:
        _CHECKS.clear()
    _CHECKS[key] = value
_LAUNCH_NAME = re.compile(r"\bL(\d+)\b")


def canonical(*texts: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """``texts`` with launch tuples renamed ``L<k>`` by order of first appearance, and the
    renaming (original id -> canonical id); equal results mean the same problem up to ids."""
    names: dict[str, str] = {}

    def rename(m: re.Match) -> str:
        return "L" + names.setdefault(m.group(1), f"#{len(names)}")

    return tuple(_LAUNCH_NAME.sub(rename, t) for t in texts), names


def _frame_key(frame: Frame) -> str:
    return f"{frame.dims}|{frame.local_size}"


def _member_problems_cached(uar: UAR, frame: Frame, lid: int, rel: isl.Map) -> list[str]:
    """:func:`_member_problems` under the quota, memoized on the canonical form."""
    inst = uar.instances(lid)
    grid = "" if frame.grid is None else str(frame.grid)
    texts, names = canonical(str(rel), str(inst.domain), grid, str(uar.context))
    key = ("member", texts, _frame_key(frame), structured(_kernel_of(uar, lid)),
           inst.work_dim, tuple(inst.local_size))
    if key not in _CHECKS:
        try:
            with bounded():
                found = _member_problems(uar, frame, lid, rel)
        except IslQuotaExceeded:
            found = [f"L{lid}: {QUOTA_REASON}"]
        _remember(key, [p.replace(f"L{lid}:", "L{lid}:", 1) for p in found])
    return [p.replace("L{lid}:", f"L{lid}:", 1) for p in _CHECKS[key]]


def _edge_verdict_cached(uar: UAR, frame: Frame, e: Edge) -> str:
    """:func:`_edge_verdict` under the quota (``quota`` when hit), memoized."""
    texts, _ = canonical(str(frame.maps[e.src]), str(frame.maps[e.dst]),
                         str(edge_in_iteration(uar, e)), str(uar.context))
    key = ("edge", texts, _frame_key(frame))
    if key not in _CHECKS:
        try:
            with bounded():
                verdict = _edge_verdict(uar, frame, e)
        except IslQuotaExceeded:
            verdict = "quota"
        _remember(key, verdict)
    return _CHECKS[key]


def _member_problems(uar: UAR, frame: Frame, lid: int, rel: isl.Map) -> list[str]:
    inst = uar.instances(lid)
    rel = _ctx(uar, rel)
    if not rel.is_single_valued():
        return [f"L{lid}: re-indexing is not single-valued"]
    if not rel.is_injective():
        return [f"L{lid}: re-indexing is not injective (work-items would merge)"]
    if not rel.range().is_equal(_ctx(uar, inst.domain)):
        return [f"L{lid}: re-indexing does not cover the launch's work-items exactly once"]
    problems = []
    grid = frame.grid
    if grid is not None and not rel.domain().is_subset(grid.align_params(rel.get_space())):
        problems.append(f"L{lid}: fragment lies outside the fused grid")
    if structured(_kernel_of(uar, lid)):
        problems += _structure_problems(lid, rel, frame, inst.work_dim,
                                        tuple(inst.local_size), len(frame.host_dims),
                                        frame.work_dim)
    return problems


def partial_groups(uar: UAR, frame: Frame, lid: int) -> bool:
    """True when fragment ``lid`` has barriers and its domain covers some fused work-group only
    in part (a symbolic size such as ``gs = n`` with a fixed local size): its guard would put
    the barriers under work-item-dependent control flow, which code generation refuses."""
    if not _kernel_of(uar, lid).barriers:
        return False
    nh, wd = len(frame.host_dims), frame.work_dim
    dom = _ctx(uar, frame.maps[lid].domain())
    lifted = dom.project_out(isl.dim_type.set, nh + wd, wd).insert_dims(
        isl.dim_type.set, nh + wd, wd)
    for i, name in enumerate(frame.dims):
        lifted = lifted.set_dim_name(isl.dim_type.set, i, name)
    lifted = lifted.set_tuple_name(FUSED)
    lifted = lifted.intersect(_local_box(frame).align_params(lifted.get_space()))
    return not lifted.is_subset(dom.align_params(lifted.get_space()))


def _edge_verdict(uar: UAR, frame: Frame, e: Edge) -> str:
    """``empty``, ``thread`` (same fused work-item), ``block`` (same group) or ``global``."""
    pairs = edge_pairs(uar, frame, e)
    if pairs.is_empty():
        return "empty"
    ident, group = _same_group_map(frame, pairs)
    if pairs.is_subset(ident):
        return "thread"
    if pairs.is_subset(group):
        return "block"
    return "global"


def _structure_problems(lid: int, rel: isl.Map, frame: Frame, own_wd: int,
                        own_local: tuple[int, ...], nh: int, wd: int) -> list[str]:
    """A structured fragment keeps its work-groups whole, local ids unchanged."""
    if own_wd != wd or own_local != tuple(frame.local_size):
        return [f"L{lid}: uses work-group memory/barriers/local ids but its local size "
                f"{own_local} differs from the fused {tuple(frame.local_size)}"]
    a = list(frame.dims)
    b = [f"{x}_" for x in a]
    keep = " and ".join(f"{a[nh + wd + d]} = {b[nh + wd + d]}" for d in range(wd)) or "0 = 0"
    inst_name = rel.get_tuple_name(isl.dim_type.out)
    same_l = isl.Map(f"{{ {FUSED}[{', '.join(a)}] -> {inst_name}[{', '.join(b)}] : {keep} }}")
    if not rel.is_subset(same_l.align_params(rel.get_space())):
        return [f"L{lid}: its work-groups would be scattered (local ids change)"]
    g = rel.project_out(isl.dim_type.in_, nh + wd, wd).project_out(isl.dim_type.out, nh + wd, wd)
    if not is_bijective(g):
        return [f"L{lid}: its work-groups would be scattered across fused groups"]
    return []


# ----------------------------------------------------------------------------------------------
# Merging frames
# ----------------------------------------------------------------------------------------------


def _pieces(m: isl.Map) -> list[isl.MultiAff]:
    """Distinct affine pieces of a single-valued map (as isl gives them)."""
    out: list[isl.MultiAff] = []
    try:
        pma = isl.PwMultiAff.from_map(m)
    except isl.Error:
        return out

    def take(_s: isl.Set, ma: isl.MultiAff) -> None:
        if not any(ma.plain_is_equal(o) for o in out):
            out.append(ma)

    pma.foreach_piece(take)
    return out


def _group_lift(tg: isl.MultiAff, keep: Frame, other: Frame) -> Optional[isl.Map]:
    """``F_A[hg, l] -> F_B[tg(hg), l]``: a group-level map with local ids unchanged."""
    if keep.work_dim != other.work_dim or keep.local_size != other.local_size:
        return None
    m = isl.Map.from_multi_aff(tg)
    wd = keep.work_dim
    n_in, n_out = m.dim(isl.dim_type.in_), m.dim(isl.dim_type.out)
    m = m.add_dims(isl.dim_type.in_, wd).add_dims(isl.dim_type.out, wd)
    for d in range(wd):
        m = m.equate(isl.dim_type.in_, n_in + d, isl.dim_type.out, n_out + d)
    return m.set_tuple_name(isl.dim_type.in_, FUSED).set_tuple_name(isl.dim_type.out, FUSED)


def _local_box(frame: Frame) -> isl.Set:
    """``{ F[h, g, l] : 0 <= l < L }``: where fused work-items may be."""
    wd = frame.work_dim
    cons = " and ".join(f"0 <= l{d} < {frame.local_size[d]}" for d in range(wd)) or "0 = 0"
    return isl.Set(f"{{ {FUSED}[{', '.join(frame.dims)}] : {cons} }}")


def _candidates(uar: UAR, keep: Frame, other: Frame, edges: Sequence[Edge]) -> list[isl.Map]:
    """Maps ``F_keep -> F_other`` derived from the edges joining the two frames."""
    rels: list[isl.Map] = []
    for e in edges:
        d = edge_in_iteration(uar, e)
        if e.src in keep.maps and e.dst in other.maps:
            rs, rd = keep.maps[e.src], other.maps[e.dst]
            t = rs.apply_range(d.align_params(rs.get_space())).apply_range(rd.reverse())
        elif e.src in other.maps and e.dst in keep.maps:
            rs, rd = other.maps[e.src], keep.maps[e.dst]
            t = rd.apply_range(d.reverse().align_params(rd.get_space())).apply_range(
                rs.reverse())
        else:
            continue
        t = coalesce(_ctx(uar, t))
        if not t.is_empty():
            rels.append(t)
    if len(rels) > 1:
        union = rels[0]
        for r in rels[1:]:
            union = union.union(r)
        rels.insert(0, coalesce(union))
    out: list[isl.Map] = []
    nh = len(keep.host_dims)
    for t in rels:
        if is_bijective(t):
            out.append(t)
            for ma in _pieces(t):
                ext = isl.Map.from_multi_aff(ma)
                if keep.grid is not None:
                    # the extension inside the kept grid first: a periodic (rotating)
                    # piece is injective there but not on all of Z^n
                    out.append(ext.intersect_domain(keep.grid.align_params(ext.get_space())))
                # fused work-items have local ids inside the fused local size
                out.append(ext.intersect_domain(_local_box(keep).align_params(ext.get_space())))
        g = t.project_out(isl.dim_type.in_, nh + keep.work_dim, keep.work_dim)
        g = g.project_out(isl.dim_type.out, nh + other.work_dim, other.work_dim)
        if is_bijective(g):
            for ma in _pieces(g):
                lifted = _group_lift(ma, keep, other)
                if lifted is not None:
                    out.append(lifted)
    seen: set[str] = set()
    uniq = []
    for c in out:
        c = c.set_tuple_name(isl.dim_type.in_, FUSED).set_tuple_name(isl.dim_type.out, FUSED)
        key = str(c)
        if key not in seen:
            seen.add(key)
            uniq.append(c)
    return uniq


def merge_frames(uar: UAR, keep: Frame, other: Frame,
                 edges: Sequence[Edge]) -> tuple[Optional[Frame], str]:
    """Re-index ``other`` into ``keep``'s grid so that every edge holds; (frame, why-not).

    The kept frame's grid, local size and fragments stay; ``other``'s fragments are composed
    with the first candidate map that passes :func:`frame_problems`.
    """
    if len(keep.host_dims) != len(other.host_dims):
        return None, "different host loops"
    if any(x <= 0 for x in keep.local_size + other.local_size):
        return None, "local size unknown (chosen by the implementation)"
    try:
        with bounded():
            cands = _candidates(uar, keep, other, edges)
    except IslQuotaExceeded:
        return None, QUOTA_REASON
    if not cands:
        return None, "no dependence gives a one-to-one map between the grids"
    why = "no candidate re-indexing"
    quota = ""
    for c in cands:
        try:
            with bounded():
                frame, problem = _try_candidate(uar, keep, other, c)
        except IslQuotaExceeded:
            frame, problem = None, QUOTA_REASON
        if frame is not None:
            return frame, ""
        why = problem
        quota = quota or (problem if QUOTA_REASON in problem else "")
    # a candidate that was not decided matters more than why the others failed
    return None, quota or why


#: why a merge was refused without a proof that it is illegal
QUOTA_REASON = ("re-indexing check exceeded isl's operation quota: not fused, to stay safe")


def _try_candidate(uar: UAR, keep: Frame, other: Frame,
                   c: isl.Map) -> tuple[Optional[Frame], str]:
    """``other`` re-indexed by ``c`` into ``keep``'s grid, checked; (frame, why-not)."""
    maps: dict[int, isl.Map] = {}
    for lid in _order(uar, list(keep.maps) + list(other.maps)):
        if lid in keep.maps:
            maps[lid] = keep.maps[lid]
        else:
            r = other.maps[lid]
            maps[lid] = coalesce(_ctx(uar, c.align_params(r.get_space()).apply_range(r)))
    # the kept fragments' barriers stay: only ``other``'s fragments and edges are re-checked
    frame = replace(keep, maps=maps, barriers=keep.barriers, grid=None)
    norm = normalize(uar, frame)
    if norm is None:
        return None, "the fused grid would not be a box of whole work-groups"
    problems, need = frame_problems(uar, norm, new=other.maps)
    if problems:
        return None, problems[0]
    partial = next((m for m in norm.maps if partial_groups(uar, norm, m)), None)
    if partial is not None:
        return None, partial_groups_reason(uar, norm, partial)
    return replace(norm, barriers=need), ""


#: the words that say a merge was refused by :func:`partial_groups`
PARTIAL_GROUPS = "fills its work-groups only in part"


def partial_groups_reason(uar: UAR, frame: Frame, lid: int) -> str:
    """Why a fragment :func:`partial_groups` flags is not fused, with the way out."""
    dom = frame.maps[lid].domain()
    sizes = [dom.get_dim_name(isl.dim_type.param, i) for i in range(dom.dim(isl.dim_type.param))
             if dom.involves_dims(isl.dim_type.param, i, 1)]
    what = ", ".join(sizes) or "the symbolic sizes"
    return (f"L{lid} ({_kernel_of(uar, lid).name}) has barriers but {PARTIAL_GROUPS} for some "
            f"values of {what}: its guard would put them under work-item-dependent control "
            "flow (fix the sizes with --args or --param to fuse it)")


def reindex_map(rel: isl.Map) -> isl.Map:
    """A re-indexing as a plan keeps it (params kept, simplified)."""
    return coalesce(rel)
