"""Host programs in C and C++ through clang's own front-end (the ``libclang`` package).

Real host programs include system headers (``sys/resource.h``, ``iostream``, ``CL/cl_ext.h``),
use GNU extensions and C++; pycparser parses none of that.  clang parses each translation unit
with the system's own headers (the include path of the installed ``cc``/``c++``), the user's
``-I``/``-D`` and the real OpenCL headers when they are installed (polyfuse's stub headers
otherwise), and reports errors with file and line: a host that a compiler rejects (an undeclared
variable, a missing header) is refused, never modelled as an empty program.

The abstract interpreter of :mod:`polyfuse.frontend.host` walks pycparser's ``c_ast``; rather than
keeping two interpreters, the functions and globals of the user's files are translated from
clang's cursors into the same ``c_ast`` nodes, with what only clang knows resolved on the way:
macros are expanded, ``sizeof`` and enumerators are evaluated to constants, typedefs are replaced
by their canonical types, and the C++ a host uses is lowered to C: references become pointers,
``new``/``delete`` become ``malloc``/``free``, methods of the user's classes become functions,
library objects (``std::vector``, streams) become values polyfuse does not track.  A lambda
that may reach OpenCL or the user's functions becomes a function (``__lambda_LINE_COL``) that
runs where the lambda is called and sees the variables of the scope that made it; overloads of
a free function with different parameter counts are ``name__N``.  In a function template, a
call of an overload set runs the program's function of that name and arity.  A virtual call
through a pointer or reference, and a method call in a template on an object of a user class,
is ``__polyfuse_dispatch``: it runs the method of the object's dynamic class, which ``new`` and
declarations record (with the sizes of a class template's type arguments); where that class is
not known it is refused where it runs unless only one class defines the method.  A template's
parameters are hidden parameters of its lowered body (a type's size, a value), given by each
call's template arguments (explicit ones in a template's body too); explicit specializations
that those sizes tell apart are kept apart (``name__spec_SIZES``); so are the static data
members of a class template (``C__x__spec_SIZES``; a plain class's is the global ``C__x``).
A variadic template's pack parameter, its expansions and ``sizeof...`` are left to the
interpreter (:mod:`.host.packs`), which knows each call's arguments.  A standard smart pointer
is the pointer it holds (``std::make_unique<C>(args)`` is ``new C(args)``), a
``std::array<T, N>`` is ``T[N]``.  Declarations from system headers are not translated; calls
into them are library calls for the interpreter.
"""

from __future__ import annotations

import copy
import ctypes
import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from pycparser import c_ast
from pycparser.c_parser import Coord

from polyfuse.core.program import PolyfuseError
from polyfuse.frontend.host.packs import PACK_TYPE
from polyfuse.frontend.host.values import TPARAM_TYPE

try:  # the package is a dependency; its absence is reported when a host is parsed
    from clang import cindex
except ImportError:  # pragma: no cover - depends on the installation
    cindex = None  # type: ignore[assignment]

_INCLUDE = Path(__file__).resolve().parent.parent / "include"
#: headers of the Khronos C++ wrapper (its calls hide the C API from the model)
_CXX_WRAPPERS = {"cl.hpp", "cl2.hpp", "opencl.hpp"}
#: extensions parsed as C++
CXX_SUFFIXES = (".cpp", ".cc", ".cxx", ".c++", ".C", ".hpp", ".hh", ".hxx")
#: diagnostics gcc only warns about, which clang makes errors by default
_GCC_LENIENT = (
    "-Wno-error=implicit-function-declaration", "-Wno-error=implicit-int",
    "-Wno-error=int-conversion", "-Wno-error=incompatible-pointer-types",
    "-Wno-error=incompatible-function-pointer-types", "-Wno-error=return-type",
    "-Wno-implicit-function-declaration", "-Wno-deprecated-declarations",
    "-ferror-limit=0", "-fno-spell-checking",
)
#: what g++ (the suites' compiler) only warns about in C++, which clang refuses
_GXX_LENIENT = ("-Wno-c++11-narrowing", "-Wno-dynamic-exception-spec")
#: standard containers whose elements the interpreter keeps (``v[k] = x`` stores)
_CONTAINERS = ("vector", "map", "unordered_map")
#: the standard smart pointers (and the libstdc++ bases their members live in): ownership is
#: no concern of the model, so each is a pointer to the object it holds
_SMART_POINTERS = ("unique_ptr", "shared_ptr")
_SMART_CLASSES = _SMART_POINTERS + ("__shared_ptr", "__shared_ptr_access")
#: standard functions that make the object a smart pointer holds (``new T(args)``)
_SMART_MAKERS = ("make_unique", "make_shared")
#: standard functions that return their argument (a cast to an rvalue reference)
_IDENTITY = ("move", "forward")
#: C++ dialects tried in turn: suites written for older g++ defaults use what C++17 removed
#: (``throw()`` specifications) or clashes with what it added (``std::data`` against a global)
_CXX_STDS = ("gnu++17", "gnu++14", "gnu++98")
#: the C99 classification functions g++ before 6 also declared in the global namespace: a C++
#: unit that calls one unqualified is parsed again with them made visible there
_GLOBAL_MATH = ("isnan", "isinf", "isfinite", "isnormal", "signbit", "fpclassify")
_GLOBAL_MATH_SHIM = _INCLUDE / "compat" / "global_math.h"
#: clang's error for an implicit ``int``, which g++ accepts for ``main`` with -fpermissive
_IMPLICIT_INT = ("a type specifier is required for all declarations",
                 "C++ requires a type specifier for all declarations")


def available() -> bool:
    """Whether libclang can be loaded (the host front-end then uses it)."""
    return libclang_index() is not None


@functools.lru_cache(maxsize=1)
def libclang_index() -> Any:
    """The shared libclang ``Index`` (None when libclang cannot be loaded)."""
    if cindex is None:
        return None
    try:
        index = cindex.Index.create()
        _bind_extras()
        return index
    except Exception:  # noqa: BLE001 - any load failure means "not available"
        return None


@functools.lru_cache(maxsize=2)
def system_include_dirs(cxx: bool) -> tuple[str, ...]:
    """The installed compiler's ``#include <...>`` search path (gcc's, or clang's)."""
    lang = "c++" if cxx else "c"
    for cc in (("c++", "g++", "clang++") if cxx else ("cc", "gcc", "clang")):
        exe = shutil.which(cc)
        if exe is None:
            continue
        try:
            out = subprocess.run([exe, "-E", "-v", "-x", lang, os.devnull], capture_output=True,
                                 text=True, timeout=30, errors="replace").stderr
        except (OSError, subprocess.SubprocessError):
            continue
        dirs, on = [], False
        for line in out.splitlines():
            if line.startswith("#include <...>"):
                on = True
            elif line.startswith("End of search list"):
                break
            elif on and line.startswith(" "):
                dirs.append(os.path.normpath(line.strip()))
        if dirs:
            return tuple(dirs)
    return tuple(d for d in ("/usr/local/include", "/usr/include/x86_64-linux-gnu",
                             "/usr/include") if os.path.isdir(d))


def compile_args(path: str, *, include_dirs: Iterable[str] = (),
                 defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
                 cxx: Optional[bool] = None, std: Optional[str] = None) -> list[str]:
    """clang arguments that parse ``path`` as its own compiler would (C or C++; by default
    as its suffix says, in the newest dialect)."""
    cxx = path.endswith(CXX_SUFFIXES) if cxx is None else cxx
    args = ["-x", "c++" if cxx else "c", f"-std={std or ('gnu++17' if cxx else 'gnu11')}"]
    args += ["-nostdinc", "-nostdinc++"] if cxx else ["-nostdinc"]
    args += ["-DCL_TARGET_OPENCL_VERSION=300", "-DCL_USE_DEPRECATED_OPENCL_1_2_APIS",
             "-DCL_HPP_TARGET_OPENCL_VERSION=300", "-DCL_HPP_MINIMUM_OPENCL_VERSION=120"]
    for d in include_dirs:
        args += ["-I", os.fspath(d)]
    for name, value in defines.items():
        args.append(f"-D{name}" if value is None else f"-D{name}={value}")
    args += ["-isystem", str(_INCLUDE / "clang")]
    for d in system_include_dirs(cxx):
        args += ["-isystem", d]
    args += ["-idirafter", str(_INCLUDE)]  # polyfuse's CL stubs when no OpenCL SDK is installed
    args += list(_GCC_LENIENT) + (list(_GXX_LENIENT) if cxx else [])
    return args


def parse_unit(path: str, text: str, *, include_dirs: Iterable[str] = (),
               defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
               options: int = 0) -> tuple[Any, list[str]]:
    """(translation unit, clang arguments) of one file in the first dialect that parses it, as
    the suite's own compiler would: C++17, then 14, then 98; a ``.c`` file that only parses
    as C++ (a Makefile's ``CC=g++``) as C++.  When none parses, the first attempt's unit (its
    errors are the ones to report)."""
    index = libclang_index()
    include_dirs = list(include_dirs)
    dialects = [(True, std) for std in _CXX_STDS] if path.endswith(CXX_SUFFIXES) else \
        [(False, None)] + [(True, std) for std in _CXX_STDS[1:]]
    first: Optional[tuple[Any, list[str]]] = None
    for cxx, std in dialects:
        args = compile_args(path, include_dirs=include_dirs, defines=defines, cxx=cxx, std=std)
        tu = index.parse(path, args=args, unsaved_files=[(path, text)], options=options)
        if _user_error(tu, path, text) is None:
            return tu, args
        first = first or (tu, args)
    assert first is not None
    if _needs_global_math(first[0], path, text):
        for std in _CXX_STDS:
            args = compile_args(path, include_dirs=include_dirs, defines=defines, cxx=True,
                                std=std) + ["-include", str(_GLOBAL_MATH_SHIM)]
            tu = index.parse(path, args=args, unsaved_files=[(path, text)], options=options)
            if _user_error(tu, path, text) is None:
                return tu, args
    return first


def _needs_global_math(tu: Any, path: str, text: str) -> bool:
    """Whether the unit's first error is an unqualified ``isnan`` (or a sibling) that old g++
    took from the global namespace."""
    d = _user_error(tu, path, text)
    return d is not None and any(d.spelling == f"use of undeclared identifier '{name}'"
                                 for name in _GLOBAL_MATH)


def parse_units(paths_and_texts: Sequence[tuple[str, str]], *,
                include_dirs: Iterable[str] = (),
                defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
                ) -> c_ast.FileAST:
    """One ``c_ast.FileAST`` holding the user-level functions and globals of every unit.

    Each element is (file name, text).  Raises :class:`PolyfuseError` with file:line for a
    unit clang rejects.
    """
    index = libclang_index()
    if index is None:
        raise PolyfuseError("the host front-end needs libclang (pip install libclang)",
                            paths_and_texts[0][0] if paths_and_texts else "<host>")
    merged = _Translator()
    for name, text in paths_and_texts:
        path = name if not name.startswith("<") else "host.c"
        base_dir = os.path.dirname(os.path.abspath(path))
        try:
            tu, _ = parse_unit(path, text, include_dirs=[base_dir, *include_dirs],
                               defines=defines)
        except cindex.TranslationUnitLoadError as err:
            raise PolyfuseError(f"clang cannot parse the host program: {err}", name) from None
        _check_diagnostics(tu, name, path, text)
        try:
            merged.unit(tu, path, name)
        except PolyfuseError:
            raise
        except RecursionError:
            raise PolyfuseError("host code nests too deeply for polyfuse", name) from None
        except Exception as err:  # never a traceback for a construct the lowering misses
            raise PolyfuseError(f"cannot read host code ({type(err).__name__}: {err})",
                                name) from None
    return merged.file_ast()


def _user_error(tu: Any, path: str, text: str) -> Any:
    """The first error that is the user's (or fatal), or None; ``main()`` without its ``int``
    is not one (g++ takes it, and clang declares it ``int`` all the same)."""
    lines = text.splitlines()
    for d in tu.diagnostics:
        if d.severity < cindex.Diagnostic.Error:
            continue
        loc = d.location
        file = loc.file.name if loc.file is not None else path
        if d.spelling in _IMPLICIT_INT and file == path and 0 < loc.line <= len(lines) and \
                lines[loc.line - 1][loc.column - 1:].startswith("main"):
            continue
        # the wrapper header a program ships (-I Cpp_common) is not the user's code either
        in_user = loc.file is None or not (_is_system(file) or _is_wrapper_file(file))
        if d.severity >= cindex.Diagnostic.Fatal or in_user:
            return d
    return None


def _check_diagnostics(tu: Any, name: str, path: str, text: str) -> None:
    d = _user_error(tu, path, text)
    if d is None:
        return
    loc = d.location
    file = loc.file.name if loc.file is not None else path
    shown = name if file == path else file
    hint = ""
    if "file not found" in d.spelling:
        hint = " (pass its directory with -I DIR)"
    what = "syntax error: " if d.category_name == "Parse Issue" else ""
    raise PolyfuseError(f"{what}{d.spelling}{hint}", shown, loc.line or None)


@functools.lru_cache(maxsize=4096)
def _is_system(file: str) -> bool:
    f = os.path.abspath(file)
    roots = set(system_include_dirs(False)) | set(system_include_dirs(True)) | {str(_INCLUDE)}
    return any(f.startswith(r.rstrip("/") + "/") for r in roots)


# ----------------------------------------------------------------------------------------------
# libclang entry points the Python bindings do not wrap
# ----------------------------------------------------------------------------------------------

_EVAL_INT, _EVAL_FLOAT, _EVAL_STR = 1, 2, 4
_lib: Any = None


def _bind_extras() -> None:
    global _lib
    lib = cindex.conf.lib
    cur = cindex.Cursor
    res = ctypes.c_void_p
    signatures = (  # (function, argument types, result type); None: no result
        ("clang_Cursor_Evaluate", [cur], res),
        ("clang_EvalResult_getKind", [res], ctypes.c_int),
        ("clang_EvalResult_getAsLongLong", [res], ctypes.c_longlong),
        ("clang_EvalResult_isUnsignedInt", [res], ctypes.c_uint),
        ("clang_EvalResult_getAsUnsigned", [res], ctypes.c_ulonglong),
        ("clang_EvalResult_getAsDouble", [res], ctypes.c_double),
        ("clang_EvalResult_getAsStr", [res], ctypes.c_char_p),
        ("clang_EvalResult_dispose", [res], None),
        ("clang_getCursorBinaryOperatorKind", [cur], ctypes.c_int),
        ("clang_getCursorUnaryOperatorKind", [cur], ctypes.c_int),
        ("clang_Cursor_getVarDeclInitializer", [cur], cur),
        ("clang_getNumOverloadedDecls", [cur], ctypes.c_uint),
        ("clang_getOverloadedDecl", [cur, ctypes.c_uint], cur),
    )
    for fname, argtypes, restype in signatures:
        fn = getattr(lib, fname)
        fn.argtypes = argtypes
        if restype is not None:
            fn.restype = restype
    lib.clang_Cursor_getVarDeclInitializer.errcheck = cindex.Cursor.from_result
    lib.clang_getOverloadedDecl.errcheck = cindex.Cursor.from_result
    _lib = lib


def _evaluate(c: Any) -> Optional[tuple[int, Any]]:
    """(kind, value) of a constant expression, or None."""
    res = _lib.clang_Cursor_Evaluate(c)
    if not res:
        return None
    try:
        kind = _lib.clang_EvalResult_getKind(res)
        if kind == _EVAL_INT:
            if _lib.clang_EvalResult_isUnsignedInt(res):
                return kind, int(_lib.clang_EvalResult_getAsUnsigned(res))
            return kind, int(_lib.clang_EvalResult_getAsLongLong(res))
        if kind == _EVAL_FLOAT:
            return kind, float(_lib.clang_EvalResult_getAsDouble(res))
        if kind == _EVAL_STR:
            raw = _lib.clang_EvalResult_getAsStr(res)
            return kind, raw.decode("utf-8", "replace") if raw is not None else ""
        return None
    finally:
        _lib.clang_EvalResult_dispose(res)


def _class_constant(c: Any, ref: Any) -> Optional[int]:
    """The value of a class's static integer constant (``std::string::npos``): the class's
    declaration is not lowered, so its constants are folded where they are used."""
    K = cindex.CursorKind
    parent = ref.semantic_parent
    if parent is None or parent.kind not in (K.CLASS_DECL, K.STRUCT_DECL, K.CLASS_TEMPLATE) or \
            not ref.type.is_const_qualified():
        return None
    ev = _evaluate(c)
    return ev[1] if ev is not None and ev[0] == _EVAL_INT else None


#: CXBinaryOperatorKind → C spelling
_BINOPS = {1: ".*", 2: "->*", 3: "*", 4: "/", 5: "%", 6: "+", 7: "-", 8: "<<", 9: ">>",
           10: "<=>", 11: "<", 12: ">", 13: "<=", 14: ">=", 15: "==", 16: "!=", 17: "&",
           18: "^", 19: "|", 20: "&&", 21: "||", 22: "=", 23: "*=", 24: "/=", 25: "%=",
           26: "+=", 27: "-=", 28: "<<=", 29: ">>=", 30: "&=", 31: "^=", 32: "|=", 33: ","}
#: CXUnaryOperatorKind → pycparser's spelling
_UNOPS = {1: "p++", 2: "p--", 3: "++", 4: "--", 5: "&", 6: "*", 7: "+", 8: "-", 9: "~",
          10: "!", 13: ""}


# ----------------------------------------------------------------------------------------------
# clang cursors → pycparser c_ast
# ----------------------------------------------------------------------------------------------


def _const_ref(t: Any) -> bool:
    """A ``const T &``: read only, passed and used as a value."""
    return t.get_pointee().is_const_qualified()


def _c_string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 32:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class _Unsupported(Exception):
    """A construct the translation does not lower (reported with file:line)."""


class _Translator:
    def __init__(self) -> None:
        self.records: dict[str, c_ast.Node] = {}  # struct name -> Decl of its definition
        self.record_names: dict[str, str] = {}  # clang USR/hash -> struct name
        self.funcs: dict[tuple[str, int], c_ast.FuncDef] = {}
        #: (name, arity) -> how many explicit specializations of a function template define it
        self.specializations: dict[tuple[str, int], int] = {}
        #: (name, arity) -> the explicit specializations by the sizes of their type arguments
        self.by_sizes: dict[tuple[str, int], dict[tuple[int, ...], c_ast.FuncDef]] = {}
        #: names of function templates with a generic body (the primary template's definition)
        self.generic: set[str] = set()
        self.globals: dict[str, c_ast.Decl] = {}
        self.methods: dict[str, str] = {}  # USR -> lowered function name
        self.implicit_ctors: dict[str, Optional[str]] = {}  # class USR -> lowered name
        self.overloads: dict[str, str] = {}  # free function USR -> lowered name
        self.arity: dict[str, int] = {}  # free function name -> parameters of the first
        self.path = ""
        self.shown = ""
        self.lowering: Any = None  # the function whose body is being lowered

    # -- units --------------------------------------------------------------------------------

    def unit(self, tu: Any, path: str, shown: str) -> None:
        self.path, self.shown = path, shown
        self._walk_decls(tu.cursor)

    def _walk_decls(self, parent: Any) -> None:
        K = cindex.CursorKind
        for c in parent.get_children():
            if c.location.file is None or _is_system(c.location.file.name) or \
                    _is_wrapper_file(c.location.file.name):
                continue
            k = c.kind
            if k in (K.NAMESPACE, K.LINKAGE_SPEC, K.UNEXPOSED_DECL):
                self._walk_decls(c)
            elif k in (K.STRUCT_DECL, K.CLASS_DECL, K.CLASS_TEMPLATE):
                self._walk_decls(c)  # methods defined inside the class
            elif k in (K.FUNCTION_DECL, K.CXX_METHOD, K.CONSTRUCTOR, K.DESTRUCTOR,
                       K.FUNCTION_TEMPLATE):
                if c.is_definition():
                    fd = self._funcdef(c)
                    if fd is not None:  # C++ overloads by arity (the interpreter's choice)
                        key = (fd.decl.name, _arity(fd))
                        self.funcs[key] = fd
                        if cindex.conf.lib.clang_getSpecializedCursorTemplate(c) is not None:
                            self.specializations[key] = self.specializations.get(key, 0) + 1
                            self.by_sizes.setdefault(key, {})[_type_sizes(c)] = fd
                        if k == K.FUNCTION_TEMPLATE:
                            self.generic.add(fd.decl.name)
            elif k == K.VAR_DECL and c.semantic_parent.kind in (K.TRANSLATION_UNIT,
                                                                K.NAMESPACE,
                                                                K.LINKAGE_SPEC):
                name = c.spelling
                if c.storage_class == cindex.StorageClass.EXTERN and name in self.globals:
                    continue
                # a C tentative definition (`cl_event e;` in the unit that owns it) is no
                # definition to libclang, but it is the object (zero-initialised) that an
                # `extern` seen first in another unit only declares
                if name in self.globals and not c.is_definition() and \
                        "extern" not in self.globals[name].storage:
                    continue
                self.globals[name] = self._var_decl(c)
            elif k == K.VAR_DECL and c.semantic_parent.kind.name in _CLASS_KINDS and \
                    c.is_definition():
                # a static data member (`T *C<float>::p = 0;`): a global of its own per class
                # and, for a class template, per specialization (see :meth:`_static_member`)
                name = _static_name(c)
                if name is not None:
                    self.globals[name] = _renamed(self._var_decl(c), name)

    def file_ast(self) -> c_ast.FileAST:
        ext: list[c_ast.Node] = list(self.records.values())
        ext += list(self.globals.values())
        ext += [_per_type_result(fd) if self.specializations.get(key, 0) > 1 else fd
                for key, fd in self.funcs.items()]
        ext += self._specializations_by_type()
        return c_ast.FileAST(ext)

    def _specializations_by_type(self) -> list[c_ast.FuncDef]:
        """Each explicit specialization of a function template without a generic body, as
        ``name__spec_S1_S2`` (the sizes of its type arguments), where those sizes tell the
        specializations apart: a call in a template that passes its type arguments' sizes
        (``dp<T2>()``) then runs the one its instantiation means, and no other type can
        instantiate the template."""
        out = []
        for (name, _), table in self.by_sizes.items():
            if name in self.generic or len(table) != self.specializations[(name, _)] or \
                    any(not sizes or min(sizes) <= 0 for sizes in table):
                continue
            for sizes, fd in table.items():
                spec = f"{name}__spec_{'_'.join(map(str, sizes))}"
                decl = copy.deepcopy(fd.decl)
                decl.name = spec
                t = decl.type.type
                while not isinstance(t, c_ast.TypeDecl):
                    t = t.type
                t.declname = spec
                out.append(c_ast.FuncDef(decl, fd.param_decls, fd.body, coord=fd.coord))
        return out

    # -- helpers ------------------------------------------------------------------------------

    def _coord(self, c: Any) -> Optional[Coord]:
        loc = c.location
        if loc.file is None:
            return None
        f = loc.file.name
        return Coord(self.shown if f == self.path else f, loc.line, loc.column)

    def _func_name(self, c: Any) -> str:
        if _is_member(c):
            # a class template's members are lowered once: `C<T>::C` and `C<float>::f` are
            # `C__C` and `C__f`
            parent = _class_name(c.semantic_parent) if c.semantic_parent is not None else ""
            name = c.spelling.replace("~", "dtor_")
            if c.kind in (cindex.CursorKind.CONSTRUCTOR, cindex.CursorKind.DESTRUCTOR):
                name = re.sub(r"<.*", "", name)
            return f"{parent}__{name}" if parent else name
        if c.kind in (cindex.CursorKind.FUNCTION_DECL, cindex.CursorKind.FUNCTION_TEMPLATE) \
                and c.spelling.startswith("operator") and \
                c.location.file is not None and not _is_system(c.location.file.name):
            # the program's own `operator<<(ostream&, const E&)` is one overload among the
            # library's: named by its parameter types, so `stream << "text"` in its body
            # stays the library's operator and is not a call of itself; a template's
            # (`const Matrix2D<T>&`) names its specializations too
            generic = cindex.conf.lib.clang_getSpecializedCursorTemplate(c) or c
            sig = "_".join(a.spelling for a in generic.type.argument_types())
            return c.spelling + "__" + re.sub(r"\W+", "_", sig)
        if c.kind == cindex.CursorKind.FUNCTION_DECL:
            return self._overloaded(c)
        return c.spelling

    def _overloaded(self, c: Any) -> str:
        """A free function's name; an overload of a name already taken by a function with
        another number of parameters is ``name__N`` (N parameters), so both are callable."""
        usr = c.canonical.get_usr() if c.canonical is not None else c.get_usr()
        if usr in self.overloads:
            return self.overloads[usr]
        n = len(list(c.get_arguments()))
        taken = self.arity.setdefault(c.spelling, n)
        name = c.spelling if taken == n else f"{c.spelling}__{n}"
        self.overloads[usr] = name
        return name

    # -- types --------------------------------------------------------------------------------

    def _type(self, t: Any, declname: Optional[str]) -> c_ast.Node:
        TK = cindex.TypeKind
        t = t.get_canonical()
        k = t.kind
        if k in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE) and _const_ref(t):
            return self._type(t.get_pointee(), declname)  # a const reference is a value
        if k == TK.POINTER or k in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE):
            inner = t.get_pointee()
            return c_ast.PtrDecl([], self._type(inner, declname))
        if k == TK.CONSTANTARRAY:
            return c_ast.ArrayDecl(self._type(t.element_type, declname),
                                   c_ast.Constant("int", str(t.element_count)), [])
        if k in (TK.INCOMPLETEARRAY, TK.VARIABLEARRAY, TK.DEPENDENTSIZEDARRAY):
            return c_ast.ArrayDecl(self._type(t.element_type, declname), None, [])
        if k in (TK.FUNCTIONPROTO, TK.FUNCTIONNOPROTO):
            return c_ast.FuncDecl(None, self._type(t.get_result(), declname))
        held = _smart_pointee(t)
        if held is not None:
            return c_ast.PtrDecl([], self._type(held, declname))
        fixed = _std_array(t)
        if fixed is not None:  # std::array<T, N>: T[N]
            return c_ast.ArrayDecl(self._type(fixed[0], declname),
                                   c_ast.Constant("int", str(fixed[1])), [])
        if k == TK.RECORD:
            name = self._record(t.get_declaration())
            return c_ast.TypeDecl(declname, [], None, c_ast.Struct(name, None))
        if k == TK.UNEXPOSED and t.spelling.startswith("type-parameter-"):
            return c_ast.TypeDecl(declname, [], None, c_ast.IdentifierType([TPARAM_TYPE]))
        return c_ast.TypeDecl(declname, [], None, c_ast.IdentifierType(self._base_names(t)))

    @staticmethod
    def _base_names(t: Any) -> list[str]:
        TK = cindex.TypeKind
        k = t.kind
        if k == TK.FLOAT:
            return ["float"]
        if k == TK.DOUBLE:
            return ["double"]
        if k in (TK.LONGDOUBLE, TK.FLOAT128):
            return ["long", "double"]
        if k == TK.VOID:
            return ["void"]
        if k == TK.BOOL:
            return ["_Bool"]
        if k in (TK.CHAR_S, TK.CHAR_U, TK.SCHAR, TK.UCHAR):
            return ["char"]
        if k in (TK.SHORT, TK.USHORT):
            return ["short"]
        if k in (TK.LONG, TK.ULONG, TK.LONGLONG, TK.ULONGLONG):
            return ["long"]
        if k == TK.HALF:
            return ["short"]
        if k == TK.VECTOR:
            return ["long"]
        return ["int"]

    def _record(self, decl: Any) -> str:
        """The struct name of a record declaration, its definition registered once."""
        key = decl.get_usr() or decl.hash
        key = str(key)
        if key in self.record_names:
            return self.record_names[key]
        base = decl.spelling if decl.spelling and " " not in decl.spelling else "anon"
        base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in base)
        name = base
        n = 1
        while name in self.records:
            name = f"{base}_{n}"
            n += 1
        self.record_names[key] = name
        self.records[name] = c_ast.Decl(None, [], [], [], [], c_ast.Struct(name, None), None,
                                        None)
        definition = decl.get_definition()
        dfile = definition.location.file.name if definition is not None and \
            definition.location.file is not None else None
        if dfile is None or (_is_system(dfile) and "/CL/" not in dfile) or \
                _qualified(definition)[0] == "cl":
            # library records (FILE, std::vector) and the C++ wrapper's classes stay opaque
            return name
        fields = [c_ast.Decl(f.spelling, [], [], [], [], self._type(f.type, f.spelling), None,
                             None) for f in self._fields(definition)]
        self.records[name] = c_ast.Decl(None, [], [], [], [], c_ast.Struct(name, fields), None,
                                        None)
        return name

    def _fields(self, definition: Any) -> list:
        """The data members of a class, its bases' first (as C++ lays them out)."""
        K = cindex.CursorKind
        out = []
        for f in definition.get_children():
            if f.kind == K.CXX_BASE_SPECIFIER:
                base = f.type.get_canonical().get_declaration()
                base = base.get_definition() if base is not None else None
                if base is not None and self._user_record(base):
                    out += self._fields(base)
            elif f.kind == K.FIELD_DECL:
                out.append(f)
        return out

    # -- declarations -------------------------------------------------------------------------

    def _funcdef(self, c: Any) -> Optional[c_ast.FuncDef]:
        K = cindex.CursorKind
        body = None
        for ch in c.get_children():
            if ch.kind == K.COMPOUND_STMT:
                body = ch
        if body is None:
            return None
        name = self._func_name(c)
        params = []
        if _is_member(c) and not c.is_static_method():
            rec = self._record(c.semantic_parent)
            params.append(c_ast.Decl("this", [], [], [], [], c_ast.PtrDecl(
                [], c_ast.TypeDecl("this", [], None, c_ast.Struct(rec, None))), None, None))
        plist = list(c.get_arguments()) if c.kind != K.FUNCTION_TEMPLATE else \
            [ch for ch in c.get_children() if ch.kind == K.PARM_DECL]
        for p in plist:
            pname = p.spelling or f"_arg{len(params)}"
            ptype = c_ast.TypeDecl(pname, [], None, c_ast.IdentifierType([PACK_TYPE])) \
                if _is_pack(p) else self._type(p.type, pname)
            params.append(c_ast.Decl(pname, [], [], [], [], ptype, None, None,
                                     coord=self._coord(p)))
        for hidden in _template_params(c):  # what a call's template arguments give the body
            # (`const long`: no argument of the call's, see host.packs.real_arity)
            params.append(c_ast.Decl(hidden, ["const"], [], [], [], c_ast.TypeDecl(
                hidden, ["const"], None, c_ast.IdentifierType(["long"])), None, None))
        ret = self._type(c.result_type, name) if c.kind not in (K.CONSTRUCTOR, K.DESTRUCTOR) \
            else c_ast.TypeDecl(name, [], None, c_ast.IdentifierType(["void"]))
        fdecl = c_ast.FuncDecl(c_ast.ParamList(params), ret)
        decl = c_ast.Decl(name, [], [], [], [], fdecl, None, None, coord=self._coord(c))
        outer, self.lowering = self.lowering, c
        try:
            stmt = self._stmt(body)
            if c.kind == K.CONSTRUCTOR:
                stmt.block_items = self._member_inits(c) + (stmt.block_items or [])
        except _Unsupported as err:
            raise PolyfuseError(f"unsupported host construct: {err.args[0]}",
                                *self._where(err.args[1])) from None
        finally:
            self.lowering = outer
        return c_ast.FuncDef(decl, None, stmt, coord=self._coord(c))

    def _member_inits(self, c: Any) -> list:
        """What a constructor does before its body, in C++'s order: the bases' constructors
        (``: Base(args)``, else their default constructors), then the members in declaration
        order, each from the initialiser list (``: rows(r)``) or its in-class initialiser."""
        K = cindex.CursorKind
        kids = list(c.get_children())
        named: dict[str, Any] = {}
        bases: dict[str, Any] = {}
        for i, ch in enumerate(kids[:-1]):
            nxt = kids[i + 1]
            if ch.kind == K.MEMBER_REF and nxt.kind.is_expression():
                named[ch.spelling] = nxt
            elif ch.kind == K.TYPE_REF and nxt.kind == K.CALL_EXPR and \
                    nxt.referenced is not None and nxt.referenced.kind == K.CONSTRUCTOR:
                bases[nxt.referenced.semantic_parent.get_usr()] = nxt
        return self._construction(c.semantic_parent, named, bases)

    def _construction(self, record: Any, named: dict[str, Any], bases: dict[str, Any]
                      ) -> list:
        """``this``'s bases and members initialised (see :meth:`_member_inits`)."""
        K = cindex.CursorKind
        this = c_ast.ID("this")
        out: list[c_ast.Node] = []
        for ch in record.get_children():
            if ch.kind == K.CXX_BASE_SPECIFIER:
                decl = ch.type.get_canonical().get_declaration()
                call = bases.get(decl.get_usr()) if decl is not None else None
                if call is not None:
                    stmt = self._ctor_call(call.referenced, this, list(call.get_arguments()),
                                           call)
                else:
                    stmt = self._default_ctor_call(decl, this, ch) if decl is not None \
                        else None
                if stmt is not None:
                    out.append(stmt)
            elif ch.kind == K.FIELD_DECL:
                target = c_ast.StructRef(this, "->", c_ast.ID(ch.spelling))
                if ch.spelling in named:
                    init = named[ch.spelling]
                    ops = _operands(init)
                    if init.kind == K.INIT_LIST_EXPR and len(ops) == 1 and \
                            ch.type.get_canonical().kind not in (cindex.TypeKind.RECORD,
                                                                 cindex.TypeKind.CONSTANTARRAY):
                        init = ops[0]  # `: n{size}` of a scalar member is `n = size`
                    value = self._expr(init)
                else:
                    # (after the name: `std::array<cl_mem, 3> bufs;` has no initialiser)
                    inits = [x for x in ch.get_children() if x.kind.is_expression() and
                             x.extent.start.offset > ch.location.offset]
                    if not inits:
                        continue
                    value = self._init(inits[-1], ch.type)
                    if value is None:
                        continue
                out.append(c_ast.Assignment("=", target, value, coord=self._coord(ch)))
        # members the constructor leaves to their own default constructor (the standard
        # containers and strings) start empty, before the explicit ones
        return _std_member_defaults(record, set(named), this, "->") + out

    def _user_record(self, decl: Any) -> bool:
        """A class the program defines (not the library's, not the C++ wrapper's)."""
        d = decl.get_definition() if decl is not None else None
        return d is not None and d.location.file is not None and \
            not _is_system(d.location.file.name) and \
            not _is_wrapper_file(d.location.file.name) and _qualified(d)[0] != "cl"

    def _ctor_call(self, ref: Any, obj: c_ast.Node, arg_cursors: list, at: Any
                   ) -> Optional[c_ast.Node]:
        """``T__T(obj, args)`` for a constructor of the user's: its definition, or the
        implicit one when it has work to do (bases, in-class initialisers); else None."""
        record = ref.semantic_parent
        if not self._user_record(record):
            return None
        if _written(ref):
            name = self._func_name(ref)
        elif ref.is_copy_constructor() or ref.is_move_constructor():
            return None
        else:
            name = self._implicit_ctor(record)
            if name is None:
                return None
        args = [self._expr(a) for a in arg_cursors]
        for i, p in enumerate(list(ref.get_arguments())[:len(args)]):
            if p.type.kind in (cindex.TypeKind.LVALUEREFERENCE,
                               cindex.TypeKind.RVALUEREFERENCE) and not _const_ref(p.type):
                args[i] = c_ast.UnaryOp("&", args[i])
        return c_ast.FuncCall(c_ast.ID(name), c_ast.ExprList([obj] + args),
                              coord=self._coord(at))

    def _default_ctor_call(self, record: Any, obj: c_ast.Node, at: Any
                           ) -> Optional[c_ast.Node]:
        """The default construction of a user's class object (None when it does nothing
        polyfuse tracks)."""
        K = cindex.CursorKind
        if not self._user_record(record):
            return None
        record = record.get_definition()
        ctors = [ch for ch in record.get_children() if ch.kind == K.CONSTRUCTOR]
        default = next((ch for ch in ctors if all(
            any(x.kind.is_expression() for x in p.get_children())
            for p in ch.get_arguments())), None)
        if default is not None:
            return self._ctor_call(default, obj, [], at)
        if ctors:
            return None
        name = self._implicit_ctor(record)
        return c_ast.FuncCall(c_ast.ID(name), c_ast.ExprList([obj]), coord=self._coord(at)) \
            if name is not None else None

    def _implicit_ctor(self, record: Any) -> Optional[str]:
        """The implicit default constructor of a user's class, lowered when it has work to do
        (a base's constructor, an in-class initialiser): its name, else None."""
        record = record.get_definition()
        key = str(record.get_usr() or record.hash)
        if key in self.implicit_ctors:
            return self.implicit_ctors[key]
        self.implicit_ctors[key] = None  # a class containing itself constructs nothing more
        body = self._construction(record, {}, {})
        if not body:
            return None
        rec = self._record(record)
        name = f"{rec}__{rec}"
        this = c_ast.Decl("this", [], [], [], [], c_ast.PtrDecl(
            [], c_ast.TypeDecl("this", [], None, c_ast.Struct(rec, None))), None, None)
        decl = c_ast.Decl(name, [], [], [], [], c_ast.FuncDecl(
            c_ast.ParamList([this]), c_ast.TypeDecl(name, [], None,
                                                   c_ast.IdentifierType(["void"]))),
            None, None, coord=self._coord(record))
        self.funcs.setdefault(name, c_ast.FuncDef(decl, None, c_ast.Compound(body),
                                                  coord=self._coord(record)))
        self.implicit_ctors[key] = name
        return name

    def _new(self, c: Any, kids: list) -> c_ast.Node:
        """``new T(args)`` / ``new T[n]`` of a user's class:
        ``__polyfuse_new((T *) 0, n, T__T(__polyfuse_this, args))``, the constructor run on
        each new object; anything else is fresh memory (``malloc``)."""
        K = cindex.CursorKind
        co = self._coord(c)
        exprs = [x for x in kids if x.kind.is_expression()]
        ctor = next((x for x in exprs if x.kind == K.CALL_EXPR and x.referenced is not None
                     and x.referenced.kind == K.CONSTRUCTOR), None)
        toks = [t.spelling for t in c.get_tokens()]
        array = "[" in toks and ("(" not in toks or toks.index("[") < toks.index("("))
        count = [self._expr(x) for x in exprs if x is not ctor][:1] if array else []
        record = c.type.get_pointee().get_canonical().get_declaration()
        this = c_ast.ID("__polyfuse_this")
        wrapper = None if array else self._wrapper_new(c, kids, exprs, ctor)
        if wrapper is not None:
            return wrapper
        if not self._user_record(record) or record.kind == K.CLASS_TEMPLATE:
            template = next((x.referenced for x in kids if x.kind == K.TEMPLATE_REF and
                             x.referenced is not None and
                             x.referenced.kind == K.CLASS_TEMPLATE), None)
            if array or template is None or not self._user_record(template):
                return c_ast.FuncCall(c_ast.ID("malloc"), c_ast.ExprList(count), coord=co)
            # `new C<T>(args)` in a template: the class template's constructor of that arity
            call = self._dependent_ctor_call(template, this, exprs, c)
            ptr = c_ast.Typename(None, [], None, c_ast.PtrDecl([], c_ast.TypeDecl(
                None, [], None, c_ast.Struct(self._record(template), None))))
            record = template
        else:
            call = self._ctor_call(ctor.referenced, this, list(ctor.get_arguments()), c) \
                if ctor is not None else None
            ptr = c_ast.Typename(None, [], None, self._type(c.type, None))
        args = [c_ast.Cast(ptr, c_ast.Constant("int", "0")),
                count[0] if count else c_ast.Constant("int", "1")]
        chain = c_ast.Constant("string", '"' + " ".join(_class_chain(record)) + '"')
        targs = self._class_args(record, kids)
        return c_ast.FuncCall(c_ast.ID("__polyfuse_new"), c_ast.ExprList(
            args + ([call] if call is not None else []) + targs + [chain]), coord=co)

    def _wrapper_new(self, c: Any, kids: list, exprs: list, ctor: Any
                     ) -> Optional[c_ast.Node]:
        """``new cl::KernelFunctor<...>(program, "k")`` (in a template too): a new object
        holding what the wrapper's constructor makes,
        ``__polyfuse_new((struct C *) 0, 1, *__polyfuse_this = __clhpp__C__ctor(args))``;
        None for another class."""
        K = cindex.CursorKind
        decl = c.type.get_pointee().get_canonical().get_declaration()
        if decl is None or decl.kind == K.NO_DECL_FOUND:
            decl = next((x.referenced for x in kids if x.kind == K.TEMPLATE_REF), None)
        name = clhpp_name(decl)
        if name is None or name.count("__") != 2:
            return None
        co = self._coord(c)
        made = self._wrapper_call(ctor.referenced, ctor, None, list(ctor.get_arguments())) \
            if ctor is not None else None
        if made is None:
            if len(exprs) == 1 and exprs[0].kind == K.UNEXPOSED_EXPR and \
                    len(_operands(exprs[0])) > 1:
                exprs = _operands(exprs[0])  # the arguments as one parenthesised list
            made = c_ast.FuncCall(c_ast.ID(name + "__ctor"), c_ast.ExprList(
                [self._expr(x) for x in exprs]), coord=co)
        ptr = c_ast.Typename(None, [], None, c_ast.PtrDecl([], c_ast.TypeDecl(
            None, [], None, c_ast.Struct(self._record(decl), None))))
        init = c_ast.Assignment("=", c_ast.UnaryOp("*", c_ast.ID("__polyfuse_this")), made)
        return c_ast.FuncCall(c_ast.ID("__polyfuse_new"), c_ast.ExprList(
            [c_ast.Cast(ptr, c_ast.Constant("int", "0")), c_ast.Constant("int", "1"), init]),
            coord=co)

    def _class_args(self, record: Any, kids: list) -> list[c_ast.Node]:
        """``__polyfuse_class_args("__sizeof_T", size, ...)``: what a class template's
        parameters are for an object of one of its specializations (its methods are lowered
        once and read ``sizeof(T)`` as ``__sizeof_T``); [] for a plain class.  ``kids``: the
        cursors that name the class (``new C<T>``'s template arguments in a template)."""
        K = cindex.CursorKind
        template = record if record.kind == K.CLASS_TEMPLATE else \
            cindex.conf.lib.clang_getSpecializedCursorTemplate(record)
        if template is None:
            return []
        params = [ch for ch in template.get_children()
                  if ch.kind in (K.TEMPLATE_TYPE_PARAMETER, K.TEMPLATE_NON_TYPE_PARAMETER)]
        if record.kind == K.CLASS_TEMPLATE:  # `new C<T>(...)` in a template: its type names
            values = []
            after = False
            for x in kids:
                if x.kind == K.TEMPLATE_REF:
                    after = True
                elif after and x.kind == K.TYPE_REF:
                    ref = x.referenced
                    size = x.type.get_size()
                    values.append(
                        c_ast.ID(f"__sizeof_{ref.spelling}")
                        if ref is not None and ref.kind == K.TEMPLATE_TYPE_PARAMETER else
                        c_ast.Constant("long", f"{size}L") if size > 0 else
                        c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList([])))
                elif after:
                    break
        else:
            values = []
            for i in range(max(record.type.get_num_template_arguments(), 0)):
                size = record.type.get_template_argument_type(i).get_size()
                values.append(c_ast.Constant("long", f"{size}L") if size > 0 else
                              c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList([])))
        out: list[c_ast.Node] = []
        for p, v in zip(params, values):
            if p.kind != K.TEMPLATE_TYPE_PARAMETER:
                break  # a value parameter: its value is not known here
            out += [c_ast.Constant("string", f'"__sizeof_{p.spelling}"'), v]
        if not out:
            return []
        return [c_ast.FuncCall(c_ast.ID("__polyfuse_class_args"), c_ast.ExprList(out))]

    def _dependent_ctor_call(self, template: Any, obj: c_ast.Node, exprs: list, at: Any
                             ) -> Optional[c_ast.Node]:
        """The constructor call of ``new C<T>(args)`` in a template (clang resolves none
        there): the class template's written constructor taking that many arguments."""
        K = cindex.CursorKind
        every = [ch for ch in template.get_definition().get_children()
                 if ch.kind == K.CONSTRUCTOR]
        ctors: list = []
        args = exprs
        for candidate in ([exprs, _operands(exprs[0])] if len(exprs) == 1 and
                          exprs[0].kind == K.UNEXPOSED_EXPR else [exprs]):
            # the arguments, or one parenthesised list of them
            ctors = [ch for ch in every if _takes(ch, len(candidate))]
            if len(ctors) == 1:
                args = candidate
                break
        if len(ctors) != 1:
            return None
        # declared in the class: its definition may be in another translation unit; the
        # default arguments (`Matrix2D(size_t rows, size_t cols, size_t pad = 16)`) are its
        values = [obj] + [self._expr(a) for a in args] + \
            [self._expr(_default_of(p)) for p in _params(ctors[0])[len(args):]]
        _by_reference(ctors[0], values, 1)
        return c_ast.FuncCall(c_ast.ID(self._func_name(ctors[0])), c_ast.ExprList(values),
                              coord=self._coord(at))

    def _where(self, c: Any) -> tuple[str, Optional[int]]:
        co = self._coord(c)
        return (co.file, co.line) if co is not None else (self.shown, None)

    def _var_decl(self, c: Any) -> c_ast.Decl:
        storage = []
        if c.storage_class == cindex.StorageClass.STATIC:
            storage.append("static")
        if c.storage_class == cindex.StorageClass.EXTERN:
            storage.append("extern")
        init = None
        ic = _lib.clang_Cursor_getVarDeclInitializer(c)
        if ic is not None and not ic.kind.is_invalid():
            init = self._dependent_vector(c, ic) or self._init(ic, c.type)
        return c_ast.Decl(c.spelling, [], [], storage, [], self._type(c.type, c.spelling), init,
                          None, coord=self._coord(c))

    def _user_ctor_call(self, c: Any) -> Optional[list]:
        """``T x(args);`` for a class of the user's: ``struct T x; T__T(&x, args);`` (a copy
        made by the implicit copy constructor is ``struct T x = y;``)."""
        K = cindex.CursorKind
        ic = _lib.clang_Cursor_getVarDeclInitializer(c)
        if ic is None or ic.kind.is_invalid():
            return None
        ic = self._strip(ic)
        ref = ic.referenced if ic.kind in (K.CALL_EXPR,) else None
        if ref is None or ref.kind != K.CONSTRUCTOR or clhpp_name(ref) is not None or \
                not self._user_record(ref.semantic_parent):
            return None
        decl = c_ast.Decl(c.spelling, [], [], [], [], self._type(c.type, c.spelling), None, None,
                          coord=self._coord(c))
        args = list(ic.get_arguments())
        if (ref.is_copy_constructor() or ref.is_move_constructor()) and len(args) == 1 and \
                not _written(ref):
            decl.init = self._expr(args[0])
            return [decl]
        call = self._ctor_call(ref, c_ast.UnaryOp("&", c_ast.ID(c.spelling)), args, c)
        # the standard members are empty before the constructor runs (an implicit one has
        # no body the model sees)
        defaults = _std_member_defaults(ref.semantic_parent, set(), c_ast.ID(c.spelling), ".")
        # the object's class, for the virtual calls made through a pointer to it
        made = c_ast.FuncCall(c_ast.ID("__polyfuse_object"), c_ast.ExprList([
            c_ast.UnaryOp("&", c_ast.ID(c.spelling)),
            *self._class_args(ref.semantic_parent, []),
            c_ast.Constant("string", '"' + " ".join(_class_chain(ref.semantic_parent)) + '"')]))
        return [decl, made] + defaults + ([call] if call is not None else [])

    def _dependent_object(self, c: Any) -> Optional[list]:
        """``C<T> x(args);`` in a template, ``C`` a class template of the user's (clang resolves
        no constructor there): ``struct C x;`` made by the class template's constructor of that
        arity, as :meth:`_user_ctor_call` does for a known class; else None."""
        K = cindex.CursorKind
        kids = list(c.get_children())
        template = next((x.referenced for x in kids if x.kind == K.TEMPLATE_REF), None)
        ic = _lib.clang_Cursor_getVarDeclInitializer(c)
        if template is None or template.kind != K.CLASS_TEMPLATE or \
                not self._user_record(template) or ic is None or ic.kind.is_invalid() or \
                c.type.get_canonical().kind != cindex.TypeKind.UNEXPOSED:
            return None
        obj = c_ast.UnaryOp("&", c_ast.ID(c.spelling))
        call = self._dependent_ctor_call(template, obj, [self._strip(ic)], c)
        if call is None:
            return None
        decl = c_ast.Decl(c.spelling, [], [], [], [], c_ast.TypeDecl(
            c.spelling, [], None, c_ast.Struct(self._record(template), None)), None, None,
            coord=self._coord(c))
        made = c_ast.FuncCall(c_ast.ID("__polyfuse_object"), c_ast.ExprList([
            obj, *self._class_args(template, kids),
            c_ast.Constant("string", '"' + " ".join(_class_chain(template)) + '"')]))
        return [decl, made, call]

    def _wrapper_call(self, ref: Any, c: Any, obj: Optional[c_ast.Node],
                      arg_cursors: list) -> Optional[c_ast.Node]:
        """A call into the C++ OpenCL wrapper (``cl::Buffer(...)``, ``queue.finish()``,
        ``k(cl::EnqueueArgs(...), a, b)``) as a call to ``__clhpp__Class__method`` with the
        object first, for :mod:`polyfuse.frontend.host.clhpp` to model at the API level; the
        header's template bodies are never interpreted."""
        name = clhpp_name(ref)
        if name is None:
            return None
        # default arguments the header supplies have no place in the user's file
        args = [self._expr(a) for a in arg_cursors if a.location.file is not None and
                not _is_wrapper_file(a.location.file.name)]
        co = self._coord(c)
        if name.endswith(("__getInfo", "__getWorkGroupInfo")):
            # `dev.getInfo<CL_DEVICE_TYPE>()`: the query, a template argument libclang does
            # not give, comes last by its name
            toks = [t.spelling for t in c.get_tokens()]
            at = next((k for k in range(len(toks) - 3) if toks[k] == ref.spelling and
                       toks[k + 1] == "<" and toks[k + 3] == ">"), None)
            if at is not None and toks[at + 2].isidentifier():
                args.append(c_ast.Constant("string", f'"{toks[at + 2]}"'))
        if name.endswith("__assign") and obj is not None and len(args) == 1:
            target = obj.expr if isinstance(obj, c_ast.UnaryOp) and obj.op == "&" else obj
            return c_ast.Assignment("=", target, args[0], coord=co)
        if obj is not None:
            if isinstance(obj, c_ast.UnaryOp) and obj.op == "&":
                obj = obj.expr
            args = [obj] + args
        return c_ast.FuncCall(c_ast.ID(name), c_ast.ExprList(args), coord=co)

    def _default_object(self, vector: Any, at: Any) -> Optional[c_ast.Node]:
        """``T()`` for the element type ``T`` of the ``std::vector`` class ``vector``: 0 for
        an integer or pointer (a handle), ``*__polyfuse_new((T *) 0, 1, T__T(__polyfuse_this),
        chain)`` for a user's class with a constructor to run; else None."""
        t = vector.type.get_canonical() if vector is not None else None
        if t is None or t.get_num_template_arguments() < 1:
            return None
        elem = t.get_template_argument_type(0).get_canonical()
        if _is_integral(elem) or elem.kind == cindex.TypeKind.POINTER:
            return c_ast.Constant("int", "0")
        record = elem.get_declaration()
        call = self._default_ctor_call(record, c_ast.ID("__polyfuse_this"), at) \
            if record is not None and record.kind in (cindex.CursorKind.STRUCT_DECL,
                                                      cindex.CursorKind.CLASS_DECL) else None
        if call is None:
            return None
        ptr = c_ast.Typename(None, [], None, c_ast.PtrDecl([], c_ast.TypeDecl(
            None, [], None, c_ast.Struct(self._record(record), None))))
        chain = c_ast.Constant("string", '"' + " ".join(_class_chain(record)) + '"')
        co = self._coord(at)
        return c_ast.UnaryOp("*", c_ast.FuncCall(c_ast.ID("__polyfuse_new"), c_ast.ExprList(
            [c_ast.Cast(ptr, c_ast.Constant("int", "0")), c_ast.Constant("int", "1"), call,
             chain]), coord=co), coord=co)

    def _wrapper_member_call(self, ref: Any, c: Any, kids: list, arg_cursors: list
                             ) -> c_ast.Node:
        """A wrapper call in any of its syntaxes: ``obj.m(...)``, ``ptr->m(...)``, an operator
        (``k(args...)``, ``a = b``: the object is the first operand), a constructor or a free
        function; default arguments the header supplies are left out."""
        K = cindex.CursorKind
        obj = None
        if ref.kind in (K.CXX_METHOD, K.CONVERSION_FUNCTION, K.FUNCTION_TEMPLATE) and \
                not ref.is_static_method() and ref.semantic_parent is not None and \
                ref.semantic_parent.kind != K.NAMESPACE:
            callee = self._strip(kids[0]) if kids else None
            if callee is not None and callee.kind == K.MEMBER_REF_EXPR and \
                    callee.spelling == ref.spelling:
                mk = _operands(callee)  # `Base<T>::f()` names its class: the object is this
                obj = self._expr(mk[0]) if mk else c_ast.ID("this")
                if mk and mk[0].type.get_canonical().kind == cindex.TypeKind.POINTER:
                    obj = c_ast.UnaryOp("*", obj)
            elif arg_cursors:  # an operator: the object is its first operand (`field = x`)
                obj = self._expr(arg_cursors[0])
                arg_cursors = arg_cursors[1:]
        return self._wrapper_call(ref, c, obj, arg_cursors) or c_ast.FuncCall(
            c_ast.ID("__polyfuse_opaque"), c_ast.ExprList([]), coord=self._coord(c))

    def _vector_ctor(self, ic: Any, ref: Any, vtype: Any) -> Optional[c_ast.Node]:
        """``std::vector<T> v(n[, x])``: ``__polyfuse_vector(n, sizeof(T))`` (its length sizes
        buffers created from its iterators)."""
        t = vtype.get_canonical()
        decl = t.get_declaration()
        if decl is None or decl.spelling != "vector" or \
                decl.semantic_parent is None or decl.semantic_parent.spelling not in ("std",
                                                                                     "__1"):
            return None
        elem = t.get_template_argument_type(0) if t.get_num_template_arguments() > 0 else None
        size = elem.get_canonical().get_size() if elem is not None else -1
        args = list(ic.get_arguments())
        if not args and size > 0:  # default-constructed: empty
            return c_ast.FuncCall(c_ast.ID("__polyfuse_vector"), c_ast.ExprList(
                [c_ast.Constant("int", "0"), c_ast.Constant("int", str(size))]),
                coord=self._coord(ic))
        if not args or not _is_integral(args[0].type) or size <= 0:
            return c_ast.FuncCall(c_ast.ID("__polyfuse_vector"), c_ast.ExprList([]),
                                  coord=self._coord(ic))
        exprs = [self._expr(args[0]), c_ast.Constant("int", str(size))]
        value = args[1] if len(args) > 1 and "allocator" not in args[1].type.spelling \
            else None
        if _is_scalar(elem) and value is None:  # value-initialised (`vector<bool> d(n)`: false)
            exprs.append(c_ast.Constant("int", "0"))
        elif _is_scalar(elem) and _is_scalar(self._strip(value).type):  # `v(n, x)`: x, x...
            exprs.append(self._expr(value))
        return c_ast.FuncCall(c_ast.ID("__polyfuse_vector"), c_ast.ExprList(exprs),
                              coord=self._coord(ic))

    def _dependent_vector(self, c: Any, ic: Any) -> Optional[c_ast.Node]:
        """``std::vector<T> v(n[, x])`` in a function template (a type clang does not resolve
        there): ``__polyfuse_vector(n, __sizeof_T)``, as :meth:`_vector_ctor` for a known
        element type, so that buffers made from its iterators have their size."""
        K = cindex.CursorKind
        t = c.type
        decl = t.get_declaration()
        if t.get_canonical().kind != cindex.TypeKind.UNEXPOSED or \
                decl.kind != K.CLASS_TEMPLATE or decl.spelling != "vector" or \
                decl.semantic_parent is None or \
                decl.semantic_parent.spelling not in ("std", "__1") or \
                t.get_num_template_arguments() < 1:
            return None
        elem = t.get_template_argument_type(0)
        size = elem.get_canonical().get_size()
        esize: Optional[c_ast.Node] = c_ast.Constant("int", str(size)) if size > 0 else None
        if esize is None:
            tparam = next((x.spelling for x in c.get_children() if x.kind == K.TYPE_REF and
                           x.referenced is not None and
                           x.referenced.kind == K.TEMPLATE_TYPE_PARAMETER and
                           x.spelling == elem.spelling), None)
            if tparam is None:
                return None
            esize = c_ast.ID(f"__sizeof_{tparam}")
        kids = [x for x in ic.get_children() if x.kind.is_expression()]
        args = kids if ic.kind == K.UNEXPOSED_EXPR and len(kids) > 1 else [self._strip(ic)]
        if not _is_integral(args[0].type):
            return None
        return c_ast.FuncCall(c_ast.ID("__polyfuse_vector"), c_ast.ExprList(
            [self._expr(args[0]), esize]), coord=self._coord(ic))

    def _init(self, ic: Any, vtype: Any) -> Optional[c_ast.Node]:
        K = cindex.CursorKind
        TK = cindex.TypeKind
        ic = self._strip(ic)
        ref = ic.referenced if ic.kind == K.CALL_EXPR else None
        if ref is not None and ref.kind in (K.CONSTRUCTOR, K.FUNCTION_DECL, K.CXX_METHOD) and \
                not (ref.kind == K.CXX_METHOD and not ref.is_static_method()):
            # (a method's object is the callee's: `auto t = dev.getInfo<...>()` below)
            wrapped = self._wrapper_call(ref, ic, None, list(ic.get_arguments()))
            if wrapped is not None:
                return wrapped
        if ref is not None and ref.kind == K.CONSTRUCTOR and \
                vtype.get_canonical().kind == TK.RECORD and _smart_pointee(vtype) is None:
            vec = self._vector_ctor(ic, ref, vtype)
            if vec is not None:
                return vec
            # a C++ constructor call: an object polyfuse does not track beyond its arguments
            args = [self._expr(a) for a in ic.get_arguments()]
            return c_ast.FuncCall(c_ast.ID(f"{ic.spelling}__ctor"), c_ast.ExprList(args),
                                  coord=self._coord(ic))
        node = self._expr(ic)
        if vtype.kind in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE):
            node = c_ast.UnaryOp("&", node)
        return node

    # -- statements ---------------------------------------------------------------------------

    def _stmt(self, c: Any) -> c_ast.Node:
        K = cindex.CursorKind
        k = c.kind
        co = self._coord(c)
        kids = list(c.get_children())
        if k == K.COMPOUND_STMT:
            items: list[c_ast.Node] = []
            for ch in kids:
                s = self._stmt(ch)
                if isinstance(s, c_ast.DeclList):
                    items.extend(s.decls)
                else:
                    items.append(s)
            return c_ast.Compound(items, coord=co)
        if k == K.DECL_STMT:
            decls = []
            for ch in kids:
                if ch.kind == K.VAR_DECL:
                    ctor = self._user_ctor_call(ch) or self._dependent_object(ch)
                    if ctor is not None:
                        decls.extend(ctor)
                        continue
                    decls.append(self._var_decl(ch))
                elif ch.kind in (K.STRUCT_DECL, K.UNION_DECL, K.ENUM_DECL, K.TYPEDEF_DECL,
                                 K.CLASS_DECL, K.TYPE_ALIAS_DECL):
                    continue
            if len(decls) == 1:
                return decls[0]
            if not decls:
                return c_ast.EmptyStatement(coord=co)
            return c_ast.DeclList(decls, coord=co)
        if k == K.IF_STMT:
            cond = self._cond(kids[0])
            then = self._stmt(kids[1])
            other = self._stmt(kids[2]) if len(kids) > 2 else None
            return c_ast.If(cond, then, other, coord=co)
        if k == K.FOR_STMT:
            return self._for(c, kids)
        if k == K.WHILE_STMT:
            return c_ast.While(self._cond(kids[0]), self._stmt(kids[1]), coord=co)
        if k == K.DO_STMT:
            return c_ast.DoWhile(self._expr(kids[1]), self._stmt(kids[0]), coord=co)
        if k == K.SWITCH_STMT:
            return self._switch(c, kids)
        if k in (K.CASE_STMT, K.DEFAULT_STMT):
            return self._case_flat(c)[0]
        if k == K.RETURN_STMT:
            return c_ast.Return(self._expr(kids[0]) if kids else None, coord=co)
        if k == K.BREAK_STMT:
            return c_ast.Break(coord=co)
        if k == K.CONTINUE_STMT:
            return c_ast.Continue(coord=co)
        if k == K.GOTO_STMT:
            label = next((ch.spelling for ch in kids if ch.kind == K.LABEL_REF), "")
            return c_ast.Goto(label, coord=co)
        if k == K.LABEL_STMT:
            return c_ast.Label(c.spelling, self._stmt(kids[0]) if kids else
                               c_ast.EmptyStatement(), coord=co)
        if k == K.NULL_STMT:
            return c_ast.EmptyStatement(coord=co)
        if k in (K.ASM_STMT, K.MS_ASM_STMT):
            return c_ast.EmptyStatement(coord=co)
        if k == K.CXX_TRY_STMT:
            return self._stmt(kids[0])
        if k == K.CXX_FOR_RANGE_STMT:
            loop = self._handle_range_for(c, kids)
            if loop is not None:
                return loop
            # host-only iteration over a container: its body runs an unknown number of times
            body = self._stmt(kids[-1])
            return c_ast.While(c_ast.FuncCall(c_ast.ID("__polyfuse_more"), c_ast.ExprList([])),
                               body, coord=co)
        return self._expr(c)

    def _handle_range_for(self, c: Any, kids: list) -> Optional[c_ast.Node]:
        """``for (auto d : devices)`` over a ``std::vector`` of OpenCL objects (platforms,
        devices, kernels, buffers): a counted loop over its elements, so that what the body
        launches runs once per element the vector is known to hold."""
        K = cindex.CursorKind
        var = kids[0] if kids and kids[0].kind == K.VAR_DECL else None
        rng = self._strip(kids[1]) if len(kids) == 3 else None
        if var is None or rng is None:
            return None
        t = rng.type.get_canonical()
        decl = t.get_declaration()
        if decl is None or decl.spelling != "vector" or t.get_num_template_arguments() < 1 or \
                decl.semantic_parent is None or decl.semantic_parent.spelling not in ("std",
                                                                                     "__1"):
            return None
        elem = t.get_template_argument_type(0).get_canonical()
        pointee = elem.get_pointee().get_canonical() if elem.kind == cindex.TypeKind.POINTER \
            else None
        if clhpp_name(elem.get_declaration()) is None and not (
                pointee is not None and pointee.get_declaration().spelling.startswith("_cl_")):
            return None
        co = self._coord(c)
        k = f"__polyfuse_k{co.line if co is not None else 0}_{var.spelling}"
        vec = self._expr(rng)  # (by value: the loop only reads the vector)
        # (names no class of the program's can have: `prk::vector` has a `size` of its own)
        item = c_ast.FuncCall(c_ast.ID("__polyfuse_vector_item"),
                              c_ast.ExprList([vec, c_ast.ID(k)]), coord=co)
        value_type = var.type.get_pointee() if var.type.kind in (
            cindex.TypeKind.LVALUEREFERENCE, cindex.TypeKind.RVALUEREFERENCE) else var.type
        elem_decl = c_ast.Decl(var.spelling, [], [], [], [], self._type(value_type, var.spelling),
                               item, None, coord=self._coord(var))
        body = c_ast.Compound([elem_decl, self._stmt(kids[-1])], coord=co)
        index = c_ast.Decl(k, [], [], [], [], c_ast.TypeDecl(k, [], None,
                                                             c_ast.IdentifierType(["long"])),
                           c_ast.Constant("int", "0"), None, coord=co)
        size = c_ast.FuncCall(c_ast.ID("__polyfuse_vector_size"), c_ast.ExprList([vec]),
                              coord=co)
        return c_ast.For(c_ast.DeclList([index]), c_ast.BinaryOp("<", c_ast.ID(k), size),
                         c_ast.UnaryOp("p++", c_ast.ID(k)), body, coord=co)

    def _cond(self, c: Any) -> c_ast.Node:
        K = cindex.CursorKind
        if c.kind == K.VAR_DECL:  # `if (T x = e)`
            raise _Unsupported("a declaration as a condition", c)
        return self._expr(c)

    def _for(self, c: Any, kids: list) -> c_ast.Node:
        """Which of init/cond/inc are present is told by the ``;`` tokens of the header."""
        semis: list[int] = []
        rparen = None
        depth = 0
        started = False
        for tok in c.get_tokens():
            s = tok.spelling
            if s == "(":
                depth += 1
                started = True
                continue
            if not started:
                continue
            if s == ")":
                depth -= 1
                if depth == 0:
                    rparen = tok.extent.start.offset
                    break
            elif s == ";" and depth == 1:
                semis.append(tok.extent.start.offset)
        parts: dict[str, Any] = {}
        if len(semis) == 2 and rparen is not None:
            for ch in kids:
                off = ch.extent.start.offset
                if off < semis[0]:
                    parts["init"] = ch
                elif off < semis[1]:
                    parts["cond"] = ch
                elif off < rparen:
                    parts["next"] = ch
                else:
                    parts["body"] = ch
        elif len(kids) == 4:
            parts = dict(zip(("init", "cond", "next", "body"), kids))
        else:
            raise _Unsupported("a for loop whose header polyfuse cannot read (macro?)", c)
        init = parts.get("init")
        init_n = None
        if init is not None:
            init_n = self._stmt(init)
            if isinstance(init_n, c_ast.Decl):
                init_n = c_ast.DeclList([init_n], coord=init_n.coord)
        cond = self._expr(parts["cond"]) if "cond" in parts else None
        nxt = self._expr(parts["next"]) if "next" in parts else None
        body = self._stmt(parts["body"]) if "body" in parts else c_ast.EmptyStatement()
        return c_ast.For(init_n, cond, nxt, body, coord=self._coord(c))

    def _switch(self, c: Any, kids: list) -> c_ast.Node:
        K = cindex.CursorKind
        cond = self._expr(kids[0])
        body = kids[-1]
        items: list[c_ast.Node] = []
        stmts = list(body.get_children()) if body.kind == K.COMPOUND_STMT else [body]
        for s in stmts:
            if s.kind in (K.CASE_STMT, K.DEFAULT_STMT):
                items.extend(self._case_flat(s))
            elif items and isinstance(items[-1], (c_ast.Case, c_ast.Default)):
                items[-1].stmts.append(self._stmt(s))
            else:
                items.append(self._stmt(s))
        return c_ast.Switch(cond, c_ast.Compound(items), coord=self._coord(c))

    def _case_flat(self, c: Any) -> list[c_ast.Node]:
        """clang nests ``case 1: case 2: s``; pycparser lists the cases, statements after."""
        K = cindex.CursorKind
        out: list[c_ast.Node] = []
        while c.kind in (K.CASE_STMT, K.DEFAULT_STMT):
            kids = list(c.get_children())
            if c.kind == K.CASE_STMT:
                out.append(c_ast.Case(self._expr(kids[0]), [], coord=self._coord(c)))
            else:
                out.append(c_ast.Default([], coord=self._coord(c)))
            c = kids[-1]
        out[-1].stmts.append(self._stmt(c))
        return out

    # -- expressions --------------------------------------------------------------------------

    @staticmethod
    def _strip(c: Any) -> Any:
        K = cindex.CursorKind
        while c.kind in (K.UNEXPOSED_EXPR, K.PAREN_EXPR) or \
                c.kind.name in ("CXX_FUNCTIONAL_CAST_EXPR",):
            kids = list(c.get_children())
            if len(kids) != 1:
                break
            c = kids[0]
        return c

    def _const(self, c: Any) -> Optional[c_ast.Node]:
        ev = _evaluate(c)
        if ev is None:
            return None
        kind, v = ev
        co = self._coord(c)
        if kind == _EVAL_INT:
            big = c.type.get_canonical().get_size() == 8
            return c_ast.Constant("int", f"{v}L" if big else str(v), coord=co)
        if kind == _EVAL_FLOAT:
            if c.type.get_canonical().kind == cindex.TypeKind.FLOAT:
                return c_ast.Constant("float", repr(v) + "f", coord=co)
            return c_ast.Constant("double", repr(v), coord=co)
        return c_ast.Constant("string", _c_string(v), coord=co)

    def _expr(self, c: Any) -> c_ast.Node:
        K = cindex.CursorKind
        TK = cindex.TypeKind
        if c.kind == K.UNEXPOSED_EXPR and _is_comma_fold(c):
            # `(k.setArg(i++, args), ...)`: the pattern once per element, in order
            pattern = next(x for x in c.get_children() if x.kind.is_expression())
            return c_ast.FuncCall(c_ast.ID("__polyfuse_expand"), c_ast.ExprList(
                [self._expr(pattern)]), coord=self._coord(c))
        c = self._strip(c)
        k = c.kind
        co = self._coord(c)
        kids = list(c.get_children())
        if k == K.STRING_LITERAL:
            text = c.spelling
            return c_ast.Constant("string", text[text.index('"'):] if '"' in text else '""',
                                  coord=co)
        if k in (K.INTEGER_LITERAL, K.FLOATING_LITERAL, K.CHARACTER_LITERAL, K.CXX_UNARY_EXPR):
            node = self._const(c)
            if node is not None:
                return node
            if k == K.CXX_UNARY_EXPR:
                tparam = next((x.spelling for x in kids if x.kind == K.TYPE_REF and
                               x.referenced is not None and
                               x.referenced.kind == K.TEMPLATE_TYPE_PARAMETER), None)
                if tparam is not None and len(kids) == 1 and \
                        next(c.get_tokens()).spelling == "sizeof":
                    return c_ast.ID(f"__sizeof_{tparam}", coord=co)  # given by the call
                return c_ast.FuncCall(c_ast.ID("__polyfuse_sizeof"), c_ast.ExprList([]),
                                      coord=co)
            raise _Unsupported(f"a literal clang cannot evaluate ({k.name})", c)
        if k == K.CXX_BOOL_LITERAL_EXPR:
            ev = _evaluate(c)
            return c_ast.Constant("int", str(ev[1] if ev else 0), coord=co)
        if k in (K.CXX_NULL_PTR_LITERAL_EXPR, K.GNU_NULL_EXPR):
            return c_ast.Constant("int", "0", coord=co)
        if k == K.DECL_REF_EXPR:
            ref = c.referenced
            if ref is not None and ref.kind == K.ENUM_CONSTANT_DECL:
                return c_ast.Constant("int", str(ref.enum_value), coord=co)
            if ref is not None and ref.kind == K.VAR_DECL:
                wrapped = clhpp_name(ref)  # cl::NullRange and the wrapper's other constants
                if wrapped is not None:
                    return c_ast.FuncCall(c_ast.ID(wrapped), c_ast.ExprList([]), coord=co)
                const = _class_constant(c, ref)
                if const is not None:
                    return c_ast.Constant("int", str(const), coord=co)
                static = self._static_member(ref, co)
                if static is not None:
                    return static
            node: c_ast.Node = c_ast.ID(c.spelling, coord=co)
            if ref is not None and ref.kind in (K.VAR_DECL, K.PARM_DECL) and \
                    ref.type.kind in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE) and \
                    not (ref.kind == K.PARM_DECL and _const_ref(ref.type)):
                node = c_ast.UnaryOp("*", node, coord=co)
            return node
        if k == K.MEMBER_REF_EXPR:
            ref = c.referenced
            static = self._static_member(ref, co) if ref is not None and \
                ref.kind == K.VAR_DECL else None
            if static is not None:  # `this->count` of a static member: the class's object
                return static
            kids = _operands(c)
            if not kids:  # implicit this->field inside a method (or `Base::field`)
                base: c_ast.Node = c_ast.ID("this", coord=co)
                arrow = "->"
            else:
                b = kids[0]
                base = self._expr(b)
                bt = b.type.get_canonical().kind
                arrow = "->" if bt == TK.POINTER else "."
            field = c.spelling
            if not field:  # `this->n` of a base that depends on a template parameter
                field = next((t.spelling for t in reversed(list(c.get_tokens()))), "")
                if not field.isidentifier():
                    raise _Unsupported("a member of a type that depends on a template "
                                       "parameter", c)
                toks = [t.spelling for t in c.get_tokens()]
                arrow = "->" if len(toks) > 1 and toks[-2] == "->" else arrow
            return c_ast.StructRef(base, arrow, c_ast.ID(field), coord=co)
        if k == K.ARRAY_SUBSCRIPT_EXPR:
            return c_ast.ArrayRef(self._expr(kids[0]), self._expr(kids[1]), coord=co)
        if k == K.CALL_EXPR:
            return _bit_reference(self._call(c, kids))
        if k in (K.CSTYLE_CAST_EXPR, K.CXX_STATIC_CAST_EXPR, K.CXX_REINTERPRET_CAST_EXPR,
                 K.CXX_CONST_CAST_EXPR, K.CXX_FUNCTIONAL_CAST_EXPR):
            inner = [ch for ch in kids if ch.kind.is_expression()]
            wrapper = clhpp_name(c.type.get_canonical().get_declaration()) \
                if k == K.CXX_FUNCTIONAL_CAST_EXPR else None
            if wrapper is not None and wrapper.count("__") == 2:
                # `cl::NDRange(n)` in a template, `n` of a type that depends on it
                return c_ast.FuncCall(c_ast.ID(wrapper + "__ctor"), c_ast.ExprList(
                    [self._expr(x) for x in inner]), coord=co)
            to = c_ast.Typename(None, [], None, self._type(c.type, None))
            if inner and inner[-1].kind == K.INIT_LIST_EXPR:
                # `Benchmark{.id = Copy, ...}`: an aggregate made in place
                return c_ast.CompoundLiteral(to, self._expr(inner[-1]), [], coord=co)
            return c_ast.Cast(to, self._expr(inner[-1]), coord=co)
        if k == K.UNARY_OPERATOR:
            op = _UNOPS.get(_lib.clang_getCursorUnaryOperatorKind(c))
            if op is None:
                raise _Unsupported("an unary operator polyfuse does not model", c)
            if op == "":
                return self._expr(kids[0])
            operand = self._expr(kids[0])
            if op == "&" and _string_buffer(operand):
                return operand.args.exprs[0]  # `&s[0]`: the string's characters
            if op == "&":
                at = _vector_element_address(operand)
                if at is not None:
                    return at
            return c_ast.UnaryOp(op, operand, coord=co)
        if k in (K.BINARY_OPERATOR, K.COMPOUND_ASSIGNMENT_OPERATOR):
            op = _BINOPS.get(_lib.clang_getCursorBinaryOperatorKind(c))
            left, right = self._expr(kids[0]), self._expr(kids[1])
            if op is None or op in (".*", "->*", "<=>"):
                raise _Unsupported("a binary operator polyfuse does not model", c)
            if op.endswith("=") and op not in ("==", "!=", "<=", ">="):
                cls, _, meth = left.name.name.partition("__") if isinstance(
                    left, c_ast.FuncCall) and isinstance(left.name, c_ast.ID) else ("", "", "")
                if cls in _CONTAINERS and meth in ("operator[]", "at"):
                    # `v[k] = x` stores into the container, which a call cannot be assigned
                    value = right if op == "=" else c_ast.BinaryOp(op[:-1], left, right)
                    return c_ast.FuncCall(c_ast.ID(f"{cls}__set"), c_ast.ExprList(
                        list(left.args.exprs) + [value]), coord=co)
                return c_ast.Assignment(op, left, right, coord=co)
            if op == ",":
                return c_ast.ExprList([left, right], coord=co)
            if op == "<<" and _dependent_stream_output(c):
                # `ss << x` in a template, `x`'s type a template parameter: the stream's
                if not isinstance(left, c_ast.FuncCall):
                    left = c_ast.UnaryOp("&", left)
                return c_ast.FuncCall(c_ast.ID("basic_ostream__operator<<"),
                                      c_ast.ExprList([left, right]), coord=co)
            return c_ast.BinaryOp(op, left, right, coord=co)
        if k == K.CONDITIONAL_OPERATOR:
            return c_ast.TernaryOp(*(self._expr(x) for x in kids[-3:]), coord=co)
        if k == K.INIT_LIST_EXPR:
            return c_ast.InitList([self._init_item(x) for x in kids], coord=co)
        if k == K.PACK_EXPANSION_EXPR and len(kids) == 1:
            # `f(args...)`: the pattern once per element of the packs it names
            return c_ast.FuncCall(c_ast.ID("__polyfuse_expand"), c_ast.ExprList(
                [self._expr(kids[0])]), coord=co)
        if k == K.SIZE_OF_PACK_EXPR:
            return self._pack_size(c, co)
        if k == K.CXX_NEW_EXPR:
            return self._new(c, kids)
        if k == K.CXX_DELETE_EXPR:
            return c_ast.FuncCall(c_ast.ID("free"), c_ast.ExprList(
                [self._expr(x) for x in kids]), coord=co)
        if k == K.CXX_THIS_EXPR:
            return c_ast.ID("this", coord=co)
        if k == K.COMPOUND_LITERAL_EXPR:
            init = next((x for x in kids if x.kind == K.INIT_LIST_EXPR), None)
            if init is None:
                raise _Unsupported("a compound literal without initializer", c)
            return c_ast.CompoundLiteral(c_ast.Typename(None, [], None, self._type(c.type, None)),
                                         self._expr(init), [], coord=co)
        if k == K.CXX_THROW_EXPR:
            return c_ast.FuncCall(c_ast.ID("abort"), c_ast.ExprList([]), coord=co)
        if k.name == "LAMBDA_EXPR":
            # a host-only helper (a comparison, a predicate) is an opaque function value; one
            # that reaches OpenCL or the user's functions is lowered to a function that runs
            # where the lambda is called, seeing the variables of the scope that made it
            for d in c.walk_preorder():
                if d.kind != K.CALL_EXPR:
                    continue
                ref = d.referenced
                if ref is None or ref.location.file is not None and (
                        ref.spelling.startswith("cl") or clhpp_name(ref) is not None or
                        not _is_system(ref.location.file.name) or _is_lambda_call(ref)):
                    return self._lambda(c)  # (a call in a template resolves only there)
            if _stores_through_parameter(c):
                # `[](const char *s, size_t *out) { *out = strtoull(s, ...); }`: what it
                # stores (an option's value) is followed where it runs, if it can be lowered
                try:
                    return self._lambda(c)
                except _Unsupported:
                    pass
            return c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList([]), coord=co)
        if k.name == "STMT_EXPR":
            raise _Unsupported(f"{k.name.lower()}", c)
        if kids and k == K.UNEXPOSED_EXPR:
            # a C++ expression libclang does not expose (temporaries, construct expressions):
            # an opaque value computed from its operands
            args = [self._expr(x) for x in kids if x.kind.is_expression()]
            return c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList(args), coord=co)
        node = self._const(c) if k.is_expression() else None
        if node is not None:
            return node
        if k.is_expression() or k == K.UNEXPOSED_EXPR:
            return c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList([]), coord=co)
        raise _Unsupported(f"{k.name.lower()}", c)

    def _pack_size(self, c: Any, co: Optional[Coord]) -> c_ast.Node:
        """``sizeof...(args)``, or ``sizeof...(Args)`` of the type pack of the function's
        parameter pack: ``__polyfuse_pack_size(args)``; opaque for a pack no parameter
        holds."""
        toks = [t.spelling for t in c.get_tokens()]
        name = toks[-2] if len(toks) >= 5 and toks[-1] == ")" else ""
        params = [p for p in _params(self.lowering) if _is_pack(p)] \
            if self.lowering is not None else []
        held = next((p.spelling for p in params if p.spelling == name or
                     p.type.spelling.rstrip(".") == name), None)
        if held is None:
            return c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList([]), coord=co)
        return c_ast.FuncCall(c_ast.ID("__polyfuse_pack_size"), c_ast.ExprList(
            [c_ast.ID(held)]), coord=co)

    def _init_item(self, c: Any) -> c_ast.Node:
        """An initializer list element, with its designator (``.f =``, ``[i] =``) if any."""
        K = cindex.CursorKind
        kids = list(c.get_children())
        if c.kind == K.UNEXPOSED_EXPR and len(kids) == 2:
            first = next(iter(c.get_tokens()), None)
            if first is not None and first.spelling == "." and kids[0].kind == K.MEMBER_REF:
                return c_ast.NamedInitializer([c_ast.ID(kids[0].spelling)],
                                              self._expr(kids[1]))
            if first is not None and first.spelling == "[":
                return c_ast.NamedInitializer([self._expr(kids[0])], self._expr(kids[1]))
        return self._expr(c)

    def _lambda(self, c: Any) -> c_ast.Node:
        """A lambda as a function of the program (``__lambda_LINE_COL``) and the value that
        names it; its captures are the variables in scope where it is made (by reference)."""
        K = cindex.CursorKind
        co = self._coord(c)
        name = f"__lambda_{c.location.line}_{c.location.column}"
        body = next((ch for ch in c.get_children() if ch.kind == K.COMPOUND_STMT), None)
        if body is None:
            raise _Unsupported("a lambda without a body", c)
        params = [c_ast.Decl(p.spelling or f"_arg{i}", [], [], [], [],
                             self._type(p.type, p.spelling or f"_arg{i}"), None, None,
                             coord=self._coord(p))
                  for i, p in enumerate(ch for ch in c.get_children()
                                        if ch.kind == K.PARM_DECL)]
        ret = c_ast.TypeDecl(name, [], None, c_ast.IdentifierType(["void"]))
        decl = c_ast.Decl(name, [], [], [], [], c_ast.FuncDecl(c_ast.ParamList(params), ret),
                          None, None, coord=co)
        self.funcs[name] = c_ast.FuncDef(decl, None, self._stmt(body), coord=co)
        return c_ast.FuncCall(c_ast.ID("__polyfuse_lambda"), c_ast.ExprList(
            [c_ast.Constant("string", f'"{name}"')]), coord=co)

    def _static_member(self, ref: Any, co: Optional[Coord]) -> Optional[c_ast.Node]:
        """A static data member of a user's class: its global ``C__x``; of a class template,
        the object of the specialization the class arguments name (``C<float>::x`` and
        ``x`` in ``C<T>``'s methods, whose ``__sizeof_T`` the object gives), as
        ``*__polyfuse_static("C__x", __polyfuse_class_args("__sizeof_T", size))``, which
        the interpreter resolves to ``C__x__spec_4`` or an object of its own made from the
        generic definition; None for anything else."""
        K = cindex.CursorKind
        parent = ref.semantic_parent
        if parent is None or parent.kind.name not in _CLASS_KINDS or \
                not self._user_record(parent):
            return None  # (a variable whose parent is a class is one of its static members)
        name = f"{_class_name(parent)}__{ref.spelling}"
        template = parent if parent.kind == K.CLASS_TEMPLATE else \
            cindex.conf.lib.clang_getSpecializedCursorTemplate(parent)
        if template is None:
            return c_ast.ID(name, coord=co)
        params = [ch for ch in template.get_children()
                  if ch.kind in (K.TEMPLATE_TYPE_PARAMETER, K.TEMPLATE_NON_TYPE_PARAMETER)]
        if parent.kind == K.CLASS_TEMPLATE:
            sizes: list[c_ast.Node] = [c_ast.ID(f"__sizeof_{p.spelling}") for p in params]
        else:
            sizes = [c_ast.Constant("long", f"{s}L") for s in _class_sizes(parent) or ()]
        if any(p.kind != K.TEMPLATE_TYPE_PARAMETER for p in params) or \
                len(sizes) != len(params):
            why = (f"the static data member '{_class_name(parent)}::{ref.spelling}' of a class "
                   "template with a value parameter (polyfuse tells specializations apart by "
                   "the sizes of their type arguments only)")
            return c_ast.FuncCall(c_ast.ID("__polyfuse_refuse"), c_ast.ExprList(
                [c_ast.Constant("string", f'"{why}"')]), coord=co)
        spec = [x for p, v in zip(params, sizes)
                for x in (c_ast.Constant("string", f'"__sizeof_{p.spelling}"'), v)]
        call = c_ast.FuncCall(c_ast.ID("__polyfuse_static"), c_ast.ExprList([
            c_ast.Constant("string", f'"{name}"'),
            c_ast.FuncCall(c_ast.ID("__polyfuse_class_args"), c_ast.ExprList(spec))]),
            coord=co)
        if ref.type.get_canonical().kind == cindex.TypeKind.CONSTANTARRAY:
            return call  # an array: the pointer it decays to
        return c_ast.UnaryOp("*", call, coord=co)

    def _dependent_member_call(self, c: Any, callee: Any, co: Optional[Coord]) -> c_ast.Node:
        """``obj->f()`` in a template, on an object whose class depends on a template
        parameter: a method of the user's classes (which may launch kernels) is refused if
        it runs; a library object's method is an opaque value."""
        obj = next((x for x in callee.get_children() if x.kind.is_expression()), None)
        words = [t.spelling for t in callee.get_tokens()]
        method = words[-1] if words else "?"
        held = obj.type.spelling if obj is not None else ""
        wrapper = _wrapper_class(obj.type) if obj is not None else None
        if wrapper is not None and method.isidentifier():
            # `k.setArg(i, value)` on a wrapper object, `value`'s type a template parameter
            target = self._expr(obj)
            if obj.type.get_canonical().kind == cindex.TypeKind.POINTER:
                target = c_ast.UnaryOp("*", target)
            return c_ast.FuncCall(c_ast.ID(f"{wrapper}__{method}"), c_ast.ExprList(
                [target] + [self._expr(x) for x in c.get_arguments()]), coord=co)
        if obj is None or not _user_type(obj.type, 2):
            args = [self._expr(x) for x in c.get_arguments()]
            return c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList(args), coord=co)
        why = (f"a call of '{method}' on a {held} (its class depends on a template parameter; "
               "polyfuse does not instantiate templates)")
        static = _type_class(obj.type)
        if static is not None:
            # a method of the user's class (template): found by name from the object's class,
            # its dynamic class where `new` made it, else the class its type names
            target = self._expr(obj)
            if "->" not in words:
                target = c_ast.UnaryOp("&", target)
            args = [self._expr(x) for x in c.get_arguments()]
            decl = _find_method(static, method, len(args))
            if decl is not None:
                _by_reference(decl, args, 0)
            return _dispatch(method, _class_chain(static), target, args, co, why)
        held_decl = _std_container(obj.type)
        if held_decl is not None:
            # `errors.size()` on a `std::vector<Info<T>>`: the container's method, as
            # `v.size()` is lowered where clang resolves it
            target = self._expr(obj)
            if "->" not in words:
                target = c_ast.UnaryOp("&", target)
            args = [self._expr(x) for x in c.get_arguments()]
            return c_ast.FuncCall(c_ast.ID(f"{held_decl}__{method}"),
                                  c_ast.ExprList([target, *args]), coord=co)
        return c_ast.FuncCall(c_ast.ID("__polyfuse_refuse"), c_ast.ExprList(
            [c_ast.Constant("string", '"' + why.replace('"', "'") + '"')]), coord=co)

    def _dependent_static_call(self, callee: Any, args: list[c_ast.Node], co: Optional[Coord]
                               ) -> Optional[c_ast.Node]:
        """``C<T>::f(x)`` in a template, ``f`` a static method of the user's class template
        ``C`` (clang resolves none there): ``C__f(x)``, as ``C<float>::f(x)`` is lowered;
        else None."""
        K = cindex.CursorKind
        template = next((x.referenced for x in callee.get_children()
                         if x.kind == K.TEMPLATE_REF), None)
        words = [t.spelling for t in callee.get_tokens()]
        if template is None or template.kind != K.CLASS_TEMPLATE or \
                not self._user_record(template) or not words or not words[-1].isidentifier():
            return None
        decl = _find_method(template, words[-1], len(args))
        if decl is None or not decl.is_static_method():
            return None
        args = list(args)
        _by_reference(decl, args, 0)
        return c_ast.FuncCall(c_ast.ID(self._func_name(decl)), c_ast.ExprList(args), coord=co)

    def _explicit_template_args(self, callee: Any, over: Any) -> list[c_ast.Node]:
        """The explicit template arguments of ``g<T, N>`` naming an overload set in a template
        (after the name, in order), as :func:`_template_args` gives them: a type's size (the
        enclosing template's ``__sizeof_T`` for its own type parameter), a value's
        expression."""
        K = cindex.CursorKind
        out: list[c_ast.Node] = []
        after = False
        for x in callee.get_children():
            if x is over or x.kind == K.OVERLOADED_DECL_REF:
                after = True
                continue
            if not after:
                continue
            if x.kind == K.TYPE_REF:
                ref = x.referenced
                size = x.type.get_size()
                if ref is not None and ref.kind == K.TEMPLATE_TYPE_PARAMETER:
                    out.append(c_ast.ID(f"__sizeof_{ref.spelling}"))
                elif size > 0:
                    out.append(c_ast.Constant("long", f"{size}L"))
                else:
                    out.append(c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList([])))
            elif x.kind.is_expression():
                out.append(self._expr(x))
            else:  # a template template argument, a namespace: no value the body reads
                out.append(c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList([])))
        return out

    def _virtual_call(self, ref: Any, c: Any, kids: list, arg_cursors: list
                      ) -> Optional[c_ast.Node]:
        """``p->f(x)``, ``r.f(x)`` or ``f(x)`` (on ``this``) of a virtual method through a
        pointer or reference: run by the object's dynamic class (``Base::f()`` and a call on
        an object itself are not virtual calls)."""
        K = cindex.CursorKind
        callee = self._strip(kids[0]) if kids else None
        nparams = len(list(ref.get_arguments()))
        if len(arg_cursors) == nparams + 1:  # `(*p)(x)`, `r(x)`: the object is an operand
            obj = c_ast.UnaryOp("&", self._expr(arg_cursors[0]))
            arg_cursors = arg_cursors[1:]
        elif callee is None or callee.kind != K.MEMBER_REF_EXPR or \
                "::" in [t.spelling for t in callee.get_tokens()] or \
                len(arg_cursors) != nparams:
            return None
        elif not _operands(callee):
            obj = c_ast.ID("this")
        else:
            mk = _operands(callee)
            t = mk[0].type
            if t.kind == cindex.TypeKind.POINTER or t.get_canonical().kind == \
                    cindex.TypeKind.POINTER:
                obj = self._expr(mk[0])
            elif t.kind in (cindex.TypeKind.LVALUEREFERENCE,
                            cindex.TypeKind.RVALUEREFERENCE) or _is_reference(mk[0]):
                obj = c_ast.UnaryOp("&", self._expr(mk[0]))
            else:
                return None  # an object's own method
        args = [self._expr(a) for a in arg_cursors]
        for i, p in enumerate(ref.get_arguments()):
            if p.type.kind in (cindex.TypeKind.LVALUEREFERENCE,
                               cindex.TypeKind.RVALUEREFERENCE) and \
                    not p.type.get_pointee().is_const_qualified():
                args[i] = c_ast.UnaryOp("&", args[i])
        name = self._func_name(ref)
        what = "::".join(_qualified(ref))
        why = (f"a call of the pure virtual method '{what}' whose overrider is chosen at run "
               "time (polyfuse does not resolve virtual calls)") \
            if ref.is_pure_virtual_method() else \
            f"a virtual call of '{what}' on an object whose class polyfuse does not know"
        return _dispatch(name[len(_class_name(ref.semantic_parent)) + 2:],
                         _class_chain(ref.semantic_parent), obj, args, self._coord(c), why,
                         pure=ref.is_pure_virtual_method())

    def _dependent_functor_call(self, callee: Any, args: list[c_ast.Node],
                                co: Optional[Coord]) -> Optional[c_ast.Node]:
        """``(*obj)(x)`` or ``obj(x)`` in a template on an object of the user's class
        (template): its ``operator()``, dispatched on the object's class."""
        K = cindex.CursorKind
        while callee.kind in (K.PAREN_EXPR, K.UNEXPOSED_EXPR) and len(_operands(callee)) == 1:
            callee = _operands(callee)[0]
        if callee.kind == K.UNARY_OPERATOR and \
                next((t.spelling for t in callee.get_tokens()), "") == "*" and \
                len(_operands(callee)) == 1:
            ptr = _operands(callee)[0]
            wrapper = clhpp_name(ptr.type.get_pointee().get_declaration()) \
                if ptr.type.kind == cindex.TypeKind.POINTER else None
            if wrapper is not None and wrapper.count("__") == 2:
                # `(*k)(cl::EnqueueArgs(...), a, b)` on a functor whose type names T
                return c_ast.FuncCall(c_ast.ID(wrapper + "__call"), c_ast.ExprList(
                    [c_ast.UnaryOp("*", self._expr(ptr))] + args), coord=co)
            static = _type_class(ptr.type) \
                if ptr.type.kind == cindex.TypeKind.POINTER else None
            target = self._expr(ptr) if static is not None else None
        elif callee.kind == K.DECL_REF_EXPR and _wrapper_class(callee.type) is not None:
            # `k(cl::EnqueueArgs(...), args...)` on a `cl::KernelFunctor<Ts...>&`
            return c_ast.FuncCall(c_ast.ID(_wrapper_class(callee.type) + "__call"),
                                  c_ast.ExprList([self._expr(callee)] + args), coord=co)
        elif callee.kind == K.DECL_REF_EXPR and _type_class(callee.type) is not None:
            static = _type_class(callee.type)
            target = c_ast.UnaryOp("&", self._expr(callee))
        else:
            return None
        if static is None or target is None:
            return None
        why = (f"a call of 'operator()' on a {static.spelling} (its class depends on a "
               "template parameter; polyfuse does not instantiate templates)")
        args = list(args)
        decl = _find_method(static, "operator()", len(args))
        if decl is not None:  # `(*stencil)(mtx, n)` with `operator()(Matrix2D<T>& mtx, ...)`
            _by_reference(decl, args, 0)
        return _dispatch("operator()", _class_chain(static), target, args, co, why)

    def _smart_call(self, ref: Any, c: Any, kids: list, arg_cursors: list) -> c_ast.Node:
        """A member of a standard smart pointer on the pointer it holds: made from a pointer
        (or moved from another), ``p->``, ``*p``, ``p.get()``, ``p.reset(q)``, ``p = q``,
        ``bool(p)``; what else it offers (``use_count``, ``swap``) is an opaque value."""
        K = cindex.CursorKind
        co = self._coord(c)
        if ref.kind == K.CONSTRUCTOR:
            return self._expr(arg_cursors[0]) if arg_cursors else c_ast.Constant("int", "0")
        operand = self._object_operand(ref, kids, arg_cursors)
        if operand is None:
            return c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList(
                [self._expr(a) for a in arg_cursors]), coord=co)
        ptr, rest = operand
        name = ref.spelling
        if name in ("operator->", "get", "release"):
            return ptr
        if name == "operator*":
            return c_ast.UnaryOp("*", ptr, coord=co)
        if name == "operator[]" and len(rest) == 1:
            return c_ast.ArrayRef(ptr, self._expr(rest[0]), coord=co)
        if name in ("reset", "operator="):
            value = self._expr(rest[0]) if rest else c_ast.Constant("int", "0")
            return c_ast.Assignment("=", ptr, value, coord=co)
        if ref.kind == K.CONVERSION_FUNCTION:  # `if (p)`
            return c_ast.BinaryOp("!=", ptr, c_ast.Constant("int", "0"), coord=co)
        return c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList(
            [self._expr(a) for a in rest]), coord=co)

    def _object_operand(self, ref: Any, kids: list, arg_cursors: list
                        ) -> Optional[tuple[c_ast.Node, list]]:
        """The object a library method is called on (an operator's first operand, or the
        callee's; through a pointer, the object it points to) and the other arguments."""
        K = cindex.CursorKind
        nparams = len(_params(ref)) if ref.kind == K.FUNCTION_TEMPLATE else \
            len(list(ref.get_arguments()))
        callee = self._strip(kids[0]) if kids else None
        if len(arg_cursors) == nparams + 1:  # an operator: the object is its first operand
            base, rest = arg_cursors[0], arg_cursors[1:]
        elif callee is not None and callee.kind == K.MEMBER_REF_EXPR and _operands(callee):
            base, rest = _operands(callee)[0], arg_cursors
        else:
            return None
        obj = self._expr(base)
        if base.type.get_canonical().kind == cindex.TypeKind.POINTER:
            obj = c_ast.UnaryOp("*", obj, coord=obj.coord)  # `holder->get()`
        return obj, rest

    def _array_call(self, ref: Any, c: Any, kids: list, arg_cursors: list) -> c_ast.Node:
        """A member of ``std::array<T, N>`` on the C array ``T[N]`` it is: ``a[i]``,
        ``a.at(i)``, ``a.size()``, ``a.data()``, ``a.front()``, ``a.back()``; others are
        opaque values."""
        co = self._coord(c)
        fixed = _std_array(ref.semantic_parent.type)
        operand = self._object_operand(ref, kids, arg_cursors)
        name = ref.spelling
        if operand is None or fixed is None:
            return c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList(
                [self._expr(a) for a in arg_cursors]), coord=co)
        arr, rest = operand
        n = fixed[1]
        if name in ("operator[]", "at") and len(rest) == 1:
            return c_ast.ArrayRef(arr, self._expr(rest[0]), coord=co)
        if name in ("front", "back"):
            return c_ast.ArrayRef(arr, c_ast.Constant("int", str(0 if name == "front" else
                                                                 n - 1)), coord=co)
        if name in ("size", "max_size"):
            return c_ast.Constant("long", f"{n}L", coord=co)
        if name in ("data", "begin", "cbegin"):
            return arr
        if name in ("end", "cend"):
            return c_ast.BinaryOp("+", arr, c_ast.Constant("long", f"{n}L"), coord=co)
        return c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList(
            [arr] + [self._expr(a) for a in rest]), coord=co)

    def _make_object(self, made: Any, kids: list, arg_cursors: list, at: Any
                     ) -> Optional[c_ast.Node]:
        """``std::make_unique<C>(args)`` (``made``: the smart pointer type it returns) as
        ``new C(args)``: the constructor of the user's class ``C`` taking those arguments (in
        a template, ``C<T>``'s, named by the call's template arguments ``kids``); None for
        a class that is not the user's."""
        K = cindex.CursorKind
        held = _smart_pointee(made)
        record = held.get_canonical().get_declaration() if held is not None else None
        if record is None or record.kind == K.NO_DECL_FOUND:
            # in a template: `std::make_unique<C<T>>(args...)` names the class template
            record = next((x.referenced for x in kids if x.kind == K.TEMPLATE_REF and
                           x.referenced is not None and
                           x.referenced.kind == K.CLASS_TEMPLATE), None)
        if record is None or not self._user_record(record):
            return None
        template = record if record.kind == K.CLASS_TEMPLATE else \
            cindex.conf.lib.clang_getSpecializedCursorTemplate(record) or record
        this = c_ast.ID("__polyfuse_this")
        if any(a.kind == K.PACK_EXPANSION_EXPR for a in arg_cursors):
            # how many arguments the pack holds is known where the call runs: the
            # constructor of that arity
            ctor = next((ch for ch in template.get_definition().get_children()
                         if ch.kind == K.CONSTRUCTOR), None)
            call = c_ast.FuncCall(c_ast.ID(self._func_name(ctor)), c_ast.ExprList(
                [this] + [self._expr(a) for a in arg_cursors]), coord=self._coord(at)) \
                if ctor is not None else None
        else:
            call = self._dependent_ctor_call(template, this, arg_cursors, at)
        ptr = c_ast.Typename(None, [], None, c_ast.PtrDecl([], c_ast.TypeDecl(
            None, [], None, c_ast.Struct(self._record(template), None))))
        targs = self._class_args(record, kids)
        chain = c_ast.Constant("string", '"' + " ".join(_class_chain(record)) + '"')
        return c_ast.FuncCall(c_ast.ID("__polyfuse_new"), c_ast.ExprList(
            [c_ast.Cast(ptr, c_ast.Constant("int", "0")), c_ast.Constant("int", "1")] +
            ([call] if call is not None else []) + targs + [chain]), coord=self._coord(at))

    def _call(self, c: Any, kids: list) -> c_ast.Node:
        K = cindex.CursorKind
        co = self._coord(c)
        ref = c.referenced
        arg_cursors = list(c.get_arguments())
        if ref is not None and clhpp_name(ref) is not None:
            return self._wrapper_member_call(ref, c, kids, arg_cursors)
        if ref is not None and _std_function(ref, _IDENTITY) and len(arg_cursors) == 1:
            return self._expr(arg_cursors[0])  # std::move(p): p
        if ref is not None and _std_function(ref, _SMART_MAKERS):
            made = self._make_object(c.type, kids, arg_cursors, c)
            if made is not None:
                return made
        if ref is not None and _smart_member(ref):
            return self._smart_call(ref, c, kids, arg_cursors)
        if ref is not None and ref.kind == K.CXX_METHOD and ref.semantic_parent is not None \
                and _std_array(ref.semantic_parent.type) is not None:
            return self._array_call(ref, c, kids, arg_cursors)
        if ref is not None and ref.kind == K.CXX_METHOD and ref.is_virtual_method():
            call = self._virtual_call(ref, c, kids, arg_cursors)
            if call is not None:
                return call
        if ref is not None and ref.kind == K.CXX_METHOD and ref.is_pure_virtual_method():
            # the overrider is chosen at run time and may launch kernels: refused if it runs
            what = "::".join(_qualified(ref))
            return c_ast.FuncCall(c_ast.ID("__polyfuse_refuse"), c_ast.ExprList([
                c_ast.Constant("string", f'"a call of the pure virtual method \'{what}\' '
                               'whose overrider is chosen at run time (polyfuse does not '
                               'resolve virtual calls)"')]), coord=co)
        if ref is not None and _is_lambda_call(ref):
            # `run(b)` on a lambda variable: a call of what the variable holds
            obj = self._strip(kids[0]) if kids else None
            if obj is None or obj.kind != K.DECL_REF_EXPR:
                raise _Unsupported("a call of a lambda that is not held in a variable", c)
            args = [self._expr(a) for a in arg_cursors[1:]] if len(arg_cursors) == len(
                list(ref.get_arguments())) + 1 else [self._expr(a) for a in arg_cursors]
            return c_ast.FuncCall(c_ast.ID(obj.spelling), c_ast.ExprList(args), coord=co)
        args = [self._expr(a) for a in arg_cursors]
        operator_obj = None
        if ref is not None and ref.kind == K.CXX_METHOD and not ref.is_static_method() and \
                len(args) == len(list(ref.get_arguments())) + 1:
            # an overloaded operator called as `a op b`: the object is the first operand
            operator_obj = args.pop(0)
            if arg_cursors[0].type.get_canonical().kind != cindex.TypeKind.POINTER and \
                    not isinstance(operator_obj, c_ast.FuncCall):
                operator_obj = c_ast.UnaryOp("&", operator_obj)
        if ref is not None and ref.kind in (K.FUNCTION_DECL, K.CXX_METHOD, K.CONSTRUCTOR):
            library = ref.location.file is None or _is_system(ref.location.file.name)
            nparams = len(list(ref.get_arguments()))
            pack = None if library else _pack_split(ref, nparams)
            for i, p in enumerate(list(ref.get_arguments())[:len(args)]):
                if pack is not None and pack[0] <= i < pack[0] + pack[1]:
                    continue  # a pack's arguments are its values
                if p.type.kind in (cindex.TypeKind.LVALUEREFERENCE,
                                   cindex.TypeKind.RVALUEREFERENCE) and \
                        not p.type.get_pointee().is_const_qualified() and \
                        not (library and _is_temporary(args[i])) and \
                        not _is_lambda_value(args[i]):
                    args[i] = c_ast.UnaryOp("&", args[i])
            hidden = _template_args(ref, co)
            if hidden or pack is not None:
                args += [c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList([]))
                         for _ in range(nparams - len(args))]
            if pack is not None:  # `mk<float>(0, n, x)` of `mk(int z, Args... args)`
                at, count = pack
                args[at:at + count] = [c_ast.FuncCall(c_ast.ID("__polyfuse_pack"),
                                                      c_ast.ExprList(args[at:at + count]))]
            args += hidden
        if ref is not None and ref.kind in (K.CXX_METHOD, K.CONSTRUCTOR, K.DESTRUCTOR,
                                            K.CONVERSION_FUNCTION):
            obj = operator_obj
            # a constructor's operands are its arguments (`std::string s = it->second.value`
            # copies a member: that member is no object the constructor is called on)
            callee = self._strip(kids[0]) if kids and obj is None and \
                ref.kind != K.CONSTRUCTOR else None
            if callee is not None and callee.kind == K.MEMBER_REF_EXPR:
                mk = _operands(callee)  # `Base<T>::f()` names its class: the object is this
                if mk:
                    b = mk[0]
                    obj = self._expr(b)
                    library = ref.location.file is None or _is_system(ref.location.file.name)
                    if b.type.get_canonical().kind != cindex.TypeKind.POINTER and \
                            not (library and _is_temporary(obj)):
                        # a library method of a temporary (`os.str().c_str()`) gets its value
                        obj = c_ast.UnaryOp("&", obj)
                elif ref.kind == K.CXX_METHOD and not ref.is_static_method():
                    obj = c_ast.ID("this")
            name = self._func_name(ref)
            if ref.kind == K.CONSTRUCTOR and obj is None and (
                    not arg_cursors or _is_integral(arg_cursors[0].type)):
                # a temporary `std::vector<long long>(0)` (copied into a variable): as
                # `std::vector<long long> v(0)` is, with its length
                vec = self._vector_ctor(c, ref, c.type)
                if vec is not None:
                    return vec
            if ref.spelling == "operator=" and obj is not None and len(args) == 1 and \
                    self._user_record(ref.semantic_parent) and not _written(ref):
                # the implicit copy (move) assignment of a class of the user's: member-wise
                target = obj.expr if isinstance(obj, c_ast.UnaryOp) and obj.op == "&" else \
                    c_ast.UnaryOp("*", obj)
                return c_ast.Assignment("=", target, args[0], coord=co)
            if name == "vector__resize" and len(args) == 1:  # resize(n) is resize(n, T())
                made = self._default_object(ref.semantic_parent, c)
                args += [made] if made is not None else []
            if obj is not None:
                args = [obj] + args
            if ref.kind == K.CXX_METHOD and ref.is_pure_virtual_method():
                # the override it dispatches to is chosen at run time: not followed
                what = c_ast.Constant("string", f'"{ref.semantic_parent.spelling}::'
                                                f'{ref.spelling}"')
                return c_ast.FuncCall(c_ast.ID("__polyfuse_virtual"),
                                      c_ast.ExprList([what] + args), coord=co)
            element = _record_element(name, ref)
            if element is not None:
                # `m[k].field = x`, `v[i].append(s)`: the element is an lvalue the model
                # tracks; reading it copies it
                return c_ast.UnaryOp("*", c_ast.FuncCall(c_ast.ID(element), c_ast.ExprList(args),
                                                         coord=co), coord=co)
            return c_ast.FuncCall(c_ast.ID(name), c_ast.ExprList(args), coord=co)
        if ref is None and _elided_copy(c, kids):
            return self._expr(kids[0])
        callee = self._strip(kids[0]) if kids else None
        if ref is None and callee is not None and callee.kind == K.MEMBER_REF_EXPR and \
                not callee.spelling:
            return self._dependent_member_call(c, callee, co)
        if ref is not None:
            name = self._func_name(ref) if ref.kind == K.FUNCTION_DECL and \
                ref.location.file is not None and not _is_system(ref.location.file.name) \
                else ref.spelling
        elif callee is not None and callee.kind == K.DECL_REF_EXPR:
            over = next((x for x in callee.get_children()
                         if x.kind == K.OVERLOADED_DECL_REF), None)
            if not callee.spelling and over is not None:
                # in a template, `g<T>(x)` names an overload set: the program's function of
                # that name when its parameters match (else a library call); its explicit
                # template arguments (`g<T, true>`) are the values of the callee's hidden ones
                decls = [_lib.clang_getOverloadedDecl(over, i)
                         for i in range(_lib.clang_getNumOverloadedDecls(over))]
                if decls and all(_std_function(d, _IDENTITY) for d in decls) and \
                        len(arg_cursors) == 1:
                    return args[0]  # std::forward<T>(x): x
                if decls and all(_std_function(d, _SMART_MAKERS) for d in decls):
                    made = self._make_object(c.type, list(callee.get_children()),
                                             arg_cursors, c)
                    if made is not None:
                        return made
                wrapped = {clhpp_name(d) for d in decls}
                if len(wrapped) == 1 and None not in wrapped:
                    # `cl::copy(queue, buf, begin(v), end(v))` in a template: the wrapper's
                    return c_ast.FuncCall(c_ast.ID(wrapped.pop()), c_ast.ExprList(args),
                                          coord=co)
                _overload_by_reference(decls, args, arg_cursors)
                targs = self._explicit_template_args(callee, over)
                if targs:
                    args.append(c_ast.FuncCall(c_ast.ID("__polyfuse_template_args"),
                                               c_ast.ExprList(targs), coord=co))
                return c_ast.FuncCall(c_ast.ID("__polyfuse_overload"), c_ast.ExprList(
                    [c_ast.Constant("string", f'"{over.spelling}"'), *args]), coord=co)
            static = self._dependent_static_call(callee, args, co) \
                if not callee.spelling else None
            if static is not None:
                return static
            name = callee.spelling
        elif kids and not kids[0].kind.is_expression():
            # `T(a, b)` in a template (the type names no function): a value made from its
            # operands, like the constructions libclang does not expose; a wrapper class's
            # (`cl::Buffer(ctx, begin(v), end(v), false)`) is its constructor
            ops = [self._expr(x) for x in kids if x.kind.is_expression()]
            if len(ops) == 1 and kids[0].kind == K.TYPE_REF and \
                    kids[0].referenced is not None and \
                    kids[0].referenced.kind == K.TEMPLATE_TYPE_PARAMETER:
                # `T(0.4)`: the value, converted to the type the instantiation gives T
                return c_ast.Cast(c_ast.Typename(None, [], None, self._type(c.type, None)),
                                  ops[0], coord=co)
            wrapper = clhpp_name(c.type.get_canonical().get_declaration())
            if wrapper is not None and wrapper.count("__") == 2:
                # `cl::Buffer(ctx, begin(v), end(v), ro)` whose constructor (a template over
                # the iterators) clang resolves only per instantiation: still the wrapper's
                return c_ast.FuncCall(c_ast.ID(wrapper + "__ctor"), c_ast.ExprList(ops),
                                      coord=co)
            return c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList(ops), coord=co)
        elif kids and _dependent_callee(self._strip(kids[0])):
            # `obj->method(x)` or `(*obj)(x)` on a template's type parameter: which function
            # it calls is known only per instantiation, which polyfuse does not lower
            callee = self._strip(kids[0])
            call = self._dependent_functor_call(callee, args, co)
            if call is not None:
                return call
            text = " ".join(t.spelling for t in callee.get_tokens())[:60]
            base = [self._expr(x) for x in _operands(callee)[:1]] \
                if callee.kind == K.MEMBER_REF_EXPR else []
            return c_ast.FuncCall(c_ast.ID("__polyfuse_unresolved"), c_ast.ExprList(
                [c_ast.Constant("string", '"' + text.replace('"', "'") + '"')] + base + args),
                coord=co)
        else:
            return c_ast.FuncCall(self._expr(kids[0]) if kids else c_ast.ID("__polyfuse_opaque"),
                                  c_ast.ExprList(args), coord=co)
        return c_ast.FuncCall(c_ast.ID(name), c_ast.ExprList(args), coord=co)


def _elided_copy(c: Any, kids: list) -> bool:
    """Whether a call is the copy a pre-C++17 copy-initialisation makes of a temporary
    (`std::string kn = "k";` under ``-std=gnu++14``): libclang shows the elidable copy
    constructor as a call naming no function whose one operand is of the same class; its
    value is the operand's."""
    if c.spelling or len(kids) != 1 or not kids[0].kind.is_expression():
        return False
    t = c.type.get_canonical()
    return t.kind == cindex.TypeKind.RECORD and \
        kids[0].type.get_canonical().spelling == t.spelling


def _class_name(decl: Any) -> str:
    """The prefix of a class's lowered methods (``C`` of ``C__method``): its name without
    template arguments, as the methods of a class template are lowered once."""
    return re.sub(r"<.*", "", decl.spelling)


#: cursor kinds of the classes whose static data members are globals of the lowered program
_CLASS_KINDS = ("CLASS_DECL", "STRUCT_DECL", "CLASS_TEMPLATE")


def _static_name(c: Any) -> Optional[str]:
    """The global that holds the static data member a definition defines: ``C__x`` (of a
    plain class, or a class template's generic definition), ``C__x__spec_4_8`` (of the
    specialization whose type arguments have those sizes); None where a specialization has
    an argument that is not a type of known size."""
    parent = c.semantic_parent
    name = f"{_class_name(parent)}__{c.spelling}"
    if parent.kind == cindex.CursorKind.CLASS_TEMPLATE or \
            cindex.conf.lib.clang_getSpecializedCursorTemplate(parent) is None:
        return name
    sizes = _class_sizes(parent)
    if sizes is None:
        return None
    return f"{name}__spec_{'_'.join(map(str, sizes))}"


def _class_sizes(record: Any) -> Optional[list[int]]:
    """The sizes of the type arguments of a class template's specialization (None where one
    is not a type of known size)."""
    t = record.type
    sizes = [t.get_template_argument_type(i).get_size()
             for i in range(max(t.get_num_template_arguments(), 0))]
    return sizes if sizes and min(sizes) > 0 else None


def _renamed(decl: c_ast.Decl, name: str) -> c_ast.Decl:
    """``decl`` declaring ``name`` instead."""
    decl.name = name
    t = decl.type
    while not isinstance(t, c_ast.TypeDecl):
        t = t.type
    t.declname = name
    return decl


def _class_chain(decl: Any) -> list[str]:
    """A class of the user's and its bases, in the order a method is looked up (its own
    first, then each base's chain): the classes whose methods an object of it may run."""
    K = cindex.CursorKind
    if decl.kind in (K.CLASS_DECL, K.STRUCT_DECL):
        template = cindex.conf.lib.clang_getSpecializedCursorTemplate(decl)
        decl = template if template is not None else decl
    definition = decl.get_definition() or decl
    out = [_class_name(decl)]
    for b in definition.get_children():
        if b.kind != K.CXX_BASE_SPECIFIER:
            continue
        base = b.referenced
        if base is None or base.kind not in (K.CLASS_DECL, K.STRUCT_DECL, K.CLASS_TEMPLATE):
            base = b.type.get_canonical().get_declaration()
        if base is not None and base.kind != K.NO_DECL_FOUND:
            out += [x for x in _class_chain(base) if x not in out]
    return out


def _type_class(t: Any) -> Optional[Any]:
    """The user's class (or class template) an object, reference or pointer type names."""
    K = cindex.CursorKind
    if t.kind in (cindex.TypeKind.POINTER, cindex.TypeKind.LVALUEREFERENCE,
                  cindex.TypeKind.RVALUEREFERENCE):
        t = t.get_pointee()
    t = _smart_pointee(t) or t
    decl = t.get_declaration()
    if decl is None or decl.kind not in (K.CLASS_DECL, K.STRUCT_DECL, K.CLASS_TEMPLATE):
        return None
    f = decl.location.file
    if f is None or _is_system(f.name) or _is_wrapper_file(f.name):
        return None
    return decl


def _smart_pointee(t: Any) -> Optional[Any]:
    """The type a ``std::unique_ptr<X>``/``std::shared_ptr<X>`` type holds (``X``; in a
    template too), else None."""
    for u in (t, t.get_canonical()):
        decl = u.get_declaration()
        if decl is not None and decl.kind != cindex.CursorKind.NO_DECL_FOUND and \
                decl.spelling in _SMART_POINTERS and u.get_num_template_arguments() > 0 and \
                _qualified(decl)[0] == "std":
            return u.get_template_argument_type(0)
    return None


def _is_pack(c: Any) -> bool:
    """Whether a parameter declaration (of a function or a template) is a pack
    (``Args... args``, ``typename... Args``)."""
    if c.kind == cindex.CursorKind.PARM_DECL:
        return c.type.spelling.endswith("...")
    return "..." in [t.spelling for t in c.get_tokens()]


def _stores_through_parameter(lam: Any) -> bool:
    """Whether a lambda stores through one of its pointer parameters (``*out = v``)."""
    K = cindex.CursorKind
    params = {p.get_usr() for p in lam.get_children() if p.kind == K.PARM_DECL}
    for d in lam.walk_preorder():
        if d.kind not in (K.BINARY_OPERATOR, K.COMPOUND_ASSIGNMENT_OPERATOR):
            continue
        left = next(iter(d.get_children()), None)
        if left is None or left.kind != K.UNARY_OPERATOR or \
                _lib.clang_getCursorUnaryOperatorKind(left) != 6:
            continue
        if d.kind == K.BINARY_OPERATOR and _lib.clang_getCursorBinaryOperatorKind(d) != 22:
            continue
        ptr = _Translator._strip(next(iter(left.get_children()), left))
        if ptr.kind == K.DECL_REF_EXPR and ptr.referenced is not None and \
                ptr.referenced.get_usr() in params:
            return True
    return False


def _wrapper_class(t: Any) -> Optional[str]:
    """``__clhpp__Class`` for a type (a reference or pointer to one) that is a class of the
    C++ wrapper, else None."""
    if t.kind in (cindex.TypeKind.POINTER, cindex.TypeKind.LVALUEREFERENCE,
                  cindex.TypeKind.RVALUEREFERENCE):
        t = t.get_pointee()
    decl = t.get_declaration()
    if decl is None or decl.kind == cindex.CursorKind.NO_DECL_FOUND:
        decl = t.get_canonical().get_declaration()
    if decl is None or decl.kind not in (cindex.CursorKind.CLASS_DECL,
                                         cindex.CursorKind.STRUCT_DECL,
                                         cindex.CursorKind.CLASS_TEMPLATE):
        return None
    name = clhpp_name(decl)
    return name if name is not None and name.count("__") == 2 else None


def _overload_by_reference(decls: list, args: list, arg_cursors: list) -> None:
    """Pass by address the arguments of a call by name in a template (``run_all<T>(stream,
    sum)``) whose parameters are non-const references in every function of the overload
    set that may take them (up to a pack expansion, whose elements are values)."""
    n = next((i for i, a in enumerate(arg_cursors)
              if a.kind == cindex.CursorKind.PACK_EXPANSION_EXPR), None)
    wrapped = set()
    for d in decls:
        if d.kind not in (cindex.CursorKind.FUNCTION_TEMPLATE,
                          cindex.CursorKind.FUNCTION_DECL) or d.location.file is None or \
                _is_system(d.location.file.name):
            continue
        params = _params(d)
        fixed = next((i for i, p in enumerate(params) if _is_pack(p)), None)
        if fixed is None and not (_takes(d, len(args)) if n is None else len(params) >= n) \
                or fixed is not None and n is None and len(args) < fixed:
            continue
        out = list(args)
        _by_reference(d, out, 0)
        upto = min(x for x in (n, fixed, len(args)) if x is not None)
        wrapped.add(tuple(o is not a and i < upto for i, (o, a) in enumerate(zip(out, args))))
    if len(wrapped) == 1:
        # an lvalue's address (a lambda or a temporary bound to `F&&` is its value)
        for i, w in enumerate(wrapped.pop()):
            if w and isinstance(args[i], (c_ast.ID, c_ast.StructRef, c_ast.ArrayRef)) or \
                    w and isinstance(args[i], c_ast.UnaryOp) and args[i].op == "*":
                args[i] = c_ast.UnaryOp("&", args[i])


def _dependent_stream_output(c: Any) -> bool:
    """Whether ``a << b`` (unresolved in a template) writes to a standard output stream: its
    left operand is one, or is such an unresolved ``<<`` itself."""
    if c.type.get_canonical().kind != cindex.TypeKind.DEPENDENT:
        return False
    left = _Translator._strip(next(x for x in c.get_children() if x.kind.is_expression()))
    t = left.type.get_canonical()
    if t.kind in (cindex.TypeKind.LVALUEREFERENCE, cindex.TypeKind.RVALUEREFERENCE):
        t = t.get_pointee().get_canonical()
    decl = t.get_declaration()
    if decl is not None and decl.kind != cindex.CursorKind.NO_DECL_FOUND and \
            re.fullmatch(r"basic_(o|io|)(string|f)?stream|basic_ostream", decl.spelling) and \
            _qualified(decl)[0] == "std":
        return True
    return left.kind == cindex.CursorKind.BINARY_OPERATOR and \
        _lib.clang_getCursorBinaryOperatorKind(left) == 8 and _dependent_stream_output(left)


def _is_comma_fold(c: Any) -> bool:
    """Whether an expression is a fold over the comma operator (``(f(args), ...)``, which
    libclang does not expose)."""
    if c.type.get_canonical().kind != cindex.TypeKind.DEPENDENT or \
            len([x for x in c.get_children() if x.kind.is_expression()]) != 1:
        return False
    toks = [t.spelling for t in c.get_tokens()]
    return len(toks) > 4 and toks[0] == "(" and toks[-1] == ")" and \
        (toks[-3:-1] == [",", "..."] or toks[1:3] == ["...", ","])


def _pack_split(ref: Any, nargs: int) -> Optional[tuple[int, int]]:
    """For a call of a variadic function template's specialization with ``nargs``
    arguments: (where its pack parameter is, how many arguments it takes), else None."""
    template = cindex.conf.lib.clang_getSpecializedCursorTemplate(ref)
    if template is None or template.kind != cindex.CursorKind.FUNCTION_TEMPLATE:
        return None
    params = _params(template)
    at = next((i for i, p in enumerate(params) if _is_pack(p)), None)
    if at is None:
        return None
    return at, max(0, nargs - (len(params) - 1))


def _std_array(t: Any) -> Optional[tuple[Any, int]]:
    """(element type, length) of a ``std::array<T, N>`` type, else None."""
    t = t.get_canonical()
    decl = t.get_declaration()
    if t.kind != cindex.TypeKind.RECORD or decl is None or decl.spelling != "array" or \
            t.get_num_template_arguments() < 1 or _qualified(decl)[0] != "std":
        return None
    elem = t.get_template_argument_type(0)
    size, whole = elem.get_canonical().get_size(), t.get_size()
    if size <= 0 or whole < 0:
        return None
    return elem, whole // size


def _std_function(ref: Any, names: tuple[str, ...]) -> bool:
    """Whether ``ref`` is the standard library's function of one of ``names``."""
    return ref.spelling in names and ref.kind in (cindex.CursorKind.FUNCTION_DECL,
                                                  cindex.CursorKind.FUNCTION_TEMPLATE) and \
        _qualified(ref)[0] == "std"


def _smart_member(ref: Any) -> bool:
    """Whether ``ref`` is a member (constructor, operator, method) of a standard smart
    pointer."""
    parent = ref.semantic_parent
    return ref.kind in (cindex.CursorKind.CXX_METHOD, cindex.CursorKind.CONSTRUCTOR,
                        cindex.CursorKind.CONVERSION_FUNCTION,
                        cindex.CursorKind.FUNCTION_TEMPLATE) and parent is not None and \
        _class_name(parent) in _SMART_CLASSES and _qualified(parent)[0] == "std"


def _dispatch(method: str, chain: list[str], obj: c_ast.Node, args: list[c_ast.Node],
              co: Optional[Coord], unknown: str = "", pure: bool = False) -> c_ast.Node:
    """``__polyfuse_dispatch("method", "C B A", "why", pure, obj, args...)``: a method call
    run by the object's dynamic class (see :meth:`CEvaluator.dispatch`); ``C B A`` is the
    static class and its bases, ``why`` the refusal where the dynamic class is not known."""
    return c_ast.FuncCall(c_ast.ID("__polyfuse_dispatch"), c_ast.ExprList([
        c_ast.Constant("string", f'"{method}"'),
        c_ast.Constant("string", '"' + " ".join(chain) + '"'),
        c_ast.Constant("string", '"' + unknown.replace('"', "'") + '"'),
        c_ast.Constant("int", "1" if pure else "0"), obj, *args]), coord=co)


def _params(fn: Any) -> list:
    """A function's parameter declarations (in a template too, where clang gives no
    argument list)."""
    return [ch for ch in fn.get_children() if ch.kind == cindex.CursorKind.PARM_DECL]


def _default_of(param: Any) -> Optional[Any]:
    """The default argument of a parameter declaration, or None."""
    return next((x for x in param.get_children() if x.kind.is_expression()), None)


def _takes(fn: Any, n: int) -> bool:
    """Whether a function takes ``n`` arguments (the parameters past them have defaults)."""
    params = _params(fn)
    return len(params) >= n and all(_default_of(p) is not None for p in params[n:])


def _by_reference(fn: Any, args: list, skip: int) -> None:
    """Pass the address of each argument (after the first ``skip``) whose parameter of
    ``fn`` is a non-const reference, as the lowering of a resolved call does."""
    for i, p in enumerate(_params(fn)):
        if skip + i < len(args) and p.type.kind in (cindex.TypeKind.LVALUEREFERENCE,
                                                    cindex.TypeKind.RVALUEREFERENCE) \
                and not p.type.get_pointee().is_const_qualified():
            args[skip + i] = c_ast.UnaryOp("&", args[skip + i])


def _find_method(cls: Any, name: str, nargs: int) -> Optional[Any]:
    """The declaration of method ``name`` taking ``nargs`` arguments in a class (template)
    of the user's or its bases, in lookup order."""
    K = cindex.CursorKind
    template = cindex.conf.lib.clang_getSpecializedCursorTemplate(cls) \
        if cls.kind in (K.CLASS_DECL, K.STRUCT_DECL) else None
    definition = (template or cls).get_definition() or cls
    for ch in definition.get_children():
        if ch.kind in (K.CXX_METHOD, K.FUNCTION_TEMPLATE) and ch.spelling == name and \
                len(_params(ch)) == nargs:
            return ch
    for b in definition.get_children():
        if b.kind == K.CXX_BASE_SPECIFIER and b.referenced is not None and \
                b.referenced.kind in (K.CLASS_DECL, K.STRUCT_DECL, K.CLASS_TEMPLATE):
            found = _find_method(b.referenced, name, nargs)
            if found is not None:
                return found
    return None


def _is_reference(c: Any) -> bool:
    """Whether an expression names a variable declared as a reference (``T& r``)."""
    ref = c.referenced
    return ref is not None and ref.kind in (cindex.CursorKind.VAR_DECL,
                                            cindex.CursorKind.PARM_DECL) and \
        ref.type.kind in (cindex.TypeKind.LVALUEREFERENCE, cindex.TypeKind.RVALUEREFERENCE)


def _dependent_callee(c: Any) -> bool:
    """Whether a call's callee is a member of (or an object of) a type that depends on a
    template parameter: clang resolves no function for it in the template's body."""
    K = cindex.CursorKind
    if c.kind == K.MEMBER_REF_EXPR:
        return c.referenced is None
    t = c.type.get_canonical().kind
    return t in (cindex.TypeKind.DEPENDENT, cindex.TypeKind.UNEXPOSED)


def _per_type_result(fd: c_ast.FuncDef) -> c_ast.FuncDef:
    """A function template explicitly specialized for several types (``dp<float2>`` false,
    ``dp<double2>`` true): the lowered program has one function per name, so which
    specialization a call means is not known; it returns an unknown value that says so
    (``__polyfuse_specialized``), never one specialization's result."""
    ret = c_ast.Return(c_ast.FuncCall(c_ast.ID("__polyfuse_specialized"), c_ast.ExprList([])))
    return c_ast.FuncDef(fd.decl, fd.param_decls, c_ast.Compound([ret]), coord=fd.coord)


def _type_sizes(c: Any) -> tuple[int, ...]:
    """The sizes of an explicit specialization's type arguments (``dp<float2>``: (8,)); an
    empty tuple when it has a value argument."""
    n = c.get_num_template_arguments()
    sizes = []
    for i in range(max(n, 0)):
        if c.get_template_argument_kind(i) != cindex.TemplateArgumentKind.TYPE:
            return ()
        sizes.append(c.get_template_argument_type(i).get_size())
    return tuple(sizes)


def _template_params(c: Any) -> list[str]:
    """The hidden parameters of a function template's lowered body, one per template
    parameter: ``__sizeof_T`` for a type (what ``sizeof(T)`` is), ``N`` for a value."""
    K = cindex.CursorKind
    if c.kind != K.FUNCTION_TEMPLATE:
        return []
    return [f"__sizeof_{ch.spelling}" if ch.kind == K.TEMPLATE_TYPE_PARAMETER else ch.spelling
            for ch in c.get_children()
            if ch.kind in (K.TEMPLATE_TYPE_PARAMETER, K.TEMPLATE_NON_TYPE_PARAMETER) and
            not _is_pack(ch)]


def _template_args(ref: Any, co: Optional[Coord]) -> list:
    """The values of :func:`_template_params` a call of a template's specialization passes:
    each type argument's size, each value argument (opaque where clang gives none)."""
    n = ref.get_num_template_arguments()
    if n <= 0 or ref.location.file is None or _is_system(ref.location.file.name):
        return []
    out: list[c_ast.Node] = []
    for i in range(n):
        try:
            kind = ref.get_template_argument_kind(i)
        except ValueError:  # a pack (the bindings know no such kind): no hidden parameter
            continue
        value = None
        if kind == cindex.TemplateArgumentKind.TYPE:
            size = ref.get_template_argument_type(i).get_size()
            value = size if size > 0 else None
        elif kind == cindex.TemplateArgumentKind.INTEGRAL:
            value = ref.get_template_argument_value(i)
        out.append(c_ast.Constant("long", f"{value}L", coord=co) if value is not None else
                   c_ast.FuncCall(c_ast.ID("__polyfuse_opaque"), c_ast.ExprList([])))
    return out


def _is_member(c: Any) -> bool:
    """A member function of a class (a member template too: ``template<class T> int
    S::map(T *&p)``)."""
    K = cindex.CursorKind
    if c.kind in (K.CXX_METHOD, K.CONSTRUCTOR, K.DESTRUCTOR):
        return True
    parent = c.semantic_parent
    return c.kind == K.FUNCTION_TEMPLATE and parent is not None and \
        parent.kind in (K.CLASS_DECL, K.STRUCT_DECL, K.CLASS_TEMPLATE, K.UNION_DECL)


def _written(fn: Any) -> bool:
    """Whether a function has a body in the program (not implicit, not ``= default``): the
    implicit members of a class are placed at the class's name and their bodies are made up."""
    d = fn.get_definition()
    parent = fn.semantic_parent
    if d is None or (parent is not None and d.location == parent.location):
        return False
    return any(ch.kind == cindex.CursorKind.COMPOUND_STMT for ch in d.get_children())


def _arity(fd: c_ast.FuncDef) -> int:
    args = fd.decl.type.args
    return len(args.params) if args is not None else 0


def _std_member_defaults(cls: Any, skip: set, obj: c_ast.Node, arrow: str) -> list:
    """``obj.m = <empty>`` for each standard container or string member of class ``cls``
    not in ``skip`` (what its default constructor makes: the model then tracks it)."""
    if cls is None:
        return []
    out = []
    for f in cls.get_children():
        if f.kind == cindex.CursorKind.FIELD_DECL and f.spelling not in skip:
            init = _std_default(f.type)
            if init is not None:
                target = c_ast.StructRef(obj, arrow, c_ast.ID(f.spelling))
                out.append(c_ast.Assignment("=", target, init))
    return out


def _bit_reference(call: c_ast.Node) -> c_ast.Node:
    """``std::vector<bool>``'s element proxy as the element itself: ``w[k] = x``
    (``_Bit_reference::operator=``) stores into the vector as ``v[k] = x`` does, and reading
    ``w[k]`` (``operator bool``) is the element."""
    if not isinstance(call, c_ast.FuncCall) or not isinstance(call.name, c_ast.ID) or \
            call.args is None or not call.args.exprs:
        return call
    inner = call.args.exprs[0]
    if not isinstance(inner, c_ast.FuncCall) or not isinstance(inner.name, c_ast.ID) or \
            inner.name.name != "vector__operator[]":
        return call
    if call.name.name == "_Bit_reference__operator=" and len(call.args.exprs) == 2:
        return c_ast.FuncCall(c_ast.ID("vector__set"), c_ast.ExprList(
            list(inner.args.exprs) + [call.args.exprs[1]]), coord=call.coord)
    if call.name.name == "operator bool" and len(call.args.exprs) == 1:
        return inner
    return call


def _std_default(t: Any) -> Optional[c_ast.Node]:
    """The lowered default construction of a standard container or string of type ``t``
    (an empty one), else None."""
    t = t.get_canonical()
    decl = t.get_declaration()
    if t.kind != cindex.TypeKind.RECORD or decl is None or decl.semantic_parent is None or \
            decl.semantic_parent.spelling not in ("std", "__1", "__cxx11"):
        return None
    name = decl.spelling
    if name == "vector":
        elem = t.get_template_argument_type(0) if t.get_num_template_arguments() > 0 else None
        size = elem.get_canonical().get_size() if elem is not None else -1
        args = [c_ast.Constant("int", "0"), c_ast.Constant("int", str(size))] if size > 0 \
            else []
        return c_ast.FuncCall(c_ast.ID("__polyfuse_vector"), c_ast.ExprList(args))
    if name in ("map", "unordered_map", "basic_string"):
        return c_ast.FuncCall(c_ast.ID(f"{name}__ctor"), c_ast.ExprList([]))
    return None


def _record_element(name: str, method: Any) -> Optional[str]:
    """``{container}__element`` for a standard container's element access that returns a
    class (a ``std::string``, a struct) by reference, else None."""
    cls, _, meth = name.partition("__")
    t = method.result_type.get_canonical()
    if cls not in _CONTAINERS or meth not in ("operator[]", "at", "front", "back") or \
            t.kind != cindex.TypeKind.LVALUEREFERENCE or \
            t.get_pointee().get_canonical().kind != cindex.TypeKind.RECORD:
        return None
    return f"{cls}__element" + ("" if meth in ("operator[]", "at") else f"_{meth}")


def _std_container(t: Any) -> Optional[str]:
    """The name of the standard container (``vector``) an object, pointer or reference type
    is, else None."""
    if t.kind in (cindex.TypeKind.POINTER, cindex.TypeKind.LVALUEREFERENCE,
                  cindex.TypeKind.RVALUEREFERENCE):
        t = t.get_pointee()
    decl = t.get_declaration()
    if decl is None or decl.kind == cindex.CursorKind.NO_DECL_FOUND or \
            decl.spelling not in _CONTAINERS or decl.location.file is None or \
            not _is_system(decl.location.file.name):
        return None
    return decl.spelling


def _user_type(t: Any, depth: int) -> bool:
    """Whether a type is (points to, or has as template argument) a class of the user's."""
    TK = cindex.TypeKind
    if t.kind in (TK.POINTER, TK.LVALUEREFERENCE, TK.RVALUEREFERENCE):
        t = t.get_pointee()
    decl = t.get_declaration()
    f = decl.location.file if decl is not None and decl.kind != cindex.CursorKind.NO_DECL_FOUND \
        else None
    if f is not None and not _is_system(f.name) and not _is_wrapper_file(f.name):
        return True
    return depth > 0 and any(_user_type(t.get_template_argument_type(i), depth - 1)
                             for i in range(max(0, t.get_num_template_arguments())))


def _is_lambda_call(ref: Any) -> bool:
    """Whether a call's callee is a lambda's ``operator()``."""
    return ref.kind == cindex.CursorKind.CXX_METHOD and ref.spelling == "operator()" and \
        ref.semantic_parent is not None and "(lambda at " in ref.semantic_parent.type.spelling


def _is_lambda_value(node: c_ast.Node) -> bool:
    """A lambda made in place (passed by ``F&&`` it is the value, not its address)."""
    return isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) and \
        node.name.name == "__polyfuse_lambda"


def _is_temporary(node: c_ast.Node) -> bool:
    """A value with no address (``s = std::string("")`` binds it to ``string&&``): a library
    function receives it as the value."""
    while isinstance(node, c_ast.Cast):
        node = node.expr
    return isinstance(node, (c_ast.FuncCall, c_ast.Constant, c_ast.BinaryOp))


def _operands(c: Any) -> list:
    """The expression children of a cursor (without the ``TYPE_REF``/``TEMPLATE_REF`` of a
    qualified name)."""
    return [ch for ch in c.get_children() if ch.kind.is_expression()]


def _qualified(ref: Any) -> list[str]:
    """Names of the scopes enclosing a declaration, outermost first, and its own name."""
    K = cindex.CursorKind
    out = []
    c = ref
    while c is not None and c.kind != K.TRANSLATION_UNIT:
        out.append(c.spelling)
        c = c.semantic_parent
    return out[::-1]


def _is_wrapper_file(file: str) -> bool:
    return os.path.basename(file) in _CXX_WRAPPERS


def clhpp_name(ref: Any) -> Optional[str]:
    """``__clhpp__Class__method`` (or ``__clhpp__function``) for a declaration of the C++
    OpenCL wrapper (namespace ``cl``, any of ``cl.hpp``/``cl2.hpp``/``opencl.hpp``), else None.
    Constructors are ``__ctor``, ``operator()`` is ``__call``, ``operator=`` is ``__assign``."""
    if ref is None:
        return None
    K = cindex.CursorKind
    try:
        names = _qualified(ref)
    except Exception:  # noqa: BLE001 - a cursor libclang cannot walk is not a wrapper call
        return None
    if len(names) < 2 or names[0] != "cl":
        return None
    inner = [n.split("<")[0].rstrip("_") or n for n in names[1:]
             if n not in ("compatibility", "detail")]
    if not inner:
        return None
    if ref.kind in (K.CXX_METHOD, K.CONSTRUCTOR, K.DESTRUCTOR, K.CONVERSION_FUNCTION,
                    K.FUNCTION_TEMPLATE) and len(inner) >= 2 and \
            ref.semantic_parent is not None and ref.semantic_parent.kind != K.NAMESPACE:
        cls, meth = inner[-2], inner[-1]
        if ref.kind == K.CONSTRUCTOR:
            meth = "ctor"
        elif ref.kind == K.DESTRUCTOR:
            meth = "dtor"
        elif meth == "operator()":
            meth = "call"
        elif meth == "operator=":
            meth = "assign"
        elif meth.startswith("operator"):
            meth = "op_" + "".join(ch if ch.isalnum() else "_" for ch in meth[8:].strip())
        return f"__clhpp__{cls}__{meth}"
    return "__clhpp__" + "__".join(inner)


def _string_buffer(e: c_ast.Node) -> bool:
    """``s[0]`` of a ``std::string`` ``s`` (lowered), whose address is the string's buffer."""
    return isinstance(e, c_ast.FuncCall) and isinstance(e.name, c_ast.ID) and \
        e.name.name == "basic_string__operator[]" and len(e.args.exprs) == 2 and \
        isinstance(e.args.exprs[1], c_ast.Constant) and e.args.exprs[1].value == "0"


def _vector_element_address(e: c_ast.Node) -> Optional[c_ast.Node]:
    """``&v[k]``, ``&v.at(k)``, ``&v.front()``, ``&v.back()`` of a ``std::vector`` ``v``
    (lowered): ``__polyfuse_vector_at(&v, k)``, a pointer into its elements (a work size
    array); else None."""
    if not isinstance(e, c_ast.FuncCall) or not isinstance(e.name, c_ast.ID) or \
            e.args is None or not e.args.exprs:
        return None
    name, args = e.name.name, list(e.args.exprs)
    if name in ("vector__operator[]", "vector__at") and len(args) == 2:
        index = args[1]
    elif name == "vector__front" and len(args) == 1:
        index = c_ast.Constant("int", "0")
    elif name == "vector__back" and len(args) == 1:
        index = c_ast.BinaryOp("-", c_ast.FuncCall(c_ast.ID("vector__size"), c_ast.ExprList(
            [args[0]])), c_ast.Constant("int", "1"))
    else:
        return None
    return c_ast.FuncCall(c_ast.ID("__polyfuse_vector_at"), c_ast.ExprList([args[0], index]),
                          coord=e.coord)


def _is_scalar(t: Any) -> bool:
    """An integer or ``bool``: a container's elements of it start as numbers."""
    return _is_integral(t) or t.get_canonical().kind == cindex.TypeKind.BOOL


def _is_integral(t: Any) -> bool:
    TK = cindex.TypeKind
    return t.get_canonical().kind in (TK.INT, TK.UINT, TK.LONG, TK.ULONG, TK.LONGLONG,
                                      TK.ULONGLONG, TK.SHORT, TK.USHORT, TK.CHAR_S, TK.UCHAR,
                                      TK.SCHAR, TK.CHAR_U)
