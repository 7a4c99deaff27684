"""Auto-parallelization of plain C loop nests into OpenCL (KernelGen-style; see docs/fusion.md).

``parallelize_file(path, out_dir=...)`` finds the static control parts of a C file
(:mod:`~polyfuse.autopar.scop`), computes exact dependences (:mod:`~polyfuse.autopar.deps`),
maps parallel loops onto NDRange dimensions (:mod:`~polyfuse.autopar.parallelize`) and writes

* ``<stem>_host.c`` — the original program, each parallelized region replaced by OpenCL host API
  calls (the kernels are embedded as a string, the same text as the ``.cl`` file);
* ``<stem>_kernels.cl`` — the kernels;
* ``report.json`` — per region and loop: parallel / sequential / reduction, the dependence that
  prevents parallelism with a witness, the NDRange mapping; regions that could not be modelled
  with the construct and line that stopped them.

:attr:`ParallelizeResult.program` is the same work as a :class:`polyfuse.core.program.Program`
(kernels, launches inside host loops, host copies) for :func:`polyfuse.runtime.run_program`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import sympy

from polyfuse.autopar import codegen as CG
from polyfuse.autopar import parallelize as P
from polyfuse.autopar import scop as S
from polyfuse.c import preprocessor, printer, syntax, types
from polyfuse.core.program import (
    ArgBinding,
    Buffer,
    BufferRange,
    HostLoop,
    HostOp,
    Launch,
    PolyfuseError,
    Program,
    SourceLoc,
)

__all__ = ["parallelize_file", "parallelize_source", "ParallelizeResult", "summary_text"]


@dataclass
class ParallelizeResult:
    """Everything :func:`parallelize_file` produced (paths are None when nothing was written)."""

    source: str
    regions: list[S.Region]
    plans: list[P.RegionPlan]
    report: dict[str, Any]
    host_c: str
    kernels_cl: str
    host_path: Optional[Path] = None
    cl_path: Optional[Path] = None
    report_path: Optional[Path] = None
    program: Optional[Program] = None
    program_error: Optional[str] = None
    notes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def kernel_names(self) -> list[str]:
        return [k.name for p in self.plans for k in p.kernels()]

    def parallel_loops(self) -> list[tuple[int, str, int, str]]:
        """(region, function, line, iterator) of every loop mapped onto an NDRange dimension."""
        out = []
        for p in self.plans:
            for k in p.kernels():
                for m in k.mapped:
                    out.append((p.region.index, p.region.function, m.line, m.iterator))
        return out


def parallelize_file(
    path: str | os.PathLike[str],
    *,
    include_dirs: Iterable[str] = (),
    defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
    function: Optional[str] = None,
    out_dir: Optional[str | os.PathLike[str]] = None,
    report: bool = True,
) -> ParallelizeResult:
    """Parallelize the SCoPs of a C file; write host C, kernels and report under ``out_dir``."""
    path = Path(path)
    source = preprocessor.read_source(str(path))
    res = parallelize_source(source, str(path), include_dirs=include_dirs, defines=defines,
                             function=function)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        res.host_path = out / f"{path.stem}_host.c"
        res.cl_path = out / f"{path.stem}_kernels.cl"
        res.host_path.write_text(res.host_c, encoding="utf-8")
        res.cl_path.write_text(res.kernels_cl, encoding="utf-8")
        if report:
            res.report_path = out / "report.json"
            res.report_path.write_text(json.dumps(res.report, indent=2) + "\n",
                                       encoding="utf-8")
    return res


def parallelize_source(
    source: str,
    filename: str,
    *,
    include_dirs: Iterable[str] = (),
    defines: Mapping[str, Optional[str]] = {},  # noqa: B006 - read only
    function: Optional[str] = None,
) -> ParallelizeResult:
    """:func:`parallelize_file` on a source text, writing nothing."""
    ast = preprocessor.parse(source, filename, include_dirs=include_dirs, defines=defines,
                             opencl=False)
    if function is not None and not any(
            isinstance(e, S.c_ast.FuncDef) and e.decl.name == function for e in ast.ext):
        raise PolyfuseError(f"no function named {function}", filename)
    regions, notes = S.find_regions(ast, filename, function)
    globals_ = {e.name: S.symbol_of(e, "global") for e in ast.ext
                if isinstance(e, S.c_ast.Decl) and e.name
                and not isinstance(e.type, S.c_ast.FuncDecl)
                and not preprocessor.is_polyfuse_header(e)}
    plans: list[P.RegionPlan] = []
    codes: list[tuple[S.Region, CG.RegionCode]] = []
    slots: dict[str, int] = {}
    all_kernels: list[CG.KernelCode] = []
    extra: list[CG.KernelCode] = []  # one-work-item versions of host code (Program model only)
    for r in regions:
        if not r.modelled:
            continue
        plan = P.plan_region(r)
        plans.append(plan)
        if not plan.kernels():
            continue
        symbols = S.function_symbols(r.func_node, globals_)
        for k in plan.kernels():
            slots[k.name] = len(slots)
        code = CG.region_code(plan, symbols, slots)
        codes.append((r, code))
        all_kernels += code.kernels
        for n, node in enumerate(plan.nodes):
            if isinstance(node, P.HostCode) and not any(
                    s.accesses and any(a.write and a.array in r.scalars_written
                                       for a in s.accesses) for s in P._stmts(node.items)):
                kp = P.KernelPlan(f"pf_r{r.index}_host{n}", [], [], [], node.items,
                                  P._stmts(node.items))
                extra.append(CG.kernel_code(r, kp, symbols))
    cl_text = CG.kernels_file(all_kernels)
    host_c = _host_file(source, codes, cl_text, list(slots))
    rep = _report(filename, regions, plans, notes)
    res = ParallelizeResult(filename, regions, plans, rep, host_c, cl_text, notes=notes)
    if all_kernels:
        try:
            res.program = _program(filename, codes, all_kernels + extra)
        except (PolyfuseError, ValueError, TypeError, sympy.SympifyError) as err:
            res.program_error = str(err)
    return res


# ----------------------------------------------------------------------------------------------


def _host_file(source: str, codes: list[tuple[S.Region, CG.RegionCode]], cl_text: str,
               names: list[str]) -> str:
    """The original source with region texts replaced and the OpenCL runtime prepended."""
    if not codes:
        return source
    spans = []
    for r, code in codes:
        span = CG.region_span(source, r)
        if span is None:
            raise PolyfuseError(f"cannot locate region {r.index} of {r.function}() in the source",
                                None, r.first_line)
        spans.append((span, code.host))
    text = source
    for (start, end), host in sorted(spans, key=lambda x: -x[0][0]):
        line_start = text.rfind("\n", 0, start) + 1
        m = re.match(r"[ \t]*", text[start:])
        indent = m.group() if m is not None and line_start == start else ""
        body = "".join((indent + ln if ln.strip() else ln) + "\n"
                       for ln in host.rstrip("\n").splitlines())
        if line_start != start:
            body = body.lstrip(" \t")
        text = text[:start] + body + text[end:].lstrip(" \t").removeprefix("\n")
    return CG.runtime_prelude(names, cl_text) + text


def _report(filename: str, regions: list[S.Region], plans: list[P.RegionPlan],
            notes: list[dict[str, Any]]) -> dict[str, Any]:
    by_region = {p.region.index: p for p in plans}
    out: list[dict[str, Any]] = []
    for r in regions:
        entry: dict[str, Any] = {"region": r.index, "function": r.function,
                                 "lines": [r.first_line, r.last_line],
                                 "pragma_scop": r.pragma}
        if not r.modelled:
            assert r.error is not None
            entry.update(modelled=False, parallelized=False,
                         reason={"construct": r.error.reason, "line": r.error.line},
                         message=f"left untouched: line {r.error.line}: {r.error.reason}")
            out.append(entry)
            continue
        p = by_region[r.index]
        ks = p.kernels()
        entry.update(
            modelled=True, parallelized=bool(ks), params=r.params,
            statements=[{"id": s.id, "line": s.line, "domain": str(s.domain),
                         "reduction": s.reduction[1] if s.reduction else None}
                        for s in r.stmts],
            loops=[P.loop_reason(info) for info in p.loops.values()],
            kernels=[{"name": k.name,
                      "host_loops": [lp.iterator for lp in k.host_loops],
                      "ndrange": {str(k.dim_of(m)): {"iterator": m.iterator, "line": m.line}
                                  for m in k.mapped},
                      "sequential_in_work_item": [c.iterator for c in k.chain
                                                  if c not in k.mapped],
                      "one_work_item": k.serial,
                      "statements": [s.id for s in k.stmts]} for k in ks],
            host_parts=[{"lines": [min(_item_line(i) for i in n.items),
                                   max(_item_line(i) for i in n.items)], "reason": n.reason}
                        for n in p.nodes if isinstance(n, P.HostCode)],
            notes=p.notes + ["distinct arrays are assumed not to alias"],
        )
        out.append(entry)
    return {"file": filename, "regions": out, "not_scop": notes,
            "wavefront": "not attempted (no isl-scheduler skewing; loops carrying dependences "
                         "in every dimension stay sequential)"}


def _item_line(item: Any) -> int:
    return int(getattr(item, "line", 0) or 0)


def _sym(text: str) -> Any:
    t = re.sub(r"(?<![/])/(?![/])", "//", text)
    return sympy.sympify(t, locals={"pf_min": sympy.Min, "pf_max": sympy.Max,
                                    "pf_floord": lambda a, b: sympy.floor(a / b)})


def _program(filename: str, codes: list[tuple[S.Region, CG.RegionCode]],
             kernels: list[CG.KernelCode]) -> Program:
    """The parallelized regions as one :class:`Program` (host code as one-work-item kernels)."""
    from polyfuse.frontend.opencl import parse_kernels

    text = CG.kernels_file(kernels)
    parsed = parse_kernels(text, filename + ".autopar.cl")
    by_name = {kc.plan.name: kc for kc in kernels}
    buffers: dict[str, Buffer] = {}
    ops: list[Any] = []
    params: set[str] = set()

    def op_id() -> int:
        return len(ops)

    def launch(kc: CG.KernelCode, loops: tuple[HostLoop, ...]) -> None:
        args = []
        for i, a in enumerate(kc.args):
            if a.kind == "buffer":
                args.append(ArgBinding(i, "buffer", buffer=a.name))
            else:
                e = _sym(a.expr)
                params.update(str(s) for s in e.free_symbols)
                args.append(ArgBinding(i, "scalar", value=e))
        gs = tuple(_sym(ext) for _lo, ext in kc.ranges) or (sympy.Integer(1),)
        ops.append(Launch(op_id(), kc.plan.name, len(gs), gs, None, tuple(args), loops,
                          kernel_object=kc.plan.name))

    for r, code in codes:
        for a in code.device_arrays:
            size = _sym(CG.array_bytes(r, a).replace(f"sizeof({r.arrays[a].ctype})",
                                                     str(types.size_of(r.arrays[a].ctype) or 8))
                        .replace("(size_t)", ""))
            old = buffers.get(a)
            if old is not None and old.size is not None:
                size = sympy.Max(old.size, size)
            buffers[a] = Buffer(a, size, dtype=r.arrays[a].ctype,
                                loc=SourceLoc(filename, r.first_line))
        for a in code.device_arrays:
            ops.append(HostOp(op_id(), "write", writes=(BufferRange(a),), name="pf_write"))

        def walk(nodes: list[P.PlanNode], loops: tuple[HostLoop, ...],
                 r: S.Region = r) -> None:
            for n, node in enumerate(nodes):
                if isinstance(node, P.KernelPlan):
                    launch(by_name[node.name], loops)
                elif isinstance(node, P.HostLoopPlan):
                    it, lb, _step = syntax.loop_shape(node.loop.node)
                    cond = node.loop.node.cond
                    ub = _upper(cond, it)
                    walk(node.body, loops + (HostLoop(it, _sym(printer.opencl_source(lb)), ub,
                                                      node.loop.step,
                                                      SourceLoc(filename, node.loop.line)),), r)
                else:
                    name = f"pf_r{r.index}_host{n}"
                    if name not in by_name:
                        rd, wr = CG._host_arrays(node.items)
                        ops.append(HostOp(op_id(), "unknown",
                                          reads=tuple(BufferRange(a) for a in sorted(rd)
                                                      if a in buffers),
                                          writes=tuple(BufferRange(a) for a in sorted(wr)
                                                       if a in buffers),
                                          loops=loops, name=f"host code of region {r.index}"))
                    else:
                        launch(by_name[name], loops)
        walk(code.plan.nodes, ())
        for a in code.device_arrays:
            ops.append(HostOp(op_id(), "read", reads=(BufferRange(a),), name="pf_read"))
    used = {op.kernel for op in ops if isinstance(op, Launch)}
    return Program({k: v for k, v in parsed.items() if k in used}, buffers, tuple(ops),
                   tuple(sorted(params)), name=Path(filename).stem, files=(filename,))


def _upper(cond: Any, it: str) -> Any:
    """Exclusive upper bound of ``it < e`` / ``it <= e`` as a sympy expression."""
    if isinstance(cond, S.c_ast.BinaryOp) and isinstance(cond.left, S.c_ast.ID) \
            and cond.left.name == it and cond.op in ("<", "<="):
        e = _sym(printer.opencl_source(cond.right))
        return e if cond.op == "<" else e + 1
    raise ValueError(f"host loop condition {printer.opencl_source(cond)} is not `{it} < e`")


def summary_text(res: ParallelizeResult) -> str:
    """A few lines for the CLI: per region what was parallelized, and why not elsewhere."""
    lines = []
    by_region = {p.region.index: p for p in res.plans}
    for r in res.regions:
        head = f"{res.source}:{r.first_line}: region {r.index} in {r.function}()"
        if not r.modelled:
            assert r.error is not None
            lines.append(f"{head}: left untouched (line {r.error.line}: {r.error.reason})")
            continue
        p = by_region[r.index]
        ks = p.kernels()
        if not ks:
            why = "; ".join(f"loop {i.loop.iterator} (line {i.loop.line}) {i.status}"
                            for i in p.loops.values()) or "no loops"
            lines.append(f"{head}: kept on the host ({why})")
            continue
        lines.append(f"{head}: {len(ks)} kernel(s)")
        for k in ks:
            where = ", ".join(f"{m.iterator}@{m.line}->dim{k.dim_of(m)}" for m in k.mapped)
            host = f" inside host loop(s) {', '.join(lp.iterator for lp in k.host_loops)}" \
                if k.host_loops else ""
            lines.append(f"  {k.name}: {where or 'one work-item'}{host}")
        for info in p.loops.values():
            if info.status != "parallel" and info.carried:
                c = info.carried[0]
                lines.append(f"  loop {info.loop.iterator} (line {info.loop.line}) is "
                             f"{info.status}: {c.kind} on {c.array}, e.g. {c.witness}")
    for n in res.notes:
        lines.append(f"{res.source}:{n['line']}: not a SCoP: {n['construct']}")
    if res.host_path:
        lines.append(f"wrote {res.host_path}, {res.cl_path}"
                     + (f", {res.report_path}" if res.report_path else ""))
    return "\n".join(lines)
