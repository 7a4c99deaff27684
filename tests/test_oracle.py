"""The brute-force oracle: the interpreter computes right values, widths follow the definitions
(docs/definitions.md)."""

from __future__ import annotations

import json
from pathlib import Path

import islpy as isl
import numpy as np
import pytest
import sympy

from polyfuse.core.program import ArgBinding, Buffer, BufferRange, HostLoop, HostOp, Launch, Program
from polyfuse.oracle.bruteforce import (
    brute_force_dependences,
    concrete_width,
    edge_index,
    kernels_from_source,
    simulate,
)
from polyfuse.oracle.interp import InterpError, LocalArg, compile_kernel, run_kernel

# ----------------------------------------------------------------------------------------------
# Interpreter: values
# ----------------------------------------------------------------------------------------------


def test_elementwise_values_and_trace() -> None:
    src = """
    __kernel void saxpy(__global const float *x, __global float *y, float a, int n) {
      int i = get_global_id(0);
      if (i < n) y[i] = a * x[i] + y[i];
    }"""
    x = np.arange(12, dtype=np.float32)
    y = np.ones(12, dtype=np.float32)
    run = run_kernel(src, (12,), (4,), {"x": x, "y": y, "a": 2.0, "n": 10})
    assert np.allclose(y, np.r_[2 * np.arange(10) + 1, [1, 1]])
    # work-items 10, 11 touch nothing; the others read x, read y, write y
    assert len(run.accesses) == 30
    assert run.accesses[0].wi == ((0,), (0,))
    assert {(a.buffer, a.index, a.mode) for a in run.accesses if a.wi == ((2,), (1,))} == {
        ("x", 9, "R"), ("y", 9, "R"), ("y", 9, "W")}
    counts = run.counts()
    assert counts[((0,), (3,))] == {("x", "R"): 1, ("y", "R"): 1, ("y", "W"): 1}


def test_shift_2d_and_positional_args() -> None:
    src = """
    __kernel void sh(__global float *out, __global const float *in, int w) {
      int x = get_global_id(0), y = get_global_id(1);
      int h = get_global_size(1);
      out[y * w + x] = in[((y + 1) % h) * w + x];
    }"""
    a = np.arange(24, dtype=np.float32)
    out = np.zeros(24, dtype=np.float32)
    run_kernel(src, (6, 4), (3, 2), [out, a, 6])
    assert np.array_equal(out.reshape(4, 6), np.roll(a.reshape(4, 6), -1, axis=0))


REDUCE = """
__kernel void reduce(__global const float *in, __global float *out, __local float *scratch) {
  int l = get_local_id(0);
  scratch[l] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (l < s)
      scratch[l] += scratch[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0)
    out[get_group_id(0)] = scratch[0];
}"""


def test_reduction_with_local_memory_and_barriers() -> None:
    rng = np.random.default_rng(1)
    x = rng.random(64).astype(np.float32)
    out = np.zeros(4, dtype=np.float32)
    run = run_kernel(REDUCE, (64,), (16,), {"in": x, "out": out, "scratch": LocalArg(64)},
                     record_local=True)
    assert np.allclose(out, x.reshape(4, 16).sum(axis=1), rtol=1e-5)
    assert run.barriers == 4 * 5  # 1 + log2(16) barriers per group
    writes = [a for a in run.accesses if a.mode == "W"]
    assert [(a.wi, a.index) for a in writes] == [(((g,), (0,)), g) for g in range(4)]
    assert any(a.buffer == "scratch" for a in run.local_accesses)


def test_reduction_with_static_local_array() -> None:
    src = REDUCE.replace(", __local float *scratch", "").replace(
        "int l = get_local_id(0);", "__local float scratch[8];\n  int l = get_local_id(0);")
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(4, dtype=np.float32)
    run_kernel(src, (32,), (8,), {"in": x, "out": out})
    assert np.array_equal(out, x.reshape(4, 8).sum(axis=1))


GEMM = """
#define TS 2
__kernel void gemm(__global const float *A, __global const float *B, __global float *C,
                   int M, int N, int K) {
  __local float As[TS][TS];
  __local float Bs[TS][TS];
  int row = get_local_id(1), col = get_local_id(0);
  int grow = get_global_id(1), gcol = get_global_id(0);
  float acc = 0.0f;
  for (int t = 0; t < K / TS; t++) {
    As[row][col] = A[grow * K + t * TS + col];
    Bs[row][col] = B[(t * TS + row) * N + gcol];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TS; ++k)
      acc += As[row][k] * Bs[k][col];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (grow < M)
    C[grow * N + gcol] = acc;
}"""


def test_tiled_gemm_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    M, N, K = 4, 6, 8
    A = rng.random((M, K)).astype(np.float32)
    B = rng.random((K, N)).astype(np.float32)
    C = np.zeros((M, N), dtype=np.float32)
    run = run_kernel(GEMM, (N, M), (2, 2), {"A": A, "B": B, "C": C, "M": M, "N": N, "K": K})
    assert np.allclose(C, A @ B, rtol=1e-5)
    # every C element written once, by the work-item of its coordinates
    writes = {(a.wi, a.index) for a in run.accesses if a.buffer == "C"}
    assert len(writes) == M * N
    assert (((1, 0), (1, 1)), 1 * N + 3) in writes  # row 1, column 3: group (1, 0), local (1, 1)


def test_c_integer_semantics() -> None:
    src = """
    __kernel void ints(__global int *o, __global uint *u, int a, int b) {
      o[0] = a / b;  o[1] = a % b;  o[2] = -a / b;  o[3] = -a % b;
      o[4] = a / -b; o[5] = a % -b;
      uint x = 0u; x = x - 1u; u[0] = x;
      u[1] = (uint)-3;
      o[6] = (int)(x + 2u);               /* wraps to 1 */
      o[7] = (-1 < 0u);                   /* -1 converted to unsigned: false */
      o[8] = (int)-2.7f;                  /* truncation toward zero */
      o[9] = 7 >> 1; o[10] = -7 >> 1; o[11] = 1 << 31;
      o[12] = 2147483647 + 1;             /* two's complement wrap */
      char c = 200; o[13] = c;
      uchar uc = 300; o[14] = uc;
      o[15] = 'a' + 1;
      o[16] = 0x10 | 3; o[17] = ~5 & 0xff; o[18] = 5 ^ 3; o[19] = !3 + !0;
      int i = 5; int j = i++ + ++i; o[20] = j; o[21] = i;
      o[22] = (a > b) ? a : b;
      o[23] = (int)(7.0f / 2);
      o[24] = sizeof(float4) + sizeof(int);
    }"""
    o = np.zeros(25, dtype=np.int32)
    u = np.zeros(2, dtype=np.uint32)
    run_kernel(src, (1,), (1,), {"o": o, "u": u, "a": 7, "b": 2})
    expect = [3, 1, -3, -1, -3, 1, 1, 0, -2, 3, -4, -2**31, -2**31, -56, 44, 98, 19, 250, 6, 1,
              12, 7, 7, 3, 20]
    assert o.tolist() == expect
    assert u.tolist() == [2**32 - 1, 2**32 - 3]


def test_control_flow_helpers_vectors_and_builtins() -> None:
    src = """
    float sq(float v) { return v * v; }
    int collatz(int n) {
      int steps = 0;
      while (n != 1) { n = (n % 2) ? 3 * n + 1 : n / 2; steps++; }
      return steps;
    }
    __kernel void misc(__global float *f, __global int *o, __global float4 *v,
                       __global const int *idx) {
      int i = get_global_id(0);
      int acc = 0;
      for (int k = 0; k < 10; k++) {
        if (k == 2) continue;
        if (k == 6) break;
        acc += k;
      }
      int d = 0;
      do { d += 2; } while (d < 5);
      int s;
      switch (i) { case 0: s = 10; break; case 1: s = 20; default: s += 1; }
      float p[3] = {1.0f, 2.0f, 3.0f};
      o[i * 4 + 0] = acc; o[i * 4 + 1] = d; o[i * 4 + 2] = s; o[i * 4 + 3] = collatz(6 + i);
      f[i * 4 + 0] = sq(p[i]) + fmax(1.0f, 2.0f) + clamp(5.0f, 0.0f, 1.0f);
      f[i * 4 + 1] = exp(0.0f) + tanh(0.0f) + sqrt(16.0f) + fabs(-1.5f) + min(3, 2);
      f[i * 4 + 2] = f[idx[i]];  /* data-dependent gather */
      float4 w = v[i];
      w.x = w.y + w.z;
      w.w = dot(w, (float4)(0.0f, 0.0f, 0.0f, 1.0f));
      v[i] = w * 2.0f;
      vstore4(vload4(0, f + 8), 0, f + 12);
    }"""
    f = np.zeros(16, dtype=np.float32)
    f[8:12] = [5, 6, 7, 8]
    o = np.zeros(8, dtype=np.int32)
    v = np.arange(8, dtype=np.float32)
    idx = np.array([9, 10], dtype=np.int32)
    run = run_kernel(src, (2,), (1,), {"f": f, "o": o, "v": v, "idx": idx})
    assert o.tolist() == [0 + 1 + 3 + 4 + 5, 6, 10, 8, 13, 6, 21, 16]
    assert f[0] == 1 + 2 + 1 and f[4] == 4 + 2 + 1
    assert f[1] == 1 + 0 + 4 + 1.5 + 2
    assert f[2] == 6 and f[6] == 7  # gathered through idx
    assert v.tolist() == [2 * 3, 2, 4, 6, 2 * 11, 10, 12, 14]
    assert f[12:16].tolist() == [5, 6, 7, 8]
    # the float4 parameter is traced in float4 units
    assert {a.index for a in run.accesses if a.buffer == "v"} == {0, 1}
    assert {a.index for a in run.accesses if a.buffer == "idx"} == {0, 1}


def test_attribute_convention_without_preprocessor() -> None:
    src = """[[ocl::kernel]] void k([[ocl::global]] float *a, int n) {
      [[ocl::local]] float t[4];
      t[get_local_id(0)] = a[get_global_id(0)];
      barrier(1);
      a[get_global_id(0)] = t[(get_local_id(0) + 1) % 4] + n;
    }"""
    a = np.arange(8, dtype=np.float32)
    run_kernel(src, (8,), (4,), {"a": a, "n": 1})
    assert a.tolist() == [2, 3, 4, 1, 6, 7, 8, 5]


def test_errors() -> None:
    oob = "__kernel void k(__global float *a) { a[get_global_id(0) + 1] = 0; }"
    with pytest.raises(InterpError, match="out-of-bounds"):
        run_kernel(oob, (4,), (4,), {"a": np.zeros(4, np.float32)})
    div = """__kernel void k(__global float *a) {
      if (get_local_id(0) == 0) barrier(CLK_LOCAL_MEM_FENCE);
    }"""
    with pytest.raises(InterpError, match="divergence"):
        run_kernel(div, (4,), (2,), {"a": np.zeros(4, np.float32)})
    with pytest.raises(InterpError, match="does not divide"):
        run_kernel(oob, (5,), (2,), {"a": np.zeros(8, np.float32)})
    with pytest.raises(InterpError, match="division by zero"):
        run_kernel("__kernel void k(__global int *a, int z) { a[0] = 1 / z; }", (1,), None,
                   {"a": np.zeros(1, np.int32), "z": 0})
    ck = compile_kernel("__kernel void k(__global int *a, int z) { a[z] = z; }")
    assert [n for n, _ in ck.params] == ["a", "z"]


# ----------------------------------------------------------------------------------------------
# Widths on concrete pair sets
# ----------------------------------------------------------------------------------------------


def test_concrete_width() -> None:
    # (g, l) tuples, 1-D, groups of 4
    same = [((g, lid), (g, lid)) for g in range(2) for lid in range(4)]
    assert concrete_width(same) == "thread"
    shift = [(((i + 1) // 4, (i + 1) % 4), (i // 4, i % 4)) for i in range(7)]
    assert concrete_width(shift) == "thread"
    transpose = [((0, k), (0, 3 - k)) for k in range(4)]
    assert concrete_width(transpose) == "thread"
    # every consumer of a group reads what all producers of the same group wrote
    within = [((g, a), (g, b)) for g in range(2) for a in range(4) for b in range(4)]
    assert concrete_width(within) == "block"
    # group g reads from groups g and g+1 (a halo)
    halo = within + [((1, 0), (0, 3))]
    assert concrete_width(halo) == "global"
    # a reduction: every group's result read by one work-item
    reduce = [((g, 0), (0, 0)) for g in range(4)]
    assert concrete_width(reduce) == "global"
    # explicit layout: host iterator + group + local
    looped = [((h, 0, k), (h, 0, m)) for h in range(2) for k in range(2) for m in range(2)]
    assert concrete_width(looped, 2, 2) == "block"
    assert concrete_width(looped, 1, 1) == "block"
    assert concrete_width([]) == "thread"


# ----------------------------------------------------------------------------------------------
# Brute-force dependences of small programs
# ----------------------------------------------------------------------------------------------

KERNELS = """
__kernel void prod(__global float *b, __global const float *a) {
  int i = get_global_id(0); b[i] = a[i] + 1.0f; }
__kernel void shift(__global float *c, __global const float *b, int n) {
  int i = get_global_id(0); if (i + 1 < n) c[i] = b[i + 1]; }
__kernel void total(__global float *d, __global const float *b, int n) {
  int i = get_global_id(0); float s = 0.0f;
  for (int k = 0; k < n; k++) s += b[k];
  d[i] = s; }
__kernel void rot(__global float *e, __global const float *b) {
  int l = get_local_id(0), g = get_group_id(0);
  e[get_global_id(0)] = b[g * 4 + (l + 1) % 4]; }
__kernel void mirror(__global float *e, __global const float *b) {
  int l = get_local_id(0), g = get_group_id(0);
  e[get_global_id(0)] = b[g * 4 + 3 - l] + b[g * 4 + l]; }
__kernel void inc(__global float *x) { int i = get_global_id(0); x[i] += 1.0f; }
__kernel void gather(__global float *y, __global const float *x, __global const int *idx) {
  int i = get_global_id(0); y[i] = x[idx[i]]; }
"""


def _buf(name: str, n: sympy.Expr, dtype: str = "float", **kw) -> Buffer:
    return Buffer(name, size=4 * n, dtype=dtype, **kw)


def _b(i: int, name: str) -> ArgBinding:
    return ArgBinding(i, "buffer", buffer=name)


def _launch(op_id: int, kernel: str, args: tuple, n: sympy.Expr, loops: tuple = (),
            local: int = 4) -> Launch:
    return Launch(op_id, kernel, 1, (n,), (sympy.Integer(local),), args, loops=loops)


def test_brute_force_widths() -> None:
    n = sympy.Symbol("n")
    ks = kernels_from_source(KERNELS)
    bufs = {x: _buf(x, n) for x in "abcde"}
    ops = (
        HostOp(0, "write", writes=(BufferRange("a"),)),
        _launch(1, "prod", (_b(0, "b"), _b(1, "a")), n),
        _launch(2, "shift", (_b(0, "c"), _b(1, "b"), ArgBinding(2, "scalar", value=n)), n),
        _launch(3, "total", (_b(0, "d"), _b(1, "b"), ArgBinding(2, "scalar", value=n)), n),
        _launch(4, "rot", (_b(0, "e"), _b(1, "b")), n),
        _launch(5, "mirror", (_b(0, "e"), _b(1, "b")), n),
        _launch(6, "prod", (_b(0, "b"), _b(1, "a")), n),
        HostOp(7, "read", reads=(BufferRange("c"),)),
    )
    prog = Program(ks, bufs, ops, params=("n",))
    edges = edge_index(brute_force_dependences(prog, {"n": 16}))
    assert edges[(1, 2, "b", "RAW")].width == "thread"  # shift by one
    assert len(edges[(1, 2, "b", "RAW")].pairs) == 15
    assert edges[(1, 3, "b", "RAW")].width == "global"  # every work-item reads all of b
    assert edges[(1, 4, "b", "RAW")].width == "thread"  # rotation inside a group
    assert edges[(1, 5, "b", "RAW")].width == "block"  # two producers per consumer, same group
    assert edges[(4, 5, "e", "WAW")].width == "thread"
    assert edges[(1, 6, "b", "WAW")].width == "thread"
    assert edges[(2, 6, "b", "WAR")].width == "thread"
    assert edges[(3, 6, "b", "WAR")].width == "global"
    assert edges[(0, 1, "a", "RAW")].host and edges[(2, 7, "c", "RAW")].host
    # the second prod does not read b: no RAW into it; e is killed by the mirror write
    assert (1, 6, "b", "RAW") not in edges
    assert (4, 7, "e", "RAW") not in edges
    e = edges[(1, 2, "b", "RAW")]
    assert ((0, 1), (0, 0)) in e.pairs and e.isl_relation().startswith("{ L1[0, 1] -> L2[0, 0]")


def test_brute_force_host_loops_sub_buffers_and_data() -> None:
    n = sympy.Symbol("n")
    t = HostLoop("t", sympy.Integer(0), sympy.Integer(3))
    ks = kernels_from_source(KERNELS)
    bufs = {
        "x": _buf("x", 2 * n),
        "lo": Buffer("lo", size=4 * n, parent="x", origin=sympy.Integer(0)),
        "hi": Buffer("hi", size=4 * n, parent="x", origin=4 * n),
        "y": _buf("y", n),
        "idx": _buf("idx", n, dtype="int"),
    }
    ops = (
        _launch(0, "inc", (_b(0, "x"),), 2 * n, loops=(t,)),  # all of x, every iteration
        _launch(1, "inc", (_b(0, "hi"),), n, loops=(t,)),  # second half of x via a sub-buffer
        _launch(2, "gather", (_b(0, "y"), _b(1, "lo"), _b(2, "idx")), n),
    )
    prog = Program(ks, bufs, ops, params=("n",))
    idx = np.array([3, 3, 0, 1, 2, 3, 0, 1], dtype=np.int32)
    sim = simulate(prog, {"n": 8}, inputs={"idx": idx})
    assert [(i.op_id, i.h) for i in sim.instances] == [
        (0, (0,)), (1, (0,)), (0, (1,)), (1, (1,)), (0, (2,)), (1, (2,)), (2, ())]
    edges = edge_index(brute_force_dependences(prog, {"n": 8}, inputs={"idx": idx}))
    # launch 1 work-item l of group g touches x[8 + 4g + l], written by launch 0's x[8 + 4g+l]
    e = edges[(0, 1, "x", "RAW")]
    assert e.width == "thread"  # work-item (g, l) of L1 ↔ (g + 2, l) of L0: a shift
    assert not e.loop_carried
    assert ((0, 2, 1), (0, 0, 1)) in e.pairs
    back = edges[(1, 0, "x", "RAW")]
    assert back.loop_carried and ((0, 0, 1), (1, 2, 1)) in back.pairs
    assert edges[(0, 0, "x", "RAW")].loop_carried
    assert edges[(0, 0, "x", "RAW")].width == "thread"
    # the gather reads lo[idx[i]]: elements 0..3 of x, each last written by launch 0 at t = 2
    g = edges[(0, 2, "x", "RAW")]
    assert g.elements == {0, 1, 2, 3}
    assert g.pairs == {((2, k // 4, k % 4), (i // 4, i % 4)) for i, k in enumerate(idx)}
    assert g.width == "global"
    assert (1, 2, "x", "RAW") not in edges  # the hi half is not read
    # memory-based dependences: every earlier writer
    mem = edge_index(brute_force_dependences(prog, {"n": 8}, inputs={"idx": idx}, kill=False))
    assert {a[0] for a, _ in mem[(0, 2, "x", "RAW")].pairs} == {0, 1, 2}
    # final contents: x incremented 3 times, its upper half 6 times
    x = sim.array("x")
    x0 = simulate(prog, {"n": 8}, inputs={"idx": idx, "x": np.zeros(16, np.float32)}).array("x")
    assert x0.tolist() == [3.0] * 8 + [6.0] * 8
    assert x.shape == (16,)


def test_brute_force_mixed_views_and_host_copy() -> None:
    src = """
    __kernel void w4(__global float4 *v) { int i = get_global_id(0); v[i] = (float4)(i); }
    __kernel void r1(__global float *o, __global const float *s) {
      int i = get_global_id(0); o[i] = s[4 * i + 1]; }
    """
    ks = kernels_from_source(src)
    bufs = {"v": Buffer("v", size=sympy.Integer(64)), "o": Buffer("o", size=sympy.Integer(16)),
            "w": Buffer("w", size=sympy.Integer(64))}
    ops = (
        Launch(0, "w4", 1, (sympy.Integer(4),), (sympy.Integer(2),), (_b(0, "v"),)),
        HostOp(1, "copy", reads=(BufferRange("v"),), writes=(BufferRange("w"),)),
        Launch(2, "r1", 1, (sympy.Integer(4),), (sympy.Integer(2),), (_b(0, "o"), _b(1, "v"))),
        Launch(3, "r1", 1, (sympy.Integer(4),), (sympy.Integer(2),), (_b(0, "o"), _b(1, "w"))),
    )
    prog = Program(ks, bufs, ops)
    sim = simulate(prog)
    assert sim.units["v"] == 4
    assert sim.array("o").tolist() == [0, 1, 2, 3]  # through the host copy
    edges = edge_index(brute_force_dependences(prog))
    assert edges[(0, 2, "v", "RAW")].width == "thread"
    assert edges[(0, 2, "v", "RAW")].elements == {1, 5, 9, 13}
    assert edges[(0, 1, "v", "RAW")].host
    assert edges[(1, 3, "w", "RAW")].host
    assert edges[(2, 3, "o", "WAW")].width == "thread"


# ----------------------------------------------------------------------------------------------
# The example programs: expected.json widths, checked by execution
# ----------------------------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
#: values for the parameters an example leaves symbolic (None in expected.json)
SYMBOLIC_VALUES = {"runtime_offset": [{"m": 0, "n": 96}, {"m": 3, "n": 64}, {"m": -2, "n": 64},
                                      {"m": 3, "n": 96}, {"m": 100, "n": 96}]}


def _examples() -> list[str]:
    if not EXAMPLES.is_dir():
        return []
    return sorted(p.name for p in EXAMPLES.iterdir() if (p / "expected.json").is_file())


def _expected_label(edge: dict, values: dict) -> str:
    """The label expected.json gives at ``values``: the finest condition holding, else width."""
    for label in ("thread", "block"):
        cond = edge.get("conditions", {}).get(label)
        if not cond:
            continue
        s = isl.Set(cond)
        point = s.get_space().params()
        for name, v in values.items():
            idx = point.find_dim_by_name(isl.dim_type.param, name)
            if idx >= 0:
                s = s.fix_val(isl.dim_type.param, idx, isl.Val(v))
        if not s.is_empty():
            return label
    return edge["width"]


@pytest.mark.parametrize("example", _examples())
def test_example_widths_by_execution(example: str) -> None:
    host = pytest.importorskip("polyfuse.frontend.host")
    expected = json.loads((EXAMPLES / example / "expected.json").read_text())
    fixed = {k: v for k, v in (expected.get("params") or {}).items() if v is not None}
    symbolic = [k for k, v in (expected.get("params") or {}).items() if v is None]
    for values in (SYMBOLIC_VALUES.get(example, [{}]) if symbolic else [{}]):
        params = {**fixed, **values}
        prog = host.load_opencl(str(EXAMPLES / example / "kernels.cl"),
                                host=str(EXAMPLES / example / "host.c"), params=params)
        edges = brute_force_dependences(prog, params=params)
        pos = {launch.id: i for i, launch in enumerate(prog.launches)}
        got = {(pos[e.src], pos[e.dst], e.array, e.kind): e for e in edges if not e.host}
        want = {(x["src_launch"], x["dst_launch"], x["array"], x["kind"]): x
                for x in expected["edges"]}
        for key, x in want.items():
            label = _expected_label(x, params)
            if key not in got:
                # an edge that exists only for other parameter values
                assert symbolic, f"{example}: no concrete dependence {key}"
                continue
            assert got[key].width == label, (example, params, key, got[key].width, label)
            assert got[key].loop_carried == x["loop_carried"], (example, key)
        assert set(got) <= set(want), (example, params, set(got) - set(want))
