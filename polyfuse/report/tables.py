"""The CLI's text tables: aligned columns, the ``analyze`` report of a UAR, the ``--profile``
table of stage times."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional, Protocol


def _fmt(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    return "-" if value is None else str(value)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell, a rule under the headers (the CLI's tables)."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def short_condition(text: str, limit: int = 100) -> str:
    """An isl parameter set as its constraints only, simplified (redundant constraints and
    divisions dropped), cut at ``limit`` characters (``--json`` has the full set)."""
    import islpy as isl

    from polyfuse.core.islutil import coalesce

    try:
        s = coalesce(isl.Set(text)).detect_equalities().remove_redundancies()
        body = str(s)
    except isl.Error:
        body = text
    if ":" in body and body.rstrip().endswith("}"):
        body = body.split(":", 1)[1].rstrip().removesuffix("}").strip() or "always"
    return body if len(body) <= limit else body[: limit - 3].rstrip() + "..."


def format_uar_report(data: dict, host_ops: Sequence[tuple[int, str, str]] = (),
                      sources: Optional[dict[int, str]] = None) -> str:
    """The readable form of ``UAR.to_json()``: one table of the operations (launches, and the
    host operations ``(id, what, where)`` given, so every id an edge names is listed) and one of
    the edges."""
    n_host = f" and {len(host_ops)} host operations" if host_ops else ""
    out = [f"{len(data['launches'])} launches{n_host}, {len(data['edges'])} dependence edges",
           ""]
    rows: list[tuple[int, list[object]]] = [
        (launch["id"], [launch["id"], f"launch {launch['kernel']}", launch["global_size"],
                        launch["local_size"],
                        ", ".join(_fmt_loop(h) for h in launch["host_loops"]) or "-",
                        (sources or {}).get(launch["id"], "")])
        for launch in data["launches"]]
    rows += [(i, [i, what, "", "", "", where]) for i, what, where in host_ops]
    out.append(text_table(["id", "operation", "global_size", "local_size", "host_loops",
                           "source"],
                      [r for _, r in sorted(rows, key=lambda x: x[0])]))
    out.append("")
    rows = []
    for e in data["edges"]:
        cond = "; ".join(f"{k} when {short_condition(v)}"
                         for k, v in (e.get("conditions") or {}).items())
        rows.append(
            [
                f"{e['src']}->{e['dst']}",
                f"{e['src_kernel'] or 'host'}->{e['dst_kernel'] or 'host'}",
                e["array"],
                e["kind"],
                e["width"] + (" (host)" if e.get("host") else ""),
                "yes" if e.get("loop_carried") else "no",
                cond or "-",
            ]
        )
    out.append(text_table(["edge", "kernels", "array", "kind", "width", "loop-carried",
                           "conditions"], rows))
    witnesses = [e for e in data["edges"] if e.get("witness")]
    if witnesses:
        out.append("")
        out.append("witnesses of global edges:")
        for e in witnesses:
            w = e["witness"]
            text = w.get("text") if isinstance(w, dict) else str(w)
            out.append(f"  {e['src']}->{e['dst']} {e['array']} {e['kind']}: {text}")
    return "\n".join(out)


def _fmt_loop(loop: object) -> str:
    if isinstance(loop, dict):
        return f"{loop.get('iterator')} in [{loop.get('lower')}, {loop.get('upper')})"
    return str(loop)


class StageTimes(Protocol):
    """What the ``--profile`` table reads of a model's run
    (``polyfuse.apps.batch.ModelSummary``)."""

    model: str
    cached: bool
    stages: Mapping[str, float]


def profile_table(summaries: Sequence[StageTimes], stages: Sequence[str]) -> list[list[str]]:
    """Rows of the ``--profile`` table: seconds per stage (``stages``, in order) and model, and
    the total."""
    rows = []
    for s in summaries:
        total = sum(s.stages.values())
        rows.append([s.model + (" (cached)" if s.cached else "")]
                    + [f"{s.stages[k]:.2f}" if k in s.stages else "-" for k in stages]
                    + [f"{total:.2f}"])
    return rows


__all__ = ["format_uar_report", "profile_table", "short_condition", "text_table"]
