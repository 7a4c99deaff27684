"""The blocked product in OpenCL vectors (``KernelVariant.vector_width``, polyfuse/oplib/linalg.py).

On a device with native float vectors the blocked product keeps its accumulators in
``float<w>`` vectors and reads B's row with ``vload<w>`` wherever B's elements along the block's
columns are consecutive; a gathered B (a ``transB`` operand that is not constant) stays named
scalars.  Checked here for a target asking for 16 lanes whatever the machine: the rules, the
kernels' forms, the front-end's widths against the brute-force oracle, legal plans, fused
epilogues, and outputs equal to onnxruntime's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from polyfuse.apps.onnx_run import (  # noqa: E402
    ATOL,
    ONNX_PASSES,
    RTOL,
    _run,
    onnxruntime_reference,
    random_inputs,
)
from polyfuse.core.program import KERNEL_VARIANTS, REFERENCE_TARGET, Target  # noqa: E402
from polyfuse.frontend.onnx import load_onnx_model  # noqa: E402
from polyfuse.fusion import check_plan  # noqa: E402
from polyfuse.oplib import linalg  # noqa: E402
from polyfuse.oplib._common import vector_lanes  # noqa: E402
from polyfuse.oracle.bruteforce import width_mismatches  # noqa: E402
from polyfuse.passes.compilation import Compilation, Options  # noqa: E402
from polyfuse.passes.pipeline import compile_program, result_of  # noqa: E402
from polyfuse.uar import build_uar  # noqa: E402

#: a device with 16-lane float vectors (AVX-512): blocks of 8 x 32 in two vectors per row
VECTOR16: Target = replace(REFERENCE_TARGET, kernel=replace(KERNEL_VARIANTS["blocked"],
                                                            vector_width=16))


@pytest.mark.parametrize("native,cols,width", [
    (16, 32, 16), (16, 16, 16), (16, 8, 8), (16, 4, 4), (16, 12, 4), (16, 6, 1), (16, 1, 1),
    (8, 32, 8), (8, 16, 8), (4, 16, 4), (1, 32, 1), (2, 32, 1),
])
def test_vector_lanes_rule(native: int, cols: int, width: int) -> None:
    assert vector_lanes(native, cols) == width


def test_vector_block_shapes() -> None:
    """16 lanes: 8 x 32 (16 accumulator vectors) at any K; 8 lanes: 4 x 16 (8 vectors); the
    scalar block keeps narrowing where B's panel exceeds PANEL_BYTES."""
    assert linalg.vector_block_rows(16, 32) == 8 and linalg.vector_block_rows(8, 16) == 4
    assert linalg.block_shape(128, 3072, 3072, 32, 16) == (8, 32)
    assert linalg.block_shape(128, 3072, 768, 16, 8) == (4, 16)
    assert linalg.block_shape(128, 3072, 3072, 32) == (8, 16)
    assert linalg.block_shape(12, 784, 64, 32, 16) == (4, 16)
    assert linalg.im2col_block_rows(256, 2304, 16, VECTOR16.kernel) == 8
    assert linalg.im2col_block_rows(12, 2304, 32, VECTOR16.kernel) == 4


@pytest.mark.parametrize("elem,expected", [
    ("x[kk * N + col]", ("x", "kk * N + col")),
    ("b[kk * CB + (c0 * K + (col - c0))]", ("b", "kk * CB + (c0 * K + (col - c0))")),
    ("x[(batch / 2) * K * N + kk * N + col]", ("x", "(batch / 2) * K * N + kk * N + col")),
    ("b[col * K + kk]", None),        # transB: a gather
    ("x[(kk * N + col) / 2]", None),  # a quotient of the column
    ("x[kk - col]", None),            # decreasing
    ("x[idx[col]]", None),            # indirect
    ("x[kk * N]", None),              # no column at all
    ("x[col + col]", None),           # stride 2
])
def test_unit_stride_loads(elem: str, expected: object) -> None:
    assert linalg._unit_stride_load(elem, "col") == expected


def _save(path: Path, nodes: list, inputs: dict[str, list[int]], output: list[int],
          inits: list) -> Path:
    graph = helper.make_graph(
        nodes, "vector", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                          for n, s in inputs.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, output)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


def _const(rng: np.random.Generator, name: str, *shape: int) -> object:
    return numpy_helper.from_array((rng.random(shape) - 0.5).astype(np.float32), name)


def _models(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Models in the style of PyTorch exports, each with the form of its product kernel:
    ``product`` (B's rows by ``vload``), ``conv`` (the direct Conv in vectors of channels) or
    ``scalar``."""
    rng = np.random.default_rng(7)
    relu = helper.make_node("Relu", ["pre"], ["y"])

    def conv(name: str, x: list[int], w: list[int], y: list[int], **attrs: object) -> Path:
        return _save(tmp_path / f"{name}.onnx", [
            helper.make_node("Conv", ["x", "w", "b"], ["pre"], **attrs), relu], {"x": x}, y,
            [_const(rng, "w", *w), _const(rng, "b", w[0])])

    return {
        # Linear + bias + ReLU: constant B packed in panels, the bias added in the epilogue
        "linear": (_save(tmp_path / "linear.onnx", [
            helper.make_node("MatMul", ["x", "w"], ["mm"]),
            helper.make_node("Add", ["mm", "b"], ["pre"]), relu],
            {"x": [32, 24]}, [32, 64], [_const(rng, "w", 24, 64), _const(rng, "b", 64)]),
            "product"),
        # attention scores: both operands computed, batched over heads
        "batched": (_save(tmp_path / "batched.onnx", [
            helper.make_node("MatMul", ["q", "k"], ["pre"]), relu],
            {"q": [2, 16, 24], "k": [2, 24, 48]}, [2, 16, 48], []), "product"),
        # Gemm with a computed transB operand: B's columns are K apart, read one by one
        "gather": (_save(tmp_path / "gather.onnx", [
            helper.make_node("Gemm", ["x", "wt"], ["pre"], transB=1), relu],
            {"x": [16, 24], "wt": [32, 24]}, [16, 32], []), "scalar"),
        # 1x1 Conv with its bias and a residual Add fused in
        "pointwise": (_save(tmp_path / "pointwise.onnx", [
            helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[1, 1]),
            helper.make_node("Add", ["c", "x"], ["pre"]), relu],
            {"x": [1, 16, 8, 8]}, [1, 16, 8, 8], [_const(rng, "w", 16, 16, 1, 1),
                                                  _const(rng, "b", 16)]), "product"),
        # 1x1 Conv on 12 x 12 pixels: an Im2Col product whose last column block is ragged
        "im2col": (conv("im2col", [1, 16, 12, 12], [32, 16, 1, 1], [1, 32, 12, 12],
                        kernel_shape=[1, 1]), "product"),
        # 3x3 Convs, padded, at stride 1 (rows of 12) and 2: the direct Conv
        "direct": (conv("direct", [1, 8, 12, 12], [32, 8, 3, 3], [1, 32, 12, 12],
                        kernel_shape=[3, 3], pads=[1, 1, 1, 1]), "conv"),
        "strided": (conv("strided", [1, 8, 13, 13], [16, 8, 3, 3], [1, 16, 7, 7],
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]), "conv"),
        # 6 channels per group: no vector of 4 or more, the scalar direct Conv
        "grouped": (conv("grouped", [1, 12, 10, 10], [12, 6, 3, 3], [1, 12, 10, 10],
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=2), "scalar"),
    }


@pytest.mark.parametrize("name", ["linear", "batched", "gather", "pointwise", "im2col", "direct",
                                  "strided", "grouped"])
def test_vector_products_are_exact_fuse_and_match_onnxruntime(tmp_path: Path, name: str) -> None:
    path, form = _models(tmp_path)[name]
    model = load_onnx_model(str(path), target=VECTOR16)
    products = [k.source for k in model.program.kernels.values() if "acc_0_0" in k.source]
    assert products
    for source in products:
        assert ("vload" in source) == (form != "scalar")
        assert ("acc_0_v0 += av_0 * bv_v0;" in source) == (form == "product")
        assert ("acc_c0_v0 += xv_0 * wv_v0_0;" in source) == (form == "conv")
    assert width_mismatches(model.program, build_uar(model.program)) == []
    c = compile_program(Compilation(target=VECTOR16, options=Options(weigh=False),
                                    source=str(path), program=model.program, model=model),
                        ONNX_PASSES)
    result = result_of(c)
    assert check_plan(result.plan) == []
    assert result.plan.launches_after < len(model.program.launches)
    fused = "\n".join(k.source for k in result.fused.program.kernels.values())
    assert ("vload" in fused) == (form != "scalar")
    feeds = random_inputs(model.io, seed=3)
    reference = onnxruntime_reference(str(path), feeds)["y"]
    for program in (model.program, result.fused.program):
        got = _run(model, program, feeds, device=None)["y"]
        np.testing.assert_allclose(got, reference, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("mpg,ow,stride,vector_width,shape", [
    (64, 56, 1, 16, (32, 8)),   # ResNet-50's 3x3 at 56 x 56
    (128, 28, 2, 16, (32, 7)),  # at stride 2, rows of 28: any divisor of the row
    (512, 7, 1, 16, (32, 7)),
    (16, 56, 1, 16, (16, 14)),  # one vector of channels: 16 columns' worth
    (64, 56, 1, 8, (16, 4)),    # AVX2: 8 lanes, 8 accumulator vectors
    (64, 56, 1, 1, (16, 8)),    # no vectors: the scalar rule
])
def test_conv_block_shape_in_vectors(mpg: int, ow: int, stride: int, vector_width: int,
                                     shape: tuple[int, int]) -> None:
    assert linalg.conv_block_shape(mpg, ow, stride, 128, vector_width) == shape


def test_the_model_counts_vector_blocks_apart(tmp_path: Path) -> None:
    """The performance model's ``vector_block_flops`` are the vector product's block ops,
    ``block_flops`` the scalar product's: the same multiply-adds, in the feature each form's
    calibration kernel (``calib_vblock``, ``calib_block``) prices."""
    from polyfuse.perf.counts import count_program
    from polyfuse.perf.model import features_of

    path, _ = _models(tmp_path)["linear"]
    scalar = replace(VECTOR16, kernel=replace(VECTOR16.kernel, vector_width=1))
    found = {}
    for name, target in (("vector", VECTOR16), ("scalar", scalar)):
        program = load_onnx_model(str(path), target=target).program
        [launch] = [op for op in program.launches if "acc_0_0" in
                    program.kernels[op.kernel].source]
        found[name] = features_of(count_program(program)[launch.id]).values
    multiply_adds = 32 * 64 * 24
    assert found["vector"]["vector_block_flops"] == found["scalar"]["block_flops"] == \
        multiply_adds
    assert found["vector"]["block_flops"] == found["scalar"]["vector_block_flops"] == 0


@pytest.mark.parametrize("length,vectors", [(48, True), (30, False)])
def test_softmax_rows_in_vectors(tmp_path: Path, length: int, vectors: bool) -> None:
    """Attention's masked Softmax in the row form walks each row in ``float16`` vectors where
    the row is a multiple of 4 (named partials otherwise); widths equal the brute-force
    oracle's, the plan is legal and the outputs equal onnxruntime's, masked rows included."""
    mask = np.triu(np.full((length, length), -np.inf, np.float32), 1)
    path = _save(tmp_path / "softmax.onnx", [
        helper.make_node("Mul", ["s", "scale"], ["scaled"]),
        helper.make_node("Add", ["scaled", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["y"], axis=-1)],
        {"s": [1, 2, length, length]}, [1, 2, length, length],
        [numpy_helper.from_array(np.array(0.125, np.float32), "scale"),
         numpy_helper.from_array(mask.reshape(1, 1, length, length), "mask")])
    model = load_onnx_model(str(path), target=VECTOR16)
    [softmax] = [k.source for k in model.program.kernels.values() if "row_max" in k.source]
    assert ("vload" in softmax) == vectors
    assert width_mismatches(model.program, build_uar(model.program)) == []
    result = result_of(compile_program(Compilation(
        target=VECTOR16, options=Options(weigh=False), source=str(path),
        program=model.program, model=model), ONNX_PASSES))
    assert check_plan(result.plan) == []
    feeds = random_inputs(model.io, seed=4)
    reference = onnxruntime_reference(str(path), feeds)["y"]
    for program in (model.program, result.fused.program):
        np.testing.assert_allclose(_run(model, program, feeds, device=None)["y"], reference,
                                   rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("height,width,vector,multiplier", [
    (16, 16, 16, 1), (9, 24, 8, 1), (12, 20, 4, 1), (15, 15, 0, 1), (10, 16, 16, 2)])
def test_strided_depthwise_rows_in_vectors(tmp_path: Path, height: int, width: int,
                                           vector: int, multiplier: int) -> None:
    """A depthwise 3x3 Conv at stride 2 (MobileNet's downsampling) reads its input rows in
    the widest vectors that divide them and splits their even and odd lanes; an odd row
    keeps the scalar strided loop; a depth multiplier of 2 reads each row for both of its
    channels.  Exact widths, fused with its Relu, onnxruntime's numbers (the pad rows and
    the pad column included)."""
    rng = np.random.default_rng(11)
    channels = 6 * multiplier
    out = [1, channels, (height - 1) // 2 + 1, (width - 1) // 2 + 1]
    path = _save(tmp_path / "dw.onnx", [
        helper.make_node("Conv", ["x", "w", "b"], ["pre"], kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[2, 2], group=6),
        helper.make_node("Relu", ["pre"], ["y"])], {"x": [1, 6, height, width]}, out,
        [_const(rng, "w", channels, 1, 3, 3), _const(rng, "b", channels)])
    model = load_onnx_model(str(path), target=VECTOR16)
    source = next(k.source for k in model.program.kernels.values() if "Conv" in k.source)
    assert ("v_0.even" in source) == bool(vector), source
    assert (f"vload{vector}(" in source) == bool(vector)
    assert width_mismatches(model.program, build_uar(model.program)) == []
    c = compile_program(Compilation(target=VECTOR16, options=Options(weigh=False),
                                    source=str(path), program=model.program, model=model),
                        ONNX_PASSES)
    result = result_of(c)
    assert result.plan.launches_after < len(model.program.launches)
    feeds = random_inputs(model.io, seed=5)
    reference = onnxruntime_reference(str(path), feeds)["y"]
    for program in (model.program, result.fused.program):
        got = _run(model, program, feeds, device=None)["y"]
        np.testing.assert_allclose(got, reference, rtol=RTOL, atol=ATOL)
