"""polyfuse: whole-program polyhedral analysis and kernel fusion of OpenCL programs."""

from polyfuse.program import (  # noqa: F401
    Kernel,
    Launch,
    HostOp,
    Program,
    PolyfuseError,
    UnsupportedError,
)

__version__ = "0.1.0"
