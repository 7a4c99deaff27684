"""One buffer, one pointer in a fused kernel.

A fused kernel whose fragments reach one buffer through two kernel arguments (the producer's
output ``y``, the consumer's input ``a``) lets the device compiler take them for distinct
memory: both PoCL builds loaded the consumer's ``a`` before the same work-item's store through
``y`` (a concatenation feeding an element-wise chain gave wrong numbers that only ``--verify``
caught; fuzzing seed 5151).  Code generation binds each buffer to one parameter.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from polyfuse.apps.onnx_run import fuse_onnx  # noqa: E402
from polyfuse.core.program import Launch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _duplicated_features(tmp_path: Path) -> Path:
    """``torch.cat([h, h], 1)`` of a sliced feature map, doubled and clamped from above, as a
    feature-duplication head writes it."""
    n = helper.make_node
    vi = helper.make_tensor_value_info
    inits = [numpy_helper.from_array(np.asarray(v, dtype=np.int64), k) for k, v in
             (("shape", [4, 7]), ("start", [2]), ("end", [6]), ("axis", [1]))]
    inits.append(numpy_helper.from_array(np.asarray([[0.1]], dtype=np.float32), "ceiling"))
    graph = helper.make_graph([
        n("Reshape", ["feats", "shape"], ["flat"]),
        n("Slice", ["flat", "start", "end", "axis"], ["mid"]),
        n("Concat", ["mid", "mid"], ["both"], axis=1),
        n("Add", ["both", "both"], ["doubled"]),
        n("Min", ["doubled", "ceiling"], ["out"]),
    ], "duplicated_features", [vi("feats", TensorProto.FLOAT, [1, 4, 7])],
        [vi("out", TensorProto.FLOAT, [4, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "duplicated_features.onnx"
    onnx.save(model, str(path))
    return path


def _pointer_buffers(result) -> list[list[str]]:
    """Per fused launch, the buffers bound to its pointer arguments."""
    return [[a.buffer for a in op.args if a.kind == "buffer"]
            for op in result.fused.program.ops if isinstance(op, Launch)]


def test_concatenation_feeding_a_chain_gives_the_right_numbers(tmp_path: Path) -> None:
    result = fuse_onnx(_duplicated_features(tmp_path), verify=True)
    assert result.plan.launches_after < result.plan.launches_before
    assert result.verified["ok"], result.verified
    for buffers in _pointer_buffers(result):
        assert len(buffers) == len(set(buffers)), buffers


@pytest.mark.parametrize("name", ["bert_qkv", "mlp_gelu_ln", "resnext_block"])
def test_bundled_models_bind_each_buffer_once(name: str) -> None:
    result = fuse_onnx(ROOT / "examples" / "models" / f"{name}.onnx")
    for buffers in _pointer_buffers(result):
        assert len(buffers) == len(set(buffers)), buffers
