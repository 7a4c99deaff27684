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

The reasons are data on the plan (``FusionPlan.starts``: launch id -> reason), rendered by
``report.md`` in one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from polyfuse.fusion.reindex import edge_in_iteration
from polyfuse.program import Launch


def _kernel(uar: Any, lid: int) -> str:
    op = uar.program.op(lid)
    return op.kernel if isinstance(op, Launch) else "host"


def _edge_text(e: Any, why: str = "") -> str:
    text = f"{e.kind} L{e.src}->L{e.dst} on {e.array} ({e.width}"
    wit = e.witness.get("text") if isinstance(e.witness, dict) else None
    if e.width == "global" and wit and wit not in why:
        text += f"; witness {wit}"
    return text + ")"


def start_reasons(uar: Any, starters: Sequence[int], local_reasons: Mapping[Any, str],
                  edge_key: Any, group_of: Mapping[int, int], steps: Mapping[int, int],
                  signature: Mapping[int, Any], loop_ids: Mapping[int, Any]) -> dict[int, str]:
    """Launch id -> why it starts a group (module docstring).

    ``group_of`` maps each launch to its final group, ``steps``/``signature``/``loop_ids`` map
    each final group to its launch step, its code signature and its host-loop identity.
    """
    pos = {op.id: k for k, op in enumerate(uar.program.ops)}
    out: dict[int, str] = {}
    for y in starters:
        into = [e for e in uar.edges if not e.host and e.dst == y and e.src != y
                and isinstance(uar.program.op(e.src), Launch) and pos[e.src] < pos[y]]
        in_iter = [e for e in into if not edge_in_iteration(uar, e).is_empty()]
        # an edge from the same host-loop body is what P1 tried to fuse: its reason blocks,
        # not that of an edge from outside the loop (which could never fuse)
        loops = uar.instances(y).loop_ids
        in_iter.sort(key=lambda e: uar.instances(e.src).loop_ids != loops)
        if in_iter:
            e = in_iter[0]
            why = local_reasons.get(edge_key(e))
            if why is None:
                why = ("global dependence (P2)" if e.width == "global"
                       else "its producers' group could not take it")
            out[y] = f"blocked by {_edge_text(e, why)}: {why}"
            continue
        if into:
            out[y] = (f"different host-loop body: its dependences ({_edge_text(into[0])}) cross "
                      "host-loop iterations, and only one loop body is fused")
            continue
        g = group_of[y]
        joined = sorted(m for m, h in group_of.items() if h == g and m != y)
        if joined:
            head = "independent (no dependence on an earlier launch in the same host-loop " \
                   "iteration), so P1 has nothing to merge it into; "
            earlier = [m for m in joined if pos[m] < pos[y]]
            if earlier:
                out[y] = head + (f"placed with {', '.join(f'L{m}' for m in joined)} later (P3, "
                                 "heterogeneous horizontal fusion or a common consumer)")
            else:
                out[y] = head + f"{', '.join(f'L{m}' for m in joined)} joined its group"
            continue
        others = sorted({h for m, h in group_of.items() if h != g})
        same_step = [h for h in others if steps[h] == steps[g]]
        if not same_step:
            p3 = f"P3: no other group at launch step {steps[g]} (different step)"
        else:
            reasons = []
            for h in same_step:
                names = ", ".join(f"L{m}" for m, k in sorted(group_of.items()) if k == h)
                if loop_ids[h] != loop_ids[g]:
                    reasons.append(f"{names}: different host-loop body")
                elif signature[h] != signature[g]:
                    reasons.append(f"{names}: P3 not identical (different code)")
                else:
                    reasons.append(f"{names}: same code but no common orchestration "
                                   "(grids, placement or re-indexing)")
            p3 = f"P3 at launch step {steps[g]}: " + "; ".join(reasons)
        out[y] = f"independent (no dependence on an earlier launch), so P1 has nothing to " \
                 f"merge it into; {p3}"
    return out


__all__ = ["start_reasons"]
