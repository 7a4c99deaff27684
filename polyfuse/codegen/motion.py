"""Code motion so that independent fragments share barriers (SIRIUS; docs/fusion.md).

After redundant-barrier removal the fused UAR splits into components with no dependence between
them; code motion lets them share one set of barriers: ``(S1 → P0 → S2 → S3)`` and
``(S1' → P0' → S2')`` become ``({S1, S1'} → P0' → {S2, S2'} → S3)``.  Here, in a vertically
fused group (fragments run in sequence in every work-item), fragments that

* have barriers (merging buys nothing otherwise) and no ``return`` in the original kernel,
* are independent: no UAR edge of any kind between their launches (when the plan has a UAR),
  no root buffer that one writes and the other accesses (always checked, conservatively: a
  non-``const`` pointer the model never sees accessed counts as written), and no shared
  ``__local`` array (each fragment has its own hoisted tiles),
* run on the same work-items: equal re-indexing maps (up to the launch's tuple name), hence the
  same guard and the same substituted work-item functions,
* have the same *skeleton*: the statements that contain barriers (barrier calls, and the loops,
  ``if`` s and blocks around them) at the same positions with textually identical headers after
  renaming and constant propagation; a header may only use its own or enclosing skeleton loops'
  variables, the fused kernel's symbolic scalars (``pf_*``), literals and work-item or pure
  built-in functions, so it evaluates the same in every fragment,

are emitted as **one** body: the common skeleton is walked once, each barrier is emitted once,
and between two skeleton statements every fragment's barrier-free statements ("leaves") are
emitted in fragment order.  Each fragment's private variables are renamed ``f<k>_<name>`` so
they coexist; skeleton loop variables are shared and must not be assigned by the leaves, and a
leaf must not ``break``/``continue`` out of a skeleton loop.  This is legal because barriers
only order the work-items of a group, the fragments are independent, and every fragment's own
statements keep their per-work-item order and their barriers.

Moving a later fragment ``j`` up to the first one ``i`` crosses the fragments in between: ``j``
must be independent of each of them, must not carry ``barrier_before`` itself, and when a
crossed fragment carries ``barrier_before`` (which may be the barrier ordering an earlier block
edge into ``j``), ``j`` must be independent of every fragment before ``i`` too.  Anything not
covered keeps today's sequential fragments.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import islpy as isl
from pycparser import c_ast

from polyfuse.c import printer, syntax
from polyfuse.c.syntax import block_items as _items
from polyfuse.codegen.decisions import KeptApart
from polyfuse.core.program import WORK_ITEM_FUNCTIONS, Launch, Program
from polyfuse.fusion.plan import Fragment

_BARRIERS = ("barrier", "work_group_barrier")
#: calls allowed in a shared skeleton header (no side effects, same value in every fragment)
_PURE_CALLS = frozenset(WORK_ITEM_FUNCTIONS) | {"min", "max", "clamp", "abs", "mad", "mul24",
                                                 "mad24", "select"}
_LOOPS = (c_ast.For, c_ast.While, c_ast.DoWhile)


@dataclass
class FragCode:
    """A fragment as :func:`~polyfuse.codegen.fuse._assemble_group` holds it."""

    k: int  # 1-based position in the group
    frag: Fragment
    dom: isl.Set
    items: list[Any]
    has_barrier: bool


@dataclass
class Merged:
    """Fragments emitted as one body (``items``), in place of the first of them."""

    members: list[FragCode]
    items: list[Any]
    barriers: int  # barrier statements in the shared skeleton
    saved: int  # barrier statements no longer emitted


# ----------------------------------------------------------------------------------------------
# Syntax helpers
# ----------------------------------------------------------------------------------------------


def _is_barrier_call(n: Any) -> bool:
    return isinstance(n, c_ast.FuncCall) and isinstance(n.name, c_ast.ID) and \
        n.name.name in _BARRIERS


def _has_barrier(node: Any) -> bool:
    return node is not None and any(_is_barrier_call(n) for n in syntax.walk(node))


def _text(node: Any) -> str:
    return "" if node is None else printer.opencl_source(node)


def _escapes(stmt: Any, in_loop: bool = False, in_switch: bool = False) -> bool:
    """``break``/``continue``/``goto``/``return``/labels that leave ``stmt`` (a leaf)."""
    if isinstance(stmt, (c_ast.Goto, c_ast.Label, c_ast.Return)):
        return True
    if isinstance(stmt, c_ast.Break):
        return not (in_loop or in_switch)
    if isinstance(stmt, c_ast.Continue):
        return not in_loop
    loop = in_loop or isinstance(stmt, _LOOPS)
    switch = in_switch or isinstance(stmt, c_ast.Switch)
    return any(_escapes(c, loop, switch) for _, c in stmt.children())


def _header_decls(node: Any) -> set[str]:
    if isinstance(node, c_ast.For) and node.init is not None:
        return {n.name for n in syntax.walk(node.init) if isinstance(n, c_ast.Decl) and n.name}
    return set()


def _headers(node: Any) -> list[Any]:
    if isinstance(node, c_ast.For):
        return [node.init, node.cond, node.next]
    if isinstance(node, (c_ast.While, c_ast.DoWhile, c_ast.If)):
        return [node.cond]
    return []


# ----------------------------------------------------------------------------------------------
# Skeletons
# ----------------------------------------------------------------------------------------------


class _NotMergeable(Exception):
    pass


def _skeleton(items: list[Any], scope: frozenset[str], shared: frozenset[str],
              header_vars: set[str]) -> list[Any]:
    """A comparable description of the barrier-carrying structure of ``items``.

    ``scope``: skeleton loop variables visible here; ``shared``: other names a header may use.
    ``header_vars`` collects every skeleton loop variable.  Raises :class:`_NotMergeable`.
    """
    out: list[Any] = []
    leaf_run = False
    for s in items:
        if not _has_barrier(s):
            if _escapes(s):
                raise _NotMergeable("a statement jumps out of the shared structure")
            if not leaf_run:
                out.append("leaves")
                leaf_run = True
            continue
        leaf_run = False
        if isinstance(s, c_ast.FuncCall) and _is_barrier_call(s):
            if any(_has_barrier(c) for _, c in s.children()):
                raise _NotMergeable("nested barrier call")
            out.append(("barrier", _text(s)))
            continue
        if isinstance(s, c_ast.Compound):
            out.append(("block", _skeleton(_items(s), scope, shared, header_vars)))
            continue
        if not isinstance(s, (c_ast.For, c_ast.While, c_ast.DoWhile, c_ast.If)):
            raise _NotMergeable(f"a barrier inside a {type(s).__name__}")
        own = _header_decls(s)
        header_vars |= own
        inner = scope | own
        for h in _headers(s):
            if h is None:
                continue
            if _has_barrier(h):
                raise _NotMergeable("a barrier in a loop or branch header")
            bad = syntax.free_ids(h) - inner - shared
            if bad:
                raise _NotMergeable(f"a header uses {sorted(bad)[0]}, which may differ between "
                                    "fragments")
            calls = syntax.called(h) - _PURE_CALLS
            if calls:
                raise _NotMergeable(f"a header calls {sorted(calls)[0]}()")
        heads = tuple(_text(h) for h in _headers(s))
        if isinstance(s, c_ast.If):
            out.append(("if", heads, _skeleton(_items(s.iftrue), inner, shared, header_vars),
                        None if s.iffalse is None else
                        _skeleton(_items(s.iffalse), inner, shared, header_vars)))
        else:
            out.append((type(s).__name__, heads,
                        _skeleton(_items(s.stmt), inner, shared, header_vars)))
    return out


def _leaves(items: list[Any]) -> list[Any]:
    """Every barrier-free statement that sits directly in the skeleton (not inside a leaf)."""
    out: list[Any] = []
    for s in items:
        if not _has_barrier(s):
            out.append(s)
        elif isinstance(s, c_ast.Compound):
            out += _leaves(_items(s))
        elif isinstance(s, c_ast.If):
            out += _leaves(_items(s.iftrue)) + _leaves(_items(s.iffalse))
        elif isinstance(s, _LOOPS):
            out += _leaves(_items(s.stmt))
    return out


def _prepare(fc: FragCode, shared: frozenset[str]) -> tuple[list[Any], Any]:
    """A renamed copy of the fragment's statements and its skeleton (or _NotMergeable)."""
    items = syntax.clone(fc.items)
    header_vars: set[str] = set()
    _skeleton(items, frozenset(), shared, header_vars)
    leaves = _leaves(items)
    leaf_decls: set[str] = set()
    for s in leaves:
        leaf_decls |= syntax.declared(s)
    both = header_vars & leaf_decls
    if both:
        raise _NotMergeable(f"{sorted(both)[0]} is both a shared loop variable and a private")
    for s in leaves:
        for v in header_vars:
            if v in syntax.modified(s):
                raise _NotMergeable(f"the shared loop variable {v} is assigned in the body")
    prefix = f"f{fc.k}_"
    rename = {n: prefix + n for n in leaf_decls if not n.startswith(prefix)}
    block = c_ast.Compound(items)
    syntax.rename(block, rename)
    items = list(block.block_items or [])
    return items, _skeleton(items, frozenset(), shared, set())


def _merge(bodies: list[list[Any]]) -> list[Any]:
    """One statement list for skeleton-identical ``bodies`` (leaves of each, barriers once)."""
    split = []
    for body in bodies:
        segs: list[Any] = []  # list of (leaf list) or skeleton statement
        for s in body:
            if _has_barrier(s):
                segs.append(s)
            else:
                if not segs or not isinstance(segs[-1], list):
                    segs.append([])
                segs[-1].append(s)
        split.append(segs)
    out: list[Any] = []
    for pos, head in enumerate(split[0]):
        if isinstance(head, list):
            for segs in split:
                out += segs[pos]
            continue
        others = [segs[pos] for segs in split]
        if _is_barrier_call(head):
            out.append(head)
        elif isinstance(head, c_ast.Compound):
            out.append(c_ast.Compound(_merge([_items(o) for o in others]), head.coord))
        elif isinstance(head, c_ast.If):
            t = c_ast.Compound(_merge([_items(o.iftrue) for o in others]))
            e = None if head.iffalse is None else c_ast.Compound(
                _merge([_items(o.iffalse) for o in others]))
            out.append(c_ast.If(head.cond, t, e, head.coord))
        else:
            node = copy.copy(head)
            node.stmt = c_ast.Compound(_merge([_items(o.stmt) for o in others]))
            out.append(node)
    return out


def _count_barriers(items: list[Any]) -> int:
    return sum(1 for s in items for n in syntax.walk(s) if _is_barrier_call(n))


# ----------------------------------------------------------------------------------------------
# Independence
# ----------------------------------------------------------------------------------------------


def _footprint(program: Program, launch_id: int) -> tuple[set[str], set[str]]:
    """Root buffers a launch may read and may write (conservative)."""
    launch = program.op(launch_id)
    assert isinstance(launch, Launch)
    kernel = program.kernels[launch.kernel]
    seen = {a.array for a in kernel.accesses}
    written = {a.array for a in kernel.accesses if a.direction == "write"}
    reads: set[str] = set()
    writes: set[str] = set()
    for p in kernel.params:
        if not p.pointer:
            continue
        try:
            b = launch.arg(p.index)
        except KeyError:
            continue
        if b.kind != "buffer" or b.buffer is None:
            continue
        root = program.root(b.buffer)[0]
        reads.add(root)
        if p.name in written or (not p.const and p.name not in seen):
            writes.add(root)
    return reads, writes


class _Deps:
    def __init__(self, program: Program, uar: Any):
        self.program = program
        self.edges: set[frozenset[int]] = set()
        if uar is not None:
            for e in getattr(uar, "edges", ()):
                if not e.host:
                    self.edges.add(frozenset((e.src, e.dst)))
        self.fp: dict[int, tuple[set[str], set[str]]] = {}

    def dependent(self, a: int, b: int) -> bool:
        if a == b:
            return False
        if frozenset((a, b)) in self.edges:
            return True
        for x in (a, b):
            if x not in self.fp:
                self.fp[x] = _footprint(self.program, x)
        ra, wa = self.fp[a]
        rb, wb = self.fp[b]
        return bool(wa & (rb | wb) or wb & ra)


# ----------------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------------


def _same_work_items(a: FragCode, b: FragCode) -> bool:
    try:
        ma = a.frag.reindex.reset_tuple_id(isl.dim_type.out)
        mb = b.frag.reindex.reset_tuple_id(isl.dim_type.out)
        ma, mb = ma.align_params(mb.get_space()), mb.align_params(ma.get_space())
        da = a.dom.align_params(b.dom.get_space())
        return ma.is_equal(mb) and da.is_equal(b.dom.align_params(da.get_space()))
    except isl.Error:
        return False


def share_barriers(frags: Sequence[FragCode], program: Program, uar: Any,
                   shared_names: frozenset[str]) -> tuple[list[Any], list[KeptApart]]:
    """The group's fragments with independent, skeleton-identical ones merged (module doc).

    Returns the new sequence (:class:`FragCode` or :class:`Merged`, in emission order) and one
    note per fragment that was considered but kept apart.
    """
    deps = _Deps(program, uar)
    notes: list[KeptApart] = []
    prepared: dict[int, tuple[list[Any], Any]] = {}
    for i, fc in enumerate(frags):
        if not fc.has_barrier:
            continue
        kernel = program.kernels[program.op(fc.frag.launch).kernel]
        if kernel.ast is not None and any(isinstance(n, c_ast.Return)
                                          for n in syntax.walk(kernel.ast.body)):
            notes.append(KeptApart(fc.k, "early return"))
            continue
        try:
            prepared[i] = _prepare(fc, shared_names)
        except _NotMergeable as why:
            notes.append(KeptApart(fc.k, str(why)))
    taken: set[int] = set()
    sets: dict[int, list[int]] = {}
    for i in sorted(prepared):
        if i in taken:
            continue
        members = [i]
        for j in range(i + 1, len(frags)):
            if j in taken or j not in prepared or prepared[j][1] != prepared[i][1]:
                continue
            fj = frags[j]
            if fj.frag.barrier_before or not _same_work_items(frags[i], fj):
                continue
            lid = fj.frag.launch
            if any(deps.dependent(frags[m].frag.launch, lid) for m in range(i, j)):
                continue
            if any(frags[m].frag.barrier_before for m in range(i + 1, j)) and any(
                    deps.dependent(frags[e].frag.launch, lid) for e in range(i)):
                continue
            members.append(j)
        if len(members) > 1:
            sets[i] = members
            taken.update(members)
    out: list[Any] = []
    for i, fc in enumerate(frags):
        if i in sets:
            ms = sets[i]
            items = _merge([prepared[m][0] for m in ms])
            nb = _count_barriers(items)
            before = sum(_count_barriers(prepared[m][0]) for m in ms)
            out.append(Merged([frags[m] for m in ms], items, nb, before - nb))
        elif i not in taken:
            out.append(fc)
    return out, notes
