"""Fusion planning (docs/fusion.md): local fusion (P1), global fusion with isl (P2, P3).

``plan_fusion(uar)`` returns a :class:`FusionPlan` whose groups place each launch into a fused
grid by an isl re-indexing; ``check_plan(plan)`` is the legality certificate (every intra-group
dependence pairs one fused work-item, or one fused work-group behind a barrier);
the plan's decisions are records (:mod:`.decisions`), rendered with ``plan.json`` and
``report.md`` by :mod:`polyfuse.report`.

Execution semantics of a plan: host operations run in host order; a group runs as one launch per
iteration of its host loops, at the host position of its last member (local and P3 fusion check
that no member feeds a non-member operation placed before that position); ``step`` is the launch
step of the isl schedule (groups of one loop body joined by a dependence have increasing steps).
"""

from typing import Any

from polyfuse.fusion.global_ import plan_fusion
from polyfuse.fusion.local import check_plan
from polyfuse.fusion.plan import BlockedFusion, Fragment, FusedGroup, FusionPlan

__all__ = ["BlockedFusion", "Fragment", "FusedGroup", "FusionPlan", "check_plan",
           "plan_fusion"]

_MOVED = ("plan_to_json", "plan_to_text", "size_json")


def __getattr__(name: str) -> Any:
    """``plan_to_json`` and co., moved to :mod:`polyfuse.report` (kept for one release)."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    from polyfuse import report

    warnings.warn(f"polyfuse.fusion.{name} moved to polyfuse.report.{name}",
                  DeprecationWarning, stacklevel=2)
    return getattr(report, name)
