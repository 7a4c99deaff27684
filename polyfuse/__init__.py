"""polyfuse: whole-program polyhedral analysis and kernel fusion of OpenCL programs.

>>> import polyfuse
>>> program = polyfuse.load_opencl("examples/stencil3/kernels.cl",
...                                host="examples/stencil3/host.c")   # doctest: +SKIP
>>> uar = polyfuse.build_uar(program)                                  # doctest: +SKIP
>>> sorted({e.width for e in uar.edges})                               # doctest: +SKIP
['global', ...]
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from importlib import import_module
from types import CodeType, ModuleType
from typing import Any, Optional

#: public name -> module defining it.  Imported on first use (PEP 562), so that light commands
#: (a cache hit of ``polyfuse fuse``, ``--version``) do not pay for isl, sympy and networkx.
_EXPORTS = {
    "ProgramBuilder": "polyfuse.frontend.builder", "default_program": "polyfuse.frontend.builder",
    "FusedProgram": "polyfuse.codegen", "generate_fused": "polyfuse.codegen",
    "load_opencl": "polyfuse.frontend.host", "parse_host": "polyfuse.frontend.host",
    "load_onnx": "polyfuse.frontend.onnx",
    "parse_kernels": "polyfuse.frontend.opencl", "specialize": "polyfuse.frontend.opencl",
    "FusionPlan": "polyfuse.fusion", "check_plan": "polyfuse.fusion",
    "plan_fusion": "polyfuse.fusion", "plan_to_json": "polyfuse.report",
    "HostOp": "polyfuse.core.program", "Kernel": "polyfuse.core.program",
    "KernelContext": "polyfuse.core.program", "Launch": "polyfuse.core.program",
    "PolyfuseError": "polyfuse.core.program", "Program": "polyfuse.core.program",
    "UnsupportedError": "polyfuse.core.program",
    "CoarsenedProgram": "polyfuse.codegen.coarsen", "CoarsenError": "polyfuse.codegen.coarsen",
    "Factors": "polyfuse.codegen.coarsen", "coarsen": "polyfuse.codegen.coarsen",
    "InferenceSession": "polyfuse.apps.session", "NodeArg": "polyfuse.apps.session",
    "predict": "polyfuse.apps.prediction",
    "UAR": "polyfuse.uar", "Edge": "polyfuse.uar", "build_uar": "polyfuse.uar",
}


#: public names of 0.1 that were renamed (deprecated, one release): old -> new
_RENAMED = {"generate": "generate_fused"}

#: module paths of 0.1 -> where the module lives now (docs/interfaces.md, "Moved modules").
#: A name below an old package (``polyfuse.testing.fuzz``) moves with it.
MOVED_MODULES = {
    **{f"polyfuse.{m}": f"polyfuse.core.{m}"
       for m in ("program", "islutil", "mathtext", "cache", "watchdog", "drivers")},
    "polyfuse.compilation": "polyfuse.passes.compilation",
    "polyfuse.pipeline": "polyfuse.passes.pipeline",
    "polyfuse.tune": "polyfuse.passes.orchestration_tuning",
    "polyfuse.coarsen_tune": "polyfuse.passes.coarsening_tuning",
    **{f"polyfuse.{m}": f"polyfuse.apps.{m}" for m in ("session", "batch", "onnx_run", "cli")},
    "polyfuse.builder": "polyfuse.frontend.builder",
    "polyfuse.testing": "polyfuse.oracle",
    "polyfuse.c.cpp": "polyfuse.c.preprocessor",
}


def _moved(fullname: str) -> Optional[str]:
    for old, new in MOVED_MODULES.items():
        if fullname == old or fullname.startswith(old + "."):
            return new + fullname[len(old):]
    return None


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a module under its 0.1 path as the module at its new path (the same object, so
    a patch through either name is seen by both), with a :class:`DeprecationWarning`.
    ``python -m`` works on an old path too (:meth:`get_code`)."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        new = _moved(fullname)
        target_spec = None if new is None else importlib.util.find_spec(new)
        if target_spec is None:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=target_spec.origin)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = _moved(spec.name)
        warnings.warn(f"{spec.name} is now {new}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)
        module = import_module(new)
        spec.loader_state = module.__spec__  # the import machinery overwrites it; restored below
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = module.__spec__.loader_state

    def get_code(self, fullname: str) -> Optional[CodeType]:
        new = _moved(fullname)
        warnings.warn(f"{fullname} is now {new}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)
        spec = importlib.util.find_spec(new)
        return spec.loader.get_code(new)


if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModuleFinder())


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        warnings.warn(f"polyfuse.{name} is now polyfuse.{_RENAMED[name]}", DeprecationWarning,
                      stacklevel=2)
        return getattr(sys.modules[__name__], _RENAMED[name])
    module = _EXPORTS.get(name)
    if module is None:
        # ``polyfuse.uar`` etc. work after ``import polyfuse`` alone, as with an eager import.
        try:
            value = import_module(f"polyfuse.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"polyfuse.{name}":
                raise
            raise AttributeError(f"module 'polyfuse' has no attribute {name!r}") from None
        globals()[name] = value
        return value
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_EXPORTS))


__version__ = "0.1.0"

__all__ = [
    "UAR",
    "CoarsenError",
    "CoarsenedProgram",
    "Factors",
    "coarsen",
    "Edge",
    "FusedProgram",
    "FusionPlan",
    "HostOp",
    "InferenceSession",
    "Kernel",
    "KernelContext",
    "Launch",
    "NodeArg",
    "PolyfuseError",
    "Program",
    "ProgramBuilder",
    "UnsupportedError",
    "build_uar",
    "check_plan",
    "default_program",
    "generate_fused",
    "load_onnx",
    "load_opencl",
    "parse_host",
    "parse_kernels",
    "plan_fusion",
    "plan_to_json",
    "predict",
    "specialize",
]
