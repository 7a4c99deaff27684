"""Exact (memory-based) dependences of a SCoP and the loop-carried tests built on them.

RAW, WAR and WAW are computed per array with union-map algebra: pairs of instances touching the
same element, the first before the second in the original 2d+1 schedule.  Memory-based flow
dependences over-approximate value-based ones (``compute_flow``), but for *parallelism* the
answer is the same: a memory-based RAW pair killed by an intervening write implies a WAW or RAW
pair that the same loop carries (the intervening write sits between the two instances).

Two tests use them (``e`` leading loop dimensions held equal, dimension ``p`` differing):

* ``carried(loop)`` (classic, ``e = p = depth``): the loop carries a dependence at its depth;
* ``hoistable(loop, host_depth)`` (``e = host_depth``, any ``p``): no dependence between instances
  with different values of the loop's iterator, whatever the loops between the host loops and
  this one do.  Such loops can all be mapped onto NDRange dimensions at once while the others run
  sequentially inside each work-item (this is what makes ``for i for j y[j] += A[i][j]*x[i]``
  parallel in ``j``: a legal interchange).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import islpy as isl

from polyfuse.autopar.scop import Loop, Region, Stmt
from polyfuse.core.islutil import coalesce


@dataclass
class Dep:
    kind: str  # RAW | WAR | WAW
    array: str
    relation: isl.Map  # source instance → sink instance


@dataclass
class Carried:
    """A dependence a loop carries, with one concrete instance pair as witness."""

    kind: str
    array: str
    source: str
    sink: str
    witness: str
    reduction: bool  # the self-dependence of a reduction statement on its accumulator

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "array": self.array, "source": self.source,
                "sink": self.sink, "witness": self.witness, "reduction": self.reduction}


def compute(region: Region) -> list[Dep]:
    """Every RAW/WAR/WAW dependence of the region, split per array and statement pair."""
    sched = region.schedule
    assert sched is not None and region.reads is not None and region.writes is not None
    before = sched.lex_lt_union_map(sched)
    arrays: dict[str, tuple[list[isl.Map], list[isl.Map]]] = {}
    for s in region.stmts:
        for a in s.accesses:
            w, r = arrays.setdefault(a.array, ([], []))
            (w if a.write else r).append(a.relation)
    out: list[Dep] = []
    for name, (ws, rs) in arrays.items():
        for kind, srcs, snks in (("RAW", ws, rs), ("WAR", rs, ws), ("WAW", ws, ws)):
            for s in srcs:
                for t in snks:
                    m = s.apply_range(t.reverse())
                    m = m.intersect(_before(before, m))
                    if not m.is_empty():
                        out.append(Dep(kind, name, coalesce(m)))
    return out


def _before(before: isl.UnionMap, m: isl.Map) -> isl.Map:
    """The part of the schedule order ``before`` between the statements of ``m``."""
    sp = m.get_space()
    um = before.extract_map(sp)
    return um


def _pair_constraint(m: isl.Map, equal: int, differ: Optional[int]) -> isl.Map:
    """``m`` restricted to pairs equal on the first ``equal`` dims and differing at ``differ``."""
    n_in = m.dim(isl.dim_type.in_)
    n_out = m.dim(isl.dim_type.out)
    ins = [f"a{k}" for k in range(n_in)]
    outs = [f"b{k}" for k in range(n_out)]
    cons = [f"a{k} = b{k}" for k in range(equal)]
    if differ is not None:
        cons.append(f"a{differ} != b{differ}")
    params = [m.get_dim_name(isl.dim_type.param, k) for k in range(m.dim(isl.dim_type.param))]
    src = m.get_tuple_name(isl.dim_type.in_)
    dst = m.get_tuple_name(isl.dim_type.out)
    c = isl.Map(f"[{', '.join(params)}] -> {{ {src}[{', '.join(ins)}] -> "
                f"{dst}[{', '.join(outs)}] : {' and '.join(cons) or 'true'} }}")
    return m.intersect(c)


def stmts_in(loop: Loop) -> list[Stmt]:
    """Statements nested (at any depth) in ``loop`` — after distribution, in its children only."""
    out: list[Stmt] = []
    for ch in loop.children:
        if isinstance(ch, Loop):
            out += stmts_in(ch)
        else:
            out += ch.stmts
    return out


def carried_by(deps: list[Dep], stmts: list[Stmt], equal: int, differ: int,
               limit: int = 0) -> list[Carried]:
    """Dependences among ``stmts`` equal on ``equal`` outer dims and differing at ``differ``."""
    ids = {s.id: s for s in stmts}
    out: list[Carried] = []
    for d in deps:
        src = d.relation.get_tuple_name(isl.dim_type.in_)
        dst = d.relation.get_tuple_name(isl.dim_type.out)
        if src not in ids or dst not in ids:
            continue
        m = _pair_constraint(d.relation, equal, differ)
        if m.is_empty():
            continue
        s = ids[src]
        red = (src == dst and s.reduction is not None and s.reduction[0] == d.array)
        pt = m.wrap().sample_point()
        out.append(Carried(d.kind, d.array, src, dst, _point(pt), red))
        if limit and len(out) >= limit:
            break
    return out


def _point(pt: isl.Point) -> str:
    """A witness point as ``S1[i, j] -> S2[i', j']`` with parameter values, readable."""
    text = str(pt)
    return text.replace("{ ", "").replace(" }", "")
