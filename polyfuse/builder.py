"""The Python builder API under its public name (it lives with the front-ends it serves:
:mod:`polyfuse.frontend.builder`)."""

from polyfuse.frontend.builder import LocalArg, ProgramBuilder, default_program, local

__all__ = ["LocalArg", "ProgramBuilder", "default_program", "local"]
