"""Models exported by PyTorch (both exporters) load, fuse and match onnxruntime — without torch.

Why these tests: users batch-fuse ``torch.onnx.export`` output, whose graphs differ from
hand-built ones: TorchScript (``dynamo=False``) leaves size arithmetic (``Shape → Gather → Div →
Slice`` for ``chunk``), masks built from ``Trilu``/``ConstantOfShape``/``Equal``/``Where``/``Or``
and non-foldable ``BatchNormalization``; the dynamo exporter without its optimizer emits
``CastLike`` and ``SplitToSequence``/``SequenceAt``.  The checked-in ``torch_*.onnx`` files come
from ``examples/models/export_torch.py`` (torch 2.13.0); the small graphs below pin each
front-end rule in isolation, so a regression names the rule rather than a model.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from polyfuse.apps.onnx_run import fuse_onnx, onnxruntime_reference, random_inputs, run_onnx  # noqa: E402
from polyfuse.core.program import UnsupportedError  # noqa: E402
from polyfuse.frontend.onnx import load_onnx_model  # noqa: E402
from polyfuse.oplib import op_kernel  # noqa: E402
from polyfuse.runtime.oplib_run import run_op  # noqa: E402

MODELS_DIR = Path(__file__).resolve().parent.parent / "examples" / "models"
#: checked-in export -> (ONNX nodes, launches before fusion, launches after) on PoCL's CPU
TORCH_MODELS = {
    "torch_attention_ts": (27, 18, 5),
    "torch_attention_dynamo": (22, 18, 5),
    "torch_causal_attention_ts": (43, 19, 6),
    "torch_causal_attention_dynamo": (23, 19, 6),
    "torch_mlp_ts": (13, 10, 2),
    "torch_mlp_dynamo": (6, 6, 2),
    "torch_conv_ts": (5, 5, 2),
    "torch_conv_dynamo": (5, 5, 2),
    "torch_lstm_ts": (111, 52, 9),
    "torch_lstm_dynamo": (45, 42, 9),
    "torch_mobilenet_ts": (22, 18, 10),
    "torch_mobilenet_dynamo": (18, 18, 10),
    "torch_resnet_ts": (14, 14, 6),
    "torch_resnet_dynamo": (14, 14, 6),
    "torch_gpt2_ts": (48, 31, 8),
    "torch_gpt2_dynamo": (27, 23, 8),
    "torch_bert_layer_ts": (82, 26, 6),
    "torch_bert_layer_dynamo": (39, 26, 6),
    "torch_unet_up_ts": (23, 6, 3),
    "torch_unet_up_dynamo": (7, 6, 3),
}
RTOL, ATOL = 1e-4, 1e-5


def test_every_checked_in_export_is_listed_and_small() -> None:
    on_disk = {p.stem for p in MODELS_DIR.glob("torch_*.onnx")}
    assert on_disk == set(TORCH_MODELS)
    for name in on_disk:
        assert (MODELS_DIR / f"{name}.onnx").stat().st_size < 1_000_000, name


@pytest.mark.parametrize("name", sorted(TORCH_MODELS))
def test_torch_export_fuses_and_verifies(name: str) -> None:
    path = MODELS_DIR / f"{name}.onnx"
    ops, before, after = TORCH_MODELS[name]
    assert len(onnx.load(str(path)).graph.node) == ops
    result = fuse_onnx(path, verify=True)
    verified = result.verified
    assert verified["ok"], verified
    assert verified["references"]["onnxruntime"]["ok"], verified
    assert verified["references"]["unfused"]["ok"], verified
    assert verified["rtol"] == RTOL and verified["atol"] == ATOL
    print(f"{name}: {ops} ops, launches {result.plan.launches_before} -> "
          f"{result.plan.launches_after}")
    assert (result.plan.launches_before, result.plan.launches_after) == (before, after)


# ------------------------------------------------------------------------------ front-end rules


def _save(tmp_path: Path, name: str, nodes: list, inputs: list, outputs: list,
          inits: tuple = (), opset: int = 17) -> Path:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _vi(name: str, shape: list, dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _const(name: str, value: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], name=f"c_{name}",
                            value=numpy_helper.from_array(np.asarray(value), name))


def _check_unfused(path: Path) -> dict:
    model = load_onnx_model(path)
    x = random_inputs(model, seed=1)
    ours, ref = run_onnx(path, x, fused=False), onnxruntime_reference(path, x)
    for key in ref:
        np.testing.assert_allclose(ours[key], ref[key], rtol=RTOL, atol=ATOL, err_msg=key)
    return dict(model.nodes)


def test_shapes_behind_unpropagated_size_arithmetic(tmp_path: Path) -> None:
    """TorchScript's ``chunk``: Slice ends from Shape → Gather → Div → Mul, which ONNX's data
    propagation does not evaluate; the node is inferred again with the folded constants."""
    path = _save(tmp_path, "chunk", [
        helper.make_node("Relu", ["X"], ["R"], name="relu"),
        helper.make_node("Shape", ["R"], ["S"], name="shape"),
        _const("one", np.array(1, np.int64)),
        helper.make_node("Gather", ["S", "one"], ["n"], name="gather", axis=0),
        _const("two", np.array(2, np.int64)),
        helper.make_node("Div", ["n", "two"], ["half"], name="div"),
        _const("ax0", np.array([0], np.int64)),
        helper.make_node("Unsqueeze", ["half", "ax0"], ["end"], name="unsq"),
        _const("zero", np.array([0], np.int64)),
        _const("ax1", np.array([1], np.int64)),
        helper.make_node("Slice", ["R", "zero", "end", "ax1"], ["L"], name="slice"),
        helper.make_node("Tanh", ["L"], ["Y"], name="tanh"),
    ], [_vi("X", [3, 8])], [_vi("Y", [3, 4])])
    nodes = _check_unfused(path)
    assert nodes["div"] == "folded on the host"
    assert nodes["tanh"].startswith("launch")


def test_mask_subgraph_is_folded(tmp_path: Path) -> None:
    """A causal mask from ConstantOfShape, Trilu, Equal, Where, Expand, Or, Less, Not and Cast
    to bool never reaches the device: only the final Where on the scores is launched."""
    path = _save(tmp_path, "mask", [
        _const("ss", np.array([4, 4], np.int64)),
        helper.make_node("ConstantOfShape", ["ss"], ["ones"], name="cos",
                         value=numpy_helper.from_array(np.array([1], np.bool_))),
        _const("k1", np.array(1, np.int64)),
        helper.make_node("Trilu", ["ones", "k1"], ["upper"], name="triu", upper=1),
        _const("neg", np.array([-1, -1], np.int64)),
        helper.make_node("Equal", ["ss", "neg"], ["eq"], name="eq"),
        helper.make_node("Where", ["eq", "ss", "ss"], ["shape2"], name="where_shape"),
        helper.make_node("Expand", ["upper", "shape2"], ["exp"], name="expand"),
        _const("lim", np.array([[0], [1], [2], [3]], np.int64)),
        _const("ar", np.arange(4, dtype=np.int64)),
        helper.make_node("Less", ["ar", "lim"], ["lt"], name="less"),
        helper.make_node("Not", ["lt"], ["ge"], name="not"),
        helper.make_node("And", ["ge", "exp"], ["both"], name="and"),
        helper.make_node("Or", ["both", "exp"], ["any"], name="or"),
        helper.make_node("Cast", ["any"], ["cond"], name="cast", to=TensorProto.BOOL),
        _const("big", np.array(-1e4, np.float32)),
        helper.make_node("Where", ["cond", "big", "X"], ["Y"], name="masked"),
    ], [_vi("X", [2, 4, 4])], [_vi("Y", [2, 4, 4])])
    nodes = _check_unfused(path)
    launched = sorted(k for k, v in nodes.items() if v.startswith("launch"))
    assert launched == ["masked"]


def test_reduce_with_axes_input_and_castlike_are_folded(tmp_path: Path) -> None:
    """Opset-18 Reduce* take axes as an input; CastLike of a constant needs only the type of
    its second input (here a device tensor), and CastLike float->float on the device is an
    alias."""
    path = _save(tmp_path, "castlike", [
        _const("w", np.arange(12, dtype=np.float64).reshape(3, 4)),
        _const("axes", np.array([0], np.int64)),
        helper.make_node("ReduceMean", ["w", "axes"], ["wm"], name="rmean", keepdims=0),
        helper.make_node("CastLike", ["wm", "X"], ["wf"], name="castlike_const"),
        helper.make_node("CastLike", ["X", "X"], ["Xs"], name="castlike_dev"),
        helper.make_node("Add", ["Xs", "wf"], ["Y"], name="add"),
    ], [_vi("X", [2, 4])], [_vi("Y", [2, 4])], opset=18)
    nodes = _check_unfused(path)
    assert nodes["rmean"] == nodes["castlike_const"] == "folded on the host"
    assert nodes["castlike_dev"].startswith("alias of")


def test_split_to_sequence_and_sequence_at(tmp_path: Path) -> None:
    """What the dynamo exporter emits for ``chunk`` without its optimizer: each SequenceAt is
    one Slice launch; with keepdims=0 the unit axis is dropped as a re-view."""
    path = _save(tmp_path, "seq", [
        _const("two", np.array(2, np.int64)),
        helper.make_node("SplitToSequence", ["X", "two"], ["s"], name="split", axis=1),
        _const("i0", np.array(0, np.int64)),
        _const("i1", np.array(-1, np.int64)),
        helper.make_node("SequenceAt", ["s", "i0"], ["a"], name="at0"),
        helper.make_node("SequenceAt", ["s", "i1"], ["b"], name="at1"),
        helper.make_node("Mul", ["a", "b"], ["Y"], name="mul"),
        helper.make_node("SplitToSequence", ["X"], ["rows"], name="rows", axis=0, keepdims=0),
        helper.make_node("SequenceAt", ["rows", "i1"], ["Z"], name="last_row"),
    ], [_vi("X", [3, 4])], [_vi("Y", [3, 2]), _vi("Z", [4])])
    nodes = _check_unfused(path)
    assert nodes["at0"].startswith("launch") and nodes["split"].startswith("sequence")


def test_opset_23_is_read(tmp_path: Path) -> None:
    """What ``torch.onnx.export(..., dynamo=True, opset_version=23)`` writes: opsets 21-23 only
    widen type constraints, so the float32 graph means what it meant at opset 20."""
    graph = helper.make_graph([
        helper.make_node("Reshape", ["X", "shape"], ["R"], name="reshape"),
        helper.make_node("Transpose", ["R"], ["T"], name="transpose", perm=[1, 0]),
        helper.make_node("Cast", ["T"], ["Y"], name="cast", to=TensorProto.FLOAT),
    ], "op23", [_vi("X", [2, 3, 4])], [_vi("Y", [4, 6])],
        [numpy_helper.from_array(np.array([6, 4], np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 11
    path = tmp_path / "op23.onnx"
    onnx.save(model, str(path))
    _check_unfused(path)


def test_batch_normalization_kernel() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    scale, bias, mean = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 1.5, 3).astype(np.float32)
    opk = op_kernel("BatchNormalization", {"epsilon": 1e-3, "momentum": 0.9},
                    [x.shape, (3,), (3,), (3,), (3,)], [x.shape], name="bn")
    (y,) = run_op(opk, [x, scale, bias, mean, var], [x.shape])
    c = (slice(None), None, None)
    ref = (x - mean[c]) / np.sqrt(var[c] + 1e-3) * scale[c] + bias[c]
    np.testing.assert_allclose(y, ref, rtol=RTOL, atol=ATOL)
    with pytest.raises(UnsupportedError, match="training_mode"):
        op_kernel("BatchNormalization", {"training_mode": 1},
                  [x.shape, (3,), (3,), (3,), (3,)], [x.shape], name="bn_train")


def test_packed_in_projection_split_by_gather_fuses(tmp_path: Path) -> None:
    """``nn.MultiheadAttention``'s packed in-projection as TorchScript exports it: a
    sequence-first Transpose of a batch-1 input (moves only a unit axis: an alias), one MatMul
    + Add for q, k and v together, Reshape/Unsqueeze/Transpose/Squeeze, then ``Gather`` with the
    constant indices 0, 1, 2.  A constant Gather is a Slice, read affinely, so the three heads'
    scalings fuse into the projection's kernel instead of three groups after a global edge."""
    seq, hidden = 16, 32  # q, k and v each span whole 16x16 GEMM tiles
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((hidden, 3 * hidden)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(3 * hidden).astype(np.float32), "B")
    nodes = [
        helper.make_node("Transpose", ["X"], ["Xt"], name="seq_first", perm=[1, 0, 2]),
        helper.make_node("MatMul", ["Xt", "W"], ["P"], name="in_proj"),
        helper.make_node("Add", ["B", "P"], ["Pb"], name="in_bias"),
        _const("shape", np.array([seq, 1, 3, hidden], np.int64)),
        helper.make_node("Reshape", ["Pb", "shape"], ["R"], name="reshape"),
        _const("zero_ax", np.array([0], np.int64)),
        helper.make_node("Unsqueeze", ["R", "zero_ax"], ["U"], name="unsqueeze"),
        helper.make_node("Transpose", ["U"], ["T"], name="packed_t", perm=[3, 1, 2, 0, 4]),
        _const("sq_ax", np.array([3], np.int64)),
        helper.make_node("Squeeze", ["T", "sq_ax"], ["S"], name="squeeze"),
    ]
    outs = []
    for i, which in enumerate("qkv"):
        nodes += [_const(f"i{which}", np.array(i, np.int64)),
                  helper.make_node("Gather", ["S", f"i{which}"], [which], name=f"take_{which}",
                                   axis=0),
                  _const(f"s{which}", np.array(0.5 + i, np.float32)),
                  helper.make_node("Mul", [which, f"s{which}"], [f"{which}_out"],
                                   name=f"scale_{which}")]
        outs.append(_vi(f"{which}_out", [seq, 1, hidden]))
    path = _save(tmp_path, "packed_in_proj", nodes, [_vi("X", [1, seq, hidden])], outs,
                 inits=(w, b))
    nodes_of = _check_unfused(path)
    assert nodes_of["seq_first"].startswith("alias of")
    assert all(nodes_of[f"take_{c}"].startswith("launch") for c in "qkv")
    result = fuse_onnx(path, verify=True)
    assert result.verified["ok"], result.verified
    assert (result.plan.launches_before, result.plan.launches_after) == (9, 1)
