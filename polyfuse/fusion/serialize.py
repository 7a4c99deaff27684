"""Deprecated: ``plan.json`` rendering moved to :mod:`polyfuse.report.plan_file`
(docs/interfaces.md); this module re-exports it for one release."""

from __future__ import annotations

from typing import Any

_MOVED = ("plan_to_json", "plan_to_text", "size_json")


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    from polyfuse import report

    warnings.warn(f"polyfuse.fusion.serialize.{name} moved to polyfuse.report.{name}",
                  DeprecationWarning, stacklevel=2)
    return getattr(report, name)
