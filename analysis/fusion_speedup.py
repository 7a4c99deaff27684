"""Fused vs unfused run time of every bundled example, measured in one run on one device.

For each ``examples/*/`` program (``kernels.cl`` + ``host.c``): plan (``plan_fusion``, or
``autotune`` with ``--tune``), generate, verify the fused program against the unfused one on the
same random inputs, then time both on one OpenCL queue.  Timing alternates unfused and fused in
rounds (so a frequency change or a noisy neighbour hits both alike) and reports medians of
profiling-event kernel time and of host wall time per whole execution, the launch counts before
and after fusion, and the speedup ratios (unfused / fused).  A fused program that fails
verification is not timed: the speedup of a wrong answer is not reported.

    .venv/bin/python analysis/fusion_speedup.py [--repeat 60] [--tune [--metric wall]] [--out DIR]
                                      [--param n=4096] [--examples qkv ...] [--device SPEC]

Run-time values (``atoi(argv[k])``) take the host's own default (``argc > k ? atoi(argv[k]) :
DEFAULT``, with ``#define`` constants resolved); a value with no default comes from
:data:`DEFAULT_PARAMS` (e.g. ``runtime_offset``'s ``m``) or ``--param``.  Writes
``DIR/fusion_speedup.csv`` and ``DIR/fusion_speedup.png`` (default DIR: ``analysis/results``) and
prints the table and the paths; progress goes to stderr.  Exit status 1 if any example failed to
fuse or verify.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import polyfuse
from polyfuse.codegen import FusedProgram, generate_fused
from polyfuse.fusion import plan_fusion
from polyfuse.passes.orchestration_tuning import TuneError, autotune
from polyfuse.runtime import device_target, get_context, verify_programs
from polyfuse.runtime.execute import time_interleaved

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

#: values for run-time parameters whose host code has no default (see each example's README)
DEFAULT_PARAMS: dict[str, dict[str, int]] = {
    "runtime_offset": {"m": 3},  # m = 3: the global-edge case (no fusion), README's witness
}


def log(msg: str) -> None:
    """Progress on stderr: stdout holds only the table and the paths."""
    print(msg, file=sys.stderr, flush=True)


def host_defaults(host_c: Path) -> dict[str, int]:
    """``NAME = argc > K ? atoi(argv[K]) : DEFAULT`` in the host, ``#define`` s resolved.

    The front-end (rightly) keeps such values symbolic; the benchmark needs the value the
    program would run with when started without arguments.
    """
    text = host_c.read_text()
    defines = dict(re.findall(r"^\s*#\s*define\s+(\w+)\s+(\S+)\s*$", text, flags=re.M))
    out: dict[str, int] = {}
    pat = r"\b(\w+)\s*=\s*argc\s*>\s*\d+\s*\?\s*atoi\s*\(\s*argv\s*\[\s*\d+\s*\]\s*\)\s*:\s*(\w+)"
    for name, default in re.findall(pat, text):
        seen = set()
        while default in defines and default not in seen:
            seen.add(default)
            default = defines[default]
        try:
            out[name] = int(default.strip("()"), 0)
        except ValueError:
            continue
    return out


@dataclass
class Row:
    """One example's measurements (times in seconds; None when not measured)."""

    example: str
    params: dict[str, int] = field(default_factory=dict)
    variant: str = ""
    launches_before: Optional[int] = None
    launches_after: Optional[int] = None
    unfused_kernel: Optional[float] = None
    fused_kernel: Optional[float] = None
    unfused_wall: Optional[float] = None
    fused_wall: Optional[float] = None
    kernel_spread: Optional[float] = None
    verified: Optional[bool] = None
    max_abs_err: Optional[float] = None
    tuned_from_cache: Optional[bool] = None
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

    def csv_dict(self) -> dict[str, Any]:
        def us(v: Optional[float]) -> str:
            return "" if v is None else f"{v * 1e6:.3f}"

        def x(v: Optional[float]) -> str:
            return "" if v is None else f"{v:.4f}"

        return {
            "example": self.example,
            "params": " ".join(f"{k}={v}" for k, v in sorted(self.params.items())),
            "variant": self.variant,
            "launches_before": "" if self.launches_before is None else self.launches_before,
            "launches_after": "" if self.launches_after is None else self.launches_after,
            "unfused_kernel_us": us(self.unfused_kernel),
            "fused_kernel_us": us(self.fused_kernel),
            "kernel_speedup": x(self.kernel_speedup),
            "unfused_wall_us": us(self.unfused_wall),
            "fused_wall_us": us(self.fused_wall),
            "wall_speedup": x(self.wall_speedup),
            "fused_kernel_spread": x(self.kernel_spread),
            "verified": "" if self.verified is None else self.verified,
            "max_abs_err": "" if self.max_abs_err is None else f"{self.max_abs_err:.3g}",
            "tuned_from_cache": "" if self.tuned_from_cache is None else self.tuned_from_cache,
            "error": self.error,
        }


def bench_example(d: Path, *, repeat: int, tune: bool, extra: Mapping[str, int], ctx: Any,
                  queue: Any, metric: str = "kernel") -> Row:
    """Plan, generate, verify and time one example; failures become the row's ``error``."""
    row = Row(d.name)
    try:
        program = polyfuse.load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))
        values = {**host_defaults(d / "host.c"), **DEFAULT_PARAMS.get(d.name, {}), **extra}
        row.params = {p: values[p] for p in program.params if p in values}
        missing = [p for p in program.params if p not in values]
        if missing:
            row.error = f"no value for run-time parameter(s) {missing}: pass --param"
            return row
        fused: FusedProgram
        if tune:
            res = autotune(program, params=row.params, repeat=max(3, repeat // 3), ctx=ctx,
                           queue=queue, progress=lambda m: log(f"  {m}"), metric=metric)
            fused, row.variant, row.tuned_from_cache = res.fused, res.variant, res.cached
        else:
            fused = generate_fused(plan_fusion(polyfuse.build_uar(program)),
                             target=device_target(ctx.devices[0]))
            orch = sorted({g.orchestration for g in fused.plan.groups})
            row.variant = "auto:" + "+".join(orch)
        row.launches_before = fused.plan.launches_before
        row.launches_after = fused.launches_after
        v = verify_programs(program, fused.program, params=row.params,
                            buffers=fused.compared_buffers, ctx=ctx, queue=queue)
        row.verified, row.max_abs_err = v.ok, v.max_abs_err
        if not v.ok:
            row.error = f"verification failed: {v.summary()}"
            return row
        t = time_interleaved({"unfused": program, "fused": fused.program}, params=row.params,
                             repeat=repeat, ctx=ctx, queue=queue)
        row.unfused_kernel, row.unfused_wall = t["unfused"].kernel_time, t["unfused"].wall_time
        row.fused_kernel, row.fused_wall = t["fused"].kernel_time, t["fused"].wall_time
        row.kernel_spread = t["fused"].spread
    except TuneError as err:
        row.verified = False
        row.error = str(err)
    except polyfuse.PolyfuseError as err:
        row.error = str(err)
    return row


def table_text(rows: Sequence[Row]) -> str:
    def us(v: Optional[float]) -> str:
        return "-" if v is None else f"{v * 1e6:.1f}"

    def x(v: Optional[float]) -> str:
        return "-" if v is None else f"{v:.2f}x"

    head = (f"{'example':<25} {'variant':<16} {'launches':>9} {'unfused k us':>12} "
            f"{'fused k us':>11} {'k speedup':>9} {'unfused w us':>12} {'fused w us':>11} "
            f"{'w speedup':>9} verified")
    lines = [head, "-" * len(head)]
    for r in rows:
        launches = ("-" if r.launches_before is None
                    else f"{r.launches_before}->{r.launches_after}")
        ver = {None: "-", True: "yes", False: "NO"}[r.verified]
        lines.append(f"{r.example:<25} {r.variant:<16} {launches:>9} {us(r.unfused_kernel):>12} "
                     f"{us(r.fused_kernel):>11} {x(r.kernel_speedup):>9} "
                     f"{us(r.unfused_wall):>12} {us(r.fused_wall):>11} "
                     f"{x(r.wall_speedup):>9} {ver}")
        if r.error:
            lines.append(f"{'':<25} ! {r.error[:150]}")
    return "\n".join(lines)


def plot(rows: Sequence[Row], path: Path, device: str) -> None:
    """Two panels: median kernel time unfused vs fused (log), and both speedups."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.example for r in rows]
    xs = list(range(len(rows)))
    w = 0.38
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8))

    def vals(attr: str) -> list[float]:
        return [(getattr(r, attr) or 0.0) * (1e6 if "speedup" not in attr else 1.0)
                for r in rows]

    ax1.bar([x - w / 2 for x in xs], vals("unfused_kernel"), w, label="unfused")
    ax1.bar([x + w / 2 for x in xs], vals("fused_kernel"), w, label="fused")
    ax1.set_yscale("log")
    ax1.set_ylabel("median kernel time (µs, profiling events)")
    ax1.set_title("kernel time")
    ax2.bar([x - w / 2 for x in xs], vals("kernel_speedup"), w, label="kernel time")
    ax2.bar([x + w / 2 for x in xs], vals("wall_speedup"), w, label="wall time")
    ax2.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax2.set_ylabel("speedup (unfused / fused)")
    ax2.set_title("speedup")
    for x, r in zip(xs, rows):
        if r.launches_before is not None:
            ax2.annotate(f"{r.launches_before}→{r.launches_after}", (x, 0), xytext=(0, 2),
                         textcoords="offset points", ha="center", fontsize=7)
        if r.error:
            ax2.annotate("✗" if r.verified is False else "n/a", (x, 0.05), ha="center",
                         color="red", xycoords=("data", "axes fraction"))
    for ax in (ax1, ax2):
        ax.set_xticks(xs)
        ax.set_xticklabels(names, rotation=35, ha="right", fontsize=8)
        ax.legend(fontsize=8)
    fig.suptitle(f"polyfuse fusion speedup on {device} (launch counts before→after)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_params(items: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise SystemExit(f"fusion_speedup.py: --param expects NAME=VALUE, not {item!r}")
        try:
            out[name] = int(value, 0)
        except ValueError:
            raise SystemExit(f"fusion_speedup.py: --param {name}: not an integer: "
                             f"{value!r}") from None
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=60,
                    help="timed executions per program (split into 5 alternating rounds)")
    ap.add_argument("--tune", action="store_true",
                    help="choose the orchestration variant by timing "
                         "(polyfuse.passes.orchestration_tuning)")
    ap.add_argument("--metric", choices=("kernel", "wall"), default="kernel",
                    help="with --tune: the median that decides (kernel events or wall time)")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="fix a run-time value for every example that has it")
    ap.add_argument("--examples", nargs="*", help="only these example directories")
    ap.add_argument("--device", default=None, help="OpenCL device (PLATFORM:DEVICE)")
    ap.add_argument("--out", type=Path, default=ROOT / "analysis" / "results")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    extra = parse_params(args.param)

    dirs = sorted(p for p in EXAMPLES.iterdir()
                  if (p / "kernels.cl").exists() and (p / "host.c").exists())
    if args.examples:
        unknown = set(args.examples) - {p.name for p in dirs}
        if unknown:
            ap.error(f"unknown example(s): {', '.join(sorted(unknown))}")
        dirs = [p for p in dirs if p.name in args.examples]

    ctx, queue = get_context(args.device)
    device = ctx.devices[0].name.strip()
    log(f"device: {device}; {len(dirs)} examples, repeat {args.repeat}"
        f"{', autotuned' if args.tune else ''}")
    rows = []
    t0 = time.perf_counter()
    for d in dirs:
        t = time.perf_counter()
        rows.append(bench_example(d, repeat=args.repeat, tune=args.tune, extra=extra, ctx=ctx,
                                  queue=queue, metric=args.metric))
        log(f"{d.name}: {time.perf_counter() - t:.1f}s")

    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / "fusion_speedup.csv"
    png_path = args.out / "fusion_speedup.png"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0].csv_dict()) if rows else ["example"])
        writer.writeheader()
        for r in rows:
            writer.writerow(r.csv_dict())
    if rows:
        plot(rows, png_path, device)
    print(f"fusion speedup on {device} (medians of {args.repeat} executions; k = kernel time "
          f"from profiling events, w = host wall time of a whole execution)")
    print(table_text(rows))
    print(f"wrote {csv_path}")
    if rows:
        print(f"wrote {png_path}")
    log(f"total {time.perf_counter() - t0:.1f}s")
    return 1 if any(r.error or r.verified is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
