"""How UAR construction time grows with the number of launches.

A chain of element-wise launches (launch k reads buffer k and writes buffer k+1, so every
consecutive pair has one thread-level RAW edge) is analysed at several lengths, in one run:
once built with the Python builder (UAR construction alone) and once written as a C host program
(host front-end + UAR, the `polyfuse analyze` path).  The log-log slope between the two largest
sizes says how the cost grows (1 = linear).

    .venv/bin/python analysis/uar_scaling.py [--sizes 10 100 1000] [--symbolic] [--out DIR]

Writes DIR/uar_scaling.csv and DIR/uar_scaling.png (default DIR: analysis/results) and prints
the table and the path.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import tempfile
import time
from pathlib import Path

import polyfuse

KERNELS = """
__kernel void scale(__global const float *x, __global float *y, const int n) {
  int i = get_global_id(0);
  if (i < n) y[i] = 1.5f * x[i] + 0.5f;
}
"""


def build_chain(length: int, symbolic: bool) -> polyfuse.Program:
    b = polyfuse.ProgramBuilder(KERNELS, name=f"chain{length}")
    n = b.param("n", min=1) if symbolic else 1024
    for k in range(length + 1):
        b.buffer(f"buf{k}", 4 * n)
    b.write("buf0")
    for k in range(length):
        b.launch("scale", global_size=(n,), local_size=(64,) if not symbolic else None,
                 args={"x": f"buf{k}", "y": f"buf{k + 1}", "n": n})
    b.read(f"buf{length}", blocking=True)
    return b.build()


def host_source(length: int) -> str:
    lines = [
        "#include <CL/cl.h>",
        "#define N 1024",
        "int main(void) {",
        "  cl_int err; cl_platform_id p; cl_device_id d;",
        "  clGetPlatformIDs(1, &p, NULL);",
        "  clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL);",
        "  cl_context ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);",
        "  cl_command_queue q = clCreateCommandQueue(ctx, d, 0, &err);",
        "  cl_program prog = clCreateProgramWithSource(ctx, 1, NULL, NULL, &err);",
        "  clBuildProgram(prog, 1, &d, NULL, NULL, NULL);",
        "  cl_kernel k = clCreateKernel(prog, \"scale\", &err);",
        "  int n = N; size_t global[1] = {N}; size_t local[1] = {64};",
        "  float host[N];",
    ]
    for i in range(length + 1):
        lines.append(f"  cl_mem b{i} = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float),"
                     " NULL, &err);")
    lines.append("  clEnqueueWriteBuffer(q, b0, CL_TRUE, 0, N * sizeof(float), host, 0, NULL,"
                 " NULL);")
    for i in range(length):
        lines += [
            f"  clSetKernelArg(k, 0, sizeof(cl_mem), &b{i});",
            f"  clSetKernelArg(k, 1, sizeof(cl_mem), &b{i + 1});",
            "  clSetKernelArg(k, 2, sizeof(int), &n);",
            "  clEnqueueNDRangeKernel(q, k, 1, NULL, global, local, 0, NULL, NULL);",
        ]
    lines += [f"  clEnqueueReadBuffer(q, b{length}, CL_TRUE, 0, N * sizeof(float), host, 0,"
              " NULL, NULL);", "  clFinish(q);", "  return 0;", "}"]
    return "\n".join(lines) + "\n"


def measure(length: int, symbolic: bool, workdir: Path) -> dict:
    t0 = time.perf_counter()
    program = build_chain(length, symbolic)
    t1 = time.perf_counter()
    uar = polyfuse.build_uar(program)
    t2 = time.perf_counter()
    raw = [e for e in uar.edges if e.kind == "RAW" and not e.host]
    assert len(raw) == length - 1 and all(e.width == "thread" for e in raw), "unexpected UAR"
    row = {"launches": length, "symbolic": symbolic, "builder_s": t1 - t0, "uar_s": t2 - t1,
           "edges": len(uar.edges)}
    if not symbolic:
        kernels = workdir / "kernels.cl"
        host = workdir / f"host{length}.c"
        kernels.write_text(KERNELS)
        host.write_text(host_source(length))
        t3 = time.perf_counter()
        parsed = polyfuse.load_opencl(str(kernels), host=str(host))
        t4 = time.perf_counter()
        polyfuse.build_uar(parsed)
        t5 = time.perf_counter()
        row.update(host_frontend_s=t4 - t3, analyze_s=t5 - t3)
    return row


def slope(rows: list[dict], key: str) -> float:
    a, b = rows[-2], rows[-1]
    return math.log(b[key] / a[key]) / math.log(b["launches"] / a["launches"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--symbolic", action="store_true",
                        help="symbolic problem size n and no local size (harder isl sets)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for length in sorted(args.sizes):
            print(f"chain of {length} launches ...", file=sys.stderr, flush=True)
            rows.append(measure(length, args.symbolic, Path(tmp)))
    keys = ["launches", "edges", "uar_s"] + ([] if args.symbolic else
                                             ["host_frontend_s", "analyze_s"])
    print(" ".join(f"{k:>16}" for k in keys))
    for r in rows:
        print(" ".join(f"{r[k]:>16.3f}" if isinstance(r[k], float) else f"{r[k]:>16}"
                       for k in keys))
    if len(rows) >= 2:
        print(f"growth exponent (log-log slope, last two sizes): UAR {slope(rows, 'uar_s'):.2f}"
              + ("" if args.symbolic else f", analyze {slope(rows, 'analyze_s'):.2f}"))
    stem = "uar_scaling_symbolic" if args.symbolic else "uar_scaling"
    csv_path = args.out / f"{stem}.csv"
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        xs = [r["launches"] for r in rows]
        ax.loglog(xs, [r["uar_s"] for r in rows], "o-", label="build_uar")
        if not args.symbolic:
            ax.loglog(xs, [r["analyze_s"] for r in rows], "s-", label="host front-end + UAR")
        ax.set_xlabel("launches in the chain")
        ax.set_ylabel("seconds")
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.out / f"{stem}.png", dpi=120)
    except ImportError:
        print("matplotlib not installed: no plot", file=sys.stderr)
    print(f"results written to {csv_path} (and .png)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
