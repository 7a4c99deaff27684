"""Dependence width (docs/definitions.md), computed exactly as parameter sets.

For a relation ``D ⊆ S[h,g,l] × T[h',g',l']``:

* ``thread`` holds where ``D`` is a partial bijection (single-valued and injective);
* ``block`` holds where it does not but ``D`` projected on (h,g)×(h',g') is one;
* ``global`` holds everywhere else.

The parameter values where ``D`` is *not* single-valued are the parameters of
``{y1 -> y2 : ∃x. D(x,y1) ∧ D(x,y2) ∧ y1 ≠ y2}``; likewise for injectivity with ``D⁻¹``.  Their
complement in the context is where ``D`` is a partial bijection: no enumeration, no sampling
except for the witness, which is one point of the violation set as isl gives it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

import islpy as isl

from polyfuse.core.islutil import IslQuotaExceeded, bounded, coalesce

WIDTHS = ("thread", "block", "global")


@dataclass(frozen=True, eq=False)
class WidthResult:
    """The width over the whole context, the parameter set of each label, a witness if global."""

    width: str
    #: label -> parameter set where the edge's width is exactly that label (disjoint, in context)
    regions: dict[str, isl.Set] = field(default_factory=dict)
    #: finer labels that hold somewhere but not everywhere -> isl set string
    conditions: dict[str, str] = field(default_factory=dict)
    witness: Optional[dict] = None


def _aligned(context: isl.Set, rel: isl.Map) -> isl.Set:
    return context.align_params(rel.get_space())


def bijective_params(rel: isl.Map, context: isl.Set) -> isl.Set:
    """Parameter values of ``context`` where ``rel`` is single-valued and injective.

    isl's yes/no tests come first: when they hold for every parameter value of the context (or
    ``rel`` involves no parameter, so the answer is all or nothing) no parameter set is needed,
    and they stay cheap where projecting the violation pairs onto the parameters explodes
    (floor/mod subscripts with large constants).  Runs under isl's operation quota: raises
    :class:`~polyfuse.core.islutil.IslQuotaExceeded` rather than running unboundedly.
    """
    context = _aligned(context, rel)
    rel = rel.align_params(context.get_space()).intersect_params(context)
    with bounded():
        # equalities hidden in floor/mod constraints made explicit: a blocked kernel's
        # identity relation, written with divisions, took seconds to test, then milliseconds
        rel = rel.detect_equalities()
        if rel.is_single_valued() and rel.is_injective():
            return context
        if not _involves_params(rel):
            return context.subtract(context)
        not_sv = rel.reverse().apply_range(rel).subtract(rel.range().identity()).params()
        not_inj = rel.apply_range(rel.reverse()).subtract(rel.domain().identity()).params()
        return coalesce(context.subtract(not_sv.union(not_inj)))


def _involves_params(rel: isl.Map) -> bool:
    return any(rel.involves_dims(isl.dim_type.param, i, 1)
               for i in range(rel.dim(isl.dim_type.param)))


def group_relation(rel: isl.Map, src_groups: int, dst_groups: int) -> isl.Map:
    """``rel`` with all but the first ``src_groups``/``dst_groups`` dims projected out."""
    src_name = rel.get_tuple_name(isl.dim_type.in_)
    dst_name = rel.get_tuple_name(isl.dim_type.out)
    n_in, n_out = rel.dim(isl.dim_type.in_), rel.dim(isl.dim_type.out)
    rel = rel.project_out(isl.dim_type.in_, src_groups, n_in - src_groups)
    rel = rel.project_out(isl.dim_type.out, dst_groups, n_out - dst_groups)
    return rel.set_tuple_name(isl.dim_type.in_, src_name).set_tuple_name(
        isl.dim_type.out, dst_name)


def tidy(s: isl.Set) -> isl.Set:
    """Drop parameters the set does not involve, for readable condition strings."""
    s = coalesce(s)
    for i in reversed(range(s.dim(isl.dim_type.param))):
        if not s.involves_dims(isl.dim_type.param, i, 1):
            s = s.project_out(isl.dim_type.param, i, 1)
    return s


def set_str(s: isl.Set) -> str:
    """isl's text of a set, with the blank isl leaves before a bare ``:`` collapsed."""
    return re.sub(r"\{\s+:", "{ :", str(s))


def _dim_names(rel: isl.Map, t: isl.dim_type) -> list[str]:
    return [rel.get_dim_name(t, i) or f"i{i}" for i in range(rel.dim(t))]


def _tuple_text(name: str, dims: list[str], values: list[int]) -> str:
    return f"{name}[{', '.join(f'{d}={v}' for d, v in zip(dims, values))}]"


def _point_values(point: isl.Point, t: isl.dim_type, start: int, n: int) -> list[int]:
    return [int(point.get_coordinate_val(t, start + i).to_python()) for i in range(n)]


def _params_of(point: isl.Point, space_of: isl.Map) -> dict[str, int]:
    names = _dim_names(space_of, isl.dim_type.param)
    return {n: v for n, v in zip(names, _point_values(point, isl.dim_type.param, 0, len(names)))}


def pair_witness(
    rel: isl.Map, params: Optional[isl.Set] = None, reason: str = ""
) -> Optional[dict]:
    """One pair of ``rel`` (within ``params``) as a structured witness; None if empty."""
    if params is not None:
        rel = rel.intersect_params(params.align_params(rel.get_space()))
    wrapped = rel.wrap()
    if wrapped.is_empty():
        return None
    point = wrapped.sample_point()
    n_in, n_out = rel.dim(isl.dim_type.in_), rel.dim(isl.dim_type.out)
    vals = _point_values(point, isl.dim_type.set, 0, n_in + n_out)
    sd, dd = _dim_names(rel, isl.dim_type.in_), _dim_names(rel, isl.dim_type.out)
    sn, dn = rel.get_tuple_name(isl.dim_type.in_), rel.get_tuple_name(isl.dim_type.out)
    pv = _params_of(point, rel)
    text = f"{_tuple_text(sn, sd, vals[:n_in])} -> {_tuple_text(dn, dd, vals[n_in:])}"
    if pv:
        text = ", ".join(f"{k}={v}" for k, v in pv.items()) + ": " + text
    return {
        "params": pv,
        "src": vals[:n_in], "dst": vals[n_in:], "src_dims": sd, "dst_dims": dd,
        "reason": reason, "text": text + (f" ({reason})" if reason else ""),
    }


def _violation_witness(rel: isl.Map, src_groups: int, dst_groups: int,
                       params: isl.Set) -> Optional[dict]:
    """Two pairs of ``rel`` showing that its group projection is not a partial bijection."""
    rel = rel.intersect_params(params.align_params(rel.get_space()))
    n_in, n_out = rel.dim(isl.dim_type.in_), rel.dim(isl.dim_type.out)
    sn, dn = rel.get_tuple_name(isl.dim_type.in_), rel.get_tuple_name(isl.dim_type.out)
    a = [f"a{i}" for i in range(n_in)]
    b = [f"b{i}" for i in range(n_out)]
    c = [f"c{i}" for i in range(n_in)]
    d = [f"d{i}" for i in range(n_out)]

    def same(x: list[str], y: list[str], n: int) -> str:
        return " and ".join([f"{p} = {q}" for p, q in zip(x[:n], y[:n])] or ["0 = 0"])

    def differ(x: list[str], y: list[str], n: int) -> str:
        return " or ".join([f"{p} != {q}" for p, q in zip(x[:n], y[:n])] or ["0 = 1"])

    head = (f"{{ [{sn}[{', '.join(a)}] -> {dn}[{', '.join(b)}]] -> "
            f"[{sn}[{', '.join(c)}] -> {dn}[{', '.join(d)}]] : ")
    cases = [
        (f"({same(b, d, dst_groups)}) and ({differ(a, c, src_groups)})",
         "a consumer work-group depends on several producer work-groups"),
        (f"({same(a, c, src_groups)}) and ({differ(b, d, dst_groups)})",
         "a producer work-group feeds several consumer work-groups"),
    ]
    wrapped = rel.wrap()
    pairs = isl.Map.from_domain_and_range(wrapped, wrapped)
    for cons, reason in cases:
        viol = pairs.intersect(isl.Map(head + cons + " }").align_params(pairs.get_space()))
        if viol.is_empty():
            continue
        point = viol.wrap().sample_point()
        vals = _point_values(point, isl.dim_type.set, 0, 2 * (n_in + n_out))
        sd, dd = _dim_names(rel, isl.dim_type.in_), _dim_names(rel, isl.dim_type.out)
        src, dst = vals[:n_in], vals[n_in:n_in + n_out]
        src2, dst2 = vals[n_in + n_out:2 * n_in + n_out], vals[2 * n_in + n_out:]
        pv = _params_of(point, rel)
        text = (f"{_tuple_text(sn, sd, src)} -> {_tuple_text(dn, dd, dst)} and "
                f"{_tuple_text(sn, sd, src2)} -> {_tuple_text(dn, dd, dst2)}")
        if pv:
            text = ", ".join(f"{k}={v}" for k, v in pv.items()) + ": " + text
        return {
            "params": pv, "src": src, "dst": dst, "other_src": src2, "other_dst": dst2,
            "src_dims": sd, "dst_dims": dd, "reason": reason, "text": f"{text} ({reason})",
        }
    return pair_witness(rel, params)


#: why an edge is labelled ``global`` without a proof that it is one
QUOTA_REASON = ("width analysis exceeded isl's operation quota: labelled global (not fused) "
                "to stay safe")


def classify(rel: isl.Map, context: isl.Set, src_groups: int, dst_groups: int) -> WidthResult:
    """Width of a work-item relation whose first ``*_groups`` dims identify a work-group.

    When isl's operation quota is hit, the edge is ``global`` over the whole context (never
    fused), and its witness says so (:data:`QUOTA_REASON`) instead of showing a violation.
    """
    context = _aligned(context, rel)
    try:
        return _classify(rel, context, src_groups, dst_groups)
    except IslQuotaExceeded:
        return WidthResult(width="global", regions={"global": context},
                           witness=_quota_witness(rel))


#: the tuple names :func:`classify_shared` gives a relation before classifying it
_SRC, _DST = "pf_width_src", "pf_width_dst"


def classify_shared(rel: isl.Map, context: isl.Set, src_groups: int, dst_groups: int,
                    memo: dict[tuple[str, str, int, int], WidthResult]) -> WidthResult:
    """:func:`classify`, once per relation up to the names of its two operations (``memo``).

    The edges between the launches of identical layers are one relation under other names
    (``L15 -> L16``, ``L44 -> L45``): the width, its regions and conditions (parameter sets)
    do not depend on the names, nor does the witness's point; its text is written with the
    edge's own names.  A relation from an operation to itself is classified as it is."""
    src = rel.get_tuple_name(isl.dim_type.in_)
    dst = rel.get_tuple_name(isl.dim_type.out)
    if not src or not dst or src == dst:
        return classify(rel, context, src_groups, dst_groups)
    canon = rel.set_tuple_name(isl.dim_type.in_, _SRC).set_tuple_name(isl.dim_type.out, _DST)
    key = (str(canon), str(context), src_groups, dst_groups)
    res = memo.get(key)
    if res is None:
        res = memo[key] = classify(canon, context, src_groups, dst_groups)
    if res.witness is None:
        return res
    text = res.witness.get("text", "").replace(f"{_SRC}[", f"{src}[").replace(
        f"{_DST}[", f"{dst}[")
    return WidthResult(width=res.width, regions=res.regions, conditions=res.conditions,
                       witness={**res.witness, "text": text})


def _quota_witness(rel: isl.Map) -> dict:
    try:
        with bounded():
            witness = pair_witness(rel, reason=QUOTA_REASON)
    except IslQuotaExceeded:
        witness = None
    return witness or {"params": {}, "reason": QUOTA_REASON, "text": QUOTA_REASON}


def _classify(rel: isl.Map, context: isl.Set, src_groups: int, dst_groups: int) -> WidthResult:
    thread = bijective_params(rel, context)
    grel = group_relation(rel, src_groups, dst_groups)
    block_or_finer = coalesce(thread.union(bijective_params(grel, context)))
    regions = {
        "thread": thread,
        "block": coalesce(block_or_finer.subtract(thread)),
        "global": coalesce(context.subtract(block_or_finer)),
    }
    if not regions["global"].is_empty():
        width = "global"
    elif not regions["block"].is_empty():
        width = "block"
    else:
        width = "thread"
    conditions = {}
    for label in WIDTHS[: WIDTHS.index(width)]:
        if not regions[label].is_empty():
            conditions[label] = set_str(tidy(regions[label]))
    witness = None
    if width == "global":
        with bounded():
            witness = _violation_witness(rel, src_groups, dst_groups, regions["global"])
    return WidthResult(width=width, regions=regions, conditions=conditions, witness=witness)
