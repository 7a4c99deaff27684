"""The ``polyfuse`` command: JSON contract, readable output, and bad input as one clear line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").iterdir() if (p / "host.c").exists())

EDGE_KEYS = {"src", "dst", "src_kernel", "dst_kernel", "array", "kind", "width", "conditions",
             "loop_carried", "relation", "host"}
LAUNCH_KEYS = {"id", "kernel", "global_size", "local_size", "host_loops"}


def run_cli(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "polyfuse", *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_analyze_json_contract(example):
    r = run_cli("analyze", example / "kernels.cl", "--host", example / "host.c", "--json",
                "--param", "n=1024", "--param", "m=3") if example.name == "runtime_offset" else \
        run_cli("analyze", example / "kernels.cl", "--host", example / "host.c", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)  # stdout holds the JSON alone
    assert data["launches"], "every example launches kernels"
    for launch in data["launches"]:
        assert LAUNCH_KEYS <= set(launch)
    ids = {launch["id"] for launch in data["launches"]}
    for edge in data["edges"]:
        assert EDGE_KEYS <= set(edge)
        assert edge["kind"] in ("RAW", "WAR", "WAW")
        assert edge["width"] in ("thread", "block", "global")
        if edge["width"] == "global":
            assert edge.get("witness"), edge
        if not edge["host"]:
            assert edge["src"] in ids and edge["dst"] in ids


def test_analyze_table_is_readable():
    ex = ROOT / "examples" / "stencil3"
    r = run_cli("analyze", ex / "kernels.cl", "--host", ex / "host.c")
    assert r.returncode == 0, r.stderr
    assert "width" in r.stdout and "global" in r.stdout


def test_runtime_parameter_conditions():
    ex = ROOT / "examples" / "runtime_offset"
    r = run_cli("analyze", ex / "kernels.cl", "--host", ex / "host.c", "--json")
    assert r.returncode == 0, r.stderr
    edges = [e for e in json.loads(r.stdout)["edges"] if not e["host"] and e["kind"] == "RAW"]
    assert any(e["width"] == "global" and "thread" in e["conditions"] for e in edges), edges
    fixed = run_cli("analyze", ex / "kernels.cl", "--host", ex / "host.c", "--json",
                    "--param", "m=0")
    assert fixed.returncode == 0, fixed.stderr
    edges = [e for e in json.loads(fixed.stdout)["edges"] if not e["host"] and e["kind"] == "RAW"]
    assert edges and all(e["width"] == "thread" for e in edges)


def _bad(tmp_path, kernels: str, host: str):
    k = tmp_path / "k.cl"
    h = tmp_path / "host.c"
    k.write_text(kernels)
    h.write_text(host)
    return run_cli("analyze", k, "--host", h)


KERNEL = """__kernel void scale(__global float *a, __global float *b, int n) {
  int i = get_global_id(0);
  if (i < n) b[i] = 2.0f * a[i];
}
"""

HOST = """#include <CL/cl.h>
#include <stdlib.h>
#define N 256
int main(int argc, char **argv) {
  cl_int err;
  cl_platform_id platform; cl_device_id device;
  clGetPlatformIDs(1, &platform, NULL);
  clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
  cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
  cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
  cl_program prog = clCreateProgramWithSource(ctx, 1, NULL, NULL, &err);
  clBuildProgram(prog, 1, &device, NULL, NULL, NULL);
  cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
  cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
  int n = N;
  cl_kernel k = clCreateKernel(prog, "KERNEL_NAME", &err);
  SET_ARGS
  size_t global[1] = {N};
  size_t local[1] = {64};
  clEnqueueNDRangeKernel(q, k, 1, NULL, global, local, 0, NULL, NULL);
  clFinish(q);
  return 0;
}
"""
ALL_ARGS = """clSetKernelArg(k, 0, sizeof(cl_mem), &a);
  clSetKernelArg(k, 1, sizeof(cl_mem), &b);
  clSetKernelArg(k, 2, sizeof(int), &n);"""


def _host(name="scale", args=ALL_ARGS):
    return HOST.replace("KERNEL_NAME", name).replace("SET_ARGS", args)


def _assert_one_line_error(r, *needles):
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_good_program_runs(tmp_path):
    r = _bad(tmp_path, KERNEL, _host())
    assert r.returncode == 0, r.stderr


def test_kernel_syntax_error_names_file_and_line(tmp_path):
    r = _bad(tmp_path, KERNEL.replace("b[i] = 2.0f * a[i];", "b[i] = 2.0f * ;"), _host())
    _assert_one_line_error(r, "k.cl:3")


def test_host_syntax_error_names_file_and_line(tmp_path):
    r = _bad(tmp_path, KERNEL, _host().replace("int n = N;", "int n = ;"))
    _assert_one_line_error(r, "host.c:15")


def test_unknown_kernel_name(tmp_path):
    r = _bad(tmp_path, KERNEL, _host(name="scal"))
    _assert_one_line_error(r, "host.c:16", "scal")


def test_wrong_argument_index(tmp_path):
    r = _bad(tmp_path, KERNEL, _host(args=ALL_ARGS + "\n  clSetKernelArg(k, 3, sizeof(int), &n);"))
    _assert_one_line_error(r, "host.c:20")


def test_launch_with_unset_arguments(tmp_path):
    args = "clSetKernelArg(k, 0, sizeof(cl_mem), &a);"
    r = _bad(tmp_path, KERNEL, _host(args=args))
    _assert_one_line_error(r, "host.c:20", "scale")


def test_unsupported_kernel_construct(tmp_path):
    kernel = KERNEL.replace("if (i < n) b[i] = 2.0f * a[i];", "lbl: b[i] = a[i]; goto lbl;")
    r = _bad(tmp_path, kernel, _host())
    _assert_one_line_error(r, "k.cl:3")


def test_missing_file():
    r = run_cli("analyze", "does/not/exist.cl")
    _assert_one_line_error(r, "exist.cl")


def test_usage_error_exit_status():
    r = run_cli("analyze", "x.cl", "--param", "oops")
    assert r.returncode == 2


def test_devices_lists_pocl():
    r = run_cli("devices", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout), "at least one OpenCL device (PoCL) is available"


@pytest.mark.parametrize("example,after", [("qkv", 1), ("gemm_bias_relu_transpose", 1),
                                           ("stencil3", 2)])
def test_fuse_writes_plan_source_report(tmp_path, example, after):
    ex = ROOT / "examples" / example
    r = run_cli("fuse", ex / "kernels.cl", "--host", ex / "host.c", "--out", tmp_path, "--verify")
    assert r.returncode == 0, r.stderr
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["launches_after"] == after
    assert plan["verified"]["ok"] is True and plan["verified"]["reference"] == "unfused"
    for group in plan["groups"]:
        assert group["orchestration"] in ("single", "vertical", "horizontal", "hybrid")
        assert group["members"] and group["kernel"]
    assert "__kernel void" in (tmp_path / "fused.cl").read_text()
    report = (tmp_path / "report.md").read_text()
    assert "## Groups" in report and "passed" in report
    if any(len(g["members"]) > 1 for g in plan["groups"]):  # weighed, kept fused
        assert "## Fused groups against their launches apart" in report
    if after > 1:
        assert "global" in report.split("## Edges that blocked fusion")[1]
    assert example in r.stdout  # the summary row names the program


def test_fuse_no_weigh_keeps_the_groups_unweighed(tmp_path):
    ex = ROOT / "examples" / "qkv"
    r = run_cli("fuse", ex / "kernels.cl", "--host", ex / "host.c", "--out", tmp_path,
                "--no-weigh")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "plan.json").read_text())["launches_after"] == 1
    assert "against their launches apart" not in (tmp_path / "report.md").read_text()


def test_fuse_runtime_parameter(tmp_path):
    ex = ROOT / "examples" / "runtime_offset"
    r = run_cli("fuse", ex / "kernels.cl", "--host", ex / "host.c", "--out", tmp_path,
                "--param", "m=0", "--param", "n=1024", "--verify")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "plan.json").read_text())["launches_after"] == 1


def test_fuse_bad_input_is_one_line(tmp_path):
    r = run_cli("fuse", tmp_path / "missing.cl", "--host", tmp_path / "missing.c",
                "--out", tmp_path / "o")
    _assert_one_line_error(r, "missing")


def test_demo_fuses_bert_qkv_into_one_launch(tmp_path):
    r = run_cli("demo", "--out", tmp_path, "-q")
    assert r.returncode == 0, r.stderr
    assert "9 → 1" in r.stdout and "onnxruntime + unfused: ok" in r.stdout
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["launches_after"] == 1 and plan["verified"]["ok"] is True


def test_fuse_tune_reports_variants(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYFUSE_CACHE", str(tmp_path / "cache"))
    ex = ROOT / "examples" / "qkv"
    r = run_cli("fuse", ex / "kernels.cl", "--host", ex / "host.c", "--out", tmp_path / "o",
                "--tune", "-q")
    assert r.returncode == 0, r.stderr
    report = (tmp_path / "o" / "report.md").read_text()
    tuning = report.split("## Autotuning")[1]
    assert "vertical" in tuning and "horizontal" in tuning and "unfused" in tuning


def test_parallelize_writes_host_kernels_report(tmp_path):
    src = ROOT / "tests" / "autopar_kernels" / "gemm.c"
    r = run_cli("parallelize", src, "--out", tmp_path, "--report")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "gemm_host.c").exists() and (tmp_path / "gemm_kernels.cl").exists()
    report = json.loads((tmp_path / "report.json").read_text())
    assert report and "dim0" in r.stdout


def test_parallelize_missing_file(tmp_path):
    r = run_cli("parallelize", tmp_path / "nope.c", "--out", tmp_path / "o", "-q")
    _assert_one_line_error(r, "nope.c")


def test_roofline_places_program_kernels(tmp_path):
    ex = ROOT / "examples" / "gemm_bias_relu_transpose"
    r = run_cli("roofline", "--out", tmp_path, "--quick", "--max-mib", "16", "-q",
                "--program", ex / "kernels.cl", "--host", ex / "host.c", "--fused")
    assert r.returncode == 0, r.stderr
    data = json.loads((tmp_path / "roofline.json").read_text())
    names = [k["name"] for k in data["kernels"]]
    assert any(n.startswith("gemm#") for n in names) and any(n.startswith("fused:") for n in names)
    placed = [k for k in data["kernels"] if k["arithmetic_intensity"] > 0]
    assert placed and all(k["flops_per_s"] > 0 for k in placed)
    # the transpose does no floating-point work: listed (not placed), never silently dropped
    assert [k["name"].split("#")[0] for k in data["kernels"] if k not in placed] == ["transpose"]
    assert (tmp_path / "roofline.png").stat().st_size > 0


# A host that reads its kernels from disk, as most shipped programs do; the user keeps an edited
# copy of the kernel file next to it and names that copy on the command line.
READS_KERNELS_HOST = r"""#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#define N 1024

static char *load(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = (char *)malloc(size + 1);
    *len = fread(text, 1, size, f);
    text[*len] = '\0';
    fclose(f);
    return text;
}

int main(void)
{
    cl_int err;
    cl_platform_id platform; cl_device_id device;
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    size_t len;
    char *src = load("kernels.cl", &len);
    cl_program prog = clCreateProgramWithSource(ctx, 1, (const char **)&src, &len, &err);
    clBuildProgram(prog, 1, &device, NULL, NULL, NULL);
    float *h = (float *)calloc(N, sizeof(float));
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    clEnqueueWriteBuffer(q, a, CL_TRUE, 0, N * sizeof(float), h, 0, NULL, NULL);
    int n = N;
    cl_kernel scale = clCreateKernel(prog, "scale", &err);
    clSetKernelArg(scale, 0, sizeof(cl_mem), &a);
    clSetKernelArg(scale, 1, sizeof(cl_mem), &b);
    clSetKernelArg(scale, 2, sizeof(int), &n);
    cl_kernel shift = clCreateKernel(prog, "shift", &err);
    clSetKernelArg(shift, 0, sizeof(cl_mem), &b);
    clSetKernelArg(shift, 1, sizeof(cl_mem), &a);
    clSetKernelArg(shift, 2, sizeof(int), &n);
    size_t global = N, local = 64;
    clEnqueueNDRangeKernel(q, scale, 1, NULL, &global, &local, 0, NULL, NULL);
    clEnqueueNDRangeKernel(q, shift, 1, NULL, &global, &local, 0, NULL, NULL);
    clEnqueueReadBuffer(q, a, CL_TRUE, 0, N * sizeof(float), h, 0, NULL, NULL);
    printf("%f\n", h[0]);
    return 0;
}
"""

SHIPPED_KERNELS = """__kernel void scale(__global const float *a, __global float *b, int n) {
  int i = get_global_id(0);
  if (i < n) b[i] = 2.0f * a[i];
}
__kernel void shift(__global const float *b, __global float *a, int n) {
  int i = get_global_id(0);
  if (i < n) a[i] = b[i] + 1.0f;
}
"""


def _kernel_copy_project(tmp_path):
    (tmp_path / "host.c").write_text(READS_KERNELS_HOST)
    (tmp_path / "kernels.cl").write_text(SHIPPED_KERNELS)
    # the user's edit: shift also reads the mirrored element (and has a typo the build catches)
    edited = SHIPPED_KERNELS.replace("a[i] = b[i] + 1.0f;", "a[i] = b[i] + b[n - 1 - i];")
    (tmp_path / "mine.cl").write_text(edited.replace("get_global_id(0);\n  if (i < n) a",
                                                     "get_globl_id(0);\n  if (i < n) a"))


@pytest.mark.parametrize("command", ["analyze", "count", "fuse"])
def test_kernel_file_the_host_does_not_read_is_an_error(tmp_path, command):
    _kernel_copy_project(tmp_path)
    extra = ["--out", tmp_path / "o", "--verify"] if command == "fuse" else []
    r = run_cli(command, tmp_path / "mine.cl", "--host", tmp_path / "host.c", "-q", *extra)
    line = READS_KERNELS_HOST.splitlines().index(
        next(ln for ln in READS_KERNELS_HOST.splitlines() if "clCreateProgramWithSource" in ln))
    _assert_one_line_error(r, f"host.c:{line + 1}", "kernels.cl", "mine.cl",
                           "--kernel-source-override")
    assert not (tmp_path / "o").exists()


def test_kernel_source_override_builds_the_named_file(tmp_path):
    _kernel_copy_project(tmp_path)
    (tmp_path / "mine.cl").write_text((tmp_path / "mine.cl").read_text().replace("globl", "global"))
    r = run_cli("analyze", tmp_path / "mine.cl", "--host", tmp_path / "host.c", "--json",
                "--kernel-source-override")
    assert r.returncode == 0, r.stderr
    raw = [e for e in json.loads(r.stdout)["edges"] if e["array"] == "b" and e["kind"] == "RAW"]
    assert [e["width"] for e in raw] == ["global"]  # the edited shift, not the shipped one
    shipped = run_cli("analyze", tmp_path / "kernels.cl", "--host", tmp_path / "host.c", "--json")
    assert shipped.returncode == 0, shipped.stderr
    assert [e["width"] for e in json.loads(shipped.stdout)["edges"]
            if e["array"] == "b" and e["kind"] == "RAW"] == ["thread"]
    assert "--kernel-source-override" in run_cli("fuse", "--help").stdout
