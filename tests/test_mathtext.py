"""Symbolic counts as people read them: compact in reports, tables and ``count`` output, exact in
JSON (issue 23 item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy

from polyfuse.core.mathtext import parse_count, readable

ROOT = Path(__file__).resolve().parent.parent
LSTM2 = ROOT / "examples" / "lstm2"


@pytest.mark.parametrize("exact, shown", [
    ("Piecewise((2*iters + 4, (iters >= 1) & (n >= 1)), (4, True))",
     "2·iters + 4 for iters ≥ 1 and n ≥ 1, otherwise 4"),
    ("Piecewise((4*steps, steps >= 1), (0, True))", "4·steps for steps ≥ 1, otherwise 0"),
    ("N**2*floor(K/16) + ceiling(M/2)", "N²·⌊K/16⌋ + ⌈M/2⌉"),
    ("(n + 1)**2", "(n + 1)²"),
    ("2*n**12", "2·n^12"),
    ("Piecewise((n, (n > 3) | (m < 2) & (k >= 1)), (3, n < 0))",
     "n for n > 3 or (k ≥ 1 and m < 2); 3 for n < 0; undefined otherwise"),
    (7, "7"),
    ("S + E", "E + S"),  # sizes named like sympy's constants stay sizes
])
def test_readable(exact: object, shown: str) -> None:
    assert readable(exact) == shown


def test_parse_count_reads_the_exact_form_back() -> None:
    n, s = sympy.Symbol("n", integer=True), sympy.Symbol("S", integer=True)
    expr = sympy.Piecewise((2 * n + s, n >= 1), (4, True))
    assert parse_count(str(expr)) == expr
    assert readable("not a formula (") == "not a formula ("


def test_plan_json_keeps_the_exact_count_and_adds_a_readable_one() -> None:
    plan = json.loads((ROOT / "schedules" / "lstm2.plan.json").read_text(encoding="utf-8"))
    assert plan["launches_before"] == "Piecewise((4*steps, steps >= 1), (0, True))"
    assert plan["launches_before_readable"] == "4·steps for steps ≥ 1, otherwise 0"
    assert readable(plan["launches_after"]) == plan["launches_after_readable"]
    static = json.loads((ROOT / "schedules" / "qkv.plan.json").read_text(encoding="utf-8"))
    assert static["launches_after"] == 1 and "launches_after_readable" not in static


def test_report_and_summary_row_print_counts_readable() -> None:
    import polyfuse
    from polyfuse.passes.pipeline import fuse_program
    from polyfuse.report import report_markdown, summary_row

    program = polyfuse.load_opencl(str(LSTM2 / "kernels.cl"), host=str(LSTM2 / "host.c"))
    result = fuse_program(program, build=False)
    row = summary_row("lstm2", result)
    assert row[1] == "4·steps for steps ≥ 1, otherwise 0" and "Piecewise" not in " ".join(row)
    report = report_markdown(result)
    assert "Kernel launches executed: **4·steps for steps ≥ 1, otherwise 0 → " in report
    assert "Piecewise" not in report


def test_batch_row_prints_a_symbolic_count_readable() -> None:
    from polyfuse.apps.batch import ModelSummary

    row = ModelSummary("m", launches_before="Piecewise((4*b, b >= 1), (0, True))",
                       launches_after=1).row()
    assert row[2:4] == ["4·b for b ≥ 1, otherwise 0", "1"]


def test_count_table_prints_one_case_per_line() -> None:
    from polyfuse.perf.counts import format_count_table

    entry = {"kernel": "k", "geometry": {"work_items": {"count": "2*_gs0"}}, "subgroup_size": 8,
             "ops": [{"op": "add", "dtype": "float32", "granularity": "work-item",
                      "count": "Piecewise((n*m, (n >= 1) & (m >= 1)), (n, n >= 1), (0, True))"}],
             "mem": [], "sync": {}}
    text = format_count_table({"kernels": [entry]})
    assert "work items 2·_gs0" in text and "Piecewise" not in text
    lines = text.splitlines()
    first = next(k for k, ln in enumerate(lines) if ln.startswith("  op add"))
    assert lines[first].endswith("m·n for m ≥ 1 and n ≥ 1;")
    assert lines[first + 1].strip() == "n for n ≥ 1, otherwise 0"
    assert lines[first + 1].index("n") == lines[first].index("m·n")
