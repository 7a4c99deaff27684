"""The unified abstract representation (UAR): effects, dependences, widths (docs/definitions.md)."""

from polyfuse.uar.deps import Dependence, dependences, host_schedule
from polyfuse.uar.effects import LEVELS, Effects, Instantiation, OpInstances, instantiate
from polyfuse.uar.graph import UAR, Edge, LaunchInfo, VirtualEdge, build_uar
from polyfuse.uar.width import WIDTHS, WidthResult, bijective_params, classify

__all__ = [
    "LEVELS", "WIDTHS", "UAR", "Dependence", "Edge", "Effects", "Instantiation", "LaunchInfo",
    "OpInstances", "VirtualEdge", "WidthResult", "bijective_params", "build_uar", "classify",
    "dependences", "host_schedule", "instantiate",
]
