"""Consecutive fragments that loop over the same block, run as one loop nest.

Why: a register-blocked product's fused epilogue is a chain of fragments, each a loop nest over
the block (``for (bi) for (bj)``, :mod:`polyfuse.oplib.blocked`) that reads the previous step's
private array (:mod:`polyfuse.codegen.optimize` forwards the block).  Run one after the other,
every step is a pass over its arrays, which the device compiler keeps in memory; in one loop
nest each element goes through the whole chain in registers.  BERT-base's FFN-in product with
its erf GELU (7 steps): 11.2 ms as a chain, 8.1 ms as one nest, 7.65 ms for the product alone
(PoCL 3.1 ``basic``, thread CPU time).

Fusing two loop nests with the same iteration space is legal when no dependence between them
goes backwards (Kennedy & Allen, loop fusion): an instance of a later nest never needs a value
an earlier nest computes at a later iteration, nor overwrites what an earlier nest reads at a
later iteration.  The check here proves that from the syntax, conservatively:

* the nests are fragments in sequence with no guard (or the same guard), each a perfect chain
  of ``for`` loops with the same headers (the same iterators and bounds), and the same
  declarations before and between the loops (the block's origin ``r0``/``c0``, ``lead``);
* a private array of the kernel written in one nest and used in another is only ever
  subscripted by the loop iterators in loop order (``pf_b2[bi][bj]``): every dependence through
  it stays within one iteration, where the fused body keeps the fragments' order;
* any other memory (buffers by the root they are bound to, other arrays) that one nest writes,
  no other nest of the set touches; bodies make no calls but pure built-ins, no jumps, and
  assign no variable declared outside their own nest.

Anything else leaves the fragments as they are, which is always safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from pycparser import c_ast

from polyfuse.c import syntax
from polyfuse.c.printer import OpenCLGenerator
from polyfuse.codegen.coarsen import PURE_BUILTINS
from polyfuse.core.program import WORK_ITEM_FUNCTIONS

_JUMPS = (c_ast.Return, c_ast.Break, c_ast.Continue, c_ast.Goto, c_ast.Label, c_ast.While,
          c_ast.DoWhile, c_ast.Switch)


class _Nest:
    """One fragment as a loop nest: its guard, the declarations before each loop, the loops,
    the innermost body, and what it accesses."""

    def __init__(self, stmt: Any, guard: Optional[Any], levels: list[tuple[list[Any], Any]],
                 body: Any) -> None:
        self.stmt, self.guard, self.levels, self.body = stmt, guard, levels, body
        self.iterators = [loop.init.decls[0].name for _, loop in levels]

    def key(self, text: Any) -> tuple:
        """What must print the same for two nests to share one loop nest."""
        guard = text(self.guard) if self.guard is not None else ""
        return (guard,) + tuple((tuple(text(d) for d in decls),
                                 text(loop.init), text(loop.cond), text(loop.next))
                                for decls, loop in self.levels)


def _as_nest(stmt: Any) -> Optional[_Nest]:
    """``stmt`` as a :class:`_Nest`: ``{ decls; for (...) { decls; for (...) body } }``
    (optionally under an ``if`` with no ``else``), or None."""
    guard = None
    if isinstance(stmt, c_ast.If) and stmt.iffalse is None and isinstance(stmt.iftrue,
                                                                           c_ast.Compound):
        guard, block = stmt.cond, stmt.iftrue
    elif isinstance(stmt, c_ast.Compound):
        block = stmt
    else:
        return None
    levels: list[tuple[list[Any], Any]] = []
    node: Any = block
    while True:
        items = syntax.block_items(node)
        if not items or not isinstance(items[-1], c_ast.For) or not all(
                isinstance(d, c_ast.Decl) and d.init is not None
                and isinstance(d.type, c_ast.TypeDecl) for d in items[:-1]):
            break
        loop = items[-1]
        if not (isinstance(loop.init, c_ast.DeclList) and len(loop.init.decls) == 1
                and loop.cond is not None and loop.next is not None):
            break
        levels.append((items[:-1], loop))
        node = loop.stmt
    if not levels:
        return None
    return _Nest(stmt, guard, levels, node)


def _effects(nest: _Nest, block_arrays: set[str], roots: Mapping[str, str]
             ) -> Optional[tuple[set[str], set[str]]]:
    """(memory written, memory touched) by ``nest`` outside its block arrays' own iteration, by
    root buffer or array name; None when the nest does something this module does not fuse."""
    stmt = nest.stmt
    if any(isinstance(n, c_ast.Decl) and isinstance(n.type, c_ast.PtrDecl)
           for n in syntax.walk(stmt)):
        return None  # a pointer of the nest's own may point anywhere
    local = syntax.declared(stmt) | set(nest.iterators)
    fixed = set(nest.iterators) | {d.name for decls, _ in nest.levels for d in decls}
    if syntax.modified(stmt) - local or syntax.modified(nest.body) & fixed:
        return None  # assigns a variable of the kernel, an iterator or a shared declaration
    written: set[str] = set()
    # every use of a buffer parameter (an element, a field through ``->``...) touches it
    touched = {roots[n.name] for n in syntax.walk(stmt)
               if isinstance(n, c_ast.ID) and n.name in roots and n.name not in local}
    targets: set[int] = set()
    bases: set[int] = set()
    for n in syntax.walk(stmt):
        if isinstance(n, _JUMPS):
            return None
        if isinstance(n, c_ast.FuncCall):
            name = n.name.name if isinstance(n.name, c_ast.ID) else None
            if name not in PURE_BUILTINS and name not in WORK_ITEM_FUNCTIONS:
                return None
        if isinstance(n, c_ast.UnaryOp) and (n.op == "*" or n.op in ("++", "--", "p++", "p--")
                                             and not isinstance(n.expr, c_ast.ID)):
            return None  # memory through a pointer, or a read-modify-write of an element
        if isinstance(n, c_ast.Assignment):
            if not isinstance(n.lvalue, (c_ast.ID, c_ast.ArrayRef)):
                return None
            targets.add(id(n.lvalue))
        if isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ArrayRef):
            bases.add(id(n.name))
    for n in syntax.walk(stmt):
        if not isinstance(n, c_ast.ArrayRef) or id(n) in bases:
            continue  # each reference once, at its outermost subscript
        base, subs = syntax.flatten_ref(n)
        if not isinstance(base, c_ast.ID):
            return None
        if base.name in local:
            continue  # an array of the nest's own
        at = [s.name if isinstance(s, c_ast.ID) else None for s in subs]
        if base.name in block_arrays and at == nest.iterators:
            continue  # the block at this iteration
        mem = roots.get(base.name, base.name)
        touched.add(mem)
        if id(n) in targets:
            written.add(mem)
    return written, touched


def _fusable(nests: list[_Nest], block_arrays: set[str], roots: Mapping[str, str]) -> bool:
    # a block array any nest of the run subscripts otherwise is memory like any other
    irregular = set().union(*(_irregular(n.stmt, n.iterators, block_arrays) for n in nests))
    effects = [_effects(n, block_arrays - irregular, roots) for n in nests]
    if any(e is None for e in effects):
        return False
    for i, e in enumerate(effects):
        assert e is not None
        for j, f in enumerate(effects):
            if i != j and f is not None and e[0] & f[1]:
                return False
    return True


def _irregular(stmt: Any, iterators: list[str], block_arrays: set[str]) -> set[str]:
    """The block arrays ``stmt`` refers to other than as an element at the iteration of the
    loops ``iterators``."""
    bases = {id(n.name) for n in syntax.walk(stmt)
             if isinstance(n, c_ast.ArrayRef) and isinstance(n.name, c_ast.ArrayRef)}
    exact: set[int] = set()
    for n in syntax.walk(stmt):
        if isinstance(n, c_ast.ArrayRef) and id(n) not in bases:
            base, subs = syntax.flatten_ref(n)
            if [x.name if isinstance(x, c_ast.ID) else None for x in subs] == iterators:
                exact.add(id(base))
    return {n.name for n in syntax.walk(stmt)
            if isinstance(n, c_ast.ID) and n.name in block_arrays and id(n) not in exact}


def _merged(nests: list[_Nest]) -> Any:
    """One loop nest running each fragment's body, in order, in its own scope."""
    first = nests[0]
    inner = c_ast.Compound([c_ast.Compound(syntax.block_items(n.body)) for n in nests])
    node: Any = inner
    for decls, loop in reversed(first.levels):
        loop = c_ast.For(loop.init, loop.cond, loop.next, node)
        node = c_ast.Compound(list(decls) + [loop])
    if first.guard is None:
        return node
    return c_ast.If(first.guard, node, None)


def _scalarize(body: c_ast.Compound, inner: c_ast.Compound, iterators: list[str],
               block_arrays: set[str]) -> list[str]:
    """Block arrays that live only in one merged nest, each element written before it is
    read in the same iteration, become a scalar of the nest's body (``pf_b2[bi][bj]`` ->
    ``pf_b2``), and their array declarations go: the device compiler keeps an array indexed by
    the loops in memory, a scalar in a register.  The write must be the first reference, a
    plain ``=`` statement at the top of its fragment's scope (run on every iteration)."""
    inside = {id(n) for n in syntax.walk(inner)}
    outside: set[str] = set()
    for n in syntax.walk(body):
        if isinstance(n, c_ast.ID) and n.name in block_arrays and id(n) not in inside:
            outside.add(n.name)
    candidates = block_arrays - outside - _irregular(inner, iterators, block_arrays)
    first: dict[str, Any] = {}
    for frag in syntax.block_items(inner):
        for stmt in syntax.block_items(frag):
            for n in syntax.walk(stmt):
                if isinstance(n, c_ast.ID) and n.name in candidates and n.name not in first:
                    first[n.name] = stmt
    done = []
    for name, stmt in first.items():
        if not (isinstance(stmt, c_ast.Assignment) and stmt.op == "=" and
                isinstance(stmt.lvalue, c_ast.ArrayRef) and
                syntax.flatten_ref(stmt.lvalue)[0].name == name and
                name not in syntax.identifiers(stmt.rvalue)):
            continue
        decl = next(d for d in body.block_items if isinstance(d, c_ast.Decl) and d.name == name)
        elem: Any = decl.type
        while isinstance(elem, c_ast.ArrayDecl):
            elem = elem.type
        scalar = c_ast.Decl(name, [], [], [], [], c_ast.TypeDecl(name, [], None, elem.type),
                            c_ast.Constant("int", "0"), None)

        def to_scalar(n: Any, name: str = name) -> Any:
            if isinstance(n, c_ast.ArrayRef):
                base, subs = syntax.flatten_ref(n)
                if isinstance(base, c_ast.ID) and base.name == name and \
                        len(subs) == len(iterators):
                    return c_ast.ID(name)
            return n

        syntax.transform(inner, to_scalar)
        inner.block_items.insert(0, scalar)
        body.block_items.remove(decl)
        done.append(name)
    return done


def fuse_block_loops(body: c_ast.Compound, roots: Mapping[str, str], block_arrays: set[str],
                     comments: dict[int, str]) -> list[str]:
    """Merge runs of consecutive fragments of ``body`` (a fused kernel's body, in place) that
    loop over the same block (module docstring), then keep in registers the block arrays only
    one merged nest uses (:func:`_scalarize`); ``roots`` maps buffer parameters to the
    buffers they are bound to, ``block_arrays`` names the kernel's private block arrays,
    ``comments`` holds the printer's comments by node id.  Returns one line per merged run."""
    printer = OpenCLGenerator()

    def text(node: Any) -> str:
        return printer.visit(node)

    items = body.block_items or []
    merged: list[Any] = []
    run: list[_Nest] = []
    nests: list[tuple[Any, list[str], str]] = []

    def close() -> None:
        if len(run) > 1 and _fusable(run, block_arrays, roots):
            stmt = _merged(run)
            labels = [comments.get(id(n.stmt), "") for n in run]
            nests.append((stmt, run[0].iterators, "; ".join(x for x in labels if x)))
            merged.append(stmt)
        else:
            merged.extend(n.stmt for n in run)
        run.clear()

    run_key: tuple = ()
    for stmt in items:
        nest = _as_nest(stmt)
        key = nest.key(text) if nest is not None else ()
        if nest is not None and run and key == run_key:
            run.append(nest)
            continue
        close()
        if nest is not None:
            run.append(nest)
            run_key = key
        else:
            merged.append(stmt)
    close()
    body.block_items = merged
    out = []
    for stmt, iterators, labels in nests:
        scalars = _scalarize(body, _innermost(stmt, len(iterators)), iterators, block_arrays)
        note = f"block loops fused: {labels}" + (
            f"; {', '.join(sorted(scalars))} kept in registers" if scalars else "")
        comments[id(stmt)] = note
        out.append(note)
    return out


def _innermost(stmt: Any, depth: int) -> c_ast.Compound:
    """The body of the innermost of the ``depth`` loops of a merged nest (:func:`_merged`)."""
    node = stmt.iftrue if isinstance(stmt, c_ast.If) else stmt
    for _ in range(depth):
        node = node.block_items[-1].stmt
    return node


__all__ = ["fuse_block_loops"]
