"""The empirical roofline (Roofline Model Toolkit): measured bandwidth per memory level and peak
FLOP/s.

Bandwidth ceilings come from the read-only bandwidth-vs-working-set curve of
:mod:`polyfuse.perf.microbench`: its plateaus are the memory levels (L1, L2, ..., LLC, DRAM by size
band; DRAM is the one with the largest working sets).  The compute ceiling is the best FLOP/s of
the Horner benchmark.  Kernels are placed on the plot by their arithmetic intensity and measured
FLOP/s, so one sees which ceiling bounds each.

Command line (wired in :mod:`polyfuse.apps.cli`)::

    polyfuse roofline --out results/roofline            # default device (PYOPENCL_CTX or 0:0)
    polyfuse roofline --device 0:0 --out results/rl --quick

writes ``roofline.json`` and ``roofline.png`` into ``--out``; Python: ``run_roofline(out_dir)``.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np
import pyopencl as cl

from polyfuse.perf import microbench as mb
from polyfuse.runtime.device import (
    DeviceLimits,
    DeviceSpec,
    check_device,
    device_key,
    get_context,
)

SCHEMA = "polyfuse.roofline/1"

#: Keys of ``roofline.json`` (documented contract for scripts that read it).
JSON_KEYS = (
    "schema", "device", "device_key", "measured_at", "quick", "elapsed_seconds", "levels",
    "level_source", "dram_reached", "dram_bandwidth_gbs", "peak_gflops", "ridge_points",
    "launch_overhead_us", "bandwidth", "flops", "skipped",
)


@dataclass
class BandwidthLevel:
    """A plateau of the bandwidth curve: a memory level and the working sets it serves."""

    name: str
    min_working_set_bytes: int
    max_working_set_bytes: int
    bandwidth_gbs: float
    spread: float
    points: int


def _name_levels(n: int) -> list[str]:
    """L1, L2, ..., LLC for the caches (by size band), DRAM for the largest working sets."""
    if n <= 0:
        return []
    caches = n - 1
    if caches == 0:
        names: list[str] = []
    elif caches == 1:
        names = ["L1"]
    else:
        names = [f"L{i + 1}" for i in range(caches - 1)] + ["LLC"]
    return names + ["DRAM"]


def detect_levels(sizes: Sequence[int], gbs: Sequence[float], *,
                  tolerance: float = 0.3) -> list[BandwidthLevel]:
    """Plateaus of a bandwidth-vs-working-set curve, smallest working sets first.

    A point faster than both neighbours by more than ``tolerance`` is a timing spike (the curve
    only falls with size, apart from the ramp) and is removed first.
    Consecutive points within ``tolerance`` (relative) of the running plateau's median join it;
    a larger change starts a new plateau.  Then: leading points slower than a later plateau are a
    ramp (too little work to fill the device), not a level, and are dropped; a plateau faster
    than the one before it is noise and is merged into it; a lone point between the first and
    the last plateau is a transition (caches fill gradually) and is dropped, unless the curve is
    too coarse to have plateaus (``quick`` sweeps).  The largest working sets are always kept: they
    are the DRAM level.  Each level's bandwidth is the median of its points.
    """
    if len(sizes) != len(gbs) or not sizes:
        raise ValueError("need equally many (>0) sizes and bandwidths")
    order = np.argsort(sizes)
    xs = [int(sizes[i]) for i in order]
    ys = [float(gbs[i]) for i in order]
    spike = True
    while spike and len(xs) > 2:  # a lone point faster than both neighbours is noise
        spike = False
        for i in range(1, len(xs) - 1):
            if ys[i] > (1 + tolerance) * max(ys[i - 1], ys[i + 1]):
                del xs[i], ys[i]
                spike = True
                break
    band = np.log1p(tolerance)
    segs: list[list[int]] = [[0]]
    for i in range(1, len(xs)):
        ref = np.median(np.log([ys[j] for j in segs[-1]]))
        if abs(np.log(ys[i]) - ref) <= band:
            segs[-1].append(i)
        else:
            segs.append([i])

    def med(seg: list[int]) -> float:
        return float(np.median([ys[j] for j in seg]))

    while len(segs) > 1 and med(segs[0]) * (1 + tolerance) < max(med(s) for s in segs[1:]):
        segs.pop(0)
    merged = True
    while merged:
        merged = False
        for i in range(1, len(segs)):
            if med(segs[i]) > med(segs[i - 1]):
                segs[i - 1] = segs[i - 1] + segs.pop(i)
                merged = True
                break
    if len(segs) > 2 and any(len(s) > 1 for s in segs):
        segs = [segs[0], *[s for s in segs[1:-1] if len(s) > 1], segs[-1]]
    levels = []
    for name, seg in zip(_name_levels(len(segs)), segs):
        vals = [ys[j] for j in seg]
        m = float(np.median(vals))
        levels.append(BandwidthLevel(name, xs[seg[0]], xs[seg[-1]], m,
                                     (max(vals) - min(vals)) / m if m > 0 else 0.0, len(seg)))
    return levels


@dataclass
class Roofline:
    """Measured ceilings of one device, with the curves they were derived from."""

    device: dict[str, Any]
    device_key: str
    measured_at: str
    quick: bool
    levels: list[BandwidthLevel]
    peak_gflops: float
    launch_overhead_us: dict[str, float]
    bandwidth: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    flops: list[dict[str, Any]] = field(default_factory=list)
    level_source: str = "read"
    dram_reached: bool = False
    elapsed_seconds: float = 0.0
    #: the benchmark kernels not measured, each with why (the device compiler rejected or
    #: crashed on it): ``"flops degree 8: ..."``, ``"bandwidth copy: ..."``
    skipped: list[str] = field(default_factory=list)

    @property
    def dram_gbs(self) -> float:
        """Bandwidth of the level with the largest working sets (0 when none was measured)."""
        return self.levels[-1].bandwidth_gbs if self.levels else 0.0

    def level(self, name: str) -> BandwidthLevel:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise KeyError(f"no bandwidth level {name!r} (have {[lv.name for lv in self.levels]})")

    def ridge_points(self) -> dict[str, float]:
        """Arithmetic intensity (FLOP/byte) where each bandwidth ceiling meets the compute one."""
        return {lv.name: self.peak_gflops / lv.bandwidth_gbs for lv in self.levels
                if lv.bandwidth_gbs > 0 and self.peak_gflops > 0}

    def attainable_gflops(self, intensity: float, level: str = "DRAM") -> float:
        """Roofline bound ``min(peak, bandwidth * intensity)`` at one level."""
        return min(self.peak_gflops, self.level(level).bandwidth_gbs * intensity)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "device": self.device,
            "device_key": self.device_key,
            "measured_at": self.measured_at,
            "quick": self.quick,
            "elapsed_seconds": self.elapsed_seconds,
            "levels": [asdict(lv) for lv in self.levels],
            "level_source": self.level_source,
            "dram_reached": self.dram_reached,
            "dram_bandwidth_gbs": self.dram_gbs,
            "peak_gflops": self.peak_gflops,
            "ridge_points": self.ridge_points(),
            "launch_overhead_us": self.launch_overhead_us,
            "bandwidth": self.bandwidth,
            "flops": self.flops,
            "skipped": self.skipped,
        }

    def to_json(self, indent: int = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Roofline:
        """Inverse of :meth:`to_dict` (derived keys are recomputed, not read)."""
        return cls(
            device=d["device"], device_key=d["device_key"], measured_at=d["measured_at"],
            quick=d["quick"], levels=[BandwidthLevel(**lv) for lv in d["levels"]],
            peak_gflops=d["peak_gflops"], launch_overhead_us=d["launch_overhead_us"],
            bandwidth=d.get("bandwidth", {}), flops=d.get("flops", []),
            level_source=d.get("level_source", "read"), dram_reached=d.get("dram_reached", False),
            elapsed_seconds=d.get("elapsed_seconds", 0.0), skipped=d.get("skipped", []),
        )

    @classmethod
    def load(cls, path: Union[str, Path]) -> Roofline:
        """Read a ``roofline.json`` (a file, or a directory holding one)."""
        p = Path(path)
        if p.is_dir():
            p = p / "roofline.json"
        return cls.from_dict(json.loads(p.read_text()))

    def save(self, out_dir: Union[str, Path]) -> Path:
        """Write ``out_dir/roofline.json`` (creating the directory) and return its path."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        path = out / "roofline.json"
        path.write_text(self.to_json() + "\n")
        return path

    def summary(self) -> str:
        """A few human-readable lines (for the CLI's stderr / a report)."""
        name = self.device.get("name", "?")
        lines = [f"roofline of {name} ({self.measured_at}{', quick' if self.quick else ''})"]
        for lv in self.levels:
            band = f"{_human(lv.min_working_set_bytes)} .. {_human(lv.max_working_set_bytes)}"
            lines.append(f"  {lv.name:5s} {lv.bandwidth_gbs:9.2f} GB/s   working sets {band}")
        if not self.levels:
            lines.append("  no bandwidth level: the read benchmark was not measured")
        if self.flops:
            op = self.flops[0].get("op", "mad")
            lines.append(f"  peak  {self.peak_gflops:9.2f} GFLOP/s (float32 {op}, Horner in "
                         "cache)")
        else:
            lines.append("  peak  not measured: no FLOP benchmark kernel ran on this device")
        lines += [f"  skipped {why}" for why in self.skipped]
        lo = self.launch_overhead_us
        lines.append(f"  launch {lo['wall']:.1f} us wall, {lo['profiled']:.1f} us profiled, "
                     f"{lo['pipelined']:.1f} us pipelined")
        return "\n".join(lines)


def _human(n: int) -> str:
    for unit, size in (("MiB", mb.MiB), ("KiB", mb.KiB)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} B"


def _curve(res: mb.BandwidthResult) -> list[dict[str, Any]]:
    return [{"working_set_bytes": p.working_set_bytes, "gbs": p.gbs, "gbs_best": p.gbs_best,
             "spread": p.spread, "reps": p.reps} for p in res.points]


def measure_roofline(
    device: DeviceSpec = None,
    *,
    quick: bool = False,
    max_bytes: Optional[int] = None,
    queue: Optional[cl.CommandQueue] = None,
    progress: mb.Progress = None,
) -> Roofline:
    """Measure the roofline of a device: bandwidth curves (read, copy, rmw), levels detected on the
    read-only curve, peak FLOP/s of the Horner benchmark and empty-launch overhead.

    ``max_bytes`` caps the largest working set (default 256 MiB, 64 MiB when ``quick``; always
    capped by device memory).  ``queue`` reuses an existing (profiling) queue instead of opening
    ``device``.  Takes ~1 min in full mode on a 2-core PoCL CPU, a few seconds with ``quick``.
    """
    t0 = time.perf_counter()
    if queue is None:
        ctx, queue = get_context(device)
    else:
        ctx = queue.context
    check_device(ctx, queue)
    lim = DeviceLimits.from_device(queue.device)
    when = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    mb._say(progress, f"roofline: measuring {lim.name} ({lim.platform})")
    sweep = mb.bandwidth_sweep(queue, kinds=("read", "copy", "rmw"), quick=quick,
                               max_bytes=max_bytes, progress=progress)
    fl = mb.flops(queue, quick=quick, progress=progress)
    launch = mb.launch_overhead(queue, quick=quick, progress=progress)
    sizes, gbs = sweep["read"].curve()
    levels = detect_levels(sizes, gbs) if sizes else []
    skipped = [f"bandwidth {k}: {r.skipped}" for k, r in sweep.items() if r.skipped]
    skipped += [f"flops {why}" for why in fl.skipped]
    cache = lim.global_mem_cache_size
    return Roofline(
        device=lim.to_dict(),
        device_key=device_key(lim),
        measured_at=when,
        quick=quick,
        levels=levels,
        peak_gflops=fl.peak_gflops,
        launch_overhead_us={"wall": launch.wall.median * 1e6,
                            "profiled": launch.profiled.median * 1e6,
                            "pipelined": launch.pipelined_seconds * 1e6},
        bandwidth={k: _curve(r) for k, r in sweep.items()},
        flops=[{"degree": p.degree, "flops_per_element": p.flops_per_element,
                "arithmetic_intensity": p.arithmetic_intensity, "gflops": p.gflops,
                "gflops_best": p.gflops_best, "op": p.op, "spread": p.spread}
               for p in fl.points],
        level_source="read",
        dram_reached=bool(cache > 0 and sizes and max(sizes) > cache),
        elapsed_seconds=time.perf_counter() - t0,
        skipped=skipped,
    )


KernelPoint = tuple[str, float, float]


def kernel_table(kernels: Sequence[KernelPoint]) -> list[str]:
    """The key of the numbered kernel markers: one line per kernel, those without floating-point
    work (pure data movement: no place on a FLOP/s axis) said so instead of dropped."""
    lines = []
    for i, (name, x, fps) in enumerate(kernels, 1):
        where = (f"{x:8.3g} FLOP/byte  {fps / 1e9:8.3g} GFLOP/s" if x > 0 and fps > 0 else
                 "not placed: no floating-point work (data movement only)")
        lines.append(f"{i:3d}  {name:<28s} {where}")
    return lines


def plot_roofline(roofline: Roofline, kernels: Sequence[KernelPoint] = (),
                  path: Union[str, Path] = "roofline.png") -> Path:
    """Log-log roofline: one ceiling per bandwidth level, the compute ceiling, the measured
    Horner points, and ``kernels`` as labelled points ``(name, FLOP/byte, FLOP/s)``.

    Uses the Agg canvas directly (no global matplotlib backend switch, works headless).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    peak = roofline.peak_gflops
    ridges = list(roofline.ridge_points().values()) or [1.0]
    k_ai = [float(k[1]) for k in kernels if k[1] > 0]
    lo = min([1 / 16, min(ridges) / 8] + [x / 2 for x in k_ai])
    hi = max([64.0, max(ridges) * 8] + [x * 2 for x in k_ai])
    ai = np.logspace(np.log10(lo), np.log10(hi), 256)
    table = kernel_table(kernels)
    table_h = 0.16 * (len(table) + 1) if table else 0.0
    fig = Figure(figsize=(10, 5.5 + table_h))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
    # a ceiling that was not measured (its benchmark kernel skipped) is left out, not drawn at 0
    for i, lv in enumerate(roofline.levels):
        ax.plot(ai, np.minimum(peak, lv.bandwidth_gbs * ai) if peak > 0 else lv.bandwidth_gbs * ai,
                color=colors[i % len(colors)], label=f"{lv.name}: {lv.bandwidth_gbs:.1f} GB/s")
    if peak > 0:
        ax.axhline(peak, color="black", linestyle="--", linewidth=1,
                   label=f"compute: {peak:.1f} GFLOP/s")
    if roofline.skipped:
        ax.text(0.01, 0.01, "not measured: " + "; ".join(w.split(":")[0] for w in
                                                         roofline.skipped),
                transform=ax.transAxes, fontsize=7, va="bottom")
    if roofline.flops:
        ax.plot([p["arithmetic_intensity"] for p in roofline.flops],
                [p["gflops"] for p in roofline.flops], "x", color="gray",
                label="measured (Horner, in cache)")
    # numbered markers (the names are in the table under the plot): labels never pile up
    labelled: set[str] = set()
    spots: dict[tuple[int, int], list[int]] = {}  # points that would overlap share one label
    for i, (name, x, fps) in enumerate(kernels, 1):
        if x > 0 and fps > 0:
            fused = name.startswith("fused:")
            kind = "fused kernels" if fused else "kernels"
            ax.plot([x], [fps / 1e9], "D" if fused else "o",
                    color="darkgreen" if fused else "crimson", markersize=6,
                    label=None if kind in labelled else kind)
            labelled.add(kind)
            key = (round(np.log10(x) / 0.08), round(np.log10(fps / 1e9) / 0.08))
            spots.setdefault(key, []).append(i)
    for k, numbers in enumerate(spots.values()):
        _, x, fps = kernels[numbers[0] - 1]
        ax.annotate(",".join(map(str, numbers)), (x, fps / 1e9), textcoords="offset points",
                    xytext=(5, 3 + 8 * (k % 2)), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"{roofline.device.get('name', '?')} — {roofline.measured_at}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    # the legend outside the axes, so it never hides a point
    if ax.get_legend_handles_labels()[0]:  # nothing measured: no legend to draw
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    if table:
        fig.text(0.01, 0.01, "\n".join(["  #  kernel"] + table), family="monospace",
                 fontsize=7, va="bottom")
    fig.tight_layout(rect=(0, table_h / (5.5 + table_h), 1, 1))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out


def _dtype_bytes(dtype: str) -> int:
    base, _, lanes = dtype.partition("x")
    size = np.dtype(base).itemsize if base not in ("", "unknown") else 4
    return size * (int(lanes) if lanes.isdigit() else 1)


def kernel_points(program: Any, *, params: Optional[dict[str, int]] = None, label: str = "",
                  queue: Optional[cl.CommandQueue] = None, repeat: int = 3
                  ) -> list[KernelPoint]:
    """Each launch of ``program`` as a roofline point ``(name, FLOP/byte, FLOP/s)``.

    Arithmetic intensity comes from the exact counts (:mod:`polyfuse.perf.counts`: flops with
    an fma counted as 2, global bytes loaded and stored, at work-item granularity, summed over
    host-loop instances); performance from the launch's median profiled time
    (:func:`polyfuse.runtime.time_program`).  A launch without floating-point work is a point
    ``(name, 0, 0)``: the plot lists it as not placed rather than dropping it silently.
    """
    from polyfuse.perf.counts import count_program
    from polyfuse.runtime.execute import time_program

    counts = count_program(program, granularity="work-item", values=params)
    timing = time_program(program, params=params, repeat=repeat, queue=queue)
    points: list[KernelPoint] = []
    for launch in program.launches:
        kc = counts[launch.id]
        flops = sum(float(r.count.value or 0) * (2 if r.op == "fma" else 1) for r in kc.ops
                    if r.op in ("add", "mul", "fma", "div", "neg") or r.op.startswith("func:"))
        nbytes = sum(float(m.count.value or 0) * _dtype_bytes(m.dtype) for m in kc.mem
                     if m.space in ("global", "constant"))
        seconds = timing.per_launch.get(launch.id, 0.0)
        name = f"{label}{launch.kernel}#{launch.id}"
        if flops > 0 and nbytes > 0 and seconds > 0:
            points.append((name, flops / nbytes, flops / seconds))
        else:
            points.append((name, 0.0, 0.0))
    return points


def run_roofline(out_dir: Union[str, Path], device: DeviceSpec = None, quick: bool = False, *,
                 max_bytes: Optional[int] = None, progress: mb.Progress = None,
                 kernels: Sequence[KernelPoint] = ()) -> dict[str, Any]:
    """Measure, write ``out_dir/roofline.json`` and ``out_dir/roofline.png``; what the CLI calls.

    Example (``polyfuse roofline --device 0:0 --out results/rl``)::

        >>> from polyfuse.perf.roofline import run_roofline
        >>> info = run_roofline("results/rl", device="0:0", quick=True)   # doctest: +SKIP
        >>> info["json"], info["png"], info["levels"]["DRAM"]             # doctest: +SKIP
        ('results/rl/roofline.json', 'results/rl/roofline.png', 12.3)

    Returns paths, the level bandwidths (GB/s), peak GFLOP/s, launch overhead (µs), the
    benchmark kernels ``skipped`` with why, and a human-readable ``summary``; progress goes to
    ``progress`` / logging, never stdout.
    """
    roof = measure_roofline(device, quick=quick, max_bytes=max_bytes, progress=progress)
    json_path = roof.save(out_dir)
    placed = [{"name": n, "arithmetic_intensity": ai, "flops_per_s": f} for n, ai, f in kernels]
    if placed:
        data = json.loads(Path(json_path).read_text())
        data["kernels"] = placed
        Path(json_path).write_text(json.dumps(data, indent=2) + "\n")
    png_path = plot_roofline(roof, list(kernels), Path(out_dir) / "roofline.png")
    return {
        "json": str(json_path),
        "png": str(png_path),
        "device": roof.device.get("name"),
        "device_key": roof.device_key,
        "levels": {lv.name: lv.bandwidth_gbs for lv in roof.levels},
        "peak_gflops": roof.peak_gflops,
        "launch_overhead_us": roof.launch_overhead_us,
        "summary": roof.summary(),
        "kernels": placed,
        "skipped": roof.skipped,
    }
