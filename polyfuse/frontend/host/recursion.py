"""Recursive calls of the host's own functions.

Inlining a recursive function is bounded only by its arguments; on a path polyfuse explores
without knowing them (an option parser that re-enters itself for a configuration file, under a
string comparison it cannot decide) every level multiplies the branches and loop passes below
it.  A function that makes no OpenCL call, directly or through the program's functions, cannot
change the model's operations, so a call that re-enters it is summarised instead: its result is
unknown and what it may write (through its pointer arguments, and the globals it names) is
forgotten.  A recursive function that does make OpenCL calls is still inlined, up to the call
depth limit.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from pycparser import c_ast

from polyfuse.frontend.host import clhpp
from polyfuse.frontend.host.opencl_api import HANDLERS
from polyfuse.frontend.host.values import (
    UNK,
    UNKF,
    Arr,
    Cond,
    Num,
    Poison,
    Rec,
    Ref,
    Runtime,
    Str,
    Unknown,
    Value,
)

if TYPE_CHECKING:
    from polyfuse.frontend.host.evaluator import CEvaluator

_CHANGED = Poison("may be changed by a recursive call polyfuse summarises")


class _Reach(c_ast.NodeVisitor):
    """The names a function body uses and the functions it calls."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.calls: set[str] = set()

    def visit_FuncCall(self, node: c_ast.FuncCall) -> None:  # noqa: N802 - visitor protocol
        if isinstance(node.name, c_ast.ID):
            self.calls.add(node.name.name)
        self.generic_visit(node)

    def visit_ID(self, node: c_ast.ID) -> None:  # noqa: N802 - visitor protocol
        self.names.add(node.name)


def reach(ev: CEvaluator, name: str) -> tuple[bool, frozenset[str]]:
    """Whether the program's function ``name`` makes an OpenCL call (directly or through the
    program's functions it calls), and every name those bodies use; cached per function."""
    cache: dict[str, tuple[bool, frozenset[str]]] = ev.reach_cache
    if name in cache:
        return cache[name]
    opencl, names = False, set()
    todo, seen = [name], {name}
    while todo:
        r = _Reach()
        for fd in ev.overloads.get(todo.pop(), ()):
            r.visit(fd.body)
        names |= r.names
        for callee in r.calls:
            if callee in HANDLERS or callee.startswith(clhpp.PREFIX):
                opencl = True
            elif callee in ev.funcs and callee not in seen:
                seen.add(callee)
                todo.append(callee)
    cache[name] = (opencl, frozenset(names))
    return cache[name]


#: calls of one function already on the stack past which a recursion without OpenCL calls is
#: summarised: a recursion over known data (an option table's entries) runs as written
MAX_REENTRY = 4


def is_summarised(ev: CEvaluator, fd: c_ast.FuncDef) -> bool:
    """Whether a call of ``fd`` re-enters, for the :data:`MAX_REENTRY`-th time, a function on
    the call stack that makes no OpenCL call (then it is summarised by
    :func:`summarise_call`, not inlined)."""
    return sum(f.func == id(fd) for f in ev.mem.frames) >= MAX_REENTRY and \
        not reach(ev, fd.decl.name)[0]


def summarise_call(ev: CEvaluator, fd: c_ast.FuncDef, args: list[Value],
                   node: c_ast.Node) -> Value:
    """A recursive call of ``fd`` (no OpenCL call in it): forget what it may write; its
    result is unknown."""
    ev.ctx.warn(f"recursive call of '{fd.decl.name}' summarised: it makes no OpenCL call; "
                "what it may write becomes unknown", node)
    seen: set[int] = set()
    for a in args:
        if isinstance(a, Ref):
            _forget_slot(ev, a.slot, seen)
    names = reach(ev, fd.decl.name)[1]
    for g, sid in ev.mem.globals.items():
        if g in names:
            _forget_slot(ev, sid, seen)
    ret = ev.types.of(fd.decl.type.type) if fd.decl.type.type is not None else None
    return UNKF if ret is not None and ret.kind == "float" else UNK


def _forget_slot(ev: CEvaluator, sid: int, seen: set[int]) -> None:
    if sid in seen:
        return
    seen.add(sid)
    slot = ev.mem.state.slots.get(sid)
    if slot is not None:
        ev.mem.state.slots[sid] = dataclasses.replace(slot, value=_forget(ev, slot.value, seen))


def _forget(ev: CEvaluator, v: Any, seen: set[int]) -> Any:
    """``v`` with every part a function may write replaced by unknown (pointers keep their
    target, which is forgotten too; handles it may swap are poisoned)."""
    if isinstance(v, Num):
        return UNKF if v.flt else UNK
    if isinstance(v, (Unknown, Runtime, Cond, Str)):
        return UNK
    if isinstance(v, Ref):
        _forget_slot(ev, v.slot, seen)
        return v
    if isinstance(v, Arr):
        return Arr(v.length, tuple((k, _forget(ev, e, seen)) for k, e in v.elems),
                   None if v.default is None else _forget(ev, v.default, seen))
    if isinstance(v, Rec):
        return Rec(tuple((k, _forget(ev, e, seen)) for k, e in v.fields))
    if isinstance(v, clhpp.Vec):
        return clhpp.Vec(None, v.elem)
    if isinstance(v, clhpp.StdMap):
        return clhpp.StdMap(None)
    if isinstance(v, Poison):
        return v
    return _CHANGED
