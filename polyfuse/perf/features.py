"""Per-instance floating-point operation counts of a statement, from its C syntax tree.

:mod:`polyfuse.perf.counts` multiplies these per-instance counts by the number of statement
instances (barvinok); this module only looks at one expression at a time.

Conventions (kept identical everywhere the counts are used):

* Only floating-point arithmetic is counted (``half``/``float``/``double`` scalars and vectors);
  integer arithmetic is index computation (Stevens & Klöckner do the same), except integer
  ``/`` and ``%`` by a divisor that is not a literal (``idiv``, dtype ``int32``): a division
  instruction per lane, tens of times dearer than the index arithmetic around it, where a
  literal divisor becomes a multiplication and shifts.  The dtype is the numpy
  name
  of the element type (``float32``, ``float64``, ``float16``); a vector operation counts once per
  lane.
* ``a*b + c``, ``a*b - c``, ``c - a*b`` and ``acc += a*b`` are one **fma** each: a product that
  feeds an addition/subtraction directly is fused with it and then counted neither as ``mul`` nor
  as ``add``.  A product feeds at most one addition.  The ``mad``/``fma`` built-ins are ``fma``
  too.  Flops are therefore ``add + mul + 2*fma + ...``.
* ``+``/``-`` (also ``+=``, ``++``) are ``add``; ``*`` is ``mul``; ``/`` is ``div``; unary ``-``
  is ``neg``; float comparisons are ``cmp``; a call to a built-in math function (``exp``,
  ``tanh``, ``sqrt``, ``fmax``, ...) on floats is ``func:<name>``.  Casts, conversions, loads,
  stores and selects are not operations.
* An operation whose operands are all compile-time literals is folded (not counted).
* Both arms of ``?:`` are counted (GPUs evaluate them masked); so is its condition.
* Calls to helper functions of the same file are counted at each call: the ops of the helper's
  body once per call; a helper with control flow (loops, ifs) is counted as if every statement
  ran once, and the result is marked inexact.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from pycparser import c_ast, c_generator

from polyfuse.core.program import WORK_ITEM_FUNCTIONS, Kernel

__all__ = ["OpVector", "StatementOps", "TypeEnv", "numpy_dtype", "statement_ops"]

#: (op, dtype) → count per statement instance
OpVector = Counter

_FLOAT_ORDER = {"half": 0, "float": 1, "double": 2}
_NUMPY = {
    "half": "float16", "float": "float32", "double": "float64", "char": "int8",
    "uchar": "uint8", "short": "int16", "ushort": "uint16", "int": "int32", "uint": "uint32",
    "long": "int64", "ulong": "uint64", "size_t": "uint64", "ptrdiff_t": "int64",
    "bool": "bool", "_Bool": "bool", "intptr_t": "int64", "uintptr_t": "uint64",
}
_ALIASES = {
    "unsigned int": "uint", "unsigned": "uint", "unsigned char": "uchar",
    "unsigned short": "ushort", "unsigned long": "ulong", "signed int": "int", "signed": "int",
    "long int": "long", "unsigned long int": "ulong", "long long": "long",
    "unsigned long long": "ulong", "signed char": "char", "short int": "short",
}
_VEC = re.compile(r"^([a-z]+?)(2|3|4|8|16)$")
_NO_OP_CALLS = {
    "barrier", "work_group_barrier", "mem_fence", "read_mem_fence", "write_mem_fence",
    "printf", "prefetch", "async_work_group_copy", "wait_group_events",
}
_FMA_CALLS = {"mad", "fma"}
_C_TEXT = c_generator.CGenerator()
#: calls that move or reinterpret data: no arithmetic
_DATA_CALLS = re.compile(r"^(vload|vstore|convert_|as_|atomic|atom_|select$|shuffle)")


def numpy_dtype(ctype: str) -> str:
    """numpy-style name of an OpenCL type (``float4`` → ``float32x4``)."""
    t = _ALIASES.get(ctype, ctype)
    if t in _NUMPY:
        return _NUMPY[t]
    m = _VEC.match(t)
    if m and m.group(1) in _NUMPY:
        return f"{_NUMPY[m.group(1)]}x{m.group(2)}"
    return t


@dataclass(frozen=True)
class CType:
    """A value type as far as op counting needs it: scalar base, lanes, pointer depth."""

    base: str  # "float", "double", "half", "int" (any integer), "void", "other"
    lanes: int = 1
    indirection: int = 0

    @property
    def is_float(self) -> bool:
        return self.indirection == 0 and self.base in _FLOAT_ORDER

    @property
    def dtype(self) -> str:
        return _NUMPY.get(self.base, self.base)


INT = CType("int")
OTHER = CType("other")


def ctype_of(name: str, indirection: int = 0) -> CType:
    """The :class:`CType` of an OpenCL type name."""
    t = _ALIASES.get(name, name)
    if t in _FLOAT_ORDER:
        return CType(t, 1, indirection)
    m = _VEC.match(t)
    if m:
        base = m.group(1)
        if base in _FLOAT_ORDER:
            return CType(base, int(m.group(2)), indirection)
        if base in _NUMPY:
            return CType("int", int(m.group(2)), indirection)
    if t in _NUMPY or t.split()[-1] in ("int", "long", "short", "char", "unsigned"):
        return CType("int", 1, indirection)
    if t == "void":
        return CType("void", 1, indirection)
    return CType("other", 1, indirection)


def _decl_ctype(t: Any) -> CType:
    depth = 0
    while not isinstance(t, c_ast.TypeDecl):
        if isinstance(t, (c_ast.PtrDecl, c_ast.ArrayDecl)):
            depth += 1
        elif isinstance(t, c_ast.FuncDecl):
            return OTHER
        t = t.type
    inner = t.type
    if isinstance(inner, c_ast.IdentifierType):
        return ctype_of(" ".join(inner.names), depth)
    return CType("other", 1, depth)


class TypeEnv:
    """Scoped types of every identifier use in a function (and its helpers), by node identity.

    Built once per kernel so that a statement's subtree can be typed without its context.
    """

    def __init__(self, funcdef: c_ast.FuncDef, helpers: Mapping[str, c_ast.FuncDef]):
        self.types: dict[int, CType] = {}
        self.helpers = dict(helpers)
        self.returns: dict[str, CType] = {}
        done: set[str] = set()
        for f in [funcdef, *self.helpers.values()]:
            name = f.decl.name
            if name in done:
                continue
            done.add(name)
            self.returns[name] = _decl_ctype(f.decl.type.type)
            scope: dict[str, CType] = {}
            args = f.decl.type.args
            for p in (args.params if args else []):
                if isinstance(p, c_ast.Decl) and p.name:
                    scope[p.name] = _decl_ctype(p.type)
            self._visit(f.body, [scope])

    def _visit(self, node: Any, scopes: list[dict[str, CType]]) -> None:
        if node is None:
            return
        if isinstance(node, (c_ast.Compound, c_ast.For)):
            scopes = scopes + [{}]
        if isinstance(node, c_ast.Decl) and node.name:
            if node.init is not None:
                self._visit(node.init, scopes)
            if isinstance(node.type, c_ast.ArrayDecl):
                self._visit(node.type.dim, scopes)
            scopes[-1][node.name] = _decl_ctype(node.type)
            return
        if isinstance(node, c_ast.ID):
            for s in reversed(scopes):
                if node.name in s:
                    self.types[id(node)] = s[node.name]
                    break
            return
        for _, child in node.children():
            self._visit(child, scopes)

    def of(self, node: c_ast.ID) -> CType:
        return self.types.get(id(node), OTHER)


@dataclass
class StatementOps:
    """Ops of one statement instance, and whether the count relied on approximations."""

    ops: Counter = field(default_factory=Counter)
    exact: bool = True
    notes: list[str] = field(default_factory=list)
    #: the part of ``ops`` made on OpenCL vectors (counted per lane, as in ``ops``)
    vector_ops: Counter = field(default_factory=Counter)


@dataclass
class _Val:
    t: CType
    const: bool = False
    #: a float product whose ``mul`` was counted and may still fuse into an add
    product: bool = False


#: expression nodes a compiler computes once however often the statement repeats them
_CSE_NODES = (c_ast.BinaryOp, c_ast.UnaryOp, c_ast.TernaryOp, c_ast.FuncCall, c_ast.Cast)


def _pure(node: Any, helpers: Mapping[str, Any]) -> bool:
    """Whether ``node`` has no side effect: no assignment, increment or helper call (a
    built-in function is pure, a helper's body may store)."""
    if isinstance(node, c_ast.Assignment):
        return False
    if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
        return False
    if isinstance(node, c_ast.FuncCall):
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        if name is None or name in helpers:
            return False
    return all(_pure(child, helpers) for _, child in node.children())


class _Counter:
    """Counts the float ops of one statement instance.

    A pure subexpression that occurs more than once in a statement that has no side effect
    is counted once: the compiler computes it once (common-subexpression elimination), as it
    does the repeated argument of a clamp or of ``x * x`` in a polynomial (``fastmath.erf``
    writes its argument two dozen times).
    """

    def __init__(self, env: TypeEnv, out: StatementOps, depth: int = 0):
        self.env = env
        self.out = out
        self.depth = depth
        #: values of pure subexpressions already counted, by their C text (None: no CSE)
        self.seen: Optional[dict[str, _Val]] = None

    def cse_for(self, node: Any) -> None:
        """Enable common-subexpression elimination for ``node`` when it has no side effect."""
        parts = [node.lvalue, node.rvalue] if isinstance(node, c_ast.Assignment) else [node]
        self.seen = {} if all(_pure(n, self.env.helpers) for n in parts) else None

    def add(self, op: str, t: CType, n: int = 1) -> None:
        self.out.ops[(op, t.dtype)] += n * t.lanes
        if t.lanes > 1:
            self.out.vector_ops[(op, t.dtype)] += n * t.lanes

    # -- expressions -------------------------------------------------------------------------------

    def expr(self, node: Any) -> _Val:
        key = None
        if self.seen is not None and isinstance(node, _CSE_NODES):
            key = _C_TEXT.visit(node)
            if key in self.seen:
                return self.seen[key]
        meth = getattr(self, "e_" + type(node).__name__, None)
        if meth is None:
            for _, child in node.children():
                self.expr(child)
            return _Val(OTHER)
        v = meth(node)
        if key is not None:
            # a reused product is a value in a register: its mul does not fuse a second time
            self.seen[key] = _Val(v.t, v.const)
        return v

    def e_Constant(self, node: c_ast.Constant) -> _Val:
        if node.type in ("float", "double", "half"):
            text = node.value.lower()
            if text.endswith("f"):
                return _Val(CType("float"), True)
            if text.endswith("h"):
                return _Val(CType("half"), True)
            return _Val(CType("double"), True)
        return _Val(INT, True)

    def e_ID(self, node: c_ast.ID) -> _Val:
        return _Val(self.env.of(node))

    def e_ArrayRef(self, node: c_ast.ArrayRef) -> _Val:
        base = self.expr(node.name)
        self.expr(node.subscript)
        t = base.t
        return _Val(CType(t.base, t.lanes, max(0, t.indirection - 1)))

    def e_StructRef(self, node: c_ast.StructRef) -> _Val:
        base = self.expr(node.name)
        t = base.t
        if node.type == "->":
            t = CType(t.base, t.lanes, max(0, t.indirection - 1))
        field_name = node.field.name if isinstance(node.field, c_ast.ID) else ""
        lanes = _swizzle_lanes(field_name)
        if t.lanes > 1 and lanes:
            return _Val(CType(t.base, lanes), base.const)
        return _Val(OTHER)

    def e_Cast(self, node: c_ast.Cast) -> _Val:
        v = self.expr(node.expr)
        return _Val(_decl_ctype(node.to_type.type), v.const)

    def e_Typename(self, node: Any) -> _Val:
        return _Val(OTHER, True)

    def e_UnaryOp(self, node: c_ast.UnaryOp) -> _Val:
        if node.op == "sizeof":
            return _Val(INT, True)
        v = self.expr(node.expr)
        if node.op == "-" and v.t.is_float and not v.const:
            self.add("neg", v.t)
        elif node.op in ("++", "--", "p++", "p--") and v.t.is_float:
            self.add("add", v.t)
        elif node.op == "*":
            t = v.t
            return _Val(CType(t.base, t.lanes, max(0, t.indirection - 1)))
        elif node.op == "&":
            t = v.t
            return _Val(CType(t.base, t.lanes, t.indirection + 1))
        elif node.op == "!":
            return _Val(INT, v.const)
        return _Val(v.t, v.const)

    def e_BinaryOp(self, node: c_ast.BinaryOp) -> _Val:
        a = self.expr(node.left)
        b = self.expr(node.right)
        return self.binop(node.op, a, b)

    def binop(self, op: str, a: _Val, b: _Val) -> _Val:
        if op in ("&&", "||"):
            return _Val(INT, a.const and b.const)
        if op in ("<", ">", "<=", ">=", "==", "!="):
            t = _arith(a.t, b.t)
            if t.is_float and not (a.const and b.const):
                self.add("cmp", t)
            return _Val(CType("int", t.lanes) if t.lanes > 1 else INT, a.const and b.const)
        if a.t.indirection or b.t.indirection:  # pointer arithmetic
            return _Val(a.t if a.t.indirection else b.t)
        t = _arith(a.t, b.t)
        const = a.const and b.const
        if op in ("/", "%") and t.base == "int" and not b.const:
            # a run-time divisor: a division instruction per lane (no vector integer division
            # on a CPU; tens of instructions on a GPU), unlike a literal one, which a compiler
            # turns into a multiplication and shifts
            self.add("idiv", t)
            return _Val(t)
        if not t.is_float or const:
            return _Val(t, const)
        if op in ("+", "-"):
            if a.product or b.product:
                self.add("mul", t, -1)
                self.add("fma", t)
            else:
                self.add("add", t)
            return _Val(t)
        if op == "*":
            self.add("mul", t)
            return _Val(t, product=True)
        if op == "/":
            self.add("div", t)
            return _Val(t)
        self.add(f"op:{op}", t)
        return _Val(t)

    def e_Assignment(self, node: c_ast.Assignment) -> _Val:
        lv = self.expr(node.lvalue)
        rv = self.expr(node.rvalue)
        if node.op == "=":
            return _Val(lv.t)
        res = self.binop(node.op[:-1], _Val(lv.t), rv)
        return _Val(lv.t if lv.t.base != "other" else res.t)

    def e_TernaryOp(self, node: c_ast.TernaryOp) -> _Val:
        c = self.expr(node.cond)
        a = self.expr(node.iftrue)
        b = self.expr(node.iffalse)
        return _Val(_arith(a.t, b.t), c.const and a.const and b.const)

    def e_ExprList(self, node: c_ast.ExprList) -> _Val:
        v = _Val(OTHER)
        for e in node.exprs:
            v = self.expr(e)
        return v

    def e_InitList(self, node: c_ast.InitList) -> _Val:
        for e in node.exprs:
            self.expr(e)
        return _Val(OTHER)

    def e_CompoundLiteral(self, node: Any) -> _Val:
        self.expr(node.init)
        return _Val(_decl_ctype(node.type.type))

    def e_FuncCall(self, node: c_ast.FuncCall) -> _Val:
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        args = [self.expr(a) for a in (node.args.exprs if node.args else [])]
        if name is None:
            self.out.exact = False
            self.out.notes.append("call through an expression: ops not counted")
            return _Val(OTHER)
        if name in WORK_ITEM_FUNCTIONS:
            return _Val(INT)
        if name in self.env.helpers:
            return self._helper(name, node)
        if name in _NO_OP_CALLS or _DATA_CALLS.match(name):
            if name.startswith("convert_") or name.startswith("as_"):
                return _Val(ctype_of(name.split("_", 1)[1].split("_")[0]))
            if name.startswith("vload"):
                n = name[5:]
                base = args[-1].t if args else OTHER
                return _Val(CType(base.base, int(n) if n.isdigit() else 1))
            return _Val(args[-1].t if name == "select" and args else OTHER)
        floats = [a.t for a in args if a.t.is_float]
        if not floats:
            return _Val(INT, all(a.const for a in args))
        t = floats[0]
        for f in floats[1:]:
            t = _arith(t, f)
        if all(a.const for a in args):
            return _Val(t, True)
        if name in _FMA_CALLS:
            self.add("fma", t)
            return _Val(t)
        self.add(f"func:{name}", t)
        if name in ("dot", "length", "distance", "fast_length", "fast_distance"):
            return _Val(CType(t.base))
        return _Val(t)

    def _helper(self, name: str, call: c_ast.FuncCall) -> _Val:
        fd = self.env.helpers[name]
        if self.depth > 16:
            self.out.exact = False
            self.out.notes.append(f"recursive helper {name}: ops not counted")
            return _Val(self.env.returns.get(name, OTHER))
        inner = _Counter(self.env, self.out, self.depth + 1)
        for item in fd.body.block_items or []:
            inner.stmt(item, name)
        return _Val(self.env.returns.get(name, OTHER))

    def stmt(self, node: Any, helper: str) -> None:
        """A statement of a helper's body (each statement counted once per call)."""
        if isinstance(node, c_ast.Compound):
            for s in node.block_items or []:
                self.stmt(s, helper)
            return
        if isinstance(node, (c_ast.If, c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.Switch)):
            self.out.exact = False
            note = f"helper {helper} has control flow: each of its statements counted once"
            if note not in self.out.notes:
                self.out.notes.append(note)
            for _, child in node.children():
                self.stmt(child, helper)
            return
        if isinstance(node, c_ast.DeclList):
            for d in node.decls:
                self.stmt(d, helper)
            return
        if isinstance(node, c_ast.Decl):
            if node.init is not None:
                self.expr(node.init)
            return
        if isinstance(node, c_ast.Return):
            if node.expr is not None:
                self.expr(node.expr)
            return
        if isinstance(node, (c_ast.Break, c_ast.Continue, c_ast.EmptyStatement)):
            return
        if isinstance(node, c_ast.Node):
            self.expr(node)


def _arith(a: CType, b: CType) -> CType:
    """The usual arithmetic conversions, reduced to what op counting needs."""
    lanes = max(a.lanes, b.lanes)
    fa, fb = a.base in _FLOAT_ORDER, b.base in _FLOAT_ORDER
    if fa and fb:
        base = a.base if _FLOAT_ORDER[a.base] >= _FLOAT_ORDER[b.base] else b.base
        return CType(base, lanes)
    if fa:
        return CType(a.base, lanes)
    if fb:
        return CType(b.base, lanes)
    if a.base == "other" or b.base == "other":
        return CType("other", lanes)
    return CType("int", lanes)


def _swizzle_lanes(name: str) -> int:
    if re.fullmatch(r"[xyzw]{1,4}|s[0-9a-fA-F]{1,16}", name):
        return len(name) - (1 if name.startswith("s") else 0)
    if name in ("lo", "hi", "even", "odd"):
        return 0  # half the vector: the caller keeps the lane count unknown
    return 0


def statement_ops(node: Any, env: TypeEnv) -> StatementOps:
    """Floating-point ops executed by one instance of the statement whose AST is ``node``."""
    out = StatementOps()
    c = _Counter(env, out)
    if node is None:
        return out
    c.cse_for(node)
    if isinstance(node, c_ast.Decl):
        if node.init is not None:
            c.expr(node.init)
    elif isinstance(node, c_ast.Return):
        if node.expr is not None:
            c.expr(node.expr)
    else:
        c.expr(node)
    out.ops = Counter({k: v for k, v in out.ops.items() if v})
    return out


def uncounted_conditions(funcdef: c_ast.FuncDef, counted: Iterable[Any],
                         env: TypeEnv) -> list[str]:
    """Control expressions with float ops that are not statements of the model (not counted)."""
    seen = {id(n) for n in counted}
    notes = []

    def visit(node: Any) -> None:
        if node is None:
            return
        exprs: list[Any] = []
        if isinstance(node, (c_ast.If, c_ast.While, c_ast.DoWhile)):
            exprs = [node.cond]
        elif isinstance(node, c_ast.For):
            exprs = [node.cond, node.next]
        for e in exprs:
            if e is not None and id(e) not in seen:
                ops = statement_ops(e, env).ops
                if ops:
                    line = getattr(getattr(e, "coord", None), "line", "?")
                    notes.append(f"float operations in the condition at line {line} are not "
                                 "counted (the condition is not a statement of the model)")
        for _, child in node.children():
            visit(child)

    visit(funcdef.body)
    return notes


def helper_defs(kernel: Kernel) -> dict[str, c_ast.FuncDef]:
    """The other function definitions of the kernel's file (:attr:`Kernel.helpers`)."""
    return {k: v for k, v in kernel.helpers.items() if v is not kernel.ast}
