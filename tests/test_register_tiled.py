"""The ``gpu`` kernel variant's register-tiled product (polyfuse/oplib/linalg.py).

A work-group stages panels of A and B in ``__local`` memory and each work-item keeps a strided
W x W register tile.  Checked here: the tile choice (the largest that keeps the device's compute
units busy, the tiled form where no tile divides), the front-end's widths against the
brute-force oracle with the epilogue covering the tile (thread-width, so it fuses), values
against numpy and onnxruntime for every tile and work-group edge, a K that is not a multiple of
the panel depth, batched and transposed operands, and whole exported models.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")


import polyfuse  # noqa: E402
from polyfuse.apps.onnx_run import ATOL, RTOL, onnxruntime_reference, random_inputs  # noqa: E402
from polyfuse.core.program import KERNEL_VARIANTS, REFERENCE_TARGET, KernelVariant  # noqa: E402
from polyfuse.frontend.onnx import load_onnx_model  # noqa: E402
from polyfuse.fusion import check_plan  # noqa: E402
from polyfuse.oplib import linalg, op_kernel  # noqa: E402
from polyfuse.oplib._common import Node  # noqa: E402
from polyfuse.oracle.bruteforce import width_mismatches  # noqa: E402
from polyfuse.runtime.oplib_run import run_op  # noqa: E402
from polyfuse.uar import build_uar  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_blocked_consumers import _attention_head  # noqa: E402

MODELS = Path(__file__).resolve().parent.parent / "examples" / "models"
GPU = KERNEL_VARIANTS["gpu"]


def _variant(tile: int = 0, edge: int = 0, groups: int = 1) -> KernelVariant:
    return replace(GPU, register_tile=tile, group_edge=edge, device_groups=groups)


def _shape(m: int, n: int, batch: int = 1, groups: int = 132, max_wg: int = 1024,
           local: int = 49152) -> tuple[int, int] | None:
    node = Node.of("MatMul", {}, [(m, 8), (8, n)], [(m, n)], "p", max_wg, local,
                   _variant(groups=groups))
    return linalg.register_tile_shape(node, m, n, 8, batch)


def test_tile_keeps_the_compute_units_busy() -> None:
    """The largest register tile whose work-groups cover most compute units: a 1024-cubed
    product on 132 units gets 4 x 4 (256 groups), a 128-row BERT projection 2 x 2 (96),
    an FFN input product 4 x 4 (96); where even 1 x 1 leaves units idle, the most groups."""
    assert _shape(1024, 1024) == (16, 4)
    assert _shape(128, 768) == (16, 2)
    assert _shape(128, 3072) == (16, 4)
    assert _shape(64, 64) == (16, 1)
    assert _shape(128, 128, batch=12) == (16, 2)
    assert _shape(1024, 1024, groups=2) == (16, 4)  # few units: the largest tile
    assert _shape(64, 64, groups=4, max_wg=64) == (8, 4)  # 8 x 8 where 16 x 16 do not fit
    assert _shape(100, 768) is None  # no tile divides 100 rows


def test_ragged_outputs_fall_back_to_the_tiled_kernel_and_say_so() -> None:
    opk = op_kernel("MatMul", {}, [(100, 64), (64, 48)], [(100, 48)], name="p",
                    variant=_variant(groups=4))
    assert opk.block is None and "__local float a_tile" in opk.source
    assert "no register tile divides the 100x48 output" in opk.note


@pytest.mark.parametrize("edge,tile", [(8, 1), (8, 2), (8, 4), (16, 1), (16, 2)])
@pytest.mark.parametrize("op,attrs,sa,sb", [
    ("MatMul", {}, (64, 40), (40, 64)),  # K not a multiple of the 16-deep panels
    ("MatMul", {}, (3, 32, 16), (3, 16, 64)),  # batched
    ("Gemm", {"transA": 1, "transB": 1, "alpha": 0.5}, (24, 32), (64, 24)),
])
def test_values_equal_numpy(edge: int, tile: int, op: str, attrs: dict, sa: tuple,
                            sb: tuple) -> None:
    rng = np.random.default_rng(edge * 10 + tile)
    a = rng.standard_normal(sa, dtype=np.float32)
    b = rng.standard_normal(sb, dtype=np.float32)
    if op == "Gemm":
        want = attrs["alpha"] * (a.T @ b.T)
    else:
        want = a @ b
    if want.shape[-2] % (edge * tile) or want.shape[-1] % (edge * tile):
        pytest.skip("the tile does not divide the output")
    opk = op_kernel(op, attrs, [sa, sb], [want.shape], name="p",
                    variant=_variant(tile, edge))
    assert opk.block is not None and opk.local_size[:2] == (edge, edge)
    (got,) = run_op(opk, [a, b], [want.shape])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_widths_equal_the_bruteforce_oracle(tmp_path: Path) -> None:
    """Small shapes: every UAR edge has the oracle's width, and the product's bias, GELU and
    head transpose cover its register tiles (thread-width: fusable with no barrier)."""
    path = _attention_head(tmp_path, batch=2, seq=16, hidden=16, heads=2)
    target = replace(REFERENCE_TARGET, kernel=_variant(tile=2, edge=8))
    program = load_onnx_model(str(path), target=target).program
    assert {tuple(op.global_size) for op in program.launches} == {(8, 16)}
    uar = build_uar(program)
    assert width_mismatches(program, uar) == []
    widths = {(e.src_kernel, e.dst_kernel): e.width for e in uar.edges if not e.host}
    assert len(widths) >= 8 and set(widths.values()) == {"thread"}


def test_head_fuses_into_one_launch_and_matches_onnxruntime(tmp_path: Path) -> None:
    path = _attention_head(tmp_path, batch=2, seq=64, hidden=64, heads=4)
    sess = polyfuse.InferenceSession(str(path), _form="gpu", cache=False)
    assert sess.launches == 1
    assert check_plan(sess.plan) == []
    feeds = random_inputs(sess.io, seed=1)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(str(path), feeds)["y"], rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("name", ["torch_bert_layer_ts", "torch_gpt2_dynamo", "torch_mlp_ts",
                                  "torch_resnet_dynamo"])
def test_exported_models_in_the_gpu_form(name: str) -> None:
    path = str(MODELS / f"{name}.onnx")
    sess = polyfuse.InferenceSession(path, _form="gpu", cache=False)
    assert check_plan(sess.plan) == []
    feeds = random_inputs(sess.io, seed=0)
    ref = onnxruntime_reference(path, feeds)
    for out, t in zip(sess.run(None, feeds), sess.get_outputs()):
        np.testing.assert_allclose(out, ref[t.name], rtol=RTOL, atol=ATOL)


def test_cpu_sessions_do_not_consider_the_gpu_form() -> None:
    from polyfuse.apps.session import device_forms

    assert device_forms(None) == ("tiled", "blocked")  # the CI machine's devices are CPUs


def test_each_distinct_product_is_a_case_and_its_measured_tile_is_used(tmp_path: Path,
                                                                       monkeypatch) -> None:
    """The pre-pass lists each product shape once; the tuner times every tile that fits on
    the device and keeps the fastest (then from the disk cache); the front-end generates the
    product with it, and an unusable recorded tile falls back to the rule."""
    from polyfuse.frontend.onnx import product_cases
    from polyfuse.runtime import product_tiles
    from polyfuse.runtime.device import device_target

    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "cache"))
    path = _attention_head(tmp_path, batch=2, seq=32, hidden=32, heads=2)
    target = device_target().with_variant("gpu")
    cases = product_cases(str(path), target=target)
    assert [c.product for c in cases] == [(64, 32, 32, 1)]
    measured: list[int] = []
    real = product_tiles._measure

    def counting(*args, **kwargs):
        out = real(*args, **kwargs)
        measured.append(len(out[0]))
        return out

    monkeypatch.setattr(product_tiles, "_measure", counting)
    choices = product_tiles.tune_product_tiles(cases, target)
    assert product_tiles.tune_product_tiles(cases, target) == choices  # from the cache
    assert measured == [len(linalg.register_tile_candidates(
        product_tiles._node(cases[0], target), 64, 32))]
    ((key, (edge, tile)),) = choices
    program = load_onnx_model(str(path), target=target.with_tiles(choices)).program
    product = program.launches[0]
    assert tuple(product.local_size[:2]) == (edge, edge)
    assert tuple(product.global_size[:2]) == (32 // tile, 64 // tile)
    bogus = target.with_tiles(((key, (16, 4)),))  # 64 x 32 has no 64 x 64 tile
    rule = linalg.register_tile_shape(product_tiles._node(cases[0], target), 64, 32, 32)
    assert tuple(load_onnx_model(str(path), target=bogus).program.launches[0].local_size[:2]) \
        == (rule[0], rule[0])
