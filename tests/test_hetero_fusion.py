"""Heterogeneous horizontal fusion: independent launches with different code in one launch.

Property: on hypothesis-generated sets of independent kernels (each reads its own inputs and
writes its own output through random affine/quasi-affine subscripts, loops, guards), the
``hetero`` plan passes the certificate, the fused program computes exactly what the unfused one
does (``verify_programs``), and every pair of independent launches it leaves apart has a reason.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import islpy as isl
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import polyfuse
from polyfuse.codegen import generate_fused
from polyfuse.core.program import Target
from polyfuse.fusion import check_plan, plan_fusion
from polyfuse.fusion.decisions import Apart
from polyfuse.oracle.kernelgen import (
    GenAccess,
    GenKernel,
    GenLaunch,
    GenProgram,
    _extents,
    _max_index,
    injective_subscripts,
    subscripts,
)
from polyfuse.oracle.kernelgen import T as Term
from polyfuse.passes.pipeline import FuseResult
from polyfuse.report import apart_text, report_markdown
from polyfuse.runtime import device_target, get_context, verify_programs

PHASES = (Phase.explicit, Phase.reuse, Phase.generate)


@pytest.fixture(scope="module")
def cl_env() -> tuple[Any, Any]:
    return get_context()


@st.composite
def independent_kernels(draw: Any, dims: tuple[int, ...] = (1, 2), max_launches: int = 4,
                        mixed_local: bool = False) -> GenProgram:
    """2..max_launches launches with different random code and no buffer in common (with
    ``mixed_local``, each launch draws its own local size in dimension 0)."""
    wd = draw(st.sampled_from(dims))
    ls = tuple(draw(st.sampled_from([1, 2, 4])) for _ in range(wd))
    rest = tuple(ls[d] * draw(st.integers(1, 2)) for d in range(1, wd))  # shared beyond dim 0
    n = draw(st.integers(2, max_launches))
    kernels, launches, buffers = [], [], []
    shared_ls = ls
    for i in range(n):
        if mixed_local:
            ls = (draw(st.sampled_from([1, 2, 4, 8])),) + shared_ls[1:]
        gs = (ls[0] * draw(st.integers(1, 6)),) + rest
        loop = draw(st.sampled_from([0, 0, 2, 3]))
        ext = _extents(wd, gs, ls, loop, 0)
        no_k = {k: v for k, v in ext.items() if k != "k"}
        w = draw(injective_subscripts(no_k, wd, ls))
        reads = [draw(subscripts(ext, wd, ls)) for _ in range(draw(st.integers(1, 2)))]
        guard = None
        if draw(st.integers(0, 3)) == 0:
            term = draw(st.sampled_from(sorted(no_k)))
            guard = (term, draw(st.integers(1, max(1, no_k[term]))))
        k = GenKernel(f"k{i}", wd, GenAccess("out", w),
                      tuple(GenAccess(f"in{j}", r) for j, r in enumerate(reads)), loop=loop,
                      guard=guard, accumulate=draw(st.integers(0, 3)) == 0)
        bindings = [("out", f"o{i}")] + [(f"in{j}", f"i{i}_{j}") for j in range(len(reads))]
        kernels.append(k)
        launches.append(GenLaunch(k.name, gs, ls, tuple(bindings)))
        buffers.append((f"o{i}", _max_index(w, no_k, gs, ls, wd) + 1, "float"))
        buffers += [(f"i{i}_{j}", _max_index(r, ext, gs, ls, wd) + 1, "float")
                    for j, r in enumerate(reads)]
    return GenProgram(tuple(kernels), tuple(launches), tuple(buffers))


def _check(gp: GenProgram, cl_env: tuple[Any, Any]) -> Any:
    ctx, queue = cl_env
    program = gp.build()
    uar = polyfuse.build_uar(program)
    assert not [e for e in uar.edges if not e.host and e.src != e.dst], "not independent"
    plan = plan_fusion(uar, orchestration="hetero")
    context = f"\n--- kernels ---\n{gp.source}\n--- host ---\n{gp.host_description()}"
    assert check_plan(plan) == [], context
    fused = generate_fused(plan, target=device_target(ctx.devices[0]))
    v = verify_programs(program, fused.program, buffers=fused.compared_buffers, ctx=ctx,
                        queue=queue)
    assert v.ok, f"{v.summary()}{context}\n--- fused ---\n{fused.source}"
    apart = {(r.a, r.b) for r in plan.apart}
    for i, g in enumerate(plan.groups):
        for h in plan.groups[i + 1:]:
            assert (g.members, h.members) in apart, context
    return plan, fused


@settings(max_examples=10, deadline=None, phases=PHASES, suppress_health_check=list(HealthCheck))
@given(gp=independent_kernels())
def test_independent_kernels_fuse_side_by_side(gp: GenProgram, cl_env: tuple[Any, Any]) -> None:
    plan, _ = _check(gp, cl_env)
    # same local size everywhere: every launch ends in one group unless the frame was refused
    assert plan.launches_after <= plan.launches_before


@settings(max_examples=8, deadline=None, phases=PHASES, suppress_health_check=list(HealthCheck))
@given(gp=independent_kernels(mixed_local=True))
def test_padded_fragments_verify_and_pass_the_checker(gp: GenProgram,
                                                      cl_env: tuple[Any, Any]) -> None:
    """Different local sizes: fragments padded to the largest are accepted by check_plan (in
    ``_check``) and the fused program matches the original."""
    plan, _ = _check(gp, cl_env)
    assert plan.launches_after <= plan.launches_before


def _bicg_like() -> GenProgram:
    gx = Term("gx")
    k0 = GenKernel("k0", 1, GenAccess("out", gx), (GenAccess("in0", gx),), loop=2)
    k1 = GenKernel("k1", 1, GenAccess("out", gx), (GenAccess("in0", Term("lx")),),
                   accumulate=True)
    return GenProgram((k0, k1), (GenLaunch("k0", (16,), (4,), (("out", "o0"), ("in0", "a"))),
                                 GenLaunch("k1", (8,), (4,), (("out", "o1"), ("in0", "b")))),
                      (("o0", 16, "float"), ("o1", 8, "float"), ("a", 16, "float"),
                       ("b", 4, "float")))


def test_different_code_is_one_launch(cl_env: tuple[Any, Any]) -> None:
    """Two different independent kernels: one launch of 4 + 2 work-groups, verified."""
    plan, fused = _check(_bicg_like(), cl_env)
    assert [g.members for g in plan.groups] == [(0, 1)]
    assert plan.groups[0].orchestration == "horizontal"
    assert plan.groups[0].global_size == (24,)
    assert plan.launches_before == 2 and plan.launches_after == 1
    assert "get_group_id(0)" in fused.source


def test_left_apart_with_reasons(cl_env: tuple[Any, Any]) -> None:
    """The default variant leaves them apart and says why; different local sizes cannot be
    placed side by side, and the report says that too."""
    gp = _bicg_like()
    uar = polyfuse.build_uar(gp.build())
    plan = plan_fusion(uar)
    assert len(plan.groups) == 2
    assert [r.kind for r in plan.apart] == [Apart.NOT_IN_VARIANT]
    assert [apart_text(r) for r in plan.apart] == [
        "not fused in this variant: heterogeneous horizontal fusion (orchestration 'hetero') "
        "is chosen only when measured faster (--tune times it against leaving them apart)"]
    k1 = GenKernel("k1", 2, GenAccess("out", Term("gx")), (GenAccess("in0", Term("lx")),))
    l1 = GenLaunch("k1", (8, 1), (4, 1), (("out", "o1"), ("in0", "b")))
    gp2 = GenProgram((gp.kernels[0], k1), (gp.launches[0], l1), gp.buffers)
    uar2 = polyfuse.build_uar(gp2.build())
    plan2 = plan_fusion(uar2, orchestration="hetero")
    assert len(plan2.groups) == 2
    assert plan2.apart[0].kind is Apart.INCOMPATIBLE
    assert plan2.apart[0].detail.startswith("incompatible dimensionality (1-D and 2-D NDRange)")
    fused = generate_fused(plan2, target=device_target(cl_env[0].devices[0]))
    text = report_markdown(FuseResult(gp2.build(), uar2, fused.plan, fused))
    assert "Independent launches left apart" in text and "incompatible dimensionality" in text
    assert "starts a group: independent" in text


def test_different_local_sizes_are_padded(cl_env: tuple[Any, Any]) -> None:
    """Local sizes 4 and 8: the fused work-group has 8 work-items, the first fragment's guard
    keeps its own 4 (its local ids unchanged), and the result is exact."""
    gp = _bicg_like()
    l1 = GenLaunch("k1", (8,), (8,), (("out", "o1"), ("in0", "b")))
    gp = GenProgram(gp.kernels, (gp.launches[0], l1), gp.buffers[:3] + (("b", 8, "float"),))
    ctx, queue = cl_env
    program = gp.build()
    plan = plan_fusion(polyfuse.build_uar(program), orchestration="hetero")
    assert [(g.members, g.global_size, g.local_size) for g in plan.groups] == \
        [((0, 1), (40,), (8,))]
    # the certificate accepts the padded fragment (no barriers, its local ids kept)
    assert check_plan(plan) == []
    fused = generate_fused(plan, target=device_target(ctx.devices[0]))
    assert "get_local_id(0)) <= 3" in fused.source
    v = verify_programs(program, fused.program, buffers=fused.compared_buffers, ctx=ctx,
                        queue=queue)
    assert v.ok, v.summary()


def test_a_consumer_between_them_keeps_them_apart(cl_env: tuple[Any, Any]) -> None:
    """k0 and k2 are independent and at the same step, but k1 (after k0, before k2 in host
    order) reads k0's output across work-groups: fusing k0 into k2's launch would run k1 before
    its producer.  Found by verifying the hetero variant of an exported PyTorch LSTM."""
    gx = Term("gx")
    k0 = GenKernel("k0", 1, GenAccess("out", gx), (GenAccess("in0", gx),))
    k1 = GenKernel("k1", 1, GenAccess("out", gx), (GenAccess("in0", Term("k")),), loop=16)
    k2 = GenKernel("k2", 1, GenAccess("out", gx), (GenAccess("in0", gx),), loop=2)
    gp = GenProgram((k0, k1, k2), (
        GenLaunch("k0", (16,), (4,), (("out", "o0"), ("in0", "a"))),
        GenLaunch("k1", (16,), (4,), (("out", "o1"), ("in0", "o0"))),
        GenLaunch("k2", (16,), (4,), (("out", "o2"), ("in0", "b")))),
        tuple((n, 16, "float") for n in ("o0", "o1", "o2", "a", "b")))
    ctx, queue = cl_env
    program = gp.build()
    plan = plan_fusion(polyfuse.build_uar(program), orchestration="hetero")
    fused = generate_fused(plan, target=device_target(ctx.devices[0]))
    v = verify_programs(program, fused.program, buffers=fused.compared_buffers, ctx=ctx,
                        queue=queue)
    assert v.ok, v.summary()
    apart = {(r.a, r.b): r for r in plan.apart}
    assert apart[((0,), (2,))].kind is Apart.PLACEMENT
    assert "would run at the later one's place" in apart_text(apart[((0,), (2,))])


def test_check_plan_rejects_wrong_padded_fragments() -> None:
    """The padded fragment accepted above, made wrong three ways: its domain reaches into the
    padding, its local ids permuted (no longer one work-group per work-group), or the second
    fragment overlapping the first's work-groups; each is flagged."""
    gp = _bicg_like()
    l1 = GenLaunch("k1", (8,), (8,), (("out", "o1"), ("in0", "b")))
    gp = GenProgram(gp.kernels, (gp.launches[0], l1), gp.buffers[:3] + (("b", 8, "float"),))
    plan = plan_fusion(polyfuse.build_uar(gp.build()), orchestration="hetero")
    g = plan.groups[0]

    def with_fragment(i: int, reindex: str) -> Any:
        frags = list(g.fragments)
        frags[i] = dataclasses.replace(frags[i], reindex=isl.Map(reindex))
        return dataclasses.replace(plan, groups=(dataclasses.replace(g, fragments=tuple(frags)),))

    into_padding = with_fragment(0, "{ F[g0, l0] -> L0[g0' = g0, l0' = l0] : 0 <= g0 <= 3 and "
                                    "0 <= l0 <= 7 }")
    assert any("exactly once" in p for p in check_plan(into_padding))
    permuted = with_fragment(0, "{ F[g0, l0] -> L0[g0' = g0, l0' = 3 - l0] : 0 <= g0 <= 3 and "
                                "0 <= l0 <= 3 }")
    assert any("differs from the fused (8,)" in p for p in check_plan(permuted))
    overlap = with_fragment(1, "{ F[g0 = 3, l0] -> L1[g0' = 0, l0' = l0] : 0 <= l0 <= 7 }")
    assert check_plan(overlap) != []


def test_local_memory_over_the_device_limit_keeps_them_apart() -> None:
    """Two independent launches with 2 KiB of __local memory each: side by side on a device
    with 64 KiB, left apart on one with 3 KiB, and the reason names the limit (without --tune)."""
    src = """
__kernel void rowsum(__global const float* a, __global float* out) {
  __local float tile[512];
  int l = get_local_id(0);
  tile[l] = a[get_global_id(0)];
  out[get_global_id(0)] = tile[l] * 2.0f;
}
__kernel void colscale(__global const float* b, __global float* out) {
  __local float buf[512];
  int l = get_local_id(0);
  buf[l] = b[get_global_id(0)] + 1.0f;
  out[get_global_id(0)] = buf[l];
}
"""
    b = polyfuse.ProgramBuilder(src)
    for name in ("a", "b", "o0", "o1"):
        b.buffer(name, 4 * 1024)
    b.launch("rowsum", global_size=(1024,), local_size=(64,), args=["a", "o0"])
    b.launch("colscale", global_size=(1024,), local_size=(64,), args=["b", "o1"])
    uar = polyfuse.build_uar(b.build())
    big = plan_fusion(uar, orchestration="hetero", target=Target("big", 256, 65536))
    assert [g.members for g in big.groups] == [(0, 1)]
    small = Target("small", 256, 3 * 1024)
    for orchestration in ("auto", "hetero"):
        plan = plan_fusion(uar, orchestration=orchestration, target=small)
        assert [g.members for g in plan.groups] == [(0,), (1,)]
        assert [apart_text(r) for r in plan.apart] == [
            "local memory over the device limit (2048 B + 2048 B of __local memory > 3072 B "
            "on small)"]
