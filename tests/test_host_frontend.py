"""The C host front-end on host programs written the way real OpenCL applications are."""

from __future__ import annotations

import pytest
import sympy

from polyfuse.core.program import (
    HostOp,
    Kernel,
    KernelParam,
    Launch,
    PolyfuseError,
    UnsupportedError,
    param_context,
)
from polyfuse.frontend.host import load_opencl, parse_host

n, m, t = sympy.symbols("n m t")


def _kernel(name: str, *params: tuple) -> Kernel:
    ps = []
    for i, (pname, ptype, pointer, space) in enumerate(params):
        ps.append(KernelParam(pname, i, ptype, pointer, space))
    return Kernel(name=name, params=tuple(ps), statements=())


def _g(name: str) -> tuple:
    return (name, "float", True, "global")


def _s(name: str, ctype: str = "int") -> tuple:
    return (name, ctype, False, "private")


KERNELS = {
    k.name: k
    for k in [
        _kernel("vadd", _g("a"), _g("b"), _g("c"), _s("n")),
        _kernel("scale", _g("c"), _s("alpha", "float"), _s("n")),
        _kernel("step", _g("x"), _g("y"), _s("t"), _s("n")),
        _kernel("reduce", _g("in"), _g("out"), ("tmp", "float", True, "local"), _s("n")),
        _kernel("mm", _g("A"), _g("B"), _g("C"), _s("n"), _s("m")),
    ]
}

PROLOGUE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __APPLE__
#include <OpenCL/opencl.h>
#else
#include <CL/cl.h>
#endif

#define CHECK(e) do { if ((e) != CL_SUCCESS) { \
    fprintf(stderr, "OpenCL error %d at %s:%d\n", (e), __FILE__, __LINE__); exit(1); } } while (0)

static void check(cl_int err, const char *what) {
    if (err != CL_SUCCESS) {
        fprintf(stderr, "%s failed: %d\n", what, err);
        exit(EXIT_FAILURE);
    }
}

static cl_program build(cl_context ctx, cl_device_id dev, const char *src) {
    cl_int err;
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    check(err, "clCreateProgramWithSource");
    err = clBuildProgram(p, 1, &dev, "-cl-std=CL1.2", NULL, NULL);
    if (err != CL_SUCCESS) {
        size_t len;
        char log[16384];
        clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof(log), log, &len);
        fprintf(stderr, "%s\n", log);
        exit(1);
    }
    return p;
}
"""

SETUP = r"""
    cl_int err;
    cl_platform_id platform;
    cl_uint nplatforms;
    err = clGetPlatformIDs(1, &platform, &nplatforms);
    CHECK(err);
    if (nplatforms == 0) { printf("no OpenCL platform\n"); return 1; }
    cl_device_id device;
    err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    check(err, "clGetDeviceIDs");
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CHECK(err);
    cl_command_queue queue = clCreateCommandQueue(ctx, device, CL_QUEUE_PROFILING_ENABLE, &err);
    CHECK(err);
    cl_program program = build(ctx, device, "kernels");
"""


def _host(body: str, *, setup: bool = True, extra: str = "") -> str:
    return PROLOGUE + extra + "\nint main(int argc, char **argv) {\n" + \
        (SETUP if setup else "") + body + "\n    return 0;\n}\n"


def _parse(body: str, **kw) -> tuple:
    src = _host(body, extra=kw.pop("extra", ""))
    return parse_host(src, KERNELS, filename="host.c", **kw), src


def _line(src: str, needle: str, nth: int = 0) -> int:
    lines = [i + 1 for i, text in enumerate(src.splitlines()) if needle in text]
    return lines[nth]


# ----------------------------------------------------------------------------------------------
# A full application
# ----------------------------------------------------------------------------------------------

APP = r"""
    if (argc < 2) { printf("usage: %s n\n", argv[0]); return 1; }
    int n = atoi(argv[1]);
    if (n <= 0) { fprintf(stderr, "n must be positive\n"); exit(1); }
    int steps = STEPS;
    size_t bytes = sizeof(float) * n;
    float *h_a = (float *)malloc(bytes);
    float *h_b = (float *)malloc(bytes);
    float *h_c = (float *)malloc(2 * bytes);
    for (int i = 0; i < n; i++) { h_a[i] = (float)i; h_b[i] = 2.0f * i; }

    cl_mem d_a = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, h_a, &err);
    CHECK(err);
    cl_mem d_b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (!d_b) { printf("allocation failed\n"); exit(1); }
    cl_mem d_c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 2 * bytes, NULL, &err);
    check(err, "clCreateBuffer");
    cl_buffer_region region = { bytes, bytes };
    cl_mem d_hi = clCreateSubBuffer(d_c, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION,
                                    &region, &err);
    CHECK(err);
    err = clEnqueueWriteBuffer(queue, d_b, CL_TRUE, 0, bytes, h_b, 0, NULL, NULL);
    CHECK(err);

    cl_kernel k_add = clCreateKernel(program, "vadd", &err);
    CHECK(err);
    err  = clSetKernelArg(k_add, 0, sizeof(cl_mem), &d_a);
    err |= clSetKernelArg(k_add, 1, sizeof(cl_mem), (void *)&d_b);
    err |= clSetKernelArg(k_add, 2, sizeof(cl_mem), &d_hi);
    err |= clSetKernelArg(k_add, 3, sizeof(int), &n);
    CHECK(err);
    size_t local[1] = { 64 };
    size_t global[1] = { ((n + 63) / 64) * 64 };
    err = clEnqueueNDRangeKernel(queue, k_add, 1, NULL, global, local, 0, NULL, NULL);
    CHECK(err);

    cl_kernel k_step = clCreateKernel(program, "step", &err);
    clSetKernelArg(k_step, 0, sizeof(cl_mem), &d_hi);
    clSetKernelArg(k_step, 1, sizeof(cl_mem), &d_b);
    clSetKernelArg(k_step, 3, sizeof(int), &n);
    for (int t = 0; t < steps; t++) {
        clSetKernelArg(k_step, 2, sizeof(int), &t);
        size_t gs = n;
        err = clEnqueueNDRangeKernel(queue, k_step, 1, NULL, &gs, NULL, 0, NULL, NULL);
        if (err != CL_SUCCESS) { printf("launch failed\n"); break; }
    }
    clEnqueueCopyBuffer(queue, d_b, d_a, 0, 0, bytes, 0, NULL, NULL);
    clFinish(queue);
    err = clEnqueueReadBuffer(queue, d_c, CL_TRUE, 0, 2 * bytes, h_c, 0, NULL, NULL);
    CHECK(err);
    printf("c[0] = %f\n", h_c[0]);
    clReleaseMemObject(d_a);
    clReleaseMemObject(d_b);
    clReleaseKernel(k_add);
    clReleaseProgram(program);
    clReleaseCommandQueue(queue);
    clReleaseContext(ctx);
    free(h_a);
"""


@pytest.fixture(scope="module")
def app():
    src = _host(APP)
    return parse_host(src, KERNELS, filename="app.c", defines={"STEPS": "8"}), src


def test_app_buffers(app):
    prog, _ = app
    assert list(prog.buffers) == ["d_a", "d_b", "d_c", "d_hi"]
    assert prog.buffers["d_a"].size == 4 * n
    assert prog.buffers["d_a"].flags == ("CL_MEM_READ_ONLY", "CL_MEM_COPY_HOST_PTR")
    assert prog.buffers["d_c"].size == 8 * n
    hi = prog.buffers["d_hi"]
    assert (hi.parent, hi.origin, hi.size) == ("d_c", 4 * n, 4 * n)
    assert prog.root("d_hi") == ("d_c", 4 * n)


def test_app_params_and_context(app):
    prog, _ = app
    assert prog.params == ("n",)
    ctx = param_context(prog)
    assert ctx.is_equal(ctx.universe(ctx.space).intersect(
        type(ctx)("[n] -> { : n >= 1 }")))


def test_app_ops_in_order(app):
    prog, src = app
    kinds = [(op.kernel if isinstance(op, Launch) else op.kind) for op in prog.ops]
    assert kinds == ["write", "write", "sync", "vadd", "step", "copy", "sync", "read", "sync"]
    assert [op.id for op in prog.ops] == list(range(len(prog.ops)))
    init = prog.ops[0]
    assert init.name == "clCreateBuffer" and init.writes[0].buffer == "d_a"
    assert init.writes[0].size == 4 * n
    wr = prog.ops[1]
    assert wr.name == "clEnqueueWriteBuffer" and wr.writes[0].buffer == "d_b"
    assert prog.ops[2].name == "clEnqueueWriteBuffer"
    copy = prog.ops[5]
    assert copy.reads[0].buffer == "d_b" and copy.writes[0].buffer == "d_a"
    assert copy.writes[0].size == 4 * n
    assert prog.ops[6].name == "clFinish"
    rd = prog.ops[7]
    assert rd.reads[0].buffer == "d_c" and rd.reads[0].size == 8 * n
    assert rd.loc.line == _line(src, "clEnqueueReadBuffer(queue, d_c")


def test_app_first_launch(app):
    prog, src = app
    la = prog.ops[3]
    assert la.kernel == "vadd" and la.kernel_object == "k_add" and la.work_dim == 1
    assert la.local_size == (64,)
    assert sympy.simplify(la.global_size[0] - 64 * sympy.floor((n + 63) / 64)) == 0
    assert [a.kind for a in la.args] == ["buffer", "buffer", "buffer", "scalar"]
    assert [a.buffer for a in la.args[:3]] == ["d_a", "d_b", "d_hi"]
    assert la.args[3].value == n
    assert la.loops == ()
    assert la.loc.file == "app.c"
    assert la.loc.line == _line(src, "clEnqueueNDRangeKernel(queue, k_add")


def test_app_host_loop(app):
    prog, _ = app
    la = prog.ops[4]
    assert la.kernel == "step" and la.global_size == (n,) and la.local_size is None
    assert len(la.loops) == 1
    loop = la.loops[0]
    assert (loop.iterator, loop.lower, loop.upper, loop.step) == ("t", 0, 8, 1)
    assert la.arg(2).value == t
    assert la.arg(0).buffer == "d_hi" and la.arg(3).value == n


def test_param_override():
    src = _host(APP)
    prog = parse_host(src, KERNELS, filename="app.c", params={"n": 1000},
                      defines={"STEPS": "2"})
    assert prog.params == ()
    assert prog.buffers["d_a"].size == 4000
    assert prog.launches[0].global_size == (1024,)
    assert prog.launches[1].loops[0].upper == 2


# ----------------------------------------------------------------------------------------------
# Individual constructs
# ----------------------------------------------------------------------------------------------


def test_defines_sizes_and_2d_arrays():
    prog, _ = _parse(r"""
    #define N 1024
    #define M 512
    cl_mem A = clCreateBuffer(ctx, CL_MEM_READ_ONLY, N * M * sizeof(float), NULL, &err);
    cl_mem B = clCreateBuffer(ctx, CL_MEM_READ_ONLY, M * sizeof(float) * N, NULL, &err);
    cl_mem C = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, sizeof(float) * N * N, NULL, &err);
    cl_kernel k = clCreateKernel(program, "mm", &err);
    int n = N, m = M;
    clSetKernelArg(k, 0, sizeof(cl_mem), &A);
    clSetKernelArg(k, 1, sizeof(cl_mem), &B);
    clSetKernelArg(k, 2, sizeof(cl_mem), &C);
    clSetKernelArg(k, 3, sizeof(n), &n);
    clSetKernelArg(k, 4, sizeof(int), &m);
    size_t gs[2];
    gs[0] = N; gs[1] = N;
    size_t ls[2] = {16, 16};
    clEnqueueNDRangeKernel(queue, k, 2, NULL, gs, ls, 0, NULL, NULL);
    """)
    assert prog.params == ()
    assert prog.context == "{ : }"
    assert prog.buffers["A"].size == 4 * 1024 * 512
    assert prog.buffers["C"].size == 4 * 1024 * 1024
    la = prog.launches[0]
    assert la.work_dim == 2 and la.global_size == (1024, 1024) and la.local_size == (16, 16)
    assert (la.arg(3).value, la.arg(4).value) == (1024, 512)


def test_two_runtime_params_and_argc_default():
    prog, _ = _parse(r"""
    int n = 256;
    if (argc > 1) n = atoi(argv[1]);
    long m = argc > 2 ? strtol(argv[2], NULL, 10) : 64;
    cl_mem A = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * m * sizeof(float), NULL, &err);
    cl_kernel k = clCreateKernel(program, "scale", &err);
    float alpha = 2.5f;
    clSetKernelArg(k, 0, sizeof(cl_mem), &A);
    clSetKernelArg(k, 1, sizeof(float), &alpha);
    int total = n * m;
    clSetKernelArg(k, 2, sizeof(int), &total);
    size_t g[] = { n, m };
    clEnqueueNDRangeKernel(queue, k, 2, NULL, g, NULL, 0, NULL, NULL);
    """)
    assert prog.params == ("n", "m")
    la = prog.launches[0]
    assert la.global_size == (n, m)
    assert la.arg(1).value == sympy.Float(2.5)
    assert la.arg(2).value == n * m


def test_scanf_value_is_a_parameter():
    prog, _ = _parse(r"""
    int len;
    scanf("%d", &len);
    cl_mem A = clCreateBuffer(ctx, CL_MEM_READ_WRITE, len * sizeof(float), NULL, &err);
    clEnqueueFillBuffer(queue, A, &err, sizeof(int), 0, len * sizeof(float), 0, NULL, NULL);
    """)
    assert prog.params == ("len",)
    op = prog.ops[0]
    assert op.kind == "write" and op.name == "clEnqueueFillBuffer"
    assert op.writes[0].size == 4 * sympy.Symbol("len")


def test_symbolic_loop_with_iterator_in_sizes_and_nested_loops():
    prog, _ = _parse(r"""
    int n = atoi(argv[1]);
    int T = atoi(argv[2]);
    cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_kernel k = clCreateKernel(program, "step", &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &x);
    clSetKernelArg(k, 1, sizeof(cl_mem), &y);
    for (int t = 1; t <= T; t += 2) {
        for (int j = 0; j < t; ++j) {
            int idx = t * 2 + 1;
            clSetKernelArg(k, 2, sizeof(int), &idx);
            clSetKernelArg(k, 3, sizeof(int), &j);
            size_t g = n - j;
            clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
        }
        clEnqueueReadBuffer(queue, y, CL_FALSE, t * sizeof(float), sizeof(float), NULL,
                            0, NULL, NULL);
    }
    clFinish(queue);
    """)
    T, j = sympy.symbols("T j")
    la, rd, fin = prog.ops
    assert [lp.iterator for lp in la.loops] == ["t", "j"]
    outer, inner = la.loops
    assert (outer.lower, outer.upper, outer.step) == (1, T + 1, 2)
    assert (inner.lower, inner.upper, inner.step) == (0, t, 1)
    assert la.global_size == (n - j,)
    assert la.arg(2).value == 2 * t + 1 and la.arg(3).value == j
    assert rd.kind == "read" and [lp.iterator for lp in rd.loops] == ["t"]
    assert rd.reads[0].offset == 4 * t and rd.reads[0].size == 4
    assert fin.kind == "sync" and fin.loops == ()
    assert set(prog.params) == {"n", "T"}


def test_ping_pong_loop_is_unrolled():
    prog, _ = _parse(r"""
    int n = atoi(argv[1]);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_kernel k = clCreateKernel(program, "step", &err);
    clSetKernelArg(k, 3, sizeof(int), &n);
    cl_mem in = a, out = b;
    for (int it = 0; it < 3; it++) {
        clSetKernelArg(k, 0, sizeof(cl_mem), &in);
        clSetKernelArg(k, 1, sizeof(cl_mem), &out);
        clSetKernelArg(k, 2, sizeof(int), &it);
        size_t g = n;
        clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
        cl_mem tmp = in; in = out; out = tmp;
    }
    """)
    assert [(la.arg(0).buffer, la.arg(1).buffer, la.arg(2).value) for la in prog.launches] == \
        [("a", "b", 0), ("b", "a", 1), ("a", "b", 2)]
    assert all(la.loops == () for la in prog.launches)


def test_ping_pong_with_symbolic_trip_count_is_refused():
    src = _host(r"""
    int n = atoi(argv[1]);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    cl_kernel k = clCreateKernel(program, "step", &err);
    clSetKernelArg(k, 2, sizeof(int), &n);
    clSetKernelArg(k, 3, sizeof(int), &n);
    for (int it = 0; it < n; it++) {
        clSetKernelArg(k, 0, sizeof(cl_mem), &a);
        clSetKernelArg(k, 1, sizeof(cl_mem), &b);
        size_t g = n;
        clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
        cl_mem tmp = a; a = b; b = tmp;
    }
    """)
    with pytest.raises(UnsupportedError) as exc:
        parse_host(src, KERNELS, filename="host.c")
    assert exc.value.file == "host.c"
    assert exc.value.line == _line(src, "for (int it = 0; it < n; it++)")
    assert "trip count" in exc.value.message


def test_buffer_arrays_and_kernel_arrays_in_unrolled_loops():
    prog, _ = _parse(r"""
    #define NB 3
    cl_mem bufs[NB];
    for (int i = 0; i < NB; i++) {
        bufs[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
        CHECK(err);
    }
    const char *names[2] = { "vadd", "vadd" };
    cl_kernel ks[2];
    for (int i = 0; i < 2; i++) ks[i] = clCreateKernel(program, names[i], &err);
    int n = 1024;
    for (int i = 0; i < 2; i++) {
        for (int a = 0; a < 3; a++)
            clSetKernelArg(ks[i], a, sizeof(cl_mem), &bufs[(a + i) % NB]);
        clSetKernelArg(ks[i], 3, sizeof(int), &n);
        size_t g = n;
        clEnqueueNDRangeKernel(queue, ks[i], 1, NULL, &g, NULL, 0, NULL, NULL);
    }
    """)
    assert list(prog.buffers) == ["bufs_0", "bufs_1", "bufs_2"]
    assert [[a.buffer for a in la.args[:3]] for la in prog.launches] == \
        [["bufs_0", "bufs_1", "bufs_2"], ["bufs_1", "bufs_2", "bufs_0"]]
    assert [la.kernel_object for la in prog.launches] == ["ks_0", "ks_1"]


def test_helper_functions_are_inlined_and_globals_tracked():
    helpers = r"""
    static cl_mem d_in, d_out;
    static cl_kernel kern;
    static size_t round_up(size_t x, size_t m) { return ((x + m - 1) / m) * m; }
    static void setup(cl_context ctx, cl_program program, int n) {
        cl_int err;
        d_in = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * sizeof(float), NULL, &err);
        d_out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, n * sizeof(float), NULL, &err);
        kern = clCreateKernel(program, "reduce", &err);
    }
    static void run(cl_command_queue q, int n, int wg) {
        clSetKernelArg(kern, 0, sizeof(cl_mem), &d_in);
        clSetKernelArg(kern, 1, sizeof(cl_mem), &d_out);
        clSetKernelArg(kern, 2, wg * sizeof(float), NULL);
        clSetKernelArg(kern, 3, sizeof(int), &n);
        size_t local = wg, global = round_up(n, wg);
        clEnqueueNDRangeKernel(q, kern, 1, NULL, &global, &local, 0, NULL, NULL);
        summarize(d_out);
    }
    """
    prog, src = _parse(r"""
    int n = atoi(argv[1]);
    setup(ctx, program, n);
    run(queue, n, 128);
    """, extra=helpers)
    assert set(prog.buffers) == {"d_in", "d_out"}
    la = prog.launches[0]
    assert la.kernel_object == "kern"
    assert la.local_size == (128,)
    assert la.global_size == (128 * sympy.floor((n + 127) / 128),)
    assert la.arg(2).kind == "local" and la.arg(2).local_bytes == 512
    unknown = prog.ops[1]
    assert isinstance(unknown, HostOp) and unknown.kind == "unknown"
    assert unknown.name == "summarize"
    assert unknown.reads[0].buffer == "d_out" and unknown.writes[0].buffer == "d_out"
    assert unknown.loc.line == _line(src, "summarize(d_out)")


def test_designated_region_and_field_assignment():
    prog, _ = _parse(r"""
    cl_mem big = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 8192, NULL, &err);
    cl_buffer_region r1 = { .origin = 4096, .size = 2048 };
    cl_buffer_region r2;
    r2.origin = 0;
    r2.size = r1.size * 2;
    cl_mem s1 = clCreateSubBuffer(big, 0, CL_BUFFER_CREATE_TYPE_REGION, &r1, &err);
    cl_mem s2 = clCreateSubBuffer(big, 0, CL_BUFFER_CREATE_TYPE_REGION, &r2, &err);
    """)
    assert (prog.buffers["s1"].origin, prog.buffers["s1"].size) == (4096, 2048)
    assert (prog.buffers["s2"].origin, prog.buffers["s2"].size) == (0, 4096)


def test_compound_literal_region_and_sizes():
    """A compound literal (NPB's ``(Vec3){...}`` style) read through clang under pycparser 3,
    whose ``CompoundLiteral`` takes a storage list (issue 26 item 9)."""
    prog, _ = _parse(r"""
    cl_mem big = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 8192, NULL, &err);
    cl_buffer_region r = (cl_buffer_region){ .origin = 1024, .size = 512 };
    cl_mem s = clCreateSubBuffer(big, 0, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    """)
    assert (prog.buffers["s"].origin, prog.buffers["s"].size) == (1024, 512)


def test_sse_header_brings_what_the_real_one_includes():
    """``<xmmintrin.h>`` includes ``<stdlib.h>`` through ``<mm_malloc.h>``: a host using
    ``EXIT_FAILURE`` and ``_mm_malloc`` after it alone still parses (issue 26 item 7)."""
    src = r"""
    #include <CL/cl.h>
    #include <xmmintrin.h>
    int main(void) {
        float *h = (float *)_mm_malloc(64 * sizeof(float), 16);
        if (!h) return EXIT_FAILURE;
        cl_int err;
        cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
        cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 256, NULL, &err);
        _mm_free(h);
        return 0;
    }
    """
    prog = parse_host(src, KERNELS, filename="host.c")
    assert prog.buffers["c"].size == 256


def test_map_and_blocking_flags():
    prog, _ = _parse(r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_ALLOC_HOST_PTR, 4096, NULL, &err);
    float *p = (float *)clEnqueueMapBuffer(queue, a, CL_TRUE, CL_MAP_WRITE, 0, 4096, 0, NULL,
                                           NULL, &err);
    p[0] = 1.0f;
    clEnqueueUnmapMemObject(queue, a, p, 0, NULL, NULL);
    cl_event ev;
    clEnqueueReadBuffer(queue, a, CL_FALSE, 0, 4096, p, 0, NULL, &ev);
    clWaitForEvents(1, &ev);
    """)
    kinds = [(op.kind, op.name) for op in prog.ops]
    assert kinds == [("write", "clEnqueueMapBuffer"), ("sync", "clEnqueueMapBuffer"),
                     ("read", "clEnqueueReadBuffer"), ("sync", "clWaitForEvents")]


def test_transfers_plain_and_rectangular():
    """A plain transfer moves its byte range; a rectangular one (a 2-D sub-block with pitches)
    is taken as the whole buffer; each blocking one synchronizes the queue."""
    prog, _ = _parse(r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    float h[1024];
    size_t origin[3] = {0, 0, 0}, region[3] = {64, 4, 1};
    clEnqueueWriteBuffer(queue, a, CL_FALSE, 128, 256, h, 0, NULL, NULL);
    clEnqueueWriteBufferRect(queue, a, CL_TRUE, origin, origin, region, 256, 0, 256, 0, h,
                             0, NULL, NULL);
    clEnqueueReadBufferRect(queue, a, CL_FALSE, origin, origin, region, 256, 0, 256, 0, h,
                            0, NULL, NULL);
    clEnqueueReadBuffer(queue, a, CL_TRUE, 0, 4096, h, 0, NULL, NULL);
    """)
    ops = [(op.kind, op.name, [(r.offset, r.size) for r in op.reads + op.writes])
           for op in prog.ops]
    assert ops == [("write", "clEnqueueWriteBuffer", [(128, 256)]),
                   ("write", "clEnqueueWriteBufferRect", [(0, None)]),
                   ("sync", "clEnqueueWriteBufferRect", []),
                   ("read", "clEnqueueReadBufferRect", [(0, None)]),
                   ("read", "clEnqueueReadBuffer", [(0, 4096)]),
                   ("sync", "clEnqueueReadBuffer", [])]


def test_read_under_data_dependent_condition_is_kept():
    prog, _ = _parse(r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    float h[1024];
    if (rand() % 2) {
        clEnqueueReadBuffer(queue, a, CL_TRUE, 0, 4096, h, 0, NULL, NULL);
        printf("%f\n", h[0]);
    }
    """)
    assert [op.kind for op in prog.ops] == ["read", "sync"]


def test_load_opencl_with_real_kernels(tmp_path):
    cl = tmp_path / "k.cl"
    cl.write_text(r"""
__kernel void vadd(__global const float *a, __global const float *b, __global float *c, int n) {
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
""")
    host = tmp_path / "main.c"
    host.write_text(_host(r"""
    int n = atoi(argv[1]);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * sizeof(float), NULL, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * sizeof(float), NULL, &err);
    cl_mem c = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, n * sizeof(float), NULL, &err);
    cl_kernel k = clCreateKernel(program, "vadd", &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(cl_mem), &b);
    clSetKernelArg(k, 2, sizeof(cl_mem), &c);
    clSetKernelArg(k, 3, sizeof(int), &n);
    size_t g = n;
    clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    """))
    prog = load_opencl(str(cl), str(host), params={"n": 64})
    assert prog.files == (str(cl), str(host))
    assert prog.name == "main"
    assert prog.launches[0].global_size == (64,)
    assert prog.buffers["c"].size == 256
    alone = load_opencl(cl)
    assert alone.launches[0].global_size == (sympy.Symbol("vadd_gs0"),)


# ----------------------------------------------------------------------------------------------
# Errors: always PolyfuseError with file and line
# ----------------------------------------------------------------------------------------------


def _error(body: str, needle: str, *, setup: bool = True, extra: str = "",
           cls: type = PolyfuseError) -> PolyfuseError:
    src = _host(body, setup=setup, extra=extra)
    with pytest.raises(cls) as exc:
        parse_host(src, KERNELS, filename="bad.c")
    err = exc.value
    assert err.file == "bad.c", str(err)
    assert err.line == _line(src, needle), str(err)
    return err


def test_error_syntax():
    err = _error("    int x = ;\n", "int x = ;")
    assert "syntax" in err.message


def test_error_unknown_kernel_name():
    err = _error('    cl_kernel k = clCreateKernel(program, "vad", &err);\n', '"vad"')
    assert "vad" in err.message and "vadd" in err.message and "scale" in err.message


def test_error_arg_index_out_of_range():
    err = _error(r"""
    cl_kernel k = clCreateKernel(program, "scale", &err);
    int n = 4;
    clSetKernelArg(k, 3, sizeof(int), &n);
    """, "clSetKernelArg(k, 3")
    assert "index 3" in err.message and "scale" in err.message


def test_error_unset_args_at_launch():
    err = _error(r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cl_kernel k = clCreateKernel(program, "vadd", &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    size_t g = 1024;
    clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    """, "clEnqueueNDRangeKernel")
    assert "vadd" in err.message and "1 (b)" in err.message and "3 (n)" in err.message


def test_error_buffer_bound_to_scalar_and_scalar_to_buffer():
    err = _error(r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cl_kernel k = clCreateKernel(program, "scale", &err);
    clSetKernelArg(k, 2, sizeof(cl_mem), &a);
    """, "clSetKernelArg(k, 2")
    assert "not a __global" in err.message
    err = _error(r"""
    cl_kernel k = clCreateKernel(program, "scale", &err);
    int n = 3;
    clSetKernelArg(k, 0, sizeof(int), &n);
    """, "clSetKernelArg(k, 0")
    assert "pointer" in err.message


def test_error_launch_under_data_dependent_condition():
    err = _error(r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cl_kernel k = clCreateKernel(program, "scale", &err);
    float alpha = 1.0f;
    int n = 1024;
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(float), &alpha);
    clSetKernelArg(k, 2, sizeof(int), &n);
    size_t g = 1024;
    if (rand() % 2) {
        clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    }
    """, "if (rand() % 2)", cls=UnsupportedError)
    assert "data-dependent host condition" in err.message


def test_error_launch_in_while_loop():
    err = _error(r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cl_kernel k = clCreateKernel(program, "scale", &err);
    float alpha = 1.0f;
    int n = 1024;
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(float), &alpha);
    clSetKernelArg(k, 2, sizeof(int), &n);
    size_t g = 1024;
    float residual = 1.0f, h_x[1024];
    while (residual > 1e-3f) {
        clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
        residual = norm(h_x, 1024);
    }
    """, "while (residual", cls=UnsupportedError)
    assert "trip count" in err.message


def test_error_unknown_global_size():
    err = _error(r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cl_kernel k = clCreateKernel(program, "scale", &err);
    float alpha = 1.0f;
    int n = 1024;
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(float), &alpha);
    clSetKernelArg(k, 2, sizeof(int), &n);
    size_t g = 1 + rand() % 1024;
    clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    """, "clEnqueueNDRangeKernel", cls=UnsupportedError)
    assert "global work size" in err.message


def test_error_no_main_and_missing_file(tmp_path):
    with pytest.raises(PolyfuseError) as exc:
        parse_host("int f(void) { return 0; }\n", KERNELS, filename="lib.c")
    assert exc.value.file == "lib.c" and "main" in exc.value.message
    with pytest.raises(PolyfuseError) as exc:
        parse_host(str(tmp_path / "nope.c"), KERNELS)
    assert "cannot read" in exc.value.message


def test_error_buffer_passed_without_address():
    err = _error(r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cl_kernel k = clCreateKernel(program, "scale", &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), a);
    """, "clSetKernelArg(k, 0")
    assert "&a" in err.message


def test_context_from_checks_goto_switch_and_concrete_while():
    prog, _ = _parse(r"""
    int n = atoi(argv[1]);
    if (n % 64 != 0) { fprintf(stderr, "n must be a multiple of 64\n"); goto cleanup; }
    assert(n <= 4096);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n * sizeof(float), NULL, &err);
    if (err != CL_SUCCESS) goto cleanup;
    cl_kernel k = clCreateKernel(program, "scale", &err);
    float alpha = 2;
    int arg = 0;
    clSetKernelArg(k, arg++, sizeof(cl_mem), &a);
    clSetKernelArg(k, arg++, sizeof(float), &alpha);
    clSetKernelArg(k, arg++, sizeof(int), &n);
    int mode = 1;
    switch (mode) {
      case 0: break;
      case 1: { size_t g = n; clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL); }
              break;
      default: exit(1);
    }
    int i = 0;
    while (i < 2) {
        size_t g = n / 2;
        CHECK(clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL));
        i++;
    }
    for (int r = 0; r < 4; r++) {
        size_t g = 64 + r;
        if (r % 2 == 0) clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    }
cleanup:
    clReleaseMemObject(a);
    """)
    ctx = param_context(prog)
    assert ctx.is_equal(type(ctx)("[n] -> { : n mod 64 = 0 and n <= 4096 }"))
    r = sympy.Symbol("r")
    assert [la.global_size for la in prog.launches] == \
        [(n,), (sympy.floor(n / 2),), (sympy.floor(n / 2),), (r + 64,)]
    assert prog.launches[0].arg(1).value == 2.0
    # `if (r % 2 == 0)` is an affine guard: a 0-or-1-trip loop, the r loop stays symbolic
    outer, guard = prog.launches[3].loops
    assert (outer.iterator, outer.upper) == ("r", 4) and guard.lower == 0
    assert [sympy.sympify(guard.upper).subs(r, v) for v in range(4)] == [1, 0, 1, 0]


def test_error_break_under_data_dependent_condition():
    err = _error(r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cl_kernel k = clCreateKernel(program, "scale", &err);
    float alpha = 1.0f;
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(float), &alpha);
    clSetKernelArg(k, 2, sizeof(int), &alpha);
    for (int it = 0; it < 100; it++) {
        size_t g = 1024;
        clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
        if (converged(a)) break;
    }
    """, "if (converged(a)) break;", cls=UnsupportedError)
    assert "left early" in err.message


def test_error_frontier_loop_names_the_count_it_reads_back():
    """A BFS-style ``do { read the frontier size back; if (n == 0) break; launch } while (1)``:
    truly data-dependent, refused naming the read-back's line (a value per iteration: no one
    --param names it)."""
    body = r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cl_mem tail = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(int), NULL, &err);
    cl_kernel k = clCreateKernel(program, "scale", &err);
    float alpha = 1.0f;
    int num_t;
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(float), &alpha);
    do {
        clEnqueueReadBuffer(queue, tail, CL_TRUE, 0, sizeof(int), &num_t, 0, NULL, NULL);
        if (num_t == 0) break;
        size_t g = num_t;
        clSetKernelArg(k, 2, sizeof(int), &num_t);
        clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    } while (1);
    """
    err = _error(body, "if (num_t == 0) break;", cls=UnsupportedError)
    line = _line(_host(body), "clEnqueueReadBuffer(queue, tail")
    assert "left early" in err.message
    assert f"read back from the device by clEnqueueReadBuffer at bad.c:{line}" in err.message
    assert "--param" not in err.message, err.message


def test_sizes_read_back_from_the_device_are_named():
    """A value read back from the device is data: never the variable's old value. An integer
    becomes a parameter named after its variable; a float that sizes a launch is refused naming
    the read-back and the --param that fixes it."""
    body = r"""
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    cl_kernel k = clCreateKernel(program, "scale", &err);
    float alpha = 1.0f;
    int n = 1024;
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(float), &alpha);
    clSetKernelArg(k, 2, sizeof(int), &n);
    int count = 0;
    float total = 0.0f;
    clEnqueueReadBuffer(queue, a, CL_TRUE, 0, sizeof(int), &count, 0, NULL, NULL);
    clEnqueueReadBuffer(queue, a, CL_TRUE, 4, sizeof(float), &total, 0, NULL, NULL);
    size_t g = count;
    clEnqueueNDRangeKernel(queue, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    size_t h = (size_t)(total * 64);
    clEnqueueNDRangeKernel(queue, k, 1, NULL, &h, NULL, 0, NULL, NULL);
    """
    err = _error(body, "clEnqueueNDRangeKernel(queue, k, 1, NULL, &h", cls=UnsupportedError)
    src = _host(body)
    assert f"'total', read back from the device by clEnqueueReadBuffer at bad.c:" \
        f"{_line(src, 'sizeof(float), &total')}" in err.message
    assert "--param total=VALUE" in err.message
    prog = parse_host(src, KERNELS, filename="ok.c", params={"total": 2.0}, check_params=True)
    assert prog.params == ("count",)
    assert [la.global_size for la in prog.launches] == [(sympy.Symbol("count"),), (128,)]


# ----------------------------------------------------------------------------------------------
# The parts of the front-end: the OpenCL API table, public interfaces between parts
# ----------------------------------------------------------------------------------------------

WORK_SIZE_BODY = r"""
    cl_kernel k = clCreateKernel(program, "scale", &err);
    cl_mem d_c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1024, NULL, &err);
    size_t global = clPolyfuseTestWorkSize(queue, 256);
    float alpha = 2.0f;
    int len = 256;
    clSetKernelArg(k, 0, sizeof(cl_mem), &d_c);
    clSetKernelArg(k, 1, sizeof(float), &alpha);
    clSetKernelArg(k, 2, sizeof(int), &len);
    clEnqueueNDRangeKernel(queue, k, 1, NULL, &global, NULL, 0, NULL, NULL);
"""
WORK_SIZE_DECL = "size_t clPolyfuseTestWorkSize(cl_command_queue queue, int n);\n"


def test_an_api_call_is_one_table_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler added to the OpenCL API table is what a host's call of that name runs.  Not
    registered, the call is an unknown function and the work size it returns is not known;
    registered (one entry), its value and effect (a sync) are in the model."""
    from polyfuse.frontend.host import opencl_api

    with pytest.raises(UnsupportedError, match="global work size"):
        _parse(WORK_SIZE_BODY, extra=WORK_SIZE_DECL)
    calls = []

    def work_size(ev: object, node: object, args: list) -> object:
        calls.append(ev.ctx.loc(node).line)
        opencl_api.sync(ev, "clPolyfuseTestWorkSize", node)
        return args[1]

    monkeypatch.setitem(opencl_api.HANDLERS, "clPolyfuseTestWorkSize", work_size)
    prog, src = _parse(WORK_SIZE_BODY, extra=WORK_SIZE_DECL)
    assert calls == [_line(src, "clPolyfuseTestWorkSize(queue, 256)")]
    (launch,) = prog.launches
    assert launch.global_size == (256,)
    assert [(op.kind, op.name) for op in prog.ops if isinstance(op, HostOp)] == \
        [("sync", "clPolyfuseTestWorkSize")]


def test_host_parts_use_only_public_names_of_each_other() -> None:
    """The front-end's parts (memory, evaluator, API tables, the C++ wrapper model...) reach
    each other through public interfaces: no ``x._name`` on another object and no import of a
    ``_name`` from another module of the package."""
    import ast
    from pathlib import Path

    import polyfuse.frontend.host as host

    found = []
    for path in sorted(Path(host.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and \
                    not node.attr.startswith("__") and \
                    not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("polyfuse."):
                found += [f"{path.name}:{node.lineno}: import {a.name}" for a in node.names
                          if a.name.startswith("_")]
    assert not found, found
