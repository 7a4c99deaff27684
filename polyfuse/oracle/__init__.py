"""Test oracles: an OpenCL C interpreter and brute-force dependence enumeration.

The UAR computes dependences symbolically with isl; these modules compute them independently, by
*executing* the parsed kernels on small concrete sizes, so the two can be compared
(docs/ARCHITECTURE.md, "Correctness").
:mod:`polyfuse.oracle.kernelgen` (hypothesis strategies) needs the ``test`` extra and is not
imported here.
"""

from polyfuse.oracle.bruteforce import (  # noqa: F401
    ConcreteEdge,
    InstanceTrace,
    Simulation,
    brute_force_dependences,
    concrete_width,
    dependences,
    edge_index,
    kernels_from_source,
    simulate,
)
from polyfuse.oracle.interp import (  # noqa: F401
    CompiledKernel,
    InterpError,
    KernelRun,
    LocalArg,
    MemAccess,
    compile_kernel,
    run_kernel,
)
