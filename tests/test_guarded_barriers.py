"""A fragment with barriers that runs in only some work-groups of its fused kernel.

Issue 27, item 0: a row reduction (Softmax, LayerNormalization) fused with a launch of another
shape runs under a guard on group ids.  ``if (group < rows) { ... barrier ... }`` followed by
more code is legal OpenCL but both PoCL builds drop the fragment's stores, so fused models gave
wrong numbers that only ``--verify`` caught.  Code generation now pushes the guard below the
barriers (``polyfuse.codegen.barrier_guard``); these tests check the numbers on graphs in the
style of real exports, the shape of the generated code, and the refusals.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from pycparser import c_ast  # noqa: E402

from polyfuse.apps.onnx_run import fuse_onnx  # noqa: E402
from polyfuse.c import preprocessor, printer, syntax  # noqa: E402
from polyfuse.codegen.barrier_guard import (  # noqa: E402
    BarrierGuardError,
    has_barrier_call,
    push_guard_below_barriers,
)


def _model(tmp_path: Path, name: str, nodes: list, inputs: dict[str, list[int]],
           outputs: dict[str, list[int]], inits: dict[str, np.ndarray] = {}) -> Path:  # noqa: B006
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, name, [vi(k, TensorProto.FLOAT, s) for k, s in inputs.items()],
        [vi(k, TensorProto.FLOAT, s) for k, s in outputs.items()],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _short_rows_softmax(tmp_path: Path) -> Path:
    """Class logits (5 samples x 3 classes) through a Softmax and a negation, beside an
    unrelated element-wise branch of another launch shape."""
    n = helper.make_node
    return _model(tmp_path, "short_rows", [
        n("Softmax", ["logits"], ["probs"], axis=1),
        n("Neg", ["probs"], ["neg_probs"]),
        n("Add", ["feats", "feats"], ["doubled"]),
    ], {"logits": [5, 3], "feats": [5, 3]}, {"neg_probs": [5, 3], "doubled": [5, 3]})


def _distance_softmax(tmp_path: Path) -> Path:
    """An attention-like weighting of 7 tokens over 3 slots: a distance computed element-wise,
    a Softmax over the slots, then the weights applied to the values."""
    n = helper.make_node
    return _model(tmp_path, "distance_softmax", [
        n("Abs", ["q"], ["aq"]), n("Max", ["aq", "v"], ["m"]), n("Sub", ["m", "q"], ["d"]),
        n("Abs", ["d"], ["ad"]), n("Sqrt", ["ad"], ["dist"]),
        n("Softmax", ["dist"], ["w"], axis=-1), n("Mul", ["w", "v"], ["out"]),
    ], {"q": [7, 3], "v": [7, 3]}, {"out": [7, 3]})


def _narrow_layernorm(tmp_path: Path) -> Path:
    """A LayerNormalization over 3 features (fewer than the reduction's lanes), its affine
    parameters, and a residual branch of another shape."""
    n = helper.make_node
    rng = np.random.default_rng(5)
    return _model(tmp_path, "narrow_layernorm", [
        n("LayerNormalization", ["h", "gamma", "beta"], ["normed"], axis=-1, epsilon=1e-5),
        n("Relu", ["normed"], ["act"]),
        n("Mul", ["skip", "skip"], ["skip_sq"]),
    ], {"h": [6, 3], "skip": [6, 3]}, {"act": [6, 3], "skip_sq": [6, 3]},
        {"gamma": rng.standard_normal(3), "beta": rng.standard_normal(3)})


@pytest.mark.parametrize("make", [_short_rows_softmax, _distance_softmax, _narrow_layernorm])
def test_row_reduction_fused_with_other_shapes_gives_the_right_numbers(tmp_path: Path,
                                                                       make) -> None:
    result = fuse_onnx(make(tmp_path), verify=True)
    assert result.plan.launches_after < result.plan.launches_before  # it did fuse
    v = result.verified
    assert v is not None and v["ok"], v
    assert v["references"]["onnxruntime"]["ok"] and v["references"]["unfused"]["ok"]
    # the reduction's barriers run in every work-group: none sits under a group guard
    assert _barriers_under_group_guards(result.fused.source) == []


def _barriers_under_group_guards(source: str) -> list[str]:
    """Conditions on group ids that enclose a barrier, in every kernel of ``source``."""
    ast = preprocessor.parse(source, "fused.cl")
    found: list[str] = []
    for node in syntax.walk(ast):
        if isinstance(node, c_ast.If) and "get_group_id" in printer.opencl_source(node.cond) and (
                has_barrier_call(node.iftrue) or has_barrier_call(node.iffalse)):
            found.append(printer.opencl_source(node.cond))
    return found


def _body(text: str) -> list:
    ast = preprocessor.parse(
        "__kernel void k(__global float *x, __local float *red) {\n" + text + "\n}", "k.cl")
    return list(ast.ext[-1].body.block_items)


def _guard() -> c_ast.Node:
    return c_ast.BinaryOp("<", c_ast.FuncCall(c_ast.ID("get_group_id"),
                                              c_ast.ExprList([c_ast.Constant("int", "0")])),
                          c_ast.ID("rows"))


def test_guard_moves_below_barriers_and_memory_reads_stay_guarded() -> None:
    items = _body("""
        const int lane = get_local_id(0);
        const float v = x[get_group_id(0) * 4 + lane];
        red[lane] = v;
        for (int s = 2; s > 0; s >>= 1) {
          barrier(CLK_LOCAL_MEM_FENCE);
          if (lane < s) red[lane] += red[lane + s];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        x[get_group_id(0) * 4 + lane] = v / red[0];
    """)
    out = push_guard_below_barriers(items, _guard)
    text = printer.opencl_source(c_ast.Compound(out))
    assert _barriers_under_group_guards("__kernel void k(__global float *x) {"
                                        + text + "}") == []
    # the pure declaration keeps its place and const; the load moved under the guard
    assert "const int lane = get_local_id(0);" in text
    assert "float v;" in text and "const float v" not in text
    guarded = [s for s in out if isinstance(s, c_ast.If)]
    assert all("get_group_id(0) < rows" == printer.opencl_source(s.cond) for s in guarded)
    assert any("v = x[" in printer.opencl_source(s) for s in guarded)
    # every memory access is under a guard
    for s in out:
        if not isinstance(s, c_ast.If) and not isinstance(s, c_ast.For):
            assert "x[" not in printer.opencl_source(s) and "red[" not in printer.opencl_source(s)


@pytest.mark.parametrize("text, words", [
    # a loop bound only the guarded statements compute would differ in groups outside
    ("int n = 0; n = (int) x[0]; for (int k = 0; k < n; k++) { barrier(CLK_LOCAL_MEM_FENCE); }",
     "uses n"),
    # a branch on memory around a barrier
    ("if (x[0] > 0) { barrier(CLK_LOCAL_MEM_FENCE); }", "reads memory"),
    # a barrier in a switch
    ("switch (get_local_id(0)) { case 0: barrier(CLK_LOCAL_MEM_FENCE); }", "Switch"),
    # barriers only inside a called function
    ("red[0] = x[0];", "called function"),
])
def test_guard_that_cannot_move_is_refused(text: str, words: str) -> None:
    with pytest.raises(BarrierGuardError, match=words):
        push_guard_below_barriers(_body(text), _guard)


def test_guard_on_work_items_needs_headers_the_same_for_the_whole_group() -> None:
    """A guard that leaves some work-items of a group out (a symbolic size padded to whole
    groups) moves below the barriers only when no header around them depends on the
    work-item: the left-out work-items run the barriers as well."""
    items = _body("""
        const int l = get_local_id(0);
        red[l] = x[get_global_id(0)];
        for (int s = 2; s > 0; s >>= 1) {
          barrier(CLK_LOCAL_MEM_FENCE);
          if (l < s) red[l] += red[l + s];
        }
    """)
    push_guard_below_barriers(items, _guard, item_dependent=True)  # uniform headers: fine
    diverging = _body("""
        const int l = get_local_id(0);
        for (int s = l; s > 0; s >>= 1) { barrier(CLK_LOCAL_MEM_FENCE); red[l] += red[s]; }
    """)
    push_guard_below_barriers(diverging, _guard)  # a group guard: headers as the kernel had
    with pytest.raises(BarrierGuardError, match="depends on the work-item"):
        push_guard_below_barriers(diverging, _guard, item_dependent=True)
