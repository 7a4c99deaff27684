"""OpenCL C kernels and OpenCL host code for planned SCoP regions.

Kernels: each mapped loop's iterator is ``lo + get_global_id(d)``, with ``lo`` the minimum of the
loop's range over the kernel's iteration space (host-loop iterators as parameters) computed by isl
and passed as an argument; the original loop nest is then printed with every mapped loop replaced
by a guard made of its own bounds (so triangular and imperfect bounds stay exact) and every other
loop kept as a sequential loop.  Arrays become ``__global`` pointers and multi-dimensional
subscripts are linearized with the declared extents (C99 VLA extents such as ``n + 0`` included).
``FP_CONTRACT`` is turned off so that no ``a*b + c`` is fused: results stay bit-identical to gcc's.

Host code (PPCG style): one OpenCL context/queue/program for the whole file, created on first use;
per region, buffers for every array the kernels touch, copied in before the first launch and read
back after the last; host code between launches gets the arrays it touches read back before and
written again after.  NDRange sizes are isl expressions of the region parameters and host-loop
iterators, evaluated at run time (no launch when the range is empty).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

import islpy as isl
from pycparser import c_ast, c_generator

from polyfuse.autopar.parallelize import (
    HostLoopPlan,
    KernelPlan,
    PlanNode,
    RegionPlan,
)
from polyfuse.autopar.scop import Block, Item, Loop, Region, Symbol
from polyfuse.c import syntax

_OCL_INT = {"int": ("int", "cl_int"), "long": ("long", "cl_long"), "unsigned": ("uint", "cl_uint"),
            "unsigned int": ("uint", "cl_uint"), "unsigned long": ("ulong", "cl_ulong"),
            "long int": ("long", "cl_long"), "long long": ("long", "cl_long"),
            "short": ("short", "cl_short"), "char": ("char", "cl_char"),
            "size_t": ("ulong", "cl_ulong"), "float": ("float", "cl_float"),
            "double": ("double", "cl_double")}


def ocl_type(ctype: str) -> tuple[str, str]:
    """(OpenCL C type, host ``cl_`` type) of a C scalar type."""
    t = " ".join(w for w in ctype.split() if w not in ("const", "volatile", "static", "signed"))
    return _OCL_INT.get(t, ("int", "cl_int") if "int" in t or not t else ("double", "cl_double"))


def isl_c(expr: str) -> str:
    """isl's C printing uses min/max/floord; map them to the helpers the host file defines."""
    return re.sub(r"\b(min|max|floord)\(", r"pf_\1(", expr)


class _Printer(c_generator.CGenerator):
    """C printer that linearizes accesses to the region's arrays (``A[i][j]`` → ``A[i*nj + j]``)."""

    def __init__(self, arrays: dict[str, Symbol]):
        super().__init__()
        self.arrays = arrays

    def visit_ArrayRef(self, n: c_ast.ArrayRef) -> str:
        base, subs = syntax.flatten_ref(n)
        if isinstance(base, c_ast.ID) and base.name in self.arrays:
            sym = self.arrays[base.name]
            text = f"({self.visit(subs[0])})"
            for k in range(1, len(subs)):
                text = f"({text} * ({self.visit(sym.extents[k])}) + ({self.visit(subs[k])}))"
            return f"{base.name}[{text}]"
        return super().visit_ArrayRef(n)


def _pw_to_c(pa: isl.PwAff) -> str:
    build = isl.AstBuild.from_context(isl.Set.universe(pa.get_domain_space().params()))
    return isl_c(build.expr_from_pw_aff(pa).to_C_str())


def _set_to_c(s: isl.Set) -> str:
    build = isl.AstBuild.from_context(isl.Set.universe(s.get_space().params()))
    return isl_c(build.expr_from_set(s).to_C_str())


@dataclass
class KernelArg:
    name: str
    kind: str  # buffer | scalar | lo
    ctype: str  # element type (buffer) or scalar type
    expr: str = ""  # host C expression of a scalar/lo argument


@dataclass
class KernelCode:
    plan: KernelPlan
    source: str
    args: list[KernelArg]
    dims: int
    #: per NDRange dimension: (host C lower bound, host C extent)
    ranges: list[tuple[str, str]]
    nonempty: str  # host C condition for a non-empty launch
    arrays_read: set[str] = field(default_factory=set)
    arrays_written: set[str] = field(default_factory=set)


def _loop_header(p: _Printer, node: c_ast.For) -> str:
    init = p.visit(node.init) if node.init is not None else ""
    if isinstance(node.init, c_ast.DeclList):
        init = init.rstrip(";")
    cond = p.visit(node.cond) if node.cond is not None else ""
    nxt = p.visit(node.next) if node.next is not None else ""
    return f"for ({init}; {cond}; {nxt})"


def _lower_bound(node: c_ast.For) -> Any:
    init = node.init
    if isinstance(init, c_ast.DeclList):
        return init.decls[0].init
    if isinstance(init, c_ast.Assignment):
        return init.rvalue
    return init.init  # Decl


def print_items(p: _Printer, items: list[Item], indent: str) -> str:
    """The C text of loop-tree items (virtual, distributed loops print only their children)."""
    out = []
    for it in items:
        if isinstance(it, Loop):
            out.append(f"{indent}{_loop_header(p, it.node)} {{\n")
            out.append(print_items(p, it.children, indent + "  "))
            out.append(f"{indent}}}\n")
        else:
            node = it.node
            text = p.visit(node)
            if isinstance(node, (c_ast.Assignment, c_ast.UnaryOp, c_ast.Decl, c_ast.FuncCall)):
                text += ";"
            out.append("".join(f"{indent}{ln}\n" for ln in text.rstrip().splitlines()))
    return "".join(out)


def _ids(items: list[Item], chain: list[Loop]) -> set[str]:
    names: set[str] = set()
    nodes: list[Any] = [lp.node.init for lp in chain] + [lp.node.cond for lp in chain]
    for it in items:
        if isinstance(it, Loop):
            nodes += [it.node.init, it.node.cond, it.node.next]
            nodes += [ch.node for ch in it.children if isinstance(ch, Block)]
            names |= _ids([ch for ch in it.children if isinstance(ch, Loop)], [])
        else:
            nodes.append(it.node)
    for nd in nodes:
        for n in syntax.walk(nd):
            if isinstance(n, c_ast.ID):
                names.add(n.name)
            if isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID):
                names.discard(n.name.name)
    return names


def _loops_in(items: list[Item]) -> list[Loop]:
    out: list[Loop] = []
    for it in items:
        if isinstance(it, Loop):
            out.append(it)
            out += _loops_in(it.children)
        else:
            for n in syntax.walk(it.node):
                if isinstance(n, c_ast.For):
                    out.append(Loop("", n, "", 1, isl.Set("{ : }"), 0, None, [], 0))
    return out


def kernel_code(region: Region, k: KernelPlan, symbols: dict[str, Symbol]) -> KernelCode:
    """OpenCL C of one planned kernel and what the host must pass to it."""
    p = _Printer(region.arrays)
    host_iters = [lp.iterator for lp in k.host_loops]
    names = _ids(k.body, k.chain)
    arrays = sorted(n for n in names if n in region.arrays)
    for a in arrays:
        for e in region.arrays[a].extents[1:]:
            for n in syntax.walk(e):
                if isinstance(n, c_ast.ID):
                    names.add(n.name)
    declared_inside = {n.name for it in k.body for n in syntax.walk(it.node)
                       if isinstance(n, c_ast.Decl)}
    chain_iters = [lp.iterator for lp in k.chain]
    body_loops = _loops_in(k.body)
    inner_iters: dict[str, str] = {}
    for lp in body_loops:
        it = syntax.loop_shape(lp.node)[0]
        if it and not isinstance(lp.node.init, c_ast.DeclList):
            inner_iters[it] = region.iterators.get(it, "int")
    for c in k.chain:
        if c not in k.mapped and not isinstance(c.node.init, c_ast.DeclList):
            inner_iters[c.iterator] = region.iterators.get(c.iterator, "int")
    args: list[KernelArg] = []
    for a in arrays:
        args.append(KernelArg(a, "buffer", region.arrays[a].ctype))
    scalars = sorted(n for n in names if n not in region.arrays and n not in declared_inside
                     and n not in chain_iters and n not in inner_iters and n not in host_iters
                     and n in symbols and symbols[n].kind in ("int", "float"))
    for n in host_iters:
        if n in names or any(n in _ids([], [c]) for c in k.chain):
            args.append(KernelArg(n, "scalar", region.iterators.get(n, "int"), n))
    for n in scalars:
        args.append(KernelArg(n, "scalar", symbols[n].ctype, n))
    ranges: list[tuple[str, str]] = []
    nonempty = "1"
    if k.mapped:
        dom = k.chain[-1].domain
        nh = len(k.host_loops)
        dom = dom.move_dims(isl.dim_type.param, dom.dim(isl.dim_type.param),
                            isl.dim_type.set, 0, nh)
        nonempty = _set_to_c(dom.params())
        for m in reversed(k.mapped):  # dimension 0 first
            pos = m.depth - nh
            lo = dom.dim_min(pos)
            hi = dom.dim_max(pos)
            ranges.append((_pw_to_c(lo), f"({_pw_to_c(hi)}) - ({_pw_to_c(lo)}) + 1"))
        for d in range(len(k.mapped)):
            args.append(KernelArg(f"pf_lo{d}", "lo", "long", ranges[d][0]))
    # kernel text
    params = []
    for a in args:
        if a.kind == "buffer":
            params.append(f"__global {ocl_type(a.ctype)[0]} *{a.name}")
        else:
            params.append(f"{ocl_type(a.ctype)[0]} {a.name}")
    lines = [f"__kernel void {k.name}({', '.join(params)})\n{{\n"]
    if not k.mapped:
        lines.append("  if (get_global_id(0) != 0) return;\n")
    for m in k.mapped:
        d = k.dim_of(m)
        t = ocl_type(region.iterators.get(m.iterator, "int"))[0]
        lines.append(f"  {t} {m.iterator} = ({t})(pf_lo{d} + (long)get_global_id({d}));\n")
    for it, t in sorted(inner_iters.items()):
        if it not in [m.iterator for m in k.mapped]:
            lines.append(f"  {ocl_type(t)[0]} {it};\n")
    indent = "  "
    closes = []
    for c in k.chain:
        if c in k.mapped:
            lb = p.visit(_lower_bound(c.node))
            lines.append(f"{indent}if ({c.iterator} >= ({lb}) && {p.visit(c.node.cond)}) {{\n")
        else:
            lines.append(f"{indent}{_loop_header(p, c.node)} {{\n")
        closes.append(f"{indent}}}\n")
        indent += "  "
    lines.append(print_items(p, k.body, indent))
    lines += reversed(closes)
    lines.append("}\n")
    read, written = set(), set()
    for s in k.stmts:
        for acc in s.accesses:
            if acc.array in region.arrays:
                (written if acc.write else read).add(acc.array)
    return KernelCode(k, "".join(lines), args, max(1, len(k.mapped)), ranges, nonempty,
                      read, written)


# ----------------------------------------------------------------------------------------------
# Host code
# ----------------------------------------------------------------------------------------------


def array_bytes(region: Region, name: str) -> str:
    """Host C expression of an array's size in bytes (declared extents; the first one, when a
    pointer parameter does not declare it, from the largest index the region accesses)."""
    sym = region.arrays[name]
    p = c_generator.CGenerator()
    ext = []
    first = sym.extents[0]
    if first is None:
        acc = None
        for s in region.stmts:
            for a in s.accesses:
                if a.array == name:
                    r = a.relation.range()
                    acc = r if acc is None else acc.union(r)
        assert acc is not None
        hi = acc.dim_max(0)
        ext.append(f"(({_pw_to_c(hi)}) + 1)")
    else:
        ext.append(f"({p.visit(first)})")
    ext += [f"({p.visit(e)})" for e in sym.extents[1:]]
    return f"sizeof({sym.ctype}) * " + " * ".join(f"(size_t){e}" for e in ext)


@dataclass
class RegionCode:
    plan: RegionPlan
    kernels: list[KernelCode]
    host: str  # the C text replacing the region
    device_arrays: list[str]


def _host_arrays(items: list[Item]) -> tuple[set[str], set[str]]:
    read, written = set(), set()
    for it in items:
        stmts = []
        if isinstance(it, Loop):
            from polyfuse.autopar.deps import stmts_in
            stmts = stmts_in(it)
        else:
            stmts = it.stmts
        for s in stmts:
            for a in s.accesses:
                (written if a.write else read).add(a.array)
    return read, written


def region_code(plan: RegionPlan, symbols: dict[str, Symbol], kernel_index: dict[str, int]
                ) -> RegionCode:
    """Host C text for a region and its kernels (``kernel_index``: kernel name → slot)."""
    r = plan.region
    kcodes = {k.name: kernel_code(r, k, symbols) for k in plan.kernels()}
    dev = sorted({a for kc in kcodes.values() for a in kc.arrays_read | kc.arrays_written})
    p = _Printer({})
    out: list[str] = []
    w = out.append
    w(f"{{ /* polyfuse: region {r.index} of {r.function}() (lines {r.first_line}-"
      f"{r.last_line}) runs as OpenCL kernels; see report.json */\n")
    w("  pf_init();\n")
    for a in dev:
        w(f"  size_t pf_sz_{a} = {array_bytes(r, a)};\n")
        w(f"  cl_mem pf_b_{a} = pf_buffer(pf_sz_{a});\n")
        w(f"  pf_write(pf_b_{a}, pf_sz_{a}, (const void *){a});\n")
    dirty: set[str] = set()  # device arrays newer than the host copy

    def emit(nodes: list[PlanNode], indent: str) -> None:
        for n in nodes:
            if isinstance(n, KernelPlan):
                _launch(kcodes[n.name], kernel_index[n.name], indent, w)
                dirty.update(kcodes[n.name].arrays_written)
            elif isinstance(n, HostLoopPlan):
                w(f"{indent}{_loop_header(p, n.loop.node)} {{\n")
                emit(n.body, indent + "  ")
                w(f"{indent}}}\n")
            else:
                rd, wr = _host_arrays(n.items)
                for a in sorted((rd | wr) & dirty):
                    w(f"{indent}pf_read(pf_b_{a}, pf_sz_{a}, (void *){a});\n")
                dirty.difference_update(rd | wr)
                w(print_items(p, n.items, indent))
                for a in sorted(wr & set(dev)):
                    w(f"{indent}pf_write(pf_b_{a}, pf_sz_{a}, (const void *){a});\n")

    emit(plan.nodes, "  ")
    for a in sorted(dirty):
        w(f"  pf_read(pf_b_{a}, pf_sz_{a}, (void *){a});\n")
    for a in dev:
        w(f"  clReleaseMemObject(pf_b_{a});\n")
    w("}\n")
    return RegionCode(plan, list(kcodes.values()), "".join(out), dev)


def _launch(kc: KernelCode, slot: int, indent: str, w: Any) -> None:
    k = kc.plan
    w(f"{indent}{{ /* {k.name}: "
      + (", ".join(f"{m.iterator} -> dim {k.dim_of(m)}" for m in k.mapped) or "one work-item")
      + " */\n")
    ind = indent + "  "
    w(f"{ind}cl_kernel pf_k = pf_kernels[{slot}];\n")
    w(f"{ind}size_t pf_gws[3] = {{1, 1, 1}};\n")
    if k.mapped:
        w(f"{ind}if ({kc.nonempty}) {{\n")
        ind2 = ind + "  "
        for d, (_lo, ext) in enumerate(kc.ranges):
            w(f"{ind2}long pf_n{d} = {ext};\n")
        w(f"{ind2}if ({' && '.join(f'pf_n{d} > 0' for d in range(len(kc.ranges)))}) {{\n")
        ind3 = ind2 + "  "
        for d in range(len(kc.ranges)):
            w(f"{ind3}pf_gws[{d}] = (size_t)pf_n{d};\n")
    else:
        ind3 = ind
    for i, a in enumerate(kc.args):
        if a.kind == "buffer":
            w(f"{ind3}pf_check(clSetKernelArg(pf_k, {i}, sizeof(cl_mem), &pf_b_{a.name}), "
              f"\"clSetKernelArg\");\n")
        else:
            t = ocl_type(a.ctype)[1]
            w(f"{ind3}{{ {t} pf_v = ({t})({a.expr}); pf_check(clSetKernelArg(pf_k, {i}, "
              f"sizeof pf_v, &pf_v), \"clSetKernelArg\"); }}\n")
    w(f"{ind3}pf_check(clEnqueueNDRangeKernel(pf_queue, pf_k, {kc.dims}, NULL, pf_gws, NULL, "
      f"0, NULL, NULL), \"clEnqueueNDRangeKernel({k.name})\");\n")
    if k.mapped:
        w(f"{ind2}}}\n{ind}}}\n")
    w(f"{indent}}}\n")


def kernels_file(codes: list[KernelCode]) -> str:
    """The ``.cl`` file: every kernel, fp64 enabled and contraction off (bit-identical results)."""
    head = ("/* generated by polyfuse autopar */\n"
            "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
            "#pragma OPENCL FP_CONTRACT OFF\n\n")
    return head + "\n".join(kc.source for kc in codes)


def _c_string(text: str) -> str:
    out = []
    for line in text.splitlines():
        esc = line.replace("\\", "\\\\").replace('"', '\\"')
        out.append(f'  "{esc}\\n"')
    return "\n".join(out) or '  ""'


def runtime_prelude(names: list[str], cl_source: str) -> str:
    """The OpenCL set-up shared by every region of the file (inserted at its top)."""
    kn = ", ".join(f'"{n}"' for n in names) or '""'
    nk = max(1, len(names))
    return f"""/* ---- polyfuse autopar: OpenCL runtime (generated) ---- */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
static cl_context pf_ctx;
static cl_command_queue pf_queue;
static cl_program pf_prog;
static cl_kernel pf_kernels[{nk}];
static const char *pf_kernel_names[{nk}] = {{{kn}}};
static const char pf_source[] =
{_c_string(cl_source)};
static void pf_check(cl_int err, const char *what) {{
  if (err != CL_SUCCESS) {{
    fprintf(stderr, "polyfuse: %s failed (%d)\\n", what, (int)err);
    exit(1);
  }}
}}
static long pf_min(long a, long b) {{ return a < b ? a : b; }}
static long pf_max(long a, long b) {{ return a > b ? a : b; }}
static long pf_floord(long a, long b) {{ return a >= 0 ? a / b : -((-a + b - 1) / b); }}
static void pf_release(void) {{
  int i;
  for (i = 0; i < {nk}; i++) if (pf_kernels[i]) clReleaseKernel(pf_kernels[i]);
  if (pf_prog) clReleaseProgram(pf_prog);
  if (pf_queue) clReleaseCommandQueue(pf_queue);
  if (pf_ctx) clReleaseContext(pf_ctx);
}}
static void pf_init(void) {{
  cl_platform_id plats[16];
  cl_uint np = 0, p;
  cl_device_id dev = NULL;
  cl_int err;
  const char *src = pf_source;
  int i;
  if (pf_ctx) return;
  pf_check(clGetPlatformIDs(16, plats, &np), "clGetPlatformIDs");
  for (p = 0; p < np && !dev; p++)
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) dev = NULL;
  if (!dev) {{ fprintf(stderr, "polyfuse: no OpenCL device\\n"); exit(1); }}
  pf_ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
  pf_check(err, "clCreateContext");
  pf_queue = clCreateCommandQueue(pf_ctx, dev, 0, &err);
  pf_check(err, "clCreateCommandQueue");
  pf_prog = clCreateProgramWithSource(pf_ctx, 1, &src, NULL, &err);
  pf_check(err, "clCreateProgramWithSource");
  if (clBuildProgram(pf_prog, 1, &dev, "-cl-std=CL1.2", NULL, NULL) != CL_SUCCESS) {{
    char log[16384];
    clGetProgramBuildInfo(pf_prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
    fprintf(stderr, "polyfuse: kernel build failed:\\n%s\\n", log);
    exit(1);
  }}
  for (i = 0; i < {len(names)}; i++) {{
    pf_kernels[i] = clCreateKernel(pf_prog, pf_kernel_names[i], &err);
    pf_check(err, "clCreateKernel");
  }}
  atexit(pf_release);
}}
static cl_mem pf_buffer(size_t bytes) {{
  cl_int err;
  cl_mem b = clCreateBuffer(pf_ctx, CL_MEM_READ_WRITE, bytes ? bytes : 1, NULL, &err);
  pf_check(err, "clCreateBuffer");
  return b;
}}
static void pf_write(cl_mem b, size_t bytes, const void *p) {{
  if (bytes) pf_check(clEnqueueWriteBuffer(pf_queue, b, CL_TRUE, 0, bytes, p, 0, NULL, NULL),
                      "clEnqueueWriteBuffer");
}}
static void pf_read(cl_mem b, size_t bytes, void *p) {{
  if (bytes) pf_check(clEnqueueReadBuffer(pf_queue, b, CL_TRUE, 0, bytes, p, 0, NULL, NULL),
                      "clEnqueueReadBuffer");
}}
/* ---- end of polyfuse runtime ---- */
"""


# ----------------------------------------------------------------------------------------------
# Finding a region's text in the original source
# ----------------------------------------------------------------------------------------------


def _skip_ws(text: str, i: int) -> int:
    n = len(text)
    while i < n:
        if text[i].isspace():
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif text[i] == "#" and (i == 0 or text[:i].rstrip(" \t").endswith("\n") or
                                 text[:i].rstrip(" \t") == ""):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        else:
            break
    return i


def _skip_literal(text: str, i: int) -> int:
    """Index of the quote closing the string or character literal opened at ``text[i]``."""
    q = text[i]
    i += 1
    while i < len(text) and text[i] != q:
        i += 2 if text[i] == "\\" else 1
    return i


def _scan(text: str, i: int, opens: str, closes: str, end: Optional[str] = None) -> int:
    """Index just past the bracket closing the one at ``text[i]`` (``end`` None), or past the
    first ``end`` outside brackets; string and character literals and comments are skipped."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            i = _skip_literal(text, i)
        elif text.startswith("//", i) or text.startswith("/*", i):
            i = _skip_ws(text, i)
            continue
        elif c in opens:
            depth += 1
        elif c in closes:
            depth -= 1
            if depth == 0 and end is None:
                return i + 1
        elif c == end and depth == 0:
            return i + 1
        i += 1
    return n


def _match(text: str, i: int, open_: str, close: str) -> int:
    """Index just past the bracket matching ``text[i]``."""
    return _scan(text, i, open_, close)


def skip_statement(text: str, i: int) -> int:
    """Index just past the C statement starting at ``i`` (raw source, macros unexpanded)."""
    i = _skip_ws(text, i)
    m = re.match(r"(for|while|if|switch)\b", text[i:])
    if m:
        j = _skip_ws(text, i + len(m.group(1)))
        j = _match(text, j, "(", ")")
        j = skip_statement(text, j)
        if m.group(1) == "if":
            k = _skip_ws(text, j)
            if re.match(r"else\b", text[k:]):
                return skip_statement(text, k + 4)
        return j
    if re.match(r"do\b", text[i:]):
        j = skip_statement(text, i + 2)
        j = _skip_ws(text, j)
        j = _skip_ws(text, j + 5)  # while
        j = _match(text, j, "(", ")")
        j = _skip_ws(text, j)
        return j + 1
    if text.startswith("{", i):
        return _match(text, i, "{", "}")
    return _scan(text, i, "([{", ")]}", ";")


def line_offsets(text: str) -> list[int]:
    offs = [0]
    for k, ch in enumerate(text):
        if ch == "\n":
            offs.append(k + 1)
    return offs


def region_span(text: str, region: Region) -> Optional[tuple[int, int]]:
    """Character range of the region in the raw source (pragma lines included), or None."""
    offs = line_offsets(text)
    items = region.items
    first = items[0].coord
    if first is None or not first.line or first.line > len(offs):
        return None
    start = offs[first.line - 1]
    if region.pragma:
        # from the #pragma scop line to the end of the #pragma endscop line
        ms = list(re.finditer(r"#[ \t]*pragma[ \t]+scop\b", text[:start]))
        if ms:
            start = text.rfind("\n", 0, ms[-1].start()) + 1
        end = start
        for _ in items:
            end = skip_statement(text, end)
        m2 = re.search(r"#\s*pragma\s+endscop[^\n]*\n?", text[end:])
        if m2 is not None:
            end = end + m2.end()
        return start, end
    col = (first.column or 1) - 1
    if text[start:start + col].strip():
        start += col
    end = start
    for _ in items:
        end = skip_statement(text, end)
    return start, end
