"""Whole-program execution on the OpenCL device, verification and timing.

Final buffers are checked against an independent computation: the brute-force interpreter
(:func:`polyfuse.oracle.simulate`, given the same initial contents) or numpy.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from polyfuse.core.program import PolyfuseError, Program, UnsupportedError
from polyfuse.frontend.builder import ProgramBuilder
from polyfuse.frontend.host import load_opencl
from polyfuse.frontend.opencl import parse_kernels
from polyfuse.oracle import simulate
from polyfuse.runtime import (
    compare_runs,
    program_source,
    run_program,
    time_program,
    verify_programs,
)
from polyfuse.runtime.device import build_program, get_context
from polyfuse.runtime.execute import RunResult, c_dtype

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def cq() -> tuple:
    try:
        return get_context()
    except PolyfuseError as err:  # pragma: no cover - no OpenCL device
        pytest.skip(str(err))


def _example(name: str) -> Program:
    return load_opencl(str(EXAMPLES / name / "kernels.cl"), host=str(EXAMPLES / name / "host.c"))


def _run(program: Program, cq: tuple, **kw) -> RunResult:
    ctx, queue = cq
    return run_program(program, ctx=ctx, queue=queue, **kw)


# ------------------------------------------------------------------------------ examples


@pytest.mark.parametrize("name, params", [
    ("elementwise_chain", {"n": 1000}),
    ("reduction", None),
    ("stencil3", None),
    ("runtime_offset", {"m": 5, "n": 1000}),
    ("lstm_cell", None),
    ("group_neighbor", None),
])
def test_examples_match_interpreter(cq: tuple, name: str, params: dict) -> None:
    program = _example(name)
    res = _run(program, cq, params=params, seed=3)
    sim = simulate(program, params, res.initial, 0)
    assert set(res.buffers) == set(sim.buffers)
    for buf, got in res.buffers.items():
        want = sim.array(buf)
        assert got.dtype == want.dtype, buf
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"{name}: {buf}")
    # something was actually computed, and the run is reproducible
    assert any(not np.array_equal(res.buffers[b], res.initial[b]) for b in res.buffers)
    again = _run(program, cq, params=params, seed=3)
    assert all(np.array_equal(again.initial[b], res.initial[b]) for b in res.buffers)
    assert res.launches == again.launches > 0


def test_lstm_unrolls_host_loop(cq: tuple) -> None:
    program = _example("lstm_cell")
    res = _run(program, cq, profile=True)
    assert res.launches == 16  # 2 launches x 8 time steps
    assert [lid for lid, _ in res.kernel_times] == [8, 9] * 8
    assert all(t >= 0 for _, t in res.kernel_times)
    (op_id, it, data), = res.reads
    assert op_id == 11 and it == () and np.array_equal(data, res.buffers["hs"])


def test_gemm_bias_relu_transpose_against_numpy(cq: tuple) -> None:
    res = _run(_example("gemm_bias_relu_transpose"), cq, seed=1)
    a = res.initial["A"].reshape(64, 64).astype(np.float64)
    b = res.initial["B"].reshape(64, 64).astype(np.float64)
    d = np.maximum(a @ b + res.initial["bias"], 0.0)
    np.testing.assert_allclose(res.buffers["C"].reshape(64, 64), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(res.buffers["D"].reshape(64, 64), d, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(res.buffers["E"].reshape(64, 64), d.T, rtol=1e-4, atol=1e-4)
    assert res.initial["A"].min() < 0 < res.initial["A"].max()  # floats in [-1, 1)


def test_program_source_builds(cq: tuple) -> None:
    program = _example("gemm_bias_relu_transpose")
    src = program_source(program)
    for k in program.kernels:
        assert f"void {k}(" in src
    build_program(cq[0], src, ["-cl-std=CL1.2"])


# ------------------------------------------------------------------------------ helpers, files

HELPER_FILE = """
typedef struct { float lo; float hi; } range_t;
__constant float WEIGHTS[4] = {1.0f, 2.0f, 3.0f, 4.0f};

float clamp_to(float v, range_t r) { return v < r.lo ? r.lo : (v > r.hi ? r.hi : v); }
float weigh(int i, float v) { return WEIGHTS[i % 4] * v; }

__kernel void weighted(__global const float *x, __global float *y, const int n)
{
    int i = get_global_id(0);
    range_t r = {-0.5f, 0.5f};
    if (i < n)
        y[i] = weigh(i, clamp_to(x[i], r));
}
"""


def _helper_program(kernels: dict) -> Program:
    b = ProgramBuilder(kernels, name="helpers")
    b.buffer("x", 4 * 100)
    b.buffer("y", 4 * 100)
    b.launch("weighted", (100,), None, {"x": "x", "y": "y", "n": 100})
    return b.build()


def _check_weighted(res: RunResult) -> None:
    x = res.initial["x"]
    want = np.array([1, 2, 3, 4] * 25, np.float32) * np.clip(x, -0.5, 0.5)
    np.testing.assert_allclose(res.buffers["y"], want, rtol=1e-6)


def test_helpers_typedefs_and_constants_from_a_file(cq: tuple, tmp_path: Path) -> None:
    path = tmp_path / "k.cl"
    path.write_text(HELPER_FILE)
    program = _helper_program(parse_kernels(str(path)))
    src = program_source(program)
    assert "range_t" in src and "WEIGHTS" in src and "float clamp_to(" in src
    _check_weighted(_run(program, cq))


HELPER_STRING = """
float weigh(int i, float v) { return (float)(i % 4 + 1) * v; }
float clamp_half(float v) { return clamp(v, -0.5f, 0.5f); }

__kernel void weighted(__global const float *x, __global float *y, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        y[i] = weigh(i, clamp_half(x[i]));
}
"""


def test_helpers_of_kernels_built_from_strings(cq: tuple) -> None:
    program = _helper_program(parse_kernels(HELPER_STRING))
    src = program_source(program)
    assert "float weigh(int i, float v)" in src and "clamp_half" in src
    _check_weighted(_run(program, cq))


def test_build_failure_names_program_and_kernel(cq: tuple) -> None:
    kernels = parse_kernels("__kernel void broken(__global float *x)\n"
                            "{ x[get_global_id(0)] = undefined_function(1.0f); }\n")
    b = ProgramBuilder(kernels, name="bad")
    b.buffer("x", 64)
    b.launch("broken", (16,), None, {"x": "x"})
    with pytest.raises(PolyfuseError, match=r"(?s)'bad' failed in broken.*undefined_function"):
        _run(b.build(), cq)


# ------------------------------------------------------------------------------ verification

WRONG_ADD = """
__kernel void add(__global const float* a, __global const float* y, __global float* b, const int n)
{
    int i = get_global_id(0);
    if (i < n)
        b[i] = a[i] - y[i];
}
"""


def test_verify_catches_a_wrong_program(cq: tuple) -> None:
    program = _example("elementwise_chain")
    same = verify_programs(program, program, params={"n": 1000}, seed=7, ctx=cq[0], queue=cq[1])
    assert same.ok and same.max_abs_err == 0.0 and same.reference == "unfused"
    wrong_kernels = {**program.kernels, "add": parse_kernels(WRONG_ADD)["add"]}
    wrong = dataclasses.replace(program, kernels=wrong_kernels)
    ver = verify_programs(program, wrong, params={"n": 1000}, seed=7)
    assert not ver.ok
    bad = {b.name for b in ver.failed}
    assert bad == {"b", "c", "out"}  # everything downstream of add; inputs untouched
    assert ver.max_abs_err > 0.1
    d = ver.to_dict()
    assert {"ok", "reference", "max_abs_err", "max_rel_err", "buffers",
            "tolerance_reason"} <= set(d) and d["ok"] is False
    assert "fma" in d["tolerance_reason"] and "float32" in d["tolerance_reason"]
    assert "MISMATCH" in ver.summary()


def _result(**buffers: np.ndarray) -> RunResult:
    return RunResult(buffers=dict(buffers))


def test_compare_integers_exactly_and_floats_with_tolerance() -> None:
    ints = np.arange(10, dtype=np.int32)
    off = ints.copy()
    off[3] += 1
    ver = compare_runs(_result(i=ints), _result(i=off))
    assert not ver.ok and ver.buffers[0].first_mismatch == 3
    assert "exactly" in ver.tolerance_reason
    f = np.linspace(-1, 1, 10).astype(np.float32)
    ok = compare_runs(_result(f=f), _result(f=f * np.float32(1 + 1e-6)), label="onnxruntime")
    assert ok.ok and ok.reference == "onnxruntime" and 0 < ok.max_rel_err < 1e-5
    assert not compare_runs(_result(f=f), _result(f=f + np.float32(1e-3))).ok


def test_nan_positions_must_match() -> None:
    a = np.array([1.0, np.nan, 3.0], np.float32)
    assert compare_runs(_result(x=a), _result(x=a.copy())).ok
    b = np.array([1.0, 2.0, np.nan], np.float32)
    ver = compare_runs(_result(x=a), _result(x=b))
    assert not ver.ok and ver.buffers[0].mismatches == 2
    assert np.isfinite(ver.max_abs_err)


def test_compare_selected_and_missing_buffers() -> None:
    x = np.ones(4, np.float32)
    ver = compare_runs(_result(x=x, tmp=x), _result(x=x))
    assert ver.ok and ver.skipped == ("tmp",)
    with pytest.raises(PolyfuseError, match="tmp"):
        compare_runs(_result(x=x, tmp=x), _result(x=x), buffers=["tmp"])


# ------------------------------------------------------------------------------ dtypes, indices

GATHER = """
__kernel void gather(__global const int *idx, __global const float *data,
                     __global float *out, __global uint *count, const int n)
{
    int i = get_global_id(0);
    if (i < n) {
        out[i] = data[idx[i]];
        count[i] = (uint)idx[i] * 2u;
    }
}
"""


def test_integer_buffers_are_valid_indices(cq: tuple) -> None:
    b = ProgramBuilder(parse_kernels(GATHER), name="gather")
    b.buffer("idx", 4 * 300, dtype=None)
    b.buffer("data", 4 * 50, dtype=None)
    b.buffer("out", 4 * 300, dtype=None)
    b.buffer("count", 4 * 300, dtype=None)
    b.launch("gather", (300,), None, {"idx": "idx", "data": "data", "out": "out",
                                      "count": "count", "n": 300})
    res = _run(b.build(), cq, seed=2)
    idx = res.initial["idx"]
    assert idx.dtype == np.int32 and res.buffers["count"].dtype == np.uint32
    assert idx.min() >= 0 and idx.max() < 50  # smallest buffer has 50 elements
    np.testing.assert_array_equal(res.buffers["out"], res.initial["data"][idx])
    np.testing.assert_array_equal(res.buffers["count"], idx.astype(np.uint32) * 2)


def test_c_dtype_names() -> None:
    assert c_dtype("float4") == np.float32 and c_dtype("double") == np.float64
    assert c_dtype("char") == np.int8 and c_dtype("unsigned int") == np.uint32
    assert c_dtype("uchar16") == np.uint8 and c_dtype("float32") == np.float32


# ------------------------------------------------------------------------------ host ops

STEP = """
__kernel void inc(__global float *x, const float by) { x[get_global_id(0)] += by; }
__kernel void fill_i(__global float *x, const int t) { x[get_global_id(0)] = (float)t; }
"""


def test_sub_buffers_are_views_of_the_root(cq: tuple) -> None:
    b = ProgramBuilder(parse_kernels(STEP), name="subs")
    b.buffer("root", 4 * 512)
    b.sub_buffer("hi", "root", 4 * 256, 4 * 128)
    b.launch("fill_i", (128,), None, {"x": "hi", "t": 7})
    res = _run(b.build(), cq)
    out, init = res.buffers["root"], res.initial["root"]
    assert set(res.buffers) == {"root"}
    assert np.all(out[256:384] == 7)
    np.testing.assert_array_equal(out[:256], init[:256])
    np.testing.assert_array_equal(out[384:], init[384:])


def test_misaligned_sub_buffer_is_refused(cq: tuple) -> None:
    align = int(cq[1].device.mem_base_addr_align) // 8
    if align <= 4:  # pragma: no cover - every offset is aligned on this device
        pytest.skip("device accepts 4-byte aligned sub-buffers")
    b = ProgramBuilder(parse_kernels(STEP), name="subs")
    b.buffer("root", 4 * 512)
    b.sub_buffer("odd", "root", 4, 4 * 128)
    b.launch("fill_i", (128,), None, {"x": "odd", "t": 7})
    with pytest.raises(PolyfuseError, match="MEM_BASE_ADDR_ALIGN"):
        _run(b.build(), cq)


def test_host_loop_write_read_copy(cq: tuple) -> None:
    b = ProgramBuilder(parse_kernels(STEP), name="ops")
    n = b.param("n")
    b.buffer("x", 4 * n)
    b.buffer("y", 4 * n)
    with b.loop("t", 0, 3) as t:
        b.launch("fill_i", (n,), None, {"x": "x", "t": t + 10})
        b.read("x", 0, 16, blocking=True)
    b.launch("inc", (n,), None, {"x": "x", "by": 0.5})
    b.write("x", 4, 8)  # the host mirror: the last read's data for bytes [4, 12)
    b.copy("x", "y", 4 * 32, src_offset=0, dst_offset=4 * 32)
    res = _run(b.build(), cq, params={"n": 64})
    assert res.launches == 4
    assert [(op, it) for op, it, _ in res.reads] == [(1, (0,)), (1, (1,)), (1, (2,))]
    assert [float(d[0]) for _, _, d in res.reads] == [10.0, 11.0, 12.0]
    x = res.buffers["x"]
    np.testing.assert_array_equal(x[[0, 3, 4, 63]], [12.5, 12.5, 12.5, 12.5])
    np.testing.assert_array_equal(x[1:3], [12.0, 12.0])
    np.testing.assert_array_equal(res.buffers["y"][32:64], x[:32])
    np.testing.assert_array_equal(res.buffers["y"][:32], res.initial["y"][:32])


def test_unknown_call_is_refused(cq: tuple) -> None:
    b = ProgramBuilder(parse_kernels(STEP), name="unk")
    b.buffer("x", 64)
    b.unknown("my_library_call", "x")
    with pytest.raises(UnsupportedError, match="my_library_call"):
        _run(b.build(), cq)


def test_inputs_override_initial_contents(cq: tuple) -> None:
    b = ProgramBuilder(parse_kernels(STEP), name="in")
    b.buffer("x", 4 * 16)
    b.launch("inc", (16,), None, {"x": "x", "by": 1.0})
    res = _run(b.build(), cq, inputs={"x": np.arange(16)})
    np.testing.assert_array_equal(res.buffers["x"], np.arange(16, dtype=np.float32) + 1)
    with pytest.raises(PolyfuseError, match="unknown buffers: nope"):
        _run(b.build(), cq, inputs={"nope": np.zeros(2)})


def test_missing_size_parameter_is_a_clear_error(cq: tuple) -> None:
    with pytest.raises(PolyfuseError, match=r"host\.c:\d+: size of buffer .* --param n=VALUE"):
        _run(_example("elementwise_chain"), cq)
    with pytest.raises(PolyfuseError, match="--param m=VALUE"):
        _run(_example("runtime_offset"), cq, params={"n": 128})


# ------------------------------------------------------------------------------ timing


def test_time_program(cq: tuple) -> None:
    ctx, queue = cq
    timing = time_program(_example("lstm_cell"), repeat=3, warmup=1, ctx=ctx, queue=queue)
    assert timing.launches == 16
    assert set(timing.per_launch) == {8, 9}
    assert timing.kernel_time > 0 and timing.wall_time >= timing.kernel_time * 0.5
    assert len(timing.kernel_samples) == 3
    assert timing.to_dict()["per_launch"].keys() == {"8", "9"}


def test_double_buffers_and_scalars(cq: tuple) -> None:
    kernels = parse_kernels("__kernel void dbl(__global double *x, const double a)\n"
                            "{ x[get_global_id(0)] *= a; }\n")
    b = ProgramBuilder(kernels, name="d")
    b.buffer("x", 8 * 16, dtype=None)
    b.launch("dbl", (16,), None, {"x": "x", "a": 2.5})
    program = b.build()
    assert "cl_khr_fp64" in program_source(program)
    res = _run(program, cq)
    assert res.buffers["x"].dtype == np.float64
    np.testing.assert_array_equal(res.buffers["x"], res.initial["x"] * 2.5)


def test_overlapping_copy_is_a_clear_error(cq: tuple) -> None:
    b = ProgramBuilder(parse_kernels(STEP), name="cp")
    b.buffer("x", 4 * 64)
    b.copy("x", "x", 4 * 32, src_offset=0, dst_offset=4 * 16)
    with pytest.raises(PolyfuseError, match="clEnqueueCopyBuffer"):
        _run(b.build(), cq)


def test_time_interleaved_alternates_programs_and_callables():
    from polyfuse.runtime.execute import time_interleaved

    ex = EXAMPLES / "elementwise_chain"
    program = load_opencl(str(ex / "kernels.cl"), host=str(ex / "host.c"), params={"n": 1000})
    calls = []
    t = time_interleaved({"a": program, "b": program}, repeat=6, rounds=3,
                         extra={"py": lambda: calls.append(1)})
    assert set(t) == {"a", "b", "py"}
    assert len(t["a"].kernel_samples) == len(t["b"].wall_samples) == 6
    assert t["py"].kernel_time is None and len(t["py"].wall_samples) == 6
    assert len(calls) == 6 + 1  # one warm-up call, then two per round
    assert t["a"].kernel_time > 0 and t["a"].spread >= 0


def test_verify_picks_a_small_instance_for_symbolic_sizes(cq: tuple) -> None:
    """From Python as from ``fuse --verify``: sizes left symbolic are verified at a small
    instance, which the result names (before: an error asking for the sizes)."""
    program = _example("elementwise_chain")
    assert "n" in program.params
    ver = verify_programs(program, program, ctx=cq[0], queue=cq[1])
    assert ver.ok and set(ver.instance) == {"n"} and ver.instance["n"] > 0
    assert f"n={ver.instance['n']}" in ver.summary() and ver.to_dict()["instance"] == ver.instance
    given = verify_programs(program, program, params={"n": 1000}, ctx=cq[0], queue=cq[1])
    assert given.instance == {} and "instance" not in given.to_dict()
