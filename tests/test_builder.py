"""The Python builder API mirrors the C host front-end."""

from __future__ import annotations

import pytest
import sympy

from polyfuse.core.program import Kernel, KernelContext, KernelParam, PolyfuseError, param_context
from polyfuse.frontend.builder import ProgramBuilder, default_program, local
from polyfuse.frontend.host import parse_host

n, t = sympy.symbols("n t")


def _kernel(name: str, *params: tuple, work_dims: int = 1, **kw) -> Kernel:
    ps = tuple(KernelParam(p[0], i, p[1], p[2], p[3]) for i, p in enumerate(params))
    return Kernel(name=name, params=ps, statements=(), work_dims=work_dims, **kw)


KERNELS = {
    k.name: k
    for k in [
        _kernel("vadd", ("a", "float", True, "global"), ("b", "float", True, "global"),
                ("c", "float", True, "global"), ("n", "int", False, "private")),
        _kernel("step", ("x", "float", True, "global"), ("y", "float", True, "global"),
                ("t", "int", False, "private"), ("n", "int", False, "private")),
        _kernel("reduce", ("in", "float", True, "global"), ("out", "float", True, "global"),
                ("tmp", "float", True, "local"), ("n", "int", False, "private"),
                context=KernelContext(local_size=(64, None, None))),
        _kernel("scale", ("c", "float", True, "global"), ("alpha", "float", False, "private"),
                ("n", "int", False, "private"), work_dims=2),
    ]
}


def _app() -> ProgramBuilder:
    b = ProgramBuilder(KERNELS, name="app")
    n = b.param("n", min=1)
    b.buffer("d_a", 4 * n, flags=("CL_MEM_READ_ONLY",))
    b.buffer("d_b", 4 * n)
    b.buffer("d_c", 8 * n)
    b.sub_buffer("d_hi", "d_c", origin=4 * n, size=4 * n)
    b.write("d_a", 0, 4 * n)
    b.write("d_b", 0, 4 * n, blocking=True)
    b.launch("vadd", global_size=(64 * sympy.floor((n + 63) / 64),), local_size=(64,),
             args={"a": "d_a", "b": "d_b", "c": "d_hi", "n": n}, kernel_object="k_add")
    with b.loop("t", 0, 8) as it:
        b.launch("step", global_size=n, args=["d_hi", "d_b", it, n])
    b.copy("d_b", "d_a", 4 * n)
    b.finish()
    b.read("d_c", 0, 8 * n, blocking=True)
    return b


def test_builder_program_matches_the_model():
    prog = _app().build()
    assert prog.name == "app" and prog.params == ("n",)
    ctx = param_context(prog)
    assert ctx.is_equal(type(ctx)("[n] -> { : n >= 1 }"))
    assert prog.root("d_hi") == ("d_c", 4 * n)
    assert prog.buffers["d_a"].dtype == "float"
    kinds = [getattr(op, "kernel", None) or op.kind for op in prog.ops]
    assert kinds == ["write", "write", "sync", "vadd", "step", "copy", "sync", "read", "sync"]
    assert [op.id for op in prog.ops] == list(range(9))
    add, step = prog.launches
    assert add.kernel_object == "k_add" and add.local_size == (64,)
    assert [a.buffer for a in add.args[:3]] == ["d_a", "d_b", "d_hi"] and add.arg(3).value == n
    assert step.global_size == (n,) and step.local_size is None and step.work_dim == 1
    assert step.loops[0].iterator == "t" and step.loops[0].upper == 8
    assert step.arg(2).value == t
    assert prog.ops[5].writes[0].size == 4 * n


def test_builder_agrees_with_host_frontend():
    """The same application written in C gives the same operations (up to locations)."""
    src = r"""
#include <stdlib.h>
#include <CL/cl.h>
int main(int argc, char **argv) {
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    cl_program program = clCreateProgramWithSource(ctx, 1, NULL, NULL, &err);
    int n = atoi(argv[1]);
    if (n < 1) exit(1);
    cl_mem d_a = clCreateBuffer(ctx, CL_MEM_READ_ONLY, 4 * n, NULL, &err);
    cl_mem d_b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4 * n, NULL, &err);
    cl_mem d_c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 8 * n, NULL, &err);
    cl_buffer_region r = { 4 * n, 4 * n };
    cl_mem d_hi = clCreateSubBuffer(d_c, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    clEnqueueWriteBuffer(q, d_a, CL_FALSE, 0, 4 * n, NULL, 0, NULL, NULL);
    clEnqueueWriteBuffer(q, d_b, CL_TRUE, 0, 4 * n, NULL, 0, NULL, NULL);
    cl_kernel k_add = clCreateKernel(program, "vadd", &err);
    clSetKernelArg(k_add, 0, sizeof(cl_mem), &d_a);
    clSetKernelArg(k_add, 1, sizeof(cl_mem), &d_b);
    clSetKernelArg(k_add, 2, sizeof(cl_mem), &d_hi);
    clSetKernelArg(k_add, 3, sizeof(int), &n);
    size_t ls = 64, gs = (n + 63) / 64 * 64;
    clEnqueueNDRangeKernel(q, k_add, 1, NULL, &gs, &ls, 0, NULL, NULL);
    cl_kernel step = clCreateKernel(program, "step", &err);
    for (int t = 0; t < 8; t++) {
        clSetKernelArg(step, 0, sizeof(cl_mem), &d_hi);
        clSetKernelArg(step, 1, sizeof(cl_mem), &d_b);
        clSetKernelArg(step, 2, sizeof(int), &t);
        clSetKernelArg(step, 3, sizeof(int), &n);
        size_t g = n;
        clEnqueueNDRangeKernel(q, step, 1, NULL, &g, NULL, 0, NULL, NULL);
    }
    clEnqueueCopyBuffer(q, d_b, d_a, 0, 0, 4 * n, 0, NULL, NULL);
    clFinish(q);
    clEnqueueReadBuffer(q, d_c, CL_TRUE, 0, 8 * n, NULL, 0, NULL, NULL);
    return 0;
}
"""
    host = parse_host(src, KERNELS, filename="app.c")
    built = _app().build()

    def strip(op):
        import dataclasses

        op = dataclasses.replace(op, loc=None, loops=tuple(
            dataclasses.replace(lp, loc=None) for lp in op.loops))
        if hasattr(op, "args"):
            op = dataclasses.replace(op, args=tuple(dataclasses.replace(a, loc=None)
                                                    for a in op.args))
        return op

    assert [strip(op) for op in host.ops] == [strip(op) for op in built.ops]
    assert host.params == built.params
    assert param_context(host).is_equal(param_context(built))


def test_local_args_offsets_and_unknown_calls():
    b = ProgramBuilder(list(KERNELS.values()))
    m = b.param("m", 4096)
    assert m == 4096
    b.buffer("x", m)
    b.buffer("y", "m / 64")
    b.launch("reduce", global_size=4096, local_size=64,
             args={"in": "x", "out": "y", "tmp": local(256), 3: 4096}, global_offset=(0,))
    b.fill("y")
    b.unknown("verify", "x", "y")
    prog = b.build()
    la = prog.launches[0]
    assert la.arg(2).kind == "local" and la.arg(2).local_bytes == 256
    assert la.global_offset == (0,)
    assert prog.buffers["y"].size == 64
    assert prog.ops[2].kind == "unknown" and [r.buffer for r in prog.ops[2].writes] == ["x", "y"]
    assert prog.params == () and prog.context == "{ : }"


def test_float_scalar_and_string_expressions():
    b = ProgramBuilder(KERNELS)
    b.param("n")
    b.buffer("c", "4*n*n")
    b.launch("scale", global_size=("n", "n"), args={"c": "c", "alpha": 0.5, "n": "n*n"})
    prog = b.build()
    la = prog.launches[0]
    assert la.work_dim == 2 and la.global_size == (n, n)
    assert la.arg(1).value == sympy.Float(0.5) and la.arg(2).value == n**2


@pytest.mark.parametrize("call, message", [
    (lambda b: b.launch("vad", global_size=4, args=()), "no kernel named 'vad'"),
    (lambda b: b.launch("vadd", global_size=4, args={"a": "x"}),
     "unset arguments: 1 (b), 2 (c), 3 (n)"),
    (lambda b: b.launch("vadd", global_size=4, args={"a": "x", "q": 1}), "no parameter 'q'"),
    (lambda b: b.launch("vadd", global_size=4, args=["x", "x", "x", 1, 2]),
     "5 arguments for 4 parameters"),
    (lambda b: b.launch("vadd", global_size=4, args=["x", "x", "nope", 1]),
     "is a buffer"),
    (lambda b: b.launch("vadd", global_size=4, args=["x", "x", "x", "x"]), "is a scalar"),
    (lambda b: b.launch("reduce", global_size=4, args=["x", "x", "x", 1]), "__local"),
    (lambda b: b.launch("vadd", global_size=(4, 4, 4, 4), args=["x", "x", "x", 1]),
     "1 to 3 dimensions"),
    (lambda b: b.launch("vadd", global_size=(4, 4), local_size=(2,), args=["x", "x", "x", 1]),
     "local size has 1"),
    (lambda b: b.read("nope"), "unknown buffer 'nope'"),
    (lambda b: b.buffer("x", 4), "declared twice"),
    (lambda b: b.sub_buffer("s", "nope", 0, 4), "unknown buffer 'nope'"),
    (lambda b: b.param("_gs0"), "leading underscore"),
    (lambda b: b.buffer("z", "4 *"), "cannot read"),
])
def test_builder_errors(call, message):
    b = ProgramBuilder(KERNELS)
    b.buffer("x", 64)
    with pytest.raises(PolyfuseError) as exc:
        call(b)
    assert message in str(exc.value)


def test_bad_context_and_loop_errors():
    b = ProgramBuilder(KERNELS)
    b.param("n")
    b.assume("n >= ")
    with pytest.raises(PolyfuseError, match="invalid parameter context"):
        b.build()
    b = ProgramBuilder(KERNELS)
    b.param("n")
    with pytest.raises(PolyfuseError, match="clashes"):
        with b.loop("n", 0, 4):
            pass
    with pytest.raises(PolyfuseError, match="step"):
        with b.loop("i", 0, 4, step=0):
            pass


def test_default_program():
    prog = default_program(KERNELS)
    assert [la.kernel for la in prog.launches] == ["vadd", "step", "reduce", "scale"]
    assert set(prog.buffers) == {"a", "b", "c", "x", "y", "in", "out"}
    assert prog.buffers["c"].size is None and prog.buffers["c"].dtype == "float"
    vadd, step, red, scale = prog.launches
    assert vadd.global_size == (sympy.Symbol("vadd_gs0"),) and vadd.local_size is None
    assert vadd.arg(3).value == n and step.arg(3).value == n
    assert step.arg(2).value == t
    assert red.local_size == (64,) and red.arg(2).kind == "local"
    assert red.arg(2).local_bytes is None
    assert scale.work_dim == 2 and scale.arg(0).buffer == "c" and scale.arg(1).value is None
    assert "n" in prog.params and "scale_gs1" in prog.params
    ctx = param_context(prog)
    assert not ctx.is_empty()
    fixed = default_program(KERNELS, params={"n": 100, "vadd_gs0": 128})
    assert fixed.launches[0].global_size == (128,) and fixed.launches[0].arg(3).value == 100
    assert "n" not in fixed.params and "vadd_gs0" not in fixed.params
