"""Where the host interpreter is: the file, the statement and the host loops around it.

Every part reports errors and warnings through it, so that they name file and line; the
enclosing :class:`~polyfuse.core.program.HostLoop` records it holds go into every operation
recorded, and decide whether a value computed here is the same on every execution
(:meth:`Context.varies`)."""

from __future__ import annotations

import logging
from typing import Optional

from pycparser import c_ast

from polyfuse.core.program import HostLoop, PolyfuseError, SourceLoc

_log = logging.getLogger("polyfuse.frontend.host")


class Context:
    """The position of the interpretation and the diagnostics it gave."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.node: Optional[c_ast.Node] = None
        #: the variable a value being computed will be stored in (names buffers, parameters)
        self.name_hint: Optional[str] = None
        self.loops: list[HostLoop] = []
        self.loop_syms: set = set()
        self.summarising = 0  # loops being summarised, nested
        #: known host values a symbolic pass over a host loop could not keep (a known number
        #: stored at an index that is the loop's iterator, a value changing per iteration)
        self.forgotten = 0
        self.warnings: list[str] = []
        #: calls whose callee polyfuse does not follow (pure virtual, template-dependent)
        self.unfollowed_calls: list[tuple[str, str]] = []  # (why, 'callee' at file:line)

    def loc(self, node: Optional[c_ast.Node] = None) -> Optional[SourceLoc]:
        """Where ``node`` (default: the current statement) is in the user's files."""
        node = node if node is not None else self.node
        coord = getattr(node, "coord", None)
        if coord is None or not coord.line:
            return None
        return SourceLoc(coord.file or self.filename, coord.line, coord.column or 0)

    def warn(self, msg: str, node: Optional[c_ast.Node] = None) -> None:
        """A warning on stderr naming file:line (once per place)."""
        loc = self.loc(node)
        where = f"{loc.file}:{loc.line}" if loc is not None else self.filename
        text = f"{where}: {msg}"
        if text not in self.warnings:
            self.warnings.append(text)
            _log.warning("polyfuse: warning: %s", text)

    def error(self, msg: str, node: Optional[c_ast.Node] = None,
              cls: type = PolyfuseError) -> PolyfuseError:
        """An error of class ``cls`` naming the file and line of ``node``."""
        loc = self.loc(node)
        if loc is None:
            return cls(msg, self.filename)
        return cls(msg, loc.file, loc.line)

    def varies(self) -> bool:
        """Whether a value computed here may differ between executions of this point (inside a
        host loop, or a loop being summarised): then it is no parameter."""
        return bool(self.loops) or self.summarising > 0
