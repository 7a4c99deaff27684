"""Every isl call a user reaches is bounded: a ResNet-50 bottleneck block at 56x56 (the
blocked convolution kernels) builds its UAR in bounded time, the dependences isl cannot
compute within its quota labelled global with the reason."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def bottleneck(hw: int) -> onnx.ModelProto:
    """Conv 1x1 256->64, Relu, Conv 3x3 pad 1 64->64, Relu, Conv 1x1 64->256, + x, Relu."""
    rng = np.random.default_rng(0)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * 0.05).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["c3", "x"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    shape = [1, 256, hw, hw]
    graph = helper.make_graph(
        nodes, "bottleneck", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [w("w1", 64, 256, 1, 1), w("b1", 64), w("w2", 64, 64, 3, 3), w("b2", 64),
         w("w3", 256, 64, 1, 1), w("b3", 256)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.slow
def test_resnet_bottleneck_uar_is_bounded(tmp_path: Path) -> None:
    from polyfuse.frontend.onnx import load_onnx
    from polyfuse.oplib import kernel_variant
    from polyfuse.uar import build_uar
    from polyfuse.uar.graph import APPROXIMATE_REASON

    path = tmp_path / "bottleneck.onnx"
    onnx.save(bottleneck(56), str(path))
    with kernel_variant("blocked"):  # the form whose isl calls ran for hours unbounded
        program = load_onnx(str(path))
    t0 = time.perf_counter()
    uar = build_uar(program)
    assert time.perf_counter() - t0 < 60
    launches = [op.id for op in program.launches]
    chain = {(e.src, e.dst) for e in uar.edges if e.kind == "RAW"}
    assert all((a, b) in chain for a, b in zip(launches, launches[1:]))
    coarse = [e for e in uar.edges if e.witness and APPROXIMATE_REASON in str(e.witness)]
    assert all(e.width == "global" for e in coarse)
