"""The bundled examples are real programs: host C compiles, kernels build on the OpenCL device.

Host programs are checked with ``gcc -fsyntax-only`` against the headers polyfuse ships (so no
OpenCL SDK is needed); kernels are built by PoCL through pyopencl.  Each example also carries a
README and an ``expected.json`` (widths for the oracle) whose names must match the sources.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").iterdir() if (p / "host.c").exists())
SHIPPED = ROOT / "polyfuse" / "include"
WIDTHS = {"thread", "block", "global"}
KINDS = {"RAW", "WAR", "WAW"}

TRIVIAL = "__kernel void probe(__global float* a) { a[get_global_id(0)] = 1.0f; }"


def _include_dir() -> Path:
    if (SHIPPED / "CL" / "cl.h").exists():
        return SHIPPED
    if Path("/usr/include/CL/cl.h").exists():
        return Path("/usr/include")
    pytest.skip("no CL/cl.h: neither polyfuse/include/CL/cl.h nor /usr/include/CL/cl.h")


@pytest.fixture(scope="module")
def cl_context():
    """A pyopencl context that can compile kernels (skips, with the reason, if none can)."""
    cl = pytest.importorskip("pyopencl")
    try:
        ctx = cl.create_some_context(interactive=False)
    except Exception as err:  # no platform at all
        pytest.skip(f"no OpenCL device: {err}")
    try:
        cl.Program(ctx, TRIVIAL).build()
    except Exception as err:
        lines = [ln.strip() for ln in str(err).splitlines() if "error" in ln.lower()]
        pytest.skip("the OpenCL device cannot compile even a trivial kernel here: "
                    + (lines[-1] if lines else repr(err)))
    return ctx


def test_there_are_examples():
    names = {p.name for p in EXAMPLES}
    assert {"elementwise_chain", "shift_rotation", "group_neighbor", "stencil3", "reduction",
            "gemm_bias_relu_transpose", "lstm_cell", "qkv", "runtime_offset"} <= names


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_host_compiles(example: Path):
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler")
    inc = _include_dir()
    r = subprocess.run([gcc, "-fsyntax-only", "-std=c99", "-Wall", "-I", str(inc),
                        str(example / "host.c")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_kernels_build_on_device(example: Path, cl_context):
    import pyopencl as cl

    prg = cl.Program(cl_context, (example / "kernels.cl").read_text()).build()
    assert set(_kernel_names(example)) <= {k.function_name for k in prg.all_kernels()}


def _kernel_names(example: Path) -> list[str]:
    src = (example / "kernels.cl").read_text()
    return re.findall(r"__kernel\s+void\s+(\w+)\s*\(", src)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_expected_widths_are_consistent(example: Path):
    """expected.json names kernels of kernels.cl and buffers of host.c, with valid labels."""
    assert (example / "README.md").read_text().strip()
    data = json.loads((example / "expected.json").read_text())
    kernels = set(_kernel_names(example))
    host = (example / "host.c").read_text()
    launched = re.findall(r"clCreateKernel\(\s*\w+\s*,\s*\"(\w+)\"", host)
    assert set(launched) <= kernels
    assert [ln["kernel"] for ln in data["launches"]], "every example launches kernels"
    assert {ln["kernel"] for ln in data["launches"]} <= kernels
    keys = set()
    for e in data["edges"]:
        assert e["width"] in WIDTHS and e["kind"] in KINDS, e
        assert e["src_kernel"] == data["launches"][e["src_launch"]]["kernel"], e
        assert e["dst_kernel"] == data["launches"][e["dst_launch"]]["kernel"], e
        assert re.search(rf"cl_mem\s+{re.escape(e['array'])}\b", host), e["array"]
        assert set(e["conditions"]) <= WIDTHS - {e["width"]}, e
        assert e["loop_carried"] or e["src_launch"] < e["dst_launch"], e
        if e["width"] == "global":
            assert e.get("witness_example"), e
        key = (e["src_kernel"], e["dst_kernel"], e["array"], e["kind"])
        assert key not in keys, f"duplicate edge key {key}"
        keys.add(key)
