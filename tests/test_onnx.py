"""The ONNX front-end and runner: bundled models against onnxruntime, fused and unfused.

Why these tests: the front-end's job is to build a Program that means what the ONNX graph means
(so every bundled model's outputs must match onnxruntime, before and after fusion), to keep
re-views free (BERT's QKV must plan to one launch: Reshapes are aliases, not copies), and to refuse
what it cannot handle with one line naming the node, operator or attribute.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import polyfuse  # noqa: E402
from polyfuse.apps.onnx_run import (  # noqa: E402
    fuse_onnx,
    onnxruntime_reference,
    random_inputs,
    run_onnx,
)
from polyfuse.core.program import PolyfuseError, UnsupportedError  # noqa: E402
from polyfuse.frontend.onnx import load_onnx, load_onnx_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / "examples" / "models"
MODELS = {
    "bert_qkv": 12,
    "bert_encoder": 38,
    "lstm_unrolled": 48,
    "resnext_block": 7,
    "mlp_gelu_ln": 5,
}
RTOL, ATOL = 1e-4, 1e-5


def _inputs(path: Path, seed: int = 3) -> dict[str, np.ndarray]:
    return random_inputs(load_onnx_model(path), seed)


def _assert_match(ours: dict, ref: dict) -> None:
    assert set(ours) == set(ref)
    for name in ref:
        assert ours[name].shape == ref[name].shape, name
        np.testing.assert_allclose(ours[name], ref[name], rtol=RTOL, atol=ATOL, err_msg=name)


# ------------------------------------------------------------------------------ bundled models


def test_models_are_checked_in_and_reproducible(tmp_path: Path) -> None:
    """make_models.py is deterministic and the .onnx files are its current output."""
    spec = importlib.util.spec_from_file_location("make_models", MODELS_DIR / "make_models.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_models"] = mod
    try:
        spec.loader.exec_module(mod)
        mod.main([str(tmp_path)])
    finally:
        sys.modules.pop("make_models", None)
    for name, ops in MODELS.items():
        fresh = (tmp_path / f"{name}.onnx").read_bytes()
        assert fresh == (MODELS_DIR / f"{name}.onnx").read_bytes(), f"regenerate {name}.onnx"
        assert len(onnx.load(str(MODELS_DIR / f"{name}.onnx")).graph.node) == ops


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_onnxruntime_fused_and_unfused(name: str) -> None:
    path = MODELS_DIR / f"{name}.onnx"
    x = _inputs(path)
    ref = onnxruntime_reference(path, x)
    _assert_match(run_onnx(path, x, fused=False), ref)
    _assert_match(run_onnx(path, x, fused=True), ref)
    # the fused run really ran the fused program: fewer launches than the unfused one
    result = fuse_onnx(path, verify=False)
    assert len(result.fused.program.launches) == result.plan.launches_after
    assert result.plan.launches_after < result.plan.launches_before


def test_bert_qkv_plans_to_one_launch() -> None:
    """12 ops -> 9 launches (Reshapes alias) -> 1: P1 per branch, P3 across branches."""
    from polyfuse import build_uar, plan_fusion

    model = load_onnx_model(MODELS_DIR / "bert_qkv.onnx")
    program = model.program
    assert model.op_count == 12
    kernels = sorted(launch.kernel for launch in program.launches)
    assert len(kernels) == 9 and not any("reshape" in k for k in kernels)
    for which in "qkv":
        # the Transpose reads the bias Add's buffer: the Reshape is an alias, not a copy
        assert model.nodes[f"{which}_reshape"] == f"alias of {which}_bias_out"
    plan = plan_fusion(build_uar(program))
    assert plan.launches_before == 9
    assert plan.launches_after == 1, [b.reason for b in plan.blocked]


def test_fuse_onnx_records_both_references() -> None:
    path = MODELS_DIR / "bert_qkv.onnx"
    result = fuse_onnx(path, verify=True)
    v = result.verified
    assert v is not None and v["ok"] is True and result.ok
    assert v["reference"] == "onnxruntime + unfused"
    assert set(v["references"]) == {"onnxruntime", "unfused"}
    assert v["references"]["onnxruntime"]["ok"] and v["references"]["unfused"]["ok"]
    assert v["max_abs_err"] <= ATOL and v["max_rel_err"] <= RTOL
    assert result.fused.plan is result.plan  # verification leaves the plan as it was


def test_weights_are_program_data() -> None:
    """Initializers travel in Program.data, so a plain run_program uses the real weights."""
    from polyfuse.runtime.execute import run_program

    path = MODELS_DIR / "mlp_gelu_ln.onnx"
    model = load_onnx_model(path)
    w1 = numpy_helper.to_array(next(t for t in onnx.load(str(path)).graph.initializer
                                    if t.name == "W1"))
    np.testing.assert_array_equal(model.program.data["W1"], w1.ravel())
    x = _inputs(path)
    res = run_program(model.program, inputs={"X": x["X"]})
    y = res.buffers[model.outputs[0].buffer].reshape(model.outputs[0].shape)
    np.testing.assert_allclose(y, onnxruntime_reference(path, x)["Y"], rtol=RTOL, atol=ATOL)


def test_shape_subgraph_is_folded_on_the_host() -> None:
    model = load_onnx_model(MODELS_DIR / "bert_encoder.onnx")
    for node in ("shape_x", "seq_len", "seq_len_vec", "heads_shape", "merged_shape"):
        assert model.nodes[node] == "folded on the host"
    launched = [k for k, v in model.nodes.items() if v.startswith("launch")]
    assert len(model.program.launches) == len(launched) == 29
    # shape tensors never become buffers; only what kernels read does
    assert "heads_dh" not in model.program.buffers and "Wq" in model.program.data


# ------------------------------------------------------------------------------ small graphs


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


def test_dynamic_dimension_from_params(tmp_path: Path) -> None:
    path = _save(tmp_path, "dyn", [
        helper.make_node("MatMul", ["X", "W"], ["M"], name="mm"),
        helper.make_node("Relu", ["M"], ["Y"], name="relu"),
    ], [_vi("X", ["batch", 8])], [_vi("Y", ["batch", 4])],
        (numpy_helper.from_array(np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4), "W"),))
    x = {"X": np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)}
    for fused in (False, True):
        _assert_match(run_onnx(path, x, fused=fused, params={"batch": 5}),
                      onnxruntime_reference(path, x))


def test_constant_transposed_gemm_weight_is_packed_once(tmp_path: Path) -> None:
    """A Gemm with a constant ``transB=1`` weight (PyTorch's Linear) and another reading the
    same weight: both read one transposed copy row by row (``transB=0``), the original is not
    uploaded, and the outputs equal onnxruntime's."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((12, 8)).astype(np.float32)
    path = _save(tmp_path, "linear", [
        helper.make_node("Gemm", ["X", "W", "B"], ["H"], name="fc1", transB=1),
        helper.make_node("Gemm", ["X", "W"], ["Y"], name="fc2", transB=1, alpha=0.5),
    ], [_vi("X", [16, 8])], [_vi("H", [16, 12]), _vi("Y", [16, 12])],
        (numpy_helper.from_array(w, "W"),
         numpy_helper.from_array(rng.standard_normal(12).astype(np.float32), "B")))
    model = load_onnx_model(path)
    packed = [v for k, v in model.program.data.items() if k.startswith("W")]
    assert len(packed) == 1 and "W" not in model.program.data
    np.testing.assert_array_equal(packed[0], w.T.ravel())
    # B (8 x 12 now) read along its rows: column ``col`` of row ``kb``
    assert all("b[(kb * 12) + col]" in k.source for k in model.program.kernels.values())
    x = {"X": rng.standard_normal((16, 8)).astype(np.float32)}
    for fused in (False, True):
        _assert_match(run_onnx(path, x, fused=fused), onnxruntime_reference(path, x))


def _usable_devices() -> list[str]:
    from polyfuse.runtime.device import list_devices, probe_device
    return [spec for spec, _, dev in list_devices() if probe_device(dev) is None]


def test_a_forwarded_activation_read_by_two_consumers_is_right_on_every_device(
        tmp_path: Path) -> None:
    """A gated unit (tanh, its copy concatenated with the input, a second tanh and exp of it) on a
    13-row input fuses into one kernel whose first tanh lives in a private value, stored under
    a group guard and read under another.  PoCL 3.1 (LLVM 15) gave every work-item but the first
    a wrong value for that private while it was left uninitialized: 1.66 off onnxruntime."""
    path = _save(tmp_path, "gated", [
        helper.make_node("Tanh", ["X"], ["T"], name="tanh1"),
        helper.make_node("Concat", ["T", "X"], ["C"], name="cat", axis=0),
        helper.make_node("Tanh", ["T"], ["U"], name="tanh2"),
        helper.make_node("Exp", ["U"], ["E"], name="exp"),
    ], [_vi("X", [13, 5, 2])], [_vi("C", [26, 5, 2]), _vi("E", [13, 5, 2])])
    x = {"X": np.random.default_rng(0).standard_normal((13, 5, 2)).astype(np.float32)}
    devices = _usable_devices()
    assert devices
    for device in devices:
        session = polyfuse.InferenceSession(path, device=device, cache=False)
        assert len(session.program.launches) == 1, device
        _assert_match(dict(zip(["C", "E"], session.run(None, x))),
                      onnxruntime_reference(path, x))


def test_params_the_model_does_not_have_are_an_error(tmp_path: Path) -> None:
    """A size given for a dimension the model does not have (a typo, or a static export) is
    refused, naming the dimensions there are, on every path that takes params."""
    weight = numpy_helper.from_array(np.ones((8, 4), np.float32), "W")
    nodes = [helper.make_node("MatMul", ["X", "W"], ["M"], name="proj"),
             helper.make_node("Relu", ["M"], ["Y"], name="act")]
    static = _save(tmp_path, "static", nodes, [_vi("X", [16, 8])], [_vi("Y", [16, 4])],
                   (weight,))
    dynamic = _save(tmp_path, "dynamic", nodes, [_vi("X", ["batch", 8])],
                    [_vi("Y", ["batch", 4])], (weight,))
    with pytest.raises(PolyfuseError, match=r"static\.onnx: --param batch: .*static"):
        load_onnx(str(static), params={"batch": 4})
    with pytest.raises(PolyfuseError, match=r"'batch_size'.*dimensions: batch\)"):
        load_onnx_model(str(dynamic), params={"batch_size": 4})
    x = {"X": np.zeros((16, 8), np.float32)}
    with pytest.raises(PolyfuseError, match="no symbolic dimension named 'batch'"):
        run_onnx(static, x, fused=True, params={"batch": 16})
    with pytest.raises(PolyfuseError, match="no symbolic dimension named 'batch'"):
        polyfuse.InferenceSession(str(static), params={"batch": 16})
    assert load_onnx(str(dynamic), params={"batch": 4}).launches


def test_gather_indices_and_where_condition_with_external_data(tmp_path: Path) -> None:
    """int64 indices are cast to int32 on the host, bool conditions become bytes, and weights
    stored as external data are read from their file."""
    emb = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((10, 8)).astype(np.float32), "E")
    graph = helper.make_graph([
        helper.make_node("Gather", ["E", "I"], ["G"], name="embed", axis=0),
        helper.make_node("Neg", ["G"], ["N"], name="neg"),
        helper.make_node("Where", ["C", "G", "N"], ["Y"], name="select"),
    ], "gw", [_vi("I", [2, 3], TensorProto.INT64), _vi("C", [2, 3, 8], TensorProto.BOOL)],
        [_vi("Y", [2, 3, 8])], [emb])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    path = tmp_path / "gw.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="gw.bin",
                    size_threshold=0)
    x = {"I": np.array([[1, 2, 9], [0, -1, 4]], np.int64),
         "C": np.random.default_rng(1).random((2, 3, 8)) < 0.5}
    ref = onnxruntime_reference(path, x)
    for fused in (False, True):
        _assert_match(run_onnx(path, x, fused=fused), ref)


# ------------------------------------------------------------------------------ bad inputs

_X = _vi("X", [2, 8])
_Y = _vi("Y", [2, 8])


def _bad_unsupported_op(tmp_path: Path) -> Path:
    return _save(tmp_path, "sin", [helper.make_node("Sin", ["X"], ["Y"], name="my_sin")],
                 [_X], [_Y])


def _bad_attribute_value(tmp_path: Path) -> Path:
    g = numpy_helper.from_array(np.ones(8, np.float32), "g")
    return _save(tmp_path, "ln", [helper.make_node("LayerNormalization", ["X", "g"], ["Y"],
                                                   name="ln0", stash_type=0)],
                 [_X], [_Y], (g,))


def _bad_dynamic(tmp_path: Path) -> Path:
    return _save(tmp_path, "dyn", [helper.make_node("Relu", ["X"], ["Y"], name="r")],
                 [_vi("X", ["batch", 8])], [_vi("Y", ["batch", 8])])


def _bad_dtype(tmp_path: Path) -> Path:
    return _save(tmp_path, "int", [helper.make_node("Relu", ["X"], ["Y"], name="relu_int")],
                 [_vi("X", [2, 8], TensorProto.INT32)], [_vi("Y", [2, 8], TensorProto.INT32)])


def _bad_external(tmp_path: Path) -> Path:
    w = numpy_helper.from_array(np.ones(8, np.float32), "W")
    graph = helper.make_graph([helper.make_node("Add", ["X", "W"], ["Y"], name="add_w")], "ext",
                              [_X], [_Y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "ext.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="weights.bin",
                    size_threshold=0)
    os.remove(tmp_path / "weights.bin")
    return path


def _bad_malformed(tmp_path: Path) -> Path:
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"not a protobuf \x00\xff\xfe at all")
    return path


def _bad_opset(tmp_path: Path) -> Path:
    return _save(tmp_path, "old", [helper.make_node("Relu", ["X"], ["Y"], name="r")],
                 [_X], [_Y], opset=11)


@pytest.mark.parametrize("make, cls, words", [
    (_bad_unsupported_op, UnsupportedError, ["node 'my_sin'", "Sin", "not supported"]),
    (_bad_attribute_value, UnsupportedError, ["node 'ln0'", "LayerNormalization",
                                              "'stash_type'"]),
    (_bad_dynamic, PolyfuseError, ["input 'X'", "dimension 0", "'batch'", "params"]),
    (_bad_dtype, UnsupportedError, ["node 'relu_int'", "Relu", "int32", "float32"]),
    (_bad_external, PolyfuseError, ["initializer 'W'", "weights.bin", "not found"]),
    (_bad_malformed, PolyfuseError, ["malformed ONNX file"]),
    (_bad_opset, UnsupportedError, ["opset 11"]),
])
def test_bad_models_give_one_line_errors(tmp_path: Path, make, cls, words) -> None:
    path = make(tmp_path)
    with pytest.raises(cls) as info:
        load_onnx(path)
    err = info.value
    assert err.file == str(path)
    text = str(err)
    assert "\n" not in text and text.startswith(f"{path}: ")
    for w in words:
        assert w in text, (w, text)


def test_missing_and_misshaped_inputs_are_named() -> None:
    path = MODELS_DIR / "mlp_gelu_ln.onnx"
    with pytest.raises(PolyfuseError, match="input 'X' is missing"):
        run_onnx(path, {}, fused=False)
    with pytest.raises(PolyfuseError, match=r"input 'X' has shape \(2, 2\)"):
        run_onnx(path, {"X": np.zeros((2, 2), np.float32)}, fused=False)
