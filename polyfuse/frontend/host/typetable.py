"""C types of the host program: typedefs, struct and union layouts, enumerators.

:class:`TypeTable` resolves a declaration's type (``sizeof``, struct layouts, array lengths)
and the type of an expression; array lengths and enumerator values are evaluated with the
evaluator it is given."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import sympy
from pycparser import c_ast

from polyfuse.frontend.host.context import Context
from polyfuse.frontend.host.memory import Memory
from polyfuse.frontend.host.values import (
    INT,
    LONG,
    UNK,
    UNKF,
    Arr,
    CType,
    Num,
    Rec,
    Str,
    alignment_of,
    base_type,
)


class TypeTable:
    """The types the host program declares, as it declares them."""

    def __init__(self, ctx: Context, mem: Memory,
                 evaluate: Callable[[c_ast.Node], Any]) -> None:
        self.ctx = ctx
        self.mem = mem
        self.evaluate = evaluate
        self.typedefs: dict[str, c_ast.Node] = {}
        self.structs: dict[str, c_ast.Struct] = {}
        self.enums: dict[str, int] = {}
        self.cache: dict[int, CType] = {}
        self.open_structs: set[str] = set()

    def collect_tags(self, node: Any) -> None:
        """Remember the struct and enum definitions a declaration makes."""
        while node is not None:
            if isinstance(node, c_ast.Struct) and node.name and node.decls is not None:
                self.structs[node.name] = node
            if isinstance(node, c_ast.Enum) and node.values is not None:
                val = -1
                for e in node.values.enumerators:
                    val = self.const_int(e.value) if e.value is not None else val + 1
                    self.enums[e.name] = val
            node = getattr(node, "type", None)

    def const_int(self, node: c_ast.Node) -> int:
        """A constant integer expression's value (enumerators, designated indices)."""
        v = self.evaluate(node)
        if isinstance(v, Num) and v.e.is_Integer:
            return int(v.e)
        raise self.ctx.error("enumerator value is not a constant", node)

    def of(self, node: Any) -> CType:
        """The C type a declaration's type node denotes."""
        key = id(node)
        if key in self.cache:
            return self.cache[key]
        t = self._uncached(node)
        self.cache[key] = t
        return t

    def _uncached(self, node: Any) -> CType:
        if node is None:
            return INT
        if isinstance(node, (c_ast.TypeDecl, c_ast.Typename)):
            return self.of(node.type)
        if isinstance(node, c_ast.IdentifierType):
            if len(node.names) == 1 and node.names[0] in self.typedefs:
                t = self.of(self.typedefs[node.names[0]])
                return dataclasses.replace(t, name=node.names[0]) if t.kind != "struct" else t
            return base_type(node.names)
        if isinstance(node, c_ast.PtrDecl):
            return CType("ptr", 8, elem=self.of(node.type))
        if isinstance(node, c_ast.ArrayDecl):
            elem = self.of(node.type)
            n = None
            if node.dim is not None:
                v = self.evaluate(node.dim)
                if isinstance(v, Num) and v.e.is_Integer:
                    n = int(v.e)
            return CType("array", elem.size * (n or 0), elem=elem, length=n)
        if isinstance(node, c_ast.Struct):
            decls = node.decls
            if decls is None and node.name in self.structs:
                decls = self.structs[node.name].decls
            if decls is None or node.name in self.open_structs:
                # opaque, or a self-referential struct seen again through a pointer field
                return CType("struct", 8, name=node.name or "")
            if node.name:
                self.open_structs.add(node.name)
            try:
                return self._struct_type(node.name or "", decls)
            finally:
                self.open_structs.discard(node.name)
        if isinstance(node, c_ast.Union):
            fields = tuple((d.name, self.of(d.type)) for d in node.decls or ())
            return CType("struct", max((t.size for _, t in fields), default=0),
                         name=node.name or "", fields=fields)
        if isinstance(node, c_ast.Enum):
            self.collect_tags(node)
            return INT
        if isinstance(node, c_ast.FuncDecl):
            return CType("func", 8)
        inner = getattr(node, "type", None)
        if inner is not None and inner is not node:
            return self.of(inner)
        return INT

    def _struct_type(self, name: str, decls: list) -> CType:
        fields = []
        size = 0
        align = 1
        for d in decls:
            t = self.of(d.type)
            a = min(alignment_of(t), 8)
            align = max(align, a)
            size = (size + a - 1) // a * a + t.size
            fields.append((d.name, t))
        size = (size + align - 1) // align * align
        return CType("struct", size, name=name, fields=tuple(fields))

    def default(self, ctype: CType, zero: bool) -> Any:
        """The value of a variable of ``ctype`` before any store: zero, or unknown."""
        if ctype.kind == "array":
            return Arr(ctype.length, (), self.default(ctype.elem or INT, zero))
        if ctype.kind == "struct" and ctype.name == "basic_string" and not ctype.fields:
            return Str("")  # a std::string is constructed empty
        if ctype.kind == "struct":
            return Rec(tuple((n, self.default(t, zero)) for n, t in ctype.fields))
        if not zero:
            return UNKF if ctype.kind == "float" else UNK
        return Num(sympy.Integer(0), ctype.kind == "float")

    def of_expr(self, node: c_ast.Node) -> CType:
        """The C type of an expression, as far as ``sizeof`` needs it."""
        if isinstance(node, c_ast.ID):
            sid = self.mem.lookup(node.name)
            return self.mem.state.slots[sid].ctype if sid is not None else INT
        if isinstance(node, c_ast.ArrayRef):
            t = self.of_expr(node.name)
            return t.elem or INT
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            return self.of_expr(node.expr).elem or INT
        if isinstance(node, c_ast.UnaryOp) and node.op == "&":
            return CType("ptr", 8, elem=self.of_expr(node.expr))
        if isinstance(node, c_ast.StructRef):
            t = self.of_expr(node.name)
            if node.type == "->":
                t = t.elem or INT
            return t.field(node.field.name) or INT
        if isinstance(node, c_ast.Cast):
            return self.of(node.to_type)
        if isinstance(node, c_ast.Constant):
            if node.type in ("float", "double"):
                return CType("float", 4 if node.value[-1] in "fF" else 8, name=node.type)
            if node.type == "string":
                return CType("ptr", 8, elem=CType("int", 1))
            return LONG if "l" in node.value.lower() else INT
        if isinstance(node, c_ast.BinaryOp):
            a, b = self.of_expr(node.left), self.of_expr(node.right)
            if node.op in ("<", ">", "<=", ">=", "==", "!=", "&&", "||"):
                return INT
            if a.kind in ("ptr", "array"):
                return a
            if a.kind == "float" or b.kind == "float":
                return a if a.kind == "float" and a.size >= b.size else b
            return a if a.size >= b.size else b
        return INT
