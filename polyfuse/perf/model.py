"""Calibrated kernel-time model (Stevens & Klöckner; docs/performance.md).

Stevens & Klöckner's recipe, made concrete for polyfuse:

1. **Features.**  :func:`features_of` turns the exact barvinok counts of
   :func:`polyfuse.perf.counts.count_kernel` (evaluated at concrete sizes) into one vector per
   launch (:data:`FEATURES`):

   * on-chip: float ops by class — ``flop_simple`` (add/sub/mul/neg/compare/min/max/abs),
     ``flop_fma``, ``flop_div`` (div, sqrt, rsqrt), ``flop_special`` (exp, log, tanh, erf, pow,
     trigonometry, ...), each counted per sub-group instruction as the counts give them;
     ``int_divmod``: integer divisions and remainders by a run-time divisor (``i / N``,
     ``i % N`` with ``N`` an argument; :mod:`polyfuse.perf.features`), per sub-group
     instruction too — a CPU has no vector integer division, so each lane divides on its own;
     ``local_access`` (``__local`` loads and stores per sub-group); the work of *work-item
     loops* — loops whose body holds no barrier, so that each work-item runs them on its own
     (:attr:`~polyfuse.perf.counts.MemRecord.loop_accesses`; a loop around barriers runs in
     lockstep across the work-group and its body counts as straight-line code):
     ``loop_accesses`` (element accesses, global or local, in such loops), ``loop_flops`` (their
     float ops, per work-item), ``sync_loop_accesses`` (``loop_accesses`` of a kernel with
     barriers) and ``nested_loop_accesses`` (the iterations of a nest's body that accesses
     memory, weighted by the work-item loops around it beyond the innermost, once however
     many accesses the body makes: a nest's loop control and index arithmetic) — on a
     CPU such a loop runs scalar, iteration after iteration (a CPU OpenCL compiler
     vectorizes across work-items only straight-line code), and in a kernel with
     barriers PoCL keeps private values in memory across the regions between barriers, which
     makes its loops several times dearer; a *register block* (a loop body of
     :data:`~polyfuse.perf.counts.REGISTER_BLOCK_STATEMENTS` or more float statements, a
     blocked product's ``acc_i_j += a_i * b_j``) is packed into vectors of the work-item, so
     its iterations, ops and loads are ``block_iterations``, ``block_flops`` and
     ``block_accesses`` instead (the ops of a block written in OpenCL vectors,
     ``vector_block_flops``: vectors at their own width, where the compiler packs a scalar
     block at the width its tuning prefers); a *contiguous loop* (every access moving at
     most an element per iteration of its innermost loop, a store by one, or an OpenCL
     vector access moving by its own width, a reduction into a private vector included) is
     vectorized along the loop: its
     ops are class counts only, its accesses ``contiguous_loop_accesses`` and its bytes
     ``gmem_contiguous_bytes``; ``work_items`` (the per work-item cost of running the
     kernel body: index arithmetic, the loop PoCL wraps around a work-group, scheduling of a
     SIMD lane on a GPU); ``guarded_work_items`` (the work-items of a launch with a
     straight-line global access some of them skip, a bounds guard over a padded grid: a CPU
     vectorizing across work-items runs that body masked, 2x slower on PoCL);
   * memory: global (and ``__constant``) bytes split by stride class — ``gmem_unit_bytes``
     (local-id stride ±1 along dimension 0: coalesced on a GPU, vectorizable on a CPU),
     ``gmem_uniform_bytes`` (local-id stride 0 in every dimension a sub-group spans: one
     broadcast load per sub-group) and ``gmem_strided_bytes`` (anything else, including
     may-accesses and non-affine subscripts).  Two refinements from the access-to-footprint
     ratio (Stevens & Klöckner classify by AFR too): only the footprint (distinct elements) is
     charged to its stride class, the accesses beyond it (AFR > 1: re-reads a cache can serve)
     go to ``gmem_reuse_bytes``; the share of bytes (of any stride class) accessed in
     work-item loops goes to ``gmem_loop_bytes`` — on a GPU they cost what their stride class
     costs, on a CPU they are scalar loads, and the fit is free to see that; unit-stride bytes
     of a multi-dimensional work-group narrower than :data:`NARROW_GROUP` along dimension 0 go
     to ``gmem_narrow_bytes``; ``gmem_beyond_cache_bytes`` adds, for the bytes of all
     those classes, the share of one launch's footprint (every global array's distinct
     elements over all its accesses, :func:`footprint_bytes`) beyond a cache size — the
     same bytes stream from memory instead of a cache, 4-5x slower on a CPU; the cache size
     is not a cost but a parameter of the feature, chosen with the fit (:data:`CACHE_GRID`,
     :func:`fit_calibration`) and kept in the calibration; ``gmem_reuse_beyond_bytes``: the
     re-reads of an access every work-group along a dimension makes alike (group-id stride
     0: a weight matrix walked by every row's group) of an array of which one group walks
     more than that cache (its footprint in the first group,
     :attr:`~polyfuse.perf.counts.KernelCounts.group_footprints`: a blocked product's
     panel, a row form's whole weight), by the share beyond it — each group finds the lines
     the others evicted; a work-item's straight-line runs of consecutive elements (a register
     block's stores, :func:`~polyfuse.perf.counts.packed_accesses`) are unit stride;
     ``gmem_cold_bytes``: the bytes of all classes that no earlier launch left in the
     last-level cache (:func:`warm_shares`: a program's launches in order over a
     least-recently-used cache of whole buffers, the host's upload first) — the class costs
     are those of warm bytes, cold ones pay this on top; the last-level cache's size is a
     fitted fraction of the one the device reports (:data:`LLC_FRACTIONS`: it is shared);
     ``gmem_cold_scattered_bytes``: of those cold bytes, the ones that many streams fetch at
     once (accessed at a stride between work-items, or in work-item loops whose work-group
     walks runs of consecutive elements shorter than :data:`SCATTERED_RUN_BYTES`: short rows
     at a pitch) — a CPU's prefetchers follow a few sequential streams, so these
     come from memory several times slower per byte than a stream's (``calib_rowblock``
     runs 4.9x faster warm than cold, a stream 2.6x), where a group of work-items walking
     adjacent rows is a stream (``calib_rowpass``); ``gmem_own_reuse_bytes``: the re-reads
     of elements the same work-item accessed before (a row form's passes over its own row,
     in its private caches), apart from ``gmem_reuse_bytes``, the re-reads of what other
     work-items accessed (both exact: :attr:`~polyfuse.perf.counts.MemRecord.own_footprint`
     counts the (work-item, element) pairs,
     :attr:`~polyfuse.perf.counts.KernelCounts.group_runs` the runs of a group's footprint);
     ``gmem_block_reuse_bytes``: the re-reads of a register block's loads, counted per
     work-item (each work-item packs its own vector loads; a sub-group does not share them),
     apart from straight-line re-reads (a product's panels in the core's caches);
     ``gmem_cold_line_bytes``: of the cold elements, the bytes of their cache lines
     (:data:`~polyfuse.perf.counts.LINE_BYTES`) they do not use — a stride between
     elements fetches a line per element (exact:
     :attr:`~polyfuse.perf.counts.MemRecord.footprint_lines`);
   * overheads that do not overlap with the rest: ``launches``, ``group_barriers`` (barriers
     executed per work-group, summed over work-groups, as Stevens & Klöckner's ``barrier ×
     groups``), ``barrier_work_items`` (barriers executed summed over the work-items of
     groups wider than :data:`NARROW_GROUP`: a CPU runs the code between barriers as a loop
     over the group, a pass per barrier, where a group of one vector passes them almost
     free) and ``work_groups``.

2. **Model.**  With ``c`` the fitted costs (seconds per unit of each feature)::

       on_chip = Σ_{f ∈ on-chip} c_f·x_f          memory = Σ_{f ∈ memory} c_f·x_f
       T = smax_p(on_chip, memory) + c_launch·launches + c_barrier·group_barriers
           + c_group·work_groups
       smax_p(a, b) = (a^p + b^p)^(1/p)

   ``smax_p`` is the overlap term: ``p = 1`` is no overlap (on-chip work and memory traffic add
   up), ``p → ∞`` is perfect overlap (the slower one hides the other); in between it is smooth,
   as the paper's differentiable max.  ``p`` is *fitted*: :func:`fit_costs` is run for each
   ``p`` of :data:`P_GRID` and the one with the smallest calibration error is kept.

3. **Calibration.**  :func:`calibrate` runs the generated micro-benchmarks of
   :func:`calibration_kernels` (listed in :data:`CALIBRATION_KERNELS`; none is an oplib kernel or
   an example, so :mod:`analysis.model_accuracy` evaluates on kernels the fit never saw), counts
   each one's features with ``count_kernel`` on the very source it runs, times them in
   interleaved rounds (:func:`measure_calibration`: each launch finds the caches holding other
   kernels' data, cold, except the ``warm`` ones, run right after a launch of their own as a
   consumer after its producer, and the launches of a few microseconds; on PoCL's ``basic``
   device, which runs a kernel in the thread that enqueues it, the CPU time of that thread,
   which other jobs' load does not inflate) and keeps the median of each.  On a GPU each launch
   is first grown until it runs
   :data:`GPU_MIN_LAUNCH_S` (:func:`sized_calibration_kernels`).  The costs are
   fitted by non-negative least squares on the *log* error (kernel times span five orders of
   magnitude, and a relative error cannot fall below -100 % while over-prediction is unbounded:
   a relative fit leaves whole classes of kernels predicted 20x too fast), by Gauss-Newton from
   the relative-error fit, followed by Huber reweighting of outliers (a disturbed measurement on
   a shared machine).  Costs must be non-negative (a negative cost per flop would make "more
   work" predict "faster"), and scipy is not a dependency, so :func:`nnls` is a small
   Lawson–Hanson active-set solver over ``numpy.linalg``.  Since ``smax_p`` is homogeneous of
   degree 1, ``smax_p(a, b) = α·a + β·b`` with ``α = (a/S)^(p-1)``, ``β = (b/S)^(p-1)``,
   ``S = smax_p(a, b)``; each step solves the (then linear) NNLS for fixed ``α, β`` and
   recomputes them.  ``p`` is chosen from :data:`P_GRID` by the geomean error of the fit, and
   the cache size of ``gmem_beyond_cache_bytes`` from :data:`CACHE_GRID` the same way
   (:func:`fit_calibration`).

4. **Use.**  :func:`predict` for a kernel + launch geometry, an oplib ``OpKernel``, a
   ``KernelCounts`` or a whole ``Program`` (summed over launches, host loops included);
   :func:`rank_variants` / :func:`prune_variants` let the autotuner drop variants predicted to be
   far slower than the best before timing them.  Calibrations are cached per device as JSON
   under :func:`calibration_key` (:meth:`Calibration.save`, :meth:`Calibration.load`), with
   the costs in readable units and every micro-benchmark's residual.

The model is a throughput model: of caches it knows two sizes (a launch's working set against
one, what the launches before it left against the last level) but not the cache traffic of
other processes during a long launch, and nothing about occupancy.  Kernels
far outside the calibrated range of sizes are predicted with less confidence (see
``analysis/model_accuracy.py`` for what it achieves on this machine).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from polyfuse.core.program import Kernel, KernelContext, PolyfuseError, Program
from polyfuse.perf.counts import LINE_BYTES, KernelCounts, count_kernel, count_program

Progress = Optional[Callable[[str], None]]

#: bumped when the features' meaning changes under the same names (2: a nest's loop control
#: charged per iteration, not per access), so that a cached calibration is measured again
SCHEMA = "polyfuse.model/2"

#: Features whose costs overlap with each other through the on-chip side of ``smax_p``.
ONCHIP_FEATURES = ("flop_simple", "flop_fma", "flop_div", "flop_special", "int_divmod",
                   "local_access", "loop_accesses", "sync_loop_accesses", "nested_loop_accesses",
                   "loop_flops", "block_flops", "vector_block_flops", "block_accesses",
                   "block_iterations",
                   "contiguous_loop_accesses", "work_items",
                   "guarded_work_items")
#: Features on the memory side of ``smax_p``.
MEMORY_FEATURES = ("gmem_unit_bytes", "gmem_narrow_bytes", "gmem_loop_bytes",
                   "gmem_contiguous_bytes",
                   "gmem_strided_bytes", "gmem_uniform_bytes", "gmem_reuse_bytes",
                   "gmem_own_reuse_bytes", "gmem_block_reuse_bytes", "gmem_beyond_cache_bytes",
                   "gmem_cold_bytes",
                   "gmem_cold_scattered_bytes", "gmem_cold_line_bytes",
                   "gmem_reuse_beyond_bytes", "gmem_strided_beyond_bytes")
#: cache sizes (bytes) :func:`calibrate` tries for ``gmem_beyond_cache_bytes``; the one whose
#: fit is best is kept in the calibration (the cache a device reports is often not the level
#: whose size decides: PoCL reports the shared last level, a busy machine leaves a job less)
CACHE_GRID = (32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20,
              8 << 20, 32 << 20)
#: cache sizes of :data:`CACHE_GRID` whose calibration fit is within this (geomean error) of
#: the best are a tie, the smallest of them kept: the fit is flat over 32-128 KiB (within
#: 0.2 points), and picking the least error there chose 32 KiB, 64 KiB or 4 MiB from one
#: calibration to the next
CACHE_TIE = 0.005
#: the cache size of a calibration that predates the feature, and of features computed alone
DEFAULT_CACHE_BYTES = 1 << 20
#: cache sizes :func:`calibrate` tries for ``gmem_reuse_beyond_bytes`` (a core's private
#: levels: a column walk re-read by every group is slow once it leaves them)
REUSE_CACHE_GRID = (256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20)
#: the last-level cache of :func:`warm_shares` when a device reports none
DEFAULT_LLC_BYTES = 8 << 20
#: :func:`calibrate` tries these fractions of the last-level cache the device reports: of a
#: cache shared by cores and virtual machines a launch gets a part
LLC_FRACTIONS = (1.0, 0.75, 0.5, 0.375, 0.25, 0.125)
#: a work-group narrower than this along dimension 0 fills no full vector register of floats
#: on a CPU (PoCL vectorizes the work-item loop along dimension 0): its unit-stride bytes are
#: ``gmem_narrow_bytes``
NARROW_GROUP = 16
#: the loops of a work-group walking runs of consecutive elements this long (bytes, on
#: average over the first group's footprint of the array) are a stream the CPU's prefetchers
#: follow, not scattered lines: one work-item per row, adjacent rows of 128 B to 2 KiB
#: (``calib_rowpass``; a group's run 8 KiB and more), ran cold at a stream's 70-90 us per
#: 512 KiB in and out, and 1.7-2.6x faster warm, as a stream; a group's 64 rows of 128 B at a
#: matrix's pitch (``calib_rowblock``) 4.9x, a column walk's runs of 256 B
#: (``calib_loop``) as scattered
SCATTERED_RUN_BYTES = 1024
#: Additive overheads (never hidden by other work).
OVERHEAD_FEATURES = ("launches", "group_barriers", "barrier_work_items", "work_groups")
#: Every feature, in the order of :meth:`Features.vector` and of the fitted cost vector.
FEATURES = ONCHIP_FEATURES + MEMORY_FEATURES + OVERHEAD_FEATURES

#: Overlap exponents tried by :func:`calibrate` (1 = no overlap; large = ``max``).
P_GRID = (1.0, 1.5, 2.0, 3.0, 4.0, 8.0)

_SIMPLE_OPS = {"add", "sub", "mul", "neg", "cmp", "func:fmax", "func:fmin", "func:fabs",
               "func:max", "func:min", "func:clamp", "func:copysign", "func:floor",
               "func:ceil", "func:trunc", "func:round", "func:rint", "func:sign",
               "func:step", "func:mix", "func:select"}
_DIV_OPS = {"div", "func:sqrt", "func:rsqrt", "func:native_sqrt", "func:native_rsqrt",
            "func:half_sqrt", "func:half_rsqrt", "func:native_divide", "func:half_divide",
            "func:native_recip", "func:half_recip", "func:fmod", "func:remainder"}


def op_class(op: str) -> str:
    """The feature a float op of :mod:`polyfuse.perf.features` contributes to.

    Classes group ops of similar throughput (one SIMD instruction; fused multiply-add; a
    long-latency divide/square root; a library call of tens of instructions), so a handful of
    micro-benchmarks calibrate all of them.
    """
    if op == "fma":
        return "flop_fma"
    if op == "idiv":
        return "int_divmod"
    if op in _SIMPLE_OPS:
        return "flop_simple"
    if op in _DIV_OPS:
        return "flop_div"
    return "flop_special"


def dtype_bytes(dtype: str) -> int:
    """Bytes of one element of a counts dtype (``float32`` → 4, ``float32x4`` → 16)."""
    base, _, lanes = dtype.partition("x")
    try:
        size = np.dtype(base).itemsize
    except TypeError:
        size = 4
    return size * (int(lanes) if lanes.isdigit() else 1)


def stride_class(lid_strides: Sequence[Any], uniform_dims: Sequence[int] = (0,)) -> str:
    """``unit``, ``uniform`` or ``strided`` for a global access's local-id strides.

    ``uniform``: stride 0 in every dimension a sub-group spans (``uniform_dims``) — one load
    serves the whole sub-group; ``unit``: stride ±1 along dimension 0 — neighbouring
    work-items touch neighbouring elements; ``strided``: the rest, including unknown strides
    (``None``: a may-access or a subscript that is not affine in the local id).
    """
    strides = list(lid_strides)
    if not strides:
        return "uniform"
    if all(d < len(strides) and strides[d] is not None and int(strides[d]) == 0
           for d in uniform_dims):
        return "uniform"
    s0 = strides[0]
    if s0 is not None and abs(int(s0)) == 1:
        return "unit"
    return "strided"


# ----------------------------------------------------------------------------------------------
# Features
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Features:
    """One launch's (or a sum of launches') feature values, keyed by :data:`FEATURES`."""

    values: Mapping[str, float]

    def vector(self) -> np.ndarray:
        return np.array([float(self.values.get(f, 0.0)) for f in FEATURES])

    def __add__(self, other: Features) -> Features:
        return Features({f: float(self.values.get(f, 0.0)) + float(other.values.get(f, 0.0))
                         for f in FEATURES})

    def to_dict(self) -> dict[str, float]:
        return {f: float(self.values.get(f, 0.0)) for f in FEATURES}


def _value(c: Any, what: str, kernel: str) -> float:
    v = c.value
    if v is None and (c.unbounded or not c.expr.free_symbols):
        raise PolyfuseError(f"kernel {kernel}: {what} has no bound the model can count (a loop "
                            "whose trip count, or a condition, depends on values in memory or "
                            "on a computation polyfuse does not model exactly); its time "
                            "cannot be predicted")
    if v is None:
        free = sorted(s.name for s in c.expr.free_symbols)
        given = " ".join(f"--param {name}=VALUE" for name in free) or "--param NAME=VALUE"
        raise PolyfuseError(f"kernel {kernel}: {what} is symbolic in {', '.join(free)}; "
                            f"give the sizes to predict ({given}, or params= in Python)")
    return float(Fraction(v)) if not isinstance(v, float) else v


def array_bytes(counts: KernelCounts) -> dict[str, float]:
    """Distinct global bytes the launch touches per array (every instance of a launch in host
    loops, summed): its footprint over all its accesses
    (:attr:`~polyfuse.perf.counts.KernelCounts.array_footprints`) times its element size; an
    array without one (an inexact access) counts the accesses of its largest class."""
    size: dict[str, int] = {}
    largest: dict[str, float] = {}
    for m in counts.mem:
        if m.space in ("global", "constant"):
            size[m.array] = dtype_bytes(m.dtype)
            n = m.accesses.value
            if n is not None:
                largest[m.array] = max(largest.get(m.array, 0.0), float(Fraction(n)))
    out: dict[str, float] = {}
    for array, nbytes in size.items():
        fp = counts.array_footprints.get(array)
        if fp is not None and fp.value is not None:
            out[array] = float(Fraction(fp.value)) * nbytes
        else:
            out[array] = largest.get(array, 0.0) * nbytes
    return out


def footprint_bytes(counts: KernelCounts) -> float:
    """Distinct global bytes the launch touches, every array's (:func:`array_bytes`)."""
    return sum(array_bytes(counts).values())


def _instances(counts: KernelCounts) -> float:
    for s in counts.sync:
        if s.kind == "kernel_launch" and s.count.value is not None:
            return max(1.0, float(Fraction(s.count.value)))
    return 1.0


def warm_shares(program: Program, counts: Mapping[int, KernelCounts], llc_bytes: int,
                values: Optional[Mapping[str, int]] = None) -> dict[int, dict[str, float]]:
    """Per launch id, per global array of its kernel: the share of the bytes the launch touches
    that the launches before it (or the host's upload) left in the last-level cache.

    The cache is least-recently-used over whole buffers of ``llc_bytes``: the host uploads
    every root buffer before the first launch, in the program's buffer order (a host writes
    its inputs first; measuring uploads every buffer's initial contents), then each launch
    touches each array's footprint (:func:`array_bytes`, exact).  An array's bytes left by an
    earlier touch are warm while they and everything touched since fit in the cache
    (``(llc - bytes touched since) / bytes``, clipped to [0, 1]); the later instances of a
    launch in host loops find their own footprint, when it fits.  Buffers are told apart by
    their root (a sub-buffer is its parent's bytes).
    """
    import sympy

    from polyfuse.core.islutil import int_symbol

    values = dict(values or {})
    lru: dict[str, float] = {}  # root buffer -> bytes last touched, least recent first

    def touch(root: str, nbytes: float) -> None:
        lru.pop(root, None)
        lru[root] = nbytes

    def since(root: str) -> float:
        keys = list(lru)
        return sum(lru[k] for k in keys[keys.index(root) + 1:])

    subs = {int_symbol(k): v for k, v in values.items()}
    subs.update({sympy.Symbol(k): v for k, v in values.items()})
    for name, buf in program.buffers.items():
        if buf.parent is not None or buf.size is None:
            continue
        try:
            size = float(sympy.sympify(buf.size).subs(subs))
        except (TypeError, ValueError, sympy.SympifyError):  # a size still symbolic
            continue
        if size > 0:
            touch(name, size)
    out: dict[int, dict[str, float]] = {}
    for launch in program.launches:
        kc = counts.get(launch.id)
        kernel = program.kernels.get(launch.kernel)
        if kc is None or kernel is None:
            continue
        n = _instances(kc)
        per = {a: b / n for a, b in array_bytes(kc).items()}
        total = sum(per.values())
        own = min(1.0, llc_bytes / total) if total > 0 else 1.0  # later instances
        roots: dict[str, str] = {}
        for p in kernel.params:
            if not p.is_buffer or p.name not in per:
                continue
            try:
                b = launch.arg(p.index)
            except KeyError:
                continue
            if b.kind == "buffer" and b.buffer in program.buffers:
                roots[p.name] = program.root(b.buffer)[0]
        shares: dict[str, float] = {}
        for array, nbytes in per.items():
            root = roots.get(array)
            first = 0.0
            if root is not None and root in lru and nbytes > 0:
                left = lru[root]
                first = min(1.0, max(0.0, (llc_bytes - since(root)) / left) * left / nbytes) \
                    if left > 0 else 0.0
            shares[array] = (first + (n - 1) * own) / n
        out[launch.id] = shares
        for array, root in roots.items():
            touch(root, per[array])
    return out


def features_of(counts: KernelCounts, values: Optional[Mapping[str, int]] = None, *,
                cache_bytes: int = DEFAULT_CACHE_BYTES,
                warm: Optional[Mapping[str, float]] = None,
                reuse_cache_bytes: Optional[int] = None) -> Features:
    """Feature values of one launch's counts, evaluated at ``values`` (sizes still symbolic).

    Ops are taken at the granularity the counts carry (sub-group by default), global accesses in
    bytes (element accesses × element size; uniform ones once per sub-group), ``__local``
    accesses per sub-group.  ``group_barriers`` is the work-item barrier total divided by the
    work-group size; ``work_groups``/``work_items`` are multiplied by the number of launches (a
    launch inside host loops, as :func:`count_program` totals it).  Raises
    :class:`PolyfuseError` when a count needed is still symbolic.

    ``gmem_beyond_cache_bytes``: of the global bytes charged to a stride class, the share of
    one launch instance's footprint (:func:`footprint_bytes`) that does not fit in
    ``cache_bytes`` — what streams from memory rather than from a cache (a stream of 1 MB runs
    4-5x faster per byte than one of 16 MB on a CPU).

    ``gmem_cold_bytes``: of the bytes charged to a stride class, those no earlier launch left
    in the last-level cache — ``warm`` gives, per global array, the share of its bytes that
    one did (:func:`warm_shares`; none given: every byte is cold, as a calibration launch
    measured cold is).  A stream over data in the cache runs several times faster per byte
    than one from memory, in every stride class: the class costs are those of warm bytes and
    cold ones pay this on top.  ``gmem_cold_scattered_bytes``: the cold bytes made in
    work-item loops or at a stride between work-items (many streams at once).

    ``gmem_strided_beyond_bytes``: the same share of the strided bytes alone, at most the
    launch's footprint (a line, at a large stride a page, per element: a transpose in a cache
    is cheap, one from memory is not; what a kernel re-reads at a stride is in the cache).

    ``guarded_work_items``: the work-items of a launch with a straight-line global access that
    some of them skip (its accesses fewer than the work-items: a bounds guard over a grid
    padded to whole work-groups); a CPU vectorizing across work-items runs that body masked.

    ``gmem_reuse_beyond_bytes``: of the re-read bytes (``gmem_reuse_bytes``) of an access
    every work-group along a dimension makes alike (group-id stride 0) to an array whose
    footprint (one instance's, :func:`array_bytes`) exceeds ``reuse_cache_bytes`` (default
    ``cache_bytes``), the share beyond it: each group walks the whole array, so its re-reads
    find their lines evicted.
    """
    kc = counts.evaluate(values) if values else counts
    warm = warm or {}
    per_array = array_bytes(kc)
    instances = _instances(kc)
    reuse_cache = cache_bytes if reuse_cache_bytes is None else reuse_cache_bytes
    name = kc.kernel
    out = dict.fromkeys(FEATURES, 0.0)
    ls = [v for v in kc.local_size if v is not None]
    # a multi-dimensional work-group whose rows are shorter than a vector
    narrow = len(kc.local_size) > 1 and bool(ls) and ls[0] < NARROW_GROUP and \
        any(v > 1 for v in ls[1:])
    for r in kc.ops:
        cls = op_class(r.op)
        # a register block's ops are packed into vectors within a work-item (SLP): neither
        # vectorized across work-items (the class counts) nor scalar loop iterations
        blocked = 0.0
        if r.block_count is not None and cls != "int_divmod":
            blocked = _value(r.block_count, f"op {r.op} in register blocks", name)
            vector = _value(r.vector_count, f"op {r.op} in vector blocks", name) \
                if r.vector_count is not None else 0.0
            out["block_flops"] += blocked - vector
            out["vector_block_flops"] += vector
            out[cls] -= _value(r.block_total, f"op {r.op} in register blocks", name) \
                if r.block_total is not None else 0.0
        out[cls] += _value(r.count, f"op {r.op}", name)
        if r.loop_count is not None and cls != "int_divmod":
            # a contiguous loop's ops are vectorized along it: the class counts say it
            contiguous = _value(r.contiguous_count, f"op {r.op} in contiguous loops", name) \
                if r.contiguous_count is not None else 0.0
            out["loop_flops"] += _value(r.loop_count, f"op {r.op} in loops", name) - blocked \
                - contiguous
    for m in kc.mem:
        n = _value(m.count, f"{m.space} {m.direction} of {m.array}", name)
        acc = m.accesses.value
        acc_f = float(Fraction(acc)) if acc is not None else n
        looped = m.loop_accesses.value if m.loop_accesses is not None else 0
        loop_f = float(Fraction(looped)) if looped is not None else acc_f
        in_block = m.block_accesses.value if m.block_accesses is not None else 0
        block_f = float(Fraction(in_block)) if in_block is not None else loop_f
        out["block_accesses"] += block_f
        along = m.contiguous_accesses.value if m.contiguous_accesses is not None else 0
        contiguous_f = float(Fraction(along)) if along is not None else 0.0
        out["contiguous_loop_accesses"] += contiguous_f
        if m.space in ("global", "constant", "local"):
            # a register block's loads are packed, not scalar loop iterations (their bytes
            # stay ``gmem_loop_bytes``: a work-item's own walk, not a sub-group's); a
            # contiguous loop's are vectors along the loop
            out["loop_accesses"] += loop_f - block_f - contiguous_f
            if m.nested_loop_accesses is not None and m.nested_loop_accesses.value is not None:
                out["nested_loop_accesses"] += float(Fraction(m.nested_loop_accesses.value))
        if m.space == "local":
            out["local_access"] += n
            continue
        if m.space not in ("global", "constant"):
            continue
        cls = stride_class(m.lid_strides)
        if m.granularity == "sub-group" and cls != "uniform":
            cls = "strided"  # a non-uniform access counted per sub-group (forced granularity)
        elif m.granularity == "work-item" and cls == "uniform":
            # the counts found it varying inside a sub-group along a dimension past the first
            # (a work-group one wide along dimension 0): not one load per sub-group
            cls = "strided"
        if m.packed and cls == "strided":
            cls = "unit"  # a run of consecutive elements per work-item: vector accesses
        size = dtype_bytes(m.dtype)
        # compulsory part: distinct elements (the footprint); the rest re-reads them (AFR > 1)
        fp = None
        if m.footprint is not None and m.footprint.value is not None:
            fp = float(Fraction(m.footprint.value))
        first = min(n, fp) if fp is not None else n
        # re-reads of what the same work-item loaded before (a row form's passes over its own
        # row, in its caches) apart from those of what other work-items loaded
        own = n  # the distinct (work-item, element) pairs: all re-reads others' unless known
        if m.own_footprint is not None and m.own_footprint.value is not None:
            own = min(n, max(first, float(Fraction(m.own_footprint.value))))
        out["gmem_own_reuse_bytes"] += (n - own) * size
        # a register block's loads are its work-item's own vector loads (packed within the
        # work-item, not shared by a sub-group): their re-reads of other work-items' data,
        # counted per work-item, are a product's panels found in the core's caches, apart
        # from straight-line re-reads
        blk = min(1.0, block_f / acc_f) if block_f > 0 and acc_f > 0 else 0.0
        out["gmem_reuse_bytes"] += (1.0 - blk) * (own - first) * size
        own_wi = own if m.granularity == "work-item" else acc_f
        first_wi = min(acc_f, fp) if fp is not None else acc_f
        out["gmem_block_reuse_bytes"] += blk * max(0.0, own_wi - first_wi) * size
        # the same elements read by every work-group along a dimension (group-id stride 0: a
        # weight matrix walked by every row's group) of an array larger than the cache: each
        # group's re-reads find the lines the others evicted
        # what one group walks of the array (a packed panel of a blocked product's weight,
        # the whole weight in a row form's): re-reads of more than the cache holds miss
        walked = per_array.get(m.array, 0.0) / instances
        group_fp = kc.group_footprints.get(m.array)
        if group_fp is not None and group_fp.value is not None:
            walked = min(walked, float(Fraction(group_fp.value)) * size / instances)
        if walked > reuse_cache and any(g is not None and int(g) == 0 for g in m.gid_strides):
            out["gmem_reuse_beyond_bytes"] += (own - first) * size * (1.0 - reuse_cache / walked)
        if cls == "unit" and narrow and not m.packed:
            cls = "narrow"
        # the share made inside work-item loops, of any stride: scalar loads, one iteration
        # after the other, on a CPU
        share = min(1.0, loop_f / acc_f) if loop_f > 0 and acc_f > 0 else 0.0
        along_share = min(share, contiguous_f / acc_f) if acc_f > 0 else 0.0
        out["gmem_loop_bytes"] += (share - along_share) * first * size
        out["gmem_contiguous_bytes"] += along_share * first * size
        out[f"gmem_{cls}_bytes"] += (1.0 - share) * first * size
        w = min(1.0, max(0.0, float(warm.get(m.array, 0.0))))
        out["gmem_cold_bytes"] += (1.0 - w) * first * size
        # cold bytes that each work-item streams on its own (in its loops, or at a stride
        # between work-items): many streams at once, which prefetchers do not follow -- but
        # loops of a work-group that walk runs of SCATTERED_RUN_BYTES or more together (a row
        # form's group of adjacent rows) are a stream, which they do
        looped = share
        runs = kc.group_runs.get(m.array)
        if runs is not None and runs.value is not None and group_fp is not None \
                and group_fp.value is not None and float(Fraction(runs.value)) > 0 \
                and float(Fraction(group_fp.value)) / float(Fraction(runs.value)) * size \
                >= SCATTERED_RUN_BYTES:
            looped = 0.0
        scattered = looped if cls in ("unit", "uniform") else (1.0 - share) + looped
        out["gmem_cold_scattered_bytes"] += (1.0 - w) * scattered * first * size
        # a cold element fetches its whole cache line: the line bytes it does not use (a
        # stride between work-items' elements, or between a work-item's) come from memory too
        lines = m.footprint_lines.value if m.footprint_lines is not None else None
        if lines is not None and fp is not None:
            waste = float(Fraction(lines)) * LINE_BYTES - fp * size
            out["gmem_cold_line_bytes"] += (1.0 - w) * max(0.0, waste)
    charged = sum(out[f] for f in ("gmem_unit_bytes", "gmem_narrow_bytes", "gmem_loop_bytes",
                                   "gmem_contiguous_bytes", "gmem_strided_bytes",
                                   "gmem_uniform_bytes"))
    launches = 1.0
    barriers = 0.0
    for s in kc.sync:
        if s.kind == "kernel_launch":
            launches = _value(s.count, "kernel launches", name)
        else:
            barriers += _value(s.count, s.kind, name)
    launch_fp = footprint_bytes(kc) / max(launches, 1.0)  # one instance's
    if launch_fp > cache_bytes:
        out["gmem_beyond_cache_bytes"] = charged * (1.0 - cache_bytes / launch_fp)
        # a strided access touches a line (and, at a large stride, a page) per element: from
        # memory it costs many times what it costs from a cache.  At most the footprint comes
        # from memory: a product re-reading A at a stride (every column block reads its rows)
        # finds it in the cache, and charged by access count this term predicted a BERT-base
        # FFN product 80x over its time (re-reads beyond the cache are
        # ``gmem_reuse_beyond_bytes``)
        out["gmem_strided_beyond_bytes"] = min(out["gmem_strided_bytes"], launch_fp) * (
            1.0 - cache_bytes / launch_fp)
    if kc.block_iterations is not None:
        out["block_iterations"] = _value(kc.block_iterations, "register-block iterations", name)
    if barriers > 0:
        # a kernel with barriers: a CPU OpenCL compiler runs each region between barriers as a
        # loop over the work-items and keeps private values in memory across them, so a
        # work-item's own loop costs several times more than in a barrier-free kernel
        out["sync_loop_accesses"] = out["loop_accesses"]
        out["loop_accesses"] = 0.0
    wi = _value(kc.geometry["work_items"], "work-items", name)
    wg = _value(kc.geometry["work_groups"], "work-groups", name)
    group_size = wi / wg if wg else 1.0
    out["launches"] = launches
    out["work_items"] = wi * launches
    # a straight-line global access that some work-items skip (a bounds guard over a padded
    # grid, one work-item storing a group's result): a CPU vectorizing across work-items runs
    # such a body masked, every work-item of the launch
    for m in kc.mem:
        if m.space not in ("global", "constant") or m.loop_accesses is not None:
            continue
        acc = m.accesses.value
        if acc is not None and 0 < float(Fraction(acc)) < wi * launches:
            out["guarded_work_items"] = wi * launches
            break
    out["work_groups"] = wg * launches
    # barrier counts are work-item totals (over every launch instance already)
    out["group_barriers"] = barriers / group_size if group_size else barriers
    # a CPU runs the code between two barriers as a loop over the group's work-items, its
    # private values kept in arrays across the barrier: per barrier, a pass over the group
    # (a group of NARROW_GROUP or fewer is one vector, and its barriers cost next to nothing)
    if group_size > NARROW_GROUP:
        out["barrier_work_items"] = barriers
    return Features(out)


# ----------------------------------------------------------------------------------------------
# Fitting
# ----------------------------------------------------------------------------------------------


def nnls(a: np.ndarray, b: np.ndarray, *, max_iter: Optional[int] = None,
         tol: Optional[float] = None) -> np.ndarray:
    """``argmin ||a x - b||₂`` subject to ``x >= 0`` (Lawson & Hanson's active-set method).

    Written here because scipy (``scipy.optimize.nnls``) is not a polyfuse dependency; the
    problems are tiny (tens of rows, about a dozen columns), so an unconstrained
    ``numpy.linalg.lstsq`` per active-set change is cheap.  Columns should be of comparable
    scale (:func:`fit_costs` normalizes them).
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    m, n = a.shape
    if tol is None:  # for the dual (gradient) test only, as scipy's default
        tol = 10 * np.finfo(float).eps * max(m, n) * max(1.0, float(np.abs(a).sum(0).max())) \
            * max(1.0, float(np.abs(b).max()))
    max_iter = max_iter or 3 * n + 30
    passive = np.zeros(n, dtype=bool)
    x = np.zeros(n)
    w = a.T @ b
    blocked = np.zeros(n, dtype=bool)  # a column that cannot enter without going negative
    it = 0
    while it < max_iter:
        cand = ~passive & ~blocked
        if not cand.any() or np.max(np.where(cand, w, -np.inf)) <= tol:
            break
        it += 1
        j = int(np.argmax(np.where(cand, w, -np.inf)))
        passive[j] = True
        first = True
        for _inner in range(n + 1):  # each round drops at least one column: bounded
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if np.all(z[passive] > 0):
                x = z
                break
            if first and z[j] <= 0:  # numerically degenerate: j cannot enter; never retry it
                passive[j] = False
                blocked[j] = True
                break
            first = False
            bad = np.flatnonzero(passive & (z <= 0))
            ratios = x[bad] / (x[bad] - z[bad])
            k = int(np.argmin(ratios))
            x = x + float(ratios[k]) * (z - x)
            x[bad[k]] = 0.0  # exactly: rounding must not keep the blocking variable alive
            passive &= x > 0
            x[~passive] = 0.0
            if not passive.any():
                break
        w = a.T @ (b - a @ x)
        if not blocked[j]:
            blocked[:] = False  # the active set changed: give blocked columns another try
    return np.maximum(x, 0.0)


_ON = np.array([f in ONCHIP_FEATURES for f in FEATURES])
_MEM = np.array([f in MEMORY_FEATURES for f in FEATURES])


def smooth_max(a: np.ndarray, b: np.ndarray, p: float) -> np.ndarray:
    """``(a^p + b^p)^(1/p)`` for non-negative ``a, b`` (computed scaled, so no overflow)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    m = np.maximum(a, b)
    safe = np.where(m > 0, m, 1.0)
    return np.where(m > 0, safe * ((a / safe) ** p + (b / safe) ** p) ** (1.0 / p), 0.0)


def model_time(x: np.ndarray, costs: np.ndarray, p: float) -> np.ndarray:
    """Predicted seconds of feature rows ``x`` (n×F or F) under ``costs`` and exponent ``p``."""
    x = np.atleast_2d(np.asarray(x, dtype=float))
    on = x[:, _ON] @ costs[_ON]
    mem = x[:, _MEM] @ costs[_MEM]
    rest = x[:, ~(_ON | _MEM)] @ costs[~(_ON | _MEM)]
    return smooth_max(on, mem, p) + rest


def fit_costs(x: np.ndarray, t: np.ndarray, p: float, *, iters: int = 60,
              weights: Optional[np.ndarray] = None) -> tuple[np.ndarray, float]:
    """Non-negative costs minimizing the log error ``log(model_time(x, c, p) / t)`` in the
    least-squares sense (``weights`` scale each row).

    Log, not relative, error: a relative error cannot fall below -100 % however far a kernel
    is under-predicted, while over-prediction is unbounded, so a relative fit leaves whole
    classes of kernels predicted 20x too fast rather than pay for a few over-predictions.
    Gauss-Newton on the log: with ``f`` the current prediction, ``log(a·c / t) ≈ a·c/f - 1 +
    log(f/t)``, an NNLS problem with rows ``a/f`` and right-hand side ``1 - log(f/t)``; the
    first step, from ``f = t``, is the relative-error fit.  The smooth max is linearized as
    ``α·on + β·mem`` with weights recomputed from the current costs (module docstring).
    Columns of each system are scaled to unit norm for NNLS's conditioning.  Returns the costs
    and the root-mean-square relative error of the fit.
    """
    x = np.asarray(x, dtype=float)
    t = np.asarray(t, dtype=float)
    if x.ndim != 2 or x.shape[0] != t.size or x.shape[1] != len(FEATURES):
        raise ValueError(f"x must be n×{len(FEATURES)} and t of length n")
    if np.any(t <= 0):
        raise ValueError("measured times must be positive")
    rw = np.ones(len(t)) if weights is None else np.asarray(weights, dtype=float)
    alpha = np.ones(len(t))
    beta = np.ones(len(t))
    costs = np.zeros(x.shape[1])
    f = t.copy()
    for _ in range(iters):
        a = x.copy()
        a[:, _ON] *= alpha[:, None]
        a[:, _MEM] *= beta[:, None]
        w = rw / f
        scale = np.linalg.norm(a * w[:, None], axis=0)
        scale = np.where(scale > 0, scale, 1.0)
        sol = nnls((a / scale) * w[:, None], rw * (1.0 - np.log(f / t)))
        new = sol / scale
        on = x[:, _ON] @ new[_ON]
        mem = x[:, _MEM] @ new[_MEM]
        s = smooth_max(on, mem, p)
        pos = s > 0
        alpha = np.where(pos, (on / np.where(pos, s, 1)) ** (p - 1), 1.0)
        beta = np.where(pos, (mem / np.where(pos, s, 1)) ** (p - 1), 1.0)
        done = np.allclose(new, costs, rtol=1e-5, atol=0)
        costs = new
        # the next linearization point; kept within 1000x of the measurement (a row the
        # current costs cannot reach at all must not get an infinite weight)
        f = np.clip(model_time(x, costs, p), t / 1e3, t * 1e3)
        if done:
            break
    err = model_time(x, costs, p) / t - 1.0
    return costs, float(np.sqrt(np.mean(err ** 2)))


def fit_model(x: np.ndarray, t: np.ndarray, p_grid: Sequence[float] = P_GRID, *,
              robust: int = 3) -> tuple[np.ndarray, float, float]:
    """:func:`fit_costs` for every ``p`` of ``p_grid``; the (costs, p, rms) whose geomean error
    on the calibration set is least.

    ``robust`` rounds of Huber reweighting follow each fit: a micro-benchmark whose log
    residual is beyond three times the robust spread (1.4826 × the median absolute log residual) of
    the others gets a weight that caps its pull, so one disturbed measurement on a shared
    machine (or a kernel the device compiles unlike the rest) does not drag every cost.
    """
    best: Optional[tuple[np.ndarray, float, float, float]] = None
    for p in p_grid:
        weights = np.ones(len(t))
        for _ in range(1 + max(0, robust)):
            costs, rms = fit_costs(x, t, float(p), weights=weights)
            fitted = model_time(x, costs, float(p))
            r = np.abs(np.log(np.maximum(fitted, 1e-30) / t))
            k = 3.0 * 1.4826 * float(np.median(r)) or 1e-12
            weights = np.where(r <= k, 1.0, k / np.maximum(r, 1e-30))
        score = float(np.mean(r))
        if best is None or score < best[3] - 1e-12:
            best = (costs, float(p), rms, score)
    assert best is not None
    return best[0], best[1], best[2]


def fit_calibration(counts: Sequence[KernelCounts], t: np.ndarray,
                    p_grid: Sequence[float] = P_GRID,
                    cache_grid: Sequence[int] = CACHE_GRID,
                    warm: Optional[Sequence[bool]] = None,
                    llc_grid: Sequence[int] = (DEFAULT_LLC_BYTES,),
                    reuse_grid: Sequence[int] = (DEFAULT_CACHE_BYTES,)
                    ) -> tuple[np.ndarray, float, int, int, int, float]:
    """(costs, p, cache bytes, last-level cache bytes, re-read cache bytes, rms) of launches'
    ``counts`` measured ``t`` seconds; ``warm``: which launches ran right after a launch of
    their own (their data in a last-level cache of a size from ``llc_grid``,
    :func:`calibration_warm_shares`); the cache of ``gmem_reuse_beyond_bytes`` from
    ``reuse_grid``.

    The cache sizes are parameters of the features, not costs: each size of ``cache_grid``
    is fitted at one overlap exponent (the middle of ``p_grid``) and the size whose geomean
    error is least is kept (the smallest of those within :data:`CACHE_TIE` of it: a flat
    fit must not pick its size by noise), then the same for ``llc_grid`` (the cache a
    device reports is shared: by its cores, by other guests of a virtual machine) and for
    ``reuse_grid`` (its
    own grid: tied to the first, a fit that picks an L1-sized cache for the launch footprint
    charged every weight re-read as from memory), and :func:`fit_model` fits every ``p`` at
    those sizes (a full grid of all of them would take a busy 2-core machine minutes).
    """
    flags = list(warm) if warm is not None else [False] * len(counts)

    def features(cache: int, llc: int, reuse: int) -> np.ndarray:
        return np.array([features_of(kc, cache_bytes=int(cache),
                                     warm=calibration_warm_shares(kc, llc) if w else None,
                                     reuse_cache_bytes=int(reuse)
                                     ).vector() for kc, w in zip(counts, flags)])

    p_mid = float(sorted(p_grid)[len(p_grid) // 2])

    def best_of(grid: Sequence[int], x_of: Callable[[int], np.ndarray], tie: float = 0.0
                ) -> int:
        errs: list[tuple[float, int]] = []
        for size in grid:
            x = x_of(size)
            costs, p, _ = fit_model(x, t, (p_mid,))
            errs.append((geomean_error(list(zip(model_time(x, costs, p), t))), int(size)))
        least = min(e for e, _ in errs)
        return min(size for e, size in errs if e <= least + tie + 1e-12)

    llc0, reuse0 = max(llc_grid), sorted(reuse_grid)[len(reuse_grid) // 2]
    cache = best_of(cache_grid, lambda c: features(c, llc0, reuse0), CACHE_TIE)
    llc = best_of(llc_grid, lambda lc: features(cache, lc, reuse0), CACHE_TIE) if any(flags) \
        else llc0
    reuse = best_of(reuse_grid, lambda r: features(cache, llc, r))
    costs, p, rms = fit_model(features(cache, llc, reuse), t, p_grid)
    return costs, p, cache, llc, reuse, rms


# ----------------------------------------------------------------------------------------------
# Calibration kernels
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    """A kernel argument of a calibration kernel: a buffer of ``nbytes`` or an int/float."""

    kind: str  # buffer | int | float
    value: Union[int, float]


@dataclass(frozen=True)
class CalibrationKernel:
    """One generated micro-benchmark launch: source, kernel name, geometry and arguments."""

    label: str
    source: str
    kernel: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    args: tuple[Arg, ...]
    #: scalar arguments by parameter name (what the counts are specialized with)
    values: tuple[tuple[str, int], ...] = ()
    #: measured right after a launch of its own, which leaves its data in the cache: a
    #: consumer of what the launch before it wrote (:func:`measure_calibration`)
    warm: bool = False


def _chain_source(op: str, steps: Optional[int] = None, accumulators: int = 4) -> str:
    """Kernel ``calib_<op>``: one element per work-item, a chain of ``op`` on private values.

    ``steps`` given: the chain is ``steps`` statements of straight-line code (kernel
    ``calib_<op>``; no loop, like an element-wise kernel, so a CPU OpenCL compiler vectorizes it
    across work-items); ``steps`` None: a loop of ``iters`` rounds (kernel ``calib_<op>_loop``,
    the shape of a reduction or a dot product).  Every step keeps the values bounded (no
    overflow, no denormals) and the result is stored, so the chain can neither be folded nor
    dropped: ``fma``: ``y = fma(y, 0.5, 0.25)``; ``simple``: ``y = fmax(y*0.999, 0.1)`` (a mul
    and a max); ``exp``: ``y = exp(-y)`` (a neg and an exp, in (0, 1]); ``div``:
    ``y = 1/(y + 1)`` (an add and a div, in [0.5, 1]).  ``accumulators`` independent chains keep
    it throughput-bound rather than latency-bound.
    """
    step = {"fma": "y{k} = fma(y{k}, 0.5f, 0.25f);",
            "simple": "y{k} = fmax(y{k} * 0.999f, 0.1f);",
            "exp": "y{k} = exp(-y{k});",
            "div": "y{k} = 1.0f / (y{k} + 1.0f);"}[op]
    u = range(accumulators)
    init = "".join(f"    float y{k} = x[i] + {0.1 * (k + 1):.1f}f;\n" for k in u)
    total = " + ".join(f"y{k}" for k in u)
    if steps is None:
        body = "".join("        " + step.format(k=k) + "\n" for k in u)
        return (f"__kernel void calib_{op}_loop(__global const float *x, __global float *out, "
                "const int iters)\n{\n    const int i = get_global_id(0);\n" + init +
                "    for (int it = 0; it < iters; ++it) {\n" + body + "    }\n"
                f"    out[i] = {total};\n}}\n")
    body = "".join("    " + step.format(k=k) + "\n" for _ in range(steps) for k in u)
    return (f"__kernel void calib_{op}(__global const float *x, __global float *out)\n{{\n"
            "    const int i = get_global_id(0);\n" + init + body +
            f"    out[i] = {total};\n}}\n")


def _loop_source() -> str:
    """Kernel ``calib_loop``: each work-item walks a column of ``x`` (``k`` rows of ``G``
    floats, unit stride across work-items) with one ``fma`` per element against a uniform
    coefficient ``c[k]`` — loads and arithmetic inside a per-work-item loop."""
    return ("__kernel void calib_loop(__global const float *x, __global const float *c, "
            "__global float *y, const int rows)\n{\n    const int i = get_global_id(0);\n"
            "    const int g = get_global_size(0);\n    float acc = 0.0f;\n"
            "    for (int k = 0; k < rows; ++k)\n        acc = fma(x[k * g + i], c[k], acc);\n"
            "    y[i] = acc;\n}\n")


def _stream2d_source() -> str:
    """Kernel ``calib_stream2d``: ``y = x + 1`` over a ``W × H`` grid of ``8 × 8``
    work-groups — rows of 8 floats per work-group, the shape of an element-wise kernel over
    an image-like tensor."""
    return ("__kernel void calib_stream2d(__global const float *x, __global float *y)\n{\n"
            "    const int i = get_global_id(1) * get_global_size(0) + get_global_id(0);\n"
            "    y[i] = x[i] + 1.0f;\n}\n")


def _gather_source(rows: int, cols: int) -> str:
    """Kernel ``calib_gather``: a transpose, ``y[i] = x[(i % rows) * cols + i / rows]`` —
    straight-line loads at a stride of ``cols`` elements across work-items, unit-stride
    stores."""
    return ("__kernel void calib_gather(__global const float *x, __global float *y)\n{\n"
            "    const int i = get_global_id(0);\n"
            f"    y[i] = x[(i % {rows}) * {cols} + i / {rows}];\n}}\n")


def _broadcast_source(run: int) -> str:
    """Kernel ``calib_bcast``: ``y[i] = x[i] * b[i / run]`` — a straight-line load that a whole
    run of ``run`` work-items shares (uniform across a sub-group), beside a stream."""
    return ("__kernel void calib_bcast(__global const float *x, __global const float *b, "
            "__global float *y)\n{\n    const int i = get_global_id(0);\n"
            f"    y[i] = x[i] * b[i / {run}];\n}}\n")


def _guarded_loop_source() -> str:
    """Kernel ``calib_gloop``: ``calib_loop`` with a bounds test in the loop body, as loops
    over a window or a padded input have; ``bound`` is given at run time, so the compiler can
    neither drop the test nor hoist it out of the loop."""
    return ("__kernel void calib_gloop(__global const float *x, __global const float *c, "
            "__global float *y, const int rows, const int bound)\n{\n"
            "    const int i = get_global_id(0);\n"
            "    const int g = get_global_size(0);\n    float acc = 0.0f;\n"
            "    for (int k = 0; k < rows; ++k) {\n"
            "        if (i + k < bound)\n"
            "            acc = fma(x[k * g + i], c[k], acc);\n"
            "    }\n    y[i] = acc;\n}\n")


def _nested_loop_source(outer: int, a: int, b: int) -> str:
    """Kernel ``calib_nest``: a three-deep work-item loop nest (``outer × a × b``) with a
    bounds test, reducing the products of a plane-strided input and a uniform table — loops
    over channels and a window, as sliding-window kernels have."""
    return ("__kernel void calib_nest(__global const float *x, __global const float *c, "
            "__global float *y, const int plane)\n{\n"
            "    const int i = get_global_id(0);\n    float acc = 0.0f;\n"
            f"    for (int p = 0; p < {outer}; ++p)\n"
            f"        for (int u = 0; u < {a}; ++u)\n"
            f"            for (int v = 0; v < {b}; ++v)\n"
            "                if (i + u + v < plane)\n"
            f"                    acc += x[p * plane + i + u * {b} + v]\n"
            f"                           * c[(p * {a} + u) * {b} + v];\n"
            "    y[i] = acc;\n}\n")


def _tile_loop_source(tile: int) -> str:
    """Kernel ``calib_tile``: the tile loop of a tiled product, on a ``tile × tile``
    work-group: each round every work-item stores one element into each of two ``__local``
    tiles, then (between barriers) runs ``tile`` iterations of ``acc += ta[lr][k] * tb[k][lc]``
    — one broadcast and one unit-stride ``__local`` load and an fma per iteration, a
    loop-carried dependence through ``acc``.  The tiles are rows of ``x`` at a row ``pitch``
    (no product is computed: both tiles read the same rows)."""
    t = tile
    return ("__kernel void calib_tile(__global const float *x, __global float *y, "
            "const int rounds, const int pitch)\n{\n"
            f"    __local float ta[{t}][{t}];\n    __local float tb[{t}][{t}];\n"
            "    const int lc = get_local_id(0);\n    const int lr = get_local_id(1);\n"
            "    const int gx = get_global_id(0);\n    const int gy = get_global_id(1);\n"
            "    float acc = 0.0f;\n"
            "    for (int r = 0; r < rounds; ++r) {\n"
            f"        ta[lr][lc] = x[gy * pitch + r * {t} + lc];\n"
            f"        tb[lr][lc] = x[(r * {t} + lr) * pitch + gx];\n"
            "        barrier(CLK_LOCAL_MEM_FENCE);\n"
            f"        for (int k = 0; k < {t}; ++k)\n"
            "            acc += ta[lr][k] * tb[k][lc];\n"
            "        barrier(CLK_LOCAL_MEM_FENCE);\n"
            "    }\n    y[gy * get_global_size(0) + gx] = acc;\n}\n")


def _row_loop_source(local_size: int) -> str:
    """Kernel ``calib_rowloop``: one work-group per row of ``cols`` floats, each work-item
    walking the row at a stride of the group size with an ``exp`` and an add per element,
    then a tree reduction through ``__local`` memory with a barrier per level — the shape of a
    row reduction (normalizations, row maxima and sums)."""
    ls = local_size
    return ("__kernel void calib_rowloop(__global const float *x, __global float *y, "
            "const int cols)\n{\n"
            f"    __local float s[{ls}];\n"
            "    const int lid = get_local_id(0);\n    const int row = get_group_id(0);\n"
            "    float acc = 0.0f;\n"
            f"    for (int c = 0; c < cols / {ls}; ++c)\n"
            f"        acc += exp(x[row * cols + c * {ls} + lid]);\n"
            "    s[lid] = acc;\n    barrier(CLK_LOCAL_MEM_FENCE);\n"
            f"    for (int h = {ls // 2}; h > 0; h >>= 1) {{\n"
            "        if (lid < h)\n            s[lid] += s[lid + h];\n"
            "        barrier(CLK_LOCAL_MEM_FENCE);\n    }\n"
            "    if (lid == 0)\n        y[row] = s[0];\n}\n")


def _register_block_source(rows: int, cols: int, depth: int) -> str:
    """Kernel ``calib_block``: each work-item keeps a ``rows × cols`` block of accumulators
    and, for each of ``depth`` steps, loads ``cols`` consecutive floats of a packed panel of
    ``w`` (its column of blocks, ``depth × cols`` floats) and ``rows`` floats of ``x`` (one of
    each of its rows, at a pitch of ``depth``) and updates every accumulator with one
    multiply-add — ``rows × cols`` statements in one loop body, which a CPU compiler packs
    into vector instructions of the work-item (the shape of a register-blocked product).
    The sizes are literals and the panel index reads ``k * cols + (base + j)``: with a
    run-time depth, or the index written ``(base + k) * cols + j``, PoCL 3.1 leaves the body
    scalar (8-10 instead of 55 G multiply-adds/s), and a generated product has neither."""
    lines = ["__kernel void calib_block(__global const float *x, __global const float *w, "
             "__global float *y)\n{",
             f"    const int r0 = get_global_id(0) * {rows};",
             f"    const int c0 = get_global_id(1) * {cols};"]
    lines += [f"    float acc_{i}_{j} = 0.0f;" for i in range(rows) for j in range(cols)]
    lines.append(f"    for (int k = 0; k < {depth}; k++) {{")
    lines += [f"        const float w_{j} = w[(k * {cols}) + ((c0 * {depth}) + {j})];"
              for j in range(cols)]
    for i in range(rows):
        lines.append(f"        const float x_{i} = x[((r0 + {i}) * {depth}) + k];")
        lines += [f"        acc_{i}_{j} += x_{i} * w_{j};" for j in range(cols)]
    lines.append("    }")
    lines += [f"    y[((r0 + {i}) * get_global_size(1) * {cols}) + (c0 + {j})] = acc_{i}_{j};"
              for i in range(rows) for j in range(cols)]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _vector_block_source(rows: int, vectors: int, width: int, depth: int) -> str:
    """Kernel ``calib_vblock``: :func:`_register_block_source`'s block written as the blocked
    product writes it on a device with float vectors (``oplib.linalg._vector_block``): each
    row's ``vectors x width`` accumulators are ``float<width>`` vectors, each step loads the
    panel's row with ``vload<width>`` and broadcasts one float of ``x`` per row."""
    cols, vt = vectors * width, f"float{width}"
    lines = ["__kernel void calib_vblock(__global const float *x, __global const float *w, "
             "__global float *y)\n{",
             f"    const int r0 = get_global_id(0) * {rows};",
             f"    const int c0 = get_global_id(1) * {cols};"]
    lines += [f"    {vt} acc_{i}_v{v} = ({vt})(0.0f);" for i in range(rows)
              for v in range(vectors)]
    lines.append(f"    for (int k = 0; k < {depth}; k++) {{")
    lines += [f"        const {vt} w_v{v} = vload{width}(0, w + ((k * {cols}) + "
              f"((c0 * {depth}) + {v * width})));" for v in range(vectors)]
    for i in range(rows):
        lines.append(f"        const float x_{i} = x[((r0 + {i}) * {depth}) + k];")
        lines += [f"        acc_{i}_v{v} += x_{i} * w_v{v};" for v in range(vectors)]
    lines.append("    }")
    lines += [f"    vstore{width}(acc_{i}_v{v}, 0, y + (((r0 + {i}) * get_global_size(1) * "
              f"{cols}) + (c0 + {v * width})));" for i in range(rows) for v in range(vectors)]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _row_block_source(rows: int, cols: int, width: int) -> str:
    """Kernel ``calib_rowblock``: ``y = x + b`` (``b`` a bias of ``width`` floats) over a
    matrix ``width`` floats wide, each work-item walking a block of ``rows × cols`` elements
    in two loops, the inner one along a row — an element-wise kernel of a blocked form, whose
    contiguous inner loop a CPU compiler vectorizes within the work-item."""
    return ("__kernel void calib_rowblock(__global const float *x, __global const float *b, "
            "__global float *y)\n{\n"
            f"    const int r0 = get_global_id(0) * {rows};\n"
            f"    const int c0 = get_global_id(1) * {cols};\n"
            f"    for (int i = 0; i < {rows}; i++)\n"
            f"        for (int j = 0; j < {cols}; j++)\n"
            f"            y[((r0 + i) * {width}) + c0 + j] = x[((r0 + i) * {width}) + c0 + j]"
            " + b[c0 + j];\n}\n")


def _row_pass_source(cols: int, partials: int = 16) -> str:
    """Kernel ``calib_rowpass``: one work-item per row of ``cols`` floats, a sum of the row into
    ``partials`` accumulators (a loop of ``partials`` statements), then a second pass over
    the same row storing it scaled by the sum — a work-item re-reading its own row, which
    its caches still hold (``gmem_own_reuse_bytes``), the shape of a row-form reduction."""
    steps = cols // partials
    lines = ["__kernel void calib_rowpass(__global const float *x, __global float *y)\n{",
             "    const int r = get_global_id(0);"]
    lines += [f"    float p{j} = 0.0f;" for j in range(partials)]
    lines.append(f"    for (int k = 0; k < {steps}; k++) {{")
    lines += [f"        p{j} += x[r * {cols} + k * {partials} + {j}];" for j in range(partials)]
    lines.append("    }")
    total = " + ".join(f"p{j}" for j in range(partials))
    lines.append(f"    const float inv = 1.0f / ({total} + 1.0f);")
    lines.append(f"    for (int c = 0; c < {cols}; c++)")
    lines.append(f"        y[r * {cols} + c] = x[r * {cols} + c] * inv;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _column_walk_source(width: int, columns: int) -> str:
    """Kernel ``calib_colwalk``: every work-group walks the same ``rows`` of a matrix of
    ``columns × width`` floats, each work-item summing ``columns`` columns at a pitch of a row
    (one element of each per row) — the column walk of a product's row form, re-read by every
    work-group: when the matrix does not fit in a cache, each group reads it from memory."""
    pitch = width * columns
    loads = "".join(f"        acc += x[k * {pitch} + {c * width} + lane];\n"
                    for c in range(columns))
    return ("__kernel void calib_colwalk(__global const float *x, __global float *y, "
            "const int rows)\n{\n    const int lane = get_local_id(0);\n"
            "    float acc = 0.0f;\n    for (int k = 0; k < rows; ++k) {\n" + loads +
            "    }\n    y[get_global_id(0)] = acc;\n}\n")


def _guard_source(width: int) -> str:
    """Kernel ``calib_guard``: ``y = x + 1`` over rows of ``width`` floats, on a grid padded
    to whole work-groups along dimension 0 and guarded (``if (i0 < width)``), as an
    element-wise kernel over an image-like tensor of 28 or 56 columns is."""
    return ("__kernel void calib_guard(__global const float *x, __global float *y)\n{\n"
            "    const int i0 = get_global_id(0);\n    const int i1 = get_global_id(1);\n"
            f"    if (i0 < {width})\n        y[i1 * {width} + i0] = x[i1 * {width} + i0] + 1.0f;\n"
            "}\n")


def _reuse_source(table: int) -> str:
    """Kernel ``calib_reuse``: ``y[i] = x[i] + t[i % table]`` — a small table re-read by every
    work-group (access-to-footprint ratio n/table), next to a streaming load and store."""
    return ("__kernel void calib_reuse(__global const float *x, __global const float *t, "
            "__global float *y)\n{\n    const int i = get_global_id(0);\n"
            f"    y[i] = x[i] + t[i % {table}];\n}}\n")


def _idiv_source(steps: int) -> str:
    """Kernel ``calib_idiv``: ``y[i] = x[i] + (float)(...)`` of an index split ``steps`` times
    by run-time divisors ``d0``/``d1`` into a quotient and a remainder (``2 * steps`` integer
    divisions per work-item) — how a kernel recovers a row and a column from a flat id."""
    lines, q = [], "i"
    for k in range(steps):
        d = f"d{k % 2}"
        lines.append(f"    const int q{k} = {q} / {d};\n    const int r{k} = {q} % {d};\n")
        q = f"q{k}"
    total = " + ".join([q] + [f"r{k}" for k in range(steps)])
    return ("__kernel void calib_idiv(__global const float *x, __global float *y, "
            "const int d0, const int d1)\n{\n    const int i = get_global_id(0);\n" +
            "".join(lines) + f"    y[i] = x[i] + (float)({total});\n}}\n")


def _barrier_source(local_size: int, with_barriers: bool) -> str:
    """Kernel ``calib_barrier``: ``iters`` rounds of a neighbour exchange through ``__local``
    memory, two barriers per round (read phase, write phase) — the shape of a tree reduction,
    unlike back-to-back barriers with nothing between them, which a compiler may merge.
    ``with_barriers`` False: the same local traffic on the work-item's own element, no barrier
    (the baseline that separates barrier cost from local-access cost)."""
    ls = local_size
    if with_barriers:
        body = (f"        const float v = s[(lid + 1) % {ls}];\n"
                "        barrier(CLK_LOCAL_MEM_FENCE);\n"
                "        s[lid] = 0.5f * (v + s[lid]);\n"
                "        barrier(CLK_LOCAL_MEM_FENCE);\n")
    else:
        body = ("        const float v = s[lid];\n"
                "        s[lid] = 0.5f * (v + s[lid]);\n")
    name = "calib_barrier" if with_barriers else "calib_nobarrier"
    return (f"__kernel void {name}(__global const float *x, __global float *out, "
            "const int iters)\n{\n"
            f"    __local float s[{ls}];\n"
            "    const int lid = get_local_id(0);\n"
            "    s[lid] = x[get_global_id(0)];\n"
            "    barrier(CLK_LOCAL_MEM_FENCE);\n"
            "    for (int it = 0; it < iters; ++it) {\n" + body + "    }\n"
            "    out[get_global_id(0)] = s[lid];\n}\n")


def _tree_source(lanes: int) -> str:
    """Kernel ``calib_tree``: one element per work-item summed over its work-group of ``lanes``
    by a tree in ``__local`` memory, unrolled, each level a guarded step and a barrier (the
    shape of a row reduction's last step); work-item 0 stores the group's sum."""
    lines = ["    red[lane] = x[get_global_id(0)];\n", "    barrier(CLK_LOCAL_MEM_FENCE);\n"]
    s = lanes // 2
    while s >= 1:
        lines += [f"    if (lane < {s}) red[lane] = red[lane] + red[lane + {s}];\n",
                  "    barrier(CLK_LOCAL_MEM_FENCE);\n"]
        s //= 2
    return ("__kernel void calib_tree(__global const float *x, __global float *out)\n{\n"
            f"    __local float red[{lanes}];\n"
            "    const int lane = get_local_id(0);\n" + "".join(lines) +
            "    if (lane == 0) out[get_group_id(0)] = red[0];\n}\n")


def _stream_source(n_in: int, n_out: int) -> str:
    """Kernel ``calib_stream``: one element per work-item, ``n_in`` unit-stride loads summed into
    ``n_out`` unit-stride stores — the access shape of oplib's element-wise kernels (a loop of
    loads and stores per work-item would defeat PoCL's vectorization across work-items, and
    then measures something no element-wise kernel does)."""
    ins = ", ".join(f"__global const float *x{k}" for k in range(n_in))
    outs = ", ".join(f"__global float *y{k}" for k in range(n_out))
    total = " + ".join(f"x{k}[i]" for k in range(n_in))
    body = "".join(f"    y{k}[i] = s{' + 1.0f' * min(k, 1)};\n" for k in range(n_out))
    return (f"__kernel void calib_stream({ins}, {outs})\n{{\n"
            "    const int i = get_global_id(0);\n"
            f"    const float s = {total};\n" + body + "}\n")


def calibration_kernels(quick: bool = False, *, local_size: int = 64,
                        max_group: int = 256, scale: int = 1) -> list[CalibrationKernel]:
    """The calibration set: generated micro-benchmarks at several sizes.

    Generated here: ``calib_stream`` (1-3 unit-stride input arrays, 1-2 outputs, 16 Ki to
    2 Mi elements, two group sizes), ``calib_stream2d`` (8×8 work-groups over an image-like
    grid, :func:`_stream2d_source`), ``calib_gather`` / ``calib_bcast`` (straight-line strided
    and shared loads, :func:`_gather_source`, :func:`_broadcast_source`), ``calib_fma``,
    ``calib_simple``, ``calib_exp``,
    ``calib_div`` (straight-line op chains) and ``calib_fma_loop`` (an op chain in a loop), see
    :func:`_chain_source`; ``calib_idiv`` (integer division by run-time divisors,
    :func:`_idiv_source`); ``calib_loop`` / ``calib_gloop`` (loads and a reduction in a
    work-item loop, without and with a bounds test, :func:`_loop_source`); ``calib_nest`` (a
    three-deep work-item loop nest, :func:`_nested_loop_source`); ``calib_tile`` (the
    tile loop of a tiled product, :func:`_tile_loop_source`); ``calib_rowloop`` (a row
    reduction, :func:`_row_loop_source`); ``calib_reuse`` (a re-read table,
    :func:`_reuse_source`); ``calib_barrier`` / ``calib_nobarrier`` (:func:`_barrier_source`;
    the exchange in groups of 16 and 256 too); ``calib_tree`` (a tree sum over groups of 16
    and 128, :func:`_tree_source`);
    ``calib_colwalk`` (a 3 or 12 MiB matrix walked column by column by every work-group,
    :func:`_column_walk_source`); ``calib_guard`` (an element-wise kernel over rows of 28 or 56
    floats on a grid padded to whole groups, :func:`_guard_source`); ``calib_block`` (register
    blocks of product shapes against packed panels, :func:`_register_block_source`);
    ``calib_rowblock`` (element-wise blocks walked along their rows,
    :func:`_row_block_source`); ``calib_rowpass`` (one work-item per row, two passes over it,
    :func:`_row_pass_source`).  Streams, 2-D streams,
    guarded rows and one gather, broadcast, loop and re-read table also run ``warm``: right
    after a launch of their own, their data in the last-level cache.  From
    :mod:`polyfuse.perf.microbench`: ``empty`` (launch and per-group overhead at 1 to
    16 Ki groups of two sizes) and ``strided`` (loads in a loop at lid strides 1, 4, 16 and
    0 = uniform).  Row pitches are those of tensor shapes, not powers of two.
    None of them is an oplib kernel or an example kernel (:data:`CALIBRATION_KERNELS`).

    ``scale`` (a power of two) multiplies the work-items (or rows, or work-groups) of every
    launch but the ``empty`` ones, which measure overheads; the list has the same launches in
    the same order at every scale, labelled ``×scale`` (:func:`sized_calibration_kernels`
    picks a scale per launch on a device where today's sizes run too short).
    """
    from polyfuse.perf import microbench as mb

    ls = local_size
    s = int(scale)
    if s < 1 or s & (s - 1):
        raise ValueError(f"scale must be a power of two, got {scale}")
    tag = f" x{s}" if s > 1 else ""
    out: list[CalibrationKernel] = []

    def add(label: str, source: str, kernel: str, items: int, args: list[Arg],
            values: Mapping[str, int], local: Optional[int] = None, warm: bool = False) -> None:
        lsz = local or ls
        out.append(CalibrationKernel(label + (" warm" if warm else "") +
                                     (tag if kernel != "empty" else ""), source,
                                     kernel, (items,), (lsz,), tuple(args),
                                     tuple(sorted(values.items())), warm))

    buf = lambda n: Arg("buffer", int(n))  # noqa: E731
    ival = lambda n: Arg("int", int(n))  # noqa: E731

    empty = mb.EMPTY_SOURCE
    for groups in ((1, 256, 4096) if quick else (1, 16, 256, 1024, 4096, 16384)):
        add(f"empty g={groups}", empty, "empty", groups * ls, [buf(64)], {})
    add("empty 1 item", empty, "empty", 1, [buf(64)], {}, local=1)
    big = 4 * ls if ls * 4 <= max_group else ls
    for groups in ((64,) if quick else (64, 1024)):
        add(f"empty g={groups} l={big}", empty, "empty", groups * big, [buf(64)], {},
            local=big)

    shapes = ((1, 1), (3, 1)) if quick else ((1, 1), (2, 1), (3, 1), (1, 2))
    sizes = (1 << 15, 1 << 19) if quick else (1 << 14, 1 << 17, 1 << 19, 1 << 21)
    for n_in, n_out in shapes:
        src = _stream_source(n_in, n_out)
        for n in sizes:
            # two group sizes, so per-group overhead and per-byte cost can be told apart
            for lsz in ((ls,) if (n_in, n_out) != (1, 1) else (ls, big)):
                add(f"stream {n_in}->{n_out} n={n} l={lsz}", src, "calib_stream", n * s,
                    [buf(4 * n * s)] * (n_in + n_out), {}, local=lsz)

    # the same streams over data the launch before left in the last-level cache (run right
    # after a launch of their own), as a launch finds what the one before it wrote
    # (1->1 from 1 to 16 MiB: how much of the last-level cache a launch gets)
    warm_sizes = (1 << 19, 1 << 21) if quick else (1 << 17, 1 << 19, 1 << 20, 3 << 19, 1 << 21)
    for n_in, n_out in ((1, 1), (3, 1)):
        src = _stream_source(n_in, n_out)
        for n in warm_sizes if n_in == 1 else warm_sizes[:2]:
            add(f"stream {n_in}->{n_out} n={n}", src, "calib_stream", n * s,
                [buf(4 * n * s)] * (n_in + n_out), {}, warm=True)

    s2 = _stream2d_source()
    for w, h in (((56, 1792),) if quick else ((56, 448), (56, 3584), (112, 7168))):
        for warm in (False, True):
            if 64 <= max_group:
                out.append(CalibrationKernel(
                    f"stream2d {w}x{h} l=8x8{' warm' if warm else ''}{tag}", s2,
                    "calib_stream2d", (w, h * s), (8, 8),
                    (buf(4 * w * h * s), buf(4 * w * h * s)), (), warm=warm))

    for width, rows in (((28, 1792),) if quick else ((28, 1792), (56, 3584))):
        for warm in (False, True):
            if 64 <= max_group:
                gx = -(-width // 32) * 32
                out.append(CalibrationKernel(
                    f"calib_guard {width}x{rows}{' warm' if warm else ''}{tag}",
                    _guard_source(width), "calib_guard", (gx, rows * s), (32, 2),
                    (buf(4 * width * rows * s), buf(4 * width * rows * s)), (), warm=warm))

    # (the last of each shape warm too: its data left in the cache by the launch before)
    gathers = ((64, 256),) if quick else ((64, 64), (64, 1024), (256, 2048))
    # (and one of 8 MiB: gathers beyond every cache size of CACHE_GRID, or a fit that picks
    # a large one charges a strided byte beyond it whatever the few launches there allow)
    for k, (rows, cols) in enumerate(gathers + gathers[-1:] + (() if quick else ((512, 2048),))):
        n = rows * cols * s
        add(f"calib_gather {rows}x{cols}", _gather_source(rows, cols * s), "calib_gather", n,
            [buf(4 * n), buf(4 * n)], {}, warm=k == len(gathers))
    bcasts = ((64, 1 << 16),) if quick else ((64, 4096), (128, 1 << 16), (64, 1 << 19))
    for k, (run, n) in enumerate(bcasts + bcasts[-1:]):
        add(f"calib_bcast run={run} n={n}", _broadcast_source(run), "calib_bcast", n * s,
            [buf(4 * n * s), buf(4 * (n * s // run)), buf(4 * n * s)], {},
            warm=k == len(bcasts))

    items = 8192 * s
    for op in ("fma", "simple", "exp", "div"):
        # not 2 steps of exp: PoCL 3.1 leaves that chain scalar (4.5 ns an exp against 0.7
        # at 1, 3, 4, 8 or 16 steps), which no operator kernel does
        for steps in ((8,) if quick else ((3, 16) if op == "exp" else (2, 16))):
            add(f"calib_{op} steps={steps}", _chain_source(op, steps), f"calib_{op}", items,
                [buf(4 * items), buf(4 * items)], {})
    for iters in ((16,) if quick else (4, 32)):
        add(f"calib_fma_loop iters={iters}", _chain_source("fma"), "calib_fma_loop", items,
            [buf(4 * items), buf(4 * items), ival(iters)], {"iters": iters})
    # divisors of tensor shapes (a row of 768, a plane of 56·56), given at run time
    for steps, n in (((2, 1 << 18),) if quick else ((1, 1 << 16), (3, 1 << 19))):
        add(f"calib_idiv steps={steps} n={n}", _idiv_source(steps), "calib_idiv", n * s,
            [buf(4 * n * s), buf(4 * n * s), ival(768), ival(3136)], {"d0": 768, "d1": 3136})

    lp = _loop_source()
    # row pitches of tensor shapes (56·56, 28·28·4, 768·4 floats): a column walk at a
    # power-of-two pitch instead maps every access of a work-item to one cache set, a cost
    # 5-15x higher on a CPU that the features do not describe
    loops = ((32, 3136),) if quick else ((64, 3136), (256, 3136))
    for k, (rows, n) in enumerate(loops + loops[:1]):
        add(f"calib_loop rows={rows} n={n}", lp, "calib_loop", n * s,
            [buf(4 * rows * n * s), buf(4 * rows), buf(4 * n * s), ival(rows)], {"rows": rows},
            warm=k == len(loops))
    gp = _guarded_loop_source()
    for rows, n in (((128, 3072),) if quick else ((9, 12544), (64, 3136), (128, 3072))):
        m = n * s
        add(f"calib_gloop rows={rows} n={n}", gp, "calib_gloop", m,
            [buf(4 * rows * m), buf(4 * rows), buf(4 * m), ival(rows), ival(m + rows)],
            {"rows": rows, "bound": m + rows})

    for outer, a, b, n in (((16, 3, 3, 3136),) if quick else
                           ((16, 3, 3, 3136), (96, 1, 1, 3136), (8, 5, 5, 12544))):
        m = n * s
        plane = m + 64  # the planes' pitch, past the last window
        add(f"calib_nest {outer}x{a}x{b} n={n}", _nested_loop_source(outer, a, b),
            "calib_nest", m, [buf(4 * (outer * plane + a * b + 64)), buf(4 * outer * a * b),
                              buf(4 * m), ival(plane)], {"plane": plane})

    for tile, rounds, gx, gy in (((16, 16, 256, 64),) if quick else
                                 ((16, 8, 512, 64), (16, 32, 192, 64), (8, 32, 256, 64))):
        if tile * tile > max_group:
            continue
        gx *= s
        pitch = max(gx, rounds * tile) + 48  # a row pitch that is no multiple of a cache way
        rows = max(gy, rounds * tile)
        out.append(CalibrationKernel(
            f"calib_tile {tile}x{tile} rounds={rounds} {gx // s}x{gy}{tag}",
            _tile_loop_source(tile), "calib_tile", (gx, gy), (tile, tile),
            (buf(4 * rows * pitch), buf(4 * gx * gy), ival(rounds), ival(pitch)),
            (("pitch", pitch), ("rounds", rounds))))

    for rows, cols in (((512, 256),) if quick else ((1024, 128), (192, 768), (64, 3072))):
        r = rows * s
        add(f"calib_rowloop {rows}x{cols}", _row_loop_source(ls), "calib_rowloop", r * ls,
            [buf(4 * r * cols), buf(4 * r), ival(cols)], {"cols": cols})

    reuses = ((256, 1 << 18),) if quick else ((256, 1 << 16), (4096, 1 << 19))
    for k, (table, n) in enumerate(reuses + reuses[-1:]):
        add(f"calib_reuse t={table} n={n}", _reuse_source(table), "calib_reuse", n * s,
            [buf(4 * n * s), buf(4 * table), buf(4 * n * s)], {}, warm=k == len(reuses))

    # register blocks of a product's shapes: rows of x against a packed panel of w, the
    # panels 0.4-2.4 MiB in all (depth 192-768: a model's hidden sizes)
    for rows, cols, depth, m, panels in (((4, 32, 384, 64, 8),) if quick else
                                         ((4, 32, 768, 64, 24), (4, 32, 192, 128, 16),
                                          (2, 16, 768, 64, 8), (4, 8, 384, 128, 8),
                                          (8, 8, 768, 128, 8))):
        mr = m * s
        if 16 <= max_group:
            out.append(CalibrationKernel(
                f"calib_block {rows}x{cols} depth={depth} {mr // s}x{panels}{tag}",
                _register_block_source(rows, cols, depth), "calib_block",
                (mr // rows, panels), (16, 1),
                (buf(4 * mr * depth), buf(4 * panels * depth * cols),
                 buf(4 * mr * panels * cols)), ()))
    # the same in OpenCL vectors, as the blocked product on a device with float vectors
    for rows, vectors, width, depth, m, panels in (((8, 2, 16, 384, 128, 8),) if quick else
                                                   ((8, 2, 16, 768, 128, 24),
                                                    (8, 2, 16, 192, 256, 16),
                                                    (4, 2, 8, 768, 64, 16),
                                                    (8, 1, 16, 384, 128, 8))):
        mr, cols = m * s, vectors * width
        if 16 <= max_group:
            out.append(CalibrationKernel(
                f"calib_vblock {rows}x{vectors}x{width} depth={depth} {mr // s}x{panels}{tag}",
                _vector_block_source(rows, vectors, width, depth), "calib_vblock",
                (mr // rows, panels), (16, 1),
                (buf(4 * mr * depth), buf(4 * panels * depth * cols),
                 buf(4 * mr * panels * cols)), ()))

    # element-wise blocks walked along rows by each work-item: 0.4 to 6 MiB a matrix (the
    # middle one warm too)
    blocks = ((128, 768),) if quick else ((128, 768), (128, 3072), (512, 3072), (128, 3072))
    for k, (rows, width) in enumerate(blocks):
        r = rows * s
        if 16 <= max_group:
            out.append(CalibrationKernel(
                f"calib_rowblock {rows}x{width}{' warm' if k == 3 else ''}{tag}",
                _row_block_source(4, 32, width), "calib_rowblock", (r // 4, width // 32),
                (16, 1), (buf(4 * r * width), buf(4 * width), buf(4 * r * width)), (),
                warm=k == 3))

    # one work-item per row, two passes over it (rows of a model's hidden sizes, 0.4-6 MiB;
    # the second shape again, warm)
    rowpasses = ((256, 768),) if quick else ((128, 768), (1536, 128), (512, 3072), (1536, 128))
    for k, (rows, cols) in enumerate(rowpasses):
        r = rows * s
        add(f"calib_rowpass {rows}x{cols}", _row_pass_source(cols), "calib_rowpass", r,
            [buf(4 * r * cols), buf(4 * r * cols)], {}, local=min(64, rows),
            warm=k == 3)

    # a matrix 3 and 12 MiB large (768 floats a row), re-read by every work-group
    width = min(128, max_group)
    cw = _column_walk_source(width, 768 // width)
    for rows, groups in (((4096, 4),) if quick else ((1024, 8), (4096, 8))):
        g = groups * s
        add(f"calib_colwalk rows={rows} groups={groups}", cw, "calib_colwalk", g * width,
            [buf(4 * rows * 768), buf(4 * g * width), ival(rows)], {"rows": rows},
            local=width)

    groups = 64 * s
    for bar in (True, False):
        src = _barrier_source(ls, bar)
        for iters in ((16,) if quick else (4, 32)):
            name = "calib_barrier" if bar else "calib_nobarrier"
            add(f"{name} iters={iters}", src, name, groups * ls,
                [buf(4 * groups * ls), buf(4 * groups * ls), ival(iters)], {"iters": iters})
    # the same exchange (4096 work-items) in groups of one vector and of the largest size: a
    # barrier costs a pass over the group's work-items, next to nothing in a group of 16
    for lsz in ((16,) if quick else (16, max_group)):
        src = _barrier_source(lsz, True)
        for iters in ((16,) if quick else (4, 32)):
            add(f"calib_barrier l={lsz} iters={iters}", src, "calib_barrier", groups * ls,
                [buf(4 * groups * ls), buf(4 * groups * ls), ival(iters)], {"iters": iters},
                local=lsz)
    # a tree sum over each group of 16 and of 128 work-items (64 Ki of them)
    for lanes in (16, min(128, max_group)):
        n = (1 << 16) * s
        add(f"calib_tree l={lanes}", _tree_source(lanes), "calib_tree", n,
            [buf(4 * n), buf(4 * (n // lanes))], {}, local=lanes)

    sgroups = 64 * s
    loads = 16 if quick else 32
    for lstride in ((1, 16, 0) if quick else (1, 4, 16, 0)):
        gstride = ls * lstride if lstride else 1
        span = (sgroups - 1) * gstride + (ls - 1) * lstride + 1
        add(f"strided l={lstride}", mb.STRIDED_SOURCE, "strided", sgroups * ls,
            [buf(4 * span * loads), buf(4 * sgroups * ls), ival(lstride), ival(gstride),
             ival(span), ival(loads)],
            {"lstride": lstride, "gstride": gstride, "span": span, "loads": loads})
    return out


#: Kernel names of the calibration set (what the accuracy study must not evaluate on).
CALIBRATION_KERNELS = ("empty", "calib_stream", "calib_stream2d", "calib_gather", "calib_bcast",
                       "calib_fma", "calib_fma_loop", "calib_idiv", "calib_colwalk",
                       "calib_block", "calib_vblock", "calib_rowblock", "calib_rowpass",
                       "calib_guard",
                       "calib_simple", "calib_exp", "calib_div", "calib_loop", "calib_gloop",
                       "calib_nest",
                       "calib_tile", "calib_rowloop", "calib_reuse", "calib_barrier",
                       "calib_nobarrier", "calib_tree", "strided")


def _pad3(t: Sequence[int]) -> tuple[Optional[int], Optional[int], Optional[int]]:
    v = [int(x) for x in t] + [None] * (3 - len(t))  # type: ignore[list-item]
    return (v[0], v[1], v[2])


def specialize_kernel(kernel: Kernel, global_size: Sequence[int],
                      local_size: Optional[Sequence[int]] = None,
                      values: Optional[Mapping[str, int]] = None) -> Kernel:
    """``kernel`` re-extracted with its launch geometry and scalar arguments known.

    Counting a specialized kernel gives plain numbers (and exact strides: with a known local
    size ``get_global_id`` is affine in the group and local ids).
    """
    from polyfuse.frontend.opencl import specialize

    scalars = {p.name for p in kernel.params if not p.pointer}
    vals = tuple(sorted((k, int(v)) for k, v in (values or {}).items() if k in scalars))
    ctx = KernelContext(_pad3(local_size) if local_size is not None else (None, None, None),
                        _pad3(global_size), vals)
    return specialize(kernel, ctx)


def count_calibration_kernel(ck: CalibrationKernel, subgroup_size: Optional[int] = None
                             ) -> KernelCounts:
    """Counts of one calibration launch, from the same source it runs."""
    from polyfuse.frontend.opencl import parse_kernels

    kernel = parse_kernels(ck.source)[ck.kernel]
    kernel = specialize_kernel(kernel, ck.global_size, ck.local_size, dict(ck.values))
    return count_kernel(kernel, subgroup_size=subgroup_size)


def _calibration_check(ck: CalibrationKernel) -> Any:
    """The precheck of one calibration kernel (its source, built and asked for binaries)."""
    from polyfuse.runtime.device import Check

    return Check(ck.source, key=ck.kernel)


def calibration_warm_shares(counts: KernelCounts, llc_bytes: int) -> dict[str, float]:
    """Warm shares of a calibration launch run right after a launch of its own: every array,
    as far as the launch's footprint fits in the last-level cache."""
    total = footprint_bytes(counts) / _instances(counts)
    share = min(1.0, llc_bytes / total) if total > 0 else 1.0
    return dict.fromkeys(array_bytes(counts), share)


#: calibration launches shorter than this are measured warm (:func:`measure_calibration`)
TINY_LAUNCH_S = 20e-6
#: the launches of a tiny calibration launch a round's sample is the median of (after as
#: many unrecorded), each after one of another tiny kernel
TINY_RUNS = 9


def measure_calibration(kernels: Sequence[CalibrationKernel], queue: Any, repeat: int,
                        progress: Progress = None) -> list[Optional[list[float]]]:
    """Profiled seconds of every calibration launch, ``repeat`` samples each, interleaved.

    Every kernel is built and its buffers filled (with 0.25) first; then each of ``repeat``
    rounds launches every kernel once, so a burst of load from other jobs on a shared machine
    hits every sample of a round alike instead of a few kernels entirely, and each launch
    finds the caches holding what other kernels touched, not its own data (cold), except
    launches under :data:`TINY_LAUNCH_S` (mostly launch overhead, paid back to back in a
    program) and the ``warm`` ones (a consumer of the data its producer just touched): those
    run right after an untimed launch of their own (a tiny one after :data:`TINY_RUNS`, its
    round's sample the median of as many more, each right after a launch of another tiny
    kernel, as a program's launches follow other kernels').  On a device that runs kernels in the
    calling thread (PoCL ``basic``) the samples are that thread's CPU seconds, which other
    jobs' load does not inflate (:func:`~polyfuse.runtime.device.runs_in_calling_thread`).
    A kernel the device compiler rejects or crashes on (checked in a worker first,
    :func:`polyfuse.runtime.device.precheck`) gets None.
    """
    import pyopencl as cl

    from polyfuse.runtime.device import build_program, precheck, runs_in_calling_thread, time_kernel

    say = progress or (lambda _m: None)
    ctx = queue.context
    why = precheck(queue.device, [_calibration_check(ck) for ck in kernels])
    built: list[Optional[tuple[Any, CalibrationKernel]]] = []
    keep: list[Any] = []  # the buffers, alive until the last round
    for ck, reason in zip(kernels, why):
        if reason is not None:
            say(f"calibrate: {ck.label}: skipped ({reason})")
            built.append(None)
            continue
        # a kernel object of its own: the launches of one source differ in their arguments,
        # set once here (build_kernel's shared object would keep only the last ones)
        kernel = cl.Kernel(build_program(ctx, ck.source), ck.kernel)
        args: list[Any] = []
        for a in ck.args:
            if a.kind == "buffer":
                b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, int(a.value))
                cl.enqueue_fill_buffer(queue, b, np.float32(0.25), 0, int(a.value)).wait()
                args.append(b)
            elif a.kind == "int":
                args.append(np.int32(a.value))
            else:
                args.append(np.float32(a.value))
        kernel.set_args(*args)
        keep.append(args)
        built.append((kernel, ck))
    samples: list[list[float]] = [[] for _ in kernels]
    cpu = runs_in_calling_thread(queue.device)
    for r in range(repeat):
        say(f"calibrate: round {r + 1}/{repeat} of {len(kernels)} micro-benchmarks")
        for i, item in enumerate(built):
            if item is None:
                continue
            kernel, ck = item
            # a launch of a few microseconds is mostly launch overhead, which in a program is
            # paid back to back: such a one (by its first sample, warm) is launched after
            # launches of its own, and its sample is the median of TINY_RUNS more (one launch
            # of a microsecond on PoCL pthread measured 0.3 to 1.5 us from round to round: the
            # workers' wake-up, not the launch)
            tiny = bool(samples[i]) and samples[i][0] < TINY_LAUNCH_S
            if not tiny:
                res = time_kernel(queue, kernel, ck.global_size, ck.local_size, None,
                                  repeat=1, warmup=1 if (r == 0 or ck.warm) else 0,
                                  thread_time=cpu)
                samples[i].append(res.samples[0])
                continue
            # in a program the launch before is another kernel's: each timed launch follows
            # one of another tiny kernel (untimed)
            other = next((b for j, b in enumerate(built) if b is not None and j != i
                          and samples[j] and samples[j][0] < TINY_LAUNCH_S), None)
            runs = []
            for _ in range(2 * TINY_RUNS):
                if other is not None:
                    time_kernel(queue, other[0], other[1].global_size, other[1].local_size,
                                None, repeat=1, warmup=0, thread_time=cpu)
                runs.extend(time_kernel(queue, kernel, ck.global_size, ck.local_size, None,
                                        repeat=1, warmup=0, thread_time=cpu).samples)
            samples[i].append(float(np.median(runs[TINY_RUNS:])))
    return [s if built[i] is not None else None for i, s in enumerate(samples)]


#: the shortest calibration launch :func:`calibrate` wants on a GPU: launches of a few
#: microseconds measure the launch overhead and the timer's resolution, not the costs
GPU_MIN_LAUNCH_S = 100e-6
#: the largest scale :func:`sized_calibration_kernels` grows a launch to
MAX_CALIBRATION_SCALE = 1 << 12


def _fits(ck: CalibrationKernel, budget: int, max_alloc: int) -> bool:
    """Whether a launch's buffers fit the device (each within one allocation and an int32
    index, all within ``budget``) and its work-items an int32 index."""
    sizes = [int(a.value) for a in ck.args if a.kind == "buffer"]
    return (sum(sizes) <= budget and all(b <= min(max_alloc, 1 << 31) for b in sizes)
            and math.prod(ck.global_size) < (1 << 31))


def sized_calibration_kernels(queue: Any, quick: bool = False, *, local_size: int = 64,
                              max_group: int = 256, min_launch_s: float = 0.0,
                              max_scale: int = MAX_CALIBRATION_SCALE,
                              progress: Progress = None) -> list[CalibrationKernel]:
    """:func:`calibration_kernels`, each launch but the overhead ones (``empty``) grown until
    one measured launch takes at least ``min_launch_s`` on ``queue``'s device.

    A launch shorter than that is generated again at a power-of-two ``scale`` of the ratio
    (at most 64x a step, so a launch dominated by its overhead does not jump past the cap),
    and measured again, until it is long enough, its buffers would not fit (one allocation
    each, and its share of half the device's memory: every launch's buffers are alive at once
    while the set is measured) or the scale reaches ``max_scale``.  Every launch
    picks its own scale: a device's time per byte and per op differ by orders of magnitude.
    ``min_launch_s`` 0 keeps today's sizes and measures nothing.
    """
    from polyfuse.runtime.device import DeviceLimits

    def at(scale: int) -> list[CalibrationKernel]:
        return calibration_kernels(quick, local_size=local_size, max_group=max_group,
                                   scale=scale)

    chosen = at(1)
    if min_launch_s <= 0:
        return chosen
    say = progress or (lambda _m: None)
    lim = DeviceLimits.from_device(queue.device)
    budget = lim.global_mem_size // 2 // len(chosen)
    scale = [1] * len(chosen)
    todo = [i for i, ck in enumerate(chosen) if ck.kernel != "empty"]
    generated: dict[int, list[CalibrationKernel]] = {1: chosen}
    while todo:
        times = measure_calibration([chosen[i] for i in todo], queue, 1)
        grow: list[int] = []
        for i, ts in zip(todo, times):
            if ts is None:
                continue
            t = float(np.median(ts))
            if t >= min_launch_s or scale[i] >= max_scale:
                continue
            step = 1 << max(1, math.ceil(math.log2(min_launch_s / max(t, 1e-9))))
            new = min(max_scale, scale[i] * min(64, step))
            while new > scale[i]:
                if new not in generated:
                    generated[new] = at(new)
                if _fits(generated[new][i], budget, lim.max_mem_alloc_size):
                    break
                new //= 2
            if new > scale[i]:
                say(f"calibrate: {chosen[i].label} ran {t * 1e6:.1f} us: x{new}")
                scale[i] = new
                chosen[i] = generated[new][i]
                grow.append(i)
        todo = grow
    return chosen


# ----------------------------------------------------------------------------------------------
# Calibration record
# ----------------------------------------------------------------------------------------------


def default_model_dir() -> Path:
    """``$POLYFUSE_CACHE/model`` when set, else ``~/.cache/polyfuse/model``.

    Same root convention as the autotuner's cache (``POLYFUSE_CACHE`` names the polyfuse cache
    root shared by several caches).
    """
    root = os.environ.get("POLYFUSE_CACHE")
    if root:
        return Path(root).expanduser() / "model"
    return Path("~/.cache/polyfuse/model").expanduser()


def calibration_key(device: Any) -> str:
    """File-name-safe key of a device's calibration: its name and a digest of
    :func:`~polyfuse.runtime.device.stable_device_key` (platform, platform version, device,
    driver version).  Not the memory sizes: PoCL reports the host's free memory as global
    memory, which changes from one process to the next, and a calibration keyed on it would be
    measured again every time."""
    from polyfuse.runtime.device import stable_device_key

    dev = device if hasattr(device, "driver_version") else _device_of(device)
    stable = stable_device_key(dev)
    digest = hashlib.sha1(stable.encode()).hexdigest()[:12]
    slug = re.sub(r"[^a-z0-9]+", "-", dev.name.strip().lower()).strip("-")[:40]
    return f"{slug}-{digest}"


#: how each feature's cost reads in the JSON: (unit, scale) with readable = scale / cost
#: for rates, scale * cost for durations
_READABLE = {
    "flop_simple": ("Gop/s", 1e-9, "rate"), "flop_fma": ("Gfma/s", 1e-9, "rate"),
    "flop_div": ("Gop/s", 1e-9, "rate"), "flop_special": ("Gop/s", 1e-9, "rate"),
    "int_divmod": ("G int div/s", 1e-9, "rate"),
    "local_access": ("G accesses/s", 1e-9, "rate"),
    "loop_accesses": ("G accesses/s", 1e-9, "rate"),
    "sync_loop_accesses": ("G accesses/s", 1e-9, "rate"),
    "nested_loop_accesses": ("G accesses/s", 1e-9, "rate"),
    "loop_flops": ("G loop ops/s", 1e-9, "rate"),
    "block_flops": ("G register-block ops/s", 1e-9, "rate"),
    "vector_block_flops": ("G vector-block ops/s", 1e-9, "rate"),
    "block_accesses": ("G register-block accesses/s", 1e-9, "rate"),
    "block_iterations": ("ns per register-block iteration", 1e9, "time"),
    "contiguous_loop_accesses": ("G accesses/s", 1e-9, "rate"),
    "work_items": ("ns per work-item", 1e9, "time"),
    "guarded_work_items": ("ns per work-item", 1e9, "time"),
    "launches": ("us per launch", 1e6, "time"),
    "group_barriers": ("ns per barrier and work-group", 1e9, "time"),
    "barrier_work_items": ("ns per barrier and work-item", 1e9, "time"),
    "work_groups": ("ns per work-group", 1e9, "time"),
}


def readable_cost(feature: str, cost: float) -> str:
    """A cost in the unit a person thinks in: GB/s for bytes, Gop/s for ops, us per launch."""
    unit, scale, kind = _READABLE.get(feature, ("GB/s", 1e-9, "rate"))
    if kind == "rate":
        return "not charged (0)" if cost <= 0 else f"{scale / cost:.4g} {unit}"
    return f"{scale * cost:.4g} {unit}"


@dataclass
class Calibration:
    """Fitted per-feature costs of one device (seconds per unit), the overlap exponent ``p``,
    and the measurements they were fitted to (with their residuals)."""

    device_key: str
    costs: dict[str, float]
    p: float
    subgroup_size: int
    device: str = ""
    quick: bool = False
    created: str = ""
    fit_rms_rel_error: float = 0.0
    #: one record per calibration launch: label, kernel, features, measured and fitted seconds,
    #: the spread (IQR / median) of the measured samples
    samples: list[dict[str, Any]] = field(default_factory=list)
    #: the stable device identity the key digests (platform, versions, device name)
    stable_key: str = ""
    #: calibration launches the device could not build or run, with the reason
    skipped: dict[str, str] = field(default_factory=dict)
    #: the cache size of ``gmem_beyond_cache_bytes`` (fitted from :data:`CACHE_GRID`)
    cache_bytes: int = DEFAULT_CACHE_BYTES
    #: the shortest launch the calibration grew its micro-benchmarks to (0: today's sizes;
    #: :func:`sized_calibration_kernels`)
    min_launch_s: float = 0.0
    #: the last-level cache of :func:`warm_shares` (of :data:`LLC_FRACTIONS`, the fitted one)
    llc_bytes: int = DEFAULT_LLC_BYTES
    #: the cache of ``gmem_reuse_beyond_bytes`` (fitted from :data:`REUSE_CACHE_GRID`)
    reuse_cache_bytes: int = DEFAULT_CACHE_BYTES

    @property
    def cost_vector(self) -> np.ndarray:
        return np.array([float(self.costs.get(f, 0.0)) for f in FEATURES])

    @property
    def calibration_kernels(self) -> list[str]:
        """Kernel names the costs were fitted on (exclude them when judging the model)."""
        return sorted({s["kernel"] for s in self.samples})

    @property
    def fit_geomean_error(self) -> float:
        """:func:`geomean_error` of the fitted against the measured calibration times."""
        return geomean_error([(s["fitted"], s["measured"]) for s in self.samples
                              if s.get("fitted")])

    def time(self, features: Features) -> float:
        """Predicted seconds of one feature vector."""
        return float(model_time(features.vector(), self.cost_vector, self.p)[0])

    def breakdown(self, features: Features) -> dict[str, float]:
        """The model's terms for ``features``: on-chip, memory, their smooth max, overheads."""
        x = features.vector()
        c = self.cost_vector
        on = float(x[_ON] @ c[_ON])
        mem = float(x[_MEM] @ c[_MEM])
        ov = float(smooth_max(np.array(on), np.array(mem), self.p))
        rest = {f: float(features.values.get(f, 0.0)) * self.costs.get(f, 0.0)
                for f in OVERHEAD_FEATURES}
        return {"on_chip": on, "memory": mem, "overlapped": ov, **rest,
                "total": ov + sum(rest.values())}

    def residuals(self) -> list[dict[str, Any]]:
        """Per calibration launch: measured and fitted seconds, ``fitted/measured - 1``."""
        return [{"label": s["label"], "measured_s": s["measured"], "fitted_s": s.get("fitted"),
                 "residual": (s["fitted"] / s["measured"] - 1.0) if s.get("fitted") else None,
                 "spread": s.get("spread")}
                for s in self.samples]

    def summary(self) -> str:
        """The fitted parameters in readable units and the fit's quality, for a person."""
        lines = [f"calibration of {self.device} (key {self.device_key}, {self.created})",
                 f"  overlap exponent p = {self.p:g} (1: on-chip and memory add up; large: the "
                 "slower hides the other)",
                 f"  cache size {self.cache_bytes >> 10} KiB (global bytes beyond it in a "
                 "launch's footprint: gmem_beyond_cache_bytes)",
                 f"  last-level cache {self.llc_bytes >> 20} MiB (bytes earlier launches left "
                 "there are not gmem_cold_bytes)",
                 f"  re-read cache {self.reuse_cache_bytes >> 10} KiB (re-reads by every group "
                 "of an array beyond it: gmem_reuse_beyond_bytes)"]
        if self.min_launch_s > 0:
            lines.append(f"  micro-benchmarks grown to run at least {self.min_launch_s * 1e6:g} us")
        for f in FEATURES:
            lines.append(f"  {f:24s} {readable_cost(f, self.costs.get(f, 0.0))}")
        worst = sorted(self.residuals(), key=lambda r: -abs(r["residual"] or 0.0))[:3]
        lines.append(f"  fit over {len(self.samples)} micro-benchmark launches: rms relative "
                     f"residual {self.fit_rms_rel_error:.1%}, geomean error "
                     f"{self.fit_geomean_error:.1%}; worst: " +
                     ", ".join(f"{r['label']} {r['residual']:+.0%}" for r in worst))
        for label, why in self.skipped.items():
            lines.append(f"  skipped {label}: {why}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "device_key": self.device_key, "device": self.device,
                "stable_key": self.stable_key, "created": self.created, "quick": self.quick,
                "p": self.p, "cache_bytes": self.cache_bytes, "min_launch_s": self.min_launch_s,
                "llc_bytes": self.llc_bytes, "reuse_cache_bytes": self.reuse_cache_bytes,
                "subgroup_size": self.subgroup_size, "features": list(FEATURES),
                "costs": {f: float(self.costs.get(f, 0.0)) for f in FEATURES},
                "parameters": {f: readable_cost(f, self.costs.get(f, 0.0)) for f in FEATURES},
                "fit_rms_rel_error": self.fit_rms_rel_error,
                "fit_geomean_error": (None if math.isnan(self.fit_geomean_error)
                                      else self.fit_geomean_error),
                "residuals": self.residuals(), "skipped": dict(self.skipped),
                "samples": self.samples}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Calibration:
        schema = str(d.get("schema", ""))
        if schema != SCHEMA and schema.startswith(SCHEMA.split("/")[0] + "/"):
            raise PolyfuseError(f"the calibration was made by another polyfuse (schema "
                                f"{schema!r}, this one reads {SCHEMA!r}): calibrate again")
        if schema != SCHEMA:
            raise PolyfuseError(f"not a polyfuse model calibration (schema {schema!r})")
        if list(d.get("features", FEATURES)) != list(FEATURES):
            raise PolyfuseError("the calibration was fitted on other features (an older "
                                "polyfuse): calibrate again")
        return cls(device_key=d["device_key"], costs={k: float(v) for k, v in d["costs"].items()},
                   p=float(d["p"]), subgroup_size=int(d["subgroup_size"]),
                   device=d.get("device", ""), quick=bool(d.get("quick", False)),
                   created=d.get("created", ""),
                   fit_rms_rel_error=float(d.get("fit_rms_rel_error", 0.0)),
                   samples=list(d.get("samples", [])), stable_key=d.get("stable_key", ""),
                   skipped=dict(d.get("skipped", {})),
                   cache_bytes=int(d.get("cache_bytes", DEFAULT_CACHE_BYTES)),
                   min_launch_s=float(d.get("min_launch_s", 0.0)),
                   llc_bytes=int(d.get("llc_bytes", DEFAULT_LLC_BYTES)),
                   reuse_cache_bytes=int(d.get("reuse_cache_bytes", DEFAULT_CACHE_BYTES)))

    @staticmethod
    def path_for(device_key: str, directory: Optional[Union[str, Path]] = None, *,
                 quick: bool = False) -> Path:
        """Where the calibration of ``device_key`` is cached; a quick one (the autotuner's
        pruning) beside it, under a name of its own, so that it never stands in for the
        full calibration that ranks kernel forms and weighs fused groups (fitted on a
        fifth of the launches, its sign on a close group is noise)."""
        name = f"{device_key}-quick" if quick else device_key
        return Path(directory or default_model_dir()) / f"{name}.json"

    @property
    def path(self) -> Path:
        """Where this calibration is (or would be) cached."""
        return self.path_for(self.device_key, quick=self.quick)

    def save(self, path: Optional[Union[str, Path]] = None) -> Path:
        """Write the JSON (default: :attr:`path`) and return its path."""
        out = Path(path) if path is not None else self.path
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        os.replace(tmp, out)  # atomic: a concurrent reader never sees half a file
        return out

    @classmethod
    def load(cls, device: Any = None, *, path: Optional[Union[str, Path]] = None,
             quick: bool = False) -> Calibration:
        """The cached calibration of ``device`` (default device; its quick one when
        ``quick``) or of the file ``path``.

        Raises :class:`FileNotFoundError` when there is none (:meth:`for_device` calibrates).
        """
        if path is None:
            path = cls.path_for(calibration_key(device), quick=quick)
        return cls.from_dict(json.loads(Path(path).read_text()))

    @classmethod
    def reference_cpu(cls) -> Calibration:
        """The calibration of the development machine's CPU (PoCL ``basic`` on a 2-core
        AVX-512 EPYC), shipped with polyfuse: what a session ranks its kernel forms with on
        a CPU device that has no calibration of its own.  The forms differ 3-5x on real-size
        models (blocked against tiled products), a ranking a CPU of another speed keeps, and
        a session does not calibrate (15-30 s).  Regenerate it after a change of
        :data:`FEATURES` (``tests/test_perf_model.py`` says when):
        ``python -c "from polyfuse.perf.model import *; calibrate('0:0').save(REFERENCE_CPU)"``
        with ``0:0`` a CPU device."""
        return cls.load(path=REFERENCE_CPU)

    @classmethod
    def for_device(cls, device: Any = None, *, quick: bool = False, recalibrate: bool = False,
                   progress: Progress = None) -> Calibration:
        """The cached calibration of ``device``, calibrating (and caching) when there is none,
        when the cached one is unreadable or from older features, or when ``recalibrate``.
        ``quick`` takes the full calibration where there is one, else the quick one."""
        if not recalibrate:
            for cached in ((False, True) if quick else (False,)):
                try:
                    return cls.load(device, quick=cached)
                except (FileNotFoundError, PolyfuseError, KeyError, ValueError):
                    pass
        cal = calibrate(device, quick=quick, progress=progress)
        cal.save()
        return cal


#: the shipped calibration :meth:`Calibration.reference_cpu` reads
REFERENCE_CPU = Path(__file__).with_name("reference_cpu_calibration.json")


def _device_of(device: Any) -> Any:
    """A ``cl.Device`` for a spec, a context, a queue or a device (None: the default one)."""
    import pyopencl as cl

    if isinstance(device, cl.CommandQueue):
        return device.device
    if isinstance(device, cl.Context):
        return device.devices[0]
    if isinstance(device, cl.Device):
        return device
    from polyfuse.runtime.device import get_device

    return get_device(device)


def calibrate(device: Any = None, *, quick: bool = False, progress: Progress = None,
              queue: Any = None, repeat: Optional[int] = None,
              p_grid: Sequence[float] = P_GRID,
              min_launch_s: Optional[float] = None) -> Calibration:
    """Measure the calibration set on ``device`` and fit the costs (module docstring).

    ``quick`` uses fewer sizes and repeats (~10 s on a 2-core PoCL CPU; the full set ~30 s).
    ``queue`` reuses a profiling queue.  ``min_launch_s``: every launch but the overhead ones
    is grown until it runs at least that long (:func:`sized_calibration_kernels`); default
    :data:`GPU_MIN_LAUNCH_S` on a GPU, nothing on a CPU, whose launches of today's sizes are
    timed to the microsecond (in thread CPU time on PoCL ``basic``) and whose short ones
    calibrate the short launches of real programs.  The result is not saved (see
    :meth:`Calibration.save`).
    """
    from polyfuse.perf.counts import default_subgroup_size
    from polyfuse.runtime.device import DeviceLimits, get_context, stable_device_key

    say = progress or (lambda _m: None)
    if queue is None:
        _, queue = get_context(_device_of(device) if device is not None else None)
    lim = DeviceLimits.from_device(queue.device)
    sg = lim.sub_group_size or lim.preferred_work_group_size_multiple or default_subgroup_size()
    repeat = repeat or (5 if quick else 11)
    t0 = time.perf_counter()
    if min_launch_s is None:
        min_launch_s = 0.0 if lim.is_cpu else GPU_MIN_LAUNCH_S
    kernels = sized_calibration_kernels(queue, quick, local_size=min(64, lim.max_work_group_size),
                                        max_group=min(256, lim.max_work_group_size),
                                        min_launch_s=min_launch_s, progress=progress)
    say(f"calibrate: counting {len(kernels)} micro-benchmark launches")
    counts = [count_calibration_kernel(ck, sg) for ck in kernels]
    measured = measure_calibration(kernels, queue, repeat, progress)
    kept: list[KernelCounts] = []
    warm_kept: list[bool] = []
    times: list[float] = []
    samples: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    for ck, kc, ts in zip(kernels, counts, measured):
        if ts is None:
            skipped[ck.label] = "the device compiler rejected or crashed on it"
            continue
        t = float(np.median(ts))
        if not t > 0:
            skipped[ck.label] = "no positive time measured"
            continue
        q1, q3 = np.percentile(ts, [25, 75])
        warm = ck.warm or ts[0] < TINY_LAUNCH_S  # right after itself (measure_calibration)
        warm_kept.append(warm)
        kept.append(kc)
        times.append(t)
        samples.append({"label": ck.label, "kernel": ck.kernel, "measured": t,
                        "spread": float((q3 - q1) / t), "warm": warm})
        say(f"calibrate: {ck.label:33s} {t * 1e6:10.1f} us")
    if len(times) < len(FEATURES):
        raise PolyfuseError(f"calibration: only {len(times)} micro-benchmarks ran on "
                            f"{lim.name}; too few to fit {len(FEATURES)} costs")
    tm = np.array(times)
    reported = int(lim.global_mem_cache_size) or DEFAULT_LLC_BYTES
    costs, p, cache, llc, reuse, rms = fit_calibration(
        kept, tm, p_grid, warm=warm_kept, llc_grid=[int(reported * f) for f in LLC_FRACTIONS],
        reuse_grid=REUSE_CACHE_GRID)
    for s, kc, w in zip(samples, kept, warm_kept):
        f = features_of(kc, cache_bytes=cache, reuse_cache_bytes=reuse,
                        warm=calibration_warm_shares(kc, llc) if w else None)
        s["features"] = f.to_dict()
        s["fitted"] = float(model_time(f.vector(), costs, p)[0])
    say(f"calibrate: p = {p:g}, cache {cache >> 10} KiB, last level {llc >> 20} MiB, rms "
        f"relative error {rms:.1%} over {len(tm)} launches ({time.perf_counter() - t0:.1f} s)")
    return Calibration(
        device_key=calibration_key(queue.device), costs=dict(zip(FEATURES, map(float, costs))),
        p=p, subgroup_size=int(sg), device=lim.name, quick=quick,
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        fit_rms_rel_error=rms, samples=samples, stable_key=stable_device_key(queue.device),
        skipped=skipped, cache_bytes=cache, min_launch_s=float(min_launch_s),
        llc_bytes=llc, reuse_cache_bytes=reuse)


def geomean_error(pairs: Sequence[tuple[float, float]]) -> float:
    """Geomean of ``max(p/m, m/p)`` over (predicted, measured) pairs, minus 1 (0 = perfect).

    Symmetric in over- and under-prediction (a prediction twice too fast and one twice too slow
    are both 100 % off); pairs with a non-positive value are left out; NaN when none is left.
    """
    logs = [abs(math.log(p / m)) for p, m in pairs if p > 0 and m > 0]
    if not logs:
        return float("nan")
    return math.exp(sum(logs) / len(logs)) - 1.0


# ----------------------------------------------------------------------------------------------
# Prediction
# ----------------------------------------------------------------------------------------------


Target = Union[Kernel, Program, KernelCounts, Any]


def _resolve(calibration: Optional[Calibration]) -> Calibration:
    return calibration if calibration is not None else Calibration.for_device()


def features_of_target(target: Target, params: Optional[Mapping[str, int]] = None, *,
                       global_size: Optional[Sequence[int]] = None,
                       local_size: Optional[Sequence[int]] = None,
                       subgroup_size: Optional[int] = None,
                       cache_bytes: int = DEFAULT_CACHE_BYTES,
                       llc_bytes: int = DEFAULT_LLC_BYTES,
                       reuse_cache_bytes: Optional[int] = None) -> Features:
    """Summed features of a Kernel (+ geometry), an oplib ``OpKernel``, counts or a Program
    (``cache_bytes``, ``reuse_cache_bytes``: the calibration's, see :func:`features_of`; a
    Program's launches find what the ones before them left in a last-level cache of
    ``llc_bytes``, :func:`warm_shares`)."""
    params = dict(params or {})
    sizes = {"cache_bytes": cache_bytes, "reuse_cache_bytes": reuse_cache_bytes}
    if isinstance(target, KernelCounts):
        return features_of(target, params, **sizes)
    if isinstance(target, Program):
        total = Features(dict.fromkeys(FEATURES, 0.0))
        counts = count_program(target, subgroup_size=subgroup_size, values=params)
        shares = warm_shares(target, counts, llc_bytes, params)
        for lid, kc in counts.items():
            total = total + features_of(kc, params, warm=shares.get(lid), **sizes)
        return total
    if isinstance(target, Kernel):
        kernel = target
        if global_size is not None:
            kernel = specialize_kernel(kernel, global_size, local_size, params)
        return features_of(count_kernel(kernel, subgroup_size=subgroup_size), params, **sizes)
    if hasattr(target, "source") and hasattr(target, "global_size") and hasattr(target, "name"):
        from polyfuse.frontend.opencl import parse_kernels  # an oplib OpKernel

        kernel = parse_kernels(target.source)[target.name]
        kernel = specialize_kernel(kernel, global_size or target.global_size,
                                   local_size or target.local_size, params)
        return features_of(count_kernel(kernel, subgroup_size=subgroup_size), params, **sizes)
    raise TypeError(f"cannot predict the time of a {type(target).__name__}")


def predict(target: Target, params: Optional[Mapping[str, int]] = None,
            calibration: Optional[Calibration] = None, *,
            global_size: Optional[Sequence[int]] = None,
            local_size: Optional[Sequence[int]] = None) -> float:
    """Predicted device seconds of ``target``.

    ``target`` is a :class:`~polyfuse.core.program.Kernel` (with ``global_size``/``local_size`` and
    scalar arguments in ``params``, or already specialized), an oplib ``OpKernel`` (its own
    geometry), a :class:`~polyfuse.perf.counts.KernelCounts`, or a whole
    :class:`~polyfuse.core.program.Program` (every launch, host loops included, summed; ``params``
    fixes host values such as ``n``).  ``calibration`` defaults to the cached one of the default
    device (calibrating once if there is none).  Counting uses the calibration's sub-group size
    so features mean what they meant when the costs were fitted.
    """
    cal = _resolve(calibration)
    feats = features_of_target(target, params, global_size=global_size, local_size=local_size,
                               subgroup_size=cal.subgroup_size, cache_bytes=cal.cache_bytes,
                               llc_bytes=cal.llc_bytes, reuse_cache_bytes=cal.reuse_cache_bytes)
    return cal.time(feats)


def rank_variants(programs: Sequence[Target], calibration: Optional[Calibration] = None, *,
                  params: Optional[Mapping[str, int]] = None) -> list[tuple[int, float]]:
    """``(index, predicted seconds)`` of every program, fastest predicted first.

    A program the model cannot predict (a count it cannot bound, an unknown size) gets ``inf``
    and sorts last rather than being dropped: the autotuner should still time it.
    """
    cal = _resolve(calibration)
    out: list[tuple[int, float]] = []
    for i, prog in enumerate(programs):
        try:
            t = predict(prog, params, cal)
        except (PolyfuseError, TypeError, ValueError, ZeroDivisionError):
            t = math.inf
        out.append((i, t))
    return sorted(out, key=lambda it: (it[1], it[0]))


def prune_variants(programs: Sequence[Target], calibration: Optional[Calibration] = None, *,
                   params: Optional[Mapping[str, int]] = None, factor: float = 2.0
                   ) -> list[int]:
    """Indices (in input order) of the programs worth timing: predicted within ``factor`` of the
    best prediction, plus every program the model could not predict."""
    ranked = rank_variants(programs, calibration, params=params)
    finite = [t for _, t in ranked if math.isfinite(t)]
    if not finite:
        return [i for i, _ in sorted(ranked)]
    best = min(finite)
    return sorted(i for i, t in ranked if not math.isfinite(t) or t <= factor * best)


__all__ = [
    "CACHE_GRID", "CALIBRATION_KERNELS", "DEFAULT_CACHE_BYTES", "DEFAULT_LLC_BYTES", "FEATURES",
    "GPU_MIN_LAUNCH_S", "LLC_FRACTIONS", "REUSE_CACHE_GRID",
    "MAX_CALIBRATION_SCALE", "MEMORY_FEATURES", "ONCHIP_FEATURES", "OVERHEAD_FEATURES",
    "P_GRID", "REFERENCE_CPU", "Calibration", "CalibrationKernel", "Features", "array_bytes",
    "calibrate", "calibration_key", "calibration_warm_shares",
    "calibration_kernels", "count_calibration_kernel", "default_model_dir", "dtype_bytes",
    "features_of", "features_of_target", "fit_calibration", "fit_costs", "fit_model",
    "footprint_bytes", "geomean_error", "measure_calibration", "model_time", "nnls", "op_class",
    "predict", "prune_variants", "rank_variants", "readable_cost", "sized_calibration_kernels",
    "smooth_max", "specialize_kernel", "stride_class", "warm_shares",
]
