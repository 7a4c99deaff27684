"""Sequential gcc -O2 vs auto-parallelized OpenCL (polyfuse.autopar) on every test C program.

For each ``tests/autopar_kernels/*.c``: parallelize it (``parallelize_file``), build the original
with ``gcc -O2`` and the generated host program with ``gcc -O2 -lOpenCL``, check that both print
the same bytes, then time whole executions alternately (so machine noise hits both alike) and
report medians and the ratio sequential / OpenCL.  The OpenCL time includes context creation and
program build (PoCL caches compiled kernels after the first run, which is excluded as warm-up),
buffer copies and launches: it is what a user of the generated program waits for.  Also lists
which loops were mapped onto the NDRange.

    .venv/bin/python analysis/autopar.py [--repeat 5] [--out DIR] [--size NAME=VALUE ...]

Writes ``DIR/autopar.csv`` and ``DIR/autopar.md`` (default DIR ``analysis/results``).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from polyfuse.autopar import parallelize_file  # noqa: E402

KDIR = ROOT / "tests" / "autopar_kernels"

#: larger sizes than the defaults, so that the loops do measurable work
SIZES: dict[str, dict[str, str]] = {
    "gemm": {"NI": "512", "NJ": "512", "NK": "512"},
    "jacobi1d": {"N": "200000", "TSTEPS": "100"},
    "jacobi2d": {"N": "1000", "TSTEPS": "50"},
    "atax": {"M": "2000", "N": "2000"},
    "bicg": {"M": "2000", "N": "2000"},
    "polybench_gesummv": {"N": "1000"},
}


def _wall(cmd: list[str]) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, check=True)
    return time.perf_counter() - t0, p.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "analysis" / "results"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for src in sorted(KDIR.glob("*.c")):
            name = src.stem
            defines = SIZES.get(name, {})
            dflags = [f"-D{k}={v}" for k, v in defines.items()]
            res = parallelize_file(src, include_dirs=[str(KDIR)], defines=defines,
                                   out_dir=Path(tmp) / name)
            orig, par = Path(tmp) / f"{name}.orig", Path(tmp) / f"{name}.par"
            subprocess.run(["gcc", "-O2", "-std=c99", f"-I{KDIR}", *dflags, "-o", str(orig),
                            str(src), "-lm"], check=True)
            subprocess.run(["gcc", "-O2", "-std=c99", f"-I{KDIR}", *dflags, "-o", str(par),
                            str(res.host_path), "-lOpenCL", "-lm"], check=True)
            _, a = _wall([str(orig)])
            _, b = _wall([str(par)])  # warm-up: PoCL compiles and caches the kernels
            same = a == b
            ts, tp = [], []
            for _ in range(args.repeat):
                ts.append(_wall([str(orig)])[0])
                tp.append(_wall([str(par)])[0])
            seq, ocl = statistics.median(ts), statistics.median(tp)
            loops = "; ".join(
                f"{p.region.function}:" + ",".join(
                    f"[{'/'.join(f'{m.iterator}@{m.line}' for m in k.mapped) or '1 WI'}"
                    + (f" in host {'/'.join(h.iterator for h in k.host_loops)}"
                       if k.host_loops else "") + "]" for k in p.kernels())
                for p in res.plans if p.kernels())
            rows.append({"program": name, "sizes": " ".join(f"{k}={v}" for k, v in
                                                            defines.items()) or "default",
                         "identical_output": same, "seq_s": round(seq, 4),
                         "opencl_s": round(ocl, 4), "ratio_seq_over_ocl": round(seq / ocl, 3),
                         "kernels": len(res.kernel_names), "parallel_loops": loops})
            print(f"{name:18s} seq {seq:8.4f}s  ocl {ocl:8.4f}s  ratio {seq / ocl:6.3f}  "
                  f"same={same}", file=sys.stderr)
    with open(out / "autopar.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = ["| program | sizes | same output | gcc -O2 (s) | OpenCL (s) | seq/OpenCL | "
             "kernels | parallel loops |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['program']} | {r['sizes']} | {r['identical_output']} | "
                     f"{r['seq_s']} | {r['opencl_s']} | {r['ratio_seq_over_ocl']} | "
                     f"{r['kernels']} | {r['parallel_loops']} |")
    table = "\n".join(lines)
    (out / "autopar.md").write_text(table + "\n")
    print(table)
    print(f"wrote {out / 'autopar.csv'} and {out / 'autopar.md'}")
    return 0 if all(r["identical_output"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
