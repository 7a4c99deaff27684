"""Block-covering consumers of register-blocked products (polyfuse/oplib/blocked.py).

In the ``blocked`` kernel variant a MatMul/Gemm/Conv writes an R x C block per work-item; its
bias add, activation and head transpose then cover the same block with the same launch shape.
Checked here: the front-end's widths equal the brute-force oracle's (thread from the product to
each consumer), the planner fuses the chain (bert_qkv to one launch, as in the tiled variant),
every plan passes the legality certificate, and outputs equal onnxruntime's.  Also the
rational Erf/Tanh those chains use (polyfuse/oplib/fastmath.py) against the exact functions.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import polyfuse  # noqa: E402
from polyfuse.apps.onnx_run import (  # noqa: E402
    ATOL,
    ONNX_PASSES,
    RTOL,
    load_and_fuse,
    onnxruntime_reference,
    random_inputs,
)
from polyfuse.core.program import KERNEL_VARIANTS, REFERENCE_TARGET  # noqa: E402
from polyfuse.frontend.onnx import load_onnx_model  # noqa: E402
from polyfuse.fusion import check_plan  # noqa: E402
from polyfuse.oplib import linalg, op_kernel  # noqa: E402
from polyfuse.oracle.bruteforce import width_mismatches  # noqa: E402
from polyfuse.passes.compilation import Compilation, Options  # noqa: E402
from polyfuse.passes.pipeline import compile_program, result_of  # noqa: E402
from polyfuse.runtime.oplib_run import run_op  # noqa: E402
from polyfuse.uar import build_uar  # noqa: E402

MODELS = Path(__file__).resolve().parent.parent / "examples" / "models"


def _attention_head(path: Path, batch: int, seq: int, hidden: int, heads: int) -> Path:
    """What ``torch.onnx.export`` writes for ``x @ W + b -> GELU -> view -> permute`` (the GELU
    in its erf form, weights as initializers, the view's shape as a constant)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.random((hidden, hidden)) - 0.5).astype(np.float32), "w")
    b = numpy_helper.from_array((rng.random(hidden) - 0.5).astype(np.float32), "bias")
    shape = numpy_helper.from_array(np.array([batch, seq, heads, hidden // heads], np.int64),
                                    "shape")
    consts = [numpy_helper.from_array(np.array(v, np.float32), n)
              for n, v in (("sqrt2", 2 ** 0.5), ("one", 1.0), ("half", 0.5))]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="/dense/MatMul"),
        helper.make_node("Add", ["bias", "mm"], ["pre"], name="/dense/Add"),
        helper.make_node("Div", ["pre", "sqrt2"], ["d"], name="/act/Div"),
        helper.make_node("Erf", ["d"], ["e"], name="/act/Erf"),
        helper.make_node("Add", ["e", "one"], ["e1"], name="/act/Add"),
        helper.make_node("Mul", ["pre", "e1"], ["m"], name="/act/Mul"),
        helper.make_node("Mul", ["m", "half"], ["g"], name="/act/Mul_1"),
        helper.make_node("Reshape", ["g", "shape"], ["r"], name="/Reshape"),
        helper.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3], name="/Transpose"),
    ]
    graph = helper.make_graph(
        nodes, "torch_jit",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       [batch, heads, seq, hidden // heads])],
        initializer=[w, b, shape, *consts])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    out = path / "head.onnx"
    out.write_bytes(model.SerializeToString())
    return out


def test_widths_equal_the_bruteforce_oracle(tmp_path: Path) -> None:
    """Small shapes: every UAR edge has the oracle's width, and the product's consumers are
    thread-width (fusable with no barrier)."""
    path = _attention_head(tmp_path, batch=2, seq=4, hidden=8, heads=2)
    model = load_onnx_model(str(path), target=REFERENCE_TARGET.with_variant("blocked"))
    program = model.program
    # every node runs on the product's grid (one work-item per 4 x 8 block, row blocks first)
    assert {tuple(op.global_size) for op in program.launches} == {(2, 1)}
    uar = build_uar(program)
    assert width_mismatches(program, uar) == []
    widths = {(e.src_kernel, e.dst_kernel): e.width for e in uar.edges if not e.host}
    assert {k: w for k, w in widths.items() if w != "thread"} == {}
    assert len(widths) >= 8  # the whole chain, product to transpose


def test_head_fuses_into_one_launch_and_matches_onnxruntime(tmp_path: Path) -> None:
    path = _attention_head(tmp_path, batch=2, seq=16, hidden=64, heads=4)
    sess = polyfuse.InferenceSession(str(path), _form="blocked")
    assert sess.launches == 1
    assert check_plan(sess.plan) == []
    feeds = random_inputs(sess.io, seed=1)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("name,launches", [("bert_qkv", 1), ("lstm_unrolled", 9),
                                           ("torch_conv_ts", 2)])
def test_bundled_models_blocked(name: str, launches: int) -> None:
    """bert_qkv stays at one launch with the fast kernels; the LSTM's vertical groups keep the
    barriers of fragments placed before a later merge (they were dropped, giving wrong h);
    a Conv's ReLU covers its channel x column blocks."""
    path = str(MODELS / f"{name}.onnx")
    _model, result = load_and_fuse(path, {}, None, form="blocked")
    assert check_plan(result.plan) == []
    assert result.plan.launches_after <= launches
    sess = polyfuse.InferenceSession(path, _form="blocked")
    feeds = random_inputs(sess.io, seed=0)
    ref = onnxruntime_reference(path, feeds)
    for out, t in zip(sess.run(None, feeds), sess.get_outputs()):
        np.testing.assert_allclose(out, ref[t.name], rtol=RTOL, atol=ATOL)


def _conv_block(path: Path, hw: int, group: int, stride: int, dil: int, width: int = 0,
                batch: int = 1) -> Path:
    """Conv 1x1 16->8, Relu, Conv 3x3 (pads = dilation, ``group``, ``stride``, ``dil``), Relu,
    Conv 1x1 8->16, and at stride 1 the residual Add and Relu: a ResNet/MobileNet block on an
    ``hw`` x ``width`` (default ``hw``) input."""
    rng = np.random.default_rng(3)
    width = width or hw

    def w(name: str, *shape: int) -> Any:
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    out = ((hw - 1) // stride + 1, (width - 1) // stride + 1)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], group=group,
                         pads=[dil] * 4, strides=[stride] * 2, dilations=[dil] * 2),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3" if stride == 1 else "y"],
                         kernel_shape=[1, 1]),
    ]
    if stride == 1:
        nodes += [helper.make_node("Add", ["c3", "x"], ["s"]),
                  helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16, hw, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 16, *out])],
        [w("w1", 8, 16, 1, 1), w("b1", 8), w("w2", 8, 8 // group, 3, 3), w("b2", 8),
         w("w3", 16, 8, 1, 1), w("b3", 16)])
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path.write_bytes(onnx_model.SerializeToString())
    return path


@pytest.mark.parametrize("group,stride,dil,block", [
    (1, 1, 1, (8, 2)),  # dense, residual: a power of two of the row's 10 columns
    (1, 2, 1, (8, 1)),  # strided: one column per work-item
    (4, 1, 2, (2, 10)),  # grouped, dilated rows: 2 channels per group, whole rows
])
def test_conv_blocks_unguarded_and_match_onnxruntime(tmp_path: Path, group: int, stride: int,
                                                     dil: int, block: tuple) -> None:
    """The padded 3x3 Conv reads a zero-padded copy of its input (a Pad launch) and its
    weights packed, so its kernel has no guard at all; its block (channels,
    columns per work-item) is the expected one; the bias, Relu and residual still fuse into
    the Convs (certified plan); outputs equal onnxruntime's."""
    path = _conv_block(tmp_path / "block.onnx", 10, group, stride, dil)
    program = load_onnx_model(str(path), target=REFERENCE_TARGET.with_variant("blocked")).program
    assert [op.kernel for op in program.launches if "pad" in op.kernel] == ["Conv_pad_2"]
    window = program.kernels["Conv_2"].source
    mb, ob = block
    assert "if (" not in window and window.count("float acc_") == mb * ob
    assert f"acc_{mb - 1}_{ob - 1} " in window
    assert "+ ml) + 0]" in window  # the packed weights: (g, c, kh, kw) then the block's channels
    sess = polyfuse.InferenceSession(str(path), _form="blocked")
    assert check_plan(sess.plan) == []
    assert sess.launches <= len(program.launches) - (3 if stride == 1 else 2)
    feeds = random_inputs(sess.io, seed=1)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("op,exact", [("Erf", math.erf), ("Tanh", math.tanh)])
def test_rational_erf_tanh_over_all_floats(op: str, exact: Any) -> None:
    """The rational Erf/Tanh (polyfuse/oplib/fastmath.py) within 4e-7 of the exact function
    on a dense grid, tiny and huge arguments; NaN stays NaN, infinities saturate."""
    x = np.concatenate([np.linspace(-12, 12, 24001), np.linspace(-1e-3, 1e-3, 2001),
                        [1e-30, -1e-30, 1e30, -1e30, np.inf, -np.inf, np.nan]]).astype(np.float32)
    opk = op_kernel(op, {}, [x.shape], [x.shape], name="k")
    (y,) = run_op(opk, [x], [x.shape])
    ref = np.array([exact(float(v)) for v in x[:-1]])
    err = np.abs(y[:-1].astype(np.float64) - ref)
    assert err.max() < 4e-7
    assert (err / np.maximum(np.abs(ref), 1e-30))[np.abs(x[:-1]) > 0].max() < 4e-7
    assert np.isnan(y[-1])


def test_block_columns_follow_the_device_vector_width() -> None:
    """Two native float vectors of columns per work-item (4 to 32); a product generated for a
    4-lane device uses 4 x 8 blocks and still computes A @ B."""
    assert [linalg.block_cols_for(w) for w in (1, 2, 4, 8, 16, 3)] == [4, 4, 8, 16, 32, 4]
    rng = np.random.default_rng(0)
    a = rng.random((2, 8, 24), dtype=np.float32)
    b = rng.random((24, 32), dtype=np.float32)
    variant = replace(KERNEL_VARIANTS["blocked"], block_cols=linalg.block_cols_for(4))
    opk = op_kernel("MatMul", {}, [a.shape, b.shape], [(2, 8, 32)], name="mm", variant=variant)
    assert opk.block is not None and (opk.block.rows, opk.block.cols) == (4, 8)
    (y,) = run_op(opk, [a, b], [(2, 8, 32)])
    np.testing.assert_allclose(y, a @ b, rtol=1e-5, atol=1e-5)


def _product_epilogue(path: Path, conv: bool, hw: int = 8) -> Path:
    """MatMul (or a 1x1 Conv over ``hw`` x ``hw`` pixels) -> Add (bias, or the residual
    input) -> Relu."""
    rng = np.random.default_rng(2)

    def w(name: str, *shape: int) -> Any:
        return numpy_helper.from_array((rng.random(shape) - 0.5).astype(np.float32), name)

    if conv:
        x_shape, inits = [1, 16, hw, hw], [w("w", 16, 16, 1, 1), w("b", 16)]
        nodes = [helper.make_node("Conv", ["x", "w", "b"], ["mm"], kernel_shape=[1, 1]),
                 helper.make_node("Add", ["mm", "x"], ["pre"])]
    else:
        x_shape, inits = [32, 24], [w("w", 24, 64), w("b", 64)]
        nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]),
                 helper.make_node("Add", ["mm", "b"], ["pre"])]
    y_shape = x_shape if conv else [32, 64]
    graph = helper.make_graph(
        [*nodes, helper.make_node("Relu", ["pre"], ["y"])], "epilogue",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], initializer=inits)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx_model.ir_version = 8
    path.write_bytes(onnx_model.SerializeToString())
    return path


@pytest.mark.parametrize("conv", [False, True])
def test_product_epilogue_reads_the_accumulators(tmp_path: Path, conv: bool) -> None:
    """MatMul/Conv -> Add -> Relu in one launch: the epilogue stays loops over the block, and
    its loads of the product's output (and of the Add's) become reads of private arrays the
    block is stored into; neither intermediate is stored any more; the epilogue's steps run in
    one loop nest; outputs equal onnxruntime's."""
    path = _product_epilogue(tmp_path / "epilogue.onnx", conv)
    _model, result = load_and_fuse(str(path), {}, None, form="blocked")
    assert check_plan(result.plan) == [] and result.plan.launches_after == 1
    fused = result.fused
    assert {"mm", "pre"} <= set(fused.dropped_buffers)
    assert fused.optimizations["stores_eliminated"] == 2
    [kernel] = fused.program.kernels.values()
    assert "for (int bi" in kernel.source and "for (int bj" in kernel.source
    assert "= pf_b1[bi][bj];" in kernel.source
    assert "pf_b1[0][0] = acc_0_0;" in kernel.source
    assert "f1_y[" not in kernel.source and "f2_y[" not in kernel.source
    # the Add's and the Relu's loops over the block run as one nest, where the Add's block
    # passes to the Relu in a register
    assert fused.optimizations["block_loops_fused"] == 1
    assert kernel.source.count("for (int bj") == 1
    assert "pf_b2 = " in kernel.source and "= pf_b2;" in kernel.source
    assert "pf_b2[" not in kernel.source
    sess = polyfuse.InferenceSession(str(path), _form="blocked")
    feeds = random_inputs(sess.io, seed=1)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("conv", [False, True])
def test_block_loads_keep_each_column_offset_grouped(tmp_path: Path, conv: bool) -> None:
    """The scalar block's loads of a row of B (a device without float vectors) add each column
    offset to the block's first column (``row_start + (c0 + j)``), also once fused: as
    ``(row_start + c0) + j`` PoCL 3.1 vectorized none of them (a 64x3136x256 product ran at
    47-49 GFLOP/s against 91-99, docs/performance.md "What did not pay")."""
    path = _product_epilogue(tmp_path / "epilogue.onnx", conv)
    result = result_of(compile_program(Compilation(
        target=REFERENCE_TARGET.with_variant("blocked"), options=Options(weigh=False),
        source=str(path)), ONNX_PASSES))
    [kernel] = result.fused.program.kernels.values()
    loads = re.findall(r"const float bv_\d+ = \w+\[(.*)\];", kernel.source)
    assert len(loads) >= 8 and all("c0" in x for x in loads)
    # the column offset is never the last term added to the whole address
    assert not [x for x in loads if re.search(r"\) \+ \d+$", x)]


def test_wide_conv_products_run_in_groups_along_their_columns(tmp_path: Path) -> None:
    """A 1x1 Conv over 32 x 32 pixels (WIDE_GROUP_MIN_COLUMNS) runs its blocks in work-groups
    of two row blocks by 16 column blocks, its residual Add and Relu fused in; the widths
    equal the brute-force oracle's and the outputs onnxruntime's."""
    path = _product_epilogue(tmp_path / "wide.onnx", True, hw=32)
    model, result = load_and_fuse(str(path), {}, None, form="blocked")
    [product] = [k for k in model.program.kernels.values() if "acc_0_0" in k.source]
    [launch] = [op for op in model.program.launches if op.kernel == product.name]
    assert tuple(launch.local_size) == (2, 16)
    assert width_mismatches(model.program, build_uar(model.program)) == []
    assert result.plan.launches_after == 1
    sess = polyfuse.InferenceSession(str(path), _form="blocked")
    feeds = random_inputs(sess.io, seed=1)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("gx,gy,max_wg,wide,shape", [
    (64, 98, 4096, True, (2, 14)),   # ResNet-50's 256 x 3136 product: 14 of 98 column blocks
    (16, 98, 4096, False, (16, 1)),  # not asked: row blocks first
    (64, 7, 4096, True, (16, 1)),    # no 8-16 column blocks divide 7: row blocks first
    (64, 98, 16, True, (16, 1)),     # a device whose groups hold 16 work-items
    (3, 96, 4096, True, (1, 16)),    # an odd number of row blocks
])
def test_group_shape_rule(gx: int, gy: int, max_wg: int, wide: bool,
                          shape: tuple[int, int]) -> None:
    assert linalg._group_shape(gx, gy, max_wg, wide) == shape


def _linear(path: Path, m: int, k: int, n: int, gemm: bool) -> Path:
    """``x @ W + b`` as PyTorch exports a Linear layer: Gemm with ``transB=1`` (2-D input) or
    MatMul + Add (3-D input), the weight an initializer."""
    rng = np.random.default_rng(3)
    w = (rng.random((n, k) if gemm else (k, n)) - 0.5).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array((rng.random(n) - 0.5).astype(np.float32), "b")]
    if gemm:
        nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)]
        x_shape, y_shape = [m, k], [m, n]
    else:
        nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]),
                 helper.make_node("Add", ["mm", "b"], ["y"])]
        x_shape, y_shape = [2, m // 2, k], [2, m // 2, n]
    graph = helper.make_graph(
        nodes, "linear", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], initializer=inits)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx_model.ir_version = 8
    path.write_bytes(onnx_model.SerializeToString())
    return path


@pytest.mark.parametrize("gemm,k", [(False, 16), (True, 16), (False, 1536)])
def test_constant_b_is_read_from_packed_panels(tmp_path: Path, gemm: bool, k: int) -> None:
    """A constant B wider than one block is regrouped at load time into K x CB panels (one
    per column block) the kernel reads contiguously, for MatMul, Gemm with transB=1 and the
    partial products of a split K alike; widths equal the brute-force oracle's and outputs
    onnxruntime's."""
    path = _linear(tmp_path / "linear.onnx", 8, k, 64, gemm)
    target = REFERENCE_TARGET.with_variant("blocked")
    model = load_onnx_model(str(path), target=target)
    part = k // 2 if k > 768 else k  # K = 1536 is split in two
    [product] = [k_ for k_ in model.program.kernels.values()
                 if "b[(kk * 32) + (" in k_.source and f"(c0 * {part})" in k_.source]
    assert "(kk * 64) + c0" not in product.source  # B's rows, 64 floats apart, not read
    if k <= 16:  # the oracle enumerates every instance: small sizes only
        assert width_mismatches(model.program, build_uar(model.program)) == []
    sess = polyfuse.InferenceSession(str(path), _form="blocked")
    feeds = random_inputs(sess.io, seed=1)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


def test_a_models_own_packed_panel_attribute_is_refused(tmp_path: Path) -> None:
    path = _linear(tmp_path / "linear.onnx", 8, 16, 64, gemm=False)
    import onnx

    model = onnx.load(str(path))
    model.graph.node[0].attribute.append(helper.make_attribute("packed_panel", 32))
    onnx.save(model, str(path))
    with pytest.raises(polyfuse.PolyfuseError, match="packed_panel"):
        load_onnx_model(str(path), target=REFERENCE_TARGET.with_variant("blocked"))


def _conv_relu(path: Path, x_shape: tuple[int, ...], w_shape: tuple[int, ...],
               y_shape: tuple[int, ...], seed: int, scale: float, **conv: Any) -> Path:
    """Conv (weights and bias uniform in +-``scale``, attributes ``conv``) -> Relu."""
    rng = np.random.default_rng(seed)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], **conv),
         helper.make_node("Relu", ["c"], ["y"])], "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))],
        [numpy_helper.from_array(rng.uniform(-scale, scale, w_shape).astype(np.float32), "w"),
         numpy_helper.from_array(rng.uniform(-scale, scale, w_shape[0]).astype(np.float32),
                                 "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("hw,stride", [(9, 2), (8, 2), (10, 3)])
def test_strided_pointwise_conv_is_a_product_of_a_subsampled_input(tmp_path: Path, hw: int,
                                                                    stride: int) -> None:
    """A 1x1 Conv at a stride (ResNet's projection shortcut) reads a strided Slice of its input
    (one launch) and is then the product form of a 1x1 Conv; with the Relu after it, outputs
    equal onnxruntime's, odd sizes included."""
    out = (hw - 1) // stride + 1
    path = _conv_relu(tmp_path / "shortcut.onnx", (1, 16, hw, hw), (32, 16, 1, 1),
                      (1, 32, out, out), 4, 0.5, kernel_shape=[1, 1], strides=[stride, stride])
    program = load_onnx_model(str(path), target=REFERENCE_TARGET.with_variant("blocked")).program
    kernels = [op.kernel for op in program.launches]
    assert kernels[0] == "Conv_subsample_0" and len(kernels) == 3
    conv = program.kernels[kernels[1]]
    assert "for (int kk" in conv.source and f"* {stride})" not in conv.source
    sess = polyfuse.InferenceSession(str(path), _form="blocked")
    feeds = random_inputs(sess.io, seed=1)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


def _mobilenet_block(path: Path, hw: int, width: int, stride: int, batch: int,
                     dil: int) -> Path:
    """MobileNetV2's inverted residual as ``torch.onnx.export`` writes it, small: Conv 1x1
    4->8, Clip(0, 6), depthwise 3x3 (pads 1 and ``dil`` on the columns, columns dilated by
    ``dil``, ``stride``), Clip(0, 6), Conv 1x1 8->4, and at stride 1 the residual Add."""
    rng = np.random.default_rng(5)

    def w(name: str, *shape: int) -> Any:
        return numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)

    out = ((hw - 1) // stride + 1, (width - 1) // stride + 1)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[1, 1]),
        helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], group=8,
                         pads=[1, dil, 1, dil], strides=[stride] * 2, dilations=[1, dil]),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3" if stride == 1 else "y"],
                         kernel_shape=[1, 1]),
    ]
    if stride == 1:
        nodes.append(helper.make_node("Add", ["x", "c3"], ["y"]))
    graph = helper.make_graph(
        nodes, "mobilenet_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4, hw, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, *out])],
        [w("w1", 8, 4, 1, 1), w("b1", 8), w("w2", 8, 1, 3, 3), w("b2", 8), w("w3", 4, 8, 1, 1),
         w("b3", 4), numpy_helper.from_array(np.array(0, np.float32), "lo"),
         numpy_helper.from_array(np.array(6, np.float32), "hi")])
    path.write_bytes(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    return path


@pytest.mark.parametrize("hw,width,stride,batch,dil", [
    (10, 10, 1, 1, 1),  # residual
    (9, 13, 2, 2, 1),  # odd sizes, strided, two images
    (11, 7, 2, 1, 2),  # strided, dilated columns
    (7, 12, 1, 2, 2),  # dilated columns, two images
])
def test_depthwise_conv_reads_its_padding(tmp_path: Path, hw: int, width: int, stride: int,
                                          batch: int, dil: int) -> None:
    """A depthwise Conv's blocks are whole output rows, so it reads its padding itself: no
    Pad launch, and no guard in its kernel (pad columns are zeros never loaded, pad rows
    outside the window loop's bounds; at a stride the row a loop over the columns).  Its
    Clip still fuses into it (certified plan: three launches for the block); the front-end's
    widths equal the brute-force oracle's; outputs equal onnxruntime's."""
    path = _mobilenet_block(tmp_path / "block.onnx", hw, width, stride, batch, dil)
    program = load_onnx_model(str(path), target=REFERENCE_TARGET.with_variant("blocked")).program
    assert not any("pad" in op.kernel for op in program.launches)
    window = program.kernels["Conv_2"].source
    assert "if (" not in window and "for (int kh = kh_lo; kh < kh_hi; kh++)" in window
    assert ("for (long j = " in window) is (stride > 1)
    assert width_mismatches(program, build_uar(program)) == []
    sess = polyfuse.InferenceSession(str(path), _form="blocked")
    assert check_plan(sess.plan) == []
    assert sess.launches == 3
    feeds = random_inputs(sess.io, seed=1)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("x_shape,attrs,y_shape", [
    ((2, 6, 11), {"pads": [2, 1], "strides": [2]}, (2, 6, 6)),  # 1-D, two images, uneven
    ((1, 6, 9, 10), {"pads": [2, 0, 1, 2], "strides": [2, 2]}, (1, 6, 5, 5)),
    ((1, 6, 7, 9), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (1, 6, 4, 5)),
    ((1, 6, 5, 6), {"pads": [2, 2, 2, 2], "strides": [1, 1]}, (1, 6, 7, 8)),  # one tap inside
])
def test_depthwise_conv_pads_match_onnxruntime(tmp_path: Path, x_shape: tuple, attrs: dict,
                                               y_shape: tuple) -> None:
    """Uneven and wide pads, 1-D, SAME_UPPER: no Pad launch, outputs equal onnxruntime's."""
    rng = np.random.default_rng(7)
    k = [3] * (len(x_shape) - 2)
    w = numpy_helper.from_array(rng.uniform(-1, 1, (6, 1, *k)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.uniform(-1, 1, 6).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=k, group=6, **attrs)],
        "dw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_shape))], [w, b])
    path = tmp_path / "dw.onnx"
    path.write_bytes(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    program = load_onnx_model(str(path), target=REFERENCE_TARGET.with_variant("blocked")).program
    assert [op.kernel for op in program.launches] == ["Conv_0"]
    assert "if (" not in program.kernels["Conv_0"].source
    assert width_mismatches(program, build_uar(program)) == []
    sess = polyfuse.InferenceSession(str(path), _form="blocked")
    feeds = random_inputs(sess.io, seed=2)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


def test_depthwise_conv_pads_in_kernel_rule() -> None:
    budget = linalg.BLOCK_ROWS * 32
    assert linalg.conv_pads_in_kernel(1, 56, 1, budget)  # MobileNetV2's 56 x 56, 192 channels
    assert linalg.conv_pads_in_kernel(1, 28, 2, budget)  # its stride-2 block
    assert not linalg.conv_pads_in_kernel(1, 112, 1, budget)  # blocks of 56: a Pad launch
    assert not linalg.conv_pads_in_kernel(1, 56, 1, budget, row_dilation=2)
    assert not linalg.conv_pads_in_kernel(16, 16, 1, budget)  # dense: a Pad launch


@pytest.mark.parametrize("mpg,ow,stride,block", [
    (64, 56, 1, (16, 8)),  # ResNet-50's first stage
    (128, 28, 1, (16, 4)),  # its second: blocks of 14 columns ran at 2.6-5.8 GFLOP/s
    (256, 14, 1, (32, 2)),
    (512, 7, 1, (32, 1)),
    (128, 28, 2, (32, 2)),  # strided
    (1, 28, 2, (1, 28)),  # depthwise: the whole row
])
def test_conv_blocks_are_powers_of_two_columns(mpg: int, ow: int, stride: int,
                                               block: tuple) -> None:
    assert linalg.conv_block_shape(mpg, ow, stride, linalg.BLOCK_ROWS * 32) == block


@pytest.mark.parametrize("hw,width,stride,dil,batch,pixels", [
    (12, 12, 1, 1, 1, 144),  # 12-column rows: direct blocks of 4; 144 columns, 16 a block
    (19, 7, 1, 1, 2, 144),  # odd rows, two images: a batched product, 133 pixels of 144
    (21, 31, 2, 1, 1, 176),  # odd sizes at stride 2: 11 x 16 outputs
    (13, 13, 1, 2, 1, 176),  # dilated: 13 x 13 = 169 pixels of 176
])
def test_narrow_conv_is_an_implicit_gemm(tmp_path: Path, hw: int, width: int, stride: int,
                                         dil: int, batch: int, pixels: int) -> None:
    """A dense 3x3 Conv whose direct blocks would be narrow runs as an Im2Col launch (its
    columns rounded up to 16) and the product of the weights and those columns; its bias,
    Relu (and the residual after the next Conv) still fuse into the products (certified
    plan); outputs equal onnxruntime's."""
    path = _conv_block(tmp_path / "block.onnx", hw, 1, stride, dil, width, batch)
    program = load_onnx_model(str(path), target=REFERENCE_TARGET.with_variant("blocked")).program
    kernels = [op.kernel for op in program.launches]
    at = kernels.index("Conv_pad_2")
    assert kernels[at:at + 3] == ["Conv_pad_2", "Conv_im2col_2", "Conv_2"]
    # the first 1x1 Conv too where the input's pixels are not a multiple of 16
    assert ("Conv_im2col_0" in kernels) is ((hw * width) % 16 != 0)
    window = program.kernels["Conv_2"].source
    assert "for (int kk = 0; kk < 72; kk++)" in window  # 8 channels x the 3x3 window
    assert f"(kk * {pixels})" in window  # the Im2Col's rows, ``pixels`` columns apart
    if "Conv_im2col_0" in kernels:  # a 1x1 window's copy: in the product's 16-column panels
        assert "x[(kk * 16) + (" in program.kernels["Conv_0"].source
    stored = ((hw - 1) // stride + 1) * ((width - 1) // stride + 1)
    # ragged: the block stored through a private array by a guarded loop nest
    assert (f"< {stored})" in window) is (stored < pixels) is ("float blk[" in window)
    im2col = program.kernels["Conv_im2col_2"].source
    assert "for (int ow = 0; ow < " in im2col and "/ 16)" not in im2col
    sess = polyfuse.InferenceSession(str(path), _form="blocked")
    assert check_plan(sess.plan) == []
    assert sess.launches <= len(program.launches) - (3 if stride == 1 else 2)
    # a ragged block's guarded store nest hands the block to the epilogue in a private array
    if stored < pixels:
        assert re.search(r"pf_b\d+\[bi\]\[bj\] = blk\[bi\]\[bj\];", sess.source)
    feeds = random_inputs(sess.io, seed=1)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("m,k,cb,rows", [
    (512, 4608, 32, 8),  # ResNet-50's last 3x3 Conv: a 590 kB panel of B
    (256, 2304, 16, 4),  # its third stage: 147 kB
    (4, 4608, 32, 4),    # not two row blocks of 8 channels' worth: BLOCK_ROWS divides
    (12, 4608, 32, 4),
])
def test_im2col_block_rows_rule(m: int, k: int, cb: int, rows: int) -> None:
    assert linalg.im2col_block_rows(m, k, cb, KERNEL_VARIANTS["blocked"]) == rows


def test_a_deep_im2col_product_runs_taller_blocks(tmp_path: Path) -> None:
    """A 3x3 Conv of 256 channels on 16 x 12 pixels (rows of 12: an Im2Col product; K = 2304,
    192 columns in blocks of 32: a 295 kB panel) runs 8-row blocks; outputs equal
    onnxruntime's."""
    path = _conv_relu(tmp_path / "deep.onnx", (1, 256, 16, 12), (16, 256, 3, 3), (1, 16, 16, 12),
                      5, 0.1, kernel_shape=[3, 3], pads=[1] * 4)
    program = load_onnx_model(str(path), target=REFERENCE_TARGET.with_variant("blocked")).program
    product = program.kernels["Conv_0"].source
    assert "for (int kk = 0; kk < 2304; kk++)" in product
    assert "acc_7_31" in product and "acc_8_0" not in product
    sess = polyfuse.InferenceSession(str(path), _form="blocked")
    feeds = random_inputs(sess.io, seed=1)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("hw,stride,dil", [(12, 1, 1), (25, 2, 2)])
def test_im2col_widths_equal_the_bruteforce_oracle(tmp_path: Path, hw: int, stride: int,
                                                   dil: int) -> None:
    """Ragged columns included (13 x 13 = 169 pixels of 176 at stride 2)."""
    path = _conv_block(tmp_path / "block.onnx", hw, 1, stride, dil)
    program = load_onnx_model(str(path), target=REFERENCE_TARGET.with_variant("blocked")).program
    assert any("im2col" in op.kernel for op in program.launches)
    assert width_mismatches(program, build_uar(program)) == []


@pytest.mark.parametrize("mpg,hw,stride,product", [
    (128, 28, 1, True),  # ResNet-50's second stage: direct 49 GFLOP/s, Im2Col + product 98
    (128, 28, 2, True),  # its downsampling 3x3: direct 46, 94
    (256, 14, 1, True),  # 196 pixels, 208 columns: 51 against 89
    (64, 56, 1, False),  # 16 x 8 direct blocks: 82 against 63
    (512, 7, 1, True),  # 49 pixels of 64, 4 x 32 blocks in panels: direct 13-14, 77
    (128, 7, 1, False),  # 49 pixels and few channels (small models) stay direct
])
def test_conv_as_product_rule(mpg: int, hw: int, stride: int, product: bool) -> None:
    budget = linalg.BLOCK_ROWS * 32
    assert linalg.conv_as_product(1, (3, 3), (hw, hw), (stride, stride), mpg, budget) is product
    assert not linalg.conv_as_product(4, (3, 3), (hw, hw), (stride, stride), mpg, budget)
    # a 1x1 Conv only where its pixels are not a multiple of 16 (14 x 14: 28 against 84)
    assert linalg.conv_as_product(1, (1, 1), (hw, hw), (1, 1), mpg, budget) is \
        (hw == 14 or hw == 7 and mpg >= 256)


@pytest.mark.parametrize("op,attr", [("Im2Col", None), ("Conv", "im2col")])
def test_the_front_ends_own_im2col_is_refused_in_a_model(tmp_path: Path, op: str,
                                                         attr: Any) -> None:
    attrs = {attr: 1} if attr else {}
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "w"] if op == "Conv" else ["x"], ["y"],
                          kernel_shape=[1, 1], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])],
        [numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")])
    path = tmp_path / "im2col.onnx"
    path.write_bytes(helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    with pytest.raises(polyfuse.PolyfuseError, match="Im2Col|im2col"):
        load_onnx_model(str(path), target=REFERENCE_TARGET.with_variant("blocked"))
