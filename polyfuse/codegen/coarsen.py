"""Thread and block coarsening of OpenCL kernels by unroll-and-interleave.

After Polygeist-GPU (§IV–V; see docs/references.md).

A launch of kernel K with local size ``L`` and ``G`` groups per dimension becomes a launch of a
coarsened kernel in which each work-item runs ``F = prod(thread) * prod(block)`` *copies* of K's
work-items:

* **thread coarsening** by ``t`` in dimension d (``t`` divides ``L_d``): the local size becomes
  ``L_d / t``, the group count is unchanged; copy ``c`` of new work-item ``l'`` is the original
  work-item ``l = c * L_d/t + l'`` (cyclic, so neighbouring work-items keep touching
  neighbouring addresses in every copy);
* **block coarsening** by ``b`` in dimension d (any ``b <= G_d``): the group count becomes
  ``floor(G_d / b)``; copy ``c`` of new group ``g'`` is the original group ``g'*b + c``, with its
  own replica of every ``__local`` array.  The ``G_d mod b`` remaining groups run in an
  *epilogue* launch of a kernel that is only thread-coarsened and offsets its group ids.

Unroll-and-interleave: the copies' statements are emitted statement by statement (copy 0's S1,
copy 1's S1, ..., then S2 ...); a loop or ``if`` whose control is the same in every copy is kept
once with an interleaved body (a nested counted loop is unrolled-and-jammed), a barrier is kept
once for all copies.  Control that differs between copies is replicated per copy; an ``if`` whose
condition differs but has no side effects is versioned: ``if (all copies take it) {interleaved}
else {per copy}``.

Legality is decided from the kernel itself, never guessed.  "Varies between copies" is a
flow-insensitive taint over the kernel's variables, with control dependence: the varying
work-item functions of the coarsened dimensions, every memory load (a load may differ between
work-items or, with block coarsening, between ``__local`` replicas) and calls with unknown
effects are sources.  A barrier under control that varies between copies would have to be
duplicated, which is illegal (Polygeist-GPU §IV-B, §V-B): for block coarsening that is control
depending on the group id, for thread coarsening it can only be control that already makes the
original barrier non-uniform, which the kernel model records (``Barrier.uniform``).  Anything the
transformation does not model (helpers calling work-item functions, ``return`` inside loops,
launches without a local size or with a global offset, geometry not fixed by the host) is
refused with a :class:`CoarsenError` naming the kernel.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import sympy
from pycparser import c_ast

from polyfuse.c import preprocessor, printer, syntax, types
from polyfuse.c.emit import declarations_text, helper_functions
from polyfuse.core.program import (
    Kernel,
    Launch,
    PolyfuseError,
    Program,
    UnsupportedError,
    eval_host_int,
)
from polyfuse.frontend.opencl import parse_kernels

__all__ = [
    "CoarsenError",
    "Factors",
    "LaunchGeometry",
    "CoarsenedLaunch",
    "CoarsenedProgram",
    "coarsen",
    "coarsen_launch",
    "spread_factors",
    "launch_geometry",
]

_WI = ("get_local_id", "get_group_id", "get_global_id", "get_local_size", "get_num_groups",
       "get_global_size")
_BARRIERS = ("barrier", "work_group_barrier")
#: calls that read no memory and have no side effects (beyond the work-item functions)
PURE_BUILTINS = frozenset({
    "min", "max", "clamp", "mad", "fma", "fabs", "fmin", "fmax", "sqrt", "rsqrt", "exp", "exp2",
    "exp10", "log", "log2", "log10", "pow", "pown", "powr", "sin", "cos", "tan", "asin", "acos",
    "atan", "atan2", "sinh", "cosh", "tanh", "floor", "ceil", "round", "trunc", "rint", "fmod",
    "abs", "abs_diff", "hypot", "native_exp", "native_log", "native_sqrt", "native_rsqrt",
    "native_sin", "native_cos", "native_divide", "native_recip", "native_powr", "half_exp",
    "mix", "step", "smoothstep", "sign", "dot", "length", "normalize", "cross", "distance",
    "select", "mul24", "mad24", "upsample", "rotate", "popcount", "clz", "erf", "erfc", "cbrt",
    "expm1", "log1p", "isnan", "isinf", "isfinite", "copysign", "ldexp", "get_work_dim",
    "get_global_offset", "mad_sat", "add_sat", "sub_sat", "hadd", "rhadd", "degrees", "radians",
})
_SUFFIX = "__pf"


class CoarsenError(UnsupportedError):
    """A coarsening that is illegal or that polyfuse cannot model exactly (one-line reason)."""


@dataclass(frozen=True)
class Factors:
    """Coarsening factors per NDRange dimension (1 = unchanged)."""

    thread: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)

    @staticmethod
    def of(thread: Sequence[int] = (), block: Sequence[int] = ()) -> Factors:
        """Factors from per-dimension lists shorter than 3 (missing dimensions are 1)."""
        t = tuple(int(x) for x in thread) + (1,) * (3 - len(thread))
        b = tuple(int(x) for x in block) + (1,) * (3 - len(block))
        if any(x < 1 for x in t + b):
            raise PolyfuseError(f"coarsening factors must be >= 1 (thread {t}, block {b})")
        return Factors(t[:3], b[:3])  # type: ignore[arg-type]

    @property
    def identity(self) -> bool:
        return self.thread == (1, 1, 1) and self.block == (1, 1, 1)

    @property
    def total(self) -> int:
        return math.prod(self.thread) * math.prod(self.block)

    def label(self, work_dim: int = 3) -> str:
        wd = max(1, work_dim)
        t = "x".join(str(x) for x in self.thread[:wd])
        b = "x".join(str(x) for x in self.block[:wd])
        return f"t{t}_b{b}"


@dataclass(frozen=True)
class LaunchGeometry:
    """Concrete NDRange of one launch: ``work_dim``, global and local sizes (3 entries each)."""

    work_dim: int
    global_size: tuple[int, int, int]
    local_size: tuple[int, int, int]

    @property
    def groups(self) -> tuple[int, int, int]:
        return tuple(g // max(1, loc) for g, loc in zip(self.global_size, self.local_size))  # type: ignore[return-value]


def spread_factors(total: int, extents: Sequence[int]) -> tuple[int, int, int]:
    """Split a total factor over the dimensions whose extent is not 1, as evenly as the
    extents allow (Polygeist-GPU §IV-C): repeatedly give the smallest prime of the remaining
    total to the dimension with the largest remaining extent it still divides."""
    out = [1, 1, 1]
    room = [int(e) for e in extents] + [1] * (3 - len(extents))
    rest = int(total)
    while rest > 1:
        p = next(q for q in range(2, rest + 1) if rest % q == 0)
        cand = [d for d in range(3) if room[d] >= p and room[d] % p == 0 and room[d] > 1]
        if not cand:
            cand = [d for d in range(3) if room[d] >= p]
        if not cand:
            raise PolyfuseError(f"cannot spread a coarsening factor of {total} over extents "
                                f"{tuple(extents)}")
        d = max(cand, key=lambda i: (room[i] // max(1, out[i]), -i))
        out[d] *= p
        room[d] //= p
        rest //= p
    return tuple(out)  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------
# Analysis: which variables vary between the copies
# ----------------------------------------------------------------------------------------------


def _call_name(n: Any) -> Optional[str]:
    if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID):
        return n.name.name
    return None


def _dim_arg(n: c_ast.FuncCall) -> Optional[int]:
    args = n.args.exprs if n.args else []
    if len(args) == 1 and isinstance(args[0], c_ast.Constant):
        try:
            return int(args[0].value.rstrip("uUlL"), 0)
        except ValueError:
            return None
    return None


def _is_barrier(n: Any) -> bool:
    return _call_name(n) in _BARRIERS


def _has_barrier(n: Any) -> bool:
    return any(_is_barrier(x) for x in syntax.walk(n))


def _escapes(body: Any) -> list[Any]:
    """``break``/``continue`` nodes in ``body`` that leave the loop owning ``body``."""
    out: list[Any] = []

    def visit(n: Any, in_loop: bool, in_switch: bool) -> None:
        if n is None:
            return
        if isinstance(n, c_ast.Break) and not in_loop and not in_switch:
            out.append(n)
        elif isinstance(n, c_ast.Continue) and not in_loop:
            out.append(n)
        for _, c in n.children():
            visit(c, in_loop or isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile)),
                  in_switch or isinstance(n, c_ast.Switch))

    for _, c in body.children() if body is not None else []:
        visit(c, False, False)
    if isinstance(body, (c_ast.Break, c_ast.Continue)):
        out.append(body)
    return out


class _Analysis:
    """Taint of the kernel body: what varies between the copies of one coarsened work-item."""

    def __init__(self, body: c_ast.Compound, varying_calls: set[tuple[str, int]],
                 local_names: set[str]):
        self.body = body
        self.varying_calls = varying_calls
        self.local_names = local_names
        self.varying: set[str] = set()
        self.varying_nodes: set[int] = set()  # control statements whose own control varies
        self.decl_level: dict[str, int] = {}
        changed = True
        while changed:
            before = (len(self.varying), len(self.varying_nodes))
            self.decl_level = {}
            self._walk(body, 0)
            changed = (len(self.varying), len(self.varying_nodes)) != before

    # an expression varies between copies
    def expr_varies(self, e: Any) -> bool:
        if e is None:
            return False
        skip: set[int] = set()
        for n in syntax.walk(e):
            if isinstance(n, c_ast.StructRef):
                skip.add(id(n.field))
                if n.type == "->":
                    return True
            if isinstance(n, c_ast.ID) and id(n) not in skip:
                if n.name in self.varying or n.name in self.local_names:
                    return True
            if isinstance(n, c_ast.ArrayRef):
                return True
            if isinstance(n, c_ast.UnaryOp) and n.op == "*":
                return True
            f = _call_name(n)
            if f is not None:
                if f in _WI:
                    skip.add(id(n.name))
                    if (f, _dim_arg(n)) in self.varying_calls:
                        return True
                elif f not in PURE_BUILTINS and not f.startswith(("convert_", "as_")):
                    return True
                else:
                    skip.add(id(n.name))
        return False

    def _assign(self, name: str) -> None:
        if name not in self.local_names:
            self.varying.add(name)

    def _ctrl(self, name: str, lvl: int) -> bool:
        """Is an assignment to ``name`` at control level ``lvl`` under varying control that
        its declaration is not under (a variable declared inside a varying region and assigned
        there only does not differ between the copies that run the region)."""
        return lvl > self.decl_level.get(name, 0)

    def _writes(self, n: Any, lvl: int) -> None:
        """Mark variables written inside ``n`` (an expression or declaration)."""
        for x in syntax.walk(n):
            if isinstance(x, c_ast.Assignment):
                base = _base_id(x.lvalue)
                if base is None:
                    continue
                if isinstance(x.lvalue, c_ast.ArrayRef):
                    continue  # an element store: private arrays vary anyway, pointers do not
                if not isinstance(x.lvalue, c_ast.ID) or self._ctrl(base, lvl) or \
                        self.expr_varies(x.rvalue):
                    self._assign(base)
            elif isinstance(x, c_ast.UnaryOp) and x.op in ("++", "--", "p++", "p--"):
                if isinstance(x.expr, c_ast.ArrayRef):
                    continue
                base = _base_id(x.expr)
                if base is not None and (self._ctrl(base, lvl)
                                         or not isinstance(x.expr, c_ast.ID)):
                    self._assign(base)
            elif isinstance(x, c_ast.UnaryOp) and x.op == "&":
                if isinstance(x.expr, (c_ast.ID, c_ast.StructRef)):
                    base = _base_id(x.expr)
                    if base is not None:
                        self._assign(base)
            elif isinstance(x, c_ast.Decl) and x.name and not isinstance(x.type, c_ast.FuncDecl):
                if preprocessor.address_space_of(x) == "local":
                    continue
                self.decl_level[x.name] = min(self.decl_level.get(x.name, lvl), lvl)
                if not isinstance(x.type, (c_ast.TypeDecl, c_ast.PtrDecl)) or \
                        self.expr_varies(x.init):
                    self._assign(x.name)

    def loop_varies(self, n: Any) -> bool:
        """The loop's own control (header or an escape) differs between copies."""
        parts = [n.cond] + ([n.init, n.next] if isinstance(n, c_ast.For) else [])
        if any(self.expr_varies(p) for p in parts if p is not None and
               not isinstance(p, c_ast.DeclList)):
            return True
        if isinstance(n, c_ast.For) and isinstance(n.init, c_ast.DeclList):
            if any(d.name in self.varying or self.expr_varies(d.init) for d in n.init.decls):
                return True
        if isinstance(n, c_ast.For):
            written = {_base_id(x.lvalue) for x in syntax.walk(n.next) if
                       isinstance(x, c_ast.Assignment)} | \
                      {_base_id(x.expr) for x in syntax.walk(n.next) if
                       isinstance(x, c_ast.UnaryOp) and x.op in ("++", "--", "p++", "p--")}
            if written & self.varying:
                return True
        return self._varying_escape(n.stmt)

    def _walk(self, n: Any, lvl: int) -> None:
        if n is None:
            return
        if isinstance(n, c_ast.Compound):
            for s in n.block_items or []:
                self._walk(s, lvl)
        elif isinstance(n, c_ast.If):
            own = self.expr_varies(n.cond)
            if own:
                self.varying_nodes.add(id(n))
            self._writes(n.cond, lvl)
            self._walk(n.iftrue, lvl + own)
            self._walk(n.iffalse, lvl + own)
        elif isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile)):
            if isinstance(n, c_ast.For):
                self._writes(n.init, lvl)
            own = self.loop_varies(n)
            if own:
                self.varying_nodes.add(id(n))
            if isinstance(n, c_ast.For):
                self._writes(n.next, lvl + own)
            self._writes(n.cond, lvl + own)
            self._walk(n.stmt, lvl + own)
        elif isinstance(n, c_ast.Switch):
            self.varying_nodes.add(id(n))
            self._writes(n.cond, lvl)
            self._walk(n.stmt, lvl + 1)
        elif isinstance(n, (c_ast.Case, c_ast.Default)):
            for s in n.stmts or []:
                self._walk(s, lvl)
        else:
            self._writes(n, lvl)

    def _varying_escape(self, body: Any) -> bool:
        """A break/continue of this loop sits under control that varies between copies."""
        esc = {id(x) for x in _escapes(body)}
        if not esc:
            return False

        def visit(n: Any, ctrl: bool) -> bool:
            if n is None:
                return False
            if id(n) in esc:
                return ctrl
            if isinstance(n, c_ast.If):
                c = ctrl or self.expr_varies(n.cond)
                return visit(n.iftrue, c) or visit(n.iffalse, c)
            if isinstance(n, (c_ast.For, c_ast.While, c_ast.DoWhile)):
                return False  # escapes inside belong to that loop
            if isinstance(n, c_ast.Switch):
                return visit(n.stmt, ctrl or self.expr_varies(n.cond))
            return any(visit(c, ctrl) for _, c in n.children())

        return visit(body, False)

    def stmt_varies(self, s: Any) -> bool:
        """A simple statement must run once per copy (not once for all)."""
        if self.expr_varies(s):
            return True
        for x in syntax.walk(s):
            if isinstance(x, c_ast.Assignment):
                if not isinstance(x.lvalue, c_ast.ID) or x.lvalue.name in self.varying or \
                        x.lvalue.name in self.local_names:
                    return True
            elif isinstance(x, c_ast.UnaryOp) and x.op in ("++", "--", "p++", "p--"):
                if not isinstance(x.expr, c_ast.ID) or x.expr.name in self.varying:
                    return True
            elif isinstance(x, c_ast.Decl) and x.name and x.name in self.varying:
                return True
        return False


def _base_id(n: Any) -> Optional[str]:
    while True:
        if isinstance(n, c_ast.ID):
            return n.name
        if isinstance(n, c_ast.ArrayRef):
            n = n.name
        elif isinstance(n, c_ast.StructRef):
            if n.type == "->":
                return None
            n = n.name
        elif isinstance(n, c_ast.Cast):
            n = n.expr
        else:
            return None


def _side_effect_free(e: Any) -> bool:
    for n in syntax.walk(e):
        if isinstance(n, c_ast.Assignment):
            return False
        if isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--"):
            return False
        f = _call_name(n)
        if f is not None and f not in PURE_BUILTINS and f not in _WI and \
                not f.startswith(("convert_", "as_")):
            return False
    return True


# ----------------------------------------------------------------------------------------------
# The rewriting of one kernel
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Copy:
    index: int
    thread: tuple[int, int, int]  # thread-copy coordinate per dim
    block: tuple[int, int, int]  # block-copy coordinate per dim
    block_index: int  # flat block-copy index (which __local replica)


def _int(v: int) -> c_ast.Constant:
    return c_ast.Constant("int", str(int(v)))


def _wi(f: str, d: int) -> c_ast.FuncCall:
    return c_ast.FuncCall(c_ast.ID(f), c_ast.ExprList([_int(d)]))


def _bin(op: str, a: Any, b: Any) -> c_ast.BinaryOp:
    return c_ast.BinaryOp(op, a, b)


def _balanced(op: str, items: Sequence[Any]) -> Any:
    """``items`` joined by the associative ``op`` as a balanced tree: a chain over 32 copies
    would nest 32 deep, and printed kernels are fully parenthesised (compilers cap nesting)."""
    if len(items) == 1:
        return items[0]
    mid = len(items) // 2
    return _bin(op, _balanced(op, items[:mid]), _balanced(op, items[mid:]))


class _Rewriter:
    """Emit the coarsened body."""

    def __init__(self, kernel: Kernel, geom: LaunchGeometry, factors: Factors,
                 group_base: tuple[int, int, int], what: str):
        self.kernel = kernel
        self.geom = geom
        self.f = factors
        self.base = group_base
        self.what = what
        fd = kernel.ast
        self.helpers = {k: v for k, v in kernel.helpers.items() if k != kernel.name}
        self._check_helpers(fd.body)
        body = copy.deepcopy(fd.body)
        items = list(body.block_items or [])
        if any(isinstance(n, c_ast.Return) for n in syntax.walk(body)):
            from polyfuse.codegen.fuse import eliminate_returns

            try:
                items = eliminate_returns(items, f"kernel {kernel.name}")
            except UnsupportedError as err:
                raise CoarsenError(str(err)) from None
        self.body = c_ast.Compound(items)
        taken = {n.name for n in syntax.walk(self.body) if isinstance(n, c_ast.ID)}
        if any(_SUFFIX in t for t in taken):
            raise CoarsenError(f"kernel {kernel.name}: identifiers containing {_SUFFIX} are "
                               "reserved for coarsening")
        self.local_params = [p for p in kernel.params if p.pointer and p.address_space == "local"]
        self.local_decls = {n.name for n in syntax.walk(self.body)
                            if isinstance(n, c_ast.Decl) and n.name and
                            preprocessor.address_space_of(n) == "local"}
        wd = geom.work_dim
        self.varying_calls: set[tuple[str, int]] = set()
        for d in range(3):
            if factors.thread[d] > 1:
                self.varying_calls |= {("get_local_id", d), ("get_global_id", d)}
            if factors.block[d] > 1:
                self.varying_calls |= {("get_group_id", d), ("get_global_id", d)}
            if (factors.thread[d] > 1 or factors.block[d] > 1) and d >= wd:
                raise CoarsenError(f"kernel {kernel.name}: dimension {d} is not used by the "
                                   f"launch (work_dim {wd})")
        self.is_block = any(b > 1 for b in factors.block)
        local_names = set(self.local_decls) | {p.name for p in self.local_params}
        self.an = _Analysis(self.body, self.varying_calls, local_names)
        self.copies = self._copies()
        self.local_elems: dict[str, int] = {}

    # -- checks ------------------------------------------------------------------------------------

    def _check_helpers(self, body: Any) -> None:
        seen: set[str] = set()
        todo = [body]
        while todo:
            b = todo.pop()
            for n in syntax.walk(b):
                f = _call_name(n)
                if f in self.helpers and f not in seen:
                    seen.add(f)
                    hb = self.helpers[f].body
                    if any(_call_name(x) in _WI + _BARRIERS for x in syntax.walk(hb)):
                        raise CoarsenError(f"kernel {self.kernel.name}: helper {f}() calls "
                                           "work-item functions or barriers; coarsening does not "
                                           "rewrite inside helpers")
                    todo.append(hb)
                if f is not None and f in _WI and _dim_arg(n) is None:
                    raise CoarsenError(f"kernel {self.kernel.name}: {f}() with a non-constant "
                                       "dimension")

    def _copies(self) -> list[_Copy]:
        out = []
        tr = [range(self.f.thread[d]) for d in range(3)]
        br = [range(self.f.block[d]) for d in range(3)]
        blocks = list(itertools.product(*br))
        for bi, b in enumerate(blocks):
            for t in itertools.product(*tr):
                out.append(_Copy(len(out), t, b, bi))  # type: ignore[arg-type]
        return out

    def illegal(self, msg: str, node: Any) -> CoarsenError:
        line = getattr(getattr(node, "coord", None), "line", None)
        at = f" (line {line})" if line else ""
        return CoarsenError(f"kernel {self.kernel.name}: {self.what} is illegal: {msg}{at}")

    # -- per-copy rewriting ------------------------------------------------------------------------

    def _wi_expr(self, f: str, d: int, c: _Copy) -> Any:
        g = self.geom
        t, b = self.f.thread[d], self.f.block[d]
        L, G = g.local_size[d], g.groups[d]
        lp = L // t
        if f == "get_local_id":
            if t == 1:
                return _wi(f, d)
            return _bin("+", _int(c.thread[d] * lp), _wi(f, d))
        if f == "get_group_id":
            if b == 1 and self.base[d] == 0:
                return _wi(f, d)
            if b == 1:
                return _bin("+", _wi(f, d), _int(self.base[d]))
            return _bin("+", _bin("*", _wi(f, d), _int(b)), _int(c.block[d] + self.base[d]))
        if f == "get_global_id":
            if t == 1 and b == 1 and self.base[d] == 0:
                return _wi(f, d)
            return _bin("+", _bin("*", self._wi_expr("get_group_id", d, c), _int(L)),
                        self._wi_expr("get_local_id", d, c))
        if f == "get_local_size":
            return _wi(f, d) if t == 1 else _int(L)
        # an epilogue runs part of the groups even in dimensions it does not offset, and a
        # coarsened launch changes the sizes: the original's values are constants
        if f == "get_num_groups":
            return _int(G)
        if f == "get_global_size":
            return _int(G * L)
        raise AssertionError(f)

    def _rename_map(self, c: _Copy) -> dict[str, str]:
        m = {v: f"{v}{_SUFFIX}{c.index}" for v in self.an.varying} if c.index else {}
        if self.is_block and c.block_index:
            for v in self.local_decls | {p.name for p in self.local_params}:
                m[v] = f"{v}{_SUFFIX}b{c.block_index}"
        return m

    def for_copy(self, node: Any, c: _Copy) -> Any:
        n = copy.deepcopy(node)
        syntax.rename(n, self._rename_map(c), keep_calls=True)

        def fn(x: Any) -> Any:
            f = _call_name(x)
            if f in _WI:
                return self._wi_expr(f, _dim_arg(x), c)
            return x

        return syntax.transform(n, fn)

    # -- interleaving ------------------------------------------------------------------------------

    def emit(self, items: Iterable[Any]) -> list[Any]:
        """Interleave ``items`` for all copies."""
        out: list[Any] = []
        for s in items:
            out += self._emit_one(s)
        return out

    def _per_copy(self, s: Any, why: str) -> list[Any]:
        if _has_barrier(s):
            raise self.illegal(f"a barrier sits under {why} that differs between the "
                               "coarsened copies", s)
        return [self.for_copy(s, c) for c in self.copies]

    def _emit_one(self, s: Any) -> list[Any]:
        an = self.an
        c0 = self.copies[0]
        if isinstance(s, c_ast.Compound):
            return [c_ast.Compound(self.emit(s.block_items or []), s.coord)]
        if isinstance(s, c_ast.FuncCall) and _is_barrier(s):
            return [self.for_copy(s, c0)]
        if isinstance(s, c_ast.If):
            if id(s) not in an.varying_nodes and not an.expr_varies(s.cond):
                return [c_ast.If(self.for_copy(s.cond, c0), self._block(s.iftrue),
                                 self._block(s.iffalse) if s.iffalse is not None else None,
                                 s.coord)]
            per = self._per_copy(s, "control flow")
            if s.iffalse is None and _side_effect_free(s.cond) and len(self.copies) > 1 \
                    and not _escapes(s.iftrue):
                cond = _balanced("&&", [self.for_copy(s.cond, c) for c in self.copies])
                fast = self._block(s.iftrue)
                return [c_ast.If(cond, fast, c_ast.Compound(per), s.coord)]
            return per
        if isinstance(s, (c_ast.For, c_ast.While, c_ast.DoWhile)):
            if id(s) in an.varying_nodes:
                return self._per_copy(s, "a loop whose trip count")
            body = self._block(s.stmt)
            if isinstance(s, c_ast.For):
                init = s.init
                if init is not None:
                    if an.expr_varies(init) if not isinstance(init, c_ast.DeclList) else \
                            any(d.name in an.varying for d in init.decls):
                        return self._per_copy(s, "a loop whose trip count")
                    init = self.for_copy(init, c0)
                return [c_ast.For(init, self.for_copy(s.cond, c0) if s.cond else None,
                                  self.for_copy(s.next, c0) if s.next else None, body, s.coord)]
            cls = type(s)
            return [cls(self.for_copy(s.cond, c0), body, s.coord)]
        if isinstance(s, c_ast.Switch):
            return self._per_copy(s, "a switch")
        if isinstance(s, (c_ast.Break, c_ast.Continue, c_ast.EmptyStatement, c_ast.Pragma)):
            return [copy.deepcopy(s)]
        if isinstance(s, c_ast.Decl) and preprocessor.address_space_of(s) == "local":
            if not self.is_block:
                return [copy.deepcopy(s)]
            seen: dict[int, Any] = {}
            for c in self.copies:
                seen.setdefault(c.block_index, self.for_copy(s, c))
            return list(seen.values())
        if isinstance(s, (c_ast.Label, c_ast.Goto, c_ast.Return)):
            raise CoarsenError(f"kernel {self.kernel.name}: {type(s).__name__.lower()} is not "
                               "supported by coarsening")
        if an.stmt_varies(s):
            for x in syntax.walk(s):
                if isinstance(x, c_ast.Assignment) and isinstance(x.lvalue, c_ast.ID) and \
                        x.lvalue.name not in an.varying and x.lvalue.name not in an.local_names:
                    raise CoarsenError(f"kernel {self.kernel.name}: a statement at line "
                                       f"{getattr(s.coord, 'line', '?')} updates the shared "
                                       f"variable {x.lvalue.name} together with per-copy work")
            return [self.for_copy(s, c) for c in self.copies]
        return [self.for_copy(s, c0)]

    def _block(self, s: Any) -> Any:
        if s is None:
            return None
        return c_ast.Compound(self.emit(syntax.block_items(s)), getattr(s, "coord", None))

    def prologue(self) -> list[Any]:
        """Per-copy copies of varying parameters and ``__local`` pointer replicas."""
        out: list[Any] = []
        fd = self.kernel.ast
        args = fd.decl.type.args.params if fd.decl.type.args else []
        by_name = {getattr(a, "name", None): a for a in args}
        for p in self.kernel.params:
            if p.name in self.an.varying:
                for c in self.copies[1:]:
                    d = _renamed(by_name[p.name], f"{p.name}{_SUFFIX}{c.index}")
                    _drop_const(d)
                    d.init = c_ast.ID(p.name)
                    out.append(d)
        if self.is_block:
            for p in self.local_params:
                n_el = self.local_elems.get(p.name)
                if n_el is None:
                    raise CoarsenError(f"kernel {self.kernel.name}: size of __local argument "
                                       f"{p.name} unknown")
                done: set[int] = set()
                for c in self.copies:
                    if c.block_index == 0 or c.block_index in done:
                        continue
                    done.add(c.block_index)
                    d = _renamed(by_name[p.name], f"{p.name}{_SUFFIX}b{c.block_index}")
                    d.init = _bin("+", c_ast.ID(p.name), _int(c.block_index * n_el))
                    out.append(d)
        return out

    def function(self, name: str) -> c_ast.FuncDef:
        body = self.prologue() + self.emit(self.body.block_items or [])
        fd = copy.deepcopy(self.kernel.ast)
        fd.decl.name = name
        for x in syntax.walk(fd.decl):
            if isinstance(x, c_ast.TypeDecl) and x.declname == self.kernel.name:
                x.declname = name
            if isinstance(x, c_ast.Attribute) and x.name == "reqd_work_group_size":
                x.arguments = ", ".join(str(self.geom.local_size[d] // self.f.thread[d])
                                        for d in range(3))
        fd.body = c_ast.Compound(body, fd.body.coord)
        return fd


def _renamed(decl: c_ast.Decl, name: str) -> c_ast.Decl:
    """A copy of a parameter's declaration declaring ``name`` instead (a per-copy replica)."""
    out = copy.deepcopy(decl)
    syntax.rename(out, {decl.name: name})
    return out


def _drop_const(decl: Any) -> None:
    for x in syntax.walk(decl):
        if hasattr(x, "quals") and isinstance(x.quals, list) and "const" in x.quals \
                and isinstance(x, c_ast.TypeDecl):
            x.quals = [q for q in x.quals if q != "const"]
    if "const" in (decl.quals or []):
        decl.quals = [q for q in decl.quals if q != "const"]


# ----------------------------------------------------------------------------------------------
# Launch level
# ----------------------------------------------------------------------------------------------


def launch_geometry(launch: Launch, params: Mapping[str, Any]) -> LaunchGeometry:
    """The concrete geometry of ``launch`` (host loop iterators must not change it)."""
    tag = f"launch {launch.id} ({launch.kernel})"
    if launch.local_size is None:
        raise CoarsenError(f"{tag}: no local size (NULL): coarsening needs the work-group "
                           "geometry")
    if launch.global_offset is not None and any(sympy.sympify(o) != 0
                                                for o in launch.global_offset):
        raise CoarsenError(f"{tag}: a global work offset is not supported by coarsening")
    its = {lp.iterator for lp in launch.loops}
    wd = launch.work_dim
    for e in tuple(launch.global_size[:wd]) + tuple(launch.local_size[:wd]):
        if {str(s) for s in sympy.sympify(e).free_symbols} & its:
            raise CoarsenError(f"{tag}: the NDRange changes with a host loop iterator")
    gs = [eval_host_int(x, params, f"{tag} global size") for x in launch.global_size[:wd]]
    ls = [eval_host_int(x, params, f"{tag} local size") for x in launch.local_size[:wd]]
    for g, loc in zip(gs, ls):
        if loc <= 0 or g % loc:
            raise CoarsenError(f"{tag}: global size {g} is not a multiple of local size {loc}")
    return LaunchGeometry(wd, tuple(gs + [1] * (3 - wd)), tuple(ls + [1] * (3 - wd)))  # type: ignore[arg-type]


@dataclass(frozen=True)
class CoarsenedLaunch:
    """How one launch was coarsened: the kernels and the new NDRanges (main, then epilogues)."""

    launch: int
    kernel: str
    factors: Factors
    original: LaunchGeometry
    #: (kernel name, global size, local size, group base) of every launch that replaces it
    launches: tuple[tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]
    local_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        wd = self.original.work_dim
        return {
            "launch": self.launch, "kernel": self.kernel,
            "thread_factors": list(self.factors.thread[:wd]),
            "block_factors": list(self.factors.block[:wd]),
            "original": {"global_size": list(self.original.global_size[:wd]),
                         "local_size": list(self.original.local_size[:wd])},
            "launches": [{"kernel": k, "global_size": list(g[:wd]), "local_size": list(loc[:wd]),
                          "group_base": list(b[:wd]),
                          "role": "main" if i == 0 else "epilogue"}
                         for i, (k, g, loc, b) in enumerate(self.launches)],
            "local_mem_bytes": self.local_bytes,
        }


@dataclass(frozen=True)
class CoarsenedProgram:
    """A program whose launches were coarsened; ``program`` runs like the original."""

    program: Program
    original: Program
    launches: tuple[CoarsenedLaunch, ...]
    source: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def launch(self, launch_id: int) -> Optional[CoarsenedLaunch]:
        for cl_ in self.launches:
            if cl_.launch == launch_id:
                return cl_
        return None


def _local_bytes(kernel: Kernel, launch: Launch, params: Mapping[str, Any]) -> dict[str, int]:
    """Bytes of every ``__local`` array or argument of ``kernel`` at ``launch``."""
    out: dict[str, int] = {}
    for a in kernel.arrays:
        if a.address_space == "local":
            sz = types.type_size(a.type, kernel.struct_sizes) or 4
            out[a.name] = sz * math.prod(a.shape)
    for p in kernel.params:
        if p.pointer and p.address_space == "local":
            try:
                b = launch.arg(p.index)
            except KeyError:
                raise CoarsenError(f"launch {launch.id}: __local argument {p.name} not set") \
                    from None
            if b.kind != "local" or b.local_bytes is None:
                raise CoarsenError(f"launch {launch.id}: __local argument {p.name} has no size")
            out[p.name] = eval_host_int(b.local_bytes, params, f"__local argument {p.name}")
    return out


def _barriers_group_uniform(kernel: Kernel) -> bool:
    """Every barrier sits under control that is the same for all work-items of a group, by the
    copy-varying analysis with every local id varying (a second, syntactic proof where the
    polyhedral model over-approximates, e.g. a ``break`` under a uniform condition)."""
    body = copy.deepcopy(kernel.ast.body)
    items = list(body.block_items or [])
    if any(isinstance(n, c_ast.Return) for n in syntax.walk(body)):
        from polyfuse.codegen.fuse import eliminate_returns

        try:
            items = eliminate_returns(items, f"kernel {kernel.name}")
        except UnsupportedError:
            return False
    body = c_ast.Compound(items)
    calls = {(f, d) for f in ("get_local_id", "get_global_id") for d in range(3)}
    local = {n.name for n in syntax.walk(body) if isinstance(n, c_ast.Decl) and n.name and
             preprocessor.address_space_of(n) == "local"}
    local |= {p.name for p in kernel.params if p.pointer and p.address_space == "local"}
    an = _Analysis(body, calls, local)

    def visit(n: Any, under: bool) -> bool:
        if n is None:
            return True
        if _is_barrier(n):
            return not under
        u = under or id(n) in an.varying_nodes
        return all(visit(c, u) for _, c in n.children())

    return visit(body, False)


def coarsen_source(kernel: Kernel, geom: LaunchGeometry, factors: Factors,
                   local_elems: Mapping[str, int], name: str) -> tuple[str, list[tuple]]:
    """OpenCL C of the coarsened kernel(s) of one launch and the NDRanges that replace it.

    Returns ``(text, launches)``: ``text`` holds the main kernel ``name`` and, when a block
    factor does not divide the group count, epilogue kernels ``name_epi<d>``; ``launches`` lists
    ``(kernel, global, local, group_base)`` in launch order.
    """
    if kernel.ast is None:
        raise CoarsenError(f"kernel {kernel.name} has no syntax tree to coarsen")
    bad = [b for b in kernel.barriers if not b.uniform]
    if bad and not _barriers_group_uniform(kernel):
        where = f" (line {bad[0].loc.line})" if bad[0].loc else ""
        raise CoarsenError(f"kernel {kernel.name}: a barrier may not be reached by all "
                           f"work-items of a group{where}; not coarsened")
    wd = geom.work_dim
    L, G = geom.local_size, geom.groups
    for d in range(3):
        t, b = factors.thread[d], factors.block[d]
        if L[d] % t:
            raise CoarsenError(f"kernel {kernel.name}: thread factor {t} does not divide the "
                               f"local size {L[d]} in dimension {d}")
        if b > G[d]:
            raise CoarsenError(f"kernel {kernel.name}: block factor {b} exceeds the {G[d]} "
                               f"groups of dimension {d}")
    what = f"coarsening by {factors.label(wd)}"
    rw = _Rewriter(kernel, geom, factors, (0, 0, 0), what)
    rw.local_elems = dict(local_elems)
    funcs = [rw.function(name)]
    lp = tuple(L[d] // factors.thread[d] for d in range(3))
    q = tuple(G[d] // factors.block[d] for d in range(3))
    launches: list[tuple] = [(name, tuple(q[d] * lp[d] for d in range(3)), lp, (0, 0, 0))]
    rem_dims = [d for d in range(3) if factors.block[d] > 1 and G[d] % factors.block[d]]
    done: list[int] = []
    for d in rem_dims:
        base = [0, 0, 0]
        groups = list(G)
        base[d] = q[d] * factors.block[d]
        groups[d] = G[d] - base[d]
        for e in done:
            groups[e] = q[e] * factors.block[e]
        done.append(d)
        ename = f"{name}_epi{d}"
        erw = _Rewriter(kernel, geom, Factors(factors.thread, (1, 1, 1)), tuple(base),
                        f"{what} (epilogue)")  # type: ignore[arg-type]
        erw.local_elems = dict(local_elems)
        funcs.append(erw.function(ename))
        launches.append((ename, tuple(groups[i] * lp[i] for i in range(3)), lp, tuple(base)))
    text = "\n".join(printer.opencl_source(f) for f in funcs)
    return text, launches


def coarsen_launch(program: Program, launch_id: int, factors: Factors, *,
                   params: Optional[Mapping[str, Any]] = None) -> CoarsenedProgram:
    """``program`` with one launch coarsened by ``factors`` (see the module doc)."""
    return coarsen(program, {launch_id: factors}, params=params)


def coarsen(program_or_kernel: Any, factors: Any = None, *,
            params: Optional[Mapping[str, Any]] = None, kernel: Optional[str] = None,
            thread: Sequence[int] = (), block: Sequence[int] = (),
            total: Optional[int] = None) -> CoarsenedProgram:
    """Coarsen launches of a program; a new record (the input is not changed).

    ``factors`` is a :class:`Factors` for every launch (of ``kernel`` when given), or a mapping
    launch id → :class:`Factors`; or give ``thread``/``block`` per dimension, or ``total``
    (thread factor spread over the non-unit local dimensions, as the seed does).  A
    :class:`~polyfuse.core.program.Kernel` is wrapped in a default one-launch program first.
    """
    program = program_or_kernel
    params = dict(params or {})
    if isinstance(program_or_kernel, Kernel):
        from polyfuse.frontend.builder import default_program

        program = default_program({program_or_kernel.name: program_or_kernel}, params=params)
    if not isinstance(program, Program):
        raise TypeError("coarsen() takes a Program or a Kernel")
    targets = [lc for lc in program.launches if kernel is None or lc.kernel == kernel]
    if kernel is not None and not targets:
        raise PolyfuseError(f"no launch of kernel {kernel!r}")
    per: dict[int, Factors]
    if isinstance(factors, Mapping):
        per = {int(k): v for k, v in factors.items()}
    else:
        if factors is None:
            if total is not None:
                per = {}
                for lc in targets:
                    g = launch_geometry(lc, params)
                    per[lc.id] = Factors(spread_factors(total, g.local_size[:g.work_dim]))
            else:
                f = Factors.of(thread, block)
                per = {lc.id: f for lc in targets}
        else:
            per = {lc.id: factors for lc in targets}
    return _apply(program, per, params)


def _apply(program: Program, per: Mapping[int, Factors], params: Mapping[str, Any]
           ) -> CoarsenedProgram:
    texts: list[str] = []
    decls = ""
    infos: list[CoarsenedLaunch] = []
    new_ops: list[Any] = []
    next_id = max((op.id for op in program.ops), default=-1) + 1
    replaced: dict[int, list[tuple]] = {}
    kfile: Optional[str] = None
    helpers_text: dict[str, str] = {}
    for lc in program.launches:
        f = per.get(lc.id)
        if f is None or f.identity:
            continue
        k = program.kernels[lc.kernel]
        geom = launch_geometry(lc, params)
        lb = _local_bytes(k, lc, params)
        elems = {}
        for p in k.params:
            if p.pointer and p.address_space == "local":
                elems[p.name] = lb[p.name] // max(1, types.type_size(p.type, k.struct_sizes) or 4)
        name = f"{lc.kernel}__{f.label(geom.work_dim)}_L{lc.id}"
        text, launches = coarsen_source(k, geom, f, elems, name)
        texts.append(text)
        if not decls:
            decls = declarations_text(k.declarations)
        if k.loc is not None and kfile is None:
            kfile = k.loc.file
        for hn, hfd in helper_functions(k.helpers).items():
            helpers_text.setdefault(hn, printer.opencl_source(hfd))
        replaced[lc.id] = launches
        infos.append(CoarsenedLaunch(lc.id, lc.kernel, f, geom, tuple(launches),
                                     sum(lb.values()) * math.prod(f.block)))
    if not infos:
        return CoarsenedProgram(program, program, (), "", params)
    source = decls + "".join(t + "\n" for t in helpers_text.values()) + "\n".join(texts)
    try:
        new_kernels = parse_kernels(source, filename=kfile or "<coarsened>")
    except PolyfuseError as err:
        raise CoarsenError(f"the coarsened kernel cannot be modelled: {err}") from None
    kernels = dict(program.kernels)
    kernels.update({n: k for n, k in new_kernels.items() if any(
        n == x[0] for ls in replaced.values() for x in ls)})
    for op in program.ops:
        if not isinstance(op, Launch) or op.id not in replaced:
            new_ops.append(op)
            continue
        blocks = math.prod(per[op.id].block)
        for i, (kname, gs, ls, _b) in enumerate(replaced[op.id]):
            wd = op.work_dim
            args = tuple(
                replace(a, local_bytes=sympy.Integer(eval_host_int(a.local_bytes, params, "local")
                                                     * (blocks if i == 0 else 1)))
                if a.kind == "local" and a.local_bytes is not None else a for a in op.args)
            new_ops.append(replace(
                op, id=op.id if i == 0 else next_id, kernel=kname,
                global_size=tuple(sympy.Integer(x) for x in gs[:wd]),
                local_size=tuple(sympy.Integer(x) for x in ls[:wd]), args=args,
                global_offset=None))
            if i:
                next_id += 1
    used = {op.kernel for op in new_ops if isinstance(op, Launch)}
    kernels = {n: k for n, k in kernels.items() if n in used}
    newp = replace(program, kernels=kernels, ops=tuple(new_ops),
                   name=f"{program.name}-coarsened")
    return CoarsenedProgram(newp, program, tuple(infos), source, dict(params))

