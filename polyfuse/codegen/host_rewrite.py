"""The user's host program rewritten to launch the fused kernels (``fused_host.c``).

The rewrite works like clang's ``Rewriter``: the host is re-parsed with libclang, and only the
tokens that must change are replaced, by their source ranges; comments, formatting and every
statement polyfuse did not touch stay as written.  What changes:

* a block of generated code (``pf_*``) is inserted after the host's ``#include`` lines: the fused
  OpenCL source as a C string, built lazily on the queue's context and device with the
  original build options, and one launch function per plan group;
* every ``clSetKernelArg`` call is renamed ``pf_set_arg``: the same call, which also keeps a
  copy of the argument (OpenCL cannot be asked for an argument's value later);
* the ``clEnqueueNDRangeKernel`` call of a group's last member (the group's planned host
  position) becomes ``pf_launch_g<N>`` with the same arguments: it takes the member's
  arguments, sets the fused kernel's arguments from the copies taken at each member's own
  launch, and enqueues the fused NDRange;
* the calls of the other members become ``pf_defer_g<N>_<k>``: they take a copy of the member's
  arguments at the moment the original would have launched (so a kernel object re-used with new
  arguments between launches is handled exactly) and launch nothing (a marker keeps an event or
  a wait list the original call had).

Symbolic sizes and scalars of the fused kernel are host expressions over the program's
parameters and host-loop iterators; their values are recovered from the copied arguments and
NDRanges of the members (a parameter is a scalar argument or a global size of some member), and
an iterator the copies do not give is passed by its C name at the launch.  Anything that cannot
be expressed this way is refused with :class:`HostRewriteError`, never guessed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import sympy

from polyfuse.c import preprocessor
from polyfuse.core.program import Launch, PolyfuseError, Program, host_loop_ids

#: environment variable: when set, the fused host prints how many fused launches it enqueued
COUNT_ENV = "POLYFUSE_COUNT_LAUNCHES"
_ARG_BYTES = 64
#: calls the rewrite renames in place (the others are only looked at)
_REWRITTEN = ("clEnqueueNDRangeKernel", "clSetKernelArg", "clCreateProgramWithSource", "fopen")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


class HostRewriteError(PolyfuseError):
    """The host program cannot be rewritten to launch the fused kernels (names the place)."""


@dataclass(frozen=True)
class _Call:
    """One ``clEnqueueNDRangeKernel``/``clSetKernelArg`` call in the main host file."""

    name: str
    line: int
    column: int
    callee: tuple[int, int]  # byte offsets of the callee name
    end: int  # byte offset of the closing parenthesis
    in_macro: bool
    file: str = ""  # absolute path of the host file
    #: a call written in a macro's body: the byte range of the macro invocation it expands from
    expansion: Optional[tuple[int, int]] = None


@dataclass(frozen=True)
class _For:
    """A ``for`` statement: its line, byte range and the offset of its body's ``{``."""

    line: int
    start: int
    end: int
    brace: Optional[int]
    file: str = ""


@dataclass(frozen=True)
class FusedHost:
    """The rewritten host: ``text`` to be saved as ``name`` next to ``fused.cl``."""

    name: str
    text: str
    #: group id -> number of the call sites replaced (launch + deferred members)
    groups: Mapping[int, int]
    #: what the rewrite did beyond replacing calls (wavefront launch fusion), for report.md
    notes: tuple[str, ...] = ()


# ----------------------------------------------------------------------------------------------
# libclang: the calls and the place for the generated block
# ----------------------------------------------------------------------------------------------


def _parse_calls(path: str, text: str, include_dirs: Iterable[str],
                 defines: Mapping[str, Optional[str]]
                 ) -> tuple[list[_Call], list[_For], int]:
    """The OpenCL calls of ``path`` with their byte ranges, and where to insert generated code."""
    from polyfuse.frontend import clang_host

    index = clang_host.libclang_index()
    if index is None:
        raise HostRewriteError("rewriting the host needs libclang (pip install libclang)", path)
    from clang import cindex

    base = os.path.dirname(os.path.abspath(path))
    tu, _ = clang_host.parse_unit(
        path, text, include_dirs=[base, *include_dirs], defines=defines,
        options=cindex.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD)
    main = os.path.abspath(path)
    calls: list[_Call] = []
    fors: list[_For] = []
    data = text.encode()
    first_decl = len(data)
    expansions: list[tuple[int, int]] = []  # byte ranges of the macro invocations
    for top in tu.cursor.get_children():
        loc = top.location
        if loc.file is None or os.path.abspath(loc.file.name) != main:
            continue
        if top.kind == cindex.CursorKind.MACRO_INSTANTIATION:
            expansions.append((top.extent.start.offset, top.extent.end.offset))
        if top.kind in (cindex.CursorKind.MACRO_DEFINITION, cindex.CursorKind.MACRO_INSTANTIATION,
                        cindex.CursorKind.INCLUSION_DIRECTIVE):
            continue
        first_decl = min(first_decl, top.extent.start.offset)
        for c in top.walk_preorder():
            if c.kind == cindex.CursorKind.FOR_STMT:
                kids = list(c.get_children())
                body = kids[-1] if kids else None
                brace = (body.extent.start.offset
                         if body is not None and body.kind == cindex.CursorKind.COMPOUND_STMT
                         else None)
                fors.append(_For(c.location.line, c.extent.start.offset, c.extent.end.offset,
                                 brace, main))
                continue
            if c.kind != cindex.CursorKind.CALL_EXPR:
                continue
            if c.spelling not in _REWRITTEN:
                if c.spelling:
                    calls.append(_Call(c.spelling, c.location.line, c.location.column,
                                       (c.extent.start.offset, c.extent.start.offset),
                                       c.extent.end.offset, True, main))
                continue
            callee = next(iter(c.get_children()), None)
            ext = c.extent
            in_macro = (ext.start.file is None or os.path.abspath(ext.start.file.name) != main
                        or callee is None)
            if callee is not None:
                cs, ce = callee.extent.start.offset, callee.extent.end.offset
                in_macro = in_macro or text.encode()[cs:ce].decode(errors="replace") != c.spelling
            else:
                cs = ce = 0
            call = _Call(c.spelling, c.location.line, c.location.column, (cs, ce),
                         ext.end.offset, in_macro, main)
            if in_macro:
                call = _macro_argument(call, data, expansions) or \
                    replace(call, expansion=next((e for e in expansions
                                                  if e[0] <= call.callee[0] < e[1]), None))
            if call not in calls:  # a macro may expand its argument twice
                calls.append(call)
    return calls, fors, _insert_position(data[:first_decl])


def _macro_argument(call: _Call, data: bytes, expansions: list[tuple[int, int]]
                    ) -> Optional[_Call]:
    """The call as spelled in a macro invocation's argument (``CHECK(clEnqueueNDRangeKernel(
    ...))``), where it can be rewritten in place like clang's Rewriter at the spelling location;
    None when it is written in the macro's body (or not exactly once in the invocation)."""
    at = call.callee[0]
    for start, end in expansions:
        if not start <= at < end:
            continue
        found = [m for m in re.finditer(rb"\b" + call.name.encode() + rb"\s*\(", data[start:end])]
        if len(found) != 1:
            return None
        cs = start + found[0].start()
        close = _closing_paren(data, start + found[0].end() - 1, end)
        if close is None:
            return None
        return replace(call, callee=(cs, cs + len(call.name)), end=close + 1, in_macro=False)
    return None


def _closing_paren(data: bytes, open_at: int, limit: int) -> Optional[int]:
    """Offset of the ``)`` matching the ``(`` at ``open_at`` (string and character literals
    skipped), or None before ``limit``."""
    depth, i = 0, open_at
    while i < limit:
        ch = data[i:i + 1]
        if ch in (b'"', b"'"):
            j = i + 1
            while j < limit and data[j:j + 1] != ch:
                j += 2 if data[j:j + 1] == b"\\" else 1
            i = j
        elif ch == b"(":
            depth += 1
        elif ch == b")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _insert_position(head: bytes) -> int:
    """After the last ``#include`` (or the ``#endif`` of a block with one) at conditional depth
    0 before the first declaration: the host's own headers come first, and the generated code
    never lands inside an ``#ifdef __APPLE__ ... #else ... #endif``."""
    pos, depth, offset, has_include = 0, 0, 0, False
    for line in head.splitlines(keepends=True):
        offset += len(line)
        m = re.match(rb"^[ \t]*#[ \t]*(\w+)", line)
        if m is None:
            continue
        word = m.group(1)
        if word in (b"if", b"ifdef", b"ifndef"):
            depth += 1
        elif word == b"endif":
            depth = max(0, depth - 1)
            if depth == 0 and has_include:
                pos, has_include = offset, False
        elif word == b"include":
            if depth == 0:
                pos = offset
            else:
                has_include = True
    return pos


# ----------------------------------------------------------------------------------------------
# C text of host expressions
# ----------------------------------------------------------------------------------------------


def _c_expr(e: Any, names: Mapping[str, str]) -> str:
    """C (``long long`` arithmetic, exact floor division) for an integer host expression."""
    e = sympy.sympify(e)
    if e.is_Integer:
        return f"{int(e)}LL"
    if e.is_Symbol:
        if str(e) not in names:
            raise KeyError(str(e))
        return names[str(e)]
    if isinstance(e, sympy.floor):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        if den.is_Integer and int(den) > 0:
            return f"pf_floordiv({_c_expr(sympy.expand(num), names)}, {int(den)}LL)"
    if isinstance(e, sympy.Add):
        num, den = sympy.fraction(sympy.together(e))
        if den != 1:
            raise ValueError(f"not an integer expression: {e}")
        return "(" + " + ".join(_c_expr(a, names) for a in e.args) + ")"
    if isinstance(e, sympy.Mul):
        if any(a.is_Rational and not a.is_Integer for a in e.args):
            raise ValueError(f"not an integer expression: {e}")
        return "(" + " * ".join(_c_expr(a, names) for a in e.args) + ")"
    if isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
        return "(" + " * ".join([_c_expr(e.base, names)] * int(e.exp)) + ")"
    if isinstance(e, (sympy.Max, sympy.Min)):
        op = ">" if isinstance(e, sympy.Max) else "<"
        parts = [_c_expr(a, names) for a in e.args]
        out = parts[0]
        for p in parts[1:]:
            out = f"(({out}) {op} ({p}) ? ({out}) : ({p}))"
        return out
    raise ValueError(f"cannot express {e} in C")


def _c_value(e: Any, ctype: str, names: Mapping[str, str]) -> str:
    e = sympy.sympify(e)
    if e.is_Number and not e.is_Integer:
        return repr(float(e))
    return _c_expr(e, names)


def _c_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _c_string(text: str) -> str:
    out = []
    for line in text.splitlines(keepends=True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        out.append(f'    "{esc}"')
    return "\n".join(out) or '    ""'


# ----------------------------------------------------------------------------------------------
# The rewrite
# ----------------------------------------------------------------------------------------------


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[^\n]*$', re.M)


def _inline_includes(path: str, include_dirs: Iterable[str], seen: tuple[str, ...] = ()) -> str:
    """The text of kernel file ``path`` with its ``#include "..."`` files written in, so the
    embedded copy builds without them; an include not found stays as written."""
    text = preprocessor.read_source(path)
    dirs = [os.path.dirname(os.path.abspath(path)), *include_dirs]

    def expand(m: re.Match) -> str:
        for d in dirs:
            inc = os.path.join(d, m.group(1))
            if os.path.isfile(inc) and os.path.abspath(inc) not in seen:
                body = _inline_includes(inc, include_dirs, (*seen, os.path.abspath(path)))
                return f'#line 1 "{m.group(1)}"\n{body}\n'
        return m.group(0)

    return _INCLUDE.sub(expand, text)


def _original_sources(program: Program, hosts: Sequence[str], include_dirs: Iterable[str]
                      ) -> list[tuple[str, str]]:
    """(file name, text) of every kernel file the host builds its programs from."""
    files = sorted({k.loc.file for k in program.kernels.values() if k.loc is not None
                    and os.path.isfile(k.loc.file) and os.path.abspath(k.loc.file) not in hosts})
    return [(os.path.basename(f), _inline_includes(f, tuple(include_dirs))) for f in files]


#: the host's own kernel files, embedded: ``fopen`` of one of them (by file name, for reading)
#: reads the embedded copy through a ``tmpfile``, so the program runs from any directory; with
#: one kernel file and one ``clCreateProgramWithSource`` call, the call is given the embedded
#: text whatever the host read
_ORIGINALS = r"""
static const char* const pf_orig_names[] = {@NAMES@};
static const char* const pf_orig_texts[] = {@TEXTS@};
static const int pf_orig_count = @COUNT@;

/* fopen, reading the embedded copy of a kernel file (the original reads it from disk) */
PF_UNUSED static FILE* pf_fopen(const char* path, const char* mode)
{
    const char* base = path;
    const char* p;
    int i;
    for (p = path; *p; p++)
        if (*p == '/' || *p == '\\')
            base = p + 1;
    for (i = 0; mode[0] == 'r' && mode[1] != '+' && i < pf_orig_count; i++) {
        if (strcmp(base, pf_orig_names[i]) == 0) {
            FILE* f = tmpfile();
            size_t n = strlen(pf_orig_texts[i]);
            if (f != NULL && fwrite(pf_orig_texts[i], 1, n, f) == n && fseek(f, 0L, SEEK_SET) == 0)
                return f;
            if (f != NULL)
                fclose(f);
            break;
        }
    }
    return fopen(path, mode);
}

/* clCreateProgramWithSource from the embedded kernel file (the host's only one) */
PF_UNUSED static cl_program pf_create_program(cl_context context, cl_uint count,
                                              const char** strings, const size_t* lengths,
                                              cl_int* err)
{
    const char* src = pf_orig_texts[0];
    (void)count;
    (void)strings;
    (void)lengths;
    return clCreateProgramWithSource(context, 1, &src, NULL, err);
}
"""


_PRELUDE = r"""
/* ---- polyfuse: fused kernels (generated by `polyfuse fuse`; their source is fused.cl) ---- */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <CL/cl.h>
#if defined(__GNUC__) || defined(__clang__)
#define PF_UNUSED __attribute__((unused))
#else
#define PF_UNUSED
#endif

static const char pf_source[] =
@SOURCE@;
static const char pf_options[] = @OPTIONS@;

typedef struct {
    cl_kernel kernel;
    cl_uint index;
    size_t size;
    int null;
    unsigned char value[@ARGB@];
} pf_arg_t;
typedef struct { pf_arg_t args[@MAXARGS@]; cl_uint dim; size_t gws[3]; } pf_snap_t;
static pf_arg_t* pf_table;
static size_t pf_table_len, pf_table_cap;
static unsigned long pf_launches;

PF_UNUSED static long long pf_floordiv(long long a, long long b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

static void pf_count_report(void)
{
    if (getenv("@COUNTENV@"))
        fprintf(stderr, "polyfuse: %lu fused launches\n", pf_launches);
}

/* clSetKernelArg, keeping a copy of the value for the fused launches */
static cl_int pf_set_arg(cl_kernel kernel, cl_uint index, size_t size, const void* value)
{
    size_t i;
    cl_int err = clSetKernelArg(kernel, index, size, value);
    if (err != CL_SUCCESS)
        return err;
    for (i = 0; i < pf_table_len; i++)
        if (pf_table[i].kernel == kernel && pf_table[i].index == index)
            break;
    if ((value != NULL && size > @ARGB@) || index >= @MAXARGS@) {
        /* not an argument of a fused member: forget any older copy */
        if (i < pf_table_len)
            pf_table[i].size = 0;
        return CL_SUCCESS;
    }
    if (i == pf_table_len) {
        if (pf_table_len == pf_table_cap) {
            size_t cap = pf_table_cap ? 2 * pf_table_cap : 64;
            pf_arg_t* t = (pf_arg_t*)realloc(pf_table, cap * sizeof(pf_arg_t));
            if (t == NULL)
                return CL_OUT_OF_HOST_MEMORY;
            pf_table = t;
            pf_table_cap = cap;
        }
        pf_table_len++;
    }
    pf_table[i].kernel = kernel;
    pf_table[i].index = index;
    pf_table[i].size = size;
    pf_table[i].null = value == NULL;
    if (value != NULL)
        memcpy(pf_table[i].value, value, size);
    return CL_SUCCESS;
}

/* the arguments and NDRange of a member launch, at the moment it would have run */
static void pf_snap(pf_snap_t* s, cl_kernel kernel, cl_uint dim, const size_t* gws)
{
    size_t i;
    memset(s, 0, sizeof(*s));
    for (i = 0; i < pf_table_len; i++)
        if (pf_table[i].kernel == kernel && pf_table[i].index < @MAXARGS@)
            s->args[pf_table[i].index] = pf_table[i];
    s->dim = dim;
    for (i = 0; i < dim && i < 3; i++)
        s->gws[i] = gws[i];
}

PF_UNUSED static cl_int pf_copy_arg(cl_kernel fused, cl_uint index, const pf_arg_t* a)
{
    if (a->size == 0)
        return CL_INVALID_KERNEL_ARGS;
    return clSetKernelArg(fused, index, a->size, a->null ? NULL : a->value);
}

/* a deferred member: nothing runs now, but its wait list and event are kept */
PF_UNUSED static cl_int pf_defer(cl_command_queue queue, cl_uint nwait, const cl_event* wait,
                                 cl_event* event)
{
    if (nwait == 0 && event == NULL)
        return CL_SUCCESS;
    return clEnqueueMarkerWithWaitList(queue, nwait, wait, event);
}

/* the fused program, built once per context from the embedded source */
static cl_kernel pf_kernel(cl_command_queue queue, int which, const char* name, cl_int* err)
{
    static cl_context context;
    static cl_program program;
    static cl_kernel kernels[@NGROUPS@];
    cl_context ctx;
    cl_device_id device;
    *err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof(ctx), &ctx, NULL);
    if (*err != CL_SUCCESS)
        return NULL;
    if (program == NULL || ctx != context) {
        const char* src = pf_source;
        *err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof(device), &device, NULL);
        if (*err != CL_SUCCESS)
            return NULL;
        program = clCreateProgramWithSource(ctx, 1, &src, NULL, err);
        if (*err != CL_SUCCESS)
            return NULL;
        *err = clBuildProgram(program, 1, &device, pf_options, NULL, NULL);
        if (*err != CL_SUCCESS) {
            size_t n = 0;
            char* log;
            clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
            log = (char*)malloc(n + 1);
            if (log != NULL) {
                clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, n, log, NULL);
                log[n] = '\0';
                fprintf(stderr, "polyfuse: the fused kernels do not build:\n%s\n", log);
                free(log);
            }
            clReleaseProgram(program);
            program = NULL;
            return NULL;
        }
        if (context == NULL)
            atexit(pf_count_report);
        context = ctx;
        memset(kernels, 0, sizeof(kernels));
    }
    if (kernels[which] == NULL)
        kernels[which] = clCreateKernel(program, name, err);
    else
        *err = CL_SUCCESS;
    return kernels[which];
}
"""


@dataclass
class _Values:
    """Where the fused launch of one group takes each host value from (see the module doc)."""

    sources: dict[str, tuple[str, str]]  # symbol -> (C type, C expression over the copies)
    iterators: list[str]
    where: str
    shown: str
    line: int
    passed: list[str] = field(default_factory=list)  # iterators passed at the call
    used: list[str] = field(default_factory=list)  # symbols taken from the copies

    def name_of(self, sym: str) -> str:
        if sym in self.sources:
            if sym not in self.used:
                self.used.append(sym)
            return f"pf_v_{sym}"
        if sym in self.iterators and _IDENT.match(sym):
            if sym not in self.passed:
                self.passed.append(sym)
            return f"pf_it_{sym}"
        raise HostRewriteError(f"{self.where}: the fused launch needs the host value {sym!r}, "
                               "which no member's arguments or sizes hold", self.shown,
                               self.line)

    def c_of(self, e: Any, ctype: str = "long long") -> str:
        e = sympy.sympify(e)
        names = {str(s): self.name_of(str(s)) for s in sorted(e.free_symbols, key=str)}
        try:
            return _c_value(e, ctype, names)
        except ValueError as err:
            raise HostRewriteError(f"{self.where}: {err}", self.shown, self.line) from None


def _params_of(fused_source_kernel: Any) -> list[Any]:
    return sorted(fused_source_kernel.params, key=lambda p: p.index)


def rewrite_host(program: Program, fused: Any, host_path: str, *,
                 include_dirs: Iterable[str] = (),
                 defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
                 build_options: str = "") -> FusedHost:
    """``fused_host.c`` for ``program`` and its fused program ``fused`` (a FusedProgram)."""
    return rewrite_hosts(program, fused, [host_path], include_dirs=include_dirs,
                         defines=defines, build_options=build_options)[0]


def rewrite_hosts(program: Program, fused: Any, host_paths: Sequence[str], *,
                  include_dirs: Iterable[str] = (),
                  defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
                  build_options: str = "") -> tuple[FusedHost, ...]:
    """The fused host for a program whose host is one file or several (``fused_<file>`` each).

    With several files, the generated code is defined once, in the file holding ``main`` (else
    the first), and declared in the others; each file's calls are rewritten where they stand.
    """
    files = [os.path.abspath(p) for p in host_paths]
    datas: dict[str, bytes] = {}
    inserts: dict[str, int] = {}
    calls: list[_Call] = []
    fors: list[_For] = []
    for path, main in zip(host_paths, files):
        text = preprocessor.read_source(path)  # any encoding: a stray byte in a comment is no error
        datas[main] = text.encode()
        file_calls, file_fors, inserts[main] = _parse_calls(path, text, include_dirs, defines)
        calls += file_calls
        fors += file_fors
    shown = os.path.basename(host_paths[0])

    def where(launch: Launch) -> str:
        return f"launch #{launch.id} ({launch.kernel})"

    enqueues = [c for c in calls if c.name == "clEnqueueNDRangeKernel"]
    sites: dict[int, _Call] = {}  # launch id -> its call
    for launch in program.launches:
        if launch.loc is None or os.path.abspath(launch.loc.file) not in files:
            raise HostRewriteError(f"{where(launch)} is not a clEnqueueNDRangeKernel call of "
                                   "the host file(s)", shown)
        shown = os.path.basename(launch.loc.file)
        on_line = [c for c in enqueues if c.line == launch.loc.line
                   and c.file == os.path.abspath(launch.loc.file)]
        if len(on_line) > 1:
            on_line = [c for c in on_line if c.column == launch.loc.column] or on_line
        if len(on_line) != 1:
            raise HostRewriteError(f"cannot find the clEnqueueNDRangeKernel call of "
                                   f"{where(launch)}", shown, launch.loc.line)
        c = on_line[0]
        if c.in_macro and (c.expansion is None or b"\n" in datas[c.file][slice(*c.expansion)]):
            raise HostRewriteError(f"the clEnqueueNDRangeKernel call of {where(launch)} is "
                                   "written inside a macro invoked over several lines; it cannot "
                                   "be rewritten in place", shown, launch.loc.line)
        sites[launch.id] = c
    by_site: dict[tuple[str, int, int], list[int]] = {}
    for lid, c in sites.items():
        by_site.setdefault((c.file, *c.callee), []).append(lid)
    size_of = {m: len(g.members) for g in fused.plan.groups for m in g.members}
    positions = {op.id: i for i, op in enumerate(program.ops)}
    loop_ids = host_loop_ids(program.ops)
    untouched: set[int] = set()  # launches left as written (their call runs several launches)
    #: calls that run several launches (a helper called several times): a dispatcher picks the
    #: launch by how often the call ran, in host order, when every launch of the call runs once
    #: per iteration of the same host loops
    shared: dict[tuple[str, int, int], list[int]] = {}
    for key, lids in by_site.items():
        if len(lids) == 1 and sites[lids[0]].in_macro and size_of.get(lids[0]) != 1:
            shared[key] = lids  # in a macro's body: reached through a dispatcher by its line
        elif len(lids) > 1:
            if all(size_of.get(lid) == 1 for lid in lids):
                untouched.update(lids)  # nothing fused: the original kernel still runs there
                continue
            if len({loop_ids[lid] for lid in lids}) == 1:
                shared[key] = sorted(lids, key=lambda lid: positions[lid])
                continue
            line = sites[lids[0]].line
            raise HostRewriteError(f"one clEnqueueNDRangeKernel call runs launches {sorted(lids)} "
                                   "in different host loops; polyfuse cannot tell which launch "
                                   "each run of the call is",
                                   os.path.basename(sites[lids[0]].file), line)
    shared_of = {lid: key for key, lids in shared.items() for lid in lids}
    dispatch: dict[int, str] = {}  # launch id -> the function its run of a shared call takes
    by_line: dict[tuple[str, int], tuple[int, int]] = {}  # (file, line) -> (dispatcher, launch)
    cl_calls = ("clEnqueueNDRangeKernel", "clSetKernelArg")
    other_calls = [c for c in calls if c.name not in cl_calls]
    calls = [c for c in calls if c.name in cl_calls]

    plan = fused.plan
    fprog = fused.program
    edits: list[tuple[str, int, int, str]] = []  # (file, start, end, replacement) in bytes
    waves: list[str] = []  # wavefront kernels (in the fused source) the host launches
    notes: list[str] = []
    functions: list[str] = []
    counts: dict[int, int] = {}
    max_args = 1
    for gi, g in enumerate(plan.groups):
        frags = list(g.fragments)
        members = [program.op(f.launch) for f in frags]
        if any(m.id in untouched for m in members):
            notes.append(f"plan group {g.id} (launch #{members[0].id} {members[0].kernel}) left "
                         "as written: its call runs several launches")
            continue
        last = max(members, key=lambda m: positions[m.id])
        shown = os.path.basename(sites[last.id].file)
        kname = fused.group_kernels[g.id]
        kernel = fprog.kernels[kname]
        wavefront = getattr(fused, "wavefronts", {}).get(g.id)
        flaunch = wavefront.launch if wavefront is not None else \
            next(op for op in fprog.launches if op.kernel == kname)
        for m in members:
            if m is not last and loop_ids[m.id] != loop_ids[last.id][:len(loop_ids[m.id])]:
                raise HostRewriteError(f"plan group {g.id}: {where(m)} is not in the host loops "
                                       f"of {where(last)}, where the fused launch goes", shown,
                                       sites[m.id].line)
            max_args = max(max_args, len(program.kernels[m.kernel].params))
        # where each host symbol's value comes from
        sources: dict[str, tuple[str, str]] = {}
        for k, m in enumerate(members):
            orig = program.kernels[m.kernel]
            for a in m.args:
                p = orig.params[a.index]
                if a.kind != "scalar" or p.pointer:
                    continue
                val = m.scalar_value(a, p.name)
                if val.is_Symbol and str(val) not in sources:
                    sources[str(val)] = (_env_type(p.type), f"pf_get_{_ctype_id(p.type)}"
                                         f"(&s[{k}].args[{a.index}])")
            for d, gsz in enumerate(m.global_size):
                gsz = sympy.sympify(gsz)
                if gsz.is_Symbol and str(gsz) not in sources:
                    sources[str(gsz)] = ("long long", f"(long long)s[{k}].gws[{d}]")
        vals = _Values(sources, [lp.iterator for lp in last.loops],
                       f"plan group {g.id}", shown, sites[last.id].line)
        c_of = vals.c_of
        lines: list[str] = []
        frag_launch = {k + 1: m for k, m in enumerate(members)}
        checks = _specialization_checks(program, members)
        for p in _params_of(kernel):
            b = flaunch.arg(p.index)
            mm = re.match(r"^f(\d+)_(.+)$", p.name)
            if (p.pointer or b.kind in ("buffer", "local")) and mm:
                k = int(mm.group(1))
                orig = program.kernels[frag_launch[k].kernel]
                oi = orig.param(mm.group(2)).index
                lines.append(f"    if (err == CL_SUCCESS) err = pf_copy_arg(f, base + {p.index}, "
                             f"&s[{k - 1}].args[{oi}]);")
            elif b.kind == "scalar" and b.value is not None and \
                    (same := _same_scalar(program, members, b.value, p.type)) is not None:
                # a member's own argument with this value: copied as the member set it
                lines.append(f"    if (err == CL_SUCCESS) err = pf_copy_arg(f, base + {p.index}, "
                             f"&s[{same[0]}].args[{same[1]}]);")
            elif b.kind == "scalar" and b.value is not None:
                ctype = _host_type(p.type)
                lines.append(f"    if (err == CL_SUCCESS) {{ {ctype} v = ({ctype})"
                             f"({c_of(b.value, ctype)}); err = clSetKernelArg(f, base + {p.index}, "
                             f"sizeof(v), &v); }}")
            else:
                raise HostRewriteError(f"plan group {g.id}: argument {p.index} ({p.name}) of "
                                       f"{kname} has no value polyfuse can give on the host",
                                       shown, sites[last.id].line)
        wd = len(flaunch.global_size)
        gs = ", ".join(f"(size_t)({c_of(x)})" for x in flaunch.global_size)
        ls = ", ".join(f"(size_t)({c_of(x)})" for x in flaunch.local_size) \
            if flaunch.local_size is not None else None
        env = [f"    {sources[sym][0]} pf_v_{sym} = {sources[sym][1]}; (void)pf_v_{sym};"
               for sym in vals.used]
        passed = vals.passed
        n = len(members)
        it_params = "".join(f", long long pf_it_{it}" for it in passed)
        it_args = "".join(f", pf_it_{it}" for it in passed)
        sig = ("(cl_command_queue queue, cl_kernel kernel, cl_uint dim, const size_t* offset, "
               "const size_t* gws, const size_t* lws, cl_uint nwait, const cl_event* wait, "
               "cl_event* event")
        body = [f"/* plan group {g.id}: "
                + ", ".join(f"#{m.id} {m.kernel}" for m in members) + f" -> {kname} */",
                f"static cl_int pf_setargs_g{g.id}(cl_kernel f, cl_uint base, pf_snap_t* s"
                f"{it_params})", "{", "    cl_int err = CL_SUCCESS;", *env, *lines,
                "    return err;", "}"]
        k_last = members.index(last)
        try:
            if wavefront is not None and any(m.id in shared_of for m in members):
                raise HostRewriteError("a clEnqueueNDRangeKernel call of the group runs several "
                                       "launches", shown, sites[last.id].line)
            wave = None if wavefront is None else \
                _wave_plan(g, last, fors, other_calls, sites[last.id], flaunch, shown,
                           wavefront)
        except HostRewriteError as err:
            wave = None
            notes.append(f"wavefront launch fusion not applied: {err}")
        if wave is None:
            body.append(f"static pf_snap_t pf_g{g.id}_snap[{n}];")
            for k, m in enumerate(members):
                if m is last:
                    continue
                body += [f"static cl_int pf_defer_g{g.id}_{k + 1}{sig})", "{",
                         "    (void)offset;", "    (void)lws;",
                         f"    pf_snap(&pf_g{g.id}_snap[{k}], kernel, dim, gws);",
                         "    return pf_defer(queue, nwait, wait, event);", "}"]
            body += [f"static cl_int pf_launch_g{g.id}{sig}{it_params})", "{",
                     f"    pf_snap_t* s = pf_g{g.id}_snap;", "    cl_int err;", "    cl_kernel f;",
                     "    (void)offset;", "    (void)lws;",
                     f"    pf_snap(&s[{k_last}], kernel, dim, gws);",
                     *env,
                     *checks,
                     f"    f = pf_kernel(queue, {gi}, \"{kname}\", &err);",
                     "    if (f == NULL)", "        return err;",
                     f"    err = pf_setargs_g{g.id}(f, 0, s{it_args});",
                     "    if (err != CL_SUCCESS)", "        return err;",
                     "    {", f"        size_t g[{wd}] = {{{gs}}};"]
            if ls is not None:
                body += [f"        size_t l[{wd}] = {{{ls}}};"]
            body += ["        pf_launches++;",
                     f"        return clEnqueueNDRangeKernel(queue, f, {wd}, NULL, g, "
                     f"{'l' if ls is not None else 'NULL'}, nwait, wait, event);", "    }", "}"]
            for k, m in enumerate(members):
                c = sites[m.id]
                if m.id in shared_of:
                    if m is last and passed:
                        raise HostRewriteError(f"plan group {g.id}: the fused launch needs host-"
                                               f"loop iterators ({', '.join(passed)}), but its "
                                               "call runs several launches", shown, c.line)
                    dispatch[m.id] = (f"pf_launch_g{g.id}" if m is last
                                      else f"pf_defer_g{g.id}_{k + 1}")
                elif m is last:
                    edits.append((c.file, c.callee[0], c.callee[1], f"pf_launch_g{g.id}"))
                    if passed:
                        extra = "".join(f", (long long)({it})" for it in passed)
                        edits.append((c.file, c.end - 1, c.end - 1, extra))
                else:
                    edits.append((c.file, c.callee[0], c.callee[1], f"pf_defer_g{g.id}_{k + 1}"))
        else:
            wi = len(waves)
            wname = wavefront.kernel
            waves.append(wname)
            body += _wave_functions(g.id, wave, members, last, sig, checks, it_params,
                                    it_args, len(kernel.params), len(plan.groups) + wi, wname,
                                    wd, flaunch)
            slot_arg = f", (long long)({wave.slot})"
            for k, m in enumerate(members):
                c = sites[m.id]
                if m is last:
                    edits.append((c.file, c.callee[0], c.callee[1], f"pf_wave_g{g.id}"))
                    extra = "".join(f", (long long)({it})" for it in passed) + slot_arg
                else:
                    edits.append((c.file, c.callee[0], c.callee[1], f"pf_wdefer_g{g.id}_{k + 1}"))
                    extra = slot_arg
                edits.append((c.file, c.end - 1, c.end - 1, extra))
            edits += wave.edits(g.id)
            counts_text = ""
            try:
                other = next(lp for lp in last.loops if lp.iterator != wave.slot)
                trips = int(other.upper) - int(other.lower)
                counts_text = (f"; kernel launches {wave.slots} x {trips} x {len(members)} = "
                               f"{wave.slots * trips * len(members)} -> {wave.slots} + {trips} "
                               f"- 1 = {wave.slots + trips - 1}")
            except (TypeError, ValueError):
                pass
            notes.append(f"plan group {g.id}: wavefront launch fusion: one launch of "
                         f"{wave.slots} fragments per step {wave.outer} + {wave.inner} "
                         f"(host loops rewritten at {shown}:{wave.line}){counts_text}")
        functions.append("\n".join(body))
        counts[g.id] = len(members)
    for n, (_key, lids) in enumerate(sorted(shared.items())):
        c = sites[lids[0]]
        cases = [f"    case {i}: return {dispatch[lid]}(queue, kernel, dim, offset, gws, lws, "
                 "nwait, wait, event);" for i, lid in enumerate(lids)]
        functions.append("\n".join([
            f"/* {os.path.basename(c.file)}:{c.line}: one call, launches "
            + ", ".join(f"#{lid}" for lid in lids) + " in turn */",
            f"static cl_int pf_site_{n}(cl_command_queue queue, cl_kernel kernel, cl_uint dim, "
            "const size_t* offset, const size_t* gws, const size_t* lws, cl_uint nwait, "
            "const cl_event* wait, cl_event* event)", "{", "    static unsigned long count;",
            f"    switch (count++ % {len(lids)}) {{", *cases, "    }",
            "    return CL_INVALID_OPERATION;", "}"]))
        if c.in_macro:
            at = (c.file, c.line)
            if at in by_line:
                raise HostRewriteError("two macro invocations on one line enqueue launches "
                                       f"#{by_line[at][1]} and #{lids[0]}; polyfuse tells the "
                                       "macro's calls apart by their line",
                                       os.path.basename(c.file), c.line)
            by_line[at] = (n, lids[0])
        else:
            edits.append((c.file, c.callee[0], c.callee[1], f"pf_site_{n}"))
    # calls in macros' bodies: in each such file clEnqueueNDRangeKernel is redefined to pass the
    # line the macro was invoked on (__LINE__); launches polyfuse did not place run as written
    macro_files = sorted({f for f, _line in by_line})
    for i, f in enumerate(macro_files):
        cases = [f"    case {line}: return pf_site_{n}(queue, kernel, dim, offset, gws, lws, "
                 "nwait, wait, event);" for (g, line), (n, _lid) in sorted(by_line.items())
                 if g == f]
        functions.append("\n".join([
            f"/* clEnqueueNDRangeKernel in macros of {os.path.basename(f)}, by invocation line */",
            f"static cl_int pf_enqueue_at_{i}(int line, cl_command_queue queue, cl_kernel kernel, "
            "cl_uint dim, const size_t* offset, const size_t* gws, const size_t* lws, "
            "cl_uint nwait, const cl_event* wait, cl_event* event)", "{",
            "    switch (line) {", *cases, "    }",
            "    return clEnqueueNDRangeKernel(queue, kernel, dim, offset, gws, lws, nwait, wait, "
            "event);", "}"]))
    for c in calls:
        if c.name == "clSetKernelArg" and not c.in_macro:
            edits.append((c.file, c.callee[0], c.callee[1], "pf_set_arg"))
    originals = _original_sources(program, files, include_dirs)
    creates = [c for c in other_calls if c.name == "clCreateProgramWithSource"]
    for c in other_calls:
        if originals and c.name == "fopen" and not c.in_macro:
            edits.append((c.file, c.callee[0], c.callee[1], "pf_fopen"))
    if len(originals) == 1 and len(creates) == 1 and not creates[0].in_macro:
        edits.append((creates[0].file, creates[0].callee[0], creates[0].callee[1],
                      "pf_create_program"))

    getters = []
    used_getters = set(re.findall(r"pf_get_(\w+)\(", "\n".join(functions)))
    for ctype in sorted({p.type for k in program.kernels.values() for p in k.params
                         if not p.pointer and _ctype_id(p.type) in used_getters}):
        rtype = _env_type(ctype)
        getters.append(f"static {rtype} pf_get_{_ctype_id(ctype)}(const pf_arg_t* a)\n{{\n"
                       f"    {_host_type(ctype)} v;\n    memset(&v, 0, sizeof(v));\n"
                       f"    memcpy(&v, a->value, a->size < sizeof(v) ? a->size : sizeof(v));\n"
                       f"    return ({rtype})v;\n}}")
    source = fused.source
    prelude = (_PRELUDE.replace("@SOURCE@", _c_string(source))
               .replace("@OPTIONS@", '"' + build_options.replace('"', '\\"') + '"')
               .replace("@ARGB@", str(_ARG_BYTES)).replace("@MAXARGS@", str(max_args))
               .replace("@COUNTENV@", COUNT_ENV)
               .replace("@NGROUPS@", str(max(1, len(plan.groups) + len(waves)))))
    prelude += "\n" + "\n\n".join(getters + functions) + "\n"
    if originals:
        prelude += (_ORIGINALS.replace("@COUNT@", str(len(originals)))
                    .replace("@NAMES@", ", ".join(_c_quote(n) for n, _ in originals))
                    .replace("@TEXTS@", ",\n".join(_c_string(t) for _, t in originals)))
    owner = _defining_file(files, datas)
    if len(files) > 1:
        prelude = _external(prelude)
    out_hosts = []
    for path, main in zip(host_paths, files):
        block = prelude if main == owner else _declarations(prelude)
        if any(c.name == "clSetKernelArg" and c.in_macro and c.file == main for c in calls):
            # calls written inside the host's own macros: renamed where the macro expands
            block += "#define clSetKernelArg pf_set_arg\n"
        if originals and any(c.name == "fopen" and c.in_macro and c.file == main
                             and c.callee[1] > c.callee[0] for c in other_calls):
            block += "#define fopen pf_fopen\n"
        if main in macro_files:
            block += ("#define clEnqueueNDRangeKernel(...) "
                      f"pf_enqueue_at_{macro_files.index(main)}(__LINE__, __VA_ARGS__)\n")
        # the host's own lines keep their numbers (diagnostics, and __LINE__ in its macros)
        before = datas[main][:inserts[main]].count(b"\n")
        if before >= 2:
            block += f"#line {before - 1}\n"
        block += "/* ---- end of polyfuse ---- */\n\n"
        out = datas[main]
        mine = [e[1:] for e in edits if e[0] == main] + [(inserts[main], inserts[main], block)]
        for start, end, text in sorted(mine, key=lambda e: (e[0], e[1]), reverse=True):
            out = out[:start] + text.encode() + out[end:]
        suffix = Path(path).suffix or ".c"
        name = f"fused_host{suffix}" if len(files) == 1 else f"fused_{Path(path).name}"
        out_hosts.append(FusedHost(name=name, text=out.decode(), groups=counts,
                                   notes=tuple(notes) if main == owner else ()))
    return tuple(out_hosts)


_EXTERNAL = re.compile(r"^(?:PF_UNUSED )?static ((?:cl_int|FILE\*|cl_program) "
                       r"pf_(?:set_arg|fopen|create_program|launch_g\d+|defer_g\d+_\d+|"
                       r"wave_g\d+|wdefer_g\d+_\d+|wave_flush_g\d+|site_\d+|"
                       r"enqueue_at_\d+)\()", re.M)
_PROTOTYPE = re.compile(r"^((?:cl_int|FILE\*|cl_program) pf_\w+\([^{;]*?\))\s*\n\{", re.M | re.S)


def _external(prelude: str) -> str:
    """The generated block with the functions the host's calls use given external linkage, so
    the other host files can call them."""
    return _EXTERNAL.sub(r"\1", prelude)


def _declarations(prelude: str) -> str:
    """What a host file other than the defining one needs: the headers and the prototypes."""
    protos = [m.group(1).strip() + ";" for m in _PROTOTYPE.finditer(prelude)]
    return ("\n/* ---- polyfuse: the fused launches (defined in the fused host file holding "
            "main) ---- */\n#include <stdio.h>\n#include <CL/cl.h>\n" + "\n".join(protos) + "\n")


def _defining_file(files: Sequence[str], datas: Mapping[str, bytes]) -> str:
    """The host file that receives the generated definitions: the one defining ``main``."""
    for f in files:
        if re.search(rb"\bint\s+main\s*\(", datas[f]):
            return f
    return files[0]


def _same_scalar(program: Program, members: list[Launch], value: Any, ptype: str
                 ) -> Optional[tuple[int, int]]:
    """(member index, argument index) of a member's scalar argument bound to ``value`` with the
    same type, if any: the fused kernel's parameter then takes exactly the bytes it was set to."""
    want = sympy.sympify(value)
    for k, m in enumerate(members):
        orig = program.kernels[m.kernel]
        for a in m.args:
            p = orig.params[a.index]
            if a.kind == "scalar" and not p.pointer and p.type == ptype and \
                    sympy.expand(m.scalar_value(a, p.name) - want) == 0:
                return k, a.index
    return None


def _specialization_checks(program: Program, members: list[Launch]) -> list[str]:
    """C that refuses to launch when the run's values differ from those the plan fixed.

    The fused kernels are specialized (constants propagated, sizes fixed) for the values the
    analysis saw (``--args``/``--param``); run with other arguments they would be wrong, so the
    fused launch checks each fixed scalar argument and global size of every member first.
    """
    out = []
    for k, m in enumerate(members):
        conds = []
        orig = program.kernels[m.kernel]
        for a in m.args:
            p = orig.params[a.index]
            if a.kind != "scalar" or p.pointer or a.value is None:
                continue
            v = sympy.sympify(a.value)
            if not v.is_Number:
                continue
            get = f"pf_get_{_ctype_id(p.type)}(&s[{k}].args[{a.index}])"
            if _env_type(p.type) == "double":
                conds.append(f"fabs({get} - {float(v)!r}) > 1e-6 * fabs({float(v)!r}) + 1e-30")
            elif v.is_Integer:
                conds.append(f"{get} != {int(v)}LL")
        for d, gsz in enumerate(m.global_size):
            gsz = sympy.sympify(gsz)
            if gsz.is_Integer:
                conds.append(f"s[{k}].gws[{d}] != (size_t){int(gsz)}")
        if conds:
            out += [f"    if ({' || '.join(conds)}) {{",
                    f"        fprintf(stderr, \"polyfuse: launch #{m.id} ({m.kernel}) runs with "
                    f"arguments or sizes other than those the fused kernels were generated "
                    f"for (fuse again with this run's --args)\\n\");",
                    "        return CL_INVALID_VALUE;", "    }"]
    return out


_WAVE_CALLS_OK = ("clSetKernelArg", "clEnqueueNDRangeKernel", "fprintf", "exit", "abort")


@dataclass(frozen=True)
class _Wave:
    """A group run along its wavefront: one launch of ``slots`` fragments per step."""

    outer: str  # host-loop iterators of the nest
    inner: str
    slot: str  # the one whose value picks the fragment slot (the loop with constant bounds)
    lower0: int  # lower bound of the slot loop
    first: int  # first wavefront step (sum of the lower bounds)
    slots: int
    groups0: int  # work-groups of one fragment in dimension 0
    local0: int
    line: int
    start: int  # byte range of the outer for statement
    end: int
    brace: int  # offset of the inner loop body's "{"
    file: str

    def edits(self, gid: int) -> list[tuple[str, int, int, str]]:
        head = ("{ /* polyfuse: the loop nest below runs once per wavefront step "
                f"{self.outer} + {self.inner} */ long long pf_w; int pf_any = 1; "
                f"for (pf_w = {self.first}; pf_any; pf_w++) {{ pf_any = 0; ")
        tail = (f" if (pf_any && pf_wave_flush_g{gid}() != CL_SUCCESS) {{ fprintf(stderr, "
                "\"polyfuse: wavefront launch failed\\n\"); exit(1); } } }")
        skip = (f" if ((long long)({self.outer}) + (long long)({self.inner}) != pf_w) continue;"
                " pf_any = 1;")
        return [(self.file, self.start, self.start, head), (self.file, self.end, self.end, tail),
                (self.file, self.brace + 1, self.brace + 1, skip)]


def _wave_plan(g: Any, last: Launch, fors: list[_For], other_calls: list[_Call], site: _Call,
               flaunch: Launch, shown: str, wf: Any) -> _Wave:
    """How group ``g`` (run along its wavefront in the fused program) runs so in the host."""
    where = f"plan group {g.id} (wavefront)"
    if len(last.loops) != 2:
        raise HostRewriteError(f"{where}: only a nest of two host loops is rewritten", shown,
                               site.line)
    outer, inner = last.loops
    try:
        lo0, lo1 = int(outer.lower), int(inner.lower)
        gs0 = int(flaunch.global_size[0])
        ls0 = int(flaunch.local_size[0]) if flaunch.local_size is not None else 0
    except (TypeError, ValueError):
        raise HostRewriteError(f"{where}: the loop bounds and the fused NDRange must be known "
                               "(pass --args)", shown, site.line) from None
    if outer.step != 1 or inner.step != 1 or ls0 <= 0 or gs0 % ls0:
        raise HostRewriteError(f"{where}: needs unit-step loops and a known local size", shown,
                               site.line)
    around = sorted((f for f in fors if f.file == site.file and f.start <= site.callee[0] < f.end),
                    key=lambda f: f.start)
    if len(around) < 2:
        raise HostRewriteError(f"{where}: cannot find the two for statements of the nest", shown,
                               site.line)
    fo, fi = around[-2], around[-1]
    if (outer.loc and outer.loc.line != fo.line) or (inner.loc and inner.loc.line != fi.line):
        raise HostRewriteError(f"{where}: the host loops are not the for statements around the "
                               "launch", shown, site.line)
    if fi.brace is None:
        raise HostRewriteError(f"{where}: the inner loop body must be a {{ }} block", shown,
                               fi.line)
    for c in other_calls:
        if c.file == fo.file and fo.start <= c.callee[0] < fo.end and \
                c.name not in _WAVE_CALLS_OK:
            raise HostRewriteError(f"{where}: the loop nest calls {c.name}(), whose order the "
                                   "wavefront would change", shown, c.line)
    return _Wave(outer.iterator, inner.iterator, wf.slot, wf.lower0, lo0 + lo1, wf.slots,
                 gs0 // ls0, ls0,
                 fo.line, fo.start, fo.end, fi.brace, fo.file)


def _wave_functions(gid: int, wave: _Wave, members: list[Launch], last: Launch, sig: str,
                    checks: list[str], it_params: str, it_args: str, nparams: int,
                    kindex: int, wname: str, wd: int, flaunch: Launch) -> list[str]:
    """Host functions of a wavefront group: deferred members, the step's launch, the flush."""
    n, S = len(members), wave.slots
    its = [a.strip().split()[-1] for a in it_params.split(",") if a.strip()]
    out = [f"static pf_snap_t pf_g{gid}_wsnap[{S}][{n}];",
           *([f"static long long pf_g{gid}_wit[{S}][{len(its)}];"] if its else []),
           f"static int pf_g{gid}_wact[{S}];",
           f"static cl_command_queue pf_g{gid}_wq;",
           f"static int pf_g{gid}_slot(long long it)",
           "{", f"    long long j = it - {wave.lower0};",
           f"    return j >= 0 && j < {S} ? (int)j : -1;", "}"]
    for k, m in enumerate(members):
        if m is last:
            continue
        out += [f"static cl_int pf_wdefer_g{gid}_{k + 1}{sig}, long long pf_slot_it)", "{",
                f"    int j = pf_g{gid}_slot(pf_slot_it);",
                "    (void)offset;", "    (void)lws;", "    (void)queue;",
                "    if (j < 0 || nwait != 0 || event != NULL)", "        return CL_INVALID_VALUE;",
                f"    pf_snap(&pf_g{gid}_wsnap[j][{k}], kernel, dim, gws);",
                "    return CL_SUCCESS;", "}"]
    k_last = members.index(last)
    out += [f"static cl_int pf_wave_g{gid}{sig}{it_params}, long long pf_slot_it)", "{",
            f"    int j = pf_g{gid}_slot(pf_slot_it);", "    pf_snap_t* s;",
            "    (void)offset;", "    (void)lws;",
            "    if (j < 0 || nwait != 0 || event != NULL)", "        return CL_INVALID_VALUE;",
            f"    s = pf_g{gid}_wsnap[j];",
            f"    pf_snap(&s[{k_last}], kernel, dim, gws);",
            *checks,
            *[f"    pf_g{gid}_wit[j][{i}] = {it};" for i, it in enumerate(its)],
            f"    pf_g{gid}_wact[j] = 1;", f"    pf_g{gid}_wq = queue;",
            "    return CL_SUCCESS;", "}"]
    gsz = ", ".join([str(S * wave.groups0 * wave.local0)]
                    + [str(int(x)) for x in flaunch.global_size[1:]])
    lsz = ", ".join(str(int(x)) for x in flaunch.local_size)
    call_its = "".join(f", pf_g{gid}_wit[from][{i}]" for i in range(len(its)))
    out += [f"static cl_int pf_wave_flush_g{gid}(void)", "{",
            "    cl_int err;", "    cl_kernel f;", "    int j, src = -1;",
            f"    for (j = 0; j < {S}; j++)",
            f"        if (pf_g{gid}_wact[j] && src < 0)", "            src = j;",
            "    if (src < 0)", "        return CL_SUCCESS;",
            f"    f = pf_kernel(pf_g{gid}_wq, {kindex}, \"{wname}\", &err);",
            "    if (f == NULL)", "        return err;",
            f"    for (j = 0; j < {S}; j++) {{",
            f"        int a = pf_g{gid}_wact[j];",
            "        int from = a ? j : src;",
            f"        err = pf_setargs_g{gid}(f, (cl_uint)(j * {nparams}), pf_g{gid}_wsnap[from]"
            + call_its + ");",
            "        if (err == CL_SUCCESS)",
            f"            err = clSetKernelArg(f, (cl_uint)({S * nparams} + j), sizeof(int), &a);",
            "        if (err != CL_SUCCESS)", "            return err;",
            f"        pf_g{gid}_wact[j] = 0;", "    }",
            "    {", f"        size_t g[{wd}] = {{{gsz}}};", f"        size_t l[{wd}] = {{{lsz}}};",
            "        pf_launches++;",
            f"        return clEnqueueNDRangeKernel(pf_g{gid}_wq, f, {wd}, NULL, g, l, 0, NULL, "
            "NULL);", "    }", "}"]
    return out


_HOST_TYPES = {"char": "cl_char", "uchar": "cl_uchar", "short": "cl_short", "ushort": "cl_ushort",
               "int": "cl_int", "uint": "cl_uint", "long": "cl_long", "ulong": "cl_ulong",
               "float": "cl_float", "double": "cl_double", "half": "cl_half",
               "unsigned int": "cl_uint", "unsigned char": "cl_uchar",
               "unsigned short": "cl_ushort", "unsigned long": "cl_ulong", "bool": "cl_int"}


def _host_type(ctype: str) -> str:
    """The host (``cl_*``) type of an OpenCL C scalar kernel parameter type."""
    t = " ".join(ctype.replace("const", " ").split())
    if t not in _HOST_TYPES:
        raise HostRewriteError(f"kernel parameter type {ctype!r} has no host type polyfuse knows")
    return _HOST_TYPES[t]


def _env_type(ctype: str) -> str:
    return "double" if ctype.strip() in ("float", "double", "half") else "long long"


def _ctype_id(ctype: str) -> str:
    return re.sub(r"\W+", "_", ctype.strip())


def host_file_of(program: Program) -> Optional[str]:
    """The host file holding the program's launches (None for a program without a host)."""
    files = {launch.loc.file for launch in program.launches if launch.loc is not None}
    hosts = [f for f in files if not f.endswith(".cl") and os.path.isfile(f)]
    if len(hosts) == 1 and len(files) == 1:
        return hosts[0]
    return None


_HOST_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".C", ".c++")


def host_files_of(program: Program) -> list[str]:
    """Every C/C++ host file of the program (its launches may be spread over several)."""
    launch_files = {launch.loc.file for launch in program.launches if launch.loc is not None}
    hosts = [f for f in dict.fromkeys((*program.files, *sorted(launch_files)))
             if Path(f).suffix in _HOST_SUFFIXES and os.path.isfile(f)]
    return hosts if any(f in hosts for f in launch_files) else []


__all__ = ["COUNT_ENV", "FusedHost", "HostRewriteError", "host_file_of", "host_files_of",
           "rewrite_host", "rewrite_hosts"]
