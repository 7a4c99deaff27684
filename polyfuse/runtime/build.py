"""Building generated code on a device: a kernel that does not compile is reported at its line
in the generated source, with the plan group that produced it (code generation itself is
device-free, :func:`polyfuse.codegen.generate`)."""

from __future__ import annotations

import re

import pyopencl as cl

from polyfuse.codegen import CodegenError, FusedProgram
from polyfuse.runtime.device import DeviceSpec, build_log, get_context

#: clang prints "FILE:LINE:COL: error: MSG"; PoCL 3.x "error: FILE:LINE:COL: MSG"
_ERROR_LINE = re.compile(r"^(?:error: )?[^\s:]*:(\d+):\d+: (?:error: )?(.*)$", re.M)


def build_fused(fused: FusedProgram, device: DeviceSpec = None) -> None:
    """Build ``fused.source`` on ``device``; a failure names the line in ``fused.cl`` and the
    plan group, as a :class:`~polyfuse.codegen.CodegenError`."""
    ctx, _queue = get_context(device)
    prog = cl.Program(ctx, fused.source)
    try:
        prog.build(options=["-cl-std=CL1.2"])
        return
    except cl.Error as err:
        log = build_log(prog, ctx, err)
    m = _ERROR_LINE.search(log)
    if m:
        ln = int(m.group(1))
        grp = [gid for gid, (a, b) in fused.kernel_lines.items() if a <= ln <= b]
        owner = (f"plan group {grp[0]} (kernel {fused.group_kernels[grp[0]]})" if grp
                 else "helper functions")
        raise CodegenError(f"generated kernel does not build: {m.group(2)} ({owner})",
                           "fused.cl", ln)
    raise CodegenError(f"generated kernels do not build: {log.splitlines()[0]}")
