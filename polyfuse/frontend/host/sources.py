"""Where the kernels come from: the programs the host creates and builds, and their kernels.

``clCreateProgramWithSource`` records source pieces (literals, or files the host read),
``clBuildProgram`` the options; the kernels are parsed, with those options, when a kernel is
first created from the program.  Each program keeps its own kernels in the record (a name
taken by another program's kernel gets a suffix).  A source polyfuse cannot follow falls back
to the kernel files the user gave (:class:`KernelFiles`)."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from pycparser import c_ast

from polyfuse.c import preprocessor
from polyfuse.core.program import (
    Kernel,
    PolyfuseError,
    SourceLoc,
    UnsupportedError,
    runtime_options,
)
from polyfuse.frontend.host.context import Context
from polyfuse.frontend.host.values import ProgObj


@dataclass(frozen=True)
class KernelFiles:
    """How the host front-end finds and parses kernel sources the host reads.

    ``files`` are the kernel files given by the user (fallback when the host's own source
    cannot be followed; one the host never builds is an error); with ``replace`` they are built
    in place of every program's own source (``--kernel-source-override``); ``search_dirs`` are
    tried, in order, for relative paths the host opens; ``include_dirs``/``defines`` apply to
    every kernel parse, before the program's own build options.
    """

    files: tuple[str, ...] = ()
    search_dirs: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    defines: tuple[tuple[str, Optional[str]], ...] = ()
    replace: bool = False


@dataclass
class ProgInfo:
    """What a ``cl_program`` is built from: source pieces, build options, its kernels."""

    pieces: list  # ("text", str) | ("file", path) | ("unknown", why)
    loc: Optional[SourceLoc]
    options: str = ""
    names: Optional[dict] = None  # kernel name in the program -> name in the Program record


class KernelSources:
    """The programs of one host run, the kernel files it opened, and the kernels adopted."""

    def __init__(self, ctx: Context, given: Mapping[str, Kernel], files: KernelFiles) -> None:
        self.ctx = ctx
        self.given = given  # the kernels the user gave
        self.files = files
        self.programs: dict[int, ProgInfo] = {}
        self.kernels: dict[str, Kernel] = {}  # the record's kernels, by their record name
        self.opened: list[str] = []  # kernel files the host opened, in order
        # what each program the host builds reads: a kernel file ("" for source strings), where
        self.built: list[tuple[str, Optional[SourceLoc]]] = []
        self.cli_used = False  # the kernels given by the user stood in for a program's source
        self.parse_cache: dict[tuple, dict[str, Kernel]] = {}

    def open_file(self, path: str) -> None:
        """The host opened the kernel file ``path`` (a source it may read into memory)."""
        self.opened.append(path)

    def create(self, pieces: list, loc: Optional[SourceLoc]) -> ProgObj:
        """A new program built from ``pieces``."""
        pid = len(self.programs)
        self.programs[pid] = ProgInfo(pieces, loc)
        return ProgObj(pid)

    def program_kernels(self, prog: Any, node: c_ast.Node) -> dict[str, str]:
        """Kernel names of the program a kernel object is created from → names in the record."""
        if not isinstance(prog, ProgObj):
            return self.adopt(self.cli_kernels(node), None)
        info = self.programs[prog.pid]
        if info.names is None:
            info.names = self.adopt(self.parse_program(info, node), info)
        return info.names

    def cli_kernels(self, node: c_ast.Node, defines: Mapping[str, Optional[str]] = {},  # noqa: B006
                    include_dirs: Sequence[str] = ()) -> dict[str, Kernel]:
        """The kernels given on the command line, standing in for a source polyfuse cannot
        follow: parsed now, with the build's options; one name in two files is ambiguous."""
        self.cli_used = True
        if not self.given and not self.files.files:
            raise self.ctx.error("cannot tell which kernel source the host builds; pass the "
                                 ".cl file(s)", node)
        if (defines or include_dirs) and not self.files.files:
            raise self.ctx.error("build options define macros, but the kernels were given "
                                 "without their source file; pass the .cl file", node,
                                 UnsupportedError)
        out: dict[str, Kernel] = {} if defines or include_dirs else dict(self.given)
        where: dict[str, str] = {}
        for f in self.files.files:
            for name, k in self.parse_kernel_text(None, f, defines, include_dirs).items():
                if name in out:
                    first = where.get(name, "the kernel source")
                    raise self.ctx.error(f"kernel '{name}' is defined in {first} and {f}; "
                                         "polyfuse cannot tell which one the host means", node)
                out[name] = k
                where[name] = f
        return out

    def parse_program(self, info: ProgInfo, node: c_ast.Node) -> dict[str, Kernel]:
        defines, include_dirs, flags = self.build_options(info.options, node)
        if self.files.replace:
            return _with_options(self.cli_kernels(node, defines, include_dirs), flags)
        pieces = [("unknown", f"kernel file '{p[1]}' not found (looked in "
                   f"{', '.join(self.files.search_dirs) or 'the working directory'})")
                  if p[0] == "file" and not os.path.isfile(p[1]) else p for p in info.pieces]
        if all(p[0] == "text" for p in pieces) and \
                not any(_KERNEL_RE.search(p[1]) for p in pieces):
            pieces = [("unknown", "its source strings define no __kernel")]
        known = [p for p in pieces if p[0] != "unknown"]
        if len(known) < len(pieces):
            why = next(p[1] for p in pieces if p[0] == "unknown")
            if known:
                raise self.ctx.error(f"clCreateProgramWithSource: {why}; polyfuse would model a "
                                     "different program", node, UnsupportedError)
            if not self.given and not self.files.files:
                raise self.ctx.error(f"clCreateProgramWithSource: {why}; pass the kernel file(s) "
                                     "on the command line", node)
            return _with_options(self.cli_kernels(node, defines, include_dirs), flags)
        files = [p[1] for p in info.pieces if p[0] == "file"]
        self.built.append((files[0] if files else "", info.loc))
        self.built += [(f, info.loc) for f in files[1:]]
        if len(info.pieces) == 1 and files:
            path = files[0]
            return _with_options(self.parse_kernel_text(None, path, defines, include_dirs),
                                 flags)
        text = []
        for kind, value in info.pieces:
            if kind == "file":
                text.append(f'#line 1 "{value}"\n')
                text.append(preprocessor.read_source(value))
            else:
                where = info.loc.file if info.loc else self.ctx.filename
                text.append(f'#line {info.loc.line if info.loc else 1} "{where}"\n')
                text.append(value)
            if text[-1] and not text[-1].endswith("\n"):
                text.append("\n")
        name = files[0] if files else (info.loc.file if info.loc else self.ctx.filename)
        return _with_options(self.parse_kernel_text("".join(text), name, defines,
                                                    include_dirs), flags)

    def check_kernel_files(self) -> None:
        """A kernel file named on the command line that the host never builds is an error: the
        source the host reads is what runs, so modelling it would silently ignore the user's."""
        if self.cli_used or not self.built:
            return
        for given in self.files.files:
            if any(path and _same_file(given, path) for path, _ in self.built):
                continue
            path, loc = self.built[0]
            built = f"'{path}'" if path else "source strings"
            raise PolyfuseError(
                f"the host builds its kernels from {built}, not from '{given}' named on the "
                f"command line; pass {path or 'no kernel file'}, or --kernel-source-override "
                f"to build '{given}' in its place", loc.file if loc else self.ctx.filename,
                loc.line if loc else None)

    def parse_kernel_text(self, text: Optional[str], path: str,
                          defines: Mapping[str, Optional[str]],
                          include_dirs: Sequence[str]) -> dict[str, Kernel]:
        from polyfuse.frontend import opencl

        kf = self.files
        dirs = tuple(include_dirs) + kf.include_dirs
        if os.path.exists(path):
            dirs += (os.path.dirname(os.path.abspath(path)),)
        defs = dict(kf.defines)
        defs.update(defines)
        key = (text, path, dirs, tuple(sorted(defs.items(), key=str)))
        if key not in self.parse_cache:
            if text is None:
                self.parse_cache[key] = opencl.parse_kernels(path, include_dirs=dirs,
                                                             defines=defs)
            else:
                self.parse_cache[key] = opencl.parse_kernels(text, path, include_dirs=dirs,
                                                             defines=defs)
        return self.parse_cache[key]

    def build_options(self, options: str, node: c_ast.Node
                       ) -> tuple[dict[str, Optional[str]], list[str], tuple[str, ...]]:
        """``-D``/``-I`` of a build option string, and the compiler options (``-cl-*``, ``-w``,
        ``-Werror``) that do not change the model but are reproduced when the runtime builds."""
        try:
            words = shlex.split(options)
        except ValueError:
            raise self.ctx.error(f"clBuildProgram: cannot read the build options {options!r}",
                                 node) from None
        defines: dict[str, Optional[str]] = {}
        include_dirs: list[str] = []
        i = 0
        while i < len(words):
            w = words[i]
            if w in ("-D", "-I") and i + 1 < len(words):
                w = w + words[i + 1]
                i += 1
            if w.startswith("-D"):
                name, sep, value = w[2:].partition("=")
                defines[name] = value if sep else None
            elif w.startswith("-I"):
                include_dirs.append(self.find_file(w[2:]) or w[2:])
            i += 1
        return defines, include_dirs, runtime_options(words)

    def adopt(self, kernels: Mapping[str, Kernel], info: Optional[ProgInfo]
               ) -> dict[str, str]:
        """Add a program's kernels to the record; a name already taken by a different kernel
        (another program's) gets a suffix, so each program keeps its own kernels."""
        names: dict[str, str] = {}
        renames = self._helper_renames(kernels)
        for name, k in kernels.items():
            if renames:
                k = _with_helpers_renamed(k, renames)
            new = name
            n = 1
            while new in self.kernels and not _same_kernel(self.kernels[new], k):
                new = f"{name}_{n}"
                n += 1
            if new != name:
                k = _renamed_kernel(k, new)
            self.kernels.setdefault(new, k)
            names[name] = new
        return names

    def _helper_renames(self, kernels: Mapping[str, Kernel]) -> dict[str, str]:
        """New names for a program's helper functions that another program already defines
        differently (two files' ``exact_solution``, one on ``__global``, one on ``__constant``
        data): fused into one source, each program keeps its own."""
        from polyfuse.c import printer
        from polyfuse.c.emit import helper_functions

        taken: dict[str, str] = {}
        for k in self.kernels.values():
            for hn, fd in helper_functions(k.helpers).items():
                taken.setdefault(hn, printer.opencl_source(fd))
        out: dict[str, str] = {}
        for k in kernels.values():
            for hn, fd in helper_functions(k.helpers).items():
                if hn in out or hn not in taken or taken[hn] == printer.opencl_source(fd):
                    continue
                n = 1
                while f"{hn}_{n}" in taken or f"{hn}_{n}" in k.helpers:
                    n += 1
                out[hn] = f"{hn}_{n}"
        return out

    def find_file(self, path: str) -> Optional[str]:
        """A path the host opens, found relative to the host's directory or the cwd."""
        if os.path.isabs(path):
            return path if os.path.exists(path) else None
        for d in self.files.search_dirs:
            cand = os.path.join(d, path)
            if os.path.exists(cand):
                rel = os.path.relpath(cand)
                return rel if not rel.startswith("..") else os.path.normpath(cand)
        return None

    def kernel_names(self) -> list[tuple[str, str]]:
        """(name in its program's source, name in the record) of every kernel created."""
        return [pair for info in self.programs.values() if info.names
                for pair in info.names.items()]


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _same_kernel(a: Kernel, b: Kernel) -> bool:
    return a is b or (a.source == b.source and a.loc == b.loc and
                      a.build_options == b.build_options)


def _with_options(kernels: Mapping[str, Kernel], flags: Sequence[str]) -> dict[str, Kernel]:
    """Kernels of a program built with compiler options ``flags`` (``-cl-*``)."""
    if not flags:
        return dict(kernels)
    return {n: dataclasses.replace(k, build_options=k.build_options + tuple(flags))
            for n, k in kernels.items()}


def _with_helpers_renamed(k: Kernel, renames: Mapping[str, str]) -> Kernel:
    """``k`` with its helper functions renamed, definitions and calls."""
    import copy

    from polyfuse.c import printer

    def rename(fd: c_ast.Node) -> c_ast.Node:
        fd = copy.deepcopy(fd)
        for n in _nodes(fd):
            if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and \
                    n.name.name in renames:
                n.name.name = renames[n.name.name]
        if isinstance(fd, c_ast.FuncDef) and fd.decl.name in renames:
            _set_function_name(fd, renames[fd.decl.name])
        return fd

    if k.ast is None:
        return k
    ast = rename(k.ast)
    helpers = {renames.get(hn, hn): (ast if fd is k.ast else rename(fd))
               for hn, fd in k.helpers.items()}
    return dataclasses.replace(k, ast=ast, helpers=helpers, source=printer.opencl_source(ast))


def _nodes(node: c_ast.Node) -> list[c_ast.Node]:
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(c for _, c in n.children())
    return out


def _set_function_name(fd: c_ast.FuncDef, name: str) -> None:
    fd.decl.name = name
    t = fd.decl.type.type
    while not isinstance(t, c_ast.TypeDecl) and getattr(t, "type", None) is not None:
        t = t.type
    if isinstance(t, c_ast.TypeDecl):
        t.declname = name


def _renamed_kernel(k: Kernel, name: str) -> Kernel:
    """The same kernel under another name (two programs may each define a kernel ``mmul``)."""
    import copy

    from polyfuse.c import printer

    if k.ast is None:
        return dataclasses.replace(k, name=name)
    ast = copy.deepcopy(k.ast)
    ast.decl.name = name
    t = ast.decl.type.type
    while not isinstance(t, c_ast.TypeDecl) and getattr(t, "type", None) is not None:
        t = t.type
    if isinstance(t, c_ast.TypeDecl):
        t.declname = name
    return dataclasses.replace(k, name=name, ast=ast, source=printer.opencl_source(ast))


_KERNEL_RE = re.compile(r"\b(__kernel|kernel)\s+(__attribute__|void)\b")


def looks_like_opencl(path: str) -> bool:
    try:
        head = Path(path).read_bytes()[:65536]
    except OSError:
        return False
    return _KERNEL_RE.search(head.decode("utf-8", errors="replace")) is not None
