"""The 0.1 module paths and names keep working for one release (docs/interfaces.md, "Moved
modules and renamed names"): each old path imports the module at its new path itself and warns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import polyfuse

ROOT = Path(__file__).resolve().parents[1]

CHECK = """
import importlib, sys, warnings
import polyfuse
warnings.simplefilter("always")
old, new = sys.argv[1], sys.argv[2]
with warnings.catch_warnings(record=True) as caught:
    module = importlib.import_module(old)
assert module is importlib.import_module(new), (module, new)
assert module.__spec__.name == new, module.__spec__
assert any(w.category is DeprecationWarning and new in str(w.message) for w in caught), caught
print("ok")
"""


@pytest.mark.parametrize("old", sorted(polyfuse.MOVED_MODULES))
def test_an_old_module_path_is_the_new_module(old: str):
    new = polyfuse.MOVED_MODULES[old]
    out = subprocess.run([sys.executable, "-c", CHECK, old, new], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_a_module_below_an_old_package_moves_with_it():
    out = subprocess.run([sys.executable, "-c", CHECK, "polyfuse.testing.fuzz",
                          "polyfuse.oracle.fuzz"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_python_dash_m_runs_an_old_path():
    out = subprocess.run([sys.executable, "-m", "polyfuse.testing.fuzz", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "--minutes" in out.stdout, out.stderr


def test_python_dash_m_polyfuse_is_the_command():
    out = subprocess.run([sys.executable, "-m", "polyfuse", "--version"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("polyfuse "), out.stderr
    assert out.stdout.strip().endswith(f"({ROOT / 'polyfuse'})")


def test_an_unknown_name_is_still_an_error():
    with pytest.raises(ModuleNotFoundError):
        __import__("polyfuse.no_such_module")
    with pytest.raises(AttributeError):
        polyfuse.no_such_name  # noqa: B018


def test_renamed_functions_warn_and_are_the_new_ones():
    from polyfuse import codegen
    from polyfuse.c import preprocessor, printer, syntax

    renamed = [(lambda: polyfuse.generate, codegen.generate_fused),
               (lambda: codegen.generate, codegen.generate_fused),
               (lambda: preprocessor.generate, printer.opencl_source),
               (lambda: preprocessor.walk, syntax.walk),
               (lambda: preprocessor.block_items, syntax.block_items)]
    for old, new in renamed:
        with pytest.warns(DeprecationWarning, match=new.__name__):
            assert old() is new
