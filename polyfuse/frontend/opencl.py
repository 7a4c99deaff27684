"""OpenCL C kernels → :class:`~polyfuse.core.program.Kernel` records with isl domains and accesses.

Conventions (see also :mod:`polyfuse.core.program`):

* A statement ``S<n>`` (n = textual index of the leaf statement in the kernel) runs at
  ``S<n>[g0, g1, g2, l0, l1, l2, k...]``; ``k`` are the enclosing loops' iterators, named by their
  C names (uniquified with a ``_<n>`` suffix when a name is reused in the same nest or clashes with
  a work-item dimension or a parameter).  ``while``/``do`` loops and ``for`` loops whose iterator
  cannot be identified get an iteration counter ``_w<n>`` (``>= 0``).  Barriers are ``B<n>``.
* Counted ``for`` loops with an affine step bound their dimension by the (affine) init and
  condition.  A ``for`` loop whose value sequence folds to constants (init, condition and update
  constant once the iterator is: ``for (s = 32; s > 0; s >>= 1)``, ``s *= 2``, ``s = s / 2``,
  known local sizes and scalar values substituted) is *enumerated*: its dimension is the
  iterator's value, restricted to the visited values (``s = 32 or s = 16 or ...``, at most 64
  values; more, or anything that does not fold, falls back to a ``_w<n>`` counter).
* Work-item constraints per dimension ``d`` used by the kernel: ``0 <= l_d < L_d`` and
  ``0 <= L_d*g_d + l_d < G_d`` (``G_d mod L_d = 0`` when ``L_d`` is known and ``G_d`` is not).
  Dimensions the kernel does not use are pinned to 0 unless the context gives their global size.
  A dimension whose local size is unknown and whose grouping the kernel never observes (no
  ``get_local_id``/``get_group_id``/``get_local_size``/``get_num_groups`` on it, no barrier) is
  modelled with unit groups: ``L_d = 1``, ``l_d = 0``, ``g_d`` = global id (noted in ``notes``).
* ``Kernel.schedule`` maps ``S<n>[g, l, k]`` to ``[q0, k1, q1, ..., kd, qd, 0...]`` (2d+1 textual
  schedule of one work-item, padded with zeros to the deepest nest).  The g/l dimensions do not
  appear in the range: the schedule orders the instances of one work-item only.  The coordinate
  of an enumerated loop is its dimension when the values increase, its negation when they
  decrease (``s = 32, 16, ...`` is scheduled at ``-s``), and the iteration index otherwise.
* A may-access (``exact=False``) maps each instance to every element it may touch: the whole
  array (``a[o] : o >= 0``, or the declared extent of a local/private array) for non-affine
  subscripts and unknown calls, or the affine relation under a domain that is over-approximated
  (non-affine conditions, ``while`` loops, ``break``/``continue``, atomics).  ``reason`` says which.
* A pointer variable points into the buffer its initialiser, or else its first assignment,
  gives (at a known offset or anywhere in it).  An access through a ``__global``/``__local``/
  ``__constant`` pointer polyfuse cannot place (chosen by a condition, ``c ? a : b``) is
  refused, never dropped.
* Integer arithmetic is modelled over the mathematical integers (no wrap-around of ``uint`` or
  ``size_t``); ``/`` and ``%`` follow C's truncation.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Optional

import islpy as isl
from pycparser import c_ast

from polyfuse.c import preprocessor, printer, syntax, types
from polyfuse.core.islutil import coalesce
from polyfuse.core.program import (
    GLOBAL_OFFSET_PARAMS,
    GLOBAL_SIZE_PARAMS,
    LOCAL_SIZE_PARAMS,
    WORK_ITEM_DIMS,
    WORK_ITEM_FUNCTIONS,
    Access,
    ArrayDecl,
    Barrier,
    Kernel,
    KernelContext,
    KernelParam,
    PolyfuseError,
    Statement,
    UnsupportedError,
)
from polyfuse.frontend.affine import AffineExtractor, Array, NonAffine, State, Var

__all__ = ["parse_kernels", "extract_kernel", "specialize", "KernelContext"]

_FENCES = {1: "local", 2: "global", 4: "image"}
#: the words of a kernel's note about a call the model keeps opaque (its arrays read and written
#: entirely): dependences stay sound, but the call's own work is not in any count
NOT_INLINED = "which polyfuse does not inline"

_BARRIERS = {"barrier", "work_group_barrier"}
_FENCE_ONLY = {"mem_fence", "read_mem_fence", "write_mem_fence"}
_GROUPING_FUNCS = {"get_local_id", "get_group_id", "get_local_size", "get_num_groups"}
#: most values a loop whose trip sequence folds to constants is enumerated with (more: the
#: loop is over-approximated like a ``while`` loop)
_MAX_ENUMERATED = 64

_NO_CONTEXT = KernelContext()

#: statement schedules by their isl text: one kernel's text is extracted several times in a
#: session (each kernel form, the fused kernel before and after its optimizations, ...), and
#: parsing isl text is most of building a schedule of hundreds of statements; isl objects are
#: immutable, so one parsed map serves every extraction
_SCHEDULE_MAPS: dict[str, isl.Map] = {}
_SCHEDULE_MAPS_MAX = 50_000


def _schedule_map(text: str) -> isl.Map:
    """``isl.Map(text)``, parsed once per text."""
    m = _SCHEDULE_MAPS.get(text)
    if m is None:
        if len(_SCHEDULE_MAPS) >= _SCHEDULE_MAPS_MAX:
            _SCHEDULE_MAPS.clear()
        m = _SCHEDULE_MAPS[text] = isl.Map(text)
    return m

# ----------------------------------------------------------------------------------------------
# Variables and arrays seen while walking a kernel
# ----------------------------------------------------------------------------------------------


@dataclass
class _Raw:
    """An access before the statement's tuple name is known."""

    array: Array
    direction: str
    relation: isl.Map
    exact: bool
    reason: Optional[str]
    node: Any


@dataclass
class _Entry:
    kind: str  # "stmt" | "barrier"
    sid: str
    dom: isl.Set
    order: tuple[int, ...]
    loops: tuple[str, ...]
    record: Any = None
    sched: tuple[tuple[str, str], ...] = ()


@dataclass
class _Pointer:
    array: Optional[Array]
    offset: Optional[isl.PwAff]  # in base elements; None: unknown
    unit: int = 1
    why: str = ""


# ----------------------------------------------------------------------------------------------
# The extractor
# ----------------------------------------------------------------------------------------------


class _Extractor(AffineExtractor):
    """The polyhedral model of one kernel: the expression model of :class:`AffineExtractor` over
    the kernel's work-item space, plus statements, accesses, barriers and schedule."""

    def __init__(self, funcdef: c_ast.FuncDef, context: KernelContext, filename: str,
                 helpers: Mapping[str, c_ast.FuncDef], declarations: tuple[c_ast.Node, ...] = (),
                 struct_sizes: Optional[Mapping[str, int]] = None):
        self.fd = funcdef
        self.name = funcdef.decl.name
        super().__init__((), values=context.value_map, filename=filename,
                         helpers={k: v for k, v in helpers.items() if k != self.name},
                         what=f"kernel {self.name}", struct_sizes=struct_sizes)
        self.file_functions = helpers
        self.declarations = declarations
        self.notes: list[str] = []
        self.entries: list[_Entry] = []
        self.arrays: list[ArrayDecl] = []
        self.nstmt = 0
        self.nbar = 0
        self.nwhile = 0
        self.counters: list[int] = [0]
        self.prefix: list[int] = []
        self.maybe_returned: Optional[str] = None
        self.inline_stack: list[str] = []
        # pointers declared into __global/__local/__constant memory: an access through one
        # that points nowhere polyfuse knows cannot be dropped (it may touch any buffer)
        self.space_pointers: set[str] = set()
        self._check_supported(funcdef.body, set())
        self.uses, self.used_dims = self._scan_uses()
        self.work_dims = max(self.used_dims, default=-1) + 1
        self.has_barrier = self._calls(funcdef.body, _BARRIERS)
        self.tainted = self._taint()
        rq = preprocessor.reqd_work_group_size(funcdef)
        local = list(context.local_size)
        if rq and all(v is None for v in local):
            local = [(rq[d] if d < len(rq) else 1) for d in range(3)]
        self.context = replace(context, local_size=tuple(local))
        self.params_decl = self._params()
        self.scalar_types = {p.name: p.type for p in self.params_decl if not p.pointer}
        self._geometry()
        self.alive = isl.Set.universe(self._space(0))

    # -- errors and notes --------------------------------------------------------------------------

    def note(self, msg: str) -> None:
        if msg not in self.notes:
            self.notes.append(msg)

    # -- pre-scans --------------------------------------------------------------------------------

    def _check_supported(self, node: Any, seen: set[str]) -> None:
        for n in syntax.walk(node):
            if isinstance(n, (c_ast.Goto, c_ast.Label)):
                raise self.error("goto and labels are not supported", n, UnsupportedError)
            if isinstance(n, c_ast.Decl) and _is_function_pointer(n.type):
                raise self.error("function pointers are not supported", n, UnsupportedError)
            if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID):
                callee = n.name.name
                if callee == self.name or callee in seen:
                    raise self.error(f"recursive call to {callee}() is not supported", n,
                                     UnsupportedError)
                if callee in self.helpers:
                    self._check_supported(self.helpers[callee].body, seen | {callee})
            if isinstance(n, c_ast.FuncCall) and not isinstance(n.name, c_ast.ID):
                raise self.error("calls through function pointers are not supported", n,
                                 UnsupportedError)

    def _bodies(self) -> list[Any]:
        bodies = [self.fd.body]
        todo = [self.fd.body]
        seen: set[str] = set()
        while todo:
            b = todo.pop()
            for n in syntax.walk(b):
                if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID):
                    c = n.name.name
                    if c in self.helpers and c not in seen:
                        seen.add(c)
                        bodies.append(self.helpers[c].body)
                        todo.append(self.helpers[c].body)
        return bodies

    def _scan_uses(self) -> tuple[frozenset[str], dict[int, set[str]]]:
        uses: set[str] = set()
        dims: dict[int, set[str]] = {}
        for body in self._bodies():
            for n in syntax.walk(body):
                if not (isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID)):
                    continue
                f = n.name.name
                if f not in WORK_ITEM_FUNCTIONS:
                    continue
                uses.add(f)
                if f == "get_work_dim":
                    continue
                args = n.args.exprs if n.args else []
                if len(args) != 1:
                    raise self.error(f"{f}() takes one argument", n)
                d = syntax.const_int(args[0])
                if d is None:
                    raise self.error(f"{f}() with a non-constant dimension is not supported", n,
                                     UnsupportedError)
                if not 0 <= d <= 2:
                    raise self.error(f"{f}({d}): work-item dimension out of range 0..2", n)
                dims.setdefault(d, set()).add(f)
        return frozenset(uses), dims

    def _taint(self) -> set[str]:
        """Variables whose value may differ between work-items of a group (flow-insensitive)."""
        assigns: list[tuple[str, Any]] = []
        for body in self._bodies():
            for n in syntax.walk(body):
                if isinstance(n, c_ast.Decl) and n.init is not None and n.name:
                    assigns.append((n.name, n.init))
                elif isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID):
                    assigns.append((n.lvalue.name, n.rvalue))
        tainted: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, expr in assigns:
                if name not in tainted and self._divergent_expr(expr, tainted):
                    tainted.add(name)
                    changed = True
        return tainted

    def _divergent_expr(self, expr: Any, tainted: Optional[set[str]] = None) -> bool:
        """May ``expr`` differ between the work-items of one group?"""
        tainted = self.tainted if tainted is None else tainted
        for n in syntax.walk(expr):
            if isinstance(n, c_ast.ID) and n.name in tainted:
                return True
            if isinstance(n, (c_ast.ArrayRef, c_ast.StructRef)) or (
                    isinstance(n, c_ast.UnaryOp) and n.op == "*"):
                return True
            if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID):
                f = n.name.name
                if f in ("get_local_id", "get_global_id") or f.startswith(("atomic_", "atom_")):
                    return True
                if f in self.helpers and self._calls_divergent(self.helpers[f]):
                    return True
        return False

    def _calls_divergent(self, fd: c_ast.FuncDef) -> bool:
        return any(isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID)
                   and n.name.name in ("get_local_id", "get_global_id")
                   for n in syntax.walk(fd.body))

    def _calls(self, node: Any, names: set[str]) -> bool:
        return any(
            isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and n.name.name in names
            for body in self._bodies() for n in syntax.walk(body)
        ) if node is not None else False

    # -- parameters and geometry -------------------------------------------------------------------

    def _params(self) -> tuple[KernelParam, ...]:
        out = []
        args = self.fd.decl.type.args
        for i, p in enumerate(args.params if args else []):
            if isinstance(p, c_ast.EllipsisParam):
                raise self.error("variadic kernels are not supported", p, UnsupportedError)
            if isinstance(p.type, c_ast.TypeDecl) and types.type_name(p.type) == "void" \
                    and not p.name:
                continue
            pointer = isinstance(p.type, (c_ast.PtrDecl, c_ast.ArrayDecl))
            space = preprocessor.address_space_of(p) or "private"
            quals = list(p.quals or [])
            t = p.type
            while not isinstance(t, c_ast.TypeDecl):
                t = t.type
            quals += list(t.quals or [])
            out.append(KernelParam(p.name, i, types.type_name(p.type), pointer, space,
                                   "const" in quals))
        return tuple(out)

    def _geometry(self) -> None:
        """Decide L_d/G_d per dimension and the isl parameters of the kernel."""
        ctx = self.context
        self.L: list[Any] = [None, None, None]  # int, or param name
        self.G: list[Any] = [None, None, None]
        self.unit = [False, False, False]
        self.pinned = [False, False, False]
        self.O: list[Any] = [0, 0, 0]  # global offset: int, or param name
        geo_params: list[str] = []
        for d in range(3):
            used = d < self.work_dims
            if not used and ctx.global_size[d] is None:
                self.pinned[d] = True
                continue
            self.G[d] = ctx.global_size[d] if ctx.global_size[d] is not None \
                else GLOBAL_SIZE_PARAMS[d]
            if ctx.global_offset[d] is None and used:
                self.O[d] = GLOBAL_OFFSET_PARAMS[d]
                geo_params.append(self.O[d])
            elif used:
                self.O[d] = ctx.global_offset[d]
            if ctx.local_size[d] is not None:
                self.L[d] = ctx.local_size[d]
            elif not (self.used_dims.get(d, set()) & _GROUPING_FUNCS) and not self.has_barrier:
                self.L[d] = 1
                self.unit[d] = True
                if used:
                    self.note(f"dimension {d}: local size unknown and unobserved by the kernel; "
                              f"modelled with unit work-groups (l{d} = 0, g{d} = global id)")
            else:
                self.L[d] = LOCAL_SIZE_PARAMS[d]
            if isinstance(self.L[d], int) and self.L[d] <= 0:
                raise self.error(f"local work size {self.L[d]} in dimension {d}: a work-group "
                                 "needs at least one work-item", self.fd.decl)
            if isinstance(self.G[d], int) and self.G[d] <= 0:
                raise self.error(f"global work size {self.G[d]} in dimension {d}: a launch "
                                 "needs at least one work-item", self.fd.decl)
            if isinstance(self.G[d], str):
                geo_params.append(self.G[d])
            if isinstance(self.L[d], str):
                geo_params.append(self.L[d])
            if isinstance(self.L[d], int) and isinstance(self.G[d], int) \
                    and self.G[d] % self.L[d] != 0:
                raise self.error(f"global size {self.G[d]} is not a multiple of the local size "
                                 f"{self.L[d]} in dimension {d}", self.fd.decl)
        scal = [p.name for p in self.params_decl
                if not p.pointer and types.is_integer(p.type) and p.name not in self.values]
        self.param_names = scal + geo_params
        self.ctx = isl.DEFAULT_CONTEXT
        self.reserved = set(WORK_ITEM_DIMS) | set(self.param_names)

    def _space(self, depth: int, loops: Optional[list[str]] = None) -> isl.Space:
        names = list(WORK_ITEM_DIMS) + list(loops if loops is not None else
                                            [f"_k{i}" for i in range(depth)])
        return isl.Space.create_from_names(self.ctx, set=names, params=self.param_names)

    def _work_item_domain(self) -> tuple[isl.Set, bool]:
        """The work-item constraints over the 6 g/l dims; False when relaxed (unknown L, G)."""
        cons = []
        exact = True
        for d in range(3):
            g, ll = f"g{d}", f"l{d}"
            if self.pinned[d]:
                cons += [f"{g} = 0", f"{ll} = 0"]
                continue
            L, G = self.L[d], self.G[d]
            cons += [f"0 <= {ll} < {L}", f"{g} >= 0"]
            if isinstance(L, int):
                cons.append(f"{L}*{g} + {ll} < {G}")
                if isinstance(G, str) and L > 1:
                    cons.append(f"{G} mod {L} = 0")
            else:
                exact = False
                cons += [f"{g} < {G}", f"{ll} < {G}", f"{L} >= 1"]
        params = ", ".join(self.param_names)
        dims = ", ".join(WORK_ITEM_DIMS)
        s = isl.Set(f"[{params}] -> {{ [{dims}] : {' and '.join(cons)} }}")
        return s, exact

    # -- arrays and pointers -----------------------------------------------------------------------

    def pointer(self, node: Any, st: State) -> _Pointer:
        """What a pointer-valued expression points into."""
        if isinstance(node, c_ast.ID):
            var = st.env.get(node.name)
            if var is None or var.kind not in ("ptr", "array"):
                return _Pointer(None, None, why=f"{node.name} is not a known pointer")
            if var.kind == "array":
                return _Pointer(var.array, self.const(st, 0))
            off = self._lift(st, var.offset) if var.offset is not None else None
            return _Pointer(var.array, off, var.unit, var.why)
        if isinstance(node, c_ast.Cast):
            inner = self.pointer(node.expr, st)
            to = node.to_type.type
            if not isinstance(to, c_ast.PtrDecl) or inner.array is None:
                return inner
            new = types.type_name(to.type)
            old_sz = self.type_size(inner.array.dtype)
            new_sz = self.type_size(new)
            if new == inner.array.dtype:
                return inner
            if old_sz and new_sz and new_sz % old_sz == 0:
                if inner.unit != 1 and inner.offset is not None:
                    return _Pointer(inner.array, inner.offset, new_sz // old_sz, inner.why)
                return _Pointer(inner.array, inner.offset, new_sz // old_sz, inner.why)
            return _Pointer(inner.array, None, 1, f"cast of {inner.array.name} to {new} *")
        if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-"):
            left, right = node.left, node.right
            base = self.pointer(left, st)
            if base.array is None and node.op == "+":
                base, right = self.pointer(right, st), left
            if base.array is None:
                return base
            if base.offset is None:
                return base
            try:
                k = self.aff(right, st)
            except NonAffine as e:
                return _Pointer(base.array, None, base.unit, f"pointer offset: {e.reason}")
            k = k.scale_val(isl.Val(base.unit)) if base.unit != 1 else k
            return _Pointer(base.array, base.offset.add(k) if node.op == "+"
                            else base.offset.sub(k), base.unit, base.why)
        if isinstance(node, c_ast.UnaryOp) and node.op == "&":
            e = node.expr
            if isinstance(e, c_ast.ArrayRef):
                base, subs = syntax.flatten_ref(e)
                p = self.pointer(base, st)
                if p.array is None:
                    return p
                if len(subs) == 1 and p.offset is not None and not p.array.shape:
                    try:
                        k = self.aff(subs[0], st)
                    except NonAffine as err:
                        return _Pointer(p.array, None, p.unit, f"subscript: {err.reason}")
                    k = k.scale_val(isl.Val(p.unit)) if p.unit != 1 else k
                    return _Pointer(p.array, p.offset.add(k), p.unit, p.why)
                if p.array.shape and len(subs) == len(p.array.shape) and len(subs) == 1:
                    try:
                        return _Pointer(p.array, self.aff(subs[0], st))
                    except NonAffine as err:
                        return _Pointer(p.array, None, 1, f"subscript: {err.reason}")
                return _Pointer(p.array, None, 1, f"address {printer.opencl_source(node)}")
            if isinstance(e, c_ast.ID):
                return self.pointer(e, st)
        if isinstance(node, c_ast.ArrayRef):
            base, subs = syntax.flatten_ref(node)
            p = self.pointer(base, st)
            if p.array is not None and p.array.shape and len(subs) < len(p.array.shape):
                return _Pointer(p.array, None, 1,
                                f"row {printer.opencl_source(node)} of {p.array.name}")
        return _Pointer(None, None, why=f"{printer.opencl_source(node)} is not a known pointer")

    def _whole(self, arr: Array, st: State, dom: isl.Set) -> isl.Map:
        params = ", ".join(self.param_names)
        if arr.shape:
            outs = [f"o{i}" for i in range(len(arr.shape))]
            cons = " and ".join(f"0 <= o{i} < {n}" for i, n in enumerate(arr.shape))
        else:
            outs, cons = ["o0"], "o0 >= 0"
        rng = isl.Set(f"[{params}] -> {{ {arr.name}[{', '.join(outs)}] : {cons} }}")
        return isl.Map.from_domain_and_range(dom, rng)

    def _element(self, arr: Array, idx: list[isl.PwAff], dom: isl.Set, width: int = 1) -> isl.Map:
        m = isl.Map.from_pw_aff(idx[0])
        for k in idx[1:]:
            m = m.flat_range_product(isl.Map.from_pw_aff(k))
        if width > 1:
            params = ", ".join(self.param_names)
            m = m.apply_range(isl.Map(f"[{params}] -> {{ [x] -> [y] : x <= y < x + {width} }}"))
        m = m.intersect_domain(dom)
        return m.set_tuple_name(isl.dim_type.out, arr.name)

    # -- collecting accesses -----------------------------------------------------------------------

    def accesses(self, node: Any, st: State, out: list[_Raw], guard: isl.Set,
                 gexact: bool = True, greason: Optional[str] = None, write: bool = False,
                 read: bool = True, partial: bool = False) -> None:
        """Append the memory accesses of an expression (reads, or a write when ``write``)."""
        rec = lambda n, **kw: self.accesses(n, st, out, guard, gexact, greason, **kw)
        if node is None or isinstance(node, (c_ast.Constant, c_ast.ID, c_ast.Typename)):
            return
        if isinstance(node, (c_ast.ArrayRef,)) or (isinstance(node, c_ast.UnaryOp)
                                                    and node.op == "*"):
            if isinstance(node, c_ast.ArrayRef):
                base, subs = syntax.flatten_ref(node)
            else:
                base, subs = node.expr, []
            for s in subs:
                rec(s)
            if not isinstance(base, c_ast.ID):
                rec(base)
            self._ref(base, subs, st, out, guard, gexact, greason, write, read, partial, node)
            return
        if isinstance(node, c_ast.StructRef):
            if node.type == "->":
                self._ref(node.name, [], st, out, guard, gexact, greason, write, read, True, node)
                rec(node.name) if not isinstance(node.name, c_ast.ID) else None
            else:
                rec(node.name, write=write, read=read, partial=True)
            return
        if isinstance(node, c_ast.Assignment):
            rec(node.rvalue)
            rec(node.lvalue, write=True, read=node.op != "=")
            return
        if isinstance(node, c_ast.UnaryOp):
            if node.op in ("++", "--", "p++", "p--"):
                rec(node.expr, write=True, read=True)
            elif node.op == "&":
                e = node.expr
                if isinstance(e, c_ast.ArrayRef):
                    for s in syntax.flatten_ref(e)[1]:
                        rec(s)
                else:
                    rec(e) if not isinstance(e, c_ast.ID) else None
            elif node.op != "sizeof":
                rec(node.expr)
            return
        if isinstance(node, c_ast.Cast):
            rec(node.expr)
            return
        if isinstance(node, c_ast.TernaryOp) or (isinstance(node, c_ast.BinaryOp)
                                                 and node.op in ("&&", "||")):
            cnode = node.cond if isinstance(node, c_ast.TernaryOp) else node.left
            rec(cnode)
            try:
                c = self.cond(cnode, st)
                ex, why = gexact, greason
            except NonAffine as e:
                c = self._universe(st)
                ex, why = False, greason or (f"under condition {printer.opencl_source(cnode)}: "
                                             f"{e.reason}")
            if isinstance(node, c_ast.TernaryOp):
                self.accesses(node.iftrue, st, out, guard.intersect(c), ex, why)
                self.accesses(node.iffalse, st, out,
                              guard.intersect(c.complement()) if ex else guard, ex, why)
            else:
                g2 = c if node.op == "&&" else (c.complement() if ex else self._universe(st))
                self.accesses(node.right, st, out, guard.intersect(g2), ex, why)
            return
        if isinstance(node, c_ast.FuncCall):
            self._call_accesses(node, st, out, guard, gexact, greason)
            return
        for _, child in node.children():
            rec(child)

    def _ref(self, base: Any, subs: list, st: State, out: list[_Raw], guard: isl.Set,
             gexact: bool, greason: Optional[str], write: bool, read: bool, partial: bool,
             node: Any) -> None:
        p = self.pointer(base, st)
        if p.array is None:
            if isinstance(base, c_ast.ID) and base.name in self.space_pointers:
                raise self.error(f"access through pointer '{base.name}', which polyfuse cannot "
                                 f"tell the buffer of ({p.why})", node, UnsupportedError)
            return
        arr = p.array
        dom = st.dom.intersect(guard)
        exact, reason = gexact, greason
        rel = None
        try:
            if arr.shape:
                if p.offset is None or len(subs) != len(arr.shape) or self._cst(p.offset) != 0:
                    raise NonAffine(p.why or f"partial subscript of {arr.name}")
                rel = self._element(arr, [self.aff(s, st) for s in subs], dom)
            else:
                if p.offset is None:
                    raise NonAffine(p.why or f"pointer into {arr.name} is not affine")
                if len(subs) > 1:
                    raise NonAffine(f"multi-dimensional subscript of pointer {arr.name}")
                k = self.aff(subs[0], st) if subs else self.const(st, 0)
                if p.unit != 1:
                    k = k.scale_val(isl.Val(p.unit))
                rel = self._element(arr, [p.offset.add(k)], dom, p.unit)
        except NonAffine as e:
            exact = False
            sub = ", ".join(printer.opencl_source(s) for s in subs)
            reason = f"subscript {arr.name}[{sub}]: {e.reason}" if subs else e.reason
            rel = self._whole(arr, st, dom)
        if partial and write:
            exact, reason = False, reason or f"writes part of an element of {arr.name}"
        if read:
            out.append(_Raw(arr, "read", rel, exact, reason, node))
        if write:
            out.append(_Raw(arr, "write", rel, exact, reason, node))

    def _call_accesses(self, node: c_ast.FuncCall, st: State, out: list[_Raw], guard: isl.Set,
                       gexact: bool, greason: Optional[str]) -> None:
        f = node.name.name
        args = node.args.exprs if node.args else []
        rec = lambda n, **kw: self.accesses(n, st, out, guard, gexact, greason, **kw)
        dom = st.dom.intersect(guard)
        m = re.fullmatch(r"v(load|store)(2|3|4|8|16)", f)
        if m:
            n = int(m.group(2))
            vals = args[:-2] if m.group(1) == "load" else args[:1]
            for a in vals:
                rec(a)
            off_node = args[-2]
            rec(off_node)
            p = self.pointer(args[-1], st)
            if p.array is None:
                return
            direction = "read" if m.group(1) == "load" else "write"
            try:
                if p.offset is None or p.unit != 1 or p.array.shape:
                    raise NonAffine(p.why or f"{f}() pointer into {p.array.name}")
                k = self.aff(off_node, st).scale_val(isl.Val(n))
                rel = self._element(p.array, [p.offset.add(k)], dom, n)
                out.append(_Raw(p.array, direction, rel, gexact, greason, node))
            except NonAffine as e:
                out.append(_Raw(p.array, direction, self._whole(p.array, st, dom), False,
                                f"{f}(): {e.reason}", node))
            return
        if f.startswith(("atomic_", "atom_")) and args:
            for a in args[1:]:
                rec(a)
            target = args[0]
            if isinstance(target, c_ast.UnaryOp) and target.op == "&" and isinstance(
                    target.expr, c_ast.ArrayRef):
                for s in syntax.flatten_ref(target.expr)[1]:
                    rec(s)
            self.note(f"{f}() is modelled as a read and write (may) of its target")
            raw: list[_Raw] = []
            tnode = target.expr if isinstance(target, c_ast.UnaryOp) and target.op == "&" \
                else c_ast.UnaryOp("*", target, target.coord)
            tmp: list[_Raw] = []
            if isinstance(tnode, c_ast.ArrayRef):
                b, subs = syntax.flatten_ref(tnode)
                self._ref(b, subs, st, tmp, guard, gexact, greason, True, True, False, node)
            else:
                self._ref(tnode.expr, [], st, tmp, guard, gexact, greason, True, True, False,
                          node)
            for r in tmp:
                raw.append(replace(r, exact=False, reason=r.reason or f"atomic {f}()"))
            out.extend(raw)
            return
        if f in WORK_ITEM_FUNCTIONS or f in _BARRIERS or f in _FENCE_ONLY:
            return
        inl = self._inline(node)
        if inl is not None:
            if f in self.inline_stack:
                raise self.error(f"recursive call to {f}() is not supported", node,
                                 UnsupportedError)
            self.inline_stack.append(f)
            try:
                rec(inl)
            finally:
                self.inline_stack.pop()
            return
        for a in args:
            p = self.pointer(a, st) if _may_be_pointer(a, st) else _Pointer(None, None)
            if p.array is None:
                rec(a)
                continue
            if isinstance(a, c_ast.UnaryOp) and a.op == "&" and isinstance(a.expr,
                                                                            c_ast.ArrayRef):
                for s in syntax.flatten_ref(a.expr)[1]:
                    rec(s)
            why = (f"{p.array.name} is passed to {f}(), {NOT_INLINED}: "
                   "read and written entirely (may)")
            self.note(why)
            rel = self._whole(p.array, st, dom)
            out.append(_Raw(p.array, "read", rel, False, why, node))
            out.append(_Raw(p.array, "write", rel, False, why, node))

    # -- statements --------------------------------------------------------------------------------

    def run(self) -> Kernel:
        wi, wi_exact = self._work_item_domain()
        st = State([], wi, {}, True, None)
        if not wi_exact:
            st.exact = False
            st.reason = "local size unknown: the work-item domain is relaxed"
            self.note("local size unknown in a dimension whose grouping the kernel observes: "
                      "the work-item domain is over-approximated (counts are upper bounds); give "
                      "the local size (--param _ls0=..., --host, or specialize()) for an exact "
                      "model")
        self.wi = wi
        self.depth_max = 0
        for p in self.params_decl:
            if p.pointer:
                st.env[p.name] = Var("ptr", array=Array(p.name, p.address_space, p.type),
                                      offset=(isl.PwAff.val_on_domain(
                                          isl.Set.universe(self._space(0)), 0), 0))
            elif types.is_integer(p.type):
                st.env.pop(p.name, None)
            else:
                st.env[p.name] = Var("other", why=f"{p.name} is a {p.type}")
        self.block(self.fd.body, st)
        return self._build()

    def _next_order(self) -> tuple[int, ...]:
        p = self.counters[-1]
        self.counters[-1] += 1
        return tuple(self.prefix) + (p,)

    def _domain(self, st: State) -> tuple[isl.Set, bool, Optional[str]]:
        alive = self.alive
        if st.depth:
            alive = alive.add_dims(isl.dim_type.set, st.depth)
        dom = st.dom.intersect(alive)
        if self.maybe_returned:
            return dom, False, st.reason or self.maybe_returned
        return dom, st.exact, st.reason

    def block(self, node: Any, st: State) -> None:
        """Walk a statement; ``st`` is updated in place for following statements."""
        if node is None:
            return
        if isinstance(node, c_ast.Compound):
            inner = st.copy()
            for item in node.block_items or []:
                self.block(item, inner)
            self._merge_back(st, inner)
            return
        if isinstance(node, (c_ast.Decl, c_ast.DeclList)):
            for d in (node.decls if isinstance(node, c_ast.DeclList) else [node]):
                self._decl(d, st)
            return
        if isinstance(node, c_ast.If):
            self._if(node, st)
            return
        if isinstance(node, c_ast.For):
            self._for(node, st)
            return
        if isinstance(node, (c_ast.While, c_ast.DoWhile)):
            self._while(node, st)
            return
        if isinstance(node, c_ast.Return):
            if node.expr is not None:
                self._emit(node.expr, st, node)
            dom, exact, _ = self._domain(st)
            if st.depth == 0 and exact:
                self.alive = self.alive.subtract(dom)
            else:
                self.maybe_returned = f"after a return at line {node.coord.line} that polyfuse " \
                                      "cannot model exactly"
            return
        if isinstance(node, (c_ast.Break, c_ast.Continue)):
            return  # the enclosing loop was marked inexact by the pre-scan
        if isinstance(node, c_ast.Switch):
            self._emit_control(node.cond, st)
            inner = st.copy()
            inner.exact = False
            inner.reason = st.reason or f"under switch at line {node.coord.line}"
            inner.divergent = st.divergent or self._divergent_expr(node.cond)
            self._invalidate(inner, syntax.modified(node.stmt))
            self.block(node.stmt, inner)
            self._invalidate(st, syntax.modified(node.stmt))
            return
        if isinstance(node, (c_ast.Case, c_ast.Default)):
            for s in node.stmts or []:
                self.block(s, st)
            return
        if isinstance(node, (c_ast.EmptyStatement, c_ast.Pragma, c_ast.Typedef,
                             c_ast.StaticAssert)):
            return
        if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID):
            f = node.name.name
            if f in _BARRIERS:
                self._barrier(node, st)
                return
            if f in _FENCE_ONLY:
                self.note(f"{f}() at line {node.coord.line} orders memory within a work-item; "
                          "it is not a barrier")
                return
        if isinstance(node, c_ast.Node) and not isinstance(node, c_ast.FuncDef):
            self._emit(node, st, node)
            self._assign_effects(node, st)
            return
        raise self.error(f"unsupported construct {type(node).__name__}", node, UnsupportedError)

    def _merge_back(self, outer: State, inner: State) -> None:
        for name in list(outer.env):
            if name in inner.env:
                outer.env[name] = inner.env[name]

    def _invalidate(self, st: State, names: Iterable[str]) -> None:
        for name in names:
            var = st.env.get(name)
            if var is None and name in self.param_names:
                st.env[name] = Var("int", why=f"{name} is modified in the kernel")
            elif var is not None and var.kind == "int":
                st.env[name] = Var("int", why=f"{name} is modified under control flow "
                                               "polyfuse does not model")
            elif var is not None and var.kind == "ptr":
                st.env[name] = Var("ptr", array=var.array, offset=None,
                                    why=f"{name} is modified under control flow")

    def _decl(self, d: c_ast.Decl, st: State) -> None:
        if isinstance(d.type, (c_ast.FuncDecl,)) or "typedef" in (d.storage or []):
            return
        space = preprocessor.address_space_of(d)
        if isinstance(d.type, c_ast.ArrayDecl):
            shape = []
            t = d.type
            while isinstance(t, c_ast.ArrayDecl):
                n = None
                if t.dim is not None:
                    try:
                        n = self._cst(self.aff(t.dim, st))
                    except NonAffine:
                        n = None
                elif t is d.type:
                    n = _initializer_length(d.init)
                if n is None:
                    raise self.error(f"array {d.name} needs a constant size", d, UnsupportedError)
                if n <= 0:
                    raise self.error(f"array {d.name} has size {n}", d, UnsupportedError)
                shape.append(n)
                t = t.type
            arr = Array(d.name, space or "private", types.type_name(t), tuple(shape))
            if arr.name not in {a.name for a in self.arrays}:
                self.arrays.append(ArrayDecl(arr.name, arr.dtype, arr.shape, arr.space,
                                             syntax.node_loc(d, self.filename)))
            st.env[d.name] = Var("array", array=arr)
            if d.init is not None:
                self._emit(d, st, d, init_array=arr)
            return
        if isinstance(d.type, c_ast.PtrDecl):
            if space in ("global", "local", "constant"):
                self.space_pointers.add(d.name)
            if d.init is not None:
                self._emit(d.init, st, d)
                p = self.pointer(d.init, st)
                if p.array is not None:
                    st.env[d.name] = Var("ptr", array=p.array,
                                          offset=(p.offset, st.depth) if p.offset is not None
                                          else None, unit=p.unit, why=p.why)
                    return
            # (an assignment may give it its buffer: `p = a + k` after `__global T *p;`)
            st.env[d.name] = Var("ptr", why=f"{d.name} is a pointer polyfuse does not track")
            return
        tname = types.type_name(d.type)
        if types.is_integer(tname):
            ctype = types.normalize(tname)
            var = Var("int", why=f"{d.name} is not initialized", ctype=ctype)
            if d.init is not None:
                self._emit(d.init, st, d)
                try:
                    value = self.aff(d.init, st)
                    self.check_representable(value, types.scalar(ctype), d.init, st)
                    var = Var("int", value=(value, st.depth), ctype=ctype)
                except NonAffine as e:
                    var = Var("int", why=f"{d.name} = {printer.opencl_source(d.init)}: {e.reason}",
                              ctype=ctype)
            st.env[d.name] = var
        else:
            if d.init is not None:
                self._emit(d.init, st, d)
            st.env[d.name] = Var("other", why=f"{d.name} is a {tname}")

    def _assign_effects(self, node: Any, st: State) -> None:
        """Update known scalar values after a statement."""
        if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ID):
            name = node.lvalue.name
            var = st.env.get(name)
            if var is None and name not in self.param_names:
                return
            if var is not None and var.kind == "ptr":
                if node.op == "=":
                    # the first buffer a pointer declared without one is given is its
                    # initialisation; another one later loses its offset
                    p = self.pointer(node.rvalue, st)
                    first = var.array is None and p.array is not None
                    st.env[name] = Var("ptr", array=p.array or var.array,
                                        offset=(p.offset, st.depth) if p.offset is not None
                                        and (p.array is var.array or first) else None,
                                        unit=p.unit, why=p.why or f"{name} is reassigned")
                else:
                    e = c_ast.BinaryOp(node.op[0], c_ast.ID(name), node.rvalue, node.coord)
                    p = self.pointer(e, st)
                    st.env[name] = Var("ptr", array=var.array,
                                        offset=(p.offset, st.depth) if p.offset is not None
                                        else None, unit=var.unit, why=p.why)
                return
            if var is not None and var.kind != "int":
                return
            expr = node.rvalue if node.op == "=" else c_ast.BinaryOp(
                node.op[:-1], c_ast.ID(name), node.rvalue, node.coord)
            ctype = var.ctype if var is not None else self.scalar_types.get(name)
            try:
                value = self.aff(expr, st)
                self.check_representable(value, types.scalar(ctype) if ctype else None,
                                         node.rvalue, st)
                st.env[name] = Var("int", value=(value, st.depth), ctype=ctype)
            except NonAffine as e:
                st.env[name] = Var("int", why=f"{name} = {printer.opencl_source(node.rvalue)}: "
                                               f"{e.reason}", ctype=ctype)
            return
        if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--") \
                and isinstance(node.expr, c_ast.ID):
            op = "+" if "+" in node.op else "-"
            fake = c_ast.Assignment(op + "=", node.expr, c_ast.Constant("int", "1"), node.coord)
            self._assign_effects(fake, st)
            return
        self._invalidate(st, syntax.modified(node))

    def _emit(self, node: Any, st: State, stmt_node: Any,
              init_array: Optional[Array] = None) -> None:
        """Make a Statement for a leaf (if it touches memory or is a full statement)."""
        out: list[_Raw] = []
        universe = self._universe(st)
        if isinstance(node, c_ast.Decl):
            self.accesses(node.init, st, out, universe, st.exact, st.reason)
            if init_array is not None:
                out.append(_Raw(init_array, "write", self._whole(init_array, st, st.dom),
                                st.exact, st.reason, node))
        else:
            self.accesses(node, st, out, universe, st.exact, st.reason)
        if not out and not _has_side_effects(stmt_node) and not isinstance(stmt_node, c_ast.Decl):
            return
        self._add_statement(st, out, stmt_node)

    def _add_statement(self, st: State, out: list[_Raw], stmt_node: Any) -> None:
        sid = f"S{self.nstmt}"
        self.nstmt += 1
        dom, exact, reason = self._domain(st)
        dom = self._name(dom, sid, st)
        accs: list[Access] = []
        for r in out:
            rel = r.relation.intersect_domain(self._unname(dom))
            rel = rel.set_tuple_name(isl.dim_type.in_, sid)
            rel = _name_dims(rel, dom)
            ex = r.exact and exact
            why = r.reason if not r.exact else (None if ex else reason)
            if any(a.array == r.array.name and a.direction == r.direction and a.exact == ex
                   and a.relation.is_equal(rel) for a in accs):
                continue
            accs.append(Access(r.array.name, r.array.space, r.direction, rel, ex, why,
                               syntax.node_loc(r.node, self.filename) or syntax.node_loc(
                                   stmt_node, self.filename), r.array.dtype))
        code = printer.opencl_source(stmt_node)
        if isinstance(stmt_node, c_ast.Decl):
            code = code + ";"
        elif not code.rstrip().endswith(("}", ";")):
            code = code + ";"
        stmt = Statement(sid, dom, tuple(accs), code, syntax.node_loc(stmt_node, self.filename),
                         self._next_order(), exact, stmt_node)
        self.entries.append(_Entry("stmt", sid, dom, stmt.order, tuple(st.loops), stmt,
                                   tuple(st.sched)))

    def _name(self, dom: isl.Set, sid: str, st: State) -> isl.Set:
        dom = dom.set_tuple_name(sid)
        for i, n in enumerate(list(WORK_ITEM_DIMS) + st.loops):
            dom = dom.set_dim_name(isl.dim_type.set, i, n)
        return dom

    def _unname(self, dom: isl.Set) -> isl.Set:
        return dom.reset_tuple_id()

    def _emit_control(self, expr: Any, st: State) -> None:
        """A statement for the memory reads of a control expression (condition, bound)."""
        if expr is None:
            return
        out: list[_Raw] = []
        self.accesses(expr, st, out, self._universe(st), st.exact, st.reason)
        if out:
            self._add_statement(st, out, expr)
        self._invalidate(st, syntax.modified(expr))

    def _if(self, node: c_ast.If, st: State) -> None:
        self._emit_control(node.cond, st)
        try:
            c = self.cond(node.cond, st)
            c_exact, why = True, None
        except NonAffine as e:
            c = self._universe(st)
            c_exact, why = False, f"under condition {printer.opencl_source(node.cond)}: {e.reason}"
        t = st.copy()
        f = st.copy()
        t.dom = st.dom.intersect(c)
        f.dom = st.dom.subtract(c) if c_exact else st.dom
        for b in (t, f):
            if not c_exact:
                b.exact, b.reason = False, st.reason or why
                b.divergent = st.divergent or self._divergent_expr(node.cond)
        self.block(node.iftrue, t)
        self.block(node.iffalse, f)
        for name, var in list(st.env.items()):
            vt, vf = t.env.get(name), f.env.get(name)
            if vt is var and vf is var:
                continue
            if c_exact and vt is not None and vf is not None and vt.kind == vf.kind == "int" \
                    and vt.value is not None and vf.value is not None:
                a, b = self._lift(st, vt.value), self._lift(st, vf.value)
                st.env[name] = Var("int", value=(c.indicator_function().cond(a, b), st.depth))
            else:
                self._invalidate(st, [name])
        for name in syntax.modified(node.iftrue) | syntax.modified(node.iffalse):
            if name not in st.env and name in self.param_names:
                self._invalidate(st, [name])

    def _loop_name(self, cname: str, st: State) -> str:
        name = cname
        k = 1
        while name in self.reserved or name in st.loops or name.startswith("_w"):
            name = f"{cname}_{k}"
            k += 1
        return name

    def _enter(self, st: State, name: str) -> State:
        inner = st.copy()
        inner.loops.append(name)
        inner.sched.append((name, ""))
        inner.dom = st.dom.add_dims(isl.dim_type.set, 1).set_dim_name(
            isl.dim_type.set, 6 + st.depth, name)
        self.depth_max = max(self.depth_max, inner.depth)
        p = self.counters[-1]
        self.counters[-1] += 1
        self.prefix.append(p)
        self.counters.append(0)
        return inner

    def _leave(self) -> None:
        self.prefix.pop()
        self.counters.pop()

    def _constant_step(self, node: c_ast.For, it: str, st: State, body_mod: set[str]
                       ) -> Optional[int]:
        """The step of ``it`` when the update adds an expression that is one constant at this
        launch though not a literal: a grid-stride loop's ``i += get_global_size(0)`` (or a
        variable holding it) once the launch's sizes are known, a scalar argument of known
        value.  None otherwise (nothing it reads may change in the body)."""
        nxt = _update_expr(node.next, it)  # it + s, it - s or s + it
        incr, sign = None, 1
        if isinstance(nxt, c_ast.BinaryOp) and nxt.op in ("+", "-"):
            if isinstance(nxt.left, c_ast.ID) and nxt.left.name == it:
                incr, sign = nxt.right, (1 if nxt.op == "+" else -1)
            elif nxt.op == "+" and isinstance(nxt.right, c_ast.ID) and nxt.right.name == it:
                incr = nxt.left
        if incr is None or it in syntax.free_ids(incr) or syntax.free_ids(incr) & body_mod:
            return None
        try:
            pw = self.aff(incr, st)
        except NonAffine:
            return None
        pieces = pw.get_pieces()
        if len(pieces) != 1 or not pieces[0][1].is_cst() \
                or not pw.domain().is_equal(isl.Set.universe(pw.domain().get_space())):
            return None
        value = pieces[0][1].get_constant_val()
        if not value.is_int():
            return None
        step = sign * int(value.to_python())
        return step or None

    def _for(self, node: c_ast.For, st: State) -> None:
        it, lb_node, step = syntax.loop_shape(node)
        if it is None and node.init is None:
            # ``for (; i < n; i += s)``: the loop starts from the value ``i`` has
            it = _updated(node.next)
            if it is not None and it in st.env and st.env[it].kind == "int":
                lb_node = c_ast.ID(it, node.coord)
                step = syntax.counted_step(node, it) or None
            else:
                it = None
        body_mod = syntax.modified(node.stmt)
        escapes = syntax.escapes(node.stmt)
        if it is not None and it not in body_mod and syntax.counted_step(node, it) == 0:
            self._refuse_endless(node, it, lb_node, st)
        if it is not None and step is None and it not in body_mod:
            step = self._constant_step(node, it, st, body_mod)
        seq = None
        if it is not None and step is None and it not in body_mod:
            seq = self._sequence(node, it, lb_node, st, body_mod)
        if it is None or (step is None and seq is None) or it in body_mod:
            if node.init is not None:
                self.block(node.init, st)
            why = f"for loop at line {node.coord.line} is not a counted loop with constant step"
            self._generic_loop(node, st, why, node.cond, node.next)
            return
        self._emit_control(lb_node, st)
        if isinstance(node.init, c_ast.DeclList):
            st.env[it] = Var("int", why=f"{it} is a loop iterator")
        name = self._loop_name(it, st)
        self._invalidate(st, body_mod)
        inner = self._enter(st, name)
        pos = 6 + st.depth
        iv = self.dim(inner, pos)
        declared = node.init.decls[0].type if isinstance(node.init, c_ast.DeclList) else None
        previous = st.env.get(it)
        inner.env[it] = Var("int", dim=pos, ctype=types.normalize(types.type_name(declared))
                            if declared is not None else previous.ctype if previous is not None
                            else self.scalar_types.get(it))
        problems = []
        if seq is not None:
            self._enumerated(inner, pos, seq)
        else:
            assert step is not None
            try:
                lb = self.aff(lb_node, st).add_dims(isl.dim_type.in_, 1)
                if step > 0:
                    inner.dom = inner.dom.intersect(iv.ge_set(lb))
                else:
                    inner.dom = inner.dom.intersect(iv.le_set(lb))
                if abs(step) > 1:
                    inner.dom = inner.dom.intersect(
                        iv.sub(lb).mod_val(isl.Val(abs(step))).eq_set(self.const(inner, 0)))
            except NonAffine as e:
                problems.append(f"lower bound {printer.opencl_source(lb_node)}: {e.reason}")
        cst = inner.copy()
        cst.exact, cst.reason = False, st.reason or "reads of a loop condition (evaluated once " \
            "more than the body runs; over-approximated)"
        self._emit_control(node.cond, cst)
        if seq is None and step is not None and node.cond is not None:
            cnode = _ne_to_bound(node.cond, it, step)
            try:
                cset = self.cond(cnode, inner, check=False)
                if not self.monotone(cset, inner, pos, step):
                    problems.append(f"condition {printer.opencl_source(node.cond)} is not a bound "
                                    f"on {it}")
                else:
                    inner.dom = inner.dom.intersect(cset)
            except NonAffine as e:
                problems.append(f"condition {printer.opencl_source(node.cond)}: {e.reason}")
            if problems:
                # a constant-step loop whose bounds are not affine (``i * i < 64``): still exact
                # when its value sequence folds to constants
                seq = self._sequence(node, it, lb_node, st, body_mod)
                if seq is not None:
                    self._enumerated(inner, pos, seq)
                    problems = []
        if escapes:
            problems.append(f"the loop at line {node.coord.line} contains {escapes}")
        if problems:
            inner.exact = False
            inner.reason = st.reason or problems[0]
            inner.divergent = st.divergent or self._divergent_expr(node.cond) or \
                self._divergent_expr(lb_node) or bool(escapes)
        self.block(node.stmt, inner)
        self._leave()
        self._invalidate(st, body_mod | {it})
        if escapes and "return" in escapes:
            self.maybe_returned = self.maybe_returned or \
                f"after a loop at line {node.coord.line} that may return"

    def _refuse_endless(self, node: c_ast.For, it: str, lb_node: Any, st: State) -> None:
        """Refuse a loop whose step is 0 and whose condition holds on entry whenever the kernel
        runs: its work-items never finish, so the program (and its verification) would hang."""
        if node.cond is None or not st.exact or st.divergent:
            return
        entry = st.copy()
        try:
            entry.env[it] = Var("int", value=(self.aff(lb_node, st), st.depth))
            runs = self.cond(node.cond, entry, check=False).intersect(st.dom)
        except NonAffine:
            return
        if not runs.is_empty() and st.dom.params().is_subset(runs.params()):
            raise self.error(f"the loop over {it} steps by 0 and its condition "
                             f"{printer.opencl_source(node.cond)} holds on entry: it never ends",
                             node,
                             UnsupportedError)

    def _sequence(self, node: c_ast.For, it: str, lb_node: Any, st: State,
                  body_mod: set[str]) -> Optional[list[int]]:
        """The values ``it`` takes in a loop whose trip sequence folds to constants, or None.

        Init, condition and update are evaluated with the iterator bound to each successive
        constant (other variables as known before the loop; those the body modifies unknown).
        The condition must hold on every instance of the enclosing domain or on none (so the
        sequence is the same for every work-item); more than :data:`_MAX_ENUMERATED` values, a
        value that does not fold, or a non-integer iterator give None.
        """
        if node.cond is None or node.next is None or not self._int_iterator(node, it, st):
            return None
        upd = _update_expr(node.next, it)
        if upd is None:
            return None
        probe = st.copy()
        self._invalidate(probe, body_mod)
        try:
            v = self._cst(self.aff(lb_node, probe))
            seq: list[int] = []
            while v is not None and abs(v) < 2 ** 62:
                probe.env[it] = Var("int", value=(self.const(probe, v), probe.depth))
                c = self.cond(node.cond, probe)
                if probe.dom.intersect(c).is_empty():
                    return seq
                if not probe.dom.is_subset(c) or len(seq) >= _MAX_ENUMERATED:
                    return None
                seq.append(v)
                v = self._cst(self.aff(upd, probe))
        except NonAffine:
            return None
        return None

    def _int_iterator(self, node: c_ast.For, it: str, st: State) -> bool:
        init = node.init
        decl = init.decls[0] if isinstance(init, c_ast.DeclList) else init
        if isinstance(decl, c_ast.Decl):
            return isinstance(decl.type, c_ast.TypeDecl) and types.is_integer(
                types.type_name(decl.type))
        var = st.env.get(it)
        if var is not None:
            return var.kind == "int"
        return any(p.name == it and not p.pointer and types.is_integer(p.type)
                   for p in self.params_decl)

    def _enumerated(self, inner: State, pos: int, seq: list[int]) -> None:
        """Restrict the loop dimension at ``pos`` to the values ``seq`` (in execution order).

        The dimension is the iterator's value itself.  Its schedule coordinate is the dimension
        for an increasing sequence and its negation for a decreasing one (``s = 32, 16, ..., 1``
        runs at ``-32 < -16 < ... < -1``); any other order uses the iteration index, defined by
        a disjunction ``(s = v0 and _t = 0) or (s = v1 and _t = 1) ...``.
        """
        iv = self.dim(inner, pos)
        vals = isl.Set.empty(inner.dom.get_space())
        for v in seq:
            vals = vals.union(iv.eq_set(self.const(inner, v)))
        inner.dom = inner.dom.intersect(coalesce(vals))
        name = inner.loops[-1]
        if all(a < b for a, b in zip(seq, seq[1:])):
            inner.sched[-1] = (name, "")
        elif all(a > b for a, b in zip(seq, seq[1:])):
            inner.sched[-1] = (f"-{name}", "")
        else:
            t = f"_t{len(inner.loops) - 1}"
            inner.sched[-1] = (t, " or ".join(f"({name} = {v} and {t} = {i})"
                                              for i, v in enumerate(seq)))

    def _generic_loop(self, node: Any, st: State, why: str, cond: Any, nxt: Any) -> None:
        body = node.stmt
        mod = syntax.modified(body) | syntax.modified(cond) | syntax.modified(nxt)
        self._invalidate(st, mod)
        name = f"_w{self.nwhile}"
        self.nwhile += 1
        inner = self._enter(st, name)
        inner.dom = inner.dom.intersect(self.dim(inner, 6 + st.depth).ge_set(
            self.const(inner, 0)))
        inner.exact, inner.reason = False, st.reason or why
        inner.divergent = (st.divergent or self._divergent_expr(cond)
                           or "break" in syntax.escapes(body))
        self._emit_control(cond, inner)
        self.block(body, inner)
        if nxt is not None:
            self._emit(nxt, inner, nxt)
        self._leave()
        self._invalidate(st, mod)
        if "return" in syntax.escapes(body):
            self.maybe_returned = self.maybe_returned or \
                f"after a loop at line {node.coord.line} that may return"

    def _while(self, node: Any, st: State) -> None:
        kind = "while" if isinstance(node, c_ast.While) else "do-while"
        self._generic_loop(node, st, f"{kind} loop at line {node.coord.line}", node.cond, None)

    def _barrier(self, node: c_ast.FuncCall, st: State) -> None:
        args = node.args.exprs if node.args else []
        flags = syntax.const_int(args[0]) if args else None
        if flags is None:
            raise self.error("barrier flags must be constant", node)
        fences = frozenset(v for b, v in _FENCES.items() if flags & b)
        bid = f"B{self.nbar}"
        self.nbar += 1
        dom, exact, _ = self._domain(st)
        uniform = not st.divergent and not self.maybe_returned and self._uniform(dom)
        if not uniform:
            self.note(f"barrier at line {node.coord.line} may not be reached by all work-items "
                      "of a group")
        dom = self._name(dom, bid, st)
        b = Barrier(bid, dom, fences, syntax.node_loc(node, self.filename), self._next_order(),
                    uniform)
        self.entries.append(_Entry("barrier", bid, dom, b.order, tuple(st.loops), b,
                                   tuple(st.sched)))

    def _uniform(self, dom: isl.Set) -> bool:
        """All work-items of a group reach each instance (same g and loop values)."""
        n = dom.dim(isl.dim_type.set)
        proj = dom.project_out(isl.dim_type.set, 3, 3).insert_dims(isl.dim_type.set, 3, 3)
        wi = self.wi.add_dims(isl.dim_type.set, n - 6)
        full = proj.intersect(wi)
        return full.is_subset(dom)

    # -- result ------------------------------------------------------------------------------------

    def _build(self) -> Kernel:
        statements = tuple(e.record for e in self.entries if e.kind == "stmt")
        barriers = tuple(e.record for e in self.entries if e.kind == "barrier")
        sched = None
        width = 2 * self.depth_max + 1
        params = ", ".join(self.param_names)
        for e in self.entries:
            vals: list[str] = []
            cons: list[str] = []
            for i, q in enumerate(e.order):
                vals.append(str(q))
                if i < len(e.loops):
                    coord, con = e.sched[i] if i < len(e.sched) else (e.loops[i], "")
                    vals.append(coord)
                    if con:
                        cons.append(f"({con})")
            vals += ["0"] * (width - len(vals))
            dims = ", ".join(list(WORK_ITEM_DIMS) + list(e.loops))
            where = f" : {' and '.join(cons)}" if cons else ""
            m = _schedule_map(
                f"[{params}] -> {{ {e.sid}[{dims}] -> [{', '.join(vals)}]{where} }}")
            m = isl.UnionMap.from_map(m.intersect_domain(e.dom))
            sched = m if sched is None else sched.union(m)
        if sched is None:
            sched = isl.UnionMap("{ }")
        loc = syntax.node_loc(self.fd.decl, self.filename)
        return Kernel(
            name=self.name,
            params=self.params_decl,
            statements=statements,
            barriers=barriers,
            arrays=tuple(self.arrays),
            work_dims=self.work_dims,
            uses=self.uses,
            context=self.context,
            schedule=sched,
            source=printer.opencl_source(self.fd),
            loc=loc,
            notes=tuple(self.notes),
            ast=self.fd,
            helpers=self.file_functions,
            declarations=self.declarations,
            struct_sizes=self.struct_sizes,
        )


# ----------------------------------------------------------------------------------------------
# AST helpers
# ----------------------------------------------------------------------------------------------




def _is_function_pointer(t: Any) -> bool:
    while t is not None and not isinstance(t, (c_ast.TypeDecl, c_ast.IdentifierType)):
        if isinstance(t, c_ast.PtrDecl) and isinstance(t.type, c_ast.FuncDecl):
            return True
        t = getattr(t, "type", None)
    return False


def _has_side_effects(node: Any) -> bool:
    return any(isinstance(n, (c_ast.Assignment, c_ast.FuncCall)) or (
        isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--"))
        for n in syntax.walk(node))


def _may_be_pointer(node: Any, st: State) -> bool:
    if isinstance(node, c_ast.ID):
        v = st.env.get(node.name)
        return v is not None and v.kind in ("ptr", "array")
    if isinstance(node, c_ast.UnaryOp) and node.op == "&":
        return True
    if isinstance(node, (c_ast.BinaryOp,)):
        return _may_be_pointer(node.left, st) or _may_be_pointer(node.right, st)
    if isinstance(node, c_ast.Cast):
        return isinstance(node.to_type.type, c_ast.PtrDecl) or _may_be_pointer(node.expr, st)
    if isinstance(node, c_ast.ArrayRef):
        base, subs = syntax.flatten_ref(node)
        if isinstance(base, c_ast.ID):
            v = st.env.get(base.name)
            return v is not None and v.array is not None and bool(v.array.shape) and len(
                subs) < len(v.array.shape)
    return False


def _update_expr(nxt: Any, it: str) -> Optional[Any]:
    """The expression of the iterator's next value in a loop's update, or None.

    ``it++``/``it--``, ``it op= e`` and ``it = e`` (``e`` in terms of ``it``).
    """
    one = c_ast.Constant("int", "1")
    if isinstance(nxt, c_ast.UnaryOp) and isinstance(nxt.expr, c_ast.ID) and nxt.expr.name == it \
            and nxt.op in ("++", "p++", "--", "p--"):
        return c_ast.BinaryOp("+" if "+" in nxt.op else "-", nxt.expr, one, nxt.coord)
    if isinstance(nxt, c_ast.Assignment) and isinstance(nxt.lvalue, c_ast.ID) \
            and nxt.lvalue.name == it:
        if nxt.op == "=":
            return nxt.rvalue
        return c_ast.BinaryOp(nxt.op[:-1], nxt.lvalue, nxt.rvalue, nxt.coord)
    return None


def _updated(nxt: Any) -> Optional[str]:
    """The variable a for loop's update expression steps (``i++``, ``i += s``, ``i = i + s``),
    or None."""
    if isinstance(nxt, c_ast.UnaryOp) and nxt.op in ("++", "p++", "--", "p--") \
            and isinstance(nxt.expr, c_ast.ID):
        return nxt.expr.name
    if isinstance(nxt, c_ast.Assignment) and isinstance(nxt.lvalue, c_ast.ID):
        return nxt.lvalue.name
    return None


def _ne_to_bound(cond: Any, it: str, step: int) -> Any:
    """``i != e`` with unit step is ``i < e`` (or ``i > e`` counting down)."""
    if isinstance(cond, c_ast.BinaryOp) and cond.op == "!=" and abs(step) == 1:
        if isinstance(cond.left, c_ast.ID) and cond.left.name == it:
            return c_ast.BinaryOp("<" if step > 0 else ">", cond.left, cond.right, cond.coord)
        if isinstance(cond.right, c_ast.ID) and cond.right.name == it:
            return c_ast.BinaryOp(">" if step > 0 else "<", cond.left, cond.right, cond.coord)
    return cond


def _name_dims(rel: isl.Map, dom: isl.Set) -> isl.Map:
    for i in range(dom.dim(isl.dim_type.set)):
        rel = rel.set_dim_name(isl.dim_type.in_, i, dom.get_dim_name(isl.dim_type.set, i))
    return rel


# ----------------------------------------------------------------------------------------------
# Public API
# ----------------------------------------------------------------------------------------------


def extract_kernel(funcdef: c_ast.FuncDef, *, context: KernelContext = _NO_CONTEXT,
                   filename: str = "<input>",
                   helpers: Optional[Mapping[str, c_ast.FuncDef]] = None,
                   declarations: tuple[c_ast.Node, ...] = (),
                   struct_sizes: Optional[Mapping[str, int]] = None) -> Kernel:
    """The polyhedral model of one ``__kernel`` function definition.

    ``helpers`` are the function definitions of the file (for inlining) and ``declarations``
    its file-scope declarations, ``struct_sizes`` the bytes of its struct types; the kernel
    record keeps them (:attr:`Kernel.helpers`).
    """
    try:
        with preprocessor.recursion_limit(preprocessor.RECURSION_LIMIT):
            return _Extractor(funcdef, context, filename, helpers or {}, declarations,
                              struct_sizes).run()
    except PolyfuseError:
        raise
    except isl.Error as err:
        loc = syntax.node_loc(funcdef.decl, filename)
        raise PolyfuseError(f"kernel {funcdef.decl.name}: isl failed while modelling the kernel "
                            f"({err})", loc.file if loc else filename,
                            loc.line if loc else None) from None
    except RecursionError:
        raise UnsupportedError(f"kernel {funcdef.decl.name}: expressions nested too deeply",
                               filename) from None
    except (AttributeError, TypeError, KeyError, IndexError, ValueError, AssertionError,
            ArithmeticError) as err:
        # a construct the walker does not expect: refuse with the kernel's place, not a traceback
        loc = syntax.node_loc(funcdef.decl, filename)
        raise UnsupportedError(f"kernel {funcdef.decl.name}: construct not supported by the "
                               f"polyhedral model ({type(err).__name__}: {err})",
                               loc.file if loc else filename, loc.line if loc else None) from err


def specialize(kernel: Kernel, context: KernelContext) -> Kernel:
    """Re-extract ``kernel`` with more known values (sizes, scalar arguments); a new record.

    Values already known in ``kernel.context`` are kept unless ``context`` gives them.
    """
    if kernel.ast is None:
        raise PolyfuseError(f"kernel {kernel.name} has no syntax tree to re-extract")
    old = kernel.context

    def merge(a: tuple, b: tuple) -> tuple:
        return tuple(y if y is not None else x for x, y in zip(a, b))

    values = dict(old.values)
    values.update(dict(context.values))
    merged = KernelContext(merge(old.local_size, context.local_size),
                           merge(old.global_size, context.global_size),
                           tuple(sorted(values.items())), context.global_offset)
    filename = kernel.loc.file if kernel.loc else "<input>"
    return extract_kernel(kernel.ast, context=merged, filename=filename, helpers=kernel.helpers,
                          declarations=kernel.declarations, struct_sizes=kernel.struct_sizes)


def specialize_if_needed(kernel: Kernel, context: KernelContext) -> Kernel:
    """``kernel`` specialized to ``context`` (:func:`specialize`) unless it already is, or has
    no syntax tree to re-extract (a kernel made without C is taken as it is)."""
    if kernel.ast is None or kernel.context == context:
        return kernel
    return specialize(kernel, context)


def parse_kernels(
    source_or_path: str,
    filename: Optional[str] = None,
    *,
    include_dirs: Iterable[str] = (),
    defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
    context: KernelContext = _NO_CONTEXT,
    options: Sequence[str] = (),
) -> dict[str, Kernel]:
    """All ``__kernel`` functions of an OpenCL C source (text or a ``.cl`` path), in order.

    Each kernel records the ``-D``/``-I`` it was preprocessed with and the compiler
    ``options`` (``-cl-*``) of its program build, for the runtime to reproduce."""
    source = source_or_path
    include_dirs = tuple(include_dirs)
    if filename is None:
        if "\n" not in source_or_path and (source_or_path.endswith((".cl", ".h", ".c"))
                                           or os.path.isfile(source_or_path)):
            source = preprocessor.read_source(source_or_path)
            filename = source_or_path
        else:
            filename = "<input>"
    ast = preprocessor.parse(source, filename, include_dirs=include_dirs, defines=defines,
                             opencl=True)
    structs = types.resolve_typedefs(ast)
    funcs = [e for e in ast.ext if isinstance(e, c_ast.FuncDef)]
    helpers = {f.decl.name: f for f in funcs}
    declarations = file_declarations(ast)
    file_names = _file_scope_names(ast)
    for f in funcs:
        _check_declared(f, file_names, filename)
        _check_integer_division(f, filename)
    build_options = tuple(f"-I{d}" for d in include_dirs) + tuple(
        f"-D{n}" if v is None else f"-D{n}={v}" for n, v in defines.items()) + tuple(options)
    kernels: dict[str, Kernel] = {}
    for f in funcs:
        if preprocessor.is_kernel(f):
            if f.decl.name in kernels:
                raise PolyfuseError(f"kernel {f.decl.name} defined twice",
                                    *_file_line(f, filename))
            kernels[f.decl.name] = replace(
                extract_kernel(f, context=context, filename=filename, helpers=helpers,
                               declarations=declarations, struct_sizes=structs),
                build_options=build_options)
            _check_element_types(kernels[f.decl.name], filename)
    return kernels


def _check_element_types(kernel: Kernel, filename: str) -> None:
    """Every global array a kernel accesses has an element type polyfuse can size."""
    for a in kernel.accesses:
        if a.address_space in ("global", "constant") and \
                types.type_size(a.dtype, kernel.struct_sizes) is None:
            loc = a.loc or kernel.loc
            raise UnsupportedError(
                f"kernel {kernel.name}: unknown element type {a.dtype!r} of '{a.array}' "
                "(not an OpenCL scalar or vector type, nor a struct declared in the kernel "
                "source)", loc.file if loc else filename, loc.line if loc else None)


def parse_kernel_batch(items: Sequence[tuple[str, str, KernelContext]]) -> list[Kernel]:
    """Kernels of many self-contained sources (``(source, filename, context)``, one kernel
    each, e.g. the operator kernels of an ONNX model) with one preprocessor run and one parse.

    Sources that differ only in the kernel's name (a chain of ``Relu`` nodes of one shape) are
    parsed and modelled once and the record is renamed.  Each source keeps its own file name in
    line markers, so errors still name it.  A source must not leave macros defined for the next
    one (oplib's ``render`` undefines its own).
    """
    names = [_kernel_name(src, fn) for src, fn, _ in items]
    keys = [(re.sub(rf"\b{re.escape(name)}\b", "@KERNEL@", src), ctx)
            for (src, _, ctx), name in zip(items, names)]
    first: dict[tuple, int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    unique = sorted(set(first.values()))
    if not unique:
        return []
    text = "".join(f'# 1 "{items[i][1]}"\n{items[i][0]}'
                   + ("" if items[i][0].endswith("\n") else "\n") for i in unique)
    ast = preprocessor.parse(text, items[unique[0]][1], opencl=True)
    file_names = _file_scope_names(ast)
    by_file: dict[str, list[c_ast.FuncDef]] = {}
    for e in ast.ext:
        if isinstance(e, c_ast.FuncDef):
            loc = syntax.node_loc(e.decl, items[unique[0]][1])
            by_file.setdefault(loc.file if loc else items[unique[0]][1], []).append(e)
    models: dict[int, Kernel] = {}
    for i in unique:
        _, fn, ctx = items[i]
        funcs = by_file.get(fn, [])
        kernels = [f for f in funcs if preprocessor.is_kernel(f)]
        if len(kernels) != 1:
            raise PolyfuseError(f"expected one __kernel, found {len(kernels)}", fn)
        helpers = {f.decl.name: f for f in funcs}
        for f in funcs:
            _check_declared(f, file_names, fn)
            _check_integer_division(f, fn)
        models[i] = extract_kernel(kernels[0], context=ctx, filename=fn, helpers=helpers)
    out = []
    for i, key in enumerate(keys):
        model = models[first[key]]
        out.append(model if i == first[key] else renamed(model, names[i], items[i][1]))
    return out


def _kernel_name(source: str, filename: str) -> str:
    m = re.search(r"__kernel\s+void\s+([A-Za-z_]\w*)", source)
    if not m:
        raise PolyfuseError("expected one __kernel", filename)
    return m.group(1)


def renamed(kernel: Kernel, name: str, filename: str) -> Kernel:
    """The same kernel model under another name (the syntax tree's body is shared: every pass
    copies before it changes a tree)."""
    decl = copy.copy(kernel.ast.decl)  # copies along the path to the names, nothing else
    decl.name = name
    node = decl
    while not isinstance(node, c_ast.TypeDecl) and getattr(node, "type", None) is not None:
        node.type = copy.copy(node.type)
        node = node.type
    if isinstance(node, c_ast.TypeDecl):
        node.declname = name
    fd = c_ast.FuncDef(decl, kernel.ast.param_decls, kernel.ast.body, kernel.ast.coord)
    loc = replace(kernel.loc, file=filename) if kernel.loc else None
    source = re.sub(rf"\b{re.escape(kernel.name)}\b", name, kernel.source)
    helpers = {k: v for k, v in kernel.helpers.items() if k != kernel.name}
    return replace(kernel, name=name, ast=fd, loc=loc, source=source,
                   helpers={**helpers, name: fd})


def file_declarations(ast: c_ast.FileAST) -> tuple[c_ast.Node, ...]:
    """File-scope declarations a kernel's functions need besides them: typedefs, structs,
    constant tables (not function prototypes, not polyfuse's own header)."""
    return tuple(e for e in ast.ext
                 if not isinstance(e, c_ast.FuncDef) and not preprocessor.is_polyfuse_header(e)
                 and not (isinstance(e, c_ast.Decl) and isinstance(e.type, c_ast.FuncDecl)))


def _file_scope_names(ast: c_ast.FileAST) -> set[str]:
    """Names declared at file scope: variables, functions, typedefs and enumerators."""
    names: set[str] = set()
    for node in ast.ext:
        if isinstance(node, c_ast.FuncDef):
            names.add(node.decl.name)
        elif getattr(node, "name", None):
            names.add(node.name)
        names.update(n.name for n in syntax.walk(node) if isinstance(n, c_ast.Enumerator))
    return names


def _check_declared(fd: c_ast.FuncDef, file_names: set[str], filename: str) -> None:
    """Every identifier a function uses as a value must be declared (a parameter, a local, a
    file-scope name); functions called by name may be OpenCL built-ins.  The OpenCL compiler
    rejects such a kernel, so polyfuse refuses it here, at its own line, rather than when the
    fused kernel fails to build."""
    declared = set(file_names)
    callees: set[int] = set()
    fields: set[int] = set()
    for n in syntax.walk(fd):
        if isinstance(n, (c_ast.Decl, c_ast.Enumerator)) and n.name:
            declared.add(n.name)
        elif isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID):
            callees.add(id(n.name))
        elif isinstance(n, c_ast.StructRef):
            fields.add(id(n.field))
        elif isinstance(n, c_ast.NamedInitializer):
            fields.update(id(x) for x in n.name)
    for n in syntax.walk(fd.body):
        if isinstance(n, c_ast.ID) and id(n) not in callees and id(n) not in fields \
                and n.name not in declared:
            raise PolyfuseError(f"function {fd.decl.name}: use of undeclared identifier "
                                f"'{n.name}'", *_file_line(n, filename))


#: built-ins returning an integer
_INT_CALLS = frozenset({"get_global_id", "get_local_id", "get_group_id", "get_global_size",
                        "get_local_size", "get_num_groups", "get_work_dim", "get_global_offset",
                        "abs", "min", "max", "clamp", "mul24", "mad24", "popcount", "clz"})


def _integer_type(t: Any) -> bool:
    """Whether a declared type is an integer scalar (``const int``, ``unsigned long``...)."""
    return (isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType)
            and types.is_integer(" ".join(t.type.names)))


def _is_integer(node: Any, ints: set[str]) -> bool:
    """Whether ``node`` is provably of integer type (literals, integer variables and casts,
    integer built-ins, and arithmetic over those); anything else may be floating point."""
    if isinstance(node, c_ast.Constant):
        return node.type in ("int", "char", "unsigned int", "long int", "unsigned long int",
                             "long long int", "unsigned long long int") \
            or syntax.const_int(node) is not None
    if isinstance(node, c_ast.ID):
        return node.name in ints
    if isinstance(node, c_ast.Cast):
        return _integer_type(node.to_type.type)
    if isinstance(node, c_ast.UnaryOp):
        return node.op in ("!", "sizeof") or _is_integer(node.expr, ints)
    if isinstance(node, c_ast.BinaryOp):
        if node.op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||", "%", "<<", ">>", "&",
                       "|", "^"):
            return True
        return _is_integer(node.left, ints) and _is_integer(node.right, ints)
    if isinstance(node, c_ast.TernaryOp):
        return _is_integer(node.iftrue, ints) and _is_integer(node.iffalse, ints)
    if isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID):
        return node.name.name in _INT_CALLS and all(
            _is_integer(a, ints) for a in (node.args.exprs if node.args else ()))
    return False


def _check_integer_division(fd: c_ast.FuncDef, filename: str) -> None:
    """Refuse an integer ``/`` or ``%`` (or ``/=``, ``%=``) by an operand that folds to the
    constant 0 (``0``, ``(0)``, ``(int)0``, ``4 - 4``, ``WG * 0`` after macro expansion): its
    behaviour is undefined in OpenCL C, wherever it stands (index, value or condition)."""
    ints = {n.name for n in syntax.walk(fd) if isinstance(n, c_ast.Decl) and n.name
            and _integer_type(n.type)}
    for n in syntax.walk(fd.body):
        if isinstance(n, c_ast.BinaryOp) and n.op in ("/", "%"):
            left, right = n.left, n.right
        elif isinstance(n, c_ast.Assignment) and n.op in ("/=", "%="):
            left, right = n.lvalue, n.rvalue
        else:
            continue
        if syntax.const_int(right) == 0 and _is_integer(right, ints) and _is_integer(left, ints):
            raise PolyfuseError(f"function {fd.decl.name}: integer division by zero in "
                                f"{printer.opencl_source(n)}", *_file_line(n, filename))


def _file_line(node: Any, filename: str) -> tuple[str, Optional[int]]:
    loc = syntax.node_loc(node, filename)
    return (loc.file, loc.line) if loc else (filename, None)


def _initializer_length(init: Any) -> Optional[int]:
    """The length an array declared without one takes from its initializer (``int r[] =
    {0, 4, 2}``, ``char s[] = "ab"``), else None."""
    if isinstance(init, c_ast.InitList) and not any(
            isinstance(e, c_ast.NamedInitializer) for e in init.exprs):
        return len(init.exprs)
    if isinstance(init, c_ast.Constant) and init.type == "string":
        return len(init.value.encode().decode("unicode_escape")) - 1
    return None
