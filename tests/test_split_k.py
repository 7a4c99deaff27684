"""Split-K products of the ``gpu`` kernel variant (polyfuse/frontend/onnx.py ``split_k``).

A product by a constant B whose output has too few register tiles to fill the device while K is
long becomes a Transpose of A to ``[S, M, K/S]``, one batched MatMul over B folded to
``[S, K/S, N]`` and a ReduceSum of the S partial products (one looping work-item per output),
then Gemm's bias.  Checked here: when it splits and into how many parts, the front-end's widths
against the brute-force oracle with the sum's epilogue fused, values against onnxruntime for a
GPT-2-MLP-like and a BERT-FFN-like graph acting like a GPU with many compute units (certified
plans), and that nothing splits on a device of one compute unit; the CPU (``blocked``) form's
split for the cache likewise.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import polyfuse  # noqa: E402
from polyfuse.apps.onnx_run import ATOL, RTOL, onnxruntime_reference, random_inputs  # noqa: E402
from polyfuse.core.program import KERNEL_VARIANTS, REFERENCE_TARGET, Target  # noqa: E402
from polyfuse.frontend.onnx import OnnxModel, load_onnx_model  # noqa: E402
from polyfuse.fusion import check_plan  # noqa: E402
from polyfuse.oplib import linalg, op_kernel  # noqa: E402
from polyfuse.oracle.bruteforce import width_mismatches  # noqa: E402
from polyfuse.runtime.oplib_run import run_op  # noqa: E402
from polyfuse.uar import build_uar  # noqa: E402

GPU = KERNEL_VARIANTS["gpu"]


def _target(groups: int) -> Target:
    """The reference target in the ``gpu`` form, acting like a device of ``groups`` units."""
    return replace(REFERENCE_TARGET, kernel=replace(GPU, device_groups=groups))


def _ways(m: int, n: int, k: int, groups: int, variant: str = "gpu") -> int:
    return linalg.split_k_ways(replace(KERNEL_VARIANTS[variant], device_groups=groups), m, n, k,
                               1024, 49152)


def test_split_decision() -> None:
    """BERT-base's FFN output product (128x3072x768) on an H200's 132 units: 96 work-groups
    at its tile, under one wave, each looping over K=3072: split in 8 (the most parts, which
    ran fastest there).  Not split: a short K, a product that already fills the device, the
    other forms, one compute unit."""
    assert _ways(128, 768, 3072, 132) == 8
    assert _ways(64, 64, 4096, 132) == 8  # at most SPLIT_MAX_WAYS
    assert _ways(64, 64, 1024, 132) == 4  # parts of K/S >= 256
    assert _ways(128, 768, 3072, 300) == 1  # 1 x 1 tiles give 384 groups: one wave
    assert _ways(128, 3072, 768, 132) == 1  # K=768: short
    assert _ways(1024, 1024, 1024, 132) == 1  # 256 groups: busy
    assert _ways(256, 768, 3072, 132) == 1  # GPT-2 MLP's output product at 256 tokens
    assert _ways(128, 768, 3072, 1) == 1
    assert _ways(32, 64, 1040, 1000) == 1  # 1040 / 2 = 520 is no multiple of the panel depth
    assert _ways(100, 768, 3072, 132) == 1  # no register tile divides 100 rows


def test_blocked_split_decision() -> None:
    """The CPU form splits for the cache, whatever the device's units: parts of K >= 768
    (BERT-base's and GPT-2's 3072-deep output products in 4), nothing below 2 x 768."""
    assert _ways(128, 768, 3072, 1, "blocked") == 4
    assert _ways(256, 768, 3072, 1, "blocked") == 4
    assert _ways(128, 768, 6144, 64, "blocked") == 8
    assert _ways(128, 768, 2048, 1, "blocked") == 2
    assert _ways(128, 768, 1536, 1, "blocked") == 2
    assert _ways(128, 3072, 768, 1, "blocked") == 1
    assert _ways(128, 768, 1040, 1, "blocked") == 1


def test_leading_reduction_loops_per_output() -> None:
    """The sum of the partial products: one work-item per output, no barrier, equal to numpy
    (and the tree form where the variant does not ask for loops), in both splitting forms."""
    x = np.random.default_rng(0).standard_normal((4, 24, 40), dtype=np.float32)
    for (op, want), variant in itertools.product(
            (("ReduceSum", x.sum(0)), ("ReduceMax", x.max(0))),
            (GPU, KERNEL_VARIANTS["blocked"])):
        opk = op_kernel(op, {"axes": [0], "keepdims": 0}, [x.shape], [want.shape], name="s",
                        variant=variant)
        assert "barrier" not in opk.source and "one work-item per output" in opk.source
        (got,) = run_op(opk, [x], [want.shape])
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    tree = op_kernel("ReduceSum", {"axes": [0], "keepdims": 0}, [x.shape], [(24, 40)], name="s",
                     variant=KERNEL_VARIANTS["tiled"])
    assert "barrier" in tree.source


def _erf_gelu(x: str, out: str, tag: str) -> tuple[list, list]:
    consts = [numpy_helper.from_array(np.array(v, np.float32), f"{tag}_{n}")
              for n, v in (("sqrt2", 2 ** 0.5), ("one", 1.0), ("half", 0.5))]
    nodes = [
        helper.make_node("Div", [x, f"{tag}_sqrt2"], [f"{tag}_d"], name=f"/{tag}/Div"),
        helper.make_node("Erf", [f"{tag}_d"], [f"{tag}_e"], name=f"/{tag}/Erf"),
        helper.make_node("Add", [f"{tag}_e", f"{tag}_one"], [f"{tag}_e1"], name=f"/{tag}/Add"),
        helper.make_node("Mul", [x, f"{tag}_e1"], [f"{tag}_m"], name=f"/{tag}/Mul"),
        helper.make_node("Mul", [f"{tag}_m", f"{tag}_half"], [out], name=f"/{tag}/Mul_1"),
    ]
    return nodes, consts


def _mlp(path: Path, kind: str, rows: int, hidden: int, inner: int) -> Path:
    """``gpt2``: what the dynamo exporter writes for GPT-2's MLP block (LayerNorm, MatMul + bias
    to ``inner``, GELU, MatMul + bias back, residual) on ``[1, rows, hidden]``; ``bert``: BERT's
    FFN as TorchScript exports it (Gemm with ``transB=1`` on ``[rows, hidden]``, GELU, Gemm,
    residual, LayerNorm)."""
    rng = np.random.default_rng(1)

    def const(name: str, shape: tuple[int, ...], scale: float = 1.0) -> object:
        return numpy_helper.from_array(((rng.random(shape) - 0.5) * scale).astype(np.float32),
                                       name)

    gelu, gconsts = _erf_gelu("h", "g", "act")
    inits = [const("gamma", (hidden,)), const("beta", (hidden,)), *gconsts,
             const("b1", (inner,)), const("b2", (hidden,))]
    shape = [1, rows, hidden] if kind == "gpt2" else [rows, hidden]
    if kind == "gpt2":
        inits += [const("w1", (hidden, inner), 0.5), const("w2", (inner, hidden), 0.1)]
        nodes = [
            helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1,
                             epsilon=1e-5, name="/ln/LayerNorm"),
            helper.make_node("MatMul", ["ln", "w1"], ["p1"], name="/fc/MatMul"),
            helper.make_node("Add", ["p1", "b1"], ["h"], name="/fc/Add"),
            *gelu,
            helper.make_node("MatMul", ["g", "w2"], ["p2"], name="/proj/MatMul"),
            helper.make_node("Add", ["p2", "b2"], ["o"], name="/proj/Add"),
            helper.make_node("Add", ["x", "o"], ["y"], name="/residual/Add"),
        ]
    else:
        inits += [const("w1", (inner, hidden), 0.5), const("w2", (hidden, inner), 0.1)]
        nodes = [
            helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1, name="/fc1/Gemm"),
            *gelu,
            helper.make_node("Gemm", ["g", "w2", "b2"], ["o"], transB=1, name="/fc2/Gemm"),
            helper.make_node("Add", ["o", "x"], ["r"], name="/residual/Add"),
            helper.make_node("LayerNormalization", ["r", "gamma", "beta"], ["y"], axis=-1,
                             epsilon=1e-5, name="/ln/LayerNorm"),
        ]
    graph = helper.make_graph(
        nodes, "torch_jit", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    out = path / f"{kind}.onnx"
    out.write_bytes(model.SerializeToString())
    return out


def _split_launches(model: OnnxModel) -> list[str]:
    return [text for text in (o.text for o in model.outcomes.values()) if "split" in text]


def test_widths_equal_the_bruteforce_oracle(tmp_path: Path) -> None:
    """A small split product with its bias and residual: every UAR edge has the oracle's
    width; the sum, bias and residual are one grid (thread-width), the partial products reach
    the sum across work-items."""
    path = _mlp(tmp_path, "gpt2", rows=16, hidden=16, inner=1024)
    model = load_onnx_model(str(path), target=_target(1000))
    (said,) = _split_launches(model)
    assert "K=1024 split 4 ways" in said
    program = model.program
    names = [op.kernel for op in program.launches]
    assert sum("split" in n for n in names) == 3  # transpose, partial products, sum
    uar = build_uar(program)
    assert width_mismatches(program, uar) == []
    widths = {(e.src_kernel, e.dst_kernel): e.width for e in uar.edges if not e.host}
    sum_k = next(n for n in names if "split_sum" in n)
    after = {dst: w for (src, dst), w in widths.items() if src == sum_k}
    assert after and set(after.values()) == {"thread"}


@pytest.mark.parametrize("kind,rows,hidden,inner,ways", [
    ("gpt2", 32, 64, 1024, 4),
    ("bert", 32, 64, 2048, 8),
])
def test_values_equal_onnxruntime_and_the_plan_is_certified(
        tmp_path: Path, kind: str, rows: int, hidden: int, inner: int, ways: int) -> None:
    path = _mlp(tmp_path, kind, rows, hidden, inner)
    model = load_onnx_model(str(path), target=_target(1000))
    (said,) = _split_launches(model)
    assert f"K={inner} split {ways} ways" in said
    sess = polyfuse.InferenceSession(model)
    assert check_plan(sess.plan) == []
    # the Transpose joins A's producer and its GELU, the sum its bias and residual (and BERT's
    # LayerNorm); the partial products run alone
    groups = [{f.kernel for f in g.fragments} for g in sess.plan.groups]
    (with_a,) = [g for g in groups if any("split_a" in k for k in g)]
    (with_sum,) = [g for g in groups if any("split_sum" in k for k in g)]
    assert any("Erf" in k for k in with_a)
    assert any("residual" in k for k in with_sum)
    assert sess.launches == (4 if kind == "gpt2" else 3)
    feeds = random_inputs(sess.io, seed=2)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("kind,inner,ways", [("gpt2", 1536, 2), ("bert", 3072, 4)])
def test_blocked_split_values_equal_onnxruntime(tmp_path: Path, kind: str, inner: int,
                                               ways: int) -> None:
    """The CPU form's split: the fused session's plan is certified, the partial products' sum
    fuses with the bias and residual, and the values are onnxruntime's."""
    path = _mlp(tmp_path, kind, rows=16, hidden=32, inner=inner)
    model = load_onnx_model(str(path), target=REFERENCE_TARGET.with_variant("blocked"))
    (said,) = _split_launches(model)
    assert f"K={inner} split {ways} ways" in said and "in cache" in said
    sess = polyfuse.InferenceSession(model)
    assert check_plan(sess.plan) == []
    groups = [{f.kernel for f in g.fragments} for g in sess.plan.groups]
    (with_sum,) = [g for g in groups if any("split_sum" in k for k in g)]
    assert any("residual" in k for k in with_sum)
    feeds = random_inputs(sess.io, seed=3)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("kind", ["gpt2", "bert"])
def test_nothing_splits_on_one_compute_unit(tmp_path: Path, kind: str) -> None:
    path = _mlp(tmp_path, kind, rows=32, hidden=64, inner=1024)
    for target in (_target(1), REFERENCE_TARGET.with_variant("blocked"),
                   REFERENCE_TARGET.with_variant("tiled")):
        model = load_onnx_model(str(path), target=target)
        assert _split_launches(model) == []
        assert not any("split" in op.kernel for op in model.program.launches)
