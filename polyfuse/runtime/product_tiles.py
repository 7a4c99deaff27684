"""Register tiles of the ``gpu`` form's matrix products, confirmed by timing on the device.

:func:`polyfuse.oplib.linalg.register_tile_shape` picks a tile by rule (the most reuse that
keeps the compute units busy), which on an H200 was the measured best or within 4 % of it at
1024-cubed and BERT-base's FFN products, and 1.4x off at its 128x768x768 projection.  Here
each distinct product of a model is built alone with every register tile (work-group edge,
``wm x wn`` outputs per work-item, panel depth: :class:`~polyfuse.core.program.RegisterTile`)
that fits, timed by profiling events in interleaved rounds, and the fastest kept, per device
(its stable key) and shape in the disk cache, so a model's session pays once per shape and
later models with the same shapes not at all.  The result goes into the target
(:meth:`~polyfuse.core.program.Target.with_tiles`), and the front-end generates the products
with it: the kernels stay exactly those the rule could have chosen, only the choice changes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Optional

import numpy as np
import pyopencl as cl

from polyfuse.core import cache as disk
from polyfuse.core.program import PolyfuseError, RegisterTile, Target
from polyfuse.frontend.onnx import ProductCase
from polyfuse.oplib import linalg, op_kernel
from polyfuse.oplib._common import Node
from polyfuse.runtime.device import (
    DeviceSpec,
    build_kernel,
    get_context,
    quiet_build,
    stable_device_key,
)

#: interleaved rounds, and runs of each candidate per round
ROUNDS, RUNS = 3, 3

TileChoice = tuple[tuple[int, int, int, int], RegisterTile]


def _node(case: ProductCase, target: Target, tile: Optional[RegisterTile] = None) -> Node:
    return Node.of(case.op, case.attrs, case.input_shapes, [case.output_shape], "product",
                   target.max_work_group_size, target.local_mem_size,
                   replace(target.kernel, register_tile=tile, tiles=()))


def _timer(case: ProductCase, target: Target, ctx: cl.Context, queue: cl.CommandQueue,
           tile: RegisterTile, inputs: list[cl.Buffer], out: cl.Buffer
           ) -> Callable[[], float]:
    """One launch of the product with this tile, in device seconds."""
    node = _node(case, target, tile)
    opk = op_kernel(case.op, case.attrs, list(case.input_shapes), [case.output_shape],
                    name="product", max_work_group_size=node.max_work_group_size,
                    local_mem_size=node.local_mem_size, variant=node.variant)
    with quiet_build():
        kernel = build_kernel(ctx, opk.source, "product")
    kernel.set_args(*inputs[:len([i for i in opk.inputs if i])], out)

    def run() -> float:
        ev = cl.enqueue_nd_range_kernel(queue, kernel, opk.global_size, opk.local_size)
        ev.wait()
        return (ev.profile.end - ev.profile.start) * 1e-9
    run()
    return run


def _measure(case: ProductCase, target: Target, ctx: cl.Context, queue: cl.CommandQueue,
             candidates: list[RegisterTile]
             ) -> tuple[dict[RegisterTile, float], dict[str, str]]:
    """Median device seconds of each candidate tile, timed in interleaved rounds, and why a
    candidate the device could not build or run was left out."""
    rng = np.random.default_rng(0)
    mf = cl.mem_flags
    inputs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR,
                        hostbuf=rng.standard_normal(s, dtype=np.float32))
              for s in case.input_shapes]
    out = cl.Buffer(ctx, mf.WRITE_ONLY, int(np.prod(case.output_shape)) * 4)
    timers: dict[RegisterTile, Callable[[], float]] = {}
    skipped: dict[str, str] = {}
    for c in candidates:
        try:
            timers[c] = _timer(case, target, ctx, queue, c, inputs, out)
        except (cl.Error, PolyfuseError) as err:
            skipped[str(c)] = str(err).splitlines()[0][:200]
    samples: dict[RegisterTile, list[float]] = {c: [] for c in timers}
    for _ in range(ROUNDS):
        for c, run in timers.items():
            samples[c] += [run() for _ in range(RUNS)]
    return {c: float(np.median(v)) for c, v in samples.items()}, skipped


def _cache_key(case: ProductCase, dev: cl.Device) -> str:
    # "tile": what ``best`` holds; entries of (edge, w) square tiles have another key
    return disk.key([], {"what": "product tile", "tile": ["edge", "wm", "wn", "tk"],
                         "op": case.op, "product": list(case.product),
                         "shapes": [list(s) for s in case.input_shapes],
                         "attrs": sorted((k, str(v)) for k, v in case.attrs.items())},
                    stable_device_key(dev))


def tune_product_tiles(cases: Sequence[ProductCase], target: Target, device: DeviceSpec = None,
                       progress: Optional[Callable[[str], None]] = None
                       ) -> tuple[TileChoice, ...]:
    """The fastest register tile of each product on ``device`` (measured, or from the disk
    cache): ``((m, n, k, batch), tile)`` pairs for
    :meth:`~polyfuse.core.program.Target.with_tiles`.  Products with one candidate are left to
    the rule; a candidate the device cannot build is left out, with its reason in the cache."""
    ctx, queue = get_context(device)
    dev = queue.device
    choices: list[TileChoice] = []
    for case in cases:
        m, n, _k, _batch = case.product
        candidates = linalg.register_tile_candidates(_node(case, target), m, n)
        if len(candidates) < 2:
            continue
        key = _cache_key(case, dev)
        raw = disk.load_blob("tile", key)
        if raw is not None:
            best = RegisterTile(*json.loads(raw)["best"])
        else:
            if progress:
                progress(f"timing {len(candidates)} register tiles of the "
                         f"{m}x{n}x{_k} product (batch {_batch})")
            times, skipped = _measure(case, target, ctx, queue, candidates)
            if not times:
                continue
            best = min(times, key=times.__getitem__)
            disk.store_blob("tile", key, json.dumps({
                "best": list(best), "seconds": {str(t): s for t, s in times.items()},
                "skipped": skipped}).encode())
        choices.append((case.product, best))
    return tuple(choices)


__all__ = ["TileChoice", "tune_product_tiles"]
