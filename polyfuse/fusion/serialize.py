"""``plan.json`` (docs/interfaces.md): a deterministic, diff-friendly dictionary of a
:class:`FusionPlan`.

Groups keep their id order, fragments their execution order, edges the UAR's order (host order
of source, then destination, array, kind) and blocked edges the same; :func:`plan_to_text`
dumps with sorted keys so that plans checked in under ``schedules/`` diff cleanly.
"""

from __future__ import annotations

import json
from typing import Any

from polyfuse.fusion.plan import BlockedFusion, FusedGroup, FusionPlan


def _size_json(size: Any) -> Any:
    """Sizes stay JSON numbers when known; symbolic ones (sympy) become their string."""
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
        "kernel": g.kernel,
        "step": g.step,
        "fragments": [{"launch": f.launch, "kernel": f.kernel, "reindex": f.reindex,
                       "barrier_before": f.barrier_before} for f in g.fragments],
        "global_size": _size_json(g.global_size),
        "local_size": _size_json(g.local_size),
        "notes": list(g.notes),
    }
    if g.schedule is not None:
        out["schedule"] = g.schedule
    return out


def _blocked_json(b: BlockedFusion) -> dict[str, Any]:
    return {"src": b.src, "dst": b.dst, "array": b.array, "kind": b.kind, "width": b.width,
            "reason": b.reason, "witness": b.witness}


def plan_to_json(plan: FusionPlan) -> dict[str, Any]:
    """The docs/interfaces.md ``plan.json`` object of a plan."""
    out: dict[str, Any] = {
        "launches_before": plan.launches_before,
        "launches_after": plan.launches_after,
        "groups": [_group_json(g) for g in plan.groups],
        "edges": [e.to_json() for e in plan.uar.edges],
        "blocked": [_blocked_json(b) for b in plan.blocked],
        "optimizations": dict(sorted(plan.optimizations.items())),
    }
    if plan.schedule is not None:
        out["schedule"] = plan.schedule
    if plan.verified is not None:
        out["verified"] = dict(plan.verified)
    return out


def plan_to_text(plan: FusionPlan) -> str:
    """``plan.json`` text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(plan_to_json(plan), indent=2, sort_keys=True) + "\n"
