"""Integer C expressions as isl piecewise quasi-affine functions: the expression model the
OpenCL kernel front-end (:mod:`polyfuse.frontend.opencl`) and auto-parallelization
(:mod:`polyfuse.autopar`) share.

An :class:`AffineExtractor` reads an expression under a :class:`State` (the enclosing loops, the
current domain and what is known of each variable) and returns an ``isl.PwAff`` (or an
``isl.Set`` for a condition); what is not quasi-affine raises :class:`NonAffine` with the
reason, which callers turn into an over-approximation or a refusal.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import islpy as isl
from pycparser import c_ast

from polyfuse.c import printer, syntax, types
from polyfuse.core.program import WORK_ITEM_FUNCTIONS, PolyfuseError, UnsupportedError


class NonAffine(Exception):
    """An expression polyfuse cannot represent as a quasi-affine function."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Array:
    name: str
    space: str  # global | constant | local | private
    dtype: str
    shape: Optional[tuple[int, ...]] = None  # None: unknown extent (pointer parameter)


@dataclass
class Var:
    kind: str  # "int" (integer scalar), "ptr" (pointer alias), "array", "other"
    value: Optional[tuple[isl.PwAff, int]] = None  # int: (value, loop depth it is defined at)
    array: Optional[Array] = None  # ptr / array: the array behind it
    offset: Optional[tuple[isl.PwAff, int]] = None  # ptr: offset in base elements
    unit: int = 1  # ptr: base elements per pointee element (casts to wider vector types)
    why: str = ""  # why value/offset is unknown
    dim: Optional[int] = None  # int: the loop dimension it iterates (loop iterators)
    ctype: Optional[str] = None  # int: the declared C type, when known


@dataclass
class State:
    """Where the walk is: enclosing loops, the current domain and what is known."""

    loops: list[str]
    dom: isl.Set
    env: dict[str, Var]
    exact: bool = True
    reason: Optional[str] = None
    divergent: bool = False  # under control flow that depends on memory
    #: per enclosing loop, its schedule coordinate (isl expression over the loop dims) and an
    #: extra isl constraint defining it ("" if none): loops enumerated by the kernel front-end
    sched: list[tuple[str, str]] = field(default_factory=list)

    def copy(self) -> State:
        return State(list(self.loops), self.dom, dict(self.env), self.exact, self.reason,
                      self.divergent, list(self.sched))

    @property
    def depth(self) -> int:
        return len(self.loops)


class AffineExtractor:
    """Integer expressions over a loop space with parameters ``params``.

    ``values`` are known integer parameters (replaced by constants), ``helpers`` the functions a
    single-``return`` call may be inlined from.  Work-item functions have value 0 unless the
    subclass (the kernel front-end) sets the NDRange geometry: ``pinned[d]`` False and the local
    and global sizes ``L[d]``/``G[d]`` (an int or a parameter name).
    """

    def __init__(self, params: Sequence[str], *, values: Optional[Mapping[str, int]] = None,
                 helpers: Optional[Mapping[str, c_ast.FuncDef]] = None, filename: str = "",
                 what: str = "", struct_sizes: Optional[Mapping[str, int]] = None):
        self.param_names = list(params)
        self.values = dict(values or {})
        self.helpers = dict(helpers or {})
        self.struct_sizes = dict(struct_sizes or {})
        self.filename = filename
        #: what errors name first (``kernel k``)
        self.what = what
        #: declared C types of integer scalars that are not variables (kernel parameters)
        self.scalar_types: dict[str, str] = {}
        self.pinned = [True, True, True]
        self.L: list[Any] = [None, None, None]
        self.G: list[Any] = [None, None, None]

    def type_size(self, name: str) -> Optional[int]:
        """Bytes of a scalar, vector or (this file's) struct type, or None."""
        return types.type_size(name, self.struct_sizes)

    def error(self, msg: str, node: Any, cls: type = PolyfuseError) -> PolyfuseError:
        """An error naming ``node``'s place."""
        loc = syntax.node_loc(node, self.filename)
        text = f"{self.what}: {msg}" if self.what else msg
        return cls(text, loc.file if loc else self.filename, loc.line if loc else None)

    def _universe(self, st: State) -> isl.Set:
        return isl.Set.universe(st.dom.get_space())

    def const(self, st: State, v: int) -> isl.PwAff:
        """The constant ``v`` over the current space."""
        return isl.PwAff.val_on_domain(self._universe(st), v)

    def dim(self, st: State, pos: int) -> isl.PwAff:
        """The loop (or work-item) dimension ``pos`` of the current space."""
        ls = isl.LocalSpace.from_space(st.dom.get_space())
        return isl.PwAff.var_on_domain(ls, isl.dim_type.set, pos)

    def _param(self, st: State, name: str) -> isl.PwAff:
        ls = isl.LocalSpace.from_space(st.dom.get_space())
        idx = self.param_names.index(name)
        return isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.param, idx))

    def _lift(self, st: State, val: tuple[isl.PwAff, int]) -> isl.PwAff:
        pw, depth = val
        if depth < st.depth:
            pw = pw.add_dims(isl.dim_type.in_, st.depth - depth)
        return pw

    def _size(self, st: State, v: Any) -> isl.PwAff:
        return self.const(st, v) if isinstance(v, int) else self._param(st, v)

    def aff(self, node: Any, st: State) -> isl.PwAff:
        """The value of an integer expression as a PwAff over the current space."""
        if isinstance(node, c_ast.Constant):
            if node.type in ("int", "unsigned int", "long", "unsigned long", "long long",
                             "unsigned long long") or re.fullmatch(r"[0-9][0-9a-fA-FxX]*[uUlL]*",
                                                                  node.value):
                try:
                    return self.const(st, syntax.int_literal(node.value))
                except ValueError:
                    pass
            if node.type == "char":
                v = syntax.char_value(node.value)
                if v is not None:
                    return self.const(st, v)
            if node.type == "bool":
                return self.const(st, 1 if node.value == "true" else 0)
            raise NonAffine(f"{node.value} is not an integer")
        if isinstance(node, c_ast.ID):
            return self._id_value(node.name, st)
        if isinstance(node, c_ast.Cast):
            t = types.type_name(node.to_type.type) if not isinstance(node.to_type.type,
                                                                c_ast.PtrDecl) else "ptr"
            if not types.is_integer(t):
                raise NonAffine(f"cast to {t}")
            return self.aff(node.expr, st)
        if isinstance(node, c_ast.UnaryOp):
            if node.op == "-":
                return self.aff(node.expr, st).neg()
            if node.op == "+":
                return self.aff(node.expr, st)
            if node.op == "!":
                return self.cond(node, st).indicator_function()
            if node.op == "sizeof":
                sz = self.type_size(types.type_name(node.expr.type)) if isinstance(
                    node.expr, c_ast.Typename) else None
                if sz is None:
                    raise NonAffine("sizeof of an unknown type")
                return self.const(st, sz)
            raise NonAffine(f"operator {node.op}")
        if isinstance(node, c_ast.BinaryOp):
            return self._binop(node, st)
        if isinstance(node, c_ast.TernaryOp):
            c = self.cond(node.cond, st)
            return c.indicator_function().cond(self.aff(node.iftrue, st),
                                               self.aff(node.iffalse, st))
        if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID):
            return self._call_value(node, st)
        if isinstance(node, (c_ast.ArrayRef, c_ast.StructRef)) or (
                isinstance(node, c_ast.UnaryOp) and node.op == "*"):
            raise NonAffine(f"{printer.opencl_source(node)} is data-dependent (reads memory)")
        raise NonAffine(f"{printer.opencl_source(node)} is not affine")

    def _id_value(self, name: str, st: State) -> isl.PwAff:
        var = st.env.get(name)
        if var is not None:
            if var.kind != "int":
                raise NonAffine(f"{name} is not an integer")
            if var.dim is not None and var.value is None:
                return self.dim(st, var.dim)
            if var.value is None:
                raise NonAffine(var.why or f"the value of {name} is not known")
            return self._lift(st, var.value)
        if name in self.values:
            return self.const(st, self.values[name])
        if name in self.param_names:
            return self._param(st, name)
        if name in ("true", "false"):
            return self.const(st, int(name == "true"))
        raise NonAffine(f"{name} is not an integer parameter or variable")

    def int_type(self, node: Any, st: State) -> Optional[types.Scalar]:
        """The C type of an integer expression after the usual arithmetic conversions, or None
        where it is not known (then no range is checked)."""
        if isinstance(node, c_ast.Constant):
            if node.type == "char":
                return types.SCALARS["int"]
            try:
                v = syntax.int_literal(node.value)
            except ValueError:
                return None
            suffix = re.search(r"[uUlL]*$", node.value).group().lower()
            unsigned = "u" in suffix or (v > 2**31 - 1 and v <= 2**32 - 1
                                         and not node.value.isdigit())
            wide = "l" in suffix or v > (2**32 - 1 if unsigned else 2**31 - 1)
            return types.SCALARS[("u" if unsigned else "") + ("long" if wide else "int")]
        if isinstance(node, c_ast.ID):
            var = st.env.get(node.name)
            name = var.ctype if var is not None else self.scalar_types.get(node.name)
            return _promoted(types.scalar(name)) if name else None
        if isinstance(node, c_ast.Cast) and not isinstance(node.to_type.type, c_ast.PtrDecl):
            return _promoted(types.scalar(types.type_name(node.to_type.type)))
        if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+"):
            return self.int_type(node.expr, st)
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*", "/", "%"):
            return _common(self.int_type(node.left, st), self.int_type(node.right, st))
        if isinstance(node, c_ast.BinaryOp) and node.op in ("<<", ">>"):
            return self.int_type(node.left, st)
        if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) \
                and node.name.name in WORK_ITEM_FUNCTIONS:
            return types.SCALARS["uint" if node.name.name == "get_work_dim" else "size_t"]
        return None

    def check_representable(self, value: isl.PwAff, ctype: Optional[types.Scalar], node: Any,
                            st: State) -> None:
        """Refuse an integer value that leaves its C type on every run of the statement.

        The model computes integers exactly, the device in the type's width: a signed overflow
        is undefined and an unsigned one wraps, and after a division, a comparison or a
        narrowing conversion the two differ (sums and products agree modulo the width, so
        they are checked only where they are consumed).  As with out-of-bounds accesses, a
        value that overflows only for some parameter values is left to the program's guards;
        over an inexact domain nothing is decided.
        """
        if ctype is None or not ctype.integer or ctype.kind == "bool" or not st.exact \
                or st.divergent:
            return
        bits = 8 * ctype.size
        lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if ctype.signed else (0, 2**bits - 1)
        # on a copy: isl may rewrite the representation of a set it reads, and the domain's
        # representation decides which witness points later reports sample
        dom = isl.Set.read_from_str(st.dom.get_ctx(), st.dom.to_str()).intersect(value.domain())
        universe = self._universe(st)
        outside = value.lt_set(isl.PwAff.val_on_domain(universe, isl.Val(str(lo)))).union(
            value.gt_set(isl.PwAff.val_on_domain(universe, isl.Val(str(hi)))))
        outside = outside.intersect(dom)
        if outside.is_empty() or not dom.params().is_subset(outside.params()):
            return
        what = "overflows" if ctype.signed else "wraps around"
        raise self.error(f"{printer.opencl_source(node)} {what} its type {ctype.name} "
                         "(its exact value "
                         f"leaves [{lo}, {hi}]) whenever the kernel runs: polyfuse models "
                         "integers exactly and cannot represent the device's result", node,
                         UnsupportedError)

    def _cst(self, pw: isl.PwAff) -> Optional[int]:
        if not pw.is_cst():
            return None
        vals = {a.get_constant_val().to_python() for _, a in pw.get_pieces()}
        if len(vals) != 1:
            return None
        v = vals.pop()
        return int(v) if int(v) == v else None

    def _binop(self, node: c_ast.BinaryOp, st: State) -> isl.PwAff:
        op = node.op
        if op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||"):
            return self.cond(node, st).indicator_function()
        a = self.aff(node.left, st)
        b = self.aff(node.right, st)
        if op == "+":
            return a.add(b)
        if op == "-":
            return a.sub(b)
        ca, cb = self._cst(a), self._cst(b)
        if op == "*":
            if cb is not None:
                return a.scale_val(isl.Val(cb)) if cb else self.const(st, 0)
            if ca is not None:
                return b.scale_val(isl.Val(ca)) if ca else self.const(st, 0)
            raise NonAffine(f"{printer.opencl_source(node)} is a non-constant product")
        if op in ("/", "%", ">>"):
            self.check_representable(a, self.int_type(node, st), node.left, st)
        if op in ("/", "%"):
            if syntax.const_int(node.right) == 0:
                raise self.error(f"integer division by zero in {printer.opencl_source(node)}", node)
            if cb is None or cb == 0:
                raise NonAffine(f"{printer.opencl_source(node)} divides by a non-constant")
            q = self.const(st, abs(cb))
            if op == "/":
                r = a.tdiv_q(q)
                return r.neg() if cb < 0 else r
            return a.tdiv_r(q)
        if op in ("<<", ">>"):
            if cb is None or cb < 0:
                raise NonAffine(f"{printer.opencl_source(node)} shifts by a non-constant")
            if op == "<<":
                return a.scale_val(isl.Val(2 ** cb))
            return a.scale_down_val(isl.Val(2 ** cb)).floor()
        if op == "&":
            for x, c in ((a, cb), (b, ca)):
                if c is not None and c > 0 and c & (c + 1) == 0:
                    return x.mod_val(isl.Val(c + 1))
        raise NonAffine(f"{printer.opencl_source(node)} is not affine")

    def cond(self, node: Any, st: State, check: bool = True) -> isl.Set:
        """The set of instances where an integer condition holds.

        ``check=False`` skips the range check of the compared values: a loop's own bound is
        read over a domain the bound has not yet limited."""
        if isinstance(node, c_ast.BinaryOp):
            op = node.op
            if op == "&&":
                return self.cond(node.left, st, check).intersect(self.cond(node.right, st, check))
            if op == "||":
                return self.cond(node.left, st, check).union(self.cond(node.right, st, check))
            if op in ("<", "<=", ">", ">=", "==", "!="):
                a, b = self.aff(node.left, st), self.aff(node.right, st)
                if check:
                    common = _common(self.int_type(node.left, st),
                                     self.int_type(node.right, st))
                    self.check_representable(a, common, node.left, st)
                    self.check_representable(b, common, node.right, st)
                return {"<": a.lt_set, "<=": a.le_set, ">": a.gt_set, ">=": a.ge_set,
                        "==": a.eq_set, "!=": a.ne_set}[op](b)
        if isinstance(node, c_ast.UnaryOp) and node.op == "!":
            return self.cond(node.expr, st, check).complement()
        return self.aff(node, st).ne_set(self.const(st, 0))

    def _call_value(self, node: c_ast.FuncCall, st: State) -> isl.PwAff:
        f = node.name.name
        args = node.args.exprs if node.args else []
        if f in WORK_ITEM_FUNCTIONS:
            return self._work_item(f, args, st, node)
        if f in ("min", "max", "imin", "imax", "umin", "umax") and len(args) == 2:
            a, b = self.aff(args[0], st), self.aff(args[1], st)
            return a.min(b) if "min" in f else a.max(b)
        if f == "clamp" and len(args) == 3:
            x, lo, hi = (self.aff(a, st) for a in args)
            return x.max(lo).min(hi)
        if f == "abs" and len(args) == 1:
            x = self.aff(args[0], st)
            return x.max(x.neg())
        if f in ("mul24", "mad24") and len(args) in (2, 3):
            prod = c_ast.BinaryOp("*", args[0], args[1], node.coord)
            e = prod if f == "mul24" else c_ast.BinaryOp("+", prod, args[2], node.coord)
            return self.aff(e, st)
        inl = self._inline(node)
        if inl is not None:
            return self.aff(inl, st)
        raise NonAffine(f"the value of {f}() is not affine")

    def _work_item(self, f: str, args: list, st: State, node: Any) -> isl.PwAff:
        if f == "get_work_dim":
            raise NonAffine("get_work_dim() depends on the launch")
        d = syntax.const_int(args[0])
        assert d is not None
        if self.pinned[d]:
            return self.const(st, {"get_local_size": 1, "get_num_groups": 1,
                                    "get_global_size": 1}.get(f, 0))
        L, G = self.L[d], self.G[d]
        g, ll = self.dim(st, d), self.dim(st, 3 + d)
        if f == "get_global_id":
            if not isinstance(L, int):
                raise NonAffine(f"get_global_id({d}) with unknown local size is "
                                f"g{d}*_ls{d} + l{d}")
            gid = g.scale_val(isl.Val(L)).add(ll) if L != 1 else g.add(ll)
            return gid if self.O[d] == 0 else gid.add(self._size(st, self.O[d]))
        if f == "get_local_id":
            return ll
        if f == "get_group_id":
            return g
        if f == "get_local_size":
            return self._size(st, L)
        if f == "get_global_size":
            return self._size(st, G)
        if f == "get_num_groups":
            if isinstance(L, int):
                return self._size(st, G).scale_down_val(isl.Val(L)).floor()
            raise NonAffine(f"get_num_groups({d}) with unknown local size")
        if f == "get_global_offset":
            return self._size(st, self.O[d])
        raise NonAffine(f"{f}()")

    def monotone(self, cset: isl.Set, st: State, pos: int, step: int) -> bool:
        """True if, once the loop condition fails, it stays false for later iterations."""
        dom = st.dom
        n = dom.dim(isl.dim_type.set)
        names = [f"x{i}" for i in range(n)]
        params = ", ".join(self.param_names)
        later = f"y > x{pos}" if step > 0 else f"y < x{pos}"
        tgt = list(names)
        tgt[pos] = "y"
        m = isl.Map(f"[{params}] -> {{ [{', '.join(names)}] -> [{', '.join(tgt)}] : {later} }}")
        fail = dom.subtract(cset)
        ok_later = m.intersect_range(dom.intersect(cset)).domain()
        return fail.intersect(ok_later).is_empty()

    # -- inlining ----------------------------------------------------------------------------------

    def _inline(self, call: c_ast.FuncCall) -> Optional[Any]:
        """The body expression of a single-``return`` helper with arguments substituted."""
        f = call.name.name
        fd = self.helpers.get(f)
        if fd is None:
            return None
        items = fd.body.block_items or []
        if len(items) != 1 or not isinstance(items[0], c_ast.Return) or items[0].expr is None:
            return None
        params = fd.decl.type.args.params if fd.decl.type.args else []
        names = [p.name for p in params if isinstance(p, c_ast.Decl)]
        args = call.args.exprs if call.args else []
        if len(names) != len(args):
            return None
        return syntax.substitute(copy.deepcopy(items[0].expr), dict(zip(names, args)))


def _promoted(t: Optional[types.Scalar]) -> Optional[types.Scalar]:
    """C's integer promotion: types narrower than ``int`` compute as ``int``."""
    if t is None or not t.integer:
        return None
    return types.SCALARS["int"] if t.size < 4 else types.standard(t)


def _common(a: Optional[types.Scalar], b: Optional[types.Scalar]) -> Optional[types.Scalar]:
    """The type of a binary arithmetic operation on ``a`` and ``b`` (C's usual arithmetic
    conversions), or None when either is unknown."""
    a, b = _promoted(a), _promoted(b)
    if a is None or b is None:
        return None
    if a.signed == b.signed:
        return a if a.size >= b.size else b
    unsigned, signed = (a, b) if not a.signed else (b, a)
    if unsigned.size >= signed.size:
        return unsigned
    return signed
