"""Cost of running ``polyfuse fuse`` in a worker process (so a native crash is one line).

The CLI's OpenCL ``fuse`` runs its job in a spawned worker
(:mod:`polyfuse.core.watchdog`); the worker imports polyfuse again.  This script runs ``fuse
--verify`` on a bundled example both ways, alternately, ``--repeat`` times: ``worker`` is the CLI as
shipped, ``in-process`` the same CLI with the worker call replaced by a direct call.  It reports the
medians and the spread (min..max) of wall time and of CPU time (the command's process tree).

    python analysis/worker_overhead.py [--example elementwise_chain] [--repeat 5] [--out DIR]

Writes ``DIR/worker_overhead.md`` (default DIR ``analysis/results``).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_IN_PROCESS = """
import sys
import polyfuse.core.watchdog as w
w.call_with_budget = lambda fn, args=(), kwargs=None, **kw: fn(*args, progress=None,
                                                               **(kwargs or {}))
from polyfuse.apps.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run(mode: str, example: Path, out: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its children) of one ``fuse --verify``."""
    head = [sys.executable, "-m", "polyfuse"] if mode == "worker" else \
        [sys.executable, "-c", _IN_PROCESS]
    argv = [*head, "fuse", str(example / "kernels.cl"), "--host", str(example / "host.c"),
            "--out", str(out), "--verify", "-q"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, env=env, capture_output=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--example", default="elementwise_chain")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "analysis" / "results"))
    args = ap.parse_args()
    example = ROOT / "examples" / args.example
    samples: dict[str, list[tuple[float, float]]] = {"worker": [], "in-process": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            for mode in (("worker", "in-process") if r % 2 == 0 else ("in-process", "worker")):
                samples[mode].append(_run(mode, example, Path(tmp) / mode))
    lines = [f"# `fuse --verify` in a worker process vs in-process ({args.example}, "
             f"{args.repeat} alternating runs each)", "",
             "| mode | wall median (min..max) s | CPU median (min..max) s |", "|---|---|---|"]
    for mode, runs in samples.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        lines.append(f"| {mode} | {statistics.median(walls):.2f} ({min(walls):.2f}.."
                     f"{max(walls):.2f}) | {statistics.median(cpus):.2f} ({min(cpus):.2f}.."
                     f"{max(cpus):.2f}) |")
    w_cpu = statistics.median(c for _, c in samples["worker"])
    i_cpu = statistics.median(c for _, c in samples["in-process"])
    lines += ["", f"Worker overhead (CPU, medians): {w_cpu - i_cpu:+.2f} s "
                  f"({(w_cpu / i_cpu - 1) * 100:+.0f} %)."]
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "worker_overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
