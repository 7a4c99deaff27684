"""The operators real exports use, each against onnxruntime; the generated operator table.

Why these tests: PyTorch exports of vision and language models use pooling, padding, resizing,
clipped activations, max reductions and Einsum, which the front-end once refused ("operator is
not supported").  Each case below is a small graph at odd sizes (3, 5, 7, 13: no power of two
hides a guard or an index mistake) fused and verified against onnxruntime and the unfused
program.  ``docs/operators.md`` is generated from the implementation's registries and must be
the current output, so the documented operators and limits are the ones that run.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import polyfuse  # noqa: E402
from polyfuse.apps.onnx_run import fuse_onnx  # noqa: E402
from polyfuse.core.program import Target, UnsupportedError  # noqa: E402
from polyfuse.frontend.onnx import ALIAS_OPS, FOLDERS, load_onnx_model  # noqa: E402
from polyfuse.frontend.onnx_ops import markdown, operator_rows  # noqa: E402
from polyfuse.oplib import OPERATORS, op_kernel  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
N = helper.make_node
F16 = Target(extensions=frozenset({"cl_khr_fp16"}))


def _const(name: str, value: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def _ints(name: str, value: Any) -> onnx.TensorProto:
    return _const(name, value, np.int64)


def _model(tmp_path: Path, name: str, nodes: list, inputs: dict[str, list[int]],
           inits: tuple = (), opset: int = 17, dtype: int = TensorProto.FLOAT) -> Path:
    """A model of ``nodes`` whose outputs are the last node's, shapes from ONNX inference."""
    outputs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
               for o in nodes[-1].output]
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, dtype, s)
                                            for n, s in inputs.items()], outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _verified(path: Path) -> None:
    result = fuse_onnx(path, verify=True)
    v = result.verified
    assert v["references"]["onnxruntime"]["ok"] is True, v
    assert v["ok"], v


X35, X357, IMG = {"X": [3, 5]}, {"X": [3, 5, 7]}, {"X": [1, 3, 7, 5]}

#: name -> (nodes, inputs, initializers, opset): one new operator or attribute form each
CASES: dict[str, tuple[list, dict, tuple, int]] = {
    "softplus": ([N("Softplus", ["X"], ["Y"])], X35, (), 17),
    "hardswish": ([N("HardSwish", ["X"], ["Y"])], X35, (), 17),
    "hardsigmoid": ([N("HardSigmoid", ["X"], ["Y"], alpha=0.3, beta=0.4)], X35, (), 17),
    "leakyrelu": ([N("LeakyRelu", ["X"], ["Y"], alpha=0.1)], X35, (), 17),
    "elu": ([N("Elu", ["X"], ["Y"], alpha=0.7)], X35, (), 17),
    "sigmoid": ([N("Sigmoid", ["X"], ["Y"])], X35, (), 17),
    "log_reciprocal": ([N("Abs", ["X"], ["A"]), N("Log", ["A"], ["L"]),
                        N("Reciprocal", ["A"], ["R"]), N("Add", ["L", "R"], ["Y"])], X35, (), 17),
    "clip": ([N("Clip", ["X", "lo", "hi"], ["Y"])], X35,
             (_const("lo", -0.3), _const("hi", 0.5)), 17),
    "clip_max_only": ([N("Clip", ["X", "", "hi"], ["Y"])], X35, (_const("hi", 0.25),), 17),
    "reducemax": ([N("ReduceMax", ["X"], ["Y"], axes=[0, 2], keepdims=0)], X357, (), 17),
    "reducemax_axes_input": ([N("ReduceMax", ["X", "ax"], ["Y"])], X357,
                             (_ints("ax", [-1]),), 18),
    "reducemin": ([N("ReduceMin", ["X"], ["Y"], axes=[1])], X357, (), 17),
    "reducemean_axes": ([N("ReduceMean", ["X", "ax"], ["Y"], keepdims=0)], X357,
                        (_ints("ax", [0, -1]),), 18),
    "reducesum_all": ([N("ReduceSum", ["X"], ["Y"], keepdims=0)], X357, (), 13),
    "globalaveragepool": ([N("GlobalAveragePool", ["X"], ["Y"])], IMG, (), 17),
    "globalmaxpool": ([N("GlobalMaxPool", ["X"], ["Y"])], IMG, (), 17),
    "maxpool": ([N("MaxPool", ["X"], ["Y"], kernel_shape=[3, 3], strides=[2, 2],
                   pads=[1, 1, 1, 1])], IMG, (), 17),
    "maxpool_ceil_dilated": ([N("MaxPool", ["X"], ["Y"], kernel_shape=[2, 2], strides=[2, 2],
                                dilations=[1, 2], ceil_mode=1)], {"X": [1, 3, 13, 7]}, (), 17),
    "maxpool_1d_same": ([N("MaxPool", ["X"], ["Y"], kernel_shape=[3], strides=[2],
                           auto_pad="SAME_UPPER")], X357, (), 17),
    "averagepool": ([N("AveragePool", ["X"], ["Y"], kernel_shape=[3, 3], strides=[2, 2],
                       pads=[1, 1, 1, 1])], IMG, (), 17),
    "averagepool_include_pad": ([N("AveragePool", ["X"], ["Y"], kernel_shape=[3, 2],
                                   strides=[2, 1], pads=[1, 1, 1, 0], count_include_pad=1)],
                                IMG, (), 17),
    "pad_constant": ([N("Pad", ["X", "p", "v"], ["Y"])], X357,
                     (_ints("p", [0, 1, 2, 0, 0, 3]), _const("v", 1.5)), 17),
    "pad_edge": ([N("Pad", ["X", "p"], ["Y"], mode="edge")], X357,
                 (_ints("p", [1, 1, 2, 0, 2, 3]),), 17),
    "pad_reflect": ([N("Pad", ["X", "p"], ["Y"], mode="reflect")], X357,
                    (_ints("p", [0, 2, 3, 0, 4, 6]),), 17),
    "pad_crop_axes": ([N("Pad", ["X", "p", "", "ax"], ["Y"])], X357,
                      (_ints("p", [-1, 2, 0, -3]), _ints("ax", [1, 2])), 18),
    "resize_nearest": ([N("Resize", ["X", "", "s"], ["Y"], mode="nearest")], IMG,
                       (_const("s", [1, 1, 2, 3]),), 17),
    "resize_nearest_torch": ([N("Resize", ["X", "", "s"], ["Y"], mode="nearest",
                                coordinate_transformation_mode="asymmetric",
                                nearest_mode="floor")], IMG, (_const("s", [1, 1, 2, 2]),), 17),
    "resize_nearest_sizes": ([N("Resize", ["X", "", "", "sz"], ["Y"], mode="nearest",
                                nearest_mode="round_prefer_ceil")], {"X": [1, 2, 7, 5]},
                             (_ints("sz", [1, 2, 3, 13]),), 17),
    "resize_nearest_ceil": ([N("Resize", ["X", "", "", "sz"], ["Y"], mode="nearest",
                               nearest_mode="ceil", coordinate_transformation_mode=
                               "align_corners")], {"X": [1, 2, 7, 5]},
                            (_ints("sz", [1, 2, 13, 3]),), 17),
    "resize_linear": ([N("Resize", ["X", "", "s"], ["Y"], mode="linear")], IMG,
                      (_const("s", [1, 1, 2, 2]),), 17),
    "resize_linear_torch": ([N("Resize", ["X", "", "", "sz"], ["Y"], mode="linear",
                               coordinate_transformation_mode="pytorch_half_pixel")],
                            {"X": [1, 2, 7, 5]}, (_ints("sz", [1, 2, 3, 13]),), 17),
    "resize_linear_corners": ([N("Resize", ["X", "", "", "sz"], ["Y"], mode="linear",
                                 coordinate_transformation_mode="align_corners")],
                              {"X": [1, 2, 7, 5]}, (_ints("sz", [1, 2, 13, 3]),), 17),
    "einsum_scores": ([N("Einsum", ["Q", "K"], ["Y"], equation="bhqd,bhkd->bhqk")],
                      {"Q": [1, 3, 5, 7], "K": [1, 3, 13, 7]}, (), 17),
    "einsum_context": ([N("Einsum", ["A", "V"], ["Y"], equation="bhqk,bhkd->bhqd")],
                       {"A": [1, 3, 5, 13], "V": [1, 3, 13, 7]}, (), 17),
    "einsum_implicit": ([N("Einsum", ["A", "B"], ["Y"], equation="ij,jk")],
                        {"A": [5, 3], "B": [3, 7]}, (), 17),
    "einsum_projection": ([N("Einsum", ["X", "W"], ["Y"], equation="bnd,dh->bhn")],
                          {"X": [1, 5, 7]}, (_const("W", np.linspace(-1, 1, 21).reshape(7, 3)),),
                          17),
    "expand": ([N("Expand", ["X", "sh"], ["Y"])], {"X": [3, 1]}, (_ints("sh", [5, 3, 7]),), 17),
    "where": ([N("Where", ["C", "X", "Z"], ["Y"])], {"X": [3, 5], "Z": [5]},
              (numpy_helper.from_array(np.array([True, False, True, True, False]), "C"),), 17),
    "split_uneven": ([N("Split", ["X", "sp"], ["A", "B"], axis=2)], X357,
                     (_ints("sp", [3, 4]),), 17),
    "slice_negative_steps": ([N("Slice", ["X", "s", "e", "a", "st"], ["Y"])], X357,
                             (_ints("s", [-1, 6]), _ints("e", [-100, 0]), _ints("a", [1, 2]),
                              _ints("st", [-2, -3])), 17),
    "cast_float": ([N("Cast", ["X"], ["Y"], to=TensorProto.FLOAT)], X35, (), 17),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_operator_matches_onnxruntime(tmp_path: Path, name: str) -> None:
    nodes, inputs, inits, opset = CASES[name]
    _verified(_model(tmp_path, name, nodes, inputs, inits, opset))


#: model -> (words the one-line error must hold)
REFUSED = {
    "resize_cubic": ([N("Resize", ["X", "", "s"], ["Y"], mode="cubic", name="up")], IMG,
                     (_const("s", [1, 1, 2, 2]),), ("node 'up' (Resize)", "'mode'='cubic'")),
    "resize_inexact": ([N("Resize", ["X", "", "s"], ["Y"], name="up")], IMG,
                       (_const("s", [1, 1, 1.5, 1.5]),), ("node 'up' (Resize)", "scale 1.5")),
    "pad_wrap": ([N("Pad", ["X", "p"], ["Y"], mode="wrap", name="pad")], X357,
                 (_ints("p", [0, 1, 1, 0, 1, 1]),), ("node 'pad' (Pad)", "'mode'='wrap'")),
    "einsum_ellipsis": ([N("Einsum", ["A", "B"], ["Y"], equation="...ij,...jk->...ik",
                           name="es")], {"A": [3, 5, 7], "B": [3, 7, 5]}, (),
                        ("node 'es' (Einsum)", "'...'")),
    "einsum_diagonal": ([N("Einsum", ["A"], ["Y"], equation="ii->i", name="diag")],
                        {"A": [5, 5]}, (), ("node 'diag' (Einsum)", "diagonal")),
    "maxpool_indices": ([N("MaxPool", ["X"], ["Y", "I"], kernel_shape=[2, 2], name="mp")],
                        IMG, (), ("node 'mp' (MaxPool)", "output 'I' is int64")),
    "cast_int": ([N("Cast", ["X"], ["Y"], to=TensorProto.INT32, name="toint")], X35, (),
                 ("node 'toint' (Cast)", "float32 and float16")),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_forms_are_one_line_errors(tmp_path: Path, name: str) -> None:
    nodes, inputs, inits, words = REFUSED[name]
    path = _model(tmp_path, name, nodes, inputs, inits)
    with pytest.raises(UnsupportedError) as info:
        load_onnx_model(path)
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"{path}: ")
    for w in words:
        assert w in text, (w, text)


# ------------------------------------------------------------------------------ blocks


def _conv_w(name: str, shape: tuple[int, ...], seed: int) -> onnx.TensorProto:
    rng = np.random.default_rng(seed)
    return _const(name, (rng.random(shape) - 0.5) / np.sqrt(np.prod(shape[1:])))


def test_mobilenet_block_fuses_and_verifies(tmp_path: Path) -> None:
    """MobileNetV3's inverted residual with squeeze-excite, as PyTorch exports it: 1x1 expand,
    HardSwish, depthwise 3x3, GlobalAveragePool (``AdaptiveAvgPool2d(1)``), 1x1 squeeze with
    Relu, 1x1 excite with HardSigmoid, Mul, 1x1 project, residual Add."""
    c, e, s = 5, 13, 3
    nodes = [
        N("Conv", ["X", "w1"], ["a"], kernel_shape=[1, 1]), N("HardSwish", ["a"], ["b"]),
        N("Conv", ["b", "w2"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=e),
        N("HardSwish", ["d"], ["h"]),
        N("GlobalAveragePool", ["h"], ["g"]),
        N("Conv", ["g", "w3", "b3"], ["q"], kernel_shape=[1, 1]), N("Relu", ["q"], ["r"]),
        N("Conv", ["r", "w4", "b4"], ["t"], kernel_shape=[1, 1]),
        N("HardSigmoid", ["t"], ["sg"], alpha=1 / 6, beta=0.5),
        N("Mul", ["h", "sg"], ["m"]),
        N("Conv", ["m", "w5"], ["p"], kernel_shape=[1, 1]),
        N("Add", ["p", "X"], ["Y"]),
    ]
    inits = (_conv_w("w1", (e, c, 1, 1), 1), _conv_w("w2", (e, 1, 3, 3), 2),
             _conv_w("w3", (s, e, 1, 1), 3), _const("b3", np.full(s, 0.1)),
             _conv_w("w4", (e, s, 1, 1), 4), _const("b4", np.full(e, -0.1)),
             _conv_w("w5", (c, e, 1, 1), 5))
    _verified(_model(tmp_path, "mobilenet_block", nodes, {"X": [1, c, 7, 5]}, inits))


def test_unet_style_block_fuses_and_verifies(tmp_path: Path) -> None:
    """Down and up again as segmentation and detection heads do: reflect Pad, Conv, LeakyRelu,
    MaxPool, bilinear Resize back (``F.interpolate(align_corners=False)``), Clip (ReLU6)."""
    nodes = [
        N("Pad", ["X", "p"], ["xp"], mode="reflect"),
        N("Conv", ["xp", "w"], ["c"], kernel_shape=[3, 3]), N("LeakyRelu", ["c"], ["l"]),
        N("MaxPool", ["l"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        N("Resize", ["mp", "", "", "sz"], ["up"], mode="linear",
          coordinate_transformation_mode="pytorch_half_pixel"),
        N("Add", ["up", "l"], ["s"]),
        N("Clip", ["s", "lo", "hi"], ["Y"]),
    ]
    inits = (_ints("p", [0, 0, 1, 1, 0, 0, 1, 1]), _conv_w("w", (5, 3, 3, 3), 7),
             _ints("sz", [1, 5, 7, 13]), _const("lo", 0.0), _const("hi", 6.0))
    _verified(_model(tmp_path, "unet_block", nodes, {"X": [1, 3, 7, 13]}, inits))


def test_attention_block_with_einsum_fuses_and_verifies(tmp_path: Path) -> None:
    """A causal attention head written with Einsum (as ``torch.einsum`` exports it): scores,
    a mask made with Expand and Where, Softmax, Einsum with V, Einsum output projection."""
    h, t, d = 3, 5, 7
    mask = np.tril(np.ones((t, t), np.bool_))
    nodes = [
        N("Einsum", ["Q", "K"], ["sc"], equation="bhqd,bhkd->bhqk"),
        N("Mul", ["sc", "scale"], ["ss"]),
        N("Expand", ["mask", "shape"], ["mk"]),
        N("Where", ["mk", "ss", "neg"], ["masked"]),
        N("Softmax", ["masked"], ["pr"], axis=-1),
        N("Einsum", ["pr", "V"], ["ctx"], equation="bhqk,bhkd->bhqd"),
        N("Einsum", ["ctx", "Wo"], ["Y"], equation="bhqd,hde->bqe"),
    ]
    inits = (_const("scale", 1 / np.sqrt(d)), numpy_helper.from_array(mask, "mask"),
             _ints("shape", [1, h, t, t]), _const("neg", -1e9),
             _conv_w("Wo", (h, d, 13), 9))
    shapes = {"Q": [1, h, t, d], "K": [1, h, t, d], "V": [1, h, t, d]}
    _verified(_model(tmp_path, "einsum_attention", nodes, shapes, inits))


def test_torchscript_pad_subgraph_folds(tmp_path: Path) -> None:
    """TorchScript exports ``F.pad`` with its pads computed in the graph (ConstantOfShape,
    Concat, Reshape, a Slice with step -1, Transpose, Cast): all folded on the host."""
    nodes = [
        N("ConstantOfShape", ["n4"], ["zeros"], value=numpy_helper.from_array(
            np.zeros(1, np.int64))),
        N("Concat", ["torch_pads", "zeros"], ["full"], axis=0),
        N("Reshape", ["full", "shape"], ["pairs"]),
        N("Slice", ["pairs", "start", "end", "axis0", "step"], ["rev"]),
        N("Transpose", ["rev"], ["tr"], perm=[1, 0]),
        N("Reshape", ["tr", "flat"], ["onnx_pads"]),
        N("Cast", ["onnx_pads"], ["pads"], to=TensorProto.INT64),
        N("Pad", ["X", "pads"], ["Y"], mode="reflect"),
    ]
    inits = (_ints("n4", [2]), _ints("torch_pads", [1, 2, 3, 1]), _ints("shape", [-1, 2]),
             _ints("start", [-1]), _ints("end", [-100]), _ints("axis0", [0]),
             _ints("step", [-1]), _ints("flat", [-1]))
    path = _model(tmp_path, "torch_pad", nodes, {"X": [1, 5, 7]}, inits)
    model = load_onnx_model(path)
    assert sum(1 for v in model.nodes.values() if v.startswith("launch")) == 1
    _verified(path)


def test_pad_by_nothing_is_an_alias(tmp_path: Path) -> None:
    """A UNet up block pads the upsampled features to the skip connection's size
    (``F.pad(x, [dx // 2, dx - dx // 2, ...])``); when the sizes already match, both exporters
    keep a Pad whose pads are all 0, which moves no data: an alias, not a copy launch."""
    nodes = [
        N("Relu", ["X"], ["R"], name="relu"),
        N("Pad", ["R", "pads", ""], ["P"], name="pad_to_skip", mode="constant"),
        N("Concat", ["S", "P"], ["Y"], name="cat", axis=1),
    ]
    path = _model(tmp_path, "pad_nothing", nodes, {"X": [1, 3, 5, 7], "S": [1, 2, 5, 7]},
                  (_ints("pads", [0] * 8),))
    model = load_onnx_model(path)
    assert model.nodes["pad_to_skip"].startswith("alias of")
    assert sorted(k for k, v in model.nodes.items() if v.startswith("launch")) == ["cat", "relu"]
    _verified(path)


# ------------------------------------------------------------------------------ float16


def _fp16_model(tmp_path: Path) -> Path:
    w = numpy_helper.from_array((np.arange(35).reshape(5, 7) / 35).astype(np.float16), "W")
    nodes = [N("MatMul", ["X", "W"], ["M"]), N("HardSwish", ["M"], ["H"]),
             N("Cast", ["H"], ["Y32"], to=TensorProto.FLOAT),
             N("Cast", ["Y32"], ["Y"], to=TensorProto.FLOAT16)]
    return _model(tmp_path, "fp16", nodes, {"X": [3, 5]}, (w,), dtype=TensorProto.FLOAT16)


def test_float16_without_cl_khr_fp16_is_a_one_line_error(tmp_path: Path) -> None:
    path = _fp16_model(tmp_path)
    with pytest.raises(UnsupportedError) as info:
        load_onnx_model(path, target=Target())
    text = str(info.value)
    assert "\n" not in text and "input 'X' is float16" in text and "cl_khr_fp16" in text


def test_float16_kernels_store_half_on_a_device_with_cl_khr_fp16(tmp_path: Path) -> None:
    """On a target reporting cl_khr_fp16, float16 tensors are half buffers (the weights too),
    the casts are conversion kernels, and the fused source enables the extension."""
    model = load_onnx_model(_fp16_model(tmp_path), target=F16)
    types = {b.name: b.dtype for b in model.program.buffers.values()}
    assert types["X"] == types["W"] == types["M"] == types["Y"] == "half"
    assert types["Y32"] == "float"
    assert model.program.data["W"].dtype == np.float16
    plan = polyfuse.plan_fusion(polyfuse.build_uar(model.program))
    fused = polyfuse.generate_fused(plan, target=F16)
    assert "#pragma OPENCL EXTENSION cl_khr_fp16 : enable" in fused.source
    assert "__global const half *" in fused.source


def _fp16_device() -> Any:
    try:
        import pyopencl as cl
    except ImportError:
        return None
    for platform in cl.get_platforms():
        for dev in platform.get_devices():
            if "cl_khr_fp16" in dev.extensions.split():
                return dev
    return None


@pytest.mark.skipif(_fp16_device() is None, reason="no OpenCL device here has cl_khr_fp16")
def test_float16_model_runs_where_the_device_has_cl_khr_fp16(tmp_path: Path) -> None:
    result = fuse_onnx(_fp16_model(tmp_path), verify=True, device=_fp16_device())
    assert result.verified["ok"], result.verified


# ------------------------------------------------------------------------------ the guide


def test_own_model_guide_commands_run(tmp_path: Path) -> None:
    """docs/own_model.md's commands work as written from the repository root, and its
    comparison with onnxruntime finds only float32 rounding."""
    text = (ROOT / "docs" / "own_model.md").read_text()
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in filter(None, (ln.strip() for ln in block.splitlines())):
            assert line.startswith("polyfuse "), line
            argv = [sys.executable, "-m", "polyfuse", *shlex.split(line)[1:]]
            done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, (line, done.stderr)
    compare = re.findall(r"```python\n(.*?)```", text, flags=re.S)[-1]
    printed = subprocess.run([sys.executable, "-c", compare], cwd=ROOT, capture_output=True,
                             text=True, timeout=120, check=True).stdout.split()
    assert printed and float(printed[1]) < 1e-4, printed


# ------------------------------------------------------------------------------ the table


def test_operators_md_is_the_generated_table() -> None:
    """Regenerate with ``python -m polyfuse.frontend.onnx_ops --markdown > docs/operators.md``."""
    assert (ROOT / "docs" / "operators.md").read_text() == markdown()


def test_table_lists_every_operator_the_front_end_accepts() -> None:
    listed = {row.op for row in operator_rows()}
    assert listed == set(OPERATORS) | ALIAS_OPS | set(FOLDERS) | {"SplitToSequence",
                                                                 "SequenceAt"}
    assert {"GlobalAveragePool", "AveragePool", "MaxPool", "Pad", "Resize", "Clip",
            "HardSigmoid", "HardSwish", "LeakyRelu", "Sigmoid", "Softplus", "ReduceMean",
            "ReduceSum", "ReduceMax", "Cast", "Expand", "Where", "Einsum", "Split",
            "Slice"} <= listed


@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_attributes_outside_the_table_are_refused(op: str) -> None:
    """The table's attribute column is what each kernel accepts: any other is refused."""
    with pytest.raises(UnsupportedError, match="attribute 'not_an_attribute' is not supported"):
        op_kernel(op, {"not_an_attribute": 1}, [(3, 5)], [(3, 5)], name="k")
