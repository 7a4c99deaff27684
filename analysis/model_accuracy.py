"""How well the calibrated performance model predicts kernels it was not calibrated on.

The model (:mod:`polyfuse.perf.model`) is fitted on generated micro-benchmarks only
(``polyfuse.perf.model.CALIBRATION_KERNELS``); this study evaluates it on

* oplib kernels at several sizes (MatMul, Softmax, LayerNormalization, Conv, element-wise Relu /
  Add-with-broadcast / Sigmoid / Gelu), one launch each;
* the examples (``examples/*/{kernels.cl,host.c}``), unfused and fused (``fuse_program``),
  whole programs summed over launches;
* P3 programs (independent launches of identical code — the three Q/K/V projections of
  ``examples/qkv`` without the combine, three element-wise chains of
  ``examples/elementwise_chain``) at several sizes, in three variants: unfused, vertical and
  horizontal orchestration.  Per program: is the model's top-ranked variant the measured best,
  or within 5 % of it?

Measured = median of profiled device time (``time_kernel`` / ``time_program``'s kernel time);
predicted = ``predict``.  Relative error = predicted / measured - 1; the summary is the
geometric mean of ``max(p/m, m/p)`` (1.0 = perfect; "geomean error" below is that minus 1).

    .venv/bin/python analysis/model_accuracy.py [--quick] [--recalibrate] [--out DIR]

Writes DIR/model_accuracy.csv and DIR/model_accuracy.png (default DIR: analysis/results), prints
the tables and the paths.  The calibration is the cached one of the default device
(``Calibration.for_device``; ``--recalibrate`` measures it again and caches it).  Takes ~1-2
minutes (``--quick``: ~30 s) on a 2-core PoCL CPU.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import polyfuse  # noqa: E402
from polyfuse.perf import model as pm  # noqa: E402

EXAMPLES = ROOT / "examples"
#: host values of examples whose sizes come from argv
EXAMPLE_PARAMS: dict[str, dict[str, int]] = {"elementwise_chain": {"n": 65536},
                                             "runtime_offset": {"m": 64, "n": 65536}}
NEAR = 0.05  # "within 5 % of the measured best"


@dataclass
class Row:
    """One predicted-vs-measured comparison."""

    group: str
    name: str
    predicted: float
    measured: float
    spread: float

    @property
    def ratio(self) -> float:
        return self.predicted / self.measured

    @property
    def rel_error(self) -> float:
        return self.ratio - 1.0


def geomean_error(rows: list[Row]) -> float:
    """exp(mean |log(p/m)|) - 1: symmetric in over- and under-prediction."""
    if not rows:
        return float("nan")
    return math.exp(statistics.fmean(abs(math.log(r.ratio)) for r in rows)) - 1.0


# ----------------------------------------------------------------------------------------------
# oplib kernels
# ----------------------------------------------------------------------------------------------


def oplib_cases(quick: bool) -> list[tuple[str, str, dict, list, list]]:
    """(label, op, attrs, input shapes, output shapes) at several sizes."""
    cases: list[tuple[str, str, dict, list, list]] = []
    for n in ((32, 128) if quick else (32, 64, 128, 256)):
        cases.append((f"MatMul {n}", "MatMul", {}, [(n, n), (n, n)], [(n, n)]))
    for r, c in (((64, 256), (256, 1024)) if quick else ((64, 256), (256, 512), (512, 1024))):
        cases.append((f"Softmax {r}x{c}", "Softmax", {"axis": -1}, [(r, c)], [(r, c)]))
        cases.append((f"LayerNorm {r}x{c}", "LayerNormalization", {"axis": -1},
                      [(r, c), (c,), (c,)], [(r, c)]))
    for hw in ((16, 32) if quick else (16, 32, 64)):
        o = hw - 2
        cases.append((f"Conv 8x{hw}x{hw} k3 -> 16", "Conv", {}, [(1, 8, hw, hw), (16, 8, 3, 3)],
                      [(1, 16, o, o)]))
    for n in ((1 << 14, 1 << 20) if quick else (1 << 12, 1 << 16, 1 << 20)):
        cases.append((f"Relu {n}", "Relu", {}, [(n,)], [(n,)]))
        cases.append((f"Sigmoid {n}", "Sigmoid", {}, [(n,)], [(n,)]))
        cols = 256
        cases.append((f"Add {n // cols}x{cols}+{cols}", "Add", {}, [(n // cols, cols), (cols,)],
                      [(n // cols, cols)]))
    if not quick:
        cases.append(("Gelu 65536", "Gelu", {}, [(65536,)], [(65536,)]))
    return cases


def measure_oplib(queue: Any, cal: pm.Calibration, quick: bool, repeat: int,
                  say: Callable[[str], None]) -> list[Row]:
    import pyopencl as cl

    from polyfuse.oplib import op_kernel
    from polyfuse.runtime.device import build_kernel, time_kernel

    ctx = queue.context
    lim = queue.device
    rows = []
    for label, op, attrs, ins, outs in oplib_cases(quick):
        opk = op_kernel(op, attrs, ins, outs, name="k_" + op.lower(),
                        max_work_group_size=min(256, lim.max_work_group_size),
                        local_mem_size=min(32768, lim.local_mem_size))
        pred = pm.predict(opk, None, cal)
        kernel = build_kernel(ctx, opk.source, opk.name, ("-cl-std=CL1.2",))
        args = []
        rng = np.random.default_rng(0)
        for i, pname in enumerate(opk.inputs):
            if pname:
                host = rng.uniform(-1, 1, size=int(np.prod(ins[i]))).astype(np.float32)
                args.append(cl.Buffer(ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                                      hostbuf=host))
        for i, pname in enumerate(opk.outputs):
            if pname:
                args.append(cl.Buffer(ctx, cl.mem_flags.READ_WRITE,
                                      4 * int(np.prod(outs[i]))))
        t = time_kernel(queue, kernel, opk.global_size, opk.local_size, args, repeat=repeat,
                        warmup=2)
        rows.append(Row("oplib", label, pred, t.median, t.spread))
        say(f"  {label:28s} predicted {pred * 1e6:9.1f} us  measured {t.median * 1e6:9.1f} us")
    return rows


# ----------------------------------------------------------------------------------------------
# examples and P3 variants
# ----------------------------------------------------------------------------------------------


def load_example(name: str) -> polyfuse.Program:
    d = EXAMPLES / name
    return polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"),
                                params=EXAMPLE_PARAMS.get(name))


def variants(program: polyfuse.Program) -> dict[str, polyfuse.Program]:
    """unfused, vertical and horizontal orchestration (duplicates of a plan left out)."""
    from polyfuse.codegen import generate_fused
    from polyfuse.fusion import plan_fusion
    from polyfuse.passes.orchestration_tuning import plan_signature
    from polyfuse.uar import build_uar

    out = {"unfused": program}
    uar = build_uar(program)
    seen = set()
    for v in ("vertical", "horizontal"):
        plan = plan_fusion(uar, orchestration=v)
        sig = plan_signature(plan)
        if sig in seen:
            continue
        seen.add(sig)
        out[v] = generate_fused(plan).program
    return out


def qkv_projections(seq: int, dim: int) -> polyfuse.Program:
    """Q, K and V projections only: three independent launches of ``linear`` (P3)."""
    b = polyfuse.ProgramBuilder(str(EXAMPLES / "qkv" / "kernels.cl"), name=f"qkv3 {seq}x{dim}")
    b.buffer("X", 4 * seq * dim)
    for p in "qkv":
        b.buffer(f"W{p}", 4 * dim * dim)
        b.buffer(f"b{p}", 4 * dim)
        b.buffer(f"Y{p}", 4 * seq * dim)
    b.write("X")
    for p in "qkv":
        b.launch("linear", (dim, seq), (16, 16),
                 {"X": "X", "W": f"W{p}", "b": f"b{p}", "Y": f"Y{p}", "rows": seq,
                  "cols": dim, "inner": dim})
    for p in "qkv":
        b.read(f"Y{p}")
    b.finish()
    return b.build()


def chains(n: int, branches: int = 3) -> polyfuse.Program:
    """``branches`` independent scale→add→relu chains (P3 across branches, P1 along each)."""
    b = polyfuse.ProgramBuilder(str(EXAMPLES / "elementwise_chain" / "kernels.cl"),
                                name=f"chains{branches} n={n}")
    for k in range(branches):
        for s in ("x", "y", "a", "b", "c"):
            b.buffer(f"{s}{k}", 4 * n)
        b.write(f"x{k}")
        b.write(f"y{k}")
    for k in range(branches):
        b.launch("scale", (n,), (64,), {"x": f"x{k}", "a": f"a{k}", "alpha": 2, "n": n})
        b.launch("add", (n,), (64,), {"a": f"a{k}", "y": f"y{k}", "b": f"b{k}", "n": n})
        b.launch("relu", (n,), (64,), {"b": f"b{k}", "c": f"c{k}", "n": n})
    for k in range(branches):
        b.read(f"c{k}")
    b.finish()
    return b.build()


def p3_programs(quick: bool) -> list[polyfuse.Program]:
    progs = [qkv_projections(s, d) for s, d in (((64, 64), (128, 128)) if quick
                                                 else ((64, 64), (128, 64), (128, 128),
                                                       (256, 128)))]
    progs += [chains(n) for n in ((1 << 14, 1 << 18) if quick
                                  else (1 << 12, 1 << 14, 1 << 16, 1 << 18))]
    return progs


def time_programs(programs: dict[str, polyfuse.Program], queue: Any, repeat: int
                  ) -> dict[str, tuple[float, float]]:
    """(median kernel time, spread) per variant, measured interleaved in rounds so a burst of
    load from other jobs hits every variant alike."""
    from polyfuse.runtime.execute import time_program

    samples: dict[str, list[float]] = {k: [] for k in programs}
    for _ in range(repeat):
        for k, prog in programs.items():
            samples[k].append(time_program(prog, repeat=1, warmup=1, queue=queue).kernel_time)
    out = {}
    for k, s in samples.items():
        med = statistics.median(s)
        q1, q3 = np.percentile(s, [25, 75])
        out[k] = (med, float((q3 - q1) / med) if med > 0 else 0.0)
    return out


@dataclass
class Ranking:
    program: str
    predicted: dict[str, float]
    measured: dict[str, float]

    @property
    def top_predicted(self) -> str:
        return min(self.predicted, key=lambda k: self.predicted[k])

    @property
    def best_measured(self) -> str:
        return min(self.measured, key=lambda k: self.measured[k])

    @property
    def hit(self) -> bool:
        return self.top_predicted == self.best_measured

    @property
    def near(self) -> bool:
        best = self.measured[self.best_measured]
        return self.measured[self.top_predicted] <= (1 + NEAR) * best

    def fused_only(self) -> Optional[Ranking]:
        """The same comparison among fused variants only (None when there is one)."""
        keys = [k for k in self.predicted if k != "unfused"]
        if len(keys) < 2:
            return None
        return Ranking(self.program, {k: self.predicted[k] for k in keys},
                       {k: self.measured[k] for k in keys})


def measure_programs(queue: Any, cal: pm.Calibration, quick: bool, repeat: int,
                     say: Callable[[str], None]) -> tuple[list[Row], list[Ranking]]:
    rows: list[Row] = []
    rankings: list[Ranking] = []
    named: list[tuple[str, str, polyfuse.Program]] = []
    for d in sorted(p.parent.name for p in EXAMPLES.glob("*/host.c")):
        if quick and d not in ("qkv", "elementwise_chain", "gemm_bias_relu_transpose",
                               "reduction"):
            continue
        named.append(("example", d, load_example(d)))
    named += [("p3", p.name, p) for p in p3_programs(quick)]
    for group, name, prog in named:
        try:
            vs = variants(prog)
            preds = {k: pm.predict(p, EXAMPLE_PARAMS.get(name), cal) for k, p in vs.items()}
        except Exception as err:  # noqa: BLE001 - a planner/count failure skips the program
            say(f"  {name}: skipped ({type(err).__name__}: {str(err)[:80]})")
            continue
        meas = time_programs(vs, queue, repeat)
        for k in vs:
            rows.append(Row(group, f"{name} [{k}]", preds[k], meas[k][0], meas[k][1]))
            say(f"  {name + ' [' + k + ']':40s} predicted {preds[k] * 1e6:9.1f} us  "
                f"measured {meas[k][0] * 1e6:9.1f} us")
        rankings.append(Ranking(name, preds, {k: m for k, (m, _s) in meas.items()}))
    return rows, rankings


# ----------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------


def write_csv(rows: list[Row], path: Path) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["group", "kernel", "predicted_us", "measured_us", "rel_error",
                    "measured_spread"])
        for r in rows:
            w.writerow([r.group, r.name, f"{r.predicted * 1e6:.3f}", f"{r.measured * 1e6:.3f}",
                        f"{r.rel_error:.4f}", f"{r.spread:.3f}"])


def plot(rows: list[Row], cal: pm.Calibration, path: Path, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 6))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    markers = {"oplib": ("o", "tab:blue"), "example": ("s", "tab:green"),
               "p3": ("^", "tab:orange")}
    for g, (mk, col) in markers.items():
        pts = [r for r in rows if r.group == g]
        if pts:
            ax.plot([r.measured * 1e6 for r in pts], [r.predicted * 1e6 for r in pts], mk,
                    color=col, alpha=0.8, label=f"{g} ({len(pts)})")
    cs = [s for s in cal.samples if s.get("fitted")]
    if cs:
        ax.plot([s["measured"] * 1e6 for s in cs], [s["fitted"] * 1e6 for s in cs], "x",
                color="gray", alpha=0.6, label=f"calibration fit ({len(cs)})")
    vals = [v for r in rows for v in (r.measured * 1e6, r.predicted * 1e6)] + \
        [v for s in cs for v in (s["measured"] * 1e6, s["fitted"] * 1e6)]
    lo, hi = min(vals) / 2, max(vals) * 2
    ax.plot([lo, hi], [lo, hi], "k-", linewidth=1)
    ax.plot([lo, hi], [2 * lo, 2 * hi], "k:", linewidth=0.8)
    ax.plot([lo, hi], [lo / 2, hi / 2], "k:", linewidth=0.8, label="×2 / ÷2")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured (us, median of profiled runs)")
    ax.set_ylabel("predicted (us)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    parser.add_argument("--recalibrate", action="store_true",
                        help="measure the calibration again (and cache it)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--repeat", type=int, default=None)
    args = parser.parse_args(argv)
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    from polyfuse.runtime.device import get_context

    t0 = time.perf_counter()
    _, queue = get_context()
    if args.recalibrate:
        cal = pm.calibrate(queue=queue, quick=args.quick, progress=say)
        cal.save()
    else:
        cal = pm.Calibration.for_device(queue.device, quick=args.quick, progress=say)
    repeat = args.repeat or (5 if args.quick else 9)
    say(f"calibration: {cal.device} p={cal.p:g}, fit rms {cal.fit_rms_rel_error:.1%} on "
        f"{len(cal.samples)} launches of {', '.join(cal.calibration_kernels)}")
    overlap = set(cal.calibration_kernels) & {"k_matmul", "k_softmax", "fused_g0"}
    assert not overlap, overlap
    say("oplib kernels:")
    rows = measure_oplib(queue, cal, args.quick, repeat, say)
    say("examples and P3 programs:")
    prog_rows, rankings = measure_programs(queue, cal, args.quick, repeat, say)
    rows += prog_rows

    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / "model_accuracy.csv"
    png_path = args.out / "model_accuracy.png"
    write_csv(rows, csv_path)

    print(f"device: {cal.device}; calibration p = {cal.p:g}, fit rms relative error "
          f"{cal.fit_rms_rel_error:.1%} ({len(cal.samples)} micro-benchmark launches)")
    print()
    print(f"{'group':8s} {'kernel':44s} {'pred us':>10s} {'meas us':>10s} {'rel err':>8s} "
          f"{'spread':>7s}")
    for r in rows:
        print(f"{r.group:8s} {r.name:44s} {r.predicted * 1e6:10.1f} {r.measured * 1e6:10.1f} "
              f"{r.rel_error:+8.1%} {r.spread:7.2f}")
    print()
    summary = []
    for g in ("oplib", "example", "p3"):
        sel = [r for r in rows if r.group == g]
        if sel:
            within2 = sum(1 for r in sel if 0.5 <= r.ratio <= 2.0)
            summary.append(f"{g}: geomean error {geomean_error(sel):.1%} over {len(sel)} "
                           f"(within 2x: {within2}/{len(sel)})")
    ge = geomean_error(rows)
    summary.append(f"all: geomean error {ge:.1%} over {len(rows)} kernels/programs "
                   f"(median |rel err| {statistics.median(abs(r.rel_error) for r in rows):.1%})")
    for line in summary:
        print(line)
    print()
    print(f"{'program':24s} {'predicted order':40s} {'measured order':40s} hit  ≤5%")
    for rk in rankings:
        po = " < ".join(sorted(rk.predicted, key=lambda k: rk.predicted[k]))
        mo = " < ".join(sorted(rk.measured, key=lambda k: rk.measured[k]))
        print(f"{rk.program:24s} {po:40s} {mo:40s} {'y' if rk.hit else 'n':4s} "
              f"{'y' if rk.near else 'n'}")
    multi = [rk for rk in rankings if len(rk.predicted) > 1]
    fused = [f for f in (rk.fused_only() for rk in rankings) if f is not None]
    hit_line = (f"ranking (unfused/vertical/horizontal): top-ranked is measured best "
                f"{sum(r.hit for r in multi)}/{len(multi)}, within 5 % "
                f"{sum(r.near for r in multi)}/{len(multi)}")
    print(hit_line)
    fused_line = (f"ranking (vertical vs horizontal only, {len(fused)} programs with distinct "
                  f"plans): best {sum(r.hit for r in fused)}/{len(fused)}, within 5 % "
                  f"{sum(r.near for r in fused)}/{len(fused)}")
    print(fused_line)
    title = (f"{cal.device}: geomean error {ge:.0%} ({len(rows)} kernels/programs)\n"
             f"{hit_line}")
    plot(rows, cal, png_path, title)
    print()
    print(f"wrote {csv_path}")
    print(f"wrote {png_path}")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
