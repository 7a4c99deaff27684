"""The ``gpu`` kernel variant's register-tiled product (polyfuse/oplib/linalg.py).

A work-group stages panels of A and B in ``__local`` memory and each work-item keeps a strided
WM x WN register tile.  Checked here: the tile choice (the most reuse that keeps the device's
compute units busy, the tiled form where no tile divides), the front-end's widths against the
brute-force oracle with the epilogue covering the tile (thread-width, so it fuses), values
against numpy and onnxruntime for every tile shape, work-group edge and panel depth, a K that
is not a multiple of the panel depth, batched and transposed operands, fused epilogues (bias,
GELU, residual) at each rectangular and deep tile, and whole exported models.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import polyfuse  # noqa: E402
from polyfuse.apps.onnx_run import ATOL, RTOL, onnxruntime_reference, random_inputs  # noqa: E402
from polyfuse.core.program import (  # noqa: E402
    KERNEL_VARIANTS,
    REFERENCE_TARGET,
    KernelVariant,
    RegisterTile,
)
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


def _variant(tile: RegisterTile | None = None, groups: int = 1) -> KernelVariant:
    return replace(GPU, register_tile=tile, device_groups=groups)


def _shape(m: int, n: int, batch: int = 1, groups: int = 132, max_wg: int = 1024,
           local: int = 49152) -> RegisterTile | None:
    node = Node.of("MatMul", {}, [(m, 8), (8, n)], [(m, n)], "p", max_wg, local,
                   _variant(groups=groups))
    return linalg.register_tile_shape(node, m, n, 8, batch)


def test_tile_keeps_the_compute_units_busy() -> None:
    """The register tile with the most reuse whose work-groups cover most compute units, over
    16-deep panels: a 1024-cubed product on 132 units gets 4 x 8 (128 groups), a 128-row BERT
    projection 2 x 2 (96), an FFN input product 4 x 4 (96: 4 x 8 gives 48); where even 1 x 1
    leaves units idle, the most groups."""
    assert _shape(1024, 1024) == RegisterTile(16, 4, 8, 16)
    assert _shape(128, 768) == RegisterTile(16, 2, 2)
    assert _shape(128, 3072) == RegisterTile(16, 4, 4)
    assert _shape(64, 64) == RegisterTile(16, 1, 1)
    assert _shape(128, 128, batch=12) == RegisterTile(16, 2, 2)
    assert _shape(1024, 1024, groups=2) == RegisterTile(16, 4, 8)  # few units: the most reuse
    assert _shape(64, 64, groups=4, max_wg=64) == RegisterTile(8, 4, 4)  # 8 x 8 work-items
    assert _shape(100, 768) is None  # no tile divides 100 rows


def test_candidates_are_the_short_list_that_fits() -> None:
    """Rectangular tiles, and 32-deep panels for the tiles of 16 outputs or more, join the
    square ones; a tile whose panels overflow ``__local`` memory or whose output tile does not
    divide the product is left out."""
    node = Node.of("MatMul", {}, [(1024, 8), (8, 1024)], [(1024, 1024)], "p", 1024, 49152,
                   _variant(groups=132))
    tiles = linalg.register_tile_candidates(node, 1024, 1024)
    assert len(tiles) == 16 and len(set(tiles)) == 16
    assert tiles[:3] == [RegisterTile(16, 4, 8, 16), RegisterTile(16, 4, 8, 32),
                         RegisterTile(16, 8, 4, 16)]
    assert {t.tk for t in tiles if t.wm * t.wn < 16} == {16}
    assert RegisterTile(16, 4, 8) not in linalg.register_tile_candidates(node, 128, 96)
    small = Node.of("MatMul", {}, [(1024, 8), (8, 1024)], [(1024, 1024)], "p", 1024, 16384,
                    _variant(groups=132))  # 16 KiB: 32 x (129 + 64) floats do not fit
    assert RegisterTile(16, 8, 4, 32) not in linalg.register_tile_candidates(small, 1024, 1024)
    assert RegisterTile(16, 8, 4, 16) in linalg.register_tile_candidates(small, 1024, 1024)


def test_ragged_outputs_fall_back_to_the_tiled_kernel_and_say_so() -> None:
    opk = op_kernel("MatMul", {}, [(100, 64), (64, 48)], [(100, 48)], name="p",
                    variant=_variant(groups=4))
    assert opk.block is None and "__local float a_tile" in opk.source
    assert "no register tile divides the 100x48 output" in opk.note


TILES = [RegisterTile(8, 1, 1), RegisterTile(8, 2, 2), RegisterTile(8, 4, 4),
         RegisterTile(16, 1, 1), RegisterTile(16, 2, 2), RegisterTile(8, 4, 8, 32),
         RegisterTile(8, 8, 4), RegisterTile(16, 4, 8), RegisterTile(16, 8, 4, 32),
         RegisterTile(16, 4, 4, 32)]


def test_every_candidate_equals_numpy() -> None:
    """Each tile the tuner may choose at 1024-cubed (all sixteen) computes a 128 x 128 product
    with K = 72 (a multiple of neither panel depth) right."""
    node = Node.of("MatMul", {}, [(1024, 8), (8, 1024)], [(1024, 1024)], "p", 1024, 49152,
                   _variant(groups=132))
    rng = np.random.default_rng(3)
    a = rng.standard_normal((128, 72), dtype=np.float32)
    b = rng.standard_normal((72, 128), dtype=np.float32)
    for tile in linalg.register_tile_candidates(node, 1024, 1024):
        opk = op_kernel("MatMul", {}, [a.shape, b.shape], [(128, 128)], name="p",
                        variant=_variant(tile))
        (got,) = run_op(opk, [a, b], [(128, 128)])
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4, err_msg=str(tile))


@pytest.mark.parametrize("tile", TILES, ids=str)
@pytest.mark.parametrize("op,attrs,sa,sb", [
    ("MatMul", {}, (64, 40), (40, 64)),  # K not a multiple of the 16-deep panels
    ("MatMul", {}, (128, 72), (72, 128)),  # nor of the 32-deep ones
    ("MatMul", {}, (3, 32, 16), (3, 16, 64)),  # batched
    ("Gemm", {"transA": 1, "transB": 1, "alpha": 0.5}, (24, 32), (64, 24)),
])
def test_values_equal_numpy(tile: RegisterTile, op: str, attrs: dict, sa: tuple,
                            sb: tuple) -> None:
    rng = np.random.default_rng(sum(tile))
    a = rng.standard_normal(sa, dtype=np.float32)
    b = rng.standard_normal(sb, dtype=np.float32)
    if op == "Gemm":
        want = attrs["alpha"] * (a.T @ b.T)
    else:
        want = a @ b
    if want.shape[-2] % (tile.edge * tile.wm) or want.shape[-1] % (tile.edge * tile.wn):
        pytest.skip("the tile does not divide the output")
    opk = op_kernel(op, attrs, [sa, sb], [want.shape], name="p", variant=_variant(tile))
    assert opk.block is not None and opk.local_size[:2] == (tile.edge, tile.edge)
    assert (opk.block.rows, opk.block.cols) == (tile.wm, tile.wn)
    (got,) = run_op(opk, [a, b], [want.shape])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tile,grid", [(RegisterTile(8, 2, 2), (8, 16)),
                                       (RegisterTile(8, 4, 2, 32), (8, 8))], ids=str)
def test_widths_equal_the_bruteforce_oracle(tmp_path: Path, tile: RegisterTile,
                                            grid: tuple[int, int]) -> None:
    """Small shapes: every UAR edge has the oracle's width, and the product's bias, GELU and
    head transpose cover its register tiles (thread-width: fusable with no barrier), for a
    square tile and a rectangular one whose 32-deep panels overrun K = 16 (zero-padded)."""
    path = _attention_head(tmp_path, batch=2, seq=16, hidden=16, heads=2)
    target = replace(REFERENCE_TARGET, kernel=_variant(tile))
    program = load_onnx_model(str(path), target=target).program
    assert {tuple(op.global_size) for op in program.launches} == {grid}
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


def _dense_gelu_residual(path: Path, batch: int, seq: int, k: int, n: int) -> Path:
    """``x @ W + b -> GELU (erf form) -> + r``: a product with a bias, activation and residual
    epilogue, as a transformer's FFN input (then its output) writes them."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array((rng.random(shape) - 0.5).astype(np.float32), name)
             for name, shape in (("w", (k, n)), ("bias", (n,)))]
    inits += [numpy_helper.from_array(np.array(v, np.float32), name)
              for name, v in (("sqrt2", 2 ** 0.5), ("one", 1.0), ("half", 0.5))]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "bias"], ["pre"]),
        helper.make_node("Div", ["pre", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["pre", "e1"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["g"]),
        helper.make_node("Add", ["g", "r"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, k]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, [batch, seq, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, n])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    out = path / "dense.onnx"
    out.write_bytes(model.SerializeToString())
    return out


@pytest.mark.parametrize("tile", [RegisterTile(16, 4, 8), RegisterTile(16, 8, 4, 32),
                                  RegisterTile(8, 4, 8, 32), RegisterTile(8, 8, 4)], ids=str)
def test_epilogues_fuse_into_each_new_tile_and_match_onnxruntime(tmp_path: Path, monkeypatch,
                                                                  tile: RegisterTile) -> None:
    """The session generates the product with the tile the tuner chose (here: each
    rectangular or 32-deep tile in turn), its bias, GELU and residual fuse into it as one
    certified launch, and the values equal onnxruntime's; K = 40 fills neither panel depth."""
    from polyfuse.runtime import product_tiles

    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(product_tiles, "tune_product_tiles",
                        lambda cases, *_args: tuple((c.product, tile) for c in cases))
    path = str(_dense_gelu_residual(tmp_path, batch=2, seq=64, k=40, n=128))
    sess = polyfuse.InferenceSession(path, _form="gpu", cache=False)
    assert sess.launches == 1
    assert check_plan(sess.plan) == []
    # the product and each epilogue node on the tile's grid: they cover its register tiles
    assert {(tuple(op.local_size[:2]), tuple(op.global_size[:2]))
            for op in sess.plan.program.launches} == {((tile.edge, tile.edge),
                                                       (128 // tile.wn, 128 // tile.wm))}
    feeds = random_inputs(sess.io, seed=2)
    (y,) = sess.run(None, feeds)
    np.testing.assert_allclose(y, onnxruntime_reference(path, feeds)["y"], rtol=RTOL, atol=ATOL)


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
    ((key, tile),) = choices
    program = load_onnx_model(str(path), target=target.with_tiles(choices)).program
    product = program.launches[0]
    assert tuple(product.local_size[:2]) == (tile.edge, tile.edge)
    assert tuple(product.global_size[:2]) == (32 // tile.wn, 64 // tile.wm)
    rule = linalg.register_tile_shape(product_tiles._node(cases[0], target), 64, 32, 32)
    for bogus in (RegisterTile(16, 4, 4), (16, 2)):  # no 64 x 64 tile; an old square entry
        program = load_onnx_model(str(path), target=target.with_tiles(((key, bogus),))).program
        assert tuple(program.launches[0].local_size[:2]) == (rule.edge, rule.edge)
