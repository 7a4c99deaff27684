"""Run one :class:`~polyfuse.oplib.OpKernel` with pyopencl: a test and debugging helper
(device code, so it lives in the runtime layer, above the device-free kernel library)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
import pyopencl as cl

from polyfuse.core.program import PolyfuseError
from polyfuse.oplib._common import OpKernel
from polyfuse.runtime.device import build_log, get_device

_CONTEXT: Optional[cl.Context] = None
_QUEUES: dict[int, cl.CommandQueue] = {}
_PROGRAMS: dict[tuple[int, str], cl.Program] = {}


class KernelBuildError(PolyfuseError):
    """An operator kernel that the OpenCL compiler rejected; the message holds the build log."""


def default_context() -> cl.Context:
    """One shared context on polyfuse's default device, so repeated runs reuse built programs."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = cl.Context([get_device()])
    return _CONTEXT


def build(opk: OpKernel, ctx: cl.Context) -> cl.Program:
    """Build ``opk.source`` with ``-cl-std=CL1.2`` (cached per context and source)."""
    key = (ctx.int_ptr, opk.source)
    if key in _PROGRAMS:
        return _PROGRAMS[key]
    program = cl.Program(ctx, opk.source)
    try:
        program.build(options=["-cl-std=CL1.2"])
    except cl.Error as err:
        log = build_log(program, ctx, err)
        raise KernelBuildError(f"building kernel '{opk.name}' failed:\n{log}") from None
    _PROGRAMS[key] = program
    return program


def run_op(
    opk: OpKernel,
    inputs: Sequence[Optional[np.ndarray]],
    output_shapes: Sequence[Optional[Sequence[int]]],
    ctx: Optional[cl.Context] = None,
    queue: Optional[cl.CommandQueue] = None,
) -> list[Optional[np.ndarray]]:
    """Launch ``opk`` on ``inputs`` (one per node input position) and return its outputs.

    Inputs at positions whose binding is ``""`` are ignored (may be ``None``).  Each input is
    converted to the dtype the kernel expects.  Outputs are pre-filled with NaN, so an element the
    kernel fails to write shows up; unbound output positions come back as ``None``.
    """
    if ctx is None:
        ctx = queue.context if queue is not None else default_context()
    if queue is None:
        queue = _QUEUES.get(ctx.int_ptr)
        if queue is None:
            queue = _QUEUES[ctx.int_ptr] = cl.CommandQueue(ctx)
    if len(inputs) < sum(1 for p in opk.inputs if p):
        raise PolyfuseError(f"kernel '{opk.name}': expected inputs for {opk.inputs}")
    program = build(opk, ctx)
    mf = cl.mem_flags
    args: dict[str, cl.Buffer] = {}
    for i, pname in enumerate(opk.inputs):
        if not pname:
            continue
        value = inputs[i]
        if value is None:
            raise PolyfuseError(f"kernel '{opk.name}': input {i} ({pname}) is missing")
        dtype = np.dtype(opk.input_dtype(i))
        if dtype == np.int32 and np.issubdtype(np.asarray(value).dtype, np.integer):
            big = np.asarray(value)
            if big.size and (big.max() > np.iinfo(np.int32).max or big.min() < -(2**31)):
                raise PolyfuseError(f"kernel '{opk.name}': input {i} does not fit in int32")
        host = np.ascontiguousarray(value, dtype=dtype)
        args[pname] = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host)
    results: list[Optional[np.ndarray]] = []
    for i, pname in enumerate(opk.outputs):
        shape = output_shapes[i] if i < len(output_shapes) else None
        if not pname or shape is None:
            results.append(None)
            continue
        host = np.full(tuple(shape), np.nan, dtype=np.float32)
        args[pname] = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)
        results.append(host)
    kernel = getattr(program, opk.name)
    order = [p for p in opk.inputs if p] + [p for p in opk.outputs if p]
    kernel(queue, opk.global_size, opk.local_size, *(args[p] for p in order))
    for i, pname in enumerate(opk.outputs):
        if pname and results[i] is not None:
            cl.enqueue_copy(queue, results[i], args[pname])
    queue.finish()
    return results

