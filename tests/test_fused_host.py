"""``fused_host.c``: the user's host rewritten to launch the fused kernels, built and run on PoCL.

For every example program (and the PolyBench-style programs under ``fused_host_programs/``) the
original host and the fused host are compiled with ``gcc -std=c99 -O2 -lOpenCL`` and run with
the same arguments, the fused host alone in an empty directory (its kernel sources are
embedded); they must print the same (each program checks itself against a CPU
reference), write the same output file within 1e-4 relative, and the fused host must enqueue
exactly the plan's ``launches_after`` fused launches (it reports its count when
``POLYFUSE_COUNT_LAUNCHES`` is set).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from polyfuse.apps.cli import main as cli_main
from polyfuse.codegen.host_rewrite import COUNT_ENV

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
EXAMPLES = sorted(p for p in (ROOT / "examples").iterdir() if (p / "host.c").exists())
PROGRAMS = Path(__file__).resolve().parent / "fused_host_programs"

#: name -> (directory, --args for the analysis (None: symbolic), run arguments, output file arg)
CASES: dict[str, tuple[Path, Any, list[str], bool]] = {
    p.name: (p, None, [], False) for p in EXAMPLES if p.name != "runtime_offset"}
CASES["runtime_offset"] = (ROOT / "examples" / "runtime_offset", None, ["3", "1000"], False)
CASES["runtime_offset_m0"] = (ROOT / "examples" / "runtime_offset", "0 1000", ["0", "1000"],
                              False)
CASES["mvt"] = (PROGRAMS / "mvt", "100 out.txt", ["100"], True)
CASES["mvt_symbolic"] = (PROGRAMS / "mvt", None, ["77"], True)
CASES["bicg"] = (PROGRAMS / "bicg", "100 60 out.txt", ["100", "60"], True)
CASES["bicg_hetero"] = (PROGRAMS / "bicg", "100 60 out.txt", ["100", "60"], True)
CASES["lstm2"] = (ROOT / "examples" / "lstm2", "6 out.txt", ["6"], True)
CASES["elementwise_cpp"] = (PROGRAMS / "elementwise_cpp", None, [], False)
CASES["lstm2_time_outer"] = (PROGRAMS / "lstm2_time_outer", "5 out.txt", ["5"], True)
CASES["lstm2_symbolic"] = (ROOT / "examples" / "lstm2", None, ["5"], True)
CASES["split"] = (PROGRAMS / "split", "1000 out.txt", ["1000"], True)
#: one helper function enqueues all three launches: its call dispatches them in turn
CASES["helper"] = (PROGRAMS / "helper", "1000 out.txt", ["1000"], True)
#: every launch through one macro whose body holds the enqueue (dispatched by invocation line)
CASES["macro"] = (PROGRAMS / "macro", "1000 out.txt", ["1000"], True)
#: two identical blurs at different depths: fused by the exhaustive search (greedy: 3 launches)
CASES["denoise"] = (PROGRAMS / "denoise", "100 out.txt", ["100"], True)
#: two kernels with a float `c` and an int `n` each, given different values read at run time:
#: the fused kernel keeps a parameter per launch (one shared `c` applied the gain twice)
CASES["calibrate"] = (PROGRAMS / "calibrate", None, ["2.5", "-0.75", "1000", "600"], True)
#: helpers that call get_global_id: each fragment gets its own copy, re-indexed (a group of
#: one launch included)
CASES["helper_index"] = (PROGRAMS / "helper_index", None, [], True)
#: a grid-stride loop over get_global_size in a helper, with a size read at run time
CASES["stride_helper"] = (PROGRAMS / "stride_helper", None, ["1000"], True)
#: a launch with barriers after an early return, its width read at run time: alone in its
#: group, it runs as written on its own NDRange (its guard could not move below the barrier)
CASES["column_filter"] = (PROGRAMS / "column_filter", None, ["256"], True)
#: hosts that are not host.c (split: launches in two files, an enqueue inside a CHECK(...) macro)
HOSTS = {"elementwise_cpp": ["host.cpp"], "split": ["main.c", "stages.c"]}
#: cases fused with another orchestration than the default
ORCHESTRATION = {"bicg_hetero": "hetero"}
#: fused launches the fused host must enqueue where the test pins them: the 2-layer LSTM over 6
#: steps runs along its wavefront, one launch per step: L + T - 1 = 7 (24 originally)
#: (time outer, 5 steps: 2 + 5 - 1 = 6); with symbolic steps nothing is fused: 2 x 5 x 2;
#: denoise: the gamma correction, then both blurs in one launch (fusion/exhaustive.py)
LAUNCHES = {"lstm2": 7, "lstm2_time_outer": 6, "lstm2_symbolic": 20, "denoise": 2}


def _run_env() -> dict[str, str]:
    env = dict(os.environ)
    vendors = glob.glob("/etc/OpenCL/vendors/*.icd")
    if not vendors and "OCL_ICD_VENDORS" not in env:
        import pyopencl

        libs = glob.glob(os.path.join(os.path.dirname(pyopencl.__file__), ".libs",
                                      "libpocl*.so*"))
        if libs:  # pip's PoCL, bundled with pyopencl, as the ICD loader's vendor
            env["OCL_ICD_VENDORS"] = libs[0]
    env[COUNT_ENV] = "1"
    return env


@pytest.fixture(scope="module")
def toolchain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment to run OpenCL host programs in (skips, with the reason, if none can)."""
    why = ""
    env = _run_env()
    if shutil.which("gcc") is None:
        why = "gcc not found"
    else:
        probe = ("#define CL_TARGET_OPENCL_VERSION 120\n#include <CL/cl.h>\n"
                 "int main(void){cl_uint n = 0; return clGetPlatformIDs(0, 0, &n) != CL_SUCCESS"
                 " || n == 0;}\n")
        exe = tmp_path_factory.mktemp("probe") / "probe"
        p = subprocess.run(["gcc", "-x", "c", "-", "-o", str(exe), "-lOpenCL"], input=probe,
                           text=True, capture_output=True, check=False)
        if p.returncode != 0:
            why = "OpenCL headers/library missing: " + p.stderr.strip()[-300:]
        elif subprocess.run([str(exe)], env=env, check=False).returncode != 0:
            why = "no OpenCL platform for the ICD loader"
    if why:
        if IN_CI:
            pytest.fail(f"CI requires the OpenCL toolchain: {why}")
        pytest.skip(why)
    return env


def _gcc(srcs: list[Path], exe: Path, include: Path) -> str:
    """Compile (with -Wall); returns the compiler's warnings."""
    cc = ["g++", "-std=c++11"] if srcs[0].suffix == ".cpp" else ["gcc", "-std=c99"]
    p = subprocess.run([*cc, "-O2", "-Wall", "-DCL_TARGET_OPENCL_VERSION=120", "-I", str(include),
                        *map(str, srcs), "-o", str(exe), "-lOpenCL", "-lm"],
                       capture_output=True, text=True, check=False, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stderr


def _fuse(case: str, out: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    directory, args, _, _ = CASES[case]
    monkeypatch.chdir(directory)
    argv = ["fuse", "kernels.cl", "--out", str(out), "-q"]
    for host in HOSTS.get(case, ["host.c"]):
        argv += ["--host", host]
    if args is not None:
        argv += ["--args", args]
    if case in ORCHESTRATION:
        argv += ["--orchestration", ORCHESTRATION[case]]
    assert cli_main(argv) == 0
    return json.loads((out / "plan.json").read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_host_runs_like_the_original(case: str, tmp_path: Path, toolchain: dict[str, str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    directory, _, run_args, writes = CASES[case]
    plan = _fuse(case, tmp_path, monkeypatch)
    hosts = HOSTS.get(case, ["host.c"])
    fused_srcs = [tmp_path / ("fused_host" + Path(hosts[0]).suffix)] if len(hosts) == 1 else \
        [tmp_path / f"fused_{h}" for h in hosts]
    text = "".join(src.read_text() for src in fused_srcs)
    for g in plan["groups"]:
        assert f"pf_launch_g{g['id']}(" in text or f"pf_wave_g{g['id']}(" in text
    _gcc([directory / h for h in hosts], tmp_path / "orig", directory)
    warnings = _gcc(fused_srcs, tmp_path / "fused", directory)
    # the generated code adds no warning of its own (hosts built with -Werror still build)
    assert not [ln for ln in warnings.splitlines() if "warning" in ln and "pf_" in ln], warnings
    # the fused host runs from anywhere: its binary alone, in an empty directory (no .cl file)
    alone = tmp_path / "empty"
    alone.mkdir()
    shutil.copy(tmp_path / "fused", alone / "fused")
    runs = {}
    for which, exe, cwd in (("orig", tmp_path / "orig", directory),
                            ("fused", alone / "fused", alone)):
        args = run_args + ([str(tmp_path / f"{which}.txt")] if writes else [])
        runs[which] = subprocess.run([str(exe), *args], cwd=cwd, env=toolchain,
                                     capture_output=True, text=True, check=False, timeout=120)
    assert sorted(os.listdir(alone)) == ["fused"]
    orig, fused = runs["orig"], runs["fused"]
    assert orig.returncode == 0, orig.stderr
    assert fused.returncode == 0, fused.stderr
    assert fused.stdout == orig.stdout
    m = re.search(r"polyfuse: (\d+) fused launches", fused.stderr)
    assert m, fused.stderr
    assert int(m.group(1)) == LAUNCHES.get(case, plan["launches_after"])
    if isinstance(plan["launches_after"], int):
        assert int(m.group(1)) == plan["launches_after"] <= plan["launches_before"]
    if writes:
        want = np.loadtxt(tmp_path / "orig.txt")
        got = np.loadtxt(tmp_path / "fused.txt")
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_wavefront_loop_nest_is_rewritten(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The layer x time nest iterates over wavefront steps; one launch per step."""
    plan = _fuse("lstm2", tmp_path, monkeypatch)
    assert plan["launches_before"] == 24  # L * T * k = 2 * 6 * 2
    text = (tmp_path / "fused_host.c").read_text()
    assert "for (pf_w = 1; pf_any; pf_w++)" in text
    assert "if ((long long)(l) + (long long)(t) != pf_w) continue;" in text
    assert "__kernel void pf_wave_g0(" in text
    assert "wavefront launch fusion: one launch of 2 fragments per step l + t" in \
        (tmp_path / "report.md").read_text()


def test_rewrite_changes_only_the_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Undoing the renames and removing the generated block gives back the original, byte for
    byte: comments, formatting and untouched statements survive."""
    _fuse("lstm_cell", tmp_path, monkeypatch)
    text = (tmp_path / "fused_host.c").read_text()
    start = text.index("\n/* ---- polyfuse: fused kernels")
    marker = "/* ---- end of polyfuse ---- */\n\n"
    end = text.index(marker) + len(marker)
    body = text[:start] + text[end:]
    body = re.sub(r"\bpf_set_arg\(", "clSetKernelArg(", body)
    body = re.sub(r"\bpf_fopen\(", "fopen(", body)
    body = re.sub(r"\bpf_create_program\(", "clCreateProgramWithSource(", body)
    body = re.sub(r"\bpf_(?:launch_g\d+|defer_g\d+_\d+)\(", "clEnqueueNDRangeKernel(", body)
    body = re.sub(r", \(long long\)\(\w+\)\)", ")", body)
    assert body == (ROOT / "examples" / "lstm_cell" / "host.c").read_text()
    assert "clEnqueueNDRangeKernel(" not in text[end:]


def test_fused_host_refuses_other_arguments(tmp_path: Path, toolchain: dict[str, str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels specialized for ``--args "100 ..."`` are not launched for n = 77."""
    _fuse("mvt", tmp_path, monkeypatch)
    _gcc([tmp_path / "fused_host.c"], tmp_path / "fused", PROGRAMS / "mvt")
    p = subprocess.run([str(tmp_path / "fused"), "77", str(tmp_path / "o.txt")],
                       cwd=PROGRAMS / "mvt", env=toolchain, capture_output=True, text=True,
                       check=False, timeout=120)
    assert p.returncode != 0
    assert "other than those the fused kernels were generated for" in p.stderr


def test_a_call_running_launches_of_different_loops_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper's one enqueue runs scale and shift_add once and square in a host loop: which
    launch a run of the call is cannot be told by counting, so no fused host is written, and
    report.md says why (the fused kernels are still written and verified)."""
    host = (PROGRAMS / "helper" / "host.c").read_text()
    call = '    CHECK(enqueue_1d(queue, k_square, n), "square");'
    assert call in host
    (tmp_path / "host.c").write_text(host.replace(
        call, "    for (int r = 0; r < 2; r++)\n    " + call))
    shutil.copy(PROGRAMS / "helper" / "kernels.cl", tmp_path / "kernels.cl")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert cli_main(["fuse", "kernels.cl", "--host", "host.c", "--args", "1000 o.txt", "--out",
                     str(out), "-q", "--verify"]) == 0
    assert not (out / "fused_host.c").exists()
    report = (out / "report.md").read_text()
    assert "fused host not written: host.c:" in report
    assert "in different host loops; polyfuse cannot tell which launch each run of the call " \
        "is" in report
