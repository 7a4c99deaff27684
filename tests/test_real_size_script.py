"""``analysis/real_size.py --ort-nodes``: onnxruntime's per-node times beside polyfuse's
per-kernel table (where a fused kernel's time is set against the nodes it replaces)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "analysis"))
try:
    import real_size
finally:
    sys.path.pop(0)

import onnx  # noqa: E402

from polyfuse.apps.onnx_run import random_inputs  # noqa: E402
from polyfuse.frontend.onnx import load_onnx_model  # noqa: E402

MODEL = ROOT / "examples" / "models" / "bert_qkv.onnx"


def test_ort_node_table_lists_each_node_it_ran_with_its_share() -> None:
    feeds = random_inputs(load_onnx_model(str(MODEL)).io, seed=0)
    header, *rows = real_size.ort_node_table(str(MODEL), feeds, runs=3)
    assert header.split() == ["node", "op", "ms", "share"]
    ops = {n.op_type for n in onnx.load(str(MODEL)).graph.node}
    parsed = [re.fullmatch(r"\s+(\S+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)%", r) for r in rows]
    assert rows and all(parsed)
    assert sum(float(m.group(4)) for m in parsed) == pytest.approx(100, abs=1)
    # onnxruntime may merge nodes (MatMul + Add as a Gemm): every op it reports is a model op
    # or one of its own merged kernels, and no time is negative
    assert {m.group(2) for m in parsed} & (ops | {"Gemm", "FusedMatMul", "MatMul"})
    assert all(float(m.group(3)) >= 0 for m in parsed)
