"""Why each launch that starts a group in local fusion does so (the report explains itself).

Local fusion (P1) merges a launch into its producers' group or starts a new group with it.
A new group has one of these reasons, computed here from the UAR and the planner's own
per-edge verdicts (so the report never invents one):

* a **blocking edge**: a dependence on an earlier launch that P1 could not fuse, with its width
  and witness (P2: global), or the re-indexing that failed (no consistent re-indexing), or the
  host loops (different host-loop body);
* **independent**: no dependence on any earlier launch in the same host-loop iteration, so
  there is nothing for P1 to merge it into; then P3 decides, and its outcome is stated (joined
  by P3, or why not: different step, code not identical, different host-loop body, connected).

The reasons are records on the plan (``FusionPlan.starts``: launch id ->
:class:`~polyfuse.fusion.decisions.StartReason`), rendered by :mod:`polyfuse.report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from polyfuse.core.program import Launch
from polyfuse.fusion.decisions import EdgeRef, P3Verdict, Refusal, Refused, StartCause, StartReason
from polyfuse.fusion.reindex import in_iteration_empty


def _edge(e: Any, why: Refusal | None = None) -> EdgeRef:
    """The edge as a decision names it, with its global witness unless ``why`` states it."""
    wit = e.witness.get("text") if isinstance(e.witness, dict) else None
    stated = why is not None and wit is not None and wit in f"{why.summary}: {why.detail}"
    shown = wit if e.width == "global" and wit and not stated else None
    return EdgeRef(e.kind, e.src, e.dst, e.array, e.width, shown)


def start_reasons(uar: Any, starters: Sequence[int], local_reasons: Mapping[Any, Refusal],
                  edge_key: Any, group_of: Mapping[int, int], steps: Mapping[int, int],
                  signature: Mapping[int, Any], loop_ids: Mapping[int, Any]
                  ) -> dict[int, StartReason]:
    """Launch id -> why it starts a group (module docstring).

    ``group_of`` maps each launch to its final group, ``steps``/``signature``/``loop_ids`` map
    each final group to its launch step, its code signature and its host-loop identity.
    """
    pos = {op.id: k for k, op in enumerate(uar.program.ops)}
    out: dict[int, StartReason] = {}
    for y in starters:
        into = [e for e in uar.edges if not e.host and e.dst == y and e.src != y
                and isinstance(uar.program.op(e.src), Launch) and pos[e.src] < pos[y]]
        in_iter = [e for e in into if not in_iteration_empty(uar, e)]
        # an edge from the same host-loop body is what P1 tried to fuse: its reason blocks,
        # not that of an edge from outside the loop (which could never fuse)
        loops = uar.instances(y).loop_ids
        in_iter.sort(key=lambda e: uar.instances(e.src).loop_ids != loops)
        if in_iter:
            e = in_iter[0]
            why = local_reasons.get(edge_key(e))
            if why is None:
                kind = Refused.GLOBAL if e.width == "global" else Refused.PRODUCERS
                why = Refusal(kind, kind.value)
            out[y] = StartReason(StartCause.BLOCKED, edge=_edge(e, why), refusal=why)
            continue
        if into:
            out[y] = StartReason(StartCause.CROSS_LOOP, edge=_edge(into[0]))
            continue
        g = group_of[y]
        joined = tuple(sorted(m for m, h in group_of.items() if h == g and m != y))
        if joined:
            later = any(pos[m] < pos[y] for m in joined)
            out[y] = StartReason(StartCause.JOINED_LATER if later else StartCause.JOINED,
                                 joined=joined)
            continue
        others = []
        for h in sorted({h for m, h in group_of.items() if h != g}):
            if steps[h] != steps[g]:
                continue
            members = tuple(m for m, k in sorted(group_of.items()) if k == h)
            if loop_ids[h] != loop_ids[g]:
                others.append((members, P3Verdict.LOOP_BODY))
            elif signature[h] != signature[g]:
                others.append((members, P3Verdict.CODE))
            else:
                others.append((members, P3Verdict.ORCHESTRATION))
        out[y] = StartReason(StartCause.ALONE, step=steps[g], others=tuple(others))
    return out


__all__ = ["start_reasons"]
