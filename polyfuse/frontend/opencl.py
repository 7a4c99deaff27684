"""OpenCL C kernels → :class:`~polyfuse.program.Kernel` records with isl domains and accesses.

Conventions (see also :mod:`polyfuse.program`):

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
* Integer arithmetic is modelled over the mathematical integers (no wrap-around of ``uint`` or
  ``size_t``); ``/`` and ``%`` follow C's truncation.
"""

from __future__ import annotations

import copy
import os
import re
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import islpy as isl
from pycparser import c_ast

from polyfuse.frontend import cpp
from polyfuse.islutil import coalesce
from polyfuse.program import (
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
    SourceLoc,
    Statement,
    UnsupportedError,
)

__all__ = ["parse_kernels", "extract_kernel", "specialize", "KernelContext"]

_INT_TYPES = {
    "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "size_t", "ptrdiff_t",
    "intptr_t", "uintptr_t", "bool", "_Bool", "unsigned", "signed",
}
_TYPE_ALIASES = {
    "unsigned int": "uint", "unsigned": "uint", "unsigned char": "uchar",
    "unsigned short": "ushort",
    "unsigned long": "ulong", "signed int": "int", "signed": "int", "long int": "long",
    "unsigned long int": "ulong", "long long": "long", "unsigned long long": "ulong",
    "signed char": "char", "short int": "short", "_Bool": "bool",
}
_SCALAR_SIZES = {
    "char": 1, "uchar": 1, "bool": 1, "short": 2, "ushort": 2, "half": 2, "int": 4, "uint": 4,
    "float": 4, "long": 8, "ulong": 8, "double": 8, "size_t": 8, "ptrdiff_t": 8,
}
_FENCES = {1: "local", 2: "global", 4: "image"}
_BARRIERS = {"barrier", "work_group_barrier"}
_FENCE_ONLY = {"mem_fence", "read_mem_fence", "write_mem_fence"}
_GROUPING_FUNCS = {"get_local_id", "get_group_id", "get_local_size", "get_num_groups"}
#: most values a loop whose trip sequence folds to constants is enumerated with (more: the
#: loop is over-approximated like a ``while`` loop)
_MAX_ENUMERATED = 64

_NO_CONTEXT = KernelContext()

#: FuncDef → the file's function definitions (for inlining when re-extracting in specialize())
_HELPERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _NonAffine(Exception):
    """An expression polyfuse cannot represent as a quasi-affine function."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def type_name(node: c_ast.Node) -> str:
    """The base type name of a declaration type (``float``, ``uint``, ``float4``)."""
    while not isinstance(node, (c_ast.IdentifierType, c_ast.Struct, c_ast.Union, c_ast.Enum)):
        node = node.type
    if isinstance(node, c_ast.IdentifierType):
        name = " ".join(node.names)
        return _TYPE_ALIASES.get(name, name)
    return f"{type(node).__name__.lower()} {node.name}"


#: sizes of the struct element types kernels declare (``box_str``, ``struct box_str``), from
#: their own declarations (see :func:`resolve_typedefs`)
STRUCT_SIZES: dict[str, int] = {}


def resolve_typedefs(ast: c_ast.FileAST) -> None:
    """Replace the kernels' scalar typedefs by their types, in place (``typedef float
    DATA_TYPE;`` makes every ``DATA_TYPE`` a ``float``), and size their struct types.

    Element types are read by name; a typedef name would be an unknown type.  polyfuse's own
    header (``opencl_c.h``) is left alone: its aliases are the OpenCL type names.
    """
    scalars: dict[str, list[str]] = {}
    for ext in ast.ext:
        if not isinstance(ext, (c_ast.Typedef, c_ast.Decl)) or cpp.is_polyfuse_header(ext):
            continue
        t = ext.type
        inner = t.type if isinstance(t, c_ast.TypeDecl) else None
        if isinstance(ext, c_ast.Typedef) and isinstance(inner, c_ast.IdentifierType):
            names = list(inner.names)
            if len(names) == 1 and names[0] in scalars:
                names = scalars[names[0]]
            if ext.name not in _SCALAR_SIZES and type_size(ext.name) is None:
                scalars[ext.name] = names
        struct = inner if isinstance(inner, (c_ast.Struct, c_ast.Union)) else \
            (t if isinstance(t, (c_ast.Struct, c_ast.Union)) else None)
        if struct is not None and struct.decls is not None:
            size = _struct_size(struct, scalars)
            if size is not None:
                kind = "union" if isinstance(struct, c_ast.Union) else "struct"
                if struct.name:
                    STRUCT_SIZES[f"{kind} {struct.name}"] = size
                if isinstance(ext, c_ast.Typedef):
                    STRUCT_SIZES[ext.name] = size
    if not scalars:
        return
    for node in cpp.walk(ast):
        if isinstance(node, c_ast.IdentifierType) and len(node.names) == 1 and \
                node.names[0] in scalars:
            node.names = list(scalars[node.names[0]])


def _struct_size(struct: Any, scalars: Mapping[str, list[str]]) -> Optional[int]:
    """C layout size of a struct/union of scalars, vectors, arrays and sized structs."""
    size = align = 0
    sizes = []
    for d in struct.decls:
        t, count = d.type, 1
        while isinstance(t, c_ast.ArrayDecl):
            if not isinstance(t.dim, c_ast.Constant):
                return None
            count *= _int_literal(t.dim.value)
            t = t.type
        if isinstance(t, c_ast.PtrDecl):
            fsize = 8
        else:
            name = type_name(t)
            if name in scalars:
                name = _TYPE_ALIASES.get(" ".join(scalars[name]), " ".join(scalars[name]))
            fsize = type_size(name)
            if fsize is None:
                return None
        falign = min(fsize, 16) if fsize & (fsize - 1) == 0 else 4
        align = max(align, falign)
        sizes.append(fsize * count)
        if not isinstance(struct, c_ast.Union):
            size = (size + falign - 1) // falign * falign + fsize * count
    if isinstance(struct, c_ast.Union):
        size = max(sizes, default=0)
    align = max(align, 1)
    return (size + align - 1) // align * align


def type_size(name: str) -> Optional[int]:
    """Size in bytes of an OpenCL scalar or vector type (or a sized struct type), or None."""
    if name in _SCALAR_SIZES:
        return _SCALAR_SIZES[name]
    if name in STRUCT_SIZES:
        return STRUCT_SIZES[name]
    m = re.fullmatch(r"([a-z]+?)(2|3|4|8|16)", name)
    if m and m.group(1) in _SCALAR_SIZES:
        n = int(m.group(2))
        return _SCALAR_SIZES[m.group(1)] * (4 if n == 3 else n)
    return None


def _is_int_type(name: str) -> bool:
    return name in _INT_TYPES or name.split()[-1] in _INT_TYPES


def _coord_loc(node: Any, default_file: str) -> Optional[SourceLoc]:
    coord = getattr(node, "coord", None)
    if coord is None or not getattr(coord, "line", None):
        return None
    return SourceLoc(coord.file or default_file, coord.line, getattr(coord, "column", 0) or 0)


def _int_literal(text: str) -> int:
    t = text.rstrip("uUlL")
    if len(t) > 1 and t[0] == "0" and t[1] not in "xXbB":
        return int(t, 8)
    return int(t, 0)


# ----------------------------------------------------------------------------------------------
# Variables and arrays seen while walking a kernel
# ----------------------------------------------------------------------------------------------


@dataclass
class _Array:
    name: str
    space: str  # global | constant | local | private
    dtype: str
    shape: Optional[tuple[int, ...]] = None  # None: unknown extent (pointer parameter)


@dataclass
class _Var:
    kind: str  # "int" (integer scalar), "ptr" (pointer alias), "array", "other"
    value: Optional[tuple[isl.PwAff, int]] = None  # int: (value, loop depth it is defined at)
    array: Optional[_Array] = None  # ptr / array: the array behind it
    offset: Optional[tuple[isl.PwAff, int]] = None  # ptr: offset in base elements
    unit: int = 1  # ptr: base elements per pointee element (casts to wider vector types)
    why: str = ""  # why value/offset is unknown
    dim: Optional[int] = None  # int: the loop dimension it iterates (loop iterators)


@dataclass
class _State:
    """Where the walk is: enclosing loops, the current domain and what is known."""

    loops: list[str]
    dom: isl.Set
    env: dict[str, _Var]
    exact: bool = True
    reason: Optional[str] = None
    divergent: bool = False  # under control flow that depends on memory
    #: per enclosing loop, its schedule coordinate (isl expression over the loop dims) and an
    #: extra isl constraint defining it ("" if none); see :meth:`_Extractor._enumerated`
    sched: list[tuple[str, str]] = field(default_factory=list)

    def copy(self) -> _State:
        return _State(list(self.loops), self.dom, dict(self.env), self.exact, self.reason,
                      self.divergent, list(self.sched))

    @property
    def depth(self) -> int:
        return len(self.loops)


@dataclass
class _Raw:
    """An access before the statement's tuple name is known."""

    array: _Array
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
    array: Optional[_Array]
    offset: Optional[isl.PwAff]  # in base elements; None: unknown
    unit: int = 1
    why: str = ""


# ----------------------------------------------------------------------------------------------
# The extractor
# ----------------------------------------------------------------------------------------------


class _Extractor:
    def __init__(self, funcdef: c_ast.FuncDef, context: KernelContext, filename: str,
                 helpers: Mapping[str, c_ast.FuncDef]):
        self.fd = funcdef
        self.name = funcdef.decl.name
        self.filename = filename
        self.helpers = {k: v for k, v in helpers.items() if k != self.name}
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
        self._check_supported(funcdef.body, set())
        self.uses, self.used_dims = self._scan_uses()
        self.work_dims = max(self.used_dims, default=-1) + 1
        self.has_barrier = self._calls(funcdef.body, _BARRIERS)
        self.tainted = self._taint()
        rq = cpp.reqd_work_group_size(funcdef)
        local = list(context.local_size)
        if rq and all(v is None for v in local):
            local = [(rq[d] if d < len(rq) else 1) for d in range(3)]
        self.context = replace(context, local_size=tuple(local))
        self.values = context.value_map
        self.params_decl = self._params()
        self._geometry()
        self.alive = isl.Set.universe(self._space(0))

    # -- errors and notes --------------------------------------------------------------------------

    def error(self, msg: str, node: Any, cls: type = PolyfuseError) -> PolyfuseError:
        loc = _coord_loc(node, self.filename)
        return cls(f"kernel {self.name}: {msg}", loc.file if loc else self.filename,
                   loc.line if loc else None)

    def note(self, msg: str) -> None:
        if msg not in self.notes:
            self.notes.append(msg)

    # -- pre-scans --------------------------------------------------------------------------------

    def _check_supported(self, node: Any, seen: set[str]) -> None:
        for n in _walk(node):
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
            for n in _walk(b):
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
            for n in _walk(body):
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
                d = _const_int(args[0])
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
            for n in _walk(body):
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
        for n in _walk(expr):
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
                   and n.name.name in ("get_local_id", "get_global_id") for n in _walk(fd.body))

    def _calls(self, node: Any, names: set[str]) -> bool:
        return any(
            isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and n.name.name in names
            for body in self._bodies() for n in _walk(body)
        ) if node is not None else False

    # -- parameters and geometry -------------------------------------------------------------------

    def _params(self) -> tuple[KernelParam, ...]:
        out = []
        args = self.fd.decl.type.args
        for i, p in enumerate(args.params if args else []):
            if isinstance(p, c_ast.EllipsisParam):
                raise self.error("variadic kernels are not supported", p, UnsupportedError)
            if isinstance(p.type, c_ast.TypeDecl) and type_name(p.type) == "void" and not p.name:
                continue
            pointer = isinstance(p.type, (c_ast.PtrDecl, c_ast.ArrayDecl))
            space = cpp.address_space_of(p) or "private"
            quals = list(p.quals or [])
            t = p.type
            while not isinstance(t, c_ast.TypeDecl):
                t = t.type
            quals += list(t.quals or [])
            out.append(KernelParam(p.name, i, type_name(p.type), pointer, space, "const" in quals))
        return tuple(out)

    def _geometry(self) -> None:
        """Decide L_d/G_d per dimension and the isl parameters of the kernel."""
        ctx = self.context
        self.L: list[Any] = [None, None, None]  # int, or param name
        self.G: list[Any] = [None, None, None]
        self.unit = [False, False, False]
        self.pinned = [False, False, False]
        geo_params: list[str] = []
        for d in range(3):
            used = d < self.work_dims
            if not used and ctx.global_size[d] is None:
                self.pinned[d] = True
                continue
            self.G[d] = ctx.global_size[d] if ctx.global_size[d] is not None \
                else GLOBAL_SIZE_PARAMS[d]
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
                if not p.pointer and _is_int_type(p.type) and p.name not in self.values]
        self.param_names = scal + geo_params
        self.ctx = isl.DEFAULT_CONTEXT
        self.reserved = set(WORK_ITEM_DIMS) | set(self.param_names)
        if "get_global_offset" in self.uses:
            self.note("get_global_offset() is modelled as 0 (launches with an offset are not "
                      "analysed by this model)")

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

    # -- affine expressions ------------------------------------------------------------------------

    def _universe(self, st: _State) -> isl.Set:
        return isl.Set.universe(st.dom.get_space())

    def _const(self, st: _State, v: int) -> isl.PwAff:
        return isl.PwAff.val_on_domain(self._universe(st), v)

    def _dim(self, st: _State, pos: int) -> isl.PwAff:
        ls = isl.LocalSpace.from_space(st.dom.get_space())
        return isl.PwAff.var_on_domain(ls, isl.dim_type.set, pos)

    def _param(self, st: _State, name: str) -> isl.PwAff:
        ls = isl.LocalSpace.from_space(st.dom.get_space())
        idx = self.param_names.index(name)
        return isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.param, idx))

    def _lift(self, st: _State, val: tuple[isl.PwAff, int]) -> isl.PwAff:
        pw, depth = val
        if depth < st.depth:
            pw = pw.add_dims(isl.dim_type.in_, st.depth - depth)
        return pw

    def _size(self, st: _State, v: Any) -> isl.PwAff:
        return self._const(st, v) if isinstance(v, int) else self._param(st, v)

    def aff(self, node: Any, st: _State) -> isl.PwAff:
        """The value of an integer expression as a PwAff over the current space."""
        if isinstance(node, c_ast.Constant):
            if node.type in ("int", "unsigned int", "long", "unsigned long", "long long",
                             "unsigned long long") or re.fullmatch(r"[0-9][0-9a-fA-FxX]*[uUlL]*",
                                                                  node.value):
                try:
                    return self._const(st, _int_literal(node.value))
                except ValueError:
                    pass
            if node.type == "char":
                v = _char_value(node.value)
                if v is not None:
                    return self._const(st, v)
            if node.type == "bool":
                return self._const(st, 1 if node.value == "true" else 0)
            raise _NonAffine(f"{node.value} is not an integer")
        if isinstance(node, c_ast.ID):
            return self._id_value(node.name, st)
        if isinstance(node, c_ast.Cast):
            t = type_name(node.to_type.type) if not isinstance(node.to_type.type,
                                                                c_ast.PtrDecl) else "ptr"
            if not _is_int_type(t):
                raise _NonAffine(f"cast to {t}")
            return self.aff(node.expr, st)
        if isinstance(node, c_ast.UnaryOp):
            if node.op == "-":
                return self.aff(node.expr, st).neg()
            if node.op == "+":
                return self.aff(node.expr, st)
            if node.op == "!":
                return self.cond(node, st).indicator_function()
            if node.op == "sizeof":
                sz = type_size(type_name(node.expr.type)) if isinstance(
                    node.expr, c_ast.Typename) else None
                if sz is None:
                    raise _NonAffine("sizeof of an unknown type")
                return self._const(st, sz)
            raise _NonAffine(f"operator {node.op}")
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
            raise _NonAffine(f"{cpp.generate(node)} is data-dependent (reads memory)")
        raise _NonAffine(f"{cpp.generate(node)} is not affine")

    def _id_value(self, name: str, st: _State) -> isl.PwAff:
        var = st.env.get(name)
        if var is not None:
            if var.kind != "int":
                raise _NonAffine(f"{name} is not an integer")
            if var.dim is not None and var.value is None:
                return self._dim(st, var.dim)
            if var.value is None:
                raise _NonAffine(var.why or f"the value of {name} is not known")
            return self._lift(st, var.value)
        if name in self.values:
            return self._const(st, self.values[name])
        if name in self.param_names:
            return self._param(st, name)
        if name in ("true", "false"):
            return self._const(st, int(name == "true"))
        raise _NonAffine(f"{name} is not an integer parameter or variable")

    def _cst(self, pw: isl.PwAff) -> Optional[int]:
        if not pw.is_cst():
            return None
        vals = {a.get_constant_val().to_python() for _, a in pw.get_pieces()}
        if len(vals) != 1:
            return None
        v = vals.pop()
        return int(v) if int(v) == v else None

    def _binop(self, node: c_ast.BinaryOp, st: _State) -> isl.PwAff:
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
                return a.scale_val(isl.Val(cb)) if cb else self._const(st, 0)
            if ca is not None:
                return b.scale_val(isl.Val(ca)) if ca else self._const(st, 0)
            raise _NonAffine(f"{cpp.generate(node)} is a non-constant product")
        if op in ("/", "%"):
            if _const_int(node.right) == 0:
                raise self.error(f"integer division by zero in {cpp.generate(node)}", node)
            if cb is None or cb == 0:
                raise _NonAffine(f"{cpp.generate(node)} divides by a non-constant")
            q = self._const(st, abs(cb))
            if op == "/":
                r = a.tdiv_q(q)
                return r.neg() if cb < 0 else r
            return a.tdiv_r(q)
        if op in ("<<", ">>"):
            if cb is None or cb < 0:
                raise _NonAffine(f"{cpp.generate(node)} shifts by a non-constant")
            if op == "<<":
                return a.scale_val(isl.Val(2 ** cb))
            return a.scale_down_val(isl.Val(2 ** cb)).floor()
        if op == "&":
            for x, c in ((a, cb), (b, ca)):
                if c is not None and c > 0 and c & (c + 1) == 0:
                    return x.mod_val(isl.Val(c + 1))
        raise _NonAffine(f"{cpp.generate(node)} is not affine")

    def cond(self, node: Any, st: _State) -> isl.Set:
        """The set of instances where an integer condition holds."""
        if isinstance(node, c_ast.BinaryOp):
            op = node.op
            if op == "&&":
                return self.cond(node.left, st).intersect(self.cond(node.right, st))
            if op == "||":
                return self.cond(node.left, st).union(self.cond(node.right, st))
            if op in ("<", "<=", ">", ">=", "==", "!="):
                a, b = self.aff(node.left, st), self.aff(node.right, st)
                return {"<": a.lt_set, "<=": a.le_set, ">": a.gt_set, ">=": a.ge_set,
                        "==": a.eq_set, "!=": a.ne_set}[op](b)
        if isinstance(node, c_ast.UnaryOp) and node.op == "!":
            return self.cond(node.expr, st).complement()
        return self.aff(node, st).ne_set(self._const(st, 0))

    def _call_value(self, node: c_ast.FuncCall, st: _State) -> isl.PwAff:
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
        raise _NonAffine(f"the value of {f}() is not affine")

    def _work_item(self, f: str, args: list, st: _State, node: Any) -> isl.PwAff:
        if f == "get_work_dim":
            raise _NonAffine("get_work_dim() depends on the launch")
        d = _const_int(args[0])
        assert d is not None
        if self.pinned[d]:
            return self._const(st, {"get_local_size": 1, "get_num_groups": 1,
                                    "get_global_size": 1}.get(f, 0))
        L, G = self.L[d], self.G[d]
        g, ll = self._dim(st, d), self._dim(st, 3 + d)
        if f == "get_global_id":
            if isinstance(L, int):
                return g.scale_val(isl.Val(L)).add(ll) if L != 1 else g.add(ll)
            raise _NonAffine(f"get_global_id({d}) with unknown local size is g{d}*_ls{d} + l{d}")
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
            raise _NonAffine(f"get_num_groups({d}) with unknown local size")
        if f == "get_global_offset":
            return self._const(st, 0)
        raise _NonAffine(f"{f}()")

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
        return _substitute(copy.deepcopy(items[0].expr), dict(zip(names, args)))

    # -- arrays and pointers -----------------------------------------------------------------------

    def pointer(self, node: Any, st: _State) -> _Pointer:
        """What a pointer-valued expression points into."""
        if isinstance(node, c_ast.ID):
            var = st.env.get(node.name)
            if var is None or var.kind not in ("ptr", "array"):
                return _Pointer(None, None, why=f"{node.name} is not a known pointer")
            if var.kind == "array":
                return _Pointer(var.array, self._const(st, 0))
            off = self._lift(st, var.offset) if var.offset is not None else None
            return _Pointer(var.array, off, var.unit, var.why)
        if isinstance(node, c_ast.Cast):
            inner = self.pointer(node.expr, st)
            to = node.to_type.type
            if not isinstance(to, c_ast.PtrDecl) or inner.array is None:
                return inner
            new = type_name(to.type)
            old_sz = type_size(inner.array.dtype)
            new_sz = type_size(new)
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
            except _NonAffine as e:
                return _Pointer(base.array, None, base.unit, f"pointer offset: {e.reason}")
            k = k.scale_val(isl.Val(base.unit)) if base.unit != 1 else k
            return _Pointer(base.array, base.offset.add(k) if node.op == "+"
                            else base.offset.sub(k), base.unit, base.why)
        if isinstance(node, c_ast.UnaryOp) and node.op == "&":
            e = node.expr
            if isinstance(e, c_ast.ArrayRef):
                base, subs = _flatten_ref(e)
                p = self.pointer(base, st)
                if p.array is None:
                    return p
                if len(subs) == 1 and p.offset is not None and not p.array.shape:
                    try:
                        k = self.aff(subs[0], st)
                    except _NonAffine as err:
                        return _Pointer(p.array, None, p.unit, f"subscript: {err.reason}")
                    k = k.scale_val(isl.Val(p.unit)) if p.unit != 1 else k
                    return _Pointer(p.array, p.offset.add(k), p.unit, p.why)
                if p.array.shape and len(subs) == len(p.array.shape) and len(subs) == 1:
                    try:
                        return _Pointer(p.array, self.aff(subs[0], st))
                    except _NonAffine as err:
                        return _Pointer(p.array, None, 1, f"subscript: {err.reason}")
                return _Pointer(p.array, None, 1, f"address {cpp.generate(node)}")
            if isinstance(e, c_ast.ID):
                return self.pointer(e, st)
        if isinstance(node, c_ast.ArrayRef):
            base, subs = _flatten_ref(node)
            p = self.pointer(base, st)
            if p.array is not None and p.array.shape and len(subs) < len(p.array.shape):
                return _Pointer(p.array, None, 1, f"row {cpp.generate(node)} of {p.array.name}")
        return _Pointer(None, None, why=f"{cpp.generate(node)} is not a known pointer")

    def _whole(self, arr: _Array, st: _State, dom: isl.Set) -> isl.Map:
        params = ", ".join(self.param_names)
        if arr.shape:
            outs = [f"o{i}" for i in range(len(arr.shape))]
            cons = " and ".join(f"0 <= o{i} < {n}" for i, n in enumerate(arr.shape))
        else:
            outs, cons = ["o0"], "o0 >= 0"
        rng = isl.Set(f"[{params}] -> {{ {arr.name}[{', '.join(outs)}] : {cons} }}")
        return isl.Map.from_domain_and_range(dom, rng)

    def _element(self, arr: _Array, idx: list[isl.PwAff], dom: isl.Set, width: int = 1) -> isl.Map:
        m = isl.Map.from_pw_aff(idx[0])
        for k in idx[1:]:
            m = m.flat_range_product(isl.Map.from_pw_aff(k))
        if width > 1:
            params = ", ".join(self.param_names)
            m = m.apply_range(isl.Map(f"[{params}] -> {{ [x] -> [y] : x <= y < x + {width} }}"))
        m = m.intersect_domain(dom)
        return m.set_tuple_name(isl.dim_type.out, arr.name)

    # -- collecting accesses -----------------------------------------------------------------------

    def accesses(self, node: Any, st: _State, out: list[_Raw], guard: isl.Set,
                 gexact: bool = True, greason: Optional[str] = None, write: bool = False,
                 read: bool = True, partial: bool = False) -> None:
        """Append the memory accesses of an expression (reads, or a write when ``write``)."""
        rec = lambda n, **kw: self.accesses(n, st, out, guard, gexact, greason, **kw)
        if node is None or isinstance(node, (c_ast.Constant, c_ast.ID, c_ast.Typename)):
            return
        if isinstance(node, (c_ast.ArrayRef,)) or (isinstance(node, c_ast.UnaryOp)
                                                    and node.op == "*"):
            if isinstance(node, c_ast.ArrayRef):
                base, subs = _flatten_ref(node)
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
                    for s in _flatten_ref(e)[1]:
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
            except _NonAffine as e:
                c = self._universe(st)
                ex, why = False, greason or f"under condition {cpp.generate(cnode)}: {e.reason}"
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

    def _ref(self, base: Any, subs: list, st: _State, out: list[_Raw], guard: isl.Set,
             gexact: bool, greason: Optional[str], write: bool, read: bool, partial: bool,
             node: Any) -> None:
        p = self.pointer(base, st)
        if p.array is None:
            return
        arr = p.array
        dom = st.dom.intersect(guard)
        exact, reason = gexact, greason
        rel = None
        try:
            if arr.shape:
                if p.offset is None or len(subs) != len(arr.shape) or self._cst(p.offset) != 0:
                    raise _NonAffine(p.why or f"partial subscript of {arr.name}")
                rel = self._element(arr, [self.aff(s, st) for s in subs], dom)
            else:
                if p.offset is None:
                    raise _NonAffine(p.why or f"pointer into {arr.name} is not affine")
                if len(subs) > 1:
                    raise _NonAffine(f"multi-dimensional subscript of pointer {arr.name}")
                k = self.aff(subs[0], st) if subs else self._const(st, 0)
                if p.unit != 1:
                    k = k.scale_val(isl.Val(p.unit))
                rel = self._element(arr, [p.offset.add(k)], dom, p.unit)
        except _NonAffine as e:
            exact = False
            sub = ", ".join(cpp.generate(s) for s in subs)
            reason = f"subscript {arr.name}[{sub}]: {e.reason}" if subs else e.reason
            rel = self._whole(arr, st, dom)
        if partial and write:
            exact, reason = False, reason or f"writes part of an element of {arr.name}"
        if read:
            out.append(_Raw(arr, "read", rel, exact, reason, node))
        if write:
            out.append(_Raw(arr, "write", rel, exact, reason, node))

    def _call_accesses(self, node: c_ast.FuncCall, st: _State, out: list[_Raw], guard: isl.Set,
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
                    raise _NonAffine(p.why or f"{f}() pointer into {p.array.name}")
                k = self.aff(off_node, st).scale_val(isl.Val(n))
                rel = self._element(p.array, [p.offset.add(k)], dom, n)
                out.append(_Raw(p.array, direction, rel, gexact, greason, node))
            except _NonAffine as e:
                out.append(_Raw(p.array, direction, self._whole(p.array, st, dom), False,
                                f"{f}(): {e.reason}", node))
            return
        if f.startswith(("atomic_", "atom_")) and args:
            for a in args[1:]:
                rec(a)
            target = args[0]
            if isinstance(target, c_ast.UnaryOp) and target.op == "&" and isinstance(
                    target.expr, c_ast.ArrayRef):
                for s in _flatten_ref(target.expr)[1]:
                    rec(s)
            self.note(f"{f}() is modelled as a read and write (may) of its target")
            raw: list[_Raw] = []
            tnode = target.expr if isinstance(target, c_ast.UnaryOp) and target.op == "&" \
                else c_ast.UnaryOp("*", target, target.coord)
            tmp: list[_Raw] = []
            if isinstance(tnode, c_ast.ArrayRef):
                b, subs = _flatten_ref(tnode)
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
                for s in _flatten_ref(a.expr)[1]:
                    rec(s)
            why = (f"{p.array.name} is passed to {f}(), which polyfuse does not inline: "
                   "read and written entirely (may)")
            self.note(why)
            rel = self._whole(p.array, st, dom)
            out.append(_Raw(p.array, "read", rel, False, why, node))
            out.append(_Raw(p.array, "write", rel, False, why, node))

    # -- statements --------------------------------------------------------------------------------

    def run(self) -> Kernel:
        wi, wi_exact = self._work_item_domain()
        st = _State([], wi, {}, True, None)
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
                st.env[p.name] = _Var("ptr", array=_Array(p.name, p.address_space, p.type),
                                      offset=(isl.PwAff.val_on_domain(
                                          isl.Set.universe(self._space(0)), 0), 0))
            elif _is_int_type(p.type):
                st.env.pop(p.name, None)
            else:
                st.env[p.name] = _Var("other", why=f"{p.name} is a {p.type}")
        self.block(self.fd.body, st)
        return self._build()

    def _next_order(self) -> tuple[int, ...]:
        p = self.counters[-1]
        self.counters[-1] += 1
        return tuple(self.prefix) + (p,)

    def _domain(self, st: _State) -> tuple[isl.Set, bool, Optional[str]]:
        alive = self.alive
        if st.depth:
            alive = alive.add_dims(isl.dim_type.set, st.depth)
        dom = st.dom.intersect(alive)
        if self.maybe_returned:
            return dom, False, st.reason or self.maybe_returned
        return dom, st.exact, st.reason

    def block(self, node: Any, st: _State) -> None:
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
            self._invalidate(inner, _modified(node.stmt))
            self.block(node.stmt, inner)
            self._invalidate(st, _modified(node.stmt))
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

    def _merge_back(self, outer: _State, inner: _State) -> None:
        for name in list(outer.env):
            if name in inner.env:
                outer.env[name] = inner.env[name]

    def _invalidate(self, st: _State, names: Iterable[str]) -> None:
        for name in names:
            var = st.env.get(name)
            if var is None and name in self.param_names:
                st.env[name] = _Var("int", why=f"{name} is modified in the kernel")
            elif var is not None and var.kind == "int":
                st.env[name] = _Var("int", why=f"{name} is modified under control flow "
                                               "polyfuse does not model")
            elif var is not None and var.kind == "ptr":
                st.env[name] = _Var("ptr", array=var.array, offset=None,
                                    why=f"{name} is modified under control flow")

    def _decl(self, d: c_ast.Decl, st: _State) -> None:
        if isinstance(d.type, (c_ast.FuncDecl,)) or "typedef" in (d.storage or []):
            return
        space = cpp.address_space_of(d)
        if isinstance(d.type, c_ast.ArrayDecl):
            shape = []
            t = d.type
            while isinstance(t, c_ast.ArrayDecl):
                n = None
                if t.dim is not None:
                    try:
                        n = self._cst(self.aff(t.dim, st))
                    except _NonAffine:
                        n = None
                if n is None:
                    raise self.error(f"array {d.name} needs a constant size", d, UnsupportedError)
                shape.append(n)
                t = t.type
            arr = _Array(d.name, space or "private", type_name(t), tuple(shape))
            if arr.name not in {a.name for a in self.arrays}:
                self.arrays.append(ArrayDecl(arr.name, arr.dtype, arr.shape, arr.space,
                                             _coord_loc(d, self.filename)))
            st.env[d.name] = _Var("array", array=arr)
            if d.init is not None:
                self._emit(d, st, d, init_array=arr)
            return
        if isinstance(d.type, c_ast.PtrDecl):
            if d.init is not None:
                self._emit(d.init, st, d)
                p = self.pointer(d.init, st)
                if p.array is not None:
                    st.env[d.name] = _Var("ptr", array=p.array,
                                          offset=(p.offset, st.depth) if p.offset is not None
                                          else None, unit=p.unit, why=p.why)
                    return
            st.env[d.name] = _Var("other", why=f"{d.name} is a pointer polyfuse does not track")
            return
        tname = type_name(d.type)
        if _is_int_type(tname):
            var = _Var("int", why=f"{d.name} is not initialized")
            if d.init is not None:
                self._emit(d.init, st, d)
                try:
                    var = _Var("int", value=(self.aff(d.init, st), st.depth))
                except _NonAffine as e:
                    var = _Var("int", why=f"{d.name} = {cpp.generate(d.init)}: {e.reason}")
            st.env[d.name] = var
        else:
            if d.init is not None:
                self._emit(d.init, st, d)
            st.env[d.name] = _Var("other", why=f"{d.name} is a {tname}")

    def _assign_effects(self, node: Any, st: _State) -> None:
        """Update known scalar values after a statement."""
        if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ID):
            name = node.lvalue.name
            var = st.env.get(name)
            if var is None and name not in self.param_names:
                return
            if var is not None and var.kind == "ptr":
                if node.op == "=":
                    p = self.pointer(node.rvalue, st)
                    st.env[name] = _Var("ptr", array=p.array or var.array,
                                        offset=(p.offset, st.depth) if p.offset is not None
                                        and p.array is var.array else None, unit=p.unit,
                                        why=p.why or f"{name} is reassigned")
                else:
                    e = c_ast.BinaryOp(node.op[0], c_ast.ID(name), node.rvalue, node.coord)
                    p = self.pointer(e, st)
                    st.env[name] = _Var("ptr", array=var.array,
                                        offset=(p.offset, st.depth) if p.offset is not None
                                        else None, unit=var.unit, why=p.why)
                return
            if var is not None and var.kind != "int":
                return
            expr = node.rvalue if node.op == "=" else c_ast.BinaryOp(
                node.op[:-1], c_ast.ID(name), node.rvalue, node.coord)
            try:
                st.env[name] = _Var("int", value=(self.aff(expr, st), st.depth))
            except _NonAffine as e:
                st.env[name] = _Var("int", why=f"{name} = {cpp.generate(node.rvalue)}: "
                                               f"{e.reason}")
            return
        if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--") \
                and isinstance(node.expr, c_ast.ID):
            op = "+" if "+" in node.op else "-"
            fake = c_ast.Assignment(op + "=", node.expr, c_ast.Constant("int", "1"), node.coord)
            self._assign_effects(fake, st)
            return
        self._invalidate(st, _modified(node))

    def _emit(self, node: Any, st: _State, stmt_node: Any,
              init_array: Optional[_Array] = None) -> None:
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

    def _add_statement(self, st: _State, out: list[_Raw], stmt_node: Any) -> None:
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
                               _coord_loc(r.node, self.filename) or _coord_loc(
                                   stmt_node, self.filename), r.array.dtype))
        code = cpp.generate(stmt_node)
        if isinstance(stmt_node, c_ast.Decl):
            code = code + ";"
        elif not code.rstrip().endswith(("}", ";")):
            code = code + ";"
        stmt = Statement(sid, dom, tuple(accs), code, _coord_loc(stmt_node, self.filename),
                         self._next_order(), exact, stmt_node)
        self.entries.append(_Entry("stmt", sid, dom, stmt.order, tuple(st.loops), stmt,
                                   tuple(st.sched)))

    def _name(self, dom: isl.Set, sid: str, st: _State) -> isl.Set:
        dom = dom.set_tuple_name(sid)
        for i, n in enumerate(list(WORK_ITEM_DIMS) + st.loops):
            dom = dom.set_dim_name(isl.dim_type.set, i, n)
        return dom

    def _unname(self, dom: isl.Set) -> isl.Set:
        return dom.reset_tuple_id()

    def _emit_control(self, expr: Any, st: _State) -> None:
        """A statement for the memory reads of a control expression (condition, bound)."""
        if expr is None:
            return
        out: list[_Raw] = []
        self.accesses(expr, st, out, self._universe(st), st.exact, st.reason)
        if out:
            self._add_statement(st, out, expr)
        self._invalidate(st, _modified(expr))

    def _if(self, node: c_ast.If, st: _State) -> None:
        self._emit_control(node.cond, st)
        try:
            c = self.cond(node.cond, st)
            c_exact, why = True, None
        except _NonAffine as e:
            c = self._universe(st)
            c_exact, why = False, f"under condition {cpp.generate(node.cond)}: {e.reason}"
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
                st.env[name] = _Var("int", value=(c.indicator_function().cond(a, b), st.depth))
            else:
                self._invalidate(st, [name])
        for name in _modified(node.iftrue) | _modified(node.iffalse):
            if name not in st.env and name in self.param_names:
                self._invalidate(st, [name])

    def _loop_name(self, cname: str, st: _State) -> str:
        name = cname
        k = 1
        while name in self.reserved or name in st.loops or name.startswith("_w"):
            name = f"{cname}_{k}"
            k += 1
        return name

    def _enter(self, st: _State, name: str) -> _State:
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

    def _for(self, node: c_ast.For, st: _State) -> None:
        it, lb_node, step = _loop_shape(node)
        body_mod = _modified(node.stmt)
        escapes = _escapes(node.stmt)
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
            st.env[it] = _Var("int", why=f"{it} is a loop iterator")
        name = self._loop_name(it, st)
        self._invalidate(st, body_mod)
        inner = self._enter(st, name)
        pos = 6 + st.depth
        iv = self._dim(inner, pos)
        inner.env[it] = _Var("int", dim=pos)
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
                        iv.sub(lb).mod_val(isl.Val(abs(step))).eq_set(self._const(inner, 0)))
            except _NonAffine as e:
                problems.append(f"lower bound {cpp.generate(lb_node)}: {e.reason}")
        cst = inner.copy()
        cst.exact, cst.reason = False, st.reason or "reads of a loop condition (evaluated once " \
            "more than the body runs; over-approximated)"
        self._emit_control(node.cond, cst)
        if seq is None and step is not None and node.cond is not None:
            cnode = _ne_to_bound(node.cond, it, step)
            try:
                cset = self.cond(cnode, inner)
                if not self._monotone(cset, inner, pos, step):
                    problems.append(f"condition {cpp.generate(node.cond)} is not a bound on {it}")
                else:
                    inner.dom = inner.dom.intersect(cset)
            except _NonAffine as e:
                problems.append(f"condition {cpp.generate(node.cond)}: {e.reason}")
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

    def _sequence(self, node: c_ast.For, it: str, lb_node: Any, st: _State,
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
                probe.env[it] = _Var("int", value=(self._const(probe, v), probe.depth))
                c = self.cond(node.cond, probe)
                if probe.dom.intersect(c).is_empty():
                    return seq
                if not probe.dom.is_subset(c) or len(seq) >= _MAX_ENUMERATED:
                    return None
                seq.append(v)
                v = self._cst(self.aff(upd, probe))
        except _NonAffine:
            return None
        return None

    def _int_iterator(self, node: c_ast.For, it: str, st: _State) -> bool:
        init = node.init
        decl = init.decls[0] if isinstance(init, c_ast.DeclList) else init
        if isinstance(decl, c_ast.Decl):
            return isinstance(decl.type, c_ast.TypeDecl) and _is_int_type(type_name(decl.type))
        var = st.env.get(it)
        if var is not None:
            return var.kind == "int"
        return any(p.name == it and not p.pointer and _is_int_type(p.type)
                   for p in self.params_decl)

    def _enumerated(self, inner: _State, pos: int, seq: list[int]) -> None:
        """Restrict the loop dimension at ``pos`` to the values ``seq`` (in execution order).

        The dimension is the iterator's value itself.  Its schedule coordinate is the dimension
        for an increasing sequence and its negation for a decreasing one (``s = 32, 16, ..., 1``
        runs at ``-32 < -16 < ... < -1``); any other order uses the iteration index, defined by
        a disjunction ``(s = v0 and _t = 0) or (s = v1 and _t = 1) ...``.
        """
        iv = self._dim(inner, pos)
        vals = isl.Set.empty(inner.dom.get_space())
        for v in seq:
            vals = vals.union(iv.eq_set(self._const(inner, v)))
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

    def _monotone(self, cset: isl.Set, st: _State, pos: int, step: int) -> bool:
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

    def _generic_loop(self, node: Any, st: _State, why: str, cond: Any, nxt: Any) -> None:
        body = node.stmt
        mod = _modified(body) | _modified(cond) | _modified(nxt)
        self._invalidate(st, mod)
        name = f"_w{self.nwhile}"
        self.nwhile += 1
        inner = self._enter(st, name)
        inner.dom = inner.dom.intersect(self._dim(inner, 6 + st.depth).ge_set(
            self._const(inner, 0)))
        inner.exact, inner.reason = False, st.reason or why
        inner.divergent = st.divergent or self._divergent_expr(cond) or "break" in _escapes(body)
        self._emit_control(cond, inner)
        self.block(body, inner)
        if nxt is not None:
            self._emit(nxt, inner, nxt)
        self._leave()
        self._invalidate(st, mod)
        if "return" in _escapes(body):
            self.maybe_returned = self.maybe_returned or \
                f"after a loop at line {node.coord.line} that may return"

    def _while(self, node: Any, st: _State) -> None:
        kind = "while" if isinstance(node, c_ast.While) else "do-while"
        self._generic_loop(node, st, f"{kind} loop at line {node.coord.line}", node.cond, None)

    def _barrier(self, node: c_ast.FuncCall, st: _State) -> None:
        args = node.args.exprs if node.args else []
        flags = _const_int(args[0]) if args else None
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
        b = Barrier(bid, dom, fences, _coord_loc(node, self.filename), self._next_order(), uniform)
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
            m = isl.Map(f"[{params}] -> {{ {e.sid}[{dims}] -> [{', '.join(vals)}]{where} }}")
            m = isl.UnionMap.from_map(m.intersect_domain(e.dom))
            sched = m if sched is None else sched.union(m)
        if sched is None:
            sched = isl.UnionMap("{ }")
        loc = _coord_loc(self.fd.decl, self.filename)
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
            source=cpp.generate(self.fd),
            loc=loc,
            notes=tuple(self.notes),
            ast=self.fd,
        )


# ----------------------------------------------------------------------------------------------
# AST helpers
# ----------------------------------------------------------------------------------------------


_walk = cpp.walk


def _is_function_pointer(t: Any) -> bool:
    while t is not None and not isinstance(t, (c_ast.TypeDecl, c_ast.IdentifierType)):
        if isinstance(t, c_ast.PtrDecl) and isinstance(t.type, c_ast.FuncDecl):
            return True
        t = getattr(t, "type", None)
    return False


def _const_int(node: Any) -> Optional[int]:
    """Value of a constant integer expression (after cpp), or None."""
    if isinstance(node, c_ast.Constant):
        try:
            return _int_literal(node.value)
        except ValueError:
            return _char_value(node.value) if node.type == "char" else None
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+", "~", "!"):
        v = _const_int(node.expr)
        if v is None:
            return None
        return {"-": -v, "+": v, "~": ~v, "!": int(not v)}[node.op]
    if isinstance(node, c_ast.Cast):
        return _const_int(node.expr)
    if isinstance(node, c_ast.BinaryOp):
        a, b = _const_int(node.left), _const_int(node.right)
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


def _char_value(text: str) -> Optional[int]:
    body = text[1:-1]
    if len(body) == 1:
        return ord(body)
    esc = {"\\n": 10, "\\t": 9, "\\0": 0, "\\\\": 92, "\\'": 39, '\\"': 34, "\\r": 13}
    return esc.get(body)


def _flatten_ref(node: c_ast.ArrayRef) -> tuple[Any, list]:
    subs = []
    while isinstance(node, c_ast.ArrayRef):
        subs.append(node.subscript)
        node = node.name
    return node, list(reversed(subs))


def _substitute(node: Any, mapping: Mapping[str, Any]) -> Any:
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
            setattr(node, slot, _substitute(val, mapping))
        elif isinstance(val, list):
            setattr(node, slot, [_substitute(v, mapping) if isinstance(v, c_ast.Node) else v
                                 for v in val])
    return node


def _modified(node: Any) -> set[str]:
    """Names of variables assigned (or whose address is taken) inside ``node``."""
    out: set[str] = set()
    for n in _walk(node):
        if isinstance(n, c_ast.Assignment) and isinstance(n.lvalue, c_ast.ID):
            out.add(n.lvalue.name)
        elif isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--", "&") \
                and isinstance(n.expr, c_ast.ID):
            out.add(n.expr.name)
    return out


def _escapes(node: Any) -> str:
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


def _has_side_effects(node: Any) -> bool:
    return any(isinstance(n, (c_ast.Assignment, c_ast.FuncCall)) or (
        isinstance(n, c_ast.UnaryOp) and n.op in ("++", "--", "p++", "p--"))
        for n in _walk(node))


def _may_be_pointer(node: Any, st: _State) -> bool:
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
        base, subs = _flatten_ref(node)
        if isinstance(base, c_ast.ID):
            v = st.env.get(base.name)
            return v is not None and v.array is not None and bool(v.array.shape) and len(
                subs) < len(v.array.shape)
    return False


def _loop_shape(node: c_ast.For) -> tuple[Optional[str], Any, Optional[int]]:
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
    nxt = node.next
    step = None
    if isinstance(nxt, c_ast.UnaryOp) and isinstance(nxt.expr, c_ast.ID) and nxt.expr.name == it:
        step = {"++": 1, "p++": 1, "--": -1, "p--": -1}.get(nxt.op)
    elif isinstance(nxt, c_ast.Assignment) and isinstance(nxt.lvalue, c_ast.ID) \
            and nxt.lvalue.name == it:
        if nxt.op in ("+=", "-="):
            c = _const_int(nxt.rvalue)
            step = None if c is None else (c if nxt.op == "+=" else -c)
        elif nxt.op == "=" and isinstance(nxt.rvalue, c_ast.BinaryOp) \
                and nxt.rvalue.op in ("+", "-"):
            r = nxt.rvalue
            if isinstance(r.left, c_ast.ID) and r.left.name == it:
                c = _const_int(r.right)
                step = None if c is None else (c if r.op == "+" else -c)
            elif r.op == "+" and isinstance(r.right, c_ast.ID) and r.right.name == it:
                step = _const_int(r.left)
    if step == 0:
        step = None
    return it, lb, step


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
                   helpers: Optional[Mapping[str, c_ast.FuncDef]] = None) -> Kernel:
    """The polyhedral model of one ``__kernel`` function definition.

    ``helpers`` are the other function definitions of the file (for inlining); when omitted, the
    ones recorded by :func:`parse_kernels` for this AST are used.
    """
    if helpers is None:
        helpers = _HELPERS.get(funcdef, {})
    try:
        with cpp.recursion_limit(cpp.RECURSION_LIMIT):
            return _Extractor(funcdef, context, filename, helpers).run()
    except PolyfuseError:
        raise
    except isl.Error as err:
        loc = _coord_loc(funcdef.decl, filename)
        raise PolyfuseError(f"kernel {funcdef.decl.name}: isl failed while modelling the kernel "
                            f"({err})", loc.file if loc else filename,
                            loc.line if loc else None) from None
    except RecursionError:
        raise UnsupportedError(f"kernel {funcdef.decl.name}: expressions nested too deeply",
                               filename) from None
    except (AttributeError, TypeError, KeyError, IndexError, ValueError, AssertionError,
            ArithmeticError) as err:
        # a construct the walker does not expect: refuse with the kernel's place, not a traceback
        loc = _coord_loc(funcdef.decl, filename)
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
                           tuple(sorted(values.items())))
    filename = kernel.loc.file if kernel.loc else "<input>"
    return extract_kernel(kernel.ast, context=merged, filename=filename)


def parse_kernels(
    source_or_path: str,
    filename: Optional[str] = None,
    *,
    include_dirs: Iterable[str] = (),
    defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
    context: KernelContext = _NO_CONTEXT,
) -> dict[str, Kernel]:
    """All ``__kernel`` functions of an OpenCL C source (text or a ``.cl`` path), in order."""
    source = source_or_path
    if filename is None:
        if "\n" not in source_or_path and (source_or_path.endswith((".cl", ".h", ".c"))
                                           or os.path.isfile(source_or_path)):
            source = cpp.read_source(source_or_path)
            filename = source_or_path
        else:
            filename = "<input>"
    ast = cpp.parse(source, filename, include_dirs=include_dirs, defines=defines, opencl=True)
    resolve_typedefs(ast)
    funcs = [e for e in ast.ext if isinstance(e, c_ast.FuncDef)]
    helpers = {f.decl.name: f for f in funcs}
    file_names = _file_scope_names(ast)
    for f in funcs:
        _check_declared(f, file_names, filename)
        _check_integer_division(f, filename)
    kernels: dict[str, Kernel] = {}
    for f in funcs:
        _HELPERS[f] = helpers
        if cpp.is_kernel(f):
            if f.decl.name in kernels:
                raise PolyfuseError(f"kernel {f.decl.name} defined twice",
                                    *_file_line(f, filename))
            kernels[f.decl.name] = extract_kernel(f, context=context, filename=filename,
                                                  helpers=helpers)
            _check_element_types(kernels[f.decl.name], filename)
    return kernels


def _check_element_types(kernel: Kernel, filename: str) -> None:
    """Every global array a kernel accesses has an element type polyfuse can size."""
    for a in kernel.accesses:
        if a.address_space in ("global", "constant") and type_size(a.dtype) is None:
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
    ast = cpp.parse(text, items[unique[0]][1], opencl=True)
    file_names = _file_scope_names(ast)
    by_file: dict[str, list[c_ast.FuncDef]] = {}
    for e in ast.ext:
        if isinstance(e, c_ast.FuncDef):
            loc = _coord_loc(e.decl, items[unique[0]][1])
            by_file.setdefault(loc.file if loc else items[unique[0]][1], []).append(e)
    models: dict[int, Kernel] = {}
    for i in unique:
        _, fn, ctx = items[i]
        funcs = by_file.get(fn, [])
        kernels = [f for f in funcs if cpp.is_kernel(f)]
        if len(kernels) != 1:
            raise PolyfuseError(f"expected one __kernel, found {len(kernels)}", fn)
        helpers = {f.decl.name: f for f in funcs}
        for f in funcs:
            _check_declared(f, file_names, fn)
            _check_integer_division(f, fn)
            _HELPERS[f] = helpers
        models[i] = extract_kernel(kernels[0], context=ctx, filename=fn, helpers=helpers)
    out = []
    for i, key in enumerate(keys):
        model = models[first[key]]
        out.append(model if i == first[key] else _renamed(model, names[i], items[i][1]))
    return out


def _kernel_name(source: str, filename: str) -> str:
    m = re.search(r"__kernel\s+void\s+([A-Za-z_]\w*)", source)
    if not m:
        raise PolyfuseError("expected one __kernel", filename)
    return m.group(1)


def _renamed(kernel: Kernel, name: str, filename: str) -> Kernel:
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
    _HELPERS[fd] = {name: fd}
    loc = replace(kernel.loc, file=filename) if kernel.loc else None
    source = re.sub(rf"\b{re.escape(kernel.name)}\b", name, kernel.source)
    return replace(kernel, name=name, ast=fd, loc=loc, source=source)


def _file_scope_names(ast: c_ast.FileAST) -> set[str]:
    """Names declared at file scope: variables, functions, typedefs and enumerators."""
    names: set[str] = set()
    for node in ast.ext:
        if isinstance(node, c_ast.FuncDef):
            names.add(node.decl.name)
        elif getattr(node, "name", None):
            names.add(node.name)
        names.update(n.name for n in _walk(node) if isinstance(n, c_ast.Enumerator))
    return names


def _check_declared(fd: c_ast.FuncDef, file_names: set[str], filename: str) -> None:
    """Every identifier a function uses as a value must be declared (a parameter, a local, a
    file-scope name); functions called by name may be OpenCL built-ins.  The OpenCL compiler
    rejects such a kernel, so polyfuse refuses it here, at its own line, rather than when the
    fused kernel fails to build."""
    declared = set(file_names)
    callees: set[int] = set()
    fields: set[int] = set()
    for n in _walk(fd):
        if isinstance(n, (c_ast.Decl, c_ast.Enumerator)) and n.name:
            declared.add(n.name)
        elif isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID):
            callees.add(id(n.name))
        elif isinstance(n, c_ast.StructRef):
            fields.add(id(n.field))
        elif isinstance(n, c_ast.NamedInitializer):
            fields.update(id(x) for x in n.name)
    for n in _walk(fd.body):
        if isinstance(n, c_ast.ID) and id(n) not in callees and id(n) not in fields \
                and n.name not in declared:
            raise PolyfuseError(f"function {fd.decl.name}: use of undeclared identifier "
                                f"'{n.name}'", *_file_line(n, filename))


#: integer scalar type names (OpenCL C), for telling an integer division from a float one
_INT_TYPES = frozenset({"char", "uchar", "short", "ushort", "int", "uint", "long", "ulong",
                        "size_t", "ptrdiff_t", "intptr_t", "uintptr_t", "unsigned", "signed",
                        "bool", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
                        "uint16_t", "uint32_t", "uint64_t"})
#: built-ins returning an integer
_INT_CALLS = frozenset({"get_global_id", "get_local_id", "get_group_id", "get_global_size",
                        "get_local_size", "get_num_groups", "get_work_dim", "get_global_offset",
                        "abs", "min", "max", "clamp", "mul24", "mad24", "popcount", "clz"})


def _integer_type(t: Any) -> bool:
    """Whether a declared type is an integer scalar (``const int``, ``unsigned long``...)."""
    return (isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.IdentifierType)
            and all(n in _INT_TYPES for n in t.type.names))


def _is_integer(node: Any, ints: set[str]) -> bool:
    """Whether ``node`` is provably of integer type (literals, integer variables and casts,
    integer built-ins, and arithmetic over those); anything else may be floating point."""
    if isinstance(node, c_ast.Constant):
        return node.type in ("int", "char", "unsigned int", "long int", "unsigned long int",
                             "long long int", "unsigned long long int") \
            or _const_int(node) is not None
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
    ints = {n.name for n in _walk(fd) if isinstance(n, c_ast.Decl) and n.name
            and _integer_type(n.type)}
    for n in _walk(fd.body):
        if isinstance(n, c_ast.BinaryOp) and n.op in ("/", "%"):
            left, right = n.left, n.right
        elif isinstance(n, c_ast.Assignment) and n.op in ("/=", "%="):
            left, right = n.lvalue, n.rvalue
        else:
            continue
        if _const_int(right) == 0 and _is_integer(right, ints) and _is_integer(left, ints):
            raise PolyfuseError(f"function {fd.decl.name}: integer division by zero in "
                                f"{cpp.generate(n)}", *_file_line(n, filename))


def _file_line(node: Any, filename: str) -> tuple[str, Optional[int]]:
    loc = _coord_loc(node, filename)
    return (loc.file, loc.line) if loc else (filename, None)
