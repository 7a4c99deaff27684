"""Auto-parallelization of plain C (polyfuse.autopar): end to end against gcc, and every loop
mapped onto the NDRange checked against brute-force dependence enumeration.

The brute-force check does not use isl: a tiny evaluator walks the region's syntax tree at small
sizes, records every (statement instance, array element, read/write), and looks for two accesses
to one element, one a write, from instances with equal host-loop iterators and different values
of the parallel loop's iterator.  Under CI (``CI=true``) missing OpenCL headers or library fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pycparser import c_ast

from polyfuse.autopar import parallelize as P
from polyfuse.autopar import parallelize_file, summary_text

KDIR = Path(__file__).parent / "autopar_kernels"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

#: per program: small sizes (-D), and integer values of the kernel functions' parameters at
#: those sizes (for the brute-force check)
PROGRAMS: dict[str, dict[str, Any]] = {
    "gemm": {"defines": {"NI": "13", "NJ": "11", "NK": "9"},
             "params": {"ni": 5, "nj": 4, "nk": 3}},
    "jacobi1d": {"defines": {"N": "40", "TSTEPS": "5"}, "params": {"n": 8, "tsteps": 3}},
    "jacobi2d": {"defines": {"N": "20", "TSTEPS": "4"}, "params": {"n": 6, "tsteps": 3}},
    "trisolv": {"defines": {"N": "30"}, "params": {"n": 6}},
    "dot": {"defines": {"N": "100", "M": "7"}, "params": {"n": 6, "m": 4}},
    "atax": {"defines": {"M": "17", "N": "19"}, "params": {"m": 5, "n": 6}},
    "bicg": {"defines": {"M": "17", "N": "19"}, "params": {"m": 5, "n": 6}},
    "polybench_gesummv": {"defines": {"N": "23"}, "params": {"n": 6}},
    "mixed": {"defines": {"N": "50"}, "params": {"n": 7}},
}


def _opencl_available() -> str:
    """'' if OpenCL headers and library are usable, else why not."""
    if shutil.which("gcc") is None:
        return "gcc not found"
    probe = "#define CL_TARGET_OPENCL_VERSION 120\n#include <CL/cl.h>\n" \
            "int main(void){cl_uint n; return clGetPlatformIDs(0, 0, &n) != CL_SUCCESS;}\n"
    proc = subprocess.run(["gcc", "-x", "c", "-", "-o", os.devnull, "-lOpenCL"], input=probe,
                          text=True, capture_output=True, check=False)
    if proc.returncode != 0:
        return "OpenCL headers/library missing (apt-get install opencl-headers " \
               "ocl-icd-opencl-dev): " + proc.stderr.strip()[-300:]
    return ""


@pytest.fixture(scope="module")
def opencl_toolchain() -> None:
    why = _opencl_available()
    if why:
        if IN_CI:
            pytest.fail(f"CI requires the OpenCL toolchain: {why}")
        pytest.skip(why)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = {}
    base = tmp_path_factory.mktemp("autopar")
    for name, spec in PROGRAMS.items():
        out[name] = parallelize_file(KDIR / f"{name}.c", include_dirs=[str(KDIR)],
                                     defines=spec["defines"], out_dir=base / name)
    return out


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, check=False, timeout=120, **kw)


# ----------------------------------------------------------------------------------------------
# End to end: the generated OpenCL program prints exactly what the original prints
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_generated_program_matches_gcc(name: str, results: dict[str, Any], tmp_path: Path,
                                       opencl_toolchain: None) -> None:
    res = results[name]
    dflags = [f"-D{k}={v}" for k, v in PROGRAMS[name]["defines"].items()]
    orig = tmp_path / "orig"
    par = tmp_path / "par"
    p = _run(["gcc", "-O2", "-std=c99", "-Wall", f"-I{KDIR}", *dflags, "-o", str(orig),
              str(KDIR / f"{name}.c"), "-lm"])
    assert p.returncode == 0, p.stderr.decode()
    p = _run(["gcc", "-O2", "-std=c99", f"-I{KDIR}", *dflags, "-o", str(par),
              str(res.host_path), "-lOpenCL", "-lm"])
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    want = _run([str(orig)])
    got = _run([str(par)])
    assert want.returncode == 0 and got.returncode == 0, got.stderr.decode()[-2000:]
    # %a printing: bit-identical (no reduction is ever reordered, contraction is off)
    assert got.stdout == want.stdout
    assert res.cl_path.read_text() == res.kernels_cl  # the .cl file is what the host embeds
    assert "pf_init()" in res.host_c or not res.kernel_names


# ----------------------------------------------------------------------------------------------
# Brute-force dependence check of every loop mapped onto the NDRange
# ----------------------------------------------------------------------------------------------


class _Eval:
    """Executes a region's control flow on integers and records its memory accesses."""

    def __init__(self, env: dict[str, int]):
        self.env = dict(env)
        self.iters: dict[int, int] = {}  # id(For node) -> current value
        self.acc: list[tuple[int, tuple, bool, dict[int, int]]] = []
        self.private: set[str] = set()

    def val(self, e: Any) -> int:
        if isinstance(e, c_ast.Constant):
            return int(e.value.rstrip("uUlL"), 0)
        if isinstance(e, c_ast.ID):
            return self.env[e.name]
        if isinstance(e, c_ast.UnaryOp) and e.op == "-":
            return -self.val(e.expr)
        if isinstance(e, c_ast.Cast):
            return self.val(e.expr)
        if isinstance(e, c_ast.BinaryOp):
            a, b = self.val(e.left), self.val(e.right)
            if e.op == "/":
                q = abs(a) // abs(b)
                return q if (a >= 0) == (b > 0) else -q
            if e.op == "%":
                return a - b * int(a / b)
            return int({"+": a + b, "-": a - b, "*": a * b, "<": a < b, "<=": a <= b,
                        ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b,
                        "&&": a and b, "||": a or b}[e.op])
        raise NotImplementedError(type(e).__name__)

    def refs(self, e: Any, stmt: Any, write: bool = False) -> None:
        if e is None:
            return
        if isinstance(e, c_ast.ArrayRef):
            subs = []
            base = e
            while isinstance(base, c_ast.ArrayRef):
                subs.append(base.subscript)
                self.refs(base.subscript, stmt)
                base = base.name
            loc = (base.name, *(self.val(s) for s in reversed(subs)))
            self.acc.append((id(stmt), loc, write, dict(self.iters)))
            return
        if isinstance(e, c_ast.ID):
            if e.name not in self.env and e.name not in self.private:
                self.acc.append((id(stmt), (e.name,), write, dict(self.iters)))
            return
        for _, ch in e.children():
            if not (isinstance(e, c_ast.FuncCall) and ch is e.name):
                self.refs(ch, stmt)

    def run(self, node: Any) -> None:
        if isinstance(node, c_ast.Compound):
            for x in node.block_items or []:
                self.run(x)
        elif isinstance(node, c_ast.For):
            init = node.init
            if isinstance(init, c_ast.DeclList):
                it, lb = init.decls[0].name, init.decls[0].init
            else:
                it, lb = init.lvalue.name, init.rvalue
            self.env[it] = self.val(lb)
            nxt = node.next
            step = 1 if isinstance(nxt, c_ast.UnaryOp) else self.val(nxt.rvalue)
            while self.val(node.cond):
                self.iters[id(node)] = self.env[it]
                self.run(node.stmt)
                self.env[it] += step
            self.iters.pop(id(node), None)
        elif isinstance(node, c_ast.If):
            if self.val(node.cond):
                self.run(node.iftrue)
            elif node.iffalse is not None:
                self.run(node.iffalse)
        elif isinstance(node, c_ast.Decl):
            self.private.add(node.name)
            self.refs(node.init, node)
        elif isinstance(node, c_ast.Assignment):
            self.refs(node.rvalue, node)
            if node.op != "=":
                self.refs(node.lvalue, node)
            self.refs(node.lvalue, node, write=True)
        elif isinstance(node, c_ast.UnaryOp):
            self.refs(node.expr, node)
            self.refs(node.expr, node, write=True)


def _conflicts(ev: _Eval, stmts: set[int], host: list[int], loop: int) -> list[tuple]:
    groups: dict[tuple, list[tuple[bool, int]]] = defaultdict(list)
    for sid, loc, write, iters in ev.acc:
        if sid in stmts and loop in iters:
            key = (loc, tuple(iters.get(h) for h in host))
            groups[key].append((write, iters[loop]))
    bad = []
    for key, accs in groups.items():
        values = {v for _, v in accs}
        if any(w for w, _ in accs) and len(values) > 1:
            bad.append((key, sorted(values)))
    return bad


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_parallel_loops_have_no_dependence_bruteforce(name: str, results: dict[str, Any]) -> None:
    res = results[name]
    params = PROGRAMS[name]["params"]
    checked = 0
    for plan in res.plans:
        r = plan.region
        if not set(r.params) <= set(params):
            continue  # a region of main() with other free integers: not enumerated here
        ev = _Eval({k: params[k] for k in r.params})
        for item in r.items:
            ev.run(item)
        assert ev.acc, "the evaluator recorded nothing"
        for k in plan.kernels():
            stmt_ids = {id(s.node) for s in k.stmts}
            host = [id(h.node) for h in k.host_loops]
            for m in k.mapped:
                bad = _conflicts(ev, stmt_ids, host, id(m.node))
                assert not bad, f"{k.name}: loop {m.iterator} (line {m.line}) reported " \
                                f"parallel but {bad[:3]}"
                checked += 1
        # loops reported sequential by the classic test really carry something
        for info in plan.loops.values():
            lp = info.loop
            if info.status != "parallel":
                outer = []
                p = lp.parent
                while p is not None:
                    outer.insert(0, id(p.node))
                    p = p.parent
                stmts = {id(s.node) for s in r.stmts if lp in s.loops}
                assert _conflicts(ev, stmts, outer, id(lp.node)), \
                    f"loop {lp.iterator} at line {lp.line} reported {info.status} but no " \
                    f"dependence crosses it at n={params}"
    if name not in ("trisolv", "dot"):
        assert checked, "no parallel loop was checked"


# ----------------------------------------------------------------------------------------------
# What is found in each program
# ----------------------------------------------------------------------------------------------


def _mapped(res: Any, function: str) -> list[list[str]]:
    return [[m.iterator for m in k.mapped] for p in res.plans if p.region.function == function
            for k in p.kernels()]


def test_gemm_maps_i_and_j(results: dict[str, Any]) -> None:
    res = results["gemm"]
    assert _mapped(res, "gemm") == [["i", "j"]]
    k = res.plans[0].kernels()[0]
    assert k.dim_of(k.mapped[1]) == 0 and k.dim_of(k.mapped[0]) == 1  # innermost on dim 0
    rep = res.report["regions"][0]
    kloop = [lp for lp in rep["loops"] if lp["iterator"] == "k"][0]
    assert kloop["status"] == "reduction" and kloop["carries"][0]["witness"]


def test_jacobi_time_loop_on_host(results: dict[str, Any]) -> None:
    for name, fn, dims in (("jacobi1d", "kernel_jacobi_1d", 1), ("jacobi2d", "kernel_jacobi_2d",
                                                                 2)):
        res = results[name]
        plan = [p for p in res.plans if p.region.function == fn][0]
        assert len(plan.nodes) == 1 and isinstance(plan.nodes[0], P.HostLoopPlan)
        ks = plan.kernels()
        assert len(ks) == 2 and all(len(k.mapped) == dims for k in ks)
        assert all([h.iterator for h in k.host_loops] == ["t"] for k in ks)
        t = [i for i in plan.loops.values() if i.loop.iterator == "t"][0]
        assert t.status == "sequential" and t.carried[0].kind in ("RAW", "WAR", "WAW")
    assert results["jacobi2d"].report["regions"][0]["pragma_scop"] is True


def test_atax_bicg_distribution_and_interchange(results: dict[str, Any]) -> None:
    atax = _mapped(results["atax"], "kernel_atax")
    assert ["j"] in atax and ["i"] in atax  # tmp over i, y over j (interchanged)
    bicg = _mapped(results["bicg"], "kernel_bicg")
    assert ["j"] in bicg and ["i"] in bicg
    plan = [p for p in results["bicg"].plans if p.region.function == "kernel_bicg"][0]
    assert all(not isinstance(n, P.HostCode) for n in plan.nodes)
    infos = {i.loop.line: i for i in plan.loops.values()}
    assert any("distributed" in m for m in infos[16].mapping)


def test_trisolv_and_reductions_reported(results: dict[str, Any]) -> None:
    tri = [p for p in results["trisolv"].plans if p.region.function == "kernel_trisolv"][0]
    st = {i.loop.iterator: i for i in tri.loops.values()}
    assert st["i"].status == "sequential" and st["i"].carried[0].array == "x"
    dot = results["dot"]
    d = [p for p in dot.plans if p.region.function == "dot"][0]
    assert not d.kernels() and list(d.loops.values())[0].status == "reduction"
    assert _mapped(dot, "rowsum") == [["i"]]
    assert "reduction" in summary_text(dot)


def test_unmodellable_region_left_untouched(results: dict[str, Any]) -> None:
    res = results["mixed"]
    note = [n for n in res.notes if n["function"] == "work"][0]
    assert note["line"] == 14 and "idx[i]" in note["construct"]
    assert "c[idx[i]] = a[i] + 1.0;" in res.host_c  # original text kept
    assert _mapped(res, "work") == [["i"]]
    rep = json.loads(res.report_path.read_text())
    assert any(n["line"] == 14 for n in rep["not_scop"])


def test_polybench_vla_pragma_region(results: dict[str, Any]) -> None:
    res = results["polybench_gesummv"]
    plan = [p for p in res.plans if p.region.function == "kernel_gesummv"][0]
    assert plan.region.pragma and plan.region.params == ["n"]
    assert _mapped(res, "kernel_gesummv") == [["i"], ["i", "j"]]
    assert "#pragma scop" not in res.host_c.split("kernel_gesummv")[-1]
    assert "(n + 0)" in res.kernels_cl or "n + 0" in res.host_c
    assert "sqrt(" in res.kernels_cl
    # init/print functions: print_array is not a SCoP (printf); init_array is parallelized
    assert any(n["function"] == "print_array" for n in res.notes)


def test_not_scop_constructs_named() -> None:
    src = """
    void f(int n, double *a, double *b) {
      int i;
      for (i = 0; i < n; i++) { if (a[i] > 0) b[i] = 1; }
      for (i = 0; i < n; i++) b[i] = a[i] * 2;
      while (n > 0) { n--; }
    }
    """
    from polyfuse.autopar import parallelize_source
    res = parallelize_source(src, "f.c")
    rs = res.report["regions"]
    assert len(rs) == 1 and rs[0]["parallelized"] and rs[0]["lines"] == [5, 5]
    assert any("data-dependent condition" in n["construct"] and n["line"] == 4
               for n in res.notes)


def test_program_model_runs_on_device(results: dict[str, Any]) -> None:
    pytest.importorskip("pyopencl")
    from polyfuse.runtime import run_program

    res = results["jacobi1d"]
    prog = res.program
    assert prog is not None, res.program_error
    assert {op.kind for op in prog.host_ops} == {"write", "read"}
    assert all(lp.iterator == "t" for op in prog.launches for lp in op.loops)
    n, ts = 24, 3
    out = run_program(prog, params={"n": n, "tsteps": ts})
    a = out.initial["A"].view(np.float64).copy()
    b = out.initial["B"].view(np.float64).copy()
    for _ in range(ts):
        b[1:n - 1] = 0.33333 * ((a[0:n - 2] + a[1:n - 1]) + a[2:n])
        a[1:n - 1] = 0.33333 * ((b[0:n - 2] + b[1:n - 1]) + b[2:n])
    assert np.array_equal(out.buffers["A"][:n], a[:n])
    assert np.array_equal(out.buffers["B"][:n], b[:n])


def test_statement_extent_skips_literals_and_comments() -> None:
    """The raw-source scanner that finds a region's text ends a statement at its own ``;``:
    not at one inside a string, a character literal, a comment or brackets."""
    from polyfuse.autopar.codegen import skip_statement

    for stmt in ('x = f(a, ";") /* ; */ + g[\';\'];', "y = (a; b) + 1 // ; (\n  + 2;",
                 "for (i = 0; i < n; i++) { a[i] = 0; /* } */ }",
                 "if (c) s = 1; else { s = 2; }"):
        text = "  " + stmt + " z = 3;"
        assert skip_statement(text, 0) == 2 + len(stmt), stmt
