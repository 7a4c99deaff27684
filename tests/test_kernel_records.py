"""Kernel records own their source (helper functions, typedefs, constant tables, struct sizes),
so nothing is read from disk again and nothing is remembered between files; planning and code
generation take a device's limits as a :class:`~polyfuse.core.program.Target` and never open one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import polyfuse
from polyfuse.codegen import CodegenError, generate_fused
from polyfuse.core.program import Target
from polyfuse.frontend.builder import default_program
from polyfuse.frontend.opencl import parse_kernels
from polyfuse.runtime.execute import program_source, run_program

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# a Rodinia-style kernel file: a typedef'd element type, a constant table, a helper function
KERNELS = """
typedef float real_t;
__constant real_t weights[4] = {0.5f, 0.25f, 0.125f, 0.125f};

inline real_t smooth(__global const real_t* x, int i, int n) {
    real_t s = 0.0f;
    for (int k = 0; k < 4; k++)
        s += weights[k] * x[min(i + k, n - 1)];
    return s;
}

__kernel void blur(__global const real_t* in, __global real_t* out, const int n) {
    int i = get_global_id(0);
    if (i < n)
        out[i] = smooth(in, i, n);
}
"""


def test_a_kernel_builds_from_its_record_after_its_file_is_gone(tmp_path: Path):
    path = tmp_path / "blur.cl"
    path.write_text(KERNELS)
    kernels = parse_kernels(str(path))
    path.unlink()  # the runtime must not need the file any more
    blur = kernels["blur"]
    assert "smooth" in blur.helpers and len(blur.declarations) == 2
    program = default_program(kernels, params={"n": 64, "blur_gs0": 64})
    source = program_source(program)
    assert "typedef float real_t;" in source and "weights[4]" in source
    x = np.arange(64, dtype=np.float32)
    res = run_program(program, inputs={"in": x, "out": np.zeros_like(x)},
                      params={"n": 64, "blur_gs0": 64})
    w = np.array([0.5, 0.25, 0.125, 0.125], dtype=np.float32)
    want = np.array([sum(w[k] * x[min(i + k, 63)] for k in range(4)) for i in range(64)])
    np.testing.assert_allclose(res.buffers["out"], want, rtol=1e-6)


def test_struct_sizes_belong_to_their_file():
    a = parse_kernels("struct pt { float x, y; };\n"
                      "__kernel void k(__global struct pt* p) { p[get_global_id(0)].x = 1.0f; }")
    b = parse_kernels("struct pt { float x, y, z; };\n"
                      "__kernel void k(__global struct pt* p) { p[get_global_id(0)].y = 1.0f; }")
    assert a["k"].struct_sizes["struct pt"] == 8 and b["k"].struct_sizes["struct pt"] == 12
    # re-extracting the first kernel keeps its own size, whatever was parsed since
    ctx = polyfuse.KernelContext(local_size=(64, None, None), global_size=(256, None, None))
    assert polyfuse.specialize(a["k"], ctx).struct_sizes["struct pt"] == 8


def test_code_generation_checks_the_target_it_is_given():
    program = polyfuse.load_opencl(str(EXAMPLES / "elementwise_chain" / "kernels.cl"),
                                   host=str(EXAMPLES / "elementwise_chain" / "host.c"))
    plan = polyfuse.plan_fusion(polyfuse.build_uar(program))
    assert generate_fused(plan).source == generate_fused(plan, target=Target()).source
    small = Target(name="tiny", max_work_group_size=8, max_work_item_sizes=(8, 8, 8))
    with pytest.raises(CodegenError, match="max work-group size 8"):
        generate_fused(plan, target=small)
