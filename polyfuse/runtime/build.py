"""Building generated code on a device: a kernel that does not compile is reported at its line
in the generated source, with the plan group that produced it (code generation itself is
device-free, :func:`polyfuse.codegen.generate_fused`)."""

from __future__ import annotations

import re

import pyopencl as cl

from polyfuse.c.emit import emit_program
from polyfuse.codegen import CodegenError, FusedProgram
from polyfuse.codegen.fuse import source_error
from polyfuse.core.program import PolyfuseError
from polyfuse.runtime.device import DeviceSpec, build_log, build_program, get_context, quiet_build
from polyfuse.runtime.execute import distinct_kernels, program_options

#: clang prints "FILE:LINE:COL: error: MSG"; PoCL 3.x "error: FILE:LINE:COL: MSG"
_ERROR_LINE = re.compile(r"^(?:error: )?[^\s:]*:(\d+):\d+: (?:error: )?(.*)$", re.M)


def build_fused(fused: FusedProgram, device: DeviceSpec = None) -> None:
    """Build ``fused.program`` on ``device`` as a session or a run builds it (same source,
    same options, same context: :func:`~polyfuse.runtime.device.build_program` keeps the
    program, so the one that runs it next compiles nothing); a failure is located in
    ``fused.cl`` (the line and the plan group), as a :class:`~polyfuse.codegen.CodegenError`."""
    ctx, _queue = get_context(device)
    try:
        built = distinct_kernels(fused.program)
        build_program(ctx, emit_program(built).text, program_options(built))
        return
    except PolyfuseError:
        pass  # built again below from fused.cl's text, whose lines the error can name
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
