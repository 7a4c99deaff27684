"""The operator library's matrix-product kernels at BERT-base sizes against numpy's sgemm.

For each product shape of a BERT-base layer (sequence 128: the q/k/v and output projections
128x768x768, the FFN 128x768x3072 and 128x3072x768, attention's batched 12x128x64x128 and
12x128x128x64, and the output projection as PyTorch's Gemm with ``transB=1`` read in place) the
``blocked`` kernel :func:`polyfuse.oplib.op_kernel` generates is built on every PoCL device of
the ``basic`` (one-thread) kind and timed alternating with numpy's ``matmul`` on the same shape
(one BLAS thread: set ``OPENBLAS_NUM_THREADS=1``) in ``--rounds`` rounds, so load drift on a
shared machine hits both alike.  Both are timed in CPU time of the calling thread (PoCL's
``basic`` device runs a kernel in the thread that waits for it): on a machine shared with other
jobs, wall time and profiling events also count the time the thread waits for a core.  Prints
GFLOP/s medians, the kernel/numpy ratio (median [min-max] over the rounds) and the ratio of the
best times of each (the least disturbed by other load).  Values are checked against numpy
first.

    OPENBLAS_NUM_THREADS=1 python analysis/product_kernels.py [--rounds 9] [--device basic]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("POCL_DEVICES", "pthread basic")

import numpy as np  # noqa: E402
import pyopencl as cl  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from polyfuse.core.program import KERNEL_VARIANTS  # noqa: E402
from polyfuse.oplib import linalg, op_kernel  # noqa: E402

#: label -> (op, attrs, A shape, B shape); B is (N, K) for transB=1
SHAPES: dict[str, tuple[str, dict, tuple[int, ...], tuple[int, ...]]] = {
    "proj 128x768x768": ("MatMul", {}, (128, 768), (768, 768)),
    "ffn1 128x768x3072": ("MatMul", {}, (128, 768), (768, 3072)),
    "ffn2 128x3072x768": ("MatMul", {}, (128, 3072), (3072, 768)),
    "attn QK^T 12x128x64x128": ("MatMul", {}, (12, 128, 64), (12, 64, 128)),
    "attn PV 12x128x128x64": ("MatMul", {}, (12, 128, 128), (12, 128, 64)),
    "Gemm transB=1 128x768x768": ("Gemm", {"transB": 1}, (128, 768), (768, 768)),
}


def reference(op: str, attrs: dict, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a @ (b.T if attrs.get("transB") else b)


def kernel_runner(dev: cl.Device, op: str, attrs: dict, a: np.ndarray, b: np.ndarray,
                  cols: int = 0):
    """A callable timing one launch of the library's blocked kernel (seconds), and its
    output after a first run; ``cols``: block columns instead of the device's default."""
    out = reference(op, attrs, a, b).shape
    variant = dataclasses.replace(
        KERNEL_VARIANTS["blocked"],
        block_cols=cols or linalg.block_cols_for(dev.native_vector_width_float))
    opk = op_kernel(op, attrs, [a.shape, b.shape], [out], name="prod", variant=variant)
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    kernel = cl.Program(ctx, opk.source).build(options=["-cl-std=CL1.2"]).prod
    mf = cl.mem_flags
    bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x) for x in (a, b)]
    y = cl.Buffer(ctx, mf.WRITE_ONLY, int(np.prod(out)) * 4)

    def run() -> float:
        t0 = time.thread_time()
        kernel(queue, opk.global_size, opk.local_size, *bufs, y).wait()
        return time.thread_time() - t0

    run()
    got = np.empty(out, np.float32)
    cl.enqueue_copy(queue, got, y)
    np.testing.assert_allclose(got, reference(op, attrs, a, b), rtol=1e-3, atol=1e-3)
    return run, opk


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--device", default="basic", help="device name prefix (default: basic)")
    ap.add_argument("--only", nargs="*", help="labels (substrings) to run")
    ap.add_argument("--cols", type=int, default=0, help="block columns (default: the device's)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    devices = [(p, d) for p in cl.get_platforms() for d in p.get_devices()
               if d.name.startswith(args.device)]
    print(f"{'device':28s} {'product':26s} {'block':>6s} {'GFLOP/s':>8s} {'numpy':>7s} "
          f"{'x numpy: median [min-max]':>26s} {'best/best':>9s}")
    for plat, dev in devices:
        where = f"{plat.version.split()[3]} {dev.name[:16]}"
        for label, (op, attrs, sa, sb) in SHAPES.items():
            if args.only and not any(s in label for s in args.only):
                continue
            a = rng.standard_normal(sa, dtype=np.float32)
            b = rng.standard_normal(sb, dtype=np.float32)
            bb = b.T.copy() if attrs.get("transB") else b
            flops = 2 * a.size * bb.shape[-1]
            run, opk = kernel_runner(dev, op, attrs, a, b, args.cols)
            ours, theirs = [], []
            for _ in range(args.rounds):
                t0 = time.thread_time()
                np.matmul(a, bb)
                theirs.append(time.thread_time() - t0)
                ours.append(run())
            ratio = [t / o for t, o in zip(theirs, ours)]
            block = f"{opk.block.rows}x{opk.block.cols}" if opk.block else "-"
            print(f"{where:28s} {label:26s} {block:>6s} {flops / np.median(ours) / 1e9:8.1f} "
                  f"{flops / np.median(theirs) / 1e9:7.1f} {np.median(ratio):11.2f} "
                  f"[{min(ratio):.2f}-{max(ratio):.2f}] {min(theirs) / min(ours):9.2f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
