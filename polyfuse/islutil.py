"""Small guards around isl that every stage shares."""

from __future__ import annotations

from typing import TypeVar

import islpy as isl

T = TypeVar("T")


def coalesce(obj: T) -> T:
    """``obj.coalesce()``, or ``obj`` unchanged when isl's coalescing fails.

    Coalescing only merges disjuncts of the same set; the result is equal either way.  isl
    (islpy 2026.2) can raise "total dimensionality changed unexpectedly" on some maps built in
    memory (the same map printed and parsed again coalesces fine), so a failure must not abort
    the analysis: the uncoalesced object is kept.
    """
    try:
        return obj.coalesce()  # type: ignore[attr-defined]
    except isl.Error:
        return obj
