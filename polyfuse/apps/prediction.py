"""``polyfuse predict``: the calibrated model's time of every launch of a program or model, and,
when asked, the measured time beside it.

The counts are exact (:func:`polyfuse.perf.counts.count_program`, barvinok), the costs those of
the device's calibration (:meth:`polyfuse.perf.model.Calibration.for_device`, measured once per
device and cached); the prediction of a launch is the model's time of its feature vector
(docs/performance.md).  Measuring (``measure=True``) builds the program once, runs it once to
warm up and then ``repeat`` times, and takes, per launch, the median of its profiled time over
the runs: every run goes through every launch, so the launches' samples are interleaved and a
burst of load from other jobs hits all of them alike.  The program is first run once in a
worker process (:func:`polyfuse.runtime.execute.precheck_programs`), so a device compiler that
aborts costs an error naming the kernel, not the caller's process.

Times are per instance: a launch inside a host loop runs ``count`` times per execution, and its
``predicted_s`` / ``measured_s`` are the mean of one instance.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from polyfuse.core.program import PolyfuseError, Program
from polyfuse.perf.model import Calibration, Features, geomean_error

Progress = Optional[Callable[[str], None]]
#: what :func:`predict` accepts: a loaded program, an ONNX file or an OpenCL C file (with host)
Source = Union[Program, str, os.PathLike]

#: the counts shown per launch (summed over its instances), in table order
SHOWN_COUNTS = ("subgroup_flops", "gmem_bytes", "local_access", "group_barriers", "work_items")
#: the features whose sum is the global bytes a launch accesses (``gmem_bytes``)
GMEM_ACCESSED = ("gmem_unit_bytes", "gmem_narrow_bytes", "gmem_loop_bytes", "gmem_strided_bytes",
                 "gmem_uniform_bytes", "gmem_reuse_bytes")


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
                "spread": self.spread, "error": self.error}


@dataclass(frozen=True)
class Prediction:
    """Every launch of one program on one device, with the calibration used."""

    program: str
    device: str
    device_key: str
    calibration: str
    fused: bool
    launches: tuple[LaunchPrediction, ...]

    @property
    def measured(self) -> bool:
        return any(lp.measured_s is not None for lp in self.launches)

    @property
    def predicted_s(self) -> float:
        """Predicted seconds of one execution (every instance of every launch)."""
        return sum(lp.predicted_s * lp.count for lp in self.launches)

    @property
    def measured_s(self) -> Optional[float]:
        if not self.measured:
            return None
        return sum((lp.measured_s or 0.0) * lp.count for lp in self.launches)

    @property
    def geomean_error(self) -> Optional[float]:
        """Geomean of ``max(p/m, m/p)`` over the measured launches, minus 1."""
        pairs = [(lp.predicted_s, lp.measured_s) for lp in self.launches
                 if lp.measured_s is not None]
        return geomean_error(pairs) if pairs else None

    def to_dict(self) -> dict[str, Any]:
        return {"program": self.program, "device": self.device, "device_key": self.device_key,
                "calibration": self.calibration, "fused": self.fused,
                "predicted_s": self.predicted_s, "measured_s": self.measured_s,
                "geomean_error": self.geomean_error,
                "launches": [lp.to_dict() for lp in self.launches]}

    def table(self) -> str:
        """The per-launch table a person reads (times in microseconds)."""
        head = ["launch", "kernel", "count", "flops/sg", "gmem bytes", "local acc", "barriers",
                "work-items", "predicted us"]
        if self.measured:
            head += ["measured us", "spread", "error"]
        rows = []
        for lp in self.launches:
            c = lp.counts()
            row = [str(lp.launch), lp.kernel, str(lp.count)] + \
                [_num(c[k]) for k in SHOWN_COUNTS] + [f"{lp.predicted_s * 1e6:.1f}"]
            if self.measured:
                row += ["-" if lp.measured_s is None else f"{lp.measured_s * 1e6:.1f}",
                        "-" if lp.spread is None else f"{lp.spread:.2f}",
                        "-" if lp.error is None else f"{lp.error:.0%}"]
            rows.append(row)
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                 for r in [head, *rows]]
        lines.insert(1, "  ".join("-" * w for w in widths))
        total = f"total: predicted {self.predicted_s * 1e6:.1f} us"
        if self.measured:
            total += (f", measured {self.measured_s * 1e6:.1f} us; geomean error "  # type: ignore[operator]
                      f"{self.geomean_error:.0%} over {len(self.launches)} launches")
        lines += ["", f"{self.program} on {self.device} ({'fused' if self.fused else 'unfused'})",
                  total, f"calibration: {self.calibration}"]
        return "\n".join(lines)


def _num(v: float) -> str:
    if v == 0:
        return "0"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{unit}"
    return f"{v:.3g}"


def load_source(source: Source, *, host: Optional[Union[str, Sequence[str]]] = None,
                params: Optional[Mapping[str, Union[int, float]]] = None,
                device: Any = None, form: Optional[str] = None) -> Program:
    """The program of ``source``: a :class:`Program` as is, an ``.onnx`` file (kernels tiled
    for ``device``, of the kernel ``form`` of :data:`~polyfuse.core.program.KERNEL_VARIANTS`
    when given), or OpenCL C file(s) with their ``host`` program."""
    if isinstance(source, Program):
        return source
    path = Path(os.fspath(source))
    if not path.exists():
        raise PolyfuseError(f"{path}: no such file")
    if path.suffix.lower() == ".onnx":
        if host:
            raise PolyfuseError(f"{path}: an ONNX model takes no host program")
        from polyfuse.frontend.onnx import load_onnx
        from polyfuse.runtime.device import device_target

        ints = {k: int(v) for k, v in (params or {}).items()}
        target = device_target(device)
        return load_onnx(str(path), params=ints,
                         target=target.with_variant(form) if form else target)
    if form:
        raise PolyfuseError(f"{path}: a kernel form applies to an ONNX model only")
    if path.suffix.lower() not in (".cl", ".c", ".h", ".cpp"):
        raise PolyfuseError(f"{path}: not an ONNX model (.onnx) nor OpenCL C (.cl)")
    if not host:
        raise PolyfuseError(f"{path}: predicting needs the launches: give the host program "
                            "(--host HOST.c)")
    from polyfuse.frontend.host import load_opencl

    hosts = [host] if isinstance(host, str) else list(host)
    return load_opencl([str(path)], host=hosts, params=dict(params or {}), check_params=True)


def predict_program(program: Program, calibration: Calibration, *,
                    params: Optional[Mapping[str, int]] = None,
                    progress: Progress = None) -> list[LaunchPrediction]:
    """The model's time of every launch of ``program`` (counts at ``params``)."""
    from polyfuse.perf.counts import count_program
    from polyfuse.perf.model import features_of, warm_shares

    say = progress or (lambda _m: None)
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


def measure_launches(program: Program, launches: Sequence[LaunchPrediction], *,
                     params: Optional[Mapping[str, int]] = None, device: Any = None,
                     repeat: int = 7, progress: Progress = None) -> list[LaunchPrediction]:
    """``launches`` with their measured seconds: median over ``repeat`` runs of the program.

    The program is built and its buffers allocated once, then run once unrecorded (the device
    compiles a kernel for its work-group size at the first launch, and fresh memory faults in
    at the first touch) and ``repeat`` times recorded, each run from the same initial
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
    for r in range(repeat + 1):
        say(f"measuring: run {r}/{repeat} of {len(launches)} launches"
            + (" (warm-up)" if r == 0 else ""))
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
        if r == 0:
            continue
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
                                       spread=float((q3 - q1) / med)))
    return out


def predict(source: Source, device: Any = None, *, host: Optional[Union[str, Sequence[str]]] = None,
            params: Optional[Mapping[str, Union[int, float]]] = None, fused: bool = False,
            measure: bool = False, repeat: int = 7, calibration: Optional[Calibration] = None,
            recalibrate: bool = False, progress: Progress = None,
            form: Optional[str] = None) -> Prediction:
    """Predicted (and with ``measure`` measured) seconds of every launch of ``source``.

    ``source``: a :class:`~polyfuse.core.program.Program`, an ONNX model file or an OpenCL C
    file with its ``host`` program; ``params`` fix sizes the host reads at run time (or an ONNX
    model's dynamic dimensions); ``fused`` predicts the fused program (the plan ``polyfuse fuse``
    makes) instead; ``form`` picks an ONNX model's kernel form (``tiled``, ``blocked``, ...:
    :data:`~polyfuse.core.program.KERNEL_VARIANTS`; default the device's).  ``device`` is a
    ``"P:D"`` spec as ``polyfuse devices`` lists (default: the default device); its
    calibration is measured once and cached (``recalibrate``: measured again).  Raises
    :class:`PolyfuseError` on input it cannot load, sizes it cannot count, a program the
    device cannot run.
    """
    from polyfuse.runtime.device import get_device

    say = progress or (lambda _m: None)
    dev = get_device(device)
    program = load_source(source, host=host, params=params, device=device, form=form)
    ints = {k: int(v) for k, v in (params or {}).items() if float(v).is_integer()}
    if fused:
        from polyfuse.passes.pipeline import fuse_program

        say(f"fusing {program.name}")
        program = fuse_program(program, params=ints, device=device,
                               progress=progress).fused.program
    if calibration is None:
        calibration = Calibration.for_device(dev, recalibrate=recalibrate, progress=progress)
    say(f"calibration of {calibration.device}: {calibration.path}")
    launches = predict_program(program, calibration, params=ints, progress=progress)
    if measure:
        launches = measure_launches(program, launches, params=ints, device=device,
                                    repeat=repeat, progress=progress)
    return Prediction(program.name, dev.name.strip(), calibration.device_key,
                      str(calibration.path), fused, tuple(launches))


__all__ = ["LaunchPrediction", "Prediction", "load_source", "measure_launches", "predict",
           "predict_program"]
