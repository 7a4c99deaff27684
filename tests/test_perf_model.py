"""The calibrated performance model (polyfuse.perf.model).

Exact where the model is exact (features are functions of barvinok counts; NNLS on noiseless
synthetic data recovers the costs), relative where it meets the device (a bigger problem is
predicted slower).  No test asserts a measured or predicted absolute time.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import polyfuse
from polyfuse.frontend.opencl import parse_kernels
from polyfuse.oplib import op_kernel
from polyfuse.perf import model as pm
from polyfuse.perf.counts import count_kernel

ELEMENTWISE = """
__kernel void saxpy(__global const float *x, __global const float *y, __global float *z,
                    const int n)
{
    int i = get_global_id(0);
    if (i < n)
        z[i] = 2.0f * x[i] + y[i];
}
"""

SG = 8  # sub-group size used for counting in these tests (fixed: results must not depend on it)


def synthetic_calibration(p: float = 2.0) -> pm.Calibration:
    """A calibration with every cost positive (no device needed)."""
    costs = {f: 1e-9 * (k + 1) for k, f in enumerate(pm.FEATURES)}
    costs["launches"] = 5e-6
    return pm.Calibration(device_key="test-device", costs=costs, p=p, subgroup_size=SG,
                          device="synthetic")


# ----------------------------------------------------------------------------------------------
# features
# ----------------------------------------------------------------------------------------------


def test_features_of_elementwise_kernel_are_exact():
    k = parse_kernels(ELEMENTWISE)["saxpy"]
    k = pm.specialize_kernel(k, (4096,), (64,), {"n": 4096})
    f = pm.features_of(count_kernel(k, subgroup_size=SG)).values
    assert f["flop_fma"] == 4096 / SG  # one fma per work-item, counted per sub-group
    assert f["flop_simple"] == 0 and f["flop_special"] == 0
    assert f["gmem_unit_bytes"] == 3 * 4096 * 4  # x, y loaded and z stored once each
    assert f["gmem_strided_bytes"] == 0 and f["gmem_uniform_bytes"] == 0
    assert f["gmem_reuse_bytes"] == 0 and f["gmem_loop_bytes"] == 0
    assert f["loop_accesses"] == 0 and f["local_access"] == 0
    assert f["work_items"] == 4096 and f["work_groups"] == 64
    assert f["launches"] == 1 and f["group_barriers"] == 0


def test_features_of_tiled_matmul_are_exact():
    n, ts = 64, 16
    opk = op_kernel("MatMul", {}, [(n, n), (n, n)], [(n, n)], name="mm")
    f = pm.features_of_target(opk, subgroup_size=SG).values
    assert opk.local_size == (ts, ts)
    groups = (n // ts) ** 2
    assert f["work_items"] == n * n and f["work_groups"] == groups
    assert f["flop_fma"] == n * n * n / SG  # n fma per output element
    # a and b: each work-item loads one element per tile step, in the tile loop that holds
    # the barriers (the work-group runs it in lockstep: no work-item loop); each element is
    # loaded n/ts times: footprint n*n, the rest re-reads; y stored once
    assert f["gmem_unit_bytes"] == 3 * n * n * 4 and f["gmem_loop_bytes"] == 0
    assert f["gmem_reuse_bytes"] == 2 * (n // ts - 1) * n * n * 4
    # the inner product loop over a tile has no barrier: each work-item runs it on its own,
    # two __local loads and an fma per step, n steps per output element
    assert f["sync_loop_accesses"] == 2 * n * n * n and f["loop_accesses"] == 0
    assert f["loop_flops"] == n * n * n
    # 2 barriers per tile, n/ts tiles, per work-group
    assert f["group_barriers"] == groups * 2 * (n // ts)
    # local: per sub-group, one store to each tile per tile step, 2*ts loads per tile step
    subgroups = n * n // SG
    assert f["local_access"] == subgroups * (n // ts) * (2 + 2 * ts)


def test_loop_accesses_are_those_of_work_item_loops():
    """Straight-line re-reads are no loop; a loop around barriers is no work-item loop (the
    work-group runs it in lockstep); a loop without barriers in a kernel with barriers is."""
    src = """
    __kernel void twice(__global const float *x, __global float *y) {
        int i = get_global_id(0); y[i] = x[i] * x[i] + x[i];
    }
    __kernel void walk(__global const float *x, __global float *y, const int rows) {
        int i = get_global_id(0); float acc = 0.0f;
        for (int k = 0; k < rows; ++k) acc += x[k * 256 + i];
        y[i] = acc;
    }
    __kernel void lockstep(__global const float *x, __global float *y) {
        __local float s[64]; int l = get_local_id(0); float acc = 0.0f;
        for (int r = 0; r < 8; ++r) {
            s[l] = x[r * 256 + get_global_id(0)];
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int k = 0; k < 4; ++k) acc += s[(l + k) % 64];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        y[get_global_id(0)] = acc;
    }"""
    ks = parse_kernels(src)
    f = pm.features_of(count_kernel(pm.specialize_kernel(ks["twice"], (256,), (64,)),
                                    subgroup_size=SG)).values
    assert f["loop_accesses"] == 0 and f["loop_flops"] == 0
    assert f["gmem_unit_bytes"] == 2 * 256 * 4 and f["gmem_loop_bytes"] == 0
    f = pm.features_of(count_kernel(pm.specialize_kernel(ks["walk"], (256,), (64,),
                                                         {"rows": 5}), subgroup_size=SG)).values
    assert f["loop_accesses"] == 5 * 256 and f["loop_flops"] == 5 * 256
    assert f["gmem_loop_bytes"] == 5 * 256 * 4 and f["gmem_unit_bytes"] == 256 * 4
    f = pm.features_of(count_kernel(pm.specialize_kernel(ks["lockstep"], (256,), (64,)),
                                    subgroup_size=SG)).values
    # x loads and s stores run in lockstep; the 4-step inner loop is each work-item's own
    assert f["gmem_loop_bytes"] == 0 and f["gmem_unit_bytes"] == (8 + 1) * 256 * 4
    assert f["sync_loop_accesses"] == 8 * 4 * 256 and f["loop_accesses"] == 0


def test_broadcast_access_is_uniform_and_reused():
    src = """
    __kernel void bias(__global const float *b, __global float *y) {
        int r = get_global_id(1); int c = get_global_id(0);
        y[r * 64 + c] += b[r];
    }"""
    k = pm.specialize_kernel(parse_kernels(src)["bias"], (64, 32), (64, 1))
    f = pm.features_of(count_kernel(k, subgroup_size=SG)).values
    # b[r] is the same for a whole sub-group: one load per sub-group, footprint 32 elements
    assert f["gmem_uniform_bytes"] == 32 * 4
    assert f["gmem_reuse_bytes"] == (64 * 32 // SG - 32) * 4
    assert f["gmem_unit_bytes"] == 2 * 64 * 32 * 4  # y loaded and stored


def test_stride_and_op_classes():
    assert pm.stride_class((1, 64)) == "unit"
    assert pm.stride_class((0, 64)) == "uniform"
    assert pm.stride_class((4,)) == "strided"
    assert pm.stride_class((None,)) == "strided"
    assert pm.op_class("fma") == "flop_fma"
    assert pm.op_class("func:fmax") == "flop_simple"
    assert pm.op_class("div") == "flop_div"
    assert pm.op_class("func:exp") == "flop_special"
    assert pm.dtype_bytes("float32x4") == 16 and pm.dtype_bytes("float64") == 8


def test_symbolic_size_is_refused_with_the_parameter_named():
    k = parse_kernels(ELEMENTWISE)["saxpy"]
    with pytest.raises(polyfuse.PolyfuseError, match="_gs0|n"):
        pm.features_of(count_kernel(k, subgroup_size=SG))


# ----------------------------------------------------------------------------------------------
# fitting
# ----------------------------------------------------------------------------------------------


def test_nnls_recovers_nonnegative_solution():
    rng = np.random.default_rng(1)
    a = rng.random((40, 6))
    truth = np.array([0.0, 2.0, 0.5, 0.0, 3.0, 1.0])
    x = pm.nnls(a, a @ truth)
    assert np.allclose(x, truth, atol=1e-8)
    # an unconstrained solution with negative entries: NNLS clamps and satisfies KKT
    b = a @ np.array([1.0, -2.0, 1.0, 0.5, -1.0, 2.0])
    x = pm.nnls(a, b)
    assert np.all(x >= 0)
    grad = a.T @ (b - a @ x)
    assert np.all(grad[x == 0] <= 1e-8) and np.allclose(grad[x > 0], 0, atol=1e-8)


@pytest.mark.parametrize("p", [1.0, 2.0, 4.0])
def test_fit_recovers_known_costs_with_overlap(p: float):
    rng = np.random.default_rng(7)
    truth = np.array([(k % 4 + 1) * 1e-9 for k in range(len(pm.FEATURES))])
    truth[pm.FEATURES.index("flop_div")] = 0.0  # a feature that costs nothing
    truth[pm.FEATURES.index("launches")] = 2e-6
    x = rng.random((80, len(pm.FEATURES))) * 10 ** rng.integers(2, 7, (80, len(pm.FEATURES)))
    x[:, pm.FEATURES.index("launches")] = 1 + rng.integers(0, 3, 80)
    t = pm.model_time(x, truth, p)
    costs, rms = pm.fit_costs(x, t, p)
    assert rms < 1e-6
    assert np.allclose(costs, truth, rtol=1e-4, atol=1e-15)
    _, p_fit, _ = pm.fit_model(x, t)
    assert p_fit == p  # the grid search finds the exponent that generated the data


def test_smooth_max_bounds():
    a, b = np.array([1.0, 3.0, 0.0]), np.array([2.0, 3.0, 0.0])
    for p in (1.0, 2.0, 8.0):
        s = pm.smooth_max(a, b, p)
        assert np.all(s >= np.maximum(a, b) - 1e-12) and np.all(s <= a + b + 1e-12)
    assert np.allclose(pm.smooth_max(a, b, 1.0), a + b)


# ----------------------------------------------------------------------------------------------
# calibration record
# ----------------------------------------------------------------------------------------------


def test_calibration_json_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path))
    cal = synthetic_calibration()
    cal.min_launch_s = 1e-4
    cal.samples = [{"label": "x", "kernel": "calib_stream", "features": {}, "measured": 1e-5}]
    path = cal.save()
    assert path == tmp_path / "model" / "test-device.json"
    back = pm.Calibration.load(path=path)
    assert back.to_dict() == cal.to_dict()
    assert json.loads(path.read_text())["schema"] == pm.SCHEMA
    assert back.min_launch_s == 1e-4
    assert back.calibration_kernels == ["calib_stream"]
    feats = pm.Features({"flop_fma": 1e4, "gmem_unit_bytes": 1e6, "launches": 1})
    assert back.time(feats) == cal.time(feats)


def _fake_device(**over: object) -> SimpleNamespace:
    plat = SimpleNamespace(name="Portable Computing Language", version="OpenCL 3.0 PoCL 3.1")
    d = dict(platform=plat, name="pthread-cpu", driver_version="3.1",
             global_mem_size=14 << 30)
    d.update(over)
    return SimpleNamespace(**d)


def test_a_quick_calibration_never_stands_in_for_the_full_one(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    """The autotuner's quick calibration is cached under a name of its own: ranking and
    weighing (the full calibration or the shipped reference) do not read it, and a quick
    request takes it without calibrating again."""
    from polyfuse.perf.launches import ranking_calibration

    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path))
    cal = synthetic_calibration()
    cal.device_key, cal.quick = pm.calibration_key(None), True
    assert cal.save().name.endswith("-quick.json")
    with pytest.raises(FileNotFoundError):
        pm.Calibration.load()
    ranking, note = ranking_calibration(None, True)
    assert "shipped for a reference CPU" in note and not ranking.quick
    monkeypatch.setattr(pm, "calibrate", lambda *a, **k: pytest.fail("calibrated again"))
    assert pm.Calibration.for_device(quick=True).to_dict() == cal.to_dict()
    full = dataclasses.replace(cal, quick=False)
    full.save()
    assert pm.Calibration.for_device(quick=True).to_dict() == full.to_dict()


def test_calibration_key_ignores_reported_memory_but_not_the_driver():
    key = pm.calibration_key(_fake_device())
    # PoCL reports the host's free memory: it changes between processes, the key must not
    assert pm.calibration_key(_fake_device(global_mem_size=9 << 30)) == key
    assert pm.calibration_key(_fake_device(driver_version="3.2")) != key
    assert pm.calibration_key(_fake_device(name="basic-cpu")) != key
    assert key.startswith("pthread-cpu-") and "/" not in key


def test_calibration_json_has_readable_parameters_and_residuals(tmp_path: Path):
    cal = synthetic_calibration()
    cal.costs["gmem_unit_bytes"] = 1e-10  # 10 GB/s
    cal.samples = [{"label": "a", "kernel": "calib_stream", "features": {}, "measured": 1e-5,
                    "fitted": 1.2e-5},
                   {"label": "b", "kernel": "calib_fma", "features": {}, "measured": 2e-5,
                    "fitted": 1e-5}]
    d = json.loads(cal.save(tmp_path / "c.json").read_text())
    assert d["parameters"]["gmem_unit_bytes"] == "10 GB/s"
    assert d["parameters"]["launches"] == "5 us per launch"
    assert [round(r["residual"], 6) for r in d["residuals"]] == [0.2, -0.5]
    assert d["fit_geomean_error"] == pytest.approx(math.sqrt(1.2 * 2.0) - 1)
    assert "10 GB/s" in cal.summary()


def test_geomean_error_is_symmetric():
    assert pm.geomean_error([(2.0, 1.0), (1.0, 2.0)]) == pytest.approx(1.0)
    assert pm.geomean_error([(1.0, 1.0)]) == 0.0
    assert pm.geomean_error([(1.1, 1.0), (1.0, 1.1)]) == pytest.approx(0.1)
    assert math.isnan(pm.geomean_error([]))


def test_calibration_kernels_are_named_and_counted():
    names = {ck.kernel for ck in pm.calibration_kernels(quick=True)}
    assert names <= set(pm.CALIBRATION_KERNELS)
    assert not names & {"k_matmul", "linear", "combine", "fused_g0"}
    ck = next(c for c in pm.calibration_kernels(quick=True) if c.kernel == "calib_stream")
    f = pm.features_of(pm.count_calibration_kernel(ck, SG)).values
    n = ck.global_size[0]
    assert f["gmem_unit_bytes"] > 0 and f["work_items"] == n


# ----------------------------------------------------------------------------------------------
# prediction
# ----------------------------------------------------------------------------------------------


def test_predict_is_monotone_in_size_for_elementwise():
    cal = synthetic_calibration()
    k = parse_kernels(ELEMENTWISE)["saxpy"]
    times = [pm.predict(k, {"n": n}, cal, global_size=(n,), local_size=(64,))
             for n in (1024, 4096, 16384, 65536)]
    assert all(a < b for a, b in zip(times, times[1:]))


def test_predict_program_sums_launches():
    cal = synthetic_calibration()
    k = parse_kernels(ELEMENTWISE)

    def chain(length: int, n: int = 4096) -> polyfuse.Program:
        b = polyfuse.ProgramBuilder(k)
        for i in range(length + 1):
            b.buffer(f"B{i}", 4 * n)
        for i in range(length):
            b.launch("saxpy", (n,), (64,), {"x": f"B{i}", "y": f"B{i}", "z": f"B{i + 1}",
                                            "n": n})
        return b.build()

    one, three = pm.predict(chain(1), None, cal), pm.predict(chain(3), None, cal)
    assert three == pytest.approx(3 * one)
    ranked = pm.rank_variants([chain(3), chain(1), chain(2)], cal)
    assert [i for i, _ in ranked] == [1, 2, 0]
    assert pm.prune_variants([chain(3), chain(1), chain(2)], cal, factor=2.0) == [1, 2]


def test_rank_variants_puts_unpredictable_last():
    cal = synthetic_calibration()
    k = parse_kernels(ELEMENTWISE)["saxpy"]
    counts = count_kernel(pm.specialize_kernel(k, (1024,), (64,), {"n": 1024}),
                          subgroup_size=SG)
    symbolic = count_kernel(k, subgroup_size=SG)  # sizes unknown: cannot be predicted
    ranked = pm.rank_variants([symbolic, counts], cal)
    assert ranked[0][0] == 1 and ranked[1] == (0, float("inf"))
    assert pm.prune_variants([symbolic, counts], cal) == [0, 1]


# ----------------------------------------------------------------------------------------------
# on the device
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def quick_calibration() -> pm.Calibration:
    pytest.importorskip("pyopencl")
    try:
        from polyfuse.runtime.device import get_context

        _, queue = get_context()
    except polyfuse.PolyfuseError as err:
        pytest.skip(f"no OpenCL device: {err}")
    t0 = time.perf_counter()
    cal = pm.calibrate(queue=queue, quick=True)
    cal.elapsed = time.perf_counter() - t0  # type: ignore[attr-defined]
    return cal


def test_quick_calibration_end_to_end(quick_calibration: pm.Calibration, tmp_path: Path):
    cal = quick_calibration
    assert cal.elapsed < 30  # type: ignore[attr-defined]
    assert all(c >= 0 for c in cal.costs.values())
    assert cal.p in pm.P_GRID
    assert len(cal.samples) == len(pm.calibration_kernels(quick=True))
    assert all(s["measured"] > 0 for s in cal.samples)
    assert pm.Calibration.load(path=cal.save(tmp_path / "c.json")).costs == cal.costs


def test_calibrated_model_ranks_4x_larger_elementwise_problem_slower(
        quick_calibration: pm.Calibration):
    small = op_kernel("Add", {}, [(1 << 16,), (1 << 16,)], [(1 << 16,)], name="add_s")
    large = op_kernel("Add", {}, [(1 << 18,), (1 << 18,)], [(1 << 18,)], name="add_l")
    ts, tl = pm.predict(small, None, quick_calibration), pm.predict(large, None,
                                                                    quick_calibration)
    assert 0 < ts < tl
    assert [i for i, _ in pm.rank_variants([large, small], quick_calibration)] == [1, 0]
