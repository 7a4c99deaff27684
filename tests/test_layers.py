"""The package's data flows one way (docs/ARCHITECTURE.md, "Layers"): every import, at module
level or inside a function, goes from a unit to a unit of the same or a lower layer, the units
form no import cycle, and only the layers from ``runtime`` up touch OpenCL.

A unit is a sub-package (``polyfuse/uar/``) or a top-level module (``polyfuse/passes/pipeline.py``).
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
    ("records and C utilities", {"core", "core.program", "core.islutil", "core.mathtext", "c",
                                 "core.cache", "core.watchdog", "core.drivers"}),
    ("operator kernel library (OpenCL source templates)", {"oplib"}),
    ("front-ends: OpenCL C, C/C++ host, ONNX, the builder API", {"frontend"}),
    ("unified abstract representation", {"uar"}),
    ("fusion planning", {"fusion"}),
    ("code generation", {"codegen"}),
    ("the device: build, run, time, verify", {"runtime"}),
    ("performance: counts, model, measurements", {"perf"}),
    ("the compilation record and its passes", {"passes", "passes.compilation",
                                               "passes.group_weighing"}),
    ("tuning by measurement", {"passes.orchestration_tuning", "passes.coarsening_tuning"}),
    ("the pipeline", {"passes.pipeline"}),
    ("reports: report.md, plan.json, tables and drawings rendered from the records", {"report"}),
    ("applications", {"apps", "apps.onnx_run", "apps.session", "apps.batch", "apps.cli",
                      "apps.prediction",
                      "autopar", "oracle", "__init__", "__main__"}),
]
LAYER_OF = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}
#: the first layer allowed to import pyopencl
DEVICE_LAYER = LAYER_OF["runtime"]
#: functions that hand a record to its renderer: a record's display methods, a module's
#: deprecated re-exports (PEP 562 ``__getattr__``) and the pipeline's ``write`` pass import
#: :mod:`polyfuse.report` when called.  The record does not depend on its rendering, so such an
#: import is no edge between units.
DELEGATIONS = {"__getattr__", "_repr_html_", "_repr_svg_", "to_svg", "to_dot", "write"}
RENDERER = "polyfuse.report"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: packages whose modules are units each
GROUPS = {"core", "passes", "apps"}


def _unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in GROUPS:
        return f"{parts[1]}.{parts[2]}"
    return parts[1] if len(parts) > 1 else "__init__"


def _is_module(package: str, name: str) -> bool:
    """``from package import name`` imports a module (not a name defined in the package)."""
    folder = PACKAGE.parent.joinpath(*package.split("."), name)
    return folder.is_dir() or folder.with_suffix(".py").is_file()


@functools.cache
def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports (absolute names), wherever the import statement is."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    tree = ast.parse(path.read_text(), str(path))
    delegating = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                  and f.name in DELEGATIONS for n in ast.walk(f)}
    for node in ast.walk(tree):
        found: list[tuple[int, str]] = []
        if isinstance(node, ast.Import):
            found = [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            # ``from polyfuse import uar`` imports the sub-package, ``__version__`` the package
            units = [a.name for a in node.names
                     if name.startswith("polyfuse") and _is_module(name, a.name)]
            found = [(node.lineno, f"{name}.{u}") for u in units] or [(node.lineno, name)]
        if id(node) in delegating:
            found = [(line, name) for line, name in found
                     if not (name == RENDERER or name.startswith(RENDERER + "."))]
        out += found
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


def test_the_root_holds_only_the_public_api():
    """Modules live in the folder of their layer (``core/``, ``passes/``, ``apps/``, a stage's
    package); the root has the package's face only."""
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py", "__main__.py"]


def test_the_package_imports_no_deprecated_path():
    """Old module paths (``polyfuse.pipeline``) work for users, with a warning; the package
    itself names modules where they are (an old path would also have no layer here)."""
    import polyfuse

    old = [f"{path.relative_to(PACKAGE.parent)}:{line} {name}"
           for path in sorted(PACKAGE.rglob("*.py")) for line, name in _imports(path)
           if name.startswith("polyfuse.") and polyfuse._moved(name) is not None]
    assert not old, old


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
    # the pipeline imports the tuner inside a function
    assert ("passes.pipeline", "passes.orchestration_tuning") in edges


def test_records_reach_the_renderer_only_through_delegations():
    """Below the reports, only display methods and deprecated re-exports import them: the
    exemption is taken (records display themselves) and nothing else is exempted."""
    edges = _edges()
    below = [a for (a, b) in edges if b == "report" and LAYER_OF[a] < LAYER_OF["report"]]
    assert not below, below
    delegated = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for f in ast.walk(tree):
            if isinstance(f, ast.FunctionDef) and f.name in DELEGATIONS:
                delegated += [f"{path.name}:{f.name}" for n in ast.walk(f)
                              if isinstance(n, ast.ImportFrom) and (
                                  (n.module or "").startswith(RENDERER) or (
                                      n.module == "polyfuse"
                                      and any(a.name == "report" for a in n.names)))]
    assert "graph.py:_repr_html_" in delegated and "pipeline.py:__getattr__" in delegated
    assert "pipeline.py:write" in delegated


@pytest.mark.parametrize("module", ["polyfuse.core.program", "polyfuse.fusion", "polyfuse.uar",
                                    "polyfuse.codegen", "polyfuse.frontend.onnx"])
def test_the_stages_below_the_device_load_no_opencl(module: str):
    code = f"import sys, {module}; print('pyopencl' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=PACKAGE.parent)
    assert out.stdout.strip() == "False", out


#: writes to ``os.environ`` inside the package, each a documented necessity: the OpenCL ICD
#: loader and PoCL read their settings from the environment once, when the first platform is
#: enumerated, so they can only be said there: ``drivers.py`` registers a driver folder
#: (``OCL_ICD_VENDORS``, ``polyfuse devices --register``), ``runtime/device.py`` asks PoCL for
#: its single-threaded device beside the default one (``POCL_DEVICES``) and to pin its
#: ``pthread`` workers (``POCL_AFFINITY``), the user's own settings winning.  No option travels
#: this way.
ENVIRON_WRITES = {("polyfuse/core/drivers.py", "OCL_ICD_VENDORS"),
                  ("polyfuse/runtime/device.py", "POCL_DEVICES"),
                  ("polyfuse/runtime/device.py", "POCL_AFFINITY")}


def _environ_writes(tree: ast.AST) -> list[tuple[int, object]]:
    """(line, variable) of each statement that assigns, deletes or updates ``os.environ``
    (``os.environ[k] = v``, ``os.environ.update/setdefault/pop``, ``os.putenv``); the variable
    is its name when written as a literal, else None."""
    def key(node: ast.AST) -> object:
        return node.value if isinstance(node, ast.Constant) else None

    def is_environ(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ" \
            and isinstance(node.value, ast.Name) and node.value.id == "os"

    lines = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) \
                else [node.target]
        lines += [(node.lineno, key(t.slice)) for t in targets
                  if isinstance(t, ast.Subscript) and is_environ(t.value)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if (is_environ(f.value) and f.attr in ("update", "setdefault", "pop", "clear",
                                                   "popitem")) or \
                    (isinstance(f.value, ast.Name) and f.value.id == "os"
                     and f.attr in ("putenv", "unsetenv")):
                lines.append((node.lineno, key(node.args[0]) if node.args else None))
    return lines


def test_no_environment_variable_carries_an_option():
    """The device and every option travel as arguments and records, never through the
    environment (``--device`` was once written into ``PYOPENCL_CTX``)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        found += [f"{rel}:{n} {k}" for n, k in _environ_writes(ast.parse(path.read_text(), rel))
                  if (rel, k) not in ENVIRON_WRITES]
    assert not found, found
    assert _environ_writes(ast.parse("import os\nos.environ['A'] = '1'\nos.environ.pop('B')")
                           ) == [(2, "A"), (3, "B")]


def test_no_context_variable():
    """Nothing global steers a stage: what a kernel looks like is in the Target it is given
    (the kernel variant once travelled in ContextVars)."""
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             for line, name in _imports(path) if name.split(".")[0] == "contextvars"]
    found += [f"{path.relative_to(PACKAGE.parent)}" for path in sorted(PACKAGE.rglob("*.py"))
              if "ContextVar(" in path.read_text()]
    assert not found, found


def test_passes_take_and_return_the_record():
    """Every pass of the pipeline takes the compilation record and returns one, never text:
    the stages hand each other objects (their annotations say so)."""
    import typing

    from polyfuse.apps.onnx_run import ONNX_PASSES
    from polyfuse.passes.compilation import Compilation
    from polyfuse.passes.pipeline import PASSES

    assert len(PASSES) == len(ONNX_PASSES) >= 10
    for p in dict.fromkeys(PASSES + ONNX_PASSES):
        hints = typing.get_type_hints(p)
        params = [k for k in hints if k != "return"]
        assert len(params) == 1 and hints[params[0]] is Compilation, p.__qualname__
        assert hints["return"] is Compilation, p.__qualname__
