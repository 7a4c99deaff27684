"""``plan.json`` (docs/interfaces.md): a deterministic, diff-friendly dictionary of a
:class:`FusionPlan`'s decisions, and what code generation and verification made of them.

Groups keep their id order, fragments their execution order, edges the UAR's order (host order
of source, then destination, array, kind) and blocked edges the same; :func:`plan_to_text`
dumps with sorted keys so that plans checked in under ``schedules/`` diff cleanly.  The whole
``plan.json`` (:func:`plan_json`) adds what code generation and verification made of the plan.
Decisions are records; their wording is :mod:`polyfuse.report.decisions`'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional, Union

from polyfuse.codegen import FusedProgram
from polyfuse.core.mathtext import readable
from polyfuse.fusion.plan import BlockedFusion, FusedGroup, FusionPlan
from polyfuse.report.decisions import note_text, refusal_text


def size_json(size: Any) -> Any:
    """An NDRange as JSON: known sizes stay numbers, symbolic ones (sympy) become their string."""
    if size is None:
        return None
    out = []
    for v in size:
        try:
            out.append(int(v))
        except (TypeError, ValueError):
            out.append(str(v))
    return out


def _group_json(g: FusedGroup) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": g.id,
        "members": list(g.members),
        "orchestration": g.orchestration,
        "step": g.step,
        "fragments": [{"launch": f.launch, "kernel": f.kernel, "reindex": f.reindex_text,
                       "barrier_before": f.barrier_before} for f in g.fragments],
        "global_size": size_json(g.global_size),
        "local_size": size_json(g.local_size),
        "notes": [note_text(n) for n in g.notes],
    }
    if g.schedule is not None:
        out["schedule"] = g.schedule
    return out


def _blocked_json(b: BlockedFusion) -> dict[str, Any]:
    return {"src": b.src, "dst": b.dst, "array": b.array, "kind": b.kind, "width": b.width,
            "reason": refusal_text(b.reason), "witness": b.witness}


def plan_to_json(plan: FusionPlan) -> dict[str, Any]:
    """The plan's decisions as a ``plan.json`` object (without generated kernel names,
    optimizations or verification: :func:`plan_json` adds those)."""
    out: dict[str, Any] = {
        "launches_before": plan.launches_before,
        "launches_after": plan.launches_after,
        "groups": [_group_json(g) for g in plan.groups],
        "edges": [e.to_json() for e in plan.uar.edges],
        "blocked": [_blocked_json(b) for b in plan.blocked],
    }
    if plan.schedule is not None:
        out["schedule"] = plan.schedule
    return out


def plan_to_text(plan: Union[FusionPlan, Mapping[str, Any]]) -> str:
    """``plan.json`` text of a plan (or of an assembled ``plan.json`` object): sorted keys,
    two-space indent, trailing newline; UTF-8, so readable counts (``4·steps``) read as such."""
    obj = plan_to_json(plan) if isinstance(plan, FusionPlan) else plan
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def plan_json(fused: FusedProgram, verified: Optional[Mapping[str, Any]] = None
              ) -> dict[str, Any]:
    """``plan.json`` (docs/interfaces.md): the plan's decisions, what code generation made of
    each group (kernel name, launched NDRange, its notes after the plan's), the fused program's
    launch count and optimizations, and the verification summary when verification ran."""
    out = plan_to_json(fused.plan)
    for group in out["groups"]:
        k = fused.group(group["id"])
        group.update(kernel=k.kernel, global_size=size_json(k.global_size),
                     local_size=size_json(k.local_size),
                     notes=group["notes"] + [note_text(n) for n in k.notes])
    out["launches_after"] = fused.launches_after
    for key in ("launches_before", "launches_after"):
        if not isinstance(out[key], int):  # symbolic: the exact str stays, readable beside it
            out[f"{key}_readable"] = readable(out[key])
    out["optimizations"] = dict(sorted(fused.optimizations.items()))
    if verified is not None:
        out["verified"] = dict(verified)
    return out


__all__ = ["plan_json", "plan_to_json", "plan_to_text", "size_json"]
