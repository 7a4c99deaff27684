"""The whole fusion pipeline in one call: UAR → plan → fused code → (verify) → files.

Used by ``polyfuse fuse``, by ``schedules/regenerate.py`` and by research scripts::

    >>> import polyfuse
    >>> from polyfuse.pipeline import fuse_program, write_outputs
    >>> program = polyfuse.load_opencl("examples/qkv/kernels.cl",
    ...                                host="examples/qkv/host.c")         # doctest: +SKIP
    >>> result = fuse_program(program, verify=True)                         # doctest: +SKIP
    >>> result.plan.launches_before, result.plan.launches_after            # doctest: +SKIP
    (4, 1)
    >>> write_outputs(result, "out/qkv")                                     # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from polyfuse.codegen import FusedProgram, generate
from polyfuse.fusion import FusionPlan, plan_fusion, plan_to_text
from polyfuse.program import PolyfuseError, Program
from polyfuse.uar import UAR, build_uar

Progress = Optional[Callable[[str], None]]


@dataclass(frozen=True)
class FuseResult:
    """Everything one fusion run produced; ``plan`` carries ``verified`` when verification ran."""

    program: Program
    uar: UAR
    plan: FusionPlan
    fused: FusedProgram
    verification: Optional[Any] = None  # polyfuse.runtime.verify.Verification
    tuning: Optional[Any] = None  # polyfuse.runtime.autotune.TuneResult

    @property
    def ok(self) -> bool:
        return self.verification is None or bool(self.verification.ok)


def fuse_program(program: Program, *, params: Optional[dict[str, int]] = None,
                 orchestration: str = "auto", verify: bool = False, tune: bool = False,
                 device: Any = None, build: bool = True, progress: Progress = None
                 ) -> FuseResult:
    """Plan, generate and optionally verify (fused vs unfused on random inputs) or autotune."""
    from polyfuse.frontend.cpp import RECURSION_LIMIT, recursion_limit

    with recursion_limit(RECURSION_LIMIT):  # kernels' syntax trees are copied and walked
        return _fuse_program(program, params=params, orchestration=orchestration,
                             verify=verify, tune=tune, device=device, build=build,
                             progress=progress)


def _fuse_program(program: Program, *, params: Optional[dict[str, int]], orchestration: str,
                  verify: bool, tune: bool, device: Any, build: bool, progress: Progress
                  ) -> FuseResult:
    say = progress or (lambda _msg: None)
    if verify:
        from polyfuse.runtime.budget import check_run_budget

        check_run_budget(program, params, runs=2, what="verification")  # refuse before planning
    say("building the UAR")
    uar = build_uar(program)
    tuning = None
    if tune:
        from polyfuse.runtime.autotune import autotune

        say("autotuning orchestration variants")
        tuning = autotune(program, params=params, device=device, progress=progress)
        plan, fused = tuning.plan, tuning.fused
    else:
        say("planning fusion")
        plan = plan_fusion(uar, orchestration=orchestration)
        say(f"generating {len(plan.groups)} fused kernel(s)")
        fused = generate(plan, device=device if build else False, build=build)
        plan = fused.plan
    verification = None
    if verify:
        from polyfuse.runtime import verify_programs

        say("verifying fused against unfused on random inputs")
        verification = verify_programs(program, fused.program, params=params,
                                       buffers=list(fused.compared_buffers), device=device)
        plan = dataclasses.replace(plan, verified=verification.to_dict())
        fused = dataclasses.replace(fused, plan=plan)
    return FuseResult(program=program, uar=uar, plan=plan, fused=fused,
                      verification=verification, tuning=tuning)


def write_outputs(result: FuseResult, out_dir: Union[str, Path]) -> dict[str, Path]:
    """Write ``plan.json``, ``fused.cl`` and ``report.md`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"plan": out / "plan.json", "source": out / "fused.cl", "report": out / "report.md"}
    paths["plan"].write_text(plan_to_text(result.plan))
    paths["source"].write_text(result.fused.source)
    paths["report"].write_text(report_markdown(result))
    return paths


def _md_table(headers: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def report_markdown(result: FuseResult) -> str:
    """A readable report: groups, what blocked fusion and why, optimizations, verification."""
    plan, program = result.plan, result.program
    kernel_of = {launch.id: launch.kernel for launch in program.launches}
    title = " + ".join(program.files) if program.files else program.name
    out = [f"# polyfuse report: {title}", ""]
    out.append(f"Kernel launches executed: **{plan.launches_before} → {plan.launches_after}** "
               f"({len(program.launches)} launch sites in {len(plan.groups)} fused group(s)).")
    out.append("")
    out.append("## Groups")
    out.append("")
    rows = []
    for g in plan.groups:
        members = ", ".join(f"#{m} {kernel_of.get(m, '?')}" for m in g.members)
        rows.append([g.id, members, g.orchestration, g.kernel or "-", g.step,
                     _fmt_size(g.global_size), _fmt_size(g.local_size)])
    out.append(_md_table(["group", "members", "orchestration", "kernel", "step", "global",
                          "local"], rows))
    notes = [(g.id, n) for g in plan.groups for n in g.notes]
    if notes:
        out += ["", "Planning decisions:", ""]
        out += [f"- group {gid}: {note}" for gid, note in notes]
    out += ["", "## Edges that blocked fusion", ""]
    if plan.blocked:
        rows = []
        for b in plan.blocked:
            witness = (b.witness or {}).get("text", "") if isinstance(b.witness, dict) else ""
            rows.append([f"#{b.src} {kernel_of.get(b.src, 'host')} → "
                         f"#{b.dst} {kernel_of.get(b.dst, 'host')}", b.array, b.kind, b.width,
                         b.reason.split(": ", 1)[0], witness or "-"])
        out.append(_md_table(["edge", "array", "kind", "width", "why", "witness"], rows))
    else:
        out.append("None: every dependence between launches was fusable.")
    out += ["", "## Post-fusion optimizations", ""]
    opts = {k: v for k, v in plan.optimizations.items() if k != "details"}
    if opts:
        out += [f"- {k.replace('_', ' ')}: {v}" for k, v in sorted(opts.items())]
        details = plan.optimizations.get("details") or {}
        for key, items in sorted(details.items()):
            if isinstance(items, dict):
                items = [f"{k} = {v}" for k, v in items.items()]
            if items:
                out.append(f"  - {key.replace('_', ' ')}: " + "; ".join(map(str, items)))
    else:
        out.append("None fired.")
    out += ["", "## Verification", ""]
    if plan.verified:
        v = plan.verified
        status = "passed" if v.get("ok") else "**FAILED**"
        out.append(f"Fused vs {v.get('reference', 'unfused')} on random inputs: {status} "
                   f"(max abs err {v.get('max_abs_err')}, max rel err {v.get('max_rel_err')}).")
        if v.get("tolerance_reason"):
            out.append(f"Tolerance: {v['tolerance_reason']}.")
    else:
        out.append("Not run (use `--verify`).")
    if result.tuning is not None:
        tuning = result.tuning
        out += ["", "## Autotuning", ""]
        source = "cached measurement" if tuning.cached else "measured now"
        out.append(f"Chosen variant: **{tuning.variant}** ({source}, median {tuning.metric} "
                   f"time over repeats; * marks the choice):")
        out += ["", "```", tuning.table_text(), "```"]
    return "\n".join(out) + "\n"


def _fmt_size(size: Any) -> str:
    if size is None:
        return "-"
    return "(" + ", ".join(str(s) for s in size) + ")"


def summary_row(name: str, result: Optional[FuseResult], error: Optional[str] = None
                ) -> list[str]:
    """One row of the ``polyfuse fuse`` summary table."""
    if result is None:
        return [name, "-", "-", "-", f"FAILED: {error}"]
    plan = result.plan
    v = plan.verified
    verified = "-" if v is None else ("ok" if v.get("ok") else "MISMATCH")
    err = "-" if v is None else f"{v.get('max_abs_err', 0):.2e}"
    return [name, str(plan.launches_before), str(plan.launches_after), err, verified]


__all__ = ["FuseResult", "PolyfuseError", "fuse_program", "report_markdown", "summary_row",
           "write_outputs"]
