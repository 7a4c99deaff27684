"""Rendering: every text, table and drawing made of the compilation's records.

The stages produce records (the :class:`~polyfuse.uar.UAR`, the
:class:`~polyfuse.fusion.FusionPlan` with its decision records, the
:class:`~polyfuse.codegen.FusedProgram`, the pipeline's
:class:`~polyfuse.passes.pipeline.FuseResult`); this package reads them and writes what people and
tools read, without parsing any text back:

* :mod:`.plan_file`: ``plan.json`` (:func:`plan_json`, :func:`plan_to_json`, :func:`plan_to_text`);
* :mod:`.markdown`: ``report.md`` (:func:`report_markdown`) and the ``fuse`` summary row;
* :mod:`.outputs`: the files of a run (:func:`write_outputs`);
* :mod:`.decisions`: the wording of planning and code generation decisions;
* :mod:`.tables`: the CLI's tables (``analyze``, ``--profile``);
* :mod:`.display`: the Jupyter display, SVG and Graphviz drawings of a UAR or a plan.

Names are imported on first use (PEP 562), so that the CLI's light commands stay light.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "plan_json": "plan_file", "plan_to_json": "plan_file", "plan_to_text": "plan_file",
    "size_json": "plan_file",
    "REPORT_LEGEND": "markdown", "report_markdown": "markdown", "summary_row": "markdown",
    "write_outputs": "outputs",
    "apart_text": "decisions", "note_text": "decisions", "refusal_text": "decisions",
    "start_text": "decisions",
    "format_uar_report": "tables", "profile_table": "tables", "text_table": "tables",
    "show": "display", "uar_to_svg": "display", "uar_to_dot": "display",
    "uar_to_html": "display",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_EXPORTS))


__all__ = sorted(_EXPORTS)
