"""``report.md``: a readable account of one fusion run, rendered from its records (the plan's
decisions, the fused program, verification, tuning and coarsening), and the row of the
``polyfuse fuse`` summary table."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from polyfuse.codegen.decisions import FragmentPlaced, KernelNote
from polyfuse.core.mathtext import readable
from polyfuse.frontend.onnx_nodes import Fate, NodeOutcome
from polyfuse.fusion.decisions import Apart, GroupNote, GroupStart, StartReason
from polyfuse.fusion.plan import FusedGroup, FusionPlan
from polyfuse.passes.pipeline import FuseResult
from polyfuse.report.decisions import apart_text, note_text, start_text

if TYPE_CHECKING:
    from polyfuse.passes.orchestration_tuning import TuneResult


def _apart(plan: FusionPlan, tuning: Optional[TuneResult]
           ) -> list[tuple[tuple[int, ...], tuple[int, ...], str]]:
    """The plan's independent groups left apart, with why; after tuning, the ones the chosen
    variant leaves apart say how the heterogeneous variant measured."""
    rows = {r.variant: r for r in tuning.table} if tuning is not None else {}
    het = rows.get("hetero")
    if tuning is None or tuning.variant == "hetero" or het is None or \
            het.duplicate_of is not None:
        return [(r.a, r.b, apart_text(r)) for r in plan.apart]
    key = "kernel_time" if tuning.metric == "kernel" else "wall_time"
    mine, theirs = getattr(tuning.chosen, key), getattr(het, key)
    if het.ok and mine is not None and theirs is not None:
        why = (f"slower when measured: fused side by side {theirs * 1e6:.1f} us, apart "
               f"({tuning.variant}) {mine * 1e6:.1f} us ({tuning.metric} time, median)")
    else:
        why = f"the heterogeneous variant was discarded: {het.error}"
    return [(r.a, r.b, why if r.kind is Apart.NOT_IN_VARIANT else apart_text(r))
            for r in plan.apart]



def _md_table(headers: list[str], rows: list[list[Any]]) -> str:
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


#: The key of ``report.md``: every term its sections use.
REPORT_LEGEND = """\
## Legend

- **launch #N / LN**: the N-th operation of the program, a kernel launch; a **group** is a set
  of launches fused into one kernel, each member a **fragment** of it, in order.
- **Widths** of a dependence: **thread** (each consumer work-item needs what one producer
  work-item wrote: fusable without synchronization), **block** (one producer work-group:
  fusable with a barrier), **global** (several producer work-groups: not fusable).
- **P1**: launches joined only by thread/block dependences are merged, in order.
  **P2**: a global dependence keeps launches apart.
  **P3**: independent launches with identical code are merged too (see orchestration).
- **anchored on the producer / consumer**: the fused kernel runs on that launch's grid; the
  other fragment is re-indexed into it (so each consumer runs where its input was produced).
- **orchestration**: how independent fragments share the fused kernel — **vertical** (one
  work-item runs them in sequence), **horizontal** (different work-groups), **single** (one
  fragment).
- **step**: the launch step the isl scheduler gave the group (groups run in step order)."""


def _onnx_summary(nodes: Mapping[str, NodeOutcome]) -> str:
    launches = sum(1 for v in nodes.values() if v.fate is Fate.LAUNCH)
    aliases = sum(1 for v in nodes.values() if v.fate is Fate.ALIAS)
    folded = sum(1 for v in nodes.values() if v.fate is Fate.FOLDED)
    parts = [f"{launches} kernel launch(es)"]
    if aliases:
        parts.append(f"{aliases} alias(es) (a Reshape, Squeeze, ... is a new view of the same "
                     "buffer: no data moves, no launch)")
    if folded:
        parts.append(f"{folded} folded on the host (shape arithmetic on constants)")
    others = len(nodes) - launches - aliases - folded
    if others:
        parts.append(f"{others} other")
    return f"The model's {len(nodes)} ONNX ops became " + ", ".join(parts) + "."


def _kernel_form_notes(nodes: Mapping[str, NodeOutcome]) -> list[str]:
    """How the front-end laid out the kernels of nodes whose form depends on their consumers
    (a matrix product computing whole rows for its row reduction, or why it could not)."""
    notes = [(label, ") (".join(v.forms)) for label, v in nodes.items()
             if v.fate is Fate.LAUNCH and v.forms]
    if not notes:
        return []
    return ["", "Kernel forms chosen for fusion:", ""] + [f"- `{label}`: {why}"
                                                          for label, why in notes]


def _restates_members(note: GroupNote | KernelNote, group: FusedGroup) -> bool:
    """``fragment k: launch #N name`` only restates the members column."""
    return (isinstance(note, FragmentPlaced) and 1 <= note.k <= len(group.members)
            and group.members[note.k - 1] == note.launch)


def report_markdown(result: FuseResult) -> str:
    """A readable report: a summary first, the legend, groups, what blocked fusion and why,
    optimizations, verification."""
    plan, fused, program, v = result.plan, result.fused, result.program, result.verified
    kernel_of = {launch.id: launch.kernel for launch in program.launches}
    title = " + ".join(Path(f).name for f in program.files) if program.files else program.name
    out = [f"# polyfuse report: {title}", "", "## Summary", ""]
    out.append(f"Kernel launches executed: **{readable(plan.launches_before)} → "
               f"{readable(fused.launches_after)}** "
               f"({len(program.launches)} launch sites in {len(plan.groups)} fused "
               f"group(s)).")
    if result.source_nodes:
        out.append(_onnx_summary(result.source_nodes))
        out += _kernel_form_notes(result.source_nodes)
    blocked = len(plan.blocked)
    out.append("Every dependence between launches was fusable." if not blocked else
               f"{blocked} dependence(s) kept launches apart (see *Edges that blocked fusion*).")
    if v:
        out.append(f"Verified against {v.get('reference', 'unfused')}: "
                   + ("passed." if v.get("ok") else "**FAILED**."))
    out += ["", REPORT_LEGEND, "", "## Groups", ""]
    rows = []
    for g in plan.groups:
        members = ", ".join(f"#{m} {kernel_of.get(m, '?')}" for m in g.members)
        k = fused.group(g.id)
        rows.append([g.id, members, g.orchestration, k.kernel, g.step,
                     _fmt_size(k.global_size), _fmt_size(k.local_size)])
    out.append(_md_table(["group", "members (fragments, in order)", "orchestration", "kernel",
                          "step", "global", "local"], rows))
    notes = [(g.id, _explained(n, plan.starts)) for g in plan.groups
             for n in g.notes + fused.group(g.id).notes if not _restates_members(n, g)]
    if notes:
        out += ["", "Planning decisions:", ""]
        out += [f"- group {gid}: {note}" for gid, note in notes]
    apart = _apart(plan, result.tuning)
    if apart:
        out += ["", "Independent launches left apart (no dependence path between them):", ""]
        for a, b, why in apart:
            names = [", ".join(f"#{m} {kernel_of.get(m, '?')}" for m in ms) for ms in (a, b)]
            out.append(f"- {names[0]} | {names[1]}: {why}")
    out += ["", "## Edges that blocked fusion", ""]
    if plan.blocked:
        rows = []
        for b in plan.blocked:
            witness = (b.witness or {}).get("text", "") if isinstance(b.witness, dict) else ""
            rows.append([f"#{b.src} {kernel_of.get(b.src, 'host')} → "
                         f"#{b.dst} {kernel_of.get(b.dst, 'host')}", b.array, b.kind, b.width,
                         b.reason.summary, witness or "-"])
        out.append(_md_table(["edge", "array", "kind", "width", "why", "witness"], rows))
    else:
        out.append("None: every dependence between launches was fusable.")
    out += ["", "## Post-fusion optimizations", ""]
    opts = {k: n for k, n in fused.optimizations.items() if k != "details"}
    if opts:
        out += [f"- {k.replace('_', ' ')}: {n}" for k, n in sorted(opts.items())]
        details = fused.optimizations.get("details") or {}
        for key, items in sorted(details.items()):
            if isinstance(items, dict):
                items = [f"{k} = {x}" for k, x in items.items()]
            if items:
                out.append(f"  - {key.replace('_', ' ')}: " + "; ".join(map(str, items)))
    else:
        out.append("None fired.")
    out += _weighing_section(result)
    out += ["", "## Verification", ""]
    if v:
        status = "passed" if v.get("ok") else "**FAILED**"
        out.append(f"Fused vs {v.get('reference', 'unfused')} on random inputs: {status} "
                   f"(max abs err {v.get('max_abs_err')}, max rel err {v.get('max_rel_err')}).")
        if v.get("tolerance_reason"):
            out.append(f"Tolerance: {v['tolerance_reason']}.")
        if v.get("instance"):
            values = ", ".join(f"{k} = {x}" for k, x in v["instance"].items())
            given = ", ".join(f"{k} = {x}" for k, x in (v.get("instead_of") or {}).items())
            why = (f"The given sizes ({given}) exceed the run budget" if given else
                   "The sizes are symbolic")
            out.append(f"{why}: verified at the small instance {values} "
                       "(chosen so that every launch runs on a non-empty, uniform NDRange "
                       "within the program's constraints). The fused code is the one "
                       "generated for symbolic sizes, not re-generated for the instance.")
    else:
        out.append("Not run (use `--verify`).")
    if result.tuning is not None:
        tuning = result.tuning
        out += ["", "## Autotuning", ""]
        source = "cached measurement" if tuning.cached else "measured now"
        out.append(f"Chosen variant: **{tuning.variant}** ({source}, median {tuning.metric} "
                   f"time over repeats; * marks the choice):")
        out += ["", "```", tuning.table_text(), "```"]
    if result.coarsening is not None:
        out += ["", "## Coarsening of the fused kernels", ""]
        for lt in result.coarsening.launches:
            wd = lt.work_dim
            sp = f", {lt.speedup:.2f}x" if lt.speedup else ""
            out.append(f"- launch {lt.launch} `{lt.kernel}`: thread {list(lt.chosen.thread[:wd])}, "
                       f"block {list(lt.chosen.block[:wd])}{sp} ({lt.reason or 'original kept'})")
        out.append("")
        out.append("The coarsened program is in `coarsened.cl` (variants in `coarsening.json`); "
                   "`fused.cl` stays the uncoarsened fused program.")
    return "\n".join(out) + "\n"


def _weighing_section(result: FuseResult) -> list[str]:
    """``report.md``'s account of each fused group weighed against its launches apart
    (:mod:`polyfuse.passes.group_weighing`): figures, who decided, what was kept."""
    w = result.weighing
    if w is None:
        return []
    out = ["", "## Fused groups against their launches apart", ""]
    if w.skipped:
        return out + [f"Not weighed: {w.skipped}."]
    out.append(f"Predicted with {w.calibration}; seconds per execution.")
    if w.untimed:
        out.append(f"Groups the model could not rank were kept fused untimed: {w.untimed}.")
    kernel_of = {launch.id: launch.kernel for launch in result.program.launches}

    def ms(s: Optional[float]) -> str:
        return "-" if s is None else f"{s * 1e3:.3g} ms"

    rows = [[", ".join(f"#{m} {kernel_of.get(m, '?')}" for m in v.members), v.kernel,
             ms(v.predicted_fused_s), ms(v.predicted_apart_s), ms(v.measured_fused_s),
             ms(v.measured_apart_s), "fused" if v.fused else "**apart**", v.why]
            for v in w.verdicts]
    out.append("")
    out.append(_md_table(["members", "fused kernel", "predicted fused", "predicted apart",
                          "measured fused", "measured apart", "kept", "why"], rows))
    return out


def _explained(note: GroupNote | KernelNote, starts: Mapping[int, StartReason]) -> str:
    """A decision's sentence, a group's start with its reason (``starts a group: why``)."""
    if isinstance(note, GroupStart) and note.launch in starts:
        return f"{note_text(note)}: {start_text(starts[note.launch])}"
    return note_text(note)


def _fmt_size(size: Any) -> str:
    if size is None:
        return "-"
    return "(" + ", ".join(str(s) for s in size) + ")"


def summary_row(name: str, result: Optional[FuseResult], error: Optional[str] = None
                ) -> list[str]:
    """One row of the ``polyfuse fuse`` summary table."""
    if result is None:
        return [name, "-", "-", "-", f"FAILED: {error}"]
    v = result.verified
    verified = "-" if v is None else ("ok" if v.get("ok") else "MISMATCH")
    err = "-" if v is None else f"{v.get('max_abs_err', 0):.2e}"
    return [name, readable(result.plan.launches_before), readable(result.fused.launches_after),
            err,
            verified]


__all__ = ["REPORT_LEGEND", "report_markdown", "summary_row"]
