"""Control-flow signals of the host interpreter: ``return``, ``break``, ``continue``, ``goto``
and ``exit`` unwind the evaluator's Python stack as exceptions; :class:`NeedUnroll` asks the
enclosing symbolic host loop to unroll."""

from __future__ import annotations

from typing import Any


class Signal(Exception):  # noqa: N818 - control flow, not an error
    pass


class Exit(Signal):
    pass


class Return(Signal):
    def __init__(self, value: Any):
        super().__init__()
        self.value = value


class Break(Signal):
    pass


class Continue(Signal):
    pass


class Goto(Signal):
    def __init__(self, label: str):
        super().__init__(label)
        self.label = label


class NeedUnroll(Signal):
    """A loop iterator is needed as a concrete value: the enclosing symbolic loop must unroll."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why

