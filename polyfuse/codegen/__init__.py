"""Code generation: fused OpenCL kernels from a fusion plan, and post-fusion optimizations.

:func:`generate_fused` turns a :class:`~polyfuse.fusion.plan.FusionPlan` into a
:class:`FusedProgram` (OpenCL source, a new :class:`~polyfuse.core.program.Program` that launches
the fused kernels, one :class:`FusedKernel` per plan group, the optimizations that fired); the plan
is left as it was. See :mod:`polyfuse.codegen.fuse` for how each construct is generated and
:mod:`polyfuse.codegen.optimize` for the optimizations.
"""

import warnings
from typing import Any

from polyfuse.codegen.fuse import CodegenError, FusedKernel, FusedProgram, generate_fused

__all__ = ["CodegenError", "FusedKernel", "FusedProgram", "generate_fused"]


def __getattr__(name: str) -> Any:
    """``generate``, the name :func:`generate_fused` had until 0.1 (deprecated, one release)."""
    if name == "generate":
        warnings.warn("polyfuse.codegen.generate is now polyfuse.codegen.generate_fused",
                      DeprecationWarning, stacklevel=2)
        return generate_fused
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
