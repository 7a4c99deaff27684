"""Correct or clearly refused, in bounded time (issue 9): each class of failure the differential
fuzzing found, written as inputs of the kind real programs and exporters produce."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from polyfuse.c import preprocessor
from polyfuse.core.program import KernelContext, PolyfuseError
from polyfuse.frontend.builder import ProgramBuilder
from polyfuse.frontend.opencl import parse_kernel_batch, parse_kernels

ROOT = Path(__file__).resolve().parent.parent

SAXPY = """/* saxpy with a tiled copy: PolyBench-style */
#define TILE 64
__constant float weights[4] = {0.25f, 0.25f, 0.25f, 0.25f};
typedef struct { float lo, hi; } range_t;
enum { FIRST = 0, SECOND = 1 };

__kernel void saxpy(__global const float *x, __global float *y, const float alpha, const int n)
{
    __local float tile[TILE];
    const int i = get_global_id(0);
    const int l = get_local_id(0);
    float4 v = (float4)(1.0f, 2.0f, 3.0f, 4.0f);
    range_t r = {.lo = 0.0f, .hi = 1.0f};
    tile[l] = i < n ? x[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i < n)
        y[i] = alpha * tile[l] + y[i] * weights[SECOND] + v.x * r.lo;
}
"""


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polyfuse", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def _one_line_error(r: subprocess.CompletedProcess, *needles: str) -> str:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("polyfuse: error")]
    assert len(lines) == 1, r.stderr
    assert "internal error" not in lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# -- encodings ---------------------------------------------------------------------------------


@pytest.mark.parametrize("junk", [b"caf\xe9", b"\xff\xfe", b"\x80\x81", b"\xc3\x28"])
def test_non_utf8_bytes_in_comments_are_read(tmp_path: Path, junk: bytes) -> None:
    path = tmp_path / "k.cl"
    text = SAXPY.encode().replace(b"PolyBench-style", b"PolyBench-style " + junk)
    path.write_bytes(b"// " + junk + b" (Latin-1 author name)\n" + text)
    kernels = parse_kernels(str(path))
    assert list(kernels) == ["saxpy"]
    assert kernels["saxpy"].loc.line == 8  # lines still count from the user's file


def test_utf8_bom_and_latin1_read_source(tmp_path: Path) -> None:
    bom = tmp_path / "bom.cl"
    bom.write_bytes(b"\xef\xbb\xbf" + SAXPY.encode())
    assert preprocessor.read_source(str(bom)).startswith("/* saxpy")
    with pytest.raises(PolyfuseError, match="cannot read"):
        preprocessor.read_source(str(tmp_path / "missing.cl"))


def test_non_utf8_host_is_fused_and_rewritten(tmp_path: Path) -> None:
    """A Windows-1252 byte in a host comment: analysis, verification and the fused host all
    read it (found by the mutation fuzzer in the fused-host rewriter)."""
    ex = ROOT / "examples" / "elementwise_chain"
    host = tmp_path / "host.c"
    host.write_bytes(b"/* \xa9 2024 M\xfcller */\n" + (ex / "host.c").read_bytes())
    r = _cli("fuse", ex / "kernels.cl", "--host", host, "--out", tmp_path / "out", "--verify",
             "--param", "n=1000")
    assert r.returncode == 0, r.stderr
    assert "M\u00fcller" in (tmp_path / "out" / "fused_host.c").read_text()


# -- nesting -----------------------------------------------------------------------------------


def _nested_expr(depth: int) -> str:
    e = "x[i]"
    for k in range(depth):
        e = f"({e} + {k % 3}.0f)"
    return e


def _nested_ifs(depth: int) -> str:
    return "if (i > 0) {" * depth + "y[i] = x[i];" + "}" * depth


def _long_sum(terms: int) -> str:
    return " + ".join(f"{k % 7}.0f * x[i]" for k in range(terms))


@pytest.mark.parametrize("body,message", [
    (lambda: f"y[i] = {_nested_expr(300)};", "brackets nest more than 256"),
    (lambda: f"y[i] = {_nested_expr(5000)};", "brackets nest more than 256"),
    (lambda: _nested_ifs(300), "brackets nest more than 256"),
    (lambda: f"y[i] = {_long_sum(450)};", "nest more than 200 levels"),
], ids=["parens300", "parens5000", "if300", "sum450"])
def test_deep_nesting_is_refused_with_its_place(body, message: str) -> None:
    src = ("__kernel void deep(__global const float *x, __global float *y)\n{\n"
           "    int i = get_global_id(0);\n    " + body() + "\n}\n")
    with pytest.raises(PolyfuseError, match=message) as info:
        parse_kernels(src, "deep.cl")
    assert info.value.file == "deep.cl" and info.value.line == 4


def test_nested_ifs_within_the_limits_are_modelled() -> None:
    src = ("__kernel void deep(__global const float *x, __global float *y)\n{\n"
           "    int i = get_global_id(0);\n    " + _nested_ifs(90) + "\n}\n")
    assert parse_kernels(src, "deep.cl")["deep"].statements


def test_deep_but_accepted_nesting_fuses_and_verifies() -> None:
    import polyfuse
    from polyfuse.passes.pipeline import fuse_program

    src = ("__kernel void a(__global const float *x, __global float *y)\n{ int i = "
           f"get_global_id(0); y[i] = {_nested_expr(150)}; }}\n"
           "__kernel void b(__global const float *x, __global float *z)\n{ int i = "
           f"get_global_id(0); z[i] = {_long_sum(180)}; }}\n")
    b = ProgramBuilder(polyfuse.frontend.opencl.parse_kernels(src, "nest.cl"))
    for name in "xyzw":
        b.buffer(name, 4 * 256)
    b.launch("a", (256,), (64,), {"x": "x", "y": "y"})
    b.launch("b", (256,), (64,), {"x": "y", "z": "z"})
    result = fuse_program(b.build(), verify=True)
    assert result.plan.launches_after == 1 and result.verification.ok


# -- work sizes and divisions by zero ----------------------------------------------------------


@pytest.mark.parametrize("wg,message", [
    ("0", "local work size 0 .* at least one"), ("(4 - 4)", "local work size 0"),
    ("-64", "local work size -64"), ("(64 / (WG0 - 1))", "division by zero"),
    ("256 % 0", "division by zero"),
])
def test_zero_or_negative_reqd_work_group_size(wg: str, message: str) -> None:
    src = (f"#define WG0 1\n#define WG {wg}\n"
           "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n"
           "void k(__global float *a) { a[get_global_id(0)] = 1.0f; }\n")
    with pytest.raises(PolyfuseError, match=message) as info:
        parse_kernels(src, "wg.cl")
    assert info.value.file == "wg.cl" and info.value.line == 4


def test_reqd_work_group_size_constant_expression_is_honoured() -> None:
    src = ("#define TS 16\n__kernel __attribute__((reqd_work_group_size(TS * 4, 1, 1)))\n"
           "void k(__global float *a) { a[get_global_id(0)] = 1.0f; }\n")
    assert parse_kernels(src, "wg.cl")["k"].context.local_size[0] == 64


@pytest.mark.parametrize("local,glob,what", [((0,), (256,), "local"), ((64,), (0,), "global")])
def test_zero_launch_sizes_name_the_launch(local, glob, what) -> None:
    from polyfuse.uar import build_uar

    b = ProgramBuilder(parse_kernels("__kernel void k(__global float *a) "
                                     "{ a[get_global_id(0)] = 1.0f; }", "z.cl"))
    b.buffer("a", 4 * 256)
    b.launch("k", glob, local, {"a": "a"})
    with pytest.raises(PolyfuseError, match=f"launch 0 of k: {what} work size 0"):
        build_uar(b.build())


def test_host_define_zero_work_group_is_one_line_error(tmp_path: Path) -> None:
    example = ROOT / "examples" / "elementwise_chain"
    (tmp_path / "kernels.cl").write_bytes((example / "kernels.cl").read_bytes())
    host = (example / "host.c").read_text()
    host = host.replace("#define WG 64", "#define WG 0").replace(
        "{((n + WG - 1) / WG) * WG}", "{1024}")
    (tmp_path / "host.c").write_text(host)
    _one_line_error(_cli("analyze", tmp_path / "kernels.cl", "--host", tmp_path / "host.c"),
                    "host.c:", "local work size 0")


def test_unbounded_fused_ndrange_is_a_codegen_error() -> None:
    from types import SimpleNamespace

    import islpy as isl

    from polyfuse.codegen.fuse import CodegenError, _bound

    class KB:  # a group whose launches have constant sizes: the isl bound is what fails
        where = "plan group 0"
        group = SimpleNamespace(fragments=())
        plan = SimpleNamespace(program=SimpleNamespace(launches=(), params=()))

    unbounded = isl.Set("[maxwg] -> { [g, l] : g >= 0 and 0 <= l < 64 }")
    with pytest.raises(CodegenError, match="no maximum group id 0.*--param"):
        _bound(KB(), unbounded, 0, "max", "group id 0")
    assert _bound(KB(), unbounded, 1, "max", "local id 0").is_cst()


# -- size guards -------------------------------------------------------------------------------


def _scale_program(n: int, loop: int = 0):
    b = ProgramBuilder(parse_kernels(
        "__kernel void scale(__global const float *x, __global float *y, int n)\n"
        "{ int i = get_global_id(0); if (i < n) y[i] = 2.0f * x[i]; }\n", "scale.cl"))
    b.buffer("x", 4 * n)
    b.buffer("y", 4 * n)
    if loop:
        with b.loop("t", 0, loop):
            b.launch("scale", (n,), None, {"x": "x", "y": "y", "n": n})
    else:
        b.launch("scale", (n,), None, {"x": "x", "y": "y", "n": n})
    return b.build()


def test_verify_of_huge_buffers_is_refused_before_planning() -> None:
    from polyfuse.passes.pipeline import fuse_program

    start = time.monotonic()
    with pytest.raises(PolyfuseError, match=r"verification needs about .* GiB .*buffers x"):
        fuse_program(_scale_program(10**9), verify=True)
    assert time.monotonic() - start < 30  # refused from the sizes, nothing allocated


def test_memory_budget_follows_the_environment(monkeypatch) -> None:
    from polyfuse.runtime.budget import check_run_budget, estimate_run

    est = estimate_run(_scale_program(1 << 16))
    assert est.total_bytes == 2 * 4 << 16 and est.work_items == 1 << 16
    monkeypatch.setenv("POLYFUSE_MEMORY_BUDGET", "1M")
    with pytest.raises(PolyfuseError, match="budget on this machine is 1 MiB"):
        check_run_budget(_scale_program(1 << 16))
    monkeypatch.setenv("POLYFUSE_MEMORY_BUDGET", "1G")
    assert check_run_budget(_scale_program(1 << 16)).launches == 1


def test_launches_in_a_long_host_loop_are_counted_without_unrolling() -> None:
    from polyfuse.runtime.budget import check_run_budget, estimate_run

    prog = _scale_program(64, loop=10**8)
    start = time.monotonic()
    assert estimate_run(prog).launches == 10**8
    with pytest.raises(PolyfuseError, match="kernel launches per run"):
        check_run_budget(prog)
    assert time.monotonic() - start < 5


# -- kernels using undeclared names ------------------------------------------------------------


def test_declared_names_of_every_kind_are_accepted() -> None:
    assert list(parse_kernels(SAXPY, "saxpy.cl")) == ["saxpy"]


@pytest.mark.parametrize("old,new,name", [
    ("__local float tile[TILE];", "", "tile"),
    ("y[i] * weights[SECOND]", "y[i] * scale", "scale"),
    ("const int l = get_local_id(0);", "", "l"),
])
def test_undeclared_identifier_is_refused_at_its_line(old: str, new: str, name: str) -> None:
    with pytest.raises(PolyfuseError, match=f"undeclared identifier '{name}'") as info:
        parse_kernels(SAXPY.replace(old, new), "saxpy.cl")
    assert info.value.file == "saxpy.cl" and info.value.line in (14, 16, 17)


def test_undeclared_local_array_blamed_on_the_kernel_file(tmp_path: Path) -> None:
    example = ROOT / "examples" / "elementwise_chain"
    kernels = (example / "kernels.cl").read_text().replace(
        "        b[i] = a[i] + y[i];",
        "        b[i] = scratch[get_local_id(0)] + y[i];")
    (tmp_path / "kernels.cl").write_text(kernels)
    (tmp_path / "host.c").write_bytes((example / "host.c").read_bytes())
    _one_line_error(_cli("analyze", tmp_path / "kernels.cl", "--host", tmp_path / "host.c"),
                    "kernels.cl:14:", "'scratch'")


# -- the CLI never shows a traceback unless asked ----------------------------------------------


def test_cli_turns_unexpected_exceptions_into_one_line(monkeypatch, capsys) -> None:
    from polyfuse.apps import cli

    def boom(args):
        raise RuntimeError("something polyfuse did not expect\nsecond line")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    for action in parser._subparsers._group_actions[0].choices.values():
        action.set_defaults(func=boom)
    assert cli.main(["devices"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["polyfuse: internal error: RuntimeError: something polyfuse did not expect "
                   "(rerun with --debug for the traceback and report it)"]
    assert cli.main(["--debug", "devices"]) == 1
    assert "Traceback" in capsys.readouterr().err


# -- time budgets ------------------------------------------------------------------------------


def _slow_job(seconds: float, progress=None) -> str:
    progress("loading")
    progress("planning fusion")
    time.sleep(seconds)
    return "done"


def _bad_job(progress=None) -> None:
    progress("loading")
    raise PolyfuseError("bad input", "model.onnx", 3)


def _buggy_job(progress=None) -> None:
    raise ZeroDivisionError("integer modulo by zero")


def test_watchdog_names_the_stage_that_overran() -> None:
    from polyfuse.core.watchdog import BudgetExceeded, call_with_budget

    assert call_with_budget(_slow_job, (0.0,), timeout=120) == "done"
    with pytest.raises(BudgetExceeded, match="stage 'planning fusion'") as info:
        call_with_budget(_slow_job, (600.0,), stage_timeout=2, label="m.onnx")
    assert info.value.stage == "planning fusion"
    with pytest.raises(PolyfuseError, match="^model.onnx:3: bad input$"):
        call_with_budget(_bad_job, timeout=120)
    with pytest.raises(PolyfuseError, match="internal error in stage .*ZeroDivisionError"):
        call_with_budget(_buggy_job, timeout=120)


def _busy_job(progress=None) -> None:
    progress("planning fusion")
    while True:
        pass


def test_watchdog_cpu_budget_counts_the_worker_s_cpu_not_the_wall_clock() -> None:
    from polyfuse.core.watchdog import BudgetExceeded, call_with_budget

    start = time.monotonic()
    with pytest.raises(BudgetExceeded, match="after 3 s of CPU time in stage 'planning fusion'"):
        call_with_budget(_busy_job, timeout=600, cpu_timeout=3)
    assert time.monotonic() - start < 300
    # a job that waits uses no CPU: only the wall-clock budget stops it
    with pytest.raises(BudgetExceeded, match=r"stopped after 8 s in stage .* \(--timeout 8\)"):
        call_with_budget(_slow_job, (600.0,), timeout=8, cpu_timeout=3)


def _crashing_job(progress=None) -> None:
    import ctypes

    progress("verifying fused against unfused on random inputs")
    ctypes.string_at(0)  # a real SIGSEGV in native code


def test_watchdog_turns_a_native_crash_into_one_line() -> None:
    from polyfuse.core.watchdog import call_with_budget

    with pytest.raises(PolyfuseError, match=r"^p.cl: stage 'verifying fused against unfused on "
                       r"random inputs' crashed \(signal 11, SIGSEGV\) in native code"):
        call_with_budget(_crashing_job, label="p.cl")


def test_cli_fuse_survives_a_native_crash_of_the_device_step(tmp_path: Path) -> None:
    """A segfault while verifying (as PoCL did on a 60-deep kernel) is one line, exit 1: the
    CLI runs the job in a worker.  A ``sitecustomize`` makes the worker's verifier crash."""
    (tmp_path / "sitecustomize.py").write_text(
        "import ctypes, multiprocessing\nimport polyfuse.runtime as rt\n"
        "def crash(*a, **k):\n"
        "    if multiprocessing.parent_process() is not None:\n"
        "        ctypes.string_at(0)\n"
        "rt.verify_programs = crash\n")
    example = ROOT / "examples" / "elementwise_chain"
    r = subprocess.run([sys.executable, "-m", "polyfuse", "fuse", example / "kernels.cl",
                        "--host", example / "host.c", "--out", tmp_path / "out", "--verify"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    _one_line_error(r, "kernels.cl: stage 'verifying", "crashed (signal 11, SIGSEGV)")



def test_a_run_on_random_contents_names_a_kernel_that_indexes_with_values_it_loads() -> None:
    """Verification runs on random contents: a kernel that follows offsets stored in its
    buffers (the Programming Guide's tiled spmv) may be sent outside them and crash the
    device; the stage a crash reports then names the run, that kernel and where it loads the
    index, not the last kernel build."""
    from polyfuse.frontend.host import load_opencl
    from polyfuse.runtime.verify import random_run_stage

    src = ("__kernel void gather(__global float *out, __global const uint *idx,\n"
           "                     __global const float *in) {\n"
           "    int i = get_global_id(0);\n"
           "    out[i] = in[idx[i]];\n"
           "}\n")
    program = load_opencl(src)
    assert random_run_stage(program, "unfused") == (
        "running the unfused program on random buffer contents; kernel 'gather' indexes its "
        "buffers with values it reads from memory (<input>:4), which random contents may send "
        "outside them")
    plain = load_opencl(src.replace("in[idx[i]]", "in[i] + idx[i]"))
    assert random_run_stage(plain, "unfused") == \
        "running the unfused program on random buffer contents"

# -- ONNX: invalid graphs, NaN semantics, loading many nodes -----------------------------------

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _save(tmp_path: Path, name: str, nodes, inputs, outputs, inits=(), opset: int = 17) -> str:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return str(path)


def _vi(name: str, shape) -> object:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


@pytest.mark.parametrize("shape,axis,indices", [
    ((4, 5), 0, [0, 4]), ((4, 5), 1, [[0, -6]]), ((3, 7, 2), -2, [7]), ((3, 7, 2), 2, [-3, 1]),
])
def test_constant_gather_index_out_of_range_names_the_node(tmp_path: Path, shape, axis,
                                                           indices) -> None:
    from polyfuse.frontend.onnx import load_onnx

    idx = np.asarray(indices, dtype=np.int64)
    ax = axis % len(shape)
    out = shape[:ax] + idx.shape + shape[ax + 1:]
    path = _save(tmp_path, "gather", [helper.make_node(
        "Gather", ["X", "idx"], ["Y"], axis=axis, name="/embeddings/word_embeddings/Gather")],
        [_vi("X", shape)], [_vi("Y", out)], [numpy_helper.from_array(idx, "idx")])
    with pytest.raises(PolyfuseError, match=r"node '/embeddings/word_embeddings/Gather' "
                                            r"\(Gather\): index -?\d+ in 'idx' is out of range"):
        load_onnx(path)


def test_constant_gather_negative_indices_in_range_match_onnxruntime(tmp_path: Path) -> None:
    from polyfuse.apps.onnx_run import onnxruntime_reference, run_onnx

    idx = np.asarray([[-1, 0], [2, -3]], dtype=np.int64)
    path = _save(tmp_path, "gather_ok", [helper.make_node("Gather", ["X", "idx"], ["Y"],
                                                          axis=1, name="g")],
                 [_vi("X", (3, 5))], [_vi("Y", (3, 2, 2))], [numpy_helper.from_array(idx, "idx")])
    x = {"X": np.arange(15, dtype=np.float32).reshape(3, 5)}
    np.testing.assert_array_equal(run_onnx(path, x, fused=False)["Y"],
                                  onnxruntime_reference(path, x)["Y"])


def test_cyclic_graph_error_names_the_node_fully(tmp_path: Path) -> None:
    name = "/encoder/layer.0/attention/output/LayerNorm/Add_cycle"
    path = _save(tmp_path, "cyclic", [
        helper.make_node("Relu", ["B"], ["A"], name=name),
        helper.make_node("Add", ["X", "A"], ["B"], name="/encoder/layer.0/Add"),
        helper.make_node("Neg", ["B"], ["Y"], name="out")],
        [_vi("X", (2, 3))], [_vi("Y", (2, 3))])
    r = _cli("fuse", path, "--out", tmp_path / "out", "--no-timing")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("polyfuse: error")][0]
    assert name in line and "\n" not in line


@pytest.mark.parametrize("op,n_in", [("Relu", 1), ("Max", 2), ("Min", 2), ("Max", 3),
                                     ("Min", 3), ("Sigmoid", 1), ("Abs", 1)])
def test_nan_and_inf_follow_onnxruntime(tmp_path: Path, op: str, n_in: int) -> None:
    from polyfuse.apps.onnx_run import onnxruntime_reference, run_onnx

    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 3e38, -3e38, 1e-40,
                        88.0, -88.0, 0.5, -2.0, np.nan, 7.0], dtype=np.float32)
    names = ["A", "B", "C"][:n_in]
    feeds = {n: np.roll(special, 5 * k).reshape(4, 4) for k, n in enumerate(names)}
    path = _save(tmp_path, op, [helper.make_node(op, names, ["Y"])],
                 [_vi(n, (4, 4)) for n in names], [_vi("Y", (4, 4))])
    ref = onnxruntime_reference(path, feeds)["Y"]
    for fused in (False, True):
        ours = run_onnx(path, feeds, fused=fused)["Y"]
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(ref))
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)


def test_operator_kernels_are_preprocessed_once_per_model(tmp_path: Path, monkeypatch) -> None:
    from polyfuse.apps.onnx_run import onnxruntime_reference, run_onnx
    from polyfuse.frontend.onnx import load_onnx_model

    ops = ["Relu", "Sigmoid", "Tanh", "Neg", "Abs"]
    nodes, prev = [], "X"
    for k in range(40):
        out = "Y" if k == 39 else f"t{k}"
        nodes.append(helper.make_node(ops[k % 5], [prev], [out], name=f"/layers.{k}/act"))
        prev = out
    path = _save(tmp_path, "chain40", nodes, [_vi("X", (3, 7))], [_vi("Y", (3, 7))])
    calls = []
    real = preprocessor.preprocess
    monkeypatch.setattr(preprocessor, "preprocess",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    model = load_onnx_model(path)
    assert len(calls) == 1
    kernels = model.program.kernels
    assert len(kernels) == 40 and len({k.ast.decl.name for k in kernels.values()}) == 40
    assert all(name in k.source for name, k in kernels.items())
    x = {"X": np.linspace(-3, 3, 21, dtype=np.float32).reshape(3, 7)}
    np.testing.assert_allclose(run_onnx(path, x)["Y"], onnxruntime_reference(path, x)["Y"],
                               rtol=1e-5, atol=1e-6)


def test_kernel_batch_keeps_each_file_name_in_errors() -> None:
    ctx = KernelContext()
    good = "__kernel void ok1(__global float *a) { a[get_global_id(0)] = 1.0f; }\n"
    bad = "__kernel void bad2(__global float *a) { a[get_global_id(0)] = q; }\n"
    with pytest.raises(PolyfuseError, match="undeclared identifier 'q'") as info:
        parse_kernel_batch([(good, "<m:ok1>", ctx), (bad, "<m:bad2>", ctx)])
    assert info.value.file == "<m:bad2>"


def test_batch_timeout_names_the_stage(tmp_path: Path) -> None:
    from polyfuse.apps.batch import fuse_models

    path = _save(tmp_path, "tiny", [helper.make_node("Relu", ["X"], ["Y"])],
                 [_vi("X", (2, 3))], [_vi("Y", (2, 3))])
    [row] = fuse_models([path], str(tmp_path / "out"), timeout=0.01, timing=False)
    assert row.error and "stopped after 0.01 s in stage" in row.error
    [row] = fuse_models([path], str(tmp_path / "out"), timeout=300, timing=False)
    assert row.error is None and row.launches_after == 1


def test_gather_indices_fed_at_run_time_are_range_checked(tmp_path: Path) -> None:
    from polyfuse.apps.onnx_run import onnxruntime_reference, random_inputs, run_onnx
    from polyfuse.frontend.onnx import load_onnx_model

    table = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(6, 2), "table")
    path = _save(tmp_path, "embed", [helper.make_node("Gather", ["table", "ids"], ["Y"],
                                                      name="/embed/Gather")],
                 [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
                 [_vi("Y", (3, 2))], [table])
    model = load_onnx_model(path)
    assert model.index_bounds == {"ids": (6, "node '/embed/Gather' (Gather)")}
    ids = random_inputs(model, seed=1)["ids"]
    assert ids.min() >= -6 and ids.max() < 6
    ok = {"ids": np.asarray([5, -6, 0], dtype=np.int64)}
    np.testing.assert_array_equal(run_onnx(path, ok)["Y"], onnxruntime_reference(path, ok)["Y"])
    for bad in ([6, 0, 0], [0, -7, 1]):
        with pytest.raises(PolyfuseError, match=r"input 'ids': index -?\d+ is out of range for "
                                                r"node '/embed/Gather'"):
            run_onnx(path, {"ids": np.asarray(bad, dtype=np.int64)})


def test_opencl_version_macros_select_the_opencl_1_2_branch() -> None:
    src = ("#if __OPENCL_VERSION__ >= CL_VERSION_2_0\n"
           "__kernel void k(__global float *a) { a[get_global_id(0)] = undeclared_in_2_0; }\n"
           "#else\n__kernel void k(__global float *a) { a[get_global_id(0)] = 1.0f; }\n#endif\n")
    assert parse_kernels(src, "ver.cl")["k"].loc.line == 4


@pytest.mark.parametrize("expr", ["x[i / WG]", "x[i % WG]", "x[(i + 1) / (WG * 2)]",
                                  "x[i - i % (WG - WG)]"])
def test_kernel_integer_division_by_a_zero_constant_is_refused(expr: str) -> None:
    src = ("#define WG 0\n__kernel void k(__global const float *x, __global float *a)\n{\n"
           f"    int i = get_global_id(0);\n    a[i] = {expr};\n}}\n")
    with pytest.raises(PolyfuseError, match="integer division by zero") as info:
        parse_kernels(src, "div.cl")
    assert (info.value.file, info.value.line) == ("div.cl", 5)
    # floating-point division by zero is defined (inf) and stays accepted
    assert parse_kernels(src.replace(expr, "x[i] / 0.0f"), "div.cl")


@pytest.mark.parametrize("wg", ["(0)", "(int)0", "(4 - 4)", "+0", "(WG2 * 0)", "0u",
                                "((unsigned)(1 - 1))"])
@pytest.mark.parametrize("expr", ["x[i % WG]", "x[i] + (float)(i / WG)", "x[i] * (i % WG)",
                                  "(i / WG > 2) ? x[i] : 0.0f"])
def test_integer_division_by_a_folded_zero_is_refused_anywhere(wg: str, expr: str) -> None:
    src = (f"#define WG2 8\n#define WG {wg}\n"
           "__kernel void k(__global const float *x, __global float *a)\n{\n"
           f"    int i = get_global_id(0);\n    a[i] = {expr};\n}}\n")
    with pytest.raises(PolyfuseError, match="integer division by zero") as info:
        parse_kernels(src, "div.cl")
    assert (info.value.file, info.value.line) == ("div.cl", 6)


def test_compound_integer_division_by_zero_and_float_division_are_told_apart() -> None:
    src = ("#define WG (int)0\n__kernel void k(__global const float *x, __global float *a)\n"
           "{\n    int i = get_global_id(0);\n    unsigned s = i;\n    s %= WG;\n"
           "    a[i] = x[i] / (0) + (float)i / WG + s;\n}\n")
    with pytest.raises(PolyfuseError, match=r"d.cl:6: .*division by zero in s %="):
        parse_kernels(src, "d.cl")
    # float divided by an integer zero is IEEE (inf), defined: accepted
    assert parse_kernels(src.replace("    s %= WG;\n", ""), "d.cl")


@pytest.mark.parametrize("wg", ["(int)0", "(unsigned)(4 - 4)", "(size_t)0"])
def test_reqd_work_group_size_sees_through_casts(wg: str) -> None:
    src = (f"#define WG {wg}\n__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n"
           "void k(__global float *a) { a[get_global_id(0)] = 1.0f; }\n")
    with pytest.raises(PolyfuseError, match="local work size 0"):
        parse_kernels(src, "wg.cl")
    assert parse_kernels(src.replace(wg, "(size_t)32"), "wg.cl")["k"].context.local_size[0] == 32


# -- kernel accesses out of their buffer -------------------------------------------------------


@pytest.mark.parametrize("wg,element", [("(0)", "-64"), ("0", "-64"), ("65", "1024")])
def test_kernel_access_outside_its_buffer_is_refused(tmp_path: Path, wg: str,
                                                     element: str) -> None:
    """``#define WG (0)`` (reads ``c[-1 - l]``) and ``WG 65`` (the last group reads past the
    end) make the original program undefined; the model used to clip the access silently, and
    the second crashed the verifier's heap."""
    example = ROOT / "examples" / "shift_rotation"
    (tmp_path / "kernels.cl").write_text(
        (example / "kernels.cl").read_text().replace("#define WG 64", f"#define WG {wg}"))
    (tmp_path / "host.c").write_bytes((example / "host.c").read_bytes())
    _one_line_error(_cli("fuse", tmp_path / "kernels.cl", "--host", tmp_path / "host.c",
                         "--out", tmp_path / "out", "--verify", "--no-timing"),
                    "host.c:111", "reverse_in_group", "reads c", f"unit {element} ")


def test_guarded_or_parameter_dependent_accesses_are_not_refused() -> None:
    from polyfuse.uar import build_uar

    kernels = parse_kernels(
        "__kernel void k(__global const float *x, __global float *y, int n)\n"
        "{ int i = get_global_id(0); if (i < n) y[i] = x[i + 1]; }\n", "g.cl")
    b = ProgramBuilder(kernels)
    b.buffer("x", 4 * 257)
    b.buffer("y", 4 * 256)
    b.launch("k", (256,), (64,), {"x": "x", "y": "y", "n": 256})
    assert build_uar(b.build())
    b = ProgramBuilder(kernels)
    b.buffer("x", 4 * 256)
    b.buffer("y", 4 * 256)
    b.launch("k", (256,), (64,), {"x": "x", "y": "y", "n": 256})
    with pytest.raises(PolyfuseError, match="launch 0 of k: the kernel reads x .* unit 256 "):
        build_uar(b.build())


# -- symbolic sizes: verifying a small instance ------------------------------------------------


def _symbolic_chain(local: int, assume: str = ""):
    b = ProgramBuilder(parse_kernels(
        "__kernel void a(__global const float *x, __global float *y)\n"
        "{ int i = get_global_id(0); y[i] = 2.0f * x[i] + 1.0f; }\n"
        "__kernel void b(__global const float *y, __global float *z)\n"
        "{ int i = get_global_id(0); z[i] = y[i] * y[i]; }\n", "chain.cl"))
    b.param("n", min=1)
    if assume:
        b.assume(assume)
    for name in ("x", "y", "z"):
        b.buffer(name, "4*n")
    b.write("x")
    b.launch("a", ("n",), (local,), {"x": "x", "y": "y"})
    b.launch("b", ("n",), (local,), {"y": "y", "z": "z"})
    b.read("z")
    return b.build()


@pytest.mark.parametrize("local,assume,expected", [
    (64, "", 64), (48, "", 96), (16, "n >= 300", 512), (5, "", 100)])
def test_symbolic_sizes_verify_at_a_small_legal_instance(local: int, assume: str,
                                                         expected: int) -> None:
    from polyfuse.passes.pipeline import fuse_program
    from polyfuse.report import report_markdown

    result = fuse_program(_symbolic_chain(local, assume), verify=True)
    assert result.plan.launches_after == 1 and result.verification.ok
    assert result.verified["instance"] == {"n": expected}
    assert expected % local == 0
    assert f"verified at the small instance n = {expected}" in report_markdown(result)


def test_no_legal_small_instance_is_a_clear_error() -> None:
    from polyfuse.passes.pipeline import fuse_program

    with pytest.raises(PolyfuseError, match="no small instance of n to verify at .*--param"):
        fuse_program(_symbolic_chain(7, "n >= 5000"), verify=True)


def test_given_sizes_beyond_the_budget_verify_a_small_instance_of_the_same_code() -> None:
    from polyfuse.passes.pipeline import fuse_program
    from polyfuse.report import report_markdown

    result = fuse_program(_symbolic_chain(64), params={"n": 64 * 10**8}, verify=True)
    assert result.verification.ok and result.verified["instance"] == {"n": 64}
    assert "The given sizes (n = 6400000000) exceed the run budget: verified at the small " \
           "instance n = 64" in report_markdown(result)
    # sizes fixed in the program itself (not parameters) are still refused
    with pytest.raises(PolyfuseError, match="verification needs about"):
        fuse_program(_scale_program(10**9), verify=True)


def test_cli_param_beyond_the_budget_plans_symbolically_and_verifies_small(tmp_path: Path) -> None:
    example = ROOT / "examples" / "elementwise_chain"
    r = _cli("fuse", example / "kernels.cl", "--host", example / "host.c", "--out",
             tmp_path / "o", "--verify", "--param", "n=2000000000")
    assert r.returncode == 0, r.stderr
    assert "verifying fused against unfused on random inputs at n=64" in r.stderr
    report = (tmp_path / "o" / "report.md").read_text()
    assert "The given sizes (n = 2000000000) exceed the run budget: verified at the small " \
           "instance n = 64" in report


@pytest.mark.parametrize("tile, launched", [("16", "64"), ("WG / 2", "WG")])
def test_local_tile_smaller_than_the_work_group_is_refused(tmp_path: Path, tile: str,
                                                           launched: str) -> None:
    """A work-group reduction whose ``__local`` tile is smaller than the work-groups the host
    launches writes outside the tile: undefined behaviour (PoCL computes something, NVIDIA's
    driver drops the queue), refused at the kernel's line before anything runs."""
    (tmp_path / "kernels.cl").write_text(f"""#define WG 64
__kernel void block_sum(__global const float *x, __global float *sums, const int n)
{{
    __local float tile[{tile}];
    const int l = get_local_id(0);
    const int i = get_global_id(0);
    tile[l] = i < n ? x[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {{
        if (l < s)
            tile[l] += tile[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    if (l == 0)
        sums[get_group_id(0)] = tile[0];
}}
""")
    (tmp_path / "host.c").write_text(f"""#include <CL/cl.h>
#include <stdio.h>
#define WG 64
int main(void) {{
    const int n = 4096;
    cl_platform_id platform; cl_device_id device; cl_int err;
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_DEFAULT, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    FILE *f = fopen("kernels.cl", "r");
    char src[8192]; size_t len = fread(src, 1, sizeof src, f); fclose(f);
    const char *s = src;
    cl_program p = clCreateProgramWithSource(ctx, 1, &s, &len, &err);
    clBuildProgram(p, 1, &device, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "block_sum", &err);
    cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_ONLY, n * sizeof(float), NULL, &err);
    cl_mem sums = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, n / WG * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &x);
    clSetKernelArg(k, 1, sizeof(cl_mem), &sums);
    clSetKernelArg(k, 2, sizeof(int), &n);
    size_t global = n, local = {launched};
    clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL);
    clFinish(q);
    return 0;
}}
""")
    _one_line_error(_cli("analyze", tmp_path / "kernels.cl", "--host", tmp_path / "host.c"),
                    "kernels.cl:4", "local array tile", "out of its bounds")


def test_local_argument_smaller_than_the_kernel_reads_is_refused(tmp_path: Path) -> None:
    """The host sizes a ``__local`` argument for its own work-group size (``WG`` 16) while the
    kernel's tree reduction starts from its own (``WG`` 64): the kernel reads past the
    argument, undefined behaviour that fused and unfused runs resolve differently."""
    example = ROOT / "examples" / "reduction"
    (tmp_path / "kernels.cl").write_bytes((example / "kernels.cl").read_bytes())
    host = (example / "host.c").read_text()
    assert "#define WG 64" in host
    (tmp_path / "host.c").write_text(host.replace("#define WG 64", "#define WG 16"))
    _one_line_error(_cli("analyze", tmp_path / "kernels.cl", "--host", tmp_path / "host.c"),
                    "host.c:", "reduce_partial", "local array scratch[16]", "out of its bounds")


@pytest.mark.parametrize("host_tile", [8, 1])
def test_work_groups_smaller_than_the_kernels_tiles_are_refused(tmp_path: Path,
                                                                host_tile: int) -> None:
    """The host launches a 16x16-tiled GEMM with smaller work-groups than the kernel's tiles
    (``TILE`` redefined in the host only): each group fills only part of its ``__local`` tiles
    and the product loop reads the rest, which local memory leaves undefined.  Fused and unfused
    runs then disagree on garbage (fuzz seed 17171); it is refused, naming the launch and an
    element no work-item writes."""
    example = ROOT / "examples" / "gemm_bias_relu_transpose"
    (tmp_path / "kernels.cl").write_bytes((example / "kernels.cl").read_bytes())
    host = (example / "host.c").read_text()
    assert "#define TILE 16" in host
    (tmp_path / "host.c").write_text(host)
    assert _cli("analyze", tmp_path / "kernels.cl", "--host", tmp_path / "host.c").returncode == 0
    (tmp_path / "host.c").write_text(host.replace("#define TILE 16", f"#define TILE {host_tile}"))
    _one_line_error(_cli("analyze", tmp_path / "kernels.cl", "--host", tmp_path / "host.c"),
                    "host.c:", "of gemm", "local array As that no work-item of its work-group "
                    "writes", f"work-groups of {host_tile}x{host_tile}", "undefined")


# -- integer values the device computes in its width -------------------------------------------

_NEIGHBOR = """#define WG 64
__kernel void neighbor(__global const float* c, __global float* out, const int n)
{{
    int i = get_global_id(0);
    int g = get_group_id(0);
    int l = get_local_id(0);
    if (i < n)
        out[i] = c[i] + c[g * WG + {index}];
}}
"""


@pytest.mark.parametrize("index, message", [
    # the left neighbour written with INT_MAX in place of WG - 1: l + INT_MAX overflows
    ("(l + 2147483647) % WG", "l + 2147483647 overflows its type int"),
    # an unsigned wrap: at l == 0 the device divides 4294967295, the exact model -1
    ("(uint)(l - 1) % WG", "wraps around its type uint"),
    # a narrowing conversion into a signed variable before the division
    ("(int)(l + 2147483648L) / 2 % WG", "overflows its type int"),
])
def test_integer_overflow_before_a_division_is_refused(index: str, message: str) -> None:
    """An index the model computes exactly but the device in 32 bits differs after ``%``/``/``:
    refused at its line, since fused and unfused runs would resolve it differently."""
    source = _NEIGHBOR.format(index=index)
    with pytest.raises(PolyfuseError, match="whenever the kernel runs") as err:
        parse_kernels(source, "neighbor.cl", context=KernelContext(
            local_size=(64, None, None), values=(("n", 4096),)))["neighbor"]
    assert message in str(err.value)
    assert err.value.line == 8


@pytest.mark.parametrize("index", [
    "(l + WG - 1) % WG",         # the same neighbour without overflow
    "(l + n) % WG",              # overflows only for some n: left to the program's guards
    "(int)(i * 2147483647L % WG)",  # computed in long: no overflow
])
def test_integer_arithmetic_within_its_type_is_modelled(index: str) -> None:
    values = () if "n" in index else (("n", 4096),)
    kernel = parse_kernels(_NEIGHBOR.format(index=index), "neighbor.cl", context=KernelContext(
        local_size=(64, None, None), values=values))["neighbor"]
    assert kernel.statements


def test_overflowing_index_in_a_host_program_is_one_line_error(tmp_path: Path) -> None:
    example = ROOT / "examples" / "group_neighbor"
    kernels = (example / "kernels.cl").read_text()
    assert "(l + 1) % WG" in kernels
    (tmp_path / "kernels.cl").write_text(kernels.replace("(l + 1) % WG",
                                                         "(l + 2147483647) % WG"))
    (tmp_path / "host.c").write_bytes((example / "host.c").read_bytes())
    _one_line_error(_cli("fuse", tmp_path / "kernels.cl", "--host", tmp_path / "host.c",
                         "--out", tmp_path / "out"),
                    "kernels.cl:", "l + 2147483647 overflows its type int")


def test_loop_that_steps_by_zero_is_refused_at_its_line() -> None:
    """``j += STRIDE`` with ``STRIDE`` defined 0: every work-item with ``lid < nparts`` loops
    forever, so running the original program (``--verify``) would hang."""
    source = ROOT.joinpath("examples", "reduction", "kernels.cl").read_text()
    assert "j += WG" in source
    source = "#define STRIDE 0\n" + source.replace("j += WG", "j += STRIDE")
    with pytest.raises(PolyfuseError, match="steps by 0 .* it never ends") as err:
        parse_kernels(source, "kernels.cl", context=KernelContext(
            local_size=(64, None, None), values=(("nparts", 256),)))
    assert err.value.line == source[:source.index("j += STRIDE")].count("\n") + 1
    # a zero-step loop whose condition never holds on entry does nothing: modelled
    parse_kernels(source.replace("j < nparts", "j < 0"), "kernels.cl",
                  context=KernelContext(local_size=(64, None, None)))


def test_zero_size_array_is_refused() -> None:
    source = ROOT.joinpath("examples", "reduction", "kernels.cl").read_text()
    with pytest.raises(PolyfuseError, match="array scratch has size 0"):
        parse_kernels(source.replace("#define WG 64", "#define WG 0"), "kernels.cl")
