"""Building generated code on a device: a kernel that does not compile is reported at its line
in the generated source, with the plan group that produced it (code generation itself is
device-free, :func:`polyfuse.codegen.generate_fused`)."""

from __future__ import annotations

import re

import pyopencl as cl

from polyfuse.codegen import CodegenError, FusedProgram
from polyfuse.codegen.fuse import source_error
from polyfuse.runtime.device import DeviceSpec, build_log, get_context, quiet_build

#: clang prints "FILE:LINE:COL: error: MSG"; PoCL 3.x "error: FILE:LINE:COL: MSG"
_ERROR_LINE = re.compile(r"^(?:error: )?[^\s:]*:(\d+):\d+: (?:error: )?(.*)$", re.M)


def build_fused(fused: FusedProgram, device: DeviceSpec = None) -> None:
    """Build ``fused.source`` on ``device``; a failure names the line in ``fused.cl`` and the
    plan group, as a :class:`~polyfuse.codegen.CodegenError`."""
    ctx, _queue = get_context(device)
    prog = cl.Program(ctx, fused.source)
    try:
        with quiet_build():
            prog.build(options=["-cl-std=CL1.2"])
        return
    except cl.Error as err:
        log = build_log(prog, ctx, err)
    m = _ERROR_LINE.search(log)
    if m:
        raise source_error(m.group(2), int(m.group(1)), fused.kernel_lines, fused.group_kernels)
    raise CodegenError(f"generated kernels do not build: {log.splitlines()[0]}")
