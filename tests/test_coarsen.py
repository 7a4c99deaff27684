"""Thread and block coarsening: legality, exact rewriting, epilogues, verification, CLI report.

Every coarsened variant is run against the original on random inputs and compared on every
buffer (``polyfuse.runtime.verify``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import polyfuse
from polyfuse.codegen.coarsen import (
    CoarsenError,
    Factors,
    coarsen,
    launch_geometry,
    spread_factors,
)
from polyfuse.frontend.builder import ProgramBuilder, local
from polyfuse.runtime.verify import verify_programs

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "coarsening"


def _verify(prog, cp) -> None:
    v = verify_programs(prog, cp.program, label="original")
    assert v.ok, (v, cp.source)


# ----------------------------------------------------------------------------------------------
# Legality: a barrier under group-id dependent control
# ----------------------------------------------------------------------------------------------

GROUP_BRANCH = """
__kernel void k(__global const float* x, __global float* y)
{
    __local float tile[16];
    int l = get_local_id(0);
    int g = get_group_id(0);
    tile[l] = x[get_global_id(0)];
    if (g % 2 == 0) {
        barrier(CLK_LOCAL_MEM_FENCE);
        y[get_global_id(0)] = tile[15 - l];
    } else {
        barrier(CLK_LOCAL_MEM_FENCE);
        y[get_global_id(0)] = tile[(l + 1) % 16] * 2.0f;
    }
}
"""


def _one_launch(src: str, gs, ls, args, name: str = "k"):
    b = ProgramBuilder(src)
    n = 1
    for g in (gs if isinstance(gs, tuple) else (gs,)):
        n *= g
    for a in args:
        if isinstance(a, str):
            b.buffer(a, 4 * n)
    b.launch(name, gs, ls, args)
    return b.build()


def test_barrier_under_group_branch_refused_for_block_accepted_for_thread():
    prog = _one_launch(GROUP_BRANCH, (128,), (16,), ["x", "y"])
    with pytest.raises(CoarsenError, match="barrier sits under control flow"):
        coarsen(prog, Factors.of((1,), (2,)))
    cp = coarsen(prog, Factors.of((4,), (1,)))
    assert cp.launches[0].launches[0][2][0] == 4  # local size 16 / 4
    _verify(prog, cp)
    # the barrier stays grouped: one per branch for all four copies
    assert len(re.findall(r"barrier\(", cp.source)) == 2


def test_non_dividing_block_factor_has_an_epilogue_and_verifies():
    prog = _one_launch(GROUP_BRANCH.replace("if (g % 2 == 0)", "if (1)"), (176,), (16,),
                       ["x", "y"])  # 11 groups
    cp = coarsen(prog, Factors.of((2,), (3,)))
    geo = cp.launches[0].to_dict()["launches"]
    assert [x["role"] for x in geo] == ["main", "epilogue"]
    assert geo[0]["global_size"] == [3 * 8] and geo[0]["local_size"] == [8]
    assert geo[1]["group_base"] == [9] and geo[1]["global_size"] == [2 * 8]
    assert len(cp.program.launches) == 2
    _verify(prog, cp)


REDUCE_2D = """
__kernel void r(__global const float* in, __global float* out, __local float* scratch)
{
    int lx = get_local_id(0);
    int ly = get_local_id(1);
    int lsz = get_local_size(0) * get_local_size(1);
    int l = ly * get_local_size(0) + lx;
    int gx = get_global_id(0);
    int gy = get_global_id(1);
    scratch[l] = in[gy * get_global_size(0) + gx];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = lsz / 2; s > 0; s >>= 1) {
        if (l < s)
            scratch[l] += scratch[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        out[get_group_id(1) * get_num_groups(0) + get_group_id(0)] = scratch[0];
}
"""


@pytest.mark.parametrize("thread, block", [((2, 1), (1, 1)), ((1, 2), (3, 1)), ((2, 2), (2, 3)),
                                           ((4, 1), (1, 1)), ((1, 1), (5, 2))])
def test_2d_reduction_with_local_argument(thread, block):
    b = ProgramBuilder(REDUCE_2D)
    b.buffer("in", 4 * 40 * 24)
    b.buffer("out", 4 * 5 * 3)
    b.launch("r", (40, 24), (8, 8), {"in": "in", "out": "out", "scratch": local(4 * 64)})
    prog = b.build()
    cp = coarsen(prog, Factors.of(thread, block))
    _verify(prog, cp)
    if block[0] * block[1] > 1:
        assert cp.program.launches[0].arg(2).local_bytes == 4 * 64 * block[0] * block[1]


def test_counted_loops_are_jammed_and_uniform_statements_shared():
    src = """
    __kernel void mv(__global const float* A, __global const float* x, __global float* y, int n)
    {
        int i = get_global_id(0);
        float c = 0.5f;
        if (i < n) {
            float acc = 0.0f;
            for (int j = 0; j < n; j++)
                acc += A[i * n + j] * x[j];
            y[i] = c * acc;
        }
    }
    """
    b = ProgramBuilder(src)
    b.buffer("A", 4 * 64 * 64)
    b.buffer("x", 4 * 64)
    b.buffer("y", 4 * 64)
    b.launch("mv", 64, 16, {"A": "A", "x": "x", "y": "y", "n": 60})
    prog = b.build()
    cp = coarsen(prog, Factors.of((2,), (2,)))
    text = cp.source
    # one declaration of the uniform constant, and the fast path has a single jammed j loop
    assert text.count("float c = 0.5f;") == 1
    fast = text.split("else")[0]
    assert fast.count("for (int j = 0;") == 1
    assert fast.count("acc__pf3 += ") == 1
    _verify(prog, cp)


def test_refusals_have_clear_reasons():
    helper = """
    int gid(void) { return get_global_id(0); }
    __kernel void h(__global float* y) { y[gid()] = 1.0f; }
    """
    prog = _one_launch(helper, (64,), (16,), ["y"], "h")
    with pytest.raises(CoarsenError, match="helper gid"):
        coarsen(prog, Factors.of((2,), (1,)))
    nolocal = _one_launch("__kernel void e(__global float* y) { y[get_global_id(0)] = 1.0f; }",
                          (64,), None, ["y"], "e")
    with pytest.raises(CoarsenError, match="no local size"):
        coarsen(nolocal, Factors.of((2,), (1,)))
    prog = _one_launch(GROUP_BRANCH, (128,), (16,), ["x", "y"])
    with pytest.raises(CoarsenError, match="does not divide"):
        coarsen(prog, Factors.of((3,), (1,)))
    with pytest.raises(CoarsenError, match="exceeds"):
        coarsen(prog, Factors.of((1,), (9,)))
    returns = """
    __kernel void r(__global float* y, int n) {
        for (int i = 0; i < n; i++) { if (y[i] < 0) return; y[i] += 1.0f; }
    }
    """
    prog = _one_launch(returns, (64,), (16,), ["y", 8], "r")
    with pytest.raises(CoarsenError, match="return inside a loop"):
        coarsen(prog, Factors.of((2,), (1,)))


def test_spread_and_python_api_on_a_kernel():
    assert spread_factors(4, (32, 8)) == (4, 1, 1) or spread_factors(4, (32, 8)) == (2, 2, 1)
    assert spread_factors(4, (16, 16)) == (2, 2, 1)
    assert spread_factors(2, (1, 8)) == (1, 2, 1)
    k = polyfuse.parse_kernels(
        "__kernel void s(__global float* y) { y[get_global_id(0)] *= 2.0f; }")["s"]
    b = ProgramBuilder({"s": k})
    b.buffer("y", 4 * 256)
    b.launch("s", 256, 32, ["y"])
    prog = b.build()
    cp = coarsen(prog, total=4)
    assert cp.launches[0].factors.thread == (4, 1, 1)
    assert prog.launches[0].kernel == "s"  # a new record: the input is unchanged
    _verify(prog, cp)


# ----------------------------------------------------------------------------------------------
# Hypothesis-generated kernels
# ----------------------------------------------------------------------------------------------


@st.composite
def generated(draw):
    dims = draw(st.sampled_from([1, 2]))
    ls = tuple(draw(st.sampled_from([4, 6, 8, 12])) for _ in range(dims)) if dims == 2 else \
        (draw(st.sampled_from([8, 12, 16, 24])),)
    groups = tuple(draw(st.integers(1, 5)) for _ in range(dims))
    barrier = draw(st.booleans())
    loop = draw(st.sampled_from(["none", "uniform", "varying"]))
    group_branch = draw(st.booleans())
    extra = draw(st.sampled_from(["none", "private_array", "varying_break", "uniform_break",
                                  "while"]))
    early_return = draw(st.booleans()) and not barrier
    lsz = 1
    for x in ls:
        lsz *= x
    if dims == 1:
        head = "int l = get_local_id(0); int g = get_group_id(0); int gid = get_global_id(0);\n"
        head += "int n = get_global_size(0); int L = get_local_size(0);\n"
    else:
        head = ("int l = get_local_id(1) * get_local_size(0) + get_local_id(0);\n"
                "int g = get_group_id(1) * get_num_groups(0) + get_group_id(0);\n"
                "int gid = get_global_id(1) * get_global_size(0) + get_global_id(0);\n"
                "int n = get_global_size(0) * get_global_size(1);\n"
                "int L = get_local_size(0) * get_local_size(1);\n")
    body = ["float v = x[gid] + (float)l * 0.25f;"]
    if early_return:
        body.insert(0, "if (gid >= n - 3) return;")
    if loop == "uniform":
        body.append("for (int k = 0; k < 5; k++) v += x[(gid + k) % n] * 0.5f;")
    elif loop == "varying":
        body.append("for (int k = 0; k < l % 3; k++) v -= x[(gid + 2 * k) % n];")
    if group_branch:
        body.append("if (g % 2 == 1) v *= 2.0f;")
    if extra == "private_array":
        body.append("float acc[3]; for (int q = 0; q < 3; q++) acc[q] = x[(gid + q) % n];")
        body.append("v += acc[l % 3];")
    elif extra == "varying_break":
        body.append("for (int k = 0; k < 6; k++) { if (x[(gid + k) % n] > 0.5f) break; "
                    "v += 0.125f; }")
    elif extra == "uniform_break":
        body.append("for (int k = 0; k < 6; k++) { if (k == 3) break; v += x[(gid + k) % n]; }")
    elif extra == "while":
        body.append("int w = 0; while (w < 4) { v = v * 0.5f + x[(gid + w) % n]; w++; }")
    if barrier:
        body.append("tile[l] = v;")
        body.append("barrier(CLK_LOCAL_MEM_FENCE);")
        body.append("v += tile[(l + 1) % L] - tile[L - 1 - l];")
    body.append("y[gid] = v;")
    body.append("if (l == 0) z[g] = v + (float)g;")
    src = (f"__kernel void gen(__global const float* x, __global float* y, __global float* z)\n"
           f"{{\n__local float tile[{lsz}];\n{head}" + "\n".join(body) + "\n}\n")
    t = tuple(draw(st.sampled_from([d for d in (1, 2, 3, 4, 6) if ls[i] % d == 0]))
              for i in range(dims))
    b = tuple(draw(st.integers(1, groups[i])) for i in range(dims))
    return src, ls, groups, t, b


_TWO_EPILOGUES = (  # remainders in both dimensions: the epilogues run part of the groups
    "__kernel void gen(__global const float* x, __global float* y, __global float* z)\n{\n"
    "int l = get_local_id(1) * get_local_size(0) + get_local_id(0);\n"
    "int g = get_group_id(1) * get_num_groups(0) + get_group_id(0);\n"
    "int gid = get_global_id(1) * get_global_size(0) + get_global_id(0);\n"
    "float v = x[gid] + (float)l * 0.25f;\ny[gid] = v;\n"
    "if (l == 0) z[g] = v + (float)g;\n}\n")


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(generated())
@example((_TWO_EPILOGUES, (4, 4), (4, 3), (1, 1), (3, 2)))
def test_generated_kernels_verify(case):
    src, ls, groups, t, b = case
    gs = tuple(x * g for x, g in zip(ls, groups))
    n = 1
    for x in gs:
        n *= x
    ng = 1
    for g in groups:
        ng *= g
    pb = ProgramBuilder(src)
    pb.buffer("x", 4 * n)
    pb.buffer("y", 4 * n)
    pb.buffer("z", 4 * ng)
    pb.launch("gen", gs, ls, ["x", "y", "z"])
    prog = pb.build()
    cp = coarsen(prog, Factors.of(t, b))  # every generated kernel is legal for every factor
    _verify(prog, cp)
    rem = [groups[d] % b[d] for d in range(len(b)) if b[d] > 1]
    assert len(cp.program.launches) == 1 + sum(1 for r in rem if r)


# ----------------------------------------------------------------------------------------------
# The benchmark programs and the CLI
# ----------------------------------------------------------------------------------------------

BENCH = sorted(p.name for p in EXAMPLES.iterdir() if (p / "host.c").exists())


@pytest.mark.parametrize("name", BENCH)
def test_benchmark_programs_coarsen_and_verify(name):
    prog = polyfuse.load_opencl(EXAMPLES / name / "kernels.cl", host=EXAMPLES / name / "host.c")
    per = {}
    for la in prog.launches:
        geom = launch_geometry(la, {})
        wd = geom.work_dim
        # thread 2 and a block factor 3 (an epilogue unless it divides), capped by the groups
        per[la.id] = Factors.of((2,) + (1,) * (wd - 1),
                                (min(3, geom.groups[0]),) + (2 if wd > 1 else 1,) * (wd - 1))
    cp = coarsen(prog, per)
    assert {x.launch for x in cp.launches} == set(per)
    _verify(prog, cp)


def test_cli_coarsen_writes_report(tmp_path):
    d = EXAMPLES / "reduction"
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "polyfuse", "coarsen", str(d / "kernels.cl"),
                        "--host", str(d / "host.c"), "--out", str(out), "--factors", "t2,b3",
                        "--verify"], capture_output=True, text=True, cwd=ROOT,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    rep = json.loads((out / "report.json").read_text())
    la = rep["launches"][0]
    assert la["kernel"] == "reduce"
    assert {v["status"] for v in la["variants"]} <= {"timed", "pruned", "illegal", "failed"}
    v = next(v for v in la["variants"] if v["thread_factors"] == [2])
    assert v["block_factors"] == [3] and v["verified"] is True
    assert la["chosen"]["thread_factors"] == [2] and la["chosen"]["block_factors"] == [3]
    assert [x["role"] for x in la["chosen"]["launches"]] == ["main", "epilogue"]
    assert rep["verified"]["ok"] is True
    assert "__kernel void reduce__t2_b3_L1" in (out / "coarsened.cl").read_text()
    assert (out / "report.md").read_text().startswith("# Coarsening")


# ----------------------------------------------------------------------------------------------
# The tuner: statuses, pruning, the original as a choice, the cache
# ----------------------------------------------------------------------------------------------


def test_tuner_rows_pruning_illegal_and_cache(tmp_path):
    import dataclasses

    from polyfuse.passes.coarsening_tuning import tune_coarsening, tune_launch
    from polyfuse.runtime.device import DeviceLimits, get_context

    prog = _one_launch(GROUP_BRANCH, (128,), (16,), ["x", "y"])
    cands = [Factors.of((2,), (1,)), Factors.of((1,), (2,)), Factors.of((1,), (8,))]
    rep = tune_coarsening(prog, factors=cands, repeat=2, rounds=1, cache_dir=tmp_path)
    lt = rep.launches[0]
    status = {v.factors.label(1): v for v in lt.variants}
    assert status["t1_b1"].status == "timed"  # the original is always a candidate
    assert status["t2_b1"].status == "timed" and status["t2_b1"].verified is True
    assert status["t1_b2"].status == "illegal" and "barrier" in status["t1_b2"].reason
    assert lt.chosen in (Factors(), Factors.of((2,), (1,)))  # never an illegal variant
    assert lt.original_time_s and lt.chosen_time_s
    d = rep.to_dict()["launches"][0]
    assert {"kernel", "variants", "chosen", "original_time_s", "speedup"} <= set(d)
    again = tune_coarsening(prog, factors=cands, repeat=2, rounds=1, cache_dir=tmp_path)
    assert again.launches[0].cached and again.launches[0].chosen == lt.chosen

    ctx, queue = get_context()
    tiny = dataclasses.replace(DeviceLimits.from_device(queue.device), local_mem_size=32)
    small = tune_launch(prog, prog.launches[0], params={}, candidates=[Factors.of((2,), (1,))],
                        tune=False, ctx=ctx, queue=queue, limits=tiny)
    row = next(v for v in small.variants if not v.factors.identity)
    assert row.status == "pruned" and "__local" in row.reason
    assert small.chosen == Factors()


def test_untuned_run_keeps_the_original():
    from polyfuse.passes.coarsening_tuning import tune_coarsening

    prog = _one_launch(GROUP_BRANCH, (128,), (16,), ["x", "y"])
    rep = tune_coarsening(prog, tune=False, use_cache=False)
    lt = rep.launches[0]
    assert lt.chosen == Factors() and lt.original_time_s is None
    assert all(v.status in ("timed", "illegal") for v in lt.variants)
    assert any(v.status == "illegal" for v in lt.variants)  # every block factor here
    assert rep.result.program.launches[0].kernel == "k"


def test_cli_refused_variant_is_one_line_error(tmp_path):
    d = EXAMPLES / "reduction"
    r = subprocess.run([sys.executable, "-m", "polyfuse", "coarsen", str(d / "kernels.cl"),
                        "--host", str(d / "host.c"), "--out", str(tmp_path / "o"),
                        "--factors", "t3", "-q"], capture_output=True, text=True,
                       cwd=ROOT, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "thread factor 3 does not divide" in lines[0], r.stderr


@pytest.mark.parametrize("name", BENCH)
def test_benchmark_hosts_are_real_c(name):
    import shutil

    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    r = subprocess.run([cc, "-fsyntax-only", "-Wall", "-Werror", "-I",
                        str(ROOT / "polyfuse" / "include"), str(EXAMPLES / name / "host.c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
