"""C++ parameter packs: variadic function templates run with the arguments each call gives.

A variadic function template is lowered once (:mod:`polyfuse.frontend.clang_host`): its pack
parameter (``Args... args``) has the type ``__polyfuse_pack``, a call clang resolved passes the
pack's arguments as ``__polyfuse_pack(a, b, ...)``, an expansion is ``__polyfuse_expand(pattern)``
and ``sizeof...(args)`` is ``__polyfuse_pack_size(args)``.  Here a pack is a :class:`Pack`
value.  An expansion evaluates its pattern once per element, every pack the pattern names bound
to that element (``f(args...)``, ``std::forward<Args>(args)...``, ``(k.setArg(i++, args),
...)``); in an argument list the values take its place.  A call by name in a template, whose
pack size is known only when it runs, binds the trailing arguments to the callee's pack; C++
prefers a non-variadic overload that takes them (the last step of a recursion over the pack).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import sympy
from pycparser import c_ast

from polyfuse.core.program import UnsupportedError
from polyfuse.frontend.host.values import DOUBLE, UNK, UNK_TYPE, CType, Num, Ref, Value

if TYPE_CHECKING:
    from polyfuse.frontend.host.evaluator import CEvaluator

#: the type of a pack parameter in the lowered program (clang_host.PACK_TYPE)
PACK_TYPE = "__polyfuse_pack"
EXPAND = "__polyfuse_expand"
#: the lowered program's pack operations, run by :func:`call`
CALLS = ("__polyfuse_pack", EXPAND, "__polyfuse_pack_size")


@dataclass(frozen=True)
class Pack(Value):
    """The arguments a function parameter pack holds, in order."""

    values: tuple


def call(ev: CEvaluator, name: str, argn: list[c_ast.Node], node: c_ast.Node) -> Value:
    """``__polyfuse_pack(a, b)``: the pack; ``__polyfuse_pack_size(args)``: its length;
    ``__polyfuse_expand(pattern)`` outside an argument list (a fold over ``,``): the pattern
    run for each element."""
    if name == "__polyfuse_pack":
        return Pack(tuple(eval_args(ev, argn)))
    if name == "__polyfuse_pack_size":
        pack = ev.eval(argn[0]) if argn else UNK
        return Num(sympy.Integer(len(pack.values))) if isinstance(pack, Pack) else UNK
    expand(ev, argn[0], node)
    return UNK


def eval_args(ev: CEvaluator, argn: list[c_ast.Node]) -> list[Value]:
    """The values of a call's arguments, each expansion giving its elements' values."""
    out: list[Value] = []
    for a in argn:
        if isinstance(a, c_ast.FuncCall) and isinstance(a.name, c_ast.ID) and \
                a.name.name == EXPAND and a.args is not None:
            out += expand(ev, a.args.exprs[0], a)
        else:
            out.append(ev.eval(a))
    return out


def expand(ev: CEvaluator, pattern: c_ast.Node, node: c_ast.Node) -> list[Value]:
    """The values of ``pattern`` for each element of the packs it names, in order."""
    packs: dict[str, Pack] = {}
    for name in dict.fromkeys(_names(pattern)):
        sid = ev.mem.lookup(name)
        v = ev.mem.read(Ref(sid)) if sid is not None else None
        if isinstance(v, Pack):
            packs[name] = v
    lengths = {len(p.values) for p in packs.values()}
    if len(lengths) != 1:
        why = "names no parameter pack polyfuse followed" if not packs else \
            "expands packs of different lengths"
        raise ev.ctx.error(f"unsupported host construct: a pack expansion that {why}", node,
                           UnsupportedError)
    out = []
    for i in range(lengths.pop()):
        ev.mem.frames[-1].scopes.append({})
        try:
            for name, pack in packs.items():
                ev.mem.declare(name, _type_of(pack.values[i]), pack.values[i])
            out.append(ev.eval(pattern))
        finally:
            ev.mem.frames[-1].scopes.pop()
    return out


def overload(ev: CEvaluator, name: str, args: list[Value], targs: list[Value]
             ) -> Optional[tuple[c_ast.FuncDef, list[Value]]]:
    """For a call by name in a template (``f(x, rest...)``, ``args`` expanded) where a
    function of that name is variadic: the function it runs and the values of its
    parameters (a pack, the hidden template parameters given by ``targs`` and unknown
    after them); None when no function of that name is variadic or none takes them."""
    fds = ev.overloads.get(name, ())
    if not any(pack_at(fd) is not None for fd in fds):
        return None
    for fd in fds:  # a non-variadic template taking these arguments is preferred
        hidden = _hidden(fd, len(args))
        if pack_at(fd) is None and hidden is not None and hidden >= len(targs):
            return fd, args + (targs + [UNK] * hidden)[:hidden]
    for fd in fds:
        at = pack_at(fd)
        if at is not None and len(args) >= at:
            hidden = len(_named(fd)) - at - 1
            return fd, args[:at] + [Pack(tuple(args[at:]))] + \
                (targs + [UNK] * hidden)[:hidden]
    return None


def pack_at(fd: c_ast.FuncDef) -> Optional[int]:
    """The position of a function's pack parameter, else None."""
    return next((i for i, p in enumerate(_named(fd)) if isinstance(p.type, c_ast.TypeDecl) and
                 getattr(p.type.type, "names", None) == [PACK_TYPE]), None)


def _hidden(fd: c_ast.FuncDef, nargs: int) -> Optional[int]:
    """How many hidden template parameters ``fd`` has after the ``nargs`` arguments a call
    gives, else None when it does not take that many."""
    named = _named(fd)
    return len(named) - nargs if real_arity(fd) == nargs else None


def real_arity(fd: c_ast.FuncDef) -> int:
    """The parameters of a function that a call's arguments give: not the hidden template
    parameters (``const long``) the lowering appends."""
    return len([p for p in _named(fd) if "const" not in p.quals or
                not isinstance(p.type, c_ast.TypeDecl) or
                getattr(p.type.type, "names", None) != ["long"]])


def _named(fd: c_ast.FuncDef) -> list[c_ast.Decl]:
    params = fd.decl.type.args.params if fd.decl.type.args is not None else []
    return [p for p in params if isinstance(p, c_ast.Decl) and p.name]


def _type_of(v: Value) -> CType:
    """A type that keeps an element's value as the call passed it (a float stays one)."""
    return DOUBLE if isinstance(v, Num) and v.flt else UNK_TYPE


def _names(node: c_ast.Node) -> Iterator[str]:
    if isinstance(node, c_ast.ID):
        yield node.name
    for _, child in node.children():
        yield from _names(child)
