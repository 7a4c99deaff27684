"""Convolution blocks build their UAR in seconds with exact widths: a ResNet-50 bottleneck
block and a MobileNet-style block (depthwise 3x3) at 56x56 in both kernel forms, no dependence
left to the quota's conservative fallback, and on small sizes every width equal to the
brute-force oracle's.  (The blocked form's footprints, floor/mod constraints over the
work-item's block, once made isl's dataflow and bounds check run for minutes.)"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from polyfuse.core.program import REFERENCE_TARGET  # noqa: E402
from polyfuse.frontend.onnx import load_onnx  # noqa: E402
from polyfuse.oracle.bruteforce import width_mismatches  # noqa: E402
from polyfuse.uar import build_uar  # noqa: E402
from polyfuse.uar.graph import APPROXIMATE_REASON, UAR  # noqa: E402
from polyfuse.uar.width import QUOTA_REASON  # noqa: E402


def conv_block(hw: int, wide: int = 256, narrow: int = 64, group: int = 1, stride: int = 1,
               residual: bool = True) -> onnx.ModelProto:
    """Conv 1x1 wide->narrow, Relu, Conv 3x3 pad 1 (``group``, ``stride``), Relu, Conv 1x1
    narrow->wide, then + x and Relu when ``residual`` (the defaults: a ResNet-50 bottleneck;
    ``group=narrow``: a MobileNet inverted residual's depthwise convolution)."""
    rng = np.random.default_rng(0)

    def w(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(
            (rng.standard_normal(shape) * 0.05).astype(np.float32), name)

    out = (hw - 1) // stride + 1
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], group=group, strides=[stride, stride]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3" if residual else "y"],
                         kernel_shape=[1, 1]),
    ]
    if residual:
        nodes += [helper.make_node("Add", ["c3", "x"], ["s"]),
                  helper.make_node("Relu", ["s"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, wide, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, wide, out, out])],
        [w("w1", narrow, wide, 1, 1), w("b1", narrow), w("w2", narrow, narrow // group, 3, 3),
         w("b2", narrow), w("w3", wide, narrow, 1, 1), w("b3", wide)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def bottleneck(hw: int) -> onnx.ModelProto:
    """Conv 1x1 256->64, Relu, Conv 3x3 pad 1 64->64, Relu, Conv 1x1 64->256, + x, Relu."""
    return conv_block(hw)


def _approximate(uar: UAR) -> list[str]:
    """Edges labelled by a quota's fallback rather than computed."""
    return [f"{e.src}->{e.dst} {e.array}" for e in uar.edges if e.witness and any(
        r in str(e.witness) for r in (APPROXIMATE_REASON, QUOTA_REASON))]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["blocked", "tiled"])
@pytest.mark.parametrize("block", ["bottleneck", "depthwise"])
def test_conv_block_uar_in_seconds_and_exact(tmp_path: Path, variant: str, block: str) -> None:
    """56x56: the UAR in under 10 s (about 2 s here in the blocked form; minutes before), every
    edge computed (none from the quota's fallback), each activation fused to its producer
    (thread), and the chain of launches complete."""
    path = tmp_path / "block.onnx"
    model = bottleneck(56) if block == "bottleneck" else conv_block(56, 32, 192, group=192)
    onnx.save(model, str(path))
    program = load_onnx(str(path), target=REFERENCE_TARGET.with_variant(variant))
    t0 = time.perf_counter()
    uar = build_uar(program)
    assert time.perf_counter() - t0 < 10
    assert _approximate(uar) == []
    launches = [op.id for op in program.launches]
    chain = {(e.src, e.dst): e.width for e in uar.edges if e.kind == "RAW"}
    assert all((a, b) in chain for a, b in zip(launches, launches[1:]))
    kernels = {op.id: op.kernel for op in program.launches}
    assert all(chain[(a, b)] == "thread" for a, b in zip(launches, launches[1:])
               if kernels[a].startswith("Conv") and kernels[b].startswith("Relu"))


@pytest.mark.parametrize("variant", ["blocked", "tiled"])
@pytest.mark.parametrize("hw, wide, narrow, group, stride", [
    (8, 16, 8, 1, 1),  # bottleneck, 8-column blocks
    (7, 8, 4, 1, 1),  # a width the block does not divide
    (6, 8, 8, 8, 1),  # depthwise
    (9, 8, 8, 2, 2),  # grouped, strided
])
def test_conv_block_widths_equal_the_oracle(tmp_path: Path, variant: str, hw: int, wide: int,
                                             narrow: int, group: int, stride: int) -> None:
    path = tmp_path / "block.onnx"
    onnx.save(conv_block(hw, wide, narrow, group, stride, residual=stride == 1), str(path))
    program = load_onnx(str(path), target=REFERENCE_TARGET.with_variant(variant))
    uar = build_uar(program)
    assert _approximate(uar) == []
    assert width_mismatches(program, uar) == []


@pytest.mark.parametrize("variant", ["blocked", "tiled"])
def test_conv_block_walk_equals_isl_dataflow(tmp_path: Path, variant: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """On a small block, the walk that loop-free buffers get gives exactly isl's dataflow (same
    dependences, equal relations)."""
    from polyfuse.uar import deps
    from polyfuse.uar.effects import instantiate

    path = tmp_path / "block.onnx"
    onnx.save(conv_block(8, 16, 8), str(path))
    program = load_onnx(str(path), target=REFERENCE_TARGET.with_variant(variant))
    inst = instantiate(program)
    sched = deps.host_schedule(inst)
    found = {}
    for threshold in (10**9, 0):
        monkeypatch.setattr(deps, "WINDOW_MIN_OPS", threshold)
        found[threshold] = {(d.kind, d.buffer, d.src, d.dst): d for d in
                            deps.dependences(inst, sched)}
    whole, walk = found[10**9], found[0]
    assert whole and set(whole) == set(walk)
    assert not any(d.approximate for d in whole.values())
    assert all(whole[k].relation.is_equal(walk[k].relation) for k in whole)
