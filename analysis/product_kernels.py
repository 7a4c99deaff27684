"""The operator library's matrix-product kernels at BERT-base sizes against the device's peer.

For each product shape of a BERT-base layer (sequence 128: the q/k/v and output projections
128x768x768, the FFN 128x768x3072 and 128x3072x768, attention's batched 12x128x64x128 and
12x128x128x64, and the output projection as PyTorch's Gemm with ``transB=1`` read in place)
and a 1024-cubed GEMM, the kernel :func:`polyfuse.oplib.op_kernel` generates in ``--form`` is
built on each selected device and timed alternating with the peer in ``--rounds`` rounds, so
load drift hits both alike.  Values are checked against numpy first.

* On CPU devices (default: PoCL's one-thread ``basic`` devices, ``blocked`` form) the peer is
  numpy's ``matmul`` (one BLAS thread: set ``OPENBLAS_NUM_THREADS=1``); both are timed in CPU
  time of the calling thread (PoCL's ``basic`` device runs a kernel in the thread that waits
  for it): on a shared machine wall time also counts the waits for a core.
* On GPUs (``gpu`` form) the peer is ``torch.matmul`` with TF32 off (cuBLAS fp32) when torch
  with CUDA is importable; kernels are timed by profiling events, torch by CUDA events.
  ``--sweep`` times every register tile of the ``gpu`` form (work-group edge, ``wm x wn``
  outputs per work-item, panel depth, printed ``16:8x4k16``;
  :func:`polyfuse.oplib.linalg.register_tile_candidates`) and marks the one the rule
  (:func:`~polyfuse.oplib.linalg.register_tile_shape`) chooses.

``--split S ...`` also times the split-K form of the 2-D products (the ``gpu`` form's rewrite of
a product with few output tiles, :func:`polyfuse.oplib.linalg.split_k_ways`): one batched
product of the S parts over K/S each, then the ReduceSum of the partial products, timed from
the first launch's start to the second's end.  A is given already as ``[S, M, K/S]`` (in a
fused program that Transpose joins A's producer).  ``0`` is the library's own choice for the
device; ``1`` the product unsplit (the default).

Prints GFLOP/s medians, the kernel/peer ratio (median [min-max] over the rounds) and the ratio
of the best times of each (the least disturbed by other load).

    OPENBLAS_NUM_THREADS=1 python analysis/product_kernels.py [--rounds 9] [--device basic]
        [--form blocked|gpu|tiled] [--sweep] [--split S ...] [--only LABEL ...] [--csv FILE]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

os.environ.setdefault("POCL_DEVICES", "pthread basic")

import numpy as np  # noqa: E402
import pyopencl as cl  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from polyfuse.core.program import KERNEL_VARIANTS, KernelVariant, RegisterTile  # noqa: E402
from polyfuse.oplib import linalg, op_kernel  # noqa: E402
from polyfuse.oplib._common import Node  # noqa: E402

#: label -> (op, attrs, A shape, B shape); B is (N, K) for transB=1
SHAPES: dict[str, tuple[str, dict, tuple[int, ...], tuple[int, ...]]] = {
    "proj 128x768x768": ("MatMul", {}, (128, 768), (768, 768)),
    "ffn1 128x768x3072": ("MatMul", {}, (128, 768), (768, 3072)),
    "ffn2 128x3072x768": ("MatMul", {}, (128, 3072), (3072, 768)),
    "attn QK^T 12x128x64x128": ("MatMul", {}, (12, 128, 64), (12, 64, 128)),
    "attn PV 12x128x128x64": ("MatMul", {}, (12, 128, 128), (12, 128, 64)),
    "Gemm transB=1 128x768x768": ("Gemm", {"transB": 1}, (128, 768), (768, 768)),
    "GEMM 1024x1024x1024": ("MatMul", {}, (1024, 1024), (1024, 1024)),
}

HEADERS = ["device", "product", "form", "tile", "chosen", "GFLOP/s", "peer", "peer GFLOP/s",
           "x peer median", "x peer min", "x peer max", "best/best"]


def reference(op: str, attrs: dict, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a @ (b.T if attrs.get("transB") else b)


def variant_for(dev: cl.Device, form: str, tile: Optional[RegisterTile] = None,
                cols: int = 0) -> KernelVariant:
    """The kernel variant of ``form`` fitted to ``dev`` (as :meth:`DeviceLimits.target`
    does), with an explicit register tile / block width where given."""
    return dataclasses.replace(
        KERNEL_VARIANTS[form],
        block_cols=cols or linalg.block_cols_for(dev.native_vector_width_float),
        device_groups=dev.max_compute_units, register_tile=tile)


def kernel_runner(dev: cl.Device, op: str, attrs: dict, a: np.ndarray, b: np.ndarray,
                  variant: KernelVariant, split: int = 1) -> tuple[Callable[[], float], Any]:
    """A callable timing one run of the library's kernel (seconds: CPU time of this thread on
    CPU devices, profiling events elsewhere), and the kernel, checked once.  ``split`` > 1:
    the split-K form (module docstring), both of its launches."""
    out = reference(op, attrs, a, b).shape
    kw = dict(variant=variant, max_work_group_size=dev.max_work_group_size,
              local_mem_size=dev.local_mem_size)
    if split > 1:
        bb = b.T if attrs.get("transB") else b
        (m, k), n = a.shape, bb.shape[1]
        part = k // split
        parts = (np.ascontiguousarray(a.reshape(m, split, part).transpose(1, 0, 2)),
                 np.ascontiguousarray(bb.reshape(split, part, n)))
        opk = op_kernel("MatMul", {}, [p.shape for p in parts], [(split, m, n)], name="prod",
                        **kw)
        total = op_kernel("ReduceSum", {"axes": [0], "keepdims": 0}, [(split, m, n)], [out],
                          name="total", **kw)
        stages = [(opk, parts, (split, m, n)), (total, (None,), out)]
    else:
        opk = op_kernel(op, attrs, [a.shape, b.shape], [out], name="prod", **kw)
        stages = [(opk, (a, b), out)]
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    mf = cl.mem_flags
    launches = []
    last = None
    for kopk, ins, shape in stages:
        kernel = getattr(cl.Program(ctx, kopk.source).build(options=["-cl-std=CL1.2"]),
                         kopk.name)
        bufs = [last if x is None else
                cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x) for x in ins]
        last = cl.Buffer(ctx, mf.READ_WRITE, int(np.prod(shape)) * 4)
        launches.append((kernel, kopk, (*bufs, last)))
    on_cpu = bool(dev.type & cl.device_type.CPU)

    def run() -> float:
        t0 = time.thread_time()
        evs = [kernel(queue, k.global_size, k.local_size, *args) for kernel, k, args in launches]
        evs[-1].wait()
        return time.thread_time() - t0 if on_cpu else \
            (evs[-1].profile.end - evs[0].profile.start) * 1e-9

    run()
    got = np.empty(out, np.float32)
    cl.enqueue_copy(queue, got, last)
    np.testing.assert_allclose(got, reference(op, attrs, a, b), rtol=1e-3, atol=1e-3)
    return run, opk


def peer_runner(dev: cl.Device, op: str, attrs: dict, a: np.ndarray, b: np.ndarray
                ) -> tuple[Optional[Callable[[], float]], str]:
    """The peer's one-product timer: numpy on CPU devices, cuBLAS fp32 through torch on a GPU
    when torch with CUDA is importable (else none)."""
    bb = b.T.copy() if attrs.get("transB") else b
    if dev.type & cl.device_type.CPU:
        def numpy_run() -> float:
            t0 = time.thread_time()
            np.matmul(a, bb)
            return time.thread_time() - t0
        return numpy_run, "numpy sgemm"
    try:
        import torch
    except ImportError:
        return None, "-"
    if not torch.cuda.is_available():
        return None, "-"
    torch.backends.cuda.matmul.allow_tf32 = False
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(bb).cuda()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def torch_run() -> float:
        start.record()
        torch.matmul(ta, tb)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3
    torch_run()
    return torch_run, "cuBLAS fp32"


def tiles_to_try(dev: cl.Device, form: str, sweep: bool, m: int, n: int
                 ) -> list[Optional[RegisterTile]]:
    """Register tiles to time: every one that fits with ``--sweep`` (``gpu`` form), else the
    library's own choice (None)."""
    if not sweep or form != "gpu":
        return [None]
    node = Node.of("MatMul", {}, [(m, 1), (1, n)], [(m, n)], "prod", dev.max_work_group_size,
                   dev.local_mem_size, KERNEL_VARIANTS["gpu"])
    return linalg.register_tile_candidates(node, m, n)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--device", default="basic",
                    help="device name prefix, or 'gpu' for every GPU (default: basic)")
    ap.add_argument("--form", choices=sorted(KERNEL_VARIANTS), default=None,
                    help="kernel form (default: blocked on CPUs, gpu elsewhere)")
    ap.add_argument("--sweep", action="store_true", help="every register tile of the gpu form")
    ap.add_argument("--split", type=int, nargs="*", default=[1],
                    help="split-K parts of the 2-D products to time (0: the library's choice "
                         "for the device; 1: unsplit, the default)")
    ap.add_argument("--only", nargs="*", help="labels (substrings) to run")
    ap.add_argument("--cols", type=int, default=0, help="block columns (default: the device's)")
    ap.add_argument("--csv", type=Path, default=None, help="also write the table here")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    devices = [(p, d) for p in cl.get_platforms() for d in p.get_devices()
               if (d.type & cl.device_type.GPU if args.device == "gpu"
                   else d.name.startswith(args.device))]
    rows: list[list[Any]] = []
    print(f"{'device':24s} {'product':26s} {'form':7s} {'tile':>13s} {'GFLOP/s':>8s} "
          f"{'peer':>8s} {'x peer: median [min-max]':>25s} {'best/best':>9s}")
    for plat, dev in devices:
        where = f"{plat.name.split()[0]} {dev.name[:16]}"
        form = args.form or ("blocked" if dev.type & cl.device_type.CPU else "gpu")
        for label, (op, attrs, sa, sb) in SHAPES.items():
            if args.only and not any(s in label for s in args.only):
                continue
            a = rng.standard_normal(sa, dtype=np.float32)
            b = rng.standard_normal(sb, dtype=np.float32)
            bb = b.T.copy() if attrs.get("transB") else b
            flops = 2 * a.size * bb.shape[-1]
            peer, peer_name = peer_runner(dev, op, attrs, a, b)
            m, n = int(np.prod(sa[:-1])) if len(sb) == 2 else sa[-2], bb.shape[-1]
            node = Node.of(op, attrs, [sa, sb], [reference(op, attrs, a, b).shape], "prod",
                           dev.max_work_group_size, dev.local_mem_size,
                           variant_for(dev, form, cols=args.cols))
            batch = int(np.prod(sa[:-2])) if len(sb) > 2 else 1
            k = bb.shape[-2]
            chosen = linalg.register_tile_shape(node, m, n, k, batch)
            own = linalg.split_k_ways(node.variant, m, n, k, dev.max_work_group_size,
                                      dev.local_mem_size) if len(sa) == len(sb) == 2 else 1
            splits = sorted({own if s == 0 else s for s in args.split})
            splits = [s for s in splits if s == 1 or len(sa) == len(sb) == 2 and k % s == 0]
            for fixed, split in ((t, s) for s in splits
                                     for t in tiles_to_try(dev, form, args.sweep, m, n)):
                # the tile the library gives the parts: m x n over a batch of S
                pick = chosen if split == 1 else linalg.register_tile_shape(node, m, n, k // split,
                                                                             split)
                run, opk = kernel_runner(dev, op, attrs, a, b,
                                         variant_for(dev, form, fixed, args.cols), split)
                ours, theirs = [], []
                for _ in range(args.rounds):
                    if peer is not None:
                        theirs.append(peer())
                    ours.append(run())
                tile = ("-" if not opk.block else
                        f"{opk.block.rows}x{opk.block.cols}" if form != "gpu" else
                        str(fixed or pick))
                tile += f"/{split}" if split > 1 else ""
                is_chosen = form == "gpu" and split == own and fixed in (None, pick)
                gf = flops / np.median(ours) / 1e9
                if theirs:
                    ratio = [t / o for t, o in zip(theirs, ours)]
                    pgf = flops / np.median(theirs) / 1e9
                    cells = [np.median(ratio), min(ratio), max(ratio), min(theirs) / min(ours)]
                    text = (f"{pgf:8.1f} {cells[0]:10.2f} [{cells[1]:.2f}-{cells[2]:.2f}] "
                            f"{cells[3]:9.2f}")
                else:
                    pgf, cells, text = float("nan"), [float("nan")] * 4, f"{'-':>8s}"
                print(f"{where:24s} {label:26s} {form:7s} {tile:>12s}{'*' if is_chosen else ' '}"
                      f" {gf:8.1f} {text}", flush=True)
                rows.append([where, label, form, tile, is_chosen, gf, peer_name, pgf, *cells])
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with open(args.csv, "w", newline="") as fh:
            csv.writer(fh).writerows([HEADERS] + rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
