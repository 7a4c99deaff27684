"""OpenCL C front-end: parsing, address spaces, domains and access relations.

Quasi-affine relations are checked against brute-force enumeration with C semantics on small
concrete sizes.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import islpy as isl
import numpy as np
import pytest

from polyfuse.c import preprocessor
from polyfuse.core.program import Kernel, KernelContext, PolyfuseError, UnsupportedError
from polyfuse.frontend.opencl import parse_kernels, specialize
from polyfuse.oracle.interp import LocalArg, run_kernel

# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------


def at(obj, **params: int):
    """``obj`` with its parameters fixed (those not given: 0) and then removed."""
    for i in range(obj.dim(isl.dim_type.param)):
        name = obj.get_dim_name(isl.dim_type.param, i)
        obj = obj.fix_val(isl.dim_type.param, i, isl.Val(params.get(name, 0)))
    return obj.project_out(isl.dim_type.param, 0, obj.dim(isl.dim_type.param))


def points(obj: isl.Set | isl.Map, **params: int) -> set[tuple[int, ...]]:
    """All integer points of a bounded set/map once ``params`` are fixed (map: domain+range)."""
    s = at(obj, **params)
    s = s.wrap().flatten() if isinstance(obj, isl.Map) else s
    out: set[tuple[int, ...]] = set()
    n = s.dim(isl.dim_type.set)

    def add(p: isl.Point) -> None:
        out.add(tuple(p.get_coordinate_val(isl.dim_type.set, i).to_python() for i in range(n)))

    s.foreach_point(add)
    return out


def c_div(a: int, b: int) -> int:
    return int(a / b)


def c_mod(a: int, b: int) -> int:
    return a - b * c_div(a, b)


def access(k: Kernel, array: str, direction: str, stmt: int | None = None):
    found = [a for s in k.statements for a in s.accesses
             if a.array == array and a.direction == direction
             and (stmt is None or s.id == f"S{stmt}")]
    assert found, f"no {direction} of {array} in {k.name}"
    return found


def one(k: Kernel, array: str, direction: str):
    found = access(k, array, direction)
    assert len(found) == 1, found
    return found[0]


# ----------------------------------------------------------------------------------------------
# parsing
# ----------------------------------------------------------------------------------------------

VADD = r"""
__kernel void vadd(__global const float *a, const __global float *b, __global float *restrict c)
{
    int i = get_global_id(0);
    c[i] = a[i] + b[i];
}
"""


def test_address_spaces_and_const():
    k = parse_kernels(VADD, "vadd.cl")["vadd"]
    a, b, c = k.params
    assert (a.name, a.type, a.pointer, a.address_space, a.const) == ("a", "float", True,
                                                                     "global", True)
    assert (b.address_space, b.const) == ("global", True)
    assert (c.address_space, c.const) == ("global", False)
    assert all(p.is_buffer for p in k.params)
    assert k.loc.file == "vadd.cl" and k.loc.line == 2


def test_parse_qualifier_forms_and_attributes():
    src = r"""
    kernel __attribute__((reqd_work_group_size(8, 4, 1)))
    void f(global float4 *v, __local int *scratch, __constant float *w, uint n) {
        __local float t[4][8];
        __global float4 *p = (__global float4 *)v;
        t[get_local_id(1)][get_local_id(0)] = w[0];
    }
    """
    ast = preprocessor.parse(src, "q.cl")
    (fd,) = [e for e in ast.ext if type(e).__name__ == "FuncDef"]
    assert preprocessor.is_kernel(fd)
    assert preprocessor.reqd_work_group_size(fd) == (8, 4, 1)
    spaces = [preprocessor.address_space_of(p) for p in fd.decl.type.args.params]
    assert spaces == ["global", "local", "constant", None]
    k = parse_kernels(src, "q.cl")["f"]
    assert k.context.local_size == (8, 4, 1)
    assert k.param("v").type == "float4"
    assert k.param("n").type == "uint" and not k.param("n").pointer
    assert k.arrays[0].shape == (4, 8) and k.arrays[0].address_space == "local"
    rel = one(k, "t", "write").relation
    assert one(k, "t", "write").exact
    assert rel.range().get_tuple_name() == "t" and rel.dim(isl.dim_type.out) == 2


def test_round_trip_regenerate_reparse():
    src = VADD + r"""
    #define TS 4
    __kernel void tile(__global float *x, __local float *tmp) {
        __local float t[TS][TS];
        int l = get_local_id(0);
        t[l][0] = x[get_group_id(0) * TS + l];
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        float4 v = (float4)(1.0f, 2.0f, 3.0f, 4.0f);
        x[get_group_id(0) * TS + l] = t[TS - 1 - l][0] + v.x;
    }
    """
    ks = parse_kernels(src, "rt.cl")
    regenerated = "\n".join(k.source for k in ks.values())
    assert "__kernel" in regenerated and "__global" in regenerated and "__local" in regenerated
    assert "(float4)(1.0f, 2.0f, 3.0f, 4.0f)" in regenerated
    again = parse_kernels(regenerated, "rt2.cl")
    assert list(again) == list(ks)
    for name in ks:
        k1, k2 = ks[name], again[name]
        assert k1.params == k2.params
        assert [s.code for s in k1.statements] == [s.code for s in k2.statements]
        for s1, s2 in zip(k1.statements, k2.statements):
            assert s1.domain.is_equal(s2.domain)
            for a1, a2 in zip(s1.accesses, s2.accesses):
                assert (a1.array, a1.direction, a1.exact) == (a2.array, a2.direction, a2.exact)
                assert a1.relation.is_equal(a2.relation)
        assert [b.fences for b in k1.barriers] == [b.fences for b in k2.barriers]


def test_syntax_error_names_file_and_line():
    src = "__kernel void f(__global float *a)\n{\n    a[0] = 1\n    a[1] = 2;\n}\n"
    with pytest.raises(PolyfuseError) as err:
        parse_kernels(src, "bad.cl")
    assert err.value.file == "bad.cl" and err.value.line == 4
    assert str(err.value).startswith("bad.cl:4:")


def test_preprocessor_error_names_file_and_line():
    with pytest.raises(PolyfuseError) as err:
        parse_kernels("\n#include \"missing.h\"\n", "inc.cl")
    assert (err.value.file, err.value.line) == ("inc.cl", 2)


def test_unsupported_constructs_are_errors():
    src = "__kernel void f(__global float *a) {\n  goto out;\n  out: a[0] = 1;\n}\n"
    with pytest.raises(UnsupportedError) as err:
        parse_kernels(src, "g.cl")
    assert err.value.file == "g.cl" and err.value.line == 2
    with pytest.raises(PolyfuseError) as err:
        parse_kernels("__kernel void f(__global float *a) {\n a[get_global_id(3)] = 0; }", "d.cl")
    assert err.value.line == 2


# ----------------------------------------------------------------------------------------------
# relations
# ----------------------------------------------------------------------------------------------


def test_elementwise_relations_and_unit_groups():
    k = parse_kernels(VADD, "vadd.cl")["vadd"]
    assert k.work_dims == 1 and k.uses == frozenset({"get_global_id"})
    assert any("unit work-groups" in n for n in k.notes)
    s = k.statements[-1]
    assert s.id == "S1" and s.exact_domain
    assert s.domain.get_tuple_name() == "S1"
    expected = isl.Map("[_gs0] -> { S1[g0, g1, g2, l0, l1, l2] -> {arr}[g0] : 0 <= g0 < _gs0 "
                       "and g1 = 0 and g2 = 0 and l0 = 0 and l1 = 0 and l2 = 0 }".replace(
                           "{arr}", "ARR"))
    for arr, d in (("a", "read"), ("b", "read"), ("c", "write")):
        acc = one(k, arr, d)
        assert acc.exact and acc.address_space == "global" and acc.dtype == "float"
        assert acc.relation.is_equal(expected.set_tuple_name(isl.dim_type.out, arr))


def test_modulo_with_define_has_c_semantics():
    src = r"""
    #define N 8
    __kernel void rot(__global const float *b, __global float *a) {
        int i = get_global_id(0);
        a[i] = b[(i + 1) % N] + b[(i - 11) % N];
    }
    """
    k = parse_kernels(src, "rot.cl", context=KernelContext(global_size=(20, None, None)))["rot"]
    reads = access(k, "b", "read")
    assert all(r.exact for r in reads)
    got = set()
    for r in reads:
        got |= {(p[0], p[-1]) for p in points(r.relation)}
    want = {(i, c_mod(i + 1, 8)) for i in range(20)} | {(i, c_mod(i - 11, 8)) for i in range(20)}
    assert got == want
    assert any(o < 0 for _, o in want)  # C's % of a negative number is negative


def test_division_truncates_toward_zero():
    src = r"""
    __kernel void halve(__global const float *a, __global float *b, int n) {
        int i = get_global_id(0) - 3;
        b[get_global_id(0)] = a[i / 2] + a[i % 2 + 100] + a[(i / -2) + 200];
    }
    """
    k = parse_kernels(src, "h.cl", context=KernelContext(global_size=(9, None, None)))["halve"]
    got = set()
    for r in access(k, "a", "read"):
        assert r.exact
        got |= {(p[0], p[-1]) for p in points(r.relation)}
    want = set()
    for g in range(9):
        i = g - 3
        want |= {(g, c_div(i, 2)), (g, c_mod(i, 2) + 100), (g, c_div(i, -2) + 200)}
    assert got == want


def test_gemm_2d_with_known_n():
    src = r"""
    __kernel void gemm(__global const float *A, __global const float *B, __global float *C,
                       int N) {
        int row = get_global_id(1);
        int col = get_global_id(0);
        float acc = 0.0f;
        for (int k = 0; k < N; k++)
            acc += A[row * N + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
    """
    generic = parse_kernels(src, "gemm.cl")["gemm"]
    assert not one(generic, "C", "write").exact  # row * N: symbolic product
    k = specialize(generic, KernelContext(values=(("N", 3),), global_size=(3, 3, None)))
    assert k.work_dims == 2
    w = one(k, "C", "write")
    assert w.exact
    assert {(p[0], p[1], p[-1]) for p in points(w.relation)} == {
        (c, r, r * 3 + c) for r in range(3) for c in range(3)}
    ra = one(k, "A", "read")
    assert ra.exact
    assert {(p[1], p[6], p[-1]) for p in points(ra.relation)} == {
        (r, kk, r * 3 + kk) for r in range(3) for kk in range(3)}
    s = [st for st in k.statements if "acc +=" in st.code][0]
    assert s.domain.get_dim_name(isl.dim_type.set, 6) == "k"
    sched = k.schedule.extract_map(s.domain.get_space().map_from_domain_and_range(
        isl.Space.set_alloc(s.domain.get_ctx(), 0, 3)))
    assert not sched.is_empty()


TILED = r"""
#define TS 4
__kernel void tiled(__global const float *A, __global const float *B, __global float *C, int K)
{
    __local float As[TS][TS];
    __local float Bs[TS][TS];
    int lr = get_local_id(1), lc = get_local_id(0);
    int row = get_group_id(1) * TS + lr, col = get_group_id(0) * TS + lc;
    float acc = 0.0f;
    for (int t = 0; t < K / TS; t++) {
        As[lr][lc] = A[row * K + t * TS + lc];
        Bs[lr][lc] = B[(t * TS + lr) * K + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++)
            acc += As[lr][k] * Bs[k][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[row * K + col] = acc;
}
"""


def test_tiled_gemm_local_memory_and_barriers():
    k = parse_kernels(TILED, "tiled.cl")["tiled"]
    assert {a.name: (a.shape, a.address_space) for a in k.arrays} == {
        "As": ((4, 4), "local"), "Bs": ((4, 4), "local")}
    ks = specialize(k, KernelContext(local_size=(4, 4, None), values=(("K", 8),)))
    assert len(ks.barriers) == 2
    assert all(b.uniform and b.fences == frozenset({"local"}) for b in ks.barriers)
    assert all(b.domain.get_dim_name(isl.dim_type.set, 6) == "t" for b in ks.barriers)
    w = one(ks, "As", "write")
    assert w.exact and w.address_space == "local"
    pts = points(w.relation, _gs0=8, _gs1=8)
    # S[g0,g1,g2,l0,l1,l2,t] -> As[l1, l0]
    assert pts and all(p[-2:] == (p[4], p[3]) for p in pts)
    assert {p[6] for p in pts} == {0, 1}
    r = [a for a in ks.accesses if a.array == "Bs" and a.direction == "read"][0]
    assert r.exact
    assert all(p[-2:] == (p[7], p[3]) for p in points(r.relation, _gs0=8, _gs1=8))
    # the schedule orders barrier 0 between the tile loads and the k loop
    stmts = {s.code.split("=")[0].strip(): s for s in ks.statements}
    b0, b1 = ks.barriers
    assert stmts["Bs[lr][lc]"].order < b0.order < stmts["acc +"].order < b1.order
    a_read = one(ks, "A", "read")
    assert a_read.exact
    for p in points(a_read.relation, _gs0=8, _gs1=8):
        g0, g1, _, l0, l1, _, t, o = p
        assert o == (g1 * 4 + l1) * 8 + t * 4 + l0


def test_early_return_guard():
    src = r"""
    __kernel void guarded(__global float *a, int n) {
        int i = get_global_id(0);
        if (i >= n) return;
        a[i] = 2.0f * a[i];
    }
    """
    k = parse_kernels(src, "g.cl", context=KernelContext(global_size=(10, None, None)))["guarded"]
    w = one(k, "a", "write")
    assert w.exact
    assert {p[0] for p in points(w.relation, n=6)} == set(range(6))
    assert {p[0] for p in points(w.relation, n=20)} == set(range(10))


def test_data_dependent_subscript_is_whole_array_may_access():
    src = r"""
    __kernel void gather(__global const float *a, __global const int *idx, __global float *b) {
        int i = get_global_id(0);
        b[i] = a[idx[i]];
    }
    """
    k = parse_kernels(src, "gather.cl")["gather"]
    ra = one(k, "a", "read")
    assert not ra.exact and "idx[i]" in ra.reason and "data-dependent" in ra.reason
    assert at(ra.relation.range(), _gs0=4).is_equal(isl.Set("{ a[o] : o >= 0 }"))
    assert one(k, "idx", "read").exact and one(k, "b", "write").exact


def test_triangular_loop():
    src = r"""
    __kernel void prefix(__global const float *a, __global float *s) {
        int i = get_global_id(0);
        float acc = 0.0f;
        for (int k = 0; k <= i; k++)
            acc += a[k];
        s[i] = acc;
    }
    """
    k = parse_kernels(src, "tri.cl", context=KernelContext(global_size=(5, None, None)))["prefix"]
    r = one(k, "a", "read")
    assert r.exact
    assert {(p[0], p[6], p[-1]) for p in points(r.relation)} == {
        (i, kk, kk) for i in range(5) for kk in range(i + 1)}


def test_strided_and_decreasing_loops():
    src = r"""
    __kernel void strides(__global float *a, int n) {
        for (int k = 1; k < n; k += 3) a[k] = 0;
        for (int j = n - 1; j >= 0; j--) a[j + 100] = 0;
    }
    """
    k = parse_kernels(src, "s.cl")["strides"]
    assert k.work_dims == 0
    w1, w2 = access(k, "a", "write")
    assert {p[-1] for p in points(w1.relation, n=11)} == {1, 4, 7, 10}
    assert {p[-1] for p in points(w2.relation, n=4)} == {100, 101, 102, 103}


def test_ternary_subscript_and_min():
    src = r"""
    __kernel void clampit(__global const float *a, __global float *b, int n) {
        int i = get_global_id(0);
        b[i] = a[i < n ? i : n - 1] + a[min(i + 1, n - 1) + 50];
    }
    """
    k = parse_kernels(src, "t.cl", context=KernelContext(global_size=(8, None, None)))["clampit"]
    got = set()
    for r in access(k, "a", "read"):
        assert r.exact
        got |= {(p[0], p[-1]) for p in points(r.relation, n=5)}
    want = {(i, i if i < 5 else 4) for i in range(8)} | {(i, min(i + 1, 4) + 50)
                                                         for i in range(8)}
    assert got == want


def test_unknown_local_size_and_specialize():
    src = r"""
    __kernel void scale(__global float *x) {
        int l = get_local_id(0);
        x[get_global_id(0)] = 2.0f * l;
    }
    """
    k = parse_kernels(src, "sc.cl")["scale"]
    w = one(k, "x", "write")
    assert not w.exact and "unknown local size" in w.reason
    k16 = specialize(k, KernelContext(local_size=(16, None, None)))
    w = one(k16, "x", "write")
    assert w.exact
    for p in points(w.relation, _gs0=32):
        assert p[-1] == 16 * p[0] + p[3]
    assert k16.context.local_size[0] == 16
    assert "_gs0" in k16.statements[0].domain.get_space().get_var_dict()
    with pytest.raises(PolyfuseError):
        specialize(k, KernelContext(local_size=(16, None, None), global_size=(40, None, None)))


def test_reduction_barrier_uniformity():
    src = r"""
    __kernel void red(__global const float *in, __global float *out) {
        __local float tmp[8];
        int l = get_local_id(0);
        tmp[l] = in[get_global_id(0)];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int s = 4; s > 0; s >>= 1) {
            if (l < s) tmp[l] += tmp[l + s];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (l == 0) { out[get_group_id(0)] = tmp[0]; barrier(CLK_GLOBAL_MEM_FENCE); }
    }
    """
    k = parse_kernels(src, "red.cl", context=KernelContext(local_size=(8, None, None)))["red"]
    b0, b1, b2 = k.barriers
    assert b0.uniform and b1.uniform and not b2.uniform
    assert b2.fences == frozenset({"global"})
    w = one(k, "out", "write")
    assert w.exact
    assert {(p[0], p[3], p[-1]) for p in points(w.relation, _gs0=24)} == {(g, 0, g)
                                                                           for g in range(3)}


def test_vload_vstore_helpers_pointer_offsets_and_unknown_calls():
    src = r"""
    float sq(float x) { return x * x; }
    void opaque(__global float *p, int n) { for (int j = 0; j < n; j++) p[j] = 0; }
    __kernel void v(__global const float *a, __global float *b, __global int *cnt, int n) {
        int i = get_global_id(0);
        float4 x = vload4(i, a);
        vstore4(x, i + 1, b);
        __global const float *p = a + 2 * n;
        b[i] = sq(p[i]);
        atomic_add(&cnt[i % 4], 1);
        opaque(b, n);
    }
    """
    k = parse_kernels(src, "v.cl", context=KernelContext(global_size=(3, None, None)))["v"]
    reads = access(k, "a", "read")
    vl = {(p[0], p[-1]) for p in points(reads[0].relation, n=10)}
    assert vl == {(i, 4 * i + e) for i in range(3) for e in range(4)}
    assert {(p[0], p[-1]) for p in points(reads[1].relation, n=10)} == {(i, 20 + i)
                                                                        for i in range(3)}
    vs = access(k, "b", "write")[0]
    assert {(p[0], p[-1]) for p in points(vs.relation)} == {(i, 4 * i + 4 + e)
                                                            for i in range(3) for e in range(4)}
    atom = access(k, "cnt", "write")[0]
    assert not atom.exact
    assert any("opaque" in n for n in k.notes)
    op = [a for a in access(k, "b", "write") if not a.exact][0]
    assert "opaque" in op.reason
    assert at(op.relation.range(), n=2).is_equal(isl.Set("{ b[o] : o >= 0 }"))



def test_pointer_declared_then_assigned_keeps_its_accesses():
    """The Programming Guide's spmv declares its pointers first and assigns them later
    (``__global float *outptr; ... outptr = &output[k];``): the first assignment gives the
    pointer its buffer, so the writes through it are in the model (they were dropped, and the
    kernel seemed to write nothing); a private pointer into a private array too.  A
    ``__global`` pointer whose buffer is chosen by a condition is refused at the access, not
    dropped."""
    src = r"""
    typedef struct { uint offset; uint count; } header;
    __kernel void k(__global float *out, __global const uint *m, __global const float *in) {
        int i = get_global_id(0);
        __global const header *h;
        __global float *p;
        float t[2];
        float *q;
        h = ((__global const header *) m) + i;
        p = out + 1;
        q = t;
        for (int j = 0; j < 2; j++)
            q[j] = in[j];
        p[i] = t[0] + t[1] + h->offset;
    }
    """
    k = parse_kernels(src, "k.cl", context=KernelContext(global_size=(4, None, None)))["k"]
    w = one(k, "out", "write")
    assert w.exact and {p[-1] for p in points(w.relation)} == {1, 2, 3, 4}
    assert access(k, "m", "read") and access(k, "t", "write")
    chosen = r"""
    __kernel void c(__global float *a, __global float *b, int s) {
        __global float *p;
        if (s) p = a; else p = b;
        p[get_global_id(0)] = 1.0f;
    }
    """
    with pytest.raises(UnsupportedError, match="c.cl:5: .*access through pointer 'p'"):
        parse_kernels(chosen, "c.cl")

def test_non_affine_condition_makes_may_accesses():
    src = r"""
    __kernel void cond(__global const float *a, __global float *b) {
        int i = get_global_id(0);
        if (a[i] > 0.0f)
            b[i] = 1.0f;
        while (b[i] < 0.0f) { b[i] += 1.0f; }
    }
    """
    k = parse_kernels(src, "c.cl")["cond"]
    writes = access(k, "b", "write")
    assert writes and all(not w.exact for w in writes)
    assert any(not s.exact_domain for s in k.statements)
    assert one(k, "a", "read").exact  # the condition's own read happens for every work-item


def test_parse_kernels_from_path(tmp_path):
    path = tmp_path / "k.cl"
    path.write_text(VADD)
    ks = parse_kernels(str(path))
    assert list(ks) == ["vadd"]
    assert ks["vadd"].statements[-1].loc.file == str(path)
    assert ks["vadd"].statements[-1].loc.line == 5


# ----------------------------------------------------------------------------------------------
# loops whose value sequence folds to constants (geometric loops): enumerated exactly
# ----------------------------------------------------------------------------------------------

REDUCTION_CL = Path(__file__).resolve().parents[1] / "examples" / "reduction" / "kernels.cl"


def _stmt_points(k: Kernel, **params: int):
    """Per statement instance (sid, instance): its schedule vector and accessed elements."""
    sched = {}
    k.schedule.foreach_map(lambda m: sched.__setitem__(m.get_tuple_name(isl.dim_type.in_), m))
    out: dict[tuple, tuple[tuple, Counter]] = {}
    for s in k.statements:
        n = s.domain.dim(isl.dim_type.set)
        times = {p[:n]: p[n:] for p in points(sched[s.id], **params)}
        for inst in points(s.domain, **params):
            out[(s.id, inst)] = (times[inst], Counter())
        for a in s.accesses:
            mode = "R" if a.direction == "read" else "W"
            for p in points(a.relation, **params):
                out[(s.id, p[:-1])][1][(a.array, p[-1], mode)] += 1
    return out


def _check_against_interp(k: Kernel, src: str, gsz: int, lsz: int, args: dict,
                          **params: int) -> None:
    """Every access of the model equals the interpreter's, per work-item and in order."""
    run = run_kernel(src, (gsz,), (lsz,), args, name=k.name, record_local=True)
    inst = _stmt_points(k, _gs0=gsz, **params)
    local = {a.name for a in k.arrays if a.address_space == "local"} | {
        p.name for p in k.params if p.pointer and p.address_space == "local"}
    for acc in k.accesses:
        assert acc.exact, (acc.array, acc.reason)
    for g in range(gsz // lsz):
        for ll in range(lsz):
            wi = ((g,), (ll,))
            mine = sorted((t, sid, p) for (sid, p), (t, _) in inst.items()
                          if p[0] == g and p[3] == ll)
            for recorded, is_local in ((run.accesses, False), (run.local_accesses, True)):
                got = [(a.buffer, a.index, a.mode) for a in recorded if a.wi == wi]
                pos = 0
                for _, sid, p in mine:
                    want = Counter({key: c for key, c in inst[(sid, p)][1].items()
                                    if (key[0] in local) == is_local})
                    n = sum(want.values())
                    assert Counter(got[pos:pos + n]) == want, (k.name, wi, sid, p)
                    pos += n
                assert pos == len(got), (k.name, wi, got[pos:])


def _reduction_args(name: str, gsz: int, n: int) -> dict:
    if name == "reduce_partial":
        return {"x": np.arange(n, dtype=np.float32), "partial": np.zeros(gsz // 64, np.float32),
                "scratch": LocalArg(64 * 4), "n": n}
    return {"partial": np.arange(n, dtype=np.float32), "result": np.zeros(1, np.float32),
            "nparts": n}


@pytest.mark.parametrize("name", ["reduce_partial", "reduce_final"])
def test_reduction_example_is_exact_and_matches_interpreter(name):
    k0 = parse_kernels(str(REDUCTION_CL))[name]
    k = specialize(k0, KernelContext(local_size=(64, None, None)))
    assert all(a.exact for a in k.accesses) and all(s.exact_domain for s in k.statements)
    assert all(b.uniform for b in k.barriers) and len(k.barriers) == 2
    loop = [s for s in k.statements if "scratch[lid + s]" in s.code][0]
    assert loop.domain.get_dim_name(isl.dim_type.set, 6) == "s"
    assert {p[6] for p in points(loop.domain, _gs0=64, n=64, nparts=64)} == {32, 16, 8, 4, 2, 1}
    # the guard `lid < s` restricts the statement, not the barrier
    assert {(p[3], p[6]) for p in points(loop.domain, _gs0=64, n=64, nparts=64)} == {
        (ll, s) for s in (32, 16, 8, 4, 2, 1) for ll in range(s)}
    b1 = k.barriers[1]
    assert {(p[3], p[6]) for p in points(b1.domain, _gs0=64, n=64, nparts=64)} == {
        (ll, s) for s in (32, 16, 8, 4, 2, 1) for ll in range(64)}
    src = REDUCTION_CL.read_text()
    for gsz, n in ((128, 100), (192, 192)) if name == "reduce_partial" else ((64, 150),):
        scal = {"n": n} if name == "reduce_partial" else {"nparts": n}
        _check_against_interp(k, src, gsz, 64, _reduction_args(name, gsz, n), **scal)


def test_reduction_schedule_orders_iterations_decreasing():
    k = specialize(parse_kernels(str(REDUCTION_CL))["reduce_partial"],
                   KernelContext(local_size=(64, None, None)))
    loop = [s for s in k.statements if "scratch[lid + s]" in s.code][0]
    bar = k.barriers[1]

    sched = {}
    k.schedule.foreach_map(lambda m: sched.__setitem__(m.get_tuple_name(isl.dim_type.in_), m))

    def time(entry, s):
        """Schedule vector of work-item 0's instance of ``entry`` at loop value ``s``."""
        pts = points(sched[entry.id], _gs0=64, n=64)
        n = entry.domain.dim(isl.dim_type.set)
        return [p[n:] for p in pts if p[3] == 0 and (n == 6 or p[6] == s)][0]

    assert time(loop, 32) < time(bar, 32) < time(loop, 16) < time(bar, 16) < time(loop, 1)
    assert time(bar, 1) < time([s for s in k.statements if "partial" in s.code][0], 0)


LOOP_HEADERS = [
    ("for (int s = 32; s > 0; s >>= 1)", [32, 16, 8, 4, 2, 1]),
    ("for (int s = 32; s > 0; s /= 2)", [32, 16, 8, 4, 2, 1]),
    ("for (int s = 32; s > 0; s = s / 2)", [32, 16, 8, 4, 2, 1]),
    ("for (int s = 32; s >= 1; s >>= 1)", [32, 16, 8, 4, 2, 1]),
    ("for (int s = 32; s != 0; s >>= 1)", [32, 16, 8, 4, 2, 1]),
    ("for (int s = 1; s < 64; s <<= 1)", [1, 2, 4, 8, 16, 32]),
    ("for (int s = 1; s < 64; s *= 2)", [1, 2, 4, 8, 16, 32]),
    ("for (uint s = 1; s <= N; s = 2 * s)", [1, 2, 4, 8, 16, 32]),
    ("for (int s = get_local_size(0) / 2; s > 0; s >>= 1)", [32, 16, 8, 4, 2, 1]),
    ("for (int s = N / 3; s > 1; s = s / 3 + 1)", [10, 4, 2]),
    ("for (int s = 0; s * s < 40; s++)", [0, 1, 2, 3, 4, 5, 6]),  # non-affine condition
    ("for (int s = 1; s > -100 && s < 100; s *= -2)", [1, -2, 4, -8, 16, -32, 64]),
]


@pytest.mark.parametrize("header,values", LOOP_HEADERS, ids=[h for h, _ in LOOP_HEADERS])
def test_enumerated_loops_match_interpreter(header, values):
    src = r"""
    #define N 32
    __kernel void geo(__global float *a, __local float *t) {
        int l = get_local_id(0);
        t[l] = a[get_global_id(0)];
        barrier(CLK_LOCAL_MEM_FENCE);
        HEADER {
            if (l < 8) a[get_global_id(0) + s + 100] += t[(l + s) & 63];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    """.replace("HEADER", header)
    k = parse_kernels(src, "geo.cl", context=KernelContext(local_size=(64, None, None)))["geo"]
    body = [s for s in k.statements if "+ 100" in s.code][0]
    assert body.exact_domain and all(a.exact for a in body.accesses)
    assert all(b.uniform for b in k.barriers)
    got = {p[6] for p in points(k.barriers[1].domain, _gs0=64)}
    assert got == set(values)
    # the schedule orders the iterations as they run
    sched = {}
    k.schedule.foreach_map(lambda m: sched.__setitem__(m.get_tuple_name(isl.dim_type.in_), m))
    order = sorted((p[7:], p[6]) for p in points(sched["B1"], _gs0=64) if p[3] == 0)
    assert [s for _, s in order] == values
    a = np.zeros(64 + 300, np.float32)
    _check_against_interp(k, src, 64, 64, {"a": a, "t": LocalArg(64 * 4)})


@pytest.mark.parametrize("header,why", [
    ("for (uint s = 1; s != 0; s <<= 1)", "wraps around in C"),  # > 64 values over integers
    ("for (int s = 1; s < 1000; s = 1 + s * 1)", "more than 64 values"),
    ("for (int s = get_local_size(0) / 2; s > 0; s >>= 1)", "unknown local size"),
    ("for (int s = n; s > 0; s >>= 1)", "symbolic init"),
    ("for (int s = l + 1; s > 0; s >>= 1)", "depends on the work-item"),
])
def test_non_enumerable_loops_stay_over_approximated(header, why):
    src = r"""
    __kernel void geo(__global float *a, int n) {
        int l = get_local_id(0);
        HEADER {
            a[s] = 0.0f;
        }
    }
    """.replace("HEADER", header)
    k = parse_kernels(src, "geo.cl")["geo"]
    w = one(k, "a", "write")
    assert not w.exact, why
    assert k.statements[-1].domain.get_dim_name(isl.dim_type.set, 6).startswith("_w")


def test_enumerated_loop_iterator_types_and_divergent_barrier():
    src = r"""
    __kernel void f(__global float *a) {
        int l = get_local_id(0);
        for (float x = 1.0f; x > 0; x /= 2) a[l] += x;
        for (int s = l; s > 0; s >>= 1) { a[s] = 1.0f; barrier(CLK_LOCAL_MEM_FENCE); }
        int s;
        for (s = 16; s > 0; s >>= 2) a[s] = 2.0f;
    }
    """
    k = parse_kernels(src, "f.cl", context=KernelContext(local_size=(8, None, None)))["f"]
    first = [s for s in k.statements if "+= x" in s.code][0]
    assert not first.exact_domain  # a float iterator is never enumerated (0.5 > 0)
    assert not k.barriers[0].uniform  # trip count differs per work-item
    last = [s for s in k.statements if "2.0f" in s.code][0]
    assert last.exact_domain and all(a.exact for a in last.accesses)
    assert {p[-1] for p in points(last.accesses[0].relation, _gs0=8)} == {16, 4, 1}


def test_enumerated_loop_nested_in_affine_loop():
    src = r"""
    __kernel void f(__global float *a, int n) {
        for (int i = 0; i < n; i++)
            for (int s = 8; s > 0; s >>= 1)
                a[10 * i + s] = 0.0f;
    }
    """
    k = parse_kernels(src, "f.cl")["f"]
    w = one(k, "a", "write")
    assert w.exact
    assert {p[-1] for p in points(w.relation, n=2)} == {1, 2, 4, 8, 11, 12, 14, 18}
    sched = {}
    k.schedule.foreach_map(lambda m: sched.__setitem__(m.get_tuple_name(isl.dim_type.in_), m))
    order = sorted((p[8:], p[6], p[7]) for p in points(sched["S0"], n=2))
    assert [(i, s) for _, i, s in order] == [(i, s) for i in range(2) for s in (8, 4, 2, 1)]


def test_address_space_of_a_cast_is_kept():
    """``(__global double *)&u[i]`` handed to a helper taking a ``__global`` pointer: the
    cast keeps its address space when printed (OpenCL 1.2 has no generic one), so the
    regenerated source builds."""
    from polyfuse.c.emit import emit_program
    from polyfuse.frontend.builder import default_program

    src = r"""
void put(__global double *y, int n) { y[n] = 1.0; }
void row(__constant double (*c)[4], __global double *y) { y[0] = c[1][2]; }
__kernel void k(__global double2 *u, __global double *w, __constant double *c) {
    int i = get_global_id(0);
    put((__global double *)&u[i], 0);
    row((__constant double (*)[4])c, w);
    __global const double *p = (__global const double *)w;
    w[i] += p[i + 1];
}
"""
    text = emit_program(default_program(parse_kernels(src), params={})).text
    assert "(__global double *) (&u[i])" in text
    assert "(__constant double (*)[4]) c" in text
    assert "(const __global double *) w" in text
    again = parse_kernels(text)  # what is printed parses to the same casts
    assert emit_program(default_program(again, params={})).text == text


def test_gnu_spellings_of_qualifiers_in_casts():
    """``(__const local float *)`` (OpenCL Programming Guide, SpMV): GNU's ``__const``
    spelling next to an address space, which OpenCL compilers accept, parses as ``const``."""
    src = r"""
    __kernel void copy(__global float *out, __local float *space, __global __volatile int *f) {
        out[get_global_id(0)] = *((__const local float *) space + get_local_id(0));
        *((__global __signed__ int *) f) = 1;
    }
    """
    (kernel,) = parse_kernels(src, "gnu.cl").values()
    assert "const __local float *" in kernel.source and "__const" not in kernel.source
    assert "volatile int *f" in kernel.source


def test_array_sized_by_its_initializer():
    """``int r[] = {...}`` and ``char s[] = "..."`` take their length from the initializer
    (an FFT's bit-reversal table): modelled as arrays of that size."""
    src = r"""
    __kernel void perm(__global float *out, __global const float *in) {
        int rev[] = {0, 2, 1, 3};
        char tag[] = "ab\n";
        int i = get_global_id(0);
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = in[4 * i + rev[j]] + tag[3];
    }
    """
    k = parse_kernels(src, "p.cl")["perm"]
    assert {a.name: a.shape for a in k.arrays} == {"rev": (4,), "tag": (4,)}
    with pytest.raises(UnsupportedError, match="array r needs a constant size"):
        parse_kernels("__kernel void f(__global int *a, int n) { int r[n]; a[0] = r[0]; }",
                      "f.cl")
