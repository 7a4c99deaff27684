"""The package's data flows one way (docs/ARCHITECTURE.md, "Layers"): every import, at module
level or inside a function, goes from a unit to a unit of the same or a lower layer, the units
form no import cycle, and only the layers from ``runtime`` up touch OpenCL.

A unit is a sub-package (``polyfuse/uar/``) or a top-level module (``polyfuse/pipeline.py``).
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "polyfuse"

#: the layer order, lowest first: a unit may import units of its own layer or of a lower one
LAYERS: list[tuple[str, set[str]]] = [
    ("records and C utilities", {"program", "islutil", "mathtext", "c", "cache", "watchdog",
                                 "drivers"}),
    ("operator kernel library (OpenCL source templates)", {"oplib"}),
    ("front-ends: OpenCL C, C/C++ host, ONNX, the builder API", {"frontend"}),
    ("unified abstract representation", {"uar"}),
    ("fusion planning", {"fusion"}),
    ("code generation", {"codegen"}),
    ("the device: build, run, time, verify", {"runtime"}),
    ("performance: counts, model, measurements", {"perf"}),
    ("tuning by measurement", {"tune", "coarsen_tune"}),
    ("the pipeline", {"pipeline"}),
    ("applications", {"onnx_run", "session", "batch", "autopar", "testing", "cli", "builder",
                      "prediction", "__init__"}),
]
LAYER_OF = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}
#: the first layer allowed to import pyopencl
DEVICE_LAYER = LAYER_OF["runtime"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _is_unit(name: str) -> bool:
    return (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file()


@functools.cache
def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports (absolute names), wherever the import statement is."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            # ``from polyfuse import uar`` imports the sub-package, ``__version__`` the package
            units = [a.name for a in node.names if name == "polyfuse" and _is_unit(a.name)]
            out += [(node.lineno, f"{name}.{u}") for u in units] or [(node.lineno, name)]
    return out


def _edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _unit(_module_name(path))
        for line, name in _imports(path):
            if name.startswith("polyfuse") and _unit(name) != src:
                edges[(src, _unit(name))].append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    return edges


def test_every_unit_has_a_layer():
    units = {_unit(_module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert units - set(LAYER_OF) == set(), "add the new unit to LAYERS (and docs/ARCHITECTURE.md)"
    assert len(LAYER_OF) == sum(len(u) for _, u in LAYERS), "a unit is in two layers"


def test_imports_go_down_the_layers():
    wrong = {f"{a} -> {b}": where for (a, b), where in _edges().items()
             if LAYER_OF[b] > LAYER_OF[a]}
    assert not wrong, wrong


def test_no_import_cycle_between_units():
    graph = nx.DiGraph(list(_edges()))
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, cycles


def test_only_the_device_layers_import_pyopencl():
    below = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if LAYER_OF[_unit(_module_name(path))] < DEVICE_LAYER:
            below += [f"{path.relative_to(PACKAGE.parent)}:{line}" for line, name in _imports(path)
                      if name.split(".")[0] == "pyopencl"]
    assert not below, below


def test_no_private_name_crosses_units():
    """A unit uses another's public names only (``from x import _y`` or ``x._y`` is a
    hidden dependency on its internals)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = _unit(_module_name(path))
        tree = ast.parse(path.read_text(), str(path))
        modules: dict[str, str] = {}  # local name -> polyfuse module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("polyfuse"):
                for a in node.names:
                    modules[a.asname or a.name] = f"{node.module}.{a.name}"
                    if a.name.startswith("_") and not a.name.startswith("__") \
                            and _unit(node.module) != src:
                        found.append(f"{path.name}:{node.lineno} imports {a.name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                target = modules.get(node.value.id)
                if target is not None and _unit(target) != src:
                    found.append(f"{path.name}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not found, found


def test_the_rule_sees_imports_inside_functions():
    edges = _edges()
    assert ("frontend", "oplib") in edges  # onnx.py imports the kernel library in a function
    assert ("pipeline", "tune") in edges  # pipeline imports the tuner inside a function


@pytest.mark.parametrize("module", ["polyfuse.fusion", "polyfuse.uar", "polyfuse.codegen",
                                    "polyfuse.frontend.onnx"])
def test_the_core_loads_no_opencl(module: str):
    code = f"import sys, {module}; print('pyopencl' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=PACKAGE.parent)
    assert out.stdout.strip() == "False", out
