"""Generated OpenCL micro-benchmarks: what a device does per byte, flop, barrier and launch.

They calibrate the performance model (Stevens & Klöckner) and draw the empirical roofline (Roofline
Model Toolkit).
Each kernel's source is generated as a string from its parameters, built through pyopencl, timed
with profiling events (median of repeats, spread = IQR/median), and returned as a plain
dataclass (``.to_dict()`` is JSON-ready).  Each benchmark takes ``quick=True`` to shrink sizes
for tests.

* ``bandwidth`` — GB/s against working-set size for ``read`` (reduction into per-work-item
  accumulators written once), ``rmw`` (``a[i] += alpha``) and ``copy`` (``b[i] = a[i]``).  Small
  working sets are traversed ``reps`` times *inside* the kernel so each launch lasts long enough;
  counted bytes are the explicit loads + stores (no write-allocate traffic).  The shape of the
  curve exposes the cache levels.
* ``flops`` — FLOP/s against flops per element: a degree-``d`` polynomial by Horner (one ``mad``
  per degree) on every element of a cache-resident array, several independent accumulators.
* ``local_memory`` — ``__local`` load throughput (conflict-free, lid stride 1).
* ``barrier_cost`` — kernels with ``k`` work-group barriers per loop iteration vs none.
* ``launch_overhead`` — host wall time of enqueue+finish of an empty kernel, its profiled time,
  and the pipelined rate of back-to-back launches.
* ``strided_access`` — global loads at local-id strides 1, 2, 4, ... and group-id strides
  (packed, gapped, shared), the stride classes the counting model produces.

Layout: a CPU device (PoCL) runs a work-group as a loop over its work-items, so each work-item
gets a contiguous chunk (``blocked``, prefetch-friendly); a GPU wants neighbouring work-items on
neighbouring addresses (``interleaved``, coalesced).  The default follows the device type.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import numpy as np
import pyopencl as cl

from polyfuse.core.watchdog import stage
from polyfuse.runtime.device import (
    Check,
    DeviceLimits,
    TimingResult,
    build_kernel,
    get_context,
    precheck,
    time_host,
    time_kernel,
)

log = logging.getLogger("polyfuse.perf")

KiB = 1024
MiB = 1024 * KiB
STREAM_KINDS = ("read", "rmw", "copy")

Progress = Optional[Callable[[str], None]]


def _say(progress: Progress, message: str) -> None:
    """Progress goes to logging (stderr when configured) and the caller's callback, never stdout."""
    log.info(message)
    if progress is not None:
        progress(message)


class _Result:
    """Plain dataclass results: ``to_dict`` gives JSON-ready nested dicts."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


@dataclass
class _Env:
    ctx: cl.Context
    queue: cl.CommandQueue
    limits: DeviceLimits


def _env(queue: Optional[cl.CommandQueue]) -> _Env:
    if queue is None:
        _, queue = get_context()
    return _Env(queue.context, queue, DeviceLimits.from_device(queue.device))


def _launch_once(name: str, local: int, args: tuple[Any, ...], ctx: cl.Context,
                 queue: cl.CommandQueue, prog: cl.Program) -> None:
    """In a precheck worker: one work-group of kernel ``name`` (PoCL compiles a kernel for its
    work-group size at its first launch, and that compile can abort).  A Python ``int`` in
    ``args`` is a buffer of that many bytes (filled with 0.5f), anything else is passed as is."""
    real: list[Any] = []
    for a in args:
        if type(a) is int:
            buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, a)
            _fill(queue, buf, a, 0.5)
            real.append(buf)
        else:
            real.append(a)
    with stage(f"running OpenCL kernel '{name}' on {ctx.devices[0].name.strip()}"):
        cl.Kernel(prog, name)(queue, (local,), (local,), *real)
        queue.finish()


def _trial(source: str, name: str, local: int, *args: Any) -> Check:
    """The precheck of a benchmark kernel: built, then one work-group launched."""
    return Check(source, (), functools.partial(_launch_once, name, local, args),
                 f"{name} local={local} args={args!r}")


def _pow2_floor(n: int) -> int:
    return 1 << max(0, int(n).bit_length() - 1)


def _vtype(vec: int) -> str:
    return "float" if vec == 1 else f"float{vec}"


def _hsum(expr: str, vec: int) -> str:
    """Sum of the components of a vector expression (``expr.s0 + expr.s1 + ...``)."""
    if vec == 1:
        return expr
    return " + ".join(f"{expr}.s{i:X}" for i in range(vec))


def default_vector_width(limits: DeviceLimits) -> int:
    """floatN loads: the device's native width (16 = one cache line on AVX-512), at least 4."""
    return max(4, min(16, _pow2_floor(max(1, limits.native_vector_width_float))))


def _default_layout(limits: DeviceLimits) -> str:
    return "blocked" if limits.is_cpu else "interleaved"


def _fmt(x: float) -> str:
    """A float32 literal that round-trips exactly (so numpy can reproduce the kernel)."""
    return f"{float(np.float32(x)):.9g}f"


# --------------------------------------------------------------------------- geometry


@dataclass(frozen=True)
class StreamGeometry:
    """How ``n_units`` vector elements are split: ``items`` work-items × ``units_per_item``."""

    layout: str
    items: int
    local: int
    units_per_item: int


def stream_geometry(limits: DeviceLimits, n_units: int, unroll: int,
                    layout: Optional[str] = None) -> StreamGeometry:
    """Work split for a streaming kernel; every count is a power of two so all divisions are exact.

    CPU: one work-item per work-group, ~16 chunks per compute unit (load balance across threads).
    GPU: work-groups of up to 256, up to 2048 work-items per compute unit (latency hiding).
    """
    layout = layout or _default_layout(limits)
    if layout not in ("blocked", "interleaved"):
        raise ValueError(f"unknown layout {layout!r}")
    if n_units < unroll or n_units & (n_units - 1) or unroll & (unroll - 1):
        raise ValueError("n_units and unroll must be powers of two with n_units >= unroll")
    max_items = n_units // unroll
    if layout == "blocked" and limits.is_cpu:
        items = min(max_items, _pow2_floor(limits.compute_units * 16))
        local = 1
    else:
        items = min(max_items, _pow2_floor(limits.compute_units * 2048))
        local = min(items, _pow2_floor(min(256, limits.max_work_group_size)))
    return StreamGeometry(layout, items, local, n_units // items)


def _index(layout: str, j: str) -> str:
    if layout == "blocked":
        return f"base + ({j})"
    return f"gid + (size_t)({j}) * G"


_PROLOGUE = """    const size_t gid = get_global_id(0);
    const size_t G = get_global_size(0);
    const size_t base = gid * (size_t)upi;
"""


def stream_source(kind: str, vector_width: int = 4, unroll: int = 4,
                  layout: str = "blocked") -> str:
    """OpenCL source of the ``read`` / ``rmw`` / ``copy`` bandwidth kernel (kernel ``bw_<kind>``).

    ``unroll`` independent accumulators / accesses per iteration keep the loop throughput-bound,
    not bound by the latency of one add chain.
    """
    t = _vtype(vector_width)
    u = range(unroll)
    if kind == "read":
        # each repetition starts its sweep ``unroll`` units further on (wrapping around): the
        # loads' addresses then change from one repetition to the next, so a compiler cannot
        # keep them in registers across repetitions (NVIDIA's did: 21 TB/s "from DRAM")
        accs = "".join(f"    {t} acc{k} = ({t})(0.0f);\n" for k in u)
        body = "".join(f"            acc{k} += a[{_index(layout, f'j + {k}')}];\n" for k in u)
        total = " + ".join(f"acc{k}" for k in u)
        return (
            f"__kernel void bw_read(__global const {t} *a, __global float *out,\n"
            "                      const int upi, const int reps)\n{\n" + _PROLOGUE + accs +
            "    for (int r = 0; r < reps; ++r) {\n"
            f"        const int start = (r * {unroll}) % upi;\n"
            f"        for (int jj = 0; jj < upi; jj += {unroll}) {{\n"
            "            const int j = jj + start < upi ? jj + start : jj + start - upi;\n" + body +
            "        }\n    }\n"
            f"    const {t} s = {total};\n"
            f"    out[gid] = {_hsum('s', vector_width)};\n}}\n"
        )
    if kind == "rmw":
        body = "".join(
            f"            a[{_index(layout, f'j + {k}')}] += ({t})(alpha);\n" for k in u)
        return (
            f"__kernel void bw_rmw(__global {t} *a, const int upi, const int reps,\n"
            "                     const float alpha)\n{\n" + _PROLOGUE +
            "    for (int r = 0; r < reps; ++r) {\n"
            f"        for (int j = 0; j < upi; j += {unroll}) {{\n" + body +
            "        }\n    }\n}\n"
        )
    if kind == "copy":
        body = "".join(
            f"            b[{_index(layout, f'j + {k}')}] = a[{_index(layout, f'j + {k}')}];\n"
            for k in u)
        return (
            f"__kernel void bw_copy(__global const {t} *a, __global {t} *b,\n"
            "                      const int upi, const int reps)\n{\n" + _PROLOGUE +
            "    for (int r = 0; r < reps; ++r) {\n"
            f"        for (int j = 0; j < upi; j += {unroll}) {{\n" + body +
            "        }\n    }\n}\n"
        )
    raise ValueError(f"unknown bandwidth kind {kind!r} (expected one of {STREAM_KINDS})")


# --------------------------------------------------------------------------- bandwidth


@dataclass
class BandwidthPoint(_Result):
    """One working-set size.  ``gbs`` from the median time, ``gbs_best`` from the fastest run."""

    working_set_bytes: int
    bytes_per_launch: int
    reps: int
    work_items: int
    local_size: int
    time: TimingResult
    gbs: float
    gbs_best: float
    spread: float


@dataclass
class BandwidthResult(_Result):
    """Bandwidth against working set for one access kind (``read``, ``rmw`` or ``copy``)."""

    kind: str
    layout: str
    vector_width: int
    unroll: int
    points: list[BandwidthPoint] = field(default_factory=list)
    #: why the kind was not measured (the device compiler rejected or crashed on its kernel)
    skipped: Optional[str] = None

    def curve(self) -> tuple[list[int], list[float]]:
        """(working-set bytes, GB/s) of every point, smallest first."""
        return ([p.working_set_bytes for p in self.points], [p.gbs for p in self.points])


def _traffic_factor(kind: str) -> int:
    """Bytes moved per traversal, in units of the working set (rmw reads and writes it all)."""
    return 2 if kind == "rmw" else 1


#: the largest working set measured on a GPU is at least this (see :func:`default_sizes`)
GPU_MIN_WORKING_SET = 1 << 30


def default_sizes(limits: DeviceLimits, *, quick: bool = False, max_bytes: Optional[int] = None,
                  min_bytes: Optional[int] = None) -> list[int]:
    """Working sets from a few KiB to beyond the last cache (×2 steps; ×16 when ``quick``).

    Up to 256 MiB (64 MiB quick) or eight times the device's global memory cache, whichever
    is larger, and on GPUs at least 1 GiB: their last-level cache is not what OpenCL reports
    (an H200 says 4 MiB; its 50 MB L2 held a 64 MiB working set at 21 TB/s, four times its
    memory's bandwidth).  At most ``max_bytes``, a quarter of global memory and the largest
    single allocation; the cap itself is the last size.
    """
    lo = min_bytes or (16 * KiB if quick else 4 * KiB)
    cap = max(64 * MiB if quick else 256 * MiB, 8 * limits.global_mem_cache_size,
              0 if limits.is_cpu else GPU_MIN_WORKING_SET)
    cap = min(cap, limits.global_mem_size // 4, limits.max_mem_alloc_size)
    if max_bytes is not None:
        cap = min(cap, int(max_bytes))
    step = 16 if quick else 2
    sizes = []
    s = _pow2_floor(lo)
    while s <= cap:
        sizes.append(s)
        s *= step
    if sizes and sizes[-1] < _pow2_floor(cap):
        sizes.append(_pow2_floor(cap))
    return sizes or [_pow2_floor(max(cap, 4 * KiB))]


def _fill(queue: cl.CommandQueue, buf: cl.Buffer, nbytes: int, value: float) -> None:
    cl.enqueue_fill_buffer(queue, buf, np.float32(value), 0, nbytes).wait()


def _calibrate(time_once: Callable[[int], float], count0: int, target_s: float,
               limit: int = 1 << 22) -> int:
    """Scale a repetition count so one launch lasts about ``target_s`` (from one trial launch)."""
    t = time_once(count0)
    if t <= 0:
        return count0
    return int(max(1, min(limit, round(count0 * target_s / t))))


def _timed(queue: cl.CommandQueue, kernel: cl.Kernel, gsz: tuple[int, ...],
           lsz: tuple[int, ...], args_for: Callable[[int], list[Any]], count0: int,
           target_s: float, repeat: int) -> tuple[int, TimingResult]:
    """Calibrate the repetition count passed to ``args_for``, then time ``repeat`` launches."""

    def once(count: int) -> float:
        return time_kernel(queue, kernel, gsz, lsz, args_for(count), repeat=1, warmup=0).median

    count = _calibrate(once, count0, target_s)
    return count, time_kernel(queue, kernel, gsz, lsz, args_for(count), repeat=repeat, warmup=1)


def bandwidth(
    kind: str = "read",
    queue: Optional[cl.CommandQueue] = None,
    *,
    quick: bool = False,
    sizes: Optional[Sequence[int]] = None,
    max_bytes: Optional[int] = None,
    layout: Optional[str] = None,
    vector_width: Optional[int] = None,
    unroll: int = 4,
    repeat: Optional[int] = None,
    target_seconds: Optional[float] = None,
    progress: Progress = None,
) -> BandwidthResult:
    """Bandwidth of ``kind`` (``read``/``rmw``/``copy``) over working-set ``sizes`` (bytes).

    The working set is all bytes the kernel touches (for ``copy`` both arrays, half each).  Each
    size is timed at a repetition count that makes one launch last ``target_seconds``.
    """
    env = _env(queue)
    lim = env.limits
    vec = vector_width or default_vector_width(lim)
    unit = 4 * vec
    layout = layout or _default_layout(lim)
    repeat = repeat or (3 if quick else 7)
    target = target_seconds or (0.002 if quick else 0.01)
    if sizes is None:
        sizes = default_sizes(lim, quick=quick, max_bytes=max_bytes)
    arrays = 2 if kind == "copy" else 1
    sizes = sorted({int(s) for s in sizes if s // arrays >= unit * unroll})
    if not sizes:
        raise ValueError("no working-set size is large enough for one unrolled iteration")
    source = stream_source(kind, vec, unroll, layout)
    result = BandwidthResult(kind, layout, vec, unroll)
    # tried in a worker first: a compiler abort loses this kind, not the run
    local = stream_geometry(lim, _pow2_floor(max(sizes) // arrays // unit), unroll, layout).local
    data, n = local * unroll * unit, np.int32(unroll)
    check = {"read": _trial(source, "bw_read", local, data, local * 4, n, np.int32(1)),
             "rmw": _trial(source, "bw_rmw", local, data, n, np.int32(1), np.float32(1e-3)),
             "copy": _trial(source, "bw_copy", local, data, data, n, np.int32(1))}[kind]
    result.skipped = precheck(env.queue.device, [check])[0]
    if result.skipped is not None:
        _say(progress, f"bandwidth {kind:4s}: skipped ({result.skipped})")
        return result
    kernel = build_kernel(env.ctx, source, f"bw_{kind}")
    per_array = max(sizes) // arrays
    mf = cl.mem_flags
    a = cl.Buffer(env.ctx, mf.READ_WRITE, per_array)
    _fill(env.queue, a, per_array, 0.5)
    b = cl.Buffer(env.ctx, mf.READ_WRITE, per_array) if kind == "copy" else None
    out = None
    for ws in sizes:
        n_units = _pow2_floor(ws // arrays // unit)
        geo = stream_geometry(lim, n_units, unroll, layout)
        if kind == "read" and (out is None or out.size < geo.items * 4):
            out = cl.Buffer(env.ctx, mf.WRITE_ONLY, max(geo.items, 1024) * 4)
        fixed = {"read": [a, out], "rmw": [a], "copy": [a, b]}[kind]
        upi = np.int32(geo.units_per_item)
        extra = [np.float32(1e-3)] if kind == "rmw" else []
        ws_real = n_units * unit * arrays
        traffic = ws_real * _traffic_factor(kind)
        reps0 = max(1, (4 * MiB if quick else 16 * MiB) // traffic)
        reps, timing = _timed(
            env.queue, kernel, (geo.items,), (geo.local,),
            lambda r, f=fixed, u=upi, e=extra: [*f, u, np.int32(r), *e], reps0, target, repeat)
        moved = traffic * reps
        point = BandwidthPoint(ws_real, moved, reps, geo.items, geo.local, timing,
                               moved / timing.median / 1e9, moved / timing.min / 1e9,
                               timing.spread)
        result.points.append(point)
        _say(progress, f"bandwidth {kind:4s} {ws_real / KiB:>10.0f} KiB: {point.gbs:8.2f} GB/s "
                       f"(spread {timing.spread:.2f})")
    return result


def bandwidth_sweep(queue: Optional[cl.CommandQueue] = None, *, kinds: Sequence[str] = STREAM_KINDS,
                    quick: bool = False, max_bytes: Optional[int] = None,
                    progress: Progress = None, **kwargs: Any) -> dict[str, BandwidthResult]:
    """:func:`bandwidth` for several kinds on one queue, sharing the size list."""
    env = _env(queue)
    return {k: bandwidth(k, env.queue, quick=quick, max_bytes=max_bytes, progress=progress,
                         **kwargs) for k in kinds}


def execute_stream(kind: str, queue: cl.CommandQueue, data: np.ndarray, *, reps: int = 1,
                   layout: Optional[str] = None, vector_width: Optional[int] = None,
                   unroll: int = 4, alpha: float = 1e-3) -> np.ndarray:
    """Run a bandwidth kernel once on ``data`` (float32, power-of-two length) and return its output.

    ``read``: the per-work-item partial sums (their total is ``reps * data.sum()``); ``rmw``: the
    updated array (``data + reps * alpha``); ``copy``: the destination array.  For tests: the
    benchmark kernels must compute what they claim, or their timings mean nothing.
    """
    lim = DeviceLimits.from_device(queue.device)
    vec = vector_width or default_vector_width(lim)
    layout = layout or _default_layout(lim)
    data = np.ascontiguousarray(data, dtype=np.float32)
    geo = stream_geometry(lim, data.size // vec, unroll, layout)
    kernel = build_kernel(queue.context, stream_source(kind, vec, unroll, layout), f"bw_{kind}")
    mf = cl.mem_flags
    a = cl.Buffer(queue.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=data)
    upi, r = np.int32(geo.units_per_item), np.int32(reps)
    if kind == "read":
        res = np.empty(geo.items, np.float32)
        out = cl.Buffer(queue.context, mf.WRITE_ONLY, res.nbytes)
        kernel(queue, (geo.items,), (geo.local,), a, out, upi, r)
    elif kind == "rmw":
        res = np.empty_like(data)
        out = a
        kernel(queue, (geo.items,), (geo.local,), a, upi, r, np.float32(alpha))
    else:
        res = np.empty_like(data)
        out = cl.Buffer(queue.context, mf.READ_WRITE, data.nbytes)
        kernel(queue, (geo.items,), (geo.local,), a, out, upi, r)
    cl.enqueue_copy(queue, res, out)
    queue.finish()
    return res


# --------------------------------------------------------------------------- flops


def poly_coefficients(degree: int) -> np.ndarray:
    """Coefficients ``c[0..d]`` (float32) with ``p`` mapping [0, 1] into (0, 1].

    All positive and summing to at most 1, so iterating ``x <- p(x)`` over many repetitions stays
    finite and never denormal, and no coefficient is 0 (the compiler could drop its ``mad``).
    """
    k = np.arange(degree + 1)
    return ((1.0 - 0.01 * (k % 3)) / (degree + 1)).astype(np.float32)


def horner_reference(x: np.ndarray, degree: int, reps: int = 1, fused: bool = True) -> np.ndarray:
    """numpy evaluation of what the ``poly`` kernel computes (``reps`` iterations).

    ``fused``: each step rounded once, like ``fma`` (float32 products are exact in float64);
    otherwise rounded after the multiply and after the add, like an unfused ``mad``.
    """
    c = poly_coefficients(degree)
    x = np.asarray(x, dtype=np.float32)
    for _ in range(reps):
        y = np.full_like(x, c[degree])
        for k in range(degree - 1, -1, -1):
            if fused:
                y = (y.astype(np.float64) * x + np.float64(c[k])).astype(np.float32)
            else:
                y = (y * x + c[k]).astype(np.float32)
        x = y
    return x


def flops_source(degree: int, vector_width: int = 4, accumulators: int = 8,
                 layout: str = "blocked", op: str = "fma") -> str:
    """Kernel ``poly``: each element becomes ``p(element)`` by Horner, ``degree`` ``op`` each.

    ``accumulators`` independent vectors are evaluated interleaved so the mads are not latency
    bound; each repetition loads the element and stores ``p`` of it (working set stays in cache).
    ``op`` is ``fma`` (one fused instruction where the device has FMA) or ``mad`` (which PoCL
    compiles to a separate multiply and add).
    """
    if degree < 1:
        raise ValueError("degree must be >= 1")
    if op not in ("fma", "mad"):
        raise ValueError("op must be 'fma' or 'mad'")
    t = _vtype(vector_width)
    c = poly_coefficients(degree)
    u = range(accumulators)
    lines = [f"__kernel void poly(__global {t} *a, const int upi, const int reps)", "{",
             _PROLOGUE.rstrip("\n"),
             "    for (int r = 0; r < reps; ++r) {",
             f"        for (int j = 0; j < upi; j += {accumulators}) {{"]
    lines += [f"            const {t} x{k} = a[{_index(layout, f'j + {k}')}];" for k in u]
    lines += [f"            {t} y{k} = ({t})({_fmt(c[degree])});" for k in u]
    for d in range(degree - 1, -1, -1):
        lit = f"({t})({_fmt(c[d])})"
        lines += [f"            y{k} = {op}(y{k}, x{k}, {lit});" for k in u]
    lines += [f"            a[{_index(layout, f'j + {k}')}] = y{k};" for k in u]
    lines += ["        }", "    }", "}", ""]
    return "\n".join(lines)


@dataclass
class FlopsPoint(_Result):
    """One polynomial degree: ``flops_per_element = 2*degree``; intensity per loaded+stored byte."""

    degree: int
    op: str
    flops_per_element: int
    arithmetic_intensity: float
    reps: int
    time: TimingResult
    gflops: float
    gflops_best: float
    spread: float


@dataclass
class FlopsResult(_Result):
    """FLOP/s against flops per element; ``peak_gflops`` is the best median over degrees."""

    working_set_bytes: int
    vector_width: int
    accumulators: int
    layout: str
    points: list[FlopsPoint] = field(default_factory=list)
    peak_gflops: float = 0.0
    #: degrees not measured, with why (the device compiler rejected or crashed on the kernel)
    skipped: list[str] = field(default_factory=list)


def _mad_op(lim: DeviceLimits) -> str:
    """``fma`` where the device executes it in hardware, else ``mad`` (never a slow soft fma)."""
    return "fma" if lim.fp32_fma else "mad"


def _flops_geometry(lim: DeviceLimits, vec: int, acc: int, layout: str,
                    working_set: Optional[int]) -> tuple[int, StreamGeometry]:
    ws = working_set or (lim.compute_units * (16 * KiB if lim.is_cpu else 64 * KiB))
    n_units = _pow2_floor(max(ws // (4 * vec), acc))
    return n_units, stream_geometry(lim, n_units, acc, layout)


def flops(
    queue: Optional[cl.CommandQueue] = None,
    *,
    quick: bool = False,
    degrees: Optional[Sequence[int]] = None,
    working_set: Optional[int] = None,
    vector_width: Optional[int] = None,
    accumulators: int = 8,
    layout: Optional[str] = None,
    repeat: Optional[int] = None,
    target_seconds: Optional[float] = None,
    progress: Progress = None,
) -> FlopsResult:
    """FLOP/s of the Horner kernel for each degree (float32, ``2*degree`` flops per element).

    The default working set (16 KiB per compute unit on a CPU, 64 KiB on a GPU) stays in the
    first cache level, so low degrees show the cache-bandwidth slope and high ones the peak.
    """
    env = _env(queue)
    lim = env.limits
    vec = vector_width or default_vector_width(lim)
    layout = layout or _default_layout(lim)
    degrees = list(degrees or ((1, 8, 64) if quick else (1, 2, 4, 8, 16, 32, 64, 128)))
    repeat = repeat or (3 if quick else 7)
    target = target_seconds or (0.002 if quick else 0.01)
    n_units, geo = _flops_geometry(lim, vec, accumulators, layout, working_set)
    ws = n_units * vec * 4
    rng = np.random.default_rng(0)
    host = rng.random(n_units * vec, dtype=np.float32)
    a = cl.Buffer(env.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
    res = FlopsResult(ws, vec, accumulators, layout)
    elements = n_units * vec
    ops = dict.fromkeys((_mad_op(lim), "mad"))
    sources = {(d, op): flops_source(d, vec, accumulators, layout, op)
               for d in degrees for op in ops}
    # built and launched once in a worker first: a compiler abort (at the build or, PoCL
    # compiling lazily, at the first launch) on one kernel loses that point, not the run
    keys = list(sources)
    verdicts = precheck(env.queue.device, [
        _trial(sources[k], "poly", geo.local, geo.local * accumulators * vec * 4,
               np.int32(accumulators), np.int32(1)) for k in keys])
    why = dict(zip(keys, verdicts))
    for d in degrees:
        op = next((o for o in ops if why[(d, o)] is None), None)
        if op is None:
            res.skipped.append(f"degree {d}: {why[(d, _mad_op(lim))]}")
            _say(progress, f"flops degree {d:4d}: skipped ({why[(d, _mad_op(lim))]})")
            continue
        kernel = build_kernel(env.ctx, sources[(d, op)], "poly")
        reps, timing = _timed(
            env.queue, kernel, (geo.items,), (geo.local,),
            lambda r: [a, np.int32(geo.units_per_item), np.int32(r)],
            max(1, (1 << 22) // (elements * d)), target, repeat)
        total = 2.0 * d * elements * reps
        p = FlopsPoint(d, op, 2 * d, 2 * d / 8.0, reps, timing,
                       total / timing.median / 1e9, total / timing.min / 1e9, timing.spread)
        res.points.append(p)
        _say(progress, f"flops degree {d:4d} ({2 * d} flop/elem): {p.gflops:8.2f} GFLOP/s")
    res.peak_gflops = max((p.gflops for p in res.points), default=0.0)
    return res


def execute_poly(queue: cl.CommandQueue, x: np.ndarray, degree: int, *, reps: int = 1,
                 vector_width: Optional[int] = None, accumulators: int = 8,
                 layout: Optional[str] = None) -> np.ndarray:
    """Run the ``poly`` kernel on ``x`` (float32, power-of-two length) and return the result.

    It uses ``fma`` when ``DeviceLimits.fp32_fma`` (compare with ``horner_reference(fused=True)``).
    """
    lim = DeviceLimits.from_device(queue.device)
    vec = vector_width or default_vector_width(lim)
    layout = layout or _default_layout(lim)
    x = np.ascontiguousarray(x, dtype=np.float32)
    geo = stream_geometry(lim, x.size // vec, accumulators, layout)
    kernel = build_kernel(
        queue.context, flops_source(degree, vec, accumulators, layout, _mad_op(lim)), "poly")
    buf = cl.Buffer(queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
    kernel(queue, (geo.items,), (geo.local,), buf, np.int32(geo.units_per_item), np.int32(reps))
    out = np.empty_like(x)
    cl.enqueue_copy(queue, out, buf)
    queue.finish()
    return out


# --------------------------------------------------------------------------- local memory


def local_memory_source(local_size: int, local_floats: int, unroll: int = 4) -> str:
    """Kernel ``lmem_read``: ``unroll`` conflict-free ``__local`` loads per iteration, lid stride 1.

    The array is filled from global memory (so loads cannot be folded), then each iteration reads
    ``s[(p + k*L) mod N]`` and shifts ``p`` by one, so neighbouring work-items always read
    neighbouring words.
    """
    if local_floats & (local_floats - 1) or local_floats < unroll * local_size:
        raise ValueError("local_floats must be a power of two >= unroll * local_size")
    n, ls = local_floats, local_size
    accs = "".join(f"    float acc{k} = 0.0f;\n" for k in range(unroll))
    loads = "".join(f"        acc{k} += s[(p + {k * ls}) & {n - 1}];\n" for k in range(unroll))
    total = " + ".join(f"acc{k}" for k in range(unroll))
    return (
        "__kernel void lmem_read(__global const float *in, __global float *out, const int iters)\n"
        "{\n"
        f"    __local float s[{n}];\n"
        "    const int lid = (int)get_local_id(0);\n"
        f"    for (int k = lid; k < {n}; k += {ls}) s[k] = in[k];\n"
        "    barrier(CLK_LOCAL_MEM_FENCE);\n" + accs +
        "    int p = lid;\n"
        "    for (int it = 0; it < iters; ++it) {\n" + loads +
        f"        p = (p + {unroll * ls} + 1) & {n - 1};\n"
        "    }\n"
        f"    out[get_global_id(0)] = {total};\n}}\n"
    )


@dataclass
class LocalMemoryResult(_Result):
    """``__local`` float32 load throughput: GB/s and device time per work-item load."""

    local_size: int
    groups: int
    local_bytes: int
    loads_per_item: int
    time: TimingResult
    gbs: float
    seconds_per_load: float
    spread: float


def _group_size(lim: DeviceLimits, want: int = 64) -> int:
    return _pow2_floor(min(want, lim.max_work_group_size, lim.max_work_item_sizes[0]))


def local_memory(queue: Optional[cl.CommandQueue] = None, *, quick: bool = False,
                 local_size: Optional[int] = None, unroll: int = 4,
                 repeat: Optional[int] = None, target_seconds: Optional[float] = None,
                 progress: Progress = None) -> LocalMemoryResult:
    """Throughput of conflict-free ``__local`` loads (the count model's local-access feature)."""
    env = _env(queue)
    lim = env.limits
    ls = local_size or _group_size(lim, 64 if lim.is_cpu else 256)
    n = _pow2_floor(min(lim.local_mem_size // 2 // 4, 4096))
    n = max(n, unroll * ls)
    if n * 4 > lim.local_mem_size:
        raise ValueError("device local memory too small for the local-memory benchmark")
    groups = lim.compute_units * (4 if lim.is_cpu else 8)
    repeat = repeat or (3 if quick else 7)
    target = target_seconds or (0.002 if quick else 0.01)
    kernel = build_kernel(env.ctx, local_memory_source(ls, n, unroll), "lmem_read")
    mf = cl.mem_flags
    host = np.random.default_rng(1).random(n, dtype=np.float32)
    src = cl.Buffer(env.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host)
    out = cl.Buffer(env.ctx, mf.WRITE_ONLY, groups * ls * 4)
    gsz, lsz = (groups * ls,), (ls,)

    def once(iters: int) -> float:
        return time_kernel(env.queue, kernel, gsz, lsz, [src, out, np.int32(iters)],
                           repeat=1, warmup=0).median

    iters = _calibrate(once, 256, target)
    timing = time_kernel(env.queue, kernel, gsz, lsz, [src, out, np.int32(iters)],
                         repeat=repeat, warmup=1)
    loads = groups * ls * iters * unroll
    res = LocalMemoryResult(ls, groups, n * 4, iters * unroll, timing,
                            loads * 4 / timing.median / 1e9, timing.median / loads,
                            timing.spread)
    _say(progress, f"local memory: {res.gbs:.2f} GB/s")
    return res


# --------------------------------------------------------------------------- barriers


def barrier_source(barriers: int, local_size: int) -> str:
    """Kernel ``barriers``: a loop of one mad and ``barriers`` work-group barriers per iteration."""
    bars = "".join("        barrier(CLK_LOCAL_MEM_FENCE);\n" for _ in range(barriers))
    return (
        "__kernel void barriers(__global float *out, const int iters)\n{\n"
        f"    __local float s[{local_size}];\n"
        "    const int lid = (int)get_local_id(0);\n"
        "    float x = (float)lid;\n"
        "    s[lid] = x;\n"
        "    for (int it = 0; it < iters; ++it) {\n"
        "        x = mad(x, 0.999f, 1.0f);\n" + bars +
        "    }\n"
        "    barrier(CLK_LOCAL_MEM_FENCE);\n"
        f"    out[get_global_id(0)] = x + s[({local_size} - 1) - lid];\n}}\n"
    )


@dataclass
class BarrierResult(_Result):
    """Time against barriers per iteration; ``seconds_per_group_barrier`` is the fitted slope
    per barrier executed by one work-group (the count model's barrier × groups feature)."""

    local_size: int
    groups: int
    iters: int
    barriers: list[int]
    times: list[TimingResult]
    seconds_per_group_barrier: float
    spread: float


def barrier_cost(queue: Optional[cl.CommandQueue] = None, *, quick: bool = False,
                 counts: Optional[Sequence[int]] = None, local_size: Optional[int] = None,
                 repeat: Optional[int] = None, target_seconds: Optional[float] = None,
                 progress: Progress = None) -> BarrierResult:
    """Cost of a work-group barrier: kernels with k = 0, 1, 2, 4 barriers per loop iteration."""
    env = _env(queue)
    lim = env.limits
    counts = sorted(set(counts or ((0, 1, 4) if quick else (0, 1, 2, 4))))
    if len(counts) < 2:
        raise ValueError("need at least two barrier counts to fit a slope")
    ls = local_size or _group_size(lim, 64 if lim.is_cpu else 256)
    groups = lim.compute_units * 4
    repeat = repeat or (3 if quick else 7)
    target = target_seconds or (0.002 if quick else 0.01)
    kernels = {k: build_kernel(env.ctx, barrier_source(k, ls), "barriers") for k in counts}
    out = cl.Buffer(env.ctx, cl.mem_flags.WRITE_ONLY, groups * ls * 4)
    gsz, lsz = (groups * ls,), (ls,)
    kmax = kernels[counts[-1]]
    iters = _calibrate(lambda n: time_kernel(env.queue, kmax, gsz, lsz, [out, np.int32(n)],
                                             repeat=1, warmup=0).median, 64, target)
    times = [time_kernel(env.queue, kernels[k], gsz, lsz, [out, np.int32(iters)],
                         repeat=repeat, warmup=1) for k in counts]
    slope = float(np.polyfit(np.asarray(counts, float), [t.median for t in times], 1)[0])
    per = max(slope, 0.0) / (iters * groups)
    res = BarrierResult(ls, groups, iters, list(counts), times, per,
                        max(t.spread for t in times))
    _say(progress, f"barrier: {per * 1e9:.1f} ns per work-group barrier")
    return res


# --------------------------------------------------------------------------- launches


@dataclass
class LaunchResult(_Result):
    """Empty-kernel launch: host wall time of enqueue+finish, profiled device time, and the
    per-launch time of back-to-back launches (throughput rather than latency)."""

    wall: TimingResult
    profiled: TimingResult
    pipelined_seconds: float


EMPTY_SOURCE = "__kernel void empty(__global float *a) { }\n"


def launch_overhead(queue: Optional[cl.CommandQueue] = None, *, quick: bool = False,
                    launches: Optional[int] = None, progress: Progress = None) -> LaunchResult:
    """Overhead of launching a kernel that does nothing (one work-item)."""
    env = _env(queue)
    n = launches or (20 if quick else 200)
    kernel = build_kernel(env.ctx, EMPTY_SOURCE, "empty")
    buf = cl.Buffer(env.ctx, cl.mem_flags.READ_WRITE, 64)
    kernel.set_args(buf)
    q = env.queue

    def launch() -> None:
        cl.enqueue_nd_range_kernel(q, kernel, (1,), (1,))
        q.finish()

    wall = time_host(launch, repeat=n, warmup=3)
    profiled = time_kernel(q, kernel, (1,), (1,), None, repeat=n, warmup=1)
    def burst() -> None:
        for _ in range(n):
            cl.enqueue_nd_range_kernel(q, kernel, (1,), (1,))
        q.finish()

    t_pipe = time_host(burst, repeat=3, warmup=1)
    res = LaunchResult(wall, profiled, t_pipe.median / n)
    _say(progress, f"launch: {wall.median * 1e6:.1f} us wall, {profiled.median * 1e6:.1f} us "
                   f"profiled, {res.pipelined_seconds * 1e6:.1f} us pipelined")
    return res


# --------------------------------------------------------------------------- strides

STRIDED_SOURCE = """__kernel void strided(__global const float *a, __global float *out,
                      const int lstride, const int gstride, const int span, const int loads)
{
    const size_t base = (size_t)get_group_id(0) * (size_t)gstride
                      + (size_t)get_local_id(0) * (size_t)lstride;
    float acc = 0.0f;
    for (int k = 0; k < loads; ++k)
        acc += a[base + (size_t)k * (size_t)span];
    out[get_global_id(0)] = acc;
}
"""


@dataclass(frozen=True)
class StrideCase:
    """Element strides of ``a[g*gstride + l*lstride]``; ``gstride=None`` means packed groups
    (``local_size * lstride``), ``0`` means every group reads the same elements."""

    lstride: int
    gstride: Optional[int] = None


def default_stride_cases(quick: bool = False) -> list[StrideCase]:
    """Local-id strides 1..32 with packed groups, plus gapped and shared group strides."""
    if quick:
        return [StrideCase(1), StrideCase(4), StrideCase(16), StrideCase(1, 0)]
    cases = [StrideCase(s) for s in (1, 2, 4, 8, 16, 32)]
    return cases + [StrideCase(1, -2), StrideCase(1, -4), StrideCase(1, 0)]


@dataclass
class StridePoint(_Result):
    """One stride class: useful bytes are the loaded floats, footprint is the touched span."""

    lstride: int
    gstride: int
    loads_per_item: int
    footprint_bytes: int
    useful_bytes: int
    time: TimingResult
    gbs: float
    seconds_per_load: float
    spread: float


@dataclass
class StrideResult(_Result):
    """Effective bandwidth of global loads for each (local-id, group-id) stride class."""

    local_size: int
    groups: int
    points: list[StridePoint] = field(default_factory=list)


def strided_access(queue: Optional[cl.CommandQueue] = None, *, quick: bool = False,
                   cases: Optional[Sequence[StrideCase]] = None, max_bytes: Optional[int] = None,
                   repeat: Optional[int] = None, progress: Progress = None) -> StrideResult:
    """Global loads ``a[g*gstride + l*lstride + k*span]``: one pass, every element read once.

    A negative ``gstride`` ``-m`` means a gap: groups ``m`` times their packed extent apart.
    """
    env = _env(queue)
    lim = env.limits
    ls = _group_size(lim, 64 if lim.is_cpu else 256)
    groups = lim.compute_units * (8 if lim.is_cpu else 16)
    cap = min(max_bytes or (64 * MiB if quick else 256 * MiB), lim.max_mem_alloc_size,
              lim.global_mem_size // 4)
    useful_target = 2 * MiB if quick else 16 * MiB
    repeat = repeat or (3 if quick else 7)
    cases = list(cases or default_stride_cases(quick))
    kernel = build_kernel(env.ctx, STRIDED_SOURCE, "strided")
    out = cl.Buffer(env.ctx, cl.mem_flags.WRITE_ONLY, groups * ls * 4)
    plans = []
    for case in cases:
        gs = case.gstride
        if gs is None:
            gs = ls * case.lstride
        elif gs < 0:
            gs = -gs * ls * case.lstride
        span = (groups - 1) * gs + (ls - 1) * case.lstride + 1
        loads = max(1, useful_target // (groups * ls * 4))
        loads = max(1, min(loads, cap // (span * 4)))
        if span * 4 > cap:
            raise ValueError(f"stride case {case} needs {span * 4} bytes, more than the cap")
        plans.append((case, gs, span, loads))
    nbytes = max(span * loads for _, _, span, loads in plans) * 4
    a = cl.Buffer(env.ctx, cl.mem_flags.READ_ONLY, nbytes)
    _fill(env.queue, a, nbytes, 0.25)
    res = StrideResult(ls, groups)
    for case, gs, span, loads in plans:
        args = [a, out, np.int32(case.lstride), np.int32(gs), np.int32(span), np.int32(loads)]
        timing = time_kernel(env.queue, kernel, (groups * ls,), (ls,), args, repeat=repeat,
                             warmup=1)
        n_loads = groups * ls * loads
        p = StridePoint(case.lstride, gs, loads, span * loads * 4, n_loads * 4, timing,
                        n_loads * 4 / timing.median / 1e9, timing.median / n_loads,
                        timing.spread)
        res.points.append(p)
        _say(progress, f"stride l={case.lstride:3d} g={gs:7d}: {p.gbs:8.2f} GB/s effective")
    return res


__all__ = [
    "BandwidthPoint", "BandwidthResult", "BarrierResult", "FlopsPoint", "FlopsResult",
    "LaunchResult", "LocalMemoryResult", "StrideCase", "StridePoint", "StrideResult",
    "StreamGeometry", "bandwidth", "bandwidth_sweep", "barrier_cost", "default_sizes",
    "default_stride_cases", "execute_poly", "execute_stream", "flops", "flops_source",
    "horner_reference", "launch_overhead", "local_memory", "local_memory_source",
    "poly_coefficients", "stream_geometry", "stream_source", "strided_access",
]
