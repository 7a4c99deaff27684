"""C expressions: constants, variables, operators, assignments, lvalues and initializers."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, Optional

import sympy
from pycparser import c_ast, c_generator

from polyfuse.frontend.host.signals import (
    NeedUnroll,
)
from polyfuse.frontend.host.symbolic import free_syms
from polyfuse.frontend.host.values import (
    INT,
    ONE,
    RUNTIME,
    TRACKED,
    UNK,
    UNK_TYPE,
    UNKF,
    ZERO,
    Arr,
    BufRef,
    Cond,
    CType,
    Handle,
    KObj,
    Num,
    Poison,
    ProgObj,
    Rec,
    Ref,
    Runtime,
    Str,
    SymIndex,
    Unknown,
    char_at,
    float_to_int,
    num_syms,
    relation_of,
    src_of,
    truth_of,
)

if TYPE_CHECKING:
    from polyfuse.frontend.host.evaluator import CEvaluator


def constant(ev: CEvaluator, node: c_ast.Constant) -> Any:
    v = node.value
    if node.type == "string":
        return Str("".join(re.findall(r'"((?:\\.|[^"\\])*)"', v)))
    if node.type == "char":
        body = v.strip("'")
        try:
            ch = body.encode().decode("unicode_escape") if body.startswith("\\") else body
            return Num(sympy.Integer(ord(ch[0]) if ch else 0))
        except (UnicodeDecodeError, IndexError):
            return UNK
    if node.type == "bool":
        return ONE if v == "true" else ZERO
    if node.type in ("float", "double", "long double"):
        try:
            return Num(sympy.Float(float(v.rstrip("fFlL"))), True)
        except ValueError:
            return UNKF
    text = v.rstrip("uUlL").replace("'", "")
    try:
        if re.fullmatch(r"0[0-7]+", text):
            return Num(sympy.Integer(int(text, 8)))
        return Num(sympy.Integer(int(text, 0)))
    except ValueError:
        try:
            return Num(sympy.Float(float(text)), True)
        except ValueError:
            return UNK


def identifier(ev: CEvaluator, node: c_ast.ID) -> Any:
    sid = ev.mem.lookup(node.name)
    if sid is None:
        if node.name == "optarg" and ev.libc.argv is not None:
            return ev.libc.optarg
        if node.name == "optind" and ev.libc.argv is not None:
            return Num(sympy.Integer(ev.libc.optind))
        if node.name in ev.types.enums:
            return Num(sympy.Integer(ev.types.enums[node.name]))
        if node.name in ("true", "false"):
            return ONE if node.name == "true" else ZERO
        if node.name in ("NULL", "nullptr"):
            return ZERO
        return Handle(node.name)
    slot = ev.mem.state.slots[sid]
    if slot.ctype.kind == "array":
        return Ref(sid)
    return slot.value


def typename(ev: CEvaluator, node: c_ast.Node) -> Any:
    return UNK


def expr_list(ev: CEvaluator, node: c_ast.ExprList) -> Any:
    v: Any = UNK
    for e in node.exprs:
        v = ev.eval(e)
    return v


def init_list_value(ev: CEvaluator, node: c_ast.InitList) -> Any:
    return Arr(len(node.exprs), tuple((i, ev.eval(e)) for i, e in enumerate(node.exprs)),
               ZERO)


def compound_literal(ev: CEvaluator, node: c_ast.CompoundLiteral) -> Any:
    ctype = ev.types.of(node.type)
    if ctype.kind == "array" and ctype.length is None:
        n = len(node.init.exprs)
        ctype = dataclasses.replace(ctype, length=n, size=(ctype.elem or INT).size * n)
    value = init_list(ev, node.init, ctype, "literal")
    sid = ev.mem.new_slot("literal", ctype, value)
    return Ref(sid) if ctype.kind == "array" else value


def cast(ev: CEvaluator, node: c_ast.Cast) -> Any:
    v = ev.eval(node.expr)
    t = ev.types.of(node.to_type)
    if isinstance(v, Num):
        if t.kind == "float":
            return Num(v.e, True)
        if t.kind == "int" and v.flt:
            return float_to_int(v.e)
    if isinstance(v, Unknown) and t.kind in ("int", "float"):
        return Unknown(t.kind == "float", v.src)
    return v


def ternary(ev: CEvaluator, node: c_ast.TernaryOp) -> Any:
    cond = ev.eval(node.cond)
    t = truth_of(cond)
    if t is True:
        return ev.eval(node.iftrue)
    if t is False:
        return ev.eval(node.iffalse)
    a, b = ev.eval(node.iftrue), ev.eval(node.iffalse)
    if a == b:
        return a
    rel = relation_of(cond)
    if rel is not None and free_syms(rel) & ev.ctx.loop_syms and \
            isinstance(a, Num) and isinstance(b, Num):
        # a wavefront's clamped extent (k < n ? k : n): known once the loop is unrolled
        return Unknown(a.flt or b.flt, dataclasses.replace(ev.source(
            "a choice on a condition on a host loop iterator", node), loop_index=True))
    if isinstance(a, (Num, Runtime)) and isinstance(b, (Num, Runtime)):
        if ev.ctx.varies():
            return UNK
        return RUNTIME
    if isinstance(a, (Num, Unknown, Runtime)) and isinstance(b, (Num, Unknown, Runtime)):
        return Unknown(False, src_of(a, b, cond))
    loc = ev.ctx.loc(node)
    at = f" at {loc.file}:{loc.line}" if loc else ""
    cond = c_generator.CGenerator().visit(node.cond)
    return Poison(f"selected by the host condition '{cond}'{at}, which polyfuse cannot decide")


def assignment(ev: CEvaluator, node: c_ast.Assignment) -> Any:
    ref = lvalue(ev, node.lvalue)
    if node.op == "=":
        ev.ctx.name_hint = lvalue_name(ev, node.lvalue)
        try:
            value = ev.eval(node.rvalue)
        finally:
            ev.ctx.name_hint = None
    else:
        cur = ev.mem.read(ref) if ref is not None else ev.eval(node.lvalue)
        value = binop(ev, node.op[:-1], cur, ev.eval(node.rvalue), node)
    if ref is not None:
        ev.mem.store(ref, value, node)
    return value


def lvalue_name(ev: CEvaluator, node: c_ast.Node) -> Optional[str]:
    if isinstance(node, c_ast.ID):
        return node.name
    if isinstance(node, c_ast.ArrayRef):
        base = lvalue_name(ev, node.name)
        idx = ev.eval(node.subscript)
        if base and isinstance(idx, Num) and idx.e.is_Integer:
            return f"{base}_{int(idx.e)}"
        return base
    if isinstance(node, c_ast.StructRef):
        base = lvalue_name(ev, node.name)
        return f"{base}_{node.field.name}" if base else node.field.name
    if isinstance(node, c_ast.UnaryOp) and node.op == "*":
        return lvalue_name(ev, node.expr)
    return None


def lvalue(ev: CEvaluator, node: c_ast.Node) -> Optional[Ref]:
    """Where an lvalue lives; None for memory polyfuse does not track (host data)."""
    if isinstance(node, c_ast.ID):
        sid = ev.mem.lookup(node.name)
        return Ref(sid) if sid is not None else None
    if isinstance(node, c_ast.ArrayRef):
        base = pointer_of(ev, node.name)
        if base is None:
            ev.eval(node.subscript)
            return None
        return ev.mem.index(base, ev.eval(node.subscript))
    if isinstance(node, c_ast.StructRef):
        if node.type == "->":
            base = ev.eval(node.name)
            if not isinstance(base, Ref):
                return None
            target = ev.mem.read(base)
            if isinstance(target, Arr):
                base = Ref(base.slot, base.path + (0,))
        else:
            base = lvalue(ev, node.name)
            if isinstance(base, SymIndex) and base.loop and \
                    _holds_tracked(ev.mem.read(Ref(base.slot, base.path))):
                # a field of a table of records (option names, handles) searched by a loop
                raise NeedUnroll("a field is read at an index that depends on a host loop "
                                 "iterator")
            if base is None or isinstance(base, SymIndex):
                return None
        return Ref(base.slot, base.path + (node.field.name,))
    if isinstance(node, c_ast.UnaryOp) and node.op == "*":
        p = ev.eval(node.expr)
        if isinstance(p, Ref):
            return ev.mem.index(p, ZERO)
        return None
    if isinstance(node, c_ast.Cast):
        return lvalue(ev, node.expr)
    if isinstance(node, c_ast.TernaryOp):  # a reference bound to `c ? a : b`
        t = truth_of(ev.eval(node.cond))
        return None if t is None else lvalue(ev, node.iftrue if t else node.iffalse)
    return None


def _holds_tracked(v: Any) -> bool:
    """Whether an array or record holds strings, pointers or OpenCL handles."""
    if isinstance(v, Arr):
        return any(_holds_tracked(e) for _, e in v.elems) or _holds_tracked(v.default)
    if isinstance(v, Rec):
        return any(_holds_tracked(e) for _, e in v.fields)
    return isinstance(v, TRACKED)


def pointer_of(ev: CEvaluator, node: c_ast.Node) -> Optional[Ref]:
    v = ev.eval(node)
    return v if isinstance(v, Ref) else None


def array_ref(ev: CEvaluator, node: c_ast.ArrayRef) -> Any:
    value = ev.eval(node.name)
    base = value if isinstance(value, Ref) else None
    idx = ev.eval(node.subscript)
    if isinstance(value, Str):  # argv[i][0] == '-', switch (argv[i][1])
        return char_at(value.s, idx)
    if base is None:
        return UNK
    ref = ev.mem.index(base, idx)
    if ref is None:
        return UNK
    if isinstance(ref, SymIndex):
        arr = ev.mem.read(Ref(ref.slot, ref.path))
        if isinstance(arr, Arr):
            full = arr.length is not None and len(arr.elems) >= arr.length
            # the default stands for elements not written; a full array has none
            vals = [v for _, v in arr.elems] + ([] if full and arr.elems else [arr.default])
            if all(v == vals[0] for v in vals) and full:
                return vals[0]
            if any(isinstance(v, TRACKED) for v in vals):
                if ref.loop:
                    raise NeedUnroll("a handle is read at an index that depends on a host "
                                     "loop iterator")
                return Poison("read at an unknown index")
            if ref.loop and any(isinstance(v, Rec) for v in vals):
                # a record of a table (`bench[i]` passed whole): known once unrolled
                raise NeedUnroll("a record is read at an index that depends on a host loop "
                                 "iterator")
            if ref.loop and all(isinstance(v, Num) for v in vals):
                # sizes per level (m1[k]): known once the loop is unrolled
                return Unknown(False, dataclasses.replace(ev.source(
                    "an element of a known array read at an index that depends on a host loop "
                    "iterator", node), loop_index=True))
            # data the program read (a read-back reduced on the host) stays named
            return Unknown(any(isinstance(v, (Num, Unknown)) and v.flt for v in vals),
                           src_of(*vals))
        return UNK
    return ev.mem.deref(ref)


def struct_ref(ev: CEvaluator, node: c_ast.StructRef) -> Any:
    ref = lvalue(ev, node)
    if ref is None or isinstance(ref, SymIndex):
        return UNK
    return ev.mem.deref(ref)


def unary(ev: CEvaluator, node: c_ast.UnaryOp) -> Any:
    op = node.op
    if op == "sizeof":
        if isinstance(node.expr, c_ast.Typename):
            t = ev.types.of(node.expr)
        else:
            t = ev.types.of_expr(node.expr)
        return Num(sympy.Integer(t.size))
    if op == "_Alignof":
        return Num(sympy.Integer(8))
    if op == "&":
        ref = lvalue(ev, node.expr)
        if isinstance(ref, SymIndex):
            if ref.loop:
                raise NeedUnroll("an address depends on a host loop iterator")
            return Poison("address of an element at an unknown index")
        return ref if ref is not None else Handle("pointer")
    if op == "*":
        p = ev.eval(node.expr)
        if isinstance(p, Str):
            return char_at(p.s, ZERO)
        if isinstance(p, Ref):
            ref = ev.mem.index(p, ZERO)
            return ev.mem.deref(ref) if isinstance(ref, Ref) else UNK
        return UNK
    if op in ("++", "--", "p++", "p--"):
        ref = lvalue(ev, node.expr)
        cur = ev.mem.read(ref) if isinstance(ref, Ref) else UNK
        new = binop(ev, "+" if "+" in op else "-", cur, ONE, node)
        if ref is not None:
            ev.mem.store(ref, new, node)
        return new if op in ("++", "--") else cur
    v = ev.eval(node.expr)
    if op == "!":
        t = truth_of(v)
        if t is None:
            rel = relation_of(v)
            return Cond(sympy.Not(rel)) if rel is not None else Unknown(False, src_of(v))
        return ZERO if t else ONE
    if isinstance(v, Num):
        if op == "-":
            return Num(-v.e, v.flt)
        if op == "+":
            return v
        if op == "~" and v.e.is_Integer:
            return Num(sympy.Integer(~int(v.e)))
    if isinstance(v, Runtime):
        return v
    return Unknown(isinstance(v, Num) and v.flt, src_of(v))


def binary(ev: CEvaluator, node: c_ast.BinaryOp) -> Any:
    op = node.op
    if op in ("&&", "||"):
        a = ev.eval(node.left)
        ta = truth_of(a)
        if op == "&&" and ta is False or op == "||" and ta is True:
            return ZERO if ta is False else ONE
        b = ev.eval(node.right)
        tb = truth_of(b)
        if ta is not None and tb is not None:
            return ONE if (ta and tb if op == "&&" else ta or tb) else ZERO
        if op == "&&" and (tb is False) or op == "||" and (tb is True):
            return ZERO if tb is False else ONE
        ra = relation_of(a) if ta is None else sympy.true
        rb = relation_of(b) if tb is None else sympy.true
        if ra is None or rb is None:
            return Unknown(False, src_of(a, b))
        return Cond(sympy.And(ra, rb) if op == "&&" else sympy.Or(
            ra if ta is None else sympy.false, rb if tb is None else sympy.false))
    return binop(ev, op, ev.eval(node.left), ev.eval(node.right), node)


def binop(ev: CEvaluator, op: str, a: Any, b: Any, node: c_ast.Node) -> Any:
    if op in ("==", "!="):
        handle_a = isinstance(a, (BufRef, KObj, ProgObj, Handle, Ref, Str))
        handle_b = isinstance(b, (BufRef, KObj, ProgObj, Handle, Ref, Str))
        if handle_a or handle_b:
            if handle_a and handle_b:
                if a == b:
                    return ONE if op == "==" else ZERO
                if isinstance(a, Ref) and isinstance(b, Ref) and a.slot != b.slot:
                    # addresses in two distinct objects (`cur == &buf1` after a swap)
                    return ZERO if op == "==" else ONE
                return UNK
            other = b if handle_a else a
            if isinstance(other, Num) and other.e == 0:
                return ZERO if op == "==" else ONE
            return UNK
    if isinstance(a, Str) and isinstance(b, Num) and op == "+" and b.e.is_Integer and \
            0 <= int(b.e) <= len(a.s):
        return Str(a.s[int(b.e):])  # a pointer into a known string (argv[i] + 2)
    if isinstance(a, Ref) and isinstance(b, Num) and op in ("+", "-") and b.e.is_Integer:
        r = ev.mem.index(a, Num(b.e if op == "+" else -b.e))
        return r if isinstance(r, Ref) else Handle("pointer")
    if not (isinstance(a, Num) and isinstance(b, Num)):
        src = src_of(a, b)
        if isinstance(a, (Runtime, Num)) and isinstance(b, (Runtime, Num)) and \
                not (num_syms(a) | num_syms(b)) & ev.ctx.loop_syms:
            if op in ("<", ">", "<=", ">=", "==", "!="):
                return Unknown(False, src)
            return Runtime(src)
        flt = any(isinstance(x, (Num, Unknown)) and x.flt for x in (a, b))
        return Unknown(flt, src)
    x, y = a.e, b.e
    flt = a.flt or b.flt
    try:
        if op in ("<", ">", "<=", ">=", "==", "!="):
            rel = {"<": sympy.Lt, ">": sympy.Gt, "<=": sympy.Le, ">=": sympy.Ge,
                   "==": sympy.Eq, "!=": sympy.Ne}[op](x, y)
            if rel is sympy.true:
                return ONE
            if rel is sympy.false:
                return ZERO
            return Cond(rel)
        if op == "+":
            return Num(x + y, flt)
        if op == "-":
            return Num(x - y, flt)
        if op == "*":
            return Num(x * y, flt)
        if op == "/":
            if y == 0:
                return Unknown(flt)
            if flt:
                return Num(x / y, True)
            if x.is_Integer and y.is_Integer:
                q = abs(int(x)) // abs(int(y))
                return Num(sympy.Integer(q if (int(x) >= 0) == (int(y) > 0) else -q))
            return Num(sympy.floor(x / y))
        if op == "%":
            if flt or y == 0:
                return Unknown(flt)
            if x.is_Integer and y.is_Integer:
                r = abs(int(x)) % abs(int(y))
                return Num(sympy.Integer(r if int(x) >= 0 else -r))
            return Num(sympy.Mod(x, y))
        if flt:
            return UNKF
        if op == "<<" and y.is_Integer:
            return Num(x * 2 ** int(y))
        if op == ">>" and y.is_Integer:
            if x.is_Integer:
                return Num(sympy.Integer(int(x) >> int(y)))
            return Num(sympy.floor(x / 2 ** int(y)))
        if x.is_Integer and y.is_Integer:
            ix, iy = int(x), int(y)
            res = {"&": ix & iy, "|": ix | iy, "^": ix ^ iy}.get(op)
            if res is not None:
                return Num(sympy.Integer(res))
    except (TypeError, ValueError, ZeroDivisionError):
        return Unknown(flt)
    if (num_syms(a) | num_syms(b)) & ev.ctx.loop_syms:
        # 64 << (b % 4), bits of a value shifted by the iterator: known once unrolled
        return Unknown(flt, dataclasses.replace(ev.source(
            f"an operation '{op}' on a host loop iterator", node), loop_index=True))
    return UNK


def init_list(ev: CEvaluator, init: c_ast.InitList, ctype: CType, name: str) -> Any:
    if ctype.kind == "array":
        elem = ctype.elem or INT
        arr = ev.types.default(ctype, True)
        idx = 0
        for e in init.exprs:
            if isinstance(e, c_ast.NamedInitializer):
                idx = ev.types.const_int(e.name[0])
                e = e.expr
            v = (init_list(ev, e, elem, f"{name}_{idx}") if isinstance(e, c_ast.InitList)
                 else ev.eval_named(e, f"{name}_{idx}"))
            arr = arr.set(idx, ev.params.coerce(v, elem, name, (idx,)))
            idx += 1
        return arr
    if ctype.kind == "struct" and not ctype.fields:
        # a struct declared only in a system header polyfuse does not read (getopt's
        # ``struct option``): its values by position, ``"0"``, ``"1"``, ...
        return Rec(tuple((str(i), init_list(ev, e, UNK_TYPE, f"{name}_{i}")
                          if isinstance(e, c_ast.InitList) else ev.eval_named(
                               e, f"{name}_{i}"))
                         for i, e in enumerate(init.exprs)))
    if ctype.kind == "struct":
        rec = ev.types.default(ctype, True)
        names = [n for n, _ in ctype.fields]
        pos = 0
        for e in init.exprs:
            if isinstance(e, c_ast.NamedInitializer):
                fname = e.name[0].name if isinstance(e.name[0], c_ast.ID) else None
                if fname not in names:
                    raise ev.ctx.error("unknown field in initializer", e)
                pos = names.index(fname)
                e = e.expr
            if pos >= len(names):
                break
            ft = ctype.fields[pos][1]
            v = (init_list(ev, e, ft, f"{name}_{names[pos]}")
                 if isinstance(e, c_ast.InitList)
                 else ev.eval_named(e, f"{name}_{names[pos]}"))
            rec = rec.set(names[pos], ev.params.coerce(v, ft, name, (names[pos],)))
            pos += 1
        return rec
    if init.exprs:
        return ev.eval(init.exprs[0])
    return ev.types.default(ctype, True)



#: the expression kinds this module evaluates, by pycparser class name (calls: the evaluator)
EXPRESSIONS = {
    "Constant": constant, "ID": identifier, "Typename": typename, "ExprList": expr_list,
    "InitList": init_list_value, "CompoundLiteral": compound_literal, "Cast": cast,
    "TernaryOp": ternary, "Assignment": assignment, "ArrayRef": array_ref,
    "StructRef": struct_ref, "UnaryOp": unary, "BinaryOp": binary,
}
