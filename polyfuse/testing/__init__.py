"""Test oracles: an OpenCL C interpreter and brute-force dependence enumeration.

The UAR computes dependences symbolically with isl; these modules compute them independently, by
*executing* the parsed kernels on small concrete sizes, so the two can be compared (DESIGN §5).
"""

from polyfuse.testing.interp import (  # noqa: F401
    InterpError,
    KernelRun,
    LocalArg,
    MemAccess,
    compile_kernel,
    run_kernel,
)
