"""Property: a planner that fuses across a global edge is caught.

Random chains of kernels with random affine and quasi-affine accesses (1-D and 2-D, race free so
that OpenCL defines the result) go through the whole pipeline — ``build_uar``, ``plan_fusion``,
``generate`` — and the fused program runs on the OpenCL device against the unfused original
(``verify_programs`` on ``compared_buffers``).  Every example must agree, and no group may
contain two launches joined by a ``global`` edge (its same-iteration part: the loop-carried part
of an edge is ordered by the host loop, a group being launched once per iteration).

Two generators feed the property: :func:`polyfuse.oracle.kernelgen.kernel_chains` (broad, but
its independent grids and subscripts rarely fuse) and :func:`fusable_chains` below, which shares
one grid between the launches and chains each kernel to the previous one's output through the
producer's own subscript, a shift, or a random (quasi-)affine subscript — so plans with ``thread``,
``block`` and ``global`` edges and real fused groups are common.

The checker is tested too: a UAR whose global edge is relabelled ``thread`` (a 3-point stencil
over 16 work-groups), fused with identity re-indexings, must be rejected by verification and by
the plan certificate.  Every test shares one OpenCL context.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import islpy as isl
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import polyfuse
from polyfuse.codegen import generate_fused
from polyfuse.fusion import FusedGroup, check_plan, plan_fusion
from polyfuse.fusion.reindex import edge_in_iteration, iteration_width
from polyfuse.oracle.kernelgen import (
    C,
    Ex,
    GenAccess,
    GenKernel,
    GenLaunch,
    GenProgram,
    _extents,
    _max_index,
    add,
    grids,
    injective_subscripts,
    kernel_chains,
    subscripts,
)
from polyfuse.oracle.kernelgen import T as Term
from polyfuse.runtime import device_target, get_context, verify_programs

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
#: no shrinking: one example costs ~0.4 s, so shrinking a failure takes minutes; the assertion
#: message prints the whole failing program (kernels, host description, fused source) instead
PHASES = (Phase.explicit, Phase.reuse, Phase.generate)
SETTINGS = settings(max_examples=20, deadline=None, phases=PHASES,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def cl_env() -> tuple[Any, Any]:
    """One OpenCL context and queue for the whole module."""
    return get_context()


# ----------------------------------------------------------------------------------------------
# A generator of chains that fuse often
# ----------------------------------------------------------------------------------------------


@st.composite
def fusable_chains(draw: Any, dims: tuple[int, ...] = (1, 2), max_launches: int = 4
                   ) -> GenProgram:
    """A race-free chain on one shared grid: launch i reads launch i-1's output."""
    wd = draw(st.sampled_from(dims))
    gs, ls = draw(grids(wd))
    n = draw(st.integers(2, max_launches))
    trips = draw(st.sampled_from([0, 0, 2]))
    pool = [f"b{i}" for i in range(n + 1)]  # b0 is an input; launch i writes b(i+1)
    max_idx = {b: 0 for b in pool}
    kernels: list[GenKernel] = []
    launches: list[GenLaunch] = []
    prev_w: Ex = C(0)
    for i in range(n):
        uses_t = trips > 0 and draw(st.booleans())
        loop = draw(st.sampled_from([0, 0, 0, 2]))
        ext = _extents(wd, gs, ls, loop, trips if uses_t else 0)
        no_k = {k: v for k, v in ext.items() if k != "k"}
        w = draw(injective_subscripts(no_k, wd, ls))
        src = pool[i]
        hows = ["same", "same", "shift", "random"] + (["block"] if wd == 1 and ls[0] > 1 else [])
        how = draw(st.sampled_from(hows)) if i else "random"
        if how == "same" and prev_w.terms() <= set(ext):
            r = prev_w
        elif how == "block":  # two work-items of a group read one element: a block edge
            r = add(Ex("mul", (ls[0], Term("bx"))), Ex("div", (Term("lx"), 2)))
        elif how == "shift" and prev_w.terms() <= set(ext):
            r = add(prev_w, C(draw(st.integers(1, 2))))
        else:
            r = draw(subscripts(ext, wd, ls))
        bindings = [("out", pool[i + 1]), ("in0", src)]
        reads = [r]
        if draw(st.booleans()):  # a second read of the chain's input or an older output
            other = draw(st.sampled_from(pool[: i + 1]))
            reads.append(draw(subscripts(ext, wd, ls)))
            bindings.append(("in1", other))
        for (_p, b), e in zip(bindings[1:], reads):
            max_idx[b] = max(max_idx[b], _max_index(e, ext, gs, ls, wd))
        max_idx[pool[i + 1]] = max(max_idx[pool[i + 1]], _max_index(w, no_k, gs, ls, wd))
        guard = None
        if draw(st.integers(0, 4)) == 0:
            term = draw(st.sampled_from(sorted(no_k)))
            guard = (term, draw(st.integers(1, max(1, no_k[term]))))
        k = GenKernel(name=f"k{i}", work_dim=wd, write=GenAccess("out", w),
                      reads=tuple(GenAccess(f"in{j}", e) for j, e in enumerate(reads)),
                      loop=loop, guard=guard, uses_t=uses_t,
                      accumulate=draw(st.integers(0, 4)) == 0)
        kernels.append(k)
        launches.append(GenLaunch(k.name, gs, ls, tuple(bindings), in_loop=trips > 0))
        prev_w = w
    buffers = tuple((b, max_idx[b] + 1 + draw(st.integers(0, 2)), "float") for b in pool)
    return GenProgram(kernels=tuple(kernels), launches=tuple(launches), buffers=buffers,
                      loop_trips=trips, host_write=draw(st.booleans()),
                      host_read=draw(st.booleans()))


# ----------------------------------------------------------------------------------------------
# The property
# ----------------------------------------------------------------------------------------------


def _global_edges_split(plan: Any) -> list[str]:
    """Edges whose same-iteration part is global but whose ends share a group."""
    uar = plan.uar
    group_of = {m: g.id for g in plan.groups for m in g.members}
    bad = []
    for e in uar.edges:
        if e.host or e.src == e.dst or group_of[e.src] != group_of[e.dst]:
            continue
        label = e.width if not e.loop_carried else iteration_width(uar, e)[0]
        if label == "global" and not edge_in_iteration(uar, e).is_empty():
            bad.append(f"{e.kind} L{e.src}->L{e.dst} on {e.array} is global "
                       f"({(e.witness or {}).get('text', '')}) but both are in group "
                       f"{group_of[e.src]}")
    return bad


def check_fused_equals_unfused(gp: GenProgram, cl_env: tuple[Any, Any]) -> Any:
    ctx, queue = cl_env
    program = gp.build()
    uar = polyfuse.build_uar(program)
    plan = plan_fusion(uar)
    context = f"\n--- kernels ---\n{gp.source}\n--- host ---\n{gp.host_description()}"
    assert not _global_edges_split(plan), "\n".join(_global_edges_split(plan)) + context
    assert check_plan(plan) == [], context
    fused = generate_fused(plan, target=device_target(ctx.devices[0]))
    v = verify_programs(program, fused.program, buffers=fused.compared_buffers, ctx=ctx,
                        queue=queue)
    assert v.ok, f"{v.summary()}{context}\n--- fused ---\n{fused.source}"
    return plan


@SETTINGS
@given(gp=fusable_chains(dims=(1,)))
def test_fusable_chains_1d(gp: GenProgram, cl_env) -> None:
    check_fused_equals_unfused(gp, cl_env)


@SETTINGS
@given(gp=fusable_chains(dims=(2,), max_launches=3))
def test_fusable_chains_2d(gp: GenProgram, cl_env) -> None:
    check_fused_equals_unfused(gp, cl_env)


@settings(max_examples=15, deadline=None, phases=PHASES,
          suppress_health_check=list(HealthCheck))
@given(gp=kernel_chains(max_launches=3, dims=(1, 2), race_free=True))
def test_random_kernel_chains(gp: GenProgram, cl_env) -> None:
    check_fused_equals_unfused(gp, cl_env)


def test_the_property_is_not_vacuous(cl_env) -> None:
    """An element-wise chain (thread edges) fuses into one group and still verifies."""
    gx = Term("gx")
    ks = tuple(GenKernel(f"k{i}", 1, GenAccess("out", gx), (GenAccess("in0", gx),))
               for i in range(3))
    ls = tuple(GenLaunch(f"k{i}", (16,), (4,), (("out", f"b{i + 1}"), ("in0", f"b{i}")))
               for i in range(3))
    gp = GenProgram(ks, ls, tuple((f"b{i}", 16, "float") for i in range(4)))
    plan = check_fused_equals_unfused(gp, cl_env)
    assert [g.members for g in plan.groups] == [tuple(op.id for op in plan.program.launches)]


def test_two_d_chain_in_host_loop_builds_a_uar(cl_env) -> None:
    """Found by the property: a 2-D chain in a host loop whose WAR dependence (L1 reads ``a``,
    L0 rewrites it at ``+ t`` in the next iteration) made isl's coalesce fail inside
    ``build_uar`` (an isl simplification bug on the in-memory map; the same map printed and
    re-parsed coalesces fine).  ``polyfuse.core.islutil.coalesce`` keeps the map uncoalesced
    then."""
    wr = Term("gx")
    k0 = GenKernel("k0", 2, GenAccess("out", add(add(Ex("mul", (5, Term("gy"))), wr),
                                                  add(C(3), Term("t")))), (), uses_t=True)
    k1 = GenKernel("k1", 2, GenAccess("out", add(Ex("mul", (4, Term("gy"))), wr)),
                   (GenAccess("in0", add(Ex("mul", (2, wr)), C(1))),
                    GenAccess("in1", add(Ex("mul", (6, Term("gy"))), wr))))
    gp = GenProgram((k0, k1), (
        GenLaunch("k0", (4, 3), (4, 1), (("out", "a"),), in_loop=True),
        GenLaunch("k1", (4, 3), (4, 1), (("out", "c"), ("in0", "a"), ("in1", "a")),
                  in_loop=True)), (("a", 18, "float"), ("c", 12, "float")), loop_trips=2)
    check_fused_equals_unfused(gp, cl_env)


# ----------------------------------------------------------------------------------------------
# The checker catches a wrong plan
# ----------------------------------------------------------------------------------------------


def test_mislabelled_global_edge_is_caught(cl_env) -> None:
    """A 3-point stencil after its producer, over 16 work-groups of 64: the edge on ``b`` is
    global (border work-items read the neighbouring groups' elements).  Relabel it ``thread``
    and fuse the two launches anyway, each with the identity re-indexing: a work-item then reads
    ``b[i+1]`` that another work-item (maybe of another group) has not written yet.  The
    producer writes ``x*x + 1 >= 1`` and the initial contents are random in ``[-1, 1)``, so
    every such stale read changes ``y``: verification must fail, and so must the certificate.
    """
    ctx, queue = cl_env
    d = EXAMPLES / "stencil3"
    program = polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))
    uar = polyfuse.build_uar(program)
    glob = [e for e in uar.edges if not e.host and e.width == "global"]
    assert [(e.array, e.kind) for e in glob] == [("b", "RAW")]
    honest = plan_fusion(uar)
    assert len(honest.groups) == 2

    edges = tuple(dataclasses.replace(e, width="thread", witness=None, conditions={})
                  if e in glob else e for e in uar.edges)
    bad_uar = dataclasses.replace(uar, edges=edges)
    plan = plan_fusion(bad_uar)
    src, dst = glob[0].src, glob[0].dst
    if len(plan.groups) != 1:
        # the planner still finds no one-to-one re-indexing for the stencil's relation, so
        # fuse by hand with the identity re-indexing it would use for a true thread edge
        frags = tuple(f for g in plan.groups for f in g.fragments)
        assert [f.launch for f in frags] == [src, dst]
        ident = tuple(dataclasses.replace(f, reindex=isl.Map(
            f"{{ F[g0, l0] -> L{f.launch}[g0, l0] : 0 <= g0 < 16 and 0 <= l0 < 64 }}"))
            for f in frags)
        plan = dataclasses.replace(plan, groups=(FusedGroup(
            0, (src, dst), "vertical", ident),), launches_after=1)
    assert check_plan(plan), "the certificate accepts a fusion across a global edge"
    fused = generate_fused(plan, target=device_target(ctx.devices[0]))
    assert len(fused.program.launches) == 1
    assert "y" in fused.compared_buffers
    v = verify_programs(program, fused.program, buffers=fused.compared_buffers, ctx=ctx,
                        queue=queue)
    assert not v.ok, "verification missed a fusion across a global edge:\n" + fused.source
    assert [b.name for b in v.failed] == ["y"]

