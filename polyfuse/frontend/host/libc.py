"""The C library a host uses, as a table of handlers: strings, numbers read from text,
``getopt``, files (kernel sources the host reads), allocation, math, and calls with no effect
on the model.  :data:`LIBC` maps a function name to its handler; the evaluator looks a call up
here after the OpenCL API table (:data:`.opencl_api.HANDLERS`)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import sympy
from pycparser import c_ast

from polyfuse.frontend.host import datafiles
from polyfuse.frontend.host.opencl_api import succeed
from polyfuse.frontend.host.signals import Exit
from polyfuse.frontend.host.sources import looks_like_opencl
from polyfuse.frontend.host.values import (
    RUNTIME,
    UNK,
    UNK_TYPE,
    UNKF,
    ZERO,
    Arr,
    CType,
    Handle,
    Num,
    Poison,
    Rec,
    Ref,
    Runtime,
    Str,
    Unknown,
    Value,
    arg_at,
    c_unescape,
    char_at,
    exact_rational,
    param_hint,
    src_of,
)

if TYPE_CHECKING:
    from polyfuse.frontend.host.evaluator import CEvaluator

#: a call's handler: the evaluator, the call's node and its evaluated arguments -> its value
Handler = Callable[["CEvaluator", c_ast.FuncCall, list[Value]], Value]


class LibcState:
    """What the C library keeps between calls: the command line and ``getopt``'s globals."""

    def __init__(self, argv: Optional[list[str]]) -> None:
        self.argv = argv  # the program's command line (with its name), None when not given
        self.optind = 1
        self.optarg: Any = ZERO


#: calls with no effect polyfuse cares about (buffers they receive, if any, are not read
#: or written)
_IGNORED = {
    "printf", "fprintf", "sprintf", "snprintf", "puts", "fputs", "putchar", "fputc", "perror",
    "fflush", "fopen", "fclose", "fread", "fwrite", "fgets", "fgetc", "getchar", "fseek", "ftell",
    "rewind", "feof", "ferror", "remove", "free", "memset", "memcpy", "memmove", "memcmp",
    "strlen", "strcpy", "strncpy", "strcat", "strncat", "strcmp", "strncmp", "strchr", "strrchr",
    "strstr", "strdup", "strtok", "strerror", "srand", "rand", "srand48", "drand48", "time",
    "gettimeofday", "difftime", "localtime", "sleep", "usleep",
    "system", "qsort", "atexit", "abs", "labs", "access", "sysconf",
}


_MATH = {
    "sqrt", "sqrtf", "fabs", "fabsf", "exp", "expf", "log", "logf", "log2", "log2f", "log10",
    "log10f", "pow", "powf", "sin", "sinf", "cos", "cosf", "tan", "tanf", "tanh", "tanhf", "atan",
    "atan2", "floor", "floorf", "ceil", "ceilf", "round", "roundf", "fmin", "fminf", "fmax",
    "fmaxf", "fmod", "fmodf", "erf", "erff", "atof", "strtod", "strtof", "trunc", "truncf",
    "exp2", "exp2f", "cbrt", "cbrtf", "hypot", "hypotf", "fabsl", "lround", "lroundf",
}


_ALLOC = {"malloc", "calloc", "realloc", "aligned_alloc", "memalign", "valloc", "_mm_malloc",
          "pvalloc"}
#: the arguments whose product is the number of bytes an allocation call asks for
_ALLOC_BYTES = {"malloc": (0,), "calloc": (0, 1), "realloc": (1,), "aligned_alloc": (1,),
                "memalign": (1,), "valloc": (0,), "_mm_malloc": (0,), "pvalloc": (0,),
                "posix_memalign": (2,)}


#: calls that return a non-NULL handle polyfuse does not follow
_HANDLE_RESULT = {
    "strdup", "localtime",
}


_MATH_EXACT = {"ceil": sympy.ceiling, "floor": sympy.floor, "fabs": sympy.Abs,
               "fmin": sympy.Min, "fmax": sympy.Max}


def _math(name: str, args: list) -> Any:
    """C math functions of known values; ``ceil``/``floor``/``fabs``/``fmin``/``fmax`` stay
    exact on symbolic sizes (``ceil((float)n / 32)``)."""
    base = name[:-1] if name.endswith(("f", "l")) and name[:-1] in _MATH else name
    if not args or not all(isinstance(a, Num) for a in args):
        return Unknown(True, src_of(*args))
    vals = [exact_rational(a.e) for a in args]
    if base in _MATH_EXACT:
        try:
            return Num(_MATH_EXACT[base](*vals), True)
        except (TypeError, ValueError):
            return UNKF
    if not all(v.is_number for v in vals):
        return UNKF
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
        return UNKF
    try:
        return Num(sympy.Float(float(fn(*(float(v) for v in vals)))), True)
    except (ValueError, OverflowError, ZeroDivisionError, TypeError):
        return UNKF


STD_STRING = {
    "stoi", "stol", "stoll", "stoul", "stoull", "stof", "stod", "stold",
    "basic_string__basic_string", "basic_string__ctor", "basic_string__c_str",
    "basic_string__data", "basic_string__operator=", "basic_string__size",
    "basic_string__length", "basic_string__empty", "basic_string__append",
    "basic_string__operator+=", "basic_string__assign", "basic_string__clear", "operator+",
    "to_string", "basic_string__compare",
    "basic_stringstream__ctor", "basic_ostringstream__ctor", "basic_stringstream__str",
    "basic_ostringstream__str", "basic_ostream__operator<<", "operator<<",
    "basic_string__operator[]", "basic_string__substr", "basic_istringstream__ctor",
    "basic_istream__operator>>", "operator>>", "basic_string__find", "basic_string__rfind",
    "basic_ios__eof", "basic_string__resize", "basic_ifstream__ctor",
    "basic_ifstream__is_open", "operator bool",
}




def _c_number(text: str, func: str, base_v: Any) -> Optional[Num]:
    """What ``atoi``/``strtol``/``atof`` return for a known string (C's leading-prefix rules)."""
    t = text.strip()
    if func in ("atof", "strtod", "strtof"):
        m = re.match(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)", t)
        return Num(sympy.Float(float(m.group(0))), True) if m else Num(sympy.Float(0.0), True)
    base = int(base_v.e) if func.startswith("strto") and isinstance(base_v, Num) and \
        base_v.e.is_Integer else 10
    if base == 0:
        m = re.match(r"[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)", t)
        if not m:
            return Num(sympy.Integer(0))
        return Num(sympy.Integer(int(m.group(0), 0) if not re.fullmatch(
            r"[+-]?0[0-7]+", m.group(0)) else int(m.group(0), 8)))
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"[:base]
    m = re.match(r"[+-]?[" + digits + digits.upper() + "]+", t) if base != 10 else \
        re.match(r"[+-]?\d+", t)
    return Num(sympy.Integer(int(m.group(0), base) if m else 0))


def _c_format(args: list) -> Optional[str]:
    """``sprintf`` of known values (build option strings such as ``"-DBS=%d"``), else None."""
    if not args or not isinstance(args[0], Str):
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
            if not isinstance(v, Str):
                return None
            out.append(("%" + m.group(1) + "s") % v.s)
        elif isinstance(v, Num) and v.e.is_number:
            if conv in "diouxXc":
                out.append(("%" + m.group(1) + conv.replace("u", "d")) % int(v.e))
            else:
                out.append(("%" + m.group(1) + conv) % float(v.e))
        else:
            return None
    out.append(fmt[pos:])
    return "".join(out)


def std_string(ev: CEvaluator, name: str, args: list) -> Any:
    """``std::string`` as the C string it holds (the C++ front-end lowers its members to
    these calls), and ``std::stoi``-style conversions."""
    if name in ("stoi", "stol", "stoll", "stoul", "stoull"):
        return read_number(ev, "atoi", args)
    if name in ("stof", "stod", "stold"):
        return read_number(ev, "atof", args)
    first = arg_at(args, 0)
    if name == "to_string":
        return Str(str(int(first.e))) if isinstance(first, Num) and first.e.is_Integer \
            and not first.flt else UNK
    if name == "operator+":  # a + b of strings
        a, b = ev.mem.string(first), ev.mem.string(arg_at(args, 1))
        return Str(a + b) if a is not None and b is not None else UNK
    if name == "basic_string__compare":
        # of known strings (an option table's names against argv); else unknown (``==`` and
        # ``!=`` of strings and of map iterators: :mod:`.clhpp`)
        a, b = ev.mem.string(first), ev.mem.string(arg_at(args, 1))
        if a is None or b is None or len(args) != 2:
            return UNK
        return Num(sympy.Integer((a > b) - (a < b)))
    if name in ("basic_ostream__operator<<", "operator<<"):
        return stream_out(ev, first, arg_at(args, 1), name == "operator<<")
    if name.endswith("stringstream__str") and len(args) == 1:
        target = ev.mem.read(first) if isinstance(first, Ref) else first
        return target if isinstance(target, Str) else UNK
    if name in ("basic_string__basic_string", "basic_string__ctor"):
        if isinstance(first, Poison):  # why the text is not known goes with it
            return first
        text = ev.mem.string(first) if args else ""
        return Str(text) if text is not None else UNK
    if name.endswith("stringstream__ctor"):  # a string stream starts with its text
        text = ev.mem.string(first) if args else ""
        return Str(text) if text is not None else UNK
    if name in ("basic_istream__operator>>", "operator>>"):
        return extract(ev, first, arg_at(args, 1))
    if name in ("basic_ifstream__ctor", "basic_ifstream__is_open", "operator bool"):
        return input_file_stream(ev, name, args)
    if name == "basic_ios__eof":
        return stream_eof(ev, first)
    target = ev.mem.read(first) if isinstance(first, Ref) else first
    if name == "basic_string__substr":
        pos, n = arg_at(args, 1), arg_at(args, 2)
        if isinstance(target, Str) and all(isinstance(v, Num) and v.e.is_Integer
                                           for v in (pos, n)[:len(args) - 1]):
            start = int(pos.e) if len(args) > 1 else 0
            end = start + int(n.e) if len(args) > 2 else len(target.s)
            return Str(target.s[start:end]) if start <= len(target.s) else UNK
        return UNK
    if name in ("basic_string__find", "basic_string__rfind"):
        return _string_find(ev, target, args, name.endswith("rfind"))
    if name == "basic_string__operator[]":
        return char_at(target.s, arg_at(args, 1)) if isinstance(target, Str) else UNK
    if name in ("basic_string__c_str", "basic_string__data"):
        return target if isinstance(target, Str) else UNK
    if name in ("basic_string__size", "basic_string__length"):
        return Num(sympy.Integer(len(target.s))) if isinstance(target, Str) else UNK
    if name == "basic_string__empty":
        return Num(sympy.Integer(int(not target.s))) if isinstance(target, Str) else UNK
    if name == "basic_string__resize":
        return _string_resize(ev, first, target, args)
    # the assignments: the string becomes unknown unless every part is known
    value = ev.mem.string(arg_at(args, 1)) if name != "basic_string__clear" else ""
    ch = arg_at(args, 1)
    if value is None and name in ("basic_string__operator+=", "basic_string__operator=") and \
            isinstance(ch, Num) and not ch.flt and ch.e.is_Integer and 0 < int(ch.e) < 256:
        value = chr(int(ch.e))  # `tmp += buff[i]`: one character
    if name in ("basic_string__append", "basic_string__operator+=") and value is not None:
        value = target.s + value if isinstance(target, Str) else None
    if isinstance(first, Ref):  # (``ss.str(s)`` leaves a stream's eofbit as it was)
        kind = EndOfStream if isinstance(target, EndOfStream) else Str
        ev.mem.write(first, kind(value) if value is not None else UNK)
    return first


def _string_resize(ev: CEvaluator, s: Any, target: Any, args: list) -> Any:
    """``s.resize(n[, c])`` of a known string: cut, or padded with ``c`` (NUL), as a host
    sizes a string before a query writes into it (``&s[0]``)."""
    n, c = arg_at(args, 1), arg_at(args, 2) if len(args) > 2 else ZERO
    known = isinstance(target, Str) and all(isinstance(v, Num) and not v.flt and
                                            v.e.is_Integer and int(v.e) >= 0 for v in (n, c))
    if isinstance(s, Ref):
        ev.mem.write(s, Str((target.s + chr(int(c.e) % 256) * int(n.e))[:int(n.e)])
                     if known else UNK)
    return s


#: ``std::string::npos`` as the ``size_t`` it is
NPOS = 2 ** 64 - 1


def _string_find(ev: CEvaluator, target: Any, args: list, last: bool) -> Any:
    """``s.find(t[, pos])`` (``rfind``) of known texts: the position, or ``npos``."""
    word, start = ev.mem.string(arg_at(args, 1)), arg_at(args, 2) if len(args) > 2 else ZERO
    if not isinstance(target, Str) or word is None or not (isinstance(start, Num)
                                                          and start.e.is_Integer):
        return UNK
    pos = target.s.rfind(word, 0, int(start.e) + len(word)) if last and len(args) > 2 else \
        target.s.rfind(word) if last else target.s.find(word, int(start.e))
    return Num(sympy.Integer(NPOS if pos < 0 else pos))


def stream_out(ev: CEvaluator, stream: Any, v: Any, free: bool) -> Any:
    """``os << v`` into a string stream whose text is known (``ss << n; "K" + ss.str()``):
    the text grows by ``v`` as ``<<`` formats it (a number given to the free ``operator<<``
    is a character); other streams (``std::cout``) are left alone.  The stream, for the next
    ``<<``."""
    if not isinstance(stream, Ref) or not isinstance(ev.mem.read(stream), Str):
        return stream
    text = ev.mem.string(v)
    if text is None and isinstance(v, Num) and v.e.is_number:
        text = chr(int(v.e)) if free and not v.flt else \
            str(int(v.e)) if not v.flt else f"{float(v.e):g}"
    cur = ev.mem.read(stream)
    ev.mem.write(stream, Str(cur.s + text) if text is not None else UNK)
    return stream


#: the largest input file a ``std::ifstream`` reads word by word (a parameter file, a short
#: list; bulk data read element by element would cost its length in interpreted steps)
_MAX_STREAMED_FILE = 16384


def input_file_stream(ev: CEvaluator, name: str, args: list) -> Any:
    """``std::ifstream f(path)`` of a small input file that is there (the program's run
    directory, its own command line) is a string stream holding the file's text (``f >> n``,
    ``while (f >> x >> y)``); ``f.is_open()`` is then true and the stream's truth is that no
    extraction failed.  A kernel file, a file that is not there, another object: as
    before, an unknown call (a kernel file it opens is the program's source)."""
    first = arg_at(args, 0)
    if name == "basic_ifstream__ctor":
        path = ev.mem.string(first)
        if path is not None and not path.endswith((".cl", ".clh", ".ocl")) and \
                data_file(ev, path, "r") and not looks_like_opencl(path):
            text = datafiles.text_of(os.path.abspath(path))
            if text is not None and len(text) <= _MAX_STREAMED_FILE:
                return Str(text) if text else EndOfStream("")
    else:
        held = ev.mem.read(first) if isinstance(first, Ref) else None
        if isinstance(held, Str):
            failed = name == "operator bool" and isinstance(held, FailedStream)
            return Num(sympy.Integer(0 if failed else 1))
    return ev.unknown_call(name, args, ev.ctx.node)


def extract(ev: CEvaluator, stream: Any, into: Any) -> Any:
    """``ss >> x`` from a string stream whose text is known (``std::stringstream ss(s)``):
    the next word, as a number or a string as ``x`` is; the stream keeps the rest."""
    text = ev.mem.read(stream) if isinstance(stream, Ref) else None
    if not isinstance(into, Ref):
        return stream
    if not isinstance(text, Str):
        ev.mem.forget_through([into])
        return stream
    if isinstance(text, EndOfStream):  # fails: nothing is read
        ev.mem.write(stream, FailedStream(""))
        return stream
    rest = text.s.lstrip()
    word = re.match(r"\S*", rest).group()
    rest = rest[len(word):]  # from the white space that ended the word
    if isinstance(ev.mem.read(into), Str):
        value: Any = Str(word)
    else:
        slot = ev.mem.state.slots.get(into.slot)
        flt = slot is not None and not into.path and slot.ctype.kind == "float"
        value = _c_number(word, "atof" if flt else "atoi", UNK) if word else UNK
    ev.mem.write(into, value)
    ev.mem.write(stream, Str(rest) if rest else EndOfStream("") if word else FailedStream(""))
    return stream


@dataclass(frozen=True)
class EndOfStream(Str):
    """The text of a string stream an extraction read to its end (its ``eofbit`` is set)."""


@dataclass(frozen=True)
class FailedStream(EndOfStream):
    """A string stream an extraction failed on, at its end (``failbit`` set: it is false)."""


def stream_eof(ev: CEvaluator, stream: Any) -> Value:
    """``ss.eof()`` of a string stream whose text is known: set once an extraction reached
    the end (``while (!ss.eof()) ss >> word;``), not while text is left; an empty stream
    that was never read from (or one whose flags polyfuse lost) is unknown."""
    text = ev.mem.read(stream) if isinstance(stream, Ref) else None
    if isinstance(text, EndOfStream):
        return Num(sympy.Integer(1))
    return Num(sympy.Integer(0)) if isinstance(text, Str) and text.s else UNK


def memcpy(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """Library calls that write through their first argument: what they write is known
    only at run time (never "no effect": a size copied into a variable must not keep its
    old value)."""
    dst = arg_at(args, 0)
    if isinstance(dst, Ref):
        ev.mem.forget_through([dst])
    return dst


def memset(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    dst, value = arg_at(args, 0), arg_at(args, 1)
    if isinstance(dst, Ref):
        cur = ev.mem.read(dst)
        if isinstance(cur, (Unknown, Num, Runtime)):
            zero = isinstance(value, Num) and value.e == 0
            ev.mem.write(dst, ZERO if zero else UNK)
    return dst


def heap_type(node: c_ast.FuncCall, args: list[Value]) -> CType:
    """The type of the memory an allocation call returns: bytes of elements not known yet,
    its size when the call's size is a known number (a small table, not bulk data: see
    :meth:`.memory.Memory.store`)."""
    nbytes = 1
    for k in _ALLOC_BYTES.get(node.name.name if isinstance(node.name, c_ast.ID) else "", ()):
        v = arg_at(args, k)
        if not (isinstance(v, Num) and v.e.is_Integer and v.e >= 0):
            return CType("array", 0, elem=UNK_TYPE)
        nbytes *= int(v.e)
    return CType("array", nbytes, elem=UNK_TYPE)


def posix_memalign(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    ptr = arg_at(args, 0)
    if isinstance(ptr, Ref):
        sid = ev.mem.new_slot("heap", heap_type(node, args), Arr(None, (), UNK))
        ev.mem.write(ptr, Ref(sid))
    return ZERO


def string_copy(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """``strcpy``/``strcat`` and their ``n`` forms keep the text of the buffer they write
    (build options assembled piece by piece) while every piece is known; in a loop the text
    may grow per iteration, so it is unknown there."""
    dst = memcpy(ev, node, args)
    if not (isinstance(dst, Ref) and dst.path in ((), (0,))):
        return dst
    name = node.name.name
    src = ev.mem.text(arg_at(args, 1))
    if src is not None and name in ("strncpy", "strncat"):
        n = arg_at(args, 2)
        k = int(n.e) if isinstance(n, Num) and n.e.is_Integer else -1
        src = src[:k] if k > len(src) or name == "strncat" and k >= 0 else None
    old = ev.mem.texts.get(dst.slot, None) if name in ("strcat", "strncat") else ""
    loc = ev.ctx.loc(node)
    at = f"{name} at {loc.file}:{loc.line}" if loc else name
    if src is None:
        ev.mem.set_text(dst.slot, None, f"{at} writes a string polyfuse cannot follow")
    elif ev.ctx.varies():
        ev.mem.set_text(dst.slot, None, f"{at} writes it in a host loop")
    elif old is None:
        ev.mem.set_text(dst.slot, None, ev.mem.state.text_why.get(dst.slot, ""))
    else:
        ev.mem.set_text(dst.slot, old + src)
    return dst


def sprintf(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    return format_into(ev, arg_at(args, 0), args[1:])


def snprintf(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    return format_into(ev, arg_at(args, 0), args[2:])


def format_into(ev: CEvaluator, buf: Any, args: list) -> Any:
    if not isinstance(buf, Ref):
        return UNK
    # a %s argument may be a char buffer an earlier sprintf wrote (options built in steps)
    args = [Str(t) if isinstance(a, Ref) and (t := ev.mem.text(a)) is not None else a
            for a in args]
    text = _c_format(args)
    if text is None:
        ev.mem.set_text(buf.slot, None, _unformatted_why(ev, args[1:]))
        return UNK
    ev.mem.set_text(buf.slot, text)
    return Num(sympy.Integer(len(text)))


def _unformatted_why(ev: CEvaluator, args: list) -> str:
    """What keeps a formatted text from being known: a data source, host parameters, or
    what kept a text it includes from being known."""
    for a in args:
        if isinstance(a, Ref) and ev.mem.state.text_why.get(a.slot):
            return ev.mem.state.text_why[a.slot]
    src = src_of(*args)
    if src is not None:
        return f"it depends on {src.describe()}{param_hint(src)}"
    names = sorted({str(s) for a in args if isinstance(a, Num) for s in a.e.free_symbols})
    if names:
        return f"it depends on {', '.join(names)}; pass --param {names[0]}=VALUE"
    return ""


def strcmp(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    a, b = ev.mem.text(arg_at(args, 0)), ev.mem.text(arg_at(args, 1))
    if a is not None and b is not None:
        return Num(sympy.Integer((a > b) - (a < b)))
    return UNK


def strstr(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """``strstr`` of known texts (an extension list the device answered): NULL, or a pointer
    to where the word starts; unknown otherwise."""
    hay, a, b = arg_at(args, 0), ev.mem.text(arg_at(args, 0)), ev.mem.text(arg_at(args, 1))
    if a is None or b is None:
        return UNK
    pos = a.find(b)
    if pos < 0:
        return ZERO
    if isinstance(hay, Str):
        return Str(a[pos:])
    at = ev.mem.index(hay, Num(sympy.Integer(pos))) if isinstance(hay, Ref) else None
    return at if isinstance(at, Ref) else UNK


def strcasecmp(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    a, b = ev.mem.text(arg_at(args, 0)), ev.mem.text(arg_at(args, 1))
    if a is not None and b is not None:
        a, b = a.lower(), b.lower()
        return Num(sympy.Integer((a > b) - (a < b)))
    return UNK


def getenv(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """The environment the program runs in is polyfuse's own (as ``--args`` is its command
    line): an unset variable is NULL, a set one its text (a device type chosen by
    ``OPENCL_DEVICE_TYPE``)."""
    name = ev.mem.text(arg_at(args, 0))
    if name is None:
        return Handle("getenv")
    value = os.environ.get(name)
    return ZERO if value is None else Str(value)


def strncmp(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    a, b, n = ev.mem.text(arg_at(args, 0)), ev.mem.text(arg_at(args, 1)), \
        arg_at(args, 2)
    if a is not None and b is not None and isinstance(n, Num) and n.e.is_Integer:
        k = int(n.e)
        return Num(sympy.Integer((a[:k] > b[:k]) - (a[:k] < b[:k])))
    return UNK


def strlen(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    a = ev.mem.text(arg_at(args, 0))
    return Num(sympy.Integer(len(a))) if a is not None else UNK


def read_number(ev: CEvaluator, name: str, args: list) -> Any:
    a = arg_at(args, 0)
    if isinstance(a, Str):
        v = _c_number(a.s, name, arg_at(args, 2))
        if v is not None:
            return v
        return UNKF if name in ("atof", "strtod", "strtof") else UNK
    if name in ("atof", "strtod", "strtof"):
        return UNKF
    return RUNTIME if not ev.ctx.varies() else UNK


def getopt_short(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """POSIX ``getopt`` over the ``--args`` command line (unknown without it)."""
    return getopt(ev, args, None)


def getopt_long(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """GNU ``getopt_long``: ``--name``, ``--name=value`` and ``--name value`` from the
    ``struct option`` table, short options as ``getopt``."""
    return getopt(ev, args, arg_at(args, 3))


def getopt(ev: CEvaluator, args: list, longopts: Any) -> Any:
    spec = arg_at(args, 2)
    argv = words(ev, arg_at(args, 0), arg_at(args, 1))
    if argv is None or not isinstance(spec, Str):
        return UNK
    optind = opt_index(ev)
    if optind >= len(argv) or not argv[optind].startswith("-") or argv[optind] == "-":
        return Num(sympy.Integer(-1))
    word = argv[optind]
    if word == "--":
        set_opt(ev, optind + 1, None)
        return Num(sympy.Integer(-1))
    if word.startswith("--") and longopts is not None:
        return long_option(ev, argv, optind, word[2:], longopts)
    opt = word[1]
    pos = spec.s.find(opt)
    if pos < 0 or opt == ":":
        set_opt(ev, optind + 1, None)
        return Num(sympy.Integer(ord("?")))
    if spec.s[pos + 1:pos + 2] == ":":
        if len(word) > 2:
            set_opt(ev, optind + 1, word[2:])
        elif optind + 1 < len(argv):
            set_opt(ev, optind + 2, argv[optind + 1])
        else:
            set_opt(ev, optind + 1, None)
            return Num(sympy.Integer(ord("?")))
    else:
        set_opt(ev, optind + 1, None)
    return Num(sympy.Integer(ord(opt)))


def long_option(ev: CEvaluator, argv: list[str], optind: int, word: str, longopts: Any) -> Any:
    name, eq, value = word.partition("=")
    i = 0
    while isinstance(longopts, Ref) and i <= 256:
        entry = ev.mem.read(Ref(longopts.slot, longopts.path[:-1] + (longopts.path[-1] + i,))
                            if longopts.path and isinstance(longopts.path[-1], int)
                            else Ref(longopts.slot, longopts.path + (i,)))
        if not isinstance(entry, Rec):
            return UNK
        fields = ("name", "has_arg", "flag", "val") if entry.get("name") != UNK else \
            ("0", "1", "2", "3")  # struct option {name, has_arg, flag, val}
        opt_name, has_arg, flag, val = (entry.get(f) for f in fields)
        if not isinstance(opt_name, Str):
            break  # the table's terminating { 0, 0, 0, 0 }
        if opt_name.s == name:
            if not isinstance(has_arg, Num) or not has_arg.e.is_Integer:
                return UNK
            if int(has_arg.e) == 0 or eq:
                set_opt(ev, optind + 1, value if eq else None)
            elif optind + 1 < len(argv):
                set_opt(ev, optind + 2, argv[optind + 1])
            elif int(has_arg.e) == 1:
                set_opt(ev, optind + 1, None)
                return Num(sympy.Integer(ord("?")))
            else:
                set_opt(ev, optind + 1, None)
            if isinstance(flag, Ref):
                ev.mem.write(flag, val)
                return ZERO
            return val
        i += 1
    set_opt(ev, optind + 1, None)
    return Num(sympy.Integer(ord("?")))


def words(ev: CEvaluator, argc: Any, argv: Any) -> Optional[list[str]]:
    """The strings an ``argc``/``argv`` pair holds (also after a harness moved ``argv``
    past its own options), or None when polyfuse does not know them."""
    if ev.libc.argv is None or not isinstance(argc, Num) or not argc.e.is_Integer:
        return None
    if not isinstance(argv, Ref):
        return None
    words = []
    for k in range(int(argc.e)):
        ref = ev.mem.index(argv, Num(sympy.Integer(k)))
        w = ev.mem.read(ref) if isinstance(ref, Ref) else None
        if not isinstance(w, Str):
            return None
        words.append(w.s)
    return words


def opt_index(ev: CEvaluator) -> int:
    sid = ev.mem.lookup("optind")
    v = ev.mem.read(Ref(sid)) if sid is not None else None
    if isinstance(v, Num) and v.e.is_Integer:
        ev.libc.optind = int(v.e)
    return ev.libc.optind


def set_opt(ev: CEvaluator, optind: int, optarg: Optional[str]) -> None:
    """getopt's globals, in polyfuse's state and in the host's own ``extern`` declarations."""
    ev.libc.optind = optind
    ev.libc.optarg = Str(optarg) if optarg is not None else ZERO
    for name, value in (("optind", Num(sympy.Integer(optind))), ("optarg", ev.libc.optarg)):
        sid = ev.mem.lookup(name)
        if sid is not None:
            ev.mem.write(Ref(sid), value)


def fopen(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    path = arg_at(args, 0)
    text = ev.mem.text(path)
    path = Str(text) if text is not None else path
    if isinstance(path, Str):
        found = ev.sources.find_file(path.s)
        if found is not None:
            if found.endswith((".cl", ".clh", ".ocl")) or looks_like_opencl(found):
                ev.sources.open_file(found)
            elif data_file(ev, path.s, ev.mem.text(arg_at(args, 1))):
                f = Handle("data:" + os.path.abspath(path.s))
                ev.mem.state.file_pos[f.kind] = 0
                return f
            return Handle("file:" + found)
        if path.s.endswith((".cl", ".ocl")):
            ev.sources.open_file(path.s)
            return Handle("file:" + path.s)
        if _literal_arg(node, 0) and isinstance(mode := arg_at(args, 1), Str) and \
                mode.s.startswith("r"):
            # a file the program names itself (an optional input deck, a flag file) that is
            # not where it runs: opening it fails as it would there (data files named on the
            # command line may be given later; they stay run-time values)
            return ZERO
    return Handle("fopen")


def _literal_arg(node: c_ast.FuncCall, k: int) -> bool:
    exprs = node.args.exprs if node.args is not None else []
    return k < len(exprs) and isinstance(exprs[k], c_ast.Constant) and exprs[k].type == "string"


def fread(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    buf, f = arg_at(args, 0), arg_at(args, 3)
    if isinstance(buf, Ref) and isinstance(f, Handle) and f.kind.startswith("file:") and \
            f.kind[5:] in ev.sources.opened:
        ev.mem.file_texts[buf.slot] = f.kind[5:]
    elif isinstance(buf, Ref):  # data read at run time (sizes read from input files)
        ev.mem.overwrite_with_data(buf, ev.source("read from a file by fread", node))
    return UNK


def _reads_number(name: str) -> Handler:
    def handler(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
        return read_number(ev, name, args)
    return handler


def _exit(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    raise Exit()


def data_file(ev: CEvaluator, path: str, mode: Optional[str]) -> bool:
    """Whether ``fopen(path, mode)`` opens an input file that is there, in the directory
    the program runs in, to be read as text (with the program's own command line)."""
    return ev.libc.argv is not None and mode is not None and mode.startswith("r") and \
        "+" not in mode and os.path.isfile(path) and datafiles.text_of(
            os.path.abspath(path)) is not None


def scan_file(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Optional[Value]:
    """``fscanf`` from an input file that is there, at a known position, outside loops whose
    iterations polyfuse does not enumerate: the values it converts and stores; None (the
    position is then unknown) otherwise."""
    f, fmt = arg_at(args, 0), ev.mem.text(arg_at(args, 1))
    if not (isinstance(f, Handle) and f.kind.startswith("data:")):
        return None
    pos = ev.mem.state.file_pos.pop(f.kind, None)
    text = datafiles.text_of(f.kind[5:])
    if pos is None or fmt is None or text is None or ev.ctx.varies():
        return None
    got = datafiles.scan(text, pos, c_unescape(fmt))
    ptrs = args[2:]
    if got is None or len(got[0]) > len(ptrs) or not all(isinstance(p, Ref) for p in ptrs):
        return None
    values, ev.mem.state.file_pos[f.kind] = got
    for p, v in zip(ptrs, values):
        if isinstance(v, str):
            ev.mem.forget_through([p])
            if p.path in ((), (0,)):
                ev.mem.set_text(p.slot, v)
        else:
            ev.mem.write(p, Num(sympy.Float(v), True) if isinstance(v, float)
                         else Num(sympy.Integer(v)))
    ev.ctx.warn(f"read from {os.path.relpath(f.kind[5:])} as the program reads it (the model "
                "is of this input)", node)
    return Num(sympy.Integer(len(values)))


def scan_known(text: str, fmt: str) -> Optional[list]:
    """What ``sscanf`` converts from a known string (``sscanf(argv[i], "%d", &n)``): the
    values in order (int, float or str; fewer at the first mismatch), or None for a format
    polyfuse does not follow."""
    out: list = []
    pos = 0
    for m in re.finditer(r"%(\*?)(\d*)(hh|h|ll|l|z|j|t|L)?([diuxfFeEgGsc%])|(\s+)|([^%\s]+)",
                         fmt):
        if m.group(5):  # white space matches any amount of it
            while pos < len(text) and text[pos].isspace():
                pos += 1
            continue
        if m.group(6):
            if not text.startswith(m.group(6), pos):
                return out
            pos += len(m.group(6))
            continue
        conv = m.group(4)
        if conv == "%" or m.group(1) or m.group(2):
            return None  # literal %, assignment suppression, widths: not followed
        if conv != "c":
            while pos < len(text) and text[pos].isspace():
                pos += 1
        if pos >= len(text):
            return out
        if conv == "c":
            out.append(ord(text[pos]))
            pos += 1
            continue
        pattern = {"d": r"[+-]?\d+", "i": r"[+-]?(0[xX][0-9a-fA-F]+|\d+)", "u": r"[+-]?\d+",
                   "x": r"[+-]?(0[xX])?[0-9a-fA-F]+", "s": r"\S+"}.get(
            conv, r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
        word = re.match(pattern, text[pos:])
        if word is None:
            return out
        pos += word.end()
        w = word.group(0)
        out.append(w if conv == "s" else int(w, 16) if conv == "x" else int(w, 0)
                   if conv == "i" else int(w) if conv in "du" else float(w))
    return out


def _sscanf_known(ev: CEvaluator, args: list) -> Optional[Value]:
    """``sscanf`` of a known string with a format polyfuse follows: the values stored."""
    text, fmt = ev.mem.text(arg_at(args, 0)), arg_at(args, 1)
    if text is None or not isinstance(fmt, Str):
        return None
    values = scan_known(text, c_unescape(fmt.s))
    if values is None:
        return None
    stores = list(zip(values, args[2:]))
    if any(not isinstance(dst, Ref) or isinstance(v, str) and dst.path not in ((), (0,))
           for v, dst in stores):
        return None
    for v, dst in stores:
        if isinstance(v, str):
            ev.mem.texts[dst.slot] = v
        else:
            ev.mem.write(dst, Num(sympy.Float(v), True) if isinstance(v, float)
                         else Num(sympy.Integer(v)))
    return Num(sympy.Integer(len(values) if values or text.strip() else -1))


def _scan(first: int) -> Handler:
    """``scanf``/``fscanf``/``sscanf``: what they store is read at run time, unless ``fscanf``
    reads an input file that is there (:func:`scan_file`) or ``sscanf`` a known string."""
    def handler(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
        name = node.name.name
        if name == "fscanf":
            read = scan_file(ev, node, args)
            if read is not None:
                return read
        if name == "sscanf":
            known = _sscanf_known(ev, args)
            if known is not None:
                return known
        src = ev.source(f"read by {name}", node)
        for a in args[first:]:
            if isinstance(a, Ref):
                ev.mem.write(a, Runtime(src))
        return UNK
    return handler


def _alloc(zero: bool) -> Handler:
    """Fresh host memory, named after the variable the pointer is stored in."""
    def handler(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
        sid = ev.mem.new_slot(ev.ctx.name_hint or "heap", heap_type(node, args),
                              Arr(None, (), ZERO if zero else UNK))
        return Ref(sid)
    return handler


def _math_call(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    return _math(node.name.name, args)


def _handle(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    succeed(ev, args)
    return Handle(node.name.name)


def _no_effect(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    return UNK


def _clock(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """``clock``/``clock_gettime`` return 0: timing never changes what the host launches."""
    return ZERO


#: the C library's handlers, by function name
def template_sizeof(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """``sizeof(T)`` of a template's type parameter (clang_host lowers it to
    ``__polyfuse_sizeof()``): unknown, and a refusal that depends on it says why."""
    return Unknown(False, ev.source("sizeof of a template's type parameter (polyfuse "
                                    "interprets a function template once, not per "
                                    "instantiation)", node))


def template_specialized(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """The result of a function template explicitly specialized for several types
    (clang_host lowers its body to ``__polyfuse_specialized()``): unknown, with why."""
    return Unknown(False, ev.source("the result of a function template explicitly "
                                    "specialized per type (polyfuse interprets a function "
                                    "template once, not per instantiation)", node))


def pure_virtual(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """A call of a pure virtual method (``(*stencil)(data, n)`` through the base class;
    clang_host lowers it to ``__polyfuse_virtual("Class::method", object, args...)``): the
    override is not followed, so it is an unknown call, remembered for the refusal of a
    program that then launches nothing."""
    what = args[0].s if args and isinstance(args[0], Str) else "a pure virtual method"
    why = "a pure virtual method (polyfuse does not follow virtual dispatch)"
    ev.ctx.unfollowed_calls.append((why, f"'{what}' at {ev.ctx.loc(node)}"))
    ev.ctx.warn(f"call of '{what}', {why}: the launches of what it calls are not modelled",
                node)
    return ev.unknown_call(what, args[1:], node)


def unresolved_call(ev: CEvaluator, node: c_ast.FuncCall, args: list[Value]) -> Value:
    """A call in a function template's body on an object of a type that depends on its type
    parameter (clang_host lowers it to ``__polyfuse_unresolved("callee", object, args...)``):
    which function it calls is not known there, so it is an unknown call, remembered for the
    refusal of a program that then launches nothing."""
    what = args[0].s if args and isinstance(args[0], Str) else "a call"
    why = "the callee depends on a template's type parameter (polyfuse lowers a function " \
          "template once, from its generic body)"
    ev.ctx.unfollowed_calls.append((why, f"'{what}' at {ev.ctx.loc(node)}"))
    ev.ctx.warn(f"call of '{what}': {why}; the launches of what it calls are not modelled",
                node)
    return ev.unknown_call(what, args[1:], node)


LIBC: dict[str, Handler] = {
    "__polyfuse_sizeof": template_sizeof, "__polyfuse_virtual": pure_virtual,
    "__polyfuse_specialized": template_specialized, "__polyfuse_unresolved": unresolved_call,
    "memcpy": memcpy, "memmove": memcpy, "strcpy": string_copy, "strncpy": string_copy,
    "strcat": string_copy, "strncat": string_copy, "fgets": memcpy, "memset": memset,
    "posix_memalign": posix_memalign, "sprintf": sprintf, "snprintf": snprintf,
    "strcmp": strcmp, "strstr": strstr, "strcasecmp": strcasecmp, "strncmp": strncmp,
    "strlen": strlen,
    "getenv": getenv, "getopt": getopt_short,
    "getopt_long": getopt_long, "fopen": fopen, "fread": fread, "clock": _clock,
    "clock_gettime": _clock,
    **{n: _reads_number(n) for n in ("atoi", "atol", "atoll", "strtol", "strtoul", "strtoll",
                                     "strtoull", "atof", "strtod", "strtof")},
}
for _names, _handler in (
        (("exit", "abort", "_exit", "quick_exit"), _exit),
        (("scanf",), _scan(1)), (("fscanf", "sscanf"), _scan(2)),
        (("calloc",), _alloc(True)), (_ALLOC - {"calloc"}, _alloc(False)),
        (_MATH, _math_call),
        (_HANDLE_RESULT, _handle),
        (_IGNORED, _no_effect)):
    for _name in sorted(_names):
        LIBC.setdefault(_name, _handler)
