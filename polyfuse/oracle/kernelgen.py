"""Hypothesis strategies for random kernel chains: OpenCL C text + a matching host description.

Property tests compare the UAR's symbolic widths against brute-force enumeration
(:mod:`polyfuse.oracle.bruteforce`) on programs drawn here: chains of 2–3 launches over a small
pool of buffers, each kernel writing one buffer and reading one or two, through random affine and
quasi-affine subscripts of the global/local/group ids (small coefficients, shifts, ``% c``,
``/ c``, reversals, in-group rotations, row-major 2-D layouts and transposes), optional kernel
loops, guards, a host loop around the chain whose iterator is passed as a scalar argument, and
optional data-dependent gathers.  Grids are small (global sizes ≤ 16 per dimension, local sizes
dividing them).  Every access is in bounds by construction: buffers are sized from the largest
index the subscripts reach, computed by enumerating the launch's work-items.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union

import sympy
from hypothesis import strategies as st

from polyfuse.core.program import (
    ArgBinding,
    Buffer,
    BufferRange,
    HostLoop,
    HostOp,
    Kernel,
    Launch,
    Program,
)

# ----------------------------------------------------------------------------------------------
# Subscript expressions
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ex:
    """A small integer expression over named terms, printable as C and evaluable in Python."""

    op: str  # term | const | add | mul | mod | div | rev
    args: tuple[Any, ...]

    def c(self) -> str:
        o, a = self.op, self.args
        if o == "term":
            return a[0]
        if o == "const":
            return str(a[0])
        if o == "add":
            return f"({a[0].c()} + {a[1].c()})"
        if o == "mul":
            return f"{a[0]} * {a[1].c()}"
        if o == "mod":
            return f"({a[0].c()}) % {a[1]}"
        if o == "div":
            return f"({a[0].c()}) / {a[1]}"
        if o == "rev":  # (n - 1 - e)
            return f"({a[0] - 1} - {a[1].c()})"
        raise ValueError(o)

    def ev(self, env: Mapping[str, int]) -> int:
        """Value with C semantics (all generated values are non-negative)."""
        o, a = self.op, self.args
        if o == "term":
            return env[a[0]]
        if o == "const":
            return a[0]
        if o == "add":
            return a[0].ev(env) + a[1].ev(env)
        if o == "mul":
            return a[0] * a[1].ev(env)
        if o == "mod":
            return a[0].ev(env) % a[1]
        if o == "div":
            return a[0].ev(env) // a[1]
        if o == "rev":
            return a[0] - 1 - a[1].ev(env)
        raise ValueError(o)

    def terms(self) -> set[str]:
        if self.op == "term":
            return {self.args[0]}
        out: set[str] = set()
        for x in self.args:
            if isinstance(x, Ex):
                out |= x.terms()
        return out


def T(name: str) -> Ex:
    return Ex("term", (name,))


def C(v: int) -> Ex:
    return Ex("const", (v,))


def add(a: Ex, b: Ex) -> Ex:
    return Ex("add", (a, b))


# ----------------------------------------------------------------------------------------------
# Generated programs
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenAccess:
    buffer_param: str
    index: Ex
    gather: Optional[str] = None  # index-buffer param: buf[idx[index]]


@dataclass(frozen=True)
class GenKernel:
    """One generated kernel: ``out[w] = f(in[r]...)``, maybe inside a loop and a guard."""

    name: str
    work_dim: int
    write: GenAccess
    reads: tuple[GenAccess, ...]
    loop: int = 0  # trip count of the kernel loop over k (0: none)
    guard: Optional[tuple[str, int]] = None  # (term, bound): if (term < bound)
    uses_t: bool = False  # takes the host-loop iterator as scalar ``t``
    accumulate: bool = False  # out[w] += ... (the write also reads)

    @property
    def params(self) -> list[tuple[str, str]]:
        """(name, C declaration) in order."""
        out = [(self.write.buffer_param, f"__global float *{self.write.buffer_param}")]
        for r in self.reads:
            out.append((r.buffer_param, f"__global const float *{r.buffer_param}"))
            if r.gather:
                out.append((r.gather, f"__global const int *{r.gather}"))
        if self.uses_t:
            out.append(("t", "int t"))
        return out

    def source(self) -> str:
        lines = [f"__kernel void {self.name}({', '.join(d for _, d in self.params)}) {{"]
        for d, axis in enumerate("xy"[: self.work_dim]):
            lines.append(f"  int g{axis} = get_global_id({d}); int l{axis} = get_local_id({d});"
                         f" int b{axis} = get_group_id({d});")
        lines.append("  float acc = 0.0f;")
        body = []
        for r in self.reads:
            idx = r.index.c()
            if r.gather:
                idx = f"{r.gather}[{idx}]"
            body.append(f"acc += {r.buffer_param}[{idx}];")
        indent = "  "
        if self.loop:
            lines.append(f"  for (int k = 0; k < {self.loop}; k++) {{")
            lines += [f"    {b}" for b in body]
            lines.append("  }")
        else:
            lines += [f"  {b}" for b in body]
        op = "+=" if self.accumulate else "="
        store = f"{self.write.buffer_param}[{self.write.index.c()}] {op} acc;"
        if self.guard:
            lines.append(f"{indent}if ({self.guard[0]} < {self.guard[1]})")
            lines.append(f"{indent}  {store}")
        else:
            lines.append(f"{indent}{store}")
        lines.append("}")
        return "\n".join(lines)


@dataclass(frozen=True)
class GenLaunch:
    kernel: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    #: kernel parameter → bound buffer name, or ("t",)/("w", value) scalars
    buffers: tuple[tuple[str, str], ...]
    in_loop: bool = False


@dataclass(frozen=True)
class GenProgram:
    """A generated program: kernel source, buffers (float/int elements), launches in order."""

    kernels: tuple[GenKernel, ...]
    launches: tuple[GenLaunch, ...]
    buffers: tuple[tuple[str, int, str], ...]  # (name, elements, "float"/"int")
    loop_trips: int = 0  # host loop around the launches with in_loop (0: none)
    host_write: bool = False  # clEnqueueWriteBuffer of the first buffer before the launches
    host_read: bool = False  # clEnqueueReadBuffer of the last written buffer after them

    @property
    def source(self) -> str:
        return "\n\n".join(k.source() for k in self.kernels) + "\n"

    @property
    def exact(self) -> bool:
        """True when every subscript is (quasi-)affine: the UAR must be exact."""
        return not any(r.gather for k in self.kernels for r in k.reads)

    def kernel(self, name: str) -> GenKernel:
        return next(k for k in self.kernels if k.name == name)

    def inputs(self) -> dict[str, Any]:
        """Nothing to supply: index buffers get random valid indices from the oracle."""
        return {}

    def to_program(self, kernels: Optional[Mapping[str, Kernel]] = None) -> Program:
        """The :class:`Program` (model records built directly, no host front-end).

        ``kernels`` are the parsed kernels (``polyfuse.frontend.opencl.parse_kernels``); by
        default the oracle's minimal records.
        """
        if kernels is None:
            from polyfuse.oracle.bruteforce import kernels_from_source

            kernels = kernels_from_source(self.source)
        bufs = {n: Buffer(n, size=sympy.Integer(4 * size), dtype=dt) for n, size, dt in
                self.buffers}
        loop = (HostLoop("t", sympy.Integer(0), sympy.Integer(self.loop_trips)),) if (
            self.loop_trips) else ()
        ops: list[Any] = []
        if self.host_write:
            ops.append(HostOp(len(ops), "write", writes=(BufferRange(self.buffers[0][0]),),
                              name="clEnqueueWriteBuffer"))
        for gl in self.launches:
            gk = self.kernel(gl.kernel)
            bound = dict(gl.buffers)
            args = []
            for i, (pname, _decl) in enumerate(gk.params):
                if pname == "t":
                    args.append(ArgBinding(i, "scalar", value=sympy.Symbol("t")))
                else:
                    args.append(ArgBinding(i, "buffer", buffer=bound[pname]))
            ops.append(Launch(
                len(ops), gl.kernel, len(gl.global_size),
                tuple(sympy.Integer(g) for g in gl.global_size),
                tuple(sympy.Integer(x) for x in gl.local_size), tuple(args),
                loops=loop if gl.in_loop else (),
            ))
        if self.host_read:
            last = self.launches[-1]
            out = dict(last.buffers)[self.kernel(last.kernel).write.buffer_param]
            ops.append(HostOp(len(ops), "read", reads=(BufferRange(out),),
                              name="clEnqueueReadBuffer"))
        return Program(kernels=dict(kernels), buffers=bufs, ops=tuple(ops), name="generated")

    def build(self, kernels: Optional[Mapping[str, Kernel]] = None) -> Program:
        """The :class:`Program` made with :class:`polyfuse.frontend.builder.ProgramBuilder`.

        ``kernels`` default to the OpenCL front-end's parse of :attr:`source`.
        """
        from polyfuse.frontend.builder import ProgramBuilder

        if kernels is None:
            from polyfuse.frontend.opencl import parse_kernels

            kernels = parse_kernels(self.source)
        b = ProgramBuilder(kernels, name="generated")
        for name, size, dtype in self.buffers:
            b.buffer(name, 4 * size, dtype=dtype)
        if self.host_write:
            b.write(self.buffers[0][0])

        def launch(gl: GenLaunch, t: Any = None) -> None:
            args: dict[str, Any] = dict(gl.buffers)
            if self.kernel(gl.kernel).uses_t:
                args["t"] = t
            b.launch(gl.kernel, list(gl.global_size), list(gl.local_size), args)

        i = 0
        while i < len(self.launches):
            if self.launches[i].in_loop:
                j = i
                while j < len(self.launches) and self.launches[j].in_loop:
                    j += 1
                with b.loop("t", 0, self.loop_trips) as t:
                    for gl in self.launches[i:j]:
                        launch(gl, t)
                i = j
            else:
                launch(self.launches[i])
                i += 1
        if self.host_read:
            last = self.launches[-1]
            b.read(dict(last.buffers)[self.kernel(last.kernel).write.buffer_param])
        return b.build()

    def host_source(self) -> str:
        """A C host program (OpenCL API) running the same operations, for the host front-end.

        Boilerplate is left out (the front-end skips it anyway); transfers are non-blocking so
        the op sequence matches :meth:`build` and :meth:`to_program`.
        """
        lines = ["#include <CL/cl.h>", "", "int main(void)", "{",
                 "    cl_int err;", "    cl_context context;", "    cl_command_queue queue;",
                 "    cl_program program;", "    float host[4096];"]
        for k in self.kernels:
            lines.append(f'    cl_kernel {k.name} = clCreateKernel(program, "{k.name}", &err);')
        for name, size, _dt in self.buffers:
            lines.append(f"    cl_mem {name} = clCreateBuffer(context, CL_MEM_READ_WRITE, "
                         f"{4 * size}, NULL, &err);")
        if self.host_write:
            name, size, _ = self.buffers[0]
            lines.append(f"    clEnqueueWriteBuffer(queue, {name}, CL_FALSE, 0, {4 * size}, "
                         "host, 0, NULL, NULL);")

        def launch(gl: GenLaunch, indent: str) -> None:
            gk = self.kernel(gl.kernel)
            bound = dict(gl.buffers)
            wd = len(gl.global_size)
            lines.append(f"{indent}{{")
            lines.append(f"{indent}    size_t global[{wd}] = {{"
                         f"{', '.join(map(str, gl.global_size))}}};")
            lines.append(f"{indent}    size_t local[{wd}] = {{"
                         f"{', '.join(map(str, gl.local_size))}}};")
            for i, (pname, _decl) in enumerate(gk.params):
                if pname == "t":
                    lines.append(f"{indent}    clSetKernelArg({gk.name}, {i}, sizeof(int), &t);")
                else:
                    lines.append(f"{indent}    clSetKernelArg({gk.name}, {i}, sizeof(cl_mem), "
                                 f"&{bound[pname]});")
            lines.append(f"{indent}    clEnqueueNDRangeKernel(queue, {gk.name}, {wd}, NULL, "
                         "global, local, 0, NULL, NULL);")
            lines.append(f"{indent}}}")

        i = 0
        while i < len(self.launches):
            if self.launches[i].in_loop:
                lines.append(f"    for (int t = 0; t < {self.loop_trips}; t++) {{")
                while i < len(self.launches) and self.launches[i].in_loop:
                    launch(self.launches[i], "        ")
                    i += 1
                lines.append("    }")
            else:
                launch(self.launches[i], "    ")
                i += 1
        if self.host_read:
            last = self.launches[-1]
            out = dict(last.buffers)[self.kernel(last.kernel).write.buffer_param]
            size = next(s for n, s, _ in self.buffers if n == out)
            lines.append(f"    clEnqueueReadBuffer(queue, {out}, CL_FALSE, 0, {4 * size}, host, "
                         "0, NULL, NULL);")
        lines += ["    return 0;", "}", ""]
        return "\n".join(lines)

    def host_description(self) -> dict:
        """A plain description (for a builder API): buffers, launches with args, host loop."""
        return {
            "buffers": [{"name": n, "elements": s, "dtype": d} for n, s, d in self.buffers],
            "loop_trips": self.loop_trips,
            "launches": [{"kernel": gl.kernel, "global_size": list(gl.global_size),
                          "local_size": list(gl.local_size), "buffers": dict(gl.buffers),
                          "in_loop": gl.in_loop} for gl in self.launches],
            "host_write": self.host_write,
            "host_read": self.host_read,
        }


# ----------------------------------------------------------------------------------------------
# Strategies
# ----------------------------------------------------------------------------------------------


@st.composite
def grids(draw: Any, work_dim: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(global, local) sizes: ≤ 16 per dimension (≤ 8 in 2-D), local sizes dividing them."""
    gs, ls = [], []
    limit = 16 if work_dim == 1 else 8
    for _ in range(work_dim):
        local = draw(st.sampled_from([1, 2, 4]))
        groups = draw(st.integers(1, max(1, limit // local)))
        gs.append(local * groups)
        ls.append(local)
    return tuple(gs), tuple(ls)


def _extents(work_dim: int, gs: tuple, ls: tuple, loop: int, trips: int) -> dict[str, int]:
    ext = {}
    for d, axis in enumerate("xy"[:work_dim]):
        ext[f"g{axis}"] = gs[d]
        ext[f"l{axis}"] = ls[d]
        ext[f"b{axis}"] = gs[d] // ls[d]
    if loop:
        ext["k"] = loop
    if trips:
        ext["t"] = trips
    return ext


@st.composite
def subscripts(draw: Any, ext: Mapping[str, int], work_dim: int,
               ls: tuple[int, ...]) -> Ex:
    """A random non-negative (quasi-)affine subscript over the terms of ``ext``."""
    names = sorted(ext)
    kind = draw(st.sampled_from(["linear", "linear", "quasi", "tile", "rev", "rowmajor"]
                                if work_dim == 2 else ["linear", "linear", "quasi", "tile",
                                                        "rev"]))

    def linear(k_max: int = 2) -> Ex:
        chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=k_max, unique=True))
        parts = []
        for n in chosen:
            c = draw(st.integers(1, 2))
            parts.append(T(n) if c == 1 else Ex("mul", (c, T(n))))
        shift = draw(st.integers(0, 3))
        if shift:
            parts.append(C(shift))
        e = parts[0]
        for x in parts[1:]:
            e = add(e, x)
        return e

    if kind == "linear":
        return linear()
    if kind == "quasi":
        e = linear()
        m = draw(st.integers(2, 4))
        return Ex(draw(st.sampled_from(["mod", "div"])), (e, m))
    if kind == "tile":
        d = draw(st.integers(0, work_dim - 1))
        axis = "xy"[d]
        L = ls[d]
        inner = Ex("mod", (add(T(f"l{axis}"), C(draw(st.integers(0, 3)))), L)) if L > 1 \
            else C(0)
        if draw(st.booleans()) and "k" in ext and L > 1:
            inner = Ex("mod", (add(T(f"l{axis}"), T("k")), L))
        base = Ex("mul", (L, T(f"b{axis}"))) if L > 1 else T(f"b{axis}")
        return add(base, inner)
    if kind == "rev":
        n = draw(st.sampled_from([x for x in names if x != "t"] or names))
        return add(Ex("rev", (ext[n], T(n))), C(draw(st.integers(0, 2))))
    # row-major 2-D: row * R + col, maybe transposed
    transpose = draw(st.booleans())
    row, col = (T("gx"), T("gy")) if transpose else (T("gy"), T("gx"))
    if draw(st.booleans()):
        col = add(col, C(draw(st.integers(0, 2))))
    width = ext["gy" if transpose else "gx"] + draw(st.integers(0, 2))
    return add(Ex("mul", (width, row)), col)


@st.composite
def injective_subscripts(draw: Any, ext: Mapping[str, int], work_dim: int,
                         ls: tuple[int, ...]) -> Ex:
    """A subscript taking a different value in every work-item of a launch (no write races)."""
    kind = draw(st.sampled_from(["scale", "rev", "tile"] if work_dim == 1 else ["rowmajor"]))
    if kind == "scale":
        c = draw(st.integers(1, 2))
        e = T("gx") if c == 1 else Ex("mul", (c, T("gx")))
    elif kind == "rev":
        e = Ex("rev", (ext["gx"], T("gx")))
    elif kind == "tile":
        L = ls[0]
        inner = Ex("mod", (add(T("lx"), C(draw(st.integers(0, 3)))), L)) if L > 1 else C(0)
        e = add(Ex("mul", (L, T("bx"))) if L > 1 else T("bx"), inner)
    else:
        transpose = draw(st.booleans())
        row, col = (T("gx"), T("gy")) if transpose else (T("gy"), T("gx"))
        shift = draw(st.integers(0, 2))
        if shift:
            col = add(col, C(shift))
        width = ext["gy" if transpose else "gx"] + shift + draw(st.integers(0, 2))
        e = add(Ex("mul", (width, row)), col)
    shift = draw(st.integers(0, 2))
    if shift:
        e = add(e, C(shift))
    if "t" in ext and draw(st.booleans()):
        e = add(e, T("t"))
    return e


def _max_index(e: Ex, ext: Mapping[str, int], gs: tuple, ls: tuple, work_dim: int) -> int:
    """The largest value ``e`` takes over the launch's work-items (and k, t)."""
    best = 0
    ranges = []
    for d, axis in enumerate("xy"[:work_dim]):
        ranges.append([(axis, g) for g in range(gs[d])])
    extra = [n for n in ("k", "t") if n in ext]
    for combo in itertools.product(*ranges, *[range(ext[n]) for n in extra]):
        env: dict[str, int] = {}
        for (axis, g), d in zip(combo[:work_dim], range(work_dim)):
            env[f"g{axis}"] = g
            env[f"l{axis}"] = g % ls[d]
            env[f"b{axis}"] = g // ls[d]
        for n, v in zip(extra, combo[work_dim:]):
            env[n] = v
        best = max(best, e.ev(env))
    return best


@st.composite
def kernel_chains(
    draw: Any,
    max_launches: int = 3,
    dims: tuple[int, ...] = (1, 2),
    gathers: bool = False,
    host_loops: bool = True,
    host_ops: bool = True,
    race_free: bool = False,
) -> GenProgram:
    """A random chain of launches over a pool of buffers (see the module doc).

    ``race_free``: no two work-items of a launch touch an element one of them writes (injective
    write subscripts, no reads of the launch's own output but through ``+=``), i.e. programs
    whose result OpenCL defines.
    """
    n_launches = draw(st.integers(2, max_launches))
    pool = [f"b{i}" for i in range(draw(st.integers(2, n_launches + 1)))]
    trips = draw(st.sampled_from([0, 0, 2])) if host_loops else 0
    if trips:
        lo = draw(st.integers(0, n_launches - 1))
        hi = draw(st.integers(lo + 1, n_launches))
    else:
        lo = hi = 0
    kernels: list[GenKernel] = []
    launches: list[GenLaunch] = []
    max_idx: dict[str, int] = {b: 0 for b in pool}
    idx_sizes: dict[str, int] = {}
    for i in range(n_launches):
        wd = draw(st.sampled_from(dims))
        gs, ls = draw(grids(wd))
        in_loop = lo <= i < hi
        loop = draw(st.sampled_from([0, 0, 0, 2, 3]))
        uses_t = in_loop and draw(st.booleans())
        ext = _extents(wd, gs, ls, loop, trips if uses_t else 0)
        no_k = {n: v for n, v in ext.items() if n != "k"}
        if race_free:
            w_idx = draw(injective_subscripts(no_k, wd, ls))
        else:
            w_idx = draw(subscripts(no_k, wd, ls))
        out_buf = draw(st.sampled_from(pool))
        n_reads = draw(st.integers(1, 2))
        reads: list[GenAccess] = []
        bindings = [("out", out_buf)]
        for r in range(n_reads):
            rb = draw(st.sampled_from([b for b in pool if b != out_buf] if race_free
                                      else pool))
            r_idx = draw(subscripts(ext, wd, ls))
            gather = None
            if gathers and draw(st.integers(0, 3)) == 0:
                gather = f"idx{r}"
                gbuf = f"ix{i}_{r}"
                idx_sizes[gbuf] = _max_index(r_idx, ext, gs, ls, wd) + 1
                bindings.append((gather, gbuf))
            reads.append(GenAccess(f"in{r}", r_idx, gather))
            bindings.append((f"in{r}", rb))
            m = _max_index(r_idx, ext, gs, ls, wd)
            max_idx[rb] = max(max_idx[rb], m if gather is None else 0)
        max_idx[out_buf] = max(max_idx[out_buf], _max_index(w_idx, no_k, gs, ls, wd))
        guard = None
        if draw(st.integers(0, 3)) == 0:
            term = draw(st.sampled_from(sorted(no_k)))
            guard = (term, draw(st.integers(1, max(1, no_k[term]))))
        k = GenKernel(
            name=f"k{i}", work_dim=wd, write=GenAccess("out", w_idx), reads=tuple(reads),
            loop=loop, guard=guard, uses_t=uses_t, accumulate=draw(st.integers(0, 4)) == 0,
        )
        kernels.append(k)
        launches.append(GenLaunch(k.name, gs, ls, tuple(bindings), in_loop))
    # gathers index any element of the (smallest) pool buffer: size every pool buffer the same
    sizes = {b: max_idx[b] + 1 + draw(st.integers(0, 2)) for b in pool}
    if idx_sizes:
        common = max(sizes.values())
        sizes = {b: common for b in pool}
    buffers = [(b, sizes[b], "float") for b in pool]
    buffers += [(b, n, "int") for b, n in sorted(idx_sizes.items())]
    return GenProgram(
        kernels=tuple(kernels), launches=tuple(launches), buffers=tuple(buffers),
        loop_trips=trips,
        host_write=host_ops and draw(st.booleans()),
        host_read=host_ops and draw(st.booleans()),
    )


def example_values(gp: GenProgram) -> dict[str, Union[int, float]]:
    """Host parameter values the generated program needs (none: every size is concrete)."""
    return {}
