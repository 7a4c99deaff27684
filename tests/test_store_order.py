"""Sibling guarded stores to a buffer that the fused kernel reads again.

Issue 27, fuzz seed 8080: a Concat (one guarded store per input slab) fused with the Transpose
that reads its output gave wrong numbers on both PoCL builds: the consumer's load returned what
the buffer held before the kernel.  Code generation now writes such stores through a volatile
pointer (``polyfuse.codegen.store_order``).  These tests check the numbers on graphs in the style
of real exports and the transform's reach.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from polyfuse.apps.onnx_run import fuse_onnx  # noqa: E402
from polyfuse.c import preprocessor, printer  # noqa: E402
from polyfuse.codegen.store_order import order_sibling_stores  # noqa: E402


def _model(tmp_path: Path, name: str, nodes: list, inputs: dict[str, list[int]],
           outputs: dict[str, list[int]]) -> Path:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, name,
                              [vi(k, TensorProto.FLOAT, s) for k, s in inputs.items()],
                              [vi(k, TensorProto.FLOAT, s) for k, s in outputs.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _feature_concat(tmp_path: Path) -> Path:
    """``torch.cat([h, h], dim=-1)`` of 16 tokens' features, transposed to features-major and
    squashed, as a gated projection's prologue exports."""
    n = helper.make_node
    return _model(tmp_path, "feature_concat", [
        n("Concat", ["h", "h"], ["hh"], axis=1),
        n("Transpose", ["hh"], ["hh_t"], perm=[1, 0]),
        n("Tanh", ["hh_t"], ["gate"]),
        n("Mul", ["gate", "gate"], ["out"]),
    ], {"h": [16, 2]}, {"out": [4, 16]})


def _token_concat(tmp_path: Path) -> Path:
    """Three segments of tokens concatenated along the sequence, then a residual-style add of
    the transposed result to itself."""
    n = helper.make_node
    return _model(tmp_path, "token_concat", [
        n("Concat", ["a", "b", "c"], ["abc"], axis=0),
        n("Transpose", ["abc"], ["abc_t"], perm=[1, 0]),
        n("Add", ["abc_t", "abc_t"], ["out"]),
    ], {"a": [3, 4], "b": [2, 4], "c": [5, 4]}, {"out": [4, 10]})


@pytest.mark.parametrize("make", [_feature_concat, _token_concat])
def test_concat_fused_with_its_reader_gives_the_right_numbers(tmp_path: Path, make) -> None:
    result = fuse_onnx(make(tmp_path), verify=True)
    assert result.plan.launches_after < result.plan.launches_before  # it did fuse
    v = result.verified
    assert v is not None and v["ok"], v
    assert v["references"]["onnxruntime"]["ok"] and v["references"]["unfused"]["ok"]


def _body(source: str) -> object:
    return preprocessor.parse(source, "k.cl").ext[-1].body


_SIBLINGS = """__kernel void k(__global const float *x, __global float *t, __global float *y)
{
    const int c = get_local_id(0);
    if (c < 2) t[c] = x[c];
    if (c >= 2) t[c] = x[c - 2];
    y[c] = t[c];
}
"""


def test_single_sibling_stores_to_one_element_become_one_store_of_a_selected_value() -> None:
    body = _body(_SIBLINGS.replace("if (c >= 2) t[c] = x[c - 2];",
                                   "if (c >= 2) t[c] = x[c - 2];\n    if (c == 3) t[c] = 0.0f;"))
    order_sibling_stores(body, {"x": "float", "t": "float", "y": "float"})
    text = printer.opencl_source(body)
    assert "volatile" not in text
    # the last block whose guard holds gives the value, as the last store did
    assert "if (((c < 2) || (c >= 2)) || (c == 3))\n    t[c] = (c == 3) ? (0.0f) : " \
        "((c >= 2) ? (x[c - 2]) : (x[c]));" in text
    assert "y[c] = t[c]" in text


def test_merged_stores_compute_what_the_blocks_mean_on_the_device() -> None:
    """The merged form on the device, against the work-item-at-a-time meaning, in the probe's
    4 x 16 work-group, where the sibling stores return the buffer's old contents."""
    import pyopencl as cl

    from polyfuse.runtime.device import _capability_kernels, build_kernel, get_context

    k = _capability_kernels()["sibling guarded stores"]
    body = _body(k.source)
    order_sibling_stores(body, {"in": "float", "out": "float"})
    source = k.source[:k.source.index("{")] + printer.opencl_source(body)
    assert "volatile" not in source and "?" in source
    ctx, queue = get_context()
    kernel = build_kernel(ctx, source, k.name)
    mf = cl.mem_flags
    src = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=k.inputs)
    dst = cl.Buffer(ctx, mf.READ_WRITE, k.expected.nbytes)
    cl.enqueue_fill_buffer(queue, dst, np.float32(0), 0, k.expected.nbytes)
    kernel(queue, k.global_size, k.local_size, src, dst)
    out = np.empty_like(k.expected)
    cl.enqueue_copy(queue, out, dst)
    np.testing.assert_array_equal(out, k.expected)


@pytest.mark.parametrize("source, stores", [
    # two stores in a block: not a single store
    (_SIBLINGS.replace("if (c < 2) t[c] = x[c];", "if (c < 2) { t[c] = x[c]; t[c + 4] = 1.0f; }"),
     3),
    # different elements
    (_SIBLINGS.replace("if (c >= 2) t[c] = x[c - 2];", "if (c >= 2) t[c + 1] = x[c - 2];"), 2),
    # a value that reads the buffer stored
    (_SIBLINGS.replace("if (c >= 2) t[c] = x[c - 2];", "if (c >= 2) t[c] = t[c - 2];"), 2),
])
def test_sibling_stores_left_apart_go_through_a_volatile_pointer(source: str, stores: int) -> None:
    body = _body(source)
    order_sibling_stores(body, {"x": "float", "t": "float", "y": "float"})
    text = printer.opencl_source(body)
    assert "volatile float *pf_volatile_t = t;" in text and "?" not in text
    assert text.count("pf_volatile_t[") - text.count("= pf_volatile_t[") >= stores
    assert "y[c] = t[c]" in text  # the load and other stores keep their form


@pytest.mark.parametrize("source", [
    _SIBLINGS.replace("    if (c >= 2) t[c]", "    else t[c]"),   # one if/else: compiled right
    _SIBLINGS.replace("y[c] = t[c];", "y[c] = x[c];"),           # never read back
    _SIBLINGS.replace("if (c >= 2) t[c]", "if (c >= 2) y[c]"),    # different buffers
])
def test_other_shapes_are_left_alone(source: str) -> None:
    body = _body(source)
    before = printer.opencl_source(body)
    order_sibling_stores(body, {"x": "float", "t": "float", "y": "float"})
    assert printer.opencl_source(body) == before


def test_device_probe_reports_the_pattern() -> None:
    """The probe kernel's expected output is what the kernel means (a work-item at a time), and
    probing the default device reports the capability, which `polyfuse devices` prints."""
    from polyfuse.runtime.device import _capability_kernels, get_device, probe

    k = _capability_kernels()["sibling guarded stores"]
    out = np.zeros_like(k.expected)
    for r in range(k.local_size[1]):
        for c in range(k.local_size[0]):
            if c < 2:
                out[r * 4 + c] = k.inputs[r * 2 + c]
            if c >= 2:
                out[r * 4 + c] = k.inputs[r * 2 + c - 2]
            out[64 + r * 4 + c] = out[r * 4 + c]
    np.testing.assert_array_equal(out, k.expected)
    verdict = probe(get_device()).capabilities["sibling guarded stores"]
    assert verdict == "ok" or verdict.startswith("miscompiled"), verdict
