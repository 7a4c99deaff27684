"""A work-group-uniform guard pushed below the barriers of a fragment it encloses.

A fragment with barriers whose re-indexing domain covers whole work-groups but not every group
of the fused NDRange needs a guard on group ids only.  ``if (group in domain) { ... barrier ...
}`` is legal OpenCL (every work-item of a group takes the same branch), but device compilers
that serialize a work-group into loops around barriers get it wrong: both PoCL builds on the
development machine (LLVM 14 and 15) drop every store of such a fragment when a statement
follows the ``if`` in the kernel, which the fused kernel of a Softmax and the launch after it
always has.  Fusion must not depend on how well a compiler handles divergent-looking barriers,
so the generated code never puts a barrier under a guard:

* every barrier, and the loops, ``if`` s and blocks around barriers (the *skeleton*), runs in
  every work-group;
* each run of barrier-free statements between them runs under the guard;
* a declaration keeps its place (its scope spans later statements); one whose initializer reads
  memory, calls a function or has side effects becomes a declaration and a guarded assignment,
  so a group outside the domain never touches memory it would not have touched before.

A group outside the domain then executes only barriers, skeleton headers and side-effect-free
declarations, the same in every work-item, and the guarded groups compute exactly what they did
under the enclosing ``if``.  The same holds for a guard that leaves some work-items of a group
out (a symbolic global size padded to whole groups) when every skeleton header is the same for
all work-items of a group: the work-items left out only take part in the barriers, as the
missing work-items of a partial group take part in none.  A skeleton header (loop bounds, a
branch on a uniform value) that reads a variable the guarded statements assign, or that reads
memory, would not be uniform in the groups outside the domain: that is refused
(:class:`BarrierGuardError`), never emitted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pycparser import c_ast

from polyfuse.c import printer, syntax
from polyfuse.c.syntax import block_items

_BARRIERS = ("barrier", "work_group_barrier")
_LOOPS = (c_ast.For, c_ast.While, c_ast.DoWhile)
#: built-ins with no side effects whose value is the same for every call in a work-item
_PURE_CALLS = frozenset({"get_global_id", "get_local_id", "get_group_id", "get_global_size",
                         "get_local_size", "get_num_groups", "get_work_dim",
                         "get_global_offset", "min", "max", "clamp", "abs", "mad", "mul24",
                         "mad24", "select"})


class BarrierGuardError(Exception):
    """The guard cannot be pushed below the barriers (the message says why)."""


def _is_barrier_call(node: Any) -> bool:
    return isinstance(node, c_ast.FuncCall) and isinstance(node.name, c_ast.ID) and \
        node.name.name in _BARRIERS


def has_barrier_call(node: Any) -> bool:
    """Whether a barrier call appears anywhere in ``node``."""
    return node is not None and any(_is_barrier_call(n) for n in syntax.walk(node))


def _reads_memory_or_acts(node: Any) -> bool:
    """An expression that dereferences, assigns, increments or calls a non-pure function."""
    for n in syntax.walk(node):
        if isinstance(n, (c_ast.ArrayRef, c_ast.Assignment)):
            return True
        if isinstance(n, c_ast.StructRef) and n.type == "->":
            return True
        if isinstance(n, c_ast.UnaryOp) and n.op in ("*", "++", "--", "p++", "p--"):
            return True
        if isinstance(n, c_ast.FuncCall) and not (
                isinstance(n.name, c_ast.ID) and n.name.name in _PURE_CALLS):
            return True
    return False


def _unqualified(decl_type: Any) -> Any:
    """A copy of a declaration's type without ``const`` on the declared object."""
    t = syntax.clone(decl_type)
    if isinstance(t, c_ast.TypeDecl):
        t.quals = [q for q in t.quals if q != "const"]
    return t


#: work-item functions whose value differs between the work-items of one group
_ITEM_CALLS = frozenset({"get_global_id", "get_local_id"})


class _Pusher:
    def __init__(self, guard: Callable[[], Any], item_dependent: bool):
        self.guard = guard
        self.item_dependent = item_dependent
        #: variables the guarded statements assign or declare-and-assign
        self.guarded_vars: set[str] = set()
        #: variables whose value may differ between the work-items of one group
        self.item_vars: set[str] = set()
        #: (header text, its free variables) of every skeleton header, checked at the end
        self.headers: list[tuple[Any, set[str]]] = []

    def _guarded(self, run: list[Any]) -> Any:
        for s in run:
            self.guarded_vars |= syntax.modified(s)
        return c_ast.If(self.guard(), c_ast.Compound(run), None)

    def _decl(self, d: c_ast.Decl, run: list[Any], out: list[Any]) -> None:
        """Keep the declaration in place; move an initializer with effects under the guard."""
        if d.init is None or not _reads_memory_or_acts(d.init):
            if d.init is not None and syntax.free_ids(d.init) & self.guarded_vars:
                self.guarded_vars.add(d.name)
            if d.init is not None and (syntax.free_ids(d.init) & self.item_vars
                                       or syntax.called(d.init) & _ITEM_CALLS):
                self.item_vars.add(d.name)
            out.append(d)
            return
        if isinstance(d.init, c_ast.InitList) or not isinstance(d.type, c_ast.TypeDecl):
            raise BarrierGuardError(f"the declaration of {d.name} initializes an aggregate "
                                    "from memory between barriers")
        out.append(c_ast.Decl(d.name, [q for q in d.quals if q != "const"], d.align,
                              d.storage, d.funcspec, _unqualified(d.type), None, d.bitsize,
                              d.coord, attributes=d.attributes))
        run.append(c_ast.Assignment("=", c_ast.ID(d.name), d.init, d.coord))

    def items(self, stmts: list[Any]) -> list[Any]:
        out: list[Any] = []
        run: list[Any] = []

        def flush() -> None:
            if run:
                out.append(self._guarded(list(run)))
                run.clear()

        for s in stmts:
            if isinstance(s, c_ast.DeclList):
                for d in s.decls:
                    flush()
                    self._decl(d, run, out)
                continue
            if isinstance(s, c_ast.Decl):
                flush()
                self._decl(s, run, out)
                continue
            if not has_barrier_call(s):
                run.append(s)
                continue
            flush()
            out.append(self._skeleton(s))
        flush()
        return out

    def _header(self, h: Any) -> None:
        if h is None:
            return
        if has_barrier_call(h):
            raise BarrierGuardError("a barrier in a loop or branch header")
        self.headers.append((h, syntax.free_ids(h)))

    def _skeleton(self, s: Any) -> Any:
        if _is_barrier_call(s):
            if any(has_barrier_call(c) for _, c in s.children()):
                raise BarrierGuardError("a barrier call inside a barrier call")
            return s
        if isinstance(s, c_ast.Compound):
            return c_ast.Compound(self.items(block_items(s)), s.coord)
        if isinstance(s, c_ast.If):
            self._header(s.cond)
            return c_ast.If(s.cond, c_ast.Compound(self.items(block_items(s.iftrue))),
                            None if s.iffalse is None else
                            c_ast.Compound(self.items(block_items(s.iffalse))), s.coord)
        if isinstance(s, c_ast.For):
            for h in (s.init, s.cond, s.next):
                self._header(h)
            return c_ast.For(s.init, s.cond, s.next,
                             c_ast.Compound(self.items(block_items(s.stmt))), s.coord)
        if isinstance(s, (c_ast.While, c_ast.DoWhile)):
            self._header(s.cond)
            return type(s)(s.cond, c_ast.Compound(self.items(block_items(s.stmt))), s.coord)
        raise BarrierGuardError(f"a barrier inside a {type(s).__name__} statement")

    def check_headers(self) -> None:
        for h, free in self.headers:
            if isinstance(h, c_ast.DeclList):
                inits = [d.init for d in h.decls if d.init is not None]
            else:
                inits = [h]
            if any(_reads_memory_or_acts(x) for x in inits if not _is_loop_step(h, x)):
                raise BarrierGuardError(f"the header '{printer.opencl_source(h)}' around a barrier "
                                        "reads memory or calls a function")
            bad = free & self.guarded_vars
            if bad:
                raise BarrierGuardError(f"the header '{printer.opencl_source(h)}' around a "
                                        "barrier uses "
                                        f"{sorted(bad)[0]}, which only the guarded statements "
                                        "compute")
            if self.item_dependent and (free & self.item_vars or syntax.called(h) & _ITEM_CALLS):
                raise BarrierGuardError(f"the header '{printer.opencl_source(h)}' around a barrier "
                                        "depends on the work-item, and the guard leaves some "
                                        "work-items of a group out")


def _is_loop_step(header: Any, expr: Any) -> bool:
    """``k++``/``k += c``: a loop's own step assigns its variable, which is not an effect."""
    if isinstance(expr, c_ast.UnaryOp) and expr.op in ("++", "--", "p++", "p--"):
        return isinstance(expr.expr, c_ast.ID) and not _reads_memory_or_acts(expr.expr)
    if isinstance(expr, c_ast.Assignment):
        return isinstance(expr.lvalue, c_ast.ID) and not _reads_memory_or_acts(expr.rvalue)
    return False


def push_guard_below_barriers(items: list[Any], guard: Callable[[], Any], *,
                              item_dependent: bool = False) -> list[Any]:
    """``items`` (a fragment's statements, barriers among them) with ``guard()`` — a fresh copy
    of the fragment's condition — around each barrier-free run instead of around the whole
    (module doc).  ``item_dependent``: the guard also tests local or global ids (a domain that
    covers only part of some work-groups, as a symbolic global size padded to whole groups
    gives); then every header around a barrier must also be the same for all work-items of a
    group (no local or global id, directly or through a variable), since the work-items the
    guard leaves out run the barriers too.  Raises :class:`BarrierGuardError`."""
    if not any(has_barrier_call(s) for s in items):
        raise BarrierGuardError("the barriers are in a called function")
    pusher = _Pusher(guard, item_dependent)
    out = pusher.items(items)
    pusher.check_headers()
    return out
