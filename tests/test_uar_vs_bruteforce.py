"""The UAR's dependences and widths against brute-force enumeration (docs/definitions.md).

Random kernel chains (:mod:`polyfuse.oracle.kernelgen`) are parsed by the OpenCL front-end, put
into a :class:`Program` and analysed by :func:`polyfuse.uar.build_uar`; the oracle executes the
same program.  Soundness: every concrete dependence is in the UAR, with a relation containing its
pairs and a width no finer.  Exactness for (quasi-)affine programs: the same edges, the same
pairs, the same widths.
"""

from __future__ import annotations

from typing import Any

import islpy as isl
import pytest
from hypothesis import HealthCheck, given, settings

from polyfuse.oracle.bruteforce import ConcreteEdge, brute_force_dependences, edge_index
from polyfuse.oracle.kernelgen import GenProgram, kernel_chains

opencl = pytest.importorskip("polyfuse.frontend.opencl")
uar_mod = pytest.importorskip("polyfuse.uar")

try:
    import polyfuse.frontend.builder  # noqa: F401

    HAVE_BUILDER = True
except ImportError:  # pragma: no cover - the builder not there yet
    HAVE_BUILDER = False

ORDER = {"thread": 0, "block": 1, "global": 2}


def _points(rel: isl.Map) -> set[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The pairs of a parameter-free relation."""
    n_in = rel.dim(isl.dim_type.in_)
    out: set = set()

    def add(p: isl.Point) -> None:
        vals = [p.get_coordinate_val(isl.dim_type.set, i).to_python()
                for i in range(rel.dim(isl.dim_type.in_) + rel.dim(isl.dim_type.out))]
        out.add((tuple(vals[:n_in]), tuple(vals[n_in:])))

    rel.wrap().foreach_point(add)
    return out


def _fixed(rel: isl.Map, context: isl.Set) -> isl.Map:
    """``rel`` restricted to the parameter context (generated programs have no parameters)."""
    if rel.dim(isl.dim_type.param) == 0:
        return rel
    return rel.intersect_params(context.align_params(rel.get_space().params()))


def _compare(gp: GenProgram) -> None:
    kernels = opencl.parse_kernels(gp.source)
    program = gp.build(kernels) if HAVE_BUILDER else gp.to_program(kernels)
    uar = uar_mod.build_uar(program)
    brute = edge_index(brute_force_dependences(program, sources=gp.source))
    ctx = uar.context
    symbolic: dict[tuple, Any] = {}
    for e in uar.edges:
        rel = _fixed(e.relation, ctx)
        pts = _points(rel) if rel.dim(isl.dim_type.param) == 0 and rel.wrap().is_bounded() else None
        if pts is not None and not pts:
            continue
        symbolic[(e.src, e.dst, e.array, e.kind)] = (e, pts)
    info = f"\n{gp.source}\n{gp.host_description()}"
    for key, be in brute.items():
        be: ConcreteEdge
        assert key in symbolic, f"UAR misses {key} ({len(be.pairs)} pairs){info}"
        ue, pts = symbolic[key]
        if pts is not None:
            missing = be.pairs - pts
            assert not missing, f"UAR relation of {key} misses {sorted(missing)[:3]}{info}"
        if not be.host:
            assert ORDER[ue.width] >= ORDER[be.width], (
                f"UAR width {ue.width} finer than concrete {be.width} on {key}{info}")
    if not gp.exact:
        return
    for key, (ue, pts) in symbolic.items():
        assert key in brute, f"UAR edge {key} has no concrete dependence{info}"
        be = brute[key]
        if pts is not None:
            assert pts == be.pairs, (
                f"{key}: UAR has extra pairs {sorted(pts - be.pairs)[:3]}{info}")
        if not be.host:
            assert ue.width == be.width, f"{key}: UAR {ue.width} vs concrete {be.width}{info}"
        assert ue.loop_carried == be.loop_carried, f"{key}: loop_carried differs{info}"


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(kernel_chains(max_launches=3, dims=(1,), race_free=True))
def test_uar_matches_bruteforce_1d(gp: GenProgram) -> None:
    _compare(gp)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(kernel_chains(max_launches=2, dims=(1, 2), race_free=True))
def test_uar_matches_bruteforce_2d(gp: GenProgram) -> None:
    _compare(gp)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(kernel_chains(max_launches=2, dims=(1,), gathers=True, race_free=True))
def test_uar_sound_on_data_dependent_subscripts(gp: GenProgram) -> None:
    _compare(gp)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(kernel_chains(max_launches=2, dims=(1,)))
def test_uar_sound_with_racy_writes(gp: GenProgram) -> None:
    """Several work-items of one launch writing one element: every racing writer is a source."""
    _compare(gp)


HAND_KERNELS = """
#define TS 2
__kernel void gemm(__global const float *A, __global const float *B, __global float *C,
                   int N, int K) {
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
  C[grow * N + gcol] = acc;
}
__kernel void bias(__global float *D, __global const float *C, __global const float *b, int N) {
  int i = get_global_id(0);
  D[i] = C[i] + b[i % N];
}
__kernel void reduce(__global const float *in, __global float *out, __local float *s) {
  int l = get_local_id(0);
  s[l] = in[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int st = get_local_size(0) / 2; st > 0; st >>= 1) {
    if (l < st)
      s[l] += s[l + st];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0)
    out[get_group_id(0)] = s[0];
}
__kernel void final(__global const float *p, __global float *r) {
  int l = get_local_id(0);
  if (l == 0) {
    float acc = 0.0f;
    for (int k = 0; k < 4; k++) acc += p[k];
    r[0] = acc;
  }
}
"""


def test_uar_matches_bruteforce_on_gemm_bias_reduce() -> None:
    """Barriers, ``__local`` tiles and a two-level reduction, by hand."""
    builder = pytest.importorskip("polyfuse.frontend.builder")
    kernels = opencl.parse_kernels(HAND_KERNELS)
    b = builder.ProgramBuilder(kernels, name="hand")
    for name, n in (("A", 16), ("B", 16), ("C", 16), ("bb", 4), ("D", 16), ("P", 4),
                    ("R", 1)):
        b.buffer(name, 4 * n)
    b.write("A")
    b.write("B")
    b.launch("gemm", (4, 4), (2, 2), {"A": "A", "B": "B", "C": "C", "N": 4, "K": 4})
    b.launch("bias", (16,), (4,), {"D": "D", "C": "C", "b": "bb", "N": 4})
    b.launch("reduce", (16,), (4,), {"in": "D", "out": "P", "s": builder.local(16)})
    b.launch("final", (4,), (4,), {"p": "P", "r": "R"})
    b.read("R")
    program = b.build()
    brute = edge_index(brute_force_dependences(program, sources=HAND_KERNELS))
    uar = uar_mod.build_uar(program)
    ids = {op.kernel: op.id for op in program.launches}
    widths = {(e.src, e.dst, e.array, e.kind): e.width for e in uar.edges}
    gemm, bias, red, fin = ids["gemm"], ids["bias"], ids["reduce"], ids["final"]
    assert brute[(gemm, bias, "C", "RAW")].width == "thread"  # 2-D GEMM → 1-D element-wise
    assert brute[(bias, red, "D", "RAW")].width == "thread"
    assert brute[(red, fin, "P", "RAW")].width == "global"
    for key, be in brute.items():
        assert key in widths, key
        if not be.host:
            assert widths[key] == be.width, (key, widths[key], be.width)
    assert {k for k, e in brute.items()} == set(widths)


def _by_position(program: Any, edges: list) -> dict:
    pos = {op.id: i for i, op in enumerate(o for o in program.ops
                                           if not (getattr(o, "kind", None) == "sync"))}
    return {(pos[e.src], pos[e.dst], e.array, e.kind): e for e in edges}


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(gp=kernel_chains(max_launches=3, dims=(1, 2), race_free=True))
def test_host_frontend_program_matches_generated(gp: GenProgram, tmp_path_factory: Any) -> None:
    """The C host front-end, fed a generated host program, gives the same concrete dependences
    as the program built directly; and the UAR agrees with brute force on it."""
    host = pytest.importorskip("polyfuse.frontend.host")
    d = tmp_path_factory.mktemp("gen")
    (d / "kernels.cl").write_text(gp.source)
    (d / "host.c").write_text(gp.host_source())
    parsed = host.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))
    direct = gp.to_program(opencl.parse_kernels(gp.source))
    a = _by_position(parsed, brute_force_dependences(parsed, sources=gp.source))
    b = _by_position(direct, brute_force_dependences(direct, sources=gp.source))
    assert set(a) == set(b), gp.host_source()
    for key in a:
        assert a[key].pairs == b[key].pairs and a[key].width == b[key].width, key
    uar = uar_mod.build_uar(parsed)
    u = _by_position(parsed, list(uar.edges))
    assert set(u) == set(a), (set(u) ^ set(a), gp.host_source())
    for key, e in a.items():
        if not e.host:
            assert u[key].width == e.width, (key, u[key].width, e.width)
