"""Small guards around isl that every stage shares."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Optional, TypeVar

import islpy as isl

T = TypeVar("T")

#: isl's operation quota for one bounded computation.  Ordinary polyfuse relations need a few
#: thousand operations; the quota only stops the rare problem whose size explodes (large
#: constants in floor/mod subscripts), which would otherwise run for hours.
MAX_OPERATIONS = 200_000

_QUOTA_TEXT = "maximal number of operations exceeded"


class IslQuotaExceeded(Exception):
    """An isl computation hit its operation quota; the caller falls back to a safe answer."""


def coalesce(obj: T) -> T:
    """``obj.coalesce()``, or ``obj`` unchanged when isl's coalescing fails.

    Coalescing only merges disjuncts of the same set; the result is equal either way.  isl
    (islpy 2026.2) can raise "total dimensionality changed unexpectedly" on some maps built in
    memory (the same map printed and parsed again coalesces fine), so a failure must not abort
    the analysis: the uncoalesced object is kept.  Under a quota (:func:`bounded`) an exceeded
    quota is re-raised, since the uncoalesced object would be as costly downstream.
    """
    try:
        return obj.coalesce()  # type: ignore[attr-defined]
    except isl.Error as err:
        if over_quota(err):
            raise IslQuotaExceeded(str(err)) from err
        return obj


def over_quota(err: isl.Error) -> bool:
    """Whether ``err`` came from an exhausted operation quota.

    isl reports the quota in the message, except where the failing call masks it (the parser
    says "syntax error"), so a tiny probe decides: under an exhausted quota it fails too.
    """
    if _QUOTA_TEXT in str(err):
        return True
    if not isl.DEFAULT_CONTEXT.get_max_operations():
        return False
    try:
        isl.Set("{ [i] : 0 <= i <= 1 }").is_empty()
    except isl.Error:
        return True
    return False


@contextmanager
def bounded(max_operations: Optional[int] = None) -> Iterator[None]:
    """Run the body under isl's operation quota; raise :class:`IslQuotaExceeded` when hit.

    Nested uses keep the outermost quota (its count is not reset), so a bounded helper called
    from a bounded caller cannot extend the caller's budget.
    """
    ctx = isl.DEFAULT_CONTEXT
    outer = ctx.get_max_operations()
    if not outer:
        ctx.set_max_operations(max_operations or MAX_OPERATIONS)
        ctx.reset_operations()
    try:
        yield
    except isl.Error as err:
        if over_quota(err):
            raise IslQuotaExceeded(str(err)) from err
        raise
    finally:
        if not outer:
            ctx.set_max_operations(0)
            ctx.reset_operations()
