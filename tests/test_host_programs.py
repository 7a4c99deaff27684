"""Host programs as real applications ship them (issue 11): PolyBench- and Rodinia-style hosts,
C++, several translation units and kernel files, build options, linked lists, program
arguments; and the refusals that keep a model from being silently empty or wrong.

Each program's UAR is checked against the brute-force oracle (``polyfuse.oracle``) at the
program's own (small) sizes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import islpy as isl
import pytest
import sympy

from polyfuse.apps.cli import main as cli_main
from polyfuse.core.program import Launch, PolyfuseError, Program, UnsupportedError
from polyfuse.frontend.host import load_opencl
from polyfuse.oracle.bruteforce import brute_force_dependences, edge_index
from polyfuse.uar import build_uar

pytest.importorskip("clang.cindex")

PROGRAMS = Path(__file__).resolve().parent / "host_programs"
ORDER = {"thread": 0, "block": 1, "global": 2}


def _points(rel: isl.Map) -> set:
    n_in = rel.dim(isl.dim_type.in_)
    out: set = set()

    def add(p: isl.Point) -> None:
        vals = [p.get_coordinate_val(isl.dim_type.set, i).to_python()
                for i in range(n_in + rel.dim(isl.dim_type.out))]
        out.add((tuple(vals[:n_in]), tuple(vals[n_in:])))

    rel.wrap().foreach_point(add)
    return out


def check_against_oracle(program: Program) -> dict:
    """The UAR has exactly the concrete dependences brute force finds, with their widths."""
    assert not program.params, program.params
    uar = build_uar(program)
    brute = edge_index(brute_force_dependences(program))
    symbolic: dict[tuple, Any] = {}
    for e in uar.edges:
        pts = _points(e.relation) if e.relation.wrap().is_bounded() else None
        if pts is not None and not pts:
            continue
        symbolic[(e.src, e.dst, e.array, e.kind)] = (e, pts)
    assert set(symbolic) == set(brute), set(symbolic) ^ set(brute)
    for key, be in brute.items():
        ue, pts = symbolic[key]
        if pts is not None:
            assert pts == be.pairs, key
        if not be.host:
            assert ue.width == be.width, (key, ue.width, be.width)
    return {k: v[0].width for k, v in symbolic.items()}


def _edge(widths: dict, src_kernel: str, dst_kernel: str, program: Program, kind: str = "RAW"
          ) -> str:
    ids = {op.id: op.kernel for op in program.launches}
    found = [w for (s, d, _, k), w in widths.items()
             if ids.get(s) == src_kernel and ids.get(d) == dst_kernel and k == kind]
    assert found, (src_kernel, dst_kernel, kind, widths)
    return found[0]


# ----------------------------------------------------------------------------------------------
# Programs in the styles of the public suites
# ----------------------------------------------------------------------------------------------


def test_polybench_style_host() -> None:
    """posix_memalign allocation wrapper, float ceil global sizes, ``typedef float DATA_TYPE``
    kernels, the kernel file found from the host's fopen, a -D dataset switch."""
    host = PROGRAMS / "polybench_2mm" / "2mm.c"
    program = load_opencl(None, host=str(host), defines={"MINI_DATASET": None})
    assert [op.kernel for op in program.launches] == ["mm2_kernel1", "mm2_kernel2"]
    assert all(op.global_size == (8, 8) and op.local_size == (4, 2) for op in program.launches)
    assert any(f.endswith("2mm.cl") for f in program.files)
    params = program.kernels["mm2_kernel1"].params
    assert params[0].type == "float" and params[6].type == "float"
    widths = check_against_oracle(program)
    assert _edge(widths, "mm2_kernel1", "mm2_kernel2", program) == "global"


def test_polybench_style_host_standard_sizes_is_quick() -> None:
    """2048 x 2048 initialisation loops are not executed element by element."""
    host = PROGRAMS / "polybench_2mm" / "2mm.c"
    program = load_opencl(None, host=str(host))
    assert [op.global_size for op in program.launches] == [(2048, 2048)] * 2


def test_rodinia_style_cpp_host() -> None:
    """C++ (iostream, std::string, std::vector, classes, new/delete), a getopt/switch option
    loop evaluated with --args, sizes read from a data file given with --param."""
    host = PROGRAMS / "rodinia_cpp" / "main.cpp"
    program = load_opencl(None, host=str(host), argv=["-i", "2", "-f", "grid.txt"],
                          params={"rows": 8, "cols": 8}, check_params=True)
    launches = program.launches
    assert [op.kernel for op in launches] == ["stencil", "scale"]
    assert launches[0].global_size == (8, 8) and launches[1].global_size == (64,)
    assert [lp.upper for lp in launches[0].loops] == [2]
    widths = check_against_oracle(program)
    assert _edge(widths, "stencil", "scale", program) == "thread"


def test_rodinia_style_sizes_from_file_are_named_parameters() -> None:
    host = PROGRAMS / "rodinia_cpp" / "main.cpp"
    program = load_opencl(None, host=str(host), argv=["-i", "1", "-f", "grid.txt"])
    assert {"rows", "cols"} <= set(program.params)
    with pytest.raises(PolyfuseError, match=r"--param row.*known: .*cols.*rows"):
        load_opencl(None, host=str(host), argv=["-f", "grid.txt"], params={"row": 8},
                    check_params=True)


def test_two_translation_units_two_kernel_files_and_build_options() -> None:
    """A host over two .c files; one program from two .cl files (count=2); -DSCALE from a
    snprintf'd option string built from argv."""
    d = PROGRAMS / "multifile"
    program = load_opencl(None, host=[str(d / "main.c"), str(d / "ocl_util.c")],
                          argv=["-n", "32", "--scale", "3.0f"])
    assert [op.kernel for op in program.launches] == ["produce", "consume"]
    assert program.launches[0].global_size == (32,)
    produce = program.kernels["produce"]
    assert "3.0f" in produce.source and "1.0f" not in produce.source
    widths = check_against_oracle(program)
    assert _edge(widths, "produce", "consume", program) == "global"


def test_linked_list_host() -> None:
    """Buffers kept in a self-referential struct list, launches while walking it."""
    program = load_opencl(None, host=str(PROGRAMS / "linked_list" / "host.c"))
    launches = program.launches
    assert len(launches) == 2
    # stage k+1 accumulates stage k: the first launch's output is the second one's input
    assert launches[0].arg(0).buffer == launches[1].arg(1).buffer
    assert len({launches[0].arg(1).buffer, launches[0].arg(0).buffer,
                launches[1].arg(0).buffer}) == 3
    widths = check_against_oracle(program)
    assert _edge(widths, "step", "step", program) == "thread"


# ----------------------------------------------------------------------------------------------
# Build options and source strings (issue 9 item 1)
# ----------------------------------------------------------------------------------------------

SCALE_KERNEL = """
#ifndef SCALE
#define SCALE 1.0f
#endif
__kernel void scale(__global float *a, __global float *b) {
    int i = get_global_id(0);
    b[i] = SCALE * a[i];
}
"""

SCALE_HOST = r"""
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
static char *load(const char *path) {
    FILE *f = fopen(path, "rb");
    char *s = (char *)malloc(4096);
    size_t n = fread(s, 1, 4095, f);
    s[n] = 0;
    fclose(f);
    return s;
}
int main(void) {
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    SOURCES
    cl_kernel k = clCreateKernel(prog, "scale", &err);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(cl_mem), &b);
    size_t g = 64;
    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    clFinish(q);
    return 0;
}
"""


@pytest.mark.parametrize("sources", [
    'const char *src = load("scale.cl");\n'
    '    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);\n'
    '    clBuildProgram(prog, 0, NULL, "-DSCALE=3.0f -cl-fast-relaxed-math", NULL, NULL);',
    'const char *srcs[2] = {"#define SCALE 3.0f\\n", load("scale.cl")};\n'
    '    cl_program prog = clCreateProgramWithSource(ctx, 2, srcs, NULL, &err);\n'
    '    clBuildProgram(prog, 0, NULL, NULL, NULL, NULL);',
])
def test_build_options_and_define_strings_are_honoured(tmp_path: Path, sources: str) -> None:
    (tmp_path / "scale.cl").write_text(SCALE_KERNEL)
    (tmp_path / "host.c").write_text(SCALE_HOST.replace("SOURCES", sources))
    # the kernel file given on the command line too: the host's build options still win
    program = load_opencl(str(tmp_path / "scale.cl"), host=str(tmp_path / "host.c"))
    code = " ".join(s.code for s in program.kernels["scale"].statements)
    assert "3.0f" in code and "1.0f" not in code


@pytest.mark.parametrize("count, sources, held", [
    ("3", 'const char *src = load("scale.cl");', 1),
    ("1000000000", 'const char *src = load("scale.cl");', 1),
    ("4", 'const char *srcs[2] = {"#define SCALE 3.0f\\n", load("scale.cl")};', 2),
    ("0", 'const char *src = load("scale.cl");', 1),
])
def test_a_source_count_past_the_strings_array_is_refused_at_its_line(
        tmp_path: Path, count: str, sources: str, held: int) -> None:
    """A count larger than the array of source strings reads past its end (a count of 10^9
    once made analysis loop over 10^9 unknown pieces): refused at the call, naming both."""
    (tmp_path / "scale.cl").write_text(SCALE_KERNEL)
    strings = "&src" if "srcs" not in sources else "srcs"
    (tmp_path / "host.c").write_text(SCALE_HOST.replace("SOURCES", f"""{sources}
    cl_program prog = clCreateProgramWithSource(ctx, {count}, {strings}, NULL, &err);
    clBuildProgram(prog, 0, NULL, "-DSCALE=3.0f", NULL, NULL);"""))
    line = next(i + 1 for i, t in enumerate((tmp_path / "host.c").read_text().splitlines())
                if "clCreateProgramWithSource" in t)
    with pytest.raises(UnsupportedError, match=rf"host.c:{line}: clCreateProgramWithSource: "
                       rf"count is {count}, but the strings array it reads holds {held}$"):
        load_opencl(None, host=str(tmp_path / "host.c"))


BLOCK_KERNEL = """
__kernel void scale(__global float *a, __global float *b) {
    __local float tile[BLOCK_SIZE];
    int i = get_global_id(0), l = get_local_id(0);
    tile[l] = a[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    b[i] = 2.0f * tile[BLOCK_SIZE - 1 - l];
}
"""


def test_build_options_made_at_run_time_define_what_the_kernel_needs(tmp_path: Path) -> None:
    """The kernel file on the command line uses BLOCK_SIZE, which only the host's sprintf'd
    options define: it is parsed when the host builds it, not before the host runs."""
    (tmp_path / "scale.cl").write_text(BLOCK_KERNEL)
    (tmp_path / "host.c").write_text(SCALE_HOST.replace("SOURCES", """
    int bs = 16;
    char opts[64];
    sprintf(opts, "-DBLOCK_SIZE=%d", bs);
    const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, opts, NULL, NULL);"""))
    program = load_opencl(str(tmp_path / "scale.cl"), host=str(tmp_path / "host.c"))
    assert "-DBLOCK_SIZE=16" in program.kernels["scale"].build_options
    assert [op.kernel for op in program.launches] == ["scale"]


def test_build_options_and_file_name_assembled_with_strcpy_strcat(tmp_path: Path) -> None:
    """A library build helper copies and appends pieces (strcpy/strcat) into char arrays under
    a device-type branch; the paths agree on the options, so they are known, and the file
    name it assembles is the one opened."""
    (tmp_path / "scale.cl").write_text(BLOCK_KERNEL)
    (tmp_path / "host.c").write_text(SCALE_HOST.replace("SOURCES", """
    char file[32], opts[64];
    cl_device_type type;
    clGetDeviceInfo(NULL, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
    strcpy(file, "sca");
    strncat(file, "lexyz", 2);
    strcpy(opts, "-DOPENCL ");
    if (type == CL_DEVICE_TYPE_GPU) {
        strcat(file, ".cl");
        strcat(opts, "-DBLOCK_SIZE=16");
    } else {
        strcat(file, ".cl");
        strcat(opts, "-DBLOCK_SIZE=16");
    }
    const char *src = load(file);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, opts, NULL, NULL);""").replace(
        "#include <stdio.h>", "#include <stdio.h>\n#include <string.h>"))
    program = load_opencl(None, host=str(tmp_path / "host.c"))
    assert program.kernels["scale"].build_options[-2:] == ("-DOPENCL", "-DBLOCK_SIZE=16")


@pytest.mark.parametrize("build", [
    # the paths of an open condition append different options
    """if (type == CL_DEVICE_TYPE_GPU) strcat(opts, "-DBLOCK_SIZE=16");
    else strcat(opts, "-DBLOCK_SIZE=8");""",
    # a loop appends once per iteration
    """for (int i = 0; i < (int)type; i++) strcat(opts, "-DBLOCK_SIZE=16");""",
])
def test_build_options_that_differ_between_paths_are_unknown(tmp_path: Path, build: str
                                                             ) -> None:
    (tmp_path / "scale.cl").write_text(BLOCK_KERNEL)
    (tmp_path / "host.c").write_text(SCALE_HOST.replace("SOURCES", f"""
    char opts[64];
    cl_device_type type;
    clGetDeviceInfo(NULL, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
    strcpy(opts, "");
    {build}
    const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, opts, NULL, NULL);""").replace(
        "#include <stdio.h>", "#include <stdio.h>\n#include <string.h>"))
    with pytest.raises(UnsupportedError, match="build options polyfuse cannot determine "
                       r"\(they may define macros the kernels use\): (written differently on "
                       r"the paths of the condition at .*host.c:\d+|strcat at .*host.c:\d+ "
                       "writes it in a host loop)"):
        load_opencl(None, host=str(tmp_path / "host.c"))


def test_build_options_appending_an_unknown_string_name_the_append(tmp_path: Path) -> None:
    (tmp_path / "scale.cl").write_text(BLOCK_KERNEL)
    (tmp_path / "host.c").write_text(SCALE_HOST.replace("SOURCES", """
    char opts[64];
    strcpy(opts, "-DBLOCK_SIZE=16 ");
    if (opts[0] == '-') strcat(opts, getenv("EXTRA_FLAGS"));
    const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, opts, NULL, NULL);""").replace(
        "#include <stdio.h>", "#include <stdio.h>\n#include <string.h>"))
    line = next(i + 1 for i, t in enumerate((tmp_path / "host.c").read_text().splitlines())
                if "EXTRA_FLAGS" in t)
    with pytest.raises(UnsupportedError, match=rf"strcat at .*host.c:{line} writes a string "
                       "polyfuse cannot follow"):
        load_opencl(None, host=str(tmp_path / "host.c"))


def test_one_kernel_name_in_two_files_the_host_loads_one(tmp_path: Path) -> None:
    """Tutorial suites keep one kernel name in several files; the one the host builds is
    the kernel, and only a fallback to the command line's files is ambiguous."""
    for name, op in (("scale.cl", "*"), ("scale_v2.cl", "+")):
        (tmp_path / name).write_text("__kernel void scale(__global float *a, __global float "
                                     "*b) { int i = get_global_id(0); b[i] = a[i] "
                                     f"{op} 3.0f; }}\n")
    (tmp_path / "host.c").write_text(SCALE_HOST.replace("SOURCES", """
    const char *src = load("scale_v2.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);"""))
    files = [str(tmp_path / "scale.cl"), str(tmp_path / "scale_v2.cl")]
    program = load_opencl(files[1:], host=str(tmp_path / "host.c"))
    assert "a[i] + 3.0f" in program.kernels["scale"].source
    (tmp_path / "host.c").write_text(SCALE_HOST.replace("SOURCES", """
    const char *src = 0;
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);"""))
    with pytest.raises(PolyfuseError, match="'scale' is defined in .*scale.cl and .*scale_v2"):
        load_opencl(files, host=str(tmp_path / "host.c"))


def test_same_kernel_name_in_two_programs_is_two_kernels(tmp_path: Path) -> None:
    for name, body in (("a.cl", "c[i] = a[i] + 1.0f;"), ("b.cl", "c[i] = a[i] * 2.0f;")):
        (tmp_path / name).write_text("__kernel void mmul(__global const float *a, "
                                     "__global float *c) { int i = get_global_id(0); "
                                     + body + " }\n")
    host = SCALE_HOST.replace("SOURCES", """
    const char *sa = load("a.cl"), *sb = load("b.cl");
    cl_program pa = clCreateProgramWithSource(ctx, 1, &sa, NULL, &err);
    cl_program pb = clCreateProgramWithSource(ctx, 1, &sb, NULL, &err);
    cl_kernel ka = clCreateKernel(pa, "mmul", &err);
    cl_kernel kb = clCreateKernel(pb, "mmul", &err);
    cl_mem x = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
    cl_mem y = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
    size_t n = 64;
    clSetKernelArg(ka, 0, sizeof(cl_mem), &x);
    clSetKernelArg(ka, 1, sizeof(cl_mem), &y);
    clEnqueueNDRangeKernel(q, ka, 1, NULL, &n, NULL, 0, NULL, NULL);
    clSetKernelArg(kb, 0, sizeof(cl_mem), &y);
    clSetKernelArg(kb, 1, sizeof(cl_mem), &x);
    clEnqueueNDRangeKernel(q, kb, 1, NULL, &n, NULL, 0, NULL, NULL);
    cl_program prog = pa;""")
    (tmp_path / "host.c").write_text(host.replace('"scale"', '"mmul"'))
    program = load_opencl(None, host=str(tmp_path / "host.c"))
    kinds = [op.kernel for op in program.launches]
    assert kinds[:2] == ["mmul", "mmul_1"]
    assert "+ 1.0f" in program.kernels["mmul"].source
    assert "* 2.0f" in program.kernels["mmul_1"].source
    widths = check_against_oracle(program)
    assert _edge(widths, "mmul", "mmul_1", program) == "thread"


# ----------------------------------------------------------------------------------------------
# Never a silent empty or wrong model
# ----------------------------------------------------------------------------------------------


def _run_cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _write_host(tmp_path: Path, body: str, kernel: str = SCALE_KERNEL) -> tuple[str, str]:
    (tmp_path / "scale.cl").write_text(kernel)
    host = SCALE_HOST.replace("SOURCES", 'const char *src = load("scale.cl");\n'
                              '    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, '
                              'NULL, &err);').replace("    clSetKernelArg(k, 0", body +
                                                      "\n    clSetKernelArg(k, 0")
    (tmp_path / "host.c").write_text(host)
    return str(tmp_path / "scale.cl"), str(tmp_path / "host.c")


def test_no_launches_is_an_error_unless_allowed(tmp_path: Path, capsys: Any) -> None:
    k, h = _write_host(tmp_path, "    if (err == CL_SUCCESS) return 0;")
    code, _, err = _run_cli(capsys, "analyze", k, "--host", h)
    assert code == 1 and "launches no kernel" in err and "host.c" in err
    code, out, _ = _run_cli(capsys, "analyze", k, "--host", h, "--allow-empty")
    assert code == 0 and "0 launches" in out


def test_host_rejected_by_a_compiler_is_an_error(tmp_path: Path, capsys: Any) -> None:
    k, h = _write_host(tmp_path, "    err2 = 0;")
    code, _, err = _run_cli(capsys, "analyze", k, "--host", h)
    assert code == 1 and "undeclared identifier 'err2'" in err
    line = next(i for i, t in enumerate(Path(h).read_text().splitlines(), 1) if "err2" in t)
    assert f"host.c:{line}" in err and "Traceback" not in err


def test_buffer_argument_with_wrong_size_is_an_error(tmp_path: Path, capsys: Any) -> None:
    k, h = _write_host(tmp_path, "    clSetKernelArg(k, 0, sizeof(int), &a);")
    code, _, err = _run_cli(capsys, "analyze", k, "--host", h)
    assert code == 1 and "size 4 for buffer 'a'" in err


def test_out_of_bounds_transfer_is_rejected_by_analyze(tmp_path: Path, capsys: Any) -> None:
    k, h = _write_host(tmp_path, "    float hb[128];\n"
                       "    clEnqueueWriteBuffer(q, a, CL_TRUE, 0, 128 * sizeof(float), hb, 0, "
                       "NULL, NULL);")
    code, _, err = _run_cli(capsys, "analyze", k, "--host", h)
    assert code == 1 and "past the end of the buffer" in err


def test_missing_kernel_file_is_named(tmp_path: Path, capsys: Any) -> None:
    _, h = _write_host(tmp_path, "")
    (tmp_path / "scale.cl").unlink()
    code, _, err = _run_cli(capsys, "analyze", "--host", h)
    assert code == 1 and "scale.cl" in err and "not found" in err


def test_non_utf8_host_and_param_errors(tmp_path: Path, capsys: Any) -> None:
    k, h = _write_host(tmp_path, "    /* d\xe9j\xe0 vu */")
    Path(h).write_bytes(Path(h).read_text().encode("cp1252"))
    code, out, _ = _run_cli(capsys, "analyze", k, "--host", h)
    assert code == 0 and "1 launches" in out
    code, _, err = _run_cli(capsys, "analyze", k, "--host", h, "--param", "nope=3")
    assert code == 1 and "nope" in err
    with pytest.raises(SystemExit):
        cli_main(["analyze", k, "--host", h, "--param", "n=abc"])


def test_getopt_switch_loop_with_and_without_args(capsys: Any, caplog: Any) -> None:
    """A ``switch`` in a getopt loop: ``break`` ends a case, it does not make main return."""
    d = PROGRAMS / "getopt_c"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"),
                          argv=["-i", "3", "-n", "128"])
    (launch,) = program.launches
    assert launch.global_size == (128,) and [lp.upper for lp in launch.loops] == [3]
    check_against_oracle(program)
    code, _, err = _run_cli(capsys, "analyze", str(d / "kernels.cl"), "--host",
                            str(d / "host.c"))
    assert code == 1 and "--args" in err and "host.c:" in err
    # the option loop's `default: return 1` is assumed not taken, and that is said
    assert any("host.c:" in r.getMessage() and "not taken" in r.getMessage()
               for r in caplog.records)


def test_handson_style_device_search_and_work_group_query() -> None:
    """A platform search loop left by ``break``, an embedded kernel string, and a
    clGetKernelWorkGroupInfo result that becomes a named parameter settled by --param."""
    host = str(PROGRAMS / "handson_vadd" / "vadd.c")
    program = load_opencl(None, host=host)
    (launch,) = program.launches
    assert str(launch.local_size[0]) == "wg" and "wg" in program.params
    fixed = load_opencl(None, host=host, params={"wg": 64}, check_params=True)
    assert fixed.launches[0].local_size == (64,) and fixed.launches[0].global_size == (1024,)
    check_against_oracle(fixed)


def test_cpp_references_templates_and_std_string() -> None:
    """Buffers created through reference parameters, a function template, std::stoi of argv,
    new[]/delete[], a const-reference struct parameter."""
    program = load_opencl(None, host=str(PROGRAMS / "cpp_refs" / "main.cpp"), argv=["64"])
    (launch,) = program.launches
    assert launch.global_size == (64,) and [lp.upper for lp in launch.loops] == [3]
    assert launch.arg(0).buffer == "a" and launch.arg(1).buffer == "b"
    widths = check_against_oracle(program)
    assert _edge(widths, "add", "add", program) == "thread"
    symbolic = load_opencl(None, host=str(PROGRAMS / "cpp_refs" / "main.cpp"))
    assert len(symbolic.params) == 1 and symbolic.params[0].startswith("n")


def test_old_cpp_dialect_host() -> None:
    """A host written for C++98-era g++ (issue 26 item 2): ``throw()`` specifications, a
    narrowing ``{n}``, a global ``data`` against C++17's ``std::data``, ``main`` without its
    ``int``, and template methods with ``T(v)`` and ``Base<T>::scale(...)``."""
    program = load_opencl(None, host=str(PROGRAMS / "old_cpp" / "main.cpp"))
    assert [(op.kernel, op.global_size) for op in program.launches] == [("twice", (64,))] * 2
    widths = check_against_oracle(program)
    assert _edge(widths, "twice", "twice", program) == "thread"


def test_kernel_name_copy_initialised_in_old_cpp() -> None:
    """Rodinia pathfinder's idiom: ``string kn = "step";`` in a file that parses only as
    gnu++14 (a global ``data``), so the copy-initialisation is an elidable copy constructor
    of a temporary; the name still reaches ``clCreateKernel`` through a by-value parameter."""
    program = load_opencl(None, host=str(PROGRAMS / "kernel_map_cpp" / "main.cpp"))
    assert [(op.kernel, op.arg(0).buffer, op.arg(1).buffer) for op in program.launches] == \
        [("step", "d_0", "d_1"), ("step", "d_1", "d_0"), ("step", "d_0", "d_1")]
    widths = check_against_oracle(program)
    assert _edge(widths, "step", "step", program) == "global"


def test_unqualified_isnan_after_cmath_as_old_gxx_took_it() -> None:
    """``isnan(x)`` after ``<cmath>`` without ``std::`` (HandsOnOpenCL's matrix_lib.cpp): g++
    before 6 found it in the global namespace, so the unit is parsed with it visible there."""
    program = load_opencl(None, host=str(PROGRAMS / "global_isnan" / "main.cpp"))
    assert [(op.kernel, op.global_size) for op in program.launches] == [("scale", (256,))] * 2
    widths = check_against_oracle(program)
    assert _edge(widths, "scale", "scale", program) == "thread"


def test_c_file_the_makefile_compiles_as_cpp(tmp_path: Path) -> None:
    """A ``.c`` file built with ``CC=g++`` includes ``<iostream>``: parsed as C++ when it does
    not parse as C."""
    (tmp_path / "scale.cl").write_text(SCALE_KERNEL)
    host = SCALE_HOST.replace("#include <stdio.h>", "#include <stdio.h>\n#include <iostream>")
    host = host.replace("SOURCES", """const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    std::cout << "built" << std::endl;""")
    (tmp_path / "host.c").write_text(host)
    program = load_opencl(None, host=str(tmp_path / "host.c"))
    assert [op.kernel for op in program.launches] == ["scale"]


def test_kernels_in_std_containers_and_options_in_a_std_string() -> None:
    """``std::vector<cl_kernel>``, ``std::map<std::string, cl_kernel>``, a kernel name passed
    as a by-value ``std::string``, build options assembled with ``+=``/``append``/
    ``std::to_string``, and ``throw`` on error paths (issue 26 item 8)."""
    program = load_opencl(None, host=str(PROGRAMS / "cpp_containers" / "main.cpp"))
    assert [(op.kernel, op.arg(0).buffer, op.arg(1).buffer) for op in program.launches] == \
        [("shift", "a", "b"), ("square", "b", "c"), ("shift", "c", "a")]
    assert "-DOFFSET=3.0f" in program.kernels["shift"].build_options
    widths = check_against_oracle(program)
    assert _edge(widths, "shift", "square", program) == "thread"
    assert _edge(widths, "square", "shift", program) == "thread"


SDK_HARNESS = PROGRAMS / "sdk_harness" / "main.cpp"


def test_sample_harness_objects_made_with_new_and_a_string_option_table() -> None:
    """An SDK-style harness: ``new`` runs the constructors (a base's, member initialisers),
    option objects copied into a growing table, a parser matching ``std::string`` names and
    storing through ``void *`` (``sscanf`` of a known argument converts it), build options
    in a struct of ``std::string``s written with ``std::ostringstream``, a member function
    template, ``sizeof(T)`` in a function template (the length rounded up to a power of two
    bit by bit: 13 -> 16); ``throw`` on the paths not taken."""
    program = load_opencl(None, host=str(SDK_HARNESS),
                          argv=["--device", "cpu", "-e", "-i", "3", "-x", "13"])
    assert [(op.kernel, op.global_size, tuple((lp.lower, lp.upper) for lp in op.loops))
            for op in program.launches] == [("scale", (16,), ((0, 3),)),
                                            ("bump", (16,), ((0, 3),))]
    assert "-DSCALE=2.0f" in program.kernels["scale"].build_options
    # a member template maps the input (a call in its body names an overload set)
    fill = program.ops[0]
    assert (fill.kind, fill.name, [w.buffer for w in fill.writes]) == \
        ("write", "clEnqueueMapBuffer", ["in"])
    assert not [op for op in program.ops if getattr(op, "kind", "") == "unknown"]
    widths = check_against_oracle(program)
    assert _edge(widths, "scale", "bump", program) == "thread"


def test_loop_carrying_its_launch_geometry_is_run_iteration_by_iteration(tmp_path: Path
                                                                          ) -> None:
    """A host loop that updates the launch geometry under ``index % 2 == 0`` (what it needs
    is known only per iteration) with a constant trip count: unrolled, each launch exact."""
    (tmp_path / "scale.cl").write_text(SCALE_KERNEL)
    host = SCALE_HOST.replace("SOURCES", """const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);""")
    host = host.replace("clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);",
                        """size_t local = 0, gk = g;
    for (int index = 0; index < 4; index++) {
        if (index % 2 == 0) { gk -= 16; local = gk / 16; }
        clEnqueueNDRangeKernel(q, k, 1, NULL, &gk, &local, 0, NULL, NULL);
    }""")
    (tmp_path / "host.c").write_text(host)
    program = load_opencl(None, host=str(tmp_path / "host.c"))
    assert [(op.global_size, op.local_size, op.loops) for op in program.launches] == \
        [((48,), (3,), ())] * 2 + [((32,), (2,), ())] * 2


IMAGE_HOST = r"""
#include <CL/cl.h>
#include <cstdio>
struct Header { int width; int height; };
class Image : public Header {
  public:
    bool loaded;
    Image() : loaded(false) { width = 0; height = 0; }
    void load(const char *name) {
        FILE *f = fopen(name, "rb");
        if (!f) return;
        fread((Header *)this, sizeof(Header), 1, f);
        loaded = true;
    }
};
int main() {
    Image img;
    img.load("input.bmp");
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    const char *src = "__kernel void scale(__global float *a, __global float *b) {"
                      " int i = get_global_id(0); b[i] = 2.0f * a[i]; }";
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(prog, "scale", &err);
    size_t n = img.width;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 256 * sizeof(float), NULL, &err);
    cl_mem b = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 256 * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clSetKernelArg(k, 1, sizeof(cl_mem), &b);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL);
    return 0;
}
"""


def test_fread_into_a_base_class_header_names_the_read(tmp_path: Path) -> None:
    """``fread((Header *)this, ...)`` of an object whose class derives from the header: the
    object's struct holds its base's fields, and the numbers read are run-time values named
    after the field (``--param img_width`` binds one; the unbound one is reported)."""
    (tmp_path / "host.cpp").write_text(IMAGE_HOST)
    program = load_opencl(None, host=str(tmp_path / "host.cpp"))
    (launch,) = program.launches
    assert launch.global_size == (sympy.Symbol("img_width"),)
    fixed = load_opencl(None, host=str(tmp_path / "host.cpp"), params={"img_width": 64},
                        check_params=True)
    assert fixed.launches[0].global_size == (64,)


def test_sample_harness_dump_path_reads_its_options_from_a_file() -> None:
    """``--dump`` takes the path that builds with options read from a file: refused at the
    build, naming its line (the options may define the kernels' macros)."""
    with pytest.raises(UnsupportedError, match=r"main.cpp:\d+: clBuildProgram: build options"):
        load_opencl(None, host=str(SDK_HARNESS), argv=["--device", "cpu", "--dump", "k.bin"])


class _Answers:
    """A device's answers to info queries, without a device."""

    name = "test device"

    def device_info(self, param: int) -> Any:
        # CL_DEVICE_MAX_WORK_ITEM_SIZES, CL_DEVICE_MAX_WORK_GROUP_SIZE
        return {0x1005: (32, 32, 32), 0x1004: 64}.get(param)

    def kernel_info(self, param: int, kernel: Any) -> Any:
        return 4096 if param == 0x11B0 and kernel.name == "blur" else None


def test_device_queries_answered_by_the_verifying_device() -> None:
    """A work-group size chosen from ``clGetKernelWorkGroupInfo`` and ``clGetDeviceInfo``
    (issue 26 item 7): the device the program is verified on answers; without one the
    refusal names the query and its line."""
    host = str(PROGRAMS / "device_queries" / "host.c")
    (launch,) = load_opencl(None, host=host, device_queries=_Answers()).launches
    assert launch.global_size == (256,) and launch.local_size == (32,)
    assert launch.arg(2).local_bytes == 128
    with pytest.raises(UnsupportedError, match=r"host.c:\d+: local memory size depends on .*"
                       r"queried from the device by clGetDeviceInfo at .*host.c:\d+.*--verify"):
        load_opencl(None, host=host)


# ----------------------------------------------------------------------------------------------
# The C++ OpenCL wrapper (cl.hpp / opencl.hpp), modelled at the API level
# ----------------------------------------------------------------------------------------------

HANDSON = PROGRAMS / "handson_cpp"
CPP_COMMON = HANDSON / "common"
POLYFUSE_HEADERS = Path(__file__).resolve().parent.parent / "polyfuse" / "include"


@pytest.mark.parametrize("wrapper", ["installed", "polyfuse-decls", "cl.hpp-1.2"])
def test_handson_cpp_make_kernel_chain(wrapper: str) -> None:
    """``cl::make_kernel`` functors called with ``cl::EnqueueArgs``, buffers built from
    ``std::vector`` iterators (``begin(v)``/``v.begin()``) and with flags and a size,
    ``util::loadProgram`` reading the kernel through ``std::ifstream``, ``cl::copy`` back;
    with the installed ``opencl.hpp``, polyfuse's declaration-only headers, and a header laid
    out as cl.hpp 1.2 (the call operator inherited from a ``detail::`` class)."""
    first = {"installed": [], "polyfuse-decls": [str(POLYFUSE_HEADERS)],
             "cl.hpp-1.2": [str(HANDSON / "cl12")]}[wrapper]
    dirs = first + [str(CPP_COMMON)]
    program = load_opencl(None, host=str(HANDSON / "vadd_chain.cpp"), include_dirs=dirs)
    launches = program.launches
    assert [op.kernel for op in launches] == ["vadd", "vadd"]
    assert all(op.global_size == (64,) and op.local_size is None for op in launches)
    assert [launches[0].arg(i).buffer for i in range(3)] == ["d_a", "d_b", "d_c"]
    assert [launches[1].arg(i).buffer for i in range(3)] == ["d_e", "d_c", "d_f"]
    assert launches[0].arg(3).value == 64
    assert {n: b.size for n, b in program.buffers.items()} == {
        n: 256 for n in ("d_a", "d_b", "d_c", "d_e", "d_f")}
    assert "CL_MEM_COPY_HOST_PTR" in program.buffers["d_a"].flags
    kinds = [(op.kind, op.name) for op in program.ops if not isinstance(op, type(launches[0]))]
    assert ("read", "clEnqueueReadBuffer") in kinds  # cl::copy(queue, d_f, ...)
    widths = check_against_oracle(program)
    assert _edge(widths, "vadd", "vadd", program) == "thread"


def test_handson_cpp_kernel_setarg_ndrange_and_functor_with_local_memory() -> None:
    """``cl::Kernel`` + ``setArg`` + ``enqueueNDRangeKernel`` with a local range, a
    ``cl::KernelFunctor`` with a ``cl::Local`` argument, ``program.build(devices, "-DBS=4 ...")``
    and ``enqueueReadBuffer``."""
    program = load_opencl(None, host=str(HANDSON / "matmul.cpp"), include_dirs=[str(CPP_COMMON)])
    mmul, rowsum = program.launches
    assert (mmul.kernel, mmul.global_size, mmul.local_size) == ("mmul", (8, 8), (4, 4))
    assert (rowsum.kernel, rowsum.global_size, rowsum.local_size) == ("rowsum", (32,), (4,))
    assert rowsum.arg(2).kind == "local" and rowsum.arg(2).local_bytes == 16
    assert mmul.arg(0).value == 8 and rowsum.arg(3).value == 8
    assert "BS 1" not in " ".join(s.code for s in program.kernels["rowsum"].statements)
    assert program.buffers["d_c"].size == 256 and program.buffers["d_a"].size == 256
    widths = check_against_oracle(program)
    assert _edge(widths, "mmul", "rowsum", program) == "global"


class _KernelLimit(_Answers):
    def kernel_info(self, param: int, kernel: Any) -> Any:
        return 4096 if param == 0x11B0 else None  # CL_KERNEL_WORK_GROUP_SIZE


def test_handson_cpp_kernel_work_group_size_from_get_work_group_info(monkeypatch: Any) -> None:
    """``probe.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(device)`` is the C API's kernel
    query (answered by the verifying device, clamped by the host to 64), so the launch's local
    size, its ``cl::Local`` argument and the result buffer that it sizes are known."""
    monkeypatch.chdir(HANDSON)
    program = load_opencl(None, host="partial_sums.cpp", include_dirs=[str(CPP_COMMON)],
                          device_queries=_KernelLimit())
    (launch,) = program.launches
    assert launch.global_size == (4096,) and launch.local_size == (64,)
    assert launch.arg(0).value == 256 and launch.arg(2).local_bytes == 256
    assert program.buffers["d_sums"].size == 4 * 64
    check_against_oracle(program)


def test_cpp_wrapper_shares_the_opencl_api_table(monkeypatch: Any) -> None:
    """``cl::Buffer``, ``setArg`` and ``enqueueReadBuffer`` of the C++ wrapper run the C API's
    handlers from the one table: a handler replaced there sees the wrapper's calls."""
    from polyfuse.frontend.host import opencl_api

    seen: list[str] = []
    for name in ("clCreateBuffer", "clSetKernelArg", "clEnqueueReadBuffer"):
        def counting(ev: Any, node: Any, args: list, name: str = name,
                     run: Any = opencl_api.HANDLERS[name]) -> Any:
            seen.append(name)
            return run(ev, node, args)

        monkeypatch.setitem(opencl_api.HANDLERS, name, counting)
    program = load_opencl(None, host=str(HANDSON / "matmul.cpp"), include_dirs=[str(CPP_COMMON)])
    assert len(program.launches) == 2
    assert seen.count("clEnqueueReadBuffer") == 2
    assert seen.count("clCreateBuffer") == len(program.buffers)
    assert seen.count("clSetKernelArg") >= sum(len(la.args) for la in program.launches)


def test_handson_cpp_fuse_and_verify_through_the_cli(tmp_path: Path, capsys: Any) -> None:
    import json

    out = tmp_path / "out"
    code, stdout, err = _run_cli(capsys, "fuse", "--host", str(HANDSON / "vadd_chain.cpp"),
                                 "-I", str(CPP_COMMON), "--out", str(out), "--verify")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["launches_before"] == 2 and plan["launches_after"] == 1
    assert plan["verified"]["ok"] is True and "Traceback" not in err


def test_handson_cpp_unfollowable_kernel_object_is_refused(tmp_path: Path, capsys: Any) -> None:
    """Kernel objects kept in a container indexed at run time: refused with file:line, never
    an empty model."""
    (tmp_path / "vadd_chain.cl").write_text((HANDSON / "vadd_chain.cl").read_text())
    text = (HANDSON / "vadd_chain.cpp").read_text().replace(
        "        vadd(cl::EnqueueArgs(queue, cl::NDRange(count)), d_a, d_b, d_c, count);",
        "        std::vector<cl::Kernel> ks(1, cl::Kernel(program, \"vadd\"));\n"
        "        queue.enqueueNDRangeKernel(ks[rand() % 1], cl::NullRange, cl::NDRange(count));")
    (tmp_path / "host.cpp").write_text(text)
    code, _, err = _run_cli(capsys, "analyze", "--host", str(tmp_path / "host.cpp"), "-I",
                            str(CPP_COMMON))
    assert code == 1 and "host.cpp:" in err and "kernel object" in err
    assert "Traceback" not in err


# ----------------------------------------------------------------------------------------------
# clCreateKernelsInProgram
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("swap", [False, True], ids=["source-order", "reversed-source"])
def test_kernels_in_program_found_by_name(tmp_path: Path, swap: bool) -> None:
    """All kernels created at once, in source order, and picked by the name
    ``clGetKernelInfo(CL_KERNEL_FUNCTION_NAME)`` gives: the launches do not depend on the order
    of the kernels in the file."""
    d = PROGRAMS / "kernels_in_program"
    host = d / "host.c"
    if swap:
        text = (d / "kernels.cl").read_text()
        head, sep, second = text.partition("__kernel void shift_add")
        first = head[head.index("__kernel void square"):]
        (tmp_path / "kernels.cl").write_text(sep + second + "\n" + first)
        (tmp_path / "host.c").write_text(host.read_text())
        host = tmp_path / "host.c"
    program = load_opencl(None, host=str(host))
    assert [op.kernel for op in program.launches] == ["square", "shift_add"]
    assert [op.arg(1).buffer for op in program.launches] == ["d_sq", "d_out"]
    widths = check_against_oracle(program)
    assert _edge(widths, "square", "shift_add", program) == "global"


# ----------------------------------------------------------------------------------------------
# Build options reproduced by the runtime
# ----------------------------------------------------------------------------------------------

TABLE_KERNEL = """
#ifndef SCALE
#define SCALE 1.0f
#endif
__constant float coef[2] = {SCALE, 0.5f};
__kernel void scale(__global float *a, __global float *b) {
    int i = get_global_id(0);
    b[i] = coef[0] * a[i];
}
__kernel void shift(__global float *b, __global float *c) {
    int i = get_global_id(0);
    c[i] = b[i] + coef[1];
}
"""


def test_runtime_builds_with_the_hosts_options(tmp_path: Path, capsys: Any) -> None:
    """``-DSCALE=3.0f`` reaches the kernel file's constant table when the runtime assembles the
    program (it re-reads the file for file-scope declarations), and ``-cl-*`` options are
    recorded per kernel and used for the unfused and the fused builds."""
    import json

    import numpy as np

    from polyfuse.runtime.execute import program_options, run_program

    (tmp_path / "scale.cl").write_text(TABLE_KERNEL)
    host = SCALE_HOST.replace("SOURCES", """const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, "-DSCALE=3.0f -cl-fast-relaxed-math -cl-mad-enable -w", NULL,
                   NULL);""").replace("    clFinish(q);", """
    cl_kernel k2 = clCreateKernel(prog, "shift", &err);
    cl_mem c = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
    clSetKernelArg(k2, 0, sizeof(cl_mem), &b);
    clSetKernelArg(k2, 1, sizeof(cl_mem), &c);
    clEnqueueNDRangeKernel(q, k2, 1, NULL, &g, NULL, 0, NULL, NULL);
    clFinish(q);""")
    (tmp_path / "host.c").write_text(host)
    program = load_opencl(None, host=str(tmp_path / "host.c"))
    opts = program.kernels["scale"].build_options
    assert "-DSCALE=3.0f" in opts and "-cl-fast-relaxed-math" in opts and "-w" in opts
    assert {"-cl-fast-relaxed-math", "-cl-mad-enable", "-w"} <= set(program_options(program))
    res = run_program(program)
    a, b, c = (res.buffers[n] for n in ("a", "b", "c"))
    np.testing.assert_allclose(b, 3.0 * res.initial["a"], rtol=1e-5)
    np.testing.assert_allclose(c, b + 0.5, rtol=1e-5)
    assert a is not None

    # fused: the same options, and the -D'd constant table in the fused source
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", str(tmp_path / "host.c"), "--out",
                            str(out), "--verify")
    assert code == 0, err
    assert json.loads((out / "plan.json").read_text())["verified"]["ok"] is True
    assert "3.0f" in (out / "fused.cl").read_text()
    if (out / "fused_host.c").exists():
        assert "-cl-fast-relaxed-math" in (out / "fused_host.c").read_text()


# ----------------------------------------------------------------------------------------------
# Long unrolled launch sequences (PolyBench gramschmidt)
# ----------------------------------------------------------------------------------------------

GRAMSCHMIDT = PROGRAMS / "polybench_gramschmidt" / "gramschmidt.c"


def _unfoldable_gramschmidt(tmp_path: Path) -> Path:
    """gramschmidt with its launch guard written ``size3(k) != 0``: no conjunction of affine
    bounds, so the k loop is unrolled (a long sequence of launches)."""
    src = GRAMSCHMIDT.parent
    for f in src.iterdir():
        text = f.read_text()
        if f.name == GRAMSCHMIDT.name:
            text = text.replace("if (globalWorkSizeKernel3[0] > 1)",
                                "if (globalWorkSizeKernel3[0] != 0)")
        (tmp_path / f.name).write_text(text)
    return tmp_path / GRAMSCHMIDT.name


def test_gramschmidt_guarded_launch_stays_symbolic() -> None:
    """PolyBench's ``if (size3(k) > 1) launch k3(k)``, a float ``ceil`` of ``k``: a guard loop,
    not 2048 unrolled launches; exact against brute force."""
    program = load_opencl(None, host=str(GRAMSCHMIDT), defines={"MINI_DATASET": None})
    assert [len(op.loops) for op in program.launches] == [1, 1, 2]
    check_against_oracle(program)
    assert load_opencl(None, host=str(GRAMSCHMIDT)).launches[2].loops[0].upper == 2048


@pytest.mark.parametrize("windowed", [False, True])
def test_gramschmidt_unrolled_launches_against_the_oracle(windowed: bool, monkeypatch: Any,
                                                          tmp_path: Path) -> None:
    """``for k: launch k1(k); launch k2(k); if (size3(k) != 0) launch k3(k)`` with a global
    size that is a float ``ceil`` of ``k``: unrolled, every edge as brute force finds it (with
    the whole-sequence flow and the sink-by-sink flow of long sequences)."""
    from polyfuse.uar import deps

    if windowed:
        monkeypatch.setattr(deps, "WINDOW_MIN_OPS", 0)
    program = load_opencl(None, host=str(_unfoldable_gramschmidt(tmp_path)),
                          defines={"MINI_DATASET": None})
    kinds = [op.kernel[-1] for op in program.launches]
    assert kinds == ["1", "2", "3"] * 7 + ["1", "2"]
    assert [op.global_size for op in program.launches if op.kernel.endswith("3")] == \
        [(8,), (8,), (8,), (4,), (4,), (4,), (4,)]
    check_against_oracle(program)


def test_windowed_dependences_equal_the_whole_sequence_flow(monkeypatch: Any, tmp_path: Path
                                                           ) -> None:
    """The sink-by-sink flow of unrolled sequences gives exactly isl's whole-sequence
    dataflow (same edges, equal relations)."""
    from polyfuse.uar import deps
    from polyfuse.uar.effects import instantiate

    programs = [load_opencl(None, host=str(_unfoldable_gramschmidt(tmp_path)),
                            defines={"NI": "12", "NJ": "12"}),
                load_opencl(None, host=str(PROGRAMS / "kernels_in_program" / "host.c")),
                load_opencl(None, host=str(PROGRAMS / "linked_list" / "host.c"))]
    for program in programs:
        inst = instantiate(program)
        sched = deps.host_schedule(inst)
        found = {}
        for threshold in (10**9, 0):
            monkeypatch.setattr(deps, "WINDOW_MIN_OPS", threshold)
            found[threshold] = {(d.kind, d.buffer, d.src, d.dst): d.relation
                                for d in deps.dependences(inst, sched)}
        whole, windowed = found[10**9], found[0]
        assert whole and set(whole) == set(windowed), program.name
        assert all(whole[k].is_equal(windowed[k]) for k in whole), program.name


def test_too_many_unrolled_launches_are_refused_with_a_hint(capsys: Any, tmp_path: Path
                                                            ) -> None:
    code, _, err = _run_cli(capsys, "analyze", "--host", str(_unfoldable_gramschmidt(tmp_path)))
    assert code == 1 and "gramschmidt.c:" in err and "2048 exceeds" in err
    assert "-D SMALL_DATASET" in err and "Traceback" not in err



# ----------------------------------------------------------------------------------------------
# Rodinia and Parboil layouts
# ----------------------------------------------------------------------------------------------


def test_rodinia_style_run_in_another_file_with_struct_elements(tmp_path: Path,
                                                                capsys: Any) -> None:
    """``main`` calls ``run()`` of another unit; a platform picked by vendor name in a loop
    left by ``break``; the kernel read by fopen/fread of a #define'd path; a malloc'd array of
    structs whose typedef the kernels share (the fused kernels carry it too)."""
    import json

    d = PROGRAMS / "rodinia_run"
    hosts = [str(d / "main.cpp"), str(d / "run.cpp")]
    program = load_opencl(None, host=hosts, argv=["-n", "32", "-s", "2"])
    assert [op.kernel for op in program.launches] == ["advance", "energy"]
    assert [lp.upper for lp in program.launches[0].loops] == [2]
    assert program.buffers["d_p"].size == 32 * 16
    # (the brute-force interpreter has no struct types; --verify below runs the kernels)
    edges = {(e.src, e.dst, e.kind) for e in build_uar(program).edges}
    ids = [op.id for op in program.launches]
    assert (ids[0], ids[1], "RAW") in edges
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", hosts[0], "--host", hosts[1], "--args",
                            "-n 32 -s 2", "--out", str(out), "--verify")
    assert code == 0, err
    assert json.loads((out / "plan.json").read_text())["verified"]["ok"] is True
    assert "particle_t" in (out / "fused.cl").read_text()


def test_parboil_style_harness_and_input_file(tmp_path: Path, capsys: Any) -> None:
    """``pb_ReadParameters``/``pb_*`` timers (a library polyfuse does not know: no effect on
    buffers), the input file named by ``-i``, the size read from it as a parameter."""
    import json

    host = str(PROGRAMS / "parboil_style" / "main.c")
    program = load_opencl(None, host=host, argv=["-i", "in.bin", "-o", "out.bin"])
    assert [op.kernel for op in program.launches] == ["saxpy", "square"]
    assert "n" in program.params
    fixed = load_opencl(None, host=host, argv=["-i", "in.bin", "-o", "out.bin"],
                        params={"n": 100}, check_params=True)
    assert fixed.launches[0].global_size == (128,) and fixed.launches[0].local_size == (64,)
    widths = check_against_oracle(fixed)
    assert _edge(widths, "saxpy", "square", fixed) == "thread"
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", host, "--args", "-i in.bin -o out.bin",
                            "--param", "n=100", "--out", str(out), "--verify")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["launches_after"] == 1 and plan["verified"]["ok"] is True
    # without --param, verification runs at a value it names
    code, _, err = _run_cli(capsys, "fuse", "--host", host, "--args", "-i in.bin",
                            "--out", str(out), "--verify")
    assert code == 0 and "at n=" in err and "Traceback" not in err


PI_KERNEL = """
__kernel void pi(const int niters, const float step_size, __local float *local_sums,
                 __global float *partial_sums)
{
    int num_wrk_items = get_local_size(0);
    int local_id = get_local_id(0);
    int group_id = get_group_id(0);
    float x, accum = 0.0f;
    int i, istart = (group_id * num_wrk_items + local_id) * niters;
    for (i = istart; i < istart + niters; i++) {
        x = (i + 0.5f) * step_size;
        accum += 4.0f / (1.0f + x * x);
    }
    local_sums[local_id] = accum;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (local_id == 0) {
        float sum = 0.0f;
        for (i = 0; i < num_wrk_items; i++)
            sum += local_sums[i];
        partial_sums[group_id] = sum;
    }
}
"""

PI_HOST = """
#define __CL_ENABLE_EXCEPTIONS
#include "cl.hpp"
#include "util.hpp"
#include <cstdio>
#include <vector>
#define INSTEPS (4096)
#define ITERS (16)
int main(void) {
    int in_nsteps = INSTEPS, niters = ITERS, nsteps;
    ::size_t nwork_groups, work_group_size = 8;
    cl::Buffer d_partial_sums;
    try {
        cl::Context context(CL_DEVICE_TYPE_DEFAULT);
        cl::Device device = context.getInfo<CL_CONTEXT_DEVICES>()[0];
        cl::CommandQueue queue(context, device);
        cl::Program program(context, util::loadProgram("pi_ocl.cl"), true);
        cl::Kernel ko_pi(program, "pi");
        work_group_size = ko_pi.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(device);
        cl::make_kernel<int, float, cl::LocalSpaceArg, cl::Buffer> pi(program, "pi");
        nwork_groups = in_nsteps / (work_group_size * niters);
        nsteps = work_group_size * niters * nwork_groups;
        float step_size = 1.0f / static_cast<float>(nsteps);
        std::vector<float> h_psum(nwork_groups);
        d_partial_sums = cl::Buffer(context, CL_MEM_WRITE_ONLY, sizeof(float) * nwork_groups);
        pi(cl::EnqueueArgs(queue, cl::NDRange(nsteps / niters), cl::NDRange(work_group_size)),
           niters, step_size, cl::Local(sizeof(float) * work_group_size), d_partial_sums);
        cl::copy(queue, d_partial_sums, h_psum.begin(), h_psum.end());
        float pi_res = 0.0f;
        for (unsigned int i = 0; i < nwork_groups; i++)
            pi_res += h_psum[i];
        printf("pi = %f\\n", pi_res * step_size);
    } catch (cl::Error err) {
        printf("ERROR: %s\\n", err.what());
    }
}
"""


def test_handson_cpp_pi_work_group_size_query(tmp_path: Path) -> None:
    """``kernel.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(device)`` is a named parameter;
    with it fixed, the launch geometry, the ``cl::Local`` temporary and the vector-sized
    buffer follow from it."""
    (tmp_path / "pi_ocl.cl").write_text(PI_KERNEL)
    (tmp_path / "pi.cpp").write_text(PI_HOST)
    dirs = [str(CPP_COMMON)]
    symbolic = load_opencl(None, host=str(tmp_path / "pi.cpp"), include_dirs=dirs)
    assert "work_group_size" in symbolic.params
    program = load_opencl(None, host=str(tmp_path / "pi.cpp"), include_dirs=dirs,
                          params={"work_group_size": 16}, check_params=True)
    (launch,) = program.launches
    assert launch.global_size == (256,) and launch.local_size == (16,)
    assert launch.arg(2).kind == "local" and launch.arg(2).local_bytes == 64
    assert program.buffers["d_partial_sums"].size == 64
    assert launch.arg(1).value == pytest.approx(1.0 / 4096)


def test_cpp_wrapper_device_query_and_a_member_ndrange_set_from_a_size(tmp_path: Path
                                                                         ) -> None:
    """``device.getInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE, &n)`` answered by the verifying device,
    and a ``cl::NDRange`` member assigned a size inside a method (``local = n``: the object
    of the operator is the member, not ``this``)."""
    (tmp_path / "pi_ocl.cl").write_text(PI_KERNEL)
    host = PI_HOST.replace(
        "work_group_size = ko_pi.getWorkGroupInfo<CL_KERNEL_WORK_GROUP_SIZE>(device);",
        """device.getInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE, &work_group_size);
        if (work_group_size > 16) work_group_size = 16;
        Geometry geo;
        geo.set(work_group_size);""").replace(
        "cl::NDRange(work_group_size)),", "geo.local),").replace(
        "int main(void) {", """struct Geometry {
    cl::NDRange local;
    void set(::size_t n) { local = n; }
};
int main(void) {""")
    (tmp_path / "pi.cpp").write_text(host)
    program = load_opencl(None, host=str(tmp_path / "pi.cpp"), include_dirs=[str(CPP_COMMON)],
                          device_queries=_Answers())
    (launch,) = program.launches
    assert launch.global_size == (256,) and launch.local_size == (16,)


def test_affine_guard_on_loop_iterator_keeps_the_loop_symbolic() -> None:
    """``if (k < steps - 1) launch; else launch;`` in a host loop: each branch's launch gets a
    0-or-1-trip guard loop, so the loop is not unrolled and the UAR honours the guard exactly."""
    d = PROGRAMS / "guarded_loop"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))
    assert program.params == ("n", "steps")
    scale, update, finish = program.launches
    assert [lp.iterator for lp in scale.loops] == ["k"]
    assert [lp.upper for lp in update.loops[:1]] == [sympy.Symbol("steps")]
    assert len(update.loops) == len(finish.loops) == 2
    small = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"), argv=["8", "4"])
    widths = check_against_oracle(small)
    assert _edge(widths, "scale", "update", small) == "thread"
    assert _edge(widths, "scale", "finish", small) == "thread"


@pytest.mark.parametrize("iters", [5, 2000])
def test_scratch_buffer_of_each_iteration_keeps_the_loop_symbolic(iters: int) -> None:
    """A solver's time step calls a helper that creates temporary buffers, launches two
    kernels through them and releases them: one buffer reused by every iteration, so the
    loop stays symbolic (it was unrolled, and refused past the unroll limit)."""
    d = PROGRAMS / "scratch_loop"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"),
                          argv=["64", str(iters)])
    resid, correct = program.launches
    assert [lp.iterator for lp in resid.loops] == [lp.iterator for lp in correct.loops] == ["it"]
    assert resid.loops[0].upper == iters
    assert sorted(program.buffers) == ["d_c", "d_r", "d_u", "d_v"]
    assert resid.arg(2).buffer == correct.arg(0).buffer == "d_r"
    if iters == 5:
        widths = check_against_oracle(program)
        assert _edge(widths, "resid", "correct", program) == "global"


def test_scratch_buffer_of_each_iteration_fuses_and_verifies(tmp_path: Path, capsys: Any
                                                              ) -> None:
    d = PROGRAMS / "scratch_loop"
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", str(d / "kernels.cl"), "--host", str(d / "host.c"),
                            "--args", "64 5", "--out", str(out), "--verify")
    assert code == 0, err
    assert json.loads((out / "plan.json").read_text())["verified"]["ok"] is True


@pytest.mark.parametrize(("argv", "size", "iters"), [
    (["-p", "0", "-d", "1", "--", "--size", "64", "--iters=3"], 64, 3),
    (["-v", "--", "-s", "16", "-i", "2", "-q"], 16, 2),
    (["--", "--size", "128"], 128, 1),
])
def test_harness_moves_argv_then_getopt_long(argv: list, size: int, iters: int) -> None:
    """A harness reads its options character by character (``av[i][0] != '-'``,
    ``switch (av[i][1])``) and moves ``argv`` past them; the rest goes to getopt_long with
    ``--name value``, ``--name=value`` and short options (a loop of one step runs once,
    with its iterator known, not as a host loop)."""
    d = PROGRAMS / "cmdline_c"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"), argv=argv)
    (launch,) = program.launches
    assert launch.global_size == (size,)
    assert [lp.upper for lp in launch.loops] == ([iters] if iters > 1 else [])


def test_setup_loops_without_opencl_calls_are_summarised(monkeypatch: Any) -> None:
    """A 230,400-element two-variable ``for`` fill and 2.2 million iterations of nested
    flag set-up: one iteration budget for the whole nest, then a summary (what the loops
    write becomes unknown: host data, and a float scale that stays a kernel parameter)."""
    from polyfuse.frontend.host import evaluator

    executed = [0]
    original = evaluator.CEvaluator.exec

    def counting(self: Any, node: Any) -> None:
        executed[0] += 1
        original(self, node)

    monkeypatch.setattr(evaluator.CEvaluator, "exec", counting)
    d = PROGRAMS / "setup_loops"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))
    assert executed[0] < 40_000, executed[0]
    (launch,) = program.launches
    assert launch.global_size == (sympy.Symbol("n"),) and launch.arg(3).value is None
    small = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"), argv=["16"])
    assert small.launches[0].global_size == (16,) and small.buffers["d_in"].size == 64


def test_sizes_and_breaks_computed_from_data_are_named() -> None:
    """A size counted in a ``while (!feof(f))`` loop is a parameter named after its variable,
    which --param binds; a relaxation loop left when the residual read back from the device
    is small is refused naming the read-back, its line and the --param that lets it go on."""
    d = PROGRAMS / "data_sizes"
    host = d / "host.c"
    lines = host.read_text().splitlines()

    def line(needle: str) -> int:
        return next(i + 1 for i, t in enumerate(lines) if needle in t)

    def load(**kw: Any) -> Program:
        return load_opencl(str(d / "kernels.cl"), host=str(host), argv=["values.txt"], **kw)

    with pytest.raises(UnsupportedError) as exc:
        load()
    err = exc.value
    assert err.line == line("if (residual < tol) break;"), str(err)
    assert f"'residual', read back from the device by clEnqueueReadBuffer at {host}:" \
        f"{line('clEnqueueReadBuffer(q, d_r')}" in err.message
    assert "--param residual=VALUE" in err.message
    assert load(params={"residual": 1.0}).params == ("count",)
    fixed = load(params={"residual": 1.0, "count": 16}, check_params=True)
    assert [lp.upper for lp in fixed.launches[0].loops] == [8]
    check_against_oracle(fixed)


def test_loop_count_from_a_file_is_refused_naming_the_read_and_the_param() -> None:
    """Buffers created per block of a page count read with fscanf: the loop cannot be kept
    symbolic, and the refusal names the count, the fscanf line it comes from (through the
    block count a condition chose) and the --param that lets the analysis go on."""
    d = PROGRAMS / "file_blocks"
    host = d / "host.c"
    lines = host.read_text().splitlines()

    def line(needle: str) -> int:
        return next(i + 1 for i, t in enumerate(lines) if needle in t)

    with pytest.raises(UnsupportedError) as exc:
        load_opencl(str(d / "kernels.cl"), host=str(host), argv=["pages.txt"])
    err = exc.value
    assert err.line == line("for (i = 0; i < num_blocks; i++) {"), str(err)
    read = line('fscanf(fp, "%u\\n"')
    assert f"'num_blocks', computed from 'num_pages' (read by fscanf) at {host}:{read}" \
        in err.message, err.message
    assert "--param num_blocks=VALUE" in err.message
    program = load_opencl(str(d / "kernels.cl"), host=str(host), argv=["pages.txt"],
                          params={"num_blocks": 2})
    assert [op.kernel for op in program.launches] == ["twice", "twice"]


def test_unrolling_past_the_operation_budget_is_refused_after_one_iteration(tmp_path: Path
                                                                           ) -> None:
    """A buffer created per step whose handle the program keeps (``keep[t]``), in a
    1000-step loop with a dozen operations per step (an HMM forward pass, four times): the
    loop must be unrolled, and the refusal comes after its first iteration, naming the
    estimate, not after minutes of unrolling."""
    (tmp_path / "scale.cl").write_text(SCALE_KERNEL)
    (tmp_path / "host.c").write_text(SCALE_HOST.replace("SOURCES", """
    const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, NULL, NULL, NULL);""").replace(
        "    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);", """
    float part[64];
    cl_mem keep[1000];
    for (int t = 0; t < 1000; t++) {
        cl_mem tmp = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
        keep[t] = tmp;
        clEnqueueWriteBuffer(q, tmp, CL_TRUE, 0, 64 * sizeof(float), part, 0, NULL, NULL);
        clSetKernelArg(k, 0, sizeof(cl_mem), &tmp);
        clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
        clEnqueueReadBuffer(q, b, CL_TRUE, 0, 64 * sizeof(float), part, 0, NULL, NULL);
        clEnqueueWriteBuffer(q, tmp, CL_TRUE, 0, 64 * sizeof(float), part, 0, NULL, NULL);
        clSetKernelArg(k, 0, sizeof(cl_mem), &tmp);
        clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
        clEnqueueReadBuffer(q, b, CL_TRUE, 0, 64 * sizeof(float), part, 0, NULL, NULL);
        clEnqueueWriteBuffer(q, tmp, CL_TRUE, 0, 64 * sizeof(float), part, 0, NULL, NULL);
        clSetKernelArg(k, 0, sizeof(cl_mem), &tmp);
        clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
        clEnqueueReadBuffer(q, b, CL_TRUE, 0, 64 * sizeof(float), part, 0, NULL, NULL);
        clEnqueueWriteBuffer(q, tmp, CL_TRUE, 0, 64 * sizeof(float), part, 0, NULL, NULL);
        clSetKernelArg(k, 0, sizeof(cl_mem), &tmp);
        clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
        clEnqueueReadBuffer(q, b, CL_TRUE, 0, 64 * sizeof(float), part, 0, NULL, NULL);
    }"""))
    with pytest.raises(UnsupportedError, match=r"unrolling its 1000 iterations gives about "
                       r"\d+ operations, more than the 12288"):
        load_opencl(None, host=str(tmp_path / "host.c"))


DEVICE_TYPE_OPTIONS = """
    char opts[64];
    cl_device_type type;
    clGetDeviceInfo(NULL, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
    if (type == CL_DEVICE_TYPE_GPU) strcpy(opts, "-DSCALE=4.0f");
    else if (type == CL_DEVICE_TYPE_ACCELERATOR) strcpy(opts, "-DSCALE=8.0f");
    else strcpy(opts, "-DSCALE=2.0f");
    const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, opts, NULL, NULL);"""


class _DeviceOfType:
    """A device that answers only ``CL_DEVICE_TYPE``."""

    name = "test device"

    def __init__(self, device_type: int) -> None:
        self.device_type = device_type

    def device_info(self, param: int) -> Any:
        return self.device_type if param == 0x1000 else None

    def kernel_info(self, param: int, kernel: Any) -> Any:
        return None


def test_device_type_query_answered_by_the_verifying_device(tmp_path: Path, capsys: Any
                                                            ) -> None:
    """A host picks its build options by CL_DEVICE_TYPE: with the device's answers (what
    ``fuse --verify`` passes) it is modelled as it runs there; without them the options are
    unknown and refused."""
    import json

    (tmp_path / "scale.cl").write_text(SCALE_KERNEL)
    host = tmp_path / "host.c"
    host.write_text(SCALE_HOST.replace("SOURCES", DEVICE_TYPE_OPTIONS).replace(
        "#include <stdio.h>", "#include <stdio.h>\n#include <string.h>"))
    cpu = load_opencl(None, host=str(host), device_queries=_DeviceOfType(2))
    assert "-DSCALE=2.0f" in cpu.kernels["scale"].build_options
    gpu = load_opencl(None, host=str(host), device_queries=_DeviceOfType(4))
    assert "-DSCALE=4.0f" in gpu.kernels["scale"].build_options
    with pytest.raises(UnsupportedError, match="build options polyfuse cannot determine"):
        load_opencl(None, host=str(host))
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", str(host), "--out", str(out), "--verify")
    assert code == 0, err  # refused above without the device's answers
    assert json.loads((out / "plan.json").read_text())["verified"]["ok"] is True


VECTOR_WIDTH_OPTIONS = """
    char opts[64];
    cl_uint width;
    clGetDeviceInfo(NULL, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, sizeof(width), &width, NULL);
    sprintf(opts, "-DSCALE=%u.0f", width);
    const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, opts, NULL, NULL);"""


class _DeviceOfWidth(_DeviceOfType):
    """A device that answers only ``CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT``."""

    def device_info(self, param: int) -> Any:
        return self.device_type if param == 0x100A else None


def test_vector_width_query_answered_by_the_verifying_device(tmp_path: Path) -> None:
    """Build options from a preferred vector width (OpenDwarfs' n-queens picks its vector
    kernels by it): the verifying device answers it as it answers ``CL_DEVICE_TYPE``."""
    (tmp_path / "scale.cl").write_text(SCALE_KERNEL)
    host = tmp_path / "host.c"
    host.write_text(SCALE_HOST.replace("SOURCES", VECTOR_WIDTH_OPTIONS))
    wide = load_opencl(None, host=str(host), device_queries=_DeviceOfWidth(8))
    assert "-DSCALE=8.0f" in wide.kernels["scale"].build_options
    with pytest.raises(UnsupportedError, match="build options polyfuse cannot determine"):
        load_opencl(None, host=str(host))


DEVICE_SEARCH_OPTIONS = """
    cl_uint np, i, j, found = 0;
    cl_device_type type = 0;
    char opts[64];
    clGetPlatformIDs(0, NULL, &np);
    cl_platform_id *ps = (cl_platform_id *)malloc(np * sizeof(cl_platform_id));
    clGetPlatformIDs(np, ps, NULL);
    for (i = 0; i < np; i++) {
        cl_uint nd;
        if (clGetDeviceIDs(ps[i], WANTED, 0, NULL, &nd) != CL_SUCCESS)
            continue;
        cl_device_id *ds = (cl_device_id *)malloc(nd * sizeof(cl_device_id));
        clGetDeviceIDs(ps[i], WANTED, nd, ds, NULL);
        for (j = 0; j < nd; j++) {
            clGetDeviceInfo(ds[j], CL_DEVICE_TYPE, sizeof(type), &type, NULL);
            found = 1;
        }
    }
    if (!found) {
        printf("no device\\n");
        return 1;
    }
    switch (type) {
    case CL_DEVICE_TYPE_GPU: strcpy(opts, "-DSCALE=4.0f"); break;
    default: strcpy(opts, "-DSCALE=2.0f"); break;
    }
    const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, opts, NULL, NULL);"""


@pytest.mark.parametrize("wanted", ["CL_DEVICE_TYPE_ALL", "CL_DEVICE_TYPE_CPU",
                                    "CL_DEVICE_TYPE_GPU"])
def test_device_search_answered_as_the_verifying_device_alone(tmp_path: Path,
                                                              wanted: str) -> None:
    """The OpenCL Programming Guide's search over every platform's devices for one of a
    requested type: with a device to verify on, the host runs as with that device alone
    (one platform, one device, found only by a type filter that takes it), so the device's
    type decides the options; a search that finds nothing ends the program, as it would."""
    (tmp_path / "scale.cl").write_text(SCALE_KERNEL)
    host = tmp_path / "host.c"
    host.write_text(SCALE_HOST.replace("SOURCES", DEVICE_SEARCH_OPTIONS.replace(
        "WANTED", wanted)).replace("#include <stdio.h>", "#include <stdio.h>\n#include <string.h>"))
    for device_type, kind, scale in ((2, "CPU", "2.0f"), (4, "GPU", "4.0f")):
        if wanted != "CL_DEVICE_TYPE_ALL" and not wanted.endswith(kind):
            with pytest.raises(PolyfuseError, match="launches no kernel"):
                load_opencl(None, host=str(host), device_queries=_DeviceOfType(device_type))
        else:
            program = load_opencl(None, host=str(host), device_queries=_DeviceOfType(device_type))
            assert f"-DSCALE={scale}" in program.kernels["scale"].build_options
    with pytest.raises(UnsupportedError, match="build options polyfuse cannot determine"):
        load_opencl(None, host=str(host))


class _ExtensionList(_DeviceOfType):
    """A device that answers only ``CL_DEVICE_EXTENSIONS``."""

    def __init__(self, extensions: str) -> None:
        self.extensions = extensions

    def device_info(self, param: int) -> Any:
        return self.extensions if param == 0x1030 else None


def test_vector_of_records_and_extension_words_choose_build_options(monkeypatch: Any
                                                                    ) -> None:
    """OpenDwarfs n-queens: ``std::vector<solver_info>::resize(n)`` default-constructs each
    record (its flags false, not unknown), and a flag comes from the extension list read into
    a resized ``std::string`` through ``&s[0]`` and split by ``while (!ss.eof()) ss >> w``.
    The NULs the string keeps after the text end the last word, as in C++: an extension
    listed last does not match."""
    monkeypatch.chdir(PROGRAMS / "solver_records")
    atomics = "cl_khr_global_int32_base_atomics"

    def options(extensions: str) -> list[set[str]]:
        program = load_opencl(None, host="host.cpp", device_queries=_ExtensionList(extensions))
        return [set(program.kernels[k].build_options) for k in ("scale", "scale_1")]

    first, second = options(f"{atomics} cl_khr_fp64")
    assert {"-DWORK_ITEMS=256", "-DUSE_ATOMICS"} <= first and "-DUSE_VEC" not in first
    assert {"-DWORK_ITEMS=192", "-DUSE_VEC"} <= second and "-DUSE_ATOMICS" not in second
    first, _ = options(f"cl_khr_fp64 {atomics}")
    assert "-DUSE_ATOMICS" not in first and "-DWORK_ITEMS=256" in first
    with pytest.raises(UnsupportedError, match="build options polyfuse cannot determine"):
        load_opencl(None, host="host.cpp")


OPERATOR_HOST = r"""
#include <CL/cl.h>
#include <iostream>
#include <cstdio>
#include <cstdlib>
class CLError {
public:
    CLError(cl_int err, int line = 0) : m_Err(err), m_Line(line) {}
    cl_int no() const { return m_Err; }
    int line() const { return m_Line; }
private:
    cl_int m_Err;
    int m_Line;
};
inline std::ostream& operator<<(std::ostream& stream, const CLError& x) {
    stream << "OpenCL error: " << x.no();
    if (x.line() != 0) stream << " (line: " << x.line() << ")";
    return stream;
}
int main() {
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    const char *src = "__kernel void twice(__global float *a) { a[get_global_id(0)] *= 2.0f; }";
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(prog, "twice", &err);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    size_t g = 64;
    std::cout << CLError(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL), 7)
              << std::endl;
    clFinish(q);
    return 0;
}
"""


def test_programs_operator_overload_beside_the_librarys(tmp_path: Path) -> None:
    """``operator<<(std::ostream&, const CLError&)`` of the program calls the library's
    ``operator<<`` in its body: one name, two functions, and not a recursion."""
    (tmp_path / "host.cpp").write_text(OPERATOR_HOST)
    program = load_opencl(None, host=str(tmp_path / "host.cpp"))
    assert [op.kernel for op in program.launches] == ["twice"]


def test_counts_read_with_fscanf_from_an_input_file_that_is_there(tmp_path: Path,
                                                                   monkeypatch: Any) -> None:
    """Run with its command line in a directory holding its input, the host's fscanf reads
    the page count (20: two blocks of 16) as the program does; the page values themselves,
    read in a loop, stay unknown data.  A list of one option runs its loop once, known."""
    d = PROGRAMS / "file_blocks"
    (tmp_path / "pages.txt").write_text("20\n" + " ".join(str(i) for i in range(20)) + "\n")
    (tmp_path / "kernels.cl").write_text((d / "kernels.cl").read_text())
    monkeypatch.chdir(tmp_path)
    program = load_opencl(None, host=str(d / "host.c"), argv=["pages.txt"])
    assert [op.kernel for op in program.launches] == ["twice", "twice"]
    assert not program.params
    with pytest.raises(UnsupportedError, match="--param num_blocks=VALUE"):
        load_opencl(None, host=str(d / "host.c"), argv=["missing.txt"])
    check_against_oracle(program)


@pytest.mark.parametrize(("fmt", "text", "expect"), [
    ("%u\n%u\n\n", "16\n1024\n\n5 6", ([16, 1024], 9)),
    ("%d,%f %s", " -3,2.5e1 word rest", ([-3, 25.0, "word"], 14)),
    ("%*d %x%%", "7 ff%", ([255], 5)),
    ("%d", "abc", None),
    ("n=%d", "m=3", None),
])
def test_fscanf_scans_as_c_does(fmt: str, text: str, expect: Any) -> None:
    from polyfuse.frontend.host.datafiles import scan

    assert scan(text, 0, fmt) == expect


def test_kernel_work_group_query_answered_by_the_verifying_device(tmp_path: Path) -> None:
    """``clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)`` sizes the launch: answered for
    the kernel the object holds (what ``fuse --verify`` passes: the device's answer for that
    kernel's source and options), otherwise a parameter named after its variable."""
    from polyfuse.runtime.execute import device_queries

    (tmp_path / "scale.cl").write_text(SCALE_KERNEL)
    host = tmp_path / "host.c"
    host.write_text(SCALE_HOST.replace("SOURCES", """
    const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, "-DSCALE=2.0f", NULL, NULL);""").replace(
        "    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);", """
    size_t wg;
    clGetKernelWorkGroupInfo(k, NULL, CL_KERNEL_WORK_GROUP_SIZE, sizeof(wg), &wg, NULL);
    size_t local = wg < 16 ? wg : 16;
    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &local, 0, NULL, NULL);"""))
    asked = []

    class Answers(_DeviceOfType):
        def kernel_info(self, param: int, kernel: Any) -> Any:
            asked.append((kernel.name, kernel.build_options[-1]))
            return 8 if param == 0x11B0 else None

    program = load_opencl(None, host=str(host), device_queries=Answers(2))
    assert asked == [("scale", "-DSCALE=2.0f")]
    assert program.launches[0].local_size == (8,)
    assert load_opencl(None, host=str(host)).params == ("local",)
    device = device_queries(None)
    for query in (0x11B0, 0x11B3):  # work-group size and its preferred multiple
        answer = device.kernel_info(query, program.kernels["scale"])
        assert isinstance(answer, int) and answer >= 1


def test_recursive_option_parser_is_summarised(monkeypatch: Any, caplog: Any) -> None:
    """An option parser re-entering itself for a configuration file: with the command line
    every comparison is decided and it runs as written; without it, the re-entered call
    (no OpenCL call in it) is summarised instead of inlined level after level under each
    undecided comparison, so the host is refused at once for the unknown pass count."""
    from polyfuse.frontend.host import evaluator

    executed = [0]
    original = evaluator.CEvaluator.exec

    def counting(self: Any, node: Any) -> None:
        executed[0] += 1
        if executed[0] > 20_000:
            raise AssertionError("the recursion is inlined level after level")
        original(self, node)

    monkeypatch.setattr(evaluator.CEvaluator, "exec", counting)
    host = str(PROGRAMS / "recursive_options" / "main.cpp")
    program = load_opencl(None, host=host, argv=["-v", "-n", "3"])
    (launch,) = program.launches
    assert [lp.upper for lp in launch.loops] == [3]
    executed[0] = 0
    with pytest.raises(UnsupportedError, match=r"main.cpp:59: .*trip count"):
        load_opencl(None, host=host)
    assert "recursive call of 'parse' summarised" in caplog.text


@pytest.mark.parametrize("argv, size, passes", [
    ([], 64, 2), (["-s", "256"], 256, 2), (["--passes", "5", "-v", "-s", "32"], 32, 5)])
def test_option_records_in_std_maps_decide_the_launches(argv: list, size: int,
                                                         passes: int) -> None:
    """A harness's option parser keeps records in a std::map<std::string, Option> member,
    letters in a std::map<char, std::string>, the command line in a
    std::vector<std::string> (two overloads of parse), and reads values back through
    find(), it->second and a std::stringstream: the launch's size and pass count are the
    command line's."""
    host = str(PROGRAMS / "cpp_option_parser" / "main.cpp")
    program = load_opencl(None, host=host, argv=argv)
    (launch,) = program.launches
    assert launch.global_size == (size,) and [lp.upper for lp in launch.loops] == [passes]
    assert program.buffers["a"].size == 4 * size


def test_container_elements_are_values() -> None:
    """Standard containers hold class elements by value: a std::vector<std::string> passed
    by value is a copy the callee changes alone, a copied std::map keeps its own records
    while the original's are written through m[k].field."""
    program = load_opencl(None, host=str(PROGRAMS / "cpp_value_copies" / "main.cpp"))
    (launch,) = program.launches
    assert launch.global_size == ((128 + 128) * 2 + 3,)


def test_sizeof_a_template_parameter_comes_from_the_instantiation() -> None:
    """A benchmark written once for float and double: ``sizeof(T)`` in a function template
    is the size of the type the call instantiates it with (``run<float>``: 4 bytes), so the
    ``__local`` argument of ``n * sizeof(T)`` bytes is sized."""
    host = PROGRAMS / "cpp_template_sizeof" / "main.cpp"
    (launch,) = load_opencl(None, host=str(host)).launches
    assert launch.arg(1).local_bytes == 64 * 4


NPB_STYLE = PROGRAMS / "npb_style"
#: what clGetDeviceInfo answers in the tests below (CL_DEVICE_MAX_WORK_ITEM_SIZES, _GROUP_SIZE)
class _NpbDevice:
    """A device that answers the work-item and work-group limits."""

    name = "test device"

    def device_info(self, param: int) -> Any:
        # CL_DEVICE_MAX_WORK_ITEM_SIZES, CL_DEVICE_MAX_WORK_GROUP_SIZE
        return {0x1005: (64, 64, 64), 0x1004: 256}.get(param)

    def kernel_info(self, param: int, kernel: Any) -> Any:
        return None


NPB_DEVICE = _NpbDevice()


def _npb_style(**kw: Any) -> Program:
    return load_opencl(None, host=[str(NPB_STYLE / "main.c"), str(NPB_STYLE / "util.c")],
                       argv=[str(NPB_STYLE)], **kw)


def test_npb_style_device_search_limits_input_deck_and_level_sizes(monkeypatch: Any) -> None:
    """A device search that returns from inside its loops and exits when it finds nothing;
    the device type from an unset environment variable picks the CPU kernel file; options
    sprintf'd in two steps; an optional input deck that is not there (compiled defaults);
    device limits answered and clamped per dimension; per-level sizes read at the level
    loop's iterator (the loop is unrolled); a float argument from rand() stays unknown."""
    monkeypatch.chdir(NPB_STYLE)
    monkeypatch.delenv("NPB_STYLE_DEVICE_TYPE", raising=False)
    program = _npb_style(device_queries=NPB_DEVICE)
    assert [(lc.kernel, lc.global_size, lc.local_size) for lc in program.launches] == [
        ("smooth", (2,), (2,)), ("shift", (2,), (2,)), ("smooth", (4,), (4,)),
        ("shift", (4,), (4,)), ("smooth", (8,), (4,)), ("shift", (8,), (4,))]
    assert [lc.arg(1).value for lc in program.launches[::2]] == [2, 4, 8]
    assert all([lp.upper for lp in lc.loops] == [2] for lc in program.launches)
    assert all(lc.arg(2).value is None for lc in program.launches[::2])  # scale
    monkeypatch.setenv("NPB_STYLE_DEVICE_TYPE", "gpu")
    with pytest.raises(PolyfuseError, match="k_gpu.cl"):
        _npb_style(device_queries=NPB_DEVICE)


def test_npb_style_input_deck_present_sizes_become_data(monkeypatch: Any, tmp_path: Path
                                                         ) -> None:
    """With the input deck where the program runs, the iteration count is what the program
    reads from it (the model is of that input, and a warning says so)."""
    for f in NPB_STYLE.iterdir():
        (tmp_path / f.name).write_text(f.read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NPB_STYLE_DEVICE_TYPE", raising=False)

    def load(**kw: Any) -> Program:
        return load_opencl(None, host=[str(tmp_path / "main.c"), str(tmp_path / "util.c")],
                           argv=["."], device_queries=NPB_DEVICE, **kw)

    for nit in (5, 7):
        (tmp_path / "npb_style.input").write_text(f"{nit}\n")
        program = load()
        assert program.params == ()
        assert all([lp.upper for lp in lc.loops] == [nit] for lc in program.launches)


def test_npb_style_fuses_and_verifies_with_the_devices_limits(monkeypatch: Any, tmp_path: Path,
                                                              capsys: Any) -> None:
    """fuse --verify answers the device queries from the verification device and draws the
    float argument the host computes from data at random, the same for both programs."""
    import json

    monkeypatch.chdir(NPB_STYLE)
    monkeypatch.delenv("NPB_STYLE_DEVICE_TYPE", raising=False)
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", "main.c", "--host", "util.c", "--args",
                            ".", "--out", str(out), "--verify")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["launches_before"] == 12 and plan["verified"]["ok"] is True


def test_helper_of_the_same_name_in_two_programs_and_a_pointer_into_a_local_tile(
        monkeypatch: Any, tmp_path: Path, capsys: Any) -> None:
    """Two programs each define a helper ``weight`` (one on ``__global``, one on
    ``__constant`` memory): the second program's is renamed, definition and calls, so both
    fit in one fused source; a private pointer into a ``__local`` tile declared in a loop
    stays where it is (only ``__local`` arrays move to kernel scope)."""
    import json

    d = PROGRAMS / "helper_clash"
    monkeypatch.chdir(d)
    program = load_opencl(None, host=str(d / "host.c"))
    helpers = {k: sorted(n for n in program.kernels[k].helpers if n != k)
               for k in ("scale", "reduce")}
    assert helpers == {"scale": ["weight"], "reduce": ["weight_1"]}
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", "host.c", "--out", str(out), "--verify")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["launches_after"] == 1 and plan["verified"]["ok"] is True
    fused = (out / "fused.cl").read_text()
    assert "__local float *o = &f2_tmp[j];" in fused


SPRINTF_OPTIONS_HOST = r"""
#include <stdio.h>
#include <CL/cl.h>
int main(void) {
    int block;
    if (scanf("%d", &block) != 1) return 1;
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    const char *src = "__kernel void fill(__global float *a) { a[get_global_id(0)] = BLOCK; }";
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    char opts[64];
    sprintf(opts, "-DBLOCK=%d", block);
    clBuildProgram(p, 0, NULL, opts, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "fill", &err);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1024 * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    size_t g = 1024;
    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    clFinish(q);
    return 0;
}
"""


def test_sprintf_options_from_an_unknown_value_name_it(tmp_path: Path) -> None:
    """Build options sprintf'd from a value read at run time are refused naming the value and
    the --param that fixes it; with the --param the kernel is built with that value."""
    host = tmp_path / "host.c"
    host.write_text(SPRINTF_OPTIONS_HOST)
    with pytest.raises(UnsupportedError, match=r"host.c:14: clBuildProgram: build options .*"
                                               r"--param block=VALUE"):
        load_opencl(None, host=str(host))
    program = load_opencl(None, host=str(host), params={"block": 8})
    assert "-DBLOCK=8" in program.kernels["fill"].build_options


def test_search_loop_break_keeps_what_it_stored_and_no_local_size_is_unit_groups(
        tmp_path: Path, capsys: Any) -> None:
    """A platform search loop stores the device list and leaves by ``break``: after the
    loop the list may be set, so ``if (devices == NULL) exit(1)`` is not certain (it was, and
    the program launched nothing).  Launches without a local size, one of a kernel that
    indexes __local scratch by its local id, are modelled with work-groups of one work-item
    (a choice every implementation may make): exact, so the two launches fuse."""
    import json

    d = PROGRAMS / "device_search"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"), argv=["16"],
                          params={"local_mem": 256})
    stage, shift = program.launches
    assert stage.local_size is None and shift.local_size is None
    widths = check_against_oracle(program)
    assert _edge(widths, "stage", "shift", program) == "thread"
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", str(d / "kernels.cl"), "--host", str(d / "host.c"),
                            "--args", "16", "--out", str(out), "--verify")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["launches_before"] == 2 and plan["launches_after"] == 1
    assert plan["verified"]["ok"] is True


class _Queries:
    """A device's answers to info queries by ``CL_`` code, without a device."""

    name = "test device"

    def __init__(self, device: Optional[dict] = None) -> None:
        self.device = device or {}

    def device_info(self, param: int) -> Any:
        return self.device.get(param)

    def kernel_info(self, param: int, kernel: Any) -> Any:
        return None


def test_device_query_is_answered_by_the_verifying_device(tmp_path: Path, capsys: Any,
                                                          caplog: Any) -> None:
    """``clGetDeviceInfo(CL_DEVICE_LOCAL_MEM_SIZE)`` sizes __local scratch: answered from the
    device that verifies (a warning says so); without one it is a parameter named after the
    variable, which --param binds."""
    d = PROGRAMS / "device_search"
    args = (str(d / "kernels.cl"),)
    unknown = load_opencl(*args, host=str(d / "host.c"), argv=["16"])
    assert unknown.params == ("local_mem",)
    device = _Queries(device={0x1023: 4096})  # CL_DEVICE_LOCAL_MEM_SIZE
    program = load_opencl(*args, host=str(d / "host.c"), argv=["16"], device_queries=device)
    assert program.params == () and program.launches[0].arg(2).local_bytes == 4096
    assert any("host.c:" in r.getMessage() and "clGetDeviceInfo(CL_DEVICE_LOCAL_MEM_SIZE) "
               "answered by the device that verifies the program (test device): 4096"
               in r.getMessage() for r in caplog.records)
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", *args, "--host", str(d / "host.c"), "--args", "16",
                            "--out", str(out), "--verify")
    assert code == 0, err
    assert "small instance" not in (out / "report.md").read_text()


def test_local_size_from_an_unanswered_device_query_is_refused_naming_it(
        tmp_path: Path, capsys: Any) -> None:
    """A local size from ``clGetDeviceInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE)`` with no device to
    answer it: the refusal names the launch's host line and the --param that fixes it (not
    an isl "unbounded optimum"); fixed, the launches fuse."""
    d = PROGRAMS / "device_search"
    host = (d / "host.c").read_text().replace(
        "    size_t gs = n;",
        "    size_t gs = n;\n    size_t wg;\n"
        "    clGetDeviceInfo(devices[0], CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(wg), &wg, NULL);"
    ).replace("&gs, NULL, 0", "&gs, &wg, 0")
    assert host.count("&wg, 0") == 2
    (tmp_path / "host.c").write_text(host)
    (tmp_path / "kernels.cl").write_text((d / "kernels.cl").read_text())
    k, h = str(tmp_path / "kernels.cl"), str(tmp_path / "host.c")
    line = next(i for i, t in enumerate(host.splitlines(), 1) if "k_stage, 1, NULL" in t)
    code, _, err = _run_cli(capsys, "fuse", k, "--host", h, "--args", "16", "--param",
                            "local_mem=256", "--out", str(tmp_path / "out"))
    assert code == 1 and f"host.c:{line}" in err and "--param wg=VALUE" in err, err
    assert "unbounded optimum" not in err and "Traceback" not in err
    code, _, err = _run_cli(capsys, "fuse", k, "--host", h, "--args", "16", "--param",
                            "local_mem=256", "--param", "wg=8", "--out", str(tmp_path / "out"))
    assert code == 0, err


@pytest.mark.parametrize(("choice", "expect"), [
    ('const char *name = rand() % 2 ? "scale" : "scale2";',
     "the kernel name in 'name' is selected by the host condition 'rand() % 2' at "
     "HOST:LINE, which polyfuse cannot decide"),
    ('char name[16];\n    strcpy(name, getenv("KERNEL"));',
     "the kernel name in 'name' is text the host copies or builds at run time"),
])
def test_kernel_name_polyfuse_cannot_follow_is_refused_naming_it(
        tmp_path: Path, capsys: Any, choice: str, expect: str) -> None:
    """A kernel name chosen by a condition polyfuse cannot decide, or copied at run time:
    the refusal names the variable, and the condition with its line."""
    k, h = _write_host(tmp_path, "")
    text = Path(h).read_text().replace(
        '    cl_kernel k = clCreateKernel(prog, "scale", &err);',
        f"    {choice}\n    cl_kernel k = clCreateKernel(prog, name, &err);").replace(
        "#include <stdlib.h>", "#include <stdlib.h>\n#include <string.h>")
    Path(h).write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "name" in t)
    code, _, err = _run_cli(capsys, "analyze", k, "--host", h)
    assert code == 1 and expect.replace("HOST", h).replace("LINE", str(line)) in err, err
    call = next(i for i, t in enumerate(text.splitlines(), 1) if "clCreateKernel" in t)
    assert f"{h}:{call}: clCreateKernel" in err and "Traceback" not in err


def test_work_group_query_is_answered_by_the_verifying_device(caplog: Any) -> None:
    """``clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)`` sizes the work-groups: the
    device that verifies answers it for the kernel as polyfuse builds it (a warning says so)."""
    host = str(PROGRAMS / "handson_vadd" / "vadd.c")
    asked = []

    class Asked(_Queries):
        def kernel_info(self, param: int, kernel: Any) -> Any:
            asked.append((kernel.name, param))
            return 32

    program = load_opencl(None, host=host, device_queries=Asked())
    assert program.launches[0].local_size == (32,) and "wg" not in program.params
    assert asked == [("vadd", 0x11B0)]
    assert any("clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE) answered by the device "
               "that verifies the program (test device): 32" in r.getMessage()
               for r in caplog.records)
    pytest.importorskip("pyopencl")
    from polyfuse.runtime.execute import device_queries

    real = load_opencl(None, host=host, device_queries=device_queries(None))
    (size,) = real.launches[0].local_size
    assert isinstance(size, (int, sympy.Integer)) and int(size) >= 1


def test_lambdas_that_launch_kernels_run_where_they_are_called(tmp_path: Path,
                                                               capsys: Any) -> None:
    """BabelStream-style harness: kernels launched from lambdas that capture by reference,
    called directly and through a timing template (``F&& f; f();``); a host-only lambda
    stays opaque.  The launches land in the host loop that calls the lambdas."""
    import json

    d = PROGRAMS / "cpp_lambdas"
    args = (str(d / "kernels.cl"),)
    program = load_opencl(*args, host=str(d / "main.cpp"), argv=["64", "2"])
    assert [(op.kernel, op.global_size, [(lp.lower, lp.upper) for lp in op.loops])
            for op in program.launches] == [("copy", (64,), [(0, 2)]),
                                            ("scale", (64,), [(0, 2)])]
    widths = check_against_oracle(program)
    assert _edge(widths, "copy", "scale", program) == "thread"
    symbolic = load_opencl(*args, host=str(d / "main.cpp"))
    assert symbolic.params == ("n", "times")
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", *args, "--host", str(d / "main.cpp"), "--args",
                            "64 2", "--out", str(out), "--verify")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["launches_before"] == 4 and plan["launches_after"] == 2
    assert plan["verified"]["ok"] is True


CPP_TEMPLATE_HOST = r"""
#include <CL/cl.h>
#include <cstdlib>
template <typename T> struct Stream {
    virtual ~Stream() {}
    virtual void copy() = 0;
};
int twice(int n) { return 2 * n; }
int twice(int n, int m) { return 2 * n + m; }
template <typename T> int size_of(T n) { return twice(n, 1); }
template <typename T> void bench(Stream<T>* s) { BODY; }
int main(int argc, char** argv)
{
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    const char* src = "__kernel void scale(__global float* a) { a[get_global_id(0)] *= 2; }";
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(prog, "scale", &err);
    size_t g = size_of<int>(twice(8));
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, g * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    bench<float>((Stream<float>*)NULL);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    clFinish(q);
    return 0;
}
"""


@pytest.mark.parametrize("body", ["", "s->copy()"])
def test_template_calls_resolve_overloads_and_refuse_unresolved_methods(
        tmp_path: Path, capsys: Any, body: str) -> None:
    """In a function template, ``twice(n, 1)`` names an overload set: the program's
    overload with that many parameters runs (overloads of one name are told apart by their
    parameter count); ``s->copy()`` on a user class that depends on the template parameter
    (a pure virtual method, whose overrider may launch kernels) is refused naming it."""
    host = tmp_path / "host.cpp"
    host.write_text(CPP_TEMPLATE_HOST.replace("BODY", body))
    if not body:
        program = load_opencl(None, host=str(host))
        assert program.launches[0].global_size == (33,)
        return
    code, _, err = _run_cli(capsys, "analyze", "--host", str(host))
    line = next(i for i, t in enumerate(host.read_text().splitlines(), 1) if "s->copy()" in t)
    assert code == 1 and f"host.cpp:{line}" in err, err
    assert "a call of 'copy' on a Stream<T> *" in err and "Traceback" not in err


def test_helper_return_path_keeps_what_it_stored() -> None:
    """The device search in a helper that stores the list through a pointer and returns
    early: the stored list may reach the caller (it did not, and ``if (devices == NULL)
    exit(1)`` ended the program before any launch)."""
    d = PROGRAMS / "device_search"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "helper.c"), argv=["16"])
    assert [op.kernel for op in program.launches] == ["stage", "shift"]


def test_launch_on_a_path_that_breaks_out_is_refused(tmp_path: Path, capsys: Any) -> None:
    """A launch on a path that leaves a loop by ``break`` under a data-dependent condition
    may or may not run: refused naming its line (it was silently dropped), and the condition
    is no fact about the program's values.  (A condition on data the host computed itself is
    decided once the loop is unrolled: that launch runs once.)"""
    d = PROGRAMS / "device_search"
    host = (d / "host.c").read_text().replace(
        "    size_t gs = n;",
        "    size_t gs = n;\n    for (int r = 0; r < n; r++) {\n"
        "        if (rand() % 4 == 0) {\n"
        "            clEnqueueNDRangeKernel(queue, k_shift, 1, NULL, &gs, NULL, 0, NULL, NULL);\n"
        "            break;\n        }\n    }")
    (tmp_path / "host.c").write_text(host)
    (tmp_path / "kernels.cl").write_text((d / "kernels.cl").read_text())
    line = next(i for i, t in enumerate(host.splitlines(), 1) if "rand() % 4 == 0" in t)
    code, _, err = _run_cli(capsys, "analyze", str(tmp_path / "kernels.cl"), "--host",
                            str(tmp_path / "host.c"), "--args", "16")
    assert code == 1 and f"host.c:{line}" in err and "leaves early" in err, err
    assert f"(line {line + 1})" in err and "Traceback" not in err


class _Extensions(_DeviceOfType):
    """A device that answers its extension list and name."""

    def __init__(self, extensions: str, name: str) -> None:
        super().__init__(2)
        self.texts = {0x1030: extensions, 0x102B: name}

    def device_info(self, param: int) -> Any:
        return self.texts.get(param)


def test_extension_string_query_answered_by_the_verifying_device() -> None:
    """A host picks its precision by searching ``CL_DEVICE_EXTENSIONS`` (sized by a first
    query, then read; ``std::string::find`` against ``npos``) and its problem size by
    ``strstr`` on ``CL_DEVICE_NAME``: the device's text decides each branch."""
    host = str(PROGRAMS / "extension_query" / "host.cpp")

    def launches(device: Any) -> list:
        program = load_opencl(None, host=host, device_queries=device)
        return [(program.kernels[x.kernel].build_options[-1], x.global_size)
                for x in program.launches]

    khr = launches(_Extensions("cl_khr_byte_addressable_store cl_khr_fp64", "Some GPU"))
    assert [g for _, g in khr] == [(1024,), (1024,), (2048,)] and khr[1][0] == "-DDOUBLE"
    amd = launches(_Extensions("cl_amd_fp64 cl_khr_icd", "a CPU"))
    assert amd[1] == ("-DDOUBLE", (512,)) and len(amd) == 2
    assert [g for _, g in launches(_Extensions("cl_khr_icd", "a CPU"))] == [(1024,)]
    with pytest.raises(UnsupportedError, match=r"host.cpp:\d+: launch under data-dependent"):
        load_opencl(None, host=host)


def test_option_string_copied_from_a_member_and_a_frontier_loop() -> None:
    """``return it->second.value`` copy-constructs the string member (the constructor's
    operand is no object it is called on), so the option decides the branch; the other
    branch's loop runs until a flag read back from the device is zero: refused, naming the
    flag and its read-back."""
    host = str(PROGRAMS / "frontier_loop" / "host.cpp")
    (launch,) = load_opencl(None, host=host, argv=[]).launches
    assert launch.global_size == (1024,)
    with pytest.raises(UnsupportedError, match=r"host.cpp:\d+: launches or buffer operations "
                       r"in a loop whose trip count .*depends on 'flag', read back from the "
                       r"device by clEnqueueReadBuffer at .*host.cpp:\d+"):
        load_opencl(None, host=host, argv=["file.gr"])


def test_buffer_handle_boxed_behind_a_void_pointer() -> None:
    """A ``cl_mem`` stored into fresh memory through ``void **`` (``*(cl_mem **)p = new
    cl_mem; **(cl_mem **)p = clCreateBuffer(...)``): the box passed to ``clSetKernelArg`` is
    a pointer to that buffer, the transfer through ``*(cl_mem *)p`` writes it."""
    program = load_opencl(None, host=str(PROGRAMS / "handle_box" / "host.cpp"))
    (write,) = [o for o in program.ops if getattr(o, "kind", "") == "write"]
    (launch,) = program.launches
    (arg,) = launch.args
    assert arg.kind == "buffer" and (arg.buffer,) == tuple(w.buffer for w in write.writes)
    assert launch.global_size == (1024,)


def test_function_template_specialized_per_type_is_not_one_specialization(tmp_path: Path
                                                                          ) -> None:
    """``dp<T>()`` explicitly specialized for float (false) and double (true), called in
    ``run<T>``: the call passes the size of its type argument, which tells the two
    specializations apart, so each instantiation runs its own (never the last
    specialization's answer for every instantiation).  Where the template also has a generic
    body (another type of the same size may instantiate it) the result stays unknown and is
    refused, saying why."""
    d = PROGRAMS / "template_specialization"
    program = load_opencl(None, host=str(d / "host.cpp"))
    single, double = program.launches
    assert "-DDOUBLE" not in program.kernels[single.kernel].build_options
    assert "-DDOUBLE" in program.kernels[double.kernel].build_options
    for f in d.iterdir():
        (tmp_path / f.name).write_text(f.read_text())
    host = tmp_path / "host.cpp"
    host.write_text(host.read_text().replace(
        "template <class T> inline bool dp(void);",
        "template <class T> inline bool dp(void) { return sizeof(T) > 100; }"))
    with pytest.raises(UnsupportedError, match=r"host.cpp:\d+: clBuildProgram: build options"):
        load_opencl(None, host=str(host))


@pytest.mark.parametrize("argv", [[], ["plain"]])
def test_virtual_operator_runs_the_override_of_the_class_new_made(argv: list) -> None:
    """Launches inside a virtual ``operator()`` called through the base class, from a
    function template (the callee depends on its type parameter) or from a plain function
    (a pure virtual call): the object was made by ``new CLOp<T>(k)``, so the call runs
    ``CLOp``'s override (both were refused or unknown calls)."""
    host = str(PROGRAMS / "template_dispatch" / "host.cpp")
    program = load_opencl(None, host=host, argv=argv)
    assert [(op.kernel, op.global_size) for op in program.launches] == [("scale", (1024,))]


def test_virtual_calls_dispatch_on_the_class_new_made() -> None:
    """A STREAM-style benchmark (BabelStream's ``Stream<T>``): a factory template returns
    ``new CLStream<T>(...)`` as a ``Stream<T>*``; calls through it in a template
    (``stream->copy()``, ``(*stream)(n)``), inside the override (``copy()`` on ``this``) and
    in ``main`` (``stream->scale()``, which the base also defines) run ``CLStream``'s
    methods, and the UAR has exactly the brute-force dependences."""
    d = PROGRAMS / "virtual_dispatch"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.cpp"), argv=["64"])
    assert [op.kernel for op in program.launches] == ["copy", "scale", "copy", "scale",
                                                      "scale"]
    assert [lp.iterator for lp in program.launches[2].loops] == ["t"]
    widths = check_against_oracle(program)
    assert _edge(widths, "copy", "scale", program) == "thread"


def test_virtual_call_on_an_object_of_unknown_class_is_refused(tmp_path: Path) -> None:
    """The object behind the base-class pointer was not made by a ``new`` polyfuse
    followed: which override runs is unknown, so the call is refused where it runs, naming
    it (never the base's version, never silently nothing)."""
    d = PROGRAMS / "virtual_dispatch"
    (tmp_path / "kernels.cl").write_text((d / "kernels.cl").read_text())
    text = (d / "host.cpp").read_text().replace(
        "make_stream<float>(ctx, dev, q, n)", "(Stream<float>*)malloc(256)")
    (tmp_path / "host.cpp").write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "stream->copy();" in t)
    with pytest.raises(UnsupportedError, match=rf"host.cpp:{line}: .*'copy' on a Stream<T> "
                       r".*not made by a `new`"):
        load_opencl(str(tmp_path / "kernels.cl"), host=str(tmp_path / "host.cpp"))


def test_build_options_sprintfd_from_a_run_time_value_are_refused_with_why(tmp_path: Path
                                                                          ) -> None:
    """Options formatted from a value read at run time: unknown text, and the refusal at the
    build says what it depends on (a sprintf of an unknown value once crashed)."""
    (tmp_path / "scale.cl").write_text(BLOCK_KERNEL)
    (tmp_path / "host.c").write_text(SCALE_HOST.replace("SOURCES", """
    int bs;
    scanf("%d", &bs);
    char opts[64];
    sprintf(opts, "-DBLOCK_SIZE=%d", bs);
    const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, opts, NULL, NULL);"""))
    with pytest.raises(UnsupportedError, match=r"host.c:\d+: clBuildProgram: build options "
                       r"polyfuse cannot determine.*bs"):
        load_opencl(str(tmp_path / "scale.cl"), host=str(tmp_path / "host.c"))


RECURSIVE_SIZE_HOST = r"""
#include <CL/cl.h>
static int blocks(int k) { return k == 0 ? 1 : 2 * blocks(k - 1); }
int main(void) {
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, NULL, 0, &err);
    const char *src = "__kernel void fill(__global float *a) { a[get_global_id(0)] = 1.0f; }";
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(p, 0, NULL, NULL, NULL, NULL);
    cl_kernel k = clCreateKernel(p, "fill", &err);
    size_t g = 64 * blocks(3);
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_WRITE, g * sizeof(float), NULL, &err);
    clSetKernelArg(k, 0, sizeof(cl_mem), &a);
    clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    clFinish(q);
    return 0;
}
"""


def test_shallow_recursion_over_known_values_runs_as_written(tmp_path: Path) -> None:
    """A recursion without OpenCL calls over known values (an options library walking its
    table) is inlined while shallow: its result is exact; only a deep one is summarised."""
    host = tmp_path / "host.c"
    host.write_text(RECURSIVE_SIZE_HOST)
    (launch,) = load_opencl(None, host=str(host)).launches
    assert launch.global_size == (64 * 8,)


def test_global_work_offsets_are_modelled_exactly() -> None:
    """An LU-style host launches on the trailing sub-matrix of each step with a global work
    offset that follows the host loop (get_global_id(d) = offset + group * size + local id,
    get_global_offset(d) the offset): the loop stays symbolic and the UAR has exactly the
    brute-force dependences; a launch with an offset feeds one without, work-item by
    work-item."""
    d = PROGRAMS / "global_offset"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"), argv=["7"])
    ratio, update, rsum, scale = program.launches
    k = sympy.Symbol("k")
    assert [lp.iterator for lp in update.loops] == ["k"]
    assert update.global_offset == (k + 1, k + 1)
    assert rsum.global_offset == (1,) and scale.global_offset is None
    widths = check_against_oracle(program)
    assert _edge(widths, "row_sum", "row_scale", program) == "thread"
    assert _edge(widths, "col_ratio", "trail_update", program) == "global"


def test_global_work_offsets_fuse_and_verify(tmp_path: Path, capsys: Any) -> None:
    """The offset launch and the one without it fuse into one kernel that re-indexes the
    first's work-items (its global ids are shifted by the offset); the fused program computes
    what the original does."""
    d = PROGRAMS / "global_offset"
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", str(d / "kernels.cl"), "--host", str(d / "host.c"),
                            "--args", "7", "--out", str(out), "--verify")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["verified"]["ok"] is True
    fused = (out / "fused.cl").read_text()
    assert "#3 row_sum, #4 row_scale" in fused


def test_template_bool_argument_decides_the_build_options() -> None:
    """``scaleTest<T, true>(...)`` called in another template's body (an overload set there):
    its explicit template arguments give the callee's hidden parameters, so
    ``if (shift) flags += " -DUSE_SHIFT"`` is decided per call (it was an unknown value and the
    build options were refused), and each build is its own kernel."""
    d = PROGRAMS / "template_flags"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.cpp"), argv=["16"])
    shifted, plain = program.launches
    assert "-DUSE_SHIFT" in program.kernels[shifted.kernel].build_options
    assert "-DUSE_SHIFT" not in program.kernels[plain.kernel].build_options
    assert "-DREAL=float" in program.kernels[plain.kernel].build_options
    widths = check_against_oracle(program)
    assert _edge(widths, shifted.kernel, plain.kernel, program) == "thread"


def test_virtual_calls_fuse_and_verify(tmp_path: Path, capsys: Any) -> None:
    d = PROGRAMS / "virtual_dispatch"
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", str(d / "kernels.cl"), "--host", str(d / "host.cpp"),
                            "--args", "64", "--out", str(out), "--verify")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["launches_before"] == 7 and plan["launches_after"] < 7
    assert plan["verified"]["ok"] is True


def test_host_loop_without_opencl_calls_runs_concretely_when_it_fits_the_nest_budget() -> None:
    """One rule for host-only loops: when the symbolic pass loses what the loop computes (a
    table filled entry by entry, a count decided per iteration, a count carried from one
    iteration to the next) and its trip count times the inner iterations of one pass fits
    the loop nest's budget, its iterations run one by one; a nest that does not fit stays
    symbolic and what it computed is a parameter named after its variable."""
    from polyfuse.frontend.host import loops

    d = PROGRAMS / "host_loop_rule"

    def load(**kw: Any) -> Program:
        return load_opencl(str(d / "kernels.cl"), host=str(d / "main.c"), **kw)

    # sizes[47] = 512, 34 multiples of 3 below 100 count 2 each, 2 rounds x 100 steps,
    # levels[0][2] = 32 / 8
    assert [ln.global_size for ln in load().launches] == [(784,), (784,)]
    fits = loops.NEST_BUDGET // 100  # rounds of 100 inner iterations the budget runs
    program = load(defines={"ROUNDS": str(fits)})
    assert program.launches[0].global_size == (584 + 100 * fits,)
    program = load(defines={"ROUNDS": str(fits + 1)})
    steps = sympy.Symbol("steps")
    assert program.params == ("steps",)
    assert program.launches[0].global_size == (steps + 584,)
    bound = load(defines={"ROUNDS": str(fits + 1)}, params={"steps": 100 * (fits + 1)})
    assert bound.launches[0].global_size == (584 + 100 * (fits + 1),)


def test_kernel_name_copied_into_a_buffer_at_run_time() -> None:
    """``strcpy(kernel_name, kernel_name_tiled)`` from a char array initialised with a string
    literal, chosen by a switch on an option: the kernel is the one the copied text names;
    where the option is not known, the refusal names the condition that decides the text."""
    d = PROGRAMS / "kernel_name_copy"

    def kernel(argv: Optional[list[str]]) -> str:
        program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"), argv=argv)
        (launch,) = program.launches
        return launch.kernel

    assert kernel([]) == "scale_rows"
    assert kernel(["-t"]) == "scale_tiled"
    host = (d / "host.c").read_text().splitlines()
    switch = next(i + 1 for i, t in enumerate(host) if "switch (kernel_type)" in t)
    with pytest.raises(UnsupportedError, match=rf"kernel_name.*written differently on the "
                       rf"paths of the condition at .*host.c:{switch}"):
        kernel(None)


def test_function_template_makes_vectors_and_buffers_from_their_iterators() -> None:
    """In a function template's generic body (PRK's run<T>), ``std::vector<T> h(n)`` is a
    vector of n elements of sizeof(T) bytes and ``cl::Buffer(context, begin(h), end(h),
    readOnly)`` a buffer copied from it: the launch binds those buffers."""
    program = load_opencl(None, host=str(HANDSON / "template_run.cpp"),
                          include_dirs=[str(CPP_COMMON)])
    (launch,) = program.launches
    assert launch.kernel == "vadd" and launch.global_size == (32,)
    assert [launch.arg(i).buffer for i in range(3)] == ["d_a", "d_b", "d_c"]
    assert {n: b.size for n, b in program.buffers.items()} == {"d_a": 128, "d_b": 128,
                                                                "d_c": 128}


def test_descending_host_loop_stays_symbolic() -> None:
    """``for (t = length - 2; t >= 0; t--)`` (a backward sweep) counts up with ``t = length -
    2 - k``: one launch in a host loop of length - 1 iterations, its offset decreasing, the
    dependences between the iterations those of the unrolled sweep; -1 after the loop."""
    d = PROGRAMS / "backward_sweep"
    program = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"), argv=[])
    (launch,) = program.launches
    (loop,) = launch.loops
    k = sympy.Symbol(loop.iterator)
    assert (loop.lower, loop.upper) == (0, 5)
    assert sympy.expand(launch.arg(1).value - (64 - 16 * k)) == 0
    check_against_oracle(program)
    long = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"), argv=["2000"])
    assert len(long.launches) == 1 and long.launches[0].loops[0].upper == 1999


def test_integer_digest_drawn_at_random_is_verified_like_data(monkeypatch: Any, tmp_path: Path,
                                                              capsys: Any) -> None:
    """An integer scalar the host computes from ``rand()`` (a digest to search for, SHOC's
    MD5Hash) that the kernel only compares with data is drawn at random for --verify, the
    same for the fused and unfused runs; one the kernel indexes with stays refused, naming
    the ``--param`` that gives it."""
    import json
    import shutil

    monkeypatch.chdir(PROGRAMS / "key_search")
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", "host.c", "--out", str(out), "--verify")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["launches_before"] == 2 and plan["verified"]["ok"] is True

    shutil.copy(PROGRAMS / "key_search" / "host.c", tmp_path / "host.c")
    kernels = (PROGRAMS / "key_search" / "k.cl").read_text()
    monkeypatch.chdir(tmp_path)
    # an affine subscript (in the model) and a non-affine one (over-approximated there)
    for use in ("if (i == 0) found[digest] = hashes[i];",
                "found[i] = hashes[(i * digest) % 1024];"):
        (tmp_path / "k.cl").write_text(kernels.replace(
            "found[i] = (i < n && hashes[i] == digest) ? i : -1;", use))
        code, _, err = _run_cli(capsys, "fuse", "--host", "host.c", "--out",
                                str(tmp_path / "o2"), "--verify")
        assert code != 0 and "--param digest=" in err, (use, err)


def test_cpp_device_loop_and_template_vectors_answered_by_the_verifying_device(
        monkeypatch: Any, tmp_path: Path, capsys: Any) -> None:
    """A PRK-style C++ host runs a function template once per CPU/GPU device of every
    platform: with --verify, ``cl::Platform::get``, ``getDevices`` and ``getInfo<CL_...>()``
    are answered by the verifying device, the range-for loops over the wrapper's vectors run
    once per element, and the template's ``std::vector<T>`` and the buffers made from its
    iterators (``cl::Buffer(ctx, begin(v), end(v), false)``, ``cl::copy``) have their sizes:
    two launches in single precision, two more where the device has cl_khr_fp64."""
    import json

    from polyfuse.runtime.execute import device_queries

    monkeypatch.chdir(PROGRAMS / "device_loop_cpp")
    has64 = "cl_khr_fp64" in str(device_queries().device_info(0x1030))
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", "host.cpp", "-I", str(CPP_COMMON),
                            "--args", "256", "--out", str(out), "--verify")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["launches_before"] == (4 if has64 else 2) and plan["verified"]["ok"] is True
    # without a device to answer, the number of devices is not known: refused, not guessed
    code, _, err = _run_cli(capsys, "fuse", "--host", "host.cpp", "-I", str(CPP_COMMON),
                            "--args", "256", "--out", str(tmp_path / "o2"))
    assert code != 0 and "host.cpp:" in err, err


def test_option_values_split_into_vectors_returned_by_value_make_build_options(
        monkeypatch: Any, tmp_path: Path, capsys: Any) -> None:
    """SHOC's option parser: ``"-l 4,2"`` is split character by character (``tmp +=
    buff[i]``) into a ``std::vector<std::string>`` returned by value, each token parsed by a
    ``std::stringstream`` into a ``std::vector<long long>(0)`` temporary's copy; the tile it
    gives defines the kernel's macros through a ``std::ostringstream`` and sizes the launch."""
    import json

    monkeypatch.chdir(PROGRAMS / "vector_options")
    program = load_opencl(None, host="host.cpp", argv=["-l", "4,2"])
    assert {"-DLROWS=4", "-DLCOLS=2"} <= set(program.kernels["tile"].build_options)
    assert [lc.global_size for lc in program.launches] == [(512,), (512,)]
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", "host.cpp", "--args", "-l 4,2", "--out",
                            str(out), "--verify")
    assert code == 0, err
    assert json.loads((out / "plan.json").read_text())["verified"]["ok"] is True


def test_a_program_operator_template_leaves_the_library_stream_operators_alone(
        monkeypatch: Any) -> None:
    """SHOC Stencil2D: the program's own ``template<class T> std::ostream&
    operator<<(std::ostream&, const Matrix2D<T>&)`` took the library's ``operator<<`` name,
    so ``opts << "-DLROWS="`` (and ``s << '\\t'`` in its own body) called the program's
    template and the build options became unknown."""
    monkeypatch.chdir(PROGRAMS / "stream_operator")
    program = load_opencl(None, host="host.cpp")
    assert {"-DLROWS=8", "-DLCOLS=4", "-DSINGLE_PRECISION"} <= \
        set(program.kernels["tile"].build_options)
    assert [lc.global_size for lc in program.launches] == [(2048,)]


def test_class_template_objects_made_in_a_function_template_reach_their_methods(
        monkeypatch: Any, tmp_path: Path, capsys: Any) -> None:
    """SHOC Stencil2D: ``DoTest<T>`` sizes its matrix by a static method of a class template
    (``StencilFactory<T>::GetStandardProblemSize(n)``), declares ``Matrix2D<T> data(rows,
    cols)`` (a class template whose constructor has a default argument), calls
    ``(*testStencil)(data, n)``
    through the base class's pure virtual ``operator()(Matrix2D<T>&, unsigned)``: the object
    is built by that constructor and passed by reference, so the launch size and the buffer
    sizes the methods compute are known."""
    monkeypatch.chdir(PROGRAMS / "template_objects")
    program = load_opencl(None, host="host.cpp")
    assert [lc.global_size for lc in program.launches] == [(512,)]
    assert {b.size for b in program.buffers.values()} == {2048}
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", "host.cpp", "--out", str(out), "--verify")
    assert code == 0, err
    assert json.loads((out / "plan.json").read_text())["verified"]["ok"] is True


IMAGE_PATH_OPTIONS = """
    cl_bool images = CL_FALSE;
    size_t width = 0;
    char opts[64] = "";
    clGetDeviceInfo(NULL, CL_DEVICE_IMAGE_SUPPORT, sizeof(images), &images, NULL);
    clGetDeviceInfo(NULL, CL_DEVICE_IMAGE2D_MAX_WIDTH, sizeof(width), &width, NULL);
    if (images) {
        cl_image_format fmt;
        fmt.image_channel_order = CL_R;
        fmt.image_channel_data_type = CL_FLOAT;
        cl_mem img = clCreateImage2D(ctx, CL_MEM_READ_ONLY, &fmt, width, 1, 0, NULL, &err);
        clReleaseMemObject(img);
        sprintf(opts, "-DUSE_TEXTURE -DMAX_IMG_WIDTH=%ld", (long)width);
    }
    const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    clBuildProgram(prog, 0, NULL, opts, NULL, NULL);"""


class _DeviceWithImages(_DeviceOfType):
    """A device that answers only ``CL_DEVICE_IMAGE_SUPPORT``."""

    def device_info(self, param: int) -> Any:
        return self.device_type if param == 0x1016 else None


def test_an_image_path_chosen_by_the_device_is_refused_at_the_image_call(tmp_path: Path
                                                                        ) -> None:
    """SHOC SpMV takes its texture path (an image, ``-DUSE_TEXTURE``) when the device supports
    images: refused at the image call, naming the query and its line and how to go on, not
    later as build options that cannot be determined; a device without images takes the
    buffer path, which is modelled."""
    (tmp_path / "scale.cl").write_text(SCALE_KERNEL)
    host = tmp_path / "host.c"
    host.write_text(SCALE_HOST.replace("SOURCES", IMAGE_PATH_OPTIONS))
    with pytest.raises(UnsupportedError, match=r"host.c:\d+: clCreateImage2D: OpenCL images .* "
                       r"are not modelled by polyfuse; .*CL_DEVICE_IMAGE_SUPPORT\) at "
                       r".*host.c:\d+ with true: verify on a device without image support"):
        load_opencl(None, host=str(host), device_queries=_DeviceWithImages(1))
    plain = load_opencl(None, host=str(host), device_queries=_DeviceWithImages(0))
    assert [lc.kernel for lc in plain.launches] == ["scale"]


def test_polled_event_status_is_complete_and_a_c_tentative_definition_is_the_object(
        monkeypatch: Any) -> None:
    """OpenDwarfs' nqueens: a round waits by polling ``clGetEventInfo(...EXECUTION_STATUS)``
    until ``CL_COMPLETE`` (taken as complete: the loop ends, and the query synchronises),
    reads the last round back when the event (a C unit's tentative definition, ``extern`` in
    the header the C++ unit includes: zero at first) was set by the previous launch, and
    writes a buffer once per device under a ``std::vector<bool>`` flag (value-initialised:
    false) and launches over a width from ``std::vector<int>(devices, n)``."""
    monkeypatch.chdir(PROGRAMS / "event_poll")
    program = load_opencl(None, host=["main.cpp", "timer.c"])
    kinds = [op.kernel if isinstance(op, Launch) else op.kind for op in program.ops]
    assert kinds == ["write", "sync", "fill",
                     "sync", "read", "sync", "fill",
                     "sync", "read", "sync", "fill", "sync"]
    assert [op.arg(2).value for op in program.launches] == [0, 1, 2]
    assert {op.global_size for op in program.launches} == {(64,)}  # vector<int>(1, n)[0]
    widths = check_against_oracle(program)
    assert _edge(widths, "fill", "fill", program, "WAW") == "thread"


def test_small_heap_table_filled_per_iteration_sizes_a_local_argument(monkeypatch: Any) -> None:
    """The Programming Guide's spmv: slab start rows in a ``posix_memalign``'d table of
    ``(nslabs + 1) * 4`` bytes, filled by a counted loop; the tallest slab sizes a
    ``__local`` argument.  Heap memory of a few known bytes is a table (its loop runs
    iteration by iteration), not bulk data left unknown."""
    monkeypatch.chdir(PROGRAMS / "heap_table")
    program = load_opencl(None, host="host.c")
    (launch,) = program.launches
    assert launch.global_size == (256,) and launch.local_size == (64,)
    assert launch.arg(2).value == 64 and launch.arg(3).local_bytes == 256
    check_against_oracle(program)


def test_static_data_members_of_a_class_template_are_one_object_per_specialization(
        monkeypatch: Any, tmp_path: Path, capsys: Any) -> None:
    """SHOC's Matrix2D<T> allocates through ``static PMSMemMgr<T> *pmsmm``, made on first use
    (``if (pmsmm == NULL) pmsmm = new DefaultPMSMemMgr<T>``) and defined per specialization
    in another file (``template<> PMSMemMgr<float> *Matrix2D<float>::pmsmm = 0;``): the call
    through it was refused as made on an object polyfuse did not follow.  Each specialization
    has its own object (the float and double matrices count separately), a generic
    definition gives one per specialization used, and a plain class's static member is one
    global.  Its validater counts mismatches with ``errors.size()`` on a
    ``std::vector<Mismatch<T>>`` in a template: the container's method (it was refused as a
    method of a user's class template)."""
    monkeypatch.chdir(PROGRAMS / "template_statics")
    program = load_opencl(None, host=["main.cpp", "statics.cpp"])
    # float: 2 matrices x 16 x scale 1; double: its own 2 matrices x 16 x scale 2
    assert [lc.global_size for lc in program.launches] == [(32,), (64,)]
    assert sorted(b.size for b in program.buffers.values()) == [1024, 1024, 2048, 2048]
    with pytest.raises(UnsupportedError, match=r"matrix.h:31: the static data member "
                       r"'Matrix::mgr' has no definition in the host files given"):
        load_opencl(None, host="main.cpp")
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", "main.cpp", "--host", "statics.cpp",
                            "--out", str(out), "--verify")
    assert code == 0, err
    assert json.loads((out / "plan.json").read_text())["verified"]["ok"] is True


def _stencil_buffers(program: Program) -> list[tuple[str, str]]:
    return [(lc.arg(0).buffer, lc.arg(1).buffer) for lc in program.launches]


def test_buffers_swapped_through_pointers_and_work_sizes_in_vectors(monkeypatch: Any) -> None:
    """SHOC Stencil2D: ``cl_mem *cur = &buf1`` swapped with ``next`` by ``if (cur == &buf1)``
    (two distinct variables' addresses: decided), work sizes in ``std::vector<size_t>``
    passed as ``&global.front()`` (the launch reads the elements the vector holds then); a
    short loop is unrolled, each launch on the buffers of its step."""
    monkeypatch.chdir(PROGRAMS / "swap_loop")
    program = load_opencl(None, host="host.cpp", argv=["--num-iters", "4"])
    assert _stencil_buffers(program) == [("buf1", "buf2"), ("buf2", "buf1")] * 2
    assert {(lc.global_size, lc.local_size, lc.loops) for lc in program.launches} == \
        {((8, 16), (1, 16), ())}
    read = next(op for op in program.ops if getattr(op, "kind", "") == "read")
    assert [r.buffer for r in read.reads] == ["buf1"]


@pytest.mark.parametrize("iters", [65, 1000])
def test_loop_swapping_two_buffers_stays_symbolic_over_pairs(iters: int, monkeypatch: Any,
                                                           tmp_path: Path, capsys: Any) -> None:
    """A loop of many steps whose state alternates between two values (the buffers swapped
    every step) is kept symbolic over pairs of iterations, not unrolled into ``iters``
    launches (SHOC Stencil2D's 1000 iterations, four times over, were 4000 launches): two
    launches per pair on the buffers of each half, an odd last step after it; exact
    against brute force."""
    monkeypatch.chdir(PROGRAMS / "swap_loop")
    program = load_opencl(None, host="host.cpp", argv=["--num-iters", str(iters)])
    pairs = [lc.loops for lc in program.launches]
    (loop,) = pairs[0]
    assert (loop.lower, loop.upper, loop.step) == (0, iters // 2, 1)
    assert pairs == [(loop,), (loop,)] + [()] * (iters % 2)
    assert _stencil_buffers(program) == [("buf1", "buf2"), ("buf2", "buf1")] + \
        [("buf1", "buf2")] * (iters % 2)
    read = next(op for op in program.ops if getattr(op, "kind", "") == "read")
    assert [r.buffer for r in read.reads] == ["buf2" if iters % 2 else "buf1"]
    if iters < 100:
        check_against_oracle(program)
        return
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", "host.cpp", "--args",
                            f"--num-iters {iters}", "--out", str(out), "--verify")
    assert code == 0, err
    assert json.loads((out / "plan.json").read_text())["verified"]["ok"] is True


@pytest.mark.parametrize("into", ["flags.data()", "&flags[0]", "&flags.front()"])
def test_read_back_into_a_vector_leaves_its_elements_unknown(tmp_path: Path, into: str
                                                            ) -> None:
    """A flag read back from the device into a ``std::vector<int>`` (``flags.data()``, or the
    address of its first element) is the device's data, not the 0 it was made with: the
    launch under it is refused as data-dependent, never silently dropped."""
    (tmp_path / "scale.cl").write_text(SCALE_KERNEL)
    host = SCALE_HOST.replace("#include <stdlib.h>", "#include <stdlib.h>\n#include <vector>")
    host = host.replace("SOURCES", """const char *src = load("scale.cl");
    cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);""")
    host = host.replace("    clFinish(q);", f"""    std::vector<int> flags(1, 0);
    clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof(int), {into}, 0, NULL, NULL);
    if (flags[0] != 0) {{
        clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    }}
    clFinish(q);""")
    (tmp_path / "host.cpp").write_text(host)
    with pytest.raises(UnsupportedError, match=r"launch under data-dependent host condition"):
        load_opencl(None, host=str(tmp_path / "host.cpp"))


# ----------------------------------------------------------------------------------------------
# C++: variadic templates, standard smart pointers, std::array
# ----------------------------------------------------------------------------------------------

VARIADIC = PROGRAMS / "cpp_variadic"


def test_babelstream_style_factory_pack_and_unique_ptr_to_a_class_template() -> None:
    """BabelStream's shape: ``make_stream<T>(args...)`` forwards its parameter pack to
    ``std::make_unique<CLStream<T>>(args...)``, the benchmark calls the kernels through a
    ``std::unique_ptr<Stream<T>>`` (each call runs the override of the class ``make_unique``
    made), the functors are ``new cl::KernelFunctor<..., T, T, T>`` made in the template, a
    value passed as ``T`` keeps what it is (0.1 is no 0), and the size is parsed by a lambda
    that stores it through its parameter (``*output = strtoull(str, ...)``)."""
    program = load_opencl(None, host=str(VARIADIC / "stream.cpp"), argv=["256"])
    init, copy, mul = program.launches
    assert [op.kernel for op in program.launches] == ["init", "copy", "mul"]
    assert all(op.global_size == (256,) for op in program.launches)
    assert [float(init.arg(i).value) for i in (3, 4, 5)] == pytest.approx([0.1, 0.2, 0.0])
    assert [init.arg(i).buffer for i in range(3)] == ["this_d_a", "this_d_b", "this_d_c"]
    assert not init.loops and [lp.upper for lp in copy.loops] == [3] == \
        [lp.upper for lp in mul.loops]
    assert {b.size for b in program.buffers.values()} == {1024}
    widths = check_against_oracle(program)
    assert _edge(widths, "copy", "mul", program) == "thread"


def test_handson_style_variadic_launch_helpers(capsys: Any, tmp_path: Path) -> None:
    """A ``cl::make_kernel`` functor called through a helper that forwards its pack
    (``kernel(cl::EnqueueArgs(...), std::forward<Args>(args)...)``), arguments set by a
    recursion over a pack (the non-variadic overload ends it) and by a fold over ``,``; a
    global size from ``sizeof...(Args)``; fused and verified."""
    program = load_opencl(None, host=str(VARIADIC / "chain.cpp"), include_dirs=[str(CPP_COMMON)])
    vadd, scale, shift = program.launches
    assert [vadd.arg(i).buffer for i in range(3)] == ["d_a", "d_b", "d_c"]
    assert vadd.arg(3).value == 64
    assert [scale.arg(i).buffer for i in range(2)] == ["d_c", "d_d"]
    assert float(scale.arg(2).value) == 2.5 and scale.arg(3).value == 64
    assert [shift.arg(i).buffer for i in range(2)] == ["d_d", "d_e"]
    assert float(shift.arg(2).value) == 0.5
    assert {op.global_size for op in program.launches} == {(64,)}
    widths = check_against_oracle(program)
    assert _edge(widths, "vadd", "scale", program) == "thread"
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", str(VARIADIC / "chain.cpp"), "-I",
                            str(CPP_COMMON), "--out", str(out), "--verify")
    assert code == 0, err
    plan = json.loads((out / "plan.json").read_text())
    assert plan["launches_before"] == 3 and plan["launches_after"] == 1
    assert plan["verified"]["ok"] is True


def test_objects_owned_by_smart_pointers_with_std_array_members() -> None:
    """``std::make_unique<Pipeline>(...)`` runs the constructor, a ``std::shared_ptr`` made by
    ``std::move`` from it is the same object (``->``, ``get()``, ``if (!p)``, ``reset()``),
    and ``std::array<cl_kernel, 2>``/``std::array<cl_mem, 3>`` members are arrays
    (``a[i]``, ``back()``, ``size()``; no initialiser from their template argument)."""
    program = load_opencl(None, host=str(VARIADIC / "owners.cpp"), argv=["128"])
    add1, twice = program.launches
    assert (add1.kernel, twice.kernel) == ("add1", "twice")
    assert [add1.arg(i).buffer for i in range(2)] == ["this_bufs_0", "this_bufs_1"]
    assert [twice.arg(i).buffer for i in range(2)] == ["this_bufs_1", "this_bufs_2"]
    assert add1.global_size == (128,) and [lp.upper for lp in add1.loops] == [2]
    assert {b.size for b in program.buffers.values()} == {512}
    check_against_oracle(program)


def test_sizes_read_from_a_parameter_file_with_ifstream(monkeypatch: Any) -> None:
    """``std::ifstream in(path); in >> *nx;`` of a file that is there reads its words like a
    string stream, and ``while (in >> x >> y >> s)`` ends when an extraction fails; the sizes
    and the step count come from the file.  Without the file the count is refused naming the
    ``--param`` that gives it."""
    monkeypatch.chdir(PROGRAMS / "ifstream_params")
    program = load_opencl(None, host="host.cpp", include_dirs=[str(CPP_COMMON)],
                          argv=["board.dat", "board.params"])
    launches = program.launches
    assert len(launches) == 3 and {op.global_size for op in launches} == {(32, 8)}
    assert [(op.arg(0).buffer, op.arg(1).buffer) for op in launches] == [
        ("tick", "tock"), ("tock", "tick"), ("tick", "tock")]
    assert launches[0].arg(2).value == 32 and launches[0].arg(3).value == 8
    assert {b.size for b in program.buffers.values()} == {256}
    check_against_oracle(program)
    with pytest.raises(UnsupportedError, match=r"--param steps="):
        load_opencl(None, host="host.cpp", include_dirs=[str(CPP_COMMON)],
                    argv=["board.dat", "missing.params"])


def test_kernel_argument_read_back_from_the_device_is_named_where_it_is_read(
        tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    """A histogram-style host reads the data's span back from the device and passes it to the
    next kernel: verifying without a value refuses naming the ``clSetKernelArg`` line, the
    read-back's line and the ``--param`` that goes on; with the values it verifies."""
    monkeypatch.chdir(PROGRAMS / "range_readback")
    out = tmp_path / "out"
    code, _, err = _run_cli(capsys, "fuse", "--host", "main.c", "--out", str(out), "--verify")
    assert code != 0 and "Traceback" not in err
    assert "scalar argument lo is unknown (set at main.c:53 to read back from the device by " \
           "clEnqueueReadBuffer at main.c:47): pass --param lo=VALUE" in err, err
    code, _, err = _run_cli(capsys, "fuse", "--host", "main.c", "--param", "lo=5", "--param",
                            "hi=204", "--out", str(out), "--verify")
    assert code == 0, err
    assert json.loads((out / "plan.json").read_text())["verified"]["ok"] is True
