"""The plan's part of ``plan.json`` (docs/interfaces.md): a deterministic, diff-friendly
dictionary of a :class:`FusionPlan`'s decisions.

Groups keep their id order, fragments their execution order, edges the UAR's order (host order
of source, then destination, array, kind) and blocked edges the same; :func:`plan_to_text`
dumps with sorted keys so that plans checked in under ``schedules/`` diff cleanly.  The whole
``plan.json`` adds what code generation and verification made of the plan
(:func:`polyfuse.pipeline.plan_json`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Union

from polyfuse.fusion.plan import BlockedFusion, FusedGroup, FusionPlan


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
        "fragments": [{"launch": f.launch, "kernel": f.kernel, "reindex": f.reindex,
                       "barrier_before": f.barrier_before} for f in g.fragments],
        "global_size": size_json(g.global_size),
        "local_size": size_json(g.local_size),
        "notes": list(g.notes),
    }
    if g.schedule is not None:
        out["schedule"] = g.schedule
    return out


def _blocked_json(b: BlockedFusion) -> dict[str, Any]:
    return {"src": b.src, "dst": b.dst, "array": b.array, "kind": b.kind, "width": b.width,
            "reason": b.reason, "witness": b.witness}


def plan_to_json(plan: FusionPlan) -> dict[str, Any]:
    """The plan's decisions as a ``plan.json`` object (without generated kernel names,
    optimizations or verification: :func:`polyfuse.pipeline.plan_json` adds those)."""
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
