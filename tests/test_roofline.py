"""Roofline: level detection on synthetic curves, JSON/PNG output, and a measured copy bandwidth
that agrees (within 2x, a ratio on the same device) with a plain copy kernel timed here."""

from __future__ import annotations

import json

import numpy as np
import pyopencl as cl
import pytest

from polyfuse.core.program import PolyfuseError
from polyfuse.perf import roofline as rl
from polyfuse.runtime import device as dv

KiB, MiB = 1024, 1024 * 1024


def test_detect_levels_finds_plateaus_and_drops_ramp_and_transitions() -> None:
    sizes = [4 * KiB * 2**i for i in range(17)]
    gbs = [40, 100, 120, 118, 119, 80, 60, 61, 59, 58, 40, 30, 31, 30, 29, 10, 9.5]
    levels = rl.detect_levels(sizes, gbs)
    assert [lv.name for lv in levels] == ["L1", "L2", "LLC", "DRAM"]
    assert levels[0].bandwidth_gbs == pytest.approx(118.5)
    assert levels[-1].min_working_set_bytes == 128 * MiB
    assert all(a.bandwidth_gbs > b.bandwidth_gbs for a, b in zip(levels, levels[1:]))


def test_detect_levels_drops_lone_transition_points_but_not_coarse_sweeps() -> None:
    sizes = [4 * KiB * 2**i for i in range(17)]
    gbs = [277, 290, 243, 540, 534, 536, 538, 532, 528, 122, 139, 144, 145, 130, 79, 59, 45]
    levels = rl.detect_levels(sizes, gbs)  # measured on PoCL, 2 cores
    assert [lv.name for lv in levels] == ["L1", "LLC", "DRAM"]
    assert levels[-1].bandwidth_gbs == 45 and levels[0].min_working_set_bytes == 32 * KiB
    spiky = list(gbs)
    spiky[5] = 1079  # a timing spike seen under contention must not become a level
    assert [lv.name for lv in rl.detect_levels(sizes, spiky)] == ["L1", "LLC", "DRAM"]
    coarse = rl.detect_levels([16 * KiB, 256 * KiB, 4 * MiB, 64 * MiB], [100, 60, 30, 10])
    assert [lv.name for lv in coarse] == ["L1", "L2", "LLC", "DRAM"]


def test_detect_levels_flat_curve_is_one_level() -> None:
    levels = rl.detect_levels([KiB * 2**i for i in range(6)], [10, 10.5, 9.8, 10.1, 10, 9.9])
    assert [lv.name for lv in levels] == ["DRAM"] and levels[0].points == 6


def _synthetic() -> rl.Roofline:
    return rl.Roofline(
        device={"name": "synthetic"}, device_key="synthetic-0", measured_at="2026-01-01T00:00:00",
        quick=True,
        levels=[rl.BandwidthLevel("L1", 4096, 32768, 200.0, 0.1, 4),
                rl.BandwidthLevel("DRAM", 1 << 26, 1 << 28, 20.0, 0.05, 3)],
        peak_gflops=400.0, launch_overhead_us={"wall": 20.0, "profiled": 5.0, "pipelined": 8.0},
        flops=[{"degree": 8, "flops_per_element": 16, "arithmetic_intensity": 2.0,
                "gflops": 300.0, "spread": 0.01}],
    )


def test_roofline_json_roundtrip_and_plot(tmp_path) -> None:
    roof = _synthetic()
    assert roof.ridge_points() == {"L1": 2.0, "DRAM": 20.0}
    assert roof.attainable_gflops(1.0) == 20.0 and roof.attainable_gflops(100.0) == 400.0
    path = roof.save(tmp_path)
    data = json.loads(path.read_text())
    assert set(rl.JSON_KEYS) <= set(data)
    again = rl.Roofline.load(tmp_path)
    assert again.to_dict() == roof.to_dict()
    png = rl.plot_roofline(roof, [("gemm", 8.0, 150e9), ("axpy", 1 / 12, 1.5e9)],
                           tmp_path / "roofline.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


@pytest.fixture(scope="module")
def queue() -> cl.CommandQueue:
    try:
        ctx, q = dv.get_context()
        dv.check_device(ctx, q)
    except PolyfuseError as err:
        pytest.skip(f"OpenCL device cannot run kernels here: {err}")
    return q


PLAIN_COPY = """__kernel void plain_copy(__global const float *a, __global float *b)
{ const size_t i = get_global_id(0); b[i] = a[i]; }"""


def _plain_copy_gbs(queue: cl.CommandQueue, working_set: int) -> float:
    """Median bandwidth of a one-element-per-work-item copy (reads + writes counted)."""
    n = working_set // 2 // 4
    ctx = queue.context
    a = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                  hostbuf=np.ones(n, np.float32))
    b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, n * 4)
    kernel = cl.Program(ctx, PLAIN_COPY).build().plain_copy
    times = []
    kernel.set_args(a, b)
    cl.enqueue_nd_range_kernel(queue, kernel, (n,), None).wait()
    for _ in range(5):
        evt = cl.enqueue_nd_range_kernel(queue, kernel, (n,), None)
        evt.wait()
        times.append((evt.profile.end - evt.profile.start) * 1e-9)
    return 2 * n * 4 / float(np.median(times)) / 1e9


def test_quick_roofline_files_and_copy_bandwidth(queue: cl.CommandQueue, tmp_path) -> None:
    big = rl.mb.default_sizes(rl.DeviceLimits.from_device(queue.device), quick=True,
                              max_bytes=64 * MiB)[-1]
    plain_before = _plain_copy_gbs(queue, big)  # before and after: other jobs share the cores
    roof = rl.measure_roofline(queue=queue, quick=True, max_bytes=64 * MiB)
    info_json = roof.save(tmp_path)
    png = rl.plot_roofline(roof, [("plain copy", 0.0, 0.0)], tmp_path / "roofline.png")
    data = json.loads(info_json.read_text())
    assert set(rl.JSON_KEYS) <= set(data)
    assert data["levels"] and data["levels"][-1]["name"] == "DRAM"
    assert data["peak_gflops"] > 0 and data["dram_bandwidth_gbs"] > 0
    assert set(data["launch_overhead_us"]) == {"wall", "profiled", "pipelined"}
    assert set(data["bandwidth"]) == {"read", "copy", "rmw"}
    assert png.stat().st_size > 5000
    # copy bandwidth at the largest working set vs a plain one-element-per-work-item copy
    point = data["bandwidth"]["copy"][-1]
    assert point["working_set_bytes"] == big
    plain = sorted([plain_before, _plain_copy_gbs(queue, big)])
    assert plain[0] / 2 <= point["gbs"] <= plain[1] * 2, (point, plain)


def test_kernel_markers_are_numbered_and_data_movement_is_listed(tmp_path):
    """Kernels at one spot share one label; a kernel without floating-point work is in the
    table as not placed, not silently dropped."""
    kernels = [("a#1", 2.0, 1e9), ("copy#2", 0.0, 0.0), ("b#3", 2.0, 1e9),
               ("fused:f#3", 4.0, 2e9)]
    table = rl.kernel_table(kernels)
    assert [line.split()[0] for line in table] == ["1", "2", "3", "4"]
    assert "not placed: no floating-point work" in table[1]
    assert "GFLOP/s" in table[0] and "not placed" not in table[0]
    assert rl.plot_roofline(_synthetic(), kernels, tmp_path / "r.png").stat().st_size > 0


def test_unmeasured_ceilings_are_said_and_not_drawn(tmp_path, recwarn):
    """Every benchmark kernel skipped (a device whose compiler crashes on them): the summary
    says what was not measured and why, the JSON keeps it, the plot has no log of zero."""
    from polyfuse.perf.roofline import Roofline, plot_roofline

    roof = Roofline({"name": "dev"}, "key", "now", True, [], 0.0,
                    {"wall": 1.0, "profiled": 1.0, "pipelined": 1.0},
                    skipped=["bandwidth read: crashed (SIGABRT)", "flops degree 1: rejected"])
    text = roof.summary()
    assert "peak  not measured" in text and "no bandwidth level" in text
    assert "skipped flops degree 1: rejected" in text
    assert Roofline.from_dict(roof.to_dict()).skipped == roof.skipped
    assert roof.ridge_points() == {} and roof.dram_gbs == 0.0
    plot_roofline(roof, [], tmp_path / "r.png")
    assert not [w for w in recwarn if issubclass(w.category, (RuntimeWarning, UserWarning))]
