"""Deprecated: the UAR's drawings moved to :mod:`polyfuse.report.display` (docs/interfaces.md);
this module re-exports them for one release."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    import warnings

    from polyfuse.report import display

    value = getattr(display, name)
    warnings.warn(f"polyfuse.uar.display.{name} moved to polyfuse.report.display.{name}",
                  DeprecationWarning, stacklevel=2)
    return value
