"""Real OpenCL applications as shipped: ``polyfuse fuse --verify`` over a corpus manifest.

The manifest (``/work/shared/realworld-dev/manifest.tsv``, described in its ``SOURCES.txt``) has
one tab-separated row per program: ``name``, ``dir`` (where the program runs; paths are relative
to the manifest), ``kernels`` (the ``.cl`` files the host opens), ``hosts`` (its source files),
``flags`` (``-I``/``-D``/``--args`` as its build and run use them) and a ``note``.  Each row runs
as ``polyfuse fuse KERNELS --host H ... FLAGS --out OUT --verify`` in ``dir``, one program at a
time under a per-program timeout, and is classed as

- ``OK``: exit 0 and ``plan.json`` says verified;
- ``MISMATCH``: exit 0 but the fused program's buffers differ from the unfused one's;
- ``TIMEOUT``: still running at the timeout;
- ``ERROR``: polyfuse refused; the class is its error line without the file and line, so that
  refusals of the same kind count together.

The table (class, launches before -> after, seconds) goes to stdout and ``--out/realworld.tsv``.

    nice -n 10 python analysis/realworld.py [--manifest M] [--timeout 150] [--only SUBSTR]
                                            [--out DIR]
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = Path("/work/shared/realworld-dev/manifest.tsv")


def command(row: dict[str, str], out: Path) -> list[str]:
    """The ``polyfuse fuse`` command line of one manifest row."""
    cmd = [sys.executable, "-m", "polyfuse", "-q", "fuse", *row["kernels"].split()]
    for host in row["hosts"].split():
        cmd += ["--host", host]
    return cmd + shlex.split(row["flags"]) + ["--out", str(out), "--verify"]


def error_class(line: str) -> str:
    """An error line without ``polyfuse: error:``, the file and line, and quoted names, so
    that refusals of one kind share a class."""
    text = re.sub(r"^polyfuse: error: ", "", line.strip())
    text = re.sub(r"^\S+?(:\d+)?: ", "", text)  # the user's file and line
    text = re.sub(r"^function \w+: |^kernel \w+: |^plan group \d+ \(\w+\): ", "", text)
    text = re.sub(r"'[^']*'", "'…'", text)
    return text[:90]


def run_row(row: dict[str, str], base: Path, timeout: float) -> dict[str, object]:
    """Run one program; its outcome, launch counts and wall seconds."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory(prefix="realworld-") as tmp:
        out = Path(tmp) / "out"
        t = time.perf_counter()
        try:
            p = subprocess.run(command(row, out), cwd=base / row["dir"], env=env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"outcome": "TIMEOUT", "class": f"over {timeout:g} s", "before": "",
                    "after": "", "seconds": round(time.perf_counter() - t, 1)}
        seconds = round(time.perf_counter() - t, 1)
        plan = out / "plan.json"
        if p.returncode != 0 or not plan.exists():
            lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
            last = next((ln for ln in reversed(lines) if ln.startswith("polyfuse: error")),
                        lines[-1] if lines else f"exit {p.returncode}")
            return {"outcome": "ERROR", "class": error_class(last), "before": "",
                    "after": "", "seconds": seconds, "message": last}
        data = json.loads(plan.read_text())
        ok = data.get("verified", {}).get("ok")
        return {"outcome": "OK" if ok else "MISMATCH", "class": "verified" if ok else
                "buffers differ", "before": data["launches_before"],
                "after": data["launches_after"], "seconds": seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", type=Path, default=MANIFEST)
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds per program")
    ap.add_argument("--only", default="", help="run the rows whose name contains this")
    ap.add_argument("--out", type=Path, default=ROOT / "analysis" / "results")
    args = ap.parse_args()
    base = args.manifest.resolve().parent
    with open(args.manifest, newline="") as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t") if args.only in r["name"]]
    results = []
    for row in rows:
        r = run_row(row, base, args.timeout)
        results.append({"name": row["name"], **r})
        print(f"{r['outcome']:8} {r['before']!s:>4} -> {r['after']!s:<4} {r['seconds']:6}s  "
              f"{row['name']}  {r['class'] if r['outcome'] != 'OK' else ''}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    table = args.out / "realworld.tsv"
    with open(table, "w", newline="") as f:
        w = csv.writer(f, delimiter="\t")
        w.writerow(["name", "outcome", "class", "launches_before", "launches_after",
                    "seconds", "message"])
        for r in results:
            w.writerow([r["name"], r["outcome"], r["class"], r["before"], r["after"],
                        r["seconds"], r.get("message", "")])
    counts = collections.Counter(r["outcome"] for r in results)
    classes = collections.Counter(r["class"] for r in results if r["outcome"] == "ERROR")
    print(f"\n{counts['OK']} of {len(results)} OK; " +
          ", ".join(f"{n} {k}" for k, n in sorted(counts.items()) if k != "OK"))
    for cls, n in classes.most_common():
        print(f"{n:4}  {cls}")
    print(f"table: {table}")


if __name__ == "__main__":
    main()
