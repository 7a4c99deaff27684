"""A small interpreter for OpenCL C kernels, used as a test oracle.

It runs the pycparser AST of one ``__kernel`` function over a whole NDRange and records every
global-memory access ``(work-item, buffer parameter, element index, 'R'/'W')``.  The UAR is tested
against dependences computed from these traces, so the interpreter must not share code with the
polyhedral front-end: it *executes* the kernel (data-dependent subscripts use the actual data).

Semantics follow C/OpenCL C: integer division and modulo truncate toward zero, integer results
wrap to the width of their type (two's complement, unsigned modulo 2^n), the usual arithmetic
conversions decide int/unsigned/float, ``size_t`` (what the work-item functions return) is an
unsigned 64-bit type.  Floating-point arithmetic is done in double precision (Python floats),
also for ``float``; stores into ``float`` buffers round to float32 and float literals are rounded.
Work-items of a work-group run in lock-step phases between barriers: each work-item is a
Python generator that yields at ``barrier``.

The AST is compiled once into Python closures (variables resolved to slots, types resolved
statically), then executed for every work-item.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Union

import numpy as np
from pycparser import c_ast, c_parser

from polyfuse.c import types as c_types
from polyfuse.core.program import PolyfuseError

# ----------------------------------------------------------------------------------------------
# Public records
# ----------------------------------------------------------------------------------------------


class InterpError(PolyfuseError):
    """The kernel cannot be interpreted: unsupported construct, out-of-bounds access, ..."""


class MemAccess(NamedTuple):
    """One memory access: ``wi`` is ``(group ids, local ids)``, ``work_dim`` entries each."""

    wi: tuple[tuple[int, ...], tuple[int, ...]]
    buffer: str
    index: int  # in units of the buffer parameter's element type
    mode: str  # 'R' | 'W'


@dataclass(frozen=True)
class LocalArg:
    """A ``__local`` pointer argument (``clSetKernelArg(k, i, nbytes, NULL)``)."""

    nbytes: int


@dataclass
class KernelRun:
    """The result of running a kernel over an NDRange.

    :attr:`accesses` are the global (and ``__constant`` buffer) accesses in execution order;
    :attr:`local_accesses` the ``__local`` ones (``buffer`` is the array or parameter name),
    recorded only when requested.  ``raw_*`` hold the same as plain tuples (cheaper).  Buffers
    passed as numpy arrays are updated in place.
    """

    raw_accesses: list[tuple]
    raw_local_accesses: list[tuple]
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    barriers: int = 0  # barrier phases executed, summed over work-groups

    @property
    def accesses(self) -> list[MemAccess]:
        return [MemAccess._make(t) for t in self.raw_accesses]

    @property
    def local_accesses(self) -> list[MemAccess]:
        return [MemAccess._make(t) for t in self.raw_local_accesses]

    def counts(self) -> dict[tuple, dict[tuple[str, str], int]]:
        """Per work-item: ``{(buffer, mode): number of accesses}`` (for performance models)."""
        out: dict[tuple, dict[tuple[str, str], int]] = {}
        for wi, buf, _i, mode in self.raw_accesses:
            d = out.setdefault(wi, {})
            d[(buf, mode)] = d.get((buf, mode), 0) + 1
        return out


# ----------------------------------------------------------------------------------------------
# Types
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scalar:
    name: str
    is_float: bool
    bits: int
    signed: bool = True

    @property
    def size(self) -> int:
        return max(1, self.bits // 8)


@dataclass(frozen=True)
class VecT:
    elem: Scalar
    n: int

    @property
    def name(self) -> str:
        return f"{self.elem.name}{self.n}"

    @property
    def size(self) -> int:
        return self.elem.size * (4 if self.n == 3 else self.n)


@dataclass(frozen=True)
class PtrT:
    elem: Any
    space: str = "private"


@dataclass(frozen=True)
class ArrT:
    elem: Any
    dims: tuple[int, ...]
    space: str = "private"


@dataclass(frozen=True)
class VoidT:
    name: str = "void"


CType = Union[Scalar, VecT, PtrT, ArrT, VoidT]

BOOL = Scalar("bool", False, 1, False)
CHAR = Scalar("char", False, 8)
UCHAR = Scalar("uchar", False, 8, False)
SHORT = Scalar("short", False, 16)
USHORT = Scalar("ushort", False, 16, False)
INT = Scalar("int", False, 32)
UINT = Scalar("uint", False, 32, False)
LONG = Scalar("long", False, 64)
ULONG = Scalar("ulong", False, 64, False)
HALF = Scalar("half", True, 16)
FLOAT = Scalar("float", True, 32)
DOUBLE = Scalar("double", True, 64)
VOID = VoidT()

_STANDARD = {t.name: t for t in (BOOL, CHAR, UCHAR, SHORT, USHORT, INT, UINT, LONG, ULONG, HALF,
                                 FLOAT, DOUBLE)}
#: every spelling of a scalar type (:mod:`polyfuse.c.types`); ``size_t`` and the like run as the
#: standard type of their size
SCALARS = {name: _STANDARD[c_types.standard(t).name] for name, t in c_types.spellings().items()}
#: host C's ``long double`` and the opaque ``sampler_t`` also run here
SCALARS.update({"long double": DOUBLE, "sampler_t": UINT})

_VEC_WIDTHS = (2, 3, 4, 8, 16)


def type_by_name(name: str) -> Union[Scalar, VecT, None]:
    """``float`` → Scalar, ``float4`` → VecT; None if unknown."""
    if name in SCALARS:
        return SCALARS[name]
    for n in _VEC_WIDTHS:
        suffix = str(n)
        if name.endswith(suffix) and name[: -len(suffix)] in SCALARS:
            base = name[: -len(suffix)]
            if not base[-1].isdigit():
                return VecT(SCALARS[base], n)
    return None


def numpy_dtype(t: Any) -> Any:
    """numpy dtype storing elements (components, for vectors) of type ``t``."""
    if isinstance(t, VecT):
        t = t.elem
    if isinstance(t, Scalar):
        return c_types.SCALARS[t.name].dtype
    raise InterpError(f"no buffer dtype for {t}")


def _converter(t: Any) -> Callable[[Any], Any]:
    """The C conversion of a value to type ``t`` (assignment, cast, argument passing)."""
    if isinstance(t, Scalar):
        if t.is_float:
            return float
        if t is BOOL:
            return lambda v: 1 if v else 0
        bits = t.bits
        mask = (1 << bits) - 1
        if t.signed:
            half = 1 << (bits - 1)

            def conv_s(v: Any) -> int:
                if not isinstance(v, int):
                    v = _f2i(v)
                if -half <= v < half:
                    return v
                return ((v + half) & mask) - half

            return conv_s

        def conv_u(v: Any) -> int:
            if not isinstance(v, int):
                v = _f2i(v)
            return v & mask

        return conv_u
    if isinstance(t, VecT):
        ec = _converter(t.elem)

        def conv_v(v: Any) -> tuple:
            if isinstance(v, tuple):
                if len(v) != t.n:
                    raise InterpError(f"cannot convert a {len(v)}-vector to {t.name}")
                return tuple(ec(x) for x in v)
            x = ec(v)
            return (x,) * t.n

        return conv_v
    return lambda v: v


def _to_f32(v: Any) -> float:
    # float arithmetic in doubles, rounded where the value is stored as float
    try:
        return float(np.float32(v))
    except OverflowError:  # pragma: no cover - numpy returns inf instead
        return math.inf if v > 0 else -math.inf


def _f2i(v: Any) -> int:
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return 0
        return int(v)  # truncation toward zero
    if isinstance(v, tuple):
        raise InterpError("vector used as a scalar")
    return int(v)


def _rank(t: Scalar) -> int:
    return t.bits


def _promote(t: Scalar) -> Scalar:
    if not t.is_float and t.bits < 32:
        return INT
    return t


def arith_type(a: Any, b: Any) -> Any:
    """The usual arithmetic conversions (vectors win over scalars)."""
    if isinstance(a, VecT) or isinstance(b, VecT):
        va = a if isinstance(a, VecT) else None
        vb = b if isinstance(b, VecT) else None
        if va is not None and vb is not None:
            return VecT(arith_type(va.elem, vb.elem), va.n)
        v = va or vb
        return v
    if not isinstance(a, Scalar) or not isinstance(b, Scalar):
        raise InterpError("arithmetic on non-arithmetic operands")
    if a.is_float or b.is_float:
        fa = a.bits if a.is_float else 0
        fb = b.bits if b.is_float else 0
        return DOUBLE if max(fa, fb) == 64 else FLOAT
    a, b = _promote(a), _promote(b)
    if a == b:
        return a
    if a.signed == b.signed:
        return a if _rank(a) >= _rank(b) else b
    u, s = (a, b) if not a.signed else (b, a)
    if _rank(u) >= _rank(s):
        return u
    return s


# ----------------------------------------------------------------------------------------------
# Memory
# ----------------------------------------------------------------------------------------------


class _Ctx:
    """Execution state shared by all closures: the current work-item and the NDRange."""

    __slots__ = ("wi", "g", "l", "gid", "gsz", "lsz", "ngr", "off", "wdim", "steps",
                 "max_steps", "trace", "ltrace", "record_local")

    def __init__(self) -> None:
        self.wi: tuple = ((), ())
        self.g = [0, 0, 0]
        self.l = [0, 0, 0]
        self.gid = [0, 0, 0]
        self.gsz = [1, 1, 1]
        self.lsz = [1, 1, 1]
        self.ngr = [1, 1, 1]
        self.off = [0, 0, 0]
        self.wdim = 1
        self.steps = 0
        self.max_steps = 10**8
        self.trace: list[tuple] = []
        self.ltrace: list[tuple] = []
        self.record_local = False


class Mem:
    """A private array: a Python list, no recording."""

    __slots__ = ("name", "data", "space", "ctx")

    def __init__(self, name: str, data: Any, space: str, ctx: _Ctx):
        self.name = name
        self.data = data
        self.space = space
        self.ctx = ctx

    def _check(self, i: int, what: str) -> None:
        if not (0 <= i < len(self.data)):
            raise InterpError(
                f"out-of-bounds {what} {self.space} {self.name}[{i}] (size {len(self.data)}) "
                f"by work-item {self.ctx.wi}"
            )

    def load(self, i: int) -> Any:
        if i < 0:
            self._check(i, "read of")
        try:
            return self.data[i]
        except IndexError:
            self._check(i, "read of")
            raise

    def store(self, i: int, v: Any) -> None:
        if i < 0:
            self._check(i, "write to")
        try:
            self.data[i] = v
        except IndexError:
            self._check(i, "write to")
            raise


class LocalMem(Mem):
    """A ``__local`` array shared by a work-group; recorded when asked."""

    __slots__ = ()

    def load(self, i: int) -> Any:
        v = Mem.load(self, i)
        if self.ctx.record_local:
            self.ctx.ltrace.append((self.ctx.wi, self.name, i, "R"))
        return v

    def store(self, i: int, v: Any) -> None:
        Mem.store(self, i, v)
        if self.ctx.record_local:
            self.ctx.ltrace.append((self.ctx.wi, self.name, i, "W"))


class GlobalMem(Mem):
    """A buffer argument over a 1-D numpy array; every access is recorded."""

    __slots__ = ("size",)

    def __init__(self, name: str, data: Any, space: str, ctx: _Ctx):
        super().__init__(name, data, space, ctx)
        self.size = len(data)

    def load(self, i: int) -> Any:
        if not (0 <= i < self.size):
            self._check(i, "read of")
        self.ctx.trace.append((self.ctx.wi, self.name, i, "R"))
        return self.data.item(i)

    def store(self, i: int, v: Any) -> None:
        if not (0 <= i < self.size):
            self._check(i, "write to")
        self.ctx.trace.append((self.ctx.wi, self.name, i, "W"))
        self.data[i] = v


class GlobalVecMem(GlobalMem):
    """A buffer of n-component vectors (``float4 *``) over a flat numpy array of components."""

    __slots__ = ("n",)

    def __init__(self, name: str, data: Any, space: str, ctx: _Ctx, n: int):
        super().__init__(name, data, space, ctx)
        self.n = 4 if n == 3 else n
        self.size = len(data) // self.n

    def load(self, i: int) -> Any:
        if not (0 <= i < self.size):
            self._check(i, "read of")
        self.ctx.trace.append((self.ctx.wi, self.name, i, "R"))
        n = self.n
        return tuple(self.data[i * n:(i + 1) * n].tolist())

    def store(self, i: int, v: Any) -> None:
        if not (0 <= i < self.size):
            self._check(i, "write to")
        self.ctx.trace.append((self.ctx.wi, self.name, i, "W"))
        n = self.n
        self.data[i * n:i * n + len(v)] = v


class Ptr:
    """A pointer value: memory object + element offset."""

    __slots__ = ("mem", "off")

    def __init__(self, mem: Mem, off: int):
        self.mem = mem
        self.off = off

    def __repr__(self) -> str:
        return f"Ptr({self.mem.name}+{self.off})"


# ----------------------------------------------------------------------------------------------
# Control-flow signals
# ----------------------------------------------------------------------------------------------

_BREAK = 1
_CONTINUE = 2
_RETURN = 3

Fn = Callable[[list], Any]


class _Stmt(NamedTuple):
    fn: Callable[[list], Any]
    gen: bool  # fn is a generator function (contains a barrier)


def _run_list(stmts: Sequence[_Stmt]) -> _Stmt:
    """A statement sequence; returns the first control signal."""
    fns = [s.fn for s in stmts]
    if not any(s.gen for s in stmts):
        if len(fns) == 1:
            return _Stmt(fns[0], False)

        def run(env: list) -> Any:
            for f in fns:
                r = f(env)
                if r:
                    return r
            return None

        return _Stmt(run, False)
    parts = [(s.fn, s.gen) for s in stmts]

    def run_g(env: list) -> Any:
        for f, g in parts:
            if g:
                r = yield from f(env)
            else:
                r = f(env)
            if r:
                return r
        return None

    return _Stmt(run_g, True)


# ----------------------------------------------------------------------------------------------
# Compiler: AST → closures
# ----------------------------------------------------------------------------------------------


@dataclass
class _Var:
    slot: int
    type: Any
    #: for __local arrays: the declaration, allocated per work-group
    local_key: Optional[int] = None


@dataclass
class _Frame:
    """Slots of one function; slot 0 holds the return value."""

    nslots: int = 1
    scopes: list[dict[str, _Var]] = field(default_factory=lambda: [{}])
    ret_type: Any = VOID

    def new(self, name: str, t: Any, local_key: Optional[int] = None) -> _Var:
        v = _Var(self.nslots, t, local_key)
        self.nslots += 1
        self.scopes[-1][name] = v
        return v

    def lookup(self, name: str) -> Optional[_Var]:
        for s in reversed(self.scopes):
            if name in s:
                return s[name]
        return None


class _LVal(NamedTuple):
    """An lvalue: either a variable slot or a memory address computed per evaluation."""

    type: Any
    slot: Optional[int]
    addr: Optional[Callable[[list], tuple[Mem, int]]]
    member: Optional[tuple[int, ...]] = None  # vector components (v.x, v.xy) of the base lvalue


_WI_FUNCS = ("get_global_id", "get_local_id", "get_group_id", "get_local_size",
             "get_num_groups", "get_global_size", "get_global_offset", "get_work_dim")
_BARRIERS = ("barrier", "work_group_barrier")
_FENCES = ("mem_fence", "read_mem_fence", "write_mem_fence", "printf")


def _addr_space(node: c_ast.Node) -> Optional[str]:
    """The ``[[ocl::...]]`` address space on a declaration or inside its type."""
    nodes = [node]
    t = getattr(node, "type", None)
    while t is not None:
        nodes.append(t)
        t = getattr(t, "type", None)
    for n in nodes:
        for spec in getattr(n, "attributes", None) or []:
            for a in getattr(spec, "attributes", None) or []:
                if getattr(a, "namespace", None) == "ocl" and a.name in (
                    "global", "local", "constant", "private"
                ):
                    return a.name
    return None


def _is_kernel(fd: c_ast.FuncDef) -> bool:
    for spec in getattr(fd.decl, "attributes", None) or []:
        for a in getattr(spec, "attributes", None) or []:
            if getattr(a, "namespace", None) == "ocl" and a.name == "kernel":
                return True
    return False


_SWIZ = {"x": 0, "y": 1, "z": 2, "w": 3}


def _swizzle(name: str, n: int) -> tuple[int, ...]:
    """Component indices of a vector member name (x, xy, s0, s3a, lo, hi, even, odd)."""
    if name in ("lo", "hi", "even", "odd"):
        m = 4 if n == 3 else n
        half = m // 2
        return {"lo": tuple(range(half)), "hi": tuple(range(half, m)),
                "even": tuple(range(0, m, 2)), "odd": tuple(range(1, m, 2))}[name]
    if name[0] in "sS" and len(name) > 1 and all(c in "0123456789abcdefABCDEF" for c in name[1:]):
        idx = tuple(int(c, 16) for c in name[1:])
    elif all(c in _SWIZ for c in name):
        idx = tuple(_SWIZ[c] for c in name)
    else:
        raise InterpError(f"unknown vector member .{name}")
    if any(i >= n for i in idx):
        raise InterpError(f"vector member .{name} out of range for {n} components")
    return idx


class _Compiler:
    """Compiles the functions of one translation unit into closures over a shared context."""

    def __init__(self, file_ast: Optional[c_ast.FileAST], ctx: _Ctx):
        self.ctx = ctx
        self.typedefs: dict[str, c_ast.Node] = {}
        self.funcs: dict[str, c_ast.FuncDef] = {}
        self.compiled: dict[str, tuple[_Frame, _Stmt, list[_Var]]] = {}
        self.globals: dict[str, tuple[Any, Any]] = {}  # program-scope constants: (type, value)
        self.local_decls: dict[int, tuple[str, ArrT]] = {}
        self.frame = _Frame()
        self.loop_depth = 0
        #: per work-group __local allocations, keyed by declaration; filled by the runner
        self.local_holder: dict[int, Mem] = {}
        self._calling: set[str] = set()
        if file_ast is not None:
            for ext in file_ast.ext:
                if isinstance(ext, c_ast.Typedef):
                    self.typedefs[ext.name] = ext.type
                elif isinstance(ext, c_ast.FuncDef):
                    self.funcs[ext.decl.name] = ext
                elif isinstance(ext, c_ast.Decl) and ext.name and not isinstance(
                    ext.type, c_ast.FuncDecl
                ):
                    self._global_decl(ext)

    # -- types ---------------------------------------------------------------------------------

    def type_of(self, node: c_ast.Node, space: Optional[str] = None) -> Any:
        """The CType of a declarator type node (TypeDecl/PtrDecl/ArrayDecl/Typename)."""
        if isinstance(node, (c_ast.Typename, c_ast.Decl)):
            return self.type_of(node.type, space)
        if isinstance(node, c_ast.AttributedType):
            return self.type_of(node.type, space)
        if isinstance(node, c_ast.TypeDecl):
            return self.type_of(node.type, space)
        if isinstance(node, c_ast.PtrDecl):
            inner_space = space or "private"
            return PtrT(self.type_of(node.type), inner_space)
        if isinstance(node, c_ast.ArrayDecl):
            if node.dim is None:
                dim = -1
            else:
                dim = self.const_int(node.dim)
            inner = self.type_of(node.type, space)
            if isinstance(inner, ArrT):
                return ArrT(inner.elem, (dim,) + inner.dims, space or "private")
            return ArrT(inner, (dim,), space or "private")
        if isinstance(node, c_ast.IdentifierType):
            names = [n for n in node.names if n not in ("const", "volatile")]
            key = " ".join(names)
            if key == "void":
                return VOID
            t = type_by_name(key)
            if t is not None:
                return t
            if len(names) == 1 and names[0] in self.typedefs:
                return self.type_of(self.typedefs[names[0]], space)
            raise InterpError(f"unknown type {key!r}", *_coord(node))
        if isinstance(node, c_ast.Struct):
            name = node.name or ""
            if name.startswith("__polyfuse_"):
                t = type_by_name(name[len("__polyfuse_"):])
                if t is not None:
                    return t
            raise InterpError(f"struct types are not supported ({name})", *_coord(node))
        if isinstance(node, c_ast.FuncDecl):
            raise InterpError("function pointers are not supported", *_coord(node))
        raise InterpError(f"unsupported type {type(node).__name__}", *_coord(node))

    def const_int(self, node: c_ast.Node) -> int:
        fn, t = self.expr(node)
        try:
            v = fn([None])
        except Exception as err:
            raise InterpError(f"array size is not a constant: {err}", *_coord(node)) from None
        return int(v)

    def _global_decl(self, decl: c_ast.Decl) -> None:
        t = self.type_of(decl.type, _addr_space(decl))
        value: Any = None
        if decl.init is not None:
            if isinstance(t, ArrT):
                vals = self._flat_init(decl.init, t)
                dims = t.dims
                if dims[0] < 0:
                    inner = int(np.prod(dims[1:])) if len(dims) > 1 else 1
                    dims = ((len(vals) + inner - 1) // inner,) + dims[1:]
                    t = ArrT(t.elem, dims, t.space)
                total = int(np.prod(dims))
                vals = vals + [0] * (total - len(vals))
                value = Ptr(Mem(decl.name, vals, "constant", self.ctx), 0)
            else:
                fn, _ = self.expr(decl.init)
                value = _converter(t)(fn([None]))
        self.globals[decl.name] = (t, value)

    def _flat_init(self, init: c_ast.Node, t: ArrT) -> list:
        """The values of a constant array initializer, flattened."""
        return [f([None]) for f in self._flat_init_dyn(init, t)]

    # -- functions -----------------------------------------------------------------------------

    def function(self, name: str) -> tuple[_Frame, _Stmt, list[_Var]]:
        if name in self.compiled:
            return self.compiled[name]
        fd = self.funcs.get(name)
        if fd is None:
            raise InterpError(f"call to unknown function {name!r}")
        saved_frame, saved_depth = self.frame, self.loop_depth
        self.frame = _Frame()
        self.loop_depth = 0
        fdecl = fd.decl.type
        self.frame.ret_type = self.type_of(fdecl.type)
        params: list[_Var] = []
        for p in (fdecl.args.params if fdecl.args else []):
            if isinstance(p, c_ast.Typename) or p.name is None:
                continue  # (void)
            space = _addr_space(p)
            t = self.type_of(p.type, space)
            if isinstance(t, ArrT):  # array parameters are pointers
                t = PtrT(t.elem if len(t.dims) == 1 else ArrT(t.elem, t.dims[1:]), t.space)
            params.append(self.frame.new(p.name, t))
        body = self.stmt(fd.body)
        result = (self.frame, body, params)
        self.compiled[name] = result
        self.frame, self.loop_depth = saved_frame, saved_depth
        return result

    # -- statements ----------------------------------------------------------------------------

    def stmt(self, node: c_ast.Node) -> _Stmt:
        m = getattr(self, "s_" + type(node).__name__, None)
        if m is None:
            if isinstance(node, c_ast.Node) and type(node).__name__ in _EXPR_NODES:
                fn, _ = self.expr(node)
                return _Stmt(_discard(fn), False)
            raise InterpError(f"unsupported statement {type(node).__name__}", *_coord(node))
        return m(node)

    def s_Compound(self, node: c_ast.Compound) -> _Stmt:
        self.frame.scopes.append({})
        try:
            items = [self.stmt(s) for s in (node.block_items or [])]
        finally:
            self.frame.scopes.pop()
        return _run_list(items) if items else _Stmt(_nop, False)

    def s_AttributedStatement(self, node: Any) -> _Stmt:
        return self.stmt(node.stmt)

    def s_Pragma(self, node: Any) -> _Stmt:
        return _Stmt(_nop, False)

    def s_EmptyStatement(self, node: Any) -> _Stmt:
        return _Stmt(_nop, False)

    def s_Typedef(self, node: c_ast.Typedef) -> _Stmt:
        self.typedefs[node.name] = node.type
        return _Stmt(_nop, False)

    def s_DeclList(self, node: c_ast.DeclList) -> _Stmt:
        return _run_list([self.stmt(d) for d in node.decls])

    def s_Decl(self, node: c_ast.Decl) -> _Stmt:
        if isinstance(node.type, c_ast.FuncDecl):
            return _Stmt(_nop, False)  # a prototype
        if "static" in (node.storage or []) or "extern" in (node.storage or []):
            raise InterpError("static/extern variables are not supported", *_coord(node))
        space = _addr_space(node)
        t = self.type_of(node.type, space)
        if isinstance(t, ArrT):
            return self._array_decl(node, t, space)
        init = None
        if node.init is not None:
            if isinstance(node.init, c_ast.InitList):
                if not isinstance(t, VecT):
                    raise InterpError("initializer list for a scalar", *_coord(node))
                fns = [self.expr(e)[0] for e in node.init.exprs]
                init = (lambda env, fns=fns: tuple(f(env) for f in fns)), t
            else:
                init = self.expr(node.init)
        # the variable is in scope after its declarator (so `int i = i;` sees the outer i)
        var = self.frame.new(node.name, t)
        slot = var.slot
        if init is None:
            zero = _zero(t)

            def decl0(env: list) -> None:
                env[slot] = zero

            return _Stmt(decl0, False)
        fn, it = init
        conv = self._assign_conv(t, it, node)

        def decl(env: list) -> None:
            env[slot] = conv(fn(env))

        return _Stmt(decl, False)

    def _array_decl(self, node: c_ast.Decl, t: ArrT, space: Optional[str]) -> _Stmt:
        vals: Optional[list] = None
        if node.init is not None:
            vals = self._flat_init_dyn(node.init, t)
            if t.dims[0] < 0:
                inner = int(np.prod(t.dims[1:])) if len(t.dims) > 1 else 1
                t = ArrT(t.elem, ((len(vals) + inner - 1) // inner,) + t.dims[1:], t.space)
        if any(d < 0 for d in t.dims):
            raise InterpError(f"array {node.name} has no size", *_coord(node))
        total = int(np.prod(t.dims))
        if space == "local":
            key = id(node)
            self.local_decls[key] = (node.name, t)
            var = self.frame.new(node.name, t, key)
            slot = var.slot
            holder = self.local_holder

            def decl_local(env: list) -> None:
                env[slot] = Ptr(holder[key], 0)

            return _Stmt(decl_local, False)
        var = self.frame.new(node.name, t)
        slot = var.slot
        zero = _zero(t.elem)
        ctx = self.ctx
        name = node.name
        if vals is None:

            def decl_priv(env: list) -> None:
                env[slot] = Ptr(Mem(name, [zero] * total, "private", ctx), 0)

            return _Stmt(decl_priv, False)
        fns = vals

        def decl_priv_init(env: list) -> None:
            data = [f(env) for f in fns]
            data += [zero] * (total - len(data))
            env[slot] = Ptr(Mem(name, data, "private", ctx), 0)

        return _Stmt(decl_priv_init, False)

    def _flat_init_dyn(self, init: c_ast.Node, t: ArrT) -> list:
        """An array initializer flattened: per element, its value as a function of the
        environment, converted to the element type."""
        conv = _converter(t.elem)
        out: list = []

        def walk(n: c_ast.Node) -> None:
            if isinstance(n, c_ast.InitList):
                for e in n.exprs:
                    walk(e)
            else:
                fn, _ = self.expr(n)
                out.append(lambda env, fn=fn: conv(fn(env)))

        walk(init)
        return out

    def s_If(self, node: c_ast.If) -> _Stmt:
        cond = self.cond(node.cond)
        then = self.stmt(node.iftrue) if node.iftrue else _Stmt(_nop, False)
        els = self.stmt(node.iffalse) if node.iffalse else _Stmt(_nop, False)
        tf, ef = then.fn, els.fn
        if not (then.gen or els.gen):

            def if_(env: list) -> Any:
                if cond(env):
                    return tf(env)
                return ef(env)

            return _Stmt(if_, False)
        tg, eg = then.gen, els.gen

        def if_g(env: list) -> Any:
            if cond(env):
                if tg:
                    return (yield from tf(env))
                return tf(env)
            if eg:
                return (yield from ef(env))
            return ef(env)

        return _Stmt(if_g, True)

    def _loop(self, init: Optional[_Stmt], cond: Optional[Fn], nxt: Optional[Fn], body: _Stmt,
              post_test: bool = False) -> _Stmt:
        ctx = self.ctx
        bf = body.fn
        init_fn = init.fn if init is not None else None
        init_gen = init.gen if init is not None else False
        if not body.gen and not init_gen:

            def loop(env: list) -> Any:
                if init_fn is not None:
                    init_fn(env)
                first = post_test
                while first or cond is None or cond(env):
                    first = False
                    ctx.steps += 1
                    if ctx.steps > ctx.max_steps:
                        raise InterpError("step limit exceeded (infinite loop?)")
                    r = bf(env)
                    if r == _BREAK:
                        break
                    if r == _RETURN:
                        return r
                    if nxt is not None:
                        nxt(env)
                return None

            return _Stmt(loop, False)

        def loop_g(env: list) -> Any:
            if init_fn is not None:
                if init_gen:
                    yield from init_fn(env)
                else:
                    init_fn(env)
            first = post_test
            while first or cond is None or cond(env):
                first = False
                ctx.steps += 1
                if ctx.steps > ctx.max_steps:
                    raise InterpError("step limit exceeded (infinite loop?)")
                r = (yield from bf(env)) if body.gen else bf(env)
                if r == _BREAK:
                    break
                if r == _RETURN:
                    return r
                if nxt is not None:
                    nxt(env)
            return None

        return _Stmt(loop_g, True)

    def s_For(self, node: c_ast.For) -> _Stmt:
        self.frame.scopes.append({})
        try:
            init = self.stmt(node.init) if node.init is not None else None
            cond = self.cond(node.cond) if node.cond is not None else None
            nxt = self.expr(node.next)[0] if node.next is not None else None
            self.loop_depth += 1
            body = self.stmt(node.stmt) if node.stmt is not None else _Stmt(_nop, False)
            self.loop_depth -= 1
        finally:
            self.frame.scopes.pop()
        return self._loop(init, cond, nxt, body)

    def s_While(self, node: c_ast.While) -> _Stmt:
        cond = self.cond(node.cond)
        self.loop_depth += 1
        body = self.stmt(node.stmt) if node.stmt is not None else _Stmt(_nop, False)
        self.loop_depth -= 1
        return self._loop(None, cond, None, body)

    def s_DoWhile(self, node: c_ast.DoWhile) -> _Stmt:
        cond = self.cond(node.cond)
        self.loop_depth += 1
        body = self.stmt(node.stmt) if node.stmt is not None else _Stmt(_nop, False)
        self.loop_depth -= 1
        return self._loop(None, cond, None, body, post_test=True)

    def s_Break(self, node: Any) -> _Stmt:
        return _Stmt(lambda env: _BREAK, False)

    def s_Continue(self, node: Any) -> _Stmt:
        return _Stmt(lambda env: _CONTINUE, False)

    def s_Return(self, node: c_ast.Return) -> _Stmt:
        if node.expr is None:
            return _Stmt(lambda env: _RETURN, False)
        fn, t = self.expr(node.expr)
        conv = _converter(self.frame.ret_type)

        def ret(env: list) -> int:
            env[0] = conv(fn(env))
            return _RETURN

        return _Stmt(ret, False)

    def s_FuncCall(self, node: c_ast.FuncCall) -> _Stmt:
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        if name in _BARRIERS:
            key = id(node)
            ctx = self.ctx

            def barrier(env: list) -> Any:
                ctx.steps += 1
                yield key
                return None

            return _Stmt(barrier, True)
        fn, _ = self.expr(node)
        return _Stmt(_discard(fn), False)

    def s_Switch(self, node: c_ast.Switch) -> _Stmt:
        """``switch`` with constant case labels and fall-through, no barriers inside."""
        sel, _ = self.expr(node.cond)
        items = node.stmt.block_items if isinstance(node.stmt, c_ast.Compound) else [node.stmt]
        flat: list[tuple[Optional[Any], _Stmt]] = []  # (label or 'default' or None, stmt)
        self.frame.scopes.append({})
        self.loop_depth += 1
        try:
            def add(n: c_ast.Node) -> None:
                if isinstance(n, c_ast.Case):
                    flat.append((self.const_int(n.expr), _Stmt(_nop, False)))
                    for s in n.stmts or []:
                        add(s)
                elif isinstance(n, c_ast.Default):
                    flat.append(("default", _Stmt(_nop, False)))
                    for s in n.stmts or []:
                        add(s)
                else:
                    flat.append((None, self.stmt(n)))

            for it in items or []:
                add(it)
        finally:
            self.loop_depth -= 1
            self.frame.scopes.pop()
        if any(s.gen for _, s in flat):
            raise InterpError("barrier inside switch is not supported", *_coord(node))
        labels = {lab: i for i, (lab, _) in enumerate(flat) if lab is not None}
        fns = [s.fn for _, s in flat]

        def switch(env: list) -> Any:
            v = sel(env)
            start = labels.get(v, labels.get("default"))
            if start is None:
                return None
            for f in fns[start:]:
                r = f(env)
                if r == _BREAK:
                    return None
                if r:
                    return r
            return None

        return _Stmt(switch, False)

    def s_Label(self, node: Any) -> _Stmt:
        raise InterpError("labels and goto are not supported", *_coord(node))

    s_Goto = s_Label

    # -- expressions ---------------------------------------------------------------------------

    def cond(self, node: c_ast.Node) -> Fn:
        fn, t = self.expr(node)
        if isinstance(t, VecT):
            raise InterpError("vector used as a condition", *_coord(node))
        return fn

    def expr(self, node: c_ast.Node) -> tuple[Fn, Any]:
        m = getattr(self, "e_" + type(node).__name__, None)
        if m is None:
            raise InterpError(f"unsupported expression {type(node).__name__}", *_coord(node))
        return m(node)

    def e_Constant(self, node: c_ast.Constant) -> tuple[Fn, Any]:
        v, t = _parse_constant(node)
        return (lambda env: v), t

    def e_ID(self, node: c_ast.ID) -> tuple[Fn, Any]:
        var = self.frame.lookup(node.name)
        if var is not None:
            slot = var.slot
            return (lambda env: env[slot]), var.type
        if node.name in self.globals:
            t, v = self.globals[node.name]
            return (lambda env: v), t
        if node.name in ("true", "false"):
            v = 1 if node.name == "true" else 0
            return (lambda env: v), INT
        raise InterpError(f"undeclared identifier {node.name!r}", *_coord(node))

    def lvalue(self, node: c_ast.Node) -> _LVal:
        if isinstance(node, c_ast.ID):
            var = self.frame.lookup(node.name)
            if var is None:
                raise InterpError(f"not assignable: {node.name}", *_coord(node))
            return _LVal(var.type, var.slot, None)
        if isinstance(node, c_ast.ArrayRef):
            base, bt = self.expr(node.name)
            idx, it = self.expr(node.subscript)
            if isinstance(it, (PtrT, ArrT)) and isinstance(bt, Scalar):  # i[a]
                base, bt, idx, it = idx, it, base, bt
            et = self._elem_type(bt, node)

            def addr(env: list) -> tuple[Mem, int]:
                p = base(env)
                return p.mem, p.off + idx(env)

            return _LVal(et, None, addr)
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            base, bt = self.expr(node.expr)
            et = self._elem_type(bt, node)

            def addr_d(env: list) -> tuple[Mem, int]:
                p = base(env)
                return p.mem, p.off

            return _LVal(et, None, addr_d)
        if isinstance(node, c_ast.StructRef) and node.type == ".":
            inner = self.lvalue(node.name)
            if not isinstance(inner.type, VecT):
                raise InterpError("member access on a non-vector", *_coord(node))
            comps = _swizzle(node.field.name, inner.type.n)
            if inner.member is not None:
                comps = tuple(inner.member[c] for c in comps)
            t = inner.type.elem if len(comps) == 1 else VecT(inner.type.elem, len(comps))
            return _LVal(t, inner.slot, inner.addr, comps)
        if isinstance(node, c_ast.StructRef) and node.type == "->":
            raise InterpError("struct pointers are not supported", *_coord(node))
        raise InterpError(f"not an lvalue: {type(node).__name__}", *_coord(node))

    def _elem_type(self, bt: Any, node: c_ast.Node) -> Any:
        if isinstance(bt, PtrT):
            return bt.elem
        if isinstance(bt, ArrT):
            if len(bt.dims) == 1:
                return bt.elem
            return ArrT(bt.elem, bt.dims[1:], bt.space)
        raise InterpError("subscript of a non-array", *_coord(node))

    def _lv_get(self, lv: _LVal) -> Fn:
        """Read an lvalue (for compound assignment the address is computed separately)."""
        if lv.member is not None:
            raise AssertionError
        if lv.slot is not None:
            slot = lv.slot
            return lambda env: env[slot]
        addr = lv.addr
        assert addr is not None
        if isinstance(lv.type, ArrT):  # a row of a multi-dimensional array decays
            stride = int(np.prod(lv.type.dims))

            def row(env: list) -> Ptr:
                m, i = addr(env)
                return Ptr(m, i * stride)

            return row

        def load(env: list) -> Any:
            m, i = addr(env)
            return m.load(i)

        return load

    def e_ArrayRef(self, node: c_ast.ArrayRef) -> tuple[Fn, Any]:
        lv = self.lvalue(node)
        if isinstance(lv.type, ArrT):
            # t[i] of a 2-D array: a pointer to row i
            base, bt = self.expr(node.name)
            idx, _ = self.expr(node.subscript)
            stride = int(np.prod(lv.type.dims))

            def row(env: list) -> Ptr:
                p = base(env)
                return Ptr(p.mem, p.off + idx(env) * stride)

            return row, lv.type
        if lv.slot is None and lv.member is None and isinstance(node.name, c_ast.ID) and (
            isinstance(lv.type, (Scalar, VecT))
        ):
            # the hot path: a[i] with a a pointer/array variable, loaded without an address tuple
            base, bt = self.expr(node.name)
            idx, it = self.expr(node.subscript)
            if isinstance(bt, (PtrT, ArrT)) and isinstance(it, Scalar):

                def load_direct(env: list) -> Any:
                    p = base(env)
                    return p.mem.load(p.off + idx(env))

                return load_direct, lv.type
        return self._lv_get(lv), lv.type

    def e_StructRef(self, node: c_ast.StructRef) -> tuple[Fn, Any]:
        if node.type != ".":
            raise InterpError("struct pointers are not supported", *_coord(node))
        base, bt = self.expr(node.name)
        if not isinstance(bt, VecT):
            raise InterpError("member access on a non-vector", *_coord(node))
        comps = _swizzle(node.field.name, bt.n)
        if len(comps) == 1:
            c = comps[0]
            return (lambda env: base(env)[c]), bt.elem

        def swz(env: list) -> tuple:
            v = base(env)
            return tuple(v[c] for c in comps)

        return swz, VecT(bt.elem, len(comps))

    def _store(self, lv: _LVal, node: c_ast.Node) -> Callable[[list, Any, Any], None]:
        """``store(env, addr_or_None, value)``: writes an (already converted) value."""
        if lv.member is None:
            if lv.slot is not None:
                slot = lv.slot

                def st_var(env: list, a: Any, v: Any) -> None:
                    env[slot] = v

                return st_var

            def st_mem(env: list, a: Any, v: Any) -> None:
                a[0].store(a[1], v)

            return st_mem
        comps = lv.member

        def merge(old: tuple, v: Any) -> tuple:
            new = list(old)
            if len(comps) == 1:
                new[comps[0]] = v
            else:
                for c, x in zip(comps, v):
                    new[c] = x
            return tuple(new)

        if lv.slot is not None:
            slot = lv.slot

            def st_vmember(env: list, a: Any, v: Any) -> None:
                env[slot] = merge(env[slot], v)

            return st_vmember

        def st_mmember(env: list, a: Any, v: Any) -> None:
            m, i = a
            m.store(i, merge(m.load(i), v))

        return st_mmember

    def _load_at(self, lv: _LVal) -> Callable[[list, Any], Any]:
        """``load(env, addr_or_None)`` of an lvalue whose address was computed once."""
        comps = lv.member
        if lv.slot is not None:
            slot = lv.slot
            if comps is None:
                return lambda env, a: env[slot]
            if len(comps) == 1:
                c = comps[0]
                return lambda env, a: env[slot][c]
            return lambda env, a: tuple(env[slot][c] for c in comps)
        if comps is None:
            return lambda env, a: a[0].load(a[1])
        if len(comps) == 1:
            c = comps[0]
            return lambda env, a: a[0].load(a[1])[c]
        return lambda env, a: tuple(a[0].load(a[1])[c] for c in comps)

    def _assign_conv(self, t: Any, vt: Any, node: c_ast.Node) -> Callable[[Any], Any]:
        if isinstance(t, (PtrT, ArrT)):
            return lambda v: v
        if isinstance(vt, (PtrT, ArrT)):
            raise InterpError("pointer assigned to a non-pointer", *_coord(node))
        return _converter(t)

    def e_Assignment(self, node: c_ast.Assignment) -> tuple[Fn, Any]:
        lv = self.lvalue(node.lvalue)
        rfn, rt = self.expr(node.rvalue)
        addr = lv.addr
        store = self._store(lv, node)
        if node.op == "=":
            conv = self._assign_conv(lv.type, rt, node)

            def assign(env: list) -> Any:
                a = addr(env) if addr is not None else None
                v = conv(rfn(env))
                store(env, a, v)
                return v

            return assign, lv.type
        op = node.op[:-1]
        load = self._load_at(lv)
        if isinstance(lv.type, PtrT):  # p += n
            sign = 1 if op == "+" else -1

            def ptr_assign(env: list) -> Any:
                a = addr(env) if addr is not None else None
                p = load(env, a)
                v = Ptr(p.mem, p.off + sign * rfn(env))
                store(env, a, v)
                return v

            return ptr_assign, lv.type
        opfn, _rtype = self._binop(op, lv.type, rt, node)
        conv = _converter(lv.type)
        t = lv.type
        if (lv.slot is not None and lv.member is None and op in ("+", "-", "*")
                and isinstance(t, Scalar) and isinstance(rt, Scalar)
                and (t.is_float or (t.signed and not rt.is_float))
                and arith_type(t, rt) == (t if t.is_float else _promote(t))):
            # hot path: acc += x on a private float/int variable
            slot = lv.slot
            half = 1 << (t.bits - 1)
            body = f"env[slot] {op} rfn(env)"
            if t.is_float:
                code = f"def run(env):\n    r = env[slot] = float({body})\n    return r\n"
            else:
                code = (f"def run(env):\n    r = {body}\n"
                        "    if not -half <= r < half:\n        r = conv(r)\n"
                        "    env[slot] = r\n    return r\n")
            scope: dict[str, Any] = {"slot": slot, "rfn": rfn, "half": half, "conv": conv}
            exec(code, scope)  # noqa: S102 - generated from a fixed table of operators
            return scope["run"], lv.type

        def compound(env: list) -> Any:
            a = addr(env) if addr is not None else None
            v = conv(opfn(load(env, a), rfn(env)))
            store(env, a, v)
            return v

        return compound, lv.type

    def e_UnaryOp(self, node: c_ast.UnaryOp) -> tuple[Fn, Any]:
        op = node.op
        if op in ("++", "--", "p++", "p--"):
            lv = self.lvalue(node.expr)
            addr = lv.addr
            load = self._load_at(lv)
            store = self._store(lv, node)
            delta = 1 if "+" in op else -1
            post = op.startswith("p")
            if isinstance(lv.type, PtrT):

                def incp(env: list) -> Any:
                    a = addr(env) if addr is not None else None
                    old = load(env, a)
                    new = Ptr(old.mem, old.off + delta)
                    store(env, a, new)
                    return old if post else new

                return incp, lv.type
            conv = _converter(lv.type)
            t = lv.type
            if lv.slot is not None and lv.member is None and isinstance(t, Scalar) and (
                t.signed and not t.is_float and t.bits >= 32
            ):
                slot = lv.slot
                top = (1 << (t.bits - 1)) - 1
                bottom = -top - 1

                def inc_var(env: list) -> Any:
                    old = env[slot]
                    new = old + delta
                    if new > top or new < bottom:
                        new = conv(new)
                    env[slot] = new
                    return old if post else new

                return inc_var, lv.type

            def inc(env: list) -> Any:
                a = addr(env) if addr is not None else None
                old = load(env, a)
                new = conv(old + delta)
                store(env, a, new)
                return old if post else new

            return inc, lv.type
        if op == "sizeof":
            if isinstance(node.expr, c_ast.Typename):
                t = self.type_of(node.expr)
            else:
                t = self.expr(node.expr)[1]
            v = _sizeof(t)
            return (lambda env: v), ULONG
        if op == "&":
            lv = self.lvalue(node.expr)
            if lv.addr is None or lv.member is not None:
                raise InterpError("address of a private scalar is not supported",
                                  *_coord(node))
            addr = lv.addr

            def address(env: list) -> Ptr:
                m, i = addr(env)
                return Ptr(m, i)

            space = "private"
            return address, PtrT(lv.type, space)
        if op == "*":
            lv = self.lvalue(node)
            return self._lv_get(lv), lv.type
        fn, t = self.expr(node.expr)
        if op == "!":
            if isinstance(t, VecT):
                raise InterpError("! on a vector", *_coord(node))
            return (lambda env: 0 if fn(env) else 1), INT
        if isinstance(t, VecT):
            ec = _converter(t.elem)
            if op == "-":
                return (lambda env: tuple(ec(-x) for x in fn(env))), t
            if op == "+":
                return fn, t
            if op == "~":
                return (lambda env: tuple(ec(~x) for x in fn(env))), t
        if not isinstance(t, Scalar):
            raise InterpError(f"unary {op} on a non-arithmetic operand", *_coord(node))
        rt = _promote(t)
        conv = _converter(rt)
        if op == "-":
            if rt.is_float:
                return (lambda env: -fn(env)), rt
            return (lambda env: conv(-fn(env))), rt
        if op == "+":
            return (lambda env: conv(fn(env))), rt
        if op == "~":
            if rt.is_float:
                raise InterpError("~ on a floating-point value", *_coord(node))
            return (lambda env: conv(~fn(env))), rt
        raise InterpError(f"unsupported unary operator {op}", *_coord(node))

    def _binop(self, op: str, ta: Any, tb: Any, node: c_ast.Node) -> tuple[Callable, Any]:
        """``f(a, b)`` computing ``a op b`` with C semantics, and the result type."""
        if isinstance(ta, VecT) or isinstance(tb, VecT):
            rt = arith_type(ta, tb)
            n = rt.n
            sf, _ = self._binop(op, ta.elem if isinstance(ta, VecT) else ta,
                                tb.elem if isinstance(tb, VecT) else tb, node)
            comparison = op in ("<", ">", "<=", ">=", "==", "!=")

            def vec(a: Any, b: Any) -> tuple:
                av = a if isinstance(a, tuple) else (a,) * n
                bv = b if isinstance(b, tuple) else (b,) * n
                r = tuple(sf(x, y) for x, y in zip(av, bv))
                if comparison:  # vector comparisons give -1 for true
                    return tuple(-x for x in r)
                return r

            return vec, (VecT(INT, n) if comparison else rt)
        if op in ("<<", ">>"):
            rt = _promote(ta)
            if rt.is_float or _promote(tb).is_float:
                raise InterpError("shift of a floating-point value", *_coord(node))
            conv = _converter(rt)
            bits = rt.bits
            if op == "<<":
                return (lambda a, b: conv(a << (b % bits))), rt
            return (lambda a, b: conv(a >> (b % bits))), rt
        if op in ("&&", "||"):
            raise AssertionError("short-circuit handled by caller")
        rt = arith_type(ta, tb)
        comparison = op in ("<", ">", "<=", ">=", "==", "!=")
        if rt.is_float:
            if op in ("%", "&", "|", "^"):
                raise InterpError(f"operator {op} on floating-point values", *_coord(node))
            f = _FLOAT_OPS[op]
            if comparison:
                return f, INT
            return f, rt
        conv = _converter(rt)
        f = _INT_OPS[op]
        if comparison:
            if not rt.signed:  # operands converted to the unsigned common type
                return (lambda a, b: f(conv(a), conv(b))), INT
            return f, INT
        if not rt.signed and op in ("/", "%"):
            return (lambda a, b: f(conv(a), conv(b))), rt
        return (lambda a, b: conv(f(a, b))), rt

    def e_BinaryOp(self, node: c_ast.BinaryOp) -> tuple[Fn, Any]:
        op = node.op
        fa, ta = self.expr(node.left)
        fb, tb = self.expr(node.right)
        if op == "&&":
            return (lambda env: 1 if (fa(env) and fb(env)) else 0), INT
        if op == "||":
            return (lambda env: 1 if (fa(env) or fb(env)) else 0), INT
        pa = isinstance(ta, (PtrT, ArrT))
        pb = isinstance(tb, (PtrT, ArrT))
        if pa or pb:
            return self._ptr_binop(op, fa, ta, fb, tb, node)
        f, rt = self._binop(op, ta, tb, node)
        fast = _fast_binop(op, ta, tb, rt, fa, fb, node)
        if fast is not None:
            return fast, rt
        return (lambda env: f(fa(env), fb(env))), rt

    def _ptr_binop(self, op: str, fa: Fn, ta: Any, fb: Fn, tb: Any,
                   node: c_ast.Node) -> tuple[Fn, Any]:
        def ptype(t: Any) -> PtrT:
            if isinstance(t, ArrT):
                return PtrT(t.elem if len(t.dims) == 1 else ArrT(t.elem, t.dims[1:]), t.space)
            return t

        def scale(t: PtrT) -> int:
            return int(np.prod(t.elem.dims)) if isinstance(t.elem, ArrT) else 1

        if isinstance(ta, (PtrT, ArrT)) and isinstance(tb, (PtrT, ArrT)):
            if op == "-":
                s = scale(ptype(ta))
                return (lambda env: (fa(env).off - fb(env).off) // s), LONG
            f = _INT_OPS.get(op)
            if f is None or op not in ("<", ">", "<=", ">=", "==", "!="):
                raise InterpError(f"pointer operator {op} not supported", *_coord(node))
            return (lambda env: f(fa(env).off, fb(env).off)), INT
        if op == "+" and isinstance(tb, (PtrT, ArrT)):
            fa, ta, fb, tb = fb, tb, fa, ta
        if op not in ("+", "-") or not isinstance(ta, (PtrT, ArrT)):
            raise InterpError(f"pointer operator {op} not supported", *_coord(node))
        pt = ptype(ta)
        s = scale(pt)
        sign = 1 if op == "+" else -1

        def padd(env: list) -> Ptr:
            p = fa(env)
            return Ptr(p.mem, p.off + sign * s * fb(env))

        return padd, pt

    def e_TernaryOp(self, node: c_ast.TernaryOp) -> tuple[Fn, Any]:
        c = self.cond(node.cond)
        ft, tt = self.expr(node.iftrue)
        ff, tf = self.expr(node.iffalse)
        if isinstance(tt, (PtrT, ArrT)) or isinstance(tf, (PtrT, ArrT)):
            rt = tt
            return (lambda env: ft(env) if c(env) else ff(env)), rt
        rt = arith_type(tt, tf)
        conv = _converter(rt)
        return (lambda env: conv(ft(env)) if c(env) else conv(ff(env))), rt

    def e_Cast(self, node: c_ast.Cast) -> tuple[Fn, Any]:
        t = self.type_of(node.to_type)
        if isinstance(node.expr, c_ast.ExprList):  # vector literal (float4)(a, b, c, d)
            if not isinstance(t, VecT):
                raise InterpError("parenthesized list cast to a non-vector", *_coord(node))
            parts = [self.expr(e) for e in node.expr.exprs]
            ec = _converter(t.elem)

            def vlit(env: list) -> tuple:
                out: list = []
                for f, _pt in parts:
                    v = f(env)
                    if isinstance(v, tuple):
                        out.extend(ec(x) for x in v)
                    else:
                        out.append(ec(v))
                if len(out) == 1:
                    out = out * t.n
                if len(out) != t.n:
                    raise InterpError(f"vector literal with {len(out)} components for {t.name}")
                return tuple(out)

            return vlit, t
        fn, ft = self.expr(node.expr)
        if isinstance(t, (PtrT, VoidT)):
            if isinstance(t, PtrT) and isinstance(ft, (PtrT, ArrT)):
                elem_old = ft.elem if isinstance(ft, PtrT) else ft.elem
                if _sizeof(elem_old) != _sizeof(t.elem):
                    raise InterpError("pointer casts between element sizes are not supported",
                                      *_coord(node))
            return fn, t
        conv = _converter(t)
        if isinstance(t, VecT) and isinstance(ft, VecT):
            raise InterpError("vector casts: use convert_<type>()", *_coord(node))
        return (lambda env: conv(fn(env))), t

    def e_ExprList(self, node: c_ast.ExprList) -> tuple[Fn, Any]:
        parts = [self.expr(e) for e in node.exprs]
        fns = [f for f, _ in parts]

        def comma(env: list) -> Any:
            v = None
            for f in fns:
                v = f(env)
            return v

        return comma, parts[-1][1]

    def e_InitList(self, node: c_ast.InitList) -> tuple[Fn, Any]:
        raise InterpError("initializer list in an expression", *_coord(node))

    def e_FuncCall(self, node: c_ast.FuncCall) -> tuple[Fn, Any]:
        if not isinstance(node.name, c_ast.ID):
            raise InterpError("indirect calls are not supported", *_coord(node))
        name = node.name.name
        args = list(node.args.exprs) if node.args is not None else []
        ctx = self.ctx
        if name in _WI_FUNCS:
            if name == "get_work_dim":
                return (lambda env: ctx.wdim), UINT
            d, _ = self.expr(args[0])
            attr = {"get_global_id": "gid", "get_local_id": "l", "get_group_id": "g",
                    "get_local_size": "lsz", "get_num_groups": "ngr",
                    "get_global_size": "gsz", "get_global_offset": "off"}[name]
            default = 1 if attr in ("lsz", "ngr", "gsz") else 0

            def wi(env: list) -> int:
                k = d(env)
                if 0 <= k < 3:
                    return getattr(ctx, attr)[k]
                return default

            return wi, ULONG
        if name in _BARRIERS:
            raise InterpError("barrier() inside an expression", *_coord(node))
        if name in _FENCES:
            fns = [self.expr(a)[0] for a in args if not isinstance(a, c_ast.Constant)
                   or a.type != "string"]
            del fns
            return (lambda env: 0), INT
        if name in self.funcs:
            return self._call_user(name, args, node)
        parts = [self.expr(a) for a in args]
        b = _builtin(name, parts, node, self)
        if b is None:
            raise InterpError(f"call to unknown function {name!r}", *_coord(node))
        return b

    def _call_user(self, name: str, args: list, node: c_ast.Node) -> tuple[Fn, Any]:
        if name in self._calling:
            raise InterpError(f"recursive call to {name!r}", *_coord(node))
        self._calling.add(name)
        try:
            frame, body, params = self.function(name)
        finally:
            self._calling.discard(name)
        if body.gen:
            raise InterpError(f"barrier inside the helper function {name!r} is not supported",
                              *_coord(node))
        if len(params) != len(args):
            raise InterpError(f"{name}: expected {len(params)} arguments", *_coord(node))
        parts = [self.expr(a) for a in args]
        convs = [self._assign_conv(p.type, t, node) for p, (_, t) in zip(params, parts)]
        fns = [f for f, _ in parts]
        slots = [p.slot for p in params]
        bf = body.fn
        nslots = frame.nslots  # final size, read lazily below
        del nslots

        def call(env: list) -> Any:
            callee: list = [None] * frame.nslots
            for s, f, c in zip(slots, fns, convs):
                callee[s] = c(f(env))
            bf(callee)
            return callee[0]

        return call, frame.ret_type


def _fast_binop(op: str, ta: Any, tb: Any, rt: Any, fa: Fn, fb: Fn,
                node: c_ast.BinaryOp) -> Optional[Fn]:
    """One closure for the common cases (float, or signed int without overflow; a constant
    right operand), avoiding the generic call chain; None when the generic path is needed."""
    if not (isinstance(ta, Scalar) and isinstance(tb, Scalar) and isinstance(rt, Scalar)):
        return None
    comparison = op in ("<", ">", "<=", ">=", "==", "!=")
    if comparison:
        common = arith_type(ta, tb)
        if not common.is_float and not common.signed:
            return None
    elif op not in ("+", "-", "*") or not (rt.is_float or rt.signed):
        return None
    if not rt.is_float and not comparison:
        half = 1 << (rt.bits - 1)
        wrap = _converter(rt)
    else:
        half, wrap = 0, float
    const = isinstance(node.right, c_ast.Constant) and node.right.type in ("int", "float",
                                                                           "double")
    k = fb([None]) if const else None
    rhs = "k" if const else "fb(env)"
    body = f"fa(env) {op} {rhs}"
    if comparison:
        body = f"1 if {body} else 0"
    if comparison or rt.is_float:
        code = f"def run(env):\n    return {body}\n"
    else:
        code = (f"def run(env):\n    r = {body}\n"
                f"    return r if -half <= r < half else wrap(r)\n")
    scope: dict[str, Any] = {"fa": fa, "fb": fb, "k": k, "half": half, "wrap": wrap}
    exec(code, scope)  # noqa: S102 - generated from a fixed table of operators
    return scope["run"]


_EXPR_NODES = {"Assignment", "UnaryOp", "BinaryOp", "TernaryOp", "Cast", "ExprList", "ID",
               "Constant", "ArrayRef", "StructRef"}


def _nop(env: list) -> None:
    return None


def _discard(fn: Fn) -> Fn:
    def run(env: list) -> None:
        fn(env)
        return None

    return run


def _zero(t: Any) -> Any:
    if isinstance(t, Scalar):
        return 0.0 if t.is_float else 0
    if isinstance(t, VecT):
        return (0.0 if t.elem.is_float else 0,) * t.n
    return None


def _sizeof(t: Any) -> int:
    if isinstance(t, (Scalar, VecT)):
        return t.size
    if isinstance(t, PtrT):
        return 8
    if isinstance(t, ArrT):
        return _sizeof(t.elem) * int(np.prod(t.dims))
    raise InterpError(f"sizeof({t})")


def _coord(node: Any) -> tuple[Optional[str], Optional[int]]:
    c = getattr(node, "coord", None)
    if c is None:
        return None, None
    return getattr(c, "file", None), getattr(c, "line", None)


def _parse_constant(node: c_ast.Constant) -> tuple[Any, Scalar]:
    s = node.value
    if node.type == "char":
        body = s[1:-1]
        if body.startswith("\\"):
            v = {"n": 10, "t": 9, "0": 0, "\\": 92, "'": 39, "r": 13}.get(body[1:], None)
            if v is None:
                v = int(body[1:], 8) if body[1:].isdigit() else ord(body[1])
        else:
            v = ord(body)
        return v, CHAR
    if node.type == "string":
        raise InterpError("string literals are not supported", *_coord(node))
    low = s.lower()
    is_hex = low.startswith("0x")
    if node.type in ("float", "double", "long double") or (
        not is_hex and ("." in low or "e" in low)
    ) or (is_hex and "p" in low):
        body = s
        t = DOUBLE
        if low.endswith("f"):
            body, t = s[:-1], FLOAT
        elif low.endswith("l"):
            body = s[:-1]
        if body.lower().startswith("0x"):
            v = float.fromhex(body)
        else:
            v = float(body)
        return (_to_f32(v) if t is FLOAT else v), t
    suffix = ""
    while low and low[-1] in "ul":
        suffix = low[-1] + suffix
        low = low[:-1]
    if low.startswith("0x"):
        v = int(low, 16)
    elif low.startswith("0b"):
        v = int(low, 2)
    elif low.startswith("0") and len(low) > 1:
        v = int(low, 8)
    else:
        v = int(low)
    unsigned = "u" in suffix
    long_ = "l" in suffix
    if not long_ and not unsigned and v < 2**31:
        return v, INT
    if not long_ and (unsigned or is_hex) and v < 2**32:
        return v, UINT
    if not unsigned and v < 2**63:
        return v, LONG
    return v, ULONG


# ----------------------------------------------------------------------------------------------
# Operators
# ----------------------------------------------------------------------------------------------


def _cdiv(a: int, b: int) -> int:
    """C integer division: truncation toward zero."""
    if b == 0:
        raise InterpError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _cmod(a: int, b: int) -> int:
    """C remainder: the sign of the dividend."""
    return a - b * _cdiv(a, b)


def _fdiv(a: float, b: float) -> float:
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


_INT_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _cdiv,
    "%": _cmod,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b),
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
}
_FLOAT_OPS = dict(_INT_OPS)
_FLOAT_OPS["/"] = _fdiv


# ----------------------------------------------------------------------------------------------
# Built-in functions
# ----------------------------------------------------------------------------------------------


def _safe(f: Callable[..., float]) -> Callable[..., float]:
    def g(*a: Any) -> float:
        try:
            return f(*a)
        except OverflowError:
            return math.inf
        except (ValueError, ZeroDivisionError):
            return math.nan

    return g


def _exp(x: float) -> float:
    return math.exp(x) if x < 709 else math.inf


def _log(x: float) -> float:
    if x == 0:
        return -math.inf
    return math.log(x) if x > 0 else math.nan


def _pow(x: float, y: float) -> float:
    try:
        r = math.pow(x, y)
    except OverflowError:
        return math.inf
    except (ValueError, ZeroDivisionError):
        return math.nan if x < 0 else math.inf
    return r


def _fmax(a: float, b: float) -> float:
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return max(a, b)


def _fmin(a: float, b: float) -> float:
    if math.isnan(a):
        return b
    if math.isnan(b):
        return a
    return min(a, b)


def _round(x: float) -> float:
    if math.isinf(x) or math.isnan(x):
        return x
    return float(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def _rint(x: float) -> float:
    if math.isinf(x) or math.isnan(x):
        return x
    return float(round(x))


def _sign(x: float) -> float:
    if math.isnan(x):
        return 0.0
    return 1.0 if x > 0 else (-1.0 if x < 0 else x)


_FLOAT1: dict[str, Callable[[float], float]] = {
    "exp": _exp, "exp2": _safe(lambda x: 2.0 ** x), "exp10": _safe(lambda x: 10.0 ** x),
    "expm1": _safe(math.expm1), "log": _log, "log2": _safe(lambda x: _log(x) / math.log(2)),
    "log10": _safe(lambda x: _log(x) / math.log(10)), "log1p": _safe(math.log1p),
    "sqrt": _safe(math.sqrt), "rsqrt": _safe(lambda x: 1.0 / math.sqrt(x)),
    "cbrt": _safe(lambda x: math.copysign(abs(x) ** (1 / 3), x)),
    "sin": _safe(math.sin), "cos": _safe(math.cos), "tan": _safe(math.tan),
    "asin": _safe(math.asin), "acos": _safe(math.acos), "atan": _safe(math.atan),
    "sinh": _safe(math.sinh), "cosh": _safe(math.cosh), "tanh": _safe(math.tanh),
    "asinh": _safe(math.asinh), "acosh": _safe(math.acosh), "atanh": _safe(math.atanh),
    "fabs": abs, "floor": _safe(lambda x: float(math.floor(x))),
    "ceil": _safe(lambda x: float(math.ceil(x))), "trunc": _safe(lambda x: float(math.trunc(x))),
    "round": _round, "rint": _rint, "erf": math.erf, "erfc": math.erfc,
    "tgamma": _safe(math.gamma), "lgamma": _safe(math.lgamma), "sign": _sign,
    "sinpi": _safe(lambda x: math.sin(math.pi * x)),
    "cospi": _safe(lambda x: math.cos(math.pi * x)),
    "recip": _safe(lambda x: 1.0 / x), "degrees": math.degrees, "radians": math.radians,
}
_FLOAT2: dict[str, Callable[[float, float], float]] = {
    "pow": _pow, "powr": _pow, "fmax": _fmax, "fmin": _fmin, "atan2": _safe(math.atan2),
    "fmod": _safe(math.fmod), "hypot": _safe(math.hypot), "copysign": math.copysign,
    "fdim": lambda a, b: a - b if a > b else 0.0, "divide": _fdiv,
    "remainder": _safe(math.remainder), "step": lambda e, x: 0.0 if x < e else 1.0,
}
_FLOAT3: dict[str, Callable[[float, float, float], float]] = {
    "mad": lambda a, b, c: a * b + c, "fma": lambda a, b, c: a * b + c,
    "mix": lambda x, y, a: x + (y - x) * a,
    "smoothstep": lambda e0, e1, x: (lambda t: t * t * (3 - 2 * t))(
        min(max((x - e0) / (e1 - e0), 0.0), 1.0)),
}


def _builtin(name: str, parts: list[tuple[Fn, Any]], node: c_ast.Node,
             comp: _Compiler) -> Optional[tuple[Fn, Any]]:
    """Closure and result type of an OpenCL built-in call, or None if unknown."""
    base = name
    for prefix in ("native_", "half_"):
        if base.startswith(prefix):
            base = base[len(prefix):]
    fns = [f for f, _ in parts]
    types = [t for _, t in parts]

    def ftype() -> Any:
        t = types[0]
        for u in types[1:]:
            t = arith_type(t, u)
        if isinstance(t, VecT):
            return t if t.elem.is_float else VecT(FLOAT, t.n)
        return t if (isinstance(t, Scalar) and t.is_float) else FLOAT

    def lift(f: Callable, rt: Any) -> Fn:
        """Apply ``f`` component-wise for vector arguments, rounding to the result type."""
        conv = _converter(rt.elem if isinstance(rt, VecT) else rt)
        if isinstance(rt, VecT):
            n = rt.n

            def vf(env: list) -> tuple:
                vals = [g(env) for g in fns]
                vals = [v if isinstance(v, tuple) else (v,) * n for v in vals]
                return tuple(conv(f(*xs)) for xs in zip(*vals))

            return vf
        if len(fns) == 1:
            g0 = fns[0]
            return lambda env: conv(f(g0(env)))
        if len(fns) == 2:
            g0, g1 = fns
            return lambda env: conv(f(g0(env), g1(env)))
        return lambda env: conv(f(*[g(env) for g in fns]))

    if base in _FLOAT1 and len(fns) == 1:
        rt = ftype()
        return lift(_FLOAT1[base], rt), rt
    if base in _FLOAT2 and len(fns) == 2:
        rt = ftype()
        return lift(_FLOAT2[base], rt), rt
    if base in _FLOAT3 and len(fns) == 3:
        rt = ftype()
        return lift(_FLOAT3[base], rt), rt
    if base == "pown" or base == "rootn":
        f = (lambda x, n: _pow(x, n)) if base == "pown" else (lambda x, n: _pow(x, 1.0 / n))
        rt = ftype() if not isinstance(types[0], Scalar) or types[0].is_float else FLOAT
        return lift(f, rt), rt
    if base in ("max", "min", "clamp", "abs", "abs_diff", "mul24", "mad24", "mul_hi",
                "add_sat", "sub_sat", "hadd", "rotate", "popcount", "clz"):
        rt = types[0]
        for u in types[1:]:
            rt = arith_type(rt, u)
        if isinstance(rt, Scalar):
            rt = _promote(rt) if base not in ("max", "min", "clamp", "abs") else rt
        el = rt.elem if isinstance(rt, VecT) else rt
        is_f = el.is_float
        if base == "max":
            f = _fmax if is_f else max
        elif base == "min":
            f = _fmin if is_f else min
        elif base == "clamp":
            f = (lambda x, lo, hi: _fmin(_fmax(x, lo), hi)) if is_f else (
                lambda x, lo, hi: min(max(x, lo), hi))
        elif base == "abs":
            f = abs
        elif base == "abs_diff":
            f = lambda a, b: abs(a - b)  # noqa: E731
        elif base == "mul24":
            f = lambda a, b: a * b  # noqa: E731
        elif base == "mad24":
            f = lambda a, b, c: a * b + c  # noqa: E731
        elif base == "hadd":
            f = lambda a, b: (a + b) >> 1  # noqa: E731
        elif base == "popcount":
            f = lambda a: bin(a & ((1 << el.bits) - 1)).count("1")  # noqa: E731
        else:
            raise InterpError(f"built-in {name} is not supported", *_coord(node))
        return lift(f, rt), rt
    if base == "select" and len(fns) == 3:
        rt = arith_type(types[0], types[1])
        a, b, c = fns
        conv = _converter(rt)
        if isinstance(rt, VecT):
            return (lambda env: conv(tuple(y if (cc < 0 if isinstance(cc, int) else cc) else x
                                           for x, y, cc in zip(a(env), b(env), c(env))))), rt
        return (lambda env: conv(b(env) if c(env) else a(env))), rt
    if base in ("isnan", "isinf", "isfinite", "signbit"):
        f = {"isnan": math.isnan, "isinf": math.isinf, "isfinite": math.isfinite,
             "signbit": lambda x: math.copysign(1.0, x) < 0}[base]
        g0 = fns[0]
        return (lambda env: int(f(g0(env)))), INT
    if base.startswith("convert_") or base.startswith("as_"):
        tname = base.split("_", 1)[1]
        for suffix in ("_sat", "_rte", "_rtz", "_rtp", "_rtn"):
            tname = tname.replace(suffix, "")
        t = type_by_name(tname)
        if t is None:
            raise InterpError(f"unknown conversion {name}", *_coord(node))
        if base.startswith("as_"):
            raise InterpError(f"reinterpreting casts ({name}) are not supported", *_coord(node))
        conv = _converter(t)
        g0 = fns[0]
        if isinstance(t, VecT):
            ec = _converter(t.elem)
            return (lambda env: tuple(ec(x) for x in g0(env))), t
        return (lambda env: conv(g0(env))), t
    if base in ("dot", "length", "distance", "normalize", "cross"):
        return _geometric(base, fns, types, node)
    if base.startswith("vload") and base[5:].isdigit():
        n = int(base[5:])
        off, ptr = fns
        el = types[1].elem if isinstance(types[1], (PtrT, ArrT)) else None
        if not isinstance(el, Scalar):
            raise InterpError(f"{name} of a non-scalar pointer", *_coord(node))

        def vload(env: list) -> tuple:
            p = ptr(env)
            o = p.off + off(env) * n
            return tuple(p.mem.load(o + k) for k in range(n))

        return vload, VecT(el, n)
    if base.startswith("vstore") and base[6:].isdigit():
        n = int(base[6:])
        val, off, ptr = fns
        el = types[2].elem if isinstance(types[2], (PtrT, ArrT)) else None
        if not isinstance(el, Scalar):
            raise InterpError(f"{name} to a non-scalar pointer", *_coord(node))
        conv = _converter(el)

        def vstore(env: list) -> int:
            v = val(env)
            p = ptr(env)
            o = p.off + off(env) * n
            for k in range(n):
                p.mem.store(o + k, conv(v[k]))
            return 0

        return vstore, VOID
    if base.startswith("atomic_") or base.startswith("atom_"):
        return _atomic(base.split("_", 1)[1], fns, types, node)
    return None


def _geometric(name: str, fns: list[Fn], types: list, node: c_ast.Node) -> tuple[Fn, Any]:
    def vec(v: Any) -> tuple:
        return v if isinstance(v, tuple) else (v,)

    if name == "dot":
        a, b = fns
        return (lambda env: sum(x * y for x, y in zip(vec(a(env)), vec(b(env))))), FLOAT
    if name == "length":
        a = fns[0]
        return (lambda env: math.sqrt(sum(x * x for x in vec(a(env))))), FLOAT
    if name == "distance":
        a, b = fns
        return (lambda env: math.sqrt(sum((x - y) ** 2 for x, y in zip(vec(a(env)),
                                                                        vec(b(env)))))), FLOAT
    if name == "normalize":
        a = fns[0]

        def norm(env: list) -> Any:
            v = vec(a(env))
            n = math.sqrt(sum(x * x for x in v)) or 1.0
            r = tuple(x / n for x in v)
            return r if len(r) > 1 else r[0]

        return norm, types[0]
    raise InterpError(f"built-in {name} is not supported", *_coord(node))


def _atomic(op: str, fns: list[Fn], types: list, node: c_ast.Node) -> tuple[Fn, Any]:
    """Atomics: read and write the pointed-to element, return the old value."""
    pt = types[0]
    if not isinstance(pt, PtrT):
        raise InterpError("atomic on a non-pointer", *_coord(node))
    el = pt.elem
    conv = _converter(el)
    ptr = fns[0]
    rest = fns[1:]
    ops: dict[str, Callable] = {
        "add": lambda o, v: o + v, "sub": lambda o, v: o - v, "xchg": lambda o, v: v,
        "min": min, "max": max, "and": lambda o, v: o & v, "or": lambda o, v: o | v,
        "xor": lambda o, v: o ^ v, "inc": lambda o: o + 1, "dec": lambda o: o - 1,
        "cmpxchg": lambda o, c, v: v if o == c else o,
    }
    f = ops.get(op)
    if f is None:
        raise InterpError(f"atomic_{op} is not supported", *_coord(node))

    def atomic(env: list) -> Any:
        p = ptr(env)
        old = p.mem.load(p.off)
        p.mem.store(p.off, conv(f(old, *[g(env) for g in rest])))
        return old

    return atomic, el


# ----------------------------------------------------------------------------------------------
# Running an NDRange
# ----------------------------------------------------------------------------------------------


@dataclass
class CompiledKernel:
    """A kernel compiled to closures; :meth:`run` executes it over an NDRange."""

    name: str
    params: list[tuple[str, Any]]  # (name, CType) in order
    _frame: _Frame
    _body: _Stmt
    _slots: list[int]
    _comp: _Compiler
    _ctx: _Ctx

    def param_type(self, name: str) -> Any:
        for n, t in self.params:
            if n == name:
                return t
        raise KeyError(name)

    def run(
        self,
        global_size: Sequence[int],
        local_size: Optional[Sequence[int]] = None,
        args: Union[Mapping[str, Any], Sequence[Any]] = (),
        global_offset: Optional[Sequence[int]] = None,
        *,
        record_local: bool = False,
        max_steps: int = 10**8,
    ) -> KernelRun:
        """Run every work-item of the NDRange; buffers (numpy arrays) are updated in place.

        ``args`` maps parameter names (or gives, in order) numpy arrays for buffer parameters,
        :class:`LocalArg` (or a byte count) for ``__local`` pointers, numbers for scalars.
        ``local_size`` None means one work-item per group.
        """
        gs = tuple(int(x) for x in global_size)
        wd = len(gs)
        if not 1 <= wd <= 3:
            raise InterpError(f"work_dim must be 1..3, got {wd}")
        ls = tuple(int(x) for x in local_size) if local_size is not None else (1,) * wd
        if len(ls) != wd:
            raise InterpError("global and local sizes differ in dimensions")
        for g, l_ in zip(gs, ls):
            if l_ <= 0 or g % l_ != 0:
                raise InterpError(f"local size {ls} does not divide global size {gs}")
        off = tuple(int(x) for x in global_offset) if global_offset is not None else (0,) * wd
        if isinstance(args, Mapping):
            amap = dict(args)
        else:
            amap = {n: v for (n, _), v in zip(self.params, args)}
        ctx = self._ctx
        ctx.trace = []
        ctx.ltrace = []
        ctx.record_local = record_local
        ctx.steps = 0
        ctx.max_steps = max_steps
        ctx.wdim = wd
        pad = lambda t, v: list(t) + [v] * (3 - len(t))  # noqa: E731
        ctx.gsz = pad(gs, 1)
        ctx.lsz = pad(ls, 1)
        ctx.ngr = pad(tuple(g // l_ for g, l_ in zip(gs, ls)), 1)
        ctx.off = pad(off, 0)

        env0: list = [None] * self._frame.nslots
        local_params: list[tuple[int, str, Any, int]] = []
        for (pname, pt), slot in zip(self.params, self._slots):
            if pname not in amap:
                raise InterpError(f"kernel {self.name}: no value for argument {pname!r}")
            v = amap[pname]
            if isinstance(pt, PtrT):
                if pt.space == "local":
                    nbytes = v.nbytes if isinstance(v, LocalArg) else int(v)
                    local_params.append((slot, pname, pt.elem, nbytes // _sizeof(pt.elem)))
                    continue
                arr = np.asarray(v)
                if arr.ndim != 1:
                    arr = arr.reshape(-1)
                    if not np.shares_memory(arr, v):
                        raise InterpError(f"buffer {pname!r} must be a contiguous array")
                if isinstance(pt.elem, VecT):
                    mem: Mem = GlobalVecMem(pname, arr, pt.space, ctx, pt.elem.n)
                elif isinstance(pt.elem, Scalar):
                    mem = GlobalMem(pname, arr, pt.space, ctx)
                else:
                    raise InterpError(f"unsupported buffer element type for {pname!r}")
                env0[slot] = Ptr(mem, 0)
            else:
                env0[slot] = _converter(pt)(v)

        body = self._body
        holder = self._comp.local_holder
        ngroups = ctx.ngr[:wd]
        nphases = 0
        for gidx in itertools.product(*[range(n) for n in reversed(ngroups)]):
            g = tuple(reversed(gidx))
            holder.clear()
            for key, (aname, at) in self._comp.local_decls.items():
                total = int(np.prod(at.dims))
                holder[key] = LocalMem(aname, [_zero(at.elem)] * total, "local", ctx)
            genv = list(env0)
            for slot, pname, el, count in local_params:
                genv[slot] = Ptr(LocalMem(pname, [_zero(el)] * count, "local", ctx), 0)
            lids = [tuple(reversed(x)) for x in itertools.product(*[range(n) for n in
                                                                    reversed(ls)])]
            items = []
            for lid in lids:
                items.append((lid, list(genv)))
            if not body.gen:
                for lid, env in items:
                    self._enter(g, lid, ls, off)
                    body.fn(env)
                continue
            gens = []
            for lid, env in items:
                gens.append([lid, body.fn(env), None])
            live = gens
            while live:
                at_barrier = []
                finished = 0
                for item in live:
                    self._enter(g, item[0], ls, off)
                    try:
                        item[2] = next(item[1])
                        at_barrier.append(item)
                    except StopIteration:
                        finished += 1
                if at_barrier and finished:
                    raise InterpError(
                        f"kernel {self.name}: barrier divergence in work-group {g} "
                        f"({finished} work-items finished, {len(at_barrier)} at a barrier)")
                if at_barrier:
                    keys = {it[2] for it in at_barrier}
                    if len(keys) > 1:
                        raise InterpError(
                            f"kernel {self.name}: work-items of group {g} wait at different "
                            "barriers")
                    nphases += 1
                live = at_barrier
        return KernelRun(ctx.trace, ctx.ltrace, gs, ls, nphases)

    def _enter(self, g: tuple, lid: tuple, ls: tuple, off: tuple) -> None:
        ctx = self._ctx
        wd = len(g)
        ctx.wi = (g, lid)
        for d in range(wd):
            ctx.g[d] = g[d]
            ctx.l[d] = lid[d]
            ctx.gid[d] = g[d] * ls[d] + lid[d] + off[d]


def _parse_source(source: str) -> c_ast.FileAST:
    """Parse OpenCL source with polyfuse's front-end, or plain pycparser (c23) for text that
    already uses the ``[[ocl::...]]`` convention."""
    if "[[ocl::" not in source:
        try:
            from polyfuse.c import preprocessor
        except ImportError:  # pragma: no cover - front-end not available
            preprocessor = None  # type: ignore[assignment]
        if preprocessor is not None:
            return preprocessor.parse(source, "<kernel>")
    return c_parser.CParser(dialect="c23").parse(_PRELUDE + source, "<kernel>")


_PRELUDE = """typedef unsigned char uchar; typedef unsigned short ushort; typedef unsigned int uint;
typedef unsigned long ulong; typedef unsigned long size_t;
"""


def compile_kernel(
    kernel: Union[str, c_ast.FuncDef, c_ast.FileAST],
    name: Optional[str] = None,
    *,
    file_ast: Optional[c_ast.FileAST] = None,
) -> CompiledKernel:
    """Compile one kernel: from source text, a parsed file, or a ``FuncDef`` (+ its file).

    With several kernels in the file, ``name`` selects one (default: the only/first kernel).
    """
    if isinstance(kernel, str):
        file_ast = _parse_source(kernel)
        kernel = file_ast
    if isinstance(kernel, c_ast.FileAST):
        file_ast = kernel
        funcs = [e for e in kernel.ext if isinstance(e, c_ast.FuncDef)]
        cands = [f for f in funcs if f.decl.name == name] if name else (
            [f for f in funcs if _is_kernel(f)] or funcs)
        if not cands:
            raise InterpError(f"no kernel {name!r} in the source" if name else "no kernel found")
        fd = cands[0]
    else:
        fd = kernel
    if file_ast is None:
        file_ast = c_ast.FileAST([fd])
    elif fd not in file_ast.ext:
        file_ast = c_ast.FileAST(list(file_ast.ext) + [fd])
    ctx = _Ctx()
    comp = _Compiler(file_ast, ctx)
    comp.funcs[fd.decl.name] = fd
    frame, body, params = comp.function(fd.decl.name)
    return CompiledKernel(
        name=fd.decl.name,
        params=[(n, v.type) for n, v in zip(_param_names(fd), params)],
        _frame=frame,
        _body=body,
        _slots=[p.slot for p in params],
        _comp=comp,
        _ctx=ctx,
    )


def _param_names(fd: c_ast.FuncDef) -> list[str]:
    args = fd.decl.type.args
    return [p.name for p in (args.params if args else []) if getattr(p, "name", None)]


def run_kernel(
    kernel: Union[str, c_ast.FuncDef, c_ast.FileAST, CompiledKernel],
    global_size: Sequence[int],
    local_size: Optional[Sequence[int]] = None,
    args: Union[Mapping[str, Any], Sequence[Any]] = (),
    global_offset: Optional[Sequence[int]] = None,
    *,
    name: Optional[str] = None,
    record_local: bool = False,
) -> KernelRun:
    """Compile (if needed) and run a kernel over an NDRange; see :meth:`CompiledKernel.run`."""
    ck = kernel if isinstance(kernel, CompiledKernel) else compile_kernel(kernel, name)
    return ck.run(global_size, local_size, args, global_offset, record_local=record_local)
