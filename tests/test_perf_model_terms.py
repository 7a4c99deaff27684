"""Terms of the performance model beyond raw operation counts: common subexpressions, the
launch's footprint against the cache, what earlier launches left in the last-level cache, and
fitting the cache sizes with the costs.

Every feature is checked against a brute-force enumeration of what the kernel does; the fit is
checked to recover the costs, the overlap exponent and the cache size that generated noiseless
synthetic times.  No test asserts a measured time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polyfuse
from polyfuse.frontend.opencl import parse_kernels
from polyfuse.oplib import fastmath
from polyfuse.perf import model as pm
from polyfuse.perf.counts import count_kernel, count_program

SG = 8


def _counts(src: str, name: str, n: int, local: int = 64) -> object:
    k = pm.specialize_kernel(parse_kernels(src)[name], (n,), (local,))
    return count_kernel(k, subgroup_size=SG)


def _ops(src: str, name: str, n: int = 64) -> dict[str, int]:
    return {r.op: int(r.count.value) for r in _counts(src, name, n).ops}



def _fit_recovers(x: np.ndarray, costs: dict[str, float], checked: tuple[str, ...]) -> None:
    """Times made from ``x`` with known per-feature ``costs`` fit back to those costs."""
    truth = np.zeros(len(pm.FEATURES))
    for f, c in costs.items():
        truth[pm.FEATURES.index(f)] = c
    fitted, rms = pm.fit_costs(x, pm.model_time(x, truth, 1.0), 1.0)
    assert rms < 1e-5
    for f in checked:
        k = pm.FEATURES.index(f)
        assert fitted[k] == pytest.approx(truth[k], rel=1e-3), f

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
        share = want / charged
        assert f["gmem_strided_beyond_bytes"] == pytest.approx(
            charged_f["gmem_strided_bytes"] * share, rel=1e-12)
        # the other features do not depend on the cache size
        beyond = ("gmem_beyond_cache_bytes", "gmem_strided_beyond_bytes")
        assert {k: v for k, v in f.items() if k not in beyond} == \
            {k: v for k, v in charged_f.items() if k not in beyond}


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
    costs, p, got_cache, _, _, rms = pm.fit_calibration(counts, t, (1.0, 2.0, 8.0), grid)
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


IDIV = """
__kernel void idiv(__global const float *x, __global float *y, const int d, const int K)
{
    const int i = get_global_id(0);
    float s = 0.0f;
    for (int k = 0; k < K; ++k)
        if (k <= i % 7)
            s += x[k] * (float)(k / d + i % 8 + i / 5);
    y[i] = s + (float)(i % d);
}
"""


@pytest.mark.parametrize("n,k", [(64, 10), (192, 3)])
def test_integer_division_by_a_run_time_divisor_is_counted_exactly(n: int, k: int):
    """``k / d`` and ``i % d`` divide by an argument (a division per lane); ``i % 7``,
    ``i % 8`` and ``i / 5`` by literals, which a compiler turns into multiplications and
    shifts: not counted."""
    kern = pm.specialize_kernel(parse_kernels(IDIV)["idiv"], (n,), (SG,), {"d": 3, "K": k})
    # brute force: one k / d per iteration each work-item runs, one i % d per work-item
    iters = sum(1 for i in range(n) for kk in range(k) if kk <= i % 7)
    per_item = count_kernel(kern, subgroup_size=SG, granularity="work-item")
    idiv = next(r for r in per_item.ops if r.op == "idiv")
    assert idiv.dtype == "int32" and idiv.count.value == iters + n
    assert idiv.loop_count.value == iters
    # per sub-group (the default): every lane of a sub-group runs the same iterations here
    # only where i % 7 agrees across it, so count the sub-groups' instructions directly
    sg_iters = sum(1 for g in range(n // SG) for kk in range(k)
                   if any(kk <= i % 7 for i in range(g * SG, (g + 1) * SG)))
    f = pm.features_of(count_kernel(kern, subgroup_size=SG)).values
    assert f["int_divmod"] == sg_iters + n // SG
    # integer divisions are neither float ops nor loop flops
    fi = pm.features_of(per_item).values
    flops = sum(r.loop_count.value for r in per_item.ops if r.op != "idiv" and r.loop_count)
    assert fi["loop_flops"] == flops


def test_fit_recovers_the_integer_division_cost():
    """Synthetic times of the calibration's own launches (streams, op chains, integer
    divisions) from known costs: the fit gives the cost per integer division back."""
    kernels = [ck for ck in pm.calibration_kernels(quick=True)
               if ck.kernel in ("empty", "calib_stream", "calib_fma", "calib_idiv")]
    kernels += [ck for ck in pm.calibration_kernels(quick=False)
                if ck.kernel in ("calib_idiv", "calib_stream")]
    x = np.array([pm.features_of(pm.count_calibration_kernel(ck, SG)).vector()
                  for ck in kernels])
    assert x[:, pm.FEATURES.index("int_divmod")].max() > 0
    truth = np.zeros(len(pm.FEATURES))
    for f, c in (("flop_fma", 1e-10), ("int_divmod", 4e-9), ("work_items", 1e-11),
                 ("gmem_unit_bytes", 5e-11), ("launches", 3e-6), ("work_groups", 1e-8)):
        truth[pm.FEATURES.index(f)] = c
    t = pm.model_time(x, truth, 1.0)
    costs, rms = pm.fit_costs(x, t, 1.0)
    assert rms < 1e-6
    k = pm.FEATURES.index("int_divmod")
    assert costs[k] == pytest.approx(truth[k], rel=1e-4)


def test_calibration_kernels_scale_their_work_not_their_overheads():
    one = pm.calibration_kernels(quick=True)
    eight = pm.calibration_kernels(quick=True, scale=8)
    assert [c.kernel for c in one] == [c.kernel for c in eight]
    for a, b in zip(one, eight):
        if a.kernel == "empty":
            assert a == b
            continue
        assert b.label == f"{a.label} x8"
        assert np.prod(b.global_size) == 8 * np.prod(a.global_size)
    # exact counts of a scaled launch: the stream's bytes and work-items are 8x
    a, b = (next(c for c in ks if c.kernel == "calib_stream") for ks in (one, eight))
    fa, fb = (pm.features_of(pm.count_calibration_kernel(c, SG)).values for c in (a, b))
    assert fb["gmem_unit_bytes"] == 8 * fa["gmem_unit_bytes"]
    assert fb["work_items"] == 8 * fa["work_items"]
    with pytest.raises(ValueError):
        pm.calibration_kernels(quick=True, scale=3)


def _queue() -> object:
    pytest.importorskip("pyopencl")
    import polyfuse
    from polyfuse.runtime.device import get_context

    try:
        return get_context()[1]
    except polyfuse.PolyfuseError as err:
        pytest.skip(f"no OpenCL device: {err}")


def test_short_calibration_launches_grow_until_they_last(monkeypatch: pytest.MonkeyPatch):
    """The rule, on a device whose launch takes 1 ns per work-item plus 2 us: every launch
    but the overhead ones grows, in powers of two, to the first scale that lasts
    ``min_launch_s`` (or to the cap); nothing is measured when ``min_launch_s`` is 0."""
    queue = _queue()
    calls: list[int] = []

    def fake(kernels: list, _queue: object, repeat: int, progress: object = None) -> list:
        calls.append(len(kernels))
        return [[2e-6 + 1e-9 * float(np.prod(ck.global_size))] * repeat for ck in kernels]

    monkeypatch.setattr(pm, "measure_calibration", fake)
    assert pm.sized_calibration_kernels(queue, True) == pm.calibration_kernels(True)
    assert not calls
    base = pm.calibration_kernels(True)
    want_s = 400e-6
    got = pm.sized_calibration_kernels(queue, True, min_launch_s=want_s, max_scale=1 << 10)
    assert [c.kernel for c in got] == [c.kernel for c in base]
    from polyfuse.runtime.device import DeviceLimits

    lim = DeviceLimits.from_device(queue.device)
    budget = lim.global_mem_size // 2 // len(base)
    for i, (a, b) in enumerate(zip(base, got)):
        scale = int(np.prod(b.global_size) // np.prod(a.global_size))
        t = 2e-6 + 1e-9 * float(np.prod(b.global_size))
        if a.kernel == "empty":
            assert b == a
        elif t < want_s and scale < 1 << 10:
            # too short only where twice the size would not fit the device
            bigger = pm.calibration_kernels(True, scale=2 * scale)[i]
            assert not pm._fits(bigger, budget, lim.max_mem_alloc_size), b.label
        else:
            # long enough, and not grown past twice the threshold (steps of the time ratio)
            assert t < 2 * want_s or scale == 1 or scale == 1 << 10, b.label
            assert scale == 1 or b.label.endswith(f"x{scale}")
    assert any(np.prod(b.global_size) > np.prod(a.global_size) for a, b in zip(base, got))


def test_a_tiny_calibration_launch_is_sampled_after_another_kernels(monkeypatch):
    """A launch of microseconds (its first sample under ``TINY_LAUNCH_S``) gets one sample a
    round, the median of ``TINY_RUNS`` launches after as many unrecorded, each right after a
    launch of another tiny kernel (a program's launches follow other kernels'); a longer one
    is launched once a round."""
    from polyfuse.runtime import device as rd

    queue = _queue()
    empties = [ck for ck in pm.calibration_kernels(True) if ck.kernel == "empty"][:2]
    stream = next(ck for ck in pm.calibration_kernels(True)
                  if ck.label.startswith("stream 1->1") and np.prod(ck.global_size) >= 1 << 19)
    order: list[str] = []
    real = rd.time_kernel

    def recorded(queue, kernel, *args, **kw):
        order.append(kernel.function_name)
        return real(queue, kernel, *args, **kw)

    monkeypatch.setattr(rd, "time_kernel", recorded)
    times = pm.measure_calibration(empties + [stream], queue, 3)
    assert all(ts is not None and len(ts) == 3 and min(ts) > 0 for ts in times)
    assert times[2][0] >= pm.TINY_LAUNCH_S  # 2 MB: never tiny
    first, later = order[:3], order[3:]
    assert first == ["empty", "empty", stream.kernel]
    tiny = sum(ts[0] < pm.TINY_LAUNCH_S for ts in times)  # the empty kernels, unless loaded
    # each tiny one: 2 x TINY_RUNS launches, each after the other tiny kernel's
    per_round = tiny * 2 * pm.TINY_RUNS * (2 if tiny > 1 else 1) + (3 - tiny)
    assert len(later) == 2 * per_round
    assert later.count(stream.kernel) == 2


def test_short_calibration_launches_grow_on_the_device():
    """The rule on PoCL at a threshold its quick launches partly miss: the grown launches
    run, and the threshold is met or the scale is at its cap."""
    queue = _queue()
    base = pm.calibration_kernels(True)
    got = pm.sized_calibration_kernels(queue, True, min_launch_s=300e-6, max_scale=8)
    times = pm.measure_calibration(got, queue, 1)
    grown = 0
    for a, b, ts in zip(base, got, times):
        assert ts is not None and ts[0] > 0
        scale = int(np.prod(b.global_size) // np.prod(a.global_size))
        grown += scale > 1
        assert a.kernel != "empty" or scale == 1
    assert grown > 0


CHAIN = Path(__file__).resolve().parent.parent / "examples" / "elementwise_chain"


def test_warm_shares_follow_the_launch_order():
    """``elementwise_chain`` at n = 1024 (six buffers of 4 KiB; scale x→a, add a,y→b,
    relu b→c, copy c→out): the host uploads x, y, a, b, c, out, then each launch touches its
    arrays in parameter order.  With a last-level cache of 3.5 buffers, by hand (LRU over
    whole buffers): scale finds x behind 5 buffers (cold) and a behind 3 (half of it left);
    every other launch finds what the launch before it wrote and nothing else."""
    prog = polyfuse.load_opencl(str(CHAIN / "kernels.cl"), host=str(CHAIN / "host.c"),
                                params={"n": 1024})
    counts = count_program(prog, subgroup_size=SG, values={"n": 1024})
    ids = [lc.id for lc in prog.launches]
    got = pm.warm_shares(prog, counts, 7 * 2048, {"n": 1024})
    assert [got[i] for i in ids] == [{"x": 0.0, "a": 0.5}, {"a": 1.0, "y": 0.0, "b": 0.0},
                                     {"b": 1.0, "c": 0.0}, {"c": 1.0, "out": 0.0}]
    roomy = pm.warm_shares(prog, counts, 1 << 20, {"n": 1024})
    assert all(v == 1.0 for i in ids for v in roomy[i].values())
    # the cold bytes of add (a,y → b) with a warm and a quarter of y: brute force, each
    # work-item i < n touches a[i], y[i], b[i] once
    f = pm.features_of(counts[ids[1]], warm={"a": 1.0, "y": 0.25}).values
    n = 1024
    assert f["gmem_cold_bytes"] == 4 * (0.75 * n + n)
    assert f["gmem_unit_bytes"] == 4 * 3 * n  # the class bytes do not change
    assert pm.features_of(counts[ids[1]]).values["gmem_cold_bytes"] == 4 * 3 * n


def test_fit_recovers_cold_cost_and_last_level_cache():
    """Synthetic times of streams measured cold and right after themselves (warm), generated
    with a 1 MiB last-level cache and a cost per cold byte: the fit finds that size among
    the grid and the cost, and a stream of 4 MiB run warm is partly cold (1/4 fits)."""
    sizes = (1 << 12, 1 << 14, 1 << 16, 1 << 17, 1 << 18)
    counts = [_counts(STREAM, "stream", n) for n in sizes for _ in (0, 1)]
    warm = [w for _ in sizes for w in (False, True)]
    truth = np.zeros(len(pm.FEATURES))
    for f, c in (("work_items", 1e-11), ("gmem_unit_bytes", 1e-11),
                 ("gmem_cold_bytes", 5e-11), ("launches", 2e-6)):
        truth[pm.FEATURES.index(f)] = c
    llc = 1 << 20
    shares = [pm.calibration_warm_shares(kc, llc) if w else None
              for kc, w in zip(counts, warm)]
    big = pm.footprint_bytes(counts[-1])
    assert big == 3 * 4 * (1 << 18) and shares[-1] == dict.fromkeys(("x", "y", "z"), llc / big)
    x = np.array([pm.features_of(kc, cache_bytes=1 << 30, warm=w).vector()
                  for kc, w in zip(counts, shares)])
    t = pm.model_time(x, truth, 1.0)
    costs, p, _, got_llc, _, rms = pm.fit_calibration(counts, t, (1.0,), (1 << 30,), warm,
                                                      (llc // 4, llc, llc * 4))
    assert got_llc == llc and rms < 1e-5
    k = pm.FEATURES.index("gmem_cold_bytes")
    assert costs[k] == pytest.approx(truth[k], rel=1e-3)


def test_rereads_by_every_group_beyond_the_cache():
    """``calib_colwalk`` (every group walks the same rows × 768 floats): brute force over the
    work-items gives its accesses and footprint; the re-reads beyond the footprint, of an
    array larger than the cache, are charged by the share beyond it.  A stencil's re-reads
    (neighbouring work-items, group-id stride non-zero) are not."""
    rows, groups, width = 16, 4, 128
    src = pm._column_walk_source(width, 768 // width)
    k = pm.specialize_kernel(parse_kernels(src)["calib_colwalk"], (groups * width,), (width,),
                             {"rows": rows})
    kc = count_kernel(k, subgroup_size=SG)
    touched = [kk * 768 + c * width + lane for _g in range(groups) for lane in range(width)
               for kk in range(rows) for c in range(768 // width)]
    fp, reread = 4 * len(set(touched)), 4 * (len(touched) - len(set(touched)))
    assert pm.array_bytes(kc)["x"] == fp
    for cache in (fp // 4, fp // 2, fp, 2 * fp):
        f = pm.features_of(kc, cache_bytes=cache).values
        assert f["gmem_reuse_bytes"] == reread
        assert f["gmem_reuse_beyond_bytes"] == pytest.approx(
            reread * max(0.0, 1 - cache / fp), rel=1e-12)
        # its own cache size, when given, not the launch footprint's
        g = pm.features_of(kc, cache_bytes=1 << 30, reuse_cache_bytes=cache).values
        assert g["gmem_reuse_beyond_bytes"] == f["gmem_reuse_beyond_bytes"]
    sten = ("__kernel void s(__global const float *x, __global float *y)\n{\n"
            "    const int i = get_global_id(0);\n    y[i] = x[i] + x[i + 1] + x[i + 2];\n}\n")
    f = pm.features_of(_counts(sten, "s", 4096), cache_bytes=1024).values
    assert f["gmem_reuse_bytes"] > 0 and f["gmem_reuse_beyond_bytes"] == 0


@pytest.mark.parametrize("width", [28, 32])
def test_guarded_work_items(width: int):
    """``calib_guard`` over rows of 28 floats on a grid padded to 32: some work-items skip
    its access (brute force: 28 of every 32), so every work-item of the launch counts; at 32
    none skips and none counts."""
    rows = 8
    k = pm.specialize_kernel(parse_kernels(pm._guard_source(width))["calib_guard"],
                             (32, rows), (32, 2))
    f = pm.features_of(count_kernel(k, subgroup_size=SG)).values
    active = sum(1 for i0 in range(32) for _ in range(rows) if i0 < width)
    assert f["work_items"] == 32 * rows
    assert f["guarded_work_items"] == (32 * rows if active < 32 * rows else 0)


def test_strided_bytes_beyond_the_cache():
    """``calib_gather`` (a transpose of 16 × 64 floats): its loads are strided, its stores unit
    stride; by brute force each touches n distinct elements once.  The strided bytes beyond the
    cache are the strided bytes times the share of the footprint (2n floats) beyond it."""
    rows, cols = 16, 64
    n = rows * cols
    k = pm.specialize_kernel(parse_kernels(pm._gather_source(rows, cols))["calib_gather"],
                             (n,), (64,))
    kc = count_kernel(k, subgroup_size=SG)
    loads = {(i % rows) * cols + i // rows for i in range(n)}
    assert len(loads) == n and pm.footprint_bytes(kc) == 4 * 2 * n
    for cache in (n, 4 * n, 8 * n, 16 * n):
        f = pm.features_of(kc, cache_bytes=cache).values
        assert f["gmem_strided_bytes"] == 4 * n and f["gmem_unit_bytes"] == 4 * n
        assert f["gmem_strided_beyond_bytes"] == pytest.approx(
            4 * n * max(0.0, 1 - cache / (8 * n)), rel=1e-12)


def test_fit_recovers_the_costs_of_the_new_terms():
    """Noiseless synthetic times of the calibration shapes that carry the terms (column walks
    within and beyond the re-read cache, guarded and unguarded grids, gathers within and beyond
    the cache, streams): the fit recovers each term's cost and the re-read cache size."""
    def spec(src: str, name: str, gsize: tuple, lsize: tuple, vals: dict) -> object:
        k = pm.specialize_kernel(parse_kernels(src)[name], gsize, lsize, vals)
        return count_kernel(k, subgroup_size=SG)

    counts = [spec(pm._column_walk_source(64, 4), "calib_colwalk", (g * 64,), (64,),
                   {"rows": r}) for r, g in ((64, 2), (256, 4), (1024, 4), (512, 8))]
    counts += [spec(pm._guard_source(w), "calib_guard", (32 * -(-w // 32), r), (32, 2), {})
               for w, r in ((28, 64), (32, 64), (56, 256), (64, 256))]
    counts += [spec(pm._gather_source(r, c), "calib_gather", (r * c,), (64,), {})
               for r, c in ((16, 64), (64, 256), (64, 1024))]
    counts += [_counts(STREAM, "stream", n) for n in (1 << 10, 1 << 14, 1 << 16)]
    truth = np.zeros(len(pm.FEATURES))
    for f, c in (("work_items", 1e-11), ("guarded_work_items", 2e-10),
                 ("gmem_unit_bytes", 1e-11), ("gmem_strided_bytes", 4e-11),
                 ("gmem_strided_beyond_bytes", 3e-10), ("gmem_reuse_bytes", 5e-12),
                 ("gmem_reuse_beyond_bytes", 2e-10), ("loop_accesses", 1e-10),
                 ("launches", 2e-6)):
        truth[pm.FEATURES.index(f)] = c
    cache, reuse = 128 << 10, 256 << 10
    x = np.array([pm.features_of(kc, cache_bytes=cache, reuse_cache_bytes=reuse).vector()
                  for kc in counts])
    assert all(x[:, pm.FEATURES.index(f)].any() for f in (
        "guarded_work_items", "gmem_strided_beyond_bytes", "gmem_reuse_beyond_bytes"))
    t = pm.model_time(x, truth, 1.0)
    costs, p, got_cache, _, got_reuse, rms = pm.fit_calibration(
        counts, t, (1.0,), (cache,), None, (pm.DEFAULT_LLC_BYTES,), (64 << 10, reuse, 1 << 20))
    assert got_reuse == reuse and rms < 1e-5
    for f in ("guarded_work_items", "gmem_strided_beyond_bytes", "gmem_reuse_beyond_bytes"):
        k = pm.FEATURES.index(f)
        assert costs[k] == pytest.approx(truth[k], rel=1e-3), f


@pytest.mark.parametrize("rows,cols,depth,m,panels", [(4, 32, 24, 32, 2), (2, 16, 10, 32, 3)])
def test_register_block_counts_are_exact(rows: int, cols: int, depth: int, m: int,
                                         panels: int):
    """``calib_block``: every work-item runs ``depth`` iterations of one loop body of
    ``rows × cols`` multiply-adds and ``rows + cols`` loads.  By brute force over the
    work-items: the body's iterations, its multiply-adds and loads are ``block_iterations``,
    ``block_flops`` and ``block_accesses``, and none of them is a scalar loop op or access
    nor an fma vectorized across work-items."""
    src = pm._register_block_source(rows, cols, depth)
    items = [(gx, gy) for gx in range(m // rows) for gy in range(panels)]
    k = pm.specialize_kernel(parse_kernels(src)["calib_block"], (m // rows, panels), (8, 1))
    kc = count_kernel(k, subgroup_size=SG)
    f = pm.features_of(kc).values
    iters = sum(depth for _ in items)
    assert f["block_iterations"] == iters
    assert f["block_flops"] == iters * rows * cols
    assert f["block_accesses"] == iters * (rows + cols)
    assert f["loop_flops"] == 0 and f["loop_accesses"] == 0 and f["flop_fma"] == 0
    # the loads' bytes stay a work-item's own walk (the stores are straight-line)
    assert f["gmem_loop_bytes"] == pytest.approx(
        4 * len({(r, kk) for gx, _ in items for r in range(gx * rows, gx * rows + rows)
                 for kk in range(depth)}) + 4 * len(
            {(gy, kk, j) for _, gy in items for kk in range(depth) for j in range(cols)}))
    # every work-item loads its own rows of x and its panel of w (not once per sub-group): the
    # loads beyond the distinct elements are the register block's re-reads, none straight-line
    loads = [("x", r * depth + kk) for gx, _ in items for kk in range(depth)
             for r in range(gx * rows, gx * rows + rows)]
    loads += [("w", kk * cols + gy * cols * depth + j) for _, gy in items
              for kk in range(depth) for j in range(cols)]
    assert f["gmem_block_reuse_bytes"] == 4 * (len(loads) - len(set(loads)))
    assert f["gmem_reuse_bytes"] == 0 and f["gmem_own_reuse_bytes"] == 0


def test_a_loop_of_few_statements_is_no_register_block():
    """A loop body under :data:`~polyfuse.perf.counts.REGISTER_BLOCK_STATEMENTS` statements
    (``calib_loop``'s reduction) runs scalar: its ops and loads stay loop ops and accesses."""
    k = pm.specialize_kernel(parse_kernels(pm._loop_source())["calib_loop"], (256,), (64,),
                             {"rows": 8})
    f = pm.features_of(count_kernel(k, subgroup_size=SG)).values
    assert f["block_flops"] == f["block_accesses"] == f["block_iterations"] == 0
    assert f["loop_flops"] == 256 * 8 and f["loop_accesses"] > 0


def test_fit_recovers_the_register_block_costs():
    """Noiseless synthetic times of register blocks of eight shapes, a scalar loop and
    streams: the fit gives the cost per packed multiply-add and per block iteration back."""
    def block(rows: int, cols: int, depth: int, m: int, panels: int) -> object:
        k = pm.specialize_kernel(parse_kernels(pm._register_block_source(rows, cols, depth))[
            "calib_block"], (m // rows, panels), (8, 1))
        return count_kernel(k, subgroup_size=SG)

    counts = [block(*s) for s in ((4, 32, 96, 64, 4), (2, 16, 96, 64, 2), (4, 8, 48, 128, 2),
                                  (8, 8, 96, 128, 2), (4, 32, 24, 32, 2), (2, 16, 48, 128, 4),
                                  (4, 8, 96, 64, 2), (1, 8, 96, 64, 2))]
    loop = parse_kernels(pm._loop_source())["calib_loop"]
    counts += [count_kernel(pm.specialize_kernel(loop, (n,), (64,), {"rows": r}),
                            subgroup_size=SG) for r, n in ((8, 1024), (32, 4096))]
    counts += [_counts(STREAM, "stream", n) for n in (1 << 10, 1 << 14)]
    x = np.array([pm.features_of(kc).vector() for kc in counts])
    _fit_recovers(x, {"block_flops": 2e-11, "block_iterations": 8e-10, "loop_accesses": 3e-10,
                      "loop_flops": 1e-10, "gmem_unit_bytes": 1e-11, "launches": 2e-6},
                  ("block_flops", "block_iterations"))


@pytest.mark.parametrize("rows,width", [(8, 64), (16, 96)])
def test_contiguous_loop_accesses_are_exact(rows: int, width: int):
    """``calib_rowblock``: each work-item walks a 4 × 32 block along its rows, every access
    one element further per inner iteration (the bias's too).  By brute force: every access
    is a contiguous loop access, none a scalar loop access, and the bytes are the distinct
    elements' (``gmem_contiguous_bytes``); a column walk (``calib_loop``) has none."""
    k = pm.specialize_kernel(parse_kernels(pm._row_block_source(4, 32, width))["calib_rowblock"],
                             (rows // 4, width // 32), (2, 1))
    f = pm.features_of(count_kernel(k, subgroup_size=SG)).values
    items = [(gx, gy) for gx in range(rows // 4) for gy in range(width // 32)]
    walked = [((gx * 4 + i), gy * 32 + j) for gx, gy in items for i in range(4)
              for j in range(32)]
    assert f["contiguous_loop_accesses"] == 3 * len(walked)
    assert f["loop_accesses"] == 0 and f["loop_flops"] == 0 and f["gmem_loop_bytes"] == 0
    distinct = 2 * len(set(walked)) + len({c for _, c in walked})
    assert f["gmem_contiguous_bytes"] == pytest.approx(4 * distinct)
    loop = pm.specialize_kernel(parse_kernels(pm._loop_source())["calib_loop"], (256,), (64,),
                                {"rows": 8})
    g = pm.features_of(count_kernel(loop, subgroup_size=SG)).values
    assert g["contiguous_loop_accesses"] == 0 and g["gmem_contiguous_bytes"] == 0


def test_a_register_blocks_stores_are_packed_runs():
    """``calib_block``'s stores ``y[(r0 + i) * pitch + c0 + j] = acc_i_j``: rows of ``cols``
    consecutive elements per work-item, ``rows × cols`` work-items apart — strided across
    work-items, but each work-item's are runs a compiler writes as vectors: unit stride.  A
    loop's accesses and a lone strided store (``calib_gather``) are no run."""
    rows, cols = 2, 16
    k = pm.specialize_kernel(parse_kernels(pm._register_block_source(rows, cols, 8))[
        "calib_block"], (16, 2), (8, 1))
    kc = count_kernel(k, subgroup_size=SG)
    stores = [m for m in kc.mem if m.array == "y"]
    assert stores and all(m.packed for m in stores)
    assert not any(m.packed for m in kc.mem if m.array != "y")
    f = pm.features_of(kc).values
    assert f["gmem_unit_bytes"] == 4 * 16 * 2 * rows * cols and f["gmem_strided_bytes"] == 0
    g = pm.specialize_kernel(parse_kernels(pm._gather_source(16, 64))["calib_gather"],
                             (1024,), (64,))
    assert not any(m.packed for m in count_kernel(g, subgroup_size=SG).mem)


SHARED_BIAS = """
__kernel void shared_bias(__global const float *b, __global float *y)
{
    const int r = get_global_id(1);
    const int c = get_global_id(0) * 8;
    float a0 = b[r]; float a1 = b[r]; float a2 = b[r]; float a3 = b[r];
    y[r * 64 + c] = a0; y[r * 64 + c + 1] = a1; y[r * 64 + c + 2] = a2;
    y[r * 64 + c + 3] = a3;
    float a4 = b[r];
    y[r * 64 + c + 4] = a4;
}
"""


def test_repeated_loads_count_once_until_a_store():
    """Four straight-line loads of ``b[r]`` by the same work-items, then stores, then a fifth:
    a compiler loads once for the first four (count 1) and again after the stores (a store
    may alias): two loads per work-item, where every statement's load counted five."""
    k = pm.specialize_kernel(parse_kernels(SHARED_BIAS)["shared_bias"], (8, 4), (8, 1))
    kc = count_kernel(k, subgroup_size=SG, granularity="work-item")
    loads = sum(int(m.count.value) for m in kc.mem if m.array == "b")
    assert loads == 2 * 8 * 4


def test_a_one_wide_group_along_dimension_0_has_no_uniform_access():
    """A work-group 1 × 8 (sub-groups span dimension 1): a store at stride 64 along dimension 1
    varies inside a sub-group, so it is counted per work-item and is strided, not a load per
    sub-group (``uniform``) as its stride 0 along dimension 0 alone would say."""
    src = ("__kernel void rows(__global const float *x, __global float *y)\n{\n"
           "    const int i = get_global_id(0);\n    const int j = get_global_id(1);\n"
           "    y[j * 64 + i] = x[j * 64 + i] + 1.0f;\n}\n")
    k = pm.specialize_kernel(parse_kernels(src)["rows"], (64, 8), (1, 8))
    f = pm.features_of(count_kernel(k, subgroup_size=SG)).values
    assert f["gmem_uniform_bytes"] == 0 and f["gmem_strided_bytes"] == 2 * 4 * 64 * 8


def test_rereads_beyond_the_cache_take_what_one_group_walks():
    """``calib_block`` with 4 panels of ``w`` (4 × 32 × 64 floats, 32 KiB in all): every
    work-group along dimension 0 re-reads its panel (group-id stride 0), 8 KiB by brute force.
    Beyond a re-read cache of 16 KiB nothing is charged, though the whole ``w`` is larger;
    below 8 KiB the share of the panel beyond it is."""
    rows, cols, depth, m, panels = 2, 32, 64, 64, 4
    k = pm.specialize_kernel(parse_kernels(pm._register_block_source(rows, cols, depth))[
        "calib_block"], (m // rows, panels), (8, 1))
    kc = count_kernel(k, subgroup_size=SG)
    panel = {(kk * cols) + (0 * depth) + j for kk in range(depth) for j in range(cols)}
    assert int(kc.group_footprints["w"].value) == len(panel)
    assert 4 * len(panel) * panels == pm.array_bytes(kc)["w"]
    assert pm.features_of(kc, reuse_cache_bytes=16 << 10).values[
        "gmem_reuse_beyond_bytes"] == 0
    small = pm.features_of(kc, reuse_cache_bytes=4 << 10).values
    reread = sum(m.count.value - m.footprint.value for m in kc.mem if m.array == "w")
    assert small["gmem_reuse_beyond_bytes"] == pytest.approx(
        4 * reread * (1 - (4 << 10) / (4 * len(panel))))


@pytest.mark.parametrize("warm_x", [0.0, 0.25, 1.0])
def test_cold_scattered_bytes_are_exact(warm_x: float):
    """Cold bytes that many streams at once fetch (``gmem_cold_scattered_bytes``): of a
    transpose's, the gathered ``x`` (a stride of 64 elements between work-items), not its
    unit-stride ``y``; of ``calib_rowblock``'s, every array's (each work-item walks its own
    rows in a loop).  Brute force over the elements each work-item touches, ``x`` a share
    ``warm_x`` warm, the rest cold."""
    g = pm.specialize_kernel(parse_kernels(pm._gather_source(16, 64))["calib_gather"],
                             (16 * 64,), (64,))
    f = pm.features_of(count_kernel(g, subgroup_size=SG), warm={"x": warm_x}).values
    n = 16 * 64
    xs = {(i % 16) * 64 + i // 16 for i in range(n)}
    assert f["gmem_cold_bytes"] == pytest.approx(4 * ((1 - warm_x) * len(xs) + n))
    assert f["gmem_cold_scattered_bytes"] == pytest.approx(4 * (1 - warm_x) * len(xs))
    rows, width = 8, 64
    k = pm.specialize_kernel(parse_kernels(pm._row_block_source(4, 32, width))["calib_rowblock"],
                             (rows // 4, width // 32), (2, 1))
    r = pm.features_of(count_kernel(k, subgroup_size=SG), warm={"x": warm_x}).values
    walked = {(gx * 4 + i, gy * 32 + j) for gx in range(rows // 4) for gy in range(width // 32)
              for i in range(4) for j in range(32)}
    bias = {c for _, c in walked}
    cold = 4 * ((1 - warm_x) * len(walked) + len(walked) + len(bias))
    assert r["gmem_cold_bytes"] == pytest.approx(cold)
    assert r["gmem_cold_scattered_bytes"] == pytest.approx(cold)
    s = pm.features_of(_counts(STREAM, "stream", 4096)).values
    assert s["gmem_cold_bytes"] > 0 and s["gmem_cold_scattered_bytes"] == 0


def test_fit_recovers_the_scattered_cold_cost():
    """Synthetic times of streams and of row blocks, each cold and warm, from known costs
    (a cold byte, and a cold byte fetched by many streams at once): the fit recovers both."""
    spec = pm.specialize_kernel
    counts = [_counts(STREAM, "stream", n) for n in (1 << 12, 1 << 14, 1 << 16)]
    counts += [count_kernel(spec(parse_kernels(pm._row_block_source(4, 32, w))["calib_rowblock"],
                                 (r // 4, w // 32), (8, 1)), subgroup_size=SG)
               for r, w in ((64, 256), (128, 768), (256, 512))]
    rows = [(kc, w) for kc in counts for w in (None, 1.0)]
    x = np.array([pm.features_of(kc, cache_bytes=1 << 30, warm=None if w is None else
                                 dict.fromkeys(pm.array_bytes(kc), w)).vector()
                  for kc, w in rows])
    _fit_recovers(x, {"gmem_unit_bytes": 1e-11, "gmem_contiguous_bytes": 2e-11,
                      "gmem_cold_bytes": 3e-11, "gmem_cold_scattered_bytes": 1e-10,
                      "launches": 2e-6}, ("gmem_cold_bytes", "gmem_cold_scattered_bytes"))


ONE_TRIP = """
__kernel void one_trip(__global const float *a, __global const float *b, __global float *y)
{
    const int grp = get_group_id(0);
    const int lane = get_local_id(0);
    for (int bi = 0; bi < TRIPS; bi++)
        for (int bj = 0; bj < 1; bj++) {
            const int col = (bi * 64) + (bj * 64) + lane;
            y[(grp * 64 * TRIPS) + col] = a[(grp * 64 * TRIPS) + col] / b[0];
        }
}
"""
STRAIGHT = """
__kernel void one_trip(__global const float *a, __global const float *b, __global float *y)
{
    const int grp = get_group_id(0);
    const int lane = get_local_id(0);
    y[(grp * 64) + lane] = a[(grp * 64) + lane] / b[0];
}
"""


def test_a_loop_of_one_iteration_is_straight_line_code():
    """A generated kernel's block loops of one iteration (``for (bj = 0; bj < 1; bj++)``) are
    removed by the compiler: every feature is the straight-line kernel's (``Div_17`` of the
    tiled BERT-base layer was charged its three accesses as loop accesses, 3.8x over).  With
    two iterations of the outer loop, its accesses are loop accesses again, one nest deep
    (brute force: 2 loads and a store per iteration, 2 iterations per work-item)."""
    n = 1024
    one = pm.features_of(_counts(ONE_TRIP.replace("TRIPS", "1"), "one_trip", n)).values
    straight = pm.features_of(_counts(STRAIGHT, "one_trip", n)).values
    assert one == straight and one["loop_accesses"] == 0 and one["nested_loop_accesses"] == 0
    two = pm.features_of(_counts(ONE_TRIP.replace("TRIPS", "2"), "one_trip", n)).values
    assert two["loop_accesses"] == 3 * 2 * n and two["nested_loop_accesses"] == 0


NEST = """
__kernel void nest(__global const float *a, __global const float *b, __global float *y)
{
    const int i = get_global_id(0);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++)
        {
            const float u = a[(i * ROWS + r) * COLS + c];
            const float v = b[(i * ROWS + r) * COLS + c];
            y[(i * ROWS + r) * COLS + c] = u * v;
        }
}
"""


def test_a_nests_loop_control_is_charged_per_iteration():
    """``nested_loop_accesses`` is the loop control and index arithmetic of a nest deeper than
    one loop: paid once per iteration of the innermost body, whatever number of accesses the
    body makes (they share the address computation; the blocked ResNet 3x3 Conv, 16 loads an
    iteration, was charged 2.2x its time per access).  Brute force: a work-item runs
    ``rows x cols`` iterations, one loop around the innermost, and makes 3 accesses in each."""
    n = 256
    iterations = {}
    for rows, cols in ((2, 8), (4, 8), (8, 16)):
        src = NEST.replace("ROWS", str(rows)).replace("COLS", str(cols))
        f = pm.features_of(_counts(src, "nest", n)).values
        brute = sum(1 for _wi in range(n) for _r in range(rows) for _c in range(cols))
        assert f["nested_loop_accesses"] == brute * (2 - 1)
        assert f["loop_accesses"] + f["contiguous_loop_accesses"] == 3 * brute
        iterations[(rows, cols)] = f["nested_loop_accesses"]
    assert iterations[(4, 8)] == 2 * iterations[(2, 8)]


def test_a_flat_cache_size_fit_keeps_the_smallest_size():
    """Synthetic times with no cost beyond the cache fit every cache size alike: the fit keeps
    the smallest size of the grid (ties within ``CACHE_TIE``), not the one noise favours, and
    a size that fits markedly better still wins."""
    counts = [_counts(STREAM, "stream", n) for n in (1 << 8, 1 << 11, 1 << 13, 1 << 15)]
    truth = np.zeros(len(pm.FEATURES))
    for f, c in (("gmem_unit_bytes", 2e-11), ("launches", 2e-6)):
        truth[pm.FEATURES.index(f)] = c
    x = np.array([pm.features_of(kc).vector() for kc in counts])
    t = pm.model_time(x, truth, 1.0) * np.array([1.0, 1.001, 0.999, 1.002])
    grid = (16 << 10, 64 << 10, 256 << 10)
    assert pm.fit_calibration(counts, t, (1.0,), grid)[2] == 16 << 10
    truth[pm.FEATURES.index("gmem_beyond_cache_bytes")] = 8e-11
    x = np.array([pm.features_of(kc, cache_bytes=64 << 10).vector() for kc in counts])
    assert pm.fit_calibration(counts, pm.model_time(x, truth, 1.0), (1.0,), grid)[2] == 64 << 10


def _row_pass(rows: int, cols: int) -> object:
    k = pm.specialize_kernel(parse_kernels(pm._row_pass_source(cols))["calib_rowpass"], (rows,),
                             (32,))
    return count_kernel(k, subgroup_size=SG)


@pytest.mark.parametrize("rows,cols", [(64, 32), (96, 128)])
def test_own_rereads_and_group_runs_are_exact(rows: int, cols: int):
    """``calib_rowpass``: each work-item sums its row (16 partials), then reads it again to
    store it scaled.  By brute force over the (work-item, element) pairs: every element of
    ``x`` is read twice by the same work-item, so the re-reads are its own
    (``gmem_own_reuse_bytes``), none another's (``gmem_reuse_bytes``); the first group of 32
    work-items walks 32 adjacent rows, one run of ``32 * cols`` elements of ``x`` and of
    ``y``: a stream (no ``gmem_cold_scattered_bytes``).  ``calib_rowblock``'s first group
    walks 8 rows of 32 floats at a pitch of 64: 8 runs of 128 bytes, scattered lines."""
    kc = _row_pass(rows, cols)
    reads = [(r, r * cols + c) for r in range(rows) for _ in range(2) for c in range(cols)]
    pairs = set(reads)
    (x,) = [m for m in kc.mem if m.array == "x"]
    assert int(x.accesses.value) == len(reads) and int(x.own_footprint.value) == len(pairs)
    first = {e for r, e in pairs if r < 32}
    starts = {e for e in first if e - 1 not in first}
    for array in ("x", "y"):
        assert int(kc.group_footprints[array].value) == len(first)
        assert int(kc.group_runs[array].value) == len(starts) == 1
    f = pm.features_of(kc).values
    assert f["gmem_own_reuse_bytes"] == 4 * (len(reads) - len(pairs))
    assert f["gmem_reuse_bytes"] == 0
    assert f["gmem_cold_bytes"] == pytest.approx(4 * 2 * rows * cols)
    assert 4 * len(first) >= pm.SCATTERED_RUN_BYTES and f["gmem_cold_scattered_bytes"] == 0
    k = pm.specialize_kernel(parse_kernels(pm._row_block_source(4, 32, 64))["calib_rowblock"],
                             (2, 2), (2, 1))
    block = count_kernel(k, subgroup_size=SG)
    walked = {r * 64 + c for r in range(8) for c in range(32)}
    assert int(block.group_footprints["x"].value) == len(walked)
    assert int(block.group_runs["x"].value) == len({e for e in walked if e - 1 not in walked})
    assert 4 * len(walked) / int(block.group_runs["x"].value) < pm.SCATTERED_RUN_BYTES


def test_rereads_of_other_work_items_are_not_own():
    """A table re-read by every work-group (``calib_reuse``, straight-line code) and a column
    walk's uniform coefficients (``calib_loop``: every work-item reads ``c[k]`` once) are
    re-reads of what other work-items read: ``gmem_reuse_bytes``, never
    ``gmem_own_reuse_bytes``; a column walk's group walks runs of 256 bytes (scattered)."""
    f = pm.features_of(_counts(pm._reuse_source(64), "calib_reuse", 1024)).values
    assert f["gmem_reuse_bytes"] == 4 * (1024 - 64) and f["gmem_own_reuse_bytes"] == 0
    loop = pm.specialize_kernel(parse_kernels(pm._loop_source())["calib_loop"], (256,), (64,),
                                {"rows": 8})
    kc = count_kernel(loop, subgroup_size=SG)
    (x,) = [m for m in kc.mem if m.array == "x"]
    assert int(x.own_footprint.value) == 8 * 256
    # the first group walks 8 runs of 64 elements (256 bytes) of x: scattered lines
    assert int(kc.group_runs["x"].value) == 8
    g = pm.features_of(kc).values
    assert g["gmem_own_reuse_bytes"] == 0
    # x's column walk and the run of 8 coefficients every work-item reads of c
    assert g["gmem_cold_scattered_bytes"] == pytest.approx(4 * (8 * 256 + 8))


def test_fit_recovers_the_own_reuse_cost():
    """Synthetic times of row passes, re-read tables, streams, column walks and row blocks,
    cold and warm, from known costs (a byte re-read by its own work-item, one re-read from
    another's, a cold byte, a scattered cold byte): the fit recovers the two re-read costs
    apart."""
    counts = [_row_pass(r, c) for r, c in ((64, 32), (128, 128), (256, 64), (32, 256))]
    counts += [_counts(pm._reuse_source(t), "calib_reuse", n)
               for t, n in ((64, 1 << 12), (256, 1 << 14), (1024, 1 << 16))]
    counts += [_counts(STREAM, "stream", n) for n in (1 << 12, 1 << 16)]
    spec = pm.specialize_kernel
    counts += [count_kernel(spec(parse_kernels(pm._loop_source())["calib_loop"], (n,), (64,),
                                 {"rows": r}), subgroup_size=SG) for r, n in ((8, 256), (4, 1024))]
    counts += [count_kernel(spec(parse_kernels(pm._row_block_source(4, 32, w))["calib_rowblock"],
                                 (r // 4, w // 32), (8, 1)), subgroup_size=SG)
               for r, w in ((64, 256), (128, 768))]
    costs = {"gmem_unit_bytes": 1e-11, "gmem_loop_bytes": 2e-11, "gmem_contiguous_bytes": 1e-11,
             "gmem_reuse_bytes": 5e-11, "gmem_own_reuse_bytes": 5e-12, "gmem_cold_bytes": 3e-11,
             "gmem_cold_scattered_bytes": 1e-10, "launches": 2e-6}
    # the byte features alone: a dozen kernels cannot pin the costs of every op class too
    mask = np.array([f in costs for f in pm.FEATURES])
    # each cold and warm (its data left in the cache), so the cold cost is told apart
    x = np.array([pm.features_of(kc, cache_bytes=1 << 30, warm=None if w is None else
                                 dict.fromkeys(pm.array_bytes(kc), w)).vector() * mask
                  for kc in counts for w in (None, 1.0)])
    _fit_recovers(x, costs, ("gmem_own_reuse_bytes", "gmem_reuse_bytes"))


def _tree(lanes: int, n: int) -> object:
    k = pm.specialize_kernel(parse_kernels(pm._tree_source(lanes))["calib_tree"], (n,), (lanes,))
    return count_kernel(k, subgroup_size=SG)


@pytest.mark.parametrize("lanes", [8, 16, 32, 64])
def test_barrier_work_items_are_exact(lanes: int):
    """``calib_tree``: by brute force over the work-items, each passes the barrier after the
    store and one after every level of the tree; ``barrier_work_items`` is their sum over the
    work-items of a group wider than ``NARROW_GROUP`` (a CPU's pass over the group per
    barrier), none in a narrower group, whose barriers stay ``group_barriers``."""
    n = 4 * lanes
    levels, s = 0, lanes // 2
    while s >= 1:
        levels, s = levels + 1, s // 2
    passed = sum(1 + levels for _wi in range(n))
    f = pm.features_of(_tree(lanes, n)).values
    assert f["group_barriers"] == passed / lanes
    assert f["barrier_work_items"] == (passed if lanes > pm.NARROW_GROUP else 0)
    # the exchange of calib_barrier: two barriers per round, one before the rounds
    iters = 3
    k = pm.specialize_kernel(parse_kernels(pm._barrier_source(lanes, True))["calib_barrier"],
                             (n,), (lanes,), {"iters": iters})
    g = pm.features_of(count_kernel(k, subgroup_size=SG)).values
    assert g["barrier_work_items"] == (n * (1 + 2 * iters) if lanes > pm.NARROW_GROUP else 0)


def test_fit_recovers_the_barrier_work_item_cost():
    """Synthetic times of trees and exchanges in groups of 8 to 256 from a known cost per
    barrier and group and per barrier and work-item: the fit recovers both."""
    counts = [_tree(lanes, n) for lanes, n in ((8, 1024), (16, 4096), (64, 1024), (128, 4096),
                                               (256, 2048))]
    for lanes, iters in ((16, 2), (64, 2), (64, 6), (256, 4)):
        k = pm.specialize_kernel(parse_kernels(pm._barrier_source(lanes, True))["calib_barrier"],
                                 (1024,), (lanes,), {"iters": iters})
        counts.append(count_kernel(k, subgroup_size=SG))
    counts += [_counts(STREAM, "stream", n) for n in (1 << 10, 1 << 14)]
    costs = {"local_access": 1e-10, "gmem_unit_bytes": 1e-11, "gmem_uniform_bytes": 1e-10,
             "guarded_work_items": 1e-10, "group_barriers": 1e-9, "barrier_work_items": 5e-10,
             "launches": 2e-6, "work_groups": 2e-9}
    mask = np.array([f in costs for f in pm.FEATURES])
    x = np.array([pm.features_of(kc, cache_bytes=1 << 30).vector() * mask for kc in counts])
    _fit_recovers(x, costs, ("group_barriers", "barrier_work_items"))


def test_fit_recovers_the_block_reuse_cost():
    """Synthetic times of register blocks, re-read tables and streams from known costs (a
    register block's re-read byte, a straight-line one): the fit recovers both apart."""
    counts = []
    for rows, cols, depth, m, panels in ((4, 32, 24, 32, 2), (2, 16, 10, 32, 3),
                                         (4, 8, 64, 64, 4), (8, 8, 16, 64, 2)):
        k = pm.specialize_kernel(parse_kernels(pm._register_block_source(rows, cols, depth))[
            "calib_block"], (m // rows, panels), (8, 1))
        counts.append(count_kernel(k, subgroup_size=SG))
    counts += [_counts(pm._reuse_source(t), "calib_reuse", n)
               for t, n in ((64, 1 << 12), (256, 1 << 14), (1024, 1 << 16))]
    counts += [_counts(STREAM, "stream", n) for n in (1 << 12, 1 << 16)]
    costs = {"block_accesses": 2e-11, "gmem_unit_bytes": 1e-11, "gmem_reuse_bytes": 5e-11,
             "gmem_block_reuse_bytes": 5e-12, "launches": 2e-6}
    mask = np.array([f in costs for f in pm.FEATURES])
    x = np.array([pm.features_of(kc, cache_bytes=1 << 30).vector() * mask for kc in counts])
    _fit_recovers(x, costs, ("gmem_block_reuse_bytes", "gmem_reuse_bytes"))


def _strided(lstride: int, groups: int = 4, local: int = 16, loads: int = 3) -> tuple:
    from polyfuse.perf import microbench as mb

    gstride = local * lstride if lstride else 1
    span = (groups - 1) * gstride + (local - 1) * lstride + 1
    k = pm.specialize_kernel(parse_kernels(mb.STRIDED_SOURCE)["strided"], (groups * local,),
                             (local,), {"lstride": lstride, "gstride": gstride, "span": span,
                                        "loads": loads})
    used = {g * gstride + lid * lstride + kk * span for g in range(groups)
            for lid in range(local) for kk in range(loads)}
    return count_kernel(k, subgroup_size=SG), used


@pytest.mark.parametrize("lstride", [0, 1, 3, 4, 16, 20])
def test_cache_lines_of_a_footprint_are_exact(lstride: int):
    """``strided``: by brute force over the elements each work-item loads, the cache lines
    (:data:`~polyfuse.perf.counts.LINE_BYTES`) they lie in; cold, the line bytes beyond the
    bytes used are ``gmem_cold_line_bytes`` (none at a unit stride: the loads of a group are
    whole lines), warm none."""
    from polyfuse.perf.counts import LINE_BYTES

    kc, used = _strided(lstride)
    (a,) = [m for m in kc.mem if m.array == "a"]
    lines = {e * 4 // LINE_BYTES for e in used}
    assert int(a.footprint.value) == len(used) and int(a.footprint_lines.value) == len(lines)
    (out,) = [m for m in kc.mem if m.array == "out"]
    assert int(out.footprint_lines.value) == 4 * 16 * 4 // LINE_BYTES
    f = pm.features_of(kc).values
    assert f["gmem_cold_line_bytes"] == LINE_BYTES * len(lines) - 4 * len(used)
    if lstride == 1:
        assert f["gmem_cold_line_bytes"] == 0
    warm = pm.features_of(kc, warm=dict.fromkeys(pm.array_bytes(kc), 1.0)).values
    assert warm["gmem_cold_line_bytes"] == 0


def test_fit_recovers_the_cold_line_cost():
    """Synthetic times of strided loads at several strides, cold and warm, and streams, from
    known costs (a cold byte, a scattered cold byte, a cold line byte not used): the fit
    recovers the line cost."""
    counts = [_strided(s, groups, 16, loads)[0] for s in (0, 1, 2, 4, 8, 16, 32)
              for groups, loads in ((4, 3), (16, 8))]
    counts += [_counts(STREAM, "stream", n) for n in (1 << 12, 1 << 16)]
    costs = {"loop_accesses": 1e-10, "gmem_loop_bytes": 2e-11, "gmem_unit_bytes": 1e-11,
             "gmem_cold_bytes": 3e-11, "gmem_cold_scattered_bytes": 1e-10,
             "gmem_cold_line_bytes": 4e-11, "launches": 2e-6}
    mask = np.array([f in costs for f in pm.FEATURES])
    x = np.array([pm.features_of(kc, cache_bytes=1 << 30, warm=None if w is None else
                                 dict.fromkeys(pm.array_bytes(kc), w)).vector() * mask
                  for kc in counts for w in (None, 1.0)])
    _fit_recovers(x, costs, ("gmem_cold_line_bytes",))


VECTOR_ROWS = """
__kernel void row_max(__global const float *x, __global float *y) {
    const int r = get_global_id(0);
    __global const float *xr = x + r * 128;
    float16 m = vload16(0, xr);
    for (long k = 1; k < 8; k++) {
        m = fmax(m, vload16(k, xr));
    }
    y[r] = m.s0;
}
__kernel void row_scale(__global const float *x, __global float *y) {
    const int r = get_global_id(0);
    for (long k = 0; k < 8; k++) {
        vstore16(vload16(k, x + r * 128) * 2.0f, k, y + r * 128);
    }
}
__kernel void every_other(__global const float *x, __global float *y) {
    const int r = get_global_id(0);
    float16 m = (float16)(0.0f);
    for (long k = 0; k < 4; k++) {
        m = fmax(m, vload16(2 * k, x + r * 128));
    }
    y[r] = m.s0;
}"""


@pytest.mark.parametrize("kernel,walks", [("row_max", True), ("row_scale", True),
                                          ("every_other", False)])
def test_a_loop_walking_in_vectors_is_a_contiguous_loop(kernel: str, walks: bool):
    """A work-item loop over its row in ``float16`` vectors (the vector Softmax's passes, a
    reduction into a private vector included) runs at the vectors' width, as a contiguous
    loop does: its lanes are contiguous loop accesses, none a scalar loop access (the blocked
    BERT-base Softmax was predicted 4.4x its time with its lanes as scalar loop loads).  A
    loop skipping every other vector is no walk.  The lanes counted against an enumeration."""
    k = pm.specialize_kernel(parse_kernels(VECTOR_ROWS)[kernel], (64,), (16,))
    f = pm.features_of(count_kernel(k, subgroup_size=SG)).values
    iterations = {"row_max": range(1, 8), "row_scale": range(8), "every_other": range(4)}
    lanes = 64 * 16 * len(iterations[kernel])
    loaded_and_stored = lanes * (2 if kernel == "row_scale" else 1)
    if walks:
        assert f["contiguous_loop_accesses"] == loaded_and_stored
        assert f["loop_accesses"] == 0 and f["gmem_loop_bytes"] == 0
        assert f["gmem_contiguous_bytes"] == 4 * loaded_and_stored
    else:
        assert f["contiguous_loop_accesses"] == 0 and f["loop_accesses"] == lanes
