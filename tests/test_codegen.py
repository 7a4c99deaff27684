"""Code generation: fused kernels build on the device and compute what the unfused program does.

Plans are written by hand (re-indexing maps as the planner would produce them), so the tests pin
code generation down independently of planning.  Every fused program is run against its unfused
original on the same random inputs (``verify_programs``); buffers whose intermediate stores were
eliminated are not compared (nothing reads them any more).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import islpy as isl
import pytest

import polyfuse
from polyfuse.codegen import CodegenError, FusedProgram, generate_fused
from polyfuse.fusion.plan import Fragment, FusedGroup, FusionPlan
from polyfuse.runtime.verify import verify_programs

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

G1 = "0 <= g0 < {ng} and 0 <= l0 < 64"
G2 = "0 <= g0 < 4 and 0 <= g1 < 4 and 0 <= l0 < 16 and 0 <= l1 < 16"


def load(example: str) -> polyfuse.Program:
    d = EXAMPLES / example
    return polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))


def make_plan(program: polyfuse.Program, groups: list[tuple[str, list[tuple]]]) -> FusionPlan:
    """groups: (orchestration, [(launch id, reindex, barrier_before?), ...])."""
    out = []
    for gid, (orch, frags) in enumerate(groups):
        fr = tuple(Fragment(f[0], program.op(f[0]).kernel, isl.Map(f[1]),
                            bool(f[2]) if len(f) > 2 else False) for f in frags)
        out.append(FusedGroup(gid, tuple(f[0] for f in frags), orch, fr))
    n = len(program.launches)
    return FusionPlan(program, None, tuple(out), n, len(out))


def check(program: polyfuse.Program, fused: FusedProgram, params: Any = None) -> None:
    v = verify_programs(program, fused.program, params=params, buffers=fused.compared_buffers)
    assert v.ok, v.summary() + "\n" + fused.source


def identity(lid: int, dims: str = "g0, l0", cond: str = G1.format(ng=16)) -> str:
    return f"{{ F[{dims}] -> L{lid}[{dims}] : {cond} }}"


# ----------------------------------------------------------------------------------------------


def test_elementwise_chain_vertical_private_intermediates() -> None:
    p = load("elementwise_chain")
    dom = "[n] -> {{ F[g0, l0] -> L{i}[g0, l0] : g0 >= 0 and 64g0 < n and 0 <= l0 < 64 }}"
    plan = make_plan(p, [("vertical", [(i, dom.format(i=i)) for i in (3, 4, 5, 6)])])
    fused = generate_fused(plan)
    assert fused.group_kernels == {0: "fused_g0"}
    assert "/* fragment 2: launch #4 add (host.c:" in fused.source
    assert "2.0f" in fused.source  # alpha constant-propagated
    opt = fused.optimizations
    assert opt["constants_propagated"] == 1
    assert opt["loads_privatized"] == 3 and opt["stores_eliminated"] == 3
    assert set(fused.dropped_buffers) == {"a", "b", "c"}
    assert "f2_a[i]" not in fused.source  # the load of the intermediate is gone
    [g] = fused.groups
    assert (g.group, g.kernel, g.local_size) == (0, "fused_g0", (64,))
    launches = fused.program.launches
    assert len(launches) == 1 and launches[0].kernel == "fused_g0"
    # the fused program is itself analysable and runs: 1000 is not a multiple of 64
    assert "fused_g0" in fused.program.kernels
    check(p, fused, {"n": 1000})


@pytest.mark.parametrize(("body", "expected"), [
    ("y[i] = x[i];", True),                                  # one store, no loop: a candidate
    ("for (int k = 0; k < 4; k++) y[k] = x[k];", False),     # in a loop body: a loop dimension
    ("y[i] = x[i]; y[i + 1] = x[i];", False),                # two stores of one root
    ("z[i] = x[i]; y[i] = z[i]; y[i + 1] = 0.0f;", True),    # z: one store, outside loops
    ("float t = (y[i] = x[i]);", True),                      # inside an expression: yes
    # a block: straight-line stores read in a loop body
    ("y[i] = x[i]; y[i + 1] = x[i]; for (int k = 0; k < 2; k++) z[k] = y[i + k];", True),
    # ... but not when a store of it is in a loop too
    ("y[i] = x[i]; for (int k = 0; k < 2; k++) y[k] = x[k]; "
     "for (int k = 0; k < 2; k++) z[k] = y[i + k];", False),
])
def test_privatize_reads_candidates_from_syntax(body: str, expected: bool) -> None:
    """A fused kernel is re-extracted for private intermediates only when its syntax shows a
    store that can be forwarded: the only write of its buffer, outside loop bodies; or a
    block (stores all outside loop bodies) that loop bodies read."""
    from polyfuse.c import preprocessor
    from polyfuse.codegen.optimize import _may_forward

    src = ("__kernel void k(__global const float *x, __global float *y, __global float *z) "
           f"{{ int i = get_global_id(0); {body} }}")
    fd = preprocessor.parse(src, "<test>", opencl=True).ext[-1]
    buffers = {"x": ("bx", 0, "float"), "y": ("by", 0, "float"), "z": ("bz", 0, "float")}
    assert _may_forward(fd.body, buffers) is expected


def test_gemm_bias_relu_transpose_reindexed() -> None:
    p = load("gemm_bias_relu_transpose")
    bias = f"{{ F[g0, g1, l0, l1] -> L5[16g1 + l1, 16g0 + l0] : {G2} }}"
    plan = make_plan(p, [("vertical", [(4, identity(4, "g0, g1, l0, l1", G2)), (5, bias),
                                       (6, identity(6, "g0, g1, l0, l1", G2))])])
    fused = generate_fused(plan)
    src = fused.source
    # 2-D -> 1-D re-indexing: bias_relu's global id from the GEMM's 2-D work-item
    assert "get_group_id(1)" in src and "__local float f1_As[16][16]" in src
    assert fused.groups[0].global_size == (64, 64)
    opt = fused.optimizations
    assert opt.get("stores_eliminated", 0) >= 1  # D (bias_relu -> transpose) stays private
    assert opt.get("barriers_removed", 0) == 0  # the GEMM's barriers order real dependences
    assert src.count("barrier(") == 2
    check(p, fused)


def test_qkv_vertical() -> None:
    p = load("qkv")
    comb = f"{{ F[g0, g1, l0, l1] -> L10[16g1 + l1, 16g0 + l0] : {G2} }}"
    frags = [(i, identity(i, "g0, g1, l0, l1", G2)) for i in (7, 8, 9)] + [(10, comb)]
    fused = generate_fused(make_plan(p, [("vertical", frags)]))
    assert fused.optimizations["stores_eliminated"] == 3  # Q, K, V never reach memory
    check(p, fused)


def test_qkv_horizontal() -> None:
    p = load("qkv")
    frags = []
    for k, i in enumerate((7, 8, 9)):
        lo = 4 * k
        frags.append((i, f"{{ F[g0, g1, l0, l1] -> L{i}[g0 - {lo}, g1, l0, l1] : "
                         f"{lo} <= g0 < {lo + 4} and 0 <= g1 < 4 and 0 <= l0 < 16 and "
                         "0 <= l1 < 16 }"))
    plan = make_plan(p, [("horizontal", frags), ("single", [(10, identity(10, cond=G1.format(
        ng=64)))])])
    fused = generate_fused(plan)
    assert fused.groups[0].global_size == (192, 64)
    assert "else" in fused.source and "get_group_id(0)) <= 3" in fused.source
    assert fused.optimizations.get("stores_eliminated", 0) == 0
    assert [lc.kernel for lc in fused.program.launches] == ["fused_g0", "fused_g1"]
    check(p, fused)


def test_shift_offset_and_guard() -> None:
    """shift's work-item j runs where rotate wrote b[j + 1]: an offset, a 17th group, guards."""
    p = load("shift_rotation")
    rot = "{ F[g0, l0] -> L2[g0, l0] : 0 <= g0 < 16 and 0 <= l0 < 64 }"
    shift = ("{ F[g0, l0] -> L3[g, l] : 64g + l = 64g0 + l0 - 1 and 0 <= l < 64 and "
             "1 <= 64g0 + l0 <= 1024 and 0 <= l0 < 64 }")
    plan = make_plan(p, [("single", [(1, identity(1))]), ("vertical", [(2, rot), (3, shift)]),
                         ("single", [(4, identity(4))])])
    fused = generate_fused(plan)
    assert fused.groups[1].global_size == (17 * 64,)
    assert "if (" in fused.source
    assert "b" in fused.dropped_buffers  # the shifted read is the same work-item's value
    check(p, fused)


BLOCK_EDGE = """
__kernel void produce(__global const float* x, __global float* t)
{
    int i = get_global_id(0);
    t[i] = x[i] * 3.0f;
}
__kernel void neighbour(__global const float* t, __global float* y)
{
    int g = get_group_id(0);
    int l = get_local_id(0);
    y[g * 64 + l] = t[g * 64 + l] + t[g * 64 + (l + 1) % 64];
}
"""


def block_program(tmp_path: Path) -> polyfuse.Program:
    from polyfuse.frontend.builder import ProgramBuilder

    cl = tmp_path / "block.cl"
    cl.write_text(BLOCK_EDGE)
    b = ProgramBuilder(str(cl), name="block")
    for name in ("x", "t", "y"):
        b.buffer(name, 4 * 512)
    b.write("x")
    b.launch("produce", (512,), (64,), {"x": "x", "t": "t"})
    b.launch("neighbour", (512,), (64,), {"t": "t", "y": "y"})
    b.read("y", blocking=True)
    return b.build()


BLOCK_LOOPS = """
__kernel void produce(__global const float *x, __global float *t)
{
    int i = get_global_id(0);
    float a0 = x[4 * i] * 2.0f;
    float a1 = x[4 * i + 1] * 2.0f;
    float a2 = x[4 * i + 2] * 2.0f;
    float a3 = x[4 * i + 3] * 2.0f;
    t[4 * i] = a0;
    t[4 * i + 1] = a1;
    t[4 * i + 2] = a2;
    t[4 * i + 3] = a3;
}

__kernel void consume(__global const float *t, __global float *y)
{
    int i = get_global_id(0);
    for (int b = 0; b < 4; b++) {
        y[4 * i + b] = t[READ] + 1.0f;
    }
}
"""


@pytest.mark.parametrize(("read", "forwarded"), [
    ("4 * i + 3 - b", True),             # the block reversed: each store has its own slot
    ("4 * i + b / 2", False),            # one element read at two iterations, two never read
    ("(4 * i + b + 1) % 256", False),    # shifted: the last read is the next work-item's
])
def test_block_forwarded_into_loops_only_when_exact(tmp_path: Path, read: str,
                                                    forwarded: bool) -> None:
    """A block stored in straight lines (a register-blocked product's) and read in a loop by
    the next fragment is forwarded through a private array when each iteration reads what
    one store of its own work-item wrote (isl proves it once per read statement), and the
    stores then dropped; otherwise the loads and the stores stay.  The fused program computes
    what the original does either way."""
    from polyfuse.frontend.builder import ProgramBuilder

    cl = tmp_path / "blocks.cl"
    cl.write_text(BLOCK_LOOPS.replace("READ", read))
    b = ProgramBuilder(str(cl), name="blocks")
    for name in ("x", "t", "y"):
        b.buffer(name, 4 * 256)
    b.write("x")
    b.launch("produce", (64,), (64,), {"x": "x", "t": "t"})
    b.launch("consume", (64,), (64,), {"t": "t", "y": "y"})
    b.read("y", blocking=True)
    p = b.build()
    ids = [lc.id for lc in p.launches]
    cond = G1.format(ng=1)
    plan = make_plan(p, [("vertical", [(ids[0], identity(ids[0], cond=cond)),
                                       (ids[1], identity(ids[1], cond=cond), True)])])
    fused = generate_fused(plan)
    assert ("t" in fused.dropped_buffers) is forwarded
    assert ("pf_b1[b]" in fused.source) is forwarded
    if forwarded:
        assert "pf_b1[3] = a0;" in fused.source  # t[4i] is read at b = 3
        assert fused.optimizations["stores_eliminated"] == 1
        assert "f1_t[" not in fused.source and "f2_t[" not in fused.source
    else:
        assert "pf_b" not in fused.source and "stores_eliminated" not in fused.optimizations
    check(p, fused)


def test_block_edge_barrier_kept(tmp_path: Path) -> None:
    p = block_program(tmp_path)
    ids = [lc.id for lc in p.launches]
    cond = G1.format(ng=8)
    plan = make_plan(p, [("vertical", [(ids[0], identity(ids[0], cond=cond)),
                                       (ids[1], identity(ids[1], cond=cond), True)])])
    fused = generate_fused(plan)
    assert "barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE)" in fused.source
    assert fused.optimizations.get("barriers_removed", 0) == 0
    check(p, fused)


def test_redundant_barrier_removed() -> None:
    """A barrier the plan puts on a thread-level edge orders nothing between work-items."""
    p = load("elementwise_chain")
    dom = "[n] -> {{ F[g0, l0] -> L{i}[g0, l0] : g0 >= 0 and 64g0 < n and 0 <= l0 < 64 }}"
    plan = make_plan(p, [("vertical", [(3, dom.format(i=3)), (4, dom.format(i=4), True)]),
                         ("vertical", [(5, dom.format(i=5)), (6, dom.format(i=6))])])
    fused = generate_fused(plan)
    assert fused.optimizations["barriers_removed"] == 1
    assert "barrier(" not in fused.source
    check(p, fused, {"n": 200})


def test_wrong_reindex_is_caught() -> None:
    """A mislabelled edge (bias_relu placed as if it were transposed) must fail verification."""
    p = load("gemm_bias_relu_transpose")
    wrong = f"{{ F[g0, g1, l0, l1] -> L5[16g0 + l0, 16g1 + l1] : {G2} }}"
    plan = make_plan(p, [("vertical", [(4, identity(4, "g0, g1, l0, l1", G2)), (5, wrong),
                                       (6, identity(6, "g0, g1, l0, l1", G2))])])
    fused = generate_fused(plan)
    v = verify_programs(p, fused.program, buffers=fused.compared_buffers)
    assert not v.ok


def test_bad_plans_refused() -> None:
    p = load("elementwise_chain")
    dom = "[n] -> { F[g0, l0] -> L3[g0, 0] : g0 >= 0 and 64g0 < n and 0 <= l0 < 64 }"
    rest = [("single", [(i, f"[n] -> {{ F[g0, l0] -> L{i}[g0, l0] : g0 >= 0 and 64g0 < n and "
                            "0 <= l0 < 64 }")]) for i in (4, 5, 6)]
    with pytest.raises(CodegenError, match="plan group 0.*not injective"):
        generate_fused(make_plan(p, [("single", [(3, dom)])] + rest))
    with pytest.raises(CodegenError, match="leaves launches"):
        generate_fused(make_plan(p, rest))


def _partial_gemm_plan() -> FusionPlan:
    """gemm_bias_relu_transpose with the tiled GEMM's work-item (0, 0) of every group left
    out: a guard on local ids around a fragment with barriers."""
    p = load("gemm_bias_relu_transpose")
    partial = ("{ F[g0, g1, l0, l1] -> L4[g0, g1, l0, l1] : 0 <= g0 < 4 and 0 <= g1 < 4 and "
               "0 <= l0 < 16 and 0 <= l1 < 16 and l0 + l1 > 0 }")
    return make_plan(p, [("single", [(4, partial)]),
                         ("single", [(5, identity(5, cond=G1.format(ng=64)))]),
                         ("single", [(6, identity(6, "g0, g1, l0, l1", G2))])])


def test_barrier_fragment_on_part_of_its_groups_keeps_barriers_unguarded() -> None:
    """The guard on local ids goes below the tiled GEMM's barriers (whose loop bounds are the
    same for every work-item), so no barrier is under work-item-dependent control flow."""
    from pycparser import c_ast

    from polyfuse.c import preprocessor, printer, syntax
    from polyfuse.codegen.barrier_guard import has_barrier_call

    fused = generate_fused(_partial_gemm_plan())
    ast = preprocessor.parse(fused.source, "fused.cl")
    for node in syntax.walk(ast):
        if isinstance(node, c_ast.If) and "get_local_id" in printer.opencl_source(node.cond):
            assert not has_barrier_call(node.iftrue) and not has_barrier_call(node.iffalse)


EARLY_RETURN = """
__kernel void first(__global const float* x, __global float* t, const int n)
{
    int i = get_global_id(0);
    if (i >= n)
        return;
    t[i] = x[i] + 1.0f;
}
__kernel void second(__global const float* t, __global float* y, const int n)
{
    int i = get_global_id(0);
    if (i >= n) return;
    y[i] = 2.0f * t[i];
}
"""


def test_early_return_rewritten(tmp_path: Path) -> None:
    from polyfuse.frontend.builder import ProgramBuilder

    cl = tmp_path / "ret.cl"
    cl.write_text(EARLY_RETURN)
    b = ProgramBuilder(str(cl), name="ret")
    for name in ("x", "t", "y"):
        b.buffer(name, 4 * 256)
    b.launch("first", (256,), (64,), {"x": "x", "t": "t", "n": 200})
    b.launch("second", (256,), (64,), {"t": "t", "y": "y", "n": 200})
    b.read("y", blocking=True)
    p = b.build()
    ids = [lc.id for lc in p.launches]
    cond = G1.format(ng=4)
    fused = generate_fused(make_plan(p, [("vertical", [(i, identity(i, cond=cond)) for i in ids])]))
    assert "return;" not in fused.source and "if (!(i >= " in fused.source
    check(p, fused)


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir()
                                           if (p / "host.c").exists()))
def test_planned_examples_verify(example: str) -> None:
    """Real plans (plan_fusion) of every bundled example: fused program == unfused program."""
    from polyfuse.fusion import plan_fusion

    p = load(example)
    fused = generate_fused(plan_fusion(polyfuse.build_uar(p)))
    assert [k.group for k in fused.groups] == [g.id for g in fused.plan.groups]
    assert all(k.kernel in fused.program.kernels for k in fused.groups)
    check(p, fused, {n: 300 for n in p.params})


def test_build_failure_names_source_line_and_plan_group(monkeypatch):
    """A generated kernel that does not compile is reported at its line in fused.cl, with the
    plan group that produced it (here a constant-propagated value is made undeclared)."""
    from pycparser import c_ast

    import polyfuse
    from polyfuse.codegen import fuse as fuse_mod
    from polyfuse.runtime.build import build_fused

    root = Path(__file__).resolve().parent.parent / "examples" / "stencil3"
    program = polyfuse.load_opencl(str(root / "kernels.cl"), host=str(root / "host.c"))
    plan = polyfuse.plan_fusion(polyfuse.build_uar(program))
    monkeypatch.setattr(fuse_mod, "literal", lambda value, ctype: c_ast.ID("pf_undeclared"))
    with pytest.raises(polyfuse.PolyfuseError) as info:
        build_fused(polyfuse.generate_fused(plan))
    err = info.value
    assert err.file == "fused.cl" and err.line and err.line > 1
    assert "plan group" in str(err) and "pf_undeclared" in str(err)


# ----------------------------------------------------------------------------------------------
# Code motion: independent, skeleton-identical fragments share barriers (SIRIUS §5.2)
# ----------------------------------------------------------------------------------------------

TILED = """
#define TILE 16
__kernel void tiled(__global const float* A, __global const float* B, __global float* C,
                    const int M, const int N, const int K)
{
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE];
    int col = get_global_id(0);
    int row = get_global_id(1);
    int lx = get_local_id(0);
    int ly = get_local_id(1);
    float acc = 0.0f;
    for (int t = 0; t < K / TILE; t++) {
        As[ly][lx] = A[row * K + t * TILE + lx];
        Bs[ly][lx] = B[(t * TILE + ly) * N + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; k++)
            acc += As[ly][k] * Bs[k][lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] = acc;
}
__kernel void tiled_acc(__global const float* A, __global const float* B, __global float* C,
                        const int M, const int N, const int K)
{
    __local float As[TILE][TILE];
    __local float Bs[TILE][TILE];
    int col = get_global_id(0);
    int row = get_global_id(1);
    int lx = get_local_id(0);
    int ly = get_local_id(1);
    float acc = 0.0f;
    for (int t = 0; t < K / TILE; t++) {
        As[ly][lx] = A[row * K + t * TILE + lx];
        Bs[ly][lx] = B[(t * TILE + ly) * N + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; k++)
            acc += As[ly][k] * Bs[k][lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] += acc;
}
__kernel void combine(__global const float* q, __global const float* k, __global const float* v,
                      __global float* out, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        out[i] = q[i] * k[i] + v[i];
}
"""


def tiled_program(tmp_path: Path, launches: list[tuple[str, str, str, str, int]],
                  combine: bool = False) -> polyfuse.Program:
    """launches: (kernel, A, B, C, K) with M = N = 64; buffers sized for K <= 64."""
    from polyfuse.frontend.builder import ProgramBuilder

    cl = tmp_path / "tiled.cl"
    cl.write_text(TILED)
    b = ProgramBuilder(str(cl), name="tiled")
    names = sorted({x for lc in launches for x in lc[1:4]} | ({"out"} if combine else set()))
    for name in names:
        b.buffer(name, 4 * 64 * 64)
        b.write(name)
    for kernel, a, w, c, k in launches:
        b.launch(kernel, (64, 64), (16, 16), {"A": a, "B": w, "C": c, "M": 64, "N": 64, "K": k})
    if combine:
        q, k_, v = (lc[3] for lc in launches)
        b.launch("combine", (4096,), (64,), {"q": q, "k": k_, "v": v, "out": "out", "n": 4096})
        b.read("out", blocking=True)  # Q, K, V are intermediates
        return b.build()
    for name in names:
        b.read(name, blocking=True)
    return b.build()


def barriers_in(source: str) -> int:
    import re

    return len(re.findall(r"\bbarrier\(", source))


def test_code_motion_qkv_tiled_shares_barriers(tmp_path: Path) -> None:
    """BERT QKV shape: three independent tiled projections (P3) and a combine, fused vertically:
    one tile loop with 2 barriers instead of three loops with 2 each; verifies."""
    p = tiled_program(tmp_path, [("tiled", "X", "Wq", "Q", 64), ("tiled", "X", "Wk", "K", 64),
                                 ("tiled", "X", "Wv", "V", 64)], combine=True)
    ids = [lc.id for lc in p.launches]
    comb = f"{{ F[g0, g1, l0, l1] -> L{ids[3]}[16g1 + l1, 16g0 + l0] : {G2} }}"
    frags = [(i, identity(i, "g0, g1, l0, l1", G2)) for i in ids[:3]] + [(ids[3], comb)]
    plan = make_plan(p, [("vertical", frags)])
    plain = generate_fused(plan, optimize=False)
    assert barriers_in(plain.source) == 6
    fused = generate_fused(plan)
    assert barriers_in(fused.source) == 2
    opt = fused.optimizations
    assert opt["barriers_shared"] == 4
    assert opt["details"]["barriers_shared"] == [
        f"group 0: fragments 1, 2, 3 (#{ids[0]} tiled, #{ids[1]} tiled, #{ids[2]} tiled) "
        "share 2 barriers (6 -> 2)"]
    src = fused.source
    assert src.count("for (int t = 0;") == 1  # one shared tile loop
    assert "f1_acc" in src and "f2_acc" in src and "f3_acc" in src  # privates coexist
    assert opt["stores_eliminated"] == 3  # Q, K, V still private after the motion
    check(p, fused)
    check(p, plain)


def test_code_motion_with_uar_edges(tmp_path: Path) -> None:
    """With the real UAR in the plan: still merged (no edge between the projections)."""
    from dataclasses import replace

    p = tiled_program(tmp_path, [("tiled", "X", "Wq", "Q", 64), ("tiled", "X", "Wk", "K", 64)])
    ids = [lc.id for lc in p.launches]
    plan = make_plan(p, [("vertical", [(i, identity(i, "g0, g1, l0, l1", G2)) for i in ids])])
    fused = generate_fused(replace(plan, uar=polyfuse.build_uar(p)))
    assert barriers_in(fused.source) == 2 and fused.optimizations["barriers_shared"] == 2
    check(p, fused)


def test_code_motion_refuses_dependent_fragments(tmp_path: Path) -> None:
    """The second fragment accumulates into the first one's output (a thread-level RAW/WAW):
    not independent, so the fragments keep their own loops and barriers."""
    from dataclasses import replace

    p = tiled_program(tmp_path, [("tiled", "X", "Wq", "Q", 64),
                                 ("tiled_acc", "X", "Wk", "Q", 64)])
    ids = [lc.id for lc in p.launches]
    plan = make_plan(p, [("vertical", [(i, identity(i, "g0, g1, l0, l1", G2)) for i in ids])])
    for pl in (plan, replace(plan, uar=polyfuse.build_uar(p))):
        fused = generate_fused(pl)
        assert barriers_in(fused.source) == 4
        assert "barriers_shared" not in fused.optimizations
        check(p, fused)


def test_code_motion_refuses_different_structure(tmp_path: Path) -> None:
    """Different tile-loop bounds (K = 64 and K = 32 after constant propagation): not merged."""
    p = tiled_program(tmp_path, [("tiled", "X", "Wq", "Q", 64), ("tiled", "X", "Wk", "K", 32)])
    ids = [lc.id for lc in p.launches]
    plan = make_plan(p, [("vertical", [(i, identity(i, "g0, g1, l0, l1", G2)) for i in ids])])
    fused = generate_fused(plan)
    assert barriers_in(fused.source) == 4
    assert "barriers_shared" not in fused.optimizations
    check(p, fused)


@pytest.mark.parametrize("middle_out,merged", [("O", True), ("K", False)])
def test_code_motion_crosses_only_independent_fragments(tmp_path: Path, middle_out: str,
                                                        merged: bool) -> None:
    """Q projection, an element-wise fragment, K projection: K moves up across the middle
    fragment to share Q's barriers only when the middle one does not touch K (here it writes
    O, or K: a WAW that pins the order)."""
    from polyfuse.frontend.builder import ProgramBuilder

    cl = tmp_path / "tiled.cl"
    cl.write_text(TILED)
    b = ProgramBuilder(str(cl), name="cross")
    for name in ("X", "Wq", "Wk", "Q", "K", "O"):
        b.buffer(name, 4 * 64 * 64)
        b.write(name)
    b.launch("tiled", (64, 64), (16, 16), {"A": "X", "B": "Wq", "C": "Q", "M": 64, "N": 64,
                                           "K": 64})
    b.launch("combine", (4096,), (64,), {"q": "X", "k": "Wq", "v": "Wk", "out": middle_out,
                                         "n": 4096})
    b.launch("tiled", (64, 64), (16, 16), {"A": "X", "B": "Wk", "C": "K", "M": 64, "N": 64,
                                           "K": 64})
    for name in ("Q", "K", "O"):
        b.read(name, blocking=True)
    p = b.build()
    ids = [lc.id for lc in p.launches]
    comb = f"{{ F[g0, g1, l0, l1] -> L{ids[1]}[16g1 + l1, 16g0 + l0] : {G2} }}"
    frags = [(ids[0], identity(ids[0], "g0, g1, l0, l1", G2)), (ids[1], comb),
             (ids[2], identity(ids[2], "g0, g1, l0, l1", G2))]
    fused = generate_fused(make_plan(p, [("vertical", frags)]))
    assert barriers_in(fused.source) == (2 if merged else 4)
    assert fused.optimizations.get("barriers_shared", 0) == (2 if merged else 0)
    if merged:
        # the merged body comes first, the crossed fragment after it
        assert fused.source.index("fragments 1, 3:") < fused.source.index("fragment 2:")
    check(p, fused)


def test_code_motion_bert_qkv_onnx() -> None:
    """The BERT QKV model: its three tiled MatMuls share one tile loop (6 -> 2 barriers) and the
    fused program matches onnxruntime and the unfused program."""
    from polyfuse.apps.onnx_run import fuse_onnx

    r = fuse_onnx(EXAMPLES / "models" / "bert_qkv.onnx", verify=True)
    assert barriers_in(r.fused.source) == 2
    assert r.fused.optimizations["barriers_shared"] == 4
    assert r.verified["ok"], r.verified
    assert r.verified["references"]["onnxruntime"]["ok"]


def test_unknown_scalars_of_the_same_name_stay_apart() -> None:
    """``gain(x, c, n)`` then ``offset(x, c, n)``: each ``c`` is a float the host reads at run
    time, so neither is known; one launch's unknown is not the other's, and the fused kernel
    takes both (a shared ``pf_c`` applied one coefficient twice)."""
    d = Path(__file__).resolve().parent / "fused_host_programs" / "calibrate"
    p = polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))
    gain, offset = p.launches
    plan = make_plan(p, [("vertical", [(gain.id, identity(gain.id)),
                                       (offset.id, identity(offset.id))])])
    fused = generate_fused(plan)
    floats = [q.name for q in fused.program.kernels["fused_g0"].params if "float" in q.type
              and not q.pointer]
    assert len(floats) == 2, fused.source
    check(p, fused, {"n_gain": 1000, "n_offset": 600})


def test_helpers_asking_for_their_work_item_are_copied_per_fragment() -> None:
    """A kernel whose helper calls ``get_global_id`` (AMD's ConcurrentKernel): alone in its
    group or fused after another launch, the helper answers for the launch that calls it."""
    d = Path(__file__).resolve().parent / "fused_host_programs" / "helper_index"
    p = polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))
    smooth, mirror, square = p.launches
    plan = make_plan(p, [("single", [(smooth.id, identity(smooth.id))]),
                         ("vertical", [(mirror.id, identity(mirror.id)),
                                       (square.id, identity(square.id))])])
    fused = generate_fused(plan)
    assert "pf_g0_f1_load_mine(" in fused.source and "pf_g1_f2_store_mine(" in fused.source
    # alone on its own NDRange, smooth's copies keep their calls; fused, square's are re-indexed
    assert fused.source.count("get_global_id") == 2, fused.source
    check(p, fused)
