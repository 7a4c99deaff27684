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

Adjacent sibling blocks that each hold a single store to the same element (a Concat's slabs:
``if (c < 16) t[i] = x[j]; if (c >= 16) t[i] = v;``) become one guarded store of a selected
value instead, ``if (c < 16 || c >= 16) t[i] = (c >= 16) ? v : x[j];``, which both PoCL builds
compile right and which stays vectorizable: the U-Net up block's fused Resize + Concat + pad
kernel ran 2.2x its unfused launches with volatile stores (37 us against 17).  The last block
whose guard holds gives the value, as the last store did; only the selected operand is
evaluated, so a load guarded by its block stays guarded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from pycparser import c_ast, c_generator

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


def _single_store(stmt: Any) -> Optional[c_ast.Assignment]:
    """The one plain store ``p[i] = e`` an ``if`` block (without ``else``) holds, else None."""
    if not isinstance(stmt, c_ast.If) or stmt.iffalse is not None:
        return None
    items = syntax.block_items(stmt.iftrue)
    if len(items) != 1:
        return None
    inner = items[0]
    if _stored_base(inner) is None or inner.op != "=":
        return None
    return inner


def _merge_runs(block: c_ast.Compound, shared: set[str]) -> None:
    """Each run of two or more adjacent single-store blocks to the same element of a buffer
    of ``shared`` replaced, in place, by one guarded store of the selected value (module
    docstring).  A guard, subscript or value that reads the buffer keeps its block apart (the
    later blocks' would be read before the earlier store)."""
    printer = c_generator.CGenerator()
    items = block.block_items or []
    out: list[Any] = []
    i = 0
    while i < len(items):
        first = _single_store(items[i])
        base = _stored_base(first) if first is not None else None
        run: list[tuple[Any, c_ast.Assignment]] = []
        if first is not None and base in shared:
            index = printer.visit(first.lvalue.subscript)
            for item in items[i:]:
                store = _single_store(item)
                if (store is None or _stored_base(store) != base
                        or printer.visit(store.lvalue.subscript) != index):
                    break
                run.append((item.cond, store))
        if len(run) < 2 or any(base in syntax.identifiers(n) for cond, st in run
                               for n in (cond, st.lvalue.subscript, st.rvalue)):
            out.append(items[i])
            i += 1
            continue
        cond, value = run[0][0], run[0][1].rvalue
        for g, st in run[1:]:
            cond = c_ast.BinaryOp("||", cond, g)
            value = c_ast.TernaryOp(g, st.rvalue, value)
        out.append(c_ast.If(cond, c_ast.Assignment("=", run[0][1].lvalue, value, run[0][1].coord),
                            None, items[i].coord))
        i += len(run)
    block.block_items = out


def order_sibling_stores(body: c_ast.Compound, pointers: Mapping[str, str]) -> None:
    """Merge, in place, the single stores of adjacent sibling ``if`` blocks (without ``else``)
    to one element of a buffer the kernel also loads from, and make volatile the stores of
    the sibling blocks left.

    ``body`` is a fused kernel's own copy of its fragments (statement ids key its comments, so
    it is not copied again); ``pointers`` maps each ``__global`` pointer parameter to its
    element type."""
    read = _reads(body, pointers)
    if not read:
        return
    for block in [n for n in syntax.walk(body) if isinstance(n, c_ast.Compound)]:
        _merge_runs(block, read)
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
