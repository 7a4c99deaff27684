"""Run one :class:`~polyfuse.oplib.OpKernel` with pyopencl: a test and debugging helper."""

from __future__ import annotations

import ctypes
import platform
from collections.abc import Sequence
from typing import Optional

import numpy as np
import pyopencl as cl

from polyfuse.oplib._common import OpKernel
from polyfuse.program import PolyfuseError

_CONTEXT: Optional[cl.Context] = None
_QUEUES: dict[int, cl.CommandQueue] = {}
_PROGRAMS: dict[tuple[int, str], cl.Program] = {}
_PATCHED_DEVICES: dict[int, ctypes.Array] = {}


class KernelBuildError(PolyfuseError):
    """An operator kernel that the OpenCL compiler rejected; the message holds the build log."""


def default_context() -> cl.Context:
    """One shared context (``PYOPENCL_CTX`` honoured), so repeated runs reuse built programs."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = cl.create_some_context(interactive=False)
    return _CONTEXT


def _readable_regions() -> list[tuple[int, int]]:
    regions = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            addr, perms = line.split()[:2]
            if perms.startswith("r"):
                lo, hi = (int(x, 16) for x in addr.split("-"))
                regions.append((lo, hi))
    return regions


def pocl_generic_cpu_workaround(device: cl.Device) -> bool:
    """Let PoCL 3.0 (LLVM 14) compile on x86-64 CPUs newer than its LLVM (e.g. Zen 5).

    There LLVM names the host CPU ``generic``, PoCL passes ``-target-cpu generic`` to clang and
    every build fails with "unknown target CPU 'generic'"; PoCL 3.0 has no setting to override
    it.  The device record holds the name as a ``char *``; this points it at ``x86-64-v3`` (or
    ``x86-64`` without AVX2/FMA).  It acts only on such a device, where builds cannot succeed
    otherwise, touches only readable memory, and changes nothing unless exactly one field of
    the record points at the string ``generic``.  Returns True when the device was patched.
    """
    version = device.version
    if (
        "PoCL" not in version
        or not version.rstrip().endswith("-generic")
        or platform.machine() != "x86_64"
    ):
        return False
    base = device.int_ptr
    if base in _PATCHED_DEVICES:
        return True
    regions = _readable_regions()

    def readable(addr: int, n: int) -> bool:
        return any(lo <= addr and addr + n <= hi for lo, hi in regions)

    hits = []
    for off in range(0, 4096, 8):
        if not readable(base + off, 8):
            break
        word = ctypes.c_uint64.from_address(base + off).value
        if readable(word, 8) and ctypes.string_at(word, 8) == b"generic\0":
            hits.append(off)
    if len(hits) != 1:
        return False
    with open("/proc/cpuinfo") as info:
        flags = info.read()
    name = b"x86-64-v3" if " avx2" in flags and " fma" in flags else b"x86-64"
    buf = ctypes.create_string_buffer(name)
    _PATCHED_DEVICES[base] = buf
    ctypes.c_uint64.from_address(base + hits[0]).value = ctypes.addressof(buf)
    return True


def build(opk: OpKernel, ctx: cl.Context) -> cl.Program:
    """Build ``opk.source`` with ``-cl-std=CL1.2`` (cached per context and source)."""
    key = (ctx.int_ptr, opk.source)
    if key in _PROGRAMS:
        return _PROGRAMS[key]
    for dev in ctx.devices:
        pocl_generic_cpu_workaround(dev)
    program = cl.Program(ctx, opk.source)
    try:
        program.build(options=["-cl-std=CL1.2"])
    except cl.Error as err:
        logs = []
        for dev in ctx.devices:
            try:
                logs.append(program.get_build_info(dev, cl.program_build_info.LOG))
            except cl.Error:
                pass
        log = "\n".join(s.strip() for s in logs if s and s.strip()) or str(err)
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

