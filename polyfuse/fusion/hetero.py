"""Heterogeneous horizontal fusion: independent launches with *different* code in one launch.

P3 fuses independent groups at the same launch step only when their code is identical.
Independent groups with different code (PolyBench's ``mvt``/``bicg``: two matrix-vector
products that share no output) can still run as one launch: their grids are concatenated along
dimension 0 and each work-group takes the branch of the fragment its group id falls in (a
group-id branch, as NNFusion's BlockFusion and HFuse do), keeping its own work-groups, its
local ids and its ``__local`` memory (code generation hoists and renames each fragment's tiles).

Legality is exact: the two groups must be *independent* (no path between them in the UAR's
dependence graph, so no order between them is needed), at the same launch step of the global
schedule and in the same host-loop body; the fused frame is checked by
:func:`polyfuse.fusion.reindex.frame_problems` like every other merge.  Fragments must share
the work dimension and fit the device's local memory together (``target``); different local
sizes are padded to the largest, the padded work-items of a
fragment's work-groups running none of its code (so a fragment with barriers is only placed
beside one of its own local size: reason ``incompatible work-group shape``).

It does not always pay (one launch saved against a larger, more divergent kernel), so it is an
orchestration variant (``orchestration="hetero"``) that the autotuner times against leaving the
launches apart; the plan states, for every pair of independent groups left apart, why
(:func:`apart_reasons`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Optional

import islpy as isl
import networkx as nx
import sympy

from polyfuse.c.types import type_size
from polyfuse.core.program import REFERENCE_TARGET, Target
from polyfuse.fusion.decisions import Apart, ApartReason, HeteroPlacement
from polyfuse.fusion.local import LocalGroup, placement_problem
from polyfuse.fusion.reindex import frame_problems


def dependence_paths(uar: Any, units: Sequence[Any]) -> nx.DiGraph:
    """Units (groups and host ops) with an arc for every dependence between two of them."""
    unit_of = {m: u.name for u in units for m in u.members}
    g = nx.DiGraph()
    g.add_nodes_from(u.name for u in units)
    for e in uar.edges:
        a, b = unit_of.get(e.src), unit_of.get(e.dst)
        if a is not None and b is not None and a != b:
            g.add_edge(a, b)
    return g


def independent(paths: nx.DiGraph, a: str, b: str) -> bool:
    """No dependence path between units ``a`` and ``b`` in either direction."""
    return not nx.has_path(paths, a, b) and not nx.has_path(paths, b, a)


def local_bytes(uar: Any, u: Any) -> Optional[int]:
    """``__local`` bytes a group's fused kernel declares: every member's local arrays and local
    arguments (code generation gives each fragment its own, renamed); None when a size is not
    a known constant."""
    total = 0
    for m in u.members:
        launch = uar.program.op(m)
        kernel = uar.program.kernels[launch.kernel]
        for arr in kernel.arrays:
            if arr.address_space != "local":
                continue
            n = type_size(arr.type, kernel.struct_sizes)
            if n is None:
                return None
            for extent in arr.shape:
                n *= int(extent)
            total += n
        for arg in launch.args:
            if arg.kind == "local":
                size = sympy.sympify(arg.local_bytes)
                if not size.is_Integer:
                    return None
                total += int(size)
    return total


def _why_apart(uar: Any, a: Any, b: Any, steps: dict[str, int], target: Target
               ) -> Optional[str]:
    """Why groups ``a`` and ``b`` cannot be fused horizontally (None: they can be tried)."""
    if steps[a.name] != steps[b.name]:
        return f"different step ({steps[a.name]} and {steps[b.name]})"
    if uar.instances(a.members[0]).loop_ids != uar.instances(b.members[0]).loop_ids:
        return "different host-loop body"
    fa, fb = a.group.frame, b.group.frame
    if fa.work_dim != fb.work_dim or len(fa.host_dims) != len(fb.host_dims):
        return f"incompatible dimensionality ({fa.work_dim}-D and {fb.work_dim}-D NDRange)"
    la, lb = local_bytes(uar, a), local_bytes(uar, b)
    if la is not None and lb is not None and la + lb > target.local_mem_size:
        return (f"local memory over the device limit ({la} B + {lb} B of __local memory > "
                f"{target.local_mem_size} B on {target.name})")
    if tuple(fa.local_size) != tuple(fb.local_size):
        pad = _padded_size(fa, fb)
        for u, f in ((a, fa), (b, fb)):
            if tuple(f.local_size) != pad and _has_barriers(uar, u):
                return (f"incompatible work-group shape (local sizes {tuple(fa.local_size)} and "
                        f"{tuple(fb.local_size)}; the smaller one has barriers, which padded "
                        "work-items would not reach)")
    return None


def _padded_size(fa: Any, fb: Any) -> tuple[int, ...]:
    return tuple(max(x, y) for x, y in zip(fa.local_size, fb.local_size))


def _has_barriers(uar: Any, u: Any) -> bool:
    return any(uar.program.kernels[uar.program.op(m).kernel].barriers for m in u.members)


def padding_only(uar: Any, frame: Any, problem: str) -> bool:
    """Whether ``problem`` only says a fragment's local size differs from the padded one, for a
    fragment without barriers whose work-items keep their local ids (so each of its work-groups
    is one fused work-group with the same local ids, and the padded work-items are idle)."""
    m = re.match(r"^L(\d+): uses work-group memory/barriers/local ids but its local size", problem)
    if m is None or int(m.group(1)) not in frame.maps:
        return False
    lid = int(m.group(1))
    if uar.program.kernels[uar.program.op(lid).kernel].barriers:
        return False
    rel = frame.maps[lid]
    nh, wd = len(frame.host_dims), frame.work_dim
    n_out = rel.dim(isl.dim_type.out)
    same = isl.Map.universe(rel.get_space())
    for d in range(wd):
        same = same.equate(isl.dim_type.in_, nh + wd + d, isl.dim_type.out, n_out - wd + d)
    return rel.is_subset(same)


def _side_by_side(uar: Any, a: Any, b: Any) -> tuple[Any, str]:
    """The concatenated frame of ``a`` and ``b``; different local sizes are padded to the
    largest (the fragments' domains keep their own local ranges, so the padded work-items of a
    work-group run no fragment code)."""
    from polyfuse.fusion.global_ import _horizontal

    fa, fb = a.group.frame, b.group.frame
    if tuple(fa.local_size) != tuple(fb.local_size):
        pad = _padded_size(fa, fb)
        fa, fb = replace(fa, local_size=pad), replace(fb, local_size=pad)
    return _horizontal(uar, fa, fb)


def hetero_fusion(uar: Any, units: list[Any], steps: dict[str, int], graph: nx.DiGraph,
                  target: Target = REFERENCE_TARGET) -> list[Any]:
    """Fuse independent same-step groups with different code horizontally (module doc)."""
    pos = {op.id: k for k, op in enumerate(uar.program.ops)}
    groups = sorted((u for u in units if u.group is not None), key=lambda u: pos[u.members[0]])
    hosts = [u for u in units if u.group is None]
    changed = True
    while changed:
        changed = False
        paths = dependence_paths(uar, groups + hosts)
        for i, a in enumerate(groups):
            for b in groups[i + 1:]:
                if _why_apart(uar, a, b, steps, target) or not independent(paths, a.name, b.name):
                    continue
                # the fused launch runs at the last member's place in host order
                unit_of = {m: id(u) for u in groups for m in u.members}
                if placement_problem(uar, graph, a.members + b.members, unit_of):
                    continue
                frame, _ = _side_by_side(uar, a, b)
                if frame is None:
                    continue
                order = sorted(frame.maps, key=lambda m: pos[m])
                frame = replace(frame, maps={m: frame.maps[m] for m in order})
                problems, need = frame_problems(uar, frame)
                if [p for p in problems if not padding_only(uar, frame, p)]:
                    continue
                frame = replace(frame, barriers=need)
                notes = a.group.notes + b.group.notes + [
                    HeteroPlacement(tuple(b.members), tuple(a.members), steps[a.name])]
                multi = any(len(u.members) > 1 and u.orchestration != "horizontal"
                            for u in (a, b))
                a.group = LocalGroup(frame, notes, a.group.how | b.group.how | {"P3h"})
                a.members = tuple(order)
                a.orchestration = "hybrid" if multi else "horizontal"
                a.sig = a.sig + b.sig
                groups.remove(b)
                changed = True
                break
            if changed:
                break
    return groups + hosts


def apart_reasons(uar: Any, units: Sequence[Any], steps: dict[str, int], graph: nx.DiGraph,
                  hetero_tried: bool, target: Target = REFERENCE_TARGET
                  ) -> list[ApartReason]:
    """For every pair of independent groups left apart: why."""
    groups = [u for u in units if u.group is not None]
    paths = dependence_paths(uar, list(units))
    reach = {n: nx.descendants(paths, n) for n in paths.nodes}
    out = []
    for i, a in enumerate(groups):
        for b in groups[i + 1:]:
            if b.name in reach[a.name] or a.name in reach[b.name]:
                continue
            members = (tuple(a.members), tuple(b.members))
            why = _why_apart(uar, a, b, steps, target)
            if why is not None:
                out.append(ApartReason(*members, Apart.INCOMPATIBLE, why))
                continue
            unit_of = {m: id(u) for u in groups for m in u.members}
            place = placement_problem(uar, graph, a.members + b.members, unit_of)
            if place:
                out.append(ApartReason(*members, Apart.PLACEMENT, place))
            elif hetero_tried:
                frame, fail = _side_by_side(uar, a, b)
                out.append(ApartReason(*members, Apart.NO_GRID, fail) if frame is None else
                           ApartReason(*members, Apart.BREAKS))
            else:
                out.append(ApartReason(*members, Apart.NOT_IN_VARIANT))
    return out


__all__ = ["apart_reasons", "dependence_paths", "hetero_fusion", "independent", "local_bytes",
           "padding_only"]
