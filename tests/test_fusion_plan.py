"""Fusion planning: local fusion (P1), global fusion (P2, P3), re-indexing, plan.json.

Every plan made here is checked by :func:`polyfuse.fusion.check_plan`, the isl certificate code
generation relies on (each re-indexing a bijection onto the launch's work-items, every edge inside
a group pairing one fused work-item or one fused work-group behind a barrier).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import islpy as isl
import pytest

import polyfuse
from polyfuse.fusion import Fragment, check_plan, plan_fusion
from polyfuse.fusion.decisions import (
    CommonConsumer,
    P3Merge,
    Refused,
    StartCause,
    WavefrontSchedule,
)
from polyfuse.fusion.global_ import separate_steps
from polyfuse.fusion.reindex import edge_in_iteration
from polyfuse.fusion.similarity import kernel_signature
from polyfuse.report import plan_json, plan_to_json, plan_to_text
from polyfuse.report.decisions import refusal_text, start_text

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
HOST_PROGRAMS = Path(__file__).resolve().parent / "host_programs"


def example_uar(name: str, **params: int):
    d = EXAMPLES / name
    kw = {"params": params} if params else {}
    prog = polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"), **kw)
    return polyfuse.build_uar(prog)


def plan_of(uar, **kw):
    plan = plan_fusion(uar, **kw)
    assert check_plan(plan) == []
    return plan


def members(plan) -> list[tuple[int, ...]]:
    return [g.members for g in plan.groups]


def group_of(plan) -> dict[int, int]:
    return {m: g.id for g in plan.groups for m in g.members}


# ----------------------------------------------------------------------------------------------
# Bundled examples
# ----------------------------------------------------------------------------------------------


EXPECTED = {
    # example: (groups as launch-count tuple, launches before, after)
    "elementwise_chain": ([4], 4, 1),
    "gemm_bias_relu_transpose": ([3], 3, 1),
    "group_neighbor": ([2], 2, 1),
    "qkv": ([4], 4, 1),
    "shift_rotation": ([4], 4, 1),
    "stencil3": ([1, 1], 2, 2),
    "reduction": ([1, 1], 2, 2),
    "runtime_offset": ([1, 1], 2, 2),
    "lstm_cell": ([2], 16, 8),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_examples_plan(name):
    uar = example_uar(name, m=1) if name == "runtime_offset" else example_uar(name)
    plan = plan_of(uar)
    sizes, before, after = EXPECTED[name]
    assert [len(g.members) for g in plan.groups] == sizes
    assert (plan.launches_before, plan.launches_after) == (before, after)
    # P2: no global edge has a same-iteration pair inside one group
    gof = group_of(plan)
    for e in uar.edges:
        if e.host or e.width != "global":
            continue
        if gof[e.src] == gof[e.dst]:
            assert edge_in_iteration(uar, e).is_empty(), e
        else:
            assert any((b.src, b.dst, b.array) == (e.src, e.dst, e.array) for b in plan.blocked)
    # strictly separated steps across groups joined by a same-iteration dependence
    step = {g.id: g.step for g in plan.groups}
    for e in uar.edges:
        if not e.host and gof[e.src] != gof[e.dst] and not edge_in_iteration(uar, e).is_empty():
            assert step[gof[e.src]] < step[gof[e.dst]]


def test_qkv_one_group_vertical():
    plan = plan_of(example_uar("qkv"))
    (g,) = plan.groups
    assert g.orchestration == "vertical"
    assert [f.kernel for f in g.fragments] == ["linear"] * 3 + ["combine"]
    assert g.local_size == (16, 16) and g.global_size == (64, 64)
    # the three projections run in the same work-item (identity), combine is reshaped
    for f in g.fragments[:3]:
        assert f.reindex.is_equal(g.fragments[0].reindex.set_tuple_name(
            isl.dim_type.out, f"L{f.launch}"))
    assert CommonConsumer(g.members[-1]) in g.notes


def test_gemm_keeps_its_work_groups():
    plan = plan_of(example_uar("gemm_bias_relu_transpose"))
    (g,) = plan.groups
    gemm = g.fragments[0].reindex
    assert gemm.is_equal(isl.Map(
        "{ F[g0, g1, l0, l1] -> L4[g0, g1, l0, l1] : 0 <= g0, g1 <= 3 and 0 <= l0, l1 <= 15 }"))
    transpose = g.fragments[2].reindex
    assert transpose.is_equal(gemm.set_tuple_name(isl.dim_type.out, "L6"))
    assert not any(f.barrier_before for f in g.fragments)


def test_block_edge_gets_barrier():
    plan = plan_of(example_uar("group_neighbor"))
    (g,) = plan.groups
    assert [f.barrier_before for f in g.fragments] == [False, True]


def test_lstm_not_fused_across_iterations():
    uar = example_uar("lstm_cell")
    plan = plan_of(uar)
    (g,) = plan.groups
    assert g.schedule is not None and "t" in g.schedule
    hs = [e for e in uar.edges if e.array == "hs" and not e.host]
    assert hs and all(e.width == "global" and e.loop_carried for e in hs)
    assert all(edge_in_iteration(uar, e).is_empty() for e in hs)


def test_plan_json_contract_and_determinism():
    """plan.json is the plan's decisions plus what code generation (kernel names, NDRanges,
    optimizations) and verification made of them; the plan record itself holds none of those."""
    from polyfuse.codegen import generate_fused

    uar = example_uar("reduction")
    plan = plan_of(uar)
    mine = plan_to_json(plan)
    assert not {"optimizations", "verified"} & set(mine)
    assert all("kernel" not in g for g in mine["groups"])
    fused = generate_fused(plan)
    assert fused.plan is plan
    js = plan_json(fused)
    for key in ("launches_before", "launches_after", "groups", "edges", "blocked",
                "optimizations"):
        assert key in js
    assert "verified" not in js
    assert [g["kernel"] for g in js["groups"]] == [k.kernel for k in fused.groups]
    assert js["edges"] == mine["edges"] and js["blocked"] == mine["blocked"]
    for g in js["groups"]:
        assert {"id", "members", "orchestration", "kernel", "step", "fragments", "global_size",
                "local_size", "notes"} <= set(g)
        assert g["orchestration"] in ("single", "vertical", "horizontal", "hybrid")
        for f in g["fragments"]:
            assert set(f) == {"launch", "kernel", "reindex", "barrier_before"}
    for e in js["edges"]:
        assert {"src", "dst", "array", "kind", "width", "relation"} <= set(e)
    (b,) = js["blocked"]
    assert b["width"] == "global" and b["witness"] and "P2" in b["reason"]
    assert plan_to_text(plan) == plan_to_text(plan_of(example_uar("reduction")))
    assert json.loads(plan_to_text(js)) == js
    verified = plan_json(fused, {"ok": True, "reference": "unfused", "max_abs_err": 0.0,
                                 "max_rel_err": 0.0})
    assert verified["verified"]["ok"] is True and "verified" not in plan_json(fused)


# ----------------------------------------------------------------------------------------------
# Hand-built programs
# ----------------------------------------------------------------------------------------------

KERNELS = r"""
#define WG 64
__kernel void ew(__global const float* a, __global float* b, const int n)
{
    int i = get_global_id(0);
    if (i < n) b[i] = a[i] + 1.0f;
}
__kernel void halo(__global const float* a, __global float* b, const int n)
{
    int i = get_global_id(0);
    if (i > 0 && i < n - 1) b[i] = a[i - 1] + a[i] + a[i + 1];
}
__kernel void scale(__global const float* x, __global float* a, const int n)
{
    int i = get_global_id(0);
    if (i < n) a[i] = 2.0f * x[i];
}
__kernel void same(__global const float* a, __global float* b, const int n)
{
    int i = get_global_id(0);
    if (i < n) b[i] = a[i] - 3.0f;
}
__kernel void shift(__global const float* b, __global float* c, const int n)
{
    int i = get_global_id(0);
    if (i + 1 < n) c[i] = b[i + 1];
}
__kernel void pair(__global const float* c, __global float* d)
{
    int g = get_group_id(0);
    int l = get_local_id(0);
    d[g * WG + l] = c[g * WG + l + 1 - 2 * (l % 2)];  /* partner l ^ 1 */
}
__kernel void partial(__global const float* x, __global float* p, __local float* s)
{
    int l = get_local_id(0);
    s[l] = x[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l == 0) {
        float acc = 0.0f;
        for (int k = 0; k < WG; k++) acc += s[k];
        p[get_group_id(0)] = acc;
    }
}
__kernel void final1(__global const float* p, __global float* r)
{
    __local float s[WG];
    int l = get_local_id(0);
    s[l] = p[l];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l == 0) {
        float acc = 0.0f;
        for (int k = 0; k < WG; k++) acc += s[k];
        r[0] = acc;
    }
}
__kernel void matvec(__global const float* h, __global float* y, const int n)
{
    int i = get_global_id(0);
    float acc = 0.0f;
    for (int k = 0; k < n; k++) acc += h[k];
    y[i] = acc;
}
__kernel void bias(__global const float* y, __global float* z, const int n)
{
    int i = get_global_id(0);
    if (i < n) z[i] = y[i] + 0.5f;
}
__kernel void ew2(__global const float* q, __global float* w, const int m)
{
    int j = get_global_id(0);
    if (j < m) w[j] = q[j] + 7.0f;
}
"""

N = 256


@pytest.fixture(scope="module")
def kernels():
    return polyfuse.parse_kernels(KERNELS)


def _builder(kernels, nbuf: int, n: int = N):
    b = polyfuse.ProgramBuilder(kernels)
    for k in range(nbuf):
        b.buffer(f"B{k}", 4 * n)
    return b


@pytest.mark.parametrize("cuts", [0, 1, 2, 3])
def test_chain_cut_by_global_edges(kernels, cuts):
    """ew^2 (halo ew^2)^cuts: exactly cuts + 1 groups, each segment fused."""
    seq = ["ew", "ew"] + ["halo", "ew", "ew"] * cuts
    b = _builder(kernels, len(seq) + 1)
    b.write("B0")
    for k, name in enumerate(seq):
        b.launch(name, (N,), (64,), {"a": f"B{k}", "b": f"B{k + 1}", "n": N})
    b.read(f"B{len(seq)}", blocking=True)
    plan = plan_of(polyfuse.build_uar(b.build()))
    assert len(plan.groups) == cuts + 1
    assert [g.step for g in plan.groups] == sorted(g.step for g in plan.groups)
    assert len({g.step for g in plan.groups}) == cuts + 1
    assert len(plan.blocked) == cuts and all(x.width == "global" for x in plan.blocked)


def _chain4(kernels):
    b = _builder(kernels, 5)
    b.write("B0")
    b.launch("scale", (N,), (64,), {"x": "B0", "a": "B1", "n": N})
    b.launch("same", (N,), (64,), {"a": "B1", "b": "B2", "n": N})
    b.launch("shift", (N,), (64,), {"b": "B2", "c": "B3", "n": N})
    b.launch("pair", (N,), (64,), {"c": "B3", "d": "B4"})
    b.read("B4", blocking=True)
    return polyfuse.build_uar(b.build())


def test_chain_fuses_only_with_consumer_anchoring(kernels):
    uar = _chain4(kernels)
    assert {e.width for e in uar.edges if not e.host} == {"thread"}
    producer = plan_of(uar, anchor="producer")
    assert len(producer.groups) == 2
    assert any("scattered" in refusal_text(b.reason) for b in producer.blocked)
    for anchor in ("consumer", "auto"):
        plan = plan_of(uar, anchor=anchor)
        (g,) = plan.groups
        # the pair kernel (local ids) keeps its work-groups: identity up to a group shift
        pair = g.fragments[-1].reindex
        keep_l = isl.Map("{ F[g0, l0] -> L4[g, l] : l = l0 }")
        assert pair.is_subset(keep_l)
        assert not any(f.barrier_before for f in g.fragments)
    # the shifted fragments spill one work-item into an extra group: grid is 5 groups
    assert plan.groups[0].global_size == (5 * 64,)


def test_final_reduction_by_one_group_not_fused(kernels):
    from polyfuse.frontend.builder import local

    b = _builder(kernels, 0)
    b.buffer("x", 4 * 64 * 64)
    b.buffer("p", 4 * 64)
    b.buffer("r", 4)
    b.write("x")
    b.launch("partial", (64 * 64,), (64,), {"x": "x", "p": "p", "s": local(256)})
    b.launch("final1", (64,), (64,), {"p": "p", "r": "r"})
    b.read("r", blocking=True)
    uar = polyfuse.build_uar(b.build())
    (e,) = [e for e in uar.edges if not e.host]
    assert e.width == "thread"
    for anchor in ("auto", "producer", "consumer"):
        plan = plan_of(uar, anchor=anchor)
        assert len(plan.groups) == 2
        (blk,) = plan.blocked
        assert blk.width == "thread" and blk.reason.kind is Refused.NO_REINDEXING


def _branches(kernels, combine: bool = False):
    """Three identical (ew -> bias) chains on different buffers: P3 material."""
    b = _builder(kernels, 0)
    for k in range(3):
        for s in ("in", "mid", "out"):
            b.buffer(f"{s}{k}", 4 * N)
    for k in range(3):
        b.write(f"in{k}")
    for k in range(3):
        b.launch("ew", (N,), (64,), {"a": f"in{k}", "b": f"mid{k}", "n": N})
        b.launch("bias", (N,), (64,), {"y": f"mid{k}", "z": f"out{k}", "n": N})
    for k in range(3):
        b.read(f"out{k}")
    b.finish()
    return polyfuse.build_uar(b.build())


def test_p3_vertical_and_horizontal(kernels):
    uar = _branches(kernels)
    plan = plan_of(uar)
    (g,) = plan.groups
    assert g.orchestration == "vertical" and g.global_size == (N,)
    assert any(isinstance(n, P3Merge) for n in g.notes)
    assert (plan.launches_before, plan.launches_after) == (6, 1)
    hplan = plan_of(uar, orchestration="horizontal")
    (h,) = hplan.groups
    assert h.orchestration == "hybrid" and h.global_size == (3 * N,)
    # fragment k of the horizontal plan sits k grids further along g0
    third = h.fragments[-1].reindex
    assert third.domain().is_equal(isl.Set("{ F[g0, l0] : 8 <= g0 <= 11 and 0 <= l0 <= 63 }"))


def test_p3_needs_identical_code(kernels):
    def two(second: str, args: dict):
        b = _builder(kernels, 4)
        b.launch("ew", (N,), (64,), {"a": "B0", "b": "B1", "n": N})
        b.launch(second, (N,), (64,), args)
        return plan_of(polyfuse.build_uar(b.build()))

    # ew and ew2 differ in a float constant only: not identical code, not fused by P3
    assert kernel_signature(kernels["ew"]) != kernel_signature(kernels["ew2"])
    assert len(two("ew2", {"q": "B2", "w": "B3", "m": N}).groups) == 2
    (g,) = two("ew", {"a": "B2", "b": "B3", "n": N}).groups
    assert g.orchestration == "vertical"


def test_similarity_modulo_names_and_ints():
    a = polyfuse.parse_kernels("__kernel void f(__global float* x, const int n)\n"
                               "{ int i = get_global_id(0); if (i < n) x[i + 1] = 2.0f; }")
    b = polyfuse.parse_kernels("__kernel void g(__global float* y, const int m)\n"
                               "{ int j = get_global_id(0); if (j < m) y[j + 7] = 2.0f; }")
    c = polyfuse.parse_kernels("__kernel void h(__global float* y, const int m)\n"
                               "{ int j = get_global_id(0); if (j < m) y[j - 7] = 2.0f; }")
    assert kernel_signature(a["f"]) == kernel_signature(b["g"])
    assert kernel_signature(a["f"]) != kernel_signature(c["h"])


def _loop_program(kernels, body):
    b = _builder(kernels, 3)
    T = b.param("T", min=1)
    b.write("B0")
    with b.loop("t", 0, T):
        for name, args in body:
            b.launch(name, (N,), (64,), {**args, "n": N})
    b.read("B0", blocking=True)
    return polyfuse.build_uar(b.build())


def test_host_loop_fusion_and_counts(kernels):
    # matvec -> ew thread; loop-carried edges only otherwise: one group per iteration
    uar = _loop_program(kernels, [("matvec", {"h": "B0", "y": "B1"}),
                                  ("ew", {"a": "B1", "b": "B2"})])
    plan = plan_of(uar)
    (g,) = plan.groups
    assert plan.launches_before == "2*T" and plan.launches_after == "T"
    assert g.schedule is not None and "t" in g.schedule


@pytest.mark.parametrize("body", [
    # ew(t) overwrites B0 while matvec(t) reads all of it: WAR global in one iteration
    [("matvec", {"h": "B0", "y": "B1"}), ("ew", {"a": "B1", "b": "B0"})],
    # matvec(t) reads all that ew(t) wrote: RAW global in one iteration
    [("ew", {"a": "B0", "b": "B1"}), ("matvec", {"h": "B1", "y": "B0"})],
])
def test_host_loop_not_fused_across_global_edges(kernels, body):
    uar = _loop_program(kernels, body)
    plan = plan_of(uar)
    assert len(plan.groups) == 2
    assert plan.groups[0].step < plan.groups[1].step
    assert plan.launches_before == plan.launches_after == "2*T"
    assert any(b.width == "global" and b.reason.kind is Refused.GLOBAL for b in plan.blocked)


# ----------------------------------------------------------------------------------------------
# The certificate and the step separation
# ----------------------------------------------------------------------------------------------


def test_check_plan_rejects_broken_plans():
    plan = plan_of(example_uar("group_neighbor"))
    (g,) = plan.groups
    no_barrier = dataclasses.replace(g, fragments=(g.fragments[0], dataclasses.replace(
        g.fragments[1], barrier_before=False)))
    probs = check_plan(dataclasses.replace(plan, groups=(no_barrier,)))
    assert any("barrier" in p for p in probs)
    plan = plan_of(example_uar("elementwise_chain"))
    (g,) = plan.groups
    wrong = dataclasses.replace(g.fragments[1], reindex=isl.Map(
        g.fragments[1].reindex_text.replace("l0' = l0", "l0' = 63 - l0")))
    probs = check_plan(dataclasses.replace(plan, groups=(dataclasses.replace(
        g, fragments=(g.fragments[0], wrong) + g.fragments[2:]),)))
    assert any("without a barrier" in p for p in probs), probs
    merge = dataclasses.replace(g.fragments[1], reindex=isl.Map(
        g.fragments[1].reindex_text.replace("l0' = l0", "l0' = 0")))
    probs = check_plan(dataclasses.replace(plan, groups=(dataclasses.replace(
        g, fragments=(g.fragments[0], merge) + g.fragments[2:]),)))
    assert any("not injective" in p for p in probs), probs
    stencil = plan_of(example_uar("stencil3"))
    merged = dataclasses.replace(stencil.groups[0],
                                 members=stencil.groups[0].members + stencil.groups[1].members,
                                 fragments=stencil.groups[0].fragments + tuple(
                                     dataclasses.replace(f, reindex=f.reindex)
                                     for f in stencil.groups[1].fragments))
    probs = check_plan(dataclasses.replace(stencil, groups=(merged,)))
    assert any("crosses fused work-groups" in p for p in probs)


def test_separate_steps_keeps_dependences_out_of_one_launch():
    # isl (or anything) gave equal steps to two statements joined by a dependence:
    steps = separate_steps({"G0": 0, "G1": 0, "G2": 0}, [("G0", "G1"), ("G1", "G2")])
    assert steps == {"G0": 0, "G1": 1, "G2": 2}
    assert separate_steps({"A": 0, "B": 3}, [("A", "B")]) == {"A": 0, "B": 3}
    with pytest.raises(ValueError):
        separate_steps({"A": 0, "B": 0}, [("A", "B"), ("B", "A")])


def test_qkv_horizontal_variant_is_distinct_and_legal():
    """Fully horizontal QKV (SIRIUS Fig. 4b): the three projections side by side in one launch,
    the combine (which needs all three in one work-item) in a second; steps are ASAP levels."""
    root = Path(__file__).resolve().parent.parent / "examples" / "qkv"
    program = polyfuse.load_opencl(str(root / "kernels.cl"), host=str(root / "host.c"))
    uar = polyfuse.build_uar(program)
    vertical = polyfuse.plan_fusion(uar, orchestration="vertical")
    horizontal = polyfuse.plan_fusion(uar, orchestration="horizontal")
    assert vertical.launches_after == 1
    assert horizontal.launches_after == 2
    assert [(len(g.members), g.orchestration) for g in horizontal.groups] == \
        [(3, "horizontal"), (1, "single")]
    assert horizontal.groups[0].step < horizontal.groups[1].step
    assert polyfuse.check_plan(horizontal) == []


WAVE_SRC = """
__kernel void cell(__global float *h, const int below, const int prev, const int out) {
  int i = get_global_id(0);
  float s = 0.0f;
  for (int k = 0; k < 64; k++) s += h[below + k] + h[prev + k];
  h[out + i] = tanh(s);
}"""


def _stacked_rnn(below, prev, layers=3, steps=4, width=64):
    """Launches over host loops (l, t) reading h at offsets below(l, t) and prev(l, t)."""
    b = polyfuse.ProgramBuilder(WAVE_SRC, name="stacked_rnn")
    b.buffer("h", 4 * width * (layers + 2) * (steps + 2))
    b.write("h")
    with b.loop("l", 1, layers + 1) as layer:
        with b.loop("t", 1, steps + 1) as t:
            row = lambda a, c: (a * (steps + 2) + c) * width  # noqa: E731
            b.launch("cell", global_size=(width,), local_size=(64,),
                     args={"h": "h", "below": row(*below(layer, t)),
                           "prev": row(*prev(layer, t)), "out": row(layer, t)})
    b.read("h", blocking=True)
    return polyfuse.plan_fusion(polyfuse.build_uar(b.build()))


def test_layer_time_recurrence_is_scheduled_along_its_wavefront():
    """h[l][t] needs h[l-1][t] and h[l][t-1]: neither host loop is parallel, the anti-diagonals
    l + t are (SIRIUS §7.5); isl proves every dependence crosses to a later wavefront step."""
    plan = _stacked_rnn(lambda y, t: (y - 1, t), lambda y, t: (y, t - 1))
    (group,) = plan.groups
    assert isl.Map(group.schedule).is_equal(isl.Map("{ G0[l, t] -> [l + t, t] }"))
    assert WavefrontSchedule("l + t", "6") in group.notes, group.notes
    assert plan.launches_before == plan.launches_after == 12


def test_no_wavefront_when_the_outer_loop_is_parallel():
    """Layers independent (only t carries): the layer loop is parallel, no skew is needed."""
    plan = _stacked_rnn(lambda y, t: (0, t), lambda y, t: (y, t - 1))
    (group,) = plan.groups
    assert not any(isinstance(n, WavefrontSchedule) for n in group.notes)


def test_no_wavefront_when_a_dependence_stays_on_an_anti_diagonal():
    """h[l][t] needs h[l-1][t+1]: distance (1, -1) keeps l + t constant, so the anti-diagonal
    launches are not independent and no wavefront is claimed."""
    plan = _stacked_rnn(lambda y, t: (y - 1, t + 1), lambda y, t: (y, t - 1))
    (group,) = plan.groups
    assert not any(isinstance(n, WavefrontSchedule) for n in group.notes)


def test_barrier_kernel_on_a_symbolic_size_is_left_apart_with_the_way_out():
    """``gs = n`` with local size 64: for n not a multiple of 64 the reduction's last group is
    partial, so fused its barriers would sit under a guard; planning keeps it alone and says so,
    and its own group is generated on whole groups, the guard on the padding work-items below
    its barriers."""
    d = HOST_PROGRAMS / "symbolic_reduction"
    prog = polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))
    plan = plan_of(polyfuse.build_uar(prog))
    sumsq = next(op.id for op in prog.launches if op.kernel == "sumsq")
    assert (sumsq,) in members(plan)
    why = [refusal_text(b.reason) for b in plan.blocked if sumsq in (b.src, b.dst)]
    assert why and all("barriers" in r and "values of n" in r and "--param" in r for r in why)
    fused = polyfuse.generate_fused(plan)
    own = next(k for k in fused.groups if plan.groups[k.group].members == (sumsq,))
    assert [str(x) for x in own.global_size] == ["64*floor(n/64 + 63/64)"]
    from pycparser import c_ast

    from polyfuse.c import preprocessor, printer, syntax
    from polyfuse.codegen.barrier_guard import has_barrier_call

    for node in syntax.walk(preprocessor.parse(fused.source, "fused.cl")):
        if isinstance(node, c_ast.If) and "get_" in printer.opencl_source(node.cond):
            assert not has_barrier_call(node.iftrue) and not has_barrier_call(node.iffalse)
    fixed = polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"),
                                 params={"n": 4096})
    assert members(plan_of(polyfuse.build_uar(fixed))) == [tuple(op.id for op in fixed.launches)]


def test_reason_names_the_edge_inside_the_loop_not_one_from_before_it():
    """c is cleared before the loop; in the loop, accumulate reads c[i] and mirror writes
    c[n-1-i]. Mirror cannot join accumulate because the reversed index crosses fused
    work-groups; the edges from the launch before the loop never could fuse, and are not what
    the report may name for it."""
    d = HOST_PROGRAMS / "mirror_loop"
    prog = polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"),
                                params={"n": 1024})
    plan = plan_of(polyfuse.build_uar(prog))
    ids = {op.kernel: op.id for op in prog.launches}
    acc, mirror = ids["accumulate"], ids["mirror"]
    start = plan.starts[mirror]
    assert start.cause is StartCause.BLOCKED and start.edge is not None
    assert (start.edge.src, start.edge.dst) == (acc, mirror)
    assert start.refusal is not None and start.refusal.kind is Refused.NO_REINDEXING
    assert "crosses fused work-groups" in start_text(start)
    inside = [b for b in plan.blocked if {b.src, b.dst} == {acc, mirror}]
    assert inside and all(b.reason.kind is Refused.NO_REINDEXING for b in inside)
    outside = [b for b in plan.blocked if ids["init"] in (b.src, b.dst)]
    assert outside and all(b.reason.kind is Refused.HOST_LOOPS for b in outside)


def test_a_fragment_pickles_with_its_map_and_text():
    """A fragment's map is an isl.Map (islpy cannot pickle ``F[g0] -> L1[g0]`` itself): pickled
    through its text, it comes back equal, and writes the text planning printed even where isl
    prints the map read back differently."""
    import pickle

    for g in plan_of(example_uar("qkv")).groups:
        for f in g.fragments:
            again = pickle.loads(pickle.dumps(f))
            assert again.reindex.is_equal(f.reindex) and again.reindex_text == f.reindex_text
            assert (again.launch, again.kernel, again.barrier_before) == \
                (f.launch, f.kernel, f.barrier_before)
    text = ("{ F[g0, l0] -> L5[g0' = 0, g1, g2, l0', l1, l2 = 0] : 4g2 = g0 - g1 and "
            "16l1 = l0 - l0' and 0 <= g0 <= 63 and 0 <= l0 <= 63 and g1 >= -60 + g0 and "
            "0 <= g1 <= 3 and g1 <= g0 and l0' >= -48 + l0 and 0 <= l0' <= 15 and l0' <= l0 }")
    restore, _ = Fragment(5, "k", isl.Map(text)).__reduce__()
    read = restore(5, "k", text, False)  # as a plan printed ``text`` and then was pickled
    again = pickle.loads(pickle.dumps(read))
    assert str(isl.Map(text)) != text and again.reindex_text == text
    assert again.reindex.is_equal(isl.Map(text))


def test_dependences_between_host_iterations_only_go_forward():
    """A dependence relation over-approximated without order (a may-access of a whole buffer
    in a time-step loop) is cut to its forward part before it constrains the global schedule:
    to later iterations, or to the same one only when the source comes first.  Otherwise
    the constraints are cyclic and isl finds no schedule (SNU NPB SP)."""
    from polyfuse.fusion.global_ import _forward

    rel = isl.Map("{ A[i] -> B[o] : 0 < i <= 10 and 0 < o <= 10 }")
    assert _forward(rel, strict=False).is_equal(isl.Map("{ A[i] -> B[o] : 0 < i <= o <= 10 }"))
    assert _forward(rel, strict=True).is_equal(isl.Map("{ A[i] -> B[o] : 0 < i < o <= 10 }"))
    two = isl.Map("{ A[i, j] -> B[o, p] : 0 <= i, j, o, p < 3 }")
    assert _forward(two, strict=True).is_equal(isl.Map(
        "{ A[i, j] -> B[o, p] : 0 <= i, j, o, p < 3 and (o > i or (o = i and p > j)) }"))
    assert _forward(isl.Map("{ A[] -> B[o] : 0 <= o < 3 }"), strict=True).is_equal(
        isl.Map("{ A[] -> B[o] : 0 <= o < 3 }"))  # different loops: left as it is


def test_edge_indexes_agree_with_a_scan_of_every_edge():
    """Planning looks edges up by source and decides each edge's same-iteration part once (a
    long unrolled sequence has tens of thousands of edges and a million look-ups): the index
    and the memos give what a scan and a fresh computation give, host-loop edges included."""
    from polyfuse.fusion.local import _between
    from polyfuse.fusion.reindex import (
        _iteration_width,
        identity_frame,
        in_iteration_empty,
        iteration_width,
        same_iteration,
        shared_loops,
    )

    uar = example_uar("lstm_cell")
    assert any(e.loop_carried for e in uar.edges)
    ids = [op.id for op in uar.program.launches]
    for m in [op.id for op in uar.program.ops]:
        assert list(uar.device_edges_from(m)) == [
            (k, e) for k, e in enumerate(uar.edges) if not e.host and e.src == m]
    frames = {m: identity_frame(uar, m) for m in ids}
    for a in ids:
        for b in ids:
            assert _between(uar, frames[a], frames[b]) == [
                e for e in uar.edges if not e.host and ((e.src == a and e.dst == b)
                                                        or (e.src == b and e.dst == a))]
    for e in uar.edges:
        fresh = same_iteration(e.relation, shared_loops(uar, e.src, e.dst))
        assert edge_in_iteration(uar, e) is edge_in_iteration(uar, e)
        assert edge_in_iteration(uar, e).is_equal(fresh)
        assert in_iteration_empty(uar, e) == fresh.is_empty()
        if not e.host:
            assert iteration_width(uar, e) is iteration_width(uar, e)
            assert iteration_width(uar, e)[0] == _iteration_width(uar, e)[0]


def _ping_pong_blocks(kernels, blocks: int):
    """SHOC Triad's stream, unrolled: each block is written to one of two buffer sets,
    computed there and read back while the next block goes to the other set."""
    b = _builder(kernels, 4)
    for k in range(blocks):
        src, dst = (f"B{0 + 2 * (k % 2)}", f"B{1 + 2 * (k % 2)}")
        b.write(src)
        b.launch("ew", (N,), (64,), {"a": src, "b": dst, "n": N})
        b.read(dst)
    return polyfuse.build_uar(b.build())


def test_long_unrolled_run_is_scheduled_as_its_topological_sequence(kernels, monkeypatch):
    """Past ``DIRECT_SEQUENCE_MIN`` zero-dimensional statements (host loops unrolled) the
    schedule is their topological sequence, built without isl's scheduler (whose cost grows
    much faster than the statements: a 2,000-operation unrolled host took it past 600 s): the
    plan's groups and steps are those isl's schedule gives, and the sequence keeps every
    dependence forward."""
    from polyfuse.fusion import global_

    uar = _ping_pong_blocks(kernels, 12)
    monkeypatch.setattr(global_, "DIRECT_SEQUENCE_MIN", 10**9)
    by_isl = plan_of(uar)
    monkeypatch.setattr(global_, "DIRECT_SEQUENCE_MIN", 1)
    direct = plan_of(uar)
    assert [(g.members, g.step) for g in direct.groups] == \
        [(g.members, g.step) for g in by_isl.groups]
    assert "sequence" in direct.schedule and "set" not in direct.schedule

    names = [f"S{k}" for k in range(400)]
    domain = isl.UnionSet("{ " + "; ".join(f"{n}[]" for n in names) + " }")
    # every statement after its two predecessors, listed in reverse program order
    validity = isl.UnionMap("{ " + "; ".join(
        f"{names[k - d]}[] -> {names[k]}[]" for k in range(400) for d in (1, 2) if k >= d)
        + " }")
    monkeypatch.setattr(global_, "DIRECT_SEQUENCE_MIN", 96)
    schedule = global_._compute_schedule(domain, validity, names[::-1])
    steps = global_.schedule_steps(schedule, set(names))
    assert sorted(steps.values()) == list(range(400))
    assert all(steps[names[k - 1]] < steps[names[k]] for k in range(1, 400))
