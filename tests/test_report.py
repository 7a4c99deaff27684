"""polyfuse.report renders the records: the sentences of decisions are the ones the notes
always had (report.md and plan.json unchanged), and the old import paths warn and still work."""

from __future__ import annotations

import importlib

import pytest

from polyfuse.codegen.decisions import CodeMotion, FragmentPlaced, WavefrontLaunch
from polyfuse.fusion.decisions import (
    Anchor,
    Apart,
    ApartReason,
    EdgeRef,
    GroupStart,
    P1Merge,
    P3Merge,
    P3Verdict,
    Refusal,
    Refused,
    StartCause,
    StartReason,
)
from polyfuse.report import apart_text, note_text, refusal_text, start_text


def test_decisions_read_as_the_notes_did() -> None:
    edge = EdgeRef("flow", 1, 2, "d_c", "block")
    assert note_text(GroupStart(1, "scale")) == "L1 (scale): starts a group"
    assert note_text(P1Merge(2, "add", (1,), Anchor.PRODUCER, True, (edge,))) == (
        "L2 (add) fused with L1 by P1, anchored on the producer (barrier before it): "
        "flow L1->L2 on d_c (block)")
    assert note_text(P3Merge((4,), (3,), "vertical", 2)) == (
        "P3: L4 fused with L3 (vertical): same step 2, identical code, no dependence between "
        "them")
    assert note_text(P3Merge((4,), (3,), "horizontal")) == (
        "P3: L4 fused with L3 (horizontal): identical code, no dependence between them")
    assert note_text(FragmentPlaced(1, 3, "gemm", "host.c:40")) == \
        "fragment 1: launch #3 gemm (host.c:40)"
    assert note_text(CodeMotion((1, 2), 2, 2)) == \
        "code motion: fragments 1, 2 share 2 barriers (4 -> 2)"
    assert note_text(WavefrontLaunch(2, "l", "t", "pf_wave_g0")) == \
        "wavefront launch fusion: one launch of 2 fragments per step l + t (kernel pf_wave_g0)"


def test_refusals_starts_and_apart_reasons_read_as_before() -> None:
    assert refusal_text(Refusal(Refused.GLOBAL, Refused.GLOBAL.value)) == "global dependence (P2)"
    assert refusal_text(Refusal(Refused.GLOBAL, Refused.GLOBAL.value, "L2[0] reads L1[63]")) == \
        "global dependence (P2): L2[0] reads L1[63]"
    assert refusal_text(Refusal(Refused.NO_REINDEXING, Refused.NO_REINDEXING.value)) == \
        "no consistent re-indexing: "
    edge = EdgeRef("flow", 1, 2, "a", "global", "L2[0] reads L1[63]")
    blocked = StartReason(StartCause.BLOCKED, edge=edge,
                          refusal=Refusal(Refused.GLOBAL, Refused.GLOBAL.value))
    assert start_text(blocked) == ("blocked by flow L1->L2 on a (global; witness L2[0] reads "
                                   "L1[63]): global dependence (P2)")
    alone = StartReason(StartCause.ALONE, step=3, others=(((5, 6), P3Verdict.CODE),))
    assert start_text(alone) == (
        "independent (no dependence on an earlier launch), so P1 has nothing to merge it into; "
        "P3 at launch step 3: L5, L6: P3 not identical (different code)")
    assert start_text(StartReason(StartCause.ALONE, step=1)).endswith(
        "P3: no other group at launch step 1 (different step)")
    assert apart_text(ApartReason((0,), (1,), Apart.NO_GRID, "2-D and 1-D")) == \
        "no concatenated grid (2-D and 1-D)"


@pytest.mark.parametrize("module, name", [
    ("polyfuse.passes.pipeline", "plan_json"), ("polyfuse.passes.pipeline", "report_markdown"),
    ("polyfuse.passes.pipeline", "write_outputs"), ("polyfuse.passes.pipeline", "summary_row"),
    ("polyfuse.fusion", "plan_to_json"), ("polyfuse.fusion", "plan_to_text"),
    ("polyfuse.fusion.serialize", "size_json"), ("polyfuse.uar.display", "uar_to_svg")])
def test_old_import_paths_warn_and_still_work(module: str, name: str) -> None:
    with pytest.warns(DeprecationWarning, match="moved to polyfuse.report"):
        old = getattr(importlib.import_module(module), name)
    new_module = "polyfuse.report.display" if module == "polyfuse.uar.display" else \
        "polyfuse.report"
    assert old is getattr(importlib.import_module(new_module), name)


def test_the_package_names_are_the_functions_whatever_was_imported_first() -> None:
    """A submodule named like a function would shadow it once imported (``polyfuse.report``'s
    names are lazy): none is."""
    import polyfuse.report as report
    import polyfuse.report.outputs  # noqa: F401  (loads every submodule the files need)

    for name in report.__all__:
        assert callable(getattr(report, name)) or name == "REPORT_LEGEND", name
