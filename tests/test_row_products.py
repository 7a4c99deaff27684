"""Whole-row matrix products fused with the row reduction that follows them.

A Softmax or LayerNormalization runs one work-group per row; the tiled MatMul/Gemm runs 16 x 16
tiles, so a row spans several producer work-groups and the two never fused.  When a row
reduction consumes a product's rows (directly or through element-wise launches: scale, bias,
residual), the front-end regenerates the product with one work-group per row laid out like the
reduction (``polyfuse/oplib/linalg.py`` ``_row_product``) and the element-wise launches covering
that layout.  Checked here on PyTorch-style graphs (batched attention scores, Gemm with
``transB`` and a residual, MatMul + bias + residual, odd row lengths): the widths equal the
brute-force oracle's, the product and its reduction land in one certified group, the fused
program matches onnxruntime and the unfused program, and a row too wide for one work-group keeps
the old plan with the reason in the report.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from polyfuse.apps.onnx_run import fuse_onnx  # noqa: E402
from polyfuse.frontend.onnx import load_onnx_model  # noqa: E402
from polyfuse.fusion import check_plan  # noqa: E402
from polyfuse.oplib import linalg, op_kernel  # noqa: E402
from polyfuse.oracle.bruteforce import width_mismatches  # noqa: E402
from polyfuse.report import report_markdown  # noqa: E402
from polyfuse.runtime.oplib_run import run_op  # noqa: E402
from polyfuse.uar import build_uar  # noqa: E402


def _save(path: Path, nodes: list, inputs: list, outputs: list, inits: list) -> Path:
    graph = helper.make_graph(nodes, "torch_jit", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _w(name: str, shape: tuple, seed: int) -> onnx.TensorProto:
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)


def _vi(name: str, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def attention_scores(path: Path, batch: int, heads: int, seq: int, dk: int) -> Path:
    """``softmax(q @ k.transpose(-2, -1) / sqrt(dk))`` as TorchScript exports it."""
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="/Transpose"),
        helper.make_node("MatMul", ["q", "kt"], ["s"], name="/MatMul"),
        helper.make_node("Div", ["s", "scale"], ["sd"], name="/Div"),
        helper.make_node("Softmax", ["sd"], ["p"], axis=-1, name="/Softmax"),
    ]
    scale = numpy_helper.from_array(np.array(dk ** 0.5, np.float32), "scale")
    shape = [batch, heads, seq, dk]
    return _save(path, nodes, [_vi("q", shape), _vi("k", shape)],
                 [_vi("p", [batch, heads, seq, seq])], [scale])


def out_proj_ln(path: Path, batch: int, seq: int, hidden: int, gemm: bool) -> Path:
    """``norm(x + proj(x))`` (post-LN): ``nn.MultiheadAttention``'s out-projection as a Gemm
    with ``transB`` between Reshapes, or a Linear as MatMul + bias Add."""
    inits = [_w("w", (hidden, hidden), 1), _w("bias", (hidden,), 2), _w("gamma", (hidden,), 3),
             _w("beta", (hidden,), 4)]
    if gemm:
        inits += [numpy_helper.from_array(np.array([batch * seq, hidden], np.int64), "flat"),
                  numpy_helper.from_array(np.array([batch, seq, hidden], np.int64), "full")]
        proj = [
            helper.make_node("Reshape", ["x", "flat"], ["x2"], name="/Reshape"),
            helper.make_node("Gemm", ["x2", "w", "bias"], ["g"], transB=1, name="/Gemm"),
            helper.make_node("Reshape", ["g", "full"], ["p"], name="/Reshape_1"),
        ]
    else:
        proj = [
            helper.make_node("MatMul", ["x", "w"], ["mm"], name="/linear/MatMul"),
            helper.make_node("Add", ["bias", "mm"], ["p"], name="/linear/Add"),
        ]
    nodes = proj + [
        helper.make_node("Add", ["x", "p"], ["r"], name="/Add"),
        helper.make_node("LayerNormalization", ["r", "gamma", "beta"], ["y"], axis=-1,
                         epsilon=1e-5, name="/norm/LayerNormalization"),
    ]
    shape = [batch, seq, hidden]
    return _save(path, nodes, [_vi("x", shape)], [_vi("y", shape)], inits)


def seq_first_out_proj_ln(path: Path, batch: int, seq: int, hidden: int) -> Path:
    """``nn.MultiheadAttention`` with ``batch_first=True`` at batch > 1, as TorchScript exports
    it: the out-projection Gemm runs on (seq * batch) rows, a Transpose moves the rows back to
    batch-first order, then the residual Add and the LayerNorm."""
    inits = [_w("w", (hidden, hidden), 1), _w("bias", (hidden,), 2), _w("gamma", (hidden,), 3),
             numpy_helper.from_array(np.array([seq, batch, hidden], np.int64), "sbh")]
    nodes = [
        helper.make_node("Gemm", ["ctx", "w", "bias"], ["g"], transB=1, name="/Gemm"),
        helper.make_node("Reshape", ["g", "sbh"], ["g3"], name="/Reshape"),
        helper.make_node("Transpose", ["g3"], ["gt"], perm=[1, 0, 2], name="/Transpose"),
        helper.make_node("Add", ["x", "gt"], ["r"], name="/Add"),
        helper.make_node("LayerNormalization", ["r", "gamma"], ["y"], axis=-1, name="/norm"),
    ]
    return _save(path, nodes, [_vi("ctx", [seq * batch, hidden]), _vi("x", [batch, seq, hidden])],
                 [_vi("y", [batch, seq, hidden])], inits)


def pre_ln_stream(path: Path, rows: int, hidden: int) -> Path:
    """Two pre-LN sub-layers: ``r1 = x + lin1(x)``, ``r2 = r1 + lin2(norm1(r1))``, then
    ``norm2(r2)``: the residual stream into ``norm2`` also leads back to ``lin1``."""
    inits = [_w("w1", (hidden, hidden), 1), _w("b1", (hidden,), 2), _w("w2", (hidden, hidden), 3),
             _w("b2", (hidden,), 4), _w("g1", (hidden,), 5), _w("g2", (hidden,), 6)]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"], name="/lin1/MatMul"),
        helper.make_node("Add", ["b1", "m1"], ["a1"], name="/lin1/Add"),
        helper.make_node("Add", ["x", "a1"], ["r1"], name="/Add"),
        helper.make_node("LayerNormalization", ["r1", "g1"], ["n1"], axis=-1, name="/norm1"),
        helper.make_node("MatMul", ["n1", "w2"], ["m2"], name="/lin2/MatMul"),
        helper.make_node("Add", ["b2", "m2"], ["a2"], name="/lin2/Add"),
        helper.make_node("Add", ["r1", "a2"], ["r2"], name="/Add_1"),
        helper.make_node("LayerNormalization", ["r2", "g2"], ["y"], axis=-1, name="/norm2"),
    ]
    return _save(path, nodes, [_vi("x", [rows, hidden])], [_vi("y", [rows, hidden])], inits)


def wide_ln(path: Path, rows: int, k: int, n: int) -> Path:
    """``LayerNorm(x @ W)`` with rows of ``n`` columns."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="/MatMul"),
        helper.make_node("LayerNormalization", ["mm", "gamma"], ["y"], axis=-1, name="/norm"),
    ]
    return _save(path, nodes, [_vi("x", [rows, k])], [_vi("y", [rows, n])],
                 [_w("w", (k, n), 5), _w("gamma", (n,), 6)])


def _kernels_of_groups(result) -> list[list[str]]:
    kernel = {op.id: op.kernel for op in result.program.launches}
    return [[kernel[m] for m in g.members] for g in result.plan.groups]


def _verified(result) -> None:
    v = result.verified
    assert v["ok"], v
    assert v["references"]["onnxruntime"]["ok"], v
    assert v["references"]["unfused"]["ok"], v


@pytest.mark.parametrize("seq", [100, 96])
def test_scores_matmul_fuses_with_softmax(tmp_path: Path, seq: int) -> None:
    """Batched scores with a scale Div, rows of 100 (ragged: the last lanes idle) or 96."""
    path = attention_scores(tmp_path / "scores.onnx", batch=2, heads=3, seq=seq, dk=16)
    result = fuse_onnx(path, verify=True)
    _verified(result)
    assert check_plan(result.plan) == []
    groups = _kernels_of_groups(result)
    fused = [g for g in groups if any("Softmax" in k for k in g)]
    assert len(fused) == 1 and any("MatMul" in k for k in fused[0]), groups
    assert any("Div" in k for k in fused[0]), groups
    assert result.plan.launches_after == 2  # the K transpose, then scores + scale + softmax


@pytest.mark.parametrize("gemm,hidden", [(True, 96), (False, 100)])
def test_projection_residual_layernorm_fuse(tmp_path: Path, gemm: bool, hidden: int) -> None:
    """Gemm(transB) + bias (+ Reshape aliases) or MatMul + bias Add, residual Add, LayerNorm:
    one launch, batch 2."""
    path = out_proj_ln(tmp_path / "proj.onnx", batch=2, seq=5, hidden=hidden, gemm=gemm)
    result = fuse_onnx(path, verify=True)
    _verified(result)
    assert check_plan(result.plan) == []
    assert result.plan.launches_after == 1, _kernels_of_groups(result)
    report = report_markdown(result)
    assert "one work-group per row" in report


def test_rows_permuted_by_a_transpose_fuse(tmp_path: Path) -> None:
    """Batch 3, sequence 5: work-group ``g`` of the Gemm computes the row the Transpose moves to
    row ``g``, so Gemm, Transpose, residual Add and LayerNorm are one launch."""
    path = seq_first_out_proj_ln(tmp_path / "sbh.onnx", batch=3, seq=5, hidden=40)
    result = fuse_onnx(path, verify=True)
    _verified(result)
    assert check_plan(result.plan) == []
    assert result.plan.launches_after == 1, _kernels_of_groups(result)


def test_residual_stream_picks_the_sublayers_own_product(tmp_path: Path) -> None:
    """norm2's input leads back to lin1 (already laid out for norm1) and to lin2: lin2 gets
    the whole-row form too.  Work-group ``g`` of lin2 then reads only row ``g`` of norm1's
    output, which work-group ``g`` of norm1 wrote: a block-width dependence, so both
    sub-layers fuse into one launch (with a barrier)."""
    path = pre_ln_stream(tmp_path / "pre.onnx", rows=6, hidden=72)
    nodes = load_onnx_model(path).nodes
    assert "for /norm1" in nodes["/lin1/MatMul"] and "for /norm2" in nodes["/lin2/MatMul"]
    result = fuse_onnx(path, verify=True)
    _verified(result)
    assert check_plan(result.plan) == []
    assert result.plan.launches_after == 1, _kernels_of_groups(result)
    assert any(f.barrier_before for g in result.plan.groups for f in g.fragments)


@pytest.mark.parametrize("build", ["scores", "gemm", "matmul", "permuted"])
def test_widths_equal_the_bruteforce_oracle(tmp_path: Path, build: str) -> None:
    """Small shapes: every edge's width is the oracle's, and product -> reduction is thread."""
    if build == "scores":
        path = attention_scores(tmp_path / "m.onnx", batch=1, heads=2, seq=5, dk=3)
    elif build == "permuted":
        path = seq_first_out_proj_ln(tmp_path / "m.onnx", batch=2, seq=3, hidden=6)
    else:
        path = out_proj_ln(tmp_path / "m.onnx", batch=1, seq=3, hidden=6, gemm=build == "gemm")
    program = load_onnx_model(path).program
    uar = build_uar(program)
    assert width_mismatches(program, uar) == []
    reduction = {op.id for op in program.launches
                 if "Softmax" in op.kernel or "norm" in op.kernel.lower()}
    into_reduction = [e.width for e in uar.edges
                      if not e.host and e.dst in reduction and e.kind == "RAW"]
    assert into_reduction and set(into_reduction) == {"thread"}


def test_oracle_reports_a_wrong_width(tmp_path: Path) -> None:
    """The oracle comparison is not vacuous: a device edge given a finer width is reported."""
    program = load_onnx_model(attention_scores(tmp_path / "m.onnx", batch=1, heads=1, seq=3,
                                               dk=2)).program
    uar = build_uar(program)
    device = [i for i, e in enumerate(uar.edges) if not e.host and e.width != "thread"]
    assert device, "expected an edge coarser than thread width"
    i = device[0]
    wrong = dataclasses.replace(uar.edges[i], width="thread")
    edited = dataclasses.replace(uar, edges=uar.edges[:i] + (wrong,) + uar.edges[i + 1:])
    assert [line for line in width_mismatches(program, edited) if "UAR thread" in line]


def test_row_too_wide_keeps_the_tiled_plan_and_says_why(tmp_path: Path) -> None:
    """Rows of 4100 columns need more accumulators per work-item than the whole-row product
    keeps: the tiled product stays, the LayerNorm stays apart, the report gives the reason."""
    path = wide_ln(tmp_path / "wide.onnx", rows=2, k=4, n=4100)
    result = fuse_onnx(path, verify=True)
    _verified(result)
    assert result.plan.launches_after == 2
    report = report_markdown(result)
    assert "accumulators per work-item" in report and "/norm" in report
    # the same rows fit a device whose work-groups are wide enough only up to its limit
    narrow = load_onnx_model(wide_ln(tmp_path / "n.onnx", rows=3, k=4, n=600),
                             max_work_group_size=16, local_mem_size=32768)
    assert "accumulators per work-item" in narrow.nodes["/MatMul"]
    fits = load_onnx_model(tmp_path / "n.onnx")
    assert "one work-group per row" in fits.nodes["/MatMul"]


@pytest.mark.parametrize("a_shape,b_shape", [((7, 5), (3, 5, 40)), ((2, 3, 4, 6), (6, 130)),
                                             ((2, 3, 4, 6), (2, 3, 6, 9))])
def test_whole_row_kernel_matches_numpy(a_shape: tuple, b_shape: tuple) -> None:
    """The kernel alone: A broadcast over B's batch (``row % M``), batch folded, both batched;
    ragged last chunks (40, 130 and 9 columns)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    want = np.matmul(a, b)
    opk = op_kernel("MatMul", {}, [a_shape, b_shape], [want.shape], name="mm",
                    max_work_group_size=32, local_mem_size=32768, whole_rows=True)
    n = want.shape[-1]
    assert opk.block is not None and opk.local_size == (min(32, 1 << (n - 1).bit_length()),)
    assert opk.block.lead_extent * opk.block.col_extent == want.size
    (got,) = run_op(opk, [a, b], [want.shape])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_row_form_problem_follows_the_device_limits() -> None:
    from polyfuse.oplib._common import Node

    node = Node.of("MatMul", {}, [(2, 3), (3, 4)], [(2, 4)], "mm", 16, 32768)
    assert linalg.row_form_problem(node, 16 * linalg.ROW_MAX_CHUNKS) is None
    why = linalg.row_form_problem(node, 16 * linalg.ROW_MAX_CHUNKS + 1)
    assert why is not None and "16 lanes" in why
