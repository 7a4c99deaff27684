"""A bounded differential-fuzzing run (issue 9): random ONNX graphs fused and verified against
onnxruntime, mutated example programs through the ``polyfuse`` command.  Every outcome must be a
verified success or a one-line refusal; longer campaigns: ``python -m polyfuse.oracle.fuzz``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from polyfuse.oracle.fuzz import mutate_program, random_model, run_campaign  # noqa: E402


def test_generator_is_reproducible_and_covers_graph_shapes() -> None:
    assert random_model(5).SerializeToString() == random_model(5).SerializeToString()
    ops: Counter = Counter()
    fan_out = broadcast = odd = 0
    for seed in range(40):
        graph = random_model(seed, max_nodes=10).graph
        ops.update(n.op_type for n in graph.node)
        uses = Counter(t for n in graph.node for t in n.input)
        fan_out += any(c >= 2 for t, c in uses.items() if t.startswith(("t", "input")))
        dims = [d.dim_value for v in graph.input for d in v.type.tensor_type.shape.dim]
        dims += [d for init in graph.initializer for d in init.dims]
        broadcast += 1 in dims
        odd += any(d in (3, 5, 7, 13) for d in dims)
    assert {"MatMul", "Add", "Transpose", "Softmax", "Relu"} <= set(ops)
    assert fan_out >= 5 and broadcast >= 20 and odd >= 20


def test_mutations_are_reproducible(tmp_path: Path) -> None:
    a = mutate_program(11, tmp_path / "a")
    b = mutate_program(11, tmp_path / "b")
    assert a[2] == b[2] and a[3] == b[3]
    assert a[0].read_bytes() == b[0].read_bytes() and a[1].read_bytes() == b[1].read_bytes()


def test_bounded_campaign_has_no_mismatch_traceback_or_stall(tmp_path: Path) -> None:
    camp = run_campaign(seconds=50, seed=2026, out_dir=str(tmp_path), timeout=120,
                        max_nodes=5, programs_every=2, limit=4, verbose=False, jobs=2)
    assert camp.models + camp.programs >= 2
    assert not camp.failures, camp.failures
