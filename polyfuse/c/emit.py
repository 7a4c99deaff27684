"""One emitter: the OpenCL C source of a program's kernels, each with the helper functions it
calls and the file-scope declarations (typedefs, structs, ``__constant`` tables) of its
translation unit, all held by the :class:`~polyfuse.core.program.Kernel` records themselves (so
kernels made from strings, e.g. fused ones, work as well as parsed files).  Code generation uses
the same pieces for the fused and the coarsened kernels."""

from __future__ import annotations

import re
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from polyfuse.c import preprocessor, printer
from polyfuse.core.program import PolyfuseError, Program, where


@dataclass(frozen=True)
class Source:
    """An OpenCL C source and where each function is in it."""

    text: str
    #: (first line, last line, kernel or helper name) of each function in ``text``
    spans: tuple[tuple[int, int, str], ...]


def extension_pragmas(texts: Iterable[str]) -> str:
    """The ``#pragma OPENCL EXTENSION`` lines the sources ``texts`` need: fp64 (``double``) and
    fp16 (``half`` buffers, ONNX float16) are extensions in OpenCL C 1.2, and the front-end
    drops ``#pragma`` lines, so whoever emits a program puts them back."""
    texts = list(texts)
    return "".join(f"#pragma OPENCL EXTENSION {ext} : enable\n"
                   for ext, word in (("cl_khr_fp64", "double"), ("cl_khr_fp16", "half"))
                   if any(re.search(rf"\b{word}\d*\b", t) for t in texts))


def declaration_text(node: Any) -> str:
    """One file-scope declaration as a line of C."""
    return printer.opencl_source(node).rstrip().rstrip(";") + ";\n"


def declarations_text(nodes: Iterable[Any]) -> str:
    """File-scope declarations, each once, in order."""
    return "".join(dict.fromkeys(declaration_text(d) for d in nodes))


def helper_functions(helpers: Mapping[str, Any]) -> dict[str, Any]:
    """The helper functions of a kernel's file (:attr:`Kernel.helpers` without the kernels)."""
    return {name: fd for name, fd in helpers.items() if not preprocessor.is_kernel(fd)}


def prototypes_text(helpers: Mapping[str, Any]) -> str:
    """Prototypes of helper functions, so they may call each other in any order."""
    return "".join(printer.opencl_source(fd.decl) + ";\n" for fd in helpers.values())


def helpers_text(helpers: Mapping[str, Any]) -> str:
    """Prototypes, then definitions of helper functions ("" without any)."""
    if not helpers:
        return ""
    return (prototypes_text(helpers) + "\n"
            + "\n".join(printer.opencl_source(fd) for fd in helpers.values()) + "\n")


#: the programs emitted last, newest first (by identity, with their kernel records) and their
#: sources: a session checks a program in a worker (its renamed kernel copies left out: a
#: second program) and then builds it, and printing the kernels of a real-size model takes a
#: second each time
_LAST: list[tuple[weakref.ref, tuple[int, ...], Source]] = []


def emit_program(program: Program) -> Source:
    """Complete OpenCL C source of every kernel of ``program``, buildable as is.

    A helper function defined differently by the files of two kernels cannot be built into one
    program and is refused, naming both kernels.
    """
    records = tuple(id(k) for k in program.kernels.values())
    for ref, recs, src in _LAST:
        if ref() is program and recs == records:
            return src
    src = _emit(program)
    _LAST[:] = [(weakref.ref(program), records, src), *_LAST[:1]]
    return src


def _emit(program: Program) -> Source:
    decls: list[str] = []
    helpers: dict[str, tuple[str, str, Any]] = {}  # name -> (text, kernel it came with, FuncDef)
    kernel_texts: list[tuple[str, str]] = []
    for kernel in program.kernels.values():
        if kernel.ast is None:
            if "kernel" not in kernel.source:
                raise PolyfuseError(f"kernel {kernel.name} has neither a syntax tree nor source "
                                    f"text to run", *where(kernel.loc))
            kernel_texts.append((kernel.name, kernel.source.strip() + "\n"))
            continue
        decls += [declaration_text(d) for d in kernel.declarations]
        for name, fd in helper_functions(kernel.helpers).items():
            if fd is kernel.ast:
                continue
            text = printer.opencl_source(fd)
            old = helpers.get(name)
            if old is not None and old[0] != text:
                raise PolyfuseError(f"helper function {name} differs between the files of "
                                    f"kernels {old[1]} and {kernel.name}; cannot build them "
                                    f"into one program", *where(kernel.loc))
            helpers.setdefault(name, (text, kernel.name, fd))
        kernel_texts.append((kernel.name, printer.opencl_source(kernel.ast)))
    parts: list[tuple[str, str]] = [("", "".join(dict.fromkeys(decls)))]
    if helpers:
        parts.append(("", prototypes_text({n: fd for n, (_t, _k, fd) in helpers.items()}) + "\n"))
        parts += [(name, text) for name, (text, _k, _fd) in helpers.items()]
    parts += kernel_texts
    out: list[str] = []
    spans = []
    line = 1
    pragmas = extension_pragmas(text for _, text in parts)
    out.append(pragmas)
    line += pragmas.count("\n")
    for name, text in parts:
        if not text:
            continue
        if not text.endswith("\n"):
            text += "\n"
        n = text.count("\n")
        if name:
            spans.append((line, line + n - 1, name))
        out.append(text)
        line += n
        if name:
            out.append("\n")
            line += 1
    return Source("".join(out), tuple(spans))


def program_source(program: Program) -> str:
    """Complete OpenCL C source of every kernel of ``program`` and its helpers, buildable as is."""
    return emit_program(program).text
