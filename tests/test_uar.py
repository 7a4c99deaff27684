"""UAR construction: effects, dataflow edges, widths, host edges, views, loops, JSON.

Programs are built by hand (kernels from OpenCL source through the front-end, or hand-written
isl models), and several are checked against the brute-force oracle of
:mod:`polyfuse.oracle.bruteforce`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import islpy as isl
import pytest
import sympy

from polyfuse.core.program import (
    Access,
    ArgBinding,
    Buffer,
    BufferRange,
    HostLoop,
    HostOp,
    Kernel,
    KernelParam,
    Launch,
    Program,
    Statement,
)
from polyfuse.uar import UAR, build_uar

parse_kernels = pytest.importorskip("polyfuse.frontend.opencl").parse_kernels

N = 1024
S = sympy.Integer


def launch(op_id, kernel, gs, ls, *args, loops=(), work_dim=None):
    """A launch; ``args`` are buffer names (str) or scalar host expressions."""
    gs = tuple(S(g) if isinstance(g, int) else g for g in (gs if isinstance(gs, tuple) else (gs,)))
    if ls is not None:
        ls = tuple(S(x) if isinstance(x, int) else x for x in (ls if isinstance(ls, tuple)
                                                                 else (ls,)))
    binds = tuple(
        ArgBinding(i, "buffer", buffer=a) if isinstance(a, str)
        else ArgBinding(i, "scalar", value=sympy.sympify(a))
        for i, a in enumerate(args)
    )
    return Launch(op_id, kernel, work_dim or len(gs), gs, ls, binds, loops=tuple(loops))


def buffers(*names, size=4 * N):
    return {n: Buffer(n, S(size)) for n in names}


def program(src, ops, bufs, params=(), context="{ : }"):
    return Program(parse_kernels(src), bufs, tuple(ops), params=tuple(params), context=context)


def only(uar: UAR, kind="RAW", **kw):
    edges = [e for e in uar.edges if e.kind == kind
             and all(getattr(e, k) == v for k, v in kw.items())]
    assert len(edges) == 1, [(e.src, e.dst, e.kind, e.array) for e in uar.edges]
    return edges[0]


def chain(consumer_body, consumer_ls=64, n=N, producer_ls=64, extra_params=""):
    """Producer ``b[i] = a[i]`` then a consumer reading ``b``; returns the UAR."""
    src = f"""
    __kernel void prod(__global const float *a, __global float *b) {{
        int i = get_global_id(0);
        b[i] = a[i] * 2.0f;
    }}
    __kernel void cons(__global const float *b, __global float *c{extra_params}) {{
        int i = get_global_id(0);
        int g = get_group_id(0);
        int l = get_local_id(0);
        {consumer_body}
    }}
    """
    return src, build_uar(program(src, [launch(1, "prod", n, producer_ls, "a", "b"),
                                        launch(2, "cons", n, consumer_ls, "b", "c")],
                                  buffers("a", "b", "c", size=4 * n)))


# ----------------------------------------------------------------------------------------------
# Widths through whole programs
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    "c[i] = b[i];",
    "c[i] = b[(i + 1) % 1024];",
    "c[i] = b[g * 64 + 63 - l];",
    "c[1023 - i] = b[i];",
])
def test_thread_edges(body):
    _, uar = chain(body)
    e = only(uar, src=1, dst=2, array="b")
    assert e.width == "thread" and e.conditions == {} and e.witness is None
    assert not e.host and not e.loop_carried


def test_block_edge_rotation_inside_group():
    _, uar = chain("c[i] = b[i] + b[g * 64 + (l + 1) % 64];")
    e = only(uar, array="b")
    assert e.width == "block" and e.conditions == {}


def _check_global_witness(e):
    w = e.witness
    assert e.width == "global" and w is not None
    rel = e.relation
    sn, dn = rel.get_tuple_name(isl.dim_type.in_), rel.get_tuple_name(isl.dim_type.out)

    names = ", ".join(w["params"])
    fixed = " and ".join(f"{k} = {v}" for k, v in w["params"].items()) or "0 = 0"

    def member(s, d):
        pt = isl.Map(f"[{names}] -> {{ {sn}[{', '.join(map(str, s))}] -> "
                     f"{dn}[{', '.join(map(str, d))}] : {fixed} }}")
        return pt.align_params(rel.get_space()).is_subset(rel)

    assert member(w["src"], w["dst"]) and member(w["other_src"], w["other_dst"])
    ng = len(w["src"]) // 2
    src_groups = {tuple(w["src"][:ng]), tuple(w["other_src"][:ng])}
    dst_groups = {tuple(w["dst"][:ng]), tuple(w["other_dst"][:ng])}
    # one side shares a group, the other does not: the group relation is not a bijection
    assert (len(src_groups), len(dst_groups)) in ((2, 1), (1, 2))
    assert json.dumps(w)  # JSON-serialisable
    return w


@pytest.mark.parametrize("body", [
    "c[i] = b[i] + (i > 0 ? b[i - 1] : 0.0f) + (i < 1023 ? b[i + 1] : 0.0f);",  # stencil
    "c[i] = b[0];",  # broadcast
    "if (l == 0) { float s = 0.0f; for (int k = 0; k < 1024; k++) s += b[k]; c[g] = s; }",
])
def test_global_edges_have_witness(body):
    _, uar = chain(body)
    e = only(uar, array="b")
    _check_global_witness(e)
    assert e.conditions == {}
    assert uar.global_edges() == (e,)


def test_stencil_witness_crosses_groups():
    _, uar = chain("c[i] = b[i] + (i > 0 ? b[i - 1] : 0.0f) + (i < 1023 ? b[i + 1] : 0.0f);")
    w = _check_global_witness(only(uar, array="b"))
    # stencil: a consumer group reads its neighbours' boundary elements
    assert w["reason"].startswith("a consumer")


def test_symbolic_offset_condition():
    src = """
    __kernel void prod(__global const float *a, __global float *b) {
        int i = get_global_id(0);
        b[i] = a[i];
    }
    __kernel void cons(__global const float *b, __global float *c, int m) {
        int i = get_global_id(0);
        if (i + m < 1024) c[i] = b[i] + b[i + m];
    }
    """
    ctx = "[m] -> { : 0 <= m < 1024 }"
    p = program(src, [launch(1, "prod", N, 64, "a", "b"),
                      launch(2, "cons", N, 64, "b", "c", sympy.Symbol("m"))],
                buffers("a", "b", "c"), params=("m",), context=ctx)
    uar = build_uar(p)
    e = only(uar, array="b")
    assert e.width == "global"
    assert set(e.conditions) == {"thread"}
    assert isl.Set(e.conditions["thread"]).is_equal(
        isl.Set("[m] -> { : m = 0 }").intersect(isl.Set(ctx)))
    assert e.conditions["thread"] == "[m] -> { : m = 0 }"
    assert e.witness["params"]["m"] != 0
    _check_global_witness(e)


def test_two_d_producer_one_d_consumer_is_thread():
    src = """
    __kernel void gemm(__global float *c) {
        int row = get_global_id(1), col = get_global_id(0);
        c[row * 64 + col] = row + col;
    }
    __kernel void ew(__global const float *c, __global float *d) {
        int i = get_global_id(0);
        d[i] = c[i] + 1.0f;
    }
    """
    p = program(src, [launch(1, "gemm", (64, 64), (16, 16), "c"),
                      launch(2, "ew", 4096, 256, "c", "d")], buffers("c", "d", size=4 * 4096))
    e = only(build_uar(p), array="c")
    assert e.width == "thread"


def test_transpose_is_thread():
    src = """
    __kernel void prod(__global float *x) {
        int r = get_global_id(1), c = get_global_id(0);
        x[r * 32 + c] = r;
    }
    __kernel void tr(__global const float *x, __global float *y) {
        int r = get_global_id(1), c = get_global_id(0);
        y[c * 32 + r] = x[r * 32 + c];
    }
    __kernel void tr2(__global const float *x, __global float *y) {
        int r = get_global_id(1), c = get_global_id(0);
        y[r * 32 + c] = x[c * 32 + r];
    }
    """
    p = program(src, [launch(1, "prod", (32, 32), (8, 8), "x"),
                      launch(2, "tr", (32, 32), (8, 8), "x", "y"),
                      launch(3, "tr2", (32, 32), (8, 8), "x", "z")],
                buffers("x", "y", "z", size=4 * 1024))
    uar = build_uar(p)
    assert only(uar, src=1, dst=2).width == "thread"
    assert only(uar, src=1, dst=3).width == "thread"


def test_block_when_n_multiple_of_64():
    src = """
    __kernel void prod(__global float *x, int n) {
        int i = get_global_id(0);
        if (i < n) x[i] = i;
    }
    __kernel void rev(__global const float *x, __global float *y, int n) {
        int i = get_global_id(0);
        if (i < n) y[i] = x[n - 1 - i] + x[n - 1 - (i - i % 64)];
    }
    """
    n = sympy.Symbol("n")
    ctx = "[n] -> { : 65 <= n <= 4096 }"
    p = program(src, [launch(1, "prod", 4096, 64, "x", n),
                      launch(2, "rev", 4096, 64, "x", "y", n)],
                buffers("x", "y", size=4 * 4096), params=("n",), context=ctx)
    e = only(build_uar(p), array="x")
    assert e.width == "global"
    assert set(e.conditions) == {"block"}
    assert isl.Set(e.conditions["block"]).is_equal(
        isl.Set("[n] -> { : n mod 64 = 0 }").intersect(isl.Set(ctx)))
    assert e.witness["params"]["n"] % 64 != 0


# ----------------------------------------------------------------------------------------------
# Kinds, kills, loops, host operations
# ----------------------------------------------------------------------------------------------

COPY = """
__kernel void copy(__global const float *src, __global float *dst) {
    int i = get_global_id(0);
    dst[i] = src[i];
}
__kernel void inc(__global float *x) {
    int i = get_global_id(0);
    x[i] = x[i] + 1.0f;
}
"""


def test_war_waw_and_kill():
    ops = [launch(1, "copy", N, 64, "a", "b"),   # reads a, writes b
           launch(2, "copy", N, 64, "c", "a"),   # WAR a (1 -> 2)
           launch(3, "copy", N, 64, "c", "b"),   # WAW b (1 -> 3), kills 1's b
           launch(4, "copy", N, 64, "b", "d")]   # RAW b from 3 only
    uar = build_uar(program(COPY, ops, buffers("a", "b", "c", "d")))
    keys = {(e.src, e.dst, e.array, e.kind) for e in uar.edges}
    assert keys == {(1, 2, "a", "WAR"), (1, 3, "b", "WAW"), (3, 4, "b", "RAW")}
    assert all(e.width == "thread" for e in uar.edges)


def test_partial_overwrite_does_not_kill():
    src = COPY + """
    __kernel void half_(__global float *x) {
        int i = get_global_id(0);
        if (i < 512) x[i] = 0.0f;
    }"""
    ops = [launch(1, "copy", N, 64, "a", "b"), launch(2, "half_", N, 64, "b"),
           launch(3, "copy", N, 64, "b", "c")]
    uar = build_uar(program(src, ops, buffers("a", "b", "c")))
    raw = {(e.src, e.dst) for e in uar.edges if e.kind == "RAW"}
    assert raw == {(1, 3), (2, 3)}


def test_bad_bindings_are_clear_errors():
    from polyfuse.core.program import PolyfuseError

    with pytest.raises(PolyfuseError, match="not bound to a buffer"):
        build_uar(program(COPY, [launch(1, "copy", N, 64, "a")], buffers("a")))
    with pytest.raises(PolyfuseError, match="unknown buffer"):
        build_uar(program(COPY, [launch(1, "copy", N, 64, "a", "zz")], buffers("a")))
    with pytest.raises(PolyfuseError, match="unknown kernel"):
        build_uar(program(COPY, [launch(1, "nope", N, 64, "a")], buffers("a")))


def test_in_place_kernel_has_no_self_edge():
    uar = build_uar(program(COPY, [launch(1, "inc", N, 64, "x")], buffers("x")))
    assert uar.edges == ()


def test_loop_carried_edges():
    t = HostLoop("t", S(0), S(10))
    ops = [launch(1, "copy", N, 64, "a", "b", loops=[t]),
           launch(2, "copy", N, 64, "b", "a", loops=[t])]
    uar = build_uar(program(COPY, ops, buffers("a", "b")))
    raw_ba = only(uar, src=1, dst=2, array="b")
    assert not raw_ba.loop_carried and raw_ba.width == "thread"
    raw_ab = only(uar, src=2, dst=1, array="a")
    assert raw_ab.loop_carried and raw_ab.width == "thread"
    assert "t' = 1 + t" in raw_ab.relation_str.replace(" ", "").replace("=1+t", "= 1 + t") or \
        raw_ab.relation.is_equal(isl.Map(
            "{ L2[t, g0, l0] -> L1[t + 1, g0, l0] : 0 <= t <= 8 and 0 <= g0 < 16 and "
            "0 <= l0 < 64 }"))
    # the instance tuples carry the loop iterator
    assert uar.instances(1).dims == ("t", "g0", "l0")
    info = uar.to_json()["launches"][0]
    assert info["host_loops"] == [{"iterator": "t", "lower": 0, "upper": 10, "step": 1}]


def test_host_edges_are_flagged_global():
    ops = [HostOp(1, "write", writes=(BufferRange("a"),), name="clEnqueueWriteBuffer"),
           launch(2, "copy", N, 64, "a", "b"),
           HostOp(3, "read", reads=(BufferRange("b"),), name="clEnqueueReadBuffer")]
    uar = build_uar(program(COPY, ops, buffers("a", "b")))
    e1, e2 = only(uar, src=1, dst=2), only(uar, src=2, dst=3)
    for e in (e1, e2):
        assert e.host and e.width == "global" and e.witness is not None
    assert e1.src_kernel is None and e1.dst_kernel == "copy"
    assert e1.witness["src"] == [] and len(e1.witness["dst"]) == 2


def test_host_byte_ranges_partial_units():
    ops = [launch(1, "copy", N, 64, "a", "b"),
           HostOp(2, "read", reads=(BufferRange("b", S(8), S(8)),))]
    uar = build_uar(program(COPY, ops, buffers("a", "b")))
    e = only(uar, src=1, dst=2)
    assert e.relation.is_equal(isl.Map("{ L1[0, l0] -> H2[] : 2 <= l0 <= 3 }"))
    eff = uar.effects(2)
    assert eff.reads().is_equal(isl.UnionMap("{ H2[] -> b[e] : 2 <= e <= 3 }"))


def test_unknown_host_call_writes_may():
    ops = [launch(1, "copy", N, 64, "a", "b"),
           HostOp(2, "unknown", reads=(BufferRange("b"),), writes=(BufferRange("b"),)),
           launch(3, "copy", N, 64, "b", "c")]
    uar = build_uar(program(COPY, ops, buffers("a", "b", "c")))
    raw = {(e.src, e.dst) for e in uar.edges if e.kind == "RAW"}
    assert raw == {(1, 2), (1, 3), (2, 3)}  # a may-write does not kill


def test_sub_buffer_offsets():
    bufs = {"root": Buffer("root", S(8 * N)),
            "lo": Buffer("lo", S(4 * N), parent="root", origin=S(0)),
            "hi": Buffer("hi", S(4 * N), parent="root", origin=S(4 * N)),
            "out": Buffer("out", S(4 * N))}
    ops = [launch(1, "copy", N, 64, "out", "hi"),   # writes root[1024..2047]
           launch(2, "copy", N, 64, "lo", "out"),   # reads root[0..1023]: no edge
           launch(3, "copy", N, 64, "hi", "out")]   # reads root[1024..]: thread edge
    uar = build_uar(program(COPY, ops, bufs))
    assert not uar.edges_between(1, 2) or all(e.array != "root" for e in uar.edges_between(1, 2))
    e = only(uar, src=1, dst=3, array="root")
    assert e.width == "thread"
    assert uar.effects(1).writes().is_equal(isl.UnionMap(
        "{ L1[g0, l0] -> root[e = 1024 + 64g0 + l0] : 0 <= g0 < 16 and 0 <= l0 < 64 }"))


def test_float4_view():
    src = """
    __kernel void v4(__global float4 *x) {
        int i = get_global_id(0);
        x[i] = (float4)(1.0f, 2.0f, 3.0f, 4.0f);
    }
    __kernel void s1(__global const float *x, __global float *y) {
        int i = get_global_id(0);
        y[i] = x[i];
    }
    """
    ops = [launch(1, "v4", 256, 64, "x"), launch(2, "s1", N, 256, "x", "y"),
           launch(3, "s1", N, 64, "x", "z")]
    uar = build_uar(program(src, ops, buffers("x", "y", "z")))
    assert uar.instantiation.units["x"] == 4
    # one float4 work-item feeds 4 float work-items; groups of 64 float4 = groups of 256 floats
    assert only(uar, src=1, dst=2).width == "block"
    assert only(uar, src=1, dst=3).width == "global"
    assert uar.effects(1).writes("block").is_equal(isl.UnionMap(
        "{ L1[g0] -> x[e] : 0 <= g0 < 4 and 256g0 <= e < 256g0 + 256 }"))


def test_effect_levels():
    _, uar = chain("c[i] = b[i];")
    eff = uar.effects(2)
    assert eff.reads("kernel").is_equal(isl.UnionMap("{ L2[] -> b[e] : 0 <= e < 1024 }"))
    assert eff.writes("block").is_equal(
        isl.UnionMap("{ L2[g0] -> c[e] : 0 <= g0 < 16 and 64g0 <= e < 64g0 + 64 }"))
    assert eff.writes(must_only=True).is_equal(eff.writes())


def test_unknown_scalar_is_fresh_parameter():
    src = """
    __kernel void sh(__global const float *x, __global float *y, int k) {
        int i = get_global_id(0);
        y[i] = x[i] + x[i + k];
    }"""
    ops = [launch(1, "sh", N, 64, "a", "b"),
           Launch(2, "sh", 1, (S(N),), (S(64),), (ArgBinding(0, "buffer", "b"),
                                                  ArgBinding(1, "buffer", "c"),
                                                  ArgBinding(2, "scalar", value=None)))]
    uar = build_uar(program(src, ops, buffers("a", "b", "c")))
    assert "L2_k" in uar.params and "L2_k" in uar.fresh_params
    e = only(uar, src=1, dst=2)
    assert e.width == "global" and "thread" in e.conditions


# ----------------------------------------------------------------------------------------------
# Hand-built models (no front-end involved)
# ----------------------------------------------------------------------------------------------


def _hand_kernel(name, accesses, params=()):
    w = "S0[g0, g1, g2, l0, l1, l2]"
    ps = tuple(KernelParam(b, i, "float", True, "global") for i, b in enumerate(params))
    accs = tuple(Access(a, "global", d, isl.Map(f"{{ {w} -> {a}[{idx}] }}")) for a, d, idx
                 in accesses)
    return Kernel(name, ps, (Statement("S0", isl.Set(f"{{ {w} }}"), accs, ""),))


def test_hand_built_kernels():
    k1 = _hand_kernel("k1", [("o", "write", "64*g0 + l0")], ["o"])
    k2 = _hand_kernel("k2", [("i", "read", "64*g0 + (l0 + 1) mod 64")], ["i"])
    p = Program({"k1": k1, "k2": k2}, buffers("a"),
                (launch(1, "k1", N, 64, "a"), launch(2, "k2", N, 64, "a")))
    e = only(build_uar(p))
    assert e.width == "thread"  # a permutation inside each group


# ----------------------------------------------------------------------------------------------
# Views: networkx, JSON, virtual edges, kernel graph
# ----------------------------------------------------------------------------------------------


def test_json_shape_and_networkx():
    ops = [HostOp(1, "write", writes=(BufferRange("a"),)),
           launch(2, "copy", N, 64, "a", "b"), launch(3, "copy", N, 64, "b", "c"),
           HostOp(4, "sync", name="clFinish"), launch(5, "copy", N, 64, "c", "d")]
    uar = build_uar(program(COPY, ops, buffers("a", "b", "c", "d")))
    data = uar.to_json()
    assert set(data) == {"launches", "edges"}
    json.dumps(data)
    assert [li["id"] for li in data["launches"]] == [2, 3, 5]
    assert set(data["launches"][0]) == {"id", "kernel", "global_size", "local_size",
                                        "host_loops"}
    assert data["launches"][0]["global_size"] == [N] and data["launches"][0]["local_size"] == [64]
    for e in data["edges"]:
        assert set(e) == {"src", "dst", "src_kernel", "dst_kernel", "array", "kind", "width",
                          "conditions", "loop_carried", "relation", "witness", "host"}
    assert build_uar(uar.program).to_json() == data  # deterministic
    g = uar.to_networkx()
    assert set(g.nodes) == {1, 2, 3, 4, 5}
    assert g.nodes[4]["kind"] == "sync" and g.nodes[2]["kernel"] == "copy"
    widths = {(u, v): d["width"] for u, v, d in g.edges(data=True) if not d["virtual"]}
    assert widths == {(1, 2): "global", (2, 3): "thread", (3, 5): "thread"}
    virt = {(v.src, v.dst) for v in uar.virtual_edges}
    assert virt == {(1, 4), (2, 4), (3, 4), (4, 5)}


def test_kernel_graph_with_barrier():
    src = """
    __kernel void red(__global const float *x, __global float *y) {
        __local float tile[64];
        int l = get_local_id(0);
        tile[l] = x[get_global_id(0)];
        barrier(CLK_LOCAL_MEM_FENCE);
        y[get_global_id(0)] = tile[63 - l];
    }"""
    uar = build_uar(program(src, [launch(1, "red", N, 64, "x", "y")], buffers("x", "y")))
    g = uar.kernel_graph(1)
    kinds = {n: d["kind"] for n, d in g.nodes(data=True)}
    assert sorted(kinds.values()).count("barrier") == 1
    barrier = next(n for n, k in kinds.items() if k == "barrier")
    stmts = [n for n in g.nodes if kinds[n] == "statement"]
    data = [(u, v, d) for u, v, d in g.edges(data=True) if d["kind"] != "virtual"]
    assert any(d["array"] == "tile" and d["kind"] == "RAW" and d["scope"] == "block"
               for _, _, d in data)
    assert any(u == barrier for u, _ in g.edges) and any(v == barrier for _, v in g.edges)
    assert len(stmts) >= 2


# ----------------------------------------------------------------------------------------------
# Against the brute-force oracle
# ----------------------------------------------------------------------------------------------

ORACLE_BODIES = [
    "c[i] = b[i];",
    "c[i] = b[(i + 1) % 128];",
    "c[i] = b[i] + b[g * 16 + (l + 1) % 16];",
    "c[i] = b[i] + (i > 0 ? b[i - 1] : 0.0f);",
    "c[i] = b[0];",
    "c[i] = b[g * 16 + 15 - l] + b[127 - i];",
]


@pytest.mark.parametrize("body", ORACLE_BODIES)
def test_against_bruteforce(body):
    bf = pytest.importorskip("polyfuse.oracle.bruteforce")
    src, uar = chain(body, consumer_ls=16, producer_ls=16, n=128)
    concrete = bf.edge_index(bf.brute_force_dependences(uar.program, sources=src))
    ours = {(e.src, e.dst, e.array, e.kind): e for e in uar.edges}
    assert set(ours) == set(concrete)
    for key, e in ours.items():
        c = concrete[key]
        assert e.width == c.width and e.loop_carried == c.loop_carried
        assert e.relation.is_equal(isl.Map(c.isl_relation())), key


def test_loop_program_against_bruteforce():
    bf = pytest.importorskip("polyfuse.oracle.bruteforce")
    t = HostLoop("t", S(0), S(3))
    ops = [HostOp(1, "write", writes=(BufferRange("a"),)),
           launch(2, "copy", 128, 32, "a", "b", loops=[t]),
           launch(3, "inc", 128, 32, "b", loops=[t]),
           launch(4, "copy", 128, 32, "b", "a", loops=[t]),
           HostOp(5, "read", reads=(BufferRange("a", S(0), S(64)),))]
    p = program(COPY, ops, buffers("a", "b", size=4 * 128))
    uar = build_uar(p)
    concrete = bf.edge_index(bf.brute_force_dependences(p, sources=COPY))
    ours = {(e.src, e.dst, e.array, e.kind): e for e in uar.edges}
    assert set(ours) == set(concrete)
    for key, e in ours.items():
        c = concrete[key]
        assert e.loop_carried == c.loop_carried, key
        assert e.relation.is_equal(isl.Map(c.isl_relation())), key
        if not e.host:
            assert e.width == c.width, key


# ----------------------------------------------------------------------------------------------
# Scale
# ----------------------------------------------------------------------------------------------


def test_long_chain_is_fast():
    n = 200
    ops = [launch(k, "copy", N, 64, f"b{k}", f"b{k + 1}") for k in range(n)]
    p = program(COPY, ops, buffers(*[f"b{k}" for k in range(n + 1)]))
    t0 = time.perf_counter()
    uar = build_uar(p)
    elapsed = time.perf_counter() - t0
    assert len(uar.edges) == n - 1 and all(e.width == "thread" for e in uar.edges)
    assert elapsed < 20


# ----------------------------------------------------------------------------------------------
# End to end: bundled examples through the OpenCL and host front-ends, against the oracle
# ----------------------------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _at(s, values):
    """``s`` (set or map) with its parameters fixed to ``values``."""
    cons = " and ".join(f"{k} = {v}" for k, v in values.items()) or "0 = 0"
    fixed = isl.Set(f"[{', '.join(values)}] -> {{ : {cons} }}").align_params(s.get_space())
    return s.intersect_params(fixed)


def _pairs(rel):
    n_in = rel.dim(isl.dim_type.in_)
    n = n_in + rel.dim(isl.dim_type.out)
    out = set()

    def add(p):
        v = tuple(int(p.get_coordinate_val(isl.dim_type.set, i).to_python()) for i in range(n))
        out.add((v[:n_in], v[n_in:]))

    rel.wrap().foreach_point(add)
    return out


def _label_at(edge, values):
    if edge.host:
        return "global"
    return next(lbl for lbl, region in edge.regions.items()
                if not _at(region, values).is_empty())


@pytest.mark.parametrize("name,values", [
    ("gemm_bias_relu_transpose", {}), ("group_neighbor", {}), ("reduction", {}),
    ("shift_rotation", {}), ("stencil3", {}), ("elementwise_chain", {"n": 200}),
    ("runtime_offset", {"n": 200, "m": 3}), ("runtime_offset", {"n": 200, "m": 0}),
    ("runtime_offset", {"n": 64, "m": 5}), ("runtime_offset", {"n": 130, "m": -70}),
])
def test_examples_against_bruteforce(name, values):
    bf = pytest.importorskip("polyfuse.oracle.bruteforce")
    host = pytest.importorskip("polyfuse.frontend.host")
    d = EXAMPLES / name
    if not d.exists():
        pytest.skip(f"example {name} not present")
    p = host.load_opencl(str(d / "kernels.cl"), str(d / "host.c"))
    uar = build_uar(p)
    concrete = bf.edge_index(bf.brute_force_dependences(
        p, params=values, sources=(d / "kernels.cl").read_text()))
    ours = {(e.src, e.dst, e.array, e.kind): e for e in uar.edges
            if not _at(e.relation, values).is_empty()}
    assert set(ours) == set(concrete)
    for key, e in ours.items():
        c = concrete[key]
        assert _pairs(_at(e.relation, values)) == set(c.pairs), key
        assert e.loop_carried == c.loop_carried, key
        assert _label_at(e, values) == (c.width if not e.host else "global"), key


# ----------------------------------------------------------------------------------------------
# Property: random kernel chains against the oracle
# ----------------------------------------------------------------------------------------------

hypothesis = pytest.importorskip("hypothesis")
kernelgen = pytest.importorskip("polyfuse.oracle.kernelgen")

_COARSER = {"thread": 0, "block": 1, "global": 2}


@hypothesis.settings(max_examples=int(os.environ.get("UAR_EXAMPLES", "40")), deadline=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(kernelgen.kernel_chains(gathers=True))
def test_random_chains_against_bruteforce(gp):
    bf = pytest.importorskip("polyfuse.oracle.bruteforce")
    p = gp.to_program(parse_kernels(gp.source))
    uar = build_uar(p)
    concrete = bf.edge_index(bf.brute_force_dependences(p, sources=gp.source))
    ours = {(e.src, e.dst, e.array, e.kind): e for e in uar.edges}
    if gp.exact:
        assert set(ours) == set(concrete)
    else:  # may-accesses: a sound over-approximation (kills may be lost)
        assert set(concrete) <= set(ours) or all(k[3] != "RAW" for k in set(concrete) - set(ours))
    for key, c in concrete.items():
        if key not in ours:
            continue
        e = ours[key]
        pairs = _pairs(e.relation)
        if gp.exact:
            assert pairs == set(c.pairs), key
            assert e.loop_carried == c.loop_carried, key
            assert e.width == (c.width if not e.host else "global"), key
        else:
            assert pairs >= set(c.pairs), key
            assert _COARSER[e.width] >= _COARSER[c.width], key


def test_builder_program_end_to_end():
    builder = pytest.importorskip("polyfuse.frontend.builder")
    b = builder.ProgramBuilder(COPY, name="pingpong")
    n = b.param("n", min=64)
    b.assume("n % 64 = 0")
    b.buffer("A", 4 * n)
    b.buffer("B", 4 * n)
    w = b.write("A")
    with b.loop("t", 0, 10):
        l1 = b.launch("copy", (n,), (64,), {"src": "A", "dst": "B"})
        l2 = b.launch("copy", (n,), (64,), {"src": "B", "dst": "A"})
    r = b.read("A", blocking=True)
    uar = build_uar(b.build())
    keys = {(e.src, e.dst, e.kind): e for e in uar.edges}
    assert keys[(w, l1, "RAW")].host and not keys[(w, l1, "RAW")].loop_carried
    assert keys[(l1, l2, "RAW")].width == "thread"
    back = keys[(l2, l1, "RAW")]
    assert back.width == "thread" and back.loop_carried and not back.conditions
    assert keys[(l2, r, "RAW")].host
    assert (l1, l2, "WAR") in keys and (l2, l1, "WAR") in keys
    syncs = [op.id for op in uar.program.ops if isinstance(op, HostOp) and op.kind == "sync"]
    assert syncs and all(any(v.dst == s for v in uar.virtual_edges) for s in syncs)
    json.dumps(uar.to_json())


RACY = """
__kernel void scatter(__global const float *x, __global float *out, const int n) {
  int i = get_global_id(0);
  if (i < n) out[i / 2] = x[i];
}
__kernel void broadcast_flag(__global const float *x, __global float *flag, const int n) {
  int i = get_global_id(2);
  if (i < n) flag[i] = x[get_global_id(0)];
}
__kernel void copy(__global const float *x, __global float *out, const int n) {
  int i = get_global_id(0);
  if (i < n) out[i] = x[i];
}
"""


@pytest.mark.parametrize("kernel, racy_element", [("scatter", 0), ("broadcast_flag", 0),
                                                   ("copy", None)])
def test_write_races_are_found_per_host_iteration(kernel: str, racy_element) -> None:
    """Two work-items of one launch writing one element (no atomic) is a race: the original's
    result there is not determined, which verification must know. The same launch repeated in
    a host loop writes the same elements again without racing."""
    builder = pytest.importorskip("polyfuse.frontend.builder")
    b = builder.ProgramBuilder(RACY, name="races")
    b.buffer("X", 4 * 64)
    b.buffer("Y", 4 * 64)
    b.write("X")
    with b.loop("t", 0, 3):
        launch = b.launch(kernel, (64,), (16,), {"x": "X", "out" if kernel != "broadcast_flag"
                                                 else "flag": "Y", "n": 64})
    b.read("Y", blocking=True)
    races = build_uar(b.build()).instantiation.races
    if racy_element is None:
        assert races == ()
    else:
        assert [(r.launch, r.kernel, r.buffer) for r in races] == [(launch, kernel, "Y")]
        assert races[0].element == racy_element


def test_bundled_examples_have_no_write_races() -> None:
    import polyfuse

    for name in ("qkv", "stencil3", "reduction", "lstm2", "gemm_bias_relu_transpose"):
        d = EXAMPLES / name
        uar = build_uar(polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c")))
        assert uar.instantiation.races == (), name


def test_verification_differing_only_where_the_original_races_says_so() -> None:
    """A device may order racing writers differently in the fused and the unfused program (the
    H200 did, on a mutated example): such a difference is not a fusion error, and the result
    says the original's own result is not determined there, naming the launch."""
    from dataclasses import replace

    from polyfuse.passes.pipeline import fuse_program
    from polyfuse.runtime.verify import BufferCheck, Verification

    builder = pytest.importorskip("polyfuse.frontend.builder")
    b = builder.ProgramBuilder(RACY, name="races")
    b.buffer("X", 4 * 64)
    b.buffer("Y", 4 * 64)
    b.buffer("Z", 4 * 64)
    b.write("X")
    b.launch("copy", (64,), (16,), {"x": "X", "out": "Z", "n": 64})
    b.launch("scatter", (64,), (16,), {"x": "Z", "out": "Y", "n": 64})
    b.read("Y", blocking=True)
    result = fuse_program(b.build())

    def failing(*names: str) -> Verification:
        checks = tuple(BufferCheck(n, "float32", n not in names, 64, int(n in names), 1.0, 1.0)
                       for n in ("Y", "Z"))
        return Verification(False, "unfused", 1.0, 1.0, checks, "", 1e-5, 1e-6)

    racy = replace(result, verification=failing("Y"))
    assert not racy.ok and "not determined" in racy.undetermined
    assert "(scatter) writes element 0 of 'Y'" in racy.undetermined
    assert replace(result, verification=failing("Y", "Z")).undetermined is None


def test_width_shared_between_renamed_edges() -> None:
    """The edges of identical layers are one relation under other launch names: classified
    once, each with its own names in the witness, as classifying each gives it."""
    from polyfuse.uar.width import WidthResult, classify, classify_shared

    text = "{{ {a}[g0, l0] -> {b}[h0, m0] : 0 <= g0 < 4 and 0 <= l0 < 4 and h0 = 0 and m0 = 0 }}"
    context = isl.Set("{ : }")
    memo: dict[tuple[str, str, int, int], WidthResult] = {}
    for a, b in (("L1", "L2"), ("L7", "L8")):
        rel = isl.Map(text.format(a=a, b=b))
        got = classify_shared(rel, context, 1, 1, memo)
        want = classify(rel, context, 1, 1)
        assert got.width == want.width == "global"
        assert got.witness == want.witness and f"{a}[" in got.witness["text"]
        assert f"{b}[" in got.witness["text"]
    assert len(memo) == 1


def test_coarse_dependences_follow_program_order_across_loops(monkeypatch):
    """Past isl's dataflow quota, dependences are every conflicting pair *in program order*:
    a launch in a second host loop (Rodinia nw's lower-right sweep, after its upper-left one)
    never precedes one in the first, or the scheduler finds no order (a dependence cycle)."""
    import polyfuse.uar.deps as deps
    monkeypatch.setattr(deps, "DATAFLOW_OPERATIONS", 1)  # every buffer's flow goes coarse
    up, down = HostLoop("s", S(1), S(8)), HostLoop("t", S(1), S(8))
    ops = [launch(1, "copy", N, 64, "a", "b", loops=[up]),
           launch(2, "copy", N, 64, "b", "a", loops=[down])]
    uar = build_uar(program(COPY, ops, buffers("a", "b")))
    assert uar.edges and all(e.width == "global" for e in uar.edges)
    assert not [e for e in uar.edges if e.src == 2 and e.dst == 1]
    assert [e for e in uar.edges if e.src == 1 and e.dst == 2]


def test_coarse_dependences_in_one_loop_go_forward_in_time(monkeypatch):
    """Inside one host loop the coarse pairs run from an iteration to the same one (later
    statement) or to later ones, never back: Rodinia lud's three launches per step otherwise
    made the launch-step graph cyclic (an internal NetworkX error)."""
    import polyfuse.uar.deps as deps
    monkeypatch.setattr(deps, "DATAFLOW_OPERATIONS", 1)
    t = HostLoop("t", S(0), S(4))
    ops = [launch(1, "copy", N, 64, "a", "b", loops=[t]),
           launch(2, "copy", N, 64, "b", "a", loops=[t])]
    uar = build_uar(program(COPY, ops, buffers("a", "b")))
    back = [e for e in uar.edges if e.src == 2 and e.dst == 1]
    assert back and all(e.relation.is_subset(isl.Map(
        "{ L2[t, g0, l0] -> L1[t2, g1, l1] : t2 > t }")) for e in back)
