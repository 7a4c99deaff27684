"""The host interpreter's value model: what a C expression evaluates to.

Values are immutable: integers as sympy expressions (:class:`Num`), values known only at run
time (:class:`Runtime`, :class:`Unknown`), pointers into host memory (:class:`Ref`, a variable
and a path of indices and field names), host arrays and structs (:class:`Arr`, :class:`Rec`),
OpenCL handles (:class:`BufRef`, :class:`KObj`, :class:`ProgObj`, :class:`Handle`) and values
that differ between paths (:class:`Poison`).  :class:`CType` is the C type, as much of it as
``sizeof``, division and declarations need.  Memory (:mod:`.memory`) stores these values; the
evaluator (:mod:`.evaluator`) computes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import sympy

from polyfuse.frontend.host.symbolic import exact_rational, no_ceiling

# ----------------------------------------------------------------------------------------------
# Abstract values
# ----------------------------------------------------------------------------------------------


class Value:
    """What a C expression evaluates to: one of the classes below (or a C++ wrapper object of
    :mod:`.clhpp`).  Values are immutable and compare by content."""

    __slots__ = ()


@dataclass(frozen=True)
class Num(Value):
    """An integer (or, with ``flt``, floating) value as a sympy expression."""

    e: Any
    flt: bool = False


@dataclass(frozen=True)
class Source:
    """Where a value computed from the program's data comes from (a read-back, a file, a
    summarised loop): named by the variable it is stored in, which ``--param`` binds."""

    what: str  # "read back from the device by clEnqueueReadBuffer"
    loc: str  # file:line
    name: str = ""
    #: an element of a known array read at a host loop iterator: unrolling the loop knows it
    loop_index: bool = False

    def describe(self) -> str:
        named = f"'{self.name}', " if self.name else ""
        return f"{named}{self.what} at {self.loc}"


@dataclass(frozen=True)
class Unknown(Value):
    flt: bool = False
    src: Optional[Source] = field(default=None, compare=False)


@dataclass(frozen=True)
class Runtime(Value):
    """A loop-invariant integer read at run time; becomes a parameter when stored."""

    src: Optional[Source] = field(default=None, compare=False)


@dataclass(frozen=True)
class Cond(Value):
    """A truth value that is not known, with the relation it stands for (for context facts)."""

    rel: Any


@dataclass(frozen=True)
class BufRef(Value):
    name: str


@dataclass(frozen=True)
class KObj(Value):
    oid: int


@dataclass(frozen=True)
class ProgObj(Value):
    """A ``cl_program`` created with ``clCreateProgramWithSource``."""

    pid: int


@dataclass(frozen=True)
class Handle(Value):
    """A non-NULL handle polyfuse does not track (context, queue, FILE *, ...)."""

    kind: str


@dataclass(frozen=True)
class Closure(Value):
    """A C++ lambda: the function its body was lowered to and the variables it sees where it
    was made (name -> slot: captured by reference)."""

    func: str
    scope: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Str(Value):
    s: str


@dataclass(frozen=True)
class Ref(Value):
    """A pointer to (a part of) a variable: slot id and a path of indices and field names."""

    slot: int
    path: tuple = ()


@dataclass(frozen=True)
class ElemPtr(Value):
    """A pointer to element ``pos`` of the standard container at ``of`` (``&v[k]``,
    ``&v.front()``, ``v.data()``): the elements are read where it is used (a work size
    array), not where it is made."""

    of: Ref
    pos: int


@dataclass(frozen=True)
class Arr(Value):
    length: Optional[int]
    elems: tuple = ()  # sorted ((index, value), ...)
    default: Any = None

    def get(self, i: int) -> Any:
        for k, v in self.elems:
            if k == i:
                return v
        return self.default if self.default is not None else UNK

    def set(self, i: int, v: Any) -> Arr:
        if not self.elems or self.elems[-1][0] < i:  # filling in order: no search, no sort
            return Arr(self.length, self.elems + ((i, v),), self.default)
        d = dict(self.elems)
        d[i] = v
        return Arr(self.length, tuple(sorted(d.items())), self.default)


@dataclass(frozen=True)
class Rec(Value):
    fields: tuple = ()  # ((name, value), ...)

    def get(self, name: str) -> Any:
        for k, v in self.fields:
            if k == name:
                return v
        return UNK

    def set(self, name: str, v: Any) -> Rec:
        d = dict(self.fields)
        d[name] = v
        return Rec(tuple(d.items()))


@dataclass(frozen=True)
class Poison(Value):
    """A value that differs between paths polyfuse cannot tell apart; an error when used."""

    reason: str


@dataclass(frozen=True)
class SymIndex(Value):
    """An array element at an index that is not a constant (the whole array is affected)."""

    slot: int
    path: tuple
    loop: bool


@dataclass(frozen=True)
class Box(Value):
    """A standard container's element that is a class (a ``std::string``, a struct): kept
    in a slot of its own so that ``m[k].field = x`` and ``v[i].append(s)`` write it; ``owner``
    is the (slot, path) of the container holding it (a copy of the container gets copies of
    its boxes when it is stored)."""

    slot: int
    owner: tuple


UNK = Unknown()


UNKF = Unknown(True)


RUNTIME = Runtime()


ZERO = Num(sympy.Integer(0))


ONE = Num(sympy.Integer(1))


TRACKED = (BufRef, KObj, ProgObj, Str, Ref)


@dataclass(frozen=True)
class CType:
    kind: str  # int | float | ptr | array | struct | void | func | any (a template's T)
    size: int
    elem: Optional[CType] = None
    length: Optional[int] = None
    name: str = ""
    fields: tuple = ()  # ((name, CType), ...)

    def field(self, name: str) -> Optional[CType]:
        for k, t in self.fields:
            if k == name:
                return t
        return None


INT = CType("int", 4, name="int")


LONG = CType("int", 8, name="long")


DOUBLE = CType("float", 8, name="double")


VOID = CType("void", 1, name="void")


PTR_VOID = CType("ptr", 8, elem=VOID)


UNK_TYPE = CType("int", 8, name="?")


#: a template's type parameter in its lowered body (``T x``): which type it is depends on the
#: instantiation, so a value stored there keeps what it is (0.4 stays 0.4)
TPARAM_TYPE = "__polyfuse_tparam"
ANY = CType("any", 8, name="?")


def base_type(names: list[str]) -> CType:
    s = set(names)
    if TPARAM_TYPE in s:
        return ANY
    if "float" in s:
        return CType("float", 4, name="float")
    if "double" in s:
        return CType("float", 16 if "long" in s else 8, name="double")
    if "void" in s:
        return VOID
    if "char" in s or "_Bool" in s or "bool" in s:
        return CType("int", 1, name="char")
    if "short" in s:
        return CType("int", 2, name="short")
    if names.count("long") >= 1:
        return CType("int", 8, name="long")
    return INT


def alignment_of(t: CType) -> int:
    if t.kind == "array":
        return alignment_of(t.elem or INT)
    if t.kind == "struct":
        return max((alignment_of(f) for _, f in t.fields), default=1)
    return max(1, t.size)


def src_of(*values: Any) -> Optional[Source]:
    """The data source an unknown value was computed from, if one of ``values`` has one."""
    for v in values:
        if isinstance(v, (Unknown, Runtime)) and v.src is not None:
            return v.src
    return None


def char_at(text: str, idx: Any) -> Any:
    """A character of a known C string (its terminating NUL included), else unknown."""
    if isinstance(idx, Num) and idx.e.is_Integer and 0 <= int(idx.e) <= len(text):
        return Num(sympy.Integer(ord(text[int(idx.e)]) if int(idx.e) < len(text) else 0))
    return UNK


def param_hint(src: Source) -> str:
    hint = f"; pass --param {src.name}=VALUE to analyse the program with that value" \
        if src.name else ""
    if src.what.startswith("queried from the device"):
        hint += "; with --verify the device that verifies the program answers the query"
    return hint


def truth_of(v: Any) -> Optional[bool]:
    if isinstance(v, Num):
        if v.e.is_number:
            return bool(v.e != 0)
        return None
    if isinstance(v, (BufRef, KObj, ProgObj, Handle, Ref, Str)):
        return True
    return None


def relation_of(v: Any) -> Any:
    if isinstance(v, Cond):
        return v.rel
    if isinstance(v, Num) and not v.e.is_number and not v.flt:
        return sympy.Ne(v.e, 0)
    return None


def _havoc(v: Any) -> Any:
    if isinstance(v, Num):
        return Unknown(v.flt)
    if isinstance(v, (Unknown, Runtime, Cond)):
        return Unknown(isinstance(v, Unknown) and v.flt, src_of(v))
    return Poison("changes from one host loop iteration to the next")


def havoc_diff(old: Any, new: Any) -> Any:
    """Forget what differs between ``old`` and ``new`` (element-wise in arrays and structs)."""
    if old == new:
        return new
    if isinstance(old, Arr) and isinstance(new, Arr) and old.default == new.default:
        keys = {k for k, _ in old.elems} | {k for k, _ in new.elems}
        elems = tuple((k, havoc_diff(old.get(k), new.get(k))) for k in sorted(keys))
        return Arr(new.length, elems, new.default)
    if isinstance(old, Rec) and isinstance(new, Rec):
        keys = [k for k, _ in new.fields]
        return Rec(tuple((k, havoc_diff(old.get(k), new.get(k))) for k in keys))
    return _havoc(new)


def join_unknown(old: Any, new: Any) -> Any:
    if old == new:
        return old
    if isinstance(new, Poison) or isinstance(old, TRACKED):
        return Poison("stored at an unknown index")
    return Unknown(isinstance(old, (Num, Unknown)) and old.flt, src_of(new, old))


def num_syms(v: Any) -> set:
    return set(v.e.free_symbols) if isinstance(v, Num) else set()


def float_to_int(e: Any) -> Any:
    """C's float → integer conversion (truncation; floor for the non-negative host sizes)."""
    if e.is_number:
        try:
            return Num(sympy.Integer(int(e)))
        except (TypeError, ValueError):
            return UNK
    r = exact_rational(e)
    return Num(no_ceiling(sympy.floor(r)))


def scalar_value(v: Any, ctype: str) -> Any:
    """The host value bound to a scalar kernel parameter (None when polyfuse does not know it)."""
    if not isinstance(v, Num):
        return None
    is_float = ctype in ("float", "double", "half")
    if is_float:
        return sympy.Float(v.e) if v.e.is_number else None
    if v.flt:
        return sympy.Integer(int(v.e)) if v.e.is_number else None
    return v.e


def var_name(name: str, path: tuple) -> str:
    return "_".join([name] + [str(p) for p in path])


def c_unescape(s: str) -> str:
    """The characters of a C string literal's body (``\\n`` → newline)."""
    try:
        return s.encode("latin-1", errors="backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return s


def arg_at(args: list[Value], i: int) -> Value:
    """The ``i``-th argument of a call (unknown when the call has fewer)."""
    return args[i] if i < len(args) else UNK
