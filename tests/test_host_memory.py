"""The host interpreter's memory: what a path wrote since an earlier state."""

from __future__ import annotations

import sympy

from polyfuse.frontend.host.memory import Slot, State, changed_slots, written_slots
from polyfuse.frontend.host.values import CType, Num

INT = CType("int", 0)


def _state(n: int) -> State:
    s = State()
    for k in range(n):
        s.slots[k] = Slot(f"v{k}", INT, Num(sympy.Integer(k)))
    return s


def test_written_slots_are_the_writes_since_the_earlier_state_only() -> None:
    live = _state(5000)
    base = live.clone()
    sibling = base.clone()
    sibling.slots[7] = Slot("v7", INT, Num(sympy.Integer(-7)))
    live.slots[40] = Slot("v40", INT, Num(sympy.Integer(-40)))
    live.slots[3] = Slot("v3", INT, Num(sympy.Integer(3)))  # the same value, written again
    live.slots[40] = Slot("v40", INT, Num(sympy.Integer(-41)))
    live.slots[5000] = Slot("fresh", INT, Num(sympy.Integer(1)))  # made after base
    snap = live.clone()
    live.slots[9] = Slot("v9", INT, Num(sympy.Integer(-9)))
    assert written_slots(base, live) == [3, 9, 40, 5000]
    assert changed_slots(base, live) == [9, 40]  # a slot base lacks is no change of base's
    assert written_slots(snap, live) == [9]
    assert written_slots(base, sibling) == [7]  # a clone's writes are its own
    assert written_slots(base, base) == written_slots(base, base.clone()) == []
    assert base.slots[40].value == Num(sympy.Integer(40))
