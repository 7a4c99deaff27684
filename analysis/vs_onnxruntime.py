"""polyfuse's InferenceSession (fused and unfused) against onnxruntime, as a user runs them.

For every bundled model (``examples/models/*.onnx``) and every model named on the command line:
one ``onnxruntime.InferenceSession`` (CPU provider, 1 intra-op and 1 inter-op thread), one
``polyfuse.InferenceSession`` fused and one unfused, each built once.  The outputs of both
polyfuse sessions are checked against onnxruntime's (rtol 1e-4, atol 1e-5) on seeded random
inputs before anything is timed; a model that fails the check is reported, not timed.  Timing:
``session.run(None, feeds)`` wall time, the three sessions alternating in ``--rounds`` rounds in
one process so that load drift on a shared machine hits them alike; medians and IQR/median
spread.  Then one fused model's run is split into device-kernel time (profiling events of
profiled runs) and host time (the wall time of plain runs minus that).

    python analysis/vs_onnxruntime.py [MODEL.onnx ...] [--only bert_qkv mlp_gelu_ln ...]
                                      [--repeat 60] [--rounds 5] [--out DIR] [--device SPEC]
                                      [--breakdown bert_qkv]

Prints the table, the geometric means and the breakdown; writes ``DIR/vs_onnxruntime.csv``
(default DIR: ``analysis/results``) and prints its path.  Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

import numpy as np

import polyfuse
from polyfuse.apps.onnx_run import ATOL, RTOL, random_inputs

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "examples" / "models"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def ort_session(path: str, profile_prefix: Optional[str] = None) -> Any:
    """onnxruntime on the CPU with one thread; with ``profile_prefix`` its profiler on, writing
    there (``end_profiling()`` returns the file)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    if profile_prefix is not None:
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


#: seconds each callable runs before it is timed: on a VM's second vCPU a two-thread device
#: (PoCL ``pthread``) runs at one core's speed for its first 50-80 ms of load after the
#: vCPU idled (a cold build, a sleep), so a single warm-up run times the host's scheduler
WARM_UP_S = 0.3


def warm_up(fns: dict[str, Callable[[], Any]], seconds: float = WARM_UP_S) -> None:
    """Run each callable at least once and for ``seconds`` of back-to-back runs."""
    for fn in fns.values():
        t0 = time.perf_counter()
        fn()
        while time.perf_counter() - t0 < seconds:
            fn()


def interleaved(fns: dict[str, Callable[[], Any]], repeat: int, rounds: int
                ) -> dict[str, list[float]]:
    """Wall-time samples of each callable, alternating in rounds (each warmed up first)."""
    warm_up(fns)
    per = max(1, -(-repeat // rounds))
    out: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(per):
                t0 = time.perf_counter()
                fn()
                out[name].append(time.perf_counter() - t0)
    return out


def spread(samples: Sequence[float]) -> float:
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    return float((q3 - q1) / med) if med else 0.0


def check(outs: Sequence[np.ndarray], ref: Sequence[np.ndarray]) -> Optional[str]:
    """None when every output matches onnxruntime's, else what differs."""
    for i, (a, r) in enumerate(zip(outs, ref)):
        if a.shape != r.shape:
            return f"output {i}: shape {a.shape} vs {r.shape}"
        if not np.allclose(a, r, rtol=RTOL, atol=ATOL, equal_nan=True):
            err = float(np.max(np.abs(a.astype(np.float64) - r)))
            return f"output {i}: max abs err {err:.3g}"
    return None


def measure(path: Path, repeat: int, rounds: int, device: Optional[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"model": path.stem}
    t0 = time.perf_counter()
    fused = polyfuse.InferenceSession(str(path), device=device)
    unfused = polyfuse.InferenceSession(str(path), fused=False, device=device)
    row["setup_s"] = time.perf_counter() - t0
    row["launches_fused"], row["launches_unfused"] = fused.launches, unfused.launches
    row["form_fused"] = (fused.form_choice or {}).get("form")
    row["form_unfused"] = (unfused.form_choice or {}).get("form")
    ref_sess = ort_session(str(path))
    feeds = random_inputs(fused.io, seed=0)
    ref = ref_sess.run(None, feeds)
    for name, sess in (("fused", fused), ("unfused", unfused)):
        bad = check(sess.run(None, feeds), ref)
        if bad:
            row["error"] = f"{name} differs from onnxruntime: {bad}"
            return row
    samples = interleaved({"onnxruntime": lambda: ref_sess.run(None, feeds),
                           "fused": lambda: fused.run(None, feeds),
                           "unfused": lambda: unfused.run(None, feeds)}, repeat, rounds)
    for name, s in samples.items():
        row[f"{name}_us"] = float(np.median(s)) * 1e6
        row[f"{name}_spread"] = spread(s)
    row["fused_vs_ort"] = row["fused_us"] / row["onnxruntime_us"]
    row["fused_vs_unfused"] = row["fused_us"] / row["unfused_us"]
    return row


def breakdown(path: Path, repeat: int, device: Optional[str]) -> dict[str, float]:
    """Median kernel time (profiling events of profiled runs) and wall time of plain runs
    (profiling itself costs host time), alternating; host = wall - kernel."""
    sess = polyfuse.InferenceSession(str(path), device=device)
    feeds = random_inputs(sess.io, seed=0)
    sess.run_profiled(feeds)
    kern, wall = [], []
    for _ in range(repeat):
        kern.append(sess.run_profiled(feeds)[1])
        t0 = time.perf_counter()
        sess.run(None, feeds)
        wall.append(time.perf_counter() - t0)
    k, w = float(np.median(kern)), float(np.median(wall))
    return {"kernel_us": k * 1e6, "wall_us": w * 1e6, "host_us": max(0.0, w - k) * 1e6,
            "launches": sess.launches}


def geomean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help="extra ONNX models")
    ap.add_argument("--only", nargs="*", help="bundled model stems to run (default: all)")
    ap.add_argument("--repeat", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "analysis" / "results"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--breakdown", default="bert_qkv", help="model stem or path to break down")
    args = ap.parse_args(argv)
    paths = sorted(MODELS.glob("*.onnx"))
    if args.only is not None:
        paths = [p for p in paths if p.stem in set(args.only)]
    paths += [Path(m) for m in args.models]
    rows = []
    for p in paths:
        log(f"{p.stem}: building sessions and timing")
        try:
            rows.append(measure(p, args.repeat, args.rounds, args.device))
        except polyfuse.PolyfuseError as err:
            rows.append({"model": p.stem, "error": str(err).splitlines()[0]})
        log(f"  {rows[-1]}")
    cols = ["model", "launches_unfused", "launches_fused", "form_fused", "onnxruntime_us",
            "fused_us", "unfused_us", "fused_vs_ort", "fused_vs_unfused", "onnxruntime_spread",
            "fused_spread", "unfused_spread", "setup_s", "form_unfused", "error"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / "vs_onnxruntime.csv"
    with open(csv_path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in cols})

    def fmt(v: Any, spec: str = ".1f") -> str:
        return format(v, spec) if isinstance(v, float) else ("" if v is None else str(v))

    head = ["model", "launches", "ort us", "fused us", "unfused us", "fused/ort",
            "fused/unfused", "spread f/o/u"]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['model']} | ERROR: {r['error']}")
            continue
        lines.append(" | ".join([
            r["model"], f"{r['launches_unfused']} -> {r['launches_fused']}",
            fmt(r["onnxruntime_us"]), fmt(r["fused_us"]), fmt(r["unfused_us"]),
            fmt(r["fused_vs_ort"], ".2f"), fmt(r["fused_vs_unfused"], ".2f"),
            "/".join(fmt(r[f"{k}_spread"], ".2f") for k in ("fused", "onnxruntime",
                                                             "unfused"))]))
    print("\n".join(lines))
    ok = [r for r in rows if "error" not in r]
    print(f"\ngeomean fused/onnxruntime: {geomean([r['fused_vs_ort'] for r in ok]):.2f} "
          f"(max {max((r['fused_vs_ort'] for r in ok), default=float('nan')):.2f}); "
          f"geomean fused/unfused: {geomean([r['fused_vs_unfused'] for r in ok]):.2f}; "
          f"{len(ok)} of {len(rows)} models timed")
    if args.breakdown:
        bp = Path(args.breakdown)
        if not bp.is_file():
            bp = MODELS / f"{args.breakdown}.onnx"
        b = breakdown(bp, args.repeat, args.device)
        print(f"\nbreakdown of one fused run of {bp.stem} ({b['launches']} launch(es)): "
              f"wall {b['wall_us']:.1f} us = kernels {b['kernel_us']:.1f} us + host "
              f"{b['host_us']:.1f} us")
    print(f"\nwrote {csv_path}")
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
