"""Terms of the performance model beyond raw operation counts: common subexpressions, the
launch's footprint against the cache, and fitting the cache size with the costs.

Every feature is checked against a brute-force enumeration of what the kernel does; the fit is
checked to recover the costs, the overlap exponent and the cache size that generated noiseless
synthetic times.  No test asserts a measured time.
"""

from __future__ import annotations

import numpy as np
import pytest

from polyfuse.frontend.opencl import parse_kernels
from polyfuse.oplib import fastmath
from polyfuse.perf import model as pm
from polyfuse.perf.counts import count_kernel

SG = 8


def _counts(src: str, name: str, n: int, local: int = 64) -> object:
    k = pm.specialize_kernel(parse_kernels(src)[name], (n,), (local,))
    return count_kernel(k, subgroup_size=SG)


def _ops(src: str, name: str, n: int = 64) -> dict[str, int]:
    return {r.op: int(r.count.value) for r in _counts(src, name, n).ops}


def test_repeated_subexpressions_are_counted_once():
    """``fastmath.erf`` writes its clamped argument two dozen times: the compiler computes it
    once, so the count is that of the same function written with temporaries."""
    inline = ("__kernel void k(__global const float *x, __global float *y)\n{\n"
              "    const int i = get_global_id(0);\n    const float v = x[i];\n"
              f"    y[i] = {fastmath.erf('v')};\n}}\n")
    steps_p = fastmath._ERF_P
    steps_q = fastmath._ERF_Q

    def horner(cs: tuple[str, ...]) -> str:
        acc = cs[0]
        for c in cs[1:]:
            acc = f"({acc} * x2 + {c})"
        return acc

    temps = ("__kernel void k(__global const float *x, __global float *y)\n{\n"
             "    const int i = get_global_id(0);\n    const float v = x[i];\n"
             "    const float c = (v > 4.0f ? 4.0f : v < -4.0f ? -4.0f : v);\n"
             "    const float x2 = c * c;\n"
             f"    const float num = {horner(steps_p)};\n"
             f"    const float den = {horner(steps_q)};\n"
             "    y[i] = c * num / den;\n}\n")
    got, want = _ops(inline, "k"), _ops(temps, "k")
    assert got == want
    # brute force: per work-item 2 compares, x*x, 6 + 4 Horner steps (fma), c * num, / den
    n_sg = 64 // SG
    assert got == {"cmp": 2 * n_sg, "mul": 2 * n_sg, "fma": 10 * n_sg, "div": n_sg}


def test_no_common_subexpression_across_a_side_effect():
    src = ("__kernel void k(__global float *x)\n{\n    const int i = get_global_id(0);\n"
           "    float a = x[i];\n    x[i] = (a * a) + (a++ * a) + (a * a);\n}\n")
    # the increment between the products: nothing is shared, every operation is counted
    ops = _ops(src, "k")
    assert ops["mul"] + ops.get("fma", 0) == 3 * 64 // SG


SHIFT = """
__kernel void shift(__global const float *x, __global float *y)
{
    const int i = get_global_id(0);
    y[i] = x[i] + x[i + 1] + x[2 * i];
}
"""


@pytest.mark.parametrize("n", [64, 512])
def test_footprint_and_bytes_beyond_the_cache_are_exact(n: int):
    kc = _counts(SHIFT, "shift", n)
    # brute force: the distinct elements each array has touched by the n work-items
    xs = {j for i in range(n) for j in (i, i + 1, 2 * i)}
    ys = set(range(n))
    fp = 4 * (len(xs) + len(ys))
    assert pm.footprint_bytes(kc) == fp
    charged_f = pm.features_of(kc, cache_bytes=1 << 30).values
    charged = sum(charged_f[f] for f in ("gmem_unit_bytes", "gmem_narrow_bytes",
                                         "gmem_loop_bytes", "gmem_strided_bytes",
                                         "gmem_uniform_bytes"))
    assert charged_f["gmem_beyond_cache_bytes"] == 0  # it all fits
    for cache in (1024, 2048):
        f = pm.features_of(kc, cache_bytes=cache).values
        want = charged * max(0.0, 1.0 - cache / fp)
        assert f["gmem_beyond_cache_bytes"] == pytest.approx(want, rel=1e-12)
        # the other features do not depend on the cache size
        assert {k: v for k, v in f.items() if k != "gmem_beyond_cache_bytes"} == \
            {k: v for k, v in charged_f.items() if k != "gmem_beyond_cache_bytes"}


STREAM = """
__kernel void stream(__global const float *x, __global const float *z, __global float *y)
{
    const int i = get_global_id(0);
    y[i] = x[i] * 0.5f + z[i];
}
"""


def test_fit_recovers_costs_overlap_and_cache_size():
    """Synthetic times of streams from 2 KiB to 2 MiB of footprint and op chains, generated
    with a 64 KiB cache: the fit finds that size among the grid, the exponent and the costs."""
    chain = ("__kernel void chain(__global const float *x, __global float *y)\n{\n"
             "    const int i = get_global_id(0);\n    float v = x[i];\n"
             + "".join(f"    v = v * {1.0 + k / 64:.4f}f + 0.5f;\n" for k in range(8))
             + "    y[i] = v;\n}\n")
    counts = [_counts(STREAM, "stream", n) for n in (1 << 8, 1 << 11, 1 << 13, 1 << 15,
                                                     1 << 17)]
    counts += [_counts(chain, "chain", n) for n in (1 << 8, 1 << 12, 1 << 16)]
    counts += [_counts(STREAM, "stream", n, local) for n, local in ((1 << 12, 16),
                                                                    (1 << 16, 256))]
    truth = np.zeros(len(pm.FEATURES))
    for f, c in (("flop_fma", 2e-9), ("work_items", 1e-11), ("gmem_unit_bytes", 2e-11),
                 ("gmem_beyond_cache_bytes", 8e-11), ("launches", 2e-6),
                 ("work_groups", 5e-9)):
        truth[pm.FEATURES.index(f)] = c
    cache = 64 << 10
    x = np.array([pm.features_of(kc, cache_bytes=cache).vector() for kc in counts])
    t = pm.model_time(x, truth, 2.0)
    grid = (16 << 10, 64 << 10, 256 << 10)
    costs, p, got_cache, rms = pm.fit_calibration(counts, t, (1.0, 2.0, 8.0), grid)
    assert got_cache == cache and p == 2.0 and rms < 1e-5
    fitted = pm.model_time(x, costs, p)
    assert np.allclose(fitted, t, rtol=1e-5)
    for f in ("gmem_beyond_cache_bytes", "launches"):
        k = pm.FEATURES.index(f)
        assert costs[k] == pytest.approx(truth[k], rel=1e-3)


def test_only_pocl_basic_is_timed_by_thread_cpu_time():
    from types import SimpleNamespace

    cl = pytest.importorskip("pyopencl")
    from polyfuse.runtime.device import runs_in_calling_thread

    def dev(name: str, units: int, kind: int = cl.device_type.CPU,
            version: str = "OpenCL 3.0 PoCL 3.1+debian") -> SimpleNamespace:
        plat = SimpleNamespace(name="Portable Computing Language", version=version)
        return SimpleNamespace(name=name, max_compute_units=units, type=kind, platform=plat)

    assert runs_in_calling_thread(dev("basic-skylake-avx512-AMD EPYC", 1))
    # worker threads (pthread), a GPU, another vendor's CPU runtime: profiling events
    assert not runs_in_calling_thread(dev("pthread-skylake-avx512-AMD EPYC", 2))
    assert not runs_in_calling_thread(dev("basic-gpu", 1, cl.device_type.GPU))
    assert not runs_in_calling_thread(dev("basic", 1, version="OpenCL 3.0 Intel"))
