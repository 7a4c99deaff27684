"""Exact kernel feature counts (polyfuse.perf.counts) against brute-force execution.

The oracle runs the kernel with :mod:`polyfuse.oracle.interp` over every work-item of small
NDRanges: global and ``__local`` accesses come from its traces, barriers from its phases, and
statement executions from an instrumented copy of the kernel (each modelled statement also writes
``_pfc[<statement index>]``), times the statement's per-instance op vector.  Symbolic counts are
computed once per kernel and evaluated at two different sizes.

Convention shared with the model: an element read (or written) several times by one statement
instance counts once (``x[i] * x[i]`` is one load: the front-end merges identical references, as a
compiler does), so the oracle drops repeats between two statement markers of a work-item.
"""

from __future__ import annotations

import copy
import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

import islpy as isl
import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pycparser import c_ast

from polyfuse.c import preprocessor, printer
from polyfuse.core import islutil
from polyfuse.core.program import Kernel, KernelContext, PolyfuseError
from polyfuse.frontend.opencl import parse_kernels, specialize
from polyfuse.oracle import interp
from polyfuse.perf import counts as pc
from polyfuse.perf import features

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*/kernels.cl"))
BUF = 1 << 17

# ----------------------------------------------------------------------------------------------
# the oracle
# ----------------------------------------------------------------------------------------------


def instrument(kernel: Kernel) -> str:
    """OpenCL source of ``kernel`` where statement ``i`` also writes ``_pfc[i]`` each time it
    runs (inserted before declarations, comma-joined to expressions)."""
    memo: dict[int, Any] = {}
    fd = copy.deepcopy(kernel.ast, memo)
    parents: dict[int, tuple[Any, str]] = {}

    def walk(node: Any) -> None:
        for name, child in node.children():
            parents[id(child)] = (node, name)
            walk(child)

    walk(fd)

    def mark(i: int) -> c_ast.Node:
        return c_ast.Assignment("=", c_ast.ArrayRef(c_ast.ID("_pfc"), c_ast.Constant("int",
                                                                                    str(i))),
                                c_ast.Constant("int", "0"))

    def put(node: Any, new: Any) -> None:
        parent, name = parents[id(node)]
        m = re.fullmatch(r"(\w+)\[(\d+)\]", name)
        if m:  # by identity: insertions may have shifted the index
            items = getattr(parent, m.group(1))
            items[[id(x) for x in items].index(id(node))] = new
        else:
            setattr(parent, name, new)

    for i, s in enumerate(kernel.statements):
        node = memo[id(s.node)]
        if isinstance(node, c_ast.Decl) and not isinstance(parents[id(node)][0], c_ast.Compound):
            assert node.init is not None and not isinstance(node.init, c_ast.InitList)
            node.init = c_ast.ExprList([mark(i), node.init])  # for (int s = (mark, init); ...)
        elif isinstance(node, c_ast.Decl):
            parent, name = parents[id(node)]
            items = parent.block_items
            items.insert([id(x) for x in items].index(id(node)), mark(i))
        elif isinstance(node, c_ast.Return):
            node.expr = c_ast.ExprList([mark(i), node.expr])
        else:
            put(node, c_ast.ExprList([mark(i), node]))
    extra = preprocessor.parse("__kernel void f(__global int* _pfc) {}", "<x>")
    fdx = [e for e in extra.ext if isinstance(e, c_ast.FuncDef)][0]
    fd.decl.type.args.params.append(fdx.decl.type.args.params[0])
    helpers = features.helper_defs(kernel)
    return "\n".join([printer.opencl_source(h) for h in helpers.values()]
                     + [printer.opencl_source(fd)])


class _OneTrace(interp._Ctx):
    """The interpreter's context with ``__local`` accesses recorded in the global trace."""

    __slots__ = ()

    @property  # type: ignore[override]
    def ltrace(self) -> list:
        return self.trace

    @ltrace.setter
    def ltrace(self, value: list) -> None:
        pass


class Oracle:
    """Brute-force features of one run: per-work-item totals over the whole NDRange."""

    def __init__(self, kernel: Kernel, global_size: tuple[int, ...],
                 local_size: tuple[int, ...], scalars: Mapping[str, int],
                 local_bytes: int = 4096, seed: int = 0):
        ck = interp.compile_kernel(instrument(kernel), kernel.name)
        rng = np.random.default_rng(seed)
        args: dict[str, Any] = {"_pfc": np.zeros(len(kernel.statements) + 1, np.int32)}
        for p in kernel.params:
            if p.pointer and p.address_space == "local":
                args[p.name] = interp.LocalArg(local_bytes)
            elif p.pointer:
                dt = interp.numpy_dtype(interp.type_by_name(p.type))
                if np.issubdtype(dt, np.floating):
                    args[p.name] = rng.uniform(-1, 1, BUF).astype(dt)
                else:
                    args[p.name] = rng.integers(0, 8, BUF).astype(dt)
            else:
                args[p.name] = scalars[p.name]
        ck._ctx.__class__ = _OneTrace  # local accesses into the same, ordered, trace
        run = ck.run(global_size, local_size, args, record_local=True)
        self.run = run
        self.execs: Counter = Counter()
        self.accesses: Counter = Counter()  # (array, load/store) -> element accesses
        self.elements: dict[tuple[str, str], set] = defaultdict(set)
        self.trace: list[tuple] = []  # (wi, array, index, mode), repeats in a statement removed
        segment: dict[Any, set] = defaultdict(set)
        for wi, buf, index, mode in run.accesses:
            if buf == "_pfc":
                self.execs[index] += 1
                segment[wi] = set()
                continue
            if (buf, index, mode) in segment[wi]:
                continue  # the same element read (written) twice by one statement instance
            segment[wi].add((buf, index, mode))
            key = (buf, "load" if mode == "R" else "store")
            self.accesses[key] += 1
            self.elements[key].add(index)
            self.trace.append((wi, buf, index, mode))
        self.group_size = int(np.prod(local_size))
        self.barriers = run.barriers * self.group_size

    def ops(self, kernel: Kernel) -> Counter:
        env = features.TypeEnv(kernel.ast, features.helper_defs(kernel))
        out: Counter = Counter()
        for i, s in enumerate(kernel.statements):
            for key, n in features.statement_ops(s.node, env).ops.items():
                out[key] += n * self.execs[i]
        return out


def check_against(kc: pc.KernelCounts, kernel: Kernel, oracle: Oracle,
                  values: Mapping[str, int]) -> None:
    """Every work-item-granularity count of ``kc`` at ``values`` equals the brute force."""
    ev = kc.evaluate(values)
    exact_domains = all(s.exact_domain for s in kernel.statements)
    got_ops = {(r.op, r.dtype): r.count.value for r in ev.ops}
    want_ops = {k: v for k, v in oracle.ops(kernel).items() if v}
    if exact_domains:
        assert {k: v for k, v in got_ops.items() if v} == want_ops, kernel.name
    else:  # over-approximated: never below the truth (None: unbounded), and flagged
        for k, v in want_ops.items():
            assert k in got_ops and (got_ops[k] is None or got_ops[k] >= v), (k, got_ops)
        assert any(not r.exact for r in ev.ops + ev.mem + ev.sync)
    got_mem: Counter = Counter()
    recs = defaultdict(list)
    for r in ev.mem:
        assert r.granularity == "work-item"
        assert r.count.value is not None or not r.exact, (r, values)
        got_mem[(r.array, r.direction)] += r.count.value if r.count.value is not None \
            else 10**18
        recs[(r.array, r.direction)].append(r)
    for key in set(got_mem) | set(oracle.accesses):
        if exact_domains:
            assert got_mem[key] == oracle.accesses[key], (kernel.name, key, values)
        else:
            assert got_mem[key] >= oracle.accesses[key], (kernel.name, key, values)
        rs = recs.get(key, [])
        if len(rs) == 1 and rs[0].exact and rs[0].footprint is not None and exact_domains:
            assert rs[0].footprint.value == len(oracle.elements[key]), (kernel.name, key)
            if oracle.elements[key]:
                assert rs[0].afr_value == pytest.approx(
                    oracle.accesses[key] / len(oracle.elements[key]))
    bar = [r for r in ev.sync if r.kind.startswith("barrier")]
    if all(r.exact for r in bar):
        assert sum(r.count.value for r in bar) == oracle.barriers, kernel.name
    else:
        vals = [r.count.value for r in bar]
        assert None in vals or sum(vals) >= oracle.barriers
    launch = ev.sync_count("kernel_launch")
    assert launch is not None and launch.count.value == 1


# ----------------------------------------------------------------------------------------------
# the examples: symbolic counts at two sizes against brute force
# ----------------------------------------------------------------------------------------------


def _example_launches() -> list[tuple[str, str]]:
    out = []
    for path in EXAMPLES:
        for name in parse_kernels(str(path)):
            out.append((str(path), name))
    return out


def _host_launch(path: str, name: str) -> Any:
    from polyfuse.frontend.host import load_opencl

    host = Path(path).with_name("host.c")
    prog = load_opencl(path, host=str(host))
    for launch in prog.launches:
        if launch.kernel == name:
            return launch
    return None


def _int(x: Any, default: int) -> int:
    try:
        v = sympy.sympify(x)
    except (sympy.SympifyError, TypeError):
        return default
    if v.free_symbols:
        v = v.subs({s: 1 for s in v.free_symbols})
    return int(v) if v.is_Integer else default


@pytest.mark.parametrize("path,name", _example_launches(),
                         ids=[f"{Path(p).parent.name}:{n}" for p, n in _example_launches()])
def test_examples_match_bruteforce(path: str, name: str) -> None:
    kernel0 = parse_kernels(path)[name]
    launch = _host_launch(path, name)
    assert launch is not None, f"{name} is never launched by the example's host"
    wd = launch.work_dim
    local = tuple(_int(launch.local_size[d], 1) if launch.local_size else 1 for d in range(wd))
    glob = tuple(_int(launch.global_size[d], 64) for d in range(wd))
    # small NDRanges: at most 4 groups along dimension 0 and 2 along the others
    glob = tuple(lz * max(1, min(g // lz, 4 if d == 0 else 2))
                 for d, (g, lz) in enumerate(zip(glob, local)))
    scalars = {}
    local_bytes = 4096
    for p in kernel0.params:
        arg = launch.arg(p.index)
        if arg.kind == "scalar":
            scalars[p.name] = _int(arg.value, 1)
        if arg.kind == "local" and arg.local_bytes is not None:
            local_bytes = _int(arg.local_bytes, 4096)
    pad = (None,) * (3 - wd)
    kernel = specialize(kernel0, KernelContext(local_size=local + pad))
    kc = pc.count_kernel(kernel, subgroup_size=4, granularity="work-item")
    sizes = [(glob, scalars)]
    glob2 = (glob[0] + local[0] if glob[0] // local[0] < 4 else glob[0] - local[0],) + glob[1:]
    sizes.append((glob2, {k: max(1, v // 2) if k != "t" else 2 for k, v in scalars.items()}))
    for gsz, sc in sizes:
        values = dict(sc)
        values.update({f"_gs{d}": gsz[d] for d in range(wd)})
        oracle = Oracle(kernel, gsz, local, sc, local_bytes)
        check_against(kc, kernel, oracle, values)


# ----------------------------------------------------------------------------------------------
# oplib kernels
# ----------------------------------------------------------------------------------------------


def _oplib_case(op: str) -> Optional[tuple[dict, list, list]]:
    """(attrs, input shapes, output shapes) of a small node of ``op``, or None if unknown."""
    from polyfuse.oplib import elementwise, movement

    s = (3, 5)
    if op in elementwise.UNARY or op in elementwise.UNARY_ATTRS or op == "Gelu":
        return {}, [s], [s]
    if op in elementwise.BINARY or op in elementwise.VARIADIC:
        return {}, [s, (1, 5)], [s]
    table: dict[str, tuple[dict, list, list]] = {
        "Where": ({}, [s, s, s], [s]),
        "BatchNormalization": ({"epsilon": 1e-5}, [(2, 3, 4), (3,), (3,), (3,), (3,)],
                               [(2, 3, 4)]),
        "MatMul": ({}, [(3, 4), (4, 5)], [(3, 5)]),
        "Gemm": ({"transB": 1}, [(3, 4), (5, 4), (5,)], [(3, 5)]),
        "Conv": ({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, [(1, 2, 5, 5), (3, 2, 3, 3)],
                 [(1, 3, 5, 5)]),
        "Softmax": ({"axis": -1}, [s], [s]),
        "LayerNormalization": ({"axis": -1}, [s, (5,), (5,)], [s]),
        "ReduceMean": ({"axes": [1], "keepdims": 1}, [s], [(3, 1)]),
        "ReduceSum": ({"axes": [0], "keepdims": 0}, [s], [(5,)]),
        "Transpose": ({"perm": [1, 0]}, [s], [(5, 3)]),
        "Concat": ({"axis": 1}, [s, (3, 2)], [(3, 7)]),
        "Split": ({"axis": 1}, [(3, 4)], [(3, 2), (3, 2)]),
        "Slice": ({"starts": [1], "ends": [5], "axes": [1], "steps": [2]}, [s], [(3, 2)]),
        "Gather": ({"axis": 0}, [s, (2,)], [(2, 5)]),
        "Expand": ({"shape": [2, 3, 5]}, [s], [(2, 3, 5)]),
        "Einsum": ({"equation": "ij,jk->ik"}, [(3, 4), (4, 5)], [(3, 5)]),
        "ReduceMax": ({"axes": [1], "keepdims": 1}, [s], [(3, 1)]),
        "ReduceMin": ({"axes": [0], "keepdims": 0}, [s], [(5,)]),
        "GlobalAveragePool": ({}, [(1, 2, 3, 3)], [(1, 2, 1, 1)]),
        "GlobalMaxPool": ({}, [(1, 2, 3, 3)], [(1, 2, 1, 1)]),
        "AveragePool": ({"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                        [(1, 2, 5, 5)], [(1, 2, 3, 3)]),
        "MaxPool": ({"kernel_shape": [3], "strides": [2]}, [(1, 2, 7)], [(1, 2, 3)]),
        "Pad": ({"pads": [0, 1, 1, 2], "mode": "reflect"}, [s], [(4, 8)]),
        "Resize": ({"mode": "linear", "scales": [1.0, 2.0]}, [s], [(3, 10)]),
    }
    if op in table:
        return table[op]
    if op in movement.COPY_OPS:
        attrs: dict[str, Any] = {"Reshape": {"shape": [5, 3]}, "Flatten": {"axis": 1},
                                 "Cast": {"to": 1}, "Squeeze": {"axes": [0]},
                                 "Unsqueeze": {"axes": [0]}}.get(op, {})
        shp = {"Reshape": [(5, 3)], "Squeeze": [s], "Unsqueeze": [(1, 3, 5)]}.get(op, [s])
        ins = [(1, 3, 5)] if op == "Squeeze" else [s]
        return attrs, ins, shp
    return None


def _op_model(opk: Any) -> Kernel:
    """The model of an operator-library kernel at its launch's sizes."""
    pad = (None,) * (3 - len(opk.global_size))
    assert opk.local_size is not None
    return parse_kernels(opk.source, context=KernelContext(
        local_size=tuple(opk.local_size) + pad, global_size=tuple(opk.global_size) + pad)
    )[opk.name]


def _oplib_ops() -> list[str]:
    try:
        from polyfuse.oplib import SUPPORTED_OPS
    except ImportError:
        return []
    return sorted(SUPPORTED_OPS)


@pytest.mark.parametrize("op", _oplib_ops())
def test_oplib_kernels_match_bruteforce(op: str) -> None:
    from polyfuse.oplib import op_kernel

    case = _oplib_case(op)
    if case is None:
        pytest.fail(f"no small test case for oplib op {op}: add one to _oplib_case")
    attrs, ins, outs = case
    try:
        opk = op_kernel(op, attrs, ins, outs, name=f"k_{op.lower()}")
    except PolyfuseError as err:
        pytest.fail(f"{op}: the test case does not fit the generator: {err}")
    kernel = _op_model(opk)
    kc = pc.count_kernel(kernel, subgroup_size=4, granularity="work-item")
    oracle = Oracle(kernel, tuple(opk.global_size), tuple(opk.local_size), {})
    check_against(kc, kernel, oracle, {})


@pytest.mark.parametrize("op,attrs,ins,outs", [
    ("Softmax", {"axis": -1}, [(3, 21)], [(3, 21)]),  # one step of 16 partials, a tail of 5
    ("Softmax", {"axis": 1}, [(2, 5, 3)], [(2, 5, 3)]),  # elements 3 apart
    ("LayerNormalization", {"axis": -1}, [(3, 7), (7,), (7,)], [(3, 7), (3, 1), (3, 1)]),
    ("ReduceMax", {"axes": [1, 2]}, [(2, 3, 7)], [(2, 1, 1)]),
    ("ReduceSum", {"axes": [2], "keepdims": 0}, [(2, 3, 19)], [(2, 3)]),
])
def test_blocked_row_reductions_match_bruteforce(op: str, attrs: dict, ins: list,
                                                 outs: list) -> None:
    """The CPU's one-work-item-per-row Softmax, LayerNorm and trailing Reduce* (partials,
    tail loops) are counted exactly."""
    from polyfuse.core.program import KERNEL_VARIANTS
    from polyfuse.oplib import op_kernel

    opk = op_kernel(op, attrs, ins, outs, name=f"k_{op.lower()}",
                    variant=KERNEL_VARIANTS["blocked"])
    assert "for (long k = 0;" in opk.source and "barrier" not in opk.source
    kernel = _op_model(opk)
    kc = pc.count_kernel(kernel, subgroup_size=4, granularity="work-item")
    oracle = Oracle(kernel, tuple(opk.global_size), tuple(opk.local_size), {})
    check_against(kc, kernel, oracle, {})


# ----------------------------------------------------------------------------------------------
# generated loop nests: triangular and strided domains, all three granularities
# ----------------------------------------------------------------------------------------------

LOWER0 = ["0", "1", "lid"]
UPPER0 = ["n", "lid + 3", "n - lid"]
LOWER1 = ["0", "i", "lid"]
UPPER1 = ["i", "i + 1", "n", "2 * i - lid"]
GUARDS = ["", "gid < n", "lid % 2 == 0"]


@st.composite
def nests(draw: Any) -> dict[str, Any]:
    depth = draw(st.integers(1, 2))
    return {
        "lo0": draw(st.sampled_from(LOWER0)), "hi0": draw(st.sampled_from(UPPER0)),
        "s0": draw(st.integers(1, 3)),
        "lo1": draw(st.sampled_from(LOWER1)), "hi1": draw(st.sampled_from(UPPER1)),
        "s1": draw(st.integers(1, 3)), "depth": depth,
        "guard": draw(st.sampled_from(GUARDS)),
        "L": draw(st.sampled_from([4, 8])), "sg": draw(st.sampled_from([2, 4, 8])),
        "sizes": [(draw(st.integers(1, 3)), draw(st.integers(0, 9))) for _ in range(2)],
    }


def nest_source(p: dict[str, Any]) -> str:
    body = "acc += w[i * 64 + j] * 2.0f;"
    if p["depth"] == 2:
        body = (f"for (int j = {p['lo1']}; j < {p['hi1']}; j += {p['s1']})\n            "
                + body)
    else:
        body = body.replace("j]", "0]")
    loop = f"for (int i = {p['lo0']}; i < {p['hi0']}; i += {p['s0']})\n        {body}"
    if p["guard"]:
        loop = f"if ({p['guard']}) {{\n        {loop}\n    }}"
    return f"""
__kernel void nest(__global const float* w, __global float* out, const int n)
{{
    int gid = get_global_id(0);
    int lid = get_local_id(0);
    float acc = 0.0f;
    {loop}
    out[gid] = acc;
}}
"""


def _units(oracle: Oracle, L: int, sg: int) -> dict[str, Counter]:
    """Executions of the loop statement, keyed per granularity (instance = index into w)."""
    keys: dict[str, set] = {"work-item": set(), "sub-group": set(), "work-group": set()}
    n = Counter()
    for wi, buf, index, _ in oracle.trace:
        if buf != "w":
            continue
        (g,), (lid,) = wi
        n["work-item"] += 1
        keys["sub-group"].add((g, lid // sg, index))
        keys["work-group"].add((g, index))
    n["sub-group"] = len(keys["sub-group"])
    n["work-group"] = len(keys["work-group"])
    return n


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nests())
def test_generated_nests_all_granularities(p: dict[str, Any]) -> None:
    L, sg = p["L"], p["sg"]
    kernel = specialize(parse_kernels(nest_source(p))["nest"],
                        KernelContext(local_size=(L, None, None)))
    assert all(s.exact_domain for s in kernel.statements)
    by_gran = {g: pc.count_kernel(kernel, subgroup_size=sg, granularity=g)
               for g in pc.GRANULARITIES}
    auto = pc.count_kernel(kernel, subgroup_size=sg)
    for groups, n in p["sizes"]:
        values = {"n": n, "_gs0": groups * L}
        oracle = Oracle(kernel, (groups * L,), (L,), {"n": n})
        check_against(by_gran["work-item"], kernel, oracle, values)
        want = _units(oracle, L, sg)
        for gran, kc in by_gran.items():
            ev = kc.evaluate(values)
            fma = ev.op("fma")
            assert (fma.count.value if fma else 0) == want[gran], (gran, nest_source(p))
            w = [r for r in ev.mem if r.array == "w"]
            assert sum(r.count.value for r in w) == want[gran], (gran, nest_source(p))
        # defaults: ops per sub-group; when no loop bound involves lid, w[...] does not depend
        # on lid → uniform → sub-group (with e.g. i = lid the addresses really are lid-strided)
        ev = auto.evaluate(values)
        assert all(r.granularity == "sub-group" for r in ev.ops)
        w = [r for r in ev.mem if r.array == "w" and r.count.value]
        bounds = (p["lo0"], p["hi0"]) + ((p["lo1"], p["hi1"]) if p["depth"] == 2 else ())
        if not any("lid" in b for b in bounds):
            assert all(r.lid_strides == (0,) and r.granularity == "sub-group" for r in w)
        out = [r for r in ev.mem if r.array == "out"]
        assert [(r.lid_strides, r.gid_strides, r.granularity) for r in out] == \
            [((1,), (L,), "work-item")]
        geo = ev.geometry
        assert geo["work_items"].value == groups * L
        assert geo["work_groups"].value == groups
        assert geo["sub_groups"].value == groups * -(-L // sg)


# ----------------------------------------------------------------------------------------------
# the tiled GEMM of the brief
# ----------------------------------------------------------------------------------------------

GEMM = """
#define TS 16
__kernel void gemm(__global const float* A, __global const float* B, __global float* C,
                   const int M, const int N, const int K)
{
    __local float As[TS][TS];
    __local float Bs[TS][TS];
    int col = get_global_id(0), row = get_global_id(1);
    int lx = get_local_id(0), ly = get_local_id(1);
    float acc = 0.0f;
    for (int t = 0; t < K / TS; t++) {
        As[ly][lx] = A[row * K + t * TS + lx];
        Bs[ly][lx] = B[(t * TS + ly) * N + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++)
            acc += As[ly][k] * Bs[k][lx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[row * N + col] = acc;
}
"""


def test_tiled_gemm_per_work_item_and_totals() -> None:
    k0 = parse_kernels(GEMM)["gemm"]
    kernel = specialize(k0, KernelContext(local_size=(16, 16, None)))
    kc = pc.count_kernel(kernel, subgroup_size=32, granularity="work-item")
    K, M, N = sympy.symbols("K M N", integer=True)
    for m, n, kk in ((32, 48, 64), (16, 32, 160)):
        values = {"M": m, "N": n, "K": kk, "_gs0": n, "_gs1": m}
        ev = kc.evaluate(values)
        per = ev.per_work_item()
        steps = kk // 16
        assert per.op("fma").count.value == kk
        assert per.op("mul") is None and per.op("add") is None
        glob = [r for r in per.mem if r.space == "global"]
        loc = [r for r in per.mem if r.space == "local"]
        assert sum(r.count.value for r in glob if r.direction == "load") == 2 * steps
        assert sum(r.count.value for r in glob if r.direction == "store") == 1
        assert sum(r.count.value for r in loc if r.direction == "load") == 2 * kk
        assert sum(r.count.value for r in loc if r.direction == "store") == 2 * steps
        assert per.sync_count("barrier_local").count.value == 2 * steps
        # totals are the per-work-item counts times M*N work-items
        assert ev.op("fma").count.value == kk * m * n
        assert ev.sync_count("barrier_local").count.value == 2 * steps * m * n
        assert ev.geometry["work_items"].value == m * n
    # symbolic: K multiples of 16 give exactly K*M*N fma (work-items = _gs0*_gs1)
    expr = kc.op("fma").count.expr
    gs0, gs1 = sympy.symbols("_gs0 _gs1", integer=True)
    assert sympy.simplify(expr.subs({K: 64, gs0: 32, gs1: 16}) - 64 * 32 * 16) == 0
    # with the sizes known, the loads are affine: strides and AFR as in Stevens & Klöckner
    ks = specialize(k0, KernelContext(local_size=(16, 16, None), global_size=(64, 64, None),
                                      values=(("K", 64), ("M", 64), ("N", 64))))
    kcs = pc.count_kernel(ks, subgroup_size=32)
    a = [r for r in kcs.mem if r.array == "A"][0]
    b = [r for r in kcs.mem if r.array == "B"][0]
    assert (a.lid_strides, a.gid_strides) == ((1, 64), (0, 16 * 64))
    assert (b.lid_strides, b.gid_strides) == ((1, 64), (16, 0))
    assert a.afr_value == 64 // 16 and b.afr_value == 64 // 16
    assert a.granularity == "work-item"
    assert kcs.op("fma").granularity == "sub-group"
    assert kcs.op("fma").count.value == 64 * 64 * 64 // 32


# ----------------------------------------------------------------------------------------------
# op counting conventions, sympy conversion, errors, JSON/table, programs
# ----------------------------------------------------------------------------------------------


def _ops_of(src: str) -> dict[tuple[str, str], int]:
    kernel = specialize(parse_kernels(src)["f"], KernelContext(local_size=(1, None, None)))
    kc = pc.count_kernel(kernel, subgroup_size=1, granularity="work-item").evaluate(
        {"_gs0": 1})
    return {(r.op, r.dtype): r.count.value for r in kc.ops}


def test_op_conventions() -> None:
    src = """
    static float sig(float v) { return 1.0f / (1.0f + exp(-v)); }
    __kernel void f(__global float* x, __global double* y) {
        int i = get_global_id(0);
        float a = x[i], b = x[i + 1];
        x[i] = a * b + 2.0f * a * b - a / b + sig(a) + (a > b ? a : b * 3.0f);
        y[i] = y[i] * 2.0 + (1.0 / 3.0) + fmax(y[i], 0.0);
        x[i + 2] = mad(a, b, a) + (float)(i * 2) * 1.5f;
    }
    """
    ops = _ops_of(src)
    f32, f64 = "float32", "float64"
    # a*b + (2*a*b): fma + mul(2*a) + mul(*b)... see features docstring
    # line 1: a*b + (2*a)*b fuses one product (fma), the other two products stay mul;
    # b*3.0f is a mul; "- a/b", "+ sig", "+ ?:" and sig's "1 + exp" are adds
    # line 3: mad(...) is an fma, "(float)(i*2) * 1.5f + mad" fuses into another
    assert ops[("fma", f32)] == 3
    assert ops[("mul", f32)] == 3
    assert ops[("add", f32)] == 4
    assert ops[("div", f32)] == 2  # a/b and 1/(1+exp) in sig
    assert ops[("func:exp", f32)] == 1 and ops[("neg", f32)] == 1
    assert ops[("cmp", f32)] == 1
    # y*2.0 + 1/3 is an fma (1.0/3.0 is folded), + fmax(...) an add
    assert ops[("fma", f64)] == 1 and ops[("add", f64)] == 1
    assert ops[("func:fmax", f64)] == 1
    assert ("div", f64) not in ops and ("mul", f64) not in ops


def test_fma_pairs_each_product_once() -> None:
    ops = _ops_of("__kernel void f(__global float* x) { int i = get_global_id(0);"
                  " x[i] = x[i] * x[i+1] + x[i+2] * x[i+3]; }")
    assert ops == {("fma", "float32"): 1, ("mul", "float32"): 1}


def test_pwqp_to_sympy() -> None:
    pw = isl.Set("[n, m] -> { [i, j] : 0 <= i < n and 0 <= j <= i and j < m }").card()
    e = pc.pwqp_to_sympy(pw)
    n, m = sympy.symbols("n m", integer=True)
    for nv in range(0, 7):
        for mv in range(0, 7):
            want = sum(1 for i in range(nv) for j in range(i + 1) if j < mv)
            assert e.subs({n: nv, m: mv}) == want
            assert pc.Count.of(pw).evaluate({"n": nv, "m": mv}).value == want
    one = pc.pwqp_to_sympy(isl.Set("[n] -> { [i] : 0 <= i < 4 }").card())
    assert one == 4
    fl = pc.pwqp_to_sympy(isl.Set("[n] -> { [i] : 0 <= 3i < n }").card())
    assert fl.has(sympy.ceiling)  # isl's floor((n + 2)/3), shown as ceiling(n/3)


def test_missing_barvinok(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(isl.Set, "card", raising=True)
    k = parse_kernels("__kernel void f(__global float* x) { x[get_global_id(0)] = 1.0f; }")["f"]
    with pytest.raises(PolyfuseError, match="islpy-barvinok"):
        pc.count_kernel(k, subgroup_size=32)


def test_non_affine_access_is_counted_and_flagged() -> None:
    src = """__kernel void f(__global const int* idx, __global const float* a,
                             __global float* o, const int n) {
        int i = get_global_id(0);
        if (i < n) o[i] = a[idx[i]];
    }"""
    k = specialize(parse_kernels(src)["f"], KernelContext(local_size=(8, None, None)))
    kc = pc.count_kernel(k, subgroup_size=4, granularity="work-item").evaluate(
        {"n": 13, "_gs0": 16})
    a = [r for r in kc.mem if r.array == "a"]
    assert len(a) == 1 and not a[0].exact and a[0].reason
    assert a[0].count.value == 13 and a[0].lid_strides == (None,) and a[0].afr is None
    oracle = Oracle(k, (16,), (8,), {"n": 13})
    check_against(pc.count_kernel(k, subgroup_size=4, granularity="work-item"), k, oracle,
                  {"n": 13, "_gs0": 16})


def test_unit_groups_strides_are_symbolic() -> None:
    k = parse_kernels("__kernel void f(__global float* x, const int n) {"
                      " int i = get_global_id(0); if (i < n) x[2 * i] = 1.0f; }")["f"]
    kc = pc.count_kernel(k, subgroup_size=8)
    (r,) = kc.mem
    assert r.lid_strides == (2,)
    assert str(r.gid_strides[0]) == "2*_ls0"
    assert kc.geometry["work_groups"].expr == sympy.Symbol("_gs0", integer=True) / \
        sympy.Symbol("_ls0", integer=True)


def test_count_report_and_table() -> None:
    path = str(ROOT / "examples" / "gemm_bias_relu_transpose" / "kernels.cl")
    rep = pc.count_report(path, kernel="bias_relu", params={"M": 4, "N": 8, "_gs0": 32})
    (k,) = rep["kernels"]
    assert k["kernel"] == "bias_relu"
    assert {"dtype", "op", "granularity", "count", "value"} <= set(k["ops"][0])
    m = k["mem"][0]
    assert {"space", "dtype", "direction", "lid_strides", "gid_strides", "afr", "granularity",
            "count"} <= set(m)
    assert set(k["sync"]) == {"barrier_local", "barrier_global", "kernel_launch"}
    assert all("value" in r for r in k["ops"])
    table = pc.format_count_table(rep)
    assert "bias_relu" in table and "kernel_launch" in table
    host = str(ROOT / "examples" / "gemm_bias_relu_transpose" / "host.c")
    rep = pc.count_report(path, host=host)
    ids = [e["id"] for e in rep["launches"]]
    assert len(ids) == 3
    gemm = rep["launches"][0]
    assert gemm["kernel"] == "gemm"
    fma = [r for r in gemm["ops"] if r["op"] == "fma"][0]
    assert fma["value"] == 64 * 64 * 64 // fma_sg(gemm)
    assert gemm["sync"]["kernel_launch"]["value"] == 1
    assert "launch" in pc.format_count_table(rep)


def fma_sg(entry: Mapping[str, Any]) -> int:
    return int(entry["subgroup_size"])


def test_count_program_host_loops() -> None:
    from polyfuse.frontend.host import load_opencl

    d = ROOT / "examples" / "lstm_cell"
    prog = load_opencl(str(d / "kernels.cl"), host=str(d / "host.c"))
    counts = pc.count_program(prog, subgroup_size=32, granularity="work-item")
    for launch in prog.launches:
        kc = counts[launch.id]
        trips = 1
        for lp in launch.loops:
            trips *= int((sympy.sympify(lp.upper) - lp.lower) / lp.step)
        assert kc.sync_count("kernel_launch").count.value == trips
    # lstm_cell: per instance, 3 sigmoids (exp) per work-item j < hidden
    cell = [launch for launch in prog.launches if launch.kernel == "lstm_cell"][0]
    hidden = _int(cell.arg(4).value, 0)
    exp = counts[cell.id].op("func:exp")
    assert exp is not None and exp.count.value == 3 * hidden * trips


def test_evaluate_partial_keeps_symbols() -> None:
    k = parse_kernels(GEMM)["gemm"]
    k = specialize(k, KernelContext(local_size=(16, 16, None)))
    kc = pc.count_kernel(k, subgroup_size=32).evaluate({"K": 32})
    assert kc.op("fma").count.value is None
    js = kc.to_json({"K": 32, "M": 16, "N": 16, "_gs0": 16, "_gs1": 16})
    assert [r["value"] for r in js["ops"] if r["op"] == "fma"] == [16 * 16 * 32 // 32]


def test_count_report_params_fix_local_size_exactly() -> None:
    """``count`` without a host and every size by ``--param``: exact, as with the host (the
    symbolic model with an unknown local size is an upper bound; evaluating it at the sizes used
    to over-count the tiled GEMM's store of C by the local size, 256x)."""
    path = str(ROOT / "examples" / "gemm_bias_relu_transpose" / "kernels.cl")
    sizes = {"M": 32, "N": 48, "K": 32, "_gs0": 48, "_gs1": 32, "_ls0": 16, "_ls1": 16}
    rep = pc.count_report(path, kernel="gemm", params=sizes, subgroup_size=8,
                          granularity="work-item")
    (entry,) = rep["kernels"]
    got = {(r["array"], r["direction"]): r["value"] for r in entry["mem"]
           if r["space"] == "global"}
    assert all(r["exact"] for r in entry["mem"])
    kernel = parse_kernels(path)["gemm"]
    oracle = Oracle(kernel, (48, 32), (16, 16), {"M": 32, "N": 48, "K": 32})
    want = {k: v for k, v in oracle.accesses.items() if k[0] in ("A", "B", "C")}
    assert got == want
    assert got[("C", "store")] == 32 * 48
    barriers = entry["sync"]["barrier_local"]["value"]
    assert barriers == oracle.barriers
    # without the local size, the count is flagged as an upper bound, never below the truth
    rep = pc.count_report(path, kernel="gemm", params={k: v for k, v in sizes.items()
                                                       if not k.startswith("_ls")},
                          subgroup_size=8, granularity="work-item")
    store = [r for r in rep["kernels"][0]["mem"] if r["array"] == "C"][0]
    assert not store["exact"] and "value" not in store or store["value"] >= 32 * 48
    table = pc.format_count_table(rep)
    assert "afr = access-to-footprint ratio" in table and "<= " in table


def test_piecewise_pieces_that_agree_are_merged() -> None:
    pw = isl.PwQPolynomial("[a, b] -> { (a * a) : a = b; (a * b) : a > b }")
    assert str(pc.pwqp_to_sympy(pw)) == "Piecewise((a*b, a >= b), (0, True))"
    n = sympy.Symbol("n", integer=True)
    assert islutil.floor_expr((n + 7) / 8) == sympy.ceiling(n / 8)
    assert islutil.floor_expr((n + 15) / 8) == sympy.ceiling(n / 8) + 1
    assert islutil.floor_expr((2 * n + 3) / 4) == sympy.floor((2 * n + 3) / 4)


def test_real_size_blocked_product_footprints_are_bounded(monkeypatch) -> None:
    """A register-blocked product at BERT-base size: barvinok's count of its access ranges
    (one disjunct per column of the block, with floor divisions) took minutes per kernel;
    coalesced first it is exact at once, and past the operation quota the footprint is that
    of a containing polyhedron: an upper bound, close for whole matrices."""
    from polyfuse.core.program import KERNEL_VARIANTS
    from polyfuse.oplib import op_kernel

    m, k, n = 128, 768, 768
    opk = op_kernel("MatMul", {}, [(m, k), (k, n)], [(m, n)], name="k_product",
                    variant=KERNEL_VARIANTS["blocked"])
    kernel = _op_model(opk)
    exact = {"a": m * k, "b": k * n, "y": m * n}

    def footprints() -> dict[str, int]:
        kc = pc.count_kernel(kernel, subgroup_size=8)
        return {r.array: r.footprint.value for r in kc.mem if r.space == "global"
                and r.footprint is not None}

    assert footprints() == exact
    monkeypatch.setattr(pc, "coalesce", lambda s: s)  # the exact count overruns its quota
    monkeypatch.setattr(pc, "FOOTPRINT_OPERATIONS", 200_000)
    bounds = footprints()
    assert set(bounds) == set(exact), bounds
    for array, value in bounds.items():  # an upper bound, within a block row of the truth
        assert exact[array] <= value <= exact[array] * 1.001, (array, value)


def test_kernels_that_differ_only_in_their_names_are_counted_once(monkeypatch) -> None:
    """A model's repeated layers give kernels that differ only in their names: counted once,
    each launch's counts under its own kernel's name and equal to counting it alone."""
    import onnx
    from onnx import TensorProto, helper

    from polyfuse.frontend.onnx import load_onnx

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"], name="layer0"),
         helper.make_node("Relu", ["h"], ["y"], name="layer1")], "layers",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = str(Path(__file__).parent / "_repeated_layers.onnx")
    onnx.save(model, path)
    try:
        program = load_onnx(path)
    finally:
        Path(path).unlink()
    assert len(program.kernels) == 2
    counted = []
    real = pc.count_kernel

    def spy(kernel: Kernel, **kw: Any) -> pc.KernelCounts:
        counted.append(kernel.name)
        return real(kernel, **kw)

    monkeypatch.setattr(pc, "count_kernel", spy)
    counts = pc.count_program(program, subgroup_size=8)
    assert len(counted) == 1
    first, second = (counts[op.id] for op in program.launches)
    assert [first.kernel, second.kernel] == [op.kernel for op in program.launches]
    monkeypatch.setattr(pc, "_content_key", lambda kernel: kernel.name)  # no sharing
    alone = pc.count_program(program, subgroup_size=8)
    assert len(counted) == 3
    assert second == alone[program.launches[1].id]
    assert first.mem == second.mem and first.ops == second.ops


def test_a_footprint_with_many_divisions_is_bounded_by_its_hull(monkeypatch):
    """A footprint whose disjunct has more than FOOTPRINT_MAX_DIVS existentials is not given
    to barvinok (its work is not under the operation quota: a strided 3x3 Conv's input, 6
    divisions, took 25-35 s): it is the count of its division-free hull, an upper bound of the
    exact one; under the limit it stays exact.  The oracle is enumeration."""
    strided = isl.Set("{ x[i] : exists (a, b: i = 7a + 3b and 0 <= a < 9 and 0 <= b < 4) }")
    points: list[int] = []
    strided.foreach_point(lambda p: points.append(
        p.get_coordinate_val(isl.dim_type.set, 0).to_python()))
    divs = max(b.dim(isl.dim_type.div) for b in pc.coalesce(strided).get_basic_sets())
    assert 1 <= divs <= pc.FOOTPRINT_MAX_DIVS
    ctx = KernelContext()
    assert pc._footprint(strided, ctx).evaluate({}).value == len(set(points))
    monkeypatch.setattr(pc, "FOOTPRINT_MAX_DIVS", divs - 1)
    bound = pc._footprint(strided, ctx).evaluate({}).value
    assert bound > len(set(points)) and bound == max(points) - min(points) + 1


GRID_STRIDE = """
__kernel void with_init(__global const float *a, __global const float *b,
                        __global float *out, const int n)
{
    float acc = 0.0f;
    for (int i = get_global_id(0); i < n; i += get_global_size(0))
        acc += a[i] * b[i];
    out[get_global_id(0)] = acc;
}

__kernel void without_init(__global const float *a, __global float *out, const long n)
{
    size_t i = get_global_id(0);
    const int stride = get_global_size(0);
    float acc = 0.0f;
    for (; i < n; i = i + stride)
        acc += a[i];
    out[get_global_id(0)] = acc;
}
"""


@pytest.mark.parametrize("name", ["with_init", "without_init"])
@pytest.mark.parametrize("glob,n", [((64,), 1000), ((96,), 96), ((32,), 31)])
def test_grid_stride_loops_are_exact_at_a_known_launch(name: str, glob: tuple[int, ...],
                                                       n: int) -> None:
    """A grid-stride loop (``i += get_global_size(0)``, from an initialiser or from the value
    ``i`` has, the stride in a variable or not) steps by a constant once the launch's global
    size is known: modelled exactly, its counts equal the brute force (BabelStream's dot
    product was refused for a count with no bound).  Without the global size the loop stays
    a generic one (over-approximated), as before."""
    local = (32,)
    ctx = KernelContext(local_size=local + (None, None), global_size=glob + (None, None))
    kernel = parse_kernels(GRID_STRIDE, context=ctx)[name]
    assert all(s.exact_domain for s in kernel.statements)
    kc = pc.count_kernel(kernel, subgroup_size=4, granularity="work-item")
    check_against(kc, kernel, Oracle(kernel, glob, local, {"n": n}), {"n": n})
    generic = parse_kernels(GRID_STRIDE)[name]
    assert not all(s.exact_domain for s in generic.statements)


def test_a_pointer_walk_without_initialiser_stays_a_generic_loop() -> None:
    """``for (; p < end; p++)`` steps a pointer, not an integer: not a counted loop (its
    accesses over-approximated), as before loops without an initialiser were counted."""
    src = """
    __kernel void walk(__global const float *a, __global float *out, const int n)
    {
        __global const float *p = a + get_global_id(0);
        __global const float *end = a + n;
        float acc = 0.0f;
        for (; p < end; p++)
            acc += *p;
        out[get_global_id(0)] = acc;
    }
    """
    ctx = KernelContext(local_size=(32, None, None), global_size=(64, None, None))
    kernel = parse_kernels(src, context=ctx)["walk"]
    assert not all(s.exact_domain for s in kernel.statements)
