"""Bounded analysis, the disk cache and batch on Dask (issue: real-size models in seconds).

* Sizes that are not powers of two (a 104×2 Relu → Transpose, a 1-D transpose with constants in
  the thousands) once made isl run for minutes; they must now finish quickly and stay correct.
* An isl computation that exceeds its operation quota falls back to the safe answer (global, not
  fused) and says so.
* Two runs, a cache hit, ``--no-cache`` and a Dask LocalCluster give byte-identical outputs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import islpy as isl
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from polyfuse.apps.batch import fuse_models
from polyfuse.apps.onnx_run import fuse_onnx
from polyfuse.core import islutil
from polyfuse.report import refusal_text
from polyfuse.uar.width import QUOTA_REASON, bijective_params, classify

ROOT = Path(__file__).resolve().parents[1]
QKV = ROOT / "examples" / "models" / "bert_qkv.onnx"


def relu_transpose(path: Path, rows: int, cols: int) -> Path:
    """``Transpose(Relu(x))`` of a rows×cols tensor, as an exporter writes it."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, cols])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [cols, rows])
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Transpose", ["r"], ["y"], name="transpose", perm=[1, 0])],
        "relu_transpose", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def test_transpose_relation_with_large_constants_is_decided_fast() -> None:
    """The 1-D Transpose → Transpose relation shape that used to run for minutes (constants 207,
    6656, 21321): a permutation of work-items, decided exactly by isl's yes/no tests."""
    rel = isl.Map(
        "{ L1[g0, l0] -> L2[g0', l0'] : (-32g0 + 103l0 + 64g0' + l0') mod 207 = 0 and "
        "0 <= g0 <= 3 and 0 <= l0 <= 207 - 64g0 and l0 <= 63 and g0' >= 0 and "
        "l0' >= -21321 + 6656g0 + 104l0 - 64g0' and 0 <= l0' <= 207 - 64g0' and l0' <= 63 and "
        "l0' <= 6656g0 + 104l0 - 64g0' }")
    t = time.process_time()
    thread = bijective_params(rel, isl.Set("{ : }"))
    assert time.process_time() - t < 10
    assert thread.is_equal(isl.Set("{ : }"))
    # brute force: the relation is a partial bijection
    pairs = [(tuple(p[:2]), tuple(p[2:])) for p in _points(rel)]
    assert len({a for a, _ in pairs}) == len(pairs) == len({b for _, b in pairs})


def _points(rel: isl.Map) -> list[list[int]]:
    out: list[list[int]] = []
    rel.wrap().foreach_point(lambda p: out.append(
        [int(p.get_coordinate_val(isl.dim_type.set, i).to_python()) for i in range(4)]))
    return out


def test_quota_falls_back_to_global(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a quota too small for any real work the edge is global and the witness says why."""
    rel = isl.Map("[n] -> { P[g, l] -> C[g2, l2] : g2 = g and l2 = l and 0 <= l < 64 and "
                  "0 <= 64g + l < n }")
    assert classify(rel, isl.Set("[n] -> { : n > 0 }"), 1, 1).width == "thread"
    monkeypatch.setattr(islutil, "MAX_OPERATIONS", 1)
    res = classify(rel, isl.Set("[n] -> { : n > 0 }"), 1, 1)
    assert res.width == "global" and res.witness["reason"] == QUOTA_REASON
    assert isl.DEFAULT_CONTEXT.get_max_operations() == 0  # the quota does not leak


@pytest.mark.parametrize("rows", [52, 104, 127])
def test_relu_transpose_odd_sizes_fuse_and_verify(tmp_path: Path, rows: int) -> None:
    """Sizes that are not powers of two fuse quickly and match onnxruntime: the 2-D launches
    index by coordinates, so no re-indexing needs floor/mod by the row length (the flattened
    1-D launches of the 104×2 case once exceeded isl's quota and stayed apart)."""
    path = relu_transpose(tmp_path / f"relu_t_{rows}.onnx", rows, 2)
    t = time.process_time()
    result = fuse_onnx(path, verify=True)
    assert time.process_time() - t < 90
    assert result.verified["ok"], result.verified
    assert (result.plan.launches_before, result.plan.launches_after) == (2, 1)


def test_merge_over_quota_is_refused_and_reported(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A re-indexing check that exceeds isl's quota is not a pass: not fused, reason given."""
    path = relu_transpose(tmp_path / "relu_t.onnx", 104, 2)
    monkeypatch.setattr(islutil, "MAX_OPERATIONS", 1)
    result = fuse_onnx(path)
    assert result.plan.launches_after == 2
    assert any("quota" in refusal_text(b.reason) for b in result.plan.blocked)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_outputs_identical_across_runs_cache_and_dask(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "cache"))
    models = [str(QKV)]
    first = fuse_models(models, str(tmp_path / "a"), timing=False, cache=False, quiet=True)
    second = fuse_models(models, str(tmp_path / "b"), timing=False, cache=False, quiet=True)
    cold = fuse_models(models, str(tmp_path / "c"), timing=False, quiet=True)
    hit = fuse_models(models, str(tmp_path / "d"), timing=False, quiet=True)
    assert [s.ok for s in first + second + cold + hit] == [True] * 4
    assert not cold[0].cached and hit[0].cached
    assert first == second == cold == hit  # summaries (stage times and cache flag aside)
    dask = fuse_models(models, str(tmp_path / "e"), timing=False, cache=False, quiet=True,
                       scheduler="local", jobs=1)
    assert dask == first
    ref = _tree(tmp_path / "a")
    assert set(ref) == {"bert_qkv/plan.json", "bert_qkv/fused.cl", "bert_qkv/report.md"}
    for other in "bcde":
        assert _tree(tmp_path / other) == ref, other


def test_dask_reports_per_model_failures(tmp_path: Path) -> None:
    """A model that fails on a worker comes back as its summary row, as in the local path."""
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not a model")
    out = fuse_models([str(bad), str(QKV)], str(tmp_path / "out"), timing=False, cache=False,
                      quiet=True, scheduler="local", jobs=1)
    local = fuse_models([str(bad)], str(tmp_path / "local"), timing=False, cache=False,
                        quiet=True)
    assert out[0].error and out[0].error == local[0].error
    assert out[1].ok and out[1].launches_after == 1


def test_cli_cache_hit_profile_and_clear(tmp_path: Path) -> None:
    env = {**os.environ, "POLYFUSE_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def fuse(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "polyfuse", "fuse", str(QKV), "--out",
                               str(tmp_path / "out"), "--no-timing", "--profile", *extra],
                              env=env, capture_output=True, text=True)

    cold = fuse()
    assert cold.returncode == 0, cold.stderr
    assert "plan" in cold.stderr and "generate" in cold.stderr  # the --profile table
    hit = fuse()
    assert hit.returncode == 0 and "(cached)" in hit.stderr, hit.stderr
    plan = (tmp_path / "out" / "bert_qkv" / "plan.json").read_bytes()
    fresh = fuse("--no-cache")
    assert fresh.returncode == 0 and "(cached)" not in fresh.stderr
    assert (tmp_path / "out" / "bert_qkv" / "plan.json").read_bytes() == plan
    clear = subprocess.run([sys.executable, "-m", "polyfuse", "cache", "clear"], env=env,
                           capture_output=True, text=True)
    assert clear.returncode == 0 and "removed" in clear.stderr
    assert not (tmp_path / "cache").exists()


def test_scaling_generator_has_pytorch_structure() -> None:
    """The benchmark's encoders: the ops a PyTorch export of a post-LN encoder has, per layer."""
    sys.path.insert(0, str(ROOT / "analysis"))
    try:
        import scaling
    finally:
        sys.path.pop(0)
    one, two = scaling.bert_encoder(1), scaling.bert_encoder(2)
    ops = [n.op_type for n in one.graph.node]
    for op in ("MatMul", "Add", "Reshape", "Transpose", "Softmax", "LayerNormalization",
               "Relu"):
        assert op in ops
    assert len(two.graph.node) == 2 * len(one.graph.node) - 1  # one shared output Identity
    onnx.checker.check_model(two)
    assert scaling.exponent([1, 2, 4], [3.0, 6.0, 12.0]) == pytest.approx(1.0)
    assert np.isclose(scaling.exponent([1, 4], [1.0, 16.0]), 2.0)


LIFE = """
#define N 99
__kernel void life(__global const int *a, __global int *b) {
  int x = get_global_id(0); int y = get_global_id(1);
  if (x < N && y < N) {
    int xm = (x + N - 1) % N; int xp = (x + 1) % N;
    int ym = (y + N - 1) % N; int yp = (y + 1) % N;
    int s = a[ym*N + xm] + a[ym*N + x] + a[ym*N + xp] + a[y*N + xm] + a[y*N + xp]
          + a[yp*N + xm] + a[yp*N + x] + a[yp*N + xp];
    b[y*N + x] = (s == 3 || (a[y*N + x] == 1 && s == 2)) ? 1 : 0;
  }
}
"""


def test_periodic_stencil_is_analysed_in_bounded_time() -> None:
    """Game of life on a 99×99 torus (wrap-around by ``%``): the halo makes each generation's
    RAW edge global, with a witness; the two generations stay apart; no stall."""
    import polyfuse

    b = polyfuse.ProgramBuilder(LIFE, name="life")
    b.buffer("a", 4 * 99 * 99, dtype="int")
    b.buffer("b", 4 * 99 * 99, dtype="int")
    b.write("a")
    for k in range(2):
        src, dst = ("a", "b") if k % 2 == 0 else ("b", "a")
        b.launch("life", global_size=(112, 112), local_size=(16, 16), args={"a": src, "b": dst})
    b.read("a", blocking=True)
    t = time.process_time()
    uar = polyfuse.build_uar(b.build())
    plan = polyfuse.plan_fusion(uar)
    assert time.process_time() - t < 90
    raw = [e for e in uar.edges if not e.host and e.kind == "RAW"]
    assert len(raw) == 1 and all(e.width == "global" and e.witness for e in raw)
    assert plan.launches_after == 2


def test_canonical_form_identifies_layers_up_to_launch_ids() -> None:
    """Checks are shared between launches that differ only by their ids (repeated layers)."""
    from polyfuse.fusion.reindex import canonical

    a, _ = canonical("{ F[g0, l0] -> L3[g0, l0] }", "{ L3[g, l] -> L7[g, l] }")
    b, names = canonical("{ F[g0, l0] -> L12[g0, l0] }", "{ L12[g, l] -> L16[g, l] }")
    c, _ = canonical("{ F[g0, l0] -> L12[g0, l0] }", "{ L16[g, l] -> L12[g, l] }")
    assert a == b and names == {"12": "#0", "16": "#1"}
    assert c != a  # the direction of the edge is part of the form
