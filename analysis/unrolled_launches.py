"""Dependence analysis of long unrolled launch sequences: whole-sequence flow against the
sink-by-sink flow, on the PolyBench gramschmidt-style host of the test suite.

PolyBench's gramschmidt and lu launch their kernels from a host loop whose launches depend on
the iterator (a global size ``ceil((N - k - 1) / 4) * 4``, a launch under ``if``), so polyfuse
unrolls it: 3N launches.  For each size the two flows are timed interleaved (CPU seconds,
median and spread over the repetitions) and their results checked equal; the whole-sequence
flow is skipped above ``--max-whole`` launches (it grows faster than quadratically).  The total
``analyze`` CPU time is measured last, in a subprocess per size.

    python analysis/unrolled_launches.py [--sizes 16 32 64 256] [--reps 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = ROOT / "tests" / "host_programs" / "polybench_gramschmidt" / "gramschmidt.c"


def _flows(n: int, reps: int, max_whole: int) -> dict:
    from polyfuse.frontend.host import load_opencl
    from polyfuse.uar import deps
    from polyfuse.uar.effects import instantiate

    program = load_opencl(None, host=str(HOST), defines={"NI": str(n), "NJ": str(n)})
    inst = instantiate(program)
    sched = deps.host_schedule(inst)
    modes = {"windowed": 0}
    if len(program.launches) <= max_whole:
        modes["whole"] = 10**9
    times: dict[str, list[float]] = {m: [] for m in modes}
    results: dict[str, dict] = {}
    for _ in range(reps):
        for mode, threshold in modes.items():  # interleaved
            deps.WINDOW_MIN_OPS = threshold
            t = time.process_time()
            found = deps.dependences(inst, sched)
            times[mode].append(time.process_time() - t)
            results[mode] = {(d.kind, d.buffer, d.src, d.dst): d.relation for d in found}
    equal = None
    if "whole" in results:
        a, b = results["whole"], results["windowed"]
        equal = set(a) == set(b) and all(a[k].is_equal(b[k]) for k in a)
    row = {"n": n, "launches": len(program.launches), "edges": len(results["windowed"]),
           "equal": equal}
    for mode in ("whole", "windowed"):
        ts = times.get(mode)
        row[f"{mode}_median_s"] = statistics.median(ts) if ts else None
        row[f"{mode}_spread_s"] = (max(ts) - min(ts)) if ts else None
    return row


def _analyze_cpu(n: int) -> float:
    """CPU seconds of ``polyfuse analyze`` (child process) on the host at size ``n``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    before = os.times()
    subprocess.run([sys.executable, "-m", "polyfuse", "analyze", "--host", str(HOST),
                    "-D", f"NI={n}", "-D", f"NJ={n}"], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = os.times()
    return (after.children_user - before.children_user) + \
        (after.children_system - before.children_system)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 32, 64, 256])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-whole", type=int, default=100,
                    help="largest launch count the whole-sequence flow is timed at")
    ap.add_argument("--out", type=Path, default=ROOT / "analysis" / "results")
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        print(f"unrolled_launches: N={n} ...", file=sys.stderr, flush=True)
        row = _flows(n, args.reps, args.max_whole)
        row["analyze_cpu_s"] = _analyze_cpu(n)
        rows.append(row)
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k])
                                for k in keys) + " |")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "unrolled_launches.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
