"""Micro-benchmarks: kernels compute what they claim (else their timings mean nothing), and each
benchmark returns sane, positive, finite numbers in quick mode."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pyopencl as cl
import pytest

from polyfuse.core.program import PolyfuseError
from polyfuse.perf import microbench as mb
from polyfuse.runtime import device as dv

# --------------------------------------------------------------------------- no device needed


def _fake_limits(cpu: bool = True, cus: int = 2) -> dv.DeviceLimits:
    return dv.DeviceLimits(
        name="fake", platform="fake", vendor="fake",
        device_type="CPU" if cpu else "GPU", driver_version="1", opencl_version="OpenCL 3.0",
        compute_units=cus, max_clock_mhz=1000, max_work_group_size=1024,
        max_work_item_sizes=(1024, 1024, 1024), local_mem_size=64 * 1024,
        global_mem_size=1 << 32, max_mem_alloc_size=1 << 30, global_mem_cache_size=1 << 20,
        global_mem_cacheline_size=64, native_vector_width_float=8,
        preferred_work_group_size_multiple=8, sub_group_size=None,
    )


@pytest.mark.parametrize("cpu", [True, False])
@pytest.mark.parametrize("n_units", [4, 64, 1 << 20])
def test_stream_geometry_covers_every_unit_once(cpu: bool, n_units: int) -> None:
    geo = mb.stream_geometry(_fake_limits(cpu), n_units, 4)
    assert geo.items * geo.units_per_item == n_units
    assert geo.units_per_item % 4 == 0
    assert geo.items % geo.local == 0
    assert geo.layout == ("blocked" if cpu else "interleaved")


@pytest.mark.parametrize("kind", mb.STREAM_KINDS)
def test_stream_source_has_kernel_and_unrolled_accesses(kind: str) -> None:
    src = mb.stream_source(kind, 8, 4, "blocked")
    assert f"__kernel void bw_{kind}(" in src
    assert "float8" in src and "j + 3" in src
    with pytest.raises(ValueError):
        mb.stream_source("nope")


def test_poly_coefficients_keep_iteration_bounded() -> None:
    for d in (1, 7, 128):
        c = mb.poly_coefficients(d)
        assert c.dtype == np.float32 and len(c) == d + 1
        assert (c > 0).all() and c.sum() <= 1.0 + 1e-6
    x = np.linspace(0, 1, 33, dtype=np.float32)
    y = mb.horner_reference(x, 16, reps=50)
    assert np.isfinite(y).all() and (y > 0).all() and (y <= 1).all()
    assert mb.flops_source(3, 4, 2).count(" fma(") == 3 * 2
    assert mb.flops_source(3, 4, 2, op="mad").count(" mad(") == 3 * 2


def test_default_sizes_are_capped() -> None:
    lim = _fake_limits()
    sizes = mb.default_sizes(lim, max_bytes=1 << 20)
    assert sizes[0] == 4096 and sizes[-1] == 1 << 20
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))
    small = replace(lim, global_mem_size=16 << 20)
    assert max(mb.default_sizes(small)) <= 4 << 20
    assert len(mb.default_sizes(lim, quick=True)) <= 5


def test_default_sizes_reach_past_the_last_cache() -> None:
    """A GPU's 50 MB L2 held the quick roofline's largest working set (64 MiB) at above DRAM
    bandwidth: the sizes go to several times the device's global memory cache."""
    big_cache = replace(_fake_limits(), global_mem_size=140 << 30,
                        max_mem_alloc_size=35 << 30, global_mem_cache_size=50 << 20)
    for quick in (True, False):
        assert mb.default_sizes(big_cache, quick=quick)[-1] >= 4 * (50 << 20)
    # an H200 reports 4 MiB of global memory cache (its L2 is 50 MB): GPUs go to 1 GiB
    h200 = replace(big_cache, global_mem_cache_size=4325376, device_type="ALL | GPU")
    assert mb.default_sizes(h200, quick=True)[-1] == mb.GPU_MIN_WORKING_SET


def test_timing_result_summary() -> None:
    t = dv.TimingResult.from_samples([3.0, 1.0, 2.0, 4.0, 5.0])
    assert (t.median, t.min, t.max) == (3.0, 1.0, 5.0)
    assert t.spread == pytest.approx((4.0 - 2.0) / 3.0)
    assert json.loads(json.dumps(t.to_dict()))["samples"] == [3.0, 1.0, 2.0, 4.0, 5.0]


def test_bad_device_spec_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    if not dv.list_devices():
        pytest.skip("no OpenCL device")
    for spec in ("99:0", "0:99", "no-such-platform", "1:2:3"):
        with pytest.raises(PolyfuseError, match="invalid OpenCL device"):
            dv.get_device(spec)
    monkeypatch.setenv("PYOPENCL_CTX", "77")
    with pytest.raises(PolyfuseError, match="77"):
        dv.get_context()


def test_device_limits_and_key_are_queried_and_stable() -> None:
    if not dv.list_devices():
        pytest.skip("no OpenCL device")
    spec, _, dev = dv.list_devices()[0]
    lim = dv.device_limits(spec)
    assert lim.name == dev.name.strip()
    assert lim.max_work_group_size == dev.max_work_group_size
    assert lim.local_mem_size == dev.local_mem_size and lim.compute_units >= 1
    assert dv.device_key(dev) == dv.device_key(spec) == dv.device_key(lim)
    assert dv.device_key(lim) != dv.device_key(replace(lim, driver_version="other"))
    assert json.dumps(lim.to_dict())


# --------------------------------------------------------------------------- on the device


@pytest.fixture(scope="module")
def queue() -> cl.CommandQueue:
    try:
        ctx, q = dv.get_context()
        dv.check_device(ctx, q)
    except PolyfuseError as err:
        pytest.skip(f"OpenCL device cannot run kernels here: {err}")
    return q


def _finite_positive(*xs: float) -> bool:
    return all(math.isfinite(x) and x > 0 for x in xs)


@pytest.mark.parametrize("layout", ["blocked", "interleaved"])
def test_copy_kernel_copies(queue: cl.CommandQueue, layout: str) -> None:
    x = np.random.default_rng(0).random(1 << 14, dtype=np.float32)
    out = mb.execute_stream("copy", queue, x, reps=2, layout=layout)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("layout", ["blocked", "interleaved"])
def test_read_kernel_reduces(queue: cl.CommandQueue, layout: str) -> None:
    x = np.random.default_rng(1).random(1 << 14, dtype=np.float32)
    partial = mb.execute_stream("read", queue, x, reps=1, layout=layout)
    assert partial.sum(dtype=np.float64) == pytest.approx(x.sum(dtype=np.float64), rel=1e-4)
    partial3 = mb.execute_stream("read", queue, x, reps=3, layout=layout)
    assert partial3.sum(dtype=np.float64) == pytest.approx(3 * x.sum(dtype=np.float64), rel=1e-4)


def test_rmw_kernel_increments(queue: cl.CommandQueue) -> None:
    x = np.random.default_rng(2).random(1 << 12, dtype=np.float32)
    out = mb.execute_stream("rmw", queue, x, reps=4, alpha=0.25)
    np.testing.assert_allclose(out, x + 1.0, rtol=1e-6)


@pytest.mark.parametrize("degree", [1, 5, 32])
def test_poly_kernel_matches_numpy_horner(queue: cl.CommandQueue, degree: int) -> None:
    x = np.random.default_rng(3).random(1 << 12, dtype=np.float32)
    fused = dv.DeviceLimits.from_device(queue.device).fp32_fma
    for reps in (1, 3):
        out = mb.execute_poly(queue, x, degree, reps=reps)
        ref = mb.horner_reference(x, degree, reps, fused=fused)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_time_kernel_uses_profiling(queue: cl.CommandQueue) -> None:
    empty = dv.build_kernel(queue.context, mb.EMPTY_SOURCE, "empty")
    buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE, 64)
    t = dv.time_kernel(queue, empty, (1,), (1,), [buf], repeat=4, warmup=1)
    assert len(t.samples) == 4 and t.min <= t.median <= t.max and t.min >= 0
    plain = cl.CommandQueue(queue.context)
    with pytest.raises(PolyfuseError, match="profiling"):
        dv.time_kernel(plain, empty, (1,), (1,), [buf])


def test_build_error_is_one_clear_line(queue: cl.CommandQueue) -> None:
    with pytest.raises(PolyfuseError, match="OpenCL build failed"):
        dv.build_program(queue.context, "__kernel void k(__global float *a) { a[0] = b; }")


def test_bandwidth_quick(queue: cl.CommandQueue) -> None:
    for kind in mb.STREAM_KINDS:
        res = mb.bandwidth(kind, queue, quick=True, max_bytes=4 << 20)
        assert res.kind == kind and len(res.points) >= 2
        sizes, gbs = res.curve()
        assert sizes == sorted(sizes) and sizes[-1] <= 4 << 20
        for p in res.points:
            assert _finite_positive(p.gbs, p.gbs_best, p.time.median) and p.reps >= 1
            assert p.gbs_best >= p.gbs * 0.999
        d = json.loads(json.dumps(res.to_dict()))
        assert d["points"][0]["time"]["median"] > 0


def test_flops_quick(queue: cl.CommandQueue) -> None:
    res = mb.flops(queue, quick=True)
    assert [p.degree for p in res.points] == [1, 8, 64]
    assert all(_finite_positive(p.gflops, p.arithmetic_intensity) for p in res.points)
    assert res.peak_gflops == max(p.gflops for p in res.points)
    assert res.points[-1].flops_per_element == 128
    json.dumps(res.to_dict())


def test_local_barrier_launch_stride_quick(queue: cl.CommandQueue) -> None:
    lm = mb.local_memory(queue, quick=True)
    assert _finite_positive(lm.gbs, lm.seconds_per_load)
    br = mb.barrier_cost(queue, quick=True)
    assert br.barriers == [0, 1, 4] and len(br.times) == 3
    assert math.isfinite(br.seconds_per_group_barrier) and br.seconds_per_group_barrier >= 0
    lo = mb.launch_overhead(queue, quick=True)
    assert _finite_positive(lo.wall.median, lo.pipelined_seconds) and lo.profiled.median >= 0
    st = mb.strided_access(queue, quick=True)
    assert [p.lstride for p in st.points] == [1, 4, 16, 1]
    assert st.points[-1].gstride == 0
    assert all(_finite_positive(p.gbs, p.seconds_per_load) for p in st.points)
    for r in (lm, br, lo, st):
        json.dumps(r.to_dict())
