"""polyfuse: whole-program polyhedral analysis and kernel fusion of OpenCL programs.

>>> import polyfuse
>>> program = polyfuse.load_opencl("examples/stencil3/kernels.cl",
...                                host="examples/stencil3/host.c")   # doctest: +SKIP
>>> uar = polyfuse.build_uar(program)                                  # doctest: +SKIP
>>> sorted({e.width for e in uar.edges})                               # doctest: +SKIP
['global', ...]
"""

from importlib import import_module
from typing import Any

#: public name -> module defining it.  Imported on first use (PEP 562), so that light commands
#: (a cache hit of ``polyfuse fuse``, ``--version``) do not pay for isl, sympy and networkx.
_EXPORTS = {
    "ProgramBuilder": "polyfuse.frontend.builder", "default_program": "polyfuse.frontend.builder",
    "FusedProgram": "polyfuse.codegen", "generate": "polyfuse.codegen",
    "load_opencl": "polyfuse.frontend.host", "parse_host": "polyfuse.frontend.host",
    "load_onnx": "polyfuse.frontend.onnx",
    "parse_kernels": "polyfuse.frontend.opencl", "specialize": "polyfuse.frontend.opencl",
    "FusionPlan": "polyfuse.fusion", "check_plan": "polyfuse.fusion",
    "plan_fusion": "polyfuse.fusion", "plan_to_json": "polyfuse.report",
    "HostOp": "polyfuse.program", "Kernel": "polyfuse.program",
    "KernelContext": "polyfuse.program", "Launch": "polyfuse.program",
    "PolyfuseError": "polyfuse.program", "Program": "polyfuse.program",
    "UnsupportedError": "polyfuse.program",
    "CoarsenedProgram": "polyfuse.codegen.coarsen", "CoarsenError": "polyfuse.codegen.coarsen",
    "Factors": "polyfuse.codegen.coarsen", "coarsen": "polyfuse.codegen.coarsen",
    "InferenceSession": "polyfuse.session", "NodeArg": "polyfuse.session",
    "predict": "polyfuse.prediction",
    "UAR": "polyfuse.uar", "Edge": "polyfuse.uar", "build_uar": "polyfuse.uar",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        # ``polyfuse.builder`` etc. work after ``import polyfuse`` alone, as with an eager import.
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
    "generate",
    "load_onnx",
    "load_opencl",
    "parse_host",
    "parse_kernels",
    "plan_fusion",
    "plan_to_json",
    "predict",
    "specialize",
]
