"""The calibrated model's time of every launch of a program (what ``polyfuse predict`` prints, and
what a compilation weighs its fused groups with), and the calibration that ranks kernels on a
device.

The counts are exact (:func:`polyfuse.perf.counts.count_program`, barvinok); a launch's
prediction is the calibration's time of its feature vector (docs/performance.md).  Times are
per instance: a launch inside a host loop runs ``count`` times per execution.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from polyfuse.core.program import PolyfuseError, Program
from polyfuse.perf.model import Calibration, Features

Progress = Optional[Callable[[str], None]]

#: the counts shown per launch (summed over its instances), in table order
SHOWN_COUNTS = ("subgroup_flops", "gmem_bytes", "local_access", "group_barriers", "work_items")
#: the features whose sum is the global bytes a launch accesses (``gmem_bytes``)
GMEM_ACCESSED = ("gmem_unit_bytes", "gmem_narrow_bytes", "gmem_loop_bytes",
                 "gmem_contiguous_bytes", "gmem_strided_bytes", "gmem_uniform_bytes",
                 "gmem_reuse_bytes")


@dataclass(frozen=True)
class LaunchPrediction:
    """One launch: its kernel, counts, predicted and (measured) seconds per instance."""

    launch: int
    kernel: str
    #: instances per execution (a launch inside host loops runs several times)
    count: int
    features: Mapping[str, float]
    predicted_s: float
    measured_s: Optional[float] = None
    #: IQR / median of the measured samples (how much to trust ``measured_s``)
    spread: Optional[float] = None
    #: the recorded runs of the program ``measured_s`` is the median of
    runs: Optional[int] = None

    @property
    def error(self) -> Optional[float]:
        """``max(p/m, m/p) - 1`` (0: exact; 1: off by a factor of two either way)."""
        if self.measured_s is None or self.measured_s <= 0 or self.predicted_s <= 0:
            return None
        r = self.predicted_s / self.measured_s
        return max(r, 1.0 / r) - 1.0

    def counts(self) -> dict[str, float]:
        """The :data:`SHOWN_COUNTS` of the launch (all instances; flops per sub-group instruction
        as the model counts them, an fma as 2)."""
        f = self.features
        flops = sum(f.get(k, 0.0) for k in ("flop_simple", "flop_div", "flop_special")) \
            + 2 * f.get("flop_fma", 0.0)
        # the bytes accessed, each once: the stride classes and the re-reads (the other gmem_
        # features charge a share of these again: beyond a cache, cold)
        gmem = sum(f.get(k, 0.0) for k in GMEM_ACCESSED)
        return {"subgroup_flops": flops, "gmem_bytes": gmem,
                "local_access": f.get("local_access", 0.0),
                "group_barriers": f.get("group_barriers", 0.0),
                "work_items": f.get("work_items", 0.0)}

    def to_dict(self) -> dict[str, Any]:
        return {"launch": self.launch, "kernel": self.kernel, "count": self.count,
                "counts": self.counts(), "features": dict(self.features),
                "predicted_s": self.predicted_s, "measured_s": self.measured_s,
                "spread": self.spread, "runs": self.runs, "error": self.error}


def predict_program(program: Program, calibration: Calibration, *,
                    params: Optional[Mapping[str, int]] = None,
                    progress: Progress = None) -> list[LaunchPrediction]:
    """The model's time of every launch of ``program`` (counts at ``params``)."""
    from polyfuse.frontend.opencl import NOT_INLINED
    from polyfuse.perf.counts import count_program
    from polyfuse.perf.model import features_of, warm_shares

    say = progress or (lambda _m: None)
    for launch in program.launches:
        kernel = program.kernels.get(launch.kernel)
        opaque = next((n for n in kernel.notes if NOT_INLINED in n), None) if kernel else None
        if opaque is not None:
            where = f"{kernel.loc}: " if kernel.loc else ""
            raise PolyfuseError(f"{where}kernel {kernel.name}: {opaque.split(': ')[0]}: the "
                                "work of that call is in no count, so the launch's time cannot "
                                "be predicted")
    say(f"counting the {len(program.launches)} launches of {program.name} (barvinok)")
    counts = count_program(program, subgroup_size=calibration.subgroup_size,
                           values=dict(params or {}))
    # launches in program order: each finds what the ones before it left in the cache
    warm = warm_shares(program, counts, calibration.llc_bytes, params)
    out = []
    for launch in program.launches:
        feats: Features = features_of(counts[launch.id], params,
                                      cache_bytes=calibration.cache_bytes,
                                      reuse_cache_bytes=calibration.reuse_cache_bytes,
                                      warm=warm.get(launch.id))
        n = max(1, round(feats.values.get("launches", 1.0)))
        out.append(LaunchPrediction(launch.id, launch.kernel, n, feats.to_dict(),
                                    calibration.time(feats) / n))
    return out


#: a program is run unrecorded for at least this long first (and at least once)
WARM_UP_S = 0.05
#: a short program is recorded until its recorded runs took this long (``repeat`` runs at
#: least, :data:`MAX_RUNS` at most): seven runs of a launch of a microsecond give the
#: scheduler's median, not the kernel's (PoCL 3.1 ``pthread``, the ``group_neighbor``
#: example's first launch: 7.1 us over 7 runs, 0.5 us in one process over 7 more, 0.4 us
#: over 51, spread 1.0 -> 0.3)
MEASURE_MIN_S = 0.2
MAX_RUNS = 255


def measure_launches(program: Program, launches: Sequence[LaunchPrediction], *,
                     params: Optional[Mapping[str, int]] = None, device: Any = None,
                     repeat: int = 7, progress: Progress = None,
                     min_time_s: float = MEASURE_MIN_S) -> list[LaunchPrediction]:
    """``launches`` with their measured seconds: median over the recorded runs of the program.

    The program is built and its buffers allocated once, then run unrecorded for
    :data:`WARM_UP_S` (at least once: the device compiles a kernel for its work-group size at
    the first launch, fresh memory faults in at the first touch, a CPU device's sleeping
    workers wake up) and recorded ``repeat`` times, and more while the recorded runs took less
    than ``min_time_s`` (:data:`MAX_RUNS` in all at most), each run from the same initial
    contents; a launch's sample of a run is the sum of its instances' profiled times (on a
    device that runs kernels in the calling thread, PoCL ``basic``, the thread's CPU time around
    each launch and its wait, which other jobs' load does not inflate).
    """
    import dataclasses

    import numpy as np

    from polyfuse.runtime.device import get_context, runs_in_calling_thread
    from polyfuse.runtime.execute import CompiledProgram, precheck_programs

    say = progress or (lambda _m: None)
    ints = {k: int(v) for k, v in (params or {}).items()}
    say("checking that the device builds and runs the program (in a worker process)")
    why = precheck_programs([program], ints, device)[0]
    if why is not None:
        raise PolyfuseError(f"{program.name}: cannot be measured on this device: {why}")
    ctx, queue = get_context(device)
    ex = CompiledProgram(program, ints, None, 0, ctx=ctx, queue=queue)
    cpu = runs_in_calling_thread(queue.device)
    samples: dict[int, list[float]] = {lp.launch: [] for lp in launches}
    started = time.perf_counter()
    recorded_since: Optional[float] = None  # when the warm-up ended
    recorded = 0
    while True:
        now = time.perf_counter()
        if recorded_since is None and now - started >= WARM_UP_S:
            recorded_since = now
        warm = recorded_since is None
        if recorded_since is not None and (recorded >= MAX_RUNS or recorded >= repeat
                                           and now - recorded_since >= min_time_s):
            break
        if warm or recorded % 10 == 0:
            say(f"measuring: run {recorded + 1} of {len(launches)} launches"
                + (" (warm-up)" if warm else ""))
        ex.reset()
        sums = dict.fromkeys(samples, 0.0)
        if cpu:  # the kernel runs in this thread: its CPU time around launch and wait, as
            # the calibration times it (the queue is emptied between steps, untimed)
            for step in ex.steps:
                t0 = time.thread_time()
                events = ex.enqueue([step], profile=True)
                for _lid, e in events:
                    e.wait()
                t1 = time.thread_time()
                ex.finish()
                for lid, _e in events:
                    if lid in sums:
                        sums[lid] += t1 - t0
        else:
            events = ex.enqueue(ex.steps, profile=True)
            ex.finish()
            for lid, e in events:
                if lid in sums:
                    sums[lid] += (e.profile.end - e.profile.start) * 1e-9
        if warm:
            continue
        recorded += 1
        for lid, t in sums.items():
            samples[lid].append(t)
    out = []
    for lp in launches:
        s = samples.get(lp.launch) or []
        med = float(np.median(s)) if s else 0.0
        if med <= 0:
            out.append(lp)
            continue
        q1, q3 = np.percentile(s, [25, 75])
        out.append(dataclasses.replace(lp, measured_s=med / lp.count,
                                       spread=float((q3 - q1) / med), runs=len(s)))
    return out


def ranking_calibration(device: Any, is_cpu: bool) -> tuple[Optional[Calibration], str]:
    """The calibration that ranks kernels on ``device`` (a CPU when ``is_cpu``, as its
    :class:`~polyfuse.core.program.Target` says) without measuring anything, and a note:
    the device's own (``polyfuse predict`` or ``polyfuse roofline`` measured and cached it); on
    a CPU without one, the calibration shipped for the development machine's CPU
    (:meth:`~polyfuse.perf.model.Calibration.reference_cpu`), the note saying so; None on any
    other device without one, the note saying why.  Compilations do not calibrate a device
    (15-30 s)."""
    from polyfuse.runtime.device import get_device

    try:
        return Calibration.load(get_device(device)), ""
    except (FileNotFoundError, PolyfuseError, KeyError, ValueError):
        if not is_cpu:
            return None, "the device has no calibration yet (polyfuse predict makes one)"
        return Calibration.reference_cpu(), (
            "the calibration shipped for a reference CPU (this device has none yet: "
            "polyfuse predict makes one)")


__all__ = ["GMEM_ACCESSED", "SHOWN_COUNTS", "LaunchPrediction", "measure_launches",
           "predict_program", "ranking_calibration"]
