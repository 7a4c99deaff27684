"""The accuracy study's ranking scores two things: the model's raw ranking of whole programs,
and the program polyfuse's code runs (the fusion pass's for fused or not; for a kernel form,
the forms the model leaves within ``FORM_MARGIN`` timed, the model alone when one is left).
Checked on made-up predicted and measured seconds; no device."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "analysis"))

import model_accuracy as ma  # noqa: E402

from polyfuse.apps.session import FORM_MARGIN  # noqa: E402
from polyfuse.perf.launches import LaunchPrediction  # noqa: E402


def _rows(programs: dict[str, tuple[float, float]]) -> list[ma.Row]:
    return [ma.Row("real-size", name, LaunchPrediction(1, "k", 1, {}, p, m))
            for name, (p, m) in programs.items()]


def _by_what(programs: dict[str, tuple[float, float]]) -> dict[str, ma.Choice]:
    return {c.what: c for c in ma.choices(_rows(programs))}


def test_fused_or_not_runs_the_fusion_passs_program():
    """The model ranks the unfused program first (raw ranking wrong: it measures 1.2x the
    fused); the code runs the fused program, whose groups the pass weighed: right."""
    c = _by_what({"ex [unfused]": (1.0, 1.2), "ex [fused]": (1.1, 1.0)})["ex: fused or not"]
    assert c.picked == "ex [unfused]" and not c.right and c.loss == 1.2
    assert c.programs[c.code_pick] == "ex [fused]" and c.code_right
    assert c.decided == "the fusion pass"


def _forms(tiled: float, blocked: float, measured: tuple[float, float]
           ) -> dict[str, tuple[float, float]]:
    out = {}
    for form, p, m in (("tiled", tiled, measured[0]), ("blocked", blocked, measured[1])):
        out[f"bert_layer {form} [unfused]"] = (p, m)
        out[f"bert_layer {form} [fused]"] = (0.9 * p, 0.9 * m)
    return out


def test_forms_within_the_margin_are_timed():
    """Forms predicted within ``FORM_MARGIN`` of each other are both built and timed: the
    measured faster one runs, though the model ranked the other first."""
    c = _by_what(_forms(1.0, 1.5, (2.0, 1.0)))
    form = c["bert_layer: kernel form"]
    assert form.picked == "bert_layer tiled [unfused]" and not form.right
    assert form.programs[form.code_pick] == "bert_layer blocked [unfused]"
    assert form.code_right and form.decided == "timing"
    both = c["bert_layer: form and fusion"]
    assert both.programs[both.code_pick] == "bert_layer blocked [fused]" and both.code_right


def test_a_form_beyond_the_margin_is_dropped_by_the_model():
    """A form predicted more than ``FORM_MARGIN`` times slower is never built: the model's
    pick runs, wrong when the measurement disagrees."""
    c = _by_what(_forms(1.0, 1.01 * FORM_MARGIN, (2.0, 1.0)))
    form = c["bert_layer: kernel form"]
    assert form.programs[form.code_pick] == "bert_layer tiled [unfused]"
    assert form.decided == "the model" and not form.code_right and form.code_loss == 2.0
    both = c["bert_layer: form and fusion"]
    assert both.programs[both.code_pick] == "bert_layer tiled [fused]"
    assert both.decided == "the model and the fusion pass"
