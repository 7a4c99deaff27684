"""Bundled ONNX models: launches, and unfused vs fused vs onnxruntime latency, in one run.

For each ``examples/models/*.onnx``: load it (ONNX node count, launches of the one-launch-per-node
program), fuse and verify it with :func:`polyfuse.apps.onnx_run.fuse_onnx` (against onnxruntime and
the unfused program), then time on one OpenCL queue the unfused and the fused program — in
alternating rounds, so that drift from other load on a shared machine hits both alike — and,
when onnxruntime is installed, ``InferenceSession.run`` on its CPU provider (median of repeated
runs, interleaved with the same rounds).  Reported: medians of profiling-event kernel time and of
host wall time per whole execution, and the ratios unfused / fused (kernel and wall) and
onnxruntime / fused (wall against wall: onnxruntime has no kernel events).  A model whose fused
program fails verification is not timed.

Both programs run with the model's weights (``Program.data``; the fused program is given the same
data) and seeded random graph inputs.  On PoCL's CPU device the OpenCL numbers are CPU numbers:
launch overhead and the work-group emulation dominate at these sizes, so they say how much the
launch count matters here, not what a GPU would show.

    .venv/bin/python analysis/onnx_models.py [--repeat 60] [--models bert_qkv mlp_gelu_ln ...]
                                             [--out DIR] [--device SPEC]

Writes ``DIR/onnx_models.csv`` and ``DIR/onnx_models.png`` (default DIR: ``analysis/results``),
prints the table and the paths; progress goes to stderr.  Exit status 1 if a model failed.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from polyfuse.apps.onnx_run import _feeds, fuse_onnx, random_inputs
from polyfuse.core.program import PolyfuseError
from polyfuse.frontend.onnx import load_onnx_model
from polyfuse.runtime import device_target, get_context
from polyfuse.runtime.execute import time_interleaved

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "examples" / "models"
ROUNDS = 5  # alternating unfused / fused / onnxruntime rounds


def log(msg: str) -> None:
    """Progress on stderr: stdout holds only the table and the paths."""
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Row:
    """One model's measurements (times in seconds; None when not measured)."""

    model: str
    onnx_nodes: Optional[int] = None
    launches_before: Optional[int] = None
    launches_after: Optional[int] = None
    unfused_kernel: Optional[float] = None
    fused_kernel: Optional[float] = None
    unfused_wall: Optional[float] = None
    fused_wall: Optional[float] = None
    ort_wall: Optional[float] = None
    verified: Optional[bool] = None
    max_abs_err: Optional[float] = None
    fuse_seconds: Optional[float] = None
    error: str = ""

    @staticmethod
    def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
        return a / b if a and b else None

    @property
    def kernel_speedup(self) -> Optional[float]:
        return self._ratio(self.unfused_kernel, self.fused_kernel)

    @property
    def wall_speedup(self) -> Optional[float]:
        return self._ratio(self.unfused_wall, self.fused_wall)

    @property
    def vs_ort(self) -> Optional[float]:
        """onnxruntime wall / fused wall: above 1 means the fused program is faster."""
        return self._ratio(self.ort_wall, self.fused_wall)

    def csv_dict(self) -> dict[str, Any]:
        def us(v: Optional[float]) -> str:
            return "" if v is None else f"{v * 1e6:.3f}"

        def x(v: Optional[float]) -> str:
            return "" if v is None else f"{v:.4f}"

        def opt(v: Any) -> Any:
            return "" if v is None else v

        return {
            "model": self.model,
            "onnx_nodes": opt(self.onnx_nodes),
            "launches_before": opt(self.launches_before),
            "launches_after": opt(self.launches_after),
            "unfused_kernel_us": us(self.unfused_kernel),
            "fused_kernel_us": us(self.fused_kernel),
            "kernel_speedup": x(self.kernel_speedup),
            "unfused_wall_us": us(self.unfused_wall),
            "fused_wall_us": us(self.fused_wall),
            "wall_speedup": x(self.wall_speedup),
            "onnxruntime_wall_us": us(self.ort_wall),
            "onnxruntime_over_fused_wall": x(self.vs_ort),
            "verified": opt(self.verified),
            "max_abs_err": "" if self.max_abs_err is None else f"{self.max_abs_err:.3g}",
            "fuse_seconds": "" if self.fuse_seconds is None else f"{self.fuse_seconds:.2f}",
            "error": self.error,
        }


def ort_session(path: Path) -> Optional[Any]:
    """An onnxruntime CPU session, or None when onnxruntime is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def bench_model(path: Path, *, repeat: int, ctx: Any, queue: Any, device: Any) -> Row:
    """Load, fuse, verify and time one model; failures become the row's ``error``."""
    row = Row(path.stem)
    try:
        model = load_onnx_model(str(path), target=device_target(device))
        row.onnx_nodes = model.op_count
        t = time.perf_counter()
        res = fuse_onnx(str(path), verify=True, device=device)
        row.fuse_seconds = time.perf_counter() - t
        row.launches_before = res.plan.launches_before
        row.launches_after = res.fused.launches_after
        ver = res.verified or {}
        row.verified, row.max_abs_err = bool(ver.get("ok")), ver.get("max_abs_err")
        if not row.verified:
            row.error = f"verification failed: {ver.get('reference')}"
            return row

        # the same weights and graph inputs for all three (the fused record has no data):
        # _feeds maps ONNX names onto buffers and converts types as run_onnx does
        inputs = random_inputs(model, seed=0)
        data = _feeds(model, inputs)
        unfused = dataclasses.replace(model.program, data=data)
        fused_prog = res.fused.program
        fused = dataclasses.replace(
            fused_prog, data={k: v for k, v in data.items() if k in fused_prog.buffers})
        sess = ort_session(path)

        extra = {"onnxruntime": lambda: sess.run(None, inputs)} if sess is not None else {}
        t = time_interleaved({"unfused": unfused, "fused": fused}, repeat=repeat,
                             rounds=ROUNDS, ctx=ctx, queue=queue, extra=extra)
        row.unfused_kernel, row.unfused_wall = t["unfused"].kernel_time, t["unfused"].wall_time
        row.fused_kernel, row.fused_wall = t["fused"].kernel_time, t["fused"].wall_time
        if sess is not None:
            row.ort_wall = t["onnxruntime"].wall_time
    except PolyfuseError as err:
        row.error = str(err)
    return row


def table_text(rows: Sequence[Row]) -> str:
    def us(v: Optional[float]) -> str:
        return "-" if v is None else f"{v * 1e6:.1f}"

    def x(v: Optional[float]) -> str:
        return "-" if v is None else f"{v:.2f}x"

    head = (f"{'model':<15} {'nodes':>5} {'launches':>9} {'unf k us':>9} {'fus k us':>9} "
            f"{'k spdup':>8} {'unf w us':>9} {'fus w us':>9} {'w spdup':>8} {'ort w us':>9} "
            f"{'ort/fus':>8} verified")
    lines = [head, "-" * len(head)]
    for r in rows:
        launches = ("-" if r.launches_before is None
                    else f"{r.launches_before}->{r.launches_after}")
        ver = {None: "-", True: "yes", False: "NO"}[r.verified]
        nodes = "-" if r.onnx_nodes is None else str(r.onnx_nodes)
        lines.append(f"{r.model:<15} {nodes:>5} {launches:>9} {us(r.unfused_kernel):>9} "
                     f"{us(r.fused_kernel):>9} {x(r.kernel_speedup):>8} "
                     f"{us(r.unfused_wall):>9} {us(r.fused_wall):>9} {x(r.wall_speedup):>8} "
                     f"{us(r.ort_wall):>9} {x(r.vs_ort):>8} {ver}")
        if r.error:
            lines.append(f"{'':<15} ! {r.error[:150]}")
    return "\n".join(lines)


def plot(rows: Sequence[Row], path: Path, device: str) -> None:
    """Two panels: median wall time per model (unfused, fused, onnxruntime; log scale) and the
    speedups of the fused program (kernel and wall time over unfused, onnxruntime over fused)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = list(range(len(rows)))
    w = 0.27
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))

    def us(attr: str) -> list[float]:
        return [(getattr(r, attr) or 0.0) * 1e6 for r in rows]

    def ratio(attr: str) -> list[float]:
        return [getattr(r, attr) or 0.0 for r in rows]

    ax1.bar([x - w for x in xs], us("unfused_wall"), w, label="polyfuse unfused")
    ax1.bar(xs, us("fused_wall"), w, label="polyfuse fused")
    ax1.bar([x + w for x in xs], us("ort_wall"), w, label="onnxruntime CPU")
    ax1.set_yscale("log")
    ax1.set_ylabel("median wall time per inference (µs)")
    ax1.set_title("latency")
    ax2.bar([x - w for x in xs], ratio("kernel_speedup"), w, label="kernel: unfused / fused")
    ax2.bar(xs, ratio("wall_speedup"), w, label="wall: unfused / fused")
    ax2.bar([x + w for x in xs], ratio("vs_ort"), w, label="wall: onnxruntime / fused")
    ax2.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    top = max([v for a in ("kernel_speedup", "wall_speedup", "vs_ort") for v in ratio(a)] + [1.0])
    ax2.set_ylim(0, top * 1.35)  # room for the legend above the bars
    ax2.set_ylabel("ratio (> 1: fused is faster)")
    ax2.set_title("speedup of the fused program")
    for x, r in zip(xs, rows):
        if r.launches_before is not None:
            ax2.annotate(f"{r.launches_before}→{r.launches_after}", (x, 0), xytext=(0, 2),
                         textcoords="offset points", ha="center", fontsize=7)
        if r.error:
            ax2.annotate("✗" if r.verified is False else "n/a", (x, 0.05), ha="center",
                         color="red", xycoords=("data", "axes fraction"))
    for ax in (ax1, ax2):
        ax.set_xticks(xs)
        ax.set_xticklabels([r.model for r in rows], rotation=25, ha="right", fontsize=8)
        ax.legend(fontsize=8, loc="upper right")
    fig.suptitle(f"bundled ONNX models on {device} (launch counts before→after)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=60,
                    help=f"timed executions per program (split into {ROUNDS} alternating rounds)")
    ap.add_argument("--models", nargs="*", metavar="NAME",
                    help="only these models (file stems in examples/models, e.g. bert_qkv)")
    ap.add_argument("--device", default=None, help="OpenCL device (PLATFORM:DEVICE)")
    ap.add_argument("--out", type=Path, default=ROOT / "analysis" / "results",
                    help="directory for onnx_models.csv and onnx_models.png")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")

    paths = sorted(MODELS.glob("*.onnx"))
    if args.models:
        wanted = {Path(m).stem for m in args.models}
        unknown = wanted - {p.stem for p in paths}
        if unknown:
            ap.error(f"unknown model(s): {', '.join(sorted(unknown))} (have: "
                     f"{', '.join(p.stem for p in paths)})")
        paths = [p for p in paths if p.stem in wanted]

    ctx, queue = get_context(args.device)
    dev = ctx.devices[0]
    device = f"{dev.name.strip()} ({dev.platform.name.strip()})"
    log(f"device: {device}; {len(paths)} models, repeat {args.repeat}")
    rows = []
    t0 = time.perf_counter()
    for p in paths:
        t = time.perf_counter()
        rows.append(bench_model(p, repeat=args.repeat, ctx=ctx, queue=queue, device=dev))
        log(f"{p.stem}: {time.perf_counter() - t:.1f}s")

    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / "onnx_models.csv"
    png_path = args.out / "onnx_models.png"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(Row("").csv_dict()))
        writer.writeheader()
        for r in rows:
            writer.writerow(r.csv_dict())
    if rows:
        plot(rows, png_path, device)
    print(f"bundled ONNX models on {device}: medians of {args.repeat} executions "
          f"(k = kernel time from profiling events, w = host wall time of a whole execution; "
          f"ort = onnxruntime CPU session.run; spdup = unfused / fused, ort/fus = onnxruntime "
          f"/ fused wall)")
    print(table_text(rows))
    print(f"wrote {csv_path}")
    if rows:
        print(f"wrote {png_path}")
    log(f"total {time.perf_counter() - t0:.1f}s")
    return 1 if any(r.error or r.verified is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
