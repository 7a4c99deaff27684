"""Independent launches with different code: apart vs side by side in one launch, measured.

For PolyBench-style programs whose kernels are independent (``bicg``: ``q = A p`` and
``s = A^T r``), plan twice — the default plan (the independent launches stay apart) and the
``hetero`` variant (heterogeneous horizontal fusion: concatenated grids, a group-id branch) —
verify both against the unfused program, then time unfused, apart and hetero interleaved in
rounds on one queue (medians of profiling-event kernel time and host wall time, IQR/median
spread).  The autotuner chooses ``hetero`` only when it is measured faster; this script shows
the numbers behind that choice at several sizes.

    python analysis/hetero_fusion.py [--sizes 64x48 256x192 1024x768] [--repeat 30]

Prints the table; exit status 1 if a variant fails verification.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polyfuse
from polyfuse.codegen import generate_fused
from polyfuse.fusion import plan_fusion
from polyfuse.runtime import device_target, get_context, verify_programs
from polyfuse.runtime.execute import time_interleaved

ROOT = Path(__file__).resolve().parent.parent
BICG = ROOT / "tests" / "fused_host_programs" / "bicg"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["64x48", "256x192", "1024x768"])
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args(argv)
    ctx, queue = get_context()
    rows = []
    for size in args.sizes:
        nx, ny = size.split("x")
        program = polyfuse.load_opencl(str(BICG / "kernels.cl"), host=str(BICG / "host.c"),
                                       argv=[nx, ny, "out.txt"])
        uar = polyfuse.build_uar(program)
        variants = {"apart": plan_fusion(uar), "hetero": plan_fusion(uar, orchestration="hetero")}
        progs = {"unfused": program}
        for name, plan in variants.items():
            fused = generate_fused(plan, target=device_target(ctx.devices[0]))
            v = verify_programs(program, fused.program, buffers=fused.compared_buffers, ctx=ctx,
                                queue=queue)
            if not v.ok:
                print(f"{size} {name}: verification FAILED: {v.summary()}", file=sys.stderr)
                return 1
            progs[name] = fused.program
        t = time_interleaved(progs, repeat=args.repeat, rounds=5, ctx=ctx, queue=queue)
        for name in progs:
            launches = len(progs[name].launches)
            rows.append((size, name, launches, t[name].kernel_time * 1e6,
                         t[name].wall_time * 1e6, t[name].spread))
    print(f"{'size':>10} {'variant':>8} {'launches':>8} {'kernel us':>10} {'wall us':>10} "
          f"{'spread':>7}")
    for size, name, n, k, w, s in rows:
        print(f"{size:>10} {name:>8} {n:>8} {k:>10.1f} {w:>10.1f} {s:>7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
