"""Reading and rewriting pycparser syntax trees: the walks the kernel front-end, code generation
and code motion all need (names used, declared, modified, called; renaming; rebuilding)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Optional

from pycparser import c_ast

from polyfuse.core.program import SourceLoc


def child_slots(node: c_ast.Node) -> Iterator[str]:
    """The attribute names of ``node`` that hold children (a node or a list of nodes)."""
    for name in node.__slots__:
        if name not in ("coord", "__weakref__"):
            yield name


def transform(node: Any, fn: Callable[[Any], Any]) -> Any:
    """Post-order rebuild: every child is transformed, then ``fn`` may replace the node."""
    if not isinstance(node, c_ast.Node):
        return node
    for name in child_slots(node):
        val = getattr(node, name)
        if isinstance(val, c_ast.Node):
            setattr(node, name, transform(val, fn))
        elif isinstance(val, list):
            setattr(node, name, [transform(v, fn) if isinstance(v, c_ast.Node) else v
                                 for v in val])
    return fn(node)


def clone(node: Any) -> Any:
    """A deep copy of a syntax tree, as ``copy.deepcopy`` makes it (nodes and lists copied, a
    node reached twice copied once) but several times faster: codegen copies every fragment's
    kernel.  Coordinates and strings are immutable and shared."""
    memo: dict[int, Any] = {}

    def cp(v: Any) -> Any:
        if isinstance(v, c_ast.Node):
            got = memo.get(id(v))
            if got is None:
                got = memo[id(v)] = object.__new__(type(v))
                for name in v.__slots__:
                    if name != "__weakref__" and hasattr(v, name):
                        val = getattr(v, name)
                        setattr(got, name, val if name == "coord" else cp(val))
            return got
        if isinstance(v, list):
            return [cp(x) for x in v]
        if isinstance(v, tuple):
            return tuple(cp(x) for x in v)
        return v

    return cp(node)


def rename(node: Any, mapping: Mapping[str, str], *, keep_calls: bool = False) -> None:
    """Rename identifiers (uses and declarations) consistently, in place; struct fields are left
    alone, and so are the names of called functions with ``keep_calls``."""
    skip: set[int] = set()
    for n in walk(node):
        if isinstance(n, c_ast.StructRef):
            skip.add(id(n.field))
        elif keep_calls and isinstance(n, c_ast.FuncCall):
            skip.add(id(n.name))
        elif isinstance(n, c_ast.ID) and id(n) not in skip and n.name in mapping:
            n.name = mapping[n.name]
        elif isinstance(n, c_ast.Decl) and n.name in mapping:
            n.name = mapping[n.name]
        elif isinstance(n, c_ast.TypeDecl) and n.declname in mapping:
            n.declname = mapping[n.declname]


def identifiers(node: Any) -> set[str]:
    """Every name used or declared below ``node``."""
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, c_ast.ID):
            out.add(n.name)
        elif isinstance(n, c_ast.Decl) and n.name:
            out.add(n.name)
    return out


def free_ids(node: Any) -> set[str]:
    """Identifiers used in ``node`` other than called function names and struct fields."""
    skip: set[int] = set()
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, c_ast.StructRef):
            skip.add(id(n.field))
        elif isinstance(n, c_ast.FuncCall):
            skip.add(id(n.name))
        elif isinstance(n, c_ast.ID) and id(n) not in skip:
            out.add(n.name)
    return out


def declared(node: Any) -> set[str]:
    """Names declared below ``node``."""
    return {n.name for n in walk(node) if isinstance(n, c_ast.Decl) and n.name}


def modified(node: Any) -> set[str]:
    """Names of variables assigned, incremented or whose address is taken below ``node``."""
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID):
            out.add(n.lvalue.name)
        elif isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "&") \
                and isinstance(n.expr, c_ast.ID):
            out.add(n.expr.name)
    return out


def called(node: Any) -> set[str]:
    """Names of the functions called below ``node``."""
    return {n.name.name for n in walk(node) if isinstance(n, c_ast.FuncCall)
            and isinstance(n.name, c_ast.ID)}


def calls_any(node: Any, names: Iterable[str]) -> bool:
    """True when ``node`` calls one of ``names``."""
    return not called(node).isdisjoint(names)


def has_return(node: Any) -> bool:
    """True when a ``return`` statement is below ``node``."""
    return any(isinstance(n, c_ast.Return) for n in walk(node))


def fresh_name(base: str, taken: Callable[[str], bool]) -> str:
    """``base``, else ``base_1``, ``base_2``, ...: the first name not ``taken``, so that a name
    made up for a parameter, loop or buffer never captures one already in use."""
    name, k = base, 1
    while taken(name):
        name, k = f"{base}_{k}", k + 1
    return name


def node_loc(node: Any, default_file: str) -> Optional[SourceLoc]:
    """Where a node is (its ``coord``), the file defaulting to ``default_file``."""
    coord = getattr(node, "coord", None)
    if coord is None or not getattr(coord, "line", None):
        return None
    return SourceLoc(coord.file or default_file, coord.line, getattr(coord, "column", 0) or 0)


def int_literal(text: str) -> int:
    """The value of a C integer literal (octal, hex, suffixes)."""
    t = text.rstrip("uUlL")
    if len(t) > 1 and t[0] == "0" and t[1] not in "xXbB":
        return int(t, 8)
    return int(t, 0)


def const_int(node: Any) -> Optional[int]:
    """Value of a constant integer expression (after cpp), or None."""
    if isinstance(node, c_ast.Constant):
        try:
            return int_literal(node.value)
        except ValueError:
            return char_value(node.value) if node.type == "char" else None
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+", "~", "!"):
        v = const_int(node.expr)
        if v is None:
            return None
        return {"-": -v, "+": v, "~": ~v, "!": int(not v)}[node.op]
    if isinstance(node, c_ast.Cast):
        return const_int(node.expr)
    if isinstance(node, c_ast.BinaryOp):
        a, b = const_int(node.left), const_int(node.right)
        if a is None or b is None:
            return None
        ops = {"|": lambda: a | b, "&": lambda: a & b, "^": lambda: a ^ b, "+": lambda: a + b,
               "-": lambda: a - b, "*": lambda: a * b, "<<": lambda: a << b,
               ">>": lambda: a >> b}
        if node.op in ops:
            return ops[node.op]()
        if node.op in ("/", "%") and b:
            q = abs(a) // abs(b) * (1 if (a >= 0) == (b > 0) else -1)
            return q if node.op == "/" else a - b * q
    return None


def char_value(text: str) -> Optional[int]:
    """The value of a C character literal, or None."""
    body = text[1:-1]
    if len(body) == 1:
        return ord(body)
    esc = {"\\n": 10, "\\t": 9, "\\0": 0, "\\\\": 92, "\\'": 39, '\\"': 34, "\\r": 13}
    return esc.get(body)


def flatten_ref(node: c_ast.ArrayRef) -> tuple[Any, list]:
    """``a[i][j]`` as ``(a, [i, j])``."""
    subs = []
    while isinstance(node, c_ast.ArrayRef):
        subs.append(node.subscript)
        node = node.name
    return node, list(reversed(subs))


def substitute(node: Any, mapping: Mapping[str, Any]) -> Any:
    """``node`` with the identifiers in ``mapping`` replaced by copies of their expressions
    (struct fields and called names are left alone); rebuilt in place."""
    if isinstance(node, c_ast.ID) and node.name in mapping:
        return copy.deepcopy(mapping[node.name])
    for slot in node.__slots__:
        if slot in ("coord", "__weakref__"):
            continue
        val = getattr(node, slot, None)
        if isinstance(val, c_ast.Node):
            if isinstance(node, c_ast.StructRef) and slot == "field":
                continue
            if isinstance(node, c_ast.FuncCall) and slot == "name":
                continue
            setattr(node, slot, substitute(val, mapping))
        elif isinstance(val, list):
            setattr(node, slot, [substitute(v, mapping) if isinstance(v, c_ast.Node) else v
                                 for v in val])
    return node


def escapes(node: Any) -> str:
    """'break', 'continue' or 'return' if the loop body has them (nested loops' own excluded)."""
    found = []

    def visit(n: Any, in_loop: bool, in_switch: bool) -> None:
        if n is None:
            return
        if isinstance(n, c_ast.Return):
            found.append("return")
        elif isinstance(n, c_ast.Break) and not in_loop and not in_switch:
            found.append("break")
        elif isinstance(n, c_ast.Continue) and not in_loop:
            found.append("continue")
        loop = in_loop or isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile))
        sw = in_switch or isinstance(n, c_ast.Switch)
        for _, c in n.children():
            visit(c, loop, sw)

    visit(node, False, False)
    return "/".join(sorted(set(found)))


def loop_shape(node: c_ast.For) -> tuple[Optional[str], Any, Optional[int]]:
    """(iterator, lower-bound expression, constant step) of a counted for loop."""
    init = node.init
    it, lb = None, None
    if isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and init.decls[0].init:
        it, lb = init.decls[0].name, init.decls[0].init
    elif isinstance(init, c_ast.Decl) and init.init is not None:
        it, lb = init.name, init.init
    elif isinstance(init, c_ast.Assignment) and init.op == "=" and isinstance(init.lvalue,
                                                                               c_ast.ID):
        it, lb = init.lvalue.name, init.rvalue
    if it is None:
        return None, None, None
    step = counted_step(node, it)
    return it, lb, None if step == 0 else step


def counted_step(node: c_ast.For, it: str) -> Optional[int]:
    """The constant step of ``it`` in a for loop's update (0 included), or None."""
    nxt = node.next
    step = None
    if isinstance(nxt, c_ast.UnaryOp) and isinstance(nxt.expr, c_ast.ID) and nxt.expr.name == it:
        step = {"++": 1, "p++": 1, "--": -1, "p--": -1}.get(nxt.op)
    elif isinstance(nxt, c_ast.Assignment) and isinstance(nxt.lvalue, c_ast.ID) \
            and nxt.lvalue.name == it:
        if nxt.op in ("+=", "-="):
            c = const_int(nxt.rvalue)
            step = None if c is None else (c if nxt.op == "+=" else -c)
        elif nxt.op == "=" and isinstance(nxt.rvalue, c_ast.BinaryOp) \
                and nxt.rvalue.op in ("+", "-"):
            r = nxt.rvalue
            if isinstance(r.left, c_ast.ID) and r.left.name == it:
                c = const_int(r.right)
                step = None if c is None else (c if r.op == "+" else -c)
            elif r.op == "+" and isinstance(r.right, c_ast.ID) and r.right.name == it:
                step = const_int(r.left)
    return step


def walk(node: Any) -> Iterator[Any]:
    """Every pycparser node below ``node`` (pre-order, children in ``children()`` order)."""
    if node is None:
        return
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        # a node iterates over its children in ``children()`` order, without naming them
        kids = list(n)
        if kids:
            kids.reverse()
            stack.extend(kids)


def block_items(stmt: Any) -> list[Any]:
    """The statements of a compound statement, or ``[stmt]`` for a single one."""
    if stmt is None:
        return []
    if isinstance(stmt, c_ast.Compound):
        return list(stmt.block_items or [])
    return [stmt]
