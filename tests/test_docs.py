"""The documentation is in the repository and up to date: the README's picture is what
``docs/make_figures.py`` draws, links resolve, and nothing a user reads names an internal
document (design notes, source digests) instead of docs/ or a published paper."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from polyfuse.apps.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
INTERNAL = re.compile(r"DESIGN|\b[Ss]eeds? 00\d\b|\.\./shared|§")


def _normalized_svg(text: str) -> str:
    return re.sub(r"pfuar\d+", "pfuar", text)


def test_uar_figure_is_up_to_date():
    spec = importlib.util.spec_from_file_location("make_figures", ROOT / "docs" / "make_figures.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    committed = (ROOT / "docs" / "uar_qkv.svg").read_text()
    assert _normalized_svg(mod.uar_qkv_svg()) == _normalized_svg(committed), (
        "docs/uar_qkv.svg is out of date: run .venv/bin/python docs/make_figures.py")


def test_help_texts_name_no_internal_document():
    parser = build_parser()
    texts = [parser.format_help()]
    for action in parser._subparsers._group_actions:  # the subcommands
        texts += [p.format_help() for p in action.choices.values()]
    assert len(texts) > 8
    for text in texts:
        assert not INTERNAL.search(text), text


def _user_texts() -> list[tuple[Path, str]]:
    out = [(p, p.read_text()) for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                                        *sorted((ROOT / "examples").rglob("README.md"))]]
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        out.append((nb, "\n".join("".join(c["source"]) for c in cells
                                  if c["cell_type"] == "markdown")))
    return out


@pytest.mark.parametrize("path,text", _user_texts(), ids=lambda x: getattr(x, "name", ""))
def test_user_texts_point_to_what_a_user_can_open(path: Path, text: str):
    assert not INTERNAL.search(text), path
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):  # relative markdown links
        assert (path.parent / target).exists(), f"{path.name}: broken link {target}"


def test_docs_cover_the_design():
    names = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert {"ARCHITECTURE.md", "definitions.md", "fusion.md", "interfaces.md",
            "performance.md", "references.md"} <= names
    refs = (ROOT / "docs" / "references.md").read_text()
    for title in ("SIRIUS", "Retargeting and Respecializing GPU Workloads",
                  "KernelGen", "Roofline Model Toolkit", "Stevens"):
        assert title in refs
