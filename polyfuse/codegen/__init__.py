"""Code generation: fused OpenCL kernels from a fusion plan, and post-fusion optimizations.

:func:`generate` turns a :class:`~polyfuse.fusion.plan.FusionPlan` into a :class:`FusedProgram`
(OpenCL source, a new :class:`~polyfuse.program.Program` that launches the fused kernels, one
:class:`FusedKernel` per plan group, the optimizations that fired); the plan is left as it was.
See :mod:`polyfuse.codegen.fuse` for how each construct is generated and
:mod:`polyfuse.codegen.optimize` for the optimizations.
"""

from polyfuse.codegen.fuse import CodegenError, FusedKernel, FusedProgram, generate

__all__ = ["CodegenError", "FusedKernel", "FusedProgram", "generate"]
