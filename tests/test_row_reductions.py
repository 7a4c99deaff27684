"""Softmax and LayerNormalization in the CPU's row form: one work-item per row, no barrier.

The ``blocked`` variant (:attr:`polyfuse.core.program.KernelVariant.row_accumulators`) runs each
row on one work-item, each pass a loop into named partial results (a work-group of lanes with a
``__local`` tree costs a loop over the group per barrier on a CPU).  Checked here at odd sizes
(rows of 1, 3, 127 and 769 elements, one row and many, Softmax along a non-last axis) against
onnxruntime, for exact analysability, for widths equal to the brute-force oracle's in a small
model, and that the ``tiled`` form keeps its work-group tree.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from polyfuse.core.program import (  # noqa: E402
    KERNEL_VARIANTS,
    REFERENCE_TARGET,
    KernelContext,
    Program,
    Target,
)
from polyfuse.frontend.onnx import load_onnx  # noqa: E402
from polyfuse.frontend.opencl import parse_kernels  # noqa: E402
from polyfuse.oplib import op_kernel  # noqa: E402
from polyfuse.oracle.bruteforce import width_mismatches  # noqa: E402
from polyfuse.runtime.oplib_run import run_op  # noqa: E402
from polyfuse.uar import build_uar  # noqa: E402

RNG = np.random.default_rng(22)
BLOCKED = KERNEL_VARIANTS["blocked"]


def _onnxruntime(op: str, attrs: dict, inputs: list[Optional[np.ndarray]],
                 n_out: int) -> list[np.ndarray]:
    """``op`` on ``inputs`` (None: an absent optional input) through onnxruntime."""
    names = [f"i{k}" if x is not None else "" for k, x in enumerate(inputs)]
    while not names[-1]:  # a trailing empty name crashes onnxruntime 1.x's LayerNormalization
        names.pop()
    outs = [f"o{k}" for k in range(n_out)]
    graph = helper.make_graph(
        [helper.make_node(op, names, outs, **attrs)], "row",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, x.shape)
         for n, x in zip(names, inputs) if x is not None],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {n: x for n, x in zip(names, inputs) if x is not None})


def _row_form(op: str, attrs: dict, inputs: list[Optional[np.ndarray]],
              refs: list[np.ndarray]) -> str:
    """Generate ``op`` in the blocked variant, check it is the barrier-free row form and
    exactly analysable, run it and compare with ``refs`` within 1e-5; its source."""
    opk = op_kernel(op, attrs, [None if x is None else x.shape for x in inputs],
                    [r.shape for r in refs], name=f"node_{op.lower()}", variant=BLOCKED)
    assert "barrier" not in opk.source and "__local" not in opk.source
    assert all(g % lsz == 0 for g, lsz in zip(opk.global_size, opk.local_size))
    pad = (None,) * (3 - len(opk.global_size))
    ctx = KernelContext(local_size=tuple(opk.local_size) + pad,
                        global_size=opk.global_size + pad)
    kernel = parse_kernels(opk.source, context=ctx)[opk.name]
    assert all(a.exact for st in kernel.statements for a in st.accesses)
    outs = run_op(opk, inputs, [r.shape for r in refs])
    for got, ref in zip(outs, refs):
        np.testing.assert_allclose(got, ref, atol=1e-5, rtol=1e-5)
    return opk.source


@pytest.mark.parametrize("shape,axis", [
    ((1, 1), -1), ((5, 3), -1), ((7, 127), -1), ((2, 769), -1), ((1, 769), -1),
    ((40, 33), -1),  # many rows, a tail after two steps of 16
    ((3, 5, 7), 1), ((2, 127, 3), 1), ((4, 3, 2), 0),  # inner > 1: elements INNER apart
])
def test_softmax_row_form_equals_onnxruntime(shape: tuple[int, ...], axis: int) -> None:
    x = RNG.uniform(-20, 20, shape).astype(np.float32)
    refs = _onnxruntime("Softmax", {"axis": axis}, [x], 1)
    _row_form("Softmax", {"axis": axis}, [x], refs)


@pytest.mark.parametrize("shape,axis,bias,stats", [
    ((1, 1), -1, True, False), ((5, 3), -1, True, True), ((7, 127), -1, False, False),
    ((3, 769), -1, True, True), ((1, 769), -1, True, False), ((2, 3, 5, 7), 2, True, True),
    ((4, 64), 0, False, True),  # the whole tensor is one row
])
def test_layer_norm_row_form_equals_onnxruntime(shape: tuple[int, ...], axis: int, bias: bool,
                                               stats: bool) -> None:
    x = (RNG.uniform(-2, 2, shape) + 3).astype(np.float32)
    norm = shape[axis:]
    scale = RNG.uniform(-2, 2, norm).astype(np.float32)
    b = RNG.uniform(-2, 2, norm).astype(np.float32) if bias else None
    attrs = {"axis": axis, "epsilon": 1e-5}
    refs = _onnxruntime("LayerNormalization", attrs, [x, scale, b], 3 if stats else 1)
    _row_form("LayerNormalization", attrs, [x, scale, b], refs)


def test_row_form_loops_into_partials() -> None:
    """Rows of 769: 48 steps of 16 partials and a tail loop of one element per pass."""
    x = RNG.uniform(-2, 2, (2, 769)).astype(np.float32)
    src = _row_form("Softmax", {"axis": -1}, [x], _onnxruntime("Softmax", {"axis": -1}, [x], 1))
    assert src.count("for (long k = 0; k < 48; k++)") == 2
    assert src.count("for (long j = 768; j < ROWLEN; j++)") == 2
    assert "m15 = fmax(m15, x[" in src and "s15 += y[" in src


def test_tiled_form_keeps_the_work_group_tree() -> None:
    opk = op_kernel("Softmax", {"axis": -1}, [(3, 300)], [(3, 300)], name="sm")
    assert "__local float red[LANES]" in opk.source and "barrier(" in opk.source
    assert opk.global_size == (3 * 128,) and opk.local_size == (128,)


def test_widths_equal_the_bruteforce_oracle(tmp_path: Path) -> None:
    """Residual Add -> LayerNorm -> Relu, and a scaled Softmax along a middle axis feeding
    a Mul, in the blocked variant: every UAR edge has the oracle's width."""
    rng = np.random.default_rng(0)

    def const(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Add", ["x", "c"], ["r"]),
        helper.make_node("LayerNormalization", ["r", "g", "b"], ["n"], axis=-1),
        helper.make_node("Relu", ["n"], ["y"]),
        helper.make_node("Mul", ["s", "k"], ["sd"]),
        helper.make_node("Softmax", ["sd"], ["p"], axis=1),
        helper.make_node("Mul", ["p", "k"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes, "rows",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 13]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 5, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 13]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 5, 3])],
        initializer=[const("c", 13), const("g", 13), const("b", 13), const("k", 3)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "rows.onnx"
    onnx.save(model, str(path))
    program = load_onnx(str(path), target=REFERENCE_TARGET.with_variant("blocked"))
    assert not any(k.barriers for k in program.kernels.values())
    uar = build_uar(program)
    assert len([e for e in uar.edges if not e.host]) >= 4
    assert width_mismatches(program, uar) == []


@pytest.mark.parametrize("op,shape,attrs", [
    ("ReduceMax", (5, 127), {"axes": [1]}), ("ReduceMin", (3, 2, 769), {"axes": [1, 2]}),
    ("ReduceMean", (7, 1), {"axes": [-1], "keepdims": 0}), ("ReduceSum", (1, 33), {}),
    ("GlobalAveragePool", (1, 3, 7, 5), {}), ("GlobalMaxPool", (2, 3, 5, 5), {}),
])
def test_trailing_reduce_row_form_equals_onnxruntime(op: str, shape: tuple[int, ...],
                                                     attrs: dict) -> None:
    """Reduce* and global pooling over trailing axes (the whole tensor for ReduceSum)."""
    x = RNG.uniform(-2, 2, shape).astype(np.float32)
    _row_form(op, attrs, [x], _onnxruntime(op, attrs, [x], 1))


@pytest.mark.parametrize("op,shape,attrs", [
    ("MaxPool", (1, 3, 7, 5), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", (2, 3, 13, 7), {"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [1, 2],
                                "ceil_mode": 1}),
    ("MaxPool", (1, 4, 12, 12), {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER",
                                 "strides": [2, 2]}),
    ("AveragePool", (1, 3, 7, 5), {"kernel_shape": [3, 3], "strides": [2, 2],
                                   "pads": [1, 1, 1, 1]}),
    ("AveragePool", (2, 2, 7, 5), {"kernel_shape": [3, 2], "strides": [2, 1],
                                   "pads": [1, 1, 1, 0], "count_include_pad": 1}),
])
def test_pool_row_form_equals_onnxruntime(op: str, shape: tuple[int, ...], attrs: dict) -> None:
    """A 2-D pool one output row per work-item: the window's rows reduced over the whole input
    row, then each output column over its window's columns (padding, dilation, ceil_mode,
    SAME padding, batches, the average's count with and without the padding)."""
    x = RNG.uniform(-2, 2, shape).astype(np.float32)
    src = _row_form(op, attrs, [x], _onnxruntime(op, attrs, [x], 1))
    assert "one work-item per output row" in src and f"float m[{shape[3]}];" in src


def test_max_pool_row_form_propagates_nan() -> None:
    """A NaN in a window makes its maximum NaN, as the one-output form does."""
    x = RNG.uniform(-2, 2, (1, 2, 6, 6)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    ref = x.reshape(1, 2, 3, 2, 3, 2).max(axis=(3, 5))  # numpy's max propagates NaN too
    opk = op_kernel("MaxPool", attrs, [x.shape], [ref.shape], name="mp", variant=BLOCKED)
    (got,) = run_op(opk, [x], [ref.shape])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got[~np.isnan(ref)], ref[~np.isnan(ref)])
    assert np.isnan(got[0, 1, 1, 1])


def _relu_pool_add(tmp_path: Path, x: list[int], y: list[int], target: Target,
                   seed: int) -> Program:
    """Relu -> MaxPool 3x3/2 (padded) -> Add of a constant, loaded for ``target``."""
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["p", "c"], ["y"])]
    graph = helper.make_graph(
        nodes, "pool_rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)],
        initializer=[numpy_helper.from_array(rng.standard_normal(y).astype(np.float32), "c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "pool_rows.onnx"
    onnx.save(model, str(path))
    return load_onnx(str(path), target=target)


def test_pool_rows_widths_equal_the_bruteforce_oracle(tmp_path: Path) -> None:
    """Relu -> MaxPool (stride 2, padded) -> Add in the blocked variant: every UAR edge has
    the oracle's width."""
    program = _relu_pool_add(tmp_path, [1, 2, 7, 9], [1, 2, 4, 5],
                             REFERENCE_TARGET.with_variant("blocked"), 1)
    assert any("float m[9];" in k.source for k in program.kernels.values())  # the row form
    uar = build_uar(program)
    assert [e for e in uar.edges if not e.host]
    assert width_mismatches(program, uar) == []


@pytest.mark.parametrize("width", [4, 8, 16])
@pytest.mark.parametrize("shape,attrs", [
    ((1, 3, 9, 32), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 2, 8, 64), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 0, 0]}),
    ((1, 4, 6, 32), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((1, 2, 7, 16), {"kernel_shape": [3, 2], "strides": [1, 2], "pads": [1, 0, 1, 0]}),
])
def test_max_pool_rows_in_vectors_are_the_scalar_rows_bits(width: int, shape: tuple[int, ...],
                                                             attrs: dict) -> None:
    """On a target with ``float<width>`` vectors a stride-2 MaxPool row halves in vectors
    (``.even``/``.odd`` lanes, the odd ones shifted a lane for a 3-wide window): the same
    bits as the scalar row form, NaN, infinities and signed zeros included; every access
    exact."""
    x = RNG.uniform(-2, 2, shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::37] = np.nan
    flat[5::41] = -np.inf
    flat[7::29] = -0.0
    flat[9::31] = 0.0
    out = _onnxruntime("MaxPool", attrs, [x], 1)[0].shape
    vector = replace(BLOCKED, vector_width=width)
    got = {}
    for label, variant in (("scalar", BLOCKED), ("vector", vector)):
        opk = op_kernel("MaxPool", attrs, [x.shape], [out], name="mp", variant=variant)
        pad = (None,) * (3 - len(opk.global_size))
        ctx = KernelContext(local_size=tuple(opk.local_size) + pad,
                            global_size=opk.global_size + pad)
        kernel = parse_kernels(opk.source, context=ctx)[opk.name]
        assert all(a.exact for st in kernel.statements for a in st.accesses)
        assert (f"vload{width}" in opk.source) == (label == "vector"), opk.source
        (got[label],) = run_op(opk, [x], [out])
    np.testing.assert_array_equal(got["vector"].view(np.uint32), got["scalar"].view(np.uint32))
    assert np.isnan(got["vector"]).any()


def test_max_pool_rows_in_vectors_widths_equal_the_bruteforce_oracle(tmp_path: Path) -> None:
    """The vector rows' accesses (``vload``/``vstore`` at a row's pitch) give every UAR edge
    of Relu -> MaxPool 3x3/2 -> Add the oracle's width."""
    target = replace(REFERENCE_TARGET, kernel=replace(BLOCKED, vector_width=4))
    program = _relu_pool_add(tmp_path, [1, 2, 6, 8], [1, 2, 3, 4], target, 2)
    assert any("vload4" in k.source for k in program.kernels.values())
    uar = build_uar(program)
    assert [e for e in uar.edges if not e.host]
    assert width_mismatches(program, uar) == []
