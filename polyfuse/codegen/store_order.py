"""Volatile stores where sibling guarded blocks write a buffer the fused kernel reads again.

Both PoCL builds on the development machine (LLVM 14 and 15) miscompile a work-item that
stores to one buffer from two or more sibling ``if`` blocks and later loads it::

    if (c < 2)  t[i] = x[j];
    if (c >= 2) t[i] = x[j - 2];
    ...
    v = t[i];            /* returns what t[i] held before the kernel */

The stores reach memory, but the load is served as if they came after it.  An unfused kernel
never reads back what it just stored, but a fused one does whenever a consumer fragment reads
its producer's output (fuzz seed 8080: a Concat, whose slabs are such sibling blocks, fused with
the Transpose after it).  Fusion must not depend on this compiler's handling of the pattern, so
the stores of such blocks go through a ``volatile`` pointer, which keeps them in program order
with the later load; other stores keep their form (volatile accesses do not vectorize).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pycparser import c_ast

from polyfuse.c import syntax


def _stored_base(node: Any) -> str | None:
    """The pointer parameter an assignment's target indexes (``p[i] = ...``), or None."""
    if isinstance(node, c_ast.Assignment) and isinstance(node.lvalue, c_ast.ArrayRef) \
            and isinstance(node.lvalue.name, c_ast.ID):
        return node.lvalue.name.name
    return None


def _stores(node: Any, pointers: Mapping[str, str]) -> set[str]:
    return {base for n in syntax.walk(node) if (base := _stored_base(n)) in pointers}


def _reads(body: Any, pointers: Mapping[str, str]) -> set[str]:
    """Pointer parameters some expression of ``body`` loads from."""
    stored = {id(n.lvalue) for n in syntax.walk(body) if _stored_base(n) is not None
              and n.op == "="}
    return {n.name.name for n in syntax.walk(body)
            if isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ID)
            and n.name.name in pointers and id(n) not in stored}


def order_sibling_stores(body: c_ast.Compound, pointers: Mapping[str, str]) -> None:
    """Make volatile, in place, the stores of two or more sibling ``if`` blocks (without
    ``else``) to a buffer the kernel also loads from.

    ``body`` is a fused kernel's own copy of its fragments (statement ids key its comments, so
    it is not copied again); ``pointers`` maps each ``__global`` pointer parameter to its
    element type."""
    read = _reads(body, pointers)
    if not read:
        return
    aliases: dict[str, str] = {}
    for block in [n for n in syntax.walk(body) if isinstance(n, c_ast.Compound)]:
        ifs = [s for s in block.block_items or [] if isinstance(s, c_ast.If) and s.iffalse is None]
        counts: dict[str, int] = {}
        for s in ifs:
            for base in _stores(s, pointers):
                counts[base] = counts.get(base, 0) + 1
        shared = {base for base, n in counts.items() if n > 1 and base in read}
        for s in ifs:
            for n in syntax.walk(s):
                if _stored_base(n) in shared:
                    alias = aliases.setdefault(n.lvalue.name.name,
                                               f"pf_volatile_{n.lvalue.name.name}")
                    n.lvalue = c_ast.ArrayRef(c_ast.ID(alias), n.lvalue.subscript,
                                              n.lvalue.coord)
    # a declared pointer rather than a cast: the printed kernel is parsed again, and the
    # front-end drops address spaces inside casts
    body.block_items[:0] = [_volatile_pointer(alias, base, pointers[base])
                            for base, alias in sorted(aliases.items())]


def _volatile_pointer(alias: str, base: str, element_type: str) -> c_ast.Decl:
    """``volatile __global T *alias = base;``"""
    space = c_ast.AttributeSpecifier([c_ast.Attribute("global", "ocl", None)])
    return c_ast.Decl(alias, ["volatile"], [], [], [], c_ast.PtrDecl(
        [], c_ast.TypeDecl(alias, ["volatile"], None, c_ast.IdentifierType([element_type]))),
        c_ast.ID(base), None, attributes=[space])
