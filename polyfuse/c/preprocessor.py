"""C preprocessing and parsing for polyfuse's front-ends (OpenCL C kernels and C host code).

Sources go through ``gcc -E`` with polyfuse's own headers (``polyfuse/include``), so no OpenCL SDK
is needed; line markers are kept so every error and every AST coordinate names the user's file
and line.  pycparser knows nothing of OpenCL C, so after preprocessing the OpenCL qualifiers are
rewritten, token by token and without changing the line structure, into C23 attributes that
pycparser's ``c23`` dialect parses:

* ``__global``/``global``, ``__local``, ``__constant``, ``__private``, ``__kernel`` are removed
  where they stand and ``[[ocl::global]]`` (etc.) is inserted at the start of the enclosing
  declaration; inside a cast (``(__global float4 *)p``) an address space becomes a
  ``__global`` qualifier of the cast's type (:func:`cast_spaces`), ``__kernel`` is dropped;
* ``__attribute__((reqd_work_group_size(X, Y, Z)))`` becomes
  ``[[ocl::reqd_work_group_size(X, Y, Z)]]`` at the start of the declaration; other GNU
  attributes are dropped;
* ``__read_only``/``__write_only``/``read_only``/``write_only``/``__restrict`` and ``#pragma``
  lines are dropped; the GNU spellings ``__const``, ``__volatile``, ``__signed`` become the C
  keywords.

:func:`address_space_of`, :func:`is_kernel` and :func:`reqd_work_group_size` read the attributes
back; :mod:`polyfuse.c.printer` prints them as OpenCL qualifiers again.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Optional

from pycparser import c_ast, c_parser

from polyfuse.core.program import PolyfuseError

#: polyfuse's shipped headers (``opencl_c.h`` and the host-side ones)
INCLUDE_DIR = Path(__file__).resolve().parent.parent / "include"

#: OpenCL qualifier spellings → the attribute name polyfuse uses
QUALIFIERS = {
    "__global": "global",
    "global": "global",
    "__local": "local",
    "local": "local",
    "__constant": "constant",
    "constant": "constant",
    "__private": "private",
    "private": "private",
    "__kernel": "kernel",
    "kernel": "kernel",
}
_DROPPED = {"__read_only", "__write_only", "read_only", "write_only", "__restrict",
            "__restrict__", "__inline", "__inline__"}
#: GNU spellings of C qualifiers (``(__const local float *)``), which OpenCL compilers accept
_GNU_KEYWORDS = {"__const": "const", "__const__": "const", "__volatile": "volatile",
                 "__volatile__": "volatile", "__signed": "signed", "__signed__": "signed"}
_KEEP_ATTRIBUTES = {"reqd_work_group_size"}
_ADDRESS_SPACES = {"global", "local", "constant", "private"}
_C_KEYWORDS = {
    "if", "while", "switch", "return", "sizeof", "_Alignof", "alignof", "do", "else", "case",
    "goto", "_Generic", "typeof", "__typeof__", "_Static_assert", "static_assert",
}


def read_source(path: str) -> str:
    """The text of a source file, whatever its encoding: UTF-8 (with or without a BOM), else
    Latin-1, which maps every byte to one character, so a stray byte in a comment never stops
    polyfuse.  An unreadable file is a :class:`PolyfuseError` naming it."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as err:
        raise PolyfuseError(f"cannot read: {err.strerror}", str(path)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def preprocess(
    source: str,
    filename: str,
    *,
    include_dirs: Iterable[str] = (),
    defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
    opencl: bool,
) -> str:
    """Run the C preprocessor, keeping line markers so errors map back to ``filename``.

    OpenCL sources get ``opencl_c.h`` force-included.  Raises :class:`PolyfuseError` naming the
    file and line of a preprocessor error, or saying that gcc is missing.
    """
    gcc = shutil.which("gcc") or shutil.which("cpp")
    if gcc is None:
        raise PolyfuseError("the C preprocessor (gcc) was not found on PATH; install gcc", filename)
    cmd = [gcc, "-E", "-x", "c", "-nostdinc", "-undef", "-std=c11"]
    parent = Path(filename).parent
    if str(parent) and parent.is_dir():
        cmd += ["-iquote", str(parent)]
    for d in include_dirs:
        cmd += ["-I", str(d)]
    cmd += ["-I", str(INCLUDE_DIR)]
    if opencl:
        cmd += ["-include", str(INCLUDE_DIR / "opencl_c.h")]
    for name, value in defines.items():
        cmd.append(f"-D{name}" if value is None else f"-D{name}={value}")
    cmd.append("-")
    text = f'# 1 "{filename}"\n{source}'
    if not text.endswith("\n"):
        text += "\n"
    try:
        proc = subprocess.run(cmd, input=text, capture_output=True, check=False,
                              encoding="utf-8", errors="replace")
    except OSError as err:
        raise PolyfuseError(f"cannot run the C preprocessor: {err}", filename) from None
    if proc.returncode != 0:
        raise _cpp_error(proc.stderr, filename)
    return proc.stdout


def _cpp_error(stderr: str, filename: str) -> PolyfuseError:
    for line in stderr.splitlines():
        m = re.match(r"^(.*?):(\d+):(?:\d+:)?\s*(?:fatal )?error:\s*(.*)$", line)
        if m:
            return PolyfuseError(f"preprocessor: {m.group(3)}", m.group(1), int(m.group(2)))
    msg = stderr.strip().splitlines()[-1] if stderr.strip() else "preprocessing failed"
    return PolyfuseError(f"preprocessor: {msg}", filename)


# ----------------------------------------------------------------------------------------------
# Token-level rewrite of OpenCL qualifiers
# ----------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\f\v]+|\n)
      |(?P<str>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
      |(?P<num>\.?\d(?:[eEpP][+-]|[\w.])*)
      |(?P<id>[A-Za-z_]\w*)
      |(?P<attr>\[\[|\]\])
      |(?P<punct>.)""",
    re.VERBOSE,
)


def _tokens(text: str) -> list[tuple[str, str, int, int]]:
    """(kind, text, start, end) of the code tokens; line-marker and pragma lines are skipped."""
    out = []
    pos = 0
    line_start = True
    n = len(text)
    while pos < n:
        if line_start:
            j = pos
            while j < n and text[j] in " \t":
                j += 1
            if j < n and text[j] == "#":
                end = text.find("\n", j)
                end = n if end < 0 else end
                kind = "pragma" if re.match(r"#\s*pragma\b", text[j:end]) else "marker"
                out.append((kind, text[j:end], j, end))
                pos = end
                continue
        m = _TOKEN.match(text, pos)
        assert m is not None
        kind = m.lastgroup or "punct"
        if kind == "ws":
            line_start = m.group() == "\n"
        else:
            line_start = False
            out.append((kind, m.group(), m.start(), m.end()))
        pos = m.end()
    return out


def _blank(s: str) -> str:
    """Keep only the newlines of a removed span (line numbers stay right)."""
    return "\n" * s.count("\n")


def rewrite_opencl(text: str) -> str:
    """Turn OpenCL qualifiers and attributes into C23 ``[[ocl::...]]`` attributes."""
    toks = _tokens(text)
    removals: dict[int, tuple[int, str]] = {}  # start -> (end, replacement)
    inserts: dict[int, list[str]] = {}
    # per parenthesis depth: (index of first token of the current declaration, is-cast context)
    stack: list[list] = [[0, False]]
    prev_code: Optional[tuple[str, str, int, int]] = None
    i = 0
    while i < len(toks):
        kind, tok, start, end = toks[i]
        if kind == "pragma":
            removals[start] = (end, "")
            i += 1
            continue
        if kind == "marker":
            i += 1
            continue
        top = stack[-1]
        if kind == "id" and tok in QUALIFIERS:
            removals[start] = (end, "")
            if not top[1]:
                _insert_attr(inserts, toks, top[0], f"ocl::{QUALIFIERS[tok]}")
            elif QUALIFIERS[tok] in _ADDRESS_SPACES:
                _insert_cast_space(inserts, toks, i + 1, f"ocl::{QUALIFIERS[tok]}")
        elif kind == "id" and tok in _DROPPED:
            removals[start] = (end, "")
        elif kind == "id" and tok in _GNU_KEYWORDS:
            removals[start] = (end, _GNU_KEYWORDS[tok])
        elif kind == "id" and tok in ("__attribute__", "__attribute"):
            j, attrs = _gnu_attribute(toks, i)
            span = text[start:toks[j - 1][3]]
            removals[start] = (toks[j - 1][3], _blank(span))
            keep = [a for a in attrs if a[0] in _KEEP_ATTRIBUTES]
            if keep and not top[1]:
                for name, args in keep:
                    _insert_attr(inserts, toks, top[0], f"ocl::{name}({args})")
            i = j
            continue
        elif tok == "(":
            cast = not (prev_code is not None and prev_code[0] == "id"
                        and prev_code[1] not in _C_KEYWORDS)
            stack.append([i + 1, cast])
        elif tok == ")":
            if len(stack) > 1:
                stack.pop()
        elif tok in (",", ";", "{", "}"):
            top[0] = i + 1
            if tok in ("{", "}", ";"):
                top[1] = False if len(stack) == 1 else top[1]
        prev_code = toks[i]
        i += 1
    if not removals and not inserts:
        return text
    out = []
    pos = 0
    cuts = sorted(set(removals) | set(inserts))
    for p in cuts:
        out.append(text[pos:p])
        pos = max(pos, p)
        if p in inserts:
            out.append(" ".join(f"[[{a}]]" for a in inserts[p]) + " ")
        if p in removals:
            end, repl = removals[p]
            out.append(repl)
            pos = end
    out.append(text[pos:])
    return "".join(out)


def _insert_cast_space(inserts: dict[int, list[str]], toks: list, index: int, attr: str
                       ) -> None:
    """An address space in a cast's type name goes after its specifiers
    (``(__global double *)`` → ``(double [[ocl::global]] *)``), where C23 lets an attribute
    qualify the type; :func:`cast_spaces` turns it into a qualifier after parsing."""
    while index < len(toks):
        kind, tok = toks[index][0], toks[index][1]
        if kind not in ("marker", "pragma") and tok in ("*", "(", ")", "["):
            inserts.setdefault(toks[index][2], []).append(attr)
            return
        index += 1


def cast_spaces(ast: c_ast.Node) -> c_ast.Node:
    """The address spaces written in casts (``[[ocl::global]]`` on a type name's base
    type) as ``__global`` qualifiers of that type, which the printer prints back."""
    for n in _walk(ast):
        if isinstance(n, c_ast.TypeDecl) and isinstance(n.type, c_ast.AttributedType):
            attrs = [a for spec in n.type.attributes or [] for a in spec.attributes or []]
            if attrs and all(isinstance(a, c_ast.Attribute) and a.namespace == "ocl"
                             and a.name in _ADDRESS_SPACES for a in attrs):
                n.quals = list(n.quals) + [f"__{a.name}" for a in attrs]
                n.type = n.type.type
    return ast


def _walk(node: c_ast.Node) -> Iterator[c_ast.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(c for _, c in n.children())


def _insert_attr(inserts: dict[int, list[str]], toks: list, index: int, attr: str) -> None:
    """Insert ``attr`` before the first code token at or after ``index``."""
    while index < len(toks) and toks[index][0] in ("marker", "pragma"):
        index += 1
    if index >= len(toks):
        return
    lst = inserts.setdefault(toks[index][2], [])
    if attr not in lst:
        lst.append(attr)


def _gnu_attribute(toks: list, i: int) -> tuple[int, list[tuple[str, str]]]:
    """Skip ``__attribute__((...))`` starting at token ``i``; return next index and attributes."""
    j = i + 1
    depth = 0
    body: list[str] = []
    while j < len(toks):
        if toks[j][0] in ("marker", "pragma"):
            j += 1
            continue
        tok = toks[j][1]
        body.append(tok)
        depth += tok == "("
        depth -= tok == ")"
        j += 1
        if depth == 0:
            break
    inner = body[2:-2]  # inside the double parentheses
    attrs: list[tuple[str, str]] = []
    k = 0
    while k < len(inner):
        name = inner[k].strip("_")
        k += 1
        args: list[str] = []
        if k < len(inner) and inner[k] == "(":
            d = 0
            while k < len(inner):
                t = inner[k]
                d += t == "("
                d -= t == ")"
                args.append(t)
                k += 1
                if d == 0:
                    break
        if name != ",":
            attrs.append((name, "".join(args[1:-1])))
    return j, attrs


# ----------------------------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------------------------

_PARSE_ERROR = re.compile(r"^(?P<file>.*?):(?P<line>\d+)(?::(?P<col>\d+))?: (?P<msg>.*)$", re.S)


def parse(
    source: str,
    filename: str,
    *,
    include_dirs: Iterable[str] = (),
    defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
    opencl: bool = True,
) -> c_ast.FileAST:
    """Preprocess, rewrite OpenCL qualifiers and parse ``source`` with pycparser (C23 dialect).

    Syntax errors become :class:`PolyfuseError` with the user's file and line.
    """
    text = preprocess(source, filename, include_dirs=include_dirs, defines=defines, opencl=opencl)
    if opencl:
        check_brackets(text, filename)
        text = rewrite_opencl(text)
        return cast_spaces(parse_preprocessed(text, filename))
    return parse_preprocessed(text, filename)


#: Deepest nesting of the syntax tree polyfuse accepts.  pycparser and polyfuse's own analyses
#: walk the tree recursively, and kernels are printed back fully parenthesized, so a tree much
#: deeper would exceed the OpenCL compiler's bracket limit (:data:`MAX_BRACKETS`) once
#: regenerated; deeper input (machine-generated expressions) is refused with its place.
MAX_NESTING = 200
#: Python recursion limit while trees up to :data:`MAX_NESTING` deep are parsed, copied and
#: walked (pycparser's descent and ``copy.deepcopy`` take up to ~10 frames per level); Python
#: 3.11+ runs Python-to-Python calls without growing the C stack, so this is safe
RECURSION_LIMIT = 20 * MAX_NESTING + 2000


@contextlib.contextmanager
def recursion_limit(limit: int) -> Iterator[None]:
    """Raise (never lower) the interpreter's recursion limit for the duration of a block."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


#: Brackets ``( [ {`` the OpenCL compilers accept nested (clang's limit)
MAX_BRACKETS = 256
_BRACKET_OR_MARKER = re.compile(
    r'^#\s*(\d+)\s+"([^"]*)"[^\n]*$|[()\[\]{}\n]|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
    re.M)


def check_brackets(text: str, filename: str, limit: int = MAX_BRACKETS) -> None:
    """Refuse preprocessed text with brackets nested deeper than the OpenCL compiler accepts,
    at the user's file and line (the line markers are followed)."""
    depth, file, line = 0, filename, 1
    for m in _BRACKET_OR_MARKER.finditer(text):
        tok = m.group()
        if m.group(1):
            file, line = m.group(2), int(m.group(1)) - 1
        elif tok == "\n":
            line += 1
        elif tok in "([{":
            depth += 1
            if depth > limit:
                raise PolyfuseError(f"brackets nest more than {limit} levels deep (the OpenCL "
                                    "compiler's limit)", file, line)
        elif tok in ")]}":
            depth = max(0, depth - 1)


def check_nesting(ast: c_ast.Node, filename: str, limit: int = MAX_NESTING) -> None:
    """Refuse a tree nested deeper than ``limit`` (iteratively, naming the deepest place)."""
    stack: list[tuple[Any, int, Any]] = [(ast, 0, None)]
    while stack:
        node, depth, coord = stack.pop()
        coord = getattr(node, "coord", None) or coord
        if depth > limit:
            file = getattr(coord, "file", None) or filename
            line = getattr(coord, "line", None)
            raise PolyfuseError(f"expressions or statements nest more than {limit} levels "
                                "deep; polyfuse does not analyse code nested this deeply",
                                file, line)
        stack.extend((c, depth + 1, coord) for _, c in node.children())


def parse_preprocessed(text: str, filename: str) -> c_ast.FileAST:
    """Parse already preprocessed (and rewritten) text; errors as :class:`PolyfuseError`."""
    parser = c_parser.CParser(dialect="c23")
    try:
        with recursion_limit(RECURSION_LIMIT):
            ast = parser.parse(text, filename)
        check_nesting(ast, filename)
        return ast
    except RecursionError:
        file = getattr(parser.clex, "filename", None) or filename
        line = getattr(parser.clex, "_lineno", None)
        raise PolyfuseError(f"expressions or statements nest more than {MAX_NESTING} levels "
                            "deep; polyfuse does not analyse code nested this deeply",
                            file, line) from None
    except c_parser.ParseError as err:
        m = _PARSE_ERROR.match(str(err))
        if not m:
            # no coordinate in the message: fall back on where the lexer stopped
            file = getattr(parser.clex, "filename", None) or filename
            line = getattr(parser.clex, "_lineno", None)
            msg = str(err).split(": ", 1)[-1]
            raise PolyfuseError(f"syntax error: {msg}", file, line) from None
        msg = m.group("msg").strip()
        bm = re.match(r"^before:\s*(.*)$", msg)
        if bm:
            msg = f"syntax error before '{bm.group(1)}'"
        elif not msg.startswith("syntax"):
            msg = f"syntax error: {msg}"
        return _raise(msg, m.group("file"), int(m.group("line")))
    except (AssertionError, ValueError, TypeError, IndexError) as err:
        raise PolyfuseError(f"cannot parse: {err}", filename) from None


def _raise(msg: str, file: str, line: int) -> c_ast.FileAST:
    raise PolyfuseError(msg, file, line) from None


# ----------------------------------------------------------------------------------------------
# Reading the attributes back
# ----------------------------------------------------------------------------------------------


def _ocl_attrs(node: c_ast.Node) -> list[c_ast.Attribute]:
    out = []
    specs = list(getattr(node, "attributes", None) or [])
    for spec in specs:
        for a in getattr(spec, "attributes", None) or []:
            if isinstance(a, c_ast.Attribute) and a.namespace == "ocl":
                out.append(a)
    return out


def _type_attrs(decl: c_ast.Node) -> list[c_ast.Attribute]:
    """Attributes on the declaration itself and on ``AttributedType`` wrappers inside its type."""
    out = _ocl_attrs(decl)
    t = getattr(decl, "type", None)
    while t is not None:
        if isinstance(t, c_ast.AttributedType):
            out += _ocl_attrs(t)
        t = getattr(t, "type", None)
    return out


def address_space_of(decl: c_ast.Node) -> Optional[str]:
    """The OpenCL address space written on a declaration (``global``/``local``/...), or None."""
    for a in _type_attrs(decl):
        if a.name in ("global", "local", "constant", "private"):
            return a.name
    return None


def is_kernel(funcdef: c_ast.Node) -> bool:
    """True for a ``__kernel`` function definition (or declaration)."""
    decl = funcdef.decl if isinstance(funcdef, c_ast.FuncDef) else funcdef
    return any(a.name == "kernel" for a in _type_attrs(decl))


def reqd_work_group_size(funcdef: c_ast.Node) -> Optional[tuple[int, ...]]:
    """The ``reqd_work_group_size`` attribute of a kernel, or None."""
    decl = funcdef.decl if isinstance(funcdef, c_ast.FuncDef) else funcdef
    for a in _type_attrs(decl):
        if a.name == "reqd_work_group_size" and a.arguments:
            coord = getattr(decl, "coord", None)
            try:
                return tuple(_const_int_expr(x) for x in str(a.arguments).split(","))
            except (ValueError, ZeroDivisionError) as err:
                raise PolyfuseError(f"kernel {decl.name}: reqd_work_group_size({a.arguments}): "
                                    f"{err}", getattr(coord, "file", None),
                                    getattr(coord, "line", None)) from None
    return None


def _const_int_expr(text: str) -> int:
    """Value of an integer constant expression made of literals, ``+ - * / % << >>`` and
    parentheses (C semantics: division truncates toward zero)."""
    import ast as pyast

    text = re.sub(r"(?<=\d)[uUlL]+\b", "", text.strip())
    # integer casts do not change a work-group size: (int)0, (unsigned)(4 - 4), (size_t)64
    text = re.sub(r"\(\s*(?:(?:unsigned|signed|const|int|uint|long|ulong|short|ushort|size_t)"
                  r"\s*)+\)", " ", text).strip()

    def ev(node: pyast.AST) -> int:
        if isinstance(node, pyast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, pyast.UnaryOp) and isinstance(node.op, (pyast.USub, pyast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, pyast.USub) else v
        if isinstance(node, pyast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, (pyast.Div, pyast.FloorDiv, pyast.Mod)):
                if b == 0:
                    raise ZeroDivisionError("division by zero")
                q = abs(a) // abs(b) * (1 if (a >= 0) == (b > 0) else -1)
                return q if not isinstance(node.op, pyast.Mod) else a - b * q
            ops = {pyast.Add: a + b, pyast.Sub: a - b, pyast.Mult: a * b,
                   pyast.LShift: a << b if b >= 0 else None,
                   pyast.RShift: a >> b if b >= 0 else None}
            v = ops.get(type(node.op))
            if v is not None:
                return v
        raise ValueError(f"'{text}' is not an integer constant expression")

    try:
        tree = pyast.parse(text.replace("/", "//"), mode="eval")
    except SyntaxError:
        raise ValueError(f"'{text}' is not an integer constant expression") from None
    return ev(tree.body)


def is_polyfuse_header(node: c_ast.Node) -> bool:
    """True for declarations that come from polyfuse's own force-included headers."""
    coord = getattr(node, "coord", None)
    file = getattr(coord, "file", None)
    if not file:
        return False
    try:
        return Path(file).resolve().parent == INCLUDE_DIR
    except OSError:
        return False


#: names this module had as ``polyfuse.c.cpp``, now where they belong (deprecated, one release)
_MOVED = {"generate": ("polyfuse.c.printer", "opencl_source"),
          "OpenCLGenerator": ("polyfuse.c.printer", "OpenCLGenerator"),
          "SPELLING": ("polyfuse.c.printer", "SPELLING"),
          "walk": ("polyfuse.c.syntax", "walk"),
          "block_items": ("polyfuse.c.syntax", "block_items")}


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    import warnings

    module, new = _MOVED[name]
    warnings.warn(f"polyfuse.c.cpp.{name} is now {module}.{new}", DeprecationWarning,
                  stacklevel=2)
    return getattr(importlib.import_module(module), new)
