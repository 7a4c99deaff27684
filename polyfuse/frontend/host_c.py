"""The C half of the host interpreter: abstract values, C types, memory, statements,
expressions and the C library.  Kept apart from the OpenCL API model
(:mod:`polyfuse.frontend.host_opencl`) so each reads as one idea; the interpreter class in
:mod:`polyfuse.frontend.host` composes the two."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

import sympy
from pycparser import c_ast

from polyfuse.c import syntax
from polyfuse.frontend import clhpp
from polyfuse.program import (
    ArgBinding,
    Buffer,
    BufferRange,
    HostLoop,
    HostOp,
    Launch,
    Operation,
    PolyfuseError,
    SourceLoc,
    UnsupportedError,
    host_expr_to_isl,
)

_log = logging.getLogger("polyfuse.frontend.host")

#: the largest trip count of a host loop that polyfuse unrolls when it cannot keep it symbolic
MAX_UNROLL = 1024
#: iterations of loops without OpenCL calls interpreted one by one in a whole loop nest; past
#: it, such loops are summarised
NEST_BUDGET = 4 * MAX_UNROLL
_MAX_CALL_DEPTH = 48

# ----------------------------------------------------------------------------------------------
# Abstract values
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Num:
    """An integer (or, with ``flt``, floating) value as a sympy expression."""

    e: Any
    flt: bool = False


@dataclass(frozen=True)
class _Source:
    """Where a value computed from the program's data comes from (a read-back, a file, a
    summarised loop): named by the variable it is stored in, which ``--param`` binds."""

    what: str  # "read back from the device by clEnqueueReadBuffer"
    loc: str  # file:line
    name: str = ""

    def describe(self) -> str:
        named = f"'{self.name}', " if self.name else ""
        return f"{named}{self.what} at {self.loc}"


@dataclass(frozen=True)
class _Unknown:
    flt: bool = False
    src: Optional[_Source] = field(default=None, compare=False)


@dataclass(frozen=True)
class _Runtime:
    """A loop-invariant integer read at run time; becomes a parameter when stored."""

    src: Optional[_Source] = field(default=None, compare=False)


@dataclass(frozen=True)
class _Cond:
    """A truth value that is not known, with the relation it stands for (for context facts)."""

    rel: Any


@dataclass(frozen=True)
class _BufRef:
    name: str


@dataclass(frozen=True)
class _KObj:
    oid: int


@dataclass(frozen=True)
class _ProgObj:
    """A ``cl_program`` created with ``clCreateProgramWithSource``."""

    pid: int


@dataclass(frozen=True)
class _Handle:
    """A non-NULL handle polyfuse does not track (context, queue, FILE *, ...)."""

    kind: str


@dataclass(frozen=True)
class _Str:
    s: str


@dataclass(frozen=True)
class _Ref:
    """A pointer to (a part of) a variable: slot id and a path of indices and field names."""

    slot: int
    path: tuple = ()


@dataclass(frozen=True)
class _Arr:
    length: Optional[int]
    elems: tuple = ()  # sorted ((index, value), ...)
    default: Any = None

    def get(self, i: int) -> Any:
        for k, v in self.elems:
            if k == i:
                return v
        return self.default if self.default is not None else _UNK

    def set(self, i: int, v: Any) -> _Arr:
        if not self.elems or self.elems[-1][0] < i:  # filling in order: no search, no sort
            return _Arr(self.length, self.elems + ((i, v),), self.default)
        d = dict(self.elems)
        d[i] = v
        return _Arr(self.length, tuple(sorted(d.items())), self.default)


@dataclass(frozen=True)
class _Rec:
    fields: tuple = ()  # ((name, value), ...)

    def get(self, name: str) -> Any:
        for k, v in self.fields:
            if k == name:
                return v
        return _UNK

    def set(self, name: str, v: Any) -> _Rec:
        d = dict(self.fields)
        d[name] = v
        return _Rec(tuple(d.items()))


@dataclass(frozen=True)
class _Poison:
    """A value that differs between paths polyfuse cannot tell apart; an error when used."""

    reason: str


_UNK = _Unknown()
_UNKF = _Unknown(True)
_RUNTIME = _Runtime()
_ZERO = _Num(sympy.Integer(0))
_ONE = _Num(sympy.Integer(1))
_TRACKED = (_BufRef, _KObj, _ProgObj, _Str, _Ref)

# ----------------------------------------------------------------------------------------------
# C types (only what sizeof, division and declarations need)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _CType:
    kind: str  # int | float | ptr | array | struct | void | func
    size: int
    elem: Optional[_CType] = None
    length: Optional[int] = None
    name: str = ""
    fields: tuple = ()  # ((name, _CType), ...)

    def field(self, name: str) -> Optional[_CType]:
        for k, t in self.fields:
            if k == name:
                return t
        return None


_INT = _CType("int", 4, name="int")
_LONG = _CType("int", 8, name="long")
_DOUBLE = _CType("float", 8, name="double")
_VOID = _CType("void", 1, name="void")
_PTR_VOID = _CType("ptr", 8, elem=_VOID)


def _base_type(names: list[str]) -> _CType:
    s = set(names)
    if "float" in s:
        return _CType("float", 4, name="float")
    if "double" in s:
        return _CType("float", 16 if "long" in s else 8, name="double")
    if "void" in s:
        return _VOID
    if "char" in s or "_Bool" in s or "bool" in s:
        return _CType("int", 1, name="char")
    if "short" in s:
        return _CType("int", 2, name="short")
    if names.count("long") >= 1:
        return _CType("int", 8, name="long")
    return _INT


# ----------------------------------------------------------------------------------------------
# Interpreter state and control-flow signals
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Slot:
    name: str
    ctype: _CType
    value: Any


@dataclass(frozen=True)
class _KState:
    """A ``cl_kernel`` object: the variable it was created in, its kernel and its bindings."""

    var: str
    kernel: str
    bindings: tuple = ()  # ((index, ArgBinding | _Poison), ...)

    def bound(self) -> dict[int, Any]:
        return dict(self.bindings)

    def bind(self, index: int, b: Any) -> _KState:
        d = self.bound()
        d[index] = b
        return dataclasses.replace(self, bindings=tuple(sorted(d.items())))


class _State:
    """Everything a path through the host program changes; cloned to explore both branches."""

    def __init__(self) -> None:
        self.slots: dict[int, _Slot] = {}
        self.buffers: dict[str, Buffer] = {}
        self.kobjs: dict[int, _KState] = {}
        self.ops: list[Operation] = []
        self.facts: list[Any] = []
        self.uncertain_break: Optional[c_ast.Node] = None

    def clone(self) -> _State:
        s = _State()
        s.slots = dict(self.slots)
        s.buffers = dict(self.buffers)
        s.kobjs = dict(self.kobjs)
        s.ops = list(self.ops)
        s.facts = list(self.facts)
        s.uncertain_break = self.uncertain_break
        return s


class _Signal(Exception):  # noqa: N818 - control flow, not an error
    pass


class _Exit(_Signal):
    pass


class _Return(_Signal):
    def __init__(self, value: Any):
        super().__init__()
        self.value = value


class _Break(_Signal):
    pass


class _Continue(_Signal):
    pass


class _Goto(_Signal):
    def __init__(self, label: str):
        super().__init__(label)
        self.label = label


class _NeedUnroll(_Signal):
    """A loop iterator is needed as a concrete value: the enclosing symbolic loop must unroll."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


@dataclass
class _Frame:
    name: str
    scopes: list = field(default_factory=list)
    cond_returns: list = field(default_factory=list)


# Functions whose calls have no effect polyfuse cares about (their buffer arguments, if any, are
# not read or written).
_IGNORED = {
    "printf", "fprintf", "sprintf", "snprintf", "puts", "fputs", "putchar", "fputc", "perror",
    "fflush", "fopen", "fclose", "fread", "fwrite", "fgets", "fgetc", "getchar", "fseek", "ftell",
    "rewind", "feof", "ferror", "remove", "free", "memset", "memcpy", "memmove", "memcmp",
    "strlen", "strcpy", "strncpy", "strcat", "strncat", "strcmp", "strncmp", "strchr", "strrchr",
    "strstr", "strdup", "strtok", "strerror", "srand", "rand", "srand48", "drand48", "time",
    "clock", "clock_gettime", "gettimeofday", "difftime", "localtime", "sleep", "usleep",
    "getenv", "system", "qsort", "atexit", "abs", "labs", "access", "sysconf",
    "clGetPlatformIDs", "clGetPlatformInfo", "clGetDeviceIDs", "clGetDeviceInfo",
    "clRetainDevice", "clReleaseDevice", "clCreateContext", "clCreateContextFromType",
    "clRetainContext", "clReleaseContext", "clGetContextInfo", "clCreateCommandQueue",
    "clCreateCommandQueueWithProperties", "clRetainCommandQueue", "clReleaseCommandQueue",
    "clGetCommandQueueInfo", "clRetainMemObject", "clReleaseMemObject", "clGetMemObjectInfo",
    "clCreateProgramWithSource", "clCreateProgramWithBinary", "clRetainProgram",
    "clReleaseProgram", "clBuildProgram", "clCompileProgram", "clGetProgramInfo",
    "clGetProgramBuildInfo", "clRetainKernel", "clReleaseKernel", "clGetKernelInfo",
    "clGetKernelWorkGroupInfo", "clGetEventInfo", "clCreateUserEvent", "clRetainEvent",
    "clReleaseEvent", "clSetUserEventStatus", "clGetEventProfilingInfo", "clFlush",
    "clEnqueueMarkerWithWaitList", "clEnqueueBarrierWithWaitList", "clEnqueueMarker",
    "clEnqueueBarrier", "clEnqueueWaitForEvents", "clEnqueueUnmapMemObject",
    "clEnqueueMigrateMemObjects",
}
_MATH = {
    "sqrt", "sqrtf", "fabs", "fabsf", "exp", "expf", "log", "logf", "log2", "log2f", "log10",
    "log10f", "pow", "powf", "sin", "sinf", "cos", "cosf", "tan", "tanf", "tanh", "tanhf", "atan",
    "atan2", "floor", "floorf", "ceil", "ceilf", "round", "roundf", "fmin", "fminf", "fmax",
    "fmaxf", "fmod", "fmodf", "erf", "erff", "atof", "strtod", "strtof", "trunc", "truncf",
    "exp2", "exp2f", "cbrt", "cbrtf", "hypot", "hypotf", "fabsl", "lround", "lroundf",
}
_READ_INT = {"atoi", "atol", "atoll", "strtol", "strtoul", "strtoll", "strtoull"}
_ALLOC = {"malloc", "calloc", "realloc", "aligned_alloc", "memalign", "valloc", "_mm_malloc",
          "pvalloc"}
_HANDLE_RESULT = {
    "clCreateContext", "clCreateContextFromType", "clCreateCommandQueue",
    "clCreateCommandQueueWithProperties", "clCreateProgramWithSource",
    "clCreateProgramWithBinary", "clCreateUserEvent", "getenv", "strdup", "localtime",
}
#: calls that only read through a ``&x`` argument (the loop iterator may be passed this way)
_READ_ONLY_ADDRESS = {"clSetKernelArg", "printf", "fprintf"}


class CSemantics:
    """C semantics of the host interpreter (a mixin of ``_Interpreter``)."""

    def _const_int(self, node: c_ast.Node) -> int:
        v = self._eval(node)
        if isinstance(v, _Num) and v.e.is_Integer:
            return int(v.e)
        raise self._error("enumerator value is not a constant", node)

    # -- errors and locations -----------------------------------------------------------------

    def _loc(self, node: Optional[c_ast.Node] = None) -> Optional[SourceLoc]:
        node = node if node is not None else self.node
        coord = getattr(node, "coord", None)
        if coord is None or not coord.line:
            return None
        return SourceLoc(coord.file or self.filename, coord.line, coord.column or 0)

    def _warn(self, msg: str, node: Optional[c_ast.Node] = None) -> None:
        """A warning on stderr naming file:line (once per place)."""
        loc = self._loc(node)
        where = f"{loc.file}:{loc.line}" if loc is not None else self.filename
        text = f"{where}: {msg}"
        if text not in self.warnings:
            self.warnings.append(text)
            _log.warning("polyfuse: warning: %s", text)

    def _error(self, msg: str, node: Optional[c_ast.Node] = None,
               cls: type = PolyfuseError) -> PolyfuseError:
        loc = self._loc(node)
        if loc is None:
            return cls(msg, self.filename)
        return cls(msg, loc.file, loc.line)

    # -- slots and scopes ---------------------------------------------------------------------

    def _new_slot(self, name: str, ctype: _CType, value: Any) -> int:
        sid = self.next_slot
        self.next_slot += 1
        self.state.slots[sid] = _Slot(name, ctype, self._coerce(value, ctype, name))
        return sid

    def _declare(self, name: str, ctype: _CType, value: Any) -> int:
        sid = self._new_slot(name, ctype, value)
        self.frames[-1].scopes[-1][name] = sid
        return sid

    def _lookup(self, name: str) -> Optional[int]:
        for scope in reversed(self.frames[-1].scopes):
            if name in scope:
                return scope[name]
        return self.globals.get(name)

    def _read(self, ref: _Ref) -> Any:
        slot = self.state.slots.get(ref.slot)
        if slot is None:
            return _UNK
        v = slot.value
        for p in ref.path:
            if isinstance(v, _Arr) and isinstance(p, int):
                v = v.get(p)
            elif isinstance(v, _Rec) and isinstance(p, str):
                v = v.get(p)
            elif isinstance(p, int) and p == 0 and not isinstance(v, (_Arr, _Rec)):
                continue
            else:
                return _UNK
        return v

    def _write(self, ref: _Ref, value: Any) -> None:
        slot = self.state.slots.get(ref.slot)
        if slot is None:
            return
        ctype = slot.ctype
        for p in ref.path:
            ctype = (ctype.elem if isinstance(p, int) else ctype.field(p)) or _UNK_TYPE
        value = self._coerce(value, ctype, slot.name, ref.path)
        new = self._update(slot.value, ref.path, value)
        self.state.slots[ref.slot] = dataclasses.replace(slot, value=new)

    def _update(self, cur: Any, path: tuple, value: Any) -> Any:
        if not path:
            return value
        p, rest = path[0], path[1:]
        if isinstance(cur, _Arr) and isinstance(p, int):
            return cur.set(p, self._update(cur.get(p), rest, value))
        if isinstance(cur, _Rec) and isinstance(p, str):
            return cur.set(p, self._update(cur.get(p), rest, value))
        if isinstance(p, int) and p == 0 and not isinstance(cur, (_Arr, _Rec)):
            return self._update(cur, rest, value)
        if isinstance(p, str):
            return _Rec(((p, self._update(_UNK, rest, value)),))
        return _Arr(None, ((p, self._update(_UNK, rest, value)),), _UNK)

    def _coerce(self, value: Any, ctype: _CType, name: str, path: tuple = ()) -> Any:
        """Adapt a value stored into a variable of ``ctype``; run-time values become params."""
        if isinstance(value, _Runtime):
            pname = re.sub(r"\W", "_", _var_name(name, path))
            src = dataclasses.replace(value.src, name=pname) if value.src else None
            if ctype.kind == "float" and (not self._varies() or src is not None):
                self.float_names.add(pname)
                if pname in self.param_values:
                    self.applied.add(pname)
                    return _Num(sympy.Float(float(self.param_values[pname])), True)
            if self._varies() and src is not None and ctype.kind == "int":
                self.data_names.add(pname)
                if pname in self.param_values:  # fixed by the user for every iteration
                    return self._new_param(pname)
            if self._varies() or ctype.kind == "float":
                return _Unknown(ctype.kind == "float", src)
            value = self._new_param(_var_name(name, path))
            if ctype.kind == "int" and isinstance(value.e, sympy.Symbol):
                self.int_params.add(str(value.e))
            return value
        if isinstance(value, _Cond):
            return _UNK
        if isinstance(value, _Num):
            if ctype.kind == "float":
                return _Num(value.e, True)
            if ctype.kind == "int" and value.flt:
                return _float_to_int(value.e)
        if isinstance(value, _Unknown) and ctype.kind == "float":
            return _Unknown(True, value.src)
        return value

    def _varies(self) -> bool:
        """Whether a value computed here may differ between executions of this point (inside a
        host loop, or a loop being summarised): then it is no parameter."""
        return bool(self.loops) or self.summarising > 0

    def _new_param(self, name: str) -> _Num:
        name = re.sub(r"\W", "_", name) or "p"
        if name in self.param_values:
            self.applied.add(name)
            value = self.param_values[name]
            if isinstance(value, float) and not value.is_integer():
                raise PolyfuseError(f"--param {name}={value}: '{name}' is an integer in the "
                                    "host program", self.filename)
            return _Num(sympy.Integer(int(value)))
        k = self.name_suffix.get(name, 0)  # the suffixes below k are taken: O(1) per name
        unique = f"{name}_{k}" if k else name
        while unique in self.names_used:
            k += 1
            unique = f"{name}_{k}"
        self.name_suffix[name] = k + 1
        self.names_used.add(unique)
        sym = sympy.Symbol(unique)
        self.params[unique] = sym
        return _Num(sym)

    # -- types --------------------------------------------------------------------------------

    def _ctype(self, node: Any) -> _CType:
        key = id(node)
        if key in self.type_cache:
            return self.type_cache[key]
        t = self._ctype_uncached(node)
        self.type_cache[key] = t
        return t

    def _ctype_uncached(self, node: Any) -> _CType:
        if node is None:
            return _INT
        if isinstance(node, (c_ast.TypeDecl, c_ast.Typename)):
            return self._ctype(node.type)
        if isinstance(node, c_ast.IdentifierType):
            if len(node.names) == 1 and node.names[0] in self.typedefs:
                t = self._ctype(self.typedefs[node.names[0]])
                return dataclasses.replace(t, name=node.names[0]) if t.kind != "struct" else t
            return _base_type(node.names)
        if isinstance(node, c_ast.PtrDecl):
            return _CType("ptr", 8, elem=self._ctype(node.type))
        if isinstance(node, c_ast.ArrayDecl):
            elem = self._ctype(node.type)
            n = None
            if node.dim is not None:
                v = self._eval(node.dim)
                if isinstance(v, _Num) and v.e.is_Integer:
                    n = int(v.e)
            return _CType("array", elem.size * (n or 0), elem=elem, length=n)
        if isinstance(node, c_ast.Struct):
            decls = node.decls
            if decls is None and node.name in self.structs:
                decls = self.structs[node.name].decls
            if decls is None or node.name in self.open_structs:
                # opaque, or a self-referential struct seen again through a pointer field
                return _CType("struct", 8, name=node.name or "")
            if node.name:
                self.open_structs.add(node.name)
            try:
                return self._struct_type(node.name or "", decls)
            finally:
                self.open_structs.discard(node.name)
        if isinstance(node, c_ast.Union):
            fields = tuple((d.name, self._ctype(d.type)) for d in node.decls or ())
            return _CType("struct", max((t.size for _, t in fields), default=0),
                          name=node.name or "", fields=fields)
        if isinstance(node, c_ast.Enum):
            self._collect_tags(node)
            return _INT
        if isinstance(node, c_ast.FuncDecl):
            return _CType("func", 8)
        inner = getattr(node, "type", None)
        if inner is not None and inner is not node:
            return self._ctype(inner)
        return _INT

    def _struct_type(self, name: str, decls: list) -> _CType:
        fields = []
        size = 0
        align = 1
        for d in decls:
            t = self._ctype(d.type)
            a = min(_align(t), 8)
            align = max(align, a)
            size = (size + a - 1) // a * a + t.size
            fields.append((d.name, t))
        size = (size + align - 1) // align * align
        return _CType("struct", size, name=name, fields=tuple(fields))

    def _default(self, ctype: _CType, zero: bool) -> Any:
        if ctype.kind == "array":
            return _Arr(ctype.length, (), self._default(ctype.elem or _INT, zero))
        if ctype.kind == "struct":
            return _Rec(tuple((n, self._default(t, zero)) for n, t in ctype.fields))
        if not zero:
            return _UNKF if ctype.kind == "float" else _UNK
        return _Num(sympy.Integer(0), ctype.kind == "float")

    def _expr_ctype(self, node: c_ast.Node) -> _CType:
        if isinstance(node, c_ast.ID):
            sid = self._lookup(node.name)
            return self.state.slots[sid].ctype if sid is not None else _INT
        if isinstance(node, c_ast.ArrayRef):
            t = self._expr_ctype(node.name)
            return t.elem or _INT
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            return self._expr_ctype(node.expr).elem or _INT
        if isinstance(node, c_ast.UnaryOp) and node.op == "&":
            return _CType("ptr", 8, elem=self._expr_ctype(node.expr))
        if isinstance(node, c_ast.StructRef):
            t = self._expr_ctype(node.name)
            if node.type == "->":
                t = t.elem or _INT
            return t.field(node.field.name) or _INT
        if isinstance(node, c_ast.Cast):
            return self._ctype(node.to_type)
        if isinstance(node, c_ast.Constant):
            if node.type in ("float", "double"):
                return _CType("float", 4 if node.value[-1] in "fF" else 8, name=node.type)
            if node.type == "string":
                return _CType("ptr", 8, elem=_CType("int", 1))
            return _LONG if "l" in node.value.lower() else _INT
        if isinstance(node, c_ast.BinaryOp):
            a, b = self._expr_ctype(node.left), self._expr_ctype(node.right)
            if node.op in ("<", ">", "<=", ">=", "==", "!=", "&&", "||"):
                return _INT
            if a.kind in ("ptr", "array"):
                return a
            if a.kind == "float" or b.kind == "float":
                return a if a.kind == "float" and a.size >= b.size else b
            return a if a.size >= b.size else b
        return _INT

    # -- statements ---------------------------------------------------------------------------

    def _exec(self, node: Optional[c_ast.Node]) -> None:
        if node is None:
            return
        self.node = node
        method = getattr(self, "_s_" + type(node).__name__, None)
        if method is not None:
            method(node)
        else:
            self._eval(node)

    def _s_Compound(self, node: c_ast.Compound) -> None:
        self.frames[-1].scopes.append({})
        items = node.block_items or []
        try:
            i = 0
            while i < len(items):
                try:
                    self._exec(items[i])
                    i += 1
                except _Goto as g:  # a forward jump to a label of this block
                    later = [j for j in range(i + 1, len(items))
                             if isinstance(items[j], c_ast.Label) and items[j].name == g.label]
                    if not later:
                        raise
                    i = later[0]
        finally:
            self.frames[-1].scopes.pop()

    def _s_Decl(self, node: c_ast.Decl) -> None:
        if isinstance(node.type, c_ast.FuncDecl):
            return
        self._collect_tags(node.type)
        self._exec_decl(node)

    def _s_DeclList(self, node: c_ast.DeclList) -> None:
        for d in node.decls:
            self._s_Decl(d)

    def _s_Typedef(self, node: c_ast.Typedef) -> None:
        self.typedefs[node.name] = node.type
        self._collect_tags(node.type)

    def _s_EmptyStatement(self, node: c_ast.Node) -> None:
        pass

    def _s_Pragma(self, node: c_ast.Node) -> None:
        pass

    def _s_Label(self, node: c_ast.Label) -> None:
        self._exec(node.stmt)

    def _s_Goto(self, node: c_ast.Goto) -> None:
        raise _Goto(node.name)

    def _s_Break(self, node: c_ast.Node) -> None:
        raise _Break()

    def _s_Continue(self, node: c_ast.Node) -> None:
        raise _Continue()

    def _s_Return(self, node: c_ast.Return) -> None:
        value = self._eval(node.expr) if node.expr is not None else _UNK
        raise _Return(value)

    def _exec_decl(self, node: c_ast.Decl) -> None:
        if not node.name:
            return
        ctype = self._ctype(node.type)
        if "extern" in (node.storage or []):
            self._declare(node.name, ctype, self._default(ctype, False))
            return
        if node.init is None:
            zero = self.frames[-1].name == "<globals>" or "static" in (node.storage or [])
            self._declare(node.name, ctype, self._default(ctype, zero))
            return
        if isinstance(node.init, c_ast.InitList):
            if ctype.kind == "array" and ctype.length is None:
                n = len(node.init.exprs)
                ctype = dataclasses.replace(ctype, length=n, size=(ctype.elem or _INT).size * n)
            value = self._init_list(node.init, ctype, node.name)
        else:
            self.name_hint = node.name
            try:
                value = self._eval(node.init)
            finally:
                self.name_hint = None
            if ctype.kind == "array" and isinstance(value, _Str):
                value = _Arr(len(value.s) + 1, (), _UNK)
        self._declare(node.name, ctype, value)

    def _init_list(self, init: c_ast.InitList, ctype: _CType, name: str) -> Any:
        if ctype.kind == "array":
            elem = ctype.elem or _INT
            arr = self._default(ctype, True)
            idx = 0
            for e in init.exprs:
                if isinstance(e, c_ast.NamedInitializer):
                    idx = self._const_int(e.name[0])
                    e = e.expr
                v = (self._init_list(e, elem, f"{name}_{idx}") if isinstance(e, c_ast.InitList)
                     else self._eval_named(e, f"{name}_{idx}"))
                arr = arr.set(idx, self._coerce(v, elem, name, (idx,)))
                idx += 1
            return arr
        if ctype.kind == "struct" and not ctype.fields:
            # a struct declared only in a system header polyfuse does not read (getopt's
            # ``struct option``): its values by position, ``"0"``, ``"1"``, ...
            return _Rec(tuple((str(i), self._init_list(e, _UNK_TYPE, f"{name}_{i}")
                               if isinstance(e, c_ast.InitList) else self._eval_named(
                                   e, f"{name}_{i}"))
                              for i, e in enumerate(init.exprs)))
        if ctype.kind == "struct":
            rec = self._default(ctype, True)
            names = [n for n, _ in ctype.fields]
            pos = 0
            for e in init.exprs:
                if isinstance(e, c_ast.NamedInitializer):
                    fname = e.name[0].name if isinstance(e.name[0], c_ast.ID) else None
                    if fname not in names:
                        raise self._error("unknown field in initializer", e)
                    pos = names.index(fname)
                    e = e.expr
                if pos >= len(names):
                    break
                ft = ctype.fields[pos][1]
                v = (self._init_list(e, ft, f"{name}_{names[pos]}")
                     if isinstance(e, c_ast.InitList)
                     else self._eval_named(e, f"{name}_{names[pos]}"))
                rec = rec.set(names[pos], self._coerce(v, ft, name, (names[pos],)))
                pos += 1
            return rec
        if init.exprs:
            return self._eval(init.exprs[0])
        return self._default(ctype, True)

    def _eval_named(self, node: c_ast.Node, hint: str) -> Any:
        self.name_hint = hint
        try:
            return self._eval(node)
        finally:
            self.name_hint = None

    # -- conditionals -------------------------------------------------------------------------

    def _s_If(self, node: c_ast.If) -> None:
        cond = self._eval(node.cond)
        truth = _truth(cond)
        if truth is True:
            self._exec(node.iftrue)
        elif truth is False:
            self._exec(node.iffalse)
        else:
            self._branches(node, [node.iftrue, node.iffalse], _rel(cond), src=_src_of(cond))

    def _branches(self, node: c_ast.Node, bodies: list, rel: Any, *,
                  switch: bool = False, src: Optional[_Source] = None) -> None:
        """Explore bodies whose choice is not known; keep the non-error paths and merge them.

        In a ``switch`` (``switch=True``) a ``break`` ends its case normally."""
        base = self.state
        results = []
        signals: list[_Signal] = []
        facts = []
        for k, body in enumerate(bodies):
            self.state = base.clone()
            scopes = [dict(s) for s in self.frames[-1].scopes]
            sig: Optional[_Signal] = None
            try:
                if isinstance(body, list):
                    for item in body:
                        self._exec(item)
                else:
                    self._exec(body)
            except (_Exit, _Goto, _Return, _Break, _Continue) as s:
                sig = s
            finally:
                self.frames[-1].scopes = scopes
            if sig is None or (switch and isinstance(sig, _Break)):
                results.append((k, self.state))
                continue
            signals.append(sig)
            if isinstance(sig, _Return) and self.frames[-1].name != "main":
                self.frames[-1].cond_returns.append(sig.value)
            if isinstance(sig, (_Break, _Continue)):
                base.uncertain_break = node
                if src is not None:
                    self.break_src[id(node)] = src
            if rel is not None and len(bodies) == 2:
                facts.append(sympy.Not(rel) if k == 0 else rel)
            elif isinstance(sig, (_Exit, _Return)) and self.frames[-1].name == "main":
                # main's own early exits (helpers' I/O error checks are routine)
                self._warn("assuming the path that ends the program here is not taken: its "
                           "condition depends on a value polyfuse does not know", node)
        self.state = base
        if not results:
            self._reraise(signals)
        for k, st in results:
            new_ops = st.ops[len(base.ops):]
            if new_ops and rel is not None and _syms(rel) & self.loop_syms:
                guard = self._guard_loop(node, rel if k == 0 else sympy.Not(rel))
                if guard is not None:
                    depth = len(self.loops)
                    st.ops[len(base.ops):] = [dataclasses.replace(
                        op, loops=op.loops[:depth] + (guard,) + op.loops[depth:])
                        for op in new_ops]
                    continue
            for op in new_ops:
                if isinstance(op, Launch) or op.kind in ("write", "copy", "unknown"):
                    if rel is not None and _syms(rel) & self.loop_syms:
                        raise _NeedUnroll("operation under a condition on a host loop iterator "
                                          "that is not a conjunction of affine bounds")
                    what = "launch" if isinstance(op, Launch) else f"{op.name or op.kind}"
                    raise self._error(
                        f"{what} under data-dependent host condition (line "
                        f"{op.loc.line if op.loc else '?'}): polyfuse cannot model a kernel "
                        "launch or buffer update that may or may not run", node,
                        UnsupportedError)
        self.state = self._merge(base, [st for _, st in results])
        self.state.facts.extend(facts)
        if base.uncertain_break is not None:
            self.state.uncertain_break = base.uncertain_break

    def _guard_loop(self, node: c_ast.Node, rel: Any) -> Optional[HostLoop]:
        """An affine guard on host loop iterators (``if (k < n - 1)``) as a loop of 0 or 1
        iteration around the operations it guards: their domain honours it exactly and the
        enclosing loop stays symbolic.  None when the guard is not a conjunction of affine
        bounds (``!=``, ``||``)."""
        bounds = _affine_bounds(rel)
        if bounds is None:
            return None
        name = self.guard_names.get(id(node))
        if name is None:
            active = {lp.iterator for lp in self.loops}
            loc = self._loc(node)
            name = syntax.fresh_name(f"if{loc.line if loc else ''}",
                                     lambda n: n in self.names_used or n in active)
            self.names_used.add(name)
            self.guard_names[id(node)] = name
        return HostLoop(iterator=name, lower=sympy.Integer(0),
                        upper=sympy.Min(sympy.Integer(1), *(b + 1 for b in bounds)),
                        loc=self._loc(node))

    def _reraise(self, signals: list[_Signal]) -> None:
        rets = [s for s in signals if isinstance(s, _Return)]
        if rets and self.frames[-1].name != "main":
            self.frames[-1].cond_returns.clear()
            raise _Return(self._join_all([r.value for r in rets], "result"))
        for kind in (_Break, _Continue, _Return, _Goto):
            for s in signals:
                if isinstance(s, kind):
                    raise s
        raise _Exit()

    def _merge(self, base: _State, states: list[_State]) -> _State:
        if len(states) == 1:
            return states[0]
        out = base.clone()
        for st in states:
            out.ops.extend(st.ops[len(base.ops):])
            out.buffers.update(st.buffers)
        sids = set().union(*(st.slots for st in states))
        for sid in sids:
            vals = [st.slots[sid] for st in states if sid in st.slots]
            first = vals[0]
            if all(v.value == first.value for v in vals) and len(vals) == len(states):
                out.slots[sid] = first
            else:
                out.slots[sid] = dataclasses.replace(
                    first, value=self._join_all([v.value for v in vals], first.name))
        oids = set().union(*(st.kobjs for st in states))
        for oid in oids:
            ks = [st.kobjs[oid] for st in states if oid in st.kobjs]
            k0 = ks[0]
            binds: dict[int, Any] = {}
            for idx in set().union(*(k.bound() for k in ks)):
                bs = [k.bound().get(idx) for k in ks]
                if all(b == bs[0] for b in bs) and len(ks) == len(states):
                    binds[idx] = bs[0]
                else:
                    binds[idx] = _Poison("set under a data-dependent host condition")
            out.kobjs[oid] = dataclasses.replace(k0, bindings=tuple(sorted(binds.items())))
        common = [f for f in states[0].facts[len(base.facts):]
                  if all(f in st.facts for st in states)]
        out.facts = list(base.facts) + common
        return out

    def _join_all(self, values: list, name: str) -> Any:
        first = values[0]
        if all(v == first for v in values):
            return first
        if all(isinstance(v, (_Num, _Runtime, _Unknown, _Cond)) for v in values):
            if any(isinstance(v, _Num) and v.flt or isinstance(v, _Unknown) and v.flt
                   for v in values):
                return _UNKF
            if self._varies() or any(isinstance(v, (_Unknown, _Cond)) for v in values):
                return _UNK
            for v in values:  # a parameter already named after this variable wins
                if isinstance(v, _Num) and isinstance(v.e, sympy.Symbol) and \
                        re.fullmatch(re.escape(name) + r"(_\d+)?", str(v.e)):
                    return v
            return self._new_param(name)
        return _Poison(f"'{name}' differs between paths of a data-dependent host condition")

    def _s_Switch(self, node: c_ast.Switch) -> None:
        cond = self._eval(node.cond)
        items = node.stmt.block_items if isinstance(node.stmt, c_ast.Compound) else [node.stmt]
        items = items or []
        starts = []
        for i, it in enumerate(items):
            if isinstance(it, c_ast.Case):
                starts.append((i, it))
            elif isinstance(it, c_ast.Default):
                starts.append((i, it))

        def body_from(i: int) -> list:
            out = []
            for it in items[i:]:
                if isinstance(it, (c_ast.Case, c_ast.Default)):
                    out.extend(it.stmts or [])
                else:
                    out.append(it)
            return out

        value = cond.e if isinstance(cond, _Num) and cond.e.is_number else None
        try:
            if value is not None:
                for i, it in starts:
                    if isinstance(it, c_ast.Case):
                        cv = self._eval(it.expr)
                        if isinstance(cv, _Num) and cv.e == value:
                            self._exec_list(body_from(i))
                            return
                for i, it in starts:
                    if isinstance(it, c_ast.Default):
                        self._exec_list(body_from(i))
                        return
                return
            bodies = [body_from(i) for i, _ in starts]
            if not any(isinstance(it, c_ast.Default) for _, it in starts):
                bodies.append([])
            self._branches(node, bodies, None, switch=True)
        except _Break:
            pass

    def _exec_list(self, items: list) -> None:
        for it in items:
            self._exec(it)

    # -- loops --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _loop_nest(self) -> Iterator[None]:
        """One budget of concretely interpreted iterations for a whole loop nest (a loop
        inside a loop must not multiply the work)."""
        if self.nest_depth == 0:
            self.iterations_left = NEST_BUDGET
        self.nest_depth += 1
        try:
            yield
        finally:
            self.nest_depth -= 1

    def _s_For(self, node: c_ast.For) -> None:
        self.frames[-1].scopes.append({})
        try:
            with self._loop_nest():
                counted = self._counted(node)
                if counted is not None:
                    self._counted_loop(node, *counted)
                else:
                    if node.init is not None:
                        self._exec(node.init)
                    self._generic_loop(node, node.cond, node.stmt, node.next, False)
        finally:
            self.frames[-1].scopes.pop()

    def _s_While(self, node: c_ast.While) -> None:
        with self._loop_nest():
            self._generic_loop(node, node.cond, node.stmt, None, False)

    def _s_DoWhile(self, node: c_ast.DoWhile) -> None:
        with self._loop_nest():
            self._generic_loop(node, node.cond, node.stmt, None, True)

    def _counted(self, node: c_ast.For) -> Optional[tuple]:
        """(iterator, lower node, upper node, inclusive, step) of a counted loop, or None."""
        it = lower = None
        init = node.init
        if isinstance(init, c_ast.DeclList) and len(init.decls) == 1 and init.decls[0].init:
            it, lower = init.decls[0].name, init.decls[0].init
        elif isinstance(init, c_ast.Assignment) and init.op == "=" and \
                isinstance(init.lvalue, c_ast.ID):
            it, lower = init.lvalue.name, init.rvalue
        if it is None or not isinstance(node.cond, c_ast.BinaryOp):
            return None
        c = node.cond
        flip = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!="}
        if isinstance(c.left, c_ast.ID) and c.left.name == it:
            op, upper = c.op, c.right
        elif isinstance(c.right, c_ast.ID) and c.right.name == it and c.op in flip:
            op, upper = flip[c.op], c.left
        else:
            return None
        if op not in ("<", "<=", "!="):
            return None
        step = _step_of(node.next, it)
        if step is None or step <= 0 or (op == "!=" and step != 1):
            return None
        assigned = _assigned_names(node.stmt)
        if it in assigned or _names(upper) & (assigned | {it}):
            return None
        if isinstance(init, c_ast.DeclList) and _names(lower) & {it}:
            return None
        return it, lower, upper, op == "<=", step

    def _counted_loop(self, node: c_ast.For, it: str, lower_n: c_ast.Node, upper_n: c_ast.Node,
                      inclusive: bool, step: int) -> None:
        if isinstance(node.init, c_ast.DeclList):
            self._exec(node.init)
        else:
            self._eval(node.init)
        sid = self._lookup(it)
        lower = self._read(_Ref(sid)) if sid is not None else _UNK
        upper = self._eval(upper_n)
        if not (isinstance(lower, _Num) and not lower.flt and isinstance(upper, _Num)
                and not upper.flt):
            self._generic_loop(node, node.cond, node.stmt, node.next, False)
            return
        lo, hi = lower.e, upper.e + (1 if inclusive else 0)
        trip = None
        if (hi - lo).is_number:
            trip = max(0, -int((lo - hi) // step))
            if trip == 0:
                self._write(_Ref(sid), _Num(lo))
                return
        base = self.state.clone()
        active = {lp.iterator for lp in self.loops}
        name = syntax.fresh_name(it, lambda n: n in self.params or n in active)
        sym = sympy.Symbol(name)
        hl = HostLoop(iterator=name, lower=lo, upper=hi, step=step, loc=self._loc(node))
        try:
            self._symbolic_loop(node, sid, sym, hl)
        except _NeedUnroll as need:
            self.state = base
            if trip is None and need.why == "the loop body always breaks" and \
                    self._first_iteration_breaks(node, sid, lo):
                return
            if (trip is None or trip > min(MAX_UNROLL, self.iterations_left)) and \
                    self._summarise(node, node.stmt, None, None, sid, False):
                final = hi if trip is None else lo + step * trip
                self._write(_Ref(sid), _Num(final) if step == 1 or trip is not None else _UNK)
                return
            if trip is None or trip > MAX_UNROLL:
                what = "its trip count is not a constant" if trip is None else \
                    (f"its trip count {trip} exceeds {MAX_UNROLL}; analyze a smaller problem "
                     "size (-D SMALL_DATASET, -D N=256, or --args with a smaller size)")
                raise self._error(
                    f"host loop cannot be kept symbolic ({need.why}) and cannot be unrolled: "
                    f"{what}", node, UnsupportedError) from None
            self._unroll(node, sid, [lo + i * step for i in range(trip)])
            return
        last = lo + step * (trip - 1) if trip is not None else (hi - 1 if step == 1 else None)
        self._leave_loop(sym, last, sid, hi if trip is None else lo + step * trip)

    def _symbolic_loop(self, node: c_ast.For, sid: int, sym: sympy.Symbol, hl: HostLoop) -> None:
        self.names_used.add(hl.iterator)  # parameters never take an iterator's name
        self.loops.append(hl)
        self.loop_syms.add(sym)
        try:
            s0 = self.state.clone()
            self._write(_Ref(sid), _Num(sym))
            self.state.uncertain_break = None
            self._body_once(node.stmt)
            s1 = self.state
            ops1 = s1.ops[len(s0.ops):]
            if ops1 and s1.uncertain_break is not None:
                raise self._early_exit_error(s1.uncertain_break)
            variant_slots = [k for k in s0.slots if k != sid and k in s1.slots
                             and s0.slots[k].value != s1.slots[k].value]
            variant_k = [o for o in s0.kobjs if o in s1.kobjs and s0.kobjs[o] != s1.kobjs[o]]
            new_k = [o for o in s1.kobjs if o not in s0.kobjs]
            if new_k or set(s1.buffers) - set(s0.buffers):
                raise _NeedUnroll("buffers or kernels are created inside the loop")
            if variant_slots or variant_k:
                s2 = s1.clone()
                for k in variant_slots:
                    slot = s2.slots[k]
                    s2.slots[k] = dataclasses.replace(
                        slot, value=_havoc_diff(s0.slots[k].value, slot.value))
                for o in variant_k:
                    ks = s2.kobjs[o]
                    s2.kobjs[o] = dataclasses.replace(ks, bindings=tuple(
                        (i, b if s0.kobjs[o].bound().get(i) == b else
                         _Poison("changes from one iteration to the next"))
                        for i, b in ks.bindings))
                s2.ops = list(s0.ops)
                self.state = s2
                try:
                    self._write(_Ref(sid), _Num(sym))
                    self._body_once(node.stmt)
                except PolyfuseError:
                    raise _NeedUnroll("the loop carries host state its operations use") from None
                if self.state.ops[len(s0.ops):] != ops1:
                    raise _NeedUnroll("the loop carries host state its operations use")
                self.state.ops = s0.ops + ops1
                for k in variant_slots:
                    if k in self.state.slots:
                        slot = self.state.slots[k]
                        self.state.slots[k] = dataclasses.replace(
                            slot, value=_havoc_diff(s0.slots[k].value, slot.value))
            self.state.uncertain_break = s0.uncertain_break
        finally:
            self.loops.pop()
            self.loop_syms.discard(sym)

    def _first_iteration_breaks(self, node: c_ast.For, sid: int, lo: Any) -> bool:
        """A search loop with a run-time trip count that leaves in its first iteration
        (``for (i = 0; i < nplatforms; i++) { ...; if (found) break; }``): run that iteration.
        Only for loops without operations; otherwise the caller refuses the loop."""
        base = self.state.clone()
        self._write(_Ref(sid), _Num(lo))
        try:
            self._exec(node.stmt)
        except _Break:
            if len(self.state.ops) == len(base.ops) and self.state.buffers == base.buffers:
                return True
        except _Continue:
            pass
        self.state = base
        return False

    def _body_once(self, body: c_ast.Node) -> None:
        try:
            self._exec(body)
        except _Continue:
            pass
        except _Break:
            raise _NeedUnroll("the loop body always breaks") from None

    def _leave_loop(self, sym: sympy.Symbol, last: Any, sid: int, final: Any) -> None:
        """Replace the iterator in bindings that outlive the loop by its last value."""
        for o, ks in list(self.state.kobjs.items()):
            binds = []
            for i, b in ks.bindings:
                if isinstance(b, ArgBinding) and sym in _syms(b.value, b.local_bytes):
                    if last is None:
                        b = dataclasses.replace(b, value=None)
                    else:
                        b = dataclasses.replace(
                            b, value=_subs(b.value, sym, last),
                            local_bytes=_subs(b.local_bytes, sym, last))
                binds.append((i, b))
            self.state.kobjs[o] = dataclasses.replace(ks, bindings=tuple(binds))
        for k, slot in list(self.state.slots.items()):
            if isinstance(slot.value, _Num) and sym in slot.value.e.free_symbols:
                self.state.slots[k] = dataclasses.replace(slot, value=_UNK)
        if sid in self.state.slots:
            self._write(_Ref(sid), _Num(final) if final is not None else _UNK)

    def _unroll(self, node: c_ast.For, sid: int, values: list) -> None:
        with self._no_early_exit():
            self.iterations_left -= len(values)
            for v in values:
                self._write(_Ref(sid), _Num(sympy.Integer(v)))
                try:
                    self._exec(node.stmt)
                except _Continue:
                    pass
                except _Break:
                    return
            if values:
                self._write(_Ref(sid), _Num(sympy.Integer(values[-1]) + 1))

    def _early_exit_error(self, node: c_ast.Node) -> PolyfuseError:
        src = self.break_src.get(id(node))
        why = f": its condition depends on {src.describe()}{_param_hint(src)}" if src else ""
        return self._error("launches in a host loop that may be left early (break or continue "
                           f"under a data-dependent condition){why}", node, UnsupportedError)

    @contextlib.contextmanager
    def _no_early_exit(self) -> Iterator[None]:
        """Refuse a loop with operations that a data-dependent break/continue may cut short."""
        saved, n_ops = self.state.uncertain_break, len(self.state.ops)
        self.state.uncertain_break = None
        yield
        flag = self.state.uncertain_break
        if flag is not None and len(self.state.ops) > n_ops:
            raise self._early_exit_error(flag)
        self.state.uncertain_break = saved

    def _generic_loop(self, node: c_ast.Node, cond: Optional[c_ast.Node], body: c_ast.Node,
                      nxt: Optional[c_ast.Node], do_first: bool) -> None:
        """A loop that is not counted: iterate it while its condition is known, else summarize."""
        base = self.state.clone()
        scopes = [dict(s) for s in self.frames[-1].scopes]
        with self._no_early_exit():
            for i in range(MAX_UNROLL + 1):
                if i or not do_first:
                    c = self._eval(cond) if cond is not None else _ONE
                    t = _truth(c)
                    if t is False:
                        return
                    if t is None or i == MAX_UNROLL:
                        break
                    if self.iterations_left <= 0 and len(self.state.ops) == len(base.ops):
                        break
                self.iterations_left -= 1
                try:
                    self._exec(body)
                except _Continue:
                    pass
                except _Break:
                    return
                if nxt is not None:
                    self._eval(nxt)
        # the condition is not known: the body must not contain operations
        self.state = base
        self.frames[-1].scopes = scopes
        if self._summarise(node, body, cond, nxt, None, do_first):
            return
        s0 = self.state.clone()
        self.state.uncertain_break = None
        if cond is not None and not do_first:
            self._eval(cond)
        try:
            self._exec(body)
            if nxt is not None:
                self._eval(nxt)
        except (_Break, _Continue):
            pass
        if (len(self.state.ops) > len(s0.ops) or set(self.state.buffers) != set(s0.buffers)
                or self.state.kobjs != s0.kobjs):
            raise self._error("launches or buffer operations in a loop whose trip count "
                              "polyfuse cannot determine (not a counted for loop with affine "
                              "bounds)", node, UnsupportedError)
        for k, slot in s0.slots.items():
            if k in self.state.slots and self.state.slots[k].value != slot.value:
                self.state.slots[k] = dataclasses.replace(
                    slot, value=_havoc_diff(slot.value, self.state.slots[k].value))
        self.state.uncertain_break = s0.uncertain_break

    def _summarise(self, loop: c_ast.Node, body: c_ast.Node, cond: Optional[c_ast.Node],
                   nxt: Optional[c_ast.Node], sid: Optional[int], do_first: bool) -> bool:
        """A loop that makes no OpenCL call, summarised instead of interpreted iteration by
        iteration: what it may write becomes unknown (until nothing more changes).  False,
        with the state untouched, when the body does make operations."""
        base = self.state.clone()
        scopes = [dict(s) for s in self.frames[-1].scopes]
        self.summarising += 1
        try:
            done = self._summary_passes(base, scopes, body, cond, nxt, sid, do_first)
        finally:
            self.summarising -= 1
        if not done:
            return False
        self.state.uncertain_break = base.uncertain_break
        src = self._source("computed by a loop polyfuse summarises", loop)
        for k, slot in list(self.state.slots.items()):
            old = base.slots.get(k)
            if old is not None and old.value != slot.value and slot.ctype.kind in ("int", "float") \
                    and isinstance(slot.value, _Unknown) and k != sid:
                # a count or total the loop computes: named, so that --param can bind it
                self.state.slots[k] = dataclasses.replace(
                    slot, value=self._coerce(_Runtime(src), slot.ctype, slot.name))
        return True

    def _summary_passes(self, base: _State, scopes: list, body: c_ast.Node,
                        cond: Optional[c_ast.Node], nxt: Optional[c_ast.Node], sid: Optional[int],
                        do_first: bool) -> bool:
        for _ in range(4):
            s0 = self.state.clone()
            if sid is not None:
                self._write(_Ref(sid), _UNK)
            try:
                if cond is not None and not do_first:
                    self._eval(cond)
                self._exec(body)
                if nxt is not None:
                    self._eval(nxt)
            except (_Break, _Continue):
                pass
            except PolyfuseError:  # an operation that needs the iterations: not summarisable
                self.state = base
                return False
            finally:
                self.frames[-1].scopes = [dict(sc) for sc in scopes]
            if (len(self.state.ops) != len(base.ops) or set(self.state.buffers) != set(base.buffers)
                    or self.state.kobjs != base.kobjs):
                self.state = base
                return False
            changed = [k for k, slot in s0.slots.items()
                       if k in self.state.slots and self.state.slots[k].value != slot.value]
            for k in changed:
                self.state.slots[k] = dataclasses.replace(
                    s0.slots[k], value=_havoc_diff(s0.slots[k].value, self.state.slots[k].value))
            if not changed:
                break
        return True

    # -- expressions --------------------------------------------------------------------------

    def _eval(self, node: Optional[c_ast.Node]) -> Any:
        if node is None:
            return _UNK
        method = getattr(self, "_e_" + type(node).__name__, None)
        if method is None:
            return _UNK
        return method(node)

    def _e_Constant(self, node: c_ast.Constant) -> Any:
        v = node.value
        if node.type == "string":
            return _Str("".join(re.findall(r'"((?:\\.|[^"\\])*)"', v)))
        if node.type == "char":
            body = v.strip("'")
            try:
                ch = body.encode().decode("unicode_escape") if body.startswith("\\") else body
                return _Num(sympy.Integer(ord(ch[0]) if ch else 0))
            except (UnicodeDecodeError, IndexError):
                return _UNK
        if node.type == "bool":
            return _ONE if v == "true" else _ZERO
        if node.type in ("float", "double", "long double"):
            try:
                return _Num(sympy.Float(float(v.rstrip("fFlL"))), True)
            except ValueError:
                return _UNKF
        text = v.rstrip("uUlL").replace("'", "")
        try:
            if re.fullmatch(r"0[0-7]+", text):
                return _Num(sympy.Integer(int(text, 8)))
            return _Num(sympy.Integer(int(text, 0)))
        except ValueError:
            try:
                return _Num(sympy.Float(float(text)), True)
            except ValueError:
                return _UNK

    def _e_ID(self, node: c_ast.ID) -> Any:
        sid = self._lookup(node.name)
        if sid is None:
            if node.name == "optarg" and self.argv is not None:
                return self.optarg
            if node.name == "optind" and self.argv is not None:
                return _Num(sympy.Integer(self.optind))
            if node.name in self.enums:
                return _Num(sympy.Integer(self.enums[node.name]))
            if node.name in ("true", "false"):
                return _ONE if node.name == "true" else _ZERO
            if node.name in ("NULL", "nullptr"):
                return _ZERO
            return _Handle(node.name)
        slot = self.state.slots[sid]
        if slot.ctype.kind == "array":
            return _Ref(sid)
        return slot.value

    def _e_Typename(self, node: c_ast.Node) -> Any:
        return _UNK

    def _e_ExprList(self, node: c_ast.ExprList) -> Any:
        v: Any = _UNK
        for e in node.exprs:
            v = self._eval(e)
        return v

    def _e_InitList(self, node: c_ast.InitList) -> Any:
        return _Arr(len(node.exprs), tuple((i, self._eval(e)) for i, e in enumerate(node.exprs)),
                    _ZERO)

    def _e_CompoundLiteral(self, node: c_ast.CompoundLiteral) -> Any:
        ctype = self._ctype(node.type)
        if ctype.kind == "array" and ctype.length is None:
            n = len(node.init.exprs)
            ctype = dataclasses.replace(ctype, length=n, size=(ctype.elem or _INT).size * n)
        value = self._init_list(node.init, ctype, "literal")
        sid = self._new_slot("literal", ctype, value)
        return _Ref(sid) if ctype.kind == "array" else value

    def _e_Cast(self, node: c_ast.Cast) -> Any:
        v = self._eval(node.expr)
        t = self._ctype(node.to_type)
        if isinstance(v, _Num):
            if t.kind == "float":
                return _Num(v.e, True)
            if t.kind == "int" and v.flt:
                return _float_to_int(v.e)
        if isinstance(v, _Unknown) and t.kind in ("int", "float"):
            return _Unknown(t.kind == "float", v.src)
        return v

    def _e_TernaryOp(self, node: c_ast.TernaryOp) -> Any:
        t = _truth(self._eval(node.cond))
        if t is True:
            return self._eval(node.iftrue)
        if t is False:
            return self._eval(node.iffalse)
        a, b = self._eval(node.iftrue), self._eval(node.iffalse)
        if a == b:
            return a
        if isinstance(a, (_Num, _Runtime)) and isinstance(b, (_Num, _Runtime)):
            if self._varies():
                return _UNK
            return _RUNTIME
        if isinstance(a, (_Num, _Unknown, _Runtime)) and isinstance(b, (_Num, _Unknown, _Runtime)):
            return _UNK
        return _Poison("selected by a data-dependent host condition")

    def _e_Assignment(self, node: c_ast.Assignment) -> Any:
        ref = self._lvalue(node.lvalue)
        if node.op == "=":
            self.name_hint = self._lvalue_name(node.lvalue)
            try:
                value = self._eval(node.rvalue)
            finally:
                self.name_hint = None
        else:
            cur = self._read(ref) if ref is not None else self._eval(node.lvalue)
            value = self._binop(node.op[:-1], cur, self._eval(node.rvalue), node)
        if ref is not None:
            self._store(ref, value, node)
        return value

    def _store(self, ref: _Ref, value: Any, node: c_ast.Node) -> None:
        if isinstance(ref, _SymIndex):
            if isinstance(value, _TRACKED) or isinstance(value, (_Rec, _Arr)):
                if ref.loop:
                    raise _NeedUnroll("a handle is stored at an index that depends on a host "
                                      "loop iterator")
                value = _Poison("stored at an unknown index")
            else:
                value = _UNK
            whole = _Ref(ref.slot, ref.path)
            arr = self._read(whole)
            if isinstance(arr, _Arr):
                new = _Arr(arr.length, tuple((i, _join_unknown(v, value)) for i, v in arr.elems),
                           _join_unknown(arr.default, value))
                self._write(whole, new)
            return
        self._write(ref, value)

    def _lvalue_name(self, node: c_ast.Node) -> Optional[str]:
        if isinstance(node, c_ast.ID):
            return node.name
        if isinstance(node, c_ast.ArrayRef):
            base = self._lvalue_name(node.name)
            idx = self._eval(node.subscript)
            if base and isinstance(idx, _Num) and idx.e.is_Integer:
                return f"{base}_{int(idx.e)}"
            return base
        if isinstance(node, c_ast.StructRef):
            base = self._lvalue_name(node.name)
            return f"{base}_{node.field.name}" if base else node.field.name
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            return self._lvalue_name(node.expr)
        return None

    def _lvalue(self, node: c_ast.Node) -> Optional[_Ref]:
        """Where an lvalue lives; None for memory polyfuse does not track (host data)."""
        if isinstance(node, c_ast.ID):
            sid = self._lookup(node.name)
            return _Ref(sid) if sid is not None else None
        if isinstance(node, c_ast.ArrayRef):
            base = self._pointer_of(node.name)
            if base is None:
                self._eval(node.subscript)
                return None
            return self._index(base, self._eval(node.subscript))
        if isinstance(node, c_ast.StructRef):
            if node.type == "->":
                base = self._eval(node.name)
                if not isinstance(base, _Ref):
                    return None
                target = self._read(base)
                if isinstance(target, _Arr):
                    base = _Ref(base.slot, base.path + (0,))
            else:
                base = self._lvalue(node.name)
                if base is None or isinstance(base, _SymIndex):
                    return None
            return _Ref(base.slot, base.path + (node.field.name,))
        if isinstance(node, c_ast.UnaryOp) and node.op == "*":
            p = self._eval(node.expr)
            if isinstance(p, _Ref):
                return self._index(p, _ZERO)
            return None
        if isinstance(node, c_ast.Cast):
            return self._lvalue(node.expr)
        return None

    def _pointer_of(self, node: c_ast.Node) -> Optional[_Ref]:
        v = self._eval(node)
        return v if isinstance(v, _Ref) else None

    def _index(self, base: _Ref, idx: Any) -> Any:
        """The element ``base[idx]`` of an array (or of the array a pointer points into)."""
        target = self._read(base)
        if isinstance(idx, _Num) and idx.e.is_Integer:
            i = int(idx.e)
            if isinstance(target, _Arr):
                return _Ref(base.slot, base.path + (i,))
            if base.path and isinstance(base.path[-1], int):
                return _Ref(base.slot, base.path[:-1] + (base.path[-1] + i,))
            if i == 0:
                return base
            return None
        loop = isinstance(idx, _Num) and bool(_syms(idx.e) & self.loop_syms)
        if isinstance(target, _Arr):
            return _SymIndex(base.slot, base.path, loop)
        if base.path and isinstance(base.path[-1], int):
            return _SymIndex(base.slot, base.path[:-1], loop)
        return None

    def _e_ArrayRef(self, node: c_ast.ArrayRef) -> Any:
        value = self._eval(node.name)
        base = value if isinstance(value, _Ref) else None
        idx = self._eval(node.subscript)
        if isinstance(value, _Str):  # argv[i][0] == '-', switch (argv[i][1])
            return _char_at(value.s, idx)
        if base is None:
            return _UNK
        ref = self._index(base, idx)
        if ref is None:
            return _UNK
        if isinstance(ref, _SymIndex):
            arr = self._read(_Ref(ref.slot, ref.path))
            if isinstance(arr, _Arr):
                vals = [v for _, v in arr.elems] + [arr.default]
                if all(v == vals[0] for v in vals) and arr.length is not None and \
                        len(arr.elems) >= arr.length:
                    return vals[0]
                if any(isinstance(v, _TRACKED) for v in vals):
                    if ref.loop:
                        raise _NeedUnroll("a handle is read at an index that depends on a host "
                                          "loop iterator")
                    return _Poison("read at an unknown index")
            return _UNK
        return self._deref_value(ref)

    def _deref_value(self, ref: _Ref) -> Any:
        v = self._read(ref)
        slot = self.state.slots.get(ref.slot)
        if slot is not None:
            t = slot.ctype
            for p in ref.path:
                t = (t.elem if isinstance(p, int) else t.field(p)) or _UNK_TYPE
            if t.kind == "array":
                return ref
        return v

    def _e_StructRef(self, node: c_ast.StructRef) -> Any:
        ref = self._lvalue(node)
        if ref is None or isinstance(ref, _SymIndex):
            return _UNK
        return self._deref_value(ref)

    def _e_UnaryOp(self, node: c_ast.UnaryOp) -> Any:
        op = node.op
        if op == "sizeof":
            if isinstance(node.expr, c_ast.Typename):
                t = self._ctype(node.expr)
            else:
                t = self._expr_ctype(node.expr)
            return _Num(sympy.Integer(t.size))
        if op == "_Alignof":
            return _Num(sympy.Integer(8))
        if op == "&":
            ref = self._lvalue(node.expr)
            if isinstance(ref, _SymIndex):
                if ref.loop:
                    raise _NeedUnroll("an address depends on a host loop iterator")
                return _Poison("address of an element at an unknown index")
            return ref if ref is not None else _Handle("pointer")
        if op == "*":
            p = self._eval(node.expr)
            if isinstance(p, _Str):
                return _char_at(p.s, _ZERO)
            if isinstance(p, _Ref):
                ref = self._index(p, _ZERO)
                return self._deref_value(ref) if isinstance(ref, _Ref) else _UNK
            return _UNK
        if op in ("++", "--", "p++", "p--"):
            ref = self._lvalue(node.expr)
            cur = self._read(ref) if isinstance(ref, _Ref) else _UNK
            new = self._binop("+" if "+" in op else "-", cur, _ONE, node)
            if ref is not None:
                self._store(ref, new, node)
            return new if op in ("++", "--") else cur
        v = self._eval(node.expr)
        if op == "!":
            t = _truth(v)
            if t is None:
                rel = _rel(v)
                return _Cond(sympy.Not(rel)) if rel is not None else _Unknown(False, _src_of(v))
            return _ZERO if t else _ONE
        if isinstance(v, _Num):
            if op == "-":
                return _Num(-v.e, v.flt)
            if op == "+":
                return v
            if op == "~" and v.e.is_Integer:
                return _Num(sympy.Integer(~int(v.e)))
        if isinstance(v, _Runtime):
            return v
        return _Unknown(isinstance(v, _Num) and v.flt, _src_of(v))

    def _e_BinaryOp(self, node: c_ast.BinaryOp) -> Any:
        op = node.op
        if op in ("&&", "||"):
            a = self._eval(node.left)
            ta = _truth(a)
            if op == "&&" and ta is False or op == "||" and ta is True:
                return _ZERO if ta is False else _ONE
            b = self._eval(node.right)
            tb = _truth(b)
            if ta is not None and tb is not None:
                return _ONE if (ta and tb if op == "&&" else ta or tb) else _ZERO
            if op == "&&" and (tb is False) or op == "||" and (tb is True):
                return _ZERO if tb is False else _ONE
            ra = _rel(a) if ta is None else sympy.true
            rb = _rel(b) if tb is None else sympy.true
            if ra is None or rb is None:
                return _UNK
            return _Cond(sympy.And(ra, rb) if op == "&&" else sympy.Or(
                ra if ta is None else sympy.false, rb if tb is None else sympy.false))
        return self._binop(op, self._eval(node.left), self._eval(node.right), node)

    def _binop(self, op: str, a: Any, b: Any, node: c_ast.Node) -> Any:
        if op in ("==", "!="):
            handle_a = isinstance(a, (_BufRef, _KObj, _ProgObj, _Handle, _Ref, _Str))
            handle_b = isinstance(b, (_BufRef, _KObj, _ProgObj, _Handle, _Ref, _Str))
            if handle_a or handle_b:
                if handle_a and handle_b:
                    if a == b:
                        return _ONE if op == "==" else _ZERO
                    return _UNK
                other = b if handle_a else a
                if isinstance(other, _Num) and other.e == 0:
                    return _ZERO if op == "==" else _ONE
                return _UNK
        if isinstance(a, _Str) and isinstance(b, _Num) and op == "+" and b.e.is_Integer and \
                0 <= int(b.e) <= len(a.s):
            return _Str(a.s[int(b.e):])  # a pointer into a known string (argv[i] + 2)
        if isinstance(a, _Ref) and isinstance(b, _Num) and op in ("+", "-") and b.e.is_Integer:
            r = self._index(a, _Num(b.e if op == "+" else -b.e))
            return r if isinstance(r, _Ref) else _Handle("pointer")
        if not (isinstance(a, _Num) and isinstance(b, _Num)):
            src = _src_of(a, b)
            if isinstance(a, (_Runtime, _Num)) and isinstance(b, (_Runtime, _Num)) and \
                    not (_num_syms(a) | _num_syms(b)) & self.loop_syms:
                if op in ("<", ">", "<=", ">=", "==", "!="):
                    return _Unknown(False, src)
                return _Runtime(src)
            flt = any(isinstance(x, (_Num, _Unknown)) and x.flt for x in (a, b))
            return _Unknown(flt, src)
        x, y = a.e, b.e
        flt = a.flt or b.flt
        try:
            if op in ("<", ">", "<=", ">=", "==", "!="):
                rel = {"<": sympy.Lt, ">": sympy.Gt, "<=": sympy.Le, ">=": sympy.Ge,
                       "==": sympy.Eq, "!=": sympy.Ne}[op](x, y)
                if rel is sympy.true:
                    return _ONE
                if rel is sympy.false:
                    return _ZERO
                return _Cond(rel)
            if op == "+":
                return _Num(x + y, flt)
            if op == "-":
                return _Num(x - y, flt)
            if op == "*":
                return _Num(x * y, flt)
            if op == "/":
                if y == 0:
                    return _Unknown(flt)
                if flt:
                    return _Num(x / y, True)
                if x.is_Integer and y.is_Integer:
                    q = abs(int(x)) // abs(int(y))
                    return _Num(sympy.Integer(q if (int(x) >= 0) == (int(y) > 0) else -q))
                return _Num(sympy.floor(x / y))
            if op == "%":
                if flt or y == 0:
                    return _Unknown(flt)
                if x.is_Integer and y.is_Integer:
                    r = abs(int(x)) % abs(int(y))
                    return _Num(sympy.Integer(r if int(x) >= 0 else -r))
                return _Num(sympy.Mod(x, y))
            if flt:
                return _UNKF
            if op == "<<" and y.is_Integer:
                return _Num(x * 2 ** int(y))
            if op == ">>" and y.is_Integer:
                if x.is_Integer:
                    return _Num(sympy.Integer(int(x) >> int(y)))
                return _Num(sympy.floor(x / 2 ** int(y)))
            if x.is_Integer and y.is_Integer:
                ix, iy = int(x), int(y)
                res = {"&": ix & iy, "|": ix | iy, "^": ix ^ iy}.get(op)
                if res is not None:
                    return _Num(sympy.Integer(res))
        except (TypeError, ValueError, ZeroDivisionError):
            return _Unknown(flt)
        return _UNK

    # -- calls --------------------------------------------------------------------------------

    def _e_FuncCall(self, node: c_ast.FuncCall) -> Any:
        name = node.name.name if isinstance(node.name, c_ast.ID) else None
        hint, self.name_hint = self.name_hint, None
        argn = list(node.args.exprs) if node.args is not None else []
        if name == "assert":
            v = self._eval(argn[0]) if argn else _UNK
            rel = _rel(v)
            if rel is not None:
                self.state.facts.append(rel)
            return _UNK
        args = [self._eval(a) for a in argn]
        self.node = node
        if name is None:
            return self._unknown_call("(function pointer)", args, node)
        if name in self.funcs and name != "main":
            return self._call_function(self.funcs[name], args, node)
        if name in _STD_STRING:
            return self._std_string(name, args)
        if clhpp.handles(name):
            self.name_hint = hint
            try:
                return clhpp.call(self, name, node, args)
            finally:
                self.name_hint = None
        handler = getattr(self, "_cl_" + name, None)
        if handler is not None:
            self.name_hint = hint
            try:
                return handler(node, args)
            finally:
                self.name_hint = None
        if name in ("exit", "abort", "_exit", "quick_exit"):
            raise _Exit()
        if name in _READ_INT:
            return _RUNTIME if not self._varies() else _UNK
        if name in ("scanf", "fscanf", "sscanf"):
            start = 1 if name == "scanf" else 2
            src = self._source(f"read by {name}", node)
            for a in args[start:]:
                if isinstance(a, _Ref):
                    self._write(a, _Runtime(src))
            return _UNK
        if name in _ALLOC:
            zero = name == "calloc"
            sid = self._new_slot(hint or "heap", _CType("array", 0, elem=_UNK_TYPE),
                                 _Arr(None, (), _ZERO if zero else _UNK))
            return _Ref(sid)
        if name in _MATH:
            return _math(name, args)
        if name in _HANDLE_RESULT:
            self._success(args)
            return _Handle(name)
        if name in _IGNORED:
            if name.startswith("clGet"):
                self._query(args[1:])
            return _ZERO if name.startswith("cl") else _UNK
        return self._unknown_call(name, args, node)

    def _source(self, what: str, node: c_ast.Node) -> _Source:
        loc = self._loc(node)
        return _Source(what, f"{loc.file}:{loc.line}" if loc else self.filename)

    def _read_back(self, ptr: Any, call: str, node: c_ast.Node) -> None:
        """Host memory a read from the device fills holds data polyfuse does not know (never
        its old value), named after the variable it is read into."""
        if not isinstance(ptr, _Ref):
            return
        value = _Runtime(self._source(f"read back from the device by {call}", node))
        cur = self._read(ptr)
        if isinstance(cur, _Arr):
            self._write(ptr, _Arr(cur.length, tuple((i, value) for i, _ in cur.elems), value))
        elif ptr.path and isinstance(ptr.path[-1], int) and ptr.path[-1] == 0 and \
                isinstance(self._read(_Ref(ptr.slot, ptr.path[:-1])), _Arr):
            arr = self._read(_Ref(ptr.slot, ptr.path[:-1]))
            self._write(_Ref(ptr.slot, ptr.path[:-1]),
                        _Arr(arr.length, tuple((i, value) for i, _ in arr.elems), value))
        elif isinstance(cur, (_Unknown, _Num, _Runtime)):
            self._write(ptr, value)

    def _unknown_call(self, name: str, args: list, node: c_ast.Node) -> Any:
        for a in args:  # a kernel file opened by a library call (std::ifstream, open)
            if isinstance(a, _Str) and a.s.endswith((".cl", ".ocl", ".clh")):
                found = self._find_file(a.s)
                self.opened.append(found or a.s)
        bufs = []
        for a in args:
            bufs += self._buffers_in(a, 0)
        bufs = list(dict.fromkeys(bufs))
        if bufs:
            ranges = tuple(BufferRange(b) for b in bufs)
            self._op(HostOp(id=0, kind="unknown", reads=ranges, writes=ranges, name=name), node)
        # host variables it may write through pointers hold values known only at run time
        self._query([a for a in args if isinstance(a, _Ref)])
        return _UNK

    def _buffers_in(self, v: Any, depth: int) -> list[str]:
        if isinstance(v, _BufRef):
            return [v.name]
        if depth > 3:
            return []
        if isinstance(v, _Ref):
            return self._buffers_in(self._read(_Ref(v.slot, v.path)), depth + 1)
        if isinstance(v, _Arr):
            out = []
            for _, e in v.elems:
                out += self._buffers_in(e, depth + 1)
            return out
        if isinstance(v, _Rec):
            out = []
            for _, e in v.fields:
                out += self._buffers_in(e, depth + 1)
            return out
        return []

    def _call_function(self, fd: c_ast.FuncDef, args: list, node: c_ast.Node) -> Any:
        if len(self.frames) > _MAX_CALL_DEPTH:
            raise self._error(f"call depth exceeds {_MAX_CALL_DEPTH} (recursion?) in "
                              f"'{fd.decl.name}'", node, UnsupportedError)
        frame = _Frame(fd.decl.name, [{}])
        params = fd.decl.type.args.params if fd.decl.type.args is not None else []
        decls = [p for p in params if isinstance(p, c_ast.Decl) and p.name]
        self.frames.append(frame)
        try:
            for i, p in enumerate(decls):
                ctype = self._ctype(p.type)
                if ctype.kind == "array":
                    ctype = _CType("ptr", 8, elem=ctype.elem)
                self._declare(p.name, ctype, args[i] if i < len(args) else _UNK)
            self.node = fd.body
            try:
                self._exec(fd.body)
                result: Any = _UNK
            except _Return as r:
                result = r.value
            except (_Break, _Continue):
                raise self._error("break or continue outside a loop", fd) from None
            if frame.cond_returns:
                result = self._join_all(frame.cond_returns + [result], "result")
            return result
        finally:
            self.frames.pop()

    # -- the OpenCL API -----------------------------------------------------------------------

    def _arg(self, args: list, i: int) -> Any:
        return args[i] if i < len(args) else _UNK

    def _int(self, v: Any, what: str, node: c_ast.Node, *, required: bool = True) -> Any:
        """A sympy integer expression for ``v``; an error (or None) when it is not known."""
        if isinstance(v, _Num) and not v.flt:
            return v.e
        if isinstance(v, _Num) and v.e.is_number:
            return sympy.Integer(int(v.e))
        if not required:
            return None
        if isinstance(v, _Poison):
            raise self._error(f"{what} {v.reason}", node, UnsupportedError)
        src = _src_of(v)
        if src is not None:
            raise self._error(f"{what} depends on a value the program computes from its data "
                              f"({src.describe()}){_param_hint(src)}", node, UnsupportedError)
        hint = "" if self.argv is not None else \
            " (if it comes from the command line, give it with --args \"...\")"
        raise self._error(f"{what} is not an integer polyfuse can determine from the host code"
                          f"{hint}", node, UnsupportedError)

    def _concrete(self, v: Any, what: str, node: c_ast.Node) -> int:
        e = self._int(v, what, node)
        if e.is_Integer:
            return int(e)
        if _syms(e) & self.loop_syms:
            raise _NeedUnroll(f"{what} depends on a host loop iterator")
        raise self._error(f"{what} must be a constant, got {e}", node, UnsupportedError)

    def _std_string(self, name: str, args: list) -> Any:
        """``std::string`` as the C string it holds (the C++ front-end lowers its members to
        these calls), and ``std::stoi``-style conversions."""
        if name in ("stoi", "stol", "stoll", "stoul", "stoull"):
            return self._read_number("atoi", args)
        if name in ("stof", "stod", "stold"):
            return self._read_number("atof", args)
        first = self._arg(args, 0)
        if name == "to_string":
            return _Str(str(int(first.e))) if isinstance(first, _Num) and first.e.is_Integer \
                and not first.flt else _UNK
        if name == "operator+":  # a + b of strings
            a, b = self._string(first), self._string(self._arg(args, 1))
            return _Str(a + b) if a is not None and b is not None else _UNK
        if name in ("basic_string__basic_string", "basic_string__ctor"):
            text = self._string(first) if args else ""
            return _Str(text) if text is not None else _UNK
        target = self._read(first) if isinstance(first, _Ref) else first
        if name in ("basic_string__c_str", "basic_string__data"):
            return target if isinstance(target, _Str) else _UNK
        if name in ("basic_string__size", "basic_string__length"):
            return _Num(sympy.Integer(len(target.s))) if isinstance(target, _Str) else _UNK
        if name == "basic_string__empty":
            return _Num(sympy.Integer(int(not target.s))) if isinstance(target, _Str) else _UNK
        # the assignments: the string becomes unknown unless every part is known
        value = self._string(self._arg(args, 1)) if name != "basic_string__clear" else ""
        if name in ("basic_string__append", "basic_string__operator+=") and value is not None:
            value = target.s + value if isinstance(target, _Str) else None
        if isinstance(first, _Ref):
            self._write(first, _Str(value) if value is not None else _UNK)
        return first

    def _string(self, v: Any) -> Optional[str]:
        """The text a ``std::string``, a string literal or a written char buffer holds."""
        if isinstance(v, _Ref) and v.slot not in self.str_slots:
            v = self._read(v)
        return self._text(v)

    def _cl_memcpy(self, node: c_ast.FuncCall, args: list) -> Any:
        """Library calls that write through their first argument: what they write is known
        only at run time (never "no effect": a size copied into a variable must not keep its
        old value)."""
        dst = self._arg(args, 0)
        if isinstance(dst, _Ref):
            self._query([dst])
        return dst

    _cl_memmove = _cl_strcpy = _cl_strncpy = _cl_strcat = _cl_strncat = _cl_fgets = _cl_memcpy

    def _cl_memset(self, node: c_ast.FuncCall, args: list) -> Any:
        dst, value = self._arg(args, 0), self._arg(args, 1)
        if isinstance(dst, _Ref):
            cur = self._read(dst)
            if isinstance(cur, (_Unknown, _Num, _Runtime)):
                zero = isinstance(value, _Num) and value.e == 0
                self._write(dst, _ZERO if zero else _UNK)
        return dst

    def _cl_posix_memalign(self, node: c_ast.FuncCall, args: list) -> Any:
        ptr = self._arg(args, 0)
        if isinstance(ptr, _Ref):
            sid = self._new_slot("heap", _CType("array", 0, elem=_UNK_TYPE), _Arr(None, (), _UNK))
            self._write(ptr, _Ref(sid))
        return _ZERO

    def _cl_sprintf(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._format_into(self._arg(args, 0), args[1:])

    def _cl_snprintf(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._format_into(self._arg(args, 0), args[2:])

    def _format_into(self, buf: Any, args: list) -> Any:
        if not isinstance(buf, _Ref):
            return _UNK
        text = _c_format(args)
        if text is None:
            self.str_slots.pop(buf.slot, None)
            return _UNK
        self.str_slots[buf.slot] = text
        return _Num(sympy.Integer(len(text)))

    def _text(self, v: Any) -> Optional[str]:
        """The C string a value holds: a literal, or a buffer polyfuse wrote text into."""
        if isinstance(v, _Str):
            return v.s
        if isinstance(v, _Ref) and v.path in ((), (0,)):
            return self.str_slots.get(v.slot)
        return None

    def _cl_strcmp(self, node: c_ast.FuncCall, args: list) -> Any:
        a, b = self._text(self._arg(args, 0)), self._text(self._arg(args, 1))
        if a is not None and b is not None:
            return _Num(sympy.Integer((a > b) - (a < b)))
        return _UNK

    def _cl_strncmp(self, node: c_ast.FuncCall, args: list) -> Any:
        a, b, n = self._text(self._arg(args, 0)), self._text(self._arg(args, 1)), \
            self._arg(args, 2)
        if a is not None and b is not None and isinstance(n, _Num) and n.e.is_Integer:
            k = int(n.e)
            return _Num(sympy.Integer((a[:k] > b[:k]) - (a[:k] < b[:k])))
        return _UNK

    def _cl_strlen(self, node: c_ast.FuncCall, args: list) -> Any:
        a = self._text(self._arg(args, 0))
        return _Num(sympy.Integer(len(a))) if a is not None else _UNK

    def _read_number(self, name: str, args: list) -> Any:
        a = self._arg(args, 0)
        if isinstance(a, _Str):
            v = _c_number(a.s, name, self._arg(args, 2))
            if v is not None:
                return v
            return _UNKF if name in ("atof", "strtod", "strtof") else _UNK
        if name in ("atof", "strtod", "strtof"):
            return _UNKF
        return _RUNTIME if not self._varies() else _UNK

    def _cl_atoi(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._read_number("atoi", args)

    def _cl_atol(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._read_number("atol", args)

    def _cl_atoll(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._read_number("atoll", args)

    def _cl_strtol(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._read_number("strtol", args)

    def _cl_strtoul(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._read_number("strtoul", args)

    def _cl_strtoll(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._read_number("strtoll", args)

    def _cl_strtoull(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._read_number("strtoull", args)

    def _cl_atof(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._read_number("atof", args)

    def _cl_strtod(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._read_number("strtod", args)

    def _cl_strtof(self, node: c_ast.FuncCall, args: list) -> Any:
        return self._read_number("strtof", args)

    def _cl_getopt(self, node: c_ast.FuncCall, args: list) -> Any:
        """POSIX ``getopt`` over the ``--args`` command line (unknown without it)."""
        return self._getopt(args, None)

    def _cl_getopt_long(self, node: c_ast.FuncCall, args: list) -> Any:
        """GNU ``getopt_long``: ``--name``, ``--name=value`` and ``--name value`` from the
        ``struct option`` table, short options as ``getopt``."""
        return self._getopt(args, self._arg(args, 3))

    def _getopt(self, args: list, longopts: Any) -> Any:
        spec = self._arg(args, 2)
        argv = self._words(self._arg(args, 0), self._arg(args, 1))
        if argv is None or not isinstance(spec, _Str):
            return _UNK
        optind = self._opt_index()
        if optind >= len(argv) or not argv[optind].startswith("-") or argv[optind] == "-":
            return _Num(sympy.Integer(-1))
        word = argv[optind]
        if word == "--":
            self._set_opt(optind + 1, None)
            return _Num(sympy.Integer(-1))
        if word.startswith("--") and longopts is not None:
            return self._long_option(argv, optind, word[2:], longopts)
        opt = word[1]
        pos = spec.s.find(opt)
        if pos < 0 or opt == ":":
            self._set_opt(optind + 1, None)
            return _Num(sympy.Integer(ord("?")))
        if spec.s[pos + 1:pos + 2] == ":":
            if len(word) > 2:
                self._set_opt(optind + 1, word[2:])
            elif optind + 1 < len(argv):
                self._set_opt(optind + 2, argv[optind + 1])
            else:
                self._set_opt(optind + 1, None)
                return _Num(sympy.Integer(ord("?")))
        else:
            self._set_opt(optind + 1, None)
        return _Num(sympy.Integer(ord(opt)))

    def _long_option(self, argv: list[str], optind: int, word: str, longopts: Any) -> Any:
        name, eq, value = word.partition("=")
        i = 0
        while isinstance(longopts, _Ref) and i <= 256:
            entry = self._read(_Ref(longopts.slot, longopts.path[:-1] + (longopts.path[-1] + i,))
                               if longopts.path and isinstance(longopts.path[-1], int)
                               else _Ref(longopts.slot, longopts.path + (i,)))
            if not isinstance(entry, _Rec):
                return _UNK
            fields = ("name", "has_arg", "flag", "val") if entry.get("name") != _UNK else \
                ("0", "1", "2", "3")  # struct option {name, has_arg, flag, val}
            opt_name, has_arg, flag, val = (entry.get(f) for f in fields)
            if not isinstance(opt_name, _Str):
                break  # the table's terminating { 0, 0, 0, 0 }
            if opt_name.s == name:
                if not isinstance(has_arg, _Num) or not has_arg.e.is_Integer:
                    return _UNK
                if int(has_arg.e) == 0 or eq:
                    self._set_opt(optind + 1, value if eq else None)
                elif optind + 1 < len(argv):
                    self._set_opt(optind + 2, argv[optind + 1])
                elif int(has_arg.e) == 1:
                    self._set_opt(optind + 1, None)
                    return _Num(sympy.Integer(ord("?")))
                else:
                    self._set_opt(optind + 1, None)
                if isinstance(flag, _Ref):
                    self._write(flag, val)
                    return _ZERO
                return val
            i += 1
        self._set_opt(optind + 1, None)
        return _Num(sympy.Integer(ord("?")))

    def _words(self, argc: Any, argv: Any) -> Optional[list[str]]:
        """The strings an ``argc``/``argv`` pair holds (also after a harness moved ``argv``
        past its own options), or None when polyfuse does not know them."""
        if self.argv is None or not isinstance(argc, _Num) or not argc.e.is_Integer:
            return None
        if not isinstance(argv, _Ref):
            return None
        words = []
        for k in range(int(argc.e)):
            ref = self._index(argv, _Num(sympy.Integer(k)))
            w = self._read(ref) if isinstance(ref, _Ref) else None
            if not isinstance(w, _Str):
                return None
            words.append(w.s)
        return words

    def _opt_index(self) -> int:
        sid = self._lookup("optind")
        v = self._read(_Ref(sid)) if sid is not None else None
        if isinstance(v, _Num) and v.e.is_Integer:
            self.optind = int(v.e)
        return self.optind

    def _set_opt(self, optind: int, optarg: Optional[str]) -> None:
        """getopt's globals, in polyfuse's state and in the host's own ``extern`` declarations."""
        self.optind = optind
        self.optarg = _Str(optarg) if optarg is not None else _ZERO
        for name, value in (("optind", _Num(sympy.Integer(optind))), ("optarg", self.optarg)):
            sid = self._lookup(name)
            if sid is not None:
                self._write(_Ref(sid), value)


@dataclass(frozen=True)
class _SymIndex:
    """An array element at an index that is not a constant (the whole array is affected)."""

    slot: int
    path: tuple
    loop: bool


_UNK_TYPE = _CType("int", 8, name="?")

# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


def _align(t: _CType) -> int:
    if t.kind == "array":
        return _align(t.elem or _INT)
    if t.kind == "struct":
        return max((_align(f) for _, f in t.fields), default=1)
    return max(1, t.size)


def _src_of(*values: Any) -> Optional[_Source]:
    """The data source an unknown value was computed from, if one of ``values`` has one."""
    for v in values:
        if isinstance(v, (_Unknown, _Runtime)) and v.src is not None:
            return v.src
    return None


def _char_at(text: str, idx: Any) -> Any:
    """A character of a known C string (its terminating NUL included), else unknown."""
    if isinstance(idx, _Num) and idx.e.is_Integer and 0 <= int(idx.e) <= len(text):
        return _Num(sympy.Integer(ord(text[int(idx.e)]) if int(idx.e) < len(text) else 0))
    return _UNK


def _param_hint(src: _Source) -> str:
    return f"; pass --param {src.name}=VALUE to analyse the program with that value" \
        if src.name else ""


def _truth(v: Any) -> Optional[bool]:
    if isinstance(v, _Num):
        if v.e.is_number:
            return bool(v.e != 0)
        return None
    if isinstance(v, (_BufRef, _KObj, _ProgObj, _Handle, _Ref, _Str)):
        return True
    return None


def _rel(v: Any) -> Any:
    if isinstance(v, _Cond):
        return v.rel
    if isinstance(v, _Num) and not v.e.is_number and not v.flt:
        return sympy.Ne(v.e, 0)
    return None


def _havoc(v: Any) -> Any:
    if isinstance(v, _Num):
        return _Unknown(v.flt)
    if isinstance(v, (_Unknown, _Runtime, _Cond)):
        return _UNK
    return _Poison("changes from one host loop iteration to the next")


def _havoc_diff(old: Any, new: Any) -> Any:
    """Forget what differs between ``old`` and ``new`` (element-wise in arrays and structs)."""
    if old == new:
        return new
    if isinstance(old, _Arr) and isinstance(new, _Arr) and old.default == new.default:
        keys = {k for k, _ in old.elems} | {k for k, _ in new.elems}
        elems = tuple((k, _havoc_diff(old.get(k), new.get(k))) for k in sorted(keys))
        return _Arr(new.length, elems, new.default)
    if isinstance(old, _Rec) and isinstance(new, _Rec):
        keys = [k for k, _ in new.fields]
        return _Rec(tuple((k, _havoc_diff(old.get(k), new.get(k))) for k in keys))
    return _havoc(new)


def _join_unknown(old: Any, new: Any) -> Any:
    if old == new:
        return old
    if isinstance(new, _Poison) or isinstance(old, _TRACKED):
        return _Poison("stored at an unknown index")
    return _Unknown(isinstance(old, (_Num, _Unknown)) and old.flt)


def _num_syms(v: Any) -> set:
    return set(v.e.free_symbols) if isinstance(v, _Num) else set()


def _syms(*exprs: Any) -> set:
    out: set = set()
    for e in exprs:
        if e is not None and hasattr(e, "free_symbols"):
            out |= set(e.free_symbols)
    return out


def _op_syms(op: Operation) -> set[str]:
    exprs: list = []
    for lp in op.loops:
        exprs += [lp.lower, lp.upper]
    if isinstance(op, Launch):
        exprs += list(op.global_size) + list(op.local_size or ()) + list(op.global_offset or ())
        for a in op.args:
            exprs += [a.value, a.local_bytes]
    else:
        for r in op.reads + op.writes:
            exprs += [r.offset, r.size]
    iters = {lp.iterator for lp in op.loops}
    return {str(s) for s in _syms(*exprs)} - iters


def _exact(e: Any) -> Any:
    """A float host value with its float constants as rationals (``n * 0.03125`` → ``n/32``)."""
    return sympy.nsimplify(e, rational=True) if e.atoms(sympy.Float) else e


def _no_ceiling(e: Any) -> Any:
    """``ceiling(x)`` as ``-floor(-x)``: isl reads floors."""
    return e.replace(lambda x: isinstance(x, sympy.ceiling), lambda x: -sympy.floor(-x.args[0]))


def _float_to_int(e: Any) -> Any:
    """C's float → integer conversion (truncation; floor for the non-negative host sizes)."""
    if e.is_number:
        try:
            return _Num(sympy.Integer(int(e)))
        except (TypeError, ValueError):
            return _UNK
    r = _exact(e)
    return _Num(_no_ceiling(sympy.floor(r)))


_MATH_EXACT = {"ceil": sympy.ceiling, "floor": sympy.floor, "fabs": sympy.Abs,
               "fmin": sympy.Min, "fmax": sympy.Max}


def _math(name: str, args: list) -> Any:
    """C math functions of known values; ``ceil``/``floor``/``fabs``/``fmin``/``fmax`` stay
    exact on symbolic sizes (``ceil((float)n / 32)``)."""
    base = name[:-1] if name.endswith(("f", "l")) and name[:-1] in _MATH else name
    if not args or not all(isinstance(a, _Num) for a in args):
        return _Unknown(True, _src_of(*args))
    vals = [_exact(a.e) for a in args]
    if base in _MATH_EXACT:
        try:
            return _Num(_MATH_EXACT[base](*vals), True)
        except (TypeError, ValueError):
            return _UNKF
    if not all(v.is_number for v in vals):
        return _UNKF
    import math

    fns = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log2": math.log2,
           "log10": math.log10, "pow": math.pow, "sin": math.sin, "cos": math.cos,
           "tan": math.tan, "tanh": math.tanh, "atan": math.atan, "atan2": math.atan2,
           "fmod": math.fmod, "erf": math.erf, "trunc": math.trunc, "exp2": lambda x: 2.0 ** x,
           "cbrt": lambda x: math.copysign(abs(x) ** (1 / 3), x), "hypot": math.hypot,
           "round": lambda x: math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5),
           "lround": lambda x: math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)}
    fn = fns.get(base)
    if fn is None:
        return _UNKF
    try:
        return _Num(sympy.Float(float(fn(*(float(v) for v in vals)))), True)
    except (ValueError, OverflowError, ZeroDivisionError, TypeError):
        return _UNKF


_STD_STRING = {
    "stoi", "stol", "stoll", "stoul", "stoull", "stof", "stod", "stold",
    "basic_string__basic_string", "basic_string__ctor", "basic_string__c_str",
    "basic_string__data", "basic_string__operator=", "basic_string__size",
    "basic_string__length", "basic_string__empty", "basic_string__append",
    "basic_string__operator+=", "basic_string__assign", "basic_string__clear", "operator+",
    "to_string",
}
def _c_unescape(s: str) -> str:
    """The characters of a C string literal's body (``\\n`` → newline)."""
    try:
        return s.encode("latin-1", errors="backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return s


def _c_number(text: str, func: str, base_v: Any) -> Optional[_Num]:
    """What ``atoi``/``strtol``/``atof`` return for a known string (C's leading-prefix rules)."""
    t = text.strip()
    if func in ("atof", "strtod", "strtof"):
        m = re.match(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)", t)
        return _Num(sympy.Float(float(m.group(0))), True) if m else _Num(sympy.Float(0.0), True)
    base = int(base_v.e) if func.startswith("strto") and isinstance(base_v, _Num) and \
        base_v.e.is_Integer else 10
    if base == 0:
        m = re.match(r"[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)", t)
        if not m:
            return _Num(sympy.Integer(0))
        return _Num(sympy.Integer(int(m.group(0), 0) if not re.fullmatch(
            r"[+-]?0[0-7]+", m.group(0)) else int(m.group(0), 8)))
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"[:base]
    m = re.match(r"[+-]?[" + digits + digits.upper() + "]+", t) if base != 10 else \
        re.match(r"[+-]?\d+", t)
    return _Num(sympy.Integer(int(m.group(0), base) if m else 0))


def _c_format(args: list) -> Optional[str]:
    """``sprintf`` of known values (build option strings such as ``"-DBS=%d"``), else None."""
    if not args or not isinstance(args[0], _Str):
        return None
    vals = list(args[1:])
    out = []
    fmt = args[0].s.encode().decode("unicode_escape", errors="replace")
    pos = 0
    for m in re.finditer(r"%([-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|z|j|t|L)?([diouxXfFeEgGcs%])",
                         fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        conv = m.group(3)
        if conv == "%":
            out.append("%")
            continue
        if not vals:
            return None
        v = vals.pop(0)
        if conv == "s":
            if not isinstance(v, _Str):
                return None
            out.append(("%" + m.group(1) + "s") % v.s)
        elif isinstance(v, _Num) and v.e.is_number:
            if conv in "diouxXc":
                out.append(("%" + m.group(1) + conv.replace("u", "d")) % int(v.e))
            else:
                out.append(("%" + m.group(1) + conv) % float(v.e))
        else:
            return None
    out.append(fmt[pos:])
    return "".join(out)


def _subs(e: Any, sym: sympy.Symbol, value: Any) -> Any:
    return e.subs(sym, value) if e is not None and hasattr(e, "subs") else e


def _scalar_value(v: Any, ctype: str) -> Any:
    """The host value bound to a scalar kernel parameter (None when polyfuse does not know it)."""
    if not isinstance(v, _Num):
        return None
    is_float = ctype in ("float", "double", "half")
    if is_float:
        return sympy.Float(v.e) if v.e.is_number else None
    if v.flt:
        return sympy.Integer(int(v.e)) if v.e.is_number else None
    return v.e


def _var_name(name: str, path: tuple) -> str:
    return "_".join([name] + [str(p) for p in path])


def _names(node: Any) -> set[str]:
    out: set[str] = set()

    class V(c_ast.NodeVisitor):
        def visit_ID(self, n: c_ast.ID) -> None:
            out.add(n.name)

    if node is not None:
        V().visit(node)
    return out


def _assigned_names(node: Any) -> set[str]:
    """Variables a statement may assign (directly, by ++/--, or by taking their address)."""
    out: set[str] = set()

    def base(n: Any) -> Optional[str]:
        while isinstance(n, (c_ast.ArrayRef, c_ast.StructRef)):
            n = n.name
        return n.name if isinstance(n, c_ast.ID) else None

    class V(c_ast.NodeVisitor):
        def visit_Assignment(self, n: c_ast.Assignment) -> None:
            b = base(n.lvalue)
            if b:
                out.add(b)
            self.generic_visit(n)

        def visit_FuncCall(self, n: c_ast.FuncCall) -> None:
            name = n.name.name if isinstance(n.name, c_ast.ID) else ""
            if name in _READ_ONLY_ADDRESS and n.args is not None:
                for a in n.args.exprs:  # &x handed to these calls is only read
                    while isinstance(a, c_ast.Cast):
                        a = a.expr
                    if isinstance(a, c_ast.UnaryOp) and a.op == "&":
                        self.generic_visit(a.expr)
                    else:
                        self.visit(a)
                return
            self.generic_visit(n)

        def visit_UnaryOp(self, n: c_ast.UnaryOp) -> None:
            if n.op in ("++", "--", "p++", "p--", "&"):
                b = base(n.expr)
                if b:
                    out.add(b)
            self.generic_visit(n)

    if node is not None:
        V().visit(node)
    return out


def _step_of(nxt: Any, it: str) -> Optional[int]:
    if isinstance(nxt, c_ast.UnaryOp) and nxt.op in ("++", "p++") and \
            isinstance(nxt.expr, c_ast.ID) and nxt.expr.name == it:
        return 1
    if isinstance(nxt, c_ast.Assignment) and isinstance(nxt.lvalue, c_ast.ID) and \
            nxt.lvalue.name == it:
        r = nxt.rvalue
        if nxt.op == "+=" and isinstance(r, c_ast.Constant) and r.type == "int":
            return _int_const(r.value)
        if nxt.op == "=" and isinstance(r, c_ast.BinaryOp) and r.op == "+":
            if isinstance(r.left, c_ast.ID) and r.left.name == it and \
                    isinstance(r.right, c_ast.Constant) and r.right.type == "int":
                return _int_const(r.right.value)
    return None


def _int_const(text: str) -> Optional[int]:
    try:
        return int(text.rstrip("uUlL"), 0)
    except ValueError:
        return None


def _affine_bounds(rel: Any) -> Optional[list]:
    """``rel`` as integer affine expressions that are all ``>= 0`` exactly when it holds; None
    when it is no such conjunction."""
    if isinstance(rel, sympy.And):
        out: list = []
        for a in rel.args:
            part = _affine_bounds(a)
            if part is None:
                return None
            out += part
        return out
    diffs = {sympy.StrictLessThan: lambda a, b: [b - a - 1], sympy.LessThan: lambda a, b: [b - a],
             sympy.StrictGreaterThan: lambda a, b: [a - b - 1],
             sympy.GreaterThan: lambda a, b: [a - b],
             sympy.Equality: lambda a, b: [a - b, b - a]}
    make = diffs.get(type(rel))
    if make is None:
        return None
    out = [sympy.expand(_mod_free(d)) for d in make(rel.lhs, rel.rhs)]
    try:
        for d in out:
            host_expr_to_isl(d)
    except (ValueError, TypeError):
        return None
    return out


def _fact_to_isl(rel: Any) -> Optional[str]:
    """isl constraint text of a sympy relation over parameters, or None if it has none."""
    try:
        if isinstance(rel, sympy.And):
            parts = [_fact_to_isl(a) for a in rel.args]
            return " and ".join(f"({p})" for p in parts if p) or None
        if isinstance(rel, sympy.Or):
            parts = [_fact_to_isl(a) for a in rel.args]
            if any(p is None for p in parts):
                return None
            return " or ".join(f"({p})" for p in parts)
        if isinstance(rel, sympy.Not):
            inner = rel.args[0]
            if isinstance(inner, sympy.Eq):
                rel = sympy.Ne(*inner.args)
            else:
                return None
        ops = {sympy.StrictLessThan: "<", sympy.LessThan: "<=", sympy.StrictGreaterThan: ">",
               sympy.GreaterThan: ">=", sympy.Equality: "="}
        if isinstance(rel, sympy.Unequality):
            d = _mod_free(rel.lhs - rel.rhs)
            t = host_expr_to_isl(d)
            return f"({t}) < 0 or ({t}) > 0"
        op = ops.get(type(rel))
        if op is None:
            return None
        return f"{host_expr_to_isl(_mod_free(rel.lhs - rel.rhs))} {op} 0"
    except (ValueError, TypeError, AttributeError):
        return None


def _mod_free(e: Any) -> Any:
    """Rewrite ``Mod(a, c)`` as ``a - c*floor(a/c)`` (isl reads floor)."""
    return e.replace(lambda x: isinstance(x, sympy.Mod) and x.args[1].is_Integer,
                     lambda x: x.args[0] - x.args[1] * sympy.floor(x.args[0] / x.args[1]))
