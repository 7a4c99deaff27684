"""polyfuse: whole-program polyhedral analysis and kernel fusion of OpenCL programs.

>>> import polyfuse
>>> program = polyfuse.load_opencl("examples/stencil3/kernels.cl",
...                                host="examples/stencil3/host.c")   # doctest: +SKIP
>>> uar = polyfuse.build_uar(program)                                  # doctest: +SKIP
>>> sorted({e.width for e in uar.edges})                               # doctest: +SKIP
['global', ...]
"""

from polyfuse.builder import ProgramBuilder, default_program
from polyfuse.codegen import FusedProgram, generate
from polyfuse.codegen.coarsen import CoarsenedProgram, CoarsenError, Factors, coarsen
from polyfuse.frontend.host import load_opencl, parse_host
from polyfuse.frontend.onnx import load_onnx
from polyfuse.frontend.opencl import parse_kernels, specialize
from polyfuse.fusion import FusionPlan, check_plan, plan_fusion, plan_to_json
from polyfuse.program import (
    HostOp,
    Kernel,
    KernelContext,
    Launch,
    PolyfuseError,
    Program,
    UnsupportedError,
)
from polyfuse.session import InferenceSession, NodeArg
from polyfuse.uar import UAR, Edge, build_uar

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
    "specialize",
]
