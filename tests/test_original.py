"""``--check-original``: polyfuse's unfused model checked against the original program, compiled
with gcc and run as written under a tracing ``LD_PRELOAD`` shim (``polyfuse.runtime.original``).

The check must pass on real hosts (the examples, a build-option program, a two-file host with
``--args``) and must catch a model that is wrong in a way ``--verify`` cannot see (fused and
unfused sharing the mistake): here, a model loaded without the program's build options.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from polyfuse.core.program import PolyfuseError
from polyfuse.frontend.host import load_opencl
from polyfuse.runtime.original import check_against_original

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "host_programs"
BUILD_OPTION = PROGRAMS / "build_option"


@pytest.fixture(scope="module", autouse=True)
def toolchain(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Skip (with the reason) where no OpenCL host can be compiled and run."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not found")
    exe = tmp_path_factory.mktemp("probe") / "probe"
    probe = ("#define CL_TARGET_OPENCL_VERSION 120\n#include <CL/cl.h>\nint main(void)"
             "{cl_uint n = 0; return clGetPlatformIDs(0, 0, &n) != CL_SUCCESS || n == 0;}\n")
    p = subprocess.run(["gcc", "-x", "c", "-", "-o", str(exe), "-lOpenCL"], input=probe,
                       text=True, capture_output=True, check=False)
    if p.returncode != 0:
        pytest.skip("OpenCL headers/library missing")


@pytest.mark.parametrize("name,argv", [("lstm_cell", []), ("qkv", []),
                                       ("runtime_offset", ["3", "1000"])])
def test_examples_match_their_original(name: str, argv: list[str]) -> None:
    d = ROOT / "examples" / name
    program = load_opencl([str(d / "kernels.cl")], host=[str(d / "host.c")], argv=argv)
    res = check_against_original(program, [str(d / "host.c")], argv=argv)
    assert res.reads >= 1 and res.writes >= 1 and res.bytes_compared > 0
    assert res.launches == len(program.launches) or res.launches > 1


def test_build_options_and_source_strings_are_checked_against_the_run() -> None:
    host = str(BUILD_OPTION / "host.c")
    program = load_opencl(None, host=[host], argv=[])
    res = check_against_original(program, [host])
    assert (res.writes, res.reads, res.launches) == (1, 1, 2)
    assert res.bytes_compared == 4000 and res.undefined == 0


def test_a_model_blind_to_the_build_option_is_caught(tmp_path: Path) -> None:
    """The issue's silent miscompile: a model made with SCALE = 1.0f (the kernel's default)
    where the program builds with -DSCALE=3.0f.  Fused and unfused would agree; the original
    does not."""
    for f in BUILD_OPTION.iterdir():
        shutil.copy(f, tmp_path / f.name)
    blind = tmp_path / "host.c"
    blind.write_text(blind.read_text().replace('"-DSCALE=3.0f"', '""'))
    model = load_opencl(None, host=[str(blind)], argv=[])
    with pytest.raises(PolyfuseError, match=r"does not match the original program: read 1 "
                       r"\(clEnqueueReadBuffer of buffer 'd_z'\).*elements differ") as info:
        check_against_original(model, [str(BUILD_OPTION / "host.c")])
    assert info.value.line == 68 and info.value.file.endswith("host.c")


def test_elements_no_one_writes_are_left_out_and_counted() -> None:
    d = PROGRAMS / "multifile"
    hosts = [str(d / "main.c"), str(d / "ocl_util.c")]
    argv = ["-n", "100", "--scale", "2.5f"]
    res = check_against_original(load_opencl(None, host=hosts, argv=argv), hosts, argv=argv)
    assert res.undefined == 1 and res.bytes_compared == 99 * 4  # out[n - 1] is never written


def test_cli_check_original(tmp_path: Path) -> None:
    args = [sys.executable, "-m", "polyfuse", "fuse", "--host", str(BUILD_OPTION / "host.c"),
            "--out", str(tmp_path / "o"), "--check-original", "--verify"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "the unfused model matches the original program: 1 read(s) (4000 bytes)" in r.stderr
    broken = tmp_path / "broken.c"
    broken.write_text((BUILD_OPTION / "host.c").read_text().replace(
        "int n = argc", "int n = undeclared_size + argc"))
    r = subprocess.run([*args[:4], "--host", str(broken), *args[6:]], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 1 and "Traceback" not in r.stderr
