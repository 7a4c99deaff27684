"""What the ONNX front-end made of each graph node, as records: a kernel launch (and the form
its kernel took for a consumer's sake), an alias of a buffer, a fold on the host, a sequence.

:attr:`polyfuse.frontend.onnx.OnnxModel.outcomes` holds them; ``report.md`` reads them (how
many nodes became launches, which kernel forms were chosen for fusion and why).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Fate(enum.Enum):
    """What became of a node."""

    LAUNCH = "launch"
    ALIAS = "alias of"
    FOLDED = "folded on the host"
    SEQUENCE = "sequence"


@dataclass(frozen=True)
class NodeOutcome:
    """A node's ``fate`` and its object: the kernel launched, the buffer aliased or the
    sequence; ``forms`` say how a matrix product's kernel was laid out for the row reduction
    that consumes it (or why it could not be)."""

    fate: Fate
    what: str = ""
    #: one entry per consumer that asked for a form (in the order they asked)
    forms: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """The one-line description :attr:`OnnxModel.nodes` lists."""
        if self.fate is Fate.FOLDED:
            return Fate.FOLDED.value
        if self.fate is Fate.SEQUENCE:
            return self.what
        return f"{self.fate.value} {self.what}" + "".join(f" ({f})" for f in self.forms)


__all__ = ["Fate", "NodeOutcome"]
